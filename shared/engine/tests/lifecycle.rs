//! The engine's lifecycle, end to end and in-process: deploys, updates, replacements,
//! deletes, retain policies, failures and rollbacks, crashes after every append,
//! destroys, nested stacks, the stop signal and a panicking provider, against a fake
//! cloud (`support::FakeCloud`) and an in-memory event store. Each test looks at the
//! world (what exists in the fake cloud), the recorded state (a fold of the store), the
//! report and the provider's call log.

mod support;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::{Value, json};
use stackflow_engine::stack::StackInput;
use stackflow_engine::{StackStatus, deploy_stack, destroy_stack, rollback_stack};
use stackflow_events::EventStore;
use stackflow_events::event::Event;
use stackflow_events::projection::{DeployStatus, StackState};
use support::{CallResult, Op, Rig, deploy, deploy_ok, input, nested, options, param, stoppable};

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

fn r(id: &str) -> Value {
    json!({ "Ref": id })
}

fn arn(id: &str) -> Value {
    json!({ "Fn::GetAtt": [id, "Arn"] })
}

fn topic(name: &str) -> Value {
    json!({ "Type": "AWS::SNS::Topic", "Properties": { "TopicName": name } })
}

fn queue(name: &str, visibility: u64) -> Value {
    json!({
        "Type": "AWS::SQS::Queue",
        "Properties": { "QueueName": name, "VisibilityTimeout": visibility }
    })
}

fn join(parts: Vec<Value>) -> Value {
    json!({ "Fn::Join": ["|", parts] })
}

fn with(mut resource: Value, key: &str, value: &str) -> Value {
    resource[key] = json!(value);
    resource
}

fn position(log: &[(Op, String)], op: Op, id: &str) -> usize {
    log.iter()
        .position(|(o, i)| *o == op && i == id)
        .unwrap_or_else(|| panic!("no {op:?} of {id} in {log:?}"))
}

/// What every run must leave: nothing pending, no predecessor, no lock (in the log and
/// in the store), a state that passes its integrity check, and a state that matches the
/// world: every recorded resource exists with the recorded type and properties, and the
/// world holds nothing else of the stack but the resources in `kept` (retained ones).
async fn assert_settled(rig: &Rig, stack: &str, kept: &[&str]) -> StackState {
    let state = assert_settled_but_lock(rig, stack, kept).await;
    assert_eq!(state.lock, None, "the log says the lock is held");
    assert_eq!(
        rig.lock_holder(stack).await,
        None,
        "the store says the lock is held"
    );
    state
}

/// [`assert_settled`] without the lock.
async fn assert_settled_but_lock(rig: &Rig, stack: &str, kept: &[&str]) -> StackState {
    let state = rig.state(stack).await;
    assert!(state.pending.is_empty(), "pending: {:#?}", state.pending);
    assert!(
        state.predecessors.is_empty(),
        "predecessors: {:#?}",
        state.predecessors
    );
    state.check_integrity().expect("state integrity");
    let world = rig.cloud.world();
    for (id, r) in &state.resources {
        if r.resource_type == "AWS::CloudFormation::Stack" {
            continue;
        }
        let thing = world.get(&r.physical_id).unwrap_or_else(|| {
            panic!(
                "{stack}/{id} ({}) is recorded but does not exist",
                r.physical_id
            )
        });
        assert_eq!(thing.logical_id, *id);
        assert_eq!(thing.resource_type, r.resource_type);
        assert_eq!(
            thing.properties, r.properties,
            "{stack}/{id}: world vs state"
        );
    }
    for (p, thing) in world.iter().filter(|(_, t)| t.stack == stack) {
        let recorded = state
            .resources
            .get(&thing.logical_id)
            .is_some_and(|r| r.physical_id == *p);
        assert!(
            recorded || kept.contains(&thing.logical_id.as_str()),
            "{stack}/{} ({p}) exists but is not recorded: an orphan",
            thing.logical_id
        );
    }
    state
}

fn resource_ids(state: &StackState) -> BTreeMap<String, String> {
    state
        .resources
        .iter()
        .map(|(k, r)| (k.clone(), r.physical_id.clone()))
        .collect()
}

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
// 6 and 7. Failure and rollback
// ---------------------------------------------------------------------------------------

fn base() -> StackInput {
    input(
        "app",
        json!({ "Resources": { "A": queue("a", 30), "B": topic("b") } }),
    )
}

/// Updates A, replaces B, creates C and D, and then E, which depends on all of them.
fn failing_change() -> StackInput {
    input(
        "app",
        json!({
            "Resources": {
                "A": queue("a", 60),
                "B": topic("b-2"),
                "C": topic("c"),
                "D": param("/d", r("C")),
                "E": param("/e", join(vec![r("A"), r("B"), r("D")])),
            }
        }),
    )
}

/// After the rollback of [`failing_change`] over [`base`]: the world and the state as
/// they were, and the undo calls as they should be.
async fn assert_rolled_back(
    rig: &Rig,
    world_before: &BTreeMap<String, support::Thing>,
    state_before: &StackState,
) {
    assert_eq!(&rig.cloud.world(), world_before, "the world is back to v1");
    let state = assert_settled(rig, "app", &[]).await;
    assert_eq!(resource_ids(&state), resource_ids(state_before));
    for (id, r) in &state_before.resources {
        assert_eq!(state.resources[id].properties, r.properties, "{id}");
    }
    assert_eq!(
        state.last_deploy.as_ref().map(|d| d.status),
        Some(DeployStatus::RolledBack)
    );
    let calls = rig.cloud.calls();
    let restore = calls
        .iter()
        .filter(|c| c.op == Op::Update && c.logical_id == "A" && c.result == CallResult::Ok)
        .find(|c| c.properties["VisibilityTimeout"] == json!(30))
        .expect("A restored to its previous properties");
    assert_eq!(
        restore
            .previous
            .as_ref()
            .map(|p| p["VisibilityTimeout"].clone()),
        Some(json!(60))
    );
    // The new B, C and D are deleted; the old B is not touched.
    let deleted: Vec<&str> = calls
        .iter()
        .filter(|c| c.op == Op::Delete)
        .map(|c| c.logical_id.as_str())
        .collect();
    let mut sorted = deleted.clone();
    sorted.sort();
    assert_eq!(sorted, ["B", "C", "D"]);
    let old_b = &state_before.resources["B"].physical_id;
    assert!(
        calls
            .iter()
            .all(|c| !(c.op == Op::Delete && c.physical_id.as_ref() == Some(old_b)))
    );
    // Last first: D (made after C) goes before C.
    let d = deleted.iter().position(|x| *x == "D");
    let c = deleted.iter().position(|x| *x == "C");
    assert!(d < c, "{deleted:?}");
}

#[tokio::test]
async fn a_failed_create_rolls_back_what_the_deploy_did() {
    let rig = Rig::new();
    deploy_ok(&rig, &base()).await;
    let world_before = rig.cloud.world();
    let state_before = rig.state("app").await;
    rig.cloud.clear_calls();
    rig.cloud.fail_always(Op::Create, "E");

    let report = deploy(&rig, &failing_change()).await;
    assert_eq!(report.status, StackStatus::Failed, "{report:#?}");
    assert_eq!(report.failures.len(), 1, "{report:#?}");
    assert_eq!(report.failures[0].logical_id, "E");
    assert_eq!(report.failures[0].action, "create");
    let rollback = report.rollback.as_ref().expect("a rollback ran");
    assert!(rollback.complete(), "{rollback:#?}");
    let mut undone: Vec<(String, String)> = rollback.undone.clone();
    undone.sort();
    assert_eq!(
        undone,
        [
            ("A".to_string(), "restored".to_string()),
            ("B".to_string(), "deleted".to_string()),
            ("C".to_string(), "deleted".to_string()),
            ("D".to_string(), "deleted".to_string()),
        ]
    );
    // E was tried after everything it depends on was done.
    let log = rig.cloud.call_log();
    let e = position(&log, Op::Create, "E");
    for (op, id) in [
        (Op::Update, "A"),
        (Op::Create, "B"),
        (Op::Create, "C"),
        (Op::Create, "D"),
    ] {
        assert!(position(&log, op, id) < e, "{log:?}");
    }
    assert_rolled_back(&rig, &world_before, &state_before).await;
}

#[tokio::test]
async fn no_rollback_keeps_the_failure_until_rollback_undoes_it() {
    let rig = Rig::new();
    deploy_ok(&rig, &base()).await;
    let world_before = rig.cloud.world();
    let state_before = rig.state("app").await;
    rig.cloud.clear_calls();
    rig.cloud.fail_always(Op::Create, "E");

    let mut opts = options();
    opts.no_rollback = true;
    let report = deploy_stack(rig.engine.clone(), failing_change(), opts)
        .await
        .expect("the deploy runs");
    assert_eq!(report.status, StackStatus::Failed);
    assert!(report.rollback.is_none());
    assert!(
        !rig.cloud.calls().iter().any(|c| c.op == Op::Delete),
        "nothing undone yet"
    );
    // What the deploy did stays, recorded; the lock is free.
    assert_eq!(rig.cloud.physical_ids("app", "B").len(), 2);
    let kept = assert_settled_but_predecessors(&rig).await;
    assert_eq!(
        kept.last_deploy.as_ref().map(|d| d.status),
        Some(DeployStatus::Failed)
    );
    assert_eq!(kept.journal.to_undo().count(), 4);

    let report = rollback_stack(rig.engine.clone(), "app")
        .await
        .expect("the rollback runs");
    assert_eq!(report.status, StackStatus::Succeeded, "{report:#?}");
    assert_eq!(
        report.rollback.as_ref().map(|r| r.undone.len()),
        Some(4),
        "{report:#?}"
    );
    assert_rolled_back(&rig, &world_before, &state_before).await;

    // A second rollback finds nothing to do.
    rig.cloud.clear_calls();
    let report = rollback_stack(rig.engine.clone(), "app")
        .await
        .expect("the rollback runs");
    assert_eq!(report.status, StackStatus::NoChanges, "{report:#?}");
    assert!(rig.cloud.calls().is_empty());
    assert_eq!(rig.cloud.world(), world_before);
    assert_eq!(rig.lock_holder("app").await, None);
}

/// The state after a failed deploy kept with `--no-rollback`: nothing pending, the lock
/// free, every recorded resource in the world (the replaced B's old copy waits as a
/// predecessor).
async fn assert_settled_but_predecessors(rig: &Rig) -> StackState {
    let state = rig.state("app").await;
    assert!(state.pending.is_empty(), "pending: {:#?}", state.pending);
    assert_eq!(state.lock, None);
    assert_eq!(rig.lock_holder("app").await, None);
    let world = rig.cloud.world();
    for r in state.resources.values() {
        assert!(world.contains_key(&r.physical_id));
    }
    assert_eq!(state.predecessors.len(), 1);
    state
}

// ---------------------------------------------------------------------------------------
// 8. A crash after every append
// ---------------------------------------------------------------------------------------

fn crash_v1() -> StackInput {
    input(
        "crash",
        json!({
            "Resources": {
                "R0": topic("t0"),
                "R1": queue("q1", 30),
                "R2": param("/r2", r("R0")),
                "R3": param("/r3", arn("R1")),
                "R4": queue("q4", 30),
                "R5": queue("q5", 30),
                "R6": param("/r6", arn("R5")),
                "R7": topic("t7"),
                "R8": param("/r8", r("R7")),
                "R9": param("/r9", join(vec![r("R2"), r("R3")])),
            },
            "Outputs": { "Five": { "Value": arn("R5") } }
        }),
    )
}

/// R4 updated, R5 replaced (and R6 updated after it), R7 and R8 removed, R10 and R11
/// new: ten resources.
fn crash_v2() -> StackInput {
    input(
        "crash",
        json!({
            "Resources": {
                "R0": topic("t0"),
                "R1": queue("q1", 30),
                "R2": param("/r2", r("R0")),
                "R3": param("/r3", arn("R1")),
                "R4": queue("q4", 45),
                "R5": queue("q5-b", 30),
                "R6": param("/r6", arn("R5")),
                "R9": param("/r9", join(vec![r("R2"), r("R3")])),
                "R10": topic("t10"),
                "R11": param("/r11", r("R10")),
            },
            "Outputs": { "Five": { "Value": arn("R5") } }
        }),
    )
}

/// The state's resources with physical ids taken out, as `FakeCloud::contents` does.
fn normalized_state(rig: &Rig, state: &StackState) -> Vec<(String, Value, Value)> {
    let world = rig.cloud.world();
    let name = |p: &str| {
        world
            .get(p)
            .map(|t| format!("<{}/{}>", t.stack, t.logical_id))
            .unwrap_or_else(|| format!("missing {p}"))
    };
    let mut out: Vec<(String, Value, Value)> = state
        .resources
        .iter()
        .map(|(id, r)| {
            let mut text = serde_json::to_string(&r.properties).unwrap_or_default();
            for p in world.keys() {
                text = text.replace(p.as_str(), &name(p));
            }
            (
                id.clone(),
                json!(name(&r.physical_id)),
                serde_json::from_str(&text).unwrap_or(Value::Null),
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[tokio::test]
async fn a_crash_after_any_append_is_recovered_by_the_next_deploy() {
    // The clean run: what v2 does, and how many appends it makes.
    let clean = Rig::new();
    deploy_ok(&clean, &crash_v1()).await;
    clean.cloud.clear_calls();
    let start = clean.store.appends();
    deploy_ok(&clean, &crash_v2()).await;
    let total = clean.store.appends() - start;
    let clean_world = clean.cloud.contents();
    let clean_state = clean.state("crash").await;
    let clean_resources = normalized_state(&clean, &clean_state);
    let clean_creates = {
        let mut v: Vec<String> = clean
            .cloud
            .calls()
            .into_iter()
            .filter(|c| c.op == Op::Create && c.result == CallResult::Ok)
            .map(|c| c.logical_id)
            .collect();
        v.sort();
        v
    };
    assert_eq!(clean_creates, ["R10", "R11", "R5"]);
    assert!(total > 10, "{total} appends");

    for n in 0..=total {
        // Shown when an assertion below fails.
        eprintln!("crash after {n} of {total} appends");
        let rig = Rig::new();
        rig.holders_gone.store(true, Ordering::SeqCst);
        deploy_ok(&rig, &crash_v1()).await;
        rig.cloud.clear_calls();
        rig.store.fail_after(n);
        let crashed = deploy_stack(rig.engine.clone(), crash_v2(), options()).await;
        if n < total {
            assert!(crashed.is_err(), "n = {n}: {crashed:#?}");
        } else {
            let report = crashed.expect("no fault within the deploy");
            assert_eq!(report.status, StackStatus::Succeeded);
        }
        rig.store.heal();
        let report = deploy_stack(rig.engine.clone(), crash_v2(), options())
            .await
            .unwrap_or_else(|e| panic!("n = {n}: the deploy after the crash: {e}"));
        assert!(
            matches!(
                report.status,
                StackStatus::Succeeded | StackStatus::NoChanges
            ),
            "n = {n}: {report:#?}\n{:#?}",
            rig.lines.all()
        );
        assert_eq!(
            rig.cloud.contents(),
            clean_world,
            "n = {n}: the world differs from a clean deploy's"
        );
        // A crash between `DeployCompleted` and `LockReleased` leaves a lock that the next
        // deploy (no changes) does not release: an engine bug, pinned by
        // `a_crash_between_completed_and_released_leaves_no_lock`; every other check holds.
        let state = if n + 1 == total {
            assert_settled_but_lock(&rig, "crash", &[]).await
        } else {
            assert_settled(&rig, "crash", &[]).await
        };
        assert_eq!(
            state.last_deploy.as_ref().map(|d| d.status),
            Some(DeployStatus::Completed),
            "n = {n}"
        );
        assert_eq!(
            normalized_state(&rig, &state),
            clean_resources,
            "n = {n}: the state differs from a clean deploy's"
        );
        let mut creates: Vec<String> = rig
            .cloud
            .calls()
            .into_iter()
            .filter(|c| c.op == Op::Create && c.result == CallResult::Ok)
            .map(|c| c.logical_id)
            .collect();
        creates.sort();
        assert_eq!(
            creates, clean_creates,
            "n = {n}: one resource made per create"
        );
        let (five, _) = rig.cloud.only("crash", "R5");
        assert_eq!(
            state.outputs["Five"],
            json!(format!("arn:aws:fake:::{five}")),
            "n = {n}"
        );
    }
}

/// The same for a deploy that fails and rolls back: a crash after any append of the
/// deploy or of its rollback, then `rollback`, leaves the world and the state as they
/// were before the deploy.
#[tokio::test]
async fn a_crash_after_any_append_of_a_failing_deploy_is_rolled_back_by_rollback() {
    let clean = Rig::new();
    deploy_ok(&clean, &base()).await;
    clean.cloud.fail_always(Op::Create, "E");
    let start = clean.store.appends();
    let report = deploy(&clean, &failing_change()).await;
    assert_eq!(report.status, StackStatus::Failed);
    let total = clean.store.appends() - start;

    for n in 0..=total {
        eprintln!("crash after {n} of {total} appends");
        let rig = Rig::new();
        rig.holders_gone.store(true, Ordering::SeqCst);
        deploy_ok(&rig, &base()).await;
        let world_before = rig.cloud.world();
        let state_before = rig.state("app").await;
        rig.cloud.fail_always(Op::Create, "E");
        rig.store.fail_after(n);
        let crashed = deploy_stack(rig.engine.clone(), failing_change(), options()).await;
        assert_eq!(crashed.is_err(), n < total, "n = {n}: {crashed:#?}");
        rig.store.heal();
        let report = rollback_stack(rig.engine.clone(), "app")
            .await
            .unwrap_or_else(|e| panic!("n = {n}: the rollback after the crash: {e}"));
        assert!(
            matches!(
                report.status,
                StackStatus::Succeeded | StackStatus::NoChanges
            ),
            "n = {n}: {report:#?}\n{:#?}",
            rig.lines.all()
        );
        assert_eq!(
            rig.cloud.world(),
            world_before,
            "n = {n}: the world is back"
        );
        let state = assert_settled(&rig, "app", &[]).await;
        assert_eq!(resource_ids(&state), resource_ids(&state_before), "n = {n}");
        for (id, r) in &state_before.resources {
            assert_eq!(
                state.resources[id].properties, r.properties,
                "n = {n}: {id}"
            );
        }
        assert!(state.journal.to_undo().next().is_none(), "n = {n}");
        // And the stack deploys again.
        rig.cloud.clear_calls();
        let report = deploy(&rig, &base()).await;
        assert!(
            matches!(
                report.status,
                StackStatus::Succeeded | StackStatus::NoChanges
            ),
            "n = {n}: {report:#?}"
        );
        assert!(
            rig.cloud.calls().is_empty(),
            "n = {n}: {:?}",
            rig.cloud.call_log()
        );
    }
}

#[tokio::test]
async fn a_crash_between_completed_and_released_leaves_no_lock() {
    let rig = Rig::new();
    rig.holders_gone.store(true, Ordering::SeqCst);
    let v1 = input("app", json!({ "Resources": { "A": topic("a") } }));
    // Every append of the deploy but the last (`LockReleased`) goes through.
    let start = rig.store.appends();
    deploy_ok(&rig, &v1).await;
    let total = rig.store.appends() - start;
    let v2 = input(
        "app",
        json!({ "Resources": { "A": topic("a"), "B": topic("b") } }),
    );
    // v2 makes as many appends as v1 (one resource created each).
    rig.store.fail_after(total - 1);
    assert!(
        deploy_stack(rig.engine.clone(), v2.clone(), options())
            .await
            .is_err()
    );
    rig.store.heal();
    assert_eq!(
        rig.event_types_after("app", 0).await.last(),
        Some(&"DeployCompleted")
    );
    // The stack is deployed as v2 says, but the crashed run still holds the lock: the
    // next deploy of v2 does not take the no-change shortcut; it breaks the dead run's
    // lock, changes no resource, and leaves the stack unlocked.
    let calls = rig.cloud.calls().len();
    let report = deploy(&rig, &v2).await;
    assert_eq!(report.status, StackStatus::Succeeded);
    assert_eq!((report.created, report.updated, report.deleted), (0, 0, 0));
    assert_eq!(rig.cloud.calls().len(), calls, "no provider call");
    assert_settled(&rig, "app", &[]).await;
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
    let fold = StackState::fold(&rig.events("app").await);
    assert_eq!(seq, fold.seq, "the snapshot covers the whole stream");
    let snapshot = StackState::from_snapshot(&body).expect("a readable snapshot");
    assert_eq!(snapshot, fold);
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
