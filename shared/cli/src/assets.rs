//! A cloud assembly's assets on the command line: where the region keeps them (the CDK
//! bootstrap bucket, or stackflow's own bucket with the templates' references rewritten),
//! the refusal of what cannot be published, and the publishing of each stack's assets
//! before it deploys, with progress on stderr.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context as _, bail};
use aws_types::SdkConfig;
use indexmap::IndexMap;
use stackflow_core::assets::{
    AssetManifest, Placeholders, Retarget, load_asset_manifest, stackflow_bucket_name,
};
use stackflow_core::template::{StackTemplate, nested_files};
use stackflow_providers::assets::bucket::{AssetStorage, asset_storage};
use stackflow_providers::assets::container::{
    ImageJob, check_images, container_cli_here, image_jobs, publish_images,
};
use stackflow_providers::assets::publish::{
    DEFAULT_PARALLEL, FileJob, OnPublished, Published, file_jobs, publish_files,
};

/// The stacks' assets and where they go.
pub struct Assets {
    config: SdkConfig,
    at: Option<Placeholders>,
    /// Stack name to its manifest.
    manifests: IndexMap<String, AssetManifest>,
    /// Stack name to its own template file (never published: stackflow reads it).
    templates: IndexMap<String, PathBuf>,
    /// Stack name to its nested stacks' template files (published where the bucket
    /// exists; stackflow reads them from the assembly).
    nested: IndexMap<String, Vec<PathBuf>>,
    /// Set when the region keeps assets in stackflow's bucket.
    retarget: Option<Retarget>,
    container_cli: Option<String>,
}

/// `--use-cdk-bootstrap-assets`, or `stackflow.useCdkBootstrapAssets` in the context of the
/// app's `cdk.json` (beside the cloud assembly, or in the working directory).
pub fn use_cdk_bootstrap_assets(flag: bool, assembly: &Path) -> bool {
    if flag {
        return true;
    }
    let beside = assembly.parent().map(|p| p.join("cdk.json"));
    beside
        .into_iter()
        .chain([PathBuf::from("cdk.json")])
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .filter_map(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .any(|cdk| {
            let context = &cdk["context"];
            [
                &context["stackflow"]["useCdkBootstrapAssets"],
                &context["stackflow.useCdkBootstrapAssets"],
                &context["stackflow:useCdkBootstrapAssets"],
            ]
            .iter()
            .any(|v| v.as_bool() == Some(true) || v.as_str() == Some("true"))
        })
}

impl Assets {
    /// Reads the asset manifests of `stacks` and decides where their assets go: the CDK
    /// bootstrap bucket when `use_cdk` says so or when the region did not opt into
    /// stackflow's storage (`stackflow bootstrap`), else stackflow's bucket.
    pub async fn prepare(
        config: &SdkConfig,
        region: &str,
        account_id: Option<&str>,
        stacks: &[StackTemplate],
        use_cdk: bool,
    ) -> anyhow::Result<Assets> {
        let mut manifests = IndexMap::new();
        let mut templates = IndexMap::new();
        let mut nested = IndexMap::new();
        for s in stacks {
            if let Some(file) = &s.assets {
                let m = load_asset_manifest(file)?;
                manifests.insert(s.name.clone(), m);
                templates.insert(s.name.clone(), s.file.clone());
                nested.insert(s.name.clone(), nested_files(&s.nested));
            }
        }
        let has_assets = manifests
            .values()
            .any(|m| !m.files.is_empty() || !m.images.is_empty());
        let mut assets = Assets {
            config: config.clone(),
            at: None,
            manifests,
            templates,
            nested,
            retarget: None,
            container_cli: container_cli_here(),
        };
        if !has_assets {
            return Ok(assets);
        }
        let Some(account_id) = account_id else {
            bail!(
                "the AWS account is unknown, so the assets' destinations cannot be named: \
                 check the credentials"
            );
        };
        let at = Placeholders {
            account_id: account_id.to_string(),
            region: region.to_string(),
        };
        if !use_cdk {
            let s3 = stackflow_providers::aws::s3_client(config);
            let bucket = stackflow_bucket_name(account_id, region);
            if asset_storage(&s3, &bucket)
                .await
                .map_err(anyhow::Error::msg)?
                == Some(AssetStorage::Stackflow)
            {
                assets.retarget = Some(Retarget::for_manifests(assets.manifests.values(), &at));
            }
        }
        assets.at = Some(at);
        Ok(assets)
    }

    /// Fails when an asset cannot be published (a container image without a container
    /// engine, or made by a command), naming each and what it needs: a deploy calls it
    /// before anything is written to AWS.
    pub fn check(&self) -> anyhow::Result<()> {
        let Some(at) = &self.at else {
            return Ok(());
        };
        let images: Vec<ImageJob> = self
            .manifests
            .values()
            .flat_map(|m| image_jobs(m, at))
            .collect();
        check_images(&images, self.container_cli.as_deref()).map_err(anyhow::Error::msg)
    }

    /// The rewrite of asset references, when the region keeps assets in stackflow's
    /// bucket.
    pub fn retarget(&self) -> Option<&Retarget> {
        self.retarget.as_ref().filter(|r| !r.is_empty())
    }

    /// Points the stacks' asset references at stackflow's bucket when the region keeps
    /// them there; returns the positions changed.
    pub fn rewrite(&self, stacks: &mut [StackTemplate]) -> Vec<String> {
        let Some(r) = self.retarget() else {
            return Vec::new();
        };
        stacks
            .iter_mut()
            .flat_map(|s| {
                r.stack(s)
                    .into_iter()
                    .map(|p| format!("{}/{p}", s.name))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Publishes the assets of stack `name` (images first, then files), saying on stderr
    /// what was sent.
    pub async fn publish(&self, name: &str) -> anyhow::Result<()> {
        let (Some(manifest), Some(at)) = (self.manifests.get(name), &self.at) else {
            return Ok(());
        };
        let images = image_jobs(manifest, at);
        if let Some(cli) = &self.container_cli
            && !images.is_empty()
        {
            eprintln!(
                "assets of {name}: {} container image(s) with {cli}",
                images.len()
            );
            publish_images(cli, &images)
                .await
                .map_err(anyhow::Error::msg)?;
        }
        let skip: Vec<PathBuf> = self.templates.get(name).cloned().into_iter().collect();
        let optional = self.nested.get(name).cloned().unwrap_or_default();
        let jobs = file_jobs(manifest, at, self.retarget.as_ref(), &skip, &optional);
        if jobs.is_empty() {
            return Ok(());
        }
        let report = publish_files(&self.config, jobs, DEFAULT_PARALLEL, print_each())
            .await
            .with_context(|| format!("publishing the assets of stack {name}"))?;
        eprintln!(
            "assets of {name}: {} file(s), {} uploaded ({}), {} already there, in {:.2} s",
            report.files,
            report.uploaded,
            show_bytes(report.bytes),
            report.already_there,
            report.seconds
        );
        if report.no_bucket > 0 {
            eprintln!(
                "note: {} nested stack template(s) of {name} not published: their bucket does \
                 not exist (stackflow reads them from the assembly; `cdk bootstrap` or \
                 `stackflow bootstrap` makes one)",
                report.no_bucket
            );
        }
        Ok(())
    }
}

fn print_each() -> OnPublished {
    Arc::new(|job: &FileJob, done: &Published| {
        if let Published::Uploaded(bytes) = done {
            eprintln!(
                "  uploaded {} ({}) to s3://{}/{}",
                job.asset,
                show_bytes(*bytes),
                job.bucket,
                job.key
            );
        }
    })
}

/// A byte count as a person reads it.
pub fn show_bytes(n: u64) -> String {
    if n < 1024 {
        format!("{n} B")
    } else if n < 1024 * 1024 {
        format!("{:.1} KiB", n as f64 / 1024.0)
    } else {
        format!("{:.1} MiB", n as f64 / (1024.0 * 1024.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cdk_json_context_keeps_the_cdk_bucket() {
        let dir = std::env::temp_dir().join(format!("stackflow-cdkjson-{}", std::process::id()));
        let out = dir.join("cdk.out");
        std::fs::create_dir_all(&out).unwrap();
        assert!(!use_cdk_bootstrap_assets(false, &out));
        assert!(use_cdk_bootstrap_assets(true, &out));
        std::fs::write(
            dir.join("cdk.json"),
            r#"{"app": "x", "context": {"stackflow": {"useCdkBootstrapAssets": true}}}"#,
        )
        .unwrap();
        assert!(use_cdk_bootstrap_assets(false, &out));
        std::fs::write(
            dir.join("cdk.json"),
            r#"{"context": {"stackflow:useCdkBootstrapAssets": "false"}}"#,
        )
        .unwrap();
        assert!(!use_cdk_bootstrap_assets(false, &out));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bytes_read_well() {
        assert_eq!(show_bytes(12), "12 B");
        assert_eq!(show_bytes(2048), "2.0 KiB");
        assert_eq!(show_bytes(3 * 1024 * 1024), "3.0 MiB");
    }
}
