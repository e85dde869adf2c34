//! Asset references pointed at stackflow's bucket: in a region that uses stackflow's own
//! asset storage, the template's references to the CDK bootstrap bucket
//! (`cdk-<qualifier>-assets-<account>-<region>`) name stackflow's bucket instead, and
//! the objects sit under [`ASSET_PREFIX`] there.
//!
//! A reference is any string of a resource's properties or an output that spells the
//! bucket (alone, as in `Code.S3Bucket`; followed by a key, as in an `s3://` URL or an
//! IAM grant `arn:...:s3:::bucket/*`), an object key of the manifest alone (`Code.S3Key`),
//! or, in an `Fn::Join`, the part after one that ends with the bucket and starts with `/`
//! (`"/*"` of a grant, `"/<hash>.json"` of a nested stack's `TemplateURL`).

use std::collections::BTreeSet;

use serde_json::Value;

use super::manifest::{AssetManifest, FileDestination, Placeholders};
use crate::template::{NestedTemplate, StackTemplate, Template};

/// The key prefix of assets in stackflow's bucket (the rest of the bucket, engine inputs
/// and custom resource responses, is never readable through an asset grant).
pub const ASSET_PREFIX: &str = "assets/";

/// The name of stackflow's own bucket, with placeholders as a template spells it.
pub const STACKFLOW_BUCKET_PATTERN: &str = "stackflow-${AWS::AccountId}-${AWS::Region}";

/// The name of stackflow's own asset and engine bucket in an account and region.
pub fn stackflow_bucket_name(account_id: &str, region: &str) -> String {
    format!("stackflow-{account_id}-{region}")
}

/// True for the name of a CDK bootstrap asset bucket (`cdk-<qualifier>-assets-...`),
/// placeholders or not.
pub fn is_cdk_asset_bucket(name: &str) -> bool {
    name.strip_prefix("cdk-")
        .and_then(|rest| rest.split_once("-assets-"))
        .is_some_and(|(qualifier, _)| {
            !qualifier.is_empty() && qualifier.chars().all(|c| c.is_ascii_alphanumeric())
        })
}

/// What to point where: the CDK bucket's spellings and stackflow's, and the asset keys.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Retarget {
    /// `(from, to)` bucket names: each spelling a template may use (with placeholders, and
    /// with this account and region).
    pub buckets: Vec<(String, String)>,
    /// The object keys of the manifest's destinations in those buckets.
    pub keys: BTreeSet<String>,
}

impl Retarget {
    /// The retarget of every destination of `manifests` in a CDK bootstrap bucket to
    /// stackflow's bucket, in `at`'s account and region.
    pub fn for_manifests<'m>(
        manifests: impl IntoIterator<Item = &'m AssetManifest>,
        at: &Placeholders,
    ) -> Retarget {
        let mut r = Retarget::default();
        for d in manifests
            .into_iter()
            .flat_map(|m| &m.files)
            .flat_map(|f| &f.destinations)
            .filter(|d| is_cdk_asset_bucket(&d.bucket_name))
        {
            let at = at.in_region(d.region.as_deref());
            let spellings = [
                (d.bucket_name.clone(), STACKFLOW_BUCKET_PATTERN.to_string()),
                (
                    at.substitute(&d.bucket_name),
                    at.substitute(STACKFLOW_BUCKET_PATTERN),
                ),
            ];
            for pair in spellings {
                if !r.buckets.contains(&pair) {
                    r.buckets.push(pair);
                }
            }
            r.keys.insert(d.object_key.clone());
            r.keys.insert(at.substitute(&d.object_key));
        }
        r
    }

    /// True when there is nothing to point elsewhere.
    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }

    /// Where a destination publishes instead: stackflow's bucket, under [`ASSET_PREFIX`]
    /// (a destination outside the CDK bootstrap bucket stays).
    pub fn destination(&self, d: &FileDestination) -> FileDestination {
        if !is_cdk_asset_bucket(&d.bucket_name) {
            return d.clone();
        }
        FileDestination {
            bucket_name: STACKFLOW_BUCKET_PATTERN.to_string(),
            object_key: format!("{ASSET_PREFIX}{}", d.object_key),
            ..d.clone()
        }
    }

    /// Points a stack's references (and its nested stacks') at stackflow's bucket. Returns
    /// each resource property and output changed, as `Logical.Property` (`Nested/Logical.
    /// Property` in a nested stack), in template order.
    pub fn stack(&self, stack: &mut StackTemplate) -> Vec<String> {
        let mut changed = self.template(&mut stack.template, "");
        for (id, nested) in &mut stack.nested {
            changed.extend(self.nested(nested, &format!("{id}/")));
        }
        changed
    }

    fn nested(&self, n: &mut NestedTemplate, prefix: &str) -> Vec<String> {
        let mut changed = self.template(&mut n.template, prefix);
        for (id, inner) in &mut n.nested {
            changed.extend(self.nested(inner, &format!("{prefix}{id}/")));
        }
        changed
    }

    /// Points one template's references at stackflow's bucket (see [`Retarget::stack`]).
    pub fn template(&self, t: &mut Template, prefix: &str) -> Vec<String> {
        let mut changed = Vec::new();
        if self.is_empty() {
            return changed;
        }
        for (id, r) in &mut t.resources {
            for (key, v) in &mut r.properties {
                if self.value(v) {
                    changed.push(format!("{prefix}{id}.{key}"));
                }
            }
        }
        for (id, o) in &mut t.outputs {
            if self.value(&mut o.value) {
                changed.push(format!("{prefix}Outputs.{id}"));
            }
        }
        changed
    }

    /// Rewrites the references in `v`; true when anything changed.
    fn value(&self, v: &mut Value) -> bool {
        match v {
            Value::String(s) => self.string(s),
            Value::Array(items) => items.iter_mut().fold(false, |c, x| self.value(x) | c),
            Value::Object(m) => {
                if let Some(Value::Array(args)) = m.get_mut("Fn::Join")
                    && let [_, Value::Array(parts)] = args.as_mut_slice()
                {
                    return self.join(parts);
                }
                m.values_mut().fold(false, |c, x| self.value(x) | c)
            }
            _ => false,
        }
    }

    /// The parts of an `Fn::Join`: each rewritten, then a part after one that ends with
    /// the new bucket and starts with `/` gets the prefix.
    fn join(&self, parts: &mut [Value]) -> bool {
        let mut changed = parts.iter_mut().fold(false, |c, x| self.value(x) | c);
        for i in 1..parts.len() {
            if !self.ends_with_bucket(&parts[i - 1]) {
                continue;
            }
            if let Value::String(s) = &mut parts[i]
                && let Some(rest) = s.strip_prefix('/')
                && !rest.starts_with(ASSET_PREFIX)
            {
                *s = format!("/{ASSET_PREFIX}{rest}");
                changed = true;
            }
        }
        changed
    }

    fn ends_with_bucket(&self, part: &Value) -> bool {
        let text = match part {
            Value::String(s) => Some(s.as_str()),
            Value::Object(m) => match m.get("Fn::Sub") {
                Some(Value::String(s)) => Some(s.as_str()),
                Some(Value::Array(a)) => a.first().and_then(Value::as_str),
                _ => None,
            },
            _ => None,
        };
        text.is_some_and(|t| self.buckets.iter().any(|(_, to)| t.ends_with(to.as_str())))
    }

    fn string(&self, s: &mut String) -> bool {
        if self.keys.contains(s.as_str()) {
            *s = format!("{ASSET_PREFIX}{s}");
            return true;
        }
        let mut changed = false;
        for (from, to) in &self.buckets {
            if s.contains(from.as_str()) {
                *s = s
                    .replace(&format!("{from}/"), &format!("{to}/{ASSET_PREFIX}"))
                    .replace(from.as_str(), to);
                changed = true;
            }
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assets::manifest::parse_asset_manifest;
    use serde_json::json;

    const CDK: &str = "cdk-hnb659fds-assets-${AWS::AccountId}-${AWS::Region}";

    fn retarget() -> Retarget {
        let m = parse_asset_manifest(
            &json!({"files": {
                "abc": {"source": {"path": "asset.abc", "packaging": "zip"},
                        "destinations": {"d": {"bucketName": CDK, "objectKey": "abc.zip"}}},
                "def": {"source": {"path": "N.nested.template.json"},
                        "destinations": {"d": {"bucketName": CDK, "objectKey": "def.json"}}}
            }}),
            std::path::Path::new("."),
        )
        .unwrap();
        let at = Placeholders {
            account_id: "123456789012".into(),
            region: "us-east-1".into(),
        };
        Retarget::for_manifests([&m], &at)
    }

    fn template(resources: Value) -> Template {
        Template::from_value(&json!({"Resources": resources})).unwrap()
    }

    #[test]
    fn cdk_bootstrap_buckets_are_recognised() {
        assert!(is_cdk_asset_bucket(CDK));
        assert!(is_cdk_asset_bucket("cdk-abc123-assets-1-eu-west-1"));
        assert!(!is_cdk_asset_bucket("cdk-assets-1"));
        assert!(!is_cdk_asset_bucket("my-bucket"));
        assert!(!is_cdk_asset_bucket("stackflow-1-us-east-1"));
    }

    #[test]
    fn lambda_code_grants_urls_and_literal_names_are_pointed_at_stackflow() {
        let r = retarget();
        let mut t = template(json!({
            "Fn": {"Type": "AWS::Lambda::Function", "Properties": {
                "Code": {"S3Bucket": {"Fn::Sub": CDK}, "S3Key": "abc.zip"},
                "Handler": "index.handler"}},
            "Policy": {"Type": "AWS::IAM::Policy", "Properties": {"PolicyDocument": {
                "Statement": [{"Resource": [
                    {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":s3:::",
                        {"Fn::Sub": CDK}]]},
                    {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":s3:::",
                        {"Fn::Sub": CDK}, "/*"]]}]}]}}},
            "Nested": {"Type": "AWS::CloudFormation::Stack", "Properties": {
                "TemplateURL": {"Fn::Join": ["", ["https://s3.", {"Ref": "AWS::URLSuffix"},
                    "/", {"Fn::Sub": CDK}, "/def.json"]]}}},
            "Param": {"Type": "AWS::SSM::Parameter", "Properties": {
                "Value": "s3://cdk-hnb659fds-assets-123456789012-us-east-1/def.json",
                "Type": "String"}}
        }));
        let changed = r.template(&mut t, "");
        assert_eq!(
            changed,
            [
                "Fn.Code",
                "Policy.PolicyDocument",
                "Nested.TemplateURL",
                "Param.Value"
            ]
        );
        let props = |id: &str| Value::Object(t.resources[id].properties.clone());
        assert_eq!(
            props("Fn")["Code"],
            json!({"S3Bucket": {"Fn::Sub": STACKFLOW_BUCKET_PATTERN}, "S3Key": "assets/abc.zip"})
        );
        let grants = &props("Policy")["PolicyDocument"]["Statement"][0]["Resource"];
        assert_eq!(
            grants[0]["Fn::Join"][1][3],
            json!({"Fn::Sub": STACKFLOW_BUCKET_PATTERN})
        );
        assert_eq!(grants[1]["Fn::Join"][1][4], json!("/assets/*"));
        assert_eq!(
            props("Nested")["TemplateURL"]["Fn::Join"][1][4],
            json!("/assets/def.json")
        );
        assert_eq!(
            props("Param")["Value"],
            json!("s3://stackflow-123456789012-us-east-1/assets/def.json")
        );
        // Rewriting again changes nothing more.
        assert!(r.template(&mut t, "").is_empty());
    }

    #[test]
    fn other_buckets_and_keys_stay() {
        let r = retarget();
        let mut t = template(json!({
            "Fn": {"Type": "AWS::Lambda::Function", "Properties": {
                "Code": {"S3Bucket": "my-own-bucket", "S3Key": "other.zip"}}},
            "J": {"Type": "AWS::SSM::Parameter", "Properties": {
                "Value": {"Fn::Join": ["", ["my-own-bucket", "/x"]]}}}
        }));
        let before = t.clone();
        assert!(r.template(&mut t, "").is_empty());
        assert_eq!(t, before);
        assert!(Retarget::default().template(&mut t, "").is_empty());
    }

    #[test]
    fn destinations_move_under_the_prefix_of_stackflows_bucket() {
        let d = FileDestination {
            id: "d".into(),
            bucket_name: CDK.into(),
            object_key: "abc.zip".into(),
            region: None,
            assume_role_arn: None,
        };
        let moved = retarget().destination(&d);
        assert_eq!(moved.bucket_name, STACKFLOW_BUCKET_PATTERN);
        assert_eq!(moved.object_key, "assets/abc.zip");
        let own = FileDestination {
            bucket_name: "mine".into(),
            ..d
        };
        assert_eq!(retarget().destination(&own), own);
        assert_eq!(
            stackflow_bucket_name("1", "eu-west-1"),
            "stackflow-1-eu-west-1"
        );
    }
}
