//! The one EC2 call of the lookups, `DescribeAvailabilityZones` (`Fn::GetAZs`), through
//! `aws-sdk-ec2` (which the EC2 providers use as well).
//!
//! Every call names its region, so the client is made for that region from the
//! [`SdkConfig`] (its credentials and endpoint), with the SDK's own retries off: the call
//! is retried by [`lookup_retry_policy`] and classified with [`ProviderError::from_sdk`],
//! as a provider's call.

use std::time::Duration;

use aws_sdk_ec2::types::AvailabilityZone;
use aws_types::SdkConfig;
use aws_types::region::Region;

use crate::error::ProviderError;
use crate::error::error_chain;
use crate::retry::{RetryPolicy, retry};

/// How long one EC2 `DescribeAvailabilityZones` call may take.
pub const EC2_TIMEOUT: Duration = Duration::from_secs(10);

/// How the availability zones' lookup is retried: as a provider call, but each attempt
/// bounded by [`EC2_TIMEOUT`] and the whole by a minute (it runs before the deploy starts).
pub fn lookup_retry_policy() -> RetryPolicy {
    RetryPolicy {
        call_deadline: EC2_TIMEOUT,
        total_deadline: Duration::from_secs(60),
        ..RetryPolicy::default()
    }
}

/// `DescribeAvailabilityZones` for any region, with the credentials and endpoint of one
/// [`SdkConfig`].
///
/// The endpoint is the config's `endpoint_url` when set (a local emulator), else the SDK's
/// for the region (`https://ec2.{region}.amazonaws.com`, `.amazonaws.com.cn` in China).
#[derive(Debug, Clone)]
pub struct Ec2 {
    config: SdkConfig,
}

impl Ec2 {
    /// An EC2 lookup with the credentials provider and endpoint of `config` (its region is
    /// not used: every call names its region). The SDK's retries are off.
    pub fn new(config: &SdkConfig) -> Self {
        let config = config
            .to_builder()
            .retry_config(aws_sdk_ec2::config::retry::RetryConfig::disabled())
            .build();
        Ec2 { config }
    }

    /// The URL requests for `region` go to (named in the errors of calls that were not
    /// answered).
    pub fn endpoint(&self, region: &str) -> String {
        match self.config.endpoint_url() {
            Some(url) => format!("{}/", url.trim_end_matches('/')),
            None if region.starts_with("cn-") => {
                format!("https://ec2.{region}.amazonaws.com.cn/")
            }
            None => format!("https://ec2.{region}.amazonaws.com/"),
        }
    }

    /// The names of the available availability zones of `region`, sorted. A throttling
    /// answer, a 5xx, a lost connection or no answer within [`EC2_TIMEOUT`] is retried
    /// with backoff ([`lookup_retry_policy`]); any other error fails at once. The error
    /// is the service's `Code: message`, or for a call that got no answer, the endpoint
    /// and why.
    pub async fn availability_zones(&self, region: &str) -> Result<Vec<String>, ProviderError> {
        let conf = aws_sdk_ec2::config::Builder::from(&self.config)
            .region(Region::new(region.to_string()))
            .build();
        let client = aws_sdk_ec2::Client::from_conf(conf);
        let what = "EC2 DescribeAvailabilityZones";
        let endpoint = self.endpoint(region);
        retry(&lookup_retry_policy(), what, || async {
            client
                .describe_availability_zones()
                .send()
                .await
                .map_err(|e| classify(what, &endpoint, e))
        })
        .await
        .map(|out| usable_zones(out.availability_zones()))
    }
}

/// A failed call as a provider error ([`ProviderError::from_sdk`]); one that got no answer
/// names the endpoint and the whole cause chain.
fn classify<E>(
    what: &str,
    endpoint: &str,
    error: aws_sdk_ec2::error::SdkError<E, crate::error::HttpResponse>,
) -> ProviderError
where
    E: aws_sdk_ec2::error::ProvideErrorMetadata + std::error::Error + 'static,
{
    use aws_sdk_ec2::error::SdkError;
    match &error {
        SdkError::DispatchFailure(_) | SdkError::TimeoutError(_) => {
            ProviderError::Transient(format!("{what}: EC2 {endpoint}: {}", error_chain(&error)))
        }
        _ => ProviderError::from_sdk(what, error),
    }
}

/// The names of the zones that are `available` and are availability zones (a zone with no
/// type is taken as one; Local and Wavelength Zones are not), sorted, once each.
fn usable_zones(zones: &[AvailabilityZone]) -> Vec<String> {
    let mut names: Vec<String> = zones
        .iter()
        .filter(|z| z.state().map(|s| s.as_str()) == Some("available"))
        .filter(|z| z.zone_type().is_none_or(|t| t == "availability-zone"))
        .filter_map(|z| z.zone_name().filter(|n| !n.is_empty()).map(str::to_string))
        .collect();
    names.sort();
    names.dedup();
    names
}

#[cfg(test)]
mod tests {
    use aws_sdk_ec2::types::AvailabilityZoneState;

    use super::*;

    fn zone(name: &str, state: AvailabilityZoneState, kind: Option<&str>) -> AvailabilityZone {
        AvailabilityZone::builder()
            .zone_name(name)
            .state(state)
            .set_zone_type(kind.map(str::to_string))
            .build()
    }

    #[test]
    fn zones_are_the_available_ones_sorted() {
        let zones = [
            zone(
                "us-east-1b",
                AvailabilityZoneState::Available,
                Some("availability-zone"),
            ),
            zone("us-east-1a", AvailabilityZoneState::Available, None),
            zone("us-east-1c", AvailabilityZoneState::Impaired, None),
            zone(
                "us-east-1-bos-1a",
                AvailabilityZoneState::Available,
                Some("local-zone"),
            ),
            zone("", AvailabilityZoneState::Available, None),
            zone("us-east-1a", AvailabilityZoneState::Available, None),
        ];
        assert_eq!(usable_zones(&zones), ["us-east-1a", "us-east-1b"]);
        assert_eq!(usable_zones(&[]), Vec::<String>::new());
    }

    #[test]
    fn throttling_and_server_errors_are_retried_and_others_are_not() {
        for (code, status, retried) in [
            (Some("RequestLimitExceeded"), 400, true),
            (Some("Throttling"), 400, true),
            (None, 503, true),
            (None, 429, true),
            (Some("AuthFailure"), 401, false),
            (Some("UnauthorizedOperation"), 403, false),
        ] {
            let error = ProviderError::classify(code, "", Some(status));
            assert_eq!(
                error.is_retryable(),
                retried,
                "{code:?} {status}: {error:?}"
            );
        }
    }

    #[test]
    fn endpoints() {
        let ec2 = Ec2::new(&SdkConfig::builder().build());
        assert_eq!(
            ec2.endpoint("eu-west-1"),
            "https://ec2.eu-west-1.amazonaws.com/"
        );
        assert_eq!(
            ec2.endpoint("cn-north-1"),
            "https://ec2.cn-north-1.amazonaws.com.cn/"
        );
        let config = SdkConfig::builder()
            .endpoint_url("http://127.0.0.1:4566/")
            .build();
        assert_eq!(
            Ec2::new(&config).endpoint("us-east-1"),
            "http://127.0.0.1:4566/"
        );
    }
}
