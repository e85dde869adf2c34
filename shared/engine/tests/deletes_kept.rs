//! Deletes that the provider did not do: a provider may answer a delete with
//! `Deleted::Skipped` (it left the resource on purpose: a custom resource whose handler
//! answered `FAILED` on Delete, a nested stack destroyed in part) or `Deleted::Abandoned`
//! (nothing can delete it any more: a custom resource whose handler is gone). A skipped
//! delete leaves the resource recorded and the run partial, saying which; an abandoned one
//! leaves the stack as a retained resource does. Neither is recorded as deleted. Through
//! destroy, the cleanup of a resource a deploy removes, the rollback of a failed deploy,
//! and the replay of an interrupted delete, in-process against the fake cloud.

mod support;

use std::time::Duration;

use serde_json::json;
use stackflow_engine::sfn::deadline::within;
use stackflow_engine::{StackStatus, deploy_stack, destroy_stack, destroy_stack_as};
use stackflow_providers::Deleted;
use support::{Op, Rig, deploy, deploy_ok, input, options};

use support::lifecycle::*;

fn skipped() -> Deleted {
    Deleted::Skipped {
        reason: "the handler answered FAILED: bucket not empty".into(),
    }
}

fn abandoned() -> Deleted {
    Deleted::Abandoned {
        reason: "the handler is gone".into(),
    }
}

fn two_topics() -> serde_json::Value {
    json!({"Resources": {"A": topic("a"), "B": topic("b")}})
}

/// A rig with `two_topics` deployed, and B's physical id; B's deletes answer `answer`.
async fn deployed_keeping_b(answer: Deleted) -> (Rig, String) {
    let rig = Rig::new();
    deploy_ok(&rig, &input("app", two_topics())).await;
    let b = rig.state("app").await.resources["B"].physical_id.clone();
    rig.cloud.keep_on_delete("B", answer);
    (rig, b)
}

/// A deploy over A that creates C and then fails at D, so its rollback deletes C; C's
/// deletes answer `answer`.
async fn rollback_deleting_c(answer: Deleted) -> (Rig, stackflow_engine::StackReport) {
    let rig = Rig::new();
    deploy_ok(&rig, &input("app", json!({"Resources": {"A": topic("a")}}))).await;
    let v2 = input(
        "app",
        json!({"Resources": {
            "A": topic("a"),
            "C": topic("c"),
            "D": {"Type": "AWS::SNS::Topic", "DependsOn": ["C"],
                  "Properties": {"TopicName": "d"}}
        }}),
    );
    rig.cloud.fail_once(Op::Create, "D");
    rig.cloud.keep_on_delete("C", answer);
    let report = deploy_stack(rig.engine.clone(), v2, options())
        .await
        .expect("the deploy runs");
    (rig, report)
}

#[tokio::test]
async fn a_skipped_delete_in_a_destroy_keeps_the_resource_recorded_and_the_run_partial() {
    let (rig, b) = deployed_keeping_b(skipped()).await;

    let report = destroy_stack(rig.engine.clone(), "app", options())
        .await
        .expect("the destroy runs");
    assert_eq!(report.status, StackStatus::Partial, "{report:#?}");
    assert_eq!(report.deleted, 1);
    assert_eq!(report.skipped.len(), 1, "{report:#?}");
    assert_eq!(report.skipped[0].0, "B");
    assert!(report.skipped[0].1.contains("bucket not empty"));
    // B still exists, and the stack still owns it.
    let state = assert_settled(&rig, "app", &[]).await;
    assert_eq!(state.resources.len(), 1);
    assert_eq!(state.resources["B"].physical_id, b);
    assert!(rig.cloud.world().contains_key(&b));
    let types = rig.event_types_after("app", 0).await;
    assert!(!types.contains(&"StackDestroyed"), "{types:?}");

    // Once the provider can delete it, the next destroy does.
    rig.cloud.keep_on_delete("B", Deleted::Done);
    let again = destroy_stack(rig.engine.clone(), "app", options())
        .await
        .expect("the destroy runs");
    assert_eq!(again.status, StackStatus::Succeeded, "{again:#?}");
    assert!(rig.state("app").await.resources.is_empty());
}

#[tokio::test]
async fn an_abandoned_delete_in_a_destroy_leaves_the_stack_as_retained() {
    let (rig, b) = deployed_keeping_b(abandoned()).await;

    let report = destroy_stack(rig.engine.clone(), "app", options())
        .await
        .expect("the destroy runs");
    assert_eq!(report.status, StackStatus::Succeeded, "{report:#?}");
    assert_eq!((report.deleted, report.retained), (1, 1));
    let state = assert_settled(&rig, "app", &["B"]).await;
    assert!(state.resources.is_empty());
    // Still in AWS, reported as retained, never as deleted.
    assert!(rig.cloud.world().contains_key(&b));
    let types = rig.event_types_after("app", 0).await;
    assert_eq!(
        types.iter().filter(|t| **t == "ResourceRetained").count(),
        1
    );
    assert_eq!(
        types.iter().filter(|t| **t == "ResourceDeleted").count(),
        1,
        "{types:?}"
    );
}

#[tokio::test]
async fn a_skipped_delete_of_a_removed_resource_keeps_it_recorded() {
    let (rig, b) = deployed_keeping_b(skipped()).await;

    let v2 = input("app", json!({"Resources": {"A": topic("a")}}));
    let report = deploy(&rig, &v2).await;
    assert_eq!(report.status, StackStatus::Partial, "{report:#?}");
    assert_eq!(report.deleted, 0);
    assert_eq!(report.skipped.len(), 1, "{report:#?}");
    let state = assert_settled(&rig, "app", &[]).await;
    assert_eq!(state.resources["B"].physical_id, b);
    assert!(rig.cloud.world().contains_key(&b));
}

#[tokio::test]
async fn a_rollback_whose_delete_is_skipped_keeps_the_created_resource_recorded() {
    let (rig, report) = rollback_deleting_c(skipped()).await;
    assert_eq!(report.status, StackStatus::Failed, "{report:#?}");
    let rollback = report.rollback.as_ref().expect("a rollback ran");
    assert!(!rollback.complete(), "{rollback:#?}");
    assert_eq!(rollback.failed.len(), 1, "{rollback:#?}");
    assert!(
        rollback.failed[0]
            .error
            .message
            .contains("bucket not empty"),
        "{rollback:#?}"
    );
    // C was made and is still there: the stack keeps it.
    let state = rig.state("app").await;
    let c = state.resources["C"].physical_id.clone();
    assert!(rig.cloud.world().contains_key(&c));
    assert!(state.pending.is_empty(), "{:#?}", state.pending);
}

#[tokio::test]
async fn a_rollback_whose_delete_is_abandoned_lets_the_resource_go_as_retained() {
    let (rig, report) = rollback_deleting_c(abandoned()).await;
    let rollback = report.rollback.as_ref().expect("a rollback ran");
    assert!(rollback.complete(), "{rollback:#?}");
    assert!(
        rollback
            .undone
            .iter()
            .any(|(id, how)| id == "C" && how == "abandoned"),
        "{rollback:#?}"
    );
    let state = assert_settled(&rig, "app", &["C"]).await;
    assert!(!state.resources.contains_key("C"));
}

/// A destroy cut while B's delete is under way is resumed by the same run, which replays
/// B's delete: answered skipped, B stays recorded and the run does not end as done.
#[tokio::test]
async fn a_replayed_delete_that_is_skipped_keeps_the_resource_recorded() {
    let (rig, b) = deployed_keeping_b(skipped()).await;
    let _slow = rig.cloud.slow_once(Op::Delete, "B");
    let run = "x-execution-1";
    let destroy = || destroy_stack_as(rig.engine.clone(), "app", options(), run);
    assert!(
        within(Duration::from_millis(100), destroy())
            .await
            .is_none()
    );
    assert!(
        !rig.state("app").await.pending.is_empty(),
        "B's delete is open"
    );

    let report = within(Duration::from_secs(10), destroy())
        .await
        .expect("the second invocation ends in time")
        .expect("the destroy runs");
    assert_eq!(report.status, StackStatus::Partial, "{report:#?}");
    let state = rig.state("app").await;
    assert_eq!(state.resources["B"].physical_id, b, "{state:#?}");
    assert!(state.pending.is_empty(), "{:#?}", state.pending);
    assert!(rig.cloud.world().contains_key(&b));
    let deleted_b = rig.events("app").await.into_iter().any(|e| {
        matches!(&e.event, stackflow_events::Event::ResourceDeleted { logical_id, .. }
            if logical_id == "B")
    });
    assert!(!deleted_b, "B's delete is never recorded as done");
}
