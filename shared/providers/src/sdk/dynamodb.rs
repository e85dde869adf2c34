//! `AWS::DynamoDB::Table` through the DynamoDB API.
//!
//! The physical id (what `Ref` returns) is the table name; the attributes are `Arn` and,
//! when a stream is on, `StreamArn`. Without a `TableName` the name is generated
//! ([`crate::names::physical_name`], at most 255 characters); such a name is ours alone, so
//! a create that finds it taken (a retry after a lost answer) adopts the table. A taken
//! name the template gives is [`ProviderError::AlreadyExists`]. Create and update wait
//! until the table and its indexes are `ACTIVE`.
//!
//! # Updates
//!
//! `TableName`, `KeySchema` and `LocalSecondaryIndexes` cannot change in place
//! ([`ProviderError::NotUpdatable`]: the planner replaces the table). In place, each as its
//! own `UpdateTable` followed by a wait (AWS allows one such change at a time):
//! `BillingMode`/`ProvisionedThroughput`, `DeletionProtectionEnabled`, the stream (a new
//! `StreamViewType` turns the stream off, then on), and `GlobalSecondaryIndexes`: an index
//! that is gone is deleted, a new one is created, one whose `ProvisionedThroughput` alone
//! changed is updated. An index whose `KeySchema` or `Projection` changed under the same
//! name is refused with [`ProviderError::InvalidRequest`] (AWS cannot change it, and
//! replacing the whole table for it would lose the data; rename the index instead).
//! `TimeToLiveSpecification` goes through `UpdateTimeToLive`, `Tags` through
//! `TagResource`/`UntagResource`.
//!
//! `read_current_state` reports `TableName`, `KeySchema`, `AttributeDefinitions`,
//! `BillingMode` only when it is `PAY_PER_REQUEST` (AWS's default is `PROVISIONED`),
//! `ProvisionedThroughput` only for a provisioned table, `GlobalSecondaryIndexes` and
//! `LocalSecondaryIndexes` (sorted by name) when there are any, `StreamSpecification` when
//! a stream is on, `TimeToLiveSpecification` when TTL is on, `DeletionProtectionEnabled`
//! when true, and `Tags` (a `Key`/`Value` list sorted by key) when there are any.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, CreateGlobalSecondaryIndexAction,
    DeleteGlobalSecondaryIndexAction, GlobalSecondaryIndex, GlobalSecondaryIndexUpdate,
    IndexStatus, KeySchemaElement, KeyType, LocalSecondaryIndex, Projection, ProjectionType,
    ProvisionedThroughput, ProvisionedThroughputDescription, ScalarAttributeType,
    StreamSpecification, StreamViewType, TableDescription, TableStatus, Tag,
    TimeToLiveSpecification, TimeToLiveStatus, UpdateGlobalSecondaryIndexAction,
};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::error::{HttpResponse, ProviderError};
use crate::names::{NameRules, given_or_generated};
use crate::provider::{
    Attributes, BoxFuture, Created, CurrentState, Deleted, Imported, Properties, Provider,
    ResourceRequest, Updated,
};
use crate::retry::{RetryPolicy, retry};

/// The resource type this provider handles.
pub const TYPE: &str = "AWS::DynamoDB::Table";

const HANDLED: &[&str] = &[
    "TableName",
    "KeySchema",
    "AttributeDefinitions",
    "BillingMode",
    "ProvisionedThroughput",
    "GlobalSecondaryIndexes",
    "LocalSecondaryIndexes",
    "StreamSpecification",
    "TimeToLiveSpecification",
    "DeletionProtectionEnabled",
    "Tags",
];

/// Table names: letters, digits, `_`, `-` and `.`, 3 to 255 characters.
const NAME_RULES: NameRules = NameRules {
    max_len: 255,
    extra: "-_.",
    lowercase: false,
};

/// The first and the largest pause between two `DescribeTable` calls while waiting.
const POLL_FIRST: Duration = Duration::from_millis(100);
const POLL_MAX: Duration = Duration::from_secs(5);

/// The `AWS::DynamoDB::Table` provider.
#[derive(Debug, Clone)]
pub struct DynamoDbTableProvider {
    client: Client,
    retry: RetryPolicy,
}

/// Classifies a DynamoDB error; `ResourceInUseException` (a table that exists already, or
/// one busy with another change) becomes `in_use`.
fn ddb_error<E>(
    what: &str,
    in_use: fn(String) -> ProviderError,
    error: SdkError<E, HttpResponse>,
) -> ProviderError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    if error.code() == Some("ResourceInUseException") {
        return in_use(format!(
            "{what}: ResourceInUseException: {}",
            error.message().unwrap_or_default()
        ));
    }
    ProviderError::from_sdk(what, error)
}

fn invalid(message: String) -> ProviderError {
    ProviderError::InvalidRequest(format!("{TYPE}: {message}"))
}

/// A value as a string (numbers and booleans too, as CloudFormation accepts them).
fn text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn field(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(text)
}

fn number(value: &Value, key: &str) -> Result<Option<i64>, ProviderError> {
    match field(value, key) {
        None => Ok(None),
        Some(s) => s
            .parse::<i64>()
            .map(Some)
            .map_err(|_| invalid(format!("{key} {s} is not a number"))),
    }
}

fn boolean(value: Option<&Value>) -> bool {
    value.and_then(text).as_deref() == Some("true")
}

fn list(value: Option<&Value>) -> &[Value] {
    value.and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

fn key_schema(value: Option<&Value>) -> Result<Vec<KeySchemaElement>, ProviderError> {
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

fn attribute_definitions(props: &Properties) -> Result<Vec<AttributeDefinition>, ProviderError> {
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

fn throughput(value: Option<&Value>) -> Result<Option<ProvisionedThroughput>, ProviderError> {
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

fn projection(value: Option<&Value>) -> Projection {
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

fn global_index(value: &Value) -> Result<GlobalSecondaryIndex, ProviderError> {
    GlobalSecondaryIndex::builder()
        .set_index_name(field(value, "IndexName"))
        .set_key_schema(Some(key_schema(value.get("KeySchema"))?))
        .projection(projection(value.get("Projection")))
        .set_provisioned_throughput(throughput(value.get("ProvisionedThroughput"))?)
        .build()
        .map_err(|e| invalid(format!("GlobalSecondaryIndexes: {e}")))
}

fn local_index(value: &Value) -> Result<LocalSecondaryIndex, ProviderError> {
    LocalSecondaryIndex::builder()
        .set_index_name(field(value, "IndexName"))
        .set_key_schema(Some(key_schema(value.get("KeySchema"))?))
        .projection(projection(value.get("Projection")))
        .build()
        .map_err(|e| invalid(format!("LocalSecondaryIndexes: {e}")))
}

/// The stream's view type, when the template turns a stream on.
fn stream_view(props: &Properties) -> Option<String> {
    let spec = props.get("StreamSpecification")?;
    if spec.get("StreamEnabled").is_some_and(|e| !boolean(Some(e))) {
        return None;
    }
    field(spec, "StreamViewType")
}

fn stream_spec(view: Option<&str>) -> Result<StreamSpecification, ProviderError> {
    StreamSpecification::builder()
        .stream_enabled(view.is_some())
        .set_stream_view_type(view.map(StreamViewType::from))
        .build()
        .map_err(|e| invalid(format!("StreamSpecification: {e}")))
}

/// The TTL attribute, when the template turns TTL on.
fn ttl_attribute(props: &Properties) -> Option<String> {
    let spec = props.get("TimeToLiveSpecification")?;
    boolean(spec.get("Enabled"))
        .then(|| field(spec, "AttributeName"))
        .flatten()
}

fn billing_mode(props: &Properties) -> String {
    props
        .get("BillingMode")
        .and_then(text)
        .unwrap_or_else(|| "PROVISIONED".into())
}

/// The template's `Tags` (a `Key`/`Value` list) as a map.
fn tag_map(props: &Properties) -> HashMap<String, String> {
    list(props.get("Tags"))
        .iter()
        .filter_map(|t| Some((field(t, "Key")?, field(t, "Value")?)))
        .collect()
}

fn tags_of(map: &HashMap<String, String>) -> Result<Vec<Tag>, ProviderError> {
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort();
    keys.into_iter()
        .map(|k| {
            Tag::builder()
                .key(k)
                .value(&map[k])
                .build()
                .map_err(|e| invalid(format!("tag {k}: {e}")))
        })
        .collect()
}

/// The template's indexes by name.
fn indexes_by_name(props: &Properties, key: &str) -> Vec<(String, Value)> {
    let mut indexes: Vec<(String, Value)> = list(props.get(key))
        .iter()
        .filter_map(|i| Some((field(i, "IndexName")?, i.clone())))
        .collect();
    indexes.sort_by(|a, b| a.0.cmp(&b.0));
    indexes
}

fn attributes(table: &TableDescription) -> Attributes {
    let mut a = Attributes::new();
    if let Some(arn) = table.table_arn() {
        a.insert("Arn".into(), json!(arn));
    }
    let stream_on = table
        .stream_specification()
        .is_some_and(StreamSpecification::stream_enabled);
    if stream_on && let Some(arn) = table.latest_stream_arn() {
        a.insert("StreamArn".into(), json!(arn));
    }
    a
}

fn key_schema_value(keys: &[KeySchemaElement]) -> Value {
    keys.iter()
        .map(|k| json!({"AttributeName": k.attribute_name(), "KeyType": k.key_type().as_str()}))
        .collect()
}

fn projection_value(p: Option<&Projection>) -> Value {
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

fn throughput_value(t: &ProvisionedThroughputDescription) -> Value {
    json!({
        "ReadCapacityUnits": t.read_capacity_units().unwrap_or_default(),
        "WriteCapacityUnits": t.write_capacity_units().unwrap_or_default(),
    })
}

fn on_demand(table: &TableDescription) -> bool {
    table
        .billing_mode_summary()
        .and_then(|s| s.billing_mode())
        .is_some_and(|m| *m == BillingMode::PayPerRequest)
}

impl DynamoDbTableProvider {
    /// A provider using `client`, with the default retry policy.
    pub fn new(client: Client) -> Self {
        DynamoDbTableProvider {
            client,
            retry: RetryPolicy::default(),
        }
    }

    /// Replaces the retry policy.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// `DescribeTable`, or `None` when the table does not exist.
    async fn describe(&self, name: &str) -> Result<Option<TableDescription>, ProviderError> {
        let got = retry(&self.retry, "DescribeTable", || async {
            self.client
                .describe_table()
                .table_name(name)
                .send()
                .await
                .map_err(|e| ddb_error("DescribeTable", ProviderError::Transient, e))
        })
        .await;
        match got {
            Ok(out) => Ok(out.table().cloned()),
            Err(ProviderError::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Waits until the table and all its global indexes are `ACTIVE` (a deleted index gone).
    async fn wait_active(&self, name: &str) -> Result<TableDescription, ProviderError> {
        let deadline = Instant::now() + self.retry.total_deadline;
        let mut pause = POLL_FIRST;
        loop {
            let table = self.describe(name).await?.ok_or_else(|| {
                ProviderError::NotFound(format!("{TYPE} {name} vanished while it was changing"))
            })?;
            let table_active = table.table_status() == Some(&TableStatus::Active);
            let indexes_active = table
                .global_secondary_indexes()
                .iter()
                .all(|i| i.index_status().is_none_or(|s| *s == IndexStatus::Active));
            if table_active && indexes_active {
                return Ok(table);
            }
            if Instant::now() + pause >= deadline {
                return Err(ProviderError::Timeout(format!(
                    "{TYPE} {name}: not ACTIVE within {:?} (status {:?})",
                    self.retry.total_deadline,
                    table.table_status()
                )));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(POLL_MAX);
        }
    }

    async fn create_table(&self, name: &str, props: &Properties) -> Result<(), ProviderError> {
        let keys = key_schema(props.get("KeySchema"))?;
        if keys.is_empty() {
            return Err(invalid(format!("{name}: KeySchema is required")));
        }
        let definitions = attribute_definitions(props)?;
        let mode = billing_mode(props);
        let provisioned = throughput(props.get("ProvisionedThroughput"))?;
        let globals = list(props.get("GlobalSecondaryIndexes"))
            .iter()
            .map(global_index)
            .collect::<Result<Vec<_>, _>>()?;
        let locals = list(props.get("LocalSecondaryIndexes"))
            .iter()
            .map(local_index)
            .collect::<Result<Vec<_>, _>>()?;
        let stream = match stream_view(props) {
            Some(view) => Some(stream_spec(Some(&view))?),
            None => None,
        };
        let tags = tags_of(&tag_map(props))?;
        let protection = props
            .get("DeletionProtectionEnabled")
            .map(|v| boolean(Some(v)));
        retry(&self.retry, "CreateTable", || async {
            self.client
                .create_table()
                .table_name(name)
                .set_key_schema(Some(keys.clone()))
                .set_attribute_definitions(Some(definitions.clone()))
                .billing_mode(BillingMode::from(mode.as_str()))
                .set_provisioned_throughput(provisioned.clone())
                .set_global_secondary_indexes((!globals.is_empty()).then(|| globals.clone()))
                .set_local_secondary_indexes((!locals.is_empty()).then(|| locals.clone()))
                .set_stream_specification(stream.clone())
                .set_tags((!tags.is_empty()).then(|| tags.clone()))
                .set_deletion_protection_enabled(protection)
                .send()
                .await
                .map_err(|e| ddb_error("CreateTable", ProviderError::AlreadyExists, e))
        })
        .await
        .map(|_| ())
    }

    /// The TTL attribute AWS has on (`ENABLED` or `ENABLING`).
    async fn ttl(&self, name: &str) -> Result<Option<String>, ProviderError> {
        let out = retry(&self.retry, "DescribeTimeToLive", || async {
            self.client
                .describe_time_to_live()
                .table_name(name)
                .send()
                .await
                .map_err(|e| ddb_error("DescribeTimeToLive", ProviderError::Transient, e))
        })
        .await?;
        let Some(d) = out.time_to_live_description() else {
            return Ok(None);
        };
        let on = matches!(
            d.time_to_live_status(),
            Some(TimeToLiveStatus::Enabled | TimeToLiveStatus::Enabling)
        );
        Ok(on.then(|| d.attribute_name().map(str::to_string)).flatten())
    }

    async fn set_ttl(&self, name: &str, attribute: &str, on: bool) -> Result<(), ProviderError> {
        let spec = TimeToLiveSpecification::builder()
            .enabled(on)
            .attribute_name(attribute)
            .build()
            .map_err(|e| invalid(format!("TimeToLiveSpecification: {e}")))?;
        retry(&self.retry, "UpdateTimeToLive", || async {
            self.client
                .update_time_to_live()
                .table_name(name)
                .time_to_live_specification(spec.clone())
                .send()
                .await
                .map_err(|e| ddb_error("UpdateTimeToLive", ProviderError::Transient, e))
        })
        .await
        .map(|_| ())
    }

    /// Makes TTL `wanted` (an attribute when on), given what AWS has now.
    async fn sync_ttl(&self, name: &str, wanted: Option<String>) -> Result<(), ProviderError> {
        let current = self.ttl(name).await?;
        if current == wanted {
            return Ok(());
        }
        if let Some(old) = &current {
            self.set_ttl(name, old, false).await?;
        }
        if let Some(new) = &wanted {
            self.set_ttl(name, new, true).await?;
        }
        Ok(())
    }

    /// One `UpdateTable` (built by `build` from a fresh builder), then waits for `ACTIVE`.
    async fn update_table<F>(&self, name: &str, build: F) -> Result<(), ProviderError>
    where
        F: Fn(
            aws_sdk_dynamodb::operation::update_table::builders::UpdateTableFluentBuilder,
        )
            -> aws_sdk_dynamodb::operation::update_table::builders::UpdateTableFluentBuilder,
    {
        retry(&self.retry, "UpdateTable", || async {
            build(self.client.update_table().table_name(name))
                .send()
                .await
                .map_err(|e| ddb_error("UpdateTable", ProviderError::Transient, e))
        })
        .await?;
        self.wait_active(name).await.map(|_| ())
    }

    /// `GlobalSecondaryIndexes` from `previous` to `props`, one change per `UpdateTable`.
    async fn sync_global_indexes(
        &self,
        name: &str,
        previous: &Properties,
        props: &Properties,
    ) -> Result<(), ProviderError> {
        let old = indexes_by_name(previous, "GlobalSecondaryIndexes");
        let new = indexes_by_name(props, "GlobalSecondaryIndexes");
        let find = |list: &[(String, Value)], n: &str| {
            list.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone())
        };
        // Refuse what cannot be done before changing anything.
        for (index, wanted) in &new {
            if let Some(had) = find(&old, index)
                && (had.get("KeySchema") != wanted.get("KeySchema")
                    || had.get("Projection") != wanted.get("Projection"))
            {
                return Err(invalid(format!(
                    "{name}: global secondary index {index}: KeySchema and Projection cannot \
                     change in place; give the changed index a new IndexName"
                )));
            }
        }
        let definitions = attribute_definitions(props)?;
        for (index, _) in &old {
            if find(&new, index).is_none() {
                let action = DeleteGlobalSecondaryIndexAction::builder()
                    .index_name(index)
                    .build()
                    .map_err(|e| invalid(format!("GlobalSecondaryIndexes: {e}")))?;
                let update = GlobalSecondaryIndexUpdate::builder().delete(action).build();
                self.update_table(name, |b| b.global_secondary_index_updates(update.clone()))
                    .await?;
            }
        }
        for (index, wanted) in &new {
            let update = match find(&old, index) {
                None => {
                    let gsi = global_index(wanted)?;
                    let action = CreateGlobalSecondaryIndexAction::builder()
                        .index_name(index)
                        .set_key_schema(Some(gsi.key_schema().to_vec()))
                        .set_projection(gsi.projection().cloned())
                        .set_provisioned_throughput(gsi.provisioned_throughput().cloned())
                        .build()
                        .map_err(|e| invalid(format!("GlobalSecondaryIndexes: {e}")))?;
                    GlobalSecondaryIndexUpdate::builder().create(action).build()
                }
                Some(had)
                    if had.get("ProvisionedThroughput") != wanted.get("ProvisionedThroughput") =>
                {
                    let Some(t) = throughput(wanted.get("ProvisionedThroughput"))? else {
                        continue;
                    };
                    let action = UpdateGlobalSecondaryIndexAction::builder()
                        .index_name(index)
                        .provisioned_throughput(t)
                        .build()
                        .map_err(|e| invalid(format!("GlobalSecondaryIndexes: {e}")))?;
                    GlobalSecondaryIndexUpdate::builder().update(action).build()
                }
                Some(_) => continue,
            };
            self.update_table(name, |b| {
                b.set_attribute_definitions(Some(definitions.clone()))
                    .global_secondary_index_updates(update.clone())
            })
            .await?;
        }
        Ok(())
    }

    async fn list_tags(&self, arn: &str) -> Result<Vec<(String, String)>, ProviderError> {
        let mut tags = Vec::new();
        let mut next: Option<String> = None;
        loop {
            let page = retry(&self.retry, "ListTagsOfResource", || async {
                self.client
                    .list_tags_of_resource()
                    .resource_arn(arn)
                    .set_next_token(next.clone())
                    .send()
                    .await
                    .map_err(|e| ddb_error("ListTagsOfResource", ProviderError::Transient, e))
            })
            .await?;
            tags.extend(
                page.tags()
                    .iter()
                    .map(|t| (t.key().to_string(), t.value().to_string())),
            );
            match page.next_token() {
                Some(token) if !token.is_empty() => next = Some(token.to_string()),
                _ => break,
            }
        }
        tags.sort();
        Ok(tags)
    }

    /// Makes the table's tags those of `props`, given the `previous` ones.
    async fn sync_tags(
        &self,
        arn: &str,
        previous: &Properties,
        props: &Properties,
    ) -> Result<(), ProviderError> {
        let old = tag_map(previous);
        let new = tag_map(props);
        let removed: Vec<String> = old
            .keys()
            .filter(|k| !new.contains_key(*k))
            .cloned()
            .collect();
        let changed: HashMap<String, String> = new
            .into_iter()
            .filter(|(k, v)| old.get(k) != Some(v))
            .collect();
        if !removed.is_empty() {
            retry(&self.retry, "UntagResource", || async {
                self.client
                    .untag_resource()
                    .resource_arn(arn)
                    .set_tag_keys(Some(removed.clone()))
                    .send()
                    .await
                    .map_err(|e| ddb_error("UntagResource", ProviderError::Transient, e))
            })
            .await?;
        }
        if !changed.is_empty() {
            let tags = tags_of(&changed)?;
            retry(&self.retry, "TagResource", || async {
                self.client
                    .tag_resource()
                    .resource_arn(arn)
                    .set_tags(Some(tags.clone()))
                    .send()
                    .await
                    .map_err(|e| ddb_error("TagResource", ProviderError::Transient, e))
            })
            .await?;
        }
        Ok(())
    }
}

impl Provider for DynamoDbTableProvider {
    fn name(&self) -> &str {
        "sdk:AWS::DynamoDB::Table"
    }

    fn handled_properties(&self, _resource_type: &str) -> Option<&[&str]> {
        Some(HANDLED)
    }

    fn create<'a>(
        &'a self,
        request: &'a ResourceRequest,
    ) -> BoxFuture<'a, Result<Created, ProviderError>> {
        Box::pin(async move {
            let props = &request.properties;
            let (name, generated) = given_or_generated(request, "TableName", NAME_RULES);
            let context = || format!("{} ({TYPE})", request.logical_id);
            match self.create_table(&name, props).await {
                Ok(()) => {}
                // Our own generated name: the table an earlier attempt made.
                Err(ProviderError::AlreadyExists(_)) if generated => {}
                Err(e) => return Err(e.context(context())),
            }
            self.wait_active(&name)
                .await
                .map_err(|e| e.context(context()))?;
            self.sync_ttl(&name, ttl_attribute(props))
                .await
                .map_err(|e| e.context(context()))?;
            let table = self.wait_active(&name).await?;
            Ok(Created {
                attributes: attributes(&table),
                physical_id: name,
            })
        })
    }

    fn update<'a>(
        &'a self,
        request: &'a ResourceRequest,
    ) -> BoxFuture<'a, Result<Updated, ProviderError>> {
        Box::pin(async move {
            let name = request.require_physical_id()?;
            let props = &request.properties;
            let previous = request.previous_properties.clone().unwrap_or_default();
            let not_updatable = |what: &str| {
                ProviderError::NotUpdatable(format!(
                    "{} ({TYPE}): {what} cannot change in place",
                    request.logical_id
                ))
            };
            if let Some(wanted) = request.string_property("TableName")
                && wanted != name
            {
                return Err(not_updatable("TableName"));
            }
            for key in ["KeySchema", "LocalSecondaryIndexes"] {
                if previous.get(key) != props.get(key) {
                    return Err(not_updatable(key));
                }
            }
            let table = self.wait_active(name).await?;

            // Billing mode and throughput (one UpdateTable).
            let mode = billing_mode(props);
            let mode_changed = mode != billing_mode(&previous);
            let throughput_changed =
                previous.get("ProvisionedThroughput") != props.get("ProvisionedThroughput");
            if mode_changed || (throughput_changed && mode == "PROVISIONED") {
                let provisioned = throughput(props.get("ProvisionedThroughput"))?;
                let definitions = attribute_definitions(props)?;
                self.update_table(name, |b| {
                    b.billing_mode(BillingMode::from(mode.as_str()))
                        .set_provisioned_throughput(provisioned.clone())
                        .set_attribute_definitions(Some(definitions.clone()))
                })
                .await?;
            }

            let protection = boolean(props.get("DeletionProtectionEnabled"));
            if protection != boolean(previous.get("DeletionProtectionEnabled")) {
                self.update_table(name, |b| b.deletion_protection_enabled(protection))
                    .await?;
            }

            let (old_view, new_view) = (stream_view(&previous), stream_view(props));
            if old_view != new_view {
                let on = table
                    .stream_specification()
                    .is_some_and(StreamSpecification::stream_enabled);
                if on {
                    let off = stream_spec(None)?;
                    self.update_table(name, |b| b.stream_specification(off.clone()))
                        .await?;
                }
                if let Some(view) = &new_view {
                    let spec = stream_spec(Some(view))?;
                    self.update_table(name, |b| b.stream_specification(spec.clone()))
                        .await?;
                }
            }

            self.sync_global_indexes(name, &previous, props).await?;

            if ttl_attribute(props) != ttl_attribute(&previous) {
                self.sync_ttl(name, ttl_attribute(props)).await?;
            }
            if let Some(arn) = table.table_arn() {
                self.sync_tags(arn, &previous, props).await?;
            }
            let table = self.wait_active(name).await?;
            Ok(Updated {
                physical_id: name.to_string(),
                attributes: attributes(&table),
                replaced: false,
            })
        })
    }

    fn delete<'a>(
        &'a self,
        request: &'a ResourceRequest,
    ) -> BoxFuture<'a, Result<Deleted, ProviderError>> {
        Box::pin(async move {
            let name = request.require_physical_id()?;
            // A table still being created or updated answers ResourceInUseException: retried.
            let result = retry(&self.retry, "DeleteTable", || async {
                self.client
                    .delete_table()
                    .table_name(name)
                    .send()
                    .await
                    .map_err(|e| ddb_error("DeleteTable", ProviderError::Transient, e))
            })
            .await;
            Deleted::unless_missing(result)
        })
    }

    fn import<'a>(
        &'a self,
        request: &'a ResourceRequest,
    ) -> BoxFuture<'a, Result<Imported, ProviderError>> {
        Box::pin(async move {
            let Some(name) = request.explicit_or_named("TableName") else {
                return Ok(Imported::NotDeployedYet);
            };
            Ok(match self.describe(&name).await? {
                Some(table) => Imported::Found {
                    physical_id: name,
                    attributes: attributes(&table),
                },
                None => Imported::NotDeployedYet,
            })
        })
    }

    fn read_current_state<'a>(
        &'a self,
        request: &'a ResourceRequest,
    ) -> BoxFuture<'a, Result<CurrentState, ProviderError>> {
        Box::pin(async move {
            let name = request.require_physical_id()?;
            let Some(table) = self.describe(name).await? else {
                return Ok(CurrentState::NotFound);
            };
            let mut state = Properties::new();
            state.insert("TableName".into(), json!(name));
            state.insert("KeySchema".into(), key_schema_value(table.key_schema()));
            let definitions: Value = table
                .attribute_definitions()
                .iter()
                .map(|a| {
                    json!({
                        "AttributeName": a.attribute_name(),
                        "AttributeType": a.attribute_type().as_str(),
                    })
                })
                .collect();
            state.insert("AttributeDefinitions".into(), definitions);
            let on_demand = on_demand(&table);
            if on_demand {
                state.insert("BillingMode".into(), json!("PAY_PER_REQUEST"));
            } else if let Some(t) = table.provisioned_throughput() {
                state.insert("ProvisionedThroughput".into(), throughput_value(t));
            }
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
            if let Some(spec) = table.stream_specification()
                && spec.stream_enabled()
                && let Some(view) = spec.stream_view_type()
            {
                state.insert(
                    "StreamSpecification".into(),
                    json!({"StreamViewType": view.as_str()}),
                );
            }
            if let Some(attribute) = self.ttl(name).await? {
                state.insert(
                    "TimeToLiveSpecification".into(),
                    json!({"AttributeName": attribute, "Enabled": true}),
                );
            }
            if table.deletion_protection_enabled() == Some(true) {
                state.insert("DeletionProtectionEnabled".into(), json!(true));
            }
            if let Some(arn) = table.table_arn() {
                let tags = self.list_tags(arn).await?;
                if !tags.is_empty() {
                    let list = tags
                        .into_iter()
                        .map(|(k, v)| json!({"Key": k, "Value": v}))
                        .collect();
                    state.insert("Tags".into(), Value::Array(list));
                }
            }
            Ok(CurrentState::Found(state))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::physical_name;

    fn props(v: Value) -> Properties {
        v.as_object().cloned().unwrap_or_default()
    }

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
        assert_eq!(tag_map(&p).get("a").map(String::as_str), Some("1"));
        let off = props(json!({"StreamSpecification": {"StreamEnabled": false}}));
        assert_eq!(stream_view(&off), None);
        assert!(throughput(Some(&json!({"ReadCapacityUnits": "x"}))).is_err());
        let name = physical_name(&"s".repeat(300), "Table", "t", "", NAME_RULES);
        assert!(name.len() <= 255, "{name}");
    }
}
