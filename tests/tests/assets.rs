//! Assets of a cloud assembly, through the `stackflow` binary against the emulator: file
//! and directory assets (and a nested stack's template) published before the stack
//! deploys and never again while they are there, `stackflow bootstrap`, a region that
//! keeps assets in stackflow's own bucket after an import (seed 003), and the refusal of
//! a container image without a container engine before any AWS write. Each test works
//! in its own region, since a region's asset storage is shared by everything in it.
//!
//! The fixture (`tests/fixtures/assets`) is a cloud assembly shaped as the CDK writes
//! one; each test copies it with its names, asset ids and contents made unique, so that
//! a first publish really uploads even on an emulator that outlives the tests.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use stackflow_tests::drift_cli::{Session, root};
use stackflow_tests::emulator::ACCOUNT_ID;
use stackflow_tests::iam::role_policy_document;
use stackflow_tests::latency::{LatencyProxy, RequestRecord};
use stackflow_tests::{Emulator, unique_name};

/// The fixture copied to `<dir>/cdk.out`, every `__TOKEN__` made unique to this run.
fn assembly(dir: &Path) -> (PathBuf, Tokens) {
    let suffix = unique_name("a");
    let t = Tokens {
        zip: format!("zip{suffix}"),
        config: format!("config{suffix}"),
        nested: format!("nested{suffix}"),
        suffix,
    };
    let out = dir.join("cdk.out");
    copy(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/assets"),
        &out,
        &t,
    );
    (out, t)
}

#[derive(Debug, Clone)]
struct Tokens {
    suffix: String,
    zip: String,
    config: String,
    nested: String,
}

impl Tokens {
    fn apply(&self, text: &str) -> String {
        text.replace("__SUFFIX__", &self.suffix)
            .replace("__ZIP__", &self.zip)
            .replace("__CONFIG__", &self.config)
            .replace("__NESTED__", &self.nested)
            .replace("__TEMPLATE__", &format!("template{}", self.suffix))
    }
}

fn copy(from: &Path, to: &Path, t: &Tokens) {
    std::fs::create_dir_all(to).expect("fixture dir");
    for entry in std::fs::read_dir(from).expect("fixture") {
        let entry = entry.expect("fixture entry");
        let name = t.apply(&entry.file_name().to_string_lossy());
        if entry.path().is_dir() {
            copy(&entry.path(), &to.join(name), t);
        } else {
            let text = std::fs::read_to_string(entry.path()).expect("fixture file");
            std::fs::write(to.join(name), t.apply(&text)).expect("fixture copy");
        }
    }
}

fn cdk_bucket(region: &str) -> String {
    format!("cdk-hnb659fds-assets-{ACCOUNT_ID}-{region}")
}

fn stackflow_bucket(region: &str) -> String {
    format!("stackflow-{ACCOUNT_ID}-{region}")
}

/// An S3 client of the emulator in `region`.
async fn s3_in(emulator: &Emulator, region: &str) -> aws_sdk_s3::Client {
    let config = emulator
        .sdk_config()
        .await
        .to_builder()
        .region(aws_types::region::Region::new(region.to_string()))
        .build();
    stackflow_providers::aws::s3_client(&config)
}

/// The CDK bootstrap bucket of `region`, as `cdk bootstrap` leaves it.
async fn cdk_bootstrap(s3: &aws_sdk_s3::Client, region: &str) {
    use aws_sdk_s3::types::{BucketLocationConstraint, CreateBucketConfiguration};
    let created = s3
        .create_bucket()
        .bucket(cdk_bucket(region))
        .create_bucket_configuration(
            CreateBucketConfiguration::builder()
                .location_constraint(BucketLocationConstraint::from(region))
                .build(),
        )
        .send()
        .await;
    if let Err(e) = created {
        let text = format!("{}", aws_sdk_s3::error::DisplayErrorContext(&e));
        assert!(text.contains("BucketAlreadyOwnedByYou"), "{text}");
    }
}

async fn object(s3: &aws_sdk_s3::Client, bucket: &str, key: &str) -> Option<Vec<u8>> {
    let out = s3.get_object().bucket(bucket).key(key).send().await.ok()?;
    Some(out.body.collect().await.ok()?.into_bytes().to_vec())
}

/// Whether a request is an S3 call on an object of an asset bucket (`METHOD
/// /bucket/key`, path-style).
fn on_object(r: &RequestRecord, method: &str) -> bool {
    r.label
        .strip_prefix(method)
        .and_then(|path| path.strip_prefix(" /"))
        .and_then(|path| path.split_once('/'))
        .is_some_and(|(bucket, key)| {
            !key.is_empty()
                && (bucket.starts_with("cdk-hnb659fds-assets-") || bucket.starts_with("stackflow-"))
        })
}

/// The S3 object uploads among `log`.
fn puts(log: &[RequestRecord]) -> usize {
    log.iter().filter(|r| on_object(r, "PUT")).count()
}

fn heads(log: &[RequestRecord]) -> usize {
    log.iter().filter(|r| on_object(r, "HEAD")).count()
}

/// A session whose runs go through a recording proxy in front of the emulator.
async fn recorded(emulator: &Emulator, name: &str) -> (Session, LatencyProxy) {
    let proxy = LatencyProxy::start(emulator.endpoint(), Duration::ZERO)
        .await
        .expect("proxy");
    let mut session = Session::new(emulator, &root(env!("CARGO_TARGET_TMPDIR"), "assets"), name);
    session.cli.endpoint = proxy.endpoint();
    (session, proxy)
}

fn summary_line(stderr: &str) -> String {
    stderr
        .lines()
        .filter(|l| l.starts_with("assets of "))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread")]
async fn file_and_directory_assets_are_published_once_before_the_stack_deploys() {
    let emulator = Emulator::shared().await;
    let region = "eu-west-1";
    let s3 = s3_in(emulator, region).await;
    cdk_bootstrap(&s3, region).await;
    let (session, proxy) = recorded(emulator, "publish").await;
    let (out, t) = assembly(session.dir());
    let out = out.display().to_string();
    let deploy = ["deploy", &out, "--stack", "AssetsStack", "--region", region];

    let first = session.run(&deploy, 0);
    let log = proxy.log();
    eprintln!("first deploy: {}", summary_line(&first.stderr));
    assert_eq!(
        puts(&log),
        3,
        "the zip, the file and the nested template: {log:?}"
    );
    assert!(
        summary_line(&first.stderr).contains("3 file(s), 3 uploaded"),
        "{}",
        first.describe()
    );
    // Every upload comes before the first resource is made.
    let last_put = log
        .iter()
        .rposition(|r| on_object(r, "PUT"))
        .expect("a put");
    let first_create = log
        .iter()
        .position(|r| r.label.contains("CreateRole") || r.label.contains("PutParameter"))
        .expect("a create");
    assert!(last_put < first_create, "{log:?}");

    let bucket = cdk_bucket(region);
    let zip = object(&s3, &bucket, &format!("{}.zip", t.zip))
        .await
        .expect("the directory's zip");
    assert!(zip.starts_with(b"PK\x03\x04"));
    for name in ["index.js", "lib/greeting.js"] {
        assert!(
            zip.windows(name.len()).any(|w| w == name.as_bytes()),
            "{name} in the zip"
        );
    }
    let config = object(&s3, &bucket, &format!("{}.json", t.config))
        .await
        .expect("the file asset");
    assert!(String::from_utf8_lossy(&config).contains(&t.suffix));
    assert!(
        object(&s3, &bucket, &format!("{}.json", t.nested))
            .await
            .is_some()
    );
    // The stack's own template is read from the assembly, never published.
    let template_key = format!("template{}AssetsStack.json", t.suffix);
    assert!(object(&s3, &bucket, &template_key).await.is_none());

    // Nothing is uploaded again: each object is found where it is.
    proxy.reset();
    let again = session.run(&deploy, 0);
    let log = proxy.log();
    assert_eq!(puts(&log), 0, "{}", again.describe());
    assert_eq!(heads(&log), 3);
    assert!(
        summary_line(&again.stderr).contains("0 uploaded (0 B), 3 already there"),
        "{}",
        again.describe()
    );
    // The same zip again: a fresh copy of the same sources zips to the same bytes.
    let copy_dir = session.dir().join("again");
    copy(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/assets"),
        &copy_dir,
        &t,
    );
    let rezipped =
        stackflow_providers::assets::zip::zip_directory(&copy_dir.join(format!("asset.{}", t.zip)))
            .expect("zip");
    assert_eq!(rezipped, zip);

    session.run(
        &["destroy", "--stack", "AssetsStack", "--region", region],
        0,
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn bootstrap_makes_stackflows_bucket_once_in_each_region() {
    let emulator = Emulator::shared().await;
    let session = Session::new(
        emulator,
        &root(env!("CARGO_TARGET_TMPDIR"), "assets"),
        "bootstrap",
    );
    let regions = ["eu-central-1", "ap-south-1"];
    let first = session.run(
        &["bootstrap", "--region", regions[0], "--region", regions[1]],
        0,
    );
    for region in regions {
        let bucket = stackflow_bucket(region);
        assert!(
            first
                .stdout
                .contains(&format!("{region}: created {bucket}"))
                || first.stdout.contains(&format!("{region}: {bucket} ")),
            "{}",
            first.describe()
        );
        let s3 = s3_in(emulator, region).await;
        let encryption = s3
            .get_bucket_encryption()
            .bucket(&bucket)
            .send()
            .await
            .expect("encryption");
        let rules = encryption
            .server_side_encryption_configuration()
            .expect("a configuration")
            .rules();
        assert!(!rules.is_empty());
        let block = s3
            .get_public_access_block()
            .bucket(&bucket)
            .send()
            .await
            .expect("public access block");
        let c = block.public_access_block_configuration().expect("set");
        assert_eq!(
            [
                c.block_public_acls(),
                c.ignore_public_acls(),
                c.block_public_policy(),
                c.restrict_public_buckets()
            ],
            [Some(true); 4]
        );
        let lifecycle = s3
            .get_bucket_lifecycle_configuration()
            .bucket(&bucket)
            .send()
            .await
            .expect("lifecycle");
        let expiring: Vec<(String, Option<i32>)> = lifecycle
            .rules()
            .iter()
            .filter_map(|r| {
                let prefix = r.filter()?.prefix()?.to_string();
                Some((prefix, r.expiration().and_then(|e| e.days())))
            })
            .collect();
        for (prefix, days) in [
            ("custom-resource-responses/", 1),
            ("inputs/", 1),
            ("deploys/", 30),
        ] {
            assert!(
                expiring.contains(&(prefix.to_string(), Some(days))),
                "{prefix}: {expiring:?}"
            );
        }
        let tags = s3
            .get_bucket_tagging()
            .bucket(&bucket)
            .send()
            .await
            .expect("tags");
        assert!(
            tags.tag_set()
                .iter()
                .any(|t| t.key() == "stackflow:asset-storage" && t.value() == "stackflow")
        );
    }
    // Idempotent: nothing to change the second time.
    let again = session.run(&["bootstrap", "--region", regions[0]], 0);
    assert!(
        again
            .stdout
            .contains("is already bootstrapped, nothing changed"),
        "{}",
        again.describe()
    );
    // Several regions are for bootstrap only.
    let refused = session.run(
        &[
            "diff", "x.yaml", "--region", regions[0], "--region", regions[1],
        ],
        1,
    );
    assert!(
        refused.stderr.contains("give --region once"),
        "{}",
        refused.describe()
    );
}

fn args(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// The resources of a diff's JSON that would change, with their action.
fn changes(diff: &Value) -> Vec<(String, String)> {
    diff["stacks"][0]["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter(|r| r["action"] != "no-op")
        .map(|r| {
            (
                r["logicalId"].as_str().unwrap_or_default().to_string(),
                r["action"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn after_an_import_a_region_on_stackflow_storage_repoints_the_assets_on_the_first_deploy() {
    let emulator = Emulator::shared().await;
    let region = "eu-north-1";
    let s3 = s3_in(emulator, region).await;
    cdk_bootstrap(&s3, region).await;
    let (owner, _owner_proxy) = recorded(emulator, "cdk-owner").await;
    let (out, t) = assembly(owner.dir());
    let out = out.display().to_string();
    let stack = ["--stack", "AssetsAdoptStack", "--region", region];
    let with = |verb: &str| -> Vec<String> {
        [verb, out.as_str()]
            .iter()
            .chain(stack.iter())
            .map(|s| s.to_string())
            .collect()
    };
    // Deployed by another tool with the CDK bootstrap bucket; then the region opts into
    // stackflow's storage.
    owner.run(&args(&with("deploy")), 0);
    owner.run(&["bootstrap", "--region", region], 0);

    let (adopter, proxy) = recorded(emulator, "adopter").await;
    let import = adopter.run(&args(&with("import")), 0);
    assert!(
        import.stderr.contains("info: 3 asset reference(s)"),
        "{}",
        import.describe()
    );
    assert_eq!(
        import.stderr.matches("info:").count(),
        1,
        "{}",
        import.describe()
    );
    // The recorded values are the CDK bucket's, as the resources hold them.
    let state = adopter
        .json(
            &[
                "state",
                "show",
                "--stack",
                "AssetsAdoptStack",
                "--region",
                region,
            ],
            0,
        )
        .to_string();
    assert!(
        state.contains(&cdk_bucket(region))
            || state.contains("cdk-hnb659fds-assets-${AWS::AccountId}")
    );

    let mut diff = with("diff");
    diff.push("--json".into());
    let diff = adopter.run(&args(&diff), 0);
    let plan: Value = serde_json::from_str(&diff.stdout).expect("diff JSON");
    let mut changed = changes(&plan);
    changed.sort();
    assert_eq!(
        changed,
        [
            ("ConfigLocation".to_string(), "update".to_string()),
            ("Handler".to_string(), "update".to_string()),
            ("HandlerRole".to_string(), "update".to_string()),
        ],
        "{}",
        diff.stdout
    );

    proxy.reset();
    let deploy = adopter.run(&args(&with("deploy")), 0);
    assert_eq!(puts(&proxy.log()), 2, "{}", deploy.describe());
    let bucket = stackflow_bucket(region);
    assert!(
        object(&s3, &bucket, &format!("assets/{}.zip", t.zip))
            .await
            .is_some()
    );
    let ssm_config = emulator
        .sdk_config()
        .await
        .to_builder()
        .region(aws_types::region::Region::new(region))
        .build();
    let ssm = aws_sdk_ssm::Client::new(&ssm_config);
    let value = ssm
        .get_parameter()
        .name(format!("/adopt/{}/config", t.suffix))
        .send()
        .await
        .expect("the parameter")
        .parameter
        .and_then(|p| p.value)
        .unwrap_or_default();
    assert_eq!(value, format!("s3://{bucket}/assets/{}.json", t.config));
    let iam = aws_sdk_iam::Client::new(&ssm_config);
    let document =
        role_policy_document(&iam, &format!("adopt-role-{}", t.suffix), "ReadAssets").await;
    assert!(
        document.contains(&format!("{bucket}/assets/*")),
        "{document}"
    );
    assert!(!document.contains("cdk-hnb659fds-assets"), "{document}");

    // Repointed: nothing left to change.
    adopter.run(&args(&[with("diff"), vec!["--fail".into()]].concat()), 0);
    // The CDK bucket on request: the references go back.
    let mut keep = with("diff");
    keep.extend(["--use-cdk-bootstrap-assets".into(), "--fail".into()]);
    adopter.run(&args(&keep), 1);
    adopter.run(
        &["destroy", "--stack", "AssetsAdoptStack", "--region", region],
        0,
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_container_image_without_a_container_engine_is_refused_before_any_write() {
    let emulator = Emulator::shared().await;
    let region = "eu-west-3";
    let (session, proxy) = recorded(emulator, "image").await;
    let (out, _) = assembly(session.dir());
    let manifest = out.join("AssetsAdoptStack.assets.json");
    let mut m: Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest).expect("manifest")).expect("json");
    m["dockerImages"] = serde_json::json!({"img1": {
        "displayName": "Service/Image",
        "source": {"directory": "asset.img1"},
        "destinations": {"d": {
            "repositoryName": "cdk-hnb659fds-container-assets-${AWS::AccountId}-${AWS::Region}",
            "imageTag": "img1"}}}});
    std::fs::write(&manifest, m.to_string()).expect("manifest written");
    let out = out.display().to_string();
    let empty_path = session.dir().join("no-engines");
    std::fs::create_dir_all(&empty_path).expect("dir");
    let run = session
        .cli
        .command(&[
            "deploy",
            &out,
            "--stack",
            "AssetsAdoptStack",
            "--region",
            region,
        ])
        .env("PATH", &empty_path)
        .output()
        .expect("stackflow runs");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("container image asset Service/Image"),
        "{stderr}"
    );
    assert!(stderr.contains("STACKFLOW_CONTAINER_CLI"), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{ACCOUNT_ID}.dkr.ecr.{region}.amazonaws.com/cdk-hnb659fds-container-assets-{ACCOUNT_ID}-{region}:img1"
        )),
        "{stderr}"
    );
    // Only reads reached AWS: who the caller is, and where the region keeps assets.
    let log = proxy.log();
    assert!(
        log.iter()
            .all(|r| r.label == "GetCallerIdentity" || r.label.starts_with("GET /")),
        "{log:?}"
    );
}

/// Issue 23 item 4: an asset that leads out of the cloud assembly (a file asset that is a
/// link to a file beside it, a link inside a zipped directory) is refused naming it,
/// before any AWS call: nothing of the file is uploaded.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread")]
async fn an_asset_that_leads_out_of_the_assembly_is_refused_before_any_call() {
    use std::os::unix::fs::symlink;
    let emulator = Emulator::shared().await;
    // A bootstrapped region of its own: before the fix, the file went up there.
    let region = "ap-southeast-2";
    let s3 = s3_in(emulator, region).await;
    cdk_bootstrap(&s3, region).await;
    let (session, proxy) = recorded(emulator, "confined").await;
    let secret = session.dir().join("id_rsa");
    std::fs::write(&secret, "private key, never uploaded").expect("secret");
    for escape in ["file", "zip"] {
        let (out, t) = assembly(&session.dir().join(escape));
        match escape {
            "file" => {
                let config = out.join(format!("config.{}.json", t.config));
                std::fs::remove_file(&config).expect("config asset");
                symlink(&secret, &config).expect("link");
            }
            _ => symlink(&secret, out.join(format!("asset.{}", t.zip)).join("key")).expect("link"),
        }
        let shown = out.display().to_string();
        let run = session.cli.run(&["deploy", &shown, "--region", region]);
        assert_ne!(run.code, Some(0), "{}", run.describe());
        assert!(
            run.stderr.contains("id_rsa") && run.stderr.contains("outside"),
            "{escape}: names the link and where it leads: {}",
            run.describe()
        );
        let log = proxy.log();
        assert_eq!(puts(&log), 0, "{escape}: {log:?}");
    }
    let listed = s3
        .list_objects_v2()
        .bucket(cdk_bucket(region))
        .send()
        .await
        .expect("list");
    for o in listed.contents() {
        let body = object(&s3, &cdk_bucket(region), o.key().unwrap_or_default()).await;
        let text = String::from_utf8_lossy(&body.unwrap_or_default()).to_string();
        assert!(
            !text.contains("private key"),
            "{:?} holds the file",
            o.key()
        );
    }
}

/// Every corpus case with assets (Lambda code directories, nested stack templates):
/// published into a new bucket (so that a first publish uploads even on an emulator
/// that outlives the tests), then again with nothing sent. Prints the upload time and
/// bytes per case.
#[tokio::test(flavor = "multi_thread")]
async fn the_corpus_assets_are_published_once() {
    use stackflow_core::assets::{Placeholders, load_asset_manifest};
    use stackflow_core::template::load_path;
    use stackflow_providers::assets::publish::{file_jobs, publish_files};
    let emulator = Emulator::shared().await;
    let config = emulator.sdk_config().await;
    let s3 = stackflow_providers::aws::s3_client(&config);
    let bucket = unique_name("corpus-assets");
    s3.create_bucket()
        .bucket(&bucket)
        .send()
        .await
        .expect("bucket");
    let at = Placeholders {
        account_id: ACCOUNT_ID.into(),
        region: "us-east-1".into(),
    };
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/corpus");
    let (mut files, mut bytes, mut seconds) = (0, 0, 0.0);
    for case in [
        "custom-resource-provider",
        "s3-autodelete-objects",
        "language-extensions",
        "nested-stack",
    ] {
        for stack in load_path(&corpus.join(case)).expect("case") {
            let manifest =
                load_asset_manifest(stack.assets.as_ref().expect("assets")).expect("manifest");
            let jobs: Vec<_> =
                file_jobs(&manifest, &at, None, std::slice::from_ref(&stack.file), &[])
                    .into_iter()
                    .map(|mut j| {
                        j.bucket = bucket.clone();
                        j
                    })
                    .collect();
            assert!(!jobs.is_empty(), "{case}");
            let quiet = std::sync::Arc::new(|_: &_, _: &_| {});
            let first = publish_files(&config, jobs.clone(), 8, quiet.clone())
                .await
                .expect("publish");
            assert_eq!(first.uploaded, jobs.len(), "{case}");
            let again = publish_files(&config, jobs, 8, quiet).await.expect("again");
            assert_eq!((again.uploaded, again.bytes), (0, 0), "{case}");
            assert_eq!(again.already_there, first.files);
            eprintln!(
                "corpus {case}/{}: {} file(s), {} bytes in {:.3} s; again: 0 uploaded in {:.3} s",
                stack.name, first.uploaded, first.bytes, first.seconds, again.seconds
            );
            files += first.uploaded;
            bytes += first.bytes;
            seconds += first.seconds;
        }
    }
    eprintln!("corpus assets: {files} file(s), {bytes} bytes, {seconds:.3} s");
    assert!(files >= 6);
}

/// Nested stack templates are published where their bucket exists; stackflow reads them
/// from the assembly, so a region with no bootstrap bucket still goes on to deploy the
/// stack. (Whether the corpus case then deploys on the emulator is the corpus suite's
/// concern: here the deploy must only start.)
#[tokio::test(flavor = "multi_thread")]
async fn nested_stack_templates_need_no_bucket() {
    let emulator = Emulator::shared().await;
    let region = "ca-central-1";
    let (session, proxy) = recorded(emulator, "nested").await;
    let out = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/corpus/nested-stack")
        .display()
        .to_string();
    let deploy = session.cli.run(&["deploy", &out, "--region", region]);
    assert!(
        deploy
            .stderr
            .contains("note: 2 nested stack template(s) of NestedParentStack not published"),
        "{}",
        deploy.describe()
    );
    assert!(
        deploy
            .stderr
            .contains("deploy NestedParentStack: 4 actions"),
        "{}",
        deploy.describe()
    );
    // The note above already says both uploads were tried and refused (a template is
    // counted as not published only on the PUT's NoSuchBucket); the proxy logs a request
    // once its head is through, so both are there even when the emulator answers before
    // the body (and a PUT the SDK sent again after the emulator closed on it counts
    // twice). What must not happen is an upload that succeeded.
    let log = proxy.log();
    assert!(puts(&log) >= 2, "both tried, and refused: {log:?}");
    assert!(
        !deploy.stderr.contains("  uploaded "),
        "{}",
        deploy.describe()
    );
    session.run(
        &[
            "destroy",
            "--stack",
            "NestedParentStack",
            "--region",
            region,
        ],
        0,
    );
}
