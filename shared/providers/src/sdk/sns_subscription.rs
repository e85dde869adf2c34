//! `AWS::SNS::Subscription` through the SNS API.
//!
//! The physical id (what `Ref` returns) is the subscription ARN; the one attribute is `Arn`
//! (the same ARN). `Subscribe` is sent with `ReturnSubscriptionArn`, so a subscription that
//! waits for its endpoint's confirmation (email, HTTP) has its ARN from the start.
//!
//! Handled: `TopicArn`, `Protocol`, `Endpoint` (all three need a new subscription:
//! [`ProviderError::NotUpdatable`]) and the attributes `RawMessageDelivery`, `FilterPolicy`,
//! `FilterPolicyScope`, `RedrivePolicy`, `DeliveryPolicy` and `SubscriptionRoleArn`, set
//! with `SetSubscriptionAttributes` one by one; an attribute the template drops is set back
//! to AWS's default ([`DEFAULTS`]). `Region` and `ReplayPolicy` are left to Cloud Control.
//!
//! A subscription has no name, but `Subscribe` is idempotent on (topic, protocol,
//! endpoint): it would answer a subscription someone else made. So a create first lists
//! the topic's subscriptions (`ListSubscriptionsByTopic`), and one with the same protocol
//! and endpoint is [`ProviderError::AlreadyExists`] (`SdkResource::name_taken`); `import`
//! without an explicit id finds the subscription the same way, which is how the engine
//! takes back its own after an interrupted create.
//!
//! `read_current_state` reports `TopicArn`, `Protocol`, `Endpoint` and the attributes whose
//! value differs from AWS's default or that the template spells (`RawMessageDelivery` as a
//! boolean, the policies in the template's shape: an object, or the JSON text when the
//! template gives text).
//!
//! Calls: create 1 list page (or more) + `Subscribe`; update 1 `SetSubscriptionAttributes`
//! per changed attribute; delete 1 `Unsubscribe`.
//!
//! Emulator (fakecloud 0.51.0): `Unsubscribe` of a subscription that is gone succeeds, and
//! `SetSubscriptionAttributes` with an empty `FilterPolicy` removes it, as on AWS.

use std::collections::HashMap;

use aws_sdk_sns::Client;
use serde_json::{Value, json};

use super::common::{
    SdkResource, call, context, find_in_pages, invalid, missing_as_none, sdk_provider, string_of,
    value_string,
};
use super::policy_json::{document_text, in_template_shape};
use crate::error::ProviderError;
use crate::provider::{Attributes, Created, CurrentState};
use crate::provider::{Properties, ResourceRequest, Updated};

/// How an attribute is written in the template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Bool,
    Text,
    Json,
}

/// The subscription attributes this provider sets (property = attribute name).
const ATTRIBUTES: &[(&str, Kind)] = &[
    ("RawMessageDelivery", Kind::Bool),
    ("FilterPolicy", Kind::Json),
    ("FilterPolicyScope", Kind::Text),
    ("RedrivePolicy", Kind::Json),
    ("DeliveryPolicy", Kind::Json),
    ("SubscriptionRoleArn", Kind::Text),
];

/// AWS's values for attributes a template does not set: `read_current_state` leaves these
/// out, and an update that drops a property sets it back to this value.
pub const DEFAULTS: &[(&str, &str)] = &[
    ("RawMessageDelivery", "false"),
    ("FilterPolicy", ""),
    ("FilterPolicyScope", "MessageAttributes"),
    ("RedrivePolicy", ""),
    ("DeliveryPolicy", ""),
    ("SubscriptionRoleArn", ""),
];

/// The properties that need a new subscription.
const IDENTITY: &[&str] = &["TopicArn", "Protocol", "Endpoint"];

const HANDLED: &[&str] = &[
    "TopicArn",
    "Protocol",
    "Endpoint",
    "RawMessageDelivery",
    "FilterPolicy",
    "FilterPolicyScope",
    "RedrivePolicy",
    "DeliveryPolicy",
    "SubscriptionRoleArn",
];

sdk_provider! {
    /// The `AWS::SNS::Subscription` provider.
    SnsSubscriptionProvider(Client), "AWS::SNS::Subscription", HANDLED
}

fn default_of(name: &str) -> &'static str {
    DEFAULTS
        .iter()
        .find(|(n, _)| *n == name)
        .map_or("", |(_, d)| *d)
}

/// The attribute value of a template value.
fn attribute_value(kind: Kind, value: &Value) -> String {
    match kind {
        Kind::Json => document_text(value),
        _ => value_string(value),
    }
}

/// The attributes for `Subscribe` (those the template sets).
fn subscribe_attributes(props: &Properties) -> HashMap<String, String> {
    ATTRIBUTES
        .iter()
        .filter_map(|(name, kind)| {
            let value = props.get(*name)?;
            Some(((*name).to_string(), attribute_value(*kind, value)))
        })
        .collect()
}

fn attributes(arn: &str) -> Attributes {
    let mut a = Attributes::new();
    a.insert("Arn".into(), json!(arn));
    a
}

/// The (topic, protocol, endpoint) of a template.
fn identity(props: &Properties) -> Result<(String, String, String), ProviderError> {
    let get = |key: &str| {
        string_of(props, key).ok_or_else(|| invalid(TYPE, &format!("{key} is required")))
    };
    Ok((get("TopicArn")?, get("Protocol")?, get("Endpoint")?))
}

impl SnsSubscriptionProvider {
    /// The ARN of the topic's subscription with this protocol and endpoint, if any (one
    /// still waiting for confirmation has no ARN in the listing: `PendingConfirmation`).
    async fn listed(
        &self,
        topic: &str,
        protocol: &str,
        endpoint: &str,
    ) -> Result<Option<String>, ProviderError> {
        let pages = find_in_pages(
            |token| {
                call(&self.retry, "ListSubscriptionsByTopic", move || {
                    self.client
                        .list_subscriptions_by_topic()
                        .topic_arn(topic)
                        .set_next_token(token.clone())
                        .send()
                })
            },
            |page| page.next_token(),
            |page| {
                page.subscriptions()
                    .iter()
                    .find(|s| s.protocol() == Some(protocol) && s.endpoint() == Some(endpoint))
                    .map(|s| s.subscription_arn().unwrap_or_default().to_string())
            },
        );
        missing_as_none(pages.await).map(Option::flatten)
    }

    async fn set_attribute(&self, arn: &str, name: &str, value: &str) -> Result<(), ProviderError> {
        call(&self.retry, "SetSubscriptionAttributes", || {
            self.client
                .set_subscription_attributes()
                .subscription_arn(arn)
                .attribute_name(name)
                .attribute_value(value)
                .send()
        })
        .await
        .map(drop)
        .map_err(|e| e.context(format!("{TYPE} {arn}: attribute {name}")))
    }
}

impl SdkResource for SnsSubscriptionProvider {
    type Found = HashMap<String, String>;
    const TYPE: &'static str = TYPE;
    const NAME_PROPERTY: &'static str = "Endpoint";
    const NOUN: &'static str = "subscription";

    async fn create(&self, request: &ResourceRequest) -> Result<Created, ProviderError> {
        let (topic, protocol, endpoint) = identity(&request.properties)?;
        if self.listed(&topic, &protocol, &endpoint).await?.is_some() {
            return Err(Self::name_taken(&format!(
                "{protocol} {endpoint} on {topic}"
            )));
        }
        let wanted = subscribe_attributes(&request.properties);
        let out = call(&self.retry, "Subscribe", || {
            self.client
                .subscribe()
                .topic_arn(&topic)
                .protocol(&protocol)
                .endpoint(&endpoint)
                .set_attributes((!wanted.is_empty()).then(|| wanted.clone()))
                .return_subscription_arn(true)
                .send()
        })
        .await
        .map_err(|e| e.context(context(request, TYPE)))?;
        let arn = out
            .subscription_arn()
            .filter(|a| a.starts_with("arn:"))
            .ok_or_else(|| ProviderError::Other("Subscribe answered no subscription ARN".into()))?
            .to_string();
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
        for key in IDENTITY {
            if props.get(*key) != previous.get(*key) {
                return Err(ProviderError::NotUpdatable(format!(
                    "{}: {key} cannot change in place",
                    context(request, TYPE)
                )));
            }
        }
        for (name, kind) in ATTRIBUTES {
            let (old, new) = (previous.get(*name), props.get(*name));
            if old == new {
                continue;
            }
            let value = match new {
                Some(value) => attribute_value(*kind, value),
                None => default_of(name).to_string(),
            };
            self.set_attribute(arn, name, &value).await?;
        }
        Ok(Updated {
            sensitive: false,
            physical_id: arn.to_string(),
            attributes: attributes(arn),
            replaced: false,
        })
    }

    async fn remove(&self, arn: &str) -> Result<(), ProviderError> {
        call(&self.retry, "Unsubscribe", || {
            self.client.unsubscribe().subscription_arn(arn).send()
        })
        .await
        .map(drop)
    }

    /// The explicit id, else the subscription of the template's topic, protocol and
    /// endpoint.
    async fn import_id(&self, request: &ResourceRequest) -> Result<Option<String>, ProviderError> {
        if let Some(id) = &request.physical_id {
            return Ok(Some(id.clone()));
        }
        let Ok((topic, protocol, endpoint)) = identity(&request.properties) else {
            return Ok(None);
        };
        let listed = self.listed(&topic, &protocol, &endpoint).await?;
        Ok(listed.filter(|arn| arn.starts_with("arn:")))
    }

    /// `GetSubscriptionAttributes`, or `None` when the subscription does not exist.
    async fn find(&self, arn: &str) -> Result<Option<Self::Found>, ProviderError> {
        let got = call(&self.retry, "GetSubscriptionAttributes", || {
            self.client
                .get_subscription_attributes()
                .subscription_arn(arn)
                .send()
        })
        .await;
        Ok(missing_as_none(got)?.map(|out| out.attributes().cloned().unwrap_or_default()))
    }

    fn attributes(&self, arn: &str, _found: &Self::Found) -> Attributes {
        attributes(arn)
    }

    async fn read(&self, request: &ResourceRequest) -> Result<CurrentState, ProviderError> {
        let arn = request.require_physical_id()?;
        Ok(match self.find(arn).await? {
            Some(found) => CurrentState::Found(state_of(&found, &request.properties)),
            None => CurrentState::NotFound,
        })
    }

    async fn state(&self, _arn: &str, found: Self::Found) -> Result<CurrentState, ProviderError> {
        Ok(CurrentState::Found(state_of(&found, &Properties::new())))
    }
}

/// The state of a subscription from its attributes; `template` gives the shape of the
/// policies.
fn state_of(found: &HashMap<String, String>, template: &Properties) -> Properties {
    let mut state = Properties::new();
    for key in IDENTITY {
        if let Some(value) = found.get(*key) {
            state.insert((*key).to_string(), json!(value));
        }
    }
    for (name, kind) in ATTRIBUTES {
        let Some(value) = found.get(*name) else {
            continue;
        };
        let spelled = template.contains_key(*name);
        if value.is_empty() || (value == default_of(name) && !spelled) {
            continue;
        }
        let value = match kind {
            Kind::Bool => value
                .parse::<bool>()
                .map(Value::from)
                .unwrap_or_else(|_| json!(value)),
            Kind::Text => json!(value),
            Kind::Json => in_template_shape(value, template.get(*name)),
        };
        state.insert((*name).to_string(), value);
    }
    state
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sdk::common::testing::props;

    #[test]
    fn attributes_both_ways() {
        let template = props(json!({
            "TopicArn": "arn:t", "Protocol": "sqs", "Endpoint": "arn:q",
            "RawMessageDelivery": true,
            "FilterPolicy": {"kind": ["a"]}
        }));
        let sent = subscribe_attributes(&template);
        assert_eq!(sent["RawMessageDelivery"], "true");
        assert_eq!(sent["FilterPolicy"], r#"{"kind":["a"]}"#);
        assert_eq!(sent.len(), 2);
        let found: HashMap<String, String> = [
            ("TopicArn", "arn:t"),
            ("Protocol", "sqs"),
            ("Endpoint", "arn:q"),
            ("Owner", "123456789012"),
            ("RawMessageDelivery", "true"),
            ("FilterPolicy", r#"{"kind": ["a"]}"#),
            ("FilterPolicyScope", "MessageAttributes"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(state_of(&found, &template), template);
        let mut spelled = template.clone();
        spelled.insert("FilterPolicyScope".into(), json!("MessageAttributes"));
        assert_eq!(state_of(&found, &spelled), spelled);
        assert!(identity(&props(json!({"TopicArn": "t"}))).is_err());
    }
}
