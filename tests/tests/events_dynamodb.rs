//! The DynamoDB event store against the local emulator: the shared conformance suite, and
//! what only this store does (its table, its S3 bodies, its item layout, the requests an
//! append makes).
//!
//! Every test of this binary shares one table and one bucket (unique names, created on
//! first use); each test uses its own stream prefix.
//!
//! What fakecloud 0.51.0 does with the calls the store makes (checked by
//! `emulator_supports_the_calls_the_store_uses` below):
//!
//! - `TransactWriteItems` with `Put`, `Delete` and `ConditionCheck`: supported; a failed
//!   condition cancels the transaction with `TransactionCanceledException` whose
//!   `CancellationReasons` line up with the items (`ConditionalCheckFailed` / `None`),
//!   and `ReturnValuesOnConditionCheckFailure = ALL_OLD` puts the existing item in the
//!   reason, as on AWS.
//! - It never answers `TransactionConflict` (the code does not exist in its DynamoDB): it
//!   applies requests one at a time. On AWS, concurrent transactions that include the same
//!   item can cancel each other with it (here: the `lock` item that every `HoldsLock`
//!   append checks, and the registry item at a stream's birth); the store's retry path for
//!   that is only exercised by `transaction_conflicts_are_retried_and_counted`, against a
//!   scripted loopback server.
//! - Every `TransactWriteItems` copies all the items of the table it writes (its rollback
//!   snapshot) while holding the emulator's state lock, so transactions get slower as the
//!   table grows and serialize every other request behind them: ~5 ms per append on a
//!   small table, but ~40-90 transactions/s with 2000 items, against ~1000 `PutItem`s/s
//!   (see `cargo bench -p stackflow-tests --bench append`). Keep the tests' tables small.
//! - `UpdateItem` `ADD` with `ReturnValues = UPDATED_NEW`: supported.
//! - `Query` stops a page at 1 MiB of data read and returns `LastEvaluatedKey`, as AWS.
//! - `ConsistentRead = true` is accepted on `GetItem` and `Query` (every read is
//!   consistent on the emulator anyway).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_dynamodb::types::{
    AttributeValue, BillingMode, ConditionCheck, KeyType, Put, ReturnValuesOnConditionCheckFailure,
    TransactWriteItem,
};
use serde_json::json;
use stackflow_events::conformance;
use stackflow_events::dynamo::{DynamoStore, INLINE_BODY_LIMIT};
use stackflow_events::event::Holder;
use stackflow_events::{Appended, EventStore, NewEvent, Precondition, StoreError, StreamId};
use stackflow_tests::events::created;
use stackflow_tests::{Emulator, unique_name};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::OnceCell;

/// The table and bucket every test of this binary uses.
struct Shared {
    table: String,
    bucket: String,
}

static SHARED: OnceCell<Shared> = OnceCell::const_new();

async fn shared() -> &'static Shared {
    SHARED
        .get_or_init(|| async {
            let emulator = Emulator::shared().await;
            let db = aws_sdk_dynamodb::Client::new(&emulator.sdk_config().await);
            let table = unique_name("stackflow-events");
            let created = DynamoStore::create_table_if_missing(&db, &table)
                .await
                .unwrap_or_else(|e| panic!("creating table {table}: {e}"));
            assert!(created, "table {table} must be new");
            let bucket = unique_name("stackflow-bodies");
            emulator
                .s3()
                .await
                .create_bucket()
                .bucket(&bucket)
                .send()
                .await
                .unwrap_or_else(|e| panic!("creating bucket {bucket}: {e}"));
            Shared { table, bucket }
        })
        .await
}

/// A store on the shared table and bucket, with clients of this test's runtime.
async fn store() -> DynamoStore {
    let shared = shared().await;
    let emulator = Emulator::shared().await;
    DynamoStore::new(
        aws_sdk_dynamodb::Client::new(&emulator.sdk_config().await),
        emulator.s3().await,
        &shared.table,
        Some(shared.bucket.clone()),
    )
}

async fn dynamodb() -> aws_sdk_dynamodb::Client {
    aws_sdk_dynamodb::Client::new(&Emulator::shared().await.sdk_config().await)
}

// --- The conformance suite ----------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_appends_in_order_and_reads_back() {
    conformance::appends_in_order_and_reads_back(&store().await, &unique_name("order")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_retried_append_is_a_no_op() {
    conformance::retried_append_is_a_no_op(&store().await, &unique_name("retry")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_conflicting_append_is_detected() {
    conformance::conflicting_append_is_detected(&store().await, &unique_name("conflict")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_concurrent_appenders_lose_nothing() {
    let store = Arc::new(store().await);
    conformance::concurrent_appenders_lose_nothing(
        Arc::clone(&store),
        &unique_name("concurrent"),
        200,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_fenced_lock_refuses_new_actions_only() {
    conformance::fenced_lock_refuses_new_actions_only(&store().await, &unique_name("fence")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_lease_is_renewed_by_its_holder_only() {
    conformance::lease_is_renewed_by_its_holder_only(&store().await, &unique_name("lease")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_lock_is_exclusive() {
    conformance::lock_is_exclusive(&store().await, &unique_name("lock")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_broken_lock() {
    conformance::broken_lock(&store().await, &unique_name("broken")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_streams_are_independent_and_listed() {
    conformance::streams_are_independent_and_listed(&store().await, &unique_name("streams")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_snapshots() {
    conformance::snapshots(&store().await, &unique_name("snapshots")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_large_event_round_trips() {
    conformance::large_event_round_trips(&store().await, &unique_name("large")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_many_events_read_back_across_pages() {
    conformance::many_events_read_back_across_pages(&store().await, &unique_name("many")).await;
}

// --- What only the DynamoDB store does ----------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_table_if_missing_is_idempotent() {
    let db = dynamodb().await;
    let table = unique_name("stackflow-init");
    assert!(
        DynamoStore::create_table_if_missing(&db, &table)
            .await
            .expect("first create"),
        "the first call creates the table"
    );
    assert!(
        !DynamoStore::create_table_if_missing(&db, &table)
            .await
            .expect("second create"),
        "the second call finds it"
    );
    let described = db
        .describe_table()
        .table_name(&table)
        .send()
        .await
        .expect("DescribeTable");
    let description = described.table().expect("a table description");
    let keys: Vec<(&str, &KeyType)> = description
        .key_schema()
        .iter()
        .map(|k| (k.attribute_name(), k.key_type()))
        .collect();
    assert_eq!(keys, [("pk", &KeyType::Hash), ("sk", &KeyType::Range)]);
    assert_eq!(
        description
            .billing_mode_summary()
            .and_then(|b| b.billing_mode()),
        Some(&BillingMode::PayPerRequest)
    );
    db.delete_table()
        .table_name(&table)
        .send()
        .await
        .expect("DeleteTable");
}

async fn get_item(
    db: &aws_sdk_dynamodb::Client,
    table: &str,
    pk: &str,
    sk: &str,
) -> Option<HashMap<String, AttributeValue>> {
    db.get_item()
        .table_name(table)
        .key("pk", AttributeValue::S(pk.into()))
        .key("sk", AttributeValue::S(sk.into()))
        .consistent_read(true)
        .send()
        .await
        .expect("GetItem")
        .item
}

fn attr_s<'a>(item: &'a HashMap<String, AttributeValue>, name: &str) -> Option<&'a str> {
    item.get(name)
        .and_then(|v| v.as_s().ok())
        .map(String::as_str)
}

/// The one event of a page written by one append (the page's `events` list, checked to
/// hold one entry at the page's position).
fn only_entry(page: &HashMap<String, AttributeValue>) -> &HashMap<String, AttributeValue> {
    let events = page["events"].as_l().expect("a page's events are a list");
    assert_eq!(events.len(), 1, "one append, one event in its page");
    let entry = events[0].as_m().expect("an entry is a map");
    assert_eq!(attr_n(page, "first"), attr_n(entry, "seq"));
    assert_eq!(attr_n(page, "seq"), attr_n(entry, "seq"));
    entry
}

fn attr_n<'a>(item: &'a HashMap<String, AttributeValue>, name: &str) -> Option<&'a str> {
    item.get(name)
        .and_then(|v| v.as_n().ok())
        .map(String::as_str)
}

async fn objects_under(prefix: &str) -> Vec<String> {
    let s3 = Emulator::shared().await.s3().await;
    let listed = s3
        .list_objects_v2()
        .bucket(&shared().await.bucket)
        .prefix(prefix)
        .send()
        .await
        .expect("ListObjectsV2");
    listed
        .contents()
        .iter()
        .filter_map(|o| o.key().map(str::to_string))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_bodies_land_in_s3() {
    let store = store().await;
    let db = dynamodb().await;
    let table = &shared().await.table;
    let stream = StreamId::new("us-east-1", unique_name("big"));
    let pk = stream.key();

    let small = NewEvent::new("d1/Small/create/done", created("Small", 10));
    let big = NewEvent::new("d1/Big/create/done", created("Big", INLINE_BODY_LIMIT + 1));
    assert_eq!(
        store
            .append(&stream, &small, &Precondition::None)
            .await
            .unwrap(),
        Appended::New(1)
    );
    assert_eq!(
        store
            .append(&stream, &big, &Precondition::None)
            .await
            .unwrap(),
        Appended::New(2)
    );

    let small_page = get_item(&db, table, &pk, "e#00000000000000000001")
        .await
        .unwrap();
    let small_item = only_entry(&small_page);
    assert!(
        attr_s(small_item, "body").is_some(),
        "a small body stays inline"
    );
    assert!(!small_item.contains_key("body_s3"));

    let big_page = get_item(&db, table, &pk, "e#00000000000000000002")
        .await
        .unwrap();
    let big_item = only_entry(&big_page);
    assert!(!big_item.contains_key("body"), "a large body is not inline");
    let key = attr_s(big_item, "body_s3").expect("body_s3").to_string();
    let name = key
        .strip_prefix(&format!("{pk}/events/00000000000000000002-"))
        .and_then(|rest| rest.strip_suffix(".json"))
        .unwrap_or_else(|| panic!("{key}: not <pk>/events/<seq>-<nonce>.json"));
    assert_eq!(name.len(), 16, "a nonce of 16 hex digits: {key}");
    assert_eq!(objects_under(&format!("{pk}/")).await, [key.as_str()]);

    let object = Emulator::shared()
        .await
        .s3()
        .await
        .get_object()
        .bucket(&shared().await.bucket)
        .key(&key)
        .send()
        .await
        .expect("GetObject");
    let bytes = object.body.collect().await.expect("object body").to_vec();
    let body: serde_json::Value = serde_json::from_slice(&bytes).expect("JSON");
    assert_eq!(body, big.event.to_body());

    // A conflicting large append reserves a position and puts its body in S3 before the
    // transaction finds the key taken: the object is removed again.
    let other = NewEvent::new("d1/Big/create/done", created("Big", INLINE_BODY_LIMIT + 2));
    assert!(matches!(
        store.append(&stream, &other, &Precondition::None).await,
        Err(StoreError::Conflict { .. })
    ));
    // (That one was refused by the first read, before any position was reserved; a
    // refused TakeLock reserves one and puts its body first.)
    let holder = Holder {
        deploy_id: "d9".into(),
        who: "someone".into(),
        since: stackflow_events::event::now(),
        operation: "deploy".into(),
        expires: None,
        fenced: None,
    };
    store
        .append(
            &stream,
            &NewEvent::new("d9/start", created("Lock", 1)),
            &Precondition::TakeLock(holder),
        )
        .await
        .unwrap();
    let refused = NewEvent::new("d8/Big/create/done", created("Big8", INLINE_BODY_LIMIT + 3));
    assert!(matches!(
        store
            .append(&stream, &refused, &Precondition::HoldsLock("d8".into()))
            .await,
        Err(StoreError::NotHolder { .. })
    ));
    assert_eq!(
        objects_under(&format!("{pk}/")).await,
        [key.as_str()],
        "the body of a refused append must not stay in S3"
    );

    // Large snapshots go to S3 too.
    let snapshot = json!({"blob": "s".repeat(INLINE_BODY_LIMIT + 10)});
    store.put_snapshot(&stream, 2, &snapshot).await.unwrap();
    assert_eq!(
        store.latest_snapshot(&stream).await.unwrap(),
        Some((2, snapshot))
    );
    let objects = objects_under(&format!("{pk}/")).await;
    assert!(
        objects.contains(&format!("{pk}/snapshots/00000000000000000002.json")),
        "{objects:?}"
    );

    let read = store.read(&stream, 0).await.unwrap();
    assert_eq!(read.len(), 3);
    assert_eq!(read[1].event, big.event);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_follow_the_documented_layout() {
    let store = store().await;
    let db = dynamodb().await;
    let table = &shared().await.table;
    let stream = StreamId::new("eu-west-1", unique_name("layout"));
    let pk = stream.key();
    let holder = Holder {
        deploy_id: "d1".into(),
        who: "me@host".into(),
        since: "2024-05-01T12:00:00.000Z".into(),
        operation: "deploy".into(),
        expires: None,
        fenced: None,
    };
    let event = NewEvent::new("d1/Queue/create/done", created("Queue", 3));
    store
        .append(&stream, &event, &Precondition::TakeLock(holder.clone()))
        .await
        .unwrap();

    let page = get_item(&db, table, &pk, "e#00000000000000000001")
        .await
        .unwrap();
    let item = only_entry(&page);
    assert_eq!(attr_n(item, "seq"), Some("1"));
    assert_eq!(attr_s(item, "key"), Some("d1/Queue/create/done"));
    assert_eq!(attr_s(item, "type"), Some("ResourceCreated"));
    assert_eq!(attr_n(item, "v"), Some("1"));
    assert_eq!(attr_s(item, "digest"), Some(event.digest().as_str()));
    assert!(attr_s(item, "at").is_some_and(humantime_like));
    let body: serde_json::Value = serde_json::from_str(attr_s(item, "body").unwrap()).unwrap();
    assert_eq!(body, event.event.to_body());

    let key = get_item(&db, table, &pk, "k#d1/Queue/create/done")
        .await
        .unwrap();
    assert_eq!(attr_n(&key, "seq"), Some("1"));
    assert_eq!(attr_s(&key, "digest"), Some(event.digest().as_str()));

    let lock = get_item(&db, table, &pk, "lock").await.unwrap();
    assert_eq!(attr_s(&lock, "deploy_id"), Some("d1"));
    let held: Holder = serde_json::from_str(attr_s(&lock, "holder").unwrap()).unwrap();
    assert_eq!(held, holder);

    let counter = get_item(&db, table, &pk, "counter").await.unwrap();
    assert_eq!(attr_n(&counter, "seq"), Some("1"));

    let registry = get_item(&db, table, "_streams", &pk).await.unwrap();
    assert_eq!(attr_s(&registry, "region"), Some("eu-west-1"));
    assert_eq!(attr_s(&registry, "stack"), Some(stream.stack.as_str()));

    store
        .put_snapshot(&stream, 1, &json!({"n": 1}))
        .await
        .unwrap();
    let snapshot = get_item(&db, table, &pk, "s#00000000000000000001")
        .await
        .unwrap();
    assert_eq!(attr_n(&snapshot, "seq"), Some("1"));
    assert_eq!(attr_s(&snapshot, "body"), Some(r#"{"n":1}"#));
}

fn humantime_like(at: &str) -> bool {
    at.len() >= 20 && at.ends_with('Z') && at.as_bytes()[10] == b'T'
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_makes_one_request_once_the_stream_end_is_known() {
    let store = store().await;
    let stream = StreamId::new("us-east-1", unique_name("requests"));
    let event = |i: usize| NewEvent::new(format!("d1/R{i}/create/done"), created("R", i));

    // The first append of this store to the stream reads the counter (its transaction
    // writes the registry item too).
    let before = store.requests();
    store
        .append(&stream, &event(0), &Precondition::None)
        .await
        .unwrap();
    assert_eq!(store.requests() - before, 2, "the first append to a stream");

    for i in 1..=5 {
        let before = store.requests();
        store
            .append(&stream, &event(i), &Precondition::None)
            .await
            .unwrap();
        assert_eq!(store.requests() - before, 1, "TransactWriteItems alone");
    }
    // A retried append is one transaction, cancelled by its key.
    let before = store.requests();
    assert_eq!(
        store
            .append(&stream, &event(3), &Precondition::None)
            .await
            .unwrap(),
        Appended::AlreadyThere(4)
    );
    assert_eq!(store.requests() - before, 1, "a retried append");
    assert_eq!(store.retries(), 0, "nothing was retried");

    // Appends made at once go in as few transactions as hold them (48 events each).
    let before = store.requests();
    let mut appends = tokio::task::JoinSet::new();
    for i in 6..106 {
        let (store, stream) = (store.clone(), stream.clone());
        appends.spawn(async move { store.append(&stream, &event(i), &Precondition::None).await });
    }
    let mut seqs: Vec<u64> = appends
        .join_all()
        .await
        .into_iter()
        .map(|a| match a.expect("an append") {
            Appended::New(seq) => seq,
            other => panic!("{other:?}"),
        })
        .collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (7..=106).collect::<Vec<u64>>());
    let requests = store.requests() - before;
    assert!(
        requests <= 8,
        "100 appends at once took {requests} requests (the counter read after the retry, \
         then 48 events a transaction)"
    );
    // A process that read the stream appends without reading the counter.
    let other = self::store().await;
    assert_eq!(other.read(&stream, 100).await.unwrap().len(), 6);
    let before = other.requests();
    let appended = other
        .append(&stream, &event(106), &Precondition::None)
        .await;
    assert_eq!(appended.unwrap(), Appended::New(107));
    assert_eq!(
        other.requests() - before,
        1,
        "the read told where the stream ends"
    );

    let stored = store.read(&stream, 0).await.unwrap();
    assert_eq!(stored.len(), 107);
    assert!(stored.iter().zip(1..).all(|(e, seq)| e.seq == seq));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn emulator_supports_the_calls_the_store_uses() {
    let db = dynamodb().await;
    let table = &shared().await.table;
    let pk = format!("probe/{}", unique_name("probe"));
    let key = |sk: &str| {
        HashMap::from([
            ("pk".to_string(), AttributeValue::S(pk.clone())),
            ("sk".to_string(), AttributeValue::S(sk.to_string())),
        ])
    };

    // UpdateItem ADD with UPDATED_NEW.
    for expected in ["1", "2"] {
        let out = db
            .update_item()
            .table_name(table)
            .set_key(Some(key("counter")))
            .update_expression("ADD #seq :one")
            .expression_attribute_names("#seq", "seq")
            .expression_attribute_values(":one", AttributeValue::N("1".into()))
            .return_values(aws_sdk_dynamodb::types::ReturnValue::UpdatedNew)
            .send()
            .await
            .expect("UpdateItem ADD");
        let attributes = out.attributes().expect("UPDATED_NEW attributes");
        assert_eq!(attr_n(attributes, "seq"), Some(expected));
        assert_eq!(
            attributes.len(),
            1,
            "UPDATED_NEW returns the updated attribute only"
        );
    }

    // A transaction whose conditional Put and ConditionCheck fail: cancelled, with one
    // reason per item and the existing item in the reason of the Put (ALL_OLD).
    let mut existing = key("k#x");
    existing.insert("digest".into(), AttributeValue::S("abc".into()));
    db.put_item()
        .table_name(table)
        .set_item(Some(existing))
        .send()
        .await
        .expect("PutItem");
    let mut fresh = key("e#1");
    fresh.insert("v".into(), AttributeValue::N("1".into()));
    let mut duplicate = key("k#x");
    duplicate.insert("digest".into(), AttributeValue::S("def".into()));
    let put = |item, all_old: bool| {
        let mut put = Put::builder()
            .table_name(table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(sk)");
        if all_old {
            put = put.return_values_on_condition_check_failure(
                ReturnValuesOnConditionCheckFailure::AllOld,
            );
        }
        TransactWriteItem::builder()
            .put(put.build().unwrap())
            .build()
    };
    let check = TransactWriteItem::builder()
        .condition_check(
            ConditionCheck::builder()
                .table_name(table)
                .set_key(Some(key("lock")))
                .condition_expression("deploy_id = :d")
                .expression_attribute_values(":d", AttributeValue::S("d1".into()))
                .return_values_on_condition_check_failure(
                    ReturnValuesOnConditionCheckFailure::AllOld,
                )
                .build()
                .unwrap(),
        )
        .build();
    let err = db
        .transact_write_items()
        .transact_items(put(fresh.clone(), false))
        .transact_items(put(duplicate, true))
        .transact_items(check)
        .send()
        .await
        .expect_err("the transaction must be cancelled");
    let service = err.into_service_error();
    let cancelled = match service {
        aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError::TransactionCanceledException(c) => c,
        other => panic!("expected TransactionCanceledException, got {other:?}"),
    };
    let reasons = cancelled.cancellation_reasons();
    let codes: Vec<Option<&str>> = reasons.iter().map(|r| r.code()).collect();
    assert_eq!(
        codes,
        [
            Some("None"),
            Some("ConditionalCheckFailed"),
            Some("ConditionalCheckFailed")
        ]
    );
    let old = reasons[1]
        .item()
        .expect("ALL_OLD puts the existing item in the reason");
    assert_eq!(attr_s(old, "digest"), Some("abc"));
    assert!(
        reasons[2].item().is_none(),
        "a missing item has no old image"
    );
    assert!(
        get_item(&db, table, &pk, "e#1").await.is_none(),
        "a cancelled transaction writes nothing"
    );

    // Query pages end at 1 MiB read, with LastEvaluatedKey.
    let big = "q".repeat(380 * 1024);
    for i in 0..4 {
        let mut item = key(&format!("p#{i}"));
        item.insert("body".into(), AttributeValue::S(big.clone()));
        db.put_item()
            .table_name(table)
            .set_item(Some(item))
            .send()
            .await
            .expect("PutItem (380 KiB)");
    }
    let page = db
        .query()
        .table_name(table)
        .key_condition_expression("pk = :pk AND begins_with(sk, :p)")
        .expression_attribute_values(":pk", AttributeValue::S(pk.clone()))
        .expression_attribute_values(":p", AttributeValue::S("p#".into()))
        .consistent_read(true)
        .send()
        .await
        .expect("Query");
    assert!(
        page.items().len() < 4,
        "a page must end at 1 MiB: {} items of 380 KiB",
        page.items().len()
    );
    assert!(
        page.last_evaluated_key().is_some(),
        "a cut page has LastEvaluatedKey"
    );
}

// --- Transient failures, against a scripted server -----------------------------------

/// One request seen by [`scripted_server`]: its `X-Amz-Target` operation and JSON body.
type Seen = Arc<std::sync::Mutex<Vec<(String, serde_json::Value)>>>;

/// A loopback HTTP server that answers each request with the next of `responses` (status,
/// JSON body), recording the requests.
async fn scripted_server(responses: Vec<(u16, String)>) -> (String, Seen) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let endpoint = format!("http://{}", listener.local_addr().expect("local address"));
    let seen: Seen = Arc::default();
    let record = Arc::clone(&seen);
    tokio::spawn(async move {
        let mut responses = responses.into_iter();
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            // One request per connection (answered with `Connection: close`).
            let mut request = Vec::new();
            let mut buf = [0u8; 8192];
            let mut parsed = None;
            while let Ok(read) = socket.read(&mut buf).await {
                if read == 0 {
                    break;
                }
                request.extend_from_slice(&buf[..read]);
                if let Some(end) = find(&request, b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&request[..end]).to_string();
                    // Header names are case-insensitive; values are kept as sent.
                    let header = |name: &str| {
                        head.lines().find_map(|l| {
                            let (n, v) = l.split_once(':')?;
                            n.trim()
                                .eq_ignore_ascii_case(name)
                                .then(|| v.trim().to_string())
                        })
                    };
                    let length = header("content-length")
                        .and_then(|v| v.parse::<usize>().ok())
                        .unwrap_or(0);
                    if request.len() >= end + 4 + length {
                        let target = header("x-amz-target").unwrap_or_default();
                        let operation = target.rsplit('.').next().unwrap_or("").to_string();
                        let body = serde_json::from_slice(&request[end + 4..end + 4 + length])
                            .unwrap_or(serde_json::Value::Null);
                        parsed = Some((operation, body));
                        break;
                    }
                }
            }
            record
                .lock()
                .expect("requests")
                .push(parsed.unwrap_or_default());
            let (status, body) = responses
                .next()
                .unwrap_or((500, r#"{"__type":"NoMoreResponses"}"#.into()));
            let response = format!(
                "HTTP/1.1 {status} X\r\nContent-Type: application/x-amz-json-1.0\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = socket.write_all(response.as_bytes()).await;
            let _ = socket.shutdown().await;
        }
    });
    (endpoint, seen)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Two transactions cancelled by `TransactionConflict`, then success: the append is
/// retried with the same position and counted; after a conflict the store looks whether
/// the stream got registered meanwhile, and drops the registry item from the transaction
/// once it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transaction_conflicts_are_retried_and_counted() {
    let conflict = (
        400,
        r#"{"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException","Message":"Transaction cancelled","CancellationReasons":[{"Code":"None"},{"Code":"None"},{"Code":"None"},{"Code":"TransactionConflict","Message":"conflict"}]}"#
            .to_string(),
    );
    let empty = (200, "{}".to_string());
    let registered = (
        200,
        r#"{"Item":{"pk":{"S":"_streams"},"sk":{"S":"us-east-1/scripted"}}}"#.to_string(),
    );
    let responses = vec![
        (200, r#"{"Item":{"seq":{"N":"6"}}}"#.to_string()), // GetItem counter
        conflict.clone(),
        empty.clone(), // GetItem registry: still not registered
        conflict,
        registered, // GetItem registry: registered meanwhile
        empty,      // TransactWriteItems succeeds
    ];
    let (endpoint, seen) = scripted_server(responses).await;
    let emulator = Emulator::shared().await;
    let config = aws_sdk_dynamodb::config::Builder::from(&emulator.sdk_config().await)
        .endpoint_url(endpoint)
        .build();
    let store = DynamoStore::new(
        aws_sdk_dynamodb::Client::from_conf(config),
        emulator.s3().await,
        "scripted",
        None,
    );
    let stream = StreamId::new("us-east-1", "scripted");
    let appended = tokio::time::timeout(
        Duration::from_secs(30),
        store.append(
            &stream,
            &NewEvent::new("d1/R/create/done", created("R", 1)),
            &Precondition::HoldsLock("d1".into()),
        ),
    )
    .await
    .expect("the append must not hang")
    .expect("the append must succeed after the conflicts");
    assert_eq!(appended, Appended::New(7));
    assert_eq!(store.retries(), 2, "two transaction conflicts retried");
    assert_eq!(store.requests(), 6);

    let seen = seen.lock().expect("requests").clone();
    let operations: Vec<&str> = seen.iter().map(|(op, _)| op.as_str()).collect();
    assert_eq!(
        operations,
        [
            "GetItem",
            "TransactWriteItems",
            "GetItem",
            "TransactWriteItems",
            "GetItem",
            "TransactWriteItems",
        ]
    );
    let transactions: Vec<&serde_json::Value> = seen
        .iter()
        .filter(|(op, _)| op == "TransactWriteItems")
        .map(|(_, body)| body)
        .collect();
    let sizes: Vec<usize> = transactions
        .iter()
        .map(|t| t["TransactItems"].as_array().map_or(0, Vec::len))
        .collect();
    assert_eq!(
        sizes,
        [5, 5, 4],
        "the registry item is dropped once registered"
    );
    let first = &transactions[0]["TransactItems"];
    assert_eq!(
        first[0]["Put"]["Item"]["sk"]["S"], "e#00000000000000000007",
        "every attempt writes the position handed out once"
    );
    assert_eq!(
        transactions[2]["TransactItems"][0]["Put"]["Item"]["sk"],
        first[0]["Put"]["Item"]["sk"]
    );
    assert_eq!(first[1]["Put"]["Item"]["sk"]["S"], "k#d1/R/create/done");
    // The position is taken in the same transaction, only from the one read.
    assert_eq!(first[2]["Update"]["Key"]["sk"]["S"], "counter");
    assert_eq!(first[2]["Update"]["ConditionExpression"], "#seq = :prev");
    assert_eq!(
        first[2]["Update"]["ExpressionAttributeValues"][":prev"]["N"],
        "6"
    );
    assert_eq!(
        first[3]["ConditionCheck"]["ConditionExpression"],
        "deploy_id = :d"
    );
    assert_eq!(first[4]["Update"]["Key"]["pk"]["S"], "_streams");
    // A fresh idempotency token for each attempt of the store's own.
    let tokens: std::collections::HashSet<&str> = transactions
        .iter()
        .filter_map(|t| t["ClientRequestToken"].as_str())
        .collect();
    assert_eq!(tokens.len(), 3);
}
