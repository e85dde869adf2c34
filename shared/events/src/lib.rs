//! stackflow's event log.
//!
//! Each stack has one stream of [`event::Event`]s per region; everything stackflow knows
//! about a stack is in it. The stack state, the rollback journal and the drift baselines
//! are pure folds of the stream ([`projection`]). Streams live in an [`store::EventStore`]:
//! the embedded store ([`sqlite`], a database file under `.stackflow/`) or the DynamoDB
//! store ([`dynamo`]); both pass the same conformance suite.
//!
//! # Features
//!
//! - `embedded` (default): the SQLite store, [`sqlite`].
//! - `dynamodb` (default): the DynamoDB store, [`dynamo`].
//! - `testing`: for tests only: the conformance suite every store passes
//!   (`conformance`), synthetic histories (`testing`), and `memory`: an in-memory store
//!   with the embedded store's semantics, and a wrapper that makes a store fail after a
//!   given number of appends.
//!
//! Without features the crate is the event types, the store trait and the projections,
//! and needs no async runtime.

#[cfg(feature = "testing")]
pub mod conformance;
#[cfg(feature = "dynamodb")]
pub mod dynamo;
pub mod event;
#[cfg(feature = "testing")]
pub mod memory;
pub mod projection;
#[cfg(feature = "embedded")]
pub mod sqlite;
pub mod store;
#[cfg(feature = "testing")]
pub mod testing;

pub use event::{Event, NewEvent, StoredEvent};
#[cfg(feature = "testing")]
pub use memory::{FaultyStore, MemoryStore};
pub use store::{
    Appended, EventStore, LockChange, Precondition, Rewrite, Rewritten, StoreError, StoreResult,
    StreamId,
};

use projection::StackState;

/// The state of a stack: the latest snapshot (when one is stored and readable) plus the
/// events after it, or a fold of the whole stream.
pub async fn load_state<S: EventStore>(store: &S, stream: &StreamId) -> StoreResult<StackState> {
    Ok(load_state_counted(store, stream).await?.0)
}

/// [`load_state`], and how many events it folded after the snapshot (the whole stream's
/// when there is none): a reader that folded many may write a snapshot, so that the next
/// one folds fewer.
pub async fn load_state_counted<S: EventStore>(
    store: &S,
    stream: &StreamId,
) -> StoreResult<(StackState, usize)> {
    let (mut state, after) = match store.latest_snapshot(stream).await? {
        Some((seq, body)) => match StackState::from_snapshot(&body) {
            Some(s) if s.seq == seq => (s, seq),
            _ => (StackState::default(), 0),
        },
        None => (StackState::default(), 0),
    };
    let tail = store.read(stream, after).await?;
    for e in &tail {
        state.apply(e);
    }
    Ok((state, tail.len()))
}
