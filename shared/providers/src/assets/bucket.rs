//! stackflow's own bucket in an account and region, `stackflow-<account>-<region>`
//! ([`stackflow_core::assets::stackflow_bucket_name`]): the engine's bucket (custom
//! resource responses, remote deploy inputs and artifacts) and, in a region that opted
//! into it, the asset storage (under `assets/`).
//!
//! [`ensure_bucket`] makes it as `stackflow bootstrap` wants it, and is idempotent: the
//! bucket (created when missing), default encryption (SSE-S3 unless some encryption is
//! already set), every public access blocked, lifecycle rules for what goes stale, and a
//! tag saying where the region's assets go ([`ASSET_STORAGE_TAG`]).

use aws_sdk_s3::error::ProvideErrorMetadata as _;
use aws_sdk_s3::types::{
    AbortIncompleteMultipartUpload, BucketLifecycleConfiguration, BucketLocationConstraint,
    CreateBucketConfiguration, ExpirationStatus, LifecycleExpiration, LifecycleRule,
    LifecycleRuleFilter, NoncurrentVersionExpiration, PublicAccessBlockConfiguration,
    ServerSideEncryption, ServerSideEncryptionByDefault, ServerSideEncryptionConfiguration,
    ServerSideEncryptionRule, Tag, Tagging,
};

/// The bucket tag that records where a region's assets are published: `stackflow`
/// (stackflow's bucket, references rewritten) or `cdk` (the CDK bootstrap bucket).
pub const ASSET_STORAGE_TAG: &str = "stackflow:asset-storage";

/// Where a region's file assets go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AssetStorage {
    /// stackflow's own bucket, with the templates' references rewritten to it.
    Stackflow,
    /// The CDK bootstrap bucket the asset manifest names.
    CdkBootstrap,
}

impl AssetStorage {
    fn tag_value(self) -> &'static str {
        match self {
            AssetStorage::Stackflow => "stackflow",
            AssetStorage::CdkBootstrap => "cdk",
        }
    }
}

/// `(rule id, key prefix, days)`: objects under the prefix expire after that many days.
pub const EXPIRING_PREFIXES: &[(&str, &str, i32)] = &[
    (
        "stackflow-custom-resource-responses",
        crate::custom::DEFAULT_KEY_PREFIX,
        1,
    ),
    ("stackflow-deploy-inputs", "inputs/", 1),
    ("stackflow-deploy-artifacts", "deploys/", 30),
];

/// The rule for the whole bucket: unfinished multipart uploads and old versions go.
const HOUSEKEEPING_RULE: &str = "stackflow-housekeeping";

/// What [`ensure_bucket`] did, step by step, in words.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BucketReport {
    /// The bucket.
    pub bucket: String,
    /// True when this call created it.
    pub created: bool,
    /// What was changed (empty when everything was already as wanted).
    pub changed: Vec<String>,
}

pub use crate::error::BucketError;

fn failed<E: std::error::Error + 'static, R: std::fmt::Debug + 'static>(
    what: &'static str,
    bucket: &str,
    e: &aws_sdk_s3::error::SdkError<E, R>,
) -> BucketError {
    BucketError {
        what,
        bucket: bucket.to_string(),
        message: crate::error::error_chain(e),
    }
}

/// A request of `what` that could not be built (a builder's missing field).
fn unbuilt(what: &'static str, bucket: &str, e: &aws_sdk_s3::error::BuildError) -> BucketError {
    BucketError {
        what,
        bucket: bucket.to_string(),
        message: e.to_string(),
    }
}

/// Where `bucket`'s tag says the region's assets go: `None` when the bucket does not
/// exist or has no such tag (the region is not bootstrapped for assets).
pub async fn asset_storage(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
) -> Result<Option<AssetStorage>, BucketError> {
    match s3.get_bucket_tagging().bucket(bucket).send().await {
        Ok(out) => Ok(out
            .tag_set()
            .iter()
            .find(|t| t.key() == ASSET_STORAGE_TAG)
            .map(|t| match t.value() {
                "stackflow" => AssetStorage::Stackflow,
                _ => AssetStorage::CdkBootstrap,
            })),
        Err(e) if matches!(e.code(), Some("NoSuchBucket" | "NoSuchTagSet")) => Ok(None),
        Err(e) if e.raw_response().is_some_and(|r| r.status().as_u16() == 404) => Ok(None),
        Err(e) => Err(failed("reading the tags", bucket, &e)),
    }
}

/// Makes `bucket` in `region` as stackflow wants it (see the module documentation); with
/// `storage`, tags it with where the region's assets go.
pub async fn ensure_bucket(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    region: &str,
    storage: Option<AssetStorage>,
) -> Result<BucketReport, BucketError> {
    let mut report = BucketReport {
        bucket: bucket.to_string(),
        ..BucketReport::default()
    };
    report.created = create_if_missing(s3, bucket, region).await?;
    if ensure_encryption(s3, bucket).await? {
        report.changed.push("default encryption SSE-S3".into());
    }
    if ensure_public_access_block(s3, bucket).await? {
        report.changed.push("public access blocked".into());
    }
    if ensure_lifecycle(s3, bucket).await? {
        report.changed.push(lifecycle_summary());
    }
    if let Some(storage) = storage
        && ensure_tag(s3, bucket, storage).await?
    {
        report.changed.push(format!(
            "tagged {ASSET_STORAGE_TAG}={}",
            storage.tag_value()
        ));
    }
    Ok(report)
}

/// The lifecycle rules in words.
pub fn lifecycle_summary() -> String {
    let rules: Vec<String> = EXPIRING_PREFIXES
        .iter()
        .map(|(_, prefix, days)| format!("{prefix} after {days} day(s)"))
        .collect();
    format!(
        "lifecycle: {} expire; unfinished uploads after 1 day, old versions after 30 days",
        rules.join(", ")
    )
}

async fn create_if_missing(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    region: &str,
) -> Result<bool, BucketError> {
    match s3.head_bucket().bucket(bucket).send().await {
        Ok(_) => return Ok(false),
        Err(e) if e.raw_response().is_some_and(|r| r.status().as_u16() == 404) => {}
        Err(e) => return Err(failed("looking for", bucket, &e)),
    }
    let mut create = s3.create_bucket().bucket(bucket);
    if region != "us-east-1" {
        create = create.create_bucket_configuration(
            CreateBucketConfiguration::builder()
                .location_constraint(BucketLocationConstraint::from(region))
                .build(),
        );
    }
    match create.send().await {
        Ok(_) => Ok(true),
        Err(e) if e.code() == Some("BucketAlreadyOwnedByYou") => Ok(false),
        Err(e) => Err(failed("creating", bucket, &e)),
    }
}

async fn ensure_encryption(s3: &aws_sdk_s3::Client, bucket: &str) -> Result<bool, BucketError> {
    if let Ok(out) = s3.get_bucket_encryption().bucket(bucket).send().await
        && out
            .server_side_encryption_configuration()
            .is_some_and(|c| !c.rules().is_empty())
    {
        return Ok(false);
    }
    let by_default = ServerSideEncryptionByDefault::builder()
        .sse_algorithm(ServerSideEncryption::Aes256)
        .build()
        .map_err(|e| unbuilt("setting the encryption", bucket, &e))?;
    let config = ServerSideEncryptionConfiguration::builder()
        .rules(
            ServerSideEncryptionRule::builder()
                .apply_server_side_encryption_by_default(by_default)
                .build(),
        )
        .build()
        .map_err(|e| unbuilt("setting the encryption", bucket, &e))?;
    s3.put_bucket_encryption()
        .bucket(bucket)
        .server_side_encryption_configuration(config)
        .send()
        .await
        .map_err(|e| failed("setting the encryption", bucket, &e))?;
    Ok(true)
}

async fn ensure_public_access_block(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
) -> Result<bool, BucketError> {
    if let Ok(out) = s3.get_public_access_block().bucket(bucket).send().await
        && let Some(c) = out.public_access_block_configuration()
        && [
            c.block_public_acls(),
            c.ignore_public_acls(),
            c.block_public_policy(),
            c.restrict_public_buckets(),
        ]
        .iter()
        .all(|b| *b == Some(true))
    {
        return Ok(false);
    }
    s3.put_public_access_block()
        .bucket(bucket)
        .public_access_block_configuration(
            PublicAccessBlockConfiguration::builder()
                .block_public_acls(true)
                .ignore_public_acls(true)
                .block_public_policy(true)
                .restrict_public_buckets(true)
                .build(),
        )
        .send()
        .await
        .map_err(|e| failed("blocking public access", bucket, &e))?;
    Ok(true)
}

/// stackflow's lifecycle rules.
pub fn lifecycle_rules() -> Vec<LifecycleRule> {
    let mut rules: Vec<LifecycleRule> = EXPIRING_PREFIXES
        .iter()
        .map(|(id, prefix, days)| {
            LifecycleRule::builder()
                .id(*id)
                .status(ExpirationStatus::Enabled)
                .filter(LifecycleRuleFilter::builder().prefix(*prefix).build())
                .expiration(LifecycleExpiration::builder().days(*days).build())
                .build()
                .expect("id, status and filter are set")
        })
        .collect();
    rules.push(
        LifecycleRule::builder()
            .id(HOUSEKEEPING_RULE)
            .status(ExpirationStatus::Enabled)
            .filter(LifecycleRuleFilter::builder().prefix("").build())
            .abort_incomplete_multipart_upload(
                AbortIncompleteMultipartUpload::builder()
                    .days_after_initiation(1)
                    .build(),
            )
            .noncurrent_version_expiration(
                NoncurrentVersionExpiration::builder()
                    .noncurrent_days(30)
                    .build(),
            )
            .build()
            .expect("id, status and filter are set"),
    );
    rules
}

/// Puts stackflow's rules beside the bucket's other rules, when one is missing.
async fn ensure_lifecycle(s3: &aws_sdk_s3::Client, bucket: &str) -> Result<bool, BucketError> {
    let ours = lifecycle_rules();
    let existing: Vec<LifecycleRule> = s3
        .get_bucket_lifecycle_configuration()
        .bucket(bucket)
        .send()
        .await
        .map(|out| out.rules().to_vec())
        .unwrap_or_default();
    let has = |id: Option<&str>| existing.iter().any(|r| r.id() == id);
    if ours.iter().all(|r| has(r.id())) {
        return Ok(false);
    }
    let ids: Vec<Option<&str>> = ours.iter().map(LifecycleRule::id).collect();
    let mut rules: Vec<LifecycleRule> = existing
        .iter()
        .filter(|r| !ids.contains(&r.id()))
        .cloned()
        .collect();
    rules.extend(ours);
    let config = BucketLifecycleConfiguration::builder()
        .set_rules(Some(rules))
        .build()
        .map_err(|e| unbuilt("setting the lifecycle rules", bucket, &e))?;
    s3.put_bucket_lifecycle_configuration()
        .bucket(bucket)
        .lifecycle_configuration(config)
        .send()
        .await
        .map_err(|e| failed("setting the lifecycle rules", bucket, &e))?;
    Ok(true)
}

async fn ensure_tag(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    storage: AssetStorage,
) -> Result<bool, BucketError> {
    let existing: Vec<Tag> = match s3.get_bucket_tagging().bucket(bucket).send().await {
        Ok(out) => out.tag_set().to_vec(),
        Err(_) => Vec::new(),
    };
    let value = storage.tag_value();
    if existing
        .iter()
        .any(|t| t.key() == ASSET_STORAGE_TAG && t.value() == value)
    {
        return Ok(false);
    }
    let mut tags: Vec<Tag> = existing
        .into_iter()
        .filter(|t| t.key() != ASSET_STORAGE_TAG)
        .collect();
    tags.push(
        Tag::builder()
            .key(ASSET_STORAGE_TAG)
            .value(value)
            .build()
            .map_err(|e| unbuilt("tagging", bucket, &e))?,
    );
    let tagging = Tagging::builder()
        .set_tag_set(Some(tags))
        .build()
        .map_err(|e| unbuilt("tagging", bucket, &e))?;
    s3.put_bucket_tagging()
        .bucket(bucket)
        .tagging(tagging)
        .send()
        .await
        .map_err(|e| failed("tagging", bucket, &e))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rules_expire_responses_and_inputs_in_a_day_and_nothing_of_assets() {
        let rules = lifecycle_rules();
        let prefix = |r: &LifecycleRule| {
            r.filter()
                .and_then(|f| f.prefix())
                .unwrap_or_default()
                .to_string()
        };
        let days: Vec<(String, Option<i32>)> = rules
            .iter()
            .map(|r| (prefix(r), r.expiration().and_then(|e| e.days())))
            .collect();
        assert_eq!(
            days,
            [
                ("custom-resource-responses/".to_string(), Some(1)),
                ("inputs/".to_string(), Some(1)),
                ("deploys/".to_string(), Some(30)),
                (String::new(), None),
            ]
        );
        assert!(!days.iter().any(|(p, _)| p.starts_with("assets")));
        assert!(lifecycle_summary().contains("inputs/ after 1 day(s)"));
    }
}
