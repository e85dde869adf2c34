//! Drift baselines (`observedProperties`): what AWS holds for a resource right after
//! stackflow made, changed or adopted it, read in the template's shape with its secrets
//! kept out ([`stackflow_core::drift::observed_baseline`]).
//!
//! A deploy never waits for a baseline before starting the next resource: the read runs
//! beside the dependents ([`Observations`]) and its `BaselineRecorded` event follows the
//! resource's own. The run settles every read before it ends.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use indexmap::IndexMap;
use serde_json::{Map, Value};
use stackflow_core::drift::{Resolved, confirm_masked, masked_positions, observed_baseline};
use stackflow_events::event::{Baseline, Event, ProviderKind, RefusalCause};
use stackflow_events::projection::ResourceState;
use stackflow_events::{EventStore, NewEvent, Precondition, StreamId};
use stackflow_providers::provider::{CurrentState, ResourceRequest};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::engine::Engine;
use crate::keys::{RunEvent, baselines_key, new_id, run_key};
use crate::recorder::Recorder;
use crate::secrets::resolve_dynamic;

/// What AWS holds now for the resource `request` names (its physical id set), through
/// the provider that made it (`kind`), else a Cloud Control read. A nested stack and a
/// custom resource have nothing to read.
pub(crate) async fn read_now<S: EventStore + 'static>(
    engine: &Engine<S>,
    request: &ResourceRequest,
    kind: ProviderKind,
) -> CurrentState {
    let ty = &request.resource_type;
    let first = match kind {
        ProviderKind::NestedStack | ProviderKind::Custom => {
            return CurrentState::CannotRead(format!(
                "{ty} is not read: stackflow compares a {} by its own resources",
                if kind == ProviderKind::Custom {
                    "custom resource's handler owns what it made; it"
                } else {
                    "nested stack"
                }
            ));
        }
        ProviderKind::CloudControl => None,
        _ => Some(read_with(engine, request, kind).await),
    };
    match first {
        Some(CurrentState::CannotRead(_)) | None => {
            read_with(engine, request, ProviderKind::CloudControl).await
        }
        Some(found) => found,
    }
}

async fn read_with<S: EventStore + 'static>(
    engine: &Engine<S>,
    request: &ResourceRequest,
    kind: ProviderKind,
) -> CurrentState {
    let provider = match engine.providers.for_recorded(&request.resource_type, kind) {
        Ok(p) => p,
        Err(why) => return CurrentState::CannotRead(why.to_string()),
    };
    crate::step::read_current(provider.as_ref(), request).await
}

/// The request a read of recorded resource `r` (logical id `id`) sends.
pub(crate) fn read_request(stack: &str, id: &str, r: &ResourceState) -> ResourceRequest {
    let mut request = ResourceRequest::new(stack, id, &r.resource_type, r.properties.clone());
    request.physical_id = Some(r.physical_id.clone());
    request
}

/// What the dynamic references of `props` resolve to now, for the comparisons that
/// need them (values in memory only); empty when they cannot be resolved, with why (a
/// comparison then leaves the positions that hold them uncompared).
pub(crate) async fn resolved_refs<S: EventStore + 'static>(
    engine: &Engine<S>,
    props: &Map<String, Value>,
) -> (Resolved, Option<String>) {
    let mut refs = Resolved::new();
    match resolve_dynamic(engine.lookups.as_ref(), props).await {
        Ok(resolved) => {
            for (reference, value) in resolved.values {
                refs.insert(reference, value);
            }
            (refs, None)
        }
        Err((_, why)) => (refs, Some(why)),
    }
}

/// Seed 003: a deploy that changes nothing clears the `***` positions of a baseline that
/// the resource's own references confirm now ([`confirm_masked`]), and reads the baseline
/// of each resource that has none yet ([`missing_baselines`]). Best effort: it takes the
/// stack's lock only when there is something to record, and any failure leaves the
/// baselines as they are. Returns how many baselines were recorded.
pub(crate) async fn confirm_masks<S: EventStore + 'static>(
    engine: &Arc<Engine<S>>,
    stack: &str,
    recorder: &Recorder<S>,
) -> usize {
    let candidates: Vec<(String, ResourceState, Map<String, Value>)> = {
        let s = recorder.state();
        s.resources
            .iter()
            .filter_map(|(id, r)| match &r.baseline {
                Some(Baseline::Recorded { observed })
                    if !masked_positions(observed).is_empty()
                        && Value::Object(r.properties.clone())
                            .to_string()
                            .contains("{{resolve:") =>
                {
                    Some((id.clone(), r.clone(), observed.clone()))
                }
                _ => None,
            })
            .collect()
    };
    let state = recorder.state().clone();
    let mut cleared = missing_baselines(engine, stack, &state, &HashSet::new()).await;
    for (id, r, observed) in candidates {
        let CurrentState::Found(aws) =
            read_now(engine, &read_request(stack, &id, &r), r.provider).await
        else {
            continue;
        };
        let (refs, _) = resolved_refs(engine, &r.properties).await;
        if let Some(baseline) = confirm_masked(&observed, &r.properties, &aws, &refs) {
            cleared.push((id, baseline));
        }
    }
    if cleared.is_empty() {
        return 0;
    }
    let run = new_id("o");
    let holder = engine.holder(&run, "baseline");
    let locked = Event::LockTaken {
        holder: holder.clone(),
    };
    if engine
        .take_lock(recorder, run_key(&run, RunEvent::Locked), locked, holder)
        .await
        .is_err()
    {
        return 0;
    }
    let pre = Precondition::HoldsLock(run.clone());
    let mut n = 0;
    for (id, observed) in cleared {
        let event = Event::BaselineRecorded {
            logical_id: id.clone(),
            baseline: Baseline::Recorded { observed },
        };
        if recorder
            .append(
                crate::keys::item_key(&run, crate::keys::ItemEvent::Confirmed, &id),
                event,
                &pre,
            )
            .await
            .is_ok()
        {
            n += 1;
        }
    }
    let _ = crate::run::release(recorder, &run).await;
    n
}

/// How many missing baselines [`missing_baselines`] reads at once.
const MISSING_READS_AT_ONCE: usize = 16;

/// The baselines of the resources of `state` that have none (a read that failed when they
/// were made or imported), read now, [`MISSING_READS_AT_ONCE`] at a time: seed 003's
/// refresh. Those in `recorded` (given a baseline since `state` was folded) are skipped;
/// custom resources and nested stacks have nothing to read; a read that fails again
/// leaves the resource without one.
pub(crate) async fn missing_baselines<S: EventStore + 'static>(
    engine: &Arc<Engine<S>>,
    stack: &str,
    state: &stackflow_events::projection::StackState,
    recorded: &HashSet<String>,
) -> Vec<(String, Map<String, Value>)> {
    if baselines_off() {
        return vec![];
    }
    let room = Arc::new(tokio::sync::Semaphore::new(MISSING_READS_AT_ONCE));
    let mut reads = tokio::task::JoinSet::new();
    for (id, r) in &state.resources {
        if r.baseline.is_some()
            || recorded.contains(id)
            || matches!(r.provider, ProviderKind::Custom | ProviderKind::NestedStack)
        {
            continue;
        }
        let (engine, room) = (engine.clone(), room.clone());
        let (id, r, request) = (id.clone(), r.clone(), read_request(stack, id, r));
        reads.spawn(async move {
            let _turn = room.acquire_owned().await;
            let current = read_now(&engine, &request, r.provider).await;
            match baseline_of(&r.properties, &current) {
                Some(Baseline::Recorded { observed }) => Some((id, observed)),
                _ => None,
            }
        });
    }
    let mut out: Vec<(String, Map<String, Value>)> =
        reads.join_all().await.into_iter().flatten().collect();
    // In the state's order, so that the events they become are in a stable order.
    out.sort_by_key(|(id, _)| state.resources.get_index_of(id));
    out
}

/// The baseline of a resource recorded with `recorded` properties (secrets as their
/// reference text or masks) that AWS answers `current` for; `None` when AWS could not
/// be read.
pub(crate) fn baseline_of(
    recorded: &Map<String, Value>,
    current: &CurrentState,
) -> Option<Baseline> {
    match current {
        CurrentState::Found(aws) => Some(Baseline::Recorded {
            observed: observed_baseline(recorded, aws).baseline,
        }),
        CurrentState::NotFound | CurrentState::CannotRead(_) => None,
    }
}

/// True when a resource whose baseline is `current` may be given a new one by a read
/// after an operation: never over a refusal (only a create, an update or a replacement
/// decides an `incomplete-resolution` refusal away, in the fold, before the read).
pub(crate) fn may_observe(current: Option<&Baseline>) -> bool {
    !matches!(
        current,
        Some(Baseline::Refused {
            cause: RefusalCause::UnverifiableParameter | RefusalCause::IncompleteResolution
        })
    )
}

/// One baseline read to run: the resource, how to reach it, and where its event goes.
pub(crate) struct Observation {
    /// The stream of the stack.
    pub stream: StreamId,
    /// The run that holds the lock.
    pub run: String,
    /// The key of its own event (the key of the event that records it with others
    /// is made from theirs).
    pub key: String,
    /// The read request: physical id set, properties as sent (in memory only).
    pub request: ResourceRequest,
    /// The provider that made it.
    pub kind: ProviderKind,
    /// The properties as recorded.
    pub recorded: Map<String, Value>,
}

/// `STACKFLOW_NO_BASELINE` set (to anything): creates and updates record no baseline, so
/// that a benchmark can measure what the reads add to a deploy
/// (`import_drift_measure.rs`). Drift then compares with the recorded properties. Read
/// once, here only; not for production use.
fn baselines_off() -> bool {
    static OFF: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OFF.get_or_init(|| std::env::var_os("STACKFLOW_NO_BASELINE").is_some())
}

/// The baseline reads a run started and has not settled yet, and the resources whose
/// baseline they recorded (appended beside the run's recorder, whose state does not show
/// them).
///
/// Reads that end while earlier baselines are being appended wait in `buffer`, and are
/// appended together as one `BaselinesRecorded` by the next append: a deploy of many
/// resources writes a handful of baseline events, not one per resource.
#[derive(Default)]
pub struct Observations {
    running: Mutex<Vec<JoinHandle<()>>>,
    recorded: Arc<Mutex<HashSet<String>>>,
    buffer: Arc<Mutex<Vec<Observed>>>,
    /// Held while baselines are being appended: one append at a time.
    appending: Arc<tokio::sync::Mutex<()>>,
    /// Set when the run ends ([`Observations::settle_for_end`]): reads that end from then
    /// on leave their baselines in `buffer`, for the run's last write.
    closing: Arc<AtomicBool>,
    /// The reads not ended yet (their baselines may still be appended after).
    reading: Arc<Reading>,
}

/// A count of running reads, and a signal each time one ends.
#[derive(Default)]
struct Reading {
    running: AtomicUsize,
    ended: Notify,
}

/// Held by a read while it runs: counts it out when dropped, however the read ends.
struct ReadRunning(Arc<Reading>);

impl ReadRunning {
    fn start(reading: &Arc<Reading>) -> ReadRunning {
        reading.running.fetch_add(1, Ordering::SeqCst);
        ReadRunning(reading.clone())
    }
}

impl Drop for ReadRunning {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::SeqCst);
        self.0.ended.notify_waiters();
    }
}

impl Observations {
    /// Starts `o` beside whatever runs next.
    pub(crate) fn start<S: EventStore + 'static>(&self, engine: Arc<Engine<S>>, o: Observation) {
        if baselines_off() {
            return;
        }
        // Within the services' limits, as the actions are.
        let limits = stackflow_providers::throttle::background();
        let recorded = self.recorded.clone();
        let buffer = self.buffer.clone();
        let appending = self.appending.clone();
        let closing = self.closing.clone();
        let running = ReadRunning::start(&self.reading);
        let handle = tokio::spawn(async move {
            let read = read_now(&engine, &o.request, o.kind);
            let current = stackflow_providers::throttle::in_background(limits, read).await;
            let Some(baseline) = baseline_of(&o.recorded, &current) else {
                return;
            };
            lock_buffer(&buffer).push(Observed {
                key: o.key,
                logical_id: o.request.logical_id.clone(),
                baseline,
            });
            drop(running);
            // The append in progress (if any) did not take this one: wait for it, then
            // append every baseline that waits by then (another read may have done it).
            let _turn = appending.lock().await;
            if closing.load(Ordering::SeqCst) {
                return;
            }
            let waiting = std::mem::take(&mut *lock_buffer(&buffer));
            if waiting.is_empty() {
                return;
            }
            let keys: Vec<&str> = waiting.iter().map(|w| w.key.as_str()).collect();
            let key = baselines_key(&o.run, &keys);
            let baselines: IndexMap<String, Baseline> = waiting
                .into_iter()
                .map(|w| (w.logical_id, w.baseline))
                .collect();
            let ids: Vec<String> = baselines.keys().cloned().collect();
            let event = Event::BaselinesRecorded { baselines };
            // Baselines that cannot be appended (the store failed, the lock is gone) are
            // only missing: drift then compares with the recorded properties, and the
            // run's end reads them again.
            let appended = engine
                .store
                .append(
                    &o.stream,
                    &NewEvent::new(key, event),
                    &Precondition::HoldsLock(o.run),
                )
                .await;
            if appended.is_ok() {
                lock_set(&recorded).extend(ids);
            }
        });
        self.lock().push(handle);
    }

    /// The resources whose baseline the reads recorded so far.
    pub(crate) fn recorded(&self) -> HashSet<String> {
        lock_set(&self.recorded).clone()
    }

    /// Waits for every read started so far.
    pub async fn settle(&self) {
        loop {
            let pending = std::mem::take(&mut *self.lock());
            if pending.is_empty() {
                return;
            }
            for handle in pending {
                let _ = handle.await;
            }
        }
    }

    /// Waits until every read started so far has ended. The baselines of reads that end
    /// from now on wait for the run's end ([`Observations::settle_for_end`]) instead of
    /// being appended at once.
    pub async fn close(&self) {
        self.closing.store(true, Ordering::SeqCst);
        loop {
            let ended = self.reading.ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            if self.reading.running.load(Ordering::SeqCst) == 0 {
                return;
            }
            ended.await;
        }
    }

    /// Waits for every read started so far, as [`Observations::settle`] does, but the
    /// baselines of reads that had not been appended yet are not: they are returned, as
    /// one `BaselinesRecorded` (its key, the event and the resources it covers), for the
    /// run's last write. Reads started later append their own.
    pub(crate) async fn settle_for_end(&self, run: &str) -> Option<(String, Event, Vec<String>)> {
        // Waiting for every task (below) waits for every read too.
        self.closing.store(true, Ordering::SeqCst);
        self.settle().await;
        // Every read has ended: an append of baselines in progress has ended too.
        let _turn = self.appending.lock().await;
        let waiting = std::mem::take(&mut *lock_buffer(&self.buffer));
        self.closing.store(false, Ordering::SeqCst);
        if waiting.is_empty() {
            return None;
        }
        let keys: Vec<&str> = waiting.iter().map(|w| w.key.as_str()).collect();
        let key = baselines_key(run, &keys);
        let baselines: IndexMap<String, Baseline> = waiting
            .into_iter()
            .map(|w| (w.logical_id, w.baseline))
            .collect();
        let ids = baselines.keys().cloned().collect();
        Some((key, Event::BaselinesRecorded { baselines }, ids))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<JoinHandle<()>>> {
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn lock_set(set: &Mutex<HashSet<String>>) -> std::sync::MutexGuard<'_, HashSet<String>> {
    set.lock().unwrap_or_else(|p| p.into_inner())
}

/// A baseline read, waiting to be appended.
struct Observed {
    /// The key its own event would have (`<token>/observed`).
    key: String,
    logical_id: String,
    baseline: Baseline,
}

fn lock_buffer(buffer: &Mutex<Vec<Observed>>) -> std::sync::MutexGuard<'_, Vec<Observed>> {
    buffer.lock().unwrap_or_else(|p| p.into_inner())
}
