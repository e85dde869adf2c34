//! `AWS::EC2::RouteTable` through the EC2 API.
//!
//! The physical id (`Ref`) is the route table id; the one attribute is `RouteTableId`.
//! Handled: `VpcId` (a new VPC needs a new table: [`ProviderError::NotUpdatable`]) and
//! `Tags` (changed in place). The routes are `AWS::EC2::Route` resources of their own.
//!
//! A create sends a `ClientToken` made of the request ([`client_token`]) and tags the
//! table with the stack's marks; it first looks for a table carrying them, which a replayed
//! create adopts (see [`super::common`]). `read_current_state` reports `VpcId` and `Tags`.
//!
//! Emulator (fakecloud 0.51.0): answers a fresh client token on every `CreateRouteTable`
//! (it does not keep them), so only the marks make a replayed create safe there.

use aws_sdk_ec2::Client;
use aws_sdk_ec2::types::{ResourceType, RouteTable};
use serde_json::json;

use super::common::{
    Ec2Tags, carries_marks, client_token, ec2_call, mark_filters, tag_specification, template_tags,
};
use crate::error::ProviderError;
use crate::provider::{Attributes, Created, CurrentState, Properties, ResourceRequest, Updated};
use crate::sdk::common::{
    SdkResource, Tagging, context, insert_tags, invalid, sdk_provider, string_of, tag_map,
};

sdk_provider! {
    /// The `AWS::EC2::RouteTable` provider.
    RouteTableProvider(Client), "AWS::EC2::RouteTable", &["VpcId", "Tags"]
}

fn attributes_of(id: &str) -> Attributes {
    let mut a = Attributes::new();
    a.insert("RouteTableId".into(), json!(id));
    a
}

/// `DescribeRouteTables` of one id (shared with the route and association providers):
/// `None` when it does not exist.
pub(crate) async fn describe_table(
    client: &Client,
    retry: &crate::retry::RetryPolicy,
    id: &str,
) -> Result<Option<RouteTable>, ProviderError> {
    let got = ec2_call(retry, "DescribeRouteTables", || {
        client.describe_route_tables().route_table_ids(id).send()
    })
    .await;
    match got {
        Ok(out) => Ok(out
            .route_tables()
            .iter()
            .find(|t| t.route_table_id() == Some(id))
            .cloned()),
        Err(ProviderError::NotFound(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

impl RouteTableProvider {
    /// The table an earlier attempt of this create made (it carries the request's marks).
    async fn made_before(
        &self,
        request: &ResourceRequest,
    ) -> Result<Option<RouteTable>, ProviderError> {
        let filters = mark_filters(request);
        let out = ec2_call(&self.retry, "DescribeRouteTables", || {
            self.client
                .describe_route_tables()
                .set_filters(Some(filters.clone()))
                .send()
        })
        .await?;
        Ok(out
            .route_tables()
            .iter()
            .find(|t| carries_marks(t.tags(), request))
            .cloned())
    }
}

impl SdkResource for RouteTableProvider {
    type Found = RouteTable;
    const TYPE: &'static str = TYPE;
    const NAME_PROPERTY: &'static str = "RouteTableId";
    const NOUN: &'static str = "route table";

    async fn create(&self, request: &ResourceRequest) -> Result<Created, ProviderError> {
        let vpc = string_of(&request.properties, "VpcId")
            .ok_or_else(|| invalid(TYPE, "VpcId is required"))?;
        let spec = tag_specification(TYPE, ResourceType::RouteTable, request)?;
        let token = client_token(request);
        let table = match self.made_before(request).await? {
            Some(table) => table,
            None => ec2_call(&self.retry, "CreateRouteTable", || {
                self.client
                    .create_route_table()
                    .vpc_id(&vpc)
                    .client_token(&token)
                    .tag_specifications(spec.clone())
                    .send()
            })
            .await
            .map_err(|e| e.context(context(request, TYPE)))?
            .route_table()
            .cloned()
            .ok_or_else(|| ProviderError::Other("CreateRouteTable answered no table".into()))?,
        };
        let id = table.route_table_id().unwrap_or_default().to_string();
        Ok(Created {
            sensitive: false,
            attributes: attributes_of(&id),
            physical_id: id,
        })
    }

    async fn update(&self, request: &ResourceRequest) -> Result<Updated, ProviderError> {
        let id = request.require_physical_id()?;
        let previous = request.previous_properties.clone().unwrap_or_default();
        if previous.get("VpcId") != request.properties.get("VpcId") {
            return Err(ProviderError::NotUpdatable(format!(
                "{}: VpcId cannot change in place",
                context(request, TYPE)
            )));
        }
        Ec2Tags {
            client: &self.client,
            retry: &self.retry,
        }
        .sync_tags(id, &tag_map(&previous), &tag_map(&request.properties))
        .await?;
        Ok(Updated {
            sensitive: false,
            physical_id: id.to_string(),
            attributes: attributes_of(id),
            replaced: false,
        })
    }

    async fn remove(&self, id: &str) -> Result<(), ProviderError> {
        ec2_call(&self.retry, "DeleteRouteTable", || {
            self.client.delete_route_table().route_table_id(id).send()
        })
        .await
        .map(drop)
    }

    /// Only an explicit id: a route table has no name a template gives.
    async fn import_id(&self, request: &ResourceRequest) -> Result<Option<String>, ProviderError> {
        Ok(request.physical_id.clone())
    }

    async fn find(&self, id: &str) -> Result<Option<RouteTable>, ProviderError> {
        describe_table(&self.client, &self.retry, id).await
    }

    fn attributes(&self, id: &str, _found: &RouteTable) -> Attributes {
        attributes_of(id)
    }

    async fn state(&self, _id: &str, table: RouteTable) -> Result<CurrentState, ProviderError> {
        let mut state = Properties::new();
        if let Some(vpc) = table.vpc_id() {
            state.insert("VpcId".into(), json!(vpc));
        }
        insert_tags(&mut state, template_tags(table.tags()));
        Ok(CurrentState::Found(state))
    }
}
