//! The cost of a deploy through the installed engine (issues 16 and 25; README, "Install
//! the engine in an account"), measured on the emulator: an engine that
//! `stackflow engine deploy` installed deploys, with `--remote`, the corpus's wide-200 and
//! deep-chain-50 stacks, and stacks of 50, 500 and 2,000 independent queues
//! (`STACKFLOW_COST_SIZES` names others), and for each deploy this counts, over every
//! execution it ran (its own and its parts'):
//!
//! - billed state transitions: each state entered (`...StateEntered`, Map iterations'
//!   states included) and each retry (a task scheduled again: a gate's re-check, a
//!   `Stackflow.Again`, a transient error), as Step Functions Standard bills them;
//! - Lambda requests and GB-seconds: every invocation of one of the engine's functions
//!   during the deploy, as the container stand-in reports it (its `REPORT ... Duration`
//!   line), times the function's memory size (`GetFunctionConfiguration`);
//! - DynamoDB, S3 and Step Functions requests: the emulator's log of the requests it
//!   handled during the deploy (the CLI's own included: a few);
//! - priced at the public us-east-1 rates (Step Functions Standard $0.025 per 1,000
//!   transitions; Lambda arm64 $0.0000133334 per GB-second, $0.20 per million
//!   requests).
//!
//! For the queue stacks it prints each figure per action and asserts that it grows
//! linearly: the same per action, within 20%, at every size. Durations are the emulator's
//! and this machine's, not AWS's. A measurement, on demand:
//!
//! ```text
//! cargo test --workspace --test engine_cost -- --ignored --nocapture
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use stackflow_tests::Emulator;
use stackflow_tests::installed::Installed;
use stackflow_tests::triggers::{ended, executions};

const TRANSITION_USD: f64 = 0.025 / 1000.0;
const GB_SECOND_USD: f64 = 0.000_013_333_4;
const REQUEST_USD: f64 = 0.20 / 1_000_000.0;

/// One invocation the stand-in reported: its function and duration in milliseconds.
type Invocations = BTreeMap<(PathBuf, String), (String, f64)>;

/// Every invocation reported by the stand-in's containers of the engine's functions
/// (`<engine>-*`), by container and request id: the running ones and those fakecloud
/// removed (an instance idle for 5 minutes; the stand-in keeps its log in `removed/`).
fn invocations(standin: &Path, engine: &str) -> Invocations {
    let mut out = Invocations::new();
    let dirs = [standin.to_path_buf(), standin.join("removed")]
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flatten()
        .flatten()
        .map(|d| d.path())
        .collect::<Vec<_>>();
    for dir in dirs {
        let Ok(config) = std::fs::read_to_string(dir.join("config.json")) else {
            continue;
        };
        let config: serde_json::Value = serde_json::from_str(&config).unwrap_or_default();
        let function = config["env"]["AWS_LAMBDA_FUNCTION_NAME"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if !function.starts_with(&format!("{engine}-")) {
            continue;
        }
        let log = std::fs::read(dir.join("log")).unwrap_or_default();
        for line in String::from_utf8_lossy(&log).lines() {
            let Some(rest) = line.strip_prefix("REPORT RequestId: ") else {
                continue;
            };
            let Some((id, duration)) = rest.split_once("\tDuration: ") else {
                continue;
            };
            let ms: f64 = duration.trim_end_matches(" ms").parse().unwrap_or(0.0);
            out.insert((dir.clone(), id.to_string()), (function.clone(), ms));
        }
    }
    out
}

/// The stand-in's directory of this process's emulator, once a function was invoked.
fn standin_dir(emu: &Emulator) -> Option<PathBuf> {
    let log = emu
        .log_path()
        .expect("a managed emulator (the stand-in's logs are read)");
    let prefix = format!("standin-{}-", std::process::id());
    std::fs::read_dir(log.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|d| d.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix))
        })
}

/// Every invocation of the engine's functions reported so far.
fn invocations_so_far(emu: &Emulator, engine: &str) -> Invocations {
    standin_dir(emu)
        .map(|dir| invocations(&dir, engine))
        .unwrap_or_default()
}

struct Measured {
    /// Billed transitions: states entered and retries.
    transitions: usize,
    /// Of which retries.
    retries: usize,
    /// The executions the deploy ran (its own and its parts').
    executions: usize,
    /// The most events one of them has in its history.
    largest_history: usize,
    requests: usize,
    gb_seconds: f64,
    by_function: BTreeMap<String, (usize, f64)>,
    /// Requests the emulator handled during the deploy, by service.
    by_service: BTreeMap<String, usize>,
}

impl Measured {
    fn usd(&self) -> (f64, f64, f64) {
        (
            self.transitions as f64 * TRANSITION_USD,
            self.gb_seconds * GB_SECOND_USD,
            self.requests as f64 * REQUEST_USD,
        )
    }
}

/// The requests the emulator's log (from byte `from` on) says it handled, by service.
fn handled(log: &Path, from: u64) -> BTreeMap<String, usize> {
    let text = std::fs::read(log).unwrap_or_default();
    let new = text.get(from as usize..).unwrap_or_default();
    let mut out = BTreeMap::new();
    for line in String::from_utf8_lossy(new).lines() {
        let plain = strip_ansi(line);
        if !plain.contains("handling request") {
            continue;
        }
        if let Some(service) = plain
            .split_whitespace()
            .find_map(|w| w.strip_prefix("service="))
        {
            *out.entry(service.to_string()).or_default() += 1;
        }
    }
    out
}

/// `line` without its terminal colour codes (`ESC [ ... m`).
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The billed transitions of execution `arn` (every page of its history): states entered,
/// and retries (a task scheduled again after its state was entered); the retries; and how
/// many events its history has.
async fn billed(sfn: &aws_sdk_sfn::Client, arn: &str) -> (usize, usize, usize) {
    let (mut entered, mut scheduled, mut tasks, mut events) = (0, 0, 0, 0);
    let mut token = None;
    loop {
        let page = sfn
            .get_execution_history()
            .execution_arn(arn)
            .max_results(1000)
            .set_next_token(token)
            .send()
            .await
            .unwrap();
        events += page.events().len();
        for e in page.events() {
            let kind = e.r#type().as_str();
            entered += usize::from(kind.ends_with("StateEntered"));
            tasks += usize::from(kind == "TaskStateEntered");
            scheduled += usize::from(kind == "LambdaFunctionScheduled" || kind == "TaskScheduled");
        }
        token = page.next_token().map(str::to_string);
        if token.is_none() {
            break;
        }
    }
    let retries = scheduled.saturating_sub(tasks);
    (entered + retries, retries, events)
}

/// Deploys `template` through the engine and measures the deploy.
async fn measure(
    emu: &Emulator,
    engine: &Installed,
    sfn: &aws_sdk_sfn::Client,
    memory: &BTreeMap<String, i32>,
    template: &Path,
) -> Measured {
    let machine = engine.machine("deploy");
    let log = emu
        .log_path()
        .expect("a managed emulator (its log is read)");
    let from = std::fs::metadata(log).map(|m| m.len()).unwrap_or(0);
    let before_runs = executions(sfn, &machine).await;
    let before = invocations_so_far(emu, &engine.name);
    // Not followed by the CLI (whose runs the harness stops at 4 minutes): a deploy of
    // 2,000 takes longer; its end is waited for below.
    let run = engine.run_remote(template, &["--no-follow"]);
    assert_eq!(run.code, Some(0), "{}", run.describe());
    let is_part = |n: &str| {
        n.rsplit_once('-').is_some_and(|(_, t)| {
            t.len() > 1 && t.starts_with(['p', 'c']) && t[1..].bytes().all(|b| b.is_ascii_digit())
        })
    };
    let fresh_runs = |runs: BTreeMap<String, String>| -> Vec<String> {
        runs.into_keys()
            .filter(|n| !before_runs.contains_key(n))
            .collect()
    };
    let started = fresh_runs(executions(sfn, &machine).await);
    let deploys: Vec<&String> = started.iter().filter(|n| !is_part(n)).collect();
    assert_eq!(deploys.len(), 1, "{started:?}");
    let wait = std::time::Duration::from_secs(3 * 3600);
    assert_eq!(ended(sfn, &machine, deploys[0], wait).await, "SUCCEEDED");
    // The deploy's executions: its own and its parts', started as it went.
    let new = fresh_runs(executions(sfn, &machine).await);
    let after = invocations_so_far(emu, &engine.name);
    let by_service = handled(log, from);

    let (mut transitions, mut retries, mut largest_history) = (0, 0, 0);
    for name in &new {
        let arn = format!(
            "{}:{name}",
            machine.replace(":stateMachine:", ":execution:")
        );
        let (t, r, events) = billed(sfn, &arn).await;
        transitions += t;
        retries += r;
        largest_history = largest_history.max(events);
    }
    let mut by_function: BTreeMap<String, (usize, f64)> = BTreeMap::new();
    let mut gb_seconds = 0.0;
    let fresh = after.iter().filter(|(k, _)| !before.contains_key(*k));
    for (_, (function, ms)) in fresh {
        let mb = memory[function];
        // Billed per millisecond, rounded up.
        let gbs = ms.ceil() / 1000.0 * f64::from(mb) / 1024.0;
        gb_seconds += gbs;
        let entry = by_function.entry(function.clone()).or_default();
        entry.0 += 1;
        entry.1 += gbs;
    }
    let requests = by_function.values().map(|(n, _)| n).sum();
    Measured {
        transitions,
        retries,
        executions: new.len(),
        largest_history,
        requests,
        gb_seconds,
        by_function,
        by_service,
    }
}

/// A template of `n` independent queues, written under `dir` (the stack is named after
/// the file).
fn queues(dir: &Path, n: usize) -> PathBuf {
    let resources: serde_json::Map<String, serde_json::Value> = (0..n)
        .map(|i| {
            (
                format!("Q{i}"),
                serde_json::json!({"Type": "AWS::SQS::Queue"}),
            )
        })
        .collect();
    let path = dir.join(format!("CostQueues{n}.json"));
    let body = serde_json::json!({ "Resources": resources });
    std::fs::write(&path, serde_json::to_vec(&body).unwrap()).unwrap();
    path
}

/// The sizes of the queue stacks: `STACKFLOW_COST_SIZES` (comma-separated), else 50, 500
/// and 2,000.
fn sizes() -> Vec<usize> {
    std::env::var("STACKFLOW_COST_SIZES")
        .ok()
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .filter(|v: &Vec<usize>| !v.is_empty())
        .unwrap_or_else(|| vec![50, 500, 2_000])
}

/// The figures of `m` per action of a deploy of `n`: transitions, Lambda requests,
/// DynamoDB requests, S3 requests.
fn per_action(m: &Measured, n: usize) -> [f64; 4] {
    let service = |s: &str| m.by_service.get(s).copied().unwrap_or(0) as f64;
    let n = n as f64;
    [
        m.transitions as f64 / n,
        m.requests as f64 / n,
        service("dynamodb") / n,
        service("s3") / n,
    ]
}

/// Prints what `m` measured of the deploy `case`.
fn report(case: &str, m: &Measured) {
    let (sfn_usd, gbs_usd, req_usd) = m.usd();
    println!(
        "{case}: {} executions (the largest history {} events); {} billed state transitions, {} of them retries \
         (${sfn_usd:.5}); {} Lambda requests (${req_usd:.6}), {:.2} GB-s (${gbs_usd:.5}); \
         ${:.4} a deploy; requests by service {:?}",
        m.executions,
        m.largest_history,
        m.transitions,
        m.retries,
        m.requests,
        m.gb_seconds,
        sfn_usd + gbs_usd + req_usd,
        m.by_service,
    );
    for (f, (n, gbs)) in &m.by_function {
        println!("    {f}: {n} invocations, {gbs:.3} GB-s");
    }
}

fn corpus(dir: &str, stem: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/corpus")
        .join(dir)
        .join(format!("{stem}.template.json"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: cargo test --workspace --test engine_cost -- --ignored --nocapture"]
async fn cost_of_a_deploy_through_the_installed_engine() {
    let emu = Emulator::shared().await;
    let config = emu.sdk_config().await;
    let engine = Installed::install(emu, &["--parameter", "Triggers=off"]).await;
    let sfn = aws_sdk_sfn::Client::new(&config);
    let lambda = aws_sdk_lambda::Client::new(&config);
    // The CDK templates' BootstrapVersion parameter reads this.
    aws_sdk_ssm::Client::new(&config)
        .put_parameter()
        .name("/cdk-bootstrap/hnb659fds/version")
        .value("21")
        .r#type(aws_sdk_ssm::types::ParameterType::String)
        .overwrite(true)
        .send()
        .await
        .unwrap();
    let mut memory = BTreeMap::new();
    for task in stackflow_engine::tasks::TASK_NAMES {
        let name = format!("{}-{}", engine.name, task.to_lowercase());
        let c = lambda
            .get_function_configuration()
            .function_name(&name)
            .send()
            .await
            .unwrap();
        memory.insert(name, c.memory_size().unwrap_or(128));
    }
    println!("memory sizes (MB): {memory:?}");
    let cases = [
        ("wide-200", corpus("wide-200", "Wide200Stack")),
        ("deep-chain-50", corpus("deep-chain-50", "DeepChain50Stack")),
    ];
    for (case, template) in cases {
        report(case, &measure(emu, &engine, &sfn, &memory, &template).await);
    }
    let dir = std::env::temp_dir().join(stackflow_tests::unique_name("cost"));
    std::fs::create_dir_all(&dir).unwrap();
    let mut rows = Vec::new();
    for n in sizes() {
        let m = measure(emu, &engine, &sfn, &memory, &queues(&dir, n)).await;
        report(&format!("{n} queues"), &m);
        let per = per_action(&m, n);
        println!(
            "    per action: {:.2} transitions, {:.2} Lambda requests, {:.2} DynamoDB requests, \
             {:.2} S3 requests",
            per[0], per[1], per[2], per[3]
        );
        rows.push((n, per));
    }
    // Linear: each figure per action the same at every size, within 20% (the fixed part
    // of a deploy, Plan, Conclude and Finish, is spread over its actions: the smallest
    // size may cost more per action, never less by more than that).
    let largest = rows.last().map(|r| r.1).unwrap_or_default();
    for (n, per) in &rows[1..] {
        for (k, what) in ["transitions", "Lambda requests", "DynamoDB", "S3"]
            .iter()
            .enumerate()
        {
            let (a, b) = (per[k], largest[k]);
            assert!(
                (a - b).abs() <= 0.2 * b.max(a),
                "{what} per action at {n}: {a:.2}, at the largest size {b:.2}: {rows:?}"
            );
        }
    }
    engine.destroy(&["--delete-table"]);
}
