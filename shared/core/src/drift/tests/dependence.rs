//! Unit tests: which resources depend on parameters.

use serde_json::{Value, json};

use crate::drift::{Dependence, resources_depending_on};
use crate::template::Template;

fn template(v: Value) -> Template {
    Template::from_value(&v).unwrap()
}

fn depending(v: Value, params: &[&str]) -> Dependence {
    let params: Vec<String> = params.iter().map(|p| p.to_string()).collect();
    resources_depending_on(&template(v), &params)
}

fn ids(set: &std::collections::BTreeSet<String>) -> Vec<&str> {
    set.iter().map(String::as_str).collect()
}

fn params() -> Value {
    json!({
        "Secret": {"Type": "String", "Default": "d", "NoEcho": true},
        "Other": {"Type": "String", "Default": "o"},
        "BootstrapVersion": {"Type": "AWS::SSM::Parameter::Value<String>", "Default": "/cdk-bootstrap/hnb659fds/version"}
    })
}

#[test]
fn ref_and_sub_make_a_resource_dependent() {
    let d = depending(
        json!({"Parameters": params(), "Resources": {
            "ByRef": {"Type": "T", "Properties": {"P": {"Ref": "Secret"}}},
            "BySub": {"Type": "T", "Properties": {"P": {"Fn::Sub": "x-${Secret}-y"}}},
            "BySubVar": {"Type": "T", "Properties": {"P": {"Fn::Sub": ["${V}", {"V": {"Ref": "Secret"}}]}}},
            "Shadowed": {"Type": "T", "Properties": {"P": {"Fn::Sub": ["${Secret}", {"Secret": "lit"}]}}},
            "Escaped": {"Type": "T", "Properties": {"P": {"Fn::Sub": "${!Secret}"}}},
            "Nested": {"Type": "T", "Properties": {"P": [{"Q": {"Fn::Join": ["", ["a", {"Ref": "Secret"}]]}}]}},
            "OtherParam": {"Type": "T", "Properties": {"P": {"Ref": "Other"}}},
            "Pseudo": {"Type": "T", "Properties": {"P": {"Fn::Sub": "${AWS::Region}"}}},
            "Plain": {"Type": "T", "Properties": {"P": "Secret"}}
        }}),
        &["Secret"],
    );
    assert_eq!(ids(&d.dependent), ["ByRef", "BySub", "BySubVar", "Nested"]);
    assert!(d.unknown.is_empty());
    assert!(d.may_depend("ByRef"));
    assert!(!d.may_depend("Shadowed"));
}

#[test]
fn conditions_count_transitively() {
    let d = depending(
        json!({"Parameters": params(),
        "Conditions": {
            "IsProd": {"Fn::Equals": [{"Ref": "Secret"}, "prod"]},
            "ProdAndEast": {"Fn::And": [{"Condition": "IsProd"}, {"Fn::Equals": [{"Ref": "AWS::Region"}, "us-east-1"]}]},
            "NotProd": {"Fn::Not": [{"Condition": "ProdAndEast"}]},
            "Unrelated": {"Fn::Equals": [{"Ref": "Other"}, "x"]}
        },
        "Resources": {
            "OwnCondition": {"Type": "T", "Condition": "NotProd"},
            "IfCondition": {"Type": "T", "Properties": {"P": {"Fn::If": ["ProdAndEast", "a", "b"]}}},
            "UnrelatedCondition": {"Type": "T", "Condition": "Unrelated",
                                   "Properties": {"P": {"Fn::If": ["Unrelated", "a", {"Ref": "AWS::NoValue"}]}}},
            "UntakenBranch": {"Type": "T", "Properties": {"P": {"Fn::If": ["Unrelated", "a", {"Ref": "Secret"}]}}}
        }}),
        &["Secret"],
    );
    assert_eq!(
        ids(&d.dependent),
        ["IfCondition", "OwnCondition", "UntakenBranch"]
    );
    assert!(d.unknown.is_empty());
}

#[test]
fn readers_of_dependent_resources_are_dependent() {
    let d = depending(
        json!({"Parameters": params(), "Resources": {
            "Base": {"Type": "T", "Properties": {"P": {"Ref": "Secret"}}},
            "ByRef": {"Type": "T", "Properties": {"P": {"Ref": "Base"}}},
            "ByGetAtt": {"Type": "T", "Properties": {"P": {"Fn::GetAtt": ["ByRef", "Arn"]}}},
            "ByGetAttText": {"Type": "T", "Properties": {"P": {"Fn::GetAtt": "ByGetAtt.Arn"}}},
            "BySub": {"Type": "T", "Properties": {"P": {"Fn::Sub": "${ByGetAttText.Arn}"}}},
            "OnlyDependsOn": {"Type": "T", "DependsOn": "Base", "Metadata": {"m": {"Ref": "Base"}}},
            "Independent": {"Type": "T", "Properties": {"P": {"Fn::GetAtt": ["OnlyDependsOn", "Arn"]}}}
        }}),
        &["Secret"],
    );
    assert_eq!(
        ids(&d.dependent),
        ["Base", "ByGetAtt", "ByGetAttText", "ByRef", "BySub"]
    );
    assert_eq!(ids(&d.all()), ids(&d.dependent));
}

#[test]
fn parameters_only_rules_use_do_not_count() {
    let d = depending(
        json!({"Parameters": params(),
            "Rules": {"CheckBootstrapVersion": {"Assertions": [{"Assert": {"Fn::Not": [{"Fn::Contains": [["1"], {"Ref": "BootstrapVersion"}]}]}}]}},
            "Resources": {"Q": {"Type": "AWS::SQS::Queue", "Properties": {"DelaySeconds": 5}}}}),
        &["BootstrapVersion"],
    );
    assert_eq!(d, Dependence::default());
}

#[test]
fn what_the_analysis_does_not_understand_is_unknown() {
    let d = depending(
        json!({"Parameters": params(),
        "Conditions": {"Odd": {"Fn::Equals": [{"Fn::Length": [1]}, 1]}},
        "Resources": {
            "Transform": {"Type": "T", "Properties": {"P": {"Fn::Transform": {"Name": "AWS::Include", "Parameters": {}}}}},
            "BadSub": {"Type": "T", "Properties": {"P": {"Fn::Sub": "${unclosed"}}},
            "Reader": {"Type": "T", "Properties": {"P": {"Ref": "Transform"}}},
            "OddCondition": {"Type": "T", "Condition": "Odd"},
            "Both": {"Type": "T", "Properties": {"P": {"Ref": "Secret"}, "Q": {"Ref": "Transform"}}},
            "Fine": {"Type": "T", "Properties": {"P": {"Ref": "Other"}}}
        }}),
        &["Secret"],
    );
    assert_eq!(ids(&d.dependent), ["Both"]);
    assert_eq!(
        ids(&d.unknown),
        ["BadSub", "OddCondition", "Reader", "Transform"]
    );
    assert!(d.may_depend("Reader"));
    assert!(!d.may_depend("Fine"));
}

#[test]
fn a_template_with_transforms_is_unknown_whole() {
    let d = depending(
        json!({"Transform": "AWS::Serverless-2016-10-31", "Parameters": params(),
               "Resources": {"A": {"Type": "T"}, "B": {"Type": "T"}}}),
        &["Secret"],
    );
    assert!(d.dependent.is_empty());
    assert_eq!(ids(&d.unknown), ["A", "B"]);
}

#[test]
fn no_parameters_no_dependence() {
    let d = depending(
        json!({"Parameters": params(), "Resources": {"A": {"Type": "T", "Properties": {"P": {"Ref": "Secret"}}}}}),
        &[],
    );
    assert_eq!(d, Dependence::default());
}
