//! Two runs of one stack that overlap: the second plans from the log as it is once it
//! holds the lock, never from what it read before.

mod support;

use std::sync::Arc;

use serde_json::Value;
use serde_json::json;
use stackflow_core::dynref::DynamicReference;
use stackflow_core::intrinsics::StackOutputRef;
use stackflow_engine::lookups::{LookupError, Lookups};
use std::time::Duration;

use stackflow_engine::engine::Engine;
use stackflow_engine::{StackStatus, deploy_stack};
use stackflow_events::event::{Event, Holder};
use stackflow_events::{EventStore, NewEvent, Precondition};
use stackflow_providers::provider::BoxFuture;
use support::{FakeLookups, Gate, Op, Rig, deploy_ok, input, options};

/// Lookups that stop at `gate` on their first availability zone question.
struct Stalled {
    inner: FakeLookups,
    gate: Arc<Gate>,
    once: std::sync::atomic::AtomicBool,
}

impl Lookups for Stalled {
    fn availability_zones<'a>(
        &'a self,
        region: &'a str,
    ) -> BoxFuture<'a, Result<Vec<String>, LookupError>> {
        Box::pin(async move {
            if !self.once.swap(true, std::sync::atomic::Ordering::SeqCst) {
                self.gate.pass().await;
            }
            self.inner.availability_zones(region).await
        })
    }
    fn cloudformation_export<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Value>, LookupError>> {
        self.inner.cloudformation_export(name)
    }
    fn cloudformation_output<'a>(
        &'a self,
        r: &'a StackOutputRef,
    ) -> BoxFuture<'a, Result<Option<Value>, LookupError>> {
        self.inner.cloudformation_output(r)
    }
    fn ssm_parameter<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Value>, LookupError>> {
        self.inner.ssm_parameter(name)
    }
    fn dynamic_reference<'a>(
        &'a self,
        reference: &'a DynamicReference,
    ) -> BoxFuture<'a, Result<String, LookupError>> {
        self.inner.dynamic_reference(reference)
    }
}

#[tokio::test]
async fn a_deploy_that_finishes_while_another_plans_leaves_no_duplicate() {
    let rig = Rig::new();
    let template = json!({
        "Resources": {
            "Topic": {
                "Type": "AWS::SNS::Topic",
                "Properties": { "DisplayName": {"Fn::Select": [0, {"Fn::GetAZs": ""}]} }
            }
        }
    });
    let v1 = input("app", template);
    // The slow deploy reads the (empty) stack, then stalls in its lookups...
    let gate = Arc::new(Gate::new());
    let stalled = support::build_engine(
        rig.store.clone(),
        rig.cloud.clone(),
        Arc::new(Stalled {
            inner: FakeLookups::default(),
            gate: gate.clone(),
            once: Default::default(),
        }),
        rig.lines.clone(),
        rig.holders_gone.clone(),
    );
    let slow = tokio::spawn(deploy_stack(stalled, v1.clone(), options()));
    gate.entered().await;
    // ...while another deploy of the same template runs to its end.
    deploy_ok(&rig, &v1).await;
    gate.release();
    let report = slow.await.unwrap().unwrap();
    // The slow one holds the lock next, sees the topic, and makes nothing new.
    assert!(
        matches!(
            report.status,
            StackStatus::Succeeded | StackStatus::NoChanges
        ),
        "{report:#?}"
    );
    assert_eq!(report.created, 0, "{report:#?}");
    assert_eq!(rig.cloud.physical_ids("app", "Topic").len(), 1);
    let state = rig.state("app").await;
    assert!(state.lock.is_none());
    assert_eq!(state.resources.len(), 1);
}

/// The rig's engine, taking locks leased for `lease`.
fn leased(rig: &Rig, lease: std::time::Duration) -> Arc<Engine<support::FaultStore>> {
    Arc::new(Engine {
        store: rig.store.clone(),
        providers: Arc::new(support::FakeRouter(rig.cloud.clone())),
        lookups: Arc::new(FakeLookups::default()),
        region: support::REGION.into(),
        who: "lease-test".into(),
        cloudformation_fallback: false,
        progress: rig.lines.clone(),
        stale: stackflow_engine::engine::never_stale(),
        lease: Some(lease),
        digest_key: None,
    })
}

fn topics(names: &[&str]) -> Value {
    let mut resources = serde_json::Map::new();
    for n in names {
        resources.insert(
            (*n).to_string(),
            json!({ "Type": "AWS::SNS::Topic", "Properties": { "TopicName": n } }),
        );
    }
    json!({ "Resources": resources })
}

#[tokio::test]
async fn an_expired_lease_is_broken_recorded_and_taken() {
    let rig = Rig::new();
    let stream = rig.stream("app");
    let gone = Holder {
        deploy_id: "d-gone".into(),
        who: "someone@elsewhere pid 7".into(),
        since: "2026-01-01T00:00:00.000Z".into(),
        operation: "deploy".into(),
        expires: Some("2026-01-01T00:02:00.000Z".into()),
        fenced: None,
    };
    rig.store
        .append(
            &stream,
            &NewEvent::new(
                "d-gone/locked",
                Event::LockTaken {
                    holder: gone.clone(),
                },
            ),
            &Precondition::TakeLock(gone),
        )
        .await
        .unwrap();
    let engine = leased(&rig, Duration::from_secs(60));
    let report = deploy_stack(engine, input("app", topics(&["a"])), options())
        .await
        .unwrap();
    assert_eq!(report.status, StackStatus::Succeeded);
    let broken = rig
        .events("app")
        .await
        .into_iter()
        .find_map(|e| match e.event {
            Event::LockBroken { by, previous } => Some((by, previous.deploy_id)),
            _ => None,
        })
        .expect("the takeover is recorded");
    assert!(broken.0.contains("lease ended"), "{broken:?}");
    assert_eq!(broken.1, "d-gone");
}

#[tokio::test]
async fn a_live_lease_is_renewed_and_never_taken_over() {
    let rig = Rig::new();
    let lease = Duration::from_millis(300);
    let gate = rig.cloud.block_once(Op::Create, "a");
    let slow = tokio::spawn(deploy_stack(
        leased(&rig, lease),
        input("app", topics(&["a"])),
        options(),
    ));
    gate.entered().await;
    // Three leases later, the lock is still held: its holder renewed it.
    tokio::time::sleep(lease * 3).await;
    let other = deploy_stack(leased(&rig, lease), input("app", topics(&["a"])), options()).await;
    assert!(
        matches!(&other, Err(e) if e.to_string().contains("lease-test")),
        "{other:?}"
    );
    gate.release();
    let report = slow.await.unwrap().unwrap();
    assert_eq!(report.status, StackStatus::Succeeded);
}

#[tokio::test]
async fn a_run_that_lost_its_lock_stops_and_writes_nothing_more() {
    let rig = Rig::new();
    let lease = Duration::from_millis(150);
    let gate = rig.cloud.block_once(Op::Create, "a");
    let run = tokio::spawn(deploy_stack(
        leased(&rig, lease),
        input("app", topics(&["a", "b"])),
        options(),
    ));
    gate.entered().await;
    rig.store
        .break_lock(&rig.stream("app"), "an operator (stackflow unlock)")
        .await
        .unwrap();
    tokio::time::sleep(lease).await;
    gate.release();
    let e = run.await.unwrap().expect_err("the run lost its lock");
    assert!(e.to_string().contains("lost the stack's lock"), "{e}");
    let log = rig.events("app").await;
    let broken_at = log
        .iter()
        .position(|e| matches!(e.event, Event::LockBroken { .. }))
        .expect("the break is recorded");
    assert_eq!(
        broken_at,
        log.len() - 1,
        "nothing was written after the break"
    );
}

#[tokio::test]
async fn ten_deploys_at_once_one_runs_nine_are_refused_naming_it() {
    let rig = Rig::new();
    let v1 = input("app", topics(&["a", "b", "c"]));
    let gate = rig.cloud.block_once(Op::Create, "a");
    let runs: Vec<_> = (0..10)
        .map(|_| tokio::spawn(deploy_stack(rig.engine.clone(), v1.clone(), options())))
        .collect();
    // One of them reached AWS; the others are refused while it holds the lock.
    gate.entered().await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    gate.release();
    let mut ran = 0;
    let mut refused = Vec::new();
    for run in runs {
        match run.await.unwrap() {
            Ok(report) if report.status == StackStatus::Succeeded => ran += 1,
            Ok(report) => panic!("{report:#?}"),
            Err(e) => refused.push(e.to_string()),
        }
    }
    assert_eq!(ran, 1, "{refused:#?}");
    assert_eq!(refused.len(), 9);
    for message in &refused {
        assert!(
            message.contains("lifecycle-test"),
            "names the holder: {message}"
        );
    }
    for id in ["a", "b", "c"] {
        assert_eq!(rig.cloud.physical_ids("app", id).len(), 1, "{id} made once");
    }
}

#[tokio::test]
async fn a_deploy_that_cannot_go_on_after_taking_the_lock_releases_it() {
    let rig = Rig::new();
    let v1 = input("app", topics(&["a", "b"]));
    // A run dies after announcing its first call: a pending intent and its lock remain.
    rig.store.fail_after(2);
    assert!(
        deploy_stack(rig.engine.clone(), v1.clone(), options())
            .await
            .is_err()
    );
    rig.store.heal();
    rig.holders_gone
        .store(true, std::sync::atomic::Ordering::SeqCst);
    // The next run takes the lock, then its first write after it fails once.
    rig.store.fail_once_after(1);
    let e = deploy_stack(rig.engine.clone(), v1.clone(), options())
        .await
        .expect_err("the settling write failed");
    assert!(e.to_string().contains("injected fault"), "{e}");
    let state = rig.state("app").await;
    assert!(
        state.lock.is_none(),
        "the lock was released: {:?}",
        state.lock
    );
    // And the stack goes on from there.
    rig.holders_gone
        .store(false, std::sync::atomic::Ordering::SeqCst);
    deploy_ok(&rig, &v1).await;
    for id in ["a", "b"] {
        assert_eq!(rig.cloud.physical_ids("app", id).len(), 1, "{id} made once");
    }
}

/// A run that records no `DeployStarted` (here drift's revert) keeps its lease as a
/// deploy does: held three leases long by a slow call, its lock is renewed, another run
/// is refused naming it, and the revert ends recorded, the lock released.
#[tokio::test]
async fn a_drift_revert_keeps_its_lease_while_it_runs() {
    let rig = Rig::new();
    let lease = Duration::from_millis(300);
    let report = deploy_stack(leased(&rig, lease), input("app", topics(&["a"])), options())
        .await
        .unwrap();
    assert_eq!(report.status, StackStatus::Succeeded);
    let (topic, _) = rig.cloud.only("app", "a");
    rig.cloud.set_properties(
        &topic,
        json!({"TopicName": "a", "DisplayName": "out of band"}),
    );
    let gate = rig.cloud.block_once(Op::Update, "a");
    let revert = tokio::spawn(stackflow_engine::drift::drift_stack(
        leased(&rig, lease),
        "app",
        &[],
        stackflow_engine::drift::DriftMode::Revert,
    ));
    gate.entered().await;
    tokio::time::sleep(lease * 3).await;
    let other = deploy_stack(leased(&rig, lease), input("app", topics(&["a"])), options()).await;
    assert!(
        matches!(&other, Err(e) if e.to_string().contains("drift")),
        "the revert's lock is still held: {other:?}"
    );
    gate.release();
    let report = revert.await.unwrap().unwrap();
    assert_eq!(
        report.resources[0].status,
        stackflow_engine::drift::DriftStatus::Reverted,
        "{report:#?}"
    );
    let log = rig.events("app").await;
    assert!(
        !log.iter()
            .any(|e| matches!(e.event, Event::LockBroken { .. })),
        "nobody broke the lock"
    );
    assert!(rig.state("app").await.lock.is_none());
}
