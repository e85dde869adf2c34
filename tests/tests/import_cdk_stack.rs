//! Adopting what CloudFormation made, end to end through the CLI against the emulator's
//! CloudFormation (issue 24):
//! - a stack made with `CreateStack` from a CDK-shaped template whose resources name
//!   nothing (CloudFormation generates every name) is adopted by a plain `stackflow
//!   import`: every physical id comes from the CloudFormation stack, which is left as it
//!   is; the next `diff` shows no create and the next deploy makes nothing twice, counted
//!   with the services' own APIs;
//! - a selective import (`--resource-mapping`) adopts only what it names, and
//!   `--dry-run` with `--record-resource-mapping` writes what was found and records
//!   nothing;
//! - a migration of a stack whose template is over the 51,200 bytes `UpdateStack` takes
//!   inline completes (the template goes by `TemplateURL`).

use aws_sdk_cloudformation::Client as Cfn;
use aws_sdk_cloudformation::types::StackStatus;
use serde_json::{Value, json};
use stackflow_tests::drift_cli::{Session, import_row, root};
use stackflow_tests::{Emulator, unique_name};

fn session(emu: &Emulator, name: &str) -> Session {
    let dir = root(env!("CARGO_TARGET_TMPDIR"), "import_cdk_stack");
    Session::new(emu, &dir, name)
}

/// A CDK-shaped template: no resource names itself, each carries its construct path.
fn cdk_template(filler: usize) -> Value {
    let path = |p: &str| json!({ "aws:cdk:path": format!("App/{p}/Resource") });
    let mut v = json!({ "Resources": {
        "OrdersTopic1A2B3C4D": { "Type": "AWS::SNS::Topic",
            "Properties": { "DisplayName": "orders" }, "Metadata": path("Orders") },
        "JobsQueue5E6F7A8B": { "Type": "AWS::SQS::Queue",
            "Properties": { "DelaySeconds": 5, "RedrivePolicy": {
                "deadLetterTargetArn": { "Fn::GetAtt": ["JobsDead9C0D1E2F", "Arn"] },
                "maxReceiveCount": 3 } },
            "Metadata": path("Jobs") },
        "JobsDead9C0D1E2F": { "Type": "AWS::SQS::Queue",
            "Properties": { "MessageRetentionPeriod": 1209600 }, "Metadata": path("Dead") }
    } });
    if filler > 0 {
        // What makes CDK templates large: metadata (asset paths, construct trees).
        v["Metadata"] = json!({ "Filler": "x".repeat(filler) });
    }
    v
}

const IDS: [&str; 3] = [
    "OrdersTopic1A2B3C4D",
    "JobsQueue5E6F7A8B",
    "JobsDead9C0D1E2F",
];

/// Creates stack `name` from `template` with CloudFormation; its physical ids by
/// logical id.
async fn create(cfn: &Cfn, name: &str, template: &Value) -> Vec<(String, String)> {
    cfn.create_stack()
        .stack_name(name)
        .template_body(template.to_string())
        .send()
        .await
        .expect("CreateStack");
    let out = cfn
        .describe_stacks()
        .stack_name(name)
        .send()
        .await
        .expect("DescribeStacks");
    let stack = &out.stacks()[0];
    let status = stack.stack_status().cloned();
    let reason = stack.stack_status_reason().unwrap_or_default();
    assert_eq!(status, Some(StackStatus::CreateComplete), "{reason}");
    let out = cfn
        .describe_stack_resources()
        .stack_name(name)
        .send()
        .await
        .expect("DescribeStackResources");
    out.stack_resources()
        .iter()
        .map(|r| {
            let logical = r.logical_resource_id().unwrap_or_default().to_string();
            (logical, r.physical_resource_id().unwrap_or_default().into())
        })
        .collect()
}

fn id_of<'a>(ids: &'a [(String, String)], logical: &str) -> &'a str {
    &ids.iter().find(|(l, _)| l == logical).expect(logical).1
}

/// How many queues and topics AWS holds whose names carry `stack`'s name, counted with
/// the services' APIs.
async fn counted(emu: &Emulator, stack: &str) -> (usize, usize) {
    let config = emu.sdk_config().await;
    let sqs = aws_sdk_sqs::Client::new(&config);
    let queues = sqs.list_queues().send().await.expect("ListQueues");
    let queues = queues
        .queue_urls()
        .iter()
        .filter(|u| u.contains(stack))
        .count();
    let sns = aws_sdk_sns::Client::new(&config);
    let topics = sns.list_topics().send().await.expect("ListTopics");
    let topics = topics
        .topics()
        .iter()
        .filter(|t| t.topic_arn().is_some_and(|a| a.contains(stack)))
        .count();
    (queues, topics)
}

#[tokio::test]
async fn a_stack_cdk_deploy_made_is_adopted_by_a_plain_import() {
    let emu = Emulator::shared().await;
    let cfn = Cfn::new(&emu.sdk_config().await);
    let name = unique_name("cdkimp");
    let ids = create(&cfn, &name, &cdk_template(0)).await;
    let before = counted(emu, &name).await;
    assert_eq!(before, (2, 1), "CloudFormation made one of each");
    let s = session(emu, "plain");
    let body = serde_json::to_string_pretty(&cdk_template(0)).unwrap();
    let path = s.template("v1", &name, &body);

    let report = s.json(&["import", &path, "--stack", &name], 0);
    assert_eq!(report["fromCloudformation"], name.as_str(), "{report:#}");
    for id in IDS {
        let row = import_row(&report, id);
        assert_eq!(row["status"], "imported", "{id}: {report:#}");
        assert_eq!(row["physicalId"], id_of(&ids, id), "{id}: {report:#}");
    }
    let described = cfn.describe_stacks().stack_name(&name).send().await;
    assert!(
        described.is_ok(),
        "the CloudFormation stack is left as it is"
    );

    let diff = s.json(&["diff", &path], 0);
    let rows = diff["stacks"][0]["resources"].as_array().expect("rows");
    assert!(
        rows.iter().all(|r| r["action"] != "create"),
        "nothing to create: {diff:#}"
    );
    let deploy = s.json(&["deploy", &path], 0);
    let d = &deploy["stacks"][0];
    for key in ["created", "replaced", "deleted"] {
        assert_eq!(d[key], 0, "{key}: {deploy:#}");
    }
    assert_eq!(counted(emu, &name).await, before, "nothing made twice");
}

#[tokio::test]
async fn a_selective_dry_run_records_its_mapping_and_nothing_else() {
    let emu = Emulator::shared().await;
    let cfn = Cfn::new(&emu.sdk_config().await);
    let name = unique_name("cdksel");
    let ids = create(&cfn, &name, &cdk_template(0)).await;
    let s = session(emu, "selective");
    let body = serde_json::to_string_pretty(&cdk_template(0)).unwrap();
    let path = s.template("v1", &name, &body);

    // A dry run of the whole stack writes the mapping it found, and records nothing.
    let mapping = s.dir().join("mapping.json");
    let mapping_arg = mapping.display().to_string();
    let args = ["import", &path, "--stack", &name, "--dry-run"];
    let record = ["--record-resource-mapping", mapping_arg.as_str()];
    let dry = s.json(&[&args[..], &record[..]].concat(), 0);
    assert_eq!(dry["dryRun"], true, "{dry:#}");
    let written: Value = serde_json::from_slice(&std::fs::read(&mapping).unwrap()).unwrap();
    for id in IDS {
        assert_eq!(written[id], id_of(&ids, id), "{written:#}");
    }
    let state = s.cli.run(&["state", "show", "--stack", &name]);
    assert_eq!(
        state.code,
        Some(1),
        "nothing recorded: {}",
        state.describe()
    );

    // Only the dead-letter queue, by the mapping (edited down to it).
    let queue = json!({ IDS[2]: id_of(&ids, IDS[2]) });
    std::fs::write(&mapping, queue.to_string()).unwrap();
    let args = [
        "import",
        &path,
        "--stack",
        &name,
        "--resource-mapping",
        &mapping_arg,
    ];
    let report = s.json(&args, 0);
    let status = |id: &str| import_row(&report, id)["status"].clone();
    assert_eq!(status(IDS[2]), "imported", "{report:#}");
    for id in [IDS[0], IDS[1]] {
        assert_eq!(status(id), "out-of-scope", "{report:#}");
    }
    let recorded = s.state(&name);
    let recorded = recorded["resources"].as_object().expect("resources");
    assert_eq!(recorded.keys().collect::<Vec<_>>(), [IDS[2]]);
}

#[tokio::test]
async fn a_migration_of_a_template_over_51200_bytes_completes() {
    let emu = Emulator::shared().await;
    let config = emu.sdk_config().await;
    let cfn = Cfn::new(&config);
    let name = unique_name("cdkbig");
    // Retain from the start: the emulator's CloudFormation keeps creation-time policies
    // (see import_migrate.rs), so this is what lets the resources outlive the delete.
    let mut template = cdk_template(60_000);
    for id in IDS {
        template["Resources"][id]["DeletionPolicy"] = json!("Retain");
    }
    assert!(template.to_string().len() > 51_200);
    let ids = create(&cfn, &name, &template).await;
    // What the migration reads back (and sends with Retain) is that large too.
    let current = cfn.get_template().stack_name(&name).send().await;
    let current = current
        .expect("GetTemplate")
        .template_body()
        .unwrap_or_default()
        .len();
    assert!(current > 51_200, "GetTemplate gives {current} bytes");
    let mut s = session(emu, "big");
    let bucket = unique_name("cdkbig-bucket");
    let s3 = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&config)
            .force_path_style(true)
            .build(),
    );
    s3.create_bucket()
        .bucket(&bucket)
        .send()
        .await
        .expect("CreateBucket");
    s.cli.bucket = Some(bucket.clone());
    let body = serde_json::to_string_pretty(&cdk_template(0)).unwrap();
    let path = s.template("v1", &name, &body);
    let args = [
        "import",
        &path,
        "--stack",
        &name,
        "--migrate-from-cloudformation",
    ];
    let report = s.json(&args, 0);
    assert_eq!(report["migration"]["outcome"], "deleted", "{report:#}");
    for id in IDS {
        assert_eq!(import_row(&report, id)["physicalId"], id_of(&ids, id));
    }
    let gone = cfn.describe_stacks().stack_name(&name).send().await;
    let live = gone.ok().and_then(|o| {
        o.stacks()
            .first()
            .and_then(|s| s.stack_status().cloned())
            .filter(|s| *s != StackStatus::DeleteComplete)
    });
    assert_eq!(live, None, "the stack is gone");
    // The template went by S3 and was removed after the update.
    let left = s3
        .list_objects_v2()
        .bucket(&bucket)
        .prefix("inputs/migrations/")
        .send()
        .await
        .expect("ListObjectsV2");
    assert_eq!(left.key_count(), Some(0), "{left:?}");
    assert_eq!(counted(emu, &name).await, (2, 1), "retained");
}
