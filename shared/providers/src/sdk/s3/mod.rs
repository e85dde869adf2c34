//! `AWS::S3::Bucket` through the S3 API.
//!
//! The physical id (and `Ref`) is the bucket name; the attributes are `Arn`, `DomainName`,
//! `DualStackDomainName`, `RegionalDomainName` and `WebsiteURL`, all derived from the name
//! and the client's region (no call needed). Without a `BucketName` the name is generated
//! ([`crate::names::physical_name`], lowercase, at most 63 characters, see
//! [`bucket_name_for`]); such a name is ours alone, so a create that finds the bucket
//! already owned by us (a retry after a lost answer) adopts it and applies the
//! configuration again. A name the template gives is never taken over: `CreateBucket` in
//! us-east-1 answers success for a bucket we own already, so the name is looked up
//! (`HeadBucket`, see `S3BucketProvider::taken`) once before it, and a taken one is
//! [`ProviderError::AlreadyExists`] (`SdkResource::name_taken`; see `refuse_taken`), as is a
//! `CreateBucket` that answers `BucketAlreadyOwnedByYou` or `BucketAlreadyExists`.
//!
//! Handled properties: `BucketName`, `VersioningConfiguration`, `Tags`,
//! `PublicAccessBlockConfiguration`, `BucketEncryption` and `LifecycleConfiguration`
//! (rules with `Id`, `Status`, `Prefix`, `ExpirationInDays`, `ExpiredObjectDeleteMarker`,
//! `NoncurrentVersionExpirationInDays`, `NoncurrentVersionExpiration` and
//! `AbortIncompleteMultipartUpload`; a rule with any other key is refused rather than
//! silently dropped). Every configuration is changed in place; only a new `BucketName`
//! needs a new bucket ([`ProviderError::NotUpdatable`]).
//!
//! Delete does not empty the bucket (CloudFormation does not either): a non-empty bucket
//! fails with a [`ProviderError::InvalidRequest`] that says so.
//!
//! `read_current_state` reports `BucketName`; `VersioningConfiguration` once versioning was
//! ever set (`Enabled` or `Suspended`); `Tags` (a `Key`/`Value` list sorted by key, `aws:`
//! keys left out) when there are any; `PublicAccessBlockConfiguration` (all four flags)
//! when one is set; `BucketEncryption` unless it is AWS's default (one `AES256` rule
//! without a bucket key), with `BucketKeyEnabled` only when true; and
//! `LifecycleConfiguration` when there are rules.

use std::future::Future;

use aws_sdk_s3::Client;
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::types::{
    BucketLocationConstraint, BucketVersioningStatus, CreateBucketConfiguration, Tag, Tagging,
    VersioningConfiguration,
};
use serde_json::{Value, json};
use stackflow_core::partition::partition;

use super::common::{
    self, SdkResource, call, context, insert_tags, keep_name, refuse_taken, sdk_provider, sdk_tags,
    tag_pairs,
};
use crate::error::{HttpResponse, ProviderError};
use crate::names::{NameRules, physical_name};
use crate::provider::{Attributes, Created, CurrentState};
use crate::provider::{Properties, ResourceRequest, Updated};
use crate::retry::retry;

mod config;

use config::{
    encryption_of, encryption_rule_to_template, lifecycle_of, public_access_block_of,
    rule_to_template, versioning_of,
};

const HANDLED: &[&str] = &[
    "BucketName",
    "VersioningConfiguration",
    "Tags",
    "PublicAccessBlockConfiguration",
    "BucketEncryption",
    "LifecycleConfiguration",
];

/// Bucket names: lowercase letters, digits and `-`, 3 to 63 characters.
const NAME_RULES: NameRules = NameRules {
    max_len: 63,
    extra: "-",
    lowercase: true,
};

sdk_provider! {
    /// The `AWS::S3::Bucket` provider. (Against an endpoint without virtual-host names, e.g.
    /// a local emulator, its client must use path-style addressing.)
    S3BucketProvider(Client), "AWS::S3::Bucket", HANDLED
}

/// The generated name of a bucket: [`physical_name`] under S3's rules (lowercase letters,
/// digits and `-`, at most 63 characters, ending with the hash). S3 also refuses a name
/// that starts with `-`, `xn--` or `sthree-`: such a start is cut off.
pub fn bucket_name_for(stack: &str, logical_id: &str, token: &str) -> String {
    let name = physical_name(stack, logical_id, token, "", NAME_RULES);
    let mut name = name.trim_start_matches('-').to_string();
    while name.starts_with("xn--") || name.starts_with("sthree-") {
        name = name
            .split_once('-')
            .map(|(_, rest)| rest.trim_start_matches('-').to_string())
            .unwrap_or_default();
    }
    name
}

/// Checks a template-given bucket name against S3's rules (before any call).
fn check_bucket_name(name: &str) -> Result<(), ProviderError> {
    let ok_chars = name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
    let ends_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if (3..=63).contains(&name.len())
        && ok_chars
        && ends_ok(name.chars().next())
        && ends_ok(name.chars().last())
        && !name.contains("..")
    {
        Ok(())
    } else {
        Err(ProviderError::InvalidRequest(format!(
            "{TYPE}: BucketName {name:?} is not a valid bucket name (3-63 characters of \
             a-z, 0-9, '-' and '.', starting and ending with a letter or digit)"
        )))
    }
}

/// The `Fn::GetAtt` values of bucket `name` in `region`.
fn attributes(name: &str, region: &str) -> Attributes {
    let suffix = if region.starts_with("cn-") {
        "amazonaws.com.cn"
    } else {
        "amazonaws.com"
    };
    let mut a = Attributes::new();
    a.insert(
        "Arn".into(),
        json!(format!("arn:{}:s3:::{name}", partition(region))),
    );
    a.insert("DomainName".into(), json!(format!("{name}.s3.{suffix}")));
    a.insert(
        "DualStackDomainName".into(),
        json!(format!("{name}.s3.dualstack.{region}.{suffix}")),
    );
    a.insert(
        "RegionalDomainName".into(),
        json!(format!("{name}.s3.{region}.{suffix}")),
    );
    a.insert(
        "WebsiteURL".into(),
        json!(format!("http://{name}.s3-website-{region}.{suffix}")),
    );
    a
}

fn invalid(what: &str) -> ProviderError {
    common::invalid(TYPE, what)
}

/// The `Key`/`Value` tags of the template, in order.
fn tags_of(props: &Properties) -> Result<Vec<Tag>, ProviderError> {
    sdk_tags(TYPE, tag_pairs(TYPE, props)?, |k, v| {
        Tag::builder().key(k).value(v).build()
    })
}

/// A service error whose code is one of `absent` is `Ok(None)`; any other is classified.
fn absent_if<T, E>(
    what: &str,
    result: Result<T, SdkError<E, HttpResponse>>,
    absent: &[&str],
) -> Result<Option<T>, ProviderError>
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    match result {
        Ok(v) => Ok(Some(v)),
        Err(e)
            if e.as_service_error()
                .and_then(ProvideErrorMetadata::code)
                .is_some_and(|c| absent.contains(&c)) =>
        {
            Ok(None)
        }
        Err(e) => Err(ProviderError::from_sdk(what, e)),
    }
}

impl S3BucketProvider {
    fn region(&self) -> String {
        self.client
            .config()
            .region()
            .map(|r| r.as_ref().to_string())
            .unwrap_or_else(|| "us-east-1".into())
    }

    /// One call (`send`) whose service errors with a code in `absent` answer `None`.
    async fn optional<T, E, F, Fut>(
        &self,
        what: &str,
        absent: &[&str],
        mut send: F,
    ) -> Result<Option<T>, ProviderError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, SdkError<E, HttpResponse>>>,
        E: ProvideErrorMetadata + std::error::Error + 'static,
    {
        retry(&self.retry, what, || {
            let sent = send();
            async move { absent_if(what, sent.await, absent) }
        })
        .await
    }

    /// `CreateBucket`: `true` when made now, `false` when it was already ours.
    async fn create_bucket(&self, name: &str) -> Result<bool, ProviderError> {
        let region = self.region();
        let configuration = (region != "us-east-1").then(|| {
            CreateBucketConfiguration::builder()
                .location_constraint(BucketLocationConstraint::from(region.as_str()))
                .build()
        });
        retry(&self.retry, "CreateBucket", || async {
            match self
                .client
                .create_bucket()
                .bucket(name)
                .set_create_bucket_configuration(configuration.clone())
                .send()
                .await
            {
                Ok(_) => Ok(true),
                Err(e)
                    if e.as_service_error()
                        .is_some_and(|s| s.is_bucket_already_owned_by_you()) =>
                {
                    Ok(false)
                }
                Err(e) => Err(ProviderError::from_sdk("CreateBucket", e)),
            }
        })
        .await
    }

    /// `HeadBucket`: whether the bucket exists (and is reachable).
    async fn exists(&self, name: &str) -> Result<bool, ProviderError> {
        let got = self
            .optional("HeadBucket", &["NotFound", "NoSuchBucket"], || {
                self.client.head_bucket().bucket(name).send()
            })
            .await?;
        Ok(got.is_some())
    }

    /// `HeadBucket` before a create: `Some` when the name is taken (S3 names are global),
    /// by a bucket of ours here, one of ours in another region (`301`) or one we may not
    /// see, another account's (`403`).
    async fn taken(&self, name: &str) -> Result<Option<()>, ProviderError> {
        retry(&self.retry, "HeadBucket", || async {
            let answer = self.client.head_bucket().bucket(name).send().await;
            let refused = answer.as_ref().err().and_then(SdkError::raw_response);
            if refused.is_some_and(|r| matches!(r.status().as_u16(), 301 | 403)) {
                return Ok(Some(()));
            }
            absent_if("HeadBucket", answer, &["NotFound", "NoSuchBucket"]).map(|a| a.map(drop))
        })
        .await
    }

    /// Puts the configuration `key` of `props` (`put` with its value) or, when the template
    /// has none, deletes it (`delete`; nothing to delete on a `fresh` bucket).
    async fn put_or_delete<'p, A, B, FP, FD>(
        &self,
        props: &'p Properties,
        key: &str,
        fresh: bool,
        put: impl FnOnce(&'p Value) -> FP,
        delete: impl FnOnce() -> FD,
    ) -> Result<(), ProviderError>
    where
        FP: Future<Output = Result<A, ProviderError>>,
        FD: Future<Output = Result<B, ProviderError>>,
    {
        match props.get(key) {
            Some(value) => put(value).await.map(|_| ()),
            None if !fresh => delete().await.map(|_| ()),
            None => Ok(()),
        }
    }

    /// Versioning from `previous` to `props` (it cannot be switched off, only suspended).
    async fn apply_versioning(
        &self,
        name: &str,
        previous: &Properties,
        props: &Properties,
    ) -> Result<(), ProviderError> {
        let config = match props.get("VersioningConfiguration") {
            Some(v) => versioning_of(v)?,
            None if previous.contains_key("VersioningConfiguration") => {
                VersioningConfiguration::builder()
                    .status(BucketVersioningStatus::Suspended)
                    .build()
            }
            None => return Ok(()),
        };
        call(&self.retry, "PutBucketVersioning", || {
            self.client
                .put_bucket_versioning()
                .bucket(name)
                .versioning_configuration(config.clone())
                .send()
        })
        .await
        .map(|_| ())
    }

    /// The tags of `props`, put, or deleted when there are none (nothing on a `fresh`
    /// bucket).
    async fn apply_tags(
        &self,
        name: &str,
        props: &Properties,
        fresh: bool,
    ) -> Result<(), ProviderError> {
        let tags = tags_of(props)?;
        if tags.is_empty() {
            if !fresh {
                call(&self.retry, "DeleteBucketTagging", || {
                    self.client.delete_bucket_tagging().bucket(name).send()
                })
                .await?;
            }
            return Ok(());
        }
        let tagging = Tagging::builder()
            .set_tag_set(Some(tags))
            .build()
            .map_err(|e| invalid(&format!("Tags: {e}")))?;
        call(&self.retry, "PutBucketTagging", || {
            self.client
                .put_bucket_tagging()
                .bucket(name)
                .tagging(tagging.clone())
                .send()
        })
        .await
        .map(|_| ())
    }

    /// Brings each configuration from `previous` to `props` (`fresh`: a new bucket, or an
    /// adopted one, where every set configuration is written).
    async fn apply(
        &self,
        name: &str,
        previous: &Properties,
        props: &Properties,
        fresh: bool,
    ) -> Result<(), ProviderError> {
        let changed = |key: &str| fresh || previous.get(key) != props.get(key);
        if changed("VersioningConfiguration") {
            self.apply_versioning(name, previous, props).await?;
        }
        if changed("PublicAccessBlockConfiguration") {
            let put = |v| {
                let config = public_access_block_of(v);
                call(&self.retry, "PutPublicAccessBlock", move || {
                    self.client
                        .put_public_access_block()
                        .bucket(name)
                        .public_access_block_configuration(config.clone())
                        .send()
                })
            };
            let delete = || {
                call(&self.retry, "DeletePublicAccessBlock", || {
                    self.client.delete_public_access_block().bucket(name).send()
                })
            };
            let key = "PublicAccessBlockConfiguration";
            self.put_or_delete(props, key, fresh, put, delete).await?;
        }
        if changed("BucketEncryption") {
            let put = |v| async move {
                let config = encryption_of(v)?;
                call(&self.retry, "PutBucketEncryption", || {
                    self.client
                        .put_bucket_encryption()
                        .bucket(name)
                        .server_side_encryption_configuration(config.clone())
                        .send()
                })
                .await
            };
            let delete = || {
                call(&self.retry, "DeleteBucketEncryption", || {
                    self.client.delete_bucket_encryption().bucket(name).send()
                })
            };
            self.put_or_delete(props, "BucketEncryption", fresh, put, delete)
                .await?;
        }
        if changed("LifecycleConfiguration") {
            let put = |v| async move {
                let config = lifecycle_of(v)?;
                call(&self.retry, "PutBucketLifecycleConfiguration", || {
                    self.client
                        .put_bucket_lifecycle_configuration()
                        .bucket(name)
                        .lifecycle_configuration(config.clone())
                        .send()
                })
                .await
            };
            let delete = || {
                call(&self.retry, "DeleteBucketLifecycle", || {
                    self.client.delete_bucket_lifecycle().bucket(name).send()
                })
            };
            self.put_or_delete(props, "LifecycleConfiguration", fresh, put, delete)
                .await?;
        }
        if changed("Tags") {
            self.apply_tags(name, props, fresh).await?;
        }
        Ok(())
    }

    /// The public access block and the encryption of the bucket, into `state`.
    async fn read_protection(
        &self,
        name: &str,
        state: &mut Properties,
    ) -> Result<(), ProviderError> {
        let block = self
            .optional(
                "GetPublicAccessBlock",
                &["NoSuchPublicAccessBlockConfiguration"],
                || self.client.get_public_access_block().bucket(name).send(),
            )
            .await?;
        if let Some(block) = block
            .as_ref()
            .and_then(|b| b.public_access_block_configuration())
        {
            state.insert(
                "PublicAccessBlockConfiguration".into(),
                json!({
                    "BlockPublicAcls": block.block_public_acls().unwrap_or(false),
                    "BlockPublicPolicy": block.block_public_policy().unwrap_or(false),
                    "IgnorePublicAcls": block.ignore_public_acls().unwrap_or(false),
                    "RestrictPublicBuckets": block.restrict_public_buckets().unwrap_or(false),
                }),
            );
        }
        let encryption = self
            .optional(
                "GetBucketEncryption",
                &["ServerSideEncryptionConfigurationNotFoundError"],
                || self.client.get_bucket_encryption().bucket(name).send(),
            )
            .await?;
        if let Some(config) = encryption
            .as_ref()
            .and_then(|e| e.server_side_encryption_configuration())
        {
            let rules: Vec<Value> = config
                .rules()
                .iter()
                .map(encryption_rule_to_template)
                .collect();
            let aws_default =
                json!([{"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]);
            if !rules.is_empty() && Value::Array(rules.clone()) != aws_default {
                state.insert(
                    "BucketEncryption".into(),
                    json!({"ServerSideEncryptionConfiguration": rules}),
                );
            }
        }
        Ok(())
    }

    /// The configurations of an existing bucket, in the template's shape.
    async fn configuration(&self, name: &str) -> Result<Properties, ProviderError> {
        let mut state = Properties::new();
        state.insert("BucketName".into(), json!(name));

        let versioning = call(&self.retry, "GetBucketVersioning", || {
            self.client.get_bucket_versioning().bucket(name).send()
        })
        .await?;
        if let Some(status) = versioning.status() {
            state.insert(
                "VersioningConfiguration".into(),
                json!({"Status": status.as_str()}),
            );
        }

        self.read_protection(name, &mut state).await?;

        let lifecycle = self
            .optional(
                "GetBucketLifecycleConfiguration",
                &["NoSuchLifecycleConfiguration"],
                || {
                    self.client
                        .get_bucket_lifecycle_configuration()
                        .bucket(name)
                        .send()
                },
            )
            .await?;
        if let Some(lifecycle) = lifecycle
            && !lifecycle.rules().is_empty()
        {
            let rules: Vec<Value> = lifecycle.rules().iter().map(rule_to_template).collect();
            state.insert("LifecycleConfiguration".into(), json!({"Rules": rules}));
        }

        let tagging = self
            .optional(
                "GetBucketTagging",
                &["NoSuchTagSet", "NoSuchTagSetError"],
                || self.client.get_bucket_tagging().bucket(name).send(),
            )
            .await?;
        let tags = tagging.as_ref().map(|t| t.tag_set()).unwrap_or_default();
        insert_tags(
            &mut state,
            tags.iter()
                .filter(|t| !t.key().starts_with("aws:"))
                .map(|t| (t.key().to_string(), t.value().to_string())),
        );
        Ok(state)
    }
}

impl SdkResource for S3BucketProvider {
    type Found = ();
    const TYPE: &'static str = TYPE;
    const NAME_PROPERTY: &'static str = "BucketName";
    const NOUN: &'static str = "bucket";

    async fn create(&self, request: &ResourceRequest) -> Result<Created, ProviderError> {
        let props = &request.properties;
        let in_context = |e: ProviderError| e.context(context(request, TYPE));
        let (name, generated) = match request.string_property("BucketName") {
            Some(name) => {
                check_bucket_name(name).map_err(in_context)?;
                (name.to_string(), false)
            }
            None => (
                bucket_name_for(&request.stack_name, &request.logical_id, &request.token),
                true,
            ),
        };
        // Refuse a malformed configuration before the bucket exists.
        tags_of(props).map_err(in_context)?;
        if let Some(v) = props.get("VersioningConfiguration") {
            versioning_of(v).map_err(in_context)?;
        }
        if let Some(v) = props.get("BucketEncryption") {
            encryption_of(v).map_err(in_context)?;
        }
        if let Some(v) = props.get("LifecycleConfiguration") {
            lifecycle_of(v).map_err(in_context)?;
        }
        refuse_taken::<Self, _>(&name, generated, self.taken(&name)).await?;
        // `false`: the bucket was ours already, which a generated name's retry adopts.
        match self.create_bucket(&name).await {
            Ok(false) | Err(ProviderError::AlreadyExists(_)) if !generated => {
                return Err(Self::name_taken(&name));
            }
            made => made.map(drop).map_err(in_context)?,
        }
        self.apply(&name, &Properties::new(), props, true)
            .await
            .map_err(in_context)?;
        Ok(Created {
            sensitive: false,
            attributes: attributes(&name, &self.region()),
            physical_id: name,
        })
    }

    async fn update(&self, request: &ResourceRequest) -> Result<Updated, ProviderError> {
        let name = request.require_physical_id()?;
        keep_name(request, TYPE, "BucketName", name, "bucket")?;
        let previous = request.previous_properties.clone().unwrap_or_default();
        self.apply(name, &previous, &request.properties, false)
            .await
            .map_err(|e| e.context(context(request, TYPE)))?;
        Ok(Updated {
            sensitive: false,
            physical_id: name.to_string(),
            attributes: attributes(name, &self.region()),
            replaced: false,
        })
    }

    async fn remove(&self, name: &str) -> Result<(), ProviderError> {
        retry(&self.retry, "DeleteBucket", || async {
            match self.client.delete_bucket().bucket(name).send().await {
                Ok(_) => Ok(()),
                Err(e)
                    if e.as_service_error().and_then(ProvideErrorMetadata::code)
                        == Some("BucketNotEmpty") =>
                {
                    Err(ProviderError::InvalidRequest(format!(
                        "DeleteBucket: bucket {name} is not empty; stackflow does not \
                         delete objects (neither does CloudFormation): empty it (every \
                         object version) or give the resource DeletionPolicy: Retain"
                    )))
                }
                Err(e) => Err(ProviderError::from_sdk("DeleteBucket", e)),
            }
        })
        .await
    }

    /// `HeadBucket`: `Some` when the bucket exists.
    async fn find(&self, name: &str) -> Result<Option<()>, ProviderError> {
        Ok(self.exists(name).await?.then_some(()))
    }

    fn attributes(&self, name: &str, _found: &()) -> Attributes {
        attributes(name, &self.region())
    }

    async fn state(&self, name: &str, _found: ()) -> Result<CurrentState, ProviderError> {
        match self.configuration(name).await {
            Ok(state) => Ok(CurrentState::Found(state)),
            // Deleted between the two calls.
            Err(ProviderError::NotFound(_)) if !self.exists(name).await? => {
                Ok(CurrentState::NotFound)
            }
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_names_follow_s3_rules() {
        let long = "My_Stack.With-Many-Characters-".repeat(5);
        for (stack, logical) in [
            ("MyStack", "Bucket"),
            (
                long.as_str(),
                "AVeryLongLogicalIdForTheBucketResource0123456789",
            ),
            ("xn--stack", "B"),
            ("-", "-"),
        ] {
            let name = bucket_name_for(stack, logical, "token");
            assert!(check_bucket_name(&name).is_ok(), "{name}");
            assert!(!name.starts_with("xn--"), "{name}");
            assert_eq!(name, bucket_name_for(stack, logical, "token"));
        }
        assert!(bucket_name_for("MyStack", "Bucket", "t").starts_with("mystack-bucket-"));
    }

    #[test]
    fn bucket_name_checks() {
        assert!(check_bucket_name("ab").is_err());
        assert!(check_bucket_name("Upper").is_err());
        assert!(check_bucket_name("a..b").is_err());
        assert!(check_bucket_name("-ab").is_err());
        assert!(check_bucket_name("my.bucket-1").is_ok());
    }

    #[test]
    fn attributes_from_name_and_region() {
        let a = attributes("b1", "eu-west-1");
        assert_eq!(a.get("Arn"), Some(&json!("arn:aws:s3:::b1")));
        assert_eq!(
            a.get("RegionalDomainName"),
            Some(&json!("b1.s3.eu-west-1.amazonaws.com"))
        );
        assert_eq!(a.get("DomainName"), Some(&json!("b1.s3.amazonaws.com")));
    }
}
