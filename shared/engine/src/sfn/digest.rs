//! The digest key of a DynamoDB store, in the engine's bucket (see [`crate::digest`]):
//! one object, encrypted at rest, made once with a conditional put so that two tasks
//! that start at once agree on it.

use aws_sdk_s3::Client;
use aws_sdk_s3::types::ServerSideEncryption;
use stackflow_core::secrets::DigestKey;

/// The key's object in the engine's bucket.
pub const KEY_OBJECT: &str = "stackflow/digest.key";

/// The key in `bucket`, made when there is none.
pub async fn bucket_key(s3: &Client, bucket: &str) -> Result<DigestKey, String> {
    let shown = format!("s3://{bucket}/{KEY_OBJECT}");
    for _ in 0..3 {
        match s3.get_object().bucket(bucket).key(KEY_OBJECT).send().await {
            Ok(out) => {
                let bytes = out
                    .body
                    .collect()
                    .await
                    .map_err(|e| format!("GetObject {shown}: {e}"))?
                    .into_bytes();
                let text = String::from_utf8_lossy(&bytes);
                return DigestKey::from_hex(&text)
                    .ok_or_else(|| format!("{shown} is not a digest key (64 hex digits)"));
            }
            Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => {}
            Err(e) => {
                return Err(format!(
                    "GetObject {shown}: {}",
                    aws_sdk_s3::error::DisplayErrorContext(e)
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
                return Err(format!(
                    "PutObject {shown}: {}",
                    aws_sdk_s3::error::DisplayErrorContext(e)
                ));
            }
        }
    }
    Err(format!("{shown}: could not be read or made"))
}
