//! Keeping secrets out of the record: dynamic references resolved for one call only,
//! `NoEcho` values masked in what is recorded, and provider errors masked before they
//! are appended.

use std::sync::{Arc, Mutex, MutexGuard};

use indexmap::IndexMap;
use serde_json::{Map, Value};
use stackflow_core::dynref::{self, DynamicReference};
use stackflow_core::plan::mask_values;
use stackflow_core::secrets::{DigestKey, Masking, contains_mask as holds_mask};
use stackflow_events::event::ErrorInfo;
use stackflow_events::projection::StackState;
use stackflow_providers::ProviderError;

use crate::engine::Engine;
use crate::lookups::Lookups;

/// Attribute values recorded masked, as AWS gave them, by resource and attribute: what
/// `Fn::GetAtt` reads during the deploy that got them. Memory only; never serialized.
#[derive(Clone, Default)]
pub struct Sealed(Arc<Mutex<IndexMap<String, IndexMap<String, Value>>>>);

impl std::fmt::Debug for Sealed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealed(<redacted>)")
    }
}

impl Sealed {
    /// The values, to read.
    pub fn read(&self) -> MutexGuard<'_, IndexMap<String, IndexMap<String, Value>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl<S> Engine<S> {
    /// The digest key of stack `stack`.
    pub(crate) fn stack_digest_key(&self, stack: &str) -> Option<DigestKey> {
        self.digest_key.as_ref().map(|k| k.for_stack(stack))
    }
}

/// True when `res.attr` is a secret: recorded masked, or held sealed.
pub(crate) fn sensitive(state: &StackState, sealed: &Sealed, res: &str, attr: &str) -> bool {
    sealed.read().get(res).is_some_and(|a| a.contains_key(attr))
        || state
            .resources
            .get(res)
            .and_then(|r| r.attributes.get(attr))
            .is_some_and(holds_mask)
}

/// `attributes` as recorded (see `Deployment::record_attributes`).
pub(crate) fn mask_attributes(
    m: &Masking<'_>,
    attributes: &IndexMap<String, Value>,
    all_secret: bool,
    needles: &[String],
) -> IndexMap<String, Value> {
    attributes
        .iter()
        .map(|(k, v)| {
            let masked = if all_secret {
                m.mask_whole(v)
            } else {
                m.mask_containing(v, needles)
            };
            (k.clone(), masked)
        })
        .collect()
}

/// `attributes` as recorded when no deployment is at hand (a replay outside a deploy):
/// masked by the call's secrets only.
pub(crate) fn mask_attributes_plain(
    attributes: &IndexMap<String, Value>,
    all_secret: bool,
    needles: &[String],
) -> IndexMap<String, Value> {
    let params = stackflow_core::intrinsics::BoundParameters::default();
    let m = Masking::new(
        &params,
        None,
        &stackflow_core::secrets::no_sensitive_attributes,
    );
    mask_attributes(&m, attributes, all_secret, needles)
}

/// The secret values a call's resolution substituted.
pub(crate) fn resolved_secrets(resolution: &dynref::Resolution) -> Vec<String> {
    resolution
        .records
        .iter()
        .flat_map(|r| r.secrets.iter().cloned())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Masks every secret in `text`: dynamic reference values, and `NoEcho` parameters and
/// the values computed from them, each in every form it can take in a message (raw,
/// JSON-escaped, base64).
pub(crate) fn mask_text(
    text: &str,
    resolution: Option<&dynref::Resolution>,
    secrets: &[String],
) -> String {
    let text = match resolution {
        Some(r) => r.mask(text),
        None => text.to_string(),
    };
    let forms: Vec<String> = secrets
        .iter()
        .flat_map(|s| stackflow_core::secrets::forms(s))
        .collect();
    match mask_values(&Value::String(text.clone()), &forms) {
        Value::String(s) => s,
        _ => text,
    }
}

/// What masks one call's messages: the values its dynamic references resolved to and the
/// stack's `NoEcho` values.
pub(crate) struct Masker<'a> {
    /// The call's resolution (none before the call resolved anything).
    pub resolution: Option<&'a dynref::Resolution>,
    /// The `NoEcho` values.
    pub secrets: &'a [String],
}

impl Masker<'_> {
    /// `text`, masked.
    pub fn text(&self, text: &str) -> String {
        mask_text(text, self.resolution, self.secrets)
    }

    /// A provider error as recorded: its class name and its masked message.
    pub fn error(&self, e: &ProviderError) -> ErrorInfo {
        ErrorInfo {
            name: e.name().to_string(),
            message: self.text(e.message()),
        }
    }

    /// An error of the engine's own (`name`), masked.
    pub fn info(&self, name: &str, message: &str) -> ErrorInfo {
        ErrorInfo {
            name: name.to_string(),
            message: self.text(message),
        }
    }
}

/// An object value's map (empty for anything else).
pub(crate) fn as_map(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// The JSON pointer of the first masked value in `props` (see [`contains_mask`]).
pub(crate) fn masked_at(props: &Map<String, Value>) -> Option<String> {
    fn walk(v: &Value, at: String) -> Option<String> {
        match v {
            Value::String(s) if stackflow_core::secrets::is_masked(s) => Some(at),
            Value::Array(items) => items
                .iter()
                .enumerate()
                .find_map(|(i, x)| walk(x, format!("{at}/{i}"))),
            Value::Object(m) => m.iter().find_map(|(k, x)| walk(x, format!("{at}/{k}"))),
            _ => None,
        }
    }
    props.iter().find_map(|(k, v)| walk(v, format!("/{k}")))
}

/// True when `v` holds a mask (a `NoEcho` value's `****`, or a baseline's `***`), which
/// must never be sent.
pub(crate) fn contains_mask(v: &Value) -> bool {
    holds_mask(v)
}

/// Every reference occurrence's text in `s`.
pub(crate) fn occurrences(s: &str) -> Vec<String> {
    dynref::find_all(s)
        .map(|found| found.into_iter().map(|o| o.text).collect())
        .unwrap_or_default()
}

/// Every `{{resolve:...}}` occurrence's text in the strings of `v`.
pub(crate) fn collect_references(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) if dynref::contains_dynamic_reference(s) => {
            out.extend(occurrences(s));
        }
        Value::Array(items) => items.iter().for_each(|i| collect_references(i, out)),
        Value::Object(m) => m.values().for_each(|i| collect_references(i, out)),
        _ => {}
    }
}

fn collect_strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) if dynref::contains_dynamic_reference(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|i| collect_strings(i, out)),
        Value::Object(m) => m.values().for_each(|i| collect_strings(i, out)),
        _ => {}
    }
}

/// A dynamic reference that could not be resolved: the error's class name and message.
pub(crate) type DynamicError = (String, String);

/// Checks every dynamic reference in `props` parses, without looking anything up.
pub(crate) fn check_dynamic(props: &Map<String, Value>) -> Result<(), dynref::DynRefError> {
    let mut texts: Vec<String> = Vec::new();
    collect_strings(&Value::Object(props.clone()), &mut texts);
    for t in texts {
        dynref::find_all(&t)?;
    }
    Ok(())
}

/// One call's properties with their dynamic references resolved: what is sent, the
/// resolution that masks the values in messages, and each reference's value (for the
/// digest that sees a rotation, `rotation::digest`).
pub(crate) struct Resolved {
    pub props: Map<String, Value>,
    pub resolution: dynref::Resolution,
    pub values: IndexMap<String, String>,
}

/// Resolves the dynamic references in `props` for one call.
pub(crate) async fn resolve_dynamic(
    lookups: &dyn Lookups,
    props: &Map<String, Value>,
) -> Result<Resolved, DynamicError> {
    let mut texts: Vec<String> = Vec::new();
    collect_strings(&Value::Object(props.clone()), &mut texts);
    let mut values: IndexMap<String, String> = IndexMap::new();
    for t in texts {
        let found = dynref::find_all(&t).map_err(|e| ("InvalidRequest".into(), e.to_string()))?;
        for occ in found {
            if values.contains_key(&occ.text) {
                continue;
            }
            let v = lookups
                .dynamic_reference(&occ.reference)
                .await
                .map_err(|e| ("NotFound".to_string(), e.to_string()))?;
            values.insert(occ.text.clone(), v);
        }
    }
    if values.is_empty() {
        return Ok(Resolved {
            props: props.clone(),
            resolution: dynref::Resolution::default(),
            values,
        });
    }
    let lookup = |r: &DynamicReference| -> Result<String, dynref::LookupFailed> {
        values
            .iter()
            .find_map(|(text, v)| {
                DynamicReference::parse(text)
                    .ok()
                    .filter(|p| p == r)
                    .map(|_| v.clone())
            })
            .ok_or(dynref::LookupFailed::NotLookedUp)
    };
    let (v, resolution) = dynref::resolve(&Value::Object(props.clone()), &lookup)
        .map_err(|e| ("InvalidRequest".to_string(), e.to_string()))?;
    Ok(Resolved {
        props: as_map(v),
        resolution,
        values,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn masks_cover_noecho_values_in_messages() {
        let secrets = vec!["hunter2".to_string(), "say \"hi\"".to_string()];
        assert_eq!(
            mask_text("bad value hunter2 for Password", None, &secrets),
            "bad value **** for Password"
        );
        // As an AWS error quotes a request: JSON-escaped, and base64.
        assert_eq!(
            mask_text(r#"{"Value":"say \"hi\""} / aHVudGVyMg=="#, None, &secrets),
            r#"{"Value":"****"} / ****"#
        );
    }

    #[test]
    fn masked_values_are_found_anywhere() {
        assert!(contains_mask(&json!({"a": [{"b": "x****y"}]})));
        assert!(contains_mask(&json!({"a": ["***"]})), "a baseline's mask");
        assert!(!contains_mask(&json!({"a": [1, "plain", "a *** b"]})));
        let props = as_map(json!({"Env": {"Vars": {"A": "x", "B": "***"}}}));
        assert_eq!(masked_at(&props).as_deref(), Some("/Env/Vars/B"));
    }

    #[test]
    fn malformed_dynamic_references_are_found_without_a_lookup() {
        let ok = as_map(json!({"V": "{{resolve:ssm:/app/name}}"}));
        assert!(check_dynamic(&ok).is_ok());
        let bad = as_map(json!({"V": ["{{resolve:nope:x}}"]}));
        assert!(check_dynamic(&bad).is_err());
    }
}
