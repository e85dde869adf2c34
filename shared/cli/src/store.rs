//! Picking the event store: `--store local[:DIR]` (the default, `.stackflow/`) or
//! `--store dynamodb:TABLE`.

use std::path::PathBuf;
use std::str::FromStr;

use aws_types::SdkConfig;
use serde_json::Value;
use stackflow_events::dynamo::DynamoStore;
use stackflow_events::event::{Holder, NewEvent, StoredEvent};
use stackflow_events::sqlite::SqliteStore;
use stackflow_events::{
    Appended, EventStore, Precondition, Rewrite, Rewritten, StoreResult, StreamId,
};

/// Where events live, as the user names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreSpec {
    /// A local database under this directory.
    Local(PathBuf),
    /// A DynamoDB table.
    DynamoDb(String),
}

impl FromStr for StoreSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "local" {
            return Ok(StoreSpec::Local(PathBuf::from(".stackflow")));
        }
        if let Some(dir) = s.strip_prefix("local:") {
            if dir.is_empty() {
                return Err("`local:` needs a directory, e.g. local:.stackflow".into());
            }
            return Ok(StoreSpec::Local(PathBuf::from(dir)));
        }
        if let Some(table) = s.strip_prefix("dynamodb:") {
            let valid = (3..=255).contains(&table.len())
                && table
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
            if !valid {
                return Err(format!(
                    "`{table}` is not a DynamoDB table name (3-255 of a-z A-Z 0-9 _ - .)"
                ));
            }
            return Ok(StoreSpec::DynamoDb(table.to_string()));
        }
        Err(format!(
            "unknown store `{s}`: use local, local:DIR or dynamodb:TABLE"
        ))
    }
}

impl std::fmt::Display for StoreSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreSpec::Local(dir) => write!(f, "local:{}", dir.display()),
            StoreSpec::DynamoDb(t) => write!(f, "dynamodb:{t}"),
        }
    }
}

/// The name of the account's store in a region, as `stackflow bootstrap` makes it: a
/// DynamoDB table, with the bucket of the same name (`stackflow-<account>-<region>`) for
/// its large events and its digest key.
pub fn account_store_name(account: &str, region: &str) -> String {
    stackflow_core::assets::stackflow_bucket_name(account, region)
}

/// An opened store.
#[derive(Debug)]
pub enum Store {
    /// The embedded store.
    Local(SqliteStore),
    /// The DynamoDB store.
    DynamoDb(DynamoStore),
}

/// The database file inside a local store's directory.
pub fn local_file(dir: &std::path::Path) -> PathBuf {
    dir.join("events.db")
}

/// Opens (or creates) the local store in `dir`, with a `.gitignore` that keeps the whole
/// directory (the log and the digest key) out of version control.
pub fn open_local(dir: &std::path::Path) -> anyhow::Result<SqliteStore> {
    let store = SqliteStore::open(local_file(dir))?;
    let ignore = dir.join(".gitignore");
    if !ignore.exists() {
        let text = "# stackflow's local store: its event log and digest key stay out of git.\n*\n";
        std::fs::write(&ignore, text)
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", ignore.display()))?;
    }
    Ok(store)
}

impl Store {
    /// Opens the store; a DynamoDB store keeps bodies over the item limit in `bucket`.
    pub fn open(
        spec: &StoreSpec,
        config: &SdkConfig,
        bucket: Option<String>,
    ) -> anyhow::Result<Store> {
        Ok(match spec {
            StoreSpec::Local(dir) => Store::Local(open_local(dir)?),
            StoreSpec::DynamoDb(table) => {
                let s3 = aws_sdk_s3::Client::from_conf(
                    aws_sdk_s3::config::Builder::from(config)
                        .force_path_style(true)
                        .build(),
                );
                Store::DynamoDb(DynamoStore::new(
                    aws_sdk_dynamodb::Client::new(config),
                    s3,
                    table.clone(),
                    bucket,
                ))
            }
        })
    }
}

impl EventStore for Store {
    async fn append(
        &self,
        stream: &StreamId,
        event: &NewEvent,
        pre: &Precondition,
    ) -> StoreResult<Appended> {
        match self {
            Store::Local(s) => s.append(stream, event, pre).await,
            Store::DynamoDb(s) => s.append(stream, event, pre).await,
        }
    }
    async fn append_in_order(
        &self,
        stream: &StreamId,
        events: &[(NewEvent, Precondition)],
    ) -> StoreResult<Vec<Appended>> {
        match self {
            Store::Local(s) => s.append_in_order(stream, events).await,
            Store::DynamoDb(s) => s.append_in_order(stream, events).await,
        }
    }
    async fn read(&self, stream: &StreamId, after: u64) -> StoreResult<Vec<StoredEvent>> {
        match self {
            Store::Local(s) => s.read(stream, after).await,
            Store::DynamoDb(s) => s.read(stream, after).await,
        }
    }
    async fn lock_holder(&self, stream: &StreamId) -> StoreResult<Option<Holder>> {
        match self {
            Store::Local(s) => s.lock_holder(stream).await,
            Store::DynamoDb(s) => s.lock_holder(stream).await,
        }
    }
    async fn break_lock(&self, stream: &StreamId, by: &str) -> StoreResult<Option<Holder>> {
        match self {
            Store::Local(s) => s.break_lock(stream, by).await,
            Store::DynamoDb(s) => s.break_lock(stream, by).await,
        }
    }
    async fn renew_lock(&self, stream: &StreamId, deploy_id: &str, until: &str) -> StoreResult<()> {
        match self {
            Store::Local(s) => s.renew_lock(stream, deploy_id, until).await,
            Store::DynamoDb(s) => s.renew_lock(stream, deploy_id, until).await,
        }
    }
    async fn put_snapshot(&self, stream: &StreamId, seq: u64, body: &Value) -> StoreResult<()> {
        match self {
            Store::Local(s) => s.put_snapshot(stream, seq, body).await,
            Store::DynamoDb(s) => s.put_snapshot(stream, seq, body).await,
        }
    }
    async fn latest_snapshot(&self, stream: &StreamId) -> StoreResult<Option<(u64, Value)>> {
        match self {
            Store::Local(s) => s.latest_snapshot(stream).await,
            Store::DynamoDb(s) => s.latest_snapshot(stream).await,
        }
    }
    async fn streams(&self) -> StoreResult<Vec<StreamId>> {
        match self {
            Store::Local(s) => s.streams().await,
            Store::DynamoDb(s) => s.streams().await,
        }
    }
    async fn rewrite(
        &self,
        stream: &StreamId,
        rewrite: &Rewrite,
        pre: &Precondition,
    ) -> StoreResult<Rewritten> {
        match self {
            Store::Local(s) => s.rewrite(stream, rewrite, pre).await,
            Store::DynamoDb(s) => s.rewrite(stream, rewrite, pre).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_specs() {
        assert_eq!("local".parse(), Ok(StoreSpec::Local(".stackflow".into())));
        assert_eq!(
            "local:/tmp/x".parse(),
            Ok(StoreSpec::Local("/tmp/x".into()))
        );
        assert_eq!(
            "dynamodb:stackflow-events".parse(),
            Ok(StoreSpec::DynamoDb("stackflow-events".into()))
        );
        assert!("dynamodb:a".parse::<StoreSpec>().is_err());
        assert!("dynamodb:bad/name".parse::<StoreSpec>().is_err());
        assert!("s3:x".parse::<StoreSpec>().is_err());
        assert!("local:".parse::<StoreSpec>().is_err());
    }
}
