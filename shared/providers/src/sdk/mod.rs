//! Hand-written SDK providers, one per resource type.

pub mod sqs;
pub mod ssm;

pub use sqs::SqsQueueProvider;
pub use ssm::SsmParameterProvider;
