//! The **plan** handler: lookups, the lock, interrupted calls of earlier runs, the plan.

use std::sync::Arc;

use indexmap::IndexMap;
use serde_json::Value;
use stackflow_core::plan::Plan;
use stackflow_events::EventStore;
use stackflow_events::event::{Event, Operation};
use stackflow_events::projection::{DeployStatus, StackState};

use super::Deployment;
use crate::engine::{DeployOptions, Engine, EngineError};
use crate::gather::plan_of;
use crate::keys::{RunEvent, new_id, run_key};
use crate::preflight;
use crate::recorder::Recorder;
use crate::report::{StackReport, StackStatus};
use crate::rollback::OwnedRollback;
use crate::secrets::Sealed;
use crate::stack::StackInput;

/// The recorded outputs when a deploy of `input` with `first` would change nothing: no
/// resource action, nothing left over (no interrupted call, no old copy, no lock of a run
/// that did not end), the same outputs and the same template.
fn unchanged(
    state: &StackState,
    first: &Plan,
    input: &StackInput,
) -> Option<IndexMap<String, Value>> {
    let settled = state.pending.is_empty()
        && state.predecessors.is_empty()
        && state.lock.is_none()
        && state
            .last_deploy
            .as_ref()
            .is_some_and(|d| d.status == DeployStatus::Completed);
    let outputs_same = first.outputs.iter().all(|(k, o)| {
        state.outputs.get(k) == Some(&o.value)
            && o.export_name
                .as_ref()
                .and_then(Value::as_str)
                .is_none_or(|n| state.exports.contains_key(n))
    }) && state.outputs.len() == first.outputs.len();
    let digest_same = state.template_digest.as_deref() == Some(&input.digest());
    (first.is_empty() && settled && outputs_same && digest_same).then(|| state.outputs.clone())
}

/// What the user is told when the last deploy neither finished nor was rolled back.
fn continue_note(state: &StackState) -> Option<String> {
    match &state.last_deploy {
        Some(d)
            if matches!(d.status, DeployStatus::Failed | DeployStatus::InProgress)
                && state.journal.to_undo().next().is_some() =>
        {
            Some(format!(
                "the last deploy {} did not finish and was not rolled back; this deploy continues from what it left",
                d.deploy_id
            ))
        }
        _ => None,
    }
}

/// Finishes a rollback that a killed run left half done, before anything else.
async fn finish_interrupted_rollback<S: EventStore + 'static>(
    engine: &Arc<Engine<S>>,
    input: &StackInput,
    recorder: &Recorder<S>,
) -> Result<(), EngineError> {
    let unfinished = {
        let s = recorder.state();
        s.pending
            .values()
            .any(|p| p.operation == Operation::Undo)
            .then(|| s.journal.deploy_id.clone())
            .flatten()
    };
    let Some(failed) = unfinished else {
        return Ok(());
    };
    // Take the lock as a rollback, finish it, then release: the deploy starts next.
    let rollback = OwnedRollback::begin(engine.clone(), &input.name, Some(failed)).await?;
    let r = rollback.run().await?;
    if !r.complete() {
        return Err(EngineError::NeedsOperator(format!(
            "stack {}: an interrupted rollback could not be finished; run `stackflow rollback --stack {}` and fix what it reports",
            input.name, input.name
        )));
    }
    recorder.reload().await?;
    Ok(())
}

impl<S: EventStore + 'static> Deployment<S> {
    /// **Plan** handler: answers the lookups, checks every resource can be deployed
    /// before anything is changed, takes the lock, reconciles interrupted calls of
    /// earlier runs, and plans. `Ok(None)`: nothing to do (and the lock was never taken).
    pub async fn begin(
        engine: Arc<Engine<S>>,
        input: StackInput,
        options: DeployOptions,
    ) -> Result<(Option<Deployment<S>>, StackReport), EngineError> {
        let deploy_id = options.deploy_id.clone().unwrap_or_else(|| new_id("d"));
        let mut report = StackReport::new(&input.name, &deploy_id);
        // Before any call: the lookups below are made with the provisioning role too.
        crate::engine::check_allowed(options.allowed_types.as_ref(), &input)?;
        let recorder = Recorder::load(engine.store.clone(), engine.stream(&input.name)).await?;
        let mut input = input;
        input.settle_stack_id(recorder.state().stack_id.clone());
        let input = Arc::new(input);
        let (answers, imports) = engine.gather(&input, &recorder, true).await?;
        let key = engine.stack_digest_key(&input.name);
        let first = plan_of(&input, &recorder, &answers, key.as_ref())?;
        if let Some(expected) = &options.expected_plan {
            expected.check(&input.name, &first)?;
        }
        let unchanged = unchanged(&recorder.state(), &first, &input);
        if let Some(outputs) = unchanged {
            crate::observe::confirm_masks(&engine, &input.name, &recorder).await;
            report.status = StackStatus::NoChanges;
            report.outputs = outputs;
            return Ok((None, report));
        }
        preflight::check(
            &engine,
            &input,
            &first,
            &recorder.state(),
            options.allow_stateful_replacement,
        )?;

        finish_interrupted_rollback(&engine, &input, &recorder).await?;
        let note = continue_note(&recorder.state());
        if let Some(note) = note {
            engine.note(&input.name, &note);
        }
        take_deploy_lock(&engine, &input, &recorder, &deploy_id, &options).await?;

        let secrets = input.parameters.secret_values();
        // Interrupted calls are replayed with the first plan's conditions; the plan made
        // after the lock brings its own.
        let first_conditions = first.conditions.clone();
        let mut deployment = Deployment {
            engine: engine.clone(),
            input: input.clone(),
            deploy_id,
            recorder: Arc::new(recorder),
            plan: first,
            answers,
            imports,
            conditions: first_conditions,
            secrets,
            digest_key: engine.stack_digest_key(&input.name),
            sealed: Sealed::default(),
            options,
            observations: Default::default(),
            fenced_by_lock: false,
        };
        report.recovered = deployment.settle_or_release().await?;
        Ok((Some(deployment), report))
    }
}

/// Takes the stack's lock for deploy `deploy_id` with its `DeployStarted` event.
async fn take_deploy_lock<S: EventStore + 'static>(
    engine: &Arc<Engine<S>>,
    input: &StackInput,
    recorder: &Recorder<S>,
    deploy_id: &str,
    options: &DeployOptions,
) -> Result<(), EngineError> {
    let started = Event::DeployStarted {
        deploy_id: deploy_id.to_string(),
        who: engine.who.clone(),
        template_digest: input.digest(),
        parameters: input.parameters.for_record(),
        no_rollback: options.no_rollback,
        stack_id: input.pseudo.stack_id.clone(),
    };
    let holder = engine.holder(deploy_id, "deploy");
    engine
        .take_lock(
            recorder,
            run_key(deploy_id, RunEvent::Started),
            started,
            holder,
        )
        .await
}

impl<S: EventStore + 'static> Deployment<S> {
    /// [`Deployment::settle_and_replan`]; a run that cannot go on after taking the lock
    /// says why and lets it go, so that the stack is not left locked (a Step Functions
    /// execution's lock has no lease to run out). When even that fails, the error says so.
    async fn settle_or_release(&mut self) -> Result<usize, EngineError> {
        match self.settle_and_replan().await {
            Ok(recovered) => Ok(recovered),
            Err(e) => {
                let why = e.to_string();
                if let Err(release) = self.fail(None, &why, false).await {
                    return Err(EngineError::NeedsOperator(format!(
                        "{why}; and the stack's lock could not be released ({release}): \
                         run `stackflow unlock --stack {}`",
                        self.stack()
                    )));
                }
                Err(e)
            }
        }
    }

    /// After the lock: settles what interrupted runs left, then plans again from the
    /// state as it is now. The number of interrupted calls settled.
    async fn settle_and_replan(&mut self) -> Result<usize, EngineError> {
        let recovered = self.reconcile().await?;
        self.plan = plan_of(
            &self.input,
            &self.recorder,
            &self.answers,
            self.digest_key.as_ref(),
        )?;
        self.conditions = self.plan.conditions.clone();
        // What the lock let in since the first plan (another run's events, an interrupted
        // call settled) must not change a reviewed plan either.
        if let Some(expected) = &self.options.expected_plan {
            expected.check(&self.input.name, &self.plan)?;
        }
        Ok(recovered)
    }
}
