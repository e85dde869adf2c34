//! The conformance suite against the in-memory store, the in-memory store next to the
//! embedded one, and the fault-injecting wrapper.

use std::sync::Arc;

use serde_json::json;
use stackflow_events::conformance;
use stackflow_events::event::{Event, Holder};
use stackflow_events::memory::{FaultyStore, MemoryStore, is_injected};
use stackflow_events::projection::StackState;
use stackflow_events::testing::history;
use stackflow_events::{Appended, EventStore, NewEvent, Precondition, StoreError, StreamId};

const PREFIX: &str = "conf";

#[tokio::test]
async fn appends_in_order_and_reads_back() {
    conformance::appends_in_order_and_reads_back(&MemoryStore::new(), PREFIX).await;
}

#[tokio::test]
async fn retried_append_is_a_no_op() {
    conformance::retried_append_is_a_no_op(&MemoryStore::new(), PREFIX).await;
}

#[tokio::test]
async fn conflicting_append_is_detected() {
    conformance::conflicting_append_is_detected(&MemoryStore::new(), PREFIX).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_appenders_lose_nothing() {
    conformance::concurrent_appenders_lose_nothing(Arc::new(MemoryStore::new()), PREFIX, 50).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lock_is_exclusive() {
    conformance::lock_is_exclusive(&MemoryStore::new(), PREFIX).await;
}

#[tokio::test]
async fn ordered_appends_end_a_run() {
    conformance::ordered_appends_end_a_run(&MemoryStore::new(), PREFIX).await;
}

#[tokio::test]
async fn fenced_lock_refuses_new_actions_only() {
    conformance::fenced_lock_refuses_new_actions_only(&MemoryStore::new(), PREFIX).await;
}

#[tokio::test]
async fn broken_lock() {
    conformance::broken_lock(&MemoryStore::new(), PREFIX).await;
}

#[tokio::test]
async fn streams_are_independent_and_listed() {
    conformance::streams_are_independent_and_listed(&MemoryStore::new(), PREFIX).await;
}

#[tokio::test]
async fn snapshots() {
    conformance::snapshots(&MemoryStore::new(), PREFIX).await;
}

#[tokio::test]
async fn large_event_round_trips() {
    conformance::large_event_round_trips(&MemoryStore::new(), PREFIX).await;
}

#[tokio::test]
async fn many_events_read_back_across_pages() {
    conformance::many_events_read_back_across_pages(&MemoryStore::new(), PREFIX).await;
}

/// The whole suite on one store.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn run_all() {
    conformance::run_all(Arc::new(MemoryStore::new()), "all").await;
}

/// The suite through the wrapper without a limit: it changes nothing, and counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn run_all_through_the_wrapper_without_a_limit() {
    let store = Arc::new(FaultyStore::new(MemoryStore::new()));
    conformance::run_all(Arc::clone(&store), "all").await;
    assert!(store.appended() > 300, "appends are counted: {store:?}");
    assert_eq!(store.injected(), 0);
    assert_eq!(store.limit(), None);
}

// ----- the in-memory store in particular -----

fn web() -> StreamId {
    StreamId::new("us-east-1", "web")
}

fn holder(deploy_id: &str) -> Holder {
    Holder {
        deploy_id: deploy_id.to_string(),
        who: format!("{deploy_id}@host"),
        since: "2024-05-01T12:00:00Z".to_string(),
        operation: "deploy".to_string(),
        expires: None,
        fenced: None,
    }
}

fn started(deploy_id: &str) -> NewEvent {
    NewEvent::new(
        format!("{deploy_id}/start"),
        Event::DeployStarted {
            deploy_id: deploy_id.to_string(),
            who: format!("{deploy_id}@host"),
            template_digest: "abc".to_string(),
            parameters: Default::default(),
            no_rollback: false,
            stack_id: None,
        },
    )
}

fn note(key: &str) -> NewEvent {
    NewEvent::new(
        key,
        Event::LockReleased {
            deploy_id: "d0".to_string(),
        },
    )
}

#[tokio::test]
async fn clones_share_the_streams() {
    let one = MemoryStore::new();
    let two = one.clone();
    one.append(
        &web(),
        &started("d1"),
        &Precondition::TakeLock(holder("d1")),
    )
    .await
    .unwrap();
    assert_eq!(two.lock_holder(&web()).await.unwrap(), Some(holder("d1")));
    assert_eq!(two.read(&web(), 0).await.unwrap().len(), 1);
    match two
        .append(
            &web(),
            &started("d2"),
            &Precondition::TakeLock(holder("d2")),
        )
        .await
    {
        Err(StoreError::Locked { holder: h }) => assert_eq!(*h, holder("d1")),
        other => panic!("the clone sees the lock, got {other:?}"),
    }
    assert!(
        format!("{one:?}").contains("events: 1"),
        "Debug shows the size: {one:?}"
    );
    // Another store shares nothing.
    assert!(MemoryStore::new().streams().await.unwrap().is_empty());
}

#[test]
fn is_send_sync_and_runs_without_a_runtime() {
    fn send_sync<T: Send + Sync + Clone + 'static>() {}
    send_sync::<MemoryStore>();
    send_sync::<FaultyStore<MemoryStore>>();
    // No tokio runtime: the futures complete at the first poll.
    let store = MemoryStore::new();
    let appended = futures_now(store.append(&web(), &note("k"), &Precondition::None));
    assert_eq!(appended.unwrap(), Appended::New(1));
}

/// Polls a future that must be ready at once.
fn futures_now<F: std::future::Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match f.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => v,
        std::task::Poll::Pending => panic!("the in-memory store never waits"),
    }
}

/// The same operations on the in-memory and the embedded store give the same answers
/// and the same streams (times aside).
#[cfg(feature = "embedded")]
#[tokio::test]
async fn answers_as_the_embedded_store_does() {
    use stackflow_events::sqlite::SqliteStore;

    let memory = MemoryStore::new();
    let sqlite = SqliteStore::open_in_memory().unwrap();
    let other = StreamId::new("eu-west-1", "web");
    let steps: Vec<(StreamId, NewEvent, Precondition)> = vec![
        (web(), started("d1"), Precondition::TakeLock(holder("d1"))),
        (web(), started("d2"), Precondition::TakeLock(holder("d2"))),
        (web(), started("d1"), Precondition::TakeLock(holder("d1"))),
        (web(), note("n1"), Precondition::HoldsLock("d2".into())),
        (web(), note("n1"), Precondition::HoldsLock("d1".into())),
        (web(), started("d1"), Precondition::None),
        (
            web(),
            NewEvent::new(
                "n1",
                Event::StackDestroyed {
                    deploy_id: "x".into(),
                },
            ),
            Precondition::None,
        ),
        (
            other.clone(),
            note("n1"),
            Precondition::ReleaseLock("d9".into()),
        ),
        (web(), note("r1"), Precondition::ReleaseLock("d2".into())),
        (web(), note("r1"), Precondition::ReleaseLock("d1".into())),
        (web(), note("r2"), Precondition::ReleaseLock("d1".into())),
        (web(), note("r2"), Precondition::ReleaseLock("d1".into())),
        (web(), started("d2"), Precondition::TakeLock(holder("d2"))),
    ];
    for (i, (stream, event, pre)) in steps.iter().enumerate() {
        let m = memory.append(stream, event, pre).await;
        let s = sqlite.append(stream, event, pre).await;
        assert_eq!(
            format!("{m:?}"),
            format!("{s:?}"),
            "step {i}: {} {pre:?}",
            event.key
        );
    }
    let (m, s) = (
        memory.break_lock(&web(), "admin").await,
        sqlite.break_lock(&web(), "admin").await,
    );
    assert_eq!(format!("{m:?}"), format!("{s:?}"), "break_lock");
    for stream in [web(), other.clone(), StreamId::new("us-east-1", "none")] {
        // Times aside: a LockBroken's key carries the time of the break.
        let strip = |events: Vec<stackflow_events::StoredEvent>| -> Vec<_> {
            events
                .into_iter()
                .map(|e| {
                    let key = match e.key.rsplit_once('/') {
                        Some((head, _)) if e.key.starts_with("lock-broken/") => head.to_string(),
                        _ => e.key,
                    };
                    (e.seq, key, e.v, e.event)
                })
                .collect()
        };
        assert_eq!(
            strip(memory.read(&stream, 0).await.unwrap()),
            strip(sqlite.read(&stream, 0).await.unwrap()),
            "events of {stream}"
        );
        assert_eq!(
            memory.lock_holder(&stream).await.unwrap(),
            sqlite.lock_holder(&stream).await.unwrap()
        );
    }
    for (seq, body) in [
        (5, json!({"a": 1})),
        (9, json!({"b": 2.5})),
        (7, json!({"c": [1]})),
    ] {
        memory.put_snapshot(&web(), seq, &body).await.unwrap();
        sqlite.put_snapshot(&web(), seq, &body).await.unwrap();
        assert_eq!(
            memory.latest_snapshot(&web()).await.unwrap(),
            sqlite.latest_snapshot(&web()).await.unwrap(),
            "latest snapshot after putting {seq}"
        );
    }
    // A snapshot does not make a stream.
    memory
        .put_snapshot(&StreamId::new("x", "y"), 1, &json!({}))
        .await
        .unwrap();
    sqlite
        .put_snapshot(&StreamId::new("x", "y"), 1, &json!({}))
        .await
        .unwrap();
    assert_eq!(
        memory.streams().await.unwrap(),
        sqlite.streams().await.unwrap()
    );
}

#[tokio::test]
async fn load_state_folds_a_history_from_memory() {
    let store = MemoryStore::new();
    let events = history(406);
    for e in &events {
        store.append(&web(), e, &Precondition::None).await.unwrap();
    }
    let read = store.read(&web(), 0).await.unwrap();
    assert_eq!(read.len(), 406);
    let state = stackflow_events::load_state(&store, &web()).await.unwrap();
    assert_eq!(state, StackState::fold(&read));
    assert_eq!(state.resources.len(), 100);
    store
        .put_snapshot(
            &web(),
            203,
            &StackState::fold_until(&read, 203).to_snapshot(),
        )
        .await
        .unwrap();
    assert_eq!(
        stackflow_events::load_state(&store, &web()).await.unwrap(),
        state,
        "snapshot plus the rest"
    );
}

// ----- the fault-injecting wrapper -----

#[tokio::test]
async fn the_wrapper_fails_every_write_after_the_limit() {
    let store = MemoryStore::new();
    let faulty = FaultyStore::failing_after(store.clone(), 2);
    assert_eq!(faulty.limit(), Some(2));
    faulty
        .append(
            &web(),
            &started("d1"),
            &Precondition::TakeLock(holder("d1")),
        )
        .await
        .unwrap();
    // A refused append does not count.
    assert!(matches!(
        faulty
            .append(
                &web(),
                &started("d2"),
                &Precondition::TakeLock(holder("d2"))
            )
            .await,
        Err(StoreError::Locked { .. })
    ));
    assert_eq!(faulty.appended(), 1);
    assert!(!faulty.is_dead());
    // A retried append counts: it succeeded.
    assert_eq!(
        faulty
            .append(
                &web(),
                &started("d1"),
                &Precondition::TakeLock(holder("d1"))
            )
            .await
            .unwrap(),
        Appended::AlreadyThere(1)
    );
    assert_eq!(faulty.appended(), 2);
    assert!(faulty.is_dead());

    for result in [
        faulty
            .append(&web(), &note("n"), &Precondition::None)
            .await
            .map(|_| ()),
        faulty.break_lock(&web(), "admin").await.map(|_| ()),
        faulty.put_snapshot(&web(), 1, &json!({})).await,
    ] {
        match result {
            Err(e) => {
                assert!(is_injected(&e), "an injected fault: {e:?}");
                assert!(e.to_string().contains("after 2 successful appends"), "{e}");
            }
            Ok(()) => panic!("a write after the limit must fail"),
        }
    }
    assert_eq!(faulty.injected(), 3);
    // The append and the break_lock were writes to the log; the snapshot was not.
    assert_eq!(faulty.refused_appends(), 2);
    assert!(!is_injected(&StoreError::Backend("disk full".into())));
    // Nothing reached the store; reads go through.
    assert_eq!(faulty.read(&web(), 0).await.unwrap().len(), 1);
    assert_eq!(
        faulty.lock_holder(&web()).await.unwrap(),
        Some(holder("d1"))
    );
    assert_eq!(store.latest_snapshot(&web()).await.unwrap(), None);

    // Healed, it goes on.
    faulty.heal();
    assert_eq!(faulty.limit(), None);
    faulty
        .append(&web(), &note("n"), &Precondition::None)
        .await
        .unwrap();
    assert_eq!(
        faulty.break_lock(&web(), "admin").await.unwrap(),
        Some(holder("d1"))
    );
    assert_eq!(faulty.appended(), 4, "a break_lock that appended counts");
    assert_eq!(faulty.break_lock(&web(), "admin").await.unwrap(), None);
    assert_eq!(
        faulty.appended(),
        4,
        "a break_lock that appended nothing does not"
    );
    assert_eq!(store.read(&web(), 0).await.unwrap().len(), 3);
    assert_eq!(faulty.into_inner().read(&web(), 0).await.unwrap().len(), 3);
}

#[tokio::test]
async fn a_limit_of_zero_fails_the_first_append() {
    let faulty = FaultyStore::failing_after(MemoryStore::new(), 0);
    let e = faulty
        .append(&web(), &note("n"), &Precondition::None)
        .await
        .unwrap_err();
    assert!(is_injected(&e));
    assert!(faulty.inner().streams().await.unwrap().is_empty());
}

/// Concurrent appenders never get past the limit, and clones share it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_appends_stop_exactly_at_the_limit() {
    let store = MemoryStore::new();
    let faulty = FaultyStore::failing_after(store.clone(), 17);
    let tasks: Vec<_> = (0..64)
        .map(|i| {
            let faulty = faulty.clone();
            tokio::spawn(async move {
                faulty
                    .append(&web(), &note(&format!("k{i}")), &Precondition::None)
                    .await
            })
        })
        .collect();
    let mut ok = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(_) => ok += 1,
            Err(e) => assert!(is_injected(&e), "{e:?}"),
        }
    }
    assert_eq!(ok, 17);
    assert_eq!(faulty.appended(), 17);
    assert_eq!(faulty.injected(), 64 - 17);
    assert_eq!(store.read(&web(), 0).await.unwrap().len(), 17);
}

/// What the engine's tests do: stop after every N appends, then run again without a
/// limit; here the "run" appends a history in order, skipping what is already there.
#[tokio::test]
async fn a_run_killed_after_every_append_finishes_when_run_again() {
    let events = history(10);
    async fn run<S: EventStore>(store: &S, events: &[NewEvent]) -> Result<(), StoreError> {
        for e in events {
            store.append(&web(), e, &Precondition::None).await?;
        }
        Ok(())
    }
    let whole = FaultyStore::new(MemoryStore::new());
    run(&whole, &events).await.unwrap();
    let total = whole.appended();
    assert_eq!(total, 10);
    for n in 0..total {
        let store = MemoryStore::new();
        let killed = FaultyStore::failing_after(store.clone(), n);
        assert!(is_injected(&run(&killed, &events).await.unwrap_err()));
        assert_eq!(killed.appended(), n);
        assert_eq!(store.read(&web(), 0).await.unwrap().len() as u64, n);
        run(&store, &events).await.unwrap();
        assert_eq!(
            store.read(&web(), 0).await.unwrap().len() as u64,
            total,
            "killed after {n}"
        );
    }
}
