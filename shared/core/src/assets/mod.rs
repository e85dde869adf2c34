//! Cloud assembly assets: the asset manifest of a stack (files, directories to zip,
//! container images, and where each is published), its `${AWS::...}` placeholders, and
//! the rewrite of a template's asset references to stackflow's own bucket.

mod rewrite;

pub use crate::asset_manifest::{
    AssetManifest, AssetManifestError, FileAsset, FileDestination, ImageAsset, ImageDestination,
    Packaging, Placeholders, load_asset_manifest, parse_asset_manifest,
};
pub use rewrite::{
    ASSET_PREFIX, BucketMove, Retarget, STACKFLOW_BUCKET_PATTERN, is_cdk_asset_bucket,
    stackflow_bucket_name,
};
