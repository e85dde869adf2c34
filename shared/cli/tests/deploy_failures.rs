//! Deploys that fail, are killed, or collide, run the way a user runs them: the `stackflow`
//! binary against the shared emulator, each test with its own local store and stack names.
//! What ends up in AWS is checked through the AWS APIs, not through stackflow's records.
//!
//! - a failing deploy rolls back what it created (and a failed update restores old values);
//! - `--no-rollback` keeps it all until `stackflow rollback`;
//! - a deploy or destroy killed with SIGKILL at any point is finished by the next run,
//!   with nothing duplicated and nothing orphaned;
//! - a call interrupted by a kill and followed by a deploy of the previous template (exact
//!   reproductions written into the store, and the same through real kills) is finished
//!   with what it sent, so the state says what AWS holds before the next change;
//! - a second deploy of a stack that is being deployed is refused and names the holder.
//!
//! A failing test leaves its runs' output, and for the kill test a `failure-report.txt`
//! with the history and the stack's events, under `target/tmp/deploy-failures/`.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::fs::File;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use aws_sdk_sqs::error::ProvideErrorMetadata;
use serde_json::Value;
use stackflow_events::event::{
    Event, Holder, NewEvent, Operation, ProviderKind, ResourceRecord, now,
};
use stackflow_events::sqlite::SqliteStore;
use stackflow_events::{EventStore, Precondition, StreamId};
use stackflow_tests::emulator::{Emulator, unique_name};

/// Longest a single `stackflow` run may take before the test gives up on it.
const RUN_TIMEOUT: Duration = Duration::from_secs(180);

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/deploy-failures")
        .join(name)
        .display()
        .to_string()
}

// ---------------------------------------------------------------------------------------
// Running the binary
// ---------------------------------------------------------------------------------------

/// The `stackflow` command of one test: its own local store, the emulator's endpoint.
struct Stackflow {
    dir: PathBuf,
    endpoint: String,
    runs: std::cell::Cell<usize>,
}

/// A finished run.
#[derive(Debug)]
struct Run {
    /// The exit code; `None` when a signal ended the process.
    code: Option<i32>,
    /// True when SIGKILL ended it.
    killed: bool,
    stdout: String,
    stderr: String,
    seconds: f64,
}

impl Run {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", self.describe()))
    }

    fn describe(&self) -> String {
        format!(
            "exit {:?}{} after {:.2}s\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.code,
            if self.killed { " (SIGKILL)" } else { "" },
            self.seconds,
            self.stdout,
            self.stderr
        )
    }
}

/// A run in progress. Its output goes to files, so that nothing blocks on a full pipe
/// and a killed run's output can still be read.
struct Running {
    child: Child,
    stdout: PathBuf,
    stderr: PathBuf,
    started: Instant,
}

impl Running {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn is_running(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_none()
    }

    /// Waits until the run's stderr has a line containing `text` (or the run ended), and
    /// returns the seconds since it started.
    fn wait_for_stderr(&mut self, text: &str) -> f64 {
        while self.is_running()
            && !std::fs::read_to_string(&self.stderr).is_ok_and(|s| s.contains(text))
        {
            std::thread::sleep(Duration::from_millis(2));
        }
        self.started.elapsed().as_secs_f64()
    }

    /// SIGKILL (what `Child::kill` sends on Unix), then reaps it: a zombie would still have
    /// its `/proc/PID`, and the next run would take its lock for live.
    fn kill(mut self) -> Run {
        let _ = self.child.kill();
        self.finish()
    }

    /// Waits for the end (at most [`RUN_TIMEOUT`], then kills it and panics).
    fn finish(mut self) -> Run {
        let deadline = self.started + RUN_TIMEOUT;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "stackflow ran for more than {RUN_TIMEOUT:?}; stderr:\n{}",
                    std::fs::read_to_string(&self.stderr).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        Run {
            code: status.code(),
            killed: status.signal() == Some(9),
            stdout: std::fs::read_to_string(&self.stdout).unwrap_or_default(),
            stderr: std::fs::read_to_string(&self.stderr).unwrap_or_default(),
            seconds: self.started.elapsed().as_secs_f64(),
        }
    }
}

impl Stackflow {
    fn new(test: &str, emulator: &Emulator) -> Stackflow {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join("deploy-failures")
            .join(unique_name(test));
        std::fs::create_dir_all(&dir).expect("test directory");
        Stackflow {
            dir,
            endpoint: emulator.endpoint().to_string(),
            runs: std::cell::Cell::new(0),
        }
    }

    fn start(&self, args: &[&str]) -> Running {
        let n = self.runs.get() + 1;
        self.runs.set(n);
        let stdout = self.dir.join(format!("run-{n}.stdout"));
        let stderr = self.dir.join(format!("run-{n}.stderr"));
        let child = Command::new(env!("CARGO_BIN_EXE_stackflow"))
            .arg("--endpoint-url")
            .arg(&self.endpoint)
            .arg("--store")
            .arg(format!("local:{}", self.dir.join("store").display()))
            .args(args)
            .current_dir(&self.dir)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.dir)
            .env("USER", "tester")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("STACKFLOW_YES", "1")
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("AWS_REGION", "us-east-1")
            .stdin(Stdio::null())
            .stdout(File::create(&stdout).expect("stdout file"))
            .stderr(File::create(&stderr).expect("stderr file"))
            .spawn()
            .expect("stackflow starts");
        Running {
            child,
            stdout,
            stderr,
            started: Instant::now(),
        }
    }

    fn run(&self, args: &[&str]) -> Run {
        self.start(args).finish()
    }

    /// A run that must exit 0.
    fn ok(&self, args: &[&str]) -> Run {
        let run = self.run(args);
        assert_eq!(
            run.code,
            Some(0),
            "stackflow {} failed: {}",
            args.join(" "),
            run.describe()
        );
        run
    }

    /// `state show --json`.
    fn state(&self, stack: &str) -> Result<Value, String> {
        let run = self.run(&["state", "show", "--stack", stack, "--json"]);
        if run.code != Some(0) {
            return Err(format!("state show failed: {}", run.describe()));
        }
        serde_json::from_str(&run.stdout).map_err(|e| format!("state show: {e}"))
    }

    /// `events --stack` as people read it (for failure reports).
    fn events(&self, stack: &str) -> String {
        let run = self.run(&["events", "--stack", stack]);
        format!("{}{}", run.stdout, run.stderr)
    }

    /// `events --stack --json`: the event type names, in order.
    fn event_types(&self, stack: &str) -> Vec<String> {
        self.run(&["events", "--stack", stack, "--json"])
            .stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter_map(|e| e["event"]["type"].as_str().map(str::to_string))
            .collect()
    }

    /// The physical ids that `ResourceCreated` events of `stack` recorded.
    fn created_physical_ids(&self, stack: &str) -> Vec<(String, String)> {
        self.run(&["events", "--stack", stack, "--json"])
            .stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| e["event"]["type"] == "ResourceCreated")
            .map(|e| {
                let r = &e["event"]["resource"];
                (
                    r["type"].as_str().unwrap_or_default().to_string(),
                    r["physicalId"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect()
    }
}

/// The resources of a `state show --json`, as (logical id, type, physical id).
fn state_resources(state: &Value) -> Vec<(String, String, String)> {
    state["resources"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(id, r)| {
                    (
                        id.clone(),
                        r["type"].as_str().unwrap_or_default().to_string(),
                        r["physicalId"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------
// Looking at AWS
// ---------------------------------------------------------------------------------------

/// SDK clients for the emulator.
struct Aws {
    sqs: aws_sdk_sqs::Client,
    ssm: aws_sdk_ssm::Client,
    sns: aws_sdk_sns::Client,
}

/// The service's error code of a failed call, or a panic when it never reached it.
fn error_code<E, R>(e: &aws_sdk_sqs::error::SdkError<E, R>) -> String
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    match e.as_service_error() {
        Some(se) => se.code().unwrap_or("unknown").to_string(),
        None => panic!(
            "the AWS call did not reach the emulator: {}",
            aws_sdk_sqs::error::DisplayErrorContext(e)
        ),
    }
}

impl Aws {
    async fn new(emulator: &Emulator) -> Aws {
        let config = emulator.sdk_config().await;
        Aws {
            sqs: aws_sdk_sqs::Client::new(&config),
            ssm: aws_sdk_ssm::Client::new(&config),
            sns: aws_sdk_sns::Client::new(&config),
        }
    }

    async fn queue_exists(&self, url: &str) -> bool {
        match self.sqs.get_queue_attributes().queue_url(url).send().await {
            Ok(_) => true,
            Err(e) => {
                let code = error_code(&e);
                assert!(
                    code.contains("NonExistentQueue") || code.contains("QueueDoesNotExist"),
                    "GetQueueAttributes {url}: {code}"
                );
                false
            }
        }
    }

    /// The URLs of the queues whose name starts with `prefix`.
    async fn queues_named(&self, prefix: &str) -> BTreeSet<String> {
        let out = self
            .sqs
            .list_queues()
            .queue_name_prefix(prefix)
            .max_results(1000)
            .send()
            .await
            .expect("ListQueues");
        out.queue_urls().iter().cloned().collect()
    }

    /// The value of a parameter, `None` when it does not exist.
    async fn parameter(&self, name: &str) -> Option<String> {
        match self.ssm.get_parameter().name(name).send().await {
            Ok(out) => out.parameter().and_then(|p| p.value()).map(str::to_string),
            Err(e) => {
                let code = error_code(&e);
                assert_eq!(code, "ParameterNotFound", "GetParameter {name}");
                None
            }
        }
    }

    /// The names of the parameters of stack `stack`: generated ones start with the stack
    /// name (DescribeParameters, `BeginsWith`), explicit ones live under `/<stack>/`
    /// (GetParametersByPath).
    async fn parameters_of(&self, stack: &str) -> BTreeSet<String> {
        let mut names = BTreeSet::new();
        let filter = aws_sdk_ssm::types::ParameterStringFilter::builder()
            .key("Name")
            .option("BeginsWith")
            .values(stack)
            .build()
            .expect("filter");
        let mut pages = self
            .ssm
            .describe_parameters()
            .parameter_filters(filter)
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.expect("DescribeParameters");
            names.extend(
                page.parameters()
                    .iter()
                    .filter_map(|p| p.name().map(String::from)),
            );
        }
        let mut pages = self
            .ssm
            .get_parameters_by_path()
            .path(format!("/{stack}"))
            .recursive(true)
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.expect("GetParametersByPath");
            names.extend(
                page.parameters()
                    .iter()
                    .filter_map(|p| p.name().map(String::from)),
            );
        }
        names
    }

    async fn topic_exists(&self, arn: &str) -> bool {
        match self.sns.get_topic_attributes().topic_arn(arn).send().await {
            Ok(_) => true,
            Err(e) => {
                let code = error_code(&e);
                assert!(
                    code.contains("NotFound"),
                    "GetTopicAttributes {arn}: {code}"
                );
                false
            }
        }
    }

    /// The ARNs of the topics whose name starts with `prefix`.
    async fn topics_named(&self, prefix: &str) -> BTreeSet<String> {
        let mut arns = BTreeSet::new();
        let mut pages = self.sns.list_topics().into_paginator().send();
        while let Some(page) = pages.next().await {
            let page = page.expect("ListTopics");
            arns.extend(
                page.topics()
                    .iter()
                    .filter_map(|t| t.topic_arn())
                    .filter(|arn| {
                        arn.rsplit(':')
                            .next()
                            .is_some_and(|n| n.starts_with(prefix))
                    })
                    .map(String::from),
            );
        }
        arns
    }

    /// Whether the resource `physical_id` of type `ty` exists.
    async fn exists(&self, ty: &str, physical_id: &str) -> bool {
        match ty {
            "AWS::SQS::Queue" => self.queue_exists(physical_id).await,
            "AWS::SSM::Parameter" => self.parameter(physical_id).await.is_some(),
            "AWS::SNS::Topic" => self.topic_exists(physical_id).await,
            other => panic!("no existence check for {other}"),
        }
    }

    /// Everything of stack `stack` that is in AWS: queues, parameters, topics.
    async fn everything_of(&self, stack: &str) -> BTreeSet<String> {
        let mut all = self.queues_named(stack).await;
        all.extend(self.parameters_of(stack).await);
        all.extend(self.topics_named(stack).await);
        all
    }
}

/// Checks that the recorded state of `stack` and AWS agree, and returns what does not:
/// no call is left pending, no live process holds the lock, every recorded resource
/// exists (parameters with the recorded value), the queues and parameters named after the
/// stack are exactly the recorded ones, and each parameter that holds a queue's URL or ARN
/// holds the current one.
async fn state_vs_aws(
    sf: &Stackflow,
    aws: &Aws,
    stack: &str,
    refs: &[(&str, &str)],
) -> Vec<String> {
    let state = match sf.state(stack) {
        Ok(s) => s,
        Err(e) => return vec![e],
    };
    let mut problems = Vec::new();
    for key in ["pending", "predecessors"] {
        if state[key].as_object().is_some_and(|m| !m.is_empty()) {
            problems.push(format!("state has {key}: {}", state[key]));
        }
    }
    // A lock left by a killed run is broken by the next run that needs it (its holder's
    // process is gone); one held by a live process after the run ended is wrong.
    // (`destroy` of a stack with no resources leaves a killed run's lock in place.)
    let lock = &state["lock"];
    let holder_gone = lock["who"]
        .as_str()
        .and_then(|who| who.rsplit_once(" pid "))
        .and_then(|(_, rest)| rest.split(' ').next())
        .is_some_and(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists());
    if !lock.is_null() && !holder_gone {
        problems.push(format!("the stack is still locked: {lock}"));
    }
    let mut queues = BTreeSet::new();
    let mut parameters = BTreeSet::new();
    for (id, ty, physical) in state_resources(&state) {
        match ty.as_str() {
            "AWS::SQS::Queue" => {
                if !aws.queue_exists(&physical).await {
                    problems.push(format!("{id}: queue {physical} is in state, not in SQS"));
                }
                queues.insert(physical);
            }
            "AWS::SSM::Parameter" => {
                let recorded = state["resources"][&id]["properties"]["Value"].as_str();
                match aws.parameter(&physical).await {
                    None => problems.push(format!("{id}: parameter {physical} is not in SSM")),
                    Some(v) if Some(v.as_str()) != recorded => problems.push(format!(
                        "{id}: parameter {physical} is {v:?} in SSM, {recorded:?} in state"
                    )),
                    Some(_) => {}
                }
                parameters.insert(physical);
            }
            other => problems.push(format!("{id}: unexpected type {other}")),
        }
    }
    let listed = aws.queues_named(stack).await;
    for orphan in listed.difference(&queues) {
        problems.push(format!(
            "queue {orphan} is in SQS but not in state (orphan)"
        ));
    }
    let listed = aws.parameters_of(stack).await;
    for orphan in listed.difference(&parameters) {
        problems.push(format!(
            "parameter {orphan} is in SSM but not in state (orphan)"
        ));
    }
    // A parameter that holds a queue's URL (Ref) or ARN (GetAtt) holds the current one.
    let resources = &state["resources"];
    for (parameter, target) in refs {
        let (queue, want) = match target.split_once('.') {
            Some((queue, attribute)) => (queue, &resources[queue]["attributes"][attribute]),
            None => (*target, &resources[target]["physicalId"]),
        };
        let held = &resources[parameter]["properties"]["Value"];
        if resources.get(parameter).is_some() && resources.get(queue).is_some() && held != want {
            problems.push(format!("{parameter} holds {held}, {target} is {want}"));
        }
    }
    problems
}

// ---------------------------------------------------------------------------------------
// 1. A failing deploy rolls back
// ---------------------------------------------------------------------------------------

/// The six resources of `fails-last.yaml` that deploy before BadQueue fails.
const CREATED_BEFORE_FAILURE: [&str; 6] = [
    "ConfigParam",
    "GeneratedParam",
    "WorkQueue",
    "SpareQueue",
    "Topic",
    "WorkQueueArnParam",
];

fn ids(items: &Value) -> BTreeSet<String> {
    items
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|pair| pair[0].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

fn expected_ids(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// The report of a failed deploy names BadQueue and what SQS said about it.
fn assert_bad_queue_failed(run: &Run, report: &Value) {
    assert_eq!(report["status"], "failed", "{}", run.describe());
    let failures = report["failures"].as_array().expect("failures");
    assert_eq!(failures.len(), 1, "{}", run.describe());
    assert_eq!(failures[0]["logicalId"], "BadQueue");
    assert_eq!(failures[0]["resourceType"], "AWS::SQS::Queue");
    assert_eq!(failures[0]["action"], "create");
    let message = failures[0]["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("VisibilityTimeout"), "{message}");
    assert!(
        run.stderr.contains("BadQueue") && run.stderr.contains("VisibilityTimeout"),
        "the progress does not name the failure:\n{}",
        run.stderr
    );
}

#[tokio::test]
async fn a_failing_deploy_rolls_back_what_it_created() {
    let emulator = Emulator::shared().await;
    let aws = Aws::new(emulator).await;
    let sf = Stackflow::new("rollback", emulator);
    let stack = unique_name("fail-rb");

    let run = sf.run(&[
        "deploy",
        &fixture("fails-last.yaml"),
        "--stack",
        &stack,
        "--json",
    ]);
    assert_eq!(run.code, Some(1), "{}", run.describe());
    let report = &run.json()["stacks"][0];
    assert_bad_queue_failed(&run, report);
    assert_eq!(report["created"], 6, "{}", run.describe());
    let rollback = &report["rollback"];
    assert_eq!(
        ids(&rollback["undone"]),
        expected_ids(&CREATED_BEFORE_FAILURE)
    );
    for pair in rollback["undone"].as_array().unwrap() {
        assert_eq!(pair[1], "deleted", "{pair}");
    }
    assert_eq!(rollback["failed"], serde_json::json!([]));

    // AWS has none of them: neither what the events say was made, nor anything named
    // after the stack.
    let created = sf.created_physical_ids(&stack);
    assert_eq!(created.len(), 6, "{created:?}");
    for (ty, physical) in &created {
        assert!(
            !aws.exists(ty, physical).await,
            "{ty} {physical} still exists"
        );
    }
    assert_eq!(aws.everything_of(&stack).await, BTreeSet::new());

    let state = sf.state(&stack).expect("state");
    assert_eq!(state["resources"], serde_json::json!({}), "{state:#}");
    assert!(state["lock"].is_null(), "{state:#}");
}

// ---------------------------------------------------------------------------------------
// 2. --no-rollback, then `stackflow rollback`; a failed update
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn no_rollback_keeps_the_resources_until_stackflow_rollback() {
    let emulator = Emulator::shared().await;
    let aws = Aws::new(emulator).await;
    let sf = Stackflow::new("no-rollback", emulator);
    let stack = unique_name("keep");

    let run = sf.run(&[
        "deploy",
        &fixture("fails-last.yaml"),
        "--stack",
        &stack,
        "--no-rollback",
        "--json",
    ]);
    assert_eq!(run.code, Some(1), "{}", run.describe());
    let report = &run.json()["stacks"][0];
    assert_bad_queue_failed(&run, report);
    assert!(report["rollback"].is_null(), "{report:#}");

    // The six resources are recorded and exist.
    let state = sf.state(&stack).expect("state");
    let kept = state_resources(&state);
    let kept_ids: BTreeSet<String> = kept.iter().map(|(id, _, _)| id.clone()).collect();
    assert_eq!(kept_ids, expected_ids(&CREATED_BEFORE_FAILURE));
    for (id, ty, physical) in &kept {
        assert!(
            aws.exists(ty, physical).await,
            "{id} ({physical}) is not in AWS"
        );
    }
    let physical: BTreeSet<String> = kept.iter().map(|(_, _, p)| p.clone()).collect();
    assert_eq!(aws.everything_of(&stack).await, physical);

    // `rollback` removes them.
    let run = sf.ok(&["rollback", "--stack", &stack, "--json"]);
    let report = &run.json()["stacks"][0];
    assert_eq!(report["status"], "succeeded", "{}", run.describe());
    assert_eq!(
        ids(&report["rollback"]["undone"]),
        expected_ids(&CREATED_BEFORE_FAILURE)
    );
    for (id, ty, physical) in &kept {
        assert!(
            !aws.exists(ty, physical).await,
            "{id} ({physical}) is still in AWS"
        );
    }
    assert_eq!(aws.everything_of(&stack).await, BTreeSet::new());
    let state = sf.state(&stack).expect("state");
    assert_eq!(state["resources"], serde_json::json!({}), "{state:#}");

    // A second rollback has nothing to do, and says so.
    let run = sf.ok(&["rollback", "--stack", &stack]);
    assert!(
        run.stderr.contains("nothing to roll back"),
        "{}",
        run.describe()
    );
    assert!(run.stdout.contains("no changes"), "{}", run.describe());
}

#[tokio::test]
async fn a_failed_update_is_rolled_back_to_the_old_values() {
    let emulator = Emulator::shared().await;
    let aws = Aws::new(emulator).await;
    let sf = Stackflow::new("failed-update", emulator);
    let stack = unique_name("upd");
    let config = format!("/{stack}/config");

    sf.ok(&["deploy", &fixture("update-v1.yaml"), "--stack", &stack]);
    assert_eq!(aws.parameter(&config).await.as_deref(), Some("old-value"));
    let before = aws.everything_of(&stack).await;
    assert_eq!(before.len(), 3, "{before:?}");

    let run = sf.run(&[
        "deploy",
        &fixture("update-v2.yaml"),
        "--stack",
        &stack,
        "--json",
    ]);
    assert_eq!(run.code, Some(1), "{}", run.describe());
    let report = &run.json()["stacks"][0];
    assert_bad_queue_failed(&run, report);
    assert_eq!(report["updated"], 1, "{report:#}");
    assert_eq!(report["created"], 1, "{report:#}");
    let undone: BTreeSet<(String, String)> = report["rollback"]["undone"]
        .as_array()
        .expect("undone")
        .iter()
        .map(|p| (p[0].as_str().unwrap().into(), p[1].as_str().unwrap().into()))
        .collect();
    assert_eq!(
        undone,
        BTreeSet::from([
            ("ConfigParam".to_string(), "restored".to_string()),
            ("ExtraQueue".to_string(), "deleted".to_string()),
        ])
    );

    // The value is back, the extra queue is gone, nothing else changed.
    assert_eq!(aws.parameter(&config).await.as_deref(), Some("old-value"));
    assert_eq!(aws.everything_of(&stack).await, before);
    let state = sf.state(&stack).expect("state");
    assert_eq!(
        state["resources"]["ConfigParam"]["properties"]["Value"],
        "old-value"
    );
    let problems = state_vs_aws(&sf, &aws, &stack, &[("WorkQueueUrlParam", "WorkQueue")]).await;
    assert!(problems.is_empty(), "{problems:#?}");

    sf.ok(&["destroy", "--stack", &stack]);
    assert_eq!(aws.everything_of(&stack).await, BTreeSet::new());
}

// ---------------------------------------------------------------------------------------
// 3. SIGKILL at any point
// ---------------------------------------------------------------------------------------

/// The parameters of `churn-v*.yaml` that hold a queue's URL (`Queue`) or ARN
/// (`Queue.Arn`).
const CHURN_REFS: &[(&str, &str)] = &[
    ("MainQueueUrl", "MainQueue"),
    ("MainQueueArn", "MainQueue.Arn"),
    ("DeadLetterQueueArn", "DeadLetterQueue.Arn"),
    ("NamedQueueUrl", "NamedQueue"),
    ("Work1Url", "WorkQueue1"),
    ("Work2Url", "WorkQueue2"),
    ("Work3Arn", "WorkQueue3.Arn"),
    ("Work4Url", "WorkQueue4"),
    ("NewQueueUrl", "NewQueue"),
];

/// A run of the kill test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    DeployV1,
    DeployV2,
    Destroy,
}

/// What the killed run does. The loop goes through them in this order, each starting from
/// the state the previous one ended in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// `deploy churn-v1` on an empty stack: creates.
    Create,
    /// `deploy churn-v2` over v1: in-place updates, replacements, a delete, a create.
    Change,
    /// `deploy churn-v1` over v2: the same backwards.
    ChangeBack,
    /// `destroy`: deletes.
    Destroy,
}

const PHASES: [Phase; 4] = [
    Phase::Create,
    Phase::Change,
    Phase::ChangeBack,
    Phase::Destroy,
];

impl Phase {
    /// The run that is killed; the phase ends in the state it makes.
    fn op(self) -> Op {
        match self {
            Phase::Create | Phase::ChangeBack => Op::DeployV1,
            Phase::Change => Op::DeployV2,
            Phase::Destroy => Op::Destroy,
        }
    }

    /// What else a user may run after the kill: give up on the new stack, deploy again
    /// what was being destroyed, or (`go_back`) deploy the template that was deployed
    /// before the killed change.
    fn alternative(self, go_back: bool) -> Op {
        match self {
            Phase::Create => Op::Destroy,
            Phase::Destroy => Op::DeployV1,
            Phase::Change if go_back => Op::DeployV1,
            Phase::ChangeBack if go_back => Op::DeployV2,
            Phase::Change | Phase::ChangeBack => self.op(),
        }
    }
}

/// The stack of the kill test and its two templates.
struct Churn<'a> {
    sf: &'a Stackflow,
    aws: &'a Aws,
    stack: String,
    v1: String,
    v2: String,
    /// Everything so far, for the failure message.
    history: String,
}

impl Churn<'_> {
    fn args(&self, op: Op) -> Vec<&str> {
        let stack = self.stack.as_str();
        let mut args = match op {
            Op::DeployV1 => vec!["deploy", self.v1.as_str(), "--stack", stack],
            Op::DeployV2 => vec!["deploy", self.v2.as_str(), "--stack", stack],
            Op::Destroy => vec!["destroy", "--stack", stack],
        };
        args.extend(["--concurrency", "4", "--json"]);
        args
    }

    fn start(&self, op: Op) -> Running {
        self.sf.start(&self.args(op))
    }

    /// Runs `op` to its end, then checks the state against AWS (see [`state_vs_aws`]) and,
    /// after a destroy, that AWS has nothing of the stack left. `Err`: what went wrong,
    /// with the runs of `context`, this one and the stack's events.
    async fn complete(&mut self, op: Op, context: &[(&str, &Run)]) -> Result<Run, String> {
        let run = self.sf.run(&self.args(op));
        let status = match run.code {
            Some(0) => run.json()["stacks"][0]["status"].to_string(),
            _ => "FAILED".to_string(),
        };
        let _ = write!(
            self.history,
            "; {op:?} {status} in {:.0} ms",
            run.seconds * 1000.0
        );
        let mut runs = context.to_vec();
        runs.push(("this run", &run));
        if run.code != Some(0) {
            return Err(self.report(&format!("{op:?} failed"), &runs));
        }
        let mut problems = state_vs_aws(self.sf, self.aws, &self.stack, CHURN_REFS).await;
        if op == Op::Destroy {
            let left = self.aws.everything_of(&self.stack).await;
            if !left.is_empty() {
                problems.push(format!("destroyed, but AWS still has {left:?}"));
            }
        }
        if !problems.is_empty() {
            return Err(self.report(&format!("after {op:?}: {problems:#?}"), &runs));
        }
        Ok(run)
    }

    /// `what`, the history, the runs and the stack's events.
    fn report(&self, what: &str, runs: &[(&str, &Run)]) -> String {
        let mut text = format!(
            "stack {}: {what}\n\nHistory:\n{}\n",
            self.stack, self.history
        );
        for (name, run) in runs {
            let _ = writeln!(text, "=== {name}: {}\n", run.describe());
        }
        let _ = writeln!(
            text,
            "=== events --stack {}:\n{}",
            self.stack,
            self.sf.events(&self.stack)
        );
        text
    }

    /// How long each phase takes uninterrupted, to its end and to its first action
    /// (process start included), in seconds; the stack ends destroyed.
    async fn measure(&mut self) -> Result<[(f64, f64); 4], String> {
        let mut times = [(0.0, 0.0); 4];
        let _ = write!(self.history, "uninterrupted");
        for (i, phase) in PHASES.iter().enumerate() {
            let mut running = self.start(phase.op());
            let first = running.wait_for_stderr(" actions");
            let run = running.finish();
            times[i] = (first, run.seconds);
            if run.code != Some(0) {
                return Err(self.report("uninterrupted run failed", &[("run", &run)]));
            }
            let problems = state_vs_aws(self.sf, self.aws, &self.stack, CHURN_REFS).await;
            if !problems.is_empty() {
                return Err(self.report(&format!("{problems:#?}"), &[("run", &run)]));
            }
        }
        let _ = write!(self.history, " (first action, end): {times:.3?}");
        Ok(times)
    }

    /// Kills the phase's run after `delay`, finishes the job with `next` (and the phase's
    /// own run when `next` is not it), checking after each.
    async fn kill_and_recover(
        &mut self,
        phase: Phase,
        at: KillAt,
        next: Op,
    ) -> Result<Kill, String> {
        let seq_before = self.seq_and_pending().0;
        let mut running = self.start(phase.op());
        if let KillAt::AfterFirstAction(_) = at {
            running.wait_for_stderr(" actions");
        }
        std::thread::sleep(at.delay());
        let was_running = running.is_running();
        let victim = running.kill();
        let (seq, pending) = self.seq_and_pending();
        let kill = match (victim.killed && was_running, pending.is_empty()) {
            (false, _) => Kill::TooLate,
            (true, true) => Kill::Landed,
            (true, false) => Kill::MidCall,
        };
        let _ = write!(
            self.history,
            " {phase:?} killed {} ({:.0} ms in): {}",
            at.describe(),
            victim.seconds * 1000.0,
            match kill {
                Kill::TooLate => format!("it had ended with {:?}", victim.code),
                _ => format!(
                    "{} events written, calls without outcome: {pending:?}",
                    seq - seq_before
                ),
            }
        );
        let recovery = self.complete(next, &[("killed run", &victim)]).await?;
        if next != phase.op() {
            self.complete(
                phase.op(),
                &[("killed run", &victim), ("run after it", &recovery)],
            )
            .await?;
        }
        Ok(kill)
    }

    /// The stack's last event number and its calls without outcome (`Create WorkQueue1`).
    fn seq_and_pending(&self) -> (u64, Vec<String>) {
        let Ok(state) = self.sf.state(&self.stack) else {
            return (0, vec![]);
        };
        let pending = state["pending"]
            .as_object()
            .map(|m| {
                m.values()
                    .map(|p| {
                        let op = p["operation"].as_str().unwrap_or_default();
                        format!("{op} {}", p["logicalId"].as_str().unwrap_or_default())
                    })
                    .collect()
            })
            .unwrap_or_default();
        (state["seq"].as_u64().unwrap_or(0), pending)
    }
}

/// When to kill a run.
#[derive(Debug, Clone, Copy)]
enum KillAt {
    /// This long after it started.
    AfterStart(Duration),
    /// This long after it printed its first progress line (`deploy STACK: N actions`).
    AfterFirstAction(Duration),
}

impl KillAt {
    fn delay(self) -> Duration {
        match self {
            KillAt::AfterStart(d) | KillAt::AfterFirstAction(d) => d,
        }
    }

    fn describe(self) -> String {
        match self {
            KillAt::AfterStart(d) => format!("{} ms after its start", d.as_millis()),
            KillAt::AfterFirstAction(d) => format!("{} ms after its first action", d.as_millis()),
        }
    }
}

/// Where a kill landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kill {
    /// The run had already ended.
    TooLate,
    /// While the run was going, between two calls.
    Landed,
    /// In the middle of a call: it left an intent without outcome.
    MidCall,
}

/// Kills a deploy or destroy of the 20-resource churn stack at a point that varies, then
/// finishes the job: the killed run again (even rounds) or what else a user may run
/// (odd rounds: see [`Phase::alternative`]). `ROUNDS` rounds of the four phases, and more
/// until `KILLS` kills have landed while the run was going. `Ok`: the history; `Err`: what
/// went wrong, with the runs and the stack's events.
async fn churn_with_kills(sf: &Stackflow, aws: &Aws, go_back: bool) -> Result<String, String> {
    /// The delays sweep each phase from just before its first action to its end in this
    /// many steps.
    const ROUNDS: usize = 8;
    /// At least this many kills must land while the run is going.
    const KILLS: usize = 20;

    let mut churn = Churn {
        sf,
        aws,
        stack: unique_name("kill"),
        v1: fixture("churn-v1.yaml"),
        v2: fixture("churn-v2.yaml"),
        history: String::new(),
    };
    let times = churn.measure().await?;
    let (mut landed, mut mid_call) = (0, 0);
    let mut iteration = 0;
    while iteration < 4 * ROUNDS || landed < KILLS {
        if iteration >= 4 * ROUNDS + 40 {
            return Err(format!(
                "only {landed} of {iteration} kills landed while the run was going:\n{}",
                churn.history
            ));
        }
        let phase = PHASES[iteration % 4];
        let round = iteration / 4;
        // Each round a step further into the run, each phase a little offset: the first
        // round before the first action (planning, locking, reconciling), the others from
        // the first action to near the end (the last part of a measured run is the
        // process's exit).
        let step = (iteration % 4 + 1) as f64 / 5.0;
        let (first, end) = times[iteration % 4];
        let at = match round % ROUNDS {
            0 => KillAt::AfterStart(Duration::from_secs_f64(first * (0.6 + 0.4 * step))),
            r => KillAt::AfterFirstAction(Duration::from_secs_f64(
                0.85 * (end - first) * ((r - 1) as f64 + step) / (ROUNDS - 1) as f64,
            )),
        };
        let next = if round % 2 == 0 {
            phase.op()
        } else {
            phase.alternative(go_back)
        };
        let _ = write!(churn.history, "\n#{iteration}");
        match churn.kill_and_recover(phase, at, next).await? {
            Kill::TooLate => {}
            Kill::Landed => landed += 1,
            Kill::MidCall => {
                landed += 1;
                mid_call += 1;
            }
        }
        iteration += 1;
    }
    // The loop ends destroyed; one more deploy and destroy leave nothing either.
    churn.complete(Op::DeployV2, &[]).await?;
    churn.complete(Op::Destroy, &[]).await?;
    let _ = write!(
        churn.history,
        "\n{landed} kills landed in {iteration} iterations, {mid_call} in the middle of a call"
    );
    Ok(churn.history)
}

fn churn_report(sf: &Stackflow, result: Result<String, String>) {
    match result {
        Ok(history) => eprintln!("{history}"),
        Err(report) => {
            let file = sf.dir.join("failure-report.txt");
            let _ = std::fs::write(&file, &report);
            panic!("{report}\n(also in {})", file.display());
        }
    }
}

#[tokio::test]
async fn deploys_and_destroys_killed_at_random_points_are_finished_by_the_next_run() {
    let emulator = Emulator::shared().await;
    let aws = Aws::new(emulator).await;
    let sf = Stackflow::new("kill", emulator);
    churn_report(&sf, churn_with_kills(&sf, &aws, false).await);
}

/// As above, and on odd rounds a killed change is followed by a deploy of the template
/// that was deployed before it (the user goes back). The three tests of 3b below
/// reproduce exactly the engine bugs this finds, nearly every time.
#[tokio::test]
async fn killed_changes_followed_by_the_previous_template_are_finished_by_the_next_run() {
    let emulator = Emulator::shared().await;
    let aws = Aws::new(emulator).await;
    let sf = Stackflow::new("kill-back", emulator);
    churn_report(&sf, churn_with_kills(&sf, &aws, true).await);
}

// ---------------------------------------------------------------------------------------
// 3b. A killed change followed by the previous template, reproduced exactly
// ---------------------------------------------------------------------------------------

/// The deploy id of a killed deploy that a test writes into the store.
const KILLED: &str = "d-killed";

/// The intent that the killed deploy appended before an AWS call.
fn killed_intent(
    logical_id: &str,
    resource_type: &str,
    operation: Operation,
    physical_id: &str,
    properties: Value,
) -> Event {
    Event::ResourceIntent {
        deploy_id: KILLED.into(),
        logical_id: logical_id.into(),
        resource_type: resource_type.into(),
        operation,
        token: format!(
            "{KILLED}/{logical_id}/{}",
            format!("{operation:?}").to_lowercase()
        ),
        provider: ProviderKind::Sdk,
        physical_id: Some(physical_id.into()),
        properties: properties.as_object().cloned(),
    }
}

/// Records in the local store what a deploy killed with SIGKILL leaves: its
/// `DeployStarted`, with the lock held by a process that is gone, then `events`.
async fn record_killed_deploy(sf: &Stackflow, stack: &str, events: Vec<Event>) {
    let store = SqliteStore::open(sf.dir.join("store").join("events.db")).expect("store");
    let stream = StreamId::new("us-east-1", stack);
    // `user@host pid N boot B ns P`, as stackflow writes it (USER is `tester`), for a
    // process of this host, boot and pid namespace that no longer exists.
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .expect("a Linux kernel file")
            .trim()
            .to_string()
    };
    let host = read("/proc/sys/kernel/hostname");
    let boot: String = read("/proc/sys/kernel/random/boot_id")
        .chars()
        .take(8)
        .collect();
    let mut gone = Command::new("true").spawn().expect("true");
    gone.wait().expect("true ends");
    let ns: String = std::fs::read_link("/proc/self/ns/pid")
        .expect("a pid namespace")
        .to_string_lossy()
        .chars()
        .filter(char::is_ascii_digit)
        .collect();
    let who = format!("tester@{host} pid {} boot {boot} ns {ns}", gone.id());
    let holder = Holder {
        deploy_id: KILLED.into(),
        who: who.clone(),
        since: now(),
        operation: "deploy".into(),
        expires: None,
        fenced: None,
    };
    let started = Event::DeployStarted {
        deploy_id: KILLED.into(),
        who,
        template_digest: "killed".into(),
        parameters: Default::default(),
        no_rollback: false,
        stack_id: None,
    };
    let mut pre = Precondition::TakeLock(holder);
    for (i, event) in std::iter::once(started).chain(events).enumerate() {
        store
            .append(
                &stream,
                &NewEvent::new(format!("{KILLED}/{i}"), event),
                &pre,
            )
            .await
            .expect("append");
        pre = Precondition::HoldsLock(KILLED.into());
    }
}

/// The physical id of `logical_id` in the recorded state.
fn physical_id(sf: &Stackflow, stack: &str, logical_id: &str) -> String {
    let state = sf.state(stack).expect("state");
    state["resources"][logical_id]["physicalId"]
        .as_str()
        .unwrap_or_else(|| panic!("{logical_id} is not in {state:#}"))
        .to_string()
}

/// Deploys `update-v1.yaml` again and checks the state against AWS.
async fn deploy_v1_again(sf: &Stackflow, aws: &Aws, stack: &str) {
    let run = sf.run(&["deploy", &fixture("update-v1.yaml"), "--stack", stack]);
    let problems = state_vs_aws(sf, aws, stack, &[("WorkQueueUrlParam", "WorkQueue")]).await;
    assert!(
        run.code == Some(0) && problems.is_empty(),
        "{problems:#?}\n{}\n{}",
        run.describe(),
        sf.events(stack)
    );
}

/// A deploy that renames WorkQueue (a replacement) is killed during CreateQueue, before
/// the new queue was made; the user then deploys v1 again. v1's queue must still exist.
///
/// Engine bug: the reconcile replays the interrupted replace with the properties of the
/// template deployed now (v1's QueueName, the live queue's, instead of the intent's),
/// CreateQueue answers the live queue, which is recorded as the replacement of itself,
/// and the cleanup deletes it as the replaced predecessor. The state then names a queue
/// that does not exist. (When the killed call did make the renamed queue, that one is
/// also left orphaned.)
#[tokio::test]
async fn an_interrupted_replacement_then_the_previous_template_keeps_the_queue() {
    let emulator = Emulator::shared().await;
    let aws = Aws::new(emulator).await;
    let sf = Stackflow::new("interrupted-replace", emulator);
    let stack = unique_name("irep");
    sf.ok(&["deploy", &fixture("update-v1.yaml"), "--stack", &stack]);
    let queue = physical_id(&sf, &stack, "WorkQueue");

    let renamed = serde_json::json!({"QueueName": format!("{stack}-renamed")});
    let intent = killed_intent(
        "WorkQueue",
        "AWS::SQS::Queue",
        Operation::Replace,
        &queue,
        renamed,
    );
    record_killed_deploy(&sf, &stack, vec![intent]).await;
    deploy_v1_again(&sf, &aws, &stack).await;

    assert!(aws.queue_exists(&queue).await);
    sf.ok(&["destroy", "--stack", &stack]);
}

/// A deploy that renames WorkQueue is killed after its replacement was made and recorded,
/// before the cleanup deleted the old queue; the user then deploys v1 again, whose queue
/// name is the old queue's.
///
/// Engine bug: replacing back, CreateQueue answers the old queue (still there, waiting
/// for its deletion) as the new one; WorkQueue then has two predecessors, the renamed
/// queue and the very queue it now is. Their deletes use the same event key
/// (`<deploy>/WorkQueue/delete-old/intent`), so one of them fails with "conflicting
/// append" and the deploy exits 1; had it not, the live queue would have been deleted.
#[tokio::test]
async fn a_replacement_killed_before_its_cleanup_then_the_previous_template_keeps_the_queue() {
    let emulator = Emulator::shared().await;
    let aws = Aws::new(emulator).await;
    let sf = Stackflow::new("replaced-then-killed", emulator);
    let stack = unique_name("rkil");
    sf.ok(&["deploy", &fixture("update-v1.yaml"), "--stack", &stack]);
    let queue = physical_id(&sf, &stack, "WorkQueue");

    // The killed deploy made the renamed queue and recorded it.
    let name = format!("{stack}-renamed");
    let made = aws
        .sqs
        .create_queue()
        .queue_name(&name)
        .send()
        .await
        .expect("CreateQueue");
    let url = made.queue_url().expect("url").to_string();
    let arn = format!("arn:aws:sqs:us-east-1:123456789012:{name}");
    let properties = serde_json::json!({ "QueueName": name });
    let created = Event::ResourceCreated {
        deploy_id: KILLED.into(),
        resource: ResourceRecord {
            logical_id: "WorkQueue".into(),
            resource_type: "AWS::SQS::Queue".into(),
            physical_id: url.clone(),
            properties: properties.as_object().cloned().unwrap_or_default(),
            attributes: [
                ("Arn".to_string(), serde_json::json!(arn)),
                ("QueueName".to_string(), serde_json::json!(name)),
                ("QueueUrl".to_string(), serde_json::json!(url)),
            ]
            .into(),
            dependencies: vec![],
            provider: ProviderKind::Sdk,
            deletion_policy: None,
            update_replace_policy: None,
            secret_digest: None,
        },
        replaces: Some(queue.clone()),
        baseline: None,
    };
    let intent = killed_intent(
        "WorkQueue",
        "AWS::SQS::Queue",
        Operation::Replace,
        &queue,
        properties,
    );
    record_killed_deploy(&sf, &stack, vec![intent, created]).await;
    deploy_v1_again(&sf, &aws, &stack).await;

    assert!(aws.queue_exists(&queue).await);
    assert!(!aws.queue_exists(&url).await);
    sf.ok(&["destroy", "--stack", &stack]);
}

/// A deploy that changes ConfigParam's Value is killed after its PutParameter went
/// through, before the outcome was recorded; the user then deploys v1 again. SSM must
/// hold v1's value, as the state says.
///
/// Engine bug: the reconcile records the interrupted update as skipped ("the next deploy
/// makes the change again") and keeps the old recorded properties; v1 equals them, so the
/// plan is a no-op and SSM keeps the killed deploy's value while the state says v1's.
#[tokio::test]
async fn an_interrupted_update_then_the_previous_template_puts_the_old_value_back() {
    let emulator = Emulator::shared().await;
    let aws = Aws::new(emulator).await;
    let sf = Stackflow::new("interrupted-update", emulator);
    let stack = unique_name("iupd");
    let config = format!("/{stack}/config");
    sf.ok(&["deploy", &fixture("update-v1.yaml"), "--stack", &stack]);

    // The killed deploy's PutParameter went through.
    aws.ssm
        .put_parameter()
        .name(&config)
        .value("new-value")
        .r#type(aws_sdk_ssm::types::ParameterType::String)
        .overwrite(true)
        .send()
        .await
        .expect("PutParameter");
    let new = serde_json::json!({"Name": config, "Type": "String", "Value": "new-value"});
    let intent = killed_intent(
        "ConfigParam",
        "AWS::SSM::Parameter",
        Operation::Update,
        &config,
        new,
    );
    record_killed_deploy(&sf, &stack, vec![intent]).await;
    deploy_v1_again(&sf, &aws, &stack).await;

    assert_eq!(aws.parameter(&config).await.as_deref(), Some("old-value"));
    sf.ok(&["destroy", "--stack", &stack]);
}

// ---------------------------------------------------------------------------------------
// 4. Two deploys at once
// ---------------------------------------------------------------------------------------

/// A template of `n` SSM parameters (generated names).
fn many_parameters(n: usize) -> String {
    let mut text = String::from("Resources:\n");
    for i in 0..n {
        let _ = write!(
            text,
            "  Param{i}:\n    Type: AWS::SSM::Parameter\n    Properties:\n      Type: String\n      Value: value-{i}\n"
        );
    }
    text
}

/// A deploy of 100 parameters one at a time runs for about a second; once its
/// `DeployStarted` is recorded, a second deploy of the stack is refused, naming the first
/// one's process, and the first one carries on to the end.
#[tokio::test]
async fn a_second_deploy_of_a_stack_being_deployed_is_refused_and_names_the_holder() {
    const RESOURCES: usize = 100;
    let emulator = Emulator::shared().await;
    let aws = Aws::new(emulator).await;
    let sf = Stackflow::new("lock", emulator);
    let stack = unique_name("lock");
    let template = sf.dir.join("many.yaml");
    std::fs::write(&template, many_parameters(RESOURCES)).expect("template");
    let template = template.display().to_string();
    let args = [
        "deploy",
        template.as_str(),
        "--stack",
        &stack,
        "--concurrency",
        "1",
    ];

    let mut first = sf.start(&args);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !sf.event_types(&stack).iter().any(|t| t == "DeployStarted") {
        assert!(
            first.is_running(),
            "the first deploy ended before it was seen starting: {}",
            first.finish().describe()
        );
        assert!(Instant::now() < deadline, "no DeployStarted within 60 s");
        std::thread::sleep(Duration::from_millis(10));
    }

    let second = sf.run(&args);
    let still_running = first.is_running();
    let pid = first.pid();
    let first = first.finish();
    // Refused by the lock: exit 3, nothing done.
    assert_eq!(second.code, Some(3), "{}", second.describe());
    assert!(
        second.stderr.contains("locked by") && second.stderr.contains(&format!("pid {pid}")),
        "the refusal does not name the holder (pid {pid}): {}",
        second.describe()
    );
    assert!(
        still_running,
        "the first deploy had already finished when the second was refused"
    );
    assert_eq!(first.code, Some(0), "{}", first.describe());
    assert!(
        first.stdout.contains(&format!("{RESOURCES} created")),
        "{}",
        first.describe()
    );

    let problems = state_vs_aws(&sf, &aws, &stack, &[]).await;
    assert!(problems.is_empty(), "{problems:#?}");
    sf.ok(&["destroy", "--stack", &stack]);
    assert_eq!(aws.parameters_of(&stack).await, BTreeSet::new());
}

/// Ctrl-C (SIGINT) in the middle of a deploy: the running calls finish and are recorded,
/// nothing is rolled back, the lock is released, the exit is non-zero; the next deploy
/// continues from there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_stops_the_deploy_records_what_ran_and_releases_the_lock() {
    const RESOURCES: usize = 100;
    let emulator = Emulator::shared().await;
    let aws = Aws::new(emulator).await;
    let sf = Stackflow::new("ctrl-c", emulator);
    let stack = unique_name("ctrlc");
    let template = sf.dir.join("many.yaml");
    std::fs::write(&template, many_parameters(RESOURCES)).expect("template");
    let template = template.display().to_string();
    let args = [
        "deploy",
        template.as_str(),
        "--stack",
        &stack,
        "--concurrency",
        "1",
    ];
    let mut first = sf.start(&args);
    first.wait_for_stderr("[5/");
    let interrupted = Command::new("kill")
        .args(["-INT", &first.pid().to_string()])
        .status()
        .expect("kill -INT");
    assert!(interrupted.success());
    let run = first.finish();
    assert_eq!(run.code, Some(1), "{}", run.describe());
    assert!(
        run.stdout.contains("STOPPED") && run.stdout.contains("stackflow rollback"),
        "{}",
        run.describe()
    );
    let state = sf.state(&stack).expect("state");
    assert!(state["lock"].is_null(), "the lock is released: {state}");
    assert!(
        state["pending"].as_object().is_none_or(|p| p.is_empty()),
        "every call that ran is recorded: {state}"
    );
    let made = state_resources(&state).len();
    assert!(
        (5..RESOURCES).contains(&made),
        "{made} made before the stop"
    );
    assert_eq!(
        aws.parameters_of(&stack).await.len(),
        made,
        "AWS has what the state says"
    );

    // The next deploy continues: it creates only what is missing.
    let next = sf.ok(&args);
    assert!(
        next.stdout
            .contains(&format!("{} created", RESOURCES - made)),
        "{}",
        next.describe()
    );
    sf.ok(&["destroy", "--stack", &stack]);
    assert_eq!(aws.parameters_of(&stack).await, BTreeSet::new());
}
