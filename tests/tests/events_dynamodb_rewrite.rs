//! Rewriting stored events in place on the DynamoDB store, against the local emulator: the
//! conformance check, then no item and no S3 object of the stream keeps the old bodies.

use stackflow_events::conformance;
use stackflow_events::dynamo::DynamoStore;
use stackflow_tests::{Emulator, unique_name};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dynamodb_store_rewrites_every_copy_it_holds() {
    let emulator = Emulator::shared().await;
    let db = aws_sdk_dynamodb::Client::new(&emulator.sdk_config().await);
    let s3 = emulator.s3().await;
    let table = unique_name("stackflow-rewrite");
    DynamoStore::create_table_if_missing(&db, &table)
        .await
        .unwrap();
    let bucket = unique_name("stackflow-rewrite-bodies");
    s3.create_bucket().bucket(&bucket).send().await.unwrap();
    let store = DynamoStore::new(db.clone(), s3.clone(), &table, Some(bucket.clone()));
    let prefix = unique_name("rw");

    conformance::rewrite_replaces_bodies_in_place(&store, &prefix).await;

    let plaintext = conformance::REWRITTEN_PLAINTEXT;
    let pk = format!("{}/{prefix}-rewrite", conformance::REGION);
    let items = db
        .query()
        .table_name(&table)
        .key_condition_expression("pk = :pk")
        .expression_attribute_values(
            ":pk",
            aws_sdk_dynamodb::types::AttributeValue::S(pk.clone()),
        )
        .send()
        .await
        .unwrap();
    assert!(items.count() > 3, "the stream's items: {}", items.count());
    for item in items.items() {
        let text = format!("{item:?}");
        assert!(
            !text.contains(plaintext),
            "an item keeps the plaintext: {}",
            &text[..200.min(text.len())]
        );
        assert!(
            !item
                .get("sk")
                .and_then(|s| s.as_s().ok())
                .is_some_and(|sk| sk.starts_with("s#")),
            "a snapshot survives"
        );
    }
    let objects = s3
        .list_objects_v2()
        .bucket(&bucket)
        .prefix(&pk)
        .send()
        .await
        .unwrap();
    assert!(!objects.contents().is_empty(), "the large body is in S3");
    for object in objects.contents() {
        let key = object.key().unwrap();
        let body = s3
            .get_object()
            .bucket(&bucket)
            .key(key)
            .send()
            .await
            .unwrap();
        let bytes = body.body.collect().await.unwrap().into_bytes();
        assert!(
            !bytes
                .windows(plaintext.len())
                .any(|w| w == plaintext.as_bytes()),
            "S3 object {key} keeps the plaintext"
        );
    }
}
