//! Settling interrupted calls: an intent without an outcome, left by a run that was
//! killed, is replayed with its recorded token (which makes nothing twice) and what AWS
//! answers is recorded. Every deploy, rollback and destroy does this first.

use std::sync::Arc;

use indexmap::IndexMap;
use serde_json::{Map, Value};
use stackflow_core::template::Policy;
use stackflow_events::event::{Operation, ProviderKind, ResourceRecord};
use stackflow_events::projection::PendingIntent;
use stackflow_events::{EventStore, Precondition};

use stackflow_providers::router::Router as _;

use crate::engine::{DeployOptions, Engine, EngineError, NestedContext};
use crate::keys::{ActionKey, Phase, op_name};
use crate::recorder::Recorder;
use crate::secrets::{
    Masker, contains_mask, mask_attributes_plain, resolve_dynamic, resolved_secrets,
};
use crate::step::{DeleteAnswer, Step};

/// How a replay ended: `Ok(what)` when its outcome was recorded, `Err(why)` when it was
/// not replayed (recorded as skipped).
type Replayed = Result<Result<String, String>, EngineError>;

/// What the deploy running now knows of the resources an earlier run left pending: its
/// template (what an interrupted create is replayed with), its masking (how what a replay
/// made is recorded) and where its nested stacks find their templates. A destroy or a
/// rollback settles without one.
pub(crate) trait Current: Send + Sync {
    /// Where a nested stack of this deploy finds its template.
    fn nested_context(&self) -> NestedContext<'_>;
    /// What the interrupted create of `p` is replayed with, when the template has it.
    fn replay_of(&self, p: &PendingIntent) -> Option<Replay>;
    /// The properties recorded for `id` and the secrets they hold.
    fn record_properties(
        &self,
        id: &str,
        props: &Map<String, Value>,
    ) -> (Map<String, Value>, Vec<String>);
    /// The attributes recorded for `id`, masked.
    fn record_attributes(
        &self,
        id: &str,
        attributes: IndexMap<String, Value>,
        all_secret: bool,
        needles: &[String],
    ) -> IndexMap<String, Value>;
}

/// Settles one pending intent of an interrupted run, as `pre` allows. Returns what was
/// found, for the report.
pub(crate) async fn reconcile_one<S: EventStore + 'static>(
    engine: &Arc<Engine<S>>,
    rec: &Recorder<S>,
    pre: &Precondition,
    p: &PendingIntent,
    current: Option<&dyn Current>,
) -> Result<String, EngineError> {
    let step = Step {
        rec,
        pre,
        deploy_id: &p.deploy_id,
        key: ActionKey::from_token(&p.token),
        logical_id: &p.logical_id,
        resource_type: &p.resource_type,
        op: p.operation,
    };
    let options = DeployOptions::default();
    let ctx = current.map_or(
        NestedContext {
            parent: None,
            options: &options,
        },
        |c| c.nested_context(),
    );
    let replayed = match p.operation {
        Operation::Undo => return Ok("left to the rollback".into()),
        // What a revert sent is the record itself: there is nothing to finish, and
        // whether it reached AWS is for the next drift check to say.
        Operation::Update if crate::drift::is_drift_run(&p.deploy_id) => Ok(Err(
            "a drift revert, interrupted: AWS may or may not hold the baseline again; \
             `stackflow drift` tells, and `drift --revert` reverts again"
                .into(),
        )),
        Operation::Update => replay_update(engine, &step, p, ctx).await,
        Operation::Delete => replay_delete(engine, &step, p, ctx).await,
        Operation::Create | Operation::Replace => {
            replay_create(engine, &step, p, current, ctx).await
        }
    }?;
    match replayed {
        Ok(what) => Ok(what),
        Err(why) => {
            step.skipped(Phase::Reconciled, &why).await?;
            Ok(why)
        }
    }
}

/// Finishes an interrupted update with what it sent, so that the state says what AWS
/// holds; the deploy that follows then changes it as its template says.
async fn replay_update<S: EventStore + 'static>(
    engine: &Arc<Engine<S>>,
    step: &Step<'_, S>,
    p: &PendingIntent,
    ctx: NestedContext<'_>,
) -> Replayed {
    let current = step.rec.state().resources.get(&p.logical_id).cloned();
    let (Some(sent), Some(current)) = (p.properties.clone(), current) else {
        return Ok(Err(
            "interrupted before its outcome was recorded; the next deploy makes the change again"
                .into(),
        ));
    };
    let replay = async {
        if contains_mask(&Value::Object(sent.clone())) {
            return Err("its properties hold a masked NoEcho value".to_string());
        }
        let provider = engine
            .router(ctx)
            .for_recorded(&p.resource_type, p.provider)
            .map_err(|e| e.to_string())?;
        let resolved = resolve_dynamic(engine.lookups.as_ref(), &sent)
            .await
            .map_err(|(_, m)| m)?;
        let needles = resolved_secrets(&resolved.resolution);
        let mut request = step.request(resolved.props);
        request.physical_id = Some(current.physical_id.clone());
        request.previous_properties = Some(current.properties.clone());
        let masker = Masker {
            resolution: Some(&resolved.resolution),
            secrets: &[],
        };
        match step.update(provider.as_ref(), &request).await {
            Ok(updated) => Ok((updated, needles)),
            Err(e) => Err(masker.text(&e.to_string())),
        }
    };
    match replay.await {
        Ok((updated, needles)) => {
            let attributes =
                mask_attributes_plain(&updated.attributes, updated.sensitive, &needles);
            let record = ResourceRecord {
                logical_id: p.logical_id.clone(),
                resource_type: p.resource_type.clone(),
                physical_id: updated.physical_id,
                properties: sent,
                attributes,
                dependencies: current.dependencies.clone(),
                provider: current.provider,
                deletion_policy: current.deletion_policy,
                update_replace_policy: current.update_replace_policy,
                secret_digest: None,
            };
            step.updated(Phase::Reconciled, record, current.properties.clone())
                .await?;
            Ok(Ok("the interrupted update is done; recorded".into()))
        }
        Err(m) => Ok(Err(format!(
            "interrupted, and could not be finished ({m}); the next deploy makes the change again"
        ))),
    }
}

/// Finishes an interrupted delete (a delete of what is gone already succeeds).
async fn replay_delete<S: EventStore + 'static>(
    engine: &Arc<Engine<S>>,
    step: &Step<'_, S>,
    p: &PendingIntent,
    ctx: NestedContext<'_>,
) -> Replayed {
    let physical = p.physical_id.clone().unwrap_or_default();
    let replaced = step.rec.state().predecessors.contains_key(&physical);
    let unfinished = |why: &dyn std::fmt::Display| {
        Ok(Err(format!(
            "the interrupted delete could not be finished: {why}"
        )))
    };
    let provider = match engine
        .router(ctx)
        .for_recorded(&p.resource_type, p.provider)
    {
        Err(e) => return unfinished(&e),
        Ok(provider) => provider,
    };
    let mut request = step.request(p.properties.clone().unwrap_or_default());
    request.physical_id = Some(physical.clone());
    match step.delete(provider.as_ref(), &request).await {
        DeleteAnswer::Deleted | DeleteAnswer::AlreadyGone => {
            step.deleted(Phase::Reconciled, physical, replaced).await?;
            Ok(Ok("the interrupted delete is done".into()))
        }
        // Still there: it stays recorded, and the next run that deletes it tries again.
        DeleteAnswer::Skipped(reason) => {
            step.skipped(Phase::Skipped, &reason).await?;
            Ok(Err(format!(
                "the interrupted delete was left undone ({reason}); {physical} stays recorded"
            )))
        }
        DeleteAnswer::Abandoned(reason) => {
            step.retained(physical, reason.clone(), replaced).await?;
            Ok(Ok(format!(
                "the interrupted delete cannot be finished ({reason}); the resource leaves \
                 the stack as if retained"
            )))
        }
        DeleteAnswer::Failed(e) => unfinished(&e),
    }
}

/// What an interrupted create is replayed with, and how the resource is recorded.
pub(crate) struct Replay {
    pub properties: Option<Map<String, Value>>,
    pub dependencies: Vec<String>,
    pub deletion_policy: Option<Policy>,
    pub update_replace_policy: Option<Policy>,
}

impl Replay {
    /// A replay with what the intent recorded, and nothing of a template.
    fn recorded(p: &PendingIntent) -> Self {
        Replay {
            properties: p.properties.clone(),
            dependencies: vec![],
            deletion_policy: None,
            update_replace_policy: None,
        }
    }
}

/// How long Cloud Control keeps a request's client token: a create replayed later with
/// the same token is a new request, which makes a second resource of a type without a
/// name (a VPC, a subnet, a security group).
const CLOUD_CONTROL_TOKEN_LIFE: std::time::Duration = std::time::Duration::from_secs(36 * 3600);

/// Why the interrupted create `p` is not replayed blindly at `now`: its Cloud Control
/// token has expired. `None` when it may be replayed.
fn too_old_to_replay(p: &PendingIntent, now: std::time::SystemTime) -> Option<String> {
    if p.provider != ProviderKind::CloudControl {
        return None;
    }
    let at = p.at.as_deref()?;
    let then = humantime::parse_rfc3339_weak(at).ok()?;
    let age = now.duration_since(then).ok()?;
    (age > CLOUD_CONTROL_TOKEN_LIFE).then(|| {
        format!(
            "interrupted at {at}, more than 36 hours ago: Cloud Control has forgotten the \
             call's token, so replaying it could make a second {ty}. Not replayed: check AWS \
             for a {ty} made around {at} for {id} and delete it if it is \
             there; the next deploy creates {id} again",
            ty = p.resource_type,
            id = p.logical_id
        )
    })
}

/// Replays an interrupted create with its token: the provider answers with the resource
/// that call made, or makes it now. A named resource that exists is adopted only through
/// the provider's import of the same name.
async fn replay_create<S: EventStore + 'static>(
    engine: &Arc<Engine<S>>,
    step: &Step<'_, S>,
    p: &PendingIntent,
    current: Option<&dyn Current>,
    ctx: NestedContext<'_>,
) -> Replayed {
    if let Some(why) = too_old_to_replay(p, std::time::SystemTime::now()) {
        return Ok(Err(why));
    }
    let replay = current
        .and_then(|c| c.replay_of(p))
        .unwrap_or_else(|| Replay::recorded(p));
    let Some(props) = replay.properties else {
        return Ok(Err("interrupted, and its properties are not known: check AWS for a resource made by this call".into()));
    };
    let (record_props, mut needles) = match current {
        Some(d) => d.record_properties(&p.logical_id, &props),
        None => (props.clone(), Vec::new()),
    };
    let call_props = match resolve_dynamic(engine.lookups.as_ref(), &props).await {
        Ok(resolved) => {
            needles.extend(resolved_secrets(&resolved.resolution));
            resolved.props
        }
        Err((_, m)) => return Ok(Err(format!("interrupted, and cannot be replayed: {m}"))),
    };
    let provider = match engine
        .router(ctx)
        .for_recorded(&p.resource_type, p.provider)
    {
        Ok(x) => x,
        Err(e) => return Ok(Err(e.to_string())),
    };
    let request = step.request(call_props);
    let found = step
        .create_again(provider.as_ref(), &request)
        .await
        .map(|c| (c.physical_id, c.attributes, c.sensitive));
    let verb = op_name(p.operation);
    match found {
        Ok((physical_id, attributes, all_secret)) => {
            let attributes = match current {
                Some(d) => d.record_attributes(&p.logical_id, attributes, all_secret, &needles),
                None => mask_attributes_plain(&attributes, all_secret, &needles),
            };
            let record = ResourceRecord {
                logical_id: p.logical_id.clone(),
                resource_type: p.resource_type.clone(),
                physical_id: physical_id.clone(),
                properties: record_props,
                attributes,
                dependencies: replay.dependencies,
                provider: p.provider,
                deletion_policy: replay.deletion_policy,
                update_replace_policy: replay.update_replace_policy,
                secret_digest: None,
            };
            let replaces = (p.operation == Operation::Replace)
                .then(|| p.physical_id.clone())
                .flatten();
            step.created(Phase::Reconciled, record, replaces).await?;
            Ok(Ok(format!(
                "the interrupted {verb} made {physical_id}; recorded"
            )))
        }
        Err(e) => {
            let masker = Masker {
                resolution: None,
                secrets: &needles,
            };
            step.failed(Phase::Reconciled, masker.error(&e)).await?;
            Ok(Ok(format!(
                "the interrupted {verb} failed: {}",
                e.message()
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, SystemTime};

    fn intent(provider: ProviderKind, at: Option<&str>) -> PendingIntent {
        PendingIntent {
            deploy_id: "d1".into(),
            logical_id: "Vpc".into(),
            resource_type: "AWS::EC2::VPC".into(),
            operation: Operation::Create,
            token: "t".into(),
            provider,
            physical_id: None,
            properties: None,
            seq: 3,
            at: at.map(str::to_string),
        }
    }

    #[test]
    fn a_cloud_control_create_older_than_its_token_is_not_replayed() {
        let at = "2026-11-01T10:00:00.000Z";
        let then = humantime::parse_rfc3339_weak(at).unwrap();
        let soon = then + Duration::from_secs(35 * 3600);
        let late = then + Duration::from_secs(37 * 3600);
        let cc = intent(ProviderKind::CloudControl, Some(at));
        assert_eq!(too_old_to_replay(&cc, soon), None);
        let why = too_old_to_replay(&cc, late).expect("refused");
        assert!(why.contains("AWS::EC2::VPC") && why.contains(at), "{why}");
        // SDK providers check by name; an intent without a time is replayed as before.
        assert_eq!(
            too_old_to_replay(&intent(ProviderKind::Sdk, Some(at)), late),
            None
        );
        assert_eq!(
            too_old_to_replay(&intent(ProviderKind::CloudControl, None), late),
            None
        );
        assert!(SystemTime::now() > then);
    }
}
