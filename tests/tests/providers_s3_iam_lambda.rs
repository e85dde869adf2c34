//! The S3 bucket, IAM role and Lambda function SDK providers against the local emulator
//! (fakecloud 0.51.0), through the real SDK clients: for each, create from template
//! properties, `read_current_state` gives them back in the template's shape, update, read
//! again, delete, delete again, and `import` reports it not deployed.
//!
//! Quirks of fakecloud that these tests meet are noted at each test.

use serde_json::{Value, json};
use stackflow_providers::sdk::iam::IamRoleProvider;
use stackflow_providers::sdk::lambda::LambdaFunctionProvider;
use stackflow_providers::sdk::s3::S3BucketProvider;
use stackflow_providers::{CurrentState, Deleted, Imported, Provider};
use stackflow_tests::round_trip::{props, read, request, sorted};
use stackflow_tests::{Emulator, unique_name};

/// The bucket round trip. fakecloud quirks:
/// - Only path-style addressing works (the provider is given `Emulator::s3()`).
/// - A new bucket has no encryption configuration at all (`GetBucketEncryption` answers
///   `ServerSideEncryptionConfigurationNotFoundError`), where AWS reports its default
///   SSE-S3 (`AES256`) rule; the provider leaves both out of the state, so the test cannot
///   tell them apart.
#[tokio::test]
async fn sdk_s3_bucket_round_trip() {
    let emulator = Emulator::shared().await;
    let s3 = emulator.s3().await;
    let provider = S3BucketProvider::new(s3.clone());
    let template = json!({
        "VersioningConfiguration": {"Status": "Enabled"},
        "Tags": [{"Key": "team", "Value": "core"}],
        "PublicAccessBlockConfiguration": {
            "BlockPublicAcls": true,
            "BlockPublicPolicy": true,
            "IgnorePublicAcls": true,
            "RestrictPublicBuckets": true
        },
        "BucketEncryption": {"ServerSideEncryptionConfiguration": [{
            "ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"},
            "BucketKeyEnabled": true
        }]},
        "LifecycleConfiguration": {"Rules": [{
            "Id": "expire-logs",
            "Prefix": "logs/",
            "Status": "Enabled",
            "ExpirationInDays": 30
        }]}
    });
    // A stack name with upper case and underscores: the generated name is still valid.
    let mut req = request("Logs_Bucket", "AWS::S3::Bucket", template.clone());
    req.stack_name = format!("My_{}", req.stack_name.to_uppercase());
    let created = provider.create(&req).await.expect("create");
    let name = created.physical_id.clone();
    assert!(name.starts_with("mystack-"), "{name}");
    assert!(name.contains("-logsbucket-"), "{name}");
    assert!(name.len() <= 63, "{name}");
    assert_eq!(
        created.attributes.get("Arn"),
        Some(&json!(format!("arn:aws:s3:::{name}")))
    );
    assert_eq!(
        created.attributes.get("RegionalDomainName"),
        Some(&json!(format!("{name}.s3.us-east-1.amazonaws.com")))
    );
    // A retry of the same create (same token) adopts the same bucket.
    let again = provider.create(&req).await.expect("create retried");
    assert_eq!(again.physical_id, name);

    req.physical_id = Some(name.clone());
    let mut expected = props(template);
    expected.insert("BucketName".into(), json!(name));
    assert_eq!(
        Value::Object(read(&provider, &req).await),
        Value::Object(sorted(expected)),
        "read_current_state must give back the template's properties"
    );

    let mut update = req.clone();
    update.previous_properties = Some(req.properties.clone());
    update.token = unique_name("token");
    let p = &mut update.properties;
    p.insert(
        "VersioningConfiguration".into(),
        json!({"Status": "Suspended"}),
    );
    p.insert("Tags".into(), json!([{"Key": "owner", "Value": "me"}]));
    p.remove("PublicAccessBlockConfiguration");
    p.remove("BucketEncryption");
    p.insert(
        "LifecycleConfiguration".into(),
        json!({"Rules": [{"Id": "tidy", "Status": "Enabled",
            "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 2}}]}),
    );
    let updated = provider.update(&update).await.expect("update");
    assert_eq!(updated.physical_id, name);
    assert!(!updated.replaced);
    let mut expected = update.properties.clone();
    expected.insert("BucketName".into(), json!(name));
    assert_eq!(
        Value::Object(read(&provider, &req).await),
        Value::Object(sorted(expected))
    );

    // Renaming is not an in-place update.
    let mut rename = update.clone();
    rename
        .properties
        .insert("BucketName".into(), json!(format!("{name}-x")));
    let err = provider.update(&rename).await.expect_err("rename");
    assert_eq!(err.name(), "Stackflow.NotUpdatable");

    match provider.import(&req).await.expect("import") {
        Imported::Found {
            physical_id,
            attributes,
        } => {
            assert_eq!(physical_id, name);
            assert!(attributes.contains_key("Arn"));
        }
        other => panic!("{other:?}"),
    }

    // A bucket with an object in it is not deleted, with a clear error.
    s3.put_object()
        .bucket(&name)
        .key("logs/a.txt")
        .body(aws_sdk_s3::primitives::ByteStream::from_static(b"a"))
        .send()
        .await
        .expect("PutObject");
    let err = provider.delete(&req).await.expect_err("non-empty bucket");
    assert_eq!(err.name(), "Stackflow.InvalidRequest", "{err}");
    assert!(err.message().contains("not empty"), "{err}");
    // Versioning was on (now suspended): remove every version by id, so that the bucket
    // is really empty (a plain DeleteObject would only add a delete marker).
    let versions = s3
        .list_object_versions()
        .bucket(&name)
        .send()
        .await
        .expect("ListObjectVersions");
    for v in versions.versions() {
        s3.delete_object()
            .bucket(&name)
            .key(v.key().unwrap_or_default())
            .set_version_id(v.version_id().map(str::to_string))
            .send()
            .await
            .expect("DeleteObject");
    }
    for m in versions.delete_markers() {
        s3.delete_object()
            .bucket(&name)
            .key(m.key().unwrap_or_default())
            .set_version_id(m.version_id().map(str::to_string))
            .send()
            .await
            .expect("DeleteObject marker");
    }

    assert_eq!(provider.delete(&req).await.expect("delete"), Deleted::Done);
    assert_eq!(
        provider.delete(&req).await.expect("delete again"),
        Deleted::Done
    );
    assert_eq!(
        provider.read_current_state(&req).await.expect("read"),
        CurrentState::NotFound
    );
    assert_eq!(
        provider.import(&req).await.expect("import"),
        Imported::NotDeployedYet
    );
    let mut by_name = req.clone();
    by_name.physical_id = None;
    by_name.properties.insert("BucketName".into(), json!(name));
    assert_eq!(
        provider.import(&by_name).await.expect("import by name"),
        Imported::NotDeployedYet
    );
}

fn trust_policy(service: &str) -> Value {
    json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Principal": {"Service": service},
            "Action": "sts:AssumeRole"
        }]
    })
}

/// The role round trip. fakecloud behaves like AWS here: it knows the AWS-managed policies
/// (`ReadOnlyAccess`, `AWSLambdaExecute`) and refuses to attach an unknown ARN
/// (`NoSuchEntity`), and it answers policy documents URL-encoded, so the decoding is
/// exercised.
#[tokio::test]
async fn sdk_iam_role_round_trip() {
    let config = Emulator::shared().await.sdk_config().await;
    let provider = IamRoleProvider::new(aws_sdk_iam::Client::new(&config));
    let template = json!({
        "AssumeRolePolicyDocument": trust_policy("lambda.amazonaws.com"),
        "Path": "/service/",
        "Description": "a role",
        "MaxSessionDuration": 7200,
        "ManagedPolicyArns": ["arn:aws:iam::aws:policy/ReadOnlyAccess"],
        "Policies": [{
            "PolicyName": "logs",
            "PolicyDocument": {
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": "logs:*", "Resource": "*"}]
            }
        }],
        "Tags": [{"Key": "team", "Value": "core"}]
    });
    let mut req = request("Role", "AWS::IAM::Role", template.clone());
    let created = provider.create(&req).await.expect("create");
    let name = created.physical_id.clone();
    assert!(
        name.starts_with(&format!("{}-Role-", req.stack_name)),
        "{name}"
    );
    assert!(name.len() <= 64);
    let arn = created
        .attributes
        .get("Arn")
        .and_then(Value::as_str)
        .expect("Arn");
    assert!(arn.ends_with(&format!("role/service/{name}")), "{arn}");
    assert!(created.attributes.contains_key("RoleId"));
    // A retry of the same create (same token) adopts the role.
    let again = provider.create(&req).await.expect("create retried");
    assert_eq!(again.physical_id, name);

    req.physical_id = Some(name.clone());
    let mut expected = props(template);
    expected.insert("RoleName".into(), json!(name));
    assert_eq!(
        Value::Object(read(&provider, &req).await),
        Value::Object(sorted(expected)),
        "read_current_state must give back the template's properties"
    );

    let mut update = req.clone();
    update.previous_properties = Some(req.properties.clone());
    update.token = unique_name("token");
    let p = &mut update.properties;
    p.insert(
        "AssumeRolePolicyDocument".into(),
        trust_policy("states.amazonaws.com"),
    );
    p.insert("Description".into(), json!("the same role"));
    p.remove("MaxSessionDuration");
    p.insert(
        "ManagedPolicyArns".into(),
        json!(["arn:aws:iam::aws:policy/AWSLambdaExecute"]),
    );
    p.insert(
        "Policies".into(),
        json!([{"PolicyName": "queues", "PolicyDocument": {"Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": "sqs:*", "Resource": "*"}]}}]),
    );
    p.insert("Tags".into(), json!([{"Key": "owner", "Value": "me"}]));
    let updated = provider.update(&update).await.expect("update");
    assert_eq!(updated.physical_id, name);
    let mut expected = update.properties.clone();
    expected.insert("RoleName".into(), json!(name));
    assert_eq!(
        Value::Object(read(&provider, &req).await),
        Value::Object(sorted(expected))
    );

    let mut moved = update.clone();
    moved.properties.insert("Path".into(), json!("/other/"));
    let err = provider.update(&moved).await.expect_err("new path");
    assert_eq!(err.name(), "Stackflow.NotUpdatable");

    // An unknown managed policy is the template's fault, not a missing role.
    let mut unknown = update.clone();
    unknown.previous_properties = Some(update.properties.clone());
    unknown.properties.insert(
        "ManagedPolicyArns".into(),
        json!(["arn:aws:iam::aws:policy/NoSuchPolicyForStackflowTests"]),
    );
    let err = provider.update(&unknown).await.expect_err("unknown policy");
    assert_eq!(err.name(), "Stackflow.InvalidRequest", "{err}");

    match provider.import(&req).await.expect("import") {
        Imported::Found {
            physical_id,
            attributes,
        } => {
            assert_eq!(physical_id, name);
            assert_eq!(attributes.get("Arn"), created.attributes.get("Arn"));
        }
        other => panic!("{other:?}"),
    }
    // Delete detaches the managed policy and deletes the inline one first.
    assert_eq!(provider.delete(&req).await.expect("delete"), Deleted::Done);
    assert_eq!(
        provider.delete(&req).await.expect("delete again"),
        Deleted::Done
    );
    assert_eq!(
        provider.read_current_state(&req).await.expect("read"),
        CurrentState::NotFound
    );
    assert_eq!(
        provider.import(&req).await.expect("import"),
        Imported::NotDeployedYet
    );
}

/// The function round trip. fakecloud quirks:
/// - `CreateFunction`, `GetFunction` and the updates work without containers, and the
///   function is `Active` at once, so the settle loop returns on its first look (the
///   `Pending`/`InProgress` path is not exercised); `Invoke` would need a container and is
///   not used.
/// - Neither the role (any ARN is accepted, existing or not, so the IAM propagation error
///   never occurs here) nor the zip (any bytes are accepted) is checked; the zip's
///   structure is checked by the provider's unit test.
///
/// `Code` cannot be read back (neither on AWS), so the code update is checked through
/// `CodeSha256`.
#[tokio::test]
async fn sdk_lambda_function_round_trip() {
    let config = Emulator::shared().await.sdk_config().await;
    let iam = aws_sdk_iam::Client::new(&config);
    let lambda = aws_sdk_lambda::Client::new(&config);
    let role_name = unique_name("fnrole");
    let role = iam
        .create_role()
        .role_name(&role_name)
        .assume_role_policy_document(trust_policy("lambda.amazonaws.com").to_string())
        .send()
        .await
        .expect("CreateRole");
    let role_arn = role.role().map(|r| r.arn().to_string()).expect("a role");

    let provider = LambdaFunctionProvider::new(lambda.clone());
    let template = json!({
        "Runtime": "nodejs20.x",
        "Handler": "index.handler",
        "Role": role_arn,
        "Code": {"ZipFile": "exports.handler = async () => ({ statusCode: 200 });"},
        "Timeout": 10,
        "MemorySize": 256,
        "Environment": {"Variables": {"STAGE": "test"}},
        "Description": "a function",
        "Architectures": ["arm64"],
        "Tags": [{"Key": "team", "Value": "core"}]
    });
    let mut req = request("Handler", "AWS::Lambda::Function", template.clone());
    let created = provider.create(&req).await.expect("create");
    let name = created.physical_id.clone();
    assert!(
        name.starts_with(&format!("{}-Handler-", req.stack_name)),
        "{name}"
    );
    let arn = created
        .attributes
        .get("Arn")
        .and_then(Value::as_str)
        .expect("Arn")
        .to_string();
    assert!(arn.ends_with(&format!(":function:{name}")), "{arn}");
    // A retry of the same create (same token) adopts the function.
    let again = provider.create(&req).await.expect("create retried");
    assert_eq!(again.physical_id, name);

    let sha = |name: String| {
        let lambda = lambda.clone();
        async move {
            lambda
                .get_function()
                .function_name(name)
                .send()
                .await
                .expect("GetFunction")
                .configuration()
                .and_then(|c| c.code_sha256().map(str::to_string))
        }
    };
    let first_sha = sha(name.clone()).await;

    req.physical_id = Some(name.clone());
    let mut expected = props(template);
    expected.remove("Code");
    expected.insert("FunctionName".into(), json!(name));
    assert_eq!(
        Value::Object(read(&provider, &req).await),
        Value::Object(sorted(expected)),
        "read_current_state must give back the template's properties (but Code)"
    );

    let mut update = req.clone();
    update.previous_properties = Some(req.properties.clone());
    update.token = unique_name("token");
    let p = &mut update.properties;
    p.insert(
        "Code".into(),
        json!({"ZipFile": "exports.handler = async () => ({ statusCode: 201 });"}),
    );
    p.insert("Timeout".into(), json!(30));
    p.remove("MemorySize");
    p.insert(
        "Environment".into(),
        json!({"Variables": {"STAGE": "prod", "MORE": "1"}}),
    );
    p.insert("Tags".into(), json!([{"Key": "owner", "Value": "me"}]));
    let updated = provider.update(&update).await.expect("update");
    assert_eq!(updated.physical_id, name);
    assert_eq!(updated.attributes.get("Arn"), Some(&json!(arn)));
    let mut expected = update.properties.clone();
    expected.remove("Code");
    expected.insert("FunctionName".into(), json!(name));
    assert_eq!(
        Value::Object(read(&provider, &req).await),
        Value::Object(sorted(expected))
    );
    assert_ne!(sha(name.clone()).await, first_sha, "the code was updated");

    let mut rename = update.clone();
    rename
        .properties
        .insert("FunctionName".into(), json!(format!("{name}-x")));
    let err = provider.update(&rename).await.expect_err("rename");
    assert_eq!(err.name(), "Stackflow.NotUpdatable");

    let mut by_name = req.clone();
    by_name.physical_id = None;
    by_name
        .properties
        .insert("FunctionName".into(), json!(name));
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
    assert_eq!(provider.delete(&req).await.expect("delete"), Deleted::Done);
    assert_eq!(
        provider.delete(&req).await.expect("delete again"),
        Deleted::Done
    );
    assert_eq!(
        provider.read_current_state(&req).await.expect("read"),
        CurrentState::NotFound
    );
    assert_eq!(
        provider.import(&by_name).await.expect("import"),
        Imported::NotDeployedYet
    );
    iam.delete_role()
        .role_name(&role_name)
        .send()
        .await
        .expect("DeleteRole");
}
