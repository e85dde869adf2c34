//! The Secrets Manager secret, KMS key, KMS alias and ECS cluster SDK providers against
//! the local emulator (fakecloud 0.51.0), through the real SDK clients. Each test is a
//! round trip: create from template properties, a retry of the create (same token) adopts
//! what the first one made (the alias, which always has the template's name, is refused
//! instead and `import` finds it), `read_current_state` gives the template's properties
//! back in the same shape, update, read again, delete, delete again (gone is success),
//! then `import` reports the resource not deployed yet.
//!
//! The secret test reads the value back with the plain client (the positive control: a
//! generated password in the template's JSON object, then the template's new string), and
//! checks that neither the create's and update's answers nor the state hold it. The
//! update adds a replica region (read back), another drops it and one more adds it again;
//! the delete then removes the replica first (fakecloud, like AWS, refuses to delete a
//! replicated secret).
//!
//! The key test checks that the deletion is scheduled with the template's
//! `PendingWindowInDays` (the key's `DeletionDate` is 7 days ahead), and that rotation
//! is on with the template's `RotationPeriodInDays`, then off after the update.
//!
//! Where fakecloud differs from AWS, so these tests do not prove it:
//! - KMS: a second `ScheduleKeyDeletion` of a key pending deletion succeeds (AWS answers
//!   `KMSInvalidStateException`, which the provider takes as done after a `DescribeKey`):
//!   the second delete here proves the outcome, not that path. `GetKeyRotationStatus` of
//!   an asymmetric key answers "off" (AWS refuses the question; the provider reads that
//!   as off too). The tests make no RSA key: fakecloud takes 2 to 15 seconds for one.
//! - ECS: a new cluster reports no settings (AWS reports `containerInsights` `disabled`,
//!   which the state leaves out); a deleted cluster is `MISSING` at once (AWS keeps it
//!   `INACTIVE` for a while, which `find` treats as gone). Capacity providers are accepted
//!   by name: the round trip proves the mapping, not what AWS would accept.
//! - Secrets Manager: `DeleteSecret` without recovery removes the secret at once on both;
//!   a secret scheduled for deletion by someone else (recovery window) is not exercised.

use aws_sdk_kms::types::KeyState;
use serde_json::{Value, json};
use stackflow_providers::sdk::ecs::EcsClusterProvider;
use stackflow_providers::sdk::kms::{KmsAliasProvider, KmsKeyProvider};
use stackflow_providers::sdk::secretsmanager::SecretProvider;
use stackflow_providers::{Imported, Provider, ResourceRequest};
use stackflow_tests::emulator::ACCOUNT_ID;
use stackflow_tests::round_trip::{
    delete_twice_then_gone, props, read, request, sorted, update_of,
};
use stackflow_tests::{Emulator, unique_name};

/// The update of `req` (recorded under `id`) to `properties`, with a new token.
fn update_under(req: &ResourceRequest, id: &str, properties: Value) -> ResourceRequest {
    let mut update = update_of(req, properties);
    update.physical_id = Some(id.to_string());
    update
}

fn root_policy(sid: &str) -> Value {
    json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Sid": sid,
            "Effect": "Allow",
            "Principal": {"AWS": format!("arn:aws:iam::{ACCOUNT_ID}:root")},
            "Action": "kms:*",
            "Resource": "*"
        }]
    })
}

#[tokio::test]
async fn sdk_kms_key_round_trip() {
    let config = Emulator::shared().await.sdk_config().await;
    let kms = aws_sdk_kms::Client::new(&config);
    let provider = KmsKeyProvider::new(kms.clone());
    let template = json!({
        "Description": "first",
        "KeyPolicy": root_policy("One"),
        "EnableKeyRotation": true,
        "RotationPeriodInDays": 180,
        "PendingWindowInDays": 7,
        "Tags": [{"Key": "b", "Value": "2"}, {"Key": "a", "Value": "1"}]
    });
    let mut req = request("Key", "AWS::KMS::Key", template.clone());
    let created = provider.create(&req).await.expect("create");
    let id = created.physical_id.clone();
    assert_eq!(created.attributes.get("KeyId"), Some(&json!(id)));
    let arn = created.attributes.get("Arn").and_then(Value::as_str);
    assert!(
        arn.is_some_and(|a| a.ends_with(&format!(":key/{id}"))),
        "{arn:?}"
    );
    // A retry of the same create (same token) finds the key the first one marked.
    let again = provider.create(&req).await.expect("create retried");
    assert_eq!(again.physical_id, id);

    assert_eq!(rotation(&kms, &id).await, (true, Some(180)));

    req.physical_id = Some(id.clone());
    let mut expected = props(template);
    expected.remove("PendingWindowInDays");
    expected.remove("RotationPeriodInDays");
    expected.insert(
        "Tags".into(),
        json!([{"Key": "a", "Value": "1"}, {"Key": "b", "Value": "2"}]),
    );
    assert_eq!(read(&provider, &req).await, sorted(expected));

    let update = update_under(
        &req,
        &id,
        json!({
            "Description": "second",
            "KeyPolicy": root_policy("Two"),
            "Enabled": false,
            "PendingWindowInDays": 7,
            "Tags": [{"Key": "a", "Value": "9"}]
        }),
    );
    let updated = provider.update(&update).await.expect("update");
    assert_eq!(updated.physical_id, id);
    assert!(!updated.replaced);
    let expected = props(json!({
        "Description": "second",
        "KeyPolicy": root_policy("Two"),
        "Enabled": false,
        "Tags": [{"Key": "a", "Value": "9"}]
    }));
    assert_eq!(read(&provider, &update).await, sorted(expected));
    assert!(!rotation(&kms, &id).await.0);

    // Neither the spec nor the usage changes in place.
    let mut asym = update_under(&update, &id, json!({"KeySpec": "RSA_2048"}));
    asym.properties
        .insert("KeyUsage".into(), json!("SIGN_VERIFY"));
    let err = provider.update(&asym).await.expect_err("KeySpec");
    assert_eq!(err.name(), "Stackflow.NotUpdatable");

    match provider.import(&update).await.expect("import") {
        Imported::Found { physical_id, .. } => assert_eq!(physical_id, id),
        other => panic!("{other:?}"),
    }
    delete_twice_then_gone(&provider, &update, &[]).await;
    assert_deletion_in_days(&kms, &id, 7.0).await;
}

/// The key `id` is pending deletion, `days` from now.
async fn assert_deletion_in_days(kms: &aws_sdk_kms::Client, id: &str, days: f64) {
    let described = kms.describe_key().key_id(id).send().await;
    let metadata = described.expect("DescribeKey").key_metadata().cloned();
    let metadata = metadata.expect("metadata");
    assert_eq!(metadata.key_state(), Some(&KeyState::PendingDeletion));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("a clock")
        .as_secs() as i64;
    let ahead = metadata.deletion_date().expect("a deletion date").secs() - now;
    let ahead = ahead as f64 / 86_400.0;
    assert!((ahead - days).abs() < 0.1, "deletion {ahead} days ahead");
}

/// The rotation of key `id`, as the plain client reads it: on, and its period.
async fn rotation(kms: &aws_sdk_kms::Client, id: &str) -> (bool, Option<i32>) {
    let got = kms.get_key_rotation_status().key_id(id).send().await;
    let got = got.expect("GetKeyRotationStatus");
    (got.key_rotation_enabled(), got.rotation_period_in_days())
}

#[tokio::test]
async fn sdk_kms_alias_round_trip() {
    let config = Emulator::shared().await.sdk_config().await;
    let kms = aws_sdk_kms::Client::new(&config);
    let mut keys = Vec::new();
    for _ in 0..2 {
        let made = kms.create_key().send().await.expect("CreateKey");
        let metadata = made.key_metadata().expect("metadata");
        keys.push(metadata.arn().expect("an ARN").to_string());
    }
    let provider = KmsAliasProvider::new(kms.clone());
    let name = format!("alias/{}", unique_name("ours"));
    let template = json!({"AliasName": name, "TargetKeyId": keys[0]});
    let mut req = request("Alias", "AWS::KMS::Alias", template.clone());
    let created = provider.create(&req).await.expect("create");
    assert_eq!(created.physical_id, name);
    assert!(created.attributes.is_empty());
    // A replay of a named create is refused; `import` finds what the first one made.
    let err = provider.create(&req).await.expect_err("replayed");
    assert_eq!(err.name(), "Stackflow.AlreadyExists");
    match provider.import(&req).await.expect("import") {
        Imported::Found { physical_id, .. } => assert_eq!(physical_id, name),
        other => panic!("{other:?}"),
    }

    req.physical_id = Some(name.clone());
    assert_eq!(read(&provider, &req).await, sorted(props(template)));

    let update = update_under(
        &req,
        &name,
        json!({"AliasName": name, "TargetKeyId": keys[1]}),
    );
    let updated = provider.update(&update).await.expect("update");
    assert_eq!(updated.physical_id, name);
    let expected = props(json!({"AliasName": name, "TargetKeyId": keys[1]}));
    assert_eq!(read(&provider, &update).await, sorted(expected));
    // The key id form when the template gives an id.
    let key_id = keys[1].rsplit('/').next().expect("an id");
    let mut by_id = update.clone();
    by_id.properties.insert("TargetKeyId".into(), json!(key_id));
    assert_eq!(read(&provider, &by_id).await["TargetKeyId"], json!(key_id));

    let rename = update_under(
        &update,
        &name,
        json!({"AliasName": format!("{name}-x"), "TargetKeyId": keys[1]}),
    );
    let err = provider.update(&rename).await.expect_err("rename");
    assert_eq!(err.name(), "Stackflow.NotUpdatable");

    let mut by_name = update.clone();
    by_name.physical_id = None;
    delete_twice_then_gone(&provider, &update, &[&by_name]).await;
}

/// The value of secret `arn`, read with the plain client.
async fn secret_value(sm: &aws_sdk_secretsmanager::Client, arn: &str) -> String {
    let got = sm.get_secret_value().secret_id(arn).send().await;
    let got = got.expect("GetSecretValue");
    got.secret_string().expect("a string").to_string()
}

/// The password generated into secret `arn` by the round trip's template (a JSON object
/// with `username` `admin`, 24 letters and digits under `password`).
async fn generated_password(sm: &aws_sdk_secretsmanager::Client, arn: &str) -> String {
    let value: Value = serde_json::from_str(&secret_value(sm, arn).await).expect("JSON");
    assert_eq!(value["username"], json!("admin"));
    let password = value["password"].as_str().expect("a password").to_string();
    assert_eq!(password.len(), 24, "the template's length");
    assert!(password.chars().all(|c| c.is_ascii_alphanumeric()));
    password
}

/// True when `text` holds `secret` anywhere.
fn holds(text: &impl std::fmt::Debug, secret: &str) -> bool {
    format!("{text:?}").contains(secret)
}

#[tokio::test]
async fn sdk_secret_round_trip() {
    let config = Emulator::shared().await.sdk_config().await;
    let sm = aws_sdk_secretsmanager::Client::new(&config);
    let provider = SecretProvider::new(sm.clone());
    let template = json!({
        "Description": "generated credentials",
        "GenerateSecretString": {
            "ExcludePunctuation": true,
            "GenerateStringKey": "password",
            "PasswordLength": 24,
            "SecretStringTemplate": "{\"username\":\"admin\"}"
        },
        "Tags": [{"Key": "team", "Value": "core"}]
    });
    let mut req = request("Secret", "AWS::SecretsManager::Secret", template);
    let created = provider.create(&req).await.expect("create");
    let arn = created.physical_id.clone();
    assert_eq!(created.attributes.get("Id"), Some(&json!(arn)));
    let password = generated_password(&sm, &arn).await;
    assert!(!holds(&created, &password));
    // A retry of the same create adopts the secret of the generated name, value untouched.
    let again = provider.create(&req).await.expect("create retried");
    assert_eq!(again.physical_id, arn);
    assert!(secret_value(&sm, &arn).await.contains(&password));

    req.physical_id = Some(arn.clone());
    let state = read(&provider, &req).await;
    let name = state["Name"].as_str().expect("a name").to_string();
    assert!(
        name.starts_with(&format!("{}-Secret-", req.stack_name)),
        "{name}"
    );
    let expected = props(json!({
        "Name": name,
        "Description": "generated credentials",
        "Tags": [{"Key": "team", "Value": "core"}]
    }));
    assert_eq!(state, sorted(expected));
    assert!(!holds(&state, &password));

    // A resolved value from the template: put, never reported.
    let resolved = unique_name("resolved-value");
    let update = update_under(
        &req,
        &arn,
        json!({
            "SecretString": resolved,
            "ReplicaRegions": [{"Region": "us-west-2"}],
            "Tags": [{"Key": "owner", "Value": "me"}]
        }),
    );
    let updated = provider.update(&update).await.expect("update");
    assert_eq!(updated.physical_id, arn);
    assert!(!holds(&updated, &resolved));
    assert_eq!(secret_value(&sm, &arn).await, resolved);
    let state = read(&provider, &update).await;
    let expected = props(json!({
        "Name": name,
        "ReplicaRegions": [{"Region": "us-west-2"}],
        "Tags": [{"Key": "owner", "Value": "me"}]
    }));
    assert_eq!(state, sorted(expected));
    assert!(!holds(&state, &resolved));
    replicas_go_and_come_back(&provider, &update).await;

    let rename = update_under(&update, &arn, json!({"Name": format!("{name}-x")}));
    let err = provider.update(&rename).await.expect_err("rename");
    assert_eq!(err.name(), "Stackflow.NotUpdatable");
    assert!(!holds(&err, &resolved));

    let mut by_name = update.clone();
    by_name.physical_id = None;
    by_name.properties.insert("Name".into(), json!(name));
    match provider.import(&by_name).await.expect("import") {
        Imported::Found { physical_id, .. } => assert_eq!(physical_id, arn),
        other => panic!("{other:?}"),
    }
    delete_twice_then_gone(&provider, &update, &[&by_name]).await;
}

/// `update` (a secret with a replica region) updated without its replicas, read, then
/// back to `update`, read: the replica is removed, then made again (and the round trip's
/// delete then deletes a replicated secret).
async fn replicas_go_and_come_back(provider: &SecretProvider, update: &ResourceRequest) {
    let arn = update.physical_id.as_deref().expect("an id");
    let mut without = update_under(update, arn, json!({}));
    without.properties = update.properties.clone();
    without.properties.remove("ReplicaRegions");
    provider.update(&without).await.expect("replicas dropped");
    assert_eq!(read(provider, &without).await.get("ReplicaRegions"), None);
    let mut again = update_under(&without, arn, json!({}));
    again.properties = update.properties.clone();
    provider.update(&again).await.expect("replicas again");
    let replicas = read(provider, &again).await.get("ReplicaRegions").cloned();
    assert_eq!(replicas, Some(json!([{"Region": "us-west-2"}])));
}

#[tokio::test]
async fn sdk_ecs_cluster_round_trip() {
    let config = Emulator::shared().await.sdk_config().await;
    let provider = EcsClusterProvider::new(aws_sdk_ecs::Client::new(&config));
    let template = json!({
        "ClusterSettings": [{"Name": "containerInsights", "Value": "enabled"}],
        "Configuration": {"ExecuteCommandConfiguration": {
            "Logging": "OVERRIDE",
            "LogConfiguration": {
                "CloudWatchLogGroupName": "/ecs/exec",
                "CloudWatchEncryptionEnabled": true
            }
        }},
        "Tags": [{"Key": "b", "Value": "2"}, {"Key": "a", "Value": "1"}]
    });
    let mut req = request("Cluster", "AWS::ECS::Cluster", template.clone());
    let created = provider.create(&req).await.expect("create");
    let name = created.physical_id.clone();
    assert!(
        name.starts_with(&format!("{}-Cluster-", req.stack_name)),
        "{name}"
    );
    let arn = created.attributes.get("Arn").and_then(Value::as_str);
    assert!(
        arn.is_some_and(|a| a.ends_with(&format!(":cluster/{name}"))),
        "{arn:?}"
    );
    let arn = arn.expect("an ARN").to_string();
    // A retry of the same create (same token, generated name) answers the same cluster.
    let again = provider.create(&req).await.expect("create retried");
    assert_eq!(again.physical_id, name);

    req.physical_id = Some(name.clone());
    let mut expected = props(template);
    expected.insert("ClusterName".into(), json!(name));
    expected.insert(
        "Tags".into(),
        json!([{"Key": "a", "Value": "1"}, {"Key": "b", "Value": "2"}]),
    );
    assert_eq!(read(&provider, &req).await, sorted(expected));

    let update = update_under(
        &req,
        &name,
        json!({
            "CapacityProviders": ["FARGATE", "FARGATE_SPOT"],
            "DefaultCapacityProviderStrategy": [{"CapacityProvider": "FARGATE", "Weight": 1}],
            "Tags": [{"Key": "a", "Value": "9"}]
        }),
    );
    let updated = provider.update(&update).await.expect("update");
    assert_eq!(updated.physical_id, name);
    assert_eq!(updated.attributes.get("Arn"), Some(&json!(arn)));
    let mut expected = update.properties.clone();
    expected.insert("ClusterName".into(), json!(name));
    assert_eq!(read(&provider, &update).await, sorted(expected));

    let rename = update_under(&update, &name, json!({"ClusterName": format!("{name}-x")}));
    let err = provider.update(&rename).await.expect_err("rename");
    assert_eq!(err.name(), "Stackflow.NotUpdatable");

    let mut by_name = update.clone();
    by_name.physical_id = None;
    by_name.properties.insert("ClusterName".into(), json!(name));
    match provider.import(&by_name).await.expect("import") {
        Imported::Found {
            physical_id,
            attributes,
        } => {
            assert_eq!(physical_id, name);
            assert_eq!(attributes.get("Arn"), Some(&json!(arn)));
        }
        other => panic!("{other:?}"),
    }
    delete_twice_then_gone(&provider, &update, &[&by_name]).await;
}
