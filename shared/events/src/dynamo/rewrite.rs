//! Rewriting stored events in place ([`EventStore::rewrite`]).
//!
//! DynamoDB has no transaction over a whole stream, so a rewrite goes in steps, each safe
//! to repeat:
//!
//! 1. every event to rewrite is read (consistently), and must be of the type given;
//! 2. the record is appended, with the precondition (a rewrite cut short after this is
//!    named by its record, and running it again with the same record finishes it);
//! 3. each page holding events to rewrite is put again with their new bodies (in the
//!    page, or in a new S3 object), if nobody rewrote it since it was read (its `rev`), in
//!    one transaction with the digests of their key items; the S3 objects of the bodies
//!    replaced are then deleted;
//! 4. every snapshot of the stream is deleted, with its S3 object.
//!
//! What DynamoDB and S3 keep beyond the store's reach (backups, point-in-time recovery,
//! streams, object versions) is named in [`Rewritten::residue`].
//!
//! [`EventStore::rewrite`]: crate::store::EventStore::rewrite

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{Put, TransactWriteItem, Update};

use super::pages::{REVISION, entry_at, entry_at_mut, set_body, span};
use super::{
    DynamoStore, Item, SNAPSHOT_PREFIX, build_error, get_n, get_s, key_sk, n, s, s3_error,
};
use crate::event::{self, Event};
use crate::store::{Precondition, Rewrite, Rewritten, StoreError, StoreResult, StreamId};

/// What the store cannot reach, said with every rewrite.
const RESIDUE: &str = "DynamoDB keeps earlier images of the items in on-demand backups, \
    point-in-time recovery and streams when they are enabled on the table, and a versioned \
    S3 bucket keeps earlier versions of the bodies kept there: the store cannot reach them";

/// A page (or single-event item) to rewrite, as read, and the events of it to rewrite.
struct PageRewrite<'a> {
    item: Item,
    changes: Vec<(u64, &'a Event)>,
}

impl DynamoStore {
    /// See [`EventStore::rewrite`](crate::store::EventStore::rewrite).
    pub(super) async fn rewrite_events(
        &self,
        stream: &StreamId,
        rewrite: &Rewrite,
        pre: &Precondition,
    ) -> StoreResult<Rewritten> {
        let pk = stream.key();
        let mut pages: Vec<PageRewrite<'_>> = Vec::new();
        for (seq, event) in &rewrite.events {
            let covers = |page: &PageRewrite<'_>| {
                span(&page.item).is_some_and(|(first, last)| first <= *seq && *seq <= last)
            };
            let index = match pages.iter().position(covers) {
                Some(index) => index,
                None => {
                    let item = self.page_holding(stream, *seq).await?.ok_or_else(|| {
                        self.malformed_item(stream, &format!("there is no event {seq} to rewrite"))
                    })?;
                    pages.push(PageRewrite {
                        item,
                        changes: Vec::new(),
                    });
                    pages.len() - 1
                }
            };
            self.check_type(stream, &pages[index].item, *seq, event)?;
            pages[index].changes.push((*seq, event));
        }
        let record = self.append_event(stream, &rewrite.record, pre).await?;
        for page in pages {
            self.rewrite_page(&pk, page).await?;
        }
        let snapshots_dropped = self.drop_snapshots(&pk).await?;
        Ok(Rewritten {
            seqs: rewrite.events.iter().map(|(seq, _)| *seq).collect(),
            record,
            snapshots_dropped,
            residue: vec![RESIDUE.to_string()],
        })
    }

    /// Checks that the event at `seq` in `item` is of `event`'s type.
    fn check_type(
        &self,
        stream: &StreamId,
        item: &Item,
        seq: u64,
        event: &Event,
    ) -> StoreResult<()> {
        match entry_at(item, seq).and_then(|entry| get_s(entry, "type")) {
            Some(t) if t == event.type_name() => Ok(()),
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

    /// Puts the new bodies of a page's events, and their digests in their key items, at
    /// once; then deletes the S3 objects of the bodies they replace.
    async fn rewrite_page(&self, pk: &str, page: PageRewrite<'_>) -> StoreResult<()> {
        let PageRewrite { mut item, changes } = page;
        let revision = get_n(&item, REVISION);
        let mut writes = Vec::with_capacity(changes.len() + 1);
        let mut replaced = Vec::new();
        for (seq, event) in changes {
            let body = event.to_body();
            let digest = event::digest(&body);
            let json = serde_json::to_string(&body).expect("events serialize");
            let placed = self.place_body(pk, "events", seq, json).await?;
            let entry = entry_at_mut(&mut item, seq)
                .ok_or_else(|| StoreError::Backend(format!("event {seq} of {pk} is not there")))?;
            let key = get_s(entry, "key")
                .ok_or_else(|| StoreError::Backend(format!("event {seq} of {pk} has no key")))?
                .to_string();
            replaced.extend(get_s(entry, "body_s3").map(str::to_string));
            set_body(entry, &placed);
            entry.insert("digest".to_string(), s(&digest));
            let v = u64::from(event::current_version(event.type_name()));
            entry.insert("v".to_string(), n(v));
            writes.push(self.set_key_digest(pk, &key, seq, &digest)?);
        }
        item.insert(REVISION.to_string(), n(revision.unwrap_or(0) + 1));
        writes.insert(0, self.put_unchanged(item, revision)?);
        self.retrying(|| {
            self.db
                .transact_write_items()
                .set_transact_items(Some(writes.clone()))
                .send()
        })
        .await
        .map_err(|e| self.backend("TransactWriteItems (rewrite)", &e))?;
        // Each new body put in S3 has a key of its own: every replaced object is garbage.
        for object in replaced {
            self.delete_object(&object).await?;
        }
        Ok(())
    }

    /// A `Put` of a page, if nobody rewrote it since it was read (its revision is still
    /// `revision`).
    fn put_unchanged(&self, item: Item, revision: Option<u64>) -> StoreResult<TransactWriteItem> {
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(item))
            .expression_attribute_names("#rev", REVISION);
        let put = match revision {
            Some(revision) => put
                .condition_expression("#rev = :rev")
                .expression_attribute_values(":rev", n(revision)),
            None => put.condition_expression("attribute_exists(sk) AND attribute_not_exists(#rev)"),
        };
        Ok(TransactWriteItem::builder()
            .put(put.build().map_err(build_error)?)
            .build())
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
