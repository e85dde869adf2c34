//! `AWS::SNS::Topic` through the SNS API.
//!
//! The physical id (what `Ref` returns) is the topic ARN; the attributes are `TopicArn` and
//! `TopicName`. Without a `TopicName` the name is generated
//! ([`crate::names::physical_name`], at most 256 characters, `.fifo` appended for a FIFO
//! topic). `CreateTopic` is idempotent by name when the attributes and tags are the same,
//! so a retried create (same token, same name, same request) answers the topic it made.
//!
//! That idempotency would also hand a create someone else's topic: a name the template
//! gives is looked up (`SnsTopicProvider::named`) once before `CreateTopic`, and a taken
//! one is [`ProviderError::AlreadyExists`] (`SdkResource::name_taken`; see
//! `refuse_taken`). A topic made by someone else between that check and the call is
//! answered as if `CreateTopic` had made it: the create tags the topic with its mark
//! ([`crate::sdk::marks`]) and reads the tags back, and a topic without the mark is
//! refused the same way, untouched (an existing topic keeps its tags).
//!
//! `TopicName` and `FifoTopic` cannot change in place ([`ProviderError::NotUpdatable`]);
//! the other attributes are set with `SetTopicAttributes`, and a property the template drops
//! is set back to AWS's default (see [`DEFAULTS`]).
//!
//! `read_current_state` reports `TopicName`, the attributes whose value differs from AWS's
//! default (booleans as JSON booleans), and `Tags` (a `Key`/`Value` list sorted by key)
//! when there are any.

use std::collections::{BTreeMap, HashMap};

use aws_sdk_sns::Client;
use aws_sdk_sns::types::Tag;
use serde_json::{Value, json};

use super::common::marks::{carries_own_mark, check_made, own_mark};
use super::common::{
    SdkResource, Tagging, call, context, find_in_pages, insert_tags, keep_name, missing_as_none,
    refuse_taken, sdk_provider, sdk_tags, tag_map, tagging, value_string,
};
use crate::error::ProviderError;
use crate::names::{NameRules, given_or_suffixed};
use crate::provider::{Attributes, Created, CurrentState};
use crate::provider::{Properties, ResourceRequest, Updated};

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

sdk_provider! {
    /// The `AWS::SNS::Topic` provider.
    SnsTopicProvider(Client), "AWS::SNS::Topic", HANDLED
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
            let value = value_string(props.get(*name)?);
            (default_of(name) != Some(value.as_str())).then(|| ((*name).to_string(), value))
        })
        .collect()
}

/// The SNS tags of `tags`.
fn sns_tags(tags: impl IntoIterator<Item = (String, String)>) -> Result<Vec<Tag>, ProviderError> {
    sdk_tags(TYPE, tags, |k, v| Tag::builder().key(k).value(v).build())
}

fn is_fifo(props: &Properties) -> bool {
    props.get("FifoTopic").map(value_string).as_deref() == Some("true")
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

/// What the first page of `ListTopics` says of the topic name `name`.
#[derive(Debug, PartialEq, Eq)]
enum Listed {
    /// A listed topic has the name: its ARN.
    Taken(String),
    /// No topic has it (every topic was listed).
    Free,
    /// Other pages follow: whether the topic with this ARN exists is to be asked.
    Ask(String),
}

/// The answer of a first page listing `arns`, followed by `next` when there are more.
fn on_first_page<'a>(
    mut arns: impl Iterator<Item = &'a str>,
    next: Option<&str>,
    name: &str,
) -> Listed {
    let mut place = None;
    for arn in arns.by_ref() {
        let Some((at, listed)) = arn.rsplit_once(':') else {
            continue;
        };
        if listed == name {
            return Listed::Taken(arn.to_string());
        }
        place.get_or_insert_with(|| at.to_string());
    }
    match (place, next.filter(|t| !t.is_empty())) {
        (Some(at), Some(_)) => Listed::Ask(format!("{at}:{name}")),
        _ => Listed::Free,
    }
}

impl SnsTopicProvider {
    /// The ARN of the topic named `name`, found with `ListTopics`.
    async fn arn_of(&self, name: &str) -> Result<Option<String>, ProviderError> {
        find_in_pages(
            |token| {
                call(&self.retry, "ListTopics", move || {
                    self.client
                        .list_topics()
                        .set_next_token(token.clone())
                        .send()
                })
            },
            |page| page.next_token(),
            |page| {
                page.topics()
                    .iter()
                    .filter_map(|t| t.topic_arn())
                    .find(|arn| name_of_arn(arn) == name)
                    .map(str::to_string)
            },
        )
        .await
    }

    /// The ARN of the topic named `name` when it exists, in at most two calls whatever the
    /// number of topics: a topic on the first page `ListTopics` answers is taken; with no
    /// page after it, no other topic exists. Else the ARN is that of a listed topic with
    /// `name` in place of its own (the listed topics are the caller's, in the client's
    /// region: their ARNs carry this partition, region and account), and
    /// `GetTopicAttributes` says whether a topic has it.
    async fn named(&self, name: &str) -> Result<Option<String>, ProviderError> {
        let listed = call(&self.retry, "ListTopics", || {
            self.client.list_topics().send()
        })
        .await?;
        let arns = listed.topics().iter().filter_map(|t| t.topic_arn());
        match on_first_page(arns, listed.next_token(), name) {
            Listed::Taken(arn) => Ok(Some(arn)),
            Listed::Free => Ok(None),
            Listed::Ask(arn) => Ok(self.find(&arn).await?.map(|_| arn)),
        }
    }

    /// The topic's tags.
    async fn tags(&self, arn: &str) -> Result<Vec<(String, String)>, ProviderError> {
        let tags = call(&self.retry, "ListTagsForResource", || {
            self.client
                .list_tags_for_resource()
                .resource_arn(arn)
                .send()
        })
        .await?;
        let tags = tags.tags().iter();
        Ok(tags
            .map(|t| (t.key().to_string(), t.value().to_string()))
            .collect())
    }

    async fn set_attribute(&self, arn: &str, name: &str, value: &str) -> Result<(), ProviderError> {
        call(&self.retry, "SetTopicAttributes", || {
            self.client
                .set_topic_attributes()
                .topic_arn(arn)
                .attribute_name(name)
                .attribute_value(value)
                .send()
        })
        .await
        .map(|_| ())
        .map_err(|e| e.context(format!("{TYPE} {arn}: attribute {name}")))
    }
}

impl SdkResource for SnsTopicProvider {
    type Found = HashMap<String, String>;
    const TYPE: &'static str = TYPE;
    const NAME_PROPERTY: &'static str = "TopicName";
    const NOUN: &'static str = "topic";

    async fn create(&self, request: &ResourceRequest) -> Result<Created, ProviderError> {
        let props = &request.properties;
        let suffix = if is_fifo(props) { ".fifo" } else { "" };
        let (name, generated) = given_or_suffixed(request, "TopicName", suffix, NAME_RULES);
        if is_fifo(props) && !name.ends_with(".fifo") {
            return Err(ProviderError::InvalidRequest(format!(
                "{}: a FIFO topic's name must end in .fifo, got {name}",
                context(request, TYPE)
            )));
        }
        let wanted = topic_attributes(props);
        let mut tags = tag_map(props).into_iter().collect::<BTreeMap<_, _>>();
        tags.extend(own_mark(request));
        let tags = sns_tags(tags)?;
        refuse_taken::<Self, _>(&name, generated, self.named(&name)).await?;
        let out = call(&self.retry, "CreateTopic", || {
            self.client
                .create_topic()
                .name(&name)
                .set_attributes((!wanted.is_empty()).then(|| wanted.clone()))
                .set_tags((!tags.is_empty()).then(|| tags.clone()))
                .send()
        })
        .await
        .map_err(|e| e.context(context(request, TYPE)))?;
        let arn = out
            .topic_arn()
            .ok_or_else(|| ProviderError::Other("CreateTopic answered no TopicArn".into()))?
            .to_string();
        // `CreateTopic` answers a topic made between the check and the call as if it had
        // made it: only this create's mark shows that it did.
        if !generated {
            check_made(request, &arn, || self.tags(&arn)).await?;
        }
        Ok(Created {
            sensitive: false,
            attributes: attributes(&arn),
            physical_id: arn,
        })
    }

    async fn update(&self, request: &ResourceRequest) -> Result<Updated, ProviderError> {
        let arn = request.require_physical_id()?;
        let props = &request.properties;
        let previous = request.previous_properties.clone().unwrap_or_default();
        keep_name(request, TYPE, "TopicName", name_of_arn(arn), "topic")?;
        if is_fifo(props) != is_fifo(&previous) {
            return Err(ProviderError::NotUpdatable(format!(
                "{}: FifoTopic cannot change in place",
                context(request, TYPE)
            )));
        }
        for (name, _) in ATTRIBUTES {
            if *name == "FifoTopic" {
                continue;
            }
            let old = previous.get(*name).map(value_string);
            let new = props.get(*name).map(value_string);
            if old == new {
                continue;
            }
            let value = match new {
                Some(value) => value,
                None => default_of(name).unwrap_or_default().to_string(),
            };
            self.set_attribute(arn, name, &value).await?;
        }
        self.sync_tags(arn, &tag_map(&previous), &tag_map(props))
            .await?;
        Ok(Updated {
            sensitive: false,
            physical_id: arn.to_string(),
            attributes: attributes(arn),
            replaced: false,
        })
    }

    async fn remove(&self, arn: &str) -> Result<(), ProviderError> {
        call(&self.retry, "DeleteTopic", || {
            self.client.delete_topic().topic_arn(arn).send()
        })
        .await
        .map(drop)
    }

    async fn made_by(&self, request: &ResourceRequest) -> Result<bool, ProviderError> {
        let arn = request.require_physical_id()?;
        Ok(carries_own_mark(&self.tags(arn).await?, request))
    }

    /// An explicit id may be the ARN or the name; the ARN is looked up by name.
    async fn import_id(&self, request: &ResourceRequest) -> Result<Option<String>, ProviderError> {
        match (&request.physical_id, request.string_property("TopicName")) {
            (Some(id), _) if id.starts_with("arn:") => Ok(Some(id.clone())),
            (Some(name), _) => self.arn_of(name).await,
            (None, Some(name)) => self.arn_of(name).await,
            (None, None) => Ok(None),
        }
    }

    /// `GetTopicAttributes`, or `None` when the topic does not exist.
    async fn find(&self, arn: &str) -> Result<Option<Self::Found>, ProviderError> {
        let got = call(&self.retry, "GetTopicAttributes", || {
            self.client.get_topic_attributes().topic_arn(arn).send()
        })
        .await;
        Ok(missing_as_none(got)?.map(|out| out.attributes().cloned().unwrap_or_default()))
    }

    fn attributes(&self, arn: &str, _found: &Self::Found) -> Attributes {
        attributes(arn)
    }

    /// `GetTopicAttributes` and `ListTagsForResource` at once: both need only the ARN.
    async fn read(&self, request: &ResourceRequest) -> Result<CurrentState, ProviderError> {
        let arn = request.require_physical_id()?;
        let (found, tags) = tokio::join!(self.find(arn), self.tags(arn));
        match found? {
            Some(described) => Ok(state_of(arn, &described, tags?)),
            None => Ok(CurrentState::NotFound),
        }
    }

    async fn state(
        &self,
        arn: &str,
        described: Self::Found,
    ) -> Result<CurrentState, ProviderError> {
        Ok(state_of(arn, &described, self.tags(arn).await?))
    }
}

/// The state of topic `arn` from its attributes and its tags.
fn state_of(
    arn: &str,
    described: &HashMap<String, String>,
    tags: Vec<(String, String)>,
) -> CurrentState {
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
    insert_tags(&mut state, tags);
    CurrentState::Found(state)
}

tagging! {
    SnsTopicProvider, ProviderError::from_sdk,
    "UntagResource" => |client, arn, keys| {
        client.untag_resource().resource_arn(arn).set_tag_keys(Some(keys))
    },
    "TagResource" => |client, arn, tags| {
        client.tag_resource().resource_arn(arn).set_tags(Some(sns_tags(tags)?))
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::physical_name;
    use crate::sdk::common::testing::props;

    #[test]
    fn the_first_page_of_topics_answers_when_it_can() {
        let arns = [
            "arn:aws:sns:us-east-1:123456789012:a",
            "arn:aws:sns:us-east-1:123456789012:b",
        ];
        assert_eq!(
            on_first_page(arns.into_iter(), Some("more"), "b"),
            Listed::Taken(arns[1].into())
        );
        assert_eq!(on_first_page(arns.into_iter(), None, "c"), Listed::Free);
        assert_eq!(on_first_page(arns.into_iter(), Some(""), "c"), Listed::Free);
        assert_eq!(on_first_page(std::iter::empty(), None, "c"), Listed::Free);
        assert_eq!(
            on_first_page(arns.into_iter(), Some("more"), "c"),
            Listed::Ask("arn:aws:sns:us-east-1:123456789012:c".into())
        );
    }

    #[test]
    fn names_attributes_and_values() {
        assert_eq!(name_of_arn("arn:aws:sns:us-east-1:123456789012:t1"), "t1");
        let props = props(
            json!({"FifoTopic": true, "DisplayName": "", "ContentBasedDeduplication": "true"}),
        );
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
