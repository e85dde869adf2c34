//! Appending a deploy's events while keeping its projection of the stack current.

use std::sync::{Arc, Mutex, MutexGuard};

use stackflow_events::event::{Event, StoredEvent, current_version, now};
use stackflow_events::projection::StackState;
use stackflow_events::{Appended, EventStore, NewEvent, Precondition, StoreResult, StreamId};

/// One stack's stream and its state as of the last event this process appended or read.
///
/// Every append goes to the store first and is applied to the local state only once the
/// store took it, so the local state never holds something the log does not.
pub struct Recorder<S> {
    store: Arc<S>,
    stream: StreamId,
    state: Mutex<StackState>,
    /// The stream as last read from the store (a fold of the log itself, not of what
    /// this process appended): a snapshot folds only the events after it.
    read: Mutex<StackState>,
}

impl<S: EventStore> Recorder<S> {
    /// Reads the stream and folds it.
    pub async fn load(store: Arc<S>, stream: StreamId) -> StoreResult<Recorder<S>> {
        Ok(Recorder::load_counted(store, stream).await?.0)
    }

    /// [`Recorder::load`], and how many events it folded after the latest snapshot.
    pub async fn load_counted(
        store: Arc<S>,
        stream: StreamId,
    ) -> StoreResult<(Recorder<S>, usize)> {
        let (state, tail) = stackflow_events::load_state_counted(store.as_ref(), &stream).await?;
        let recorder = Recorder {
            store,
            stream,
            read: Mutex::new(state.clone()),
            state: Mutex::new(state),
        };
        Ok((recorder, tail))
    }

    /// Reads the stream again (after someone else appended).
    pub async fn reload(&self) -> StoreResult<()> {
        let state = stackflow_events::load_state(self.store.as_ref(), &self.stream).await?;
        *lock(&self.read) = state.clone();
        *self.lock() = state;
        Ok(())
    }

    /// The stream.
    pub fn stream(&self) -> &StreamId {
        &self.stream
    }

    /// The store.
    pub fn store(&self) -> &Arc<S> {
        &self.store
    }

    /// The state now. Do not hold it across an `.await`.
    pub fn state(&self) -> MutexGuard<'_, StackState> {
        self.lock()
    }

    fn lock(&self) -> MutexGuard<'_, StackState> {
        lock(&self.state)
    }

    /// Appends `event` under `key` if `pre` holds, and applies it. A retried append (the
    /// key is there with the same event) is applied only if this process had not seen it.
    pub async fn append(
        &self,
        key: impl Into<String>,
        event: Event,
        pre: &Precondition,
    ) -> StoreResult<u64> {
        let new = NewEvent::new(key, event);
        let appended = self.store.append(&self.stream, &new, pre).await?;
        Ok(apply_appended(&mut self.lock(), new, appended))
    }

    /// Appends `events` in order, each under its key and precondition, and applies each
    /// the store took ([`EventStore::append_in_order`]: the store may write them in one
    /// transaction). Stops at the first refused: the later ones are not appended.
    pub async fn append_in_order(
        &self,
        events: Vec<(String, Event, Precondition)>,
    ) -> StoreResult<Vec<u64>> {
        let events: Vec<(NewEvent, Precondition)> = events
            .into_iter()
            .map(|(key, event, pre)| (NewEvent::new(key, event), pre))
            .collect();
        let appended = self.store.append_in_order(&self.stream, &events).await?;
        let mut state = self.lock();
        Ok(events
            .into_iter()
            .zip(appended)
            .map(|((new, _), appended)| apply_appended(&mut state, new, appended))
            .collect())
    }

    /// The stream as the store holds it now, folded from the log itself (whatever this
    /// process saw): the last read state and the events after it, up to the first
    /// position not there yet (a write in flight). Safe to call while a run appends: what
    /// it folds is a prefix of the log.
    pub async fn fold_log(&self) -> StoreResult<StackState> {
        let mut state = lock(&self.read).clone();
        for e in self.store.read(&self.stream, state.seq).await? {
            if e.seq != state.seq + 1 {
                break;
            }
            state.apply(&e);
        }
        Ok(state)
    }

    /// Stores `state` (a [`Recorder::fold_log`]) as the stream's snapshot: later loads
    /// start from it instead of folding the whole history. Returns the position it covers.
    pub async fn put_snapshot(&self, state: StackState) -> StoreResult<u64> {
        let seq = state.seq;
        self.store
            .put_snapshot(&self.stream, seq, &state.to_snapshot())
            .await?;
        let mut read = lock(&self.read);
        if read.seq < seq {
            *read = state;
        }
        Ok(seq)
    }
}

/// Applies `new`, which the store took as `appended`, to `state`, unless it is a retried
/// append (already there) that `state` has seen; returns its position.
fn apply_appended(state: &mut StackState, new: NewEvent, appended: Appended) -> u64 {
    let seq = appended.seq();
    let seen = matches!(appended, Appended::AlreadyThere(_)) && seq <= state.seq;
    if !seen {
        let v = current_version(new.event.type_name());
        state.apply(&StoredEvent {
            seq,
            key: new.key,
            at: now(),
            v,
            event: new.event,
        });
    }
    seq
}

fn lock(state: &Mutex<StackState>) -> MutexGuard<'_, StackState> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}
