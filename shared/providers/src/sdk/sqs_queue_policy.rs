//! `AWS::SQS::QueuePolicy` through the SQS API: the `Policy` attribute of each queue in
//! `Queues` (queue URLs).
//!
//! The physical id (what `Ref` returns) and the one attribute, `Id`, are a name made for
//! the resource ([`crate::names::physical_name`] of the stack, the logical id and the
//! create's token), as CloudFormation makes one: SQS itself keeps no policy object, only
//! the attribute on each queue. Both properties change in place: a new `PolicyDocument` is
//! written to every queue, a queue dropped from `Queues` has the policy cleared, a queue
//! added gets it.
//!
//! Never touching what the stack did not make: a create (or an update adding a queue)
//! that finds a queue holding another policy is [`ProviderError::AlreadyExists`] naming the
//! queue, and nothing is written. A queue that already holds this very document is taken
//! as written (a replayed create), which makes the create safe to retry. A delete clears
//! the policy only on queues that still hold the document the stack wrote; a queue that is
//! gone is passed over. A delete without the recorded `Queues` and `PolicyDocument` cannot
//! tell which policies are the stack's: it clears none and says so (`Deleted::Skipped`).
//!
//! `read_current_state` needs the request's `Queues` (SQS cannot be asked which queues
//! hold a policy): it reports `Queues` (those that still exist and hold a policy) and the
//! `PolicyDocument` of the first of them, in the template's shape; `NotFound` when no queue
//! holds one. `import` finds the resource only by an explicit id (nothing in AWS carries
//! the made name) whose queues hold a policy.
//!
//! Calls: create 2 per queue (`GetQueueAttributes`, `SetQueueAttributes`); update 1 per
//! kept queue, 2 per added or dropped one; delete 2 per queue.
//!
//! Emulator (fakecloud 0.51.0): `SetQueueAttributes` with an empty `Policy` removes it, as
//! on AWS; the stored document comes back with its keys sorted (compared as JSON here).

use std::collections::HashMap;

use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::QueueAttributeName;
use serde_json::{Value, json};

use super::common::id_attributes as attributes;
use super::common::{SdkResource, call, context, invalid, missing_as_none, sdk_provider};
use super::policy_json::{document_text, in_template_shape, same_document};
use crate::error::ProviderError;
use crate::names::{NameRules, generated_name};
use crate::provider::{Attributes, Created, CurrentState, Deleted, Imported};
use crate::provider::{Properties, ResourceRequest, Updated};

const HANDLED: &[&str] = &["PolicyDocument", "Queues"];

/// The made id: letters, digits, `-` and `_`.
const ID_RULES: NameRules = NameRules {
    max_len: 128,
    extra: "-_",
    lowercase: false,
};

sdk_provider! {
    /// The `AWS::SQS::QueuePolicy` provider.
    SqsQueuePolicyProvider(Client), "AWS::SQS::QueuePolicy", HANDLED
}

/// The template's `Queues` (URLs).
fn queues_of(props: &Properties) -> Result<Vec<String>, ProviderError> {
    let list = props
        .get("Queues")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid(TYPE, "Queues must be a list of queue URLs"))?;
    list.iter()
        .map(|q| {
            q.as_str()
                .map(str::to_string)
                .ok_or_else(|| invalid(TYPE, "Queues must be a list of queue URLs"))
        })
        .collect()
}

fn document_of(props: &Properties) -> Result<&Value, ProviderError> {
    props
        .get("PolicyDocument")
        .ok_or_else(|| invalid(TYPE, "PolicyDocument is required"))
}

/// The refusal of a queue that holds a policy the stack did not write.
fn foreign(url: &str) -> ProviderError {
    ProviderError::AlreadyExists(format!(
        "{TYPE}: the queue {url} has a policy that this stack did not set; stackflow never \
         takes over what it did not make: remove that policy, or leave the queue out"
    ))
}

impl SqsQueuePolicyProvider {
    /// The queue's policy text: `Some("")` when it has none, `None` when the queue is gone.
    async fn policy(&self, url: &str) -> Result<Option<String>, ProviderError> {
        let got = call(&self.retry, "GetQueueAttributes", || {
            self.client
                .get_queue_attributes()
                .queue_url(url)
                .attribute_names(QueueAttributeName::Policy)
                .send()
        })
        .await;
        Ok(missing_as_none(got)?.map(|out| {
            out.attributes()
                .and_then(|a| a.get(&QueueAttributeName::Policy).cloned())
                .unwrap_or_default()
        }))
    }

    async fn set_policy(&self, url: &str, text: &str) -> Result<(), ProviderError> {
        let attributes = HashMap::from([(QueueAttributeName::Policy, text.to_string())]);
        call(&self.retry, "SetQueueAttributes", || {
            self.client
                .set_queue_attributes()
                .queue_url(url)
                .set_attributes(Some(attributes.clone()))
                .send()
        })
        .await
        .map(drop)
        .map_err(|e| e.context(format!("{TYPE}: queue {url}")))
    }

    /// Refuses when one of `urls` holds another policy than `document` (a queue that does
    /// not exist is an error of its own).
    async fn check_free(&self, urls: &[String], document: &Value) -> Result<(), ProviderError> {
        for url in urls {
            match self.policy(url).await? {
                None => {
                    return Err(ProviderError::NotFound(format!(
                        "{TYPE}: the queue {url} does not exist"
                    )));
                }
                Some(held) if !held.is_empty() && !same_document(&held, document) => {
                    return Err(foreign(url));
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// Clears the policy of each queue in `urls` that still holds `document`.
    async fn clear(&self, urls: &[String], document: &Value) -> Result<(), ProviderError> {
        for url in urls {
            if let Some(held) = self.policy(url).await?
                && same_document(&held, document)
            {
                self.set_policy(url, "").await?;
            }
        }
        Ok(())
    }
}

impl SdkResource for SqsQueuePolicyProvider {
    /// The policy text the first queue holds, and the queues that hold one.
    type Found = (String, Vec<String>);
    const TYPE: &'static str = TYPE;
    const NAME_PROPERTY: &'static str = "Id";
    const NOUN: &'static str = "queue policy";

    async fn create(&self, request: &ResourceRequest) -> Result<Created, ProviderError> {
        let props = &request.properties;
        let (queues, document) = (queues_of(props)?, document_of(props)?);
        self.check_free(&queues, document)
            .await
            .map_err(|e| e.context(context(request, TYPE)))?;
        let text = document_text(document);
        for url in &queues {
            self.set_policy(url, &text).await?;
        }
        let id = generated_name(request, ID_RULES);
        Ok(Created {
            sensitive: false,
            attributes: attributes(&id),
            physical_id: id,
        })
    }

    async fn update(&self, request: &ResourceRequest) -> Result<Updated, ProviderError> {
        let id = request.require_physical_id()?;
        let props = &request.properties;
        let previous = request.previous_properties.clone().unwrap_or_default();
        let (queues, document) = (queues_of(props)?, document_of(props)?);
        let before = queues_of(&previous).unwrap_or_default();
        let added: Vec<String> = queues
            .iter()
            .filter(|q| !before.contains(q))
            .cloned()
            .collect();
        self.check_free(&added, document)
            .await
            .map_err(|e| e.context(context(request, TYPE)))?;
        let text = document_text(document);
        for url in &queues {
            self.set_policy(url, &text).await?;
        }
        let dropped: Vec<String> = before.into_iter().filter(|q| !queues.contains(q)).collect();
        if let Some(old) = previous.get("PolicyDocument") {
            self.clear(&dropped, old).await?;
        }
        Ok(Updated {
            sensitive: false,
            physical_id: id.to_string(),
            attributes: attributes(id),
            replaced: false,
        })
    }

    /// Not used: the queues come with the request (see `delete`).
    async fn remove(&self, id: &str) -> Result<(), ProviderError> {
        Err(invalid(TYPE, &format!("{id}: a delete needs the Queues")))
    }

    /// Clears the policy of the request's queues that still hold its document.
    async fn delete(&self, request: &ResourceRequest) -> Result<Deleted, ProviderError> {
        request.require_physical_id()?;
        let props = &request.properties;
        let (Ok(queues), Ok(document)) = (queues_of(props), document_of(props)) else {
            return Ok(Deleted::Skipped {
                reason: format!(
                    "{}: no recorded Queues and PolicyDocument, so nothing tells which queues \
                     hold this stack's policy: none is cleared",
                    context(request, TYPE)
                ),
            });
        };
        self.clear(&queues, document)
            .await
            .map_err(|e| e.context(context(request, TYPE)))?;
        Ok(Deleted::Done)
    }

    /// Not used: the queues come with the request (see `read`).
    async fn find(&self, _id: &str) -> Result<Option<Self::Found>, ProviderError> {
        Ok(None)
    }

    fn attributes(&self, id: &str, _found: &Self::Found) -> Attributes {
        attributes(id)
    }

    /// The explicit id, when the request's queues hold a policy.
    async fn import(&self, request: &ResourceRequest) -> Result<Imported, ProviderError> {
        let Some(id) = request.physical_id.clone() else {
            return Ok(Imported::NotDeployedYet);
        };
        Ok(match self.held(&request.properties).await? {
            Some(_) => Imported::Found {
                attributes: attributes(&id),
                physical_id: id,
            },
            None => Imported::NotDeployedYet,
        })
    }

    async fn read(&self, request: &ResourceRequest) -> Result<CurrentState, ProviderError> {
        request.require_physical_id()?;
        let props = &request.properties;
        Ok(match self.held(props).await? {
            Some((text, queues)) => {
                let mut state = Properties::new();
                let shape = props.get("PolicyDocument");
                state.insert("PolicyDocument".into(), in_template_shape(&text, shape));
                state.insert("Queues".into(), json!(queues));
                CurrentState::Found(state)
            }
            None => CurrentState::NotFound,
        })
    }

    async fn state(
        &self,
        _id: &str,
        (text, queues): Self::Found,
    ) -> Result<CurrentState, ProviderError> {
        let mut state = Properties::new();
        state.insert("PolicyDocument".into(), in_template_shape(&text, None));
        state.insert("Queues".into(), json!(queues));
        Ok(CurrentState::Found(state))
    }
}

impl SqsQueuePolicyProvider {
    /// The policy of the first of `props`' queues that holds one, and every queue that
    /// holds one; `None` when none does.
    async fn held(
        &self,
        props: &Properties,
    ) -> Result<Option<(String, Vec<String>)>, ProviderError> {
        let mut first = None;
        let mut holding = Vec::new();
        for url in queues_of(props)? {
            match self.policy(&url).await? {
                Some(text) if !text.is_empty() => {
                    first.get_or_insert(text);
                    holding.push(url);
                }
                _ => {}
            }
        }
        Ok(first.map(|text| (text, holding)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sdk::common::testing::props;

    #[test]
    fn queues_must_be_urls() {
        let p = props(json!({"Queues": ["https://q/1/a", "https://q/1/b"], "PolicyDocument": {}}));
        assert_eq!(queues_of(&p).expect("queues").len(), 2);
        assert!(queues_of(&props(json!({"Queues": [1]}))).is_err());
        assert!(queues_of(&props(json!({}))).is_err());
        assert!(document_of(&p).is_ok());
        assert!(matches!(foreign("u"), ProviderError::AlreadyExists(m) if m.contains("queue u")));
    }
}
