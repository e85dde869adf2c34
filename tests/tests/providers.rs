//! The providers against the local emulator (fakecloud 0.51.0), through the real SDK
//! clients: the Cloud Control provider's create → read → update → delete for
//! `AWS::SSM::Parameter` and `AWS::SQS::Queue`, and each SDK provider's round trip
//! (create from template properties, `read_current_state` gives them back, update, delete,
//! then `import` reports it not deployed).
//!
//! Quirks of fakecloud that these tests meet:
//! - Cloud Control requests are terminal in the first answer, so the polling path
//!   (`GetResourceRequestStatus`) is not exercised here.
//! - Cloud Control's `GetResource` answers the stored desired state, so
//!   `read_current_state` through Cloud Control echoes what was sent.

use serde_json::{Value, json};
use stackflow_providers::cloudcontrol::CloudControlProvider;
use stackflow_providers::sdk::{SqsQueueProvider, SsmParameterProvider};
use stackflow_providers::{CurrentState, Deleted, Imported, Provider};
use stackflow_tests::round_trip::{props, request};
use stackflow_tests::{Emulator, unique_name};

async fn cloud_control() -> CloudControlProvider {
    let config = Emulator::shared().await.sdk_config().await;
    CloudControlProvider::new(aws_sdk_cloudcontrol::Client::new(&config))
}

#[tokio::test]
async fn cloudcontrol_ssm_parameter_lifecycle() {
    let cc = cloud_control().await;
    let name = format!("/{}", unique_name("ccp"));
    let mut req = request(
        "Param",
        "AWS::SSM::Parameter",
        json!({"Name": name, "Type": "String", "Value": "one"}),
    );
    let created = cc.create(&req).await.expect("create");
    assert_eq!(created.physical_id, name);
    // Attributes are what AWS reports (the schema's read-only properties), never what the
    // template sent, which may be a resolved secret: `Fn::GetAtt Param.Value` reads the
    // recorded property instead.
    assert_eq!(created.attributes.get("Value"), None);

    // The same token again: Cloud Control answers the first request, no second resource.
    let again = cc.create(&req).await.expect("create replayed");
    assert_eq!(again.physical_id, name);

    req.physical_id = Some(name.clone());
    match cc.read_current_state(&req).await.expect("read") {
        CurrentState::Found(state) => {
            assert_eq!(state.get("Value"), Some(&json!("one")));
            assert_eq!(state.get("Name"), Some(&json!(name)));
        }
        other => panic!("{other:?}"),
    }

    let mut update = req.clone();
    update.previous_properties = Some(req.properties.clone());
    update.properties.insert("Value".into(), json!("two"));
    update.token = unique_name("token");
    let updated = cc.update(&update).await.expect("update");
    assert_eq!(updated.physical_id, name);
    assert!(!updated.replaced);
    assert_eq!(updated.attributes.get("Value"), None);
    let ssm = aws_sdk_ssm::Client::new(&Emulator::shared().await.sdk_config().await);
    let got = ssm
        .get_parameter()
        .name(&name)
        .send()
        .await
        .expect("GetParameter");
    assert_eq!(got.parameter().and_then(|p| p.value()), Some("two"));

    let imported = cc.import(&req).await.expect("import");
    assert!(
        matches!(imported, Imported::Found { ref physical_id, .. } if *physical_id == name),
        "{imported:?}"
    );

    let mut delete = req.clone();
    delete.token = unique_name("token");
    assert_eq!(cc.delete(&delete).await.expect("delete"), Deleted::Done);
    // Deleting what is gone succeeds.
    delete.token = unique_name("token");
    assert_eq!(
        cc.delete(&delete).await.expect("delete again"),
        Deleted::Done
    );
    assert_eq!(
        cc.read_current_state(&req).await.expect("read"),
        CurrentState::NotFound
    );
    let mut by_name = req.clone();
    by_name.physical_id = None;
    assert_eq!(
        cc.import(&by_name).await.expect("import"),
        Imported::NotDeployedYet
    );
}

#[tokio::test]
async fn cloudcontrol_sqs_queue_lifecycle() {
    let cc = cloud_control().await;
    let name = unique_name("ccq");
    let mut req = request(
        "Queue",
        "AWS::SQS::Queue",
        json!({"QueueName": name, "VisibilityTimeout": 45}),
    );
    let created = cc.create(&req).await.expect("create");
    let url = created.physical_id.clone();
    assert!(url.ends_with(&name), "{url}");
    // Attributes from the resource model: the read-only Arn is there.
    let arn = created
        .attributes
        .get("Arn")
        .and_then(Value::as_str)
        .expect("Arn attribute");
    assert!(arn.ends_with(&name), "{arn}");

    req.physical_id = Some(url.clone());
    let mut update = req.clone();
    update.previous_properties = Some(req.properties.clone());
    update
        .properties
        .insert("VisibilityTimeout".into(), json!(60));
    update.token = unique_name("token");
    cc.update(&update).await.expect("update");
    let sqs = aws_sdk_sqs::Client::new(&Emulator::shared().await.sdk_config().await);
    let attrs = sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::VisibilityTimeout)
        .send()
        .await
        .expect("GetQueueAttributes");
    let timeout = attrs
        .attributes()
        .and_then(|a| a.get(&aws_sdk_sqs::types::QueueAttributeName::VisibilityTimeout))
        .cloned();
    assert_eq!(timeout.as_deref(), Some("60"));
    match cc.read_current_state(&req).await.expect("read") {
        CurrentState::Found(state) => {
            assert_eq!(state.get("VisibilityTimeout"), Some(&json!(60)));
            assert!(
                !state.contains_key("Arn"),
                "read-only values are not template keys"
            );
        }
        other => panic!("{other:?}"),
    }

    let mut delete = req.clone();
    delete.token = unique_name("token");
    assert_eq!(cc.delete(&delete).await.expect("delete"), Deleted::Done);
    assert_eq!(
        cc.read_current_state(&req).await.expect("read"),
        CurrentState::NotFound
    );
}

#[tokio::test]
async fn sdk_ssm_parameter_round_trip() {
    let config = Emulator::shared().await.sdk_config().await;
    let provider = SsmParameterProvider::new(aws_sdk_ssm::Client::new(&config));
    let template = json!({
        "Type": "String",
        "Value": "v1",
        "Description": "a parameter",
        "Tags": {"team": "core"}
    });
    // No Name in the template: a deterministic generated one.
    let mut req = request("Param", "AWS::SSM::Parameter", template.clone());
    let created = provider.create(&req).await.expect("create");
    let name = created.physical_id.clone();
    assert!(
        name.starts_with(&format!("{}-Param-", req.stack_name)),
        "{name}"
    );
    assert_eq!(created.attributes.get("Value"), Some(&json!("v1")));
    // A retry of the same create (same token) finds the same name and succeeds.
    let again = provider.create(&req).await.expect("create retried");
    assert_eq!(again.physical_id, name);

    req.physical_id = Some(name.clone());
    let mut expected = props(template);
    expected.insert("Name".into(), json!(name));
    match provider.read_current_state(&req).await.expect("read") {
        CurrentState::Found(state) => assert_eq!(
            Value::Object(state),
            Value::Object(expected.clone()),
            "read_current_state must give back the template's properties"
        ),
        other => panic!("{other:?}"),
    }

    let mut update = req.clone();
    update.previous_properties = Some(req.properties.clone());
    update.properties.insert("Value".into(), json!("v2"));
    update
        .properties
        .insert("Tags".into(), json!({"owner": "me"}));
    update.token = unique_name("token");
    let updated = provider.update(&update).await.expect("update");
    assert_eq!(updated.physical_id, name);
    assert_eq!(updated.attributes.get("Value"), Some(&json!("v2")));
    match provider.read_current_state(&req).await.expect("read") {
        CurrentState::Found(state) => {
            assert_eq!(state.get("Value"), Some(&json!("v2")));
            assert_eq!(state.get("Tags"), Some(&json!({"owner": "me"})));
        }
        other => panic!("{other:?}"),
    }

    // Renaming is not an in-place update.
    let mut rename = update.clone();
    rename
        .properties
        .insert("Name".into(), json!(format!("{name}-x")));
    let err = provider.update(&rename).await.expect_err("rename");
    assert_eq!(err.name(), "Stackflow.NotUpdatable");

    match provider.import(&req).await.expect("import") {
        Imported::Found { physical_id, .. } => assert_eq!(physical_id, name),
        other => panic!("{other:?}"),
    }
    assert_eq!(provider.delete(&req).await.expect("delete"), Deleted::Done);
    assert_eq!(
        provider.delete(&req).await.expect("delete again"),
        Deleted::Done
    );
    assert_eq!(
        provider.read_current_state(&req).await.expect("read"),
        CurrentState::NotFound
    );
    assert_eq!(
        provider.import(&req).await.expect("import"),
        Imported::NotDeployedYet
    );
}

#[tokio::test]
async fn sdk_sqs_queue_round_trip() {
    let config = Emulator::shared().await.sdk_config().await;
    let provider = SqsQueueProvider::new(aws_sdk_sqs::Client::new(&config));
    let template = json!({
        "VisibilityTimeout": 45,
        "DelaySeconds": 2,
        "Tags": [{"Key": "team", "Value": "core"}]
    });
    let mut req = request("Queue", "AWS::SQS::Queue", template.clone());
    let created = provider.create(&req).await.expect("create");
    let url = created.physical_id.clone();
    let name = url.rsplit('/').next().expect("a name").to_string();
    assert!(
        name.starts_with(&format!("{}-Queue-", req.stack_name)),
        "{name}"
    );
    assert!(
        created
            .attributes
            .get("Arn")
            .and_then(Value::as_str)
            .is_some_and(|a| a.ends_with(&name))
    );
    assert_eq!(created.attributes.get("QueueUrl"), Some(&json!(url)));
    // A retry of the same create (same token, same attributes) finds the same queue.
    let again = provider.create(&req).await.expect("create retried");
    assert_eq!(again.physical_id, url);

    req.physical_id = Some(url.clone());
    let mut expected = props(template);
    expected.insert("QueueName".into(), json!(name));
    match provider.read_current_state(&req).await.expect("read") {
        CurrentState::Found(state) => {
            let mut state = state;
            // Sorted keys on both sides: compare as sets of keys and values.
            state.sort_keys();
            expected.sort_keys();
            assert_eq!(Value::Object(state), Value::Object(expected.clone()));
        }
        other => panic!("{other:?}"),
    }

    let mut update = req.clone();
    update.previous_properties = Some(req.properties.clone());
    update
        .properties
        .insert("VisibilityTimeout".into(), json!(60));
    update.properties.remove("DelaySeconds");
    update
        .properties
        .insert("Tags".into(), json!([{"Key": "owner", "Value": "me"}]));
    update.token = unique_name("token");
    let updated = provider.update(&update).await.expect("update");
    assert_eq!(updated.physical_id, url);
    match provider.read_current_state(&req).await.expect("read") {
        CurrentState::Found(state) => {
            assert_eq!(state.get("VisibilityTimeout"), Some(&json!(60)));
            assert_eq!(state.get("DelaySeconds"), None, "back to the default");
            assert_eq!(
                state.get("Tags"),
                Some(&json!([{"Key": "owner", "Value": "me"}]))
            );
        }
        other => panic!("{other:?}"),
    }

    let mut by_name = req.clone();
    by_name.physical_id = None;
    by_name.properties.insert("QueueName".into(), json!(name));
    match provider.import(&by_name).await.expect("import") {
        Imported::Found { physical_id, .. } => assert_eq!(physical_id, url),
        other => panic!("{other:?}"),
    }
    assert_eq!(provider.delete(&req).await.expect("delete"), Deleted::Done);
    assert_eq!(
        provider.delete(&req).await.expect("delete again"),
        Deleted::Done
    );
    assert_eq!(
        provider.read_current_state(&req).await.expect("read"),
        CurrentState::NotFound
    );
    assert_eq!(
        provider.import(&by_name).await.expect("import"),
        Imported::NotDeployedYet
    );
}
