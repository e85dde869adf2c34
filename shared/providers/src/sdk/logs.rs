//! `AWS::Logs::LogGroup` through the CloudWatch Logs API.
//!
//! The physical id (what `Ref` returns) is the log group's name; the attribute `Arn` is the
//! ARN CloudFormation gives (`arn:...:log-group:NAME:*`). Without a `LogGroupName` the
//! name is generated ([`crate::names::physical_name`], at most 512 characters); such a
//! name is ours alone, so a create that finds it taken (a retry after a lost answer) adopts
//! the group and brings its settings to the template's. A taken name the template gives is
//! [`ProviderError::AlreadyExists`].
//!
//! `LogGroupName` and `LogGroupClass` cannot change in place
//! ([`ProviderError::NotUpdatable`]); `RetentionInDays`, `KmsKeyId` and `Tags` can.
//!
//! `read_current_state` reports `LogGroupName`, `RetentionInDays` and `KmsKeyId` when set,
//! `LogGroupClass` when it is not AWS's default (`STANDARD`), and `Tags` (a `Key`/`Value`
//! list sorted by key) when there are any.

use std::collections::HashMap;

use aws_sdk_cloudwatchlogs::Client;
use aws_sdk_cloudwatchlogs::types::{LogGroup, LogGroupClass};
use serde_json::{Value, json};

use crate::error::ProviderError;
use crate::names::{NameRules, given_or_generated};
use crate::provider::{
    Attributes, BoxFuture, Created, CurrentState, Deleted, Imported, Properties, Provider,
    ResourceRequest, Updated,
};
use crate::retry::{RetryPolicy, retry};

/// The resource type this provider handles.
pub const TYPE: &str = "AWS::Logs::LogGroup";

const HANDLED: &[&str] = &[
    "LogGroupName",
    "RetentionInDays",
    "KmsKeyId",
    "LogGroupClass",
    "Tags",
];

/// Log group names: letters, digits, `_-./#`, at most 512 characters.
const NAME_RULES: NameRules = NameRules {
    max_len: 512,
    extra: "-_./#",
    lowercase: false,
};

/// The `AWS::Logs::LogGroup` provider.
#[derive(Debug, Clone)]
pub struct LogGroupProvider {
    client: Client,
    retry: RetryPolicy,
}

/// A property as a string (numbers and booleans too, as CloudFormation accepts them).
fn string_of(props: &Properties, key: &str) -> Option<String> {
    match props.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// `RetentionInDays` as a number (a string holding one is accepted).
fn retention_of(props: &Properties) -> Result<Option<i32>, ProviderError> {
    match string_of(props, "RetentionInDays") {
        None => Ok(None),
        Some(s) => s.parse::<i32>().map(Some).map_err(|_| {
            ProviderError::InvalidRequest(format!("{TYPE}: RetentionInDays {s} is not a number"))
        }),
    }
}

/// The template's `Tags` (a `Key`/`Value` list) as a map.
fn tag_map(props: &Properties) -> HashMap<String, String> {
    props
        .get("Tags")
        .and_then(Value::as_array)
        .map(|tags| {
            tags.iter()
                .filter_map(|t| {
                    let key = t.get("Key")?.as_str()?.to_string();
                    let value = match t.get("Value")? {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    Some((key, value))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The `Arn` attribute: CloudFormation's form ends in `:*`.
fn cfn_arn(group: &LogGroup) -> Option<String> {
    group.arn().map(str::to_string).or_else(|| {
        group
            .log_group_arn()
            .map(|arn| format!("{}:*", arn.trim_end_matches(":*")))
    })
}

/// The ARN that the tagging API takes: without the trailing `:*`.
fn tagging_arn(group: &LogGroup) -> Option<String> {
    group
        .log_group_arn()
        .map(str::to_string)
        .or_else(|| group.arn().map(|a| a.trim_end_matches(":*").to_string()))
}

impl LogGroupProvider {
    /// A provider using `client`, with the default retry policy.
    pub fn new(client: Client) -> Self {
        LogGroupProvider {
            client,
            retry: RetryPolicy::default(),
        }
    }

    /// Replaces the retry policy.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// `DescribeLogGroups` by prefix, keeping the exact name; `None` when there is none.
    async fn describe(&self, name: &str) -> Result<Option<LogGroup>, ProviderError> {
        let mut next: Option<String> = None;
        loop {
            let page = retry(&self.retry, "DescribeLogGroups", || async {
                self.client
                    .describe_log_groups()
                    .log_group_name_prefix(name)
                    .set_next_token(next.clone())
                    .send()
                    .await
                    .map_err(|e| ProviderError::from_sdk("DescribeLogGroups", e))
            })
            .await;
            let page = match page {
                Ok(page) => page,
                Err(ProviderError::NotFound(_)) => return Ok(None),
                Err(e) => return Err(e),
            };
            if let Some(group) = page
                .log_groups()
                .iter()
                .find(|g| g.log_group_name() == Some(name))
            {
                return Ok(Some(group.clone()));
            }
            match page.next_token() {
                Some(token) if !token.is_empty() => next = Some(token.to_string()),
                _ => return Ok(None),
            }
        }
    }

    /// Describes the group that must exist now (right after a write).
    async fn described(&self, name: &str) -> Result<LogGroup, ProviderError> {
        self.describe(name).await?.ok_or_else(|| {
            ProviderError::NotFound(format!("{TYPE} {name} vanished right after it was written"))
        })
    }

    async fn create_group(&self, name: &str, props: &Properties) -> Result<(), ProviderError> {
        let tags = tag_map(props);
        let class = string_of(props, "LogGroupClass").map(|c| LogGroupClass::from(c.as_str()));
        retry(&self.retry, "CreateLogGroup", || async {
            self.client
                .create_log_group()
                .log_group_name(name)
                .set_kms_key_id(string_of(props, "KmsKeyId"))
                .set_log_group_class(class.clone())
                .set_tags((!tags.is_empty()).then(|| tags.clone()))
                .send()
                .await
                .map_err(|e| ProviderError::from_sdk("CreateLogGroup", e))
        })
        .await
        .map(|_| ())
    }

    /// Sets or removes the retention policy.
    async fn set_retention(&self, name: &str, days: Option<i32>) -> Result<(), ProviderError> {
        match days {
            Some(days) => retry(&self.retry, "PutRetentionPolicy", || async {
                self.client
                    .put_retention_policy()
                    .log_group_name(name)
                    .retention_in_days(days)
                    .send()
                    .await
                    .map_err(|e| ProviderError::from_sdk("PutRetentionPolicy", e))
            })
            .await
            .map(|_| ()),
            None => retry(&self.retry, "DeleteRetentionPolicy", || async {
                self.client
                    .delete_retention_policy()
                    .log_group_name(name)
                    .send()
                    .await
                    .map_err(|e| ProviderError::from_sdk("DeleteRetentionPolicy", e))
            })
            .await
            .map(|_| ()),
        }
    }

    /// Associates or disassociates the KMS key.
    async fn set_kms_key(&self, name: &str, key: Option<String>) -> Result<(), ProviderError> {
        match key {
            Some(key) => retry(&self.retry, "AssociateKmsKey", || async {
                self.client
                    .associate_kms_key()
                    .log_group_name(name)
                    .kms_key_id(&key)
                    .send()
                    .await
                    .map_err(|e| ProviderError::from_sdk("AssociateKmsKey", e))
            })
            .await
            .map(|_| ()),
            None => retry(&self.retry, "DisassociateKmsKey", || async {
                self.client
                    .disassociate_kms_key()
                    .log_group_name(name)
                    .send()
                    .await
                    .map_err(|e| ProviderError::from_sdk("DisassociateKmsKey", e))
            })
            .await
            .map(|_| ()),
        }
    }

    /// Makes the group's tags `wanted`, given the `current` ones.
    async fn sync_tags(
        &self,
        arn: &str,
        current: &HashMap<String, String>,
        wanted: &HashMap<String, String>,
    ) -> Result<(), ProviderError> {
        let removed: Vec<String> = current
            .keys()
            .filter(|k| !wanted.contains_key(*k))
            .cloned()
            .collect();
        let changed: HashMap<String, String> = wanted
            .iter()
            .filter(|(k, v)| current.get(*k) != Some(*v))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !removed.is_empty() {
            retry(&self.retry, "UntagResource", || async {
                self.client
                    .untag_resource()
                    .resource_arn(arn)
                    .set_tag_keys(Some(removed.clone()))
                    .send()
                    .await
                    .map_err(|e| ProviderError::from_sdk("UntagResource", e))
            })
            .await?;
        }
        if !changed.is_empty() {
            retry(&self.retry, "TagResource", || async {
                self.client
                    .tag_resource()
                    .resource_arn(arn)
                    .set_tags(Some(changed.clone()))
                    .send()
                    .await
                    .map_err(|e| ProviderError::from_sdk("TagResource", e))
            })
            .await?;
        }
        Ok(())
    }

    async fn tags(&self, arn: &str) -> Result<HashMap<String, String>, ProviderError> {
        let out = retry(&self.retry, "ListTagsForResource", || async {
            self.client
                .list_tags_for_resource()
                .resource_arn(arn)
                .send()
                .await
                .map_err(|e| ProviderError::from_sdk("ListTagsForResource", e))
        })
        .await?;
        Ok(out.tags().cloned().unwrap_or_default())
    }

    /// Brings an existing group to `props` (create's adoption path): retention, key, tags.
    async fn converge(&self, name: &str, props: &Properties) -> Result<(), ProviderError> {
        let group = self.described(name).await?;
        let class = string_of(props, "LogGroupClass").unwrap_or_else(|| "STANDARD".into());
        if let Some(have) = group.log_group_class()
            && have.as_str() != class
        {
            return Err(ProviderError::AlreadyExists(format!(
                "{TYPE} {name} exists with LogGroupClass {have}"
            )));
        }
        let retention = retention_of(props)?;
        if group.retention_in_days() != retention {
            self.set_retention(name, retention).await?;
        }
        let key = string_of(props, "KmsKeyId");
        if group.kms_key_id().map(str::to_string) != key {
            self.set_kms_key(name, key).await?;
        }
        if let Some(arn) = tagging_arn(&group) {
            let current = self.tags(&arn).await?;
            self.sync_tags(&arn, &current, &tag_map(props)).await?;
        }
        Ok(())
    }
}

fn attributes(group: &LogGroup) -> Attributes {
    let mut a = Attributes::new();
    if let Some(arn) = cfn_arn(group) {
        a.insert("Arn".into(), json!(arn));
    }
    a
}

impl Provider for LogGroupProvider {
    fn name(&self) -> &str {
        "sdk:AWS::Logs::LogGroup"
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
            let (name, generated) = given_or_generated(request, "LogGroupName", NAME_RULES);
            let context = || format!("{} ({TYPE})", request.logical_id);
            match self.create_group(&name, props).await {
                Ok(()) => {
                    if let Some(days) = retention_of(props)? {
                        self.set_retention(&name, Some(days))
                            .await
                            .map_err(|e| e.context(context()))?;
                    }
                }
                Err(ProviderError::AlreadyExists(_)) if generated => {
                    self.converge(&name, props)
                        .await
                        .map_err(|e| e.context(context()))?;
                }
                Err(e) => return Err(e.context(context())),
            }
            let group = self.described(&name).await?;
            Ok(Created {
                attributes: attributes(&group),
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
            if let Some(wanted) = request.string_property("LogGroupName")
                && wanted != name
            {
                return Err(ProviderError::NotUpdatable(format!(
                    "{} ({TYPE}): LogGroupName {name} -> {wanted} needs a new log group",
                    request.logical_id
                )));
            }
            let class =
                |p: &Properties| string_of(p, "LogGroupClass").unwrap_or_else(|| "STANDARD".into());
            if class(props) != class(&previous) {
                return Err(ProviderError::NotUpdatable(format!(
                    "{} ({TYPE}): LogGroupClass cannot change in place",
                    request.logical_id
                )));
            }
            let retention = retention_of(props)?;
            if retention != retention_of(&previous)? {
                self.set_retention(name, retention).await?;
            }
            let key = string_of(props, "KmsKeyId");
            if key != string_of(&previous, "KmsKeyId") {
                self.set_kms_key(name, key).await?;
            }
            let group = self.described(name).await?;
            let (old_tags, new_tags) = (tag_map(&previous), tag_map(props));
            if old_tags != new_tags
                && let Some(arn) = tagging_arn(&group)
            {
                self.sync_tags(&arn, &old_tags, &new_tags).await?;
            }
            Ok(Updated {
                physical_id: name.to_string(),
                attributes: attributes(&group),
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
            let result = retry(&self.retry, "DeleteLogGroup", || async {
                self.client
                    .delete_log_group()
                    .log_group_name(name)
                    .send()
                    .await
                    .map_err(|e| ProviderError::from_sdk("DeleteLogGroup", e))
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
            let Some(name) = request.explicit_or_named("LogGroupName") else {
                return Ok(Imported::NotDeployedYet);
            };
            Ok(match self.describe(&name).await? {
                Some(group) => Imported::Found {
                    physical_id: name,
                    attributes: attributes(&group),
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
            let Some(group) = self.describe(name).await? else {
                return Ok(CurrentState::NotFound);
            };
            let mut state = Properties::new();
            state.insert("LogGroupName".into(), json!(name));
            if let Some(days) = group.retention_in_days() {
                state.insert("RetentionInDays".into(), json!(days));
            }
            if let Some(key) = group.kms_key_id() {
                state.insert("KmsKeyId".into(), json!(key));
            }
            if let Some(class) = group.log_group_class()
                && *class != LogGroupClass::Standard
            {
                state.insert("LogGroupClass".into(), json!(class.as_str()));
            }
            if let Some(arn) = tagging_arn(&group) {
                let mut tags: Vec<(String, String)> = self.tags(&arn).await?.into_iter().collect();
                tags.sort();
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

    #[test]
    fn arns_and_retention() {
        let group = LogGroup::builder()
            .log_group_name("g")
            .log_group_arn("arn:aws:logs:us-east-1:123456789012:log-group:g")
            .build();
        assert_eq!(
            cfn_arn(&group).as_deref(),
            Some("arn:aws:logs:us-east-1:123456789012:log-group:g:*")
        );
        assert_eq!(
            tagging_arn(&group).as_deref(),
            Some("arn:aws:logs:us-east-1:123456789012:log-group:g")
        );
        let props = json!({"RetentionInDays": "7"})
            .as_object()
            .cloned()
            .unwrap_or_default();
        assert_eq!(retention_of(&props), Ok(Some(7)));
        let name = physical_name("Stack/x", "Group", "t", "", NAME_RULES);
        assert!(name.starts_with("Stack/x-Group-"), "{name}");
    }
}
