//! Lambda code runs on the emulator, through the container stand-in
//! (`tests/standin/container.py`): a `provided.al2023` bootstrap, a Node.js handler and a
//! Python handler answer `Invoke`; a handler's error comes back as `FunctionError` with
//! its type and the log tail; a process that exits mid-call answers `Runtime.ExitError`
//! and the next call starts a new one; a call past the function's timeout answers
//! `Sandbox.Timedout`; a Node.js handler reaches the emulator with the AWS SDK v3 and
//! with `https.request` to the emulator's host (as CDK's handlers answer a custom
//! resource). A cold start's REPORT line has its `Init Duration`.

use std::time::{Duration, Instant};

use aws_sdk_lambda::primitives::Blob;
use aws_sdk_lambda::types::{LogType, Runtime};
use aws_sdk_s3::presigning::PresigningConfig;
use base64::Engine as _;
use serde_json::{Value, json};
use stackflow_tests::lambda::{FunctionSpec, create_function, zip_files};
use stackflow_tests::{Emulator, unique_name};

struct Answer {
    payload: Value,
    function_error: Option<String>,
    log: String,
}

async fn invoke(lambda: &aws_sdk_lambda::Client, name: &str, event: Value) -> Answer {
    let out = lambda
        .invoke()
        .function_name(name)
        .log_type(LogType::Tail)
        .payload(Blob::new(event.to_string()))
        .send()
        .await
        .unwrap_or_else(|e| {
            panic!(
                "Invoke {name}: {}",
                aws_sdk_lambda::error::DisplayErrorContext(e)
            )
        });
    let log = out
        .log_result()
        .map(|l| {
            String::from_utf8_lossy(&base64::engine::general_purpose::STANDARD.decode(l).unwrap())
                .into_owned()
        })
        .unwrap_or_default();
    Answer {
        payload: serde_json::from_slice(out.payload().map(|p| p.as_ref()).unwrap_or(b"null"))
            .unwrap(),
        function_error: out.function_error().map(str::to_string),
        log,
    }
}

const NODE: &str = r#"
const https = require('https');
const { S3 } = require('@aws-sdk/client-s3');
exports.handler = async (event, context) => {
  console.log('node got', JSON.stringify(event));
  if (event.fail) throw new TypeError('node says no');
  if (event.exit) process.exit(7);
  if (event.sleep) await new Promise((r) => setTimeout(r, event.sleep));
  if (event.bucket) {
    const s3 = new S3({});
    await s3.putObject({ Bucket: event.bucket, Key: 'from-sdk', Body: 'sdk' });
    const url = new URL(event.url);
    const path = url.pathname + url.search;
    await new Promise((resolve, reject) => {
      const body = 'https';
      const req = https.request({ hostname: url.hostname, path, method: 'PUT',
        headers: { 'content-length': body.length } }, (res) => { res.resume(); res.statusCode < 400 ? resolve() : reject(new Error(`HTTP ${res.statusCode}`)); });
      req.on('error', reject);
      req.end(body);
    });
  }
  return { echo: event, requestId: context.awsRequestId, left: context.getRemainingTimeInMillis() > 0 };
};
"#;

const PYTHON: &str = r#"
def handler(event, context):
    print("python got", event)
    if event.get("fail"):
        raise ValueError("python says no")
    return {"echo": event, "requestId": context.aws_request_id}
"#;

// A bootstrap in shell: one round trip with the Runtime API per event.
const BOOTSTRAP: &str = r#"#!/bin/sh
api="http://$AWS_LAMBDA_RUNTIME_API/2018-06-01/runtime"
while true; do
  headers=$(mktemp)
  event=$(curl -sS -D "$headers" "$api/invocation/next")
  id=$(grep -i '^lambda-runtime-aws-request-id:' "$headers" | tr -d '\r' | cut -d' ' -f2)
  echo "bootstrap got $event for $_HANDLER"
  curl -sS -X POST -d "{\"shell\": $event, \"handler\": \"$_HANDLER\"}" "$api/invocation/$id/response" >/dev/null
done
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn functions_of_each_runtime_run_through_the_stand_in() {
    let emu = Emulator::shared().await;
    let config = emu.sdk_config().await;
    let lambda = aws_sdk_lambda::Client::new(&config);
    let s3 = emu.s3().await;
    let node = unique_name("node");
    let python = unique_name("python");
    let shell = unique_name("shell");
    for (name, runtime, handler, zip, timeout) in [
        (
            &node,
            Runtime::Nodejs22x,
            "index.handler",
            zip_files(&[("index.js", NODE.as_bytes())]),
            2,
        ),
        (
            &python,
            Runtime::Python312,
            "app.handler",
            zip_files(&[("app.py", PYTHON.as_bytes())]),
            5,
        ),
        (
            &shell,
            Runtime::Providedal2023,
            "MyTask",
            zip_files(&[("bootstrap", BOOTSTRAP.as_bytes())]),
            5,
        ),
    ] {
        let spec = FunctionSpec {
            architecture: None,
            name,
            runtime,
            handler,
            zip,
            timeout,
            env: vec![],
        };
        create_function(&lambda, spec).await;
    }

    let started = Instant::now();
    let a = invoke(&lambda, &node, json!({"n": 1})).await;
    let cold = started.elapsed();
    assert_eq!(a.function_error, None, "{}", a.log);
    assert_eq!(a.payload["echo"], json!({"n": 1}));
    assert_eq!(a.payload["left"], json!(true));
    assert!(a.log.contains(r#"node got {"n":1}"#), "{}", a.log);
    let started = Instant::now();
    let b = invoke(&lambda, &node, json!({"n": 2})).await;
    let warm = started.elapsed();
    assert_ne!(a.payload["requestId"], b.payload["requestId"]);
    eprintln!("node: cold {cold:?}, warm {warm:?}");

    let failed = invoke(&lambda, &node, json!({"fail": true})).await;
    assert_eq!(failed.function_error.as_deref(), Some("Handled"));
    assert_eq!(failed.payload["errorType"], json!("TypeError"));
    assert_eq!(failed.payload["errorMessage"], json!("node says no"));
    assert!(failed.log.contains("node says no"), "{}", failed.log);

    let exited = invoke(&lambda, &node, json!({"exit": true})).await;
    assert_eq!(
        exited.payload["errorType"],
        json!("Runtime.ExitError"),
        "{:?}",
        exited.payload
    );
    assert!(
        exited.payload["errorMessage"]
            .as_str()
            .unwrap()
            .contains("exit status 7")
    );
    let again = invoke(&lambda, &node, json!({"n": 3})).await;
    assert_eq!(
        again.payload["echo"],
        json!({"n": 3}),
        "a new process after the exit"
    );

    let slow = invoke(&lambda, &node, json!({"sleep": 5000})).await;
    assert_eq!(
        slow.payload["errorType"],
        json!("Sandbox.Timedout"),
        "{:?}",
        slow.payload
    );

    // The SDK (AWS_ENDPOINT_URL) and https.request to the emulator's host reach the
    // emulator, as CDK's handlers do.
    let bucket = unique_name("standin").to_lowercase();
    s3.create_bucket().bucket(&bucket).send().await.unwrap();
    let url = s3
        .put_object()
        .bucket(&bucket)
        .key("from-https")
        .presigned(PresigningConfig::expires_in(Duration::from_secs(300)).unwrap())
        .await
        .unwrap()
        .uri()
        .to_string();
    let sdk = invoke(&lambda, &node, json!({"bucket": bucket, "url": url})).await;
    assert_eq!(sdk.function_error, None, "{:?}\n{}", sdk.payload, sdk.log);
    for (key, body) in [("from-sdk", "sdk"), ("from-https", "https")] {
        let got = s3
            .get_object()
            .bucket(&bucket)
            .key(key)
            .send()
            .await
            .unwrap();
        assert_eq!(
            got.body.collect().await.unwrap().into_bytes().as_ref(),
            body.as_bytes()
        );
    }

    let py = invoke(&lambda, &python, json!({"p": 1})).await;
    assert_eq!(py.function_error, None, "{}", py.log);
    assert_eq!(py.payload["echo"], json!({"p": 1}));
    assert!(py.log.contains("python got {'p': 1}"), "{}", py.log);
    let py_failed = invoke(&lambda, &python, json!({"fail": true})).await;
    assert_eq!(py_failed.function_error.as_deref(), Some("Handled"));
    assert_eq!(py_failed.payload["errorType"], json!("ValueError"));

    let sh = invoke(&lambda, &shell, json!({"s": 1})).await;
    assert_eq!(
        sh.payload,
        json!({"shell": {"s": 1}, "handler": "MyTask"}),
        "{}",
        sh.log
    );
    // The call that started the process reports its init, as a cold start does; the next
    // one, on the same process, does not.
    assert!(sh.log.contains("\tInit Duration: "), "{}", sh.log);
    let again = invoke(&lambda, &shell, json!({"s": 2})).await;
    assert_eq!(again.payload["shell"], json!({"s": 2}), "{}", again.log);
    // (the log's tail holds the earlier calls' lines too: the last call's come after its START)
    let last = again.log.rsplit("START RequestId").next().unwrap();
    assert!(!last.contains("Init Duration"), "{}", again.log);

    // fakecloud removes a warm instance (idle for 5 minutes, or as here through its
    // simulation API); the stand-in keeps its REPORT lines, for the counts
    // `engine_cost.rs` takes of a long deploy.
    let (status, answer) = stackflow_tests::triggers::raw_call(
        emu.endpoint(),
        "POST",
        &format!("/_fakecloud/lambda/{shell}/evict-container"),
        "lambda",
        None,
        "",
    )
    .await;
    assert_eq!(status, 200, "evict-container: {answer}");
    let removed = emu
        .standin_dir()
        .expect("a managed emulator")
        .join("removed");
    let kept = std::fs::read_dir(&removed)
        .unwrap_or_else(|e| panic!("{}: {e}", removed.display()))
        .flatten()
        .map(|d| d.path())
        .find(|d| {
            let config = std::fs::read_to_string(d.join("config.json")).unwrap_or_default();
            let config: Value = serde_json::from_str(&config).unwrap_or_default();
            config["env"]["AWS_LAMBDA_FUNCTION_NAME"] == json!(shell)
        })
        .unwrap_or_else(|| panic!("no kept log of {shell} in {}", removed.display()));
    let log = std::fs::read_to_string(kept.join("log")).unwrap();
    assert_eq!(log.matches("REPORT RequestId: ").count(), 2, "{log}");
    // Only the platform's lines: what the function wrote is the function's.
    let platform = ["START RequestId: ", "END RequestId: ", "REPORT RequestId: "];
    assert!(
        log.lines()
            .all(|l| platform.iter().any(|p| l.starts_with(p))),
        "{log}"
    );
}
