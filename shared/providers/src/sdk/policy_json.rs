//! JSON documents that services keep as text (resource policies, SNS filter and redrive
//! policies): what to send, when two are the same, and the shape to report them in.

use serde_json::Value;

/// The text a service takes for a document the template gives as an object (or as a JSON
/// string already).
pub(crate) fn document_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The document `text` holds, parsed (`None` when it is empty or not JSON).
pub(crate) fn parse(text: &str) -> Option<Value> {
    if text.trim().is_empty() {
        return None;
    }
    serde_json::from_str(text).ok()
}

/// True when `text` (what the service holds) is the document `wanted` (a template value):
/// compared as JSON, so key order and spacing do not matter.
pub(crate) fn same_document(text: &str, wanted: &Value) -> bool {
    match (parse(text), wanted) {
        (Some(held), Value::String(s)) => parse(s).is_some_and(|w| w == held),
        (Some(held), other) => held == *other,
        (None, _) => false,
    }
}

/// The document `text` in the shape the template gives it (`template`): a string when the
/// template gives a string (the template's own text when it is the same document), else
/// the parsed object.
pub(crate) fn in_template_shape(text: &str, template: Option<&Value>) -> Value {
    match template {
        Some(Value::String(s)) if same_document(text, &Value::String(s.clone())) => {
            Value::String(s.clone())
        }
        Some(Value::String(_)) => Value::String(text.to_string()),
        _ => parse(text).unwrap_or_else(|| Value::String(text.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn documents_compare_as_json_and_keep_the_template_shape() {
        let held = r#"{"b":1,"a":[1,2]}"#;
        assert!(same_document(held, &json!({"a": [1, 2], "b": 1})));
        assert!(same_document(held, &json!("{\"a\": [1,2], \"b\": 1}")));
        assert!(!same_document(held, &json!({"a": [2, 1], "b": 1})));
        assert!(!same_document("", &json!({})));
        assert_eq!(in_template_shape(held, None), json!({"a": [1, 2], "b": 1}));
        let given = json!("{\"a\": [1,2], \"b\": 1}");
        assert_eq!(in_template_shape(held, Some(&given)), given);
        assert_eq!(document_text(&json!({"a": 1})), r#"{"a":1}"#);
    }
}
