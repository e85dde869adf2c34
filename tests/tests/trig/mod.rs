//! The rig of `triggers.rs`: the engine in its Lambda form on the emulator (one function
//! per state machine task and per trigger, all the real bootstrap run by the container
//! stand-in; the three state machines), an SQS queue that receives every event the
//! engine publishes (a rule on the default bus for source `stackflow`), and a stand-in
//! for CodePipeline's job API (fakecloud 0.51.0 answers `PutJobSuccessResult` and
//! `PutJobFailureResult` with `JobNotFoundException` for every job: it runs no actions).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_lambda::types::Runtime;
use serde_json::{Value, json};
use stackflow_engine::definitions::{self, Target};
use stackflow_engine::env::{BUCKET, CFN_FALLBACK, TABLE};
use stackflow_engine::sfn::triggers::TRIGGER_NAMES;
use stackflow_engine::tasks::TASK_NAMES;
use stackflow_events::dynamo::DynamoStore;
use stackflow_tests::deploy::dynamo_store;
use stackflow_tests::lambda::{FunctionSpec, create_function, engine_bootstrap_zip};
use stackflow_tests::{Emulator, unique_name};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub const ACCOUNT: &str = "123456789012";

pub struct Rig {
    pub config: aws_types::SdkConfig,
    pub sfn: aws_sdk_sfn::Client,
    pub s3: aws_sdk_s3::Client,
    pub sqs: aws_sdk_sqs::Client,
    pub events: aws_sdk_eventbridge::Client,
    pub lambda: aws_sdk_lambda::Client,
    pub bucket: String,
    pub store: Arc<DynamoStore>,
    pub functions: BTreeMap<String, String>,
    pub deploy_machine: String,
    /// The queue every `stackflow` event lands in.
    pub observed: String,
    /// The dead-letter queue of the rule targets.
    pub dead_letters: String,
    /// What the CodePipeline stand-in received.
    pub job_calls: Arc<Mutex<Vec<JobCall>>>,
}

pub async fn rig() -> Rig {
    let emu = Emulator::shared().await;
    let config = emu.sdk_config().await;
    let (table, bucket, store) = dynamo_store(emu).await;
    let zip = tokio::task::spawn_blocking(engine_bootstrap_zip)
        .await
        .unwrap();
    let lambda = aws_sdk_lambda::Client::new(&config);
    let prefix = unique_name("trg");
    let deploy_machine = format!("arn:aws:states:us-east-1:{ACCOUNT}:stateMachine:{prefix}-deploy");
    let (job_endpoint, job_calls) = codepipeline_standin().await;
    let mut functions = BTreeMap::new();
    for task in TASK_NAMES.iter().chain(TRIGGER_NAMES) {
        let name = format!("{prefix}-{task}");
        let mut env = vec![
            (TABLE.into(), table.clone()),
            (BUCKET.into(), bucket.clone()),
            (CFN_FALLBACK.into(), "false".into()),
            ("STACKFLOW_DEPLOY_MACHINE".into(), deploy_machine.clone()),
        ];
        if *task == "PipelineJob" {
            // The function runs as a local process: the stand-in on loopback is its
            // CodePipeline (the SDK's service-specific endpoint variable).
            env.push(("AWS_ENDPOINT_URL_CODEPIPELINE".into(), job_endpoint.clone()));
        }
        let spec = FunctionSpec {
            name: &name,
            runtime: Runtime::Providedal2023,
            handler: task,
            zip: zip.to_vec(),
            timeout: 900,
            env,
        };
        functions.insert(task.to_string(), create_function(&lambda, spec).await);
    }
    let sfn = aws_sdk_sfn::Client::new(&config);
    for (name, def) in definitions::ALL {
        let text = definitions::render(def, &Target::Lambda(functions.clone())).unwrap();
        let arn = sfn
            .create_state_machine()
            .name(format!("{prefix}-{name}"))
            .definition(text)
            .role_arn(format!("arn:aws:iam::{ACCOUNT}:role/stackflow-engine"))
            .send()
            .await
            .unwrap()
            .state_machine_arn;
        if *name == "deploy" {
            assert_eq!(arn, deploy_machine, "the functions were told this ARN");
        }
    }
    let sqs = aws_sdk_sqs::Client::new(&config);
    let queue = |name: String| {
        let sqs = sqs.clone();
        async move {
            sqs.create_queue()
                .queue_name(name)
                .send()
                .await
                .unwrap()
                .queue_url
                .unwrap()
        }
    };
    let observed = queue(format!("{prefix}-observed")).await;
    let dead_letters = queue(format!("{prefix}-dlq")).await;
    let rig = Rig {
        events: aws_sdk_eventbridge::Client::new(&config),
        sfn,
        s3: emu.s3().await,
        sqs,
        lambda,
        bucket,
        store,
        functions,
        deploy_machine,
        observed,
        dead_letters,
        job_calls,
        config,
    };
    rig.observe(&prefix).await;
    rig
}

impl Rig {
    pub async fn queue_arn(&self, url: &str) -> String {
        let out = self
            .sqs
            .get_queue_attributes()
            .queue_url(url)
            .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
            .send()
            .await
            .unwrap();
        out.attributes().unwrap()[&aws_sdk_sqs::types::QueueAttributeName::QueueArn].clone()
    }

    /// A rule on the default bus: every event with source `stackflow` but the deploy
    /// requests goes to the observed queue.
    async fn observe(&self, prefix: &str) {
        let pattern = json!({"source": ["stackflow"],
            "detail-type": [{"anything-but": "Deploy Requested"}]});
        let rule = format!("{prefix}-observe");
        self.events
            .put_rule()
            .name(&rule)
            .event_pattern(pattern.to_string())
            .send()
            .await
            .unwrap();
        let target = aws_sdk_eventbridge::types::Target::builder()
            .id("observed")
            .arn(self.queue_arn(&self.observed).await)
            .build()
            .unwrap();
        self.events
            .put_targets()
            .rule(&rule)
            .targets(target)
            .send()
            .await
            .unwrap();
    }

    /// The events of `stack` received so far on the observed queue, with what was
    /// received before (`seen`, kept across calls), until `done` holds of them or
    /// `wait` passes.
    pub async fn observed_until(
        &self,
        seen: &mut Vec<Value>,
        stack: &str,
        wait: Duration,
        done: impl Fn(&[Value]) -> bool,
    ) -> Vec<Value> {
        let until = std::time::Instant::now() + wait;
        loop {
            let out = self
                .sqs
                .receive_message()
                .queue_url(&self.observed)
                .max_number_of_messages(10)
                .wait_time_seconds(1)
                .send()
                .await
                .unwrap();
            for m in out.messages() {
                if let Some(body) = m.body() {
                    seen.push(serde_json::from_str(body).unwrap());
                }
            }
            let mine: Vec<Value> = seen
                .iter()
                .filter(|e| e["detail"]["stack"] == stack)
                .cloned()
                .collect();
            if done(&mine) || std::time::Instant::now() > until {
                return mine;
            }
        }
    }

    /// Executions of the deploy machine, by name: their status.
    pub async fn executions(&self) -> BTreeMap<String, String> {
        let out = self
            .sfn
            .list_executions()
            .state_machine_arn(&self.deploy_machine)
            .max_results(1000)
            .send()
            .await
            .unwrap();
        out.executions()
            .iter()
            .map(|e| (e.name().to_string(), e.status().as_str().to_string()))
            .collect()
    }

    /// Waits until the deploy execution `name` ends; its status.
    pub async fn ended(&self, name: &str, wait: Duration) -> String {
        let until = std::time::Instant::now() + wait;
        loop {
            let status = self.executions().await.get(name).cloned();
            match status {
                Some(s) if s != "RUNNING" => return s,
                _ if std::time::Instant::now() > until => {
                    panic!("the execution {name} did not end in {wait:?}: {status:?}")
                }
                _ => tokio::time::sleep(Duration::from_millis(300)).await,
            }
        }
    }

    /// Invokes the function of `task` synchronously with `payload`: its answer and the
    /// end of its log.
    pub async fn invoke(&self, task: &str, payload: &Value) -> (Value, String) {
        use base64::Engine as _;
        let out = self
            .lambda
            .invoke()
            .function_name(&self.functions[task])
            .log_type(aws_sdk_lambda::types::LogType::Tail)
            .payload(aws_sdk_lambda::primitives::Blob::new(payload.to_string()))
            .send()
            .await
            .unwrap();
        let body = out
            .payload()
            .map(|b| b.as_ref().to_vec())
            .unwrap_or_default();
        let log = out
            .log_result()
            .and_then(|l| base64::engine::general_purpose::STANDARD.decode(l).ok())
            .map(|l| String::from_utf8_lossy(&l).to_string())
            .unwrap_or_default();
        assert!(
            out.function_error().is_none(),
            "{task}: {}\n{log}",
            String::from_utf8_lossy(&body)
        );
        (serde_json::from_slice(&body).unwrap(), log)
    }
}

/// One call the CodePipeline stand-in received: its operation and body.
#[derive(Debug, Clone)]
pub struct JobCall {
    pub operation: String,
    pub body: Value,
    pub raw: String,
}

/// A stand-in for CodePipeline's job API on loopback: answers every call `{}` (success)
/// and records it. Its endpoint.
pub async fn codepipeline_standin() -> (String, Arc<Mutex<Vec<JobCall>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let calls = Arc::new(Mutex::new(Vec::new()));
    let record = calls.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let record = record.clone();
            tokio::spawn(async move {
                while let Some((head, body)) = read_request(&mut conn).await {
                    let operation = head
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("x-amz-target")
                                .then(|| v.trim().to_string())
                        })
                        .unwrap_or_default();
                    let operation = operation.rsplit('.').next().unwrap_or_default().to_string();
                    record.lock().unwrap().push(JobCall {
                        operation,
                        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
                        raw: format!("{head}{}", String::from_utf8_lossy(&body)),
                    });
                    let answer = "HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.1\r\n\
                                  Content-Length: 2\r\n\r\n{}";
                    if conn.write_all(answer.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (endpoint, calls)
}

async fn read_request(conn: &mut tokio::net::TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = conn.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_string();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    while buf.len() < end + length {
        let n = conn.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Some((head, buf[end..end + length].to_vec()))
}

/// A call to the emulator written by hand (for APIs the tests have no SDK client of:
/// CodePipeline's `CreatePipeline` with the sample's JSON, EventBridge Scheduler): the
/// service is named by the credential scope, as a signed request names it. Status and
/// body.
pub async fn raw_call(
    endpoint: &str,
    method: &str,
    path: &str,
    service: &str,
    target: Option<&str>,
    body: &str,
) -> (u16, String) {
    let authority = endpoint.trim_start_matches("http://").trim_end_matches('/');
    let mut conn = tokio::net::TcpStream::connect(authority).await.unwrap();
    let (content_type, target) = match target {
        Some(t) => (
            "application/x-amz-json-1.1",
            format!("X-Amz-Target: {t}\r\n"),
        ),
        None => ("application/json", String::new()),
    };
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: {content_type}\r\n{target}\
         X-Amz-Date: 20260101T000000Z\r\nAuthorization: AWS4-HMAC-SHA256 \
         Credential=test/20260101/us-east-1/{service}/aws4_request, \
         SignedHeaders=host;x-amz-date, Signature=00\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    conn.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    conn.read_to_end(&mut answer).await.unwrap();
    let text = String::from_utf8_lossy(&answer).to_string();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}
