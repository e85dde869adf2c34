//! Import (seeds 002 and 003): adopting what exists, by name or by override; not
//! deployed yet and unsupported reported; --force and merge; journal marks honoured by a
//! later rollback; secret references restored in the baseline; both refusal causes.

mod support;

use indexmap::IndexMap;
use serde_json::{Value, json};
use stackflow_core::plan::Action;
use stackflow_engine::import::{ImportOptions, ImportReport, ImportStatus, import_stack};
use stackflow_engine::{StackStatus, deploy_stack, rollback_stack};
use stackflow_events::event::{Baseline, Event, RefusalCause};
use support::{FakeLookups, Op, Rig, deploy_ok, input, input_with, options};

const SECRET: &str = "import-plaintext-Z8q";
const REFERENCE: &str = "{{resolve:secretsmanager:app:SecretString:name}}";

fn status(report: &ImportReport, id: &str) -> ImportStatus {
    report
        .resources
        .iter()
        .find(|r| r.logical_id == id)
        .unwrap_or_else(|| panic!("{id} not in {report:#?}"))
        .status
}

fn overrides(pairs: &[(&str, &str)]) -> ImportOptions {
    ImportOptions {
        overrides: pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<IndexMap<_, _>>(),
        ..Default::default()
    }
}

fn app() -> Value {
    json!({ "Resources": {
        "Orders": { "Type": "AWS::SNS::Topic",
            "Properties": { "TopicName": "orders", "DisplayName": "Orders" } },
        "Later": { "Type": "AWS::SNS::Topic", "Properties": { "TopicName": "later" } },
        "Queue": { "Type": "AWS::SQS::Queue", "Properties": { "DelaySeconds": 5 } }
    } })
}

#[tokio::test]
async fn import_by_name_and_by_override_then_the_next_deploy_changes_nothing() {
    let rig = Rig::new();
    rig.cloud.existing(
        "orders-arn",
        "AWS::SNS::Topic",
        json!({"TopicName": "orders", "DisplayName": "Orders"}),
    );
    rig.cloud
        .existing("queue-url", "AWS::SQS::Queue", json!({"DelaySeconds": 5}));
    let report = import_stack(rig.engine.clone(), input("app", app()), Default::default())
        .await
        .unwrap();
    assert_eq!(status(&report, "Orders"), ImportStatus::Imported);
    assert_eq!(status(&report, "Later"), ImportStatus::NotDeployedYet);
    assert_eq!(
        status(&report, "Queue"),
        ImportStatus::Unsupported,
        "{report:#?}"
    );
    assert_eq!(report.exit_code(), 0);
    let state = rig.state("app").await;
    assert_eq!(state.resources["Orders"].physical_id, "orders-arn");
    assert!(state.resources["Orders"].imported);
    assert!(matches!(
        state.resources["Orders"].baseline,
        Some(Baseline::Recorded { .. })
    ));
    assert!(state.lock.is_none());

    // Existing state: refused without --force; --resource alone merges.
    let refused = import_stack(rig.engine.clone(), input("app", app()), Default::default()).await;
    assert!(refused.unwrap_err().to_string().contains("--force"));
    let merged = import_stack(
        rig.engine.clone(),
        input("app", app()),
        overrides(&[("Queue", "queue-url")]),
    )
    .await
    .unwrap();
    assert_eq!(status(&merged, "Queue"), ImportStatus::Imported);
    assert_eq!(status(&merged, "Orders"), ImportStatus::Kept);
    assert_eq!(
        rig.state("app").await.resources["Queue"].physical_id,
        "queue-url"
    );

    // AWS matches the template: the deploy creates `Later` and touches nothing else.
    rig.cloud.clear_calls();
    deploy_ok(&rig, &input("app", app())).await;
    let calls = rig.cloud.call_log();
    assert_eq!(calls, vec![(Op::Create, "Later".to_string())], "{calls:?}");
}

#[tokio::test]
async fn the_first_plan_after_an_import_shows_where_aws_differs() {
    let rig = Rig::new();
    rig.cloud.existing(
        "orders-arn",
        "AWS::SNS::Topic",
        json!({"TopicName": "orders", "DisplayName": "Old name"}),
    );
    import_stack(rig.engine.clone(), input("app", app()), Default::default())
        .await
        .unwrap();
    let plan = rig.engine.plan_only(&input("app", app())).await.unwrap();
    let action = |id: &str| {
        plan.resources
            .iter()
            .find(|r| r.logical_id == id)
            .unwrap()
            .action
    };
    assert_eq!(action("Orders"), Action::Update);
    assert_eq!(action("Later"), Action::Create);
    deploy_ok(&rig, &input("app", app())).await;
    assert_eq!(
        rig.cloud.world()["orders-arn"].properties["DisplayName"],
        "Orders"
    );
}

/// A rig whose secret lookups know REFERENCE, and an existing topic `orders-arn` with
/// `properties`.
fn with_orders(properties: Value) -> Rig {
    let mut lookups = FakeLookups::default();
    lookups.dynamic.insert(REFERENCE.into(), SECRET.into());
    let rig = Rig::with_lookups(lookups);
    rig.cloud
        .existing("orders-arn", "AWS::SNS::Topic", properties);
    rig
}

#[tokio::test]
async fn a_secret_reference_goes_back_into_the_baseline() {
    let rig = with_orders(json!({"TopicName": "orders", "DisplayName": SECRET}));
    let v = json!({ "Resources": { "Orders": { "Type": "AWS::SNS::Topic",
        "Properties": { "TopicName": "orders", "DisplayName": REFERENCE } } } });
    import_stack(rig.engine.clone(), input("app", v), Default::default())
        .await
        .unwrap();
    let state = rig.state("app").await;
    let Some(Baseline::Recorded { observed }) = &state.resources["Orders"].baseline else {
        panic!("no baseline: {state:#?}");
    };
    assert_eq!(observed["DisplayName"], REFERENCE);
    for e in rig.events("app").await {
        assert!(
            !serde_json::to_string(&e).unwrap().contains(SECRET),
            "{e:?}"
        );
    }
}

#[tokio::test]
async fn a_dropped_reference_and_an_unprovable_parameter_refuse_the_baseline() {
    let mut lookups = FakeLookups::default();
    lookups.deployed.insert(
        "app".into(),
        Ok(vec![
            ("Env".into(), "prod".into()),
            ("Label".into(), "x".into()),
        ]),
    );
    let rig = Rig::with_lookups(lookups);
    rig.cloud
        .existing("a", "AWS::SNS::Topic", json!({"TopicName": "orders-dev"}));
    rig.cloud.existing(
        "b",
        "AWS::SNS::Topic",
        json!({"TopicName": "b", "DisplayName": "plain"}),
    );
    rig.cloud
        .existing("c", "AWS::SNS::Topic", json!({"TopicName": "c"}));
    let v = json!({
        "Parameters": {
            "Env": {"Type": "String", "Default": "dev"},
            "Label": {"Type": "String", "Default": "x"}
        },
        "Conditions": { "Never": {"Fn::Equals": ["a", "b"]} },
        "Resources": {
            "A": { "Type": "AWS::SNS::Topic", "Properties": {
                "TopicName": {"Fn::Sub": "orders-${Env}"} } },
            "B": { "Type": "AWS::SNS::Topic", "Properties": { "TopicName": "b",
                "DisplayName": {"Fn::If": ["Never", REFERENCE, "plain"]} } },
            "C": { "Type": "AWS::SNS::Topic", "Properties": {
                "TopicName": "c", "DisplayName": {"Ref": "Label"} } }
        }
    });
    let report = import_stack(
        rig.engine.clone(),
        input_with("app", v, &[]),
        Default::default(),
    )
    .await
    .unwrap();
    let refused = |id: &str| {
        let r = report
            .resources
            .iter()
            .find(|r| r.logical_id == id)
            .unwrap();
        r.baseline.clone().unwrap_or_default()
    };
    assert_eq!(
        refused("A"),
        "refused (unverifiable-parameter)",
        "{report:#?}"
    );
    assert_eq!(refused("B"), "refused (incomplete-resolution)");
    assert_eq!(
        refused("C"),
        "recorded",
        "Label was deployed at its Default"
    );
    assert_eq!(report.warnings.len(), 1, "{:?}", report.warnings);
    assert!(report.warnings[0].contains("Env") && !report.warnings[0].contains("prod"));
    let state = rig.state("app").await;
    assert_eq!(
        state.resources["A"].refused(),
        Some(RefusalCause::UnverifiableParameter)
    );
}

#[tokio::test]
async fn a_missing_permission_makes_every_used_parameter_unproven() {
    let mut lookups = FakeLookups::default();
    lookups.deployed.insert(
        "app".into(),
        Err("AccessDenied: cloudformation:DescribeStacks".into()),
    );
    let rig = Rig::with_lookups(lookups);
    rig.cloud.existing(
        "c",
        "AWS::SNS::Topic",
        json!({"TopicName": "c", "DisplayName": "x"}),
    );
    let v = json!({
        "Parameters": { "Label": {"Type": "String", "Default": "x"} },
        "Resources": { "C": { "Type": "AWS::SNS::Topic", "Properties": {
            "TopicName": "c", "DisplayName": {"Ref": "Label"} } } }
    });
    let report = import_stack(rig.engine.clone(), input("app", v), Default::default())
        .await
        .unwrap();
    assert_eq!(report.resources[0].status, ImportStatus::Imported);
    assert_eq!(
        report.resources[0].baseline.as_deref(),
        Some("refused (unverifiable-parameter)")
    );
    assert!(
        report.warnings[0].contains("could not be read"),
        "{:?}",
        report.warnings
    );
}

#[tokio::test]
async fn a_rollback_after_an_import_leaves_the_adopted_resources_alone() {
    let rig = Rig::new();
    let v = json!({ "Resources": {
        "A": { "Type": "AWS::SNS::Topic", "Properties": { "TopicName": "a" } },
        "B": { "Type": "AWS::SNS::Topic", "Properties": { "TopicName": "b" }, "DependsOn": "A" },
        "C": { "Type": "AWS::SNS::Topic", "Properties": { "TopicName": "c" }, "DependsOn": "B" }
    } });
    rig.cloud.fail_always(Op::Create, "C");
    let mut keep = options();
    keep.no_rollback = true;
    let failed = deploy_stack(rig.engine.clone(), input("app", v.clone()), keep)
        .await
        .unwrap();
    assert_eq!(failed.status, StackStatus::Failed);
    let (a, _) = rig.cloud.only("app", "A");
    let other = rig
        .cloud
        .existing("b-elsewhere", "AWS::SNS::Topic", json!({"TopicName": "b2"}));
    let report = import_stack(
        rig.engine.clone(),
        input("app", v),
        // B is recorded under the failed deploy's id: replacing it needs force.
        ImportOptions {
            force: true,
            ..overrides(&[("A", &a), ("B", &other)])
        },
    )
    .await
    .unwrap();
    assert!(report.marked_journal.is_some(), "{report:#?}");
    assert_eq!(
        report.warnings.len(),
        1,
        "B's journal entry names another id"
    );
    let events = rig.events("app").await;
    let marked = events
        .iter()
        .position(|e| matches!(e.event, Event::ImportMarked { .. }))
        .expect("a mark");
    let first_import = events
        .iter()
        .position(|e| matches!(e.event, Event::ResourceImported { .. }))
        .unwrap();
    assert!(marked < first_import, "marked before any state is recorded");
    let rolled = rollback_stack(rig.engine.clone(), "app").await.unwrap();
    let world = rig.cloud.world();
    assert!(world.contains_key(&a), "the adopted A stays");
    assert!(world.contains_key(&other));
    // Issue 24 item 5: the rollback says what it skips, and names the B the failed deploy
    // made, which stays in AWS outside the records.
    let (b_made, _) = rig
        .cloud
        .world()
        .into_iter()
        .find(|(id, t)| t.logical_id == "B" && *id != other)
        .expect("the failed deploy's B");
    let skipped = &rolled.rollback.as_ref().expect("a rollback").skipped;
    let ids: Vec<&str> = skipped.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["A", "B"], "{skipped:?}");
    assert!(skipped[1].1.contains(&b_made) && skipped[1].1.contains("left in AWS"));
    let notes: Vec<String> = rig
        .lines
        .all()
        .into_iter()
        .filter(|l| l.contains("rollback skips"))
        .collect();
    assert_eq!(notes.len(), 2, "{notes:?}");
    let state = rig.state("app").await;
    assert_eq!(state.resources["A"].physical_id, a);
    assert_eq!(state.resources["B"].physical_id, other);
}

/// Issue 24 item 2: where AWS's value does not fit the template's text around a secret,
/// the baseline masks it (`***`), and the record keeps the template's reference: no later revert or rollback
/// sends the mask to AWS.
#[tokio::test]
async fn a_masked_aws_value_is_never_recorded_as_a_property() {
    let rig = with_orders(
        json!({"TopicName": "orders", "DisplayName": "their-own-value",
        "Tags": [{"Key": "v", "Value": "1"}]}),
    );
    let topics = |display: &str| {
        json!({ "Resources": {
            "Orders": { "Type": "AWS::SNS::Topic",
                "Properties": { "TopicName": "orders", "DisplayName": format!("orders-{REFERENCE}"),
                    "Tags": [{"Key": "v", "Value": display}] } },
            "Broken": { "Type": "AWS::SNS::Topic", "DependsOn": "Orders",
                "Properties": { "TopicName": "broken" } }
        } })
    };
    let mut v = topics("1");
    v["Resources"].as_object_mut().unwrap().remove("Broken");
    import_stack(rig.engine.clone(), input("app", v), Default::default())
        .await
        .unwrap();
    let state = rig.state("app").await;
    let orders = &state.resources["Orders"];
    assert_eq!(
        orders.properties["DisplayName"],
        format!("orders-{REFERENCE}"),
        "{orders:#?}"
    );
    let Some(Baseline::Recorded { observed }) = &orders.baseline else {
        panic!("no baseline: {orders:#?}");
    };
    assert_eq!(observed["DisplayName"], "***");
    // A later update of Orders, rolled back when Broken fails: the restore resolves the
    // recorded reference; nothing sent holds a mask.
    rig.cloud.fail_always(Op::Create, "Broken");
    let failed = deploy_stack(rig.engine.clone(), input("app", topics("2")), options())
        .await
        .unwrap();
    assert_eq!(failed.status, StackStatus::Failed, "{failed:#?}");
    let calls = rig.cloud.calls();
    assert!(
        calls.iter().filter(|c| c.op == Op::Update).count() >= 2,
        "an update and its undo: {calls:#?}"
    );
    for c in &calls {
        let sent = serde_json::to_string(&c.properties).unwrap();
        assert!(!sent.contains("***"), "a mask was sent: {c:#?}");
    }
    let world = rig.cloud.world();
    let orders = &world["orders-arn"].properties;
    assert_eq!(orders["Tags"][0]["Value"], "1", "restored: {orders:#?}");
    assert_eq!(orders["DisplayName"], format!("orders-{SECRET}"));
}

/// Issue 24 item 4: an import that cannot read a resource records no baseline (the
/// template's properties are no reading of AWS), and says so; drift then compares with
/// the recorded properties, so what only AWS holds is not drift, and `--revert` has
/// nothing to take away.
#[tokio::test]
async fn an_unreadable_resource_is_imported_without_a_baseline() {
    let rig = Rig::new();
    let id = rig.cloud.existing(
        "orders-arn",
        "AWS::SNS::Topic",
        json!({"TopicName": "orders", "DisplayName": "Orders", "KmsMasterKeyId": "alias/theirs"}),
    );
    rig.cloud.set_unreadable(&id, true);
    let v = json!({ "Resources": { "Orders": { "Type": "AWS::SNS::Topic",
        "Properties": { "TopicName": "orders", "DisplayName": "Orders" } } } });
    let report = import_stack(rig.engine.clone(), input("app", v), Default::default())
        .await
        .unwrap();
    let row = &report.resources[0];
    assert_eq!(row.baseline.as_deref(), Some("none"), "{row:#?}");
    assert!(row.reason.as_deref().unwrap().contains("no baseline"));
    let state = rig.state("app").await;
    assert_eq!(state.resources["Orders"].baseline, None, "{state:#?}");
    rig.cloud.set_unreadable(&id, false);
    let check = stackflow_engine::drift::drift_stack(
        rig.engine.clone(),
        "app",
        &[],
        stackflow_engine::drift::DriftMode::Check,
    )
    .await
    .unwrap();
    assert_eq!(check.exit_code(), 0, "{check:#?}");
}

/// Issue 24 item 1 (seed 003): a resource refused for an unverifiable parameter keeps the
/// refusal when imported again under the same physical id, with the CloudFormation stack
/// gone or the template edited so that nothing references the parameter; only proof of
/// the deployed values clears it.
#[tokio::test]
async fn a_reimport_keeps_an_unverifiable_parameter_refusal_until_proven() {
    let deployed = |value: Option<&str>| {
        let mut lookups = FakeLookups::default();
        if let Some(v) = value {
            lookups
                .deployed
                .insert("app".into(), Ok(vec![("Label".into(), v.into())]));
        }
        std::sync::Arc::new(lookups)
    };
    let rig = Rig::new();
    rig.cloud.existing(
        "c",
        "AWS::SNS::Topic",
        json!({"TopicName": "c", "DisplayName": "deployed-value-7Qw"}),
    );
    let template = |display: Value| {
        json!({
            "Parameters": { "Label": {"Type": "String", "Default": "x"} },
            "Resources": { "C": { "Type": "AWS::SNS::Topic", "Properties": {
                "TopicName": "c", "DisplayName": display } } }
        })
    };
    let engine_with = |lookups| {
        support::build_engine(
            rig.store.clone(),
            rig.cloud.clone(),
            lookups,
            rig.lines.clone(),
            rig.holders_gone.clone(),
        )
    };
    let force = ImportOptions {
        force: true,
        ..Default::default()
    };
    let import = |engine, v: Value, options: ImportOptions| async move {
        import_stack(engine, input_with("app", v, &[]), options)
            .await
            .unwrap()
    };
    let first = import(
        engine_with(deployed(Some("deployed-value-7Qw"))),
        template(json!({"Ref": "Label"})),
        Default::default(),
    )
    .await;
    assert_eq!(
        first.resources[0].baseline.as_deref(),
        Some("refused (unverifiable-parameter)")
    );
    // The CloudFormation stack is gone; then the reference is edited away too.
    for v in [template(json!({"Ref": "Label"})), template(json!("x"))] {
        let again = import(engine_with(deployed(None)), v, force.clone()).await;
        assert_eq!(
            again.resources[0].baseline.as_deref(),
            Some("refused (unverifiable-parameter)"),
            "{again:#?}"
        );
        assert!(
            again.warnings.iter().any(|w| w.contains("earlier import")),
            "{:?}",
            again.warnings
        );
        let state = rig.state("app").await;
        assert_eq!(
            state.resources["C"].refused(),
            Some(RefusalCause::UnverifiableParameter)
        );
        assert!(
            !serde_json::to_string(&rig.events("app").await)
                .unwrap()
                .contains("deployed-value-7Qw"),
            "AWS's value (the parameter's deployed value) never reaches the log"
        );
    }
    // Proof: the stack was deployed with the Default.
    let proven = import(
        engine_with(deployed(Some("x"))),
        template(json!({"Ref": "Label"})),
        force,
    )
    .await;
    assert_eq!(
        proven.resources[0].baseline.as_deref(),
        Some("recorded"),
        "{proven:#?}"
    );
}
