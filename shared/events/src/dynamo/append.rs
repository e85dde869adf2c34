//! Writing events: the conditional transaction that writes events at their positions,
//! and what its cancellation means.

use std::collections::HashMap;

use aws_sdk_dynamodb::error::{DisplayErrorContext, SdkError};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{CancellationReason, Put, TransactWriteItem, Update};

use super::bodies::Body;
use super::locks::{LockOp, holder_of, lock_item};
use super::pages::page_item;
use super::{
    COUNTER_SK, DynamoStore, Item, LOCK_SK, MAX_ATTEMPTS, REGISTRY_PK, TRANSIENT_REASONS,
    build_error, describe_reasons, is_transient, key_sk, n, put, s,
};
use crate::event;
use crate::store::{StoreError, StoreResult, StreamId};

/// What a transaction writing events did.
pub(super) enum Written {
    /// The events are stored.
    Done,
    /// Another appender took the positions first (the counter moved): read it again.
    Moved,
    /// The keys of these events (by index) are taken: each `k#` item, when the
    /// cancellation reason held it. An event whose key points at its own position with
    /// its own digest was written by an earlier attempt of the same transaction.
    KeysTaken(Vec<(usize, Option<Item>)>),
    /// The lock's condition failed: the `lock` item as it was (when the reason held it).
    LockRefused(Option<Item>),
}

/// An event ready to be written at a position.
pub(super) struct Pending<'a> {
    pub(super) pk: &'a str,
    /// Its position.
    pub(super) seq: u64,
    pub(super) key: &'a str,
    pub(super) digest: &'a str,
    pub(super) type_name: &'static str,
    pub(super) body: &'a Body,
}

impl DynamoStore {
    // --- Writing events -----------------------------------------------------------------

    /// The transaction writing `events` (at consecutive positions, the first one above
    /// the counter) as one page, with the lock's precondition and, when needed, the
    /// registry item. Its items, in order: the page (`0`), each event's key item
    /// (`1 + i`), the counter (`1 + n`), the lock (`2 + n`, when there is one), the
    /// registry.
    fn transaction(
        &self,
        events: &[Pending<'_>],
        lock: LockOp<'_>,
        register: bool,
    ) -> StoreResult<Vec<TransactWriteItem>> {
        let absent = "attribute_not_exists(sk)";
        let (Some(first), Some(last)) = (events.first(), events.last()) else {
            return Err(StoreError::Backend("a transaction of no events".into()));
        };
        let mut items = Vec::with_capacity(events.len() + 4);
        // No old image in a cancellation reason for the page: it may be 400 KiB, and this
        // condition only fails when the counter is broken.
        items.push(
            TransactWriteItem::builder()
                .put(
                    Put::builder()
                        .table_name(&self.table)
                        .set_item(Some(page_item(events)))
                        .condition_expression(absent)
                        .build()
                        .map_err(build_error)?,
                )
                .build(),
        );
        for event in events {
            items.push(put(
                &self.table,
                HashMap::from([
                    ("pk".to_string(), s(event.pk)),
                    ("sk".to_string(), s(&key_sk(event.key))),
                    ("seq".to_string(), n(event.seq)),
                    ("digest".to_string(), s(event.digest)),
                ]),
                Some(absent),
                &[],
            )?);
        }
        items.push(self.counter_advance(first.pk, first.seq - 1, last.seq)?);
        items.extend(lock_item(&self.table, first.pk, lock)?);
        if register {
            items.push(self.registry_update(first.pk)?);
        }
        Ok(items)
    }

    /// The counter's move to `to`, only from `from`: the positions are taken in the same
    /// transaction that writes their events, so positions have no holes and follow the
    /// order in which events were written.
    fn counter_advance(&self, pk: &str, from: u64, to: u64) -> StoreResult<TransactWriteItem> {
        let update = Update::builder()
            .table_name(&self.table)
            .key("pk", s(pk))
            .key("sk", s(COUNTER_SK))
            .update_expression("SET #seq = :seq")
            .condition_expression(if from == 0 {
                "attribute_not_exists(sk) OR #seq = :prev"
            } else {
                "#seq = :prev"
            })
            .expression_attribute_names("#seq", "seq")
            .expression_attribute_values(":seq", n(to))
            .expression_attribute_values(":prev", n(from))
            .build()
            .map_err(build_error)?;
        Ok(TransactWriteItem::builder().update(update).build())
    }

    /// The registry item of stream `pk`, made if missing (its `at` stays the first
    /// writer's): no condition, so that it never cancels the transaction.
    fn registry_update(&self, pk: &str) -> StoreResult<TransactWriteItem> {
        let stream = StreamId::from_key(pk);
        let mut update = Update::builder()
            .table_name(&self.table)
            .key("pk", s(REGISTRY_PK))
            .key("sk", s(pk))
            .expression_attribute_names("#at", "at")
            .expression_attribute_values(":at", s(&event::now()));
        update = match &stream {
            Some(stream) => update
                .update_expression("SET #at = if_not_exists(#at, :at), #r = :r, #s = :s")
                .expression_attribute_names("#r", "region")
                .expression_attribute_names("#s", "stack")
                .expression_attribute_values(":r", s(&stream.region))
                .expression_attribute_values(":s", s(&stream.stack)),
            None => update.update_expression("SET #at = if_not_exists(#at, :at)"),
        };
        Ok(TransactWriteItem::builder()
            .update(update.build().map_err(build_error)?)
            .build())
    }

    /// Writes events at their positions in one transaction, repeating it while it fails
    /// transiently.
    pub(super) async fn write_events(
        &self,
        events: &[Pending<'_>],
        lock: LockOp<'_>,
    ) -> StoreResult<Written> {
        let Some(first) = events.first() else {
            return Ok(Written::Done);
        };
        let pk = first.pk;
        let mut attempt = 1;
        loop {
            let register = !self.is_registered(pk);
            let items = self.transaction(events, lock, register)?;
            let err = match self
                .db
                .transact_write_items()
                .set_transact_items(Some(items))
                .send()
                .await
            {
                Ok(_) => {
                    if register {
                        self.mark_registered(pk);
                    }
                    return Ok(Written::Done);
                }
                Err(err) => err,
            };
            if let Some(written) = self.after_failure(events, lock, &err).await? {
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
            if register && self.get(REGISTRY_PK, pk).await?.is_some() {
                // The conflict was likely another first append registering the stream:
                // that one did, so this one need not.
                self.mark_registered(pk);
            }
        }
    }

    /// What a failed transaction writing `events` means: its outcome, when the failure
    /// settles it; `None` when it is worth trying again; an error otherwise.
    async fn after_failure(
        &self,
        events: &[Pending<'_>],
        lock: LockOp<'_>,
        err: &SdkError<TransactWriteItemsError>,
    ) -> StoreResult<Option<Written>> {
        match err.as_service_error() {
            Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) => {
                self.cancelled(events, lock, cancelled.cancellation_reasons(), err)
                    .await
            }
            _ if is_transient(err) => Ok(None),
            _ => Err(self.backend("TransactWriteItems", err)),
        }
    }

    /// What a cancelled transaction writing `events` means, from its cancellation reasons
    /// (in the order of the transaction's items, see [`Self::transaction`]).
    async fn cancelled(
        &self,
        events: &[Pending<'_>],
        lock: LockOp<'_>,
        reasons: &[CancellationReason],
        err: &SdkError<TransactWriteItemsError>,
    ) -> StoreResult<Option<Written>> {
        let failed = |i: usize| {
            reasons
                .get(i)
                .filter(|r| r.code() == Some("ConditionalCheckFailed"))
        };
        let count = events.len();
        // The keys first: a retried append is a success whatever the lock does.
        let taken: Vec<(usize, Option<Item>)> = (0..count)
            .filter_map(|i| failed(1 + i).map(|r| (i, r.item().cloned())))
            .collect();
        if !taken.is_empty() {
            return Ok(Some(Written::KeysTaken(taken)));
        }
        if !matches!(lock, LockOp::None)
            && let Some(reason) = failed(count + 2)
        {
            return Ok(Some(Written::LockRefused(reason.item().cloned())));
        }
        if failed(count + 1).is_some() {
            return Ok(Some(Written::Moved));
        }
        if failed(0).is_some() {
            let last = &events[count - 1];
            return Err(StoreError::Backend(format!(
                "DynamoDB table {}: position {} of {} is already taken: the \
                 stream's sequence counter is behind its events",
                self.table, last.seq, last.pk
            )));
        }
        if reasons.is_empty() {
            return self.look_why(events, lock).await.map(Some);
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

    /// Why a transaction cancelled without reasons was: the items themselves, read.
    async fn look_why(&self, events: &[Pending<'_>], lock: LockOp<'_>) -> StoreResult<Written> {
        let mut taken = Vec::new();
        for (i, event) in events.iter().enumerate() {
            if let Some(found) = self.get(event.pk, &key_sk(event.key)).await? {
                taken.push((i, Some(found)));
            }
        }
        if !taken.is_empty() {
            return Ok(Written::KeysTaken(taken));
        }
        let pk = events[0].pk;
        let held = self.get(pk, LOCK_SK).await?;
        if !lock.allows(holder_of(held.as_ref())?.as_ref()) {
            return Ok(Written::LockRefused(held));
        }
        Ok(Written::Moved)
    }
}
