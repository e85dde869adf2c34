//! stackflow's deploy engine, free of AWS: the scheduler that runs one action
//! per resource as soon as that resource's own dependencies are done.

pub mod schedule;

pub use schedule::{Outcome, Report, Task, TaskStatus, reversed, run};
