//! A rule's `Targets`: the template's list to the EventBridge API's targets, and back.
//!
//! Handled target fields: `Id`, `Arn`, `RoleArn`, `Input`, `InputPath`,
//! `InputTransformer`, `DeadLetterConfig`, `RetryPolicy`, `SqsParameters`,
//! `KinesisParameters` and `HttpParameters`. A target with another field (`EcsParameters`,
//! `BatchParameters`, ...) is refused as an invalid request naming the field: it is not
//! silently dropped.

use std::collections::HashMap;

use aws_sdk_eventbridge::types::{
    DeadLetterConfig, HttpParameters, InputTransformer, KinesisParameters, RetryPolicy,
    SqsParameters, Target,
};
use serde_json::{Map, Value, json};

use super::TYPE;
use crate::error::ProviderError;
use crate::provider::Properties;
use crate::sdk::common::{invalid, text, value_string};

/// The target fields this provider maps.
const FIELDS: &[&str] = &[
    "Id",
    "Arn",
    "RoleArn",
    "Input",
    "InputPath",
    "InputTransformer",
    "DeadLetterConfig",
    "RetryPolicy",
    "SqsParameters",
    "KinesisParameters",
    "HttpParameters",
];

fn field<'a>(target: &'a Value, key: &str) -> Option<&'a Value> {
    target.get(key).filter(|v| !v.is_null())
}

fn string_field(target: &Value, key: &str) -> Option<String> {
    field(target, key).and_then(text)
}

fn int_field(value: &Value, key: &str) -> Result<Option<i32>, ProviderError> {
    let bad = || invalid(TYPE, &format!("target {key} must be an integer"));
    match field(value, key) {
        None => Ok(None),
        Some(Value::Number(n)) => n
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .map(Some)
            .ok_or_else(bad),
        Some(Value::String(s)) => s.parse().map(Some).map_err(|_| bad()),
        Some(_) => Err(bad()),
    }
}

/// A map of strings (`InputPathsMap`, `HeaderParameters`, ...).
fn string_map(value: Option<&Value>) -> Option<HashMap<String, String>> {
    let object = value?.as_object()?;
    Some(
        object
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), text(v)?)))
            .collect(),
    )
}

fn http(value: &Value) -> HttpParameters {
    let path = field(value, "PathParameterValues")
        .and_then(Value::as_array)
        .map(|l| l.iter().filter_map(text).collect());
    HttpParameters::builder()
        .set_path_parameter_values(path)
        .set_header_parameters(string_map(field(value, "HeaderParameters")))
        .set_query_string_parameters(string_map(field(value, "QueryStringParameters")))
        .build()
}

/// One template target as an API target.
fn target(value: &Value) -> Result<Target, ProviderError> {
    let Some(object) = value.as_object() else {
        return Err(invalid(TYPE, "each target must be an object"));
    };
    if let Some(other) = object.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(invalid(
            TYPE,
            &format!("target field {other} is not supported by the SDK provider"),
        ));
    }
    let transformer = match field(value, "InputTransformer") {
        None => None,
        Some(t) => Some(
            InputTransformer::builder()
                .set_input_paths_map(string_map(field(t, "InputPathsMap")))
                .set_input_template(string_field(t, "InputTemplate"))
                .build()
                .map_err(|e| invalid(TYPE, &format!("InputTransformer: {e}")))?,
        ),
    };
    let retry = match field(value, "RetryPolicy") {
        None => None,
        Some(r) => Some(
            RetryPolicy::builder()
                .set_maximum_retry_attempts(int_field(r, "MaximumRetryAttempts")?)
                .set_maximum_event_age_in_seconds(int_field(r, "MaximumEventAgeInSeconds")?)
                .build(),
        ),
    };
    let kinesis = match field(value, "KinesisParameters") {
        None => None,
        Some(k) => Some(
            KinesisParameters::builder()
                .set_partition_key_path(string_field(k, "PartitionKeyPath"))
                .build()
                .map_err(|e| invalid(TYPE, &format!("KinesisParameters: {e}")))?,
        ),
    };
    Target::builder()
        .set_id(string_field(value, "Id"))
        .set_arn(string_field(value, "Arn"))
        .set_role_arn(string_field(value, "RoleArn"))
        .set_input(field(value, "Input").map(value_string))
        .set_input_path(string_field(value, "InputPath"))
        .set_input_transformer(transformer)
        .set_dead_letter_config(field(value, "DeadLetterConfig").map(|d| {
            DeadLetterConfig::builder()
                .set_arn(string_field(d, "Arn"))
                .build()
        }))
        .set_retry_policy(retry)
        .set_sqs_parameters(field(value, "SqsParameters").map(|s| {
            SqsParameters::builder()
                .set_message_group_id(string_field(s, "MessageGroupId"))
                .build()
        }))
        .set_kinesis_parameters(kinesis)
        .set_http_parameters(field(value, "HttpParameters").map(http))
        .build()
        .map_err(|e| invalid(TYPE, &format!("a target needs an Id and an Arn: {e}")))
}

/// The template's `Targets` as API targets (none when absent).
pub(super) fn targets(props: &Properties) -> Result<Vec<Target>, ProviderError> {
    let Some(list) = props.get("Targets") else {
        return Ok(Vec::new());
    };
    list.as_array()
        .ok_or_else(|| invalid(TYPE, "Targets must be a list"))?
        .iter()
        .map(target)
        .collect()
}

/// The ids of the template's targets.
pub(super) fn target_ids(props: &Properties) -> Vec<String> {
    props
        .get("Targets")
        .and_then(Value::as_array)
        .map(|l| l.iter().filter_map(|t| string_field(t, "Id")).collect())
        .unwrap_or_default()
}

/// The entries of `pairs` whose value is set, as an object.
fn object(pairs: Vec<(&str, Option<Value>)>) -> Value {
    let map: Map<String, Value> = pairs
        .into_iter()
        .filter_map(|(k, v)| Some((k.to_string(), v?)))
        .collect();
    Value::Object(map)
}

fn map_value(map: Option<&HashMap<String, String>>) -> Option<Value> {
    let map = map.filter(|m| !m.is_empty())?;
    let sorted: std::collections::BTreeMap<_, _> = map.iter().collect();
    Some(json!(sorted))
}

fn s(v: Option<&str>) -> Option<Value> {
    v.map(|v| json!(v))
}

/// An API target in the template's shape.
pub(super) fn target_value(t: &Target) -> Value {
    let transformer = t.input_transformer().map(|i| {
        object(vec![
            ("InputPathsMap", map_value(i.input_paths_map())),
            ("InputTemplate", Some(json!(i.input_template()))),
        ])
    });
    let retry = t.retry_policy().map(|r| {
        object(vec![
            (
                "MaximumEventAgeInSeconds",
                r.maximum_event_age_in_seconds().map(|v| json!(v)),
            ),
            (
                "MaximumRetryAttempts",
                r.maximum_retry_attempts().map(|v| json!(v)),
            ),
        ])
    });
    let http = t.http_parameters().map(|h| {
        let path =
            (!h.path_parameter_values().is_empty()).then(|| json!(h.path_parameter_values()));
        object(vec![
            ("HeaderParameters", map_value(h.header_parameters())),
            ("PathParameterValues", path),
            (
                "QueryStringParameters",
                map_value(h.query_string_parameters()),
            ),
        ])
    });
    object(vec![
        ("Arn", Some(json!(t.arn()))),
        (
            "DeadLetterConfig",
            t.dead_letter_config()
                .map(|d| object(vec![("Arn", s(d.arn()))])),
        ),
        ("HttpParameters", http),
        ("Id", Some(json!(t.id()))),
        ("Input", s(t.input())),
        ("InputPath", s(t.input_path())),
        ("InputTransformer", transformer),
        (
            "KinesisParameters",
            t.kinesis_parameters()
                .map(|k| json!({"PartitionKeyPath": k.partition_key_path()})),
        ),
        ("RetryPolicy", retry),
        ("RoleArn", s(t.role_arn())),
        (
            "SqsParameters",
            t.sqs_parameters()
                .map(|q| object(vec![("MessageGroupId", s(q.message_group_id()))])),
        ),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sdk::common::testing::props;

    #[test]
    fn targets_convert_both_ways() {
        let list = json!([
            {"Arn": "arn:aws:lambda:us-east-1:123456789012:function:f", "Id": "Target0",
             "DeadLetterConfig": {"Arn": "arn:aws:sqs:us-east-1:123456789012:dlq"},
             "RetryPolicy": {"MaximumRetryAttempts": 2}},
            {"Arn": "arn:aws:sqs:us-east-1:123456789012:q", "Id": "Target1",
             "Input": "{\"a\":1}", "SqsParameters": {"MessageGroupId": "g"},
             "InputTransformer": {"InputPathsMap": {"d": "$.detail"}, "InputTemplate": "<d>"}}
        ]);
        let p = props(json!({"Targets": list}));
        let parsed = targets(&p).expect("valid");
        let back: Vec<Value> = parsed.iter().map(target_value).collect();
        assert_eq!(Value::Array(back), list);
        assert_eq!(target_ids(&p), ["Target0", "Target1"]);
        let ecs = props(json!({"Targets": [{"Id": "a", "Arn": "x", "EcsParameters": {}}]}));
        assert!(
            matches!(targets(&ecs), Err(ProviderError::InvalidRequest(m)) if m.contains("EcsParameters"))
        );
        // An Input object is sent as its JSON text.
        let object = props(json!({"Targets": [{"Id": "a", "Arn": "x", "Input": {"k": 1}}]}));
        assert_eq!(
            targets(&object).expect("valid")[0].input(),
            Some(r#"{"k":1}"#)
        );
    }
}
