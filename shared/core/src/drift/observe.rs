//! The baseline recorded from what AWS returns: AWS's values, with every secret the
//! template spells put back as its reference text or masked.
//!
//! The walk follows AWS's answer and the template side by side. A key the template does
//! not set is recorded as AWS returned it (AWS's defaults, and anything else AWS adds).
//! Where the template holds a secret (see [`super`]) the baseline holds:
//!
//! - the template's reference text, when the template spells the whole string as one
//!   reference and AWS returns any value there, or spells references inside text and
//!   AWS returns a string with the same text around them;
//! - [`MASKED`] otherwise: at the string itself when AWS's value does not fit around the
//!   references, or the template holds a stackflow mask there (a `NoEcho` value).
//!
//! When the position cannot be matched, the baseline masks the nearest position both
//! hold (the "nearest matchable position"): a list whose length differs from the
//! template's, or one of whose items does not match AWS's item at the same index (a
//! plain item not equal to it, a secret AWS's value does not fit: a reordered list, a
//! list that lost or gained an item), is masked whole; so is a value whose type differs
//! from the template's (an object where the template has a string).
//! A template key holding a secret that AWS does not return (a write-only property)
//! records nothing: AWS gave no value to keep out.
//!
//! When one side is JSON text and the other a document (a policy document), or both are
//! JSON text, and the template holds a secret inside it, they are matched as documents;
//! the baseline then holds the parsed document (when a reference or a mask is left in it),
//! so that its masked positions have pointers; [`super::compare`] takes a document and
//! the JSON text holding it as equal.

use serde_json::{Map, Value};

use super::compare::matches;
use super::markers::{Marker, has_marker, marker};
use super::normalize::json_document;
use super::rules::CompareRules;
use super::{MASKED, Observed};
use crate::dynref::resolve::push_token;

/// The baseline of a resource from `template_props`, its properties as recorded (secrets
/// as their `{{resolve:...}}` text, `NoEcho` values as stackflow masks), and `aws`, what
/// AWS returns now in the template's shape (secrets decrypted). See the module docs.
pub fn observed_baseline(
    template_props: &Map<String, Value>,
    aws: &Map<String, Value>,
) -> Observed {
    let mut masked = Vec::new();
    let baseline = object(template_props, aws, &mut String::new(), &mut masked);
    Observed { baseline, masked }
}

fn object(
    t: &Map<String, Value>,
    a: &Map<String, Value>,
    at: &mut String,
    masked: &mut Vec<String>,
) -> Map<String, Value> {
    a.iter()
        .map(|(k, av)| {
            let v = match t.get(k) {
                Some(tv) => {
                    let len = at.len();
                    push_token(at, k);
                    let v = observe(tv, av, at, masked);
                    at.truncate(len);
                    v
                }
                None => av.clone(),
            };
            (k.clone(), v)
        })
        .collect()
}

fn observe(t: &Value, a: &Value, at: &mut String, masked: &mut Vec<String>) -> Value {
    if !has_marker(t) {
        return a.clone();
    }
    match (t, a) {
        (Value::String(s), _) => string(s, t, a, at, masked),
        (Value::Object(tm), Value::Object(am)) => Value::Object(object(tm, am, at, masked)),
        (Value::Array(tl), Value::Array(al)) if lined_up(tl, al) => {
            let mut out = Vec::with_capacity(al.len());
            for (i, (tv, av)) in tl.iter().zip(al).enumerate() {
                let len = at.len();
                push_token(at, &i.to_string());
                out.push(observe(tv, av, at, masked));
                at.truncate(len);
            }
            Value::Array(out)
        }
        (Value::Object(_) | Value::Array(_), Value::String(text)) => match json_document(text) {
            Some(doc) => as_document(observe(t, &doc, at, masked), a),
            None => mask(at, masked),
        },
        _ => mask(at, masked),
    }
}

fn string(s: &str, t: &Value, a: &Value, at: &mut String, masked: &mut Vec<String>) -> Value {
    if let Some(doc) = json_document(s) {
        let aws_doc = match a {
            Value::String(text) => json_document(text),
            Value::Object(_) | Value::Array(_) => Some(a.clone()),
            _ => None,
        };
        return match aws_doc {
            Some(aws_doc) => as_document(observe(&doc, &aws_doc, at, masked), a),
            None => mask(at, masked),
        };
    }
    match marker(s) {
        Marker::References(p) if p.is_whole() => t.clone(),
        Marker::References(p) if a.as_str().is_some_and(|text| p.matches(text)) => t.clone(),
        Marker::Plain => a.clone(),
        Marker::References(_) | Marker::Masked => mask(at, masked),
    }
}

/// True when the lists have the same length and each template item matches AWS's item
/// at the same index, a secret matching any value that fits it.
fn lined_up(t: &[Value], a: &[Value]) -> bool {
    let rules = CompareRules::default();
    t.len() == a.len() && t.iter().zip(a).all(|(tv, av)| matches(&rules, tv, av, &[]))
}

/// What a document AWS returned (`a`, as text or parsed) is recorded as, once observed:
/// the parsed document when it holds a secret (a reference or a mask), else `a` itself.
fn as_document(observed: Value, a: &Value) -> Value {
    if has_marker(&observed) {
        observed
    } else {
        a.clone()
    }
}

fn mask(at: &str, masked: &mut Vec<String>) -> Value {
    masked.push(at.to_string());
    Value::String(MASKED.to_string())
}
