//! Rewriting stored events in place: the conformance check on the in-memory and embedded
//! stores, that no byte of the embedded store's files keeps an old body, and that a store
//! without the ability says so.
#![cfg(feature = "embedded")]

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use stackflow_events::conformance;
use stackflow_events::event::{Event, Holder, NewEvent, StoredEvent, current_version};
use stackflow_events::sqlite::SqliteStore;
use stackflow_events::{
    Appended, EventStore, MemoryStore, Precondition, Rewrite, StoreError, StoreResult, StreamId,
};

/// A plaintext with a character JSON escapes, so that its raw and escaped forms differ.
const PLAINTEXT: &str = "Tr0ub4dor\"&3-ex";
/// Its standard base64.
const BASE64: &str = "VHIwdWI0ZG9yIiYzLWV4";
/// Its JSON-escaped form.
const ESCAPED: &str = "Tr0ub4dor\\\"&3-ex";

fn dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("rewrite-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_store_rewrites() {
    conformance::rewrite_replaces_bodies_in_place(&MemoryStore::new(), "mem").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_store_rewrites() {
    let dir = dir("conformance");
    let store = SqliteStore::open(dir.join("events.db")).unwrap();
    conformance::rewrite_replaces_bodies_in_place(&store, "file").await;
    let memory = SqliteStore::open_in_memory().unwrap();
    conformance::rewrite_replaces_bodies_in_place(&memory, "memory").await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// Events an older writer could have left: the plaintext raw, in base64, in a JSON
/// document held as a string, and in an error message; one of them over SQLite's page size.
fn leaky_events() -> Vec<Event> {
    let properties = json!({
        "Password": PLAINTEXT,
        "UserData": BASE64,
        "Policy": format!("{{\"Statement\":[{{\"Secret\":{}}}]}}", serde_json::to_string(PLAINTEXT).unwrap()),
        "Padding": "x".repeat(20_000),
    });
    vec![
        Event::DeployStarted {
            deploy_id: "d1".into(),
            who: "old@writer".into(),
            template_digest: "t".into(),
            parameters: [("DbPassword".to_string(), json!(PLAINTEXT))].into(),
            no_rollback: false,
            stack_id: None,
        },
        Event::ResourceIntent {
            deploy_id: "d1".into(),
            logical_id: "Db".into(),
            resource_type: "AWS::RDS::DBInstance".into(),
            operation: stackflow_events::event::Operation::Create,
            token: "t-1".into(),
            provider: stackflow_events::event::ProviderKind::CloudControl,
            physical_id: None,
            properties: properties.as_object().cloned(),
        },
        Event::DeployFailed {
            deploy_id: "d1".into(),
            error: stackflow_events::event::ErrorInfo {
                name: "InvalidRequest".into(),
                message: format!("bad value {PLAINTEXT} for MasterUserPassword"),
            },
            logical_id: Some("Db".into()),
        },
    ]
}

/// `event` with every form of the plaintext in its strings replaced by `****`.
fn cleaned(event: &Event) -> Event {
    let text = serde_json::to_string(&event.to_body()).unwrap();
    // In the JSON text, the raw form is spelt escaped, and the escaped form twice so.
    let text = text
        .replace(&ESCAPED.replace('\\', "\\\\").replace('"', "\\\""), "****")
        .replace(ESCAPED, "****")
        .replace(BASE64, "****");
    let body: Value = serde_json::from_str(&text).unwrap();
    let back =
        Event::from_body(event.type_name(), current_version(event.type_name()), body).unwrap();
    assert!(
        !serde_json::to_string(&back.to_body())
            .unwrap()
            .contains("Tr0ub4dor")
    );
    back
}

/// Every file of the store (the database, its write-ahead log and its index).
fn stored_bytes(dir: &Path) -> Vec<u8> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        all.extend(std::fs::read(entry.unwrap().path()).unwrap());
    }
    all
}

fn holds(bytes: &[u8], needle: &str) -> bool {
    bytes.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_byte_of_a_rewritten_body_stays_in_the_files() {
    let dir = dir("bytes");
    let store = SqliteStore::open(dir.join("events.db")).unwrap();
    let stream = StreamId::new("us-east-1", "leaky");
    let events = leaky_events();
    let mut seqs = Vec::new();
    for (i, e) in events.iter().enumerate() {
        let appended = store
            .append(
                &stream,
                &NewEvent::new(format!("k{i}"), e.clone()),
                &Precondition::None,
            )
            .await
            .unwrap();
        seqs.push(appended.seq());
    }
    let state = json!({"parameters": {"DbPassword": PLAINTEXT}});
    store.put_snapshot(&stream, 3, &state).await.unwrap();
    let before = stored_bytes(&dir);
    assert!(
        holds(&before, ESCAPED),
        "the test must see what it looks for"
    );
    assert!(holds(&before, BASE64));

    let rewrite = Rewrite {
        events: seqs
            .iter()
            .zip(&events)
            .map(|(s, e)| (*s, cleaned(e)))
            .collect(),
        record: NewEvent::new(
            "rewrite/1",
            Event::EventsRewritten {
                by: "tester".into(),
                reason: "test".into(),
                seqs: seqs.clone(),
            },
        ),
    };
    let done = store
        .rewrite(&stream, &rewrite, &Precondition::None)
        .await
        .unwrap();
    assert_eq!(done.seqs, seqs);
    assert_eq!(done.record, Appended::New(4));
    assert_eq!(done.snapshots_dropped, 1);
    assert!(done.residue.is_empty(), "{:?}", done.residue);

    let after = stored_bytes(&dir);
    for needle in ["Tr0ub4dor", PLAINTEXT, ESCAPED, BASE64] {
        assert!(
            !holds(&after, needle),
            "a stored byte still holds {needle:?}"
        );
    }
    let read: Vec<StoredEvent> = store.read(&stream, 0).await.unwrap();
    assert_eq!(read.len(), 4);
    assert_eq!(read[1].event, rewrite.events[1].1);
    // The store goes on as before.
    drop(store);
    let store = SqliteStore::open(dir.join("events.db")).unwrap();
    store
        .append(
            &stream,
            &NewEvent::new("k9", events[0].clone()),
            &Precondition::None,
        )
        .await
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A store that implements everything but rewriting.
struct Plain(MemoryStore);

impl EventStore for Plain {
    async fn append(
        &self,
        stream: &StreamId,
        event: &NewEvent,
        pre: &Precondition,
    ) -> StoreResult<Appended> {
        self.0.append(stream, event, pre).await
    }
    async fn read(&self, stream: &StreamId, after: u64) -> StoreResult<Vec<StoredEvent>> {
        self.0.read(stream, after).await
    }
    async fn lock_holder(&self, stream: &StreamId) -> StoreResult<Option<Holder>> {
        self.0.lock_holder(stream).await
    }
    async fn break_lock(&self, stream: &StreamId, by: &str) -> StoreResult<Option<Holder>> {
        self.0.break_lock(stream, by).await
    }
    async fn put_snapshot(&self, stream: &StreamId, seq: u64, body: &Value) -> StoreResult<()> {
        self.0.put_snapshot(stream, seq, body).await
    }
    async fn latest_snapshot(&self, stream: &StreamId) -> StoreResult<Option<(u64, Value)>> {
        self.0.latest_snapshot(stream).await
    }
    async fn streams(&self) -> StoreResult<Vec<StreamId>> {
        self.0.streams().await
    }
}

#[tokio::test]
async fn a_store_that_cannot_rewrite_says_so_and_changes_nothing() {
    let store = Plain(MemoryStore::new());
    let stream = StreamId::new("us-east-1", "plain");
    let event = leaky_events().remove(0);
    store
        .append(
            &stream,
            &NewEvent::new("k", event.clone()),
            &Precondition::None,
        )
        .await
        .unwrap();
    let rewrite = Rewrite {
        events: vec![(1, cleaned(&event))],
        record: NewEvent::new(
            "rewrite/1",
            Event::EventsRewritten {
                by: "tester".into(),
                reason: "test".into(),
                seqs: vec![1],
            },
        ),
    };
    match store.rewrite(&stream, &rewrite, &Precondition::None).await {
        Err(e @ StoreError::Unsupported(_)) => {
            assert!(e.to_string().contains("cannot rewrite"), "{e}");
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }
    let read = store.read(&stream, 0).await.unwrap();
    assert_eq!(read.len(), 1);
    assert_eq!(read[0].event, event);
}
