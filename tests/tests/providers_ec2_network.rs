//! The EC2 network SDK providers (VPC, subnet, internet gateway and its attachment, route
//! table, route, subnet route table association) against the local emulator (fakecloud
//! 0.51.0), through the real SDK client. Each type's round trip: create from template
//! properties, a retried create (same token) adopts what the first one made, then
//! `read_current_state` gives the template's properties back in the same shape (AWS's
//! defaults left out), update in place, read again, a change that needs a new resource is
//! `NotUpdatable`, delete, delete again (gone is success), `read_current_state` says not
//! found and `import` by the explicit id says not deployed yet. The refusals of "never
//! touch what the stack did not make" that these types have (none takes a name from the
//! template) are checked too: a route to a destination that has another target, a subnet
//! associated with another table, a VPC with another internet gateway attached.
//!
//! What the emulator does not show, so these tests do not prove it:
//! - The waits for a VPC or subnet to leave `pending`: fakecloud answers `available` at once.
//! - AWS's own refusals of a second attachment or association (`Resource.AlreadyAssociated`):
//!   fakecloud accepts both; the providers look first, and that look is what is proven.
//! - A `DependencyViolation` on delete (retried as transient): fakecloud deletes a VPC or
//!   subnet that still has dependents.
//! - `ClientToken` idempotency of `CreateRouteTable`: fakecloud ignores the token; the
//!   stack's marks (tags) are what find the table a retried create made.
//!
//! [`cdk_vpc_deploys_again_without_changes_and_destroys`] deploys the corpus' CDK VPC
//! (two zones, NAT gateways, an S3 endpoint) through the engine and its registered
//! providers: every resource is made (the VPC carries the stack's marks, so not by Cloud
//! Control), a drift check right after finds every resource in sync, a second deploy
//! changes nothing, destroy removes it.

use serde_json::{Value, json};
use std::sync::Arc;

use stackflow_engine::drift::{DriftMode, DriftStatus, drift_stack};
use stackflow_engine::{DeployOptions, StackStatus, deploy_stack, destroy_stack};
use stackflow_events::sqlite::SqliteStore;
use stackflow_providers::sdk::ec2::gateway_attachment::VpcGatewayAttachmentProvider;
use stackflow_providers::sdk::ec2::internet_gateway::InternetGatewayProvider;
use stackflow_providers::sdk::ec2::route::RouteProvider;
use stackflow_providers::sdk::ec2::route_table::RouteTableProvider;
use stackflow_providers::sdk::ec2::route_table_association::SubnetRouteTableAssociationProvider;
use stackflow_providers::sdk::ec2::subnet::SubnetProvider;
use stackflow_providers::sdk::ec2::vpc::VpcProvider;
use stackflow_providers::{Created, Imported, Provider, ResourceRequest};
use stackflow_tests::deploy::{corpus_template, engine, input, summary};
use stackflow_tests::emulator::REGION;
use stackflow_tests::round_trip::{
    delete_twice_then_gone, not_updatable, read, request_in, sorted, update_of,
};
use stackflow_tests::{Emulator, unique_name};

async fn client() -> aws_sdk_ec2::Client {
    aws_sdk_ec2::Client::new(&Emulator::shared().await.sdk_config().await)
}

/// Creates, creates again with the same token (the same resource answers), and checks
/// that the state read back is the template's; the request then holds the physical id.
async fn create_twice(provider: &dyn Provider, req: &mut ResourceRequest) -> Created {
    let created = provider.create(req).await.expect("create");
    let again = provider.create(req).await.expect("create retried");
    assert_eq!(
        again.physical_id, created.physical_id,
        "a retried create adopts"
    );
    assert_eq!(again.attributes, created.attributes);
    req.physical_id = Some(created.physical_id.clone());
    assert_eq!(read(provider, req).await, sorted(req.properties.clone()));
    created
}

/// Updates `req` to `properties` in place and checks the state read back.
async fn update_to(provider: &dyn Provider, req: &mut ResourceRequest, properties: Value) {
    let update = update_of(req, properties);
    let updated = provider.update(&update).await.expect("update");
    assert_eq!(Some(&updated.physical_id), req.physical_id.as_ref());
    assert!(!updated.replaced);
    *req = update;
    assert_eq!(read(provider, req).await, sorted(req.properties.clone()));
}

/// A VPC for the other resources' tests (deleted by the caller).
async fn make_vpc(stack: &str, cidr: &str) -> (VpcProvider, ResourceRequest) {
    let provider = VpcProvider::new(client().await);
    let mut req = request_in(stack, "Vpc", "AWS::EC2::VPC", json!({"CidrBlock": cidr}));
    let created = provider.create(&req).await.expect("vpc");
    req.physical_id = Some(created.physical_id);
    (provider, req)
}

fn id(req: &ResourceRequest) -> String {
    req.physical_id.clone().expect("a physical id")
}

#[tokio::test]
async fn sdk_vpc_round_trip() {
    let provider = VpcProvider::new(client().await);
    let stack = unique_name("net");
    let template = json!({
        "CidrBlock": "10.20.0.0/16",
        "EnableDnsHostnames": true,
        "Tags": [{"Key": "Name", "Value": "main"}, {"Key": "team", "Value": "net"}]
    });
    let mut req = request_in(&stack, "Vpc", "AWS::EC2::VPC", template);
    let created = create_twice(&provider, &mut req).await;
    let vpc = created.physical_id.clone();
    assert!(vpc.starts_with("vpc-"), "{vpc}");
    let a = &created.attributes;
    assert_eq!(a.get("VpcId"), Some(&json!(vpc)));
    assert_eq!(a.get("CidrBlock"), Some(&json!("10.20.0.0/16")));
    for (key, prefix) in [
        ("DefaultSecurityGroup", "sg-"),
        ("DefaultNetworkAcl", "acl-"),
    ] {
        let value = a.get(key).and_then(Value::as_str).unwrap_or_default();
        assert!(value.starts_with(prefix), "{key}: {value}");
    }
    assert!(a.get("CidrBlockAssociations").is_some_and(Value::is_array));
    assert_eq!(a.get("Ipv6CidrBlocks"), Some(&json!([])));
    // Import by the explicit id answers the same attributes.
    match provider.import(&req).await.expect("import") {
        Imported::Found {
            physical_id,
            attributes,
        } => {
            assert_eq!(physical_id, vpc);
            assert_eq!(&attributes, a);
        }
        other => panic!("{other:?}"),
    }
    // DNS support off takes hostnames off first; the team tag goes, another comes.
    update_to(
        &provider,
        &mut req,
        json!({
            "CidrBlock": "10.20.0.0/16",
            "EnableDnsSupport": false,
            "Tags": [{"Key": "Name", "Value": "main"}, {"Key": "env", "Value": "dev"}]
        }),
    )
    .await;
    not_updatable(
        &provider,
        &update_of(&req, json!({"CidrBlock": "10.21.0.0/16"})),
    )
    .await;
    not_updatable(
        &provider,
        &update_of(
            &req,
            json!({"CidrBlock": "10.20.0.0/16", "InstanceTenancy": "dedicated"}),
        ),
    )
    .await;
    delete_twice_then_gone(&provider, &req, &[]).await;
}

#[tokio::test]
async fn sdk_subnet_round_trip() {
    let stack = unique_name("net");
    let (vpcs, vpc_req) = make_vpc(&stack, "10.30.0.0/16").await;
    let vpc = id(&vpc_req);
    let provider = SubnetProvider::new(client().await);
    let zone = format!("{REGION}a");
    let template = json!({
        "VpcId": vpc,
        "CidrBlock": "10.30.1.0/24",
        "AvailabilityZone": zone,
        "MapPublicIpOnLaunch": true,
        "Tags": [{"Key": "aws-cdk:subnet-type", "Value": "Public"}]
    });
    let mut req = request_in(&stack, "Public", "AWS::EC2::Subnet", template.clone());
    let created = create_twice(&provider, &mut req).await;
    let subnet = created.physical_id.clone();
    assert!(subnet.starts_with("subnet-"), "{subnet}");
    let a = &created.attributes;
    assert_eq!(a.get("SubnetId"), Some(&json!(subnet)));
    assert_eq!(a.get("VpcId"), Some(&json!(vpc)));
    assert_eq!(a.get("AvailabilityZone"), Some(&json!(zone)));
    assert_eq!(a.get("CidrBlock"), Some(&json!("10.30.1.0/24")));
    let association = a.get("NetworkAclAssociationId").and_then(Value::as_str);
    assert!(
        association.is_some_and(|id| id.starts_with("aclassoc-")),
        "{association:?}"
    );
    // Public IPs off (AWS's default: left out of the state) and the tags changed.
    update_to(
        &provider,
        &mut req,
        json!({
            "VpcId": vpc,
            "CidrBlock": "10.30.1.0/24",
            "AvailabilityZone": zone,
            "Tags": [{"Key": "Name", "Value": "private"}]
        }),
    )
    .await;
    let mut moved = template;
    moved["CidrBlock"] = json!("10.30.2.0/24");
    not_updatable(&provider, &update_of(&req, moved)).await;
    delete_twice_then_gone(&provider, &req, &[]).await;
    vpcs.delete(&vpc_req).await.expect("delete vpc");
}

#[tokio::test]
async fn sdk_internet_gateway_and_attachment_round_trip() {
    let stack = unique_name("net");
    let (vpcs, vpc_req) = make_vpc(&stack, "10.40.0.0/16").await;
    let vpc = id(&vpc_req);
    let gateways = InternetGatewayProvider::new(client().await);
    let mut igw_req = request_in(
        &stack,
        "Igw",
        "AWS::EC2::InternetGateway",
        json!({"Tags": [{"Key": "Name", "Value": "igw"}]}),
    );
    let igw = create_twice(&gateways, &mut igw_req).await;
    assert!(igw.physical_id.starts_with("igw-"), "{}", igw.physical_id);
    assert_eq!(
        igw.attributes.get("InternetGatewayId"),
        Some(&json!(igw.physical_id))
    );
    update_to(&gateways, &mut igw_req, json!({})).await;
    // A second gateway, to move the attachment to.
    let mut other_req = request_in(&stack, "Igw2", "AWS::EC2::InternetGateway", json!({}));
    let other = gateways.create(&other_req).await.expect("second gateway");
    other_req.physical_id = Some(other.physical_id.clone());

    let attachments = VpcGatewayAttachmentProvider::new(client().await);
    let mut req = request_in(
        &stack,
        "Attach",
        "AWS::EC2::VPCGatewayAttachment",
        json!({"VpcId": vpc, "InternetGatewayId": igw.physical_id}),
    );
    let created = create_twice(&attachments, &mut req).await;
    assert_eq!(created.physical_id, format!("IGW|{vpc}"));
    assert!(created.attributes.is_empty());
    // Another stack's attachment of another gateway to the same VPC is refused.
    let taken = request_in(
        "other",
        "Attach",
        "AWS::EC2::VPCGatewayAttachment",
        json!({"VpcId": vpc, "InternetGatewayId": other.physical_id}),
    );
    let err = attachments.create(&taken).await.expect_err("taken");
    assert_eq!(err.name(), "Stackflow.AlreadyExists", "{err}");
    // The gateway changes in place: detached, the other attached.
    update_to(
        &attachments,
        &mut req,
        json!({"VpcId": vpc, "InternetGatewayId": other.physical_id}),
    )
    .await;
    let (_, other_vpc_req) = make_vpc(&stack, "10.41.0.0/16").await;
    not_updatable(
        &attachments,
        &update_of(
            &req,
            json!({"VpcId": id(&other_vpc_req), "InternetGatewayId": other.physical_id}),
        ),
    )
    .await;
    delete_twice_then_gone(&attachments, &req, &[]).await;
    delete_twice_then_gone(&gateways, &igw_req, &[]).await;
    gateways.delete(&other_req).await.expect("delete igw2");
    vpcs.delete(&vpc_req).await.expect("delete vpc");
    vpcs.delete(&other_vpc_req).await.expect("delete vpc 2");
}

#[tokio::test]
async fn sdk_route_table_route_and_association_round_trip() {
    let stack = unique_name("net");
    let (vpcs, vpc_req) = make_vpc(&stack, "10.50.0.0/16").await;
    let vpc = id(&vpc_req);
    let ec2 = client().await;
    let tables = RouteTableProvider::new(ec2.clone());
    let mut table_req = request_in(
        &stack,
        "Table",
        "AWS::EC2::RouteTable",
        json!({"VpcId": vpc, "Tags": [{"Key": "Name", "Value": "public"}]}),
    );
    let table = create_twice(&tables, &mut table_req).await;
    let rtb = table.physical_id.clone();
    assert!(rtb.starts_with("rtb-"), "{rtb}");
    assert_eq!(table.attributes.get("RouteTableId"), Some(&json!(rtb)));
    update_to(
        &tables,
        &mut table_req,
        json!({"VpcId": vpc, "Tags": [{"Key": "Name", "Value": "public-2"}]}),
    )
    .await;
    not_updatable(
        &tables,
        &update_of(&table_req, json!({"VpcId": "vpc-other"})),
    )
    .await;

    // Two gateways to route to (not attached: the emulator does not require it).
    let gateways = InternetGatewayProvider::new(ec2.clone());
    let mut igws = Vec::new();
    for logical_id in ["IgwA", "IgwB"] {
        let mut r = request_in(&stack, logical_id, "AWS::EC2::InternetGateway", json!({}));
        r.physical_id = Some(gateways.create(&r).await.expect("igw").physical_id);
        igws.push(r);
    }
    let (igw_a, igw_b) = (id(&igws[0]), id(&igws[1]));

    let routes = RouteProvider::new(ec2.clone());
    let mut route_req = request_in(
        &stack,
        "Default",
        "AWS::EC2::Route",
        json!({"RouteTableId": rtb, "DestinationCidrBlock": "0.0.0.0/0", "GatewayId": igw_a}),
    );
    let route = create_twice(&routes, &mut route_req).await;
    assert_eq!(route.physical_id, format!("{rtb}|0.0.0.0/0"));
    assert_eq!(route.attributes.get("CidrBlock"), Some(&json!("0.0.0.0/0")));
    // The same destination with another target is someone else's route.
    let taken = request_in(
        "other",
        "Default",
        "AWS::EC2::Route",
        json!({"RouteTableId": rtb, "DestinationCidrBlock": "0.0.0.0/0", "GatewayId": igw_b}),
    );
    let err = routes.create(&taken).await.expect_err("taken");
    assert_eq!(err.name(), "Stackflow.AlreadyExists", "{err}");
    // A new target is ReplaceRoute; a new destination a new route.
    update_to(
        &routes,
        &mut route_req,
        json!({"RouteTableId": rtb, "DestinationCidrBlock": "0.0.0.0/0", "GatewayId": igw_b}),
    )
    .await;
    not_updatable(
        &routes,
        &update_of(
            &route_req,
            json!({"RouteTableId": rtb, "DestinationCidrBlock": "10.9.0.0/16", "GatewayId": igw_b}),
        ),
    )
    .await;

    association_round_trip(&stack, &vpc, &rtb).await;

    delete_twice_then_gone(&routes, &route_req, &[]).await;
    for r in &igws {
        gateways.delete(r).await.expect("delete igw");
    }
    delete_twice_then_gone(&tables, &table_req, &[]).await;
    vpcs.delete(&vpc_req).await.expect("delete vpc");
}

/// The association of a new subnet with the table `rtb` (the emulator's Cloud Control
/// cannot serve this type at all).
async fn association_round_trip(stack: &str, vpc: &str, rtb: &str) {
    let ec2 = client().await;
    let subnets = SubnetProvider::new(ec2.clone());
    let mut subnet_req = request_in(
        stack,
        "Subnet",
        "AWS::EC2::Subnet",
        json!({"VpcId": vpc, "CidrBlock": "10.50.1.0/24", "AvailabilityZone": format!("{REGION}b")}),
    );
    subnet_req.physical_id = Some(
        subnets
            .create(&subnet_req)
            .await
            .expect("subnet")
            .physical_id,
    );
    let subnet = id(&subnet_req);

    let associations = SubnetRouteTableAssociationProvider::new(ec2.clone());
    let mut req = request_in(
        stack,
        "Assoc",
        "AWS::EC2::SubnetRouteTableAssociation",
        json!({"SubnetId": subnet, "RouteTableId": rtb}),
    );
    let created = create_twice(&associations, &mut req).await;
    assert!(
        created.physical_id.starts_with("rtbassoc-"),
        "{}",
        created.physical_id
    );
    assert_eq!(
        created.attributes.get("Id"),
        Some(&json!(created.physical_id))
    );
    // The subnet associated with another table is not this create's to take.
    let tables = RouteTableProvider::new(ec2.clone());
    let mut other_table = request_in(
        stack,
        "Other",
        "AWS::EC2::RouteTable",
        json!({"VpcId": vpc}),
    );
    other_table.physical_id = Some(
        tables
            .create(&other_table)
            .await
            .expect("table")
            .physical_id,
    );
    let taken = request_in(
        "other",
        "Assoc",
        "AWS::EC2::SubnetRouteTableAssociation",
        json!({"SubnetId": subnet, "RouteTableId": id(&other_table)}),
    );
    let err = associations.create(&taken).await.expect_err("taken");
    assert_eq!(err.name(), "Stackflow.AlreadyExists", "{err}");
    // Nothing changes in place; an update with the same properties is a no-op.
    update_to(
        &associations,
        &mut req,
        json!({"SubnetId": subnet, "RouteTableId": rtb}),
    )
    .await;
    not_updatable(
        &associations,
        &update_of(
            &req,
            json!({"SubnetId": subnet, "RouteTableId": id(&other_table)}),
        ),
    )
    .await;
    delete_twice_then_gone(&associations, &req, &[]).await;
    tables.delete(&other_table).await.expect("delete table");
    subnets.delete(&subnet_req).await.expect("delete subnet");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdk_vpc_deploys_again_without_changes_and_destroys() {
    let config = Emulator::shared().await.sdk_config().await;
    let store = Arc::new(SqliteStore::open_in_memory().expect("a store"));
    let engine = engine(&config, store);
    let stack = corpus_template("vpc-two-az-nat", "VpcTwoAzNatStack");
    let name = unique_name("vpc");
    let first = deploy_stack(engine.clone(), input(&stack, &name), DeployOptions::new())
        .await
        .expect("deploy");
    assert_eq!(first.status, StackStatus::Succeeded, "{}", summary(&first));
    assert_eq!(first.created, 26, "{}", summary(&first));
    // Made by the SDK providers (Cloud Control would not put the stack's marks on them).
    assert_eq!(marked_vpcs(&name).await, 1);
    // Right after the deploy, every resource reads back as recorded: no drift.
    let drift = drift_stack(engine.clone(), &name, &[], DriftMode::Check)
        .await
        .expect("drift");
    let drifted: Vec<String> = drift
        .resources
        .iter()
        .filter(|r| r.status != DriftStatus::InSync)
        .map(|r| {
            format!(
                "{} {} {:?}: {:?} {:?}",
                r.logical_id, r.resource_type, r.status, r.differences, r.reason
            )
        })
        .collect();
    assert_eq!(drift.resources.len(), 26);
    assert!(drifted.is_empty(), "{drifted:#?}");
    let again = deploy_stack(engine.clone(), input(&stack, &name), DeployOptions::new())
        .await
        .expect("deploy again");
    assert_eq!(again.status, StackStatus::NoChanges, "{}", summary(&again));
    assert_eq!(
        (again.created, again.updated, again.replaced, again.deleted),
        (0, 0, 0, 0),
        "{}",
        summary(&again)
    );
    let destroyed = destroy_stack(engine, &name, DeployOptions::new())
        .await
        .expect("destroy");
    assert_eq!(
        destroyed.status,
        StackStatus::Succeeded,
        "{}",
        summary(&destroyed)
    );
    assert_eq!(destroyed.deleted, 26, "{}", summary(&destroyed));
    assert_eq!(marked_vpcs(&name).await, 0);
}

/// How many VPCs carry the mark of the stack `stack`.
async fn marked_vpcs(stack: &str) -> usize {
    let filter = aws_sdk_ec2::types::Filter::builder()
        .name("tag:stackflow:stack")
        .values(stack)
        .build();
    let out = client()
        .await
        .describe_vpcs()
        .filters(filter)
        .send()
        .await
        .expect("DescribeVpcs");
    out.vpcs().len()
}
