//! The embedded runner: a deploy of one stack run in-process, each phase on the scheduler
//! (a resource starts as soon as its own dependencies are done, at most `concurrency` at
//! once), with progress and results gathered by the one phase loop, [`run_phase`].

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use indexmap::IndexMap;
use stackflow_events::EventStore;
use stackflow_events::event::ErrorInfo;

use crate::deploy::{Cleanup, Deployment, cleanup_subject};
use stackflow_providers::throttle;

use crate::engine::{DeployOptions, Engine, EngineError};
use crate::nested::NESTED_STACK_TYPE;
use crate::progress::ProgressEvent;
use crate::report::{Done, Failure, Handled, StackReport, StackStatus};
use crate::schedule::{self, Outcome, Task, TaskStatus};
use crate::stack::StackInput;
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

/// The subjects and tasks of a set of cleanup items, for [`run_phase`].
pub(crate) fn cleanup_items(items: &[Cleanup]) -> Arc<IndexMap<String, Cleanup>> {
    Arc::new(items.iter().map(|c| (c.task_id(), c.clone())).collect())
}

/// The subject of a cleanup item.
pub(crate) fn cleanup_of<S: EventStore>(
    rec: &crate::recorder::Recorder<S>,
    item: &Cleanup,
) -> Subject {
    let (logical_id, resource_type) = cleanup_subject(&rec.state(), item);
    Subject {
        logical_id,
        resource_type,
        action: "delete".into(),
    }
}

/// Deploys one stack with the embedded runner: plan, provision (each resource as soon
/// as its own dependencies are done, at most `concurrency` at once), cleanup, finish; on
/// failure, record it and roll back unless told not to.
pub async fn deploy_stack<S: EventStore + 'static>(
    engine: Arc<Engine<S>>,
    input: StackInput,
    options: DeployOptions,
) -> Result<StackReport, EngineError> {
    let started = Instant::now();
    let (lease_lost, options) = crate::lease::stoppable(options);
    let (deployment, mut report) = Deployment::begin(engine.clone(), input, options).await?;
    let Some(d) = deployment else {
        report.seconds = started.elapsed().as_secs_f64();
        return Ok(report);
    };
    let d = Arc::new(d);
    let keeper = crate::lease::keep(
        &engine,
        d.recorder.stream().clone(),
        d.deploy_id.clone(),
        lease_lost,
    );
    let tally = Tally::default();
    let cleaned = run_phases(&engine, &d, &tally).await;
    if keeper.as_ref().is_some_and(crate::lease::Keeper::lost) {
        return Err(crate::lease::lost_error(d.stack()));
    }
    let stopped_by_user = d.options.stopped();
    // The baseline reads still running are throttled into the same tally: they end
    // before it is recorded, or the event would miss what they met. What they read is
    // appended with the run's last write (or, when it fails, before the failure).
    d.observations.close().await;
    tally
        .throttles
        .record(&d.recorder, &d.deploy_id, &d.holds())
        .await?;
    tally.into_report(&mut report)?;
    if cleaned && !report.failures.is_empty() {
        // A failure during cleanup cannot be undone (a replaced resource's old copy may
        // be gone already): the deploy is done, and what is left to delete stays in the
        // state for the next deploy or destroy to finish.
        if finish_or_fail(&d, &mut report).await? {
            report.status = StackStatus::Partial;
        }
        report.seconds = started.elapsed().as_secs_f64();
        return Ok(report);
    }
    conclude(&d, &mut report, stopped_by_user).await?;
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// The deploy's phases on the scheduler: provision, then (when every resource is done
/// and nothing stopped it) cleanup: deletes of removed resources and replaced
/// predecessors. True when cleanup ran.
async fn run_phases<S: EventStore + 'static>(
    engine: &Arc<Engine<S>>,
    d: &Arc<Deployment<S>>,
    tally: &Tally,
) -> bool {
    let tasks = d.provision_tasks();
    let planned_cleanups = d.planned_cleanups();
    engine.progress.report(ProgressEvent::StackStarted {
        stack: d.stack(),
        operation: "deploy",
        total: tasks.len() + planned_cleanups,
    });
    let provisioned = run_phase(
        engine,
        d.stack(),
        &tasks,
        &d.options,
        tally,
        |id| {
            let rp = d.plan.resource(id);
            Subject {
                logical_id: id.to_string(),
                resource_type: rp.map(|r| r.resource_type.clone()).unwrap_or_default(),
                action: rp
                    .map(|r| r.action.as_str())
                    .unwrap_or_default()
                    .to_string(),
            }
        },
        |id| {
            let d = d.clone();
            async move { d.provision(&id).await }
        },
    )
    .await;
    let cleaned = provisioned.all_succeeded() && !tally.has_fatal() && !d.options.stopped();
    if cleaned {
        let (items, cleanup_tasks) = d.cleanup_tasks();
        let by_id = cleanup_items(&items);
        run_phase(
            engine,
            d.stack(),
            &cleanup_tasks,
            &d.options,
            tally,
            |id| cleanup_of(&d.recorder, &by_id[id]),
            |id| {
                let (d, item) = (d.clone(), by_id[&id].clone());
                async move { d.cleanup(&item).await }
            },
        )
        .await;
    }
    cleaned
}

/// Finishes the deploy (true), or fails it when its outputs cannot be resolved (an
/// `Fn::GetAtt` of an attribute the provider did not return), as CloudFormation fails such
/// a stack: the failure recorded, what the deploy did rolled back unless told not to, the
/// lock released (false; the report says failed). A store error is the caller's.
async fn finish_or_fail<S: EventStore + 'static>(
    d: &Deployment<S>,
    report: &mut StackReport,
) -> Result<bool, EngineError> {
    let e = match d.outputs() {
        Err(EngineError::Template(e)) => e,
        Err(other) => return Err(other),
        Ok(resolved) => {
            report.outputs = d.finish_with(resolved).await?;
            return Ok(true);
        }
    };
    let output = e
        .path
        .split(".Value")
        .next()
        .and_then(|p| p.split(".Export").next())
        .unwrap_or(&e.path)
        .to_string();
    let failure = Failure {
        logical_id: output,
        resource_type: "output".into(),
        action: "resolve".into(),
        error: d.plain().info("InvalidTemplate", &e.to_string()),
    };
    report.failures.push(failure.clone());
    report.rollback = d
        .fail(Some(&failure), "failed", !d.options.no_rollback)
        .await?;
    report.status = StackStatus::Failed;
    Ok(false)
}

/// The end of a deploy: finished when nothing failed, else failed (and rolled back
/// unless told not to; a deploy the user stopped is not rolled back: what it did stays
/// recorded, for `stackflow rollback` or the next deploy).
async fn conclude<S: EventStore + 'static>(
    d: &Deployment<S>,
    report: &mut StackReport,
    stopped_by_user: bool,
) -> Result<(), EngineError> {
    if report.failures.is_empty() && !stopped_by_user {
        if finish_or_fail(d, report).await? {
            report.status = if report.skipped.is_empty() {
                StackStatus::Succeeded
            } else {
                StackStatus::Partial
            };
        }
        return Ok(());
    }
    let first = report.failures.first().cloned();
    let why = if stopped_by_user {
        "stopped by the user"
    } else {
        "failed"
    };
    report.rollback = d.fail(first.as_ref(), why, !stopped_by_user).await?;
    report.status = if stopped_by_user {
        StackStatus::Interrupted
    } else {
        StackStatus::Failed
    };
    Ok(())
}
