//! Projections: the stack state, the rollback journal and the drift baselines, as one pure
//! and total fold of a stack's stream.
//!
//! [`StackState::apply`] takes any event in any state and never fails: an event that does
//! not fit (an update of a resource the state does not have) is applied as far as it
//! makes sense. A snapshot is the serialized state with the position it covers; folding
//! the rest of the stream onto it gives the same state as folding the whole stream.
//!
//! The state's types and queries are in `state`, the journal's in `journal` (with the
//! rollback events), the fold's dispatch and the deploy, resource and lock events in
//! `apply`, and the baseline, drift and scrub events in `baseline`.

mod apply;
mod baseline;
mod journal;
mod state;

pub use journal::{Journal, JournalEntry, JournalStep};
pub use state::{DeployStatus, LastDeploy, PendingIntent, Predecessor, ResourceState, StackState};

use state::pending_key;

#[cfg(test)]
mod tests;
