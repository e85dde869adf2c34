//! `AWS::SNS::Topic` through the SNS API.
//!
//! The physical id (what `Ref` returns) is the topic ARN; the attributes are `TopicArn` and
//! `TopicName`. Without a `TopicName` the name is generated
//! ([`crate::names::physical_name`], at most 256 characters, `.fifo` appended for a FIFO
//! topic). `CreateTopic` is idempotent by name when the attributes and tags are the same,
//! so a retried create (same token, same name, same request) answers the topic it made.
//!
//! `TopicName` and `FifoTopic` cannot change in place ([`ProviderError::NotUpdatable`]);
//! the other attributes are set with `SetTopicAttributes`, and a property the template drops
//! is set back to AWS's default (see [`DEFAULTS`]).
//!
//! `read_current_state` reports `TopicName`, the attributes whose value differs from AWS's
//! default (booleans as JSON booleans), and `Tags` (a `Key`/`Value` list sorted by key)
//! when there are any.

use std::collections::HashMap;

use aws_sdk_sns::Client;
use aws_sdk_sns::types::Tag;
use serde_json::{Value, json};

use crate::error::ProviderError;
use crate::names::{NameRules, physical_name};
use crate::provider::{
    Attributes, BoxFuture, Created, CurrentState, Deleted, Imported, Properties, Provider,
    ResourceRequest, Updated,
};
use crate::retry::{RetryPolicy, retry};

/// The resource type this provider handles.
pub const TYPE: &str = "AWS::SNS::Topic";

/// Topic attributes this provider sets, as (property = attribute name, is a boolean).
const ATTRIBUTES: &[(&str, bool)] = &[
    ("DisplayName", false),
    ("FifoTopic", true),
    ("ContentBasedDeduplication", true),
    ("KmsMasterKeyId", false),
    ("SignatureVersion", false),
    ("TracingConfig", false),
];

/// AWS's values for attributes a template does not set: `read_current_state` leaves these
/// out, and an update that drops a property sets it back to this value.
pub const DEFAULTS: &[(&str, &str)] = &[
    ("DisplayName", ""),
    ("FifoTopic", "false"),
    ("ContentBasedDeduplication", "false"),
    ("KmsMasterKeyId", ""),
    ("SignatureVersion", "1"),
    ("TracingConfig", "PassThrough"),
];

const HANDLED: &[&str] = &[
    "TopicName",
    "DisplayName",
    "FifoTopic",
    "ContentBasedDeduplication",
    "KmsMasterKeyId",
    "SignatureVersion",
    "TracingConfig",
    "Tags",
];

/// Topic names: letters, digits, `-` and `_`, at most 256 characters (`.fifo` included).
const NAME_RULES: NameRules = NameRules {
    max_len: 256,
    extra: "-_",
    lowercase: false,
};

/// The `AWS::SNS::Topic` provider.
#[derive(Debug, Clone)]
pub struct SnsTopicProvider {
    client: Client,
    retry: RetryPolicy,
}

/// The SNS attribute value of a template value.
fn attribute_value(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The template value of an SNS attribute value.
fn template_value(boolean: bool, value: &str) -> Value {
    if boolean {
        value
            .parse::<bool>()
            .map(Value::from)
            .unwrap_or_else(|_| json!(value))
    } else {
        json!(value)
    }
}

fn default_of(name: &str) -> Option<&'static str> {
    DEFAULTS.iter().find(|(n, _)| *n == name).map(|(_, d)| *d)
}

/// The attributes for `CreateTopic` (only those that differ from the defaults).
fn topic_attributes(props: &Properties) -> HashMap<String, String> {
    ATTRIBUTES
        .iter()
        .filter_map(|(name, _)| {
            let value = attribute_value(props.get(*name)?);
            (default_of(name) != Some(value.as_str())).then(|| ((*name).to_string(), value))
        })
        .collect()
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
                    Some((key, attribute_value(t.get("Value")?)))
                })
                .collect()
        })
        .unwrap_or_default()
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
                .map_err(|e| ProviderError::InvalidRequest(format!("tag {k}: {e}")))
        })
        .collect()
}

fn is_fifo(props: &Properties) -> bool {
    props.get("FifoTopic").map(attribute_value).as_deref() == Some("true")
}

/// The topic name at the end of a topic ARN (`arn:aws:sns:region:account:name`).
fn name_of_arn(arn: &str) -> &str {
    arn.rsplit(':').next().unwrap_or(arn)
}

fn attributes(arn: &str) -> Attributes {
    let mut a = Attributes::new();
    a.insert("TopicArn".into(), json!(arn));
    a.insert("TopicName".into(), json!(name_of_arn(arn)));
    a
}

impl SnsTopicProvider {
    /// A provider using `client`, with the default retry policy.
    pub fn new(client: Client) -> Self {
        SnsTopicProvider {
            client,
            retry: RetryPolicy::default(),
        }
    }

    /// Replaces the retry policy.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// `GetTopicAttributes`, or `None` when the topic does not exist.
    async fn describe(&self, arn: &str) -> Result<Option<HashMap<String, String>>, ProviderError> {
        let got = retry(&self.retry, "GetTopicAttributes", || async {
            self.client
                .get_topic_attributes()
                .topic_arn(arn)
                .send()
                .await
                .map_err(|e| ProviderError::from_sdk("GetTopicAttributes", e))
        })
        .await;
        match got {
            Ok(out) => Ok(Some(out.attributes().cloned().unwrap_or_default())),
            Err(ProviderError::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The ARN of the topic named `name`, found with `ListTopics`.
    async fn arn_of(&self, name: &str) -> Result<Option<String>, ProviderError> {
        let mut next: Option<String> = None;
        loop {
            let page = retry(&self.retry, "ListTopics", || async {
                self.client
                    .list_topics()
                    .set_next_token(next.clone())
                    .send()
                    .await
                    .map_err(|e| ProviderError::from_sdk("ListTopics", e))
            })
            .await?;
            if let Some(arn) = page
                .topics()
                .iter()
                .filter_map(|t| t.topic_arn())
                .find(|arn| name_of_arn(arn) == name)
            {
                return Ok(Some(arn.to_string()));
            }
            match page.next_token() {
                Some(token) if !token.is_empty() => next = Some(token.to_string()),
                _ => return Ok(None),
            }
        }
    }

    async fn set_attribute(&self, arn: &str, name: &str, value: &str) -> Result<(), ProviderError> {
        retry(&self.retry, "SetTopicAttributes", || async {
            self.client
                .set_topic_attributes()
                .topic_arn(arn)
                .attribute_name(name)
                .attribute_value(value)
                .send()
                .await
                .map_err(|e| ProviderError::from_sdk("SetTopicAttributes", e))
        })
        .await
        .map(|_| ())
        .map_err(|e| e.context(format!("{TYPE} {arn}: attribute {name}")))
    }

    /// Makes the topic's tags those of `props`, given the `previous` ones.
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
                    .map_err(|e| ProviderError::from_sdk("UntagResource", e))
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
                    .map_err(|e| ProviderError::from_sdk("TagResource", e))
            })
            .await?;
        }
        Ok(())
    }
}

impl Provider for SnsTopicProvider {
    fn name(&self) -> &str {
        "sdk:AWS::SNS::Topic"
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
            let name = match request.string_property("TopicName") {
                Some(name) => name.to_string(),
                None => {
                    let suffix = if is_fifo(props) { ".fifo" } else { "" };
                    physical_name(
                        &request.stack_name,
                        &request.logical_id,
                        &request.token,
                        suffix,
                        NAME_RULES,
                    )
                }
            };
            if is_fifo(props) && !name.ends_with(".fifo") {
                return Err(ProviderError::InvalidRequest(format!(
                    "{} ({TYPE}): a FIFO topic's name must end in .fifo, got {name}",
                    request.logical_id
                )));
            }
            let wanted = topic_attributes(props);
            let tags = tags_of(&tag_map(props))?;
            let out = retry(&self.retry, "CreateTopic", || async {
                self.client
                    .create_topic()
                    .name(&name)
                    .set_attributes((!wanted.is_empty()).then(|| wanted.clone()))
                    .set_tags((!tags.is_empty()).then(|| tags.clone()))
                    .send()
                    .await
                    .map_err(|e| ProviderError::from_sdk("CreateTopic", e))
            })
            .await
            .map_err(|e| e.context(format!("{} ({TYPE})", request.logical_id)))?;
            let arn = out
                .topic_arn()
                .ok_or_else(|| ProviderError::Other("CreateTopic answered no TopicArn".into()))?
                .to_string();
            Ok(Created {
                attributes: attributes(&arn),
                physical_id: arn,
            })
        })
    }

    fn update<'a>(
        &'a self,
        request: &'a ResourceRequest,
    ) -> BoxFuture<'a, Result<Updated, ProviderError>> {
        Box::pin(async move {
            let arn = request.require_physical_id()?;
            let props = &request.properties;
            let previous = request.previous_properties.clone().unwrap_or_default();
            if let Some(wanted) = request.string_property("TopicName")
                && wanted != name_of_arn(arn)
            {
                return Err(ProviderError::NotUpdatable(format!(
                    "{} ({TYPE}): TopicName {} -> {wanted} needs a new topic",
                    request.logical_id,
                    name_of_arn(arn)
                )));
            }
            if is_fifo(props) != is_fifo(&previous) {
                return Err(ProviderError::NotUpdatable(format!(
                    "{} ({TYPE}): FifoTopic cannot change in place",
                    request.logical_id
                )));
            }
            for (name, _) in ATTRIBUTES {
                if *name == "FifoTopic" {
                    continue;
                }
                let old = previous.get(*name).map(attribute_value);
                let new = props.get(*name).map(attribute_value);
                if old == new {
                    continue;
                }
                let value = match new {
                    Some(value) => value,
                    None => default_of(name).unwrap_or_default().to_string(),
                };
                self.set_attribute(arn, name, &value).await?;
            }
            self.sync_tags(arn, &previous, props).await?;
            Ok(Updated {
                physical_id: arn.to_string(),
                attributes: attributes(arn),
                replaced: false,
            })
        })
    }

    fn delete<'a>(
        &'a self,
        request: &'a ResourceRequest,
    ) -> BoxFuture<'a, Result<Deleted, ProviderError>> {
        Box::pin(async move {
            let arn = request.require_physical_id()?;
            let result = retry(&self.retry, "DeleteTopic", || async {
                self.client
                    .delete_topic()
                    .topic_arn(arn)
                    .send()
                    .await
                    .map_err(|e| ProviderError::from_sdk("DeleteTopic", e))
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
            // An explicit id may be the ARN or the name.
            let arn = match (&request.physical_id, request.string_property("TopicName")) {
                (Some(id), _) if id.starts_with("arn:") => Some(id.clone()),
                (Some(name), _) => self.arn_of(name).await?,
                (None, Some(name)) => self.arn_of(name).await?,
                (None, None) => None,
            };
            let Some(arn) = arn else {
                return Ok(Imported::NotDeployedYet);
            };
            Ok(match self.describe(&arn).await? {
                Some(_) => Imported::Found {
                    attributes: attributes(&arn),
                    physical_id: arn,
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
            let arn = request.require_physical_id()?;
            let Some(described) = self.describe(arn).await? else {
                return Ok(CurrentState::NotFound);
            };
            let mut state = Properties::new();
            state.insert("TopicName".into(), json!(name_of_arn(arn)));
            for (name, boolean) in ATTRIBUTES {
                let Some(value) = described.get(*name) else {
                    continue;
                };
                if default_of(name) == Some(value.as_str()) {
                    continue;
                }
                state.insert((*name).to_string(), template_value(*boolean, value));
            }
            let tags = retry(&self.retry, "ListTagsForResource", || async {
                self.client
                    .list_tags_for_resource()
                    .resource_arn(arn)
                    .send()
                    .await
                    .map_err(|e| ProviderError::from_sdk("ListTagsForResource", e))
            })
            .await?;
            let mut tags: Vec<(String, String)> = tags
                .tags()
                .iter()
                .map(|t| (t.key().to_string(), t.value().to_string()))
                .collect();
            tags.sort();
            if !tags.is_empty() {
                let list = tags
                    .into_iter()
                    .map(|(k, v)| json!({"Key": k, "Value": v}))
                    .collect();
                state.insert("Tags".into(), Value::Array(list));
            }
            Ok(CurrentState::Found(state))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_attributes_and_values() {
        assert_eq!(name_of_arn("arn:aws:sns:us-east-1:123456789012:t1"), "t1");
        let props =
            json!({"FifoTopic": true, "DisplayName": "", "ContentBasedDeduplication": "true"})
                .as_object()
                .cloned()
                .unwrap_or_default();
        assert!(is_fifo(&props));
        let attrs = topic_attributes(&props);
        assert_eq!(attrs.get("FifoTopic").map(String::as_str), Some("true"));
        assert_eq!(
            attrs.get("ContentBasedDeduplication").map(String::as_str),
            Some("true")
        );
        assert!(!attrs.contains_key("DisplayName"), "defaults are not sent");
        assert_eq!(template_value(true, "true"), json!(true));
        assert_eq!(template_value(false, "x"), json!("x"));
        let name = physical_name(&"s".repeat(300), "Topic", "t", ".fifo", NAME_RULES);
        assert!(name.len() <= 256 && name.ends_with(".fifo"), "{name}");
    }
}
