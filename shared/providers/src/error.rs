//! Classified provider errors.
//!
//! Messages are the service's own words plus context; they are not masked here (the caller
//! masks secrets before anything is stored or shown).

use std::time::Duration;

use aws_sdk_cloudcontrol::error::{ProvideErrorMetadata, SdkError};

/// Why a provider operation failed, classified by what the caller should do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// The service throttled the call: retry with backoff, not before the wait the service
    /// asked for (its `Retry-After`), when it said.
    #[error("throttled: {0}")]
    Throttled(String, Option<Duration>),
    /// A transient failure (5xx, network, a call's deadline): retry with backoff.
    #[error("transient failure: {0}")]
    Transient(String),
    /// A role or policy made moments ago is not visible yet: retry on a dense schedule.
    #[error("IAM propagation: {0}")]
    IamPropagation(String),
    /// The resource (name) exists already.
    #[error("already exists: {0}")]
    AlreadyExists(String),
    /// The resource does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// The change cannot be made in place: the resource must be replaced.
    #[error("not updatable: {0}")]
    NotUpdatable(String),
    /// The request is wrong (validation, permissions): fails at once.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// The operation did not finish within its deadline.
    #[error("timed out: {0}")]
    Timeout(String),
    /// Anything else.
    #[error("{0}")]
    Other(String),
}

/// Error codes that mean throttled: retried with backoff.
const THROTTLED: &[&str] = &[
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestThrottled",
    "RequestThrottledException",
    "TooManyRequestsException",
    "RequestLimitExceeded",
    "SlowDown",
    "ProvisionedThroughputExceededException",
    "TooManyUpdates",
    "RequestLimitExceededException",
    "PriorRequestNotComplete",
];

/// Error codes that mean transient: retried with backoff.
const TRANSIENT: &[&str] = &[
    "InternalFailure",
    "InternalError",
    "InternalErrorException",
    "InternalServerError",
    "InternalServerErrorException",
    "InternalServiceError",
    "ServiceInternalError",
    "ServiceUnavailable",
    "ServiceUnavailableException",
    "ServiceException",
    "GeneralServiceException",
    "NetworkFailure",
    "RequestTimeout",
    "RequestTimeoutException",
    "ConcurrentModificationException",
    "OperationAbortedException",
    "ResourceConflictException",
    "ConcurrentOperationException",
];

/// Error codes that mean "already exists".
const ALREADY_EXISTS: &[&str] = &[
    "AlreadyExists",
    "AlreadyExistsException",
    "ResourceAlreadyExistsException",
    "EntityAlreadyExists",
    "EntityAlreadyExistsException",
    "ParameterAlreadyExists",
    "BucketAlreadyExists",
    "BucketAlreadyOwnedByYou",
    "QueueAlreadyExists",
    "QueueNameExists",
    "TableAlreadyExistsException",
];

/// Error codes that mean "not found".
const NOT_FOUND: &[&str] = &[
    "NotFound",
    "NotFoundException",
    "ResourceNotFoundException",
    "ResourceNotFound",
    "ParameterNotFound",
    "NoSuchEntity",
    "NoSuchEntityException",
    "NoSuchBucket",
    "NonExistentQueue",
    "QueueDoesNotExist",
    "TopicNotFound",
];

/// Error codes that mean "not updatable in place".
const NOT_UPDATABLE: &[&str] = &["NotUpdatable", "NotUpdatableException"];

/// Error codes that mean a wrong request: failed at once.
const INVALID_REQUEST: &[&str] = &[
    "ValidationException",
    "ValidationError",
    "InvalidRequest",
    "InvalidRequestException",
    "InvalidParameterValue",
    "InvalidParameterValueException",
    "InvalidParameterException",
    "InvalidParameterCombination",
    "InvalidAttributeName",
    "InvalidAttributeValue",
    "InvalidInput",
    "InvalidInputException",
    "MalformedPolicyDocument",
    "AccessDenied",
    "AccessDeniedException",
    "UnauthorizedOperation",
    "InvalidCredentials",
    "UnsupportedActionException",
    "TypeNotFoundException",
    "ClientTokenConflictException",
    "ServiceLimitExceeded",
    "LimitExceededException",
];

/// A class of error codes, and the error it makes of a message.
type Class = (&'static [&'static str], fn(String) -> ProviderError);

impl ProviderError {
    /// A stable name for the class (used as the Step Functions error name).
    pub fn name(&self) -> &'static str {
        match self {
            ProviderError::Throttled(..) => "Stackflow.Throttled",
            ProviderError::Transient(_) => "Stackflow.Transient",
            ProviderError::IamPropagation(_) => "Stackflow.IamPropagation",
            ProviderError::AlreadyExists(_) => "Stackflow.AlreadyExists",
            ProviderError::NotFound(_) => "Stackflow.NotFound",
            ProviderError::NotUpdatable(_) => "Stackflow.NotUpdatable",
            ProviderError::InvalidRequest(_) => "Stackflow.InvalidRequest",
            ProviderError::Timeout(_) => "Stackflow.Timeout",
            ProviderError::Other(_) => "Stackflow.ProviderError",
        }
    }

    /// The message, without the class prefix of `Display`.
    pub fn message(&self) -> &str {
        match self {
            ProviderError::Throttled(m, _)
            | ProviderError::Transient(m)
            | ProviderError::IamPropagation(m)
            | ProviderError::AlreadyExists(m)
            | ProviderError::NotFound(m)
            | ProviderError::NotUpdatable(m)
            | ProviderError::InvalidRequest(m)
            | ProviderError::Timeout(m)
            | ProviderError::Other(m) => m,
        }
    }

    /// True for the classes that a retry can cure: throttling, transient failures and IAM
    /// propagation. (A [`ProviderError::Timeout`] is the deadline of the whole operation,
    /// so it is final; a single call that hangs is [`ProviderError::Transient`].)
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            ProviderError::Throttled(..)
                | ProviderError::Transient(_)
                | ProviderError::IamPropagation(_)
        )
    }

    /// The error of a create that finds its name taken by a resource this stack did not
    /// make: `what` names it (`AWS::SNS::Topic orders`), `noun` says what it is (`topic`).
    /// A create never takes over such a resource (it would then update it, and delete it on
    /// a rollback or a destroy).
    pub fn name_taken(what: &str, noun: &str) -> ProviderError {
        ProviderError::AlreadyExists(format!(
            "{what}: a {noun} with this name already exists, and this stack did not create \
             it; stackflow never takes over what it did not make: give the resource another \
             name, or remove the existing one"
        ))
    }

    /// The same class with `context: ` in front of the message.
    pub fn context(self, context: impl std::fmt::Display) -> Self {
        let wrap = |m: String| format!("{context}: {m}");
        match self {
            ProviderError::Throttled(m, after) => ProviderError::Throttled(wrap(m), after),
            ProviderError::Transient(m) => ProviderError::Transient(wrap(m)),
            ProviderError::IamPropagation(m) => ProviderError::IamPropagation(wrap(m)),
            ProviderError::AlreadyExists(m) => ProviderError::AlreadyExists(wrap(m)),
            ProviderError::NotFound(m) => ProviderError::NotFound(wrap(m)),
            ProviderError::NotUpdatable(m) => ProviderError::NotUpdatable(wrap(m)),
            ProviderError::InvalidRequest(m) => ProviderError::InvalidRequest(wrap(m)),
            ProviderError::Timeout(m) => ProviderError::Timeout(wrap(m)),
            ProviderError::Other(m) => ProviderError::Other(wrap(m)),
        }
    }

    /// How long the service asked the caller to wait before it tries again (a throttling
    /// answer's `Retry-After`), when it said.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ProviderError::Throttled(_, after) => *after,
            _ => None,
        }
    }

    /// Classifies a service error from its error `code`, `message` and HTTP `status`.
    pub fn classify(code: Option<&str>, message: &str, status: Option<u16>) -> ProviderError {
        let text = match code {
            Some(code) if !message.is_empty() => format!("{code}: {message}"),
            Some(code) => code.to_string(),
            None if !message.is_empty() => message.to_string(),
            None => format!("HTTP status {}", status.unwrap_or_default()),
        };
        if looks_like_iam_propagation(message) {
            return ProviderError::IamPropagation(text);
        }
        let code_str = code.unwrap_or_default();
        // Query-protocol services prefix codes (`AWS.SimpleQueueService.NonExistentQueue`).
        let short = code_str.rsplit('.').next().unwrap_or(code_str);
        let classes: [Class; 6] = [
            (THROTTLED, |m| ProviderError::Throttled(m, None)),
            (TRANSIENT, ProviderError::Transient),
            (ALREADY_EXISTS, ProviderError::AlreadyExists),
            (NOT_FOUND, ProviderError::NotFound),
            (NOT_UPDATABLE, ProviderError::NotUpdatable),
            (INVALID_REQUEST, ProviderError::InvalidRequest),
        ];
        match classes.iter().find(|(codes, _)| codes.contains(&short)) {
            Some((_, make)) => make(text),
            None => match status {
                Some(429) => ProviderError::Throttled(text, None),
                Some(404) => ProviderError::NotFound(text),
                Some(s) if s >= 500 => ProviderError::Transient(text),
                Some(s) if s >= 400 => ProviderError::InvalidRequest(text),
                _ => ProviderError::Other(text),
            },
        }
    }

    /// Classifies an AWS SDK error (any service: `SdkError` is shared by all SDK crates).
    pub fn from_sdk<E>(what: &str, error: SdkError<E, HttpResponse>) -> ProviderError
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
    {
        match &error {
            SdkError::TimeoutError(_) => {
                ProviderError::Transient(format!("{what}: the call timed out"))
            }
            SdkError::DispatchFailure(failure) => {
                // Each cause's text, never the Debug dump of the connector's error.
                let why = if failure.is_io() {
                    "cannot connect to the endpoint"
                } else if failure.is_timeout() {
                    "the endpoint did not answer in time"
                } else {
                    "the request was not sent"
                };
                ProviderError::Transient(format!("{what}: {why}: {}", error_chain(&error)))
            }
            SdkError::ResponseError(_) => ProviderError::Transient(format!(
                "{what}: the response could not be read: {}",
                error_chain(&error)
            )),
            SdkError::ServiceError(context) => {
                let status = context.raw().status().as_u16();
                let service = context.err();
                let error = ProviderError::classify(
                    service.code(),
                    service.message().unwrap_or(""),
                    Some(status),
                )
                .context(what);
                match error {
                    ProviderError::Throttled(m, None) => {
                        let header = context.raw().headers().get("retry-after");
                        ProviderError::Throttled(m, header.and_then(parse_retry_after))
                    }
                    other => other,
                }
            }
            _ => ProviderError::Other(format!("{what}: {}", error_chain(&error))),
        }
    }
}

/// The longest `Retry-After` honoured: a service asking for more is waited for this long
/// (the retry's own deadlines still apply).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// A `Retry-After` header's delay in seconds (`2`, `0.5`), capped at [`MAX_RETRY_AFTER`];
/// `None` for anything else (an HTTP date is not worth a clock comparison here).
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    let seconds: f64 = value.trim().parse().ok()?;
    (seconds.is_finite() && seconds >= 0.0)
        .then(|| Duration::from_secs_f64(seconds.min(MAX_RETRY_AFTER.as_secs_f64())))
}

/// The HTTP response type of every SDK client.
pub type HttpResponse = aws_sdk_cloudcontrol::config::http::HttpResponse;

/// True when `message` says that a role or principal is not (yet) usable, the typical
/// answer in the seconds after an IAM role was created or changed.
fn looks_like_iam_propagation(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("cannot be assumed")
        || m.contains("role defined for the function cannot be assumed")
        || m.contains("not authorized to perform: sts:assumerole")
        || m.contains("execution role does not have permissions")
        || m.contains("the provided execution role does not have")
        || (m.contains("role") && m.contains("does not exist") && m.contains("arn:"))
        || m.contains("invalid principal in policy")
        // API Gateway's UpdateAccount, before it can assume a new logging role.
        || m.contains("does not have required permissions set to api gateway")
}

/// A call on a bucket that failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} of bucket {bucket}: {message}")]
pub struct BucketError {
    /// What was being done, e.g. `creating`, `setting the encryption`.
    pub what: &'static str,
    pub bucket: String,
    /// Why, as AWS answered.
    pub message: String,
}

/// An error and every source below it, joined with `: `, for people: each said once, a
/// service's answer (its error metadata, which displays as a Debug dump) as
/// `Code: message`, and the SDK's wrappers that say nothing (`other`, `service error`,
/// `unhandled error (Code)`) left out.
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    use aws_sdk_cloudcontrol::error::ErrorMetadata;
    let mut parts: Vec<String> = Vec::new();
    let mut next = Some(error);
    while let Some(e) = next {
        let part = match e.downcast_ref::<ErrorMetadata>() {
            Some(meta) => match (meta.code(), meta.message()) {
                (Some(code), Some(message)) => format!("{code}: {message}"),
                (Some(code), None) => code.to_string(),
                _ => e.to_string(),
            },
            None => e.to_string(),
        };
        let empty = matches!(part.as_str(), "other" | "service error")
            || part.starts_with("unhandled error (");
        if !empty && !parts.iter().any(|p| p.contains(&part)) {
            parts.push(part);
        }
        next = e.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_that_was_not_sent_says_why_in_words() {
        use aws_sdk_cloudcontrol::error::ConnectorError;
        use aws_sdk_cloudcontrol::operation::get_resource::GetResourceError;
        let refused =
            std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
        let e: SdkError<GetResourceError, HttpResponse> =
            SdkError::dispatch_failure(ConnectorError::io(refused.into()));
        let ProviderError::Transient(text) = ProviderError::from_sdk("GetResource", e) else {
            panic!("a dispatch failure is transient");
        };
        assert_eq!(
            text,
            "GetResource: cannot connect to the endpoint: dispatch failure: io error: connection refused"
        );
        let e: SdkError<GetResourceError, HttpResponse> =
            SdkError::dispatch_failure(ConnectorError::timeout("connect".into()));
        let ProviderError::Transient(text) = ProviderError::from_sdk("GetResource", e) else {
            panic!("a dispatch failure is transient");
        };
        assert!(
            text.starts_with("GetResource: the endpoint did not answer in time: "),
            "{text}"
        );
        assert!(!text.contains("ConnectorError"), "{text}");
    }

    #[test]
    fn a_service_answer_below_a_dispatch_failure_reads_as_its_code_and_message() {
        use aws_sdk_cloudcontrol::error::{ConnectorError, ErrorMetadata};
        use aws_sdk_cloudcontrol::operation::get_resource::GetResourceError;
        // As when credentials cannot be loaded because STS refused the role.
        let denied = ErrorMetadata::builder()
            .code("AccessDenied")
            .message("User: u is not authorized to perform: sts:AssumeRole on resource: r")
            .build();
        let e: SdkError<GetResourceError, HttpResponse> =
            SdkError::dispatch_failure(ConnectorError::other(Box::new(denied), None));
        let ProviderError::Transient(text) = ProviderError::from_sdk("GetResource", e) else {
            panic!("a dispatch failure is transient");
        };
        assert_eq!(
            text,
            "GetResource: the request was not sent: dispatch failure: AccessDenied: User: u is \
             not authorized to perform: sts:AssumeRole on resource: r"
        );
    }

    #[test]
    fn classifies_codes() {
        let c = |code: &str| ProviderError::classify(Some(code), "m", Some(400));
        assert!(matches!(
            c("ThrottlingException"),
            ProviderError::Throttled(..)
        ));
        assert!(matches!(c("Throttling"), ProviderError::Throttled(..)));
        assert!(matches!(c("TooManyUpdates"), ProviderError::Throttled(..)));
        assert!(matches!(c("InternalFailure"), ProviderError::Transient(_)));
        assert!(matches!(
            c("ParameterAlreadyExists"),
            ProviderError::AlreadyExists(_)
        ));
        assert!(matches!(c("ParameterNotFound"), ProviderError::NotFound(_)));
        assert!(matches!(
            c("AWS.SimpleQueueService.NonExistentQueue"),
            ProviderError::NotFound(_)
        ));
        assert!(matches!(
            c("NotUpdatableException"),
            ProviderError::NotUpdatable(_)
        ));
        assert!(matches!(
            c("ValidationException"),
            ProviderError::InvalidRequest(_)
        ));
        assert!(matches!(
            c("SomethingNew"),
            ProviderError::InvalidRequest(_)
        ));
        assert!(matches!(
            ProviderError::classify(Some("SomethingNew"), "", Some(503)),
            ProviderError::Transient(_)
        ));
        assert!(matches!(
            ProviderError::classify(None, "", Some(429)),
            ProviderError::Throttled(..)
        ));
        assert!(matches!(
            ProviderError::classify(None, "", None),
            ProviderError::Other(_)
        ));
    }

    #[test]
    fn retry_after_is_read_in_seconds_and_capped() {
        assert_eq!(parse_retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after(" 0.5 "), Some(Duration::from_millis(500)));
        assert_eq!(parse_retry_after("3600"), Some(MAX_RETRY_AFTER));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(parse_retry_after("-1"), None);
        let e = ProviderError::Throttled("slow".into(), Some(Duration::from_secs(1)));
        assert_eq!(e.retry_after(), Some(Duration::from_secs(1)));
        assert_eq!(
            e.context("CreateQueue").retry_after(),
            Some(Duration::from_secs(1))
        );
        assert_eq!(ProviderError::Transient("x".into()).retry_after(), None);
    }

    #[test]
    fn iam_propagation_by_message() {
        let e = ProviderError::classify(
            Some("InvalidParameterValueException"),
            "The role defined for the function cannot be assumed by Lambda.",
            Some(400),
        );
        assert!(matches!(e, ProviderError::IamPropagation(_)), "{e:?}");
        assert!(e.is_retryable());
        // API Gateway's UpdateAccount right after the logging role is made.
        let e = ProviderError::classify(
            Some("BadRequestException"),
            "The role ARN does not have required permissions set to API Gateway",
            Some(400),
        );
        assert!(matches!(e, ProviderError::IamPropagation(_)), "{e:?}");
    }

    #[test]
    fn a_taken_name_says_what_to_do() {
        let e = ProviderError::name_taken("AWS::SNS::Topic orders", "topic");
        assert_eq!(e.name(), "Stackflow.AlreadyExists");
        assert_eq!(
            e.message(),
            "AWS::SNS::Topic orders: a topic with this name already exists, and this stack did \
             not create it; stackflow never takes over what it did not make: give the resource \
             another name, or remove the existing one"
        );
    }

    #[test]
    fn names_retryability_and_context() {
        let e = ProviderError::Throttled("x".into(), None);
        assert_eq!(e.name(), "Stackflow.Throttled");
        assert!(e.is_retryable());
        assert!(!ProviderError::Timeout("x".into()).is_retryable());
        assert!(!ProviderError::InvalidRequest("x".into()).is_retryable());
        let e = ProviderError::NotFound("gone".into()).context("DeleteQueue");
        assert_eq!(e, ProviderError::NotFound("DeleteQueue: gone".into()));
        assert_eq!(e.message(), "DeleteQueue: gone");
        assert_eq!(e.to_string(), "not found: DeleteQueue: gone");
    }
}
