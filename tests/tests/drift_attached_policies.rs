//! A role whose permissions other resources of the stack put on it, as CDK writes a
//! function's role (an `AWS::IAM::Policy` "DefaultPolicy" naming the role, and an
//! `AWS::IAM::ManagedPolicy` attached to it): `stackflow drift` finds the role in sync
//! right after the deploy (those policies are the policy resources' own, not the role's
//! drift), finds an inline policy put on the role out of band, and `--revert` removes that
//! one and leaves the stack's own in place. Through the CLI, on the emulator.

use stackflow_tests::drift_cli::{Session, root};
use stackflow_tests::{Emulator, unique_name};

const TEMPLATE: &str = r#"
Resources:
  FnRole:
    Type: AWS::IAM::Role
    Properties:
      AssumeRolePolicyDocument:
        Version: "2012-10-17"
        Statement:
          - Effect: Allow
            Principal: {Service: lambda.amazonaws.com}
            Action: sts:AssumeRole
  FnRoleDefaultPolicy:
    Type: AWS::IAM::Policy
    Properties:
      PolicyName: FnRoleDefaultPolicy
      PolicyDocument:
        Version: "2012-10-17"
        Statement:
          - Effect: Allow
            Action: sqs:SendMessage
            Resource: "*"
      Roles: [!Ref FnRole]
  ReadLogs:
    Type: AWS::IAM::ManagedPolicy
    Properties:
      PolicyDocument:
        Version: "2012-10-17"
        Statement:
          - Effect: Allow
            Action: logs:GetLogEvents
            Resource: "*"
      Roles: [!Ref FnRole]
"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_roles_policies_from_its_stack_are_not_drift_and_survive_a_revert() {
    let emulator = Emulator::shared().await;
    let session = Session::new(
        emulator,
        &root(env!("CARGO_TARGET_TMPDIR"), "drift"),
        "roles",
    );
    let stack = format!("R{}", unique_name("s").replace('_', "-"));
    let file = session.template("roles", &stack, TEMPLATE);
    session.run(&["deploy", &file, "--stack", &stack], 0);

    let drift = session.drift(&stack, &[], 0);
    for (id, status) in drift.statuses() {
        assert_eq!(status, "in-sync", "{id}: {:#}", drift.0);
    }

    let state = session.state(&stack);
    let role = state["resources"]["FnRole"]["physicalId"]
        .as_str()
        .expect("the role's name")
        .to_string();
    let iam = aws_sdk_iam::Client::new(&emulator.sdk_config().await);
    iam.put_role_policy()
        .role_name(&role)
        .policy_name("OutOfBand")
        .policy_document(r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:*","Resource":"*"}]}"#)
        .send()
        .await
        .expect("an inline policy put out of band");
    let drift = session.drift(&stack, &[], 1);
    assert_eq!(drift.status("FnRole"), "drifted", "{:#}", drift.0);
    assert!(
        drift.paths("FnRole").iter().any(|p| p.contains("Policies")),
        "{:#}",
        drift.0
    );

    let reverted = session.drift(&stack, &["--revert"], 0);
    assert_eq!(reverted.status("FnRole"), "reverted", "{:#}", reverted.0);
    let inline = iam
        .list_role_policies()
        .role_name(&role)
        .send()
        .await
        .expect("the role's inline policies");
    assert_eq!(inline.policy_names(), ["FnRoleDefaultPolicy"]);
    let attached = iam
        .list_attached_role_policies()
        .role_name(&role)
        .send()
        .await
        .expect("the role's managed policies");
    assert_eq!(attached.attached_policies().len(), 1, "{attached:?}");
    let drift = session.drift(&stack, &[], 0);
    assert_eq!(drift.status("FnRole"), "in-sync", "{:#}", drift.0);
    session.run(&["destroy", "--stack", &stack], 0);
}
