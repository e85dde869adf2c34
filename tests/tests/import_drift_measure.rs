//! Measurements for issue 14's closing note (ignored by default; run with
//! `cargo test --workspace --test import_drift_measure -- --ignored --nocapture`):
//!
//! - `drift` of the 200-resource corpus stack (`wide-200`): wall time and AWS calls per
//!   resource, counted by the latency proxy (no added latency);
//! - what the baseline reads add to a deploy of `deep-chain-50` with 108 ms per AWS call
//!   (`STACKFLOW_BENCH_LATENCY_MS`): deploys with and without `STACKFLOW_NO_BASELINE`,
//!   alternated, each followed by a destroy; the ratio of the medians.
//!
//! The runtime is multi-threaded: the proxy serves while the test waits on `stackflow`.

use std::path::Path;
use std::time::{Duration, Instant};

use stackflow_tests::cli::Cli;
use stackflow_tests::drift_cli::{Session, root};
use stackflow_tests::latency::LatencyProxy;
use stackflow_tests::{Emulator, unique_name};

/// A session whose runs go through `proxy`, and `case`'s template copied into it as
/// `<stack>.json`.
fn through(emu: &Emulator, proxy: &LatencyProxy, case: &str, stem: &str) -> (Session, String) {
    let mut s = Session::new(emu, &root(env!("CARGO_TARGET_TMPDIR"), "measure"), case);
    s.cli.endpoint = proxy.endpoint();
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/corpus")
        .join(case)
        .join(format!("{stem}.template.json"));
    let stack = unique_name(case);
    let to = s.dir().join(format!("{stack}.json"));
    std::fs::copy(&from, &to).expect("the corpus template");
    (s, to.display().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measurement: run with --ignored --nocapture"]
async fn measure_drift_of_the_200_resource_corpus_stack() {
    let emu = Emulator::shared().await;
    let proxy = LatencyProxy::start(emu.endpoint(), Duration::ZERO)
        .await
        .expect("proxy");
    let (s, path) = through(emu, &proxy, "wide-200", "Wide200Stack");
    let stack = Path::new(&path)
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .to_string();
    s.run(&["deploy", &path], 0);
    for round in 0..3 {
        proxy.reset();
        let started = Instant::now();
        let drift = s.drift(&stack, &[], 0);
        let took = started.elapsed();
        let n = drift.statuses().len();
        assert_eq!(n, 200);
        assert!(drift.statuses().iter().all(|(_, st)| st == "in-sync"));
        let calls = proxy.requests();
        println!(
            "drift wide-200 round {round}: {:.2}s wall, {calls} AWS calls, {:.2} per resource",
            took.as_secs_f64(),
            calls as f64 / n as f64
        );
    }
    s.run(&["destroy", "--stack", &stack], 0);
}

/// One deploy of `path` (and its destroy), with baselines on or off: the deploy's wall
/// time.
fn deploy_once(cli: &Cli, path: &str, stack: &str, baselines: bool) -> Duration {
    let mut c = cli.command(&["deploy", path]);
    if !baselines {
        c.env("STACKFLOW_NO_BASELINE", "1");
    }
    let started = Instant::now();
    let out = c.output().expect("stackflow runs");
    let took = started.elapsed();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = cli.command(&["destroy", "--stack", stack]).output();
    assert!(out.expect("stackflow runs").status.success());
    took
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measurement: run with --ignored --nocapture"]
async fn measure_baseline_reads_in_a_deep_chain_50_deploy() {
    let emu = Emulator::shared().await;
    let ms: u64 = std::env::var("STACKFLOW_BENCH_LATENCY_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(108);
    let rounds: usize = std::env::var("STACKFLOW_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let proxy = LatencyProxy::start(emu.endpoint(), Duration::from_millis(ms))
        .await
        .expect("proxy");
    let (s, path) = through(emu, &proxy, "deep-chain-50", "DeepChain50Stack");
    let stack = Path::new(&path)
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .to_string();
    let (mut on, mut off) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        on.push(deploy_once(&s.cli, &path, &stack, true));
        off.push(deploy_once(&s.cli, &path, &stack, false));
    }
    let (on, off) = (median(on), median(off));
    println!(
        "deep-chain-50 deploy at {ms} ms per call, median of {rounds}: with baselines {:.2}s, \
         without {:.2}s, ratio {:.3} ({:+.1}%)",
        on.as_secs_f64(),
        off.as_secs_f64(),
        on.as_secs_f64() / off.as_secs_f64(),
        (on.as_secs_f64() / off.as_secs_f64() - 1.0) * 100.0
    );
}
