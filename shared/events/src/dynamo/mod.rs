//! The DynamoDB event store: every stream in one table, with the bodies too large for an
//! item in an S3 bucket.
//!
//! # Table layout
//!
//! The table has a string partition key `pk` and a string sort key `sk`, and is billed
//! per request (`stackflow init --store dynamodb:TABLE` creates it with
//! [`DynamoStore::create_table_if_missing`]). Positions are zero-padded to 20 digits
//! (the width of `u64::MAX`), so that the sort key orders them numerically.
//!
//! | `pk` | `sk` | Attributes | What |
//! |------|------|------------|------|
//! | `<region>/<stack>` | `e#<last>` | `seq` N (`last`), `first` N, `events` L of M: each `seq` N, `key` S, `type` S, `v` N, `at` S, `digest` S, and `body` S (the event's JSON) or `body_s3` S (the S3 key of the JSON, when it is over 350 KiB); `rev` N once rewritten | A page: the events at positions `first..=last`, written by one transaction (see [`pages`]). Versions before pages wrote one event an item, its attributes at the top level (`e#<seq>`, no `first` nor `events`): a page of one |
//! | `<region>/<stack>` | `k#<key>` | `seq` N, `digest` S | An event's idempotency key: where the event with that key is, and a digest of its content (a key over 1000 bytes is stored as `k#sha256:<hex of its digest>`) |
//! | `<region>/<stack>` | `lock` | `deploy_id` S, `holder` S (the [`Holder`] as JSON) | The stack's lock, present while held |
//! | `<region>/<stack>` | `counter` | `seq` N | The last position written |
//! | `<region>/<stack>` | `s#<seq>` | `seq` N, `at` S, and `body` S or `body_s3` S | A projection snapshot covering the stream up to `seq` |
//! | `_streams` | `<region>/<stack>` | `region` S, `stack` S, `at` S | The stream registry, read by `streams()` |
//!
//! S3 keys: `<region>/<stack>/events/<seq>-<nonce>.json` (older versions:
//! `<region>/<stack>/events/<seq>.json`) and `<region>/<stack>/snapshots/<seq>.json`.
//!
//! # Appending
//!
//! The appends a process makes to one stream wait in the stream's lane; one writer at a
//! time takes, from its front, the appends one transaction can hold (the same
//! precondition, one taking or releasing the lock alone, no key twice, at most
//! [`pages::MAX_PAGE_EVENTS`] events and 320 KiB of inline bodies) and writes them:
//!
//! 1. (a consistent `GetItem` of `counter`, the last position written, `n`, when this
//!    process does not know it: the lane keeps the end of its last write, or of its last
//!    read of the stream;)
//! 2. (a `PutObject` of a body to S3, when it is too large for an item;)
//! 3. `TransactWriteItems`: put the page `e#<n+k>` holding positions `n+1` .. `n+k` and
//!    each event's `k#<key>` (each only if absent), move `counter` from `n` to `n + k`
//!    (only if it still says `n`),
//!    plus the precondition on `lock`: `TakeLock` puts it if it is absent or held by the
//!    same deploy, `HoldsLock` checks that the deploy holds it (`ConditionCheck`),
//!    `ReleaseLock` deletes it if it is absent or held by the deploy; plus the registry
//!    item (made if missing, without a condition), until this process has written it.
//!
//! So a deploy whose process alone writes its stream costs one write request per batch
//! of events, and no read. A key that is already there cancels the transaction: that
//! append is a retry ([`Appended::AlreadyThere`]) or a [`StoreError::Conflict`], and the
//! others are written again without it.
//!
//! Positions are taken in the very transaction that writes their events, so positions
//! have no holes and follow the order in which events were written: a refused append (the
//! lock, a conflict) takes none, an append cut short takes none, and a lock event can
//! never land below an event written before it. A reader that resumes after the last
//! position it saw (`events --follow`) misses nothing: when position `n+1` is there, so
//! is `n`. When another process took `n + 1` first (the counter's condition failed),
//! the writer reads the counter again and tries the next positions, after a random pause
//! of a few milliseconds (at most [`MAX_CONTENTION`] times). Streams written by older
//! versions (whose counter handed out positions before the write) may have holes below
//! the counter; positions still only grow.
//!
//! When the transaction is cancelled because a `k#<key>` is there (a retry, or a
//! concurrent retry of the same append won) or because the lock's condition failed, the
//! cancellation reason carries the item in the way (`ReturnValuesOnConditionCheckFailure = ALL_OLD`),
//! and the append reports [`Appended::AlreadyThere`], a conflict, [`StoreError::Locked`]
//! or [`StoreError::NotHolder`] from it. Only transient failures are retried: throttling,
//! transaction conflicts, any `5xx` or `429` answer (a plain-text `503` included), and a
//! request that got no answer (a reset or closed connection, a timeout); a transaction
//! whose answer was lost after it was carried out is recognized by its key when it is
//! sent again. Every request is tried at most 8 times (each of them the SDK's own
//! attempts), after randomized pauses of 10-20 ms, doubling up to 0.5-1 s, and queries
//! page by page; [`DynamoStore::retries`] counts the retries, the SDK's own included.
//!
//! The registry item is written by the first append that succeeds, not by the one at
//! position 1: that one may be refused (a lost race for the lock) or never happen (a
//! crash before its transaction), and the stream would never be listed. So a process's
//! transactions update it (creating it if missing, keeping its `at`) until one succeeds;
//! after a transaction conflict (appenders racing at the stream's birth) it is read, and
//! left out once another process has written it.
//!
//! A body put in S3 is deleted again when the append is known not to have happened
//! (refused, or a retry); after an error that leaves it unknown it stays, possibly
//! unreferenced.
//!
//! # Rewriting
//!
//! [`EventStore::rewrite`] appends its record first, then puts each new body with its
//! key item's digest, then deletes every snapshot (`rewrite`).

mod append;
mod batch;
mod bodies;
mod locks;
mod pages;
mod rewrite;
mod snapshots;
mod table;

use std::collections::hash_map::RandomState;
use std::collections::{HashMap, HashSet};
use std::error::Error as StdError;
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::config::interceptors::{
    BeforeSerializationInterceptorContextRef, BeforeTransmitInterceptorContextRef,
};
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::types::{
    AttributeValue, CancellationReason, Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem,
};
use serde_json::Value;

use crate::event::{self, Event, Holder, NewEvent, StoredEvent};
use crate::store::{
    Appended, EventStore, Precondition, Rewrite, Rewritten, StoreError, StoreResult, StreamId,
};

use self::locks::holder_of;

/// Event and snapshot bodies whose JSON is longer than this (in bytes) go to S3: an item
/// holds at most 400 KiB, attribute names and the other attributes included.
pub const INLINE_BODY_LIMIT: usize = 350 * 1024;

/// The partition of the stream registry (a stream key always holds a `/`).
const REGISTRY_PK: &str = "_streams";
const COUNTER_SK: &str = "counter";
const LOCK_SK: &str = "lock";
const EVENT_PREFIX: &str = "e#";
const SNAPSHOT_PREFIX: &str = "s#";
/// Idempotency keys longer than this are stored by digest (a sort key holds 1024 bytes).
const MAX_PLAIN_KEY: usize = 1000;

/// How many times one request is tried in all when it keeps failing transiently.
const MAX_ATTEMPTS: u32 = 8;
/// How many times an append reads the next position again after other appenders took
/// it first (each time one of them succeeded, so the stream moved on).
const MAX_CONTENTION: u32 = 2000;
/// The first backoff; it doubles with each retry up to [`MAX_BACKOFF`].
const BASE_BACKOFF: Duration = Duration::from_millis(20);
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// How long [`DynamoStore::create_table_if_missing`] waits for the table to be active.
const TABLE_WAIT: Duration = Duration::from_secs(300);

/// Error codes of failed requests that are worth trying again.
const TRANSIENT_CODES: &[&str] = &[
    "ThrottlingException",
    "Throttling",
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "TransactionConflictException",
    "TransactionInProgressException",
];

/// Cancellation reason codes of a transaction that are worth trying again.
const TRANSIENT_REASONS: &[&str] = &[
    "TransactionConflict",
    "ThrottlingError",
    "ProvisionedThroughputExceeded",
    "RequestLimitExceeded",
];

type Item = HashMap<String, AttributeValue>;

/// The event store on a DynamoDB table (see the [module documentation](self) for its
/// layout), with an S3 bucket for bodies over [`INLINE_BODY_LIMIT`].
///
/// Cloning is cheap; clones share the clients and the counters.
#[derive(Debug, Clone)]
pub struct DynamoStore {
    db: aws_sdk_dynamodb::Client,
    s3: aws_sdk_s3::Client,
    table: String,
    bucket: Option<String>,
    counters: Arc<Counters>,
    /// Streams whose registry item this process has seen or written.
    registered: Arc<Mutex<HashSet<String>>>,
    /// Per stream, the appends waiting to be written together.
    lanes: Arc<Mutex<HashMap<String, Arc<batch::Lane>>>>,
}

#[derive(Debug, Default)]
struct Counters {
    /// Requests repeated by the store itself.
    own_retries: AtomicU64,
    /// Operations the SDK clients ran.
    executions: AtomicU64,
    /// HTTP attempts the SDK clients made (more than the operations when they retried).
    attempts: AtomicU64,
}

/// Counts the operations and attempts of the store's clients, so that retries made by
/// the SDK's own retry policy are counted too.
#[derive(Debug, Clone)]
struct CountRequests(Arc<Counters>);

impl Intercept for CountRequests {
    fn name(&self) -> &'static str {
        "stackflow::CountRequests"
    }

    fn read_before_execution(
        &self,
        _context: &BeforeSerializationInterceptorContextRef<'_>,
        _cfg: &mut ConfigBag,
    ) -> Result<(), Box<dyn StdError + Send + Sync>> {
        self.0.executions.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn read_before_attempt(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), Box<dyn StdError + Send + Sync>> {
        self.0.attempts.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

impl DynamoStore {
    /// A store on `table`, putting bodies over [`INLINE_BODY_LIMIT`] in `bucket` (without a
    /// bucket, appending such an event fails). The clients are used as configured (endpoint,
    /// credentials, retry policy), with one interceptor added that counts their requests.
    pub fn new(
        dynamodb: aws_sdk_dynamodb::Client,
        s3: aws_sdk_s3::Client,
        table: impl Into<String>,
        bucket: Option<String>,
    ) -> Self {
        let counters = Arc::new(Counters::default());
        let db = aws_sdk_dynamodb::Client::from_conf(
            dynamodb
                .config()
                .to_builder()
                .interceptor(CountRequests(counters.clone()))
                .build(),
        );
        let s3 = aws_sdk_s3::Client::from_conf(
            s3.config()
                .to_builder()
                .interceptor(CountRequests(counters.clone()))
                .build(),
        );
        DynamoStore {
            db,
            s3,
            table: table.into(),
            bucket,
            counters,
            registered: Arc::new(Mutex::new(HashSet::new())),
            lanes: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// The table.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// The bucket for large bodies, if any.
    pub fn bucket(&self) -> Option<&str> {
        self.bucket.as_deref()
    }

    /// How many requests were repeated because of a transient failure so far: by the store
    /// (throttling, transaction conflicts) and by the SDK's own retry policy.
    pub fn retries(&self) -> u64 {
        let sdk = self
            .counters
            .attempts
            .load(Ordering::Relaxed)
            .saturating_sub(self.counters.executions.load(Ordering::Relaxed));
        self.counters.own_retries.load(Ordering::Relaxed) + sdk
    }

    /// How many HTTP requests (DynamoDB and S3, retries included) the store made so far.
    pub fn requests(&self) -> u64 {
        self.counters.attempts.load(Ordering::Relaxed)
    }

    // --- Requests -----------------------------------------------------------------------

    fn backend<E, R>(&self, what: &str, err: &SdkError<E, R>) -> StoreError
    where
        E: StdError + 'static,
        R: fmt::Debug,
    {
        sdk_error(what, &self.table, err)
    }

    /// Waits before the `retry`th retry, and counts it.
    async fn backoff(&self, retry: u32) {
        self.counters.own_retries.fetch_add(1, Ordering::Relaxed);
        let ceiling = BASE_BACKOFF
            .saturating_mul(1 << retry.saturating_sub(1).min(16))
            .min(MAX_BACKOFF);
        // Anywhere between half the ceiling and the ceiling, so that the appenders that
        // collided do not collide again.
        let half = ceiling / 2;
        let jitter = half.mul_f64(random_fraction());
        tokio::time::sleep(half + jitter).await;
    }

    /// Runs a request, repeating it while it fails transiently ([`is_transient`]); the last
    /// error otherwise.
    async fn retrying<T, E, F, Fut>(&self, mut request: F) -> Result<T, SdkError<E, HttpResponse>>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, SdkError<E, HttpResponse>>>,
        E: ProvideErrorMetadata,
    {
        let mut attempt = 1;
        loop {
            match request().await {
                Err(e) if attempt < MAX_ATTEMPTS && is_transient(&e) => {
                    self.backoff(attempt).await;
                    attempt += 1;
                }
                result => return result,
            }
        }
    }

    /// Every item `query` finds, page after page, each page repeated while it fails
    /// transiently; `what` names the query in errors.
    async fn query_all(&self, what: &str, query: QueryFluentBuilder) -> StoreResult<Vec<Item>> {
        let mut items = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let page = self
                .retrying(|| query.clone().set_exclusive_start_key(start.clone()).send())
                .await
                .map_err(|e| self.backend(what, &e))?;
            items.extend(page.items.unwrap_or_default());
            match page.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => return Ok(items),
            }
        }
    }

    /// A consistent read of one item.
    async fn get(&self, pk: &str, sk: &str) -> StoreResult<Option<Item>> {
        let out = self
            .retrying(|| {
                self.db
                    .get_item()
                    .table_name(&self.table)
                    .key("pk", s(pk))
                    .key("sk", s(sk))
                    .consistent_read(true)
                    .send()
            })
            .await
            .map_err(|e| self.backend("GetItem", &e))?;
        Ok(out.item)
    }

    /// The stream's last position (0 for a new stream), read consistently: the next
    /// event goes one above, if the counter still says this when it is written.
    async fn last_seq(&self, pk: &str) -> StoreResult<u64> {
        Ok(self
            .get(pk, COUNTER_SK)
            .await?
            .and_then(|item| get_n(&item, "seq"))
            .unwrap_or(0))
    }

    /// A short random pause after losing a position to another appender: up to
    /// `attempt` milliseconds (at most 50), so that racing appenders spread out.
    async fn contention_pause(&self, attempt: u32) {
        self.counters.own_retries.fetch_add(1, Ordering::Relaxed);
        let ceiling = Duration::from_millis(u64::from(attempt.clamp(1, 50)));
        tokio::time::sleep(ceiling.mul_f64(random_fraction())).await;
    }

    fn is_registered(&self, pk: &str) -> bool {
        self.registered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(pk)
    }

    fn mark_registered(&self, pk: &str) {
        self.registered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(pk.to_string());
    }

    /// Decodes an event: an entry of a page, or an item holding one event.
    async fn stored_event(&self, stream: &StreamId, item: &Item) -> StoreResult<StoredEvent> {
        let seq = get_n(item, "seq")
            .or_else(|| {
                get_s(item, "sk")
                    .and_then(|sk| sk.strip_prefix(EVENT_PREFIX))
                    .and_then(|digits| digits.parse().ok())
            })
            .ok_or_else(|| self.malformed_item(stream, "an event item has no position"))?;
        let field = |name: &str| {
            get_s(item, name).ok_or_else(|| {
                self.malformed_item(stream, &format!("event {seq} has no `{name}` attribute"))
            })
        };
        let key = field("key")?.to_string();
        let type_name = field("type")?.to_string();
        let at = field("at")?.to_string();
        let v = get_n(item, "v")
            .and_then(|v| u32::try_from(v).ok())
            .ok_or_else(|| self.malformed_item(stream, &format!("event {seq} has no version")))?;
        let json = self
            .read_body(item)
            .await?
            .ok_or_else(|| self.malformed_item(stream, &format!("event {seq} has no body")))?;
        let decode = |source| StoreError::Decode {
            stream: stream.to_string(),
            seq,
            source,
        };
        let body: Value = serde_json::from_str(&json).map_err(|e| {
            decode(event::DecodeError::Malformed {
                type_name: type_name.clone(),
                version: v,
                message: format!("the body is not JSON: {e}"),
            })
        })?;
        let event = Event::from_body(&type_name, v, body).map_err(decode)?;
        Ok(StoredEvent {
            seq,
            key,
            at,
            v,
            event,
        })
    }

    fn malformed_item(&self, stream: &StreamId, what: &str) -> StoreError {
        StoreError::Backend(format!(
            "DynamoDB table {}, stream {stream}: {what}",
            self.table
        ))
    }
}

impl EventStore for DynamoStore {
    async fn append(
        &self,
        stream: &StreamId,
        event: &NewEvent,
        pre: &Precondition,
    ) -> StoreResult<Appended> {
        self.append_event(stream, event, pre).await
    }

    async fn append_in_order(
        &self,
        stream: &StreamId,
        events: &[(NewEvent, Precondition)],
    ) -> StoreResult<Vec<Appended>> {
        self.append_events_in_order(stream, events).await
    }

    async fn read(&self, stream: &StreamId, after: u64) -> StoreResult<Vec<StoredEvent>> {
        let Some(first) = after.checked_add(1) else {
            return Ok(Vec::new());
        };
        let pk = stream.key();
        let query = self
            .db
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk AND sk BETWEEN :first AND :last")
            .expression_attribute_values(":pk", s(&pk))
            .expression_attribute_values(":first", s(&seq_sk(EVENT_PREFIX, first)))
            .expression_attribute_values(":last", s(&seq_sk(EVENT_PREFIX, u64::MAX)))
            .consistent_read(true);
        let mut events = Vec::new();
        for item in self.query_all("Query (events)", query).await? {
            let held =
                pages::entries(&item).map_err(|e| self.malformed_item(stream, &e.to_string()))?;
            for entry in held {
                let event = self.stored_event(stream, entry).await?;
                // The first page may begin below the positions asked for.
                if event.seq >= first {
                    events.push(event);
                }
            }
        }
        // Most likely where the next append goes: it need not read the counter. (A
        // stream read from its start with no event is most likely new: its end is 0.)
        match events.last() {
            Some(last) => self.hint_end(&pk, last.seq),
            None if after == 0 => self.hint_end(&pk, 0),
            None => {}
        }
        Ok(events)
    }

    async fn lock_holder(&self, stream: &StreamId) -> StoreResult<Option<Holder>> {
        let item = self.get(&stream.key(), LOCK_SK).await?;
        holder_of(item.as_ref())
    }

    async fn break_lock(&self, stream: &StreamId, by: &str) -> StoreResult<Option<Holder>> {
        self.break_held_lock(stream, by).await
    }

    async fn renew_lock(&self, stream: &StreamId, deploy_id: &str, until: &str) -> StoreResult<()> {
        self.renew_held_lock(stream, deploy_id, until).await
    }

    async fn put_snapshot(&self, stream: &StreamId, seq: u64, body: &Value) -> StoreResult<()> {
        self.write_snapshot(stream, seq, body).await
    }

    async fn latest_snapshot(&self, stream: &StreamId) -> StoreResult<Option<(u64, Value)>> {
        self.read_latest_snapshot(stream).await
    }

    async fn rewrite(
        &self,
        stream: &StreamId,
        rewrite: &Rewrite,
        pre: &Precondition,
    ) -> StoreResult<Rewritten> {
        self.rewrite_events(stream, rewrite, pre).await
    }

    async fn streams(&self) -> StoreResult<Vec<StreamId>> {
        let query = self
            .db
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", s(REGISTRY_PK))
            .consistent_read(true);
        let items = self.query_all("Query (stream registry)", query).await?;
        let mut streams: Vec<StreamId> = items
            .iter()
            .filter_map(|item| get_s(item, "sk").and_then(StreamId::from_key))
            .collect();
        streams.sort();
        Ok(streams)
    }
}

// --- Helpers ----------------------------------------------------------------------------

fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.to_string())
}

fn n(v: u64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

fn get_s<'a>(item: &'a Item, name: &str) -> Option<&'a str> {
    item.get(name)
        .and_then(|v| v.as_s().ok())
        .map(String::as_str)
}

fn get_n(item: &Item, name: &str) -> Option<u64> {
    item.get(name)
        .and_then(|v| v.as_n().ok())
        .and_then(|v| v.parse().ok())
}

/// The sort key of a position: the prefix and the position in 20 digits.
fn seq_sk(prefix: &str, seq: u64) -> String {
    format!("{prefix}{seq:020}")
}

/// The sort key of an idempotency key.
fn key_sk(key: &str) -> String {
    if key.len() <= MAX_PLAIN_KEY {
        format!("k#{key}")
    } else {
        format!(
            "k#sha256:{}",
            event::digest(&Value::String(key.to_string()))
        )
    }
}

/// A `Put` of a transaction.
/// A `Put` of a transaction; when its condition fails, the cancellation reason holds the
/// item it found.
fn put(
    table: &str,
    item: Item,
    condition: Option<&str>,
    values: &[(&str, &str)],
) -> StoreResult<TransactWriteItem> {
    let mut put = Put::builder()
        .table_name(table)
        .set_item(Some(item))
        .set_condition_expression(condition.map(str::to_string));
    for (name, value) in values {
        put = put.expression_attribute_values(*name, s(value));
    }
    if condition.is_some() {
        put = put
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
    }
    Ok(TransactWriteItem::builder()
        .put(put.build().map_err(build_error)?)
        .build())
}

fn build_error(e: impl fmt::Display) -> StoreError {
    StoreError::Backend(format!("building a DynamoDB request: {e}"))
}

fn sdk_error<E, R>(what: &str, table: &str, err: &SdkError<E, R>) -> StoreError
where
    E: StdError + 'static,
    R: fmt::Debug,
{
    StoreError::Backend(format!(
        "DynamoDB {what} on table {table}: {}",
        DisplayErrorContext(err)
    ))
}

fn s3_error<E, R>(what: &str, bucket: &str, key: &str, err: &SdkError<E, R>) -> StoreError
where
    E: StdError + 'static,
    R: fmt::Debug,
{
    StoreError::Backend(format!(
        "S3 {what} s3://{bucket}/{key}: {}",
        DisplayErrorContext(err)
    ))
}

/// Whether a failed request is worth sending again: throttling and transaction conflicts
/// (by their error code); any `5xx` or `429` answer, with or without a code (a load
/// balancer's plain-text `503` has none); and a request that got no answer: not sent or
/// cut off (a reset connection, a connection closed before the answer came: the
/// request may have been carried out), or timed out. The SDK retries these too, but only
/// a few times; a store request is repeated after that, since every request the store
/// repeats is safe to repeat: reads, writes of the same item, and the transaction of an
/// append, whose repeat after an answer was lost finds its own key and is a success
/// ([`Appended::New`], not a second event).
fn is_transient<E: ProvideErrorMetadata>(err: &SdkError<E, HttpResponse>) -> bool {
    match err {
        SdkError::TimeoutError(_) | SdkError::ResponseError(_) => true,
        // A connector error of a known kind: hyper's "connection closed before message
        // completed" is a transient one.
        SdkError::DispatchFailure(failure) => {
            failure.is_io() || failure.is_timeout() || failure.as_other().is_some()
        }
        SdkError::ServiceError(service) => {
            let status = service.raw().status().as_u16();
            err.code().is_some_and(|c| TRANSIENT_CODES.contains(&c))
                || status >= 500
                || status == 429
        }
        _ => false,
    }
}

fn describe_reasons(reasons: &[CancellationReason]) -> String {
    reasons
        .iter()
        .map(|r| {
            let code = r.code().unwrap_or("?");
            match r.message() {
                Some(m) => format!("{code}: {m}"),
                None => code.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A number in `[0, 1)`, random enough to spread retries.
/// A random number, different in each call (for names no two writers share).
fn nonce() -> u64 {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    hasher.finish()
}

fn random_fraction() -> f64 {
    (nonce() >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_sort_as_numbers() {
        assert_eq!(seq_sk("e#", 7), "e#00000000000000000007");
        assert_eq!(seq_sk("e#", u64::MAX), "e#18446744073709551615");
        assert!(seq_sk("e#", 9) < seq_sk("e#", 10));
        assert!(seq_sk("e#", 10) < seq_sk("e#", u64::MAX));
    }

    #[test]
    fn long_keys_are_stored_by_digest() {
        assert_eq!(key_sk("d/r/create/done"), "k#d/r/create/done");
        let long = "x".repeat(2000);
        let sk = key_sk(&long);
        assert!(sk.starts_with("k#sha256:") && sk.len() < 100);
    }

    /// The failures the store sends a request again after (the SDK's own attempts being
    /// spent): a plain-text 503 has no error code, and a reset or a connection closed
    /// before the answer is no answer at all; a refused request is final.
    #[test]
    fn transient_failures_are_those_a_repeat_can_cure() {
        use aws_sdk_dynamodb::error::{ConnectorError, ErrorMetadata};
        use aws_sdk_dynamodb::operation::get_item::GetItemError;
        type E = SdkError<GetItemError, HttpResponse>;
        let answer = |status: u16, body: &'static str| {
            let body = aws_sdk_s3::primitives::ByteStream::from_static(body.as_bytes());
            HttpResponse::new(status.try_into().unwrap(), body.into_inner())
        };
        let service = |code: Option<&str>, status: u16, body: &'static str| -> E {
            let mut meta = ErrorMetadata::builder();
            if let Some(code) = code {
                meta = meta.code(code);
            }
            SdkError::service_error(GetItemError::generic(meta.build()), answer(status, body))
        };
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset by peer");
        let transient: Vec<E> = vec![
            service(None, 503, "Service Unavailable"),
            service(None, 500, ""),
            service(None, 429, ""),
            service(Some("ThrottlingException"), 400, "{}"),
            service(Some("TransactionConflictException"), 400, "{}"),
            SdkError::dispatch_failure(ConnectorError::io(io.into())),
            SdkError::dispatch_failure(ConnectorError::timeout("connect".into())),
            SdkError::timeout_error("no answer"),
            SdkError::response_error("cut off", answer(200, "{\"Item\"")),
        ];
        for e in &transient {
            assert!(is_transient(e), "{}", DisplayErrorContext(e));
        }
        let final_: Vec<E> = vec![
            service(Some("ValidationException"), 400, "{}"),
            service(Some("ConditionalCheckFailedException"), 400, "{}"),
            service(None, 403, "Forbidden"),
            SdkError::construction_failure("no table name"),
            SdkError::dispatch_failure(ConnectorError::user("bad request".into())),
        ];
        for e in &final_ {
            assert!(!is_transient(e), "{}", DisplayErrorContext(e));
        }
    }

    #[test]
    fn random_fractions_stay_in_range() {
        for _ in 0..1000 {
            let f = random_fraction();
            assert!((0.0..1.0).contains(&f));
        }
    }
}
