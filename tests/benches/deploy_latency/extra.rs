//! Beyond the corpus cases: wide-200 behind a rate limit, a generated 1,000-resource
//! stack through the CLI (deploy, no-op deploy, destroy, peak memory), and the CLI's
//! start-up.

use std::sync::Arc;
use std::time::Duration;

use stackflow_events::sqlite::SqliteStore;
use stackflow_tests::faults::{FaultConfig, FaultProxy, RateLimit};
use stackflow_tests::latency::LatencyProxy;
use stackflow_tests::{Emulator, unique_name};

use crate::cases::{LARGE_MIX, large_stack, load_case};
use crate::cli::{CliRun, cli_binary, cli_run, cli_startup, median};
use crate::runs::timed;

/// Requests per second each service serves, and at once (as `tests/throttling.rs`).
pub(crate) const RATE: f64 = 70.0;
const BURST: f64 = 30.0;

/// wide-200 at the default settings behind the fault proxy's rate limit (per service),
/// behind the latency proxy.
pub(crate) async fn throttled(emulator: &Emulator, store: &Arc<SqliteStore>, latency: Duration) {
    let limit = RateLimit {
        burst: BURST,
        ..RateLimit::new(RATE)
    };
    let faults = FaultProxy::start(emulator.endpoint(), FaultConfig::rate_limited(limit))
        .await
        .expect("the fault proxy");
    let proxy = LatencyProxy::start(&faults.endpoint(), latency)
        .await
        .expect("the latency proxy");
    let config = emulator
        .sdk_config()
        .await
        .to_builder()
        .endpoint_url(proxy.endpoint())
        .build();
    let stack = load_case("wide-200");
    println!(
        "\nwide-200 behind a rate limit of {RATE} requests/s per service (burst {BURST}), latency {} ms, default settings:",
        latency.as_millis()
    );
    let run = match timed(&proxy, &config, store, &stack, latency).await {
        Ok(run) => run,
        Err(e) => return println!("  INVALID: {e}"),
    };
    let totals = faults.totals();
    let in_calls = |d: Duration| d.as_secs_f64() / latency.as_secs_f64();
    println!(
        "  deploy {:.2} s ({:.1} latencies, {} requests), destroy {:.2} s ({:.1} latencies, {} requests); throttled answers {} of {} requests ({:.2} per resource action){}",
        run.deploy.as_secs_f64(),
        in_calls(run.deploy),
        run.deploy_requests,
        run.destroy.as_secs_f64(),
        in_calls(run.destroy),
        run.destroy_requests,
        totals.faulted(),
        totals.seen,
        totals.faulted() as f64 / (2 * stack.template.resources.len()) as f64,
        run.problem
            .map_or(String::new(), |p| format!("  INVALID: {p}")),
    );
}

fn print_cli_run(what: &str, run: &CliRun, latency: Duration) {
    println!(
        "  {what:<16} {:>7.2} s ({:>5.1} latencies) {:>6} requests, peak RSS {}{}",
        run.wall.as_secs_f64(),
        run.wall.as_secs_f64() / latency.as_secs_f64(),
        run.requests,
        run.max_rss_kib
            .map_or("?".into(), |k| format!("{:.1} MiB", k as f64 / 1024.0)),
        if run.ok {
            String::new()
        } else {
            let tail: Vec<&str> = run.stderr.lines().rev().take(5).collect();
            format!("  FAILED: {}", tail.join(" | "))
        }
    );
}

/// The CLI deploys the generated 1,000-resource stack, deploys it again and destroys it.
pub(crate) async fn large(proxy: &LatencyProxy, latency: Duration) {
    let Some((bin, which)) = cli_binary() else {
        return println!("\nlarge: no stackflow binary in target/release or target/debug");
    };
    let dir = std::env::temp_dir().join(unique_name("stackflow-bench-large"));
    std::fs::create_dir_all(&dir).expect("a directory");
    let stack = large_stack(&dir);
    let mix: Vec<String> = LARGE_MIX.iter().map(|(t, n)| format!("{n} {t}")).collect();
    println!(
        "\n{} resources through the CLI ({which} build), latency {} ms, default settings: {}",
        stack.template.resources.len(),
        latency.as_millis(),
        mix.join(", ")
    );
    let file = stack.file.display().to_string();
    let name = stack.name.clone();
    let steps: [(&str, Vec<String>); 3] = [
        ("deploy", vec!["deploy".into(), file.clone()]),
        ("no-op deploy", vec!["deploy".into(), file]),
        ("destroy", vec!["destroy".into(), "--stack".into(), name]),
    ];
    proxy.set_latency(latency);
    for (what, args) in steps {
        match cli_run(&bin, proxy, &dir, &args).await {
            Ok(run) => print_cli_run(what, &run, latency),
            Err(e) => println!("  {what}: {e}"),
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The CLI's time from spawning it to its first AWS call.
pub(crate) async fn startup(proxy: &LatencyProxy) {
    let Some((bin, which)) = cli_binary() else {
        return println!("\nCLI start-up: no stackflow binary in target/release or target/debug");
    };
    match cli_startup(proxy, &bin).await {
        Ok(s) => {
            let all: Vec<String> = s.first_call.iter().map(|t| format!("{t:.1}")).collect();
            println!(
                "\nCLI start-up ({which} build, {}): {:.1} ms from spawn to the first AWS call, median of {} [{}]",
                bin.display(),
                median(&s.first_call),
                crate::STARTUP_RUNS,
                all.join(", ")
            );
            println!(
                "  its whole deploy of one SSM parameter: {:.0} ms (median), {} requests in order: {}",
                median(&s.total),
                s.requests.last().copied().unwrap_or(0),
                s.operations.join(", ")
            );
        }
        Err(e) => println!("\nCLI start-up: {e}"),
    }
}
