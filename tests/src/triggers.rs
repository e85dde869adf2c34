//! How the tests drive and observe the engine's triggers (issue 16): a rule on the default
//! bus that sends every event the engine publishes to an SQS queue, synchronous
//! invocations of a trigger function, a stand-in for CodePipeline's job API (fakecloud
//! 0.51.0 answers `PutJobSuccessResult` and `PutJobFailureResult` with
//! `JobNotFoundException` for every job: it runs no actions) and a PipelineJob action
//! played as CodePipeline runs it, and hand-written calls for APIs without an SDK client.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The emulator's account.
pub const ACCOUNT: &str = "123456789012";

/// The secret access key of the pipeline artifacts' credentials in [`job_event`]: it
/// must appear in no answer, report or log.
pub const ARTIFACT_SECRET: &str = "pipeline-artifact-secret-Zq81x";

/// The `QueueArn` of the queue at `url`.
pub async fn queue_arn(sqs: &aws_sdk_sqs::Client, url: &str) -> String {
    let out = sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
        .send()
        .await
        .unwrap();
    out.attributes().unwrap()[&aws_sdk_sqs::types::QueueAttributeName::QueueArn].clone()
}

/// The rule `rule` on the default bus: events matching `pattern` go to `target`.
pub async fn rule_to(
    events: &aws_sdk_eventbridge::Client,
    rule: &str,
    pattern: &Value,
    target: aws_sdk_eventbridge::types::Target,
) {
    events
        .put_rule()
        .name(rule)
        .event_pattern(pattern.to_string())
        .send()
        .await
        .unwrap();
    events
        .put_targets()
        .rule(rule)
        .targets(target)
        .send()
        .await
        .unwrap();
}

/// The events the engine publishes, as received: a queue and the rule `<prefix>-observe`
/// on the default bus that sends it every event of source `stackflow` but the deploy
/// requests.
pub struct Observer {
    pub sqs: aws_sdk_sqs::Client,
    /// The queue's URL.
    pub queue: String,
    /// Every event received so far.
    pub seen: Vec<Value>,
}

impl Observer {
    /// Makes the queue `<prefix>-observed` and the rule.
    pub async fn start(config: &aws_types::SdkConfig, prefix: &str) -> Observer {
        let sqs = aws_sdk_sqs::Client::new(config);
        let queue = sqs
            .create_queue()
            .queue_name(format!("{prefix}-observed"))
            .send()
            .await
            .unwrap()
            .queue_url
            .unwrap();
        Observer::on(config, sqs, queue, prefix).await
    }

    /// The rule `<prefix>-observe`, sending to the existing `queue`.
    pub async fn on(
        config: &aws_types::SdkConfig,
        sqs: aws_sdk_sqs::Client,
        queue: String,
        prefix: &str,
    ) -> Observer {
        let events = aws_sdk_eventbridge::Client::new(config);
        let pattern = json!({"source": ["stackflow"],
            "detail-type": [{"anything-but": "Deploy Requested"}]});
        let target = aws_sdk_eventbridge::types::Target::builder()
            .id("observed")
            .arn(queue_arn(&sqs, &queue).await)
            .build()
            .unwrap();
        rule_to(&events, &format!("{prefix}-observe"), &pattern, target).await;
        Observer {
            sqs,
            queue,
            seen: Vec::new(),
        }
    }

    /// The events of `stack` received so far, until `done` holds of them or `wait`
    /// passes.
    pub async fn until(
        &mut self,
        stack: &str,
        wait: Duration,
        done: impl Fn(&[Value]) -> bool,
    ) -> Vec<Value> {
        observed_until(&self.sqs, &self.queue, &mut self.seen, stack, wait, done).await
    }
}

/// The events of `stack` received on `queue` so far, with what was received before
/// (`seen`, kept across calls), until `done` holds of them or `wait` passes.
pub async fn observed_until(
    sqs: &aws_sdk_sqs::Client,
    queue: &str,
    seen: &mut Vec<Value>,
    stack: &str,
    wait: Duration,
    done: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let until = Instant::now() + wait;
    loop {
        let out = sqs
            .receive_message()
            .queue_url(queue)
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
        if done(&mine) || Instant::now() > until {
            return mine;
        }
    }
}

/// The `detail-type` of each event.
pub fn types(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["detail-type"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The `Stack Drift Detected` event among `events`, asserted to name one drifted
/// resource, `logical_id`, at the path `/Value`, without the value it drifted to
/// (`changed`).
pub fn drift_detected<'a>(events: &'a [Value], logical_id: &str, changed: &str) -> &'a Value {
    let event = events
        .iter()
        .find(|e| e["detail-type"] == "Stack Drift Detected")
        .unwrap_or_else(|| panic!("no Stack Drift Detected: {events:#?}"));
    let resources = &event["detail"]["resources"];
    assert_eq!(resources[0]["logicalId"], logical_id, "{event}");
    assert_eq!(resources[0]["paths"], json!(["/Value"]), "{event}");
    assert!(
        !event.to_string().contains(changed),
        "values stay out: {event}"
    );
    event
}

/// The executions of the state machine `machine`, by name: their status.
pub async fn executions(sfn: &aws_sdk_sfn::Client, machine: &str) -> BTreeMap<String, String> {
    let out = sfn
        .list_executions()
        .state_machine_arn(machine)
        .max_results(1000)
        .send()
        .await
        .unwrap();
    out.executions()
        .iter()
        .map(|e| (e.name().to_string(), e.status().as_str().to_string()))
        .collect()
}

/// Waits until the execution `name` of `machine` ends; its status.
pub async fn ended(sfn: &aws_sdk_sfn::Client, machine: &str, name: &str, wait: Duration) -> String {
    let until = Instant::now() + wait;
    loop {
        let status = executions(sfn, machine).await.get(name).cloned();
        match status {
            Some(s) if s != "RUNNING" => return s,
            _ if Instant::now() > until => {
                panic!("the execution {name} did not end in {wait:?}: {status:?}")
            }
            _ => tokio::time::sleep(Duration::from_millis(300)).await,
        }
    }
}

/// The first execution of `machine` whose name starts with `prefix` and is not in
/// `before`, waited for up to `wait`.
pub async fn new_execution(
    sfn: &aws_sdk_sfn::Client,
    machine: &str,
    before: &BTreeMap<String, String>,
    prefix: &str,
    wait: Duration,
) -> String {
    let until = Instant::now() + wait;
    loop {
        let now = executions(sfn, machine).await;
        if let Some(n) = now
            .keys()
            .find(|n| !before.contains_key(*n) && n.starts_with(prefix))
        {
            return n.clone();
        }
        assert!(Instant::now() < until, "no execution started in {wait:?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Invokes `function` synchronously with `payload`: its answer and the end of its log.
pub async fn invoke(
    lambda: &aws_sdk_lambda::Client,
    function: &str,
    payload: &Value,
) -> (Value, String) {
    use base64::Engine as _;
    let out = lambda
        .invoke()
        .function_name(function)
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
        "{function}: {}\n{log}",
        String::from_utf8_lossy(&body)
    );
    (serde_json::from_slice(&body).unwrap(), log)
}

/// One call the CodePipeline stand-in received: its operation and body.
#[derive(Debug, Clone)]
pub struct JobCall {
    pub operation: String,
    pub body: Value,
    pub raw: String,
}

/// What the CodePipeline stand-in received.
pub type JobCalls = Arc<Mutex<Vec<JobCall>>>;

/// A stand-in for CodePipeline's job API on loopback: answers every call `{}` (success)
/// and records it. Its endpoint.
pub async fn codepipeline_standin() -> (String, JobCalls) {
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

/// The credentials CodePipeline gives a job to read its input artifact (a session of the
/// pipeline's role on AWS).
#[derive(Debug, Clone)]
pub struct ArtifactCredentials {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: String,
}

impl ArtifactCredentials {
    /// Made-up ones holding [`ARTIFACT_SECRET`], for an emulator that checks no
    /// credentials.
    pub fn example() -> ArtifactCredentials {
        ArtifactCredentials {
            access_key_id: "AKIAPIPELINEARTIFACT".into(),
            secret_access_key: ARTIFACT_SECRET.into(),
            session_token: format!("{ARTIFACT_SECRET}-token"),
        }
    }

    /// A session of a role made for it, trusting the account and allowed to read
    /// `bucket`'s objects (for an emulator that enforces IAM): as CodePipeline's are.
    pub async fn session(config: &aws_types::SdkConfig, bucket: &str) -> ArtifactCredentials {
        let iam = aws_sdk_iam::Client::new(config);
        let role = crate::unique_name("pipeline-artifacts");
        let root = json!({"AWS": format!("arn:aws:iam::{ACCOUNT}:root")});
        let arn = crate::iam::create_role(&iam, &role, root).await;
        let objects = format!("arn:aws:s3:::{bucket}/*");
        crate::iam::allow(&iam, &role, "artifacts", &["s3:GetObject"], &objects).await;
        let assumed = aws_sdk_sts::Client::new(config)
            .assume_role()
            .role_arn(arn)
            .role_session_name("codepipeline")
            .send()
            .await
            .expect("a session of the artifact role");
        let c = assumed.credentials().expect("credentials");
        ArtifactCredentials {
            access_key_id: c.access_key_id().into(),
            secret_access_key: c.secret_access_key().into(),
            session_token: c.session_token().into(),
        }
    }
}

/// A CodePipeline Lambda invoke action's job event: deploy `stack` from `template.json`
/// of the input artifact at `bucket`/`key`, read with `credentials`; `token` is the
/// continuation token of the job's last report.
pub fn job_event(
    job: &str,
    stack: &str,
    (bucket, key): (&str, &str),
    credentials: &ArtifactCredentials,
    token: Option<&str>,
) -> Value {
    json!({"CodePipeline.job": {"id": job, "accountId": ACCOUNT, "data": {
        "actionConfiguration": {"configuration": {"FunctionName": "stackflow-pipelinejob",
            "UserParameters": json!({"stack": stack, "file": "template.json"}).to_string()}},
        "inputArtifacts": [{"name": "BuildOutput", "revision": null, "location": {"type": "S3",
            "s3Location": {"bucketName": bucket, "objectKey": key}}}],
        "outputArtifacts": [],
        "artifactCredentials": {"accessKeyId": credentials.access_key_id,
            "secretAccessKey": credentials.secret_access_key,
            "sessionToken": credentials.session_token},
        "continuationToken": token}}})
}

/// A PipelineJob function and the CodePipeline stand-in it reports to.
pub struct PipelineAction<'a> {
    pub lambda: &'a aws_sdk_lambda::Client,
    /// The function's name or ARN.
    pub function: &'a str,
    pub calls: &'a JobCalls,
    /// What the job reads its input artifact with.
    pub credentials: ArtifactCredentials,
}

impl PipelineAction<'_> {
    /// Runs the action as CodePipeline does: invoked again with the continuation token
    /// until it reports success or failure (the artifact credentials' secret in no answer
    /// or log).
    /// The last call CodePipeline received.
    pub async fn run(&self, job: &str, stack: &str, bucket: &str, key: &str) -> JobCall {
        let mut token: Option<String> = None;
        let started = Instant::now();
        loop {
            let event = job_event(
                job,
                stack,
                (bucket, key),
                &self.credentials,
                token.as_deref(),
            );
            let (answer, log) = invoke(self.lambda, self.function, &event).await;
            let secret = &self.credentials.secret_access_key;
            assert!(!answer.to_string().contains(secret), "{answer}");
            assert!(!log.contains(secret), "the function's log: {log}");
            let last = self
                .calls
                .lock()
                .unwrap()
                .last()
                .cloned()
                .expect("a report");
            assert_eq!(last.body["jobId"], job);
            match (last.operation.as_str(), last.body.get("continuationToken")) {
                ("PutJobSuccessResult", Some(Value::String(t))) => token = Some(t.clone()),
                _ => {
                    eprintln!(
                        "pipeline job {job}: {} after {:.1} s",
                        last.operation,
                        started.elapsed().as_secs_f64()
                    );
                    return last;
                }
            }
            assert!(
                started.elapsed() < Duration::from_secs(300),
                "the job did not end"
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
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

/// Why execution `name` of `machine` ended as it did: its error and cause, and each task
/// or Lambda failure in its history (for an assertion's message).
pub async fn why_ended(sfn: &aws_sdk_sfn::Client, machine: &str, name: &str) -> String {
    let arn = format!(
        "{}:{name}",
        machine.replace(":stateMachine:", ":execution:")
    );
    let mut out = match sfn.describe_execution().execution_arn(&arn).send().await {
        Ok(d) => format!("{name}: {:?}: {:?}", d.error(), d.cause()),
        Err(e) => return format!("{name}: DescribeExecution: {e:?}"),
    };
    if let Ok(history) = sfn
        .get_execution_history()
        .execution_arn(&arn)
        .max_results(1000)
        .send()
        .await
    {
        // (the details' Debug hides error and cause: they are read one by one)
        for e in history.events() {
            let said = [
                e.task_failed_event_details()
                    .map(|f| (f.error(), f.cause())),
                e.lambda_function_failed_event_details()
                    .map(|f| (f.error(), f.cause())),
                e.task_timed_out_event_details()
                    .map(|f| (f.error(), f.cause())),
                e.execution_failed_event_details()
                    .map(|f| (f.error(), f.cause())),
            ];
            for (error, cause) in said.into_iter().flatten() {
                out.push_str(&format!("\n{}: {error:?} {cause:?}", e.r#type().as_str()));
            }
        }
    }
    out
}
