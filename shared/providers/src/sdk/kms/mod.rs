//! KMS keys and aliases through the KMS API: [`key`] (`AWS::KMS::Key`) and [`alias`]
//! (`AWS::KMS::Alias`).

use aws_sdk_kms::Client;
use aws_sdk_kms::types::KeyMetadata;

use super::common::{call, missing_as_none};
use crate::error::ProviderError;
use crate::retry::RetryPolicy;

pub mod alias;
pub mod key;

pub use alias::KmsAliasProvider;
pub use key::KmsKeyProvider;

/// `DescribeKey` of `key` (a key id, key ARN, alias name or alias ARN): `None` when KMS
/// knows no such key or alias.
pub(crate) async fn describe(
    client: &Client,
    retry: &RetryPolicy,
    key: &str,
) -> Result<Option<KeyMetadata>, ProviderError> {
    let got = call(retry, "DescribeKey", || {
        client.describe_key().key_id(key).send()
    })
    .await;
    Ok(missing_as_none(got)?.and_then(|out| out.key_metadata().cloned()))
}
