//! `AWS::EC2::VPCEndpoint` through the EC2 API.
//!
//! The physical id (what `Ref` returns) is the endpoint id (`vpce-...`); the attributes are
//! `Id`, `CreationTimestamp`, `DnsEntries` (each `hostedZoneId:dnsName`, as CloudFormation
//! writes them) and `NetworkInterfaceIds`.
//!
//! Handled: `VpcId`, `ServiceName`, `VpcEndpointType` (`Gateway` when absent),
//! `RouteTableIds`, `SubnetIds`, `SecurityGroupIds`, `PolicyDocument` (an object or a JSON
//! string), `PrivateDnsEnabled` and `Tags`; `DnsOptions`, `IpAddressType` and the service
//! network/resource configuration endpoints go to Cloud Control. `VpcId`, `ServiceName` and
//! `VpcEndpointType` need a new endpoint ([`ProviderError::NotUpdatable`]); the route
//! tables, subnets, security groups, policy (dropped: reset to the service's default) and
//! private DNS change in place with one `ModifyVpcEndpoint` call, the tags with
//! `CreateTags`/`DeleteTags`.
//!
//! A create sends a `ClientToken` and tags the endpoint with the stack's marks; it first
//! looks for an endpoint carrying this create's marks (an earlier attempt's) and adopts
//! it, then waits until it is `available` (or `pendingAcceptance`: a service that accepts
//! endpoints by hand). A delete waits until the endpoint is gone.
//!
//! An interface endpoint without `PrivateDnsEnabled` is made with private DNS off, as
//! CloudFormation does (the API alone would turn it on).
//!
//! `read_current_state` reports `VpcId`, `ServiceName`, `VpcEndpointType`, the id lists
//! when not empty (in the order the reading request's properties list them, the others
//! after, sorted), `PolicyDocument` as an object unless it is the full-access policy AWS
//! gives an endpoint without one, `PrivateDnsEnabled` when true, and `Tags`. An interface
//! endpoint made without `SecurityGroupIds` gets the VPC's default group from AWS, which
//! the read then lists.
//!
//! Emulator (fakecloud 0.51.0): its Cloud Control does not serve this type at all, which is
//! why this provider exists before the others of the family. The endpoint is `available`
//! at once; the `ClientToken` is not honoured (the marks keep a replay from making two);
//! `PolicyDocument` is accepted but never answered by `DescribeVpcEndpoints`, so a read
//! cannot show a policy there; interface endpoints get no DNS entries or network
//! interfaces; describes of unknown ids answer an empty list instead of
//! `InvalidVpcEndpointId.NotFound`.

use std::time::Duration;

use aws_sdk_ec2::Client;
use aws_sdk_ec2::primitives::DateTimeFormat;
use aws_sdk_ec2::types::{ResourceType, VpcEndpoint, VpcEndpointType};
use serde_json::{Value, json};

use super::common::{
    Ec2Tags, bool_of, carries_marks, client_token, ec2_call, mark_filters, tag_specification,
    template_tags, wait_until,
};
use crate::error::ProviderError;
use crate::provider::{Attributes, Created, CurrentState, Properties, ResourceRequest, Updated};
use crate::sdk::common::{
    SdkResource, Tagging, context, insert_tags, invalid, missing_as_none, sdk_provider, string_of,
    tag_map, value_string,
};

const HANDLED: &[&str] = &[
    "VpcId",
    "ServiceName",
    "VpcEndpointType",
    "RouteTableIds",
    "SubnetIds",
    "SecurityGroupIds",
    "PolicyDocument",
    "PrivateDnsEnabled",
    "Tags",
];

/// How long a create waits for `available` and a delete for the endpoint to go.
const WAIT: Duration = Duration::from_secs(15 * 60);

sdk_provider! {
    /// The `AWS::EC2::VPCEndpoint` provider.
    VpcEndpointProvider(Client), "AWS::EC2::VPCEndpoint", HANDLED
}

/// The endpoint type a template asks for (`Gateway` when absent).
fn endpoint_type(props: &Properties) -> String {
    string_of(props, "VpcEndpointType").unwrap_or_else(|| "Gateway".into())
}

/// A list of ids (`RouteTableIds`, ...), empty when absent.
fn ids(props: &Properties, key: &str) -> Vec<String> {
    props
        .get(key)
        .and_then(Value::as_array)
        .map(|l| {
            l.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The ids of `new` not in `old`, and those of `old` not in `new`.
fn id_changes(old: &[String], new: &[String]) -> (Option<Vec<String>>, Option<Vec<String>>) {
    let added: Vec<String> = new.iter().filter(|i| !old.contains(i)).cloned().collect();
    let removed: Vec<String> = old.iter().filter(|i| !new.contains(i)).cloned().collect();
    let some = |v: Vec<String>| (!v.is_empty()).then_some(v);
    (some(added), some(removed))
}

/// The policy as the API takes it (a JSON string).
fn policy_text(props: &Properties) -> Option<String> {
    props.get("PolicyDocument").map(value_string)
}

/// True for the policy AWS gives an endpoint that is created without one: everything, for
/// everyone.
fn is_full_access(policy: &Value) -> bool {
    let statements = policy.get("Statement").and_then(Value::as_array);
    let Some([only]) = statements.map(Vec::as_slice) else {
        return false;
    };
    let star = |k: &str| only.get(k) == Some(&json!("*"));
    only.get("Effect") == Some(&json!("Allow"))
        && star("Principal")
        && star("Action")
        && star("Resource")
}

/// The endpoint's state in lower case: AWS answers `available`, `pending`, ... where the
/// SDK's enum spells `Available`, so the enum's variants would not match.
fn state_name(endpoint: &VpcEndpoint) -> String {
    endpoint
        .state()
        .map(|s| s.as_str().to_ascii_lowercase())
        .unwrap_or_default()
}

fn is_gone(endpoint: &VpcEndpoint) -> bool {
    matches!(
        state_name(endpoint).as_str(),
        "deleted" | "deleting" | "failed" | "rejected" | "expired"
    )
}

fn attributes(endpoint: &VpcEndpoint) -> Attributes {
    let mut a = Attributes::new();
    a.insert(
        "Id".into(),
        json!(endpoint.vpc_endpoint_id().unwrap_or_default()),
    );
    let created = endpoint
        .creation_timestamp()
        .and_then(|t| t.fmt(DateTimeFormat::DateTime).ok());
    a.insert(
        "CreationTimestamp".into(),
        json!(created.unwrap_or_default()),
    );
    let dns: Vec<String> = endpoint
        .dns_entries()
        .iter()
        .map(|d| {
            format!(
                "{}:{}",
                d.hosted_zone_id().unwrap_or_default(),
                d.dns_name().unwrap_or_default()
            )
        })
        .collect();
    a.insert("DnsEntries".into(), json!(dns));
    a.insert(
        "NetworkInterfaceIds".into(),
        json!(endpoint.network_interface_ids()),
    );
    a
}

/// `list` in the order `template` gives its ids, the others after them, sorted.
fn order_like(mut list: Vec<String>, template: &[String]) -> Vec<String> {
    let place = |id: &String| template.iter().position(|t| t == id).unwrap_or(usize::MAX);
    list.sort_by(|a, b| place(a).cmp(&place(b)).then_with(|| a.cmp(b)));
    list
}

/// The endpoint's state in the template's shape, the id lists in the order of `template`
/// (the properties of the request that reads it).
fn state_of(endpoint: &VpcEndpoint, template: &Properties) -> Properties {
    let mut state = Properties::new();
    let text = |s: Option<&str>| json!(s.unwrap_or_default());
    state.insert("VpcId".into(), text(endpoint.vpc_id()));
    state.insert("ServiceName".into(), text(endpoint.service_name()));
    let kind = endpoint
        .vpc_endpoint_type()
        .map_or("Gateway", |t| t.as_str());
    state.insert("VpcEndpointType".into(), json!(kind));
    let groups: Vec<String> = endpoint
        .groups()
        .iter()
        .filter_map(|g| g.group_id().map(str::to_string))
        .collect();
    let lists = [
        ("RouteTableIds", endpoint.route_table_ids().to_vec()),
        ("SubnetIds", endpoint.subnet_ids().to_vec()),
        ("SecurityGroupIds", groups),
    ];
    for (key, list) in lists {
        let list = order_like(list, &ids(template, key));
        if !list.is_empty() {
            state.insert(key.into(), json!(list));
        }
    }
    if let Some(policy) = endpoint.policy_document() {
        let parsed = serde_json::from_str(policy).unwrap_or_else(|_| json!(policy));
        if !is_full_access(&parsed) {
            state.insert("PolicyDocument".into(), parsed);
        }
    }
    if endpoint.private_dns_enabled() == Some(true) {
        state.insert("PrivateDnsEnabled".into(), json!(true));
    }
    insert_tags(&mut state, template_tags(endpoint.tags()));
    state
}

impl VpcEndpointProvider {
    /// The endpoint an earlier attempt of this create made, found by its marks.
    async fn made_before(
        &self,
        request: &ResourceRequest,
    ) -> Result<Option<VpcEndpoint>, ProviderError> {
        let filters = mark_filters(request);
        let out = ec2_call(&self.retry, "DescribeVpcEndpoints", || {
            self.client
                .describe_vpc_endpoints()
                .set_filters(Some(filters.clone()))
                .send()
        })
        .await?;
        Ok(out
            .vpc_endpoints()
            .iter()
            .find(|e| carries_marks(e.tags(), request) && !is_gone(e))
            .cloned())
    }

    async fn create_endpoint(&self, request: &ResourceRequest) -> Result<String, ProviderError> {
        let props = &request.properties;
        let vpc = string_of(props, "VpcId").ok_or_else(|| invalid(TYPE, "VpcId is required"))?;
        let service = string_of(props, "ServiceName")
            .ok_or_else(|| invalid(TYPE, "ServiceName is required"))?;
        let some = |key: &str| Some(ids(props, key)).filter(|l| !l.is_empty());
        // CloudFormation's default is false; the API's, for an interface endpoint, true.
        let private_dns = bool_of(TYPE, props, "PrivateDnsEnabled")?
            .or_else(|| (endpoint_type(props) == "Interface").then_some(false));
        let spec = tag_specification(TYPE, ResourceType::VpcEndpoint, request)?;
        let token = client_token(request);
        let kind = VpcEndpointType::from(endpoint_type(props).as_str());
        let out = ec2_call(&self.retry, "CreateVpcEndpoint", || {
            self.client
                .create_vpc_endpoint()
                .vpc_id(&vpc)
                .service_name(&service)
                .vpc_endpoint_type(kind.clone())
                .set_route_table_ids(some("RouteTableIds"))
                .set_subnet_ids(some("SubnetIds"))
                .set_security_group_ids(some("SecurityGroupIds"))
                .set_policy_document(policy_text(props))
                .set_private_dns_enabled(private_dns)
                .client_token(&token)
                .tag_specifications(spec.clone())
                .send()
        })
        .await?;
        out.vpc_endpoint()
            .and_then(|e| e.vpc_endpoint_id())
            .map(str::to_string)
            .ok_or_else(|| ProviderError::Other("CreateVpcEndpoint answered no id".into()))
    }

    /// Waits until the endpoint `id` is usable, and answers it.
    async fn settle(&self, id: &str) -> Result<VpcEndpoint, ProviderError> {
        wait_until(&format!("{TYPE} {id} available"), WAIT, || async {
            let endpoint = self.describe(id).await?;
            let Some(endpoint) = endpoint else {
                return Err(ProviderError::NotFound(format!("{TYPE} {id} went away")));
            };
            match state_name(&endpoint).as_str() {
                "available" | "pendingacceptance" | "" => Ok(Some(endpoint)),
                "pending" => Ok(None),
                other => Err(ProviderError::Other(format!(
                    "{TYPE} {id} is {other}: {}",
                    endpoint.failure_reason().unwrap_or("no reason given")
                ))),
            }
        })
        .await
    }

    /// `DescribeVpcEndpoints` of `id`, whatever its state.
    async fn describe(&self, id: &str) -> Result<Option<VpcEndpoint>, ProviderError> {
        let out = ec2_call(&self.retry, "DescribeVpcEndpoints", || {
            self.client
                .describe_vpc_endpoints()
                .vpc_endpoint_ids(id)
                .send()
        })
        .await;
        Ok(missing_as_none(out)?.and_then(|o| {
            o.vpc_endpoints()
                .iter()
                .find(|e| e.vpc_endpoint_id() == Some(id))
                .cloned()
        }))
    }

    /// One `ModifyVpcEndpoint` with every change from `old` to `new`, when there is any.
    async fn modify(
        &self,
        id: &str,
        old: &Properties,
        new: &Properties,
    ) -> Result<(), ProviderError> {
        let (add_rt, remove_rt) =
            id_changes(&ids(old, "RouteTableIds"), &ids(new, "RouteTableIds"));
        let (add_sn, remove_sn) = id_changes(&ids(old, "SubnetIds"), &ids(new, "SubnetIds"));
        let (add_sg, remove_sg) =
            id_changes(&ids(old, "SecurityGroupIds"), &ids(new, "SecurityGroupIds"));
        let new_policy = policy_text(new);
        let policy_changed = old.get("PolicyDocument") != new.get("PolicyDocument");
        let reset = (policy_changed && new_policy.is_none()).then_some(true);
        let policy = new_policy.filter(|_| policy_changed);
        let old_dns = bool_of(TYPE, old, "PrivateDnsEnabled")?.unwrap_or(false);
        let new_dns = bool_of(TYPE, new, "PrivateDnsEnabled")?.unwrap_or(false);
        let dns = (old_dns != new_dns).then_some(new_dns);
        let lists = [
            &add_rt, &remove_rt, &add_sn, &remove_sn, &add_sg, &remove_sg,
        ];
        if lists.iter().all(|l| l.is_none()) && reset.is_none() && policy.is_none() && dns.is_none()
        {
            return Ok(());
        }
        ec2_call(&self.retry, "ModifyVpcEndpoint", || {
            self.client
                .modify_vpc_endpoint()
                .vpc_endpoint_id(id)
                .set_add_route_table_ids(add_rt.clone())
                .set_remove_route_table_ids(remove_rt.clone())
                .set_add_subnet_ids(add_sn.clone())
                .set_remove_subnet_ids(remove_sn.clone())
                .set_add_security_group_ids(add_sg.clone())
                .set_remove_security_group_ids(remove_sg.clone())
                .set_policy_document(policy.clone())
                .set_reset_policy(reset)
                .set_private_dns_enabled(dns)
                .send()
        })
        .await
        .map(drop)
    }
}

impl SdkResource for VpcEndpointProvider {
    type Found = VpcEndpoint;
    const TYPE: &'static str = TYPE;
    const NAME_PROPERTY: &'static str = "Id";
    const NOUN: &'static str = "VPC endpoint";

    async fn create(&self, request: &ResourceRequest) -> Result<Created, ProviderError> {
        let ctx = || context(request, TYPE);
        let id = match self.made_before(request).await? {
            Some(found) => found.vpc_endpoint_id().unwrap_or_default().to_string(),
            None => self
                .create_endpoint(request)
                .await
                .map_err(|e| e.context(ctx()))?,
        };
        let endpoint = self.settle(&id).await.map_err(|e| e.context(ctx()))?;
        Ok(Created {
            sensitive: false,
            attributes: attributes(&endpoint),
            physical_id: id,
        })
    }

    async fn update(&self, request: &ResourceRequest) -> Result<Updated, ProviderError> {
        let id = request.require_physical_id()?;
        let previous = request.previous_properties.clone().unwrap_or_default();
        let props = &request.properties;
        let replaced = ["VpcId", "ServiceName"]
            .into_iter()
            .find(|k| previous.get(*k) != props.get(*k))
            .or_else(|| {
                (endpoint_type(&previous) != endpoint_type(props)).then_some("VpcEndpointType")
            });
        if let Some(key) = replaced {
            return Err(ProviderError::NotUpdatable(format!(
                "{}: {key} cannot change in place",
                context(request, TYPE)
            )));
        }
        let ctx = || context(request, TYPE);
        self.modify(id, &previous, props)
            .await
            .map_err(|e| e.context(ctx()))?;
        let tags = Ec2Tags {
            client: &self.client,
            retry: &self.retry,
        };
        tags.sync_tags(id, &tag_map(&previous), &tag_map(props))
            .await
            .map_err(|e| e.context(ctx()))?;
        let endpoint = self.settle(id).await.map_err(|e| e.context(ctx()))?;
        Ok(Updated {
            sensitive: false,
            physical_id: id.to_string(),
            attributes: attributes(&endpoint),
            replaced: false,
        })
    }

    /// `DeleteVpcEndpoints`, then waits until the endpoint is gone.
    async fn remove(&self, id: &str) -> Result<(), ProviderError> {
        if self.find(id).await?.is_none() {
            return Err(ProviderError::NotFound(format!("{TYPE} {id}")));
        }
        let out = ec2_call(&self.retry, "DeleteVpcEndpoints", || {
            self.client
                .delete_vpc_endpoints()
                .vpc_endpoint_ids(id)
                .send()
        })
        .await?;
        if let Some(failed) = out.unsuccessful().first() {
            let error = failed.error();
            let code = error.and_then(|e| e.code()).unwrap_or_default();
            let message = format!(
                "DeleteVpcEndpoints {id}: {code}: {}",
                error.and_then(|e| e.message()).unwrap_or_default()
            );
            return Err(if code.ends_with("NotFound") {
                ProviderError::NotFound(message)
            } else {
                ProviderError::Other(message)
            });
        }
        wait_until(&format!("{TYPE} {id} deleted"), WAIT, || async {
            let endpoint = self.describe(id).await?;
            let deleted = endpoint.as_ref().is_none_or(|e| state_name(e) == "deleted");
            Ok(deleted.then_some(()))
        })
        .await
    }

    /// The endpoint `id`, unless it is gone or going.
    async fn find(&self, id: &str) -> Result<Option<VpcEndpoint>, ProviderError> {
        Ok(self.describe(id).await?.filter(|e| !is_gone(e)))
    }

    fn attributes(&self, _id: &str, found: &VpcEndpoint) -> Attributes {
        attributes(found)
    }

    async fn state(&self, _id: &str, endpoint: VpcEndpoint) -> Result<CurrentState, ProviderError> {
        Ok(CurrentState::Found(state_of(&endpoint, &Properties::new())))
    }

    /// The endpoint, its lists in the order of the request's properties.
    async fn read(&self, request: &ResourceRequest) -> Result<CurrentState, ProviderError> {
        let id = request.require_physical_id()?;
        Ok(match self.find(id).await? {
            Some(endpoint) => CurrentState::Found(state_of(&endpoint, &request.properties)),
            None => CurrentState::NotFound,
        })
    }
}

#[cfg(test)]
mod tests {
    use aws_sdk_ec2::types::DnsEntry;

    use super::*;
    use crate::sdk::common::testing::props;

    #[test]
    fn lists_policies_and_attributes() {
        let (add, remove) = id_changes(&["a".into(), "b".into()], &["b".into(), "c".into()]);
        assert_eq!(
            (add, remove),
            (Some(vec!["c".into()]), Some(vec!["a".into()]))
        );
        assert_eq!(id_changes(&["a".into()], &["a".into()]), (None, None));
        let full = json!({"Version": "2008-10-17", "Statement": [
            {"Effect": "Allow", "Principal": "*", "Action": "*", "Resource": "*"}]});
        assert!(is_full_access(&full));
        assert!(!is_full_access(&json!({"Statement": []})));
        let p = props(json!({"PolicyDocument": {"a": 1}}));
        assert_eq!(policy_text(&p).as_deref(), Some(r#"{"a":1}"#));
        assert_eq!(endpoint_type(&Properties::new()), "Gateway");
        let endpoint = VpcEndpoint::builder()
            .vpc_endpoint_id("vpce-1")
            .vpc_id("vpc-1")
            .service_name("com.amazonaws.us-east-1.s3")
            .vpc_endpoint_type(VpcEndpointType::Gateway)
            .route_table_ids("rtb-2")
            .route_table_ids("rtb-1")
            .policy_document(full.to_string())
            .dns_entries(
                DnsEntry::builder()
                    .hosted_zone_id("Z1")
                    .dns_name("x.aws")
                    .build(),
            )
            .build();
        assert_eq!(
            Value::Object(state_of(&endpoint, &Properties::new())),
            json!({"VpcId": "vpc-1", "ServiceName": "com.amazonaws.us-east-1.s3",
                "VpcEndpointType": "Gateway", "RouteTableIds": ["rtb-1", "rtb-2"]})
        );
        let a = attributes(&endpoint);
        assert_eq!(a["DnsEntries"], json!(["Z1:x.aws"]));
        assert_eq!(a["Id"], json!("vpce-1"));
    }
}
