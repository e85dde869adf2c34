//! Rollback runs like a deploy in reverse: the undos of independent resources go out
//! together, and a resource is undone only once everything the deploy built on top of it
//! is. Against the fake cloud and the in-memory store.

mod support;

use std::time::Duration;

use serde_json::{Map, Value, json};
use stackflow_engine::stack::StackInput;
use stackflow_engine::{StackStatus, deploy_stack, rollback_stack};
use support::lifecycle::topic;
use support::{Op, Rig, deploy, input, options};

fn topic_after(name: &str, deps: &[&str]) -> Value {
    let mut t = topic(name);
    t["DependsOn"] = json!(deps);
    t
}

/// Twelve independent topics, then `Last`, which depends on all of them (so every topic
/// is created before `Last` fails).
fn wide() -> StackInput {
    let mut resources = Map::new();
    let names: Vec<String> = (0..12).map(|i| format!("T{i}")).collect();
    for name in &names {
        resources.insert(name.clone(), topic(&name.to_lowercase()));
    }
    let deps: Vec<&str> = names.iter().map(String::as_str).collect();
    resources.insert("Last".into(), topic_after("last", &deps));
    input("wide", json!({ "Resources": resources }))
}

fn deleted(rig: &Rig) -> Vec<String> {
    rig.cloud
        .call_log()
        .into_iter()
        .filter(|(op, _)| *op == Op::Delete)
        .map(|(_, id)| id)
        .collect()
}

/// While the delete of one topic hangs, the other eleven are deleted: the rollback does
/// not wait for one undo before it starts the next independent one. (A rollback that
/// undid one entry at a time would never get past the held one.)
#[tokio::test]
async fn independent_undos_run_together() {
    let rig = Rig::new();
    rig.cloud.fail_always(Op::Create, "Last");
    let held = rig.cloud.block_once(Op::Delete, "T0");
    let run = tokio::spawn({
        let engine = rig.engine.clone();
        async move { deploy_stack(engine, wide(), options()).await }
    });
    held.entered().await;
    let mut others = 0;
    for _ in 0..200 {
        others = deleted(&rig).iter().filter(|id| *id != "T0").count();
        if others == 11 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(others, 11, "deleted while T0 is held: {:?}", deleted(&rig));
    held.release();
    let report = run.await.expect("the run ends").expect("the deploy runs");
    assert_eq!(report.status, StackStatus::Failed, "{report:#?}");
    let rollback = report.rollback.expect("a rollback ran");
    assert!(rollback.complete(), "{rollback:#?}");
    assert_eq!(rollback.undone.len(), 12);
    assert!(rollback.undone.iter().all(|(_, how)| how == "deleted"));
    assert!(rig.cloud.world().is_empty(), "{:?}", rig.cloud.world());
}

/// `A` <- `B` <- `C` (each built on the one before) beside an unrelated `X`, and `Last`
/// on top: the rollback deletes `C`, then `B`, then `A`, and `X` whenever. Also through
/// `stackflow rollback` after a deploy that kept its failure.
#[tokio::test]
async fn a_resource_is_undone_after_what_was_built_on_it() {
    let chain = || {
        input(
            "chain",
            json!({ "Resources": {
                "A": topic("a"),
                "B": topic_after("b", &["A"]),
                "C": topic_after("c", &["B"]),
                "X": topic("x"),
                "Last": topic_after("last", &["C", "X"]),
            }}),
        )
    };
    for later in [false, true] {
        let rig = Rig::new();
        rig.cloud.fail_always(Op::Create, "Last");
        let report = if later {
            let mut opts = options();
            opts.no_rollback = true;
            let failed = deploy_stack(rig.engine.clone(), chain(), opts)
                .await
                .expect("the deploy runs");
            assert!(failed.rollback.is_none());
            rollback_stack(rig.engine.clone(), "chain")
                .await
                .expect("the rollback runs")
        } else {
            deploy(&rig, &chain()).await
        };
        let rollback = report.rollback.expect("a rollback ran");
        assert!(rollback.complete(), "{rollback:#?}");
        let order = deleted(&rig);
        let at = |id: &str| order.iter().position(|d| d == id).expect(id);
        assert!(at("C") < at("B") && at("B") < at("A"), "{order:?}");
        assert_eq!(order.len(), 4, "{order:?}");
        assert!(rig.cloud.world().is_empty());
    }
}
