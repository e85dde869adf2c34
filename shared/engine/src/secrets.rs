//! Keeping secrets out of the record: dynamic references resolved for one call only,
//! `NoEcho` values masked in what is recorded, and provider errors masked before they
//! are appended.

use indexmap::IndexMap;
use serde_json::{Map, Value};
use stackflow_core::dynref::{self, DynamicReference};
use stackflow_core::plan::mask_values;
use stackflow_events::event::ErrorInfo;
use stackflow_providers::ProviderError;

use crate::lookups::Lookups;

/// Masks every secret in `text`: dynamic reference values and `NoEcho` parameters.
pub(crate) fn mask_text(
    text: &str,
    resolution: Option<&dynref::Resolution>,
    secrets: &[String],
) -> String {
    let text = match resolution {
        Some(r) => r.mask(text),
        None => text.to_string(),
    };
    match mask_values(&Value::String(text.clone()), secrets) {
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

/// `properties` with the stack's `NoEcho` values masked: what is recorded.
pub(crate) fn for_record(
    properties: &Map<String, Value>,
    secrets: &[String],
) -> Map<String, Value> {
    as_map(mask_values(&Value::Object(properties.clone()), secrets))
}

/// An object value's map (empty for anything else).
pub(crate) fn as_map(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// True when `v` holds a masked `NoEcho` value (`****`), which must never be sent.
pub(crate) fn contains_mask(v: &Value) -> bool {
    match v {
        Value::String(s) => s.contains("****"),
        Value::Array(items) => items.iter().any(contains_mask),
        Value::Object(m) => m.values().any(contains_mask),
        _ => false,
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
pub(crate) fn check_dynamic(props: &Map<String, Value>) -> Result<(), String> {
    let mut texts: Vec<String> = Vec::new();
    collect_strings(&Value::Object(props.clone()), &mut texts);
    for t in texts {
        dynref::find_all(&t).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Resolves the dynamic references in `props` for one call: the values to send, and the
/// resolution that masks them in messages.
pub(crate) async fn resolve_dynamic(
    lookups: &dyn Lookups,
    props: &Map<String, Value>,
) -> Result<(Map<String, Value>, dynref::Resolution), DynamicError> {
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
        return Ok((props.clone(), dynref::Resolution::default()));
    }
    let lookup = |r: &DynamicReference| -> Result<String, String> {
        values
            .iter()
            .find_map(|(text, v)| {
                DynamicReference::parse(text)
                    .ok()
                    .filter(|p| p == r)
                    .map(|_| v.clone())
            })
            .ok_or_else(|| "not looked up".to_string())
    };
    let (v, resolution) = dynref::resolve(&Value::Object(props.clone()), &lookup)
        .map_err(|e| ("InvalidRequest".to_string(), e.to_string()))?;
    Ok((as_map(v), resolution))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn masks_cover_noecho_values_in_messages() {
        let secrets = vec!["hunter2".to_string()];
        assert_eq!(
            mask_text("bad value hunter2 for Password", None, &secrets),
            "bad value **** for Password"
        );
    }

    #[test]
    fn masked_values_are_found_anywhere() {
        assert!(contains_mask(&json!({"a": [{"b": "x****y"}]})));
        assert!(!contains_mask(&json!({"a": [1, "plain"]})));
    }

    #[test]
    fn malformed_dynamic_references_are_found_without_a_lookup() {
        let ok = as_map(json!({"V": "{{resolve:ssm:/app/name}}"}));
        assert!(check_dynamic(&ok).is_ok());
        let bad = as_map(json!({"V": ["{{resolve:nope:x}}"]}));
        assert!(check_dynamic(&bad).is_err());
    }
}
