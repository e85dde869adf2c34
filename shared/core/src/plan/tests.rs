use indexmap::IndexMap;
use serde_json::{Value, json};

use super::*;
use crate::error::ErrorKind;
use crate::intrinsics::{EmptyEnvironment, bind_parameters, unknown};

fn pseudo() -> Pseudo {
    Pseudo {
        region: "us-east-1".into(),
        account_id: Some("123456789012".into()),
        stack_name: "s".into(),
        stack_id: None,
    }
}

fn t(v: Value) -> Template {
    Template::from_value(&v).unwrap()
}

fn plan_of(template: &Template, state: &CurrentState, params: &[(&str, &str)]) -> Result<Plan> {
    let given: IndexMap<String, String> = params
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let parameters = bind_parameters(template, &given)?;
    plan(&PlanInput {
        stack: "s",
        template,
        parameters: &parameters,
        pseudo: &pseudo(),
        state,
        env: &EmptyEnvironment,
        digest_key: None,
        secret_digests: None,
    })
}

fn deployed(template: &Template, params: &[(&str, &str)]) -> CurrentState {
    let given: IndexMap<String, String> = params
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let parameters = bind_parameters(template, &given).unwrap();
    synthetic_state(template, &parameters, &pseudo()).unwrap()
}

fn actions(p: &Plan) -> Vec<(String, Action)> {
    p.resources
        .iter()
        .map(|r| (r.logical_id.clone(), r.action))
        .collect()
}

#[test]
fn everything_is_a_create_against_an_empty_stack() {
    let tpl = t(json!({"Resources": {
        "Role": {"Type": "AWS::IAM::Role", "Properties": {"AssumeRolePolicyDocument": {}}},
        "Fn": {"Type": "AWS::Lambda::Function", "Properties": {"Role": {"Fn::GetAtt": ["Role", "Arn"]}}}
    }, "Outputs": {"Arn": {"Value": {"Fn::GetAtt": ["Fn", "Arn"]}}}}));
    let p = plan_of(&tpl, &CurrentState::default(), &[]).unwrap();
    assert_eq!(
        actions(&p),
        vec![
            ("Role".into(), Action::Create),
            ("Fn".into(), Action::Create)
        ]
    );
    assert_eq!(p.resources[1].properties["Role"], unknown("Role.Arn"));
    assert_eq!(p.resources[1].depends_on, vec!["Role"]);
    assert_eq!(p.outputs["Arn"].value, unknown("Fn.Arn"));
    assert!(!p.is_empty());
}

#[test]
fn the_same_template_again_is_all_no_ops() {
    let tpl = t(json!({"Resources": {
        "Role": {"Type": "AWS::IAM::Role", "Properties": {"AssumeRolePolicyDocument": {}}},
        "Fn": {"Type": "AWS::Lambda::Function", "Properties": {
            "Role": {"Fn::GetAtt": ["Role", "Arn"]}, "Timeout": 30, "FunctionName": {"Fn::Sub": "${Role}-fn"}}}
    }}));
    let state = deployed(&tpl, &[]);
    let p = plan_of(&tpl, &state, &[]).unwrap();
    assert!(p.is_empty(), "{:?}", actions(&p));
    assert!(p.resources.iter().all(|r| r.reason == Reason::Unchanged));
}

#[test]
fn updates_replacements_and_deletes_with_reasons() {
    let v1 = t(json!({"Resources": {
        "Q": {"Type": "AWS::SQS::Queue", "Properties": {"VisibilityTimeout": 30, "Tags": [{"Key": "a", "Value": "1"}]}},
        "B": {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": "one"}},
        "P": {"Type": "AWS::SSM::Parameter", "Properties": {"Type": "String", "Value": {"Ref": "B"}}},
        "Gone": {"Type": "AWS::SNS::Topic"},
        "Dep": {"Type": "AWS::SNS::Topic", "DependsOn": "Gone", "DeletionPolicy": "Retain"}
    }}));
    let v2 = t(json!({"Resources": {
        "Q": {"Type": "AWS::SQS::Queue", "Properties": {"VisibilityTimeout": "120", "Tags": [{"Key": "a", "Value": "2"}]}},
        "B": {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": "two"}},
        "P": {"Type": "AWS::SSM::Parameter", "Properties": {"Type": "String", "Value": {"Ref": "B"}}}
    }}));
    let p = plan_of(&v2, &deployed(&v1, &[]), &[]).unwrap();
    assert_eq!(
        actions(&p),
        vec![
            ("Q".into(), Action::Update),
            ("B".into(), Action::Replace),
            ("P".into(), Action::Update),
            ("Dep".into(), Action::Delete),
            ("Gone".into(), Action::Delete),
        ]
    );
    let q = p.resource("Q").unwrap();
    let paths: Vec<&str> = q.changes.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(paths, vec!["VisibilityTimeout", "Tags[0].Value"]);
    assert_eq!(q.changes[0].old, Some(json!(30)));
    assert_eq!(q.changes[0].new, Some(json!("120")));
    let b = p.resource("B").unwrap();
    assert_eq!(
        b.reason,
        Reason::CreateOnlyChanged {
            paths: vec!["BucketName".into()]
        }
    );
    // The replacement propagates: the parameter's value is known after deploy.
    let pr = p.resource("P").unwrap();
    assert_eq!(pr.changes[0].new, Some(unknown("B")));
    let dep = p.resource("Dep").unwrap();
    assert_eq!(dep.reason, Reason::RemovedFromTemplate);
    assert_eq!(dep.deletion_policy, Policy::Retain);
    assert_eq!(p.counts()[&Action::Delete], 2);
}

#[test]
fn equal_scalars_in_another_spelling_are_no_change() {
    let v1 = t(
        json!({"Resources": {"Q": {"Type": "AWS::SQS::Queue", "Properties": {"VisibilityTimeout": 30, "FifoQueue": true}}}}),
    );
    let v2 = t(
        json!({"Resources": {"Q": {"Type": "AWS::SQS::Queue", "Properties": {"VisibilityTimeout": "30", "FifoQueue": "true"}}}}),
    );
    assert!(plan_of(&v2, &deployed(&v1, &[]), &[]).unwrap().is_empty());
}

#[test]
fn type_change_and_condition_false() {
    let v1 = t(json!({
    "Parameters": {"Env": {"Type": "String", "Default": "prod"}},
    "Conditions": {"IsProd": {"Fn::Equals": [{"Ref": "Env"}, "prod"]}},
    "Resources": {
        "X": {"Type": "AWS::SNS::Topic"},
        "C": {"Type": "AWS::SQS::Queue", "Condition": "IsProd"}
    }}));
    let v2 = t(json!({
    "Parameters": {"Env": {"Type": "String", "Default": "prod"}},
    "Conditions": {"IsProd": {"Fn::Equals": [{"Ref": "Env"}, "prod"]}},
    "Resources": {
        "X": {"Type": "AWS::SQS::Queue"},
        "C": {"Type": "AWS::SQS::Queue", "Condition": "IsProd"}
    }}));
    let p = plan_of(&v2, &deployed(&v1, &[]), &[("Env", "dev")]).unwrap();
    assert_eq!(p.resource("X").unwrap().action, Action::Replace);
    assert_eq!(
        p.resource("X").unwrap().reason,
        Reason::TypeChanged {
            from: "AWS::SNS::Topic".into()
        }
    );
    let c = p.resource("C").unwrap();
    assert_eq!(c.action, Action::Delete);
    assert_eq!(
        c.reason,
        Reason::ConditionFalse {
            condition: "IsProd".into()
        }
    );
    assert!(!p.conditions["IsProd"]);
}

#[test]
fn dynamodb_key_schema_change_is_a_replacement() {
    let table = |key: &str| {
        t(
            json!({"Resources": {"T": {"Type": "AWS::DynamoDB::Table", "Properties": {
                "KeySchema": [{"AttributeName": key, "KeyType": "HASH"}],
                "AttributeDefinitions": [{"AttributeName": key, "AttributeType": "S"}],
                "BillingMode": "PAY_PER_REQUEST"
            }}}}),
        )
    };
    let p = plan_of(&table("pk"), &deployed(&table("id"), &[]), &[]).unwrap();
    let r = p.resource("T").unwrap();
    assert_eq!(r.action, Action::Replace);
    assert!(
        matches!(&r.reason, Reason::CreateOnlyChanged { paths } if paths.iter().any(|p| p.starts_with("KeySchema")))
    );
}

#[test]
fn no_echo_values_never_reach_the_plan() {
    let tpl = t(json!({
        "Parameters": {"Pw": {"Type": "String", "NoEcho": true}},
        "Resources": {"P": {"Type": "AWS::SSM::Parameter", "Properties": {"Type": "String", "Value": {"Fn::Sub": "pw=${Pw}"}}}},
        "Outputs": {"O": {"Value": {"Ref": "Pw"}}}
    }));
    let p = plan_of(&tpl, &CurrentState::default(), &[("Pw", "s3cr3t-value")]).unwrap();
    let text = serde_json::to_string(&p).unwrap();
    assert!(!text.contains("s3cr3t-value"), "{text}");
    // Masked whole: a value computed from a secret says nothing of its shape.
    assert_eq!(p.resources[0].properties["Value"], json!("****"));
    assert_eq!(p.outputs["O"].value, json!("****"));
}

#[test]
fn dynamic_references_stay_as_text_in_the_plan() {
    let tpl = t(
        json!({"Resources": {"P": {"Type": "AWS::SSM::Parameter", "Properties": {
        "Type": "String", "Value": "{{resolve:secretsmanager:db:SecretString:password}}"}}}}),
    );
    let p = plan_of(&tpl, &CurrentState::default(), &[]).unwrap();
    assert_eq!(
        p.resources[0].properties["Value"],
        json!("{{resolve:secretsmanager:db:SecretString:password}}")
    );
}

#[test]
fn plan_errors_before_any_call() {
    let tpl = t(json!({"Transform": "AWS::Serverless-2016-10-31", "Resources": {}}));
    assert_eq!(
        plan_of(&tpl, &CurrentState::default(), &[])
            .unwrap_err()
            .kind,
        ErrorKind::UnsupportedTransform
    );
    let tpl = t(
        json!({"Resources": {"P": {"Type": "AWS::SSM::Parameter", "Properties": {
        "Value": {"Fn::ToJsonString": {"a": 1}}}}}}),
    );
    let e = plan_of(&tpl, &CurrentState::default(), &[]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::UnsupportedFunction);
    assert_eq!(e.path, "Resources.P.Properties.Value.Fn::ToJsonString");
    let tpl = t(
        json!({"Resources": {"P": {"Type": "AWS::SSM::Parameter", "Properties": {"Value": {"Ref": "Nope"}}}}}),
    );
    assert_eq!(
        plan_of(&tpl, &CurrentState::default(), &[])
            .unwrap_err()
            .kind,
        ErrorKind::UnresolvedReference
    );
}

#[test]
fn deletes_go_dependents_first() {
    let v1 = t(json!({"Resources": {
        "A": {"Type": "AWS::SNS::Topic"},
        "B": {"Type": "AWS::SNS::Topic", "DependsOn": "A"},
        "C": {"Type": "AWS::SNS::Topic", "DependsOn": "B"}
    }}));
    let v2 = t(json!({"Resources": {"Other": {"Type": "AWS::SNS::Topic"}}}));
    let p = plan_of(&v2, &deployed(&v1, &[]), &[]).unwrap();
    assert_eq!(
        actions(&p),
        vec![
            ("Other".into(), Action::Create),
            ("C".into(), Action::Delete),
            ("B".into(), Action::Delete),
            ("A".into(), Action::Delete),
        ]
    );
}

#[test]
fn the_cdk_metadata_resource_is_never_planned() {
    let tpl = t(json!({
        "Conditions": {"CDKMetadataAvailable": {"Fn::Equals": [{"Ref": "AWS::Region"}, "us-east-1"]}},
        "Resources": {
            "Q": {"Type": "AWS::SQS::Queue"},
            "CDKMetadata": {
                "Type": "AWS::CDK::Metadata",
                "Properties": {"Analytics": "v2:deflate64:H4sIAAAAAAAA"},
                "Metadata": {"aws:cdk:path": "App/CDKMetadata/Default"},
                "Condition": "CDKMetadataAvailable"
            }
        }
    }));
    let p = plan_of(&tpl, &CurrentState::default(), &[]).unwrap();
    assert_eq!(actions(&p), vec![("Q".to_string(), Action::Create)]);
}

/// Issue 27 item 5: every problem of a template is listed at once, each with its path,
/// not only the first one met; what refers to a resource that could not be planned is
/// not reported again.
#[test]
fn every_problem_of_a_template_is_listed_at_once() {
    let template = t(json!({
        "Resources": {
            "Queue": {"Type": "AWS::SQS::Queue"},
            "Topic": {"Type": "AWS::SNS::Topic", "Properties": {"DisplayName": {"Ref": "Queu"}}},
            "Param": {"Type": "AWS::SSM::Parameter", "Properties": {
                "Type": "String", "Value": {"Fn::GetAtt": ["Queue", "Arm"]}}},
            "Uses": {"Type": "AWS::SSM::Parameter", "Properties": {
                "Type": "String", "Value": {"Fn::GetAtt": ["Topic", "TopicName"]}}}
        },
        "Outputs": {
            "Out": {"Value": {"Ref": "Topc"}},
            "Fine": {"Value": {"Ref": "Queue"}}
        }
    }));
    let e = plan_of(&template, &CurrentState::default(), &[]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::UnresolvedReference);
    let text = e.to_string();
    assert!(text.starts_with("3 problems:"), "{text}");
    for line in [
        "Resources.Topic.Properties.DisplayName.Ref: `Queu` is not a parameter, a resource or a pseudo parameter of this template (did you mean `Queue`?)",
        "Resources.Param.Properties.Value.Fn::GetAtt: `Queue` (AWS::SQS::Queue) has no attribute `Arm` (did you mean `Arn`?)",
        "Outputs.Out.Value.Ref: `Topc` is not a parameter, a resource or a pseudo parameter of this template (did you mean `Topic`?)",
    ] {
        assert!(text.contains(&format!("\n  - {line}")), "{line}\n{text}");
    }

    // One problem is the error itself, as before.
    let one = t(json!({"Resources": {
        "Topic": {"Type": "AWS::SNS::Topic", "Properties": {"DisplayName": {"Ref": "Nope"}}}
    }}));
    let e = plan_of(&one, &CurrentState::default(), &[]).unwrap_err();
    assert_eq!(e.path, "Resources.Topic.Properties.DisplayName.Ref");
}

#[test]
fn a_long_list_of_problems_is_cut_with_a_count() {
    let mut resources = serde_json::Map::new();
    for i in 0..25 {
        resources.insert(
            format!("T{i}"),
            json!({"Type": "AWS::SNS::Topic", "Properties": {"DisplayName": {"Ref": format!("Missing{i}")}}}),
        );
    }
    let template = t(json!({ "Resources": resources }));
    let text = plan_of(&template, &CurrentState::default(), &[])
        .unwrap_err()
        .to_string();
    assert!(text.starts_with("25 problems:"), "{text}");
    assert_eq!(text.matches("\n  - ").count(), crate::error::MAX_LISTED + 1);
    assert!(text.ends_with("\n  - and 5 more"), "{text}");
}
