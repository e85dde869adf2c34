//! Fold of 100,000 events read from the DynamoDB event store (on the local emulator, loopback
//! only), next to the time to merely read them. The embedded store's numbers come from
//! `cargo bench -p stackflow-events --bench fold`.
//!
//! `cargo bench -p stackflow-tests --bench fold_dynamodb` (`FOLD_EVENTS=N` for another size)

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::{AttributeValue, PutRequest, WriteRequest};
use stackflow_events::dynamo::DynamoStore;
use stackflow_events::event::now;
use stackflow_events::projection::StackState;
use stackflow_events::testing::history;
use stackflow_events::{EventStore, StreamId};
use stackflow_tests::{Emulator, unique_name};

/// Writers seeding the table.
const SEEDERS: usize = 8;
/// The whole run must end within this.
const DEADLINE: Duration = Duration::from_secs(1500);

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let code = runtime.block_on(async {
        match tokio::time::timeout(DEADLINE, run()).await {
            Ok(Ok(())) => 0,
            Ok(Err(e)) => {
                eprintln!("benchmark failed: {e}");
                1
            }
            Err(_) => {
                eprintln!("benchmark did not finish within {}s", DEADLINE.as_secs());
                1
            }
        }
    });
    std::process::exit(code);
}

async fn run() -> Result<(), String> {
    let n: usize = std::env::var("FOLD_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let emulator = Emulator::shared().await;
    let config = emulator.sdk_config().await;
    let db = aws_sdk_dynamodb::Client::new(&config);
    let table = unique_name("stackflow-fold");
    DynamoStore::create_table_if_missing(&db, &table)
        .await
        .map_err(|e| e.to_string())?;
    let store = DynamoStore::new(db.clone(), emulator.s3().await, &table, None);
    let stream = StreamId::new("us-east-1", "fold-bench");

    // Seed: the history written straight into the table in the store's documented layout
    // (README, "The DynamoDB table"), with BatchWriteItem: appending 100,000 events one by
    // one through TransactWriteItems takes hours on the emulator, whose transactions copy
    // the whole table each time. What is measured below, reading and folding, is the same.
    let events = history(n);
    let t = Instant::now();
    let pk = stream.key();
    let items: Vec<WriteRequest> = events
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let seq = i as u64 + 1;
            let body = serde_json::to_string(&e.event.to_body()).expect("serializes");
            let item: HashMap<String, AttributeValue> = HashMap::from([
                ("pk".to_string(), AttributeValue::S(pk.clone())),
                ("sk".to_string(), AttributeValue::S(format!("e#{seq:020}"))),
                ("seq".to_string(), AttributeValue::N(seq.to_string())),
                ("key".to_string(), AttributeValue::S(e.key.clone())),
                (
                    "type".to_string(),
                    AttributeValue::S(e.event.type_name().to_string()),
                ),
                ("v".to_string(), AttributeValue::N("1".to_string())),
                ("at".to_string(), AttributeValue::S(now())),
                ("digest".to_string(), AttributeValue::S(e.digest())),
                ("body".to_string(), AttributeValue::S(body)),
            ]);
            WriteRequest::builder()
                .put_request(
                    PutRequest::builder()
                        .set_item(Some(item))
                        .build()
                        .expect("item"),
                )
                .build()
        })
        .collect();
    let batches: Vec<Vec<WriteRequest>> = items.chunks(25).map(<[_]>::to_vec).collect();
    let batches = Arc::new(tokio::sync::Mutex::new(batches));
    let mut tasks = Vec::new();
    for _ in 0..SEEDERS {
        let (db, table, batches) = (db.clone(), table.clone(), batches.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let Some(batch) = batches.lock().await.pop() else {
                    return Ok::<_, String>(());
                };
                let mut pending = batch;
                while !pending.is_empty() {
                    let out = db
                        .batch_write_item()
                        .request_items(&table, pending)
                        .send()
                        .await
                        .map_err(|e| format!("BatchWriteItem: {e:?}"))?;
                    pending = out
                        .unprocessed_items
                        .and_then(|mut m| m.remove(&table))
                        .unwrap_or_default();
                }
            }
        }));
    }
    for t in tasks {
        t.await.map_err(|e| e.to_string())??;
    }
    let seeded = t.elapsed();
    println!(
        "DynamoDB store (fakecloud {}): seeded {} events in {:.1} s",
        emulator.version().unwrap_or("?"),
        events.len(),
        seeded.as_secs_f64()
    );

    let mut reads = Vec::new();
    let mut folds = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let read = store.read(&stream, 0).await.map_err(|e| e.to_string())?;
        reads.push(t.elapsed());
        if read.len() != events.len() {
            return Err(format!(
                "read {} events, appended {}",
                read.len(),
                events.len()
            ));
        }
        let t = Instant::now();
        let state = StackState::fold(&read);
        folds.push(t.elapsed());
        assert_eq!(state.resources.len(), 100);
    }
    reads.sort();
    folds.sort();
    println!(
        "DynamoDB store: read {} events: median {:.0} ms; fold: median {:.0} ms; read + fold {:.0} ms",
        events.len(),
        reads[1].as_secs_f64() * 1e3,
        folds[1].as_secs_f64() * 1e3,
        (reads[1] + folds[1]).as_secs_f64() * 1e3
    );
    Ok(())
}
