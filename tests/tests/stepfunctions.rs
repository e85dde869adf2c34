//! Deploys as Step Functions executions: the definitions of `infra/` created in the
//! emulator with each task pointed at an activity, and `stackflow worker`'s loop (run here
//! in-process) polling those activities and running the same handlers as the embedded
//! engine.

mod sfn;

use std::sync::Arc;
use std::time::Duration;

use aws_sdk_sfn::types::ExecutionStatus;
use serde_json::json;
use stackflow_core::intrinsics::bind_parameters;
use stackflow_core::template::load_path;
use stackflow_engine::Engine;
use stackflow_engine::progress::Silent;
use stackflow_engine::stack::StackInput;
use stackflow_engine::tasks::{DeployRequest, StackRequest};
use stackflow_events::{StreamId, load_state};
use stackflow_providers::lookups::AwsLookups;
use stackflow_providers::router::Providers;
use stackflow_tests::{Emulator, unique_name};
use tokio::sync::watch;

use sfn::*;

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
    let queue = stackflow_tests::deploy::deployed_scenario(&state);
    assert!(rig.queue_exists(&queue).await);

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
    let req = rig.upload(&input(&stack, v2), None).await;
    let arn = rig
        .start("deploy", serde_json::to_value(req).unwrap())
        .await;
    let (status, _, error, _) = rig.wait_counted(&arn).await;
    assert_eq!(status, ExecutionStatus::Failed, "{error}");
    assert!(error.contains("Stackflow.DeployFailed"), "{error}");
    // G's task failed with Stackflow.ActionFailed, naming G only (its error text, which
    // may quote what was sent, stays in the stack's events): that failed the Map, whose
    // Catch went to Fail; Conclude never ran.
    let history = rig.history(&arn).await;
    let failures: Vec<(String, String)> = history
        .iter()
        .filter_map(|e| {
            let (error, cause) = match (
                e.task_failed_event_details(),
                e.activity_failed_event_details(),
            ) {
                (Some(d), _) => (d.error(), d.cause()),
                (_, Some(d)) => (d.error(), d.cause()),
                _ => return None,
            };
            Some((error?.to_string(), cause.unwrap_or_default().to_string()))
        })
        .collect();
    let action_failed: Vec<&(String, String)> = failures
        .iter()
        .filter(|(error, _)| error == "Stackflow.ActionFailed")
        .collect();
    assert_eq!(action_failed.len(), 1, "{failures:#?}");
    assert!(action_failed[0].1.contains("G failed"), "{failures:#?}");
    assert!(!action_failed[0].1.contains("999999"), "{failures:#?}");
    let entered = |name: &str| {
        history.iter().any(|e| {
            e.state_entered_event_details()
                .is_some_and(|d| d.name() == name)
        })
    };
    assert!(
        entered("Fail") && !entered("Conclude"),
        "the Map's Catch ran Fail"
    );
    let fenced = rig
        .store
        .as_ref()
        .read_all_for_test(&stream)
        .await
        .into_iter()
        .any(|e| matches!(e, stackflow_events::Event::ActionsFenced { .. }));
    assert!(fenced, "Fail fenced the lock before it rolled back");
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
    let (urls, recorded) =
        stackflow_tests::deploy::listed_and_recorded_queues(&rig.sqs, &stack, &state).await;
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
    let gate = format!("deploys/{stack}/{deploy_id}/gates/provision/0/B");
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
    // A's gate must be through too (its action scheduled) before the only worker that runs
    // gates stops: on a loaded machine A's gate can come after B's, and then nothing runs it
    // until A is done, which it never is.
    assert!(
        rig.scheduled(&arn, &rig.activities["Provision"]).await,
        "A's action was scheduled"
    );
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
    // Up to 2 minutes: A's action waits for a worker poll, which a loaded machine slows.
    for _ in 0..2400 {
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
        concurrency: 40,
        deploy_id: None,
        allow_stateful_replacement: false,
        expected_plan: None,
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
    // What it recorded is in its answer, for the Stack Deploy Failed event.
    assert_eq!(released["recorded"]["kind"], json!("failed"));
    assert_eq!(
        released["recorded"]["error"]["name"],
        json!("Stackflow.Aws")
    );
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
    assert!(again.get("recorded").is_none(), "{again}");
    let _ = rig.stop.send(true);
}
