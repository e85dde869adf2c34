//! Rewriting stored events in place on the DynamoDB store, against the local emulator: the
//! conformance check, then no item and no S3 object of the stream keeps the old bodies;
//! the store's pages (the events of one transaction in one item) read and rewritten; and
//! large bodies of processes racing for one position kept apart.

use std::collections::HashMap;
use std::sync::Arc;

use aws_sdk_dynamodb::types::AttributeValue;
use stackflow_events::dynamo::DynamoStore;
use stackflow_events::event::Event;
use stackflow_events::{
    Appended, EventStore, NewEvent, Precondition, Rewrite, StreamId, conformance,
};
use stackflow_tests::events::created;
use stackflow_tests::{Emulator, unique_name};

/// A table (and, with `bodies`, a bucket) of the test's own on the shared emulator: the
/// clients, the table and the bucket.
struct Place {
    db: aws_sdk_dynamodb::Client,
    s3: aws_sdk_s3::Client,
    table: String,
    bucket: Option<String>,
}

impl Place {
    async fn new(name: &str, bodies: bool) -> Place {
        let emulator = Emulator::shared().await;
        let db = aws_sdk_dynamodb::Client::new(&emulator.sdk_config().await);
        let s3 = emulator.s3().await;
        let table = unique_name(&format!("stackflow-{name}"));
        DynamoStore::create_table_if_missing(&db, &table)
            .await
            .unwrap();
        let bucket = if bodies {
            let bucket = unique_name(&format!("stackflow-{name}-bodies"));
            s3.create_bucket().bucket(&bucket).send().await.unwrap();
            Some(bucket)
        } else {
            None
        };
        Place {
            db,
            s3,
            table,
            bucket,
        }
    }

    /// A store on it: a process of its own (its own lanes).
    fn store(&self) -> DynamoStore {
        DynamoStore::new(
            self.db.clone(),
            self.s3.clone(),
            &self.table,
            self.bucket.clone(),
        )
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dynamodb_store_rewrites_every_copy_it_holds() {
    let place = Place::new("rewrite", true).await;
    let (db, s3, table) = (&place.db, &place.s3, place.table.clone());
    let bucket = place.bucket.clone().unwrap();
    let store = place.store();
    let prefix = unique_name("rw");

    conformance::rewrite_replaces_bodies_in_place(&store, &prefix).await;

    let plaintext = conformance::REWRITTEN_PLAINTEXT;
    let pk = format!("{}/{prefix}-rewrite", conformance::REGION);
    let items = db
        .query()
        .table_name(&table)
        .key_condition_expression("pk = :pk")
        .expression_attribute_values(
            ":pk",
            aws_sdk_dynamodb::types::AttributeValue::S(pk.clone()),
        )
        .send()
        .await
        .unwrap();
    assert!(items.count() > 3, "the stream's items: {}", items.count());
    for item in items.items() {
        let text = format!("{item:?}");
        assert!(
            !text.contains(plaintext),
            "an item keeps the plaintext: {}",
            &text[..200.min(text.len())]
        );
        assert!(
            !item
                .get("sk")
                .and_then(|s| s.as_s().ok())
                .is_some_and(|sk| sk.starts_with("s#")),
            "a snapshot survives"
        );
    }
    let objects = s3
        .list_objects_v2()
        .bucket(&bucket)
        .prefix(&pk)
        .send()
        .await
        .unwrap();
    assert!(!objects.contents().is_empty(), "the large body is in S3");
    for object in objects.contents() {
        let key = object.key().unwrap();
        let body = s3
            .get_object()
            .bucket(&bucket)
            .key(key)
            .send()
            .await
            .unwrap();
        let bytes = body.body.collect().await.unwrap().into_bytes();
        assert!(
            !bytes
                .windows(plaintext.len())
                .any(|w| w == plaintext.as_bytes()),
            "S3 object {key} keeps the plaintext"
        );
    }
}

/// The items of the event range of stream `pk`: (sort key, positions held).
async fn event_items(
    db: &aws_sdk_dynamodb::Client,
    table: &str,
    pk: &str,
) -> Vec<(String, Vec<u64>)> {
    let out = db
        .query()
        .table_name(table)
        .key_condition_expression("pk = :pk AND begins_with(sk, :e)")
        .expression_attribute_values(":pk", AttributeValue::S(pk.into()))
        .expression_attribute_values(":e", AttributeValue::S("e#".into()))
        .consistent_read(true)
        .send()
        .await
        .unwrap();
    let seq = |item: &HashMap<String, AttributeValue>| -> u64 {
        item["seq"].as_n().unwrap().parse().unwrap()
    };
    out.items()
        .iter()
        .map(|item| {
            let held = match item.get("events") {
                Some(list) => list
                    .as_l()
                    .unwrap()
                    .iter()
                    .map(|e| seq(e.as_m().unwrap()))
                    .collect(),
                None => vec![seq(item)],
            };
            (item["sk"].as_s().unwrap().clone(), held)
        })
        .collect()
}

/// Appends written together share a page, read back from any position (the middle of a
/// page included); an event item in the layout of versions before pages reads back in
/// its place; a rewrite of events inside a page changes them and no other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_hold_appends_written_together_and_old_items_still_read() {
    let place = Place::new("pages", false).await;
    let (db, table) = (&place.db, place.table.clone());
    let store = Arc::new(place.store());
    let stream = StreamId::new("us-east-1", unique_name("pages"));
    let pk = stream.key();
    let event = |i: usize| NewEvent::new(format!("d1/R{i}/create/done"), created("R", i));

    let first = store.append(&stream, &event(0), &Precondition::None).await;
    assert_eq!(first.unwrap(), Appended::New(1));
    let appends: Vec<_> = (1..=40)
        .map(|i| {
            let (store, stream) = (store.clone(), stream.clone());
            tokio::spawn(async move {
                store
                    .append(&stream, &event(i), &Precondition::None)
                    .await
                    .unwrap()
            })
        })
        .collect();
    for append in appends {
        assert!(matches!(append.await.unwrap(), Appended::New(2..=41)));
    }
    let items = event_items(db, &table, &pk).await;
    let held: Vec<u64> = items.iter().flat_map(|(_, held)| held.clone()).collect();
    assert_eq!(held, (1..=41).collect::<Vec<_>>(), "{items:?}");
    for (sk, held) in &items {
        assert_eq!(
            sk,
            &format!("e#{:020}", held.last().unwrap()),
            "a page is keyed by its last position"
        );
    }
    let (_, widest) = items.iter().max_by_key(|(_, held)| held.len()).unwrap();
    assert!(
        widest.len() > 1 && items.len() < 41,
        "appends made at once share a page: {items:?}"
    );

    // An event written as versions before pages did: one item, attributes at the top.
    let old = event(42);
    let body = serde_json::to_string(&old.event.to_body()).unwrap();
    let s = |v: &str| AttributeValue::S(v.into());
    let n = |v: u64| AttributeValue::N(v.to_string());
    db.put_item()
        .table_name(&table)
        .set_item(Some(HashMap::from([
            ("pk".into(), s(&pk)),
            ("sk".into(), s("e#00000000000000000042")),
            ("seq".into(), n(42)),
            ("key".into(), s(&old.key)),
            ("type".into(), s("ResourceCreated")),
            ("v".into(), n(1)),
            ("at".into(), s("2025-01-01T00:00:00Z")),
            ("digest".into(), s(&old.digest())),
            ("body".into(), s(&body)),
        ])))
        .send()
        .await
        .unwrap();
    for (sk, item) in [
        (
            format!("k#{}", old.key),
            vec![("seq", n(42)), ("digest", s(&old.digest()))],
        ),
        ("counter".to_string(), vec![("seq", n(42))]),
    ] {
        let mut full = HashMap::from([("pk".to_string(), s(&pk)), ("sk".to_string(), s(&sk))]);
        full.extend(item.into_iter().map(|(k, v)| (k.to_string(), v)));
        db.put_item()
            .table_name(&table)
            .set_item(Some(full))
            .send()
            .await
            .unwrap();
    }
    // Another process: it does not know where the stream ends.
    let other = place.store();
    let appended = other.append(&stream, &event(43), &Precondition::None).await;
    assert_eq!(appended.unwrap(), Appended::New(43));
    assert_eq!(
        other
            .append(&stream, &old, &Precondition::None)
            .await
            .unwrap(),
        Appended::AlreadyThere(42),
        "the old item's key still guards it"
    );

    let all = other.read(&stream, 0).await.unwrap();
    let seqs: Vec<u64> = all.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=43).collect::<Vec<_>>());
    assert_eq!(all[41].event, old.event);
    for after in 0..=43 {
        let read = other.read(&stream, after).await.unwrap();
        assert_eq!(read.len() as u64, 43 - after, "read after {after}");
        assert!(read.iter().zip(after + 1..).all(|(e, seq)| e.seq == seq));
    }

    // A rewrite of two events of the widest page and of the old item.
    let (a, b) = (widest[0], widest[1]);
    let rewrite = Rewrite {
        events: vec![
            (a, created("Clean", 1)),
            (b, created("Clean", 2)),
            (42, created("Clean", 3)),
        ],
        record: NewEvent::new(
            "rewrite/pages",
            Event::EventsRewritten {
                by: "tester".into(),
                reason: "pages".into(),
                seqs: vec![a, b, 42],
            },
        ),
    };
    other
        .rewrite(&stream, &rewrite, &Precondition::None)
        .await
        .unwrap();
    let after = other.read(&stream, 0).await.unwrap();
    assert_eq!(after.len(), 44, "the record appended");
    for (before, now) in all.iter().zip(&after) {
        match rewrite.events.iter().find(|(seq, _)| *seq == now.seq) {
            Some((_, new)) => assert_eq!(&now.event, new),
            None => assert_eq!(now, before, "event {} must not change", now.seq),
        }
        assert_eq!((before.seq, &before.key), (now.seq, &now.key));
    }
}

/// Two processes racing for the same positions with bodies too large for an item: each
/// puts its body in S3 before its transaction, and the loser deletes its own. The objects
/// are named per attempt, so the winner's body is never the one deleted (they shared a
/// name, and a lost race deleted the stored event's body).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_processes_never_delete_each_others_bodies() {
    let place = Place::new("race", true).await;
    let stream = StreamId::new("us-east-1", unique_name("race"));
    let big = stackflow_events::dynamo::INLINE_BODY_LIMIT + 1;
    let mut appends = Vec::new();
    for process in 0..2 {
        // A store of its own: a lane of its own, as another process has.
        let store = Arc::new(place.store());
        for i in 0..4 {
            let (store, stream) = (store.clone(), stream.clone());
            let id = format!("P{process}R{i}");
            appends.push(tokio::spawn(async move {
                let event = NewEvent::new(format!("d1/{id}/create/done"), created(&id, big));
                store
                    .append(&stream, &event, &Precondition::None)
                    .await
                    .unwrap();
                event
            }));
        }
    }
    let mut appended = Vec::new();
    for append in appends {
        appended.push(append.await.unwrap());
    }
    let reader = place.store();
    let read = reader.read(&stream, 0).await.expect("every body is there");
    assert_eq!(read.len(), appended.len());
    for event in &appended {
        let stored = read.iter().find(|e| e.key == event.key).expect("stored");
        assert_eq!(
            stored.event, event.event,
            "{} keeps its own body",
            event.key
        );
    }
}

/// A run's last events and the release of its lock ([`EventStore::append_in_order`]) pass
/// the conformance check on DynamoDB, and are written in one transaction: one page holds
/// them all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runs_last_events_and_its_release_share_one_transaction() {
    let place = Place::new("ordered", false).await;
    conformance::ordered_appends_end_a_run(&place.store(), &unique_name("ordered")).await;

    let store = place.store();
    let stream = StreamId::new("us-east-1", unique_name("ending"));
    let holder = stackflow_events::event::Holder {
        deploy_id: "d1".into(),
        who: "tester".into(),
        since: "2026-12-06T00:00:00Z".into(),
        operation: "deploy".into(),
        expires: None,
        fenced: None,
    };
    let taken = NewEvent::new(
        "d1/lock",
        Event::LockTaken {
            holder: holder.clone(),
        },
    );
    store
        .append(&stream, &taken, &Precondition::TakeLock(holder))
        .await
        .unwrap();
    let held = || Precondition::HoldsLock("d1".into());
    let ending = [
        (NewEvent::new("d1/A/create/done", created("A", 1)), held()),
        (NewEvent::new("d1/B/create/done", created("B", 2)), held()),
        (
            NewEvent::new(
                "d1/released",
                Event::LockReleased {
                    deploy_id: "d1".into(),
                },
            ),
            Precondition::ReleaseLock("d1".into()),
        ),
    ];
    let appended = store.append_in_order(&stream, &ending).await.unwrap();
    assert_eq!(
        appended,
        [Appended::New(2), Appended::New(3), Appended::New(4)]
    );
    let items = event_items(&place.db, &place.table, &stream.key()).await;
    let pages: Vec<Vec<u64>> = items.into_iter().map(|(_, held)| held).collect();
    assert_eq!(pages, [vec![1], vec![2, 3, 4]], "one transaction, one page");
    assert_eq!(store.lock_holder(&stream).await.unwrap(), None);
}
