//! CloudFormation resource provider schema facts: which properties of a resource type are
//! create-only (a change replaces the resource), read-only, write-only, and which top-level
//! properties a type accepts.
//!
//! The data is generated from the schemas shipped with the `cfn-lint` Python package by
//! `shared/core/data/gen_schemas.py` into `shared/core/data/schemas.json`, embedded in the
//! binary and parsed once, on first use.
//!
//! Paths are property paths below a resource's `Properties`, written as `/`-separated
//! segments (`KeySchema/*/AttributeName`), where `*` in a schema path stands for any list
//! item.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::Deserialize;

use crate::error::closest;

/// The embedded, generated schema data (see `data/gen_schemas.py`).
const SCHEMAS_JSON: &str = include_str!("../data/schemas.json");

/// What the provider schema of one resource type says about its properties.
///
/// Every path is relative to the resource's `Properties` (no `/properties/` prefix), its
/// segments joined by `/`, with `*` standing for any list item; lists keep the schema's order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceSchema {
    /// `createOnlyProperties`: a change at any of these paths replaces the resource.
    pub create_only: Vec<String>,
    /// `conditionalCreateOnlyProperties`: a change at these paths may replace the resource,
    /// depending on the change; treated as replacing by [`ResourceSchema::requires_replacement`].
    pub conditional_create_only: Vec<String>,
    /// `readOnlyProperties`: values the service reports and a template cannot set.
    pub read_only: Vec<String>,
    /// `writeOnlyProperties`: values a template sets that the service never reports back.
    pub write_only: Vec<String>,
    /// `primaryIdentifier`: the property paths that identify a resource of this type.
    pub primary_identifier: Vec<String>,
    /// The top-level property names a template may set (schema properties that are not
    /// read-only).
    pub properties: Vec<String>,
}

impl ResourceSchema {
    /// True when a change at `path` (property path segments from the resource's
    /// `Properties`, e.g. `["KeySchema", "0", "AttributeName"]`, list indexes as decimal
    /// strings) falls under a create-only or conditional-create-only path.
    ///
    /// A schema segment `*` matches any segment (a list index). A change at a path that is
    /// an ancestor or a descendant of a create-only path matches too: replacing `KeySchema`
    /// wholesale touches `KeySchema/*/AttributeName`. The empty path (all of `Properties`)
    /// is an ancestor of every path.
    pub fn requires_replacement(&self, path: &[&str]) -> bool {
        any_overlaps(&self.create_only, path) || any_overlaps(&self.conditional_create_only, path)
    }

    /// True when `path` overlaps a read-only path (same matching as
    /// [`ResourceSchema::requires_replacement`]).
    pub fn is_read_only(&self, path: &[&str]) -> bool {
        any_overlaps(&self.read_only, path)
    }

    /// True when `path` overlaps a write-only path (same matching as
    /// [`ResourceSchema::requires_replacement`]).
    pub fn is_write_only(&self, path: &[&str]) -> bool {
        any_overlaps(&self.write_only, path)
    }

    /// True when `Fn::GetAtt` can name `attribute` (`Arn`, `Endpoint.Address`) on this
    /// type: a value the service reports, or a property (CloudFormation returns some
    /// properties as attributes, `QueueName` of a queue).
    pub fn has_attribute(&self, attribute: &str) -> bool {
        let first = attribute.split('.').next().unwrap_or(attribute);
        let path = attribute.replace('.', "/");
        self.properties.iter().any(|p| p == first)
            || self
                .read_only
                .iter()
                .any(|r| *r == path || r.split('/').next() == Some(first))
    }

    /// The attribute `Fn::GetAtt` likely meant by an `attribute` this type does not have.
    pub fn closest_attribute(&self, attribute: &str) -> Option<String> {
        let names: Vec<String> = self
            .read_only
            .iter()
            .filter(|r| !r.contains('*'))
            .map(|r| r.replace('/', "."))
            .chain(self.properties.iter().cloned())
            .collect();
        closest(attribute, names.iter().map(String::as_str)).map(str::to_string)
    }

    /// The names in `keys` (a resource's top-level property names) that this type has
    /// neither as a property nor as a value the service reports: CloudFormation refuses
    /// them. Each comes with the property that was likely meant, when one is close.
    pub fn unknown_properties<'a>(
        &'a self,
        keys: impl IntoIterator<Item = &'a str>,
    ) -> Vec<(&'a str, Option<&'a str>)> {
        let known = |k: &str| {
            self.properties.iter().any(|p| p == k)
                || self
                    .read_only
                    .iter()
                    .any(|p| p.split('/').next() == Some(k))
        };
        keys.into_iter()
            .filter(|k| !known(k))
            .map(|k| (k, closest(k, self.properties.iter().map(String::as_str))))
            .collect()
    }
}

/// True when some pattern in `patterns` and `path` agree on every segment they both have,
/// i.e. one is a prefix of the other, `*` in a pattern matching any segment.
fn any_overlaps(patterns: &[String], path: &[&str]) -> bool {
    patterns.iter().any(|pattern| {
        pattern
            .split('/')
            .zip(path)
            .all(|(want, got)| want == "*" || want == *got)
    })
}

/// One type's entry in `schemas.json`, with the generator's short keys.
#[derive(Deserialize)]
struct RawSchema {
    #[serde(default)]
    c: Vec<String>,
    #[serde(default)]
    cc: Vec<String>,
    #[serde(default)]
    r: Vec<String>,
    #[serde(default)]
    w: Vec<String>,
    #[serde(default)]
    p: Vec<String>,
    #[serde(default)]
    a: Vec<String>,
}

impl From<RawSchema> for ResourceSchema {
    fn from(raw: RawSchema) -> Self {
        ResourceSchema {
            create_only: raw.c,
            conditional_create_only: raw.cc,
            read_only: raw.r,
            write_only: raw.w,
            primary_identifier: raw.p,
            properties: raw.a,
        }
    }
}

/// The whole of `schemas.json`.
#[derive(Deserialize)]
struct RawData {
    source: String,
    types: BTreeMap<String, RawSchema>,
}

/// The parsed data, keyed by resource type name.
struct Schemas {
    source: String,
    types: BTreeMap<String, ResourceSchema>,
}

fn data() -> &'static Schemas {
    static DATA: OnceLock<Schemas> = OnceLock::new();
    DATA.get_or_init(|| {
        // The file is generated and checked by this module's tests, so a failure here is a
        // build defect, not an input error.
        let raw: RawData =
            serde_json::from_str(SCHEMAS_JSON).expect("embedded data/schemas.json is invalid");
        Schemas {
            source: raw.source,
            types: raw
                .types
                .into_iter()
                .map(|(name, schema)| (name, schema.into()))
                .collect(),
        }
    })
}

/// The schema of resource type `type_name` (e.g. `AWS::SQS::Queue`), or `None` for a type
/// the data does not know (custom resources, `Custom::*`, among them).
pub fn schema(type_name: &str) -> Option<&'static ResourceSchema> {
    data().types.get(type_name)
}

/// Where the data came from, e.g. `cfn-lint 1.58.0`.
pub fn source() -> &'static str {
    &data().source
}

/// Every resource type name the data knows, in sorted order.
pub fn known_types() -> impl Iterator<Item = &'static str> {
    data().types.keys().map(String::as_str)
}

/// The known type that an unknown `type_name` likely meant (`AWS::SNS::Topik` ->
/// `AWS::SNS::Topic`), for a "did you mean" in a message.
pub fn closest_type(type_name: &str) -> Option<&'static str> {
    closest(type_name, known_types())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(type_name: &str) -> &'static ResourceSchema {
        schema(type_name).unwrap_or_else(|| panic!("no schema for {type_name}"))
    }

    #[test]
    fn source_names_cfn_lint() {
        assert!(source().starts_with("cfn-lint "), "{}", source());
    }

    #[test]
    fn covers_many_types() {
        let n = known_types().count();
        assert!(n > 1500, "only {n} types");
        assert!(known_types().any(|t| t == "AWS::SQS::Queue"));
    }

    #[test]
    fn a_misspelled_property_is_named_with_what_was_meant() {
        let q = get("AWS::SQS::Queue");
        let found =
            q.unknown_properties(["VisibilityTimout", "QueueName", "Tags", "Arn", "Colour"]);
        assert_eq!(
            found,
            [
                ("VisibilityTimout", Some("VisibilityTimeout")),
                ("Colour", None)
            ]
        );
        // A read-only value nested under a top-level name (an RDS endpoint's address).
        let db = get("AWS::RDS::DBInstance");
        assert!(db.unknown_properties(["Endpoint", "Engine"]).is_empty());
    }

    #[test]
    fn attributes_are_reported_values_and_properties() {
        let q = get("AWS::SQS::Queue");
        assert!(q.has_attribute("Arn"));
        assert!(q.has_attribute("QueueUrl"));
        assert!(q.has_attribute("QueueName"));
        assert!(!q.has_attribute("Arm"));
        assert_eq!(q.closest_attribute("Arm").as_deref(), Some("Arn"));
        let db = get("AWS::RDS::DBInstance");
        assert!(db.has_attribute("Endpoint.Address"));
        assert_eq!(
            db.closest_attribute("Endpoint.Adress").as_deref(),
            Some("Endpoint.Address")
        );
    }

    #[test]
    fn a_misspelled_type_is_matched_to_a_known_one() {
        assert_eq!(closest_type("AWS::SNS::Topik"), Some("AWS::SNS::Topic"));
        assert_eq!(closest_type("AWS::SQS::Queu"), Some("AWS::SQS::Queue"));
        assert_eq!(closest_type("Custom::MyThing"), None);
    }

    #[test]
    fn sqs_queue() {
        let q = get("AWS::SQS::Queue");
        assert!(q.requires_replacement(&["QueueName"]));
        assert!(q.requires_replacement(&["FifoQueue"]));
        assert!(!q.requires_replacement(&["VisibilityTimeout"]));
        assert!(q.is_read_only(&["Arn"]));
        assert!(q.is_read_only(&["QueueUrl"]));
        assert!(!q.is_read_only(&["QueueName"]));
        assert!(q.properties.iter().any(|p| p == "VisibilityTimeout"));
        assert!(!q.properties.iter().any(|p| p == "Arn"));
        assert_eq!(q.primary_identifier, ["QueueUrl"]);
    }

    #[test]
    fn s3_bucket_name() {
        let b = get("AWS::S3::Bucket");
        assert!(b.requires_replacement(&["BucketName"]));
        assert!(!b.requires_replacement(&["VersioningConfiguration", "Status"]));
        assert!(!b.requires_replacement(&["Tags"]));
    }

    #[test]
    fn dynamodb_key_schema() {
        let t = get("AWS::DynamoDB::Table");
        assert!(t.requires_replacement(&["KeySchema"]));
        assert!(t.requires_replacement(&["KeySchema", "0", "AttributeName"]));
        assert!(t.requires_replacement(&["KeySchema", "1"]));
        assert!(t.requires_replacement(&["TableName"]));
        assert!(!t.requires_replacement(&["BillingMode"]));
        assert!(!t.requires_replacement(&["ProvisionedThroughput", "ReadCapacityUnits"]));
    }

    #[test]
    fn ssm_parameter() {
        let p = get("AWS::SSM::Parameter");
        assert!(p.requires_replacement(&["Name"]));
        assert!(!p.requires_replacement(&["Value"]));
        assert!(p.is_write_only(&["Description"]));
        assert!(!p.is_write_only(&["Value"]));
    }

    #[test]
    fn matching_wildcard_ancestor_descendant() {
        let s = ResourceSchema {
            create_only: vec!["A/*/B".into(), "C".into()],
            read_only: vec!["R/X".into()],
            write_only: vec!["W/*".into()],
            ..ResourceSchema::default()
        };
        // wildcard: any list index
        assert!(s.requires_replacement(&["A", "0", "B"]));
        assert!(s.requires_replacement(&["A", "17", "B"]));
        assert!(!s.requires_replacement(&["A", "0", "D"]));
        // the change is an ancestor of the create-only path
        assert!(s.requires_replacement(&["A"]));
        assert!(s.requires_replacement(&["A", "3"]));
        assert!(s.requires_replacement(&[]));
        // the change is a descendant of the create-only path
        assert!(s.requires_replacement(&["A", "0", "B", "Deep"]));
        assert!(s.requires_replacement(&["C", "Nested", "0"]));
        // unrelated, and names that only share a prefix
        assert!(!s.requires_replacement(&["D"]));
        assert!(!s.requires_replacement(&["CC"]));
        assert!(!s.requires_replacement(&["AB"]));

        assert!(s.is_read_only(&["R"]));
        assert!(s.is_read_only(&["R", "X", "Y"]));
        assert!(!s.is_read_only(&["R", "Y"]));
        assert!(s.is_write_only(&["W", "2", "Z"]));
        assert!(!s.is_write_only(&["A"]));

        let empty = ResourceSchema::default();
        assert!(!empty.requires_replacement(&[]));
        assert!(!empty.is_read_only(&["A"]));
    }

    #[test]
    fn conditional_create_only_counts() {
        let s = ResourceSchema {
            conditional_create_only: vec!["K".into()],
            ..ResourceSchema::default()
        };
        assert!(s.requires_replacement(&["K", "0"]));
        assert!(!s.requires_replacement(&["L"]));
    }

    #[test]
    fn real_nested_wildcard_path() {
        // ODB's schema lists `DbNodes/*/DbServerId` as create-only.
        let c = get("AWS::ODB::CloudVmCluster");
        assert!(c.create_only.iter().any(|p| p == "DbNodes/*/DbServerId"));
        assert!(c.requires_replacement(&["DbNodes", "2", "DbServerId"]));
    }

    #[test]
    fn unknown_type_is_none() {
        assert!(schema("Custom::Greeting").is_none());
        assert!(schema("AWS::Nope::Nothing").is_none());
        assert!(schema("").is_none());
    }

    #[test]
    fn paths_have_no_properties_prefix() {
        for name in known_types() {
            let s = get(name);
            for path in s
                .create_only
                .iter()
                .chain(&s.conditional_create_only)
                .chain(&s.read_only)
                .chain(&s.write_only)
                .chain(&s.primary_identifier)
            {
                assert!(
                    !path.is_empty() && !path.starts_with('/') && !path.starts_with("properties/"),
                    "{name}: bad path {path:?}"
                );
            }
        }
    }

    /// The non-custom resource types of the project's template corpus.
    const CORPUS_TYPES: [&str; 54] = [
        "AWS::ApiGateway::Account",
        "AWS::ApiGateway::ApiKey",
        "AWS::ApiGateway::Deployment",
        "AWS::ApiGateway::Method",
        "AWS::ApiGateway::Resource",
        "AWS::ApiGateway::RestApi",
        "AWS::ApiGateway::Stage",
        "AWS::ApiGateway::UsagePlan",
        "AWS::ApiGateway::UsagePlanKey",
        "AWS::CloudFormation::CustomResource",
        "AWS::CloudFormation::Stack",
        "AWS::CloudWatch::Alarm",
        "AWS::CloudWatch::CompositeAlarm",
        "AWS::CloudWatch::Dashboard",
        "AWS::DynamoDB::GlobalTable",
        "AWS::DynamoDB::Table",
        "AWS::EC2::EIP",
        "AWS::EC2::InternetGateway",
        "AWS::EC2::NatGateway",
        "AWS::EC2::Route",
        "AWS::EC2::RouteTable",
        "AWS::EC2::SecurityGroup",
        "AWS::EC2::SecurityGroupIngress",
        "AWS::EC2::Subnet",
        "AWS::EC2::SubnetRouteTableAssociation",
        "AWS::EC2::VPC",
        "AWS::EC2::VPCCidrBlock",
        "AWS::EC2::VPCEndpoint",
        "AWS::EC2::VPCGatewayAttachment",
        "AWS::EC2::Volume",
        "AWS::Events::Archive",
        "AWS::Events::EventBus",
        "AWS::Events::Rule",
        "AWS::IAM::Policy",
        "AWS::IAM::Role",
        "AWS::IAM::User",
        "AWS::KMS::Alias",
        "AWS::KMS::Key",
        "AWS::Lambda::Alias",
        "AWS::Lambda::EventSourceMapping",
        "AWS::Lambda::Function",
        "AWS::Lambda::Permission",
        "AWS::Lambda::Url",
        "AWS::Lambda::Version",
        "AWS::Logs::LogGroup",
        "AWS::S3::Bucket",
        "AWS::S3::BucketPolicy",
        "AWS::SNS::Subscription",
        "AWS::SNS::Topic",
        "AWS::SQS::Queue",
        "AWS::SQS::QueuePolicy",
        "AWS::SSM::Parameter",
        "AWS::SecretsManager::Secret",
        "AWS::StepFunctions::StateMachine",
    ];

    #[test]
    fn every_corpus_type_has_a_schema() {
        let missing: Vec<&str> = CORPUS_TYPES
            .iter()
            .copied()
            .filter(|t| schema(t).is_none())
            .collect();
        assert!(missing.is_empty(), "no schema for {missing:?}");
        for t in CORPUS_TYPES {
            assert!(!get(t).properties.is_empty(), "{t} accepts no properties");
        }
    }
}
