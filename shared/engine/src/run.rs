//! What every kind of run (deploy, destroy, rollback, import, drift fix, refresh, orphan,
//! scrub) does with the stack's lock: taking it for the runs that record no `DeployStarted`
//! with its lease kept ([`lock`]), releasing it at the end, knowing a run resumed by a
//! later invocation, and knowing a run that has ended already.

use stackflow_events::event::Event;
use stackflow_events::{EventStore, Precondition};

use std::sync::Arc;

use crate::engine::{Engine, EngineError};
use crate::keys::{RunEvent, run_key};
use crate::lease::Keeper;
use crate::recorder::Recorder;

/// The lock a run holds, its lease renewed for as long as this lives.
pub(crate) struct Held {
    keeper: Option<Keeper>,
}

impl Held {
    /// Releases the lock run `id` holds ([`release`]); refused when the run lost it
    /// meanwhile (its lease ran out, or it was broken): nothing is written then.
    pub(crate) async fn release<S: EventStore>(
        self,
        rec: &Recorder<S>,
        id: &str,
    ) -> Result<(), EngineError> {
        if self.keeper.as_ref().is_some_and(Keeper::lost) {
            return Err(crate::lease::lost_error(&rec.stream().stack));
        }
        release(rec, id).await
    }
}

/// Takes the stack's lock for run `id` of `operation` (a `LockTaken`: the runs that
/// record no `DeployStarted`: import, drift's accept and revert, refresh, orphan, scrub) and
/// keeps its lease while the returned [`Held`] lives, as a deploy's and a destroy's
/// are kept: a run longer than one lease is not taken for gone.
pub(crate) async fn lock<S: EventStore + 'static>(
    engine: &Arc<Engine<S>>,
    rec: &Recorder<S>,
    id: &str,
    operation: &str,
) -> Result<Held, EngineError> {
    engine.lock_run(rec, id, operation).await?;
    // Nothing of these runs waits on a stop signal: a lost lock is told at the release,
    // and every append after it is refused by the store.
    let (stop, _) = tokio::sync::watch::channel(false);
    Ok(Held {
        keeper: crate::lease::keep(engine, rec.stream().clone(), id.to_string(), stop),
    })
}

/// Releases the lock run `id` holds (a `LockReleased` under the run's `released` key).
pub(crate) async fn release<S: EventStore>(rec: &Recorder<S>, id: &str) -> Result<(), EngineError> {
    rec.append(
        run_key(id, RunEvent::Released),
        Event::LockReleased {
            deploy_id: id.to_string(),
        },
        &Precondition::ReleaseLock(id.to_string()),
    )
    .await?;
    Ok(())
}

/// Appends `last` (under `key`, while run `id` holds the lock) and releases the lock, in
/// that order and, where the store can, in one write: the run's last event and the
/// release are never apart.
pub(crate) async fn end_with<S: EventStore>(
    rec: &Recorder<S>,
    id: &str,
    key: String,
    last: Event,
) -> Result<(), EngineError> {
    rec.append_in_order(ending(id, key, last).into()).await?;
    Ok(())
}

/// The appends of [`end_with`]: `last` under the lock, then the lock's release.
pub(crate) fn ending(id: &str, key: String, last: Event) -> [(String, Event, Precondition); 2] {
    [
        (key, last, Precondition::HoldsLock(id.to_string())),
        (
            run_key(id, RunEvent::Released),
            Event::LockReleased {
                deploy_id: id.to_string(),
            },
            Precondition::ReleaseLock(id.to_string()),
        ),
    ]
}

/// True when run `id` holds `rec`'s lock: a run resumed by a later invocation of the same
/// Step Functions execution (its lock is taken once).
pub(crate) fn resumed<S: EventStore>(rec: &Recorder<S>, id: &str) -> bool {
    rec.state().lock.as_ref().is_some_and(|h| h.deploy_id == id)
}

/// The events of `stack`'s stream when run `id` has ended there (it released its lock),
/// else `None`: a run invoked again after it ended (its answer was lost) reports how it
/// ended instead of starting over under the same id.
pub(crate) async fn ended_run<S: EventStore + 'static>(
    engine: &Engine<S>,
    stack: &str,
    id: &str,
) -> Result<Option<Vec<Event>>, EngineError> {
    let events: Vec<Event> = engine
        .store
        .read(&engine.stream(stack), 0)
        .await?
        .into_iter()
        .map(|e| e.event)
        .collect();
    let ended = events
        .iter()
        .any(|e| matches!(e, Event::LockReleased { deploy_id } if deploy_id == id));
    Ok(ended.then_some(events))
}
