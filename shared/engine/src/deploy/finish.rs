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
        self.observations.settle().await;
        self.fill_baselines().await?;
        self.recorder
            .append(
                run_key(&self.deploy_id, RunEvent::Completed),
                Event::DeployCompleted {
                    deploy_id: self.deploy_id.clone(),
                    outputs: outputs.clone(),
                    exports,
                    imports: self.imports.clone(),
                },
                &self.holds(),
            )
            .await?;
        self.release().await?;
        // A snapshot only makes later loads faster: the deploy is done without it.
        if let Err(e) = self.recorder.snapshot().await {
            tracing::warn!(stack = self.stack(), error = %e, "no snapshot written");
        }
        Ok(outputs)
    }

    /// Seed 003: the resources still without a baseline (a read that failed now or in an
    /// earlier deploy or import) are read once more, and what is read is recorded.
    async fn fill_baselines(&self) -> Result<(), EngineError> {
        let state = self.recorder.state().clone();
        let recorded = self.observations.recorded();
        for (id, observed) in
            crate::observe::missing_baselines(&self.engine, self.stack(), &state, &recorded).await
        {
            self.recorder
                .append(
                    format!("{}/filled/{id}", self.deploy_id),
                    Event::BaselineRecorded {
                        logical_id: id,
                        baseline: stackflow_events::event::Baseline::Recorded { observed },
                    },
                    &self.holds(),
                )
                .await?;
        }
        Ok(())
    }

    async fn release(&self) -> Result<(), EngineError> {
        self.recorder
            .append(
                run_key(&self.deploy_id, RunEvent::Released),
                Event::LockReleased {
                    deploy_id: self.deploy_id.clone(),
                },
                &Precondition::ReleaseLock(self.deploy_id.clone()),
            )
            .await?;
        Ok(())
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
        self.observations.settle().await;
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
