//! `AWS::EC2::EIP` through the EC2 API.
//!
//! The physical id (what `Ref` returns) is the public IP address; the attributes are
//! `AllocationId` and `PublicIp`.
//!
//! Handled: `Domain` (only `vpc`: EC2-Classic is gone), `NetworkBorderGroup`,
//! `PublicIpv4Pool` and `Tags`. Only the tags change in place (`CreateTags`/`DeleteTags` on
//! the allocation); the other three need a new address ([`ProviderError::NotUpdatable`]).
//! `InstanceId`, `Address`, `IpamPoolId` and `TransferAddress` go to Cloud Control.
//!
//! `AllocateAddress` takes no client token: the address is tagged with the stack's marks
//! in the call itself, and a create first looks for an address carrying this create's
//! marks (an earlier attempt's), which it adopts.
//!
//! A delete disassociates the address when it is associated (an instance or interface;
//! a NAT gateway's address is freed by deleting the gateway, which the engine does first),
//! then releases it; `InvalidIPAddress.InUse` (an association still being torn down) is
//! retried.
//!
//! `read_current_state` reports `Domain` (always `vpc`), `NetworkBorderGroup` when it is
//! not the client's region, `PublicIpv4Pool` when it is not `amazon`, and `Tags` (the
//! marks left out).
//!
//! Emulator (fakecloud 0.51.0): `DescribeAddresses` of an unknown public IP answers an
//! empty list instead of `InvalidAddress.NotFound`; both are "not found" here.

use aws_sdk_ec2::Client;
use aws_sdk_ec2::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_ec2::types::{Address, DomainType, ResourceType};
use serde_json::json;

use super::common::{
    Ec2Tags, carries_marks, ec2_call, ec2_error, mark_filters, tag_specification, template_tags,
};
use crate::error::{HttpResponse, ProviderError};
use crate::provider::{Attributes, Created, CurrentState, Properties, ResourceRequest, Updated};
use crate::sdk::common::{
    SdkResource, Tagging, call_classified, context, insert_tags, invalid, missing_as_none,
    sdk_provider, string_of, tag_map,
};

const HANDLED: &[&str] = &["Domain", "NetworkBorderGroup", "PublicIpv4Pool", "Tags"];

/// The properties that need a new address when they change.
const CREATE_ONLY: &[&str] = &["Domain", "NetworkBorderGroup", "PublicIpv4Pool"];

sdk_provider! {
    /// The `AWS::EC2::EIP` provider.
    EipProvider(Client), "AWS::EC2::EIP", HANDLED
}

fn attributes(address: &Address) -> Attributes {
    let mut a = Attributes::new();
    a.insert(
        "AllocationId".into(),
        json!(address.allocation_id().unwrap_or_default()),
    );
    a.insert(
        "PublicIp".into(),
        json!(address.public_ip().unwrap_or_default()),
    );
    a
}

/// [`ec2_error`], and an address still in use (being disassociated) is transient.
fn release_error<E>(what: &str, error: SdkError<E, HttpResponse>) -> ProviderError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let in_use = error.code() == Some("InvalidIPAddress.InUse");
    let classified = ec2_error(what, error);
    if in_use {
        ProviderError::Transient(classified.message().into())
    } else {
        classified
    }
}

/// The address's state in the template's shape; `region` is the client's.
fn state_of(address: &Address, region: Option<&str>) -> Properties {
    let mut state = Properties::new();
    let domain = address.domain().map_or("vpc", |d| d.as_str());
    state.insert("Domain".into(), json!(domain));
    if let Some(group) = address
        .network_border_group()
        .filter(|g| Some(*g) != region)
    {
        state.insert("NetworkBorderGroup".into(), json!(group));
    }
    if let Some(pool) = address.public_ipv4_pool().filter(|p| *p != "amazon") {
        state.insert("PublicIpv4Pool".into(), json!(pool));
    }
    insert_tags(&mut state, template_tags(address.tags()));
    state
}

impl EipProvider {
    /// The address an earlier attempt of this create made, found by its marks.
    async fn made_before(
        &self,
        request: &ResourceRequest,
    ) -> Result<Option<Address>, ProviderError> {
        let filters = mark_filters(request);
        let out = ec2_call(&self.retry, "DescribeAddresses", || {
            self.client
                .describe_addresses()
                .set_filters(Some(filters.clone()))
                .send()
        })
        .await?;
        Ok(out
            .addresses()
            .iter()
            .find(|a| carries_marks(a.tags(), request))
            .cloned())
    }

    async fn allocate(&self, request: &ResourceRequest) -> Result<Address, ProviderError> {
        let props = &request.properties;
        let spec = tag_specification(TYPE, ResourceType::ElasticIp, request)?;
        let out = ec2_call(&self.retry, "AllocateAddress", || {
            self.client
                .allocate_address()
                .domain(DomainType::Vpc)
                .set_network_border_group(string_of(props, "NetworkBorderGroup"))
                .set_public_ipv4_pool(string_of(props, "PublicIpv4Pool"))
                .tag_specifications(spec.clone())
                .send()
        })
        .await?;
        match (out.allocation_id(), out.public_ip()) {
            (Some(allocation), Some(ip)) => Ok(Address::builder()
                .allocation_id(allocation)
                .public_ip(ip)
                .build()),
            _ => Err(ProviderError::Other(
                "AllocateAddress answered no AllocationId or PublicIp".into(),
            )),
        }
    }
}

impl SdkResource for EipProvider {
    type Found = Address;
    const TYPE: &'static str = TYPE;
    const NAME_PROPERTY: &'static str = "PublicIp";
    const NOUN: &'static str = "Elastic IP address";

    async fn create(&self, request: &ResourceRequest) -> Result<Created, ProviderError> {
        if let Some(domain) = string_of(&request.properties, "Domain")
            && domain != "vpc"
        {
            return Err(invalid(TYPE, &format!("Domain {domain}: only vpc exists")));
        }
        let address = match self.made_before(request).await? {
            Some(found) => Ok(found),
            None => self.allocate(request).await,
        }
        .map_err(|e| e.context(context(request, TYPE)))?;
        Ok(Created {
            sensitive: false,
            attributes: attributes(&address),
            physical_id: address.public_ip().unwrap_or_default().to_string(),
        })
    }

    async fn update(&self, request: &ResourceRequest) -> Result<Updated, ProviderError> {
        let ip = request.require_physical_id()?;
        let previous = request.previous_properties.clone().unwrap_or_default();
        let props = &request.properties;
        if let Some(key) = CREATE_ONLY
            .iter()
            .find(|k| previous.get(**k) != props.get(**k))
        {
            return Err(ProviderError::NotUpdatable(format!(
                "{}: {key} cannot change in place",
                context(request, TYPE)
            )));
        }
        let address = self
            .find(ip)
            .await?
            .ok_or_else(|| ProviderError::NotFound(format!("{TYPE} {ip}")))?;
        let tags = Ec2Tags {
            client: &self.client,
            retry: &self.retry,
        };
        let allocation = address.allocation_id().unwrap_or_default();
        tags.sync_tags(allocation, &tag_map(&previous), &tag_map(props))
            .await
            .map_err(|e| e.context(context(request, TYPE)))?;
        Ok(Updated {
            sensitive: false,
            physical_id: ip.to_string(),
            attributes: attributes(&address),
            replaced: false,
        })
    }

    async fn remove(&self, ip: &str) -> Result<(), ProviderError> {
        let Some(address) = self.find(ip).await? else {
            return Err(ProviderError::NotFound(format!("{TYPE} {ip}")));
        };
        if let Some(association) = address.association_id() {
            let gone = ec2_call(&self.retry, "DisassociateAddress", || {
                self.client
                    .disassociate_address()
                    .association_id(association)
                    .send()
            })
            .await;
            missing_as_none(gone)?;
        }
        let allocation = address.allocation_id().unwrap_or_default();
        call_classified(&self.retry, "ReleaseAddress", release_error, || {
            self.client
                .release_address()
                .allocation_id(allocation)
                .set_network_border_group(address.network_border_group().map(str::to_string))
                .send()
        })
        .await
        .map(drop)
    }

    /// `DescribeAddresses` of the public IP `ip`.
    async fn find(&self, ip: &str) -> Result<Option<Address>, ProviderError> {
        let out = ec2_call(&self.retry, "DescribeAddresses", || {
            self.client.describe_addresses().public_ips(ip).send()
        })
        .await;
        Ok(missing_as_none(out)?.and_then(|o| {
            o.addresses()
                .iter()
                .find(|a| a.public_ip() == Some(ip))
                .cloned()
        }))
    }

    fn attributes(&self, _ip: &str, found: &Address) -> Attributes {
        attributes(found)
    }

    async fn state(&self, _ip: &str, address: Address) -> Result<CurrentState, ProviderError> {
        let region = self
            .client
            .config()
            .region()
            .map(|r| r.as_ref().to_string());
        Ok(CurrentState::Found(state_of(&address, region.as_deref())))
    }
}

#[cfg(test)]
mod tests {
    use aws_sdk_ec2::types::Tag;
    use serde_json::Value;

    use super::*;

    #[test]
    fn the_state_leaves_defaults_and_marks_out() {
        let address = Address::builder()
            .allocation_id("eipalloc-1")
            .public_ip("52.0.0.1")
            .domain(DomainType::Vpc)
            .network_border_group("us-east-1")
            .public_ipv4_pool("amazon")
            .tags(Tag::builder().key("Name").value("a").build())
            .tags(Tag::builder().key("stackflow:stack").value("s").build())
            .build();
        assert_eq!(
            Value::Object(state_of(&address, Some("us-east-1"))),
            json!({"Domain": "vpc", "Tags": [{"Key": "Name", "Value": "a"}]})
        );
        let a = attributes(&address);
        assert_eq!(a["AllocationId"], json!("eipalloc-1"));
        assert_eq!(a["PublicIp"], json!("52.0.0.1"));
    }
}
