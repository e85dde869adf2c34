//! AWS configuration: the standard chain (environment, profiles, files), overridden by the
//! global options.

use std::time::Duration;

use aws_config::BehaviorVersion;
use aws_types::SdkConfig;

use crate::args::GlobalArgs;
pub use crate::call::{CallFailed, brief_error};

/// Loads the AWS configuration the way every AWS tool does, then applies `--profile`,
/// `--region`, `--endpoint-url` and `--role-arn`.
pub async fn load(global: &GlobalArgs) -> SdkConfig {
    let mut loader = aws_config::defaults(BehaviorVersion::latest());
    if let Some(profile) = &global.profile {
        loader = loader.profile_name(profile);
    }
    if let Some(region) = global.regions.last() {
        loader = loader.region(aws_config::Region::new(region.clone()));
    }
    if let Some(url) = &global.endpoint_url {
        loader = loader.endpoint_url(url);
    }
    let config = loader
        .timeout_config(
            aws_config::timeout::TimeoutConfig::builder()
                .connect_timeout(Duration::from_secs(3))
                .operation_attempt_timeout(Duration::from_secs(30))
                .build(),
        )
        .load()
        .await;
    match &global.role_arn {
        Some(role) => assume(&config, role).await,
        None => config,
    }
}

/// `config` acting as `role`: its credentials come from STS AssumeRole with `config`'s,
/// taken again before they expire (a deploy may outlast one session).
pub async fn assume(config: &SdkConfig, role: &str) -> SdkConfig {
    let provider = aws_config::sts::AssumeRoleProvider::builder(role)
        .session_name("stackflow")
        .configure(config)
        .build()
        .await;
    config
        .to_builder()
        .credentials_provider(aws_types::sdk_config::SharedCredentialsProvider::new(
            provider,
        ))
        .build()
}

/// The region of a loaded configuration, or an error that says how to set one.
pub fn region(config: &SdkConfig) -> anyhow::Result<String> {
    config
        .region()
        .map(|r| r.to_string())
        .ok_or_else(|| anyhow::anyhow!("no AWS region is set: pass --region or set AWS_REGION"))
}

/// Where `config` sends STS calls, for a message: the endpoint URL it was given (without
/// any `user:password@` in it), else AWS's own for its region.
pub fn endpoint(config: &SdkConfig) -> String {
    match (config.endpoint_url(), config.region()) {
        (Some(url), _) => without_userinfo(url),
        (None, Some(region)) => format!("AWS STS in {region}"),
        (None, None) => "AWS STS".to_string(),
    }
}

/// `url` without the `user:password@` of its authority: a message never quotes a secret.
fn without_userinfo(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    if scheme.is_empty() {
        format!("{host}{tail}")
    } else {
        format!("{scheme}://{host}{tail}")
    }
}

/// The account id of the caller, from STS.
pub async fn account_id(config: &SdkConfig) -> Result<String, CallFailed> {
    let sts = aws_sdk_sts::Client::new(config);
    let call = sts.get_caller_identity().send();
    match tokio::time::timeout(Duration::from_secs(5), call).await {
        Ok(Ok(out)) => out.account.ok_or(CallFailed::Incomplete("account id")),
        Ok(Err(e)) => Err(brief_error(&e)),
        Err(_) => Err(CallFailed::Slow),
    }
}

/// The caller's ARN, from STS.
pub async fn caller_arn(config: &SdkConfig) -> Result<String, CallFailed> {
    let sts = aws_sdk_sts::Client::new(config);
    let call = sts.get_caller_identity().send();
    match tokio::time::timeout(Duration::from_secs(5), call).await {
        Ok(Ok(out)) => out.arn.ok_or(CallFailed::Incomplete("ARN")),
        Ok(Err(e)) => Err(brief_error(&e)),
        Err(_) => Err(CallFailed::Slow),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_is_quoted_without_its_credentials() {
        assert_eq!(without_userinfo("http://127.0.0.1:9"), "http://127.0.0.1:9");
        assert_eq!(
            without_userinfo("https://me:s3cret@proxy.example:8443/aws?x=1"),
            "https://proxy.example:8443/aws?x=1"
        );
        assert_eq!(without_userinfo("me:s3cret@host"), "host");
    }
}
