//! Values AWS returns in another spelling than the template's: numbers as strings,
//! booleans as strings, an ARN for a name, a document as JSON text, tags as a map.

use std::collections::BTreeMap;

use serde_json::Value;

use super::rules::Seg;

/// True when the scalar (or mismatched) values `recorded` and `aws` mean the same:
/// equal; a number and a string holding it (`5` and `"5"`, `5` and `5.0`); a boolean and
/// `"true"`/`"false"` (any case); an ARN and the name it ends with.
pub(crate) fn scalars_equal(recorded: &Value, aws: &Value) -> bool {
    if recorded == aws {
        return true;
    }
    match (recorded, aws) {
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (Value::Number(n), Value::String(s)) | (Value::String(s), Value::Number(n)) => {
            number_text_equal(n, s)
        }
        (Value::Bool(b), Value::String(s)) | (Value::String(s), Value::Bool(b)) => {
            s.eq_ignore_ascii_case(if *b { "true" } else { "false" })
        }
        (Value::String(a), Value::String(b)) => arn_names(a, b) || arn_names(b, a),
        _ => false,
    }
}

fn number_text_equal(n: &serde_json::Number, s: &str) -> bool {
    let s = s.trim();
    if s == n.to_string() {
        return true;
    }
    match (s.parse::<f64>(), n.as_f64()) {
        (Ok(a), Some(b)) => a.is_finite() && a == b,
        _ => false,
    }
}

/// True when `arn` is an ARN whose resource part is `name`, or ends with `/name` or
/// `:name` (`arn:aws:iam::1:role/path/Name` and `Name` or `path/Name`).
fn arn_names(arn: &str, name: &str) -> bool {
    if name.is_empty() || name.starts_with("arn:") || !arn.starts_with("arn:") {
        return false;
    }
    let Some(resource) = arn.splitn(6, ':').nth(5) else {
        return false;
    };
    resource == name
        || resource
            .strip_suffix(name)
            .is_some_and(|head| head.ends_with('/') || head.ends_with(':'))
}

/// `s` parsed as JSON when it holds an object or a list (a policy document as text).
pub(crate) fn json_document(s: &str) -> Option<Value> {
    let t = s.trim_start();
    if !(t.starts_with('{') || t.starts_with('[')) {
        return None;
    }
    serde_json::from_str::<Value>(s)
        .ok()
        .filter(|v| v.is_object() || v.is_array())
}

/// Tags by key: each value and where it is in the tags as given (`[3, "Value"]` for a
/// list, `["Name"]` for a map).
pub(crate) type Tags = BTreeMap<String, (Value, Vec<Seg>)>;

/// Tags as a map from key to value, from a list of `{Key, Value}` objects or from a map
/// of values; AWS's own tags (keys starting with `aws:`) left out. `None` when `v` is
/// not tag-shaped.
pub(crate) fn tags(v: &Value) -> Option<Tags> {
    let mut out = Tags::new();
    match v {
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let m = item.as_object()?;
                let key = m.get("Key")?.as_str()?;
                if m.keys().any(|k| k != "Key" && k != "Value") {
                    return None;
                }
                let value = m.get("Value").cloned().unwrap_or(Value::Null);
                let at = vec![Seg::Index(i), Seg::Key("Value".into())];
                out.insert(key.to_string(), (value, at));
            }
        }
        Value::Object(m) => {
            for (k, value) in m {
                if value.is_object() || value.is_array() {
                    return None;
                }
                out.insert(k.clone(), (value.clone(), vec![Seg::Key(k.clone())]));
            }
        }
        _ => return None,
    }
    out.retain(|k, _| !k.starts_with("aws:"));
    Some(out)
}

/// `v` without AWS's own tags, for display.
pub(crate) fn without_aws_tags(v: &Value) -> Value {
    let own = |k: &str| !k.starts_with("aws:");
    match v {
        Value::Array(items) => Value::Array(
            items
                .iter()
                .filter(|t| t.get("Key").and_then(Value::as_str).is_none_or(own))
                .cloned()
                .collect(),
        ),
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| own(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_and_booleans_as_text() {
        assert!(scalars_equal(&json!(5), &json!("5")));
        assert!(scalars_equal(&json!("5"), &json!(5)));
        assert!(scalars_equal(&json!(5), &json!(5.0)));
        assert!(scalars_equal(&json!("30"), &json!(30.0)));
        assert!(!scalars_equal(&json!(5), &json!("6")));
        assert!(!scalars_equal(&json!(5), &json!("five")));
        assert!(!scalars_equal(&json!(5), &json!("NaN")));
        assert!(scalars_equal(&json!(true), &json!("true")));
        assert!(scalars_equal(&json!("False"), &json!(false)));
        assert!(!scalars_equal(&json!(true), &json!("false")));
        assert!(!scalars_equal(&json!(true), &json!(1)));
        assert!(!scalars_equal(&json!(null), &json!("")));
    }

    #[test]
    fn arns_and_names() {
        let role = json!("arn:aws:iam::123456789012:role/path/MyRole");
        assert!(scalars_equal(&role, &json!("MyRole")));
        assert!(scalars_equal(&json!("MyRole"), &role));
        assert!(scalars_equal(&role, &json!("path/MyRole")));
        assert!(!scalars_equal(&role, &json!("Role")));
        assert!(!scalars_equal(&role, &json!("")));
        let topic = json!("arn:aws:sns:us-east-1:123456789012:MyTopic");
        assert!(scalars_equal(&topic, &json!("MyTopic")));
        let log = json!("arn:aws:logs:us-east-1:1:log-group:/aws/lambda/f");
        assert!(scalars_equal(&log, &json!("/aws/lambda/f")));
        assert!(!scalars_equal(
            &json!("arn:aws:sns:us-east-1:1:A"),
            &json!("arn:aws:sns:us-east-1:1:B")
        ));
        assert!(!scalars_equal(&json!("arn:short"), &json!("short")));
    }

    #[test]
    fn documents_as_text() {
        assert_eq!(json_document(r#" {"a": [1]}"#), Some(json!({"a": [1]})));
        assert_eq!(json_document("[1,2]"), Some(json!([1, 2])));
        assert_eq!(json_document("{not json"), None);
        assert_eq!(json_document("5"), None);
        assert_eq!(json_document("\"s\""), None);
    }

    #[test]
    fn tags_from_lists_and_maps() {
        let list = json!([{"Key": "b", "Value": "2"}, {"Key": "aws:cloudformation:stack-name", "Value": "s"},
                          {"Key": "a", "Value": "1"}]);
        let t = tags(&list).unwrap();
        assert_eq!(t.keys().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(t["a"].0, json!("1"));
        assert_eq!(t["a"].1, [Seg::Index(2), Seg::Key("Value".into())]);
        let map = tags(&json!({"a": "1", "b/c": "2", "aws:x": "y"})).unwrap();
        assert_eq!(map.keys().collect::<Vec<_>>(), ["a", "b/c"]);
        assert_eq!(map["b/c"].1, [Seg::Key("b/c".into())]);
        assert_eq!(tags(&json!([{"Key": "a", "Value": "1", "Other": 1}])), None);
        assert_eq!(tags(&json!([{"Name": "a"}])), None);
        assert_eq!(tags(&json!({"a": {"nested": 1}})), None);
        assert_eq!(tags(&json!("a")), None);
        assert_eq!(
            without_aws_tags(&list),
            json!([{"Key": "b", "Value": "2"}, {"Key": "a", "Value": "1"}])
        );
    }
}
