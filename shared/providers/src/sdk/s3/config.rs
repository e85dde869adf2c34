//! The bucket configurations between the template's shape and S3's types: versioning,
//! public access block, encryption and lifecycle rules.

use aws_sdk_s3::types::{
    AbortIncompleteMultipartUpload, BucketLifecycleConfiguration, BucketVersioningStatus,
    ExpirationStatus, LifecycleExpiration, LifecycleRule, LifecycleRuleFilter,
    NoncurrentVersionExpiration, PublicAccessBlockConfiguration, ServerSideEncryption,
    ServerSideEncryptionByDefault, ServerSideEncryptionConfiguration, ServerSideEncryptionRule,
    VersioningConfiguration,
};
use serde_json::{Map, Value, json};

use super::invalid;
use crate::error::ProviderError;

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

pub(super) fn versioning_of(value: &Value) -> Result<VersioningConfiguration, ProviderError> {
    let status = value
        .get("Status")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("VersioningConfiguration.Status is required"))?;
    Ok(VersioningConfiguration::builder()
        .status(BucketVersioningStatus::from(status))
        .build())
}

pub(super) fn public_access_block_of(value: &Value) -> PublicAccessBlockConfiguration {
    let flag = |key: &str| bool_of(value.get(key)).unwrap_or(false);
    PublicAccessBlockConfiguration::builder()
        .block_public_acls(flag("BlockPublicAcls"))
        .ignore_public_acls(flag("IgnorePublicAcls"))
        .block_public_policy(flag("BlockPublicPolicy"))
        .restrict_public_buckets(flag("RestrictPublicBuckets"))
        .build()
}

pub(super) fn encryption_of(
    value: &Value,
) -> Result<ServerSideEncryptionConfiguration, ProviderError> {
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

pub(super) fn lifecycle_of(value: &Value) -> Result<BucketLifecycleConfiguration, ProviderError> {
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
pub(super) fn rule_to_template(rule: &LifecycleRule) -> Value {
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

/// An encryption rule in the template's shape.
pub(super) fn encryption_rule_to_template(rule: &ServerSideEncryptionRule) -> Value {
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
