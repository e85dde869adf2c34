//! Rewriting stored events in place: part of the conformance suite (see the module root).
//! Only stores that can rewrite run it.

use super::*;
use crate::store::{Rewrite, Rewritten};

/// A plaintext an older writer left in events (the stream is `<prefix>-rewrite`), and what
/// stands for it after the rewrite: a store's own test can check that none of its bytes
/// keeps it.
pub const PLAINTEXT: &str = "conformance-plaintext-7f3a";
const STANDS_FOR: &str = "{{resolve:secretsmanager:conformance}}";

/// `event` with every occurrence of [`PLAINTEXT`] in its strings replaced.
fn cleaned(event: &Event) -> Event {
    let text = serde_json::to_string(&event.to_body()).expect("events serialize");
    let body: Value =
        serde_json::from_str(&text.replace(PLAINTEXT, STANDS_FOR)).expect("still JSON");
    Event::from_body(event.type_name(), current_version(event.type_name()), body)
        .expect("still an event")
}

/// A `ResourceCreated` holding [`PLAINTEXT`], `padding` bytes long or more.
fn leaky(logical_id: &str, padding: usize) -> Event {
    let mut event = resource_created_with("d1", logical_id, &format!("{logical_id}-1"), padding);
    if let Event::ResourceCreated { resource, .. } = &mut event {
        resource
            .properties
            .insert("Password".into(), json!(PLAINTEXT));
        resource.attributes.insert(
            "Url".into(),
            json!(format!("pg://admin:{PLAINTEXT}@db:5432")),
        );
    }
    event
}

fn record(id: &str, seqs: &[u64]) -> NewEvent {
    NewEvent::new(
        format!("rewrite/{id}"),
        Event::EventsRewritten {
            by: "tester@conformance".into(),
            reason: "conformance".into(),
            seqs: seqs.to_vec(),
        },
    )
}

/// A rewrite replaces the bodies at their positions (keys, times and types kept, digests
/// renewed), drops every snapshot, appends its record once however often it is retried,
/// and changes nothing when an event is of another type, missing, or the precondition
/// fails.
pub async fn rewrite_replaces_bodies_in_place<S: EventStore>(store: &S, prefix: &str) {
    let stream = stream(prefix, "rewrite");
    let events = [
        NewEvent::new("d1/start", deploy_started("d1")),
        NewEvent::new("d1/Db/create/done", leaky("Db", 0)),
        NewEvent::new("d1/Big/create/done", leaky("Big", 400 * 1024)),
    ];
    let mut seqs = Vec::new();
    for e in &events {
        let appended = ok(
            store.append(&stream, e, &Precondition::None).await,
            "append",
        );
        seqs.push(appended.seq());
    }
    let snapshot = json!({"seq": seqs[2], "secret": PLAINTEXT});
    ok(
        store.put_snapshot(&stream, seqs[2], &snapshot).await,
        "put_snapshot",
    );
    let before = ok(store.read(&stream, 0).await, "read");

    refused_rewrites_change_nothing(store, &stream, &seqs, &before).await;

    let rewrite = Rewrite {
        events: vec![
            (seqs[1], cleaned(&events[1].event)),
            (seqs[2], cleaned(&events[2].event)),
        ],
        record: record("r1", &seqs[1..]),
    };
    let done = ok(
        store.rewrite(&stream, &rewrite, &Precondition::None).await,
        "rewrite",
    );
    let after = check_rewritten(store, &stream, &rewrite, &done, &before).await;

    // Retried: the same bodies, no second record.
    let again = ok(
        store.rewrite(&stream, &rewrite, &Precondition::None).await,
        "retried rewrite",
    );
    assert_eq!(again.record, Appended::AlreadyThere(done.record.seq()));
    assert_eq!(ok(store.read(&stream, 0).await, "read"), after);

    // The digests are the new bodies': the new content is a retry, the old a conflict.
    let renewed = NewEvent::new(events[1].key.clone(), cleaned(&events[1].event));
    assert_eq!(
        ok(
            store.append(&stream, &renewed, &Precondition::None).await,
            "append of the rewritten content"
        ),
        Appended::AlreadyThere(seqs[1])
    );
    match store.append(&stream, &events[1], &Precondition::None).await {
        Err(StoreError::Conflict { .. }) => {}
        other => panic!("the old content under its key must now conflict, got {other:?}"),
    }
}

/// Checks what a rewrite of `before` did: the positions, the record, the snapshots gone,
/// each event in place with its new body. The events after it.
async fn check_rewritten<S: EventStore>(
    store: &S,
    stream: &StreamId,
    rewrite: &Rewrite,
    done: &Rewritten,
    before: &[StoredEvent],
) -> Vec<StoredEvent> {
    let seqs: Vec<u64> = rewrite.events.iter().map(|(seq, _)| *seq).collect();
    assert_eq!(done.seqs, seqs, "the positions rewritten");
    assert!(
        matches!(done.record, Appended::New(_)),
        "the record is new: {done:?}"
    );
    assert!(
        done.snapshots_dropped >= 1,
        "the snapshot must be dropped: {done:?}"
    );
    assert_eq!(
        ok(store.latest_snapshot(stream).await, "latest_snapshot"),
        None,
        "no snapshot survives a rewrite"
    );
    let after = ok(store.read(stream, 0).await, "read after the rewrite");
    assert_eq!(after.len(), before.len() + 1, "one record appended");
    for (old, new) in before.iter().zip(&after) {
        assert_eq!((old.seq, &old.key, &old.at), (new.seq, &new.key, &new.at));
        assert_eq!(new.v, current_version(new.event.type_name()));
        assert_eq!(
            new.event,
            cleaned(&old.event),
            "event {} rewritten",
            old.seq
        );
    }
    let last = after.last().expect("the record");
    assert_eq!(
        (last.seq, &last.event),
        (done.record.seq(), &rewrite.record.event)
    );
    after
}

/// Rewrites that must fail before changing anything: another type, a missing position, a
/// precondition that does not hold.
async fn refused_rewrites_change_nothing<S: EventStore>(
    store: &S,
    stream: &StreamId,
    seqs: &[u64],
    before: &[StoredEvent],
) {
    let other_type = Rewrite {
        events: vec![
            (seqs[1], cleaned(&before[1].event)),
            (seqs[0], cleaned(&before[1].event)),
        ],
        record: record("bad-type", &[seqs[0]]),
    };
    let missing = Rewrite {
        events: vec![(seqs[2] + 1000, cleaned(&before[1].event))],
        record: record("missing", &[seqs[2] + 1000]),
    };
    for (what, rewrite) in [("another type", &other_type), ("no event", &missing)] {
        match store.rewrite(stream, rewrite, &Precondition::None).await {
            Err(StoreError::Backend(_)) => {}
            other => panic!("a rewrite to {what} must fail, got {other:?}"),
        }
    }
    let unlocked = Rewrite {
        events: vec![(seqs[1], cleaned(&before[1].event))],
        record: record("unlocked", &[seqs[1]]),
    };
    match store
        .rewrite(stream, &unlocked, &Precondition::HoldsLock("d9".into()))
        .await
    {
        Err(StoreError::NotHolder { .. }) => {}
        other => panic!("a rewrite whose precondition fails must fail, got {other:?}"),
    }
    assert_eq!(
        ok(store.read(stream, 0).await, "read"),
        before,
        "a refused rewrite changes nothing"
    );
    assert!(
        ok(store.latest_snapshot(stream).await, "latest_snapshot").is_some(),
        "a refused rewrite keeps the snapshot"
    );
}
