//! The provider contract: what the engine hands a provider and what it gets back.
//!
//! # Why boxed futures
//!
//! The [`registry::Registry`](crate::registry::Registry) holds providers of different types
//! behind `Arc<dyn Provider>`, so the trait must be dyn-compatible. An `async fn` (or a
//! return-position `impl Future`) in a trait is not, so every asynchronous method returns a
//! [`BoxFuture`] (`Pin<Box<dyn Future + Send>>`). An implementation writes
//! `Box::pin(async move { ... })`. The one allocation per call is negligible next to an
//! AWS round trip.

use std::future::Future;
use std::pin::Pin;

use indexmap::IndexMap;
use serde_json::{Map, Value};

use crate::error::ProviderError;

/// A boxed, `Send` future, the return type of every asynchronous [`Provider`] method.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What every [`Provider`] operation returns: a [`BoxFuture`] of the answer or a
/// [`ProviderError`].
pub type ProviderFuture<'a, T> = BoxFuture<'a, Result<T, ProviderError>>;

/// A resource's `Properties`, intrinsic functions already resolved.
pub type Properties = Map<String, Value>;

/// The values `Fn::GetAtt` reads, by attribute name (`Arn`, `Endpoint.Address`, ...).
pub type Attributes = IndexMap<String, Value>;

/// One operation on one resource, as the engine asks for it.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceRequest {
    /// The stack the resource belongs to (used in generated physical names).
    pub stack_name: String,
    /// The resource's logical id in the template.
    pub logical_id: String,
    /// The resource type, e.g. `AWS::SQS::Queue`.
    pub resource_type: String,
    /// The desired properties (resolved).
    pub properties: Properties,
    /// The properties of the last successful deploy (`update` only; `None` otherwise).
    pub previous_properties: Option<Properties>,
    /// The physical id: the recorded one for `update`/`delete`/`read_current_state`, an
    /// explicit override (`--resource Logical=Physical`) for `import`, `None` for `create`.
    pub physical_id: Option<String>,
    /// The idempotency token, derived by the caller from (deploy, resource, action): the
    /// same on every retry of one action, different for another action. A provider uses
    /// it so that a retried call never makes a second resource (Cloud Control's
    /// `ClientToken`; the hash in a generated physical name).
    pub token: String,
    /// The stack's id (the `AWS::StackId` ARN the engine recorded with its first
    /// deploy), for providers that send it (custom resources); `None` when not known.
    pub stack_id: Option<String>,
}

impl ResourceRequest {
    /// A request with no previous properties, no physical id and an empty token.
    pub fn new(
        stack_name: impl Into<String>,
        logical_id: impl Into<String>,
        resource_type: impl Into<String>,
        properties: Properties,
    ) -> Self {
        ResourceRequest {
            stack_name: stack_name.into(),
            logical_id: logical_id.into(),
            resource_type: resource_type.into(),
            properties,
            previous_properties: None,
            physical_id: None,
            token: String::new(),
            stack_id: None,
        }
    }

    /// The id an import looks for: the explicit one (`--resource Logical=Physical`), else
    /// the name the template gives in `property`.
    pub fn explicit_or_named(&self, property: &str) -> Option<String> {
        self.physical_id
            .clone()
            .or_else(|| self.string_property(property).map(str::to_string))
    }

    /// The physical id, or an [`ProviderError::InvalidRequest`] saying the operation needs
    /// one.
    pub fn require_physical_id(&self) -> Result<&str, ProviderError> {
        self.physical_id.as_deref().ok_or_else(|| {
            ProviderError::InvalidRequest(format!(
                "{} ({}): no physical id given for an operation on an existing resource",
                self.logical_id, self.resource_type
            ))
        })
    }

    /// The string value of top-level property `name`, if set to a string.
    pub fn string_property(&self, name: &str) -> Option<&str> {
        self.properties.get(name).and_then(Value::as_str)
    }
}

/// The answer to a create.
#[derive(Debug, Clone, PartialEq)]
pub struct Created {
    /// True when the attributes are secret as a whole (a custom resource that answered
    /// `NoEcho: true`): usable by `Fn::GetAtt` during the deploy, recorded masked.
    pub sensitive: bool,
    /// The id AWS knows the resource by (what `Ref` returns for most types).
    pub physical_id: String,
    /// The `Fn::GetAtt` values.
    pub attributes: Attributes,
}

/// The answer to an update.
#[derive(Debug, Clone, PartialEq)]
pub struct Updated {
    /// True when the attributes are secret as a whole (a custom resource that answered
    /// `NoEcho: true`): usable by `Fn::GetAtt` during the deploy, recorded masked.
    pub sensitive: bool,
    /// The physical id after the update (a new one when `replaced`).
    pub physical_id: String,
    /// The `Fn::GetAtt` values after the update.
    pub attributes: Attributes,
    /// True when the provider replaced the resource itself (the old one is then the
    /// caller's to delete).
    pub replaced: bool,
}

/// The answer to a delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Deleted {
    /// The resource is gone (also when it was gone before the call).
    Done,
    /// The provider deliberately left the resource in place.
    Skipped {
        /// Why, for the deploy's report.
        reason: String,
    },
    /// Nothing can delete the resource any more (a custom resource whose handler is
    /// gone): it leaves the stack as if retained, with why.
    Abandoned {
        /// Why, for the deploy's report (a warning).
        reason: String,
    },
}

impl Deleted {
    /// The outcome of one AWS delete call (inside a provider): done when it succeeded, and
    /// also when AWS says the resource is not there (a delete of a missing resource
    /// succeeds). Not for a provider's own answer, which may be skipped or abandoned: the
    /// engine reads that once, in its step (`Step::delete`).
    pub fn unless_missing<T>(result: Result<T, ProviderError>) -> Result<Deleted, ProviderError> {
        match result {
            Ok(_) | Err(ProviderError::NotFound(_)) => Ok(Deleted::Done),
            Err(e) => Err(e),
        }
    }
}

/// The answer to an import.
#[derive(Debug, Clone, PartialEq)]
pub enum Imported {
    /// The resource exists.
    Found {
        /// Its physical id.
        physical_id: String,
        /// Its `Fn::GetAtt` values (empty when the physical id answers them all).
        attributes: Attributes,
    },
    /// No such resource exists: a normal answer, not a failure.
    NotDeployedYet,
    /// The provider cannot look this type up; only an explicit physical id adopts it.
    Unsupported,
}

/// What AWS holds now for a resource (drift detection).
#[derive(Debug, Clone, PartialEq)]
pub enum CurrentState {
    /// The properties, with the template's keys and shape.
    Found(Properties),
    /// AWS says the resource does not exist.
    NotFound,
    /// The state cannot be read (unsupported type, no permission, ...): why.
    CannotRead(String),
}

/// Makes the AWS calls for resources of the types it is registered for.
///
/// `create`, `update` and `delete` are required; `import` and `read_current_state` answer
/// "unsupported" unless implemented. Every method is safe to call again with the same
/// request (same [`ResourceRequest::token`]) after a failure or a crash: it never makes a
/// second resource.
pub trait Provider: Send + Sync {
    /// A short name for logs and reports, e.g. `sdk:AWS::SSM::Parameter`, `cloudcontrol`.
    fn name(&self) -> &str;

    /// The top-level properties this provider handles for `resource_type`: `None` means
    /// every property (Cloud Control). The registry sends a resource that sets any other
    /// property to Cloud Control, so no property is ever dropped without notice.
    fn handled_properties(&self, resource_type: &str) -> Option<&[&str]>;

    /// Creates the resource from `request.properties`.
    fn create<'a>(&'a self, request: &'a ResourceRequest) -> ProviderFuture<'a, Created>;

    /// Updates the resource `request.physical_id` from `request.previous_properties` to
    /// `request.properties`. A change the provider cannot make in place is a
    /// [`ProviderError::NotUpdatable`] (the caller then replaces the resource).
    fn update<'a>(&'a self, request: &'a ResourceRequest) -> ProviderFuture<'a, Updated>;

    /// Deletes the resource `request.physical_id`; a resource that is already gone is
    /// [`Deleted::Done`].
    fn delete<'a>(&'a self, request: &'a ResourceRequest) -> ProviderFuture<'a, Deleted>;

    /// Finds an existing resource: the id is `request.physical_id` (an explicit override)
    /// or the name the template gives; a describe call confirms it exists.
    fn import<'a>(&'a self, request: &'a ResourceRequest) -> ProviderFuture<'a, Imported> {
        let _ = request;
        Box::pin(async { Ok(Imported::Unsupported) })
    }

    /// Whether the existing resource `request.physical_id` carries the proof that the
    /// create `request` (its token) made it: the mark that create left
    /// ([`crate::sdk::marks`]), or an attribute only it could have set. A replayed
    /// create that finds its name taken adopts the resource only on this proof; "already
    /// exists" proves nothing. `false` (no proof) unless the provider can tell.
    fn made_by<'a>(&'a self, request: &'a ResourceRequest) -> ProviderFuture<'a, bool> {
        let _ = request;
        Box::pin(async { Ok(false) })
    }

    /// Reads what AWS holds now for `request.physical_id`, in the template's shape.
    fn read_current_state<'a>(
        &'a self,
        request: &'a ResourceRequest,
    ) -> ProviderFuture<'a, CurrentState> {
        Box::pin(async move {
            Ok(CurrentState::CannotRead(format!(
                "provider {} cannot read {} resources",
                self.name(),
                request.resource_type
            )))
        })
    }
}
