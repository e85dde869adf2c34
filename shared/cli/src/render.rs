//! Text for people: plans.

use std::fmt::Write as _;

use serde_json::Value;
use stackflow_core::intrinsics::{UNKNOWN_KEY, as_unknown};
use stackflow_core::plan::{Action, Plan, ResourcePlan};

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
