//! The templates: corpus cases, their inputs, and
//! whether a run succeeded.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use stackflow_core::intrinsics::{Pseudo, bind_parameters};
use stackflow_core::template::{StackTemplate, load_path};
use stackflow_engine::stack::StackInput;
use stackflow_engine::{DeployOptions, StackReport, StackStatus};
use stackflow_tests::emulator::{ACCOUNT_ID, REGION};

pub(crate) fn corpus(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/corpus")
        .join(case)
}

pub(crate) fn load_case(case: &str) -> StackTemplate {
    let mut stacks = load_path(&corpus(case)).unwrap_or_else(|e| panic!("{case}: {e}"));
    assert_eq!(stacks.len(), 1, "{case}: one stack");
    stacks.remove(0)
}

pub(crate) fn input(stack: &StackTemplate, name: &str) -> StackInput {
    let parameters = bind_parameters(&stack.template, &stack.parameters)
        .unwrap_or_else(|e| panic!("{}: {e}", stack.name));
    StackInput {
        name: name.to_string(),
        source: stack.file.display().to_string(),
        template: stack.template.clone(),
        parameters,
        pseudo: Pseudo {
            region: REGION.to_string(),
            account_id: Some(ACCOUNT_ID.to_string()),
            stack_name: name.to_string(),
            stack_id: None,
        },
        nested: stack.nested.clone(),
    }
}

/// The default settings (adaptive limits per service), or one limit of `pinned`.
pub(crate) fn options(pinned: Option<usize>) -> DeployOptions {
    match pinned {
        Some(n) => DeployOptions::new().pinned(n),
        None => DeployOptions::new(),
    }
}

/// `None` when the run succeeded, else why not.
pub(crate) fn problem(report: &StackReport) -> Option<String> {
    if report.status == StackStatus::Succeeded {
        return None;
    }
    let failures: Vec<String> = report
        .failures
        .iter()
        .take(3)
        .map(|f| {
            format!(
                "{} ({}) {}: {}: {}",
                f.logical_id, f.resource_type, f.action, f.error.name, f.error.message
            )
        })
        .collect();
    Some(format!(
        "{:?}; skipped {:?}; {}",
        report.status,
        report.skipped,
        failures.join("; ")
    ))
}

/// How many resources of each type the generated large template has, in this order:
/// types with SDK providers (SQS, SNS, Logs, SSM, CloudWatch alarms, EventBridge rules)
/// and one that goes through Cloud Control (ECR repositories).
pub(crate) const LARGE_MIX: [(&str, usize); 7] = [
    ("AWS::SQS::Queue", 200),
    ("AWS::SNS::Topic", 150),
    ("AWS::Logs::LogGroup", 150),
    ("AWS::SSM::Parameter", 300),
    ("AWS::CloudWatch::Alarm", 100),
    ("AWS::Events::Rule", 50),
    // Through Cloud Control (every other type has an SDK provider).
    ("AWS::ECR::Repository", 50),
];

/// The generated template of [`LARGE_MIX`]: each parameter holds a queue's ARN (the first
/// 200) or a topic's ARN, and each alarm notifies a topic, so a third of the resources
/// wait for another.
pub(crate) fn large_template() -> Value {
    let mut resources = serde_json::Map::new();
    let mut add = |id: String, ty: &str, props: Value| {
        resources.insert(id, json!({"Type": ty, "Properties": props}));
    };
    for (ty, n) in LARGE_MIX {
        for i in 0..n {
            let props = match ty {
                "AWS::SQS::Queue" | "AWS::SNS::Topic" => json!({}),
                "AWS::Logs::LogGroup" => json!({"RetentionInDays": 1}),
                "AWS::SSM::Parameter" if i < 200 => json!({"Type": "String",
                    "Value": {"Fn::GetAtt": [format!("Queue{i}"), "Arn"]}}),
                "AWS::SSM::Parameter" => json!({"Type": "String",
                    "Value": {"Ref": format!("Topic{}", i - 200)}}),
                "AWS::CloudWatch::Alarm" => json!({
                    "Namespace": "Bench", "MetricName": format!("Metric{i}"),
                    "Statistic": "Sum", "Period": 60, "EvaluationPeriods": 1,
                    "Threshold": 1, "ComparisonOperator": "GreaterThanThreshold",
                    "AlarmActions": [{"Ref": format!("Topic{i}")}]}),
                "AWS::ECR::Repository" => json!({"RepositoryName": format!("bench-large/repo{i}"),
                    "ImageTagMutability": "MUTABLE"}),
                _ => json!({"ScheduleExpression": "rate(1 day)", "State": "DISABLED"}),
            };
            let stem = ty
                .rsplit("::")
                .next()
                .unwrap_or(ty)
                .replace("Parameter", "Param");
            add(format!("{stem}{i}"), ty, props);
        }
    }
    json!({"Resources": resources})
}

/// [`large_template`] as a stack template (from a file, as the CLI reads it).
pub(crate) fn large_stack(dir: &Path) -> StackTemplate {
    let file = dir.join("large1000.json");
    std::fs::write(&file, large_template().to_string()).expect("the large template");
    let mut stacks = load_path(&file).expect("the large template loads");
    stacks.remove(0)
}
