//! The custom resource provider: `Custom::*` and `AWS::CloudFormation::CustomResource`,
//! driven through CloudFormation's custom resource protocol by stackflow itself.
//!
//! For each create, update and delete the provider
//!
//! 1. builds CloudFormation's request ([`build_request`]): `RequestType`, `ResponseURL`,
//!    `StackId`, `RequestId`, `ResourceType`, `LogicalResourceId`, `ResourceProperties`
//!    (with `ServiceToken`), `OldResourceProperties` (update) and `PhysicalResourceId`
//!    (update, delete);
//! 2. sends it to the `ServiceToken`: a Lambda function ARN is invoked asynchronously
//!    (`Invoke`, `InvocationType=Event`), an SNS topic ARN gets the request's JSON
//!    published (`Publish`);
//! 3. waits for the handler's answer: the `ResponseURL` is a presigned S3 `PUT` URL for
//!    an object in a bucket the engine owns (key `{prefix}{RequestId}`), which the
//!    provider polls with `GetObject` (a missing object means "not yet") with a growing
//!    delay ([`PollPolicy`]) up to the resource timeout;
//! 4. reads the response ([`parse_response`]): `SUCCESS` gives the physical id and the
//!    `Data` keys as `Fn::GetAtt` attributes; `FAILED` fails the resource with the
//!    handler's `Reason`.
//!
//! # Idempotency
//!
//! The `RequestId` is derived from the request's token (and the stack, logical id and
//! request type, see [`request_id`]), so a retry of the same action uses the same
//! `RequestId` and hence the same response object. Before sending, the provider looks for
//! that object: when a handler already answered an earlier attempt (the engine crashed or
//! lost the answer), that answer is used and the handler is not called again. Otherwise the
//! request is sent again with the same `RequestId`, as CloudFormation itself may deliver a
//! request more than once; handlers are expected to tolerate that.
//!
//! A request with an empty token gets a random `RequestId` (no idempotency is possible
//! without a token).
//!
//! # Where stackflow differs from / follows CloudFormation (deliberate choices)
//!
//! - Property values are passed as CloudFormation passes them: every number and boolean
//!   (at any depth) becomes a string ([`cloudformation_strings`]), so handlers written for
//!   CloudFormation see the same input.
//! - `StackId` is an ARN in CloudFormation's shape,
//!   `arn:{partition}:cloudformation:{region}:{account}:stack/{stack}/{uuid}`, with the
//!   uuid derived from the stack name (stable across deploys). Partition, region and
//!   account come from [`CustomResourceProvider::with_stack_arn`], else from the
//!   `ServiceToken` ARN.
//! - A `Create` response without `PhysicalResourceId` (CloudFormation's helper libraries
//!   send the handler's log stream name then) gets
//!   `{stack}-{logicalId}-{12 hex digits of the RequestId's hash}`
//!   ([`default_physical_id`]): deterministic, so a retry gives the same id, and different
//!   for every create, like a log stream name. An `Update` or `Delete` response without
//!   one keeps the request's physical id.
//! - `ServiceTimeout` in the properties (seconds, 1-3600, as in CloudFormation) shortens
//!   the configured timeout for that resource; it never lengthens it.
//! - Changing `ServiceToken` on update is refused, as CloudFormation refuses it.
//! - A response larger than 4096 bytes is refused, as CloudFormation refuses it.
//! - `NoEcho` is parsed ([`CustomResponse::no_echo`]) but the [`Provider`] contract has no
//!   place for it; attributes are never logged by the provider, and the caller masks
//!   secrets before anything is stored or shown.
//! - Response objects are not deleted after they are read (a retry needs them). Give the
//!   bucket a lifecycle rule that expires them (they may hold secret `Data`).

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use aws_sdk_lambda::primitives::Blob;
use aws_sdk_lambda::types::InvocationType;
use aws_sdk_s3::presigning::PresigningConfig;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use tokio::time::Instant;

pub use crate::cloudcontrol::PollPolicy;
use crate::error::ProviderError;
use crate::provider::{
    Attributes, BoxFuture, Created, Deleted, Properties, Provider, ResourceRequest, Updated,
};
use crate::registry::is_custom_type;
use crate::retry::{RetryPolicy, retry};

/// The largest response CloudFormation accepts, in bytes.
pub const MAX_RESPONSE_BYTES: usize = 4096;

/// The longest `ServiceTimeout` CloudFormation accepts, in seconds.
pub const MAX_SERVICE_TIMEOUT_SECS: u64 = 3600;

/// The default key prefix of the response objects.
pub const DEFAULT_KEY_PREFIX: &str = "custom-resource-responses/";

/// The `RequestType` of a custom resource request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestType {
    /// A create.
    Create,
    /// An update.
    Update,
    /// A delete.
    Delete,
}

impl RequestType {
    /// The protocol's name: `Create`, `Update`, `Delete`.
    pub fn as_str(self) -> &'static str {
        match self {
            RequestType::Create => "Create",
            RequestType::Update => "Update",
            RequestType::Delete => "Delete",
        }
    }
}

/// Where a `ServiceToken` points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServiceTarget {
    /// A Lambda function (ARN, optionally qualified): invoked with `InvocationType=Event`.
    Lambda(Arn),
    /// An SNS topic: the request is published to it.
    Sns(Arn),
}

impl ServiceTarget {
    /// The target of `service_token`, or an [`ProviderError::InvalidRequest`] when it is
    /// neither a Lambda function ARN nor an SNS topic ARN.
    pub fn parse(service_token: &str) -> Result<ServiceTarget, ProviderError> {
        let invalid = || {
            ProviderError::InvalidRequest(format!(
                "ServiceToken {service_token:?} is neither a Lambda function ARN nor an SNS \
                 topic ARN"
            ))
        };
        let arn = Arn::parse(service_token).ok_or_else(invalid)?;
        match arn.service.as_str() {
            "lambda" if arn.resource.starts_with("function:") => Ok(ServiceTarget::Lambda(arn)),
            "sns" if !arn.resource.is_empty() && !arn.resource.contains(':') => {
                Ok(ServiceTarget::Sns(arn))
            }
            _ => Err(invalid()),
        }
    }

    /// The ARN.
    pub fn arn(&self) -> &Arn {
        match self {
            ServiceTarget::Lambda(arn) | ServiceTarget::Sns(arn) => arn,
        }
    }
}

/// The parts of an ARN (`arn:partition:service:region:account:resource`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arn {
    /// The whole ARN.
    pub text: String,
    /// `aws`, `aws-cn`, ...
    pub partition: String,
    /// `lambda`, `sns`, ...
    pub service: String,
    /// The region.
    pub region: String,
    /// The account id.
    pub account: String,
    /// Everything after the account.
    pub resource: String,
}

impl Arn {
    /// The parts of `text`, or `None` when it is not an ARN with a region and an account.
    pub fn parse(text: &str) -> Option<Arn> {
        let mut parts = text.splitn(6, ':');
        if parts.next()? != "arn" {
            return None;
        }
        let partition = parts.next()?.to_string();
        let service = parts.next()?.to_string();
        let region = parts.next()?.to_string();
        let account = parts.next()?.to_string();
        let resource = parts.next()?.to_string();
        if partition.is_empty() || service.is_empty() || region.is_empty() || account.is_empty() {
            return None;
        }
        Some(Arn {
            text: text.to_string(),
            partition,
            service,
            region,
            account,
            resource,
        })
    }
}

/// A handler's answer, read from the response object.
#[derive(Debug, Clone, PartialEq)]
pub struct CustomResponse {
    /// `SUCCESS` (true) or `FAILED` (false).
    pub success: bool,
    /// The `Reason` (required by CloudFormation for `FAILED`).
    pub reason: Option<String>,
    /// The `PhysicalResourceId`, when the handler sent one.
    pub physical_id: Option<String>,
    /// The `Data`: the `Fn::GetAtt` values.
    pub data: Map<String, Value>,
    /// `NoEcho`: the handler asks that `Data` is never shown.
    pub no_echo: bool,
}

/// The custom resource provider (see the module documentation).
#[derive(Debug, Clone)]
pub struct CustomResourceProvider {
    lambda: aws_sdk_lambda::Client,
    sns: aws_sdk_sns::Client,
    s3: aws_sdk_s3::Client,
    bucket: String,
    key_prefix: String,
    stack_arn: Option<(String, String, String)>,
    retry: RetryPolicy,
    poll: PollPolicy,
}

impl CustomResourceProvider {
    /// A provider that sends requests with `lambda` and `sns` and receives the responses in
    /// `bucket` through `s3` (which also presigns the `ResponseURL`, so it must address
    /// the bucket the way handlers can reach it). Defaults: key prefix
    /// [`DEFAULT_KEY_PREFIX`], the default [`RetryPolicy`], polls starting at 200 ms
    /// growing by 1.5 up to 5 s, and a timeout of one hour (CloudFormation's).
    pub fn new(
        lambda: aws_sdk_lambda::Client,
        sns: aws_sdk_sns::Client,
        s3: aws_sdk_s3::Client,
        bucket: impl Into<String>,
    ) -> Self {
        CustomResourceProvider {
            lambda,
            sns,
            s3,
            bucket: bucket.into(),
            key_prefix: DEFAULT_KEY_PREFIX.to_string(),
            stack_arn: None,
            retry: RetryPolicy::default(),
            poll: PollPolicy {
                initial: Duration::from_millis(200),
                factor: 1.5,
                max: Duration::from_secs(5),
                timeout: Duration::from_secs(MAX_SERVICE_TIMEOUT_SECS),
            },
        }
    }

    /// Replaces the key prefix of the response objects.
    pub fn with_key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.key_prefix = prefix.into();
        self
    }

    /// The partition, region and account of the `StackId` ARNs (default: those of the
    /// `ServiceToken`).
    pub fn with_stack_arn(
        mut self,
        partition: impl Into<String>,
        region: impl Into<String>,
        account: impl Into<String>,
    ) -> Self {
        self.stack_arn = Some((partition.into(), region.into(), account.into()));
        self
    }

    /// Replaces the retry policy of single calls.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Replaces the poll policy (its `timeout` is the resource timeout).
    pub fn with_poll(mut self, poll: PollPolicy) -> Self {
        self.poll = poll;
        self
    }

    /// Replaces the resource timeout: how long a handler has to answer.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.poll.timeout = timeout;
        self
    }

    /// The bucket that receives the responses.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// The key of the response object for `request_id`.
    pub fn response_key(&self, request_id: &str) -> String {
        format!("{}{request_id}", self.key_prefix)
    }

    /// The `StackId` for `stack_name` when the service token is `target`.
    pub fn stack_id(&self, stack_name: &str, target: &ServiceTarget) -> String {
        let (partition, region, account) = match &self.stack_arn {
            Some((p, r, a)) => (p.as_str(), r.as_str(), a.as_str()),
            None => {
                let arn = target.arn();
                (
                    arn.partition.as_str(),
                    arn.region.as_str(),
                    arn.account.as_str(),
                )
            }
        };
        format!(
            "arn:{partition}:cloudformation:{region}:{account}:stack/{stack_name}/{}",
            hash_uuid(&format!("stackflow-stack\0{stack_name}"))
        )
    }

    /// The timeout for `request`: the configured one, shortened by a valid
    /// `ServiceTimeout` property.
    pub fn timeout_for(&self, request: &ResourceRequest) -> Duration {
        match service_timeout(&request.properties) {
            Some(t) => t.min(self.poll.timeout),
            None => self.poll.timeout,
        }
    }

    /// Runs one request through the protocol and returns the handler's answer (success or
    /// failure alike) and the request's `RequestId`.
    async fn execute(
        &self,
        request: &ResourceRequest,
        kind: RequestType,
    ) -> Result<(CustomResponse, String), ProviderError> {
        let token = service_token(&request.properties)?;
        let target = ServiceTarget::parse(token)?;
        let request_id = if request.token.is_empty() {
            random_uuid()
        } else {
            request_id(request, kind)
        };
        let key = self.response_key(&request_id);
        let expected = Expected {
            request_id: &request_id,
            logical_id: &request.logical_id,
        };

        if !request.token.is_empty()
            && let Some(body) = self.read_response(&key).await?
        {
            return Ok((parse_response(&body, &expected)?, request_id));
        }

        let timeout = self.timeout_for(request);
        let url = self.presign(&key, timeout).await?;
        let stack_id = self.stack_id(&request.stack_name, &target);
        let event = build_request(
            kind,
            request,
            &RequestIds {
                request_id: &request_id,
                stack_id: &stack_id,
                response_url: &url,
            },
        )?;
        self.send(&target, &event).await?;

        let deadline = Instant::now() + timeout;
        let mut delays = self.poll.delays();
        loop {
            let delay = delays.next().unwrap_or(self.poll.max);
            let now = Instant::now();
            if now >= deadline {
                return Err(ProviderError::Timeout(format!(
                    "no response from the custom resource handler {token} at s3://{}/{key} \
                     within {timeout:?} (RequestId {request_id})",
                    self.bucket
                )));
            }
            tokio::time::sleep(delay.min(deadline - now)).await;
            if let Some(body) = self.read_response(&key).await? {
                return Ok((parse_response(&body, &expected)?, request_id));
            }
        }
    }

    /// `GetObject` of the response: `None` while it does not exist.
    async fn read_response(&self, key: &str) -> Result<Option<Vec<u8>>, ProviderError> {
        retry(
            &self.retry,
            "GetObject (custom resource response)",
            || async {
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
                        let error =
                            ProviderError::from_sdk("GetObject (custom resource response)", e);
                        return match error {
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
            },
        )
        .await
    }

    /// A presigned `PUT` URL for `key`, valid for `timeout` plus a margin (at most seven
    /// days, SigV4's limit).
    async fn presign(&self, key: &str, timeout: Duration) -> Result<String, ProviderError> {
        let expires = (timeout + Duration::from_secs(15 * 60)).min(Duration::from_secs(7 * 86400));
        let config = PresigningConfig::expires_in(expires).map_err(|e| {
            ProviderError::InvalidRequest(format!("presigning the ResponseURL: {e}"))
        })?;
        let presigned = self
            .s3
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .presigned(config)
            .await
            .map_err(|e| ProviderError::from_sdk("presigning the ResponseURL", e))?;
        Ok(presigned.uri().to_string())
    }

    /// Sends `event` to `target`.
    async fn send(&self, target: &ServiceTarget, event: &Value) -> Result<(), ProviderError> {
        let body = event.to_string();
        let arn = target.arn();
        let result = match target {
            ServiceTarget::Lambda(_) => {
                let client = self.lambda_for(&arn.region);
                retry(&self.retry, "Invoke", || async {
                    client
                        .invoke()
                        .function_name(&arn.text)
                        .invocation_type(InvocationType::Event)
                        .payload(Blob::new(body.as_bytes()))
                        .send()
                        .await
                        .map(|_| ())
                        .map_err(|e| ProviderError::from_sdk("Invoke", e))
                })
                .await
            }
            ServiceTarget::Sns(_) => {
                let client = self.sns_for(&arn.region);
                retry(&self.retry, "Publish", || async {
                    client
                        .publish()
                        .topic_arn(&arn.text)
                        .message(&body)
                        .send()
                        .await
                        .map(|_| ())
                        .map_err(|e| ProviderError::from_sdk("Publish", e))
                })
                .await
            }
        };
        result.map_err(|e| match e {
            // A missing handler is not a missing resource (a delete must not "succeed").
            ProviderError::NotFound(m) => ProviderError::InvalidRequest(format!(
                "the ServiceToken {} does not exist: {m}",
                arn.text
            )),
            other => other,
        })
    }

    /// The Lambda client for `region` (the configured one when it matches).
    fn lambda_for(&self, region: &str) -> aws_sdk_lambda::Client {
        let config = self.lambda.config();
        if config.region().map(|r| r.as_ref()) == Some(region) {
            return self.lambda.clone();
        }
        aws_sdk_lambda::Client::from_conf(
            config
                .to_builder()
                .region(aws_sdk_lambda::config::Region::new(region.to_string()))
                .build(),
        )
    }

    /// The SNS client for `region` (the configured one when it matches).
    fn sns_for(&self, region: &str) -> aws_sdk_sns::Client {
        let config = self.sns.config();
        if config.region().map(|r| r.as_ref()) == Some(region) {
            return self.sns.clone();
        }
        aws_sdk_sns::Client::from_conf(
            config
                .to_builder()
                .region(aws_sdk_sns::config::Region::new(region.to_string()))
                .build(),
        )
    }
}

/// What a response must match.
#[derive(Debug, Clone, Copy)]
pub struct Expected<'a> {
    /// The request's `RequestId`.
    pub request_id: &'a str,
    /// The request's `LogicalResourceId`.
    pub logical_id: &'a str,
}

/// The generated identifiers of one request.
#[derive(Debug, Clone, Copy)]
pub struct RequestIds<'a> {
    /// The `RequestId`.
    pub request_id: &'a str,
    /// The `StackId`.
    pub stack_id: &'a str,
    /// The `ResponseURL`.
    pub response_url: &'a str,
}

/// The `ServiceToken` property, or an [`ProviderError::InvalidRequest`].
pub fn service_token(properties: &Properties) -> Result<&str, ProviderError> {
    match properties.get("ServiceToken") {
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        Some(other) => Err(ProviderError::InvalidRequest(format!(
            "ServiceToken must be a non-empty string, not {other}"
        ))),
        None => Err(ProviderError::InvalidRequest(
            "a custom resource needs the property ServiceToken".into(),
        )),
    }
}

/// A valid `ServiceTimeout` property (whole seconds from 1 to 3600, a number or a string).
pub fn service_timeout(properties: &Properties) -> Option<Duration> {
    let secs = match properties.get("ServiceTimeout")? {
        Value::Number(n) => n.as_u64()?,
        Value::String(s) => s.trim().parse().ok()?,
        _ => return None,
    };
    (1..=MAX_SERVICE_TIMEOUT_SECS)
        .contains(&secs)
        .then(|| Duration::from_secs(secs))
}

/// The `RequestId` of `request` as a `kind` request: a UUID-shaped hash of the stack, the
/// logical id, the request type and the token, so every retry of one action (same token)
/// reuses it.
pub fn request_id(request: &ResourceRequest, kind: RequestType) -> String {
    hash_uuid(&format!(
        "stackflow-custom-request\0{}\0{}\0{}\0{}",
        request.stack_name,
        request.logical_id,
        kind.as_str(),
        request.token
    ))
}

/// The physical id of a created resource whose handler sent none:
/// `{stack}-{logicalId}-{12 hex digits}` (see the module documentation).
pub fn default_physical_id(stack_name: &str, logical_id: &str, request_id: &str) -> String {
    let hash = hex(&Sha256::digest(request_id.as_bytes()));
    format!("{stack_name}-{logical_id}-{}", &hash[..12])
}

/// `value` as CloudFormation hands properties to a custom resource: numbers and booleans
/// turned into strings, at any depth.
pub fn cloudformation_strings(value: &Value) -> Value {
    match value {
        Value::Bool(b) => Value::String(b.to_string()),
        Value::Number(n) => Value::String(n.to_string()),
        Value::Array(items) => Value::Array(items.iter().map(cloudformation_strings).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), cloudformation_strings(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// CloudFormation's request for `request` as a `kind` request.
pub fn build_request(
    kind: RequestType,
    request: &ResourceRequest,
    ids: &RequestIds<'_>,
) -> Result<Value, ProviderError> {
    let token = service_token(&request.properties)?;
    let mut event = Map::new();
    event.insert("RequestType".into(), kind.as_str().into());
    event.insert("ServiceToken".into(), token.into());
    event.insert("ResponseURL".into(), ids.response_url.into());
    event.insert("StackId".into(), ids.stack_id.into());
    event.insert("RequestId".into(), ids.request_id.into());
    event.insert(
        "LogicalResourceId".into(),
        request.logical_id.clone().into(),
    );
    event.insert("ResourceType".into(), request.resource_type.clone().into());
    event.insert(
        "ResourceProperties".into(),
        cloudformation_strings(&Value::Object(request.properties.clone())),
    );
    match kind {
        RequestType::Create => {}
        RequestType::Update => {
            let previous = request.previous_properties.as_ref().ok_or_else(|| {
                ProviderError::InvalidRequest(format!(
                    "{} ({}): an update needs the previous properties",
                    request.logical_id, request.resource_type
                ))
            })?;
            if let Ok(old_token) = service_token(previous)
                && old_token != token
            {
                return Err(ProviderError::InvalidRequest(format!(
                    "{} ({}): modifying the ServiceToken is not allowed ({old_token} -> {token})",
                    request.logical_id, request.resource_type
                )));
            }
            event.insert(
                "PhysicalResourceId".into(),
                request.require_physical_id()?.into(),
            );
            event.insert(
                "OldResourceProperties".into(),
                cloudformation_strings(&Value::Object(previous.clone())),
            );
        }
        RequestType::Delete => {
            event.insert(
                "PhysicalResourceId".into(),
                request.require_physical_id()?.into(),
            );
        }
    }
    Ok(Value::Object(event))
}

/// Reads a handler's response. Errors: not JSON, too large, a `Status` other than
/// `SUCCESS`/`FAILED`, a `Data` that is not an object, or a `RequestId` /
/// `LogicalResourceId` that is not the request's.
pub fn parse_response(
    body: &[u8],
    expected: &Expected<'_>,
) -> Result<CustomResponse, ProviderError> {
    let bad = |what: String| {
        ProviderError::InvalidRequest(format!(
            "invalid custom resource response (RequestId {}): {what}",
            expected.request_id
        ))
    };
    if body.len() > MAX_RESPONSE_BYTES {
        return Err(bad(format!(
            "it is {} bytes; at most {MAX_RESPONSE_BYTES} are accepted",
            body.len()
        )));
    }
    let value: Value = serde_json::from_slice(body).map_err(|e| bad(format!("not JSON: {e}")))?;
    let Value::Object(map) = value else {
        return Err(bad("not a JSON object".into()));
    };
    let string = |name: &str| -> Result<Option<String>, ProviderError> {
        match map.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if s.is_empty() => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(bad(format!("{name} is not a string: {other}"))),
        }
    };
    if let Some(id) = string("RequestId")?
        && id != expected.request_id
    {
        return Err(bad(format!("it answers RequestId {id}")));
    }
    if let Some(id) = string("LogicalResourceId")?
        && id != expected.logical_id
    {
        return Err(bad(format!(
            "it answers LogicalResourceId {id}, not {}",
            expected.logical_id
        )));
    }
    let success = match string("Status")?.as_deref() {
        Some("SUCCESS") => true,
        Some("FAILED") => false,
        Some(other) => {
            return Err(bad(format!(
                "Status {other:?} is neither SUCCESS nor FAILED"
            )));
        }
        None => return Err(bad("no Status".into())),
    };
    let data = match map.get("Data") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(data)) => data.clone(),
        Some(other) => return Err(bad(format!("Data is not an object: {other}"))),
    };
    let no_echo = match map.get("NoEcho") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) if s.eq_ignore_ascii_case("true") => true,
        Some(Value::String(s)) if s.eq_ignore_ascii_case("false") => false,
        Some(other) => return Err(bad(format!("NoEcho is not a boolean: {other}"))),
    };
    Ok(CustomResponse {
        success,
        reason: string("Reason")?,
        physical_id: string("PhysicalResourceId")?,
        data,
        no_echo,
    })
}

/// The error of a `FAILED` response.
fn failure(
    request: &ResourceRequest,
    kind: RequestType,
    response: &CustomResponse,
) -> ProviderError {
    ProviderError::Other(format!(
        "{} ({}): the custom resource handler reported FAILED for {}: {}",
        request.logical_id,
        request.resource_type,
        kind.as_str(),
        response.reason.as_deref().unwrap_or("(no Reason given)")
    ))
}

fn attributes(data: &Map<String, Value>) -> Attributes {
    data.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// A UUID-shaped (version 8, RFC 9562 "custom") rendering of the SHA-256 of `text`.
fn hash_uuid(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid_text(bytes)
}

fn uuid_text(mut bytes: [u8; 16]) -> String {
    bytes[6] = (bytes[6] & 0x0f) | 0x80;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let h = hex(&bytes);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// A random UUID-shaped id (for requests without a token).
fn random_uuid() -> String {
    let mut text = String::new();
    for i in 0..2u64 {
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u64(i);
        hasher.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default(),
        );
        text.push_str(&hasher.finish().to_string());
    }
    hash_uuid(&text)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Provider for CustomResourceProvider {
    fn name(&self) -> &str {
        "custom"
    }

    /// Every property: all of them go to the handler.
    fn handled_properties(&self, _resource_type: &str) -> Option<&[&str]> {
        None
    }

    fn create<'a>(
        &'a self,
        request: &'a ResourceRequest,
    ) -> BoxFuture<'a, Result<Created, ProviderError>> {
        Box::pin(async move {
            check_type(request)?;
            let (response, request_id) = self.execute(request, RequestType::Create).await?;
            if !response.success {
                return Err(failure(request, RequestType::Create, &response));
            }
            let physical_id = response.physical_id.clone().unwrap_or_else(|| {
                default_physical_id(&request.stack_name, &request.logical_id, &request_id)
            });
            Ok(Created {
                physical_id,
                attributes: attributes(&response.data),
            })
        })
    }

    /// Sends an `Update`. When the handler answers another `PhysicalResourceId`, the
    /// resource was replaced (`replaced: true`): as CloudFormation does, the engine must
    /// then send a `Delete` for the old physical id (with the old properties) in its
    /// cleanup phase, after the rest of the deploy succeeded.
    fn update<'a>(
        &'a self,
        request: &'a ResourceRequest,
    ) -> BoxFuture<'a, Result<Updated, ProviderError>> {
        Box::pin(async move {
            check_type(request)?;
            let old_id = request.require_physical_id()?;
            let (response, _) = self.execute(request, RequestType::Update).await?;
            if !response.success {
                return Err(failure(request, RequestType::Update, &response));
            }
            let physical_id = response
                .physical_id
                .clone()
                .unwrap_or_else(|| old_id.to_string());
            Ok(Updated {
                replaced: physical_id != old_id,
                physical_id,
                attributes: attributes(&response.data),
            })
        })
    }

    /// Sends a `Delete`; a `FAILED` answer is an error (the resource is not forgotten).
    fn delete<'a>(
        &'a self,
        request: &'a ResourceRequest,
    ) -> BoxFuture<'a, Result<Deleted, ProviderError>> {
        Box::pin(async move {
            check_type(request)?;
            request.require_physical_id()?;
            let (response, _) = self.execute(request, RequestType::Delete).await?;
            if !response.success {
                return Err(failure(request, RequestType::Delete, &response));
            }
            Ok(Deleted::Done)
        })
    }
}

fn check_type(request: &ResourceRequest) -> Result<(), ProviderError> {
    if is_custom_type(&request.resource_type) {
        Ok(())
    } else {
        Err(ProviderError::InvalidRequest(format!(
            "{}: the custom resource provider does not handle {}",
            request.logical_id, request.resource_type
        )))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const TOPIC: &str = "arn:aws:sns:eu-west-1:111122223333:handlers";
    const FUNCTION: &str = "arn:aws:lambda:us-east-1:111122223333:function:handler:live";

    fn request(properties: Value) -> ResourceRequest {
        let mut r = ResourceRequest::new(
            "app",
            "Thing",
            "Custom::Thing",
            properties.as_object().cloned().unwrap_or_default(),
        );
        r.token = "deploy-7-Thing-create".into();
        r
    }

    fn ids<'a>() -> RequestIds<'a> {
        RequestIds {
            request_id: "rid",
            stack_id: "sid",
            response_url: "http://127.0.0.1:1/b/k?X-Amz-Signature=s",
        }
    }

    #[test]
    fn service_tokens_route_to_lambda_or_sns() {
        match ServiceTarget::parse(FUNCTION) {
            Ok(ServiceTarget::Lambda(arn)) => {
                assert_eq!(arn.region, "us-east-1");
                assert_eq!(arn.account, "111122223333");
                assert_eq!(arn.resource, "function:handler:live");
            }
            other => panic!("{other:?}"),
        }
        match ServiceTarget::parse(TOPIC) {
            Ok(ServiceTarget::Sns(arn)) => assert_eq!(arn.region, "eu-west-1"),
            other => panic!("{other:?}"),
        }
        for bad in [
            "handler",
            "arn:aws:sqs:us-east-1:1:queue",
            "arn:aws:lambda:us-east-1:1:layer:x",
            "arn:aws:sns:us-east-1:1:topic:subscription-id",
            "arn:aws:sns::1:topic",
        ] {
            assert!(
                matches!(
                    ServiceTarget::parse(bad),
                    Err(ProviderError::InvalidRequest(_))
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn create_request_has_cloudformation_fields_and_string_values() {
        let r = request(json!({
            "ServiceToken": TOPIC,
            "Count": 3,
            "Enabled": true,
            "Nested": {"List": [1, false, "x", null]}
        }));
        let event = build_request(RequestType::Create, &r, &ids()).unwrap();
        assert_eq!(
            event,
            json!({
                "RequestType": "Create",
                "ServiceToken": TOPIC,
                "ResponseURL": "http://127.0.0.1:1/b/k?X-Amz-Signature=s",
                "StackId": "sid",
                "RequestId": "rid",
                "LogicalResourceId": "Thing",
                "ResourceType": "Custom::Thing",
                "ResourceProperties": {
                    "ServiceToken": TOPIC,
                    "Count": "3",
                    "Enabled": "true",
                    "Nested": {"List": ["1", "false", "x", null]}
                }
            })
        );
        assert!(event.get("PhysicalResourceId").is_none());
        assert!(event.get("OldResourceProperties").is_none());
    }

    #[test]
    fn update_and_delete_requests_carry_the_physical_id() {
        let mut r = request(json!({"ServiceToken": TOPIC, "V": 2}));
        assert!(matches!(
            build_request(RequestType::Update, &r, &ids()),
            Err(ProviderError::InvalidRequest(_))
        ));
        r.previous_properties = json!({"ServiceToken": TOPIC, "V": 1}).as_object().cloned();
        r.physical_id = Some("phys-1".into());
        let event = build_request(RequestType::Update, &r, &ids()).unwrap();
        assert_eq!(event["RequestType"], "Update");
        assert_eq!(event["PhysicalResourceId"], "phys-1");
        assert_eq!(
            event["OldResourceProperties"],
            json!({"ServiceToken": TOPIC, "V": "1"})
        );
        assert_eq!(
            event["ResourceProperties"],
            json!({"ServiceToken": TOPIC, "V": "2"})
        );

        let event = build_request(RequestType::Delete, &r, &ids()).unwrap();
        assert_eq!(event["RequestType"], "Delete");
        assert_eq!(event["PhysicalResourceId"], "phys-1");
        assert!(event.get("OldResourceProperties").is_none());

        r.physical_id = None;
        assert!(build_request(RequestType::Delete, &r, &ids()).is_err());
    }

    #[test]
    fn changing_the_service_token_or_omitting_it_is_refused() {
        let mut r = request(json!({"ServiceToken": TOPIC}));
        r.previous_properties = json!({"ServiceToken": FUNCTION}).as_object().cloned();
        r.physical_id = Some("p".into());
        match build_request(RequestType::Update, &r, &ids()) {
            Err(ProviderError::InvalidRequest(m)) => assert!(m.contains("ServiceToken"), "{m}"),
            other => panic!("{other:?}"),
        }
        let r = request(json!({"X": 1}));
        assert!(matches!(
            build_request(RequestType::Create, &r, &ids()),
            Err(ProviderError::InvalidRequest(_))
        ));
    }

    #[test]
    fn request_ids_are_deterministic_per_action() {
        let r = request(json!({"ServiceToken": TOPIC}));
        let a = request_id(&r, RequestType::Create);
        assert_eq!(a, request_id(&r.clone(), RequestType::Create));
        assert_ne!(a, request_id(&r, RequestType::Delete));
        let mut other = r.clone();
        other.token = "deploy-8-Thing-create".into();
        assert_ne!(a, request_id(&other, RequestType::Create));
        // UUID-shaped: 8-4-4-4-12 lowercase hex, version 8, RFC variant.
        let parts: Vec<&str> = a.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(parts[2].starts_with('8'), "{a}");
        assert!(matches!(&parts[3][..1], "8" | "9" | "a" | "b"), "{a}");
        assert_ne!(random_uuid(), random_uuid());
    }

    #[test]
    fn default_physical_ids_are_stable_and_distinct() {
        let a = default_physical_id("app", "Thing", "r1");
        assert!(
            a.starts_with("app-Thing-") && a.len() == "app-Thing-".len() + 12,
            "{a}"
        );
        assert_eq!(a, default_physical_id("app", "Thing", "r1"));
        assert_ne!(a, default_physical_id("app", "Thing", "r2"));
    }

    #[test]
    fn service_timeout_only_when_valid() {
        let p = |v: Value| v.as_object().cloned().unwrap_or_default();
        assert_eq!(
            service_timeout(&p(json!({"ServiceTimeout": 30}))),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            service_timeout(&p(json!({"ServiceTimeout": "45"}))),
            Some(Duration::from_secs(45))
        );
        assert_eq!(service_timeout(&p(json!({"ServiceTimeout": 0}))), None);
        assert_eq!(service_timeout(&p(json!({"ServiceTimeout": 3601}))), None);
        assert_eq!(service_timeout(&p(json!({}))), None);
    }

    fn expected<'a>() -> Expected<'a> {
        Expected {
            request_id: "rid",
            logical_id: "Thing",
        }
    }

    #[test]
    fn parses_success_with_data_and_no_echo() {
        let body = json!({
            "Status": "SUCCESS",
            "PhysicalResourceId": "thing-1",
            "StackId": "sid",
            "RequestId": "rid",
            "LogicalResourceId": "Thing",
            "NoEcho": "true",
            "Data": {"Endpoint": "https://x", "Port": 443}
        })
        .to_string();
        let got = parse_response(body.as_bytes(), &expected()).unwrap();
        assert!(got.success);
        assert!(got.no_echo);
        assert_eq!(got.physical_id.as_deref(), Some("thing-1"));
        assert_eq!(got.reason, None);
        let attrs = attributes(&got.data);
        assert_eq!(attrs.get("Endpoint"), Some(&json!("https://x")));
        assert_eq!(attrs.get("Port"), Some(&json!(443)));
    }

    #[test]
    fn parses_failed_and_minimal_responses() {
        let got = parse_response(
            br#"{"Status":"FAILED","Reason":"quota exceeded","PhysicalResourceId":""}"#,
            &expected(),
        )
        .unwrap();
        assert!(!got.success);
        assert_eq!(got.reason.as_deref(), Some("quota exceeded"));
        assert_eq!(got.physical_id, None);
        assert!(got.data.is_empty());
        assert!(!got.no_echo);
        let r = request(json!({"ServiceToken": TOPIC}));
        let e = failure(&r, RequestType::Create, &got);
        assert!(e.to_string().contains("quota exceeded"), "{e}");
        assert!(!e.is_retryable());
    }

    #[test]
    fn rejects_invalid_responses() {
        let big = format!(
            r#"{{"Status":"SUCCESS","Data":{{"X":"{}"}}}}"#,
            "a".repeat(MAX_RESPONSE_BYTES)
        );
        for body in [
            "not json".to_string(),
            "[1]".to_string(),
            r#"{"Reason":"no status"}"#.to_string(),
            r#"{"Status":"OK"}"#.to_string(),
            r#"{"Status":"SUCCESS","Data":[1]}"#.to_string(),
            r#"{"Status":"SUCCESS","NoEcho":5}"#.to_string(),
            r#"{"Status":"SUCCESS","RequestId":"other"}"#.to_string(),
            r#"{"Status":"SUCCESS","LogicalResourceId":"Other"}"#.to_string(),
            r#"{"Status":"SUCCESS","PhysicalResourceId":7}"#.to_string(),
            big,
        ] {
            assert!(
                matches!(
                    parse_response(body.as_bytes(), &expected()),
                    Err(ProviderError::InvalidRequest(_))
                ),
                "{body}"
            );
        }
    }

    #[test]
    fn uuid_text_shape() {
        assert_eq!(
            uuid_text([0xff; 16]),
            "ffffffff-ffff-8fff-bfff-ffffffffffff"
        );
    }
}
