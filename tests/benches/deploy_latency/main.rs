//! Deploy and destroy wall time when every AWS call costs a fixed latency, against the
//! critical-path lower bound, at the default settings (adaptive limits per service);
//! the same under a rate limit; a generated 1,000-resource stack through the CLI; and
//! the CLI's time to its first AWS call.
//!
//! `cargo bench -p stackflow-tests --bench deploy_latency`
//!
//! Every AWS call of the engine goes through a [`LatencyProxy`] in front of the local
//! emulator, which delays each request by `STACKFLOW_BENCH_LATENCY_MS` (default 108 ms,
//! a round trip to a distant region). For each case of the corpus:
//!
//! 1. **Calibration** (50 ms per call, one limit of 1): a deploy and a destroy run one
//!    resource at a time; an action's duration (from its `ResourceStarted` to its
//!    `ResourceFinished`) over the latency gives the calls on its own path (the requests
//!    sent during it also hold the previous resource's baseline reads, which run beside
//!    it, off the critical path; they are listed), and the requests before the first
//!    resource starts are the fixed calls (the availability-zone lookup).
//! 2. **Timed runs**: deploy then destroy at the default settings, at latency 0 (what the
//!    engine and the emulator cost by themselves) and at the configured latency.
//! 3. **Bound**: `latency × max(longest dependency chain of calls, waves)`, where the
//!    waves are what the limits force: per AWS service, its resources' calls over the
//!    limit a service starts at (64; `k × ceil(n / 64)` when each of `n` resources makes
//!    `k` calls), and all calls over the global cap (256). The fixed calls before the
//!    first resource count only where a resource needs them (`Fn::GetAZs`), as a
//!    prerequisite of that resource, beside its dependencies. The destroy bound is the
//!    same with the delete calls (the reversed graph has the same longest chain).
//!
//! `vpc-two-az-nat` runs in full: its 26 resources go through the EC2 SDK providers.
//!
//! Then ([`extra`]): wide-200 at the default settings behind a rate limit (the fault
//! proxy's, [`extra::RATE`] requests per second per service); the CLI (`target/release/
//! stackflow`, else `target/debug/stackflow`, or `STACKFLOW_BENCH_CLI`) deploying a
//! generated 1,000-resource stack, deploying it again (no change) and destroying it, each
//! under `/usr/bin/time -v` for its peak memory; and the CLI deploying a one-resource
//! template five times: the median time from spawning it to its first request reaching
//! the proxy.
//!
//! The engine's store is an SQLite file under the target directory, like the CLI's local
//! store (`STACKFLOW_BENCH_STORE=memory`: in memory instead).
//!
//! Environment: `STACKFLOW_BENCH_LATENCY_MS` (default 108), `STACKFLOW_BENCH_CASES`
//! (comma-separated, default all three), `STACKFLOW_BENCH_STORE` (`file` or `memory`),
//! `STACKFLOW_BENCH_PARTS` (comma-separated among `cases`, `throttled`, `large`,
//! `startup`; default all).

mod bound;
mod cases;
mod cli;
mod extra;
mod print;
mod runs;
mod spans;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use aws_types::SdkConfig;
use stackflow_events::sqlite::SqliteStore;
use stackflow_providers::router::{Providers, Router};
use stackflow_tests::latency::{LatencyProxy, bench_latency};
use stackflow_tests::{Emulator, unique_name};

use crate::bound::{Bound, bound, uses_get_azs};
use crate::cases::load_case;
use crate::print::{print_breakdown, print_calls, print_operations, print_table};
use crate::runs::{Run, calibrate, timed};

const CASES: [&str; 3] = ["wide-200", "deep-chain-50", "vpc-two-az-nat"];
const STARTUP_RUNS: usize = 5;

/// One case's numbers.
pub(crate) struct Row {
    pub(crate) case: String,
    pub(crate) resources: usize,
    pub(crate) zero: Option<Run>,
    pub(crate) run: Run,
    pub(crate) deploy_bound: Bound,
    pub(crate) destroy_bound: Bound,
}

/// A comma-separated list from the environment, else `default`.
fn list_var(name: &str, default: &[&str]) -> Vec<String> {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => v.split(',').map(|s| s.trim().to_string()).collect(),
        _ => default.iter().map(|s| s.to_string()).collect(),
    }
}

/// The engine's store, what the header says of it, and its directory.
fn open_store() -> (Arc<SqliteStore>, String, std::path::PathBuf) {
    // The CLI's local store is a database file (WAL, a sync per append); `memory` shows
    // what the appends cost.
    let in_memory = std::env::var("STACKFLOW_BENCH_STORE").is_ok_and(|v| v.trim() == "memory");
    let store_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(unique_name("deploy-latency"));
    let (store, text) = if in_memory {
        let store = SqliteStore::open_in_memory().expect("an in-memory store");
        (store, "in memory".to_string())
    } else {
        std::fs::create_dir_all(&store_dir).expect("the store's directory");
        let file = store_dir.join("events.db");
        let store = SqliteStore::open(&file).expect("a store file");
        (store, format!("file {}", file.display()))
    };
    (Arc::new(store), text, store_dir)
}

/// Calibrates, bounds and times one corpus case, printing what it finds.
async fn run_case(
    case: &str,
    proxy: &LatencyProxy,
    config: &SdkConfig,
    store: &Arc<SqliteStore>,
    latency: Duration,
) -> Option<Row> {
    let stack = load_case(case);
    println!("\n{case}: {} resources", stack.template.resources.len());
    let calls = match calibrate(proxy, config, store, &stack).await {
        Ok(c) => c,
        Err(e) => {
            println!("  INVALID: {e}");
            return None;
        }
    };
    println!(
        "  calls on each action's path (calibration: 50 ms per call, one resource at a time; in brackets the requests sent meanwhile, the previous resource's baseline reads included):"
    );
    print_calls(&stack, &calls);
    let t = &stack.template;
    let providers = Providers::from_config(config, None);
    let services = |id: &str| {
        t.resources
            .get(id)
            .map_or(vec![], |r| providers.services(&r.ty))
    };
    let fixed = calls.create.before.len() as u64;
    let deploy_bound = bound(
        t,
        |id| calls.create(id),
        fixed,
        |id| uses_get_azs(t, id),
        &services,
    );
    let destroy_bound = bound(t, |id| calls.delete(id), 0, |_| false, &services);
    if deploy_bound.fixed_on_path {
        println!(
            "  the deploy bound includes the {fixed} call(s) made before the first resource (on its chain)"
        );
    } else if fixed > 0 {
        println!(
            "  the {fixed} call(s) before the first resource are not on the deploy bound's chain"
        );
    }
    let zero = timed(proxy, config, store, &stack, Duration::ZERO)
        .await
        .map_err(|e| println!("  latency-0 run failed: {e}"))
        .ok();
    let run = match timed(proxy, config, store, &stack, latency).await {
        Ok(r) => r,
        Err(e) => {
            println!("  INVALID: {e}");
            return None;
        }
    };
    if let Some(p) = &run.problem {
        println!("  INVALID: {p}");
    }
    println!(
        "  where the time went (latency {} ms):",
        latency.as_millis()
    );
    let (d, x) = (&run.deploy_spans, &run.destroy_spans);
    let create = |id: &str| calls.create(id);
    let delete = |id: &str| calls.delete(id);
    print_breakdown(
        "deploy",
        run.deploy_started,
        run.deploy,
        d,
        &deploy_bound.path,
        latency,
        create,
    );
    let mut reversed = destroy_bound.path.clone();
    reversed.reverse();
    print_breakdown(
        "destroy",
        run.destroy_started,
        run.destroy,
        x,
        &reversed,
        latency,
        delete,
    );
    print_operations(&run.deploy_log);
    Some(Row {
        case: case.to_string(),
        resources: stack.template.resources.len(),
        zero,
        run,
        deploy_bound,
        destroy_bound,
    })
}

#[tokio::main]
async fn main() {
    let latency = bench_latency();
    let latency_ms = latency.as_millis();
    let cases = list_var("STACKFLOW_BENCH_CASES", &CASES);
    let parts = list_var(
        "STACKFLOW_BENCH_PARTS",
        &["cases", "throttled", "large", "startup"],
    );
    let part = |p: &str| parts.iter().any(|x| x == p);

    let emulator = Emulator::shared().await;
    let proxy = LatencyProxy::start(emulator.endpoint(), latency)
        .await
        .expect("the latency proxy");
    let config = emulator
        .sdk_config()
        .await
        .to_builder()
        .endpoint_url(proxy.endpoint())
        .build();
    let (store, store_text, store_dir) = open_store();
    println!(
        "latency {latency_ms} ms per AWS call (proxy {} → emulator {}), default settings (adaptive limits), store {store_text}",
        proxy.endpoint(),
        emulator.endpoint()
    );
    if part("cases") {
        let mut rows = Vec::new();
        for case in &cases {
            rows.extend(run_case(case, &proxy, &config, &store, latency).await);
        }
        print_table(&rows, latency);
    }
    if part("throttled") {
        extra::throttled(emulator, &store, latency).await;
    }
    drop(store);
    let _ = std::fs::remove_dir_all(&store_dir);
    if part("large") {
        extra::large(&proxy, latency).await;
    }
    if part("startup") {
        extra::startup(&proxy).await;
    }
}
