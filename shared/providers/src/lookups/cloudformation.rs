//! The CloudFormation calls of `stackflow import --migrate-from-cloudformation`: the
//! [`CloudFormationSource`] trait the engine asks (so that it can be tested with a fake),
//! and its implementation on [`AwsLookups`] with the CloudFormation client it already
//! holds: `ListStackResources` (the paginated form of `DescribeStackResources`, which
//! stops at 100 resources), `GetTemplate`, `UpdateStack` and `DeleteStack`, each waited
//! for with `DescribeStacks`.

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
        let sent = self
            .cloudformation()
            .update_stack()
            .stack_name(&id)
            .template_body(template)
            .set_parameters(Some(parameters))
            .capabilities(Capability::CapabilityIam)
            .capabilities(Capability::CapabilityNamedIam)
            .capabilities(Capability::CapabilityAutoExpand)
            .send()
            .await;
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
