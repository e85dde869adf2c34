//! Policies another resource of the stack puts on an IAM principal. An
//! `AWS::IAM::Policy` puts an inline policy (its `PolicyName`) on each role, user and
//! group it names, and an `AWS::IAM::ManagedPolicy` attaches itself (its ARN, the
//! physical id) to each of them; CDK writes a role's permissions that way (the
//! `DefaultPolicy` of a function's role). A read of the principal holds them, but they
//! are those resources' own: they are left out of the principal's state before it is
//! compared, accepted or reverted, so that a principal is not drifted by its stack's own
//! policies, and a revert never removes them.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

/// The principal types and the property of a policy resource that names them.
const PRINCIPALS: &[(&str, &str)] = &[
    ("AWS::IAM::Role", "Roles"),
    ("AWS::IAM::User", "Users"),
    ("AWS::IAM::Group", "Groups"),
];

/// What the stack's policy resources put on each principal, by (principal type, name).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Attachments {
    inline: BTreeMap<(String, String), BTreeSet<String>>,
    managed: BTreeMap<(String, String), BTreeSet<String>>,
}

fn names<'a>(props: &'a Map<String, Value>, key: &str) -> impl Iterator<Item = &'a str> {
    props
        .get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

impl Attachments {
    /// The attachments of a stack's resources, given as (type, physical id, recorded
    /// properties).
    pub fn of<'a>(
        resources: impl IntoIterator<Item = (&'a str, &'a str, &'a Map<String, Value>)>,
    ) -> Attachments {
        let mut out = Attachments::default();
        for (ty, physical_id, props) in resources {
            let (into, what) = match ty {
                "AWS::IAM::Policy" => match props.get("PolicyName").and_then(Value::as_str) {
                    Some(name) => (&mut out.inline, name),
                    None => continue,
                },
                "AWS::IAM::ManagedPolicy" => (&mut out.managed, physical_id),
                _ => continue,
            };
            for (principal, key) in PRINCIPALS {
                for name in names(props, key) {
                    into.entry((principal.to_string(), name.to_string()))
                        .or_default()
                        .insert(what.to_string());
                }
            }
        }
        out
    }

    /// True when no principal has any.
    pub fn is_empty(&self) -> bool {
        self.inline.is_empty() && self.managed.is_empty()
    }

    /// Leaves out of `state` (the state of the principal `physical_id` of
    /// `resource_type`) the `Policies` entries and `ManagedPolicyArns` that other
    /// resources put there; a list left empty goes.
    pub fn strip(&self, resource_type: &str, physical_id: &str, state: &mut Map<String, Value>) {
        let key = (resource_type.to_string(), physical_id.to_string());
        if let Some(inline) = self.inline.get(&key) {
            retain(state, "Policies", |p| {
                !p.get("PolicyName")
                    .and_then(Value::as_str)
                    .is_some_and(|n| inline.contains(n))
            });
        }
        if let Some(managed) = self.managed.get(&key) {
            retain(state, "ManagedPolicyArns", |a| {
                !a.as_str().is_some_and(|arn| managed.contains(arn))
            });
        }
    }
}

fn retain(state: &mut Map<String, Value>, key: &str, keep: impl Fn(&Value) -> bool) {
    let Some(Value::Array(items)) = state.get_mut(key) else {
        return;
    };
    items.retain(|v| keep(v));
    if items.is_empty() {
        state.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn a_roles_own_policies_stay_and_its_stacks_others_go() {
        let default_policy = map(json!({"PolicyName": "FnRoleDefaultPolicy",
            "PolicyDocument": {}, "Roles": ["app-FnRole-1"]}));
        let managed = map(json!({"Roles": ["app-FnRole-1"], "Users": ["ops"]}));
        let elsewhere = map(json!({"PolicyName": "Other", "Roles": ["another-role"]}));
        let arn = "arn:aws:iam::123456789012:policy/app-Managed-1";
        let attached = Attachments::of([
            ("AWS::IAM::Policy", "app-Polic-1", &default_policy),
            ("AWS::IAM::ManagedPolicy", arn, &managed),
            ("AWS::IAM::Policy", "app-Polic-2", &elsewhere),
        ]);
        let mut role = map(json!({
            "RoleName": "app-FnRole-1",
            "Policies": [{"PolicyName": "Own", "PolicyDocument": {}},
                         {"PolicyName": "FnRoleDefaultPolicy", "PolicyDocument": {}}],
            "ManagedPolicyArns": ["arn:aws:iam::aws:policy/ReadOnlyAccess", arn],
        }));
        attached.strip("AWS::IAM::Role", "app-FnRole-1", &mut role);
        assert_eq!(
            role,
            map(json!({
                "RoleName": "app-FnRole-1",
                "Policies": [{"PolicyName": "Own", "PolicyDocument": {}}],
                "ManagedPolicyArns": ["arn:aws:iam::aws:policy/ReadOnlyAccess"],
            }))
        );
        // Only what the stack put there goes: an out-of-band policy stays (drift).
        let mut alone = map(json!({"Policies": [{"PolicyName": "FnRoleDefaultPolicy"}],
            "ManagedPolicyArns": [arn]}));
        attached.strip("AWS::IAM::Role", "app-FnRole-1", &mut alone);
        assert!(alone.is_empty(), "{alone:?}");
        let mut user = map(json!({"ManagedPolicyArns": [arn]}));
        attached.strip("AWS::IAM::User", "ops", &mut user);
        assert!(user.is_empty());
        let mut other = map(json!({"Policies": [{"PolicyName": "FnRoleDefaultPolicy"}]}));
        attached.strip("AWS::IAM::Role", "another-role", &mut other);
        assert_eq!(other["Policies"].as_array().map(Vec::len), Some(1));
    }
}
