//! Custom resources whose `ServiceToken` is a Lambda function, on the emulator with the
//! function's code running (the container stand-in): the request is sent synchronously
//! (`RequestResponse`); an answer written before the handler returns is read at once, one
//! written after it returned (the provider framework's pattern) is waited for; a handler
//! that throws without answering fails the resource at once with its error and the end of
//! its log, the `ResponseURL`'s signature never in it; on delete, a `FAILED` answer skips
//! the resource and a missing function abandons it (as the reference tool does), while on
//! create a missing function is an error.

use std::time::{Duration, Instant};

use aws_sdk_lambda::types::Runtime;
use serde_json::{Value, json};
use stackflow_providers::custom::{CustomResourceProvider, PollPolicy};
use stackflow_providers::error::ProviderError;
use stackflow_providers::provider::{Deleted, Properties, Provider, ResourceRequest};
use stackflow_tests::lambda::{FunctionSpec, create_function, zip_files};
use stackflow_tests::{Emulator, unique_name};

/// A handler driven by its properties: `Mode` = `answer` (SUCCESS before returning, or
/// FAILED when `Fail` names the request type), `later` (returns, answers 2 s later),
/// `throw` (logs its event and throws without answering).
const HANDLER: &str = r#"
const https = require('https');
function answer(event, status, data) {
  const body = JSON.stringify({ Status: status, Reason: status === 'FAILED' ? 'refused by the handler' : 'ok',
    PhysicalResourceId: 'thing-' + event.ResourceProperties.Name, StackId: event.StackId,
    RequestId: event.RequestId, LogicalResourceId: event.LogicalResourceId, Data: data });
  const url = new URL(event.ResponseURL);
  return new Promise((resolve, reject) => {
    const req = https.request({ hostname: url.hostname, path: url.pathname + url.search, method: 'PUT',
      headers: { 'content-type': '', 'content-length': Buffer.byteLength(body) } },
      (res) => { res.resume(); res.statusCode < 400 ? resolve() : reject(new Error('HTTP ' + res.statusCode)); });
    req.on('error', reject);
    req.end(body);
  });
}
exports.handler = async (event) => {
  const p = event.ResourceProperties;
  if (p.Mode === 'throw') {
    console.log('got', JSON.stringify(event));
    throw new Error('cannot make ' + p.Name);
  }
  const status = p.Fail === event.RequestType ? 'FAILED' : 'SUCCESS';
  if (p.Mode === 'later') {
    setTimeout(() => answer(event, status, { Echo: p.Name, Late: 'yes' }), 2000);
    return;
  }
  await answer(event, status, { Echo: p.Name });
};
"#;

fn props(v: Value) -> Properties {
    v.as_object().unwrap().clone()
}

fn request(stack: &str, id: &str, properties: Value) -> ResourceRequest {
    let mut r = ResourceRequest::new(stack, id, "Custom::Thing", props(properties));
    r.token = unique_name("token");
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lambda_service_tokens_are_invoked_synchronously() {
    let emu = Emulator::shared().await;
    let config = emu.sdk_config().await;
    let s3 = emu.s3().await;
    let bucket = unique_name("responses").to_lowercase();
    s3.create_bucket().bucket(&bucket).send().await.unwrap();
    let lambda = aws_sdk_lambda::Client::new(&config);
    let name = unique_name("handler");
    let spec = FunctionSpec {
        architecture: None,
        name: &name,
        runtime: Runtime::Nodejs22x,
        handler: "index.handler",
        zip: zip_files(&[("index.js", HANDLER.as_bytes())]),
        timeout: 30,
        env: vec![],
    };
    let token = create_function(&lambda, spec).await;
    let provider = CustomResourceProvider::from_config(&config, &bucket).with_poll(PollPolicy {
        initial: Duration::from_millis(100),
        factor: 1.5,
        max: Duration::from_millis(500),
        timeout: Duration::from_secs(120),
    });
    let stack = unique_name("stack");

    // Answered before the handler returned.
    let created = provider
        .create(&request(
            &stack,
            "Now",
            json!({"ServiceToken": token, "Name": "now", "Mode": "answer"}),
        ))
        .await
        .expect("create");
    assert_eq!(created.physical_id, "thing-now");
    assert_eq!(created.attributes.get("Echo"), Some(&json!("now")));

    // Answered after the handler returned: waited for.
    let later = provider
        .create(&request(
            &stack,
            "Later",
            json!({"ServiceToken": token, "Name": "later", "Mode": "later"}),
        ))
        .await
        .expect("create answered later");
    assert_eq!(later.attributes.get("Late"), Some(&json!("yes")));

    // Thrown without answering: fails at once, with the error and the log's end.
    let started = Instant::now();
    let thrown = provider
        .create(&request(
            &stack,
            "Throws",
            json!({"ServiceToken": token, "Name": "boom", "Mode": "throw"}),
        ))
        .await;
    let took = started.elapsed();
    let message = match thrown {
        Err(ProviderError::Other(m)) => m,
        other => panic!("{other:?}"),
    };
    assert!(
        took < Duration::from_secs(20),
        "failed after {took:?}, not at once"
    );
    assert!(
        message.contains("without answering: Error: cannot make boom"),
        "{message}"
    );
    assert!(message.contains("the end of its log"), "{message}");
    assert!(
        message.contains("\"LogicalResourceId\":\"Throws\""),
        "the logged event: {message}"
    );
    assert!(!message.contains("X-Amz-Signature="), "{message}");
    assert!(!message.contains("X-Amz-Credential="), "{message}");

    // Delete: SUCCESS, FAILED (skipped), and with the function gone (abandoned).
    let mut delete = request(
        &stack,
        "Now",
        json!({"ServiceToken": token, "Name": "now", "Mode": "answer"}),
    );
    delete.physical_id = Some(created.physical_id.clone());
    assert_eq!(provider.delete(&delete).await.unwrap(), Deleted::Done);
    let mut refused = request(
        &stack,
        "Refuses",
        json!({"ServiceToken": token, "Name": "kept", "Mode": "answer", "Fail": "Delete"}),
    );
    refused.physical_id = Some("thing-kept".into());
    match provider.delete(&refused).await.unwrap() {
        Deleted::Skipped { reason } => {
            assert!(
                reason.contains("FAILED for Delete: refused by the handler"),
                "{reason}"
            )
        }
        other => panic!("{other:?}"),
    }
    lambda
        .delete_function()
        .function_name(&name)
        .send()
        .await
        .unwrap();
    let mut orphan = request(&stack, "Now", json!({"ServiceToken": token, "Name": "now"}));
    orphan.physical_id = Some("thing-now".into());
    match provider.delete(&orphan).await.unwrap() {
        Deleted::Abandoned { reason } => {
            assert!(
                reason.contains(&format!("the ServiceToken {token} does not exist")),
                "{reason}"
            )
        }
        other => panic!("{other:?}"),
    }
    let missing = provider
        .create(&request(
            &stack,
            "Gone",
            json!({"ServiceToken": token, "Name": "gone"}),
        ))
        .await;
    assert!(
        matches!(&missing, Err(ProviderError::InvalidRequest(m)) if m.contains("does not exist")),
        "{missing:?}"
    );
}

/// A handler that logs its event (a `NoEcho` parameter's value in its properties) and
/// throws with the value in its error: the deploy fails at once quoting the error and the
/// log, and the value reaches neither the store, nor the output, nor the failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_handlers_log_never_records_a_secret() {
    use stackflow_tests::cli::Cli;
    use stackflow_tests::secret_scan::{Scanner, plaintext};
    let emu = Emulator::shared().await;
    let secret = plaintext("password");
    let dir = std::env::temp_dir().join(unique_name("crsecret"));
    std::fs::create_dir_all(&dir).unwrap();
    let code = "exports.handler = async (event) => { console.log('event', JSON.stringify(event)); \
                throw new Error('refused ' + event.ResourceProperties.Password); };";
    let template = json!({
        "Parameters": {"Secret": {"Type": "String", "NoEcho": true}},
        "Resources": {
            "Role": {"Type": "AWS::IAM::Role", "Properties": {"AssumeRolePolicyDocument": {
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
                    "Principal": {"Service": "lambda.amazonaws.com"}}]}}},
            "Handler": {"Type": "AWS::Lambda::Function", "Properties": {
                "Runtime": "nodejs22.x", "Handler": "index.handler", "Timeout": 30,
                "Role": {"Fn::GetAtt": ["Role", "Arn"]}, "Code": {"ZipFile": code}}},
            "Thing": {"Type": "Custom::Thing", "Properties": {
                "ServiceToken": {"Fn::GetAtt": ["Handler", "Arn"]},
                "Password": {"Ref": "Secret"}}}
        }
    });
    let path = dir.join("secret.json");
    std::fs::write(&path, template.to_string()).unwrap();
    let cli = Cli {
        dir: dir.clone(),
        endpoint: emu.endpoint().to_string(),
        store: format!("local:{}", dir.join("store").display()),
        bucket: None,
        engine: None,
    };
    let started = Instant::now();
    let run = cli.run(&[
        "deploy",
        &path.display().to_string(),
        "--stack",
        &unique_name("CrSecret"),
        "--parameter",
        &format!("Secret={secret}"),
    ]);
    let took = started.elapsed();
    assert_eq!(run.code, Some(1), "{}", run.describe());
    assert!(
        took < Duration::from_secs(60),
        "the failure came after {took:?}"
    );
    let mut scanner = Scanner::new([("password", secret.as_str())]);
    assert!(
        run.stdout.contains("without answering: Error: refused"),
        "{}",
        scanner.redacted(&run.describe())
    );
    assert!(
        run.stdout.contains("the end of its log"),
        "{}",
        scanner.redacted(&run.stdout)
    );
    scanner.scan("stdout", run.stdout.as_bytes());
    scanner.scan("stderr", run.stderr.as_bytes());
    scanner.scan_dir(&dir.join("store")).unwrap();
    assert!(scanner.hits().is_empty(), "{}", scanner.report());
}
