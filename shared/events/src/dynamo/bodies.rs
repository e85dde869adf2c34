//! Bodies too large for an item, kept in S3 (see the module documentation of [`super`]).

use aws_sdk_s3::primitives::ByteStream;

use super::{DynamoStore, INLINE_BODY_LIMIT, Item, get_s, s3_error};
use crate::store::{StoreError, StoreResult};

/// Where an event's or a snapshot's body is.
pub(super) enum Body {
    /// In the item, as JSON.
    Inline(String),
    /// In S3, under this key.
    S3(String),
}

impl DynamoStore {
    /// Keeps a body in the item when it is small enough, else puts it in S3 under
    /// `<pk>/<kind>/<seq>.json`, or for an event `<pk>/events/<seq>-<nonce>.json`: two
    /// appenders racing for a position (or a rewrite and the body it replaces) never
    /// share an object, so the one that deletes its own never deletes another's.
    pub(super) async fn place_body(
        &self,
        pk: &str,
        kind: &str,
        seq: u64,
        json: String,
    ) -> StoreResult<Body> {
        if json.len() <= INLINE_BODY_LIMIT {
            return Ok(Body::Inline(json));
        }
        let Some(bucket) = &self.bucket else {
            return Err(StoreError::Backend(format!(
                "a body of {} bytes is over DynamoDB's item limit, and the store on table {} \
                 has no S3 bucket to put it in",
                json.len(),
                self.table
            )));
        };
        let key = if kind == "events" {
            format!("{pk}/{kind}/{seq:020}-{:016x}.json", super::nonce())
        } else {
            format!("{pk}/{kind}/{seq:020}.json")
        };
        let bytes = json.into_bytes();
        self.retrying(|| {
            self.s3
                .put_object()
                .bucket(bucket)
                .key(&key)
                .content_type("application/json")
                .body(ByteStream::from(bytes.clone()))
                .send()
        })
        .await
        .map_err(|e| s3_error("PutObject", bucket, &key, &e))?;
        Ok(Body::S3(key))
    }

    /// Deletes a body put in S3 for a write that did not happen (best effort: an object
    /// left behind is only wasted space).
    pub(super) async fn discard_body(&self, body: &Body) {
        if let (Body::S3(key), Some(bucket)) = (body, &self.bucket) {
            let _ = self.s3.delete_object().bucket(bucket).key(key).send().await;
        }
    }

    /// The JSON of a body stored in `item`.
    pub(super) async fn read_body(&self, item: &Item) -> StoreResult<Option<String>> {
        if let Some(json) = get_s(item, "body") {
            return Ok(Some(json.to_string()));
        }
        let Some(key) = get_s(item, "body_s3") else {
            return Ok(None);
        };
        let Some(bucket) = &self.bucket else {
            return Err(StoreError::Backend(format!(
                "an item of table {} keeps its body in S3 ({key}), and the store has no bucket",
                self.table
            )));
        };
        let object = self
            .retrying(|| self.s3.get_object().bucket(bucket).key(key).send())
            .await
            .map_err(|e| s3_error("GetObject", bucket, key, &e))?;
        let bytes = object.body.collect().await.map_err(|e| {
            StoreError::Backend(format!(
                "S3 GetObject s3://{bucket}/{key}: reading the body: {e}"
            ))
        })?;
        String::from_utf8(bytes.to_vec()).map(Some).map_err(|e| {
            StoreError::Backend(format!("S3 object s3://{bucket}/{key} is not UTF-8: {e}"))
        })
    }
}
