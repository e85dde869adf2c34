//! Appends, retries, conflicts, concurrent appenders and large events: part of the conformance suite (see the module root).

use super::*;

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

/// `n` tasks append distinct events to one stream at once, each retrying its append once,
/// while a follower reads on from the last position it saw (as `events --follow` does);
/// none is lost or duplicated, every reported position is the one read back, positions
/// have no holes, and the follower sees every event exactly once.
pub async fn concurrent_appenders_lose_nothing<S: EventStore + 'static>(
    store: Arc<S>,
    prefix: &str,
    n: usize,
) {
    let stream = stream(prefix, "concurrent");
    let (appended, done) = tokio::sync::watch::channel(false);
    let follower = tokio::spawn(follow(Arc::clone(&store), stream.clone(), done));
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

    let _ = appended.send(true);
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
    let positions: Vec<u64> = read.iter().map(|e| e.seq).collect();
    let expected: Vec<u64> = (1..=n as u64).collect();
    assert_eq!(positions, expected, "positions have no holes");
    let followed = follower.await.expect("the follower panicked");
    assert_eq!(
        followed,
        keys(&read),
        "a reader that resumes from the last position it saw misses nothing"
    );
}

/// Reads `stream` on from the last position seen, as a follower does, until every
/// append is done (`done`) and one more read found nothing new; the keys in the order
/// seen.
async fn follow<S: EventStore>(
    store: Arc<S>,
    stream: StreamId,
    done: tokio::sync::watch::Receiver<bool>,
) -> Vec<String> {
    let mut seen = Vec::new();
    let mut last = 0;
    loop {
        let finished = *done.borrow();
        let events = ok(store.read(&stream, last).await, "a follower's read");
        let empty = events.is_empty();
        for e in events {
            last = e.seq;
            seen.push(e.key);
        }
        if finished && empty {
            return seen;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
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
