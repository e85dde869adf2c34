//! AWS configuration: the standard chain (environment, profiles, files), overridden by the
//! global options.

use std::time::Duration;

use aws_config::BehaviorVersion;
use aws_types::SdkConfig;

use crate::args::GlobalArgs;

/// Loads the AWS configuration the way every AWS tool does, then applies `--profile`,
/// `--region` and `--endpoint-url`.
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
    loader
        .timeout_config(
            aws_config::timeout::TimeoutConfig::builder()
                .connect_timeout(Duration::from_secs(3))
                .operation_attempt_timeout(Duration::from_secs(30))
                .build(),
        )
        .load()
        .await
}

/// The region of a loaded configuration, or an error that says how to set one.
pub fn region(config: &SdkConfig) -> anyhow::Result<String> {
    config
        .region()
        .map(|r| r.to_string())
        .ok_or_else(|| anyhow::anyhow!("no AWS region is set: pass --region or set AWS_REGION"))
}

/// The account id of the caller, from STS. `Err` carries a readable reason.
pub async fn account_id(config: &SdkConfig) -> Result<String, String> {
    let sts = aws_sdk_sts::Client::new(config);
    let call = sts.get_caller_identity().send();
    match tokio::time::timeout(Duration::from_secs(5), call).await {
        Ok(Ok(out)) => out
            .account
            .ok_or_else(|| "STS returned no account id".to_string()),
        Ok(Err(e)) => Err(brief_error(&e)),
        Err(_) => Err("STS did not answer within 5 s".to_string()),
    }
}

/// One readable line for an SDK error: the service's own error code and message when it
/// answered, otherwise what kept the call from reaching it. The full chain is printed with
/// `-vv` by the callers that have it.
pub fn brief_error<E, R>(e: &aws_sdk_sts::error::SdkError<E, R>) -> String
where
    E: aws_sdk_sts::error::ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    use aws_sdk_sts::error::SdkError;
    match e {
        SdkError::ServiceError(se) => {
            let err = se.err();
            format!(
                "{}: {}",
                err.code().unwrap_or("error"),
                err.message().unwrap_or("no message")
            )
        }
        SdkError::DispatchFailure(d) => {
            let text = format!("{}", aws_sdk_sts::error::DisplayErrorContext(e));
            if text.contains("credentials") {
                "no AWS credentials were found (set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY)".to_string()
            } else if d.is_timeout() {
                "the endpoint did not answer in time".to_string()
            } else if d.is_io() {
                "cannot connect to the endpoint".to_string()
            } else {
                "the request could not be sent".to_string()
            }
        }
        SdkError::TimeoutError(_) => "the call timed out".to_string(),
        other => other.to_string(),
    }
}
