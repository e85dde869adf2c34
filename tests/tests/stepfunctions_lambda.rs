//! The state machines of `infra/` in their production form: every task a Lambda function
//! (`definitions::render` with `Target::Lambda`), each running the engine's real
//! bootstrap (`functions/bootstrap`, built for this host, `provided.al2023`) through the
//! emulator's container stand-in, on a DynamoDB event store and the engine's bucket
//! (`STACKFLOW_TABLE`, `STACKFLOW_BUCKET`). The same scenarios as the activity path
//! (`stepfunctions.rs`): a deploy, a deploy with no change, a failing deploy rolled back,
//! and a destroy. Prints the time per resource of the Lambda path.

mod sfn;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_lambda::primitives::Blob;
use aws_sdk_lambda::types::{Architecture, LogType, Runtime};
use aws_sdk_sfn::types::ExecutionStatus;
use serde_json::{Value, json};
use stackflow_engine::definitions::{self, Target};
use stackflow_engine::env::{BUCKET, CFN_FALLBACK, TABLE};
use stackflow_engine::stack::StackInput;
use stackflow_engine::tasks::{DeployRequest, StackRequest, TASK_NAMES};
use stackflow_events::dynamo::DynamoStore;
use stackflow_events::{Event, EventStore, StreamId, load_state};
use stackflow_tests::deploy::dynamo_store;
use stackflow_tests::lambda::{FunctionSpec, create_function, engine_bootstrap_zip, zip_files};
use stackflow_tests::{Emulator, unique_name};

use sfn::{input, template};

struct LambdaRig {
    emu: &'static Emulator,
    lambda: aws_sdk_lambda::Client,
    prefix: String,
    sfn: aws_sdk_sfn::Client,
    s3: aws_sdk_s3::Client,
    sqs: aws_sdk_sqs::Client,
    bucket: String,
    store: Arc<DynamoStore>,
    machines: BTreeMap<&'static str, String>,
}

/// The rig on the bootstrap built for this host.
async fn lambda_rig() -> LambdaRig {
    let zip = tokio::task::spawn_blocking(engine_bootstrap_zip)
        .await
        .unwrap();
    lambda_rig_with(zip, None).await
}

/// The rig on the bootstrap zipped in `zip`, every function of `architecture`.
async fn lambda_rig_with(zip: &[u8], architecture: Option<Architecture>) -> LambdaRig {
    let emu = Emulator::shared().await;
    let config = emu.sdk_config().await;
    let (table, bucket, store) = dynamo_store(emu).await;
    let lambda = aws_sdk_lambda::Client::new(&config);
    let prefix = unique_name("sfl");
    let mut functions = BTreeMap::new();
    for task in TASK_NAMES {
        let name = format!("{prefix}-{task}");
        let spec = FunctionSpec {
            name: &name,
            runtime: Runtime::Providedal2023,
            handler: task,
            zip: zip.to_vec(),
            timeout: 900,
            architecture: architecture.clone(),
            env: [
                (TABLE.into(), table.clone()),
                (BUCKET.into(), bucket.clone()),
                (CFN_FALLBACK.into(), "false".into()),
            ]
            .into_iter()
            .chain(part_actions())
            .collect(),
        };
        functions.insert(task.to_string(), create_function(&lambda, spec).await);
    }
    let sfn = aws_sdk_sfn::Client::new(&config);
    let mut machines = BTreeMap::new();
    for (name, def) in definitions::ALL {
        let text = definitions::render(def, &Target::Lambda(functions.clone())).unwrap();
        let arn = sfn
            .create_state_machine()
            .name(format!("{prefix}-{name}"))
            .definition(text)
            .role_arn("arn:aws:iam::123456789012:role/stackflow-engine")
            .send()
            .await
            .unwrap()
            .state_machine_arn;
        machines.insert(*name, arn);
    }
    LambdaRig {
        emu,
        lambda,
        prefix,
        sfn,
        s3: emu.s3().await,
        sqs: aws_sdk_sqs::Client::new(&config),
        bucket,
        store,
        machines,
    }
}

impl LambdaRig {
    /// Fails the test on a call the emulator did not answer, saying what became of it.
    fn lost(&self, error: impl std::fmt::Debug) -> ! {
        panic!("{error:?}\n{}", self.emu.post_mortem())
    }

    /// Starts `machine` and waits for its end: status, error and cause (with the history's
    /// task failures), and how long it took.
    async fn run(
        &self,
        machine: &str,
        execution_input: Value,
    ) -> (ExecutionStatus, String, Duration) {
        self.run_within(machine, execution_input, Duration::from_secs(300))
            .await
    }

    /// [`LambdaRig::run`], waiting at most `limit`.
    async fn run_within(
        &self,
        machine: &str,
        execution_input: Value,
        limit: Duration,
    ) -> (ExecutionStatus, String, Duration) {
        let started = Instant::now();
        let arn = self
            .sfn
            .start_execution()
            .state_machine_arn(&self.machines[machine])
            .name(unique_name("x"))
            .input(execution_input.to_string())
            .send()
            .await
            .unwrap_or_else(|e| self.lost(e))
            .execution_arn;
        while started.elapsed() < limit {
            let d = self
                .sfn
                .describe_execution()
                .execution_arn(&arn)
                .send()
                .await
                .unwrap_or_else(|e| self.lost(e));
            if d.status != ExecutionStatus::Running {
                let mut error = format!("{:?}: {:?}", d.error, d.cause);
                let history = self
                    .sfn
                    .get_execution_history()
                    .execution_arn(&arn)
                    .max_results(1000)
                    .send()
                    .await
                    .unwrap_or_else(|e| self.lost(e));
                for e in history.events() {
                    if let Some(f) = e.lambda_function_failed_event_details() {
                        error.push_str(&format!("\n{:?} {:?}", f.error(), f.cause()));
                    }
                    if let Some(f) = e.task_failed_event_details() {
                        error.push_str(&format!("\n{:?} {:?}", f.error(), f.cause()));
                    }
                }
                return (d.status, error, started.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("execution {arn} did not end in {limit:?}");
    }

    async fn deploy(&self, stack: &StackInput) -> (ExecutionStatus, String, Duration) {
        self.deploy_within(stack, Duration::from_secs(300)).await
    }

    /// [`LambdaRig::deploy`], waiting at most `limit`.
    async fn deploy_within(
        &self,
        stack: &StackInput,
        limit: Duration,
    ) -> (ExecutionStatus, String, Duration) {
        let key = format!("inputs/{}/{}.json", stack.name, unique_name("in"));
        self.s3
            .put_object()
            .bucket(&self.bucket)
            .key(&key)
            .body(serde_json::to_vec(stack).unwrap().into())
            .send()
            .await
            .unwrap();
        let request = DeployRequest {
            stack: stack.name.clone(),
            input_key: key,
            no_rollback: false,
            concurrency: 40,
            deploy_id: None,
            allow_stateful_replacement: false,
            expected_plan: None,
        };
        self.run_within("deploy", serde_json::to_value(request).unwrap(), limit)
            .await
    }

    async fn destroy(&self, stack: &str) -> (ExecutionStatus, String, Duration) {
        let request = StackRequest {
            stack: stack.into(),
        };
        self.run("destroy", serde_json::to_value(request).unwrap())
            .await
    }

    async fn queue_exists(&self, url: &str) -> bool {
        self.sqs
            .get_queue_attributes()
            .queue_url(url)
            .send()
            .await
            .is_ok()
    }

    async fn events(&self, stream: &StreamId) -> Vec<Event> {
        let read = self.store.read(stream, 0).await.unwrap();
        read.into_iter().map(|e| e.event).collect()
    }
}

fn per_resource(d: Duration, n: usize) -> String {
    format!(
        "{:.2} s for {n} ({:.2} s per resource)",
        d.as_secs_f64(),
        d.as_secs_f64() / n as f64
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deploy_failing_deploy_and_destroy_run_as_lambda_executions() {
    let rig = lambda_rig().await;
    let stack = unique_name("SfnLambda");
    let v1 = template(json!({
        "Resources": {
            "A": {"Type": "AWS::SQS::Queue"},
            "B": {"Type": "AWS::SSM::Parameter", "Properties": {"Type": "String", "Value": {"Fn::GetAtt": ["A", "Arn"]}}},
            "C": {"Type": "AWS::SSM::Parameter", "Properties": {"Type": "String", "Value": {"Ref": "B"}}},
            "D": {"Type": "AWS::SQS::Queue"},
            "E": {"Type": "AWS::SNS::Topic"}
        },
        "Outputs": {"QueueUrl": {"Value": {"Ref": "A"}}}
    }));
    let (status, error, took) = rig.deploy(&input(&stack, v1.clone())).await;
    assert_eq!(status, ExecutionStatus::Succeeded, "{error}");
    eprintln!(
        "lambda path, deploy: {} (cold functions)",
        per_resource(took, 5)
    );
    let stream = StreamId::new("us-east-1", &stack);
    let state = load_state(rig.store.as_ref(), &stream).await.unwrap();
    let queue = stackflow_tests::deploy::deployed_scenario(&state);
    assert!(rig.queue_exists(&queue).await);

    // The same template again: no changes, nothing appended.
    let (status, error, took) = rig.deploy(&input(&stack, v1)).await;
    assert_eq!(status, ExecutionStatus::Succeeded, "{error}");
    eprintln!("lambda path, no-change deploy: {:.2} s", took.as_secs_f64());
    assert_eq!(
        load_state(rig.store.as_ref(), &stream).await.unwrap().seq,
        state.seq
    );

    // A failing deploy: F is created, then G fails; the rollback deletes F.
    let v2 = template(json!({
        "Resources": {
            "A": {"Type": "AWS::SQS::Queue"},
            "B": {"Type": "AWS::SSM::Parameter", "Properties": {"Type": "String", "Value": {"Fn::GetAtt": ["A", "Arn"]}}},
            "C": {"Type": "AWS::SSM::Parameter", "Properties": {"Type": "String", "Value": {"Ref": "B"}}},
            "D": {"Type": "AWS::SQS::Queue"},
            "E": {"Type": "AWS::SNS::Topic"},
            "F": {"Type": "AWS::SQS::Queue"},
            "G": {"Type": "AWS::SQS::Queue", "DependsOn": "F", "Properties": {"VisibilityTimeout": 999999}}
        }
    }));
    let (status, error, took) = rig.deploy(&input(&stack, v2)).await;
    assert_eq!(status, ExecutionStatus::Failed, "{error}");
    assert!(error.contains("Stackflow.DeployFailed"), "{error}");
    eprintln!(
        "lambda path, failing deploy and rollback: {:.2} s",
        took.as_secs_f64()
    );
    let after = load_state(rig.store.as_ref(), &stream).await.unwrap();
    assert_eq!(after.resources.len(), 5, "F was rolled back");
    assert!(after.lock.is_none());
    let f_created = rig
        .events(&stream)
        .await
        .into_iter()
        .find_map(|e| match e {
            Event::ResourceCreated { resource, .. } if resource.logical_id == "F" => {
                Some(resource.physical_id)
            }
            _ => None,
        })
        .expect("F was created before G failed");
    assert!(!rig.queue_exists(&f_created).await, "F is gone from AWS");

    let (status, error, took) = rig.destroy(&stack).await;
    assert_eq!(status, ExecutionStatus::Succeeded, "{error}");
    eprintln!("lambda path, destroy: {}", per_resource(took, 5));
    let gone = load_state(rig.store.as_ref(), &stream).await.unwrap();
    assert!(gone.resources.is_empty());
    assert!(gone.lock.is_none());
    assert!(!rig.queue_exists(&queue).await);
}

/// Time per resource on a wider stack, 20 queues and a chain of 10 parameters, deployed
/// and destroyed twice: first with every function cold (a new instance per concurrent
/// call, each one's bootstrap started), then again under another name with the instances
/// warm.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn time_per_resource_of_the_lambda_path() {
    let rig = lambda_rig().await;
    let mut resources = serde_json::Map::new();
    for i in 0..20 {
        resources.insert(format!("Q{i}"), json!({"Type": "AWS::SQS::Queue"}));
    }
    for i in 0..10 {
        let value = if i == 0 {
            json!("start")
        } else {
            json!({"Ref": format!("P{}", i - 1)})
        };
        resources.insert(
            format!("P{i}"),
            json!({"Type": "AWS::SSM::Parameter", "Properties": {"Type": "String", "Value": value}}),
        );
    }
    let t = template(json!({ "Resources": resources }));
    for round in ["cold", "warm"] {
        let stack = unique_name("SfnLambdaWide");
        let (status, error, took) = rig.deploy(&input(&stack, t.clone())).await;
        assert_eq!(status, ExecutionStatus::Succeeded, "{error}");
        eprintln!(
            "lambda path ({round}), deploy of 30 (20 queues and a chain of 10): {}",
            per_resource(took, 30)
        );
        let stream = StreamId::new("us-east-1", &stack);
        let state = load_state(rig.store.as_ref(), &stream).await.unwrap();
        assert_eq!(state.resources.len(), 30);
        let (status, error, took) = rig.destroy(&stack).await;
        assert_eq!(status, ExecutionStatus::Succeeded, "{error}");
        eprintln!(
            "lambda path ({round}), destroy of 30: {}",
            per_resource(took, 30)
        );
        let state = load_state(rig.store.as_ref(), &stream).await.unwrap();
        assert!(state.resources.is_empty());
    }
}

/// Where `.ci/build-arm64` leaves the engine's artifact: the bootstrap cargo-lambda built
/// for arm64 with the `lambda` profile (the `bootstrap` file itself).
const ARM64_ENV: &str = "STACKFLOW_ARM64_BOOTSTRAP";

/// The ELF machine of an executable (`e_machine`), if it is one.
fn elf_machine(binary: &[u8]) -> Option<u16> {
    (binary.len() > 20 && binary.starts_with(b"\x7fELF"))
        .then(|| u16::from_le_bytes([binary[18], binary[19]]))
}

/// The artifact the engine installs by default, arm64, run on this x86_64 machine under
/// `qemu-aarch64` by the stand-in (its ELF machine chooses it): one Plan invocation cold,
/// whose answer comes from the engine's code after an S3 read, then a deploy and a destroy
/// through the state machines with every task on it. Prints its sizes and the cold init
/// under emulation (the REPORT line's Init Duration).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs the arm64 artifact: .ci/test builds it (bash .ci/build-arm64) and runs this"]
async fn the_arm64_artifact_answers_and_deploys_under_qemu() {
    let path = std::env::var(ARM64_ENV)
        .unwrap_or_else(|_| panic!("{ARM64_ENV} names the arm64 bootstrap (bash .ci/build-arm64)"));
    let binary = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    assert_eq!(
        elf_machine(&binary),
        Some(183),
        "{path} is not an aarch64 executable"
    );
    let zip = zip_files(&[("bootstrap", &binary)]);
    eprintln!(
        "arm64 bootstrap: {} bytes, {} bytes zipped",
        binary.len(),
        zip.len()
    );
    let rig = lambda_rig_with(&zip, Some(Architecture::Arm64)).await;

    // Plan, cold: an input that names another stack is refused after it is read from S3.
    let key = format!("inputs/other/{}.json", unique_name("in"));
    let other = input(
        "OtherStack",
        template(json!({"Resources": {"Q": {"Type": "AWS::SQS::Queue"}}})),
    );
    rig.s3
        .put_object()
        .bucket(&rig.bucket)
        .key(&key)
        .body(serde_json::to_vec(&other).unwrap().into())
        .send()
        .await
        .unwrap();
    let request =
        json!({"stack": "ThisStack", "inputKey": key, "noRollback": false, "concurrency": 1});
    let out = rig
        .lambda
        .invoke()
        .function_name(format!("{}-Plan", rig.prefix))
        .log_type(LogType::Tail)
        .payload(Blob::new(request.to_string()))
        .send()
        .await
        .unwrap_or_else(|e| rig.lost(e));
    let log = out
        .log_result()
        .map(|l| {
            use base64::Engine as _;
            let bytes = base64::engine::general_purpose::STANDARD.decode(l).unwrap();
            String::from_utf8_lossy(&bytes).into_owned()
        })
        .unwrap_or_default();
    let answer: Value =
        serde_json::from_slice(out.payload().map(|p| p.as_ref()).unwrap_or(b"null")).unwrap();
    assert!(out.function_error().is_some(), "{answer}\n{log}");
    assert_eq!(
        answer["errorType"],
        json!("Stackflow.Input"),
        "{answer}\n{log}"
    );
    assert!(
        answer["errorMessage"]
            .as_str()
            .unwrap_or("")
            .contains("is for stack OtherStack, not ThisStack"),
        "{answer}"
    );
    let init = log
        .split("Init Duration: ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_else(|| panic!("a cold start reports its init: {log}"));
    eprintln!("arm64 bootstrap under qemu-aarch64: cold init {init} ms (Plan)");

    // A deploy and a destroy, every task on the artifact.
    let stack = unique_name("SfnArm64");
    let t = template(json!({
        "Resources": {
            "A": {"Type": "AWS::SQS::Queue"},
            "B": {"Type": "AWS::SSM::Parameter", "Properties": {"Type": "String", "Value": {"Fn::GetAtt": ["A", "Arn"]}}}
        },
        "Outputs": {"QueueUrl": {"Value": {"Ref": "A"}}}
    }));
    let (status, error, took) = rig.deploy(&input(&stack, t)).await;
    assert_eq!(status, ExecutionStatus::Succeeded, "{error}");
    eprintln!("arm64 under qemu, deploy: {}", per_resource(took, 2));
    let stream = StreamId::new("us-east-1", &stack);
    let state = load_state(rig.store.as_ref(), &stream).await.unwrap();
    assert_eq!(state.resources.len(), 2);
    let queue = state.outputs["QueueUrl"]
        .as_str()
        .expect("the queue URL")
        .to_string();
    assert!(rig.queue_exists(&queue).await, "{queue}");
    let (status, error, took) = rig.destroy(&stack).await;
    assert_eq!(status, ExecutionStatus::Succeeded, "{error}");
    eprintln!("arm64 under qemu, destroy: {}", per_resource(took, 2));
    let gone = load_state(rig.store.as_ref(), &stream).await.unwrap();
    assert!(gone.resources.is_empty() && gone.lock.is_none());
    assert!(!rig.queue_exists(&queue).await);
}

/// The faults each task is given, in the order its invocations take them: every Lambda
/// error AWS lists as transient (its recommended retrier, throttling, an unknown outcome),
/// raised before the function runs (`refuse`) or after it did its work (`lose`), a crash
/// once the function has answered, and an init failure.
const INJECTED: &[(&str, &[&str])] = &[
    (
        "Plan",
        &[
            "refuse Lambda.AWSLambdaException",
            "lose Lambda.SdkClientException",
        ],
    ),
    (
        "Provision",
        &[
            "refuse Lambda.ServiceException",
            "crash",
            "lose Lambda.Unknown",
            "init",
            "refuse Lambda.TooManyRequestsException",
            "lose Lambda.ClientExecutionTimeoutException",
        ],
    ),
    ("Conclude", &["crash"]),
    ("Finish", &["init"]),
];

/// A deploy through every transient Lambda fault (injected through the container
/// stand-in, `tests/standin/serve.py`'s `take_fault`): each is retried by the state
/// machine, the deploy succeeds, every injected fault was taken and shows in the history,
/// and nothing is made twice (one `ResourceCreated` a resource; exactly the recorded
/// queues exist).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_deploy_through_every_transient_lambda_fault_makes_nothing_twice() {
    let rig = lambda_rig().await;
    let faults = rig
        .emu
        .standin_dir()
        .expect("faults are injected into an emulator this test started")
        .join("faults");
    std::fs::create_dir_all(&faults).unwrap();
    for (task, lines) in INJECTED {
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(faults.join(format!("{}-{task}", rig.prefix)), text).unwrap();
    }
    let stack = unique_name("SfnFaults");
    let t = template(json!({
        "Resources": {
            "A": {"Type": "AWS::SQS::Queue"},
            "B": {"Type": "AWS::SSM::Parameter", "Properties": {"Type": "String", "Value": {"Fn::GetAtt": ["A", "Arn"]}}},
            "C": {"Type": "AWS::SQS::Queue"},
            "D": {"Type": "AWS::SQS::Queue", "DependsOn": "B"},
            "E": {"Type": "AWS::SSM::Parameter", "Properties": {"Type": "String", "Value": {"Ref": "D"}}},
            "F": {"Type": "AWS::SQS::Queue"}
        }
    }));
    let (status, history, took) = rig.deploy(&input(&stack, t)).await;
    assert_eq!(status, ExecutionStatus::Succeeded, "{history}");
    eprintln!(
        "deploy through injected Lambda faults: {:.2} s",
        took.as_secs_f64()
    );

    for (task, lines) in INJECTED {
        let name = faults.join(format!("{}-{task}", rig.prefix));
        let taken = std::fs::read_to_string(faults.join(format!("{}-{task}.taken", rig.prefix)))
            .unwrap_or_default();
        let left = std::fs::read_to_string(&name).unwrap();
        assert_eq!(taken.lines().collect::<Vec<_>>(), *lines, "{task}: taken");
        assert!(left.trim().is_empty(), "{task}: not taken: {left}");
        for line in *lines {
            let error = line.split(' ').nth(1).unwrap_or("Runtime.ExitError");
            assert!(
                history.contains(error),
                "{task}'s {error} not in the history:\n{history}"
            );
        }
    }

    let stream = StreamId::new("us-east-1", &stack);
    let state = load_state(rig.store.as_ref(), &stream).await.unwrap();
    assert_eq!(state.resources.len(), 6);
    assert!(state.pending.is_empty() && state.lock.is_none());
    let mut created: Vec<String> = rig
        .events(&stream)
        .await
        .into_iter()
        .filter_map(|e| match e {
            Event::ResourceCreated { resource, .. } => Some(resource.logical_id),
            _ => None,
        })
        .collect();
    created.sort();
    assert_eq!(created, ["A", "B", "C", "D", "E", "F"], "one create each");
    let (urls, recorded) =
        stackflow_tests::deploy::listed_and_recorded_queues(&rig.sqs, &stack, &state).await;
    assert_eq!(urls, recorded, "exactly the recorded queues exist");
}

/// The events of execution `arn`'s history, every page read.
async fn history_length(sfn: &aws_sdk_sfn::Client, arn: &str) -> usize {
    let mut pages = sfn
        .get_execution_history()
        .execution_arn(arn)
        .max_results(1000)
        .into_paginator()
        .send();
    let mut n = 0;
    while let Some(page) = pages.next().await {
        n += page.unwrap().events().len();
    }
    n
}

/// Every execution of `machine` and its history's length, every page of both read.
async fn histories(sfn: &aws_sdk_sfn::Client, machine: &str) -> Vec<(String, usize)> {
    let mut pages = sfn
        .list_executions()
        .state_machine_arn(machine)
        .max_results(1000)
        .into_paginator()
        .send();
    let mut out = Vec::new();
    while let Some(page) = pages.next().await {
        for e in page.unwrap().executions() {
            out.push((
                e.name().to_string(),
                history_length(sfn, e.execution_arn()).await,
            ));
        }
    }
    out.sort();
    out
}

/// The functions' `STACKFLOW_PART_ACTIONS` when this process has one (the scale test run
/// at a smaller size with smaller parts).
fn part_actions() -> Option<(String, String)> {
    let name = stackflow_engine::sfn::history::PART_ACTIONS;
    std::env::var(name).ok().map(|v| (name.to_string(), v))
}

/// How many resources the scale test deploys: `STACKFLOW_SCALE_RESOURCES`, else 2,000.
fn scale() -> usize {
    std::env::var("STACKFLOW_SCALE_RESOURCES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000)
}

/// `n` parameters; the first `renamed` of them named (`Name` is create-only: a new name
/// replaces the parameter).
fn parameters(stack: &str, n: usize, renamed: usize) -> stackflow_core::template::Template {
    let mut resources = serde_json::Map::new();
    for i in 0..n {
        let mut props = json!({"Type": "String", "Value": format!("v{i}")});
        if i < renamed {
            props["Name"] = json!(format!("/{stack}/renamed/{i}"));
        }
        resources.insert(
            format!("P{i}"),
            json!({"Type": "AWS::SSM::Parameter", "Properties": props}),
        );
    }
    template(json!({ "Resources": resources }))
}

/// Issue 25's scale, through the Lambda path: 2,000 parameters created, then 1,000 of them
/// replaced (1,000 creates, then their predecessors deleted), then all destroyed. Each
/// phase of more than 900 actions runs in parts, each an execution of its own; every
/// execution's history (all pages, the parts' executions too) stays under 20,000 events.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "on demand, an hour and more on the emulator: cargo test --workspace --test stepfunctions_lambda -- --ignored --exact two_thousand_resources_and_a_thousand_replacements_stay_under_the_history_budget (STACKFLOW_SCALE_RESOURCES and STACKFLOW_PART_ACTIONS run it smaller: .ci/test runs 24 in parts of 8)"]
async fn two_thousand_resources_and_a_thousand_replacements_stay_under_the_history_budget() {
    let rig = lambda_rig().await;
    let n = scale();
    let stack = unique_name("SfnScale");
    let stream = StreamId::new("us-east-1", &stack);
    let limit = Duration::from_secs(3 * 3600);
    let mut most = 0;
    for (step, renamed) in [("create", 0), ("replace", n / 2)] {
        let t = parameters(&stack, n, renamed);
        let (status, error, took) = rig.deploy_within(&input(&stack, t), limit).await;
        assert_eq!(status, ExecutionStatus::Succeeded, "{step}: {error}");
        let counted = histories(&rig.sfn, &rig.machines["deploy"]).await;
        let largest = counted.iter().map(|(_, n)| *n).max().unwrap_or(0);
        eprintln!(
            "scale {step} of {n} ({renamed} replaced): {:.0} s; {} executions so far, the largest history {largest} events: {counted:?}",
            took.as_secs_f64(),
            counted.len()
        );
        assert!(largest < 20_000, "{step}: {counted:?}");
        most = most.max(largest);
        let state = load_state(rig.store.as_ref(), &stream).await.unwrap();
        assert_eq!(state.resources.len(), n, "{step}");
        assert!(state.lock.is_none() && state.pending.is_empty(), "{step}");
        let named = state
            .resources
            .values()
            .filter(|r| r.physical_id.contains("/renamed/"))
            .count();
        assert_eq!(named, renamed, "{step}");
    }
    let (status, error, took) = rig
        .run_within("destroy", json!({"stack": stack}), limit)
        .await;
    assert_eq!(status, ExecutionStatus::Succeeded, "{error}");
    eprintln!(
        "scale destroy of {n}: {:.0} s; the largest history of the deploys: {most}",
        took.as_secs_f64()
    );
    let gone = load_state(rig.store.as_ref(), &stream).await.unwrap();
    assert!(gone.resources.is_empty() && gone.lock.is_none());
}
