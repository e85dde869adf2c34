//! Hand-written SDK providers, one per resource type.

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
pub mod logs;
pub mod s3;
pub mod secretsmanager;
pub mod sns;
pub mod sqs;
pub mod ssm;
pub mod stepfunctions;

pub use sqs::SqsQueueProvider;
pub use ssm::SsmParameterProvider;
