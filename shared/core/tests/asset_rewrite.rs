//! Property tests of the asset rewrite (`stackflow_core::assets::Retarget`): whatever form
//! a template holds an asset location in (the CDK bucket written out or with placeholders,
//! in plain text, inside `Fn::Sub` with or without variables, split over an `Fn::Join`, in
//! a JSON document held as a string, as an S3 URL or an ARN, bucket and key apart), the
//! rewritten value, resolved by the core's own resolver as a deploy resolves it, names
//! stackflow's bucket and the object's key under `assets/`, and holds no `${...}`.
//!
//! Each case is generated with what it must resolve to, from its parts, so the oracle is
//! not the rewrite's own logic.

use indexmap::IndexMap;
use proptest::prelude::*;
use serde_json::{Value, json};
use stackflow_core::assets::{Placeholders, Retarget, parse_asset_manifest};
use stackflow_core::intrinsics::{EmptyEnvironment, Mode, Pseudo, Resolver, bind_parameters};
use stackflow_core::template::{Template, check_literal_placeholders};

const ACCOUNT: &str = "123456789012";
const REGION: &str = "us-east-1";
const PLACEHOLDERS: &str = "cdk-hnb659fds-assets-${AWS::AccountId}-${AWS::Region}";
const LITERAL: &str = "cdk-hnb659fds-assets-123456789012-us-east-1";
const OURS: &str = "stackflow-123456789012-us-east-1";

/// A content-hash key, as the CDK names objects.
fn key_strategy() -> impl Strategy<Value = String> {
    ("[0-9a-f]{64}", prop_oneof![Just(".zip"), Just(".json")]).prop_map(|(h, e)| h + e)
}

/// The retarget of a manifest with `key`, spelled bound (literal) or agnostic.
fn retarget(bound: bool, key: &str) -> Retarget {
    let bucket = if bound { LITERAL } else { PLACEHOLDERS };
    let m = parse_asset_manifest(
        &json!({"files": {"a": {"source": {"path": "asset.a", "packaging": "zip"},
            "destinations": {"d": {"bucketName": bucket, "objectKey": key}}}}}),
        std::path::Path::new("."),
    )
    .unwrap();
    let at = Placeholders {
        account_id: ACCOUNT.into(),
        region: REGION.into(),
    };
    Retarget::for_manifests([&m], &at)
}

/// What follows the bucket: the object's key, every object (`*`), or nothing.
#[derive(Debug, Clone)]
enum Tail {
    Key,
    Star,
    None,
}

#[derive(Debug, Clone)]
struct Case {
    bound: bool,
    key: String,
    form: u8,
    tail: Tail,
    /// Words around a location held in plain text.
    before: String,
    after: String,
}

impl Case {
    /// The bucket as a `Fn::Sub` template string may spell it.
    fn in_sub(&self) -> &'static str {
        if self.bound { LITERAL } else { PLACEHOLDERS }
    }

    /// The bucket as a value: the literal, or an `Fn::Sub` of the placeholders.
    fn bucket_value(&self) -> Value {
        if self.bound {
            json!(LITERAL)
        } else {
            json!({"Fn::Sub": PLACEHOLDERS})
        }
    }

    fn tail(&self) -> Option<&str> {
        match self.tail {
            Tail::Key => Some(&self.key),
            Tail::Star => Some("*"),
            Tail::None => None,
        }
    }

    /// `bucket` then `/tail`, when there is a tail.
    fn path(&self, bucket: &str, tail_prefix: &str) -> String {
        match self.tail() {
            Some(t) => format!("{bucket}/{tail_prefix}{t}"),
            None => bucket.to_string(),
        }
    }

    fn words(&self, core: String) -> String {
        format!("{}{core}{}", self.before, self.after)
    }

    /// The template value of the case and what it must resolve to after the rewrite.
    fn build(&self) -> (Value, Value) {
        let cdk = self.path(LITERAL, "");
        let ours = self.path(OURS, "assets/");
        let tail = self.tail().unwrap_or("").to_string();
        match self.form % 10 {
            // Plain text: an S3 URL, an ARN, or the name alone, among other words.
            0 => (
                json!(self.words(format!("s3://{cdk}"))),
                json!(self.words(format!("s3://{ours}"))),
            ),
            1 => (
                json!(self.words(format!("arn:aws:s3:::{cdk}"))),
                json!(self.words(format!("arn:aws:s3:::{ours}"))),
            ),
            // An Fn::Sub template string.
            2 => (
                json!({"Fn::Sub": format!("arn:${{AWS::Partition}}:s3:::{}",
                    self.path(self.in_sub(), ""))}),
                json!(format!("arn:aws:s3:::{ours}")),
            ),
            // An Fn::Sub variable bound to the bucket.
            3 => {
                let sub = match self.tail() {
                    Some(t) => format!("s3://${{B}}/{t}"),
                    None => "s3://${B}".to_string(),
                };
                (
                    json!({"Fn::Sub": [sub, {"B": self.bucket_value()}]}),
                    json!(format!("s3://{ours}")),
                )
            }
            // An Fn::Join: the bucket its own part, then "/tail".
            4 => {
                let mut parts = vec![
                    json!("arn:"),
                    json!({"Ref": "AWS::Partition"}),
                    json!(":s3:::"),
                    self.bucket_value(),
                ];
                if let Some(t) = self.tail() {
                    parts.push(json!(format!("/{t}")));
                }
                (
                    json!({"Fn::Join": ["", parts]}),
                    json!(format!("arn:aws:s3:::{ours}")),
                )
            }
            // An Fn::Join with a lone "/", or on "/".
            5 => (
                json!({"Fn::Join": ["", ["s3://", self.bucket_value(), "/", tail.clone()]]}),
                json!(format!("s3://{OURS}/assets/{tail}")),
            ),
            6 => (
                json!({"Fn::Join": ["/", ["s3:/", self.bucket_value(), tail.clone()]]}),
                json!(format!("s3://{OURS}/assets/{tail}")),
            ),
            // A JSON document held as a string, bucket and key apart.
            7 => (
                json!(
                    json!({"Parameters": {"Bucket": LITERAL, "Key": self.key}, "Note": self.before})
                        .to_string()
                ),
                json!(
                    json!({"Parameters": {"Bucket": OURS, "Key": format!("assets/{}", self.key)},
                        "Note": self.before})
                    .to_string()
                ),
            ),
            // The same inside an Fn::Sub.
            8 => (
                json!({"Fn::Sub": format!(r#"{{"b":"{}","k":"{}"}}"#, self.in_sub(), self.key)}),
                json!(format!(r#"{{"b":"{OURS}","k":"assets/{}"}}"#, self.key)),
            ),
            // Bucket and key as properties of their own.
            _ => (
                json!({"S3Bucket": self.bucket_value(), "S3Key": self.key}),
                json!({"S3Bucket": OURS, "S3Key": format!("assets/{}", self.key)}),
            ),
        }
    }
}

fn case_strategy() -> impl Strategy<Value = Case> {
    (
        any::<bool>(),
        key_strategy(),
        0u8..10,
        prop_oneof![Just(Tail::Key), Just(Tail::Star), Just(Tail::None)],
        prop_oneof![Just(String::new()), "[a-z]{1,8} ".prop_map(String::from)],
        prop_oneof![Just(String::new()), " [a-z]{1,8}".prop_map(String::from)],
    )
        .prop_map(|(bound, key, form, tail, before, after)| Case {
            bound,
            key,
            form,
            // A lone "/" and a "/" delimiter need something after the bucket.
            tail: match (form % 10, tail) {
                (5 | 6, Tail::None) => Tail::Key,
                (_, t) => t,
            },
            before,
            after,
        })
}

/// The template of one resource whose `Value` is `v`, nested in a policy-like shape.
fn holding(v: Value) -> Template {
    Template::from_value(&json!({"Resources": {"R": {"Type": "AWS::SSM::Parameter",
        "Properties": {"Type": "String", "Value": {"Statement": [{"Resource": v}]}}}},
        "Outputs": {"Location": {"Value": {"Fn::GetAtt": ["R", "Type"]}}}}))
    .unwrap()
}

/// `R`'s `Value` resolved as a deploy resolves it.
fn resolved(t: &Template) -> Value {
    let params = bind_parameters(t, &IndexMap::new()).unwrap();
    let pseudo = Pseudo {
        region: REGION.into(),
        account_id: Some(ACCOUNT.into()),
        stack_name: "s".into(),
        stack_id: None,
    };
    let conditions = IndexMap::new();
    let r = Resolver::new(
        t,
        &params,
        &pseudo,
        &conditions,
        &EmptyEnvironment,
        Mode::Deploy,
    );
    let props = r.resolve_properties("R").unwrap();
    props["Value"]["Statement"][0]["Resource"].clone()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_form_resolves_to_stackflows_bucket_and_the_key_under_assets(case in case_strategy()) {
        let (value, expected) = case.build();
        let r = retarget(case.bound, &case.key);
        let mut t = holding(value);
        let changed = r.template(&mut t, "");
        prop_assert_eq!(changed, vec!["R.Value".to_string()]);
        prop_assert_eq!(check_literal_placeholders(&t), Ok(()));
        let got = resolved(&t);
        prop_assert_eq!(&got, &expected);
        prop_assert!(!got.to_string().contains("${"), "{}", got);
        prop_assert!(!got.to_string().contains("cdk-hnb659fds"), "{}", got);
        // A second rewrite changes nothing.
        let once = t.clone();
        prop_assert!(r.template(&mut t, "").is_empty());
        prop_assert_eq!(t, once);
    }

    #[test]
    fn text_that_names_no_asset_stays(text in "[ -~]{0,80}", key in key_strategy(), bound in any::<bool>()) {
        prop_assume!(!text.contains("cdk-") && !text.contains(&key));
        let r = retarget(bound, &key);
        let mut t = holding(json!(text));
        let before = t.clone();
        prop_assert!(r.template(&mut t, "").is_empty());
        prop_assert_eq!(t, before);
    }
}
