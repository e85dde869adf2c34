//! Rollback: the journal of a failed deploy undone, last entry first. A created resource
//! is deleted, an updated one gets its previous properties back, a replacement's new
//! resource is deleted and the old one stays. Run by a failed deploy itself, or later by
//! `stackflow rollback`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{Map, Value};
use stackflow_core::template::Policy;
use stackflow_events::event::{ErrorInfo, Event, ProviderKind};
use stackflow_events::projection::{JournalEntry, JournalStep, PendingIntent, StackState};
use stackflow_events::{EventStore, Precondition};

use stackflow_providers::router::Router as _;

use crate::engine::{DeployOptions, Engine, EngineError, NestedContext};
use crate::keys::{Phase, RunEvent, new_id, run_key};
use crate::phase::{Subject, Tally, run_phase};
use crate::progress::ProgressEvent;
use crate::reconcile::reconcile_one;
use crate::recorder::Recorder;
use crate::report::{Done, Failure, RollbackReport, StackReport, StackStatus, Undone};
use crate::schedule::Task;
use crate::secrets::{Masker, Resolved, masked_at, resolve_dynamic};
use crate::step::{Answer, Intent, Step, StepKind};

/// A rollback of a failed deploy's journal.
pub struct Rollback<S> {
    pub(crate) engine: Arc<Engine<S>>,
    pub(crate) stack: String,
    pub(crate) rollback_id: String,
    /// The run that holds the lock while the rollback runs.
    pub(crate) lock_id: String,
    /// The deploy whose journal is undone.
    pub(crate) deploy_id: String,
    pub(crate) recorder: Arc<Recorder<S>>,
    /// The concurrency and the services' limits the undos run under (a failed deploy's
    /// own, so what its throttling taught carries over).
    pub(crate) options: DeployOptions,
}

impl<S> Clone for Rollback<S> {
    fn clone(&self) -> Self {
        Rollback {
            engine: self.engine.clone(),
            stack: self.stack.clone(),
            rollback_id: self.rollback_id.clone(),
            lock_id: self.lock_id.clone(),
            deploy_id: self.deploy_id.clone(),
            recorder: self.recorder.clone(),
            options: self.options.clone(),
        }
    }
}

/// A rollback that owns its recorder (the `rollback` command).
pub struct OwnedRollback<S> {
    engine: Arc<Engine<S>>,
    stack: String,
    rollback_id: String,
    deploy_id: Option<String>,
    recorder: Arc<Recorder<S>>,
}

/// What undoing one entry means.
struct Undo {
    /// The resource acted on.
    physical_id: String,
    resource_type: String,
    provider: ProviderKind,
    /// The properties the delete is sent with (a custom resource's handler needs its
    /// `ServiceToken`), or the update is sent from.
    current: Option<Map<String, Value>>,
    /// `Some`: restore these properties; `None`: delete.
    restore: Option<Map<String, Value>>,
}

impl Undo {
    fn of<S: EventStore>(entry: &JournalEntry, rec: &Recorder<S>) -> Undo {
        let current = rec
            .state()
            .resources
            .get(&entry.logical_id)
            .map(|r| r.properties.clone());
        match &entry.step {
            JournalStep::Created {
                physical_id,
                resource_type,
                provider,
                properties,
            } => Undo {
                physical_id: physical_id.clone(),
                resource_type: resource_type.clone(),
                provider: *provider,
                current: Some(properties.clone()),
                restore: None,
            },
            JournalStep::Replaced {
                new_physical_id,
                resource_type,
                provider,
                ..
            } => Undo {
                physical_id: new_physical_id.clone(),
                resource_type: resource_type.clone(),
                provider: *provider,
                current,
                restore: None,
            },
            JournalStep::Updated {
                physical_id,
                previous,
            } => Undo {
                physical_id: physical_id.clone(),
                resource_type: previous.resource_type.clone(),
                provider: previous.provider,
                current,
                restore: Some(previous.properties.clone()),
            },
        }
    }
}

impl<S: EventStore + 'static> Rollback<S> {
    /// Undoes every entry not undone yet and records the end. Entries are undone as the
    /// deploy's own dependencies allow, in reverse ([`undo_tasks`]): at most the options'
    /// concurrency at once, under the services' limits, like the deploy itself.
    pub(crate) async fn undo_all(&self) -> Result<RollbackReport, EngineError> {
        let pre = Precondition::HoldsLock(self.lock_id.clone());
        self.recorder
            .append(
                run_key(&self.rollback_id, RunEvent::Started),
                Event::RollbackStarted {
                    deploy_id: self.deploy_id.clone(),
                    rollback_id: self.rollback_id.clone(),
                },
                &pre,
            )
            .await?;
        let entries: Vec<JournalEntry> = self.recorder.state().journal.to_undo().cloned().collect();
        self.engine.progress.report(ProgressEvent::StackStarted {
            stack: &self.stack,
            operation: "rollback",
            total: entries.len(),
        });
        let tasks = undo_tasks(&self.recorder.state(), &entries);
        let by_task: Arc<HashMap<String, JournalEntry>> =
            Arc::new(entries.into_iter().map(|e| (task_id(&e), e)).collect());
        let tally = Tally::default();
        let this = Arc::new(self.clone());
        run_phase(
            &self.engine,
            &self.stack,
            &tasks,
            &self.options,
            &tally,
            |id| {
                let entry = &by_task[id];
                Subject {
                    logical_id: entry.logical_id.clone(),
                    resource_type: Undo::of(entry, &self.recorder).resource_type,
                    action: "undo".into(),
                }
            },
            |id| {
                let (this, by_task, pre) = (this.clone(), by_task.clone(), pre.clone());
                async move {
                    let entry = &by_task[&id];
                    let undo = Undo::of(entry, &this.recorder);
                    let ty = undo.resource_type.clone();
                    Ok(match this.undo_one(entry, undo, &pre).await? {
                        Ok(how) => Ok(Done::Undone(how)),
                        Err(error) => Err(Failure {
                            logical_id: entry.logical_id.clone(),
                            resource_type: ty,
                            action: "undo".into(),
                            error,
                        }),
                    })
                }
            },
        )
        .await;
        tally
            .throttles
            .record(&self.recorder, &self.rollback_id, &pre)
            .await?;
        let mut report = RollbackReport {
            skipped: self.skipped_for_imports(),
            ..RollbackReport::default()
        };
        for (id, result) in tally.into_results()? {
            match result {
                Ok(done) => report.undone.push((id, done.word().to_string())),
                Err(failure) => report.failed.push(failure),
            }
        }
        self.recorder
            .append(
                run_key(&self.rollback_id, RunEvent::Finished),
                Event::RollbackFinished {
                    deploy_id: self.deploy_id.clone(),
                    complete: report.complete(),
                    errors: report.failed.iter().map(|f| f.error.clone()).collect(),
                },
                &pre,
            )
            .await?;
        Ok(report)
    }

    /// The journal entries an import adopted the resource of after the failure: left
    /// alone, each said (a note) and returned as `(logical id, why)`. Where the deploy had
    /// made another resource than the one adopted, that one stays in AWS outside the
    /// stack's records: the note names it.
    fn skipped_for_imports(&self) -> Vec<(String, String)> {
        let state = self.recorder.state();
        let mut out = Vec::new();
        for e in state.journal.entries.iter().filter(|e| !e.undone) {
            let Some(adopted) = &e.imported else {
                continue;
            };
            let made = match &e.step {
                JournalStep::Created { physical_id, .. }
                | JournalStep::Updated { physical_id, .. } => physical_id,
                JournalStep::Replaced {
                    new_physical_id, ..
                } => new_physical_id,
            };
            let why = if made == adopted {
                format!("an import adopted it ({adopted}) after the failure: left as it is")
            } else {
                format!(
                    "an import adopted {adopted} under it after the failure: {made}, which \
                     the failed deploy made, is left in AWS and is no longer in the stack's \
                     records (delete it if it is not wanted)"
                )
            };
            self.engine.note(
                &self.stack,
                &format!("rollback skips {}: {why}", e.logical_id),
            );
            out.push((e.logical_id.clone(), why));
        }
        out
    }

    /// **Rollback** handler: undoes one journal entry.
    async fn undo_one(
        &self,
        entry: &JournalEntry,
        undo: Undo,
        pre: &Precondition,
    ) -> Result<Result<Undone, ErrorInfo>, EngineError> {
        let id = &entry.logical_id;
        let resource_type = undo.resource_type.clone();
        let step = Step::new(
            &self.recorder,
            pre,
            (&self.rollback_id, &self.deploy_id),
            (id, &resource_type),
            StepKind::Undo {
                restore: undo.restore.is_some(),
            },
        );
        // A created resource whose DeletionPolicy keeps it stays (as CloudFormation's
        // rollback keeps it), unless the policy is RetainExceptOnCreate.
        if matches!(entry.step, JournalStep::Created { .. }) {
            let policy = self
                .recorder
                .state()
                .resources
                .get(id)
                .and_then(|r| r.deletion_policy);
            if matches!(policy, Some(Policy::Retain | Policy::Snapshot)) {
                step.undone(Undone::Retained).await?;
                return Ok(Ok(Undone::Retained));
            }
        }
        match self.call(&step, undo).await? {
            Ok(how) => {
                step.undone(how).await?;
                Ok(Ok(how))
            }
            Err(e) => {
                step.failed(Phase::Failed, e.clone()).await?;
                Ok(Err(e))
            }
        }
    }

    /// The provider call that undoes one entry (its intent first), and how it ended.
    async fn call(
        &self,
        step: &Step<'_, S>,
        undo: Undo,
    ) -> Result<Result<Undone, ErrorInfo>, EngineError> {
        let options = DeployOptions::new();
        // No template is at hand: a nested stack can be deleted, not put back.
        let ctx = NestedContext {
            parent: None,
            options: &options,
        };
        let plain = Masker {
            resolution: None,
            secrets: &[],
        };
        let provider = match self
            .engine
            .router(ctx)
            .for_recorded(&undo.resource_type, undo.provider)
        {
            Ok(provider) => provider,
            Err(e) => return Ok(Err(plain.info("Unsupported", &e.to_string()))),
        };
        let intent = Intent {
            provider: undo.provider,
            physical_id: Some(undo.physical_id.clone()),
            properties: undo.restore.clone(),
        };
        Ok(match undo.restore {
            None => {
                let mut request = step.request(undo.current.unwrap_or_default());
                request.physical_id = Some(undo.physical_id);
                match step
                    .apply(provider.as_ref(), &request, Some(intent))
                    .await?
                {
                    Answer::Deleted => Ok(Undone::Deleted),
                    Answer::AlreadyGone => Ok(Undone::AlreadyGone),
                    // Nothing can delete it any more: it leaves the stack, as retained.
                    Answer::Abandoned(_) => Ok(Undone::Abandoned),
                    // Still there: the entry is not undone, the resource stays recorded.
                    Answer::Skipped(reason) => Err(plain.info(
                        "DeleteSkipped",
                        &format!("the delete was skipped: {reason}"),
                    )),
                    Answer::Failed(e) => Err(plain.error(&e)),
                    other => return Err(other.unexpected(step)),
                }
            }
            Some(previous) => {
                if let Some(at) = masked_at(&previous) {
                    // A secret is recorded masked: sending the mask would break the
                    // resource, so the restore is refused.
                    return Ok(Err(plain.info(
                        "MaskedValue",
                        &format!(
                            "cannot restore {}: its property at {at} held a secret value, \
                             which is recorded masked; deploy the previous template (with \
                             its NoEcho parameters) to put it back",
                            undo.physical_id
                        ),
                    )));
                }
                let Resolved {
                    props: call,
                    resolution,
                    ..
                } = match resolve_dynamic(self.engine.lookups.as_ref(), &previous).await {
                    Ok(resolved) => resolved,
                    Err((name, message)) => return Ok(Err(ErrorInfo { name, message })),
                };
                let mut request = step.request(call);
                request.physical_id = Some(undo.physical_id);
                request.previous_properties = undo.current;
                let masker = Masker {
                    resolution: Some(&resolution),
                    secrets: &[],
                };
                match step
                    .apply(provider.as_ref(), &request, Some(intent))
                    .await?
                {
                    Answer::Updated(_) => Ok(Undone::Restored),
                    Answer::Failed(e) => Err(masker.error(&e)),
                    other => return Err(other.unexpected(step)),
                }
            }
        })
    }
}

impl<S: EventStore + 'static> OwnedRollback<S> {
    /// Takes the lock as a rollback (breaking a gone holder's), and readies the rollback
    /// of the stack's journal (`expected`: the deploy it should belong to).
    pub async fn begin(
        engine: Arc<Engine<S>>,
        stack: &str,
        expected: Option<String>,
    ) -> Result<OwnedRollback<S>, EngineError> {
        OwnedRollback::begin_as(engine, stack, expected, new_id("r")).await
    }

    /// [`OwnedRollback::begin`] as the run `rollback_id`; a run that holds the lock
    /// already (cut off, and invoked again) keeps it and resumes.
    pub async fn begin_as(
        engine: Arc<Engine<S>>,
        stack: &str,
        expected: Option<String>,
        rollback_id: String,
    ) -> Result<OwnedRollback<S>, EngineError> {
        let recorder = Recorder::load(engine.store.clone(), engine.stream(stack)).await?;
        if !crate::run::resumed(&recorder, &rollback_id) {
            let holder = engine.holder(&rollback_id, "rollback");
            engine
                .take_lock(
                    &recorder,
                    run_key(&rollback_id, RunEvent::Locked),
                    Event::LockTaken {
                        holder: holder.clone(),
                    },
                    holder,
                )
                .await?;
        }
        let deploy_id = recorder.state().journal.deploy_id.clone();
        if let (Some(e), Some(d)) = (&expected, &deploy_id)
            && e != d
        {
            return Err(EngineError::Refused(format!(
                "stack {stack}: the journal belongs to {d}, not {e}"
            )));
        }
        Ok(OwnedRollback {
            engine,
            stack: stack.to_string(),
            rollback_id,
            deploy_id,
            recorder: Arc::new(recorder),
        })
    }

    /// Reconciles interrupted calls, undoes the journal, releases the lock.
    pub async fn run(&self) -> Result<RollbackReport, EngineError> {
        let pre = Precondition::HoldsLock(self.rollback_id.clone());
        let pending: Vec<PendingIntent> = self.recorder.state().pending.values().cloned().collect();
        for p in &pending {
            reconcile_one(&self.engine, &self.recorder, &pre, p, None).await?;
        }
        let report = match &self.deploy_id {
            Some(deploy_id) => {
                let r = Rollback {
                    engine: self.engine.clone(),
                    stack: self.stack.clone(),
                    rollback_id: self.rollback_id.clone(),
                    lock_id: self.rollback_id.clone(),
                    deploy_id: deploy_id.clone(),
                    recorder: self.recorder.clone(),
                    options: DeployOptions::new(),
                };
                r.undo_all().await?
            }
            None => RollbackReport::default(),
        };
        crate::run::release(&self.recorder, &self.rollback_id).await?;
        Ok(report)
    }

    /// The deploy whose journal this rollback undoes (`None`: nothing to roll back).
    pub fn deploy_id(&self) -> Option<&str> {
        self.deploy_id.as_deref()
    }
}

/// Rolls back the journal of a stack's failed (or interrupted) deploy. Safe to run again:
/// a second run finds nothing to undo.
pub async fn rollback_stack<S: EventStore + 'static>(
    engine: Arc<Engine<S>>,
    stack: &str,
) -> Result<StackReport, EngineError> {
    rollback_stack_as(engine, stack, &new_id("r")).await
}

/// How the rollback run `id` ended, from the stream's `events`: its `RollbackFinished`
/// (complete or not), else nothing to roll back.
fn ended_status(events: &[Event], id: &str) -> StackStatus {
    let mut undone: Option<&str> = None;
    let mut status = StackStatus::NoChanges;
    for e in events {
        match e {
            Event::RollbackStarted {
                deploy_id,
                rollback_id,
            } if rollback_id == id => undone = Some(deploy_id),
            Event::RollbackFinished {
                deploy_id,
                complete,
                ..
            } if undone == Some(deploy_id.as_str()) => {
                status = if *complete {
                    StackStatus::Succeeded
                } else {
                    StackStatus::Failed
                };
            }
            _ => {}
        }
    }
    status
}

/// [`rollback_stack`] as the run `id`, which may have been started before and cut off
/// (a Step Functions task past its deadline): it is resumed (the lock it holds kept, the
/// entries it undid not undone again, the one it was undoing undone). A run that ended
/// already reports how and does nothing.
pub async fn rollback_stack_as<S: EventStore + 'static>(
    engine: Arc<Engine<S>>,
    stack: &str,
    id: &str,
) -> Result<StackReport, EngineError> {
    let started = Instant::now();
    if let Some(events) = crate::run::ended_run(&engine, stack, id).await? {
        let mut report = StackReport::new(stack, id);
        report.status = ended_status(&events, id);
        return Ok(report);
    }
    let rollback = OwnedRollback::begin_as(engine.clone(), stack, None, id.to_string()).await?;
    let mut report = StackReport::new(stack, &rollback.rollback_id);
    let nothing = rollback.deploy_id().is_none()
        || rollback.recorder.state().journal.to_undo().next().is_none();
    let (lease_lost, _) = tokio::sync::watch::channel(false);
    let keeper = crate::lease::keep(
        &engine,
        rollback.recorder.stream().clone(),
        rollback.rollback_id.clone(),
        lease_lost,
    );
    let r = rollback.run().await;
    if keeper.as_ref().is_some_and(crate::lease::Keeper::lost) {
        return Err(crate::lease::lost_error(stack));
    }
    let r = r?;
    if nothing && r.undone.is_empty() {
        report.status = StackStatus::NoChanges;
        if r.skipped.is_empty() {
            engine.note(stack, "nothing to roll back");
        } else {
            report.rollback = Some(r);
        }
    } else {
        report.status = if r.complete() {
            StackStatus::Succeeded
        } else {
            StackStatus::Failed
        };
        report.failures = r.failed.clone();
        report.rollback = Some(r);
    }
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// The task id of a journal entry (a logical id may have more than one entry).
fn task_id(entry: &JournalEntry) -> String {
    format!("{}#{}", entry.logical_id, entry.seq)
}

/// The undo tasks of `entries`: an entry's undo waits for the undos of every later entry
/// whose resource depends on it (by the dependencies it has now or had before the
/// deploy), so a resource is put back or deleted only once nothing the deploy made on
/// top of it is left. Edges only run from later entries to earlier ones, so the graph
/// has no cycle whatever the two sets of dependencies say.
pub(crate) fn undo_tasks(state: &StackState, entries: &[JournalEntry]) -> Vec<Task> {
    let depends_on = |entry: &JournalEntry| -> Vec<String> {
        let mut deps: Vec<String> = state
            .resources
            .get(&entry.logical_id)
            .map(|r| r.dependencies.clone())
            .unwrap_or_default();
        if let JournalStep::Updated { previous, .. } | JournalStep::Replaced { previous, .. } =
            &entry.step
        {
            deps.extend(previous.dependencies.iter().cloned());
        }
        deps
    };
    let mut waits: HashMap<String, Vec<String>> = HashMap::new();
    for later in entries {
        let deps = depends_on(later);
        for earlier in entries.iter().filter(|e| e.seq < later.seq) {
            if deps.contains(&earlier.logical_id) || earlier.logical_id == later.logical_id {
                waits
                    .entry(task_id(earlier))
                    .or_default()
                    .push(task_id(later));
            }
        }
    }
    entries
        .iter()
        .map(|e| {
            let id = task_id(e);
            let deps = waits.remove(&id).unwrap_or_default();
            Task::new(id, deps)
        })
        .collect()
}
