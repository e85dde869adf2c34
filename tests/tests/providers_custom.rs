//! The custom resource provider end to end on the local emulator (fakecloud 0.51.0), and
//! replay tests pinning the Cloud Control provider's exact requests.
//!
//! The custom resource test uses the SNS path: a topic as the `ServiceToken`, an SQS queue
//! subscribed to it, and a handler task in this test that takes each request from the
//! queue (the SQS body is the SNS envelope, the request is its `Message`), records it and
//! answers through the `ResponseURL` (a presigned S3 `PUT` URL) with a plain HTTP/1.1 `PUT`.
//!
//! Quirks of fakecloud met here:
//! - The Lambda path runs in `custom_resources_lambda.rs` (the handlers' code run by the
//!   emulator's container stand-in).
//! - Presigned URLs are not checked (fakecloud accepts any signature), so this proves the
//!   URL's shape and routing, not its signing.
//! - The queue needs no policy allowing the topic to send to it (IAM is not evaluated).
//! - Cloud Control requests are terminal in the first answer, so its IN_PROGRESS path is
//!   tested here against a scripted HTTP server on 127.0.0.1 instead.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use stackflow_providers::cloudcontrol::{CloudControlProvider, PollPolicy};
use stackflow_providers::custom::CustomResourceProvider;
use stackflow_providers::{
    Deleted, Properties, Provider, ProviderError, ResourceRequest, RetryPolicy,
};
use stackflow_tests::{Emulator, unique_name};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

fn props(v: Value) -> Properties {
    v.as_object().cloned().expect("an object")
}

/// A plain HTTP/1.1 request to `url` (`http://host:port/path?query`); the status code.
async fn http_put(url: &str, body: &[u8]) -> u16 {
    let rest = url.strip_prefix("http://").expect("an http:// URL");
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let mut stream = TcpStream::connect(authority).await.expect("connect");
    let head = format!(
        "PUT {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.expect("write");
    stream.write_all(body).await.expect("write");
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut response))
        .await
        .expect("an answer within 30 s")
        .expect("read");
    let text = String::from_utf8_lossy(&response);
    text.split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {text}"))
}

/// The test's custom resource handler: answers every request taken from `queue_url`, and
/// passes each request on through `seen`.
///
/// Behaviour, driven by the resource properties:
/// - `Fail` = `"create"` / `"delete"`: that request type answers `FAILED` with the
///   `Reason` `handler says no to <type>`;
/// - Create answers `SUCCESS` with the physical id `thing-<Name>` and `Data`
///   `{"Echo": <Name>, "Size": <Size>}`;
/// - `NoEcho` = `"true"`: the answer says `NoEcho: true`;
/// - Update: the same, so a changed `Name` is a replacement;
/// - Delete: `SUCCESS`.
async fn handler(sqs: aws_sdk_sqs::Client, queue_url: String, seen: mpsc::UnboundedSender<Value>) {
    loop {
        let received = match sqs
            .receive_message()
            .queue_url(&queue_url)
            .wait_time_seconds(1)
            .max_number_of_messages(10)
            .send()
            .await
        {
            Ok(r) => r,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        for message in received.messages() {
            let envelope: Value =
                serde_json::from_str(message.body().expect("a body")).expect("JSON envelope");
            assert_eq!(envelope["Type"], "Notification");
            let request: Value =
                serde_json::from_str(envelope["Message"].as_str().expect("a Message string"))
                    .expect("the request is JSON");
            let kind = request["RequestType"]
                .as_str()
                .expect("RequestType")
                .to_string();
            let p = &request["ResourceProperties"];
            let answer = if p["Fail"].as_str() == Some(kind.to_ascii_lowercase().as_str()) {
                json!({
                    "Status": "FAILED",
                    "Reason": format!("handler says no to {kind}"),
                    "PhysicalResourceId": request.get("PhysicalResourceId").cloned()
                        .unwrap_or_else(|| json!("never-made")),
                    "StackId": request["StackId"],
                    "RequestId": request["RequestId"],
                    "LogicalResourceId": request["LogicalResourceId"],
                })
            } else if kind == "Delete" {
                json!({
                    "Status": "SUCCESS",
                    "PhysicalResourceId": request["PhysicalResourceId"],
                    "StackId": request["StackId"],
                    "RequestId": request["RequestId"],
                    "LogicalResourceId": request["LogicalResourceId"],
                })
            } else {
                json!({
                    "Status": "SUCCESS",
                    "PhysicalResourceId": format!("thing-{}", p["Name"].as_str().unwrap_or("")),
                    "StackId": request["StackId"],
                    "RequestId": request["RequestId"],
                    "LogicalResourceId": request["LogicalResourceId"],
                    "Data": {"Echo": p["Name"], "Size": p["Size"]},
                    "NoEcho": p["NoEcho"] == "true",
                })
            };
            let url = request["ResponseURL"].as_str().expect("ResponseURL");
            let status = http_put(url, answer.to_string().as_bytes()).await;
            assert_eq!(status, 200, "PUT to the ResponseURL");
            let _ = seen.send(request.clone());
            if let Some(handle) = message.receipt_handle() {
                let _ = sqs
                    .delete_message()
                    .queue_url(&queue_url)
                    .receipt_handle(handle)
                    .send()
                    .await;
            }
        }
    }
}

/// Takes the next request the handler saw.
async fn next_request(seen: &mut mpsc::UnboundedReceiver<Value>) -> Value {
    tokio::time::timeout(Duration::from_secs(5), seen.recv())
        .await
        .expect("the handler saw a request")
        .expect("the handler is running")
}

#[tokio::test]
async fn custom_resource_through_sns_lifecycle() {
    let emulator = Emulator::shared().await;
    let config = emulator.sdk_config().await;
    let s3 = emulator.s3().await;
    let sns = aws_sdk_sns::Client::new(&config);
    let sqs = aws_sdk_sqs::Client::new(&config);

    let bucket = unique_name("responses");
    s3.create_bucket()
        .bucket(&bucket)
        .send()
        .await
        .expect("CreateBucket");
    let topic_arn = sns
        .create_topic()
        .name(unique_name("handler"))
        .send()
        .await
        .expect("CreateTopic")
        .topic_arn()
        .expect("a TopicArn")
        .to_string();
    let queue_url = sqs
        .create_queue()
        .queue_name(unique_name("handler"))
        .send()
        .await
        .expect("CreateQueue")
        .queue_url()
        .expect("a QueueUrl")
        .to_string();
    let queue_arn = sqs
        .get_queue_attributes()
        .queue_url(&queue_url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
        .send()
        .await
        .expect("GetQueueAttributes")
        .attributes()
        .and_then(|a| a.get(&aws_sdk_sqs::types::QueueAttributeName::QueueArn))
        .expect("a QueueArn")
        .clone();
    sns.subscribe()
        .topic_arn(&topic_arn)
        .protocol("sqs")
        .endpoint(&queue_arn)
        .send()
        .await
        .expect("Subscribe");

    let (tx, mut seen) = mpsc::unbounded_channel();
    let handler_task = tokio::spawn(handler(sqs.clone(), queue_url.clone(), tx));

    let provider = CustomResourceProvider::new(
        aws_sdk_lambda::Client::new(&config),
        sns.clone(),
        s3.clone(),
        &bucket,
    )
    .with_poll(PollPolicy {
        initial: Duration::from_millis(100),
        factor: 1.5,
        max: Duration::from_millis(500),
        timeout: Duration::from_secs(60),
    });

    let stack = unique_name("stack");
    let mut create = ResourceRequest::new(
        &stack,
        "Thing",
        "Custom::Thing",
        props(json!({"ServiceToken": topic_arn, "Name": "one", "Size": 3, "On": true})),
    );
    create.token = unique_name("deploy-create");

    // Create.
    let created = provider.create(&create).await.expect("create");
    assert_eq!(created.physical_id, "thing-one");
    assert_eq!(created.attributes.get("Echo"), Some(&json!("one")));
    // CloudFormation hands numbers and booleans to handlers as strings.
    assert_eq!(created.attributes.get("Size"), Some(&json!("3")));
    let request = next_request(&mut seen).await;
    assert_eq!(request["RequestType"], "Create");
    assert_eq!(request["ServiceToken"], json!(topic_arn));
    assert_eq!(request["LogicalResourceId"], "Thing");
    assert_eq!(request["ResourceType"], "Custom::Thing");
    assert_eq!(
        request["ResourceProperties"],
        json!({"ServiceToken": topic_arn, "Name": "one", "Size": "3", "On": "true"})
    );
    assert!(request.get("PhysicalResourceId").is_none());
    assert!(request.get("OldResourceProperties").is_none());
    let stack_id = request["StackId"].as_str().expect("StackId");
    assert!(
        stack_id.starts_with(&format!(
            "arn:aws:cloudformation:us-east-1:123456789012:stack/{stack}/"
        )),
        "{stack_id}"
    );
    let request_id = request["RequestId"]
        .as_str()
        .expect("RequestId")
        .to_string();
    let url = request["ResponseURL"].as_str().expect("ResponseURL");
    assert!(
        url.starts_with(&format!(
            "{}/{bucket}/custom-resource-responses/{request_id}?",
            emulator.endpoint()
        )),
        "{url}"
    );

    // A retry of the same action (same token) reads the stored answer: same result, and
    // the handler is not called again.
    let again = provider.create(&create).await.expect("create retried");
    assert_eq!(again, created);
    assert!(
        tokio::time::timeout(Duration::from_millis(1500), seen.recv())
            .await
            .is_err(),
        "the handler was called again for a retried create"
    );

    // Update in place.
    let mut update = create.clone();
    update.previous_properties = Some(create.properties.clone());
    update.physical_id = Some(created.physical_id.clone());
    update.properties.insert("Size".into(), json!(4));
    update.token = unique_name("deploy-update");
    let updated = provider.update(&update).await.expect("update");
    assert_eq!(updated.physical_id, "thing-one");
    assert!(!updated.replaced);
    assert_eq!(updated.attributes.get("Size"), Some(&json!("4")));
    let request = next_request(&mut seen).await;
    assert_eq!(request["RequestType"], "Update");
    assert_eq!(request["PhysicalResourceId"], "thing-one");
    assert_eq!(request["ResourceProperties"]["Size"], "4");
    assert_eq!(request["OldResourceProperties"]["Size"], "3");
    assert_eq!(request["StackId"], json!(stack_id));
    assert_ne!(request["RequestId"], json!(request_id));

    // Update with a new physical id: a replacement (the engine deletes the old one).
    let mut replace = update.clone();
    replace.previous_properties = Some(update.properties.clone());
    replace.properties.insert("Name".into(), json!("two"));
    replace.token = unique_name("deploy-replace");
    let replaced = provider.update(&replace).await.expect("update (replace)");
    assert_eq!(replaced.physical_id, "thing-two");
    assert!(replaced.replaced);
    assert_eq!(replaced.attributes.get("Echo"), Some(&json!("two")));
    let request = next_request(&mut seen).await;
    assert_eq!(request["OldResourceProperties"]["Name"], "one");

    // Delete.
    let mut delete = replace.clone();
    delete.physical_id = Some("thing-two".into());
    delete.previous_properties = None;
    delete.token = unique_name("deploy-delete");
    assert_eq!(provider.delete(&delete).await, Ok(Deleted::Done));
    let request = next_request(&mut seen).await;
    assert_eq!(request["RequestType"], "Delete");
    assert_eq!(request["PhysicalResourceId"], "thing-two");
    assert!(request.get("OldResourceProperties").is_none());

    // A FAILED create: the Reason reaches the error.
    let mut failing = ResourceRequest::new(
        &stack,
        "Broken",
        "AWS::CloudFormation::CustomResource",
        props(json!({"ServiceToken": topic_arn, "Name": "x", "Fail": "create"})),
    );
    failing.token = unique_name("deploy-create");
    match provider.create(&failing).await {
        Err(e @ ProviderError::Other(_)) => {
            assert!(e.message().contains("handler says no to Create"), "{e}");
            assert!(e.message().contains("Broken"), "{e}");
        }
        other => panic!("a FAILED create must fail: {other:?}"),
    }
    assert_eq!(next_request(&mut seen).await["LogicalResourceId"], "Broken");

    // A FAILED delete skips the resource (it is not forgotten; the run goes on), as the
    // reference tool does.
    let mut failing_delete = ResourceRequest::new(
        &stack,
        "Sticky",
        "Custom::Thing",
        props(json!({"ServiceToken": topic_arn, "Name": "s", "Fail": "delete"})),
    );
    failing_delete.physical_id = Some("thing-s".into());
    failing_delete.token = unique_name("deploy-delete");
    match provider.delete(&failing_delete).await {
        Ok(Deleted::Skipped { reason }) => {
            assert!(reason.contains("handler says no to Delete"), "{reason}")
        }
        other => panic!("a FAILED delete is skipped: {other:?}"),
    }
    next_request(&mut seen).await;

    // A NoEcho answer: its data is given to the engine once, as secret, and the stored
    // response keeps it masked; a retry gets the same physical id and masked data.
    let mut secret = ResourceRequest::new(
        &stack,
        "Secret",
        "Custom::Thing",
        props(json!({"ServiceToken": topic_arn, "Name": "pw-7Kq2", "NoEcho": true})),
    );
    secret.token = unique_name("deploy-create");
    let made = provider.create(&secret).await.expect("NoEcho create");
    assert!(made.sensitive);
    assert_eq!(made.attributes.get("Echo"), Some(&json!("pw-7Kq2")));
    let request_id = next_request(&mut seen).await["RequestId"]
        .as_str()
        .expect("RequestId")
        .to_string();
    let stored = s3
        .get_object()
        .bucket(&bucket)
        .key(format!("custom-resource-responses/{request_id}"))
        .send()
        .await
        .expect("the stored response")
        .body
        .collect()
        .await
        .expect("its body")
        .into_bytes();
    let stored: Value = serde_json::from_slice(&stored).expect("the response is JSON");
    assert_eq!(stored["Data"], json!({"Echo": "****", "Size": "****"}));
    assert_eq!(stored["PhysicalResourceId"], json!(made.physical_id));
    let retried = provider
        .create(&secret)
        .await
        .expect("NoEcho create retried");
    assert_eq!(retried.physical_id, made.physical_id);
    assert!(retried.sensitive);
    assert_eq!(retried.attributes.get("Echo"), Some(&json!("****")));

    handler_task.abort();
}

#[tokio::test]
async fn custom_resource_without_an_answer_times_out() {
    let emulator = Emulator::shared().await;
    let config = emulator.sdk_config().await;
    let s3 = emulator.s3().await;
    let sns = aws_sdk_sns::Client::new(&config);
    let bucket = unique_name("responses");
    s3.create_bucket()
        .bucket(&bucket)
        .send()
        .await
        .expect("CreateBucket");
    // A topic nobody listens to.
    let topic_arn = sns
        .create_topic()
        .name(unique_name("silent"))
        .send()
        .await
        .expect("CreateTopic")
        .topic_arn()
        .expect("a TopicArn")
        .to_string();
    let provider =
        CustomResourceProvider::new(aws_sdk_lambda::Client::new(&config), sns, s3, &bucket)
            .with_timeout(Duration::from_secs(2));
    let mut request = ResourceRequest::new(
        unique_name("stack"),
        "Silent",
        "Custom::Silent",
        props(json!({"ServiceToken": topic_arn})),
    );
    request.token = unique_name("deploy-create");
    match provider.create(&request).await {
        Err(ProviderError::Timeout(m)) => assert!(m.contains("no response"), "{m}"),
        other => panic!("{other:?}"),
    }
}

// --- Cloud Control replay -----------------------------------------------------------

/// One request the scripted server received: the `X-Amz-Target` operation and the body.
#[derive(Debug, Clone)]
struct Recorded {
    operation: String,
    body: Value,
}

/// A scripted Cloud Control endpoint on 127.0.0.1: answers each request with
/// `script(operation, nth call of that operation, body)` as an awsJson1.0 200 response and
/// records it. Returns the endpoint URL and the record.
async fn scripted_server(
    script: fn(&str, usize, &Value) -> Value,
) -> (String, Arc<Mutex<Vec<Recorded>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let record = Arc::new(Mutex::new(Vec::<Recorded>::new()));
    let log = record.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let log = log.clone();
            tokio::spawn(serve(stream, script, log));
        }
    });
    (url, record)
}

/// Serves the requests of one (keep-alive) connection.
async fn serve(
    mut stream: TcpStream,
    script: fn(&str, usize, &Value) -> Value,
    log: Arc<Mutex<Vec<Recorded>>>,
) {
    let mut buffer = Vec::new();
    loop {
        let head_end = loop {
            if let Some(i) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                break i;
            }
            let mut chunk = [0u8; 4096];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buffer.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buffer[..head_end]).to_string();
        let header = |name: &str| {
            head.lines().find_map(|line| {
                let (k, v) = line.split_once(':')?;
                k.trim()
                    .eq_ignore_ascii_case(name)
                    .then(|| v.trim().to_string())
            })
        };
        let length: usize = header("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let operation = header("x-amz-target")
            .and_then(|t| t.rsplit('.').next().map(str::to_string))
            .unwrap_or_default();
        while buffer.len() < head_end + 4 + length {
            let mut chunk = [0u8; 4096];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buffer.extend_from_slice(&chunk[..n]),
            }
        }
        let body: Value = serde_json::from_slice(&buffer[head_end + 4..head_end + 4 + length])
            .unwrap_or(Value::Null);
        buffer.drain(..head_end + 4 + length);
        let answer = {
            let mut log = log.lock().expect("the record");
            let nth = log.iter().filter(|r| r.operation == operation).count();
            log.push(Recorded {
                operation: operation.clone(),
                body: body.clone(),
            });
            script(&operation, nth, &body).to_string()
        };
        let response = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.0\r\nx-amzn-RequestId: r\r\nContent-Length: {}\r\n\r\n{answer}",
            answer.len()
        );
        if stream.write_all(response.as_bytes()).await.is_err() {
            return;
        }
    }
}

fn scripted_cloud_control(url: &str) -> CloudControlProvider {
    use aws_sdk_cloudcontrol::config::{BehaviorVersion, Credentials, Region};
    let config = aws_sdk_cloudcontrol::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .endpoint_url(url)
        .credentials_provider(Credentials::new("test", "test", None, None, "replay"))
        .retry_config(aws_sdk_cloudcontrol::config::retry::RetryConfig::disabled())
        .build();
    CloudControlProvider::new(aws_sdk_cloudcontrol::Client::from_conf(config))
        .with_retry(RetryPolicy::none())
        .with_poll(PollPolicy {
            initial: Duration::from_millis(10),
            factor: 2.0,
            max: Duration::from_millis(40),
            timeout: Duration::from_secs(10),
        })
}

fn progress(status: &str, operation: &str) -> Value {
    json!({"ProgressEvent": {
        "TypeName": "AWS::SSM::Parameter",
        "Identifier": "/app/param",
        "RequestToken": "rt-1",
        "Operation": operation,
        "OperationStatus": status,
    }})
}

#[tokio::test]
async fn cloudcontrol_update_request_is_pinned_and_polled_until_success() {
    fn script(operation: &str, nth: usize, _body: &Value) -> Value {
        match operation {
            "UpdateResource" => progress("IN_PROGRESS", "UPDATE"),
            "GetResourceRequestStatus" if nth < 2 => progress("IN_PROGRESS", "UPDATE"),
            "GetResourceRequestStatus" => progress("SUCCESS", "UPDATE"),
            "GetResource" => json!({
                "TypeName": "AWS::SSM::Parameter",
                "ResourceDescription": {
                    "Identifier": "/app/param",
                    "Properties": r#"{"Name":"/app/param","Type":"String","Value":"two"}"#,
                },
            }),
            other => json!({"unexpected": other}),
        }
    }
    let (url, record) = scripted_server(script).await;
    let cc = scripted_cloud_control(&url);
    let mut request = ResourceRequest::new(
        "app",
        "Param",
        "AWS::SSM::Parameter",
        props(json!({"Name": "/app/param", "Type": "String", "Value": "two", "Description": "d"})),
    );
    request.previous_properties = Some(props(
        json!({"Name": "/app/param", "Type": "String", "Value": "one", "Description": "d"}),
    ));
    request.physical_id = Some("/app/param".into());
    request.token = "deploy-42-Param-update".into();

    let updated = cc.update(&request).await.expect("update");
    assert_eq!(updated.physical_id, "/app/param");
    assert!(!updated.replaced);
    assert_eq!(
        updated.attributes.get("Value"),
        None,
        "not read-only: not an attribute"
    );

    let record = record.lock().expect("the record").clone();
    let operations: Vec<&str> = record.iter().map(|r| r.operation.as_str()).collect();
    assert_eq!(
        operations,
        [
            "UpdateResource",
            "GetResourceRequestStatus",
            "GetResourceRequestStatus",
            "GetResourceRequestStatus",
            "GetResource"
        ]
    );
    // The exact UpdateResource request: the patch (Description is write-only, so it is
    // re-sent) as a JSON string, and the token as the ClientToken.
    let update = &record[0].body;
    assert_eq!(
        update,
        &json!({
            "TypeName": "AWS::SSM::Parameter",
            "Identifier": "/app/param",
            "PatchDocument": r#"[{"op":"replace","path":"/Value","value":"two"},{"op":"add","path":"/Description","value":"d"}]"#,
            "ClientToken": "deploy-42-Param-update",
        })
    );
    for poll in &record[1..4] {
        assert_eq!(poll.body, json!({"RequestToken": "rt-1"}));
    }
    assert_eq!(
        record[4].body,
        json!({"TypeName": "AWS::SSM::Parameter", "Identifier": "/app/param"})
    );
}

#[tokio::test]
async fn cloudcontrol_create_polled_to_failure_reports_the_handler_error() {
    fn script(operation: &str, nth: usize, _body: &Value) -> Value {
        match operation {
            "CreateResource" => progress("PENDING", "CREATE"),
            "GetResourceRequestStatus" if nth == 0 => progress("IN_PROGRESS", "CREATE"),
            "GetResourceRequestStatus" => {
                let mut event = progress("FAILED", "CREATE");
                event["ProgressEvent"]["ErrorCode"] = json!("InvalidRequest");
                event["ProgressEvent"]["StatusMessage"] = json!("Value is too long");
                event
            }
            other => json!({"unexpected": other}),
        }
    }
    let (url, record) = scripted_server(script).await;
    let cc = scripted_cloud_control(&url);
    let mut request = ResourceRequest::new(
        "app",
        "Param",
        "AWS::SSM::Parameter",
        props(json!({"Name": "/app/param", "Type": "String", "Value": "v"})),
    );
    request.token = "deploy-42-Param-create".into();
    match cc.create(&request).await {
        Err(ProviderError::InvalidRequest(m)) => {
            assert!(m.contains("Value is too long"), "{m}");
            assert!(m.contains("FAILED"), "{m}");
        }
        other => panic!("{other:?}"),
    }
    let record = record.lock().expect("the record").clone();
    assert_eq!(record.len(), 3, "{record:?}");
    assert_eq!(
        record[0].body,
        json!({
            "TypeName": "AWS::SSM::Parameter",
            "DesiredState": r#"{"Name":"/app/param","Type":"String","Value":"v"}"#,
            "ClientToken": "deploy-42-Param-create",
        })
    );
}
