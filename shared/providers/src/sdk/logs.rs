//! `AWS::Logs::LogGroup` through the CloudWatch Logs API.
//!
//! The physical id (what `Ref` returns) is the log group's name; the attribute `Arn` is the
//! ARN CloudFormation gives (`arn:...:log-group:NAME:*`). Without a `LogGroupName` the
//! name is generated ([`crate::names::physical_name`], at most 512 characters); such a
//! name is ours alone, so a create that finds it taken (a retry after a lost answer) adopts
//! the group and brings its settings to the template's. A name the template gives is never
//! taken over: `CreateLogGroup` refuses a taken one, which is
//! [`ProviderError::AlreadyExists`] saying so (`SdkResource::name_taken`).
//!
//! The `Arn` after a create or update is made of the stack's account (from the stack id the
//! engine recorded) and the client's region, not read; without a stack id naming that
//! region it is read (`DescribeLogGroups`).
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
use serde_json::json;

use super::common::{
    SdkResource, Tagging, call, context, find_in_pages, insert_tags, keep_name, missing_as_none,
    sdk_provider, string_of, tag_map, tagging, vanished,
};
use crate::error::ProviderError;
use crate::names::{NameRules, given_or_generated};
use crate::provider::{Attributes, Created, CurrentState};
use crate::provider::{Properties, ResourceRequest, Updated};

/// A log group's class when none is given.
pub(crate) const DEFAULT_CLASS: &str = "STANDARD";

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

sdk_provider! {
    /// The `AWS::Logs::LogGroup` provider.
    LogGroupProvider(Client), "AWS::Logs::LogGroup", HANDLED
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

/// `LogGroupClass` (`STANDARD` when the template gives none).
fn class_of(props: &Properties) -> String {
    string_of(props, "LogGroupClass").unwrap_or_else(|| DEFAULT_CLASS.into())
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

fn attributes(group: &LogGroup) -> Attributes {
    arn_attributes(cfn_arn(group))
}

/// The `Fn::GetAtt` values of a group whose CloudFormation ARN is `arn`.
fn arn_attributes(arn: Option<String>) -> Attributes {
    let mut a = Attributes::new();
    if let Some(arn) = arn {
        a.insert("Arn".into(), json!(arn));
    }
    a
}

/// The ARN (the tagging API's form) of group `name` in the stack's account, from the
/// stack's id (`arn:PARTITION:cloudformation:REGION:ACCOUNT:stack/...`, recorded from the
/// caller's identity) when it names `region`; `None` when the account is not known so.
fn arn_in_stack_account(stack_id: Option<&str>, region: &str, name: &str) -> Option<String> {
    let mut parts = stack_id?.splitn(6, ':');
    let (Some("arn"), Some(partition), Some("cloudformation"), Some(at), Some(account)) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return None;
    };
    let is_account = account.len() == 12 && account.bytes().all(|b| b.is_ascii_digit());
    (is_account && at == region && !region.is_empty())
        .then(|| format!("arn:{partition}:logs:{region}:{account}:log-group:{name}"))
}

impl LogGroupProvider {
    /// Describes the group that must exist now (right after a write).
    async fn described(&self, name: &str) -> Result<LogGroup, ProviderError> {
        self.find(name).await?.ok_or_else(|| vanished(TYPE, name))
    }

    /// The ARN (the tagging API's form) of group `name`, which must exist now: made of the
    /// stack's account and the client's region when both are known (no call), else read.
    async fn arn_now(
        &self,
        request: &ResourceRequest,
        name: &str,
    ) -> Result<Option<String>, ProviderError> {
        let region = self
            .client
            .config()
            .region()
            .map(|r| r.as_ref().to_string());
        let stack_id = request.stack_id.as_deref();
        if let Some(arn) = region.and_then(|r| arn_in_stack_account(stack_id, &r, name)) {
            return Ok(Some(arn));
        }
        Ok(tagging_arn(&self.described(name).await?))
    }

    async fn create_group(&self, name: &str, props: &Properties) -> Result<(), ProviderError> {
        let tags = tag_map(props);
        let class = string_of(props, "LogGroupClass").map(|c| LogGroupClass::from(c.as_str()));
        call(&self.retry, "CreateLogGroup", || {
            self.client
                .create_log_group()
                .log_group_name(name)
                .set_kms_key_id(string_of(props, "KmsKeyId"))
                .set_log_group_class(class.clone())
                .set_tags((!tags.is_empty()).then(|| tags.clone()))
                .send()
        })
        .await
        .map(|_| ())
    }

    /// Sets or removes the retention policy.
    async fn set_retention(&self, name: &str, days: Option<i32>) -> Result<(), ProviderError> {
        match days {
            Some(days) => call(&self.retry, "PutRetentionPolicy", || {
                self.client
                    .put_retention_policy()
                    .log_group_name(name)
                    .retention_in_days(days)
                    .send()
            })
            .await
            .map(|_| ()),
            None => call(&self.retry, "DeleteRetentionPolicy", || {
                self.client
                    .delete_retention_policy()
                    .log_group_name(name)
                    .send()
            })
            .await
            .map(|_| ()),
        }
    }

    /// Associates or disassociates the KMS key.
    async fn set_kms_key(&self, name: &str, key: Option<String>) -> Result<(), ProviderError> {
        match key {
            Some(key) => call(&self.retry, "AssociateKmsKey", || {
                self.client
                    .associate_kms_key()
                    .log_group_name(name)
                    .kms_key_id(&key)
                    .send()
            })
            .await
            .map(|_| ()),
            None => call(&self.retry, "DisassociateKmsKey", || {
                self.client
                    .disassociate_kms_key()
                    .log_group_name(name)
                    .send()
            })
            .await
            .map(|_| ()),
        }
    }

    async fn tags(&self, arn: &str) -> Result<HashMap<String, String>, ProviderError> {
        let out = call(&self.retry, "ListTagsForResource", || {
            self.client
                .list_tags_for_resource()
                .resource_arn(arn)
                .send()
        })
        .await?;
        Ok(out.tags().cloned().unwrap_or_default())
    }

    /// Brings an existing group to `props` (create's adoption path): retention, key, tags.
    async fn converge(&self, name: &str, props: &Properties) -> Result<(), ProviderError> {
        let group = self.described(name).await?;
        let class = class_of(props);
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

impl SdkResource for LogGroupProvider {
    type Found = LogGroup;
    const TYPE: &'static str = TYPE;
    const NAME_PROPERTY: &'static str = "LogGroupName";
    const NOUN: &'static str = "log group";

    async fn create(&self, request: &ResourceRequest) -> Result<Created, ProviderError> {
        let props = &request.properties;
        let (name, generated) = given_or_generated(request, "LogGroupName", NAME_RULES);
        // A name the template gives is looked up once, before the call (outside its
        // retries): taken, it is someone else's and refused; free, a create that then
        // finds it taken met its own earlier attempt, whose answer was lost.
        crate::sdk::common::refuse_taken::<Self, _>(&name, generated, self.find(&name)).await?;
        let in_context = |e: ProviderError| e.context(context(request, TYPE));
        match self.create_group(&name, props).await {
            Ok(()) => {
                if let Some(days) = retention_of(props)? {
                    self.set_retention(&name, Some(days))
                        .await
                        .map_err(in_context)?;
                }
            }
            Err(ProviderError::AlreadyExists(_)) => {
                self.converge(&name, props).await.map_err(in_context)?;
            }
            Err(e) => return Err(in_context(e)),
        }
        let arn = self.arn_now(request, &name).await?;
        Ok(Created {
            sensitive: false,
            attributes: arn_attributes(arn.map(|arn| format!("{arn}:*"))),
            physical_id: name,
        })
    }

    async fn update(&self, request: &ResourceRequest) -> Result<Updated, ProviderError> {
        let name = request.require_physical_id()?;
        let props = &request.properties;
        let previous = request.previous_properties.clone().unwrap_or_default();
        keep_name(request, TYPE, "LogGroupName", name, "log group")?;
        if class_of(props) != class_of(&previous) {
            return Err(ProviderError::NotUpdatable(format!(
                "{}: LogGroupClass cannot change in place",
                context(request, TYPE)
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
        let arn = self.arn_now(request, name).await?;
        let (old_tags, new_tags) = (tag_map(&previous), tag_map(props));
        if old_tags != new_tags
            && let Some(arn) = &arn
        {
            self.sync_tags(arn, &old_tags, &new_tags).await?;
        }
        Ok(Updated {
            sensitive: false,
            physical_id: name.to_string(),
            attributes: arn_attributes(arn.map(|arn| format!("{arn}:*"))),
            replaced: false,
        })
    }

    async fn remove(&self, name: &str) -> Result<(), ProviderError> {
        call(&self.retry, "DeleteLogGroup", || {
            self.client.delete_log_group().log_group_name(name).send()
        })
        .await
        .map(drop)
    }

    /// `DescribeLogGroups` by prefix, keeping the exact name; `None` when there is none.
    async fn find(&self, name: &str) -> Result<Option<LogGroup>, ProviderError> {
        let found = find_in_pages(
            |token| {
                call(&self.retry, "DescribeLogGroups", move || {
                    self.client
                        .describe_log_groups()
                        .log_group_name_prefix(name)
                        .set_next_token(token.clone())
                        .send()
                })
            },
            |page| page.next_token(),
            |page| {
                page.log_groups()
                    .iter()
                    .find(|g| g.log_group_name() == Some(name))
                    .cloned()
            },
        )
        .await;
        Ok(missing_as_none(found)?.flatten())
    }

    fn attributes(&self, _name: &str, group: &LogGroup) -> Attributes {
        attributes(group)
    }

    /// `DescribeLogGroups` and `ListTagsForResource` at once when the group's ARN is
    /// known from the stack id (it must be the ARN the group has), else one after the other.
    async fn read(&self, request: &ResourceRequest) -> Result<CurrentState, ProviderError> {
        let name = request.require_physical_id()?;
        let region = self
            .client
            .config()
            .region()
            .map(|r| r.as_ref().to_string());
        let stack_id = request.stack_id.as_deref();
        let Some(arn) = region.and_then(|r| arn_in_stack_account(stack_id, &r, name)) else {
            return match self.find(name).await? {
                Some(group) => self.state(name, group).await,
                None => Ok(CurrentState::NotFound),
            };
        };
        let (found, tags) = tokio::join!(self.find(name), self.tags(&arn));
        let Some(group) = found? else {
            return Ok(CurrentState::NotFound);
        };
        if tagging_arn(&group).as_deref() != Some(arn.as_str()) {
            return self.state(name, group).await;
        }
        let mut state = state_of(name, &group);
        insert_tags(&mut state, tags?);
        Ok(CurrentState::Found(state))
    }

    async fn state(&self, name: &str, group: LogGroup) -> Result<CurrentState, ProviderError> {
        let mut state = state_of(name, &group);
        if let Some(arn) = tagging_arn(&group) {
            insert_tags(&mut state, self.tags(&arn).await?);
        }
        Ok(CurrentState::Found(state))
    }
}

/// The state of group `name` as `DescribeLogGroups` describes it, without its tags.
fn state_of(name: &str, group: &LogGroup) -> Properties {
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
    state
}

tagging! {
    LogGroupProvider, ProviderError::from_sdk,
    "UntagResource" => |client, arn, keys| {
        client.untag_resource().resource_arn(arn).set_tag_keys(Some(keys))
    },
    "TagResource" => |client, arn, tags| {
        client.tag_resource().resource_arn(arn).set_tags(Some(tags.into_iter().collect()))
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::physical_name;
    use crate::sdk::common::testing::props;

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
        let props = props(json!({"RetentionInDays": "7"}));
        assert_eq!(retention_of(&props), Ok(Some(7)));
        let name = physical_name("Stack/x", "Group", "t", "", NAME_RULES);
        assert!(name.starts_with("Stack/x-Group-"), "{name}");
    }

    #[test]
    fn arns_come_from_the_stack_id_of_the_same_region() {
        let id = "arn:aws-cn:cloudformation:cn-north-1:123456789012:stack/app/abc";
        assert_eq!(
            arn_in_stack_account(Some(id), "cn-north-1", "/app/g").as_deref(),
            Some("arn:aws-cn:logs:cn-north-1:123456789012:log-group:/app/g")
        );
        // Another region, no stack id, or not a stack ARN: the ARN is read instead.
        assert_eq!(arn_in_stack_account(Some(id), "us-east-1", "g"), None);
        assert_eq!(arn_in_stack_account(None, "cn-north-1", "g"), None);
        let queue = "arn:aws:sqs:cn-north-1:123456789012:q";
        assert_eq!(arn_in_stack_account(Some(queue), "cn-north-1", "g"), None);
        let short = "arn:aws:cloudformation:cn-north-1:1234:stack/app/abc";
        assert_eq!(arn_in_stack_account(Some(short), "cn-north-1", "g"), None);
    }
}
