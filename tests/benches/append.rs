//! Concurrent appends to one stream of the DynamoDB event store, against the local
//! emulator (started by the test harness, loopback only).
//!
//! `cargo bench -p stackflow-tests --bench append`
//!
//! One writer appends 50 events, for the latency of an append nobody queues with. Then
//! [`WRITERS`] tasks append [`EVENTS_PER_WRITER`] events each to ONE stream, at once: first
//! with no precondition, then (on another stream) each under `HoldsLock` of a lock taken
//! beforehand, the way a deploy's parallel actions append. It reports the events
//! lost (what the appends reported against what `read` returns: must be 0), the retries
//! and requests per append, and the append latency; then, for comparison, the same number
//! of writers putting items of the same size with a plain unconditional `PutItem`, and
//! making each of an append's requests on its own (where the time goes).
//!
//! The run is bounded: a fixed number of requests, and [`DEADLINE`] for the whole of it.
//! It exits with status 1 when an event is lost or duplicated.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::AttributeValue;
use stackflow_events::dynamo::DynamoStore;
use stackflow_events::event::{Event, Holder};
use stackflow_events::{Appended, EventStore, NewEvent, Precondition, StreamId};
use stackflow_tests::events::created;
use stackflow_tests::{Emulator, unique_name};
use tokio::sync::Barrier;

/// Concurrent writers.
const WRITERS: usize = 200;
/// Events each writer appends, one after the other.
const EVENTS_PER_WRITER: usize = 5;
/// Bytes of padding in each event's properties (a typical `ResourceCreated` is ~1 KB).
const PADDING: usize = 1024;
/// The whole run must end within this.
const DEADLINE: Duration = Duration::from_secs(600);

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let code = runtime.block_on(async {
        match tokio::time::timeout(DEADLINE, run()).await {
            Ok(Ok(lost)) => i32::from(lost),
            Ok(Err(e)) => {
                eprintln!("benchmark failed: {e}");
                2
            }
            Err(_) => {
                eprintln!("benchmark did not finish within {}s", DEADLINE.as_secs());
                2
            }
        }
    });
    std::process::exit(code);
}

/// One scenario's measurements.
struct Row {
    name: String,
    ops: usize,
    lost: Option<usize>,
    duplicated: Option<usize>,
    retries: Option<u64>,
    requests: u64,
    latencies: Vec<Duration>,
    wall: Duration,
}

/// A new table for one scenario: fakecloud's `TransactWriteItems` copies every item of the
/// table it writes to (for its rollback), so it slows down as the table grows; one table per
/// scenario keeps a scenario's figures from depending on the ones run before it.
async fn fresh_table(db: &aws_sdk_dynamodb::Client) -> Result<String, String> {
    let table = unique_name("stackflow-bench");
    DynamoStore::create_table_if_missing(db, &table)
        .await
        .map_err(|e| e.to_string())?;
    Ok(table)
}

/// Runs the benchmark; true when an event was lost or duplicated.
async fn run() -> Result<bool, String> {
    let emulator = Emulator::shared().await;
    let config = emulator.sdk_config().await;
    let db = aws_sdk_dynamodb::Client::new(&config);
    let bucket = unique_name("stackflow-bench-bodies");
    emulator
        .s3()
        .await
        .create_bucket()
        .bucket(&bucket)
        .send()
        .await
        .map_err(|e| format!("CreateBucket: {e:?}"))?;
    let store = |table: String| {
        let db = db.clone();
        let bucket = bucket.clone();
        async move {
            Arc::new(DynamoStore::new(
                db,
                emulator.s3().await,
                table,
                Some(bucket),
            ))
        }
    };

    println!(
        "DynamoStore append benchmark: fakecloud {} at {}",
        emulator.version().unwrap_or("(version unknown)"),
        emulator.endpoint()
    );
    println!(
        "{WRITERS} concurrent writers x {EVENTS_PER_WRITER} requests, one stream (one partition \
         key), events of ~{} bytes of JSON, a new table for each row\n",
        event_json_len()
    );

    let mut rows = Vec::new();
    let alone = StreamId::new("us-east-1", unique_name("bench-alone"));
    let alone_store = store(fresh_table(&db).await?).await;
    rows.push(
        appends(
            &alone_store,
            &alone,
            "append, 1 writer x 50",
            (1, 50),
            |_| Precondition::None,
        )
        .await?,
    );

    let free = StreamId::new("us-east-1", unique_name("bench-none"));
    let none_store = store(fresh_table(&db).await?).await;
    rows.push(
        appends(
            &none_store,
            &free,
            "append, no precondition",
            (WRITERS, EVENTS_PER_WRITER),
            |_| Precondition::None,
        )
        .await?,
    );

    let locked = StreamId::new("us-east-1", unique_name("bench-lock"));
    let lock_store = store(fresh_table(&db).await?).await;
    let holder = Holder {
        deploy_id: "bench".into(),
        who: "bench@localhost".into(),
        since: stackflow_events::event::now(),
        operation: "deploy".into(),
        expires: None,
        fenced: None,
    };
    lock_store
        .append(
            &locked,
            &NewEvent::new(
                "bench/lock",
                Event::LockTaken {
                    holder: holder.clone(),
                },
            ),
            &Precondition::TakeLock(holder),
        )
        .await
        .map_err(|e| format!("taking the lock: {e}"))?;
    rows.push(
        appends(
            &lock_store,
            &locked,
            "append, HoldsLock",
            (WRITERS, EVENTS_PER_WRITER),
            |_| Precondition::HoldsLock("bench".into()),
        )
        .await?,
    );

    rows.push(plain_puts(&db, &fresh_table(&db).await?).await?);
    for kind in [
        Raw::GetItem,
        Raw::Counter,
        Raw::Transact,
        Raw::TransactChecked,
    ] {
        rows.push(raw_call(&db, &fresh_table(&db).await?, kind).await?);
    }

    print_table(&rows);
    let bad = rows
        .iter()
        .any(|r| r.lost.unwrap_or(0) > 0 || r.duplicated.unwrap_or(0) > 0);
    if bad {
        println!("\nFAILED: events were lost or duplicated");
    }
    Ok(bad)
}

fn event(writer: usize, i: usize) -> NewEvent {
    let logical_id = format!("W{writer:03}R{i}");
    NewEvent::new(
        format!("bench/{logical_id}/create/done"),
        created(&logical_id, PADDING),
    )
}

fn event_json_len() -> usize {
    serde_json::to_string(&event(0, 0).event.to_body())
        .map(|s| s.len())
        .unwrap_or(0)
}

/// `writers` tasks appending `each` events each to `stream`, all at once.
async fn appends(
    store: &Arc<DynamoStore>,
    stream: &StreamId,
    name: &str,
    (writers, each): (usize, usize),
    pre: impl Fn(usize) -> Precondition,
) -> Result<Row, String> {
    let retries_before = store.retries();
    let requests_before = store.requests();
    let barrier = Arc::new(Barrier::new(writers));
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(writers);
    for writer in 0..writers {
        let store = Arc::clone(store);
        let stream = stream.clone();
        let barrier = Arc::clone(&barrier);
        let pre = pre(writer);
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            let mut done = Vec::with_capacity(each);
            for i in 0..each {
                let event = event(writer, i);
                let t = Instant::now();
                let appended = store.append(&stream, &event, &pre).await;
                done.push((event.key, appended, t.elapsed()));
            }
            done
        }));
    }
    let mut reported: HashMap<String, u64> = HashMap::new();
    let mut latencies = Vec::with_capacity(writers * each);
    for task in tasks {
        for (key, appended, latency) in task.await.map_err(|e| format!("a writer: {e}"))? {
            match appended {
                Ok(Appended::New(seq)) => {
                    reported.insert(key, seq);
                }
                other => return Err(format!("append of {key}: {other:?}")),
            }
            latencies.push(latency);
        }
    }
    let wall = started.elapsed();
    let retries = store.retries() - retries_before;
    let requests = store.requests() - requests_before;

    let read = store
        .read(stream, 0)
        .await
        .map_err(|e| format!("read: {e}"))?;
    let mut seen = HashSet::new();
    let mut duplicated = 0;
    for stored in &read {
        if !seen.insert(stored.key.as_str()) {
            duplicated += 1;
        }
    }
    let lost = reported
        .iter()
        .filter(|(key, seq)| {
            !read
                .binary_search_by_key(*seq, |e| e.seq)
                .is_ok_and(|at| &read[at].key == *key)
        })
        .count();
    Ok(Row {
        name: name.to_string(),
        ops: latencies.len(),
        lost: Some(lost),
        duplicated: Some(duplicated),
        retries: Some(retries),
        requests,
        latencies,
        wall,
    })
}

/// [`WRITERS`] tasks putting [`EVENTS_PER_WRITER`] items each, of an event item's size,
/// with a plain unconditional `PutItem`.
async fn plain_puts(db: &aws_sdk_dynamodb::Client, table: &str) -> Result<Row, String> {
    let body = serde_json::to_string(&event(0, 0).event.to_body()).map_err(|e| e.to_string())?;
    let pk = format!("us-east-1/{}", unique_name("bench-put"));
    let barrier = Arc::new(Barrier::new(WRITERS));
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(WRITERS);
    for writer in 0..WRITERS {
        let db = db.clone();
        let table = table.to_string();
        let pk = pk.clone();
        let body = body.clone();
        let barrier = Arc::clone(&barrier);
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            let mut latencies = Vec::with_capacity(EVENTS_PER_WRITER);
            for i in 0..EVENTS_PER_WRITER {
                let seq = (writer * EVENTS_PER_WRITER + i + 1) as u64;
                let item = HashMap::from([
                    ("pk".to_string(), AttributeValue::S(pk.clone())),
                    ("sk".to_string(), AttributeValue::S(format!("e#{seq:020}"))),
                    ("seq".to_string(), AttributeValue::N(seq.to_string())),
                    (
                        "key".to_string(),
                        AttributeValue::S(format!("bench/W{writer:03}R{i}/create/done")),
                    ),
                    (
                        "type".to_string(),
                        AttributeValue::S("ResourceCreated".into()),
                    ),
                    ("v".to_string(), AttributeValue::N("1".into())),
                    (
                        "at".to_string(),
                        AttributeValue::S(stackflow_events::event::now()),
                    ),
                    ("digest".to_string(), AttributeValue::S("0".repeat(64))),
                    ("body".to_string(), AttributeValue::S(body.clone())),
                ]);
                let t = Instant::now();
                db.put_item()
                    .table_name(&table)
                    .set_item(Some(item))
                    .send()
                    .await
                    .map_err(|e| {
                        format!(
                            "PutItem: {}",
                            aws_sdk_dynamodb::error::DisplayErrorContext(&e)
                        )
                    })?;
                latencies.push(t.elapsed());
            }
            Ok::<_, String>(latencies)
        }));
    }
    let mut latencies = Vec::with_capacity(WRITERS * EVENTS_PER_WRITER);
    for task in tasks {
        latencies.extend(task.await.map_err(|e| format!("a writer: {e}"))??);
    }
    Ok(Row {
        name: "plain PutItem, same size".into(),
        ops: latencies.len(),
        lost: None,
        duplicated: None,
        retries: None,
        requests: latencies.len() as u64,
        latencies,
        wall: started.elapsed(),
    })
}

/// One request of an append on its own.
#[derive(Clone, Copy)]
enum Raw {
    /// The consistent `GetItem` of the key.
    GetItem,
    /// The `UpdateItem ADD` of the counter.
    Counter,
    /// A `TransactWriteItems` of the event and its key.
    Transact,
    /// The same with a `ConditionCheck` of the lock.
    TransactChecked,
}

/// One request of an append, by [`WRITERS`] writers at once, [`EVENTS_PER_WRITER`] times
/// each: where an append's time goes.
async fn raw_call(db: &aws_sdk_dynamodb::Client, table: &str, kind: Raw) -> Result<Row, String> {
    use aws_sdk_dynamodb::types::{ConditionCheck, Put, ReturnValue, TransactWriteItem};
    let pk = format!("us-east-1/{}", unique_name("bench-raw"));
    let s = |v: &str| AttributeValue::S(v.to_string());
    let key = |sk: &str| HashMap::from([("pk".to_string(), s(&pk)), ("sk".to_string(), s(sk))]);
    let body = serde_json::to_string(&event(0, 0).event.to_body()).map_err(|e| e.to_string())?;
    let put = |sk: String, extra: (&str, AttributeValue)| {
        let mut item = key(&sk);
        item.insert(extra.0.to_string(), extra.1);
        Put::builder()
            .table_name(table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(sk)")
            .build()
            .map(|p| TransactWriteItem::builder().put(p).build())
            .map_err(|e| e.to_string())
    };
    let check = ConditionCheck::builder()
        .table_name(table)
        .set_key(Some(key("lock")))
        .condition_expression("deploy_id = :d")
        .expression_attribute_values(":d", s("bench"))
        .build()
        .map(|c| TransactWriteItem::builder().condition_check(c).build())
        .map_err(|e| e.to_string())?;
    db.put_item()
        .table_name(table)
        .set_item(Some({
            let mut lock = key("lock");
            lock.insert("deploy_id".into(), s("bench"));
            lock
        }))
        .send()
        .await
        .map_err(|e| format!("PutItem lock: {e:?}"))?;
    let show =
        |e: &dyn std::error::Error| format!("{}", aws_sdk_dynamodb::error::DisplayErrorContext(e));

    match kind {
        Raw::GetItem => {
            timed("  GetItem, consistent", |n| {
                let request = db
                    .get_item()
                    .table_name(table)
                    .set_key(Some(key(&format!("k#bench/{n}"))))
                    .consistent_read(true);
                async move { request.send().await.map(drop).map_err(|e| show(&e)) }
            })
            .await
        }
        Raw::Counter => {
            timed("  UpdateItem ADD counter", |_| {
                let request = db
                    .update_item()
                    .table_name(table)
                    .set_key(Some(key("counter")))
                    .update_expression("ADD #seq :one")
                    .expression_attribute_names("#seq", "seq")
                    .expression_attribute_values(":one", AttributeValue::N("1".into()))
                    .return_values(ReturnValue::UpdatedNew);
                async move { request.send().await.map(drop).map_err(|e| show(&e)) }
            })
            .await
        }
        Raw::Transact | Raw::TransactChecked => {
            let checked = matches!(kind, Raw::TransactChecked);
            let name = if checked {
                "  TransactWrite +ConditionCheck"
            } else {
                "  TransactWrite 2 Puts"
            };
            timed(name, |n| {
                let mut items = vec![
                    put(format!("e#{n:020}"), ("body", s(&body))),
                    put(format!("k#bench/{n}"), ("digest", s("0"))),
                ];
                if checked {
                    items.push(Ok(check.clone()));
                }
                let request = items
                    .into_iter()
                    .collect::<Result<Vec<_>, _>>()
                    .map(|items| db.transact_write_items().set_transact_items(Some(items)));
                async move { request?.send().await.map(drop).map_err(|e| show(&e)) }
            })
            .await
        }
    }
}

/// [`WRITERS`] tasks making the request `make(n)` [`EVENTS_PER_WRITER`] times each (`n`
/// unique to each request).
async fn timed<F, Fut>(name: &str, make: F) -> Result<Row, String>
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    let barrier = Arc::new(Barrier::new(WRITERS));
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(WRITERS);
    for writer in 0..WRITERS {
        let requests: Vec<Fut> = (0..EVENTS_PER_WRITER)
            .map(|i| make(writer * EVENTS_PER_WRITER + i))
            .collect();
        let barrier = Arc::clone(&barrier);
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            let mut latencies = Vec::with_capacity(EVENTS_PER_WRITER);
            for request in requests {
                let t = Instant::now();
                request.await?;
                latencies.push(t.elapsed());
            }
            Ok::<_, String>(latencies)
        }));
    }
    let mut latencies = Vec::with_capacity(WRITERS * EVENTS_PER_WRITER);
    for task in tasks {
        latencies.extend(task.await.map_err(|e| format!("a writer: {e}"))??);
    }
    Ok(Row {
        name: name.to_string(),
        ops: latencies.len(),
        lost: None,
        duplicated: None,
        retries: None,
        requests: latencies.len() as u64,
        latencies,
        wall: started.elapsed(),
    })
}

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (sorted.len() * p).div_ceil(100).max(1);
    sorted[rank.min(sorted.len()) - 1]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn print_table(rows: &[Row]) {
    println!(
        "{:<32} {:>5} {:>5} {:>5} {:>11} {:>12} {:>10} {:>10} {:>10} {:>9}",
        "scenario", "ops", "lost", "dup", "retries/op", "requests/op", "p50", "p99", "max", "ops/s"
    );
    for row in rows {
        let mut sorted = row.latencies.clone();
        sorted.sort();
        let opt = |v: Option<usize>| v.map_or("-".to_string(), |v| v.to_string());
        let ops = row.ops.max(1) as f64;
        println!(
            "{:<32} {:>5} {:>5} {:>5} {:>11} {:>12.2} {:>10} {:>10} {:>10} {:>9.0}",
            row.name,
            row.ops,
            opt(row.lost),
            opt(row.duplicated),
            row.retries
                .map_or("-".to_string(), |r| format!("{:.3}", r as f64 / ops)),
            row.requests as f64 / ops,
            ms(percentile(&sorted, 50)),
            ms(percentile(&sorted, 99)),
            ms(sorted.last().copied().unwrap_or_default()),
            ops / row.wall.as_secs_f64().max(f64::EPSILON),
        );
    }
}
