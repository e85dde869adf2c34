//! One phase of a run on the scheduler: its tasks start as soon as their own dependencies
//! are done (at most `concurrency` at once, and when the services they call have room),
//! with a progress line as each starts and ends, and their results gathered in a [`Tally`].
//! The deploy's provision and cleanup, a destroy and a rollback each run through
//! [`run_phase`].

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use stackflow_events::EventStore;
use stackflow_events::event::ErrorInfo;
use stackflow_providers::throttle;

use crate::engine::{DeployOptions, Engine, EngineError};
use crate::keys::NESTED_STACK_TYPE;
use crate::progress::ProgressEvent;
use crate::report::{Done, Failure, Handled, StackReport};
use crate::schedule::{self, Outcome, Task, TaskStatus};
use crate::throttling::{ServiceGate, Throttles};

/// What a task is about, for progress lines and reports.
#[derive(Debug, Clone)]
pub(crate) struct Subject {
    pub logical_id: String,
    pub resource_type: String,
    pub action: String,
}

/// One task's logical id and outcome.
pub(crate) type TaskResult = (String, Result<Done, Failure>);

#[derive(Default)]
struct TallyInner {
    results: Vec<TaskResult>,
    fatal: Option<EngineError>,
    started: HashMap<String, Subject>,
}

/// What the tasks of a run did, collected as they finish.
#[derive(Clone, Default)]
pub(crate) struct Tally {
    inner: Arc<Mutex<TallyInner>>,
    /// The throttled calls of the run's tasks.
    pub throttles: Throttles,
}

impl Tally {
    fn lock(&self) -> MutexGuard<'_, TallyInner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// True when a task could not go on (a store failure): the run ends with it.
    pub fn has_fatal(&self) -> bool {
        self.lock().fatal.is_some()
    }

    /// Records one task's end, reports it, and tells the scheduler.
    fn finish<S>(
        &self,
        engine: &Engine<S>,
        stack: &str,
        subject: &Subject,
        seconds: f64,
        outcome: Handled,
    ) -> Outcome {
        let (word, detail) = match &outcome {
            Ok(Ok(done)) => (
                done.word(),
                match done {
                    Done::Retained(why) | Done::Skipped(why) => Some(why.clone()),
                    _ => None,
                },
            ),
            Ok(Err(f)) => (
                "failed",
                Some(format!("{}: {}", f.error.name, f.error.message)),
            ),
            Err(e) => ("failed", Some(e.to_string())),
        };
        engine.progress.report(ProgressEvent::ResourceFinished {
            stack,
            logical_id: &subject.logical_id,
            resource_type: &subject.resource_type,
            outcome: word,
            seconds,
            detail: detail.as_deref(),
        });
        let mut inner = self.lock();
        match outcome {
            Ok(r) => {
                let failed = r.as_ref().err().map(|f| f.error.message.clone());
                inner.results.push((subject.logical_id.clone(), r));
                failed.map_or(Outcome::Succeeded, Outcome::Failed)
            }
            Err(e) => {
                let m = e.to_string();
                inner.fatal.get_or_insert(e);
                Outcome::Failed(m)
            }
        }
    }

    /// A task the scheduler ended without a result of its handler (it panicked or was
    /// cancelled) failed: it is recorded as a failure, so the run never ends as done.
    fn settle_lost(&self, report: &schedule::Report) {
        let mut inner = self.lock();
        for (id, status) in &report.statuses {
            let TaskStatus::Failed(why) = status else {
                continue;
            };
            let Some(subject) = inner.started.get(id).cloned() else {
                continue;
            };
            let recorded = inner.results.iter().any(|(l, _)| *l == subject.logical_id)
                || inner.fatal.is_some();
            if !recorded {
                inner.results.push((
                    subject.logical_id.clone(),
                    Err(Failure {
                        logical_id: subject.logical_id,
                        resource_type: subject.resource_type,
                        action: subject.action,
                        error: ErrorInfo {
                            name: "TaskLost".into(),
                            message: why.clone(),
                        },
                    }),
                ));
            }
        }
    }

    /// What the tasks did, as (logical id, outcome); a fatal error ends the run with it.
    pub fn into_results(self) -> Result<Vec<TaskResult>, EngineError> {
        let mut inner = self.lock();
        if let Some(e) = inner.fatal.take() {
            return Err(e);
        }
        Ok(std::mem::take(&mut inner.results))
    }

    /// Adds what the tasks did to `report`; a fatal error ends the run with it.
    pub fn into_report(self, report: &mut StackReport) -> Result<(), EngineError> {
        report.tally(&self.into_results()?);
        Ok(())
    }
}

/// Runs one phase: `tasks` on the scheduler, each through `handle`, with a progress line
/// when it starts and when it ends, and its result in `tally`. A task starts when the
/// services it calls have room ([`ServiceGate`]), and its calls' throttling answers
/// adapt those services' limits.
pub(crate) async fn run_phase<S, G, F, Fut>(
    engine: &Arc<Engine<S>>,
    stack: &str,
    tasks: &[Task],
    options: &DeployOptions,
    tally: &Tally,
    subject: G,
    handle: F,
) -> schedule::Report
where
    S: EventStore + 'static,
    G: Fn(&str) -> Subject,
    F: Fn(String) -> Fut,
    Fut: Future<Output = Handled> + Send + 'static,
{
    let subjects: HashMap<String, Subject> = tasks
        .iter()
        .map(|t| (t.id.clone(), subject(&t.id)))
        .collect();
    let services = subjects
        .iter()
        .map(|(id, s)| (id.clone(), services_of(engine, &s.resource_type)))
        .collect();
    let gate = ServiceGate::new(
        options,
        services,
        tally.throttles.clone(),
        engine.progress.clone(),
        stack,
    );
    let report = schedule::run_gated(
        tasks,
        options.concurrency,
        &gate,
        options.stop.clone(),
        |id: String| {
            let subject = subjects.get(&id).cloned().unwrap_or_else(|| subject(&id));
            engine.progress.report(ProgressEvent::ResourceStarted {
                stack,
                logical_id: &subject.logical_id,
                resource_type: &subject.resource_type,
                action: &subject.action,
            });
            tally.lock().started.insert(id.clone(), subject.clone());
            let work = throttle::observed(gate.sink(&id), handle(id));
            let (engine, tally, stack) = (engine.clone(), tally.clone(), stack.to_string());
            async move {
                let t = Instant::now();
                let outcome = work.await;
                tally.finish(
                    &engine,
                    &stack,
                    &subject,
                    t.elapsed().as_secs_f64(),
                    outcome,
                )
            }
        },
    )
    .await;
    tally.settle_lost(&report);
    report
}

/// The AWS services an action on a resource of `resource_type` calls (none for a nested
/// stack: its own resources' actions are limited in its run).
fn services_of<S>(engine: &Engine<S>, resource_type: &str) -> Vec<String> {
    if resource_type == NESTED_STACK_TYPE {
        return Vec::new();
    }
    engine.providers.services(resource_type)
}
