//! The table's properties between the template's shape and DynamoDB's types: key schema,
//! attribute definitions, throughput, indexes, stream and TTL.

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType,
    LocalSecondaryIndex, Projection, ProjectionType, ProvisionedThroughput,
    ProvisionedThroughputDescription, ScalarAttributeType, StreamSpecification, StreamViewType,
    TableDescription,
};
use serde_json::{Value, json};

use super::invalid;
use crate::error::ProviderError;
use crate::provider::Properties;
use crate::sdk::common::text;

pub(super) fn field(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(text)
}

pub(super) fn number(value: &Value, key: &str) -> Result<Option<i64>, ProviderError> {
    match field(value, key) {
        None => Ok(None),
        Some(s) => s
            .parse::<i64>()
            .map(Some)
            .map_err(|_| invalid(format!("{key} {s} is not a number"))),
    }
}

pub(super) fn boolean(value: Option<&Value>) -> bool {
    value.and_then(text).as_deref() == Some("true")
}

pub(super) fn list(value: Option<&Value>) -> &[Value] {
    value.and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

pub(super) fn key_schema(value: Option<&Value>) -> Result<Vec<KeySchemaElement>, ProviderError> {
    list(value)
        .iter()
        .map(|k| {
            KeySchemaElement::builder()
                .set_attribute_name(field(k, "AttributeName"))
                .set_key_type(field(k, "KeyType").map(|t| KeyType::from(t.as_str())))
                .build()
                .map_err(|e| invalid(format!("KeySchema: {e}")))
        })
        .collect()
}

pub(super) fn attribute_definitions(
    props: &Properties,
) -> Result<Vec<AttributeDefinition>, ProviderError> {
    list(props.get("AttributeDefinitions"))
        .iter()
        .map(|a| {
            AttributeDefinition::builder()
                .set_attribute_name(field(a, "AttributeName"))
                .set_attribute_type(
                    field(a, "AttributeType").map(|t| ScalarAttributeType::from(t.as_str())),
                )
                .build()
                .map_err(|e| invalid(format!("AttributeDefinitions: {e}")))
        })
        .collect()
}

pub(super) fn throughput(
    value: Option<&Value>,
) -> Result<Option<ProvisionedThroughput>, ProviderError> {
    let Some(value) = value else {
        return Ok(None);
    };
    ProvisionedThroughput::builder()
        .set_read_capacity_units(number(value, "ReadCapacityUnits")?)
        .set_write_capacity_units(number(value, "WriteCapacityUnits")?)
        .build()
        .map(Some)
        .map_err(|e| invalid(format!("ProvisionedThroughput: {e}")))
}

pub(super) fn projection(value: Option<&Value>) -> Projection {
    let value = value.unwrap_or(&Value::Null);
    let non_key: Vec<String> = list(value.get("NonKeyAttributes"))
        .iter()
        .filter_map(text)
        .collect();
    Projection::builder()
        .set_projection_type(
            field(value, "ProjectionType").map(|t| ProjectionType::from(t.as_str())),
        )
        .set_non_key_attributes((!non_key.is_empty()).then_some(non_key))
        .build()
}

pub(super) fn global_index(value: &Value) -> Result<GlobalSecondaryIndex, ProviderError> {
    GlobalSecondaryIndex::builder()
        .set_index_name(field(value, "IndexName"))
        .set_key_schema(Some(key_schema(value.get("KeySchema"))?))
        .projection(projection(value.get("Projection")))
        .set_provisioned_throughput(throughput(value.get("ProvisionedThroughput"))?)
        .build()
        .map_err(|e| invalid(format!("GlobalSecondaryIndexes: {e}")))
}

pub(super) fn local_index(value: &Value) -> Result<LocalSecondaryIndex, ProviderError> {
    LocalSecondaryIndex::builder()
        .set_index_name(field(value, "IndexName"))
        .set_key_schema(Some(key_schema(value.get("KeySchema"))?))
        .projection(projection(value.get("Projection")))
        .build()
        .map_err(|e| invalid(format!("LocalSecondaryIndexes: {e}")))
}

/// The stream's view type, when the template turns a stream on.
pub(super) fn stream_view(props: &Properties) -> Option<String> {
    let spec = props.get("StreamSpecification")?;
    if spec.get("StreamEnabled").is_some_and(|e| !boolean(Some(e))) {
        return None;
    }
    field(spec, "StreamViewType")
}

pub(super) fn stream_spec(view: Option<&str>) -> Result<StreamSpecification, ProviderError> {
    StreamSpecification::builder()
        .stream_enabled(view.is_some())
        .set_stream_view_type(view.map(StreamViewType::from))
        .build()
        .map_err(|e| invalid(format!("StreamSpecification: {e}")))
}

/// The TTL attribute, when the template turns TTL on.
pub(super) fn ttl_attribute(props: &Properties) -> Option<String> {
    let spec = props.get("TimeToLiveSpecification")?;
    boolean(spec.get("Enabled"))
        .then(|| field(spec, "AttributeName"))
        .flatten()
}

pub(super) fn billing_mode(props: &Properties) -> String {
    props
        .get("BillingMode")
        .and_then(text)
        .unwrap_or_else(|| "PROVISIONED".into())
}

/// The template's indexes by name.
pub(super) fn indexes_by_name(props: &Properties, key: &str) -> Vec<(String, Value)> {
    let mut indexes: Vec<(String, Value)> = list(props.get(key))
        .iter()
        .filter_map(|i| Some((field(i, "IndexName")?, i.clone())))
        .collect();
    indexes.sort_by(|a, b| a.0.cmp(&b.0));
    indexes
}

pub(super) fn key_schema_value(keys: &[KeySchemaElement]) -> Value {
    keys.iter()
        .map(|k| json!({"AttributeName": k.attribute_name(), "KeyType": k.key_type().as_str()}))
        .collect()
}

pub(super) fn projection_value(p: Option<&Projection>) -> Value {
    let mut out = serde_json::Map::new();
    if let Some(t) = p.and_then(Projection::projection_type) {
        out.insert("ProjectionType".into(), json!(t.as_str()));
    }
    let non_key = p.map(Projection::non_key_attributes).unwrap_or_default();
    if !non_key.is_empty() {
        out.insert("NonKeyAttributes".into(), json!(non_key));
    }
    Value::Object(out)
}

pub(super) fn throughput_value(t: &ProvisionedThroughputDescription) -> Value {
    json!({
        "ReadCapacityUnits": t.read_capacity_units().unwrap_or_default(),
        "WriteCapacityUnits": t.write_capacity_units().unwrap_or_default(),
    })
}

pub(super) fn on_demand(table: &TableDescription) -> bool {
    table
        .billing_mode_summary()
        .and_then(|s| s.billing_mode())
        .is_some_and(|m| *m == BillingMode::PayPerRequest)
}

/// The table's `GlobalSecondaryIndexes` and `LocalSecondaryIndexes` in the template's
/// shape, sorted by name, into `state` when there are any.
pub(super) fn insert_indexes(state: &mut Properties, table: &TableDescription) {
    let on_demand = on_demand(table);
    let mut globals: Vec<_> = table.global_secondary_indexes().iter().collect();
    globals.sort_by_key(|i| i.index_name().unwrap_or_default().to_string());
    let globals: Vec<Value> = globals
        .into_iter()
        .map(|i| {
            let mut index = serde_json::Map::new();
            index.insert("IndexName".into(), json!(i.index_name()));
            index.insert("KeySchema".into(), key_schema_value(i.key_schema()));
            index.insert("Projection".into(), projection_value(i.projection()));
            if !on_demand && let Some(t) = i.provisioned_throughput() {
                index.insert("ProvisionedThroughput".into(), throughput_value(t));
            }
            Value::Object(index)
        })
        .collect();
    if !globals.is_empty() {
        state.insert("GlobalSecondaryIndexes".into(), Value::Array(globals));
    }
    let mut locals: Vec<_> = table.local_secondary_indexes().iter().collect();
    locals.sort_by_key(|i| i.index_name().unwrap_or_default().to_string());
    let locals: Vec<Value> = locals
        .into_iter()
        .map(|i| {
            json!({
                "IndexName": i.index_name(),
                "KeySchema": key_schema_value(i.key_schema()),
                "Projection": projection_value(i.projection()),
            })
        })
        .collect();
    if !locals.is_empty() {
        state.insert("LocalSecondaryIndexes".into(), Value::Array(locals));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sdk::common::testing::props;

    #[test]
    fn template_values_parse() {
        let p = props(json!({
            "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
            "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
            "ProvisionedThroughput": {"ReadCapacityUnits": "5", "WriteCapacityUnits": 2},
            "StreamSpecification": {"StreamViewType": "NEW_IMAGE"},
            "TimeToLiveSpecification": {"AttributeName": "ttl", "Enabled": "true"},
            "Tags": [{"Key": "a", "Value": 1}]
        }));
        let keys = key_schema(p.get("KeySchema")).expect("keys");
        assert_eq!(keys[0].key_type(), &KeyType::Hash);
        assert_eq!(key_schema_value(&keys), p["KeySchema"]);
        let t = throughput(p.get("ProvisionedThroughput"))
            .expect("throughput")
            .expect("some");
        assert_eq!(t.read_capacity_units(), 5);
        assert_eq!(stream_view(&p).as_deref(), Some("NEW_IMAGE"));
        assert_eq!(ttl_attribute(&p).as_deref(), Some("ttl"));
        assert_eq!(billing_mode(&p), "PROVISIONED");
        let off = props(json!({"StreamSpecification": {"StreamEnabled": false}}));
        assert_eq!(stream_view(&off), None);
        assert!(throughput(Some(&json!({"ReadCapacityUnits": "x"}))).is_err());
    }
}
