//! Destroy: every resource of a stack deleted in reverse dependency order, honouring
//! `DeletionPolicy`; nested stacks with it. Refused while another stack imports one of
//! its exports.

use std::sync::Arc;
use std::time::Instant;

use stackflow_events::event::{Event, Operation};
use stackflow_events::projection::PendingIntent;
use stackflow_events::{EventStore, Precondition};

use crate::deploy::{cleanup_graph, cleanup_items, cleanup_of, delete_one};
use crate::engine::{DeployOptions, Engine, EngineError, NestedContext};
use crate::keys::{RunEvent, new_id, run_key};
use crate::phase::{Tally, run_phase};
use crate::progress::ProgressEvent;
use crate::reconcile::reconcile_one;
use crate::recorder::Recorder;
use crate::report::{StackReport, StackStatus};
use crate::run::{end_with, ended_run, release, resumed};

/// Refuses a destroy while other stacks of this region import one of the stack's exports.
async fn check_importers<S: EventStore + 'static>(
    engine: &Engine<S>,
    stack: &str,
    rec: &Recorder<S>,
) -> Result<(), EngineError> {
    let exports = rec.state().exports.clone();
    let importers = engine.importers(stack, &exports).await?;
    if importers.is_empty() {
        return Ok(());
    }
    let list: Vec<String> = importers
        .iter()
        .map(|(s, e)| format!("{s} imports {e}"))
        .collect();
    Err(EngineError::Refused(format!(
        "stack {stack} cannot be destroyed while other stacks use its exports ({}); destroy or change those stacks first",
        list.join("; ")
    )))
}

/// A destroy that holds the stack's lock.
struct Destroy<S> {
    engine: Arc<Engine<S>>,
    stack: String,
    id: String,
    recorder: Arc<Recorder<S>>,
    pre: Precondition,
    /// The run held the lock already: a later invocation of the same execution.
    resumed: bool,
}

impl<S: EventStore + 'static> Destroy<S> {
    /// Takes the lock as run `report.deploy_id` (when there is anything to destroy and no
    /// other stack imports an export; a run that holds it already is resumed) and settles
    /// interrupted calls. `None`: nothing is recorded.
    async fn begin(
        engine: &Arc<Engine<S>>,
        stack: &str,
        report: &mut StackReport,
    ) -> Result<Option<Destroy<S>>, EngineError> {
        let recorder = Arc::new(Recorder::load(engine.store.clone(), engine.stream(stack)).await?);
        if recorder.state().seq == 0 {
            return Err(EngineError::Refused(format!(
                "stack {stack} has no records in this store (region {}): nothing was \
                 deployed under that name from it, so there is nothing to destroy; check \
                 --stack, --region and --store",
                engine.region
            )));
        }
        let nothing_recorded = {
            let s = recorder.state();
            s.resources.is_empty()
                && s.predecessors.is_empty()
                && s.pending.is_empty()
                && s.lock.is_none()
        };
        if nothing_recorded {
            return Ok(None);
        }
        check_importers(engine, stack, &recorder).await?;
        let id = report.deploy_id.clone();
        let was_resumed = resumed(&recorder, &id);
        if !was_resumed {
            let holder = engine.holder(&id, "destroy");
            let locked = Event::LockTaken {
                holder: holder.clone(),
            };
            engine
                .take_lock(&recorder, run_key(&id, RunEvent::Locked), locked, holder)
                .await?;
        }
        let pre = Precondition::HoldsLock(id.clone());
        let pending: Vec<PendingIntent> = recorder.state().pending.values().cloned().collect();
        for p in pending.iter().filter(|p| p.operation != Operation::Undo) {
            reconcile_one(engine, &recorder, &pre, p, None).await?;
            report.recovered += 1;
        }
        Ok(Some(Destroy {
            engine: engine.clone(),
            stack: stack.to_string(),
            id,
            recorder,
            pre,
            resumed: was_resumed,
        }))
    }

    /// Deletes every resource and old copy, dependents first. `false`: nothing was left.
    async fn delete_all(
        &self,
        options: &DeployOptions,
        report: &mut StackReport,
    ) -> Result<bool, EngineError> {
        let (items, tasks) = {
            let s = self.recorder.state();
            let all: Vec<String> = s.resources.keys().cloned().collect();
            cleanup_graph(&s, &all)
        };
        if items.is_empty() {
            return Ok(false);
        }
        self.engine.progress.report(ProgressEvent::StackStarted {
            stack: &self.stack,
            operation: "destroy",
            total: items.len(),
        });
        let by_id = cleanup_items(&items);
        let tally = Tally::default();
        run_phase(
            &self.engine,
            &self.stack,
            &tasks,
            options,
            &tally,
            |id| cleanup_of(&self.recorder, &by_id[id]),
            |id| {
                let item = by_id[&id].clone();
                let (engine, recorder) = (self.engine.clone(), self.recorder.clone());
                let (id, pre, options) = (self.id.clone(), self.pre.clone(), options.clone());
                async move {
                    let ctx = NestedContext {
                        parent: None,
                        options: &options,
                    };
                    delete_one(&engine, &recorder, &id, &pre, &item, ctx).await
                }
            },
        )
        .await;
        tally
            .throttles
            .record(&self.recorder, &self.id, &self.pre)
            .await?;
        tally.into_report(report)?;
        Ok(true)
    }

    /// Records `StackDestroyed` when nothing is left, and releases the lock. True when
    /// nothing is left.
    async fn end(&self) -> Result<bool, EngineError> {
        let empty = {
            let s = self.recorder.state();
            s.resources.is_empty() && s.predecessors.is_empty()
        };
        if empty {
            let destroyed = Event::StackDestroyed {
                deploy_id: self.id.clone(),
            };
            let key = run_key(&self.id, RunEvent::Destroyed);
            end_with(&self.recorder, &self.id, key, destroyed).await?;
        } else {
            release(&self.recorder, &self.id).await?;
        }
        Ok(empty)
    }
}

/// Destroys one stack: every resource in reverse dependency order (at most `concurrency`
/// deletes at once), honouring `DeletionPolicy`; nested stacks with it. Refused while
/// another stack imports one of its exports.
pub async fn destroy_stack<S: EventStore + 'static>(
    engine: Arc<Engine<S>>,
    stack: &str,
    options: DeployOptions,
) -> Result<StackReport, EngineError> {
    destroy_stack_as(engine, stack, options, &new_id("x")).await
}

/// [`destroy_stack`] as the run `id`, which may have been started before and cut off
/// (a Step Functions task past its deadline): it is resumed where it stopped (the lock it
/// holds kept, its interrupted deletes settled, what is left deleted). A run that ended
/// already reports how (failed when one of its deletes failed) and does nothing.
pub async fn destroy_stack_as<S: EventStore + 'static>(
    engine: Arc<Engine<S>>,
    stack: &str,
    options: DeployOptions,
    id: &str,
) -> Result<StackReport, EngineError> {
    let started = Instant::now();
    let mut report = StackReport::new(stack, id);
    if let Some(events) = ended_run(&engine, stack, id).await? {
        let failed = events
            .iter()
            .any(|e| matches!(e, Event::ResourceFailed { deploy_id, .. } if deploy_id == id));
        report.status = if failed {
            StackStatus::Failed
        } else {
            StackStatus::Succeeded
        };
        return Ok(report);
    }
    let (lease_lost, options) = crate::lease::stoppable(options);
    let nothing = "the stack has no resources: nothing to destroy";
    let Some(destroy) = Destroy::begin(&engine, stack, &mut report).await? else {
        report.status = StackStatus::NoChanges;
        engine.note(stack, nothing);
        return Ok(report);
    };
    let keeper = crate::lease::keep(
        &engine,
        destroy.recorder.stream().clone(),
        destroy.id.clone(),
        lease_lost,
    );
    let deleted = destroy.delete_all(&options, &mut report).await?;
    if keeper.as_ref().is_some_and(crate::lease::Keeper::lost) {
        return Err(crate::lease::lost_error(stack));
    }
    if !deleted && !destroy.resumed {
        // Only a lock (of a run that is gone) or interrupted calls were left: settled now.
        release(&destroy.recorder, &destroy.id).await?;
        report.status = StackStatus::NoChanges;
        report.seconds = started.elapsed().as_secs_f64();
        engine.note(stack, nothing);
        return Ok(report);
    }
    let empty = destroy.end().await?;
    report.status = if !report.failures.is_empty() {
        StackStatus::Failed
    } else if options.stopped() && !empty {
        StackStatus::Interrupted
    } else if !report.skipped.is_empty() {
        StackStatus::Partial
    } else {
        StackStatus::Succeeded
    };
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}
