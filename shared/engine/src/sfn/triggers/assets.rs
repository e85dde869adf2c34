//! The file assets of a zipped `cdk.out` a trigger deploys: published (content-addressed,
//! at most [`PARALLEL`] at once) to the destinations its asset manifest names, before the
//! execution starts, as `stackflow deploy` does before a stack's first resource. Nested
//! stack templates are optional (the engine reads them from the input). Container image
//! assets need a container engine, which a Lambda function does not have: a stack with any
//! is refused, naming them.

use std::sync::Arc;

use stackflow_core::assets::{Placeholders, load_asset_manifest};
use stackflow_core::template::{StackTemplate, nested_files};
use stackflow_providers::assets::publish::{file_jobs, publish_files_with};

use super::super::errors::{ErrorKind, TaskError};

/// At most this many uploads at once.
pub const PARALLEL: usize = 8;

/// Publishes the file assets of `stack` (read from a `cdk.out`) to account `account` in
/// `region`, with `s3` (a client of `region`). Nothing to do for a template alone.
pub async fn publish(
    s3: &aws_sdk_s3::Client,
    stack: &StackTemplate,
    account: Option<&str>,
    region: &str,
) -> Result<usize, TaskError> {
    let Some(path) = &stack.assets else {
        return Ok(0);
    };
    let manifest = load_asset_manifest(path)
        .map_err(|e| TaskError::new(ErrorKind::Template, e.to_string()))?;
    if !manifest.images.is_empty() {
        let ids: Vec<&str> = manifest.images.iter().map(|i| i.id.as_str()).collect();
        return Err(TaskError::new(
            ErrorKind::Input,
            format!(
                "stack {} has container image assets ({}): the engine's triggers publish file \
                 assets only; deploy it with `stackflow deploy` where a container engine runs",
                stack.name,
                ids.join(", ")
            ),
        ));
    }
    let Some(account) = account else {
        return Err(TaskError::new(
            ErrorKind::Input,
            format!(
                "stack {} has file assets, and the account they go to is unknown",
                stack.name
            ),
        ));
    };
    let at = Placeholders {
        account_id: account.to_string(),
        region: region.to_string(),
    };
    let optional = nested_files(&stack.nested);
    let jobs = file_jobs(
        &manifest,
        &at,
        None,
        std::slice::from_ref(&stack.file),
        &optional,
    );
    if jobs.is_empty() {
        return Ok(0);
    }
    let report = publish_files_with(s3, jobs, PARALLEL, Arc::new(|_, _| {}))
        .await
        .map_err(|e| TaskError::new(ErrorKind::Aws, e.to_string()))?;
    Ok(report.uploaded)
}
