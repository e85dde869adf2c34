//! Deploy and destroy wall time when every AWS call costs a fixed latency, against the
//! critical-path lower bound, and the CLI's time to its first AWS call.
//!
//! `cargo bench -p stackflow-tests --bench deploy_latency`
//!
//! Every AWS call of the engine goes through a [`LatencyProxy`] in front of the local
//! emulator, which delays each request by `STACKFLOW_BENCH_LATENCY_MS` (default 108 ms,
//! a round trip to a distant region). For each case of the corpus:
//!
//! 1. **Calibration** (latency 0, concurrency 1): a deploy and a destroy run one resource
//!    at a time, so every request the proxy sees falls inside one resource's action (from
//!    its `ResourceStarted` to its `ResourceFinished`): that gives the calls of each
//!    resource's create and delete, and the fixed calls made before the first resource
//!    starts (the availability-zone lookup).
//! 2. **Timed runs**: deploy then destroy with concurrency 10, at latency 0 (what the
//!    engine and the emulator cost by themselves) and at the configured latency.
//! 3. **Bound**: `latency × max(longest dependency chain of calls, total calls /
//!    concurrency)` (for a stack whose resources all make `k` calls, the second term is
//!    `k × ceil(n / concurrency)`, the waves the limit forces). The fixed calls before
//!    the first resource count only where a resource needs them (`Fn::GetAZs`), as a
//!    prerequisite of that resource, beside its dependencies. The destroy bound is the
//!    same with the delete calls (the reversed graph has the same longest chain).
//!
//! `vpc-two-az-nat`: fakecloud's Cloud Control does not support
//! `AWS::EC2::SubnetRouteTableAssociation` and `AWS::EC2::VPCEndpoint`; those resources,
//! what refers to them and their `DependsOn` mentions are removed (the run says which).
//!
//! Last, the CLI (`target/release/stackflow`, else `target/debug/stackflow`, or
//! `STACKFLOW_BENCH_CLI`) deploys a one-resource template through the proxy five times;
//! the median time from spawning it to its first request reaching the proxy is shown.
//!
//! The engine's store is an SQLite file under the target directory, like the CLI's local
//! store (`STACKFLOW_BENCH_STORE=memory`: in memory instead).
//!
//! Environment: `STACKFLOW_BENCH_LATENCY_MS` (default 108), `STACKFLOW_BENCH_CASES`
//! (comma-separated, default all three), `STACKFLOW_BENCH_STORE` (`file` or `memory`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_types::SdkConfig;
use stackflow_core::graph::{self, Graph};
use stackflow_core::intrinsics::{Pseudo, bind_parameters};
use stackflow_core::template::{StackTemplate, Template, load_path};
use stackflow_engine::progress::{Progress, ProgressEvent};
use stackflow_engine::stack::StackInput;
use stackflow_engine::{
    DeployOptions, Engine, StackReport, StackStatus, deploy_stack, destroy_stack,
};
use stackflow_events::sqlite::SqliteStore;
use stackflow_providers::lookups::AwsLookups;
use stackflow_providers::router::Providers;
use stackflow_tests::emulator::{ACCOUNT_ID, REGION};
use stackflow_tests::latency::{LatencyProxy, RequestRecord};
use stackflow_tests::{Emulator, unique_name};

const CASES: [&str; 3] = ["wide-200", "deep-chain-50", "vpc-two-az-nat"];
const CONCURRENCY: usize = 10;
/// Types fakecloud's Cloud Control does not support.
const UNSUPPORTED: [&str; 2] = [
    "AWS::EC2::SubnetRouteTableAssociation",
    "AWS::EC2::VPCEndpoint",
];
const STARTUP_RUNS: usize = 5;

/// One resource action, from the engine's progress events.
#[derive(Debug, Clone)]
struct Span {
    id: String,
    ty: String,
    start: Instant,
    end: Option<Instant>,
}

/// Collects the resource actions' start and end times.
#[derive(Debug, Default)]
struct Spans(Mutex<Vec<Span>>);

impl Spans {
    fn take(&self) -> Vec<Span> {
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

fn engine(
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

fn corpus(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/corpus")
        .join(case)
}

/// The resources `v` refers to.
fn refs_of(v: &serde_json::Value, t: &Template) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    graph::references(v, t, &Default::default(), &mut out);
    out
}

/// Removes the resources of unsupported types, what refers to them, and their
/// `DependsOn` mentions. Says what it removed.
fn drop_unsupported(t: &mut Template) -> Vec<String> {
    let mut gone: BTreeSet<String> = t
        .resources
        .iter()
        .filter(|(_, r)| UNSUPPORTED.contains(&r.ty.as_str()))
        .map(|(id, _)| id.clone())
        .collect();
    loop {
        let more: Vec<String> = t
            .resources
            .iter()
            .filter(|(id, _)| !gone.contains(*id))
            .filter(|(_, r)| {
                r.properties
                    .values()
                    .any(|v| refs_of(v, t).iter().any(|x| gone.contains(x)))
            })
            .map(|(id, _)| id.clone())
            .collect();
        if more.is_empty() {
            break;
        }
        gone.extend(more);
    }
    let mut notes = Vec::new();
    for id in &gone {
        if let Some(r) = t.resources.shift_remove(id) {
            notes.push(format!("removed {id} ({})", r.ty));
        }
    }
    for (id, r) in t.resources.iter_mut() {
        let dropped: Vec<String> = r
            .depends_on
            .iter()
            .filter(|d| gone.contains(*d))
            .cloned()
            .collect();
        if !dropped.is_empty() {
            r.depends_on.retain(|d| !gone.contains(d));
            notes.push(format!(
                "removed DependsOn {} from {id}",
                dropped.join(", ")
            ));
        }
    }
    let outputs: Vec<String> = t.outputs.keys().cloned().collect();
    for name in outputs {
        let o = &t.outputs[&name];
        if refs_of(&o.value, t).iter().any(|x| gone.contains(x))
            || o.export_name
                .as_ref()
                .is_some_and(|e| refs_of(e, t).iter().any(|x| gone.contains(x)))
        {
            t.outputs.shift_remove(&name);
            notes.push(format!("removed output {name}"));
        }
    }
    notes
}

fn load_case(case: &str) -> (StackTemplate, Vec<String>) {
    let mut stacks = load_path(&corpus(case)).unwrap_or_else(|e| panic!("{case}: {e}"));
    assert_eq!(stacks.len(), 1, "{case}: one stack");
    let mut stack = stacks.remove(0);
    let notes = drop_unsupported(&mut stack.template);
    (stack, notes)
}

fn input(stack: &StackTemplate, name: &str) -> StackInput {
    let parameters = bind_parameters(&stack.template, &stack.parameters)
        .unwrap_or_else(|e| panic!("{}: {e}", stack.name));
    StackInput {
        name: name.to_string(),
        source: stack.file.display().to_string(),
        template: stack.template.clone(),
        parameters,
        pseudo: Pseudo {
            region: REGION.to_string(),
            account_id: Some(ACCOUNT_ID.to_string()),
            stack_name: name.to_string(),
            stack_id: None,
        },
        nested: stack.nested.clone(),
    }
}

fn options(concurrency: usize) -> DeployOptions {
    let mut o = DeployOptions::new();
    o.concurrency = concurrency;
    o
}

/// `None` when the run succeeded, else why not.
fn problem(report: &StackReport) -> Option<String> {
    if report.status == StackStatus::Succeeded {
        return None;
    }
    let failures: Vec<String> = report
        .failures
        .iter()
        .take(3)
        .map(|f| {
            format!(
                "{} ({}) {}: {}: {}",
                f.logical_id, f.resource_type, f.action, f.error.name, f.error.message
            )
        })
        .collect();
    Some(format!(
        "{:?}; skipped {:?}; {}",
        report.status,
        report.skipped,
        failures.join("; ")
    ))
}

/// What one resource action's requests were.
#[derive(Debug, Default, Clone)]
struct Attributed {
    /// Requests per resource, in order.
    per_resource: BTreeMap<String, Vec<String>>,
    /// Requests before the first resource action started.
    before: Vec<String>,
    /// Requests after the last one ended, or between actions.
    outside: Vec<String>,
}

/// Attributes each request to the resource action that was running when it was sent
/// (only meaningful when the actions ran one at a time).
fn attribute(log: &[RequestRecord], spans: &[Span]) -> Attributed {
    let mut out = Attributed::default();
    for s in spans {
        out.per_resource.entry(s.id.clone()).or_default();
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
struct Calls {
    create: Attributed,
    delete: Attributed,
}

impl Calls {
    fn create(&self, id: &str) -> u64 {
        self.create
            .per_resource
            .get(id)
            .map_or(0, |v| v.len() as u64)
    }
    fn delete(&self, id: &str) -> u64 {
        self.delete
            .per_resource
            .get(id)
            .map_or(0, |v| v.len() as u64)
    }
}

async fn calibrate(
    proxy: &LatencyProxy,
    config: &SdkConfig,
    store: &Arc<SqliteStore>,
    stack: &StackTemplate,
) -> Result<Calls, String> {
    let saved = proxy.latency();
    proxy.set_latency(Duration::ZERO);
    let spans = Arc::new(Spans::default());
    let engine = engine(config, store.clone(), spans.clone());
    let name = unique_name("calibrate");
    proxy.reset();
    let report = deploy_stack(engine.clone(), input(stack, &name), options(1))
        .await
        .map_err(|e| format!("calibration deploy: {e}"))?;
    let create = attribute(&proxy.log(), &spans.take());
    let deployed = problem(&report);
    proxy.reset();
    let report = destroy_stack(engine, &name, options(1))
        .await
        .map_err(|e| format!("calibration destroy: {e}"))?;
    let delete = attribute(&proxy.log(), &spans.take());
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
struct Run {
    deploy: Duration,
    destroy: Duration,
    deploy_requests: u64,
    destroy_requests: u64,
    deploy_spans: Vec<Span>,
    destroy_spans: Vec<Span>,
    deploy_started: Instant,
    destroy_started: Instant,
    deploy_log: Vec<RequestRecord>,
    problem: Option<String>,
}

async fn timed(
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
    let report = deploy_stack(engine.clone(), stack_input, options(CONCURRENCY))
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
    let report = destroy_stack(engine, &name, options(CONCURRENCY))
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

/// A lower bound, in calls of one latency each.
#[derive(Debug)]
struct Bound {
    /// The longest chain: its calls and its resources, first to last.
    chain: f64,
    path: Vec<String>,
    /// Whether the fixed calls before the first resource are on the chain.
    fixed_on_path: bool,
    /// Total calls over the concurrency (the waves).
    waves: f64,
}

impl Bound {
    fn calls(&self) -> f64 {
        self.chain.max(self.waves)
    }
}

/// The lower bound for `calls` per resource; `fixed` calls are a prerequisite of the
/// resources for which `needs_fixed` holds.
fn bound(
    template: &Template,
    calls: impl Fn(&str) -> u64,
    fixed: u64,
    needs_fixed: impl Fn(&str) -> bool,
) -> Bound {
    let g = Graph::build(template, &Default::default()).expect("the dependency graph");
    let mut finish: HashMap<&str, (f64, Option<&str>, bool)> = HashMap::new();
    for id in g.topological_order() {
        let mut start = (0.0, None, false);
        if needs_fixed(id) && fixed > 0 {
            start = (fixed as f64, None, true);
        }
        for d in g.dependencies(id) {
            let (f, _, _) = finish[d];
            if f > start.0 {
                start = (f, Some(d), finish[d].2);
            }
        }
        finish.insert(id, (start.0 + calls(id) as f64, start.1, start.2));
    }
    let end = finish
        .iter()
        .max_by(|a, b| a.1.0.total_cmp(&b.1.0))
        .map(|(id, v)| (*id, *v));
    let (chain, path, fixed_on_path) = match end {
        None => (0.0, vec![], false),
        Some((id, (total, _, on))) => {
            let mut path = vec![id.to_string()];
            let mut cur = id;
            while let Some(prev) = finish[cur].1 {
                path.push(prev.to_string());
                cur = prev;
            }
            path.reverse();
            (total, path, on)
        }
    };
    // Without fixed calls this is the graph's own critical path.
    if fixed == 0 {
        let (check, _) = g.critical_path(|id| calls(id) as f64);
        assert!((check - chain).abs() < 1e-9, "{check} != {chain}");
    }
    let ids = g.nodes();
    let per: Vec<u64> = ids.iter().map(|id| calls(id)).collect();
    let total: u64 = per.iter().sum();
    let waves = match per.first() {
        Some(&k) if per.iter().all(|&c| c == k) => {
            (k * ids.len().div_ceil(CONCURRENCY) as u64) as f64
        }
        _ => total as f64 / CONCURRENCY as f64,
    };
    Bound {
        chain,
        path,
        fixed_on_path,
        waves,
    }
}

fn uses_get_azs(template: &Template, id: &str) -> bool {
    template.resources.get(id).is_some_and(|r| {
        serde_json::to_string(&r.properties).is_ok_and(|s| s.contains("Fn::GetAZs"))
    })
}

/// Counts of each label, `A×2, B`.
fn summarize(labels: &[String]) -> String {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for l in labels {
        let short = l.rsplit('.').next().unwrap_or(l).to_string();
        match counts.iter_mut().find(|(x, _)| *x == short) {
            Some((_, n)) => *n += 1,
            None => counts.push((short, 1)),
        }
    }
    counts
        .into_iter()
        .map(|(l, n)| if n > 1 { format!("{l}×{n}") } else { l })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Per type: the range of create and delete calls, and the calls of one example.
fn print_calls(stack: &StackTemplate, calls: &Calls) {
    let mut by_type: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (id, r) in &stack.template.resources {
        by_type.entry(r.ty.as_str()).or_default().push(id.as_str());
    }
    for (ty, ids) in by_type {
        let range = |f: &dyn Fn(&str) -> u64| {
            let v: Vec<u64> = ids.iter().map(|id| f(id)).collect();
            let (lo, hi) = (v.iter().min().copied(), v.iter().max().copied());
            match (lo, hi) {
                (Some(lo), Some(hi)) if lo != hi => format!("{lo}-{hi}"),
                (Some(lo), _) => lo.to_string(),
                _ => "-".into(),
            }
        };
        let example = ids[0];
        println!(
            "    {ty:<36} ×{:<3} create {:<4} [{}]  delete {:<4} [{}]",
            ids.len(),
            range(&|id| calls.create(id)),
            summarize(
                calls
                    .create
                    .per_resource
                    .get(example)
                    .map_or(&[][..], |v| v)
            ),
            range(&|id| calls.delete(id)),
            summarize(
                calls
                    .delete
                    .per_resource
                    .get(example)
                    .map_or(&[][..], |v| v)
            ),
        );
    }
    let fixed = |a: &Attributed, what: &str| {
        if !a.before.is_empty() || !a.outside.is_empty() {
            println!(
                "    {what}: {} calls before the first resource [{}], {} outside any resource [{}]",
                a.before.len(),
                summarize(&a.before),
                a.outside.len(),
                summarize(&a.outside)
            );
        }
    };
    fixed(&calls.create, "deploy");
    fixed(&calls.delete, "destroy");
}

/// Where the time of a timed run went: before the first resource, after the last, the
/// mean action per type, the mean concurrency, and the gaps along the bound's path.
fn print_breakdown(
    what: &str,
    started: Instant,
    wall: Duration,
    spans: &[Span],
    path: &[String],
    latency: Duration,
    calls: impl Fn(&str) -> u64,
) {
    if spans.is_empty() {
        return;
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let first = spans.iter().map(|s| s.start).min().unwrap_or(started);
    let last = spans.iter().filter_map(|s| s.end).max().unwrap_or(started);
    let busy: f64 = spans
        .iter()
        .filter_map(|s| s.end.map(|e| ms(e - s.start)))
        .sum();
    println!(
        "    {what}: {:.0} ms before the first resource, {:.0} ms after the last; mean concurrency {:.1}",
        ms(first - started),
        ms((started + wall).saturating_duration_since(last)),
        busy / ms(last - first).max(1e-9),
    );
    let mut by_type: BTreeMap<&str, (f64, f64, usize)> = BTreeMap::new();
    for s in spans {
        if let Some(e) = s.end {
            let x = by_type.entry(s.ty.as_str()).or_default();
            x.0 += ms(e - s.start);
            x.1 += calls(&s.id) as f64 * ms(latency);
            x.2 += 1;
        }
    }
    for (ty, (total, ideal, n)) in by_type {
        println!(
            "      {ty:<36} mean action {:>6.0} ms (calls × latency {:>5.0} ms)",
            total / n as f64,
            ideal / n as f64
        );
    }
    if path.len() > 1 {
        let by_id: HashMap<&str, &Span> = spans.iter().map(|s| (s.id.as_str(), s)).collect();
        let mut gaps = 0.0;
        let mut actions = 0.0;
        let mut prev_end: Option<Instant> = None;
        for id in path {
            let Some(s) = by_id.get(id.as_str()) else {
                continue;
            };
            if let Some(p) = prev_end {
                gaps += ms(s.start.saturating_duration_since(p));
            }
            if let Some(e) = s.end {
                actions += ms(e - s.start);
                prev_end = Some(e);
            }
        }
        println!(
            "      along the bound's chain of {} resources: {:.0} ms in actions, {:.0} ms between one's end and the next's start",
            path.len(),
            actions,
            gaps
        );
    }
}

/// Requests per operation in a run, most first.
fn print_operations(log: &[RequestRecord]) {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for r in log {
        *counts.entry(r.label.as_str()).or_default() += 1;
    }
    let mut v: Vec<(&str, usize)> = counts.into_iter().collect();
    v.sort_by_key(|x| std::cmp::Reverse(x.1));
    let text: Vec<String> = v.iter().map(|(l, n)| format!("{l} {n}")).collect();
    println!("    deploy requests by operation: {}", text.join(", "));
}

/// The CLI binary to time.
fn cli_binary() -> Option<(PathBuf, String)> {
    if let Some(p) = std::env::var_os("STACKFLOW_BENCH_CLI") {
        return Some((PathBuf::from(p), "STACKFLOW_BENCH_CLI".into()));
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    ["release", "debug"].into_iter().find_map(|profile| {
        let bin = target.join(profile).join("stackflow");
        bin.exists()
            .then(|| (bin.canonicalize().unwrap_or(bin), profile.to_string()))
    })
}

/// What the CLI's runs measured.
#[derive(Debug, Default)]
struct Startup {
    /// From spawning the CLI to its first request reaching the proxy, in ms, per run.
    first_call: Vec<f64>,
    /// From spawning it to its exit, in ms, per run.
    total: Vec<f64>,
    /// Requests per run.
    requests: Vec<u64>,
    /// The operations of the last run, in order.
    operations: Vec<String>,
}

fn median(v: &[f64]) -> f64 {
    let mut sorted = v.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Runs the CLI's deploy of a one-resource template [`STARTUP_RUNS`] times.
async fn cli_startup(proxy: &LatencyProxy, bin: &Path) -> Result<Startup, String> {
    let dir = std::env::temp_dir().join(unique_name("stackflow-bench-cli"));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let mut out = Startup::default();
    for _ in 0..STARTUP_RUNS {
        let name = unique_name("startup");
        let file = dir.join(format!("{name}.json"));
        let template = serde_json::json!({
            "Resources": {"P": {"Type": "AWS::SSM::Parameter", "Properties": {"Type": "String", "Value": "x"}}}
        });
        std::fs::write(&file, template.to_string()).map_err(|e| e.to_string())?;
        let store = dir.join(&name);
        proxy.reset();
        let mut cmd = Command::new(bin);
        cmd.arg("--endpoint-url")
            .arg(proxy.endpoint())
            .arg("--store")
            .arg(format!("local:{}", store.display()))
            .arg("deploy")
            .arg(&file)
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("AWS_REGION", REGION)
            .env("AWS_CONFIG_FILE", dir.join("no-config"))
            .env("AWS_SHARED_CREDENTIALS_FILE", dir.join("no-credentials"))
            .env_remove("AWS_PROFILE")
            .env_remove("AWS_ENDPOINT_URL")
            .env_remove("STACKFLOW_STORE")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let spawned = Instant::now();
        let output = tokio::task::spawn_blocking(move || cmd.output())
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("{}: {e}", bin.display()))?;
        let total = spawned.elapsed();
        let Some(first) = proxy.first_request_at() else {
            return Err(format!(
                "the CLI made no AWS call (exit {:?}): {}",
                output.status.code(),
                String::from_utf8_lossy(&output.stderr)
            ));
        };
        if !output.status.success() {
            eprintln!(
                "  note: the CLI's deploy exited {:?}: {}",
                output.status.code(),
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        let mut log = proxy.log();
        log.sort_by_key(|r| r.at);
        out.operations = log.into_iter().map(|r| r.label).collect();
        out.first_call.push((first - spawned).as_secs_f64() * 1e3);
        out.total.push(total.as_secs_f64() * 1e3);
        out.requests.push(proxy.requests());
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(out)
}

struct Row {
    case: String,
    resources: usize,
    zero: Option<Run>,
    run: Run,
    deploy_bound: Bound,
    destroy_bound: Bound,
}

#[tokio::main]
async fn main() {
    let latency_ms: u64 = std::env::var("STACKFLOW_BENCH_LATENCY_MS")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(108);
    let latency = Duration::from_millis(latency_ms);
    let cases: Vec<String> = match std::env::var("STACKFLOW_BENCH_CASES") {
        Ok(v) if !v.trim().is_empty() => v.split(',').map(|s| s.trim().to_string()).collect(),
        _ => CASES.iter().map(|s| s.to_string()).collect(),
    };

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
    // The CLI's local store is a database file (WAL, a sync per append); `memory` shows
    // what the appends cost.
    let in_memory = std::env::var("STACKFLOW_BENCH_STORE").is_ok_and(|v| v.trim() == "memory");
    let store_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(unique_name("deploy-latency"));
    let (store, store_text) = if in_memory {
        let store = SqliteStore::open_in_memory().expect("an in-memory store");
        (store, "in memory".to_string())
    } else {
        std::fs::create_dir_all(&store_dir).expect("the store's directory");
        let file = store_dir.join("events.db");
        let store = SqliteStore::open(&file).expect("a store file");
        (store, format!("file {}", file.display()))
    };
    let store = Arc::new(store);
    println!(
        "latency {latency_ms} ms per AWS call (proxy {} → emulator {}), concurrency {CONCURRENCY}, store {store_text}",
        proxy.endpoint(),
        emulator.endpoint()
    );

    let mut rows = Vec::new();
    for case in &cases {
        let (stack, notes) = load_case(case);
        println!("\n{case}: {} resources", stack.template.resources.len());
        for n in &notes {
            println!("  {n} (fakecloud's Cloud Control does not support it)");
        }
        let calls = match calibrate(&proxy, &config, &store, &stack).await {
            Ok(c) => c,
            Err(e) => {
                println!("  INVALID: {e}");
                continue;
            }
        };
        println!("  calls per resource (calibration: latency 0, one resource at a time):");
        print_calls(&stack, &calls);
        let t = &stack.template;
        let deploy_bound = bound(
            t,
            |id| calls.create(id),
            calls.create.before.len() as u64,
            |id| uses_get_azs(t, id),
        );
        let destroy_bound = bound(t, |id| calls.delete(id), 0, |_| false);
        if deploy_bound.fixed_on_path {
            println!(
                "  the deploy bound includes the {} call(s) made before the first resource (on its chain)",
                calls.create.before.len()
            );
        } else if !calls.create.before.is_empty() {
            println!(
                "  the {} call(s) before the first resource are not on the deploy bound's chain",
                calls.create.before.len()
            );
        }
        let zero = match timed(&proxy, &config, &store, &stack, Duration::ZERO).await {
            Ok(r) => Some(r),
            Err(e) => {
                println!("  latency-0 run failed: {e}");
                None
            }
        };
        let run = match timed(&proxy, &config, &store, &stack, latency).await {
            Ok(r) => r,
            Err(e) => {
                println!("  INVALID: {e}");
                continue;
            }
        };
        if let Some(p) = &run.problem {
            println!("  INVALID: {p}");
        }
        println!("  where the time went (latency {latency_ms} ms):");
        print_breakdown(
            "deploy",
            run.deploy_started,
            run.deploy,
            &run.deploy_spans,
            &deploy_bound.path,
            latency,
            |id| calls.create(id),
        );
        let mut reversed = destroy_bound.path.clone();
        reversed.reverse();
        print_breakdown(
            "destroy",
            run.destroy_started,
            run.destroy,
            &run.destroy_spans,
            &reversed,
            latency,
            |id| calls.delete(id),
        );
        print_operations(&run.deploy_log);
        rows.push(Row {
            case: case.clone(),
            resources: stack.template.resources.len(),
            zero,
            run,
            deploy_bound,
            destroy_bound,
        });
    }

    let secs = |calls: f64| calls * latency.as_secs_f64();
    println!(
        "\n{:<16} {:>5} {:>8} {:>8} {:>6} {:>9} {:>8} {:>6} {:>16} {:>14}",
        "case",
        "res",
        "deploy s",
        "bound s",
        "ratio",
        "destroy s",
        "bound s",
        "ratio",
        "requests dep/des",
        "at 0 ms dep/des"
    );
    for r in &rows {
        let db = secs(r.deploy_bound.calls());
        let xb = secs(r.destroy_bound.calls());
        let invalid = if r.run.problem.is_some() {
            "  INVALID"
        } else {
            ""
        };
        println!(
            "{:<16} {:>5} {:>8.2} {:>8.2} {:>5.2}x {:>9.2} {:>8.2} {:>5.2}x {:>16} {:>14}{invalid}",
            r.case,
            r.resources,
            r.run.deploy.as_secs_f64(),
            db,
            r.run.deploy.as_secs_f64() / db,
            r.run.destroy.as_secs_f64(),
            xb,
            r.run.destroy.as_secs_f64() / xb,
            format!("{}/{}", r.run.deploy_requests, r.run.destroy_requests),
            r.zero.as_ref().map_or("-".into(), |z| format!(
                "{:.2}/{:.2}",
                z.deploy.as_secs_f64(),
                z.destroy.as_secs_f64()
            )),
        );
    }
    println!("\nbounds, in calls of {latency_ms} ms (max of the longest chain and the waves):");
    for r in &rows {
        let d = &r.deploy_bound;
        let x = &r.destroy_bound;
        println!(
            "  {:<16} deploy: chain {} over {} resources{}, waves {:.1}; destroy: chain {} over {} resources, waves {:.1}",
            r.case,
            d.chain,
            d.path.len(),
            if d.fixed_on_path {
                " (fixed calls included)"
            } else {
                ""
            },
            d.waves,
            x.chain,
            x.path.len(),
            x.waves
        );
    }

    drop(store);
    let _ = std::fs::remove_dir_all(&store_dir);

    match cli_binary() {
        None => println!("\nCLI start-up: no stackflow binary in target/release or target/debug"),
        Some((bin, which)) => match cli_startup(&proxy, &bin).await {
            Ok(s) => {
                let all: Vec<String> = s.first_call.iter().map(|t| format!("{t:.1}")).collect();
                println!(
                    "\nCLI start-up ({which} build, {}): {:.1} ms from spawn to the first AWS call, median of {STARTUP_RUNS} [{}]",
                    bin.display(),
                    median(&s.first_call),
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
        },
    }
}
