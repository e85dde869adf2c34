//! The `AWS::IAM::Policy`, `AWS::IAM::ManagedPolicy` and `AWS::IAM::InstanceProfile` SDK
//! providers against the local emulator (fakecloud 0.51.0), through the real IAM client.
//! Each test is a round trip: create from template properties, a retry of the create (same
//! token), `read_current_state` gives the template's properties back in the same shape,
//! update in place (and a create-only change refused as not updatable), read again,
//! delete, delete again (gone is success), then `read_current_state` says not found and
//! `import` says not deployed yet. The roles, users and groups the policies go on are made
//! with the plain IAM client, and what IAM holds is checked with it too.
//!
//! - `AWS::IAM::Policy` always takes its `PolicyName` from the template, so the retried
//!   create is refused (the policy is on the principals already) and `import` finds it
//!   under the same physical id: what the engine does when it replays its own interrupted
//!   create (it then adopts it).
//! - `AWS::IAM::ManagedPolicy` and `AWS::IAM::InstanceProfile` are made without a name, so
//!   the retried create meets its own generated name and adopts it.
//! - An inline policy create whose second principal does not exist fails as a wrong
//!   request and takes back what it had put on the first.
//!
//! What the emulator does not show, so these tests do not prove it: IAM's eventual
//! consistency (a principal made a moment ago not visible yet) never occurs on fakecloud,
//! and no page of any listing is ever truncated here, so the `Marker` paging is not
//! exercised.

use aws_sdk_iam::Client;
use serde_json::{Value, json};
use stackflow_providers::sdk::iam_instance_profile::IamInstanceProfileProvider;
use stackflow_providers::sdk::iam_managed_policy::IamManagedPolicyProvider;
use stackflow_providers::sdk::iam_policy::IamPolicyProvider;
use stackflow_providers::{Imported, Properties, Provider, ProviderError, ResourceRequest};
use stackflow_tests::round_trip::{
    delete_twice_then_gone, props, read, request, sorted, update_of,
};
use stackflow_tests::{Emulator, unique_name};

async fn iam() -> Client {
    Client::new(&Emulator::shared().await.sdk_config().await)
}

fn document(action: &str) -> Value {
    json!({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": action, "Resource": "*"}]
    })
}

/// A role made with the plain IAM client: its name.
async fn role(iam: &Client) -> String {
    let name = unique_name("role");
    let trust = json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
        "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}]});
    iam.create_role()
        .role_name(&name)
        .assume_role_policy_document(trust.to_string())
        .send()
        .await
        .expect("CreateRole");
    name
}

async fn user(iam: &Client) -> String {
    let name = unique_name("user");
    let made = iam.create_user().user_name(&name).send().await;
    made.expect("CreateUser");
    name
}

async fn group(iam: &Client) -> String {
    let name = unique_name("group");
    let made = iam.create_group().group_name(&name).send().await;
    made.expect("CreateGroup");
    name
}

/// The inline policies of the role `name`.
async fn role_policies(iam: &Client, name: &str) -> Vec<String> {
    let listed = iam.list_role_policies().role_name(name).send().await;
    listed.expect("ListRolePolicies").policy_names().to_vec()
}

#[tokio::test]
async fn sdk_iam_policy_round_trip() {
    let iam = iam().await;
    let provider = IamPolicyProvider::new(iam.clone());
    let (role, user, group) = (role(&iam).await, user(&iam).await, group(&iam).await);
    let policy_name = unique_name("inline");
    let template = json!({
        "PolicyName": policy_name,
        "PolicyDocument": document("s3:GetObject"),
        "Roles": [role],
        "Users": [user]
    });
    let mut req = request("Policy", "AWS::IAM::Policy", template.clone());
    let created = provider.create(&req).await.expect("create");
    let id = created.physical_id.clone();
    assert!(
        id.starts_with(&format!("{}-Policy-", req.stack_name)),
        "{id}"
    );
    assert_eq!(created.attributes.get("Id"), Some(&json!(id)));
    assert_eq!(role_policies(&iam, &role).await, [policy_name.as_str()]);

    // The retried create meets the policy on its principals: refused, and import finds it
    // under the same id (the engine then adopts it).
    match provider.create(&req).await {
        Err(ProviderError::AlreadyExists(_)) => {}
        other => panic!("a replayed create must be refused, got {other:?}"),
    }
    match provider.import(&req).await.expect("import") {
        Imported::Found { physical_id, .. } => assert_eq!(physical_id, id),
        other => panic!("{other:?}"),
    }

    req.physical_id = Some(id.clone());
    assert_eq!(read(&provider, &req).await, sorted(props(template)));

    // A new document, the role swapped for a group: the role loses the policy.
    let mut properties = props(json!({
        "PolicyName": policy_name,
        "PolicyDocument": document("s3:*"),
        "Groups": [group],
        "Users": [user]
    }));
    let update = update_of(&req, Value::Object(properties.clone()));
    let updated = provider.update(&update).await.expect("update");
    assert_eq!(updated.physical_id, id);
    assert!(!updated.replaced);
    req.properties = update.properties.clone();
    assert_eq!(read(&provider, &req).await, sorted(properties.clone()));
    assert!(role_policies(&iam, &role).await.is_empty());

    // A new name, in place: the old one is gone from the user.
    let renamed = unique_name("inline");
    properties.insert("PolicyName".into(), json!(renamed));
    let update = update_of(&req, Value::Object(properties.clone()));
    provider.update(&update).await.expect("rename");
    req.properties = update.properties.clone();
    assert_eq!(read(&provider, &req).await, sorted(properties));
    let listed = iam.list_user_policies().user_name(&user).send().await;
    let listed = listed.expect("ListUserPolicies");
    assert_eq!(listed.policy_names(), [renamed]);

    let mut by_name = req.clone();
    by_name.physical_id = None;
    delete_twice_then_gone(&provider, &req, &[&by_name]).await;
    let listed = iam.list_group_policies().group_name(&group).send().await;
    assert!(listed.expect("ListGroupPolicies").policy_names().is_empty());
}

/// The versions of the managed policy `arn`: (id, default), by id.
async fn versions(iam: &Client, arn: &str) -> Vec<(String, bool)> {
    let listed = iam.list_policy_versions().policy_arn(arn).send().await;
    let listed = listed.expect("ListPolicyVersions");
    let mut all: Vec<(String, bool)> = listed
        .versions()
        .iter()
        .map(|v| {
            let id = v.version_id().unwrap_or_default().to_string();
            (id, v.is_default_version())
        })
        .collect();
    all.sort_by_key(|(id, _)| id.trim_start_matches('v').parse::<u32>().unwrap_or(0));
    all
}

/// Six updates of `req` (its physical id set) with a new document each, the last one also
/// moving the policy from its roles to `user`: the properties of the last.
async fn six_new_documents(
    provider: &IamManagedPolicyProvider,
    req: &mut ResourceRequest,
    user: &str,
) -> Properties {
    let mut properties = req.properties.clone();
    let arn = req.physical_id.clone();
    for (i, action) in ["s3:a", "s3:b", "s3:c", "s3:d", "s3:e", "s3:*"]
        .iter()
        .enumerate()
    {
        properties.insert("PolicyDocument".into(), document(action));
        if i == 5 {
            properties.remove("Roles");
            properties.insert("Users".into(), json!([user]));
        }
        let update = update_of(req, Value::Object(properties.clone()));
        let updated = provider.update(&update).await.expect("update");
        assert_eq!(Some(updated.physical_id), arn);
        req.properties = update.properties;
    }
    properties
}

#[tokio::test]
async fn sdk_iam_managed_policy_round_trip() {
    let iam = iam().await;
    let provider = IamManagedPolicyProvider::new(iam.clone());
    let (role, user) = (role(&iam).await, user(&iam).await);
    let template = json!({
        "Path": "/app/",
        "Description": "read objects",
        "PolicyDocument": document("s3:GetObject"),
        "Roles": [role]
    });
    let mut req = request("Managed", "AWS::IAM::ManagedPolicy", template.clone());
    let created = provider.create(&req).await.expect("create");
    let arn = created.physical_id.clone();
    let name = arn.rsplit('/').next().expect("a name").to_string();
    assert!(
        name.starts_with(&format!("{}-Managed-", req.stack_name)),
        "{name}"
    );
    assert!(arn.ends_with(&format!(":policy/app/{name}")), "{arn}");
    let a = &created.attributes;
    assert_eq!(a.get("PolicyArn"), Some(&json!(arn)));
    assert_eq!(a.get("DefaultVersionId"), Some(&json!("v1")));
    assert_eq!(a.get("AttachmentCount"), Some(&json!(1)));
    assert!(a.get("PolicyId").is_some_and(Value::is_string), "{a:?}");
    // A retry of the same create (same token) adopts the policy its name belongs to.
    let again = provider.create(&req).await.expect("create retried");
    assert_eq!(again.physical_id, arn);

    req.physical_id = Some(arn.clone());
    let mut expected = props(template);
    expected.insert("ManagedPolicyName".into(), json!(name));
    assert_eq!(read(&provider, &req).await, sorted(expected));

    // Six new documents: IAM keeps five versions, the newest the default.
    let properties = six_new_documents(&provider, &mut req, &user).await;
    let held = versions(&iam, &arn).await;
    assert_eq!(held.len(), 5, "{held:?}");
    assert_eq!(held.last(), Some(&("v7".to_string(), true)), "{held:?}");
    let mut expected = properties.clone();
    expected.insert("ManagedPolicyName".into(), json!(name));
    assert_eq!(read(&provider, &req).await, sorted(expected));
    let attached = iam
        .list_attached_role_policies()
        .role_name(&role)
        .send()
        .await;
    assert!(
        attached
            .expect("ListAttached")
            .attached_policies()
            .is_empty()
    );

    // Description, Path and the name are create-only.
    let mut described = properties.clone();
    described.insert("Description".into(), json!("another"));
    let err = provider
        .update(&update_of(&req, Value::Object(described)))
        .await
        .expect_err("Description");
    assert_eq!(err.name(), "Stackflow.NotUpdatable");

    let mut by_name = req.clone();
    by_name.physical_id = None;
    by_name
        .properties
        .insert("ManagedPolicyName".into(), json!(name));
    match provider.import(&by_name).await.expect("import") {
        Imported::Found { physical_id, .. } => assert_eq!(physical_id, arn),
        other => panic!("{other:?}"),
    }
    // Attached to the user, with four old versions: delete takes them all away.
    delete_twice_then_gone(&provider, &req, &[&by_name]).await;
    let attached = iam
        .list_attached_user_policies()
        .user_name(&user)
        .send()
        .await;
    assert!(
        attached
            .expect("ListAttached")
            .attached_policies()
            .is_empty()
    );
}

#[tokio::test]
async fn sdk_iam_instance_profile_round_trip() {
    let iam = iam().await;
    let provider = IamInstanceProfileProvider::new(iam.clone());
    let (first, second) = (role(&iam).await, role(&iam).await);
    let template = json!({"Path": "/ec2/", "Roles": [first]});
    let mut req = request("Profile", "AWS::IAM::InstanceProfile", template.clone());
    let created = provider.create(&req).await.expect("create");
    let name = created.physical_id.clone();
    assert!(
        name.starts_with(&format!("{}-Profile-", req.stack_name)),
        "{name}"
    );
    let arn = created.attributes.get("Arn").and_then(Value::as_str);
    let arn = arn.expect("Arn");
    assert!(
        arn.ends_with(&format!(":instance-profile/ec2/{name}")),
        "{arn}"
    );
    // A retry of the same create (same token) adopts the profile.
    let again = provider.create(&req).await.expect("create retried");
    assert_eq!(again.physical_id, name);

    req.physical_id = Some(name.clone());
    let mut expected = props(template);
    expected.insert("InstanceProfileName".into(), json!(name));
    assert_eq!(read(&provider, &req).await, sorted(expected.clone()));

    // The role swapped in place.
    let mut properties = req.properties.clone();
    properties.insert("Roles".into(), json!([second]));
    let update = update_of(&req, Value::Object(properties.clone()));
    let updated = provider.update(&update).await.expect("update");
    assert_eq!(updated.physical_id, name);
    assert_eq!(updated.attributes.get("Arn"), Some(&json!(arn)));
    req.properties = properties.clone();
    expected.insert("Roles".into(), json!([second]));
    assert_eq!(read(&provider, &req).await, sorted(expected));

    let mut moved = properties.clone();
    moved.insert("Path".into(), json!("/other/"));
    let err = provider
        .update(&update_of(&req, Value::Object(moved)))
        .await
        .expect_err("Path");
    assert_eq!(err.name(), "Stackflow.NotUpdatable");

    let mut by_name = req.clone();
    by_name.physical_id = None;
    by_name
        .properties
        .insert("InstanceProfileName".into(), json!(name));
    match provider.import(&by_name).await.expect("import") {
        Imported::Found { physical_id, .. } => assert_eq!(physical_id, name),
        other => panic!("{other:?}"),
    }
    delete_twice_then_gone(&provider, &req, &[&by_name]).await;
    // The role is left as it was made, free of the profile.
    let listed = iam
        .list_instance_profiles_for_role()
        .role_name(&second)
        .send()
        .await;
    assert!(
        listed
            .expect("ListInstanceProfilesForRole")
            .instance_profiles()
            .is_empty()
    );
}

/// A create whose second principal does not exist fails as a wrong request, and takes the
/// policy it had put on the first one away again: a failed create leaves nothing.
#[tokio::test]
async fn sdk_iam_policy_failed_create_leaves_nothing() {
    let iam = iam().await;
    let provider = IamPolicyProvider::new(iam.clone());
    let role = role(&iam).await;
    let template = json!({
        "PolicyName": unique_name("inline"),
        "PolicyDocument": document("s3:GetObject"),
        "Roles": [role],
        "Users": [unique_name("nosuchuser")]
    });
    let req = request("Policy", "AWS::IAM::Policy", template);
    match provider.create(&req).await {
        Err(ProviderError::InvalidRequest(m)) => assert!(m.contains("user"), "{m}"),
        other => panic!("the create must fail, got {other:?}"),
    }
    assert!(role_policies(&iam, &role).await.is_empty());
}
