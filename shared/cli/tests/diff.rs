//! `stackflow diff` as a user runs it. Offline: the AWS endpoint is a closed loopback port,
//! so the account id is unknown and the plan says so.

use std::path::PathBuf;
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn stackflow(args: &[&str]) -> Output {
    stackflow_in(&root(), args)
}

/// `stackflow ARGS` run in `dir`, offline.
fn stackflow_in(dir: &std::path::Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stackflow"))
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", std::env::temp_dir())
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("STACKFLOW_YES", "1")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "eu-west-1")
        // Port 9 (discard) on loopback: nothing listens, the call fails at once.
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
        .output()
        .expect("runs")
}

/// `stackflow diff` of the template `yaml`, written to `<stem>.yaml` in a directory of its
/// own (removed after), with `args` after the file.
fn diff_of(stem: &str, yaml: &str, args: &[&str]) -> Output {
    let dir = std::env::temp_dir().join(format!("stackflow-{stem}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{stem}.yaml"));
    std::fs::write(&file, yaml).unwrap();
    let mut all = vec!["diff", file.to_str().unwrap()];
    all.extend_from_slice(args);
    let out = stackflow(&all);
    std::fs::remove_dir_all(&dir).ok();
    out
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).to_string()
}

#[test]
fn diff_of_a_new_stack_lists_every_resource_as_a_create() {
    let out = stackflow(&["diff", "tests/fixtures/sample/app.yaml"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    insta::assert_snapshot!(text(&out.stdout));
    assert!(text(&out.stderr).contains("the AWS account is unknown"));
}

#[test]
fn parameters_and_conditions_change_the_plan() {
    let out = stackflow(&[
        "diff",
        "tests/fixtures/sample/app.yaml",
        "--parameter",
        "Env=prod",
        "--stack",
        "shop",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("Stack shop"), "{stdout}");
    assert!(
        stdout.contains("+ AuditQueue (AWS::SQS::Queue) create"),
        "{stdout}"
    );
    assert!(stdout.contains("VisibilityTimeout: 300"), "{stdout}");
    assert!(
        stdout.contains("Name: /shop/prod/orders-queue-url"),
        "{stdout}"
    );
}

#[test]
fn fail_makes_a_non_empty_diff_exit_1_and_json_is_machine_readable() {
    let out = stackflow(&[
        "diff",
        "tests/fixtures/corpus/replacement-v1",
        "--fail",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let stack = &v["stacks"][0];
    assert_eq!(stack["stack"], "ReplacementStack");
    assert_eq!(stack["resources"].as_array().unwrap().len(), 8);
    assert!(
        stack["resources"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["action"] == "create")
    );
}

#[test]
fn errors_name_the_file_the_path_and_the_fix() {
    let out = stackflow(&[
        "diff",
        "tests/fixtures/sample/app.yaml",
        "--parameter",
        "Env=qa",
    ]);
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!("bad_parameter", text(&out.stderr));

    let out = stackflow(&["diff", "tests/fixtures/corpus/language-extensions"]);
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!("unsupported_transform", text(&out.stderr));

    let out = stackflow(&["diff", "does/not/exist.yaml"]);
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!("missing_file", text(&out.stderr));

    let out = stackflow(&[
        "diff",
        "tests/fixtures/corpus/cross-stack-export-import",
        "--stack",
        "Nope",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("has ExportProducerStack, ImportConsumerStack"));
}

#[test]
fn every_stack_of_a_cloud_assembly_in_order() {
    let out = stackflow(&["diff", "tests/fixtures/corpus/cross-stack-export-import"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let producer = stdout.find("Stack ExportProducerStack").expect("producer");
    let consumer = stdout.find("Stack ImportConsumerStack").expect("consumer");
    assert!(producer < consumer);
    // The export does not exist yet: known after deploy, not an error.
    assert!(stdout.contains("known after deploy: export"), "{stdout}");
}

#[test]
fn help_lists_only_what_works() {
    let out = stackflow(&["--help"]);
    assert!(out.status.success());
    let help = text(&out.stdout);
    for built in [
        "deploy",
        "diff",
        "destroy",
        "rollback",
        "state",
        "events",
        "unlock",
        "import",
        "drift",
        "bootstrap",
        "scrub",
        "worker",
        "init",
    ] {
        assert!(
            help.contains(&format!("\n  {built} ")),
            "{built} missing: {help}"
        );
    }
    let out = stackflow(&["--version"]);
    assert_eq!(
        text(&out.stdout).trim(),
        format!("stackflow {}", env!("CARGO_PKG_VERSION"))
    );
}

/// Issue 27 item 5: a misspelled type or property is named, with what was meant, before any
/// AWS call, and every such problem of the template at once.
#[test]
fn misspelled_types_and_properties_are_all_named_with_what_was_meant() {
    let out = diff_of(
        "typos",
        "Resources:\n\
         \x20 Alerts:\n\
         \x20   Type: AWS::SNS::Topik\n\
         \x20 Orders:\n\
         \x20   Type: AWS::SQS::Queue\n\
         \x20   Properties:\n\
         \x20     VisibilityTimout: 30\n\
         \x20     Colour: blue\n\
         \x20     QueueName: orders\n\
         \x20 Hook:\n\
         \x20   Type: Custom::Anything\n\
         \x20   Properties:\n\
         \x20     ServiceToken: arn:aws:lambda:eu-west-1:123456789012:function:f\n\
         \x20     Whatever: 1\n",
        &["--stack", "typos", "--fail"],
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("A deploy of typos would stop before changing anything:"),
        "{stdout}"
    );
    for line in [
        "Resources.Alerts: no provider can handle AWS::SNS::Topik: it has no SDK provider and \
         Cloud Control does not know it (did you mean `AWS::SNS::Topic`?)",
        "Resources.Orders.Properties.VisibilityTimout: AWS::SQS::Queue has no property \
         VisibilityTimout (did you mean `VisibilityTimeout`?)",
        "Resources.Orders.Properties.Colour: AWS::SQS::Queue has no property Colour",
    ] {
        assert!(
            stdout.contains(&format!("  - {line}\n")),
            "{line}\n{stdout}"
        );
    }
    // A custom resource takes any property; a known property is not named.
    assert!(!stdout.contains("no property Whatever"), "{stdout}");
    assert!(!stdout.contains("no property QueueName"), "{stdout}");
}

/// Issue 27 item 5: misspelled names in `Ref`, `Fn::GetAtt` and `Fn::Sub` are all listed
/// in one run, each with its path and what was meant, with the misspelled properties the
/// pre-flight check would name once they are fixed; nothing is planned.
#[test]
fn misspelled_references_are_all_listed_in_one_run() {
    let out = diff_of(
        "refs",
        "Resources:\n\
         \x20 Orders:\n\
         \x20   Type: AWS::SQS::Queue\n\
         \x20   Properties:\n\
         \x20     VisibilityTimout: 30\n\
         \x20 Alerts:\n\
         \x20   Type: AWS::SNS::Topic\n\
         \x20   Properties:\n\
         \x20     DisplayName: !Ref Order\n\
         \x20 Param:\n\
         \x20   Type: AWS::SSM::Parameter\n\
         \x20   Properties:\n\
         \x20     Type: String\n\
         \x20     Value: !GetAtt Orders.Arm\n\
         Outputs:\n\
         \x20 Url:\n\
         \x20   Value: !Sub https://${Alert}.example\n",
        &["--stack", "refs"],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}{stderr}", text(&out.stdout));
    assert!(stderr.contains("4 problems:"), "{stderr}");
    for line in [
        "Resources.Alerts.Properties.DisplayName.Ref: `Order` is not a parameter, a resource \
         or a pseudo parameter of this template (did you mean `Orders`?)",
        "Resources.Param.Properties.Value.Fn::GetAtt: `Orders` (AWS::SQS::Queue) has no \
         attribute `Arm` (did you mean `Arn`?)",
        "Outputs.Url.Value.Fn::Sub: ",
        "Resources.Orders.Properties.VisibilityTimout: AWS::SQS::Queue has no property \
         VisibilityTimout (did you mean `VisibilityTimeout`?)",
    ] {
        assert!(
            stderr.contains(&format!("\n  - {line}")),
            "{line}\n{stderr}"
        );
    }
    assert!(stderr.contains("(did you mean `Alerts`?)"), "{stderr}");
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
        let out = stackflow_in(&dir, &[command, template.to_str().unwrap()]);
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

#[test]
fn a_stack_pattern_takes_what_the_stacks_depend_on_unless_exclusively() {
    let assembly = "tests/fixtures/corpus/cross-stack-export-import";
    let stacks = |extra: &[&str]| -> Vec<String> {
        let mut args = vec!["diff", assembly, "--stack", "Import*", "--json"];
        args.extend_from_slice(extra);
        let out = stackflow(&args);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", text(&out.stderr)));
        let listed = v["stacks"].as_array().cloned().unwrap_or_default();
        listed
            .iter()
            .map(|s| s["stack"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    assert_eq!(stacks(&[]), ["ExportProducerStack", "ImportConsumerStack"]);
    assert_eq!(stacks(&["--exclusively"]), ["ImportConsumerStack"]);
    let out = stackflow(&["diff", assembly, "--stack", "Nope*"]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("no stack matching `Nope*`") && err.contains("ExportProducerStack"),
        "{err}"
    );
}
