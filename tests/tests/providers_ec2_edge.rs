//! The SDK providers of `AWS::EC2::SecurityGroup`, `AWS::EC2::SecurityGroupIngress`,
//! `AWS::EC2::SecurityGroupEgress`, `AWS::EC2::EIP`, `AWS::EC2::NatGateway` and
//! `AWS::EC2::VPCEndpoint` against the local emulator (fakecloud 0.51.0), through the real
//! SDK clients. The VPC, subnets and route tables they need are made with the plain EC2
//! client. Each test is a round trip: create from template properties (a retry of the
//! create, same token, adopts what the first one made), `read_current_state` gives the
//! template's properties back in the same shape, update in place, read again, a change of a
//! create-only property is `NotUpdatable`, delete, delete again (gone is success), then
//! `import` reports the resource not deployed yet. A standalone rule that matches a rule
//! this stack did not make is refused (`AlreadyExists`) and the rule is left alone.
//!
//! What the emulator cannot show, so these tests do not prove it:
//! - The waits: NAT gateways and VPC endpoints are `available` at once, and gone at once
//!   when deleted; `pending`, `deleting` and `failed` are never seen.
//! - The client tokens: fakecloud makes a second NAT gateway or endpoint for a repeated
//!   `ClientToken`, so the adoption on a retried create shown here is the look-up by the
//!   stack's marks, not the token.
//! - A VPC endpoint's policy: `DescribeVpcEndpoints` never answers `PolicyDocument`, so the
//!   policy set by the update is not read back; DNS entries and network interfaces of an
//!   interface endpoint are empty.
//! - `InvalidPermission.Duplicate`: fakecloud authorizes a rule that exists a second time,
//!   so the refusal of someone else's rule shown here is the providers' look-up.
//! - The release of an address still associated (an instance's) is not exercised.

use aws_sdk_ec2::types::{IpPermission, IpRange};
use serde_json::json;
use stackflow_providers::sdk::ec2::eip::EipProvider;
use stackflow_providers::sdk::ec2::nat_gateway::NatGatewayProvider;
use stackflow_providers::sdk::ec2::security_group::SecurityGroupProvider;
use stackflow_providers::sdk::ec2::sg_rule::egress::SecurityGroupEgressProvider;
use stackflow_providers::sdk::ec2::sg_rule::ingress::SecurityGroupIngressProvider;
use stackflow_providers::sdk::ec2::vpc_endpoint::VpcEndpointProvider;
use stackflow_providers::{CurrentState, Provider, ProviderError};
use stackflow_tests::emulator::REGION;
use stackflow_tests::round_trip::{
    delete_twice_then_gone, not_updatable, props, read, request, sorted, update_of,
};
use stackflow_tests::{Emulator, unique_name};

async fn ec2() -> aws_sdk_ec2::Client {
    aws_sdk_ec2::Client::new(&Emulator::shared().await.sdk_config().await)
}

/// A VPC (10.0.0.0/16) and a subnet in it: (vpc, subnet).
async fn network(ec2: &aws_sdk_ec2::Client) -> (String, String) {
    let vpc = ec2
        .create_vpc()
        .cidr_block("10.0.0.0/16")
        .send()
        .await
        .expect("vpc");
    let vpc = vpc
        .vpc()
        .and_then(|v| v.vpc_id())
        .expect("vpc id")
        .to_string();
    let subnet = ec2
        .create_subnet()
        .vpc_id(&vpc)
        .cidr_block("10.0.1.0/24")
        .send()
        .await
        .expect("subnet");
    let subnet = subnet.subnet().and_then(|s| s.subnet_id()).expect("id");
    (vpc, subnet.to_string())
}

async fn route_table(ec2: &aws_sdk_ec2::Client, vpc: &str) -> String {
    let out = ec2
        .create_route_table()
        .vpc_id(vpc)
        .send()
        .await
        .expect("route table");
    let table = out.route_table().and_then(|t| t.route_table_id());
    table.expect("id").to_string()
}

#[tokio::test]
async fn sdk_security_group_round_trip() {
    let ec2 = ec2().await;
    let (vpc, _) = network(&ec2).await;
    let provider = SecurityGroupProvider::new(ec2.clone());
    // CDK's shape: its own allow-all egress rule with a description.
    let template = json!({
        "GroupDescription": "web",
        "VpcId": vpc,
        "SecurityGroupIngress": [{"CidrIp": "0.0.0.0/0", "Description": "https",
            "FromPort": 443, "IpProtocol": "tcp", "ToPort": 443}],
        "SecurityGroupEgress": [{"CidrIp": "0.0.0.0/0",
            "Description": "Allow all outbound traffic by default", "IpProtocol": "-1"}],
        "Tags": [{"Key": "team", "Value": "web"}]
    });
    let mut req = request("WebSg", "AWS::EC2::SecurityGroup", template.clone());
    let created = provider.create(&req).await.expect("create");
    let id = created.physical_id.clone();
    assert!(id.starts_with("sg-"), "{id}");
    assert_eq!(created.attributes["GroupId"], json!(id));
    assert_eq!(created.attributes["VpcId"], json!(vpc));
    let again = provider.create(&req).await.expect("create retried");
    assert_eq!(again.physical_id, id, "the retry adopts the first group");

    req.physical_id = Some(id.clone());
    let state = read(&provider, &req).await;
    let name = state["GroupName"]
        .as_str()
        .expect("a generated name")
        .to_string();
    assert!(
        name.starts_with(&format!("{}-WebSg-", req.stack_name)),
        "{name}"
    );
    let mut expected = props(template);
    expected.insert("GroupName".into(), json!(name));
    expected.sort_keys();
    assert_eq!(
        state, expected,
        "one egress rule: the default one was revoked"
    );

    // Ingress: one rule's description changes, one is added; egress goes back to EC2's
    // default (the template drops its list); tags change.
    let new = json!({
        "GroupDescription": "web",
        "VpcId": vpc,
        "SecurityGroupIngress": [
            {"CidrIp": "0.0.0.0/0", "Description": "tls", "FromPort": 443,
                "IpProtocol": "tcp", "ToPort": 443},
            {"CidrIp": "10.0.0.0/8", "FromPort": 80, "IpProtocol": "tcp", "ToPort": 80}],
        "Tags": [{"Key": "team", "Value": "edge"}]
    });
    let req = update_of(&req, new.clone());
    let updated = provider.update(&req).await.expect("update");
    assert_eq!(
        (updated.physical_id.as_str(), updated.replaced),
        (id.as_str(), false)
    );
    let mut expected = props(new.clone());
    expected.insert("GroupName".into(), json!(name));
    expected.insert(
        "SecurityGroupIngress".into(),
        json!([
            {"CidrIp": "0.0.0.0/0", "Description": "tls", "FromPort": 443,
                "IpProtocol": "tcp", "ToPort": 443},
            {"CidrIp": "10.0.0.0/8", "FromPort": 80, "IpProtocol": "tcp", "ToPort": 80}]),
    );
    expected.sort_keys();
    assert_eq!(read(&provider, &req).await, expected);
    let rules = ec2
        .describe_security_group_rules()
        .filters(
            aws_sdk_ec2::types::Filter::builder()
                .name("group-id")
                .values(&id)
                .build(),
        )
        .send()
        .await
        .expect("rules");
    let egress: Vec<_> = rules
        .security_group_rules()
        .iter()
        .filter(|r| r.is_egress() == Some(true))
        .collect();
    assert_eq!(egress.len(), 1, "{egress:?}");
    assert_eq!(
        egress[0].description(),
        None,
        "EC2's own default rule is back"
    );

    let mut renamed = new.clone();
    renamed["GroupDescription"] = json!("other");
    not_updatable(&provider, &update_of(&req, renamed)).await;
    delete_twice_then_gone(&provider, &req, &[]).await;
}

#[tokio::test]
async fn sdk_security_group_rules_round_trip() {
    let ec2 = ec2().await;
    let (vpc, _) = network(&ec2).await;
    let groups = SecurityGroupProvider::new(ec2.clone());
    let mut group_req = request(
        "Sg",
        "AWS::EC2::SecurityGroup",
        json!({"GroupDescription": "g", "VpcId": vpc}),
    );
    let group = groups.create(&group_req).await.expect("group").physical_id;
    group_req.physical_id = Some(group.clone());

    // A self-referencing ingress rule, as CDK writes `connections.allowInternally`.
    let provider = SecurityGroupIngressProvider::new(ec2.clone());
    let template = json!({"Description": "self", "FromPort": 8080, "GroupId": group,
        "IpProtocol": "tcp", "SourceSecurityGroupId": group, "ToPort": 8080});
    let mut req = request("SgSelf", "AWS::EC2::SecurityGroupIngress", template.clone());
    req.stack_name = group_req.stack_name.clone();
    let created = provider.create(&req).await.expect("create");
    let id = created.physical_id.clone();
    assert!(id.starts_with("sgr-"), "{id}");
    assert_eq!(created.attributes["Id"], json!(id));
    let again = provider.create(&req).await.expect("create retried");
    assert_eq!(again.physical_id, id, "the retry adopts the first rule");
    req.physical_id = Some(id.clone());
    assert_eq!(read(&provider, &req).await, sorted(props(template.clone())));
    // The group's own state leaves the standalone rule out (and its default egress).
    assert_eq!(
        read(&groups, &group_req).await.get("SecurityGroupIngress"),
        None,
        "the standalone rule is not the group's drift"
    );

    let mut new = template.clone();
    new["Description"] = json!("cluster");
    let updated = provider
        .update(&update_of(&req, new.clone()))
        .await
        .expect("update");
    assert_eq!(updated.physical_id, id);
    req.properties = props(new.clone());
    assert_eq!(read(&provider, &req).await, sorted(props(new.clone())));
    let mut other_port = new.clone();
    other_port["FromPort"] = json!(8081);
    not_updatable(&provider, &update_of(&req, other_port)).await;
    delete_twice_then_gone(&provider, &req, &[]).await;

    // An egress rule the same way, briefly.
    let egress = SecurityGroupEgressProvider::new(ec2.clone());
    let out = json!({"GroupId": group, "IpProtocol": "tcp", "FromPort": 5432,
        "ToPort": 5432, "DestinationSecurityGroupId": group});
    let mut out_req = request("SgOut", "AWS::EC2::SecurityGroupEgress", out.clone());
    let made = egress.create(&out_req).await.expect("egress create");
    out_req.physical_id = Some(made.physical_id.clone());
    assert_eq!(read(&egress, &out_req).await, sorted(props(out)));
    assert_eq!(
        ingress_state_of(&provider, &made.physical_id).await,
        CurrentState::NotFound,
        "an egress rule is not an ingress rule"
    );
    delete_twice_then_gone(&egress, &out_req, &[]).await;

    // A rule someone else authorized is not taken over.
    ec2.authorize_security_group_ingress()
        .group_id(&group)
        .ip_permissions(
            IpPermission::builder()
                .ip_protocol("tcp")
                .from_port(22)
                .to_port(22)
                .ip_ranges(IpRange::builder().cidr_ip("192.0.2.0/24").build())
                .build(),
        )
        .send()
        .await
        .expect("their rule");
    let theirs = request(
        "Ssh",
        "AWS::EC2::SecurityGroupIngress",
        json!({"GroupId": group, "IpProtocol": "tcp", "FromPort": 22, "ToPort": 22,
            "CidrIp": "192.0.2.0/24"}),
    );
    match provider.create(&theirs).await {
        Err(ProviderError::AlreadyExists(m)) => assert!(m.contains("did not create"), "{m}"),
        other => panic!("someone else's rule must be refused, got {other:?}"),
    }
    let state = read(&groups, &group_req).await;
    assert_eq!(
        state["SecurityGroupIngress"],
        json!([{"CidrIp": "192.0.2.0/24", "FromPort": 22, "IpProtocol": "tcp", "ToPort": 22}]),
        "their rule is still there, and reported as the group's drift"
    );
    delete_twice_then_gone(&groups, &group_req, &[]).await;
}

async fn ingress_state_of(provider: &dyn Provider, id: &str) -> CurrentState {
    let mut r = request("X", "AWS::EC2::SecurityGroupIngress", json!({}));
    r.physical_id = Some(id.to_string());
    provider.read_current_state(&r).await.expect("read")
}

#[tokio::test]
async fn sdk_eip_and_nat_gateway_round_trip() {
    let ec2 = ec2().await;
    let (_, subnet) = network(&ec2).await;
    let eips = EipProvider::new(ec2.clone());
    let template = json!({"Domain": "vpc", "Tags": [{"Key": "Name", "Value": "nat-a"}]});
    let mut eip_req = request("Eip", "AWS::EC2::EIP", template.clone());
    let created = eips.create(&eip_req).await.expect("eip");
    let ip = created.physical_id.clone();
    let allocation = created.attributes["AllocationId"]
        .as_str()
        .expect("allocation")
        .to_string();
    assert!(allocation.starts_with("eipalloc-"), "{allocation}");
    assert_eq!(created.attributes["PublicIp"], json!(ip));
    let again = eips.create(&eip_req).await.expect("eip retried");
    assert_eq!(again.physical_id, ip, "the retry adopts the first address");
    eip_req.physical_id = Some(ip.clone());
    assert_eq!(read(&eips, &eip_req).await, sorted(props(template)));
    let new = json!({"Domain": "vpc", "Tags": [{"Key": "Name", "Value": "nat-b"}]});
    eips.update(&update_of(&eip_req, new.clone()))
        .await
        .expect("eip update");
    eip_req.properties = props(new.clone());
    assert_eq!(read(&eips, &eip_req).await, sorted(props(new)));

    let nats = NatGatewayProvider::new(ec2.clone());
    let template = json!({"AllocationId": allocation, "SubnetId": subnet,
        "Tags": [{"Key": "Name", "Value": "nat"}]});
    let mut nat_req = request("Nat", "AWS::EC2::NatGateway", template.clone());
    let created = nats.create(&nat_req).await.expect("nat");
    let nat = created.physical_id.clone();
    assert!(nat.starts_with("nat-"), "{nat}");
    assert_eq!(created.attributes["NatGatewayId"], json!(nat));
    let again = nats.create(&nat_req).await.expect("nat retried");
    assert_eq!(again.physical_id, nat, "the retry adopts the first gateway");
    nat_req.physical_id = Some(nat.clone());
    assert_eq!(read(&nats, &nat_req).await, sorted(props(template.clone())));
    let mut new = template.clone();
    new["Tags"] = json!([{"Key": "Name", "Value": "nat"}, {"Key": "tier", "Value": "1"}]);
    nats.update(&update_of(&nat_req, new.clone()))
        .await
        .expect("nat update");
    nat_req.properties = props(new.clone());
    assert_eq!(read(&nats, &nat_req).await, sorted(props(new.clone())));
    let mut moved = new.clone();
    moved["SubnetId"] = json!("subnet-other");
    not_updatable(&nats, &update_of(&nat_req, moved)).await;
    not_updatable(
        &eips,
        &update_of(&eip_req, json!({"Domain": "vpc", "PublicIpv4Pool": "p"})),
    )
    .await;

    // The gateway goes first (the engine's order: it depends on the address).
    delete_twice_then_gone(&nats, &nat_req, &[]).await;
    delete_twice_then_gone(&eips, &eip_req, &[]).await;
}

#[tokio::test]
async fn sdk_vpc_endpoint_round_trip() {
    let ec2 = ec2().await;
    let (vpc, subnet) = network(&ec2).await;
    let (rt1, rt2) = (route_table(&ec2, &vpc).await, route_table(&ec2, &vpc).await);
    let provider = VpcEndpointProvider::new(ec2.clone());
    let service = format!("com.amazonaws.{REGION}.s3");
    let template = json!({"RouteTableIds": [rt1], "ServiceName": service,
        "Tags": [{"Key": "Name", "Value": "s3"}], "VpcEndpointType": "Gateway", "VpcId": vpc});
    let mut req = request("S3Endpoint", "AWS::EC2::VPCEndpoint", template.clone());
    let created = provider.create(&req).await.expect("create");
    let id = created.physical_id.clone();
    assert!(id.starts_with("vpce-"), "{id}");
    assert_eq!(created.attributes["Id"], json!(id));
    for key in ["CreationTimestamp", "DnsEntries", "NetworkInterfaceIds"] {
        assert!(created.attributes.contains_key(key), "{key}");
    }
    let again = provider.create(&req).await.expect("create retried");
    assert_eq!(again.physical_id, id, "the retry adopts the first endpoint");
    req.physical_id = Some(id.clone());
    assert_eq!(read(&provider, &req).await, sorted(props(template.clone())));

    let mut new = template.clone();
    new["RouteTableIds"] = json!([rt2, rt1]);
    new["PolicyDocument"] = json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
        "Principal": "*", "Action": "s3:GetObject", "Resource": "*"}]});
    new["Tags"] = json!([{"Key": "Name", "Value": "s3-2"}]);
    let updated = provider
        .update(&update_of(&req, new.clone()))
        .await
        .expect("update");
    assert_eq!(
        (updated.physical_id.as_str(), updated.replaced),
        (id.as_str(), false)
    );
    req.properties = props(new.clone());
    let mut expected = new.clone();
    // fakecloud answers no PolicyDocument (see the module comment).
    expected
        .as_object_mut()
        .expect("object")
        .remove("PolicyDocument");
    assert_eq!(read(&provider, &req).await, sorted(props(expected)));
    let mut fewer = new.clone();
    fewer["RouteTableIds"] = json!([rt2]);
    provider
        .update(&update_of(&req, fewer.clone()))
        .await
        .expect("remove a table");
    req.properties = props(fewer.clone());
    assert_eq!(read(&provider, &req).await["RouteTableIds"], json!([rt2]));
    let mut other = fewer.clone();
    other["ServiceName"] = json!(format!("com.amazonaws.{REGION}.dynamodb"));
    not_updatable(&provider, &update_of(&req, other)).await;
    delete_twice_then_gone(&provider, &req, &[]).await;

    // An interface endpoint with a subnet, a security group and private DNS.
    let group = ec2
        .create_security_group()
        .group_name(unique_name("endpoint-sg"))
        .description("endpoints")
        .vpc_id(&vpc)
        .send()
        .await
        .expect("group");
    let group = group.group_id().expect("group id").to_string();
    let template = json!({"PrivateDnsEnabled": true, "SecurityGroupIds": [group],
        "ServiceName": format!("com.amazonaws.{REGION}.sqs"), "SubnetIds": [subnet],
        "VpcEndpointType": "Interface", "VpcId": vpc});
    let mut req = request("SqsEndpoint", "AWS::EC2::VPCEndpoint", template.clone());
    let created = provider.create(&req).await.expect("interface create");
    req.physical_id = Some(created.physical_id);
    let state = read(&provider, &req).await;
    assert_eq!(state["SubnetIds"], json!([subnet]));
    assert_eq!(state["PrivateDnsEnabled"], json!(true));
    assert_eq!(state["VpcEndpointType"], json!("Interface"));
    delete_twice_then_gone(&provider, &req, &[]).await;
}
