//! Support code for stackflow's integration tests.
//!
//! The tests talk to a real local AWS emulator, fakecloud, run as a separate
//! process (it is never linked in): see [`emulator`] for how it is found,
//! started, shared by the tests of one binary, and stopped. [`cli`] runs the `stackflow`
//! binary against it, and [`secret_scan`] looks for known plaintexts in what was written.
//! [`deploy`] builds an engine in the test process; [`latency`] and [`faults`] are proxies
//! that delay or fault its calls, [`inventory`] asks the emulator what it holds, and
//! [`audit`] checks recorded states against it; [`worker`] runs an engine through Step
//! Functions, its tasks run by an in-process `stackflow worker`; [`lambda`] makes Lambda
//! functions whose code runs (through the emulator's container stand-in); [`installed`]
//! is the engine installed by `stackflow engine deploy`, and [`triggers`] drives and
//! observes its triggers. [`round_trip`] holds what the provider round trips share: one
//! resource created, read back, updated, refused a create-only change, deleted twice and
//! then gone, through its provider against the emulator.

pub mod audit;
pub mod cli;
pub mod deploy;
pub mod drift_cli;
pub mod emulator;
pub mod events;
pub mod faults;
pub mod gate;
pub mod http1;
pub mod iam;
pub mod installed;
pub mod inventory;
pub mod lambda;
pub mod latency;
pub mod round_trip;
pub mod secret_scan;
pub mod triggers;
pub mod worker;

pub use emulator::{Emulator, unique_name};
