//! Asset references pointed at stackflow's bucket: in a region that uses stackflow's own
//! asset storage, the template's references to the CDK bootstrap bucket
//! (`cdk-<qualifier>-assets-<account>-<region>`) name stackflow's bucket instead, and
//! the objects sit under [`ASSET_PREFIX`] there.
//!
//! A manifest may spell the CDK bucket with placeholders (`...-${AWS::AccountId}-
//! ${AWS::Region}`, an environment-agnostic app) or literally (`...-123456789012-us-east-1`,
//! an app bound to an account and region). Either spelling may stand in a template:
//!
//! - in plain text (a property or output string outside `Fn::Sub`), the bucket becomes
//!   stackflow's bucket *by name*, account and region written out: nothing substitutes
//!   placeholders there, so `${...}` must never be put into such text;
//! - in the template string of an `Fn::Sub`, the placeholder spelling becomes stackflow's
//!   with placeholders ([`STACKFLOW_BUCKET_PATTERN`], which the `Fn::Sub` resolves), the
//!   literal one stackflow's by name.
//!
//! A reference is any such string that spells the bucket (alone, as in `Code.S3Bucket`;
//! followed by a key, as in an `s3://` URL or an IAM grant `arn:...:s3:::bucket/*`;
//! anywhere inside a longer text, such as a JSON document held as a string), an object key
//! of the manifest (alone, as in `Code.S3Key`, or as a token of a longer text: `"Key":
//! "<hash>.zip"`), an `Fn::Sub` variable bound to the bucket (`${B}/<key>`), or, in an
//! `Fn::Join`, what follows a part that ends with the bucket: a part that starts with `/`
//! (`"/*"` of a grant, `"/<hash>.json"` of a nested stack's `TemplateURL`), the part after
//! a lone `"/"`, or the next part when the delimiter is `/`.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::asset_manifest::{AssetManifest, FileDestination, Placeholders};
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

/// One spelling of a CDK bootstrap bucket and what it becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketMove {
    /// The CDK bucket as a template may spell it: with the manifest's placeholders, or
    /// with this account and region.
    pub from: String,
    /// stackflow's bucket in the template string of an `Fn::Sub`: with placeholders when
    /// `from` has them (the `Fn::Sub` resolves both alike), else by name.
    pub in_sub: String,
    /// stackflow's bucket by name, in this account and the destination's region: what
    /// plain text gets.
    pub literal: String,
}

/// Where a string stands: in plain text, or in the template string of an `Fn::Sub`
/// (where `${...}` is substituted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Context {
    Text,
    Sub,
}

/// What to point where: the CDK bucket's spellings and stackflow's, and the asset keys.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Retarget {
    /// Each spelling a template may use of each CDK bucket, and what it becomes.
    pub buckets: Vec<BucketMove>,
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
            let literal = at.substitute(STACKFLOW_BUCKET_PATTERN);
            let spelled = &d.bucket_name;
            let in_sub = if spelled.contains("${") {
                STACKFLOW_BUCKET_PATTERN.to_string()
            } else {
                literal.clone()
            };
            let moves = [
                BucketMove {
                    from: spelled.clone(),
                    in_sub,
                    literal: literal.clone(),
                },
                BucketMove {
                    from: at.substitute(spelled),
                    in_sub: literal.clone(),
                    literal,
                },
            ];
            for m in moves {
                if !r.buckets.iter().any(|b| b.from == m.from) {
                    r.buckets.push(m);
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

    /// Rewrites the references in `v` (plain text); true when anything changed.
    pub fn value(&self, v: &mut Value) -> bool {
        match v {
            Value::String(s) => self.string(s, Context::Text),
            Value::Array(items) => items.iter_mut().fold(false, |c, x| self.value(x) | c),
            Value::Object(m) => {
                if m.len() == 1 {
                    if let Some(sub) = m.get_mut("Fn::Sub") {
                        return self.sub(sub);
                    }
                    if let Some(Value::Array(args)) = m.get_mut("Fn::Join")
                        && let [Value::String(delimiter), Value::Array(parts)] = args.as_mut_slice()
                    {
                        return self.join(delimiter, parts);
                    }
                }
                m.values_mut().fold(false, |c, x| self.value(x) | c)
            }
            _ => false,
        }
    }

    /// The argument of an `Fn::Sub`: its template string in the `Fn::Sub` context, its
    /// variables' values as plain text; then `${Var}/` of a variable bound to the bucket
    /// gets the prefix.
    fn sub(&self, arg: &mut Value) -> bool {
        match arg {
            Value::String(s) => self.string(s, Context::Sub),
            Value::Array(args) => match args.as_mut_slice() {
                [Value::String(s), Value::Object(vars)] => {
                    let mut changed = vars.values_mut().fold(false, |c, x| self.value(x) | c);
                    changed |= self.string(s, Context::Sub);
                    changed | self.prefix_bucket_variables(s, vars)
                }
                _ => args.iter_mut().fold(false, |c, x| self.value(x) | c),
            },
            other => self.value(other),
        }
    }

    /// In an `Fn::Sub` template string `s`, `${Var}/` becomes `${Var}/assets/` for each
    /// variable of `vars` whose value ends with stackflow's bucket.
    fn prefix_bucket_variables(&self, s: &mut String, vars: &Map<String, Value>) -> bool {
        let mut changed = false;
        for (name, value) in vars {
            if !self.ends_with_bucket(value) {
                continue;
            }
            let slot = format!("${{{name}}}/");
            changed |= prefix_after(s, &slot);
        }
        changed
    }

    /// The parts of an `Fn::Join`: each rewritten, then what follows a part that ends
    /// with the new bucket gets the prefix.
    fn join(&self, delimiter: &str, parts: &mut [Value]) -> bool {
        let mut changed = parts.iter_mut().fold(false, |c, x| self.value(x) | c);
        if delimiter.is_empty() {
            for i in 1..parts.len() {
                if !self.ends_with_bucket(&parts[i - 1]) {
                    continue;
                }
                let lone_slash = parts[i].as_str() == Some("/");
                let next = if lone_slash { i + 1 } else { i };
                if let Some(Value::String(s)) = parts.get_mut(next) {
                    changed |= if lone_slash {
                        prefix_after(s, "")
                    } else {
                        prefix_leading_slash(s)
                    };
                }
            }
        } else if delimiter == "/" {
            for i in 1..parts.len() {
                if self.ends_with_bucket(&parts[i - 1])
                    && let Value::String(s) = &mut parts[i]
                {
                    changed |= prefix_after(s, "");
                }
            }
        }
        changed
    }

    /// True when `part` (a string, or an `Fn::Sub` template) ends with stackflow's bucket.
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
        text.is_some_and(|t| {
            self.buckets
                .iter()
                .any(|b| t.ends_with(b.literal.as_str()) || t.ends_with(b.in_sub.as_str()))
        })
    }

    fn string(&self, s: &mut String, context: Context) -> bool {
        if self.keys.contains(s.as_str()) {
            *s = format!("{ASSET_PREFIX}{s}");
            return true;
        }
        let mut changed = false;
        for b in &self.buckets {
            if s.contains(b.from.as_str()) {
                let to = match context {
                    Context::Text => &b.literal,
                    Context::Sub => &b.in_sub,
                };
                *s = s
                    .replace(&format!("{}/", b.from), &format!("{to}/{ASSET_PREFIX}"))
                    .replace(b.from.as_str(), to);
                changed = true;
            }
        }
        for key in &self.keys {
            changed |= prefix_key_tokens(s, key);
        }
        changed
    }
}

/// Puts [`ASSET_PREFIX`] after every `marker` in `s` (at the start of `s` for an empty
/// marker) that it does not follow already; true when anything changed.
fn prefix_after(s: &mut String, marker: &str) -> bool {
    if marker.is_empty() {
        if s.starts_with(ASSET_PREFIX) {
            return false;
        }
        s.insert_str(0, ASSET_PREFIX);
        return true;
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s.as_str();
    let mut changed = false;
    while let Some(at) = rest.find(marker) {
        let end = at + marker.len();
        out.push_str(&rest[..end]);
        rest = &rest[end..];
        if !rest.starts_with(ASSET_PREFIX) {
            out.push_str(ASSET_PREFIX);
            changed = true;
        }
    }
    out.push_str(rest);
    if changed {
        *s = out;
    }
    changed
}

/// Puts [`ASSET_PREFIX`] after the `/` that `s` starts with, unless it follows already.
fn prefix_leading_slash(s: &mut String) -> bool {
    match s.strip_prefix('/') {
        Some(rest) if !rest.starts_with(ASSET_PREFIX) => {
            *s = format!("/{ASSET_PREFIX}{rest}");
            true
        }
        _ => false,
    }
}

/// True for a character that may belong to an object key or a path around it (so a key
/// next to it is not a token of its own).
fn in_key(c: char) -> bool {
    c.is_ascii_alphanumeric() || "._-/".contains(c)
}

/// Puts [`ASSET_PREFIX`] before each occurrence of `key` in `s` that stands as a token of
/// its own (not inside a longer name or path: `"Key":"<key>"` in a JSON text); true when
/// anything changed. A key after a `/` belongs to a path, whose bucket decides.
fn prefix_key_tokens(s: &mut String, key: &str) -> bool {
    if key.is_empty() || !s.contains(key) {
        return false;
    }
    let mut out = String::with_capacity(s.len() + ASSET_PREFIX.len());
    let mut changed = false;
    let mut last = 0;
    for (at, _) in s.match_indices(key) {
        let before = s[..at].chars().next_back();
        let after = s[at + key.len()..].chars().next();
        if at < last || before.is_some_and(in_key) || after.is_some_and(in_key) {
            continue;
        }
        out.push_str(&s[last..at]);
        out.push_str(ASSET_PREFIX);
        out.push_str(key);
        last = at + key.len();
        changed = true;
    }
    if changed {
        out.push_str(&s[last..]);
        *s = out;
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::asset_manifest::parse_asset_manifest;
    use serde_json::json;

    const CDK: &str = "cdk-hnb659fds-assets-${AWS::AccountId}-${AWS::Region}";
    const BOUND: &str = "cdk-hnb659fds-assets-123456789012-us-east-1";
    const OURS: &str = "stackflow-123456789012-us-east-1";

    fn at() -> Placeholders {
        Placeholders {
            account_id: "123456789012".into(),
            region: "us-east-1".into(),
        }
    }

    /// The retarget of a manifest whose destinations name the bucket as `bucket` does.
    fn retarget_of(bucket: &str) -> Retarget {
        let m = parse_asset_manifest(
            &json!({"files": {
                "abc": {"source": {"path": "asset.abc", "packaging": "zip"},
                        "destinations": {"d": {"bucketName": bucket, "objectKey": "abc.zip"}}},
                "def": {"source": {"path": "N.nested.template.json"},
                        "destinations": {"d": {"bucketName": bucket, "objectKey": "def.json"}}}
            }}),
            std::path::Path::new("."),
        )
        .unwrap();
        Retarget::for_manifests([&m], &at())
    }

    fn retarget() -> Retarget {
        retarget_of(CDK)
    }

    fn template(resources: Value) -> Template {
        Template::from_value(&json!({"Resources": resources})).unwrap()
    }

    fn props(t: &Template, id: &str) -> Value {
        Value::Object(t.resources[id].properties.clone())
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
                "Value": format!("s3://{BOUND}/def.json"),
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
        assert_eq!(
            props(&t, "Fn")["Code"],
            json!({"S3Bucket": {"Fn::Sub": STACKFLOW_BUCKET_PATTERN}, "S3Key": "assets/abc.zip"})
        );
        let grants = &props(&t, "Policy")["PolicyDocument"]["Statement"][0]["Resource"];
        assert_eq!(
            grants[0]["Fn::Join"][1][3],
            json!({"Fn::Sub": STACKFLOW_BUCKET_PATTERN})
        );
        assert_eq!(grants[1]["Fn::Join"][1][4], json!("/assets/*"));
        assert_eq!(
            props(&t, "Nested")["TemplateURL"]["Fn::Join"][1][4],
            json!("/assets/def.json")
        );
        assert_eq!(
            props(&t, "Param")["Value"],
            json!(format!("s3://{OURS}/assets/def.json"))
        );
        // Rewriting again changes nothing more.
        assert!(r.template(&mut t, "").is_empty());
    }

    /// An app bound to an account and region names the CDK bucket literally: in plain
    /// text it becomes stackflow's bucket by name, never the placeholder pattern.
    #[test]
    fn a_literal_bucket_in_plain_text_becomes_stackflows_bucket_by_name() {
        let r = retarget_of(BOUND);
        let mut t = template(json!({
            "Layer": {"Type": "AWS::Lambda::LayerVersion", "Properties": {
                "Content": {"S3Bucket": BOUND, "S3Key": "abc.zip"}}},
            "Machine": {"Type": "AWS::StepFunctions::StateMachine", "Properties": {
                "RoleArn": "arn:aws:iam::123456789012:role/r",
                "DefinitionS3Location": {"Bucket": BOUND, "Key": "def.json"}}},
            "Grant": {"Type": "AWS::IAM::Policy", "Properties": {"PolicyDocument": {
                "Statement": [{"Resource": [
                    format!("arn:aws:s3:::{BOUND}"), format!("arn:aws:s3:::{BOUND}/*")]}]}}},
            "InSub": {"Type": "AWS::SSM::Parameter", "Properties": {
                "Value": {"Fn::Sub": format!("arn:${{AWS::Partition}}:s3:::{BOUND}/*")}}}
        }));
        t.outputs.insert(
            "ConfigBucket".into(),
            crate::template::Output {
                value: json!(BOUND),
                export_name: None,
                condition: None,
                description: None,
            },
        );
        let changed = r.template(&mut t, "");
        assert_eq!(
            changed,
            [
                "Layer.Content",
                "Machine.DefinitionS3Location",
                "Grant.PolicyDocument",
                "InSub.Value",
                "Outputs.ConfigBucket"
            ]
        );
        assert_eq!(
            props(&t, "Layer")["Content"],
            json!({"S3Bucket": OURS, "S3Key": "assets/abc.zip"})
        );
        assert_eq!(
            props(&t, "Machine")["DefinitionS3Location"],
            json!({"Bucket": OURS, "Key": "assets/def.json"})
        );
        assert_eq!(
            props(&t, "Grant")["PolicyDocument"]["Statement"][0]["Resource"],
            json!([
                format!("arn:aws:s3:::{OURS}"),
                format!("arn:aws:s3:::{OURS}/assets/*")
            ])
        );
        assert_eq!(
            props(&t, "InSub")["Value"],
            json!({"Fn::Sub": format!("arn:${{AWS::Partition}}:s3:::{OURS}/assets/*")})
        );
        assert_eq!(t.outputs["ConfigBucket"].value, json!(OURS));
        let text = serde_json::to_string(&t.resources).unwrap();
        assert!(!text.contains("${AWS::AccountId}"), "{text}");
        assert!(r.template(&mut t, "").is_empty());
    }

    #[test]
    fn the_placeholder_spelling_in_plain_text_is_written_out() {
        let r = retarget();
        let mut v = json!({"Bucket": CDK, "Url": format!("s3://{CDK}/abc.zip")});
        assert!(r.value(&mut v));
        assert_eq!(
            v,
            json!({"Bucket": OURS, "Url": format!("s3://{OURS}/assets/abc.zip")})
        );
    }

    #[test]
    fn json_texts_sub_variables_and_joins_on_slashes() {
        let r = retarget_of(BOUND);
        // A JSON document held as a string: the bucket and the key as tokens.
        let mut doc = json!(format!(
            r#"{{"Parameters":{{"Bucket":"{BOUND}","Key":"abc.zip"}},"Other":"xabc.zip"}}"#
        ));
        assert!(r.value(&mut doc));
        assert_eq!(
            doc,
            json!(format!(
                r#"{{"Parameters":{{"Bucket":"{OURS}","Key":"assets/abc.zip"}},"Other":"xabc.zip"}}"#
            ))
        );
        // An Fn::Sub variable bound to the bucket.
        let mut sub = json!({"Fn::Sub": ["s3://${B}/abc.zip and ${B}", {"B": BOUND}]});
        assert!(r.value(&mut sub));
        assert_eq!(
            sub,
            json!({"Fn::Sub": ["s3://${B}/assets/abc.zip and ${B}", {"B": OURS}]})
        );
        // A join with a lone slash, and one on "/".
        let mut lone = json!({"Fn::Join": ["", [BOUND, "/", "*"]]});
        assert!(r.value(&mut lone));
        assert_eq!(lone, json!({"Fn::Join": ["", [OURS, "/", "assets/*"]]}));
        let mut slashes = json!({"Fn::Join": ["/", ["arn:aws:s3::", BOUND, "abc.zip"]]});
        assert!(r.value(&mut slashes));
        assert_eq!(
            slashes,
            json!({"Fn::Join": ["/", ["arn:aws:s3::", OURS, "assets/abc.zip"]]})
        );
        for mut v in [doc, sub, lone, slashes] {
            assert!(!r.value(&mut v), "a second rewrite changed {v}");
        }
    }

    #[test]
    fn other_buckets_and_keys_stay() {
        let r = retarget();
        let mut t = template(json!({
            "Fn": {"Type": "AWS::Lambda::Function", "Properties": {
                "Code": {"S3Bucket": "my-own-bucket", "S3Key": "other.zip"}}},
            "J": {"Type": "AWS::SSM::Parameter", "Properties": {
                "Value": {"Fn::Join": ["", ["my-own-bucket", "/x"]]}}},
            "K": {"Type": "AWS::SSM::Parameter", "Properties": {
                "Value": "my-own-bucket/abc.zip, xabc.zip, abc.zipx"}}
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
