//! The file assets of a `cdk.out` a trigger deploys (an object under `deploy/<stack>/` or
//! a pipeline's artifact, unzipped by Start or PipelineJob) are published before the
//! execution starts, as `stackflow deploy` publishes them: to the destination the asset
//! manifest names, once (content-addressed), on the emulator.

use std::path::Path;

use stackflow_core::template::load_path;
use stackflow_engine::sfn::triggers::assets::publish;
use stackflow_engine::tasks::ErrorKind;
use stackflow_tests::Emulator;
use stackflow_tests::emulator::{ACCOUNT_ID, REGION};

#[tokio::test(flavor = "multi_thread")]
async fn a_cdk_out_s_file_assets_are_published_once_before_the_deploy() {
    let emulator = Emulator::shared().await;
    let s3 = emulator.s3().await;
    let bucket = format!("cdk-hnb659fds-assets-{ACCOUNT_ID}-{REGION}");
    let _ = s3.create_bucket().bucket(&bucket).send().await;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/corpus/s3-autodelete-objects");
    let stack = load_path(&dir)
        .expect("the cdk.out loads")
        .into_iter()
        .find(|s| s.name == "S3AutoDeleteObjectsStack")
        .expect("the stack");
    let key = "6dba3da2af96b69a187d689b326e5272b9abc8671c0427845a8bed243e02877d.zip";
    let _ = s3.delete_object().bucket(&bucket).key(key).send().await;

    let uploaded = publish(&s3, &stack, Some(ACCOUNT_ID), REGION)
        .await
        .expect("published");
    assert_eq!(
        uploaded, 1,
        "the handler's code (the template is not an asset to send)"
    );
    let object = s3.get_object().bucket(&bucket).key(key).send().await;
    let body = object.expect("the code is there").body.collect().await;
    let bytes = body.expect("its bytes").into_bytes();
    assert_eq!(&bytes[..2], b"PK", "a zip of the asset directory");

    let again = publish(&s3, &stack, Some(ACCOUNT_ID), REGION)
        .await
        .expect("published again");
    assert_eq!(again, 0, "content-addressed: already there");

    let unknown = publish(&s3, &stack, None, REGION).await;
    let e = unknown.expect_err("no account, no destination");
    assert_eq!(e.kind, ErrorKind::Input);
    assert!(e.message.contains("account"), "{}", e.message);
}
