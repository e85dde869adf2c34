//! Client builders shared by everything that talks to AWS from stackflow (providers,
//! lookups, the event store's bucket, the Step Functions artifacts).

use aws_types::SdkConfig;

/// An S3 client for `config`, with path-style addressing when an endpoint is configured
/// (a local emulator has no virtual-host buckets). The one place that rule lives.
pub fn s3_client(config: &SdkConfig) -> aws_sdk_s3::Client {
    aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(config)
            .force_path_style(config.endpoint_url().is_some())
            .build(),
    )
}

/// The SHA-256 of `bytes`, in lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
