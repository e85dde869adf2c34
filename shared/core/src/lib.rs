//! The pure core of stackflow.
//!
//! Everything in this crate is synchronous and free of AWS SDK crates, so it is tested
//! offline in milliseconds. Values that only AWS can give (availability zones, exports,
//! dynamic references, the state of deployed resources) come in through small traits.

pub mod asset_manifest;
pub mod assets;
pub mod cidr;
pub mod deployable;
pub mod drift;
pub mod dynref;
pub mod error;
pub mod graph;
pub mod intrinsics;
pub mod kind;
pub mod limits;
pub mod mask;
pub mod partition;
pub mod plan;
pub mod preflight;
pub mod schema;
pub mod secrets;
pub mod stateful;
pub mod template;

pub use error::{ErrorKind, Path, Result, TemplateError};
pub use kind::ProviderKind;
