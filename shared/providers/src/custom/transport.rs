//! The custom resource protocol's AWS calls: sending a request to its handler (Lambda
//! `Invoke` or SNS `Publish`) and the response object in S3 (the presigned `ResponseURL`,
//! `GetObject`).

use std::time::Duration;

use aws_sdk_lambda::primitives::Blob;
use aws_sdk_lambda::types::InvocationType;
use aws_sdk_s3::presigning::PresigningConfig;
use serde_json::Value;

use super::protocol::ServiceTarget;
use crate::error::ProviderError;
use crate::retry::{RetryPolicy, retry};

/// `$client` (of SDK crate `$sdk`) itself when it is configured for `$region`, else a
/// copy configured for `$region`.
macro_rules! in_region {
    ($client:expr, $sdk:ident, $region:expr) => {{
        let config = $client.config();
        if config.region().map(|r| r.as_ref()) == Some($region) {
            $client.clone()
        } else {
            let region = $sdk::config::Region::new($region.to_string());
            $sdk::Client::from_conf(config.to_builder().region(region).build())
        }
    }};
}

/// The clients and the response bucket of the custom resource provider.
#[derive(Debug, Clone)]
pub(super) struct Transport {
    pub lambda: aws_sdk_lambda::Client,
    pub sns: aws_sdk_sns::Client,
    pub s3: aws_sdk_s3::Client,
    pub bucket: String,
    pub retry: RetryPolicy,
}

impl Transport {
    /// `GetObject` of the response: `None` while it does not exist.
    pub async fn read_response(&self, key: &str) -> Result<Option<Vec<u8>>, ProviderError> {
        const WHAT: &str = "GetObject (custom resource response)";
        retry(&self.retry, WHAT, || async {
            let answer = self
                .s3
                .get_object()
                .bucket(&self.bucket)
                .key(key)
                .send()
                .await;
            let output = match answer {
                Ok(output) => output,
                Err(e) => {
                    let missing_key = e.as_service_error().is_some_and(|s| s.is_no_such_key());
                    return match ProviderError::from_sdk(WHAT, e) {
                        _ if missing_key => Ok(None),
                        // NoSuchBucket: a setup error, not a missing resource.
                        ProviderError::NotFound(m) if m.contains("NoSuchBucket") => {
                            Err(ProviderError::InvalidRequest(format!(
                                "the custom resource response bucket {}: {m}",
                                self.bucket
                            )))
                        }
                        ProviderError::NotFound(_) => Ok(None),
                        other => Err(other),
                    };
                }
            };
            let bytes = output.body.collect().await.map_err(|e| {
                ProviderError::Transient(format!(
                    "reading the custom resource response s3://{}/{key}: {e}",
                    self.bucket
                ))
            })?;
            Ok(Some(bytes.into_bytes().to_vec()))
        })
        .await
    }

    /// Replaces the response at `key` by `body`, encrypted at rest: a `NoEcho` answer
    /// is kept with its `Data` masked once it has been read.
    pub async fn overwrite_response(&self, key: &str, body: Vec<u8>) -> Result<(), ProviderError> {
        const WHAT: &str = "PutObject (custom resource response, masked)";
        retry(&self.retry, WHAT, || async {
            self.s3
                .put_object()
                .bucket(&self.bucket)
                .key(key)
                .server_side_encryption(aws_sdk_s3::types::ServerSideEncryption::Aes256)
                .body(body.clone().into())
                .send()
                .await
                .map_err(|e| ProviderError::from_sdk(WHAT, e))?;
            Ok(())
        })
        .await
    }

    /// A presigned `PUT` URL for `key`, valid for `timeout` plus a margin (at most seven
    /// days, SigV4's limit).
    pub async fn presign(&self, key: &str, timeout: Duration) -> Result<String, ProviderError> {
        let expires = (timeout + Duration::from_secs(15 * 60)).min(Duration::from_secs(7 * 86400));
        let config = PresigningConfig::expires_in(expires).map_err(|e| {
            ProviderError::InvalidRequest(format!("presigning the ResponseURL: {e}"))
        })?;
        let presigned = self
            .s3
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .presigned(config)
            .await
            .map_err(|e| ProviderError::from_sdk("presigning the ResponseURL", e))?;
        Ok(presigned.uri().to_string())
    }

    /// Sends `event` to `target`.
    pub async fn send(&self, target: &ServiceTarget, event: &Value) -> Result<(), ProviderError> {
        let body = event.to_string();
        let arn = target.arn();
        let result = match target {
            ServiceTarget::Lambda(_) => {
                let client = in_region!(self.lambda, aws_sdk_lambda, arn.region.as_str());
                retry(&self.retry, "Invoke", || async {
                    client
                        .invoke()
                        .function_name(&arn.text)
                        .invocation_type(InvocationType::Event)
                        .payload(Blob::new(body.as_bytes()))
                        .send()
                        .await
                        .map(|_| ())
                        .map_err(|e| ProviderError::from_sdk("Invoke", e))
                })
                .await
            }
            ServiceTarget::Sns(_) => {
                let client = in_region!(self.sns, aws_sdk_sns, arn.region.as_str());
                retry(&self.retry, "Publish", || async {
                    client
                        .publish()
                        .topic_arn(&arn.text)
                        .message(&body)
                        .send()
                        .await
                        .map(|_| ())
                        .map_err(|e| ProviderError::from_sdk("Publish", e))
                })
                .await
            }
        };
        result.map_err(|e| match e {
            // A missing handler is not a missing resource (a delete must not "succeed").
            ProviderError::NotFound(m) => ProviderError::InvalidRequest(format!(
                "the ServiceToken {} does not exist: {m}",
                arn.text
            )),
            other => other,
        })
    }
}
