//! Deploys as Step Functions executions: the definitions of `infra/` created in the
//! emulator with each task pointed at an activity, and `stackflow worker`'s loop (run here
//! in-process) polling those activities and running the same handlers as the embedded
//! engine.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_sfn::types::ExecutionStatus;
use serde_json::{Value, json};
use stackflow_core::intrinsics::{Pseudo, bind_parameters};
use stackflow_core::template::{Template, load_path};
use stackflow_engine::Engine;
use stackflow_engine::definitions::{self, Target};
use stackflow_engine::progress::Silent;
use stackflow_engine::stack::StackInput;
use stackflow_engine::tasks::{DeployRequest, StackRequest, Tasks};
use stackflow_engine::worker::{Worker, ensure_activities};
use stackflow_events::sqlite::SqliteStore;
use stackflow_events::{StreamId, load_state};
use stackflow_providers::lookups::AwsLookups;
use stackflow_providers::router::Providers;
use stackflow_tests::{Emulator, unique_name};
use tokio::sync::watch;

struct Rig {
    sfn: aws_sdk_sfn::Client,
    s3: aws_sdk_s3::Client,
    sqs: aws_sdk_sqs::Client,
    bucket: String,
    store: Arc<SqliteStore>,
    machines: BTreeMap<&'static str, String>,
    stop: watch::Sender<bool>,
    tasks: Arc<Tasks<SqliteStore>>,
    activities: BTreeMap<String, String>,
}

async fn rig(workers: usize) -> Rig {
    rig_with(workers, 20).await
}

async fn rig_with(workers: usize, heartbeat: u32) -> Rig {
    let emu = Emulator::shared().await;
    let config = emu.sdk_config().await;
    let sfn = aws_sdk_sfn::Client::new(&config);
    let s3 = emu.s3().await;
    let bucket = unique_name("sf-engine").to_lowercase();
    s3.create_bucket().bucket(&bucket).send().await.unwrap();
    let dir = std::env::temp_dir().join(unique_name("sf-store"));
    let store = Arc::new(SqliteStore::open(dir.join("events.db")).unwrap());
    let engine = Arc::new(Engine {
        store: store.clone(),
        providers: Arc::new(Providers::from_config(&config, Some(bucket.clone()))),
        lookups: Arc::new(AwsLookups::new(&config)),
        region: "us-east-1".into(),
        who: "worker-test".into(),
        cloudformation_fallback: false,
        progress: Arc::new(Silent),
        stale: Arc::new(|_| false),
        digest_key: None,
        lease: None,
    });
    let tasks = Arc::new(Tasks {
        engine,
        s3: s3.clone(),
        sfn: sfn.clone(),
        bucket: bucket.clone(),
        kms_key: None,
    });
    let prefix = unique_name("sf");
    let activities = ensure_activities(&sfn, &prefix).await.unwrap();
    let mut machines = BTreeMap::new();
    for (name, def) in definitions::ALL {
        let text =
            definitions::render(def, &Target::Activities(activities.clone(), heartbeat)).unwrap();
        let arn = sfn
            .create_state_machine()
            .name(format!("{prefix}-{name}"))
            .definition(text)
            .role_arn("arn:aws:iam::123456789012:role/stackflow-engine")
            .send()
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "CreateStateMachine {name}: {}",
                    aws_sdk_sfn::error::DisplayErrorContext(e)
                )
            })
            .state_machine_arn;
        machines.insert(*name, arn);
    }
    let (stop, rx) = watch::channel(false);
    let rig = Rig {
        sfn,
        s3,
        sqs: aws_sdk_sqs::Client::new(&config),
        bucket,
        store,
        machines,
        stop,
        tasks,
        activities,
    };
    for i in 0..workers {
        tokio::spawn(rig.worker(&format!("test-worker-{i}")).run(rx.clone()));
    }
    rig
}

impl Rig {
    fn worker(&self, name: &str) -> Worker<SqliteStore> {
        self.worker_of(name, |_| true)
    }

    /// A worker that polls only the activities of the tasks `which` keeps.
    fn worker_of(&self, name: &str, which: impl Fn(&str) -> bool) -> Worker<SqliteStore> {
        let activities = self
            .activities
            .iter()
            .filter(|(task, _)| which(task))
            .map(|(t, a)| (t.clone(), a.clone()))
            .collect();
        Worker {
            tasks: self.tasks.clone(),
            sfn: self.sfn.clone(),
            activities,
            name: name.to_string(),
            per_task: 8,
            heartbeat: Duration::from_secs(1),
        }
    }
}

fn input(stack: &str, template: Template) -> StackInput {
    let parameters = bind_parameters(&template, &Default::default()).unwrap();
    StackInput {
        name: stack.into(),
        source: format!("{stack}.yaml"),
        template,
        parameters,
        pseudo: Pseudo {
            region: "us-east-1".into(),
            account_id: Some("123456789012".into()),
            stack_name: stack.into(),
            stack_id: None,
        },
        nested: Default::default(),
    }
}

fn template(v: Value) -> Template {
    Template::from_value(&v).unwrap()
}

impl Rig {
    /// Uploads the input, starts `machine` and waits for its end: (status, output or error).
    async fn run(&self, machine: &str, execution_input: Value) -> (ExecutionStatus, Value, String) {
        let (status, output, error, _) = self.run_counted(machine, execution_input).await;
        (status, output, error)
    }

    /// [`Rig::run`], also counting the execution's state transitions (states entered,
    /// inner `Map` states included: what Step Functions bills).
    async fn run_counted(
        &self,
        machine: &str,
        execution_input: Value,
    ) -> (ExecutionStatus, Value, String, usize) {
        let arn = self.start(machine, execution_input).await;
        self.wait_counted(&arn).await
    }

    /// Starts `machine`; its execution's ARN.
    async fn start(&self, machine: &str, execution_input: Value) -> String {
        self.sfn
            .start_execution()
            .state_machine_arn(&self.machines[machine])
            .name(unique_name("x"))
            .input(execution_input.to_string())
            .send()
            .await
            .unwrap()
            .execution_arn
    }

    /// Waits for the execution `arn` to end (at most 2 minutes).
    async fn wait_counted(&self, arn: &str) -> (ExecutionStatus, Value, String, usize) {
        for _ in 0..1200 {
            let d = self
                .sfn
                .describe_execution()
                .execution_arn(arn)
                .send()
                .await
                .unwrap();
            if d.status != ExecutionStatus::Running {
                let output = d
                    .output
                    .as_deref()
                    .and_then(|o| serde_json::from_str(o).ok())
                    .unwrap_or(Value::Null);
                let mut error = format!("{:?}: {:?}", d.error, d.cause);
                let mut transitions = 0;
                let mut next: Option<String> = None;
                loop {
                    let page = self
                        .sfn
                        .get_execution_history()
                        .execution_arn(arn)
                        .max_results(1000)
                        .set_next_token(next.clone())
                        .send()
                        .await
                        .unwrap();
                    transitions += page
                        .events()
                        .iter()
                        .filter(|e| e.r#type().as_str().ends_with("StateEntered"))
                        .count();
                    match page.next_token() {
                        Some(t) => next = Some(t.to_string()),
                        None => break,
                    }
                }
                if std::env::var("STACKFLOW_TEST_HISTORY").is_ok() {
                    let h = self
                        .sfn
                        .get_execution_history()
                        .execution_arn(arn)
                        .max_results(1000)
                        .send()
                        .await
                        .unwrap();
                    for e in h.events() {
                        let detail = e
                            .task_failed_event_details()
                            .map(|d| format!("{:?} {:?}", d.error(), d.cause()))
                            .unwrap_or_default();
                        error.push_str(&format!("\nHistory {} {:?} {detail}", e.id(), e.r#type()));
                    }
                }
                return (d.status, output, error, transitions);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("execution {arn} did not end in 2 minutes");
    }

    async fn deploy(&self, stack: &StackInput) -> (ExecutionStatus, Value, String) {
        let (status, output, error, _) = self.deploy_counted(stack).await;
        (status, output, error)
    }

    async fn deploy_counted(&self, stack: &StackInput) -> (ExecutionStatus, Value, String, usize) {
        let req = self.upload(stack, None).await;
        self.run_counted("deploy", serde_json::to_value(req).unwrap())
            .await
    }

    /// Uploads `stack`'s input: the deploy's execution input.
    async fn upload(&self, stack: &StackInput, deploy_id: Option<String>) -> DeployRequest {
        let key = format!("inputs/{}/{}.json", stack.name, unique_name("in"));
        self.s3
            .put_object()
            .bucket(&self.bucket)
            .key(&key)
            .body(serde_json::to_vec(stack).unwrap().into())
            .send()
            .await
            .unwrap();
        DeployRequest {
            stack: stack.name.clone(),
            input_key: key,
            no_rollback: false,
            concurrency: 10,
            deploy_id,
            allow_stateful_replacement: false,
        }
    }

    async fn queue_exists(&self, url: &str) -> bool {
        self.sqs
            .get_queue_attributes()
            .queue_url(url)
            .send()
            .await
            .is_ok()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deploy_failing_deploy_and_destroy_run_as_executions() {
    let rig = rig(2).await;
    let stack = unique_name("SfnApp");
    // A chain and a fan-out: C waits for B, which waits for A; D and E are free.
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
    let (status, _, error) = rig.deploy(&input(&stack, v1.clone())).await;
    assert_eq!(status, ExecutionStatus::Succeeded, "{error}");
    let stream = StreamId::new("us-east-1", &stack);
    let state = load_state(rig.store.as_ref(), &stream).await.unwrap();
    assert_eq!(state.resources.len(), 5);
    assert!(state.lock.is_none(), "the lock is released");
    let queue = state.outputs["QueueUrl"].as_str().unwrap().to_string();
    assert!(rig.queue_exists(&queue).await);
    assert_eq!(
        state.resources["C"].properties["Value"],
        json!(state.resources["B"].physical_id)
    );

    // The same template again: no changes, the execution ends at once.
    let (status, _, error) = rig.deploy(&input(&stack, v1)).await;
    assert_eq!(status, ExecutionStatus::Succeeded, "{error}");
    assert_eq!(
        load_state(rig.store.as_ref(), &stream).await.unwrap().seq,
        state.seq,
        "a no-change deploy appends nothing"
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
    let (status, _, error) = rig.deploy(&input(&stack, v2)).await;
    assert_eq!(status, ExecutionStatus::Failed, "{error}");
    assert!(error.contains("Stackflow.DeployFailed"), "{error}");
    let after = load_state(rig.store.as_ref(), &stream).await.unwrap();
    assert_eq!(after.resources.len(), 5, "F was rolled back");
    assert!(after.lock.is_none());
    let f_created = rig
        .store
        .as_ref()
        .read_all_for_test(&stream)
        .await
        .into_iter()
        .find_map(|e| match e {
            stackflow_events::Event::ResourceCreated { resource, .. }
                if resource.logical_id == "F" =>
            {
                Some(resource.physical_id)
            }
            _ => None,
        })
        .expect("F was created before G failed");
    assert!(!rig.queue_exists(&f_created).await, "F is gone from AWS");

    // Destroy.
    let (status, _, error) = rig
        .run(
            "destroy",
            serde_json::to_value(StackRequest {
                stack: stack.clone(),
            })
            .unwrap(),
        )
        .await;
    assert_eq!(status, ExecutionStatus::Succeeded, "{error}");
    let gone = load_state(rig.store.as_ref(), &stream).await.unwrap();
    assert!(gone.resources.is_empty());
    assert!(!rig.queue_exists(&queue).await);
    let _ = rig.stop.send(true);
}

/// Test-only reading of every event body of a stream.
trait ReadAll {
    async fn read_all_for_test(&self, stream: &StreamId) -> Vec<stackflow_events::Event>;
}

impl ReadAll for SqliteStore {
    async fn read_all_for_test(&self, stream: &StreamId) -> Vec<stackflow_events::Event> {
        use stackflow_events::EventStore;
        self.read(stream, 0)
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.event)
            .collect()
    }
}

#[test]
fn stack_inputs_round_trip_through_json() {
    // What the CLI uploads for an execution is what the plan task reads back.
    let stacks = load_path(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/corpus/deep-chain-50"
    )))
    .unwrap();
    let s = &stacks[0];
    let i = input(&s.name, s.template.clone());
    let text = serde_json::to_string(&i).unwrap();
    let back: StackInput = serde_json::from_str(&text).unwrap();
    assert_eq!(back.template, i.template);
    assert!(text.len() < 1_000_000);
}

/// The CDK corpus cases the emulator serves (see `shared/cli/tests/corpus_deploy.rs` for
/// the ones it cannot), deployed and destroyed through the state machines: each deploy
/// succeeds, a plan right after changes nothing, the destroy leaves an empty state. Also
/// reports the state transitions per resource.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn corpus_deploys_and_destroys_through_step_functions() {
    let rig = rig(2).await;
    let cases = [
        "cross-stack-export-import",
        "deep-chain-50",
        "dependson-explicit",
        "dynamodb-gsi",
        "eventbridge-rule-lambda",
        "kms-key-alias",
        "lambda-role-loggroup",
        "mappings-findinmap",
        "nested-stack",
        "params-conditions",
        "removal-policy-retain",
        "replacement-v1",
        "s3-bucket-policy",
        "sqs-sns-subscription",
        "stepfunctions-statemachine",
        "sub-getatt-nesting",
        "wide-200",
    ];
    let emu = Emulator::shared().await;
    let config = emu.sdk_config().await;
    let planner = Engine {
        store: rig.store.clone(),
        providers: Arc::new(Providers::from_config(&config, None)),
        lookups: Arc::new(AwsLookups::new(&config)),
        region: "us-east-1".into(),
        who: "planner".into(),
        cloudformation_fallback: false,
        progress: Arc::new(Silent),
        stale: Arc::new(|_| false),
        digest_key: None,
        lease: None,
    };
    let mut problems = Vec::new();
    let mut transitions = 0usize;
    let mut resources = 0usize;
    for case in cases {
        let dir = std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/corpus"))
            .join(case);
        let mut stacks = load_path(&dir).unwrap();
        // Dependency order (a stack after the stacks it depends on).
        stacks.sort_by_key(|s| s.dependencies.len());
        let mut deployed = Vec::new();
        for s in &stacks {
            let parameters = bind_parameters(&s.template, &s.parameters).unwrap();
            let mut i = input(&s.name, s.template.clone());
            i.parameters = parameters;
            i.nested = s.nested.clone();
            let (status, _, error, n) = rig.deploy_counted(&i).await;
            if status != ExecutionStatus::Succeeded {
                problems.push(format!("{case}/{}: deploy {status:?}: {error}", s.name));
                continue;
            }
            let state = load_state(rig.store.as_ref(), &StreamId::new("us-east-1", &s.name))
                .await
                .unwrap();
            transitions += n;
            resources += state.resources.len();
            let plan = planner.plan_only(&i).await.unwrap();
            if !plan.is_empty() {
                problems.push(format!(
                    "{case}/{}: a plan after the deploy is not empty",
                    s.name
                ));
            }
            deployed.push(s.name.clone());
        }
        for name in deployed.iter().rev() {
            let (status, _, error) = rig
                .run(
                    "destroy",
                    serde_json::to_value(StackRequest {
                        stack: name.clone(),
                    })
                    .unwrap(),
                )
                .await;
            let state = load_state(rig.store.as_ref(), &StreamId::new("us-east-1", name))
                .await
                .unwrap();
            if status != ExecutionStatus::Succeeded || !state.resources.is_empty() {
                problems.push(format!(
                    "{case}/{name}: destroy {status:?} with {} resources left: {error}",
                    state.resources.len()
                ));
            }
        }
    }
    println!(
        "state transitions: {transitions} for {resources} resources ({:.2} per resource)",
        transitions as f64 / resources.max(1) as f64
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // Per resource: its gate and its action, plus a few fixed states per execution.
    assert!(
        transitions <= resources * 3 + 12 * cases.len() * 2,
        "{transitions}"
    );
    let _ = rig.stop.send(true);
}

/// A worker dies mid-deploy (its tasks are dropped in the middle of their AWS calls) and
/// another one starts: the execution finishes, and every resource exists exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_worker_is_replaced_and_nothing_is_made_twice() {
    let rig = rig_with(0, 3).await;
    let stack = unique_name("SfnKill");
    // A chain of 12 parameters and 12 queues beside it: long enough to be cut in the middle.
    let mut resources = serde_json::Map::new();
    for i in 0..12 {
        let value = if i == 0 {
            json!("start")
        } else {
            json!({"Ref": format!("P{}", i - 1)})
        };
        resources.insert(
            format!("P{i}"),
            json!({"Type": "AWS::SSM::Parameter", "Properties": {"Type": "String", "Value": value}}),
        );
        resources.insert(format!("Q{i}"), json!({"Type": "AWS::SQS::Queue"}));
    }
    let t = template(json!({ "Resources": resources }));
    let (stop_first, rx_first) = watch::channel(false);
    let first = tokio::spawn(rig.worker("doomed").run(rx_first));
    let i = input(&stack, t);
    let deploy = rig.deploy(&i);
    let started = std::time::Instant::now();
    let killer = async {
        // Kill it once it has made part of the stack.
        loop {
            let s = load_state(rig.store.as_ref(), &StreamId::new("us-east-1", &stack))
                .await
                .unwrap();
            if s.resources.len() >= 4 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // Dropping the worker's tasks mid-call is what a kill does to it.
        first.abort();
        drop(stop_first);
        tokio::time::sleep(Duration::from_millis(200)).await;
        let (_keep, rx) = watch::channel(false);
        let second = tokio::spawn(rig.worker("replacement").run(rx));
        (second, _keep)
    };
    let ((status, _, error), (second, _keep)) = tokio::join!(deploy, killer);
    second.abort();
    if status != ExecutionStatus::Succeeded {
        for e in rig
            .store
            .read_all_for_test(&StreamId::new("us-east-1", &stack))
            .await
        {
            if let stackflow_events::Event::ResourceFailed { .. }
            | stackflow_events::Event::DeployFailed { .. } = e
            {
                println!("{e:?}");
            }
        }
    }
    assert_eq!(status, ExecutionStatus::Succeeded, "{error}");
    println!("deploy with a killed worker took {:?}", started.elapsed());
    let state = load_state(rig.store.as_ref(), &StreamId::new("us-east-1", &stack))
        .await
        .unwrap();
    assert_eq!(state.resources.len(), 24);
    assert!(state.pending.is_empty(), "{:?}", state.pending);
    // Exactly the recorded queues exist: none made twice.
    let listed = rig
        .sqs
        .list_queues()
        .queue_name_prefix(&stack)
        .send()
        .await
        .unwrap();
    let mut urls: Vec<String> = listed.queue_urls().to_vec();
    urls.sort();
    let mut recorded: Vec<String> = state
        .resources
        .values()
        .filter(|r| r.resource_type == "AWS::SQS::Queue")
        .map(|r| r.physical_id.clone())
        .collect();
    recorded.sort();
    assert_eq!(urls, recorded);
}

/// A gate whose release was missed (here: the token the dependency's action finds in S3 is
/// not the gate's any more) times out at its heartbeat, and its retry runs the gate
/// handler again: it stores its new token, finds the dependency done and releases itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_missed_gate_release_heals_at_the_gates_heartbeat() {
    let rig = rig_with(0, 2).await;
    let stack = unique_name("SfnGate");
    let t = template(json!({
        "Resources": {
            "A": {"Type": "AWS::SQS::Queue"},
            "B": {"Type": "AWS::SSM::Parameter", "Properties": {"Type": "String", "Value": {"Fn::GetAtt": ["A", "Arn"]}}}
        }
    }));
    let deploy_id = unique_name("d").to_lowercase();
    let req = rig.upload(&input(&stack, t), Some(deploy_id.clone())).await;
    // Everything runs but the actions: B's gate stores its token and waits for A.
    let (_keep, rx) = watch::channel(false);
    let first = tokio::spawn(rig.worker_of("first", |t| t != "Provision").run(rx.clone()));
    let arn = rig
        .start("deploy", serde_json::to_value(req).unwrap())
        .await;
    let gate = format!("deploys/{stack}/{deploy_id}/gates/provision/B");
    let mut stored = false;
    for _ in 0..600 {
        let head = rig
            .s3
            .head_object()
            .bucket(&rig.bucket)
            .key(&gate)
            .send()
            .await;
        if head.is_ok() {
            stored = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(stored, "B's gate stored its token");
    // No gate runs again until A is done; the release of B is missed: A's action finds
    // a token that is not B's.
    first.abort();
    let ends = tokio::spawn(
        rig.worker_of("ends", |t| t != "Provision" && t != "Gate")
            .run(rx.clone()),
    );
    rig.s3
        .put_object()
        .bucket(&rig.bucket)
        .key(&gate)
        .body(b"not-a-task-token".to_vec().into())
        .send()
        .await
        .unwrap();
    let acts = tokio::spawn(rig.worker_of("acts", |t| t == "Provision").run(rx.clone()));
    let stream = StreamId::new("us-east-1", &stack);
    let mut a_done = false;
    for _ in 0..600 {
        let s = load_state(rig.store.as_ref(), &stream).await.unwrap();
        if s.resources.contains_key("A") {
            a_done = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(a_done, "A was created");
    // Its gate's next heartbeat re-check runs the gate handler again.
    let gates = tokio::spawn(rig.worker_of("gates", |t| t == "Gate").run(rx));
    let (status, _, error, _) = rig.wait_counted(&arn).await;
    for w in [ends, acts, gates] {
        w.abort();
    }
    assert_eq!(status, ExecutionStatus::Succeeded, "{error}");
    let state = load_state(rig.store.as_ref(), &StreamId::new("us-east-1", &stack))
        .await
        .unwrap();
    assert_eq!(state.resources.len(), 2);
    let again = rig
        .s3
        .get_object()
        .bucket(&rig.bucket)
        .key(&gate)
        .send()
        .await
        .unwrap();
    let token = again.body.collect().await.unwrap().into_bytes();
    assert_ne!(
        &token[..],
        b"not-a-task-token",
        "the gate ran again and stored its new token"
    );
}

/// A Plan that fails for good goes through Release to `PlanFailed`; a deploy that holds
/// the lock when its execution cannot go on has it released by Release, which records why.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failed_plan_or_fail_releases_the_lock_and_says_why() {
    let rig = rig(1).await;
    let stack = unique_name("SfnRelease");
    // An input that is not there: Plan fails before the lock, Release finds none to release.
    let missing = DeployRequest {
        stack: stack.clone(),
        input_key: format!("inputs/{stack}/missing.json"),
        no_rollback: false,
        concurrency: 10,
        deploy_id: None,
        allow_stateful_replacement: false,
    };
    let (status, _, error) = rig
        .run("deploy", serde_json::to_value(missing).unwrap())
        .await;
    assert_eq!(status, ExecutionStatus::Failed, "{error}");
    assert!(error.contains("Stackflow.PlanFailed"), "{error}");

    // A Plan that took the lock, and an execution that cannot go on (its next task
    // failed for good): Release records the caught error and releases the lock.
    let t = template(json!({"Resources": {"Q": {"Type": "AWS::SQS::Queue"}}}));
    let req = rig.upload(&input(&stack, t), None).await;
    let planned = rig
        .tasks
        .dispatch("Plan", serde_json::to_value(&req).unwrap(), None)
        .await
        .unwrap()
        .unwrap();
    let deploy_id = planned["deployId"].as_str().unwrap().to_string();
    let stream = StreamId::new("us-east-1", &stack);
    let held = load_state(rig.store.as_ref(), &stream).await.unwrap().lock;
    assert_eq!(held.map(|h| h.deploy_id), Some(deploy_id.clone()));
    let mut caught = serde_json::to_value(&req).unwrap();
    caught["error"] = json!({"Error": "Stackflow.Aws", "Cause": "PutObject failed"});
    let released = rig
        .tasks
        .dispatch("Release", caught.clone(), None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(released["released"], json!(true));
    assert_eq!(released["deployId"], json!(deploy_id));
    let state = load_state(rig.store.as_ref(), &stream).await.unwrap();
    assert!(state.lock.is_none(), "the lock is released");
    let why = rig
        .store
        .read_all_for_test(&stream)
        .await
        .into_iter()
        .find_map(|e| match e {
            stackflow_events::Event::DeployFailed {
                deploy_id: d,
                error,
                ..
            } if d == deploy_id => Some(error),
            _ => None,
        })
        .expect("the stream says why the deploy ended");
    assert_eq!(why.name, "Stackflow.Aws");
    assert!(why.message.contains("PutObject failed"), "{}", why.message);
    // Again: the lock is not its own any more, and is left alone.
    let again = rig
        .tasks
        .dispatch("Release", caught, None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again["released"], json!(false));
    let _ = rig.stop.send(true);
}

impl Rig {
    /// Appends `event` to `stack`'s stream as the run `holder` (which holds the lock).
    async fn append_as(
        &self,
        stack: &str,
        holder: &str,
        key: &str,
        event: stackflow_events::Event,
    ) {
        use stackflow_events::{EventStore, NewEvent, Precondition};
        self.store
            .append(
                &StreamId::new("us-east-1", stack),
                &NewEvent::new(key, event),
                &Precondition::HoldsLock(holder.into()),
            )
            .await
            .unwrap();
    }

    /// Waits until the execution `arn` has entered the state `name` (at most a minute).
    async fn entered(&self, arn: &str, name: &str) -> bool {
        for _ in 0..600 {
            let h = self
                .sfn
                .get_execution_history()
                .execution_arn(arn)
                .max_results(1000)
                .send()
                .await
                .unwrap();
            let seen = h.events().iter().any(|e| {
                e.state_entered_event_details()
                    .is_some_and(|d| d.name() == name)
            });
            if seen {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    }
}

/// A `Map` that failed stops its other iterations, but their calls may run on (a Lambda
/// is not stopped): Fail waits while an intent of the deploy without an outcome is young,
/// looking again after a `Wait`; once the late call recorded what it made, the rollback
/// deletes that too.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fail_waits_for_a_late_call_and_undoes_what_it_made() {
    use stackflow_events::Event;
    use stackflow_events::event::{Operation, ResourceRecord};
    let rig = rig_with(0, 20).await;
    let stack = unique_name("SfnLate");
    let t = template(json!({"Resources": {
        "A": {"Type": "AWS::SQS::Queue"},
        "G": {"Type": "AWS::SQS::Queue", "DependsOn": "A", "Properties": {"VisibilityTimeout": 999999}}
    }}));
    let deploy_id = unique_name("d").to_lowercase();
    let req = rig.upload(&input(&stack, t), Some(deploy_id.clone())).await;
    // Fail does not run until the late call's intent is recorded.
    let (_keep, rx) = watch::channel(false);
    let most = tokio::spawn(rig.worker_of("most", |t| t != "Fail").run(rx.clone()));
    let arn = rig
        .start("deploy", serde_json::to_value(req).unwrap())
        .await;
    let stream = StreamId::new("us-east-1", &stack);
    let mut g_failed = false;
    for _ in 0..600 {
        g_failed =
            rig.store.read_all_for_test(&stream).await.iter().any(
                |e| matches!(e, Event::ResourceFailed { logical_id, .. } if logical_id == "G"),
            );
        if g_failed {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(g_failed, "G failed");
    let kind = load_state(rig.store.as_ref(), &stream)
        .await
        .unwrap()
        .resources["A"]
        .provider;
    // An iteration the deploy stopped is still making a queue: its intent is recorded.
    let late = Event::ResourceIntent {
        deploy_id: deploy_id.clone(),
        logical_id: "Late".into(),
        resource_type: "AWS::SQS::Queue".into(),
        operation: Operation::Create,
        token: format!("{deploy_id}-late"),
        provider: kind,
        physical_id: None,
        properties: Some(Default::default()),
    };
    rig.append_as(&stack, &deploy_id, "test/late/intent", late)
        .await;
    let fails = tokio::spawn(rig.worker_of("fails", |t| t == "Fail").run(rx));
    assert!(
        rig.entered(&arn, "WaitForRunningCalls").await,
        "Fail waits for the late call"
    );
    let state = load_state(rig.store.as_ref(), &stream).await.unwrap();
    assert!(
        state.lock.is_some(),
        "nothing is undone while the call may run"
    );
    assert!(state.resources.contains_key("A"));
    // The late call ends: its queue exists, and is recorded.
    let url = rig
        .sqs
        .create_queue()
        .queue_name(format!("{stack}-late"))
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    let made = Event::ResourceCreated {
        deploy_id: deploy_id.clone(),
        resource: ResourceRecord {
            logical_id: "Late".into(),
            resource_type: "AWS::SQS::Queue".into(),
            physical_id: url.clone(),
            properties: Default::default(),
            attributes: Default::default(),
            dependencies: vec![],
            provider: kind,
            deletion_policy: None,
            update_replace_policy: None,
            secret_digest: None,
        },
        replaces: None,
        baseline: None,
    };
    rig.append_as(&stack, &deploy_id, "test/late/created", made)
        .await;
    let (status, _, error, _) = rig.wait_counted(&arn).await;
    most.abort();
    fails.abort();
    assert_eq!(status, ExecutionStatus::Failed, "{error}");
    assert!(error.contains("Stackflow.DeployFailed"), "{error}");
    let after = load_state(rig.store.as_ref(), &stream).await.unwrap();
    assert!(after.resources.is_empty(), "{:?}", after.resources.keys());
    assert!(after.pending.is_empty() && after.lock.is_none());
    assert!(
        !rig.queue_exists(&url).await,
        "the late call's queue is deleted"
    );
}
