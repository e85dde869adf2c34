//! `AWS::KMS::Alias` through the KMS API.
//!
//! The physical id (what `Ref` returns) is the alias name (`alias/...`); the type has no
//! `Fn::GetAtt` attributes. Handled: `AliasName` (required; a new name needs a new alias,
//! [`ProviderError::NotUpdatable`]) and `TargetKeyId` (a key id or key ARN; changed in
//! place with `UpdateAlias`).
//!
//! An alias always has the template's name, so a create looks it up (`DescribeKey` of the
//! alias name) once before `CreateAlias`: taken, it is someone else's and refused
//! ([`ProviderError::AlreadyExists`]); free, a `CreateAlias` that then finds it taken met
//! its own earlier attempt (an answer lost), which is adopted when it points at the
//! template's key.
//!
//! `read_current_state` reports `AliasName` and `TargetKeyId`, the key's ARN when the
//! template gives an ARN, else its id.
//!
//! Calls: a create `DescribeKey` and `CreateAlias`; an update `UpdateAlias` (none when the
//! target stays); a delete `DeleteAlias`.
//!
//! Emulator (fakecloud 0.51.0): `DescribeKey` of an alias name behaves as on AWS; no
//! workaround was needed.

use aws_sdk_kms::Client;
use aws_sdk_kms::types::KeyMetadata;
use serde_json::json;

use super::describe;
use crate::error::ProviderError;
use crate::provider::{Attributes, Created, CurrentState};
use crate::provider::{Properties, ResourceRequest, Updated};
use crate::sdk::common::{
    SdkResource, call, context, invalid, keep_name, refuse_taken, sdk_provider,
};

const HANDLED: &[&str] = &["AliasName", "TargetKeyId"];

sdk_provider! {
    /// The `AWS::KMS::Alias` provider.
    KmsAliasProvider(Client), "AWS::KMS::Alias", HANDLED
}

/// True when the key `metadata` is the one the template's `target` (an id or an ARN) names.
fn is_target(metadata: &KeyMetadata, target: &str) -> bool {
    metadata.key_id() == target || metadata.arn() == Some(target)
}

/// The alias's name and target from the template.
fn name_and_target(request: &ResourceRequest) -> Result<(String, String), ProviderError> {
    let name = request
        .string_property("AliasName")
        .ok_or_else(|| invalid(TYPE, "AliasName is required"))?;
    if !name.starts_with("alias/") {
        return Err(invalid(
            TYPE,
            &format!("AliasName must begin with alias/, got {name}"),
        ));
    }
    let target = request
        .string_property("TargetKeyId")
        .ok_or_else(|| invalid(TYPE, "TargetKeyId is required"))?;
    Ok((name.to_string(), target.to_string()))
}

impl SdkResource for KmsAliasProvider {
    type Found = KeyMetadata;
    const TYPE: &'static str = TYPE;
    const NAME_PROPERTY: &'static str = "AliasName";
    const NOUN: &'static str = "alias";

    async fn create(&self, request: &ResourceRequest) -> Result<Created, ProviderError> {
        let (name, target) = name_and_target(request)?;
        refuse_taken::<Self, _>(&name, false, self.find(&name)).await?;
        let made = call(&self.retry, "CreateAlias", || {
            self.client
                .create_alias()
                .alias_name(&name)
                .target_key_id(&target)
                .send()
        })
        .await;
        match made {
            Ok(_) => {}
            // Free before the call, taken now: this create's own earlier attempt.
            Err(ProviderError::AlreadyExists(_)) => match self.find(&name).await? {
                Some(metadata) if is_target(&metadata, &target) => {}
                _ => return Err(Self::name_taken(&name)),
            },
            Err(e) => return Err(e.context(context(request, TYPE))),
        }
        Ok(Created {
            sensitive: false,
            attributes: Attributes::new(),
            physical_id: name,
        })
    }

    async fn update(&self, request: &ResourceRequest) -> Result<Updated, ProviderError> {
        let name = request.require_physical_id()?;
        keep_name(request, TYPE, "AliasName", name, "alias")?;
        let (_, target) = name_and_target(request)?;
        let previous = request.previous_properties.clone().unwrap_or_default();
        if previous.get("TargetKeyId") != request.properties.get("TargetKeyId") {
            call(&self.retry, "UpdateAlias", || {
                self.client
                    .update_alias()
                    .alias_name(name)
                    .target_key_id(&target)
                    .send()
            })
            .await
            .map_err(|e| e.context(context(request, TYPE)))?;
        }
        Ok(Updated {
            sensitive: false,
            physical_id: name.to_string(),
            attributes: Attributes::new(),
            replaced: false,
        })
    }

    async fn remove(&self, name: &str) -> Result<(), ProviderError> {
        call(&self.retry, "DeleteAlias", || {
            self.client.delete_alias().alias_name(name).send()
        })
        .await
        .map(drop)
    }

    /// `DescribeKey` of the alias name: the key it points at, `None` when no alias has it.
    async fn find(&self, name: &str) -> Result<Option<Self::Found>, ProviderError> {
        describe(&self.client, &self.retry, name).await
    }

    fn attributes(&self, _name: &str, _found: &Self::Found) -> Attributes {
        Attributes::new()
    }

    /// The state: the name, and the key in the shape the template gives it.
    async fn read(&self, request: &ResourceRequest) -> Result<CurrentState, ProviderError> {
        let name = request.require_physical_id()?;
        let arn_wanted = request
            .string_property("TargetKeyId")
            .is_some_and(|t| t.starts_with("arn:"));
        Ok(match self.find(name).await? {
            Some(metadata) => CurrentState::Found(state_of(name, &metadata, arn_wanted)),
            None => CurrentState::NotFound,
        })
    }

    async fn state(&self, name: &str, found: Self::Found) -> Result<CurrentState, ProviderError> {
        Ok(CurrentState::Found(state_of(name, &found, true)))
    }
}

/// The state of alias `name` pointing at the key `metadata` (its ARN when `arn`).
fn state_of(name: &str, metadata: &KeyMetadata, arn: bool) -> Properties {
    let mut state = Properties::new();
    state.insert("AliasName".into(), json!(name));
    let target = match metadata.arn() {
        Some(key_arn) if arn => key_arn,
        _ => metadata.key_id(),
    };
    state.insert("TargetKeyId".into(), json!(target));
    state
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sdk::common::testing::props;

    #[test]
    fn targets_are_ids_or_arns() {
        let metadata = KeyMetadata::builder()
            .key_id("k1")
            .arn("arn:aws:kms:us-east-1:123456789012:key/k1")
            .build()
            .expect("metadata");
        assert!(is_target(&metadata, "k1"));
        assert!(is_target(
            &metadata,
            "arn:aws:kms:us-east-1:123456789012:key/k1"
        ));
        assert!(!is_target(&metadata, "k2"));
        assert_eq!(
            state_of("alias/a", &metadata, false)["TargetKeyId"],
            json!("k1")
        );
        let r = ResourceRequest::new(
            "s",
            "A",
            TYPE,
            props(json!({"AliasName": "a", "TargetKeyId": "k"})),
        );
        assert!(name_and_target(&r).is_err());
    }
}
