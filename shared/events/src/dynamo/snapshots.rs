//! Projection snapshots: `s#<seq>` items, their bodies inline or in S3.

use std::collections::HashMap;

use serde_json::Value;

use super::bodies::Body;
use super::{DynamoStore, Item, SNAPSHOT_PREFIX, get_n, n, s, seq_sk};
use crate::event;
use crate::store::{StoreResult, StreamId};

impl DynamoStore {
    /// Stores a snapshot of the stream's projection covering it up to `seq`.
    pub(super) async fn write_snapshot(
        &self,
        stream: &StreamId,
        seq: u64,
        body: &Value,
    ) -> StoreResult<()> {
        let pk = stream.key();
        let json = serde_json::to_string(body).expect("values serialize");
        let body = self.place_body(&pk, "snapshots", seq, json).await?;
        let mut item: Item = HashMap::from([
            ("pk".to_string(), s(&pk)),
            ("sk".to_string(), s(&seq_sk(SNAPSHOT_PREFIX, seq))),
            ("seq".to_string(), n(seq)),
            ("at".to_string(), s(&event::now())),
        ]);
        match &body {
            Body::Inline(json) => item.insert("body".to_string(), s(json)),
            Body::S3(key) => item.insert("body_s3".to_string(), s(key)),
        };
        self.retrying(|| {
            self.db
                .put_item()
                .table_name(&self.table)
                .set_item(Some(item.clone()))
                .send()
        })
        .await
        .map_err(|e| self.backend("PutItem (snapshot)", &e))?;
        Ok(())
    }

    /// The stream's latest snapshot and the position it covers, if any.
    pub(super) async fn read_latest_snapshot(
        &self,
        stream: &StreamId,
    ) -> StoreResult<Option<(u64, Value)>> {
        let pk = stream.key();
        let out = self
            .retrying(|| {
                self.db
                    .query()
                    .table_name(&self.table)
                    .key_condition_expression("pk = :pk AND begins_with(sk, :s)")
                    .expression_attribute_values(":pk", s(&pk))
                    .expression_attribute_values(":s", s(SNAPSHOT_PREFIX))
                    .scan_index_forward(false)
                    .limit(1)
                    .consistent_read(true)
                    .send()
            })
            .await
            .map_err(|e| self.backend("Query (latest snapshot)", &e))?;
        let Some(item) = out.items().first() else {
            return Ok(None);
        };
        let seq = get_n(item, "seq")
            .ok_or_else(|| self.malformed_item(stream, "a snapshot item has no position"))?;
        let json = self.read_body(item).await?.ok_or_else(|| {
            self.malformed_item(stream, &format!("the snapshot at {seq} has no body"))
        })?;
        let body = serde_json::from_str(&json).map_err(|e| {
            self.malformed_item(stream, &format!("the snapshot at {seq} is not JSON: {e}"))
        })?;
        Ok(Some((seq, body)))
    }
}
