//! Smoke tests of the local AWS emulator (fakecloud 0.51.0), one per service
//! that the deploy engine uses: each creates, reads back and deletes real
//! resources through the real `aws-sdk-*` clients, and records where the
//! emulator differs from AWS (the "Quirk:" comments). They are what tells us
//! which engine paths can be tested locally.
//!
//! All tests share one emulator (`Emulator::shared`) and run in parallel; every
//! resource name comes from `unique_name`, so they never collide — also not
//! with a long-lived emulator given through `STACKFLOW_TEST_ENDPOINT`.
//!
//! They test the emulator, not stackflow, so they are out of the default run
//! (`#[ignore]`). `.ci/test` runs them once after each emulator install (every fresh
//! machine, every version change: `.ci/install-fakecloud` leaves a marker), or when
//! `STACKFLOW_EMULATOR_SMOKE=1`; by hand: `cargo test --workspace --test
//! emulator_smoke -- --ignored`.
//!
//! Kept in one file on purpose: each file under `tests/` links its own binary
//! with every AWS SDK in it, which is slow on 2 cores.

use std::time::Duration;

use anyhow::{Context as _, Result, anyhow, bail, ensure};
use aws_smithy_types::error::display::DisplayErrorContext;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use stackflow_tests::{Emulator, unique_name};

/// Turns an SDK error into an `anyhow` error that shows the whole cause chain
/// (an `SdkError`'s own `Display` is just "service error").
trait SdkContext<T> {
    fn ctx(self, what: &str) -> Result<T>;
}

impl<T, E> SdkContext<T> for std::result::Result<T, E>
where
    E: std::error::Error,
{
    fn ctx(self, what: &str) -> Result<T> {
        self.map_err(|e| anyhow!("{what}: {}", DisplayErrorContext(&e)))
    }
}

/// The error code of a call that must fail, or an error if it succeeded.
fn error_code<T: std::fmt::Debug, E: ProvideErrorMetadata>(
    result: std::result::Result<T, E>,
    what: &str,
) -> Result<String> {
    match result {
        Ok(value) => bail!("{what} succeeded but must fail: {value:?}"),
        Err(e) => Ok(e.code().unwrap_or("<no error code>").to_string()),
    }
}

async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut attempt: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<T>>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = attempt().await? {
            return Ok(value);
        }
        if tokio::time::Instant::now() >= deadline {
            bail!("{what}: still not the case after {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The account the harness starts fakecloud with (`--account-id`).
const FAKECLOUD_ACCOUNT: &str = stackflow_tests::emulator::ACCOUNT_ID;

fn role_arn(name: &str) -> String {
    format!("arn:aws:iam::{FAKECLOUD_ACCOUNT}:role/{name}")
}

// --- STS -------------------------------------------------------------------

#[tokio::test]
#[ignore = "tests the emulator, not stackflow: run when its version changes (--ignored)"]
async fn sts_get_caller_identity() -> Result<()> {
    let emulator = Emulator::shared().await;
    let sts = aws_sdk_sts::Client::new(&emulator.sdk_config().await);
    let me = sts
        .get_caller_identity()
        .send()
        .await
        .ctx("GetCallerIdentity")?;
    // fakecloud answers with the account it was started with (123456789012,
    // also its default), for the `test`/`test` keys the root ARN
    // `arn:aws:iam::123456789012:root`, and UserId `FKIAIOSFODNN7EXAMPLE`
    // (Quirk: AWS's root UserId is the account id itself).
    assert_eq!(me.account(), Some(FAKECLOUD_ACCOUNT));
    let arn = me.arn().context("no Arn")?;
    assert_eq!(arn, format!("arn:aws:iam::{FAKECLOUD_ACCOUNT}:root"));
    assert!(me.user_id().is_some_and(|id| !id.is_empty()));
    Ok(())
}

// --- Cloud Control -----------------------------------------------------------

type ProgressEvent = aws_sdk_cloudcontrol::types::ProgressEvent;

/// Polls `GetResourceRequestStatus` until the request is terminal and returns
/// its last `ProgressEvent`, which must be `SUCCESS`.
async fn cloudcontrol_wait(
    cc: &aws_sdk_cloudcontrol::Client,
    event: Option<&ProgressEvent>,
) -> Result<ProgressEvent> {
    use aws_sdk_cloudcontrol::types::OperationStatus;
    let token = event
        .and_then(|e| e.request_token())
        .context("no RequestToken in the ProgressEvent")?
        .to_string();
    let done = eventually("resource request terminal", Duration::from_secs(30), || {
        let token = token.clone();
        async move {
            let status = cc
                .get_resource_request_status()
                .request_token(token)
                .send()
                .await
                .ctx("GetResourceRequestStatus")?;
            let event = status.progress_event.context("no ProgressEvent")?;
            Ok(match event.operation_status() {
                Some(OperationStatus::Pending | OperationStatus::InProgress) => None,
                _ => Some(event),
            })
        }
    })
    .await?;
    ensure!(
        done.operation_status() == Some(&OperationStatus::Success),
        "request {token} ended as {:?}: {:?}",
        done.operation_status(),
        done.status_message()
    );
    Ok(done)
}

async fn cloudcontrol_properties(
    cc: &aws_sdk_cloudcontrol::Client,
    type_name: &str,
    identifier: &str,
) -> Result<serde_json::Value> {
    let got = cc
        .get_resource()
        .type_name(type_name)
        .identifier(identifier)
        .send()
        .await
        .ctx("GetResource")?;
    let description = got.resource_description.context("no ResourceDescription")?;
    assert_eq!(description.identifier(), Some(identifier));
    let properties = description.properties().context("no Properties")?;
    Ok(serde_json::from_str(properties)?)
}

// Cloud Control quirks in fakecloud 0.51.0, beyond the ones at the tests:
// - GetResource/ListResources answer the desired state recorded at the last
//   Create/Update through Cloud Control (plus read-only attributes such as a
//   queue's Arn), not the live resource: a change or even a deletion made
//   through the service's own API is not seen. Drift cannot be tested here.
// - An unsupported type (e.g. AWS::Foo::Bar) is not a TypeNotFoundException:
//   CreateResource succeeds with a FAILED ProgressEvent
//   (GeneralServiceException, "... is not supported by Cloud Control API on
//   fakecloud.").
// - Primary identifiers that differ from AWS's schemas: AWS::IAM::Role is
//   identified by its ARN (AWS: RoleName), AWS::Logs::LogGroup by its ARN
//   with `:*` (AWS: LogGroupName). Others match: SSM::Parameter Name,
//   SQS::Queue QueueUrl, DynamoDB::Table and Lambda::Function names,
//   S3::Bucket name, SNS::Topic and StepFunctions::StateMachine ARNs.
// - Names that AWS generates when absent come out as `Resource-<13 chars>`
//   (bucket: lowercase); an AWS::SSM::Parameter without Name fails ("SSM
//   Parameter requires Name"), on AWS it gets a generated name.

#[tokio::test]
#[ignore = "tests the emulator, not stackflow: run when its version changes (--ignored)"]
async fn cloudcontrol_ssm_parameter_lifecycle() -> Result<()> {
    let emulator = Emulator::shared().await;
    let config = emulator.sdk_config().await;
    let cc = aws_sdk_cloudcontrol::Client::new(&config);
    let ssm = aws_sdk_ssm::Client::new(&config);
    let type_name = "AWS::SSM::Parameter";
    let name = format!("/{}", unique_name("cc-param"));

    let desired = serde_json::json!({"Name": name, "Type": "String", "Value": "one"});
    let created = cc
        .create_resource()
        .type_name(type_name)
        .desired_state(desired.to_string())
        .client_token(unique_name("token"))
        .send()
        .await
        .ctx("CreateResource")?;
    // Quirk: fakecloud provisions synchronously, so the first ProgressEvent is
    // already terminal (AWS answers IN_PROGRESS and the engine must poll);
    // GetResourceRequestStatus is still served and is what the engine uses.
    let done = cloudcontrol_wait(&cc, created.progress_event()).await?;
    // As on AWS, an SSM parameter's primary identifier is its Name.
    assert_eq!(done.identifier(), Some(name.as_str()));
    assert_eq!(done.type_name(), Some(type_name));

    let properties = cloudcontrol_properties(&cc, type_name, &name).await?;
    assert_eq!(properties["Value"], "one");
    assert_eq!(properties["Type"], "String");
    // The parameter really exists in the SSM service.
    let param = ssm
        .get_parameter()
        .name(&name)
        .send()
        .await
        .ctx("GetParameter")?;
    assert_eq!(param.parameter().and_then(|p| p.value()), Some("one"));

    let patch = serde_json::json!([{"op": "replace", "path": "/Value", "value": "two"}]);
    let updated = cc
        .update_resource()
        .type_name(type_name)
        .identifier(&name)
        .patch_document(patch.to_string())
        .send()
        .await
        .ctx("UpdateResource")?;
    cloudcontrol_wait(&cc, updated.progress_event()).await?;
    let properties = cloudcontrol_properties(&cc, type_name, &name).await?;
    assert_eq!(properties["Value"], "two");
    let param = ssm
        .get_parameter()
        .name(&name)
        .send()
        .await
        .ctx("GetParameter")?;
    assert_eq!(param.parameter().and_then(|p| p.value()), Some("two"));

    let deleted = cc
        .delete_resource()
        .type_name(type_name)
        .identifier(&name)
        .send()
        .await
        .ctx("DeleteResource")?;
    cloudcontrol_wait(&cc, deleted.progress_event()).await?;
    let code = error_code(
        cc.get_resource()
            .type_name(type_name)
            .identifier(&name)
            .send()
            .await,
        "GetResource after delete",
    )?;
    assert_eq!(code, "ResourceNotFoundException");
    let code = error_code(
        ssm.get_parameter().name(&name).send().await,
        "GetParameter after delete",
    )?;
    assert_eq!(code, "ParameterNotFound");
    Ok(())
}

#[tokio::test]
#[ignore = "tests the emulator, not stackflow: run when its version changes (--ignored)"]
async fn cloudcontrol_sqs_queue_lifecycle() -> Result<()> {
    let emulator = Emulator::shared().await;
    let config = emulator.sdk_config().await;
    let cc = aws_sdk_cloudcontrol::Client::new(&config);
    let sqs = aws_sdk_sqs::Client::new(&config);
    let type_name = "AWS::SQS::Queue";
    let name = unique_name("cc-queue");

    let desired = serde_json::json!({"QueueName": name, "VisibilityTimeout": 45});
    let created = cc
        .create_resource()
        .type_name(type_name)
        .desired_state(desired.to_string())
        .send()
        .await
        .ctx("CreateResource")?;
    let done = cloudcontrol_wait(&cc, created.progress_event()).await?;
    // As on AWS, a queue's primary identifier is its URL.
    let url = done.identifier().context("no Identifier")?.to_string();
    assert!(url.starts_with("http") && url.ends_with(&name), "{url}");

    let attributes = sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::VisibilityTimeout)
        .send()
        .await
        .ctx("GetQueueAttributes")?;
    let timeout = attributes
        .attributes()
        .and_then(|a| a.get(&aws_sdk_sqs::types::QueueAttributeName::VisibilityTimeout));
    assert_eq!(timeout.map(String::as_str), Some("45"));

    let properties = cloudcontrol_properties(&cc, type_name, &url).await?;
    assert_eq!(properties["QueueName"], name.as_str());

    let deleted = cc
        .delete_resource()
        .type_name(type_name)
        .identifier(&url)
        .send()
        .await
        .ctx("DeleteResource")?;
    cloudcontrol_wait(&cc, deleted.progress_event()).await?;
    let code = error_code(
        sqs.get_queue_url().queue_name(&name).send().await,
        "GetQueueUrl after delete",
    )?;
    assert!(code.contains("NonExistentQueue"), "{code}");
    Ok(())
}

// --- DynamoDB ----------------------------------------------------------------

#[tokio::test]
#[ignore = "tests the emulator, not stackflow: run when its version changes (--ignored)"]
async fn dynamodb_conditional_put_and_paginated_query() -> Result<()> {
    use aws_sdk_dynamodb::types::{
        AttributeDefinition, AttributeValue, BillingMode, KeySchemaElement, KeyType,
        ScalarAttributeType, TableStatus,
    };
    let emulator = Emulator::shared().await;
    let ddb = aws_sdk_dynamodb::Client::new(&emulator.sdk_config().await);
    let table = unique_name("table");

    ddb.create_table()
        .table_name(&table)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name("pk")
                .attribute_type(ScalarAttributeType::S)
                .build()?,
        )
        .attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name("sk")
                .attribute_type(ScalarAttributeType::N)
                .build()?,
        )
        .key_schema(
            KeySchemaElement::builder()
                .attribute_name("pk")
                .key_type(KeyType::Hash)
                .build()?,
        )
        .key_schema(
            KeySchemaElement::builder()
                .attribute_name("sk")
                .key_type(KeyType::Range)
                .build()?,
        )
        .send()
        .await
        .ctx("CreateTable")?;
    eventually("table ACTIVE", Duration::from_secs(30), || async {
        let described = ddb
            .describe_table()
            .table_name(&table)
            .send()
            .await
            .ctx("DescribeTable")?;
        let status = described.table().and_then(|t| t.table_status());
        Ok((status == Some(&TableStatus::Active)).then_some(()))
    })
    .await?;

    // The engine's lock / state writes: a put that only succeeds once.
    let put = || {
        ddb.put_item()
            .table_name(&table)
            .item("pk", AttributeValue::S("lock".into()))
            .item("sk", AttributeValue::N("0".into()))
            .item("owner", AttributeValue::S("first".into()))
            .condition_expression("attribute_not_exists(pk)")
    };
    put().send().await.ctx("first conditional PutItem")?;
    let second = put()
        .item("owner", AttributeValue::S("second".into()))
        .send()
        .await;
    let err = second.expect_err("the second conditional PutItem must fail");
    assert!(
        err.as_service_error()
            .is_some_and(|e| e.is_conditional_check_failed_exception()),
        "{}",
        DisplayErrorContext(&err)
    );
    let item = ddb
        .get_item()
        .table_name(&table)
        .key("pk", AttributeValue::S("lock".into()))
        .key("sk", AttributeValue::N("0".into()))
        .consistent_read(true)
        .send()
        .await
        .ctx("GetItem")?;
    assert_eq!(
        item.item().and_then(|i| i.get("owner")),
        Some(&AttributeValue::S("first".into()))
    );

    const ITEMS: usize = 25;
    for n in 0..ITEMS {
        ddb.put_item()
            .table_name(&table)
            .item("pk", AttributeValue::S("events".into()))
            .item("sk", AttributeValue::N(n.to_string()))
            .item("body", AttributeValue::S(format!("event {n}")))
            .send()
            .await
            .ctx("PutItem")?;
    }
    // Manual pagination over LastEvaluatedKey, as the engine's event reader does.
    let mut pages = 0;
    let mut seen = Vec::new();
    let mut start = None;
    loop {
        let page = ddb
            .query()
            .table_name(&table)
            .key_condition_expression("pk = :pk AND sk >= :from")
            .expression_attribute_values(":pk", AttributeValue::S("events".into()))
            .expression_attribute_values(":from", AttributeValue::N("0".into()))
            .limit(10)
            .set_exclusive_start_key(start)
            .send()
            .await
            .ctx("Query")?;
        pages += 1;
        for item in page.items() {
            match item.get("sk") {
                Some(AttributeValue::N(n)) => seen.push(n.parse::<usize>()?),
                other => bail!("sk is {other:?}"),
            }
        }
        start = page.last_evaluated_key().cloned();
        if start.is_none() {
            break;
        }
        ensure!(pages < 10, "Query does not stop paginating");
    }
    assert_eq!(
        seen,
        (0..ITEMS).collect::<Vec<_>>(),
        "items in sort-key order"
    );
    // 10 + 10 + 5 (AWS may add one empty page when a page ends exactly at
    // the last item; 25 is not a multiple of 10, so exactly 3 pages).
    assert_eq!(pages, 3);
    // The SDK's paginator sees the same items.
    let via_paginator: Vec<_> = ddb
        .query()
        .table_name(&table)
        .key_condition_expression("pk = :pk")
        .expression_attribute_values(":pk", AttributeValue::S("events".into()))
        .limit(7)
        .into_paginator()
        .items()
        .send()
        .collect::<Vec<_>>()
        .await;
    assert_eq!(via_paginator.len(), ITEMS);

    ddb.delete_table()
        .table_name(&table)
        .send()
        .await
        .ctx("DeleteTable")?;
    let code = error_code(
        ddb.describe_table().table_name(&table).send().await,
        "DescribeTable after delete",
    )?;
    assert_eq!(code, "ResourceNotFoundException");
    Ok(())
}

// --- S3 ------------------------------------------------------------------------

/// One HTTP/1.1 request over a plain TCP connection to the (loopback)
/// emulator; returns the status code and the body. Enough for presigned URLs
/// without adding an HTTP client crate.
async fn raw_http(
    method: &str,
    url: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> Result<(u16, Vec<u8>)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.strip_prefix("http://").context("not an http:// URL")?;
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let path = if path.is_empty() { "/" } else { path };
    let mut stream = tokio::net::TcpStream::connect(authority).await?;
    let mut request = format!("{method} {path} HTTP/1.1\r\nHost: {authority}\r\n");
    for (name, value) in headers {
        if !name.eq_ignore_ascii_case("host") && !name.eq_ignore_ascii_case("content-length") {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
    }
    request.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    ));
    stream.write_all(request.as_bytes()).await?;
    stream.write_all(body).await?;
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut response)).await??;
    let split = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .context("no end of headers in the response")?;
    let head = String::from_utf8_lossy(&response[..split]).to_string();
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .context("no status code")?
        .parse()?;
    let mut body = response[split + 4..].to_vec();
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        body = dechunk(&body)?;
    }
    Ok((status, body))
}

fn dechunk(mut data: &[u8]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = data
            .windows(2)
            .position(|w| w == b"\r\n")
            .context("bad chunk")?;
        let size_text = std::str::from_utf8(&data[..line_end])?;
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Ok(out);
        }
        ensure!(data.len() >= size + 2, "truncated chunk");
        out.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}

#[tokio::test]
#[ignore = "tests the emulator, not stackflow: run when its version changes (--ignored)"]
async fn s3_bucket_objects_and_presigned_urls() -> Result<()> {
    use aws_sdk_s3::presigning::PresigningConfig;
    use aws_sdk_s3::primitives::ByteStream;
    let emulator = Emulator::shared().await;
    let s3 = emulator.s3().await;
    let bucket = unique_name("bucket");

    s3.create_bucket()
        .bucket(&bucket)
        .send()
        .await
        .ctx("CreateBucket")?;
    s3.head_bucket()
        .bucket(&bucket)
        .send()
        .await
        .ctx("HeadBucket")?;

    let body = br#"{"template": "yes"}"#;
    let put = s3
        .put_object()
        .bucket(&bucket)
        .key("templates/app.json")
        .content_type("application/json")
        .body(ByteStream::from_static(body))
        .send()
        .await
        .ctx("PutObject")?;
    assert!(put.e_tag().is_some());
    let got = s3
        .get_object()
        .bucket(&bucket)
        .key("templates/app.json")
        .send()
        .await
        .ctx("GetObject")?;
    assert_eq!(got.content_type(), Some("application/json"));
    assert_eq!(got.e_tag(), put.e_tag());
    assert_eq!(got.body.collect().await?.into_bytes().as_ref(), body);

    // A presigned PUT (what the engine hands out for artifact uploads), used
    // by a plain HTTP client.
    let presigned = s3
        .put_object()
        .bucket(&bucket)
        .key("uploads/artifact.zip")
        .presigned(PresigningConfig::expires_in(Duration::from_secs(300))?)
        .await
        .ctx("presign PutObject")?;
    assert_eq!(presigned.method(), "PUT");
    let url = presigned.uri().to_string();
    assert!(url.starts_with(&format!(
        "{}/{bucket}/uploads/artifact.zip?",
        emulator.endpoint()
    )));
    assert!(url.contains("X-Amz-Signature="), "{url}");
    let headers: Vec<(String, String)> = presigned
        .headers()
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect();
    // Quirk: fakecloud does not check signatures (not even with
    // --verify-sigv4, which exempts the `test` key): a presigned URL with a
    // tampered X-Amz-Signature is accepted too, so this proves the URL shape
    // and routing, not the signing.
    let payload = b"PK\x05\x06 not really a zip";
    let (status, response) = raw_http("PUT", &url, &headers, payload).await?;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&response));
    let uploaded = s3
        .get_object()
        .bucket(&bucket)
        .key("uploads/artifact.zip")
        .send()
        .await
        .ctx("GetObject of the presigned upload")?;
    assert_eq!(
        uploaded.body.collect().await?.into_bytes().as_ref(),
        payload
    );

    // And a presigned GET, the other way round.
    let presigned = s3
        .get_object()
        .bucket(&bucket)
        .key("templates/app.json")
        .presigned(PresigningConfig::expires_in(Duration::from_secs(300))?)
        .await
        .ctx("presign GetObject")?;
    let (status, response) = raw_http("GET", presigned.uri(), &[], b"").await?;
    assert_eq!(status, 200);
    assert_eq!(response, body);

    let listed = s3
        .list_objects_v2()
        .bucket(&bucket)
        .send()
        .await
        .ctx("ListObjectsV2")?;
    let mut keys: Vec<&str> = listed.contents().iter().filter_map(|o| o.key()).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["templates/app.json", "uploads/artifact.zip"]);

    for key in keys {
        s3.delete_object()
            .bucket(&bucket)
            .key(key)
            .send()
            .await
            .ctx("DeleteObject")?;
    }
    s3.delete_bucket()
        .bucket(&bucket)
        .send()
        .await
        .ctx("DeleteBucket")?;
    let code = error_code(
        s3.head_bucket().bucket(&bucket).send().await,
        "HeadBucket after delete",
    )?;
    // HeadBucket has no body, so the SDK only sees the 404 status.
    assert_eq!(code, "NotFound");
    Ok(())
}

// --- Step Functions --------------------------------------------------------------

#[tokio::test]
#[ignore = "tests the emulator, not stackflow: run when its version changes (--ignored)"]
async fn stepfunctions_activity_task_round_trip() -> Result<()> {
    use aws_sdk_sfn::types::ExecutionStatus;
    let emulator = Emulator::shared().await;
    let sfn = aws_sdk_sfn::Client::new(&emulator.sdk_config().await);

    let activity = sfn
        .create_activity()
        .name(unique_name("activity"))
        .send()
        .await
        .ctx("CreateActivity")?;
    let activity_arn = activity.activity_arn().to_string();
    assert!(
        activity_arn.starts_with(&format!(
            "arn:aws:states:us-east-1:{FAKECLOUD_ACCOUNT}:activity:"
        )),
        "{activity_arn}"
    );

    let definition = serde_json::json!({
        "StartAt": "Work",
        "States": {
            "Work": {"Type": "Task", "Resource": activity_arn, "TimeoutSeconds": 60, "End": true}
        }
    });
    let machine = sfn
        .create_state_machine()
        .name(unique_name("machine"))
        .definition(definition.to_string())
        .role_arn(role_arn("stackflow-sfn"))
        .send()
        .await
        .ctx("CreateStateMachine")?;
    let machine_arn = machine.state_machine_arn().to_string();

    let execution_name = unique_name("deploy");
    let input = serde_json::json!({"stack": "app", "step": 1}).to_string();
    let started = sfn
        .start_execution()
        .state_machine_arn(&machine_arn)
        .name(&execution_name)
        .input(&input)
        .send()
        .await
        .ctx("StartExecution")?;
    let execution_arn = started.execution_arn().to_string();
    // Execution names are the engine's idempotency key. As on AWS, starting
    // a running execution again with the same name and input is a no-op that
    // answers the same execution ARN; a different input is refused.
    let again = sfn
        .start_execution()
        .state_machine_arn(&machine_arn)
        .name(&execution_name)
        .input(&input)
        .send()
        .await
        .ctx("StartExecution again while running")?;
    assert_eq!(again.execution_arn(), execution_arn);
    let other_input = sfn
        .start_execution()
        .state_machine_arn(&machine_arn)
        .name(&execution_name)
        .input(r#"{"stack": "other"}"#)
        .send()
        .await;
    assert_eq!(
        error_code(other_input, "StartExecution, same name, other input")?,
        "ExecutionAlreadyExists"
    );

    // The worker side: poll for the task, then report success.
    // Quirk: fakecloud's GetActivityTask long-polls 5 s (not AWS's 60 s;
    // FAKECLOUD_SFN_GET_ACTIVITY_TIMEOUT_SECS) and then answers an empty token.
    let task = eventually("an activity task", Duration::from_secs(30), || async {
        let task = sfn
            .get_activity_task()
            .activity_arn(&activity_arn)
            .worker_name("stackflow-test-worker")
            .send()
            .await
            .ctx("GetActivityTask")?;
        Ok(task
            .task_token()
            .filter(|t| !t.is_empty())
            .is_some()
            .then_some(task))
    })
    .await?;
    let task_input: serde_json::Value =
        serde_json::from_str(task.input().context("no task input")?)?;
    assert_eq!(
        task_input,
        serde_json::from_str::<serde_json::Value>(&input)?
    );
    let output = serde_json::json!({"result": "done"}).to_string();
    sfn.send_task_success()
        .task_token(task.task_token().context("no token")?)
        .output(&output)
        .send()
        .await
        .ctx("SendTaskSuccess")?;

    let described = eventually("execution SUCCEEDED", Duration::from_secs(30), || async {
        let described = sfn
            .describe_execution()
            .execution_arn(&execution_arn)
            .send()
            .await
            .ctx("DescribeExecution")?;
        Ok(match described.status() {
            ExecutionStatus::Running => None,
            _ => Some(described),
        })
    })
    .await?;
    assert_eq!(described.status(), &ExecutionStatus::Succeeded);
    assert_eq!(described.name(), Some(execution_name.as_str()));
    let final_output: serde_json::Value =
        serde_json::from_str(described.output().context("no output")?)?;
    assert_eq!(final_output, serde_json::json!({"result": "done"}));

    // Reusing the name of a closed execution with another input is refused.
    let other_input = sfn
        .start_execution()
        .state_machine_arn(&machine_arn)
        .name(&execution_name)
        .input(r#"{"stack": "other"}"#)
        .send()
        .await;
    assert_eq!(
        error_code(other_input, "StartExecution of a closed execution's name")?,
        "ExecutionAlreadyExists"
    );
    // Quirk: AWS also refuses the same name with the SAME input once the
    // execution is closed (ExecutionAlreadyExists); fakecloud keeps treating
    // it as idempotent and answers the old execution's ARN without running
    // anything. Either way no second execution runs; the engine must not rely
    // on getting the error.
    match sfn
        .start_execution()
        .state_machine_arn(&machine_arn)
        .name(&execution_name)
        .input(&input)
        .send()
        .await
    {
        Ok(replayed) => assert_eq!(replayed.execution_arn(), execution_arn),
        Err(e) => assert_eq!(e.code(), Some("ExecutionAlreadyExists")),
    }
    let executions = sfn
        .list_executions()
        .state_machine_arn(&machine_arn)
        .send()
        .await
        .ctx("ListExecutions")?;
    assert_eq!(executions.executions().len(), 1);

    sfn.delete_state_machine()
        .state_machine_arn(&machine_arn)
        .send()
        .await
        .ctx("DeleteStateMachine")?;
    sfn.delete_activity()
        .activity_arn(&activity_arn)
        .send()
        .await
        .ctx("DeleteActivity")?;
    Ok(())
}

// --- SSM -------------------------------------------------------------------------

#[tokio::test]
#[ignore = "tests the emulator, not stackflow: run when its version changes (--ignored)"]
async fn ssm_parameters() -> Result<()> {
    use aws_sdk_ssm::types::ParameterType;
    let emulator = Emulator::shared().await;
    let ssm = aws_sdk_ssm::Client::new(&emulator.sdk_config().await);
    let plain = format!("/stackflow/{}/plain", unique_name("ssm"));
    let secret = format!("/stackflow/{}/secret", unique_name("ssm"));

    let put = ssm
        .put_parameter()
        .name(&plain)
        .value("v1")
        .r#type(ParameterType::String)
        .send()
        .await
        .ctx("PutParameter")?;
    assert_eq!(put.version(), 1);
    let code = error_code(
        ssm.put_parameter()
            .name(&plain)
            .value("v2")
            .r#type(ParameterType::String)
            .send()
            .await,
        "PutParameter without Overwrite",
    )?;
    assert_eq!(code, "ParameterAlreadyExists");
    let put = ssm
        .put_parameter()
        .name(&plain)
        .value("v2")
        .r#type(ParameterType::String)
        .overwrite(true)
        .send()
        .await
        .ctx("PutParameter with Overwrite")?;
    assert_eq!(put.version(), 2);
    let got = ssm
        .get_parameter()
        .name(&plain)
        .send()
        .await
        .ctx("GetParameter")?;
    let parameter = got.parameter().context("no Parameter")?;
    assert_eq!(parameter.value(), Some("v2"));
    assert_eq!(parameter.version(), 2);
    assert_eq!(parameter.r#type(), Some(&ParameterType::String));
    assert!(
        parameter
            .arn()
            .is_some_and(|arn| arn.ends_with(&format!("parameter{plain}")))
    );

    ssm.put_parameter()
        .name(&secret)
        .value("hunter2")
        .r#type(ParameterType::SecureString)
        .send()
        .await
        .ctx("PutParameter SecureString")?;
    let decrypted = ssm
        .get_parameter()
        .name(&secret)
        .with_decryption(true)
        .send()
        .await
        .ctx("GetParameter WithDecryption")?;
    let parameter = decrypted.parameter().context("no Parameter")?;
    assert_eq!(parameter.value(), Some("hunter2"));
    assert_eq!(parameter.r#type(), Some(&ParameterType::SecureString));
    let encrypted = ssm
        .get_parameter()
        .name(&secret)
        .with_decryption(false)
        .send()
        .await
        .ctx("GetParameter without decryption")?;
    // As on AWS, without decryption the value is not the plaintext.
    // Quirk: it reads `kms:alias/aws/ssm:<base64>`, where AWS gives a bare
    // base64 ciphertext blob.
    let value = encrypted
        .parameter()
        .and_then(|p| p.value())
        .unwrap_or_default();
    assert_ne!(value, "hunter2");

    // GetParameters reports unknown names instead of failing (used by the
    // engine's dynamic-reference resolution).
    let missing = format!("/stackflow/{}/missing", unique_name("ssm"));
    let many = ssm
        .get_parameters()
        .names(&plain)
        .names(&missing)
        .send()
        .await
        .ctx("GetParameters")?;
    assert_eq!(many.parameters().len(), 1);
    assert_eq!(many.invalid_parameters(), [missing]);

    for name in [&plain, &secret] {
        ssm.delete_parameter()
            .name(name)
            .send()
            .await
            .ctx("DeleteParameter")?;
    }
    let code = error_code(
        ssm.get_parameter().name(&plain).send().await,
        "GetParameter after delete",
    )?;
    assert_eq!(code, "ParameterNotFound");
    Ok(())
}

// --- SQS -------------------------------------------------------------------------

#[tokio::test]
#[ignore = "tests the emulator, not stackflow: run when its version changes (--ignored)"]
async fn sqs_queue_messages() -> Result<()> {
    use aws_sdk_sqs::types::QueueAttributeName;
    let emulator = Emulator::shared().await;
    let sqs = aws_sdk_sqs::Client::new(&emulator.sdk_config().await);
    let name = unique_name("queue");

    let created = sqs
        .create_queue()
        .queue_name(&name)
        .send()
        .await
        .ctx("CreateQueue")?;
    let url = created.queue_url().context("no QueueUrl")?.to_string();
    // Quirk: queue URLs point at the emulator (http://127.0.0.1:PORT/ACCOUNT/NAME),
    // not at https://sqs.us-east-1.amazonaws.com/ACCOUNT/NAME.
    assert!(
        url.ends_with(&format!("/{FAKECLOUD_ACCOUNT}/{name}")),
        "{url}"
    );
    let looked_up = sqs
        .get_queue_url()
        .queue_name(&name)
        .send()
        .await
        .ctx("GetQueueUrl")?;
    assert_eq!(looked_up.queue_url(), Some(url.as_str()));
    let attributes = sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .ctx("GetQueueAttributes")?;
    let arn = attributes
        .attributes()
        .and_then(|a| a.get(&QueueAttributeName::QueueArn));
    assert_eq!(
        arn.map(String::as_str),
        Some(format!("arn:aws:sqs:us-east-1:{FAKECLOUD_ACCOUNT}:{name}").as_str())
    );

    sqs.send_message()
        .queue_url(&url)
        .message_body("hello")
        .send()
        .await
        .ctx("SendMessage")?;
    let received = sqs
        .receive_message()
        .queue_url(&url)
        .wait_time_seconds(5)
        .max_number_of_messages(10)
        .send()
        .await
        .ctx("ReceiveMessage")?;
    let messages = received.messages();
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].body(), Some("hello"));
    sqs.delete_message()
        .queue_url(&url)
        .receipt_handle(messages[0].receipt_handle().context("no ReceiptHandle")?)
        .send()
        .await
        .ctx("DeleteMessage")?;

    sqs.delete_queue()
        .queue_url(&url)
        .send()
        .await
        .ctx("DeleteQueue")?;
    let code = error_code(
        sqs.get_queue_url().queue_name(&name).send().await,
        "GetQueueUrl after delete",
    )?;
    assert!(code.contains("NonExistentQueue"), "{code}");
    Ok(())
}

// --- SNS -------------------------------------------------------------------------

#[tokio::test]
#[ignore = "tests the emulator, not stackflow: run when its version changes (--ignored)"]
async fn sns_topic_to_sqs_subscription() -> Result<()> {
    use aws_sdk_sqs::types::QueueAttributeName;
    let emulator = Emulator::shared().await;
    let config = emulator.sdk_config().await;
    let sns = aws_sdk_sns::Client::new(&config);
    let sqs = aws_sdk_sqs::Client::new(&config);

    let topic_name = unique_name("topic");
    let topic = sns
        .create_topic()
        .name(&topic_name)
        .send()
        .await
        .ctx("CreateTopic")?;
    let topic_arn = topic.topic_arn().context("no TopicArn")?.to_string();
    assert_eq!(
        topic_arn,
        format!("arn:aws:sns:us-east-1:{FAKECLOUD_ACCOUNT}:{topic_name}")
    );

    let queue = sqs
        .create_queue()
        .queue_name(unique_name("sns-target"))
        .send()
        .await
        .ctx("CreateQueue")?;
    let queue_url = queue.queue_url().context("no QueueUrl")?.to_string();
    let attributes = sqs
        .get_queue_attributes()
        .queue_url(&queue_url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .ctx("GetQueueAttributes")?;
    let queue_arn = attributes
        .attributes()
        .and_then(|a| a.get(&QueueAttributeName::QueueArn))
        .context("no QueueArn")?
        .clone();
    // Quirk: on AWS the queue also needs a policy letting the topic send to
    // it; fakecloud delivers without one (IAM evaluation is off by default).
    let subscription = sns
        .subscribe()
        .topic_arn(&topic_arn)
        .protocol("sqs")
        .endpoint(&queue_arn)
        .return_subscription_arn(true)
        .send()
        .await
        .ctx("Subscribe")?;
    let subscription_arn = subscription
        .subscription_arn()
        .context("no SubscriptionArn")?;
    assert!(
        subscription_arn.starts_with(&format!("{topic_arn}:")),
        "{subscription_arn}"
    );

    // Quirk: the first message an emulator process signs (the envelope's
    // Signature) makes it generate an RSA-2048 key; in the unoptimized
    // (`--debug`) fakecloud build that Publish takes 2-7 s. Later ones are fast.
    let published = sns
        .publish()
        .topic_arn(&topic_arn)
        .subject("deploy")
        .message(r#"{"stack":"app","status":"DONE"}"#)
        .send()
        .await
        .ctx("Publish")?;
    let message_id = published.message_id().context("no MessageId")?.to_string();

    let body = eventually(
        "the SNS message in the queue",
        Duration::from_secs(20),
        || async {
            let received = sqs
                .receive_message()
                .queue_url(&queue_url)
                .wait_time_seconds(2)
                .send()
                .await
                .ctx("ReceiveMessage")?;
            Ok(received
                .messages()
                .first()
                .and_then(|m| m.body())
                .map(str::to_string))
        },
    )
    .await?;
    // Not raw delivery: the SNS JSON envelope.
    let envelope: serde_json::Value = serde_json::from_str(&body)?;
    assert_eq!(envelope["Type"], "Notification");
    assert_eq!(envelope["MessageId"], message_id.as_str());
    assert_eq!(envelope["TopicArn"], topic_arn.as_str());
    assert_eq!(envelope["Subject"], "deploy");
    assert_eq!(envelope["Message"], r#"{"stack":"app","status":"DONE"}"#);

    sns.unsubscribe()
        .subscription_arn(subscription_arn)
        .send()
        .await
        .ctx("Unsubscribe")?;
    sns.delete_topic()
        .topic_arn(&topic_arn)
        .send()
        .await
        .ctx("DeleteTopic")?;
    sqs.delete_queue()
        .queue_url(&queue_url)
        .send()
        .await
        .ctx("DeleteQueue")?;
    let code = error_code(
        sns.get_topic_attributes()
            .topic_arn(&topic_arn)
            .send()
            .await,
        "GetTopicAttributes after delete",
    )?;
    assert_eq!(code, "NotFound");
    Ok(())
}

// --- IAM -------------------------------------------------------------------------

#[tokio::test]
#[ignore = "tests the emulator, not stackflow: run when its version changes (--ignored)"]
async fn iam_role_lifecycle() -> Result<()> {
    let emulator = Emulator::shared().await;
    let iam = aws_sdk_iam::Client::new(&emulator.sdk_config().await);
    let name = unique_name("role");
    let trust = serde_json::json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Principal": {"Service": "states.amazonaws.com"},
            "Action": "sts:AssumeRole"
        }]
    });

    let created = iam
        .create_role()
        .role_name(&name)
        .path("/stackflow/")
        .assume_role_policy_document(trust.to_string())
        .description("stackflow test role")
        .send()
        .await
        .ctx("CreateRole")?;
    let role = created.role().context("no Role")?;
    assert_eq!(
        role.arn(),
        format!("arn:aws:iam::{FAKECLOUD_ACCOUNT}:role/stackflow/{name}")
    );
    assert!(role.role_id().starts_with("AROA"), "{}", role.role_id());

    let got = iam
        .get_role()
        .role_name(&name)
        .send()
        .await
        .ctx("GetRole")?;
    let role = got.role().context("no Role")?;
    assert_eq!(role.role_name(), name);
    assert_eq!(role.path(), "/stackflow/");
    assert_eq!(role.description(), Some("stackflow test role"));
    // As on AWS, the policy document comes back URL-encoded (RFC 3986).
    let document = role
        .assume_role_policy_document()
        .context("no trust policy")?;
    assert!(document.starts_with("%7B"), "{document}");
    let document = percent_decode(document)?;
    assert_eq!(serde_json::from_str::<serde_json::Value>(&document)?, trust);

    let policy = serde_json::json!({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": "*"}]
    });
    iam.put_role_policy()
        .role_name(&name)
        .policy_name("inline")
        .policy_document(policy.to_string())
        .send()
        .await
        .ctx("PutRolePolicy")?;
    let policies = iam
        .list_role_policies()
        .role_name(&name)
        .send()
        .await
        .ctx("ListRolePolicies")?;
    assert_eq!(policies.policy_names(), ["inline"]);
    // AWS refuses to delete a role that still has inline policies.
    let code = error_code(
        iam.delete_role().role_name(&name).send().await,
        "DeleteRole with an inline policy",
    )?;
    assert_eq!(code, "DeleteConflict");
    iam.delete_role_policy()
        .role_name(&name)
        .policy_name("inline")
        .send()
        .await
        .ctx("DeleteRolePolicy")?;
    iam.delete_role()
        .role_name(&name)
        .send()
        .await
        .ctx("DeleteRole")?;
    let code = error_code(
        iam.get_role().role_name(&name).send().await,
        "GetRole after delete",
    )?;
    assert_eq!(code, "NoSuchEntity");
    Ok(())
}

fn percent_decode(text: &str) -> Result<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3])?;
                out.push(u8::from_str_radix(hex, 16)?);
                i += 3;
            }
            byte => {
                out.push(byte);
                i += 1;
            }
        }
    }
    Ok(String::from_utf8(out)?)
}

// --- Secrets Manager ---------------------------------------------------------------

#[tokio::test]
#[ignore = "tests the emulator, not stackflow: run when its version changes (--ignored)"]
async fn secretsmanager_json_secret() -> Result<()> {
    let emulator = Emulator::shared().await;
    let secrets = aws_sdk_secretsmanager::Client::new(&emulator.sdk_config().await);
    let name = format!("stackflow/{}", unique_name("secret"));
    let value = serde_json::json!({"username": "app", "password": "s3cr3t!"});

    let created = secrets
        .create_secret()
        .name(&name)
        .secret_string(value.to_string())
        .send()
        .await
        .ctx("CreateSecret")?;
    let arn = created.arn().context("no ARN")?.to_string();
    // As on AWS: the ARN ends with the name, a dash and 6 random characters.
    let prefix = format!("arn:aws:secretsmanager:us-east-1:{FAKECLOUD_ACCOUNT}:secret:{name}-");
    assert!(
        arn.starts_with(&prefix) && arn.len() == prefix.len() + 6,
        "{arn}"
    );

    for id in [&name, &arn] {
        let got = secrets
            .get_secret_value()
            .secret_id(id)
            .send()
            .await
            .ctx("GetSecretValue")?;
        assert_eq!(got.arn(), Some(arn.as_str()));
        assert_eq!(got.name(), Some(name.as_str()));
        assert!(got.version_stages().iter().any(|s| s == "AWSCURRENT"));
        let parsed: serde_json::Value =
            serde_json::from_str(got.secret_string().context("no SecretString")?)?;
        // `{{resolve:secretsmanager:NAME:SecretString:password}}` reads this key.
        assert_eq!(parsed["password"], "s3cr3t!");
        assert_eq!(parsed, value);
    }

    secrets
        .delete_secret()
        .secret_id(&name)
        .force_delete_without_recovery(true)
        .send()
        .await
        .ctx("DeleteSecret")?;
    let code = error_code(
        secrets.get_secret_value().secret_id(&name).send().await,
        "GetSecretValue after delete",
    )?;
    assert_eq!(code, "ResourceNotFoundException");
    Ok(())
}

// --- CloudFormation ------------------------------------------------------------------

#[tokio::test]
#[ignore = "tests the emulator, not stackflow: run when its version changes (--ignored)"]
async fn cloudformation_exports_and_missing_stack() -> Result<()> {
    use aws_sdk_cloudformation::types::StackStatus;
    let emulator = Emulator::shared().await;
    let cfn = aws_sdk_cloudformation::Client::new(&emulator.sdk_config().await);

    // The engine reads the exports of stacks that CloudFormation deployed
    // (Fn::ImportValue fallback), so make one: fakecloud runs CreateStack.
    let stack = unique_name("stack");
    let export_name = format!("{stack}-param");
    // Quirk: the parameter needs a Name here; AWS would generate one.
    let template = serde_json::json!({
        "Resources": {
            "Param": {
                "Type": "AWS::SSM::Parameter",
                "Properties": {"Name": format!("/{stack}"), "Type": "String", "Value": "v"}
            }
        },
        "Outputs": {
            "ParamName": {"Value": {"Ref": "Param"}, "Export": {"Name": export_name}}
        }
    });
    let created = cfn
        .create_stack()
        .stack_name(&stack)
        .template_body(template.to_string())
        .send()
        .await
        .ctx("CreateStack")?;
    let stack_id = created.stack_id().context("no StackId")?.to_string();
    let described = eventually("stack CREATE_COMPLETE", Duration::from_secs(30), || async {
        let described = cfn
            .describe_stacks()
            .stack_name(&stack)
            .send()
            .await
            .ctx("DescribeStacks")?;
        let stack = described.stacks().first().cloned().context("no stack")?;
        Ok(match stack.stack_status() {
            Some(StackStatus::CreateInProgress) => None,
            _ => Some(stack),
        })
    })
    .await?;
    assert_eq!(described.stack_status(), Some(&StackStatus::CreateComplete));
    assert_eq!(described.stack_id(), Some(stack_id.as_str()));
    let output = described.outputs().first().context("no output")?;
    assert_eq!(output.output_value(), Some(format!("/{stack}").as_str()));
    assert_eq!(output.export_name(), Some(export_name.as_str()));
    // Quirk: DescribeStacks lists the pseudo parameters (AWS::AccountId,
    // AWS::Region, AWS::StackName, ...) among the stack's Parameters; AWS
    // lists only the template's own parameters.

    let exports = cfn.list_exports().send().await.ctx("ListExports")?;
    let export = exports
        .exports()
        .iter()
        .find(|e| e.name() == Some(export_name.as_str()))
        .context("the stack's export is not listed")?;
    assert_eq!(export.value(), Some(format!("/{stack}").as_str()));
    assert_eq!(export.exporting_stack_id(), Some(stack_id.as_str()));

    cfn.delete_stack()
        .stack_name(&stack)
        .send()
        .await
        .ctx("DeleteStack")?;
    eventually("export gone", Duration::from_secs(30), || async {
        let exports = cfn.list_exports().send().await.ctx("ListExports")?;
        Ok((!exports
            .exports()
            .iter()
            .any(|e| e.name() == Some(export_name.as_str())))
        .then_some(()))
    })
    .await?;

    // A stack that does not exist (or, by name, no longer exists).
    for name in [stack, unique_name("missing-stack")] {
        let described = cfn.describe_stacks().stack_name(&name).send().await;
        let err = described.expect_err("DescribeStacks of a missing stack must fail");
        // As on AWS: a ValidationError, not a "not found" code, with this message.
        assert_eq!(
            err.code(),
            Some("ValidationError"),
            "{}",
            DisplayErrorContext(&err)
        );
        assert_eq!(
            err.message(),
            Some(format!("Stack with id {name} does not exist").as_str())
        );
    }
    Ok(())
}

// --- Lambda ------------------------------------------------------------------------

/// A zip archive (stored, not compressed) holding one executable file.
fn zip_one_file(name: &str, data: &[u8]) -> Result<Vec<u8>> {
    fn crc32(data: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &byte in data {
            crc ^= u32::from(byte);
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0xEDB8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }
    let crc = crc32(data);
    let size = u32::try_from(data.len())?;
    let name_len = u16::try_from(name.len())?;
    let dos_date: u16 = 0x21; // 1980-01-01
    let mut out = Vec::new();
    // Local file header.
    out.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
    for field in [20u16, 0, 0, 0, dos_date] {
        out.extend_from_slice(&field.to_le_bytes());
    }
    for field in [crc, size, size] {
        out.extend_from_slice(&field.to_le_bytes());
    }
    out.extend_from_slice(&name_len.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(data);
    // Central directory.
    let central_start = u32::try_from(out.len())?;
    out.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
    for field in [(3u16 << 8) | 20, 20, 0, 0, 0, dos_date] {
        out.extend_from_slice(&field.to_le_bytes());
    }
    for field in [crc, size, size] {
        out.extend_from_slice(&field.to_le_bytes());
    }
    for field in [name_len, 0, 0, 0, 0] {
        out.extend_from_slice(&field.to_le_bytes());
    }
    out.extend_from_slice(&(0o100_755u32 << 16).to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(name.as_bytes());
    let central_size = u32::try_from(out.len())? - central_start;
    // End of central directory.
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    for field in [0u16, 0, 1, 1] {
        out.extend_from_slice(&field.to_le_bytes());
    }
    out.extend_from_slice(&central_size.to_le_bytes());
    out.extend_from_slice(&central_start.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    Ok(out)
}

#[tokio::test]
#[ignore = "tests the emulator, not stackflow: run when its version changes (--ignored)"]
async fn lambda_function_from_inline_zip() -> Result<()> {
    use aws_sdk_lambda::primitives::Blob;
    use aws_sdk_lambda::types::{Architecture, FunctionCode, Runtime, State};
    let emulator = Emulator::shared().await;
    let lambda = aws_sdk_lambda::Client::new(&emulator.sdk_config().await);
    let name = unique_name("function");
    let zip = zip_one_file("bootstrap", b"#!/bin/sh\necho not a real runtime\n")?;

    let created = lambda
        .create_function()
        .function_name(&name)
        .runtime(Runtime::Providedal2023)
        .handler("bootstrap")
        .architectures(Architecture::Arm64)
        .role(role_arn("stackflow-lambda"))
        .code(
            FunctionCode::builder()
                .zip_file(Blob::new(zip.clone()))
                .build(),
        )
        .timeout(30)
        .memory_size(256)
        .environment(
            aws_sdk_lambda::types::Environment::builder()
                .variables("STACKFLOW_TABLE", "events")
                .build(),
        )
        .send()
        .await
        .ctx("CreateFunction")?;
    assert_eq!(
        created.function_arn(),
        Some(format!("arn:aws:lambda:us-east-1:{FAKECLOUD_ACCOUNT}:function:{name}").as_str())
    );
    assert_eq!(created.code_size(), i64::try_from(zip.len())?);

    // Quirk: fakecloud answers CreateFunction with State Active and
    // LastUpdateStatus Successful at once (AWS: Pending first), so the
    // engine's wait-for-Active loop ends on its first poll here.
    let active = eventually("function Active", Duration::from_secs(30), || async {
        let got = lambda
            .get_function()
            .function_name(&name)
            .send()
            .await
            .ctx("GetFunction")?;
        let configuration = got.configuration.context("no Configuration")?;
        Ok((configuration.state() == Some(&State::Active)).then_some(configuration))
    })
    .await?;
    assert_eq!(active.runtime(), Some(&Runtime::Providedal2023));
    assert_eq!(active.handler(), Some("bootstrap"));
    assert_eq!(active.memory_size(), Some(256));
    assert_eq!(active.architectures(), [Architecture::Arm64]);
    let variables = active.environment().and_then(|e| e.variables());
    assert_eq!(
        variables
            .and_then(|v| v.get("STACKFLOW_TABLE"))
            .map(String::as_str),
        Some("events")
    );
    // Invoke is not exercised: fakecloud runs functions in containers, and
    // with no Docker/Podman daemon (this machine, CI) Invoke answers HTTP 500
    // ServiceException "Docker/Podman is required for Lambda execution but
    // is not available". Create/Get/Update/Delete need no container.

    lambda
        .delete_function()
        .function_name(&name)
        .send()
        .await
        .ctx("DeleteFunction")?;
    let code = error_code(
        lambda.get_function().function_name(&name).send().await,
        "GetFunction after delete",
    )?;
    assert_eq!(code, "ResourceNotFoundException");
    Ok(())
}

// --- CloudWatch Logs -----------------------------------------------------------------

#[tokio::test]
#[ignore = "tests the emulator, not stackflow: run when its version changes (--ignored)"]
async fn cloudwatch_logs_group_stream_events() -> Result<()> {
    use aws_sdk_cloudwatchlogs::types::InputLogEvent;
    let emulator = Emulator::shared().await;
    let logs = aws_sdk_cloudwatchlogs::Client::new(&emulator.sdk_config().await);
    let group = format!("/aws/lambda/{}", unique_name("logs"));

    logs.create_log_group()
        .log_group_name(&group)
        .send()
        .await
        .ctx("CreateLogGroup")?;
    let code = error_code(
        logs.create_log_group().log_group_name(&group).send().await,
        "CreateLogGroup twice",
    )?;
    assert_eq!(code, "ResourceAlreadyExistsException");
    logs.put_retention_policy()
        .log_group_name(&group)
        .retention_in_days(14)
        .send()
        .await
        .ctx("PutRetentionPolicy")?;
    let described = logs
        .describe_log_groups()
        .log_group_name_prefix(&group)
        .send()
        .await
        .ctx("DescribeLogGroups")?;
    let groups = described.log_groups();
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].log_group_name(), Some(group.as_str()));
    assert_eq!(groups[0].retention_in_days(), Some(14));
    assert!(groups[0].arn().is_some_and(|arn| arn.contains(&group)));

    logs.create_log_stream()
        .log_group_name(&group)
        .log_stream_name("stream")
        .send()
        .await
        .ctx("CreateLogStream")?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis();
    let now = i64::try_from(now)?;
    logs.put_log_events()
        .log_group_name(&group)
        .log_stream_name("stream")
        .log_events(
            InputLogEvent::builder()
                .timestamp(now)
                .message("first")
                .build()?,
        )
        .log_events(
            InputLogEvent::builder()
                .timestamp(now + 1)
                .message("second")
                .build()?,
        )
        .send()
        .await
        .ctx("PutLogEvents")?;
    let events = logs
        .get_log_events()
        .log_group_name(&group)
        .log_stream_name("stream")
        .start_from_head(true)
        .send()
        .await
        .ctx("GetLogEvents")?;
    let messages: Vec<&str> = events.events().iter().filter_map(|e| e.message()).collect();
    assert_eq!(messages, ["first", "second"]);

    logs.delete_log_group()
        .log_group_name(&group)
        .send()
        .await
        .ctx("DeleteLogGroup")?;
    let described = logs
        .describe_log_groups()
        .log_group_name_prefix(&group)
        .send()
        .await
        .ctx("DescribeLogGroups after delete")?;
    assert!(described.log_groups().is_empty());
    Ok(())
}

// --- The harness itself --------------------------------------------------------------

#[tokio::test]
#[ignore = "tests the emulator, not stackflow: run when its version changes (--ignored)"]
async fn harness_shares_one_loopback_emulator() -> Result<()> {
    let first = Emulator::shared().await;
    let second = Emulator::shared().await;
    assert!(std::ptr::eq(first, second));
    assert!(first.endpoint().starts_with("http://127.0.0.1:") || !first.is_managed());
    if first.is_managed() {
        assert_eq!(
            first.version(),
            Some(stackflow_tests::emulator::FAKECLOUD_VERSION)
        );
        let log = first.log_path().context("no log path")?;
        let text = std::fs::read_to_string(log)?;
        assert!(text.contains("FAKECLOUD_PORT="), "{}", log.display());
    }
    Ok(())
}
