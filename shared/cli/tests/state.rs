//! `state show`, `events`, `unlock` and `diff` against a recorded stack, with the local
//! store. Events are written the way the engine writes them, straight into the store.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::json;
use stackflow_events::event::{
    Baseline, ErrorInfo, Event, Holder, NewEvent, ProviderKind, RefusalCause, ResourceRecord,
};
use stackflow_events::sqlite::SqliteStore;
use stackflow_events::{EventStore, Precondition, StreamId};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn store_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("stackflow-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn stackflow(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stackflow"))
        .args(args)
        .arg("--store")
        .arg(format!("local:{}", dir.display()))
        .current_dir(root())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", std::env::temp_dir())
        .env("USER", "tester")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("STACKFLOW_YES", "1")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
        .output()
        .expect("runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).to_string()
}

fn record(id: &str, ty: &str, physical: &str, props: serde_json::Value) -> ResourceRecord {
    ResourceRecord {
        logical_id: id.into(),
        resource_type: ty.into(),
        physical_id: physical.into(),
        properties: props.as_object().unwrap().clone(),
        attributes: [(
            "Arn".to_string(),
            json!(format!("arn:aws:sqs:us-east-1:123456789012:{physical}")),
        )]
        .into(),
        dependencies: vec![],
        provider: ProviderKind::Sdk,
        deletion_policy: None,
        update_replace_policy: None,
        secret_digest: None,
    }
}

/// The sample app's first three resources as a deploy of `app` records them, then a second
/// deploy that fails after creating the subscription.
async fn record_history(dir: &Path) {
    let store = SqliteStore::open(dir.join("events.db")).unwrap();
    let stream = StreamId::new("us-east-1", "app");
    let holder = Holder {
        deploy_id: "d1".into(),
        who: "tester@host".into(),
        since: "2026-11-29T12:00:00.000Z".into(),
        operation: "deploy".into(),
        expires: None,
        fenced: None,
    };
    let events = vec![
        (
            Precondition::TakeLock(holder.clone()),
            Event::DeployStarted {
                deploy_id: "d1".into(),
                who: "tester@host".into(),
                template_digest: "x".into(),
                parameters: [("Env".to_string(), json!("dev"))].into(),
                no_rollback: false,
                stack_id: None,
            },
        ),
        (
            Precondition::HoldsLock("d1".into()),
            Event::ResourceCreated {
                deploy_id: "d1".into(),
                resource: record(
                    "OrdersTopic",
                    "AWS::SNS::Topic",
                    "arn:aws:sns:us-east-1:123456789012:app-orders",
                    json!({"TopicName": "app-orders"}),
                ),
                replaces: None,
                baseline: Some(Baseline::Refused {
                    cause: RefusalCause::IncompleteResolution,
                }),
            },
        ),
        (
            Precondition::HoldsLock("d1".into()),
            Event::ResourceCreated {
                deploy_id: "d1".into(),
                resource: record(
                    "OrdersDeadLetters",
                    "AWS::SQS::Queue",
                    "http://q/app-orders-dlq",
                    json!({"QueueName": "app-orders-dlq"}),
                ),
                replaces: None,
                baseline: None,
            },
        ),
        (
            Precondition::HoldsLock("d1".into()),
            Event::ResourceCreated {
                deploy_id: "d1".into(),
                resource: record(
                    "OrdersQueue",
                    "AWS::SQS::Queue",
                    "http://q/app-orders",
                    json!({
                        "QueueName": "app-orders", "VisibilityTimeout": 30, "MessageRetentionPeriod": "345600",
                        "RedrivePolicy": {"deadLetterTargetArn": "arn:aws:sqs:us-east-1:123456789012:http://q/app-orders-dlq", "maxReceiveCount": 5}
                    }),
                ),
                replaces: None,
                baseline: None,
            },
        ),
        (
            Precondition::ReleaseLock("d1".into()),
            Event::DeployCompleted {
                deploy_id: "d1".into(),
                outputs: [("QueueUrl".to_string(), json!("http://q/app-orders"))].into(),
                exports: Default::default(),
                imports: vec![],
            },
        ),
    ];
    for (i, (pre, e)) in events.into_iter().enumerate() {
        store
            .append(&stream, &NewEvent::new(format!("k{i}"), e), &pre)
            .await
            .unwrap();
    }
    // A second deploy that failed and still holds the lock.
    let holder2 = Holder {
        deploy_id: "d2".into(),
        ..holder
    };
    store
        .append(
            &stream,
            &NewEvent::new(
                "d2-start",
                Event::DeployStarted {
                    deploy_id: "d2".into(),
                    who: "tester@host".into(),
                    template_digest: "y".into(),
                    parameters: Default::default(),
                    no_rollback: true,
                    stack_id: None,
                },
            ),
            &Precondition::TakeLock(holder2),
        )
        .await
        .unwrap();
    store
        .append(
            &stream,
            &NewEvent::new(
                "d2-fail",
                Event::DeployFailed {
                    deploy_id: "d2".into(),
                    error: ErrorInfo {
                        name: "InvalidRequest".into(),
                        message: "Invalid value for VisibilityTimeout".into(),
                    },
                    logical_id: Some("OrdersQueue".into()),
                },
            ),
            &Precondition::HoldsLock("d2".into()),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn state_show_events_and_unlock() {
    let dir = store_dir("state");
    record_history(&dir).await;

    let out = stackflow(&dir, &["state", "show", "--stack", "app"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(s.contains("Stack app in us-east-1 (as of event 7)"), "{s}");
    assert!(s.contains("Last deploy: d2 by tester@host"), "{s}");
    assert!(
        s.contains("Failed (InvalidRequest: Invalid value for VisibilityTimeout)"),
        "{s}"
    );
    assert!(
        s.contains("OrdersQueue (AWS::SQS::Queue) http://q/app-orders"),
        "{s}"
    );
    assert!(
        s.contains("ObservedBaseline: REFUSED (incomplete-resolution)"),
        "{s}"
    );
    assert!(s.contains("Locked by tester@host (deploy d2"), "{s}");

    let out = stackflow(
        &dir,
        &["state", "show", "--stack", "app", "--at", "2", "--json"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["seq"], 2);
    assert_eq!(v["resources"].as_object().unwrap().len(), 1);

    let out = stackflow(&dir, &["state", "show", "--stack", "app", "--at", "99"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("past the end"));

    let out = stackflow(&dir, &["state", "show", "--stack", "nope"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("has no events"),
        "{}",
        text(&out.stderr)
    );

    let out = stackflow(&dir, &["events", "--stack", "app"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines: Vec<String> = text(&out.stdout).lines().map(str::to_string).collect();
    assert_eq!(lines.len(), 7, "{lines:?}");
    assert!(lines[0].contains("DeployStarted") && lines[0].contains("d1 by tester@host"));
    assert!(
        lines[3].contains("ResourceCreated")
            && lines[3].contains("OrdersQueue")
            && lines[3].contains("created http://q/app-orders")
    );
    assert!(lines[6].contains("DeployFailed"));

    let out = stackflow(&dir, &["events", "--stack", "app", "--json"]);
    let first: serde_json::Value =
        serde_json::from_str(text(&out.stdout).lines().next().unwrap()).unwrap();
    assert_eq!(first["event"]["type"], "DeployStarted");

    let out = stackflow(&dir, &["unlock", "--stack", "app"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("held by tester@host (deploy d2"),
        "{}",
        text(&out.stdout)
    );
    let out = stackflow(&dir, &["unlock", "--stack", "app"]);
    assert!(text(&out.stdout).contains("not locked"));
    let out = stackflow(&dir, &["events", "--stack", "app"]);
    assert!(
        text(&out.stdout)
            .lines()
            .last()
            .unwrap()
            .contains("LockBroken")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn diff_compares_with_the_recorded_state() {
    let dir = store_dir("diff");
    record_history(&dir).await;
    let out = stackflow(&dir, &["diff", "tests/fixtures/sample/app.yaml"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    // Recorded with a 30 s visibility timeout; the template says 60.
    assert!(
        s.contains("~ OrdersQueue (AWS::SQS::Queue) update: properties changed"),
        "{s}"
    );
    assert!(s.contains("VisibilityTimeout: 30 → 60"), "{s}");
    assert!(
        s.contains("+ OrdersSubscription (AWS::SNS::Subscription) create"),
        "{s}"
    );
    assert!(s.contains("0 to delete, 2 unchanged"), "{s}");
    // A diff never creates a store where there is none.
    let empty = store_dir("none");
    let out = stackflow(&empty, &["diff", "tests/fixtures/sample/app.yaml"]);
    assert!(out.status.success());
    assert!(!empty.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn reading_commands_never_create_a_store() {
    let dir = store_dir("absent");
    for args in [
        &["state", "show", "--stack", "app"][..],
        &["events", "--stack", "app"][..],
        &["unlock", "--stack", "app"][..],
    ] {
        let out = stackflow(&dir, args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(
            text(&out.stderr).contains("there is no local store at"),
            "{}",
            text(&out.stderr)
        );
    }
    assert!(!dir.exists());
}

#[test]
fn init_creates_the_local_store() {
    let dir = store_dir("init");
    let out = stackflow(&dir, &["init"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("Created the local store"));
    assert!(dir.join("events.db").exists());
    // The log and the digest key stay out of git.
    let ignore = std::fs::read_to_string(dir.join(".gitignore")).unwrap();
    assert!(ignore.lines().any(|l| l == "*"), "{ignore}");
    let out = stackflow(&dir, &["init"]);
    assert!(text(&out.stdout).contains("already existed"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn state_list_names_every_stack_with_its_last_run_and_lock() {
    let dir = store_dir("list");
    record_history(&dir).await;
    let out = stackflow(&dir, &["state", "list", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let app = &v["stacks"][0];
    assert_eq!(app["stack"], "app");
    assert_eq!(app["region"], "us-east-1");
    assert_eq!(app["resources"], 3);
    assert_eq!(app["lastRun"], "d2");
    assert_eq!(app["lastRunStatus"], "Failed");
    assert_eq!(app["lockedBy"], "tester@host");
    let out = stackflow(&dir, &["state", "list"]);
    let listed = text(&out.stdout);
    assert!(
        listed.contains("app") && listed.contains("Failed") && listed.contains("tester@host"),
        "{listed}"
    );
}

#[tokio::test]
async fn events_follow_prints_what_is_appended_after_it_started() {
    use std::io::{BufRead, BufReader};
    let dir = store_dir("follow");
    record_history(&dir).await;
    let mut child = Command::new(env!("CARGO_BIN_EXE_stackflow"))
        .args(["events", "--stack", "app", "--follow", "--store"])
        .arg(format!("local:{}", dir.display()))
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("runs");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // The history first (7 events), then what comes later.
    for _ in 0..7 {
        lines.next().expect("a line").unwrap();
    }
    let store = SqliteStore::open(dir.join("events.db")).unwrap();
    let stream = StreamId::new("us-east-1", "app");
    let broken = Event::LockBroken {
        previous: Holder {
            deploy_id: "d2".into(),
            who: "tester@host".into(),
            since: "2026-11-29T12:00:00.000Z".into(),
            operation: "deploy".into(),
            expires: None,
            fenced: None,
        },
        by: "someone".into(),
    };
    store
        .append(
            &stream,
            &NewEvent::new("later", broken),
            &Precondition::None,
        )
        .await
        .unwrap();
    let next = lines.next().expect("the appended event").unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(next.starts_with("     8"), "{next}");
    assert!(next.contains("LockBroken"), "{next}");
}
