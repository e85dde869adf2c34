//! The engine, the calibration run (one resource at a time) and the timed runs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_types::SdkConfig;
use stackflow_core::template::StackTemplate;
use stackflow_engine::progress::Progress;
use stackflow_engine::{Engine, deploy_stack, destroy_stack};
use stackflow_events::sqlite::SqliteStore;
use stackflow_providers::lookups::AwsLookups;
use stackflow_providers::router::Providers;
use stackflow_tests::emulator::REGION;
use stackflow_tests::latency::{LatencyProxy, RequestRecord};
use stackflow_tests::unique_name;

use crate::cases::{input, options, problem};
use crate::spans::{Calls, Span, Spans, attribute};

pub(crate) fn engine(
    config: &SdkConfig,
    store: Arc<SqliteStore>,
    progress: Arc<dyn Progress>,
) -> Arc<Engine<SqliteStore>> {
    Arc::new(Engine {
        store,
        providers: Arc::new(Providers::from_config(config, None)),
        lookups: Arc::new(AwsLookups::new(config)),
        region: REGION.to_string(),
        who: format!("bench pid {}", std::process::id()),
        cloudformation_fallback: false,
        progress,
        stale: Arc::new(|_| false),
        digest_key: None,
        lease: None,
    })
}

/// The latency of the calibration runs: an action's calls on its own path are its
/// duration over it.
const CALIBRATION_LATENCY: Duration = Duration::from_millis(50);

/// Deploys and destroys `stack` one resource at a time at [`CALIBRATION_LATENCY`].
pub(crate) async fn calibrate(
    proxy: &LatencyProxy,
    config: &SdkConfig,
    store: &Arc<SqliteStore>,
    stack: &StackTemplate,
) -> Result<Calls, String> {
    let saved = proxy.latency();
    proxy.set_latency(CALIBRATION_LATENCY);
    let spans = Arc::new(Spans::default());
    let engine = engine(config, store.clone(), spans.clone());
    let name = unique_name("calibrate");
    proxy.reset();
    let report = deploy_stack(engine.clone(), input(stack, &name), options(Some(1)))
        .await
        .map_err(|e| format!("calibration deploy: {e}"))?;
    let create = attribute(&proxy.log(), &spans.take(), CALIBRATION_LATENCY);
    let deployed = problem(&report);
    proxy.reset();
    let report = destroy_stack(engine, &name, options(Some(1)))
        .await
        .map_err(|e| format!("calibration destroy: {e}"))?;
    let delete = attribute(&proxy.log(), &spans.take(), CALIBRATION_LATENCY);
    proxy.set_latency(saved);
    if let Some(p) = deployed {
        return Err(format!("calibration deploy: {p}"));
    }
    if let Some(p) = problem(&report) {
        return Err(format!("calibration destroy: {p}"));
    }
    Ok(Calls { create, delete })
}

/// One timed deploy and destroy.
#[derive(Debug)]
pub(crate) struct Run {
    pub(crate) deploy: Duration,
    pub(crate) destroy: Duration,
    pub(crate) deploy_requests: u64,
    pub(crate) destroy_requests: u64,
    pub(crate) deploy_spans: Vec<Span>,
    pub(crate) destroy_spans: Vec<Span>,
    pub(crate) deploy_started: Instant,
    pub(crate) destroy_started: Instant,
    pub(crate) deploy_log: Vec<RequestRecord>,
    pub(crate) problem: Option<String>,
}

pub(crate) async fn timed(
    proxy: &LatencyProxy,
    config: &SdkConfig,
    store: &Arc<SqliteStore>,
    stack: &StackTemplate,
    latency: Duration,
) -> Result<Run, String> {
    let saved = proxy.latency();
    proxy.set_latency(latency);
    let spans = Arc::new(Spans::default());
    let engine = engine(config, store.clone(), spans.clone());
    let name = unique_name("bench");
    let stack_input = input(stack, &name);
    proxy.reset();
    let deploy_started = Instant::now();
    let report = deploy_stack(engine.clone(), stack_input, options(None))
        .await
        .map_err(|e| format!("deploy: {e}"))?;
    let deploy = deploy_started.elapsed();
    let deploy_requests = proxy.requests();
    let deploy_log = proxy.log();
    let deploy_spans = spans.take();
    let mut problems = Vec::new();
    if let Some(p) = problem(&report) {
        problems.push(format!("deploy: {p}"));
    }
    proxy.reset();
    let destroy_started = Instant::now();
    let report = destroy_stack(engine, &name, options(None))
        .await
        .map_err(|e| format!("destroy: {e}"))?;
    let destroy = destroy_started.elapsed();
    let destroy_requests = proxy.requests();
    let destroy_spans = spans.take();
    if let Some(p) = problem(&report) {
        problems.push(format!("destroy: {p}"));
    }
    proxy.set_latency(saved);
    Ok(Run {
        deploy,
        destroy,
        deploy_requests,
        destroy_requests,
        deploy_spans,
        destroy_spans,
        deploy_started,
        destroy_started,
        deploy_log,
        problem: (!problems.is_empty()).then(|| problems.join("; ")),
    })
}
