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
use stackflow_providers::provider::Created;

use stackflow_providers::router::Router as _;

use crate::engine::{DeployOptions, Engine, EngineError, NestedContext};
use crate::keys::{Phase, op_name};
use crate::recorder::Recorder;
use crate::secrets::{
    Masker, contains_mask, mask_attributes_plain, resolve_dynamic, resolved_secrets,
};
use crate::step::{Answer, Deletion, Step, StepKind};

/// How one pending intent of an interrupted run was settled; what the report and the
/// progress line say of it is its `Display`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Settled {
    /// An undo: the rollback that follows carries it out.
    LeftToRollback,
    /// Carried out now, and its outcome recorded.
    Recorded(Outcome),
    /// Not carried out (recorded as skipped), and why.
    NotReplayed(String),
}

/// What a replayed call did, as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The update is done with what it sent.
    Updated,
    /// The delete is done (or what it deleted was gone already).
    Deleted,
    /// The delete was left undone by the provider, on purpose, and why: `physical_id`
    /// stays recorded, and the next run that deletes it tries again.
    Skipped { reason: String, physical_id: String },
    /// The delete cannot be done, and why: the resource leaves the stack as retained.
    Abandoned(String),
    /// The create (`verb`: create or replace) made `physical_id`.
    Made {
        verb: &'static str,
        physical_id: String,
    },
    /// The create (`verb`) failed, and why (masked): recorded as failed.
    Failed { verb: &'static str, message: String },
}

impl std::fmt::Display for Settled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Settled::LeftToRollback => f.write_str("left to the rollback"),
            Settled::NotReplayed(why) => f.write_str(why),
            Settled::Recorded(Outcome::Updated) => {
                f.write_str("the interrupted update is done; recorded")
            }
            Settled::Recorded(Outcome::Deleted) => f.write_str("the interrupted delete is done"),
            Settled::Recorded(Outcome::Skipped {
                reason,
                physical_id,
            }) => write!(
                f,
                "the interrupted delete was left undone ({reason}); {physical_id} stays recorded"
            ),
            Settled::Recorded(Outcome::Abandoned(why)) => write!(
                f,
                "the interrupted delete cannot be finished ({why}); the resource leaves the \
                 stack as if retained"
            ),
            Settled::Recorded(Outcome::Made { verb, physical_id }) => {
                write!(f, "the interrupted {verb} made {physical_id}; recorded")
            }
            Settled::Recorded(Outcome::Failed { verb, message }) => {
                write!(f, "the interrupted {verb} failed: {message}")
            }
        }
    }
}

/// How a replay ended, before a replay that did not happen is recorded as skipped.
type Replayed = Result<Settled, EngineError>;

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
) -> Result<Settled, EngineError> {
    let step = Step::new(
        rec,
        pre,
        (&p.deploy_id, &p.deploy_id),
        (&p.logical_id, &p.resource_type),
        StepKind::Replay {
            token: &p.token,
            op: p.operation,
        },
    );
    let options = DeployOptions::default();
    let ctx = current.map_or(
        NestedContext {
            parent: None,
            options: &options,
        },
        |c| c.nested_context(),
    );
    let settled = match p.operation {
        Operation::Undo => return Ok(Settled::LeftToRollback),
        // What a revert sent is the record itself: there is nothing to finish, and
        // whether it reached AWS is for the next drift check to say.
        Operation::Update if crate::drift::is_drift_run(&p.deploy_id) => Settled::NotReplayed(
            "a drift revert, interrupted: AWS may or may not hold the baseline again; \
             `stackflow drift` tells, and `drift --revert` reverts again"
                .into(),
        ),
        Operation::Update => replay_update(engine, &step, p, ctx).await?,
        Operation::Delete => replay_delete(engine, &step, p, ctx).await?,
        Operation::Create | Operation::Replace => {
            replay_create(engine, &step, p, current, ctx).await?
        }
    };
    if let Settled::NotReplayed(why) = &settled {
        step.skipped(Phase::Reconciled, why).await?;
    }
    Ok(settled)
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
        return Ok(Settled::NotReplayed(
            "interrupted before its outcome was recorded; the next deploy makes the change again"
                .into(),
        ));
    };
    let unfinished = |why: &dyn std::fmt::Display| {
        Ok(Settled::NotReplayed(format!(
            "interrupted, and could not be finished ({why}); the next deploy makes the change again"
        )))
    };
    if contains_mask(&Value::Object(sent.clone())) {
        return unfinished(&"its properties hold a masked NoEcho value");
    }
    let provider = match engine
        .router(ctx)
        .for_recorded(&p.resource_type, p.provider)
    {
        Ok(provider) => provider,
        Err(e) => return unfinished(&e),
    };
    let resolved = match resolve_dynamic(engine.lookups.as_ref(), &sent).await {
        Ok(resolved) => resolved,
        Err((_, m)) => return unfinished(&m),
    };
    let needles = resolved_secrets(&resolved.resolution);
    let mut request = step.request(resolved.props);
    request.physical_id = Some(current.physical_id.clone());
    request.previous_properties = Some(current.properties.clone());
    let masker = Masker {
        resolution: Some(&resolved.resolution),
        secrets: &[],
    };
    let updated = match step.apply(provider.as_ref(), &request, None).await? {
        Answer::Updated(updated) => updated,
        Answer::Failed(e) => return unfinished(&masker.text(&e.to_string())),
        other => return Err(other.unexpected(step)),
    };
    let attributes = mask_attributes_plain(&updated.attributes, updated.sensitive, &needles);
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
    Ok(Settled::Recorded(Outcome::Updated))
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
        Ok(Settled::NotReplayed(format!(
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
    let answer = step.apply(provider.as_ref(), &request, None).await?;
    let plain = Masker {
        resolution: None,
        secrets: &[],
    };
    match step
        .settle_delete(answer, Phase::Reconciled, &physical, replaced, &plain)
        .await?
    {
        Deletion::Deleted => Ok(Settled::Recorded(Outcome::Deleted)),
        // Still there: it stays recorded (skipped), and the next run that deletes it
        // tries again.
        Deletion::Skipped(reason) => Ok(Settled::Recorded(Outcome::Skipped {
            reason,
            physical_id: physical,
        })),
        Deletion::Retained(reason) => Ok(Settled::Recorded(Outcome::Abandoned(reason))),
        Deletion::Failed(e) => unfinished(&plain.text(&e.to_string())),
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
        return Ok(Settled::NotReplayed(why));
    }
    let replay = current
        .and_then(|c| c.replay_of(p))
        .unwrap_or_else(|| Replay::recorded(p));
    let Some(props) = replay.properties else {
        return Ok(Settled::NotReplayed(
            "interrupted, and its properties are not known: check AWS for a resource made by \
             this call"
                .into(),
        ));
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
        Err((_, m)) => {
            return Ok(Settled::NotReplayed(format!(
                "interrupted, and cannot be replayed: {m}"
            )));
        }
    };
    let provider = match engine
        .router(ctx)
        .for_recorded(&p.resource_type, p.provider)
    {
        Ok(x) => x,
        Err(e) => return Ok(Settled::NotReplayed(e.to_string())),
    };
    let request = step.request(call_props);
    let verb = op_name(p.operation);
    match step.apply(provider.as_ref(), &request, None).await? {
        Answer::Created(Created {
            physical_id,
            attributes,
            sensitive: all_secret,
        }) => {
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
            Ok(Settled::Recorded(Outcome::Made { verb, physical_id }))
        }
        Answer::Failed(e) => {
            let masker = Masker {
                resolution: None,
                secrets: &needles,
            };
            let error = masker.error(&e);
            let message = error.message.clone();
            step.failed(Phase::Reconciled, error).await?;
            Ok(Settled::Recorded(Outcome::Failed { verb, message }))
        }
        other => Err(other.unexpected(step)),
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
