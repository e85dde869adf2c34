//! The engine's context: what every handler of a deploy, a destroy and a rollback needs
//! (the store, the router, the lookups, who runs it), the run options, and the lock.

use std::sync::Arc;
use std::time::SystemTime;

use stackflow_core::TemplateError;
use stackflow_core::deployable::Deployable;
use stackflow_core::plan::Plan;
use stackflow_core::secrets::DigestKey;
use stackflow_events::event::{Event, Holder};
use stackflow_events::{EventStore, Precondition, StoreError, StreamId};
use stackflow_providers::router::Router;
use tokio::sync::watch;

use crate::limits::{GLOBAL_CAP, Limits};
use crate::lookups::Lookups;
use crate::progress::{Progress, ProgressEvent};
use crate::recorder::Recorder;
use crate::stack::StackInput;

/// Why a deploy, destroy or rollback could not run (as opposed to a resource that failed,
/// which a [`StackReport`](crate::report::StackReport) tells).
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The template is wrong.
    #[error(transparent)]
    Template(#[from] TemplateError),
    /// The event store failed, or the stack is locked.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The plan a reviewer approved is not the plan of now: nothing was done.
    #[error("{0}")]
    PlanMoved(String),
    /// The template has resource types the engine may not deploy: nothing was done.
    #[error("{0}")]
    NotAllowed(String),
    /// The run was asked for what it cannot do (a name it does not know, a stack that
    /// cannot be destroyed yet, a template the checks refuse): nothing was changed.
    #[error("{0}")]
    Refused(String),
    /// A lookup the plan needs failed (strict): nothing was changed.
    #[error("{0}")]
    Lookup(String),
    /// This run lost the stack's lock (its lease ran out, or it was broken): it stopped
    /// and wrote nothing after.
    #[error("{0}")]
    LockLost(String),
    /// What the run found needs someone to act (an interrupted rollback it could not
    /// finish, a lock it could not release): the message says what to run.
    #[error("{0}")]
    NeedsOperator(String),
    /// An invariant of the engine does not hold (a defect): the message says which.
    #[error("{0}")]
    Internal(String),
}

/// A plan someone reviewed (a saved plan, or one approved at the prompt): a deploy given
/// one starts only if its own plan is the same, before the lock and again after it.
#[derive(Debug, Clone)]
pub struct ExpectedPlan {
    /// [`stackflow_core::plan::review::digest`] of the reviewed plan.
    pub digest: String,
    /// The reviewed plan itself, when at hand: the refusal then says what moved.
    pub plan: Option<Plan>,
}

impl ExpectedPlan {
    /// A reviewed plan known by its digest only (a remote start carries no more).
    pub fn digest(digest: String) -> ExpectedPlan {
        ExpectedPlan { digest, plan: None }
    }

    /// A reviewed plan.
    pub fn of(plan: Plan) -> ExpectedPlan {
        ExpectedPlan {
            digest: stackflow_core::plan::review::digest(&plan),
            plan: Some(plan),
        }
    }

    /// `Err` naming what moved when `now` is not the reviewed plan of stack `stack`.
    pub fn check(&self, stack: &str, now: &Plan) -> Result<(), EngineError> {
        if stackflow_core::plan::review::digest(now) == self.digest {
            return Ok(());
        }
        let moved = match &self.plan {
            Some(reviewed) => stackflow_core::plan::review::differences(reviewed, now)
                .iter()
                .map(|d| format!("\n  - {d}"))
                .collect::<String>(),
            None => String::new(),
        };
        Err(EngineError::PlanMoved(format!(
            "stack {stack}: the records or the template moved since the plan was reviewed, \
             so it is not applied (nothing was changed):{moved}\n\
             review the plan of now with `stackflow diff` and deploy again"
        )))
    }
}

/// `Err` naming every resource of `input` (nested stacks included) whose type `allowed`
/// does not permit.
pub fn check_allowed(allowed: Option<&Deployable>, input: &StackInput) -> Result<(), EngineError> {
    let Some(allowed) = allowed else {
        return Ok(());
    };
    let refused = allowed.refusals(&input.source, &input.template, &input.nested);
    if refused.is_empty() {
        Ok(())
    } else {
        Err(EngineError::NotAllowed(
            allowed.refusal(&input.name, &refused),
        ))
    }
}

/// How a deploy runs.
#[derive(Debug, Clone)]
pub struct DeployOptions {
    /// Keep what a failed deploy did (undo it later with `rollback`).
    pub no_rollback: bool,
    /// At most this many resource actions at once, all services together.
    pub concurrency: usize,
    /// Each AWS service's own limit adapts to its throttling ([`crate::limits`]): true
    /// unless the user pinned the concurrency.
    pub adaptive: bool,
    /// The services' limits, shared by the phases of the run and its nested stacks.
    pub limits: Arc<Limits>,
    /// Turns true when the user asks to stop: nothing new starts, running calls finish.
    /// A receiver whose sender is gone reads as "no stop can come".
    pub stop: watch::Receiver<bool>,
    /// The deploy id to use (a remote start names its execution after it); a new one
    /// when `None`.
    pub deploy_id: Option<String>,
    /// Replace resources that hold data (tables, buckets, databases, ...) when the plan
    /// says so; refused before any write otherwise.
    pub allow_stateful_replacement: bool,
    /// The plan a reviewer approved: the deploy starts only if its plan is that one.
    pub expected_plan: Option<ExpectedPlan>,
    /// The resource types this engine may deploy (an installed engine's
    /// `STACKFLOW_ALLOWED_TYPES`): any other is refused before any AWS call. Every type
    /// when `None`.
    pub allowed_types: Option<Deployable>,
}

impl DeployOptions {
    /// Defaults: rollback on, adaptive limits per service under a cap of
    /// [`GLOBAL_CAP`], never stopped.
    pub fn new() -> DeployOptions {
        // The sender is dropped here: the scheduler reads a closed channel as "no stop
        // can come", and nothing outlives the options.
        let (_, rx) = watch::channel(false);
        DeployOptions {
            no_rollback: false,
            concurrency: GLOBAL_CAP,
            adaptive: true,
            limits: Arc::default(),
            stop: rx,
            deploy_id: None,
            allow_stateful_replacement: false,
            expected_plan: None,
            allowed_types: None,
        }
    }

    /// The options a rollback of this run goes by: the same concurrency and limits, never
    /// stopped (a stop asked during the deploy ends it; the rollback still undoes it).
    pub fn for_rollback(&self) -> DeployOptions {
        let (_, stop) = watch::channel(false);
        DeployOptions {
            stop,
            ..self.clone()
        }
    }

    /// The same options with the concurrency pinned at `n` (no adaptation).
    pub fn pinned(mut self, n: usize) -> DeployOptions {
        self.concurrency = n.max(1);
        self.adaptive = false;
        self
    }

    /// The same options with a stop signal.
    pub fn with_stop(mut self, stop: watch::Receiver<bool>) -> DeployOptions {
        self.stop = stop;
        self
    }

    /// True when the user asked to stop.
    pub fn stopped(&self) -> bool {
        *self.stop.borrow()
    }
}

impl Default for DeployOptions {
    fn default() -> Self {
        DeployOptions::new()
    }
}

/// Decides whether a lock holder is gone (its process died), so that its lock may be
/// broken and its interrupted work reconciled. It answers `true` only where that can be
/// proven; when in doubt the lock is left alone.
pub type StaleCheck = Arc<dyn Fn(&Holder) -> bool + Send + Sync>;

/// A stale check that never breaks a lock (Lambda tasks, tests).
pub fn never_stale() -> StaleCheck {
    Arc::new(|_| false)
}

/// Everything a deploy needs besides the stack: the store, the providers, the lookups.
pub struct Engine<S> {
    /// The event store.
    pub store: Arc<S>,
    /// Picks the provider of each resource.
    pub providers: Arc<dyn Router>,
    /// AWS lookups.
    pub lookups: Arc<dyn Lookups>,
    /// The region deployed to.
    pub region: String,
    /// Who runs the deploys (`user@host pid N`, an execution ARN).
    pub who: String,
    /// Read other stacks' exports and outputs from CloudFormation when stackflow has not
    /// recorded them.
    pub cloudformation_fallback: bool,
    /// Where progress goes.
    pub progress: Arc<dyn Progress>,
    /// Whether a lock holder is gone.
    pub stale: StaleCheck,
    /// How long a lock this engine takes is leased for (renewed while the run lives;
    /// once passed, another run may take the lock). `None`: locks are held until released
    /// or broken explicitly (Step Functions executions).
    pub lease: Option<std::time::Duration>,
    /// The key of the digests recorded in place of secret values (one per store; each
    /// stack derives its own from it). `None` records a bare mask, so a changed secret
    /// is not seen as a change.
    pub digest_key: Option<DigestKey>,
}

/// Where a nested stack's provider finds its templates: the parent's input when the
/// parent is being deployed; none when only deletes can happen (destroy, rollback).
#[derive(Clone, Copy)]
pub(crate) struct NestedContext<'a> {
    pub parent: Option<&'a Arc<StackInput>>,
    pub options: &'a DeployOptions,
}

impl<S: EventStore + 'static> Engine<S> {
    /// The stream of `stack` in this engine's region.
    pub fn stream(&self, stack: &str) -> StreamId {
        StreamId::new(&self.region, stack)
    }

    pub(crate) fn note(&self, stack: &str, message: &str) {
        self.progress.report(ProgressEvent::Note { stack, message });
    }

    /// Takes the stack's lock by appending `event` (the run's first event), breaking the
    /// lock of a holder that is gone; then reads the stream again, so that the run plans
    /// from the state after the lock, not from what it read before (unless the lock's
    /// event went right after what was read: nothing came in between).
    /// Takes the stack's lock for run `id` (a `LockTaken` for `operation`, under the run's
    /// `locked` key): the runs that record no `DeployStarted` (import, drift's accept and
    /// revert, refresh-observed, orphan). What [`Self::take_lock`] says holds.
    pub(crate) async fn lock_run(
        &self,
        rec: &Recorder<S>,
        id: &str,
        operation: &str,
    ) -> Result<(), EngineError> {
        let holder = self.holder(id, operation);
        let event = Event::LockTaken {
            holder: holder.clone(),
        };
        let key = crate::keys::run_key(id, crate::keys::RunEvent::Locked);
        self.take_lock(rec, key, event, holder).await
    }

    /// Takes the stack's lock with `event` (under `key`) for `holder`: see [`Self::lock_run`].
    pub(crate) async fn take_lock(
        &self,
        rec: &Recorder<S>,
        key: String,
        event: Event,
        holder: Holder,
    ) -> Result<(), EngineError> {
        let take = Precondition::TakeLock(holder);
        let read_up_to = rec.state().seq;
        match rec.append(key.clone(), event.clone(), &take).await {
            // Nothing was appended between the read and the lock (positions have no
            // holes): what was read is the log as it is.
            Ok(seq) if seq == read_up_to + 1 => return Ok(()),
            Ok(_) => {}
            Err(StoreError::Locked { holder: current }) => {
                let gone = (self.stale)(&current);
                let why = match &current.expires {
                    _ if gone => "its process is gone".to_string(),
                    Some(end) if crate::lease_time::expired(&current, SystemTime::now()) => {
                        format!("its lease ended at {end}")
                    }
                    _ => return Err(StoreError::Locked { holder: current }.into()),
                };
                self.note(
                    &rec.stream().stack,
                    &format!(
                        "breaking the lock of {} ({} {}): {why}",
                        current.who, current.operation, current.deploy_id
                    ),
                );
                rec.store()
                    .break_lock(rec.stream(), &format!("{} ({why})", self.who))
                    .await?;
                rec.reload().await?;
                rec.append(key, event, &take).await?;
            }
            Err(e) => return Err(e.into()),
        }
        // What was read before the lock may be stale: another run may have finished in
        // between (or a retried take found its own earlier one). Everything after the
        // lock starts from the log as it is now.
        rec.reload().await?;
        Ok(())
    }
}

/// A holder record for run `id` of `operation` by `who`, starting now.
pub(crate) fn holder(id: &str, who: &str, operation: &str) -> Holder {
    Holder {
        deploy_id: id.to_string(),
        who: who.to_string(),
        since: stackflow_events::event::now(),
        operation: operation.to_string(),
        expires: None,
        fenced: None,
    }
}

impl<S> Engine<S> {
    /// The holder of a lock run `id` of `operation` takes now: leased when the engine
    /// takes leases.
    pub(crate) fn holder(&self, id: &str, operation: &str) -> Holder {
        let mut h = holder(id, &self.who, operation);
        h.expires = self.lease.map(crate::lease_time::until);
        h
    }
}
