//! The digest key of a DynamoDB store, in the engine's bucket (see [`crate::digest`]):
//! one object, encrypted at rest, made once with a conditional put so that two tasks
//! that start at once agree on it.

use aws_sdk_s3::Client;
use aws_sdk_s3::types::ServerSideEncryption;
use stackflow_core::secrets::DigestKey;

/// The key's object in the engine's bucket.
pub const KEY_OBJECT: &str = "stackflow/digest.key";

/// Why the digest key could not be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DigestKeyError {
    /// A call on its object failed.
    #[error("{call} {object}: {message}")]
    Call {
        call: &'static str,
        object: String,
        message: String,
    },
    /// The object holds something else.
    #[error("{0} is not a digest key (64 hex digits)")]
    NotAKey(String),
    /// It was neither read nor made, three times.
    #[error("{0}: could not be read or made")]
    Unsettled(String),
}

/// The key in `bucket`, made when there is none.
pub async fn bucket_key(s3: &Client, bucket: &str) -> Result<DigestKey, DigestKeyError> {
    let call = |call: &'static str, object: &str, message: String| DigestKeyError::Call {
        call,
        object: object.to_string(),
        message,
    };
    let shown = format!("s3://{bucket}/{KEY_OBJECT}");
    for _ in 0..3 {
        match s3.get_object().bucket(bucket).key(KEY_OBJECT).send().await {
            Ok(out) => {
                let bytes = out
                    .body
                    .collect()
                    .await
                    .map_err(|e| call("GetObject", &shown, e.to_string()))?
                    .into_bytes();
                let text = String::from_utf8_lossy(&bytes);
                return DigestKey::from_hex(&text)
                    .ok_or_else(|| DigestKeyError::NotAKey(shown.clone()));
            }
            Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => {}
            Err(e) => {
                return Err(call(
                    "GetObject",
                    &shown,
                    stackflow_providers::error::error_chain(&e),
                ));
            }
        }
        let key = crate::digest::new_key();
        let put = s3
            .put_object()
            .bucket(bucket)
            .key(KEY_OBJECT)
            .if_none_match("*")
            .server_side_encryption(ServerSideEncryption::Aes256)
            .body(key.to_hex().into_bytes().into())
            .send()
            .await;
        match put {
            Ok(_) => return Ok(key),
            // Another task made it first: read theirs.
            Err(e) if e.raw_response().is_some_and(|r| r.status().as_u16() == 412) => {}
            Err(e) => {
                return Err(call(
                    "PutObject",
                    &shown,
                    stackflow_providers::error::error_chain(&e),
                ));
            }
        }
    }
    Err(DigestKeyError::Unsettled(shown))
}
