//! The resource actions of a run (from the engine's progress events) and the requests
//! each made.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use stackflow_engine::progress::{Progress, ProgressEvent};
use stackflow_tests::latency::RequestRecord;

/// One resource action, from the engine's progress events.
#[derive(Debug, Clone)]
pub(crate) struct Span {
    pub(crate) id: String,
    pub(crate) ty: String,
    pub(crate) start: Instant,
    pub(crate) end: Option<Instant>,
}

/// Collects the resource actions' start and end times.
#[derive(Debug, Default)]
pub(crate) struct Spans(Mutex<Vec<Span>>);

impl Spans {
    pub(crate) fn take(&self) -> Vec<Span> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

impl Progress for Spans {
    fn report(&self, event: ProgressEvent<'_>) {
        let now = Instant::now();
        let mut spans = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match event {
            ProgressEvent::ResourceStarted {
                logical_id,
                resource_type,
                ..
            } => spans.push(Span {
                id: logical_id.to_string(),
                ty: resource_type.to_string(),
                start: now,
                end: None,
            }),
            ProgressEvent::ResourceFinished {
                logical_id,
                outcome,
                ..
            } if outcome != "recovered" => {
                if let Some(s) = spans
                    .iter_mut()
                    .rev()
                    .find(|s| s.id == logical_id && s.end.is_none())
                {
                    s.end = Some(now);
                }
            }
            _ => {}
        }
    }
}

/// What one resource action's requests were.
#[derive(Debug, Default, Clone)]
pub(crate) struct Attributed {
    /// Requests per resource, in order.
    pub(crate) per_resource: BTreeMap<String, Vec<String>>,
    /// Calls on each action's own path: its duration over the calibration's latency
    /// (the requests during an action include the baseline reads of the one before,
    /// which run beside it, off the critical path).
    pub(crate) on_path: BTreeMap<String, u64>,
    /// Requests before the first resource action started.
    pub(crate) before: Vec<String>,
    /// Requests after the last one ended, or between actions.
    pub(crate) outside: Vec<String>,
}

/// Attributes each request to the resource action that was running when it was sent
/// (only meaningful when the actions ran one at a time).
pub(crate) fn attribute(log: &[RequestRecord], spans: &[Span], latency: Duration) -> Attributed {
    let mut out = Attributed::default();
    for s in spans {
        out.per_resource.entry(s.id.clone()).or_default();
        let took = s.end.map_or(0.0, |e| (e - s.start).as_secs_f64());
        let calls = (took / latency.as_secs_f64()).round() as u64;
        *out.on_path.entry(s.id.clone()).or_default() += calls;
    }
    let first = spans.iter().map(|s| s.start).min();
    let mut log = log.to_vec();
    log.sort_by_key(|r| r.at);
    for r in log {
        let inside = spans
            .iter()
            .find(|s| s.start <= r.at && s.end.is_none_or(|e| r.at <= e));
        match inside {
            Some(s) => out
                .per_resource
                .entry(s.id.clone())
                .or_default()
                .push(r.label),
            None if first.is_none_or(|f| r.at < f) => out.before.push(r.label),
            None => out.outside.push(r.label),
        }
    }
    out
}

/// The calls of each resource's create and delete, measured one resource at a time.
#[derive(Debug)]
pub(crate) struct Calls {
    pub(crate) create: Attributed,
    pub(crate) delete: Attributed,
}

impl Calls {
    /// The calls on the path of `id`'s create.
    pub(crate) fn create(&self, id: &str) -> u64 {
        self.create.on_path.get(id).copied().unwrap_or(0)
    }
    /// The calls on the path of `id`'s delete.
    pub(crate) fn delete(&self, id: &str) -> u64 {
        self.delete.on_path.get(id).copied().unwrap_or(0)
    }
}
