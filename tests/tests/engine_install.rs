//! `stackflow engine deploy | status | destroy` and `stackflow executions` on the emulator
//! (issue 16), through the stackflow binary: the engine's template (infra/engine.yaml)
//! deployed by the embedded engine with the real bootstrap (built for this host, run by
//! the container stand-in), a stack deployed through it (`--remote`: the functions the
//! template made run the tasks), an upgrade to another build of the bootstrap (the
//! functions get the new code; the table and the state machines are the same ones), and
//! a destroy that leaves only the table (then `--delete-table` removes it).
//! The CLI talks to the emulator through [`InlineS3Code`]: fakecloud keeps no code for a
//! function created from an S3 object.

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use stackflow_tests::cli::Cli;
use stackflow_tests::lambda::{InlineS3Code, engine_bootstrap_zip, zip_files};
use stackflow_tests::{Emulator, unique_name};

const BUCKET: &str = "stackflow-123456789012-us-east-1";

fn json(run: &stackflow_tests::cli::Run) -> Value {
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", run.describe()))
}

/// The bootstrap executable inside a zip.
fn unzip_bootstrap(zip: &Path) -> Vec<u8> {
    let out = Command::new("python3")
        .args([
            "-c",
            "import sys, zipfile; sys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read('bootstrap'))",
        ])
        .arg(zip)
        .output()
        .expect("python3 runs");
    assert!(out.status.success());
    out.stdout
}

fn sha256(bytes: &[u8]) -> String {
    let out = Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(bytes)?;
            c.wait_with_output()
        })
        .expect("sha256sum runs");
    String::from_utf8_lossy(&out.stdout)[..64].to_string()
}

struct Aws {
    lambda: aws_sdk_lambda::Client,
    sfn: aws_sdk_sfn::Client,
    dynamodb: aws_sdk_dynamodb::Client,
    iam: aws_sdk_iam::Client,
}

impl Aws {
    async fn code_sha(&self, function: &str) -> Option<String> {
        let got = self
            .lambda
            .get_function()
            .function_name(function)
            .send()
            .await
            .ok()?;
        got.configuration()?.code_sha256().map(str::to_string)
    }

    async fn machine_created(&self, engine: &str, op: &str) -> Option<i64> {
        let arn = format!("arn:aws:states:us-east-1:123456789012:stateMachine:{engine}-{op}");
        let d = self
            .sfn
            .describe_state_machine()
            .state_machine_arn(arn)
            .send()
            .await
            .ok()?;
        Some(d.creation_date().secs())
    }

    async fn table_created(&self, table: &str) -> Option<i64> {
        let d = self
            .dynamodb
            .describe_table()
            .table_name(table)
            .send()
            .await
            .ok()?;
        d.table()?.creation_date_time().map(|t| t.secs())
    }
}

/// An emulator-only step: fakecloud 0.51.0 matches a trust policy's role principal
/// (`"AWS": "arn:...:role/NAME"`) only against that exact ARN, never against the role's
/// sessions, which is what the engine's functions call as (AWS matches the sessions of a
/// role). So the test lets the engine's function sessions assume the provisioning role by
/// their session ARNs; the template keeps the trust AWS needs.
async fn emulator_trusts_role_sessions(iam: &aws_sdk_iam::Client, engine: &str) {
    let trust = serde_json::json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Principal": {"AWS": "*"},
            "Action": "sts:AssumeRole",
            "Condition": {"ArnLike": {
                "aws:PrincipalArn": format!("arn:aws:sts::*:assumed-role/{engine}-fn-*/*")
            }}
        }]
    });
    iam.update_assume_role_policy()
        .role_name(format!("{engine}-provisioning"))
        .policy_document(trust.to_string())
        .send()
        .await
        .expect("the provisioning role's trust updated");
}

async fn deploy_through_the_engine(cli: &Cli, engine: &str, dir: &Path) -> String {
    let stack = unique_name("viaengine");
    let template = dir.join(format!("{stack}.yaml"));
    std::fs::write(
        &template,
        "Resources:\n  Param:\n    Type: AWS::SSM::Parameter\n    Properties:\n      Type: String\n      Value: through-the-engine\n",
    )
    .unwrap();
    let remote = Cli {
        store: format!("dynamodb:{engine}-events"),
        bucket: Some(BUCKET.into()),
        ..cli.clone()
    };
    let run = remote.run(&[
        "deploy",
        template.to_str().unwrap(),
        "--remote",
        "--engine",
        engine,
    ]);
    assert_eq!(run.code, Some(0), "{}", run.describe());
    stack
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engine_installs_runs_upgrades_and_is_destroyed_keeping_its_table() {
    let emu = Emulator::shared().await;
    let config = emu.sdk_config().await;
    let aws = Aws {
        lambda: aws_sdk_lambda::Client::new(&config),
        sfn: aws_sdk_sfn::Client::new(&config),
        dynamodb: aws_sdk_dynamodb::Client::new(&config),
        iam: aws_sdk_iam::Client::new(&config),
    };
    let dir = std::env::temp_dir().join(unique_name("engine"));
    std::fs::create_dir_all(&dir).unwrap();
    let v1 = dir.join("v1.zip");
    let zip = tokio::task::spawn_blocking(engine_bootstrap_zip)
        .await
        .unwrap();
    std::fs::write(&v1, zip).unwrap();
    // The next build: the same executable with one more file.
    let v2 = dir.join("v2.zip");
    let exe = unzip_bootstrap(&v1);
    std::fs::write(&v2, zip_files(&[("bootstrap", &exe), ("VERSION", b"2")])).unwrap();
    let proxy = InlineS3Code::start(emu).await;
    let cli = Cli {
        dir: dir.clone(),
        endpoint: proxy.endpoint(),
        store: format!("local:{}", dir.join("store").display()),
        bucket: None,
        engine: None,
    };
    let engine = unique_name("e").to_lowercase().replace('_', "-");
    let engine = &engine[..engine.len().min(20)];
    let table = format!("{engine}-events");

    // Install.
    let started = std::time::Instant::now();
    let run = cli.run(&[
        "engine",
        "deploy",
        "--name",
        engine,
        "--bootstrap",
        v1.to_str().unwrap(),
        "--arch",
        "x86_64",
    ]);
    assert_eq!(run.code, Some(0), "{}", run.describe());
    println!("engine deploy: {:.1} s", started.elapsed().as_secs_f64());
    emulator_trusts_role_sessions(&aws.iam, engine).await;
    let first_code = aws
        .code_sha(&format!("{engine}-plan"))
        .await
        .expect("the Plan function");
    for task in stackflow_engine::tasks::TASK_NAMES {
        let f = aws
            .lambda
            .get_function()
            .function_name(format!("{engine}-{}", task.to_lowercase()))
            .send()
            .await
            .unwrap();
        let c = f.configuration().unwrap();
        assert_eq!(c.handler(), Some(*task));
        assert_eq!(c.timeout(), Some(900));
        let env = c.environment().unwrap().variables().unwrap();
        assert_eq!(env["STACKFLOW_TABLE"], table);
        assert_eq!(env["STACKFLOW_BUCKET"], BUCKET);
    }
    let machine_created = aws
        .machine_created(engine, "deploy")
        .await
        .expect("deploy machine");
    let definition = aws
        .sfn
        .describe_state_machine()
        .state_machine_arn(format!(
            "arn:aws:states:us-east-1:123456789012:stateMachine:{engine}-deploy"
        ))
        .send()
        .await
        .unwrap()
        .definition;
    assert!(
        definition.contains(&format!("function:{engine}-plan")),
        "{definition}"
    );
    assert!(!definition.contains("${Plan}"), "{definition}");
    let table_created = aws.table_created(&table).await.expect("the event table");
    let described = aws
        .dynamodb
        .describe_table()
        .table_name(&table)
        .send()
        .await
        .unwrap();
    let keys: Vec<(String, String)> = described
        .table()
        .unwrap()
        .key_schema()
        .iter()
        .map(|k| {
            (
                k.attribute_name().to_string(),
                k.key_type().as_str().to_string(),
            )
        })
        .collect();
    assert_eq!(
        keys,
        [
            ("pk".to_string(), "HASH".to_string()),
            ("sk".to_string(), "RANGE".to_string())
        ]
    );

    // Status right after the install.
    let status = json(&cli.run(&["engine", "status", "--name", engine, "--json"]));
    let digest = format!("sha256:{}", sha256(&std::fs::read(&v1).unwrap()));
    assert_eq!(
        status["installed"]["bootstrap"],
        digest.as_str(),
        "{status}"
    );
    assert_eq!(status["installed"]["table"], table.as_str());
    assert_eq!(status["executions"], serde_json::json!([]));

    // A stack deployed through it: the template's functions run the tasks.
    let started = std::time::Instant::now();
    let stack = deploy_through_the_engine(&cli, engine, &dir).await;
    println!(
        "deploy through the engine: {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let runs = json(&cli.run(&["executions", "--name", engine, "--stack", &stack, "--json"]));
    assert_eq!(runs.as_array().map(Vec::len), Some(1), "{runs}");
    assert_eq!(runs[0]["status"], "SUCCEEDED");
    assert_eq!(runs[0]["operation"], "deploy");
    assert!(runs[0]["durationSeconds"].as_f64().unwrap() > 0.0);
    let text = cli.run(&["engine", "status", "--name", engine]);
    assert!(
        text.stdout.contains("last executions:"),
        "{}",
        text.describe()
    );
    assert!(text.stdout.contains(&stack), "{}", text.describe());

    // The next build: the functions' code changes, nothing that holds data is replaced.
    let run = cli.run(&[
        "engine",
        "deploy",
        "--name",
        engine,
        "--bootstrap",
        v2.to_str().unwrap(),
        "--arch",
        "x86_64",
    ]);
    assert_eq!(run.code, Some(0), "{}", run.describe());
    let second_code = aws.code_sha(&format!("{engine}-plan")).await.unwrap();
    assert_ne!(
        first_code, second_code,
        "the Plan function has the new code"
    );
    assert_eq!(aws.table_created(&table).await, Some(table_created));
    assert_eq!(
        aws.machine_created(engine, "deploy").await,
        Some(machine_created)
    );
    let status = json(&cli.run(&["engine", "status", "--name", engine, "--json"]));
    let digest2 = format!("sha256:{}", sha256(&std::fs::read(&v2).unwrap()));
    assert_eq!(status["installed"]["bootstrap"], digest2.as_str());
    // The stack deployed before is still recorded in the table.
    let remote = Cli {
        store: format!("dynamodb:{table}"),
        bucket: Some(BUCKET.into()),
        ..cli.clone()
    };
    let state = remote.run(&["state", "show", "--stack", &stack, "--json"]);
    assert!(state.stdout.contains("Param"), "{}", state.describe());

    // Destroy: only the table stays.
    let run = cli.run(&["engine", "destroy", "--name", engine]);
    assert_eq!(run.code, Some(0), "{}", run.describe());
    assert!(
        run.stdout
            .contains(&format!("kept the event table {table}"))
    );
    assert_eq!(aws.code_sha(&format!("{engine}-plan")).await, None);
    assert_eq!(aws.machine_created(engine, "deploy").await, None);
    let role = aws
        .iam
        .get_role()
        .role_name(format!("{engine}-provisioning"))
        .send()
        .await;
    assert!(role.is_err(), "the provisioning role is deleted");
    assert_eq!(aws.table_created(&table).await, Some(table_created));
    let status = cli.run(&["engine", "status", "--name", engine]);
    assert_eq!(status.code, Some(1), "{}", status.describe());
    assert!(status.stdout.contains("is not installed"));

    let run = cli.run(&["engine", "destroy", "--name", engine, "--delete-table"]);
    assert_eq!(run.code, Some(0), "{}", run.describe());
    assert_eq!(aws.table_created(&table).await, None);
    let _ = std::fs::remove_dir_all(&dir);
}
