//! Rewriting stored events in place ([`EventStore::rewrite`]).
//!
//! DynamoDB has no transaction over a whole stream, so a rewrite goes in steps, each safe
//! to repeat:
//!
//! 1. every event to rewrite is read (consistently), and must be of the type given;
//! 2. the record is appended, with the precondition (a rewrite cut short after this is
//!    named by its record, and running it again with the same record finishes it);
//! 3. each event's new body is put (in the item, or over its S3 object), in one
//!    transaction with the digest of its key item; a body that moved from S3 into the item
//!    has its object deleted;
//! 4. every snapshot of the stream is deleted, with its S3 object.
//!
//! What DynamoDB and S3 keep beyond the store's reach (backups, point-in-time recovery,
//! streams, object versions) is named in [`Rewritten::residue`].
//!
//! [`EventStore::rewrite`]: crate::store::EventStore::rewrite

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{Put, TransactWriteItem, Update};

use super::bodies::Body;
use super::{
    DynamoStore, EVENT_PREFIX, Item, SNAPSHOT_PREFIX, build_error, get_s, key_sk, n, s, s3_error,
    seq_sk,
};
use crate::event::{self, Event};
use crate::store::{Precondition, Rewrite, Rewritten, StoreError, StoreResult, StreamId};

/// What the store cannot reach, said with every rewrite.
const RESIDUE: &str = "DynamoDB keeps earlier images of the items in on-demand backups, \
    point-in-time recovery and streams when they are enabled on the table, and a versioned \
    S3 bucket keeps earlier versions of the bodies kept there: the store cannot reach them";

impl DynamoStore {
    /// See [`EventStore::rewrite`](crate::store::EventStore::rewrite).
    pub(super) async fn rewrite_events(
        &self,
        stream: &StreamId,
        rewrite: &Rewrite,
        pre: &Precondition,
    ) -> StoreResult<Rewritten> {
        let pk = stream.key();
        let mut items = Vec::with_capacity(rewrite.events.len());
        for (seq, event) in &rewrite.events {
            items.push(self.event_to_rewrite(stream, *seq, event).await?);
        }
        let record = self.append_event(stream, &rewrite.record, pre).await?;
        for ((seq, event), item) in rewrite.events.iter().zip(items) {
            self.rewrite_one(&pk, *seq, event, item).await?;
        }
        let snapshots_dropped = self.drop_snapshots(&pk).await?;
        Ok(Rewritten {
            seqs: rewrite.events.iter().map(|(seq, _)| *seq).collect(),
            record,
            snapshots_dropped,
            residue: vec![RESIDUE.to_string()],
        })
    }

    /// The item of the event at `seq`, which must be of `event`'s type.
    async fn event_to_rewrite(
        &self,
        stream: &StreamId,
        seq: u64,
        event: &Event,
    ) -> StoreResult<Item> {
        let item = self
            .get(&stream.key(), &seq_sk(EVENT_PREFIX, seq))
            .await?
            .ok_or_else(|| {
                self.malformed_item(stream, &format!("there is no event {seq} to rewrite"))
            })?;
        match get_s(&item, "type") {
            Some(t) if t == event.type_name() => Ok(item),
            found => Err(self.malformed_item(
                stream,
                &format!(
                    "event {seq} is a {}, not a {}: a rewrite keeps each event's type",
                    found.unwrap_or("?"),
                    event.type_name()
                ),
            )),
        }
    }

    /// Puts the new body of the event at `seq` (stored as `old`), and its digest in its key
    /// item, at once.
    async fn rewrite_one(&self, pk: &str, seq: u64, event: &Event, old: Item) -> StoreResult<()> {
        let body = event.to_body();
        let digest = event::digest(&body);
        let json = serde_json::to_string(&body).expect("events serialize");
        let placed = self.place_body(pk, "events", seq, json).await?;
        let key = get_s(&old, "key")
            .ok_or_else(|| StoreError::Backend(format!("event {seq} of {pk} has no key")))?
            .to_string();
        let old_object = get_s(&old, "body_s3").map(str::to_string);
        let mut item = old;
        item.remove("body");
        item.remove("body_s3");
        match &placed {
            Body::Inline(json) => item.insert("body".to_string(), s(json)),
            Body::S3(key) => item.insert("body_s3".to_string(), s(key)),
        };
        item.insert("digest".to_string(), s(&digest));
        let v = u64::from(event::current_version(event.type_name()));
        item.insert("v".to_string(), n(v));
        let writes = vec![
            self.put_same_type(item, event.type_name())?,
            self.set_key_digest(pk, &key, seq, &digest)?,
        ];
        self.retrying(|| {
            self.db
                .transact_write_items()
                .set_transact_items(Some(writes.clone()))
                .send()
        })
        .await
        .map_err(|e| self.backend("TransactWriteItems (rewrite)", &e))?;
        if let (Some(object), Body::Inline(_)) = (old_object, &placed) {
            self.delete_object(&object).await?;
        }
        Ok(())
    }

    /// A `Put` of an event item, if the item there is still of `type_name`.
    fn put_same_type(&self, item: Item, type_name: &str) -> StoreResult<TransactWriteItem> {
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("#t = :t")
            .expression_attribute_names("#t", "type")
            .expression_attribute_values(":t", s(type_name))
            .build()
            .map_err(build_error)?;
        Ok(TransactWriteItem::builder().put(put).build())
    }

    /// An `Update` of the digest of the key item of `key`, if it still points at `seq`.
    fn set_key_digest(
        &self,
        pk: &str,
        key: &str,
        seq: u64,
        digest: &str,
    ) -> StoreResult<TransactWriteItem> {
        let update = Update::builder()
            .table_name(&self.table)
            .set_key(Some(HashMap::from([
                ("pk".to_string(), s(pk)),
                ("sk".to_string(), s(&key_sk(key))),
            ])))
            .update_expression("SET #d = :d")
            .condition_expression("#seq = :seq")
            .expression_attribute_names("#d", "digest")
            .expression_attribute_names("#seq", "seq")
            .expression_attribute_values(":d", s(digest))
            .expression_attribute_values(":seq", n(seq))
            .build()
            .map_err(build_error)?;
        Ok(TransactWriteItem::builder().update(update).build())
    }

    /// Deletes every snapshot of the stream `pk` (and its S3 object); how many there were.
    async fn drop_snapshots(&self, pk: &str) -> StoreResult<u64> {
        let query = self
            .db
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk AND begins_with(sk, :s)")
            .expression_attribute_values(":pk", s(pk))
            .expression_attribute_values(":s", s(SNAPSHOT_PREFIX))
            .consistent_read(true);
        let found: Vec<(String, Option<String>)> = self
            .query_all("Query (snapshots)", query)
            .await?
            .iter()
            .filter_map(|item| {
                let sk = get_s(item, "sk")?;
                Some((sk.to_string(), get_s(item, "body_s3").map(str::to_string)))
            })
            .collect();
        for (sk, object) in &found {
            self.retrying(|| {
                self.db
                    .delete_item()
                    .table_name(&self.table)
                    .key("pk", s(pk))
                    .key("sk", s(sk))
                    .send()
            })
            .await
            .map_err(|e| self.backend("DeleteItem (snapshot)", &e))?;
            if let Some(object) = object {
                self.delete_object(object).await?;
            }
        }
        Ok(found.len() as u64)
    }

    /// Deletes an S3 object of the store's bucket.
    async fn delete_object(&self, key: &str) -> StoreResult<()> {
        let Some(bucket) = &self.bucket else {
            return Err(StoreError::Backend(format!(
                "an item of table {} kept its body in S3 ({key}), and the store has no bucket",
                self.table
            )));
        };
        self.retrying(|| self.s3.delete_object().bucket(bucket).key(key).send())
            .await
            .map_err(|e| s3_error("DeleteObject", bucket, key, &e))?;
        Ok(())
    }
}
