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
}

impl<S: EventStore> Recorder<S> {
    /// Reads the stream and folds it.
    pub async fn load(store: Arc<S>, stream: StreamId) -> StoreResult<Recorder<S>> {
        let state = stackflow_events::load_state(store.as_ref(), &stream).await?;
        Ok(Recorder {
            store,
            stream,
            state: Mutex::new(state),
        })
    }

    /// Reads the stream again (after someone else appended).
    pub async fn reload(&self) -> StoreResult<()> {
        let state = stackflow_events::load_state(self.store.as_ref(), &self.stream).await?;
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
        self.state.lock().unwrap_or_else(|p| p.into_inner())
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
        let seq = appended.seq();
        let mut state = self.lock();
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
        Ok(seq)
    }

    /// Stores a snapshot of the stream as the store holds it now. The state is read
    /// again first, so the snapshot is a fold of the log itself, whatever this process
    /// saw; later loads start from it instead of folding the whole history.
    pub async fn snapshot(&self) -> StoreResult<u64> {
        let state = stackflow_events::load_state(self.store.as_ref(), &self.stream).await?;
        let seq = state.seq;
        self.store
            .put_snapshot(&self.stream, seq, &state.to_snapshot())
            .await?;
        *self.lock() = state;
        Ok(seq)
    }
}
