//! The hard case of the faults campaign: the answer of a create is lost. The call was
//! carried out, the connection closed before its answer came, and the SDK sends it again.
//!
//! For each provider, with a name the template gives and with a generated one, a
//! [`FaultProxy`] drops the answer of the first create call of a one-resource stack (the
//! emulator made the resource), and the deploy goes on as it does. Then: does the deploy
//! succeed; how many resources of the type exist in AWS against how many the state
//! records (more in AWS: an orphan, that nothing will delete); and does a second deploy,
//! a user's retry, succeed. The stack is destroyed and the leftovers deleted after each.
//!
//! What makes a repeated create safe: Cloud Control replays a request with the same
//! `ClientToken`; a generated name holds the hash of the action's token, so the repeat
//! finds the resource it made (a provider adopts its own generated name); SNS
//! `CreateTopic` and SQS `CreateQueue` answer the existing resource (the check that the
//! name is free is made once, before the call). A repeat that the service refuses because
//! the name is taken (`ParameterAlreadyExists`, `ResourceInUseException`,
//! `EntityAlreadyExists`, `ResourceConflictException`, `ResourceAlreadyExistsException`,
//! `BucketAlreadyOwnedByYou`) is taken for another owner's resource: the deploy fails and
//! the resource its own first call made is left behind. [`EXPECTED`] pins what each
//! provider does today; a change either way fails the test, with the whole table.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::{Value, json};
use stackflow_core::template::{StackTemplate, Template};
use stackflow_engine::{DeployOptions, StackStatus, deploy_stack, destroy_stack};
use stackflow_events::sqlite::SqliteStore;
use stackflow_events::{StreamId, load_state};
use stackflow_tests::deploy::{cli_config, engine, input, summary};
use stackflow_tests::emulator::REGION;
use stackflow_tests::faults::{Fault, FaultConfig, FaultProxy};
use stackflow_tests::inventory::{Inventory, SDK_TYPES};
use stackflow_tests::{Emulator, unique_name};

/// One provider's create, with a given or a generated name.
struct Probe {
    /// The provider and whether the name is given.
    label: &'static str,
    /// The resource type.
    ty: &'static str,
    /// The operation whose first answer is dropped.
    op: &'static str,
    /// The resource's properties, for a tag.
    properties: fn(&str) -> Value,
}

const ASSUME: &str = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"lambda.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#;

fn role_policy() -> Value {
    serde_json::from_str(ASSUME).unwrap_or_default()
}

fn function(name: Option<String>) -> Value {
    let mut p = json!({
        "Role": {"Fn::GetAtt": ["Role", "Arn"]},
        "Runtime": "nodejs22.x",
        "Handler": "index.handler",
        "Code": {"ZipFile": "exports.handler = async () => 1;"}
    });
    if let Some(name) = name {
        p["FunctionName"] = json!(name);
    }
    p
}

fn table(name: Option<String>) -> Value {
    let mut p = json!({
        "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
        "BillingMode": "PAY_PER_REQUEST"
    });
    if let Some(name) = name {
        p["TableName"] = json!(name);
    }
    p
}

const PROBES: &[Probe] = &[
    Probe {
        label: "SSM named",
        ty: "AWS::SSM::Parameter",
        op: "PutParameter",
        properties: |t| json!({"Name": format!("/{t}/p"), "Type": "String", "Value": "v"}),
    },
    Probe {
        label: "SSM generated",
        ty: "AWS::SSM::Parameter",
        op: "PutParameter",
        properties: |_| json!({"Type": "String", "Value": "v"}),
    },
    Probe {
        label: "SQS named",
        ty: "AWS::SQS::Queue",
        op: "CreateQueue",
        properties: |t| json!({"QueueName": format!("{t}-q")}),
    },
    Probe {
        label: "SQS generated",
        ty: "AWS::SQS::Queue",
        op: "CreateQueue",
        properties: |_| json!({}),
    },
    Probe {
        label: "SNS named",
        ty: "AWS::SNS::Topic",
        op: "CreateTopic",
        properties: |t| json!({"TopicName": format!("{t}-t")}),
    },
    Probe {
        label: "SNS generated",
        ty: "AWS::SNS::Topic",
        op: "CreateTopic",
        properties: |_| json!({}),
    },
    Probe {
        label: "S3 named",
        ty: "AWS::S3::Bucket",
        op: "PUT /{bucket}",
        properties: |t| json!({"BucketName": format!("{t}-b")}),
    },
    Probe {
        label: "S3 generated",
        ty: "AWS::S3::Bucket",
        op: "PUT /{bucket}",
        properties: |_| json!({}),
    },
    Probe {
        label: "DynamoDB named",
        ty: "AWS::DynamoDB::Table",
        op: "CreateTable",
        properties: |t| table(Some(format!("{t}-tb"))),
    },
    Probe {
        label: "DynamoDB generated",
        ty: "AWS::DynamoDB::Table",
        op: "CreateTable",
        properties: |_| table(None),
    },
    Probe {
        label: "IAM role named",
        ty: "AWS::IAM::Role",
        op: "CreateRole",
        properties: |t| json!({"RoleName": format!("{t}-r"), "AssumeRolePolicyDocument": role_policy()}),
    },
    Probe {
        label: "IAM role generated",
        ty: "AWS::IAM::Role",
        op: "CreateRole",
        properties: |_| json!({"AssumeRolePolicyDocument": role_policy()}),
    },
    Probe {
        label: "Lambda named",
        ty: "AWS::Lambda::Function",
        op: "POST /{}/functions",
        properties: |t| function(Some(format!("{t}-f"))),
    },
    Probe {
        label: "Lambda generated",
        ty: "AWS::Lambda::Function",
        op: "POST /{}/functions",
        properties: |_| function(None),
    },
    Probe {
        label: "Logs named",
        ty: "AWS::Logs::LogGroup",
        op: "CreateLogGroup",
        properties: |t| json!({"LogGroupName": format!("/{t}/lg")}),
    },
    Probe {
        label: "Logs generated",
        ty: "AWS::Logs::LogGroup",
        op: "CreateLogGroup",
        properties: |_| json!({}),
    },
    Probe {
        label: "Cloud Control named",
        ty: "AWS::Events::EventBus",
        op: "CreateResource",
        properties: |t| json!({"Name": format!("{t}-bus")}),
    },
    Probe {
        // A type that stays with Cloud Control and whose id AWS assigns (a KMS key was
        // this probe until it got an SDK provider).
        label: "Cloud Control unnamed",
        ty: "AWS::ApiGateway::RestApi",
        op: "CreateResource",
        properties: |t| json!({"Name": format!("{t}-api")}),
    },
];

/// The probes that do not end `ok` (the deploy succeeds, and AWS has the one resource
/// the state records), and what they do instead: `orphan`, the deploy fails on its own
/// resource, which stays in AWS with no record. None today: a name the template gives is
/// looked up once before the create (SSM, DynamoDB, IAM, Lambda and Logs refuse a taken
/// name themselves, so an SDK retry of a create whose answer was lost used to get
/// "already exists" about the resource its first attempt made); a name that was free
/// then and is taken now is this call's own. Add an entry to pin a provider that regresses.
const EXPECTED: &[(&str, &str)] = &[];

/// The stack of a probe: the resource `R` (and the role `Role` of a function).
fn stack(probe: &Probe, tag: &str) -> StackTemplate {
    let mut resources = json!({"R": {"Type": probe.ty, "Properties": (probe.properties)(tag)}});
    if probe.ty == "AWS::Lambda::Function" {
        resources["Role"] = json!({"Type": "AWS::IAM::Role", "Properties": {"AssumeRolePolicyDocument": role_policy()}});
    }
    let template = Template::from_value(&json!({ "Resources": resources }))
        .unwrap_or_else(|e| panic!("{}: {e}", probe.label));
    StackTemplate {
        display_name: None,
        name: tag.to_string(),
        file: format!("{}.json", probe.label).into(),
        template,
        dependencies: Vec::new(),
        parameters: Default::default(),
        nested: Default::default(),
        assets: None,
        environment: Default::default(),
    }
}

/// The resources of `probe`'s type in AWS that carry `tag` (SDK types, by name) or that
/// Cloud Control lists and did not list `before`.
async fn in_aws(
    inventory: &Inventory,
    probe: &Probe,
    tag: &str,
    before: &BTreeSet<String>,
) -> Vec<String> {
    let mut found = if SDK_TYPES.contains(&probe.ty) {
        inventory
            .tagged(probe.ty, tag)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    } else {
        Vec::new()
    };
    let listed = inventory.cloud_control(probe.ty).await.unwrap_or_default();
    found.extend(listed.into_iter().filter(|id| !before.contains(id)));
    found
}

/// Runs one probe: what happened, in a word and in a line.
async fn run(probe: &Probe, emulator: &Emulator, inventory: &Inventory) -> (String, String) {
    let tag = unique_name("lost");
    let before: BTreeSet<String> = inventory
        .cloud_control(probe.ty)
        .await
        .unwrap_or_default()
        .into_iter()
        .collect();
    let proxy = FaultProxy::start(
        emulator.endpoint(),
        FaultConfig::first(probe.op, Fault::Drop, 1),
    )
    .await
    .expect("the fault proxy");
    let config = cli_config(&emulator.sdk_config().await, &proxy.endpoint());
    let store = Arc::new(SqliteStore::open_in_memory().expect("a store"));
    let engine = engine(&config, store.clone());
    let template = stack(probe, &tag);
    let first = deploy_stack(engine.clone(), input(&template, &tag), DeployOptions::new()).await;
    let first = first.unwrap_or_else(|e| panic!("{}: {e}", probe.label));
    let dropped = proxy.faults_of(probe.op, Fault::Drop);
    let state = load_state(&*store, &StreamId::new(REGION, &tag))
        .await
        .expect("the state");
    let recorded = state
        .resources
        .values()
        .filter(|r| r.resource_type == probe.ty)
        .count();
    let found = in_aws(inventory, probe, &tag, &before).await;
    let second = deploy_stack(engine.clone(), input(&template, &tag), DeployOptions::new()).await;
    let second = second
        .map(|r| summary(&r))
        .unwrap_or_else(|e| e.to_string());
    let destroyed = destroy_stack(engine, &tag, DeployOptions::new()).await;
    let destroyed = destroyed
        .map(|r| summary(&r))
        .unwrap_or_else(|e| e.to_string());
    let left = in_aws(inventory, probe, &tag, &before).await;
    for id in &left {
        let sdk = SDK_TYPES.contains(&probe.ty);
        let _ = inventory.delete(probe.ty, id, sdk).await;
    }
    let word = match (first.status, recorded, found.len()) {
        (StackStatus::Succeeded, 1, 1) => "ok",
        (StackStatus::Failed, 0, 1) => "orphan",
        _ => "other",
    };
    let line = format!(
        "{:<22} dropped {dropped} {:<20} -> {word}: AWS has {} ({found:?}), the state {recorded}\n    \
         first deploy: {}\n    second deploy: {second}\n    destroy: {destroyed}; left in AWS after it: {left:?}",
        probe.label,
        probe.op,
        found.len(),
        summary(&first),
    );
    (word.to_string(), line)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_create_whose_answer_is_lost() {
    let emulator = Emulator::shared().await;
    let inventory = Inventory::new(emulator).await;
    let mut lines = Vec::new();
    let mut wrong = Vec::new();
    for probe in PROBES {
        let (word, line) = run(probe, emulator, &inventory).await;
        eprintln!("{line}");
        let expected = EXPECTED
            .iter()
            .find(|(l, _)| *l == probe.label)
            .map_or("ok", |(_, w)| *w);
        if word != expected {
            wrong.push(format!("{}: {word}, expected {expected}", probe.label));
        }
        lines.push(line);
    }
    assert!(
        wrong.is_empty(),
        "{}\n\n{}",
        wrong.join("\n"),
        lines.join("\n")
    );
}
