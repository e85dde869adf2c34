//! The values AWS gives a property the template leaves out, for the types whose
//! providers leave a property out of what they read when it holds that value
//! (`read_current_state` reports only what differs from AWS's default).
//!
//! A recorded property that equals its default is therefore in sync with a read that
//! does not have it: a template that spells a default (`VisibilityTimeout: 30`,
//! `MemorySize: 128`) is not drift where no baseline stands in (a refused baseline, the
//! properties an import compares).

use serde_json::{Value, json};

/// Per type, the top-level properties and the value AWS holds when none is given.
fn table() -> &'static [(&'static str, &'static [(&'static str, DefaultValue)])] {
    use DefaultValue::{Bool, Int, Text};
    &[
        (
            "AWS::EC2::VPC",
            &[
                ("InstanceTenancy", Text("default")),
                ("EnableDnsSupport", Bool(true)),
                ("EnableDnsHostnames", Bool(false)),
            ],
        ),
        ("AWS::EC2::Subnet", &[("MapPublicIpOnLaunch", Bool(false))]),
        (
            "AWS::IAM::Role",
            &[
                ("Path", Text("/")),
                ("MaxSessionDuration", Int(3600)),
                ("Description", Text("")),
            ],
        ),
        (
            "AWS::IAM::ManagedPolicy",
            &[("Path", Text("/")), ("Description", Text(""))],
        ),
        ("AWS::IAM::InstanceProfile", &[("Path", Text("/"))]),
        (
            "AWS::Lambda::Function",
            &[
                ("Timeout", Int(3)),
                ("MemorySize", Int(128)),
                ("Description", Text("")),
                ("Architectures", Text("x86_64")),
            ],
        ),
        (
            "AWS::Logs::LogGroup",
            &[("LogGroupClass", Text("STANDARD"))],
        ),
        (
            "AWS::SNS::Topic",
            &[
                ("DisplayName", Text("")),
                ("FifoTopic", Bool(false)),
                ("ContentBasedDeduplication", Bool(false)),
                ("KmsMasterKeyId", Text("")),
                ("SignatureVersion", Text("1")),
                ("TracingConfig", Text("PassThrough")),
            ],
        ),
        (
            "AWS::SQS::Queue",
            &[
                ("DelaySeconds", Int(0)),
                ("MaximumMessageSize", Int(262_144)),
                ("MessageRetentionPeriod", Int(345_600)),
                ("ReceiveMessageWaitTimeSeconds", Int(0)),
                ("VisibilityTimeout", Int(30)),
                ("KmsDataKeyReusePeriodSeconds", Int(300)),
                ("FifoQueue", Bool(false)),
                ("ContentBasedDeduplication", Bool(false)),
                ("SqsManagedSseEnabled", Bool(true)),
            ],
        ),
        (
            "AWS::SNS::Subscription",
            &[
                ("RawMessageDelivery", Bool(false)),
                ("FilterPolicyScope", Text("MessageAttributes")),
            ],
        ),
        (
            "AWS::Lambda::EventSourceMapping",
            &[
                ("Enabled", Bool(true)),
                ("BisectBatchOnFunctionError", Bool(false)),
                ("MaximumBatchingWindowInSeconds", Int(0)),
                ("MaximumRetryAttempts", Int(-1)),
                ("MaximumRecordAgeInSeconds", Int(-1)),
                ("ParallelizationFactor", Int(1)),
                ("TumblingWindowInSeconds", Int(0)),
            ],
        ),
        (
            "AWS::SSM::Parameter",
            &[("Tier", Text("Standard")), ("DataType", Text("text"))],
        ),
        (
            "AWS::DynamoDB::Table",
            &[
                ("BillingMode", Text("PROVISIONED")),
                ("DeletionProtectionEnabled", Bool(false)),
            ],
        ),
        ("AWS::Events::Rule", &[("State", Text("ENABLED"))]),
        (
            "AWS::CloudWatch::Alarm",
            &[
                ("ActionsEnabled", Bool(true)),
                ("TreatMissingData", Text("missing")),
            ],
        ),
        (
            "AWS::StepFunctions::StateMachine",
            &[("StateMachineType", Text("STANDARD"))],
        ),
    ]
}

/// A default as the table spells it (a `const`-friendly JSON value).
#[derive(Debug, Clone, Copy)]
enum DefaultValue {
    Text(&'static str),
    Int(i64),
    Bool(bool),
}

/// The defaults of `resource_type`: top-level property name and value. `Architectures`
/// is a one-item list.
pub fn defaults_of(resource_type: &str) -> Vec<(String, Value)> {
    let Some((_, props)) = table().iter().find(|(t, _)| *t == resource_type) else {
        return Vec::new();
    };
    props
        .iter()
        .map(|(name, v)| {
            let value = match (*name, *v) {
                ("Architectures", DefaultValue::Text(t)) => json!([t]),
                (_, DefaultValue::Text(t)) => json!(t),
                (_, DefaultValue::Int(i)) => json!(i),
                (_, DefaultValue::Bool(b)) => json!(b),
            };
            (name.to_string(), value)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::{Map, json};

    use super::*;
    use crate::drift::{Classification, CompareRules, compare};

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().expect("an object").clone()
    }

    fn classify(ty: &str, recorded: Value, aws: Value, observed: bool) -> Classification {
        compare(
            &map(recorded),
            &map(aws),
            &CompareRules::for_type(ty, observed),
        )
        .classification
    }

    #[test]
    fn a_recorded_default_equals_a_read_without_it() {
        let role = json!({"RoleName": "r", "MaxSessionDuration": 3600, "Path": "/"});
        let cases = [
            ("AWS::IAM::Role", role, json!({"RoleName": "r"})),
            (
                "AWS::Lambda::Function",
                json!({"MemorySize": 128, "Timeout": "3", "Architectures": ["x86_64"]}),
                json!({}),
            ),
            (
                "AWS::SQS::Queue",
                json!({"VisibilityTimeout": 30, "FifoQueue": "false"}),
                json!({}),
            ),
            (
                "AWS::SNS::Topic",
                json!({"DisplayName": "", "SignatureVersion": 1}),
                json!({}),
            ),
            (
                "AWS::SSM::Parameter",
                json!({"Tier": "Standard"}),
                json!({}),
            ),
            (
                "AWS::DynamoDB::Table",
                json!({"BillingMode": "PROVISIONED"}),
                json!({}),
            ),
            (
                "AWS::Logs::LogGroup",
                json!({"LogGroupClass": "STANDARD"}),
                json!({}),
            ),
        ];
        for (ty, recorded, aws) in cases {
            for observed in [false, true] {
                let got = classify(ty, recorded.clone(), aws.clone(), observed);
                assert_eq!(got, Classification::InSync, "{ty} {recorded}");
            }
        }
    }

    #[test]
    fn a_recorded_value_other_than_the_default_is_drift() {
        let got = classify(
            "AWS::DynamoDB::Table",
            json!({"BillingMode": "PAY_PER_REQUEST"}),
            json!({}),
            false,
        );
        let Classification::Drifted(d) = got else {
            panic!("{got:?}")
        };
        assert_eq!(d[0].path, "/BillingMode");
        let got = classify(
            "AWS::SQS::Queue",
            json!({"VisibilityTimeout": 45}),
            json!({}),
            true,
        );
        assert!(matches!(got, Classification::Drifted(_)), "{got:?}");
        // Another type's default is not this one's.
        let got = classify(
            "AWS::SNS::Topic",
            json!({"VisibilityTimeout": 30}),
            json!({}),
            false,
        );
        assert!(matches!(got, Classification::Drifted(_)), "{got:?}");
    }

    #[test]
    fn only_top_level_properties_have_defaults() {
        let got = classify(
            "AWS::IAM::Role",
            json!({"Policies": [{"Path": "/"}]}),
            json!({"Policies": [{}]}),
            false,
        );
        assert!(matches!(got, Classification::Drifted(_)), "{got:?}");
    }

    #[test]
    fn iam_policy_and_profile_paths_default_to_the_root() {
        let cases = [
            (
                "AWS::IAM::ManagedPolicy",
                json!({"ManagedPolicyName": "p", "Path": "/", "Description": ""}),
                json!({"ManagedPolicyName": "p"}),
            ),
            (
                "AWS::IAM::InstanceProfile",
                json!({"Path": "/", "Roles": ["r"]}),
                json!({"Roles": ["r"]}),
            ),
        ];
        for (ty, recorded, aws) in cases {
            for observed in [false, true] {
                let got = classify(ty, recorded.clone(), aws.clone(), observed);
                assert_eq!(got, Classification::InSync, "{ty} {recorded}");
            }
        }
    }
}
