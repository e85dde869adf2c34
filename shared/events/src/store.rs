//! The event store: one stream per (stack, region), conditional appends, a lock per
//! stack.

use std::fmt;
use std::future::Future;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::event::{Event, Holder, NewEvent, StoredEvent};

/// One stack's stream: a stack name in a region.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct StreamId {
    /// The region.
    pub region: String,
    /// The stack name.
    pub stack: String,
}

impl StreamId {
    /// The stream of `stack` in `region`.
    pub fn new(region: impl Into<String>, stack: impl Into<String>) -> Self {
        StreamId {
            region: region.into(),
            stack: stack.into(),
        }
    }

    /// The stream's key as stores write it: `<region>/<stack>`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.region, self.stack)
    }

    /// Reads a key written by [`Self::key`].
    pub fn from_key(key: &str) -> Option<StreamId> {
        key.split_once('/')
            .map(|(region, stack)| StreamId::new(region, stack))
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} in {}", self.stack, self.region)
    }
}

/// What must hold for an append to happen; checked atomically with the append.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Precondition {
    /// Nothing.
    None,
    /// Take the stack's lock: the append happens only when no one holds it (or this same
    /// deploy already does, for a retried append).
    TakeLock(Holder),
    /// The given deploy must hold the lock.
    HoldsLock(String),
    /// The given deploy must hold the lock, which is released with the append. When no
    /// one holds it any more, the append still happens (a retried release).
    ReleaseLock(String),
    /// The given deploy must hold the lock, and the lock must not be fenced: the intent of
    /// a forward action of a deploy on Step Functions ([`StoreError::Fenced`] once its Fail
    /// began).
    HoldsOpenLock(String),
    /// The given deploy must hold the lock, which is fenced with the append (its
    /// [`Holder::fenced`] set, kept when it was already): from then on, appends under
    /// [`Precondition::HoldsOpenLock`] are refused, every other append of the holder goes
    /// on. The fence ends with the lock.
    FenceLock(String),
}

/// What an append does to the stream's lock, once its precondition held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockChange {
    /// The lock stays as it is.
    Keep,
    /// The lock is taken by this holder.
    Take(Holder),
    /// The lock is released.
    Release,
    /// The lock is fenced (its holder's `fenced` set, when it was not).
    Fence,
}

impl Precondition {
    /// Checks this precondition against the stream's lock holder now (`current`): the
    /// one rule of every store that reads the lock in its transaction (the DynamoDB store
    /// writes the same rule as condition expressions; the conformance suite holds them
    /// together). `Err` is the refusal to return; `Ok` says what the append does to the
    /// lock.
    pub fn check(&self, current: Option<&Holder>) -> StoreResult<LockChange> {
        match (self, current) {
            (Precondition::None, _) => Ok(LockChange::Keep),
            (Precondition::TakeLock(holder), None) => Ok(LockChange::Take(holder.clone())),
            (Precondition::TakeLock(holder), Some(now)) if now.deploy_id == holder.deploy_id => {
                Ok(LockChange::Keep)
            }
            (Precondition::TakeLock(_), Some(now)) => Err(StoreError::Locked {
                holder: Box::new(now.clone()),
            }),
            (Precondition::HoldsLock(id), Some(now)) if now.deploy_id == *id => {
                Ok(LockChange::Keep)
            }
            (Precondition::HoldsOpenLock(id), Some(now)) if now.deploy_id == *id => {
                match now.fenced {
                    None => Ok(LockChange::Keep),
                    Some(_) => Err(StoreError::Fenced {
                        deploy_id: id.clone(),
                    }),
                }
            }
            (Precondition::FenceLock(id), Some(now)) if now.deploy_id == *id => {
                Ok(match now.fenced {
                    None => LockChange::Fence,
                    Some(_) => LockChange::Keep,
                })
            }
            (Precondition::ReleaseLock(_), None) => Ok(LockChange::Keep),
            (Precondition::ReleaseLock(id), Some(now)) if now.deploy_id == *id => {
                Ok(LockChange::Release)
            }
            (
                Precondition::HoldsLock(id)
                | Precondition::ReleaseLock(id)
                | Precondition::HoldsOpenLock(id)
                | Precondition::FenceLock(id),
                now,
            ) => Err(StoreError::NotHolder {
                deploy_id: id.clone(),
                holder: now.cloned().map(Box::new),
            }),
        }
    }
}

/// What an append did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Appended {
    /// The event was appended at this position.
    New(u64),
    /// An event with the same key and content was already there, at this position:
    /// nothing was written (a retried append).
    AlreadyThere(u64),
}

impl Appended {
    /// The event's position, either way.
    pub fn seq(self) -> u64 {
        match self {
            Appended::New(s) | Appended::AlreadyThere(s) => s,
        }
    }
}

/// An event store failure.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// Another event with different content is stored under the same key.
    #[error("conflicting append: key `{key}` already holds a different event")]
    Conflict {
        /// The key.
        key: String,
    },
    /// The stack's lock is held by someone else.
    #[error(
        "stack is locked by {} ({} {}, since {}); if that run is gone, run `stackflow unlock --stack <NAME>`",
        .holder.who, .holder.operation, .holder.deploy_id, .holder.since
    )]
    Locked {
        /// The holder.
        holder: Box<Holder>,
    },
    /// The append needed the lock, and the deploy does not hold it.
    #[error("deploy {deploy_id} does not hold the stack's lock{}", match .holder { Some(h) => format!(" (held by {} for {})", h.who, h.deploy_id), None => String::new() })]
    NotHolder {
        /// The deploy.
        deploy_id: String,
        /// Who holds it instead, if anyone.
        holder: Option<Box<Holder>>,
    },
    /// The deploy holds the lock, but its lock is fenced: it began failing, and no new
    /// action of it may begin.
    #[error("deploy {deploy_id} is failing: its lock is fenced, and no new action of it begins")]
    Fenced {
        /// The deploy.
        deploy_id: String,
    },
    /// A stored event could not be read.
    #[error("stream {stream}: event {seq}: {source}")]
    Decode {
        /// The stream.
        stream: String,
        /// The position.
        seq: u64,
        /// What is wrong.
        source: crate::event::DecodeError,
    },
    /// The store itself failed (I/O, AWS, database).
    #[error("{0}")]
    Backend(String),
    /// The store cannot do what was asked (e.g. rewrite stored events).
    #[error("{0}")]
    Unsupported(String),
}

/// The result type of stores.
pub type StoreResult<T> = Result<T, StoreError>;

/// Stored events to rewrite in place, and the event that records it (see
/// [`EventStore::rewrite`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Rewrite {
    /// The new content of each event rewritten, by position. Each is of the type of the
    /// event stored there; its key, time and position stay.
    pub events: Vec<(u64, Event)>,
    /// The event appended with the rewrite, recording it (an `EventsRewritten`).
    pub record: NewEvent,
}

/// What a rewrite did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rewritten {
    /// The positions whose bodies were replaced, in order.
    pub seqs: Vec<u64>,
    /// Where the record is.
    pub record: Appended,
    /// How many snapshots of the stream were dropped.
    pub snapshots_dropped: u64,
    /// Earlier copies of the old bodies the store cannot reach (backups, old versions, a
    /// write-ahead log another process keeps open), in words.
    pub residue: Vec<String>,
}

/// A place where streams of events live. Implemented by the embedded store (SQLite under
/// `.stackflow/`) and the DynamoDB store; both pass the same conformance suite.
pub trait EventStore: Send + Sync {
    /// Appends one event, if `pre` holds. The same key with the same content again is a
    /// no-op that reports [`Appended::AlreadyThere`]; the same key with other content is a
    /// [`StoreError::Conflict`]. Many appenders may append to one stream at once; none of
    /// their events is lost.
    fn append(
        &self,
        stream: &StreamId,
        event: &NewEvent,
        pre: &Precondition,
    ) -> impl Future<Output = StoreResult<Appended>> + Send;

    /// Appends `events` in this order, each if its precondition holds, and stops at the
    /// first that fails (returning its error: the later ones are not appended). A store may
    /// write them in one transaction: the DynamoDB store writes appends under the lock
    /// followed by its release together, so a run's last event and the release of its lock
    /// cost one write and are never apart. The default appends them one by one.
    fn append_in_order(
        &self,
        stream: &StreamId,
        events: &[(NewEvent, Precondition)],
    ) -> impl Future<Output = StoreResult<Vec<Appended>>> + Send {
        async move {
            let mut appended = Vec::with_capacity(events.len());
            for (event, pre) in events {
                appended.push(self.append(stream, event, pre).await?);
            }
            Ok(appended)
        }
    }

    /// Every event of the stream after position `after` (0 for all), in order, following
    /// every page.
    ///
    /// While appenders are at work, a store that hands out positions before it writes the
    /// event (the DynamoDB store) can show position n+1 before n: a reader that must not
    /// miss anything reads when no one holds the lock, or reads again from the first gap.
    /// Snapshots are taken only when the stack is not locked, for the same reason.
    fn read(
        &self,
        stream: &StreamId,
        after: u64,
    ) -> impl Future<Output = StoreResult<Vec<StoredEvent>>> + Send;

    /// Who holds the stack's lock, if anyone.
    fn lock_holder(
        &self,
        stream: &StreamId,
    ) -> impl Future<Output = StoreResult<Option<Holder>>> + Send;

    /// Breaks the lock explicitly, appending `LockBroken` naming `by`; returns the holder
    /// it had (`None` when it was not held: nothing is appended).
    fn break_lock(
        &self,
        stream: &StreamId,
        by: &str,
    ) -> impl Future<Output = StoreResult<Option<Holder>>> + Send;

    /// Stores a snapshot of a projection covering the stream up to `seq`.
    fn put_snapshot(
        &self,
        stream: &StreamId,
        seq: u64,
        body: &Value,
    ) -> impl Future<Output = StoreResult<()>> + Send;

    /// The latest snapshot, with the position it covers.
    fn latest_snapshot(
        &self,
        stream: &StreamId,
    ) -> impl Future<Output = StoreResult<Option<(u64, Value)>>> + Send;

    /// Every stream the store has.
    fn streams(&self) -> impl Future<Output = StoreResult<Vec<StreamId>>> + Send;

    /// Replaces the bodies of stored events in place, drops every snapshot of the stream
    /// (each is a fold of the old bodies), and appends `rewrite.record`, if `pre` holds
    /// (checked before anything is rewritten). The one exception to an append-only log,
    /// for what must not stay stored (a secret an older stackflow wrote in plaintext):
    /// nothing else uses it.
    ///
    /// Each rewritten event keeps its position, key, type and time; its body is the new
    /// event at the current version, and its digest the new body's (a retried append of
    /// the old content is now a [`StoreError::Conflict`]). An event of another type than
    /// the one stored at its position, or a position with no event, fails the whole
    /// rewrite before anything is changed. The record's key makes it idempotent: a rewrite
    /// retried with the same record rewrites the same bodies again and appends nothing.
    ///
    /// A store that cannot rewrite (the default) says so with [`StoreError::Unsupported`]
    /// and changes nothing.
    fn rewrite(
        &self,
        stream: &StreamId,
        rewrite: &Rewrite,
        pre: &Precondition,
    ) -> impl Future<Output = StoreResult<Rewritten>> + Send {
        let _ = (rewrite, pre);
        let message = format!(
            "stream {stream}: this event store cannot rewrite stored events (the embedded \
             SQLite store and the DynamoDB store can)"
        );
        async move { Err(StoreError::Unsupported(message)) }
    }

    /// Extends the lease of the lock that run `deploy_id` holds until `until` (RFC 3339).
    /// [`StoreError::NotHolder`] when it does not hold it any more (broken, maybe taken by
    /// another run): the caller must stop writing. A store that keeps no leases (the
    /// default) says so with [`StoreError::Unsupported`]; its locks never expire.
    fn renew_lock(
        &self,
        stream: &StreamId,
        deploy_id: &str,
        until: &str,
    ) -> impl Future<Output = StoreResult<()>> + Send {
        let _ = (deploy_id, until);
        let message = format!("stream {stream}: this event store keeps no lock leases");
        async move { Err(StoreError::Unsupported(message)) }
    }
}
