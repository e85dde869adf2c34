//! Seed 003: "a deploy that changes nothing can clear a mask, when the resource's own
//! secret references are enough to confirm the value".

use serde_json::{Map, Value};

use super::markers::masked_positions;
use super::rules::Resolved;
use crate::dynref;

/// `baseline` with each masked position put back to the reference text the recorded
/// properties spell there, where that text with every reference replaced by its current
/// value (`resolved`) is exactly what AWS holds (`aws`) at the same position. `None` when
/// no mask could be cleared. A position whose recorded value is not a string of
/// references, or whose references are not all resolved, stays masked.
pub fn confirm_masked(
    baseline: &Map<String, Value>,
    recorded: &Map<String, Value>,
    aws: &Map<String, Value>,
    resolved: &Resolved,
) -> Option<Map<String, Value>> {
    let recorded = Value::Object(recorded.clone());
    let aws = Value::Object(aws.clone());
    let mut out = Value::Object(baseline.clone());
    let mut cleared = false;
    for p in masked_positions(baseline) {
        let Some(Value::String(text)) = recorded.pointer(&p) else {
            continue;
        };
        let Some(filled) = fill(text, resolved) else {
            continue;
        };
        if aws.pointer(&p) == Some(&Value::String(filled))
            && let Some(slot) = out.pointer_mut(&p)
        {
            *slot = Value::String(text.clone());
            cleared = true;
        }
    }
    match out {
        Value::Object(m) if cleared => Some(m),
        _ => None,
    }
}

/// `text` with every dynamic reference replaced by its value; `None` when it has none,
/// or one is not resolved.
fn fill(text: &str, resolved: &Resolved) -> Option<String> {
    let found = dynref::find_all(text).ok()?;
    if found.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for o in found {
        out.push_str(&text[at..o.start]);
        out.push_str(resolved.get(&o.text)?);
        at = o.end;
    }
    out.push_str(&text[at..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const REF: &str = "{{resolve:secretsmanager:db:SecretString:password}}";

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn a_mask_the_references_confirm_is_cleared() {
        let recorded = map(json!({"Url": format!("postgres://app:{REF}@db"), "Other": REF}));
        let baseline = map(json!({"Url": "***", "Other": "***", "Extra": 1}));
        let aws = map(json!({"Url": "postgres://app:s3cret@db", "Other": "changed", "Extra": 1}));
        let mut resolved = Resolved::new();
        resolved.insert(REF, "s3cret");
        let cleared = confirm_masked(&baseline, &recorded, &aws, &resolved).unwrap();
        assert_eq!(cleared["Url"], format!("postgres://app:{REF}@db"));
        assert_eq!(cleared["Other"], "***", "AWS holds something else there");
        assert_eq!(cleared["Extra"], 1);
        assert!(!serde_json::to_string(&cleared).unwrap().contains("s3cret"));
    }

    #[test]
    fn nothing_to_confirm_without_the_values() {
        let recorded = map(json!({"Url": format!("x{REF}")}));
        let baseline = map(json!({"Url": "***"}));
        let aws = map(json!({"Url": "xs3cret"}));
        assert_eq!(
            confirm_masked(&baseline, &recorded, &aws, &Resolved::new()),
            None
        );
        let plain = map(json!({"Url": "plain"}));
        assert_eq!(
            confirm_masked(&baseline, &plain, &aws, &Resolved::new()),
            None
        );
    }
}
