//! The custom resource provider: `Custom::*` and `AWS::CloudFormation::CustomResource`,
//! driven through CloudFormation's custom resource protocol by stackflow itself.
//!
//! For each create, update and delete the provider
//!
//! 1. builds CloudFormation's request ([`build_request`]): `RequestType`, `ResponseURL`,
//!    `StackId`, `RequestId`, `ResourceType`, `LogicalResourceId`, `ResourceProperties`
//!    (with `ServiceToken`), `OldResourceProperties` (update) and `PhysicalResourceId`
//!    (update, delete);
//! 2. sends it to the `ServiceToken`: a Lambda function ARN is invoked synchronously
//!    (`Invoke`, `InvocationType=RequestResponse`, `LogType=Tail`), an SNS topic ARN gets
//!    the request's JSON published (`Publish`);
//! 3. waits for the handler's answer: the `ResponseURL` is a presigned S3 `PUT` URL for
//!    an object in a bucket the engine owns (key `{prefix}{RequestId}`), which the
//!    provider reads once the handler returned, then polls with `GetObject` (a missing
//!    object means "not yet") with a growing delay ([`PollPolicy`]) up to the resource
//!    timeout: a handler may return before it answers (the CDK provider framework answers
//!    from its waiter state machine). A handler that failed (`FunctionError`) and has not
//!    answered never will: the resource fails at once with the handler's error and the
//!    end of its log ([`invocation`]), the `ResponseURL`'s signature masked;
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
//! - `NoEcho: true` in a response makes the answer `sensitive`: the engine lets
//!   `Fn::GetAtt` read `Data` during the deploy and records every value masked.
//!   Attributes are never logged by the provider.
//! - Response objects are not deleted after they are read (a retry needs them). Give the
//!   bucket a lifecycle rule that expires them (they may hold secret `Data`): stackflow's
//!   own bucket has one (`custom-resource-responses/` after a day, see
//!   `crate::assets::bucket`), whether `stackflow bootstrap` made it or the first custom
//!   resource did ([`CustomResourceProvider::with_first_use`]).
//! - On delete, as the reference tool (cdkd) does: a `FAILED` answer leaves the resource
//!   recorded and skipped ([`Deleted::Skipped`]: the run goes on, and ends partial), and
//!   a handler that no longer exists (its function or topic is gone) lets the resource
//!   leave the stack with a warning ([`Deleted::Abandoned`]: nothing can ever delete what
//!   it manages). A handler that failed without answering fails the delete.
//!
//! The protocol itself (documents, identifiers, response parsing) is [`protocol`], pure and
//! unit-tested; the AWS calls (Lambda `Invoke`, SNS `Publish`, the S3 response object) are
//! in `transport`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

pub use crate::cloudcontrol::PollPolicy;
use crate::error::ProviderError;
use crate::provider::{Created, Deleted, Provider, ProviderFuture, ResourceRequest, Updated};
use crate::retry::RetryPolicy;

pub mod invocation;
pub mod protocol;
mod transport;

use invocation::handler_failure;
pub use protocol::{
    Arn, CustomResponse, Expected, MAX_RESPONSE_BYTES, MAX_SERVICE_TIMEOUT_SECS, RequestIds,
    RequestType, ServiceTarget, build_request, cloudformation_strings, default_physical_id,
    parse_response, request_id, service_timeout, service_token, stack_arn,
};
use protocol::{attributes, check_type, failure, random_request_id};
use transport::{Delivery, Transport};

/// What runs once, before the provider's first request: typically making sure the
/// response bucket exists ([`CustomResourceProvider::with_first_use`]).
pub type FirstUse = Arc<
    dyn Fn() -> Pin<Box<dyn Future<Output = Result<(), crate::error::BucketError>> + Send>>
        + Send
        + Sync,
>;

/// Where the credentials that sign a `ResponseURL` come from when the provider's own
/// are a role session that may end sooner than the handler's time to answer (a presigned
/// URL stops working with the session that signed it): a new session lasting at least
/// the given time where it can ([`CustomResourceProvider::with_response_session`]).
pub type ResponseSession = Arc<
    dyn Fn(
            Duration,
        ) -> Pin<
            Box<dyn Future<Output = Result<aws_sdk_s3::config::Credentials, ProviderError>> + Send>,
        > + Send
        + Sync,
>;

/// [`FirstUse`], run until it succeeds once.
struct Once {
    hook: FirstUse,
    done: tokio::sync::OnceCell<()>,
}

impl std::fmt::Debug for Once {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FirstUse")
            .field("done", &self.done.initialized())
            .finish()
    }
}

/// How a request ended.
enum Outcome {
    /// The handler answered (success or failure), under this `RequestId`.
    Answered(CustomResponse, String),
    /// The `ServiceToken` names a function or topic that does not exist.
    Missing(String),
}

/// The default key prefix of the response objects.
pub const DEFAULT_KEY_PREFIX: &str = "custom-resource-responses/";

/// The custom resource provider (see the module documentation).
#[derive(Debug, Clone)]
pub struct CustomResourceProvider {
    transport: Transport,
    key_prefix: String,
    stack_arn: Option<(String, String, String)>,
    poll: PollPolicy,
    first_use: Option<Arc<Once>>,
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
            transport: Transport {
                lambda,
                sns,
                s3,
                bucket: bucket.into(),
                retry: RetryPolicy::default(),
                session: None,
            },
            key_prefix: DEFAULT_KEY_PREFIX.to_string(),
            stack_arn: None,
            poll: PollPolicy {
                initial: Duration::from_millis(200),
                factor: 1.5,
                max: Duration::from_secs(5),
                timeout: Duration::from_secs(MAX_SERVICE_TIMEOUT_SECS),
            },
            first_use: None,
        }
    }

    /// A provider on `config`'s clients (the S3 one path-style when an endpoint is set),
    /// receiving the responses in `bucket`.
    pub fn from_config(config: &aws_types::SdkConfig, bucket: impl Into<String>) -> Self {
        CustomResourceProvider::new(
            aws_sdk_lambda::Client::new(config),
            aws_sdk_sns::Client::new(config),
            crate::aws::s3_client(config),
            bucket,
        )
    }

    /// Runs `hook` before the first request (again on the next request while it fails):
    /// the CLI makes stackflow's bucket there when it does not exist yet.
    pub fn with_first_use(mut self, hook: FirstUse) -> Self {
        self.first_use = Some(Arc::new(Once {
            hook,
            done: tokio::sync::OnceCell::new(),
        }));
        self
    }

    /// Signs each `ResponseURL` with a session `session` makes, lasting the handler's
    /// time to answer (or as long as it can): the engine's provisioning role session,
    /// refreshed as it nears its end, may have minutes left when a request is sent.
    pub fn with_response_session(mut self, session: ResponseSession) -> Self {
        self.transport.session = Some(transport::Session(session));
        self
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
        self.transport.retry = retry;
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
        &self.transport.bucket
    }

    /// The key of the response object for `request_id`.
    pub fn response_key(&self, request_id: &str) -> String {
        format!("{}{request_id}", self.key_prefix)
    }

    /// The `StackId` for `stack_name` when the service token is `target`.
    pub fn stack_id(&self, stack_name: &str, target: &ServiceTarget) -> String {
        let place = match &self.stack_arn {
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
        stack_arn(place, stack_name)
    }

    /// The timeout for `request`: the configured one, shortened by a valid
    /// `ServiceTimeout` property.
    pub fn timeout_for(&self, request: &ResourceRequest) -> Duration {
        match service_timeout(&request.properties) {
            Some(t) => t.min(self.poll.timeout),
            None => self.poll.timeout,
        }
    }

    /// Runs one `kind` request for a custom type through the protocol: the handler's
    /// successful answer and the request's `RequestId`; a `FAILED` answer is an error.
    async fn answer(
        &self,
        request: &ResourceRequest,
        kind: RequestType,
    ) -> Result<(CustomResponse, String), ProviderError> {
        check_type(request)?;
        if kind != RequestType::Create {
            request.require_physical_id()?;
        }
        match self.execute(request, kind).await? {
            Outcome::Missing(m) => Err(ProviderError::InvalidRequest(m)),
            Outcome::Answered(response, _) if !response.success => {
                Err(failure(request, kind, &response))
            }
            Outcome::Answered(response, request_id) => Ok((response, request_id)),
        }
    }

    /// The answer in `body` (read from `key`). A `NoEcho` answer's object is rewritten
    /// with its `Data` masked once read: the bucket keeps no secret, and a retried call
    /// that reads it again gets the same physical id (and masked data, which the engine
    /// asks for again when it needs it).
    async fn settle(
        &self,
        key: &str,
        body: &[u8],
        expected: &Expected<'_>,
    ) -> Result<CustomResponse, ProviderError> {
        let response = parse_response(body, expected)?;
        if response.no_echo
            && let Ok(serde_json::Value::Object(mut doc)) = serde_json::from_slice(body)
            && let Some(serde_json::Value::Object(data)) = doc.get_mut("Data")
            && data.values().any(|v| v != "****")
        {
            for v in data.values_mut() {
                *v = serde_json::Value::String("****".into());
            }
            let masked = serde_json::to_vec(&doc).unwrap_or_default();
            self.transport.overwrite_response(key, masked).await?;
        }
        Ok(response)
    }

    /// Runs one request through the protocol and returns the handler's answer (success or
    /// failure alike) and the request's `RequestId`, or that the handler does not exist.
    async fn execute(
        &self,
        request: &ResourceRequest,
        kind: RequestType,
    ) -> Result<Outcome, ProviderError> {
        let token = service_token(&request.properties)?;
        let target = ServiceTarget::parse(token)?;
        if let Some(once) = &self.first_use {
            once.done
                .get_or_try_init(|| (once.hook)())
                .await
                .map_err(|e| ProviderError::InvalidRequest(e.to_string()))?;
        }
        let request_id = if request.token.is_empty() {
            random_request_id()
        } else {
            request_id(request, kind)
        };
        let key = self.response_key(&request_id);
        let expected = Expected {
            request_id: &request_id,
            logical_id: &request.logical_id,
        };
        let answered = |response| Ok(Outcome::Answered(response, request_id.clone()));

        if !request.token.is_empty()
            && let Some(body) = self.transport.read_response(&key).await?
        {
            return answered(self.settle(&key, &body, &expected).await?);
        }

        let timeout = self.timeout_for(request);
        let url = self.transport.presign(&key, timeout).await?;
        // The engine's recorded id, the one `Ref AWS::StackId` gives; else one made here.
        let stack_id = request
            .stack_id
            .clone()
            .unwrap_or_else(|| self.stack_id(&request.stack_name, &target));
        let event = build_request(
            kind,
            request,
            &RequestIds {
                request_id: &request_id,
                stack_id: &stack_id,
                response_url: &url,
            },
        )?;
        let deadline = Instant::now() + timeout;
        match self.transport.send(&target, &event, timeout).await? {
            Delivery::Missing(m) => {
                return Ok(Outcome::Missing(format!(
                    "the ServiceToken {token} does not exist: {m}"
                )));
            }
            Delivery::HandlerFailed {
                function_error,
                payload,
                log,
            } => {
                // An answer written before the failure stands; otherwise none will come.
                if let Some(body) = self.transport.read_response(&key).await? {
                    return answered(self.settle(&key, &body, &expected).await?);
                }
                return Err(ProviderError::Other(format!(
                    "{} ({}): {} for {} (RequestId {request_id}): {}",
                    request.logical_id,
                    request.resource_type,
                    token,
                    kind.as_str(),
                    handler_failure(&function_error, &payload, &log, &url)
                )));
            }
            Delivery::Sent | Delivery::Unknown(_) => {}
        }
        if let Some(body) = self.transport.read_response(&key).await? {
            return answered(self.settle(&key, &body, &expected).await?);
        }
        let mut delays = self.poll.delays();
        loop {
            let delay = delays.next().unwrap_or(self.poll.max);
            let now = Instant::now();
            if now >= deadline {
                return Err(ProviderError::Timeout(format!(
                    "no response from the custom resource handler {token} at s3://{}/{key} \
                     within {timeout:?} (RequestId {request_id})",
                    self.transport.bucket
                )));
            }
            tokio::time::sleep(delay.min(deadline - now)).await;
            if let Some(body) = self.transport.read_response(&key).await? {
                return answered(self.settle(&key, &body, &expected).await?);
            }
        }
    }
}

impl Provider for CustomResourceProvider {
    fn create<'a>(&'a self, request: &'a ResourceRequest) -> ProviderFuture<'a, Created> {
        Box::pin(async move {
            let (response, request_id) = self.answer(request, RequestType::Create).await?;
            let physical_id = response.physical_id.unwrap_or_else(|| {
                default_physical_id(&request.stack_name, &request.logical_id, &request_id)
            });
            Ok(Created {
                sensitive: response.no_echo,
                physical_id,
                attributes: attributes(&response.data),
            })
        })
    }

    /// Sends an `Update`. When the handler answers another `PhysicalResourceId`, the
    /// resource was replaced (`replaced: true`): as CloudFormation does, the engine must
    /// then send a `Delete` for the old physical id (with the old properties) in its
    /// cleanup phase, after the rest of the deploy succeeded.
    fn update<'a>(&'a self, request: &'a ResourceRequest) -> ProviderFuture<'a, Updated> {
        Box::pin(async move {
            let (response, _) = self.answer(request, RequestType::Update).await?;
            let old_id = request.require_physical_id()?;
            let physical_id = response.physical_id.unwrap_or_else(|| old_id.to_string());
            Ok(Updated {
                sensitive: response.no_echo,
                replaced: physical_id != old_id,
                physical_id,
                attributes: attributes(&response.data),
            })
        })
    }

    /// Sends a `Delete`. As the reference tool does (see the module documentation), a
    /// `FAILED` answer skips the resource (it stays recorded; the run goes on) and a
    /// handler that no longer exists abandons it (it leaves the stack, with why).
    fn delete<'a>(&'a self, request: &'a ResourceRequest) -> ProviderFuture<'a, Deleted> {
        Box::pin(async move {
            check_type(request)?;
            request.require_physical_id()?;
            Ok(match self.execute(request, RequestType::Delete).await? {
                Outcome::Answered(response, _) if response.success => Deleted::Done,
                Outcome::Answered(response, _) => Deleted::Skipped {
                    reason: format!(
                        "the custom resource handler reported FAILED for Delete: {}; it did \
                         not delete, so what it manages is left in place and the resource \
                         stays recorded (delete what it manages by hand, then destroy again)",
                        response.reason.as_deref().unwrap_or("(no Reason given)")
                    ),
                },
                Outcome::Missing(m) => Deleted::Abandoned {
                    reason: format!(
                        "{m}: no handler can delete what this custom resource manages; it \
                         leaves the stack, and anything it made is still there (check for \
                         leftovers)"
                    ),
                },
            })
        })
    }

    fn name(&self) -> &str {
        "custom"
    }

    /// Every property: all of them go to the handler.
    fn handled_properties(&self, _resource_type: &str) -> Option<&[&str]> {
        None
    }
}
