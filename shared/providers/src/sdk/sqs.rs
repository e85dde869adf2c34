//! `AWS::SQS::Queue` through the SQS API.
//!
//! The physical id is the queue URL; the attributes are `Arn`, `QueueName` and `QueueUrl`.
//! Without a `QueueName` the name is generated ([`crate::names::physical_name`], `.fifo`
//! appended for a FIFO queue). `CreateQueue` is idempotent by name when the attributes are
//! the same, so a retried create finds the queue it made.
//!
//! `read_current_state` reports `QueueName`, the attributes whose value differs from AWS's
//! default (see [`DEFAULTS`]) with numbers and booleans as JSON numbers and booleans and the
//! redrive policies as objects, and `Tags` (a `Key`/`Value` list sorted by key) when there
//! are any.

use std::collections::HashMap;

use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::QueueAttributeName;
use serde_json::{Value, json};

use crate::error::ProviderError;
use crate::names::{NameRules, physical_name};
use crate::provider::{
    Attributes, BoxFuture, Created, CurrentState, Deleted, Imported, Properties, Provider,
    ResourceRequest, Updated,
};
use crate::retry::{RetryPolicy, retry};

/// The resource type this provider handles.
pub const TYPE: &str = "AWS::SQS::Queue";

/// How a template property maps to a queue attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Number,
    Bool,
    Text,
    Json,
}

/// The queue attributes this provider sets, as (property = attribute name, kind).
const ATTRIBUTES: &[(&str, Kind)] = &[
    ("DelaySeconds", Kind::Number),
    ("MaximumMessageSize", Kind::Number),
    ("MessageRetentionPeriod", Kind::Number),
    ("ReceiveMessageWaitTimeSeconds", Kind::Number),
    ("VisibilityTimeout", Kind::Number),
    ("KmsDataKeyReusePeriodSeconds", Kind::Number),
    ("FifoQueue", Kind::Bool),
    ("ContentBasedDeduplication", Kind::Bool),
    ("SqsManagedSseEnabled", Kind::Bool),
    ("KmsMasterKeyId", Kind::Text),
    ("DeduplicationScope", Kind::Text),
    ("FifoThroughputLimit", Kind::Text),
    ("RedrivePolicy", Kind::Json),
    ("RedriveAllowPolicy", Kind::Json),
];

/// AWS's values for attributes a template does not set (SSE-SQS is on by default for
/// queues created since 2022, on AWS and on fakecloud): `read_current_state` leaves these
/// out, and an update that drops a property sets it back to this value.
pub const DEFAULTS: &[(&str, &str)] = &[
    ("DelaySeconds", "0"),
    ("MaximumMessageSize", "262144"),
    ("MessageRetentionPeriod", "345600"),
    ("ReceiveMessageWaitTimeSeconds", "0"),
    ("VisibilityTimeout", "30"),
    ("KmsDataKeyReusePeriodSeconds", "300"),
    ("FifoQueue", "false"),
    ("ContentBasedDeduplication", "false"),
    ("SqsManagedSseEnabled", "true"),
    ("RedrivePolicy", ""),
    ("RedriveAllowPolicy", ""),
];

const HANDLED: &[&str] = &[
    "QueueName",
    "Tags",
    "DelaySeconds",
    "MaximumMessageSize",
    "MessageRetentionPeriod",
    "ReceiveMessageWaitTimeSeconds",
    "VisibilityTimeout",
    "KmsDataKeyReusePeriodSeconds",
    "FifoQueue",
    "ContentBasedDeduplication",
    "SqsManagedSseEnabled",
    "KmsMasterKeyId",
    "DeduplicationScope",
    "FifoThroughputLimit",
    "RedrivePolicy",
    "RedriveAllowPolicy",
];

/// Queue names: letters, digits, `-` and `_`, at most 80 characters (`.fifo` included).
const NAME_RULES: NameRules = NameRules {
    max_len: 80,
    extra: "-_",
    lowercase: false,
};

/// The `AWS::SQS::Queue` provider.
#[derive(Debug, Clone)]
pub struct SqsQueueProvider {
    client: Client,
    retry: RetryPolicy,
}

/// The SQS attribute value of a template value.
fn attribute_value(kind: Kind, value: &Value) -> String {
    match (kind, value) {
        (Kind::Json, Value::Object(_) | Value::Array(_)) => value.to_string(),
        (_, Value::String(s)) => s.clone(),
        (_, other) => other.to_string(),
    }
}

/// The template value of an SQS attribute value.
fn template_value(kind: Kind, value: &str) -> Value {
    match kind {
        Kind::Number => value
            .parse::<i64>()
            .map(Value::from)
            .unwrap_or_else(|_| json!(value)),
        Kind::Bool => value
            .parse::<bool>()
            .map(Value::from)
            .unwrap_or_else(|_| json!(value)),
        Kind::Text => json!(value),
        Kind::Json => serde_json::from_str(value).unwrap_or_else(|_| json!(value)),
    }
}

fn queue_attributes(props: &Properties) -> HashMap<QueueAttributeName, String> {
    ATTRIBUTES
        .iter()
        .filter_map(|(name, kind)| {
            props
                .get(*name)
                .map(|v| (QueueAttributeName::from(*name), attribute_value(*kind, v)))
        })
        .collect()
}

fn tags_of(props: &Properties) -> HashMap<String, String> {
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

fn is_fifo(props: &Properties) -> bool {
    matches!(props.get("FifoQueue"), Some(Value::Bool(true)))
        || props.get("FifoQueue").and_then(Value::as_str) == Some("true")
}

/// The queue name at the end of a queue URL.
fn name_of_url(url: &str) -> &str {
    url.rsplit('/').next().unwrap_or(url)
}

impl SqsQueueProvider {
    /// A provider using `client`, with the default retry policy.
    pub fn new(client: Client) -> Self {
        SqsQueueProvider {
            client,
            retry: RetryPolicy::default(),
        }
    }

    /// Replaces the retry policy.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// `GetQueueAttributes` (all), or `None` when the queue does not exist.
    async fn describe(
        &self,
        url: &str,
    ) -> Result<Option<HashMap<QueueAttributeName, String>>, ProviderError> {
        let got = retry(&self.retry, "GetQueueAttributes", || async {
            self.client
                .get_queue_attributes()
                .queue_url(url)
                .attribute_names(QueueAttributeName::All)
                .send()
                .await
                .map_err(|e| ProviderError::from_sdk("GetQueueAttributes", e))
        })
        .await;
        match got {
            Ok(out) => Ok(Some(out.attributes().cloned().unwrap_or_default())),
            Err(ProviderError::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn attributes(&self, url: &str) -> Result<Attributes, ProviderError> {
        let described = self.describe(url).await?.ok_or_else(|| {
            ProviderError::NotFound(format!("{TYPE} {url} vanished right after it was written"))
        })?;
        let mut a = Attributes::new();
        if let Some(arn) = described.get(&QueueAttributeName::QueueArn) {
            a.insert("Arn".into(), json!(arn));
        }
        a.insert("QueueName".into(), json!(name_of_url(url)));
        a.insert("QueueUrl".into(), json!(url));
        Ok(a)
    }

    /// `GetQueueUrl`, or `None` when no queue has that name.
    async fn url_of(&self, name: &str) -> Result<Option<String>, ProviderError> {
        let got = retry(&self.retry, "GetQueueUrl", || async {
            self.client
                .get_queue_url()
                .queue_name(name)
                .send()
                .await
                .map_err(|e| ProviderError::from_sdk("GetQueueUrl", e))
        })
        .await;
        match got {
            Ok(out) => Ok(out.queue_url().map(str::to_string)),
            Err(ProviderError::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

impl Provider for SqsQueueProvider {
    fn name(&self) -> &str {
        "sdk:AWS::SQS::Queue"
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
            let name = match request.string_property("QueueName") {
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
            let attributes = queue_attributes(props);
            let tags = tags_of(props);
            let out = retry(&self.retry, "CreateQueue", || async {
                self.client
                    .create_queue()
                    .queue_name(&name)
                    .set_attributes((!attributes.is_empty()).then(|| attributes.clone()))
                    .set_tags((!tags.is_empty()).then(|| tags.clone()))
                    .send()
                    .await
                    .map_err(|e| ProviderError::from_sdk("CreateQueue", e))
            })
            .await
            .map_err(|e| e.context(format!("{} ({TYPE})", request.logical_id)))?;
            let url = out
                .queue_url()
                .ok_or_else(|| ProviderError::Other("CreateQueue answered no QueueUrl".into()))?
                .to_string();
            Ok(Created {
                attributes: self.attributes(&url).await?,
                physical_id: url,
            })
        })
    }

    fn update<'a>(
        &'a self,
        request: &'a ResourceRequest,
    ) -> BoxFuture<'a, Result<Updated, ProviderError>> {
        Box::pin(async move {
            let url = request.require_physical_id()?;
            let props = &request.properties;
            let previous = request.previous_properties.clone().unwrap_or_default();
            if let Some(wanted) = request.string_property("QueueName")
                && wanted != name_of_url(url)
            {
                return Err(ProviderError::NotUpdatable(format!(
                    "{} ({TYPE}): QueueName {} -> {wanted} needs a new queue",
                    request.logical_id,
                    name_of_url(url)
                )));
            }
            if is_fifo(props) != is_fifo(&previous) {
                return Err(ProviderError::NotUpdatable(format!(
                    "{} ({TYPE}): FifoQueue cannot change in place",
                    request.logical_id
                )));
            }
            let mut changes = HashMap::new();
            for (name, kind) in ATTRIBUTES {
                if *name == "FifoQueue" {
                    continue;
                }
                match (previous.get(*name), props.get(*name)) {
                    (old, Some(new)) if old != Some(new) => {
                        changes
                            .insert(QueueAttributeName::from(*name), attribute_value(*kind, new));
                    }
                    (Some(_), None) => {
                        if let Some((_, default)) = DEFAULTS.iter().find(|(n, _)| n == name) {
                            changes.insert(QueueAttributeName::from(*name), default.to_string());
                        }
                    }
                    _ => {}
                }
            }
            if !changes.is_empty() {
                retry(&self.retry, "SetQueueAttributes", || async {
                    self.client
                        .set_queue_attributes()
                        .queue_url(url)
                        .set_attributes(Some(changes.clone()))
                        .send()
                        .await
                        .map_err(|e| ProviderError::from_sdk("SetQueueAttributes", e))
                })
                .await?;
            }
            let old_tags = tags_of(&previous);
            let new_tags = tags_of(props);
            let removed: Vec<String> = old_tags
                .keys()
                .filter(|k| !new_tags.contains_key(*k))
                .cloned()
                .collect();
            let changed: HashMap<String, String> = new_tags
                .into_iter()
                .filter(|(k, v)| old_tags.get(k) != Some(v))
                .collect();
            if !removed.is_empty() {
                retry(&self.retry, "UntagQueue", || async {
                    self.client
                        .untag_queue()
                        .queue_url(url)
                        .set_tag_keys(Some(removed.clone()))
                        .send()
                        .await
                        .map_err(|e| ProviderError::from_sdk("UntagQueue", e))
                })
                .await?;
            }
            if !changed.is_empty() {
                retry(&self.retry, "TagQueue", || async {
                    self.client
                        .tag_queue()
                        .queue_url(url)
                        .set_tags(Some(changed.clone()))
                        .send()
                        .await
                        .map_err(|e| ProviderError::from_sdk("TagQueue", e))
                })
                .await?;
            }
            Ok(Updated {
                physical_id: url.to_string(),
                attributes: self.attributes(url).await?,
                replaced: false,
            })
        })
    }

    fn delete<'a>(
        &'a self,
        request: &'a ResourceRequest,
    ) -> BoxFuture<'a, Result<Deleted, ProviderError>> {
        Box::pin(async move {
            let url = request.require_physical_id()?;
            let result = retry(&self.retry, "DeleteQueue", || async {
                self.client
                    .delete_queue()
                    .queue_url(url)
                    .send()
                    .await
                    .map_err(|e| ProviderError::from_sdk("DeleteQueue", e))
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
            // An explicit id may be the URL or the name.
            let name = match (&request.physical_id, request.string_property("QueueName")) {
                (Some(id), _) => name_of_url(id).to_string(),
                (None, Some(name)) => name.to_string(),
                (None, None) => return Ok(Imported::NotDeployedYet),
            };
            match self.url_of(&name).await? {
                Some(url) => match self.attributes(&url).await {
                    Ok(attributes) => Ok(Imported::Found {
                        physical_id: url,
                        attributes,
                    }),
                    Err(ProviderError::NotFound(_)) => Ok(Imported::NotDeployedYet),
                    Err(e) => Err(e),
                },
                None => Ok(Imported::NotDeployedYet),
            }
        })
    }

    fn read_current_state<'a>(
        &'a self,
        request: &'a ResourceRequest,
    ) -> BoxFuture<'a, Result<CurrentState, ProviderError>> {
        Box::pin(async move {
            let url = request.require_physical_id()?;
            let Some(described) = self.describe(url).await? else {
                return Ok(CurrentState::NotFound);
            };
            let mut state = Properties::new();
            state.insert("QueueName".into(), json!(name_of_url(url)));
            for (name, kind) in ATTRIBUTES {
                let Some(value) = described.get(&QueueAttributeName::from(*name)) else {
                    continue;
                };
                if DEFAULTS.iter().any(|(n, d)| n == name && d == value) {
                    continue;
                }
                state.insert((*name).to_string(), template_value(*kind, value));
            }
            let tags = retry(&self.retry, "ListQueueTags", || async {
                self.client
                    .list_queue_tags()
                    .queue_url(url)
                    .send()
                    .await
                    .map_err(|e| ProviderError::from_sdk("ListQueueTags", e))
            })
            .await?;
            let mut tags: Vec<(String, String)> = tags
                .tags()
                .map(|t| t.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                .unwrap_or_default();
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
    fn values_convert_both_ways() {
        assert_eq!(attribute_value(Kind::Number, &json!(30)), "30");
        assert_eq!(attribute_value(Kind::Number, &json!("30")), "30");
        assert_eq!(attribute_value(Kind::Bool, &json!(true)), "true");
        let redrive = json!({"deadLetterTargetArn": "arn:x", "maxReceiveCount": 3});
        assert_eq!(
            template_value(Kind::Json, &attribute_value(Kind::Json, &redrive)),
            redrive
        );
        assert_eq!(template_value(Kind::Number, "45"), json!(45));
        assert_eq!(template_value(Kind::Bool, "true"), json!(true));
        assert_eq!(name_of_url("http://127.0.0.1:1/123456789012/q1"), "q1");
    }
}
