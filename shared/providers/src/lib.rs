//! stackflow's resource providers.
//!
//! A *provider* makes the AWS calls that create, update and delete one resource (see
//! [`Provider`]). There are two kinds:
//!
//! - SDK providers ([`sdk`]), written by hand for one resource type against the service's
//!   own API: fast (no polling), but they only handle the properties they declare
//!   ([`Provider::handled_properties`]).
//! - The Cloud Control provider ([`cloudcontrol::CloudControlProvider`]), one generic
//!   provider for every type the Cloud Control API manages: slower (asynchronous requests,
//!   polled), but it accepts every property of the type's schema.
//!
//! The [`registry::Registry`] picks one per resource. Errors are classified
//! ([`ProviderError`]) so that the caller (and [`retry::retry`]) can tell what to retry.
//!
//! Nothing in [`provider`] depends on an AWS SDK type: the engine drives providers only
//! through the contract.

pub mod assets;
pub mod aws;
pub mod cloudcontrol;
pub mod custom;
pub mod error;
pub mod lookups;
pub mod names;
pub mod patch;
pub mod provider;
pub mod registry;
pub mod retry;
pub mod router;
pub mod sdk;
pub mod throttle;

pub use error::ProviderError;
pub use provider::{
    Attributes, BoxFuture, Created, CurrentState, Deleted, Imported, Properties, Provider,
    ResourceRequest, Updated,
};
pub use registry::{Registry, Route};
pub use retry::RetryPolicy;
pub use router::{Providers, RouteError, Routed, Router};
pub use stackflow_core::ProviderKind;
