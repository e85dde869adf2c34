//! `AWS::EC2::InternetGateway` through the EC2 API.
//!
//! The physical id (`Ref`) is the gateway id; the one attribute is
//! `InternetGatewayId`. Handled: `Tags` (its only property), changed in place.
//! `CreateInternetGateway` takes no client token: the gateway is tagged at create with the
//! stack's marks and a create first looks for one carrying them, which a replayed create
//! adopts (see [`super::common`]). `read_current_state` reports `Tags`.
//!
//! Emulator (fakecloud 0.51.0): no quirk met.

use aws_sdk_ec2::Client;
use aws_sdk_ec2::types::{InternetGateway, ResourceType};
use serde_json::json;

use super::common::{
    Ec2Tags, carries_marks, ec2_call, mark_filters, tag_specification, template_tags,
};
use crate::error::ProviderError;
use crate::provider::{Attributes, Created, CurrentState, Properties, ResourceRequest, Updated};
use crate::sdk::common::{SdkResource, Tagging, context, insert_tags, sdk_provider, tag_map};

sdk_provider! {
    /// The `AWS::EC2::InternetGateway` provider.
    InternetGatewayProvider(Client), "AWS::EC2::InternetGateway", &["Tags"]
}

impl InternetGatewayProvider {
    /// `DescribeInternetGateways` of one id: `None` when it does not exist.
    async fn describe(&self, id: &str) -> Result<Option<InternetGateway>, ProviderError> {
        let got = ec2_call(&self.retry, "DescribeInternetGateways", || {
            self.client
                .describe_internet_gateways()
                .internet_gateway_ids(id)
                .send()
        })
        .await;
        match got {
            Ok(out) => Ok(out.internet_gateways().first().cloned()),
            Err(ProviderError::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The gateway an earlier attempt of this create made (it carries the request's marks).
    async fn made_before(
        &self,
        request: &ResourceRequest,
    ) -> Result<Option<InternetGateway>, ProviderError> {
        let filters = mark_filters(request);
        let out = ec2_call(&self.retry, "DescribeInternetGateways", || {
            self.client
                .describe_internet_gateways()
                .set_filters(Some(filters.clone()))
                .send()
        })
        .await?;
        Ok(out
            .internet_gateways()
            .iter()
            .find(|g| carries_marks(g.tags(), request))
            .cloned())
    }
}

fn gateway_attributes(id: &str) -> Attributes {
    let mut a = Attributes::new();
    a.insert("InternetGatewayId".into(), json!(id));
    a
}

impl SdkResource for InternetGatewayProvider {
    type Found = InternetGateway;
    const TYPE: &'static str = TYPE;
    const NAME_PROPERTY: &'static str = "InternetGatewayId";
    const NOUN: &'static str = "internet gateway";

    async fn create(&self, request: &ResourceRequest) -> Result<Created, ProviderError> {
        let spec = tag_specification(TYPE, ResourceType::InternetGateway, request)?;
        let gateway = match self.made_before(request).await? {
            Some(gateway) => gateway,
            None => ec2_call(&self.retry, "CreateInternetGateway", || {
                self.client
                    .create_internet_gateway()
                    .tag_specifications(spec.clone())
                    .send()
            })
            .await
            .map_err(|e| e.context(context(request, TYPE)))?
            .internet_gateway()
            .cloned()
            .ok_or_else(|| ProviderError::Other("CreateInternetGateway answered none".into()))?,
        };
        let id = gateway
            .internet_gateway_id()
            .unwrap_or_default()
            .to_string();
        Ok(Created {
            sensitive: false,
            attributes: gateway_attributes(&id),
            physical_id: id,
        })
    }

    async fn update(&self, request: &ResourceRequest) -> Result<Updated, ProviderError> {
        let id = request.require_physical_id()?;
        let previous = request.previous_properties.clone().unwrap_or_default();
        Ec2Tags {
            client: &self.client,
            retry: &self.retry,
        }
        .sync_tags(id, &tag_map(&previous), &tag_map(&request.properties))
        .await?;
        Ok(Updated {
            sensitive: false,
            physical_id: id.to_string(),
            attributes: gateway_attributes(id),
            replaced: false,
        })
    }

    async fn remove(&self, id: &str) -> Result<(), ProviderError> {
        ec2_call(&self.retry, "DeleteInternetGateway", || {
            self.client
                .delete_internet_gateway()
                .internet_gateway_id(id)
                .send()
        })
        .await
        .map(drop)
    }

    /// Only an explicit id: a gateway has no name a template gives.
    async fn import_id(&self, request: &ResourceRequest) -> Result<Option<String>, ProviderError> {
        Ok(request.physical_id.clone())
    }

    async fn find(&self, id: &str) -> Result<Option<InternetGateway>, ProviderError> {
        self.describe(id).await
    }

    fn attributes(&self, id: &str, _found: &InternetGateway) -> Attributes {
        gateway_attributes(id)
    }

    async fn state(
        &self,
        _id: &str,
        found: InternetGateway,
    ) -> Result<CurrentState, ProviderError> {
        let mut state = Properties::new();
        insert_tags(&mut state, template_tags(found.tags()));
        Ok(CurrentState::Found(state))
    }
}
