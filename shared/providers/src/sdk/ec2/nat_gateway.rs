//! `AWS::EC2::NatGateway` through the EC2 API.
//!
//! The physical id (what `Ref` returns) is the NAT gateway id (`nat-...`); the attribute is
//! `NatGatewayId`, the same id.
//!
//! Handled: `SubnetId`, `AllocationId`, `ConnectivityType` and `Tags`. Only the tags change
//! in place; the others need a new gateway ([`ProviderError::NotUpdatable`]).
//! `PrivateIpAddress`, the secondary addresses and `MaxDrainDurationSeconds` go to Cloud
//! Control.
//!
//! A create sends a `ClientToken` (a hash of the stack, the logical id and the request's
//! token) and tags the gateway with the stack's marks; it first looks for a gateway
//! carrying this create's marks that is not being deleted (an earlier attempt's) and adopts
//! it. It then waits until the gateway is `available` (`failed` is an error with AWS's
//! reason). A delete waits until the gateway is `deleted` (or no longer listed), so that
//! its address and subnet can go next.
//!
//! `read_current_state` reports `SubnetId`, `AllocationId` (of the primary address),
//! `ConnectivityType` when it is not `public`, and `Tags` (the marks left out).
//!
//! Emulator (fakecloud 0.51.0): the gateway is `available` at once; the `ClientToken` is
//! not honoured (a second create with the same token makes a second gateway), so the
//! look-up by marks is what keeps a replayed create from making two; describes and deletes
//! of unknown ids answer an empty list / success instead of `NatGatewayNotFound`.

use std::time::Duration;

use aws_sdk_ec2::Client;
use aws_sdk_ec2::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_ec2::types::{ConnectivityType, NatGateway, NatGatewayState, ResourceType};
use serde_json::json;

use super::common::{
    Ec2Tags, carries_marks, client_token, ec2_error, mark_filters, tag_specification,
    template_tags, wait_until,
};
use crate::error::{HttpResponse, ProviderError};
use crate::provider::{Attributes, Created, CurrentState, Properties, ResourceRequest, Updated};
use crate::sdk::common::{
    SdkResource, Tagging, call_classified, context, insert_tags, invalid, missing_as_none,
    sdk_provider, string_of, tag_map,
};

const HANDLED: &[&str] = &["SubnetId", "AllocationId", "ConnectivityType", "Tags"];

/// The properties that need a new gateway when they change.
const CREATE_ONLY: &[&str] = &["SubnetId", "AllocationId", "ConnectivityType"];

/// How long a create waits for `available` and a delete for `deleted`.
const WAIT: Duration = Duration::from_secs(20 * 60);

sdk_provider! {
    /// The `AWS::EC2::NatGateway` provider.
    NatGatewayProvider(Client), "AWS::EC2::NatGateway", HANDLED
}

/// [`ec2_error`], and `NatGatewayNotFound` is [`ProviderError::NotFound`].
fn nat_error<E>(what: &str, error: SdkError<E, HttpResponse>) -> ProviderError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let missing = error.code() == Some("NatGatewayNotFound");
    let classified = ec2_error(what, error);
    if missing {
        ProviderError::NotFound(classified.message().into())
    } else {
        classified
    }
}

fn attributes(id: &str) -> Attributes {
    let mut a = Attributes::new();
    a.insert("NatGatewayId".into(), json!(id));
    a
}

/// True for a gateway that is gone or going.
fn is_going(gateway: &NatGateway) -> bool {
    matches!(
        gateway.state(),
        Some(NatGatewayState::Deleted | NatGatewayState::Deleting | NatGatewayState::Failed)
    )
}

/// The gateway's state in the template's shape.
fn state_of(gateway: &NatGateway) -> Properties {
    let mut state = Properties::new();
    if let Some(subnet) = gateway.subnet_id() {
        state.insert("SubnetId".into(), json!(subnet));
    }
    let addresses = gateway.nat_gateway_addresses();
    let primary = addresses
        .iter()
        .find(|a| a.is_primary() == Some(true))
        .or_else(|| addresses.first());
    if let Some(allocation) = primary.and_then(|a| a.allocation_id()) {
        state.insert("AllocationId".into(), json!(allocation));
    }
    if let Some(kind) = gateway
        .connectivity_type()
        .filter(|c| **c != ConnectivityType::Public)
    {
        state.insert("ConnectivityType".into(), json!(kind.as_str()));
    }
    insert_tags(&mut state, template_tags(gateway.tags()));
    state
}

impl NatGatewayProvider {
    /// The gateway an earlier attempt of this create made, found by its marks.
    async fn made_before(
        &self,
        request: &ResourceRequest,
    ) -> Result<Option<NatGateway>, ProviderError> {
        let filters = mark_filters(request);
        let out = call_classified(&self.retry, "DescribeNatGateways", nat_error, || {
            self.client
                .describe_nat_gateways()
                .set_filter(Some(filters.clone()))
                .send()
        })
        .await?;
        Ok(out
            .nat_gateways()
            .iter()
            .find(|g| carries_marks(g.tags(), request) && !is_going(g))
            .cloned())
    }

    async fn create_gateway(&self, request: &ResourceRequest) -> Result<String, ProviderError> {
        let props = &request.properties;
        let subnet =
            string_of(props, "SubnetId").ok_or_else(|| invalid(TYPE, "SubnetId is required"))?;
        let spec = tag_specification(TYPE, ResourceType::Natgateway, request)?;
        let token = client_token(request);
        let kind = string_of(props, "ConnectivityType").map(|c| ConnectivityType::from(c.as_str()));
        let out = call_classified(&self.retry, "CreateNatGateway", nat_error, || {
            self.client
                .create_nat_gateway()
                .subnet_id(&subnet)
                .set_allocation_id(string_of(props, "AllocationId"))
                .set_connectivity_type(kind.clone())
                .client_token(&token)
                .tag_specifications(spec.clone())
                .send()
        })
        .await?;
        out.nat_gateway()
            .and_then(|g| g.nat_gateway_id())
            .map(str::to_string)
            .ok_or_else(|| ProviderError::Other("CreateNatGateway answered no NatGatewayId".into()))
    }

    /// Waits until the gateway `id` is available; failed is an error.
    async fn settle(&self, id: &str) -> Result<(), ProviderError> {
        wait_until(&format!("{TYPE} {id} available"), WAIT, || async {
            let gateway = self.describe(id).await?;
            match gateway.as_ref().and_then(|g| g.state()) {
                Some(NatGatewayState::Available) => Ok(Some(())),
                Some(NatGatewayState::Failed) => Err(ProviderError::Other(format!(
                    "{TYPE} {id} failed: {}",
                    gateway
                        .as_ref()
                        .and_then(|g| g.failure_message())
                        .unwrap_or("no reason given")
                ))),
                Some(NatGatewayState::Deleted | NatGatewayState::Deleting) | None => Err(
                    ProviderError::NotFound(format!("{TYPE} {id} went away while made")),
                ),
                Some(_) => Ok(None),
            }
        })
        .await
    }

    /// `DescribeNatGateways` of `id`, whatever its state.
    async fn describe(&self, id: &str) -> Result<Option<NatGateway>, ProviderError> {
        let out = call_classified(&self.retry, "DescribeNatGateways", nat_error, || {
            self.client
                .describe_nat_gateways()
                .nat_gateway_ids(id)
                .send()
        })
        .await;
        Ok(missing_as_none(out)?.and_then(|o| {
            o.nat_gateways()
                .iter()
                .find(|g| g.nat_gateway_id() == Some(id))
                .cloned()
        }))
    }
}

impl SdkResource for NatGatewayProvider {
    type Found = NatGateway;
    const TYPE: &'static str = TYPE;
    const NAME_PROPERTY: &'static str = "NatGatewayId";
    const NOUN: &'static str = "NAT gateway";

    async fn create(&self, request: &ResourceRequest) -> Result<Created, ProviderError> {
        let ctx = || context(request, TYPE);
        let id = match self.made_before(request).await? {
            Some(found) => found.nat_gateway_id().unwrap_or_default().to_string(),
            None => self
                .create_gateway(request)
                .await
                .map_err(|e| e.context(ctx()))?,
        };
        self.settle(&id).await.map_err(|e| e.context(ctx()))?;
        Ok(Created {
            sensitive: false,
            attributes: attributes(&id),
            physical_id: id,
        })
    }

    async fn update(&self, request: &ResourceRequest) -> Result<Updated, ProviderError> {
        let id = request.require_physical_id()?;
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
        let tags = Ec2Tags {
            client: &self.client,
            retry: &self.retry,
        };
        tags.sync_tags(id, &tag_map(&previous), &tag_map(props))
            .await
            .map_err(|e| e.context(context(request, TYPE)))?;
        Ok(Updated {
            sensitive: false,
            physical_id: id.to_string(),
            attributes: attributes(id),
            replaced: false,
        })
    }

    /// `DeleteNatGateway`, then waits until the gateway is deleted.
    async fn remove(&self, id: &str) -> Result<(), ProviderError> {
        if self.find(id).await?.is_none() {
            return Err(ProviderError::NotFound(format!("{TYPE} {id}")));
        }
        call_classified(&self.retry, "DeleteNatGateway", nat_error, || {
            self.client.delete_nat_gateway().nat_gateway_id(id).send()
        })
        .await?;
        wait_until(&format!("{TYPE} {id} deleted"), WAIT, || async {
            let gateway = self.describe(id).await?;
            let deleted = gateway.as_ref().and_then(|g| g.state());
            Ok(matches!(deleted, None | Some(NatGatewayState::Deleted)).then_some(()))
        })
        .await
    }

    /// The gateway `id`, unless it is deleted or being deleted.
    async fn find(&self, id: &str) -> Result<Option<NatGateway>, ProviderError> {
        Ok(self.describe(id).await?.filter(|g| {
            !matches!(
                g.state(),
                Some(NatGatewayState::Deleted | NatGatewayState::Deleting)
            )
        }))
    }

    fn attributes(&self, id: &str, _found: &NatGateway) -> Attributes {
        attributes(id)
    }

    async fn state(&self, _id: &str, gateway: NatGateway) -> Result<CurrentState, ProviderError> {
        Ok(CurrentState::Found(state_of(&gateway)))
    }
}

#[cfg(test)]
mod tests {
    use aws_sdk_ec2::types::{NatGatewayAddress, Tag};
    use serde_json::Value;

    use super::*;

    #[test]
    fn the_state_reads_the_primary_address_and_leaves_defaults_out() {
        let gateway = NatGateway::builder()
            .nat_gateway_id("nat-1")
            .subnet_id("subnet-1")
            .state(NatGatewayState::Available)
            .connectivity_type(ConnectivityType::Public)
            .nat_gateway_addresses(
                NatGatewayAddress::builder()
                    .allocation_id("eipalloc-2")
                    .is_primary(false)
                    .build(),
            )
            .nat_gateway_addresses(
                NatGatewayAddress::builder()
                    .allocation_id("eipalloc-1")
                    .is_primary(true)
                    .build(),
            )
            .tags(Tag::builder().key("stackflow:token").value("x").build())
            .build();
        assert_eq!(
            Value::Object(state_of(&gateway)),
            json!({"SubnetId": "subnet-1", "AllocationId": "eipalloc-1"})
        );
        assert!(!is_going(&gateway));
        assert_eq!(attributes("nat-1")["NatGatewayId"], json!("nat-1"));
    }
}
