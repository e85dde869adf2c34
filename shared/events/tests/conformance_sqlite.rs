//! The conformance suite against the embedded store, and what is particular to it: several
//! stores (as several processes would) on one file, reopening a file, its layout.
#![cfg(feature = "embedded")]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;
use stackflow_events::conformance;
use stackflow_events::event::{DecodeError, Event, Holder};
use stackflow_events::sqlite::{SCHEMA_VERSION, SqliteStore};
use stackflow_events::{Appended, EventStore, NewEvent, Precondition, StoreError, StreamId};

/// A directory of its own under cargo's temporary directory, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "conformance-sqlite-{name}-{}-{}-{nanos}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("create the temporary directory");
        TempDir(dir)
    }

    /// The store's file, in a subdirectory that `open` must create.
    fn db(&self) -> PathBuf {
        self.0.join(".stackflow").join("events.db")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn fresh(name: &str) -> (TempDir, SqliteStore) {
    let dir = TempDir::new(name);
    let store = SqliteStore::open(dir.db()).expect("open a new store");
    (dir, store)
}

const PREFIX: &str = "conf";

#[tokio::test]
async fn appends_in_order_and_reads_back() {
    let (_dir, store) = fresh("in-order");
    conformance::appends_in_order_and_reads_back(&store, PREFIX).await;
}

#[tokio::test]
async fn retried_append_is_a_no_op() {
    let (_dir, store) = fresh("retry");
    conformance::retried_append_is_a_no_op(&store, PREFIX).await;
}

#[tokio::test]
async fn conflicting_append_is_detected() {
    let (_dir, store) = fresh("conflict");
    conformance::conflicting_append_is_detected(&store, PREFIX).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_appenders_lose_nothing() {
    let (_dir, store) = fresh("concurrent");
    conformance::concurrent_appenders_lose_nothing(Arc::new(store), PREFIX, 50).await;
}

#[tokio::test]
async fn ordered_appends_end_a_run() {
    let (_dir, store) = fresh("ordered");
    conformance::ordered_appends_end_a_run(&store, PREFIX).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lock_is_exclusive() {
    let (_dir, store) = fresh("lock");
    conformance::lock_is_exclusive(&store, PREFIX).await;
}

#[tokio::test]
async fn fenced_lock_refuses_new_actions_only() {
    let (_dir, store) = fresh("fence");
    conformance::fenced_lock_refuses_new_actions_only(&store, PREFIX).await;
}

#[tokio::test]
async fn broken_lock() {
    let (_dir, store) = fresh("broken-lock");
    conformance::broken_lock(&store, PREFIX).await;
}

#[tokio::test]
async fn streams_are_independent_and_listed() {
    let (_dir, store) = fresh("streams");
    conformance::streams_are_independent_and_listed(&store, PREFIX).await;
}

#[tokio::test]
async fn snapshots() {
    let (_dir, store) = fresh("snapshots");
    conformance::snapshots(&store, PREFIX).await;
}

#[tokio::test]
async fn large_event_round_trips() {
    let (_dir, store) = fresh("large");
    conformance::large_event_round_trips(&store, PREFIX).await;
}

#[tokio::test]
async fn many_events_read_back_across_pages() {
    let (_dir, store) = fresh("many");
    conformance::many_events_read_back_across_pages(&store, PREFIX).await;
}

/// The whole suite on one store, in memory: checks `run_all` itself (its streams must not
/// collide) and the in-memory store.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn run_all_in_memory() {
    let store = SqliteStore::open_in_memory().expect("open an in-memory store");
    conformance::run_all(Arc::new(store), "all").await;
}

// ----- the embedded store in particular -----

fn holder(deploy_id: &str) -> Holder {
    Holder {
        deploy_id: deploy_id.to_string(),
        who: format!("{deploy_id}@host"),
        since: "2024-05-01T12:00:00Z".to_string(),
        operation: "deploy".to_string(),
        expires: None,
        fenced: None,
    }
}

fn started(deploy_id: &str) -> NewEvent {
    NewEvent::new(
        format!("{deploy_id}/start"),
        Event::DeployStarted {
            deploy_id: deploy_id.to_string(),
            who: format!("{deploy_id}@host"),
            template_digest: "abc".to_string(),
            parameters: Default::default(),
            no_rollback: false,
            stack_id: None,
        },
    )
}

fn released(deploy_id: &str, key: &str) -> NewEvent {
    NewEvent::new(
        key,
        Event::LockReleased {
            deploy_id: deploy_id.to_string(),
        },
    )
}

fn web() -> StreamId {
    StreamId::new("us-east-1", "web")
}

#[tokio::test]
async fn two_stores_on_one_file_share_locks_and_events() {
    let dir = TempDir::new("two-stores");
    let one = SqliteStore::open(dir.db()).expect("open the first store");
    let two = SqliteStore::open(dir.db()).expect("open the second store on the same file");

    one.append(
        &web(),
        &started("d1"),
        &Precondition::TakeLock(holder("d1")),
    )
    .await
    .expect("take the lock through the first store");
    match two
        .append(
            &web(),
            &started("d2"),
            &Precondition::TakeLock(holder("d2")),
        )
        .await
    {
        Err(e @ StoreError::Locked { .. }) => {
            let StoreError::Locked { holder: h } = &e else {
                unreachable!()
            };
            assert_eq!(**h, holder("d1"), "the refusal names the holder");
            let message = e.to_string();
            assert!(
                message.contains("d1@host") && message.contains("d1"),
                "the message names the holder: {message}"
            );
        }
        other => panic!("the second store must be refused, got {other:?}"),
    }
    assert_eq!(
        two.lock_holder(&web()).await.unwrap(),
        Some(holder("d1")),
        "the second store sees the first one's lock"
    );
    let through_two = two.read(&web(), 0).await.unwrap();
    assert_eq!(
        through_two.len(),
        1,
        "the second store reads the first one's event"
    );
    assert_eq!(through_two[0].event, started("d1").event);

    // A retry through the other store is recognized as the same append.
    assert_eq!(
        two.append(
            &web(),
            &started("d1"),
            &Precondition::TakeLock(holder("d1"))
        )
        .await
        .unwrap(),
        Appended::AlreadyThere(1)
    );
    two.append(
        &web(),
        &released("d1", "d1/done"),
        &Precondition::ReleaseLock("d1".into()),
    )
    .await
    .expect("release through the second store");
    assert_eq!(one.lock_holder(&web()).await.unwrap(), None);
    assert_eq!(
        one.read(&web(), 0).await.unwrap().len(),
        2,
        "the first store reads the second one's event"
    );
    assert_eq!(one.streams().await.unwrap(), vec![web()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stores_on_one_file_race_for_the_lock() {
    let dir = TempDir::new("race");
    let stores: Vec<SqliteStore> = (0..8)
        .map(|_| SqliteStore::open(dir.db()).expect("open a store"))
        .collect();
    let barrier = Arc::new(tokio::sync::Barrier::new(stores.len()));
    let tasks: Vec<_> = stores
        .iter()
        .enumerate()
        .map(|(i, store)| {
            let store = store.clone();
            let barrier = Arc::clone(&barrier);
            tokio::spawn(async move {
                let deploy = format!("d{i}");
                barrier.wait().await;
                store
                    .append(
                        &web(),
                        &started(&deploy),
                        &Precondition::TakeLock(holder(&deploy)),
                    )
                    .await
            })
        })
        .collect();
    let mut results = Vec::new();
    for task in tasks {
        results.push(task.await.unwrap());
    }
    let winners: Vec<usize> = (0..results.len()).filter(|&i| results[i].is_ok()).collect();
    assert_eq!(winners.len(), 1, "exactly one store wins: {results:?}");
    let winner = holder(&format!("d{}", winners[0]));
    for result in &results {
        match result {
            Ok(_) => {}
            Err(StoreError::Locked { holder }) => assert_eq!(**holder, winner),
            Err(e) => panic!("a loser must be told who holds the lock, got {e:?}"),
        }
    }
    assert_eq!(stores[0].read(&web(), 0).await.unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stores_on_one_file_append_at_once() {
    let dir = TempDir::new("append-at-once");
    let stores: Vec<SqliteStore> = (0..4)
        .map(|_| SqliteStore::open(dir.db()).expect("open a store"))
        .collect();
    let per_store = 15;
    let mut tasks = Vec::new();
    for (s, store) in stores.iter().enumerate() {
        for i in 0..per_store {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                let event = released(&format!("d{s}-{i}"), &format!("s{s}/e{i}"));
                let seq = store
                    .append(&web(), &event, &Precondition::None)
                    .await
                    .expect("append");
                (event.key, seq)
            }));
        }
    }
    let mut reported = std::collections::HashMap::new();
    for task in tasks {
        let (key, appended) = task.await.unwrap();
        assert!(matches!(appended, Appended::New(_)), "{key}: {appended:?}");
        reported.insert(key, appended.seq());
    }
    let read = stores[3].read(&web(), 0).await.unwrap();
    assert_eq!(read.len(), stores.len() * per_store, "nothing lost");
    let seqs: Vec<u64> = read.iter().map(|e| e.seq).collect();
    let expected: Vec<u64> = (1..=read.len() as u64).collect();
    assert_eq!(seqs, expected, "positions are dense and in order");
    for e in &read {
        assert_eq!(reported[&e.key], e.seq, "reported position of {}", e.key);
    }
}

#[tokio::test]
async fn reopening_keeps_everything() {
    let dir = TempDir::new("reopen");
    let other = StreamId::new("eu-west-1", "web");
    {
        let store = SqliteStore::open(dir.db()).unwrap();
        store
            .append(
                &web(),
                &started("d1"),
                &Precondition::TakeLock(holder("d1")),
            )
            .await
            .unwrap();
        store
            .append(&other, &released("d0", "d0/done"), &Precondition::None)
            .await
            .unwrap();
        store
            .put_snapshot(&web(), 1, &json!({"resources": {}}))
            .await
            .unwrap();
    }
    let store = SqliteStore::open(dir.db()).expect("reopen");
    let read = store.read(&web(), 0).await.unwrap();
    assert_eq!(read.len(), 1);
    assert_eq!(read[0].event, started("d1").event);
    assert_eq!(store.lock_holder(&web()).await.unwrap(), Some(holder("d1")));
    assert_eq!(
        store.latest_snapshot(&web()).await.unwrap(),
        Some((1, json!({"resources": {}})))
    );
    let mut streams = store.streams().await.unwrap();
    streams.sort();
    assert_eq!(streams, vec![other.clone(), web()]);
    // Positions go on from where they were.
    assert_eq!(
        store
            .append(
                &web(),
                &released("d1", "d1/done"),
                &Precondition::ReleaseLock("d1".into())
            )
            .await
            .unwrap(),
        Appended::New(2)
    );
}

#[tokio::test]
async fn open_creates_the_layout_in_wal_mode() {
    let dir = TempDir::new("layout");
    let store = SqliteStore::open(dir.db()).expect("open creates the parent directories");
    assert_eq!(store.path(), dir.db());
    assert!(
        format!("{store:?}").contains("events.db"),
        "Debug shows the path: {store:?}"
    );
    let conn = rusqlite::Connection::open(dir.db()).unwrap();
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION, "the layout version is recorded");
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let mut tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    tables.sort();
    assert_eq!(tables, ["events", "locks", "snapshots", "streams"]);
}

#[tokio::test]
async fn a_newer_layout_is_refused() {
    let dir = TempDir::new("newer");
    drop(SqliteStore::open(dir.db()).unwrap());
    rusqlite::Connection::open(dir.db())
        .unwrap()
        .pragma_update(None, "user_version", SCHEMA_VERSION + 1)
        .unwrap();
    match SqliteStore::open(dir.db()) {
        Err(StoreError::Backend(message)) => {
            assert!(
                message.contains("newer stackflow") && message.contains("events.db"),
                "the refusal says why and names the file: {message}"
            );
        }
        other => panic!("a newer layout must be refused, got {other:?}"),
    }
}

#[tokio::test]
async fn undecodable_events_are_decode_errors() {
    let (dir, store) = fresh("decode");
    store
        .append(&web(), &started("d1"), &Precondition::None)
        .await
        .unwrap();
    store
        .append(&web(), &released("d1", "d1/done"), &Precondition::None)
        .await
        .unwrap();
    let conn = rusqlite::Connection::open(dir.db()).unwrap();
    conn.execute("UPDATE events SET v = 99 WHERE seq = 1", [])
        .unwrap();
    match store.read(&web(), 0).await {
        Err(StoreError::Decode {
            stream,
            seq: 1,
            source: DecodeError::TooNew { version: 99, .. },
        }) => assert_eq!(stream, "us-east-1/web"),
        other => panic!("a too-new event must be a Decode error, got {other:?}"),
    }
    conn.execute("UPDATE events SET body = '{\"type\": 3' WHERE seq = 2", [])
        .unwrap();
    match store.read(&web(), 1).await {
        Err(StoreError::Decode {
            seq: 2,
            source: DecodeError::Malformed { .. },
            ..
        }) => {}
        other => panic!("a malformed event must be a Decode error, got {other:?}"),
    }
}

#[tokio::test]
async fn backend_errors_name_the_file() {
    let dir = TempDir::new("unopenable");
    // A directory where the file should be.
    std::fs::create_dir_all(dir.db()).unwrap();
    match SqliteStore::open(dir.db()) {
        Err(StoreError::Backend(message)) => {
            assert!(message.contains("events.db"), "names the file: {message}")
        }
        other => panic!("opening a directory must fail, got {other:?}"),
    }
}

/// The variable through which [`another_process_is_refused`] hands the database to the
/// child process.
const CHILD_DB: &str = "STACKFLOW_TEST_CHILD_DB";

/// Run by [`another_process_is_refused`] in a child process; does nothing otherwise.
#[tokio::test]
async fn child_process_part() {
    let Some(db) = std::env::var_os(CHILD_DB) else {
        return;
    };
    let store = SqliteStore::open(&db).expect("child: open");
    match store
        .append(
            &web(),
            &started("child"),
            &Precondition::TakeLock(holder("child")),
        )
        .await
    {
        Err(StoreError::Locked { holder }) => println!("LOCKED-BY {}", holder.deploy_id),
        other => println!("NOT-REFUSED {other:?}"),
    }
    let appended = store
        .append(
            &web(),
            &released("child", "child/note"),
            &Precondition::None,
        )
        .await
        .expect("child: append");
    println!("APPENDED {}", appended.seq());
}

#[tokio::test]
async fn another_process_is_refused() {
    let (dir, store) = fresh("process");
    store
        .append(
            &web(),
            &started("parent"),
            &Precondition::TakeLock(holder("parent")),
        )
        .await
        .unwrap();
    let output = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_process_part",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_DB, dir.db())
        .output()
        .expect("run the child process");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the child failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("LOCKED-BY parent"),
        "the other process must be refused naming the holder: {stdout}"
    );
    assert!(
        stdout.contains("APPENDED 2"),
        "the child appended: {stdout}"
    );
    let read = store.read(&web(), 0).await.unwrap();
    assert_eq!(read.len(), 2, "this process reads the child's event");
    assert_eq!(read[1].key, "child/note");
}

/// The database and its journal hold a deploy's record: only their owner can read them.
#[cfg(unix)]
#[tokio::test]
async fn a_new_database_is_readable_by_its_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("mode");
    let store = SqliteStore::open(dir.db()).unwrap();
    let stream = StreamId::new("us-east-1", "app");
    store
        .append(
            &stream,
            &NewEvent::new(
                "k",
                Event::LockReleased {
                    deploy_id: "d".into(),
                },
            ),
            &Precondition::None,
        )
        .await
        .unwrap();
    let parent = dir.db().parent().unwrap().to_path_buf();
    for entry in std::fs::read_dir(parent).unwrap() {
        let path = entry.unwrap().path();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{} has mode {mode:o}", path.display());
    }
}
