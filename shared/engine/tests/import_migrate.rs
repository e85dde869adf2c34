//! `import --migrate-from-cloudformation` in process, against a fake CloudFormation that
//! deletes the fake cloud's resources as CloudFormation would (unless they have
//! `DeletionPolicy: Retain`): physical ids by logical id, nested stacks onto child stacks
//! and onto a flattened template, the backing stacks of the parameter check, Retain then
//! delete, and what is said when a step fails or nothing may be touched.

mod support;

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use stackflow_engine::import::{
    ImportOptions, ImportReport, ImportStatus, MigrateFrom, MigrationOutcome, import_stack,
};
use stackflow_engine::lookups::{CloudFormationSource, LookupError, SourceResource};
use stackflow_events::event::ProviderKind;
use stackflow_providers::provider::BoxFuture;
use support::{
    CfnInner, FakeCfn, FakeLookups, Op, Rig, STACK_TYPE, deploy_ok, input, nested, param,
};

fn migrate(cfn: &Arc<FakeCfn>, stack: &str) -> ImportOptions {
    ImportOptions {
        migrate: Some(MigrateFrom {
            stack: stack.into(),
            cloudformation: cfn.clone(),
        }),
        ..Default::default()
    }
}

fn row<'a>(report: &'a ImportReport, id: &str) -> &'a stackflow_engine::import::ImportedResource {
    report
        .resources
        .iter()
        .find(|r| r.logical_id == id)
        .unwrap_or_else(|| panic!("{id} not in {report:#?}"))
}

fn retain_of(template: &Value, id: &str) -> (Value, Value) {
    let r = &template["Resources"][id];
    (
        r["DeletionPolicy"].clone(),
        r["UpdateReplacePolicy"].clone(),
    )
}

/// A topic (found by name too), a queue and a parameter (found only by their physical
/// ids).
fn app() -> Value {
    json!({ "Resources": {
        "Orders": { "Type": "AWS::SNS::Topic", "Properties": { "TopicName": "orders" } },
        "Jobs": { "Type": "AWS::SQS::Queue", "Properties": { "DelaySeconds": 5 } },
        "Setting": param("/app/setting", json!("on"))
    } })
}

/// What CloudFormation runs for [`app`]: the same, and CDK's metadata (no resource: not
/// in the way of the delete).
fn app_source() -> Value {
    let mut v = app();
    v["Resources"]["CDKMetadata"] =
        json!({ "Type": "AWS::CDK::Metadata", "Properties": { "Analytics": "v2" } });
    v
}

fn app_world(rig: &Rig) {
    rig.cloud.existing(
        "orders-arn",
        "AWS::SNS::Topic",
        json!({"TopicName": "orders"}),
    );
    rig.cloud
        .existing("jobs-url", "AWS::SQS::Queue", json!({"DelaySeconds": 5}));
    rig.cloud.existing(
        "/app/setting",
        "AWS::SSM::Parameter",
        json!({"Name": "/app/setting", "Type": "String", "Value": "on"}),
    );
}

const APP_IDS: &[(&str, &str)] = &[
    ("Orders", "orders-arn"),
    ("Jobs", "jobs-url"),
    ("Setting", "/app/setting"),
    ("CDKMetadata", "meta-1"),
];

#[tokio::test]
async fn physical_ids_come_from_the_stack_then_it_retains_them_and_is_deleted() {
    let rig = Rig::new();
    app_world(&rig);
    let cfn = FakeCfn::new(&rig.cloud);
    let mut source = app_source();
    source["Resources"]["Orders"]["DeletionPolicy"] = json!("Delete");
    cfn.stack("legacy-app", source, APP_IDS);
    let report = import_stack(
        rig.engine.clone(),
        input("app", app()),
        migrate(&cfn, "legacy-app"),
    )
    .await
    .unwrap();
    for (id, physical) in &APP_IDS[..3] {
        let r = row(&report, id);
        assert_eq!(r.status, ImportStatus::Imported, "{report:#?}");
        assert_eq!(r.physical_id.as_deref(), Some(*physical));
    }
    let migration = report.migration.clone().expect("a migration");
    assert_eq!(
        migration.outcome,
        MigrationOutcome::Deleted,
        "{migration:#?}"
    );
    assert_eq!(report.exit_code(), 0);
    assert_eq!(
        migration.retained,
        vec!["legacy-app/Orders", "legacy-app/Jobs", "legacy-app/Setting"]
    );
    assert!(
        migration.message.contains("was deleted"),
        "{}",
        migration.message
    );
    assert_eq!(cfn.calls(), vec!["update legacy-app", "delete legacy-app"]);
    assert!(cfn.template("legacy-app").is_none(), "the stack is gone");
    let world = rig.cloud.world();
    for (_, physical) in &APP_IDS[..3] {
        assert!(world.contains_key(*physical), "{physical} survives");
    }
    let state = rig.state("app").await;
    assert_eq!(state.resources["Jobs"].physical_id, "jobs-url");
    assert!(state.lock.is_none());

    // stackflow alone manages them: the same template deploys as a no-op.
    rig.cloud.clear_calls();
    deploy_ok(&rig, &input("app", app())).await;
    assert_eq!(rig.cloud.call_log(), vec![], "no create, no update");
}

#[tokio::test]
async fn retain_is_set_on_every_adopted_resource_before_the_delete() {
    struct Spy(Arc<FakeCfn>, Mutex<Vec<Value>>);
    impl CloudFormationSource for Spy {
        fn stack_resources<'a>(
            &'a self,
            s: &'a str,
        ) -> BoxFuture<'a, Result<Option<Vec<SourceResource>>, LookupError>> {
            self.0.stack_resources(s)
        }
        fn current_template<'a>(
            &'a self,
            s: &'a str,
        ) -> BoxFuture<'a, Result<String, LookupError>> {
            self.0.current_template(s)
        }
        fn update_template<'a>(
            &'a self,
            s: &'a str,
            t: String,
        ) -> BoxFuture<'a, Result<(), LookupError>> {
            self.1
                .lock()
                .unwrap()
                .push(serde_json::from_str(&t).unwrap());
            self.0.update_template(s, t)
        }
        fn delete_stack<'a>(&'a self, s: &'a str) -> BoxFuture<'a, Result<(), LookupError>> {
            self.0.delete_stack(s)
        }
    }
    let rig = Rig::new();
    app_world(&rig);
    let cfn = FakeCfn::new(&rig.cloud);
    cfn.stack("app", app_source(), APP_IDS);
    let spy = Arc::new(Spy(cfn.clone(), Mutex::new(vec![])));
    let options = ImportOptions {
        migrate: Some(MigrateFrom {
            stack: "app".into(),
            cloudformation: spy.clone(),
        }),
        ..Default::default()
    };
    import_stack(rig.engine.clone(), input("app", app()), options)
        .await
        .unwrap();
    let sent = spy.1.lock().unwrap().clone();
    assert_eq!(sent.len(), 1);
    let retain = (json!("Retain"), json!("Retain"));
    for id in ["Orders", "Jobs", "Setting"] {
        assert_eq!(retain_of(&sent[0], id), retain, "{id}");
    }
    assert_eq!(
        retain_of(&sent[0], "CDKMetadata"),
        (Value::Null, Value::Null),
        "metadata is no resource"
    );
    // Everything else of the template is as it ran.
    assert_eq!(
        sent[0]["Resources"]["Jobs"]["Properties"],
        json!({"DelaySeconds": 5})
    );
}

/// A parent with a topic, and a nested stack `Inner` holding a queue and a parameter that
/// reads the queue's attribute; the parent reads the nested stack's output.
fn parent_with_nested(nested_stack: bool) -> (Value, Value) {
    let inner = json!({
        "Parameters": { "Prefix": { "Type": "String", "Default": "shop" } },
        "Resources": {
            "Queue": { "Type": "AWS::SQS::Queue", "Properties": { "DelaySeconds": 1 } },
            "QueueArn": param("/shop/queue", json!({"Fn::GetAtt": ["Queue", "Arn"]}))
        },
        "Outputs": { "QueueArn": { "Value": { "Fn::GetAtt": ["Queue", "Arn"] } } }
    });
    let parent = if nested_stack {
        json!({ "Resources": {
            "Topic": { "Type": "AWS::SNS::Topic", "Properties": { "TopicName": "shop" } },
            "Inner": { "Type": STACK_TYPE, "Properties": {
                "TemplateURL": "https://example.com/inner.json",
                "Parameters": { "Prefix": "shop" } } }
        } })
    } else {
        json!({ "Resources": {
            "Topic": { "Type": "AWS::SNS::Topic", "Properties": { "TopicName": "shop" } },
            "Queue": { "Type": "AWS::SQS::Queue", "Properties": { "DelaySeconds": 1 } },
            "QueueArn": param("/shop/queue", json!({"Fn::GetAtt": ["Queue", "Arn"]}))
        } })
    };
    (parent, inner)
}

const INNER_ARN: &str = "arn:aws:cloudformation:us-east-1:123456789012:stack/shop-Inner-X/1";

fn shop_world(rig: &Rig, cfn: &FakeCfn) {
    rig.cloud.existing(
        "shop-topic",
        "AWS::SNS::Topic",
        json!({"TopicName": "shop"}),
    );
    rig.cloud
        .existing("shop-queue", "AWS::SQS::Queue", json!({"DelaySeconds": 1}));
    rig.cloud.existing(
        "/shop/queue",
        "AWS::SSM::Parameter",
        json!({"Name": "/shop/queue", "Type": "String", "Value": "arn:aws:fake:::shop-queue"}),
    );
    let (parent, inner) = parent_with_nested(true);
    cfn.stack(
        "shop",
        parent,
        &[("Topic", "shop-topic"), ("Inner", INNER_ARN)],
    );
    cfn.stack(
        INNER_ARN,
        inner,
        &[("Queue", "shop-queue"), ("QueueArn", "/shop/queue")],
    );
}

#[tokio::test]
async fn a_nested_stack_maps_onto_stackflows_nested_stack() {
    let rig = Rig::new();
    let cfn = FakeCfn::new(&rig.cloud);
    shop_world(&rig, &cfn);
    let (parent, inner) = parent_with_nested(true);
    let shop = || {
        let mut i = input("shop", parent.clone());
        i.nested
            .insert("Inner".into(), nested("inner.json", inner.clone()));
        i
    };
    let report = import_stack(rig.engine.clone(), shop(), migrate(&cfn, "shop"))
        .await
        .unwrap();
    assert_eq!(
        row(&report, "Inner").status,
        ImportStatus::Imported,
        "{report:#?}"
    );
    assert_eq!(report.nested.len(), 1);
    assert_eq!(report.nested[0].stack, "shop-Inner");
    let child = rig.state("shop-Inner").await;
    assert_eq!(child.resources["Queue"].physical_id, "shop-queue");
    assert_eq!(child.resources["QueueArn"].physical_id, "/shop/queue");
    let state = rig.state("shop").await;
    let recorded = &state.resources["Inner"];
    assert_eq!(recorded.physical_id, "shop-Inner");
    assert_eq!(recorded.provider, ProviderKind::NestedStack);
    assert_eq!(
        recorded.attributes["Outputs.QueueArn"],
        json!("arn:aws:fake:::shop-queue")
    );

    let migration = report.migration.clone().unwrap();
    assert_eq!(
        migration.outcome,
        MigrationOutcome::Deleted,
        "{migration:#?}"
    );
    assert_eq!(
        cfn.calls(),
        vec![
            "update shop".to_string(),
            format!("update {INNER_ARN}"),
            "delete shop".to_string()
        ],
        "the root first, then its nested stack; only the root is deleted"
    );
    let world = rig.cloud.world();
    for p in ["shop-topic", "shop-queue", "/shop/queue"] {
        assert!(world.contains_key(p), "{p} survives");
    }
    assert!(
        cfn.template(INNER_ARN).is_none(),
        "the nested stack went with its root"
    );

    rig.cloud.clear_calls();
    deploy_ok(&rig, &shop()).await;
    let creates: Vec<_> = rig
        .cloud
        .call_log()
        .into_iter()
        .filter(|(op, _)| *op == Op::Create)
        .collect();
    assert_eq!(creates, vec![], "nothing is created");
}

#[tokio::test]
async fn a_flattened_template_maps_the_nested_stacks_resources_by_logical_id() {
    let rig = Rig::new();
    let cfn = FakeCfn::new(&rig.cloud);
    shop_world(&rig, &cfn);
    let (flat, _) = parent_with_nested(false);
    let report = import_stack(
        rig.engine.clone(),
        input("shop", flat.clone()),
        migrate(&cfn, "shop"),
    )
    .await
    .unwrap();
    assert_eq!(
        row(&report, "Queue").physical_id.as_deref(),
        Some("shop-queue")
    );
    assert_eq!(
        row(&report, "QueueArn").physical_id.as_deref(),
        Some("/shop/queue")
    );
    let migration = report.migration.clone().unwrap();
    assert_eq!(
        migration.outcome,
        MigrationOutcome::Deleted,
        "{migration:#?}"
    );
    assert_eq!(
        migration.retained,
        vec![
            "shop/Topic".to_string(),
            format!("{INNER_ARN}/Queue"),
            format!("{INNER_ARN}/QueueArn")
        ]
    );
    let world = rig.cloud.world();
    assert!(world.contains_key("shop-queue") && world.contains_key("/shop/queue"));
    rig.cloud.clear_calls();
    deploy_ok(&rig, &input("shop", flat)).await;
    assert_eq!(rig.cloud.call_log(), vec![]);
}

#[tokio::test]
async fn the_source_and_its_nested_stacks_back_the_parameter_check() {
    let mut lookups = FakeLookups::default();
    lookups.deployed.insert("shop".into(), Ok(vec![]));
    lookups
        .deployed
        .insert(INNER_ARN.into(), Ok(vec![("Prefix".into(), "prod".into())]));
    // A stack with the stackflow stack's name is no longer asked.
    lookups
        .deployed
        .insert("flat".into(), Err("AccessDenied".into()));
    let rig = Rig::with_lookups(lookups);
    let cfn = FakeCfn::new(&rig.cloud);
    shop_world(&rig, &cfn);
    rig.cloud.existing(
        "prefixed",
        "AWS::SNS::Topic",
        json!({"TopicName": "shop-extra"}),
    );
    let (mut flat, _) = parent_with_nested(false);
    flat["Parameters"] = json!({ "Prefix": { "Type": "String", "Default": "shop" } });
    flat["Resources"]["Extra"] = json!({ "Type": "AWS::SNS::Topic",
        "Properties": { "TopicName": { "Fn::Sub": "${Prefix}-extra" } } });
    let report = import_stack(
        rig.engine.clone(),
        input("flat", flat),
        migrate(&cfn, "shop"),
    )
    .await
    .unwrap();
    assert_eq!(
        row(&report, "Extra").baseline.as_deref(),
        Some("refused (unverifiable-parameter)"),
        "{report:#?}"
    );
    assert_eq!(row(&report, "Queue").baseline.as_deref(), Some("recorded"));
    assert_eq!(report.warnings.len(), 1, "{:?}", report.warnings);
    assert!(report.warnings[0].contains(INNER_ARN) && !report.warnings[0].contains("prod"));
}

#[tokio::test]
async fn a_failed_update_leaves_the_stack_managing_the_resources_and_says_so() {
    let rig = Rig::new();
    app_world(&rig);
    let cfn = FakeCfn::new(&rig.cloud);
    cfn.stack("app", app_source(), APP_IDS);
    cfn.inner.lock().unwrap().fail_update = Some("app".into());
    let report = import_stack(
        rig.engine.clone(),
        input("app", app()),
        migrate(&cfn, "app"),
    )
    .await
    .unwrap();
    let m = report.migration.clone().unwrap();
    assert_eq!(m.outcome, MigrationOutcome::RetainFailed);
    assert_eq!(report.exit_code(), 1);
    for said in [
        "UPDATE_ROLLBACK_COMPLETE: AccessDenied",
        "stackflow's records of stack app hold the adopted resources",
        "CloudFormation stack app still exists and still manages them",
        "no stack has Retain set yet",
        "stackflow deleted nothing",
        "Do not delete app as it is",
        "run this import again with --force",
    ] {
        assert!(m.message.contains(said), "{said:?} not in {}", m.message);
    }
    assert_eq!(cfn.calls(), vec!["update app"], "no delete");
    assert_eq!(rig.state("app").await.resources.len(), 3);
    assert_eq!(rig.cloud.world().len(), 3);
}

/// [`app`]'s world and its CloudFormation stack `app`, the fake set up by `setup`, then
/// migrated: the rig, the fake and the report.
async fn migrate_app(setup: impl FnOnce(&mut CfnInner)) -> (Rig, Arc<FakeCfn>, ImportReport) {
    let rig = Rig::new();
    app_world(&rig);
    let cfn = FakeCfn::new(&rig.cloud);
    cfn.stack("app", app_source(), APP_IDS);
    setup(&mut cfn.inner.lock().unwrap());
    let report = import_stack(
        rig.engine.clone(),
        input("app", app()),
        migrate(&cfn, "app"),
    )
    .await
    .unwrap();
    (rig, cfn, report)
}

#[tokio::test]
async fn a_failed_delete_says_retain_is_set_and_how_to_finish() {
    let (rig, cfn, report) = migrate_app(|f| f.fail_delete = true).await;
    let m = report.migration.clone().unwrap();
    assert_eq!(m.outcome, MigrationOutcome::DeleteFailed);
    for said in [
        "DELETE_FAILED: export in use",
        "each of them has DeletionPolicy: Retain in CloudFormation stack app",
        "stackflow deleted nothing",
        "aws cloudformation delete-stack --stack-name app",
    ] {
        assert!(m.message.contains(said), "{said:?} not in {}", m.message);
    }
    let template = cfn.template("app").expect("still there");
    assert_eq!(retain_of(&template, "Jobs").0, json!("Retain"));

    // Run again once the cause is gone: the same resources, and the stack is deleted.
    cfn.inner.lock().unwrap().fail_delete = false;
    let mut again = migrate(&cfn, "app");
    again.force = true;
    let report = import_stack(rig.engine.clone(), input("app", app()), again)
        .await
        .unwrap();
    assert_eq!(report.migration.unwrap().outcome, MigrationOutcome::Deleted);
    assert_eq!(rig.cloud.world().len(), 3);
}

#[tokio::test]
async fn nothing_found_or_something_left_behind_leaves_the_stack_alone() {
    // Nothing of the stack exists any more: nothing recorded, nothing touched.
    let rig = Rig::new();
    let cfn = FakeCfn::new(&rig.cloud);
    cfn.stack("app", app_source(), APP_IDS);
    let report = import_stack(
        rig.engine.clone(),
        input("app", app()),
        migrate(&cfn, "app"),
    )
    .await
    .unwrap();
    assert_eq!(row(&report, "Jobs").status, ImportStatus::NotDeployedYet);
    let m = report.migration.unwrap();
    assert_eq!(m.outcome, MigrationOutcome::Untouched);
    assert!(m.message.contains("recorded nothing"), "{}", m.message);
    assert_eq!(cfn.calls(), Vec::<String>::new());

    // A resource the template does not declare would go with the stack: untouched too;
    // an explicit --resource wins over the stack's id, which leaves that one behind.
    let rig = Rig::new();
    app_world(&rig);
    rig.cloud
        .existing("other-jobs", "AWS::SQS::Queue", json!({"DelaySeconds": 5}));
    let cfn = FakeCfn::new(&rig.cloud);
    cfn.stack("app", app_source(), APP_IDS);
    let mut options = migrate(&cfn, "app");
    options.overrides.insert("Jobs".into(), "other-jobs".into());
    let report = import_stack(rig.engine.clone(), input("app", app()), options)
        .await
        .unwrap();
    assert_eq!(
        row(&report, "Jobs").physical_id.as_deref(),
        Some("other-jobs")
    );
    let m = report.migration.unwrap();
    assert_eq!(m.outcome, MigrationOutcome::Untouched);
    assert!(
        m.message
            .contains("would delete resources stackflow did not adopt: Jobs (AWS::SQS::Queue, jobs-url) in app"),
        "{}",
        m.message
    );
    assert_eq!(cfn.calls(), Vec::<String>::new());
    assert!(rig.cloud.world().contains_key("jobs-url"));
}

#[tokio::test]
async fn a_missing_source_stack_is_an_error_before_anything_is_recorded() {
    let rig = Rig::new();
    app_world(&rig);
    let cfn = FakeCfn::new(&rig.cloud);
    let err = import_stack(
        rig.engine.clone(),
        input("app", app()),
        migrate(&cfn, "gone"),
    )
    .await
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("CloudFormation stack gone does not exist"),
        "{err}"
    );
    assert!(rig.events("app").await.is_empty());
}

/// Issue 24 item 7: a migration reads every adopted resource back after the delete; one
/// the delete took although Retain was set is named, the import exits 1 and says how to
/// recover, never "retained".
#[tokio::test]
async fn resources_the_delete_took_despite_retain_are_named() {
    let (_, _, report) = migrate_app(|f| f.ignore_retain = true).await;
    let m = report.migration.clone().unwrap();
    assert_eq!(m.outcome, MigrationOutcome::ResourcesLost, "{m:#?}");
    assert_eq!(report.exit_code(), 1);
    let lost: Vec<&str> = m
        .lost
        .iter()
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    assert_eq!(lost, ["Orders", "Jobs", "Setting"], "{m:#?}");
    for said in [
        "although they had DeletionPolicy: Retain",
        "stackflow deploy",
        "backup",
    ] {
        assert!(m.message.contains(said), "{said:?} not in {}", m.message);
    }
    assert!(!m.message.contains("were retained"), "{}", m.message);
}
