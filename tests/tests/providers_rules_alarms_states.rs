//! The EventBridge rule, CloudWatch alarm and Step Functions state machine SDK providers
//! against the local emulator (fakecloud 0.51.0), through the real SDK clients. Each test
//! is a round trip: create from template properties (a retry of the create with the same
//! token ends with the same resource), then `read_current_state` gives the template's
//! properties back in the same shape, then update, read again, a change that needs a new
//! resource is refused as not updatable, `import` by the template's name finds it, delete,
//! delete again (gone is success), then `read_current_state` says not found and `import`
//! says not deployed yet.
//!
//! [`corpus_cases_deploy_in_sync_and_destroy`] deploys the CDK corpus cases
//! `eventbridge-rule-lambda` (a scheduled rule, and a rule on a custom bus with two
//! targets, a dead-letter queue and a retry policy) and `stepfunctions-statemachine` (a
//! `DefinitionString` built with `Fn::Join`, logging and tracing) with the `stackflow`
//! binary: their rules and state machine are made by the SDK providers, `drift` right after
//! finds them in sync, and `destroy` ends cleanly. (`cloudwatch-alarm` also has
//! an `AWS::CloudWatch::CompositeAlarm`, which fakecloud's Cloud Control does not serve,
//! so its alarms are shown by the round trip only.)
//!
//! What the emulator cannot show, so these tests do not prove it: that a rule's targets
//! are invoked, that an alarm changes state or runs its actions, that a state machine runs
//! (no execution is started), and that Step Functions validates the role or the log group.

use serde_json::{Value, json};
use stackflow_providers::sdk::cloudwatch_alarm::AlarmProvider;
use stackflow_providers::sdk::events_rule::EventRuleProvider;
use stackflow_providers::sdk::stepfunctions::StateMachineProvider;
use stackflow_providers::{Imported, Provider, ResourceRequest};
use stackflow_tests::drift_cli::{Session, root};
use stackflow_tests::emulator::{ACCOUNT_ID, REGION};
use stackflow_tests::round_trip::{
    delete_twice_then_gone, not_updatable, props, read, request, sorted, update_of,
};
use stackflow_tests::{Emulator, unique_name};

/// The update of `req` that sets `key` to `value` (and changes nothing else).
fn update_setting(req: &ResourceRequest, key: &str, value: Value) -> ResourceRequest {
    let mut change = update_of(req, Value::Object(req.properties.clone()));
    change.properties.insert(key.into(), value);
    change
}

/// `import` of `by_name` (no physical id) finds `id`.
async fn found_by_name(provider: &dyn Provider, by_name: &ResourceRequest, id: &str) {
    match provider.import(by_name).await.expect("import") {
        Imported::Found { physical_id, .. } => assert_eq!(physical_id, id),
        other => panic!("{other:?}"),
    }
}

/// The request `req` without its physical id, naming `name` in `property`.
fn by_name(req: &ResourceRequest, property: &str, name: &str) -> ResourceRequest {
    let mut by_name = req.clone();
    by_name.physical_id = None;
    by_name.properties.insert(property.into(), json!(name));
    by_name
}

fn arn(service: &str, resource: &str) -> String {
    format!("arn:aws:{service}:{REGION}:{ACCOUNT_ID}:{resource}")
}

#[tokio::test]
async fn sdk_cloudwatch_alarm_round_trip() {
    let config = Emulator::shared().await.sdk_config().await;
    let provider = AlarmProvider::new(aws_sdk_cloudwatch::Client::new(&config));
    let topic = arn("sns", "alarms");
    // The single-metric form, as CDK writes it.
    let template = json!({
        "AlarmActions": [topic],
        "OKActions": [topic],
        "AlarmDescription": "queue backlog",
        "ComparisonOperator": "GreaterThanThreshold",
        "DatapointsToAlarm": 2,
        "Dimensions": [{"Name": "QueueName", "Value": "jobs"}],
        "EvaluationPeriods": 3,
        "MetricName": "ApproximateNumberOfMessagesVisible",
        "Namespace": "AWS/SQS",
        "Period": 60,
        "Statistic": "Maximum",
        "Threshold": 100,
        "TreatMissingData": "notBreaching",
        "Tags": [{"Key": "team", "Value": "core"}]
    });
    let mut req = request("DepthAlarm", "AWS::CloudWatch::Alarm", template.clone());
    // As the engine sends it: the stack's id names the account, so the ARN is made, not
    // read (the already-exists test reads it: its requests carry no stack id).
    req.stack_id = Some(format!(
        "arn:aws:cloudformation:{REGION}:{ACCOUNT_ID}:stack/{}/id",
        req.stack_name
    ));
    let created = provider.create(&req).await.expect("create");
    let name = created.physical_id.clone();
    assert!(
        name.starts_with(&format!("{}-DepthAlarm-", req.stack_name)),
        "{name}"
    );
    let alarm_arn = arn("cloudwatch", &format!("alarm:{name}"));
    assert_eq!(created.attributes.get("Arn"), Some(&json!(alarm_arn)));
    // A retry of the same create (same token) writes the same alarm.
    let again = provider.create(&req).await.expect("create retried");
    assert_eq!(again.physical_id, name);

    req.physical_id = Some(name.clone());
    let mut expected = props(template);
    expected.insert("AlarmName".into(), json!(name));
    assert_eq!(read(&provider, &req).await, sorted(expected));

    // The metric math form, as CDK writes it; actions and tags dropped.
    let math = json!({
        "ComparisonOperator": "GreaterThanOrEqualToThreshold",
        "EvaluationPeriods": 1,
        "Metrics": [
            {"Expression": "d / 60", "Id": "expr_1", "ReturnData": true},
            {"Id": "d", "ReturnData": false, "MetricStat": {
                "Metric": {
                    "Dimensions": [{"Name": "QueueName", "Value": "jobs"}],
                    "MetricName": "ApproximateNumberOfMessagesVisible",
                    "Namespace": "AWS/SQS"
                },
                "Period": 300,
                "Stat": "Maximum"
            }}
        ],
        "Threshold": 10.5,
        "Tags": [{"Key": "team", "Value": "ops"}]
    });
    let update = update_of(&req, math.clone());
    let updated = provider.update(&update).await.expect("update");
    assert_eq!(updated.physical_id, name);
    assert!(!updated.replaced);
    assert_eq!(updated.attributes.get("Arn"), Some(&json!(alarm_arn)));
    let mut expected = props(math);
    expected.insert("AlarmName".into(), json!(name));
    assert_eq!(read(&provider, &update).await, sorted(expected));

    not_updatable(
        &provider,
        &update_setting(&update, "AlarmName", json!("other")),
    )
    .await;
    let by_name = by_name(&req, "AlarmName", &name);
    found_by_name(&provider, &by_name, &name).await;
    delete_twice_then_gone(&provider, &req, &[&by_name]).await;
}

/// A rule on a custom bus: `Ref` is `bus|name`.
#[tokio::test]
async fn sdk_event_rule_on_a_bus_round_trip() {
    let config = Emulator::shared().await.sdk_config().await;
    let events = aws_sdk_eventbridge::Client::new(&config);
    let bus = unique_name("bus");
    events
        .create_event_bus()
        .name(&bus)
        .send()
        .await
        .expect("CreateEventBus");
    let provider = EventRuleProvider::new(events.clone());
    let name = unique_name("rule");
    let function = arn("lambda", "function:target");
    let template = json!({
        "Name": name,
        "EventBusName": bus,
        "Description": "orders",
        "EventPattern": {
            "source": ["corpus.orders"],
            "detail-type": ["OrderCreated"],
            "detail": {"amount": [{"numeric": [">", 100]}]}
        },
        "Targets": [
            {"Arn": function, "Id": "Target0",
             "DeadLetterConfig": {"Arn": arn("sqs", "dlq")},
             "RetryPolicy": {"MaximumRetryAttempts": 2}},
            {"Arn": arn("sqs", "audit"), "Id": "Target1", "Input": "{\"source\":\"rule\"}"}
        ]
    });
    let mut req = request("OrderCreated", "AWS::Events::Rule", template.clone());
    let created = provider.create(&req).await.expect("create");
    let id = format!("{bus}|{name}");
    assert_eq!(created.physical_id, id);
    let rule_arn = arn("events", &format!("rule/{bus}/{name}"));
    assert_eq!(created.attributes.get("Arn"), Some(&json!(rule_arn)));

    req.physical_id = Some(id.clone());
    assert_eq!(read(&provider, &req).await, sorted(props(template)));

    // One target dropped, the other changed; the pattern changed; the rule disabled.
    let changed = json!({
        "Name": name,
        "EventBusName": bus,
        "EventPattern": {"source": ["corpus.orders"]},
        "State": "DISABLED",
        "Targets": [{"Arn": function, "Id": "Target0", "InputPath": "$.detail"}]
    });
    let update = update_of(&req, changed.clone());
    let updated = provider.update(&update).await.expect("update");
    assert_eq!(updated.physical_id, id);
    assert_eq!(updated.attributes.get("Arn"), Some(&json!(rule_arn)));
    assert_eq!(read(&provider, &update).await, sorted(props(changed)));
    let listed = events
        .list_targets_by_rule()
        .rule(&name)
        .event_bus_name(&bus)
        .send()
        .await
        .expect("ListTargetsByRule");
    let ids: Vec<&str> = listed.targets().iter().map(|t| t.id()).collect();
    assert_eq!(ids, ["Target0"]);

    not_updatable(&provider, &update_setting(&update, "Name", json!("other"))).await;
    not_updatable(
        &provider,
        &update_setting(&update, "EventBusName", json!("default")),
    )
    .await;
    let by_name = by_name(&req, "Name", &name);
    found_by_name(&provider, &by_name, &id).await;
    // An explicit id may be the rule's ARN (how CloudFormation's import names a rule).
    let mut by_arn = by_name.clone();
    by_arn.physical_id = Some(rule_arn.clone());
    match provider.import(&by_arn).await.expect("import by ARN") {
        Imported::Found { physical_id, .. } => assert_eq!(physical_id, id),
        other => panic!("{other:?}"),
    }
    delete_twice_then_gone(&provider, &req, &[&by_name]).await;
}

/// A scheduled rule on the default bus with a generated name: `Ref` is the name; a retry
/// of the create writes the same rule.
#[tokio::test]
async fn sdk_event_rule_scheduled_round_trip() {
    let config = Emulator::shared().await.sdk_config().await;
    let provider = EventRuleProvider::new(aws_sdk_eventbridge::Client::new(&config));
    let target = json!({"Arn": arn("lambda", "function:tick"), "Id": "Target0",
        "Input": "{\"source\":\"schedule\"}"});
    let template = json!({
        "ScheduleExpression": "rate(5 minutes)",
        "State": "ENABLED",
        "Targets": [target]
    });
    let mut req = request("Every5Min", "AWS::Events::Rule", template);
    let created = provider.create(&req).await.expect("create");
    let name = created.physical_id.clone();
    assert!(
        name.starts_with(&format!("{}-Every5Min-", req.stack_name)) && !name.contains('|'),
        "{name}"
    );
    assert_eq!(
        created.attributes.get("Arn"),
        Some(&json!(arn("events", &format!("rule/{name}"))))
    );
    let again = provider.create(&req).await.expect("create retried");
    assert_eq!(again.physical_id, name);
    req.physical_id = Some(name.clone());
    // `State: ENABLED` is AWS's default: left out of what is read.
    let expected = json!({
        "Name": name,
        "ScheduleExpression": "rate(5 minutes)",
        "Targets": [target]
    });
    assert_eq!(read(&provider, &req).await, sorted(props(expected)));

    let update = update_of(
        &req,
        json!({"ScheduleExpression": "rate(1 hour)", "Description": "hourly"}),
    );
    provider.update(&update).await.expect("update");
    let expected = json!({"Name": name, "ScheduleExpression": "rate(1 hour)",
        "Description": "hourly"});
    assert_eq!(read(&provider, &update).await, sorted(props(expected)));

    let by_name = by_name(&req, "Name", &name);
    found_by_name(&provider, &by_name, &name).await;
    delete_twice_then_gone(&provider, &req, &[&by_name]).await;
}

/// A role Step Functions may assume: its ARN.
async fn states_role(config: &aws_types::SdkConfig) -> String {
    let iam = aws_sdk_iam::Client::new(config);
    let trust = json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Principal": {"Service": "states.amazonaws.com"},
            "Action": "sts:AssumeRole"
        }]
    });
    let made = iam
        .create_role()
        .role_name(unique_name("sfnrole"))
        .assume_role_policy_document(trust.to_string())
        .send()
        .await
        .expect("CreateRole");
    made.role().map(|r| r.arn().to_string()).expect("a role")
}

const DEFINITION: &str = "{\"StartAt\":\"Start\",\"States\":{\"Start\":{\"Type\":\"Pass\",\
    \"Result\":{\"queue\":\"${QueueUrl}\",\"n\":${Count}},\"Next\":\"Ok\"},\
    \"Ok\":{\"Type\":\"Succeed\"}},\"TimeoutSeconds\":300}";

/// After the create of `req` made `machine`: the substitutions were applied before the
/// definition was sent, and retries of the create (same token) end with the same machine,
/// also one that meets the machine made differently (`StateMachineAlreadyExists`): it
/// adopts it and brings it to its template; the first request, retried once more, brings
/// it back. (The emulator refuses such a create as AWS does, so the adoption is the
/// provider's.)
async fn retries_end_with_the_same_machine(
    sfn: &aws_sdk_sfn::Client,
    provider: &StateMachineProvider,
    req: &ResourceRequest,
    machine: &str,
    role: &str,
) {
    let describe = || async {
        sfn.describe_state_machine()
            .state_machine_arn(machine)
            .send()
            .await
            .expect("DescribeStateMachine")
    };
    let sent: Value = serde_json::from_str(describe().await.definition()).expect("JSON");
    assert_eq!(
        sent["States"]["Start"]["Result"],
        json!({"queue": "https://sqs/q", "n": 2})
    );
    let again = provider.create(req).await.expect("create retried");
    assert_eq!(again.physical_id, machine);
    let name = machine.rsplit(':').next().expect("a name");
    let refused = sfn
        .create_state_machine()
        .name(name)
        .definition(r#"{"StartAt":"A","States":{"A":{"Type":"Succeed"}}}"#)
        .role_arn(role)
        .send()
        .await
        .expect_err("a different machine of the same name");
    let refused = refused.into_service_error();
    assert!(refused.is_state_machine_already_exists(), "{refused:?}");
    let mut other = req.clone();
    other
        .properties
        .insert("TracingConfiguration".into(), json!({"Enabled": false}));
    let adopted = provider.create(&other).await.expect("create adopting");
    assert_eq!(adopted.physical_id, machine);
    let tracing =
        |d: &aws_sdk_sfn::operation::describe_state_machine::DescribeStateMachineOutput| {
            d.tracing_configuration().is_some_and(|t| t.enabled())
        };
    assert!(!tracing(&describe().await));
    provider.create(req).await.expect("create retried again");
    assert!(tracing(&describe().await));
}

#[tokio::test]
async fn sdk_state_machine_round_trip() {
    let config = Emulator::shared().await.sdk_config().await;
    let sfn = aws_sdk_sfn::Client::new(&config);
    let provider = StateMachineProvider::new(sfn.clone());
    let role = states_role(&config).await;
    let group = arn("logs", &format!("log-group:{}:*", unique_name("sfnlogs")));
    let template = json!({
        "DefinitionString": DEFINITION,
        "DefinitionSubstitutions": {"QueueUrl": "https://sqs/q", "Count": 2},
        "RoleArn": role,
        "LoggingConfiguration": {
            "Destinations": [{"CloudWatchLogsLogGroup": {"LogGroupArn": group}}],
            "Level": "ALL"
        },
        "TracingConfiguration": {"Enabled": true},
        "Tags": [{"Key": "team", "Value": "core"}]
    });
    let mut req = request(
        "StateMachine",
        "AWS::StepFunctions::StateMachine",
        template.clone(),
    );
    let created = provider.create(&req).await.expect("create");
    let machine = created.physical_id.clone();
    let name = machine.rsplit(':').next().expect("a name").to_string();
    assert!(
        name.starts_with(&format!("{}-StateMachine-", req.stack_name)),
        "{name}"
    );
    assert_eq!(
        machine,
        arn("states", &format!("stateMachine:{name}")),
        "Ref is the ARN"
    );
    assert_eq!(created.attributes.get("Arn"), Some(&json!(machine)));
    assert_eq!(created.attributes.get("Name"), Some(&json!(name)));
    assert_eq!(
        created.attributes.get("StateMachineRevisionId"),
        Some(&json!("INITIAL"))
    );
    retries_end_with_the_same_machine(&sfn, &provider, &req, &machine, &role).await;

    req.physical_id = Some(machine.clone());
    let mut expected = props(template);
    expected.insert("StateMachineName".into(), json!(name));
    assert_eq!(read(&provider, &req).await, sorted(expected));

    // The definition as an object; logging and tracing dropped (set back to off); tags.
    let changed = json!({
        "Definition": {"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}},
        "RoleArn": role,
        "Tags": [{"Key": "team", "Value": "ops"}]
    });
    let update = update_of(&req, changed.clone());
    let updated = provider.update(&update).await.expect("update");
    assert_eq!(updated.physical_id, machine);
    assert!(!updated.replaced);
    let revision = updated.attributes.get("StateMachineRevisionId");
    assert!(revision.and_then(Value::as_str).is_some(), "{revision:?}");
    let mut expected = props(changed);
    expected.insert("StateMachineName".into(), json!(name));
    assert_eq!(read(&provider, &update).await, sorted(expected));

    not_updatable(
        &provider,
        &update_setting(&update, "StateMachineName", json!("other")),
    )
    .await;
    not_updatable(
        &provider,
        &update_setting(&update, "StateMachineType", json!("EXPRESS")),
    )
    .await;
    let by_name = by_name(&req, "StateMachineName", &name);
    found_by_name(&provider, &by_name, &machine).await;
    delete_twice_then_gone(&provider, &req, &[&by_name]).await;
}

/// The corpus cases with these types, deployed by the `stackflow` binary: the rules and
/// the state machine are recorded as made by their SDK providers, `drift` right after the
/// deploy finds them in sync, and `destroy` ends cleanly.
#[tokio::test]
async fn corpus_cases_deploy_in_sync_and_destroy() {
    let emulator = Emulator::shared().await;
    let root = root(env!("CARGO_TARGET_TMPDIR"), "providers_rules_alarms_states");
    let s = Session::new(emulator, &root, "corpus");
    let cases = [
        (
            "eventbridge-rule-lambda",
            "EventBridgeRuleLambdaStack.template.json",
            "AWS::Events::Rule",
        ),
        (
            "stepfunctions-statemachine",
            "StepFunctionsStack.template.json",
            "AWS::StepFunctions::StateMachine",
        ),
    ];
    for (dir, file, ty) in cases {
        let stack = unique_name("rules");
        let path = format!(
            "{}/fixtures/corpus/{dir}/{file}",
            env!("CARGO_MANIFEST_DIR")
        );
        s.run(&["deploy", &path, "--stack", &stack], 0);
        let state = s.state(&stack);
        let resources = state["resources"].as_object().expect("resources");
        let ours: Vec<&Value> = resources.values().filter(|r| r["type"] == ty).collect();
        assert!(!ours.is_empty(), "{dir}: no {ty} in {state:#}");
        for r in &ours {
            assert_eq!(r["provider"], json!("sdk"), "{dir}: {r:#}");
        }
        // Only this file's types are asserted: the drift of the others is their
        // providers' to prove (an IAM role whose inline policy is another resource's, an
        // `AWS::IAM::Policy`, was reported drifted here when this test was written).
        let run = s.cli.run(&["drift", "--stack", &stack, "--json"]);
        assert!(matches!(run.code, Some(0 | 1)), "{}", run.describe());
        let report: Value = serde_json::from_str(&run.stdout).expect("a JSON report");
        let rows = report["resources"].as_array().expect("rows");
        let mine: Vec<&Value> = rows.iter().filter(|r| r["resourceType"] == ty).collect();
        assert_eq!(mine.len(), ours.len(), "{dir}: {report:#}");
        for row in mine {
            assert_eq!(row["status"], json!("in-sync"), "{dir}: {row:#}");
        }
        s.run(&["destroy", "--stack", &stack], 0);
    }
}
