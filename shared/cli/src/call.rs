//! Why an AWS call failed, in one line a person can act on ([`CallFailed`]), from any SDK
//! error ([`brief_error`]).

/// Why an AWS call got no answer, or what the service answered instead, in one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallFailed {
    /// The service's own error.
    #[error("{code}: {message}")]
    Service { code: String, message: String },
    #[error(
        "no AWS credentials were found (set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY)"
    )]
    NoCredentials,
    /// Credentials that could not be taken (a role STS refused, a profile's process that
    /// failed): what answered, in words.
    #[error("{0}")]
    Credentials(String),
    #[error("the endpoint did not answer in time")]
    NoAnswer,
    /// Nothing listens where the endpoint is.
    #[error("the endpoint refused the connection")]
    Refused,
    /// The endpoint's host is not found.
    #[error("the endpoint's host name does not resolve")]
    NoHost,
    #[error("cannot connect to the endpoint")]
    NoConnection,
    #[error("the request could not be sent")]
    NotSent,
    #[error("the call timed out")]
    TimedOut,
    /// STS answered without what was asked.
    #[error("STS returned no {0}")]
    Incomplete(&'static str),
    #[error("STS did not answer within 5 s")]
    Slow,
    /// Anything else the SDK said.
    #[error("{0}")]
    Other(String),
}

impl CallFailed {
    /// True when no AWS endpoint answers at all: every call would fail the same way. A
    /// connection that dropped, or a call that timed out, is not that: it may work when
    /// tried again.
    pub fn unreachable(&self) -> bool {
        matches!(self, CallFailed::Refused | CallFailed::NoHost)
    }
}

/// One readable line for an SDK error: the service's own error code and message when it
/// answered, otherwise what kept the call from reaching it. The full chain is printed with
/// `-vv` by the callers that have it.
pub fn brief_error<E, R>(e: &aws_sdk_sts::error::SdkError<E, R>) -> CallFailed
where
    E: aws_sdk_sts::error::ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug + 'static,
{
    use aws_sdk_sts::error::SdkError;
    match e {
        SdkError::ServiceError(se) => {
            let err = se.err();
            CallFailed::Service {
                code: err.code().unwrap_or("error").to_string(),
                message: err.message().unwrap_or("no message").to_string(),
            }
        }
        SdkError::DispatchFailure(d) => {
            let text = format!("{}", aws_sdk_sts::error::DisplayErrorContext(e));
            if text.contains("no providers in chain provided credentials") {
                CallFailed::NoCredentials
            } else if text.contains("credentials") {
                let chain = stackflow_providers::error::error_chain(e);
                let chain = chain.strip_prefix("dispatch failure: ").unwrap_or(&chain);
                CallFailed::Credentials(chain.to_string())
            } else if d.is_timeout() {
                CallFailed::NoAnswer
            } else if d.is_io() {
                let text = text.to_lowercase();
                if text.contains("connection refused") {
                    CallFailed::Refused
                } else if text.contains("dns error") || text.contains("failed to lookup address") {
                    CallFailed::NoHost
                } else {
                    CallFailed::NoConnection
                }
            } else {
                CallFailed::NotSent
            }
        }
        SdkError::TimeoutError(_) => CallFailed::TimedOut,
        other => CallFailed::Other(other.to_string()),
    }
}
