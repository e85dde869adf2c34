//! `AWS::ECS::Cluster` through the ECS API.
//!
//! The physical id (what `Ref` returns) is the cluster name; the attribute is `Arn`.
//! Without a `ClusterName` the name is generated ([`crate::names::physical_name`]).
//! Handled: `ClusterName`, `ClusterSettings`, `Configuration` (execute command and managed
//! storage), `CapacityProviders`, `DefaultCapacityProviderStrategy` and `Tags` (anything
//! else, e.g. `ServiceConnectDefaults`, goes to Cloud Control).
//!
//! `CreateCluster` answers an active cluster of the same name as if it made it: a name
//! the template gives is looked up (`DescribeClusters`) once before the call, and a taken
//! one is refused ([`ProviderError::AlreadyExists`]); a generated name holds the hash of
//! the request's token, so a retried create meets its own cluster and adopts it.
//!
//! `ClusterName` cannot change in place ([`ProviderError::NotUpdatable`]); the settings
//! change with `UpdateClusterSettings` (dropped: `containerInsights` back to `disabled`),
//! the configuration with `UpdateCluster` (dropped: execute command logging `DEFAULT`),
//! the capacity providers and the default strategy together with
//! `PutClusterCapacityProviders`, tags with `TagResource`/`UntagResource`. A cluster whose
//! status is `INACTIVE` (deleted) counts as gone.
//!
//! `read_current_state` (one `DescribeClusters` with settings, configuration and tags) reports
//! `ClusterName`, `ClusterSettings` unless only `containerInsights` `disabled`,
//! `Configuration` (what it holds, encryption flags when true; execute command logging
//! `DEFAULT` alone, what a dropped configuration leaves, is left out),
//! `CapacityProviders` and `DefaultCapacityProviderStrategy` (`Base` and `Weight` left
//! out when 0) when there are any, and `Tags`.
//!
//! Calls: a create `DescribeClusters` (named) and `CreateCluster`; an update
//! `DescribeClusters` (the ARN) and one call per changed part; a delete `DeleteCluster`.
//!
//! Emulator (fakecloud 0.51.0): a new cluster reports no settings (AWS reports
//! `containerInsights` `disabled`; both read as no `ClusterSettings`), and a deleted
//! cluster is `MISSING` at once where AWS keeps it `INACTIVE` for a while (both are gone).

use std::collections::HashMap;

use aws_sdk_ecs::Client;
use aws_sdk_ecs::types::{
    CapacityProviderStrategyItem, Cluster, ClusterConfiguration, ClusterField, ClusterSetting,
    ClusterSettingName, ExecuteCommandConfiguration, ExecuteCommandLogConfiguration,
    ExecuteCommandLogging, ManagedStorageConfiguration, Tag,
};
use serde_json::{Value, json};

use super::common::{
    SdkResource, Tagging, call, context, insert_tags, invalid, keep_name, refuse_taken,
    sdk_provider, tag_map, tagging, value_string, vanished,
};
use crate::error::ProviderError;
use crate::names::{NameRules, given_or_generated};
use crate::provider::{Attributes, Created, CurrentState};
use crate::provider::{Properties, ResourceRequest, Updated};

const HANDLED: &[&str] = &[
    "ClusterName",
    "ClusterSettings",
    "Configuration",
    "CapacityProviders",
    "DefaultCapacityProviderStrategy",
    "Tags",
];

/// Cluster names: letters, digits, `-` and `_`, at most 255 characters.
const NAME_RULES: NameRules = NameRules {
    max_len: 255,
    extra: "-_",
    lowercase: false,
};

sdk_provider! {
    /// The `AWS::ECS::Cluster` provider.
    EcsClusterProvider(Client), "AWS::ECS::Cluster", HANDLED
}

fn attributes(arn: Option<&str>) -> Attributes {
    let mut a = Attributes::new();
    if let Some(arn) = arn {
        a.insert("Arn".into(), json!(arn));
    }
    a
}

fn ecs_tags(tags: impl IntoIterator<Item = (String, String)>) -> Vec<Tag> {
    tags.into_iter()
        .map(|(k, v)| Tag::builder().key(k).value(v).build())
        .collect()
}

/// The template's `ClusterSettings` (`Name`/`Value` objects).
fn settings_of(props: &Properties) -> Result<Vec<ClusterSetting>, ProviderError> {
    let Some(list) = props.get("ClusterSettings") else {
        return Ok(Vec::new());
    };
    let list = list
        .as_array()
        .ok_or_else(|| invalid(TYPE, "ClusterSettings must be a list"))?;
    list.iter()
        .map(|s| {
            let name = s.get("Name").and_then(Value::as_str);
            let value = s.get("Value").map(value_string);
            match (name, value) {
                (Some(name), Some(value)) => Ok(ClusterSetting::builder()
                    .name(ClusterSettingName::from(name))
                    .value(value)
                    .build()),
                _ => Err(invalid(TYPE, "a cluster setting needs a Name and a Value")),
            }
        })
        .collect()
}

/// The template's `CapacityProviders`.
fn providers_of(props: &Properties) -> Vec<String> {
    props
        .get("CapacityProviders")
        .and_then(Value::as_array)
        .map(|l| {
            l.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// An integer field of a strategy item (a number or a numeric string), 0 when not set.
fn item_int(item: &Value, key: &str) -> Result<i32, ProviderError> {
    match item.get(key) {
        None | Some(Value::Null) => Ok(0),
        Some(v) => value_string(v)
            .parse()
            .map_err(|_| invalid(TYPE, &format!("DefaultCapacityProviderStrategy {key}"))),
    }
}

/// The template's `DefaultCapacityProviderStrategy`.
fn strategy_of(props: &Properties) -> Result<Vec<CapacityProviderStrategyItem>, ProviderError> {
    let Some(list) = props.get("DefaultCapacityProviderStrategy") else {
        return Ok(Vec::new());
    };
    let list = list
        .as_array()
        .ok_or_else(|| invalid(TYPE, "DefaultCapacityProviderStrategy must be a list"))?;
    list.iter()
        .map(|item| {
            let provider = item
                .get("CapacityProvider")
                .and_then(Value::as_str)
                .ok_or_else(|| invalid(TYPE, "a strategy item needs a CapacityProvider"))?;
            CapacityProviderStrategyItem::builder()
                .capacity_provider(provider)
                .weight(item_int(item, "Weight")?)
                .base(item_int(item, "Base")?)
                .build()
                .map_err(|e| invalid(TYPE, &e.to_string()))
        })
        .collect()
}

/// A string field of a template object.
fn text_at(v: &Value, key: &str) -> Option<String> {
    v.get(key).map(value_string)
}

/// A boolean field of a template object (a JSON boolean or its string).
fn flag_at(v: &Value, key: &str) -> Option<bool> {
    match v.get(key)? {
        Value::Bool(b) => Some(*b),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// The template's `Configuration` (execute command and managed storage).
fn configuration_of(props: &Properties) -> Option<ClusterConfiguration> {
    let c = props.get("Configuration")?;
    let exec = c.get("ExecuteCommandConfiguration").map(|e| {
        let log = e.get("LogConfiguration").map(|l| {
            ExecuteCommandLogConfiguration::builder()
                .set_cloud_watch_log_group_name(text_at(l, "CloudWatchLogGroupName"))
                .set_cloud_watch_encryption_enabled(flag_at(l, "CloudWatchEncryptionEnabled"))
                .set_s3_bucket_name(text_at(l, "S3BucketName"))
                .set_s3_encryption_enabled(flag_at(l, "S3EncryptionEnabled"))
                .set_s3_key_prefix(text_at(l, "S3KeyPrefix"))
                .build()
        });
        ExecuteCommandConfiguration::builder()
            .set_kms_key_id(text_at(e, "KmsKeyId"))
            .set_logging(text_at(e, "Logging").map(|l| ExecuteCommandLogging::from(l.as_str())))
            .set_log_configuration(log)
            .build()
    });
    let storage = c.get("ManagedStorageConfiguration").map(|m| {
        ManagedStorageConfiguration::builder()
            .set_kms_key_id(text_at(m, "KmsKeyId"))
            .set_fargate_ephemeral_storage_kms_key_id(text_at(m, "FargateEphemeralStorageKmsKeyId"))
            .build()
    });
    Some(
        ClusterConfiguration::builder()
            .set_execute_command_configuration(exec)
            .set_managed_storage_configuration(storage)
            .build(),
    )
}

/// Puts `value` under `key` when it is there.
fn put(object: &mut serde_json::Map<String, Value>, key: &str, value: Option<&str>) {
    if let Some(value) = value {
        object.insert(key.into(), json!(value));
    }
}

/// A cluster's configuration in the template's shape; `None` when it holds nothing.
fn configuration_state(c: &ClusterConfiguration) -> Option<Value> {
    let mut out = serde_json::Map::new();
    if let Some(e) = c.execute_command_configuration() {
        let mut exec = serde_json::Map::new();
        put(&mut exec, "KmsKeyId", e.kms_key_id());
        put(&mut exec, "Logging", e.logging().map(|l| l.as_str()));
        if let Some(l) = e.log_configuration() {
            let mut log = serde_json::Map::new();
            put(
                &mut log,
                "CloudWatchLogGroupName",
                l.cloud_watch_log_group_name(),
            );
            if l.cloud_watch_encryption_enabled() {
                log.insert("CloudWatchEncryptionEnabled".into(), json!(true));
            }
            put(&mut log, "S3BucketName", l.s3_bucket_name());
            if l.s3_encryption_enabled() {
                log.insert("S3EncryptionEnabled".into(), json!(true));
            }
            put(&mut log, "S3KeyPrefix", l.s3_key_prefix());
            if !log.is_empty() {
                exec.insert("LogConfiguration".into(), Value::Object(log));
            }
        }
        let only_default = exec.len() == 1 && exec.get("Logging") == Some(&json!("DEFAULT"));
        if !exec.is_empty() && !only_default {
            out.insert("ExecuteCommandConfiguration".into(), Value::Object(exec));
        }
    }
    if let Some(m) = c.managed_storage_configuration() {
        let mut storage = serde_json::Map::new();
        put(&mut storage, "KmsKeyId", m.kms_key_id());
        let fargate = m.fargate_ephemeral_storage_kms_key_id();
        put(&mut storage, "FargateEphemeralStorageKmsKeyId", fargate);
        if !storage.is_empty() {
            out.insert("ManagedStorageConfiguration".into(), Value::Object(storage));
        }
    }
    (!out.is_empty()).then_some(Value::Object(out))
}

/// True when the `ClusterNotFoundException` is the answer: no such cluster.
fn is_missing(error: &ProviderError) -> bool {
    matches!(error, ProviderError::NotFound(_))
        || error.message().contains("ClusterNotFoundException")
}

impl EcsClusterProvider {
    /// `CreateCluster` from the template: the cluster.
    async fn create_cluster(
        &self,
        name: &str,
        props: &Properties,
    ) -> Result<Cluster, ProviderError> {
        let settings = settings_of(props)?;
        let providers = providers_of(props);
        let strategy = strategy_of(props)?;
        let mut tags: Vec<(String, String)> = tag_map(props).into_iter().collect();
        tags.sort();
        let tags = ecs_tags(tags);
        let configuration = configuration_of(props);
        let out = call(&self.retry, "CreateCluster", || {
            self.client
                .create_cluster()
                .cluster_name(name)
                .set_configuration(configuration.clone())
                .set_settings((!settings.is_empty()).then(|| settings.clone()))
                .set_capacity_providers((!providers.is_empty()).then(|| providers.clone()))
                .set_default_capacity_provider_strategy(
                    (!strategy.is_empty()).then(|| strategy.clone()),
                )
                .set_tags((!tags.is_empty()).then(|| tags.clone()))
                .send()
        })
        .await?;
        out.cluster()
            .cloned()
            .ok_or_else(|| ProviderError::Other("CreateCluster answered no cluster".into()))
    }

    /// Applies the changes of settings and capacity providers.
    async fn sync(
        &self,
        name: &str,
        previous: &Properties,
        props: &Properties,
    ) -> Result<(), ProviderError> {
        if previous.get("ClusterSettings") != props.get("ClusterSettings") {
            let mut settings = settings_of(props)?;
            if settings.is_empty() {
                settings.push(
                    ClusterSetting::builder()
                        .name(ClusterSettingName::ContainerInsights)
                        .value("disabled")
                        .build(),
                );
            }
            call(&self.retry, "UpdateClusterSettings", || {
                self.client
                    .update_cluster_settings()
                    .cluster(name)
                    .set_settings(Some(settings.clone()))
                    .send()
            })
            .await?;
        }
        if previous.get("Configuration") != props.get("Configuration") {
            // Dropped: execute command logging back to its default.
            let configuration = configuration_of(props).unwrap_or_else(|| {
                let exec = ExecuteCommandConfiguration::builder()
                    .logging(ExecuteCommandLogging::Default)
                    .build();
                ClusterConfiguration::builder()
                    .execute_command_configuration(exec)
                    .build()
            });
            call(&self.retry, "UpdateCluster", || {
                self.client
                    .update_cluster()
                    .cluster(name)
                    .configuration(configuration.clone())
                    .send()
            })
            .await?;
        }
        let providers_changed = ["CapacityProviders", "DefaultCapacityProviderStrategy"]
            .iter()
            .any(|k| previous.get(*k) != props.get(*k));
        if providers_changed {
            let providers = providers_of(props);
            let strategy = strategy_of(props)?;
            call(&self.retry, "PutClusterCapacityProviders", || {
                self.client
                    .put_cluster_capacity_providers()
                    .cluster(name)
                    .set_capacity_providers(Some(providers.clone()))
                    .set_default_capacity_provider_strategy(Some(strategy.clone()))
                    .send()
            })
            .await?;
        }
        Ok(())
    }
}

impl SdkResource for EcsClusterProvider {
    type Found = Cluster;
    const TYPE: &'static str = TYPE;
    const NAME_PROPERTY: &'static str = "ClusterName";
    const NOUN: &'static str = "cluster";

    async fn create(&self, request: &ResourceRequest) -> Result<Created, ProviderError> {
        let (name, generated) = given_or_generated(request, "ClusterName", NAME_RULES);
        refuse_taken::<Self, _>(&name, generated, self.find(&name)).await?;
        let cluster = self
            .create_cluster(&name, &request.properties)
            .await
            .map_err(|e| e.context(context(request, TYPE)))?;
        Ok(Created {
            sensitive: false,
            attributes: attributes(cluster.cluster_arn()),
            physical_id: name,
        })
    }

    async fn update(&self, request: &ResourceRequest) -> Result<Updated, ProviderError> {
        let name = request.require_physical_id()?;
        keep_name(request, TYPE, "ClusterName", name, "cluster")?;
        let props = &request.properties;
        let previous = request.previous_properties.clone().unwrap_or_default();
        let in_context = |e: ProviderError| e.context(context(request, TYPE));
        let cluster = self.find(name).await?.ok_or_else(|| vanished(TYPE, name))?;
        let arn = cluster.cluster_arn().unwrap_or(name).to_string();
        self.sync(name, &previous, props)
            .await
            .map_err(in_context)?;
        self.sync_tags(&arn, &tag_map(&previous), &tag_map(props))
            .await
            .map_err(in_context)?;
        Ok(Updated {
            sensitive: false,
            physical_id: name.to_string(),
            attributes: attributes(Some(&arn)),
            replaced: false,
        })
    }

    async fn remove(&self, name: &str) -> Result<(), ProviderError> {
        match call(&self.retry, "DeleteCluster", || {
            self.client.delete_cluster().cluster(name).send()
        })
        .await
        {
            Err(e) if is_missing(&e) => Err(ProviderError::NotFound(e.message().to_string())),
            other => other.map(drop),
        }
    }

    /// `DescribeClusters` with settings and tags: `None` when the cluster is unknown or
    /// `INACTIVE`.
    async fn find(&self, name: &str) -> Result<Option<Self::Found>, ProviderError> {
        let out = call(&self.retry, "DescribeClusters", || {
            self.client
                .describe_clusters()
                .clusters(name)
                .include(ClusterField::Settings)
                .include(ClusterField::Configurations)
                .include(ClusterField::Tags)
                .send()
        })
        .await?;
        Ok(out
            .clusters()
            .iter()
            .find(|c| c.status() != Some("INACTIVE"))
            .cloned())
    }

    fn attributes(&self, _name: &str, found: &Self::Found) -> Attributes {
        attributes(found.cluster_arn())
    }

    fn physical_id(id: String, found: &Self::Found) -> String {
        found.cluster_name().map(str::to_string).unwrap_or(id)
    }

    async fn state(&self, _name: &str, found: Self::Found) -> Result<CurrentState, ProviderError> {
        Ok(CurrentState::Found(state_of(&found)))
    }
}

/// The state of a described cluster, AWS's defaults left out.
fn state_of(cluster: &Cluster) -> Properties {
    let mut state = Properties::new();
    if let Some(name) = cluster.cluster_name() {
        state.insert("ClusterName".into(), json!(name));
    }
    let settings: Vec<Value> = cluster
        .settings()
        .iter()
        .filter_map(|s| Some(json!({"Name": s.name()?.as_str(), "Value": s.value()?})))
        .collect();
    let only_default = settings
        .iter()
        .all(|s| s["Name"] == json!("containerInsights") && s["Value"] == json!("disabled"));
    if !only_default {
        state.insert("ClusterSettings".into(), Value::Array(settings));
    }
    if let Some(c) = cluster.configuration().and_then(configuration_state) {
        state.insert("Configuration".into(), c);
    }
    if !cluster.capacity_providers().is_empty() {
        state.insert(
            "CapacityProviders".into(),
            json!(cluster.capacity_providers()),
        );
    }
    let strategy: Vec<Value> = cluster
        .default_capacity_provider_strategy()
        .iter()
        .map(|item| {
            let mut v = json!({"CapacityProvider": item.capacity_provider()});
            if item.weight() != 0 {
                v["Weight"] = json!(item.weight());
            }
            if item.base() != 0 {
                v["Base"] = json!(item.base());
            }
            v
        })
        .collect();
    if !strategy.is_empty() {
        state.insert(
            "DefaultCapacityProviderStrategy".into(),
            Value::Array(strategy),
        );
    }
    let tags: HashMap<String, String> = cluster
        .tags()
        .iter()
        .filter_map(|t| {
            Some((
                t.key()?.to_string(),
                t.value().unwrap_or_default().to_string(),
            ))
        })
        .collect();
    insert_tags(&mut state, tags);
    state
}

tagging! {
    EcsClusterProvider, ProviderError::from_sdk,
    "UntagResource" => |client, arn, keys| {
        client.untag_resource().resource_arn(arn).set_tag_keys(Some(keys))
    },
    "TagResource" => |client, arn, tags| {
        client.tag_resource().resource_arn(arn).set_tags(Some(ecs_tags(tags)))
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sdk::common::testing::props;

    #[test]
    fn the_template_lists_parse() {
        let p = props(json!({
            "ClusterSettings": [{"Name": "containerInsights", "Value": "enabled"}],
            "CapacityProviders": ["FARGATE"],
            "DefaultCapacityProviderStrategy": [{"CapacityProvider": "FARGATE", "Weight": "2"}]
        }));
        let settings = settings_of(&p).unwrap_or_default();
        assert_eq!(settings[0].value(), Some("enabled"));
        assert_eq!(providers_of(&p), ["FARGATE"]);
        let strategy = strategy_of(&p).unwrap_or_default();
        assert_eq!((strategy[0].weight(), strategy[0].base()), (2, 0));
        assert!(settings_of(&props(json!({"ClusterSettings": [{"Name": "x"}]}))).is_err());
    }

    #[test]
    fn configurations_round_trip() {
        let template = json!({
            "ExecuteCommandConfiguration": {
                "KmsKeyId": "k",
                "Logging": "OVERRIDE",
                "LogConfiguration": {"S3BucketName": "b", "S3EncryptionEnabled": "true"}
            },
            "ManagedStorageConfiguration": {"KmsKeyId": "m"}
        });
        let p = props(json!({"Configuration": template}));
        let c = configuration_of(&p).expect("a configuration");
        let mut expected = template.clone();
        expected["ExecuteCommandConfiguration"]["LogConfiguration"]["S3EncryptionEnabled"] =
            json!(true);
        assert_eq!(configuration_state(&c), Some(expected));
        let only_default = props(json!({"Configuration": {
            "ExecuteCommandConfiguration": {"Logging": "DEFAULT"}
        }}));
        let c = configuration_of(&only_default).expect("a configuration");
        assert_eq!(configuration_state(&c), None);
    }

    #[test]
    fn the_state_leaves_defaults_out() {
        let cluster = Cluster::builder()
            .cluster_name("c")
            .settings(
                ClusterSetting::builder()
                    .name(ClusterSettingName::ContainerInsights)
                    .value("disabled")
                    .build(),
            )
            .build();
        assert_eq!(state_of(&cluster), props(json!({"ClusterName": "c"})));
    }
}
