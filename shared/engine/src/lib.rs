//! stackflow's deploy engine: the task handlers of a deploy (plan, provision one
//! resource, clean up one resource, finish, fail, undo one journal entry), the scheduler
//! that runs one action per resource as soon as that resource's own dependencies are
//! done, and the embedded runner that runs a whole deploy, destroy or rollback
//! in-process. The Step Functions tasks reuse the same handlers.

pub mod aws_lookups;
pub mod definitions;
pub mod engine;
pub mod env;
pub mod lookups;
pub mod progress;
pub mod providers;
pub mod recorder;
pub mod schedule;
pub mod stack;
pub mod tasks;
pub mod worker;

pub use engine::{
    DeployOptions, Engine, EngineError, StackReport, StackStatus, deploy_stack, destroy_stack,
    rollback_stack,
};
pub use schedule::{Outcome, Report, Task, TaskStatus, reversed, run};
