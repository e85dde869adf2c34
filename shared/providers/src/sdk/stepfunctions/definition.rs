//! A state machine's definition: the text sent to Step Functions (from `Definition` or
//! `DefinitionString`, `DefinitionSubstitutions` applied), and how what AWS holds is put
//! back into the template's shape.

use serde_json::{Value, json};

use super::TYPE;
use crate::error::ProviderError;
use crate::provider::Properties;
use crate::sdk::common::{invalid, text};

/// `text` with each `${name}` of `substitutions` replaced by its value; a placeholder not
/// in the map is left as it is (Step Functions' own `${...}` has no such use, but the
/// template's author may have meant it literally).
pub(super) fn substitute(
    text_in: &str,
    substitutions: Option<&serde_json::Map<String, Value>>,
) -> Result<String, ProviderError> {
    let Some(map) = substitutions else {
        return Ok(text_in.to_string());
    };
    let mut out = String::with_capacity(text_in.len());
    let mut rest = text_in;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        let key = &after[..end];
        match map.get(key) {
            Some(value) => {
                let value = text(value).ok_or_else(|| {
                    invalid(
                        TYPE,
                        &format!("DefinitionSubstitutions {key} must be a string"),
                    )
                })?;
                out.push_str(&value);
            }
            None => out.push_str(&rest[start..start + 2 + end + 1]),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The definition to send: `DefinitionString` or `Definition` (as JSON text), with the
/// `DefinitionSubstitutions` applied.
pub(super) fn definition(props: &Properties) -> Result<String, ProviderError> {
    let substitutions = match props.get("DefinitionSubstitutions") {
        None => None,
        Some(Value::Object(map)) => Some(map),
        Some(_) => return Err(invalid(TYPE, "DefinitionSubstitutions must be a map")),
    };
    let raw = match (props.get("DefinitionString"), props.get("Definition")) {
        (Some(Value::String(s)), None) => s.clone(),
        (None, Some(object @ Value::Object(_))) => object.to_string(),
        (None, Some(Value::String(s))) => s.clone(),
        (Some(_), Some(_)) => {
            return Err(invalid(
                TYPE,
                "give Definition or DefinitionString, not both",
            ));
        }
        _ => {
            return Err(invalid(
                TYPE,
                "a Definition (object) or DefinitionString is required",
            ));
        }
    };
    substitute(&raw, substitutions)
}

/// Two definitions are the same when their JSON is (else when their text is).
fn same(a: &str, b: &str) -> bool {
    match (
        serde_json::from_str::<Value>(a),
        serde_json::from_str::<Value>(b),
    ) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// Puts the definition AWS holds (`held`) into `state` in the template's shape: when it is
/// what `template` makes, the template's own definition properties (so a state machine no
/// one changed shows no drift, placeholders and all); else `held` as `DefinitionString`
/// (the difference shows).
pub(super) fn insert_definition(state: &mut Properties, held: &str, template: &Properties) {
    if let Ok(wanted) = definition(template)
        && same(&wanted, held)
    {
        for key in ["Definition", "DefinitionString", "DefinitionSubstitutions"] {
            if let Some(value) = template.get(key) {
                state.insert(key.into(), value.clone());
            }
        }
        return;
    }
    match (
        template.get("Definition"),
        serde_json::from_str::<Value>(held),
    ) {
        (Some(_), Ok(object @ Value::Object(_))) => {
            state.insert("Definition".into(), object);
        }
        _ => {
            state.insert("DefinitionString".into(), json!(held));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sdk::common::testing::props;

    #[test]
    fn substitutions_are_applied() {
        let p = props(json!({
            "DefinitionString": "{\"R\":\"${Fn}\",\"N\":${Count},\"K\":\"${Kept}\"}",
            "DefinitionSubstitutions": {"Fn": "arn:f", "Count": 3}
        }));
        assert_eq!(
            definition(&p).expect("valid"),
            "{\"R\":\"arn:f\",\"N\":3,\"K\":\"${Kept}\"}"
        );
        let object = props(json!({"Definition": {"StartAt": "A", "X": "${v}"},
            "DefinitionSubstitutions": {"v": "w"}}));
        assert_eq!(
            definition(&object).expect("valid"),
            r#"{"StartAt":"A","X":"w"}"#
        );
        assert!(definition(&props(json!({}))).is_err());
        assert_eq!(substitute("a ${b", None).expect("ok"), "a ${b");
        let map = serde_json::Map::new();
        assert_eq!(substitute("a ${b", Some(&map)).expect("ok"), "a ${b");
    }

    #[test]
    fn an_unchanged_definition_reads_as_the_template() {
        let template = props(json!({
            "DefinitionString": "{\"R\":\"${Fn}\"}",
            "DefinitionSubstitutions": {"Fn": "arn:f"}
        }));
        let mut state = Properties::new();
        insert_definition(&mut state, "{ \"R\": \"arn:f\" }", &template);
        assert_eq!(Value::Object(state), Value::Object(template.clone()));
        let mut state = Properties::new();
        insert_definition(&mut state, "{\"R\":\"arn:g\"}", &template);
        assert_eq!(
            Value::Object(state),
            json!({"DefinitionString": "{\"R\":\"arn:g\"}"})
        );
        let object = props(json!({"Definition": {"StartAt": "A"}}));
        let mut state = Properties::new();
        insert_definition(&mut state, r#"{"StartAt":"B"}"#, &object);
        assert_eq!(
            Value::Object(state),
            json!({"Definition": {"StartAt": "B"}})
        );
    }
}
