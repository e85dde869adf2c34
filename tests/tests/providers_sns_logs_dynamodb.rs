//! The SNS topic, log group and DynamoDB table SDK providers against the local emulator
//! (fakecloud 0.51.0), through the real SDK clients. Each test is a round trip: create from
//! template properties (a retry of the create adopts what the first one made), then
//! `read_current_state` gives the template's properties back in the same shape, then update,
//! read again, delete, delete again (gone is success), then `import` reports the resource
//! not deployed yet.
//!
//! Emulator quirks: none of these three round trips needed a fakecloud-specific
//! workaround; each provider makes the same calls as against AWS. What the emulator does
//! not show, so these tests do not prove it:
//! - The waits (DynamoDB `CREATING`/`UPDATING` until `ACTIVE`, an index backfilling) are
//!   not shown to be exercised: the tests pass whether or not fakecloud ever reports a
//!   table or index that is not `ACTIVE` yet.
//! - AWS refuses a second `UpdateTimeToLive` on a table within about an hour. The table
//!   test turns TTL on at create and off on update (fakecloud allows that at once).
//!   Switching to another TTL attribute (off, then on) is not exercised.
//! - A GSI update of `ProvisionedThroughput` alone (`Update` action) is not exercised;
//!   adding a GSI (`Create` action) and switching to on-demand billing are.

use serde_json::{Value, json};
use stackflow_providers::sdk::dynamodb::DynamoDbTableProvider;
use stackflow_providers::sdk::logs::LogGroupProvider;
use stackflow_providers::sdk::sns::SnsTopicProvider;
use stackflow_providers::{Imported, Provider};
use stackflow_tests::emulator::{ACCOUNT_ID, REGION};
use stackflow_tests::round_trip::{delete_twice_then_gone, props, read, request, sorted};
use stackflow_tests::{Emulator, unique_name};

#[tokio::test]
async fn sdk_sns_topic_round_trip() {
    let config = Emulator::shared().await.sdk_config().await;
    let provider = SnsTopicProvider::new(aws_sdk_sns::Client::new(&config));
    // A FIFO topic without a name: the generated one ends in `.fifo`.
    let template = json!({
        "DisplayName": "first",
        "FifoTopic": true,
        "ContentBasedDeduplication": true,
        "Tags": [{"Key": "b", "Value": "2"}, {"Key": "a", "Value": "1"}]
    });
    let mut req = request("Topic", "AWS::SNS::Topic", template.clone());
    let created = provider.create(&req).await.expect("create");
    let arn = created.physical_id.clone();
    let name = arn.rsplit(':').next().expect("a name").to_string();
    assert!(
        name.starts_with(&format!("{}-Topic-", req.stack_name)) && name.ends_with(".fifo"),
        "{name}"
    );
    assert_eq!(created.attributes.get("TopicArn"), Some(&json!(arn)));
    assert_eq!(created.attributes.get("TopicName"), Some(&json!(name)));
    // A retry of the same create (same token) answers the same topic.
    let again = provider.create(&req).await.expect("create retried");
    assert_eq!(again.physical_id, arn);

    req.physical_id = Some(arn.clone());
    let mut expected = props(template);
    expected.insert("TopicName".into(), json!(name));
    expected.insert(
        "Tags".into(),
        json!([{"Key": "a", "Value": "1"}, {"Key": "b", "Value": "2"}]),
    );
    assert_eq!(read(&provider, &req).await, sorted(expected));

    let mut update = req.clone();
    update.previous_properties = Some(req.properties.clone());
    update
        .properties
        .insert("DisplayName".into(), json!("second"));
    update.properties.remove("ContentBasedDeduplication");
    update
        .properties
        .insert("Tags".into(), json!([{"Key": "a", "Value": "9"}]));
    update.token = unique_name("token");
    let updated = provider.update(&update).await.expect("update");
    assert_eq!(updated.physical_id, arn);
    assert!(!updated.replaced);
    let mut expected = props(json!({
        "TopicName": name,
        "DisplayName": "second",
        "FifoTopic": true,
        "Tags": [{"Key": "a", "Value": "9"}]
    }));
    expected.sort_keys();
    assert_eq!(read(&provider, &req).await, expected);

    // Neither the name nor FIFO-ness change in place.
    let mut fifo_off = update.clone();
    fifo_off.previous_properties = Some(update.properties.clone());
    fifo_off.properties.insert("FifoTopic".into(), json!(false));
    let err = provider.update(&fifo_off).await.expect_err("FifoTopic");
    assert_eq!(err.name(), "Stackflow.NotUpdatable");
    let mut rename = update.clone();
    rename
        .properties
        .insert("TopicName".into(), json!("other.fifo"));
    let err = provider.update(&rename).await.expect_err("rename");
    assert_eq!(err.name(), "Stackflow.NotUpdatable");

    // Import by the template's name (an explicit id may be the name or the ARN).
    let mut by_name = req.clone();
    by_name.physical_id = None;
    by_name.properties.insert("TopicName".into(), json!(name));
    match provider.import(&by_name).await.expect("import") {
        Imported::Found { physical_id, .. } => assert_eq!(physical_id, arn),
        other => panic!("{other:?}"),
    }
    delete_twice_then_gone(&provider, &req, &[&by_name]).await;
}

#[tokio::test]
async fn sdk_log_group_round_trip() {
    let config = Emulator::shared().await.sdk_config().await;
    let provider = LogGroupProvider::new(aws_sdk_cloudwatchlogs::Client::new(&config));
    let template = json!({
        "RetentionInDays": 7,
        "Tags": [{"Key": "team", "Value": "core"}]
    });
    let mut req = request("Logs", "AWS::Logs::LogGroup", template.clone());
    // As the engine sends it: the stack's id names the account, so the ARN after a create
    // or update is made, not read; the import below reads it (DescribeLogGroups).
    req.stack_id = Some(format!(
        "arn:aws:cloudformation:{REGION}:{ACCOUNT_ID}:stack/{}/id",
        req.stack_name
    ));
    let created = provider.create(&req).await.expect("create");
    let name = created.physical_id.clone();
    assert!(
        name.starts_with(&format!("{}-Logs-", req.stack_name)),
        "{name}"
    );
    let arn = created
        .attributes
        .get("Arn")
        .and_then(Value::as_str)
        .expect("Arn");
    assert!(arn.ends_with(&format!(":log-group:{name}:*")), "{arn}");
    // A retry of the same create (same token) adopts the group the first one made.
    let again = provider.create(&req).await.expect("create retried");
    assert_eq!(again.physical_id, name);

    req.physical_id = Some(name.clone());
    let mut expected = props(template);
    expected.insert("LogGroupName".into(), json!(name));
    assert_eq!(read(&provider, &req).await, sorted(expected));

    let mut update = req.clone();
    update.previous_properties = Some(req.properties.clone());
    update
        .properties
        .insert("RetentionInDays".into(), json!(30));
    update
        .properties
        .insert("Tags".into(), json!([{"Key": "owner", "Value": "me"}]));
    update.token = unique_name("token");
    let updated = provider.update(&update).await.expect("update");
    assert_eq!(updated.physical_id, name);
    assert_eq!(updated.attributes.get("Arn"), Some(&json!(arn)));
    let expected = props(json!({
        "LogGroupName": name,
        "RetentionInDays": 30,
        "Tags": [{"Key": "owner", "Value": "me"}]
    }));
    assert_eq!(read(&provider, &req).await, sorted(expected));

    // Dropping the retention removes the policy (logs are kept forever).
    let mut forever = update.clone();
    forever.previous_properties = Some(update.properties.clone());
    forever.properties.remove("RetentionInDays");
    provider.update(&forever).await.expect("update");
    assert_eq!(read(&provider, &req).await.get("RetentionInDays"), None);

    let mut rename = update.clone();
    rename
        .properties
        .insert("LogGroupName".into(), json!(format!("{name}-x")));
    let err = provider.update(&rename).await.expect_err("rename");
    assert_eq!(err.name(), "Stackflow.NotUpdatable");

    let mut by_name = req.clone();
    by_name.physical_id = None;
    by_name
        .properties
        .insert("LogGroupName".into(), json!(name));
    match provider.import(&by_name).await.expect("import") {
        Imported::Found {
            physical_id,
            attributes,
        } => {
            assert_eq!(physical_id, name);
            assert_eq!(attributes.get("Arn"), Some(&json!(arn)));
        }
        other => panic!("{other:?}"),
    }
    delete_twice_then_gone(&provider, &req, &[&by_name]).await;
}

#[tokio::test]
async fn sdk_dynamodb_table_round_trip() {
    let config = Emulator::shared().await.sdk_config().await;
    let provider = DynamoDbTableProvider::new(aws_sdk_dynamodb::Client::new(&config));
    let template = json!({
        "KeySchema": [
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"}
        ],
        "AttributeDefinitions": [
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "N"},
            {"AttributeName": "gk", "AttributeType": "S"}
        ],
        "ProvisionedThroughput": {"ReadCapacityUnits": 5, "WriteCapacityUnits": 5},
        "GlobalSecondaryIndexes": [{
            "IndexName": "byG",
            "KeySchema": [{"AttributeName": "gk", "KeyType": "HASH"}],
            "Projection": {"ProjectionType": "ALL"},
            "ProvisionedThroughput": {"ReadCapacityUnits": 1, "WriteCapacityUnits": 1}
        }],
        "StreamSpecification": {"StreamViewType": "NEW_AND_OLD_IMAGES"},
        "TimeToLiveSpecification": {"AttributeName": "expires", "Enabled": true},
        "Tags": [{"Key": "team", "Value": "core"}]
    });
    let mut req = request("Table", "AWS::DynamoDB::Table", template.clone());
    let created = provider.create(&req).await.expect("create");
    let name = created.physical_id.clone();
    assert!(
        name.starts_with(&format!("{}-Table-", req.stack_name)),
        "{name}"
    );
    assert!(
        created
            .attributes
            .get("Arn")
            .and_then(Value::as_str)
            .is_some_and(|a| a.ends_with(&format!("table/{name}"))),
        "{created:?}"
    );
    assert!(created.attributes.contains_key("StreamArn"), "{created:?}");
    // A retry of the same create (same token) adopts the table the first one made.
    let again = provider.create(&req).await.expect("create retried");
    assert_eq!(again.physical_id, name);

    req.physical_id = Some(name.clone());
    let mut expected = props(template);
    expected.insert("TableName".into(), json!(name));
    assert_eq!(read(&provider, &req).await, sorted(expected));

    // In place: on-demand billing (the GSI's throughput goes with it), a new GSI beside
    // the old one, the stream off, TTL off, other tags, deletion protection on.
    let mut update = req.clone();
    update.previous_properties = Some(req.properties.clone());
    let new_props = json!({
        "KeySchema": req.properties["KeySchema"],
        "AttributeDefinitions": [
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "N"},
            {"AttributeName": "gk", "AttributeType": "S"},
            {"AttributeName": "hk", "AttributeType": "S"}
        ],
        "BillingMode": "PAY_PER_REQUEST",
        "GlobalSecondaryIndexes": [
            {
                "IndexName": "byG",
                "KeySchema": [{"AttributeName": "gk", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "ALL"}
            },
            {
                "IndexName": "byH",
                "KeySchema": [{"AttributeName": "hk", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["x"]}
            }
        ],
        "DeletionProtectionEnabled": true,
        "Tags": [{"Key": "owner", "Value": "me"}]
    });
    update.properties = props(new_props.clone());
    update.token = unique_name("token");
    let updated = provider.update(&update).await.expect("update");
    assert_eq!(updated.physical_id, name);
    assert!(!updated.replaced);
    assert!(!updated.attributes.contains_key("StreamArn"), "{updated:?}");
    let mut expected = props(new_props);
    expected.insert("TableName".into(), json!(name));
    assert_eq!(read(&provider, &req).await, sorted(expected));

    // A key schema change is the planner's replacement, never an in-place update.
    let mut rekey = update.clone();
    rekey.previous_properties = Some(update.properties.clone());
    rekey.properties.insert(
        "KeySchema".into(),
        json!([{"AttributeName": "pk", "KeyType": "HASH"}]),
    );
    let err = provider.update(&rekey).await.expect_err("KeySchema");
    assert_eq!(err.name(), "Stackflow.NotUpdatable");

    let mut by_name = req.clone();
    by_name.physical_id = None;
    by_name.properties.insert("TableName".into(), json!(name));
    match provider.import(&by_name).await.expect("import") {
        Imported::Found {
            physical_id,
            attributes,
        } => {
            assert_eq!(physical_id, name);
            assert_eq!(attributes.get("Arn"), created.attributes.get("Arn"));
        }
        other => panic!("{other:?}"),
    }

    // Deletion protection holds the table; turned off, it can go.
    let err = provider.delete(&req).await.expect_err("protected");
    assert_eq!(err.name(), "Stackflow.InvalidRequest", "{err}");
    let mut unprotect = update.clone();
    unprotect.previous_properties = Some(update.properties.clone());
    unprotect.properties.remove("DeletionProtectionEnabled");
    provider.update(&unprotect).await.expect("unprotect");
    delete_twice_then_gone(&provider, &req, &[&by_name]).await;
}
