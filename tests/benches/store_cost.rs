//! What the DynamoDB event store costs a deploy, against the local store: a corpus case
//! (default `wide-200`) deployed and destroyed by the embedded engine with each store,
//! every AWS call (DynamoDB's included) through the same [`LatencyProxy`] in front of the
//! local emulator.
//!
//! `cargo bench -p stackflow-tests --bench store_cost`
//!
//! Each store deploys and destroys the case once a round (`STACKFLOW_BENCH_ROUNDS`, default
//! 5; the store that goes first alternates). Per run it prints the deploy's and the
//! destroy's wall time, the events appended, and for the DynamoDB store the requests it
//! sent by operation (read from the proxy's log) with the writes (`TransactWriteItems`)
//! per event. It exits 1 when a run fails, or when the DynamoDB store's median deploy
//! takes more than twice the local store's.
//!
//! Environment: `STACKFLOW_BENCH_LATENCY_MS` (default 108, a round trip to a distant
//! region), `STACKFLOW_BENCH_CASE` (default `wide-200`), `STACKFLOW_BENCH_TRACE` (set:
//! print each deploy's DynamoDB requests and creates with their start, in ms).

// deploy_latency's corpus cases; its generated large stack is not used here.
#[allow(dead_code)]
#[path = "deploy_latency/cases.rs"]
mod cases;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_types::SdkConfig;
use stackflow_engine::{deploy_stack, destroy_stack};
use stackflow_events::sqlite::SqliteStore;
use stackflow_events::{EventStore, StreamId};
use stackflow_tests::deploy::{dynamo_on, dynamo_store, engine};
use stackflow_tests::emulator::REGION;
use stackflow_tests::latency::{LatencyProxy, bench_latency};
use stackflow_tests::{Emulator, unique_name};

use crate::cases::{input, load_case, options, problem};

/// One store's run.
struct Row {
    store: &'static str,
    deploy: Duration,
    destroy: Duration,
    events: usize,
    /// DynamoDB requests by operation (deploy and destroy), when the store is DynamoDB's.
    operations: BTreeMap<String, usize>,
}

/// Deploys and destroys `case` with `store`, every call through `proxy`.
async fn run<S: EventStore + 'static>(
    label: &'static str,
    case: &str,
    proxy: &LatencyProxy,
    config: &SdkConfig,
    store: Arc<S>,
) -> Result<Row, String> {
    let stack = load_case(case);
    let name = unique_name("store-cost");
    let engine = engine(config, store.clone());
    proxy.reset();
    let started = Instant::now();
    let report = deploy_stack(engine.clone(), input(&stack, &name), options(None))
        .await
        .map_err(|e| format!("{label}: deploy: {e}"))?;
    let deploy = started.elapsed();
    if std::env::var_os("STACKFLOW_BENCH_TRACE").is_some() {
        for r in proxy.log() {
            if r.label.starts_with("DynamoDB")
                || r.label.contains("Create")
                || r.label.contains("PutParameter")
            {
                println!(
                    "{:>6} ms {}",
                    r.at.duration_since(started).as_millis(),
                    r.label
                );
            }
        }
    }
    if let Some(p) = problem(&report) {
        return Err(format!("{label}: deploy: {p}"));
    }
    let started = Instant::now();
    let report = destroy_stack(engine, &name, options(None))
        .await
        .map_err(|e| format!("{label}: destroy: {e}"))?;
    let destroy = started.elapsed();
    if let Some(p) = problem(&report) {
        return Err(format!("{label}: destroy: {p}"));
    }
    let log = proxy.log();
    let events = store
        .read(&StreamId::new(REGION, &name), 0)
        .await
        .map_err(|e| format!("{label}: reading the stream: {e}"))?
        .len();
    let mut operations = BTreeMap::new();
    for record in &log {
        if let Some(op) = record.label.strip_prefix("DynamoDB_20120810.") {
            *operations.entry(op.to_string()).or_default() += 1;
        }
    }
    Ok(Row {
        store: label,
        deploy,
        destroy,
        events,
        operations,
    })
}

fn print(rows: &[Row], latency: Duration) {
    println!(
        "\n{:<10} {:>10} {:>10} {:>7}  DynamoDB requests (deploy and destroy)",
        "store", "deploy", "destroy", "events"
    );
    for row in rows {
        let ops: Vec<String> = row
            .operations
            .iter()
            .map(|(op, n)| format!("{op} {n}"))
            .collect();
        println!(
            "{:<10} {:>9.2}s {:>9.2}s {:>7}  {}",
            row.store,
            row.deploy.as_secs_f64(),
            row.destroy.as_secs_f64(),
            row.events,
            if ops.is_empty() {
                "-".to_string()
            } else {
                ops.join(", ")
            }
        );
        if let Some(writes) = row.operations.get("TransactWriteItems") {
            println!(
                "{:<10} {:.3} TransactWriteItems per event ({writes} for {} events), latency {} ms",
                "",
                *writes as f64 / row.events.max(1) as f64,
                row.events,
                latency.as_millis()
            );
        }
    }
}

#[tokio::main]
async fn main() {
    let latency = bench_latency();
    let latency_ms = latency.as_millis();
    let case = std::env::var("STACKFLOW_BENCH_CASE").unwrap_or_else(|_| "wide-200".into());
    let emulator = Emulator::shared().await;
    let proxy = LatencyProxy::start(emulator.endpoint(), latency)
        .await
        .expect("the latency proxy");
    let direct = emulator.sdk_config().await;
    let config = direct.to_builder().endpoint_url(proxy.endpoint()).build();
    println!(
        "{case}: latency {latency_ms} ms per AWS call (proxy {} → emulator {})",
        proxy.endpoint(),
        emulator.endpoint()
    );

    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(unique_name("store-cost"));
    std::fs::create_dir_all(&dir).expect("the local store's directory");

    // Rounds, each store once a round (in turn first): the machine's load moves between
    // runs, and the ratio compares the medians. Each round has a store file and a table
    // of its own (the emulator's DynamoDB slows down as one table fills; AWS's does not).
    let rounds = bench_rounds();
    let mut rows = Vec::new();
    let mut failed = false;
    for round in 0..rounds {
        let file = dir.join(format!("events-{round}.db"));
        let local = Arc::new(SqliteStore::open(file).expect("a store file"));
        // The table is made directly (not through the proxy): only the deploy's requests
        // count.
        let (table, bucket, _) = dynamo_store(emulator).await;
        let dynamo = dynamo_on(&config, &table, &bucket);
        let mut results = Vec::new();
        if round % 2 == 0 {
            results.push(run("local", &case, &proxy, &config, local.clone()).await);
            results.push(run("dynamodb", &case, &proxy, &config, dynamo.clone()).await);
        } else {
            results.push(run("dynamodb", &case, &proxy, &config, dynamo.clone()).await);
            results.push(run("local", &case, &proxy, &config, local.clone()).await);
        }
        for result in results {
            match result {
                Ok(row) => rows.push(row),
                Err(e) => {
                    println!("FAILED: {e}");
                    failed = true;
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    print(&rows, latency);
    let median = |store: &str| {
        let mut times: Vec<f64> = rows
            .iter()
            .filter(|r| r.store == store)
            .map(|r| r.deploy.as_secs_f64())
            .collect();
        times.sort_by(f64::total_cmp);
        times.get(times.len() / 2).copied()
    };
    if let (Some(local), Some(dynamo)) = (median("local"), median("dynamodb")) {
        let ratio = dynamo / local;
        println!(
            "median deploy over {rounds} round(s): local {local:.2}s, dynamodb {dynamo:.2}s; \
             the DynamoDB store's deploy takes {ratio:.2}x the local store's (budget 2x)"
        );
        failed |= ratio > 2.0;
    }
    std::process::exit(i32::from(failed));
}

/// `STACKFLOW_BENCH_ROUNDS` (default 5): how many times each store deploys and destroys.
fn bench_rounds() -> usize {
    std::env::var("STACKFLOW_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|&n: &usize| n > 0)
        .unwrap_or(5)
}
