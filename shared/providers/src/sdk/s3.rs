//! `AWS::S3::Bucket` through the S3 API.
//!
//! The physical id (and `Ref`) is the bucket name; the attributes are `Arn`, `DomainName`,
//! `DualStackDomainName`, `RegionalDomainName` and `WebsiteURL`, all derived from the name
//! and the client's region (no call needed). Without a `BucketName` the name is generated
//! ([`crate::names::physical_name`], lowercase, at most 63 characters, see
//! [`bucket_name_for`]); such a name is ours alone, so a create that finds the bucket
//! already owned by us (a retry after a lost answer) adopts it and applies the
//! configuration again. A taken name the template gives is
//! [`ProviderError::AlreadyExists`].
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

use aws_sdk_s3::Client;
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::types::{
    AbortIncompleteMultipartUpload, BucketLifecycleConfiguration, BucketLocationConstraint,
    BucketVersioningStatus, CreateBucketConfiguration, ExpirationStatus, LifecycleExpiration,
    LifecycleRule, LifecycleRuleFilter, NoncurrentVersionExpiration,
    PublicAccessBlockConfiguration, ServerSideEncryption, ServerSideEncryptionByDefault,
    ServerSideEncryptionConfiguration, ServerSideEncryptionRule, Tag, Tagging,
    VersioningConfiguration,
};
use serde_json::{Map, Value, json};

use crate::error::{HttpResponse, ProviderError};
use crate::names::{NameRules, physical_name};
use crate::provider::{
    Attributes, BoxFuture, Created, CurrentState, Deleted, Imported, Properties, Provider,
    ResourceRequest, Updated,
};
use crate::retry::{RetryPolicy, retry};

/// The resource type this provider handles.
pub const TYPE: &str = "AWS::S3::Bucket";

const HANDLED: &[&str] = &[
    "BucketName",
    "VersioningConfiguration",
    "Tags",
    "PublicAccessBlockConfiguration",
    "BucketEncryption",
    "LifecycleConfiguration",
];

/// The keys of a lifecycle rule this provider handles.
const RULE_KEYS: &[&str] = &[
    "Id",
    "Status",
    "Prefix",
    "ExpirationInDays",
    "ExpiredObjectDeleteMarker",
    "NoncurrentVersionExpirationInDays",
    "NoncurrentVersionExpiration",
    "AbortIncompleteMultipartUpload",
];

/// Bucket names: lowercase letters, digits and `-`, 3 to 63 characters.
const NAME_RULES: NameRules = NameRules {
    max_len: 63,
    extra: "-",
    lowercase: true,
};

/// The `AWS::S3::Bucket` provider.
#[derive(Debug, Clone)]
pub struct S3BucketProvider {
    client: Client,
    retry: RetryPolicy,
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

/// The partition of a region (`aws`, `aws-cn`, `aws-us-gov`).
fn partition(region: &str) -> &'static str {
    if region.starts_with("cn-") {
        "aws-cn"
    } else if region.starts_with("us-gov-") {
        "aws-us-gov"
    } else {
        "aws"
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

/// A boolean property (CloudFormation also accepts `"true"`/`"false"`).
fn bool_of(value: Option<&Value>) -> Option<bool> {
    match value? {
        Value::Bool(b) => Some(*b),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// An integer property (CloudFormation also accepts numeric strings).
fn int_of(value: Option<&Value>) -> Option<i32> {
    match value? {
        Value::Number(n) => n.as_i64().and_then(|n| i32::try_from(n).ok()),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

fn invalid(what: &str) -> ProviderError {
    ProviderError::InvalidRequest(format!("{TYPE}: {what}"))
}

/// The `Key`/`Value` tags of the template, in order.
fn tags_of(props: &Properties) -> Result<Vec<Tag>, ProviderError> {
    let Some(tags) = props.get("Tags") else {
        return Ok(Vec::new());
    };
    let tags = tags
        .as_array()
        .ok_or_else(|| invalid("Tags must be a list of Key/Value objects"))?;
    tags.iter()
        .map(|t| {
            let key = t
                .get("Key")
                .and_then(Value::as_str)
                .ok_or_else(|| invalid("a tag without a Key"))?;
            let value = match t.get("Value") {
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            };
            Tag::builder()
                .key(key)
                .value(value)
                .build()
                .map_err(|e| invalid(&format!("tag {key}: {e}")))
        })
        .collect()
}

fn versioning_of(value: &Value) -> Result<VersioningConfiguration, ProviderError> {
    let status = value
        .get("Status")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("VersioningConfiguration.Status is required"))?;
    Ok(VersioningConfiguration::builder()
        .status(BucketVersioningStatus::from(status))
        .build())
}

fn public_access_block_of(value: &Value) -> PublicAccessBlockConfiguration {
    let flag = |key: &str| bool_of(value.get(key)).unwrap_or(false);
    PublicAccessBlockConfiguration::builder()
        .block_public_acls(flag("BlockPublicAcls"))
        .ignore_public_acls(flag("IgnorePublicAcls"))
        .block_public_policy(flag("BlockPublicPolicy"))
        .restrict_public_buckets(flag("RestrictPublicBuckets"))
        .build()
}

fn encryption_of(value: &Value) -> Result<ServerSideEncryptionConfiguration, ProviderError> {
    let rules = value
        .get("ServerSideEncryptionConfiguration")
        .and_then(Value::as_array)
        .ok_or_else(|| {
            invalid("BucketEncryption.ServerSideEncryptionConfiguration must be a list")
        })?;
    let mut config = ServerSideEncryptionConfiguration::builder();
    for rule in rules {
        let mut built = ServerSideEncryptionRule::builder();
        if let Some(default) = rule.get("ServerSideEncryptionByDefault") {
            let algorithm = default
                .get("SSEAlgorithm")
                .and_then(Value::as_str)
                .ok_or_else(|| invalid("ServerSideEncryptionByDefault.SSEAlgorithm is required"))?;
            let by_default = ServerSideEncryptionByDefault::builder()
                .sse_algorithm(ServerSideEncryption::from(algorithm))
                .set_kms_master_key_id(
                    default
                        .get("KMSMasterKeyID")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                )
                .build()
                .map_err(|e| invalid(&format!("ServerSideEncryptionByDefault: {e}")))?;
            built = built.apply_server_side_encryption_by_default(by_default);
        }
        if let Some(enabled) = bool_of(rule.get("BucketKeyEnabled")) {
            built = built.bucket_key_enabled(enabled);
        }
        config = config.rules(built.build());
    }
    config
        .build()
        .map_err(|e| invalid(&format!("BucketEncryption: {e}")))
}

fn lifecycle_of(value: &Value) -> Result<BucketLifecycleConfiguration, ProviderError> {
    let rules = value
        .get("Rules")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid("LifecycleConfiguration.Rules must be a list"))?;
    let mut config = BucketLifecycleConfiguration::builder();
    for rule in rules {
        let object = rule
            .as_object()
            .ok_or_else(|| invalid("a lifecycle rule must be an object"))?;
        if let Some(key) = object.keys().find(|k| !RULE_KEYS.contains(&k.as_str())) {
            return Err(invalid(&format!(
                "lifecycle rule key {key} is not handled by the SDK provider \
                 (handled: {})",
                RULE_KEYS.join(", ")
            )));
        }
        let status = rule
            .get("Status")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid("a lifecycle rule needs a Status"))?;
        let prefix = rule
            .get("Prefix")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let mut built = LifecycleRule::builder()
            .status(ExpirationStatus::from(status))
            .set_id(rule.get("Id").and_then(Value::as_str).map(str::to_string))
            .filter(LifecycleRuleFilter::builder().prefix(prefix).build());
        let days = int_of(rule.get("ExpirationInDays"));
        let marker = bool_of(rule.get("ExpiredObjectDeleteMarker"));
        if days.is_some() || marker.is_some() {
            built = built.expiration(
                LifecycleExpiration::builder()
                    .set_days(days)
                    .set_expired_object_delete_marker(marker)
                    .build(),
            );
        }
        let noncurrent = rule.get("NoncurrentVersionExpiration");
        let noncurrent_days = int_of(rule.get("NoncurrentVersionExpirationInDays"))
            .or_else(|| int_of(noncurrent.and_then(|n| n.get("NoncurrentDays"))));
        let newer = int_of(noncurrent.and_then(|n| n.get("NewerNoncurrentVersions")));
        if noncurrent_days.is_some() || newer.is_some() {
            built = built.noncurrent_version_expiration(
                NoncurrentVersionExpiration::builder()
                    .set_noncurrent_days(noncurrent_days)
                    .set_newer_noncurrent_versions(newer)
                    .build(),
            );
        }
        if let Some(abort) = rule.get("AbortIncompleteMultipartUpload") {
            built = built.abort_incomplete_multipart_upload(
                AbortIncompleteMultipartUpload::builder()
                    .set_days_after_initiation(int_of(abort.get("DaysAfterInitiation")))
                    .build(),
            );
        }
        config = config.rules(
            built
                .build()
                .map_err(|e| invalid(&format!("lifecycle rule: {e}")))?,
        );
    }
    config
        .build()
        .map_err(|e| invalid(&format!("LifecycleConfiguration: {e}")))
}

/// A lifecycle rule in the template's shape.
fn rule_to_template(rule: &LifecycleRule) -> Value {
    let mut out = Map::new();
    if let Some(id) = rule.id() {
        out.insert("Id".into(), json!(id));
    }
    let prefix = rule
        .filter()
        .and_then(LifecycleRuleFilter::prefix)
        .unwrap_or_default();
    if !prefix.is_empty() {
        out.insert("Prefix".into(), json!(prefix));
    }
    out.insert("Status".into(), json!(rule.status().as_str()));
    if let Some(exp) = rule.expiration() {
        if let Some(days) = exp.days() {
            out.insert("ExpirationInDays".into(), json!(days));
        }
        if let Some(marker) = exp.expired_object_delete_marker() {
            out.insert("ExpiredObjectDeleteMarker".into(), json!(marker));
        }
    }
    if let Some(n) = rule.noncurrent_version_expiration() {
        let mut nv = Map::new();
        if let Some(days) = n.noncurrent_days() {
            nv.insert("NoncurrentDays".into(), json!(days));
        }
        if let Some(newer) = n.newer_noncurrent_versions() {
            nv.insert("NewerNoncurrentVersions".into(), json!(newer));
        }
        out.insert("NoncurrentVersionExpiration".into(), Value::Object(nv));
    }
    if let Some(abort) = rule.abort_incomplete_multipart_upload()
        && let Some(days) = abort.days_after_initiation()
    {
        out.insert(
            "AbortIncompleteMultipartUpload".into(),
            json!({"DaysAfterInitiation": days}),
        );
    }
    Value::Object(out)
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
    /// A provider using `client`, with the default retry policy. (Against an endpoint
    /// without virtual-host names, e.g. a local emulator, `client` must use path-style
    /// addressing.)
    pub fn new(client: Client) -> Self {
        S3BucketProvider {
            client,
            retry: RetryPolicy::default(),
        }
    }

    /// Replaces the retry policy.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    fn region(&self) -> String {
        self.client
            .config()
            .region()
            .map(|r| r.as_ref().to_string())
            .unwrap_or_else(|| "us-east-1".into())
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
        let got = retry(&self.retry, "HeadBucket", || async {
            absent_if(
                "HeadBucket",
                self.client.head_bucket().bucket(name).send().await,
                &["NotFound", "NoSuchBucket"],
            )
        })
        .await?;
        Ok(got.is_some())
    }

    /// Brings each configuration from `previous` to `props` (`previous` empty: a new bucket,
    /// or an adopted one, where every set configuration is written).
    async fn apply(
        &self,
        name: &str,
        previous: &Properties,
        props: &Properties,
        fresh: bool,
    ) -> Result<(), ProviderError> {
        let changed = |key: &str| fresh || previous.get(key) != props.get(key);

        if changed("VersioningConfiguration") {
            let config = match props.get("VersioningConfiguration") {
                Some(v) => Some(versioning_of(v)?),
                // Versioning cannot be switched off, only suspended.
                None if previous.contains_key("VersioningConfiguration") => Some(
                    VersioningConfiguration::builder()
                        .status(BucketVersioningStatus::Suspended)
                        .build(),
                ),
                None => None,
            };
            if let Some(config) = config {
                retry(&self.retry, "PutBucketVersioning", || async {
                    self.client
                        .put_bucket_versioning()
                        .bucket(name)
                        .versioning_configuration(config.clone())
                        .send()
                        .await
                        .map_err(|e| ProviderError::from_sdk("PutBucketVersioning", e))
                })
                .await?;
            }
        }

        if changed("PublicAccessBlockConfiguration") {
            match props.get("PublicAccessBlockConfiguration") {
                Some(v) => {
                    let config = public_access_block_of(v);
                    retry(&self.retry, "PutPublicAccessBlock", || async {
                        self.client
                            .put_public_access_block()
                            .bucket(name)
                            .public_access_block_configuration(config.clone())
                            .send()
                            .await
                            .map_err(|e| ProviderError::from_sdk("PutPublicAccessBlock", e))
                    })
                    .await?;
                }
                None if !fresh => {
                    retry(&self.retry, "DeletePublicAccessBlock", || async {
                        self.client
                            .delete_public_access_block()
                            .bucket(name)
                            .send()
                            .await
                            .map_err(|e| ProviderError::from_sdk("DeletePublicAccessBlock", e))
                    })
                    .await?;
                }
                None => {}
            }
        }

        if changed("BucketEncryption") {
            match props.get("BucketEncryption") {
                Some(v) => {
                    let config = encryption_of(v)?;
                    retry(&self.retry, "PutBucketEncryption", || async {
                        self.client
                            .put_bucket_encryption()
                            .bucket(name)
                            .server_side_encryption_configuration(config.clone())
                            .send()
                            .await
                            .map_err(|e| ProviderError::from_sdk("PutBucketEncryption", e))
                    })
                    .await?;
                }
                None if !fresh => {
                    retry(&self.retry, "DeleteBucketEncryption", || async {
                        self.client
                            .delete_bucket_encryption()
                            .bucket(name)
                            .send()
                            .await
                            .map_err(|e| ProviderError::from_sdk("DeleteBucketEncryption", e))
                    })
                    .await?;
                }
                None => {}
            }
        }

        if changed("LifecycleConfiguration") {
            match props.get("LifecycleConfiguration") {
                Some(v) => {
                    let config = lifecycle_of(v)?;
                    retry(&self.retry, "PutBucketLifecycleConfiguration", || async {
                        self.client
                            .put_bucket_lifecycle_configuration()
                            .bucket(name)
                            .lifecycle_configuration(config.clone())
                            .send()
                            .await
                            .map_err(|e| {
                                ProviderError::from_sdk("PutBucketLifecycleConfiguration", e)
                            })
                    })
                    .await?;
                }
                None if !fresh => {
                    retry(&self.retry, "DeleteBucketLifecycle", || async {
                        self.client
                            .delete_bucket_lifecycle()
                            .bucket(name)
                            .send()
                            .await
                            .map_err(|e| ProviderError::from_sdk("DeleteBucketLifecycle", e))
                    })
                    .await?;
                }
                None => {}
            }
        }

        if changed("Tags") {
            let tags = tags_of(props)?;
            if tags.is_empty() {
                if !fresh {
                    retry(&self.retry, "DeleteBucketTagging", || async {
                        self.client
                            .delete_bucket_tagging()
                            .bucket(name)
                            .send()
                            .await
                            .map_err(|e| ProviderError::from_sdk("DeleteBucketTagging", e))
                    })
                    .await?;
                }
            } else {
                let tagging = Tagging::builder()
                    .set_tag_set(Some(tags))
                    .build()
                    .map_err(|e| invalid(&format!("Tags: {e}")))?;
                retry(&self.retry, "PutBucketTagging", || async {
                    self.client
                        .put_bucket_tagging()
                        .bucket(name)
                        .tagging(tagging.clone())
                        .send()
                        .await
                        .map_err(|e| ProviderError::from_sdk("PutBucketTagging", e))
                })
                .await?;
            }
        }
        Ok(())
    }

    /// The configurations of an existing bucket, in the template's shape.
    async fn read(&self, name: &str) -> Result<Properties, ProviderError> {
        let mut state = Properties::new();
        state.insert("BucketName".into(), json!(name));

        let versioning = retry(&self.retry, "GetBucketVersioning", || async {
            self.client
                .get_bucket_versioning()
                .bucket(name)
                .send()
                .await
                .map_err(|e| ProviderError::from_sdk("GetBucketVersioning", e))
        })
        .await?;
        if let Some(status) = versioning.status() {
            state.insert(
                "VersioningConfiguration".into(),
                json!({"Status": status.as_str()}),
            );
        }

        let block = retry(&self.retry, "GetPublicAccessBlock", || async {
            absent_if(
                "GetPublicAccessBlock",
                self.client
                    .get_public_access_block()
                    .bucket(name)
                    .send()
                    .await,
                &["NoSuchPublicAccessBlockConfiguration"],
            )
        })
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

        let encryption = retry(&self.retry, "GetBucketEncryption", || async {
            absent_if(
                "GetBucketEncryption",
                self.client
                    .get_bucket_encryption()
                    .bucket(name)
                    .send()
                    .await,
                &["ServerSideEncryptionConfigurationNotFoundError"],
            )
        })
        .await?;
        if let Some(config) = encryption
            .as_ref()
            .and_then(|e| e.server_side_encryption_configuration())
        {
            let rules: Vec<Value> = config
                .rules()
                .iter()
                .map(|rule| {
                    let mut out = Map::new();
                    if let Some(d) = rule.apply_server_side_encryption_by_default() {
                        let mut by_default = Map::new();
                        by_default.insert("SSEAlgorithm".into(), json!(d.sse_algorithm().as_str()));
                        if let Some(key) = d.kms_master_key_id() {
                            by_default.insert("KMSMasterKeyID".into(), json!(key));
                        }
                        out.insert(
                            "ServerSideEncryptionByDefault".into(),
                            Value::Object(by_default),
                        );
                    }
                    if rule.bucket_key_enabled() == Some(true) {
                        out.insert("BucketKeyEnabled".into(), json!(true));
                    }
                    Value::Object(out)
                })
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

        let lifecycle = retry(&self.retry, "GetBucketLifecycleConfiguration", || async {
            absent_if(
                "GetBucketLifecycleConfiguration",
                self.client
                    .get_bucket_lifecycle_configuration()
                    .bucket(name)
                    .send()
                    .await,
                &["NoSuchLifecycleConfiguration"],
            )
        })
        .await?;
        if let Some(lifecycle) = lifecycle
            && !lifecycle.rules().is_empty()
        {
            let rules: Vec<Value> = lifecycle.rules().iter().map(rule_to_template).collect();
            state.insert("LifecycleConfiguration".into(), json!({"Rules": rules}));
        }

        let tagging = retry(&self.retry, "GetBucketTagging", || async {
            absent_if(
                "GetBucketTagging",
                self.client.get_bucket_tagging().bucket(name).send().await,
                &["NoSuchTagSet", "NoSuchTagSetError"],
            )
        })
        .await?;
        let mut tags: Vec<(String, String)> = tagging
            .as_ref()
            .map(|t| {
                t.tag_set()
                    .iter()
                    .filter(|t| !t.key().starts_with("aws:"))
                    .map(|t| (t.key().to_string(), t.value().to_string()))
                    .collect()
            })
            .unwrap_or_default();
        tags.sort();
        if !tags.is_empty() {
            let list = tags
                .into_iter()
                .map(|(k, v)| json!({"Key": k, "Value": v}))
                .collect();
            state.insert("Tags".into(), Value::Array(list));
        }
        Ok(state)
    }
}

impl Provider for S3BucketProvider {
    fn name(&self) -> &str {
        "sdk:AWS::S3::Bucket"
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
            let context = || format!("{} ({TYPE})", request.logical_id);
            let (name, generated) = match request.string_property("BucketName") {
                Some(name) => {
                    check_bucket_name(name).map_err(|e| e.context(context()))?;
                    (name.to_string(), false)
                }
                None => (
                    bucket_name_for(&request.stack_name, &request.logical_id, &request.token),
                    true,
                ),
            };
            // Refuse a malformed configuration before the bucket exists.
            tags_of(props).map_err(|e| e.context(context()))?;
            if let Some(v) = props.get("VersioningConfiguration") {
                versioning_of(v).map_err(|e| e.context(context()))?;
            }
            if let Some(v) = props.get("BucketEncryption") {
                encryption_of(v).map_err(|e| e.context(context()))?;
            }
            if let Some(v) = props.get("LifecycleConfiguration") {
                lifecycle_of(v).map_err(|e| e.context(context()))?;
            }
            let made = self
                .create_bucket(&name)
                .await
                .map_err(|e| e.context(context()))?;
            if !made && !generated {
                return Err(ProviderError::AlreadyExists(format!(
                    "{}: bucket {name} exists already",
                    context()
                )));
            }
            self.apply(&name, &Properties::new(), props, true)
                .await
                .map_err(|e| e.context(context()))?;
            Ok(Created {
                attributes: attributes(&name, &self.region()),
                physical_id: name,
            })
        })
    }

    fn update<'a>(
        &'a self,
        request: &'a ResourceRequest,
    ) -> BoxFuture<'a, Result<Updated, ProviderError>> {
        Box::pin(async move {
            let name = request.require_physical_id()?;
            if let Some(wanted) = request.string_property("BucketName")
                && wanted != name
            {
                return Err(ProviderError::NotUpdatable(format!(
                    "{} ({TYPE}): BucketName {name} -> {wanted} needs a new bucket",
                    request.logical_id
                )));
            }
            let previous = request.previous_properties.clone().unwrap_or_default();
            self.apply(name, &previous, &request.properties, false)
                .await
                .map_err(|e| e.context(format!("{} ({TYPE})", request.logical_id)))?;
            Ok(Updated {
                physical_id: name.to_string(),
                attributes: attributes(name, &self.region()),
                replaced: false,
            })
        })
    }

    fn delete<'a>(
        &'a self,
        request: &'a ResourceRequest,
    ) -> BoxFuture<'a, Result<Deleted, ProviderError>> {
        Box::pin(async move {
            let name = request.require_physical_id()?;
            let result = retry(&self.retry, "DeleteBucket", || async {
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
            .await;
            match result {
                Ok(()) | Err(ProviderError::NotFound(_)) => Ok(Deleted::Done),
                Err(e) => Err(e.context(format!("{} ({TYPE})", request.logical_id))),
            }
        })
    }

    fn import<'a>(
        &'a self,
        request: &'a ResourceRequest,
    ) -> BoxFuture<'a, Result<Imported, ProviderError>> {
        Box::pin(async move {
            let Some(name) = request.explicit_or_named("BucketName") else {
                return Ok(Imported::NotDeployedYet);
            };
            Ok(if self.exists(&name).await? {
                Imported::Found {
                    attributes: attributes(&name, &self.region()),
                    physical_id: name,
                }
            } else {
                Imported::NotDeployedYet
            })
        })
    }

    fn read_current_state<'a>(
        &'a self,
        request: &'a ResourceRequest,
    ) -> BoxFuture<'a, Result<CurrentState, ProviderError>> {
        Box::pin(async move {
            let name = request.require_physical_id()?;
            if !self.exists(name).await? {
                return Ok(CurrentState::NotFound);
            }
            match self.read(name).await {
                Ok(state) => Ok(CurrentState::Found(state)),
                // Deleted between the two calls.
                Err(ProviderError::NotFound(_)) if !self.exists(name).await? => {
                    Ok(CurrentState::NotFound)
                }
                Err(e) => Err(e),
            }
        })
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

    #[test]
    fn lifecycle_round_trips_and_refuses_unknown_keys() {
        let template = json!({"Rules": [{
            "Id": "expire",
            "Prefix": "logs/",
            "Status": "Enabled",
            "ExpirationInDays": 30,
            "NoncurrentVersionExpiration": {"NoncurrentDays": 7},
            "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}
        }]});
        let config = lifecycle_of(&template).expect("valid");
        let back: Vec<Value> = config.rules().iter().map(rule_to_template).collect();
        assert_eq!(json!({"Rules": back}), template);
        let bad = json!({"Rules": [{"Status": "Enabled", "Transitions": []}]});
        assert!(matches!(
            lifecycle_of(&bad),
            Err(ProviderError::InvalidRequest(_))
        ));
    }
}
