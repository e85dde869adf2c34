//! `stackflow bootstrap`: stackflow's own bucket in each region, and the account's store
//! there (a DynamoDB table of the same name) that commands find by themselves.

use std::process::ExitCode;

use aws_types::region::Region;
use stackflow_core::assets::stackflow_bucket_name;
use stackflow_providers::assets::bucket::{AssetStorage, ensure_bucket};

use stackflow_events::dynamo::DynamoStore;

use crate::args::{BootstrapArgs, GlobalArgs};
use crate::store::account_store_name;

pub async fn run(global: &GlobalArgs, args: BootstrapArgs) -> anyhow::Result<ExitCode> {
    let config = crate::aws::load(global).await;
    let account = crate::aws::account_id(&config).await.map_err(|why| {
        anyhow::anyhow!("the AWS account is unknown ({why}): it names the bucket")
    })?;
    let regions = if global.regions.is_empty() {
        vec![crate::aws::region(&config)?]
    } else {
        global.regions.clone()
    };
    let storage = if args.use_cdk_bootstrap_assets {
        AssetStorage::CdkBootstrap
    } else {
        AssetStorage::Stackflow
    };
    for region in regions {
        let here = config
            .to_builder()
            .region(Region::new(region.clone()))
            .build();
        let s3 = stackflow_providers::aws::s3_client(&here);
        let bucket = stackflow_bucket_name(&account, &region);
        let report = ensure_bucket(&s3, &bucket, &region, Some(storage))
            .await
            .map_err(|e| anyhow::anyhow!("{region}: {e}"))?;
        let assets = match storage {
            AssetStorage::Stackflow => {
                format!("assets are published to s3://{bucket}/assets/ and templates point there")
            }
            AssetStorage::CdkBootstrap => {
                "assets stay in the CDK bootstrap bucket (cdk-<qualifier>-assets-*)".to_string()
            }
        };
        let what = if report.created {
            format!("created {bucket}")
        } else if report.changed.is_empty() {
            format!("{bucket} is already bootstrapped, nothing changed")
        } else {
            format!("{bucket} exists")
        };
        println!("{region}: {what}; {assets}");
        for change in &report.changed {
            println!("  set: {change}");
        }
        let table = account_store_name(&account, &region);
        let ddb = aws_sdk_dynamodb::Client::new(&here);
        let made = DynamoStore::create_table_if_missing(&ddb, &table)
            .await
            .map_err(|e| anyhow::anyhow!("{region}: the table {table}: {e}"))?;
        let how = if made { "created" } else { "already had" };
        println!(
            "{region}: {how} the account's store dynamodb:{table}: commands in this region \
             given no --store keep their records there, from any folder or machine"
        );
    }
    Ok(ExitCode::SUCCESS)
}
