//! The **provision** handler: one create, update or replacement of one resource.

use std::collections::BTreeSet;

use indexmap::IndexMap;
use serde_json::{Map, Value};
use stackflow_core::graph::attribute_references;
use stackflow_core::plan::{Action, ResourcePlan};
use stackflow_core::secrets::contains_mask;
use stackflow_core::template::Policy;
use stackflow_events::EventStore;
use stackflow_events::event::{ErrorInfo, Operation, ProviderKind, ResourceRecord};
use stackflow_providers::ProviderError;
use stackflow_providers::provider::ResourceRequest;
use stackflow_providers::router::Routed;

use super::Deployment;
use stackflow_providers::router::Router as _;

use crate::engine::EngineError;
use crate::keys::Phase;
use crate::observe::{Observation, may_observe};
use crate::report::{Done, Handled};
use crate::secrets::{Masker, Resolved, masked_at, resolve_dynamic, resolved_secrets};
use crate::step::{Answer, Attempt, Intent, StepKind};

/// What the template wants of one resource, as it is recorded.
struct Desired {
    logical_id: String,
    resource_type: String,
    /// The resolved properties, values computed from secrets masked, dynamic references
    /// as text.
    properties: Map<String, Value>,
    /// The values computed from secrets, as sent: masked in messages and attributes.
    tainted: Vec<String>,
    /// The digest of what its dynamic references resolved to.
    secret_digest: Option<String>,
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
            secret_digest: self.secret_digest.clone(),
        }
    }
}

/// One provision call in flight: what it sends and to whom.
struct Call<'a> {
    desired: &'a Desired,
    routed: &'a Routed,
    request: ResourceRequest,
    masker: Masker<'a>,
    /// The secrets the call is sent (resolved dynamic references, tainted values): an
    /// attribute that holds one is recorded masked.
    needles: Vec<String>,
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
        Action::Delete => Err(EngineError::Internal(format!(
            "{id} is deleted in cleanup, not provisioned"
        ))),
    }
}

/// The step provision's `op` is, a create tried as `attempt` says.
fn step_kind(op: Operation, attempt: Attempt<'_>) -> StepKind<'_> {
    match op {
        Operation::Create => StepKind::Create(attempt),
        Operation::Replace => StepKind::CreateReplacement(attempt),
        _ => StepKind::Update,
    }
}

impl<S: EventStore + 'static> Deployment<S> {
    /// **Provision** handler: one create, update or replacement of resource `id`.
    pub async fn provision(&self, id: &str) -> Handled {
        let Some(rp) = self.plan.resource(id).cloned() else {
            return Err(EngineError::Internal(format!(
                "resource {id} is not in the plan"
            )));
        };
        let op = operation(rp.action, id)?;
        // A retried task (its worker died after the outcome was recorded) finds it done.
        if let Some(done) = self.already_done(id) {
            return Ok(Ok(done));
        }
        if rp.action != Action::NoOp {
            self.unseal(id).await?;
        }
        self.provision_as(&rp, op, rp.action == Action::NoOp).await
    }

    /// Provisions `rp` as `op`; with `skip_unchanged`, nothing is called when the
    /// properties resolve to what is recorded.
    async fn provision_as(
        &self,
        rp: &ResourcePlan,
        op: Operation,
        skip_unchanged: bool,
    ) -> Handled {
        let id = rp.logical_id.as_str();
        let pre = self.holds();
        let ty = rp.resource_type.as_str();
        // (for its records and its request: `create` and `update` make the calls)
        let step = self.step(&pre, id, ty, step_kind(op, Attempt::Again));
        let props = match self.values_to_send(id) {
            Ok(p) => p,
            Err(info) => return Ok(Err(step.failed(Phase::Failed, info).await?)),
        };
        let mut desired = self.desired(id, ty, &props, &rp.depends_on);
        let current = self
            .recorder
            .state()
            .resources
            .get(id)
            .map(|r| (r.provider, r.physical_id.clone(), r.properties.clone()));
        if skip_unchanged && current.as_ref().is_some_and(|c| c.2 == desired.properties) {
            return Ok(Ok(Done::Unchanged));
        }
        let recorded_kind = current.as_ref().map(|c| c.0);
        let (routed, resolved) = match self.route_and_resolve(ty, props, recorded_kind).await {
            Ok(x) => x,
            Err(info) => return Ok(Err(step.failed(Phase::Failed, info).await?)),
        };
        let Resolved {
            props: call_props,
            resolution,
            values,
        } = resolved;
        desired.secret_digest = crate::rotation::digest(self.digest_key.as_ref(), &values);
        let mut needles = resolved_secrets(&resolution);
        needles.extend(desired.tainted.iter().cloned());
        let call = Call {
            desired: &desired,
            routed: &routed,
            request: step.request(call_props),
            masker: Masker {
                resolution: Some(&resolution),
                secrets: &desired.tainted,
            },
            needles,
            current: current.map(|(_, p, props)| (p, props)),
        };
        match op {
            Operation::Create | Operation::Replace => self.create(call, op).await,
            _ => self.update(call).await,
        }
    }

    /// The masker of messages before a call resolved anything.
    pub(crate) fn plain(&self) -> Masker<'_> {
        Masker {
            resolution: None,
            secrets: &self.secrets,
        }
    }

    /// Resource `id`'s properties resolved against the state now; refused when one would
    /// be sent as a mask (a secret that was never recorded must never be sent).
    fn values_to_send(&self, id: &str) -> Result<Map<String, Value>, ErrorInfo> {
        let props = self
            .resolve_resource(id)
            .map_err(|e| self.plain().info("InvalidTemplate", &e.to_string()))?;
        if let Some(at) = masked_at(&props) {
            let message = format!(
                "{id}: the property at {at} would be sent as a masked value: it reads a \
                 secret that is recorded masked and could not be had again (custom \
                 resource `NoEcho` data is asked for again only from a custom resource of \
                 this stack); deploy the resource it reads in the same deploy"
            );
            return Err(self.plain().info("MaskedValue", &message));
        }
        Ok(props)
    }

    /// The provider of a resource of type `ty`, and `props` with their dynamic
    /// references resolved for its call (a nested stack gets them as text: its own
    /// resources resolve them for their calls, so no value is written down).
    async fn route_and_resolve(
        &self,
        ty: &str,
        props: Map<String, Value>,
        recorded: Option<ProviderKind>,
    ) -> Result<(Routed, Resolved), ErrorInfo> {
        let routed = self
            .engine
            .router(self.nested_context())
            .route(ty, &props, recorded)
            .map_err(|e| self.plain().info("Unsupported", &e.to_string()))?;
        if routed.kind == ProviderKind::NestedStack {
            let resolved = Resolved {
                props,
                resolution: Default::default(),
                values: Default::default(),
            };
            return Ok((routed, resolved));
        }
        let resolved = resolve_dynamic(self.engine.lookups.as_ref(), &props)
            .await
            .map_err(|(name, message)| self.plain().info(&name, &message))?;
        Ok((routed, resolved))
    }

    /// Makes the secret attributes that resource `id` reads available to `Fn::GetAtt`
    /// when this deploy does not hold them (they are recorded masked, so a later deploy
    /// of a dependent needs them again). A custom resource is sent its `Update` again
    /// with its properties unchanged (handlers must tolerate that) and its answer is
    /// kept sealed; an attribute that mirrors a property (an SSM parameter's `Value`) is
    /// the property, resolved again from the template and the secret it reads. What
    /// cannot be had leaves the value masked, and the call that needs it is refused.
    async fn unseal(&self, id: &str) -> Result<(), EngineError> {
        let mut wanted = BTreeSet::new();
        if let Some(r) = self.input.template.resources.get(id) {
            attribute_references(&Value::Object(r.properties.clone()), &mut wanted);
        }
        let missing: Vec<(String, String, ProviderKind)> = {
            let state = self.recorder.state();
            let sealed = self.sealed.read();
            wanted
                .into_iter()
                .filter_map(|(res, attr)| {
                    let r = state.resources.get(&res)?;
                    let masked = r.attributes.get(&attr).is_some_and(contains_mask);
                    let held = sealed.get(&res).is_some_and(|s| s.contains_key(&attr));
                    (masked && !held).then_some((res, attr, r.provider))
                })
                .collect()
        };
        for (res, attr, kind) in missing {
            if kind == ProviderKind::Custom {
                if let Some(rp) = self.plan.resource(&res).cloned() {
                    // Its failure is its own (recorded); the value stays masked, and the
                    // call that needs it is refused with the reason.
                    let _ = Box::pin(self.provision_as(&rp, Operation::Update, false)).await?;
                }
                continue;
            }
            let Ok(props) = self.resolve_resource(&res) else {
                continue;
            };
            let Some(value) = props.get(&attr) else {
                continue;
            };
            let mut one = Map::new();
            one.insert(attr.clone(), value.clone());
            if let Ok(resolved) = resolve_dynamic(self.engine.lookups.as_ref(), &one).await {
                let mut values = IndexMap::new();
                values.extend(resolved.props);
                self.seal(&res, values);
            }
        }
        Ok(())
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
        let (properties, tainted) = self.record_properties(id, props);
        Desired {
            logical_id: id.to_string(),
            resource_type: ty.to_string(),
            properties,
            tainted,
            secret_digest: None,
            dependencies: dependencies.to_vec(),
            deletion_policy: template.deletion_policy,
            update_replace_policy: template.update_replace_policy,
        }
    }

    /// A create (`op` Create) or the create of a replacement (`op` Replace).
    async fn create(&self, mut call: Call<'_>, op: Operation) -> Handled {
        let pre = self.holds();
        let d = call.desired;
        let ours = |found: &str| self.recorded(found);
        let step = self.step(
            &pre,
            &d.logical_id,
            &d.resource_type,
            step_kind(op, Attempt::First(&ours)),
        );
        let replaces = if op == Operation::Replace {
            call.current.as_ref().map(|c| c.0.clone())
        } else {
            None
        };
        // A nested stack's child is named before the call: the intent says which.
        let announced = replaces.clone().or_else(|| {
            (call.routed.kind == ProviderKind::NestedStack)
                .then(|| crate::keys::nested_stack_name(self.stack(), &d.logical_id))
        });
        // A retried task finds its own intent: what it made then is its own.
        let retried = {
            let state = self.recorder.state();
            let token = step.key.token();
            state.pending.values().any(|p| p.token == token)
        };
        let step = if retried {
            self.step(
                &pre,
                &d.logical_id,
                &d.resource_type,
                step_kind(op, Attempt::Again),
            )
        } else {
            step
        };
        call.request.token = step.key.token().to_string();
        call.request.physical_id = None;
        call.request.previous_properties = None;
        let intent = Intent {
            provider: call.routed.kind,
            physical_id: announced,
            properties: Some(d.properties.clone()),
        };
        let provider = call.routed.provider.as_ref();
        match step.apply(provider, &call.request, Some(intent)).await? {
            Answer::Created(created) => {
                let record = self.made(
                    &call,
                    created.physical_id,
                    created.attributes,
                    created.sensitive,
                );
                let observation = self.observation(step.key.event(Phase::Observed), &call, &record);
                step.created(Phase::Done, record, replaces).await?;
                self.observe(observation);
                Ok(Ok(if op == Operation::Replace {
                    Done::Replaced
                } else {
                    Done::Created
                }))
            }
            Answer::Failed(e) => Ok(Err(step
                .failed(Phase::Failed, call.masker.error(&e))
                .await?)),
            other => Err(other.unexpected(&step)),
        }
    }

    /// True when the stack's records hold `physical_id`: a resource of it, or a replaced
    /// predecessor that a killed deploy did not delete yet (a create that finds it under
    /// its name adopts it, and it is no predecessor any more).
    fn recorded(&self, physical_id: &str) -> bool {
        let state = self.recorder.state();
        state.predecessors.contains_key(physical_id)
            || state
                .resources
                .values()
                .any(|r| r.physical_id == physical_id)
    }

    /// The baseline read for `record`, which `call` just made or changed (`None` for a
    /// nested stack or a custom resource: they have nothing of their own to read).
    fn observation(
        &self,
        key: String,
        call: &Call<'_>,
        record: &ResourceRecord,
    ) -> Option<Observation> {
        if matches!(
            record.provider,
            ProviderKind::NestedStack | ProviderKind::Custom
        ) {
            return None;
        }
        let mut request = call.request.clone();
        request.physical_id = Some(record.physical_id.clone());
        request.previous_properties = None;
        Some(Observation {
            stream: self.recorder.stream().clone(),
            run: self.deploy_id.clone(),
            key,
            request,
            kind: record.provider,
            recorded: record.properties.clone(),
        })
    }

    /// Starts the baseline read `o` beside the resources that come next, once the
    /// resource's own event is recorded: unless its baseline is refused.
    fn observe(&self, o: Option<Observation>) {
        let Some(o) = o else { return };
        let allowed = {
            let state = self.recorder.state();
            may_observe(
                state
                    .resources
                    .get(&o.request.logical_id)
                    .and_then(|r| r.baseline.as_ref()),
            )
        };
        if allowed {
            self.observations.start(self.engine.clone(), o);
        }
    }

    /// What `call` made, as recorded: its attributes masked as the call's secrets say.
    fn made(
        &self,
        call: &Call<'_>,
        physical_id: String,
        attributes: IndexMap<String, Value>,
        all_secret: bool,
    ) -> ResourceRecord {
        let d = call.desired;
        let attributes =
            self.record_attributes(&d.logical_id, attributes, all_secret, &call.needles);
        d.record(physical_id, attributes, call.routed.kind)
    }

    /// An update in place; a replacement when the provider says it cannot be made in
    /// place, or replaced the resource itself.
    async fn update(&self, mut call: Call<'_>) -> Handled {
        let pre = self.holds();
        let d = call.desired;
        let step = self.step(&pre, &d.logical_id, &d.resource_type, StepKind::Update);
        let (physical, previous) = call.current.clone().unzip();
        let intent = Intent {
            provider: call.routed.kind,
            physical_id: physical.clone(),
            properties: Some(d.properties.clone()),
        };
        call.request.physical_id = physical.clone();
        call.request.previous_properties = previous.clone();
        let provider = call.routed.provider.as_ref();
        match step.apply(provider, &call.request, Some(intent)).await? {
            Answer::Updated(updated) if !updated.replaced => {
                let record = self.made(
                    &call,
                    updated.physical_id,
                    updated.attributes,
                    updated.sensitive,
                );
                let observation = self.observation(step.key.event(Phase::Observed), &call, &record);
                step.updated(Phase::Done, record, previous.unwrap_or_default())
                    .await?;
                self.observe(observation);
                Ok(Ok(Done::Updated))
            }
            Answer::Updated(updated) => {
                // The provider made a new resource itself: the old one is a predecessor,
                // deleted in cleanup. (This step records; it makes no call.)
                let replace = self.step(
                    &pre,
                    &d.logical_id,
                    &d.resource_type,
                    StepKind::CreateReplacement(Attempt::Again),
                );
                let record = self.made(
                    &call,
                    updated.physical_id,
                    updated.attributes,
                    updated.sensitive,
                );
                let observation =
                    self.observation(replace.key.event(Phase::Observed), &call, &record);
                replace.created(Phase::Done, record, physical).await?;
                self.observe(observation);
                step.skipped(Phase::Skipped, "the provider replaced the resource")
                    .await?;
                Ok(Ok(Done::Replaced))
            }
            Answer::Failed(ProviderError::NotUpdatable(why)) => {
                // AWS cannot make this change in place: replace instead.
                step.skipped(Phase::Skipped, &format!("not updatable in place: {why}"))
                    .await?;
                self.create(call, Operation::Replace).await
            }
            Answer::Failed(e) => Ok(Err(step
                .failed(Phase::Failed, call.masker.error(&e))
                .await?)),
            other => Err(other.unexpected(&step)),
        }
    }
}
