//! stackflow's event log.
//!
//! Each stack has one stream of [`event::Event`]s per region; everything stackflow knows
//! about a stack is in it. The stack state, the rollback journal and the drift baselines
//! are pure folds of the stream ([`projection`]). Streams live in an [`store::EventStore`]:
//! the embedded store ([`sqlite`], a database file under `.stackflow/`) or the DynamoDB
//! store ([`dynamo`]); both pass the same [`conformance`] suite.

pub mod conformance;
#[cfg(feature = "dynamodb")]
pub mod dynamo;
pub mod event;
pub mod projection;
#[cfg(feature = "embedded")]
pub mod sqlite;
pub mod store;

pub use event::{Event, NewEvent, StoredEvent};
pub use store::{Appended, EventStore, Precondition, StoreError, StoreResult, StreamId};
