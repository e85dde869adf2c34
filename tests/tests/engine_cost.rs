//! The cost of a deploy through the installed engine (issue 16; README, "Install the
//! engine in an account"), measured on the emulator for the corpus's wide-200 and
//! deep-chain-50 stacks, each deployed with `--remote` by an engine that
//! `stackflow engine deploy` installed:
//!
//! - state transitions: the execution history's `...StateEntered` events, each state
//!   entered (what Step Functions Standard bills, Map iterations' states included);
//! - Lambda requests and GB-seconds: every invocation of one of the engine's functions
//!   during the deploy, as the container stand-in reports it (its `REPORT ... Duration`
//!   line, the time from the invocation's arrival to its answer), times the function's
//!   memory size (infra/engine.yaml, as `GetFunctionConfiguration` answers it);
//! - priced at the public us-east-1 rates (Step Functions Standard $0.025 per 1,000
//!   transitions; Lambda arm64 $0.0000133334 per GB-second, $0.20 per million
//!   requests).
//!
//! Durations here are the emulator's and this machine's, not AWS's: the function runs
//! as a local process for an x86_64 build, and every AWS call it makes goes to the
//! emulator. A measurement, not a check:
//!
//! ```text
//! cargo test -p stackflow-tests --test engine_cost -- --ignored --nocapture
//! ```

use std::collections::{BTreeMap, BTreeSet};
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
/// (`<engine>-*`), by container and request id.
fn invocations(standin: &Path, engine: &str) -> Invocations {
    let mut out = Invocations::new();
    let Ok(dirs) = std::fs::read_dir(standin) else {
        return out;
    };
    for dir in dirs.flatten().map(|d| d.path()) {
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
    transitions: usize,
    tasks: usize,
    requests: usize,
    gb_seconds: f64,
    by_function: BTreeMap<String, (usize, f64)>,
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

/// Deploys `template` through the engine and measures the deploy.
async fn measure(
    emu: &Emulator,
    engine: &Installed,
    sfn: &aws_sdk_sfn::Client,
    memory: &BTreeMap<String, i32>,
    template: &Path,
) -> Measured {
    let machine = engine.machine("deploy");
    let before_runs = executions(sfn, &machine).await;
    let before = invocations_so_far(emu, &engine.name);
    engine.deploy_remote(template);
    let runs = executions(sfn, &machine).await;
    let new: Vec<&String> = runs
        .keys()
        .filter(|n| !before_runs.contains_key(*n))
        .collect();
    assert_eq!(new.len(), 1, "{runs:?}");
    let name = new[0].clone();
    let wait = std::time::Duration::from_secs(60);
    assert_eq!(ended(sfn, &machine, &name, wait).await, "SUCCEEDED");
    let after = invocations_so_far(emu, &engine.name);

    let arn = format!(
        "{}:{name}",
        machine.replace(":stateMachine:", ":execution:")
    );
    let mut transitions = 0;
    let mut tasks = 0;
    let mut token = None;
    loop {
        let page = sfn
            .get_execution_history()
            .execution_arn(&arn)
            .max_results(1000)
            .set_next_token(token)
            .send()
            .await
            .unwrap();
        for e in page.events() {
            let kind = e.r#type().as_str();
            transitions += usize::from(kind.ends_with("StateEntered"));
            tasks += usize::from(kind == "TaskStarted");
        }
        token = page.next_token().map(str::to_string);
        if token.is_none() {
            break;
        }
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
        tasks,
        requests,
        gb_seconds,
        by_function,
    }
}

fn corpus(dir: &str, stem: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/corpus")
        .join(dir)
        .join(format!("{stem}.template.json"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: cargo test -p stackflow-tests --test engine_cost -- --ignored --nocapture"]
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
        let started = std::time::Instant::now();
        let m = measure(emu, &engine, &sfn, &memory, &template).await;
        let (sfn_usd, gbs_usd, req_usd) = m.usd();
        println!(
            "{case}: deploy {:.1} s; {} state transitions (${sfn_usd:.5}); {} Lambda requests \
             (${req_usd:.6}; {} tasks in the history), {:.2} GB-s (${gbs_usd:.5}); \
             ${:.4} a deploy",
            started.elapsed().as_secs_f64(),
            m.transitions,
            m.requests,
            m.tasks,
            m.gb_seconds,
            sfn_usd + gbs_usd + req_usd,
        );
        let functions: BTreeSet<&String> = m.by_function.keys().collect();
        for f in functions {
            let (n, gbs) = m.by_function[f];
            println!("    {f}: {n} invocations, {gbs:.3} GB-s");
        }
    }
    engine.destroy(&["--delete-table"]);
}
