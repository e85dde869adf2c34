//! `AWS::DynamoDB::Table` through the DynamoDB API.
//!
//! The physical id (what `Ref` returns) is the table name; the attributes are `Arn` and,
//! when a stream is on, `StreamArn`. Without a `TableName` the name is generated
//! ([`crate::names::physical_name`], at most 255 characters); such a name is ours alone, so
//! a create that finds it taken (a retry after a lost answer) adopts the table. A name the
//! template gives is never taken over: `CreateTable` refuses a taken one
//! (`ResourceInUseException`), which is [`ProviderError::AlreadyExists`] saying so
//! (`SdkResource::name_taken`). Create and update wait until the table and its indexes
//! are `ACTIVE`.
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

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::types::{
    BillingMode, CreateGlobalSecondaryIndexAction, DeleteGlobalSecondaryIndexAction,
    GlobalSecondaryIndexUpdate, IndexStatus, StreamSpecification, TableDescription, TableStatus,
    Tag, TimeToLiveSpecification, TimeToLiveStatus, UpdateGlobalSecondaryIndexAction,
};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::common::{
    self, SdkResource, Tagging, call_classified, context, find_in_pages, insert_tags,
    missing_as_none, sdk_provider, sdk_tags, tagging,
};
use crate::error::{HttpResponse, ProviderError};
use crate::names::{NameRules, given_or_generated};
use crate::provider::{Attributes, Created, CurrentState};
use crate::provider::{Properties, ResourceRequest, Updated};

mod table;

use table::{
    attribute_definitions, billing_mode, boolean, field, global_index, indexes_by_name,
    insert_indexes, key_schema, key_schema_value, list, local_index, on_demand, stream_spec,
    stream_view, throughput, throughput_value, ttl_attribute,
};

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

sdk_provider! {
    /// The `AWS::DynamoDB::Table` provider.
    DynamoDbTableProvider(Client), "AWS::DynamoDB::Table", HANDLED
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

/// [`ddb_error`] for the calls a busy table makes fail for a while: retried.
fn busy<E>(what: &str, error: SdkError<E, HttpResponse>) -> ProviderError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    ddb_error(what, ProviderError::Transient, error)
}

/// [`ddb_error`] for `CreateTable`: the name is taken.
fn taken<E>(what: &str, error: SdkError<E, HttpResponse>) -> ProviderError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    ddb_error(what, ProviderError::AlreadyExists, error)
}

fn invalid(message: String) -> ProviderError {
    common::invalid(TYPE, &message)
}

/// The template's `Tags` (a `Key`/`Value` list) as a map.
fn tag_map(props: &Properties) -> HashMap<String, String> {
    list(props.get("Tags"))
        .iter()
        .filter_map(|t| Some((field(t, "Key")?, field(t, "Value")?)))
        .collect()
}

/// The DynamoDB tags of `tags`.
fn ddb_tags(tags: impl IntoIterator<Item = (String, String)>) -> Result<Vec<Tag>, ProviderError> {
    sdk_tags(TYPE, tags, |k, v| Tag::builder().key(k).value(v).build())
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

/// True when the table and all its global indexes are `ACTIVE`.
fn is_active(table: &TableDescription) -> bool {
    table.table_status() == Some(&TableStatus::Active)
        && table
            .global_secondary_indexes()
            .iter()
            .all(|i| i.index_status().is_none_or(|s| *s == IndexStatus::Active))
}

impl DynamoDbTableProvider {
    /// Waits until the table and all its global indexes are `ACTIVE` (a deleted index gone).
    async fn wait_active(&self, name: &str) -> Result<TableDescription, ProviderError> {
        let deadline = Instant::now() + self.retry.total_deadline;
        let mut pause = POLL_FIRST;
        loop {
            let table = self.find(name).await?.ok_or_else(|| {
                ProviderError::NotFound(format!("{TYPE} {name} vanished while it was changing"))
            })?;
            if is_active(&table) {
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

    /// `CreateTable`: the table description it answers.
    async fn create_table(
        &self,
        name: &str,
        props: &Properties,
    ) -> Result<Option<TableDescription>, ProviderError> {
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
        let tags = ddb_tags(tag_map(props).into_iter().collect::<BTreeMap<_, _>>())?;
        let protection = props
            .get("DeletionProtectionEnabled")
            .map(|v| boolean(Some(v)));
        call_classified(&self.retry, "CreateTable", taken, || {
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
        })
        .await
        .map(|out| out.table_description)
    }

    /// The TTL attribute AWS has on (`ENABLED` or `ENABLING`).
    async fn ttl(&self, name: &str) -> Result<Option<String>, ProviderError> {
        let out = call_classified(&self.retry, "DescribeTimeToLive", busy, || {
            self.client.describe_time_to_live().table_name(name).send()
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
        call_classified(&self.retry, "UpdateTimeToLive", busy, || {
            self.client
                .update_time_to_live()
                .table_name(name)
                .time_to_live_specification(spec.clone())
                .send()
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

    /// One `UpdateTable` (built by `build` from a fresh builder), then waits for `ACTIVE`:
    /// the table as it is then.
    async fn update_table<F>(&self, name: &str, build: F) -> Result<TableDescription, ProviderError>
    where
        F: Fn(
            aws_sdk_dynamodb::operation::update_table::builders::UpdateTableFluentBuilder,
        )
            -> aws_sdk_dynamodb::operation::update_table::builders::UpdateTableFluentBuilder,
    {
        call_classified(&self.retry, "UpdateTable", busy, || {
            build(self.client.update_table().table_name(name)).send()
        })
        .await?;
        self.wait_active(name).await
    }

    /// `GlobalSecondaryIndexes` from `previous` to `props`, one change per `UpdateTable`:
    /// the table after the last change, `None` when nothing changed.
    async fn sync_global_indexes(
        &self,
        name: &str,
        previous: &Properties,
        props: &Properties,
    ) -> Result<Option<TableDescription>, ProviderError> {
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
        let mut latest = None;
        for (index, _) in &old {
            if find(&new, index).is_none() {
                let action = DeleteGlobalSecondaryIndexAction::builder()
                    .index_name(index)
                    .build()
                    .map_err(|e| invalid(format!("GlobalSecondaryIndexes: {e}")))?;
                let update = GlobalSecondaryIndexUpdate::builder().delete(action).build();
                let changed =
                    self.update_table(name, |b| b.global_secondary_index_updates(update.clone()));
                latest = Some(changed.await?);
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
            let changed = self.update_table(name, |b| {
                b.set_attribute_definitions(Some(definitions.clone()))
                    .global_secondary_index_updates(update.clone())
            });
            latest = Some(changed.await?);
        }
        Ok(latest)
    }

    /// The table's tags, sorted.
    async fn list_tags(&self, arn: &str) -> Result<Vec<(String, String)>, ProviderError> {
        let mut tags = Vec::new();
        find_in_pages(
            |token| {
                call_classified(&self.retry, "ListTagsOfResource", busy, move || {
                    self.client
                        .list_tags_of_resource()
                        .resource_arn(arn)
                        .set_next_token(token.clone())
                        .send()
                })
            },
            |page| page.next_token(),
            |page| {
                let page_tags = page.tags().iter();
                tags.extend(page_tags.map(|t| (t.key().to_string(), t.value().to_string())));
                None::<()>
            },
        )
        .await?;
        tags.sort();
        Ok(tags)
    }

    /// Billing mode and throughput (one `UpdateTable`), deletion protection and the stream
    /// from `previous` to `props`: the table after the last change, `None` when nothing
    /// changed.
    async fn sync_settings(
        &self,
        name: &str,
        table: &TableDescription,
        previous: &Properties,
        props: &Properties,
    ) -> Result<Option<TableDescription>, ProviderError> {
        let mut latest = None;
        let mode = billing_mode(props);
        let mode_changed = mode != billing_mode(previous);
        let throughput_changed =
            previous.get("ProvisionedThroughput") != props.get("ProvisionedThroughput");
        if mode_changed || (throughput_changed && mode == "PROVISIONED") {
            let provisioned = throughput(props.get("ProvisionedThroughput"))?;
            let definitions = attribute_definitions(props)?;
            let changed = self.update_table(name, |b| {
                b.billing_mode(BillingMode::from(mode.as_str()))
                    .set_provisioned_throughput(provisioned.clone())
                    .set_attribute_definitions(Some(definitions.clone()))
            });
            latest = Some(changed.await?);
        }

        let protection = boolean(props.get("DeletionProtectionEnabled"));
        if protection != boolean(previous.get("DeletionProtectionEnabled")) {
            let changed = self.update_table(name, |b| b.deletion_protection_enabled(protection));
            latest = Some(changed.await?);
        }

        let (old_view, new_view) = (stream_view(previous), stream_view(props));
        if old_view != new_view {
            let on = table
                .stream_specification()
                .is_some_and(StreamSpecification::stream_enabled);
            if on {
                let off = stream_spec(None)?;
                let changed = self.update_table(name, |b| b.stream_specification(off.clone()));
                latest = Some(changed.await?);
            }
            if let Some(view) = &new_view {
                let spec = stream_spec(Some(view))?;
                let changed = self.update_table(name, |b| b.stream_specification(spec.clone()));
                latest = Some(changed.await?);
            }
        }
        Ok(latest)
    }
}

impl SdkResource for DynamoDbTableProvider {
    type Found = TableDescription;
    const TYPE: &'static str = TYPE;
    const NAME_PROPERTY: &'static str = "TableName";
    const NOUN: &'static str = "table";

    async fn create(&self, request: &ResourceRequest) -> Result<Created, ProviderError> {
        let props = &request.properties;
        let (name, generated) = given_or_generated(request, "TableName", NAME_RULES);
        // A name the template gives is looked up once, before the call (outside its
        // retries): taken, it is someone else's and refused; free, a create that then
        // finds it taken met its own earlier attempt, whose answer was lost.
        crate::sdk::common::refuse_taken::<Self, _>(&name, generated, self.find(&name)).await?;
        let in_context = |e: ProviderError| e.context(context(request, TYPE));
        let made = match self.create_table(&name, props).await {
            Ok(answer) => Some(answer),
            // The table an earlier attempt of this call made.
            Err(ProviderError::AlreadyExists(_)) => None,
            Err(e) => return Err(in_context(e)),
        };
        // CreateTable answers the table's description: waited for only while not ACTIVE.
        let table = match made.clone().flatten().filter(is_active) {
            Some(table) => table,
            None => self.wait_active(&name).await.map_err(in_context)?,
        };
        // TTL does not change the table's attributes. A table this call made has it off;
        // one an earlier attempt made is brought to the template's.
        match (made, ttl_attribute(props)) {
            (Some(_), Some(attribute)) => self.set_ttl(&name, &attribute, true).await,
            (Some(_), None) => Ok(()),
            (None, wanted) => self.sync_ttl(&name, wanted).await,
        }
        .map_err(in_context)?;
        Ok(Created {
            sensitive: false,
            attributes: attributes(&table),
            physical_id: name,
        })
    }

    async fn update(&self, request: &ResourceRequest) -> Result<Updated, ProviderError> {
        let name = request.require_physical_id()?;
        let props = &request.properties;
        let previous = request.previous_properties.clone().unwrap_or_default();
        let not_updatable = |what: &str| {
            ProviderError::NotUpdatable(format!(
                "{}: {what} cannot change in place",
                context(request, TYPE)
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
        let settings = self.sync_settings(name, &table, &previous, props).await?;
        let indexes = self.sync_global_indexes(name, &previous, props).await?;
        if ttl_attribute(props) != ttl_attribute(&previous) {
            self.sync_ttl(name, ttl_attribute(props)).await?;
        }
        if let Some(arn) = table.table_arn() {
            self.sync_tags(arn, &tag_map(&previous), &tag_map(props))
                .await?;
        }
        // TTL and tags leave the attributes as they were after the last UpdateTable.
        let table = indexes.or(settings).unwrap_or(table);
        Ok(Updated {
            sensitive: false,
            physical_id: name.to_string(),
            attributes: attributes(&table),
            replaced: false,
        })
    }

    /// A table still being created or updated answers ResourceInUseException: retried.
    async fn remove(&self, name: &str) -> Result<(), ProviderError> {
        call_classified(&self.retry, "DeleteTable", busy, || {
            self.client.delete_table().table_name(name).send()
        })
        .await
        .map(drop)
    }

    /// `DescribeTable`, or `None` when the table does not exist.
    async fn find(&self, name: &str) -> Result<Option<TableDescription>, ProviderError> {
        let got = call_classified(&self.retry, "DescribeTable", busy, || {
            self.client.describe_table().table_name(name).send()
        })
        .await;
        Ok(missing_as_none(got)?.and_then(|out| out.table().cloned()))
    }

    fn attributes(&self, _name: &str, table: &TableDescription) -> Attributes {
        attributes(table)
    }

    async fn state(
        &self,
        name: &str,
        table: TableDescription,
    ) -> Result<CurrentState, ProviderError> {
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
        if on_demand(&table) {
            state.insert("BillingMode".into(), json!("PAY_PER_REQUEST"));
        } else if let Some(t) = table.provisioned_throughput() {
            state.insert("ProvisionedThroughput".into(), throughput_value(t));
        }
        insert_indexes(&mut state, &table);
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
            insert_tags(&mut state, self.list_tags(arn).await?);
        }
        Ok(CurrentState::Found(state))
    }
}

// A table busy with another change answers ResourceInUseException: retried.
tagging! {
    DynamoDbTableProvider, busy,
    "UntagResource" => |client, arn, keys| {
        client.untag_resource().resource_arn(arn).set_tag_keys(Some(keys))
    },
    "TagResource" => |client, arn, tags| {
        client.tag_resource().resource_arn(arn).set_tags(Some(ddb_tags(tags)?))
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::physical_name;
    use crate::sdk::common::testing::props;

    #[test]
    fn tags_and_names() {
        let p = props(json!({"Tags": [{"Key": "a", "Value": 1}]}));
        assert_eq!(tag_map(&p).get("a").map(String::as_str), Some("1"));
        let name = physical_name(&"s".repeat(300), "Table", "t", "", NAME_RULES);
        assert!(name.len() <= 255, "{name}");
    }
}
