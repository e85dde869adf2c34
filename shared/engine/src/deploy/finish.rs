//! The **finish** and **fail** handlers: outputs and exports recorded and the lock
//! released; or the failure recorded, the journal undone (unless told not to) and the
//! lock released.

use indexmap::IndexMap;
use serde_json::Value;
use stackflow_core::Path;
use stackflow_events::event::{ErrorInfo, Event};
use stackflow_events::{EventStore, Precondition};

use super::Deployment;
use crate::engine::EngineError;
use crate::keys::{RunEvent, rollback_of, run_key};
use crate::report::{Failure, RollbackReport};
use crate::rollback::Rollback;

/// Outputs and exports by name.
type Resolved = (IndexMap<String, Value>, IndexMap<String, Value>);

/// Outputs and exports by name, each with its template expression, not masked yet.
type Unmasked = (
    IndexMap<String, (Value, Value)>,
    IndexMap<String, (Value, Value)>,
);

impl<S: EventStore + 'static> Deployment<S> {
    /// The outputs and exports as the template says, values computed from secrets
    /// masked.
    pub(crate) fn outputs(&self) -> Result<Resolved, EngineError> {
        let (outputs, exports) = self.resolve_outputs()?;
        // Masked once the resolver (which holds the state) is done with.
        self.with_masking(|m| {
            let mask = |values: IndexMap<String, (Value, Value)>| {
                values
                    .into_iter()
                    .map(|(k, (template, value))| (k, m.mask(&template, &value)))
                    .collect()
            };
            Ok((mask(outputs), mask(exports)))
        })
    }

    /// The outputs and exports, each with its template expression.
    fn resolve_outputs(&self) -> Result<Unmasked, EngineError> {
        self.with_resolver(|resolver| {
            let mut outputs = IndexMap::new();
            let mut exports = IndexMap::new();
            for (name, o) in &self.input.template.outputs {
                if let Some(c) = &o.condition
                    && !self.conditions.get(c).copied().unwrap_or(true)
                {
                    continue;
                }
                let p = Path::from_keys(["Outputs", name]);
                let value = resolver
                    .resolve(&o.value, &p.key("Value"))
                    .map_err(|e| e.in_file(&self.input.source))?
                    .unwrap_or(Value::Null);
                let value = (o.value.clone(), value);
                if let Some(e) = &o.export_name {
                    let export = resolver
                        .resolve(e, &p.key("Export").key("Name"))
                        .map_err(|e| e.in_file(&self.input.source))?;
                    if let Some(Value::String(export)) = export {
                        exports.insert(export, value.clone());
                    }
                }
                outputs.insert(name.clone(), value);
            }
            Ok((outputs, exports))
        })
    }

    /// **Finish** handler: resolves and records outputs and exports, releases the lock.
    pub async fn finish(&self) -> Result<IndexMap<String, Value>, EngineError> {
        let resolved = self.outputs()?;
        self.finish_with(resolved).await
    }

    /// [`Deployment::finish`] with the outputs and exports [`Deployment::outputs`] gave.
    pub(crate) async fn finish_with(
        &self,
        (outputs, exports): Resolved,
    ) -> Result<IndexMap<String, Value>, EngineError> {
        // The baselines not appended yet, those read again, the outcome and the release
        // of the lock: one write where the store can.
        let mut last = Vec::new();
        // The log is read for the snapshot meanwhile (what this run wrote is all there,
        // but for a baseline write in flight, which the snapshot may leave to the tail).
        let (pending, folded) = tokio::join!(
            self.observations.settle_for_end(&self.deploy_id),
            self.recorder.fold_log()
        );
        let mut recorded = self.observations.recorded();
        if let Some((key, event, ids)) = pending {
            if body_bytes(&event) <= LAST_WRITE_BASELINES_BYTES {
                recorded.extend(ids);
                last.push((key, event, self.holds()));
            } else if self
                .recorder
                .append(key, event, &self.holds())
                .await
                .is_ok()
            {
                // Too large to share the last write (a store may have to put its body
                // elsewhere, or refuse it): appended alone and, as every baseline read
                // beside the run, best effort: one not appended is read again below.
                recorded.extend(ids);
            }
        }
        last.extend(self.filled_baselines(&recorded).await);
        last.extend(crate::run::ending(
            &self.deploy_id,
            run_key(&self.deploy_id, RunEvent::Completed),
            Event::DeployCompleted {
                deploy_id: self.deploy_id.clone(),
                outputs: outputs.clone(),
                exports,
                imports: self.imports.clone(),
            },
        ));
        // The snapshot is of the log before this last write (later loads fold the last
        // write's few events after it), written beside it. A snapshot only makes later
        // loads faster: the deploy is done without it.
        let snapshot = async {
            match folded {
                Ok(state) => self.recorder.put_snapshot(state).await,
                Err(e) => Err(e),
            }
        };
        let (appended, snapshot) = tokio::join!(self.recorder.append_in_order(last), snapshot);
        appended?;
        if let Err(e) = snapshot {
            tracing::warn!(stack = self.stack(), error = %e, "no snapshot written");
        }
        Ok(outputs)
    }

    /// Seed 003: the resources still without a baseline (a read that failed now or in an
    /// earlier deploy or import, and not in `recorded`) are read once more; what is read,
    /// to be recorded.
    async fn filled_baselines(
        &self,
        recorded: &std::collections::HashSet<String>,
    ) -> Vec<(String, Event, Precondition)> {
        let state = self.recorder.state().clone();
        crate::observe::missing_baselines(&self.engine, self.stack(), &state, recorded)
            .await
            .into_iter()
            .map(|(id, observed)| {
                (
                    crate::keys::item_key(&self.deploy_id, crate::keys::ItemEvent::Filled, &id),
                    Event::BaselineRecorded {
                        logical_id: id,
                        baseline: stackflow_events::event::Baseline::Recorded { observed },
                    },
                    self.holds(),
                )
            })
            .collect()
    }

    async fn release(&self) -> Result<(), EngineError> {
        crate::run::release(&self.recorder, &self.deploy_id).await
    }

    /// **Fail** handler: records the failure; then the journal is undone (unless
    /// `--no-rollback`, or `roll_back` is false: a deploy the user stopped) and the lock
    /// released.
    pub async fn fail(
        &self,
        first: Option<&Failure>,
        why: &str,
        roll_back: bool,
    ) -> Result<Option<RollbackReport>, EngineError> {
        let (error, logical_id) = match first {
            Some(f) => (f.error.clone(), Some(f.logical_id.clone())),
            None => (
                ErrorInfo {
                    name: "Interrupted".into(),
                    message: why.to_string(),
                },
                None,
            ),
        };
        self.fail_because(error, logical_id, roll_back).await
    }

    /// [`Deployment::fail`] with the error to record (and the resource it is about, when
    /// one is).
    pub async fn fail_because(
        &self,
        error: ErrorInfo,
        logical_id: Option<String>,
        roll_back: bool,
    ) -> Result<Option<RollbackReport>, EngineError> {
        // The baselines read and not appended yet are appended first, as every baseline
        // read beside the run: best effort (one not appended is read again later).
        let pending = self.observations.settle_for_end(&self.deploy_id).await;
        if let Some((key, event, _)) = pending {
            let _ = self.recorder.append(key, event, &self.holds()).await;
        }
        self.recorder
            .append(
                run_key(&self.deploy_id, RunEvent::Failed),
                Event::DeployFailed {
                    deploy_id: self.deploy_id.clone(),
                    error,
                    logical_id,
                },
                &self.holds(),
            )
            .await?;
        let rollback = if self.options.no_rollback || !roll_back {
            None
        } else {
            let rollback = Rollback {
                engine: self.engine.clone(),
                stack: self.stack().to_string(),
                rollback_id: rollback_of(&self.deploy_id),
                lock_id: self.deploy_id.clone(),
                deploy_id: self.deploy_id.clone(),
                recorder: self.recorder.clone(),
                options: self.options.for_rollback(),
            };
            Some(rollback.undo_all().await?)
        };
        self.release().await?;
        Ok(rollback)
    }
}

/// The most serialized bytes of baselines the run's last write takes with its outcome.
const LAST_WRITE_BASELINES_BYTES: usize = 64 * 1024;

/// The size of `event`'s stored body.
fn body_bytes(event: &Event) -> usize {
    serde_json::to_vec(&event.to_body()).map_or(usize::MAX, |body| body.len())
}
