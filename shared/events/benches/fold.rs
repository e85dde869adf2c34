//! Fold of 100,000 events from the embedded store, next to the time to merely read them.
//! Run with `cargo bench -p stackflow-events --bench fold`. (The DynamoDB store's numbers
//! come from `cargo bench -p stackflow-tests --bench fold_dynamodb`, against the emulator.)

use std::time::Instant;

use stackflow_events::projection::StackState;
use stackflow_events::sqlite::SqliteStore;
use stackflow_events::testing::history;
use stackflow_events::{EventStore, Precondition, StreamId};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = std::env::var("FOLD_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let dir = std::env::temp_dir().join(format!("stackflow-fold-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store = SqliteStore::open(dir.join("events.db")).expect("opens");
    let stream = StreamId::new("us-east-1", "bench");
    let events = history(n);

    let t = Instant::now();
    for e in &events {
        store
            .append(&stream, e, &Precondition::None)
            .await
            .expect("appends");
    }
    let append = t.elapsed();
    println!(
        "embedded store: appended {} events in {:.2} s ({:.1} µs each)",
        events.len(),
        append.as_secs_f64(),
        append.as_secs_f64() * 1e6 / events.len() as f64
    );

    let mut read_times = Vec::new();
    let mut fold_times = Vec::new();
    let mut state = StackState::default();
    for _ in 0..5 {
        let t = Instant::now();
        let read = store.read(&stream, 0).await.expect("reads");
        let r = t.elapsed();
        let t = Instant::now();
        state = StackState::fold(&read);
        let f = t.elapsed();
        assert_eq!(read.len(), events.len());
        read_times.push(r.as_secs_f64());
        fold_times.push(f.as_secs_f64());
    }
    read_times.sort_by(f64::total_cmp);
    fold_times.sort_by(f64::total_cmp);
    println!(
        "embedded store: read {} events: median {:.1} ms; fold: median {:.1} ms; read + fold {:.1} ms",
        events.len(),
        read_times[2] * 1e3,
        fold_times[2] * 1e3,
        (read_times[2] + fold_times[2]) * 1e3
    );
    println!(
        "state: {} resources, last deploy {:?}",
        state.resources.len(),
        state.last_deploy.map(|d| d.status)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
