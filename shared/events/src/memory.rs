//! An event store in memory, for tests: the embedded store's semantics without a file,
//! a database or a runtime.
//!
//! [`MemoryStore`] behaves like the embedded store (`SqliteStore`) in every respect the
//! [`EventStore`] contract names (it passes the same [`crate::conformance`] suite):
//! positions are dense from 1 per stream, an append deduplicates by key (same digest:
//! [`Appended::AlreadyThere`], other content: [`StoreError::Conflict`]) before it checks
//! its precondition, the lock is checked and taken or released with the append, the
//! registry lists the streams that have an event (ordered by region, then stack), and only
//! the latest snapshot of a stream is kept. Bodies are stored as JSON text and decoded on
//! read, as the embedded store does, so an event reads back exactly as it would from a
//! file.
//!
//! Every operation runs under one mutex, without awaiting: the store needs no async
//! runtime, and concurrent appenders are serialized just as SQLite's write lock serializes
//! them. [`FaultyStore`] wraps any store and fails every write once a given number of
//! appends succeeded, as a process killed after its N-th event would.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;

use crate::event::{DecodeError, Event, Holder, NewEvent, StoredEvent, current_version, now};
use crate::store::{
    Appended, EventStore, LockChange, Precondition, Rewrite, Rewritten, StoreError, StoreResult,
    StreamId,
};

/// An event store in memory. Cheap to create ([`MemoryStore::new`]); clones share the same
/// streams, so a test can hand one clone to the engine and inspect another.
#[derive(Clone, Default)]
pub struct MemoryStore {
    inner: Arc<Mutex<Streams>>,
}

/// Every stream's events, locks and snapshots.
#[derive(Default)]
struct Streams {
    /// The streams that have an event (the registry), with their events.
    streams: BTreeMap<StreamId, Stream>,
    /// The holder of each locked stack's lock.
    locks: HashMap<StreamId, Holder>,
    /// The latest snapshot of each stream: the position it covers and its JSON text.
    snapshots: HashMap<StreamId, (u64, String)>,
}

/// One stream's events.
#[derive(Default)]
struct Stream {
    /// The events in order; the one at index `i` is at position `i + 1`.
    events: Vec<Row>,
    /// The position and digest of the event stored under each key.
    keys: HashMap<String, (u64, String)>,
}

/// One stored event, as the embedded store keeps it.
struct Row {
    key: String,
    type_name: &'static str,
    v: u32,
    at: String,
    /// The event's JSON text ([`Event::to_body`]).
    body: String,
}

/// An event ready to be stored: serialized and digested before the store is locked.
struct Pending {
    key: String,
    type_name: &'static str,
    body: String,
    digest: String,
}

impl Pending {
    fn new(event: &NewEvent) -> Self {
        Pending {
            key: event.key.clone(),
            type_name: event.event.type_name(),
            body: serde_json::to_string(&event.event.to_body()).expect("events serialize"),
            digest: event.digest(),
        }
    }
}

impl fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let streams = self.lock();
        f.debug_struct("MemoryStore")
            .field("streams", &streams.streams.len())
            .field(
                "events",
                &streams
                    .streams
                    .values()
                    .map(|s| s.events.len())
                    .sum::<usize>(),
            )
            .field("locks", &streams.locks.len())
            .finish()
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        MemoryStore::default()
    }

    fn lock(&self) -> MutexGuard<'_, Streams> {
        // Nothing below panics half-way through a change; a panic elsewhere while the
        // lock was held left the data whole.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Streams {
    /// The position of the event already stored under `row.key`, if any: the same content
    /// is that position, other content a [`StoreError::Conflict`].
    fn dedupe(&self, stream: &StreamId, row: &Pending) -> StoreResult<Option<u64>> {
        let found = self.streams.get(stream).and_then(|s| s.keys.get(&row.key));
        match found {
            None => Ok(None),
            Some((seq, digest)) if *digest == row.digest => Ok(Some(*seq)),
            Some(_) => Err(StoreError::Conflict {
                key: row.key.clone(),
            }),
        }
    }

    /// Checks `pre` against the stream's lock and applies it (take or release).
    fn apply_precondition(&mut self, stream: &StreamId, pre: &Precondition) -> StoreResult<()> {
        match pre.check(self.locks.get(stream))? {
            LockChange::Keep => {}
            LockChange::Take(holder) => {
                self.locks.insert(stream.clone(), holder);
            }
            LockChange::Release => {
                self.locks.remove(stream);
            }
            LockChange::Fence => {
                if let Some(holder) = self.locks.get_mut(stream) {
                    holder.fenced = Some(now());
                }
            }
        }
        Ok(())
    }

    /// Stores `row` at the stream's next position, which it returns.
    fn insert(&mut self, stream: &StreamId, row: Pending) -> u64 {
        let s = self.streams.entry(stream.clone()).or_default();
        let seq = s.events.len() as u64 + 1;
        s.keys.insert(row.key.clone(), (seq, row.digest));
        s.events.push(Row {
            key: row.key,
            type_name: row.type_name,
            v: current_version(row.type_name),
            at: now(),
            body: row.body,
        });
        seq
    }

    /// Deduplicates, checks the precondition and stores, all or nothing.
    fn append(
        &mut self,
        stream: &StreamId,
        row: Pending,
        pre: &Precondition,
    ) -> StoreResult<Appended> {
        if let Some(seq) = self.dedupe(stream, &row)? {
            return Ok(Appended::AlreadyThere(seq));
        }
        // A refused precondition changes nothing: only a successful check takes or
        // releases the lock.
        self.apply_precondition(stream, pre)?;
        Ok(Appended::New(self.insert(stream, row)))
    }

    /// Rewrites bodies in place, drops the snapshot and appends the record, all or
    /// nothing (see [`EventStore::rewrite`]).
    fn rewrite(
        &mut self,
        stream: &StreamId,
        rewrite: &Rewrite,
        pre: &Precondition,
    ) -> StoreResult<Rewritten> {
        let record = Pending::new(&rewrite.record);
        let already = self.dedupe(stream, &record)?;
        let rows = self.streams.get(stream).map(|s| s.events.as_slice());
        for (seq, event) in &rewrite.events {
            let stored = usize::try_from(*seq)
                .ok()
                .and_then(|i| i.checked_sub(1))
                .and_then(|i| rows.and_then(|rows| rows.get(i)));
            match stored {
                Some(row) if row.type_name == event.type_name() => {}
                Some(row) => {
                    return Err(StoreError::Backend(format!(
                        "memory store: stream {}: event {seq} is a {}, not a {}: a rewrite keeps each event's type",
                        stream.key(),
                        row.type_name,
                        event.type_name()
                    )));
                }
                None => {
                    return Err(StoreError::Backend(format!(
                        "memory store: stream {}: there is no event {seq} to rewrite",
                        stream.key()
                    )));
                }
            }
        }
        if already.is_none() {
            self.apply_precondition(stream, pre)?;
        }
        let s = self.streams.entry(stream.clone()).or_default();
        for (seq, event) in &rewrite.events {
            let row = &mut s.events[(*seq - 1) as usize];
            let new = NewEvent::new(row.key.clone(), event.clone());
            row.body = serde_json::to_string(&event.to_body()).expect("events serialize");
            row.v = current_version(row.type_name);
            s.keys.insert(row.key.clone(), (*seq, new.digest()));
        }
        let snapshots_dropped = u64::from(self.snapshots.remove(stream).is_some());
        let record = match already {
            Some(seq) => Appended::AlreadyThere(seq),
            None => Appended::New(self.insert(stream, record)),
        };
        Ok(Rewritten {
            seqs: rewrite.events.iter().map(|(seq, _)| *seq).collect(),
            record,
            snapshots_dropped,
            residue: vec![],
        })
    }

    fn read(&self, stream: &StreamId, after: u64) -> StoreResult<Vec<StoredEvent>> {
        let Some(s) = self.streams.get(stream) else {
            return Ok(Vec::new());
        };
        let skip = usize::try_from(after).unwrap_or(usize::MAX);
        s.events
            .iter()
            .enumerate()
            .skip(skip)
            .map(|(i, row)| decode(stream, i as u64 + 1, row))
            .collect()
    }
}

/// Decodes one stored event, as the embedded store decodes a row.
fn decode(stream: &StreamId, seq: u64, row: &Row) -> StoreResult<StoredEvent> {
    let decode_error = |source| StoreError::Decode {
        stream: stream.key(),
        seq,
        source,
    };
    let body: Value = serde_json::from_str(&row.body).map_err(|e| {
        decode_error(DecodeError::Malformed {
            type_name: row.type_name.to_string(),
            version: row.v,
            message: e.to_string(),
        })
    })?;
    let event = Event::from_body(row.type_name, row.v, body).map_err(decode_error)?;
    Ok(StoredEvent {
        seq,
        key: row.key.clone(),
        at: row.at.clone(),
        v: row.v,
        event,
    })
}

impl EventStore for MemoryStore {
    async fn append(
        &self,
        stream: &StreamId,
        event: &NewEvent,
        pre: &Precondition,
    ) -> StoreResult<Appended> {
        let row = Pending::new(event);
        self.lock().append(stream, row, pre)
    }

    async fn read(&self, stream: &StreamId, after: u64) -> StoreResult<Vec<StoredEvent>> {
        self.lock().read(stream, after)
    }

    async fn lock_holder(&self, stream: &StreamId) -> StoreResult<Option<Holder>> {
        Ok(self.lock().locks.get(stream).cloned())
    }

    async fn break_lock(&self, stream: &StreamId, by: &str) -> StoreResult<Option<Holder>> {
        let mut streams = self.lock();
        let Some(previous) = streams.locks.remove(stream) else {
            return Ok(None);
        };
        let event = NewEvent::new(
            format!("lock-broken/{}/{}", previous.deploy_id, now()),
            Event::LockBroken {
                by: by.to_string(),
                previous: previous.clone(),
            },
        );
        let row = Pending::new(&event);
        // As in the embedded store: the key carries the time to the millisecond, and a
        // break that meets its own key again appends nothing.
        if streams.dedupe(stream, &row)?.is_none() {
            streams.insert(stream, row);
        }
        Ok(Some(previous))
    }

    async fn put_snapshot(&self, stream: &StreamId, seq: u64, body: &Value) -> StoreResult<()> {
        let body = serde_json::to_string(body).expect("values serialize");
        let mut streams = self.lock();
        // Only the latest snapshot is ever read: one covering less is not kept.
        match streams.snapshots.get(stream) {
            Some((latest, _)) if *latest > seq => {}
            _ => {
                streams.snapshots.insert(stream.clone(), (seq, body));
            }
        }
        Ok(())
    }

    async fn latest_snapshot(&self, stream: &StreamId) -> StoreResult<Option<(u64, Value)>> {
        let streams = self.lock();
        streams
            .snapshots
            .get(stream)
            .map(|(seq, body)| {
                let body = serde_json::from_str(body).map_err(|e| {
                    StoreError::Backend(format!(
                        "memory store: stream {}: unreadable snapshot at {seq}: {e}",
                        stream.key()
                    ))
                })?;
                Ok((*seq, body))
            })
            .transpose()
    }

    async fn streams(&self) -> StoreResult<Vec<StreamId>> {
        Ok(self.lock().streams.keys().cloned().collect())
    }

    async fn rewrite(
        &self,
        stream: &StreamId,
        rewrite: &Rewrite,
        pre: &Precondition,
    ) -> StoreResult<Rewritten> {
        self.lock().rewrite(stream, rewrite, pre)
    }

    async fn renew_lock(&self, stream: &StreamId, deploy_id: &str, until: &str) -> StoreResult<()> {
        let mut streams = self.lock();
        match streams.locks.get_mut(stream) {
            Some(holder) if holder.deploy_id == deploy_id => {
                holder.expires = Some(until.to_string());
                Ok(())
            }
            other => Err(StoreError::NotHolder {
                deploy_id: deploy_id.to_string(),
                holder: other.cloned().map(Box::new),
            }),
        }
    }
}

/// The start of the message of every error [`FaultyStore`] makes up.
pub const INJECTED_FAULT: &str = "injected fault";

/// Whether `error` was made up by a [`FaultyStore`] (rather than returned by the store it
/// wraps).
pub fn is_injected(error: &StoreError) -> bool {
    matches!(error, StoreError::Backend(message) if message.starts_with(INJECTED_FAULT))
}

/// A store that dies after a given number of successful appends: from then on every write
/// (append, [`EventStore::break_lock`], [`EventStore::put_snapshot`],
/// [`EventStore::rewrite`]) fails with a
/// [`StoreError::Backend`] for which [`is_injected`] holds, and reaches the wrapped store
/// no more, as if the process had been killed right after its N-th event. Reads always go
/// through.
///
/// An append counts when the wrapped store answers it with `Ok` ([`Appended::New`] or
/// [`Appended::AlreadyThere`]), and so does a rewrite (which appends its record); a
/// `break_lock` counts when it appended `LockBroken`. An
/// append the wrapped store refuses (a conflict, a held lock) does not count. Concurrent
/// appends never get past the limit: each takes its turn before it reaches the wrapped
/// store, and gives it back when it fails.
///
/// Clones share the limit and the counts. A typical test runs a deploy through
/// `FaultyStore::failing_after(store.clone(), n)` and then again through `store`, for
/// every `n` below the number of appends a whole deploy makes.
#[derive(Clone)]
pub struct FaultyStore<S> {
    inner: S,
    faults: Arc<Faults>,
}

/// The limit and the counts of a [`FaultyStore`].
struct Faults {
    /// Appends allowed in all; `u64::MAX` for no limit.
    limit: AtomicU64,
    /// Appends that succeeded or are on their way to the wrapped store, under `turns`.
    turns: Mutex<u64>,
    /// Appends that succeeded.
    succeeded: AtomicU64,
    /// Writes failed by the wrapper.
    injected: AtomicU64,
    /// Of those, writes to the log (appends, `break_lock`, rewrites).
    refused_appends: AtomicU64,
}

impl<S: fmt::Debug> fmt::Debug for FaultyStore<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultyStore")
            .field("inner", &self.inner)
            .field("limit", &self.limit())
            .field("appended", &self.appended())
            .field("injected", &self.injected())
            .finish()
    }
}

impl<S> FaultyStore<S> {
    /// `inner` without a limit: every call goes through, and appends are counted.
    pub fn new(inner: S) -> Self {
        FaultyStore {
            inner,
            faults: Arc::new(Faults {
                limit: AtomicU64::new(u64::MAX),
                turns: Mutex::new(0),
                succeeded: AtomicU64::new(0),
                injected: AtomicU64::new(0),
                refused_appends: AtomicU64::new(0),
            }),
        }
    }

    /// `inner`, failing every write after `n` successful appends (`0`: from the first).
    pub fn failing_after(inner: S, n: u64) -> Self {
        let store = FaultyStore::new(inner);
        store.fail_after(n);
        store
    }

    /// Fails every write once `n` appends in all (counting those already made) have
    /// succeeded.
    pub fn fail_after(&self, n: u64) {
        self.faults.limit.store(n, Ordering::SeqCst);
    }

    /// Lifts the limit: every call goes through again.
    pub fn heal(&self) {
        self.faults.limit.store(u64::MAX, Ordering::SeqCst);
    }

    /// The limit, if one is set.
    pub fn limit(&self) -> Option<u64> {
        Some(self.faults.limit.load(Ordering::SeqCst)).filter(|&n| n != u64::MAX)
    }

    /// How many appends (and `break_lock`s that appended) succeeded through this wrapper.
    pub fn appended(&self) -> u64 {
        self.faults.succeeded.load(Ordering::SeqCst)
    }

    /// How many writes the wrapper failed.
    pub fn injected(&self) -> u64 {
        self.faults.injected.load(Ordering::SeqCst)
    }

    /// How many writes to the log (appends, `break_lock`s, rewrites) the wrapper failed;
    /// unlike [`FaultyStore::injected`], a refused snapshot or lease renewal is not one.
    pub fn refused_appends(&self) -> u64 {
        self.faults.refused_appends.load(Ordering::SeqCst)
    }

    /// Whether the limit is reached: writes fail from now on.
    pub fn is_dead(&self) -> bool {
        self.limit().is_some_and(|n| self.appended() >= n)
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// The wrapped store, unwrapped.
    pub fn into_inner(self) -> S {
        self.inner
    }

    fn turns(&self) -> MutexGuard<'_, u64> {
        self.faults.turns.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The error of a write past the limit, counted.
    fn fault(&self, what: &str) -> StoreError {
        self.faults.injected.fetch_add(1, Ordering::SeqCst);
        StoreError::Backend(format!(
            "{INJECTED_FAULT}: {what} refused after {} successful appends",
            self.appended()
        ))
    }

    /// Takes a turn for one append, or fails when the limit leaves none.
    fn take_turn(&self, what: &str) -> StoreResult<()> {
        let mut turns = self.turns();
        if *turns >= self.faults.limit.load(Ordering::SeqCst) {
            drop(turns);
            self.faults.refused_appends.fetch_add(1, Ordering::SeqCst);
            return Err(self.fault(what));
        }
        *turns += 1;
        Ok(())
    }

    /// Ends a turn: counts a success, or gives the turn back.
    fn end_turn(&self, succeeded: bool) {
        if succeeded {
            self.faults.succeeded.fetch_add(1, Ordering::SeqCst);
        } else {
            *self.turns() -= 1;
        }
    }

    /// Fails when the limit is reached.
    fn check_alive(&self, what: &str) -> StoreResult<()> {
        if *self.turns() >= self.faults.limit.load(Ordering::SeqCst) {
            return Err(self.fault(what));
        }
        Ok(())
    }
}

impl<S: EventStore> EventStore for FaultyStore<S> {
    async fn append(
        &self,
        stream: &StreamId,
        event: &NewEvent,
        pre: &Precondition,
    ) -> StoreResult<Appended> {
        self.take_turn(&format!("append of {}", event.key))?;
        let result = self.inner.append(stream, event, pre).await;
        self.end_turn(result.is_ok());
        result
    }

    async fn read(&self, stream: &StreamId, after: u64) -> StoreResult<Vec<StoredEvent>> {
        self.inner.read(stream, after).await
    }

    async fn lock_holder(&self, stream: &StreamId) -> StoreResult<Option<Holder>> {
        self.inner.lock_holder(stream).await
    }

    async fn break_lock(&self, stream: &StreamId, by: &str) -> StoreResult<Option<Holder>> {
        self.take_turn("break_lock")?;
        let result = self.inner.break_lock(stream, by).await;
        self.end_turn(matches!(result, Ok(Some(_))));
        result
    }

    async fn put_snapshot(&self, stream: &StreamId, seq: u64, body: &Value) -> StoreResult<()> {
        self.check_alive("put_snapshot")?;
        self.inner.put_snapshot(stream, seq, body).await
    }

    async fn latest_snapshot(&self, stream: &StreamId) -> StoreResult<Option<(u64, Value)>> {
        self.inner.latest_snapshot(stream).await
    }

    async fn streams(&self) -> StoreResult<Vec<StreamId>> {
        self.inner.streams().await
    }

    async fn renew_lock(&self, stream: &StreamId, deploy_id: &str, until: &str) -> StoreResult<()> {
        self.check_alive("renew_lock")?;
        self.inner.renew_lock(stream, deploy_id, until).await
    }

    async fn rewrite(
        &self,
        stream: &StreamId,
        rewrite: &Rewrite,
        pre: &Precondition,
    ) -> StoreResult<Rewritten> {
        self.take_turn("rewrite")?;
        let result = self.inner.rewrite(stream, rewrite, pre).await;
        self.end_turn(result.is_ok());
        result
    }
}
