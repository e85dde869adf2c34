//! `stackflow import`, end to end through the CLI against the emulator (issue 14): by
//! name and by `--resource`, not deployed yet, unsupported, `--force` and merge; a deploy
//! right after an import changes nothing; the first diff shows what AWS holds; journal
//! marks honoured by a later rollback; secret references kept as references; a masked
//! position not compared (exit 2). Refusals: `import_drift_refusals.rs`.

use serde_json::Value;
use stackflow_tests::drift_cli::{Session, import_row, root};
use stackflow_tests::{Emulator, unique_name};

fn session(emu: &Emulator, name: &str) -> Session {
    let dir = root(env!("CARGO_TARGET_TMPDIR"), "import_drift_import");
    Session::new(emu, &dir, name)
}

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
  Queue:
    Type: AWS::SQS::Queue
    Properties:
      VisibilityTimeout: 45
  Param:
    Type: AWS::SSM::Parameter
    Properties:
      Name: !Sub "/${P}/param"
      Type: String
      Value: !GetAtt Topic.TopicName
  Table:
    Type: AWS::DynamoDB::Table
    Properties:
      TableName: !Sub "${P}-table"
      BillingMode: PAY_PER_REQUEST
      AttributeDefinitions: [{AttributeName: pk, AttributeType: S}]
      KeySchema: [{AttributeName: pk, KeyType: HASH}]
"#;

/// [`STACK`] with `P`'s Default `prefix` (an import binds every parameter at its Default).
fn stack_template(prefix: &str) -> String {
    STACK.replace(
        "  P:\n    Type: String\n",
        &format!("  P:\n    Type: String\n    Default: {prefix}\n"),
    )
}

/// [`STACK`] plus a resource that does not exist yet and one no provider can look up.
fn with_extras(prefix: &str) -> String {
    format!(
        "{}
  Later:
    Type: AWS::SSM::Parameter
    Properties:
      Name: /{prefix}/later
      Type: String
      Value: later
  Custom:
    Type: Custom::Thing
    Properties:
      ServiceToken: arn:aws:lambda:us-east-1:123456789012:function:nothing
",
        stack_template(prefix)
    )
}

fn status(report: &Value, id: &str) -> String {
    import_row(report, id)["status"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn physical_id(s: &Session, stack: &str, id: &str) -> String {
    let state = s.state(stack);
    let pid = state["resources"][id]["physicalId"].as_str();
    pid.unwrap_or_else(|| panic!("{id} not recorded: {state:#}"))
        .to_string()
}

/// Deploys [`STACK`] as `stack` from a session of its own; returns the queue's URL.
fn deployed(emu: &Emulator, stack: &str) -> String {
    let first = session(emu, "deployer");
    let path = first.template("v1", stack, &stack_template(stack));
    first.run(&["deploy", &path], 0);
    physical_id(&first, stack, "Queue")
}

#[tokio::test]
async fn import_by_name_and_override_then_a_deploy_changes_nothing() {
    let emu = Emulator::shared().await;
    let stack = unique_name("imp");
    let queue = deployed(emu, &stack);
    let s = session(emu, "importer");
    let extras = s.template("extras", &stack, &with_extras(&stack));
    let import = |more: &[&str], code: i32| {
        let mut args = vec!["import", extras.as_str(), "--stack", &stack];
        args.extend_from_slice(more);
        s.json(&args, code)
    };
    let report = import(&[], 0);
    assert_eq!(status(&report, "Topic"), "imported", "{report:#}");
    assert_eq!(status(&report, "Table"), "imported", "{report:#}");
    assert_eq!(status(&report, "Param"), "imported", "{report:#}");
    assert_eq!(status(&report, "Queue"), "not-deployed-yet", "{report:#}");
    assert_eq!(status(&report, "Later"), "not-deployed-yet", "{report:#}");
    assert_eq!(status(&report, "Custom"), "unsupported", "{report:#}");

    // Existing state: refused without --force or --resource.
    let refused = s.run(&["import", &extras, "--stack", &stack], 1);
    assert!(refused.stderr.contains("--force"), "{}", refused.describe());
    // --resource alone merges: the queue is added, the rest kept.
    let merged = import(&["--resource", &format!("Queue={queue}")], 0);
    assert_eq!(status(&merged, "Queue"), "imported", "{merged:#}");
    assert_eq!(import_row(&merged, "Queue")["physicalId"], queue.as_str());
    assert_eq!(status(&merged, "Topic"), "kept", "{merged:#}");
    // --auto --force imports everything again (the name given wins).
    let again = ["--auto", "--force", "--resource", &format!("Queue={queue}")];
    let forced = import(&again, 0);
    for id in ["Topic", "Queue", "Param", "Table"] {
        assert_eq!(status(&forced, id), "imported", "{id}: {forced:#}");
    }

    // AWS matches the template: the next deploy makes no call.
    let path = s.template("v1", &stack, &stack_template(&stack));
    let deploy = s.json(&["deploy", &path], 0);
    let d = &deploy["stacks"][0];
    for key in ["created", "updated", "replaced", "deleted"] {
        assert_eq!(d[key], 0, "{key}: {deploy:#}");
    }
    let events = s.events_text(&stack);
    for kind in ["ResourceIntent", "ResourceCreated", "ResourceUpdated"] {
        assert!(
            !events.contains(kind),
            "the deploy after the import made a {kind}"
        );
    }
    s.drift(&stack, &[], 0);
}

#[tokio::test]
async fn the_first_diff_after_an_import_shows_what_aws_holds() {
    let emu = Emulator::shared().await;
    let config = emu.sdk_config().await;
    let stack = unique_name("impdiff");
    let queue = deployed(emu, &stack);
    // Out of band: a topic's display name, a queue and a table back at AWS's defaults.
    let sns = aws_sdk_sns::Client::new(&config);
    let topic = format!("arn:aws:sns:us-east-1:123456789012:{stack}-topic");
    let set = sns.set_topic_attributes().topic_arn(&topic);
    let set = set
        .attribute_name("DisplayName")
        .attribute_value("elsewhere");
    set.send().await.expect("SetTopicAttributes");
    let sqs = aws_sdk_sqs::Client::new(&config);
    let timeout = aws_sdk_sqs::types::QueueAttributeName::VisibilityTimeout;
    let set = sqs.set_queue_attributes().queue_url(&queue);
    set.attributes(timeout.clone(), "30")
        .send()
        .await
        .expect("SetQueueAttributes");
    let ddb = aws_sdk_dynamodb::Client::new(&config);
    let throughput = aws_sdk_dynamodb::types::ProvisionedThroughput::builder()
        .read_capacity_units(1)
        .write_capacity_units(1)
        .build()
        .expect("throughput");
    let update = ddb.update_table().table_name(format!("{stack}-table"));
    let update = update.billing_mode(aws_sdk_dynamodb::types::BillingMode::Provisioned);
    update
        .provisioned_throughput(throughput)
        .send()
        .await
        .expect("UpdateTable");

    let s = session(emu, "diff");
    let path = s.template("v1", &stack, &stack_template(&stack));
    let queue_arg = format!("Queue={queue}");
    // --auto: the queue by its URL, everything else by name.
    let args = [
        "import",
        &path,
        "--stack",
        &stack,
        "--auto",
        "--resource",
        &queue_arg,
    ];
    s.json(&args, 0);
    let diff = s.json(&["diff", &path], 0);
    let rows = diff["stacks"][0]["resources"].as_array().expect("rows");
    let changed = |id: &str| -> Vec<String> {
        let row = rows.iter().find(|r| r["logicalId"] == id).expect("a row");
        assert_eq!(row["action"], "update", "{id}: {row:#}");
        let changes = row["changes"].as_array().expect("changes");
        changes
            .iter()
            .map(|c| c["path"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    assert_eq!(changed("Topic"), ["DisplayName"]);
    assert_eq!(changed("Queue"), ["VisibilityTimeout"]);
    assert!(changed("Table").contains(&"BillingMode".to_string()));
    // The deploy applies them; then AWS holds the template.
    let deploy = s.json(&["deploy", &path], 0);
    assert_eq!(deploy["stacks"][0]["updated"], 3, "{deploy:#}");
    let attrs = sqs
        .get_queue_attributes()
        .queue_url(&queue)
        .attribute_names(timeout.clone());
    let attrs = attrs
        .send()
        .await
        .expect("GetQueueAttributes")
        .attributes
        .unwrap_or_default();
    assert_eq!(attrs.get(&timeout).map(String::as_str), Some("45"));
    s.drift(&stack, &[], 0);
}
