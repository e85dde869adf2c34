//! The SDK providers of permissions, subscriptions and resource policies against the local
//! emulator (fakecloud 0.51.0), through the real SDK clients: `AWS::SNS::Subscription`,
//! `AWS::SQS::QueuePolicy`, `AWS::S3::BucketPolicy`, `AWS::Lambda::Permission` and
//! `AWS::Lambda::EventSourceMapping`. The topic, queues, bucket and function they need are
//! made with the plain SDK clients.
//!
//! Each test is a round trip: create from template properties; a replay of the create (same
//! token) either answers what the first one made (permission, queue policy: their ids are
//! made of the token) or is refused as taken and then found by `import` of the same request
//! (subscription, bucket policy, event source mapping: what the engine does when it replays
//! its own interrupted create); `read_current_state` gives the template's properties back in
//! the same shape; update; read again; a change that needs a new resource is
//! `NotUpdatable`; delete, delete again (gone is success); then `read_current_state` says
//! not found and `import` says not deployed yet. Each also shows that a create never takes
//! over what another owner made (a subscription, a queue's policy, a mapping made out of
//! band), and leaves it as it was.
//!
//! What the emulator cannot show, so these tests do not prove it:
//! - Event source mappings are metadata only: no message is polled, so nothing proves a
//!   mapping delivers, nor that `Enabled: false` stops it. fakecloud's
//!   `EventSourceMappingArn` is `{function ARN}:event-source-mapping/{uuid}`, where AWS
//!   answers `arn:...:event-source-mapping:{uuid}`: the test checks only that the
//!   attribute is the ARN Lambda answered.
//! - fakecloud's `UpdateEventSourceMapping` records a mangled ARN when `FunctionName` is an
//!   ARN (it puts `...:function:` in front of it again): the update here moves the mapping
//!   to another function named by its name, so a move to a function given by its ARN is not
//!   shown (a create with the function's ARN is).
//! - No mapping is ever `Creating`/`Updating`, so the retry of `ResourceInUseException`
//!   is not exercised.
//! - fakecloud does not enforce any of these policies, and confirms SQS subscriptions at
//!   once (no `PendingConfirmation`).
//! - After its last statement is removed a function answers an empty policy, where AWS
//!   answers `ResourceNotFoundException`; both read as "gone" here, the second is not
//!   exercised.

use aws_sdk_lambda::primitives::Blob;
use aws_sdk_lambda::types::{FunctionCode, Runtime};
use aws_sdk_sqs::types::QueueAttributeName;
use serde_json::{Value, json};
use stackflow_providers::sdk::lambda::zip_single_file;
use stackflow_providers::sdk::lambda_event_source::EventSourceMappingProvider;
use stackflow_providers::sdk::lambda_permission::LambdaPermissionProvider;
use stackflow_providers::sdk::s3_bucket_policy::S3BucketPolicyProvider;
use stackflow_providers::sdk::sns_subscription::SnsSubscriptionProvider;
use stackflow_providers::sdk::sqs_queue_policy::SqsQueuePolicyProvider;
use stackflow_providers::{
    CurrentState, Deleted, Imported, Provider, ProviderError, ResourceRequest,
};
use stackflow_tests::round_trip::{
    delete_twice_then_gone, not_updatable, props, read, request, sorted, update_of, without_id,
};
use stackflow_tests::{Emulator, unique_name};

async fn config() -> aws_types::SdkConfig {
    Emulator::shared().await.sdk_config().await
}

/// A replay of the create is refused as taken, and `import` of it finds `id`.
async fn replay_refused_then_found(provider: &dyn Provider, req: &ResourceRequest, id: &str) {
    let mut replay = req.clone();
    replay.physical_id = None;
    match provider.create(&replay).await {
        Err(ProviderError::AlreadyExists(_)) => {}
        other => panic!("the replay must be refused as taken, got {other:?}"),
    }
    match provider.import(&replay).await.expect("import") {
        Imported::Found { physical_id, .. } => assert_eq!(physical_id, id),
        other => panic!("import must find {id}, got {other:?}"),
    }
}

/// A queue: its URL and ARN.
async fn queue(sqs: &aws_sdk_sqs::Client, prefix: &str) -> (String, String) {
    let made = sqs.create_queue().queue_name(unique_name(prefix)).send();
    let url = made.await.expect("CreateQueue").queue_url.expect("a URL");
    let got = sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .expect("GetQueueAttributes");
    let arn = got.attributes().expect("attributes")[&QueueAttributeName::QueueArn].clone();
    (url, arn)
}

async fn queue_policy(sqs: &aws_sdk_sqs::Client, url: &str) -> Option<String> {
    let got = sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::Policy)
        .send()
        .await
        .expect("GetQueueAttributes");
    got.attributes()
        .and_then(|a| a.get(&QueueAttributeName::Policy).cloned())
        .filter(|p| !p.is_empty())
}

fn send_policy(queue_arn: &str, source: &str) -> Value {
    json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Principal": {"Service": "sns.amazonaws.com"},
            "Action": "sqs:SendMessage",
            "Resource": queue_arn,
            "Condition": {"ArnEquals": {"aws:SourceArn": source}}
        }]
    })
}

#[tokio::test]
async fn sdk_sns_subscription_round_trip() {
    let config = config().await;
    let sns = aws_sdk_sns::Client::new(&config);
    let sqs = aws_sdk_sqs::Client::new(&config);
    let topic = sns.create_topic().name(unique_name("topic")).send().await;
    let topic = topic.expect("CreateTopic").topic_arn.expect("an ARN");
    let (_, queue_arn) = queue(&sqs, "subq").await;
    let (_, dlq_arn) = queue(&sqs, "subdlq").await;
    let provider = SnsSubscriptionProvider::new(sns.clone());
    let template = json!({
        "TopicArn": topic,
        "Protocol": "sqs",
        "Endpoint": queue_arn,
        "RawMessageDelivery": true,
        "FilterPolicy": {"kind": ["order", "refund"], "amount": [{"numeric": [">", 0]}]}
    });
    let mut req = request("Sub", "AWS::SNS::Subscription", template.clone());
    let created = provider.create(&req).await.expect("create");
    let arn = created.physical_id.clone();
    assert!(arn.starts_with(&format!("{topic}:")), "{arn}");
    assert_eq!(created.attributes.get("Arn"), Some(&json!(arn)));
    replay_refused_then_found(&provider, &req, &arn).await;

    req.physical_id = Some(arn.clone());
    assert_eq!(read(&provider, &req).await, sorted(props(template)));

    let changed = json!({
        "TopicArn": topic,
        "Protocol": "sqs",
        "Endpoint": queue_arn,
        "FilterPolicy": "{\"kind\": [\"order\"]}",
        "RedrivePolicy": {"deadLetterTargetArn": dlq_arn}
    });
    let update = update_of(&req, changed.clone());
    let updated = provider.update(&update).await.expect("update");
    assert_eq!(
        (updated.physical_id.as_str(), updated.replaced),
        (arn.as_str(), false)
    );
    assert_eq!(
        read(&provider, &update).await,
        sorted(props(changed.clone()))
    );

    let mut moved = changed.clone();
    moved["Endpoint"] = json!(dlq_arn);
    not_updatable(&provider, &update_of(&update, moved)).await;
    delete_twice_then_gone(&provider, &update, &[&without_id(&update)]).await;
}

/// A subscription someone else made to the same endpoint is not taken over.
#[tokio::test]
async fn sns_subscription_of_another_owner_is_not_taken_over() {
    let config = config().await;
    let sns = aws_sdk_sns::Client::new(&config);
    let sqs = aws_sdk_sqs::Client::new(&config);
    let topic = sns.create_topic().name(unique_name("topic")).send().await;
    let topic = topic.expect("CreateTopic").topic_arn.expect("an ARN");
    let (_, queue_arn) = queue(&sqs, "theirs").await;
    let theirs = sns
        .subscribe()
        .topic_arn(&topic)
        .protocol("sqs")
        .endpoint(&queue_arn)
        .return_subscription_arn(true)
        .send()
        .await
        .expect("Subscribe")
        .subscription_arn
        .expect("an ARN");
    let provider = SnsSubscriptionProvider::new(sns.clone());
    let template = json!({
        "TopicArn": topic, "Protocol": "sqs", "Endpoint": queue_arn, "RawMessageDelivery": true
    });
    let req = request("Sub", "AWS::SNS::Subscription", template);
    replay_refused_then_found(&provider, &req, &theirs).await;
    let got = sns
        .get_subscription_attributes()
        .subscription_arn(&theirs)
        .send();
    let attributes = got.await.expect("GetSubscriptionAttributes").attributes;
    let raw = attributes.unwrap_or_default().remove("RawMessageDelivery");
    assert_eq!(raw.as_deref(), Some("false"), "untouched");
}

#[tokio::test]
async fn sdk_sqs_queue_policy_round_trip() {
    let sqs = aws_sdk_sqs::Client::new(&config().await);
    let (url1, arn1) = queue(&sqs, "qp1").await;
    let (url2, arn2) = queue(&sqs, "qp2").await;
    let provider = SqsQueuePolicyProvider::new(sqs.clone());
    let template = json!({
        "PolicyDocument": send_policy(&arn1, "arn:aws:sns:us-east-1:123456789012:a"),
        "Queues": [url1]
    });
    let mut req = request("Policy", "AWS::SQS::QueuePolicy", template.clone());
    let created = provider.create(&req).await.expect("create");
    let id = created.physical_id.clone();
    assert!(
        id.starts_with(&format!("{}-Policy-", req.stack_name)),
        "{id}"
    );
    assert_eq!(created.attributes.get("Id"), Some(&json!(id)));
    // A replay (same token) finds its own document on the queue: the same id.
    let again = provider.create(&req).await.expect("create retried");
    assert_eq!(again.physical_id, id);

    req.physical_id = Some(id.clone());
    assert_eq!(read(&provider, &req).await, sorted(props(template)));
    match provider.import(&req).await.expect("import by id") {
        Imported::Found { physical_id, .. } => assert_eq!(physical_id, id),
        other => panic!("{other:?}"),
    }

    // Another document, on the other queue only: the first one's policy is cleared.
    let changed = json!({
        "PolicyDocument": send_policy(&arn2, "arn:aws:sns:us-east-1:123456789012:b"),
        "Queues": [url2]
    });
    let update = update_of(&req, changed.clone());
    let updated = provider.update(&update).await.expect("update");
    assert_eq!(
        (updated.physical_id.as_str(), updated.replaced),
        (id.as_str(), false)
    );
    assert_eq!(queue_policy(&sqs, &url1).await, None);
    assert_eq!(read(&provider, &update).await, sorted(props(changed)));
    // Without the recorded properties nothing says which queues hold its policy.
    let mut blind = update.clone();
    blind.properties.clear();
    let skipped = provider.delete(&blind).await.expect("delete");
    assert!(matches!(skipped, Deleted::Skipped { .. }), "{skipped:?}");
    assert!(queue_policy(&sqs, &url2).await.is_some());
    delete_twice_then_gone(&provider, &update, &[&without_id(&update)]).await;
    assert_eq!(queue_policy(&sqs, &url2).await, None);
}

/// A queue that holds someone else's policy is refused, and its policy kept; a delete
/// leaves a policy the stack did not write.
#[tokio::test]
async fn sqs_queue_policy_of_another_owner_is_not_taken_over() {
    let sqs = aws_sdk_sqs::Client::new(&config().await);
    let (url, arn) = queue(&sqs, "theirs").await;
    let theirs = send_policy(&arn, "arn:aws:sns:us-east-1:123456789012:theirs").to_string();
    sqs.set_queue_attributes()
        .queue_url(&url)
        .attributes(QueueAttributeName::Policy, &theirs)
        .send()
        .await
        .expect("SetQueueAttributes");
    let provider = SqsQueuePolicyProvider::new(sqs.clone());
    let ours = json!({
        "PolicyDocument": send_policy(&arn, "arn:aws:sns:us-east-1:123456789012:ours"),
        "Queues": [url]
    });
    let mut req = request("Policy", "AWS::SQS::QueuePolicy", ours);
    match provider.create(&req).await {
        Err(ProviderError::AlreadyExists(m)) => assert!(m.contains(&url), "{m}"),
        other => panic!("must be refused, got {other:?}"),
    }
    let held = queue_policy(&sqs, &url).await.expect("their policy");
    let held: Value = serde_json::from_str(&held).expect("JSON");
    assert_eq!(held, serde_json::from_str::<Value>(&theirs).expect("JSON"));
    req.physical_id = Some("never-made".into());
    assert_eq!(provider.delete(&req).await.expect("delete"), Deleted::Done);
    assert!(queue_policy(&sqs, &url).await.is_some(), "kept");
}

#[tokio::test]
async fn sdk_s3_bucket_policy_round_trip() {
    let s3 = Emulator::shared().await.s3().await;
    let bucket = unique_name("policy");
    s3.create_bucket()
        .bucket(&bucket)
        .send()
        .await
        .expect("CreateBucket");
    let provider = S3BucketPolicyProvider::new(s3.clone());
    let deny = |action: &str| {
        json!({
            "Version": "2012-10-17",
            "Statement": [{
                "Effect": "Deny",
                "Principal": {"AWS": "*"},
                "Action": action,
                "Resource": [format!("arn:aws:s3:::{bucket}"), format!("arn:aws:s3:::{bucket}/*")],
                "Condition": {"Bool": {"aws:SecureTransport": "false"}}
            }]
        })
    };
    let template = json!({"Bucket": bucket, "PolicyDocument": deny("s3:*")});
    let mut req = request("Policy", "AWS::S3::BucketPolicy", template.clone());
    let created = provider.create(&req).await.expect("create");
    assert_eq!(created.physical_id, bucket);
    assert!(created.attributes.is_empty());
    replay_refused_then_found(&provider, &req, &bucket).await;

    req.physical_id = Some(bucket.clone());
    assert_eq!(read(&provider, &req).await, sorted(props(template)));
    let changed = json!({"Bucket": bucket, "PolicyDocument": deny("s3:GetObject")});
    let update = update_of(&req, changed.clone());
    provider.update(&update).await.expect("update");
    assert_eq!(read(&provider, &update).await, sorted(props(changed)));
    let moved = json!({"Bucket": unique_name("other"), "PolicyDocument": deny("s3:*")});
    not_updatable(&provider, &update_of(&update, moved)).await;
    delete_twice_then_gone(&provider, &update, &[&without_id(&update)]).await;
}

/// A function for the Lambda tests: its name and ARN.
async fn function(lambda: &aws_sdk_lambda::Client) -> (String, String) {
    let name = unique_name("fn");
    let zip = zip_single_file("index.js", b"exports.handler = async () => 1;").expect("a zip");
    let made = lambda
        .create_function()
        .function_name(&name)
        .runtime(Runtime::from("nodejs20.x"))
        .handler("index.handler")
        .role("arn:aws:iam::123456789012:role/stackflow-test-lambda")
        .code(FunctionCode::builder().zip_file(Blob::new(zip)).build())
        .send()
        .await
        .expect("CreateFunction");
    (name, made.function_arn.expect("an ARN"))
}

#[tokio::test]
async fn sdk_lambda_permission_round_trip() {
    let lambda = aws_sdk_lambda::Client::new(&config().await);
    let (_, function_arn) = function(&lambda).await;
    let provider = LambdaPermissionProvider::new(lambda.clone());
    let template = json!({
        "FunctionName": function_arn,
        "Action": "lambda:InvokeFunction",
        "Principal": "sns.amazonaws.com",
        "SourceArn": "arn:aws:sns:us-east-1:123456789012:orders"
    });
    let mut req = request("Perm", "AWS::Lambda::Permission", template.clone());
    let created = provider.create(&req).await.expect("create");
    let sid = created.physical_id.clone();
    assert!(
        sid.starts_with(&format!("{}-Perm-", req.stack_name)),
        "{sid}"
    );
    assert_eq!(created.attributes.get("Id"), Some(&json!(sid)));
    // A replay (same token): the statement id is its own, so it is taken as made.
    let again = provider.create(&req).await.expect("create retried");
    assert_eq!(again.physical_id, sid);

    req.physical_id = Some(sid.clone());
    assert_eq!(read(&provider, &req).await, sorted(props(template.clone())));
    match provider.import(&req).await.expect("import by id") {
        Imported::Found { physical_id, .. } => assert_eq!(physical_id, sid),
        other => panic!("{other:?}"),
    }
    // No change: the same permission; any change: a new one.
    let same = provider.update(&update_of(&req, template.clone())).await;
    assert_eq!(same.expect("no change").physical_id, sid);
    let mut changed = template.clone();
    changed["SourceArn"] = json!("arn:aws:sns:us-east-1:123456789012:other");
    not_updatable(&provider, &update_of(&req, changed)).await;

    // An account principal with a source account, the function by its name.
    let (name, _) = function(&lambda).await;
    let account = json!({
        "FunctionName": name,
        "Action": "lambda:InvokeFunction",
        "Principal": "111122223333",
        "SourceAccount": "111122223333"
    });
    let mut other = request("Cross", "AWS::Lambda::Permission", account.clone());
    other.physical_id = Some(provider.create(&other).await.expect("create").physical_id);
    assert_eq!(read(&provider, &other).await, sorted(props(account)));
    delete_twice_then_gone(&provider, &other, &[&without_id(&other)]).await;
    // Without the recorded function the statement cannot be found: it is left.
    let mut blind = req.clone();
    blind.properties.clear();
    let skipped = provider.delete(&blind).await.expect("delete");
    assert!(matches!(skipped, Deleted::Skipped { .. }), "{skipped:?}");
    assert!(matches!(
        provider.read_current_state(&req).await,
        Ok(CurrentState::Found(_))
    ));
    delete_twice_then_gone(&provider, &req, &[&without_id(&req)]).await;
}

#[tokio::test]
async fn sdk_event_source_mapping_round_trip() {
    let config = config().await;
    let lambda = aws_sdk_lambda::Client::new(&config);
    let sqs = aws_sdk_sqs::Client::new(&config);
    let (_, function_arn) = function(&lambda).await;
    let (_, queue_arn) = queue(&sqs, "esm").await;
    let provider = EventSourceMappingProvider::new(lambda.clone());
    // The function by its ARN here, by its name in the update.
    let template = json!({
        "FunctionName": function_arn,
        "EventSourceArn": queue_arn,
        "BatchSize": 5,
        "FilterCriteria": {"Filters": [{"Pattern": "{\"body\": {\"kind\": [\"order\"]}}"}]}
    });
    let mut req = request(
        "Mapping",
        "AWS::Lambda::EventSourceMapping",
        template.clone(),
    );
    let created = provider.create(&req).await.expect("create");
    let uuid = created.physical_id.clone();
    assert_eq!(created.attributes.get("Id"), Some(&json!(uuid)));
    let arn = created.attributes.get("EventSourceMappingArn");
    let arn = arn.and_then(Value::as_str).expect("an ARN");
    assert!(
        arn.starts_with("arn:aws:lambda:") && arn.ends_with(&uuid),
        "{arn}"
    );
    replay_refused_then_found(&provider, &req, &uuid).await;

    req.physical_id = Some(uuid.clone());
    assert_eq!(read(&provider, &req).await, sorted(props(template)));

    // Another function, a new batch size, disabled, the filter dropped.
    let (second, _) = function(&lambda).await;
    let changed = json!({
        "FunctionName": second,
        "EventSourceArn": queue_arn,
        "BatchSize": 7,
        "Enabled": false
    });
    let update = update_of(&req, changed.clone());
    let updated = provider.update(&update).await.expect("update");
    assert_eq!(
        (updated.physical_id.as_str(), updated.replaced),
        (uuid.as_str(), false)
    );
    assert_eq!(
        read(&provider, &update).await,
        sorted(props(changed.clone()))
    );

    // Back to the defaults: batch size and enabled are left out of the state.
    let plain = json!({"FunctionName": second, "EventSourceArn": queue_arn});
    let back = update_of(&update, plain.clone());
    provider.update(&back).await.expect("update to defaults");
    assert_eq!(read(&provider, &back).await, sorted(props(plain)));

    let (_, other_queue) = queue(&sqs, "esm2").await;
    let mut moved = changed;
    moved["EventSourceArn"] = json!(other_queue);
    not_updatable(&provider, &update_of(&back, moved)).await;
    delete_twice_then_gone(&provider, &back, &[&without_id(&back)]).await;
}

/// A mapping someone else made from the same queue to the same function is not taken
/// over.
#[tokio::test]
async fn event_source_mapping_of_another_owner_is_not_taken_over() {
    let config = config().await;
    let lambda = aws_sdk_lambda::Client::new(&config);
    let sqs = aws_sdk_sqs::Client::new(&config);
    let (name, _) = function(&lambda).await;
    let (_, queue_arn) = queue(&sqs, "theirs").await;
    let theirs = lambda
        .create_event_source_mapping()
        .function_name(&name)
        .event_source_arn(&queue_arn)
        .batch_size(3)
        .send()
        .await
        .expect("CreateEventSourceMapping")
        .uuid
        .expect("a UUID");
    let provider = EventSourceMappingProvider::new(lambda.clone());
    let template = json!({"FunctionName": name, "EventSourceArn": queue_arn, "BatchSize": 9});
    let req = request("Mapping", "AWS::Lambda::EventSourceMapping", template);
    replay_refused_then_found(&provider, &req, &theirs).await;
    let got = lambda.get_event_source_mapping().uuid(&theirs).send().await;
    assert_eq!(got.expect("GetEventSourceMapping").batch_size, Some(3));
}
