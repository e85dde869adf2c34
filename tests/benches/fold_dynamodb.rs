//! Fold of 100,000 events read from the DynamoDB event store (on the local emulator, loopback
//! only), next to the time to merely read them. The embedded store's numbers come from
//! `cargo bench -p stackflow-events --bench fold`.
//!
//! `cargo bench -p stackflow-tests --bench fold_dynamodb` (`FOLD_EVENTS=N` for another size)

use std::sync::Arc;
use std::time::{Duration, Instant};

use stackflow_events::dynamo::DynamoStore;
use stackflow_events::projection::StackState;
use stackflow_events::testing::history;
use stackflow_events::{EventStore, Precondition, StreamId};
use stackflow_tests::{Emulator, unique_name};

/// Appenders writing the history, so that seeding takes minutes, not an hour.
const SEEDERS: usize = 32;
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
    let store = Arc::new(DynamoStore::new(db, emulator.s3().await, &table, None));
    let stream = StreamId::new("us-east-1", "fold-bench");

    // Seed: the events of one stack, appended by several writers at once (the fold orders
    // them by position, whatever order they land in).
    let events = Arc::new(history(n));
    let t = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..SEEDERS {
        let (store, stream, events) = (store.clone(), stream.clone(), events.clone());
        tasks.push(tokio::spawn(async move {
            for e in events.iter().skip(w).step_by(SEEDERS) {
                store
                    .append(&stream, e, &Precondition::None)
                    .await
                    .map_err(|e| e.to_string())?;
            }
            Ok::<_, String>(())
        }));
    }
    for t in tasks {
        t.await.map_err(|e| e.to_string())??;
    }
    let seeded = t.elapsed();
    println!(
        "DynamoDB store (fakecloud {}): appended {} events with {SEEDERS} writers in {:.1} s",
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
            return Err(format!("read {} events, appended {}", read.len(), events.len()));
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
