//! `AWS::EC2::SecurityGroupIngress` and `AWS::EC2::SecurityGroupEgress`: one rule of a
//! security group, as a resource of its own, through the EC2 API.
//!
//! The physical id (what `Ref` returns) is the rule's id (`sgr-...`); the one attribute is
//! `Id`, the same id.
//!
//! Handled: `GroupId`, `IpProtocol`, `FromPort`, `ToPort`, `CidrIp`, `CidrIpv6`,
//! `Description`, and the peer keys of the direction (`SourceSecurityGroupId`,
//! `SourcePrefixListId` for ingress; `DestinationSecurityGroupId`,
//! `DestinationPrefixListId` for egress). A rule of the default VPC named by `GroupName`,
//! or one with `SourceSecurityGroupOwnerId`/`SourceSecurityGroupName`, goes to Cloud
//! Control. Only `Description` changes in place (`ModifySecurityGroupRules`); any other
//! change is a new rule ([`ProviderError::NotUpdatable`]).
//!
//! The create looks the group's rules up first: a rule for the same traffic that carries
//! this create's marks is an earlier attempt's, adopted; one without them is someone
//! else's (or the group's own inline rule), [`ProviderError::AlreadyExists`]: it is never
//! taken over. The rule is authorized tagged with the marks, which is also how the group's
//! provider tells it from the group's own rules.
//!
//! Emulator (fakecloud 0.51.0): `AuthorizeSecurityGroupIngress` of a rule that exists
//! makes a second one (AWS refuses: `InvalidPermission.Duplicate`), so the look-up before
//! the create is what keeps a replay from making two; describes of unknown rule ids answer
//! an empty list instead of `InvalidSecurityGroupRuleId.NotFound`;
//! `UpdateSecurityGroupRuleDescriptionsIngress` answers true and changes nothing, which is
//! why the description goes through `ModifySecurityGroupRules`.

use aws_sdk_ec2::Client;
use aws_sdk_ec2::types::{ResourceType, SecurityGroupRule, SecurityGroupRuleUpdate};
use serde_json::json;

use super::common::{carries_marks, ec2_call, tag_specification};
use super::rules::Rule;
use super::security_group::group_rules;
use crate::error::ProviderError;
use crate::provider::{Created, CurrentState, Properties, ResourceRequest, Updated};
use crate::retry::RetryPolicy;
use crate::sdk::common::id_attributes as attributes;
use crate::sdk::common::{context, invalid, missing_as_none};

/// The properties both directions handle, besides their peer keys.
macro_rules! handled {
    ($group:literal, $list:literal) => {
        &[
            "GroupId",
            "IpProtocol",
            "FromPort",
            "ToPort",
            "CidrIp",
            "CidrIpv6",
            "Description",
            $group,
            $list,
        ]
    };
}

/// The rule `id`, or `None`.
async fn find_rule(
    client: &Client,
    retry: &RetryPolicy,
    id: &str,
) -> Result<Option<SecurityGroupRule>, ProviderError> {
    let out = ec2_call(retry, "DescribeSecurityGroupRules", || {
        client
            .describe_security_group_rules()
            .security_group_rule_ids(id)
            .send()
    })
    .await;
    Ok(missing_as_none(out)?.and_then(|o| {
        o.security_group_rules()
            .iter()
            .find(|r| r.security_group_rule_id() == Some(id))
            .cloned()
    }))
}

fn group_of<'a>(type_name: &str, props: &'a Properties) -> Result<&'a str, ProviderError> {
    props
        .get("GroupId")
        .and_then(|v| v.as_str())
        .ok_or_else(|| invalid(type_name, "GroupId is required"))
}

/// Creates the rule `request` describes (a direction's: `egress`), or adopts the one an
/// earlier attempt of this create made.
async fn create(
    client: &Client,
    retry: &RetryPolicy,
    type_name: &str,
    egress: bool,
    request: &ResourceRequest,
) -> Result<Created, ProviderError> {
    let rule = Rule::from_template(type_name, &request.properties, egress)?;
    let group = group_of(type_name, &request.properties)?;
    let ctx = || context(request, type_name);
    let existing = group_rules(client, retry, group).await?;
    let same = existing.iter().find(|r| {
        r.is_egress() == Some(egress) && Rule::from_sdk(r).is_some_and(|o| o.same_traffic(&rule))
    });
    let id = match same {
        Some(found) if carries_marks(found.tags(), request) => found
            .security_group_rule_id()
            .unwrap_or_default()
            .to_string(),
        Some(_) => {
            return Err(ProviderError::AlreadyExists(format!(
                "{}: group {group} has this rule already, and this stack did not create it; \
                 stackflow never takes over what it did not make",
                ctx()
            )));
        }
        None => authorize(client, retry, type_name, egress, request, group, &rule)
            .await
            .map_err(|e| e.context(ctx()))?,
    };
    Ok(Created {
        sensitive: false,
        attributes: attributes(&id),
        physical_id: id,
    })
}

/// Authorizes `rule` on `group`, tagged with the marks of `request`: the new rule's id.
async fn authorize(
    client: &Client,
    retry: &RetryPolicy,
    type_name: &str,
    egress: bool,
    request: &ResourceRequest,
    group: &str,
    rule: &Rule,
) -> Result<String, ProviderError> {
    let spec = tag_specification(type_name, ResourceType::SecurityGroupRule, request)?;
    let perm = rule.permission();
    let first_id = |rules: &[SecurityGroupRule]| {
        rules
            .iter()
            .find_map(|r| r.security_group_rule_id().map(str::to_string))
    };
    let id = if egress {
        let out = ec2_call(retry, "AuthorizeSecurityGroupEgress", || {
            client
                .authorize_security_group_egress()
                .group_id(group)
                .ip_permissions(perm.clone())
                .tag_specifications(spec.clone())
                .send()
        })
        .await?;
        first_id(out.security_group_rules())
    } else {
        let out = ec2_call(retry, "AuthorizeSecurityGroupIngress", || {
            client
                .authorize_security_group_ingress()
                .group_id(group)
                .ip_permissions(perm.clone())
                .tag_specifications(spec.clone())
                .send()
        })
        .await?;
        first_id(out.security_group_rules())
    };
    id.ok_or_else(|| ProviderError::Other(format!("{type_name}: the answer names no rule id")))
}

/// Changes the description of the rule `request.physical_id`; anything else needs a new
/// rule.
async fn update(
    client: &Client,
    retry: &RetryPolicy,
    type_name: &str,
    egress: bool,
    request: &ResourceRequest,
) -> Result<Updated, ProviderError> {
    let id = request.require_physical_id()?;
    let previous = request.previous_properties.clone().unwrap_or_default();
    let old = Rule::from_template(type_name, &previous, egress)?;
    let new = Rule::from_template(type_name, &request.properties, egress)?;
    let group = group_of(type_name, &request.properties)?;
    if !old.same_traffic(&new) || group_of(type_name, &previous)? != group {
        return Err(ProviderError::NotUpdatable(format!(
            "{}: only Description changes in place",
            context(request, type_name)
        )));
    }
    if old.description != new.description {
        let change = SecurityGroupRuleUpdate::builder()
            .security_group_rule_id(id)
            .security_group_rule(new.request())
            .build();
        ec2_call(retry, "ModifySecurityGroupRules", || {
            client
                .modify_security_group_rules()
                .group_id(group)
                .security_group_rules(change.clone())
                .send()
        })
        .await
        .map_err(|e| e.context(context(request, type_name)))?;
    }
    Ok(Updated {
        sensitive: false,
        physical_id: id.to_string(),
        attributes: attributes(id),
        replaced: false,
    })
}

/// Revokes the rule `id` (gone already: [`ProviderError::NotFound`]).
async fn remove(
    client: &Client,
    retry: &RetryPolicy,
    egress: bool,
    id: &str,
) -> Result<(), ProviderError> {
    let Some(rule) = find_rule(client, retry, id).await? else {
        return Err(ProviderError::NotFound(format!("rule {id}")));
    };
    let group = rule.group_id().unwrap_or_default();
    if egress {
        ec2_call(retry, "RevokeSecurityGroupEgress", || {
            client
                .revoke_security_group_egress()
                .group_id(group)
                .security_group_rule_ids(id)
                .send()
        })
        .await
        .map(drop)
    } else {
        ec2_call(retry, "RevokeSecurityGroupIngress", || {
            client
                .revoke_security_group_ingress()
                .group_id(group)
                .security_group_rule_ids(id)
                .send()
        })
        .await
        .map(drop)
    }
}

/// The rule in the template's shape, with its group.
fn state_of(rule: &SecurityGroupRule, egress: bool) -> CurrentState {
    let Some(parsed) = Rule::from_sdk(rule) else {
        return CurrentState::CannotRead("the rule names no peer".into());
    };
    let mut state = parsed.template(egress);
    state.insert("GroupId".into(), json!(rule.group_id().unwrap_or_default()));
    CurrentState::Found(state)
}

/// Declares one direction's provider over the functions above.
macro_rules! rule_provider {
    ($module:ident, $provider:ident, $type_name:literal, $egress:literal, $handled:expr) => {
        pub mod $module {
            //! The provider of one direction (see the parent module).
            use aws_sdk_ec2::Client;
            use aws_sdk_ec2::types::SecurityGroupRule;

            use crate::error::ProviderError;
            use crate::provider::{Attributes, Created, CurrentState, ResourceRequest, Updated};
            use crate::sdk::common::{SdkResource, sdk_provider};

            sdk_provider! {
                /// The provider of this rule type.
                $provider(Client), $type_name, $handled
            }

            impl SdkResource for $provider {
                type Found = SecurityGroupRule;
                const TYPE: &'static str = TYPE;
                const NAME_PROPERTY: &'static str = "Id";
                const NOUN: &'static str = "security group rule";

                async fn create(&self, r: &ResourceRequest) -> Result<Created, ProviderError> {
                    super::create(&self.client, &self.retry, TYPE, $egress, r).await
                }

                async fn update(&self, r: &ResourceRequest) -> Result<Updated, ProviderError> {
                    super::update(&self.client, &self.retry, TYPE, $egress, r).await
                }

                async fn remove(&self, id: &str) -> Result<(), ProviderError> {
                    super::remove(&self.client, &self.retry, $egress, id).await
                }

                async fn find(&self, id: &str) -> Result<Option<SecurityGroupRule>, ProviderError> {
                    let found = super::find_rule(&self.client, &self.retry, id).await?;
                    Ok(found.filter(|r| r.is_egress() == Some($egress)))
                }

                fn attributes(&self, id: &str, _found: &SecurityGroupRule) -> Attributes {
                    super::attributes(id)
                }

                async fn state(
                    &self,
                    _id: &str,
                    rule: SecurityGroupRule,
                ) -> Result<CurrentState, ProviderError> {
                    Ok(super::state_of(&rule, $egress))
                }
            }
        }
    };
}

rule_provider!(
    ingress,
    SecurityGroupIngressProvider,
    "AWS::EC2::SecurityGroupIngress",
    false,
    handled!("SourceSecurityGroupId", "SourcePrefixListId")
);

rule_provider!(
    egress,
    SecurityGroupEgressProvider,
    "AWS::EC2::SecurityGroupEgress",
    true,
    handled!("DestinationSecurityGroupId", "DestinationPrefixListId")
);

#[cfg(test)]
mod tests {
    use aws_sdk_ec2::types::ReferencedSecurityGroup;
    use serde_json::Value;

    use super::*;

    #[test]
    fn a_rule_reads_back_in_the_template_shape() {
        let rule = SecurityGroupRule::builder()
            .security_group_rule_id("sgr-1")
            .group_id("sg-1")
            .is_egress(false)
            .ip_protocol("tcp")
            .from_port(8080)
            .to_port(8080)
            .referenced_group_info(ReferencedSecurityGroup::builder().group_id("sg-1").build())
            .description("self")
            .build();
        let CurrentState::Found(state) = state_of(&rule, false) else {
            panic!("not found");
        };
        assert_eq!(
            Value::Object(state),
            json!({"GroupId": "sg-1", "IpProtocol": "tcp", "FromPort": 8080, "ToPort": 8080,
                "SourceSecurityGroupId": "sg-1", "Description": "self"})
        );
        assert_eq!(attributes("sgr-1")["Id"], json!("sgr-1"));
    }
}
