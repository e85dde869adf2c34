//! What a plain import adopts and what it records (issue 24): the physical ids of a
//! CloudFormation stack of the same name (a stack `cdk deploy` made, whose generated names
//! cannot be found otherwise), left as it is; a selective import (only the resources
//! named); a dry run; and `state orphan`, which takes resources out of the records and
//! leaves them in AWS.

mod support;

use std::sync::Arc;

use indexmap::IndexMap;
use serde_json::{Value, json};
use stackflow_engine::import::{
    ImportOptions, ImportReport, ImportStatus, MigrateFrom, import_stack,
};
use stackflow_engine::lookups::{CloudFormationSource, LookupError, SourceResource};
use stackflow_engine::orphan::orphan;
use stackflow_events::event::Event;
use stackflow_providers::provider::BoxFuture;
use support::lifecycle::r;
use support::{FakeCfn, Op, Rig, deploy_ok, input, param};

fn status(report: &ImportReport, id: &str) -> ImportStatus {
    row(report, id).status
}

fn row<'a>(report: &'a ImportReport, id: &str) -> &'a stackflow_engine::import::ImportedResource {
    report
        .resources
        .iter()
        .find(|r| r.logical_id == id)
        .unwrap_or_else(|| panic!("{id} not in {report:#?}"))
}

/// A CDK-shaped app: no resource names itself (CloudFormation made the names).
fn app() -> Value {
    json!({ "Resources": {
        "Orders": { "Type": "AWS::SNS::Topic", "Properties": { "DisplayName": "orders" } },
        "Jobs": { "Type": "AWS::SQS::Queue", "Properties": { "DelaySeconds": 5 } },
        "Setting": { "Type": "AWS::SSM::Parameter",
            "Properties": { "Type": "String", "Value": { "Ref": "Orders" } } },
        "CDKMetadata": { "Type": "AWS::CDK::Metadata", "Properties": { "Analytics": "v2" } }
    } })
}

/// What CloudFormation made for [`app`], in the fake cloud.
fn app_world(rig: &Rig) {
    rig.cloud.existing(
        "arn:orders-x1",
        "AWS::SNS::Topic",
        json!({"DisplayName": "orders"}),
    );
    rig.cloud
        .existing("url/jobs-x2", "AWS::SQS::Queue", json!({"DelaySeconds": 5}));
    rig.cloud.existing(
        "CFN-Setting-x3",
        "AWS::SSM::Parameter",
        json!({"Name": "CFN-Setting-x3", "Type": "String", "Value": "arn:orders-x1"}),
    );
}

const IDS: &[(&str, &str)] = &[
    ("Orders", "arn:orders-x1"),
    ("Jobs", "url/jobs-x2"),
    ("Setting", "CFN-Setting-x3"),
    ("CDKMetadata", "meta-1"),
];

fn same_name(cfn: &Arc<dyn CloudFormationSource>) -> ImportOptions {
    ImportOptions {
        cloudformation: Some(MigrateFrom {
            stack: "app".into(),
            cloudformation: cfn.clone(),
        }),
        ..Default::default()
    }
}

fn named(pairs: &[(&str, &str)]) -> IndexMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[tokio::test]
async fn a_plain_import_takes_the_ids_of_the_cloudformation_stack_of_the_same_name() {
    let rig = Rig::new();
    app_world(&rig);
    let fake = FakeCfn::new(&rig.cloud);
    fake.stack("app", app(), IDS);
    let cfn: Arc<dyn CloudFormationSource> = fake.clone();
    let report = import_stack(rig.engine.clone(), input("app", app()), same_name(&cfn))
        .await
        .unwrap();
    for (id, physical) in &IDS[..3] {
        assert_eq!(status(&report, id), ImportStatus::Imported, "{report:#?}");
        assert_eq!(row(&report, id).physical_id.as_deref(), Some(*physical));
        let by = row(&report, id).found_by.as_deref();
        assert_eq!(by, Some("cloudformation:app"));
    }
    assert_eq!(report.from_cloudformation.as_deref(), Some("app"));
    assert!(report.migration.is_none());
    // The CloudFormation stack is left as it is.
    assert!(fake.calls().is_empty(), "{:?}", fake.calls());
    assert!(fake.template("app").is_some());
    // The next deploy makes nothing again.
    rig.cloud.clear_calls();
    deploy_ok(&rig, &input("app", app())).await;
    assert_eq!(rig.cloud.call_log(), vec![], "no create, no update");
}

/// CloudFormation that cannot be read (a permission missing).
struct Denied;

impl CloudFormationSource for Denied {
    fn stack_resources<'a>(
        &'a self,
        stack: &'a str,
    ) -> BoxFuture<'a, Result<Option<Vec<SourceResource>>, LookupError>> {
        Box::pin(async move {
            Err(LookupError {
                what: format!("the resources of CloudFormation stack {stack}"),
                message: "AccessDenied: not authorized to perform ListStackResources".into(),
            })
        })
    }
    fn current_template<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<String, LookupError>> {
        unreachable!("a plain import reads no template")
    }
    fn update_template<'a>(
        &'a self,
        _: &'a str,
        _: String,
    ) -> BoxFuture<'a, Result<(), LookupError>> {
        unreachable!("a plain import changes no stack")
    }
    fn delete_stack<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<(), LookupError>> {
        unreachable!("a plain import deletes no stack")
    }
}

#[tokio::test]
async fn cloudformation_that_cannot_be_read_is_a_warning_and_names_are_used() {
    let rig = Rig::new();
    rig.cloud.existing(
        "orders-arn",
        "AWS::SNS::Topic",
        json!({"TopicName": "orders"}),
    );
    let cfn: Arc<dyn CloudFormationSource> = Arc::new(Denied);
    let v = json!({ "Resources": {
        "Orders": { "Type": "AWS::SNS::Topic", "Properties": { "TopicName": "orders" } }
    } });
    let report = import_stack(rig.engine.clone(), input("app", v), same_name(&cfn))
        .await
        .unwrap();
    assert_eq!(status(&report, "Orders"), ImportStatus::Imported);
    assert_eq!(row(&report, "Orders").found_by.as_deref(), Some("name"));
    assert!(report.from_cloudformation.is_none());
    let said = report.warnings.join("\n");
    assert!(
        said.contains("AccessDenied") && said.contains("names the template gives"),
        "{said}"
    );
}

#[tokio::test]
async fn a_selective_import_adopts_only_what_it_names() {
    let rig = Rig::new();
    app_world(&rig);
    let fake = FakeCfn::new(&rig.cloud);
    fake.stack("app", app(), IDS);
    let cfn: Arc<dyn CloudFormationSource> = fake.clone();
    let options = ImportOptions {
        overrides: named(&[("Jobs", "url/jobs-x2")]),
        ..same_name(&cfn)
    };
    let report = import_stack(rig.engine.clone(), input("app", app()), options)
        .await
        .unwrap();
    assert_eq!(status(&report, "Jobs"), ImportStatus::Imported);
    assert_eq!(row(&report, "Jobs").found_by.as_deref(), Some("mapping"));
    for id in ["Orders", "Setting"] {
        assert_eq!(status(&report, id), ImportStatus::OutOfScope, "{report:#?}");
    }
    assert!(report.from_cloudformation.is_none(), "not consulted");
    let state = rig.state("app").await;
    let ids: Vec<&String> = state.resources.keys().collect();
    assert_eq!(ids, ["Jobs"]);

    // Naming a recorded resource under another physical id needs force.
    rig.cloud.existing(
        "url/jobs-other",
        "AWS::SQS::Queue",
        json!({"DelaySeconds": 5}),
    );
    let other = || ImportOptions {
        overrides: named(&[("Jobs", "url/jobs-other")]),
        ..Default::default()
    };
    let refused = import_stack(rig.engine.clone(), input("app", app()), other()).await;
    let message = refused.unwrap_err().to_string();
    assert!(
        message.contains("--force") && message.contains("url/jobs-x2"),
        "{message}"
    );
    assert_eq!(
        rig.state("app").await.resources["Jobs"].physical_id,
        "url/jobs-x2"
    );
    let forced = ImportOptions {
        force: true,
        ..other()
    };
    let report = import_stack(rig.engine.clone(), input("app", app()), forced)
        .await
        .unwrap();
    assert_eq!(status(&report, "Jobs"), ImportStatus::Imported);
    assert_eq!(
        rig.state("app").await.resources["Jobs"].physical_id,
        "url/jobs-other"
    );
    // --auto with a name: every other resource is looked up too (over records: force).
    let auto = ImportOptions {
        overrides: named(&[("Jobs", "url/jobs-x2")]),
        auto: true,
        force: true,
        ..same_name(&cfn)
    };
    let report = import_stack(rig.engine.clone(), input("app", app()), auto)
        .await
        .unwrap();
    for (id, physical) in &IDS[..3] {
        assert_eq!(row(&report, id).physical_id.as_deref(), Some(*physical));
    }
    // A name the template does not declare stops the import before it reads anything.
    let typo = ImportOptions {
        overrides: named(&[("Jbos", "url/jobs-x2")]),
        ..Default::default()
    };
    let e = import_stack(rig.engine.clone(), input("app", app()), typo).await;
    assert!(e.unwrap_err().to_string().contains("Jbos"));
}

#[tokio::test]
async fn a_dry_run_reports_and_records_nothing() {
    let rig = Rig::new();
    app_world(&rig);
    let fake = FakeCfn::new(&rig.cloud);
    fake.stack("app", app(), IDS);
    let cfn: Arc<dyn CloudFormationSource> = fake.clone();
    let options = ImportOptions {
        dry_run: true,
        ..same_name(&cfn)
    };
    let report = import_stack(rig.engine.clone(), input("app", app()), options)
        .await
        .unwrap();
    assert!(report.dry_run);
    for (id, physical) in &IDS[..3] {
        let r = row(&report, id);
        assert_eq!(r.status, ImportStatus::Imported, "{report:#?}");
        assert_eq!(r.physical_id.as_deref(), Some(*physical));
        assert_eq!(r.baseline.as_deref(), Some("recorded"), "{r:#?}");
    }
    assert!(rig.events("app").await.is_empty(), "no lock, no record");
    // The real import after it records what the dry run said.
    let report = import_stack(rig.engine.clone(), input("app", app()), same_name(&cfn))
        .await
        .unwrap();
    assert!(!report.dry_run);
    assert_eq!(rig.state("app").await.resources.len(), 3);
}

#[tokio::test]
async fn orphan_takes_resources_out_of_the_records_and_leaves_them_in_aws() {
    let rig = Rig::new();
    let v = json!({ "Resources": {
        "Orders": { "Type": "AWS::SNS::Topic", "Properties": { "TopicName": "orders" } },
        "Setting": param("/app/orders", r("Orders")),
        "Other": { "Type": "AWS::SNS::Topic", "Properties": { "TopicName": "other" } }
    } });
    deploy_ok(&rig, &input("app", v)).await;
    let (orders, _) = rig.cloud.only("app", "Orders");
    let events = rig.events("app").await.len();

    // Refused, with nothing recorded: an id that is not recorded.
    let ids = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let e = orphan(rig.engine.clone(), "app", &ids(&["Order"]), false).await;
    let message = e.unwrap_err().to_string();
    assert!(
        message.contains("Order not recorded") && message.contains("Orders"),
        "{message}"
    );
    // A dry run says what would go.
    let dry = orphan(rig.engine.clone(), "app", &ids(&["Orders"]), true)
        .await
        .unwrap();
    assert!(dry.dry_run);
    assert_eq!(dry.orphaned[0].physical_id, orders);
    assert_eq!(dry.orphaned[0].dependents, ["Setting"]);
    assert_eq!(rig.events("app").await.len(), events);

    let done = orphan(rig.engine.clone(), "app", &ids(&["Orders"]), false)
        .await
        .unwrap();
    assert!(!done.dry_run);
    let state = rig.state("app").await;
    assert!(!state.resources.contains_key("Orders"));
    assert!(state.resources["Setting"].dependencies.is_empty());
    assert_eq!(
        state.resources["Setting"].properties["Value"],
        orders.as_str()
    );
    assert!(state.lock.is_none());
    let retained = rig.events("app").await.into_iter().any(|e| {
        matches!(&e.event, Event::ResourceRetained { logical_id, .. } if logical_id == "Orders")
    });
    assert!(retained);

    // A destroy deletes what is recorded, never the orphan.
    rig.cloud.clear_calls();
    stackflow_engine::destroy_stack(rig.engine.clone(), "app", support::options())
        .await
        .unwrap();
    let deleted: Vec<String> = rig
        .cloud
        .call_log()
        .into_iter()
        .filter(|(op, _)| *op == Op::Delete)
        .map(|(_, id)| id)
        .collect();
    assert!(!deleted.contains(&"Orders".to_string()), "{deleted:?}");
    assert!(rig.cloud.world().contains_key(&orders), "the orphan stays");
}

#[tokio::test]
async fn an_orphan_cut_off_part_way_is_finished_by_running_it_again() {
    let rig = Rig::new();
    let v = json!({ "Resources": {
        "A": { "Type": "AWS::SNS::Topic", "Properties": { "TopicName": "a" } },
        "B": { "Type": "AWS::SNS::Topic", "Properties": { "TopicName": "b" } },
        "C": { "Type": "AWS::SNS::Topic", "Properties": { "TopicName": "c" } }
    } });
    deploy_ok(&rig, &input("app", v)).await;
    let ids: Vec<String> = vec!["A".into(), "B".into()];
    // The lock and A's record go through; B's is lost (a dropped connection).
    rig.store.fail_once_after(2);
    let cut = orphan(rig.engine.clone(), "app", &ids, false).await;
    assert!(cut.is_err(), "{cut:?}");
    let state = rig.state("app").await;
    assert!(!state.resources.contains_key("A") && state.resources.contains_key("B"));
    // The same command again finishes it: A was taken out already, B is now.
    let again = orphan(rig.engine.clone(), "app", &ids, false)
        .await
        .unwrap();
    assert_eq!(again.already, ["A"]);
    assert_eq!(again.orphaned.len(), 1);
    assert_eq!(again.orphaned[0].logical_id, "B");
    let state = rig.state("app").await;
    let left: Vec<&String> = state.resources.keys().collect();
    assert_eq!(left, ["C"]);
    assert!(state.lock.is_none());
    // Once more: nothing left to do, and nothing is refused.
    let done = orphan(rig.engine.clone(), "app", &ids, false)
        .await
        .unwrap();
    assert_eq!(done.already, ["A", "B"]);
    assert!(done.orphaned.is_empty());
    // Nothing was deleted in AWS.
    assert!(rig.cloud.call_log().iter().all(|(op, _)| *op != Op::Delete));
}
