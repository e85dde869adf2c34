//! Hand-written SDK providers, one per resource type.

pub mod apigateway_account;
pub mod cloudwatch_alarm;
pub(crate) mod common;
pub mod dynamodb;
pub mod ec2;
pub mod ecs;
pub mod events_rule;
pub mod iam;
pub mod iam_instance_profile;
pub mod iam_managed_policy;
pub mod iam_policy;
pub mod kms;
pub mod lambda;
pub mod lambda_event_source;
pub mod lambda_permission;
pub mod logs;
pub(crate) mod policy_json;
pub mod s3;
pub mod s3_bucket_policy;
pub mod secretsmanager;
pub mod sns;
pub mod sns_subscription;
pub mod sqs;
pub mod sqs_queue_policy;
pub mod ssm;
pub mod stepfunctions;

pub use common::marks;
pub use sqs::SqsQueueProvider;
pub use ssm::SsmParameterProvider;

#[cfg(test)]
mod defaults_tie;
