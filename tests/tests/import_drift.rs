//! `stackflow drift`, end to end through the CLI against the emulator (issue 14): on each
//! of the eight SDK provider types and two Cloud Control types, in sync right after the
//! deploy (no false drift), then a change made out of band with the AWS SDK is drift
//! (exit 1, naming the path), `--revert` puts AWS back (checked directly), `--accept`
//! takes AWS's value as the baseline; an out-of-band delete is reported and declined;
//! every revert (twice in a row, and in two stacks) reaches AWS under a token of its own.
//! Import and refusals: `import_drift_import.rs`; measurements: `import_drift_measure.rs`.
//!
//! fakecloud 0.51.0's Cloud Control answers the desired state of its own last
//! create/update, not the live resource (see `emulator_smoke.rs`), so the Cloud Control
//! types are changed out of band through Cloud Control's own `UpdateResource`.

use aws_sdk_dynamodb::types::{BillingMode, ProvisionedThroughput};
use aws_sdk_s3::types::{BucketVersioningStatus, VersioningConfiguration};
use serde_json::{Value, json};
use stackflow_tests::drift_cli::{Session, root};
use stackflow_tests::{Emulator, unique_name};

const STACK: &str = r#"
Parameters:
  P:
    Type: String
Resources:
  Topic:
    Type: AWS::SNS::Topic
    Properties:
      TopicName: !Sub "${P}-topic"
      DisplayName: hello
      Tags: [{Key: team, Value: a}]
  Queue:
    Type: AWS::SQS::Queue
    Properties:
      QueueName: !Sub "${P}-queue"
      VisibilityTimeout: 45
  Param:
    Type: AWS::SSM::Parameter
    Properties:
      Name: !Sub "/${P}/param"
      Type: String
      Value: one
  Table:
    Type: AWS::DynamoDB::Table
    Properties:
      TableName: !Sub "${P}-table"
      BillingMode: PAY_PER_REQUEST
      AttributeDefinitions: [{AttributeName: pk, AttributeType: S}]
      KeySchema: [{AttributeName: pk, KeyType: HASH}]
  Role:
    Type: AWS::IAM::Role
    Properties:
      RoleName: !Sub "${P}-role"
      Description: a role
      MaxSessionDuration: 3600
      AssumeRolePolicyDocument:
        Version: "2012-10-17"
        Statement:
          - Effect: Allow
            Principal: {Service: lambda.amazonaws.com}
            Action: sts:AssumeRole
  Fn:
    Type: AWS::Lambda::Function
    Properties:
      FunctionName: !Sub "${P}-fn"
      Runtime: nodejs20.x
      Handler: index.handler
      Role: !GetAtt Role.Arn
      Timeout: 10
      MemorySize: 128
      Code: {ZipFile: "exports.handler = async () => 1;"}
  Logs:
    Type: AWS::Logs::LogGroup
    Properties:
      LogGroupName: !Sub "/${P}/logs"
      RetentionInDays: 7
  Bucket:
    Type: AWS::S3::Bucket
    Properties:
      BucketName: !Sub "${P}-bucket"
      VersioningConfiguration: {Status: Enabled}
  Bus:
    Type: AWS::Events::EventBus
    Properties:
      Name: !Sub "${P}-bus"
      Description: bus one
  Repo:
    Type: AWS::ECR::Repository
    Properties:
      RepositoryName: !Sub "${P}-repo"
      ImageTagMutability: MUTABLE
"#;

/// Per resource: the path a change makes drift, the template's value, and the values
/// of the two out-of-band changes (`--revert`'s round, then `--accept`'s).
const CHANGES: &[(&str, &str, &str, &str, &str)] = &[
    ("Topic", "/DisplayName", "hello", "changed", "again"),
    ("Queue", "/VisibilityTimeout", "45", "99", "30"),
    ("Param", "/Value", "one", "two", "three"),
    (
        "Table",
        "/BillingMode",
        "PAY_PER_REQUEST",
        "PROVISIONED",
        "PROVISIONED",
    ),
    ("Role", "/Description", "a role", "changed", "again"),
    ("Fn", "/Timeout", "10", "20", "30"),
    ("Logs", "/RetentionInDays", "7", "14", "30"),
    (
        "Bucket",
        "/VersioningConfiguration/Status",
        "Enabled",
        "Suspended",
        "Suspended",
    ),
    ("Bus", "/Description", "bus one", "bus two", "bus three"),
    (
        "Repo",
        "/ImageTagMutability",
        "MUTABLE",
        "IMMUTABLE",
        "IMMUTABLE",
    ),
];

/// The SDK clients of the emulator, to change and read resources behind stackflow's back.
struct Aws {
    sns: aws_sdk_sns::Client,
    sqs: aws_sdk_sqs::Client,
    ssm: aws_sdk_ssm::Client,
    dynamodb: aws_sdk_dynamodb::Client,
    iam: aws_sdk_iam::Client,
    lambda: aws_sdk_lambda::Client,
    logs: aws_sdk_cloudwatchlogs::Client,
    s3: aws_sdk_s3::Client,
    cc: aws_sdk_cloudcontrol::Client,
}

impl Aws {
    async fn new(emu: &Emulator) -> Aws {
        let c = emu.sdk_config().await;
        Aws {
            sns: aws_sdk_sns::Client::new(&c),
            sqs: aws_sdk_sqs::Client::new(&c),
            ssm: aws_sdk_ssm::Client::new(&c),
            dynamodb: aws_sdk_dynamodb::Client::new(&c),
            iam: aws_sdk_iam::Client::new(&c),
            lambda: aws_sdk_lambda::Client::new(&c),
            logs: aws_sdk_cloudwatchlogs::Client::new(&c),
            s3: emu.s3().await,
            cc: aws_sdk_cloudcontrol::Client::new(&c),
        }
    }

    /// Sets resource `id` (physical id `pid`) to `value` at its path in [`CHANGES`].
    async fn change(&self, id: &str, pid: &str, value: &str) {
        let n = || value.parse::<i32>().expect("a number");
        match id {
            "Topic" => drop(
                self.sns
                    .set_topic_attributes()
                    .topic_arn(pid)
                    .attribute_name("DisplayName")
                    .attribute_value(value)
                    .send()
                    .await
                    .expect("SetTopicAttributes"),
            ),
            "Queue" => drop(
                self.sqs
                    .set_queue_attributes()
                    .queue_url(pid)
                    .attributes(
                        aws_sdk_sqs::types::QueueAttributeName::VisibilityTimeout,
                        value,
                    )
                    .send()
                    .await
                    .expect("SetQueueAttributes"),
            ),
            "Param" => drop(
                self.ssm
                    .put_parameter()
                    .name(pid)
                    .value(value)
                    .overwrite(true)
                    .send()
                    .await
                    .expect("PutParameter"),
            ),
            "Table" => self.provisioned(pid).await,
            "Role" => drop(
                self.iam
                    .update_role()
                    .role_name(pid)
                    .description(value)
                    .send()
                    .await
                    .expect("UpdateRole"),
            ),
            "Fn" => drop(
                self.lambda
                    .update_function_configuration()
                    .function_name(pid)
                    .timeout(n())
                    .send()
                    .await
                    .expect("UpdateFunctionConfiguration"),
            ),
            "Logs" => drop(
                self.logs
                    .put_retention_policy()
                    .log_group_name(pid)
                    .retention_in_days(n())
                    .send()
                    .await
                    .expect("PutRetentionPolicy"),
            ),
            "Bucket" => self.suspend_versioning(pid).await,
            "Bus" => {
                self.cc_patch("AWS::Events::EventBus", pid, "Description", value)
                    .await
            }
            "Repo" => {
                let ty = "AWS::ECR::Repository";
                self.cc_patch(ty, pid, "ImageTagMutability", value).await
            }
            other => panic!("no change for {other}"),
        }
    }

    async fn provisioned(&self, table: &str) {
        let throughput = ProvisionedThroughput::builder()
            .read_capacity_units(5)
            .write_capacity_units(5)
            .build()
            .expect("throughput");
        self.dynamodb
            .update_table()
            .table_name(table)
            .billing_mode(BillingMode::Provisioned)
            .provisioned_throughput(throughput)
            .send()
            .await
            .expect("UpdateTable");
    }

    async fn suspend_versioning(&self, bucket: &str) {
        let config = VersioningConfiguration::builder()
            .status(BucketVersioningStatus::Suspended)
            .build();
        self.s3
            .put_bucket_versioning()
            .bucket(bucket)
            .versioning_configuration(config)
            .send()
            .await
            .expect("PutBucketVersioning");
    }

    async fn cc_patch(&self, ty: &str, id: &str, key: &str, value: &str) {
        let patch = json!([{"op": "replace", "path": format!("/{key}"), "value": value}]);
        self.cc
            .update_resource()
            .type_name(ty)
            .identifier(id)
            .patch_document(patch.to_string())
            .send()
            .await
            .expect("UpdateResource");
    }

    /// What AWS holds for resource `id` at its path in [`CHANGES`], as text.
    async fn read(&self, id: &str, pid: &str) -> String {
        match id {
            "Topic" => {
                let out = self.sns.get_topic_attributes().topic_arn(pid).send().await;
                let attrs = out
                    .expect("GetTopicAttributes")
                    .attributes
                    .unwrap_or_default();
                attrs.get("DisplayName").cloned().unwrap_or_default()
            }
            "Queue" => {
                let name = aws_sdk_sqs::types::QueueAttributeName::VisibilityTimeout;
                let out = self.sqs.get_queue_attributes().queue_url(pid);
                let out = out.attribute_names(name.clone()).send().await;
                let attrs = out
                    .expect("GetQueueAttributes")
                    .attributes
                    .unwrap_or_default();
                attrs.get(&name).cloned().unwrap_or_default()
            }
            "Param" => {
                let out = self.ssm.get_parameter().name(pid).send().await;
                let p = out.expect("GetParameter").parameter.expect("a parameter");
                p.value.unwrap_or_default()
            }
            "Table" => {
                let out = self.dynamodb.describe_table().table_name(pid).send().await;
                let t = out.expect("DescribeTable").table.expect("a table");
                let mode = t.billing_mode_summary.and_then(|s| s.billing_mode);
                mode.map(|m| m.as_str().to_string()).unwrap_or_default()
            }
            "Role" => {
                let out = self.iam.get_role().role_name(pid).send().await;
                let role = out.expect("GetRole").role.expect("a role");
                role.description.unwrap_or_default()
            }
            "Fn" => {
                let out = self.lambda.get_function_configuration().function_name(pid);
                let f = out.send().await.expect("GetFunctionConfiguration");
                f.timeout.unwrap_or_default().to_string()
            }
            "Logs" => self.retention(pid).await,
            "Bucket" => {
                let out = self.s3.get_bucket_versioning().bucket(pid).send().await;
                let status = out.expect("GetBucketVersioning").status;
                status.map(|s| s.as_str().to_string()).unwrap_or_default()
            }
            "Bus" => {
                self.cc_read("AWS::Events::EventBus", pid, "Description")
                    .await
            }
            "Repo" => {
                let ty = "AWS::ECR::Repository";
                self.cc_read(ty, pid, "ImageTagMutability").await
            }
            other => panic!("no read for {other}"),
        }
    }

    async fn retention(&self, group: &str) -> String {
        let out = self.logs.describe_log_groups().log_group_name_prefix(group);
        let groups = out.send().await.expect("DescribeLogGroups").log_groups;
        let g = groups.unwrap_or_default().into_iter();
        let g = g.into_iter().find(|g| g.log_group_name() == Some(group));
        g.and_then(|g| g.retention_in_days)
            .map(|d| d.to_string())
            .unwrap_or_default()
    }

    async fn cc_read(&self, ty: &str, id: &str, key: &str) -> String {
        let out = self
            .cc
            .get_resource()
            .type_name(ty)
            .identifier(id)
            .send()
            .await;
        let d = out
            .expect("GetResource")
            .resource_description
            .expect("a resource");
        let props: Value = serde_json::from_str(d.properties().unwrap_or("{}")).expect("JSON");
        props[key].as_str().unwrap_or_default().to_string()
    }
}

fn session(emu: &Emulator, name: &str) -> Session {
    Session::new(
        emu,
        &root(env!("CARGO_TARGET_TMPDIR"), "import_drift"),
        name,
    )
}

/// The physical id of each resource of `stack`, by logical id.
fn physical_ids(s: &Session, stack: &str) -> Vec<(String, String)> {
    let state = s.state(stack);
    let resources = state["resources"].as_object().expect("resources");
    resources
        .iter()
        .map(|(id, r)| {
            (
                id.clone(),
                r["physicalId"].as_str().unwrap_or_default().into(),
            )
        })
        .collect()
}

fn pid<'a>(ids: &'a [(String, String)], id: &str) -> &'a str {
    &ids.iter().find(|(i, _)| i == id).expect("a resource").1
}

/// Makes every change of round `round` (1 or 2) out of band.
async fn change_all(aws: &Aws, ids: &[(String, String)], round: usize) {
    for (id, _, _, one, two) in CHANGES {
        aws.change(id, pid(ids, id), if round == 1 { one } else { two })
            .await;
    }
}

/// Drift after the changes: every resource drifted at its path, exit 1.
fn assert_all_drifted(s: &Session, stack: &str) {
    let drift = s.drift(stack, &[], 1);
    for (id, path, ..) in CHANGES {
        assert_eq!(drift.status(id), "drifted", "{id}: {:#}", drift.row(id));
        assert!(
            drift.paths(id).iter().any(|p| p == path),
            "{id}: {path} not named: {:#}",
            drift.row(id)
        );
    }
}

fn assert_all_in_sync(s: &Session, stack: &str) {
    let drift = s.drift(stack, &[], 0);
    for (id, status) in drift.statuses() {
        assert_eq!(status, "in-sync", "{id}: {:#}", drift.row(&id));
    }
    assert_eq!(drift.statuses().len(), CHANGES.len());
}

#[tokio::test]
async fn drift_revert_and_accept_on_eight_sdk_types_and_two_cloud_control_types() {
    let emu = Emulator::shared().await;
    let aws = Aws::new(emu).await;
    let s = session(emu, "drift10");
    let stack = unique_name("drift10");
    let prefix = stack.to_lowercase();
    let path = s.template("v1", &stack, STACK);
    s.run(&["deploy", &path, "--parameter", &format!("P={prefix}")], 0);
    // Right after the deploy: no false drift.
    assert_all_in_sync(&s, &stack);
    let ids = physical_ids(&s, &stack);

    change_all(&aws, &ids, 1).await;
    assert_all_drifted(&s, &stack);
    let reverted = s.drift(&stack, &["--revert"], 0);
    for (id, _, original, ..) in CHANGES {
        assert_eq!(reverted.status(id), "reverted", "{:#}", reverted.row(id));
        let now = aws.read(id, pid(&ids, id)).await;
        assert_eq!(&now, original, "{id}: --revert did not put AWS back");
    }
    assert_all_in_sync(&s, &stack);

    change_all(&aws, &ids, 2).await;
    assert_all_drifted(&s, &stack);
    let accepted = s.drift(&stack, &["--accept"], 0);
    for (id, .., two) in CHANGES {
        assert_eq!(accepted.status(id), "accepted", "{:#}", accepted.row(id));
        assert_eq!(
            &aws.read(id, pid(&ids, id)).await,
            two,
            "{id}: --accept changed AWS"
        );
    }
    assert_all_in_sync(&s, &stack);
    s.run(&["destroy", "--stack", &stack], 0);
}

const SMALL: &str = r#"
Parameters:
  P:
    Type: String
Resources:
  Queue:
    Type: AWS::SQS::Queue
    Properties:
      QueueName: !Sub "${P}-queue"
  Param:
    Type: AWS::SSM::Parameter
    Properties:
      Name: !Sub "/${P}/param"
      Type: String
      Value: one
"#;

#[tokio::test]
async fn an_out_of_band_delete_is_reported_and_accept_declines_it() {
    let emu = Emulator::shared().await;
    let aws = Aws::new(emu).await;
    let s = session(emu, "deleted");
    let stack = unique_name("deleted");
    let path = s.template("v1", &stack, SMALL);
    s.run(&["deploy", &path, "--parameter", &format!("P={stack}")], 0);
    let ids = physical_ids(&s, &stack);
    let queue = pid(&ids, "Queue");
    aws.sqs
        .delete_queue()
        .queue_url(queue)
        .send()
        .await
        .expect("DeleteQueue");

    let drift = s.drift(&stack, &[], 1);
    assert_eq!(drift.status("Queue"), "deleted", "{:#}", drift.0);
    assert_eq!(drift.status("Param"), "in-sync", "{:#}", drift.0);
    let text = s.run(&["drift", "--stack", &stack], 1).stdout;
    assert!(text.contains("Queue") && text.contains("deleted"), "{text}");

    // --accept (and --revert) decline a deleted resource: exit 2, nothing recorded.
    for flag in ["--accept", "--revert"] {
        let declined = s.drift(&stack, &[flag], 2);
        let row = declined.row("Queue");
        assert_eq!(row["status"], "declined", "{flag}: {row:#}");
        assert!(
            row["reason"]
                .as_str()
                .unwrap_or_default()
                .contains("deleted"),
            "{flag}: {row:#}"
        );
    }
    assert_eq!(s.drift(&stack, &[], 1).status("Queue"), "deleted");
    // Only the resource checked: the one in sync alone exits 0.
    s.drift(&stack, &["--resource", "Param"], 0);
}

const TWO_TYPES: &str = r#"
Parameters:
  P:
    Type: String
Resources:
  Queue:
    Type: AWS::SQS::Queue
    Properties:
      QueueName: !Sub "${P}-queue"
      VisibilityTimeout: 45
  Bus:
    Type: AWS::Events::EventBus
    Properties:
      Name: !Sub "${P}-bus"
      Description: bus one
"#;

/// The update intents of `stack`'s log about `id` (`events --json`: camelCase), with the
/// outcome each has in its run: `(token, outcome type)`.
fn reverts_of(s: &Session, stack: &str, id: &str) -> Vec<(String, String)> {
    let events: Vec<Value> = s
        .events_text(stack)
        .lines()
        .map(|l| serde_json::from_str(l).expect("an event line"))
        .collect();
    let of = |e: &Value| e["event"].clone();
    events
        .iter()
        .map(of)
        .filter(|e| {
            e["type"] == "ResourceIntent" && e["logicalId"] == id && e["operation"] == "update"
        })
        .map(|intent| {
            let token = intent["token"].as_str().unwrap_or_default().to_string();
            let deploy = &intent["deployId"];
            let outcome = events
                .iter()
                .map(of)
                .find(|e| {
                    e["deployId"] == *deploy
                        && (e["resource"]["logicalId"] == id || e["logicalId"] == id)
                        && e["type"] != "ResourceIntent"
                        && e["type"]
                            .as_str()
                            .is_some_and(|t| t.starts_with("Resource"))
                })
                .map(|e| e["type"].as_str().unwrap_or_default().to_string())
                .unwrap_or_default();
            (token, outcome)
        })
        .collect()
}

/// Issue 22: a revert is an action of the record, under a token of its own. Two reverts
/// of the same drift in a row, and reverts of the same logical ids in two stacks, each
/// reach AWS (an SDK type and a Cloud Control type: Cloud Control answers a token it has
/// seen with the first request's result) and each leave an intent and an outcome.
#[tokio::test]
async fn every_revert_reaches_aws_and_is_recorded_under_its_own_token() {
    let emu = Emulator::shared().await;
    let aws = Aws::new(emu).await;
    let s = session(emu, "revert2");
    let stacks = [unique_name("revert2a"), unique_name("revert2b")];
    let values = [
        ("Queue", "45", ["99", "98"]),
        ("Bus", "bus one", ["two", "three"]),
    ];
    let mut tokens = std::collections::BTreeSet::new();
    for stack in &stacks {
        let path = s.template("v1", stack, TWO_TYPES);
        let prefix = stack.to_lowercase();
        s.run(&["deploy", &path, "--parameter", &format!("P={prefix}")], 0);
        let ids = physical_ids(&s, stack);
        for round in 0..2 {
            for (id, _, changed) in &values {
                aws.change(id, pid(&ids, id), changed[round]).await;
            }
            let reverted = s.drift(stack, &["--revert"], 0);
            for (id, original, _) in &values {
                assert_eq!(reverted.status(id), "reverted", "{:#}", reverted.row(id));
                assert_eq!(
                    &aws.read(id, pid(&ids, id)).await,
                    original,
                    "{stack} {id} round {round}: the revert did not reach AWS"
                );
            }
        }
        for (id, ..) in &values {
            let reverts = reverts_of(&s, stack, id);
            assert_eq!(reverts.len(), 2, "{stack} {id}: {reverts:?}");
            for (token, outcome) in reverts {
                assert_eq!(outcome, "ResourceUpdated", "{stack} {id} {token}");
                assert!(tokens.insert(token.clone()), "{token} used twice");
            }
        }
    }
    assert_eq!(tokens.len(), 8);
    for stack in &stacks {
        s.run(&["destroy", "--stack", stack], 0);
    }
}
