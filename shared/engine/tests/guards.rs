//! What the engine refuses before any write: a replacement that would delete data.

mod support;

use serde_json::{Value, json};
use stackflow_engine::{StackStatus, deploy_stack};
use support::{Op, Rig, deploy_ok, input, options};

fn table(key: &str) -> Value {
    json!({
        "Resources": {
            "Orders": {
                "Type": "AWS::DynamoDB::Table",
                "Properties": {
                    "KeySchema": [{"AttributeName": key, "KeyType": "HASH"}],
                    "AttributeDefinitions": [{"AttributeName": key, "AttributeType": "S"}],
                    "BillingMode": "PAY_PER_REQUEST"
                }
            },
            "Alerts": { "Type": "AWS::SNS::Topic", "Properties": {} }
        }
    })
}

#[tokio::test]
async fn replacing_a_table_is_refused_unless_allowed() {
    let rig = Rig::new();
    deploy_ok(&rig, &input("shop", table("id"))).await;
    let before = rig.events("shop").await.len();
    rig.cloud.clear_calls();

    let v2 = input("shop", table("pk"));
    let (plan, problems) = rig.engine.preview(&v2, false).await.unwrap();
    assert_eq!(plan.resource("Orders").unwrap().action.as_str(), "replace");
    assert!(
        problems
            .iter()
            .any(|p| p.contains("Resources.Orders") && p.contains("KeySchema")),
        "{problems:?}"
    );
    let e = deploy_stack(rig.engine.clone(), v2.clone(), options())
        .await
        .expect_err("a table replacement is refused");
    let message = e.to_string();
    assert!(
        message.contains("--allow-stateful-replacement"),
        "{message}"
    );
    assert!(message.contains("nothing was changed"), "{message}");
    assert!(rig.cloud.calls().is_empty(), "no AWS call");
    assert_eq!(rig.events("shop").await.len(), before, "nothing appended");

    let mut allowed = options();
    allowed.allow_stateful_replacement = true;
    let (_, problems) = rig.engine.preview(&v2, true).await.unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    let report = deploy_stack(rig.engine.clone(), v2, allowed).await.unwrap();
    assert_eq!(
        (report.status, report.replaced),
        (StackStatus::Succeeded, 1)
    );
    assert!(
        rig.cloud
            .call_log()
            .iter()
            .any(|(op, id)| *op == Op::Delete && id == "Orders")
    );
}

#[tokio::test]
async fn a_failure_during_cleanup_is_not_rolled_back_and_the_next_deploy_finishes_it() {
    let rig = Rig::new();
    let topic =
        |name: &str| json!({ "Type": "AWS::SNS::Topic", "Properties": { "TopicName": name } });
    let v1 = input(
        "app",
        json!({ "Resources": { "Keep": topic("keep"), "Gone": topic("gone"), "Named": topic("one") } }),
    );
    deploy_ok(&rig, &v1).await;
    let old_named = rig.cloud.only("app", "Named").0;
    // v2 removes Gone and replaces Named (a new name): both deletes are cleanup.
    let v2 = input(
        "app",
        json!({ "Resources": { "Keep": topic("keep"), "Named": topic("two") } }),
    );
    rig.cloud.fail_once(Op::Delete, "Gone");
    let report = support::deploy(&rig, &v2).await;
    assert_eq!(report.status, StackStatus::Partial, "{report:#?}");
    assert!(report.rollback.is_none(), "nothing is rolled back");
    assert_eq!(report.failures.len(), 1);
    assert_eq!(report.failures[0].logical_id, "Gone");
    // The replacement stands; the old copy is gone; what failed is still recorded.
    let state = rig.state("app").await;
    assert!(state.lock.is_none(), "the lock is released");
    assert!(state.resources.contains_key("Gone"));
    assert!(!rig.cloud.world().contains_key(&old_named));
    assert_ne!(state.resources["Named"].physical_id, old_named);

    // The next deploy deletes what is left.
    let again = deploy_ok(&rig, &v2).await;
    assert_eq!(again.deleted, 1);
    assert!(!rig.state("app").await.resources.contains_key("Gone"));
    assert!(rig.cloud.physical_ids("app", "Gone").is_empty());
}

#[tokio::test]
async fn a_name_someone_else_has_is_never_taken_over_nor_deleted() {
    let rig = Rig::new();
    let theirs = rig.cloud.someone_elses_topic("orders");
    let v1 = input(
        "app",
        json!({ "Resources": {
            "Mine": { "Type": "AWS::SNS::Topic", "Properties": { "TopicName": "mine" } },
            "Orders": {
                "Type": "AWS::SNS::Topic",
                "Properties": { "TopicName": "orders" },
                "DependsOn": "Mine"
            }
        } }),
    );
    let report = support::deploy(&rig, &v1).await;
    assert_eq!(report.status, StackStatus::Failed);
    let failure = &report.failures[0];
    assert_eq!(failure.logical_id, "Orders");
    assert!(
        failure.error.message.contains("did not create it"),
        "{failure:?}"
    );
    // The rollback removed what this deploy made, and only that.
    assert!(rig.cloud.world().contains_key(&theirs));
    assert!(rig.cloud.physical_ids("app", "Mine").is_empty());
    let state = rig.state("app").await;
    assert!(state.resources.is_empty(), "{state:?}");
    assert!(
        !rig.cloud
            .call_log()
            .iter()
            .any(|(op, id)| *op == Op::Delete && id == "Orders"),
        "nothing named Orders was deleted"
    );
}

/// A create this stack made, whose outcome a killed run never recorded, found again by
/// name (the provider has no token to replay: it creates by name) is adopted and brought
/// to the template's properties: recording them without applying them would leave the
/// resource as the half-made (or older) create left it.
#[tokio::test]
async fn an_own_resource_adopted_by_name_gets_the_templates_properties() {
    let rig = Rig::new();
    let v1 = input(
        "app",
        json!({ "Resources": {
            "Orders": {
                "Type": "AWS::SNS::Topic",
                "Properties": { "TopicName": "orders", "DisplayName": "Orders" }
            }
        } }),
    );
    // The create happens; every append after it fails (the process is as good as dead).
    killed_at_create(&rig, &v1, "Orders").await;
    let (physical_id, _) = rig.cloud.only("app", "Orders");
    // Made with other properties than the template's, and no token can replay it.
    rig.cloud
        .set_properties(&physical_id, json!({ "TopicName": "orders" }));
    rig.cloud.forget_tokens();
    rig.cloud.clear_calls();

    deploy_ok(&rig, &v1).await;

    let (adopted, thing) = rig.cloud.only("app", "Orders");
    assert_eq!(adopted, physical_id, "the same topic, not a second one");
    assert_eq!(thing.properties["DisplayName"], "Orders", "{thing:?}");
    let updates: Vec<_> = rig
        .cloud
        .call_log()
        .into_iter()
        .filter(|(op, id)| *op == Op::Update && id == "Orders")
        .collect();
    assert_eq!(updates.len(), 1, "{:?}", rig.cloud.call_log());
    let state = rig.state("app").await;
    assert_eq!(state.resources["Orders"].physical_id, physical_id);
}

/// A create whose run was killed after its intent, replayed by the next run, that finds its
/// name taken by someone else's resource (the intent does not show the call reached AWS):
/// "already exists" is no proof, so nothing is adopted, changed or recorded, and a destroy
/// leaves it alone.
#[tokio::test]
async fn a_replayed_create_never_adopts_what_it_cannot_prove_it_made() {
    let rig = Rig::new();
    let theirs = rig.cloud.someone_elses_topic("orders");
    let v1 = input(
        "app",
        json!({ "Resources": {
            "Orders": {
                "Type": "AWS::SNS::Topic",
                "Properties": { "TopicName": "orders", "DisplayName": "Ours" }
            }
        } }),
    );
    // The intent is written; the create is refused (the name is theirs), and the run dies
    // before it can record that.
    killed_at_create(&rig, &v1, "Orders").await;
    assert_eq!(
        rig.state("app").await.pending.len(),
        1,
        "the intent is left"
    );

    let report = support::deploy(&rig, &v1).await;
    assert_eq!(report.status, StackStatus::Failed);
    let state = rig.state("app").await;
    assert!(state.resources.is_empty(), "nothing adopted: {state:?}");
    assert!(state.pending.is_empty(), "the replay is settled: {state:?}");
    let world = rig.cloud.world();
    assert_eq!(
        Value::Object(world[&theirs].properties.clone()),
        json!({ "TopicName": "orders" }),
        "their topic is untouched"
    );
    let touched: Vec<_> = rig
        .cloud
        .calls()
        .into_iter()
        .filter(|c| c.op != Op::Create && c.physical_id.as_deref() == Some(theirs.as_str()))
        .collect();
    assert!(touched.is_empty(), "{touched:?}");
    let events = serde_json::to_string(&rig.events("app").await).unwrap();
    assert!(events.contains("not made by this stack"), "{events}");

    stackflow_engine::destroy_stack(rig.engine.clone(), "app", options())
        .await
        .expect("destroy");
    assert!(rig.cloud.world().contains_key(&theirs), "never deleted");
}

/// A deploy of `input` whose process dies at the create of `logical_id`: its intent is
/// written, the call is made, and every append after it fails; then the store heals and
/// the dead run's lock counts as stale.
async fn killed_at_create(
    rig: &Rig,
    input: &stackflow_engine::stack::StackInput,
    logical_id: &str,
) {
    let gate = rig.cloud.block_once(Op::Create, logical_id);
    let run = tokio::spawn(deploy_stack(rig.engine.clone(), input.clone(), options()));
    gate.entered().await;
    rig.store.fail_after(0);
    gate.release();
    let crashed = run.await.expect("the deploy task");
    assert!(crashed.is_err(), "{crashed:?}");
    rig.store.heal();
    rig.holders_gone
        .store(true, std::sync::atomic::Ordering::SeqCst);
}

#[tokio::test]
async fn a_type_the_engine_may_not_deploy_is_refused_before_any_call() {
    let rig = Rig::new();
    let template = json!({
        "Resources": {
            "Alerts": { "Type": "AWS::SNS::Topic", "Properties": {} },
            "Box": { "Type": "AWS::EC2::Instance", "Properties": { "ImageId": "ami-1" } },
            "Jobs": { "Type": "AWS::SQS::Queue", "Properties": {} }
        }
    });
    let mut limited = options();
    limited.allowed_types = Some(
        stackflow_core::deployable::Deployable::new(["AWS::SNS::*", "AWS::SQS::Queue"]).unwrap(),
    );
    let app = input("app", template);
    let mut only_sns = limited.clone();
    only_sns.allowed_types =
        Some(stackflow_core::deployable::Deployable::new(["AWS::SNS::Topic"]).unwrap());
    let e = deploy_stack(rig.engine.clone(), app.clone(), only_sns)
        .await
        .expect_err("an EC2 instance and a queue are not allowed");
    let message = e.to_string();
    for part in [
        "Resources.Box.Type AWS::EC2::Instance",
        "Resources.Jobs.Type AWS::SQS::Queue",
        "it may deploy: AWS::SNS::Topic",
        "nothing was changed",
    ] {
        assert!(message.contains(part), "{part}: {message}");
    }
    assert!(!message.contains("Alerts"), "{message}");
    assert!(rig.cloud.calls().is_empty(), "no AWS call");
    assert!(rig.events("app").await.is_empty(), "nothing appended");

    let e = deploy_stack(rig.engine.clone(), app, limited.clone())
        .await
        .expect_err("the instance is still outside");
    assert!(e.to_string().contains("AWS::EC2::Instance"), "{e}");
    assert!(!e.to_string().contains("Resources.Jobs"), "{e}");

    let allowed = input(
        "app",
        json!({ "Resources": {
            "Alerts": { "Type": "AWS::SNS::Topic", "Properties": {} },
            "Jobs": { "Type": "AWS::SQS::Queue", "Properties": {} }
        }}),
    );
    let report = deploy_stack(rig.engine.clone(), allowed, limited)
        .await
        .unwrap();
    assert_eq!((report.status, report.created), (StackStatus::Succeeded, 2));
}

/// `Fn::GetStackOutput` with a `Region` reads this store's records of the stack in that
/// region (a deploy of a cloud assembly records each stack under the region it went to):
/// a consumer in us-east-1 gets the output of a producer deployed to eu-west-1.
#[tokio::test]
async fn a_stack_output_of_another_region_is_read_from_its_records() {
    let rig = Rig::new();
    let there = stackflow_engine::Engine {
        store: rig.store.clone(),
        providers: std::sync::Arc::new(support::FakeRouter(rig.cloud.clone())),
        lookups: std::sync::Arc::new(support::FakeLookups::default()),
        region: "eu-west-1".into(),
        who: "region-test".into(),
        cloudformation_fallback: false,
        progress: rig.lines.clone(),
        stale: stackflow_engine::engine::never_stale(),
        lease: None,
        digest_key: None,
    };
    let producer = input(
        "producer",
        json!({"Resources": {"T": {"Type": "AWS::SNS::Topic", "Properties": {"TopicName": "t"}}},
            "Outputs": {"Name": {"Value": "from-eu-west-1"}}}),
    );
    let report = deploy_stack(std::sync::Arc::new(there), producer, options())
        .await
        .unwrap();
    assert_eq!(report.status, StackStatus::Succeeded, "{report:#?}");
    let consumer = input(
        "consumer",
        json!({"Resources": {"P": {"Type": "AWS::SSM::Parameter", "Properties": {
            "Type": "String",
            "Value": {"Fn::GetStackOutput": {
                "StackName": "producer", "OutputName": "Name", "Region": "eu-west-1"}}}}}}),
    );
    deploy_ok(&rig, &consumer).await;
    let sent: Vec<Value> = rig
        .cloud
        .calls()
        .into_iter()
        .filter(|c| c.logical_id == "P" && c.op == Op::Create)
        .map(|c| c.properties["Value"].clone())
        .collect();
    assert_eq!(sent, vec![json!("from-eu-west-1")]);
}
