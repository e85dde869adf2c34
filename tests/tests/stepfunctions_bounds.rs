//! Step Functions executions that must wait or resume: a Fail that waits for the calls
//! of the iterations a failed `Map` stopped, and a destroy that fails for good going
//! through Release (see `infra/README.md`). The rig is `sfn/mod.rs`.

mod sfn;

use std::time::Duration;

use aws_sdk_sfn::types::ExecutionStatus;
use serde_json::json;
use stackflow_events::{EventStore, StreamId, load_state};
use stackflow_tests::unique_name;
use tokio::sync::watch;

use sfn::*;

/// A `Map` that failed stops its other iterations, but their calls may run on (a Lambda
/// is not stopped): Fail waits while an intent of the deploy without an outcome is young,
/// looking again after a `Wait`; once the late call recorded what it made, the rollback
/// deletes that too.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fail_waits_for_a_late_call_and_undoes_what_it_made() {
    use stackflow_events::Event;
    use stackflow_events::event::{Operation, ResourceRecord};
    let rig = rig_with(0, 20).await;
    let stack = unique_name("SfnLate");
    let t = template(json!({"Resources": {
        "A": {"Type": "AWS::SQS::Queue"},
        "G": {"Type": "AWS::SQS::Queue", "DependsOn": "A", "Properties": {"VisibilityTimeout": 999999}}
    }}));
    let deploy_id = unique_name("d").to_lowercase();
    let req = rig.upload(&input(&stack, t), Some(deploy_id.clone())).await;
    // Fail does not run until the late call's intent is recorded.
    let (_keep, rx) = watch::channel(false);
    let most = tokio::spawn(rig.worker_of("most", |t| t != "Fail").run(rx.clone()));
    let arn = rig
        .start("deploy", serde_json::to_value(req).unwrap())
        .await;
    let stream = StreamId::new("us-east-1", &stack);
    let mut g_failed = false;
    for _ in 0..600 {
        g_failed =
            rig.store.read_all_for_test(&stream).await.iter().any(
                |e| matches!(e, Event::ResourceFailed { logical_id, .. } if logical_id == "G"),
            );
        if g_failed {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(g_failed, "G failed");
    let kind = load_state(rig.store.as_ref(), &stream)
        .await
        .unwrap()
        .resources["A"]
        .provider;
    // An iteration the deploy stopped is still making a queue: its intent is recorded.
    let late = Event::ResourceIntent {
        deploy_id: deploy_id.clone(),
        logical_id: "Late".into(),
        resource_type: "AWS::SQS::Queue".into(),
        operation: Operation::Create,
        token: format!("{deploy_id}-late"),
        provider: kind,
        physical_id: None,
        properties: Some(Default::default()),
    };
    rig.append_as(&stack, &deploy_id, "test/late/intent", late)
        .await;
    let fails = tokio::spawn(rig.worker_of("fails", |t| t == "Fail").run(rx));
    assert!(
        rig.entered(&arn, "WaitForRunningCalls").await,
        "Fail waits for the late call"
    );
    let state = load_state(rig.store.as_ref(), &stream).await.unwrap();
    assert!(
        state.lock.is_some(),
        "nothing is undone while the call may run"
    );
    assert!(state.resources.contains_key("A"));
    // The late call ends: its queue exists, and is recorded.
    let url = rig
        .sqs
        .create_queue()
        .queue_name(format!("{stack}-late"))
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    let made = Event::ResourceCreated {
        deploy_id: deploy_id.clone(),
        resource: ResourceRecord {
            logical_id: "Late".into(),
            resource_type: "AWS::SQS::Queue".into(),
            physical_id: url.clone(),
            properties: Default::default(),
            attributes: Default::default(),
            dependencies: vec![],
            provider: kind,
            deletion_policy: None,
            update_replace_policy: None,
            secret_digest: None,
        },
        replaces: None,
        baseline: None,
    };
    rig.append_as(&stack, &deploy_id, "test/late/created", made)
        .await;
    let (status, _, error, _) = rig.wait_counted(&arn).await;
    most.abort();
    fails.abort();
    assert_eq!(status, ExecutionStatus::Failed, "{error}");
    assert!(error.contains("Stackflow.DeployFailed"), "{error}");
    let after = load_state(rig.store.as_ref(), &stream).await.unwrap();
    assert!(after.resources.is_empty(), "{:?}", after.resources.keys());
    assert!(after.pending.is_empty() && after.lock.is_none());
    assert!(
        !rig.queue_exists(&url).await,
        "the late call's queue is deleted"
    );
}

/// A destroy whose task fails for good goes through Release: a lock another run holds is
/// left alone (the execution ends `DestroyFailed`); the destroy's own lock, named after its
/// execution, is released, and the stream says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failed_destroy_releases_only_its_own_lock_and_says_why() {
    use stackflow_events::event::Holder;
    use stackflow_events::{EventStore, NewEvent, Precondition};
    let rig = rig(1).await;
    let stack = unique_name("SfnDestroyLock");
    let t = template(json!({"Resources": {"Q": {"Type": "AWS::SQS::Queue"}}}));
    let (status, _, error) = rig.deploy(&input(&stack, t)).await;
    assert_eq!(status, ExecutionStatus::Succeeded, "{error}");
    let stream = StreamId::new("us-east-1", &stack);
    let take = |id: &str| {
        let holder = Holder {
            deploy_id: id.into(),
            who: "test".into(),
            since: stackflow_events::event::now(),
            operation: "deploy".into(),
            expires: None,
            fenced: None,
        };
        (
            NewEvent::new(
                format!("test/{id}/locked"),
                stackflow_events::Event::LockTaken {
                    holder: holder.clone(),
                },
            ),
            Precondition::TakeLock(holder),
        )
    };
    let (event, pre) = take("d-someone-else");
    rig.store.append(&stream, &event, &pre).await.unwrap();
    let (status, _, error) = rig.run("destroy", json!({ "stack": stack })).await;
    assert_eq!(status, ExecutionStatus::Failed, "{error}");
    assert!(error.contains("Stackflow.DestroyFailed"), "{error}");
    let held = load_state(rig.store.as_ref(), &stream).await.unwrap().lock;
    assert_eq!(held.map(|h| h.deploy_id).as_deref(), Some("d-someone-else"));
    rig.store.break_lock(&stream, "test").await.unwrap();

    // A destroy run that holds the lock (its execution named e1) and cannot go on.
    let (event, pre) = take("x-e1");
    rig.store.append(&stream, &event, &pre).await.unwrap();
    let caught = json!({
        "stack": stack, "run": "destroy", "execution": "e1",
        "error": {"Error": "Stackflow.Again", "Cause": "out of attempts"}
    });
    let released = rig
        .tasks
        .dispatch("Release", caught, None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(released["released"], json!(true));
    let state = load_state(rig.store.as_ref(), &stream).await.unwrap();
    assert!(state.lock.is_none());
    let why = rig
        .store
        .read_all_for_test(&stream)
        .await
        .into_iter()
        .find_map(|e| match e {
            stackflow_events::Event::DeployFailed {
                deploy_id, error, ..
            } if deploy_id == "x-e1" => Some(error),
            _ => None,
        })
        .expect("the stream says why the destroy ended");
    assert_eq!(why.name, "Stackflow.Again");
    let _ = rig.stop.send(true);
}

/// The deploy's `concurrency` bounds the `Map`: eight independent resources deployed with
/// a concurrency of 2 through workers that would take eight at once (every AWS call of an
/// action 300 ms slower, so that actions overlap) never have more than two actions open
/// (an intent without its outcome yet, read in the log's order).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_deploys_concurrency_bounds_its_map() {
    use stackflow_events::Event;
    let rig = rig_slow(1, Duration::from_millis(300)).await;
    let stack = unique_name("SfnConcurrency");
    let (status, error) = deploy_queues(&rig, &stack, 8, Some(2)).await;
    assert_eq!(status, ExecutionStatus::Succeeded, "{error}");
    let stream = StreamId::new("us-east-1", &stack);
    let (mut open, mut most) = (0_i64, 0_i64);
    for e in rig.store.read(&stream, 0).await.unwrap() {
        match e.event {
            Event::ResourceIntent { .. } => open += 1,
            Event::ResourceCreated { .. } | Event::ResourceFailed { .. } => open -= 1,
            _ => {}
        }
        most = most.max(open);
    }
    assert_eq!(open, 0, "every intent has its outcome");
    assert!((1..=2).contains(&most), "{most} actions were open at once");
    let state = load_state(rig.store.as_ref(), &stream).await.unwrap();
    assert_eq!(state.resources.len(), 8);
    let _ = rig.stop.send(true);
}

/// A deploy whose execution's history nears Step Functions' limit stops through Fail: with
/// the gates' guard at 40 events (read at every iteration), twelve queues start, the gates
/// that find the history past it stop the deploy (marker, waiting gates released), and the
/// execution ends in `Stackflow.DeployFailed` with everything rolled back and the lock
/// free; the failure says why (`HistoryLimit`).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_deploy_near_the_history_limit_stops_through_fail() {
    use stackflow_engine::sfn::history::HistoryGuard;
    let guard = HistoryGuard {
        stop_at: 40,
        check_every: 1,
        most_actions: 100,
        part_actions: 100,
    };
    let rig = rig_with_history(1, guard).await;
    let stack = unique_name("SfnHistory");
    let (status, error) = deploy_queues(&rig, &stack, 12, None).await;
    assert_eq!(status, ExecutionStatus::Failed, "{error}");
    assert!(error.contains("Stackflow.DeployFailed"), "{error}");
    let stream = StreamId::new("us-east-1", &stack);
    let failed = deploy_failures(&rig, &stream).await;
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0].name, "HistoryLimit", "{failed:?}");
    assert!(failed[0].message.contains("25000"), "{failed:?}");
    let state = load_state(rig.store.as_ref(), &stream).await.unwrap();
    assert!(
        state.resources.is_empty() && state.pending.is_empty() && state.lock.is_none(),
        "rolled back, lock free: {:?}",
        (&state.resources, &state.pending, &state.lock)
    );
    let _ = rig.stop.send(true);
}

/// A plan of more actions than one execution runs within its history guard is refused
/// before anything is made: Plan fails (`Stackflow.Template`), the stack records
/// `DeployFailed` (`HistoryLimit`, how many actions and how many fit), nothing exists, the
/// lock is free.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_plan_past_the_history_limit_is_refused_before_anything_is_made() {
    use stackflow_engine::sfn::history::HistoryGuard;
    use stackflow_events::Event;
    let guard = HistoryGuard {
        most_actions: 5,
        ..HistoryGuard::default()
    };
    let rig = rig_with_history(1, guard).await;
    let stack = unique_name("SfnTooMany");
    let (status, error) = deploy_queues(&rig, &stack, 6, None).await;
    assert_eq!(status, ExecutionStatus::Failed, "{error}");
    let stream = StreamId::new("us-east-1", &stack);
    let events = rig.store.read(&stream, 0).await.unwrap();
    let failed = deploy_failures(&rig, &stream).await;
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0].name, "HistoryLimit");
    assert!(failed[0].message.contains("6 actions") && failed[0].message.contains("at most 5"));
    assert!(
        !events
            .iter()
            .any(|e| matches!(e.event, Event::ResourceIntent { .. })),
        "nothing was attempted"
    );
    let state = load_state(rig.store.as_ref(), &stream).await.unwrap();
    assert!(state.resources.is_empty() && state.lock.is_none());
    let _ = rig.stop.send(true);
}

/// Deploys `count` independent queues as `stack` through the rig's deploy state machine
/// (with `concurrency`, when given), and waits for the execution's end.
async fn deploy_queues(
    rig: &Rig,
    stack: &str,
    count: usize,
    concurrency: Option<usize>,
) -> (ExecutionStatus, String) {
    let resources: serde_json::Map<String, serde_json::Value> = (0..count)
        .map(|i| (format!("Q{i}"), json!({"Type": "AWS::SQS::Queue"})))
        .collect();
    let t = template(json!({ "Resources": resources }));
    let mut req = rig.upload(&input(stack, t), None).await;
    if let Some(n) = concurrency {
        req.concurrency = n;
    }
    let arn = rig
        .start("deploy", serde_json::to_value(req).unwrap())
        .await;
    let (status, _, error, _) = rig.wait_counted(&arn).await;
    (status, error)
}

/// The errors of the stream's `DeployFailed` events.
async fn deploy_failures(rig: &Rig, stream: &StreamId) -> Vec<stackflow_events::event::ErrorInfo> {
    rig.store
        .read(stream, 0)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.event {
            stackflow_events::Event::DeployFailed { error, .. } => Some(error),
            _ => None,
        })
        .collect()
}

/// The names of the executions of `rig`'s deploy machine that ran parts (`-p<n>`, `-c<n>`)
/// of `deploy_id`, sorted, and the most `MapIterationStarted` events any of them had.
async fn parts_run(rig: &Rig, deploy_id: &str) -> (Vec<String>, usize) {
    let listed = rig
        .sfn
        .list_executions()
        .state_machine_arn(&rig.machines["deploy"])
        .max_results(1000)
        .send()
        .await
        .unwrap();
    let mut names = Vec::new();
    let mut most = 0;
    for e in listed.executions() {
        let Some(tail) = e.name().strip_prefix(&format!("{deploy_id}-")) else {
            continue;
        };
        names.push(tail.to_string());
        let history = rig
            .sfn
            .get_execution_history()
            .execution_arn(e.execution_arn())
            .max_results(1000)
            .send()
            .await
            .unwrap();
        let iterations = history
            .events()
            .iter()
            .filter(|h| h.r#type().as_str() == "MapIterationStarted")
            .count();
        most = most.max(iterations);
    }
    names.sort();
    (names, most)
}

/// A deploy of more actions than one execution holds (here: parts of 3) runs each phase
/// in parts, each an execution of the deploy machine, one after the other: a chain that
/// crosses parts is created in order; an update that replaces queues deletes their
/// predecessors in cleanup parts; a failing action stops the parts after it, and the
/// deploy is rolled back through Fail with nothing left and the lock free.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_deploy_larger_than_one_execution_runs_in_parts() {
    use stackflow_engine::sfn::history::HistoryGuard;
    let guard = HistoryGuard {
        part_actions: 3,
        ..HistoryGuard::default()
    };
    let rig = rig_with_history(6, guard).await;
    let stack = unique_name("SfnParts");
    let queues = |renamed: bool, failing: bool| {
        let mut resources = serde_json::Map::new();
        for i in 0..6 {
            let mut props = json!({});
            if renamed && i < 4 {
                props["QueueName"] = json!(format!("{stack}-renamed-{i}"));
            }
            resources.insert(
                format!("Q{i}"),
                json!({"Type": "AWS::SQS::Queue", "Properties": props}),
            );
        }
        // A chain across parts: P0 after Q0, P1 after P0, P2 after P1.
        resources.insert("P0".into(), json!({"Type": "AWS::SSM::Parameter", "Properties": {"Type": "String", "Value": {"Fn::GetAtt": ["Q0", "Arn"]}}}));
        resources.insert("P1".into(), json!({"Type": "AWS::SSM::Parameter", "Properties": {"Type": "String", "Value": {"Ref": "P0"}}}));
        resources.insert("P2".into(), json!({"Type": "AWS::SSM::Parameter", "Properties": {"Type": "String", "Value": {"Ref": "P1"}}}));
        if failing {
            resources.insert("Bad".into(), json!({"Type": "AWS::SQS::Queue", "DependsOn": "P2", "Properties": {"VisibilityTimeout": 999999}}));
            resources.insert(
                "After".into(),
                json!({"Type": "AWS::SQS::Queue", "DependsOn": "Bad"}),
            );
        }
        template(json!({ "Resources": resources }))
    };
    let stream = StreamId::new("us-east-1", &stack);
    let run = |t, id: &str| {
        let (rig, stack, id) = (&rig, stack.clone(), id.to_string());
        async move {
            let req = rig.upload(&input(&stack, t), Some(id)).await;
            let arn = rig
                .start("deploy", serde_json::to_value(req).unwrap())
                .await;
            let (status, _, error, _) = rig.wait_counted(&arn).await;
            (status, error)
        }
    };

    // 9 creates: 3 parts, each an execution of at most 3 iterations.
    let first = unique_name("d").to_lowercase();
    let (status, error) = run(queues(false, false), &first).await;
    assert_eq!(status, ExecutionStatus::Succeeded, "{error}");
    let (parts, most) = parts_run(&rig, &first).await;
    assert_eq!(parts, ["p0", "p3", "p6"], "named by their first actions");
    assert_eq!(most, 3, "a part's execution runs only its own items");
    let state = load_state(rig.store.as_ref(), &stream).await.unwrap();
    assert_eq!(state.resources.len(), 9);
    let p2 = &state.resources["P2"];
    assert_eq!(
        p2.properties["Value"],
        json!(state.resources["P1"].physical_id)
    );

    // 4 replacements, P0 updated (Q0's ARN) and P1, P2 looked at again downstream of it:
    // 7 actions in 3 parts; then the 4 predecessors deleted in 2.
    let second = unique_name("d").to_lowercase();
    let (status, error) = run(queues(true, false), &second).await;
    assert_eq!(status, ExecutionStatus::Succeeded, "{error}");
    let (parts, _) = parts_run(&rig, &second).await;
    assert_eq!(parts, ["c0", "c3", "p0", "p3", "p6"]);
    let state = load_state(rig.store.as_ref(), &stream).await.unwrap();
    let (urls, recorded) =
        stackflow_tests::deploy::listed_and_recorded_queues(&rig.sqs, &stack, &state).await;
    assert_eq!(urls, recorded, "the predecessors are gone");
    assert_eq!(
        recorded.iter().filter(|u| u.contains("-renamed-")).count(),
        4
    );

    // A failing action in a later part: the parts after it do not begin, Fail rolls back.
    let third = unique_name("d").to_lowercase();
    let (status, error) = run(queues(true, true), &third).await;
    assert_eq!(status, ExecutionStatus::Failed, "{error}");
    assert!(error.contains("Stackflow.DeployFailed"), "{error}");
    let state = load_state(rig.store.as_ref(), &stream).await.unwrap();
    assert_eq!(state.resources.len(), 9, "Bad and After are not kept");
    assert!(!state.resources.contains_key("After"));
    assert!(state.lock.is_none() && state.pending.is_empty());
    let _ = rig.stop.send(true);
}

/// The gates do not rely on the order in which a `Map` starts its iterations. Here Plan
/// and Conclude give the `Map` its items dependents first, one iteration at a time: the
/// first one's dependency has not begun and cannot (the only slot is its own), which
/// deadlocked the gates before deferral. Its gate's re-check (the heartbeat, 2 s) defers
/// it, the slot goes to the next item, and the deferred actions run in the next rounds, as
/// the phase's one part (`p0`, `p0r2`, ...: the emulator's `Map` may defer again in a
/// part): the chain is created in order, each resource once. Then a cleanup of the chain
/// (its deletes wait for their dependents, and are given in the reversed order too) runs
/// its deferred deletes the same way (`c0`). (The emulator starts
/// a `Map`'s iterations nearly, not exactly, in their order: a phase whose iterations it
/// happened to start dependencies first defers nothing and has no part, which its round's
/// flag tells; the test then checks the rest.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gates_do_not_rely_on_the_order_the_map_starts_them() {
    use stackflow_events::Event;
    let rig = rig_reversed(1, 2).await;
    let stack = unique_name("SfnOrder");
    let stream = StreamId::new("us-east-1", &stack);
    let chain = json!({
        "A": {"Type": "AWS::SQS::Queue"},
        "B": {"Type": "AWS::SSM::Parameter", "Properties": {"Type": "String", "Value": {"Fn::GetAtt": ["A", "Arn"]}}},
        "C": {"Type": "AWS::SSM::Parameter", "Properties": {"Type": "String", "Value": {"Ref": "B"}}},
        "E": {"Type": "AWS::SSM::Parameter", "Properties": {"Type": "String", "Value": {"Ref": "C"}}},
        "D": {"Type": "AWS::SQS::Queue"}
    });
    let run = |resources: serde_json::Value| {
        let (rig, stack) = (&rig, stack.clone());
        async move {
            let id = unique_name("d").to_lowercase();
            let t = template(json!({ "Resources": resources }));
            let mut req = rig.upload(&input(&stack, t), Some(id.clone())).await;
            req.concurrency = 1;
            let arn = rig
                .start("deploy", serde_json::to_value(req).unwrap())
                .await;
            let (status, _, error, _) = rig.wait_counted(&arn).await;
            assert_eq!(status, ExecutionStatus::Succeeded, "{error}");
            id
        }
    };
    // The resources the stream's creates (or deletes) name, in their order.
    let order = |events: &[Event], created: bool| -> Vec<String> {
        events
            .iter()
            .filter_map(|e| match e {
                Event::ResourceCreated { resource, .. } if created => {
                    Some(resource.logical_id.clone())
                }
                Event::ResourceDeleted { logical_id, .. } if !created => Some(logical_id.clone()),
                _ => None,
            })
            .collect()
    };

    // A part ran exactly when the phase's own `Map` deferred something.
    let parts_if_deferred = |id: String, phase: &'static str| {
        let (rig, stack) = (&rig, stack.clone());
        async move {
            let flag = format!("deploys/{stack}/{id}/deferred/{phase}/0");
            let deferred = rig
                .s3
                .head_object()
                .bucket(&rig.bucket)
                .key(&flag)
                .send()
                .await
                .is_ok();
            // The part's rounds: `p0`, then `p0r2`, ... while a round defers.
            let (parts, _) = parts_run(rig, &id).await;
            let first = format!("{}0", &phase[..1]);
            let rounds: Vec<String> = (1..=parts.len())
                .map(|r| match r {
                    1 => first.clone(),
                    r => format!("{first}r{r}"),
                })
                .collect();
            let mut sorted = rounds.clone();
            sorted.sort();
            assert_eq!(
                parts, sorted,
                "{phase}: the part's rounds, one after another"
            );
            assert_eq!(!parts.is_empty(), deferred, "{phase}: {parts:?}");
            eprintln!("{phase}: deferred {deferred}, rounds {rounds:?}");
        }
    };
    let first = run(chain.clone()).await;
    parts_if_deferred(first, "provision").await;
    let events = rig.store.read_all_for_test(&stream).await;
    let created = order(&events, true);
    let at = |id: &str| created.iter().position(|c| c == id).unwrap();
    assert_eq!(created.len(), 5, "each made once: {created:?}");
    assert!(
        at("A") < at("B") && at("B") < at("C") && at("C") < at("E"),
        "{created:?}"
    );
    let state = load_state(rig.store.as_ref(), &stream).await.unwrap();
    assert_eq!(
        state.resources["C"].properties["Value"],
        json!(state.resources["B"].physical_id)
    );

    // B, C and E removed: E is deleted first, then C, then B (given first).
    let mut kept = chain.clone();
    let kept_map = kept.as_object_mut().unwrap();
    for id in ["B", "C", "E"] {
        kept_map.remove(id);
    }
    let second = run(kept).await;
    parts_if_deferred(second, "cleanup").await;
    let events = rig.store.read_all_for_test(&stream).await;
    assert_eq!(order(&events, false), ["E", "C", "B"]);
    let state = load_state(rig.store.as_ref(), &stream).await.unwrap();
    let mut left: Vec<&String> = state.resources.keys().collect();
    left.sort();
    assert_eq!(left, ["A", "D"]);
    assert!(state.lock.is_none() && state.pending.is_empty());
    let _ = rig.stop.send(true);
}
