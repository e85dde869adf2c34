//! What a reviewer of a plan looks at: the changes that widen access (IAM statements,
//! resource policies, security group rules), a digest that pins a reviewed plan, and
//! what differs between a reviewed plan and the plan of now.

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{Action, Plan, ResourcePlan};

/// The properties whose change can give someone access they did not have, by type: an
/// empty list means every property of the type (the resource is itself a grant).
const SENSITIVE: &[(&str, &[&str])] = &[
    (
        "AWS::IAM::Role",
        &[
            "AssumeRolePolicyDocument",
            "Policies",
            "ManagedPolicyArns",
            "PermissionsBoundary",
        ],
    ),
    (
        "AWS::IAM::User",
        &[
            "Policies",
            "ManagedPolicyArns",
            "Groups",
            "PermissionsBoundary",
        ],
    ),
    ("AWS::IAM::Group", &["Policies", "ManagedPolicyArns"]),
    ("AWS::IAM::Policy", &[]),
    ("AWS::IAM::ManagedPolicy", &[]),
    ("AWS::IAM::RolePolicy", &[]),
    ("AWS::IAM::UserPolicy", &[]),
    ("AWS::IAM::GroupPolicy", &[]),
    ("AWS::IAM::UserToGroupAddition", &[]),
    ("AWS::IAM::InstanceProfile", &["Roles"]),
    ("AWS::S3::BucketPolicy", &[]),
    ("AWS::SQS::QueuePolicy", &[]),
    ("AWS::SNS::TopicPolicy", &[]),
    ("AWS::Lambda::Permission", &[]),
    ("AWS::Lambda::LayerVersionPermission", &[]),
    ("AWS::KMS::Key", &["KeyPolicy"]),
    ("AWS::SecretsManager::ResourcePolicy", &[]),
    ("AWS::ECR::Repository", &["RepositoryPolicyText"]),
    ("AWS::Events::EventBusPolicy", &[]),
    ("AWS::Logs::ResourcePolicy", &[]),
    ("AWS::ApiGateway::RestApi", &["Policy"]),
    ("AWS::OpenSearchService::Domain", &["AccessPolicies"]),
    (
        "AWS::EC2::SecurityGroup",
        &["SecurityGroupIngress", "SecurityGroupEgress"],
    ),
    ("AWS::EC2::SecurityGroupIngress", &[]),
    ("AWS::EC2::SecurityGroupEgress", &[]),
];

/// One change that widens access.
#[derive(Debug, Clone, PartialEq)]
pub struct Widening {
    /// The resource.
    pub logical_id: String,
    /// Its type.
    pub resource_type: String,
    /// What the deploy does to it.
    pub action: Action,
    /// The property (a path inside `Properties`), or `None` for the whole resource.
    pub path: Option<String>,
    /// The value it gets.
    pub value: Value,
}

/// The sensitive properties of `resource_type`: `Some(&[])` for a type that is a grant
/// as a whole, `None` for a type none of whose properties grant access.
fn sensitive(resource_type: &str) -> Option<&'static [&'static str]> {
    SENSITIVE
        .iter()
        .find(|(t, _)| *t == resource_type)
        .map(|(_, props)| *props)
}

/// The top-level property a change path (`Policies[0].PolicyDocument`) is under.
fn top(path: &str) -> &str {
    path.split(['.', '[']).next().unwrap_or(path)
}

/// The changes of `plan` that widen access, as `cdk deploy --require-approval
/// broadening` counts them: a new grant (an IAM statement, a resource policy, a
/// security group rule, a permissions boundary taken away), or a change to one. Removing
/// a grant narrows access and is not listed; a change inside a grant is listed, since
/// what it allows now may be more.
pub fn widenings(plan: &Plan) -> Vec<Widening> {
    let mut out = Vec::new();
    for r in &plan.resources {
        let Some(props) = sensitive(&r.resource_type) else {
            continue;
        };
        match r.action {
            Action::Create | Action::Replace => created(r, props, &mut out),
            Action::Update => updated(r, props, &mut out),
            Action::Delete | Action::NoOp => {}
        }
    }
    out
}

/// A new resource: the whole grant, or each sensitive property it sets.
fn created(r: &ResourcePlan, props: &[&str], out: &mut Vec<Widening>) {
    let widening = |path: Option<&str>, value: &Value| Widening {
        logical_id: r.logical_id.clone(),
        resource_type: r.resource_type.clone(),
        action: r.action,
        path: path.map(str::to_string),
        value: value.clone(),
    };
    if props.is_empty() {
        out.push(widening(None, &Value::Object(r.properties.clone())));
        return;
    }
    for p in props {
        // A boundary only narrows what a new principal may do.
        if *p == "PermissionsBoundary" {
            continue;
        }
        if let Some(v) = r.properties.get(*p).filter(|v| !is_empty(v)) {
            out.push(widening(Some(p), v));
        }
    }
}

/// An update: each change under a sensitive property that sets a value (and the removal
/// of a permissions boundary).
fn updated(r: &ResourcePlan, props: &[&str], out: &mut Vec<Widening>) {
    for c in &r.changes {
        let under = top(&c.path);
        if !props.is_empty() && !props.contains(&under) {
            continue;
        }
        let value = match (&c.new, under) {
            (Some(v), _) => v.clone(),
            (None, "PermissionsBoundary") => Value::Null,
            (None, _) => continue,
        };
        out.push(Widening {
            logical_id: r.logical_id.clone(),
            resource_type: r.resource_type.clone(),
            action: r.action,
            path: Some(c.path.clone()),
            value,
        });
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::String(s) => s.is_empty(),
        _ => false,
    }
}

/// A digest of everything a plan says (the same plan gives the same digest): what a
/// reviewed plan is pinned by.
pub fn digest(plan: &Plan) -> String {
    let text = serde_json::to_vec(plan).unwrap_or_default();
    Sha256::digest(&text)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// What differs between a reviewed plan and the plan of now, one line each (empty when
/// they are the same).
pub fn differences(reviewed: &Plan, now: &Plan) -> Vec<String> {
    let mut out = Vec::new();
    for r in &reviewed.resources {
        match now.resource(&r.logical_id) {
            None => out.push(format!(
                "{}: the reviewed plan would {} it; the template has it no more",
                r.logical_id,
                r.action.as_str()
            )),
            Some(n) if n.action != r.action => out.push(format!(
                "{}: the reviewed plan would {} it, now it would {} it",
                r.logical_id,
                r.action.as_str(),
                n.action.as_str()
            )),
            Some(n) if n != r => {
                let mut paths: Vec<&str> = n
                    .changes
                    .iter()
                    .filter(|c| !r.changes.contains(c))
                    .chain(r.changes.iter().filter(|c| !n.changes.contains(c)))
                    .map(|c| c.path.as_str())
                    .collect();
                paths.dedup();
                let what = if paths.is_empty() {
                    "its properties differ".to_string()
                } else {
                    format!("its changes differ at {}", paths.join(", "))
                };
                out.push(format!(
                    "{}: {} ({} in both)",
                    r.logical_id,
                    what,
                    n.action.as_str()
                ));
            }
            Some(_) => {}
        }
    }
    for n in &now.resources {
        if reviewed.resource(&n.logical_id).is_none() {
            out.push(format!(
                "{}: not in the reviewed plan, now it would {} it",
                n.logical_id,
                n.action.as_str()
            ));
        }
    }
    if reviewed.outputs != now.outputs {
        out.push("the outputs differ".into());
    }
    if reviewed.conditions != now.conditions {
        out.push("the conditions evaluate differently".into());
    }
    if out.is_empty() && digest(reviewed) != digest(now) {
        out.push("the plans differ".into());
    }
    out
}

#[cfg(test)]
mod tests {
    use indexmap::IndexMap;
    use serde_json::json;

    use super::*;
    use crate::plan::{PropertyChange, Reason};
    use crate::template::Policy;

    fn resource(id: &str, ty: &str, action: Action, props: Value) -> ResourcePlan {
        ResourcePlan {
            logical_id: id.into(),
            resource_type: ty.into(),
            action,
            reason: Reason::New,
            changes: vec![],
            physical_id: None,
            properties: props.as_object().cloned().unwrap_or_default(),
            depends_on: vec![],
            deletion_policy: Policy::Delete,
            update_replace_policy: Policy::Delete,
        }
    }

    fn plan(resources: Vec<ResourcePlan>) -> Plan {
        Plan {
            stack: "s".into(),
            resources,
            outputs: IndexMap::new(),
            conditions: IndexMap::new(),
        }
    }

    fn change(path: &str, old: Option<Value>, new: Option<Value>) -> PropertyChange {
        PropertyChange {
            path: path.into(),
            old,
            new,
            replaces: false,
        }
    }

    #[test]
    fn a_new_role_and_policy_and_ingress_rule_widen_access_and_a_queue_does_not() {
        let p = plan(vec![
            resource(
                "Role",
                "AWS::IAM::Role",
                Action::Create,
                json!({"AssumeRolePolicyDocument": {"Statement": []}, "RoleName": "r",
                       "PermissionsBoundary": "arn:b"}),
            ),
            resource(
                "Policy",
                "AWS::IAM::Policy",
                Action::Create,
                json!({"PolicyDocument": {"Statement": [{"Effect": "Allow"}]}}),
            ),
            resource(
                "Open",
                "AWS::EC2::SecurityGroupIngress",
                Action::Create,
                json!({"CidrIp": "0.0.0.0/0"}),
            ),
            resource("Q", "AWS::SQS::Queue", Action::Create, json!({})),
            resource("Gone", "AWS::IAM::Policy", Action::Delete, json!({})),
        ]);
        let w = widenings(&p);
        let seen: Vec<(&str, Option<&str>)> = w
            .iter()
            .map(|w| (w.logical_id.as_str(), w.path.as_deref()))
            .collect();
        assert_eq!(
            seen,
            vec![
                ("Role", Some("AssumeRolePolicyDocument")),
                ("Policy", None),
                ("Open", None)
            ]
        );
    }

    #[test]
    fn an_update_widens_where_it_sets_a_grant_or_drops_a_boundary_only() {
        let mut role = resource("Role", "AWS::IAM::Role", Action::Update, json!({}));
        role.changes = vec![
            change("Description", Some(json!("a")), Some(json!("b"))),
            change(
                "Policies[0].PolicyDocument.Statement[1]",
                None,
                Some(json!({"Effect": "Allow"})),
            ),
            change("ManagedPolicyArns[1]", Some(json!("arn:x")), None),
            change("PermissionsBoundary", Some(json!("arn:b")), None),
        ];
        let w = widenings(&plan(vec![role]));
        let paths: Vec<&str> = w.iter().filter_map(|w| w.path.as_deref()).collect();
        assert_eq!(
            paths,
            vec![
                "Policies[0].PolicyDocument.Statement[1]",
                "PermissionsBoundary"
            ]
        );
    }

    #[test]
    fn the_differences_name_each_resource_that_moved() {
        let reviewed = plan(vec![
            resource("A", "AWS::SNS::Topic", Action::Create, json!({})),
            resource("B", "AWS::SNS::Topic", Action::NoOp, json!({})),
        ]);
        assert!(differences(&reviewed, &reviewed.clone()).is_empty());
        let mut now = plan(vec![
            resource("A", "AWS::SNS::Topic", Action::NoOp, json!({})),
            resource("C", "AWS::SNS::Topic", Action::Create, json!({})),
        ]);
        now.outputs.insert(
            "O".into(),
            crate::plan::OutputPlan {
                value: json!(1),
                export_name: None,
            },
        );
        let d = differences(&reviewed, &now);
        assert_eq!(
            d,
            vec![
                "A: the reviewed plan would create it, now it would no-op it",
                "B: the reviewed plan would no-op it; the template has it no more",
                "C: not in the reviewed plan, now it would create it",
                "the outputs differ",
            ]
        );
        assert_ne!(digest(&reviewed), digest(&now));
    }
}
