//! Rewriting stored events in place ([`EventStore::rewrite`]), so that no byte of the
//! file keeps the old bodies.
//!
//! The rewrite is one `BEGIN IMMEDIATE` transaction, like an append: it checks that every
//! position holds an event of the type given, deduplicates the record by its key, checks
//! the precondition, replaces the bodies (with their digests and versions), drops the
//! stream's snapshots and appends the record. It runs with `secure_delete` on, so that the
//! space the old bodies held is zeroed. After the commit the file is vacuumed (every page
//! written anew) and the write-ahead log is checkpointed and truncated, so that neither
//! keeps a copy of an old page. When another connection keeps the log from being emptied,
//! the rewrite still stands, and [`Rewritten::residue`] says what may remain.
//!
//! [`EventStore::rewrite`]: crate::store::EventStore::rewrite

use rusqlite::{Connection, OptionalExtension, Transaction};

use super::{
    Inner, Pending, SqliteStore, apply_precondition, backend, begin, commit, dedupe, insert,
    to_sql_seq,
};
use crate::event::{Event, current_version, digest};
use crate::store::{Appended, Precondition, Rewrite, Rewritten, StoreError, StoreResult, StreamId};

/// A rewritten event, serialized before the transaction starts.
struct Row {
    seq: u64,
    type_name: &'static str,
    body: String,
    digest: String,
}

impl Row {
    fn new(seq: u64, event: &Event) -> Row {
        let body = event.to_body();
        Row {
            seq,
            type_name: event.type_name(),
            digest: digest(&body),
            body: serde_json::to_string(&body).expect("events serialize"),
        }
    }
}

impl SqliteStore {
    /// See [`EventStore::rewrite`](crate::store::EventStore::rewrite).
    pub(super) async fn rewrite_events(
        &self,
        stream: &StreamId,
        rewrite: &Rewrite,
        pre: &Precondition,
    ) -> StoreResult<Rewritten> {
        let stream = stream.clone();
        let pre = pre.clone();
        let record = Pending::new(&rewrite.record);
        let rows: Vec<Row> = rewrite
            .events
            .iter()
            .map(|(seq, event)| Row::new(*seq, event))
            .collect();
        self.run(move |inner| {
            let (record, snapshots_dropped) = rewrite_rows(inner, &stream, &rows, &record, &pre)?;
            let residue = purge(inner)?;
            Ok(Rewritten {
                seqs: rows.iter().map(|r| r.seq).collect(),
                record,
                snapshots_dropped,
                residue,
            })
        })
        .await
    }
}

/// The transaction: the checks, the new bodies, the snapshots dropped and the record.
fn rewrite_rows(
    inner: &Inner,
    stream: &StreamId,
    rows: &[Row],
    record: &Pending,
    pre: &Precondition,
) -> StoreResult<(Appended, u64)> {
    let shown = inner.shown();
    let key = stream.key();
    let mut conn = inner.writer();
    conn.pragma_update(None, "secure_delete", true)
        .map_err(backend(&shown, "turn secure_delete on"))?;
    let done = (|| {
        let tx = begin(&mut conn, &shown)?;
        for row in rows {
            check_type(&tx, &shown, &key, row)?;
        }
        let already = dedupe(&tx, &shown, &key, record)?;
        if already.is_none() {
            apply_precondition(&tx, &shown, &key, pre)?;
        }
        for row in rows {
            tx.prepare_cached(
                "UPDATE events SET body = ?1, digest = ?2, v = ?3 WHERE stream = ?4 AND seq = ?5",
            )
            .and_then(|mut stmt| {
                stmt.execute(rusqlite::params![
                    row.body,
                    row.digest,
                    current_version(row.type_name),
                    key,
                    to_sql_seq(row.seq)
                ])
            })
            .map_err(backend(&shown, "rewrite an event"))?;
        }
        let dropped = tx
            .prepare_cached("DELETE FROM snapshots WHERE stream = ?1")
            .and_then(|mut stmt| stmt.execute([&key]))
            .map_err(backend(&shown, "drop the snapshots"))?;
        let record = match already {
            Some(seq) => Appended::AlreadyThere(seq),
            None => Appended::New(insert(&tx, &shown, stream, record)?),
        };
        commit(tx, &shown)?;
        Ok((record, dropped as u64))
    })();
    // Deletes stay cheap for the appends that follow.
    let _ = conn.pragma_update(None, "secure_delete", false);
    done
}

/// Fails unless the event at `row.seq` exists and is of `row.type_name`.
fn check_type(tx: &Transaction<'_>, shown: &str, stream: &str, row: &Row) -> StoreResult<()> {
    let stored: Option<String> = tx
        .prepare_cached("SELECT type FROM events WHERE stream = ?1 AND seq = ?2")
        .and_then(|mut stmt| {
            stmt.query_row(rusqlite::params![stream, to_sql_seq(row.seq)], |r| r.get(0))
                .optional()
        })
        .map_err(backend(shown, "read an event to rewrite"))?;
    match stored {
        Some(t) if t == row.type_name => Ok(()),
        Some(t) => Err(StoreError::Backend(format!(
            "event store {shown}: stream {stream}: event {} is a {t}, not a {}: a rewrite keeps each event's type",
            row.seq, row.type_name
        ))),
        None => Err(StoreError::Backend(format!(
            "event store {shown}: stream {stream}: there is no event {} to rewrite",
            row.seq
        ))),
    }
}

/// Writes every page of the file anew and empties the write-ahead log, so that no old page
/// survives in either; what could not be done is returned, in words.
fn purge(inner: &Inner) -> StoreResult<Vec<String>> {
    let shown = inner.shown();
    let conn = inner.writer();
    let mut residue = Vec::new();
    if let Err(e) = conn.execute_batch("VACUUM") {
        residue.push(format!(
            "the file could not be vacuumed ({e}): pages freed by the rewrite were zeroed, \
             but run `sqlite3 {shown} VACUUM` to be sure"
        ));
    }
    if let Some(busy) = checkpoint(&conn, &shown)? {
        residue.push(busy);
    }
    Ok(residue)
}

/// Checkpoints the write-ahead log and truncates it; a note when another connection kept
/// part of it.
fn checkpoint(conn: &Connection, shown: &str) -> StoreResult<Option<String>> {
    let (busy, log, done): (i64, i64, i64) = conn
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .map_err(backend(shown, "checkpoint the write-ahead log"))?;
    Ok((busy != 0 || done < log).then(|| {
        format!(
            "another process kept {shown}'s write-ahead log ({shown}-wal) open: old pages may \
             remain in it until the next checkpoint (run the rewrite again when nothing else \
             uses the store)"
        )
    }))
}
