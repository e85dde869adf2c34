//! The CloudFormation calls of `stackflow import --migrate-from-cloudformation`: the
//! [`CloudFormationSource`] trait the engine asks (so that it can be tested with a fake),
//! and its implementation on [`AwsLookups`] with the CloudFormation client it already
//! holds: `ListStackResources` (the paginated form of `DescribeStackResources`, which
//! stops at 100 resources), `GetTemplate`, `UpdateStack` and `DeleteStack`, each waited
//! for with `DescribeStacks`.
//!
//! `UpdateStack` takes at most 51,200 bytes in its body. A larger template (most CDK
//! stacks) is put in the template bucket ([`AwsLookups::with_template_bucket`]) under
//! `inputs/migrations/` and given as `TemplateURL` (at most 1 MB), and the object is
//! deleted once the update is answered (the bucket's lifecycle expires `inputs/` after a
//! day, should that delete fail).

use std::time::Duration;

use aws_sdk_cloudformation::error::ProvideErrorMetadata;
use aws_sdk_cloudformation::types::{Capability, Parameter, StackStatus, TemplateStage};

use super::aws::aws_error;
use super::{AwsLookups, LookupError};
use crate::provider::BoxFuture;

/// One resource of a CloudFormation stack, as `ListStackResources` answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceResource {
    /// Its logical id in the stack's template.
    pub logical_id: String,
    /// Its physical id; `None` when it was never made.
    pub physical_id: Option<String>,
    /// Its type. A nested stack (`AWS::CloudFormation::Stack`) has the nested stack's id
    /// (its ARN) as physical id.
    pub resource_type: String,
    /// Its status, e.g. `CREATE_COMPLETE`, `DELETE_COMPLETE`.
    pub status: String,
}

/// The CloudFormation stack a migration takes resources from. Stacks are named by name
/// or by id (ARN: a nested stack). Every call that changes the stack waits until
/// CloudFormation has finished with it.
pub trait CloudFormationSource: Send + Sync {
    /// The resources of `stack`; `Ok(None)` when there is no such stack.
    fn stack_resources<'a>(
        &'a self,
        stack: &'a str,
    ) -> BoxFuture<'a, Result<Option<Vec<SourceResource>>, LookupError>>;

    /// The template `stack` runs now (after transforms: the logical ids its resources
    /// have), as text (JSON or YAML).
    fn current_template<'a>(&'a self, stack: &'a str)
    -> BoxFuture<'a, Result<String, LookupError>>;

    /// Updates `stack` to `template` (every parameter keeps its value), and waits for
    /// the update to finish. An update that changes nothing is `Ok`.
    fn update_template<'a>(
        &'a self,
        stack: &'a str,
        template: String,
    ) -> BoxFuture<'a, Result<(), LookupError>>;

    /// Deletes `stack` and waits until it is gone.
    fn delete_stack<'a>(&'a self, stack: &'a str) -> BoxFuture<'a, Result<(), LookupError>>;
}

/// The most `UpdateStack` takes as `TemplateBody`.
pub const MAX_TEMPLATE_BODY: usize = 51_200;

/// The most a template given by `TemplateURL` may hold.
pub const MAX_TEMPLATE_URL_SIZE: usize = 1_000_000;

/// How often a stack's status is read while waiting, and for how long at most.
const POLL: Duration = Duration::from_secs(3);
const WAIT_AT_MOST: Duration = Duration::from_secs(2 * 60 * 60);

/// A stack's id and status as `DescribeStacks` answers; `None` when there is no such
/// stack (or it was deleted).
type Described = Option<(String, StackStatus, Option<String>, Vec<String>)>;

impl AwsLookups {
    async fn describe(&self, stack: &str) -> Result<Described, LookupError> {
        let what = || format!("CloudFormation stack {stack}");
        let out = match self
            .cloudformation()
            .describe_stacks()
            .stack_name(stack)
            .send()
            .await
        {
            Ok(o) => o,
            Err(e)
                if e.code() == Some("ValidationError")
                    && e.message().is_some_and(|m| m.contains("does not exist")) =>
            {
                return Ok(None);
            }
            Err(e) => return Err(aws_error(what(), &e)),
        };
        Ok(out.stacks().first().and_then(|s| {
            let status = s.stack_status()?.clone();
            if status == StackStatus::DeleteComplete {
                return None;
            }
            let keys = s
                .parameters()
                .iter()
                .filter_map(|p| p.parameter_key().map(str::to_string))
                .collect();
            Some((
                s.stack_id().unwrap_or(stack).to_string(),
                status,
                s.stack_status_reason().map(str::to_string),
                keys,
            ))
        }))
    }

    async fn resources(&self, stack: &str) -> Result<Option<Vec<SourceResource>>, LookupError> {
        if self.describe(stack).await?.is_none() {
            return Ok(None);
        }
        let what = || format!("the resources of CloudFormation stack {stack}");
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let page = self
                .cloudformation()
                .list_stack_resources()
                .stack_name(stack)
                .set_next_token(token.take())
                .send()
                .await
                .map_err(|e| aws_error(what(), &e))?;
            for r in page.stack_resource_summaries() {
                out.push(SourceResource {
                    logical_id: r.logical_resource_id().unwrap_or_default().to_string(),
                    physical_id: r
                        .physical_resource_id()
                        .filter(|p| !p.is_empty())
                        .map(str::to_string),
                    resource_type: r.resource_type().unwrap_or_default().to_string(),
                    status: r
                        .resource_status()
                        .map(|s| s.as_str().to_string())
                        .unwrap_or_default(),
                });
            }
            match page.next_token() {
                Some(next) if !next.is_empty() => token = Some(next.to_string()),
                _ => return Ok(Some(out)),
            }
        }
    }

    async fn template(&self, stack: &str) -> Result<String, LookupError> {
        let what = || format!("the template of CloudFormation stack {stack}");
        let out = self
            .cloudformation()
            .get_template()
            .stack_name(stack)
            .template_stage(TemplateStage::Processed)
            .send()
            .await
            .map_err(|e| aws_error(what(), &e))?;
        match out.template_body() {
            Some(body) if !body.trim().is_empty() => Ok(body.to_string()),
            _ => Err(LookupError {
                what: what(),
                message: "CloudFormation returned no template".into(),
            }),
        }
    }

    async fn update(&self, stack: &str, template: String) -> Result<(), LookupError> {
        let what = || format!("UpdateStack of CloudFormation stack {stack}");
        let Some((id, _, _, keys)) = self.describe(stack).await? else {
            return Err(LookupError {
                what: what(),
                message: "the stack does not exist".into(),
            });
        };
        let parameters = keys
            .iter()
            .map(|k| {
                Parameter::builder()
                    .parameter_key(k)
                    .use_previous_value(true)
                    .build()
            })
            .collect();
        let upload = if template.len() > MAX_TEMPLATE_BODY {
            Some(self.upload(stack, &template).await?)
        } else {
            None
        };
        let call = self.cloudformation().update_stack().stack_name(&id);
        let call = match &upload {
            Some((url, _)) => call.template_url(url),
            None => call.template_body(template),
        };
        let sent = call
            .set_parameters(Some(parameters))
            .capabilities(Capability::CapabilityIam)
            .capabilities(Capability::CapabilityNamedIam)
            .capabilities(Capability::CapabilityAutoExpand)
            .send()
            .await;
        if let Some((_, key)) = &upload {
            self.remove_upload(key).await;
        }
        match sent {
            Ok(_) => {}
            Err(e)
                if e.code() == Some("ValidationError")
                    && e.message().is_some_and(|m| m.contains("No updates")) =>
            {
                return Ok(());
            }
            Err(e) => return Err(aws_error(what(), &e)),
        }
        match self.wait(&id).await? {
            Some((StackStatus::UpdateComplete, _)) => Ok(()),
            Some((status, reason)) => Err(LookupError {
                what: what(),
                message: ended_in(&status, reason),
            }),
            None => Err(LookupError {
                what: what(),
                message: "the stack disappeared during the update".into(),
            }),
        }
    }

    /// Puts `template` in the template bucket: its `TemplateURL` and key.
    async fn upload(&self, stack: &str, template: &str) -> Result<(String, String), LookupError> {
        let what = || format!("the template of CloudFormation stack {stack}");
        let too_large = |why: String| LookupError {
            what: what(),
            message: format!(
                "{} bytes, more than the {MAX_TEMPLATE_BODY} UpdateStack takes inline, {why}",
                template.len()
            ),
        };
        if template.len() > MAX_TEMPLATE_URL_SIZE {
            return Err(too_large(format!(
                "and more than the {MAX_TEMPLATE_URL_SIZE} it takes from S3"
            )));
        }
        let (Some(bucket), config) = self.template_bucket() else {
            return Err(too_large(
                "and no bucket is known to put it in: pass --store-bucket, or run \
                 `stackflow bootstrap`"
                    .into(),
            ));
        };
        let digest = crate::aws::sha256_hex(template.as_bytes());
        let name: String = stack
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let key = format!("inputs/migrations/{name}/{digest}.json");
        crate::aws::s3_client(config)
            .put_object()
            .bucket(bucket)
            .key(&key)
            .content_type("application/json")
            .body(template.as_bytes().to_vec().into())
            .send()
            .await
            .map_err(|e| {
                too_large(format!(
                    "and putting it in s3://{bucket}/{key} failed: {} (`stackflow bootstrap` \
                     makes the bucket)",
                    aws_sdk_s3::error::DisplayErrorContext(&e)
                ))
            })?;
        let region = config.region().map_or("us-east-1", |r| r.as_ref());
        let domain = if region.starts_with("cn-") {
            "amazonaws.com.cn"
        } else {
            "amazonaws.com"
        };
        Ok((format!("https://{bucket}.s3.{region}.{domain}/{key}"), key))
    }

    /// Deletes an uploaded template; a failure leaves it to the bucket's lifecycle.
    async fn remove_upload(&self, key: &str) {
        if let (Some(bucket), config) = self.template_bucket() {
            let _ = crate::aws::s3_client(config)
                .delete_object()
                .bucket(bucket)
                .key(key)
                .send()
                .await;
        }
    }

    async fn delete(&self, stack: &str) -> Result<(), LookupError> {
        let what = || format!("DeleteStack of CloudFormation stack {stack}");
        let Some((id, ..)) = self.describe(stack).await? else {
            return Ok(());
        };
        self.cloudformation()
            .delete_stack()
            .stack_name(&id)
            .send()
            .await
            .map_err(|e| aws_error(what(), &e))?;
        match self.wait(&id).await? {
            None => Ok(()),
            Some((status, reason)) => Err(LookupError {
                what: what(),
                message: ended_in(&status, reason),
            }),
        }
    }

    /// Waits while stack `id` is in progress: its final status and reason, `None` once
    /// it is deleted.
    async fn wait(&self, id: &str) -> Result<Option<(StackStatus, Option<String>)>, LookupError> {
        let started = tokio::time::Instant::now();
        loop {
            let Some((_, status, reason, _)) = self.describe(id).await? else {
                return Ok(None);
            };
            if !status.as_str().ends_with("_IN_PROGRESS") {
                return Ok(Some((status, reason)));
            }
            if started.elapsed() > WAIT_AT_MOST {
                return Err(LookupError {
                    what: format!("CloudFormation stack {id}"),
                    message: format!(
                        "still {} after {} minutes: stopped waiting",
                        status.as_str(),
                        WAIT_AT_MOST.as_secs() / 60
                    ),
                });
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

fn ended_in(status: &StackStatus, reason: Option<String>) -> String {
    match reason {
        Some(r) if !r.is_empty() => format!("the stack ended in {}: {r}", status.as_str()),
        _ => format!("the stack ended in {}", status.as_str()),
    }
}

impl CloudFormationSource for AwsLookups {
    fn stack_resources<'a>(
        &'a self,
        stack: &'a str,
    ) -> BoxFuture<'a, Result<Option<Vec<SourceResource>>, LookupError>> {
        Box::pin(self.resources(stack))
    }

    fn current_template<'a>(
        &'a self,
        stack: &'a str,
    ) -> BoxFuture<'a, Result<String, LookupError>> {
        Box::pin(self.template(stack))
    }

    fn update_template<'a>(
        &'a self,
        stack: &'a str,
        template: String,
    ) -> BoxFuture<'a, Result<(), LookupError>> {
        Box::pin(self.update(stack, template))
    }

    fn delete_stack<'a>(&'a self, stack: &'a str) -> BoxFuture<'a, Result<(), LookupError>> {
        Box::pin(self.delete(stack))
    }
}
