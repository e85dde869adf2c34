//! The one place an action on a resource is recorded and carried out: its intent before
//! the provider call, the call itself with its answer read once into a type
//! ([`Step::create_first`], [`Step::create_again`], [`Step::update`], [`Step::delete`]),
//! and its outcome after (done, failed with a masked error, skipped, retained,
//! reconciled, undone). Every create, update, replacement, delete, retain, undo, revert
//! and replay of the engine goes through a [`Step`], so every event about an action has
//! the same key shape and names the same deploy; the reads that are no action (a
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
}

impl<S: EventStore> Step<'_, S> {
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

    /// Announces the call: appended before it is made.
    pub async fn intent(
        &self,
        provider: ProviderKind,
        physical_id: Option<String>,
        properties: Option<Map<String, Value>>,
    ) -> Result<(), EngineError> {
        self.append(
            Phase::Intent,
            Event::ResourceIntent {
                deploy_id: self.deploy_id.to_string(),
                logical_id: self.logical_id.to_string(),
                resource_type: self.resource_type.to_string(),
                operation: self.op,
                token: self.key.token().to_string(),
                provider,
                physical_id,
                properties,
            },
        )
        .await
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

    /// The first call of a create (no intent of it was there before). A name that is
    /// taken is adopted only when `ours` says the stack's records hold what is under it
    /// (a replaced predecessor a killed deploy did not delete yet, which the template
    /// names again), and brought to `request`'s properties ([`adopt_own`]); anything else
    /// is someone else's, refused.
    pub async fn create_first(
        &self,
        provider: &dyn Provider,
        request: &ResourceRequest,
        ours: impl Fn(&str) -> bool,
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
    /// makes it now. The intent does not show that the call reached AWS, so a named
    /// resource that exists is adopted only on proof that this create made it
    /// ([`Provider::made_by`]: the mark the create left), and then brought to `request`'s
    /// properties ([`adopt_own`]). Anything else under the name is someone else's:
    /// refused, untouched and unrecorded.
    pub async fn create_again(
        &self,
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

    /// An update in place (the provider may answer that it replaced the resource).
    pub async fn update(
        &self,
        provider: &dyn Provider,
        request: &ResourceRequest,
    ) -> Result<Updated, ProviderError> {
        provider.update(request).await
    }

    /// A delete, its answer read once.
    pub async fn delete(&self, provider: &dyn Provider, request: &ResourceRequest) -> DeleteAnswer {
        match provider.delete(request).await {
            Ok(Deleted::Done) => DeleteAnswer::Deleted,
            Ok(Deleted::Skipped { reason }) => DeleteAnswer::Skipped(reason),
            Ok(Deleted::Abandoned { reason }) => DeleteAnswer::Abandoned(reason),
            Err(ProviderError::NotFound(_)) => DeleteAnswer::AlreadyGone,
            Err(e) => DeleteAnswer::Failed(e),
        }
    }
}

/// How a delete ended, read once from the provider's whole answer.
#[derive(Debug)]
pub(crate) enum DeleteAnswer {
    /// Deleted now.
    Deleted,
    /// Gone before the call (AWS said it is not there): done all the same.
    AlreadyGone,
    /// The provider deliberately left it in place: it stays recorded.
    Skipped(String),
    /// Nothing can delete it any more: it leaves the stack, as if retained.
    Abandoned(String),
    /// The call failed.
    Failed(ProviderError),
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
