//! `AWS::EC2::VPC` through the EC2 API.
//!
//! The physical id (`Ref`) is the VPC id; the attributes are `CidrBlock`,
//! `CidrBlockAssociations` (the association ids of its IPv4 blocks), `DefaultNetworkAcl`,
//! `DefaultSecurityGroup`, `Ipv6CidrBlocks` and `VpcId`.
//!
//! Handled: `CidrBlock`, `InstanceTenancy`, `EnableDnsSupport`, `EnableDnsHostnames`,
//! `Tags`. IPAM pools and the rest go to Cloud Control. `CidrBlock` and `InstanceTenancy`
//! cannot change in place ([`ProviderError::NotUpdatable`]: the engine replaces the VPC);
//! the DNS settings change with `ModifyVpcAttribute` (one attribute per call) and the tags
//! with `CreateTags`/`DeleteTags`.
//!
//! `CreateVpc` takes no client token: the VPC is tagged at create with the stack's marks
//! (see [`super::common`]) and a create first looks for a VPC carrying them
//! (`DescribeVpcs` with `tag:` filters), which a replayed create then adopts.
//!
//! `read_current_state` reports `CidrBlock`, `Tags`, and `InstanceTenancy`,
//! `EnableDnsSupport` and `EnableDnsHostnames` only when they differ from AWS's defaults
//! (`default`, `true`, `false`).
//!
//! Emulator (fakecloud 0.51.0): answers a new VPC `available` at once, so the wait for
//! `pending` to end is not exercised there.

use std::time::Duration;

use aws_sdk_ec2::Client;
use aws_sdk_ec2::types::{
    AttributeBooleanValue, Filter, ResourceType, Tenancy, Vpc, VpcAttributeName, VpcState,
};
use serde_json::{Value, json};

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
    "CidrBlock",
    "InstanceTenancy",
    "EnableDnsSupport",
    "EnableDnsHostnames",
    "Tags",
];

/// How long a new VPC may stay `pending`.
const AVAILABLE_WITHIN: Duration = Duration::from_secs(300);

sdk_provider! {
    /// The `AWS::EC2::VPC` provider.
    VpcProvider(Client), "AWS::EC2::VPC", HANDLED
}

/// A VPC and the ids of its default network ACL and security group.
#[derive(Debug, Clone)]
pub struct FoundVpc {
    vpc: Vpc,
    default_acl: Option<String>,
    default_group: Option<String>,
}

fn filter(name: &str, value: &str) -> Filter {
    Filter::builder().name(name).values(value).build()
}

/// The `Fn::GetAtt` values of a found VPC.
fn attributes_of(found: &FoundVpc) -> Attributes {
    let vpc = &found.vpc;
    let mut a = Attributes::new();
    a.insert("CidrBlock".into(), json!(vpc.cidr_block()));
    let associations: Vec<&str> = vpc
        .cidr_block_association_set()
        .iter()
        .filter_map(|c| c.association_id())
        .collect();
    a.insert("CidrBlockAssociations".into(), json!(associations));
    if let Some(acl) = &found.default_acl {
        a.insert("DefaultNetworkAcl".into(), json!(acl));
    }
    if let Some(group) = &found.default_group {
        a.insert("DefaultSecurityGroup".into(), json!(group));
    }
    let ipv6: Vec<&str> = vpc
        .ipv6_cidr_block_association_set()
        .iter()
        .filter_map(|c| c.ipv6_cidr_block())
        .collect();
    a.insert("Ipv6CidrBlocks".into(), json!(ipv6));
    a.insert("VpcId".into(), json!(vpc.vpc_id()));
    a
}

/// The state of a VPC in the template's shape, given its DNS settings.
fn state_of(vpc: &Vpc, dns_support: bool, dns_hostnames: bool) -> Properties {
    let mut state = Properties::new();
    if let Some(cidr) = vpc.cidr_block() {
        state.insert("CidrBlock".into(), json!(cidr));
    }
    match vpc.instance_tenancy() {
        Some(t) if t.as_str() != "default" => {
            state.insert("InstanceTenancy".into(), json!(t.as_str()));
        }
        _ => {}
    }
    if !dns_support {
        state.insert("EnableDnsSupport".into(), json!(false));
    }
    if dns_hostnames {
        state.insert("EnableDnsHostnames".into(), json!(true));
    }
    insert_tags(&mut state, template_tags(vpc.tags()));
    state
}

impl VpcProvider {
    fn tags(&self) -> Ec2Tags<'_> {
        Ec2Tags {
            client: &self.client,
            retry: &self.retry,
        }
    }

    /// `DescribeVpcs` of one id: `None` when it does not exist.
    async fn describe(&self, id: &str) -> Result<Option<Vpc>, ProviderError> {
        let got = ec2_call(&self.retry, "DescribeVpcs", || {
            self.client.describe_vpcs().vpc_ids(id).send()
        })
        .await;
        match got {
            Ok(out) => Ok(out.vpcs().first().cloned()),
            Err(ProviderError::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The VPC an earlier attempt of this create made (it carries the request's marks).
    async fn made_before(&self, request: &ResourceRequest) -> Result<Option<Vpc>, ProviderError> {
        let filters = mark_filters(request);
        let out = ec2_call(&self.retry, "DescribeVpcs", || {
            self.client
                .describe_vpcs()
                .set_filters(Some(filters.clone()))
                .send()
        })
        .await?;
        Ok(out
            .vpcs()
            .iter()
            .find(|v| carries_marks(v.tags(), request))
            .cloned())
    }

    /// The VPC's default network ACL and security group ids, asked at once.
    async fn defaults(&self, id: &str) -> Result<(Option<String>, Option<String>), ProviderError> {
        let acls = ec2_call(&self.retry, "DescribeNetworkAcls", || {
            self.client
                .describe_network_acls()
                .filters(filter("vpc-id", id))
                .filters(filter("default", "true"))
                .send()
        });
        let groups = ec2_call(&self.retry, "DescribeSecurityGroups", || {
            self.client
                .describe_security_groups()
                .filters(filter("vpc-id", id))
                .filters(filter("group-name", "default"))
                .send()
        });
        let (acls, groups) = tokio::join!(acls, groups);
        let acl = acls?
            .network_acls()
            .iter()
            .find(|a| a.is_default() == Some(true))
            .and_then(|a| a.network_acl_id().map(str::to_string));
        let group = groups?
            .security_groups()
            .iter()
            .find(|g| g.group_name() == Some("default"))
            .and_then(|g| g.group_id().map(str::to_string));
        Ok((acl, group))
    }

    /// The VPC `vpc` (as just described or made) with its defaults, once it is available.
    async fn available(&self, vpc: Vpc) -> Result<FoundVpc, ProviderError> {
        let id = vpc.vpc_id().unwrap_or_default().to_string();
        let vpc = if vpc.state() == Some(&VpcState::Available) {
            vpc
        } else {
            wait_until(&format!("VPC {id} available"), AVAILABLE_WITHIN, || async {
                let vpc = self
                    .describe(&id)
                    .await?
                    .ok_or_else(|| vanished(TYPE, &id))?;
                Ok((vpc.state() == Some(&VpcState::Available)).then_some(vpc))
            })
            .await?
        };
        let (default_acl, default_group) = self.defaults(&id).await?;
        Ok(FoundVpc {
            vpc,
            default_acl,
            default_group,
        })
    }

    /// One DNS attribute of the VPC.
    async fn dns_attribute(&self, id: &str, name: VpcAttributeName) -> Result<bool, ProviderError> {
        let out = ec2_call(&self.retry, "DescribeVpcAttribute", || {
            self.client
                .describe_vpc_attribute()
                .vpc_id(id)
                .attribute(name.clone())
                .send()
        })
        .await?;
        let value = match name {
            VpcAttributeName::EnableDnsHostnames => out.enable_dns_hostnames(),
            _ => out.enable_dns_support(),
        };
        Ok(value
            .and_then(AttributeBooleanValue::value)
            .unwrap_or(false))
    }

    /// Sets one DNS attribute of the VPC.
    async fn set_dns(&self, id: &str, hostnames: bool, value: bool) -> Result<(), ProviderError> {
        let flag = AttributeBooleanValue::builder().value(value).build();
        ec2_call(&self.retry, "ModifyVpcAttribute", || {
            let r = self.client.modify_vpc_attribute().vpc_id(id);
            let r = if hostnames {
                r.enable_dns_hostnames(flag.clone())
            } else {
                r.enable_dns_support(flag.clone())
            };
            r.send()
        })
        .await
        .map(drop)
    }

    /// Brings the DNS settings from `old` (support, hostnames) to `new`: support is turned
    /// on before hostnames, and hostnames off before support (AWS refuses hostnames
    /// without support).
    async fn sync_dns(
        &self,
        id: &str,
        old: (bool, bool),
        new: (bool, bool),
    ) -> Result<(), ProviderError> {
        let support = (old.0 != new.0).then_some(new.0);
        let hostnames = (old.1 != new.1).then_some(new.1);
        if support == Some(true) {
            self.set_dns(id, false, true).await?;
        }
        if let Some(value) = hostnames {
            self.set_dns(id, true, value).await?;
        }
        if support == Some(false) {
            self.set_dns(id, false, false).await?;
        }
        Ok(())
    }
}

/// The DNS settings (support, hostnames) a template asks for, AWS's defaults filled in.
fn dns_of(props: &Properties) -> Result<(bool, bool), ProviderError> {
    Ok((
        bool_of(TYPE, props, "EnableDnsSupport")?.unwrap_or(true),
        bool_of(TYPE, props, "EnableDnsHostnames")?.unwrap_or(false),
    ))
}

/// Refuses a change of a property that needs a new VPC.
fn refuse_replacement(
    request: &ResourceRequest,
    previous: &Properties,
) -> Result<(), ProviderError> {
    for key in ["CidrBlock", "InstanceTenancy"] {
        let old = previous.get(key).filter(|v| !v.is_null());
        let new = request.properties.get(key).filter(|v| !v.is_null());
        let default = (key == "InstanceTenancy").then(|| json!("default"));
        let or_default = |v: Option<&Value>| v.cloned().or_else(|| default.clone());
        if or_default(old) != or_default(new) {
            return Err(ProviderError::NotUpdatable(format!(
                "{}: {key} cannot change in place",
                context(request, TYPE)
            )));
        }
    }
    Ok(())
}

impl SdkResource for VpcProvider {
    type Found = FoundVpc;
    const TYPE: &'static str = TYPE;
    const NAME_PROPERTY: &'static str = "VpcId";
    const NOUN: &'static str = "VPC";

    async fn create(&self, request: &ResourceRequest) -> Result<Created, ProviderError> {
        let props = &request.properties;
        let cidr =
            string_of(props, "CidrBlock").ok_or_else(|| invalid(TYPE, "CidrBlock is required"))?;
        let dns = dns_of(props)?;
        let spec = tag_specification(TYPE, ResourceType::Vpc, request)?;
        let tenancy = string_of(props, "InstanceTenancy").map(|t| Tenancy::from(t.as_str()));
        let vpc = match self.made_before(request).await? {
            Some(vpc) => vpc,
            None => ec2_call(&self.retry, "CreateVpc", || {
                self.client
                    .create_vpc()
                    .cidr_block(&cidr)
                    .set_instance_tenancy(tenancy.clone())
                    .tag_specifications(spec.clone())
                    .send()
            })
            .await
            .map_err(|e| e.context(context(request, TYPE)))?
            .vpc()
            .cloned()
            .ok_or_else(|| ProviderError::Other("CreateVpc answered no VPC".into()))?,
        };
        let found = self.available(vpc).await?;
        let id = found.vpc.vpc_id().unwrap_or_default().to_string();
        // A new VPC has AWS's defaults; one adopted from an earlier attempt may have had
        // some of its settings made already, which setting again does not change.
        self.sync_dns(&id, (true, false), dns).await?;
        Ok(Created {
            sensitive: false,
            attributes: attributes_of(&found),
            physical_id: id,
        })
    }

    async fn update(&self, request: &ResourceRequest) -> Result<Updated, ProviderError> {
        let id = request.require_physical_id()?;
        let previous = request.previous_properties.clone().unwrap_or_default();
        refuse_replacement(request, &previous)?;
        self.sync_dns(id, dns_of(&previous)?, dns_of(&request.properties)?)
            .await?;
        self.tags()
            .sync_tags(id, &tag_map(&previous), &tag_map(&request.properties))
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
        ec2_call(&self.retry, "DeleteVpc", || {
            self.client.delete_vpc().vpc_id(id).send()
        })
        .await
        .map(drop)
    }

    /// Only an explicit id: a VPC has no name a template gives.
    async fn import_id(&self, request: &ResourceRequest) -> Result<Option<String>, ProviderError> {
        Ok(request.physical_id.clone())
    }

    async fn find(&self, id: &str) -> Result<Option<FoundVpc>, ProviderError> {
        let Some(vpc) = self.describe(id).await? else {
            return Ok(None);
        };
        let (default_acl, default_group) = self.defaults(id).await?;
        Ok(Some(FoundVpc {
            vpc,
            default_acl,
            default_group,
        }))
    }

    fn attributes(&self, _id: &str, found: &FoundVpc) -> Attributes {
        attributes_of(found)
    }

    /// `DescribeVpcs`, then both DNS attributes at once (no default ACL or group lookup:
    /// the state does not hold them).
    async fn read(&self, request: &ResourceRequest) -> Result<CurrentState, ProviderError> {
        let id = request.require_physical_id()?;
        match self.describe(id).await? {
            Some(vpc) => self.state_of_vpc(id, &vpc).await,
            None => Ok(CurrentState::NotFound),
        }
    }

    async fn state(&self, id: &str, found: FoundVpc) -> Result<CurrentState, ProviderError> {
        self.state_of_vpc(id, &found.vpc).await
    }
}

impl VpcProvider {
    async fn state_of_vpc(&self, id: &str, vpc: &Vpc) -> Result<CurrentState, ProviderError> {
        let (support, hostnames) = tokio::join!(
            self.dns_attribute(id, VpcAttributeName::EnableDnsSupport),
            self.dns_attribute(id, VpcAttributeName::EnableDnsHostnames),
        );
        Ok(CurrentState::Found(state_of(vpc, support?, hostnames?)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sdk::common::testing::props;

    #[test]
    fn defaults_are_left_out_and_replacements_refused() {
        let vpc = Vpc::builder()
            .cidr_block("10.0.0.0/16")
            .instance_tenancy(Tenancy::Default)
            .build();
        let state = state_of(&vpc, true, true);
        assert_eq!(
            Value::Object(state),
            json!({"CidrBlock": "10.0.0.0/16", "EnableDnsHostnames": true})
        );
        assert_eq!(dns_of(&props(json!({}))), Ok((true, false)));
        let mut r =
            ResourceRequest::new("s", "V", TYPE, props(json!({"CidrBlock": "10.0.0.0/16"})));
        let previous = props(json!({"CidrBlock": "10.0.0.0/16", "InstanceTenancy": "default"}));
        assert!(refuse_replacement(&r, &previous).is_ok());
        r.properties
            .insert("CidrBlock".into(), json!("10.1.0.0/16"));
        assert!(matches!(
            refuse_replacement(&r, &previous),
            Err(ProviderError::NotUpdatable(_))
        ));
    }
}
