//! An engine in the test process, as the CLI builds one, on any endpoint (the emulator,
//! or a proxy in front of it), its stores, and the stack inputs of corpus templates.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use aws_smithy_types::retry::RetryConfig;
use aws_smithy_types::timeout::TimeoutConfig;
use aws_types::SdkConfig;
use stackflow_core::intrinsics::{Pseudo, bind_parameters};
use stackflow_core::template::{StackTemplate, load_path};
use stackflow_engine::progress::Silent;
use stackflow_engine::stack::StackInput;
use stackflow_engine::{Engine, StackReport};
use stackflow_events::EventStore;
use stackflow_events::dynamo::DynamoStore;
use stackflow_providers::lookups::AwsLookups;
use stackflow_providers::router::Providers;

use crate::emulator::{ACCOUNT_ID, Emulator, REGION, unique_name};

/// `config` on `endpoint` with the CLI's retry and timeouts: the SDK's standard retries
/// (3 attempts), a 3 s connect timeout and 30 s per attempt.
pub fn cli_config(config: &SdkConfig, endpoint: &str) -> SdkConfig {
    config
        .to_builder()
        .endpoint_url(endpoint)
        .retry_config(RetryConfig::standard())
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(Duration::from_secs(3))
                .operation_attempt_timeout(Duration::from_secs(30))
                .build(),
        )
        .build()
}

/// An engine whose providers and lookups use `config`, recording in `store`, with no
/// lease and no progress output.
pub fn engine<S: EventStore + 'static>(config: &SdkConfig, store: Arc<S>) -> Arc<Engine<S>> {
    Arc::new(Engine {
        store,
        providers: Arc::new(Providers::from_config(config, None)),
        lookups: Arc::new(AwsLookups::new(config)),
        region: REGION.to_string(),
        who: format!("stackflow-tests pid {}", std::process::id()),
        cloudformation_fallback: false,
        progress: Arc::new(Silent),
        stale: Arc::new(|_| false),
        digest_key: None,
        lease: None,
    })
}

/// A new table and bucket for a DynamoDB store, made directly on the emulator; and a
/// store on them that does not go through any proxy.
pub async fn dynamo_store(emulator: &Emulator) -> (String, String, Arc<DynamoStore>) {
    let db = aws_sdk_dynamodb::Client::new(&emulator.sdk_config().await);
    let table = unique_name("stackflow-events");
    DynamoStore::create_table_if_missing(&db, &table)
        .await
        .expect("the store's table");
    let bucket = unique_name("stackflow-bodies");
    let s3 = emulator.s3().await;
    s3.create_bucket()
        .bucket(&bucket)
        .send()
        .await
        .expect("the store's bucket");
    let direct = DynamoStore::new(db, s3, &table, Some(bucket.clone()));
    (table, bucket, Arc::new(direct))
}

/// The DynamoDB store on `table` and `bucket`, its calls made with `sdk`.
pub fn dynamo_on(sdk: &SdkConfig, table: &str, bucket: &str) -> Arc<DynamoStore> {
    Arc::new(DynamoStore::new(
        aws_sdk_dynamodb::Client::new(sdk),
        stackflow_providers::aws::s3_client(sdk),
        table,
        Some(bucket.to_string()),
    ))
}

/// The one stack of a corpus case's template `<dir>/<stem>.template.json`.
pub fn corpus_template(dir: &str, stem: &str) -> StackTemplate {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/corpus")
        .join(dir)
        .join(format!("{stem}.template.json"));
    let mut stacks = load_path(&path).unwrap_or_else(|e| panic!("{dir}: {e}"));
    stacks.remove(0)
}

/// What a deploy of `stack` as `name` is given: its parameters bound, the pseudo
/// parameters of the emulator's account and region.
pub fn input(stack: &StackTemplate, name: &str) -> StackInput {
    let parameters = bind_parameters(&stack.template, &stack.parameters)
        .unwrap_or_else(|e| panic!("{}: {e}", stack.name));
    StackInput {
        name: name.to_string(),
        source: stack.file.display().to_string(),
        template: stack.template.clone(),
        parameters,
        pseudo: Pseudo {
            region: REGION.to_string(),
            account_id: Some(ACCOUNT_ID.to_string()),
            stack_name: name.to_string(),
            stack_id: None,
        },
        nested: stack.nested.clone(),
    }
}

/// What a run did, in a line: its status, counts, failures and rollback.
pub fn summary(r: &StackReport) -> String {
    let failures: Vec<String> = r
        .failures
        .iter()
        .map(|f| {
            let e = &f.error;
            format!("{} {}: {}: {}", f.logical_id, f.action, e.name, e.message)
        })
        .collect();
    let rollback = r.rollback.as_ref().map(|rb| {
        let failed: Vec<String> = rb
            .failed
            .iter()
            .map(|f| format!("{}: {}", f.logical_id, f.error.message))
            .collect();
        format!(
            "; rollback undid {}, failed [{}]",
            rb.undone.len(),
            failed.join("; ")
        )
    });
    format!(
        "{:?} in {:.1}s (created {}, updated {}, replaced {}, deleted {}, retained {}, \
         skipped {:?}); failures [{}]{}",
        r.status,
        r.seconds,
        r.created,
        r.updated,
        r.replaced,
        r.deleted,
        r.retained,
        r.skipped,
        failures.join("; "),
        rollback.unwrap_or_default()
    )
}

/// The checks both Step Functions paths (activities and Lambda) make after deploying
/// their five-resource scenario (`A` a queue whose URL is output `QueueUrl`, `C` a
/// parameter holding `B`'s physical id): five resources recorded and the lock released.
/// Returns the queue's URL, for the caller to find in AWS.
pub fn deployed_scenario(state: &stackflow_events::projection::StackState) -> String {
    assert_eq!(state.resources.len(), 5, "{state:#?}");
    assert!(state.lock.is_none(), "the lock is released");
    assert_eq!(
        state.resources["C"].properties["Value"],
        serde_json::json!(state.resources["B"].physical_id)
    );
    state.outputs["QueueUrl"]
        .as_str()
        .expect("the QueueUrl output")
        .to_string()
}

/// The queues AWS lists under the stack's name (`prefix`) and the queues `state` records,
/// each sorted: equal when nothing was made twice and no predecessor was left.
pub async fn listed_and_recorded_queues(
    sqs: &aws_sdk_sqs::Client,
    prefix: &str,
    state: &stackflow_events::projection::StackState,
) -> (Vec<String>, Vec<String>) {
    let listed = sqs
        .list_queues()
        .queue_name_prefix(prefix)
        .send()
        .await
        .expect("ListQueues");
    let mut urls = listed.queue_urls().to_vec();
    urls.sort();
    let mut recorded: Vec<String> = state
        .resources
        .values()
        .filter(|r| r.resource_type == "AWS::SQS::Queue")
        .map(|r| r.physical_id.clone())
        .collect();
    recorded.sort();
    (urls, recorded)
}
