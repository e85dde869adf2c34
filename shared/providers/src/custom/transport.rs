//! The custom resource protocol's AWS calls: sending a request to its handler (Lambda
//! `Invoke`, synchronous, or SNS `Publish`) and the response object in S3 (the presigned `ResponseURL`,
//! `GetObject`).

use std::time::Duration;

use aws_sdk_lambda::error::SdkError;
use aws_sdk_lambda::primitives::Blob;
use aws_sdk_lambda::types::{InvocationType, LogType};
use aws_sdk_s3::presigning::PresigningConfig;
use serde_json::Value;

use aws_sdk_lambda::config::retry::RetryConfig;
use aws_sdk_lambda::config::timeout::TimeoutConfig;

use super::invocation::log_tail;
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
    /// Makes the session each `ResponseURL` is signed with (the client's own when `None`).
    pub session: Option<Session>,
}

/// A [`super::ResponseSession`], shown by name only.
#[derive(Clone)]
pub(super) struct Session(pub super::ResponseSession);

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ResponseSession")
    }
}

/// How long a URL presigned now with credentials ending at `expiry` may be said to be
/// valid, when `wanted` is asked: no longer than the credentials.
pub(super) fn validity(
    now: std::time::SystemTime,
    wanted: Duration,
    expiry: Option<std::time::SystemTime>,
) -> Duration {
    match expiry {
        Some(end) => wanted.min(end.duration_since(now).unwrap_or_default()),
        None => wanted,
    }
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
    ///
    /// With a [`super::ResponseSession`], it is signed by a session made for it, and its
    /// `X-Amz-Expires` is no later than that session's end: a URL never claims to live
    /// longer than what signed it.
    pub async fn presign(&self, key: &str, timeout: Duration) -> Result<String, ProviderError> {
        let mut expires =
            (timeout + Duration::from_secs(15 * 60)).min(Duration::from_secs(7 * 86400));
        let s3 = match &self.session {
            None => self.s3.clone(),
            Some(session) => {
                let credentials = (session.0)(expires).await.map_err(|e| {
                    ProviderError::Transient(format!(
                        "a session to sign the ResponseURL with: {}",
                        e.message()
                    ))
                })?;
                expires = validity(std::time::SystemTime::now(), expires, credentials.expiry());
                let provider = aws_sdk_s3::config::SharedCredentialsProvider::new(credentials);
                aws_sdk_s3::Client::from_conf(
                    self.s3
                        .config()
                        .to_builder()
                        .credentials_provider(provider)
                        .build(),
                )
            }
        };
        let config = PresigningConfig::expires_in(expires).map_err(|e| {
            ProviderError::InvalidRequest(format!("presigning the ResponseURL: {e}"))
        })?;
        let presigned = s3
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .presigned(config)
            .await
            .map_err(|e| ProviderError::from_sdk("presigning the ResponseURL", e))?;
        Ok(presigned.uri().to_string())
    }

    /// Sends `event` to `target`: a Lambda function is invoked synchronously
    /// (`RequestResponse`, `LogType=Tail`, for up to `timeout`), an SNS topic gets it
    /// published. What happened, as far as the call can tell.
    pub async fn send(
        &self,
        target: &ServiceTarget,
        event: &Value,
        timeout: Duration,
    ) -> Result<Delivery, ProviderError> {
        let body = event.to_string();
        let arn = target.arn();
        match target {
            ServiceTarget::Lambda(_) => self.invoke(&arn.text, &arn.region, body, timeout).await,
            ServiceTarget::Sns(_) => {
                let client = in_region!(self.sns, aws_sdk_sns, arn.region.as_str());
                let published = retry(&self.retry, "Publish", || async {
                    client
                        .publish()
                        .topic_arn(&arn.text)
                        .message(&body)
                        .send()
                        .await
                        .map(|_| ())
                        .map_err(|e| ProviderError::from_sdk("Publish", e))
                })
                .await;
                match published {
                    Ok(()) => Ok(Delivery::Sent),
                    Err(ProviderError::NotFound(m)) => Ok(Delivery::Missing(m)),
                    Err(e) => Err(e),
                }
            }
        }
    }

    /// `Invoke` with `RequestResponse`. Retried only where the handler cannot have run
    /// (throttled, or the request never sent); a call whose answer is lost is
    /// [`Delivery::Unknown`], never sent again (the handler may be running).
    async fn invoke(
        &self,
        function: &str,
        region: &str,
        body: String,
        timeout: Duration,
    ) -> Result<Delivery, ProviderError> {
        let client = in_region!(self.lambda, aws_sdk_lambda, region);
        // A handler may run up to Lambda's 15 minutes: the call waits that long, once.
        let wait = timeout.min(Duration::from_secs(900)) + Duration::from_secs(60);
        let overrides = aws_sdk_lambda::config::Builder::default()
            .timeout_config(
                TimeoutConfig::builder()
                    .operation_timeout(wait)
                    .operation_attempt_timeout(wait)
                    .read_timeout(wait)
                    .build(),
            )
            .retry_config(RetryConfig::disabled());
        let mut attempt = 0;
        loop {
            attempt += 1;
            let answer = client
                .invoke()
                .function_name(function)
                .invocation_type(InvocationType::RequestResponse)
                .log_type(LogType::Tail)
                .payload(Blob::new(body.as_bytes()))
                .customize()
                .config_override(overrides.clone())
                .send()
                .await;
            let error = match answer {
                Ok(out) => {
                    return Ok(match out.function_error() {
                        None => Delivery::Sent,
                        Some(kind) => Delivery::HandlerFailed {
                            function_error: kind.to_string(),
                            payload: out
                                .payload()
                                .map(|p| p.as_ref().to_vec())
                                .unwrap_or_default(),
                            log: out.log_result().map(log_tail).unwrap_or_default(),
                        },
                    });
                }
                Err(e) => e,
            };
            let unsent = matches!(
                error,
                SdkError::DispatchFailure(_) | SdkError::ConstructionFailure(_)
            );
            let lost = matches!(
                error,
                SdkError::TimeoutError(_) | SdkError::ResponseError(_)
            );
            let classified = ProviderError::from_sdk("Invoke", error);
            let again = unsent || matches!(classified, ProviderError::Throttled(..));
            match classified {
                ProviderError::NotFound(m) => return Ok(Delivery::Missing(m)),
                e if again && attempt < self.retry.max_attempts => {
                    tokio::time::sleep(self.retry.backoff(attempt)).await;
                    let _ = e;
                }
                e if lost => return Ok(Delivery::Unknown(e.to_string())),
                e => return Err(e),
            }
        }
    }
}

/// What sending a request did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Delivery {
    /// The handler returned normally (Lambda), or the request was published (SNS): its
    /// answer is the response object, now or later.
    Sent,
    /// The Lambda handler failed (`FunctionError`): unless it answered before, it never
    /// will.
    HandlerFailed {
        /// `Handled` or `Unhandled`.
        function_error: String,
        /// Its payload (the runtime's `errorType`/`errorMessage`).
        payload: Vec<u8>,
        /// The end of its log, decoded.
        log: String,
    },
    /// The function (or topic) does not exist.
    Missing(String),
    /// The call's answer was lost: the handler may be running, and may answer.
    Unknown(String),
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::SystemTime;

    use aws_sdk_s3::config::{Credentials, SharedCredentialsProvider};

    use super::*;

    /// The value of query parameter `name` of `url`.
    fn query<'a>(url: &'a str, name: &str) -> &'a str {
        let start = url
            .find(&format!("{name}="))
            .unwrap_or_else(|| panic!("{name}: {url}"));
        let rest = &url[start + name.len() + 1..];
        rest.split('&').next().unwrap_or_default()
    }

    fn transport(session: Option<Session>) -> Transport {
        let old = Credentials::new(
            "OLDSESSION",
            "old-secret",
            Some("old-token".into()),
            Some(SystemTime::now() + Duration::from_secs(5 * 60)),
            "test",
        );
        let config = aws_types::SdkConfig::builder()
            .region(aws_types::region::Region::new("us-east-1"))
            .credentials_provider(SharedCredentialsProvider::new(old))
            .behavior_version(aws_sdk_s3::config::BehaviorVersion::latest())
            .build();
        Transport {
            lambda: aws_sdk_lambda::Client::new(&config),
            sns: aws_sdk_sns::Client::new(&config),
            s3: aws_sdk_s3::Client::new(&config),
            bucket: "answers".into(),
            retry: RetryPolicy::default(),
            session,
        }
    }

    fn lasting(key: &'static str, secs: u64) -> Session {
        Session(Arc::new(move |_wanted| {
            Box::pin(async move {
                Ok(Credentials::new(
                    key,
                    "fresh-secret",
                    Some("fresh-token".into()),
                    Some(SystemTime::now() + Duration::from_secs(secs)),
                    "test",
                ))
            })
        }))
    }

    /// The URL says, in itself, what signed it and for how long: a session made for it,
    /// lasting the handler's time to answer, not the provider's session with minutes left.
    #[tokio::test]
    async fn a_response_url_is_signed_by_a_session_that_outlives_the_handlers_time() {
        let hour = Duration::from_secs(3600);
        let url = transport(Some(lasting("FRESHSESSION", 3600)))
            .presign("custom-resource-responses/r1", Duration::from_secs(50 * 60))
            .await
            .unwrap();
        assert!(
            query(&url, "X-Amz-Credential").starts_with("FRESHSESSION"),
            "{url}"
        );
        let expires: u64 = query(&url, "X-Amz-Expires").parse().unwrap();
        // Asked 50 min + 15 min; the session ends in an hour: the URL says no more.
        assert!((3590..=3600).contains(&expires), "{expires}");
        assert!(expires >= 50 * 60);
        assert!(url.contains("X-Amz-Security-Token=fresh-token"), "{url}");

        // Without a session source, the client's own credentials sign it (unchanged).
        let url = transport(None)
            .presign("custom-resource-responses/r2", hour)
            .await
            .unwrap();
        assert!(query(&url, "X-Amz-Credential").starts_with("OLDSESSION"));

        // A session that cannot last as long: the URL is honest about its end.
        let url = transport(Some(lasting("SHORTSESSION", 20 * 60)))
            .presign("custom-resource-responses/r3", hour)
            .await
            .unwrap();
        let expires: u64 = query(&url, "X-Amz-Expires").parse().unwrap();
        assert!((1190..=1200).contains(&expires), "{expires}");
    }

    #[test]
    fn validity_is_never_past_the_credentials_end() {
        let now = SystemTime::now();
        let h = Duration::from_secs(3600);
        assert_eq!(validity(now, h, None), h);
        assert_eq!(validity(now, h, Some(now + 2 * h)), h);
        assert_eq!(
            validity(now, h, Some(now + Duration::from_secs(60))),
            Duration::from_secs(60)
        );
        assert_eq!(
            validity(now, h, Some(now - Duration::from_secs(1))),
            Duration::ZERO
        );
    }
}
