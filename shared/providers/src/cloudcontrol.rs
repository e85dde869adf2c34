//! The Cloud Control provider: one generic provider for every resource type the AWS Cloud
//! Control API manages.
//!
//! - create: `CreateResource` with the desired state (the properties without the type's
//!   read-only ones) and `ClientToken` derived from the request's token
//!   ([`client_token`]); a resource that exists already (the handler's `AlreadyExists`)
//!   is never taken over: [`ProviderError::AlreadyExists`] saying so
//!   ([`ProviderError::name_taken`]);
//! - update: `UpdateResource` with an RFC 6902 patch from the previous properties to the
//!   new ones ([`update_patch`]): read-only properties never sent, write-only ones re-sent;
//!   an unchanged resource makes no update call;
//! - delete: `DeleteResource`; a resource that is already gone is a success;
//! - `GetResource` for the attributes after create/update, `read_current_state` and
//!   `import`.
//!
//! A request that does not finish at once is polled with `GetResourceRequestStatus`, the
//! first poll after [`PollPolicy::initial`] (short: a fast resource finishes fast), each
//! next one [`PollPolicy::factor`] times later, up to [`PollPolicy::max`], until
//! [`PollPolicy::timeout`] (the per-resource timeout).
//!
//! # Idempotency
//!
//! Cloud Control answers a repeated request with the same `ClientToken` with the first
//! request's status, so a retry after a crash or a lost answer never makes a second
//! resource. A request that *failed* with a retryable error (throttling inside the
//! handler, ...) is retried under a derived token (`{token}-r{n}`), so the retry is a new
//! request; the sequence of tokens is the same on every replay of the action.

use std::time::Duration;

use aws_sdk_cloudcontrol::Client;
use aws_sdk_cloudcontrol::operation::create_resource::builders::CreateResourceFluentBuilder;
use aws_sdk_cloudcontrol::operation::delete_resource::builders::DeleteResourceFluentBuilder;
use aws_sdk_cloudcontrol::operation::update_resource::builders::UpdateResourceFluentBuilder;
use aws_sdk_cloudcontrol::types::{OperationStatus, ProgressEvent};
use serde_json::{Map, Value};
use stackflow_core::schema::{self, ResourceSchema};
use tokio::time::Instant;

use crate::error::ProviderError;
use crate::patch::{diff_patch, without_paths};
use crate::provider::{Attributes, Created, CurrentState, Deleted, Imported, Properties};
use crate::provider::{Provider, ProviderFuture, ResourceRequest, Updated};
use crate::retry::{RetryPolicy, retry};

/// How a Cloud Control request is polled.
#[derive(Debug, Clone, PartialEq)]
pub struct PollPolicy {
    /// Delay before the first `GetResourceRequestStatus`.
    pub initial: Duration,
    /// Growth of the delay after each poll.
    pub factor: f64,
    /// Largest delay between polls.
    pub max: Duration,
    /// How long one request may take in all (the per-resource timeout).
    pub timeout: Duration,
}

impl Default for PollPolicy {
    fn default() -> Self {
        PollPolicy {
            initial: Duration::from_millis(150),
            factor: 1.5,
            max: Duration::from_secs(5),
            timeout: Duration::from_secs(60 * 60),
        }
    }
}

impl PollPolicy {
    /// The delays between polls, in order (endless; the caller stops at the timeout).
    pub fn delays(&self) -> impl Iterator<Item = Duration> + '_ {
        std::iter::successors(Some(self.initial.min(self.max)), move |d| {
            Some(d.mul_f64(self.factor).min(self.max))
        })
    }
}

/// How many times a request that failed with a retryable handler error is sent again.
const FAILED_REQUEST_RETRIES: u32 = 4;

/// The Cloud Control provider.
#[derive(Debug, Clone)]
pub struct CloudControlProvider {
    client: Client,
    retry: RetryPolicy,
    poll: PollPolicy,
    role_arn: Option<String>,
}

impl CloudControlProvider {
    /// A provider using `client`, with the default retry and poll policies.
    pub fn new(client: Client) -> Self {
        CloudControlProvider {
            client,
            retry: RetryPolicy::default(),
            poll: PollPolicy::default(),
            role_arn: None,
        }
    }

    /// Sends `role_arn` as the `RoleArn` of every create, update and delete: Cloud Control
    /// makes the resource with that role's permissions (the engine's provisioning role)
    /// instead of the caller's.
    pub fn with_role_arn(mut self, role_arn: Option<String>) -> Self {
        self.role_arn = role_arn;
        self
    }

    /// Replaces the retry policy of single calls.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Replaces the poll policy.
    pub fn with_poll(mut self, poll: PollPolicy) -> Self {
        self.poll = poll;
        self
    }

    /// Runs one mutating request for `request`'s resource to its terminal status, resending
    /// it under a derived token after a retryable handler failure. Errors name `request`.
    async fn run<C: Change>(
        &self,
        request: &ResourceRequest,
        change: C,
    ) -> Result<ProgressEvent, ProviderError> {
        let what = C::WHAT;
        let run = async {
            let mut attempt = 0;
            loop {
                let token = &request.token;
                let client_token = (!token.is_empty()).then(|| attempt_token(token, attempt));
                let event = retry(&self.retry, what, || {
                    let change = change.clone();
                    change.send_for(&request.resource_type, client_token.clone())
                })
                .await?
                .ok_or_else(|| {
                    ProviderError::Other(format!("{what}: no ProgressEvent in the answer"))
                })?;
                let event = self.wait(what, event).await?;
                match handler_failure(what, &event) {
                    None => return Ok(event),
                    Some(error) if error.is_retryable() && attempt < FAILED_REQUEST_RETRIES => {
                        attempt += 1;
                        if let ProviderError::Throttled(..) = error {
                            // The handler was throttled by the resource's own service.
                            let service = crate::throttle::service_of(&request.resource_type);
                            crate::throttle::report(Some(&service), None);
                        }
                        tokio::time::sleep(self.retry.backoff(attempt)).await;
                        crate::throttle::ready().await;
                    }
                    Some(error) => return Err(error),
                }
            }
        };
        run.await.map_err(|e: ProviderError| {
            e.context(format!(
                "{} ({})",
                request.logical_id, request.resource_type
            ))
        })
    }

    /// Polls `GetResourceRequestStatus` until `event` is terminal.
    async fn wait(
        &self,
        what: &str,
        mut event: ProgressEvent,
    ) -> Result<ProgressEvent, ProviderError> {
        let deadline = Instant::now() + self.poll.timeout;
        let mut delays = self.poll.delays();
        while is_pending(&event) {
            let request_token = event
                .request_token()
                .ok_or_else(|| ProviderError::Other(format!("{what}: no RequestToken to poll")))?
                .to_string();
            let delay = delays.next().unwrap_or(self.poll.max);
            if Instant::now() + delay >= deadline {
                return Err(ProviderError::Timeout(format!(
                    "{what}: request {request_token} still {:?} after {:?}",
                    event.operation_status(),
                    self.poll.timeout
                )));
            }
            tokio::time::sleep(delay).await;
            let answer = retry(&self.retry, "GetResourceRequestStatus", || async {
                self.client
                    .get_resource_request_status()
                    .request_token(&request_token)
                    .send()
                    .await
                    .map_err(|e| ProviderError::from_sdk("GetResourceRequestStatus", e))
            })
            .await?;
            event = answer.progress_event.ok_or_else(|| {
                ProviderError::Other(format!(
                    "{what}: GetResourceRequestStatus without ProgressEvent"
                ))
            })?;
        }
        Ok(event)
    }

    /// `GetResource`: the resource model, or `None` when it does not exist.
    async fn get_model(
        &self,
        resource_type: &str,
        identifier: &str,
    ) -> Result<Option<Properties>, ProviderError> {
        let answer = retry(&self.retry, "GetResource", || async {
            self.client
                .get_resource()
                .type_name(resource_type)
                .identifier(identifier)
                .send()
                .await
                .map_err(|e| ProviderError::from_sdk("GetResource", e))
        })
        .await;
        let answer = match answer {
            Ok(answer) => answer,
            Err(ProviderError::NotFound(_)) => return Ok(None),
            Err(e) => return Err(e),
        };
        let text = answer
            .resource_description()
            .and_then(|d| d.properties())
            .unwrap_or("{}");
        match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(model)) => Ok(Some(model)),
            _ => Err(ProviderError::Other(format!(
                "GetResource {resource_type} {identifier}: the properties are not a JSON object"
            ))),
        }
    }

    /// The attributes after the terminal `event` of a create or update: those its model
    /// carries when it is complete ([`attributes_in_event`]), else read (`GetResource`).
    async fn attributes_after(
        &self,
        resource_type: &str,
        identifier: &str,
        event: Option<&ProgressEvent>,
    ) -> Result<Attributes, ProviderError> {
        let schema = schema::schema(resource_type);
        match event.and_then(|e| attributes_in_event(schema, e)) {
            Some(attributes) => Ok(attributes),
            None => self.attributes_of(resource_type, identifier).await,
        }
    }

    async fn attributes_of(
        &self,
        resource_type: &str,
        identifier: &str,
    ) -> Result<Attributes, ProviderError> {
        let model = self
            .get_model(resource_type, identifier)
            .await?
            .ok_or_else(|| {
                ProviderError::NotFound(format!(
                    "{resource_type} {identifier} vanished right after it was written"
                ))
            })?;
        Ok(attributes_from_model(schema::schema(resource_type), &model))
    }
}

/// A Cloud Control request that changes a resource: sent with the resource's type and a
/// client token, it answers a `ProgressEvent`.
trait Change: Clone {
    /// The operation's name.
    const WHAT: &'static str;

    /// Sends the request for a resource of type `resource_type`, with `token`.
    fn send_for(
        self,
        resource_type: &str,
        token: Option<String>,
    ) -> impl Future<Output = Result<Option<ProgressEvent>, ProviderError>> + Send;
}

/// Implements [`Change`] for the fluent builder of a mutating operation.
macro_rules! change {
    ($builder:ty, $what:literal) => {
        impl Change for $builder {
            const WHAT: &'static str = $what;

            async fn send_for(
                self,
                resource_type: &str,
                token: Option<String>,
            ) -> Result<Option<ProgressEvent>, ProviderError> {
                let sent = self.type_name(resource_type).set_client_token(token).send();
                let answer = sent.await.map_err(|e| ProviderError::from_sdk($what, e))?;
                Ok(answer.progress_event)
            }
        }
    };
}

change!(CreateResourceFluentBuilder, "CreateResource");
change!(UpdateResourceFluentBuilder, "UpdateResource");
change!(DeleteResourceFluentBuilder, "DeleteResource");

/// True while a request is not terminal.
fn is_pending(event: &ProgressEvent) -> bool {
    matches!(
        event.operation_status(),
        Some(
            OperationStatus::Pending
                | OperationStatus::InProgress
                | OperationStatus::CancelInProgress
        )
    )
}

/// The classified error of a terminal event that did not succeed.
fn handler_failure(what: &str, event: &ProgressEvent) -> Option<ProviderError> {
    if event.operation_status() == Some(&OperationStatus::Success) {
        return None;
    }
    let code = event.error_code().map(|c| c.as_str().to_string());
    let message = event.status_message().unwrap_or_default();
    let error = match code.as_deref() {
        // Some handlers answer a taken name this way, with the `AlreadyExists` sentence
        // ("Resource of type 'T' with identifier 'I' already exists."); so does fakecloud.
        Some("GeneralServiceException")
            if message.to_ascii_lowercase().contains("already exists") =>
        {
            ProviderError::AlreadyExists(format!("GeneralServiceException: {message}"))
        }
        // Cloud Control's "the downstream service said no": not something a retry cures.
        Some("GeneralServiceException") | Some("NotStabilized") => ProviderError::Other(format!(
            "{}: {message}",
            code.as_deref().unwrap_or_default()
        )),
        Some("ServiceTimeout") | Some("ResourceConflict") => ProviderError::Transient(format!(
            "{}: {message}",
            code.as_deref().unwrap_or_default()
        )),
        _ => ProviderError::classify(code.as_deref(), message, None),
    };
    Some(error.context(format!(
        "{what} ended {}",
        event.operation_status().map(|s| s.as_str()).unwrap_or("without status")
    )))
}

/// The `ClientToken` for the idempotency `token`: the token itself when Cloud Control
/// accepts it (1-128 characters of `[-A-Za-z0-9+/=]`), else its SHA-256 in hex.
pub fn client_token(token: &str) -> String {
    let valid = !token.is_empty()
        && token.len() <= 128
        && token
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '+' | '/' | '='));
    if valid {
        token.to_string()
    } else {
        crate::aws::sha256_hex(token.as_bytes())
    }
}

/// The client token of attempt `attempt` (0: the first) of the action `token`.
pub fn attempt_token(token: &str, attempt: u32) -> String {
    if attempt == 0 {
        client_token(token)
    } else {
        client_token(&format!("{token}-r{attempt}"))
    }
}

/// The desired state sent to `CreateResource`: `properties` without the type's read-only
/// properties.
pub fn desired_state(resource_type: &str, properties: &Properties) -> Properties {
    match schema::schema(resource_type) {
        Some(s) => without_paths(properties, &s.read_only),
        None => properties.clone(),
    }
}

/// The `UpdateResource` patch document from `previous` to `desired` (empty: no change).
pub fn update_patch(
    resource_type: &str,
    previous: &Properties,
    desired: &Properties,
) -> Vec<Value> {
    let s = schema::schema(resource_type);
    let read_only: &[String] = s.map(|s| s.read_only.as_slice()).unwrap_or_default();
    let previous = without_paths(previous, read_only);
    let desired = without_paths(desired, read_only);
    let mut resend: Vec<&str> = Vec::new();
    for path in s.map(|s| s.write_only.as_slice()).unwrap_or_default() {
        if let Some(top) = path.split('/').find(|p| !p.is_empty())
            && !resend.contains(&top)
        {
            resend.push(top);
        }
    }
    diff_patch(&previous, &desired, &resend)
}

/// The `Fn::GetAtt` values in a resource model: the properties the schema marks read-only
/// (what AWS reports, never what the template sent, which may hold a resolved secret),
/// nested ones under their dotted name (`Endpoint.Address`). A `Fn::GetAtt` of a property
/// the template sets reads the recorded property. Without a schema, every property.
pub fn attributes_from_model(
    schema: Option<&ResourceSchema>,
    model: &Map<String, Value>,
) -> Attributes {
    let Some(schema) = schema else {
        return model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    };
    let mut attributes = Attributes::new();
    for path in &schema.read_only {
        let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        if segments.len() == 1
            && let Some(v) = model.get(segments[0])
        {
            attributes.insert(segments[0].to_string(), v.clone());
            continue;
        }
        if segments.len() < 2 || segments.contains(&"*") {
            continue;
        }
        let mut value = model.get(segments[0]);
        for seg in &segments[1..] {
            value = value.and_then(|v| v.get(*seg));
        }
        if let Some(v) = value {
            attributes.insert(segments.join("."), v.clone());
        }
    }
    attributes
}

/// The `Fn::GetAtt` values the model of a terminal `event` carries, when that model holds
/// every read-only property of the type's schema (nested ones too; paths through a list,
/// `*`, are not required): then no `GetResource` is needed. A schema with no read-only
/// property needs no model. `None` without a schema, or when the model lacks one.
pub fn attributes_in_event(
    schema: Option<&ResourceSchema>,
    event: &ProgressEvent,
) -> Option<Attributes> {
    let schema = schema?;
    let required: Vec<Vec<&str>> = schema
        .read_only
        .iter()
        .map(|path| {
            path.split('/')
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
        })
        .filter(|segments| !segments.is_empty() && !segments.contains(&"*"))
        .collect();
    if required.is_empty() {
        return Some(Attributes::new());
    }
    let model = match serde_json::from_str::<Value>(event.resource_model()?) {
        Ok(Value::Object(model)) => model,
        _ => return None,
    };
    let holds = |segments: &Vec<&str>| {
        let mut value = model.get(segments[0]);
        for seg in &segments[1..] {
            value = value.and_then(|v| v.get(*seg));
        }
        value.is_some()
    };
    required
        .iter()
        .all(holds)
        .then(|| attributes_from_model(Some(schema), &model))
}

/// The error of a create whose resource exists already: named by the template's identifier
/// when it gives one.
fn name_taken(request: &ResourceRequest) -> ProviderError {
    let what = match import_identifier(request) {
        Some(id) => format!("{} {id}", request.resource_type),
        None => format!("{} ({})", request.logical_id, request.resource_type),
    };
    ProviderError::name_taken(&what, "resource")
}

/// The identifier `import` looks up: the explicit physical id, else the template's value of
/// the type's primary identifier when that is a single property.
fn import_identifier(request: &ResourceRequest) -> Option<String> {
    if let Some(id) = &request.physical_id {
        return Some(id.clone());
    }
    let s = schema::schema(&request.resource_type)?;
    match s.primary_identifier.as_slice() {
        [only] => request.string_property(only).map(str::to_string),
        _ => None,
    }
}

impl Provider for CloudControlProvider {
    fn name(&self) -> &str {
        "cloudcontrol"
    }

    fn handled_properties(&self, _resource_type: &str) -> Option<&[&str]> {
        None
    }

    fn create<'a>(&'a self, request: &'a ResourceRequest) -> ProviderFuture<'a, Created> {
        Box::pin(async move {
            let desired = Value::Object(desired_state(&request.resource_type, &request.properties))
                .to_string();
            let create = self.client.create_resource().desired_state(desired);
            let create = create.set_role_arn(self.role_arn.clone());
            let event = match self.run(request, create).await {
                Err(ProviderError::AlreadyExists(_)) => return Err(name_taken(request)),
                ran => ran?,
            };
            let physical_id = event
                .identifier()
                .ok_or_else(|| {
                    ProviderError::Other("CreateResource succeeded without an Identifier".into())
                })?
                .to_string();
            let attributes = self
                .attributes_after(&request.resource_type, &physical_id, Some(&event))
                .await?;
            Ok(Created {
                sensitive: false,
                physical_id,
                attributes,
            })
        })
    }

    fn update<'a>(&'a self, request: &'a ResourceRequest) -> ProviderFuture<'a, Updated> {
        Box::pin(async move {
            let identifier = request.require_physical_id()?;
            let previous = request.previous_properties.clone().unwrap_or_default();
            let patch = update_patch(&request.resource_type, &previous, &request.properties);
            let mut event = None;
            if !patch.is_empty() {
                let update = self.client.update_resource().identifier(identifier);
                let update = update.set_role_arn(self.role_arn.clone());
                let update = update.patch_document(Value::Array(patch).to_string());
                event = Some(self.run(request, update).await?);
            }
            let attributes = self
                .attributes_after(&request.resource_type, identifier, event.as_ref())
                .await?;
            Ok(Updated {
                sensitive: false,
                physical_id: identifier.to_string(),
                attributes,
                replaced: false,
            })
        })
    }

    fn delete<'a>(&'a self, request: &'a ResourceRequest) -> ProviderFuture<'a, Deleted> {
        Box::pin(async move {
            let identifier = request.require_physical_id()?;
            let delete = self.client.delete_resource().identifier(identifier);
            let delete = delete.set_role_arn(self.role_arn.clone());
            let result = self.run(request, delete).await;
            // A resource that is gone already is deleted.
            Deleted::unless_missing(result)
        })
    }

    fn import<'a>(&'a self, request: &'a ResourceRequest) -> ProviderFuture<'a, Imported> {
        Box::pin(async move {
            let Some(identifier) = import_identifier(request) else {
                return Ok(Imported::NotDeployedYet);
            };
            Ok(
                match self.get_model(&request.resource_type, &identifier).await? {
                    Some(model) => Imported::Found {
                        attributes: attributes_from_model(
                            schema::schema(&request.resource_type),
                            &model,
                        ),
                        physical_id: identifier,
                    },
                    None => Imported::NotDeployedYet,
                },
            )
        })
    }

    fn read_current_state<'a>(
        &'a self,
        request: &'a ResourceRequest,
    ) -> ProviderFuture<'a, CurrentState> {
        Box::pin(async move {
            let identifier = request.require_physical_id()?;
            match self.get_model(&request.resource_type, identifier).await {
                Ok(Some(model)) => Ok(CurrentState::Found(desired_state(
                    &request.resource_type,
                    &model,
                ))),
                Ok(None) => Ok(CurrentState::NotFound),
                Err(e @ (ProviderError::InvalidRequest(_) | ProviderError::Other(_))) => {
                    Ok(CurrentState::CannotRead(e.to_string()))
                }
                Err(e) => Err(e),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::sdk::common::testing::props as map;

    #[test]
    fn client_tokens_fit_cloud_control_rules() {
        assert_eq!(
            client_token("deploy-1-Queue-create"),
            "deploy-1-Queue-create"
        );
        let hashed = client_token("deploy:1/Queue create");
        assert_eq!(hashed.len(), 64);
        assert!(hashed.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(hashed, client_token("deploy:1/Queue create"));
        assert_eq!(client_token(&"a".repeat(129)).len(), 64);
        assert_eq!(attempt_token("t", 0), "t");
        assert_eq!(attempt_token("t", 2), "t-r2");
    }

    #[test]
    fn desired_state_drops_read_only() {
        let got = desired_state(
            "AWS::SQS::Queue",
            &map(json!({"QueueName": "q", "Arn": "x", "QueueUrl": "u"})),
        );
        assert_eq!(Value::Object(got), json!({"QueueName": "q"}));
    }

    #[test]
    fn update_patch_for_ssm_parameter_resends_write_only_description() {
        // Description is write-only for AWS::SSM::Parameter.
        let old = map(json!({"Name": "/p", "Type": "String", "Value": "one", "Description": "d"}));
        let new = map(json!({"Name": "/p", "Type": "String", "Value": "two", "Description": "d"}));
        assert_eq!(
            Value::Array(update_patch("AWS::SSM::Parameter", &old, &new)),
            json!([
                {"op": "replace", "path": "/Value", "value": "two"},
                {"op": "add", "path": "/Description", "value": "d"}
            ])
        );
        assert!(update_patch("AWS::SSM::Parameter", &old, &old).is_empty());
    }

    #[test]
    fn update_patch_never_sends_read_only() {
        let old = map(json!({"QueueName": "q", "Arn": "a1"}));
        let new = map(json!({"QueueName": "q", "Arn": "a2", "VisibilityTimeout": 5}));
        assert_eq!(
            Value::Array(update_patch("AWS::SQS::Queue", &old, &new)),
            json!([{"op": "add", "path": "/VisibilityTimeout", "value": 5}])
        );
    }

    #[test]
    fn a_complete_model_in_the_event_spares_the_read() {
        let s = ResourceSchema {
            read_only: vec!["Arn".into(), "Endpoint/Address".into(), "Ips/*/Id".into()],
            ..ResourceSchema::default()
        };
        let event = |model: Option<Value>| {
            ProgressEvent::builder()
                .operation_status(OperationStatus::Success)
                .set_resource_model(model.map(|m| m.to_string()))
                .build()
        };
        let full = json!({"Arn": "a", "Endpoint": {"Address": "h"}, "Name": "n"});
        let got = attributes_in_event(Some(&s), &event(Some(full))).expect("complete");
        assert_eq!(got.get("Arn"), Some(&json!("a")));
        assert_eq!(got.get("Endpoint.Address"), Some(&json!("h")));
        assert_eq!(got.len(), 2, "{got:?}");
        // A model without a read-only property (fakecloud answers the desired state), no
        // model, or no schema: GetResource reads them.
        let partial = json!({"Arn": "a", "Name": "n"});
        assert_eq!(attributes_in_event(Some(&s), &event(Some(partial))), None);
        assert_eq!(attributes_in_event(Some(&s), &event(None)), None);
        assert_eq!(attributes_in_event(None, &event(Some(json!({})))), None);
        // Nothing read-only: nothing to read.
        let none = ResourceSchema::default();
        assert_eq!(
            attributes_in_event(Some(&none), &event(None)),
            Some(Attributes::new())
        );
    }

    #[test]
    fn attributes_include_nested_read_only_dotted() {
        let s = ResourceSchema {
            read_only: vec!["Arn".into(), "Endpoint/Address".into()],
            ..ResourceSchema::default()
        };
        let model = map(json!({
            "Arn": "a",
            "Endpoint": {"Address": "h", "Port": 1},
            "MasterUserPassword": "resolved-secret"
        }));
        let got = attributes_from_model(Some(&s), &model);
        assert_eq!(got.get("Arn"), Some(&json!("a")));
        assert_eq!(got.get("Endpoint.Address"), Some(&json!("h")));
        // What the template sent (here a resolved secret) is never an attribute.
        assert_eq!(got.len(), 2, "{got:?}");
    }

    #[test]
    fn a_taken_name_is_already_exists_with_the_identifier() {
        let failed = |code: &str, message: &str| {
            ProgressEvent::builder()
                .operation_status(OperationStatus::Failed)
                .error_code(code.into())
                .status_message(message)
                .build()
        };
        let sentence = "Resource of type 'AWS::S3::Bucket' with identifier 'b' already exists.";
        for event in [
            failed("AlreadyExists", sentence),
            failed("GeneralServiceException", sentence),
        ] {
            let error = handler_failure("CreateResource", &event);
            assert!(
                matches!(error, Some(ProviderError::AlreadyExists(_))),
                "{error:?}"
            );
        }
        let other = handler_failure(
            "CreateResource",
            &failed("GeneralServiceException", "Access denied"),
        );
        assert!(matches!(other, Some(ProviderError::Other(_))), "{other:?}");

        let mut request =
            ResourceRequest::new("s", "B", "AWS::S3::Bucket", map(json!({"BucketName": "b"})));
        let taken = name_taken(&request);
        assert!(
            taken
                .message()
                .starts_with("AWS::S3::Bucket b: a resource with this name already exists"),
            "{taken:?}"
        );
        request.properties.clear();
        assert!(
            name_taken(&request)
                .message()
                .starts_with("B (AWS::S3::Bucket): a resource"),
        );
    }

    #[test]
    fn poll_delays_start_short_and_grow_to_the_cap() {
        let p = PollPolicy::default();
        let d: Vec<Duration> = p.delays().take(12).collect();
        assert_eq!(d[0], Duration::from_millis(150));
        assert_eq!(d[1], Duration::from_millis(225));
        assert!(d.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(d[11], Duration::from_secs(5));
    }
}
