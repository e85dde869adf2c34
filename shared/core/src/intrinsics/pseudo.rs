//! Pseudo parameters (`AWS::Region`, `AWS::Partition`, ...).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What the pseudo parameters resolve to for one stack.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Pseudo {
    /// The region the stack is deployed to.
    pub region: String,
    /// The account id, when known (it takes an AWS call to learn it).
    pub account_id: Option<String>,
    /// The stack name.
    pub stack_name: String,
    /// The stack id, when known.
    pub stack_id: Option<String>,
}

pub use crate::partition::{partition, url_suffix};

/// The value of a pseudo parameter: `Some(Some(v))` when known, `Some(None)` when it is a
/// pseudo parameter whose value is not known yet, `None` when `name` is not one (and not
/// `AWS::NoValue`, which the resolver handles).
pub(crate) fn value(p: &Pseudo, name: &str) -> Option<Option<Value>> {
    Some(match name {
        "AWS::Region" => Some(Value::String(p.region.clone())),
        "AWS::Partition" => Some(Value::String(partition(&p.region).into())),
        "AWS::URLSuffix" => Some(Value::String(url_suffix(&p.region).into())),
        "AWS::StackName" => Some(Value::String(p.stack_name.clone())),
        "AWS::AccountId" => p.account_id.clone().map(Value::String),
        "AWS::StackId" => p.stack_id.clone().map(Value::String),
        "AWS::NotificationARNs" => Some(Value::Array(vec![])),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_and_suffixes() {
        for (region, part, suffix) in [
            ("us-east-1", "aws", "amazonaws.com"),
            ("eu-west-3", "aws", "amazonaws.com"),
            ("cn-north-1", "aws-cn", "amazonaws.com.cn"),
            ("cn-northwest-1", "aws-cn", "amazonaws.com.cn"),
            ("us-gov-west-1", "aws-us-gov", "amazonaws.com"),
            ("us-gov-east-1", "aws-us-gov", "amazonaws.com"),
            ("us-iso-east-1", "aws-iso", "c2s.ic.gov"),
            ("us-isob-east-1", "aws-iso-b", "sc2s.sgov.gov"),
        ] {
            assert_eq!(partition(region), part, "{region}");
            assert_eq!(url_suffix(region), suffix, "{region}");
        }
    }

    #[test]
    fn unknown_account_is_not_known_yet() {
        let p = Pseudo {
            region: "us-east-1".into(),
            stack_name: "s".into(),
            ..Pseudo::default()
        };
        assert_eq!(value(&p, "AWS::AccountId"), Some(None));
        assert_eq!(
            value(&p, "AWS::StackName"),
            Some(Some(Value::String("s".into())))
        );
        assert_eq!(value(&p, "AWS::Foo"), None);
    }
}
