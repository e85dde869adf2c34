//! `AWS::EC2::Subnet` through the EC2 API.
//!
//! The physical id (`Ref`) is the subnet id; the attributes are `AvailabilityZone`,
//! `AvailabilityZoneId`, `CidrBlock`, `Ipv6CidrBlocks`, `NetworkAclAssociationId` (the
//! subnet's association with its network ACL), `SubnetId` and `VpcId`.
//!
//! Handled: `VpcId`, `CidrBlock`, `AvailabilityZone`, `AvailabilityZoneId`,
//! `MapPublicIpOnLaunch`, `Tags` (what CDK's subnets set); IPv6, IPAM and Outposts settings
//! go to Cloud Control. All but `MapPublicIpOnLaunch` (`ModifySubnetAttribute`) and the tags
//! need a new subnet ([`ProviderError::NotUpdatable`]).
//!
//! `CreateSubnet` takes no client token: the subnet is tagged at create with the stack's
//! marks and a create first looks for a subnet carrying them, which a replayed create
//! adopts (see [`super::common`]).
//!
//! `read_current_state` reports `VpcId`, `CidrBlock`, `AvailabilityZone`, `Tags`, and
//! `MapPublicIpOnLaunch` only when on (AWS's default is off). `AvailabilityZoneId` is not
//! reported: a template that names its zone by id shows `AvailabilityZone` as AWS names it.
//!
//! Emulator (fakecloud 0.51.0): a new subnet is `available` at once, so the wait for
//! `pending` to end is not exercised there.

use std::time::Duration;

use aws_sdk_ec2::Client;
use aws_sdk_ec2::types::{AttributeBooleanValue, Filter, ResourceType, Subnet, SubnetState};
use serde_json::json;

use super::common::{
    Ec2Tags, bool_of, carries_marks, ec2_call, mark_filters, tag_specification, template_tags,
    wait_until,
};
use crate::error::ProviderError;
use crate::provider::{Attributes, Created, CurrentState, Properties, ResourceRequest, Updated};
use crate::sdk::common::{
    SdkResource, Tagging, context, insert_tags, invalid, sdk_provider, string_of, tag_map, vanished,
};

const HANDLED: &[&str] = &[
    "VpcId",
    "CidrBlock",
    "AvailabilityZone",
    "AvailabilityZoneId",
    "MapPublicIpOnLaunch",
    "Tags",
];

/// The properties that need a new subnet.
const CREATE_ONLY: &[&str] = &[
    "VpcId",
    "CidrBlock",
    "AvailabilityZone",
    "AvailabilityZoneId",
];

/// How long a new subnet may stay `pending`.
const AVAILABLE_WITHIN: Duration = Duration::from_secs(300);

sdk_provider! {
    /// The `AWS::EC2::Subnet` provider.
    SubnetProvider(Client), "AWS::EC2::Subnet", HANDLED
}

/// A subnet and the id of its network ACL association.
#[derive(Debug, Clone)]
pub struct FoundSubnet {
    subnet: Subnet,
    acl_association: Option<String>,
}

/// The `Fn::GetAtt` values of a found subnet.
fn attributes_of(found: &FoundSubnet) -> Attributes {
    let s = &found.subnet;
    let mut a = Attributes::new();
    a.insert("AvailabilityZone".into(), json!(s.availability_zone()));
    a.insert("AvailabilityZoneId".into(), json!(s.availability_zone_id()));
    a.insert("CidrBlock".into(), json!(s.cidr_block()));
    let ipv6: Vec<&str> = s
        .ipv6_cidr_block_association_set()
        .iter()
        .filter_map(|c| c.ipv6_cidr_block())
        .collect();
    a.insert("Ipv6CidrBlocks".into(), json!(ipv6));
    if let Some(association) = &found.acl_association {
        a.insert("NetworkAclAssociationId".into(), json!(association));
    }
    a.insert("SubnetId".into(), json!(s.subnet_id()));
    a.insert("VpcId".into(), json!(s.vpc_id()));
    a
}

/// The state of a subnet in the template's shape.
fn state_of(s: &Subnet) -> Properties {
    let mut state = Properties::new();
    for (key, value) in [
        ("VpcId", s.vpc_id()),
        ("CidrBlock", s.cidr_block()),
        ("AvailabilityZone", s.availability_zone()),
    ] {
        if let Some(value) = value {
            state.insert(key.into(), json!(value));
        }
    }
    if s.map_public_ip_on_launch() == Some(true) {
        state.insert("MapPublicIpOnLaunch".into(), json!(true));
    }
    insert_tags(&mut state, template_tags(s.tags()));
    state
}

impl SubnetProvider {
    fn tags(&self) -> Ec2Tags<'_> {
        Ec2Tags {
            client: &self.client,
            retry: &self.retry,
        }
    }

    /// `DescribeSubnets` of one id: `None` when it does not exist.
    async fn describe(&self, id: &str) -> Result<Option<Subnet>, ProviderError> {
        let got = ec2_call(&self.retry, "DescribeSubnets", || {
            self.client.describe_subnets().subnet_ids(id).send()
        })
        .await;
        match got {
            Ok(out) => Ok(out.subnets().first().cloned()),
            Err(ProviderError::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The subnet an earlier attempt of this create made (it carries the request's marks).
    async fn made_before(
        &self,
        request: &ResourceRequest,
    ) -> Result<Option<Subnet>, ProviderError> {
        let filters = mark_filters(request);
        let out = ec2_call(&self.retry, "DescribeSubnets", || {
            self.client
                .describe_subnets()
                .set_filters(Some(filters.clone()))
                .send()
        })
        .await?;
        Ok(out
            .subnets()
            .iter()
            .find(|s| carries_marks(s.tags(), request))
            .cloned())
    }

    /// The id of the subnet's association with its network ACL.
    async fn acl_association(&self, id: &str) -> Result<Option<String>, ProviderError> {
        let out = ec2_call(&self.retry, "DescribeNetworkAcls", || {
            self.client
                .describe_network_acls()
                .filters(
                    Filter::builder()
                        .name("association.subnet-id")
                        .values(id)
                        .build(),
                )
                .send()
        })
        .await?;
        Ok(out
            .network_acls()
            .iter()
            .flat_map(|acl| acl.associations())
            .find(|a| a.subnet_id() == Some(id))
            .and_then(|a| a.network_acl_association_id().map(str::to_string)))
    }

    /// The subnet `subnet` (as just made or adopted) once it is available.
    async fn available(&self, subnet: Subnet) -> Result<Subnet, ProviderError> {
        if subnet.state() == Some(&SubnetState::Available) {
            return Ok(subnet);
        }
        let id = subnet.subnet_id().unwrap_or_default().to_string();
        wait_until(
            &format!("subnet {id} available"),
            AVAILABLE_WITHIN,
            || async {
                let s = self
                    .describe(&id)
                    .await?
                    .ok_or_else(|| vanished(TYPE, &id))?;
                Ok((s.state() == Some(&SubnetState::Available)).then_some(s))
            },
        )
        .await
    }

    /// Turns `MapPublicIpOnLaunch` on or off.
    async fn set_public_ip(&self, id: &str, on: bool) -> Result<(), ProviderError> {
        let flag = AttributeBooleanValue::builder().value(on).build();
        ec2_call(&self.retry, "ModifySubnetAttribute", || {
            self.client
                .modify_subnet_attribute()
                .subnet_id(id)
                .map_public_ip_on_launch(flag.clone())
                .send()
        })
        .await
        .map(drop)
    }

    /// Makes a new subnet from the template.
    async fn create_new(&self, request: &ResourceRequest) -> Result<Subnet, ProviderError> {
        let props = &request.properties;
        let vpc = string_of(props, "VpcId").ok_or_else(|| invalid(TYPE, "VpcId is required"))?;
        let cidr = string_of(props, "CidrBlock");
        let zone = string_of(props, "AvailabilityZone");
        let zone_id = string_of(props, "AvailabilityZoneId");
        let spec = tag_specification(TYPE, ResourceType::Subnet, request)?;
        ec2_call(&self.retry, "CreateSubnet", || {
            self.client
                .create_subnet()
                .vpc_id(&vpc)
                .set_cidr_block(cidr.clone())
                .set_availability_zone(zone.clone())
                .set_availability_zone_id(zone_id.clone())
                .tag_specifications(spec.clone())
                .send()
        })
        .await
        .map_err(|e| e.context(context(request, TYPE)))?
        .subnet()
        .cloned()
        .ok_or_else(|| ProviderError::Other("CreateSubnet answered no subnet".into()))
    }
}

impl SdkResource for SubnetProvider {
    type Found = FoundSubnet;
    const TYPE: &'static str = TYPE;
    const NAME_PROPERTY: &'static str = "SubnetId";
    const NOUN: &'static str = "subnet";

    async fn create(&self, request: &ResourceRequest) -> Result<Created, ProviderError> {
        let public = bool_of(TYPE, &request.properties, "MapPublicIpOnLaunch")?.unwrap_or(false);
        let subnet = match self.made_before(request).await? {
            Some(subnet) => subnet,
            None => self.create_new(request).await?,
        };
        let mut subnet = self.available(subnet).await?;
        let id = subnet.subnet_id().unwrap_or_default().to_string();
        if subnet.map_public_ip_on_launch() != Some(public) {
            self.set_public_ip(&id, public).await?;
            subnet.map_public_ip_on_launch = Some(public);
        }
        let found = FoundSubnet {
            acl_association: self.acl_association(&id).await?,
            subnet,
        };
        Ok(Created {
            sensitive: false,
            attributes: attributes_of(&found),
            physical_id: id,
        })
    }

    async fn update(&self, request: &ResourceRequest) -> Result<Updated, ProviderError> {
        let id = request.require_physical_id()?;
        let previous = request.previous_properties.clone().unwrap_or_default();
        let props = &request.properties;
        for key in CREATE_ONLY {
            if previous.get(*key) != props.get(*key) {
                return Err(ProviderError::NotUpdatable(format!(
                    "{}: {key} cannot change in place",
                    context(request, TYPE)
                )));
            }
        }
        let public = bool_of(TYPE, props, "MapPublicIpOnLaunch")?.unwrap_or(false);
        if bool_of(TYPE, &previous, "MapPublicIpOnLaunch")?.unwrap_or(false) != public {
            self.set_public_ip(id, public).await?;
        }
        self.tags()
            .sync_tags(id, &tag_map(&previous), &tag_map(props))
            .await?;
        let found = self.find(id).await?.ok_or_else(|| vanished(TYPE, id))?;
        Ok(Updated {
            sensitive: false,
            physical_id: id.to_string(),
            attributes: attributes_of(&found),
            replaced: false,
        })
    }

    async fn remove(&self, id: &str) -> Result<(), ProviderError> {
        ec2_call(&self.retry, "DeleteSubnet", || {
            self.client.delete_subnet().subnet_id(id).send()
        })
        .await
        .map(drop)
    }

    /// Only an explicit id: a subnet has no name a template gives.
    async fn import_id(&self, request: &ResourceRequest) -> Result<Option<String>, ProviderError> {
        Ok(request.physical_id.clone())
    }

    async fn find(&self, id: &str) -> Result<Option<FoundSubnet>, ProviderError> {
        let (subnet, association) = tokio::join!(self.describe(id), self.acl_association(id));
        let association = association?;
        Ok(subnet?.map(|subnet| FoundSubnet {
            subnet,
            acl_association: association,
        }))
    }

    fn attributes(&self, _id: &str, found: &FoundSubnet) -> Attributes {
        attributes_of(found)
    }

    /// `DescribeSubnets` alone: the state needs no ACL association.
    async fn read(&self, request: &ResourceRequest) -> Result<CurrentState, ProviderError> {
        let id = request.require_physical_id()?;
        Ok(match self.describe(id).await? {
            Some(subnet) => CurrentState::Found(state_of(&subnet)),
            None => CurrentState::NotFound,
        })
    }

    async fn state(&self, _id: &str, found: FoundSubnet) -> Result<CurrentState, ProviderError> {
        Ok(CurrentState::Found(state_of(&found.subnet)))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    #[test]
    fn state_leaves_the_default_out() {
        let s = Subnet::builder()
            .vpc_id("vpc-1")
            .cidr_block("10.0.1.0/24")
            .availability_zone("us-east-1a")
            .map_public_ip_on_launch(false)
            .build();
        assert_eq!(
            Value::Object(state_of(&s)),
            json!({"VpcId": "vpc-1", "CidrBlock": "10.0.1.0/24", "AvailabilityZone": "us-east-1a"})
        );
    }
}
