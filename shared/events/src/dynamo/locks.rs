//! The stack's lock: the `lock` item, the preconditions an append puts on it, and breaking it.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{
    ConditionCheck, Delete, ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update,
};

use super::append::{Pending, Written};
use super::{DynamoStore, Item, LOCK_SK, MAX_ATTEMPTS, build_error, get_s, put, s};
use crate::event::{self, Event, Holder, NewEvent};
use crate::store::{EventStore, Precondition, StoreError, StoreResult, StreamId};

/// What the precondition of an append does to the `lock` item.
#[derive(Clone, Copy)]
pub(super) enum LockOp<'a> {
    /// Nothing.
    None,
    /// Puts the holder, if the lock is free or held by the same deploy.
    Take(&'a Holder),
    /// Checks that this deploy holds it.
    Check(&'a str),
    /// Checks that this deploy holds it and that it is not fenced.
    CheckOpen(&'a str),
    /// Fences it (its `fenced` attribute, kept when set), if this deploy holds it.
    Fence(&'a str),
    /// Deletes it, if it is free or held by this deploy.
    Release(&'a str),
    /// Deletes it, if this deploy holds it (breaking a lock).
    Break(&'a str),
}

impl<'a> From<&'a Precondition> for LockOp<'a> {
    fn from(pre: &'a Precondition) -> Self {
        match pre {
            Precondition::None => LockOp::None,
            Precondition::TakeLock(holder) => LockOp::Take(holder),
            Precondition::HoldsLock(id) => LockOp::Check(id),
            Precondition::ReleaseLock(id) => LockOp::Release(id),
            Precondition::HoldsOpenLock(id) => LockOp::CheckOpen(id),
            Precondition::FenceLock(id) => LockOp::Fence(id),
        }
    }
}

impl LockOp<'_> {
    /// Whether the lock's current holder lets the operation through.
    pub(super) fn allows(self, holder: Option<&Holder>) -> bool {
        match self {
            LockOp::None => true,
            LockOp::Take(h) => holder.is_none_or(|held| held.deploy_id == h.deploy_id),
            LockOp::Release(id) => holder.is_none_or(|held| held.deploy_id == id),
            LockOp::Check(id) | LockOp::Break(id) | LockOp::Fence(id) => {
                holder.is_some_and(|held| held.deploy_id == id)
            }
            LockOp::CheckOpen(id) => {
                holder.is_some_and(|held| held.deploy_id == id && held.fenced.is_none())
            }
        }
    }
}

/// The holder recorded in a `lock` item, with its fence (the item's `fenced` attribute,
/// which a condition expression can read).
pub(super) fn holder_of(item: Option<&Item>) -> StoreResult<Option<Holder>> {
    let Some(item) = item else {
        return Ok(None);
    };
    let Some(json) = get_s(item, "holder") else {
        return Ok(None);
    };
    let mut holder: Holder = serde_json::from_str(json)
        .map_err(|e| StoreError::Backend(format!("the stack's lock item is malformed: {e}")))?;
    if let Some(since) = get_s(item, FENCED) {
        holder.fenced = Some(since.to_string());
    }
    Ok(Some(holder))
}

/// The `lock` item's attribute that fences it: the time it was fenced.
const FENCED: &str = "fenced";

/// The item of a transaction that applies `lock` to the `lock` item of the stream `pk`, if
/// any; when its condition fails, the cancellation reason holds the item it found.
pub(super) fn lock_item(
    table: &str,
    pk: &str,
    lock: LockOp<'_>,
) -> StoreResult<Option<TransactWriteItem>> {
    let lock_key = || HashMap::from([("pk".to_string(), s(pk)), ("sk".to_string(), s(LOCK_SK))]);
    let free_or_mine = "attribute_not_exists(sk) OR deploy_id = :d";
    let item = match lock {
        LockOp::None => None,
        LockOp::Take(holder) => {
            let json = serde_json::to_string(holder).expect("holders serialize");
            let mut item = lock_key();
            item.insert("deploy_id".to_string(), s(&holder.deploy_id));
            item.insert("holder".to_string(), s(&json));
            Some(put(
                table,
                item,
                Some(free_or_mine),
                &[(":d", &holder.deploy_id)],
            )?)
        }
        LockOp::Check(id) | LockOp::CheckOpen(id) => {
            let condition = if matches!(lock, LockOp::Check(_)) {
                "deploy_id = :d"
            } else {
                "deploy_id = :d AND attribute_not_exists(fenced)"
            };
            let check = ConditionCheck::builder()
                .table_name(table)
                .set_key(Some(lock_key()))
                .condition_expression(condition)
                .expression_attribute_values(":d", s(id))
                .return_values_on_condition_check_failure(
                    ReturnValuesOnConditionCheckFailure::AllOld,
                )
                .build()
                .map_err(build_error)?;
            Some(TransactWriteItem::builder().condition_check(check).build())
        }
        LockOp::Fence(id) => {
            let update = Update::builder()
                .table_name(table)
                .set_key(Some(lock_key()))
                .update_expression("SET fenced = if_not_exists(fenced, :t)")
                .condition_expression("deploy_id = :d")
                .expression_attribute_values(":d", s(id))
                .expression_attribute_values(":t", s(&event::now()))
                .return_values_on_condition_check_failure(
                    ReturnValuesOnConditionCheckFailure::AllOld,
                )
                .build()
                .map_err(build_error)?;
            Some(TransactWriteItem::builder().update(update).build())
        }
        LockOp::Release(id) | LockOp::Break(id) => {
            let condition = if matches!(lock, LockOp::Release(_)) {
                free_or_mine
            } else {
                "deploy_id = :d"
            };
            let delete = Delete::builder()
                .table_name(table)
                .set_key(Some(lock_key()))
                .condition_expression(condition)
                .expression_attribute_values(":d", s(id))
                .return_values_on_condition_check_failure(
                    ReturnValuesOnConditionCheckFailure::AllOld,
                )
                .build()
                .map_err(build_error)?;
            Some(TransactWriteItem::builder().delete(delete).build())
        }
    };
    Ok(item)
}

impl DynamoStore {
    /// Extends the lease of the lock `deploy_id` holds (see
    /// [`EventStore::renew_lock`](crate::store::EventStore::renew_lock)): the holder is
    /// rewritten only while the same run holds it.
    pub(super) async fn renew_held_lock(
        &self,
        stream: &StreamId,
        deploy_id: &str,
        until: &str,
    ) -> StoreResult<()> {
        let pk = stream.key();
        let not_holder = |holder: Option<Holder>| StoreError::NotHolder {
            deploy_id: deploy_id.to_string(),
            holder: holder.map(Box::new),
        };
        let Some(mut holder) = self.lock_holder(stream).await? else {
            return Err(not_holder(None));
        };
        if holder.deploy_id != deploy_id {
            return Err(not_holder(Some(holder)));
        }
        holder.expires = Some(until.to_string());
        let json = serde_json::to_string(&holder).expect("holders serialize");
        let answer = self
            .retrying(|| {
                self.db
                    .update_item()
                    .table_name(&self.table)
                    .key("pk", s(&pk))
                    .key("sk", s(LOCK_SK))
                    .update_expression("SET holder = :h")
                    .condition_expression("deploy_id = :d")
                    .expression_attribute_values(":h", s(&json))
                    .expression_attribute_values(":d", s(deploy_id))
                    .send()
            })
            .await;
        match answer {
            Ok(_) => Ok(()),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_conditional_check_failed_exception()) =>
            {
                Err(not_holder(self.lock_holder(stream).await?))
            }
            Err(e) => Err(self.backend("UpdateItem (lock lease)", &e)),
        }
    }

    /// Breaks the stream's lock, recording a `LockBroken` event (see
    /// [`EventStore::break_lock`](crate::store::EventStore::break_lock)).
    pub(super) async fn break_held_lock(
        &self,
        stream: &StreamId,
        by: &str,
    ) -> StoreResult<Option<Holder>> {
        let pk = stream.key();
        let mut attempt = 1;
        loop {
            let Some(holder) = self.lock_holder(stream).await? else {
                return Ok(None);
            };
            let seq = self.last_seq(&pk).await? + 1;
            let new = NewEvent::new(
                format!("lock-broken/{}/{seq}", holder.deploy_id),
                Event::LockBroken {
                    by: by.to_string(),
                    previous: holder.clone(),
                },
            );
            let body_value = new.event.to_body();
            let digest = event::digest(&body_value);
            let json = serde_json::to_string(&body_value).expect("events serialize");
            let body = self.place_body(&pk, "events", seq, json).await?;
            let pending = Pending {
                pk: &pk,
                seq,
                key: &new.key,
                digest: &digest,
                type_name: new.event.type_name(),
                body: &body,
            };
            match self
                .write_events(
                    std::slice::from_ref(&pending),
                    LockOp::Break(&holder.deploy_id),
                )
                .await
            {
                Ok(Written::Done) => return Ok(Some(holder)),
                // Another event took the position: read the stream's end again.
                Ok(Written::Moved) => {
                    self.discard_body(&body).await;
                    self.contention_pause(attempt).await;
                }
                // Released or taken over meanwhile: look again.
                Ok(Written::LockRefused(_)) if attempt < MAX_ATTEMPTS => {
                    self.discard_body(&body).await;
                    self.backoff(attempt).await;
                    attempt += 1;
                }
                Ok(Written::LockRefused(_)) => {
                    self.discard_body(&body).await;
                    return Err(StoreError::Backend(format!(
                        "DynamoDB table {}: the lock of {pk} kept changing while it was broken",
                        self.table
                    )));
                }
                Ok(Written::KeysTaken(_)) => {
                    self.discard_body(&body).await;
                    return Err(StoreError::Backend(format!(
                        "DynamoDB table {}: the key `{}` of a LockBroken event is taken",
                        self.table, new.key
                    )));
                }
                // Whether it was written is unknown: the body stays.
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_ops_allow_what_their_conditions_allow() {
        let holder = |id: &str| Holder {
            deploy_id: id.to_string(),
            who: "me".to_string(),
            since: "2024-01-01T00:00:00Z".to_string(),
            operation: "deploy".to_string(),
            expires: None,
            fenced: None,
        };
        let mine = holder("d1");
        let theirs = holder("d2");
        assert!(LockOp::Take(&mine).allows(None));
        assert!(LockOp::Take(&mine).allows(Some(&mine)));
        assert!(!LockOp::Take(&mine).allows(Some(&theirs)));
        assert!(!LockOp::Check("d1").allows(None));
        assert!(LockOp::Check("d1").allows(Some(&mine)));
        assert!(LockOp::Release("d1").allows(None));
        assert!(!LockOp::Release("d1").allows(Some(&theirs)));
        assert!(!LockOp::Break("d1").allows(None));
        let fenced = Holder {
            fenced: Some("2024-01-01T00:01:00Z".to_string()),
            ..mine.clone()
        };
        assert!(LockOp::CheckOpen("d1").allows(Some(&mine)));
        assert!(!LockOp::CheckOpen("d1").allows(Some(&fenced)));
        assert!(!LockOp::CheckOpen("d1").allows(Some(&theirs)));
        assert!(LockOp::Check("d1").allows(Some(&fenced)));
        assert!(LockOp::Fence("d1").allows(Some(&fenced)));
        assert!(!LockOp::Fence("d1").allows(Some(&theirs)));
        assert!(!LockOp::Fence("d1").allows(None));
    }
}
