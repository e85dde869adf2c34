//! The corpus cases with Lambda-backed custom resources, through the `stackflow` binary
//! with no `--store-bucket`, their handlers' code running (the emulator's container
//! stand-in): `custom-resource-provider` (the CDK provider framework, with its waiter
//! state machine and an `isComplete` handler, a provider without one, and
//! `AwsCustomResource` reading an SSM parameter) and `s3-autodelete-objects` (CDK's bucket
//! auto-delete handler). Each deploys from its `cdk.out` (its handler code published as
//! assets to the CDK bootstrap bucket, which the test makes as `cdk bootstrap` would),
//! deploys again with no change, and destroys; the auto-delete buckets hold objects, which
//! CDK's own handler deletes. The first custom resource makes stackflow's bucket and says
//! so. The CLI talks to the emulator through [`InlineS3Code`]: fakecloud keeps no code for
//! a function created from an S3 object.

use std::path::Path;
use std::time::Instant;

use serde_json::Value;
use stackflow_tests::cli::{Cli, Run};
use stackflow_tests::emulator::ACCOUNT_ID;
use stackflow_tests::lambda::InlineS3Code;
use stackflow_tests::{Emulator, unique_name};

const REGION: &str = "us-east-1";

fn case(dir: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/corpus")
        .join(dir)
        .display()
        .to_string()
}

fn ok(run: Run) -> Run {
    assert_eq!(run.code, Some(0), "{}", run.describe());
    run
}

/// The stack's recorded state (`state show --json`).
fn state(cli: &Cli, stack: &str) -> Value {
    let run = ok(cli.run(&["state", "show", "--stack", stack, "--json"]));
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", run.describe()))
}

fn physical_id(state: &Value, logical_id: &str) -> String {
    let r = &state["resources"][logical_id];
    r["physicalId"]
        .as_str()
        .or_else(|| r["physicalId"].as_str())
        .unwrap_or_else(|| panic!("{logical_id} in {state}"))
        .to_string()
}

async fn ssm_value(ssm: &aws_sdk_ssm::Client, name: &str) -> String {
    let out = ssm.get_parameter().name(name).send().await.unwrap();
    out.parameter().unwrap().value().unwrap().to_string()
}

fn deploy(cli: &Cli, dir: &str, stack: &str) -> (Run, f64) {
    let started = Instant::now();
    let run = ok(cli.run(&["deploy", &case(dir), "--stack", stack]));
    (run, started.elapsed().as_secs_f64())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lambda_backed_corpus_cases_deploy_redeploy_and_destroy() {
    let emu = Emulator::shared().await;
    let config = emu.sdk_config().await;
    let s3 = emu.s3().await;
    let ssm = aws_sdk_ssm::Client::new(&config);
    // `cdk bootstrap`'s bucket, where the handlers' code is published.
    s3.create_bucket()
        .bucket(format!("cdk-hnb659fds-assets-{ACCOUNT_ID}-{REGION}"))
        .send()
        .await
        .unwrap();
    let dir = std::env::temp_dir().join(unique_name("crcorpus"));
    std::fs::create_dir_all(&dir).unwrap();
    // The handlers' functions are made from their published code (see InlineS3Code).
    let proxy = InlineS3Code::start(emu).await;
    let cli = Cli::local(&dir, proxy.endpoint());

    // The provider framework, AwsCustomResource, a raw custom resource.
    let stack = "CustomResourceProviderStack";
    let (first, took) = deploy(&cli, "custom-resource-provider", stack);
    eprintln!("custom-resource-provider: deployed in {took:.1} s");
    let engine_bucket = format!("stackflow-{ACCOUNT_ID}-{REGION}");
    assert!(
        first
            .stderr
            .contains(&format!("created s3://{engine_bucket}")),
        "{}",
        first.describe()
    );
    check_engine_bucket(&s3, &engine_bucket).await;
    let recorded = state(&cli, stack);
    let greeting = physical_id(&recorded, "GreetingParam3E268858");
    assert_eq!(ssm_value(&ssm, &greeting).await, "hello corpus");
    let copied = physical_id(&recorded, "CopiedValue3142369C");
    assert_eq!(ssm_value(&ssm, &copied).await, "source-value");
    let (again, _) = deploy(&cli, "custom-resource-provider", stack);
    assert!(again.stdout.contains("no changes"), "{}", again.describe());
    assert!(
        !again.stderr.contains("created s3://"),
        "{}",
        again.describe()
    );
    let started = Instant::now();
    ok(cli.run(&["destroy", "--stack", stack]));
    eprintln!(
        "custom-resource-provider: destroyed in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(ssm.get_parameter().name(&greeting).send().await.is_err());

    // Bucket auto-delete: the buckets hold objects (one versioned) at destroy time.
    let stack = "S3AutoDeleteObjectsStack";
    let (_, took) = deploy(&cli, "s3-autodelete-objects", stack);
    eprintln!("s3-autodelete-objects: deployed in {took:.1} s");
    let recorded = state(&cli, stack);
    let buckets = [
        physical_id(&recorded, "ScratchF72D2ED6"),
        physical_id(&recorded, "Scratch20B433269"),
    ];
    for bucket in &buckets {
        for key in ["a.txt", "dir/b.txt", "a.txt"] {
            s3.put_object()
                .bucket(bucket)
                .key(key)
                .body(key.as_bytes().to_vec().into())
                .send()
                .await
                .unwrap();
        }
    }
    let (again, _) = deploy(&cli, "s3-autodelete-objects", stack);
    assert!(again.stdout.contains("no changes"), "{}", again.describe());
    // The emulator refuses to delete a bucket that holds objects: the destroy below
    // succeeds only when CDK's handler emptied them first.
    let refused = s3.delete_bucket().bucket(&buckets[0]).send().await;
    assert!(refused.is_err(), "a bucket with objects is not deleted");
    let started = Instant::now();
    ok(cli.run(&["destroy", "--stack", stack]));
    eprintln!(
        "s3-autodelete-objects: destroyed in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    for bucket in &buckets {
        assert!(
            s3.head_bucket().bucket(bucket).send().await.is_err(),
            "{bucket} is gone, its objects deleted by CDK's handler"
        );
    }
}

/// stackflow's bucket as the first custom resource made it: encrypted, public access
/// blocked, the answers expiring after a day.
async fn check_engine_bucket(s3: &aws_sdk_s3::Client, bucket: &str) {
    let encryption = s3.get_bucket_encryption().bucket(bucket).send().await;
    assert!(encryption.is_ok(), "{encryption:?}");
    let block = s3
        .get_public_access_block()
        .bucket(bucket)
        .send()
        .await
        .unwrap();
    let block = block.public_access_block_configuration().unwrap();
    assert_eq!(block.block_public_acls(), Some(true));
    assert_eq!(block.restrict_public_buckets(), Some(true));
    let rules = s3
        .get_bucket_lifecycle_configuration()
        .bucket(bucket)
        .send()
        .await
        .unwrap();
    let responses = rules
        .rules()
        .iter()
        .find(|r| r.filter().and_then(|f| f.prefix()) == Some("custom-resource-responses/"));
    let days = responses
        .and_then(|r| r.expiration())
        .and_then(|e| e.days());
    assert_eq!(days, Some(1), "{rules:?}");
}
