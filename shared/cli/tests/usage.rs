//! Issue 27 item 5: a command line that does not parse exits 64 (sysexits' `EX_USAGE`),
//! apart from the codes runs end with (1 failed, 2 partial or not compared, 3 locked);
//! `--help` and `--version` exit 0.

use std::process::Command;

fn stackflow(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_stackflow"))
        .args(args)
        .env_clear()
        .output()
        .expect("stackflow runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_bad_command_line_exits_64_and_help_exits_0() {
    let (code, _, err) = stackflow(&["deploy", "t.yaml", "--no-such-flag"]);
    assert_eq!(code, Some(64), "{err}");
    assert!(err.contains("--no-such-flag"), "{err}");
    let (code, _, err) = stackflow(&["no-such-command"]);
    assert_eq!(code, Some(64), "{err}");
    let (code, out, _) = stackflow(&["--help"]);
    assert_eq!(code, Some(0));
    assert!(out.contains("deploy"), "{out}");
    let (code, out, _) = stackflow(&["--version"]);
    assert_eq!(code, Some(0));
    assert!(out.contains("stackflow"), "{out}");
}

/// Issue 27 item 5: a deploy (and every command that acts on AWS) against an endpoint
/// nobody answers at stops before anything, naming the endpoint in words (no SDK dump),
/// and leaves no store behind; `diff` goes on offline.
#[test]
fn an_endpoint_nobody_answers_at_stops_a_deploy_before_anything() {
    let dir = std::env::temp_dir().join(format!("stackflow-unreachable-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let template = dir.join("t.yaml");
    std::fs::write(&template, "Resources:\n  Q:\n    Type: AWS::SQS::Queue\n").unwrap();
    let run = |command: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_stackflow"))
            .args([command, template.to_str().unwrap()])
            .current_dir(&dir)
            .env_clear()
            .env("HOME", &dir)
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("AWS_REGION", "eu-west-1")
            // Port 9 (discard) on loopback: nothing listens.
            .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
            .output()
            .expect("stackflow runs");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = run("deploy");
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(
            "cannot reach http://127.0.0.1:9 (the endpoint refused the connection), so nothing \
             was done: check --endpoint-url (AWS_ENDPOINT_URL), --region and the network"
        ),
        "{err}"
    );
    assert!(!err.contains("DispatchFailure"), "{err}");
    assert!(!dir.join(".stackflow").exists(), "no store was made");
    let (code, err) = run("diff");
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("the AWS account is unknown (the endpoint refused the connection)"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).ok();
}
