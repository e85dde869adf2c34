//! `stackflow scrub` against a local store that an older writer left with a `NoEcho` value
//! in plaintext: `--dry-run --fail` exits 1 and names every place without the value, a
//! repair with `--rewrite` leaves nothing, and a clean stack exits 0.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};
use stackflow_events::event::{Event, NewEvent, ResourceRecord};
use stackflow_events::sqlite::SqliteStore;
use stackflow_events::{EventStore, Precondition, StreamId};

const SECRET: &str = "hunter2-Sw0rdfish";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("stackflow-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn stackflow(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stackflow"))
        .args(args)
        .arg("--store")
        .arg(format!("local:{}", dir.join("store").display()))
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

/// A template with a `NoEcho` parameter the queue's tag takes.
fn template(dir: &Path) -> String {
    let path = dir.join("app.json");
    let t = json!({
        "Parameters": {
            "DbPassword": {"Type": "String", "NoEcho": true},
            "Env": {"Type": "String", "Default": "dev"},
        },
        "Resources": {"Queue": {"Type": "AWS::SQS::Queue", "Properties": {
            "Tags": [{"Key": "pw", "Value": {"Ref": "DbPassword"}}],
        }}},
    });
    std::fs::write(&path, t.to_string()).unwrap();
    path.display().to_string()
}

/// A deploy of stack `stack` as an older writer recorded it: the `NoEcho` value in the
/// parameters and in the queue's properties (or `****` when `leak` is false).
async fn record(dir: &Path, stack: &str, leak: bool) {
    let store = SqliteStore::open(dir.join("store").join("events.db")).unwrap();
    let stream = StreamId::new("us-east-1", stack);
    let value = if leak { SECRET } else { "****" };
    let queue: ResourceRecord = serde_json::from_value(json!({
        "logical_id": "Queue", "type": "AWS::SQS::Queue", "physical_id": "http://q/app",
        "properties": {"Tags": [{"Key": "pw", "Value": value}]},
        "attributes": {"Arn": "arn:aws:sqs:us-east-1:123456789012:app"},
        "provider": "sdk",
    }))
    .unwrap();
    let events = [
        Event::DeployStarted {
            deploy_id: "d1".into(),
            who: "old@writer".into(),
            template_digest: "t".into(),
            parameters: [
                ("DbPassword".to_string(), json!(value)),
                ("Env".to_string(), json!("dev")),
            ]
            .into(),
            no_rollback: false,
            stack_id: None,
        },
        Event::ResourceCreated {
            deploy_id: "d1".into(),
            resource: queue,
            replaces: None,
            baseline: None,
        },
        Event::DeployCompleted {
            deploy_id: "d1".into(),
            outputs: Default::default(),
            exports: Default::default(),
            imports: vec![],
        },
    ];
    for (i, e) in events.into_iter().enumerate() {
        let new = NewEvent::new(format!("k{i}"), e);
        store
            .append(&stream, &new, &Precondition::None)
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn a_dry_run_fails_on_plaintext_and_passes_once_repaired() {
    let dir = temp_dir("scrub");
    record(&dir, "app", true).await;
    let t = template(&dir);
    let given = format!("DbPassword={SECRET}");
    let check = ["scrub", &t, "--stack", "app", "--parameter", &given];

    let out = stackflow(&dir, &[&check[..], &["--dry-run", "--fail"]].concat());
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    assert!(!stdout.contains(SECRET) && !text(&out.stderr).contains(SECRET));
    assert!(
        stdout
            .contains("event 1 DeployStarted - /parameters/DbPassword: parameter DbPassword (raw)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("event 2 ResourceCreated Queue /resource/properties/Tags/0/Value"),
        "{stdout}"
    );
    assert!(stdout.contains("append-only"), "{stdout}");

    let out = stackflow(&dir, &[&check[..], &["--dry-run", "--json"]].concat());
    assert_eq!(
        out.status.code(),
        Some(0),
        "without --fail: {}",
        text(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["clean"], json!(false));
    assert_eq!(report["unrepaired"], json!([1, 2]));
    assert_eq!(report["searched"], json!(["parameter DbPassword"]));
    assert!(!text(&out.stdout).contains(SECRET));

    let out = stackflow(&dir, &[&check[..], &["--rewrite"]].concat());
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("Rewrote the stored bodies of events 1, 2"),
        "{stdout}"
    );
    assert!(!stdout.contains(SECRET));

    let out = stackflow(&dir, &[&check[..], &["--dry-run", "--fail"]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    assert!(text(&out.stdout).contains("No plaintext found."));
    let out = stackflow(&dir, &["state", "show", "--stack", "app", "--json"]);
    let state: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(state["parameters"]["DbPassword"], json!("****"));
    let bytes = std::fs::read(dir.join("store").join("events.db")).unwrap();
    assert!(!bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()));
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_clean_stack_passes_and_mistakes_are_refused_without_the_value() {
    let dir = temp_dir("scrub-clean");
    record(&dir, "tidy", false).await;
    let t = template(&dir);
    let given = format!("DbPassword={SECRET}");
    let out = stackflow(
        &dir,
        &[
            "scrub",
            &t,
            "--stack",
            "tidy",
            "--parameter",
            &given,
            "--dry-run",
            "--fail",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(text(&out.stdout).contains("No plaintext found."));

    // Only NoEcho parameters are secrets.
    let out = stackflow(
        &dir,
        &[
            "scrub",
            &t,
            "--stack",
            "tidy",
            "--parameter",
            "Env=prod-secret",
            "--dry-run",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("not NoEcho") && !stderr.contains("prod-secret"),
        "{stderr}"
    );
    let out = stackflow(
        &dir,
        &["scrub", "--stack", "tidy", "--dry-run", "--rewrite"],
    );
    assert_eq!(
        out.status.code(),
        Some(64),
        "--dry-run and --rewrite conflict: a usage error"
    );

    let out = stackflow(&dir, &["scrub", "--help"]);
    let help = text(&out.stdout);
    assert!(out.status.success());
    for flag in [
        "--dry-run",
        "--fail",
        "--rewrite",
        "--json",
        "--parameter",
        "append-only",
    ] {
        assert!(help.contains(flag), "--help mentions {flag}: {help}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
