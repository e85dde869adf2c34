//! A CDK app bound to an account and region, deployed with the `stackflow` binary to a
//! region that keeps assets in stackflow's own bucket (`stackflow bootstrap`), against the
//! emulator. Such an app's asset manifest and template name the CDK bootstrap bucket
//! written out (`cdk-hnb659fds-assets-<account>-<region>`), not with placeholders: every
//! location must come out naming stackflow's bucket by name, in every form the template
//! holds it, and each is read back through the AWS APIs:
//!
//! - a Lambda layer's `Content.S3Bucket` (through Cloud Control): the layer's `CodeSha256`
//!   is the SHA-256 of the zip uploaded to stackflow's bucket;
//! - a state machine's `DefinitionS3Location` (through Cloud Control): its definition is
//!   the text of the object uploaded to stackflow's bucket;
//! - an IAM grant on the asset bucket (`Fn::Join` of `arn:`, the partition and a text that
//!   holds the bucket): the role's policy names stackflow's bucket under `assets/`;
//! - outputs that name the bucket and an object's URL: printed by name, no `${...}`.
//!
//! The CDK bucket does not exist in the region, so nothing could have been read from it.
//! The test works in a region of its own (asset storage is per region).

use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use stackflow_tests::drift_cli::{Session, root};
use stackflow_tests::emulator::ACCOUNT_ID;
use stackflow_tests::iam::role_policy_document;
use stackflow_tests::{Emulator, unique_name};

const REGION: &str = "ap-northeast-2";
const STACK: &str = "BoundStack";

fn cdk_bucket() -> String {
    format!("cdk-hnb659fds-assets-{ACCOUNT_ID}-{REGION}")
}

fn stackflow_bucket() -> String {
    format!("stackflow-{ACCOUNT_ID}-{REGION}")
}

/// A content hash for an asset of this run.
fn hash(what: &str, suffix: &str) -> String {
    format!("{:x}", Sha256::digest(format!("{what}-{suffix}")))
}

/// The names of one run's assembly.
struct Names {
    suffix: String,
    layer_key: String,
    definition_key: String,
    definition: String,
}

impl Names {
    fn new() -> Names {
        let suffix = unique_name("b");
        Names {
            layer_key: format!("{}.zip", hash("layer", &suffix)),
            definition_key: format!("{}.json", hash("definition", &suffix)),
            definition: json!({"StartAt": "Done",
                "States": {"Done": {"Type": "Pass", "Result": suffix, "End": true}}})
            .to_string(),
            suffix,
        }
    }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("directory");
    std::fs::write(path, text).expect("written");
}

/// A cloud assembly as the CDK writes one for a stack bound to the emulator's account and
/// `REGION`, in `<dir>/cdk.out`.
fn assembly(dir: &Path, n: &Names) -> PathBuf {
    let out = dir.join("cdk.out");
    let bucket = cdk_bucket();
    let role = format!(
        "arn:aws:iam::{ACCOUNT_ID}:role/cdk-hnb659fds-file-publishing-role-{ACCOUNT_ID}-{REGION}"
    );
    let destination = |key: &str| {
        json!({"d": {"bucketName": bucket, "objectKey": key, "region": REGION,
            "assumeRoleArn": role}})
    };
    let layer_dir = format!("asset.{}", hash("layer", &n.suffix));
    let definition_file = format!("asset.{}", n.definition_key);
    write(
        &out.join(&layer_dir).join("python/greet.py"),
        &format!("GREETING = '{}'\n", n.suffix),
    );
    write(&out.join(&definition_file), &n.definition);
    let assets = json!({"version": "55.0.0", "dockerImages": {}, "files": {
        "layer": {"displayName": "Layer/Code",
            "source": {"path": layer_dir, "packaging": "zip"},
            "destinations": destination(&n.layer_key)},
        "definition": {"displayName": "Machine/Definition",
            "source": {"path": definition_file, "packaging": "file"},
            "destinations": destination(&n.definition_key)}
    }});
    write(
        &out.join(format!("{STACK}.assets.json")),
        &assets.to_string(),
    );
    let join = |text: String| json!({"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, text]]});
    let template = json!({
        "Resources": {
            "Layer": {"Type": "AWS::Lambda::LayerVersion", "Properties": {
                "LayerName": format!("bound-layer-{}", n.suffix),
                "CompatibleRuntimes": ["python3.12"],
                "Content": {"S3Bucket": bucket, "S3Key": n.layer_key}}},
            "MachineRole": {"Type": "AWS::IAM::Role", "Properties": {
                "RoleName": format!("bound-machine-{}", n.suffix),
                "AssumeRolePolicyDocument": {"Version": "2012-10-17", "Statement": [{
                    "Effect": "Allow", "Action": "sts:AssumeRole",
                    "Principal": {"Service": "states.amazonaws.com"}}]}}},
            "ReadAssets": {"Type": "AWS::IAM::Policy", "Properties": {
                "PolicyName": "ReadAssets",
                "Roles": [{"Ref": "MachineRole"}],
                "PolicyDocument": {"Version": "2012-10-17", "Statement": [{
                    "Effect": "Allow",
                    "Action": ["s3:GetObject*", "s3:GetBucket*", "s3:List*"],
                    "Resource": [join(format!(":s3:::{bucket}")),
                                 join(format!(":s3:::{bucket}/*"))]}]}}},
            "Machine": {"Type": "AWS::StepFunctions::StateMachine",
                "DependsOn": ["ReadAssets"],
                "Properties": {
                    "StateMachineName": format!("bound-machine-{}", n.suffix),
                    "RoleArn": {"Fn::GetAtt": ["MachineRole", "Arn"]},
                    "DefinitionS3Location": {"Bucket": bucket, "Key": n.definition_key}}}
        },
        "Outputs": {
            "ConfigBucket": {"Value": bucket},
            "DefinitionUrl": {"Value": format!("s3://{bucket}/{}", n.definition_key)},
            "LayerVersion": {"Value": {"Ref": "Layer"}}
        }
    });
    write(
        &out.join(format!("{STACK}.template.json")),
        &serde_json::to_string_pretty(&template).expect("template"),
    );
    let manifest = json!({"version": "55.0.0", "artifacts": {
        format!("{STACK}.assets"): {"type": "cdk:asset-manifest",
            "properties": {"file": format!("{STACK}.assets.json"),
                           "requiresBootstrapStackVersion": 6}},
        STACK: {"type": "aws:cloudformation:stack",
            "environment": format!("aws://{ACCOUNT_ID}/{REGION}"),
            "properties": {"templateFile": format!("{STACK}.template.json")},
            "dependencies": [format!("{STACK}.assets")]}
    }});
    write(&out.join("manifest.json"), &manifest.to_string());
    out
}

async fn config(emulator: &Emulator) -> aws_types::SdkConfig {
    emulator
        .sdk_config()
        .await
        .to_builder()
        .region(aws_types::region::Region::new(REGION))
        .build()
}

/// The object `key` of stackflow's bucket (under `assets/`).
async fn uploaded(s3: &aws_sdk_s3::Client, key: &str) -> Vec<u8> {
    let out = s3
        .get_object()
        .bucket(stackflow_bucket())
        .key(format!("assets/{key}"))
        .send()
        .await
        .unwrap_or_else(|e| {
            panic!(
                "assets/{key}: {}",
                aws_sdk_s3::error::DisplayErrorContext(&e)
            )
        });
    out.body
        .collect()
        .await
        .expect("body")
        .into_bytes()
        .to_vec()
}

/// The layer `version` holds the zip uploaded to stackflow's bucket.
async fn layer_holds_the_upload(
    lambda: &aws_sdk_lambda::Client,
    s3: &aws_sdk_s3::Client,
    version: &str,
    n: &Names,
) {
    let zip = uploaded(s3, &n.layer_key).await;
    let layer = lambda
        .get_layer_version_by_arn()
        .arn(version)
        .send()
        .await
        .expect("the layer version");
    let content = layer.content().expect("content");
    let sha = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(&zip));
    assert_eq!(content.code_sha256(), Some(sha.as_str()));
    assert_eq!(content.code_size(), zip.len() as i64);
}

/// The state machine's definition is the object uploaded to stackflow's bucket.
async fn machine_holds_the_upload(sfn: &aws_sdk_sfn::Client, s3: &aws_sdk_s3::Client, n: &Names) {
    let definition = uploaded(s3, &n.definition_key).await;
    assert_eq!(String::from_utf8_lossy(&definition), n.definition);
    let machine = sfn
        .describe_state_machine()
        .state_machine_arn(format!(
            "arn:aws:states:{REGION}:{ACCOUNT_ID}:stateMachine:bound-machine-{}",
            n.suffix
        ))
        .send()
        .await
        .expect("the state machine");
    let got: Value = serde_json::from_str(machine.definition()).expect("ASL");
    let want: Value = serde_json::from_str(&n.definition).expect("ASL");
    assert_eq!(got, want);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_account_bound_apps_asset_locations_name_the_bucket_the_objects_went_to() {
    let emulator = Emulator::shared().await;
    let config = config(emulator).await;
    let s3 = stackflow_providers::aws::s3_client(&config);
    let session = Session::new(
        emulator,
        &root(env!("CARGO_TARGET_TMPDIR"), "assets_bound"),
        "bound",
    );
    session.run(&["bootstrap", "--region", REGION], 0);
    let n = Names::new();
    let out = assembly(session.dir(), &n).display().to_string();

    let deployed = session.json(&["deploy", &out, "--region", REGION], 0);
    let text = deployed.to_string();
    assert!(!text.contains("${"), "{text}");
    let outputs = &deployed["stacks"][0]["outputs"];
    let ours = stackflow_bucket();
    assert_eq!(outputs["ConfigBucket"], json!(ours), "{deployed:#}");
    assert_eq!(
        outputs["DefinitionUrl"],
        json!(format!("s3://{ours}/assets/{}", n.definition_key))
    );
    // Nothing could have come from the CDK bucket: it does not exist here.
    assert!(s3.head_bucket().bucket(cdk_bucket()).send().await.is_err());

    let lambda = aws_sdk_lambda::Client::new(&config);
    let version = outputs["LayerVersion"].as_str().expect("the layer's ARN");
    layer_holds_the_upload(&lambda, &s3, version, &n).await;
    machine_holds_the_upload(&aws_sdk_sfn::Client::new(&config), &s3, &n).await;

    // The grant names stackflow's bucket, objects under assets/ only.
    let iam = aws_sdk_iam::Client::new(&config);
    let role = format!("bound-machine-{}", n.suffix);
    let document: Value =
        serde_json::from_str(&role_policy_document(&iam, &role, "ReadAssets").await)
            .expect("policy JSON");
    assert_eq!(
        document["Statement"][0]["Resource"],
        json!([
            format!("arn:aws:s3:::{ours}"),
            format!("arn:aws:s3:::{ours}/assets/*")
        ])
    );

    // The records name stackflow's bucket too; a second deploy has nothing to do.
    let state = session
        .json(&["state", "show", "--stack", STACK, "--region", REGION], 0)
        .to_string();
    assert!(
        !state.contains("cdk-hnb659fds") && !state.contains("${AWS::"),
        "{state}"
    );
    let again = session.run(&["deploy", &out, "--region", REGION], 0);
    assert!(again.stdout.contains("no changes"), "{}", again.describe());
    session.run(&["destroy", "--stack", STACK, "--region", REGION], 0);
    assert!(
        lambda
            .get_layer_version_by_arn()
            .arn(version)
            .send()
            .await
            .is_err(),
        "the layer version is gone"
    );
}
