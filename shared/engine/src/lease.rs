//! A lock is a lease: a run that takes a stack's lock with a lease ([`Engine::lease`])
//! renews it while it runs ([`keep`]); a lock whose lease has passed may be broken and
//! taken by another run ([`expired`]); a run that lost its lock (broken, taken over)
//! stops scheduling work, and its next append is refused by the store (every append
//! names the run that must hold the lock: fencing).
//!
//! Locks taken without a lease (Step Functions executions: their tasks come and go) are
//! held until released or broken with `stackflow unlock`. The times of a lease are in
//! [`crate::lease_time`], which the engine's lock taking reads without this module.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use stackflow_events::{EventStore, StoreError, StreamId};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::engine::{DeployOptions, Engine, EngineError};
use crate::lease_time::until;

/// `options` with a stop signal that also turns on when the run loses its lock (send
/// `true` on the returned sender): the user's stop is passed on.
pub(crate) fn stoppable(mut options: DeployOptions) -> (watch::Sender<bool>, DeployOptions) {
    let (tx, rx) = watch::channel(options.stopped());
    let mut user = options.stop.clone();
    let forward = tx.clone();
    tokio::spawn(async move {
        while user.changed().await.is_ok() {
            if *user.borrow() {
                let _ = forward.send(true);
                return;
            }
        }
    });
    options.stop = rx;
    (tx, options)
}

/// The error of a run that lost its lock: nothing more was written.
pub(crate) fn lost_error(stack: &str) -> EngineError {
    EngineError::LockLost(format!(
        "stack {stack}: this run lost the stack's lock (its lease ran out, or it was broken \
         with `stackflow unlock`): it stopped, and wrote nothing after that; the run that \
         holds the lock now (see `stackflow state show`) settles what this one left"
    ))
}

/// Renews a run's lease while it lives; dropped, it stops renewing.
pub(crate) struct Keeper {
    task: JoinHandle<()>,
    lost: Arc<AtomicBool>,
}

impl Keeper {
    /// True when the run lost its lock.
    pub(crate) fn lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Renews the lease of the lock run `deploy_id` holds on `stream` every third of the
/// engine's lease; when the store says the run does not hold it any more, reports it,
/// flips [`Keeper::lost`] and sends `stop`. `None` when the engine takes no leases.
pub(crate) fn keep<S: EventStore + 'static>(
    engine: &Arc<Engine<S>>,
    stream: StreamId,
    deploy_id: String,
    stop: watch::Sender<bool>,
) -> Option<Keeper> {
    let lease = engine.lease?;
    let lost = Arc::new(AtomicBool::new(false));
    let flag = lost.clone();
    let engine = engine.clone();
    let task = tokio::spawn(async move {
        loop {
            tokio::time::sleep(lease / 3).await;
            match engine
                .store
                .renew_lock(&stream, &deploy_id, &until(lease))
                .await
            {
                Ok(()) => {}
                Err(StoreError::NotHolder { holder, .. }) => {
                    let now = holder
                        .map(|h| format!("{} ({} {})", h.who, h.operation, h.deploy_id))
                        .unwrap_or_else(|| "nobody".into());
                    engine.note(
                        &stream.stack,
                        &format!(
                            "this run lost the stack's lock (now held by {now}): it stops \
                             here, and writes nothing more"
                        ),
                    );
                    flag.store(true, Ordering::SeqCst);
                    let _ = stop.send(true);
                    return;
                }
                Err(StoreError::Unsupported(_)) => return,
                // A failed renewal is tried again at the next tick, well before the end.
                Err(_) => {}
            }
        }
    });
    Some(Keeper { task, lost })
}
