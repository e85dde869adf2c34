//! The one place an action on a resource is recorded: its intent before the provider
//! call, and its outcome after (done, failed with a masked error, skipped, retained,
//! reconciled). Every create, update, replacement, delete, retain, undo and replay of the
//! engine goes through a [`Step`], so every event about an action has the same key shape
//! and names the same deploy.

use serde_json::{Map, Value};
use stackflow_events::event::{ErrorInfo, Event, Operation, ProviderKind, ResourceRecord};
use stackflow_events::{EventStore, Precondition};
use stackflow_providers::provider::ResourceRequest;

use crate::engine::EngineError;
use crate::keys::{ActionKey, Phase, op_name};
use crate::recorder::Recorder;
use crate::report::Failure;

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

    /// A journal entry was undone (`how`: deleted, restored, retained, already-gone).
    pub async fn undone(&self, how: &str) -> Result<(), EngineError> {
        self.append(
            Phase::Done,
            Event::RollbackEntryUndone {
                deploy_id: self.deploy_id.to_string(),
                logical_id: self.logical_id.to_string(),
                how: how.to_string(),
            },
        )
        .await
    }
}
