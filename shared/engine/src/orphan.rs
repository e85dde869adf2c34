//! `state orphan`: resources leave a stack's records and stay in AWS, untouched.
//!
//! Each is recorded as retained (`ResourceRetained`, the event a `DeletionPolicy: Retain`
//! delete appends), so the fold drops it and every recorded dependency on it. Nothing
//! else needs rewriting: the records of the other resources hold the values their `Ref`
//! and `Fn::GetAtt` resolved to, not the references. The template is the user's: while it
//! still declares an orphaned resource, the next deploy creates it again.

use std::sync::Arc;

use serde::Serialize;
use stackflow_events::event::{Event, ProviderKind};
use stackflow_events::{EventStore, Precondition};

use crate::engine::{Engine, EngineError};
use crate::keys::new_id;
use crate::recorder::Recorder;

/// The prefix of an orphan run's id.
const ORPHAN_PREFIX: &str = "p";

/// One resource taken out of the records.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Orphaned {
    /// The logical id.
    pub logical_id: String,
    /// The type.
    pub resource_type: String,
    /// What stays in AWS.
    pub physical_id: String,
    /// The recorded resources that depended on it (they keep their values).
    pub dependents: Vec<String>,
}

/// The result of `state orphan`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OrphanReport {
    /// The stack.
    pub stack: String,
    /// The resources taken out (or that would be, with `dry_run`).
    pub orphaned: Vec<Orphaned>,
    /// Ids named that an earlier `state orphan` took out already (one cut off part way:
    /// running it again finishes it).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub already: Vec<String>,
    /// True when nothing was recorded.
    pub dry_run: bool,
}

/// Takes `ids` out of `stack`'s records under its lock; with `dry_run`, only says what
/// would be taken out. Refused, with nothing recorded, when any id is not recorded, is a
/// nested stack, has a call with no recorded outcome, or is still to be undone by a
/// failed deploy's rollback.
pub async fn orphan<S: EventStore + 'static>(
    engine: Arc<Engine<S>>,
    stack: &str,
    ids: &[String],
    dry_run: bool,
) -> Result<OrphanReport, EngineError> {
    let recorder = Recorder::load(engine.store.clone(), engine.stream(stack)).await?;
    let already = orphaned_before(&engine, stack, &recorder, ids).await?;
    let ids: Vec<String> = ids
        .iter()
        .filter(|i| !already.contains(i))
        .cloned()
        .collect();
    let ids = ids.as_slice();
    let orphaned = if ids.is_empty() && !already.is_empty() {
        vec![]
    } else {
        check(&recorder, stack, ids)?
    };
    let mut report = OrphanReport {
        stack: stack.to_string(),
        orphaned,
        already,
        dry_run,
    };
    if report.orphaned.is_empty() {
        return Ok(report);
    }
    if dry_run {
        return Ok(report);
    }
    let id = new_id(ORPHAN_PREFIX);
    let held = crate::run::lock(&engine, &recorder, &id, "orphan").await?;
    // Checked again under the lock: a run may have changed the records meanwhile.
    let appended = match check(&recorder, stack, ids) {
        Ok(now) => {
            report.orphaned = now;
            retain_all(&recorder, &id, &report.orphaned).await
        }
        Err(e) => Err(e),
    };
    held.release(&recorder, &id).await?;
    appended.map(|()| report)
}

async fn retain_all<S: EventStore>(
    recorder: &Recorder<S>,
    id: &str,
    orphaned: &[Orphaned],
) -> Result<(), EngineError> {
    let pre = Precondition::HoldsLock(id.to_string());
    for o in orphaned {
        recorder
            .append(
                crate::keys::item_key(id, crate::keys::ItemEvent::Orphaned, &o.logical_id),
                Event::ResourceRetained {
                    deploy_id: id.to_string(),
                    logical_id: o.logical_id.clone(),
                    physical_id: o.physical_id.clone(),
                    reason: "orphaned: taken out of stackflow's records by `stackflow state \
                             orphan`; left in AWS as it is"
                        .into(),
                    replaced: false,
                },
                &pre,
            )
            .await?;
    }
    Ok(())
}

/// The ids among `ids` that are not recorded because an earlier orphan run took them
/// out: the last event about each is that run's `ResourceRetained`.
async fn orphaned_before<S: EventStore + 'static>(
    engine: &Arc<Engine<S>>,
    stack: &str,
    recorder: &Recorder<S>,
    ids: &[String],
) -> Result<Vec<String>, EngineError> {
    let missing: Vec<&String> = {
        let state = recorder.state();
        ids.iter()
            .filter(|id| !state.resources.contains_key(*id))
            .collect()
    };
    if missing.is_empty() {
        return Ok(vec![]);
    }
    let events = engine.store.read(&engine.stream(stack), 0).await?;
    let mut out = Vec::new();
    for id in missing {
        let last = events.iter().rev().find_map(|e| match &e.event {
            Event::ResourceRetained {
                deploy_id,
                logical_id,
                ..
            } if logical_id == id => Some(crate::keys::is_new_id_of(ORPHAN_PREFIX, deploy_id)),
            Event::ResourceCreated { resource, .. }
            | Event::ResourceUpdated { resource, .. }
            | Event::ResourceImported { resource, .. }
                if resource.logical_id == *id =>
            {
                Some(false)
            }
            Event::ResourceDeleted { logical_id, .. } if logical_id == id => Some(false),
            _ => None,
        });
        if last == Some(true) {
            out.push(id.clone());
        }
    }
    Ok(out)
}

/// The resources `ids` names, or why they cannot be orphaned.
fn check<S: EventStore>(
    recorder: &Recorder<S>,
    stack: &str,
    ids: &[String],
) -> Result<Vec<Orphaned>, EngineError> {
    let state = recorder.state();
    let refuse = |why: String| Err(EngineError::Refused(format!("stack {stack}: {why}")));
    if ids.is_empty() {
        return refuse("name at least one logical id to orphan".into());
    }
    let unknown: Vec<&str> = ids
        .iter()
        .filter(|id| !state.resources.contains_key(*id))
        .map(String::as_str)
        .collect();
    if !unknown.is_empty() {
        let recorded: Vec<&str> = state.resources.keys().map(String::as_str).collect();
        return refuse(format!(
            "{} not recorded (recorded: {}); nothing was changed",
            unknown.join(", "),
            if recorded.is_empty() {
                "none".to_string()
            } else {
                recorded.join(", ")
            }
        ));
    }
    let mut out = Vec::new();
    for id in ids {
        let r = &state.resources[id];
        if r.provider == ProviderKind::NestedStack {
            return refuse(format!(
                "{id} is a nested stack: its resources are recorded in stack {}; orphan them \
                 there, or destroy it",
                r.physical_id
            ));
        }
        if state.pending.values().any(|p| p.logical_id == *id) {
            return refuse(format!(
                "{id} has a call with no recorded outcome: run `stackflow deploy` (it \
                 reconciles the call) first"
            ));
        }
        if state.journal.to_undo().any(|e| e.logical_id == *id) {
            return refuse(format!(
                "the rollback journal of failed deploy {} still holds {id}: run `stackflow \
                 rollback --stack {stack}` or a deploy first",
                state.journal.deploy_id.clone().unwrap_or_default()
            ));
        }
        let dependents = state
            .resources
            .iter()
            .filter(|(other, o)| !ids.contains(other) && o.dependencies.contains(id))
            .map(|(other, _)| other.clone())
            .collect();
        out.push(Orphaned {
            logical_id: id.clone(),
            resource_type: r.resource_type.clone(),
            physical_id: r.physical_id.clone(),
            dependents,
        });
    }
    Ok(out)
}
