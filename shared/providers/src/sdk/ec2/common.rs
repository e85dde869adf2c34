//! What the EC2 providers share.
//!
//! EC2 resources have no names a template gives, so a create cannot find what an earlier
//! attempt of itself made by name. Instead every resource is tagged at create (one
//! `TagSpecifications` entry in the create call itself, never a later `CreateTags`) with
//! the template's `Tags` plus the stack's own marks:
//!
//! - `stackflow:stack`: the stack name;
//! - `stackflow:logical-id`: the resource's logical id;
//! - `stackflow:token`: a hash of the request's idempotency token ([`token_mark`]), the
//!   same on every replay of one create and another for any other action (a replacement).
//!
//! A replayed create first looks for a resource carrying the three marks ([`mark_filters`]
//! as `tag:` filters of the describe call, and [`carries_marks`] on what it answers, in
//! case a service ignores a filter) and adopts it instead of making a second one. Where the
//! API takes a `ClientToken` ([`client_token`]), the create sends one as well.
//!
//! The marks are the stack's bookkeeping, not the template's: [`template_tags`] leaves
//! them (and AWS's own `aws:` tags) out of what `read_current_state` reports, and
//! [`Ec2Tags`] never removes them on an update.
//!
//! Also here: [`ec2_error`], the classification of EC2's error codes, and [`wait_until`],
//! polling until a resource reaches a state.

use std::future::Future;
use std::time::Duration;

use aws_sdk_ec2::Client;
use aws_sdk_ec2::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_ec2::types::{Filter, ResourceType, Tag, TagSpecification};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::error::{HttpResponse, ProviderError};
use crate::provider::{Properties, ResourceRequest};
use crate::retry::RetryPolicy;
use crate::sdk::common::{Tagging, call_classified, invalid, tag_pairs};

/// The tag holding the stack name.
pub const STACK_MARK: &str = "stackflow:stack";

/// The tag holding the resource's logical id.
pub const LOGICAL_ID_MARK: &str = "stackflow:logical-id";

pub use crate::sdk::common::marks::{TOKEN_MARK, token_mark};

/// A `ClientToken` for an EC2 create (at most 64 ASCII characters): a hash of the stack,
/// the logical id and the request's token, so every replay of one create sends the same.
pub fn client_token(request: &ResourceRequest) -> String {
    let mut hasher = Sha256::new();
    for part in [&request.stack_name, &request.logical_id, &request.token] {
        hasher.update(part.len().to_le_bytes());
        hasher.update(part.as_bytes());
    }
    hasher
        .finalize()
        .iter()
        .take(24)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The stack's marks of the resource `request` creates, as (key, value).
pub fn marks(request: &ResourceRequest) -> [(String, String); 3] {
    [
        (STACK_MARK.to_string(), request.stack_name.clone()),
        (LOGICAL_ID_MARK.to_string(), request.logical_id.clone()),
        (TOKEN_MARK.to_string(), token_mark(&request.token)),
    ]
}

/// True for the keys that are not the template's: the stack's marks and AWS's `aws:` tags.
pub fn is_reserved_key(key: &str) -> bool {
    crate::sdk::common::marks::is_mark(key) || key.starts_with("aws:")
}

/// The template's `Tags` of a `type_name` resource as (key, value); a tag whose key is
/// reserved ([`is_reserved_key`]) is invalid.
pub fn template_tag_pairs(
    type_name: &str,
    props: &Properties,
) -> Result<Vec<(String, String)>, ProviderError> {
    let pairs = tag_pairs(type_name, props)?;
    if let Some((key, _)) = pairs.iter().find(|(k, _)| is_reserved_key(k)) {
        return Err(invalid(
            type_name,
            &format!("the tag key {key} is reserved"),
        ));
    }
    Ok(pairs)
}

/// The `TagSpecifications` entry of a create of a `type_name` resource (EC2's
/// `resource_type`): the template's `Tags` followed by the stack's marks.
pub fn tag_specification(
    type_name: &str,
    resource_type: ResourceType,
    request: &ResourceRequest,
) -> Result<TagSpecification, ProviderError> {
    let mut pairs = template_tag_pairs(type_name, &request.properties)?;
    pairs.extend(marks(request));
    Ok(TagSpecification::builder()
        .resource_type(resource_type)
        .set_tags(Some(ec2_tags(pairs)))
        .build())
}

/// (key, value) pairs as EC2 tags.
pub fn ec2_tags(pairs: impl IntoIterator<Item = (String, String)>) -> Vec<Tag> {
    pairs
        .into_iter()
        .map(|(k, v)| Tag::builder().key(k).value(v).build())
        .collect()
}

/// The describe filters that find the resource `request` creates by its marks.
pub fn mark_filters(request: &ResourceRequest) -> Vec<Filter> {
    marks(request)
        .into_iter()
        .map(|(k, v)| Filter::builder().name(format!("tag:{k}")).values(v).build())
        .collect()
}

/// True when `tags` hold every mark of the resource `request` creates.
pub fn carries_marks(tags: &[Tag], request: &ResourceRequest) -> bool {
    marks(request).iter().all(|(key, value)| {
        tags.iter()
            .any(|t| t.key() == Some(key.as_str()) && t.value() == Some(value.as_str()))
    })
}

/// The template's tags among `tags` (marks and `aws:` tags left out), as (key, value).
pub fn template_tags(tags: &[Tag]) -> Vec<(String, String)> {
    tags.iter()
        .filter_map(|t| {
            let key = t.key()?;
            (!is_reserved_key(key))
                .then(|| (key.to_string(), t.value().unwrap_or_default().to_string()))
        })
        .collect()
}

/// Classifies an EC2 error as [`ProviderError::from_sdk`] does, and besides: a
/// `DependencyViolation` (a dependent still being released, e.g. an interface leaving a
/// subnet) is transient, and the codes that say the thing is there already
/// (`RouteAlreadyExists`, `Resource.AlreadyAssociated`, `InvalidPermission.Duplicate`)
/// are [`ProviderError::AlreadyExists`]; `Gateway.NotAttached` (a detach of what is
/// detached already) is [`ProviderError::NotFound`]. (`Invalid...ID.NotFound` is already
/// NotFound.)
pub fn ec2_error<E>(what: &str, error: SdkError<E, HttpResponse>) -> ProviderError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let code = error.code().map(str::to_string);
    let classified = ProviderError::from_sdk(what, error);
    match code.as_deref() {
        Some("DependencyViolation") => ProviderError::Transient(classified.message().into()),
        Some(
            "RouteAlreadyExists" | "Resource.AlreadyAssociated" | "InvalidPermission.Duplicate",
        ) => ProviderError::AlreadyExists(classified.message().into()),
        Some("Gateway.NotAttached") => ProviderError::NotFound(classified.message().into()),
        _ => classified,
    }
}

/// One EC2 call, retried by `policy` and classified by [`ec2_error`].
pub async fn ec2_call<T, E, F, Fut>(
    policy: &RetryPolicy,
    what: &str,
    send: F,
) -> Result<T, ProviderError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, SdkError<E, HttpResponse>>>,
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    call_classified(policy, what, ec2_error, send).await
}

/// The first poll interval of [`wait_until`]; it doubles up to [`MAX_POLL`].
pub const FIRST_POLL: Duration = Duration::from_millis(250);

/// The longest poll interval of [`wait_until`].
pub const MAX_POLL: Duration = Duration::from_secs(5);

/// Polls `poll` until it answers `Some` (the state waited for) and returns that; after
/// `timeout` without it, a [`ProviderError::Timeout`] naming `what` is waited for. Each
/// poll is one call (its own retries are the caller's).
pub async fn wait_until<T, F, Fut>(
    what: &str,
    timeout: Duration,
    mut poll: F,
) -> Result<T, ProviderError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>, ProviderError>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    let mut interval = FIRST_POLL;
    loop {
        if let Some(done) = poll().await? {
            return Ok(done);
        }
        if tokio::time::Instant::now() + interval > deadline {
            return Err(ProviderError::Timeout(format!(
                "{what}: not reached within {} s",
                timeout.as_secs()
            )));
        }
        tokio::time::sleep(interval).await;
        interval = (interval * 2).min(MAX_POLL);
    }
}

/// A boolean template value (`true`, `"true"`), `None` when unset; anything else is
/// invalid.
pub fn bool_of(
    type_name: &str,
    props: &Properties,
    key: &str,
) -> Result<Option<bool>, ProviderError> {
    match props.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(Value::String(s)) if s.eq_ignore_ascii_case("true") => Ok(Some(true)),
        Some(Value::String(s)) if s.eq_ignore_ascii_case("false") => Ok(Some(false)),
        Some(_) => Err(invalid(type_name, &format!("{key} must be a boolean"))),
    }
}

/// EC2's tagging calls (`CreateTags`, `DeleteTags`) for any EC2 resource id: an update
/// brings the template's tags from the previous ones to the new ones with
/// [`Tagging::sync_tags`] (the marks are in neither, so they stay).
pub struct Ec2Tags<'a> {
    /// The EC2 client.
    pub client: &'a Client,
    /// The retry policy of the calls.
    pub retry: &'a RetryPolicy,
}

impl Tagging for Ec2Tags<'_> {
    async fn untag(&self, id: &str, keys: Vec<String>) -> Result<(), ProviderError> {
        let tags: Vec<Tag> = keys
            .into_iter()
            .map(|k| Tag::builder().key(k).build())
            .collect();
        ec2_call(self.retry, "DeleteTags", || {
            self.client
                .delete_tags()
                .resources(id)
                .set_tags(Some(tags.clone()))
                .send()
        })
        .await
        .map(drop)
    }

    async fn tag(&self, id: &str, tags: Vec<(String, String)>) -> Result<(), ProviderError> {
        let tags = ec2_tags(tags);
        ec2_call(self.retry, "CreateTags", || {
            self.client
                .create_tags()
                .resources(id)
                .set_tags(Some(tags.clone()))
                .send()
        })
        .await
        .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::sdk::common::testing::props;

    fn request() -> ResourceRequest {
        let mut r = ResourceRequest::new(
            "app",
            "Vpc",
            "AWS::EC2::VPC",
            props(json!({"Tags": [{"Key": "team", "Value": "net"}]})),
        );
        r.token = "t1".into();
        r
    }

    #[test]
    fn marks_tag_the_create_and_find_it_again() {
        let r = request();
        let spec = tag_specification("AWS::EC2::VPC", ResourceType::Vpc, &r).expect("spec");
        let tags = spec.tags();
        assert_eq!(tags.len(), 4);
        assert!(carries_marks(tags, &r));
        assert_eq!(
            template_tags(tags),
            [("team".to_string(), "net".to_string())]
        );
        let mut other = r.clone();
        other.token = "t2".into();
        assert!(!carries_marks(tags, &other));
        assert_eq!(mark_filters(&r).len(), 3);
        assert_eq!(mark_filters(&r)[2].name(), Some("tag:stackflow:token"));
        assert_eq!(token_mark("t1").len(), 24);
        assert_eq!(client_token(&r).len(), 48);
        assert_ne!(client_token(&r), client_token(&other));
    }

    #[test]
    fn reserved_keys_are_refused_in_templates() {
        let p = props(json!({"Tags": [{"Key": "stackflow:token", "Value": "x"}]}));
        assert!(template_tag_pairs("T", &p).is_err());
        let p = props(json!({"Flag": "true", "No": false, "Bad": 3}));
        assert_eq!(bool_of("T", &p, "Flag"), Ok(Some(true)));
        assert_eq!(bool_of("T", &p, "No"), Ok(Some(false)));
        assert_eq!(bool_of("T", &p, "Missing"), Ok(None));
        assert!(bool_of("T", &p, "Bad").is_err());
    }

    #[tokio::test]
    async fn waits_end_when_reached_or_timed_out() {
        let mut polls = 0;
        let reached = wait_until("x", Duration::from_secs(5), || {
            polls += 1;
            let n = polls;
            async move { Ok((n == 2).then_some(n)) }
        })
        .await;
        assert_eq!(reached, Ok(2));
        let never: Result<(), _> =
            wait_until("vpc-1 available", Duration::ZERO, || async { Ok(None) }).await;
        assert!(matches!(never, Err(ProviderError::Timeout(m)) if m.starts_with("vpc-1")));
    }
}
