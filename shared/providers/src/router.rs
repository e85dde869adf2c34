//! Where a resource goes: the [`Router`] trait the engine asks, and [`Providers`], its
//! implementation over AWS (the registry of SDK providers, Cloud Control for every other
//! type, and the custom resource provider).

use std::sync::Arc;

use aws_types::SdkConfig;
use stackflow_core::ProviderKind;
use stackflow_core::error::did_you_mean;

use crate::aws::s3_client;
use crate::cloudcontrol::CloudControlProvider;
use crate::custom::CustomResourceProvider;
use crate::provider::{Properties, Provider};
use crate::registry::{Registry, Route, is_custom_type};
use crate::sdk;
use crate::throttle::{CLOUD_CONTROL, service_of};

/// Why no provider takes a resource.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// A custom resource, and no bucket for its handler's answers.
    #[error(
        "{resource_type} is a custom resource, and custom resources need a bucket for their handlers' answers: stackflow's own (stackflow-<account>-<region>) when the AWS account is known, else pass --store-bucket NAME (or set STACKFLOW_BUCKET)"
    )]
    NoAnswerBucket {
        /// The type.
        resource_type: String,
    },
    /// A type neither an SDK provider nor Cloud Control knows (`suggestion`: a "did you
    /// mean" of the closest known type, or empty).
    #[error(
        "no provider can handle {resource_type}: it has no SDK provider and Cloud Control does not know it{suggestion}"
    )]
    Unknown {
        /// The type.
        resource_type: String,
        /// The closest known type, said as a suggestion, or empty.
        suggestion: String,
    },
    /// A resource an SDK provider made, whose provider this build no longer has.
    #[error("no SDK provider for {resource_type} any more")]
    NoSdkProvider {
        /// The type.
        resource_type: String,
    },
    /// A nested stack asked of a router that serves AWS resources only.
    #[error("a nested stack has no provider of its own: the engine deploys it as a stack")]
    NestedStack,
}

/// Picks the provider of each resource. The engine depends on this trait only, so that
/// its lifecycle can be tested with a fake provider.
pub trait Router: Send + Sync {
    /// The provider of a resource of `resource_type` with `properties`, given the kind
    /// recorded by an earlier deploy. `Err` says why none can take it.
    fn route(
        &self,
        resource_type: &str,
        properties: &Properties,
        recorded: Option<ProviderKind>,
    ) -> Result<Routed, RouteError>;

    /// The provider that made a recorded resource (for updates, deletes and undo).
    fn for_recorded(
        &self,
        resource_type: &str,
        kind: ProviderKind,
    ) -> Result<Arc<dyn Provider>, RouteError>;

    /// The AWS services the calls of an action on a resource of `resource_type` go to,
    /// the one its own calls are sent to first (Cloud Control's API, then the type's
    /// service, for a type served through Cloud Control): the engine limits how many
    /// actions of each run at once.
    fn services(&self, resource_type: &str) -> Vec<String> {
        vec![service_of(resource_type)]
    }
}

/// Every provider a deploy can route a resource to.
#[derive(Clone)]
pub struct Providers {
    /// The SDK providers by type, and the routing rules.
    pub registry: Registry,
    /// The generic provider.
    pub cloud_control: Arc<dyn Provider>,
    /// The custom resource provider, when a bucket for the handlers' answers is set.
    pub custom: Option<Arc<dyn Provider>>,
}

impl std::fmt::Debug for Providers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Providers")
            .field("registry", &self.registry)
            .field("custom", &self.custom.is_some())
            .finish()
    }
}

/// Where a resource goes, and what to record.
#[derive(Clone)]
pub struct Routed {
    /// The provider.
    pub provider: Arc<dyn Provider>,
    /// The kind recorded in state.
    pub kind: ProviderKind,
}

impl Providers {
    /// Every SDK provider of stackflow, Cloud Control, and the custom resource provider
    /// when `custom_bucket` names the bucket where handlers put their answers.
    ///
    /// The clients do not retry by themselves: every call of a provider goes through
    /// [`crate::retry::retry`], which sees each throttling answer (and tells the engine's
    /// limits of it) instead of the SDK absorbing them.
    pub fn from_config(config: &SdkConfig, custom_bucket: Option<String>) -> Providers {
        Providers::from_config_with_role(config, custom_bucket, None)
    }

    /// [`Providers::from_config`], Cloud Control sending `role_arn` (the engine's
    /// provisioning role) as the `RoleArn` of its creates, updates and deletes.
    pub fn from_config_with_role(
        config: &SdkConfig,
        custom_bucket: Option<String>,
        role_arn: Option<String>,
    ) -> Providers {
        Providers::from_config_with_session(config, custom_bucket, role_arn, None)
    }

    /// [`Providers::from_config_with_role`], the custom resources' `ResponseURL`s signed
    /// by sessions `session` makes (see [`CustomResourceProvider::with_response_session`]).
    pub fn from_config_with_session(
        config: &SdkConfig,
        custom_bucket: Option<String>,
        role_arn: Option<String>,
        session: Option<crate::custom::ResponseSession>,
    ) -> Providers {
        let config = &config
            .to_builder()
            .retry_config(aws_sdk_cloudcontrol::config::retry::RetryConfig::disabled())
            .build();
        let mut registry = Registry::new();
        register_ec2_edge(&mut registry, &aws_sdk_ec2::Client::new(config));
        let s3 = s3_client(config);
        let lambda = aws_sdk_lambda::Client::new(config);
        let sns = aws_sdk_sns::Client::new(config);
        register_first(&mut registry, config, &lambda, &sns, &s3);
        register_iam(&mut registry, &aws_sdk_iam::Client::new(config));
        register_policies(&mut registry, &lambda, &sns, &s3, config);
        register_secrets_keys_clusters(&mut registry, config);
        register_rules_alarms_states(&mut registry, config);
        register_ec2_network(&mut registry, config);
        registry.register_all([(
            sdk::apigateway_account::TYPE,
            Arc::new(sdk::apigateway_account::ApiGatewayAccountProvider::new(
                aws_sdk_apigateway::Client::new(config),
            )) as Arc<dyn Provider>,
        )]);
        let cloud_control = Arc::new(
            CloudControlProvider::new(aws_sdk_cloudcontrol::Client::new(config))
                .with_role_arn(role_arn),
        );
        let custom = custom_bucket.map(|bucket| {
            let custom = CustomResourceProvider::new(lambda, sns, s3, bucket);
            let custom = match session {
                Some(session) => custom.with_response_session(session),
                None => custom,
            };
            Arc::new(custom) as Arc<dyn Provider>
        });
        Providers {
            registry,
            cloud_control,
            custom,
        }
    }
}

/// The first SDK providers: SSM parameters, SQS queues, SNS topics, log groups, DynamoDB
/// tables, S3 buckets, IAM roles and Lambda functions.
fn register_first(
    registry: &mut Registry,
    config: &SdkConfig,
    lambda: &aws_sdk_lambda::Client,
    sns: &aws_sdk_sns::Client,
    s3: &aws_sdk_s3::Client,
) {
    let providers: [(&str, Arc<dyn Provider>); 8] = [
        (
            sdk::ssm::TYPE,
            Arc::new(sdk::ssm::SsmParameterProvider::new(
                aws_sdk_ssm::Client::new(config),
            )),
        ),
        (
            sdk::sqs::TYPE,
            Arc::new(sdk::sqs::SqsQueueProvider::new(aws_sdk_sqs::Client::new(
                config,
            ))),
        ),
        (
            sdk::sns::TYPE,
            Arc::new(sdk::sns::SnsTopicProvider::new(sns.clone())),
        ),
        (
            sdk::logs::TYPE,
            Arc::new(sdk::logs::LogGroupProvider::new(
                aws_sdk_cloudwatchlogs::Client::new(config),
            )),
        ),
        (
            sdk::dynamodb::TYPE,
            Arc::new(sdk::dynamodb::DynamoDbTableProvider::new(
                aws_sdk_dynamodb::Client::new(config),
            )),
        ),
        (
            sdk::s3::TYPE,
            Arc::new(sdk::s3::S3BucketProvider::new(s3.clone())),
        ),
        (
            sdk::iam::TYPE,
            Arc::new(sdk::iam::IamRoleProvider::new(aws_sdk_iam::Client::new(
                config,
            ))),
        ),
        (
            sdk::lambda::TYPE,
            Arc::new(sdk::lambda::LambdaFunctionProvider::new(lambda.clone())),
        ),
    ];
    registry.register_all(providers);
}

/// The IAM providers besides the role's: inline and managed policies, instance profiles.
fn register_iam(registry: &mut Registry, iam: &aws_sdk_iam::Client) {
    let providers: [(&str, Arc<dyn Provider>); 3] = [
        (
            sdk::iam_policy::TYPE,
            Arc::new(sdk::iam_policy::IamPolicyProvider::new(iam.clone())),
        ),
        (
            sdk::iam_managed_policy::TYPE,
            Arc::new(sdk::iam_managed_policy::IamManagedPolicyProvider::new(
                iam.clone(),
            )),
        ),
        (
            sdk::iam_instance_profile::TYPE,
            Arc::new(sdk::iam_instance_profile::IamInstanceProfileProvider::new(
                iam.clone(),
            )),
        ),
    ];
    registry.register_all(providers);
}

/// The providers of permissions, subscriptions and resource policies: Lambda permissions
/// and event source mappings, SNS subscriptions, SQS queue policies, S3 bucket policies.
fn register_policies(
    registry: &mut Registry,
    lambda: &aws_sdk_lambda::Client,
    sns: &aws_sdk_sns::Client,
    s3: &aws_sdk_s3::Client,
    config: &SdkConfig,
) {
    use sdk::{lambda_event_source, lambda_permission, s3_bucket_policy};
    use sdk::{sns_subscription, sqs_queue_policy};
    let sqs = aws_sdk_sqs::Client::new(config);
    let providers: [(&str, Arc<dyn Provider>); 5] = [
        (
            lambda_permission::TYPE,
            Arc::new(lambda_permission::LambdaPermissionProvider::new(
                lambda.clone(),
            )),
        ),
        (
            lambda_event_source::TYPE,
            Arc::new(lambda_event_source::EventSourceMappingProvider::new(
                lambda.clone(),
            )),
        ),
        (
            sns_subscription::TYPE,
            Arc::new(sns_subscription::SnsSubscriptionProvider::new(sns.clone())),
        ),
        (
            sqs_queue_policy::TYPE,
            Arc::new(sqs_queue_policy::SqsQueuePolicyProvider::new(sqs)),
        ),
        (
            s3_bucket_policy::TYPE,
            Arc::new(s3_bucket_policy::S3BucketPolicyProvider::new(s3.clone())),
        ),
    ];
    registry.register_all(providers);
}

/// The providers of Secrets Manager secrets, KMS keys and aliases, and ECS clusters.
fn register_secrets_keys_clusters(registry: &mut Registry, config: &SdkConfig) {
    use sdk::{ecs, kms, secretsmanager};
    let kms_client = aws_sdk_kms::Client::new(config);
    let providers: [(&str, Arc<dyn Provider>); 4] = [
        (
            secretsmanager::TYPE,
            Arc::new(secretsmanager::SecretProvider::new(
                aws_sdk_secretsmanager::Client::new(config),
            )),
        ),
        (
            kms::key::TYPE,
            Arc::new(kms::KmsKeyProvider::new(kms_client.clone())),
        ),
        (
            kms::alias::TYPE,
            Arc::new(kms::KmsAliasProvider::new(kms_client)),
        ),
        (
            ecs::TYPE,
            Arc::new(ecs::EcsClusterProvider::new(aws_sdk_ecs::Client::new(
                config,
            ))),
        ),
    ];
    registry.register_all(providers);
}

/// The EC2 providers of addresses, NAT gateways, security groups and their rules, and VPC
/// endpoints, over one client.
fn register_ec2_edge(registry: &mut Registry, ec2: &aws_sdk_ec2::Client) {
    use sdk::ec2::{eip, nat_gateway, security_group, sg_rule, vpc_endpoint};
    let providers: [(&str, Arc<dyn Provider>); 6] = [
        (eip::TYPE, Arc::new(eip::EipProvider::new(ec2.clone()))),
        (
            nat_gateway::TYPE,
            Arc::new(nat_gateway::NatGatewayProvider::new(ec2.clone())),
        ),
        (
            security_group::TYPE,
            Arc::new(security_group::SecurityGroupProvider::new(ec2.clone())),
        ),
        (
            sg_rule::ingress::TYPE,
            Arc::new(sg_rule::ingress::SecurityGroupIngressProvider::new(
                ec2.clone(),
            )),
        ),
        (
            sg_rule::egress::TYPE,
            Arc::new(sg_rule::egress::SecurityGroupEgressProvider::new(
                ec2.clone(),
            )),
        ),
        (
            vpc_endpoint::TYPE,
            Arc::new(vpc_endpoint::VpcEndpointProvider::new(ec2.clone())),
        ),
    ];
    registry.register_all(providers);
}

/// The providers of EventBridge rules, CloudWatch alarms and Step Functions state machines.
fn register_rules_alarms_states(registry: &mut Registry, config: &SdkConfig) {
    use sdk::{cloudwatch_alarm, events_rule, stepfunctions};
    let providers: [(&str, Arc<dyn Provider>); 3] = [
        (
            events_rule::TYPE,
            Arc::new(events_rule::EventRuleProvider::new(
                aws_sdk_eventbridge::Client::new(config),
            )),
        ),
        (
            cloudwatch_alarm::TYPE,
            Arc::new(cloudwatch_alarm::AlarmProvider::new(
                aws_sdk_cloudwatch::Client::new(config),
            )),
        ),
        (
            stepfunctions::TYPE,
            Arc::new(stepfunctions::StateMachineProvider::new(
                aws_sdk_sfn::Client::new(config),
            )),
        ),
    ];
    registry.register_all(providers);
}

/// The EC2 providers of the network itself: VPCs, subnets, internet gateways and their
/// attachments, route tables, routes and subnet route table associations, over one client.
fn register_ec2_network(registry: &mut Registry, config: &SdkConfig) {
    use sdk::ec2::{gateway_attachment, internet_gateway, route, route_table};
    use sdk::ec2::{route_table_association, subnet, vpc};
    let ec2 = aws_sdk_ec2::Client::new(config);
    let providers: [(&str, Arc<dyn Provider>); 7] = [
        (vpc::TYPE, Arc::new(vpc::VpcProvider::new(ec2.clone()))),
        (
            subnet::TYPE,
            Arc::new(subnet::SubnetProvider::new(ec2.clone())),
        ),
        (
            internet_gateway::TYPE,
            Arc::new(internet_gateway::InternetGatewayProvider::new(ec2.clone())),
        ),
        (
            gateway_attachment::TYPE,
            Arc::new(gateway_attachment::VpcGatewayAttachmentProvider::new(
                ec2.clone(),
            )),
        ),
        (
            route_table::TYPE,
            Arc::new(route_table::RouteTableProvider::new(ec2.clone())),
        ),
        (
            route::TYPE,
            Arc::new(route::RouteProvider::new(ec2.clone())),
        ),
        (
            route_table_association::TYPE,
            Arc::new(route_table_association::SubnetRouteTableAssociationProvider::new(ec2)),
        ),
    ];
    registry.register_all(providers);
}

impl Router for Providers {
    fn services(&self, resource_type: &str) -> Vec<String> {
        let service = service_of(resource_type);
        let through_cloud_control =
            !is_custom_type(resource_type) && self.registry.sdk_provider(resource_type).is_none();
        if through_cloud_control {
            vec![CLOUD_CONTROL.to_string(), service]
        } else {
            vec![service]
        }
    }

    fn route(
        &self,
        resource_type: &str,
        properties: &Properties,
        recorded: Option<ProviderKind>,
    ) -> Result<Routed, RouteError> {
        match self.registry.route(resource_type, properties, recorded) {
            Some(Route::Sdk(provider)) => Ok(Routed {
                provider,
                kind: ProviderKind::Sdk,
            }),
            Some(Route::CloudControl) => Ok(Routed {
                provider: self.cloud_control.clone(),
                kind: ProviderKind::CloudControl,
            }),
            Some(Route::Custom) => match &self.custom {
                Some(provider) => Ok(Routed {
                    provider: provider.clone(),
                    kind: ProviderKind::Custom,
                }),
                None => Err(RouteError::NoAnswerBucket {
                    resource_type: resource_type.to_string(),
                }),
            },
            None => Err(RouteError::Unknown {
                resource_type: resource_type.to_string(),
                suggestion: did_you_mean(stackflow_core::schema::closest_type(resource_type)),
            }),
        }
    }

    fn for_recorded(
        &self,
        resource_type: &str,
        kind: ProviderKind,
    ) -> Result<Arc<dyn Provider>, RouteError> {
        match kind {
            ProviderKind::Sdk => self
                .registry
                .sdk_provider(resource_type)
                .cloned()
                .ok_or_else(|| RouteError::NoSdkProvider {
                    resource_type: resource_type.to_string(),
                }),
            ProviderKind::CloudControl => Ok(self.cloud_control.clone()),
            ProviderKind::Custom => self
                .custom
                .clone()
                .ok_or_else(|| RouteError::NoAnswerBucket {
                    resource_type: resource_type.to_string(),
                }),
            ProviderKind::NestedStack => Err(RouteError::NestedStack),
        }
    }
}
