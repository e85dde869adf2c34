//! Text for people: plans.

use std::fmt::Write as _;

use serde_json::Value;
use stackflow_core::intrinsics::{UNKNOWN_KEY, as_unknown};
use stackflow_core::plan::{Action, Plan, ResourcePlan};
use stackflow_events::event::{Baseline, Event, StoredEvent};
use stackflow_events::projection::{JournalStep, StackState};

const MAX_VALUE: usize = 120;

/// A value on one line: strings as they are, *known after deploy* spelled out, anything
/// else as compact JSON; long values are cut.
pub fn value(v: &Value) -> String {
    let s = match v {
        Value::String(s) => s.clone(),
        other => match as_unknown(other) {
            Some(what) => format!("(known after deploy: {what})"),
            None => {
                let text = serde_json::to_string(other).unwrap_or_default();
                // Unknown markers nested in a value read better spelled out.
                text.replace(&format!("{{\"{UNKNOWN_KEY}\":"), "{known after deploy:")
            }
        },
    };
    if s.chars().count() > MAX_VALUE {
        let cut: String = s.chars().take(MAX_VALUE).collect();
        format!("{cut}…")
    } else {
        s
    }
}

fn symbol(a: Action) -> &'static str {
    match a {
        Action::Create => "+",
        Action::Update => "~",
        Action::Replace => "±",
        Action::Delete => "-",
        Action::NoOp => " ",
    }
}

fn resource(out: &mut String, r: &ResourcePlan) {
    let _ = writeln!(
        out,
        "  {} {} ({}) {}: {}",
        symbol(r.action),
        r.logical_id,
        r.resource_type,
        r.action.as_str(),
        r.reason
    );
    match r.action {
        Action::Create => {
            for (k, v) in &r.properties {
                let _ = writeln!(out, "      {k}: {}", value(v));
            }
        }
        Action::Update | Action::Replace => {
            for c in &r.changes {
                let old = c.old.as_ref().map_or("(absent)".to_string(), value);
                let new = c.new.as_ref().map_or("(absent)".to_string(), value);
                let tag = if c.replaces {
                    "  [forces replacement]"
                } else {
                    ""
                };
                let _ = writeln!(out, "      {}: {old} → {new}{tag}", c.path);
            }
        }
        _ => {}
    }
}

/// A plan, the way `stackflow diff` prints it.
pub fn plan(p: &Plan, source: &str, verbose: u8) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Stack {} ({source})", p.stack);
    for r in &p.resources {
        if r.action != Action::NoOp || verbose > 0 {
            resource(&mut out, r);
        }
    }
    if !p.outputs.is_empty() && verbose > 0 {
        let _ = writeln!(out, "  Outputs:");
        for (k, o) in &p.outputs {
            let _ = writeln!(out, "      {k}: {}", value(&o.value));
        }
    }
    let c = p.counts();
    let _ = writeln!(
        out,
        "{}: {} to create, {} to update, {} to replace, {} to delete, {} unchanged.\n",
        if p.is_empty() { "No changes" } else { "Plan" },
        c[&Action::Create],
        c[&Action::Update],
        c[&Action::Replace],
        c[&Action::Delete],
        c[&Action::NoOp],
    );
    out
}

/// `stackflow state show`.
pub fn state(stack: &str, region: &str, s: &StackState) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Stack {stack} in {region} (as of event {})", s.seq);
    if let Some(d) = &s.last_deploy {
        let _ = write!(
            out,
            "Last deploy: {} by {} at {}: {:?}",
            d.deploy_id, d.who, d.started_at, d.status
        );
        if let Some(e) = &d.error {
            let _ = write!(out, " ({}: {})", e.name, e.message);
        }
        out.push('\n');
    }
    if let Some(h) = &s.lock {
        let _ = writeln!(
            out,
            "Locked by {} ({} {}, since {})",
            h.who, h.operation, h.deploy_id, h.since
        );
    }
    resources(&mut out, s);
    if !s.pending.is_empty() {
        let _ = writeln!(
            out,
            "Calls with no recorded outcome (the next deploy reconciles them):"
        );
        for p in s.pending.values() {
            let _ = writeln!(
                out,
                "  {} {:?} ({}), token {}",
                p.logical_id, p.operation, p.resource_type, p.token
            );
        }
    }
    journal(&mut out, s);
    if !s.outputs.is_empty() {
        let _ = writeln!(out, "Outputs:");
        for (k, v) in &s.outputs {
            let _ = writeln!(out, "  {k}: {}", value(v));
        }
    }
    out
}

/// The resources of `stackflow state show`, and the replaced ones awaiting deletion.
fn resources(out: &mut String, s: &StackState) {
    let _ = writeln!(out, "Resources ({}):", s.resources.len());
    for (id, r) in &s.resources {
        let _ = writeln!(
            out,
            "  {id} ({}) {} [{:?}]{}",
            r.resource_type,
            r.physical_id,
            r.provider,
            if r.imported { " imported" } else { "" }
        );
        match &r.baseline {
            Some(Baseline::Refused { cause }) => {
                let _ = writeln!(out, "      ObservedBaseline: REFUSED ({})", cause.as_str());
            }
            Some(Baseline::Recorded { observed }) => {
                let _ = writeln!(out, "      ObservedBaseline: {} properties", observed.len());
            }
            None => {}
        }
    }
    if !s.predecessors.is_empty() {
        let _ = writeln!(out, "Replaced, awaiting deletion:");
        for (phys, p) in &s.predecessors {
            let _ = writeln!(
                out,
                "  {} ({}) {phys}",
                p.logical_id, p.resource.resource_type
            );
        }
    }
}

/// The rollback journal of `stackflow state show`: what a rollback would undo.
fn journal(out: &mut String, s: &StackState) {
    let undo: Vec<_> = s.journal.to_undo().collect();
    if !undo.is_empty() {
        let _ = writeln!(
            out,
            "Rollback journal ({} to undo, last first):",
            undo.len()
        );
        for e in undo {
            let what = match &e.step {
                JournalStep::Created { physical_id, .. } => format!("delete {physical_id}"),
                JournalStep::Updated { physical_id, .. } => format!("restore {physical_id}"),
                JournalStep::Replaced {
                    new_physical_id,
                    previous,
                    ..
                } => {
                    format!("delete {new_physical_id}, keep {}", previous.physical_id)
                }
            };
            let _ = writeln!(out, "  {}: {what}", e.logical_id);
        }
    }
}

/// One line of `stackflow events`: position, time, type, resource, outcome.
pub fn event_line(e: &StoredEvent) -> String {
    let outcome = outcome(&e.event);
    format!(
        "{:>6}  {}  {:<20} {:<28} {}",
        e.seq,
        e.at,
        e.event.type_name(),
        e.event
            .logical_id()
            .filter(|id| !id.is_empty())
            .unwrap_or("-"),
        outcome
    )
}

/// What an event of `stackflow events` did, in a few words.
fn outcome(event: &Event) -> String {
    match event {
        Event::ResourceIntent { .. }
        | Event::ResourceCreated { .. }
        | Event::ResourceUpdated { .. }
        | Event::ResourceDeleted { .. }
        | Event::ResourceRetained { .. }
        | Event::ResourceSkipped { .. }
        | Event::ResourceFailed { .. }
        | Event::ResourceImported { .. } => resource_outcome(event),
        Event::DeployStarted { deploy_id, who, .. } => format!("{deploy_id} by {who}"),
        Event::DeployCompleted { deploy_id, .. } => format!("{deploy_id} completed"),
        Event::DeployFailed {
            deploy_id, error, ..
        } => {
            format!("{deploy_id} failed: {}: {}", error.name, error.message)
        }
        Event::RollbackStarted { deploy_id, .. } => format!("rolling back {deploy_id}"),
        Event::RollbackEntryUndone { how, .. } => how.clone(),
        Event::StackDestroyed { deploy_id } => format!("{deploy_id}: every resource is gone"),
        Event::RollbackFinished {
            complete, errors, ..
        } => {
            if *complete {
                "complete".into()
            } else {
                format!("incomplete, {} errors", errors.len())
            }
        }
        Event::ImportMarked { resources, .. } => format!("{} marked", resources.len()),
        Event::BaselineRecorded { .. }
        | Event::BaselineRefreshed { .. }
        | Event::BaselineAccepted { .. } => "baseline".into(),
        Event::BaselinesRecorded { baselines } => match baselines.len() {
            1 => "1 baseline".into(),
            n => format!("{n} baselines"),
        },
        Event::DriftChecked { results, .. } => format!("{} resources checked", results.len()),
        Event::Scrubbed {
            paths, replaced, ..
        } => match paths.len() + replaced.len() {
            1 => "1 value scrubbed".into(),
            n => format!("{n} values scrubbed"),
        },
        Event::EventsRewritten { by, seqs, .. } => {
            let seqs: Vec<String> = seqs.iter().map(u64::to_string).collect();
            format!("events {} rewritten by {by}", seqs.join(", "))
        }
        Event::LockTaken { holder } => format!("by {} ({})", holder.who, holder.deploy_id),
        Event::Throttled { services, .. } => {
            let each: Vec<String> = services
                .iter()
                .map(|s| match s.lowest_limit {
                    Some(limit) => format!("{} {} (down to {limit} at once)", s.service, s.retries),
                    None => format!("{} {}", s.service, s.retries),
                })
                .collect();
            format!("throttled calls retried: {}", each.join(", "))
        }
        Event::ActionsFenced { deploy_id } => {
            format!("{deploy_id} failed: no new action begins")
        }
        Event::LockReleased { deploy_id } => deploy_id.clone(),
        Event::LockBroken { by, previous } => {
            format!("by {by}, was {} ({})", previous.who, previous.deploy_id)
        }
    }
}

/// What a resource event did, in a few words.
fn resource_outcome(event: &Event) -> String {
    match event {
        Event::ResourceIntent {
            operation, token, ..
        } => format!("{operation:?} (token {token})"),
        Event::ResourceCreated {
            resource, replaces, ..
        } => match replaces {
            Some(old) => format!("replaced {old} with {}", resource.physical_id),
            None => format!("created {}", resource.physical_id),
        },
        Event::ResourceUpdated { resource, .. } => format!("updated {}", resource.physical_id),
        Event::ResourceDeleted {
            physical_id,
            replaced,
            ..
        } => {
            format!(
                "deleted {physical_id}{}",
                if *replaced { " (replaced)" } else { "" }
            )
        }
        Event::ResourceRetained {
            physical_id,
            reason,
            ..
        } => format!("retained {physical_id} ({reason})"),
        Event::ResourceSkipped {
            operation, reason, ..
        } => format!("skipped {operation:?}: {reason}"),
        Event::ResourceFailed {
            operation, error, ..
        } => {
            format!("{operation:?} failed: {}: {}", error.name, error.message)
        }
        Event::ResourceImported {
            resource, baseline, ..
        } => format!(
            "imported {}{}",
            resource.physical_id,
            match baseline {
                Some(Baseline::Refused { .. }) => ", baseline refused",
                Some(Baseline::Recorded { .. }) => "",
                None => ", no baseline (its properties could not be read)",
            }
        ),
        other => unreachable!("{} is not a resource event", other.type_name()),
    }
}

/// The account of one stack's deploy, destroy or rollback: what failed and was rolled
/// back, the counts, the duration and the outputs.
pub fn report(r: &stackflow_engine::StackReport, operation: &str) -> String {
    use stackflow_engine::StackStatus;
    let mut out = String::new();
    let status = match r.status {
        StackStatus::NoChanges => "no changes",
        StackStatus::Succeeded => "succeeded",
        StackStatus::Partial => "partly done",
        StackStatus::Failed => "FAILED",
        StackStatus::Interrupted => "STOPPED",
    };
    let _ = writeln!(
        out,
        "\n{operation} {} {status} in {:.1}s ({})",
        r.stack, r.seconds, r.deploy_id
    );
    if r.status != StackStatus::NoChanges {
        let _ = writeln!(
            out,
            "  {} created, {} updated, {} replaced, {} deleted, {} retained{}",
            r.created,
            r.updated,
            r.replaced,
            r.deleted,
            r.retained,
            if r.recovered > 0 {
                format!(", {} interrupted calls recovered", r.recovered)
            } else {
                String::new()
            }
        );
    } else if operation == "deploy" {
        let _ = writeln!(out, "  nothing changed; no AWS write call was made");
    }
    for f in &r.failures {
        let _ = writeln!(
            out,
            "  ✗ {} ({}) {} failed: {}: {}",
            f.logical_id, f.resource_type, f.action, f.error.name, f.error.message
        );
    }
    for (id, why) in &r.skipped {
        let _ = writeln!(out, "  ! {id} left unaddressed: {why}");
    }
    rollback(&mut out, r, operation);
    if !r.outputs.is_empty() {
        let _ = writeln!(out, "Outputs:");
        for (k, v) in &r.outputs {
            let _ = writeln!(out, "  {k} = {}", value(v));
        }
    }
    out
}

/// What a report says about the rollback: what it undid and could not undo, or why there
/// was none.
fn rollback(out: &mut String, r: &stackflow_engine::StackReport, operation: &str) {
    use stackflow_engine::StackStatus;
    if let Some(rb) = &r.rollback {
        if rb.undone.is_empty() && rb.failed.is_empty() {
            let _ = writeln!(out, "  rollback: nothing to undo");
        } else {
            let _ = writeln!(
                out,
                "  rollback {}: {} undone{}",
                if rb.complete() {
                    "complete"
                } else {
                    "INCOMPLETE"
                },
                rb.undone.len(),
                if rb.failed.is_empty() {
                    String::new()
                } else {
                    format!(", {} could not be undone", rb.failed.len())
                }
            );
            for (id, how) in &rb.undone {
                let _ = writeln!(out, "    {id}: {how}");
            }
            for f in &rb.failed {
                let _ = writeln!(
                    out,
                    "    ✗ {}: {}: {}",
                    f.logical_id, f.error.name, f.error.message
                );
            }
        }
        for (id, why) in &rb.skipped {
            let _ = writeln!(out, "    skipped {id}: {why}");
        }
    } else if r.status == StackStatus::Interrupted && operation == "deploy" {
        let _ = writeln!(
            out,
            "  stopped before the end: what it did is recorded; run `stackflow rollback --stack {}` to undo it, or deploy again to continue",
            r.stack
        );
    } else if r.status == StackStatus::Failed && operation == "deploy" {
        let _ = writeln!(
            out,
            "  not rolled back (--no-rollback): run `stackflow rollback --stack {}` to undo it",
            r.stack
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use stackflow_core::intrinsics::unknown;

    #[test]
    fn values_read_well() {
        assert_eq!(value(&json!("abc")), "abc");
        assert_eq!(value(&json!(30)), "30");
        assert_eq!(
            value(&unknown("Role.Arn")),
            "(known after deploy: Role.Arn)"
        );
        assert_eq!(
            value(&json!({"a": unknown("X")})),
            "{\"a\":{known after deploy:\"X\"}}"
        );
        assert!(value(&json!("x".repeat(500))).ends_with('…'));
    }
}
