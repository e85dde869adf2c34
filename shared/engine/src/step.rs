//! The one place an action on a resource is recorded and carried out. A builder (a
//! deploy's provision and cleanup, a rollback, a reconcile, a drift revert) says what the
//! action is, a [`StepKind`], which names its key and its operation; [`Step::apply`]
//! writes the intent, makes the one provider call the kind calls for and reads the
//! answer once into an [`Answer`]; the outcome is recorded through the step too (done,
//! failed with a masked error, skipped, retained, reconciled, undone;
//! [`Step::settle_delete`] for a delete's every answer). So every event about an action
//! has the same key shape and names the same deploy; the reads that are no action (a
//! baseline, an import's lookup) are [`read_current`] and [`find`]. No other module of
//! the engine calls a provider.

use serde_json::{Map, Value};
use stackflow_events::event::{ErrorInfo, Event, Operation, ProviderKind, ResourceRecord};
use stackflow_events::{EventStore, Precondition};
use stackflow_providers::ProviderError;
use stackflow_providers::provider::{
    Created, CurrentState, Deleted, Imported, Provider, ResourceRequest, Updated,
};

use crate::engine::EngineError;
use crate::keys::{ActionKey, Phase, op_name};
use crate::recorder::Recorder;
use crate::report::{Failure, Undone};
use crate::secrets::Masker;

/// What a step does: the closed set of actions on one resource, each with what its call
/// needs. The kind names the action's key (its token, the keys of its events) and its
/// operation, and chooses the provider call [`Step::apply`] makes.
#[derive(Clone, Copy)]
pub(crate) enum StepKind<'a> {
    /// A create.
    Create(Attempt<'a>),
    /// The create of a replacement (its predecessor is deleted in the cleanup).
    CreateReplacement(Attempt<'a>),
    /// An update in place.
    Update,
    /// The delete of a resource the stack no longer has (or of each one, in a destroy).
    Delete,
    /// The delete of `physical_id`, a predecessor a replacement left.
    DeleteReplaced { physical_id: &'a str },
    /// A journal entry undone: the delete of what the deploy made (`restore` false), or
    /// an update back to what the resource held before (`restore` true).
    Undo { restore: bool },
    /// An interrupted call of an earlier run (`op`), made again under its recorded token:
    /// its intent is there already.
    Replay { token: &'a str, op: Operation },
    /// A drift revert: an update back to the baseline.
    Revert,
}

/// Which try of a create a step is.
#[derive(Clone, Copy)]
pub(crate) enum Attempt<'a> {
    /// The first: a name that is taken is adopted only when `ours` says the stack's
    /// records hold what is under it ([`Step::apply`]).
    First(&'a (dyn Fn(&str) -> bool + Sync)),
    /// Made again, when this stack's own intent shows it was tried before: adopted only
    /// on proof that the earlier try made it.
    Again,
}

impl StepKind<'_> {
    /// The operation the step's events name.
    fn operation(self) -> Operation {
        match self {
            StepKind::Create(_) => Operation::Create,
            StepKind::CreateReplacement(_) => Operation::Replace,
            StepKind::Update | StepKind::Revert => Operation::Update,
            StepKind::Delete | StepKind::DeleteReplaced { .. } => Operation::Delete,
            StepKind::Undo { .. } => Operation::Undo,
            StepKind::Replay { op, .. } => op,
        }
    }

    /// The step's key in run `run`.
    fn key(self, run: &str, logical_id: &str) -> ActionKey {
        match self {
            StepKind::DeleteReplaced { physical_id } => {
                ActionKey::delete_old(run, logical_id, physical_id)
            }
            StepKind::Replay { token, .. } => ActionKey::from_token(token),
            kind => ActionKey::new(run, logical_id, kind.operation()),
        }
    }
}

/// What the intent of a step says before its call: the provider, the resource it acts on
/// when it exists, the properties it sends (as recorded).
pub(crate) struct Intent {
    pub provider: ProviderKind,
    pub physical_id: Option<String>,
    pub properties: Option<Map<String, Value>>,
}

/// A provider's answer to a step's call, read once.
#[derive(Debug)]
pub(crate) enum Answer {
    /// Made (or adopted: its own, proven).
    Created(Created),
    /// Updated (`replaced`: the provider made a new one itself).
    Updated(Updated),
    /// Deleted now.
    Deleted,
    /// Gone before the delete (AWS said it is not there): done all the same.
    AlreadyGone,
    /// The provider deliberately left it in place: it stays recorded.
    Skipped(String),
    /// Nothing can delete it any more: it leaves the stack, as if retained.
    Abandoned(String),
    /// The call failed.
    Failed(ProviderError),
}

impl Answer {
    /// The error of a builder that got an answer its step's kind cannot give (an update
    /// that answered as a delete): the engine's fault, named without the answer's values.
    pub fn unexpected<S>(&self, step: &Step<'_, S>) -> EngineError {
        let answer = match self {
            Answer::Created(_) => "created",
            Answer::Updated(_) => "updated",
            Answer::Deleted => "deleted",
            Answer::AlreadyGone => "already gone",
            Answer::Skipped(_) => "skipped",
            Answer::Abandoned(_) => "abandoned",
            Answer::Failed(_) => "failed",
        };
        EngineError::Internal(format!(
            "{}: its {} step was answered '{answer}'",
            step.logical_id,
            op_name(step.op)
        ))
    }
}

/// How a delete ended, as [`Step::settle_delete`] recorded it.
#[derive(Debug)]
pub(crate) enum Deletion {
    /// Deleted, or gone already: recorded as deleted.
    Deleted,
    /// Left in place by the provider, on purpose: recorded as skipped; it stays recorded.
    Skipped(String),
    /// Nothing can delete it: recorded as retained; it leaves the stack.
    Retained(String),
    /// The call failed: nothing recorded (what it means is the run's to say).
    Failed(ProviderError),
}

/// One action on one resource.
pub(crate) struct Step<'a, S> {
    /// The stream.
    pub rec: &'a Recorder<S>,
    /// What every append of the action requires (the run holds the lock).
    pub pre: &'a Precondition,
    /// The deploy the events are about (a rollback's name the deploy it undoes).
    pub deploy_id: &'a str,
    /// The action's key and token.
    pub key: ActionKey,
    /// The resource.
    pub logical_id: &'a str,
    /// Its type.
    pub resource_type: &'a str,
    /// What is done.
    pub op: Operation,
    /// What is done, and how it is called.
    kind: StepKind<'a>,
    /// Its intent needs the lock open ([`Precondition::HoldsOpenLock`]): a forward action
    /// of a deploy on Step Functions, refused once the deploy's Fail fenced the lock.
    open_lock: bool,
}

impl<'a, S: EventStore> Step<'a, S> {
    /// The step `kind` on resource `logical_id` (of type `resource_type`) in run `run`,
    /// whose events are about deploy `deploy_id` (the run itself, but for a rollback,
    /// whose events name the deploy it undoes).
    pub fn new(
        rec: &'a Recorder<S>,
        pre: &'a Precondition,
        (run, deploy_id): (&str, &'a str),
        (logical_id, resource_type): (&'a str, &'a str),
        kind: StepKind<'a>,
    ) -> Step<'a, S> {
        Step {
            rec,
            pre,
            deploy_id,
            key: kind.key(run, logical_id),
            logical_id,
            resource_type,
            op: kind.operation(),
            kind,
            open_lock: false,
        }
    }

    /// This step's intent is refused ([`stackflow_events::StoreError::Fenced`]) once the
    /// run's lock is fenced, when `yes` (an undo's never is).
    pub fn fenced_by_lock(mut self, yes: bool) -> Step<'a, S> {
        self.open_lock = yes && self.op != Operation::Undo;
        self
    }

    async fn append(&self, phase: Phase, event: Event) -> Result<(), EngineError> {
        self.rec
            .append(self.key.event(phase), event, self.pre)
            .await?;
        Ok(())
    }

    /// A request for this action's provider call, with its idempotency token.
    pub fn request(&self, properties: Map<String, Value>) -> ResourceRequest {
        let mut request = ResourceRequest::new(
            &self.rec.stream().stack,
            self.logical_id,
            self.resource_type,
            properties,
        );
        request.token = self.key.token().to_string();
        request.stack_id = self.rec.state().stack_id.clone();
        request
    }

    /// Announces the call: appended before it is made (under an open lock, for a step
    /// [`Step::fenced_by_lock`]).
    pub async fn intent(
        &self,
        provider: ProviderKind,
        physical_id: Option<String>,
        properties: Option<Map<String, Value>>,
    ) -> Result<(), EngineError> {
        let open;
        let pre = match self.pre {
            Precondition::HoldsLock(id) if self.open_lock => {
                open = Precondition::HoldsOpenLock(id.clone());
                &open
            }
            pre => pre,
        };
        let event = Event::ResourceIntent {
            deploy_id: self.deploy_id.to_string(),
            logical_id: self.logical_id.to_string(),
            resource_type: self.resource_type.to_string(),
            operation: self.op,
            token: self.key.token().to_string(),
            provider,
            physical_id,
            properties,
        };
        self.rec
            .append(self.key.event(Phase::Intent), event, pre)
            .await?;
        Ok(())
    }

    /// A resource was made (`replaces`: the physical id of its predecessor).
    pub async fn created(
        &self,
        phase: Phase,
        resource: ResourceRecord,
        replaces: Option<String>,
    ) -> Result<(), EngineError> {
        self.append(
            phase,
            Event::ResourceCreated {
                deploy_id: self.deploy_id.to_string(),
                resource,
                replaces,
                baseline: None,
            },
        )
        .await
    }

    /// A resource was updated in place (its baseline is read afresh after).
    pub async fn updated(
        &self,
        phase: Phase,
        resource: ResourceRecord,
        previous_properties: Map<String, Value>,
    ) -> Result<(), EngineError> {
        self.updated_keeping(phase, resource, previous_properties, None)
            .await
    }

    /// A resource was updated in place and its baseline is `baseline` (a revert put AWS
    /// back to it); `None` as [`Step::updated`].
    pub async fn updated_keeping(
        &self,
        phase: Phase,
        resource: ResourceRecord,
        previous_properties: Map<String, Value>,
        baseline: Option<stackflow_events::event::Baseline>,
    ) -> Result<(), EngineError> {
        self.append(
            phase,
            Event::ResourceUpdated {
                deploy_id: self.deploy_id.to_string(),
                resource,
                previous_properties,
                baseline,
            },
        )
        .await
    }

    /// A resource (or an old copy of one: `replaced`) is gone.
    pub async fn deleted(
        &self,
        phase: Phase,
        physical_id: String,
        replaced: bool,
    ) -> Result<(), EngineError> {
        self.append(
            phase,
            Event::ResourceDeleted {
                deploy_id: self.deploy_id.to_string(),
                logical_id: self.logical_id.to_string(),
                physical_id,
                replaced,
            },
        )
        .await
    }

    /// A resource leaves the stack and stays in AWS: no call is made.
    pub async fn retained(
        &self,
        physical_id: String,
        reason: String,
        replaced: bool,
    ) -> Result<(), EngineError> {
        self.append(
            Phase::Retained,
            Event::ResourceRetained {
                deploy_id: self.deploy_id.to_string(),
                logical_id: self.logical_id.to_string(),
                physical_id,
                reason,
                replaced,
            },
        )
        .await
    }

    /// The action was not carried out, and why.
    pub async fn skipped(&self, phase: Phase, reason: &str) -> Result<(), EngineError> {
        self.append(
            phase,
            Event::ResourceSkipped {
                deploy_id: self.deploy_id.to_string(),
                logical_id: self.logical_id.to_string(),
                operation: self.op,
                reason: reason.to_string(),
            },
        )
        .await
    }

    /// The action failed with `error` (already masked): recorded, and returned for the
    /// report.
    pub async fn failed(&self, phase: Phase, error: ErrorInfo) -> Result<Failure, EngineError> {
        self.append(
            phase,
            Event::ResourceFailed {
                deploy_id: self.deploy_id.to_string(),
                logical_id: self.logical_id.to_string(),
                operation: self.op,
                error: error.clone(),
            },
        )
        .await?;
        Ok(Failure {
            logical_id: self.logical_id.to_string(),
            resource_type: self.resource_type.to_string(),
            action: op_name(self.op).to_string(),
            error,
        })
    }

    /// A journal entry was undone, and how.
    pub async fn undone(&self, how: Undone) -> Result<(), EngineError> {
        self.append(
            Phase::Done,
            Event::RollbackEntryUndone {
                deploy_id: self.deploy_id.to_string(),
                logical_id: self.logical_id.to_string(),
                how: how.as_str().to_string(),
            },
        )
        .await
    }

    /// Carries the step out: appends its intent (a replay has it already), makes the
    /// provider call its kind calls for with `request`, and reads the answer once.
    pub async fn apply(
        &self,
        provider: &dyn Provider,
        request: &ResourceRequest,
        intent: Option<Intent>,
    ) -> Result<Answer, EngineError> {
        debug_assert_eq!(
            intent.is_none(),
            matches!(self.kind, StepKind::Replay { .. }),
            "a step writes its intent unless it replays one"
        );
        if let Some(i) = intent {
            self.intent(i.provider, i.physical_id, i.properties).await?;
        }
        let created = |made: Result<Created, ProviderError>| match made {
            Ok(c) => Answer::Created(c),
            Err(e) => Answer::Failed(e),
        };
        Ok(match self.kind {
            StepKind::Create(Attempt::First(ours))
            | StepKind::CreateReplacement(Attempt::First(ours)) => {
                created(create_first(provider, request, ours).await)
            }
            StepKind::Create(Attempt::Again) | StepKind::CreateReplacement(Attempt::Again) => {
                created(create_again(provider, request).await)
            }
            StepKind::Replay { op, .. } => match op {
                Operation::Create | Operation::Replace => {
                    created(create_again(provider, request).await)
                }
                Operation::Update => update(provider, request).await,
                Operation::Delete | Operation::Undo => delete(provider, request).await,
            },
            StepKind::Update | StepKind::Revert | StepKind::Undo { restore: true } => {
                update(provider, request).await
            }
            StepKind::Delete
            | StepKind::DeleteReplaced { .. }
            | StepKind::Undo { restore: false } => delete(provider, request).await,
        })
    }

    /// Records what a delete's `answer` means for the stack, at `phase` when it is done:
    /// deleted (or gone already), skipped (it stays recorded) or retained (abandoned: it
    /// leaves the stack), each reason masked by `masker`; a failure is returned
    /// unrecorded. `physical_id` is what was deleted; `replaced` when it was a
    /// predecessor.
    pub async fn settle_delete(
        &self,
        answer: Answer,
        phase: Phase,
        physical_id: &str,
        replaced: bool,
        masker: &Masker<'_>,
    ) -> Result<Deletion, EngineError> {
        Ok(match answer {
            Answer::Deleted | Answer::AlreadyGone => {
                self.deleted(phase, physical_id.to_string(), replaced)
                    .await?;
                Deletion::Deleted
            }
            Answer::Skipped(reason) => {
                let reason = masker.text(&reason);
                self.skipped(Phase::Skipped, &reason).await?;
                Deletion::Skipped(reason)
            }
            Answer::Abandoned(reason) => {
                let reason = masker.text(&reason);
                self.retained(physical_id.to_string(), reason.clone(), replaced)
                    .await?;
                Deletion::Retained(reason)
            }
            Answer::Failed(e) => Deletion::Failed(e),
            other @ (Answer::Created(_) | Answer::Updated(_)) => {
                return Err(other.unexpected(self));
            }
        })
    }
}

/// An update in place (the provider may answer that it replaced the resource).
async fn update(provider: &dyn Provider, request: &ResourceRequest) -> Answer {
    match provider.update(request).await {
        Ok(u) => Answer::Updated(u),
        Err(e) => Answer::Failed(e),
    }
}

/// A delete, its answer read once.
async fn delete(provider: &dyn Provider, request: &ResourceRequest) -> Answer {
    match provider.delete(request).await {
        Ok(Deleted::Done) => Answer::Deleted,
        Ok(Deleted::Skipped { reason }) => Answer::Skipped(reason),
        Ok(Deleted::Abandoned { reason }) => Answer::Abandoned(reason),
        Err(ProviderError::NotFound(_)) => Answer::AlreadyGone,
        Err(e) => Answer::Failed(e),
    }
}

/// The first call of a create (no intent of it was there before). A name that is taken
/// is adopted only when `ours` says the stack's records hold what is under it (a
/// replaced predecessor a killed deploy did not delete yet, which the template names
/// again), and brought to `request`'s properties ([`adopt_own`]); anything else is
/// someone else's, refused.
async fn create_first(
    provider: &dyn Provider,
    request: &ResourceRequest,
    ours: &(dyn Fn(&str) -> bool + Sync),
) -> Result<Created, ProviderError> {
    let taken = match provider.create(request).await {
        Err(ProviderError::AlreadyExists(taken)) => taken,
        other => return other,
    };
    match provider.import(request).await {
        Ok(Imported::Found { physical_id, .. }) if ours(&physical_id) => {
            adopt_own(provider, request, physical_id).await
        }
        _ => Err(ProviderError::AlreadyExists(taken)),
    }
}

/// A create made again, when this stack's own intent shows it was tried before (an
/// interrupted or retried create): the provider answers with what that call made, or
/// makes it now. The intent does not show that the call reached AWS, so a named resource
/// that exists is adopted only on proof that this create made it ([`Provider::made_by`]:
/// the mark the create left), and then brought to `request`'s properties
/// ([`adopt_own`]). Anything else under the name is someone else's: refused, untouched
/// and unrecorded.
async fn create_again(
    provider: &dyn Provider,
    request: &ResourceRequest,
) -> Result<Created, ProviderError> {
    let taken = match provider.create(request).await {
        Err(ProviderError::AlreadyExists(taken)) => taken,
        other => return other,
    };
    let Ok(Imported::Found { physical_id, .. }) = provider.import(request).await else {
        return Err(ProviderError::AlreadyExists(taken));
    };
    let mut found = request.clone();
    found.physical_id = Some(physical_id.clone());
    match provider.made_by(&found).await {
        Ok(true) => adopt_own(provider, request, physical_id).await,
        Ok(false) => Err(not_proven(request, &physical_id)),
        Err(e) => Err(e.context(format_args!(
            "{physical_id} exists, and whether this stack made it could not be read; not \
             adopted"
        ))),
    }
}

/// Adopts `physical_id`, a resource this stack made (its own intent or records say so),
/// for the create `request`: an update from what AWS holds now (when the provider can
/// read it; else from nothing, so every property is set) to `request`'s properties. A
/// resource adopted by name may have been made with other properties (an earlier
/// template's, or a create that stopped half way), and recording the template's
/// properties without applying them would leave, say, a bucket without its encryption.
async fn adopt_own(
    provider: &dyn Provider,
    request: &ResourceRequest,
    physical_id: String,
) -> Result<Created, ProviderError> {
    let mut apply = request.clone();
    apply.physical_id = Some(physical_id.clone());
    apply.previous_properties = match provider.read_current_state(&apply).await {
        Ok(CurrentState::Found(now)) => Some(now),
        _ => Some(Map::new()),
    };
    let updated = provider.update(&apply).await.map_err(|e| {
        e.context(format_args!(
            "{physical_id} exists and is this stack's own, but bringing it to the \
             template's properties failed"
        ))
    })?;
    Ok(Created {
        physical_id: updated.physical_id,
        attributes: updated.attributes,
        sensitive: updated.sensitive,
    })
}

/// The refusal of a create made again that found `physical_id` under its name without
/// proof that it made it.
fn not_proven(request: &ResourceRequest, physical_id: &str) -> ProviderError {
    ProviderError::AlreadyExists(format!(
        "{physical_id} exists, not made by this stack: an earlier run was interrupted before \
         this create's outcome was recorded, but nothing on the resource shows that the \
         create made it (it may be someone else's), so it is not adopted, changed or ever \
         deleted. If it is this stack's, adopt it with `stackflow import --stack {stack} \
         --resource {id}={physical_id}`; else give {id} another name",
        stack = request.stack_name,
        id = request.logical_id
    ))
}

/// What AWS holds of the resource `request` names, as the provider reads it (a baseline
/// read: no action, nothing recorded here). A failed read is `CannotRead`, with why.
pub(crate) async fn read_current(
    provider: &dyn Provider,
    request: &ResourceRequest,
) -> CurrentState {
    match provider.read_current_state(request).await {
        Ok(state) => state,
        Err(e) => CurrentState::CannotRead(e.to_string()),
    }
}

/// The resource `request` names, looked up by the provider (an import's search: no
/// action, nothing recorded here).
pub(crate) async fn find(
    provider: &dyn Provider,
    request: &ResourceRequest,
) -> Result<Imported, ProviderError> {
    provider.import(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_names_its_operation_and_key() {
        let ours = |_: &str| false;
        let first = Attempt::First(&ours);
        let cases = [
            (StepKind::Create(first), Operation::Create, "d1/A/create"),
            (
                StepKind::Create(Attempt::Again),
                Operation::Create,
                "d1/A/create",
            ),
            (
                StepKind::CreateReplacement(first),
                Operation::Replace,
                "d1/A/replace",
            ),
            (StepKind::Update, Operation::Update, "d1/A/update"),
            (StepKind::Revert, Operation::Update, "d1/A/update"),
            (StepKind::Delete, Operation::Delete, "d1/A/delete"),
            (
                StepKind::Undo { restore: true },
                Operation::Undo,
                "d1/A/undo",
            ),
            (
                StepKind::Undo { restore: false },
                Operation::Undo,
                "d1/A/undo",
            ),
        ];
        for (kind, op, token) in cases {
            assert_eq!(kind.operation(), op);
            assert_eq!(kind.key("d1", "A").token(), token);
        }
        // A predecessor's delete is keyed by what it deletes: two in one run differ.
        let old = |p| StepKind::DeleteReplaced { physical_id: p };
        assert_eq!(old("q-1").operation(), Operation::Delete);
        assert_eq!(
            old("q-1").key("d1", "A"),
            ActionKey::delete_old("d1", "A", "q-1")
        );
        assert_ne!(old("q-1").key("d1", "A"), old("q-2").key("d1", "A"));
        // A replay is its intent's own token and operation, whatever run replays it.
        let replay = StepKind::Replay {
            token: "d0/A/create",
            op: Operation::Create,
        };
        assert_eq!(replay.operation(), Operation::Create);
        assert_eq!(replay.key("d9", "A").token(), "d0/A/create");
    }
}
