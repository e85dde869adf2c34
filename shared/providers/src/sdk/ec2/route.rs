//! `AWS::EC2::Route` through the EC2 API.
//!
//! The physical id (`Ref`) is `<route table id>|<destination>`, as CloudFormation (and
//! Cloud Control, whose identifier is the table and the `CidrBlock`) names it; the one
//! attribute is `CidrBlock`, the destination (IPv4 or IPv6).
//!
//! Handled: `RouteTableId`, `DestinationCidrBlock`, `DestinationIpv6CidrBlock` (these
//! three need a new route: [`ProviderError::NotUpdatable`]) and the targets [`TARGETS`]
//! (changed in place with `ReplaceRoute`). Prefix-list destinations and carrier, local
//! and core-network targets go to Cloud Control.
//!
//! A route has no tags and `CreateRoute` no client token. A create that finds a route to
//! its destination already there (`RouteAlreadyExists`) looks at it: with the same target
//! it is what an earlier attempt of this create made, and is adopted; with another target
//! it is someone else's, and the create fails ([`ProviderError::AlreadyExists`]). (A route
//! someone else made with the very same target cannot be told from this stack's.)
//!
//! `read_current_state` reports `RouteTableId`, the destination and one target, as AWS
//! answers it: a gateway-load-balancer endpoint (`vpce-`) that AWS lists as a gateway is
//! reported as `VpcEndpointId`, and an instance's route as `InstanceId` alone (AWS adds
//! the instance's interface).
//!
//! Emulator (fakecloud 0.51.0): `DeleteRoute` of a missing route succeeds (AWS answers
//! `InvalidRoute.NotFound`, which is success too), and it deletes IPv4 destinations only.

use aws_sdk_ec2::Client;
use aws_sdk_ec2::types::Route;
use serde_json::json;

use super::common::ec2_call;
use super::route_table::describe_table;
use crate::error::ProviderError;
use crate::provider::{Attributes, Created, CurrentState, Properties, ResourceRequest, Updated};
use crate::sdk::common::{SdkResource, context, invalid, sdk_provider, string_of};

/// The target properties handled, each the name of `CreateRoute`'s parameter.
pub const TARGETS: &[&str] = &[
    "GatewayId",
    "NatGatewayId",
    "InstanceId",
    "NetworkInterfaceId",
    "VpcPeeringConnectionId",
    "TransitGatewayId",
    "VpcEndpointId",
    "EgressOnlyInternetGatewayId",
];

const HANDLED: &[&str] = &[
    "RouteTableId",
    "DestinationCidrBlock",
    "DestinationIpv6CidrBlock",
    "GatewayId",
    "NatGatewayId",
    "InstanceId",
    "NetworkInterfaceId",
    "VpcPeeringConnectionId",
    "TransitGatewayId",
    "VpcEndpointId",
    "EgressOnlyInternetGatewayId",
];

sdk_provider! {
    /// The `AWS::EC2::Route` provider.
    RouteProvider(Client), "AWS::EC2::Route", HANDLED
}

/// Where a route goes: its table and destination.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Key {
    table: String,
    destination: String,
    ipv6: bool,
}

impl Key {
    fn of_props(props: &Properties) -> Result<Key, ProviderError> {
        let table = string_of(props, "RouteTableId")
            .ok_or_else(|| invalid(TYPE, "RouteTableId is required"))?;
        let (destination, ipv6) = match (
            string_of(props, "DestinationCidrBlock"),
            string_of(props, "DestinationIpv6CidrBlock"),
        ) {
            (Some(v4), None) => (v4, false),
            (None, Some(v6)) => (v6, true),
            _ => {
                return Err(invalid(
                    TYPE,
                    "exactly one of DestinationCidrBlock and DestinationIpv6CidrBlock is required",
                ));
            }
        };
        Ok(Key {
            table,
            destination,
            ipv6,
        })
    }

    /// The key of a physical id `rtb-...|destination` (IPv6 when it holds a `:`).
    fn of_id(id: &str) -> Result<Key, ProviderError> {
        match id.split_once('|') {
            Some((table, destination)) if !table.is_empty() && !destination.is_empty() => Ok(Key {
                table: table.to_string(),
                destination: destination.to_string(),
                ipv6: destination.contains(':'),
            }),
            _ => Err(ProviderError::InvalidRequest(format!(
                "{TYPE}: {id} is not a route id (<route table id>|<destination>)"
            ))),
        }
    }

    fn id(&self) -> String {
        format!("{}|{}", self.table, self.destination)
    }

    fn matches(&self, route: &Route) -> bool {
        let destination = if self.ipv6 {
            route.destination_ipv6_cidr_block()
        } else {
            route.destination_cidr_block()
        };
        destination == Some(self.destination.as_str())
    }
}

/// The template's target: (property, id); exactly one is required.
fn target_of(props: &Properties) -> Result<(&'static str, String), ProviderError> {
    let mut set = TARGETS
        .iter()
        .filter_map(|t| string_of(props, t).map(|v| (*t, v)));
    match (set.next(), set.next()) {
        (Some(target), None) => Ok(target),
        _ => Err(invalid(
            TYPE,
            "exactly one target (GatewayId, NatGatewayId, ...) is required",
        )),
    }
}

/// A route's target as a template names it: (property, id).
fn route_target(route: &Route) -> Option<(&'static str, String)> {
    let pick = [
        ("NatGatewayId", route.nat_gateway_id()),
        ("TransitGatewayId", route.transit_gateway_id()),
        ("VpcPeeringConnectionId", route.vpc_peering_connection_id()),
        (
            "EgressOnlyInternetGatewayId",
            route.egress_only_internet_gateway_id(),
        ),
        ("InstanceId", route.instance_id()),
        ("GatewayId", route.gateway_id()),
        ("NetworkInterfaceId", route.network_interface_id()),
    ];
    let (key, id) = pick.into_iter().find_map(|(k, v)| v.map(|v| (k, v)))?;
    let key = if key == "GatewayId" && id.starts_with("vpce-") {
        "VpcEndpointId"
    } else {
        key
    };
    Some((key, id.to_string()))
}

fn attributes_of(key: &Key) -> Attributes {
    let mut a = Attributes::new();
    a.insert("CidrBlock".into(), json!(key.destination));
    a
}

/// Sets `target` on a `CreateRoute` or `ReplaceRoute` builder (the two have the same
/// target setters).
macro_rules! with_target {
    ($builder:expr, $target:expr) => {{
        let (name, id) = $target;
        let b = $builder;
        match name {
            "GatewayId" => b.gateway_id(id),
            "NatGatewayId" => b.nat_gateway_id(id),
            "InstanceId" => b.instance_id(id),
            "NetworkInterfaceId" => b.network_interface_id(id),
            "VpcPeeringConnectionId" => b.vpc_peering_connection_id(id),
            "TransitGatewayId" => b.transit_gateway_id(id),
            "VpcEndpointId" => b.vpc_endpoint_id(id),
            _ => b.egress_only_internet_gateway_id(id),
        }
    }};
}

impl RouteProvider {
    /// The route at `key`, if any.
    async fn route_at(&self, key: &Key) -> Result<Option<Route>, ProviderError> {
        let table = describe_table(&self.client, &self.retry, &key.table).await?;
        Ok(table.and_then(|t| t.routes().iter().find(|r| key.matches(r)).cloned()))
    }

    /// `CreateRoute`; a route already at the destination is adopted when it has the
    /// same target, refused otherwise.
    async fn create_route(
        &self,
        key: &Key,
        target: &(&'static str, String),
    ) -> Result<(), ProviderError> {
        let created = ec2_call(&self.retry, "CreateRoute", || {
            let b = self.client.create_route().route_table_id(&key.table);
            let b = if key.ipv6 {
                b.destination_ipv6_cidr_block(&key.destination)
            } else {
                b.destination_cidr_block(&key.destination)
            };
            with_target!(b, (target.0, target.1.as_str())).send()
        })
        .await;
        match created {
            Ok(_) => Ok(()),
            Err(ProviderError::AlreadyExists(m)) => {
                let existing = self.route_at(key).await?;
                if existing.as_ref().and_then(route_target).as_ref() == Some(target) {
                    Ok(())
                } else {
                    Err(ProviderError::AlreadyExists(format!(
                        "{m}; the route to {} in {} has another target, and this stack did \
                         not create it",
                        key.destination, key.table
                    )))
                }
            }
            Err(e) => Err(e),
        }
    }
}

impl SdkResource for RouteProvider {
    type Found = Route;
    const TYPE: &'static str = TYPE;
    const NAME_PROPERTY: &'static str = "RouteTableId";
    const NOUN: &'static str = "route";

    async fn create(&self, request: &ResourceRequest) -> Result<Created, ProviderError> {
        let key = Key::of_props(&request.properties)?;
        let target = target_of(&request.properties)?;
        self.create_route(&key, &target)
            .await
            .map_err(|e| e.context(context(request, TYPE)))?;
        Ok(Created {
            sensitive: false,
            attributes: attributes_of(&key),
            physical_id: key.id(),
        })
    }

    async fn update(&self, request: &ResourceRequest) -> Result<Updated, ProviderError> {
        let id = request.require_physical_id()?;
        let key = Key::of_id(id)?;
        if Key::of_props(&request.properties)? != key {
            return Err(ProviderError::NotUpdatable(format!(
                "{}: the route table or destination cannot change in place",
                context(request, TYPE)
            )));
        }
        let target = target_of(&request.properties)?;
        let previous = request.previous_properties.clone().unwrap_or_default();
        if target_of(&previous).ok().as_ref() != Some(&target) {
            ec2_call(&self.retry, "ReplaceRoute", || {
                let b = self.client.replace_route().route_table_id(&key.table);
                let b = if key.ipv6 {
                    b.destination_ipv6_cidr_block(&key.destination)
                } else {
                    b.destination_cidr_block(&key.destination)
                };
                with_target!(b, (target.0, target.1.as_str())).send()
            })
            .await
            .map_err(|e| e.context(context(request, TYPE)))?;
        }
        Ok(Updated {
            sensitive: false,
            physical_id: id.to_string(),
            attributes: attributes_of(&key),
            replaced: false,
        })
    }

    async fn remove(&self, id: &str) -> Result<(), ProviderError> {
        let key = Key::of_id(id)?;
        ec2_call(&self.retry, "DeleteRoute", || {
            let b = self.client.delete_route().route_table_id(&key.table);
            let b = if key.ipv6 {
                b.destination_ipv6_cidr_block(&key.destination)
            } else {
                b.destination_cidr_block(&key.destination)
            };
            b.send()
        })
        .await
        .map(drop)
    }

    /// Only an explicit id: the id is made of the table and the destination.
    async fn import_id(&self, request: &ResourceRequest) -> Result<Option<String>, ProviderError> {
        Ok(request.physical_id.clone())
    }

    async fn find(&self, id: &str) -> Result<Option<Route>, ProviderError> {
        self.route_at(&Key::of_id(id)?).await
    }

    fn attributes(&self, id: &str, _found: &Route) -> Attributes {
        Key::of_id(id)
            .map(|k| attributes_of(&k))
            .unwrap_or_default()
    }

    async fn state(&self, id: &str, route: Route) -> Result<CurrentState, ProviderError> {
        let key = Key::of_id(id)?;
        let mut state = Properties::new();
        state.insert("RouteTableId".into(), json!(key.table));
        let destination = if key.ipv6 {
            "DestinationIpv6CidrBlock"
        } else {
            "DestinationCidrBlock"
        };
        state.insert(destination.into(), json!(key.destination));
        if let Some((name, target)) = route_target(&route) {
            state.insert(name.into(), json!(target));
        }
        Ok(CurrentState::Found(state))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sdk::common::testing::props;

    #[test]
    fn ids_targets_and_keys() {
        let p = props(
            json!({"RouteTableId": "rtb-1", "DestinationCidrBlock": "0.0.0.0/0",
            "GatewayId": "igw-1"}),
        );
        let key = Key::of_props(&p).expect("key");
        assert_eq!(key.id(), "rtb-1|0.0.0.0/0");
        assert_eq!(Key::of_id("rtb-1|0.0.0.0/0").expect("id"), key);
        assert!(Key::of_id("rtb-1|::/0").expect("v6").ipv6);
        assert!(Key::of_id("rtb-1").is_err());
        assert_eq!(target_of(&p), Ok(("GatewayId", "igw-1".to_string())));
        let two = props(json!({"GatewayId": "igw-1", "NatGatewayId": "nat-1"}));
        assert!(target_of(&two).is_err());
        let endpoint = Route::builder().gateway_id("vpce-1").build();
        assert_eq!(
            route_target(&endpoint),
            Some(("VpcEndpointId", "vpce-1".to_string()))
        );
        let instance = Route::builder()
            .instance_id("i-1")
            .network_interface_id("eni-1")
            .build();
        assert_eq!(
            route_target(&instance),
            Some(("InstanceId", "i-1".to_string()))
        );
    }
}
