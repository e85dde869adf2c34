//! A create never takes over a named resource that exists, against the local emulator
//! (fakecloud 0.51.0), for every SDK provider and for Cloud Control: the resource is made
//! out of band with the plain SDK client first (someone else's), then `create` with the
//! same name fails with `AlreadyExists` and a message that says what to do, the resource is
//! untouched (its value, attributes and tags as its owner left them), and `import` of the
//! same request finds it, without proof that the create made it (`made_by` is false: an
//! engine replaying its own interrupted create would refuse it, not adopt it).
//!
//! SNS `CreateTopic`, SQS `CreateQueue` (same attributes) and S3 `CreateBucket`
//! (us-east-1) answer the existing resource, on AWS and on fakecloud alike: the templates
//! here are ones those calls would accept, so only the providers' look-up before the call
//! refuses them. For these three a named create of a free name is also checked to succeed,
//! and its replay to be refused and then found by `import`.
//!
//! Where fakecloud differs from AWS:
//! - A Cloud Control handler answers a taken name with the error code
//!   `GeneralServiceException` (and the `AlreadyExists` sentence as its message), where AWS
//!   answers `AlreadyExists`; the provider takes both.
//! - Cloud Control's `GetResource` knows only what Cloud Control made, so the Cloud Control
//!   test makes its out-of-band bucket with the plain Cloud Control client, for `import` to
//!   find it; a bucket made with the S3 client is refused too, but is not looked up.
//! - Cloud Control's `AWS::SSM::Parameter` handler overwrites an existing parameter (AWS
//!   refuses it), so the Cloud Control test uses `AWS::S3::Bucket`.

use aws_sdk_cloudcontrol::types::OperationStatus;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, KeySchemaElement, KeyType,
    ScalarAttributeType,
};
use aws_sdk_sqs::types::QueueAttributeName;
use aws_sdk_ssm::types::{ParameterType, ResourceTypeForTagging};
use serde_json::{Value, json};
use stackflow_providers::cloudcontrol::CloudControlProvider;
use stackflow_providers::sdk::dynamodb::DynamoDbTableProvider;
use stackflow_providers::sdk::iam::IamRoleProvider;
use stackflow_providers::sdk::lambda::{LambdaFunctionProvider, zip_single_file};
use stackflow_providers::sdk::logs::LogGroupProvider;
use stackflow_providers::sdk::s3::S3BucketProvider;
use stackflow_providers::sdk::s3_bucket_policy::S3BucketPolicyProvider;
use stackflow_providers::sdk::sns::SnsTopicProvider;
use stackflow_providers::sdk::{SqsQueueProvider, SsmParameterProvider};
use stackflow_providers::{Deleted, Imported, Provider, ProviderError, ResourceRequest};
use stackflow_tests::round_trip::request;
use stackflow_tests::{Emulator, unique_name};

async fn config() -> aws_types::SdkConfig {
    Emulator::shared().await.sdk_config().await
}

/// The message of a create refused because the `noun` `what` names exists.
fn taken(what: &str, noun: &str) -> String {
    format!(
        "{what}: a {noun} with this name already exists, and this stack did not create it; \
         stackflow never takes over what it did not make: give the resource another name, \
         or remove the existing one"
    )
}

/// `create` of `req` fails with `AlreadyExists` and [`taken`]'s message for `what`.
async fn refused(provider: &dyn Provider, req: &ResourceRequest, what: &str, noun: &str) {
    match provider.create(req).await {
        Err(ProviderError::AlreadyExists(m)) => assert_eq!(m, taken(what, noun)),
        other => panic!("{what}: the create must be refused, got {other:?}"),
    }
}

/// [`refused`], then `import` of the same request finds the resource `id`.
async fn refused_then_found(
    provider: &dyn Provider,
    req: &ResourceRequest,
    what: &str,
    noun: &str,
    id: &str,
) {
    refused_then_found_as(provider, req, what, noun, id, false).await
}

/// [`refused_then_found`], where `proven` says whether the resource carries the proof
/// that the create `req` made it (`made_by`): someone else's never does, and found is not
/// proven (a replay of the create would refuse it, not adopt it).
async fn refused_then_found_as(
    provider: &dyn Provider,
    req: &ResourceRequest,
    what: &str,
    noun: &str,
    id: &str,
    proven: bool,
) {
    refused(provider, req, what, noun).await;
    match provider.import(req).await.expect("import") {
        Imported::Found { physical_id, .. } => assert_eq!(physical_id, id, "{what}"),
        other => panic!("{what}: import must find it, got {other:?}"),
    }
    let mut found = req.clone();
    found.physical_id = Some(id.to_string());
    let made_by = provider.made_by(&found).await.expect("made_by");
    assert_eq!(made_by, proven, "{what}: made_by");
}

/// A named create of a free name succeeds; its replay (the same request) is refused, and
/// `import` finds what the first one made; then it is deleted.
async fn fresh_name_made_then_replay_found(
    provider: &dyn Provider,
    mut req: ResourceRequest,
    what: &str,
    noun: &str,
) {
    let made = provider.create(&req).await.expect("a free name is made");
    // SNS and SQS tag what they make with the create's mark: their own is proven.
    let marks = ["sdk:AWS::SNS::Topic", "sdk:AWS::SQS::Queue"].contains(&provider.name());
    refused_then_found_as(provider, &req, what, noun, &made.physical_id, marks).await;
    req.physical_id = Some(made.physical_id);
    assert_eq!(provider.delete(&req).await.expect("delete"), Deleted::Done);
}

#[tokio::test]
async fn ssm_parameter_of_another_owner_is_not_taken_over() {
    let ssm = aws_sdk_ssm::Client::new(&config().await);
    let name = format!("/{}", unique_name("theirs"));
    let tag = aws_sdk_ssm::types::Tag::builder()
        .key("owner")
        .value("other")
        .build()
        .expect("a tag");
    ssm.put_parameter()
        .name(&name)
        .value("theirs")
        .r#type(ParameterType::String)
        .tags(tag)
        .send()
        .await
        .expect("PutParameter");
    let provider = SsmParameterProvider::new(ssm.clone());
    let template = json!({"Name": name, "Type": "String", "Value": "ours", "Tags": {"team": "s"}});
    let req = request("Param", "AWS::SSM::Parameter", template);
    let what = format!("AWS::SSM::Parameter {name}");
    refused_then_found(&provider, &req, &what, "parameter", &name).await;

    let got = ssm.get_parameter().name(&name).send().await.expect("Get");
    let parameter = got.parameter().expect("the parameter");
    assert_eq!(parameter.value(), Some("theirs"));
    assert_eq!(parameter.version(), 1);
    let tags = ssm
        .list_tags_for_resource()
        .resource_type(ResourceTypeForTagging::Parameter)
        .resource_id(&name)
        .send()
        .await
        .expect("ListTagsForResource");
    let tags: Vec<(&str, &str)> = tags
        .tag_list()
        .iter()
        .map(|t| (t.key(), t.value()))
        .collect();
    assert_eq!(tags, [("owner", "other")]);
}

#[tokio::test]
async fn sqs_queue_of_another_owner_is_not_taken_over() {
    let sqs = aws_sdk_sqs::Client::new(&config().await);
    let name = unique_name("theirs");
    let made = sqs
        .create_queue()
        .queue_name(&name)
        .attributes(QueueAttributeName::VisibilityTimeout, "45")
        .tags("owner", "other")
        .send()
        .await
        .expect("CreateQueue");
    let url = made.queue_url().expect("a URL").to_string();
    let provider = SqsQueueProvider::new(sqs.clone());
    // The same attributes: CreateQueue would answer the existing queue.
    let template = json!({
        "QueueName": name,
        "VisibilityTimeout": 45,
        "Tags": [{"Key": "team", "Value": "stack"}]
    });
    let req = request("Queue", "AWS::SQS::Queue", template);
    let what = format!("AWS::SQS::Queue {name}");
    refused_then_found(&provider, &req, &what, "queue", &url).await;

    let tags = sqs.list_queue_tags().queue_url(&url).send().await;
    let tags = tags
        .expect("ListQueueTags")
        .tags()
        .cloned()
        .unwrap_or_default();
    assert_eq!(tags.len(), 1, "{tags:?}");
    assert_eq!(tags.get("owner").map(String::as_str), Some("other"));

    let free = unique_name("ours");
    let req = request("Queue", "AWS::SQS::Queue", json!({"QueueName": free}));
    let what = format!("AWS::SQS::Queue {free}");
    fresh_name_made_then_replay_found(&provider, req, &what, "queue").await;
}

#[tokio::test]
async fn sns_topic_of_another_owner_is_not_taken_over() {
    let sns = aws_sdk_sns::Client::new(&config().await);
    let name = unique_name("theirs");
    let tag = aws_sdk_sns::types::Tag::builder()
        .key("owner")
        .value("other")
        .build()
        .expect("a tag");
    let made = sns
        .create_topic()
        .name(&name)
        .attributes("DisplayName", "theirs")
        .tags(tag)
        .send()
        .await
        .expect("CreateTopic");
    let arn = made.topic_arn().expect("an ARN").to_string();
    let provider = SnsTopicProvider::new(sns.clone());
    let template = json!({
        "TopicName": name,
        "DisplayName": "ours",
        "Tags": [{"Key": "team", "Value": "stack"}]
    });
    let req = request("Topic", "AWS::SNS::Topic", template);
    let what = format!("AWS::SNS::Topic {name}");
    refused_then_found(&provider, &req, &what, "topic", &arn).await;

    let got = sns.get_topic_attributes().topic_arn(&arn).send().await;
    let attributes = got.expect("GetTopicAttributes").attributes().cloned();
    let display = attributes.unwrap_or_default().remove("DisplayName");
    assert_eq!(display.as_deref(), Some("theirs"));
    let tags = sns.list_tags_for_resource().resource_arn(&arn).send().await;
    let tags = tags.expect("ListTagsForResource");
    let tags: Vec<(&str, &str)> = tags.tags().iter().map(|t| (t.key(), t.value())).collect();
    assert_eq!(tags, [("owner", "other")]);

    // A free name: the look-up (an ARN like a listed topic's) finds nothing.
    let free = unique_name("ours");
    let req = request("Topic", "AWS::SNS::Topic", json!({"TopicName": free}));
    let what = format!("AWS::SNS::Topic {free}");
    fresh_name_made_then_replay_found(&provider, req, &what, "topic").await;
}

#[tokio::test]
async fn log_group_of_another_owner_is_not_taken_over() {
    let logs = aws_sdk_cloudwatchlogs::Client::new(&config().await);
    let name = unique_name("theirs");
    logs.create_log_group()
        .log_group_name(&name)
        .tags("owner", "other")
        .send()
        .await
        .expect("CreateLogGroup");
    logs.put_retention_policy()
        .log_group_name(&name)
        .retention_in_days(3)
        .send()
        .await
        .expect("PutRetentionPolicy");
    let provider = LogGroupProvider::new(logs.clone());
    let template = json!({
        "LogGroupName": name,
        "RetentionInDays": 7,
        "Tags": [{"Key": "team", "Value": "stack"}]
    });
    let req = request("Logs", "AWS::Logs::LogGroup", template);
    let what = format!("AWS::Logs::LogGroup {name}");
    refused_then_found(&provider, &req, &what, "log group", &name).await;

    let described = logs
        .describe_log_groups()
        .log_group_name_prefix(&name)
        .send()
        .await
        .expect("DescribeLogGroups");
    let group = described.log_groups().first().expect("the group");
    assert_eq!(group.retention_in_days(), Some(3));
    let arn = group.log_group_arn().expect("an ARN");
    let tags = logs.list_tags_for_resource().resource_arn(arn).send().await;
    let tags = tags.expect("ListTagsForResource").tags().cloned();
    let tags = tags.unwrap_or_default();
    assert_eq!(tags.len(), 1, "{tags:?}");
    assert_eq!(tags.get("owner").map(String::as_str), Some("other"));
}

#[tokio::test]
async fn dynamodb_table_of_another_owner_is_not_taken_over() {
    let ddb = aws_sdk_dynamodb::Client::new(&config().await);
    let name = unique_name("theirs");
    let key = KeySchemaElement::builder()
        .attribute_name("pk")
        .key_type(KeyType::Hash)
        .build()
        .expect("a key");
    let definition = AttributeDefinition::builder()
        .attribute_name("pk")
        .attribute_type(ScalarAttributeType::S)
        .build()
        .expect("a definition");
    ddb.create_table()
        .table_name(&name)
        .key_schema(key)
        .attribute_definitions(definition)
        .billing_mode(BillingMode::PayPerRequest)
        .send()
        .await
        .expect("CreateTable");
    let item = AttributeValue::S("kept".into());
    ddb.put_item()
        .table_name(&name)
        .item("pk", item.clone())
        .send()
        .await
        .expect("PutItem");
    let provider = DynamoDbTableProvider::new(ddb.clone());
    let template = json!({
        "TableName": name,
        "KeySchema": [{"AttributeName": "id", "KeyType": "HASH"}],
        "AttributeDefinitions": [{"AttributeName": "id", "AttributeType": "S"}],
        "ProvisionedThroughput": {"ReadCapacityUnits": 1, "WriteCapacityUnits": 1}
    });
    let req = request("Table", "AWS::DynamoDB::Table", template);
    let what = format!("AWS::DynamoDB::Table {name}");
    refused_then_found(&provider, &req, &what, "table", &name).await;

    let table = ddb.describe_table().table_name(&name).send().await;
    let table = table
        .expect("DescribeTable")
        .table()
        .cloned()
        .expect("a table");
    let key: Vec<&str> = table
        .key_schema()
        .iter()
        .map(|k| k.attribute_name())
        .collect();
    assert_eq!(key, ["pk"]);
    let billing = table.billing_mode_summary().and_then(|b| b.billing_mode());
    assert_eq!(billing, Some(&BillingMode::PayPerRequest));
    let got = ddb
        .get_item()
        .table_name(&name)
        .key("pk", item)
        .send()
        .await;
    assert!(got.expect("GetItem").item().is_some(), "the item is kept");
}

#[tokio::test]
async fn s3_bucket_of_another_owner_is_not_taken_over() {
    let s3 = Emulator::shared().await.s3().await;
    let name = unique_name("theirs");
    s3.create_bucket()
        .bucket(&name)
        .send()
        .await
        .expect("CreateBucket");
    let tag = aws_sdk_s3::types::Tag::builder()
        .key("owner")
        .value("other")
        .build()
        .expect("a tag");
    let tagging = aws_sdk_s3::types::Tagging::builder()
        .tag_set(tag)
        .build()
        .expect("a tag set");
    s3.put_bucket_tagging()
        .bucket(&name)
        .tagging(tagging)
        .send()
        .await
        .expect("PutBucketTagging");
    let provider = S3BucketProvider::new(s3.clone());
    let template = json!({
        "BucketName": name,
        "VersioningConfiguration": {"Status": "Enabled"},
        "Tags": [{"Key": "team", "Value": "stack"}]
    });
    let req = request("Bucket", "AWS::S3::Bucket", template);
    let what = format!("AWS::S3::Bucket {name}");
    refused_then_found(&provider, &req, &what, "bucket", &name).await;
    assert_bucket_untouched(&s3, &name).await;

    let free = unique_name("ours");
    let req = request("Bucket", "AWS::S3::Bucket", json!({"BucketName": free}));
    let what = format!("AWS::S3::Bucket {free}");
    fresh_name_made_then_replay_found(&provider, req, &what, "bucket").await;
}

/// The bucket `name` has versioning never set and the one tag `owner=other`.
async fn assert_bucket_untouched(s3: &aws_sdk_s3::Client, name: &str) {
    let versioning = s3.get_bucket_versioning().bucket(name).send().await;
    assert_eq!(versioning.expect("GetBucketVersioning").status(), None);
    let tags = s3.get_bucket_tagging().bucket(name).send().await;
    let tags = tags.expect("GetBucketTagging");
    let tags: Vec<(&str, &str)> = tags
        .tag_set()
        .iter()
        .map(|t| (t.key(), t.value()))
        .collect();
    assert_eq!(tags, [("owner", "other")]);
}

fn trust_policy() -> Value {
    json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Principal": {"Service": "lambda.amazonaws.com"},
            "Action": "sts:AssumeRole"
        }]
    })
}

/// A role made with the plain IAM client, described `theirs`: its ARN.
async fn their_role(iam: &aws_sdk_iam::Client, name: &str) -> String {
    let made = iam
        .create_role()
        .role_name(name)
        .assume_role_policy_document(trust_policy().to_string())
        .description("theirs")
        .send()
        .await
        .expect("CreateRole");
    made.role().map(|r| r.arn().to_string()).expect("a role")
}

#[tokio::test]
async fn iam_role_of_another_owner_is_not_taken_over() {
    let iam = aws_sdk_iam::Client::new(&config().await);
    let name = unique_name("theirs");
    their_role(&iam, &name).await;
    let provider = IamRoleProvider::new(iam.clone());
    let template = json!({
        "RoleName": name,
        "AssumeRolePolicyDocument": trust_policy(),
        "Description": "ours",
        "ManagedPolicyArns": ["arn:aws:iam::aws:policy/ReadOnlyAccess"]
    });
    let req = request("Role", "AWS::IAM::Role", template);
    let what = format!("AWS::IAM::Role {name}");
    refused_then_found(&provider, &req, &what, "role", &name).await;

    let got = iam
        .get_role()
        .role_name(&name)
        .send()
        .await
        .expect("GetRole");
    let role = got.role().expect("the role");
    assert_eq!(role.description(), Some("theirs"));
    let attached = iam.list_attached_role_policies().role_name(&name).send();
    let attached = attached.await.expect("ListAttachedRolePolicies");
    assert!(attached.attached_policies().is_empty(), "{attached:?}");
}

#[tokio::test]
async fn lambda_function_of_another_owner_is_not_taken_over() {
    let config = config().await;
    let iam = aws_sdk_iam::Client::new(&config);
    let lambda = aws_sdk_lambda::Client::new(&config);
    let role = their_role(&iam, &unique_name("fnrole")).await;
    let name = unique_name("theirs");
    let zip = zip_single_file("index.js", b"exports.handler = async () => 'theirs';");
    let code = aws_sdk_lambda::types::FunctionCode::builder()
        .zip_file(aws_sdk_lambda::primitives::Blob::new(zip.expect("a zip")))
        .build();
    lambda
        .create_function()
        .function_name(&name)
        .runtime(aws_sdk_lambda::types::Runtime::from("nodejs20.x"))
        .handler("index.handler")
        .role(&role)
        .code(code)
        .description("theirs")
        .send()
        .await
        .expect("CreateFunction");
    let provider = LambdaFunctionProvider::new(lambda.clone());
    let template = json!({
        "FunctionName": name,
        "Runtime": "nodejs20.x",
        "Handler": "index.handler",
        "Role": role,
        "Code": {"ZipFile": "exports.handler = async () => 'ours';"},
        "Description": "ours",
        "Timeout": 10
    });
    let req = request("Handler", "AWS::Lambda::Function", template);
    let what = format!("AWS::Lambda::Function {name}");
    refused_then_found(&provider, &req, &what, "function", &name).await;

    let got = lambda.get_function().function_name(&name).send().await;
    let got = got.expect("GetFunction");
    let configuration = got.configuration().expect("a configuration");
    assert_eq!(configuration.description(), Some("theirs"));
    assert_eq!(configuration.timeout(), Some(3));
}

/// Cloud Control, `AWS::S3::Bucket`: a bucket made with the plain Cloud Control client (so
/// that fakecloud's `GetResource` knows it), and one made with the plain S3 client.
#[tokio::test]
async fn cloudcontrol_resource_of_another_owner_is_not_taken_over() {
    let config = config().await;
    let client = aws_sdk_cloudcontrol::Client::new(&config);
    let cc = CloudControlProvider::new(client.clone());
    let name = unique_name("theirs");
    let theirs = json!({"BucketName": name, "Tags": [{"Key": "owner", "Value": "other"}]});
    let made = client
        .create_resource()
        .type_name("AWS::S3::Bucket")
        .desired_state(theirs.to_string())
        .client_token(unique_name("theirs"))
        .send()
        .await
        .expect("CreateResource");
    let status = made.progress_event().and_then(|e| e.operation_status());
    assert_eq!(status, Some(&OperationStatus::Success), "{made:?}");
    let template = |name: &str| {
        json!({
            "BucketName": name,
            "VersioningConfiguration": {"Status": "Enabled"},
            "Tags": [{"Key": "team", "Value": "stack"}]
        })
    };
    let req = request("Bucket", "AWS::S3::Bucket", template(&name));
    let what = format!("AWS::S3::Bucket {name}");
    refused_then_found(&cc, &req, &what, "resource", &name).await;
    let s3 = Emulator::shared().await.s3().await;
    assert_bucket_untouched(&s3, &name).await;

    let sdk_made = unique_name("theirs");
    s3.create_bucket()
        .bucket(&sdk_made)
        .send()
        .await
        .expect("CreateBucket");
    let req = request("Bucket", "AWS::S3::Bucket", template(&sdk_made));
    refused(
        &cc,
        &req,
        &format!("AWS::S3::Bucket {sdk_made}"),
        "resource",
    )
    .await;
    let versioning = s3.get_bucket_versioning().bucket(&sdk_made).send().await;
    assert_eq!(versioning.expect("GetBucketVersioning").status(), None);
}

#[tokio::test]
async fn secret_of_another_owner_is_not_taken_over() {
    use stackflow_providers::sdk::secretsmanager::SecretProvider;
    let sm = aws_sdk_secretsmanager::Client::new(&config().await);
    let name = unique_name("theirs");
    let made = sm
        .create_secret()
        .name(&name)
        .secret_string("their value")
        .send()
        .await
        .expect("CreateSecret");
    let arn = made.arn().expect("an ARN").to_string();
    let provider = SecretProvider::new(sm.clone());
    let template = json!({"Name": name, "SecretString": "our value"});
    let req = request("Secret", "AWS::SecretsManager::Secret", template);
    let what = format!("AWS::SecretsManager::Secret {name}");
    refused_then_found(&provider, &req, &what, "secret", &arn).await;
    let got = sm.get_secret_value().secret_id(&arn).send().await;
    let got = got.expect("GetSecretValue");
    assert_eq!(got.secret_string(), Some("their value"));

    let free = unique_name("ours");
    let template = json!({"Name": free, "SecretString": "our value"});
    let req = request("Secret", "AWS::SecretsManager::Secret", template);
    let what = format!("AWS::SecretsManager::Secret {free}");
    fresh_name_made_then_replay_found(&provider, req, &what, "secret").await;
}

#[tokio::test]
async fn kms_alias_of_another_owner_is_not_taken_over() {
    use stackflow_providers::sdk::kms::KmsAliasProvider;
    let kms = aws_sdk_kms::Client::new(&config().await);
    let mut keys = Vec::new();
    for _ in 0..2 {
        let made = kms.create_key().send().await.expect("CreateKey");
        keys.push(made.key_metadata().expect("metadata").key_id().to_string());
    }
    let name = format!("alias/{}", unique_name("theirs"));
    kms.create_alias()
        .alias_name(&name)
        .target_key_id(&keys[0])
        .send()
        .await
        .expect("CreateAlias");
    let provider = KmsAliasProvider::new(kms.clone());
    let req = request(
        "Alias",
        "AWS::KMS::Alias",
        json!({"AliasName": name, "TargetKeyId": keys[1]}),
    );
    let what = format!("AWS::KMS::Alias {name}");
    refused_then_found(&provider, &req, &what, "alias", &name).await;
    let got = kms.describe_key().key_id(&name).send().await;
    let target = got.expect("DescribeKey").key_metadata().cloned();
    assert_eq!(target.expect("metadata").key_id(), keys[0]);

    let free = format!("alias/{}", unique_name("ours"));
    let req = request(
        "Alias",
        "AWS::KMS::Alias",
        json!({"AliasName": free, "TargetKeyId": keys[1]}),
    );
    let what = format!("AWS::KMS::Alias {free}");
    fresh_name_made_then_replay_found(&provider, req, &what, "alias").await;
}

#[tokio::test]
async fn ecs_cluster_of_another_owner_is_not_taken_over() {
    use stackflow_providers::sdk::ecs::EcsClusterProvider;
    let ecs = aws_sdk_ecs::Client::new(&config().await);
    let name = unique_name("theirs");
    let tag = aws_sdk_ecs::types::Tag::builder()
        .key("owner")
        .value("other")
        .build();
    let made = ecs
        .create_cluster()
        .cluster_name(&name)
        .tags(tag)
        .send()
        .await
        .expect("CreateCluster");
    let provider = EcsClusterProvider::new(ecs.clone());
    // CreateCluster would answer the existing cluster: only the look-up refuses it.
    let template = json!({"ClusterName": name, "Tags": [{"Key": "team", "Value": "stack"}]});
    let req = request("Cluster", "AWS::ECS::Cluster", template);
    let what = format!("AWS::ECS::Cluster {name}");
    refused_then_found(&provider, &req, &what, "cluster", &name).await;
    let arn = made
        .cluster()
        .and_then(|c| c.cluster_arn())
        .expect("an ARN");
    let tags = ecs.list_tags_for_resource().resource_arn(arn).send().await;
    let tags = tags.expect("ListTagsForResource");
    let tags: Vec<(Option<&str>, Option<&str>)> =
        tags.tags().iter().map(|t| (t.key(), t.value())).collect();
    assert_eq!(tags, [(Some("owner"), Some("other"))]);

    let free = unique_name("ours");
    let req = request("Cluster", "AWS::ECS::Cluster", json!({"ClusterName": free}));
    let what = format!("AWS::ECS::Cluster {free}");
    fresh_name_made_then_replay_found(&provider, req, &what, "cluster").await;
}

/// `AWS::S3::BucketPolicy`: the bucket names it, and a bucket holds one policy. A bucket
/// that holds someone else's policy is refused, and the policy kept as it is.
#[tokio::test]
async fn s3_bucket_policy_of_another_owner_is_not_taken_over() {
    let s3 = Emulator::shared().await.s3().await;
    let name = unique_name("theirs");
    s3.create_bucket()
        .bucket(&name)
        .send()
        .await
        .expect("CreateBucket");
    let statement = |action: &str| {
        json!({
            "Version": "2012-10-17",
            "Statement": [{
                "Effect": "Deny",
                "Principal": "*",
                "Action": action,
                "Resource": format!("arn:aws:s3:::{name}/*")
            }]
        })
    };
    let theirs = statement("s3:DeleteObject");
    s3.put_bucket_policy()
        .bucket(&name)
        .policy(theirs.to_string())
        .send()
        .await
        .expect("PutBucketPolicy");
    let provider = S3BucketPolicyProvider::new(s3.clone());
    let template = json!({"Bucket": name, "PolicyDocument": statement("s3:PutObject")});
    let req = request("Policy", "AWS::S3::BucketPolicy", template);
    let what = format!("AWS::S3::BucketPolicy {name}");
    refused_then_found(&provider, &req, &what, "bucket policy", &name).await;

    let held = s3.get_bucket_policy().bucket(&name).send().await;
    let held = held.expect("GetBucketPolicy").policy.expect("a policy");
    let held: Value = serde_json::from_str(&held).expect("JSON");
    assert_eq!(held, theirs);
}

#[tokio::test]
async fn security_group_of_another_owner_is_not_taken_over() {
    use stackflow_providers::sdk::ec2::security_group::SecurityGroupProvider;
    let ec2 = aws_sdk_ec2::Client::new(&config().await);
    let vpc = ec2.create_vpc().cidr_block("10.9.0.0/16").send().await;
    let vpc = vpc
        .expect("CreateVpc")
        .vpc
        .and_then(|v| v.vpc_id)
        .expect("id");
    let name = unique_name("their-sg");
    let theirs = ec2
        .create_security_group()
        .group_name(&name)
        .description("theirs")
        .vpc_id(&vpc)
        .send()
        .await
        .expect("CreateSecurityGroup");
    let theirs = theirs.group_id.expect("group id");
    let provider = SecurityGroupProvider::new(ec2.clone());
    let template = json!({"GroupName": name, "GroupDescription": "mine", "VpcId": vpc});
    let req = request("Sg", "AWS::EC2::SecurityGroup", template);
    let what = format!("AWS::EC2::SecurityGroup {name}");
    refused_then_found(&provider, &req, &what, "security group", &theirs).await;
    let held = ec2
        .describe_security_groups()
        .group_ids(&theirs)
        .send()
        .await;
    let held = held
        .expect("DescribeSecurityGroups")
        .security_groups
        .unwrap_or_default();
    assert_eq!(held[0].description(), Some("theirs"), "untouched");
    assert!(held[0].tags().is_empty(), "untagged");
    let free = json!({"GroupName": unique_name("my-sg"), "GroupDescription": "mine",
        "VpcId": vpc});
    let free_req = request("Sg", "AWS::EC2::SecurityGroup", free.clone());
    let what = format!(
        "AWS::EC2::SecurityGroup {}",
        free["GroupName"].as_str().unwrap_or_default()
    );
    let made = provider
        .create(&free_req)
        .await
        .expect("a free name is made");
    let mut other = free_req.clone();
    other.token = unique_name("token");
    refused_then_found(
        &provider,
        &other,
        &what,
        "security group",
        &made.physical_id,
    )
    .await;
    let mut mine = free_req;
    mine.physical_id = Some(made.physical_id);
    assert_eq!(provider.delete(&mine).await.expect("delete"), Deleted::Done);
}

/// `PutMetricAlarm` overwrites an alarm of the same name (on AWS and on fakecloud): only
/// the provider's look-up before the call refuses it.
#[tokio::test]
async fn cloudwatch_alarm_of_another_owner_is_not_taken_over() {
    use stackflow_providers::sdk::cloudwatch_alarm::AlarmProvider;
    let cw = aws_sdk_cloudwatch::Client::new(&config().await);
    let name = unique_name("theirs");
    cw.put_metric_alarm()
        .alarm_name(&name)
        .alarm_description("theirs")
        .metric_name("Errors")
        .namespace("Theirs")
        .statistic(aws_sdk_cloudwatch::types::Statistic::Sum)
        .period(60)
        .evaluation_periods(1)
        .threshold(1.0)
        .comparison_operator(aws_sdk_cloudwatch::types::ComparisonOperator::GreaterThanThreshold)
        .send()
        .await
        .expect("PutMetricAlarm");
    let provider = AlarmProvider::new(cw.clone());
    let template = |name: &str| {
        json!({
            "AlarmName": name,
            "AlarmDescription": "ours",
            "MetricName": "Errors",
            "Namespace": "Ours",
            "Statistic": "Sum",
            "Period": 60,
            "EvaluationPeriods": 1,
            "Threshold": 5,
            "ComparisonOperator": "GreaterThanThreshold"
        })
    };
    let req = request("Alarm", "AWS::CloudWatch::Alarm", template(&name));
    let what = format!("AWS::CloudWatch::Alarm {name}");
    refused_then_found(&provider, &req, &what, "alarm", &name).await;

    let held = cw.describe_alarms().alarm_names(&name).send().await;
    let held = held.expect("DescribeAlarms");
    let alarm = held.metric_alarms().first().expect("the alarm");
    assert_eq!(alarm.alarm_description(), Some("theirs"));
    assert_eq!(alarm.threshold(), Some(1.0));

    let free = unique_name("ours");
    let req = request("Alarm", "AWS::CloudWatch::Alarm", template(&free));
    let what = format!("AWS::CloudWatch::Alarm {free}");
    fresh_name_made_then_replay_found(&provider, req, &what, "alarm").await;
}

/// `PutRule` overwrites a rule of the same name (on AWS and on fakecloud): only the
/// provider's look-up before the call refuses it.
#[tokio::test]
async fn event_rule_of_another_owner_is_not_taken_over() {
    use stackflow_providers::sdk::events_rule::EventRuleProvider;
    let events = aws_sdk_eventbridge::Client::new(&config().await);
    let name = unique_name("theirs");
    events
        .put_rule()
        .name(&name)
        .description("theirs")
        .schedule_expression("rate(1 day)")
        .send()
        .await
        .expect("PutRule");
    let provider = EventRuleProvider::new(events.clone());
    let template = |name: &str| {
        json!({
            "Name": name,
            "Description": "ours",
            "ScheduleExpression": "rate(5 minutes)",
            "Targets": [{"Id": "T", "Arn": "arn:aws:sqs:us-east-1:123456789012:ours"}]
        })
    };
    let req = request("Rule", "AWS::Events::Rule", template(&name));
    let what = format!("AWS::Events::Rule {name}");
    refused_then_found(&provider, &req, &what, "rule", &name).await;

    let held = events.describe_rule().name(&name).send().await;
    let held = held.expect("DescribeRule");
    assert_eq!(held.description(), Some("theirs"));
    assert_eq!(held.schedule_expression(), Some("rate(1 day)"));
    let targets = events.list_targets_by_rule().rule(&name).send().await;
    assert!(targets.expect("ListTargetsByRule").targets().is_empty());

    let free = unique_name("ours");
    let req = request("Rule", "AWS::Events::Rule", template(&free));
    let what = format!("AWS::Events::Rule {free}");
    fresh_name_made_then_replay_found(&provider, req, &what, "rule").await;
}

#[tokio::test]
async fn state_machine_of_another_owner_is_not_taken_over() {
    use stackflow_providers::sdk::stepfunctions::StateMachineProvider;
    let config = config().await;
    let sfn = aws_sdk_sfn::Client::new(&config);
    let iam = aws_sdk_iam::Client::new(&config);
    let role = their_role(&iam, &unique_name("sfnrole")).await;
    let name = unique_name("theirs");
    let theirs = json!({"StartAt": "A", "States": {"A": {"Type": "Pass", "End": true}}});
    let made = sfn
        .create_state_machine()
        .name(&name)
        .definition(theirs.to_string())
        .role_arn(&role)
        .send()
        .await
        .expect("CreateStateMachine");
    let arn = made.state_machine_arn().to_string();
    let provider = StateMachineProvider::new(sfn.clone());
    let template = json!({
        "StateMachineName": name,
        "Definition": {"StartAt": "B", "States": {"B": {"Type": "Succeed"}}},
        "RoleArn": role
    });
    let req = request("Machine", "AWS::StepFunctions::StateMachine", template);
    let what = format!("AWS::StepFunctions::StateMachine {name}");
    refused_then_found(&provider, &req, &what, "state machine", &arn).await;

    let held = sfn.describe_state_machine().state_machine_arn(&arn).send();
    let held = held.await.expect("DescribeStateMachine");
    let held: Value = serde_json::from_str(held.definition()).expect("JSON");
    assert_eq!(held, theirs);
}

/// `AWS::IAM::Policy`: a role that holds an inline policy of the template's `PolicyName`
/// (put with the plain IAM client) is refused; the document stays theirs.
#[tokio::test]
async fn iam_inline_policy_of_another_owner_is_not_taken_over() {
    use stackflow_providers::sdk::iam_policy::IamPolicyProvider;
    let iam = aws_sdk_iam::Client::new(&config().await);
    let role = unique_name("holder");
    their_role(&iam, &role).await;
    let name = unique_name("theirs");
    let theirs = json!({"Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}]});
    iam.put_role_policy()
        .role_name(&role)
        .policy_name(&name)
        .policy_document(theirs.to_string())
        .send()
        .await
        .expect("PutRolePolicy");
    let provider = IamPolicyProvider::new(iam.clone());
    let template = json!({
        "PolicyName": name,
        "PolicyDocument": {"Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]},
        "Roles": [role]
    });
    let req = request("Policy", "AWS::IAM::Policy", template);
    let what = format!("AWS::IAM::Policy {name} (role {role})");
    refused(&provider, &req, &what, "policy").await;
    assert!(matches!(
        provider.import(&req).await.expect("import"),
        Imported::Found { .. }
    ));
    let got = iam.get_role_policy().role_name(&role).policy_name(&name);
    let got = got.send().await.expect("GetRolePolicy");
    let document = got.policy_document();
    assert!(
        document.contains("s3") && document.contains("GetObject"),
        "{document}"
    );
}

/// `AWS::IAM::ManagedPolicy`: a policy of the template's name made with the plain IAM
/// client is refused, left unattached and at its one version.
#[tokio::test]
async fn iam_managed_policy_of_another_owner_is_not_taken_over() {
    use stackflow_providers::sdk::iam_managed_policy::IamManagedPolicyProvider;
    let iam = aws_sdk_iam::Client::new(&config().await);
    let role = unique_name("holder");
    their_role(&iam, &role).await;
    let name = unique_name("theirs");
    let theirs = json!({"Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}]});
    let made = iam
        .create_policy()
        .policy_name(&name)
        .policy_document(theirs.to_string())
        .send()
        .await
        .expect("CreatePolicy");
    let arn = made
        .policy()
        .and_then(|p| p.arn())
        .expect("an ARN")
        .to_string();
    let provider = IamManagedPolicyProvider::new(iam.clone());
    let template = json!({
        "ManagedPolicyName": name,
        "PolicyDocument": {"Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]},
        "Roles": [role]
    });
    let req = request("Managed", "AWS::IAM::ManagedPolicy", template);
    let what = format!("AWS::IAM::ManagedPolicy {name}");
    refused_then_found(&provider, &req, &what, "managed policy", &arn).await;
    let got = iam.get_policy().policy_arn(&arn).send().await;
    let got = got.expect("GetPolicy");
    let policy = got.policy().expect("the policy");
    assert_eq!(policy.default_version_id(), Some("v1"));
    let attached = iam.list_attached_role_policies().role_name(&role).send();
    let attached = attached.await.expect("ListAttachedRolePolicies");
    assert!(attached.attached_policies().is_empty(), "{attached:?}");
}

/// `AWS::IAM::InstanceProfile`: a profile of the template's name made with the plain IAM
/// client is refused and keeps its role.
#[tokio::test]
async fn iam_instance_profile_of_another_owner_is_not_taken_over() {
    use stackflow_providers::sdk::iam_instance_profile::IamInstanceProfileProvider;
    let iam = aws_sdk_iam::Client::new(&config().await);
    let (theirs, ours) = (unique_name("holder"), unique_name("ours"));
    their_role(&iam, &theirs).await;
    their_role(&iam, &ours).await;
    let name = unique_name("theirs");
    iam.create_instance_profile()
        .instance_profile_name(&name)
        .send()
        .await
        .expect("CreateInstanceProfile");
    iam.add_role_to_instance_profile()
        .instance_profile_name(&name)
        .role_name(&theirs)
        .send()
        .await
        .expect("AddRoleToInstanceProfile");
    let provider = IamInstanceProfileProvider::new(iam.clone());
    let template = json!({"InstanceProfileName": name, "Roles": [ours]});
    let req = request("Profile", "AWS::IAM::InstanceProfile", template);
    let what = format!("AWS::IAM::InstanceProfile {name}");
    refused_then_found(&provider, &req, &what, "instance profile", &name).await;
    let got = iam.get_instance_profile().instance_profile_name(&name);
    let got = got.send().await.expect("GetInstanceProfile");
    let roles: Vec<&str> = got
        .instance_profile()
        .map(|p| p.roles().iter().map(|r| r.role_name()).collect())
        .unwrap_or_default();
    assert_eq!(roles, [theirs.as_str()]);
}
