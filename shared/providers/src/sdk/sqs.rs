//! `AWS::SQS::Queue` through the SQS API.
//!
//! The physical id is the queue URL; the attributes are `Arn`, `QueueName` and `QueueUrl`.
//! Without a `QueueName` the name is generated ([`crate::names::physical_name`], `.fifo`
//! appended for a FIFO queue). `CreateQueue` is idempotent by name when the attributes are
//! the same, so a retried create finds the queue it made.
//!
//! That idempotency would also hand a create someone else's queue: a name the template
//! gives is looked up (`GetQueueUrl`) once before `CreateQueue`, and a taken one is
//! [`ProviderError::AlreadyExists`] (`SdkResource::name_taken`; see `refuse_taken`), as is
//! a `CreateQueue` that answers `QueueAlreadyExists` (other attributes). A queue with the
//! same attributes made by someone else between that check and the call is answered as if
//! `CreateQueue` had made it: the create tags the queue with its mark
//! ([`crate::sdk::marks`]) and reads the tags back, and a queue without it is refused the
//! same way, untouched (an existing queue keeps its tags).
//!
//! The `Arn` after a create or update is made of the queue URL (`.../ACCOUNT/NAME`) and the
//! client's region, not read: neither changes while the queue exists.
//!
//! `read_current_state` reports `QueueName`, the attributes whose value differs from AWS's
//! default (see [`DEFAULTS`]) with numbers and booleans as JSON numbers and booleans and the
//! redrive policies as objects, and `Tags` (a `Key`/`Value` list sorted by key) when there
//! are any.

use std::collections::HashMap;

use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::QueueAttributeName;
use serde_json::{Value, json};
use stackflow_core::partition::partition;

use super::common::marks::{carries_own_mark, check_made, own_mark};
use super::common::{
    SdkResource, Tagging, call, context, insert_tags, keep_name, missing_as_none, refuse_taken,
    sdk_provider, tag_map, tagging, value_string, vanished,
};
use crate::error::ProviderError;
use crate::names::{NameRules, given_or_suffixed};
use crate::provider::{Attributes, Created, CurrentState};
use crate::provider::{Properties, ResourceRequest, Updated};

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

sdk_provider! {
    /// The `AWS::SQS::Queue` provider.
    SqsQueueProvider(Client), "AWS::SQS::Queue", HANDLED
}

/// The SQS attribute value of a template value.
fn attribute_value(kind: Kind, value: &Value) -> String {
    match (kind, value) {
        (Kind::Json, Value::Object(_) | Value::Array(_)) => value.to_string(),
        _ => value_string(value),
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

fn is_fifo(props: &Properties) -> bool {
    matches!(props.get("FifoQueue"), Some(Value::Bool(true)))
        || props.get("FifoQueue").and_then(Value::as_str) == Some("true")
}

/// The `Fn::GetAtt` values of the queue at `url`, whose ARN is `arn`.
fn attributes(url: &str, arn: Option<&str>) -> Attributes {
    let mut a = Attributes::new();
    if let Some(arn) = arn {
        a.insert("Arn".into(), json!(arn));
    }
    a.insert("QueueName".into(), json!(name_of_url(url)));
    a.insert("QueueUrl".into(), json!(url));
    a
}

/// The queue name at the end of a queue URL.
fn name_of_url(url: &str) -> &str {
    url.rsplit('/').next().unwrap_or(url)
}

/// The ARN of the queue at `url` (`.../ACCOUNT/NAME`, as `CreateQueue` answers) in
/// `region`; `None` when the URL does not end in an account id and a name.
fn arn_of_url(url: &str, region: &str) -> Option<String> {
    let mut segments = url.trim_end_matches('/').rsplit('/');
    let name = segments.next().filter(|n| !n.is_empty())?;
    let account = segments.next()?;
    let is_account = account.len() == 12 && account.bytes().all(|b| b.is_ascii_digit());
    (is_account && !region.is_empty())
        .then(|| format!("arn:{}:sqs:{region}:{account}:{name}", partition(region)))
}

impl SqsQueueProvider {
    /// The attributes of the queue `url`, which must exist now (right after a write): made
    /// of its URL and the client's region, read (`GetQueueAttributes`) only when the URL
    /// does not have the usual shape.
    async fn attributes_now(&self, url: &str) -> Result<Attributes, ProviderError> {
        let region = self
            .client
            .config()
            .region()
            .map(|r| r.as_ref().to_string());
        if let Some(arn) = region.and_then(|r| arn_of_url(url, &r)) {
            return Ok(attributes(url, Some(&arn)));
        }
        let described = self.find(url).await?.ok_or_else(|| vanished(TYPE, url))?;
        Ok(self.attributes(url, &described))
    }

    /// `GetQueueUrl`, or `None` when no queue has that name.
    async fn url_of(&self, name: &str) -> Result<Option<String>, ProviderError> {
        let got = call(&self.retry, "GetQueueUrl", || {
            self.client.get_queue_url().queue_name(name).send()
        })
        .await;
        Ok(missing_as_none(got)?.and_then(|out| out.queue_url().map(str::to_string)))
    }

    /// The queue's tags.
    async fn tags(&self, url: &str) -> Result<HashMap<String, String>, ProviderError> {
        let tags = call(&self.retry, "ListQueueTags", || {
            self.client.list_queue_tags().queue_url(url).send()
        })
        .await?;
        Ok(tags.tags().cloned().unwrap_or_default())
    }

    /// Brings the queue's attributes from `previous` to `props`.
    async fn sync_attributes(
        &self,
        url: &str,
        previous: &Properties,
        props: &Properties,
    ) -> Result<(), ProviderError> {
        let mut changes = HashMap::new();
        for (name, kind) in ATTRIBUTES {
            if *name == "FifoQueue" {
                continue;
            }
            match (previous.get(*name), props.get(*name)) {
                (old, Some(new)) if old != Some(new) => {
                    changes.insert(QueueAttributeName::from(*name), attribute_value(*kind, new));
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
            call(&self.retry, "SetQueueAttributes", || {
                self.client
                    .set_queue_attributes()
                    .queue_url(url)
                    .set_attributes(Some(changes.clone()))
                    .send()
            })
            .await?;
        }
        Ok(())
    }
}

impl SdkResource for SqsQueueProvider {
    type Found = HashMap<QueueAttributeName, String>;
    const TYPE: &'static str = TYPE;
    const NAME_PROPERTY: &'static str = "QueueName";
    const NOUN: &'static str = "queue";

    async fn create(&self, request: &ResourceRequest) -> Result<Created, ProviderError> {
        let props = &request.properties;
        let suffix = if is_fifo(props) { ".fifo" } else { "" };
        let (name, generated) = given_or_suffixed(request, "QueueName", suffix, NAME_RULES);
        refuse_taken::<Self, _>(&name, generated, self.url_of(&name)).await?;
        let attributes = queue_attributes(props);
        let mut tags = tag_map(props);
        tags.extend(own_mark(request));
        let out = call(&self.retry, "CreateQueue", || {
            self.client
                .create_queue()
                .queue_name(&name)
                .set_attributes((!attributes.is_empty()).then(|| attributes.clone()))
                .set_tags((!tags.is_empty()).then(|| tags.clone()))
                .send()
        })
        .await
        .map_err(|e| match e {
            ProviderError::AlreadyExists(_) if !generated => Self::name_taken(&name),
            e => e.context(context(request, TYPE)),
        })?;
        let url = out
            .queue_url()
            .ok_or_else(|| ProviderError::Other("CreateQueue answered no QueueUrl".into()))?
            .to_string();
        // `CreateQueue` answers a queue made between the check and the call (with the same
        // attributes) as if it had made it: only this create's mark shows that it did.
        if !generated {
            check_made(request, &url, || async {
                Ok(self.tags(&url).await?.into_iter().collect())
            })
            .await?;
        }
        Ok(Created {
            sensitive: false,
            attributes: self.attributes_now(&url).await?,
            physical_id: url,
        })
    }

    async fn update(&self, request: &ResourceRequest) -> Result<Updated, ProviderError> {
        let url = request.require_physical_id()?;
        let props = &request.properties;
        let previous = request.previous_properties.clone().unwrap_or_default();
        keep_name(request, TYPE, "QueueName", name_of_url(url), "queue")?;
        if is_fifo(props) != is_fifo(&previous) {
            return Err(ProviderError::NotUpdatable(format!(
                "{}: FifoQueue cannot change in place",
                context(request, TYPE)
            )));
        }
        self.sync_attributes(url, &previous, props).await?;
        self.sync_tags(url, &tag_map(&previous), &tag_map(props))
            .await?;
        Ok(Updated {
            sensitive: false,
            physical_id: url.to_string(),
            attributes: self.attributes_now(url).await?,
            replaced: false,
        })
    }

    async fn remove(&self, url: &str) -> Result<(), ProviderError> {
        call(&self.retry, "DeleteQueue", || {
            self.client.delete_queue().queue_url(url).send()
        })
        .await
        .map(drop)
    }

    async fn made_by(&self, request: &ResourceRequest) -> Result<bool, ProviderError> {
        let url = request.require_physical_id()?;
        let tags: Vec<_> = self.tags(url).await?.into_iter().collect();
        Ok(carries_own_mark(&tags, request))
    }

    /// An explicit id may be the URL or the name; the URL is looked up by name.
    async fn import_id(&self, request: &ResourceRequest) -> Result<Option<String>, ProviderError> {
        let name = match (&request.physical_id, request.string_property("QueueName")) {
            (Some(id), _) => name_of_url(id).to_string(),
            (None, Some(name)) => name.to_string(),
            (None, None) => return Ok(None),
        };
        self.url_of(&name).await
    }

    /// `GetQueueAttributes` (all), or `None` when the queue does not exist.
    async fn find(&self, url: &str) -> Result<Option<Self::Found>, ProviderError> {
        let got = call(&self.retry, "GetQueueAttributes", || {
            self.client
                .get_queue_attributes()
                .queue_url(url)
                .attribute_names(QueueAttributeName::All)
                .send()
        })
        .await;
        Ok(missing_as_none(got)?.map(|out| out.attributes().cloned().unwrap_or_default()))
    }

    fn attributes(&self, url: &str, described: &Self::Found) -> Attributes {
        let arn = described.get(&QueueAttributeName::QueueArn);
        attributes(url, arn.map(String::as_str))
    }

    /// `GetQueueAttributes` and `ListQueueTags` at once: both need only the URL.
    async fn read(&self, request: &ResourceRequest) -> Result<CurrentState, ProviderError> {
        let url = request.require_physical_id()?;
        let (found, tags) = tokio::join!(self.find(url), self.tags(url));
        match found? {
            Some(described) => Ok(state_of(url, described, tags?)),
            None => Ok(CurrentState::NotFound),
        }
    }

    async fn state(
        &self,
        url: &str,
        described: Self::Found,
    ) -> Result<CurrentState, ProviderError> {
        Ok(state_of(url, described, self.tags(url).await?))
    }
}

/// The state of queue `url` from its attributes and its tags.
fn state_of(
    url: &str,
    described: HashMap<QueueAttributeName, String>,
    tags: HashMap<String, String>,
) -> CurrentState {
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
    insert_tags(&mut state, tags);
    CurrentState::Found(state)
}

tagging! {
    SqsQueueProvider, ProviderError::from_sdk,
    "UntagQueue" => |client, url, keys| client.untag_queue().queue_url(url).set_tag_keys(Some(keys)),
    "TagQueue" => |client, url, tags| {
        client.tag_queue().queue_url(url).set_tags(Some(tags.into_iter().collect()))
    },
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

    #[test]
    fn arns_are_made_of_the_url_and_the_region() {
        let url = "https://sqs.eu-west-1.amazonaws.com/123456789012/jobs.fifo";
        assert_eq!(
            arn_of_url(url, "eu-west-1").as_deref(),
            Some("arn:aws:sqs:eu-west-1:123456789012:jobs.fifo")
        );
        assert_eq!(
            arn_of_url("http://127.0.0.1:4566/123456789012/q1", "cn-north-1").as_deref(),
            Some("arn:aws-cn:sqs:cn-north-1:123456789012:q1")
        );
        // Not the usual shape: the ARN is read instead.
        assert_eq!(
            arn_of_url("http://127.0.0.1:4566/queue/q1", "us-east-1"),
            None
        );
        assert_eq!(arn_of_url(url, ""), None);
    }
}
