//! The task handlers of a Lambda function, built from its environment: the DynamoDB event
//! store, the engine's bucket, and every client made once from one AWS configuration.
//!
//! Building them makes no network call: the SDK resolves credentials on the first request,
//! and the region comes from `AWS_REGION`, which Lambda always sets.

use std::sync::Arc;

use aws_config::BehaviorVersion;
use aws_types::SdkConfig;
use stackflow_events::dynamo::DynamoStore;

use stackflow_core::deployable::Deployable;

use crate::engine::Engine;
use crate::progress::Silent;
use crate::sfn::tasks::Tasks;
use stackflow_providers::aws::s3_client;
use stackflow_providers::lookups::AwsLookups;
use stackflow_providers::router::Providers;

/// The DynamoDB table of the event store.
pub const TABLE: &str = "STACKFLOW_TABLE";
/// The engine's bucket (inputs, plans, gates, large event bodies, custom resource answers).
pub const BUCKET: &str = "STACKFLOW_BUCKET";
/// Whether lookups fall back to CloudFormation for exports and outputs stackflow has not
/// recorded (`true` or `false`; `true` when unset).
pub const CFN_FALLBACK: &str = "STACKFLOW_CFN_FALLBACK";
/// A KMS key (id, ARN or alias) that encrypts the objects the engine writes to its
/// bucket (SSE-KMS); unset: SSE-S3.
pub const KMS_KEY: &str = "STACKFLOW_KMS_KEY";
/// The provisioning role (an IAM role ARN): the engine makes, changes and deletes the
/// stacks' resources with it (assumed for every provider and lookup call, and passed to
/// Cloud Control as its `RoleArn`), while the function's own role reaches only the engine's
/// table, bucket and state machines; unset: the function's own role does everything.
pub const PROVISIONING_ROLE: &str = "STACKFLOW_PROVISIONING_ROLE";
/// The resource types the engine may deploy, comma-separated (`AWS::SNS::Topic`,
/// `AWS::SQS::*`, `Custom::*`): a template with any other is refused by Plan before any
/// AWS call. Set and empty: none; unset: every type (an engine not installed by
/// `stackflow engine deploy`).
pub const ALLOWED_TYPES: &str = "STACKFLOW_ALLOWED_TYPES";
/// The function's name, set by Lambda.
pub const FUNCTION_NAME: &str = "AWS_LAMBDA_FUNCTION_NAME";

/// What a function reads from its environment, besides the AWS configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The event store's table.
    pub table: String,
    /// The engine's bucket.
    pub bucket: String,
    /// Read exports and outputs from CloudFormation when stackflow has none.
    pub cloudformation_fallback: bool,
    /// The lock holder name of this function's runs: `lambda:<function name>`.
    pub who: String,
    /// The KMS key of the bucket's objects (SSE-S3 when `None`).
    pub kms_key: Option<String>,
    /// The role resources are provisioned with ([`PROVISIONING_ROLE`]).
    pub provisioning_role: Option<String>,
    /// The types the engine may deploy ([`ALLOWED_TYPES`]).
    pub allowed_types: Option<Deployable>,
}

/// Why a function's settings or handlers could not be made (an init error: the function
/// cannot start).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    /// A required variable is not set.
    #[error("{name} is not set: it names {what}")]
    NotSet {
        name: &'static str,
        what: &'static str,
    },
    /// A variable's value is not one it takes.
    #[error("{name} is {value:?}: it is {what}")]
    Invalid {
        name: &'static str,
        value: String,
        what: &'static str,
    },
    /// The types the engine may deploy are not a list of patterns.
    #[error("{ALLOWED_TYPES}: {0}")]
    AllowedTypes(#[from] stackflow_core::deployable::DeployableError),
    /// The digest key could not be had.
    #[error(transparent)]
    DigestKey(#[from] super::digest::DigestKeyError),
    /// The engine was shared before it was complete (a defect).
    #[error("the engine is shared before its digest key is set")]
    Shared,
}

impl Settings {
    /// The settings from `var` (the process environment in [`tasks_from_env`]); an error
    /// names the variable and says what it is for.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Settings, SettingsError> {
        let required = |name: &'static str, what: &'static str| match var(name) {
            Some(v) if !v.trim().is_empty() => Ok(v.trim().to_string()),
            _ => Err(SettingsError::NotSet { name, what }),
        };
        let table = required(TABLE, "the DynamoDB table of stackflow's event store")?;
        let bucket = required(
            BUCKET,
            "the engine's S3 bucket (deploy inputs, plans, gates, large event bodies)",
        )?;
        let cloudformation_fallback = match var(CFN_FALLBACK) {
            None => true,
            Some(v) => match v.trim().to_ascii_lowercase().as_str() {
                "" | "true" | "1" | "yes" => true,
                "false" | "0" | "no" => false,
                _ => {
                    return Err(SettingsError::Invalid {
                        name: CFN_FALLBACK,
                        value: v,
                        what: "true or false (whether lookups read exports and outputs from \
                               CloudFormation when stackflow has not recorded them)",
                    });
                }
            },
        };
        let who = match var(FUNCTION_NAME) {
            Some(name) if !name.is_empty() => format!("lambda:{name}"),
            _ => "lambda".to_string(),
        };
        let optional = |name: &str| {
            var(name)
                .map(|k| k.trim().to_string())
                .filter(|k| !k.is_empty())
        };
        let kms_key = optional(KMS_KEY);
        let provisioning_role = optional(PROVISIONING_ROLE);
        if let Some(role) = &provisioning_role
            && !role.starts_with("arn:")
        {
            return Err(SettingsError::Invalid {
                name: PROVISIONING_ROLE,
                value: role.clone(),
                what: "the ARN of the IAM role the engine provisions resources with",
            });
        }
        let allowed_types = match var(ALLOWED_TYPES) {
            None => None,
            Some(list) => Some(Deployable::from_list(&list)?),
        };
        Ok(Settings {
            table,
            bucket,
            cloudformation_fallback,
            who,
            kms_key,
            provisioning_role,
            allowed_types,
        })
    }

    /// The handlers on `config`'s clients.
    pub fn tasks(&self, config: &SdkConfig) -> Result<Tasks<DynamoStore>, SettingsError> {
        self.tasks_with(config, config)
    }

    /// The handlers: the store, the bucket and Step Functions on `config`'s clients, the
    /// providers and lookups on `provisioning`'s (see [`Settings::provisioning_config`]).
    pub fn tasks_with(
        &self,
        config: &SdkConfig,
        provisioning: &SdkConfig,
    ) -> Result<Tasks<DynamoStore>, SettingsError> {
        let region =
            config
                .region()
                .map(|r| r.as_ref().to_string())
                .ok_or(SettingsError::NotSet {
                    name: "AWS_REGION",
                    what: "the region deployed to",
                })?;
        let s3 = s3_client(config);
        let store = DynamoStore::new(
            aws_sdk_dynamodb::Client::new(config),
            s3.clone(),
            self.table.clone(),
            Some(self.bucket.clone()),
        );
        let engine = Engine {
            store: Arc::new(store),
            providers: Arc::new(Providers::from_config_with_session(
                provisioning,
                Some(self.bucket.clone()),
                self.provisioning_role.clone(),
                self.provisioning_role
                    .as_deref()
                    .map(|role| response_session(config, role)),
            )),
            lookups: Arc::new(AwsLookups::new(provisioning)),
            region,
            who: self.who.clone(),
            cloudformation_fallback: self.cloudformation_fallback,
            progress: Arc::new(Silent),
            // A function cannot tell whether another run is gone: `stackflow unlock`
            // breaks such a lock.
            stale: crate::engine::never_stale(),
            digest_key: None,
            lease: None,
        };
        Ok(Tasks {
            engine: Arc::new(engine),
            s3,
            sfn: aws_sdk_sfn::Client::new(config),
            bucket: self.bucket.clone(),
            kms_key: self.kms_key.clone(),
            allowed_types: self.allowed_types.clone(),
            history: super::history::HistoryGuard::from_env(),
            map_order: Default::default(),
        })
    }
}

impl Settings {
    /// `config` with the provisioning role's credentials (assumed when first used, and
    /// again before they expire), or `config` itself when no role is set.
    pub async fn provisioning_config(&self, config: &SdkConfig) -> SdkConfig {
        let Some(role) = &self.provisioning_role else {
            return config.clone();
        };
        let assumed = aws_config::sts::AssumeRoleProvider::builder(role.clone())
            .session_name("stackflow-provisioning")
            .configure(config)
            .build()
            .await;
        config
            .to_builder()
            .credentials_provider(aws_types::sdk_config::SharedCredentialsProvider::new(
                assumed,
            ))
            .build()
    }
}

/// A new session of the provisioning role for each custom resource `ResponseURL`, from
/// the function's own credentials, lasting the handler's time to answer: the role's
/// session the providers use is refreshed only as it nears its end, and a URL it signed
/// stops working with it. A session assumed from a role's session lasts an hour at most
/// (role chaining), CloudFormation's longest `ServiceTimeout`.
fn response_session(base: &SdkConfig, role: &str) -> stackflow_providers::custom::ResponseSession {
    let (base, role) = (base.clone(), role.to_string());
    Arc::new(move |wanted| {
        let (base, role) = (base.clone(), role.clone());
        Box::pin(async move {
            use aws_sdk_s3::config::ProvideCredentials as _;
            let length = wanted.clamp(
                std::time::Duration::from_secs(900),
                std::time::Duration::from_secs(3600),
            );
            aws_config::sts::AssumeRoleProvider::builder(role)
                .session_name("stackflow-response-url")
                .session_length(length)
                .configure(&base)
                .build()
                .await
                .provide_credentials()
                .await
                .map_err(|e| {
                    stackflow_providers::error::ProviderError::Transient(
                        stackflow_providers::error::error_chain(&e),
                    )
                })
        })
    })
}

/// The handlers of a Lambda function: [`Settings`] from the process environment, on the
/// AWS configuration loaded once from it.
pub async fn tasks_from_env() -> Result<Tasks<DynamoStore>, SettingsError> {
    let settings = Settings::from_vars(|name| std::env::var(name).ok())?;
    let config = aws_config::defaults(BehaviorVersion::latest()).load().await;
    let provisioning = settings.provisioning_config(&config).await;
    let mut tasks = settings.tasks_with(&config, &provisioning)?;
    let key = super::digest::bucket_key(&tasks.s3, &tasks.bucket).await?;
    let engine = Arc::get_mut(&mut tasks.engine).ok_or(SettingsError::Shared)?;
    engine.digest_key = Some(key);
    Ok(tasks)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        }
    }

    #[test]
    fn reads_the_table_the_bucket_and_the_function_name() {
        let s = Settings::from_vars(vars(&[
            (TABLE, "events"),
            (BUCKET, "engine"),
            (FUNCTION_NAME, "stackflow-plan"),
        ]))
        .unwrap();
        assert_eq!(
            s,
            Settings {
                table: "events".into(),
                bucket: "engine".into(),
                cloudformation_fallback: true,
                who: "lambda:stackflow-plan".into(),
                kms_key: None,
                provisioning_role: None,
                allowed_types: None,
            }
        );
    }

    #[test]
    fn the_allowed_types_are_read_and_checked() {
        let base = [(TABLE, "events"), (BUCKET, "engine")];
        let s = Settings::from_vars(vars(&[base[0], base[1], (ALLOWED_TYPES, "AWS::SNS::*")]));
        let allowed = s.unwrap().allowed_types.unwrap();
        assert!(allowed.permits("AWS::SNS::Topic") && !allowed.permits("AWS::SQS::Queue"));
        let s = Settings::from_vars(vars(&[base[0], base[1], (ALLOWED_TYPES, "")]));
        let none = s.unwrap().allowed_types.unwrap();
        assert!(!none.permits("AWS::SNS::Topic"), "set and empty: nothing");
        let e = Settings::from_vars(vars(&[base[0], base[1], (ALLOWED_TYPES, "sns")]))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("STACKFLOW_ALLOWED_TYPES: 'sns'"), "{e}");
    }

    #[test]
    fn the_provisioning_role_is_an_arn() {
        let base = [(TABLE, "events"), (BUCKET, "engine")];
        let role = "arn:aws:iam::123456789012:role/stackflow-provisioning";
        let s = Settings::from_vars(vars(&[base[0], base[1], (PROVISIONING_ROLE, role)]));
        assert_eq!(s.unwrap().provisioning_role.as_deref(), Some(role));
        let e = Settings::from_vars(vars(&[base[0], base[1], (PROVISIONING_ROLE, "admin")]))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("STACKFLOW_PROVISIONING_ROLE is \"admin\""),
            "{e}"
        );
        let s = Settings::from_vars(vars(&[base[0], base[1], (PROVISIONING_ROLE, " ")]));
        assert_eq!(s.unwrap().provisioning_role, None);
    }

    #[test]
    fn a_missing_variable_is_named_with_its_purpose() {
        let e = Settings::from_vars(vars(&[(BUCKET, "engine")]))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("STACKFLOW_TABLE is not set"), "{e}");
        assert!(e.contains("DynamoDB table"), "{e}");
        let e = Settings::from_vars(vars(&[(TABLE, "events"), (BUCKET, " ")]))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("STACKFLOW_BUCKET is not set"), "{e}");
        assert!(e.contains("bucket"), "{e}");
    }

    #[test]
    fn the_cloudformation_fallback_is_a_boolean() {
        let with = |v: &str| {
            Settings::from_vars(vars(&[(TABLE, "t"), (BUCKET, "b"), (CFN_FALLBACK, v)]))
                .map(|s| s.cloudformation_fallback)
        };
        assert_eq!(with("false"), Ok(false));
        assert_eq!(with("0"), Ok(false));
        assert_eq!(with("TRUE"), Ok(true));
        let e = with("maybe").unwrap_err().to_string();
        assert!(e.starts_with("STACKFLOW_CFN_FALLBACK is \"maybe\""), "{e}");
    }

    #[test]
    fn a_region_is_required() {
        let s = Settings::from_vars(vars(&[(TABLE, "t"), (BUCKET, "b")])).unwrap();
        let config = SdkConfig::builder()
            .behavior_version(BehaviorVersion::latest())
            .build();
        let e = s.tasks(&config).err().unwrap().to_string();
        assert!(e.starts_with("AWS_REGION is not set"), "{e}");
    }

    #[tokio::test]
    async fn builds_the_tasks_without_a_network_call() {
        let s = Settings::from_vars(vars(&[(TABLE, "t"), (BUCKET, "b")])).unwrap();
        let config = SdkConfig::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(aws_types::region::Region::new("eu-west-1"))
            .endpoint_url("http://127.0.0.1:9")
            .build();
        let tasks = s.tasks(&config).unwrap();
        assert_eq!(tasks.bucket, "b");
        assert_eq!(tasks.engine.region, "eu-west-1");
        assert_eq!(tasks.engine.who, "lambda");
        // The bucket is set, so custom resources have their provider.
        let routed = tasks
            .engine
            .providers
            .route("Custom::Thing", &serde_json::Map::new(), None)
            .unwrap();
        assert_eq!(routed.kind, stackflow_events::event::ProviderKind::Custom);
    }
}
