//! The Step Functions handlers' bounds, in-process: a failed deploy waits for the calls
//! its stopped iterations may still be making before it undoes, and a task that runs out
//! of time stops and is resumed by the next one.

mod support;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::json;
use stackflow_engine::deploy::{Deployment, Started, TASK_BOUND};
use stackflow_engine::sfn::deadline::within;
use stackflow_engine::{
    EngineError, StackStatus, deploy_stack, destroy_stack_as, rollback_stack_as,
};
use stackflow_events::{Event, StoreError};
use support::*;

async fn begin(rig: &Rig, i: &stackflow_engine::stack::StackInput) -> Arc<Deployment<FaultStore>> {
    let (d, _) = Deployment::begin(rig.engine.clone(), i.clone(), options())
        .await
        .expect("the deploy begins");
    Arc::new(d.expect("there is something to do"))
}

fn two_queues() -> serde_json::Value {
    json!({"Resources": {
        "Slow": {"Type": "AWS::SQS::Queue"},
        "Bad": {"Type": "AWS::SQS::Queue"}
    }})
}

/// Slow's call is running when Bad fails: Fail is told to wait; once the call ended, the
/// deploy is failed and its rollback deletes what the late call made.
#[tokio::test]
async fn a_failed_deploy_waits_for_a_running_call_and_undoes_what_it_made() {
    let rig = Rig::new();
    let i = input("late", two_queues());
    let gate = rig.cloud.block_once(Op::Create, "Slow");
    rig.cloud.fail_once(Op::Create, "Bad");
    let d = begin(&rig, &i).await;
    let slow = tokio::spawn({
        let d = d.clone();
        async move { d.provision("Slow").await }
    });
    gate.entered().await;
    assert!(d.provision("Bad").await.unwrap().is_err(), "Bad failed");
    let now = SystemTime::now();
    assert_eq!(
        d.settle_started(now, TASK_BOUND).await.unwrap(),
        Started::Running(vec!["Slow".into()]),
        "Slow's intent is young and has no outcome: its call may still be running"
    );
    gate.release();
    assert!(slow.await.unwrap().unwrap().is_ok(), "Slow was created");
    assert_eq!(
        d.settle_started(SystemTime::now(), TASK_BOUND)
            .await
            .unwrap(),
        Started::Settled(0)
    );
    d.fail(None, "an action failed", true).await.unwrap();
    assert!(
        rig.cloud.world().is_empty(),
        "the rollback deleted what the late call made: {:#?}",
        rig.cloud.world()
    );
    let state = rig.state("late").await;
    assert!(state.pending.is_empty() && state.lock.is_none());
}

/// Fail fences the lock first: an action that had not begun by then (an iteration the
/// failed `Map` did not stop in time) is refused its intent and calls nothing, while the
/// call already running records its outcome, and the rollback undoes it.
#[tokio::test]
async fn a_fenced_deploy_begins_no_action_and_the_running_one_still_lands() {
    let rig = Rig::new();
    let i = input(
        "fence",
        json!({"Resources": {
            "Slow": {"Type": "AWS::SQS::Queue"},
            "Bad": {"Type": "AWS::SQS::Queue"},
            "Late": {"Type": "AWS::SQS::Queue"}
        }}),
    );
    let gate = rig.cloud.block_once(Op::Create, "Slow");
    rig.cloud.fail_once(Op::Create, "Bad");
    let (d, _) = Deployment::begin(rig.engine.clone(), i.clone(), options())
        .await
        .expect("the deploy begins");
    let mut d = d.expect("there is something to do");
    d.fenced_by_lock = true;
    let d = Arc::new(d);
    let slow = tokio::spawn({
        let d = d.clone();
        async move { d.provision("Slow").await }
    });
    gate.entered().await;
    assert!(d.provision("Bad").await.unwrap().is_err(), "Bad failed");
    d.fence().await.expect("the holder fences its lock");
    d.fence().await.expect("a retried Fail fences again");
    let lock = rig.state("fence").await.lock.expect("still held");
    assert!(lock.fenced.is_some(), "the fold shows the fence: {lock:?}");
    match d.provision("Late").await {
        Err(EngineError::Store(StoreError::Fenced { deploy_id })) => {
            assert_eq!(deploy_id, d.deploy_id)
        }
        other => panic!("an action after the fence must be refused, got {other:?}"),
    }
    let late_intent = rig.events("fence").await.into_iter().any(
        |e| matches!(&e.event, Event::ResourceIntent { logical_id, .. } if logical_id == "Late"),
    );
    assert!(!late_intent, "no intent of Late is recorded");
    assert!(
        !rig.cloud.calls().iter().any(|c| c.logical_id == "Late"),
        "no call was made for Late"
    );
    assert!(
        rig.cloud.physical_ids("fence", "Late").is_empty(),
        "Late was never created: {:#?}",
        rig.cloud.world()
    );
    assert_eq!(
        d.settle_started(SystemTime::now(), TASK_BOUND)
            .await
            .unwrap(),
        Started::Running(vec!["Slow".into()]),
        "the call that began before the fence is waited for"
    );
    gate.release();
    assert!(
        slow.await.unwrap().unwrap().is_ok(),
        "Slow's outcome is recorded under the fenced lock"
    );
    assert_eq!(
        d.settle_started(SystemTime::now(), TASK_BOUND)
            .await
            .unwrap(),
        Started::Settled(0)
    );
    d.fail(None, "an action failed", true).await.unwrap();
    assert!(rig.cloud.world().is_empty(), "{:#?}", rig.cloud.world());
    let state = rig.state("fence").await;
    assert!(state.pending.is_empty() && state.lock.is_none());
}

/// A call cut off without an outcome (its task died) is not waited for past a task's
/// longest run: it is replayed with its own token, recorded, and undone with the rest.
#[tokio::test]
async fn an_intent_older_than_any_task_is_settled_and_undone() {
    let rig = Rig::new();
    let i = input("cut", two_queues());
    let gate = rig.cloud.block_once(Op::Create, "Slow");
    rig.cloud.fail_once(Op::Create, "Bad");
    let d = begin(&rig, &i).await;
    let slow = tokio::spawn({
        let d = d.clone();
        async move { d.provision("Slow").await }
    });
    gate.entered().await;
    slow.abort();
    let _ = slow.await;
    assert!(d.provision("Bad").await.unwrap().is_err());
    let later = SystemTime::now() + TASK_BOUND + Duration::from_secs(1);
    assert_eq!(
        d.settle_started(later, TASK_BOUND).await.unwrap(),
        Started::Settled(1)
    );
    let created = rig.events("cut").await.into_iter().any(|e| {
        matches!(&e.event, Event::ResourceCreated { resource, .. } if resource.logical_id == "Slow")
    });
    assert!(created, "the replay of Slow's call is recorded");
    d.fail(None, "an action failed", true).await.unwrap();
    assert!(rig.cloud.world().is_empty(), "{:#?}", rig.cloud.world());
    let state = rig.state("cut").await;
    assert!(state.pending.is_empty(), "{:?}", state.pending);
}

/// A create that outlives the task's deadline (its request made, its answer not yet
/// there) is cut; the next run of the same action finds its own intent and replays the
/// call with the same token: the provider answers with what the first call made, and
/// nothing is made twice.
#[tokio::test]
async fn an_action_cut_at_its_deadline_is_resumed_by_the_next_run() {
    let rig = Rig::new();
    let i = input(
        "resume",
        json!({"Resources": {"Slow": {"Type": "AWS::SQS::Queue"}}}),
    );
    let _slow = rig.cloud.slow_once(Op::Create, "Slow");
    let d = begin(&rig, &i).await;
    let first = within(Duration::from_millis(50), d.provision("Slow")).await;
    assert!(first.is_none(), "the first run is cut at its deadline");
    let state = rig.state("resume").await;
    assert_eq!(state.pending.len(), 1, "its intent has no outcome yet");
    assert!(!state.resources.contains_key("Slow"));
    let again = within(Duration::from_secs(10), d.provision("Slow"))
        .await
        .expect("the second run ends in time")
        .unwrap();
    assert!(again.is_ok(), "{again:?}");
    let (physical, _) = rig.cloud.only("resume", "Slow");
    let calls = rig.cloud.calls();
    let results: Vec<&CallResult> = calls.iter().map(|c| &c.result).collect();
    assert_eq!(results, [&CallResult::Ok, &CallResult::Replayed]);
    assert_eq!(calls[0].token, calls[1].token, "the same token");
    let state = rig.state("resume").await;
    assert_eq!(state.resources["Slow"].physical_id, physical);
    assert!(state.pending.is_empty());
}

/// A chain: C reads B, which reads A; `Bad` (when present) comes last and fails.
fn chain(bad: bool) -> serde_json::Value {
    let mut resources = json!({
        "A": {"Type": "AWS::SQS::Queue"},
        "B": {"Type": "AWS::SQS::Queue", "DependsOn": "A"},
        "C": {"Type": "AWS::SQS::Queue", "DependsOn": "B"}
    });
    if bad {
        resources["Bad"] = json!({"Type": "AWS::SQS::Queue", "DependsOn": "C"});
    }
    json!({ "Resources": resources })
}

/// How many deletes the cloud was asked for, per logical id.
fn deletes(rig: &Rig) -> std::collections::BTreeMap<String, usize> {
    let mut out = std::collections::BTreeMap::new();
    for c in rig.cloud.calls().iter().filter(|c| c.op == Op::Delete) {
        *out.entry(c.logical_id.clone()).or_default() += 1;
    }
    out
}

fn counts(pairs: &[(&str, usize)]) -> std::collections::BTreeMap<String, usize> {
    pairs.iter().map(|(k, n)| (k.to_string(), *n)).collect()
}

/// A destroy cut at its deadline (B's delete made, its answer not back) is resumed by
/// the next invocation of the same run: it keeps the lock, settles B's delete, deletes
/// A, and never deletes C again. Invoked once more after it ended, it only reports.
#[tokio::test]
async fn a_destroy_cut_at_its_deadline_is_resumed_by_the_same_run() {
    let rig = Rig::new();
    deploy_ok(&rig, &input("gone", chain(false))).await;
    rig.cloud.clear_calls();
    let _slow = rig.cloud.slow_once(Op::Delete, "B");
    let run = "x-execution-1";
    let destroy = || destroy_stack_as(rig.engine.clone(), "gone", options(), run);
    assert!(
        within(Duration::from_millis(100), destroy())
            .await
            .is_none()
    );
    assert_eq!(rig.lock_holder("gone").await.unwrap().deploy_id, run);
    assert_eq!(deletes(&rig), counts(&[("B", 1), ("C", 1)]));
    let report = within(Duration::from_secs(10), destroy())
        .await
        .expect("the second invocation ends in time")
        .unwrap();
    assert_eq!(report.status, StackStatus::Succeeded, "{report:#?}");
    assert_eq!(deletes(&rig), counts(&[("A", 1), ("B", 2), ("C", 1)]));
    assert!(rig.cloud.world().is_empty());
    let state = rig.state("gone").await;
    assert!(state.resources.is_empty() && state.pending.is_empty() && state.lock.is_none());
    let destroyed = rig
        .events("gone")
        .await
        .into_iter()
        .any(|e| matches!(&e.event, Event::StackDestroyed { deploy_id } if deploy_id == run));
    assert!(destroyed);
    // Its answer was lost, and it runs again: it reports, and calls nothing.
    let again = destroy().await.unwrap();
    assert_eq!(again.status, StackStatus::Succeeded);
    assert_eq!(deletes(&rig), counts(&[("A", 1), ("B", 2), ("C", 1)]));
}

/// A rollback cut at its deadline while undoing B is resumed by the same run: C is not
/// undone again, B's undo is finished, A is undone.
#[tokio::test]
async fn a_rollback_cut_at_its_deadline_is_resumed_by_the_same_run() {
    let rig = Rig::new();
    rig.cloud.fail_once(Op::Create, "Bad");
    let mut keep = options();
    keep.no_rollback = true;
    let report = deploy_stack(rig.engine.clone(), input("undo", chain(true)), keep)
        .await
        .unwrap();
    assert_eq!(report.status, StackStatus::Failed);
    assert_eq!(rig.cloud.world().len(), 3, "A, B and C are kept");
    let _slow = rig.cloud.slow_once(Op::Delete, "B");
    let run = "r-execution-1";
    let rollback = || rollback_stack_as(rig.engine.clone(), "undo", run);
    assert!(
        within(Duration::from_millis(100), rollback())
            .await
            .is_none()
    );
    assert_eq!(rig.lock_holder("undo").await.unwrap().deploy_id, run);
    assert_eq!(deletes(&rig), counts(&[("B", 1), ("C", 1)]));
    let report = within(Duration::from_secs(10), rollback())
        .await
        .expect("the second invocation ends in time")
        .unwrap();
    assert_eq!(report.status, StackStatus::Succeeded, "{report:#?}");
    assert_eq!(deletes(&rig), counts(&[("A", 1), ("B", 2), ("C", 1)]));
    assert!(rig.cloud.world().is_empty());
    let state = rig.state("undo").await;
    assert!(state.lock.is_none() && state.pending.is_empty());
    assert_eq!(state.journal.to_undo().count(), 0);
    let again = rollback().await.unwrap();
    assert_eq!(again.status, StackStatus::Succeeded);
    assert_eq!(deletes(&rig), counts(&[("A", 1), ("B", 2), ("C", 1)]));
}

/// What one Step Functions task reads to act, at a deploy of `n` independent queues: every
/// action resumes the deploy as a Provision task does (a new `Deployment::resume` each,
/// one after the other) and the events read from the log are counted. Returns the events
/// read per action.
async fn events_read_per_action(n: usize) -> f64 {
    let rig = Rig::new();
    let resources: serde_json::Map<String, serde_json::Value> = (0..n)
        .map(|i| (format!("Q{i}"), json!({"Type": "AWS::SQS::Queue"})))
        .collect();
    let i = input(&format!("wide{n}"), json!({ "Resources": resources }));
    let d = begin(&rig, &i).await;
    let tasks = d.provision_tasks();
    assert_eq!(tasks.len(), n);
    let doc = d.document();
    let before = rig.store.events_read();
    for t in &tasks {
        let resumed = Deployment::resume(rig.engine.clone(), doc.clone())
            .await
            .expect("the deploy resumes");
        resumed
            .provision(&t.id)
            .await
            .expect("no store error")
            .expect("the action succeeds");
    }
    (rig.store.events_read() - before) as f64 / n as f64
}

/// A task's reads stay the same however far the deploy has gone: each resume that folded
/// `SNAPSHOT_TAIL` events or more writes a snapshot, so the events read per action are the
/// same (within 20%) at 200 and 800 actions (and no more at 50), bounded by the tail.
/// Without the snapshots they grow with the deploy, about 1.5 events an action for every
/// action before it: 74, 299 and 1,199 per action at 50, 200 and 800. (Measured once at
/// 50, 500 and 2,000 with them: 73.9, 98.7 and 101.5; 2,000 takes minutes in a debug
/// build, as every resume reads the snapshot of 2,000 resources.)
#[tokio::test]
async fn a_tasks_reads_do_not_grow_with_the_deploy() {
    use stackflow_engine::deploy::SNAPSHOT_TAIL;
    let mut per = Vec::new();
    for n in [50, 200, 800] {
        let read = events_read_per_action(n).await;
        eprintln!("{n} actions: {read:.1} events read per action");
        assert!(read <= SNAPSHOT_TAIL as f64 + 10.0, "{n}: {read}");
        per.push(read);
    }
    let (low, high) = (per[1].min(per[2]), per[1].max(per[2]));
    assert!(high <= low * 1.2, "200 and 800 actions: {per:?}");
    assert!(per[0] <= high * 1.2, "50 actions read no more: {per:?}");
}
