//! Tasks past their deadline, through the state machines and the worker: with
//! `STACKFLOW_TASK_DEADLINE_SECONDS` at 1 and a custom resource whose handler answers
//! after 3 seconds, the deploy's Act, the destroy's task and a failed deploy's Fail (its
//! rollback) are each cut at least once (`Stackflow.Again`), run again, and resume: the
//! same `RequestId` every time, one resource made, and the destroy and the rollback, each
//! as one run, finish.
//!
//! The variable is read by every task of the process, so the test runs itself again as a
//! child process with it set.

mod sfn;

use std::time::Duration;

use aws_sdk_sfn::types::ExecutionStatus;
use serde_json::{Value, json};
use stackflow_engine::sfn::deadline::TASK_DEADLINE;
use stackflow_events::{StreamId, load_state};
use stackflow_tests::{Emulator, unique_name};
use tokio::sync::mpsc;

use sfn::*;

/// The custom resource handler: takes each request from `queue_url` (the SNS envelope's
/// `Message`), waits `delay`, answers `SUCCESS` by writing the answer where the
/// `ResponseURL` points (the engine's bucket), and passes the request on to `seen`.
async fn slow_handler(
    sqs: aws_sdk_sqs::Client,
    s3: aws_sdk_s3::Client,
    bucket: String,
    queue_url: String,
    delay: Duration,
    seen: mpsc::UnboundedSender<Value>,
) {
    loop {
        let Ok(received) = sqs
            .receive_message()
            .queue_url(&queue_url)
            .wait_time_seconds(1)
            .max_number_of_messages(10)
            .send()
            .await
        else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        for message in received.messages() {
            let envelope: Value = serde_json::from_str(message.body().unwrap()).unwrap();
            let request: Value =
                serde_json::from_str(envelope["Message"].as_str().unwrap()).unwrap();
            let _ = seen.send(request.clone());
            if let Some(handle) = message.receipt_handle() {
                let _ = sqs
                    .delete_message()
                    .queue_url(&queue_url)
                    .receipt_handle(handle)
                    .send()
                    .await;
            }
            let (s3, bucket) = (s3.clone(), bucket.clone());
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                let physical = request
                    .get("PhysicalResourceId")
                    .cloned()
                    .unwrap_or_else(|| {
                        let id = request["LogicalResourceId"].as_str().unwrap_or_default();
                        json!(format!("slow-{id}"))
                    });
                let answer = json!({
                    "Status": "SUCCESS",
                    "PhysicalResourceId": physical,
                    "StackId": request["StackId"],
                    "RequestId": request["RequestId"],
                    "LogicalResourceId": request["LogicalResourceId"],
                    "Data": {"Ready": "yes"}
                });
                let url = request["ResponseURL"].as_str().unwrap();
                let marker = format!("/{bucket}/");
                let at = url.find(&marker).expect("the ResponseURL is in the bucket");
                let key = url[at + marker.len()..].split('?').next().unwrap();
                s3.put_object()
                    .bucket(&bucket)
                    .key(key)
                    .body(answer.to_string().into_bytes().into())
                    .send()
                    .await
                    .unwrap();
            });
        }
    }
}

/// A topic whose requests land in a queue the handler reads; the topic's ARN.
async fn service_token(rig: &Rig, seen: mpsc::UnboundedSender<Value>) -> String {
    let config = Emulator::shared().await.sdk_config().await;
    let sns = aws_sdk_sns::Client::new(&config);
    let topic = sns
        .create_topic()
        .name(unique_name("slow"))
        .send()
        .await
        .unwrap()
        .topic_arn
        .unwrap();
    let queue_url = rig
        .sqs
        .create_queue()
        .queue_name(unique_name("slow"))
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    let arn_name = aws_sdk_sqs::types::QueueAttributeName::QueueArn;
    let queue_arn = rig
        .sqs
        .get_queue_attributes()
        .queue_url(&queue_url)
        .attribute_names(arn_name.clone())
        .send()
        .await
        .unwrap()
        .attributes()
        .and_then(|a| a.get(&arn_name).cloned())
        .unwrap();
    sns.subscribe()
        .topic_arn(&topic)
        .protocol("sqs")
        .endpoint(queue_arn)
        .send()
        .await
        .unwrap();
    tokio::spawn(slow_handler(
        rig.sqs.clone(),
        rig.s3.clone(),
        rig.bucket.clone(),
        queue_url,
        Duration::from_secs(3),
        seen,
    ));
    topic
}

/// How many times the execution `arn` ran a task that answered `Stackflow.Again`.
async fn agains(rig: &Rig, arn: &str) -> usize {
    agains_from(rig, arn, None).await
}

/// How many times the execution `arn` ran a task that answered `Stackflow.Again` after it
/// first entered the state `from` (from its start when `None`).
async fn agains_from(rig: &Rig, arn: &str, from: Option<&str>) -> usize {
    let h = rig
        .sfn
        .get_execution_history()
        .execution_arn(arn)
        .max_results(1000)
        .send()
        .await
        .unwrap();
    let mut counting = from.is_none();
    let mut count = 0;
    for e in h.events() {
        let entered = e.state_entered_event_details().map(|d| d.name());
        if from.is_some() && entered == from {
            counting = true;
        }
        // An activity's failure is `ActivityFailed` on AWS, `TaskFailed` on the emulator.
        let error = e
            .activity_failed_event_details()
            .and_then(|d| d.error())
            .or_else(|| e.task_failed_event_details().and_then(|d| d.error()));
        if counting && error == Some("Stackflow.Again") {
            count += 1;
        }
    }
    count
}

/// The request types and ids the handler saw so far.
fn drain(seen: &mut mpsc::UnboundedReceiver<Value>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    while let Ok(r) = seen.try_recv() {
        out.push((
            r["RequestType"].as_str().unwrap().to_string(),
            r["RequestId"].as_str().unwrap().to_string(),
        ));
    }
    out
}

/// Runs [`run`] in a child process of this test binary with the deadline set (the
/// workspace forbids `unsafe`, which setting a variable in this process needs).
#[test]
fn tasks_past_their_deadline_run_again_and_resume() {
    if std::env::var(TASK_DEADLINE).is_ok() {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .enable_all()
            .build()
            .unwrap()
            .block_on(run());
        return;
    }
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "tasks_past_their_deadline_run_again_and_resume",
            "--nocapture",
        ])
        .env(TASK_DEADLINE, "1")
        .status()
        .unwrap();
    assert!(status.success(), "the run with a 1-second deadline failed");
}

async fn run() {
    let rig = rig(1).await;
    let (tx, mut seen) = mpsc::unbounded_channel();
    let topic = service_token(&rig, tx).await;
    let stack = unique_name("SfnSlow");
    let t = template(json!({"Resources": {
        "Slow": {"Type": "Custom::Slow", "Properties": {"ServiceToken": topic}}
    }}));
    let req = rig.upload(&input(&stack, t), None).await;
    let arn = rig
        .start("deploy", serde_json::to_value(req).unwrap())
        .await;
    let (status, _, error, _) = rig.wait_counted(&arn).await;
    assert_eq!(status, ExecutionStatus::Succeeded, "{error}");
    assert!(agains(&rig, &arn).await >= 1, "Act ran past its deadline");
    let stream = StreamId::new("us-east-1", &stack);
    let state = load_state(rig.store.as_ref(), &stream).await.unwrap();
    assert_eq!(state.resources["Slow"].physical_id, "slow-Slow");
    assert!(state.pending.is_empty() && state.lock.is_none());
    let creates = drain(&mut seen);
    assert!(!creates.is_empty());
    assert!(
        creates.iter().all(|c| c == &creates[0] && c.0 == "Create"),
        "every run of the action sent the same request: {creates:?}"
    );

    let arn = rig.start("destroy", json!({ "stack": stack })).await;
    let (status, _, error, _) = rig.wait_counted(&arn).await;
    assert_eq!(status, ExecutionStatus::Succeeded, "{error}");
    assert!(
        agains(&rig, &arn).await >= 1,
        "Destroy ran past its deadline"
    );
    let state = load_state(rig.store.as_ref(), &stream).await.unwrap();
    assert!(state.resources.is_empty() && state.pending.is_empty() && state.lock.is_none());
    let deletes = drain(&mut seen);
    assert!(
        !deletes.is_empty() && deletes.iter().all(|d| d == &deletes[0] && d.0 == "Delete"),
        "one run, one delete request: {deletes:?}"
    );

    // A failed deploy whose rollback outlasts one invocation: the queue after Slow fails,
    // Fail's rollback deletes Slow, whose handler answers after 3 seconds; Fail is cut at
    // its deadline, runs again and resumes the same undo.
    let stack = unique_name("SfnSlowFail");
    let t = template(json!({"Resources": {
        "Slow": {"Type": "Custom::Slow", "Properties": {"ServiceToken": topic}},
        "Bad": {
            "Type": "AWS::SQS::Queue",
            "DependsOn": "Slow",
            "Properties": {"VisibilityTimeout": 999999}
        }
    }}));
    let req = rig.upload(&input(&stack, t), None).await;
    let arn = rig
        .start("deploy", serde_json::to_value(req).unwrap())
        .await;
    let (status, _, error, _) = rig.wait_counted(&arn).await;
    assert_eq!(status, ExecutionStatus::Failed, "{error}");
    assert!(error.contains("Stackflow.DeployFailed"), "{error}");
    assert!(
        agains_from(&rig, &arn, Some("Fail")).await >= 1,
        "Fail ran past its deadline"
    );
    let stream = StreamId::new("us-east-1", &stack);
    let state = load_state(rig.store.as_ref(), &stream).await.unwrap();
    assert!(
        state.resources.is_empty() && state.pending.is_empty() && state.lock.is_none(),
        "the rollback finished and released the lock: {:?}",
        (&state.resources, &state.pending, &state.lock)
    );
    let requests = drain(&mut seen);
    let undos: Vec<_> = requests.iter().filter(|r| r.0 == "Delete").collect();
    assert!(
        !undos.is_empty() && undos.iter().all(|d| d == &undos[0]),
        "one undo, one delete request: {requests:?}"
    );
    let _ = rig.stop.send(true);
}
