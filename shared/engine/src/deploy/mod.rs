//! One deploy of one stack, as task handlers: [`Deployment::begin`] (plan), then
//! [`Deployment::provision`] per resource, [`Deployment::cleanup`] per removed resource
//! or replaced predecessor, and [`Deployment::finish`] or [`Deployment::fail`]. The
//! embedded runner ([`crate::runner`]) and the Step Functions tasks ([`crate::sfn`]) call
//! the same handlers.

mod cleanup;
mod finish;
mod masking;
mod plan;
mod provision;
mod recover;
mod started;

use std::collections::BTreeSet;
use std::sync::Arc;

use indexmap::IndexMap;
use serde::Serialize;
use serde_json::{Map, Value};
use stackflow_core::TemplateError;
use stackflow_core::intrinsics::{Mode, Resolver};
use stackflow_core::plan::{Action, Plan};
use stackflow_core::secrets::DigestKey;
use stackflow_events::projection::JournalStep;
use stackflow_events::{EventStore, Precondition};

pub use cleanup::{Cleanup, cleanup_graph, cleanup_subject};
pub(crate) use cleanup::{cleanup_items, cleanup_of, delete_one};
pub use started::{Started, TASK_BOUND, running_intents};

use crate::engine::{DeployOptions, Engine, EngineError, NestedContext};
use crate::lookups::Answers;
use crate::observe::Observations;
use crate::recorder::Recorder;
use crate::report::Done;
use crate::schedule::Task;
use crate::secrets::Sealed;
use crate::stack::{DeployEnv, StackInput};
use crate::step::{Step, StepKind};

/// How many events a resume folds after the latest snapshot before it writes a snapshot
/// of its own ([`Deployment::resume`]).
pub const SNAPSHOT_TAIL: usize = 200;

/// One deploy of one stack, from its plan to its end.
pub struct Deployment<S> {
    /// The engine.
    pub engine: Arc<Engine<S>>,
    /// The stack.
    pub input: Arc<StackInput>,
    /// The deploy id.
    pub deploy_id: String,
    /// The stream and its state.
    pub recorder: Arc<Recorder<S>>,
    /// The plan.
    pub plan: Plan,
    /// The lookups' answers.
    pub answers: Answers,
    /// Exports of other stacks the template imports.
    pub imports: Vec<String>,
    /// The evaluated conditions.
    pub conditions: IndexMap<String, bool>,
    /// `NoEcho` parameter values, to mask.
    pub secrets: Vec<String>,
    /// The stack's key for the digests recorded in place of secrets.
    pub digest_key: Option<DigestKey>,
    /// Attribute values recorded masked (custom resource `NoEcho` data, values a
    /// provider echoed from a secret), as AWS gave them, by resource: `Fn::GetAtt` reads
    /// them during this deploy. Held in memory only.
    pub sealed: Sealed,
    /// How it runs.
    pub options: DeployOptions,
    /// The drift baseline reads started and not settled yet.
    pub observations: Observations,
    /// The intents of its provision actions need the lock open
    /// ([`stackflow_events::Precondition::HoldsOpenLock`]): a deploy on Step Functions, whose
    /// Fail fences the lock before it looks for running calls, so that an iteration the
    /// failed `Map` did not stop in time begins nothing the rollback would not see.
    pub fenced_by_lock: bool,
}

/// A planned deploy, as stored for tasks that run elsewhere (Step Functions): everything a
/// handler needs to rebuild its [`Deployment`].
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct PlanDocument {
    /// The stack.
    pub input: StackInput,
    /// The deploy id.
    pub deploy_id: String,
    /// The plan.
    pub plan: Plan,
    /// The lookups' answers.
    pub answers: Answers,
    /// Exports of other stacks the template imports.
    pub imports: Vec<String>,
    /// Keep what a failed deploy did.
    pub no_rollback: bool,
    /// At most this many actions at once.
    pub concurrency: usize,
    /// The resource types the engine may deploy (its nested stacks are checked by it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_types: Option<stackflow_core::deployable::Deployable>,
}

impl<S: EventStore + 'static> Deployment<S> {
    /// The document that lets another process resume this deploy.
    pub fn document(&self) -> PlanDocument {
        PlanDocument {
            input: (*self.input).clone(),
            deploy_id: self.deploy_id.clone(),
            plan: self.plan.clone(),
            answers: self.answers.clone(),
            imports: self.imports.clone(),
            no_rollback: self.options.no_rollback,
            concurrency: self.options.concurrency,
            allowed_types: self.options.allowed_types.clone(),
        }
    }

    /// Rebuilds a deploy planned elsewhere, with the stack's state as it is now.
    ///
    /// Each Step Functions task resumes the deploy this way. So that what it reads stays
    /// the same however far the deploy has gone (not every event the deploy appended so
    /// far: that would make a deploy's reads grow with the square of its actions), a
    /// resume that folded [`SNAPSHOT_TAIL`] events or more after the latest snapshot
    /// writes one of what it read; the next resumes fold only what came after it.
    pub async fn resume(
        engine: Arc<Engine<S>>,
        doc: PlanDocument,
    ) -> Result<Deployment<S>, EngineError> {
        let (recorder, tail) =
            Recorder::load_counted(engine.store.clone(), engine.stream(&doc.input.name)).await?;
        if tail >= SNAPSHOT_TAIL {
            let state = recorder.state().clone();
            // Only later reads gain from it: a deploy goes on without it.
            if let Err(e) = recorder.put_snapshot(state).await {
                tracing::warn!(stack = doc.input.name, error = %e, "no snapshot written");
            }
        }
        let mut options = DeployOptions::new();
        options.no_rollback = doc.no_rollback;
        options.concurrency = doc.concurrency;
        options.allowed_types = doc.allowed_types;
        let secrets = doc.input.parameters.secret_values();
        let digest_key = engine.stack_digest_key(&doc.input.name);
        Ok(Deployment {
            engine,
            conditions: doc.plan.conditions.clone(),
            input: Arc::new(doc.input),
            deploy_id: doc.deploy_id,
            recorder: Arc::new(recorder),
            plan: doc.plan,
            answers: doc.answers,
            imports: doc.imports,
            secrets,
            digest_key,
            sealed: Sealed::default(),
            options,
            observations: Observations::default(),
            fenced_by_lock: false,
        })
    }

    /// How many deletes the plan's cleanup makes: each removed resource and each
    /// replaced one's predecessor.
    pub fn planned_cleanups(&self) -> usize {
        self.plan
            .resources
            .iter()
            .filter(|r| matches!(r.action, Action::Delete | Action::Replace))
            .count()
    }

    /// The provision actions in the order they may start, each with the actions it waits
    /// for: every create, update and replacement, and every resource downstream of an
    /// update. An update can change what its dependents read (an attribute, or the
    /// physical id when the provider has to replace the resource), so those are resolved
    /// again once it is done, and updated only if their properties changed.
    pub fn provision_tasks(&self) -> Vec<Task> {
        let mut active: BTreeSet<&str> = self
            .plan
            .resources
            .iter()
            .filter(|r| matches!(r.action, Action::Create | Action::Update | Action::Replace))
            .map(|r| r.logical_id.as_str())
            .collect();
        let mut updated: BTreeSet<&str> = self
            .plan
            .resources
            .iter()
            .filter(|r| r.action == Action::Update)
            .map(|r| r.logical_id.as_str())
            .collect();
        // The plan lists resources in dependency order, so one pass finds every resource
        // downstream of an update.
        for r in &self.plan.resources {
            if r.action == Action::NoOp && r.depends_on.iter().any(|d| updated.contains(d.as_str()))
            {
                updated.insert(&r.logical_id);
                active.insert(&r.logical_id);
            }
        }
        self.plan
            .resources
            .iter()
            .filter(|r| active.contains(r.logical_id.as_str()))
            .map(|r| {
                Task::new(
                    r.logical_id.clone(),
                    r.depends_on
                        .iter()
                        .filter(|x| active.contains(x.as_str()))
                        .cloned(),
                )
            })
            .collect()
    }

    /// The stack's name.
    pub fn stack(&self) -> &str {
        &self.input.name
    }

    pub(crate) fn holds(&self) -> Precondition {
        Precondition::HoldsLock(self.deploy_id.clone())
    }

    /// Where a nested stack of this deploy finds its template.
    pub(crate) fn nested_context(&self) -> NestedContext<'_> {
        NestedContext {
            parent: Some(&self.input),
            options: &self.options,
        }
    }

    /// The step `kind` on resource `id` of this deploy.
    pub(crate) fn step<'a>(
        &'a self,
        pre: &'a Precondition,
        id: &'a str,
        resource_type: &'a str,
        kind: StepKind<'a>,
    ) -> Step<'a, S> {
        Step::new(
            &self.recorder,
            pre,
            (&self.deploy_id, &self.deploy_id),
            (id, resource_type),
            kind,
        )
        .fenced_by_lock(self.fenced_by_lock)
    }

    /// Runs `f` with a resolver of this deploy's template over the state now (resources
    /// as recorded, everything else from the lookups' answers). Do not hold the state
    /// across an `.await`: `f` is synchronous.
    pub(crate) fn with_resolver<T>(&self, f: impl FnOnce(&Resolver<'_>) -> T) -> T {
        let state = self.recorder.state();
        let sealed = self.sealed.read();
        let env = DeployEnv {
            state: &state,
            answers: &self.answers,
            sealed: Some(&sealed),
        };
        let resolver = Resolver::new(
            &self.input.template,
            &self.input.parameters,
            &self.input.pseudo,
            &self.conditions,
            &env,
            Mode::Deploy,
        );
        f(&resolver)
    }

    /// Resolves a resource's properties against the state now (dynamic references stay
    /// as their text; the caller masks `NoEcho` values before recording).
    pub(crate) fn resolve_resource(&self, id: &str) -> Result<Map<String, Value>, TemplateError> {
        self.with_resolver(|r| r.resolve_properties(id))
            .map_err(|e| e.in_file(&self.input.source))
    }

    /// What this deploy already did to `id`, from its journal.
    fn already_done(&self, id: &str) -> Option<Done> {
        let s = self.recorder.state();
        if s.journal.deploy_id.as_deref() != Some(&self.deploy_id) {
            return None;
        }
        s.journal
            .entries
            .iter()
            .rev()
            .find(|e| e.logical_id == id)
            .map(|e| match e.step {
                JournalStep::Created { .. } => Done::Created,
                JournalStep::Updated { .. } => Done::Updated,
                JournalStep::Replaced { .. } => Done::Replaced,
            })
    }
}
