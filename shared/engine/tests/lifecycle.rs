//! The engine's lifecycle, end to end and in-process: deploys, updates, replacements,
//! deletes, retain policies, destroys, nested stacks, the stop signal and a panicking provider, against a fake
//! cloud (`support::FakeCloud`) and an in-memory event store. Each test looks at the
//! world (what exists in the fake cloud), the recorded state (a fold of the store), the
//! report and the provider's call log. Failures, rollbacks and crashes:
//! `lifecycle_failures.rs`.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use stackflow_engine::stack::StackInput;
use stackflow_engine::{StackStatus, deploy_stack, destroy_stack};
use stackflow_events::EventStore;
use stackflow_events::event::Event;
use stackflow_events::projection::{DeployStatus, StackState};
use support::{CallResult, Op, Rig, deploy, deploy_ok, input, nested, options, param, stoppable};

use support::lifecycle::*;

// ---------------------------------------------------------------------------------------
// 1. Create
// ---------------------------------------------------------------------------------------

fn wired() -> StackInput {
    input(
        "app",
        json!({
            "Resources": {
                "Wiring": param("/app/wiring", join(vec![r("Topic"), arn("Queue")])),
                "Topic": topic("alerts"),
                "Queue": queue("jobs", 30),
            },
            "Outputs": {
                "TopicId": { "Value": r("Topic") },
                "QueueArn": { "Value": arn("Queue") },
                "Wiring": { "Value": r("Wiring") },
                "Zone": { "Value": { "Fn::Select": [1, { "Fn::GetAZs": "" }] } },
            }
        }),
    )
}

#[tokio::test]
async fn create_respects_dependencies_records_state_and_resolves_outputs() {
    let rig = Rig::new();
    let report = deploy_ok(&rig, &wired()).await;
    assert_eq!(report.created, 3);
    assert_eq!((report.updated, report.replaced, report.deleted), (0, 0, 0));

    let log = rig.cloud.call_log();
    assert_eq!(log.len(), 3, "{log:?}");
    assert!(log.iter().all(|(op, _)| *op == Op::Create));
    let wiring = position(&log, Op::Create, "Wiring");
    assert!(position(&log, Op::Create, "Topic") < wiring);
    assert!(position(&log, Op::Create, "Queue") < wiring);
    // Every call carries a token, each a different one.
    let calls = rig.cloud.calls();
    assert!(calls.iter().all(|c| !c.token.is_empty()));
    let tokens: std::collections::BTreeSet<_> = calls.iter().map(|c| &c.token).collect();
    assert_eq!(tokens.len(), 3);

    let (topic_id, _) = rig.cloud.only("app", "Topic");
    let (queue_id, queue) = rig.cloud.only("app", "Queue");
    let (wiring_id, wiring) = rig.cloud.only("app", "Wiring");
    assert_eq!(queue.properties["QueueName"], json!("jobs"));
    let queue_arn = format!("arn:aws:fake:::{queue_id}");
    assert_eq!(
        wiring.properties["Value"],
        json!(format!("{topic_id}|{queue_arn}"))
    );

    let state = assert_settled(&rig, "app", &[]).await;
    assert_eq!(state.resources.len(), 3);
    assert_eq!(state.resources["Topic"].physical_id, topic_id);
    assert_eq!(
        state.resources["Queue"].attributes["Arn"],
        json!(queue_arn.clone())
    );
    let mut deps = state.resources["Wiring"].dependencies.clone();
    deps.sort();
    assert_eq!(deps, ["Queue", "Topic"]);
    assert_eq!(
        state.last_deploy.as_ref().map(|d| d.status),
        Some(DeployStatus::Completed)
    );
    assert!(state.journal.entries.is_empty());

    let expected: indexmap::IndexMap<String, Value> = [
        ("TopicId".to_string(), json!(topic_id)),
        ("QueueArn".to_string(), json!(queue_arn)),
        ("Wiring".to_string(), json!(wiring_id)),
        ("Zone".to_string(), json!("us-east-1b")),
    ]
    .into_iter()
    .collect();
    assert_eq!(report.outputs, expected);
    assert_eq!(state.outputs, expected);
}

// ---------------------------------------------------------------------------------------
// 2. Update in place, then no change
// ---------------------------------------------------------------------------------------

fn wired_with(queue_name: &str, visibility: u64) -> StackInput {
    let mut i = wired();
    i.template.resources["Queue"].properties = queue(queue_name, visibility)["Properties"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    i
}

#[tokio::test]
async fn update_in_place_then_a_second_deploy_changes_nothing() {
    let rig = Rig::new();
    deploy_ok(&rig, &wired()).await;
    let before = rig.state("app").await;
    rig.cloud.clear_calls();

    let v2 = wired_with("jobs", 60);
    let report = deploy_ok(&rig, &v2).await;
    assert_eq!((report.created, report.updated, report.replaced), (0, 1, 0));
    let calls = rig.cloud.calls();
    assert_eq!(calls.len(), 1, "{calls:#?}");
    let call = &calls[0];
    assert_eq!((call.op, call.logical_id.as_str()), (Op::Update, "Queue"));
    assert_eq!(
        call.physical_id.as_deref(),
        Some(before.resources["Queue"].physical_id.as_str())
    );
    assert_eq!(call.properties["VisibilityTimeout"], json!(60));
    assert_eq!(
        call.previous
            .as_ref()
            .map(|p| p["VisibilityTimeout"].clone()),
        Some(json!(30))
    );
    let (queue_id, queue) = rig.cloud.only("app", "Queue");
    assert_eq!(queue_id, before.resources["Queue"].physical_id);
    assert_eq!(queue.properties["VisibilityTimeout"], json!(60));
    let state = assert_settled(&rig, "app", &[]).await;
    assert_eq!(resource_ids(&state), resource_ids(&before));
    assert_eq!(
        state.resources["Queue"].properties["VisibilityTimeout"],
        json!(60)
    );

    // The same template again: no call, no event.
    rig.cloud.clear_calls();
    let seq = state.seq;
    let report = deploy(&rig, &v2).await;
    assert_eq!(report.status, StackStatus::NoChanges);
    assert!(rig.cloud.calls().is_empty());
    assert_eq!(rig.event_types_after("app", seq).await, Vec::<&str>::new());
    assert_eq!(report.outputs, state.outputs);
}

// ---------------------------------------------------------------------------------------
// 3. Replace
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn replace_creates_the_new_one_first_and_deletes_the_old_one_last() {
    let rig = Rig::new();
    deploy_ok(&rig, &wired()).await;
    let before = rig.state("app").await;
    let old_queue = before.resources["Queue"].physical_id.clone();
    rig.cloud.clear_calls();

    let report = deploy_ok(&rig, &wired_with("jobs-2", 30)).await;
    assert_eq!(report.replaced, 1);
    assert_eq!(report.updated, 1, "Wiring follows the new queue's ARN");
    assert_eq!(report.deleted, 1, "the old queue");

    let log = rig.cloud.call_log();
    assert_eq!(
        log,
        [
            (Op::Create, "Queue".to_string()),
            (Op::Update, "Wiring".to_string()),
            (Op::Delete, "Queue".to_string()),
        ]
    );
    let calls = rig.cloud.calls();
    assert_eq!(calls[2].physical_id.as_deref(), Some(old_queue.as_str()));

    let (new_queue, thing) = rig.cloud.only("app", "Queue");
    assert_ne!(new_queue, old_queue);
    assert_eq!(thing.properties["QueueName"], json!("jobs-2"));
    let (_, wiring) = rig.cloud.only("app", "Wiring");
    assert!(
        wiring.properties["Value"]
            .as_str()
            .is_some_and(|v| v.ends_with(&format!("arn:aws:fake:::{new_queue}")))
    );
    let state = assert_settled(&rig, "app", &[]).await;
    assert_eq!(state.resources["Queue"].physical_id, new_queue);
    assert_eq!(
        report.outputs["QueueArn"],
        json!(format!("arn:aws:fake:::{new_queue}"))
    );
}

#[tokio::test]
async fn a_change_the_provider_cannot_make_in_place_replaces_the_resource() {
    let rig = Rig::new();
    let v1 = input(
        "app",
        json!({ "Resources": { "Queue": queue("jobs", 30) } }),
    );
    deploy_ok(&rig, &v1).await;
    let (old_queue, _) = rig.cloud.only("app", "Queue");
    rig.cloud.clear_calls();
    rig.cloud.not_updatable("Queue", "VisibilityTimeout");

    let v2 = input(
        "app",
        json!({ "Resources": { "Queue": queue("jobs", 60) } }),
    );
    let report = deploy_ok(&rig, &v2).await;
    assert_eq!((report.updated, report.replaced, report.deleted), (0, 1, 1));
    let calls = rig.cloud.calls();
    let ops: Vec<(Op, &CallResult)> = calls.iter().map(|c| (c.op, &c.result)).collect();
    assert!(matches!(
        ops.as_slice(),
        [
            (Op::Update, CallResult::Failed(_)),
            (Op::Create, CallResult::Ok),
            (Op::Delete, CallResult::Ok)
        ]
    ));
    assert_eq!(calls[2].physical_id.as_deref(), Some(old_queue.as_str()));
    let (new_queue, thing) = rig.cloud.only("app", "Queue");
    assert_ne!(new_queue, old_queue);
    assert_eq!(thing.properties["VisibilityTimeout"], json!(60));
    assert_settled(&rig, "app", &[]).await;
}

#[tokio::test]
async fn dependents_follow_a_replacement_the_provider_forced() {
    let rig = Rig::new();
    deploy_ok(&rig, &wired()).await;
    rig.cloud.not_updatable("Queue", "VisibilityTimeout");
    deploy_ok(&rig, &wired_with("jobs", 60)).await;
    let (new_queue, _) = rig.cloud.only("app", "Queue");
    let (_, wiring) = rig.cloud.only("app", "Wiring");
    assert!(
        wiring.properties["Value"]
            .as_str()
            .is_some_and(|v| v.ends_with(&format!("arn:aws:fake:::{new_queue}"))),
        "Wiring still names the deleted queue: {wiring:#?}"
    );
    let state = assert_settled(&rig, "app", &[]).await;
    assert_eq!(
        state.outputs["QueueArn"],
        json!(format!("arn:aws:fake:::{new_queue}"))
    );
}

// ---------------------------------------------------------------------------------------
// 4. Delete order
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn removed_resources_are_deleted_dependents_first_after_every_create_and_update() {
    let rig = Rig::new();
    let v1 = input(
        "app",
        json!({
            "Resources": {
                "A": param("/a", json!("a")),
                "B": param("/b", r("A")),
                "C": param("/c", r("B")),
                "D": topic("d"),
            }
        }),
    );
    deploy_ok(&rig, &v1).await;
    let before = rig.state("app").await;
    rig.cloud.clear_calls();

    let mut d = topic("d");
    d["Properties"]["DisplayName"] = json!("Dee");
    let v2 = input(
        "app",
        json!({ "Resources": { "D": d, "E": queue("e", 30), "F": param("/f", r("E")) } }),
    );
    let report = deploy_ok(&rig, &v2).await;
    assert_eq!(
        (report.created, report.updated, report.deleted),
        (2, 1, 3),
        "{report:#?}"
    );
    let log = rig.cloud.call_log();
    assert_eq!(log.len(), 6, "{log:?}");
    let (c, b, a) = (
        position(&log, Op::Delete, "C"),
        position(&log, Op::Delete, "B"),
        position(&log, Op::Delete, "A"),
    );
    assert!(c < b && b < a, "dependents first: {log:?}");
    let last_write = [
        position(&log, Op::Update, "D"),
        position(&log, Op::Create, "E"),
        position(&log, Op::Create, "F"),
    ]
    .into_iter()
    .max()
    .unwrap_or_default();
    assert!(
        last_write < c,
        "deletes come after creates and updates: {log:?}"
    );
    let calls = rig.cloud.calls();
    for id in ["A", "B", "C"] {
        let call = &calls[position(&log, Op::Delete, id)];
        assert_eq!(
            call.physical_id.as_deref(),
            Some(before.resources[id].physical_id.as_str())
        );
    }
    let state = assert_settled(&rig, "app", &[]).await;
    assert_eq!(state.resources.keys().cloned().collect::<Vec<_>>().len(), 3);
    assert!(rig.cloud.physical_ids("app", "A").is_empty());
}

// ---------------------------------------------------------------------------------------
// 5. Retain policies
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn retain_policies_keep_removed_and_replaced_resources() {
    let rig = Rig::new();
    let v1 = input(
        "app",
        json!({
            "Resources": {
                "Keep": with(param("/keep", json!("k")), "DeletionPolicy", "Retain"),
                "Swap": with(queue("swap-1", 30), "UpdateReplacePolicy", "Retain"),
                "Plain": topic("plain"),
            }
        }),
    );
    deploy_ok(&rig, &v1).await;
    let before = rig.state("app").await;
    let seq = before.seq;
    rig.cloud.clear_calls();

    let v2 = input(
        "app",
        json!({
            "Resources": {
                "Swap": with(queue("swap-2", 30), "UpdateReplacePolicy", "Retain"),
                "Plain": topic("plain"),
            }
        }),
    );
    let report = deploy_ok(&rig, &v2).await;
    assert_eq!(
        (report.replaced, report.deleted, report.retained),
        (1, 0, 2),
        "{report:#?}"
    );
    assert_eq!(rig.cloud.call_log(), [(Op::Create, "Swap".to_string())]);

    // Both old resources still exist; the state has neither.
    let keep = &before.resources["Keep"].physical_id;
    let old_swap = &before.resources["Swap"].physical_id;
    let world = rig.cloud.world();
    assert!(world.contains_key(keep));
    assert!(world.contains_key(old_swap));
    assert_eq!(rig.cloud.physical_ids("app", "Swap").len(), 2);
    let retained: Vec<(String, String, bool)> = rig
        .events("app")
        .await
        .into_iter()
        .filter(|e| e.seq > seq)
        .filter_map(|e| match e.event {
            Event::ResourceRetained {
                logical_id,
                physical_id,
                replaced,
                ..
            } => Some((logical_id, physical_id, replaced)),
            _ => None,
        })
        .collect();
    assert_eq!(retained.len(), 2, "{retained:?}");
    assert!(retained.contains(&("Keep".into(), keep.clone(), false)));
    assert!(retained.contains(&("Swap".into(), old_swap.clone(), true)));
    let state = assert_settled(&rig, "app", &["Keep", "Swap"]).await;
    assert!(!state.resources.contains_key("Keep"));
    assert_ne!(&state.resources["Swap"].physical_id, old_swap);
}

// ---------------------------------------------------------------------------------------
// 9. Destroy
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn destroy_deletes_everything_dependents_first_and_honours_retain() {
    let rig = Rig::new();
    let v1 = input(
        "app",
        json!({
            "Resources": {
                "A": topic("a"),
                "B": param("/b", r("A")),
                "C": param("/c", r("B")),
                "K": with(queue("k", 30), "DeletionPolicy", "Retain"),
                "D": param("/d", arn("K")),
            },
            "Outputs": { "Out": { "Value": r("C") } }
        }),
    );
    deploy_ok(&rig, &v1).await;
    let before = rig.state("app").await;
    rig.cloud.clear_calls();

    let report = destroy_stack(rig.engine.clone(), "app", options())
        .await
        .expect("the destroy runs");
    assert_eq!(report.status, StackStatus::Succeeded, "{report:#?}");
    assert_eq!((report.deleted, report.retained), (4, 1));
    let log = rig.cloud.call_log();
    assert_eq!(log.len(), 4, "{log:?}");
    assert!(log.iter().all(|(op, _)| *op == Op::Delete));
    let (c, b, a) = (
        position(&log, Op::Delete, "C"),
        position(&log, Op::Delete, "B"),
        position(&log, Op::Delete, "A"),
    );
    assert!(c < b && b < a, "{log:?}");
    position(&log, Op::Delete, "D");

    // Only the retained queue is left in the world.
    let world = rig.cloud.world();
    assert_eq!(world.len(), 1, "{world:#?}");
    assert!(world.contains_key(&before.resources["K"].physical_id));

    let state = assert_settled(&rig, "app", &["K"]).await;
    assert!(state.resources.is_empty());
    assert!(state.outputs.is_empty());
    let types: Vec<&str> = rig.event_types_after("app", before.seq).await;
    assert!(types.contains(&"StackDestroyed"), "{types:?}");
    assert_eq!(
        types.iter().filter(|t| **t == "ResourceRetained").count(),
        1
    );

    // Destroying again: nothing to do.
    rig.cloud.clear_calls();
    let report = destroy_stack(rig.engine.clone(), "app", options())
        .await
        .expect("the destroy runs");
    assert_eq!(report.status, StackStatus::NoChanges);
    assert!(rig.cloud.calls().is_empty());
}

// ---------------------------------------------------------------------------------------
// 10. Nested stacks
// ---------------------------------------------------------------------------------------

fn shop() -> StackInput {
    let mut parent = input(
        "shop",
        json!({
            "Resources": {
                "Net": {
                    "Type": "AWS::CloudFormation::Stack",
                    "Properties": {
                        "TemplateURL": "https://example.com/net.json",
                        "Parameters": { "Prefix": "shop" }
                    }
                },
                "Consumer": param("/consumer", json!({ "Fn::GetAtt": ["Net", "Outputs.QueueArn"] })),
            },
            "Outputs": { "ChildQueue": { "Value": { "Fn::GetAtt": ["Net", "Outputs.QueueArn"] } } }
        }),
    );
    parent.nested.insert(
        "Net".into(),
        nested(
            "net.json",
            json!({
                "Parameters": { "Prefix": { "Type": "String" } },
                "Resources": {
                    "Queue": {
                        "Type": "AWS::SQS::Queue",
                        "Properties": { "QueueName": { "Fn::Sub": "${Prefix}-jobs" } }
                    },
                    "Alerts": topic("alerts"),
                },
                "Outputs": { "QueueArn": { "Value": arn("Queue") } }
            }),
        ),
    );
    parent
}

#[tokio::test]
async fn nested_stacks_deploy_as_child_stacks_and_go_with_their_parent() {
    let rig = Rig::new();
    let report = deploy_ok(&rig, &shop()).await;

    let (child_queue, queue) = rig.cloud.only("shop-Net", "Queue");
    assert_eq!(queue.properties["QueueName"], json!("shop-jobs"));
    rig.cloud.only("shop-Net", "Alerts");
    let queue_arn = json!(format!("arn:aws:fake:::{child_queue}"));
    let (_, consumer) = rig.cloud.only("shop", "Consumer");
    assert_eq!(consumer.properties["Value"], queue_arn);
    assert_eq!(report.outputs["ChildQueue"], queue_arn);
    let log = rig.cloud.call_log();
    assert!(position(&log, Op::Create, "Queue") < position(&log, Op::Create, "Consumer"));

    let child = assert_settled(&rig, "shop-Net", &[]).await;
    assert_eq!(child.resources.len(), 2);
    assert_eq!(child.outputs["QueueArn"], queue_arn);
    let parent = assert_settled(&rig, "shop", &[]).await;
    let net = &parent.resources["Net"];
    assert_eq!(net.physical_id, "shop-Net");
    assert_eq!(net.attributes["Outputs.QueueArn"], queue_arn);

    // A second deploy changes nothing, in the parent or the child.
    rig.cloud.clear_calls();
    let again = deploy(&rig, &shop()).await;
    assert_eq!(again.status, StackStatus::NoChanges);
    assert!(rig.cloud.calls().is_empty());

    // Destroying the parent destroys the child, after the parent's consumer of it.
    let report = destroy_stack(rig.engine.clone(), "shop", options())
        .await
        .expect("the destroy runs");
    assert_eq!(report.status, StackStatus::Succeeded, "{report:#?}");
    assert!(rig.cloud.world().is_empty(), "{:#?}", rig.cloud.world());
    let log = rig.cloud.call_log();
    assert!(position(&log, Op::Delete, "Consumer") < position(&log, Op::Delete, "Queue"));
    for stack in ["shop", "shop-Net"] {
        let state = assert_settled(&rig, stack, &[]).await;
        assert!(state.resources.is_empty(), "{stack}");
        assert!(
            rig.event_types_after(stack, 0)
                .await
                .contains(&"StackDestroyed"),
            "{stack}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// 11. The stop signal
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn stop_lets_the_running_call_finish_and_starts_nothing_new() {
    let rig = Rig::new();
    let v1 = input(
        "app",
        json!({
            "Resources": {
                "A": queue("a", 30),
                "B": param("/b", arn("A")),
                "C": param("/c", r("B")),
            }
        }),
    );
    let gate = rig.cloud.block_once(Op::Create, "A");
    let (stop, opts) = stoppable();
    let running = tokio::spawn(deploy_stack(rig.engine.clone(), v1.clone(), opts));
    gate.entered().await;
    stop.send(true).expect("the deploy listens");
    // Let the scheduler see the signal before the call returns.
    tokio::time::sleep(Duration::from_millis(50)).await;
    gate.release();
    let report = running
        .await
        .expect("the deploy task ends")
        .expect("the deploy runs");
    assert_eq!(report.status, StackStatus::Interrupted, "{report:#?}");
    assert_eq!(report.created, 1);
    assert!(
        report.rollback.is_none(),
        "a stopped deploy is not rolled back"
    );
    assert_eq!(rig.cloud.call_log(), [(Op::Create, "A".to_string())]);

    // The call that ran is recorded; the lock is free.
    let state = rig.state("app").await;
    assert!(state.pending.is_empty());
    assert_eq!(state.lock, None);
    assert_eq!(rig.lock_holder("app").await, None);
    let (a, _) = rig.cloud.only("app", "A");
    assert_eq!(state.resources["A"].physical_id, a);
    assert_eq!(state.resources.len(), 1);

    // The next deploy goes on from there.
    rig.cloud.clear_calls();
    let report = deploy_ok(&rig, &v1).await;
    assert_eq!(report.created, 2);
    assert_eq!(
        rig.cloud.call_log(),
        [(Op::Create, "B".to_string()), (Op::Create, "C".to_string())]
    );
    assert_eq!(rig.cloud.only("app", "A").0, a);
    let state = assert_settled(&rig, "app", &[]).await;
    assert_eq!(state.resources.len(), 3);
}

// ---------------------------------------------------------------------------------------
// 12. A panic in a provider call
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn a_panic_in_a_provider_call_fails_the_deploy_and_releases_the_lock() {
    let rig = Rig::new();
    let v1 = input(
        "app",
        json!({ "Resources": { "A": queue("a", 30), "B": param("/b", arn("A")) } }),
    );
    rig.cloud.panic_once(Op::Create, "B");
    let report = deploy(&rig, &v1).await;
    assert_eq!(report.status, StackStatus::Failed, "{report:#?}");
    let state = rig.state("app").await;
    assert_ne!(
        state.last_deploy.as_ref().map(|d| d.status),
        Some(DeployStatus::Completed)
    );
    assert!(
        !rig.event_types_after("app", 0)
            .await
            .contains(&"DeployCompleted")
    );
    assert_eq!(state.lock, None);
    assert_eq!(rig.lock_holder("app").await, None);

    // The next deploy makes B, once.
    let report = deploy_ok(&rig, &v1).await;
    assert_eq!(report.status, StackStatus::Succeeded);
    rig.cloud.only("app", "A");
    rig.cloud.only("app", "B");
    assert_settled(&rig, "app", &[]).await;
}

// ---------------------------------------------------------------------------------------
// Snapshots
// ---------------------------------------------------------------------------------------

/// The snapshot is of the log before the deploy's last write (its outcome and the
/// release of the lock, written beside it): the fold of every event up to the position it
/// names, and a load from it agrees with the fold of the whole stream.
#[tokio::test]
async fn a_finished_deploy_writes_a_snapshot_equal_to_the_full_fold() {
    let rig = Rig::new();
    let v1 = input(
        "app",
        json!({ "Resources": { "A": topic("a"), "B": param("/b", r("A")) } }),
    );
    deploy_ok(&rig, &v1).await;
    let v2 = input(
        "app",
        json!({ "Resources": { "A": topic("a"), "C": param("/c", r("A")) } }),
    );
    deploy_ok(&rig, &v2).await;
    let stream = rig.stream("app");
    let (seq, body) = rig
        .store
        .latest_snapshot(&stream)
        .await
        .unwrap()
        .expect("the deploy wrote a snapshot");
    let events = rig.events("app").await;
    let fold = StackState::fold(&events);
    let before: Vec<_> = events.iter().filter(|e| e.seq <= seq).cloned().collect();
    let after: Vec<&str> = events
        .iter()
        .filter(|e| e.seq > seq)
        .map(|e| e.event.type_name())
        .collect();
    assert_eq!(
        after,
        ["DeployCompleted", "LockReleased"],
        "the snapshot covers all but the last write"
    );
    let snapshot = StackState::from_snapshot(&body).expect("a readable snapshot");
    assert_eq!(snapshot, StackState::fold(&before));
    // A load starts from it and agrees too.
    let loaded = stackflow_events::load_state(rig.store.as_ref(), &stream)
        .await
        .unwrap();
    assert_eq!(loaded, fold);
}

// ---------------------------------------------------------------------------------------
// AWS::StackId
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn the_stack_id_is_made_once_and_kept_for_the_stack_s_lifetime() {
    let rig = Rig::new();
    let with_id = |extra: bool| {
        let mut resources = json!({ "Id": param("/id", json!({"Ref": "AWS::StackId"})) });
        if extra {
            resources["B"] = topic("b");
        }
        input("app", json!({ "Resources": resources }))
    };
    deploy_ok(&rig, &with_id(false)).await;
    let id = rig.state("app").await.stack_id.expect("recorded");
    let prefix = "arn:aws:cloudformation:us-east-1:123456789012:stack/app/";
    assert!(id.starts_with(prefix), "{id}");
    let sent = |rig: &Rig| {
        rig.cloud
            .calls()
            .iter()
            .filter(|c| c.logical_id == "Id")
            .map(|c| c.properties["Value"].clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(sent(&rig), vec![json!(id.clone())]);
    // A later deploy resolves the same id: the parameter does not change.
    deploy_ok(&rig, &with_id(true)).await;
    assert_eq!(
        rig.state("app").await.stack_id.as_deref(),
        Some(id.as_str())
    );
    assert_eq!(sent(&rig).len(), 1, "Id was not updated");
    // A destroyed stack deployed again is a new stack, with a new id.
    destroy_stack(rig.engine.clone(), "app", options())
        .await
        .unwrap();
    deploy_ok(&rig, &with_id(false)).await;
    let again = rig.state("app").await.stack_id.expect("recorded");
    assert_ne!(again, id);
}

// ---------------------------------------------------------------------------------------
// Checks before the first write
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn a_template_that_cannot_be_deployed_changes_nothing() {
    let rig = Rig::new();
    let bad = input(
        "app",
        json!({
            "Resources": {
                "A": topic("a"),
                "Unserved": { "Type": support::UNSERVED_TYPE, "Properties": {} },
                "BadRef": param("/bad", json!("{{resolve:nope:x}}")),
                "Missing": param("/m", json!({"Fn::GetStackOutput": {
                    "StackName": "not-there", "OutputName": "Out"
                }})),
            },
            "Outputs": { "Shared": { "Value": {"Fn::ImportValue": "nobody-exports-this"} } }
        }),
    );
    let err = deploy_stack(rig.engine.clone(), bad.clone(), options())
        .await
        .expect_err("refused");
    let text = err.to_string();
    for what in [
        "nothing was changed",
        "Resources.Unserved",
        "Resources.BadRef.Properties",
        "Resources.Missing.Properties: output Out of stack not-there",
        "Outputs.Shared.Value: export nobody-exports-this",
    ] {
        assert!(text.contains(what), "{what} missing from: {text}");
    }
    assert!(rig.cloud.calls().is_empty(), "no provider call");
    assert!(rig.events("app").await.is_empty(), "nothing appended");
    // The diff lists the same problems.
    let (_, problems) = rig.engine.preview(&bad, false).await.unwrap();
    assert_eq!(problems.len(), 4, "{problems:#?}");
}
