//! Publishing file assets to S3: content-addressed (an object already there is not sent
//! again: the key is the source's hash), at most a bound of them at once, directories
//! zipped deterministically.
//!
//! Objects are published with the caller's credentials; a destination's `assumeRoleArn`
//! (the CDK bootstrap's file publishing role) is not assumed.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use aws_sdk_s3::error::ProvideErrorMetadata as _;
use aws_sdk_s3::primitives::ByteStream;
use aws_types::SdkConfig;
use stackflow_core::assets::{AssetManifest, Packaging, Placeholders, Retarget};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::zip::zip_directory;

/// How many objects are checked and uploaded at once by default.
pub const DEFAULT_PARALLEL: usize = 8;

/// One object to publish: a file asset's source and one destination, placeholders
/// substituted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileJob {
    /// The asset, as the CDK names it.
    pub asset: String,
    /// The file or directory.
    pub source: PathBuf,
    /// How it is packaged.
    pub packaging: Packaging,
    /// The destination bucket.
    pub bucket: String,
    /// The object key.
    pub key: String,
    /// The bucket's region.
    pub region: String,
    /// False for an object nothing deployed reads from S3 (a nested stack's template:
    /// stackflow reads it from the assembly): it is skipped when its bucket is missing.
    pub required: bool,
}

/// The objects of `manifest`'s file assets, placeholders substituted for `at` (each
/// destination in its own region when it names one), in stackflow's bucket when
/// `retarget` says so. `skip` leaves out sources that need no publishing (the stack's
/// own template: stackflow reads it from the assembly); `optional` sources are published
/// only where their bucket exists (nested stack templates). One job per bucket and key.
pub fn file_jobs(
    manifest: &AssetManifest,
    at: &Placeholders,
    retarget: Option<&Retarget>,
    skip: &[PathBuf],
    optional: &[PathBuf],
) -> Vec<FileJob> {
    let mut jobs: BTreeMap<(String, String), FileJob> = BTreeMap::new();
    for f in manifest.files.iter().filter(|f| !skip.contains(&f.path)) {
        for d in &f.destinations {
            let d = retarget.map_or_else(|| d.clone(), |r| r.destination(d));
            let here = at.in_region(d.region.as_deref());
            let job = FileJob {
                asset: f.display_name.clone(),
                source: f.path.clone(),
                packaging: f.packaging,
                bucket: here.substitute(&d.bucket_name),
                key: here.substitute(&d.object_key),
                region: here.region.clone(),
                required: !optional.contains(&f.path),
            };
            jobs.entry((job.bucket.clone(), job.key.clone()))
                .or_insert(job);
        }
    }
    jobs.into_values().collect()
}

/// What happened to one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Published {
    /// Uploaded, this many bytes.
    Uploaded(u64),
    /// Already there: nothing sent.
    AlreadyThere,
    /// Not published: an optional object whose bucket does not exist.
    NoBucket,
}

/// Told about each object as it is done, from several tasks at once.
pub type OnPublished = Arc<dyn Fn(&FileJob, &Published) + Send + Sync>;

/// What a publish did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PublishReport {
    /// Objects looked at.
    pub files: usize,
    /// Objects uploaded.
    pub uploaded: usize,
    /// Objects already there.
    pub already_there: usize,
    /// Optional objects left out: their bucket does not exist.
    pub no_bucket: usize,
    /// Bytes uploaded.
    pub bytes: u64,
    /// Wall time, in seconds.
    pub seconds: f64,
}

/// Why an asset could not be published.
#[derive(Debug, thiserror::Error)]
#[error("asset {asset} (s3://{bucket}/{key}): {message}")]
pub struct PublishError {
    pub asset: String,
    pub bucket: String,
    pub key: String,
    pub message: String,
}

impl PublishError {
    fn new(job: &FileJob, message: impl Into<String>) -> PublishError {
        PublishError {
            asset: job.asset.clone(),
            bucket: job.bucket.clone(),
            key: job.key.clone(),
            message: message.into(),
        }
    }
}

/// Publishes `jobs` with `config`'s credentials (an S3 client per region), at most
/// `parallel` at once; `on_done` hears of each. The first failure is returned once the
/// running ones have ended.
pub async fn publish_files(
    config: &SdkConfig,
    jobs: Vec<FileJob>,
    parallel: usize,
    on_done: OnPublished,
) -> Result<PublishReport, PublishError> {
    publish_files_with(&crate::aws::s3_client(config), jobs, parallel, on_done).await
}

/// [`publish_files`] with `home`, an S3 client of the jobs' home region (the clients of
/// other regions are made from its configuration).
pub async fn publish_files_with(
    home: &aws_sdk_s3::Client,
    jobs: Vec<FileJob>,
    parallel: usize,
    on_done: OnPublished,
) -> Result<PublishReport, PublishError> {
    let started = Instant::now();
    let mut clients: BTreeMap<String, aws_sdk_s3::Client> = BTreeMap::new();
    let gate = Arc::new(Semaphore::new(parallel.max(1)));
    let mut running = JoinSet::new();
    let mut report = PublishReport {
        files: jobs.len(),
        ..PublishReport::default()
    };
    for job in jobs {
        let s3 = clients
            .entry(job.region.clone())
            .or_insert_with(|| client_in(home, &job.region))
            .clone();
        let gate = gate.clone();
        let on_done = on_done.clone();
        running.spawn(async move {
            let _permit = gate.acquire_owned().await;
            let done = publish_one(&s3, &job).await?;
            on_done(&job, &done);
            Ok::<_, PublishError>(done)
        });
    }
    let mut failure = None;
    while let Some(joined) = running.join_next().await {
        match joined {
            Ok(Ok(Published::Uploaded(bytes))) => {
                report.uploaded += 1;
                report.bytes += bytes;
            }
            Ok(Ok(Published::AlreadyThere)) => report.already_there += 1,
            Ok(Ok(Published::NoBucket)) => report.no_bucket += 1,
            Ok(Err(e)) => {
                failure.get_or_insert(e);
            }
            Err(e) => {
                failure.get_or_insert(PublishError {
                    asset: String::new(),
                    bucket: String::new(),
                    key: String::new(),
                    message: format!("the upload task ended: {e}"),
                });
            }
        }
    }
    report.seconds = started.elapsed().as_secs_f64();
    match failure {
        Some(e) => Err(e),
        None => Ok(report),
    }
}

fn client_in(home: &aws_sdk_s3::Client, region: &str) -> aws_sdk_s3::Client {
    let config = home.config();
    if config.region().map(|r| r.as_ref()) == Some(region) {
        return home.clone();
    }
    aws_sdk_s3::Client::from_conf(
        config
            .to_builder()
            .region(aws_types::region::Region::new(region.to_string()))
            .build(),
    )
}

async fn publish_one(s3: &aws_sdk_s3::Client, job: &FileJob) -> Result<Published, PublishError> {
    if exists(s3, job).await? {
        return Ok(Published::AlreadyThere);
    }
    let (body, len, content_type) = match job.packaging {
        Packaging::ZipDirectory => {
            let dir = job.source.clone();
            let bytes = tokio::task::spawn_blocking(move || zip_directory(&dir))
                .await
                .map_err(|e| PublishError::new(job, format!("zipping stopped: {e}")))?
                .map_err(|e| PublishError::new(job, format!("cannot zip: {e}")))?;
            let len = bytes.len() as u64;
            (ByteStream::from(bytes), len, "application/zip")
        }
        Packaging::File => {
            let len = tokio::fs::metadata(&job.source)
                .await
                .map_err(|e| PublishError::new(job, format!("{}: {e}", job.source.display())))?
                .len();
            let body = ByteStream::from_path(&job.source)
                .await
                .map_err(|e| PublishError::new(job, format!("{}: {e}", job.source.display())))?;
            (body, len, content_type(&job.key))
        }
    };
    let sent = s3
        .put_object()
        .bucket(&job.bucket)
        .key(&job.key)
        .content_type(content_type)
        .body(body)
        .send()
        .await;
    match sent {
        Ok(_) => Ok(Published::Uploaded(len)),
        Err(e) if !job.required && e.code() == Some("NoSuchBucket") => Ok(Published::NoBucket),
        Err(e) => Err(PublishError::new(job, upload_failure(&e))),
    }
}

/// True when the object is already there (content-addressed: same key, same content).
async fn exists(s3: &aws_sdk_s3::Client, job: &FileJob) -> Result<bool, PublishError> {
    match s3
        .head_object()
        .bucket(&job.bucket)
        .key(&job.key)
        .send()
        .await
    {
        Ok(_) => Ok(true),
        Err(e) if e.raw_response().is_some_and(|r| r.status().as_u16() == 404) => Ok(false),
        Err(e) => Err(PublishError::new(
            job,
            format!(
                "cannot tell whether it is already there: {}",
                aws_sdk_s3::error::DisplayErrorContext(&e)
            ),
        )),
    }
}

fn upload_failure<E, R>(e: &aws_sdk_s3::error::SdkError<E, R>) -> String
where
    E: aws_sdk_s3::error::ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    if e.code() == Some("NoSuchBucket") {
        return "the bucket does not exist: run `cdk bootstrap`, or `stackflow bootstrap` to \
                keep assets in stackflow's own bucket"
            .to_string();
    }
    format!(
        "the upload failed: {}",
        aws_sdk_s3::error::DisplayErrorContext(e)
    )
}

fn content_type(key: &str) -> &'static str {
    match key.rsplit_once('.').map(|(_, ext)| ext) {
        Some("json") => "application/json",
        Some("zip") => "application/zip",
        Some("yaml" | "yml") => "application/yaml",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stackflow_core::assets::parse_asset_manifest;

    const CDK: &str = "cdk-hnb659fds-assets-${AWS::AccountId}-${AWS::Region}";

    fn manifest() -> AssetManifest {
        parse_asset_manifest(
            &serde_json::json!({"files": {
                "abc": {"displayName": "Fn/Code",
                        "source": {"path": "asset.abc", "packaging": "zip"},
                        "destinations": {
                            "a": {"bucketName": CDK, "objectKey": "abc.zip"},
                            "b": {"bucketName": CDK, "objectKey": "abc.zip"},
                            "c": {"bucketName": CDK, "objectKey": "abc.zip",
                                  "region": "eu-west-1"}}},
                "tpl": {"source": {"path": "Stack.template.json", "packaging": "file"},
                        "destinations": {"a": {"bucketName": CDK, "objectKey": "tpl.json"}}}
            }}),
            std::path::Path::new("/out"),
        )
        .unwrap()
    }

    fn at() -> Placeholders {
        Placeholders {
            account_id: "123456789012".into(),
            region: "us-east-1".into(),
        }
    }

    #[test]
    fn jobs_substitute_placeholders_per_region_and_are_one_per_object() {
        let jobs = file_jobs(&manifest(), &at(), None, &[], &[]);
        let objects: Vec<(String, String)> = jobs
            .iter()
            .map(|j| (j.bucket.clone(), j.key.clone()))
            .collect();
        assert_eq!(
            objects,
            [
                (
                    "cdk-hnb659fds-assets-123456789012-eu-west-1".into(),
                    "abc.zip".into()
                ),
                (
                    "cdk-hnb659fds-assets-123456789012-us-east-1".into(),
                    "abc.zip".into()
                ),
                (
                    "cdk-hnb659fds-assets-123456789012-us-east-1".into(),
                    "tpl.json".into()
                ),
            ]
        );
        assert_eq!(jobs[0].region, "eu-west-1");
        assert_eq!(jobs[0].asset, "Fn/Code");
        assert_eq!(jobs[0].packaging, Packaging::ZipDirectory);
        assert_eq!(jobs[0].source, PathBuf::from("/out/asset.abc"));
        assert!(jobs.iter().all(|j| j.required));
        let optional = [PathBuf::from("/out/Stack.template.json")];
        let jobs = file_jobs(&manifest(), &at(), None, &[], &optional);
        let required: Vec<bool> = jobs.iter().map(|j| j.required).collect();
        assert_eq!(required, [true, true, false]);
    }

    #[test]
    fn the_stacks_own_template_is_skipped_and_stackflow_storage_is_used_when_asked() {
        let m = manifest();
        let skip = [PathBuf::from("/out/Stack.template.json")];
        let r = Retarget::for_manifests([&m], &at());
        let jobs = file_jobs(&m, &at(), Some(&r), &skip, &[]);
        let objects: Vec<(&str, &str)> = jobs
            .iter()
            .map(|j| (j.bucket.as_str(), j.key.as_str()))
            .collect();
        assert_eq!(
            objects,
            [
                ("stackflow-123456789012-eu-west-1", "assets/abc.zip"),
                ("stackflow-123456789012-us-east-1", "assets/abc.zip"),
            ]
        );
    }

    #[test]
    fn content_types_follow_the_key() {
        assert_eq!(content_type("a/b.json"), "application/json");
        assert_eq!(content_type("x.zip"), "application/zip");
        assert_eq!(content_type("noext"), "application/octet-stream");
    }
}
