//! The `AWS::ApiGateway::Account` SDK provider against the local emulator (fakecloud
//! 0.51.0), read back with a plain API Gateway client (`GetAccount`). The settings are one
//! per account and region (fakecloud keeps them per account only), so one test makes every
//! change, in a region no other test uses.
//!
//! The round trip: a create without a role changes nothing; create sets the role, and a replay of the create (same token) answers the
//! same id; `read_current_state` gives the template's property back; `import` finds the
//! settings under the resource's own id and under an explicit one; update moves the role;
//! an update that drops the role leaves a role someone else set since, and clears the one
//! this resource set; a delete leaves the settings as they are (CloudFormation's delete of
//! the type changes nothing), and says done.
//!
//! What the emulator cannot show: AWS refuses a role API Gateway cannot assume yet ("does
//! not have required permissions set to API Gateway", retried as IAM propagation; the
//! classification has a unit test); fakecloud stores any ARN.

use aws_sdk_apigateway::types::{Op, PatchOperation};
use serde_json::json;
use stackflow_providers::sdk::apigateway_account::{ApiGatewayAccountProvider, TYPE};
use stackflow_providers::{Deleted, Imported, Provider};
use stackflow_tests::emulator::ACCOUNT_ID;
use stackflow_tests::round_trip::{props, read, request, update_of, without_id};
use stackflow_tests::{Emulator, unique_name};

const REGION: &str = "sa-east-1";

async fn client(region: &str) -> aws_sdk_apigateway::Client {
    let config = Emulator::shared()
        .await
        .sdk_config()
        .await
        .to_builder()
        .region(aws_types::region::Region::new(region.to_string()))
        .build();
    aws_sdk_apigateway::Client::new(&config)
}

/// The role the account holds, as API Gateway answers.
async fn role_held(client: &aws_sdk_apigateway::Client) -> Option<String> {
    client
        .get_account()
        .send()
        .await
        .expect("GetAccount")
        .cloudwatch_role_arn()
        .filter(|r| !r.is_empty())
        .map(str::to_string)
}

/// Sets the role out of band, as another stack or a person would.
async fn set_elsewhere(client: &aws_sdk_apigateway::Client, role: &str) {
    client
        .update_account()
        .patch_operations(
            PatchOperation::builder()
                .op(Op::Replace)
                .path("/cloudwatchRoleArn")
                .value(role)
                .build(),
        )
        .send()
        .await
        .expect("UpdateAccount");
}

fn role(name: &str) -> String {
    format!("arn:aws:iam::{ACCOUNT_ID}:role/{}", unique_name(name))
}

#[tokio::test(flavor = "multi_thread")]
async fn account_settings_round_trip() {
    let client = client(REGION).await;
    a_create_without_a_role_leaves_the_settings(&client).await;
    let provider = ApiGatewayAccountProvider::new(client.clone());
    let first = role("apigw-logs");
    let req = request("ApiAccount", TYPE, json!({"CloudWatchRoleArn": first}));

    let created = provider.create(&req).await.expect("create");
    assert_eq!(role_held(&client).await.as_deref(), Some(first.as_str()));
    assert_eq!(created.attributes["Id"], json!(created.physical_id));
    assert!(created.physical_id.contains("ApiAccount"), "{created:?}");
    let replay = provider.create(&req).await.expect("replay");
    assert_eq!(replay.physical_id, created.physical_id);

    let mut req = req;
    req.physical_id = Some(created.physical_id.clone());
    assert_eq!(
        read(&provider, &req).await,
        props(json!({"CloudWatchRoleArn": first}))
    );
    for (r, id) in [
        (without_id(&req), created.physical_id.clone()),
        (req.clone(), created.physical_id.clone()),
    ] {
        match provider.import(&r).await.expect("import") {
            Imported::Found { physical_id, .. } => assert_eq!(physical_id, id),
            other => panic!("{other:?}"),
        }
    }

    // Update: the role moves.
    let second = role("apigw-logs-2");
    let moved = update_of(&req, json!({"CloudWatchRoleArn": second}));
    let updated = provider.update(&moved).await.expect("update");
    assert_eq!(updated.physical_id, created.physical_id);
    assert_eq!(role_held(&client).await.as_deref(), Some(second.as_str()));
    assert_eq!(
        read(&provider, &moved).await,
        props(json!({"CloudWatchRoleArn": second}))
    );

    // Dropping the role leaves one someone else set since...
    let theirs = role("someone-else");
    set_elsewhere(&client, &theirs).await;
    let dropped = update_of(&moved, json!({}));
    provider.update(&dropped).await.expect("update");
    assert_eq!(role_held(&client).await.as_deref(), Some(theirs.as_str()));
    // ...and clears the one this resource set.
    set_elsewhere(&client, &second).await;
    provider.update(&dropped).await.expect("update");
    assert_eq!(role_held(&client).await, None);
    assert_eq!(read(&provider, &dropped).await, props(json!({})));

    // A delete leaves the settings as they are, as CloudFormation's does.
    let back = update_of(&dropped, json!({"CloudWatchRoleArn": first}));
    provider.update(&back).await.expect("update");
    assert_eq!(provider.delete(&back).await.expect("delete"), Deleted::Done);
    assert_eq!(provider.delete(&back).await.expect("again"), Deleted::Done);
    assert_eq!(role_held(&client).await.as_deref(), Some(first.as_str()));
}

/// A create without a role changes nothing in the settings.
async fn a_create_without_a_role_leaves_the_settings(client: &aws_sdk_apigateway::Client) {
    set_elsewhere(client, &role("before")).await;
    let before = role_held(client).await;
    assert!(before.is_some());
    let provider = ApiGatewayAccountProvider::new(client.clone());
    let req = request("Quiet", TYPE, json!({}));
    let created = provider.create(&req).await.expect("create");
    assert!(!created.physical_id.is_empty());
    assert_eq!(role_held(client).await, before);
    assert_eq!(provider.name(), "sdk:AWS::ApiGateway::Account");
    assert_eq!(
        provider.handled_properties(TYPE),
        Some(&["CloudWatchRoleArn"][..])
    );
}
