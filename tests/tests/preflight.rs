//! Templates that stackflow refuses before it writes anything to AWS, through the
//! `stackflow` binary against the emulator, every request recorded by a proxy:
//!
//! - a security group rule with both `CidrIp` and `CidrIpv6`: CloudFormation documents
//!   exactly one source per rule (the resource's `Ref` is one rule id), while EC2 would make
//!   two rules of it; stackflow follows CloudFormation and refuses it while planning, naming
//!   the rule and the fix, before the group before it is made;
//! - a property that holds `${AWS::Region}` as text outside `Fn::Sub`, which AWS would
//!   receive as written: refused as the template is read.
//!
//! Each deploy exits 1, names the template path, makes no write request, and records
//! nothing (the stack has no events afterwards).

use std::time::Duration;

use aws_sdk_ec2::types::Filter;
use stackflow_tests::drift_cli::{Session, root};
use stackflow_tests::latency::{LatencyProxy, RequestRecord};
use stackflow_tests::{Emulator, unique_name};

/// True for a request that may change something in AWS.
fn writes(r: &RequestRecord) -> bool {
    let l = r.label.as_str();
    [
        "Create",
        "Put",
        "Authorize",
        "Update",
        "Delete",
        "Tag",
        "Run",
    ]
    .iter()
    .any(|w| l.starts_with(w) || l.contains(&format!(".{w}")))
        || l.starts_with("PUT ")
        || l.starts_with("DELETE ")
        || l.starts_with("POST /")
}

async fn recorded(emulator: &Emulator, name: &str) -> (Session, LatencyProxy) {
    let proxy = LatencyProxy::start(emulator.endpoint(), Duration::ZERO)
        .await
        .expect("proxy");
    let mut session = Session::new(
        emulator,
        &root(env!("CARGO_TARGET_TMPDIR"), "preflight"),
        name,
    );
    session.cli.endpoint = proxy.endpoint();
    (session, proxy)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rule_with_both_an_ipv4_and_an_ipv6_range_is_refused_before_anything_is_made() {
    let emulator = Emulator::shared().await;
    let (session, proxy) = recorded(emulator, "dual").await;
    let group = unique_name("dual-sg");
    let template = session.template(
        "t",
        "DualCidr",
        &format!(
            "Resources:
  Group:
    Type: AWS::EC2::SecurityGroup
    Properties:
      GroupName: {group}
      GroupDescription: web
  Https:
    Type: AWS::EC2::SecurityGroupIngress
    Properties:
      GroupId: !GetAtt Group.GroupId
      IpProtocol: tcp
      FromPort: 443
      ToPort: 443
      CidrIp: 0.0.0.0/0
      CidrIpv6: ::/0
"
        ),
    );
    let refused = session.run(&["deploy", &template], 1);
    let text = refused.stderr.clone();
    assert!(text.contains("Resources.Https.Properties"), "{text}");
    assert!(text.contains("CidrIp and CidrIpv6"), "{text}");
    assert!(
        text.contains("two rules, one with CidrIp and one with CidrIpv6"),
        "{text}"
    );
    let log = proxy.log();
    assert!(!log.iter().any(writes), "{log:?}");
    // Nothing was made: no group of that name.
    let ec2 = aws_sdk_ec2::Client::new(&emulator.sdk_config().await);
    let found = ec2
        .describe_security_groups()
        .filters(Filter::builder().name("group-name").values(&group).build())
        .send()
        .await
        .expect("describe");
    assert!(found.security_groups().is_empty(), "{found:?}");
    // Nor recorded: the refusal came before the deploy's first event.
    let state = session.run(&["state", "show", "--stack", "DualCidr"], 1);
    assert!(
        state.stderr.contains("has no events"),
        "{}",
        state.describe()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_placeholder_outside_fn_sub_is_refused_before_any_request() {
    let emulator = Emulator::shared().await;
    let (session, proxy) = recorded(emulator, "placeholder").await;
    let template = session.template(
        "t",
        "Placeholder",
        "Resources:
  Location:
    Type: AWS::SSM::Parameter
    Properties:
      Type: String
      Value: s3://stackflow-${AWS::AccountId}-${AWS::Region}/assets/x.zip
",
    );
    let refused = session.run(&["deploy", &template], 1);
    let text = refused.stderr.clone();
    assert!(text.contains("Placeholder.yaml"), "{text}");
    assert!(
        text.contains("Resources.Location.Properties.Value"),
        "{text}"
    );
    assert!(text.contains("Fn::Sub"), "{text}");
    assert!(proxy.log().is_empty(), "{:?}", proxy.log());
    // The same in a diff.
    let diff = session.run(&["diff", &template], 1);
    assert!(
        diff.stderr.contains("Resources.Location.Properties.Value"),
        "{}",
        diff.describe()
    );
}
