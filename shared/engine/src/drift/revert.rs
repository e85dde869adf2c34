//! `drift --revert`: an update from what AWS holds back to the recorded properties,
//! through the provider that made the resource, recorded as every other action is (a
//! [`Step`] of the drift check: its intent before the call, its outcome after, under a
//! token of its own). An interrupted revert is left for the next run to settle.

use std::sync::Arc;

use serde_json::{Map, Value};
use stackflow_events::EventStore;
use stackflow_events::event::{ProviderKind, ResourceRecord};
use stackflow_events::projection::ResourceState;
use stackflow_providers::provider::CurrentState;

use super::{CheckRun, DriftStatus, ResourceDrift, declined};
use crate::engine::{Engine, EngineError};
use crate::keys::Phase;
use crate::secrets::{
    Masker, contains_mask, mask_attributes_plain, resolve_dynamic, resolved_secrets,
};
use crate::step::{Answer, Intent, Step, StepKind};

/// Whether a run id is a drift check's (whose only actions are reverts).
pub(crate) fn is_drift_run(run: &str) -> bool {
    crate::keys::is_new_id_of(super::CHECK_PREFIX, run)
}

/// `--revert` of one drifted resource: declined when it cannot be done safely, else the
/// update, recorded. Only the keys the template set are sent, and the tags others added
/// stay.
pub(super) async fn revert_one<S: EventStore + 'static>(
    engine: &Arc<Engine<S>>,
    run: &CheckRun<'_, S>,
    r: &ResourceState,
    now: &CurrentState,
    drift: &mut ResourceDrift,
) -> Result<(), EngineError> {
    let outcome = match (declined(r, drift), now) {
        (Some(why), _) => Outcome::Declined(why),
        (None, CurrentState::Found(aws)) => {
            let drifted = drifted_keys(drift);
            revert_call(engine, run, &drift.logical_id, r, aws, &drifted).await?
        }
        (None, _) => return Ok(()),
    };
    match outcome {
        Outcome::Reverted => drift.status = DriftStatus::Reverted,
        Outcome::Declined(why) => {
            drift.status = DriftStatus::Declined;
            drift.reason = Some(why);
        }
    }
    Ok(())
}

/// How a revert of one resource ended, for the report.
enum Outcome {
    /// AWS holds the baseline again.
    Reverted,
    /// Not done (it cannot be done safely, or the update failed): why.
    Declined(String),
}

/// The top-level properties a drift's differences are under.
fn drifted_keys(drift: &ResourceDrift) -> Vec<String> {
    drift
        .differences
        .iter()
        .filter_map(|d| d.path.strip_prefix('/')?.split('/').next())
        .map(|k| k.replace("~1", "/").replace("~0", "~"))
        .collect()
}

/// Why the recorded properties of `r` cannot be sent back as they are, if so.
pub(super) fn not_revertible(r: &ResourceState) -> Option<String> {
    if contains_mask(&Value::Object(r.properties.clone())) {
        return Some(
            "its recorded properties hold a NoEcho value, which is never recorded: deploy \
             the template again to restore it"
                .into(),
        );
    }
    matches!(r.provider, ProviderKind::NestedStack | ProviderKind::Custom)
        .then(|| "a nested stack or custom resource is reverted by a deploy".into())
}

/// Sends the recorded properties back to AWS, from AWS's values of the properties the
/// template sets and of those that drifted (`drifted`: a property the template leaves
/// out, such as an inline policy put on a role out of band, is taken back out). The
/// intent is appended before the call and the outcome after it (an update that keeps the
/// baseline, or a failure with its message masked); `Err` is a store error.
async fn revert_call<S: EventStore + 'static>(
    engine: &Arc<Engine<S>>,
    run: &CheckRun<'_, S>,
    id: &str,
    r: &ResourceState,
    aws: &Map<String, Value>,
    drifted: &[String],
) -> Result<Outcome, EngineError> {
    if let Some(why) = not_revertible(r) {
        return Ok(Outcome::Declined(why));
    }
    let resolved = match resolve_dynamic(engine.lookups.as_ref(), &r.properties).await {
        Ok(resolved) => resolved,
        Err((_, m)) => return Ok(Outcome::Declined(m)),
    };
    let provider = match engine.providers.for_recorded(&r.resource_type, r.provider) {
        Ok(provider) => provider,
        Err(e) => return Ok(Outcome::Declined(e.to_string())),
    };
    let step = Step::new(
        run.rec,
        run.pre,
        (run.check_id, run.check_id),
        (id, &r.resource_type),
        StepKind::Revert,
    );
    let previous: Map<String, Value> = aws
        .iter()
        .filter(|(k, _)| r.properties.contains_key(*k) || drifted.contains(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut desired = resolved.props;
    keep_foreign_tags(&mut desired, aws);
    let mut request = step.request(desired);
    request.physical_id = Some(r.physical_id.clone());
    request.previous_properties = Some(previous);
    let intent = Intent {
        provider: r.provider,
        physical_id: Some(r.physical_id.clone()),
        properties: Some(r.properties.clone()),
    };
    let masker = Masker {
        resolution: Some(&resolved.resolution),
        secrets: &[],
    };
    match step
        .apply(provider.as_ref(), &request, Some(intent))
        .await?
    {
        Answer::Updated(updated) => {
            let needles = resolved_secrets(&resolved.resolution);
            let record = ResourceRecord {
                logical_id: id.to_string(),
                resource_type: r.resource_type.clone(),
                physical_id: updated.physical_id,
                properties: r.properties.clone(),
                attributes: mask_attributes_plain(&updated.attributes, updated.sensitive, &needles),
                dependencies: r.dependencies.clone(),
                provider: r.provider,
                deletion_policy: r.deletion_policy,
                update_replace_policy: r.update_replace_policy,
                secret_digest: r.secret_digest.clone(),
            };
            // AWS holds the baseline again: it stays the baseline.
            step.updated_keeping(
                Phase::Done,
                record,
                r.properties.clone(),
                r.baseline.clone(),
            )
            .await?;
            Ok(Outcome::Reverted)
        }
        Answer::Failed(e) => {
            let error = masker.error(&e);
            let why = format!("the update back to the baseline failed: {}", error.message);
            step.failed(Phase::Failed, error).await?;
            Ok(Outcome::Declined(why))
        }
        other => Err(other.unexpected(&step)),
    }
}

/// Adds to `desired`'s `Tags` (a list of `{Key, Value}`) the tags AWS holds whose keys
/// the template does not set: what other tools or resources added stays attached.
fn keep_foreign_tags(desired: &mut Map<String, Value>, aws: &Map<String, Value>) {
    let (Some(Value::Array(ours)), Some(Value::Array(theirs))) =
        (desired.get("Tags").cloned(), aws.get("Tags"))
    else {
        return;
    };
    let key = |t: &Value| t.get("Key").and_then(Value::as_str).map(str::to_string);
    let mut all = ours.clone();
    for t in theirs {
        let foreign = key(t).is_some_and(|k| {
            !k.starts_with("aws:") && !ours.iter().any(|o| key(o).as_deref() == Some(&k))
        });
        if foreign {
            all.push(t.clone());
        }
    }
    desired.insert("Tags".into(), Value::Array(all));
}
