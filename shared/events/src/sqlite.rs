//! The embedded store: a SQLite database file, by default `.stackflow/events.db`.
//!
//! # Layout
//!
//! - `events(stream, seq, key, type, v, at, body, digest)`: one row per event, `stream`
//!   being [`StreamId::key`], `body` the event's JSON ([`Event::to_body`]) and `digest`
//!   [`NewEvent::digest`]; `(stream, seq)` is the primary key and `(stream, key)` is unique.
//! - `streams(stream, region, stack)`: every stream that has an event.
//! - `locks(stream, holder)`: the holder (JSON [`Holder`]) of each locked stack.
//! - `snapshots(stream, seq, body)`: projection snapshots.
//!
//! The layout's version is `PRAGMA user_version` ([`SCHEMA_VERSION`]); a file written by a
//! newer layout is refused, and an older one is migrated when opened.
//!
//! # Concurrency
//!
//! Every append is one `BEGIN IMMEDIATE` transaction: it takes SQLite's write lock first,
//! then deduplicates by key, checks the precondition against `locks`, allocates
//! `max(seq) + 1` and inserts. Because the exclusion comes from SQLite's own file locking,
//! it holds between processes (two CLI runs on one stack) as well as between tasks of one
//! process. A writer that finds the file locked waits up to [`BUSY_TIMEOUT`]. The file is in
//! WAL mode, so readers never wait for a writer.
//!
//! Each store owns two connections (one for writes, one for reads), each behind a
//! `std::sync::Mutex` since a `rusqlite::Connection` is `Send` but not `Sync`. Every
//! operation runs on tokio's blocking pool ([`tokio::task::spawn_blocking`]): a write may
//! wait seconds for another process's transaction, and must not stall the async workers
//! while it does. The store must therefore be used from within a tokio runtime.
//!
//! # Rewriting
//!
//! [`EventStore::rewrite`] replaces stored bodies in one transaction, then vacuums the
//! file and truncates its write-ahead log, so that no page keeps an old body (`rewrite`).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OptionalExtension, Transaction, TransactionBehavior};
use serde_json::Value;

use crate::event::{DecodeError, Event, Holder, NewEvent, StoredEvent, current_version, now};
use crate::store::{
    Appended, EventStore, LockChange, Precondition, Rewrite, Rewritten, StoreError, StoreResult,
    StreamId,
};

mod rewrite;

/// Where a project's store lives, relative to the project's directory.
pub const DEFAULT_PATH: &str = ".stackflow/events.db";

/// The version of the database layout this build writes (`PRAGMA user_version`).
pub const SCHEMA_VERSION: i64 = 1;

/// How long a write waits for another connection (or process) to finish its transaction
/// before failing.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// The layout of version 1.
const SCHEMA_V1: &str = "
CREATE TABLE IF NOT EXISTS events (
    stream TEXT NOT NULL,
    seq INTEGER NOT NULL,
    key TEXT NOT NULL,
    type TEXT NOT NULL,
    v INTEGER NOT NULL,
    at TEXT NOT NULL,
    body TEXT NOT NULL,
    digest TEXT NOT NULL,
    PRIMARY KEY (stream, seq),
    UNIQUE (stream, key)
);
CREATE TABLE IF NOT EXISTS streams (
    stream TEXT PRIMARY KEY NOT NULL,
    region TEXT NOT NULL,
    stack TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS locks (
    stream TEXT PRIMARY KEY NOT NULL,
    holder TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS snapshots (
    stream TEXT NOT NULL,
    seq INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (stream, seq)
);
";

/// The embedded event store: a SQLite database file. Cloning it is cheap and shares the
/// connections.
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

struct Inner {
    /// The file, as given to [`SqliteStore::open`] (`:memory:` for an in-memory store).
    path: PathBuf,
    /// The connection that writes.
    writer: Mutex<Connection>,
    /// The connection that reads; `None` for an in-memory store, whose database only its
    /// one connection sees.
    reader: Option<Mutex<Connection>>,
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.inner.path)
            .finish()
    }
}

/// Creates `path` readable and writable by its owner only (mode 0600) when it does not
/// exist; SQLite gives its journal files the database file's mode.
fn create_private(path: &Path) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

impl SqliteStore {
    /// Opens the store in the file at `path`, creating the file, its parent directories
    /// and the layout when missing, and migrating an older layout.
    pub fn open(path: impl AsRef<Path>) -> StoreResult<Self> {
        let path = path.as_ref().to_path_buf();
        let shown = path.display().to_string();
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| {
                StoreError::Backend(format!(
                    "event store {shown}: cannot create {}: {e}",
                    parent.display()
                ))
            })?;
        }
        create_private(&path).map_err(|e| {
            StoreError::Backend(format!("event store {shown}: cannot create it: {e}"))
        })?;
        let mut writer = Connection::open(&path).map_err(backend(&shown, "open"))?;
        configure(&writer).map_err(backend(&shown, "configure"))?;
        set_wal(&writer).map_err(backend(&shown, "set WAL mode"))?;
        migrate(&mut writer, &shown)?;
        let reader = Connection::open(&path).map_err(backend(&shown, "open"))?;
        configure(&reader).map_err(backend(&shown, "configure"))?;
        reader
            .pragma_update(None, "query_only", true)
            .map_err(backend(&shown, "configure"))?;
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                path,
                writer: Mutex::new(writer),
                reader: Some(Mutex::new(reader)),
            }),
        })
    }

    /// A store in memory, gone when the last clone is dropped (for tests).
    pub fn open_in_memory() -> StoreResult<Self> {
        let shown = ":memory:";
        let mut conn = Connection::open_in_memory().map_err(backend(shown, "open"))?;
        configure(&conn).map_err(backend(shown, "configure"))?;
        migrate(&mut conn, shown)?;
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                path: PathBuf::from(shown),
                writer: Mutex::new(conn),
                reader: None,
            }),
        })
    }

    /// The database file (`:memory:` for an in-memory store).
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Runs `f` with the store on tokio's blocking pool.
    async fn run<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Inner) -> StoreResult<T> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        match tokio::task::spawn_blocking(move || f(&inner)).await {
            Ok(result) => result,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => Err(StoreError::Backend(format!(
                "event store {}: {e}",
                self.inner.path.display()
            ))),
        }
    }
}

impl Inner {
    fn shown(&self) -> String {
        self.path.display().to_string()
    }

    fn writer(&self) -> MutexGuard<'_, Connection> {
        // A panic while the lock was held dropped its transaction, which rolled back: the
        // connection is fine to use.
        self.writer.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn reader(&self) -> MutexGuard<'_, Connection> {
        match &self.reader {
            Some(reader) => reader.lock().unwrap_or_else(|e| e.into_inner()),
            None => self.writer(),
        }
    }
}

/// Settings of every connection.
fn configure(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // Every append is on disk when it returns: an intent written before an AWS call must
    // survive a crash right after it.
    conn.pragma_update(None, "synchronous", "FULL")?;
    Ok(())
}

/// Switches the file to WAL, which lets readers run while a writer writes, here and in
/// other processes. The mode is stored in the file; when it cannot be had (e.g. a file
/// system without shared memory) SQLite keeps its rollback journal, where the
/// transactions are just as exclusive.
///
/// The switch of a new file writes it, from within a read: while another connection
/// writes (another process switching the same new file), SQLite answers "busy" at once
/// instead of waiting, since waiting with a read lock could deadlock. Ten deploys started
/// at once in one directory do that; the switch is tried again until [`BUSY_TIMEOUT`].
fn set_wal(conn: &Connection) -> rusqlite::Result<()> {
    let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
    let mut pause = Duration::from_millis(2);
    loop {
        match conn.query_row("PRAGMA journal_mode = WAL", [], |row| {
            row.get::<_, String>(0)
        }) {
            Err(e)
                if e.sqlite_error_code() == Some(ErrorCode::DatabaseBusy)
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(100));
            }
            other => return other.map(drop),
        }
    }
}

/// Creates the layout in a new file, or brings an older one up to [`SCHEMA_VERSION`].
fn migrate(conn: &mut Connection, shown: &str) -> StoreResult<()> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(backend(shown, "migrate"))?;
    let version: i64 = tx
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .map_err(backend(shown, "read the layout version"))?;
    match version {
        0 => {
            tx.execute_batch(SCHEMA_V1)
                .map_err(backend(shown, "create the layout"))?;
        }
        // A future layout adds `1 => { ... }` here, each step falling through to the next.
        SCHEMA_VERSION => return Ok(()),
        newer => {
            return Err(StoreError::Backend(format!(
                "event store {shown}: written by a newer stackflow (layout version {newer}, \
                 this build knows up to {SCHEMA_VERSION}); upgrade stackflow"
            )));
        }
    }
    tx.pragma_update(None, "user_version", SCHEMA_VERSION)
        .map_err(backend(shown, "record the layout version"))?;
    tx.commit().map_err(backend(shown, "migrate"))
}

/// Maps a database error to [`StoreError::Backend`], naming the file and what was done.
fn backend(shown: &str, what: &str) -> impl Fn(rusqlite::Error) -> StoreError {
    let context = format!("event store {shown}: {what}");
    move |e| {
        if e.sqlite_error_code() == Some(ErrorCode::DatabaseBusy) {
            StoreError::Backend(format!(
                "{context}: the database stayed locked by another connection for more than {}s ({e})",
                BUSY_TIMEOUT.as_secs()
            ))
        } else {
            StoreError::Backend(format!("{context}: {e}"))
        }
    }
}

/// A position as SQLite stores it.
fn to_sql_seq(seq: u64) -> i64 {
    i64::try_from(seq).unwrap_or(i64::MAX)
}

/// A position as read back (never negative: positions start at 1).
fn from_sql_seq(seq: i64) -> u64 {
    u64::try_from(seq).unwrap_or(0)
}

fn holder_to_json(holder: &Holder) -> String {
    serde_json::to_string(holder).expect("holders serialize")
}

fn holder_from_json(shown: &str, stream: &str, text: &str) -> StoreResult<Holder> {
    serde_json::from_str(text).map_err(|e| {
        StoreError::Backend(format!(
            "event store {shown}: stream {stream}: unreadable lock holder: {e}"
        ))
    })
}

/// The holder of a stream's lock, read inside `conn`'s current transaction (if any).
fn read_holder(conn: &Connection, shown: &str, stream: &str) -> StoreResult<Option<Holder>> {
    let text: Option<String> = conn
        .prepare_cached("SELECT holder FROM locks WHERE stream = ?1")
        .and_then(|mut stmt| stmt.query_row([stream], |row| row.get(0)).optional())
        .map_err(backend(shown, "read the lock"))?;
    text.map(|t| holder_from_json(shown, stream, &t))
        .transpose()
}

/// An event ready to be inserted: serialized and digested before the transaction starts.
struct Pending {
    key: String,
    type_name: &'static str,
    body: String,
    digest: String,
}

impl Pending {
    fn new(event: &NewEvent) -> Self {
        Pending {
            key: event.key.clone(),
            type_name: event.event.type_name(),
            body: serde_json::to_string(&event.event.to_body()).expect("events serialize"),
            digest: event.digest(),
        }
    }
}

/// The event already stored under `row.key`, if any: the same content is
/// [`Appended::AlreadyThere`], other content a [`StoreError::Conflict`].
fn dedupe(
    tx: &Transaction<'_>,
    shown: &str,
    stream: &str,
    row: &Pending,
) -> StoreResult<Option<u64>> {
    let found: Option<(i64, String)> = tx
        .prepare_cached("SELECT seq, digest FROM events WHERE stream = ?1 AND key = ?2")
        .and_then(|mut stmt| {
            stmt.query_row([stream, row.key.as_str()], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()
        })
        .map_err(backend(shown, "look up the key"))?;
    match found {
        None => Ok(None),
        Some((seq, digest)) if digest == row.digest => Ok(Some(from_sql_seq(seq))),
        Some(_) => Err(StoreError::Conflict {
            key: row.key.clone(),
        }),
    }
}

/// Inserts `row` at the stream's next position, which it returns.
fn insert(tx: &Transaction<'_>, shown: &str, stream: &StreamId, row: &Pending) -> StoreResult<u64> {
    let key = stream.key();
    let last: i64 = tx
        .prepare_cached("SELECT COALESCE(MAX(seq), 0) FROM events WHERE stream = ?1")
        .and_then(|mut stmt| stmt.query_row([&key], |r| r.get(0)))
        .map_err(backend(shown, "find the stream's end"))?;
    let seq = last + 1;
    let v = current_version(row.type_name);
    tx.prepare_cached(
        "INSERT INTO events (stream, seq, key, type, v, at, body, digest)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )
    .and_then(|mut stmt| {
        stmt.execute(rusqlite::params![
            key,
            seq,
            row.key,
            row.type_name,
            v,
            now(),
            row.body,
            row.digest
        ])
    })
    .map_err(backend(shown, "insert the event"))?;
    tx.prepare_cached("INSERT OR IGNORE INTO streams (stream, region, stack) VALUES (?1, ?2, ?3)")
        .and_then(|mut stmt| stmt.execute([&key, &stream.region, &stream.stack]))
        .map_err(backend(shown, "record the stream"))?;
    Ok(from_sql_seq(seq))
}

/// Checks `pre` against the `locks` table and applies it (take, release or fence), inside
/// `tx`.
fn apply_precondition(
    tx: &Transaction<'_>,
    shown: &str,
    stream: &str,
    pre: &Precondition,
) -> StoreResult<()> {
    let current = match pre {
        Precondition::None => return Ok(()),
        _ => read_holder(tx, shown, stream)?,
    };
    match pre.check(current.as_ref())? {
        LockChange::Keep => Ok(()),
        LockChange::Take(holder) => {
            tx.prepare_cached("INSERT INTO locks (stream, holder) VALUES (?1, ?2)")
                .and_then(|mut stmt| stmt.execute([stream, &holder_to_json(&holder)]))
                .map_err(backend(shown, "take the lock"))?;
            Ok(())
        }
        LockChange::Release => delete_lock(tx, shown, stream),
        LockChange::Fence => {
            // (`check` answers `Fence` only to the holder)
            let Some(mut holder) = current else {
                return Ok(());
            };
            holder.fenced = Some(now());
            tx.prepare_cached("UPDATE locks SET holder = ?2 WHERE stream = ?1")
                .and_then(|mut stmt| stmt.execute([stream, &holder_to_json(&holder)]))
                .map_err(backend(shown, "fence the lock"))?;
            Ok(())
        }
    }
}

fn delete_lock(tx: &Transaction<'_>, shown: &str, stream: &str) -> StoreResult<()> {
    tx.prepare_cached("DELETE FROM locks WHERE stream = ?1")
        .and_then(|mut stmt| stmt.execute([stream]))
        .map_err(backend(shown, "release the lock"))?;
    Ok(())
}

fn begin<'c>(conn: &'c mut Connection, shown: &str) -> StoreResult<Transaction<'c>> {
    conn.transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(backend(shown, "begin a write"))
}

fn commit(tx: Transaction<'_>, shown: &str) -> StoreResult<()> {
    tx.commit().map_err(backend(shown, "commit"))
}

/// Decodes one stored row.
fn decode(
    stream: &str,
    seq: u64,
    key: String,
    type_name: &str,
    v: i64,
    at: String,
    body: &str,
) -> StoreResult<StoredEvent> {
    let malformed = |version: u32, message: String| StoreError::Decode {
        stream: stream.to_string(),
        seq,
        source: DecodeError::Malformed {
            type_name: type_name.to_string(),
            version,
            message,
        },
    };
    let v = u32::try_from(v).map_err(|_| malformed(0, format!("invalid version {v}")))?;
    let body: Value = serde_json::from_str(body).map_err(|e| malformed(v, e.to_string()))?;
    let event = Event::from_body(type_name, v, body).map_err(|source| StoreError::Decode {
        stream: stream.to_string(),
        seq,
        source,
    })?;
    Ok(StoredEvent {
        seq,
        key,
        at,
        v,
        event,
    })
}

impl EventStore for SqliteStore {
    async fn append(
        &self,
        stream: &StreamId,
        event: &NewEvent,
        pre: &Precondition,
    ) -> StoreResult<Appended> {
        let stream = stream.clone();
        let pre = pre.clone();
        let row = Pending::new(event);
        self.run(move |inner| {
            let shown = inner.shown();
            let key = stream.key();
            let mut conn = inner.writer();
            let tx = begin(&mut conn, &shown)?;
            if let Some(seq) = dedupe(&tx, &shown, &key, &row)? {
                return Ok(Appended::AlreadyThere(seq));
            }
            apply_precondition(&tx, &shown, &key, &pre)?;
            let seq = insert(&tx, &shown, &stream, &row)?;
            commit(tx, &shown)?;
            Ok(Appended::New(seq))
        })
        .await
    }

    async fn read(&self, stream: &StreamId, after: u64) -> StoreResult<Vec<StoredEvent>> {
        let key = stream.key();
        self.run(move |inner| {
            let shown = inner.shown();
            let conn = inner.reader();
            let mut stmt = conn
                .prepare_cached(
                    "SELECT seq, key, type, v, at, body FROM events
                     WHERE stream = ?1 AND seq > ?2 ORDER BY seq",
                )
                .map_err(backend(&shown, "read"))?;
            let mut rows = stmt
                .query(rusqlite::params![key, to_sql_seq(after)])
                .map_err(backend(&shown, "read"))?;
            let mut events = Vec::new();
            while let Some(r) = rows.next().map_err(backend(&shown, "read"))? {
                let columns = (|| -> rusqlite::Result<_> {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, i64>(3)?,
                        r.get::<_, String>(4)?,
                        r.get::<_, String>(5)?,
                    ))
                })()
                .map_err(backend(&shown, "read"))?;
                let (seq, event_key, type_name, v, at, body) = columns;
                events.push(decode(
                    &key,
                    from_sql_seq(seq),
                    event_key,
                    &type_name,
                    v,
                    at,
                    &body,
                )?);
            }
            Ok(events)
        })
        .await
    }

    async fn lock_holder(&self, stream: &StreamId) -> StoreResult<Option<Holder>> {
        let key = stream.key();
        self.run(move |inner| read_holder(&inner.reader(), &inner.shown(), &key))
            .await
    }

    async fn break_lock(&self, stream: &StreamId, by: &str) -> StoreResult<Option<Holder>> {
        let stream = stream.clone();
        let by = by.to_string();
        self.run(move |inner| {
            let shown = inner.shown();
            let key = stream.key();
            let mut conn = inner.writer();
            let tx = begin(&mut conn, &shown)?;
            let Some(previous) = read_holder(&tx, &shown, &key)? else {
                return Ok(None);
            };
            delete_lock(&tx, &shown, &key)?;
            let event = NewEvent::new(
                format!("lock-broken/{}/{}", previous.deploy_id, now()),
                Event::LockBroken {
                    by,
                    previous: previous.clone(),
                },
            );
            let row = Pending::new(&event);
            // The key carries the time to the millisecond: only a break of the same
            // deploy's lock within the same millisecond could meet it again.
            if dedupe(&tx, &shown, &key, &row)?.is_none() {
                insert(&tx, &shown, &stream, &row)?;
            }
            commit(tx, &shown)?;
            Ok(Some(previous))
        })
        .await
    }

    async fn renew_lock(&self, stream: &StreamId, deploy_id: &str, until: &str) -> StoreResult<()> {
        let key = stream.key();
        let (deploy_id, until) = (deploy_id.to_string(), until.to_string());
        self.run(move |inner| {
            let shown = inner.shown();
            let mut conn = inner.writer();
            let tx = begin(&mut conn, &shown)?;
            let mut holder = match read_holder(&tx, &shown, &key)? {
                Some(h) if h.deploy_id == deploy_id => h,
                other => {
                    return Err(StoreError::NotHolder {
                        deploy_id,
                        holder: other.map(Box::new),
                    });
                }
            };
            holder.expires = Some(until);
            tx.prepare_cached("UPDATE locks SET holder = ?2 WHERE stream = ?1")
                .and_then(|mut stmt| stmt.execute(rusqlite::params![key, holder_to_json(&holder)]))
                .map_err(backend(&shown, "renew the lock"))?;
            commit(tx, &shown)
        })
        .await
    }

    async fn put_snapshot(&self, stream: &StreamId, seq: u64, body: &Value) -> StoreResult<()> {
        let key = stream.key();
        let body = serde_json::to_string(body).expect("values serialize");
        self.run(move |inner| {
            let shown = inner.shown();
            let mut conn = inner.writer();
            let tx = begin(&mut conn, &shown)?;
            tx.prepare_cached(
                "INSERT OR REPLACE INTO snapshots (stream, seq, body) VALUES (?1, ?2, ?3)",
            )
            .and_then(|mut stmt| stmt.execute(rusqlite::params![key, to_sql_seq(seq), body]))
            .map_err(backend(&shown, "store the snapshot"))?;
            // Only the latest snapshot is ever read: older ones are dropped.
            tx.prepare_cached("DELETE FROM snapshots WHERE stream = ?1 AND seq < ?2")
                .and_then(|mut stmt| stmt.execute(rusqlite::params![key, to_sql_seq(seq)]))
                .map_err(backend(&shown, "drop older snapshots"))?;
            commit(tx, &shown)
        })
        .await
    }

    async fn latest_snapshot(&self, stream: &StreamId) -> StoreResult<Option<(u64, Value)>> {
        let key = stream.key();
        self.run(move |inner| {
            let shown = inner.shown();
            let conn = inner.reader();
            let found: Option<(i64, String)> = conn
                .prepare_cached(
                    "SELECT seq, body FROM snapshots WHERE stream = ?1 ORDER BY seq DESC LIMIT 1",
                )
                .and_then(|mut stmt| {
                    stmt.query_row([&key], |r| Ok((r.get(0)?, r.get(1)?)))
                        .optional()
                })
                .map_err(backend(&shown, "read the snapshot"))?;
            found
                .map(|(seq, body)| {
                    let body = serde_json::from_str(&body).map_err(|e| {
                        StoreError::Backend(format!(
                            "event store {shown}: stream {key}: unreadable snapshot at {seq}: {e}"
                        ))
                    })?;
                    Ok((from_sql_seq(seq), body))
                })
                .transpose()
        })
        .await
    }

    async fn streams(&self) -> StoreResult<Vec<StreamId>> {
        self.run(move |inner| {
            let shown = inner.shown();
            let conn = inner.reader();
            let mut stmt = conn
                .prepare_cached("SELECT region, stack FROM streams ORDER BY region, stack")
                .map_err(backend(&shown, "list the streams"))?;
            let streams = stmt
                .query_map([], |r| {
                    Ok(StreamId::new(
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                    ))
                })
                .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
                .map_err(backend(&shown, "list the streams"))?;
            Ok(streams)
        })
        .await
    }

    async fn rewrite(
        &self,
        stream: &StreamId,
        rewrite: &Rewrite,
        pre: &Precondition,
    ) -> StoreResult<Rewritten> {
        self.rewrite_events(stream, rewrite, pre).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Another process switching a new file to WAL holds its write lock for a moment; an
    /// open meanwhile is told "busy" at once (SQLite does not wait while the asker holds a
    /// read lock), and must wait its turn instead of failing.
    #[test]
    fn an_open_waits_while_another_switches_a_new_file_to_wal() {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let dir = std::env::temp_dir().join(format!(
            "stackflow-sqlite-open-{}-{nanos}",
            std::process::id()
        ));
        let path = dir.join("events.db");
        std::fs::create_dir_all(&dir).unwrap();
        let other = Connection::open(&path).unwrap();
        other.execute_batch("BEGIN IMMEDIATE").unwrap();
        let opening = {
            let path = path.clone();
            std::thread::spawn(move || SqliteStore::open(&path).map(|_| ()))
        };
        std::thread::sleep(Duration::from_millis(300));
        other.execute_batch("COMMIT").unwrap();
        let opened = opening.join().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(opened.is_ok(), "{opened:?}");
    }
}
