//! What the intrinsic functions need to know from AWS (availability zones, other stacks'
//! exports and outputs, SSM parameters, dynamic references): the [`Lookups`] trait the
//! engine asks, and [`aws::AwsLookups`], which answers it from AWS.

pub mod aws;
pub mod cloudformation;
pub mod ec2;

use serde_json::Value;
use stackflow_core::dynref::DynamicReference;
use stackflow_core::intrinsics::StackOutputRef;

use crate::provider::BoxFuture;

pub use aws::AwsLookups;
pub use cloudformation::{
    CloudFormationSource, MAX_TEMPLATE_BODY, MAX_TEMPLATE_URL_SIZE, SourceResource,
};

/// The parameters a CloudFormation stack was deployed with: (key, value), a `NoEcho`
/// value as `****`.
pub type DeployedParameters = Vec<(String, String)>;

/// A lookup that failed (as opposed to one that found nothing, which is `Ok(None)`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what}: {message}")]
pub struct LookupError {
    /// What was looked up, e.g. `export MyExport`, `availability zones of us-east-1`.
    pub what: String,
    /// Why it failed.
    pub message: String,
}

/// Where stackflow looks things up in AWS. Each method answers `Ok(None)` when AWS says
/// the thing does not exist, and `Err` when AWS could not be asked.
pub trait Lookups: Send + Sync {
    /// The availability zones of `region`, in name order (`Fn::GetAZs`).
    fn availability_zones<'a>(
        &'a self,
        region: &'a str,
    ) -> BoxFuture<'a, Result<Vec<String>, LookupError>>;

    /// A CloudFormation export's value (`Fn::ImportValue`), from `ListExports`.
    fn cloudformation_export<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Value>, LookupError>>;

    /// A CloudFormation stack's output (`Fn::GetStackOutput`), from `DescribeStacks`.
    fn cloudformation_output<'a>(
        &'a self,
        reference: &'a StackOutputRef,
    ) -> BoxFuture<'a, Result<Option<Value>, LookupError>>;

    /// The value of an SSM parameter (for `AWS::SSM::Parameter::Value<...>` template
    /// parameters): a string, or a list of strings for a `StringList` parameter.
    fn ssm_parameter<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Value>, LookupError>>;

    /// The value a dynamic reference (`{{resolve:ssm:...}}`, `{{resolve:ssm-secure:...}}`,
    /// `{{resolve:secretsmanager:...}}`) stands for. Never logged, never stored.
    fn dynamic_reference<'a>(
        &'a self,
        reference: &'a DynamicReference,
    ) -> BoxFuture<'a, Result<String, LookupError>>;

    /// The parameters a CloudFormation stack was deployed with, as `DescribeStacks`
    /// answers them (key, value; a `NoEcho` value is `****`); `Ok(None)` when there is no
    /// such stack. Only ever compared, never logged or recorded. Unless implemented:
    /// no such stack.
    fn deployed_parameters<'a>(
        &'a self,
        stack_name: &'a str,
    ) -> BoxFuture<'a, Result<Option<DeployedParameters>, LookupError>> {
        let _ = stack_name;
        Box::pin(async { Ok(None) })
    }
}

/// Lookups that answer nothing (and fail nothing): for offline use and for tests.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoLookups;

impl Lookups for NoLookups {
    fn availability_zones<'a>(
        &'a self,
        region: &'a str,
    ) -> BoxFuture<'a, Result<Vec<String>, LookupError>> {
        Box::pin(async move {
            Err(LookupError {
                what: format!("availability zones of {region}"),
                message: "no AWS lookups are configured".into(),
            })
        })
    }
    fn cloudformation_export<'a>(
        &'a self,
        _: &'a str,
    ) -> BoxFuture<'a, Result<Option<Value>, LookupError>> {
        Box::pin(async { Ok(None) })
    }
    fn cloudformation_output<'a>(
        &'a self,
        _: &'a StackOutputRef,
    ) -> BoxFuture<'a, Result<Option<Value>, LookupError>> {
        Box::pin(async { Ok(None) })
    }
    fn ssm_parameter<'a>(
        &'a self,
        _: &'a str,
    ) -> BoxFuture<'a, Result<Option<Value>, LookupError>> {
        Box::pin(async { Ok(None) })
    }
    fn dynamic_reference<'a>(
        &'a self,
        reference: &'a DynamicReference,
    ) -> BoxFuture<'a, Result<String, LookupError>> {
        Box::pin(async move {
            Err(LookupError {
                what: format!("dynamic reference to {}", reference.service()),
                message: "no AWS lookups are configured".into(),
            })
        })
    }
}
