//! `stackflow worker` and `deploy|destroy|rollback --remote`, as a user runs them: one
//! process installs the engine's state machines (pointed at its activities) and runs
//! their tasks; other processes start executions and follow them. Both share a local
//! store here; in production they share a DynamoDB table.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use stackflow_tests::{Emulator, unique_name};

struct Cli {
    dir: PathBuf,
    endpoint: String,
    bucket: String,
    engine: String,
}

impl Cli {
    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_stackflow"));
        c.arg("--endpoint-url")
            .arg(&self.endpoint)
            .arg("--store")
            .arg(format!("local:{}", self.dir.join("store").display()))
            .arg("--store-bucket")
            .arg(&self.bucket)
            .args(args)
            .current_dir(&self.dir)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.dir)
            .env("USER", "tester")
            .env("STACKFLOW_ENGINE", &self.engine)
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("STACKFLOW_YES", "1")
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("AWS_REGION", "us-east-1");
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("stackflow runs")
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn write(dir: &Path, name: &str, body: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    path.display().to_string()
}

/// Kills the worker when the test ends, however it ends.
struct Worker(Child);

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_deploy_failure_rollback_and_destroy_run_on_a_worker() {
    let emu = Emulator::shared().await;
    let s3 = emu.s3().await;
    let bucket = unique_name("sf-remote").to_lowercase();
    s3.create_bucket().bucket(&bucket).send().await.unwrap();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("remote")
        .join(unique_name("t"));
    std::fs::create_dir_all(&dir).unwrap();
    let cli = Cli {
        dir: dir.clone(),
        endpoint: emu.endpoint().to_string(),
        bucket,
        engine: unique_name("eng"),
    };

    // Without a bucket, --remote says what it needs.
    let out = Command::new(env!("CARGO_BIN_EXE_stackflow"))
        .args(["--endpoint-url", emu.endpoint(), "--store"])
        .arg(format!("local:{}", dir.join("other").display()))
        .args(["deploy", "--remote", "nothing.yaml"])
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("STACKFLOW_YES", "1")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1")
        .env_remove("STACKFLOW_BUCKET")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));

    let log = std::fs::File::create(dir.join("worker.log")).unwrap();
    let _worker = Worker(
        cli.command(&[
            "worker",
            "--create-state-machines",
            "arn:aws:iam::123456789012:role/stackflow-engine",
        ])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap(),
    );
    // The state machines exist once the worker says it polls.
    for _ in 0..200 {
        if std::fs::read_to_string(dir.join("worker.log")).is_ok_and(|l| l.contains("polling")) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let stack = unique_name("Remote");
    let good = write(
        &dir,
        "good.yaml",
        "Resources:\n  Q:\n    Type: AWS::SQS::Queue\n  P:\n    Type: AWS::SSM::Parameter\n    Properties:\n      Type: String\n      Value: !GetAtt Q.Arn\nOutputs:\n  Url:\n    Value: !Ref Q\n",
    );
    let out = cli.run(&["deploy", "--remote", &good, "--stack", &stack]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("succeeded") && stdout.contains("Url = http"),
        "{stdout}"
    );
    assert!(
        text(&out.stderr).contains("ResourceCreated"),
        "the events are followed"
    );

    // The same again: no changes.
    let out = cli.run(&["deploy", "--remote", &good, "--stack", &stack]);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        text(&out.stdout).contains("no changes"),
        "{}",
        text(&out.stdout)
    );

    // --json with --remote: the result is a JSON line, camelCase, progress on stderr.
    let out = cli.run(&["deploy", "--remote", &good, "--stack", &stack, "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let line: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", text(&out.stdout)));
    assert_eq!(line["stack"], stack.as_str(), "{line}");
    assert_eq!(line["status"], "SUCCEEDED", "{line}");
    assert_eq!(line["noChanges"], true, "{line}");
    assert!(
        line["execution"]
            .as_str()
            .is_some_and(|e| e.starts_with("arn:aws:states:"))
    );

    // A failing deploy with --no-rollback fails the execution; rollback --remote undoes it.
    let bad = write(
        &dir,
        "bad.yaml",
        "Resources:\n  Q:\n    Type: AWS::SQS::Queue\n  P:\n    Type: AWS::SSM::Parameter\n    Properties:\n      Type: String\n      Value: !GetAtt Q.Arn\n  Extra:\n    Type: AWS::SQS::Queue\n  Bad:\n    Type: AWS::SQS::Queue\n    DependsOn: Extra\n    Properties:\n      VisibilityTimeout: 999999\n",
    );
    let out = cli.run(&[
        "deploy",
        "--remote",
        &bad,
        "--stack",
        &stack,
        "--no-rollback",
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("Stackflow.DeployFailed"), "{stdout}");
    let state = text(&cli.run(&["state", "show", "--stack", &stack]).stdout);
    assert!(state.contains("Extra"), "kept until rollback: {state}");
    let out = cli.run(&["rollback", "--remote", "--stack", &stack]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let state = text(&cli.run(&["state", "show", "--stack", &stack]).stdout);
    assert!(!state.contains("Extra"), "rolled back: {state}");

    // --no-follow prints the execution and returns.
    let out = cli.run(&["destroy", "--remote", "--no-follow", "--stack", &stack]);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        text(&out.stdout).starts_with("arn:aws:states:"),
        "{}",
        text(&out.stdout)
    );
    for _ in 0..200 {
        let state = text(&cli.run(&["state", "show", "--stack", &stack]).stdout);
        if state.contains("Resources (0)") {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the destroy execution did not empty the stack");
}
