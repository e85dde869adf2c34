//! [`Lookups`] answered by AWS: CloudFormation (`ListExports`, `DescribeStacks`), Systems
//! Manager Parameter Store (`GetParameter`), Secrets Manager (`GetSecretValue`) and EC2
//! (`DescribeAvailabilityZones`).
//!
//! EC2 is called without `aws-sdk-ec2` (see [`super::ec2`]).

use aws_sdk_cloudformation::types::StackStatus;
use aws_sdk_ssm::error::ProvideErrorMetadata;
use aws_sdk_ssm::types::ParameterType;
use aws_types::SdkConfig;
use aws_types::region::Region;
use serde_json::Value;
use stackflow_core::dynref::DynamicReference;
use stackflow_core::intrinsics::StackOutputRef;

use super::ec2::Ec2;
use super::{DeployedParameters, LookupError, Lookups};
use crate::provider::BoxFuture;

/// [`Lookups`] that ask AWS, with the credentials, region and endpoint of one
/// [`SdkConfig`].
#[derive(Debug, Clone)]
pub struct AwsLookups {
    config: SdkConfig,
    cloudformation: aws_sdk_cloudformation::Client,
    ssm: aws_sdk_ssm::Client,
    secrets: aws_sdk_secretsmanager::Client,
    ec2: Ec2,
    /// Where a template too large for `UpdateStack`'s body is uploaded.
    template_bucket: Option<String>,
}

impl AwsLookups {
    /// Clients for `config`: CloudFormation, SSM and Secrets Manager through the SDK, EC2
    /// through [`Ec2`].
    pub fn new(config: &SdkConfig) -> Self {
        AwsLookups {
            config: config.clone(),
            cloudformation: aws_sdk_cloudformation::Client::new(config),
            ssm: aws_sdk_ssm::Client::new(config),
            secrets: aws_sdk_secretsmanager::Client::new(config),
            ec2: Ec2::new(config),
            template_bucket: None,
        }
    }

    /// Templates over `UpdateStack`'s 51,200-byte body go to `bucket` for the call (see
    /// [`super::cloudformation`]).
    pub fn with_template_bucket(mut self, bucket: String) -> Self {
        self.template_bucket = Some(bucket);
        self
    }

    /// The bucket large templates are uploaded to, and the configuration to reach it.
    pub(super) fn template_bucket(&self) -> (Option<&str>, &SdkConfig) {
        (self.template_bucket.as_deref(), &self.config)
    }

    /// The client of the configured region (for [`super::cloudformation`]).
    pub(super) fn cloudformation(&self) -> &aws_sdk_cloudformation::Client {
        &self.cloudformation
    }

    /// The CloudFormation client for `region` (`None`, or the configured region: the
    /// default client).
    fn cloudformation_in(&self, region: Option<&str>) -> aws_sdk_cloudformation::Client {
        match region {
            Some(r) if self.config.region().map(Region::as_ref) != Some(r) => {
                let conf = aws_sdk_cloudformation::config::Builder::from(&self.config)
                    .region(Region::new(r.to_string()))
                    .build();
                aws_sdk_cloudformation::Client::from_conf(conf)
            }
            _ => self.cloudformation.clone(),
        }
    }

    /// A CloudFormation client acting as `role` (credentials from STS `AssumeRole` with
    /// this configuration's, renewed before they expire), in `region` when given: for a
    /// stack output of another account (`Fn::GetStackOutput`'s `RoleArn`).
    async fn cloudformation_as(
        &self,
        role: &str,
        region: Option<&str>,
    ) -> aws_sdk_cloudformation::Client {
        // STS signs with the time of the configuration; one built by hand may have none.
        let mut base = self.config.clone();
        if base.time_source().is_none() {
            base = base
                .to_builder()
                .time_source(aws_types::sdk_config::SharedTimeSource::default())
                .build();
        }
        let credentials = aws_config::sts::AssumeRoleProvider::builder(role)
            .session_name("stackflow-lookup")
            .configure(&base)
            .build()
            .await;
        let mut conf = aws_sdk_cloudformation::config::Builder::from(&self.config)
            .credentials_provider(credentials);
        if let Some(region) = region {
            conf = conf.region(Region::new(region.to_string()));
        }
        aws_sdk_cloudformation::Client::from_conf(conf.build())
    }

    /// The text of the SSM parameter `name` (a `StringList`'s items joined by commas, as
    /// `GetParameter` answers them), for a CDK context lookup
    /// (`StringParameter.valueFromLookup`); `Ok(None)` when there is no such parameter. A
    /// `SecureString` is refused and never read decrypted: a lookup's value is saved in
    /// `cdk.context.json` and written into the template.
    pub async fn parameter_text(&self, name: &str) -> Result<Option<String>, LookupError> {
        let refused = "is a SecureString: a context lookup would write its value into \
                       cdk.context.json and the template; refer to it with \
                       {{resolve:ssm-secure:NAME}} (StringParameter.valueForSecureStringParameter) \
                       in the property that needs it";
        let parameter = self.plain_parameter(name, refused).await?;
        Ok(parameter.map(|p| p.value.unwrap_or_default()))
    }

    /// `GetParameter` of `name`, never decrypted: `Ok(None)` when there is none; a
    /// `SecureString` is refused with `refused` (the rest of a sentence), its value unread.
    async fn plain_parameter(
        &self,
        name: &str,
        refused: &str,
    ) -> Result<Option<aws_sdk_ssm::types::Parameter>, LookupError> {
        let what = || format!("SSM parameter {name}");
        let Some(parameter) = self.get_parameter(what, name, false).await? else {
            return Ok(None);
        };
        if parameter.r#type() == Some(&ParameterType::SecureString) {
            return Err(LookupError {
                what: what(),
                message: refused.to_string(),
            });
        }
        Ok(Some(parameter))
    }

    async fn export(&self, name: &str) -> Result<Option<Value>, LookupError> {
        let what = || format!("export {name}");
        let mut token: Option<String> = None;
        loop {
            let page = self
                .cloudformation
                .list_exports()
                .set_next_token(token.take())
                .send()
                .await
                .map_err(|e| aws_error(what(), &e))?;
            if let Some(export) = page.exports().iter().find(|e| e.name() == Some(name)) {
                return Ok(export.value().map(|v| Value::String(v.to_string())));
            }
            match page.next_token() {
                Some(next) if !next.is_empty() => token = Some(next.to_string()),
                _ => return Ok(None),
            }
        }
    }

    async fn output(&self, r: &StackOutputRef) -> Result<Option<Value>, LookupError> {
        let what = || {
            let mut w = format!("output {} of stack {}", r.output_name, r.stack_name);
            if let Some(region) = &r.region {
                w.push_str(&format!(" in {region}"));
            }
            if let Some(role) = &r.role_arn {
                w.push_str(&format!(" (as {role})"));
            }
            w
        };
        let client = match &r.role_arn {
            Some(role) => self.cloudformation_as(role, r.region.as_deref()).await,
            None => self.cloudformation_in(r.region.as_deref()),
        };
        let Some(stack) = live_stack(&client, &r.stack_name)
            .await
            .map_err(|e| aws_error(what(), &e))?
        else {
            return Ok(None);
        };
        Ok(stack
            .outputs()
            .iter()
            .find(|o| o.output_key() == Some(r.output_name.as_str()))
            .and_then(|o| o.output_value())
            .map(|v| Value::String(v.to_string())))
    }

    /// `DescribeStacks` of `stack_name`: its parameters; `Ok(None)` when there is no such
    /// stack (or it is deleted).
    async fn parameters_of(
        &self,
        stack_name: &str,
    ) -> Result<Option<DeployedParameters>, LookupError> {
        let what = || format!("the parameters of CloudFormation stack {stack_name}");
        let stack = live_stack(&self.cloudformation, stack_name)
            .await
            .map_err(|e| aws_error(what(), &e))?;
        Ok(stack.map(|stack| {
            stack
                .parameters()
                .iter()
                .filter_map(|p| {
                    Some((
                        p.parameter_key()?.to_string(),
                        p.parameter_value().unwrap_or_default().to_string(),
                    ))
                })
                .collect()
        }))
    }

    /// `GetParameter` of `name` (which may end in `:version`); `Ok(None)` when there is no
    /// such parameter (or version).
    async fn get_parameter(
        &self,
        what: impl Fn() -> String,
        name: &str,
        decrypt: bool,
    ) -> Result<Option<aws_sdk_ssm::types::Parameter>, LookupError> {
        match self
            .ssm
            .get_parameter()
            .name(name)
            .with_decryption(decrypt)
            .send()
            .await
        {
            Ok(out) => Ok(out.parameter),
            Err(e)
                if e.as_service_error().is_some_and(|s| {
                    s.is_parameter_not_found() || s.is_parameter_version_not_found()
                }) =>
            {
                Ok(None)
            }
            Err(e) => Err(aws_error(what(), &e)),
        }
    }

    async fn parameter(&self, name: &str) -> Result<Option<Value>, LookupError> {
        // Read without decryption: a template parameter never takes a secret's value.
        let refused = "is a SecureString, which a parameter of type \
                       AWS::SSM::Parameter::Value<...> cannot take (CloudFormation refuses it \
                       too); refer to it with {{resolve:ssm-secure:NAME}} in the property that \
                       needs it";
        let Some(parameter) = self.plain_parameter(name, refused).await? else {
            return Ok(None);
        };
        let value = parameter.value().unwrap_or_default();
        Ok(Some(match parameter.r#type() {
            Some(ParameterType::StringList) => Value::Array(
                value
                    .split(',')
                    .map(|s| Value::String(s.to_string()))
                    .collect(),
            ),
            _ => Value::String(value.to_string()),
        }))
    }

    async fn dynamic(&self, reference: &DynamicReference) -> Result<String, LookupError> {
        let what = || format!("dynamic reference {reference}");
        let fail = |message: String| LookupError {
            what: what(),
            message,
        };
        match reference {
            DynamicReference::Ssm { name, version }
            | DynamicReference::SsmSecure { name, version } => {
                let secure = matches!(reference, DynamicReference::SsmSecure { .. });
                let selector = match version {
                    Some(v) => format!("{name}:{v}"),
                    None => name.clone(),
                };
                let Some(parameter) = self.get_parameter(what, &selector, secure).await? else {
                    return Err(fail(match version {
                        Some(v) => format!("the parameter {name} has no version {v}"),
                        None => format!("there is no parameter {name}"),
                    }));
                };
                let kind = parameter.r#type();
                if !secure && kind == Some(&ParameterType::SecureString) {
                    return Err(fail(format!(
                        "the parameter {name} is a SecureString; refer to it with ssm-secure"
                    )));
                }
                if secure && kind.is_some_and(|k| *k != ParameterType::SecureString) {
                    return Err(fail(format!(
                        "the parameter {name} is not a SecureString; refer to it with ssm"
                    )));
                }
                Ok(parameter.value.unwrap_or_default())
            }
            DynamicReference::SecretsManager {
                secret_id,
                json_key,
                version_stage,
                version_id,
            } => {
                let got = self
                    .secrets
                    .get_secret_value()
                    .secret_id(secret_id)
                    .set_version_stage(version_stage.clone())
                    .set_version_id(version_id.clone())
                    .send()
                    .await
                    .map_err(|e| aws_error(what(), &e))?;
                let Some(text) = got.secret_string else {
                    return Err(fail(format!(
                        "the secret {secret_id} has no SecretString (a binary secret cannot be referenced)"
                    )));
                };
                match json_key {
                    None => Ok(text),
                    Some(key) => pick_json_key(&text, key).map_err(|m| {
                        fail(format!("the SecretString of the secret {secret_id} {m}"))
                    }),
                }
            }
        }
    }
}

/// Why a secret's JSON key could not be read: the rest of a sentence about the secret,
/// which never quotes its text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum NoJsonKey {
    #[error("is not a JSON object, so it has no key {0:?}")]
    NotAnObject(String),
    #[error("has no key {0:?}")]
    Missing(String),
}

/// The value of `key` in the JSON object `text`: a string as it is, any other JSON value
/// as JSON text.
fn pick_json_key(text: &str, key: &str) -> Result<String, NoJsonKey> {
    let object = match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(object)) => object,
        _ => return Err(NoJsonKey::NotAnObject(key.to_string())),
    };
    match object.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Ok(other.to_string()),
        None => Err(NoJsonKey::Missing(key.to_string())),
    }
}

/// `DescribeStacks` of `name`: the stack unless it does not exist or is deleted.
async fn live_stack(
    client: &aws_sdk_cloudformation::Client,
    name: &str,
) -> Result<
    Option<aws_sdk_cloudformation::types::Stack>,
    aws_sdk_cloudformation::error::SdkError<
        aws_sdk_cloudformation::operation::describe_stacks::DescribeStacksError,
    >,
> {
    let described = match client.describe_stacks().stack_name(name).send().await {
        Ok(d) => d,
        Err(e)
            if e.code() == Some("ValidationError")
                && e.message().is_some_and(|m| m.contains("does not exist")) =>
        {
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    Ok(described
        .stacks()
        .iter()
        .find(|s| s.stack_status() != Some(&StackStatus::DeleteComplete))
        .cloned())
}

impl Lookups for AwsLookups {
    fn availability_zones<'a>(
        &'a self,
        region: &'a str,
    ) -> BoxFuture<'a, Result<Vec<String>, LookupError>> {
        Box::pin(async move {
            self.ec2
                .availability_zones(region)
                .await
                .map_err(|e| LookupError {
                    what: format!("availability zones of {region}"),
                    message: e.message().to_string(),
                })
        })
    }

    fn cloudformation_export<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Value>, LookupError>> {
        Box::pin(self.export(name))
    }

    fn cloudformation_output<'a>(
        &'a self,
        reference: &'a StackOutputRef,
    ) -> BoxFuture<'a, Result<Option<Value>, LookupError>> {
        Box::pin(self.output(reference))
    }

    fn ssm_parameter<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Value>, LookupError>> {
        Box::pin(self.parameter(name))
    }

    fn deployed_parameters<'a>(
        &'a self,
        stack_name: &'a str,
    ) -> BoxFuture<'a, Result<Option<DeployedParameters>, LookupError>> {
        Box::pin(self.parameters_of(stack_name))
    }

    fn dynamic_reference<'a>(
        &'a self,
        reference: &'a DynamicReference,
    ) -> BoxFuture<'a, Result<String, LookupError>> {
        Box::pin(self.dynamic(reference))
    }
}

/// A [`LookupError`] from an AWS SDK error: the service's error code and message, or the
/// whole cause chain when the service did not answer (timeout, connection failure).
pub(super) fn aws_error<E>(what: String, error: &E) -> LookupError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let message = match (error.code(), error.message()) {
        (Some(code), Some(message)) if !message.is_empty() => format!("{code}: {message}"),
        (Some(code), _) => code.to_string(),
        _ => crate::error::error_chain(error),
    };
    LookupError { what, message }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_keys_are_picked_without_quoting_the_secret() {
        let secret = r#"{"user":"app","password":"hunter2","port":5432}"#;
        assert_eq!(pick_json_key(secret, "password").unwrap(), "hunter2");
        assert_eq!(pick_json_key(secret, "port").unwrap(), "5432");
        let err = pick_json_key(secret, "missing").unwrap_err();
        assert_eq!(err.to_string(), "has no key \"missing\"");
        let err = pick_json_key("hunter2", "password").unwrap_err();
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }
}
