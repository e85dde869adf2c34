//! stackflow's deploy engine: orchestration only. A deploy of one stack is a set of task
//! handlers ([`deploy::Deployment`]: plan, provision one resource, clean up one resource,
//! finish, fail), with [`reconcile`] (interrupted calls), [`rollback`] (the journal undone)
//! and [`destroy`]. Every action on a resource is recorded through one [`step`], under keys
//! built in [`keys`]. The embedded [`runner`] runs the handlers in-process on the
//! [`schedule`]r; [`sfn`] runs the same handlers as Step Functions tasks.
//!
//! Providers and AWS lookups come in through traits
//! ([`stackflow_providers::router::Router`], [`lookups::Lookups`]), so the whole
//! lifecycle is tested in-process with a fake provider and an in-memory store.

pub mod deploy;
pub mod destroy;
pub mod digest;
pub mod drift;
pub mod engine;
mod gather;
pub mod import;
pub mod keys;
mod lease;
mod lease_time;
pub mod limits;
pub mod lookups;
pub mod nested;
mod observe;
pub mod orphan;
mod phase;
pub mod preflight;
pub mod progress;
pub mod reconcile;
pub mod recorder;
pub mod report;
pub mod rollback;
mod rotation;
mod run;
pub mod runner;
pub mod schedule;
pub mod scrub;
mod secrets;
pub mod sfn;
pub mod stack;
mod step;
mod throttling;

pub use deploy::{Cleanup, Deployment, PlanDocument};
pub use destroy::{destroy_stack, destroy_stack_as};
pub use engine::{DeployOptions, Engine, EngineError, ExpectedPlan, StaleCheck, never_stale};
pub use keys::new_id;
pub use report::{Done, Failure, RollbackReport, StackReport, StackStatus, Undone};
pub use rollback::{rollback_stack, rollback_stack_as};
pub use runner::deploy_stack;
pub use schedule::{Gate, Outcome, Report, Task, TaskStatus, reversed, run, run_gated};
pub use sfn::{definitions, env, tasks, worker};
