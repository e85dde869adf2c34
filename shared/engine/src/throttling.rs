//! The services' limits in a run: the scheduler's [`Gate`] that lets a resource action
//! start when the services it calls have room, the [`ThrottleSink`] each action's calls
//! tell of their throttling answers (a progress line when a service's limit drops), and
//! the run's count of throttled calls, recorded as one `Throttled` event.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use stackflow_events::event::{Event, ServiceThrottling};
use stackflow_events::{EventStore, Precondition};
use stackflow_providers::throttle::ThrottleSink;
use tokio::time::Instant;

use crate::engine::{DeployOptions, EngineError};
use crate::limits::{Decrease, Limits};
use crate::progress::{Progress, ProgressEvent};
use crate::recorder::Recorder;
use crate::schedule::{Gate, Outcome};

/// Per service: throttled calls, and the lowest limit it went to.
type Counts = BTreeMap<String, (u64, Option<u64>)>;

/// Throttled calls per service in one run, and the lowest limit each went to.
#[derive(Debug, Clone, Default)]
pub(crate) struct Throttles(Arc<Mutex<Counts>>);

impl Throttles {
    fn lock(&self) -> MutexGuard<'_, Counts> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn count(&self, service: &str, decrease: Option<Decrease>) {
        let mut map = self.lock();
        let (retries, lowest) = map.entry(service.to_string()).or_default();
        *retries += 1;
        if let Some(d) = decrease {
            let to = d.to as u64;
            *lowest = Some(lowest.map_or(to, |l| l.min(to)));
        }
    }

    /// Per service, in name order; empty when nothing was throttled.
    pub fn services(&self) -> Vec<ServiceThrottling> {
        self.lock()
            .iter()
            .map(|(service, (retries, lowest))| ServiceThrottling {
                service: service.clone(),
                retries: *retries,
                lowest_limit: *lowest,
            })
            .collect()
    }

    /// Records the run's `Throttled` event when some call was throttled (before the run
    /// releases its lock).
    pub async fn record<S: EventStore>(
        &self,
        recorder: &Recorder<S>,
        run: &str,
        pre: &Precondition,
    ) -> Result<(), EngineError> {
        let services = self.services();
        if services.is_empty() {
            return Ok(());
        }
        let event = Event::Throttled {
            deploy_id: run.to_string(),
            services,
        };
        // Its own key each time: a resumed run records what its own invocation saw.
        let key = crate::keys::item_key(
            run,
            crate::keys::ItemEvent::Throttled,
            &crate::keys::new_id("t"),
        );
        recorder.append(key, event, pre).await?;
        Ok(())
    }
}

/// What one running action's throttling answers go to.
struct ActionSink {
    /// The services it calls, the one its own calls go to first.
    services: Vec<String>,
    /// The services whose limit it holds a place in now (all of them while it runs,
    /// but for one whose call was throttled and is waiting to be sent again), and when
    /// it last took a place (a throttling answer to a call sent since belongs to the
    /// limit's current window).
    held: Mutex<(Vec<String>, Instant)>,
    throttled: AtomicU64,
    limits: Option<Arc<Limits>>,
    throttles: Throttles,
    progress: Arc<dyn Progress>,
    stack: String,
}

/// How often an action whose call was throttled asks for a place again.
const REQUEUE_POLL: Duration = Duration::from_millis(20);

impl ActionSink {
    fn held(&self) -> MutexGuard<'_, (Vec<String>, Instant)> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Says that `service`'s limit dropped.
    fn note(&self, service: &str, decrease: Decrease, retry_after: Option<Duration>) {
        let wait = retry_after
            .map(|w| format!(", nothing new for {:.1} s as it asked", w.as_secs_f64()))
            .unwrap_or_default();
        let message = format!(
            "{service} throttled a call: at most {} of its actions at once now (was {}){wait}",
            decrease.to, decrease.from
        );
        self.progress.report(ProgressEvent::Note {
            stack: &self.stack,
            message: &message,
        });
    }

    /// Waits for a place in each service whose place it gave up.
    async fn requeue(&self, limits: &Limits) {
        loop {
            let missing: Vec<String> = {
                let held = self.held();
                let missing = self.services.iter().filter(|s| !held.0.contains(s));
                missing.cloned().collect()
            };
            let Some(service) = missing.first() else {
                return;
            };
            let now = Instant::now();
            if limits.try_start(std::slice::from_ref(service), now) {
                let mut held = self.held();
                held.0.push(service.clone());
                held.1 = now;
                continue;
            }
            tokio::time::sleep(REQUEUE_POLL).await;
        }
    }
}

impl ThrottleSink for ActionSink {
    fn throttled(&self, service: Option<&str>, retry_after: Option<Duration>) {
        self.throttled.fetch_add(1, Ordering::Relaxed);
        let Some(service) = service.or(self.services.first().map(String::as_str)) else {
            return;
        };
        let Some(limits) = &self.limits else {
            self.throttles.count(service, None);
            return;
        };
        let now = Instant::now();
        let since = self.held().1;
        let decrease = limits.throttled(service, now, since, retry_after);
        self.throttles.count(service, decrease);
        if let Some(decrease) = decrease {
            self.note(service, decrease, retry_after);
        }
        let mut held = self.held();
        if let Some(at) = held.0.iter().position(|s| s == service) {
            held.0.remove(at);
            limits.release(service);
        }
    }

    fn ready(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            if let Some(limits) = &self.limits {
                self.requeue(limits).await;
            }
        })
    }

    fn background(&self) -> Option<Arc<dyn ThrottleSink>> {
        self.limits.as_ref()?;
        Some(Arc::new(ActionSink {
            services: self.services.clone(),
            // It holds no place yet: `ready` takes them.
            held: Mutex::new((Vec::new(), Instant::now())),
            throttled: AtomicU64::new(0),
            limits: self.limits.clone(),
            throttles: self.throttles.clone(),
            progress: self.progress.clone(),
            stack: self.stack.clone(),
        }))
    }

    fn ended(&self) {
        if let Some(limits) = &self.limits {
            let mut held = self.held();
            let grow = self.throttled.load(Ordering::Relaxed) == 0;
            limits.finish(&held.0, grow);
            held.0.clear();
        }
    }
}

/// The gate of one phase: each task's services must have room (adaptive runs only),
/// and each started task gets an [`ActionSink`].
pub(crate) struct ServiceGate {
    limits: Option<Arc<Limits>>,
    services: HashMap<String, Vec<String>>,
    sinks: Mutex<HashMap<String, Arc<ActionSink>>>,
    throttles: Throttles,
    progress: Arc<dyn Progress>,
    stack: String,
}

impl ServiceGate {
    /// A gate for tasks whose services `services` gives (by task id), counting into
    /// `throttles`.
    pub fn new(
        options: &DeployOptions,
        services: HashMap<String, Vec<String>>,
        throttles: Throttles,
        progress: Arc<dyn Progress>,
        stack: &str,
    ) -> ServiceGate {
        ServiceGate {
            limits: options.adaptive.then(|| options.limits.clone()),
            services,
            sinks: Mutex::default(),
            throttles,
            progress,
            stack: stack.to_string(),
        }
    }

    fn sinks(&self) -> MutexGuard<'_, HashMap<String, Arc<ActionSink>>> {
        self.sinks.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn services_of(&self, id: &str) -> &[String] {
        self.services.get(id).map_or(&[], Vec::as_slice)
    }

    /// The sink of a started task (a fresh one for a task the gate did not start).
    pub fn sink(&self, id: &str) -> Arc<dyn ThrottleSink> {
        let sink = self.sinks().get(id).cloned();
        sink.unwrap_or_else(|| self.new_sink(id))
    }

    fn new_sink(&self, id: &str) -> Arc<ActionSink> {
        Arc::new(ActionSink {
            services: self.services_of(id).to_vec(),
            held: Mutex::new((self.services_of(id).to_vec(), Instant::now())),
            throttled: AtomicU64::new(0),
            limits: self.limits.clone(),
            throttles: self.throttles.clone(),
            progress: self.progress.clone(),
            stack: self.stack.clone(),
        })
    }
}

impl Gate for ServiceGate {
    fn try_start(&self, id: &str) -> bool {
        if let Some(limits) = &self.limits
            && !limits.try_start(self.services_of(id), Instant::now())
        {
            return false;
        }
        let sink = self.new_sink(id);
        self.sinks().insert(id.to_string(), sink);
        true
    }

    fn finished(&self, id: &str, outcome: &Outcome) {
        let Some(limits) = &self.limits else {
            return;
        };
        match self.sinks().remove(id) {
            Some(sink) => {
                let throttled = sink.throttled.load(Ordering::Relaxed) > 0;
                let grow = *outcome == Outcome::Succeeded && !throttled;
                limits.finish(&sink.held().0, grow);
            }
            None => limits.finish(self.services_of(id), false),
        }
    }
}

#[cfg(test)]
mod tests {
    use stackflow_providers::throttle::{observed, report};

    use super::*;
    use crate::progress::Silent;

    #[derive(Default)]
    struct Notes(Mutex<Vec<String>>);

    impl Progress for Notes {
        fn report(&self, event: ProgressEvent<'_>) {
            if let ProgressEvent::Note { message, .. } = event {
                self.0.lock().unwrap().push(message.to_string());
            }
        }
    }

    fn gate(options: &DeployOptions, progress: Arc<dyn Progress>) -> (ServiceGate, Throttles) {
        let services = HashMap::from([
            ("q1".to_string(), vec!["sqs".to_string()]),
            ("q2".to_string(), vec!["sqs".to_string()]),
            (
                "bus".to_string(),
                vec!["cloudcontrolapi".to_string(), "events".to_string()],
            ),
        ]);
        let throttles = Throttles::default();
        let gate = ServiceGate::new(options, services, throttles.clone(), progress, "app");
        (gate, throttles)
    }

    #[tokio::test(start_paused = true)]
    async fn throttling_halves_the_service_and_says_so_once() {
        let options = DeployOptions::new();
        let notes = Arc::new(Notes::default());
        let (gate, throttles) = gate(&options, notes.clone());
        assert!(gate.try_start("q1"));
        assert!(gate.try_start("q2"));
        for id in ["q1", "q2"] {
            observed(gate.sink(id), async { report(None, None) }).await;
        }
        // One window: halved once, 64 -> 32, one line.
        assert_eq!(options.limits.snapshot()["sqs"], 32);
        assert_eq!(
            *notes.0.lock().unwrap(),
            ["sqs throttled a call: at most 32 of its actions at once now (was 64)"]
        );
        // The Cloud Control handler's throttle counts against the target service.
        assert!(gate.try_start("bus"));
        observed(gate.sink("bus"), async { report(Some("events"), None) }).await;
        observed(gate.sink("bus"), async { report(None, None) }).await;
        let counted: Vec<(String, u64, Option<u64>)> = throttles
            .services()
            .into_iter()
            .map(|s| (s.service, s.retries, s.lowest_limit))
            .collect();
        assert_eq!(
            counted,
            [
                ("cloudcontrolapi".to_string(), 1, Some(32)),
                ("events".to_string(), 1, Some(32)),
                ("sqs".to_string(), 2, Some(32)),
            ]
        );
        for id in ["q1", "q2", "bus"] {
            gate.finished(id, &Outcome::Succeeded);
        }
        // Throttled actions do not grow the limit.
        assert_eq!(options.limits.snapshot()["sqs"], 32);
    }

    #[tokio::test(start_paused = true)]
    async fn a_throttled_call_waits_for_a_place_under_the_lowered_limit() {
        let mut options = DeployOptions::new();
        options.limits = Arc::new(Limits::new(2, 8));
        let (gate, _) = gate(&options, Arc::new(Silent));
        assert!(gate.try_start("q1"));
        assert!(gate.try_start("q2"));
        // q1's call is throttled: sqs drops to 1, q1 gives up its place and q2 holds
        // the only one, so q1's retry waits until q2 ends.
        let q1 = gate.sink("q1");
        report_to(&q1).await;
        assert_eq!(options.limits.snapshot()["sqs"], 1);
        let waiting = tokio::spawn({
            let q1 = q1.clone();
            async move {
                q1.ready().await;
                Instant::now()
            }
        });
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(!waiting.is_finished());
        let ended = Instant::now();
        // (A failed action does not grow the limit.)
        gate.finished("q2", &Outcome::Failed("broke".into()));
        let resent = waiting.await.unwrap();
        assert!(resent >= ended && resent <= ended + REQUEUE_POLL);
        // It holds the place again, and gives it back when it ends.
        assert!(!gate.try_start("q2"));
        gate.finished("q1", &Outcome::Succeeded);
        assert!(gate.try_start("q2"));
    }

    async fn report_to(sink: &Arc<dyn ThrottleSink>) {
        observed(sink.clone(), async { report(None, None) }).await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_pinned_run_counts_throttling_but_never_limits_services() {
        let options = DeployOptions::new().pinned(4);
        let (gate, throttles) = gate(&options, Arc::new(Silent));
        assert!(gate.try_start("q1"));
        observed(gate.sink("q1"), async { report(None, None) }).await;
        gate.finished("q1", &Outcome::Succeeded);
        assert!(options.limits.snapshot().is_empty());
        assert_eq!(throttles.services()[0].retries, 1);
        assert_eq!(throttles.services()[0].lowest_limit, None);
    }
}
