//! Separate streams and their registry; snapshots: part of the conformance suite (see the module root).

use super::*;

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
