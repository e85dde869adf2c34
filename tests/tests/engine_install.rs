//! `stackflow engine deploy | status | destroy` and `stackflow executions` on the emulator
//! (issue 16), through the stackflow binary: the engine's template (infra/engine.yaml)
//! deployed by the embedded engine with the real bootstrap (built for this host, run by
//! the container stand-in), a stack deployed through it (`--remote`: the functions the
//! template made run the tasks), an upgrade to another build of the bootstrap (the
//! functions get the new code; the table and the state machines are the same ones), and
//! a destroy that leaves only the table (then `--delete-table` removes it).
//! The install is `stackflow_tests::installed` (the CLI through a proxy that inlines S3
//! code: fakecloud keeps no code for a function created from an S3 object).

use std::path::Path;
use std::process::Command;

use stackflow_tests::installed::{ENGINE_BUCKET, Installed, SUITE_TYPES, json, policy_document};
use stackflow_tests::lambda::zip_files;
use stackflow_tests::{Emulator, unique_name};

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

    /// The environment variables of a function.
    async fn environment(&self, function: &str) -> std::collections::HashMap<String, String> {
        let got = self
            .lambda
            .get_function_configuration()
            .function_name(function)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{function}: {e}"));
        got.environment()
            .and_then(|e| e.variables())
            .cloned()
            .unwrap_or_default()
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

/// The provisioning role has the allowed services' actions and no managed policy but the
/// artifact guard; a template with another type is refused by Plan, naming it, and
/// nothing of it is made.
async fn the_engine_deploys_only_what_it_was_allowed(engine: &Installed, aws: &Aws) {
    let role = format!("{}-provisioning", engine.name);
    let policy = aws
        .iam
        .get_role_policy()
        .role_name(&role)
        .policy_name("deployable")
        .send()
        .await
        .expect("the scoped policy");
    let document = policy_document(policy.policy_document());
    for action in ["sns:*", "sqs:*", "ssm:*", "logs:*"] {
        assert!(document.contains(action), "{action}: {document}");
    }
    let attached = aws
        .iam
        .list_attached_role_policies()
        .role_name(&role)
        .send()
        .await
        .unwrap();
    let names: Vec<&str> = attached
        .attached_policies()
        .iter()
        .filter_map(|p| p.policy_name())
        .collect();
    assert_eq!(names, [format!("{}-artifact-guard", engine.name)]);

    let stack = unique_name("outside");
    let bucket = format!("{}-data", stack.to_lowercase().replace('_', "-"));
    let template = engine.dir.join(format!("{stack}.yaml"));
    std::fs::write(
        &template,
        format!(
            "Resources:\n  Note:\n    Type: AWS::SSM::Parameter\n    Properties:\n      Type: String\n      Value: allowed\n  Data:\n    Type: AWS::S3::Bucket\n    Properties:\n      BucketName: {bucket}\n"
        ),
    )
    .unwrap();
    let run = engine.run_remote(&template, &[]);
    assert_eq!(run.code, Some(1), "{}", run.describe());
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(
        said.contains("Resources.Data.Type AWS::S3::Bucket")
            && said.contains("this engine may not deploy"),
        "{}",
        run.describe()
    );
    assert!(!said.contains("Resources.Note"), "{}", run.describe());
    let s3 = Emulator::shared().await.s3().await;
    assert!(
        s3.head_bucket().bucket(&bucket).send().await.is_err(),
        "no bucket was made"
    );
    let state = engine
        .remote()
        .run(&["state", "show", "--stack", &stack, "--json"]);
    assert!(!state.stdout.contains("\"Note\""), "{}", state.describe());
}

/// A handler that answers with what its `ResponseURL` says of itself: how long it is
/// valid (`X-Amz-Expires`), never the URL.
const URL_HANDLER: &str = r#"
const https = require('https');
exports.handler = async (event) => {
  const url = new URL(event.ResponseURL);
  const body = JSON.stringify({ Status: 'SUCCESS', Reason: 'ok', PhysicalResourceId: 'url-check',
    StackId: event.StackId, RequestId: event.RequestId, LogicalResourceId: event.LogicalResourceId,
    Data: { Expires: url.searchParams.get('X-Amz-Expires') } });
  await new Promise((resolve, reject) => {
    const req = https.request({ hostname: url.hostname, path: url.pathname + url.search, method: 'PUT',
      headers: { 'content-type': '', 'content-length': Buffer.byteLength(body) } },
      (res) => { res.resume(); res.statusCode < 400 ? resolve() : reject(new Error('HTTP ' + res.statusCode)); });
    req.on('error', reject);
    req.end(body);
  });
};
"#;

/// The installed engine signs a custom resource's `ResponseURL` with a provisioning role
/// session made for it: the URL is valid for the handler's whole time to answer (50
/// minutes here, plus a margin, within the hour a chained role session lasts), not for
/// whatever the providers' own session has left. Read from the URL itself, by the handler.
async fn the_response_url_outlives_the_handlers_time(engine: &Installed, aws: &Aws) {
    let name = unique_name("urlcheck");
    let spec = stackflow_tests::lambda::FunctionSpec {
        architecture: None,
        name: &name,
        runtime: aws_sdk_lambda::types::Runtime::Nodejs22x,
        handler: "index.handler",
        zip: zip_files(&[("index.js", URL_HANDLER.as_bytes())]),
        timeout: 30,
        env: vec![],
    };
    let token = stackflow_tests::lambda::create_function(&aws.lambda, spec).await;
    let stack = unique_name("urlcheck");
    let template = engine.dir.join(format!("{stack}.json"));
    let body = serde_json::json!({
        "Resources": {"Check": {"Type": "Custom::UrlCheck",
            "Properties": {"ServiceToken": token, "ServiceTimeout": 3000}}},
        "Outputs": {"Expires": {"Value": {"Fn::GetAtt": ["Check", "Expires"]}}}
    });
    std::fs::write(&template, body.to_string()).unwrap();
    let run = engine.run_remote(&template, &["--json"]);
    assert_eq!(run.code, Some(0), "{}", run.describe());
    let out = json(&run);
    let expires: u64 = out["outputs"]["Expires"]
        .as_str()
        .unwrap_or_else(|| panic!("{out}"))
        .parse()
        .unwrap();
    // Asked: 3,000 s + 900 s; a session assumed from a role's session lasts at most an
    // hour, and the URL says no more than what signed it.
    assert!((3000..=3600).contains(&expires), "X-Amz-Expires {expires}");
    // The URL is a credential: no part of its signature is in the records.
    let remote = engine.remote();
    let log = remote.run(&["events", "--stack", &stack, "--json"]);
    let state = remote.run(&["state", "show", "--stack", &stack, "--json"]);
    for text in [&log.stdout, &state.stdout, &run.stdout, &run.stderr] {
        for part in [
            "X-Amz-Signature=",
            "X-Amz-Security-Token=",
            "X-Amz-Credential=",
        ] {
            assert!(!text.contains(part), "{part} written: {text}");
        }
    }
    assert!(log.stdout.contains("ResourceCreated"), "{}", log.describe());
}

async fn deploy_through_the_engine(engine: &Installed) -> String {
    let stack = unique_name("viaengine");
    let template = engine.dir.join(format!("{stack}.yaml"));
    std::fs::write(
        &template,
        "Resources:\n  Param:\n    Type: AWS::SSM::Parameter\n    Properties:\n      Type: String\n      Value: through-the-engine\n",
    )
    .unwrap();
    engine.deploy_remote(&template);
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
    let installed = Installed::install(emu, &[]).await;
    println!("engine deploy: {:.1} s", installed.took.as_secs_f64());
    let (cli, dir, v1) = (&installed.cli, &installed.dir, &installed.bootstrap);
    let engine = installed.name.as_str();
    let table = installed.table();
    // The next build: the same executable with one more file.
    let v2 = dir.join("v2.zip");
    let exe = unzip_bootstrap(v1);
    std::fs::write(&v2, zip_files(&[("bootstrap", &exe), ("VERSION", b"2")])).unwrap();

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
        assert_eq!(env["STACKFLOW_BUCKET"], ENGINE_BUCKET);
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
    let digest = format!("sha256:{}", sha256(&std::fs::read(v1).unwrap()));
    assert_eq!(
        status["installed"]["bootstrap"],
        digest.as_str(),
        "{status}"
    );
    assert_eq!(status["installed"]["table"], table.as_str());
    assert_eq!(status["executions"], serde_json::json!([]));

    // A stack deployed through it: the template's functions run the tasks.
    let started = std::time::Instant::now();
    let stack = deploy_through_the_engine(&installed).await;
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

    // What the operator allowed, and nothing else.
    the_engine_deploys_only_what_it_was_allowed(&installed, &aws).await;
    // A custom resource's answer URL lives as long as its handler may take.
    the_response_url_outlives_the_handlers_time(&installed, &aws).await;
    // Who may start a deploy: the installer, in the bucket's policy (its own statement).
    let s3 = emu.s3().await;
    let statement = format!("StackflowDeployers{}", engine.replace('-', ""));
    let policy = s3
        .get_bucket_policy()
        .bucket(ENGINE_BUCKET)
        .send()
        .await
        .expect("the engine bucket's policy")
        .policy
        .unwrap_or_default();
    assert!(policy.contains(&statement), "{policy}");
    assert!(
        policy.contains("deploy/*") && policy.contains("ArnNotLike"),
        "{policy}"
    );

    // The next build: the functions' code changes, nothing that holds data is replaced.
    // Its artifact's key already holds something else (written by someone with the
    // bucket's rights): it is read, found wrong and replaced, not reused.
    let v2_key = format!("assets/{}.zip", sha256(&std::fs::read(&v2).unwrap()));
    s3.put_object()
        .bucket(ENGINE_BUCKET)
        .key(&v2_key)
        .body(b"not the bootstrap".to_vec().into())
        .send()
        .await
        .unwrap();
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
    assert!(
        run.stderr.contains("): replaced") && run.stderr.contains("held other content"),
        "{}",
        run.describe()
    );
    let held = s3
        .get_object()
        .bucket(ENGINE_BUCKET)
        .key(&v2_key)
        .send()
        .await
        .unwrap()
        .body
        .collect()
        .await
        .unwrap()
        .into_bytes();
    assert_eq!(&held[..], &std::fs::read(&v2).unwrap()[..]);
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
    // The update named no types: it kept the last install's.
    assert_eq!(
        status["installed"]["allowedTypes"],
        serde_json::json!(SUITE_TYPES.split(',').collect::<Vec<_>>()),
        "{status}"
    );
    assert_eq!(
        aws.environment(&format!("{engine}-plan")).await["STACKFLOW_ALLOWED_TYPES"],
        SUITE_TYPES
    );
    // The stack deployed before is still recorded in the table.
    let remote = installed.remote();
    let state = remote.run(&["state", "show", "--stack", &stack, "--json"]);
    assert!(state.stdout.contains("Param"), "{}", state.describe());

    // Destroy: only the table stays.
    let run = installed.destroy(&[]);
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
    let policy = s3.get_bucket_policy().bucket(ENGINE_BUCKET).send().await;
    let left = policy.ok().and_then(|p| p.policy).unwrap_or_default();
    assert!(
        !left.contains(&statement),
        "its statement is taken out: {left}"
    );
    let status = cli.run(&["engine", "status", "--name", engine]);
    assert_eq!(status.code, Some(1), "{}", status.describe());
    assert!(status.stdout.contains("is not installed"));

    installed.destroy(&["--delete-table"]);
    assert_eq!(aws.table_created(&table).await, None);
}
