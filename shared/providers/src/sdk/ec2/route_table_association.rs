//! `AWS::EC2::SubnetRouteTableAssociation` through the EC2 API.
//!
//! The physical id (`Ref`) is the association id (`rtbassoc-...`); the one attribute is
//! `Id`, the same. Handled: `SubnetId` and `RouteTableId`, both needing a new association
//! ([`ProviderError::NotUpdatable`]), as CloudFormation has it.
//!
//! An association has no tags and `AssociateRouteTable` no client token. A create first
//! looks at the subnet's explicit association (`DescribeRouteTables` by
//! `association.subnet-id`): one with the table the template names is what an earlier
//! attempt of this create made, and is adopted; one with another table is someone else's,
//! and the create fails ([`ProviderError::AlreadyExists`]: a subnet has one table).
//! `read_current_state` reports `SubnetId` and `RouteTableId`.
//!
//! Emulator (fakecloud 0.51.0): its Cloud Control cannot serve this type at all, hence this
//! provider. `AssociateRouteTable` there accepts a second association of the same subnet
//! (AWS refuses it: `Resource.AlreadyAssociated`), which is why the look-up comes first
//! rather than after a refusal; `DisassociateRouteTable` of a missing association succeeds
//! (AWS answers `InvalidAssociationID.NotFound`, which is success too).

use aws_sdk_ec2::Client;
use aws_sdk_ec2::types::{Filter, RouteTableAssociation};
use serde_json::json;

use super::common::ec2_call;
use crate::error::ProviderError;
use crate::provider::{Attributes, Created, CurrentState, Properties, ResourceRequest, Updated};
use crate::sdk::common::id_attributes as attributes_of;
use crate::sdk::common::{SdkResource, context, invalid, sdk_provider, string_of};

sdk_provider! {
    /// The `AWS::EC2::SubnetRouteTableAssociation` provider.
    SubnetRouteTableAssociationProvider(Client),
    "AWS::EC2::SubnetRouteTableAssociation",
    &["SubnetId", "RouteTableId"]
}

impl SubnetRouteTableAssociationProvider {
    /// The explicit (not main) associations whose `filter` = `value`.
    async fn associations(
        &self,
        filter: &str,
        value: &str,
    ) -> Result<Vec<RouteTableAssociation>, ProviderError> {
        let f = Filter::builder().name(filter).values(value).build();
        let out = ec2_call(&self.retry, "DescribeRouteTables", || {
            self.client
                .describe_route_tables()
                .filters(f.clone())
                .send()
        })
        .await?;
        Ok(out
            .route_tables()
            .iter()
            .flat_map(|t| t.associations())
            .filter(|a| a.main() != Some(true))
            .cloned()
            .collect())
    }

    /// The subnet's explicit association, if any.
    async fn of_subnet(
        &self,
        subnet: &str,
    ) -> Result<Option<RouteTableAssociation>, ProviderError> {
        Ok(self
            .associations("association.subnet-id", subnet)
            .await?
            .into_iter()
            .find(|a| a.subnet_id() == Some(subnet)))
    }
}

impl SdkResource for SubnetRouteTableAssociationProvider {
    type Found = RouteTableAssociation;
    const TYPE: &'static str = TYPE;
    const NAME_PROPERTY: &'static str = "SubnetId";
    const NOUN: &'static str = "route table association";

    async fn create(&self, request: &ResourceRequest) -> Result<Created, ProviderError> {
        let props = &request.properties;
        let required = |key: &str| {
            string_of(props, key).ok_or_else(|| invalid(TYPE, &format!("{key} is required")))
        };
        let (subnet, table) = (required("SubnetId")?, required("RouteTableId")?);
        let id = match self.of_subnet(&subnet).await? {
            Some(a) if a.route_table_id() == Some(table.as_str()) => a
                .route_table_association_id()
                .unwrap_or_default()
                .to_string(),
            Some(a) => {
                return Err(ProviderError::AlreadyExists(format!(
                    "{}: subnet {subnet} is associated with {} already, and this stack did \
                     not make that association",
                    context(request, TYPE),
                    a.route_table_id().unwrap_or_default()
                )));
            }
            None => ec2_call(&self.retry, "AssociateRouteTable", || {
                self.client
                    .associate_route_table()
                    .subnet_id(&subnet)
                    .route_table_id(&table)
                    .send()
            })
            .await
            .map_err(|e| e.context(context(request, TYPE)))?
            .association_id()
            .ok_or_else(|| ProviderError::Other("AssociateRouteTable answered no id".into()))?
            .to_string(),
        };
        Ok(Created {
            sensitive: false,
            attributes: attributes_of(&id),
            physical_id: id,
        })
    }

    /// Nothing changes in place: a new subnet or table needs a new association.
    async fn update(&self, request: &ResourceRequest) -> Result<Updated, ProviderError> {
        let id = request.require_physical_id()?;
        let previous = request.previous_properties.clone().unwrap_or_default();
        for key in ["SubnetId", "RouteTableId"] {
            if previous.get(key) != request.properties.get(key) {
                return Err(ProviderError::NotUpdatable(format!(
                    "{}: {key} cannot change in place",
                    context(request, TYPE)
                )));
            }
        }
        Ok(Updated {
            sensitive: false,
            physical_id: id.to_string(),
            attributes: attributes_of(id),
            replaced: false,
        })
    }

    async fn remove(&self, id: &str) -> Result<(), ProviderError> {
        ec2_call(&self.retry, "DisassociateRouteTable", || {
            self.client
                .disassociate_route_table()
                .association_id(id)
                .send()
        })
        .await
        .map(drop)
    }

    /// Only an explicit id.
    async fn import_id(&self, request: &ResourceRequest) -> Result<Option<String>, ProviderError> {
        Ok(request.physical_id.clone())
    }

    async fn find(&self, id: &str) -> Result<Option<RouteTableAssociation>, ProviderError> {
        Ok(self
            .associations("association.route-table-association-id", id)
            .await?
            .into_iter()
            .find(|a| a.route_table_association_id() == Some(id)))
    }

    fn attributes(&self, id: &str, _found: &RouteTableAssociation) -> Attributes {
        attributes_of(id)
    }

    async fn state(
        &self,
        _id: &str,
        found: RouteTableAssociation,
    ) -> Result<CurrentState, ProviderError> {
        let mut state = Properties::new();
        if let Some(subnet) = found.subnet_id() {
            state.insert("SubnetId".into(), json!(subnet));
        }
        if let Some(table) = found.route_table_id() {
            state.insert("RouteTableId".into(), json!(table));
        }
        Ok(CurrentState::Found(state))
    }
}
