//! The `ec2-instance-userdata` case through the CLI on the emulator (issue 17): an EC2
//! instance with user data in a one-subnet VPC, in the shape the CDK synthesizes for
//! `ec2.Instance` (`tests/fixtures/ec2-instance-userdata`; the given corpus has no such
//! case, so the template was written for these tests). The VPC, subnet, route table, its
//! association, route, internet gateway and its attachment, the security group and the
//! instance profile go through SDK providers; the instance itself through Cloud Control.
//!
//! Deployed in full: every resource exists in EC2 and IAM as the template says (the
//! instance runs in the subnet with the group and the profile, and its user data is the
//! template's script with the stack name and region substituted), a second deploy
//! changes nothing, and the destroy leaves nothing behind.

use std::path::Path;

use base64::Engine as _;
use serde_json::Value;
use stackflow_tests::drift_cli::{Session, root};
use stackflow_tests::{Emulator, unique_name};

fn template() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/ec2-instance-userdata/Ec2InstanceUserDataStack.template.json")
        .display()
        .to_string()
}

/// The physical id of `logical_id` in the state `stackflow state show --json` printed.
fn physical(state: &Value, logical_id: &str) -> String {
    state["resources"][logical_id]["physicalId"]
        .as_str()
        .unwrap_or_else(|| panic!("{logical_id} in {state:#}"))
        .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_instance_with_user_data_deploys_in_full_and_is_destroyed() {
    let emulator = Emulator::shared().await;
    let session = Session::new(
        emulator,
        &root(env!("CARGO_TARGET_TMPDIR"), "ec2"),
        "instance",
    );
    let stack = format!("Ec2Ud{}", unique_name("s").replace('_', "-"));
    session.run(&["deploy", &template(), "--stack", &stack], 0);
    let state = session.state(&stack);
    // Every resource but the instance went through an SDK provider.
    for (id, r) in state["resources"].as_object().expect("resources") {
        let want = if id == "InstanceC1063A87" {
            "cloud-control"
        } else {
            "sdk"
        };
        assert_eq!(r["provider"], want, "{id}: {r:#}");
    }
    let config = emulator.sdk_config().await;
    let ec2 = aws_sdk_ec2::Client::new(&config);

    let instance_id = physical(&state, "InstanceC1063A87");
    let found = ec2
        .describe_instances()
        .instance_ids(&instance_id)
        .send()
        .await
        .expect("describe instances");
    let instance = found
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .next()
        .expect("the instance exists")
        .clone();
    let subnet = physical(&state, "VpcPublicSubnet1Subnet5C2D37C4");
    // A VPC security group's physical id is its group id.
    let group = physical(&state, "InstanceInstanceSecurityGroupF0E2D5BE");
    assert_eq!(instance.subnet_id(), Some(subnet.as_str()));
    assert!(
        instance
            .security_groups()
            .iter()
            .any(|g| g.group_id() == Some(group.as_str())),
        "{instance:?}"
    );
    assert_eq!(
        instance.image_id().map(|i| i.starts_with("ami-")),
        Some(true)
    );

    let user_data = ec2
        .describe_instance_attribute()
        .instance_id(&instance_id)
        .attribute(aws_sdk_ec2::types::InstanceAttributeName::UserData)
        .send()
        .await
        .expect("user data");
    let encoded = user_data
        .user_data()
        .and_then(|u| u.value())
        .expect("the instance has user data");
    let script = String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .expect("base64"),
    )
    .expect("utf-8");
    assert!(script.starts_with("#!/bin/bash\n"), "{script}");
    assert!(
        script.contains(&format!("echo stack={stack} region=us-east-1 >")),
        "{script}"
    );

    // The network the instance sits in.
    let vpc = physical(&state, "Vpc8378EB38");
    let subnets = ec2
        .describe_subnets()
        .subnet_ids(&subnet)
        .send()
        .await
        .expect("subnet");
    assert_eq!(subnets.subnets()[0].vpc_id(), Some(vpc.as_str()));
    let table = physical(&state, "VpcPublicSubnet1RouteTable6C95E38E");
    let tables = ec2
        .describe_route_tables()
        .route_table_ids(&table)
        .send()
        .await
        .expect("route table");
    let rt = &tables.route_tables()[0];
    assert!(
        rt.associations()
            .iter()
            .any(|a| a.subnet_id() == Some(subnet.as_str())),
        "{rt:?}"
    );
    let igw = physical(&state, "VpcIGWD7BA715C");
    assert!(
        rt.routes().iter().any(|r| {
            r.destination_cidr_block() == Some("0.0.0.0/0") && r.gateway_id() == Some(igw.as_str())
        }),
        "{rt:?}"
    );

    // A second deploy changes nothing.
    let again = session.run(&["deploy", &template(), "--stack", &stack], 0);
    assert!(again.stdout.contains("no changes"), "{}", again.describe());

    session.run(&["destroy", "--stack", &stack], 0);
    let gone = ec2.describe_vpcs().vpc_ids(&vpc).send().await;
    let left = gone.map(|o| o.vpcs().len()).unwrap_or(0);
    assert_eq!(left, 0, "the VPC is deleted");
    let instances = ec2
        .describe_instances()
        .instance_ids(&instance_id)
        .send()
        .await
        .map(|o| {
            o.reservations()
                .iter()
                .flat_map(|r| r.instances())
                .filter(|i| {
                    i.state().and_then(|s| s.name()).map(|n| n.as_str()) != Some("terminated")
                })
                .count()
        })
        .unwrap_or(0);
    assert_eq!(instances, 0, "the instance is terminated");
}
