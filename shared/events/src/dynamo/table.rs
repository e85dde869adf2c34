//! Creating the store's table.

use std::time::Duration;

use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::describe_table::DescribeTableError;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType, TableStatus,
};

use super::{DynamoStore, TABLE_WAIT, sdk_error};
use crate::store::{StoreError, StoreResult};

impl DynamoStore {
    /// Creates the store's table (keys `pk` and `sk`, both strings, billed per request)
    /// unless it exists, and waits until it is active. True when it created it.
    pub async fn create_table_if_missing(
        client: &aws_sdk_dynamodb::Client,
        table: &str,
    ) -> StoreResult<bool> {
        let exists = match client.describe_table().table_name(table).send().await {
            Ok(_) => true,
            Err(SdkError::ServiceError(e))
                if matches!(e.err(), DescribeTableError::ResourceNotFoundException(_)) =>
            {
                false
            }
            Err(e) => return Err(sdk_error("DescribeTable", table, &e)),
        };
        let mut created = false;
        if !exists {
            let key = |name: &str, key_type: KeyType| {
                KeySchemaElement::builder()
                    .attribute_name(name)
                    .key_type(key_type)
                    .build()
                    .map_err(|e| StoreError::Backend(format!("key schema: {e}")))
            };
            let attribute = |name: &str| {
                AttributeDefinition::builder()
                    .attribute_name(name)
                    .attribute_type(ScalarAttributeType::S)
                    .build()
                    .map_err(|e| StoreError::Backend(format!("attribute definition: {e}")))
            };
            let result = client
                .create_table()
                .table_name(table)
                .billing_mode(BillingMode::PayPerRequest)
                .attribute_definitions(attribute("pk")?)
                .attribute_definitions(attribute("sk")?)
                .key_schema(key("pk", KeyType::Hash)?)
                .key_schema(key("sk", KeyType::Range)?)
                .send()
                .await;
            match result {
                Ok(_) => created = true,
                // Someone else created it meanwhile.
                Err(e) if e.code() == Some("ResourceInUseException") => {}
                Err(e) => return Err(sdk_error("CreateTable", table, &e)),
            }
        }
        let started = std::time::Instant::now();
        let mut pause = Duration::from_millis(200);
        loop {
            let described = client
                .describe_table()
                .table_name(table)
                .send()
                .await
                .map_err(|e| sdk_error("DescribeTable", table, &e))?;
            let status = described.table().and_then(|t| t.table_status());
            if status == Some(&TableStatus::Active) {
                return Ok(created);
            }
            if started.elapsed() > TABLE_WAIT {
                return Err(StoreError::Backend(format!(
                    "DynamoDB table {table} is still not active after {}s (status {:?})",
                    TABLE_WAIT.as_secs(),
                    status
                )));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(5));
        }
    }
}
