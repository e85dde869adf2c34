//! The engine on AWS Step Functions: the deploy's handlers as tasks that take and return
//! references ([`tasks`]), the state machine definitions they run in ([`definitions`]),
//! the activity worker ([`worker`]), and the configuration of a Lambda task ([`env`]).
//! The only part of the engine that talks to AWS itself.

mod artifacts;
pub mod deadline;
pub mod definitions;
pub mod digest;
mod dispatch;
pub mod env;
pub mod errors;
mod gates;
#[cfg(test)]
mod gates_model;
pub mod history;
pub mod parts;
pub mod payloads;
mod release;
pub mod tasks;
pub mod triggers;
pub mod worker;

pub use artifacts::{MAX_OBJECT_BYTES, read_body};
