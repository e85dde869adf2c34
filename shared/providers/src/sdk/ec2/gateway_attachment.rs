//! `AWS::EC2::VPCGatewayAttachment` (internet gateways) through the EC2 API.
//!
//! The physical id (`Ref`) is `IGW|<vpc id>`, as CloudFormation
//! (and Cloud Control, whose identifier is the attachment type and the VPC id) names it; it
//! has no attributes. Handled: `VpcId` (a new VPC needs a new attachment) and
//! `InternetGatewayId` (changed in place: the old gateway is detached, the new one
//! attached); an attachment of a VPN gateway (`VpnGatewayId`) goes to Cloud Control.
//! A create first looks at the gateway attached to the VPC: the template's gateway is what
//! an earlier attempt of this create attached, and is done; another gateway is refused
//! ([`ProviderError::AlreadyExists`]): a VPC holds one, and it is not this stack's.
//! `read_current_state` reports `VpcId` and `InternetGatewayId`; a delete detaches the
//! gateway attached to the VPC (looked up, since the id does not name it).
//!
//! Emulator (fakecloud 0.51.0): `DescribeInternetGateways` ignores its filters (every
//! gateway is answered; the attachments are checked here), `AttachInternetGateway` accepts
//! a second attachment (AWS refuses it: hence the look-up first), and
//! `DetachInternetGateway` of a gateway not attached succeeds.

use aws_sdk_ec2::Client;
use aws_sdk_ec2::types::Filter;
use serde_json::json;

use super::common::ec2_call;
use crate::error::ProviderError;
use crate::provider::{Attributes, Created, CurrentState, Properties, ResourceRequest, Updated};
use crate::sdk::common::{SdkResource, context, invalid, sdk_provider, string_of};

sdk_provider! {
    /// The `AWS::EC2::VPCGatewayAttachment` provider (internet gateways).
    VpcGatewayAttachmentProvider(Client),
    "AWS::EC2::VPCGatewayAttachment",
    &["VpcId", "InternetGatewayId"]
}

/// The attachment type in an attachment's physical id.
const IGW: &str = "IGW";

/// The VPC id in an attachment's physical id `IGW|vpc-...`.
fn vpc_of(id: &str) -> Result<&str, ProviderError> {
    match id.split_once('|') {
        Some((IGW, vpc)) if !vpc.is_empty() => Ok(vpc),
        _ => Err(ProviderError::InvalidRequest(format!(
            "{}: {id} is not an internet gateway attachment id (IGW|<vpc id>)",
            TYPE
        ))),
    }
}

impl VpcGatewayAttachmentProvider {
    /// The internet gateway attached to `vpc`, if any.
    async fn attached_to(&self, vpc: &str) -> Result<Option<String>, ProviderError> {
        let filter = Filter::builder()
            .name("attachment.vpc-id")
            .values(vpc)
            .build();
        let out = ec2_call(&self.retry, "DescribeInternetGateways", || {
            self.client
                .describe_internet_gateways()
                .filters(filter.clone())
                .send()
        })
        .await?;
        Ok(out
            .internet_gateways()
            .iter()
            .find(|g| g.attachments().iter().any(|a| a.vpc_id() == Some(vpc)))
            .and_then(|g| g.internet_gateway_id().map(str::to_string)))
    }

    /// Attaches `gateway` to `vpc`, first looking at what the VPC has: the same gateway
    /// (attached by an earlier attempt) is done, another one is refused.
    async fn attach(&self, gateway: &str, vpc: &str) -> Result<(), ProviderError> {
        match self.attached_to(vpc).await? {
            Some(g) if g == gateway => return Ok(()),
            Some(g) => {
                return Err(ProviderError::AlreadyExists(format!(
                    "{vpc} has the internet gateway {g} attached already, and this stack did \
                     not attach it"
                )));
            }
            None => {}
        }
        self.attach_unchecked(gateway, vpc).await
    }

    async fn attach_unchecked(&self, gateway: &str, vpc: &str) -> Result<(), ProviderError> {
        ec2_call(&self.retry, "AttachInternetGateway", || {
            self.client
                .attach_internet_gateway()
                .internet_gateway_id(gateway)
                .vpc_id(vpc)
                .send()
        })
        .await
        .map(drop)
    }

    async fn detach(&self, gateway: &str, vpc: &str) -> Result<(), ProviderError> {
        ec2_call(&self.retry, "DetachInternetGateway", || {
            self.client
                .detach_internet_gateway()
                .internet_gateway_id(gateway)
                .vpc_id(vpc)
                .send()
        })
        .await
        .map(drop)
    }
}

/// The template's `VpcId` and `InternetGatewayId`.
fn attachment_props(props: &Properties) -> Result<(String, String), ProviderError> {
    let required = |key: &str| {
        string_of(props, key).ok_or_else(|| invalid(TYPE, &format!("{key} is required")))
    };
    Ok((required("VpcId")?, required("InternetGatewayId")?))
}

impl SdkResource for VpcGatewayAttachmentProvider {
    /// The id of the attached internet gateway.
    type Found = String;
    const TYPE: &'static str = TYPE;
    const NAME_PROPERTY: &'static str = "VpcId";
    const NOUN: &'static str = "gateway attachment";

    async fn create(&self, request: &ResourceRequest) -> Result<Created, ProviderError> {
        let (vpc, gateway) = attachment_props(&request.properties)?;
        self.attach(&gateway, &vpc)
            .await
            .map_err(|e| e.context(context(request, TYPE)))?;
        Ok(Created {
            sensitive: false,
            attributes: Attributes::new(),
            physical_id: format!("{IGW}|{vpc}"),
        })
    }

    async fn update(&self, request: &ResourceRequest) -> Result<Updated, ProviderError> {
        let id = request.require_physical_id()?;
        let vpc = vpc_of(id)?;
        let (new_vpc, gateway) = attachment_props(&request.properties)?;
        if new_vpc != vpc {
            return Err(ProviderError::NotUpdatable(format!(
                "{}: VpcId cannot change in place",
                context(request, TYPE)
            )));
        }
        match self.attached_to(vpc).await? {
            Some(current) if current == gateway => {}
            Some(current) => {
                self.detach(&current, vpc).await?;
                self.attach_unchecked(&gateway, vpc).await?;
            }
            None => self.attach_unchecked(&gateway, vpc).await?,
        }
        Ok(Updated {
            sensitive: false,
            physical_id: id.to_string(),
            attributes: Attributes::new(),
            replaced: false,
        })
    }

    /// Detaches the gateway attached to the VPC; none attached (or no VPC) is done.
    async fn remove(&self, id: &str) -> Result<(), ProviderError> {
        let vpc = vpc_of(id)?;
        match self.attached_to(vpc).await? {
            Some(gateway) => self.detach(&gateway, vpc).await,
            None => Err(ProviderError::NotFound(format!(
                "no gateway attached to {vpc}"
            ))),
        }
    }

    /// Only an explicit id: the id is made of the VPC's.
    async fn import_id(&self, request: &ResourceRequest) -> Result<Option<String>, ProviderError> {
        Ok(request.physical_id.clone())
    }

    async fn find(&self, id: &str) -> Result<Option<String>, ProviderError> {
        self.attached_to(vpc_of(id)?).await
    }

    fn attributes(&self, _id: &str, _found: &String) -> Attributes {
        Attributes::new()
    }

    async fn state(&self, id: &str, gateway: String) -> Result<CurrentState, ProviderError> {
        let mut state = Properties::new();
        state.insert("VpcId".into(), json!(vpc_of(id)?));
        state.insert("InternetGatewayId".into(), json!(gateway));
        Ok(CurrentState::Found(state))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attachment_ids_name_the_vpc() {
        assert_eq!(vpc_of("IGW|vpc-1"), Ok("vpc-1"));
        assert!(vpc_of("vpc-1").is_err());
        assert!(vpc_of("VGW|vpc-1").is_err());
    }
}
