use std::collections::HashMap;

use indexmap::IndexMap;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::error::ErrorKind;
use crate::template::Template;

/// A test environment: resources with physical ids and attributes, AZs, exports, outputs
/// and SSM parameters.
#[derive(Default)]
struct Env {
    refs: HashMap<String, Value>,
    attrs: HashMap<(String, String), Value>,
    azs: Option<Vec<String>>,
    exports: HashMap<String, Value>,
    outputs: HashMap<(String, String), Value>,
    ssm: HashMap<String, Value>,
}

impl Environment for Env {
    fn resource_ref(&self, id: &str) -> Option<Value> {
        self.refs.get(id).cloned()
    }
    fn resource_attribute(&self, id: &str, attr: &str) -> Option<Value> {
        self.attrs.get(&(id.to_string(), attr.to_string())).cloned()
    }
    fn availability_zones(&self, region: &str) -> Option<Vec<String>> {
        self.azs
            .clone()
            .map(|a| a.into_iter().map(|z| format!("{region}{z}")).collect())
    }
    fn import_value(&self, name: &str) -> Option<Value> {
        self.exports.get(name).cloned()
    }
    fn stack_output(&self, r: &StackOutputRef) -> Option<Value> {
        self.outputs
            .get(&(r.stack_name.clone(), r.output_name.clone()))
            .cloned()
    }
    fn ssm_parameter(&self, name: &str) -> Option<Value> {
        self.ssm.get(name).cloned()
    }
}

fn env() -> Env {
    let mut e = Env::default();
    e.refs.insert("Bucket".into(), json!("my-bucket"));
    e.refs.insert("Role".into(), json!("my-role"));
    e.attrs.insert(
        ("Role".into(), "Arn".into()),
        json!("arn:aws:iam::123456789012:role/my-role"),
    );
    e.attrs.insert(
        ("Child".into(), "Outputs.QueueUrl".into()),
        json!("https://q"),
    );
    e.azs = Some(vec!["a".into(), "b".into(), "c".into()]);
    e.exports.insert("shared-vpc".into(), json!("vpc-123"));
    e.outputs
        .insert(("producer".into(), "TopicName".into()), json!("topic-1"));
    e.ssm.insert("/cdk/version".into(), json!("21"));
    e
}

fn template() -> Template {
    Template::from_value(&json!({
        "Parameters": {
            "Env": {"Type": "String", "Default": "prod", "AllowedValues": ["dev", "prod"]},
            "Subnets": {"Type": "CommaDelimitedList", "Default": "s-1,s-2,s-3"},
            "Count": {"Type": "Number", "Default": "2"},
            "Version": {"Type": "AWS::SSM::Parameter::Value<String>", "Default": "/cdk/version"}
        },
        "Mappings": {
            "Sizes": {"prod": {"Instance": "m5.large"}, "dev": {"Instance": "t3.micro"}}
        },
        "Conditions": {
            "IsProd": {"Fn::Equals": [{"Ref": "Env"}, "prod"]},
            "IsDev": {"Fn::Not": [{"Condition": "IsProd"}]},
            "Both": {"Fn::And": [{"Condition": "IsProd"}, {"Fn::Equals": ["a", "a"]}]},
            "Either": {"Fn::Or": [{"Condition": "IsDev"}, {"Fn::Equals": [{"Ref": "Count"}, 2]}]}
        },
        "Resources": {
            "Bucket": {"Type": "AWS::S3::Bucket"},
            "Role": {"Type": "AWS::IAM::Role"},
            "Child": {"Type": "AWS::CloudFormation::Stack"},
            "DevOnly": {"Type": "AWS::SQS::Queue", "Condition": "IsDev"},
            "Later": {"Type": "AWS::SNS::Topic"}
        }
    }))
    .unwrap()
}

struct Fixture {
    template: Template,
    params: BoundParameters,
    pseudo: Pseudo,
    conditions: IndexMap<String, bool>,
    env: Env,
}

fn fixture() -> Fixture {
    let template = template();
    let params = bind_parameters(&template, &IndexMap::new()).unwrap();
    let pseudo = Pseudo {
        region: "eu-west-1".into(),
        account_id: Some("123456789012".into()),
        stack_name: "app".into(),
        stack_id: Some("arn:aws:cloudformation:eu-west-1:123456789012:stack/app/x".into()),
    };
    let env = env();
    let conditions = evaluate_conditions(&template, &params, &pseudo, &env).unwrap();
    Fixture {
        template,
        params,
        pseudo,
        conditions,
        env,
    }
}

impl Fixture {
    fn resolver(&self, mode: Mode) -> Resolver<'_> {
        Resolver::new(
            &self.template,
            &self.params,
            &self.pseudo,
            &self.conditions,
            &self.env,
            mode,
        )
    }
    fn eval(&self, v: Value) -> Result<Option<Value>> {
        self.resolver(Mode::Deploy)
            .resolve(&v, &Path::from_keys(["Resources", "X", "Properties", "P"]))
    }
    fn ok(&self, v: Value) -> Value {
        self.eval(v).unwrap().unwrap()
    }
    fn err(&self, v: Value) -> TemplateError {
        self.eval(v).unwrap_err()
    }
    fn plan(&self, v: Value) -> Value {
        self.resolver(Mode::Plan)
            .resolve(&v, &Path::root())
            .unwrap()
            .unwrap()
    }
}

#[test]
fn conditions_evaluate_once_with_references() {
    let f = fixture();
    assert!(f.conditions["IsProd"]);
    assert!(!f.conditions["IsDev"]);
    assert!(f.conditions["Both"]);
    assert!(f.conditions["Either"]);
}

#[test]
fn condition_cycles_and_bad_shapes_are_errors() {
    let t = Template::from_value(&json!({
        "Conditions": {
            "A": {"Fn::Not": [{"Condition": "B"}]},
            "B": {"Fn::Not": [{"Condition": "A"}]}
        },
        "Resources": {}
    }))
    .unwrap();
    let p = bind_parameters(&t, &IndexMap::new()).unwrap();
    let e = evaluate_conditions(&t, &p, &Pseudo::default(), &EmptyEnvironment).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Cycle);
    assert!(e.message.contains("A -> B -> A"), "{e}");

    let t = Template::from_value(&json!({
        "Conditions": {"A": {"Fn::And": [{"Condition": "A2"}]}, "A2": true},
        "Resources": {}
    }))
    .unwrap();
    let e = evaluate_conditions(&t, &p, &Pseudo::default(), &EmptyEnvironment).unwrap_err();
    assert!(e.message.contains("between 2 and 10"), "{e}");
}

#[test]
fn ref_resolves_parameters_pseudo_parameters_and_resources() {
    let f = fixture();
    assert_eq!(f.ok(json!({"Ref": "Env"})), json!("prod"));
    assert_eq!(
        f.ok(json!({"Ref": "Subnets"})),
        json!(["s-1", "s-2", "s-3"])
    );
    assert_eq!(f.ok(json!({"Ref": "Count"})), json!("2"));
    assert_eq!(f.ok(json!({"Ref": "Version"})), json!("21"));
    assert_eq!(f.ok(json!({"Ref": "Bucket"})), json!("my-bucket"));
    assert_eq!(f.ok(json!({"Ref": "AWS::Region"})), json!("eu-west-1"));
    assert_eq!(
        f.ok(json!({"Ref": "AWS::AccountId"})),
        json!("123456789012")
    );
    assert_eq!(f.ok(json!({"Ref": "AWS::Partition"})), json!("aws"));
    assert_eq!(
        f.ok(json!({"Ref": "AWS::URLSuffix"})),
        json!("amazonaws.com")
    );
    assert_eq!(f.ok(json!({"Ref": "AWS::StackName"})), json!("app"));
    assert!(
        f.ok(json!({"Ref": "AWS::StackId"}))
            .as_str()
            .unwrap()
            .starts_with("arn:aws:cloudformation:eu-west-1")
    );
}

#[test]
fn no_value_removes_keys_and_list_elements() {
    let f = fixture();
    assert_eq!(f.eval(json!({"Ref": "AWS::NoValue"})).unwrap(), None);
    assert_eq!(
        f.ok(json!({"A": {"Ref": "AWS::NoValue"}, "B": 1, "C": [1, {"Ref": "AWS::NoValue"}, 2]})),
        json!({"B": 1, "C": [1, 2]})
    );
    assert_eq!(
        f.ok(json!({"A": {"Fn::If": ["IsDev", "x", {"Ref": "AWS::NoValue"}]}})),
        json!({})
    );
}

#[test]
fn ref_errors() {
    let f = fixture();
    let e = f.err(json!({"Ref": "Nothing"}));
    assert_eq!(e.kind, ErrorKind::UnresolvedReference);
    assert_eq!(e.path, "Resources.X.Properties.P.Ref");
    assert!(!e.message.contains("did you mean"), "{e}");
    // A typo of a resource's name says which one was meant.
    let e = f.err(json!({"Ref": "Buckt"}));
    assert!(
        e.message
            .ends_with("of this template (did you mean `Bucket`?)"),
        "{e}"
    );
    let e = f.err(json!({"Ref": "DevOnly"}));
    assert_eq!(e.kind, ErrorKind::UnresolvedReference);
    assert!(e.message.contains("condition `IsDev` is false"), "{e}");
    let e = f.err(json!({"Ref": ["Bucket"]}));
    assert_eq!(e.kind, ErrorKind::InvalidFunction);
    // A resource not created yet: an error when deploying, a marker when planning.
    let e = f.err(json!({"Ref": "Later"}));
    assert_eq!(e.kind, ErrorKind::NotAvailable);
    assert_eq!(as_unknown(&f.plan(json!({"Ref": "Later"}))), Some("Later"));
}

#[test]
fn get_att_both_forms() {
    let f = fixture();
    let arn = json!("arn:aws:iam::123456789012:role/my-role");
    assert_eq!(f.ok(json!({"Fn::GetAtt": ["Role", "Arn"]})), arn);
    assert_eq!(f.ok(json!({"Fn::GetAtt": "Role.Arn"})), arn);
    assert_eq!(
        f.ok(json!({"Fn::GetAtt": ["Child", "Outputs.QueueUrl"]})),
        json!("https://q")
    );
    assert_eq!(
        f.ok(json!({"Fn::GetAtt": ["Role", {"Fn::Join": ["", ["A", "rn"]]}]})),
        arn
    );
    assert_eq!(
        f.err(json!({"Fn::GetAtt": ["Nope", "Arn"]})).kind,
        ErrorKind::UnresolvedReference
    );
    assert_eq!(
        f.err(json!({"Fn::GetAtt": "NoDot"})).kind,
        ErrorKind::InvalidFunction
    );
    assert_eq!(
        f.err(json!({"Fn::GetAtt": ["Role"]})).kind,
        ErrorKind::InvalidFunction
    );
    assert_eq!(
        as_unknown(&f.plan(json!({"Fn::GetAtt": ["Later", "TopicArn"]}))),
        Some("Later.TopicArn")
    );
}

/// Issue 27 item 5: an attribute the type does not have is an error with what was meant,
/// while planning too (not a value known after deploy); one a provider returned is never
/// refused, and custom resources and nested stacks are not checked.
#[test]
fn a_misspelled_attribute_is_named_with_what_was_meant() {
    let f = fixture();
    let e = f
        .resolver(Mode::Plan)
        .resolve(&json!({"Fn::GetAtt": ["Later", "TopicArm"]}), &Path::root())
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::UnresolvedReference);
    assert_eq!(
        e.message,
        "`Later` (AWS::SNS::Topic) has no attribute `TopicArm` (did you mean `TopicArn`?)"
    );
    let e = f.err(json!({"Fn::GetAtt": "Bucket.Colour"}));
    assert_eq!(
        e.message,
        "`Bucket` (AWS::S3::Bucket) has no attribute `Colour`"
    );
    // A property is an attribute too (a topic's TopicName).
    assert_eq!(
        as_unknown(&f.plan(json!({"Fn::GetAtt": ["Later", "TopicName"]}))),
        Some("Later.TopicName")
    );
    assert_eq!(
        as_unknown(&f.plan(json!({"Fn::GetAtt": ["Child", "Outputs.Anything"]}))),
        Some("Child.Outputs.Anything")
    );
}

#[test]
fn join_split_select() {
    let f = fixture();
    assert_eq!(
        f.ok(json!({"Fn::Join": ["-", ["a", {"Ref": "Env"}, 3]]})),
        json!("a-prod-3")
    );
    assert_eq!(
        f.ok(json!({"Fn::Join": [",", {"Ref": "Subnets"}]})),
        json!("s-1,s-2,s-3")
    );
    assert_eq!(f.ok(json!({"Fn::Join": ["", []]})), json!(""));
    assert_eq!(
        f.err(json!({"Fn::Join": ["-", [{"a": 1}]]})).kind,
        ErrorKind::InvalidFunction
    );
    assert_eq!(
        f.err(json!({"Fn::Join": ["-"]})).kind,
        ErrorKind::InvalidFunction
    );
    assert_eq!(
        f.err(json!({"Fn::Join": ["-", "ab"]})).kind,
        ErrorKind::InvalidFunction
    );

    assert_eq!(
        f.ok(json!({"Fn::Split": [",", "a,b,,c"]})),
        json!(["a", "b", "", "c"])
    );
    assert_eq!(
        f.err(json!({"Fn::Split": ["", "abc"]})).kind,
        ErrorKind::InvalidFunction
    );

    assert_eq!(f.ok(json!({"Fn::Select": [1, ["a", "b"]]})), json!("b"));
    assert_eq!(
        f.ok(json!({"Fn::Select": ["0", {"Ref": "Subnets"}]})),
        json!("s-1")
    );
    assert_eq!(
        f.ok(json!({"Fn::Select": [{"Ref": "Count"}, {"Fn::Split": [",", "x,y,z"]}]})),
        json!("z")
    );
    let e = f.err(json!({"Fn::Select": [5, ["a", "b"]]}));
    assert_eq!(e.kind, ErrorKind::InvalidFunction);
    assert!(e.message.contains("out of range"), "{e}");
    assert_eq!(
        f.err(json!({"Fn::Select": [-1, ["a"]]})).kind,
        ErrorKind::InvalidFunction
    );
    assert_eq!(
        f.err(json!({"Fn::Select": [0, "a"]})).kind,
        ErrorKind::InvalidFunction
    );
    // An unknown in the list does not hide a known element.
    assert_eq!(
        f.plan(json!({"Fn::Select": [0, ["known", {"Ref": "Later"}]]})),
        json!("known")
    );
    assert!(as_unknown(&f.plan(json!({"Fn::Join": ["", ["a", {"Ref": "Later"}]]}))).is_some());
}

#[test]
fn sub_both_forms() {
    let f = fixture();
    assert_eq!(
        f.ok(json!({"Fn::Sub": "arn:${AWS::Partition}:s3:::${Bucket}/${!Literal}"})),
        json!("arn:aws:s3:::my-bucket/${Literal}")
    );
    assert_eq!(
        f.ok(json!({"Fn::Sub": "${Role.Arn}"})),
        json!("arn:aws:iam::123456789012:role/my-role")
    );
    assert_eq!(
        f.ok(json!({"Fn::Sub": ["${Name}-${Env}", {"Name": {"Fn::Join": ["", ["x", "y"]]}}]})),
        json!("xy-prod")
    );
    // The variable map wins over a resource of the same name.
    assert_eq!(
        f.ok(json!({"Fn::Sub": ["${Bucket}", {"Bucket": "mine"}]})),
        json!("mine")
    );
    assert_eq!(
        f.err(json!({"Fn::Sub": "${Nope}"})).kind,
        ErrorKind::UnresolvedReference
    );
    assert_eq!(
        f.err(json!({"Fn::Sub": "${Subnets}"})).kind,
        ErrorKind::InvalidFunction
    );
    assert_eq!(
        f.err(json!({"Fn::Sub": "${open"})).kind,
        ErrorKind::InvalidFunction
    );
    assert_eq!(
        f.err(json!({"Fn::Sub": ["a", "b"]})).kind,
        ErrorKind::InvalidFunction
    );
    assert_eq!(
        as_unknown(&f.plan(json!({"Fn::Sub": "x-${Later.TopicName}"}))),
        Some("Later.TopicName")
    );
}

#[test]
fn base64_if_find_in_map() {
    let f = fixture();
    assert_eq!(f.ok(json!({"Fn::Base64": "hello"})), json!("aGVsbG8="));
    assert_eq!(
        f.ok(json!({"Fn::Base64": {"Fn::Sub": "${Env}"}})),
        json!("cHJvZA==")
    );
    assert_eq!(f.ok(json!({"Fn::If": ["IsProd", "p", "d"]})), json!("p"));
    assert_eq!(
        f.ok(json!({"Fn::If": ["IsDev", "p", {"Ref": "Env"}]})),
        json!("prod")
    );
    assert_eq!(
        f.err(json!({"Fn::If": ["Nope", 1, 2]})).kind,
        ErrorKind::UnresolvedReference
    );
    assert_eq!(
        f.err(json!({"Fn::If": ["IsDev", 1]})).kind,
        ErrorKind::InvalidFunction
    );
    assert_eq!(
        f.ok(json!({"Fn::FindInMap": ["Sizes", {"Ref": "Env"}, "Instance"]})),
        json!("m5.large")
    );
    assert_eq!(
        f.ok(json!({"Fn::FindInMap": ["Sizes", "qa", "Instance", {"DefaultValue": "t3.nano"}]})),
        json!("t3.nano")
    );
    assert_eq!(
        f.err(json!({"Fn::FindInMap": ["Nope", "a", "b"]})).kind,
        ErrorKind::UnresolvedReference
    );
    let e = f.err(json!({"Fn::FindInMap": ["Sizes", "qa", "Instance"]}));
    assert_eq!(e.kind, ErrorKind::InvalidFunction);
    assert!(e.message.contains("[qa][Instance]"), "{e}");
    assert_eq!(f.ok(json!({"Fn::Equals": ["a", "a"]})), json!(true));
    assert_eq!(
        f.ok(json!({"Fn::Not": [{"Fn::Equals": ["a", "a"]}]})),
        json!(false)
    );
}

#[test]
fn azs_cidr_imports_and_stack_outputs() {
    let f = fixture();
    assert_eq!(
        f.ok(json!({"Fn::GetAZs": ""})),
        json!(["eu-west-1a", "eu-west-1b", "eu-west-1c"])
    );
    assert_eq!(
        f.ok(json!({"Fn::Select": [1, {"Fn::GetAZs": {"Ref": "AWS::Region"}}]})),
        json!("eu-west-1b")
    );
    assert_eq!(
        f.ok(json!({"Fn::Cidr": ["10.0.0.0/16", 2, "8"]})),
        json!(["10.0.0.0/24", "10.0.1.0/24"])
    );
    assert_eq!(
        f.err(json!({"Fn::Cidr": ["10.0.0.0/16", 0, 8]})).kind,
        ErrorKind::InvalidFunction
    );
    assert_eq!(
        f.err(json!({"Fn::Cidr": ["nope", 1, 8]})).kind,
        ErrorKind::InvalidFunction
    );
    assert_eq!(
        f.ok(json!({"Fn::ImportValue": "shared-vpc"})),
        json!("vpc-123")
    );
    let e = f.err(json!({"Fn::ImportValue": "missing"}));
    assert_eq!(e.kind, ErrorKind::NotAvailable);
    assert_eq!(
        f.ok(json!({"Fn::GetStackOutput": {"StackName": "producer", "OutputName": "TopicName"}})),
        json!("topic-1")
    );
    assert_eq!(
        f.err(json!({"Fn::GetStackOutput": {"StackName": "producer"}}))
            .kind,
        ErrorKind::InvalidFunction
    );
    assert_eq!(
        f.err(json!({"Fn::GetStackOutput": {"StackName": "p", "OutputName": "o", "X": 1}}))
            .kind,
        ErrorKind::InvalidFunction
    );
    assert!(as_unknown(&f.plan(json!({"Fn::ImportValue": "missing"}))).is_some());
}

#[test]
fn unsupported_functions_name_themselves_and_the_path() {
    let f = fixture();
    for name in [
        "Fn::ToJsonString",
        "Fn::Length",
        "Fn::ForEach::Loop",
        "Fn::Transform",
        "Fn::Contains",
    ] {
        let e = f.err(json!({"A": [{ name: {"x": 1} }]}));
        assert_eq!(e.kind, ErrorKind::UnsupportedFunction, "{name}");
        assert!(e.message.contains(name), "{e}");
        assert_eq!(e.path, format!("Resources.X.Properties.P.A[0].{name}"));
    }
}

#[test]
fn pseudo_parameters_follow_the_partition() {
    let t = template();
    let params = bind_parameters(&t, &IndexMap::new()).unwrap();
    let conditions = IndexMap::new();
    for (region, part, suffix) in [
        ("cn-north-1", "aws-cn", "amazonaws.com.cn"),
        ("us-gov-west-1", "aws-us-gov", "amazonaws.com"),
    ] {
        let pseudo = Pseudo {
            region: region.into(),
            stack_name: "s".into(),
            ..Pseudo::default()
        };
        let r = Resolver::new(
            &t,
            &params,
            &pseudo,
            &conditions,
            &EmptyEnvironment,
            Mode::Plan,
        );
        let v = r
            .resolve(
                &json!({"Fn::Sub": "${AWS::Partition}|${AWS::URLSuffix}"}),
                &Path::root(),
            )
            .unwrap()
            .unwrap();
        assert_eq!(v, json!(format!("{part}|{suffix}")));
        // The account is not known without an AWS call: known after deploy when planning.
        let v = r
            .resolve(&json!({"Ref": "AWS::AccountId"}), &Path::root())
            .unwrap()
            .unwrap();
        assert_eq!(as_unknown(&v), Some("AWS::AccountId"));
    }
}

proptest! {
    #[test]
    fn split_then_join_round_trips(parts in proptest::collection::vec("[a-z0-9 ]{0,6}", 1..8), delim in "[,;|-]") {
        let f = fixture();
        let text = parts.join(&delim);
        let v = f.ok(json!({"Fn::Join": [delim.clone(), {"Fn::Split": [delim, text.clone()]}]}));
        prop_assert_eq!(v, json!(text));
    }

    #[test]
    fn select_matches_indexing(items in proptest::collection::vec("[a-z]{1,4}", 1..10), i in 0usize..12) {
        let f = fixture();
        let r = f.eval(json!({"Fn::Select": [i, items.clone()]}));
        match items.get(i) {
            Some(x) => prop_assert_eq!(r.unwrap().unwrap(), json!(x)),
            None => prop_assert_eq!(r.unwrap_err().kind, ErrorKind::InvalidFunction),
        }
    }

    #[test]
    fn sub_of_literals_is_identity(text in "[a-zA-Z0-9 :/$!-]{0,30}") {
        // No `${` means nothing to substitute.
        prop_assume!(!text.contains("${"));
        let f = fixture();
        prop_assert_eq!(f.ok(json!({"Fn::Sub": text.clone()})), json!(text));
    }
}

/// A secret recorded masked (a NoEcho answer's attribute, as a plan sees it) taken apart:
/// its parts are not known, and are secret, so `Fn::Split`, `Fn::Select` and `Fn::Join`
/// over it give the mask whole instead of computing on the mask's text (issue 23 item 6:
/// `Fn::Select [1, ...]` failed with "index 1 is out of range").
#[test]
fn a_masked_value_taken_apart_stays_masked_whole() {
    let mut f = fixture();
    let mask = crate::secrets::MASK;
    f.env
        .attrs
        .insert(("Role".into(), "Token".into()), json!(mask));
    let token = json!({"Fn::GetAtt": ["Role", "Token"]});
    let parts = json!({"Fn::Split": ["-", token]});
    assert_eq!(f.ok(parts.clone()), json!(mask));
    assert_eq!(f.ok(json!({"Fn::Select": [1, parts.clone()]})), json!(mask));
    assert_eq!(f.ok(json!({"Fn::Join": ["/", parts]})), json!(mask));
    // A plain value is still taken apart.
    assert_eq!(
        f.ok(json!({"Fn::Select": [1, {"Fn::Split": ["-", "a-b"]}]})),
        json!("b")
    );
}
