//! One JSON casing for every `--json`: camelCase field names, as AWS and the CDK use.
//!
//! The records (events, snapshots) keep the field names they are stored with; what is
//! printed goes through [`camel_case`], which renames the fields of stackflow's own
//! structures and leaves what is the user's as it is: the contents of properties,
//! attributes, outputs, exports, parameters and baselines (a property named `my_key`, a
//! parameter `db_user`), and the keys of maps keyed by logical id, physical id or token.

use serde_json::{Map, Value};

/// Fields whose values are the user's data, printed exactly as recorded.
const DATA: &[&str] = &[
    "properties",
    "attributes",
    "outputs",
    "exports",
    "parameters",
    "observed",
    "previous_properties",
    "previousProperties",
    "old",
    "new",
    "value",
    "recorded",
    "aws",
    "conditions",
];

/// Fields whose values are maps keyed by ids (logical, physical, tokens, services): their
/// keys stay, their values are stackflow's structures.
const KEYED: &[&str] = &[
    "resources",
    "pending",
    "predecessors",
    "nested",
    "throttled",
    "by_service",
];

/// `value` with every field name of stackflow's structures in camelCase.
pub fn camel_case(value: Value) -> Value {
    convert(value, false)
}

/// Serializes `value` and puts it in camelCase.
pub fn to_camel<T: serde::Serialize>(value: &T) -> serde_json::Result<Value> {
    Ok(camel_case(serde_json::to_value(value)?))
}

/// Prints `value` on stdout, indented, in camelCase.
pub fn print<T: serde::Serialize>(value: &T) -> serde_json::Result<()> {
    println!("{}", serde_json::to_string_pretty(&to_camel(value)?)?);
    Ok(())
}

/// `value` on one line, in camelCase (a JSON line).
pub fn line<T: serde::Serialize>(value: &T) -> serde_json::Result<String> {
    serde_json::to_string(&to_camel(value)?)
}

fn convert(value: Value, keyed: bool) -> Value {
    match value {
        Value::Object(map) => {
            let mut out = Map::with_capacity(map.len());
            for (k, v) in map {
                if keyed {
                    out.insert(k, convert(v, false));
                    continue;
                }
                let v = if DATA.contains(&k.as_str()) {
                    v
                } else {
                    let keyed = KEYED.contains(&k.as_str()) && v.is_object();
                    convert(v, keyed)
                };
                out.insert(camel(&k), v);
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.into_iter().map(|i| convert(i, false)).collect()),
        other => other,
    }
}

/// `deploy_id` → `deployId`; a name without `_` stays as it is.
fn camel(name: &str) -> String {
    if !name.contains('_') {
        return name.to_string();
    }
    let mut out = String::with_capacity(name.len());
    let mut upper = false;
    for c in name.chars() {
        if c == '_' {
            upper = !out.is_empty();
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn stackflows_names_are_camel_case_and_the_users_data_is_left_alone() {
        let state = json!({
            "stack_id": "arn:x",
            "last_deploy": { "deploy_id": "d1", "started_at": "t" },
            "resources": {
                "My_Queue": {
                    "physical_id": "http://q",
                    "resource_type": "AWS::SQS::Queue",
                    "properties": { "queue_name": "q", "Tags": [{ "Key": "cost_center" }] },
                    "baseline": { "recorded": { "observed": { "queue_name": "q" } } }
                }
            },
            "pending": { "tok_1": { "logical_id": "A" } },
            "outputs": { "queue_url": "http://q" },
            "failures": [{ "logical_id": "B", "error": { "name": "E" } }]
        });
        let out = camel_case(state);
        assert_eq!(out["stackId"], "arn:x");
        assert_eq!(out["lastDeploy"]["deployId"], "d1");
        let q = &out["resources"]["My_Queue"];
        assert_eq!(q["physicalId"], "http://q");
        assert_eq!(q["properties"]["queue_name"], "q");
        assert_eq!(q["properties"]["Tags"][0]["Key"], "cost_center");
        assert_eq!(q["baseline"]["recorded"]["observed"]["queue_name"], "q");
        assert_eq!(out["pending"]["tok_1"]["logicalId"], "A");
        assert_eq!(out["outputs"]["queue_url"], "http://q");
        assert_eq!(out["failures"][0]["logicalId"], "B");
        assert!(out.get("stack_id").is_none());
    }

    #[test]
    fn names_are_camel_cased_once() {
        assert_eq!(camel("deploy_id"), "deployId");
        assert_eq!(camel("previous_properties"), "previousProperties");
        assert_eq!(camel("physicalId"), "physicalId");
        assert_eq!(camel("seq"), "seq");
    }
}
