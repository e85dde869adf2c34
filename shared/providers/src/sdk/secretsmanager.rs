//! `AWS::SecretsManager::Secret` through the Secrets Manager API.
//!
//! The physical id (what `Ref` returns) is the secret's ARN; the attribute `Id` is the ARN
//! too. Without a `Name` the name is generated ([`crate::names::physical_name`]). Handled:
//! `Name`, `Description`, `KmsKeyId`, `SecretString`, `GenerateSecretString`,
//! `ReplicaRegions` and `Tags` (anything else goes to Cloud Control).
//!
//! The value is never read back, and never put in a state, an attribute, an error or a
//! log: `SecretString` may hold what the engine resolved from a `{{resolve:...}}`
//! reference, and `GenerateSecretString` makes a password (`GetRandomPassword` with the
//! template's rules, then put under `GenerateStringKey` of the `SecretStringTemplate`
//! object when both are given) that only Secrets Manager keeps. Neither set: the secret
//! has no value, as CloudFormation makes it.
//!
//! A create sends a `ClientRequestToken` made of the request's token, so a retried call
//! with the same value is the same version. A name the template gives is looked up
//! (`DescribeSecret`) once before `CreateSecret`: taken, it is someone else's and refused
//! ([`ProviderError::AlreadyExists`]). A generated name holds the hash of the token: a
//! create that finds it taken (`ResourceExistsException`) met its own earlier attempt
//! and adopts that secret (its value is the first attempt's).
//!
//! `Name` cannot change in place ([`ProviderError::NotUpdatable`]). `Description` and
//! `KmsKeyId` change with `UpdateSecret` (dropped: empty, and the account's
//! `aws/secretsmanager` key); a new `SecretString` or `GenerateSecretString` puts a new
//! value (`PutSecretValue`, its token made of the update's token); a replica region
//! dropped or with another key is removed (`RemoveRegionsFromReplication`), a new or
//! changed one added (`ReplicateSecretToRegions`); tags change with
//! `TagResource`/`UntagResource`. The new value is told from the previous properties only
//! (the value in AWS is never read): when those hold the reference rather than the value,
//! an update that changes something else puts the same value again, as a new version.
//! A delete is `DeleteSecret` without recovery, as CloudFormation deletes (a secret with
//! replicas refuses it: they are removed first, and the delete sent again); a secret
//! scheduled for deletion counts as gone.
//!
//! `read_current_state` (one `DescribeSecret`) reports `Name`, `Description`, `KmsKeyId`,
//! `Tags` and `ReplicaRegions` (`Region`, `KmsKeyId`) when there are any.
//!
//! Calls: a create `DescribeSecret` (named), `GetRandomPassword` (generated value) and
//! `CreateSecret`; an update one call per changed part; a delete `DeleteSecret` (with
//! replicas: then `DescribeSecret`, `RemoveRegionsFromReplication`, `DeleteSecret`).
//!
//! Emulator (fakecloud 0.51.0): `GetRandomPassword` follows the length and exclusion rules
//! as AWS does; a secret deleted with a recovery window is still described (with its
//! `DeletedDate`), as on AWS, and counts as gone here; replication is served (replicas
//! listed in `ReplicationStatus`; a replicated secret cannot be deleted, as on AWS). No
//! workaround was needed.

use std::collections::HashMap;

use aws_sdk_secretsmanager::Client;
use aws_sdk_secretsmanager::operation::describe_secret::DescribeSecretOutput;
use aws_sdk_secretsmanager::types::{ReplicaRegionType, Tag};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::common::id_attributes as attributes;
use super::common::{
    SdkResource, Tagging, call, context, insert_tags, int_of, invalid, missing_as_none,
    refuse_taken, sdk_provider, string_of, tag_map, tagging,
};
use crate::error::ProviderError;
use crate::names::{NameRules, given_or_generated};
use crate::provider::{Attributes, Created, CurrentState};
use crate::provider::{Properties, ResourceRequest, Updated};

const HANDLED: &[&str] = &[
    "Name",
    "Description",
    "KmsKeyId",
    "SecretString",
    "GenerateSecretString",
    "ReplicaRegions",
    "Tags",
];

/// Secret names: letters, digits and `/_+=.@-`, kept well under the 512-character limit.
const NAME_RULES: NameRules = NameRules {
    max_len: 256,
    extra: "/_+=.@-",
    lowercase: false,
};

/// The key a secret is encrypted with when the template names none.
const DEFAULT_KEY: &str = "alias/aws/secretsmanager";

sdk_provider! {
    /// The `AWS::SecretsManager::Secret` provider.
    SecretProvider(Client), "AWS::SecretsManager::Secret", HANDLED
}

/// A client request token (32 to 64 characters) for the write `what` of the request
/// with `token`: the same on every retry of one action.
fn request_token(request: &ResourceRequest, what: &str) -> String {
    let mut hasher = Sha256::new();
    for part in [
        request.stack_name.as_str(),
        request.logical_id.as_str(),
        request.token.as_str(),
        what,
    ] {
        hasher.update(part.len().to_le_bytes());
        hasher.update(part.as_bytes());
    }
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn sm_tags(tags: impl IntoIterator<Item = (String, String)>) -> Vec<Tag> {
    tags.into_iter()
        .map(|(k, v)| Tag::builder().key(k).value(v).build())
        .collect()
}

/// The template's `ReplicaRegions`, by region: the key of each (`None`: the default).
fn replicas_of(props: &Properties) -> Result<Vec<(String, Option<String>)>, ProviderError> {
    let Some(list) = props.get("ReplicaRegions") else {
        return Ok(Vec::new());
    };
    let list = list
        .as_array()
        .ok_or_else(|| invalid(TYPE, "ReplicaRegions must be a list"))?;
    list.iter()
        .map(|r| {
            let region = r
                .get("Region")
                .and_then(Value::as_str)
                .ok_or_else(|| invalid(TYPE, "a replica region needs a Region"))?;
            let key = r.get("KmsKeyId").and_then(Value::as_str);
            Ok((region.to_string(), key.map(str::to_string)))
        })
        .collect()
}

fn replica_types(replicas: &[(String, Option<String>)]) -> Vec<ReplicaRegionType> {
    replicas
        .iter()
        .map(|(region, key)| {
            ReplicaRegionType::builder()
                .region(region)
                .set_kms_key_id(key.clone())
                .build()
        })
        .collect()
}

/// True for a Secrets Manager answer that the name is taken.
fn is_taken(error: &ProviderError) -> bool {
    matches!(error, ProviderError::AlreadyExists(_))
        || error.message().contains("ResourceExistsException")
}

/// A boolean rule of `GenerateSecretString`.
fn rule(rules: &Properties, key: &str) -> Option<bool> {
    match rules.get(key)? {
        Value::Bool(b) => Some(*b),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// Where a generated password goes: the `SecretStringTemplate` object with the password
/// under `GenerateStringKey`, or the password alone. The error never quotes a value.
fn place_password(rules: &Properties, password: String) -> Result<String, ProviderError> {
    let template = string_of(rules, "SecretStringTemplate");
    let key = string_of(rules, "GenerateStringKey");
    match (template, key) {
        (None, None) => Ok(password),
        (Some(template), Some(key)) => {
            let mut object: serde_json::Map<String, Value> = serde_json::from_str(&template)
                .map_err(|_| {
                    invalid(
                        TYPE,
                        "GenerateSecretString.SecretStringTemplate must be a JSON object",
                    )
                })?;
            object.insert(key, Value::String(password));
            Ok(Value::Object(object).to_string())
        }
        _ => Err(invalid(
            TYPE,
            "GenerateSecretString needs both SecretStringTemplate and GenerateStringKey, or \
             neither",
        )),
    }
}

impl SecretProvider {
    /// `DescribeSecret`, `None` when no secret has the id (or it is scheduled for deletion).
    async fn describe(&self, id: &str) -> Result<Option<DescribeSecretOutput>, ProviderError> {
        let got = call(&self.retry, "DescribeSecret", || {
            self.client.describe_secret().secret_id(id).send()
        })
        .await;
        Ok(missing_as_none(got)?.filter(|out| out.deleted_date().is_none()))
    }

    /// A password made by `GetRandomPassword` with the template's rules.
    async fn random_password(&self, rules: &Properties) -> Result<String, ProviderError> {
        let length = int_of(TYPE, rules, "PasswordLength")?;
        let out = call(&self.retry, "GetRandomPassword", || {
            self.client
                .get_random_password()
                .set_password_length(length.map(i64::from))
                .set_exclude_characters(string_of(rules, "ExcludeCharacters"))
                .set_exclude_numbers(rule(rules, "ExcludeNumbers"))
                .set_exclude_punctuation(rule(rules, "ExcludePunctuation"))
                .set_exclude_uppercase(rule(rules, "ExcludeUppercase"))
                .set_exclude_lowercase(rule(rules, "ExcludeLowercase"))
                .set_include_space(rule(rules, "IncludeSpace"))
                .set_require_each_included_type(rule(rules, "RequireEachIncludedType"))
                .send()
        })
        .await?;
        out.random_password()
            .map(str::to_string)
            .ok_or_else(|| ProviderError::Other("GetRandomPassword answered no password".into()))
    }

    /// The value the template asks for: its `SecretString`, a generated one, or none.
    async fn value_of(&self, props: &Properties) -> Result<Option<String>, ProviderError> {
        if let Some(value) = props.get("SecretString") {
            return match value {
                Value::String(s) => Ok(Some(s.clone())),
                _ => Err(invalid(TYPE, "SecretString must be a string")),
            };
        }
        match props.get("GenerateSecretString") {
            Some(Value::Object(rules)) => {
                let password = self.random_password(rules).await?;
                place_password(rules, password).map(Some)
            }
            Some(_) => Err(invalid(TYPE, "GenerateSecretString must be an object")),
            None => Ok(None),
        }
    }

    /// `CreateSecret`: the new secret's ARN.
    async fn create_secret(
        &self,
        request: &ResourceRequest,
        name: &str,
        value: Option<String>,
    ) -> Result<String, ProviderError> {
        let props = &request.properties;
        let mut tags: Vec<(String, String)> = tag_map(props).into_iter().collect();
        tags.sort();
        let tags = sm_tags(tags);
        let token = request_token(request, "create");
        let replicas = replica_types(&replicas_of(props)?);
        let out = call(&self.retry, "CreateSecret", || {
            self.client
                .create_secret()
                .name(name)
                .client_request_token(&token)
                .set_description(string_of(props, "Description"))
                .set_kms_key_id(string_of(props, "KmsKeyId"))
                .set_secret_string(value.clone())
                .set_tags((!tags.is_empty()).then(|| tags.clone()))
                .set_add_replica_regions((!replicas.is_empty()).then(|| replicas.clone()))
                .send()
        })
        .await?;
        out.arn()
            .map(str::to_string)
            .ok_or_else(|| ProviderError::Other("CreateSecret answered no ARN".into()))
    }

    /// Puts a new value, as the version of the update `request`.
    async fn put_value(
        &self,
        request: &ResourceRequest,
        arn: &str,
        value: String,
    ) -> Result<(), ProviderError> {
        let token = request_token(request, "value");
        call(&self.retry, "PutSecretValue", || {
            self.client
                .put_secret_value()
                .secret_id(arn)
                .client_request_token(&token)
                .secret_string(value.clone())
                .send()
        })
        .await
        .map(drop)
    }

    /// Brings the replicas from `previous` to `props`: a region gone or with another key
    /// is removed, then a new or changed one is added.
    async fn sync_replicas(
        &self,
        arn: &str,
        previous: &Properties,
        props: &Properties,
    ) -> Result<(), ProviderError> {
        let old = replicas_of(previous)?;
        let new = replicas_of(props)?;
        let removed: Vec<String> = old
            .iter()
            .filter(|r| !new.contains(r))
            .map(|(region, _)| region.clone())
            .collect();
        let added: Vec<(String, Option<String>)> =
            new.iter().filter(|r| !old.contains(r)).cloned().collect();
        if !removed.is_empty() {
            call(&self.retry, "RemoveRegionsFromReplication", || {
                self.client
                    .remove_regions_from_replication()
                    .secret_id(arn)
                    .set_remove_replica_regions(Some(removed.clone()))
                    .send()
            })
            .await?;
        }
        if !added.is_empty() {
            let added = replica_types(&added);
            call(&self.retry, "ReplicateSecretToRegions", || {
                self.client
                    .replicate_secret_to_regions()
                    .secret_id(arn)
                    .set_add_replica_regions(Some(added.clone()))
                    .send()
            })
            .await?;
        }
        Ok(())
    }

    /// `DeleteSecret` without recovery, as CloudFormation deletes.
    async fn delete_secret(&self, arn: &str) -> Result<(), ProviderError> {
        call(&self.retry, "DeleteSecret", || {
            self.client
                .delete_secret()
                .secret_id(arn)
                .force_delete_without_recovery(true)
                .send()
        })
        .await
        .map(drop)
    }

    /// Brings the description and key from `previous` to `props`.
    async fn sync_settings(
        &self,
        arn: &str,
        previous: &Properties,
        props: &Properties,
    ) -> Result<(), ProviderError> {
        let changed = |key: &str| previous.get(key) != props.get(key);
        if !changed("Description") && !changed("KmsKeyId") {
            return Ok(());
        }
        let description =
            changed("Description").then(|| string_of(props, "Description").unwrap_or_default());
        let key = changed("KmsKeyId")
            .then(|| string_of(props, "KmsKeyId").unwrap_or_else(|| DEFAULT_KEY.to_string()));
        call(&self.retry, "UpdateSecret", || {
            self.client
                .update_secret()
                .secret_id(arn)
                .set_description(description.clone())
                .set_kms_key_id(key.clone())
                .send()
        })
        .await
        .map(drop)
    }
}

impl SdkResource for SecretProvider {
    type Found = DescribeSecretOutput;
    const TYPE: &'static str = TYPE;
    const NAME_PROPERTY: &'static str = "Name";
    const NOUN: &'static str = "secret";

    async fn create(&self, request: &ResourceRequest) -> Result<Created, ProviderError> {
        let (name, generated) = given_or_generated(request, "Name", NAME_RULES);
        let in_context = |e: ProviderError| e.context(context(request, TYPE));
        refuse_taken::<Self, _>(&name, generated, self.describe(&name)).await?;
        let value = self
            .value_of(&request.properties)
            .await
            .map_err(in_context)?;
        let arn = match self.create_secret(request, &name, value).await {
            Ok(arn) => arn,
            Err(e) if is_taken(&e) && !generated => return Err(Self::name_taken(&name)),
            // The generated name holds this request's token: the secret is its own.
            Err(e) if is_taken(&e) => match self.describe(&name).await? {
                Some(found) => found.arn().unwrap_or_default().to_string(),
                None => return Err(in_context(e)),
            },
            Err(e) => return Err(in_context(e)),
        };
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
        if previous.get("Name") != props.get("Name") {
            return Err(ProviderError::NotUpdatable(format!(
                "{}: a new Name needs a new secret",
                context(request, TYPE)
            )));
        }
        let in_context = |e: ProviderError| e.context(context(request, TYPE));
        self.sync_settings(arn, &previous, props)
            .await
            .map_err(in_context)?;
        let value_changed = ["SecretString", "GenerateSecretString"]
            .iter()
            .any(|k| previous.get(*k) != props.get(*k));
        if value_changed && let Some(value) = self.value_of(props).await.map_err(in_context)? {
            self.put_value(request, arn, value)
                .await
                .map_err(in_context)?;
        }
        self.sync_replicas(arn, &previous, props)
            .await
            .map_err(in_context)?;
        self.sync_tags(arn, &tag_map(&previous), &tag_map(props))
            .await
            .map_err(in_context)?;
        Ok(Updated {
            sensitive: false,
            physical_id: arn.to_string(),
            attributes: attributes(arn),
            replaced: false,
        })
    }

    /// `DeleteSecret` without recovery. Refused for a secret that has replicas (removed
    /// first, then the delete is sent again) and for one scheduled for deletion (by
    /// someone else, with a recovery window), which counts as gone.
    async fn remove(&self, arn: &str) -> Result<(), ProviderError> {
        let e = match self.delete_secret(arn).await {
            Err(e @ ProviderError::InvalidRequest(_)) => e,
            other => return other,
        };
        let Some(found) = self.describe(arn).await? else {
            return Ok(());
        };
        let regions: Vec<String> = found
            .replication_status()
            .iter()
            .filter_map(|r| r.region().map(str::to_string))
            .collect();
        if regions.is_empty() {
            return Err(e);
        }
        call(&self.retry, "RemoveRegionsFromReplication", || {
            self.client
                .remove_regions_from_replication()
                .secret_id(arn)
                .set_remove_replica_regions(Some(regions.clone()))
                .send()
        })
        .await?;
        self.delete_secret(arn).await
    }

    /// An explicit id may be the ARN or the name; the ARN is what is found.
    async fn import_id(&self, request: &ResourceRequest) -> Result<Option<String>, ProviderError> {
        let Some(id) = request.explicit_or_named("Name") else {
            return Ok(None);
        };
        Ok(self
            .describe(&id)
            .await?
            .and_then(|f| f.arn().map(str::to_string)))
    }

    async fn find(&self, arn: &str) -> Result<Option<Self::Found>, ProviderError> {
        self.describe(arn).await
    }

    fn attributes(&self, arn: &str, _found: &Self::Found) -> Attributes {
        attributes(arn)
    }

    fn physical_id(id: String, found: &Self::Found) -> String {
        found.arn().map(str::to_string).unwrap_or(id)
    }

    async fn state(&self, _arn: &str, found: Self::Found) -> Result<CurrentState, ProviderError> {
        Ok(CurrentState::Found(state_of(&found)))
    }
}

/// The state of a described secret: never its value.
fn state_of(found: &DescribeSecretOutput) -> Properties {
    let mut state = Properties::new();
    if let Some(name) = found.name() {
        state.insert("Name".into(), json!(name));
    }
    if let Some(d) = found.description().filter(|d| !d.is_empty()) {
        state.insert("Description".into(), json!(d));
    }
    if let Some(key) = found.kms_key_id().filter(|k| *k != DEFAULT_KEY) {
        state.insert("KmsKeyId".into(), json!(key));
    }
    let replicas: Vec<Value> = found
        .replication_status()
        .iter()
        .filter_map(|r| {
            let mut replica = json!({"Region": r.region()?});
            if let Some(key) = r.kms_key_id().filter(|k| *k != DEFAULT_KEY) {
                replica["KmsKeyId"] = json!(key);
            }
            Some(replica)
        })
        .collect();
    if !replicas.is_empty() {
        state.insert("ReplicaRegions".into(), Value::Array(replicas));
    }
    let tags: HashMap<String, String> = found
        .tags()
        .iter()
        .filter_map(|t| {
            Some((
                t.key()?.to_string(),
                t.value().unwrap_or_default().to_string(),
            ))
        })
        .collect();
    insert_tags(&mut state, tags);
    state
}

tagging! {
    SecretProvider, ProviderError::from_sdk,
    "UntagResource" => |client, arn, keys| {
        client.untag_resource().secret_id(arn).set_tag_keys(Some(keys))
    },
    "TagResource" => |client, arn, tags| {
        client.tag_resource().secret_id(arn).set_tags(Some(sm_tags(tags)))
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sdk::common::testing::props;

    #[test]
    fn passwords_go_into_the_template() {
        let rules = props(json!({
            "SecretStringTemplate": "{\"username\":\"admin\"}",
            "GenerateStringKey": "password"
        }));
        let placed = place_password(&rules, "pw".into()).unwrap_or_default();
        let object: Value = serde_json::from_str(&placed).unwrap_or_default();
        assert_eq!(object, json!({"username": "admin", "password": "pw"}));
        assert_eq!(
            place_password(&Properties::new(), "pw".into()).unwrap_or_default(),
            "pw"
        );
        let broken = props(json!({"SecretStringTemplate": "nope", "GenerateStringKey": "k"}));
        let err = place_password(&broken, "s3cr3t".into()).expect_err("not an object");
        assert!(!err.message().contains("s3cr3t"));
        let half = props(json!({"GenerateStringKey": "k"}));
        assert!(place_password(&half, "pw".into()).is_err());
    }

    #[test]
    fn replica_regions_parse() {
        let p = props(json!({"ReplicaRegions": [
            {"Region": "eu-west-1", "KmsKeyId": "alias/k"}, {"Region": "us-west-2"}
        ]}));
        let replicas = replicas_of(&p).unwrap_or_default();
        assert_eq!(
            replicas[0],
            ("eu-west-1".to_string(), Some("alias/k".to_string()))
        );
        assert_eq!(replicas[1], ("us-west-2".to_string(), None));
        assert_eq!(replica_types(&replicas)[0].kms_key_id(), Some("alias/k"));
        assert!(replicas_of(&props(json!({"ReplicaRegions": [{}]}))).is_err());
    }

    #[test]
    fn request_tokens_fit_and_differ_per_write() {
        let mut r = ResourceRequest::new("s", "Secret", TYPE, Properties::new());
        r.token = "t".into();
        let create = request_token(&r, "create");
        assert_eq!(create.len(), 64);
        assert_eq!(create, request_token(&r, "create"));
        assert_ne!(create, request_token(&r, "value"));
    }
}
