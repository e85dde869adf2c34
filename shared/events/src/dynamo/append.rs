//! Appending an event: a consistent read of its key, its position, its body, and the
//! conditional transaction writing it, with what the transaction's cancellation means.

use std::collections::HashMap;

use aws_sdk_dynamodb::error::{DisplayErrorContext, SdkError};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{CancellationReason, Put, TransactWriteItem, Update};

use super::bodies::Body;
use super::locks::{LockOp, holder_of, lock_item};
use super::{
    COUNTER_SK, DynamoStore, EVENT_PREFIX, Item, LOCK_SK, MAX_ATTEMPTS, MAX_CONTENTION,
    REGISTRY_PK, TRANSIENT_REASONS, build_error, describe_reasons, get_n, get_s, is_transient,
    key_sk, n, put, s, seq_sk,
};
use crate::event::{self, Holder, NewEvent};
use crate::store::{Appended, Precondition, StoreError, StoreResult, StreamId};

/// What a transaction writing an event did.
pub(super) enum Written {
    /// The event is stored.
    Done,
    /// Another appender took the position first (the counter moved): read it again.
    Moved,
    /// Its key was taken meanwhile, by another event: the `k#` item.
    KeyTaken(Item),
    /// The lock's condition failed: the `lock` item as it was (when the reason held it).
    LockRefused(Option<Item>),
}

/// An event ready to be written at a position.
pub(super) struct Pending<'a> {
    pub(super) pk: &'a str,
    /// Its position: one above `seq - 1`, the counter's value when it was read.
    pub(super) seq: u64,
    pub(super) key: &'a str,
    pub(super) digest: &'a str,
    pub(super) type_name: &'static str,
    pub(super) body: &'a Body,
}

impl DynamoStore {
    // --- Writing events -----------------------------------------------------------------

    /// The transaction writing `event`, with the lock's precondition and, when needed, the
    /// registry item.
    fn transaction(
        &self,
        event: &Pending<'_>,
        lock: LockOp<'_>,
        register: bool,
    ) -> StoreResult<Vec<TransactWriteItem>> {
        let pk = event.pk;
        let absent = "attribute_not_exists(sk)";
        let mut items = vec![
            // No old image in a cancellation reason for this one: it may be 350 KiB, and
            // this condition only fails when the counter is broken.
            TransactWriteItem::builder()
                .put(
                    Put::builder()
                        .table_name(&self.table)
                        .set_item(Some(event_item(event)))
                        .condition_expression(absent)
                        .build()
                        .map_err(build_error)?,
                )
                .build(),
            put(
                &self.table,
                HashMap::from([
                    ("pk".to_string(), s(pk)),
                    ("sk".to_string(), s(&key_sk(event.key))),
                    ("seq".to_string(), n(event.seq)),
                    ("digest".to_string(), s(event.digest)),
                ]),
                Some(absent),
                &[],
            )?,
        ];
        items.push(self.counter_advance(pk, event.seq)?);
        items.extend(lock_item(&self.table, pk, lock)?);
        if register {
            items.push(put(&self.table, registry_item(pk), None, &[])?);
        }
        Ok(items)
    }

    /// The counter's move to `seq`, only from `seq - 1`: the position is taken in the
    /// same transaction that writes the event, so positions have no holes and follow the
    /// order in which events were written.
    fn counter_advance(&self, pk: &str, seq: u64) -> StoreResult<TransactWriteItem> {
        let update = Update::builder()
            .table_name(&self.table)
            .key("pk", s(pk))
            .key("sk", s(COUNTER_SK))
            .update_expression("SET #seq = :seq")
            .condition_expression(if seq == 1 {
                "attribute_not_exists(sk) OR #seq = :prev"
            } else {
                "#seq = :prev"
            })
            .expression_attribute_names("#seq", "seq")
            .expression_attribute_values(":seq", n(seq))
            .expression_attribute_values(":prev", n(seq - 1))
            .build()
            .map_err(build_error)?;
        Ok(TransactWriteItem::builder().update(update).build())
    }

    /// Writes an event at its position (step 4 of an append), repeating the transaction
    /// while it fails transiently.
    pub(super) async fn write_event(
        &self,
        event: &Pending<'_>,
        lock: LockOp<'_>,
    ) -> StoreResult<Written> {
        let mut attempt = 1;
        loop {
            let register = !self.is_registered(event.pk);
            let items = self.transaction(event, lock, register)?;
            let err = match self
                .db
                .transact_write_items()
                .set_transact_items(Some(items))
                .send()
                .await
            {
                Ok(_) => {
                    if register {
                        self.mark_registered(event.pk);
                    }
                    return Ok(Written::Done);
                }
                Err(err) => err,
            };
            if let Some(written) = self.after_failure(event, lock, &err).await? {
                return Ok(written);
            }
            if attempt >= MAX_ATTEMPTS {
                return Err(StoreError::Backend(format!(
                    "DynamoDB TransactWriteItems on table {}: still failing after {MAX_ATTEMPTS} \
                     attempts: {}",
                    self.table,
                    DisplayErrorContext(&err)
                )));
            }
            self.backoff(attempt).await;
            attempt += 1;
            if register && self.get(REGISTRY_PK, event.pk).await?.is_some() {
                // The conflict was likely another first append registering the stream:
                // that one did, so this one need not.
                self.mark_registered(event.pk);
            }
        }
    }

    /// What a failed transaction writing `event` means: its outcome, when the failure
    /// settles it; `None` when it is worth trying again; an error otherwise.
    async fn after_failure(
        &self,
        event: &Pending<'_>,
        lock: LockOp<'_>,
        err: &SdkError<TransactWriteItemsError>,
    ) -> StoreResult<Option<Written>> {
        match err.as_service_error() {
            Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) => {
                self.cancelled(event, lock, cancelled.cancellation_reasons(), err)
                    .await
            }
            _ if is_transient(err) => Ok(None),
            _ => Err(self.backend("TransactWriteItems", err)),
        }
    }

    /// What a cancelled transaction writing `event` means, from its cancellation reasons
    /// (in the order of the transaction's items: the event, its key, the counter, the
    /// lock).
    async fn cancelled(
        &self,
        event: &Pending<'_>,
        lock: LockOp<'_>,
        reasons: &[CancellationReason],
        err: &SdkError<TransactWriteItemsError>,
    ) -> StoreResult<Option<Written>> {
        let failed = |i: usize| {
            reasons
                .get(i)
                .filter(|r| r.code() == Some("ConditionalCheckFailed"))
        };
        // The key first: a retried append is a success whatever the lock does.
        if let Some(reason) = failed(1) {
            return self
                .key_taken(event, reason.item().cloned())
                .await
                .map(Some);
        }
        if !matches!(lock, LockOp::None)
            && let Some(reason) = failed(3)
        {
            return Ok(Some(Written::LockRefused(reason.item().cloned())));
        }
        if failed(2).is_some() {
            return Ok(Some(Written::Moved));
        }
        if failed(0).is_some() {
            return Err(StoreError::Backend(format!(
                "DynamoDB table {}: position {} of {} is already taken: the \
                 stream's sequence counter is behind its events",
                self.table, event.seq, event.pk
            )));
        }
        if reasons.is_empty() {
            // No reasons to go by: look at the items themselves.
            if let Some(found) = self.get(event.pk, &key_sk(event.key)).await? {
                return self.key_taken(event, Some(found)).await.map(Some);
            }
            let held = self.get(event.pk, LOCK_SK).await?;
            if !lock.allows(holder_of(held.as_ref())?.as_ref()) {
                return Ok(Some(Written::LockRefused(held)));
            }
            if self.last_seq(event.pk).await? != event.seq - 1 {
                return Ok(Some(Written::Moved));
            }
        }
        if reasons
            .iter()
            .any(|r| r.code().is_some_and(|c| TRANSIENT_REASONS.contains(&c)))
        {
            return Ok(None);
        }
        Err(StoreError::Backend(format!(
            "DynamoDB TransactWriteItems on table {}: cancelled ({}): {}",
            self.table,
            describe_reasons(reasons),
            DisplayErrorContext(err)
        )))
    }

    /// The outcome of a transaction cancelled because the event's key is taken: `found` is
    /// the `k#` item from the cancellation reason, when it was there. When the key points
    /// at this very position, the event was written by an earlier attempt of the same
    /// request (the SDK retries a request whose answer was lost): that is a success.
    async fn key_taken(&self, event: &Pending<'_>, found: Option<Item>) -> StoreResult<Written> {
        let item = match found {
            Some(item) => item,
            None => self
                .get(event.pk, &key_sk(event.key))
                .await?
                .ok_or_else(|| {
                    StoreError::Backend(format!(
                        "DynamoDB table {}: an append of key `{}` was cancelled because the key exists, and it does not",
                        self.table, event.key
                    ))
                })?,
        };
        if get_n(&item, "seq") == Some(event.seq) && get_s(&item, "digest") == Some(event.digest) {
            return Ok(Written::Done);
        }
        Ok(Written::KeyTaken(item))
    }

    /// The outcome of an append whose key is already stored (in `item`).
    fn already_there(&self, key: &str, digest: &str, item: &Item) -> StoreResult<Appended> {
        let seq = get_n(item, "seq").ok_or_else(|| {
            StoreError::Backend(format!(
                "DynamoDB table {}: the idempotency item of key `{key}` has no position",
                self.table
            ))
        })?;
        if get_s(item, "digest") == Some(digest) {
            Ok(Appended::AlreadyThere(seq))
        } else {
            Err(StoreError::Conflict {
                key: key.to_string(),
            })
        }
    }

    pub(super) async fn append_event(
        &self,
        stream: &StreamId,
        new: &NewEvent,
        pre: &Precondition,
    ) -> StoreResult<Appended> {
        let pk = stream.key();
        let k_sk = key_sk(&new.key);
        let body_value = new.event.to_body();
        let digest = event::digest(&body_value);

        // 1. Is it a retry? (And, the first time, is the stream registered?)
        let existing = if self.is_registered(&pk) {
            self.get(&pk, &k_sk).await?
        } else {
            let (existing, registry) =
                tokio::join!(self.get(&pk, &k_sk), self.get(REGISTRY_PK, &pk));
            if registry?.is_some() {
                self.mark_registered(&pk);
            }
            existing?
        };
        if let Some(item) = existing {
            return self.already_there(&new.key, &digest, &item);
        }

        // 2-4. Its position, its body, and the event with its key, the counter and its
        // precondition, at once.
        let lock = match pre {
            Precondition::None => LockOp::None,
            Precondition::TakeLock(holder) => LockOp::Take(holder),
            Precondition::HoldsLock(id) => LockOp::Check(id),
            Precondition::ReleaseLock(id) => LockOp::Release(id),
        };
        let json = serde_json::to_string(&body_value).expect("events serialize");
        let event = Unplaced {
            pk: &pk,
            key: &new.key,
            digest: &digest,
            type_name: new.event.type_name(),
            json,
        };
        let mut contention = 0;
        loop {
            let seq = self.last_seq(&pk).await? + 1;
            let body = self
                .place_body(&pk, "events", seq, event.json.clone())
                .await?;
            let pending = event.at(seq, &body);
            let result = self.settle(&pending, lock).await;
            // Only when the event is known not to be written: after an error that leaves
            // it unknown, the object may be the body of a stored event.
            if matches!(
                result,
                Ok(None | Some(Appended::AlreadyThere(_)))
                    | Err(StoreError::Conflict { .. }
                        | StoreError::Locked { .. }
                        | StoreError::NotHolder { .. })
            ) {
                self.discard_body(&body).await;
            }
            if let Some(appended) = result? {
                return Ok(appended);
            }
            contention += 1;
            if contention >= MAX_CONTENTION {
                return Err(StoreError::Backend(format!(
                    "DynamoDB table {}: {pk}: {MAX_CONTENTION} other appenders took the next \
                     position first; giving up",
                    self.table
                )));
            }
            self.contention_pause(contention).await;
        }
    }

    /// Writes a pending event and turns a cancelled write into the append's outcome;
    /// `None` when another appender took its position first.
    async fn settle(
        &self,
        pending: &Pending<'_>,
        lock: LockOp<'_>,
    ) -> StoreResult<Option<Appended>> {
        let mut attempt = 1;
        loop {
            match self.write_event(pending, lock).await? {
                Written::Done => return Ok(Some(Appended::New(pending.seq))),
                Written::Moved => return Ok(None),
                Written::KeyTaken(item) => {
                    return self
                        .already_there(pending.key, pending.digest, &item)
                        .map(Some);
                }
                Written::LockRefused(item) => {
                    let item = match item {
                        Some(item) => Some(item),
                        None => self.get(pending.pk, LOCK_SK).await?,
                    };
                    let holder = holder_of(item.as_ref())?;
                    if lock.allows(holder.as_ref()) && attempt < MAX_ATTEMPTS {
                        // The lock changed between the transaction and the read: again.
                        self.backoff(attempt).await;
                        attempt += 1;
                        continue;
                    }
                    return Err(refusal(lock, holder, &self.table, pending.pk));
                }
            }
        }
    }
}

/// An event to append, before it has a position.
struct Unplaced<'a> {
    pk: &'a str,
    key: &'a str,
    digest: &'a str,
    type_name: &'static str,
    json: String,
}

impl<'a> Unplaced<'a> {
    fn at(&self, seq: u64, body: &'a Body) -> Pending<'a> {
        Pending {
            pk: self.pk,
            seq,
            key: self.key,
            digest: self.digest,
            type_name: self.type_name,
            body,
        }
    }
}

/// The error of an append whose lock condition failed for good.
fn refusal(lock: LockOp<'_>, holder: Option<Holder>, table: &str, pk: &str) -> StoreError {
    match (lock, holder) {
        (LockOp::Take(_), Some(holder)) => StoreError::Locked { holder },
        (LockOp::Check(id) | LockOp::Release(id) | LockOp::Break(id), holder) => {
            StoreError::NotHolder {
                deploy_id: id.to_string(),
                holder: holder.map(Box::new),
            }
        }
        (_, holder) => StoreError::Backend(format!(
            "DynamoDB table {table}: the lock of {pk} keeps changing (now {holder:?})"
        )),
    }
}

/// The item of an event.
fn event_item(event: &Pending<'_>) -> Item {
    let mut item: Item = HashMap::from([
        ("pk".to_string(), s(event.pk)),
        ("sk".to_string(), s(&seq_sk(EVENT_PREFIX, event.seq))),
        ("seq".to_string(), n(event.seq)),
        ("key".to_string(), s(event.key)),
        ("type".to_string(), s(event.type_name)),
        (
            "v".to_string(),
            n(u64::from(event::current_version(event.type_name))),
        ),
        ("at".to_string(), s(&event::now())),
        ("digest".to_string(), s(event.digest)),
    ]);
    match event.body {
        Body::Inline(json) => item.insert("body".to_string(), s(json)),
        Body::S3(key) => item.insert("body_s3".to_string(), s(key)),
    };
    item
}

/// The registry item of the stream `pk`.
fn registry_item(pk: &str) -> Item {
    let stream = StreamId::from_key(pk);
    let mut item = HashMap::from([
        ("pk".to_string(), s(REGISTRY_PK)),
        ("sk".to_string(), s(pk)),
        ("at".to_string(), s(&event::now())),
    ]);
    if let Some(stream) = stream {
        item.insert("region".to_string(), s(&stream.region));
        item.insert("stack".to_string(), s(&stream.stack));
    }
    item
}
