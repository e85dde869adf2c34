//! `AWS::S3::BucketPolicy` through the S3 API (`PutBucketPolicy`, `GetBucketPolicy`,
//! `DeleteBucketPolicy`).
//!
//! The physical id (what `Ref` returns) is the bucket name; the type has no `Fn::GetAtt`
//! attributes. `Bucket` cannot change in place ([`ProviderError::NotUpdatable`]: the
//! engine writes the policy on the new bucket and deletes the old one's); a new
//! `PolicyDocument` is written with `PutBucketPolicy`.
//!
//! A bucket holds one policy, and the bucket names it: a create that finds the bucket
//! holding a policy (whoever wrote it) is [`ProviderError::AlreadyExists`]
//! (`SdkResource::name_taken`), as a named resource's create is for the other providers.
//! A replayed create of the stack's own is refused the same way, and the engine then takes
//! it back through `import` (by the template's `Bucket`), as it does for named resources.
//!
//! `read_current_state` reports `Bucket` and `PolicyDocument` (an object, or the JSON text
//! when the template gives text); `NotFound` when the bucket or its policy is gone.
//!
//! Calls: create 2 (`GetBucketPolicy`, `PutBucketPolicy`); update 1; delete 1.
//!
//! Emulator (fakecloud 0.51.0): a bucket without a policy answers `NoSuchBucketPolicy`
//! (HTTP 404), a missing bucket `NoSuchBucket`, both "not found" here; `DeleteBucketPolicy`
//! of a bucket without a policy succeeds, as on AWS.

use aws_sdk_s3::Client;
use serde_json::json;

use super::common::{SdkResource, call, context, invalid, missing_as_none, sdk_provider};
use super::policy_json::{document_text, in_template_shape};
use crate::error::ProviderError;
use crate::provider::{Attributes, Created, CurrentState};
use crate::provider::{Properties, ResourceRequest, Updated};

const HANDLED: &[&str] = &["Bucket", "PolicyDocument"];

sdk_provider! {
    /// The `AWS::S3::BucketPolicy` provider.
    S3BucketPolicyProvider(Client), "AWS::S3::BucketPolicy", HANDLED
}

/// The template's `Bucket` and the policy text.
fn bucket_and_text(request: &ResourceRequest) -> Result<(String, String), ProviderError> {
    let bucket = request
        .string_property("Bucket")
        .ok_or_else(|| invalid(TYPE, "Bucket is required"))?;
    let document = request
        .properties
        .get("PolicyDocument")
        .ok_or_else(|| invalid(TYPE, "PolicyDocument is required"))?;
    Ok((bucket.to_string(), document_text(document)))
}

impl S3BucketPolicyProvider {
    async fn put(&self, bucket: &str, text: &str) -> Result<(), ProviderError> {
        call(&self.retry, "PutBucketPolicy", || {
            self.client
                .put_bucket_policy()
                .bucket(bucket)
                .policy(text)
                .send()
        })
        .await
        .map(drop)
    }
}

impl SdkResource for S3BucketPolicyProvider {
    /// The policy text.
    type Found = String;
    const TYPE: &'static str = TYPE;
    const NAME_PROPERTY: &'static str = "Bucket";
    const NOUN: &'static str = "bucket policy";

    async fn create(&self, request: &ResourceRequest) -> Result<Created, ProviderError> {
        let (bucket, text) = bucket_and_text(request)?;
        if self.find(&bucket).await?.is_some() {
            return Err(Self::name_taken(&bucket));
        }
        self.put(&bucket, &text)
            .await
            .map_err(|e| e.context(context(request, TYPE)))?;
        Ok(Created {
            sensitive: false,
            attributes: Attributes::new(),
            physical_id: bucket,
        })
    }

    async fn update(&self, request: &ResourceRequest) -> Result<Updated, ProviderError> {
        let id = request.require_physical_id()?;
        let (bucket, text) = bucket_and_text(request)?;
        if bucket != id {
            return Err(ProviderError::NotUpdatable(format!(
                "{}: Bucket {id} -> {bucket} needs a new bucket policy",
                context(request, TYPE)
            )));
        }
        self.put(&bucket, &text)
            .await
            .map_err(|e| e.context(context(request, TYPE)))?;
        Ok(Updated {
            sensitive: false,
            physical_id: bucket,
            attributes: Attributes::new(),
            replaced: false,
        })
    }

    async fn remove(&self, bucket: &str) -> Result<(), ProviderError> {
        call(&self.retry, "DeleteBucketPolicy", || {
            self.client.delete_bucket_policy().bucket(bucket).send()
        })
        .await
        .map(drop)
    }

    /// `GetBucketPolicy`, or `None` when the bucket or its policy does not exist.
    async fn find(&self, bucket: &str) -> Result<Option<Self::Found>, ProviderError> {
        let got = call(&self.retry, "GetBucketPolicy", || {
            self.client.get_bucket_policy().bucket(bucket).send()
        })
        .await;
        Ok(missing_as_none(got)?.and_then(|out| out.policy().map(str::to_string)))
    }

    fn attributes(&self, _bucket: &str, _found: &Self::Found) -> Attributes {
        Attributes::new()
    }

    async fn read(&self, request: &ResourceRequest) -> Result<CurrentState, ProviderError> {
        let bucket = request.require_physical_id()?;
        Ok(match self.find(bucket).await? {
            Some(text) => {
                let shape = request.properties.get("PolicyDocument");
                CurrentState::Found(state_of(bucket, &text, shape))
            }
            None => CurrentState::NotFound,
        })
    }

    async fn state(&self, bucket: &str, text: Self::Found) -> Result<CurrentState, ProviderError> {
        Ok(CurrentState::Found(state_of(bucket, &text, None)))
    }
}

fn state_of(bucket: &str, text: &str, shape: Option<&serde_json::Value>) -> Properties {
    let mut state = Properties::new();
    state.insert("Bucket".into(), json!(bucket));
    state.insert("PolicyDocument".into(), in_template_shape(text, shape));
    state
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sdk::common::testing::props;

    #[test]
    fn bucket_and_document_are_required() {
        let r = ResourceRequest::new("s", "P", TYPE, props(json!({"Bucket": "b"})));
        assert!(bucket_and_text(&r).is_err());
        let r = ResourceRequest::new(
            "s",
            "P",
            TYPE,
            props(json!({"Bucket": "b", "PolicyDocument": {"Version": "2012-10-17"}})),
        );
        let (bucket, text) = bucket_and_text(&r).expect("valid");
        assert_eq!(
            (bucket.as_str(), text.as_str()),
            ("b", r#"{"Version":"2012-10-17"}"#)
        );
        assert_eq!(
            state_of("b", &text, None).get("PolicyDocument"),
            Some(&json!({"Version": "2012-10-17"}))
        );
    }
}
