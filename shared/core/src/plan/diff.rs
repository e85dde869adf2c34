//! What changed in one deployed resource, and whether a change forces a replacement.

use serde_json::{Map, Value};

use super::{PropertyChange, StateResource};
use crate::intrinsics::as_unknown;
use crate::schema;

/// The changed properties of the deployed resource `cur`, against the desired
/// `properties` of its type `ty`; each change is marked when it forces a replacement.
pub(super) fn property_changes(
    cur: &StateResource,
    ty: &str,
    properties: &Map<String, Value>,
) -> Vec<PropertyChange> {
    let mut raw = Vec::new();
    diff(
        Some(&Value::Object(cur.properties.clone())),
        Some(&Value::Object(properties.clone())),
        &mut Vec::new(),
        &mut raw,
    );
    let schema = schema_for(ty);
    raw.into_iter()
        .map(|(segs, old, new)| {
            let refs: Vec<&str> = segs.iter().map(String::as_str).collect();
            PropertyChange {
                path: show_path(&segs),
                replaces: schema.is_some_and(|s| s.requires_replacement(&refs)),
                old,
                new,
            }
        })
        .collect()
}

/// Scalars compare by their text, as CloudFormation reads them (`30` equals `"30"`).
fn same(a: &Value, b: &Value) -> bool {
    fn text(v: &Value) -> Option<String> {
        match v {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            Value::Bool(b) => Some(b.to_string()),
            _ => None,
        }
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(v, w)| same(v, w))
        }
        _ => match (text(a), text(b)) {
            (Some(x), Some(y)) => x == y,
            _ => a == b,
        },
    }
}

fn show_path(segments: &[String]) -> String {
    let mut out = String::new();
    for s in segments {
        if s.parse::<usize>().is_ok() && !out.is_empty() {
            out.push_str(&format!("[{s}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(s);
        }
    }
    out
}

/// The differences between two property values, at leaf granularity for objects and for
/// lists of the same length.
fn diff(
    old: Option<&Value>,
    new: Option<&Value>,
    path: &mut Vec<String>,
    out: &mut Vec<(Vec<String>, Option<Value>, Option<Value>)>,
) {
    match (old, new) {
        (Some(Value::Object(o)), Some(Value::Object(n))) if as_unknown(new.unwrap()).is_none() => {
            for (k, nv) in n {
                path.push(k.clone());
                diff(o.get(k), Some(nv), path, out);
                path.pop();
            }
            for (k, ov) in o {
                if !n.contains_key(k) {
                    path.push(k.clone());
                    diff(Some(ov), None, path, out);
                    path.pop();
                }
            }
        }
        (Some(Value::Array(o)), Some(Value::Array(n))) if o.len() == n.len() => {
            for (i, (ov, nv)) in o.iter().zip(n).enumerate() {
                path.push(i.to_string());
                diff(Some(ov), Some(nv), path, out);
                path.pop();
            }
        }
        (Some(o), Some(n)) => {
            if !same(o, n) {
                out.push((path.clone(), Some(o.clone()), Some(n.clone())));
            }
        }
        (None, None) => {}
        (o, n) => out.push((path.clone(), o.cloned(), n.cloned())),
    }
}

/// The schema that decides replacement for a type: custom resources share the schema of
/// `AWS::CloudFormation::CustomResource`.
fn schema_for(resource_type: &str) -> Option<&'static schema::ResourceSchema> {
    if resource_type.starts_with("Custom::") {
        schema::schema("AWS::CloudFormation::CustomResource")
    } else {
        schema::schema(resource_type)
    }
}
