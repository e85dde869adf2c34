//! The DynamoDB store's own retries under faults: with the SDK's retries off, every
//! fault of the [`FaultProxy`] reaches the store, which must repeat what it can and
//! recognize what a lost answer already did. (The faults campaign, `faults.rs`, runs the
//! store with the SDK's retries on, as the CLI does.)

use std::sync::Arc;

use aws_smithy_types::retry::RetryConfig;
use stackflow_events::dynamo::{DynamoStore, INLINE_BODY_LIMIT};
use stackflow_events::event::{Event, Holder};
use stackflow_events::{Appended, EventStore, NewEvent, Precondition, StreamId};
use stackflow_tests::deploy::{cli_config, dynamo_on, dynamo_store};
use stackflow_tests::emulator::REGION;
use stackflow_tests::faults::{Fault, FaultConfig, FaultProxy};
use stackflow_tests::{Emulator, unique_name};

/// The appends of a run that holds the stack's lock: it takes it, writes `n` events (every
/// tenth too large for an item: its body goes to S3), and releases it.
fn locked_run(n: usize) -> Vec<(NewEvent, Precondition)> {
    let holder = Holder {
        deploy_id: "d1".into(),
        who: "faults".into(),
        since: "2026-01-01T00:00:00Z".into(),
        operation: "deploy".into(),
        expires: None,
        fenced: None,
    };
    let take = Event::LockTaken {
        holder: holder.clone(),
    };
    let mut appends = vec![(
        NewEvent::new("d1/lock", take),
        Precondition::TakeLock(holder),
    )];
    for i in 0..n {
        let event = Event::ResourceDeleted {
            deploy_id: "d1".into(),
            logical_id: format!("R{i}"),
            physical_id: format!(
                "r-{i}-{}",
                "x".repeat(if i % 10 == 9 { INLINE_BODY_LIMIT } else { 0 })
            ),
            replaced: false,
        };
        let pre = Precondition::HoldsLock("d1".into());
        appends.push((NewEvent::new(format!("d1/R{i}/delete/done"), event), pre));
    }
    let release = Event::LockReleased {
        deploy_id: "d1".into(),
    };
    let pre = Precondition::ReleaseLock("d1".into());
    appends.push((NewEvent::new("d1/unlock", release), pre));
    appends
}

/// A DynamoDB store on a new table whose requests go through a [`FaultProxy`] with
/// `config`, with the SDK's own retries off; the same table without the proxy; the proxy.
async fn behind_faults(config: FaultConfig) -> (Arc<DynamoStore>, Arc<DynamoStore>, FaultProxy) {
    let emulator = Emulator::shared().await;
    let (table, bucket, direct) = dynamo_store(emulator).await;
    let proxy = FaultProxy::start(emulator.endpoint(), config)
        .await
        .expect("the fault proxy");
    let sdk = cli_config(&emulator.sdk_config().await, &proxy.endpoint())
        .to_builder()
        .retry_config(RetryConfig::disabled())
        .build();
    (dynamo_on(&sdk, &table, &bucket), direct, proxy)
}

/// The DynamoDB store repeats what a fault cut off, itself: with the SDK's own retries
/// off, 30 % of its requests (DynamoDB, and S3 for the large bodies) throttled, answered
/// a plain-text 503, reset, or carried out with their answer dropped, every append of a
/// locked run (take, hold, release) lands once, at the next position, and a repeated
/// append is recognized.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dynamodb_store_repeats_what_a_fault_cut_off() {
    let (store, direct, proxy) = behind_faults(FaultConfig {
        rate: 0.3,
        ..FaultConfig::new(19)
    })
    .await;
    let stream = StreamId::new(REGION, unique_name("cut-off"));
    let appends = locked_run(30);
    for (n, (event, pre)) in appends.iter().enumerate() {
        let appended = store.append(&stream, event, pre).await;
        let appended =
            appended.unwrap_or_else(|e| panic!("append {}: {e}\n{}", event.key, proxy.report()));
        assert_eq!(appended, Appended::New(n as u64 + 1), "{}", event.key);
    }
    let again = store.append(&stream, &appends[5].0, &appends[5].1).await;
    assert_eq!(again.expect("a repeated append"), Appended::AlreadyThere(6));
    let stored = direct.read(&stream, 0).await.expect("the events");
    let keys: Vec<&str> = stored.iter().map(|e| e.key.as_str()).collect();
    let want: Vec<&str> = appends.iter().map(|(e, _)| e.key.as_str()).collect();
    assert_eq!(keys, want);
    assert!(stored.iter().zip(1..).all(|(e, seq)| e.seq == seq));
    assert_eq!(direct.lock_holder(&stream).await.expect("the lock"), None);
    eprintln!("{}", proxy.report());
    assert!(
        proxy.faults_of("TransactWriteItems", Fault::Drop) > 0,
        "no transaction's answer was dropped: another seed"
    );
    assert!(
        proxy.totals().faults.iter().all(|n| *n > 0),
        "every fault was injected"
    );
    assert!(
        proxy.faults_of("PutObject", Fault::Drop) > 0,
        "no large body's answer was dropped: another seed"
    );
}

/// Appends made at once are written together (up to 48 a transaction), and a transaction
/// cut off is recognized as a whole: with the SDK's own retries off and half of the
/// store's transactions reset or carried out with their answer dropped, 60 appends made
/// at once under the lock each land once, the positions have no hole, and each append is
/// told its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_written_together_land_once_through_faults() {
    let (store, direct, proxy) = behind_faults(FaultConfig {
        rate: 0.5,
        kinds: vec![Fault::Reset, Fault::Drop],
        operations: vec!["TransactWriteItems".into()],
        ..FaultConfig::new(23)
    })
    .await;
    let stream = StreamId::new(REGION, unique_name("together"));
    let mut appends = locked_run(60);
    let release = appends.pop().expect("the release");
    let take = appends.remove(0);
    let taken = store.append(&stream, &take.0, &take.1).await;
    assert_eq!(taken.expect("the lock"), Appended::New(1));

    let mut running = tokio::task::JoinSet::new();
    for (event, pre) in appends.clone() {
        let (store, stream) = (store.clone(), stream.clone());
        running.spawn(async move {
            let appended = store.append(&stream, &event, &pre).await;
            (event.key, appended)
        });
    }
    let mut positions = std::collections::BTreeMap::new();
    for (key, appended) in running.join_all().await {
        match appended {
            Ok(Appended::New(seq)) => assert!(positions.insert(seq, key).is_none()),
            other => panic!("append {key}: {other:?}\n{}", proxy.report()),
        }
    }
    assert_eq!(
        positions.keys().copied().collect::<Vec<u64>>(),
        (2..=61).collect::<Vec<u64>>()
    );
    let released = store.append(&stream, &release.0, &release.1).await;
    assert_eq!(released.expect("the release"), Appended::New(62));

    let stored = direct.read(&stream, 0).await.expect("the events");
    assert!(stored.iter().zip(1..).all(|(e, seq)| e.seq == seq));
    for event in &stored[1..61] {
        assert_eq!(
            positions.get(&event.seq),
            Some(&event.key),
            "each told its own"
        );
    }
    assert_eq!(direct.lock_holder(&stream).await.expect("the lock"), None);
    eprintln!("{}", proxy.report());
    assert!(
        proxy.faults_of("TransactWriteItems", Fault::Drop) > 0,
        "no transaction's answer was dropped: another seed"
    );
}
