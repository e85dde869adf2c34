//! `AWS::KMS::Key` through the KMS API.
//!
//! The physical id (what `Ref` returns) is the key id; the attributes are `Arn` and
//! `KeyId`. Handled: `Description`, `KeyPolicy`, `EnableKeyRotation`, `Enabled`,
//! `KeySpec`, `KeyUsage`, `MultiRegion`, `PendingWindowInDays`, `RotationPeriodInDays` and
//! `Tags`.
//!
//! A key has no name and `CreateKey` no client token, so a create marks its key with the
//! tag [`MARK_TAG`], whose value is made of the stack, the logical id and the request's
//! token ([`crate::names::physical_name`]). A create first looks for a key carrying its
//! mark (`ListKeys`, then `ListResourceTags` of each key: one call per key of the account
//! and region, the price of a safe retry for a type without names) and adopts it, bringing
//! rotation and the enabled state to the template's. The mark is never reported in the
//! state, and tag changes never touch it.
//!
//! `KeySpec`, `KeyUsage` and `MultiRegion` cannot change in place
//! ([`ProviderError::NotUpdatable`]). `Description` (`UpdateKeyDescription`), `KeyPolicy`
//! (`PutKeyPolicy`; dropped, the key gets KMS's default policy back), `EnableKeyRotation`
//! with `RotationPeriodInDays` (`EnableKeyRotation`/`DisableKeyRotation`), `Enabled`
//! (`EnableKey`/`DisableKey`) and `Tags` change in place. `PendingWindowInDays` only says
//! how a delete schedules the deletion: `ScheduleKeyDeletion` with it (7 to 30, default
//! 30). A key pending deletion counts as gone (its delete is done, a read finds nothing).
//!
//! `read_current_state` reports `Description`, `KeyPolicy` (an object) unless it is KMS's
//! default policy (`Id` `key-default-1`), `EnableKeyRotation` and `MultiRegion` when true,
//! `Enabled` when false, `KeySpec` and `KeyUsage` when not the symmetric defaults, and
//! `Tags` without the mark (`PendingWindowInDays` and `RotationPeriodInDays` are
//! write-only, as in CloudFormation's schema).
//!
//! Calls: a create makes `ListKeys` (per page) and `ListResourceTags` per key, `CreateKey`,
//! then `EnableKeyRotation` when asked and `DisableKey` for a disabled key; an update one
//! call per changed property (two for tags at most); a delete one `ScheduleKeyDeletion`.
//!
//! Emulator (fakecloud 0.51.0): a second `ScheduleKeyDeletion` of a key pending deletion
//! succeeds there (AWS answers `KMSInvalidStateException`, handled above), and
//! `GetKeyRotationStatus` of an asymmetric key answers "off" where AWS refuses the
//! question (read as off here too). An `RSA_*` key takes fakecloud 2 to 15 seconds to
//! make (its key generation), which is the whole time of such a create there.

use std::collections::HashMap;

use aws_sdk_kms::Client;
use aws_sdk_kms::types::{KeyMetadata, KeySpec, KeyState, KeyUsageType, Tag};
use serde_json::{Value, json};

use super::describe;
use crate::error::ProviderError;
use crate::names::{NameRules, generated_name};
use crate::provider::{Attributes, Created, CurrentState, Deleted};
use crate::provider::{Properties, ResourceRequest, Updated};
use crate::sdk::common::{
    SdkResource, Tagging, call, context, insert_tags, int_of, invalid, sdk_provider, sdk_tags,
    string_of, tag_map, tagging, value_string,
};

/// The tag that marks a key with the create that made it.
pub const MARK_TAG: &str = "stackflow:token";

const HANDLED: &[&str] = &[
    "Description",
    "KeyPolicy",
    "EnableKeyRotation",
    "Enabled",
    "KeySpec",
    "KeyUsage",
    "MultiRegion",
    "PendingWindowInDays",
    "RotationPeriodInDays",
    "Tags",
];

/// The mark's value: at most 256 characters (a tag value's limit).
const MARK_RULES: NameRules = NameRules {
    max_len: 256,
    extra: "-_",
    lowercase: false,
};

/// The key's default spec and usage: left out of the state.
const DEFAULT_SPEC: &str = "SYMMETRIC_DEFAULT";
const DEFAULT_USAGE: &str = "ENCRYPT_DECRYPT";

/// The deletion window when the template sets none.
const DEFAULT_PENDING_DAYS: i32 = 30;

sdk_provider! {
    /// The `AWS::KMS::Key` provider.
    KmsKeyProvider(Client), "AWS::KMS::Key", HANDLED
}

/// What a key is now: its metadata.
#[derive(Debug, Clone)]
pub struct KeyFound {
    metadata: KeyMetadata,
}

/// A boolean property (a JSON boolean or its string); `default` when not set.
fn flag(props: &Properties, key: &str, default: bool) -> bool {
    match props.get(key) {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => s.eq_ignore_ascii_case("true"),
        _ => default,
    }
}

/// The policy document of a template value (an object, or a JSON string).
fn policy_text(value: &Value) -> String {
    value_string(value)
}

/// KMS's default key policy for the account of the key ARN `arn`: what a key gets when
/// the template gives none.
fn default_policy(arn: &str) -> String {
    let mut parts = arn.split(':');
    let partition = parts.nth(1).unwrap_or("aws");
    let account = parts.nth(2).unwrap_or_default();
    json!({
        "Version": "2012-10-17",
        "Id": "key-default-1",
        "Statement": [{
            "Sid": "Enable IAM User Permissions",
            "Effect": "Allow",
            "Principal": {"AWS": format!("arn:{partition}:iam::{account}:root")},
            "Action": "kms:*",
            "Resource": "*"
        }]
    })
    .to_string()
}

/// The mark of the create `request`.
fn mark_of(request: &ResourceRequest) -> String {
    generated_name(request, MARK_RULES)
}

fn kms_tags(tags: impl IntoIterator<Item = (String, String)>) -> Result<Vec<Tag>, ProviderError> {
    sdk_tags(TYPE, tags, |k, v| {
        Tag::builder().tag_key(k).tag_value(v).build()
    })
}

fn attributes_of(metadata: &KeyMetadata) -> Attributes {
    let mut a = Attributes::new();
    if let Some(arn) = metadata.arn() {
        a.insert("Arn".into(), json!(arn));
    }
    a.insert("KeyId".into(), json!(metadata.key_id()));
    a
}

/// True when the key is gone or going (deletion scheduled).
fn is_deleted(metadata: &KeyMetadata) -> bool {
    matches!(
        metadata.key_state(),
        Some(KeyState::PendingDeletion | KeyState::PendingReplicaDeletion)
    )
}

/// True for a `KMSInvalidStateException`: the key is in a state (pending deletion) where
/// the call makes no sense.
fn is_invalid_state(error: &ProviderError) -> bool {
    error.message().contains("KMSInvalidStateException")
}

impl KmsKeyProvider {
    /// The key carrying the mark `mark` (one this stack's create made), if any.
    async fn marked(&self, mark: &str) -> Result<Option<KeyMetadata>, ProviderError> {
        let mut marker = None;
        loop {
            let page = call(&self.retry, "ListKeys", || {
                self.client.list_keys().set_marker(marker.clone()).send()
            })
            .await?;
            for id in page.keys().iter().filter_map(|k| k.key_id()) {
                let tags = match self.tags(id).await {
                    Ok(tags) => tags,
                    // Gone since the listing, or a key whose tags cannot be read (another
                    // account's, AWS managed): not this create's.
                    Err(ProviderError::NotFound(_) | ProviderError::InvalidRequest(_)) => continue,
                    Err(e) => return Err(e),
                };
                if tags.get(MARK_TAG).map(String::as_str) == Some(mark) {
                    let found = describe(&self.client, &self.retry, id).await?;
                    if let Some(metadata) = found.filter(|m| !is_deleted(m)) {
                        return Ok(Some(metadata));
                    }
                }
            }
            match page
                .next_marker()
                .filter(|m| page.truncated() && !m.is_empty())
            {
                Some(next) => marker = Some(next.to_string()),
                None => return Ok(None),
            }
        }
    }

    /// The key's tags, the mark included.
    async fn tags(&self, id: &str) -> Result<HashMap<String, String>, ProviderError> {
        let mut tags = HashMap::new();
        let mut marker: Option<String> = None;
        loop {
            let page = call(&self.retry, "ListResourceTags", || {
                self.client
                    .list_resource_tags()
                    .key_id(id)
                    .set_marker(marker.clone())
                    .send()
            })
            .await?;
            for t in page.tags() {
                tags.insert(t.tag_key().to_string(), t.tag_value().to_string());
            }
            match page
                .next_marker()
                .filter(|m| page.truncated() && !m.is_empty())
            {
                Some(next) => marker = Some(next.to_string()),
                None => return Ok(tags),
            }
        }
    }

    /// `CreateKey` from the template, marked with `mark`.
    async fn create_key(
        &self,
        props: &Properties,
        mark: &str,
    ) -> Result<KeyMetadata, ProviderError> {
        let mut tags: Vec<(String, String)> = tag_map(props).into_iter().collect();
        tags.sort();
        tags.push((MARK_TAG.to_string(), mark.to_string()));
        let tags = kms_tags(tags)?;
        let spec = string_of(props, "KeySpec").map(|s| KeySpec::from(s.as_str()));
        let usage = string_of(props, "KeyUsage").map(|s| KeyUsageType::from(s.as_str()));
        let policy = props.get("KeyPolicy").map(policy_text);
        let out = call(&self.retry, "CreateKey", || {
            self.client
                .create_key()
                .set_description(string_of(props, "Description"))
                .set_policy(policy.clone())
                .set_key_spec(spec.clone())
                .set_key_usage(usage.clone())
                .set_multi_region(
                    props
                        .contains_key("MultiRegion")
                        .then(|| flag(props, "MultiRegion", false)),
                )
                .set_tags(Some(tags.clone()))
                .send()
        })
        .await?;
        out.key_metadata()
            .cloned()
            .ok_or_else(|| ProviderError::Other("CreateKey answered no KeyMetadata".into()))
    }

    /// Turns rotation on (every `period` days when given) or off.
    async fn set_rotation(
        &self,
        id: &str,
        on: bool,
        period: Option<i32>,
    ) -> Result<(), ProviderError> {
        if on {
            call(&self.retry, "EnableKeyRotation", || {
                self.client
                    .enable_key_rotation()
                    .key_id(id)
                    .set_rotation_period_in_days(period)
                    .send()
            })
            .await
            .map(drop)
        } else {
            call(&self.retry, "DisableKeyRotation", || {
                self.client.disable_key_rotation().key_id(id).send()
            })
            .await
            .map(drop)
        }
    }

    /// Enables or disables the key.
    async fn set_enabled(&self, id: &str, on: bool) -> Result<(), ProviderError> {
        if on {
            call(&self.retry, "EnableKey", || {
                self.client.enable_key().key_id(id).send()
            })
            .await
            .map(drop)
        } else {
            call(&self.retry, "DisableKey", || {
                self.client.disable_key().key_id(id).send()
            })
            .await
            .map(drop)
        }
    }

    /// Whether rotation is on (`false` for keys that cannot rotate).
    async fn rotation(&self, id: &str) -> Result<bool, ProviderError> {
        let got = call(&self.retry, "GetKeyRotationStatus", || {
            self.client.get_key_rotation_status().key_id(id).send()
        })
        .await;
        match got {
            Ok(out) => Ok(out.key_rotation_enabled()),
            // Asymmetric and HMAC keys do not rotate: KMS refuses the question.
            Err(ProviderError::InvalidRequest(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The key's policy document (`default`).
    async fn policy(&self, id: &str) -> Result<Option<String>, ProviderError> {
        let out = call(&self.retry, "GetKeyPolicy", || {
            self.client
                .get_key_policy()
                .key_id(id)
                .policy_name("default")
                .send()
        })
        .await?;
        Ok(out.policy().map(str::to_string))
    }

    /// Sets the key's policy.
    async fn put_policy(&self, id: &str, policy: &str) -> Result<(), ProviderError> {
        call(&self.retry, "PutKeyPolicy", || {
            self.client
                .put_key_policy()
                .key_id(id)
                .policy_name("default")
                .policy(policy)
                .send()
        })
        .await
        .map(drop)
    }

    /// Brings what a create cannot set (rotation, the enabled state) to the template's.
    async fn after_create(&self, id: &str, props: &Properties) -> Result<(), ProviderError> {
        if flag(props, "EnableKeyRotation", false) {
            let period = int_of(TYPE, props, "RotationPeriodInDays")?;
            self.set_rotation(id, true, period).await?;
        }
        if !flag(props, "Enabled", true) {
            self.set_enabled(id, false).await?;
        }
        Ok(())
    }

    /// Refuses a change of what a key cannot change in place.
    fn keep_fixed(request: &ResourceRequest, previous: &Properties) -> Result<(), ProviderError> {
        let props = &request.properties;
        for (name, default) in [("KeySpec", DEFAULT_SPEC), ("KeyUsage", DEFAULT_USAGE)] {
            let old = string_of(previous, name).unwrap_or_else(|| default.to_string());
            let new = string_of(props, name).unwrap_or_else(|| default.to_string());
            if old != new {
                return Err(ProviderError::NotUpdatable(format!(
                    "{}: {name} {old} -> {new} needs a new key",
                    context(request, TYPE)
                )));
            }
        }
        if flag(previous, "MultiRegion", false) != flag(props, "MultiRegion", false) {
            return Err(ProviderError::NotUpdatable(format!(
                "{}: MultiRegion cannot change in place",
                context(request, TYPE)
            )));
        }
        Ok(())
    }

    /// Applies the changes of description, policy, rotation and enabled state.
    async fn sync(
        &self,
        id: &str,
        previous: &Properties,
        props: &Properties,
    ) -> Result<(), ProviderError> {
        if previous.get("Description") != props.get("Description") {
            let description = string_of(props, "Description").unwrap_or_default();
            call(&self.retry, "UpdateKeyDescription", || {
                self.client
                    .update_key_description()
                    .key_id(id)
                    .description(&description)
                    .send()
            })
            .await?;
        }
        if previous.get("KeyPolicy") != props.get("KeyPolicy") {
            let policy = match props.get("KeyPolicy") {
                Some(policy) => policy_text(policy),
                None => {
                    let metadata = describe(&self.client, &self.retry, id).await?;
                    default_policy(metadata.as_ref().and_then(|m| m.arn()).unwrap_or_default())
                }
            };
            self.put_policy(id, &policy).await?;
        }
        let enabled = flag(props, "Enabled", true);
        if flag(previous, "Enabled", true) != enabled && enabled {
            self.set_enabled(id, true).await?;
        }
        let rotation = flag(props, "EnableKeyRotation", false);
        let period = int_of(TYPE, props, "RotationPeriodInDays")?;
        let period_changed = rotation && int_of(TYPE, previous, "RotationPeriodInDays")? != period;
        if flag(previous, "EnableKeyRotation", false) != rotation || period_changed {
            self.set_rotation(id, rotation, period).await?;
        }
        if flag(previous, "Enabled", true) != enabled && !enabled {
            self.set_enabled(id, false).await?;
        }
        Ok(())
    }
}

impl SdkResource for KmsKeyProvider {
    type Found = KeyFound;
    const TYPE: &'static str = TYPE;
    const NAME_PROPERTY: &'static str = "KeyId";
    const NOUN: &'static str = "key";

    async fn create(&self, request: &ResourceRequest) -> Result<Created, ProviderError> {
        let props = &request.properties;
        let in_context = |e: ProviderError| e.context(context(request, TYPE));
        let days = int_of(TYPE, props, "PendingWindowInDays")?;
        if days.is_some_and(|d| !(7..=30).contains(&d)) {
            return Err(invalid(
                TYPE,
                "PendingWindowInDays must be between 7 and 30",
            ));
        }
        let mark = mark_of(request);
        let metadata = match self.marked(&mark).await.map_err(in_context)? {
            Some(metadata) => metadata,
            None => self.create_key(props, &mark).await.map_err(in_context)?,
        };
        self.after_create(metadata.key_id(), props)
            .await
            .map_err(in_context)?;
        Ok(Created {
            sensitive: false,
            attributes: attributes_of(&metadata),
            physical_id: metadata.key_id().to_string(),
        })
    }

    async fn update(&self, request: &ResourceRequest) -> Result<Updated, ProviderError> {
        let id = request.require_physical_id()?;
        let props = &request.properties;
        let previous = request.previous_properties.clone().unwrap_or_default();
        Self::keep_fixed(request, &previous)?;
        let in_context = |e: ProviderError| e.context(context(request, TYPE));
        self.sync(id, &previous, props).await.map_err(in_context)?;
        let old = tag_map(&previous);
        let new = tag_map(props);
        self.sync_tags(id, &old, &new).await.map_err(in_context)?;
        let metadata = describe(&self.client, &self.retry, id)
            .await?
            .ok_or_else(|| crate::sdk::common::vanished(TYPE, id))?;
        Ok(Updated {
            sensitive: false,
            physical_id: id.to_string(),
            attributes: attributes_of(&metadata),
            replaced: false,
        })
    }

    async fn remove(&self, id: &str) -> Result<(), ProviderError> {
        self.schedule_deletion(id, DEFAULT_PENDING_DAYS).await
    }

    /// `ScheduleKeyDeletion` with the template's `PendingWindowInDays`; a key pending
    /// deletion already (or gone) is done.
    async fn delete(&self, request: &ResourceRequest) -> Result<Deleted, ProviderError> {
        let id = request.require_physical_id()?;
        let days = int_of(TYPE, &request.properties, "PendingWindowInDays")?
            .unwrap_or(DEFAULT_PENDING_DAYS);
        Deleted::unless_missing(self.schedule_deletion(id, days).await)
            .map_err(|e| e.context(context(request, TYPE)))
    }

    /// A key is imported by its id (or ARN) only: it has no name.
    async fn import_id(&self, request: &ResourceRequest) -> Result<Option<String>, ProviderError> {
        Ok(request.physical_id.clone())
    }

    /// `DescribeKey`: `None` when the key does not exist or is pending deletion.
    async fn find(&self, id: &str) -> Result<Option<Self::Found>, ProviderError> {
        let found = describe(&self.client, &self.retry, id).await?;
        Ok(found
            .filter(|m| !is_deleted(m))
            .map(|metadata| KeyFound { metadata }))
    }

    fn attributes(&self, _id: &str, found: &Self::Found) -> Attributes {
        attributes_of(&found.metadata)
    }

    fn physical_id(_id: String, found: &Self::Found) -> String {
        found.metadata.key_id().to_string()
    }

    /// The policy, the rotation and the tags, read at once.
    async fn state(&self, id: &str, found: Self::Found) -> Result<CurrentState, ProviderError> {
        let (policy, rotation, tags) =
            tokio::join!(self.policy(id), self.rotation(id), self.tags(id));
        let mut tags = tags?;
        tags.remove(MARK_TAG);
        Ok(CurrentState::Found(state_of(
            &found.metadata,
            policy?.as_deref(),
            rotation?,
            tags,
        )))
    }
}

impl KmsKeyProvider {
    async fn schedule_deletion(&self, id: &str, days: i32) -> Result<(), ProviderError> {
        let result = call(&self.retry, "ScheduleKeyDeletion", || {
            self.client
                .schedule_key_deletion()
                .key_id(id)
                .pending_window_in_days(days)
                .send()
        })
        .await;
        match result {
            Ok(_) => Ok(()),
            Err(e) if is_invalid_state(&e) => match self.find(id).await? {
                // Pending deletion already (or gone): done.
                None => Ok(()),
                Some(_) => Err(e),
            },
            Err(e) => Err(e),
        }
    }
}

/// The state of a key, in the template's shape, AWS's defaults left out.
fn state_of(
    metadata: &KeyMetadata,
    policy: Option<&str>,
    rotation: bool,
    tags: HashMap<String, String>,
) -> Properties {
    let mut state = Properties::new();
    if let Some(d) = metadata.description().filter(|d| !d.is_empty()) {
        state.insert("Description".into(), json!(d));
    }
    if let Some(policy) = policy {
        let document: Value = serde_json::from_str(policy).unwrap_or_else(|_| json!(policy));
        if document.get("Id").and_then(Value::as_str) != Some("key-default-1") {
            state.insert("KeyPolicy".into(), document);
        }
    }
    if rotation {
        state.insert("EnableKeyRotation".into(), json!(true));
    }
    if !metadata.enabled() && metadata.key_state() == Some(&KeyState::Disabled) {
        state.insert("Enabled".into(), json!(false));
    }
    if let Some(spec) = metadata.key_spec().filter(|s| s.as_str() != DEFAULT_SPEC) {
        state.insert("KeySpec".into(), json!(spec.as_str()));
    }
    if let Some(usage) = metadata.key_usage().filter(|u| u.as_str() != DEFAULT_USAGE) {
        state.insert("KeyUsage".into(), json!(usage.as_str()));
    }
    if metadata.multi_region() == Some(true) {
        state.insert("MultiRegion".into(), json!(true));
    }
    insert_tags(&mut state, tags);
    state
}

tagging! {
    KmsKeyProvider, ProviderError::from_sdk,
    "UntagResource" => |client, id, keys| {
        client.untag_resource().key_id(id).set_tag_keys(Some(keys))
    },
    "TagResource" => |client, id, tags| {
        client.tag_resource().key_id(id).set_tags(Some(kms_tags(tags)?))
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sdk::common::testing::props;

    #[test]
    fn the_default_policy_names_the_account_root() {
        let policy = default_policy("arn:aws-cn:kms:cn-north-1:123456789012:key/abc");
        let document: Value = serde_json::from_str(&policy).unwrap_or_default();
        assert_eq!(document["Id"], json!("key-default-1"));
        assert_eq!(
            document["Statement"][0]["Principal"]["AWS"],
            json!("arn:aws-cn:iam::123456789012:root")
        );
    }

    #[test]
    fn flags_read_booleans_and_strings() {
        let p = props(json!({"A": true, "B": "false", "C": "True"}));
        assert!(flag(&p, "A", false));
        assert!(!flag(&p, "B", true));
        assert!(flag(&p, "C", false));
        assert!(flag(&p, "Missing", true));
    }

    #[test]
    fn the_state_leaves_defaults_out() {
        let metadata = KeyMetadata::builder()
            .key_id("k")
            .enabled(true)
            .key_spec(KeySpec::SymmetricDefault)
            .key_usage(KeyUsageType::EncryptDecrypt)
            .description("")
            .build()
            .expect("metadata");
        let default = default_policy("arn:aws:kms:us-east-1:123456789012:key/k");
        let state = state_of(&metadata, Some(&default), false, HashMap::new());
        assert!(state.is_empty(), "{state:?}");
    }
}
