//! The conformance suite every [`EventStore`] passes.
//!
//! Each function checks one part of the store contract against a live store and panics
//! with a message naming the violation; they are meant to be called from `#[tokio::test]`s
//! (prefer the multi-threaded runtime, so that concurrent appenders really run at once).
//! Every stream a function touches is named after `prefix`, so that runs sharing one store
//! (a DynamoDB table, say) never see each other's events: pass a prefix unique to the run.

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, SystemTime};

use indexmap::IndexMap;
use serde_json::{Map, Value, json};

use crate::event::{
    Baseline, Event, Holder, NewEvent, ProviderKind, ResourceRecord, StoredEvent, current_version,
    now,
};
use crate::store::{Appended, EventStore, Precondition, StoreError, StoreResult, StreamId};

/// The region of the streams the suite writes (one test also uses [`OTHER_REGION`]).
pub const REGION: &str = "us-east-1";

/// A second region, to check that one stack in two regions makes two streams.
pub const OTHER_REGION: &str = "eu-west-1";

/// How many concurrent appenders [`run_all`] uses.
pub const DEFAULT_APPENDERS: usize = 50;

/// Runs every check of the suite, one after the other.
pub async fn run_all<S: EventStore + 'static>(store: Arc<S>, prefix: &str) {
    appends_in_order_and_reads_back(&*store, prefix).await;
    retried_append_is_a_no_op(&*store, prefix).await;
    conflicting_append_is_detected(&*store, prefix).await;
    concurrent_appenders_lose_nothing(Arc::clone(&store), prefix, DEFAULT_APPENDERS).await;
    lock_is_exclusive(&*store, prefix).await;
    broken_lock(&*store, prefix).await;
    streams_are_independent_and_listed(&*store, prefix).await;
    snapshots(&*store, prefix).await;
    large_event_round_trips(&*store, prefix).await;
    many_events_read_back_across_pages(&*store, prefix).await;
}

/// Appends three events to a new stream and reads them back, whole and from a position;
/// an unknown stream reads as empty.
pub async fn appends_in_order_and_reads_back<S: EventStore>(store: &S, prefix: &str) {
    let stream = stream(prefix, "in-order");
    let events = [
        NewEvent::new("d1/start", deploy_started("d1")),
        NewEvent::new(
            "d1/Bucket/create/done",
            resource_created("d1", "Bucket", "b-1"),
        ),
        NewEvent::new(
            "d1/Queue/create/done",
            resource_created("d1", "Queue", "q-1"),
        ),
    ];
    let before = SystemTime::now();
    for (i, event) in events.iter().enumerate() {
        let appended = ok(
            store.append(&stream, event, &Precondition::None).await,
            "append to a new stream",
        );
        assert_eq!(
            appended,
            Appended::New(i as u64 + 1),
            "event {} appended to a new stream must be new at position {}",
            event.key,
            i + 1
        );
    }
    let after = SystemTime::now();

    let read = ok(store.read(&stream, 0).await, "read(after = 0)");
    assert_eq!(
        read.len(),
        3,
        "read(after = 0) of 3 appended events: {read:#?}"
    );
    for (i, (stored, sent)) in read.iter().zip(&events).enumerate() {
        assert_eq!(stored.seq, i as u64 + 1, "seq of event {}", sent.key);
        assert_eq!(stored.key, sent.key, "key of event {}", stored.seq);
        assert_eq!(
            stored.v,
            current_version(sent.event.type_name()),
            "schema version of event {}",
            sent.key
        );
        assert_eq!(stored.event, sent.event, "event {} read back", sent.key);
        check_time(&stored.at, before, after, &sent.key);
    }

    let tail = ok(store.read(&stream, 2).await, "read(after = 2)");
    assert_eq!(
        tail,
        read[2..].to_vec(),
        "read(after = 2) must give only the third event"
    );
    let past_end = ok(store.read(&stream, 3).await, "read(after = 3)");
    assert!(
        past_end.is_empty(),
        "read(after = last) must be empty, got {past_end:#?}"
    );

    let unknown = ok(
        store.read(&self::stream(prefix, "never-written"), 0).await,
        "read of an unknown stream",
    );
    assert!(
        unknown.is_empty(),
        "an unknown stream must read as empty, got {unknown:#?}"
    );
}

/// Appending the same key with the same content again is a no-op reporting the first
/// position, even after other appends.
pub async fn retried_append_is_a_no_op<S: EventStore>(store: &S, prefix: &str) {
    let stream = stream(prefix, "retry");
    let first = NewEvent::new("d1/start", deploy_started("d1"));
    let second = NewEvent::new(
        "d1/Bucket/create/done",
        resource_created("d1", "Bucket", "b"),
    );

    let seq = ok(
        store.append(&stream, &first, &Precondition::None).await,
        "first append",
    );
    assert!(
        matches!(seq, Appended::New(_)),
        "first append must be new, got {seq:?}"
    );
    let again = ok(
        store.append(&stream, &first, &Precondition::None).await,
        "retried append",
    );
    assert_eq!(
        again,
        Appended::AlreadyThere(seq.seq()),
        "a retried append (same key, same content) must report the first position"
    );
    ok(
        store.append(&stream, &second, &Precondition::None).await,
        "second event",
    );
    let late = ok(
        store.append(&stream, &first, &Precondition::None).await,
        "retried append after another event",
    );
    assert_eq!(
        late,
        Appended::AlreadyThere(seq.seq()),
        "a retried append after other appends must still report the first position"
    );

    let read = ok(store.read(&stream, 0).await, "read");
    assert_eq!(
        keys(&read),
        ["d1/start", "d1/Bucket/create/done"],
        "retries must not duplicate events"
    );
    assert_eq!(read[0].seq, seq.seq(), "position of the retried event");
}

/// Appending the same key with other content is a [`StoreError::Conflict`], and writes
/// nothing.
pub async fn conflicting_append_is_detected<S: EventStore>(store: &S, prefix: &str) {
    let stream = stream(prefix, "conflict");
    let key = "d1/Bucket/create/done";
    let original = NewEvent::new(key, resource_created("d1", "Bucket", "bucket-one"));
    let other = NewEvent::new(key, resource_created("d1", "Bucket", "bucket-two"));

    ok(
        store.append(&stream, &original, &Precondition::None).await,
        "first append",
    );
    match store.append(&stream, &other, &Precondition::None).await {
        Err(StoreError::Conflict { key: k }) => {
            assert_eq!(k, key, "the conflict must name the key")
        }
        other => panic!(
            "appending other content under an existing key must be a Conflict, got {other:?}"
        ),
    }
    let read = ok(store.read(&stream, 0).await, "read");
    assert_eq!(
        read.len(),
        1,
        "a conflicting append must write nothing: {read:#?}"
    );
    assert_eq!(
        read[0].event, original.event,
        "the original event must be kept"
    );
}

/// `n` tasks append distinct events to one stream at once, each retrying its append once;
/// none is lost or duplicated and every reported position is the one read back.
pub async fn concurrent_appenders_lose_nothing<S: EventStore + 'static>(
    store: Arc<S>,
    prefix: &str,
    n: usize,
) {
    let stream = stream(prefix, "concurrent");
    let barrier = Arc::new(tokio::sync::Barrier::new(n));
    let mut tasks = Vec::with_capacity(n);
    for i in 0..n {
        let store = Arc::clone(&store);
        let stream = stream.clone();
        let barrier = Arc::clone(&barrier);
        tasks.push(tokio::spawn(async move {
            let event = NewEvent::new(
                format!("d1/Res{i}/create/done"),
                resource_created("d1", &format!("Res{i}"), &format!("phys-{i}")),
            );
            barrier.wait().await;
            let first = store.append(&stream, &event, &Precondition::None).await;
            let retry = store.append(&stream, &event, &Precondition::None).await;
            (event.key, first, retry)
        }));
    }
    let mut reported = IndexMap::new();
    for task in tasks {
        let (key, first, retry) = task.await.expect("an appender task panicked");
        let first = ok(first, &format!("concurrent append of {key}"));
        let retry = ok(retry, &format!("retried concurrent append of {key}"));
        assert!(
            matches!(first, Appended::New(_)),
            "the first append of {key} must be new, got {first:?}"
        );
        assert_eq!(
            retry,
            Appended::AlreadyThere(first.seq()),
            "the retried append of {key} must report the first position"
        );
        reported.insert(key, first.seq());
    }

    let read = ok(
        store.read(&stream, 0).await,
        "read after concurrent appends",
    );
    assert_eq!(
        read.len(),
        n,
        "{n} concurrent appenders must leave exactly {n} events, found {}",
        read.len()
    );
    let unique: HashSet<&str> = read.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(unique.len(), n, "keys must be unique: {:?}", keys(&read));
    for pair in read.windows(2) {
        assert!(
            pair[0].seq < pair[1].seq,
            "positions must strictly increase: {} then {}",
            pair[0].seq,
            pair[1].seq
        );
    }
    for stored in &read {
        assert_eq!(
            reported.get(&stored.key),
            Some(&stored.seq),
            "event {} is read at {} but its append reported another position",
            stored.key,
            stored.seq
        );
    }
}

/// The stack's lock admits one deploy at a time; the holder may append under it, retry
/// taking it and release it.
pub async fn lock_is_exclusive<S: EventStore>(store: &S, prefix: &str) {
    let stream = stream(prefix, "lock");
    let h1 = holder("d1");
    let h2 = holder("d2");
    let take1 = NewEvent::new("d1/start", deploy_started("d1"));
    let take2 = NewEvent::new("d2/start", deploy_started("d2"));

    ok(
        store
            .append(&stream, &take1, &Precondition::TakeLock(h1.clone()))
            .await,
        "TakeLock on a free lock",
    );
    assert_eq!(
        ok(store.lock_holder(&stream).await, "lock_holder"),
        Some(h1.clone()),
        "the lock must be held by the deploy that took it"
    );

    match store
        .append(&stream, &take2, &Precondition::TakeLock(h2.clone()))
        .await
    {
        Err(StoreError::Locked { holder }) => {
            assert_eq!(holder, h1, "Locked must name the holder")
        }
        other => panic!("TakeLock on a held lock must be Locked, got {other:?}"),
    }
    assert_eq!(
        count(store, &stream).await,
        1,
        "a refused TakeLock must append nothing"
    );

    ok(
        store
            .append(
                &stream,
                &NewEvent::new("d1/lock-again", Event::LockTaken { holder: h1.clone() }),
                &Precondition::TakeLock(h1.clone()),
            )
            .await,
        "TakeLock by the deploy already holding the lock (another key)",
    );
    ok(
        store
            .append(
                &stream,
                &NewEvent::new(
                    "d1/Bucket/create/done",
                    resource_created("d1", "Bucket", "b"),
                ),
                &Precondition::HoldsLock("d1".into()),
            )
            .await,
        "HoldsLock by the holder",
    );
    match store
        .append(
            &stream,
            &NewEvent::new(
                "d2/Bucket/create/done",
                resource_created("d2", "Bucket", "b"),
            ),
            &Precondition::HoldsLock("d2".into()),
        )
        .await
    {
        Err(StoreError::NotHolder { deploy_id, holder }) => {
            assert_eq!(deploy_id, "d2", "NotHolder must name the deploy");
            assert_eq!(holder, Some(h1.clone()), "NotHolder must name the holder");
        }
        other => panic!("HoldsLock by another deploy must be NotHolder, got {other:?}"),
    }
    assert_eq!(
        count(store, &stream).await,
        3,
        "a refused HoldsLock must append nothing"
    );

    let release = NewEvent::new(
        "d1/done",
        Event::LockReleased {
            deploy_id: "d1".into(),
        },
    );
    let released = ok(
        store
            .append(&stream, &release, &Precondition::ReleaseLock("d1".into()))
            .await,
        "ReleaseLock by the holder",
    );
    assert!(
        matches!(released, Appended::New(_)),
        "ReleaseLock must append, got {released:?}"
    );
    assert_eq!(
        ok(store.lock_holder(&stream).await, "lock_holder"),
        None,
        "ReleaseLock must free the lock"
    );
    assert_eq!(
        ok(
            store
                .append(&stream, &release, &Precondition::ReleaseLock("d1".into()))
                .await,
            "retried ReleaseLock",
        ),
        Appended::AlreadyThere(released.seq()),
        "a retried ReleaseLock (same key) must be a no-op"
    );
    match store
        .append(
            &stream,
            &NewEvent::new("d1/late", resource_created("d1", "Late", "l")),
            &Precondition::HoldsLock("d1".into()),
        )
        .await
    {
        Err(StoreError::NotHolder { deploy_id, holder }) => {
            assert_eq!(deploy_id, "d1", "NotHolder must name the deploy");
            assert_eq!(holder, None, "nobody holds the released lock");
        }
        other => panic!("HoldsLock after the release must be NotHolder, got {other:?}"),
    }
    ok(
        store
            .append(
                &stream,
                &NewEvent::new(
                    "d1/release-again",
                    Event::LockReleased {
                        deploy_id: "d1".into(),
                    },
                ),
                &Precondition::ReleaseLock("d1".into()),
            )
            .await,
        "ReleaseLock (another key) on a free lock",
    );

    // The refused append left no trace: its key is free for the deploy now.
    let taken = ok(
        store
            .append(&stream, &take2, &Precondition::TakeLock(h2.clone()))
            .await,
        "TakeLock of the freed lock with the key refused before",
    );
    assert!(
        matches!(taken, Appended::New(_)),
        "the key of a refused append must stay free, got {taken:?}"
    );
    match store
        .append(
            &stream,
            &NewEvent::new(
                "d1/release-late",
                Event::LockReleased {
                    deploy_id: "d1".into(),
                },
            ),
            &Precondition::ReleaseLock("d1".into()),
        )
        .await
    {
        Err(StoreError::NotHolder { deploy_id, holder }) => {
            assert_eq!(deploy_id, "d1", "NotHolder must name the deploy");
            assert_eq!(holder, Some(h2.clone()), "NotHolder must name the holder");
        }
        other => panic!("ReleaseLock of another deploy's lock must be NotHolder, got {other:?}"),
    }
    assert_eq!(
        ok(store.lock_holder(&stream).await, "lock_holder"),
        Some(h2.clone()),
        "a refused ReleaseLock must keep the lock"
    );
    assert_eq!(
        keys(&ok(store.read(&stream, 0).await, "read")),
        [
            "d1/start",
            "d1/lock-again",
            "d1/Bucket/create/done",
            "d1/done",
            "d1/release-again",
            "d2/start",
        ],
        "the stream after the lock sequence"
    );

    // Many deploys race for one free lock: exactly one wins.
    let race = self::stream(prefix, "lock-race");
    let racers = 10;
    let race_stream = &race;
    let attempts = (0..racers).map(move |i| {
        let deploy = format!("race-{i}");
        let event = NewEvent::new(format!("{deploy}/start"), deploy_started(&deploy));
        let pre = Precondition::TakeLock(holder(&deploy));
        async move { store.append(race_stream, &event, &pre).await }
    });
    let results = join_all(attempts.collect()).await;
    let winners: Vec<usize> = (0..racers).filter(|&i| results[i].is_ok()).collect();
    assert_eq!(
        winners.len(),
        1,
        "exactly one of {racers} concurrent TakeLocks must win: {results:?}"
    );
    let winner = holder(&format!("race-{}", winners[0]));
    for (i, result) in results.iter().enumerate() {
        match result {
            Ok(_) => {}
            Err(StoreError::Locked { holder }) => assert_eq!(
                holder, &winner,
                "racer {i} was refused naming another holder than the winner"
            ),
            Err(e) => panic!("racer {i} must be refused with Locked, got {e:?}"),
        }
    }
    assert_eq!(
        ok(store.lock_holder(&race).await, "lock_holder after the race"),
        Some(winner.clone()),
        "the winner must hold the lock"
    );
    let read = ok(store.read(&race, 0).await, "read after the race");
    assert_eq!(
        keys(&read),
        [format!("{}/start", winner.deploy_id)],
        "only the winner's event must be appended"
    );
}

/// Breaking a held lock frees it and records who broke it; breaking a free lock does
/// nothing.
pub async fn broken_lock<S: EventStore>(store: &S, prefix: &str) {
    let stream = stream(prefix, "broken-lock");
    let h1 = holder("d1");
    ok(
        store
            .append(
                &stream,
                &NewEvent::new("d1/start", deploy_started("d1")),
                &Precondition::TakeLock(h1.clone()),
            )
            .await,
        "TakeLock",
    );
    let broken = ok(
        store.break_lock(&stream, "admin@laptop").await,
        "break_lock of a held lock",
    );
    assert_eq!(
        broken,
        Some(h1.clone()),
        "break_lock must return the holder"
    );
    assert_eq!(
        ok(store.lock_holder(&stream).await, "lock_holder"),
        None,
        "break_lock must free the lock"
    );
    let read = ok(store.read(&stream, 0).await, "read");
    assert_eq!(read.len(), 2, "break_lock must append one event: {read:#?}");
    assert_eq!(
        read[1].event,
        Event::LockBroken {
            by: "admin@laptop".into(),
            previous: h1.clone(),
        },
        "break_lock must append LockBroken naming who broke it and the holder"
    );

    // The broken deploy can no longer append; another can take the lock.
    match store
        .append(
            &stream,
            &NewEvent::new(
                "d1/Bucket/create/done",
                resource_created("d1", "Bucket", "b"),
            ),
            &Precondition::HoldsLock("d1".into()),
        )
        .await
    {
        Err(StoreError::NotHolder { holder: None, .. }) => {}
        other => panic!("the deploy whose lock was broken must be NotHolder, got {other:?}"),
    }
    ok(
        store
            .append(
                &stream,
                &NewEvent::new("d2/start", deploy_started("d2")),
                &Precondition::TakeLock(holder("d2")),
            )
            .await,
        "TakeLock after break_lock",
    );

    let free = self::stream(prefix, "free-lock");
    ok(
        store
            .append(
                &free,
                &NewEvent::new(
                    "d3/Bucket/create/done",
                    resource_created("d3", "Bucket", "b"),
                ),
                &Precondition::None,
            )
            .await,
        "append without the lock",
    );
    assert_eq!(
        ok(
            store.break_lock(&free, "admin@laptop").await,
            "break_lock of a free lock"
        ),
        None,
        "break_lock of a free lock must return None"
    );
    assert_eq!(
        count(store, &free).await,
        1,
        "break_lock of a free lock must append nothing"
    );
    assert_eq!(
        ok(
            store
                .break_lock(&self::stream(prefix, "never-written"), "admin@laptop")
                .await,
            "break_lock of an unknown stream",
        ),
        None,
        "break_lock of an unknown stream must return None"
    );
}

/// Streams of different stacks, and of one stack in two regions, are separate: events,
/// keys and locks; [`EventStore::streams`] lists each.
pub async fn streams_are_independent_and_listed<S: EventStore>(store: &S, prefix: &str) {
    let a = stream(prefix, "web");
    let b = stream(prefix, "db");
    let c = StreamId::new(OTHER_REGION, format!("{prefix}-web"));
    // The same key in each, with different content: keys are per stream.
    for (s, physical) in [(&a, "a"), (&b, "b"), (&c, "c")] {
        let appended = ok(
            store
                .append(
                    s,
                    &NewEvent::new(
                        "d1/Bucket/create/done",
                        resource_created("d1", "Bucket", physical),
                    ),
                    &Precondition::TakeLock(holder(&format!("d-{physical}"))),
                )
                .await,
            &format!("append to {s}"),
        );
        assert_eq!(
            appended,
            Appended::New(1),
            "the first event of {s} must be new at 1 (keys and positions are per stream)"
        );
    }
    ok(
        store
            .append(
                &a,
                &NewEvent::new(
                    "d1/Queue/create/done",
                    resource_created("d1", "Queue", "a2"),
                ),
                &Precondition::None,
            )
            .await,
        "second append to the first stream",
    );
    for (s, physicals) in [(&a, vec!["a", "a2"]), (&b, vec!["b"]), (&c, vec!["c"])] {
        let read = ok(store.read(s, 0).await, &format!("read {s}"));
        let seen: Vec<&str> = read.iter().map(|e| physical_id(&e.event)).collect();
        assert_eq!(seen, physicals, "{s} must hold its own events only");
    }
    for (s, physical) in [(&a, "a"), (&b, "b"), (&c, "c")] {
        assert_eq!(
            ok(store.lock_holder(s).await, "lock_holder"),
            Some(holder(&format!("d-{physical}"))),
            "each stream has its own lock"
        );
    }

    let listed = ok(store.streams().await, "streams()");
    for s in [&a, &b, &c] {
        assert!(
            listed.contains(s),
            "streams() must list {s:?}, got {listed:?}"
        );
    }
    let never = stream(prefix, "never-written");
    assert!(
        !listed.contains(&never),
        "streams() must not list a stream never written"
    );
}

/// The latest snapshot of a stream is the one covering the most events.
pub async fn snapshots<S: EventStore>(store: &S, prefix: &str) {
    let stream = stream(prefix, "snapshots");
    let body5 = json!({"resources": {"Bucket": {"physical_id": "b-1"}}, "seq": 5});
    let body9 = json!({
        "resources": {"Bucket": {"physical_id": "b-1"}, "Queue": {"physical_id": "q-1"}},
        "seq": 9,
        "list": [1, 2.5, "three", null, true],
    });
    assert_eq!(
        ok(store.latest_snapshot(&stream).await, "latest_snapshot"),
        None,
        "a stream without snapshots has none"
    );
    ok(
        store.put_snapshot(&stream, 5, &body5).await,
        "put_snapshot(5)",
    );
    assert_eq!(
        ok(store.latest_snapshot(&stream).await, "latest_snapshot"),
        Some((5, body5)),
        "the only snapshot is the latest"
    );
    ok(
        store.put_snapshot(&stream, 9, &body9).await,
        "put_snapshot(9)",
    );
    assert_eq!(
        ok(store.latest_snapshot(&stream).await, "latest_snapshot"),
        Some((9, body9)),
        "the snapshot at 9 is the latest"
    );
    assert_eq!(
        ok(
            store
                .latest_snapshot(&self::stream(prefix, "never-written"))
                .await,
            "latest_snapshot of an unknown stream",
        ),
        None,
        "an unknown stream has no snapshot"
    );
}

/// An event of about 500 KB appends, deduplicates and reads back whole.
pub async fn large_event_round_trips<S: EventStore>(store: &S, prefix: &str) {
    let stream = stream(prefix, "large");
    let large = NewEvent::new(
        "d1/Big/create/done",
        resource_created_with("d1", "Big", "big-1", 500 * 1024),
    );
    let small = NewEvent::new("d1/Small/create/done", resource_created("d1", "Small", "s"));
    ok(
        store.append(&stream, &small, &Precondition::None).await,
        "small event before",
    );
    let appended = ok(
        store.append(&stream, &large, &Precondition::None).await,
        "append of a 500 KB event",
    );
    assert_eq!(
        ok(
            store.append(&stream, &large, &Precondition::None).await,
            "retried append of a 500 KB event",
        ),
        Appended::AlreadyThere(appended.seq()),
        "a retried large append must be a no-op"
    );
    let changed = NewEvent::new(
        "d1/Big/create/done",
        resource_created_with("d1", "Big", "big-2", 500 * 1024),
    );
    match store.append(&stream, &changed, &Precondition::None).await {
        Err(StoreError::Conflict { .. }) => {}
        other => panic!("other large content under the same key must conflict, got {other:?}"),
    }
    let after = NewEvent::new("d1/After/create/done", resource_created("d1", "After", "a"));
    ok(
        store.append(&stream, &after, &Precondition::None).await,
        "small event after",
    );

    let read = ok(store.read(&stream, 0).await, "read");
    assert_eq!(
        keys(&read),
        [small.key.clone(), large.key.clone(), after.key.clone()],
        "events read back"
    );
    assert_eq!(read[1].seq, appended.seq(), "position of the large event");
    assert!(
        read[1].event == large.event,
        "the 500 KB event must read back equal"
    );
    let tail = ok(store.read(&stream, read[0].seq).await, "read(after = 1)");
    assert!(
        tail.len() == 2 && tail[0].event == large.event,
        "read from a position must include the large event whole"
    );
}

/// 300 events of about 5 KB (1.5 MB, more than one DynamoDB page) read back in order.
pub async fn many_events_read_back_across_pages<S: EventStore>(store: &S, prefix: &str) {
    let stream = stream(prefix, "many");
    let total = 300;
    let events: Vec<NewEvent> = (0..total)
        .map(|i| {
            NewEvent::new(
                format!("d1/Res{i:03}/create/done"),
                resource_created_with("d1", &format!("Res{i:03}"), &format!("p-{i}"), 5 * 1024),
            )
        })
        .collect();
    for event in &events {
        ok(
            store.append(&stream, event, &Precondition::None).await,
            &format!("append {}", event.key),
        );
    }
    let read = ok(store.read(&stream, 0).await, "read of 300 events");
    assert_eq!(
        read.len(),
        total,
        "all {total} events must read back (a paged read must follow every page)"
    );
    for pair in read.windows(2) {
        assert!(
            pair[0].seq < pair[1].seq,
            "positions must increase: {} then {}",
            pair[0].seq,
            pair[1].seq
        );
    }
    for (i, (stored, sent)) in read.iter().zip(&events).enumerate() {
        assert_eq!(stored.key, sent.key, "event {i} is out of order");
        assert!(
            stored.event == sent.event,
            "event {} read back differs",
            sent.key
        );
    }
    let from = read[99].seq;
    let tail = ok(store.read(&stream, from).await, "read(after = 100th)");
    assert_eq!(tail.len(), total - 100, "read after the 100th event");
    assert_eq!(tail[0].key, events[100].key, "first event after the 100th");
}

// ----- helpers -----

/// The stream `<prefix>-<name>` in [`REGION`].
fn stream(prefix: &str, name: &str) -> StreamId {
    StreamId::new(REGION, format!("{prefix}-{name}"))
}

/// A lock holder for `deploy_id`.
fn holder(deploy_id: &str) -> Holder {
    Holder {
        deploy_id: deploy_id.to_string(),
        who: "tester@conformance".to_string(),
        since: "2024-05-01T12:00:00.000Z".to_string(),
        operation: "deploy".to_string(),
    }
}

fn deploy_started(deploy_id: &str) -> Event {
    Event::DeployStarted {
        deploy_id: deploy_id.to_string(),
        who: "tester@conformance".to_string(),
        template_digest: "0123456789abcdef".to_string(),
        parameters: IndexMap::from([
            ("Env".to_string(), json!("test")),
            ("Password".to_string(), json!("****")),
        ]),
        no_rollback: false,
        stack_id: None,
    }
}

fn resource_created(deploy_id: &str, logical_id: &str, physical_id: &str) -> Event {
    resource_created_with(deploy_id, logical_id, physical_id, 0)
}

/// A `ResourceCreated` whose properties hold a string of `padding` bytes.
fn resource_created_with(
    deploy_id: &str,
    logical_id: &str,
    physical_id: &str,
    padding: usize,
) -> Event {
    let mut properties = Map::new();
    properties.insert("Name".into(), json!(physical_id));
    properties.insert(
        "Tags".into(),
        json!([{"Key": "team", "Value": "ünïcødé ✓"}]),
    );
    if padding > 0 {
        // Varied text, so that nothing on the way can shrink it much.
        let text: String = (0..padding)
            .map(|i| char::from(b'a' + ((i * 7 + i / 26) % 26) as u8))
            .collect();
        properties.insert("Blob".into(), Value::String(text));
    }
    let mut observed = properties.clone();
    observed.insert("Arn".into(), json!(format!("arn:aws:test:::{physical_id}")));
    Event::ResourceCreated {
        deploy_id: deploy_id.to_string(),
        resource: ResourceRecord {
            logical_id: logical_id.to_string(),
            resource_type: "AWS::S3::Bucket".to_string(),
            physical_id: physical_id.to_string(),
            properties,
            attributes: IndexMap::from([(
                "Arn".to_string(),
                json!(format!("arn:aws:s3:::{physical_id}")),
            )]),
            dependencies: vec!["Other".to_string()],
            provider: ProviderKind::CloudControl,
            deletion_policy: None,
            update_replace_policy: None,
        },
        replaces: None,
        baseline: Some(if padding > 0 {
            Baseline::Refused {
                cause: crate::event::RefusalCause::IncompleteResolution,
            }
        } else {
            Baseline::Recorded { observed }
        }),
    }
}

fn physical_id(event: &Event) -> &str {
    match event {
        Event::ResourceCreated { resource, .. } => &resource.physical_id,
        other => panic!("expected ResourceCreated, got {other:?}"),
    }
}

fn keys(events: &[StoredEvent]) -> Vec<String> {
    events.iter().map(|e| e.key.clone()).collect()
}

async fn count<S: EventStore>(store: &S, stream: &StreamId) -> usize {
    ok(store.read(stream, 0).await, "read").len()
}

/// The value, or a panic naming what failed.
fn ok<T>(result: StoreResult<T>, what: &str) -> T {
    result.unwrap_or_else(|e| panic!("{what}: unexpected store error: {e} ({e:?})"))
}

/// Checks that `at` is an RFC 3339 UTC time around the append.
fn check_time(at: &str, before: SystemTime, after: SystemTime, key: &str) {
    let parsed = humantime::parse_rfc3339(at)
        .unwrap_or_else(|e| panic!("time `{at}` of event {key} is not RFC 3339 UTC: {e}"));
    // Some slack: the store's clock (an emulator's, say) need not be this process's.
    let slack = Duration::from_secs(300);
    assert!(
        parsed + slack >= before && parsed <= after + slack,
        "time `{at}` of event {key} is not around the append ({})",
        now()
    );
}

/// Runs futures concurrently on the current task, returning their outputs in order.
async fn join_all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (future, output) in futures.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(cx) {
                    Poll::Ready(value) => *output = Some(value),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    outputs
        .into_iter()
        .map(|o| o.expect("every future completed"))
        .collect()
}
