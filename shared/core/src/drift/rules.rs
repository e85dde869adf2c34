//! What a comparison needs to know besides the two values: which lists are sets, which
//! properties AWS never returns, and what the dynamic references resolve to now.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::schema;

/// How [`super::compare`] compares a baseline with what AWS holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CompareRules {
    /// True when the baseline is what AWS returned at deploy time (an observed
    /// baseline): a key AWS has and the baseline does not, or the reverse, is drift.
    /// False when comparing against the properties recorded from the template (the
    /// fallback without a baseline): a key only AWS has is one of its defaults, not drift.
    pub baseline_is_observed: bool,
    /// Property paths of lists compared as sets (schema `insertionOrder: false`):
    /// segments joined by `/` below the resource's properties, `*` for any list item
    /// (`Policies`, `NetworkInterfaces/*/GroupSet`).
    pub unordered: BTreeSet<String>,
    /// Property paths (same form) of write-only properties: AWS never returns them, so
    /// they are not compared, and reported as such.
    pub write_only: BTreeSet<String>,
    /// What dynamic references resolve to now, to compare the positions that hold them.
    pub resolved: Resolved,
    /// Top-level properties and the value AWS holds when none is given: a recorded value
    /// equal to it is in sync with a read that leaves the property out (providers report
    /// only what differs from AWS's defaults).
    pub defaults: BTreeMap<String, serde_json::Value>,
}

/// The current values of dynamic references, by their `{{resolve:...}}` text. `Debug`
/// shows only the references.
///
/// A position holding a reference whose value is not given here is compared by the
/// text around its references only: one that fits is not compared (a whole-string
/// reference then is never compared), one that does not has drifted.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Resolved(BTreeMap<String, String>);

impl fmt::Debug for Resolved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

impl Resolved {
    /// No reference resolved.
    pub fn new() -> Resolved {
        Resolved::default()
    }

    /// Records that `reference` (its `{{resolve:...}}` text) resolves to `value`.
    pub fn insert(&mut self, reference: impl Into<String>, value: impl Into<String>) {
        self.0.insert(reference.into(), value.into());
    }

    /// The value `reference` resolves to, if known.
    pub fn get(&self, reference: &str) -> Option<&str> {
        self.0.get(reference).map(String::as_str)
    }
}

/// Lists of well-known types whose order AWS does not keep (their schemas say
/// `insertionOrder: false`). `Tags` is not listed: tags are always compared as a set.
const BUILTIN_UNORDERED: &[(&str, &[&str])] = &[
    (
        "AWS::EC2::Instance",
        &["SecurityGroupIds", "SecurityGroups"],
    ),
    (
        "AWS::EC2::SecurityGroup",
        &["SecurityGroupEgress", "SecurityGroupIngress"],
    ),
    (
        "AWS::EC2::VPCEndpoint",
        &["RouteTableIds", "SecurityGroupIds", "SubnetIds"],
    ),
    (
        "AWS::ECS::Service",
        &[
            "NetworkConfiguration/AwsvpcConfiguration/SecurityGroups",
            "NetworkConfiguration/AwsvpcConfiguration/Subnets",
        ],
    ),
    (
        "AWS::ElasticLoadBalancingV2::LoadBalancer",
        &[
            "LoadBalancerAttributes",
            "SecurityGroups",
            "SubnetMappings",
            "Subnets",
        ],
    ),
    ("AWS::Events::Rule", &["Targets"]),
    ("AWS::IAM::Group", &["ManagedPolicyArns", "Policies"]),
    ("AWS::IAM::ManagedPolicy", &["Groups", "Roles", "Users"]),
    ("AWS::IAM::Policy", &["Groups", "Roles", "Users"]),
    ("AWS::IAM::Role", &["ManagedPolicyArns", "Policies"]),
    (
        "AWS::IAM::User",
        &["Groups", "ManagedPolicyArns", "Policies"],
    ),
    ("AWS::RDS::DBSubnetGroup", &["SubnetIds"]),
    ("AWS::SNS::Topic", &["Subscription"]),
    ("AWS::SNS::TopicPolicy", &["Topics"]),
    ("AWS::SQS::QueuePolicy", &["Queues"]),
];

/// The built-in unordered list paths of `resource_type` (empty for a type not listed).
pub fn builtin_unordered(resource_type: &str) -> &'static [&'static str] {
    BUILTIN_UNORDERED
        .iter()
        .find(|(t, _)| *t == resource_type)
        .map_or(&[], |(_, paths)| paths)
}

impl CompareRules {
    /// The rules for a resource of `resource_type`: the built-in unordered lists
    /// ([`builtin_unordered`]) and the write-only properties its schema names.
    ///
    /// The embedded schema data does not carry `insertionOrder`, so only the built-in
    /// table says which lists are sets; callers may add paths to `unordered`.
    pub fn for_type(resource_type: &str, baseline_is_observed: bool) -> CompareRules {
        let write_only = schema::schema(resource_type)
            .map(|s| s.write_only.iter().cloned().collect())
            .unwrap_or_default();
        CompareRules {
            baseline_is_observed,
            unordered: builtin_unordered(resource_type)
                .iter()
                .map(|p| p.to_string())
                .collect(),
            write_only,
            resolved: Resolved::default(),
            defaults: super::defaults::defaults_of(resource_type)
                .into_iter()
                .collect(),
        }
    }

    pub(crate) fn is_unordered(&self, path: &[Seg]) -> bool {
        self.unordered.iter().any(|p| pattern_matches(p, path))
    }

    pub(crate) fn is_write_only(&self, path: &[Seg]) -> bool {
        self.write_only.iter().any(|p| pattern_matches(p, path))
    }

    /// True when `recorded`, at the top-level `path`, is AWS's default there.
    pub(crate) fn is_default(&self, path: &[Seg], recorded: &serde_json::Value) -> bool {
        let [Seg::Key(k)] = path else {
            return false;
        };
        self.defaults.get(k).is_some_and(|d| match (recorded, d) {
            (serde_json::Value::Array(r), serde_json::Value::Array(d)) => {
                r.len() == d.len()
                    && r.iter()
                        .zip(d)
                        .all(|(r, d)| super::normalize::scalars_equal(r, d))
            }
            _ => super::normalize::scalars_equal(recorded, d),
        })
    }
}

/// One step of a path below the properties.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Seg {
    Key(String),
    Index(usize),
}

/// True when the property path pattern (`A/*/B`) names exactly `path`; `*` stands for
/// any list item.
pub(crate) fn pattern_matches(pattern: &str, path: &[Seg]) -> bool {
    let mut segs = pattern.split('/');
    for seg in path {
        let Some(want) = segs.next() else {
            return false;
        };
        let ok = match seg {
            Seg::Key(k) => want == k,
            Seg::Index(_) => want == "*",
        };
        if !ok {
            return false;
        }
    }
    segs.next().is_none()
}

/// The JSON pointer of `path`.
pub(crate) fn pointer(path: &[Seg]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) => crate::dynref::resolve::push_token(&mut out, k),
            Seg::Index(i) => crate::dynref::resolve::push_token(&mut out, &i.to_string()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(k: &str) -> Seg {
        Seg::Key(k.to_string())
    }

    #[test]
    fn patterns_name_exact_paths() {
        assert!(pattern_matches("Policies", &[key("Policies")]));
        assert!(!pattern_matches(
            "Policies",
            &[key("Policies"), Seg::Index(0)]
        ));
        assert!(!pattern_matches("Policies", &[]));
        let nested = [key("NetworkInterfaces"), Seg::Index(3), key("GroupSet")];
        assert!(pattern_matches("NetworkInterfaces/*/GroupSet", &nested));
        assert!(!pattern_matches("NetworkInterfaces/0/GroupSet", &nested));
        assert!(!pattern_matches("NetworkInterfaces/*", &nested));
        assert_eq!(pointer(&nested), "/NetworkInterfaces/3/GroupSet");
        assert_eq!(pointer(&[key("a/b~c")]), "/a~1b~0c");
    }

    #[test]
    fn rules_for_well_known_types() {
        let role = CompareRules::for_type("AWS::IAM::Role", true);
        assert!(role.baseline_is_observed);
        assert!(role.is_unordered(&[key("ManagedPolicyArns")]));
        assert!(role.is_unordered(&[key("Policies")]));
        assert!(!role.is_unordered(&[key("Tags")]));
        let sg = CompareRules::for_type("AWS::EC2::SecurityGroup", false);
        assert!(sg.is_unordered(&[key("SecurityGroupIngress")]));
        assert!(sg.is_unordered(&[key("SecurityGroupEgress")]));
        let qp = CompareRules::for_type("AWS::SQS::QueuePolicy", false);
        assert!(qp.is_unordered(&[key("Queues")]));
        assert!(!qp.is_unordered(&[key("PolicyDocument")]));
        assert!(builtin_unordered("AWS::SQS::Queue").is_empty());
        assert!(builtin_unordered("Custom::Thing").is_empty());
    }

    #[test]
    fn write_only_comes_from_the_schema() {
        let db = CompareRules::for_type("AWS::RDS::DBInstance", true);
        assert!(db.is_write_only(&[key("MasterUserPassword")]));
        assert!(!db.is_write_only(&[key("DBInstanceClass")]));
        assert!(
            CompareRules::for_type("Custom::X", true)
                .write_only
                .is_empty()
        );
    }

    #[test]
    fn resolved_values_stay_out_of_debug() {
        let mut r = Resolved::new();
        r.insert("{{resolve:secretsmanager:db}}", "hunter2");
        assert_eq!(r.get("{{resolve:secretsmanager:db}}"), Some("hunter2"));
        let shown = format!(
            "{:?}",
            CompareRules {
                resolved: r,
                ..Default::default()
            }
        );
        assert!(shown.contains("{{resolve:secretsmanager:db}}"), "{shown}");
        assert!(!shown.contains("hunter2"), "{shown}");
    }
}
