//! Issue 16's chain on the emulator, in one test, through what `stackflow engine deploy`
//! installs (infra/engine.yaml with its triggers on; every function the real bootstrap,
//! run by the container stand-in):
//!
//! 1. `stackflow engine deploy` installs the engine;
//! 2. an object put under `deploy/<stack>/` of the engine bucket reaches EventBridge, the
//!    installed rule invokes the installed Start function, which starts the installed
//!    deploy state machine (the Lambda path); the execution succeeds, the stack's
//!    resources exist, and its `Stack Deploy Started` and `Stack Deploy Succeeded`
//!    events reach the default bus;
//! 3. a pipeline's Lambda action: the installed PipelineJob function, invoked with a
//!    CodePipeline job event as CodePipeline invokes it (again with the continuation
//!    token until it reports an end), deploys another stack from the input artifact and
//!    reports success to a CodePipeline stand-in (fakecloud runs no pipeline jobs);
//! 4. the installed drift schedule is fired (fakecloud's test endpoint fires a schedule
//!    now: the installed one is `rate(1 day)`), its DriftCheck run checks every stack and
//!    reports the first stack's out-of-band change as a `Stack Drift Detected` event;
//! 5. `stackflow engine destroy` leaves only the event table: every other resource of the
//!    engine's stack is gone, and nothing named after the engine is left.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use stackflow_tests::installed::{ENGINE_BUCKET, Installed, json as stdout_json};
use stackflow_tests::inventory::Inventory;
use stackflow_tests::lambda::zip_files;
use stackflow_tests::triggers::{
    ArtifactCredentials, Observer, PipelineAction, codepipeline_standin, drift_detected, ended,
    executions, new_execution, raw_call, types, why_ended,
};
use stackflow_tests::{Emulator, unique_name};

struct Aws {
    config: aws_types::SdkConfig,
    lambda: aws_sdk_lambda::Client,
    sfn: aws_sdk_sfn::Client,
    s3: aws_sdk_s3::Client,
    ssm: aws_sdk_ssm::Client,
    events: aws_sdk_eventbridge::Client,
    iam: aws_sdk_iam::Client,
    logs: aws_sdk_cloudwatchlogs::Client,
    sqs: aws_sdk_sqs::Client,
    inventory: Inventory,
    endpoint: String,
}

fn stack_name(prefix: &str) -> String {
    format!("S{}", unique_name(prefix).replace('_', "-"))
}

fn elapsed(since: Instant) -> String {
    format!("{:.1} s", since.elapsed().as_secs_f64())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn engine_deploy_then_events_pipeline_and_drift_then_destroy_keeps_the_table() {
    chain(Emulator::shared().await).await;
}

/// The same chain on an emulator that enforces IAM (`--iam strict`): each function calls
/// AWS as a session of its own role (fakecloud mints one per instance), so a permission
/// `infra/engine.yaml` does not grant fails a step.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_chain_passes_under_enforced_iam_each_function_as_its_role() {
    chain(Emulator::strict().await).await;
}

async fn chain(emu: &'static Emulator) {
    let config = emu.sdk_config().await;
    let aws = Aws {
        lambda: aws_sdk_lambda::Client::new(&config),
        sfn: aws_sdk_sfn::Client::new(&config),
        s3: emu.s3().await,
        ssm: aws_sdk_ssm::Client::new(&config),
        events: aws_sdk_eventbridge::Client::new(&config),
        iam: aws_sdk_iam::Client::new(&config),
        logs: aws_sdk_cloudwatchlogs::Client::new(&config),
        sqs: aws_sdk_sqs::Client::new(&config),
        inventory: Inventory::new(emu).await,
        endpoint: emu.endpoint().to_string(),
        config,
    };
    let chain = Instant::now();

    // 1. The install, triggers on.
    let engine = Installed::install(emu, &["--parameter", "Triggers=on"]).await;
    println!("1. engine deploy: {:.1} s", engine.took.as_secs_f64());
    let notifications = aws
        .s3
        .get_bucket_notification_configuration()
        .bucket(ENGINE_BUCKET)
        .send()
        .await
        .unwrap();
    assert!(
        notifications.event_bridge_configuration().is_some(),
        "engine deploy turns the bucket's EventBridge notifications on"
    );
    let mut observer = Observer::start(&aws.config, &unique_name("chain")).await;

    // 2. An object under deploy/<stack>/ deploys through the Lambda path.
    let step = Instant::now();
    let first = object_deploys(&aws, &engine, &mut observer).await;
    println!("2. EventBridge object to deployed stack: {}", elapsed(step));

    // 3. A pipeline's Lambda action deploys another.
    let step = Instant::now();
    let second = pipeline_action_deploys(&aws, &engine).await;
    println!("3. pipeline action to deployed stack: {}", elapsed(step));

    // 4. The schedule's drift check reports the first stack's out-of-band change.
    let step = Instant::now();
    schedule_reports_drift(&aws, &engine, &mut observer, &first, &second).await;
    println!(
        "4. drift schedule fired to Stack Drift Detected: {}",
        elapsed(step)
    );

    // 5. Destroy: only the table stays.
    let step = Instant::now();
    destroy_keeps_only_the_table(&aws, &engine).await;
    println!("5. engine destroy: {}", elapsed(step));
    println!("the chain: {}", elapsed(chain));
}

/// What `state show --json` prints of a stack's resources (camelCase).
struct Shown {
    resources: std::collections::BTreeMap<String, ShownResource>,
}

struct ShownResource {
    resource_type: String,
    physical_id: String,
    properties: serde_json::Map<String, Value>,
}

impl Shown {
    fn of(state: &Value) -> Shown {
        let rows = state["resources"].as_object().cloned().unwrap_or_default();
        let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
        let resources = rows
            .into_iter()
            .map(|(id, r)| {
                let shown = ShownResource {
                    resource_type: text(&r["type"]),
                    physical_id: text(&r["physicalId"]),
                    properties: r["properties"].as_object().cloned().unwrap_or_default(),
                };
                (id, shown)
            })
            .collect();
        Shown { resources }
    }
}

/// The stack's resources, as the engine's table records them, each asserted to exist.
async fn recorded_resources_exist(aws: &Aws, engine: &Installed, stack: &str) -> Shown {
    let run = engine
        .remote()
        .run(&["state", "show", "--stack", stack, "--json"]);
    assert_eq!(run.code, Some(0), "{}", run.describe());
    let state = Shown::of(&stdout_json(&run));
    assert!(!state.resources.is_empty(), "{stack} has resources");
    for (id, r) in &state.resources {
        let there = aws
            .inventory
            .exists(&r.resource_type, &r.physical_id, true)
            .await
            .unwrap();
        assert!(
            there,
            "{stack}: {id} ({}) {}",
            r.resource_type, r.physical_id
        );
    }
    state
}

async fn object_deploys(aws: &Aws, engine: &Installed, observer: &mut Observer) -> String {
    let stack = stack_name("chainev");
    let template = json!({"Resources": {
        "Alerts": {"Type": "AWS::SNS::Topic"},
        "Level": {"Type": "AWS::SSM::Parameter",
                  "Properties": {"Name": format!("/{stack}/level"), "Type": "String", "Value": "low"}}
    }});
    let machine = engine.machine("deploy");
    let before = executions(&aws.sfn, &machine).await;
    aws.s3
        .put_object()
        .bucket(ENGINE_BUCKET)
        .key(format!("deploy/{stack}/template.json"))
        .body(template.to_string().into_bytes().into())
        .send()
        .await
        .unwrap();
    // Start names the execution after the event's id.
    let wait = Duration::from_secs(120);
    let name = new_execution(&aws.sfn, &machine, &before, "ev-", wait).await;
    let status = ended(&aws.sfn, &machine, &name, Duration::from_secs(300)).await;
    if status != "SUCCEEDED" {
        let events = engine.remote().run(&["events", "--stack", &stack]);
        panic!(
            "{}\n{}",
            why_ended(&aws.sfn, &machine, &name).await,
            events.describe()
        );
    }
    let state = recorded_resources_exist(aws, engine, &stack).await;
    assert_eq!(state.resources.len(), 2);
    let level = aws
        .ssm
        .get_parameter()
        .name(format!("/{stack}/level"))
        .send()
        .await
        .unwrap();
    assert_eq!(level.parameter().and_then(|p| p.value()), Some("low"));
    let mine = observer
        .until(&stack, Duration::from_secs(30), |e| {
            types(e).iter().any(|t| t == "Stack Deploy Succeeded")
        })
        .await;
    assert_eq!(
        types(&mine),
        ["Stack Deploy Started", "Stack Deploy Succeeded"],
        "{mine:#?}"
    );
    assert_eq!(mine[1]["detail"]["deployId"], name.as_str());
    stack
}

/// Points the installed PipelineJob function at a CodePipeline stand-in (an
/// emulator-only step: fakecloud runs no pipeline jobs, so its job API knows none).
async fn pipelinejob_reports_to(aws: &Aws, function: &str, endpoint: &str) {
    let current = aws
        .lambda
        .get_function_configuration()
        .function_name(function)
        .send()
        .await
        .unwrap();
    let mut env = aws_sdk_lambda::types::Environment::builder();
    let vars = current.environment().and_then(|e| e.variables());
    for (k, v) in vars.into_iter().flatten() {
        env = env.variables(k, v);
    }
    env = env.variables("AWS_ENDPOINT_URL_CODEPIPELINE", endpoint);
    aws.lambda
        .update_function_configuration()
        .function_name(function)
        .environment(env.build())
        .send()
        .await
        .unwrap();
}

async fn pipeline_action_deploys(aws: &Aws, engine: &Installed) -> String {
    let function = format!("{}-pipelinejob", engine.name);
    let (endpoint, calls) = codepipeline_standin().await;
    pipelinejob_reports_to(aws, &function, &endpoint).await;
    let artifacts = unique_name("chain-artifacts");
    aws.s3
        .create_bucket()
        .bucket(&artifacts)
        .send()
        .await
        .unwrap();
    let stack = stack_name("chaincp");
    let template = json!({"Resources": {
        "Work": {"Type": "AWS::SQS::Queue", "Properties": {"VisibilityTimeout": 60}},
        "WorkUrl": {"Type": "AWS::SSM::Parameter",
                    "Properties": {"Type": "String", "Value": {"Ref": "Work"}}}
    }});
    let zip = zip_files(&[("template.json", template.to_string().as_bytes())]);
    aws.s3
        .put_object()
        .bucket(&artifacts)
        .key("chain/BuildOutput/build.zip")
        .body(zip.into())
        .send()
        .await
        .unwrap();
    let job = unique_name("chain-job");
    // The job reads its input artifact as a session of a role that may (CodePipeline's
    // artifact credentials): what an emulator enforcing IAM takes.
    let action = PipelineAction {
        lambda: &aws.lambda,
        function: &function,
        calls: &calls,
        credentials: ArtifactCredentials::session(&aws.config, &artifacts).await,
    };
    let last = action
        .run(&job, &stack, &artifacts, "chain/BuildOutput/build.zip")
        .await;
    assert_eq!(last.operation, "PutJobSuccessResult", "{}", last.raw);
    assert_eq!(
        last.body["outputVariables"]["DeployId"],
        format!("cp-{job}").as_str()
    );
    let machine = engine.machine("deploy");
    let status = ended(
        &aws.sfn,
        &machine,
        &format!("cp-{job}"),
        Duration::from_secs(10),
    )
    .await;
    let why = why_ended(&aws.sfn, &machine, &format!("cp-{job}")).await;
    assert_eq!(status, "SUCCEEDED", "{why}");
    let state = recorded_resources_exist(aws, engine, &stack).await;
    assert_eq!(state.resources.len(), 2);
    stack
}

/// The installed schedule, as EventBridge Scheduler's GetSchedule answers it.
async fn installed_schedule(aws: &Aws, engine: &Installed) -> Value {
    let path = format!("/schedules/{}-drift", engine.name);
    let (status, body) = raw_call(&aws.endpoint, "GET", &path, "scheduler", None, "").await;
    assert_eq!(status, 200, "GetSchedule: {body}");
    serde_json::from_str(&body).unwrap()
}

async fn schedule_reports_drift(
    aws: &Aws,
    engine: &Installed,
    observer: &mut Observer,
    drifted: &str,
    unchanged: &str,
) {
    let schedule = installed_schedule(aws, engine).await;
    let target = &schedule["Target"];
    assert!(
        target["Arn"]
            .as_str()
            .is_some_and(|a| a.ends_with(&format!(":function:{}-driftcheck", engine.name))),
        "{schedule}"
    );
    assert_eq!(target["Input"], "{}", "every stack: {schedule}");
    aws.ssm
        .put_parameter()
        .name(format!("/{drifted}/level"))
        .value("high-out-of-band")
        .r#type(aws_sdk_ssm::types::ParameterType::String)
        .overwrite(true)
        .send()
        .await
        .unwrap();
    // The installed schedule runs once a day: fakecloud's test endpoint fires it now, as
    // its ticker would (the target, its role and its input).
    let path = format!("/_fakecloud/scheduler/fire/default/{}-drift", engine.name);
    let (status, body) = raw_call(&aws.endpoint, "POST", &path, "scheduler", None, "").await;
    assert_eq!(status, 200, "firing the schedule: {body}");
    let detected = |e: &[Value]| types(e).iter().any(|t| t == "Stack Drift Detected");
    let mine = observer
        .until(drifted, Duration::from_secs(180), detected)
        .await;
    let event = drift_detected(&mine, "Level", "high-out-of-band");
    println!("   {}", event["detail"]);
    // Every stack was checked: the other one too.
    let checked = |e: &[Value]| types(e).iter().any(|t| t == "Stack Drift Checked");
    let other = observer
        .until(unchanged, Duration::from_secs(60), checked)
        .await;
    assert!(checked(&other), "{unchanged} checked too: {other:#?}");
}

/// Whether a resource of the engine's stack still exists (each type the template has).
async fn still_there(aws: &Aws, r: &ShownResource) -> bool {
    let id = r.physical_id.as_str();
    let p = &r.properties;
    let function_exists = |name: &Value| {
        let name = name.as_str().unwrap_or_default().to_string();
        async move { aws.lambda.get_function().function_name(name).send().await }
    };
    match r.resource_type.as_str() {
        "AWS::StepFunctions::StateMachine" => {
            match aws
                .sfn
                .describe_state_machine()
                .state_machine_arn(id)
                .send()
                .await
            {
                Ok(_) => true,
                Err(e) => {
                    let e = e.into_service_error();
                    assert!(e.is_state_machine_does_not_exist(), "{id}: {e:?}");
                    false
                }
            }
        }
        "AWS::Events::Rule" => {
            let name = id.rsplit('/').next().unwrap_or(id);
            match aws.events.describe_rule().name(name).send().await {
                Ok(_) => true,
                Err(e) => {
                    let e = e.into_service_error();
                    assert!(e.is_resource_not_found_exception(), "{id}: {e:?}");
                    false
                }
            }
        }
        "AWS::Scheduler::Schedule" => {
            let name = id.rsplit('/').next().unwrap_or(id);
            let path = format!("/schedules/{name}");
            let (status, body) = raw_call(&aws.endpoint, "GET", &path, "scheduler", None, "").await;
            assert!(status == 200 || status == 404, "{status}: {body}");
            status == 200
        }
        // Parts of a function: gone with it.
        "AWS::Lambda::Permission" | "AWS::Lambda::EventInvokeConfig" => {
            function_exists(&p["FunctionName"]).await.is_ok()
        }
        // Parts of a queue: gone with it.
        "AWS::SQS::QueuePolicy" => {
            let queues = p["Queues"].as_array().cloned().unwrap_or_default();
            let mut any = false;
            for q in queues {
                let q = q.as_str().unwrap_or_default();
                any |= aws
                    .inventory
                    .exists("AWS::SQS::Queue", q, true)
                    .await
                    .unwrap();
            }
            any
        }
        "AWS::Events::EventBus" => match aws.events.describe_event_bus().name(id).send().await {
            Ok(_) => true,
            Err(e) => {
                let e = e.into_service_error();
                assert!(e.is_resource_not_found_exception(), "{id}: {e:?}");
                false
            }
        },
        // The artifact guard: a managed policy, its id its ARN.
        "AWS::IAM::ManagedPolicy" => match aws.iam.get_policy().policy_arn(id).send().await {
            Ok(_) => true,
            Err(e) => {
                let e = e.into_service_error();
                assert!(e.is_no_such_entity_exception(), "{id}: {e:?}");
                false
            }
        },
        // An inline policy of roles: gone with them.
        "AWS::IAM::Policy" => {
            let roles = p["Roles"].as_array().cloned().unwrap_or_default();
            let mut any = false;
            for role in roles {
                let role = role.as_str().unwrap_or_default();
                any |= aws
                    .inventory
                    .exists("AWS::IAM::Role", role, true)
                    .await
                    .unwrap();
            }
            any
        }
        ty @ ("AWS::Lambda::Function"
        | "AWS::IAM::Role"
        | "AWS::Logs::LogGroup"
        | "AWS::SQS::Queue"
        | "AWS::DynamoDB::Table") => aws.inventory.exists(ty, id, true).await.unwrap(),
        other => panic!("the engine's template has a type this test does not check: {other}"),
    }
}

/// What is left named after the engine, besides its table: functions, state machines,
/// roles, log groups, queues, rules and schedules.
async fn left_named_after(aws: &Aws, engine: &str) -> Vec<String> {
    let prefix = format!("{engine}-");
    let mut left = Vec::new();
    let functions = aws.lambda.list_functions().send().await.unwrap();
    left.extend(
        functions
            .functions()
            .iter()
            .filter_map(|f| f.function_name())
            .filter(|n| n.starts_with(&prefix))
            .map(|n| format!("function {n}")),
    );
    let machines = aws.sfn.list_state_machines().send().await.unwrap();
    left.extend(
        machines
            .state_machines()
            .iter()
            .filter(|m| m.name().starts_with(&prefix))
            .map(|m| format!("state machine {}", m.name())),
    );
    let roles = aws.iam.list_roles().send().await.unwrap();
    left.extend(
        roles
            .roles()
            .iter()
            .filter(|r| r.role_name().starts_with(&prefix))
            .map(|r| format!("role {}", r.role_name())),
    );
    let groups = aws
        .logs
        .describe_log_groups()
        .log_group_name_prefix(format!("/aws/lambda/{prefix}"))
        .send()
        .await
        .unwrap();
    left.extend(
        groups
            .log_groups()
            .iter()
            .filter_map(|g| g.log_group_name())
            .map(|n| format!("log group {n}")),
    );
    let queues = aws
        .sqs
        .list_queues()
        .queue_name_prefix(&prefix)
        .send()
        .await
        .unwrap();
    left.extend(queues.queue_urls().iter().map(|q| format!("queue {q}")));
    let rules = aws
        .events
        .list_rules()
        .name_prefix(&prefix)
        .send()
        .await
        .unwrap();
    left.extend(
        rules
            .rules()
            .iter()
            .filter_map(|r| r.name())
            .map(|n| format!("rule {n}")),
    );
    let path = format!("/schedules?NamePrefix={prefix}");
    let (status, body) = raw_call(&aws.endpoint, "GET", &path, "scheduler", None, "").await;
    assert_eq!(status, 200, "ListSchedules: {body}");
    let schedules: Value = serde_json::from_str(&body).unwrap();
    let listed = schedules["Schedules"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    left.extend(
        listed
            .iter()
            .filter_map(|s| s["Name"].as_str())
            .filter(|n| n.starts_with(&prefix))
            .map(|n| format!("schedule {n}")),
    );
    left
}

async fn destroy_keeps_only_the_table(aws: &Aws, engine: &Installed) {
    let stack = format!("{}-engine", engine.name);
    let run = engine
        .cli
        .run(&["state", "show", "--stack", &stack, "--json"]);
    assert_eq!(run.code, Some(0), "{}", run.describe());
    let state = Shown::of(&stdout_json(&run));
    let types: std::collections::BTreeSet<&str> = state
        .resources
        .values()
        .map(|r| r.resource_type.as_str())
        .collect();
    assert!(types.contains("AWS::Scheduler::Schedule"), "{types:?}");
    assert!(types.contains("AWS::Events::Rule"), "{types:?}");
    println!(
        "   the engine's stack: {} resources of {} types",
        state.resources.len(),
        types.len()
    );
    let run = engine.destroy(&[]);
    assert!(
        run.stdout
            .contains(&format!("kept the event table {}", engine.table())),
        "{}",
        run.describe()
    );
    let mut left = Vec::new();
    for (id, r) in &state.resources {
        let there = still_there(aws, r).await;
        if id == "EventTable" {
            assert!(there, "the event table is kept");
            assert_eq!(r.physical_id, engine.table());
        } else if there {
            left.push(format!("{id} ({}) {}", r.resource_type, r.physical_id));
        }
    }
    assert!(left.is_empty(), "left after engine destroy: {left:#?}");
    let named = left_named_after(aws, &engine.name).await;
    assert!(named.is_empty(), "left after engine destroy: {named:#?}");
    // The table, for the next test's sake, goes too.
    engine.destroy(&["--delete-table"]);
}
