//! The **provision** handler: one create, update or replacement of one resource.

use indexmap::IndexMap;
use serde_json::{Map, Value};
use stackflow_core::plan::Action;
use stackflow_core::template::Policy;
use stackflow_events::EventStore;
use stackflow_events::event::{Operation, ProviderKind, ResourceRecord};
use stackflow_providers::ProviderError;
use stackflow_providers::provider::ResourceRequest;
use stackflow_providers::router::Routed;

use super::Deployment;
use crate::engine::EngineError;
use crate::keys::Phase;
use crate::report::{Done, Handled};
use crate::secrets::{Masker, for_record, resolve_dynamic};

/// What the template wants of one resource, as it is recorded.
struct Desired {
    logical_id: String,
    resource_type: String,
    /// The resolved properties, `NoEcho` values masked, dynamic references as text.
    properties: Map<String, Value>,
    dependencies: Vec<String>,
    deletion_policy: Option<Policy>,
    update_replace_policy: Option<Policy>,
}

impl Desired {
    fn record(
        &self,
        physical_id: String,
        attributes: IndexMap<String, Value>,
        provider: ProviderKind,
    ) -> ResourceRecord {
        ResourceRecord {
            logical_id: self.logical_id.clone(),
            resource_type: self.resource_type.clone(),
            physical_id,
            properties: self.properties.clone(),
            attributes,
            dependencies: self.dependencies.clone(),
            provider,
            deletion_policy: self.deletion_policy,
            update_replace_policy: self.update_replace_policy,
        }
    }
}

/// One provision call in flight: what it sends and to whom.
struct Call<'a> {
    desired: &'a Desired,
    routed: &'a Routed,
    request: ResourceRequest,
    masker: Masker<'a>,
    /// The recorded physical id and properties (update, replace).
    current: Option<(String, Map<String, Value>)>,
}

/// The operation of a planned action (a no-op downstream of an update is checked as a
/// possible update).
fn operation(action: Action, id: &str) -> Result<Operation, EngineError> {
    match action {
        Action::Create => Ok(Operation::Create),
        Action::Update | Action::NoOp => Ok(Operation::Update),
        Action::Replace => Ok(Operation::Replace),
        Action::Delete => Err(EngineError::Other(format!(
            "{id} is deleted in cleanup, not provisioned"
        ))),
    }
}

impl<S: EventStore + 'static> Deployment<S> {
    /// **Provision** handler: one create, update or replacement of resource `id`.
    pub async fn provision(&self, id: &str) -> Handled {
        let Some(rp) = self.plan.resource(id).cloned() else {
            return Err(EngineError::Other(format!(
                "resource {id} is not in the plan"
            )));
        };
        let op = operation(rp.action, id)?;
        // A retried task (its worker died after the outcome was recorded) finds it done.
        if let Some(done) = self.already_done(id) {
            return Ok(Ok(done));
        }
        let pre = self.holds();
        let ty = rp.resource_type.as_str();
        let step = self.step(&pre, id, ty, op);
        let plain = Masker {
            resolution: None,
            secrets: &self.secrets,
        };
        let props = match self.resolve_resource(id) {
            Ok(p) => p,
            Err(e) => {
                let info = plain.info("InvalidTemplate", &e.to_string());
                return Ok(Err(step.failed(Phase::Failed, info).await?));
            }
        };
        let desired = self.desired(id, ty, &props, &rp.depends_on);
        let current = self
            .recorder
            .state()
            .resources
            .get(id)
            .map(|r| (r.provider, r.physical_id.clone(), r.properties.clone()));
        if rp.action == Action::NoOp && current.as_ref().is_some_and(|c| c.2 == desired.properties)
        {
            return Ok(Ok(Done::Unchanged));
        }
        let recorded_kind = current.as_ref().map(|c| c.0);
        let routed = match self
            .engine
            .route(ty, &props, recorded_kind, self.nested_context())
        {
            Ok(r) => r,
            Err(message) => {
                let info = plain.info("Unsupported", &message);
                return Ok(Err(step.failed(Phase::Failed, info).await?));
            }
        };
        // A nested stack gets its parameters with dynamic references as text: its own
        // resources resolve them for their calls, so no value is written down.
        let resolved = if routed.kind == ProviderKind::NestedStack {
            Ok((props, Default::default()))
        } else {
            resolve_dynamic(self.engine.lookups.as_ref(), &props).await
        };
        let (call_props, resolution) = match resolved {
            Ok(x) => x,
            Err((name, message)) => {
                let info = plain.info(&name, &message);
                return Ok(Err(step.failed(Phase::Failed, info).await?));
            }
        };
        let call = Call {
            desired: &desired,
            routed: &routed,
            request: step.request(call_props),
            masker: Masker {
                resolution: Some(&resolution),
                secrets: &self.secrets,
            },
            current: current.map(|(_, p, props)| (p, props)),
        };
        match op {
            Operation::Create | Operation::Replace => self.create(call, op).await,
            _ => self.update(call).await,
        }
    }

    /// What the template wants of resource `id`, as it is recorded.
    fn desired(
        &self,
        id: &str,
        ty: &str,
        props: &Map<String, Value>,
        dependencies: &[String],
    ) -> Desired {
        let template = &self.input.template.resources[id];
        Desired {
            logical_id: id.to_string(),
            resource_type: ty.to_string(),
            properties: for_record(props, &self.secrets),
            dependencies: dependencies.to_vec(),
            deletion_policy: template.deletion_policy,
            update_replace_policy: template.update_replace_policy,
        }
    }

    /// A create (`op` Create) or the create of a replacement (`op` Replace).
    async fn create(&self, mut call: Call<'_>, op: Operation) -> Handled {
        let pre = self.holds();
        let d = call.desired;
        let step = self.step(&pre, &d.logical_id, &d.resource_type, op);
        let replaces = if op == Operation::Replace {
            call.current.as_ref().map(|c| c.0.clone())
        } else {
            None
        };
        // A nested stack's child is named before the call: the intent says which.
        let announced = replaces.clone().or_else(|| {
            (call.routed.kind == ProviderKind::NestedStack)
                .then(|| crate::nested::nested_stack_name(self.stack(), &d.logical_id))
        });
        step.intent(call.routed.kind, announced, Some(d.properties.clone()))
            .await?;
        call.request.token = step.key.token().to_string();
        call.request.physical_id = None;
        call.request.previous_properties = None;
        match call.routed.provider.create(&call.request).await {
            Ok(created) => {
                let record = d.record(created.physical_id, created.attributes, call.routed.kind);
                step.created(Phase::Done, record, replaces).await?;
                Ok(Ok(if op == Operation::Replace {
                    Done::Replaced
                } else {
                    Done::Created
                }))
            }
            Err(e) => Ok(Err(step
                .failed(Phase::Failed, call.masker.error(&e))
                .await?)),
        }
    }

    /// An update in place; a replacement when the provider says it cannot be made in
    /// place, or replaced the resource itself.
    async fn update(&self, mut call: Call<'_>) -> Handled {
        let pre = self.holds();
        let d = call.desired;
        let step = self.step(&pre, &d.logical_id, &d.resource_type, Operation::Update);
        let (physical, previous) = call.current.clone().unzip();
        step.intent(
            call.routed.kind,
            physical.clone(),
            Some(d.properties.clone()),
        )
        .await?;
        call.request.physical_id = physical.clone();
        call.request.previous_properties = previous.clone();
        match call.routed.provider.update(&call.request).await {
            Ok(updated) if !updated.replaced => {
                let record = d.record(updated.physical_id, updated.attributes, call.routed.kind);
                step.updated(Phase::Done, record, previous.unwrap_or_default())
                    .await?;
                Ok(Ok(Done::Updated))
            }
            Ok(updated) => {
                // The provider made a new resource itself: the old one is a predecessor,
                // deleted in cleanup.
                let replace = self.step(&pre, &d.logical_id, &d.resource_type, Operation::Replace);
                let record = d.record(updated.physical_id, updated.attributes, call.routed.kind);
                replace.created(Phase::Done, record, physical).await?;
                step.skipped(Phase::Skipped, "the provider replaced the resource")
                    .await?;
                Ok(Ok(Done::Replaced))
            }
            Err(ProviderError::NotUpdatable(why)) => {
                // AWS cannot make this change in place: replace instead.
                step.skipped(Phase::Skipped, &format!("not updatable in place: {why}"))
                    .await?;
                self.create(call, Operation::Replace).await
            }
            Err(e) => Ok(Err(step
                .failed(Phase::Failed, call.masker.error(&e))
                .await?)),
        }
    }
}
