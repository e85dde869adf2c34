//! `AWS::EC2::SecurityGroup` through the EC2 API.
//!
//! The physical id (what `Ref` returns) is the group id (`sg-...`) for a group in a VPC,
//! and the group name for one made without `VpcId` (CloudFormation's rule for the default
//! VPC); the attributes are `GroupId` and `VpcId`.
//!
//! Handled: `GroupDescription`, `GroupName`, `VpcId`, `SecurityGroupIngress`,
//! `SecurityGroupEgress` and `Tags`. `GroupDescription`, `GroupName` and `VpcId` cannot
//! change in place ([`ProviderError::NotUpdatable`]); the rule lists are brought from the
//! previous template's to the new one's with `Revoke...`/`Authorize...` calls (a rule whose
//! description changes is revoked and authorized again, as CloudFormation does), and the
//! tags with `CreateTags`/`DeleteTags`.
//!
//! Egress: EC2 gives a new group one rule, all traffic to `0.0.0.0/0`. A template without
//! `SecurityGroupEgress` keeps it; a template with a list (CDK writes its own "Allow all
//! outbound traffic by default" rule, with a description) has that rule revoked at create
//! and its own rules authorized instead.
//!
//! Without a `GroupName` the name is generated ([`crate::names::physical_name`]); the
//! create looks the name up in the VPC first: a group there that carries this create's
//! marks is an earlier attempt's, adopted (its rules brought to the template's); any other
//! is someone else's, [`ProviderError::AlreadyExists`].
//!
//! The rules authorized here carry the group's marks. `read_current_state` reads the
//! rules with `DescribeSecurityGroupRules` and leaves out those marked with another
//! logical id (standalone `AWS::EC2::SecurityGroupIngress`/`Egress` resources of the
//! stack), so that they are not reported as the group's drift; the egress list is left out
//! when it is EC2's default rule alone. The rules come in the order the reading request's
//! properties list them (the others after them), so a group as the template asks reads
//! back as the template's lists.
//!
//! Emulator (fakecloud 0.51.0): it lets two groups of one VPC share a name (AWS refuses:
//! `InvalidGroup.Duplicate`), which the name look-up before the create covers.

use aws_sdk_ec2::Client;
use aws_sdk_ec2::types::{Filter, ResourceType, SecurityGroup, SecurityGroupRule};
use serde_json::json;

use super::common::{
    Ec2Tags, LOGICAL_ID_MARK, carries_marks, ec2_call, tag_specification, template_tags,
};
use super::rules::{Rule, allow_all_egress, in_template_order, rule_changes, template_list};
use crate::error::ProviderError;
use crate::names::{NameRules, given_or_generated};
use crate::provider::{Attributes, Created, CurrentState, Properties, ResourceRequest, Updated};
use crate::retry::RetryPolicy;
use crate::sdk::common::{
    SdkResource, Tagging, context, insert_tags, invalid, missing_as_none, sdk_provider, tag_map,
};

const HANDLED: &[&str] = &[
    "GroupDescription",
    "GroupName",
    "VpcId",
    "SecurityGroupIngress",
    "SecurityGroupEgress",
    "Tags",
];

/// Group names: at most 255 characters.
const NAME_RULES: NameRules = NameRules {
    max_len: 255,
    extra: "-_",
    lowercase: false,
};

sdk_provider! {
    /// The `AWS::EC2::SecurityGroup` provider.
    SecurityGroupProvider(Client), "AWS::EC2::SecurityGroup", HANDLED
}

/// The rules a template asks for: (ingress, egress), egress being EC2's default rule when
/// the template gives no list.
fn wanted_rules(props: &Properties) -> Result<(Vec<Rule>, Vec<Rule>), ProviderError> {
    let ingress = Rule::list_from_template(TYPE, props, "SecurityGroupIngress", false)?;
    let mut egress = Rule::list_from_template(TYPE, props, "SecurityGroupEgress", true)?;
    if egress.is_empty() {
        egress.push(allow_all_egress());
    }
    Ok((ingress, egress))
}

fn attributes(group: &SecurityGroup) -> Attributes {
    let mut a = Attributes::new();
    a.insert(
        "GroupId".into(),
        json!(group.group_id().unwrap_or_default()),
    );
    if let Some(vpc) = group.vpc_id() {
        a.insert("VpcId".into(), json!(vpc));
    }
    a
}

/// The physical id of `group`: its id in a VPC, else its name.
fn id_of(group: &SecurityGroup) -> String {
    match (group.vpc_id(), group.group_id(), group.group_name()) {
        (None, _, Some(name)) => name.to_string(),
        (_, id, _) => id.unwrap_or_default().to_string(),
    }
}

/// True when `rule` carries a logical id mark other than `logical_id` (a standalone rule
/// resource's).
fn marked_by_another(rule: &SecurityGroupRule, logical_id: Option<&str>) -> bool {
    let Some(logical_id) = logical_id else {
        return false;
    };
    rule.tags()
        .iter()
        .any(|t| t.key() == Some(LOGICAL_ID_MARK) && t.value() != Some(logical_id))
}

/// The group's current rules as (ingress, egress), those of other resources left out.
fn split_rules(rules: &[SecurityGroupRule], logical_id: Option<&str>) -> (Vec<Rule>, Vec<Rule>) {
    let mut ingress = Vec::new();
    let mut egress = Vec::new();
    for rule in rules.iter().filter(|r| !marked_by_another(r, logical_id)) {
        let Some(parsed) = Rule::from_sdk(rule) else {
            continue;
        };
        if rule.is_egress() == Some(true) {
            egress.push(parsed);
        } else {
            ingress.push(parsed);
        }
    }
    (ingress, egress)
}

/// The group's state in the template's shape, its rules in the order of `template`'s
/// lists (the properties of the request that reads it) where it lists them.
fn state_of(
    group: &SecurityGroup,
    (ingress, egress): (Vec<Rule>, Vec<Rule>),
    template: &Properties,
) -> Properties {
    let (wanted_in, wanted_out) = wanted_rules(template).unwrap_or_default();
    let ingress = in_template_order(ingress, &wanted_in);
    let egress = in_template_order(egress, &wanted_out);
    let mut state = Properties::new();
    let text = |s: Option<&str>| json!(s.unwrap_or_default());
    state.insert("GroupDescription".into(), text(group.description()));
    state.insert("GroupName".into(), text(group.group_name()));
    if let Some(vpc) = group.vpc_id() {
        state.insert("VpcId".into(), json!(vpc));
    }
    if !ingress.is_empty() {
        state.insert(
            "SecurityGroupIngress".into(),
            template_list(&ingress, false),
        );
    }
    if egress != [allow_all_egress()] {
        state.insert("SecurityGroupEgress".into(), template_list(&egress, true));
    }
    insert_tags(&mut state, template_tags(group.tags()));
    state
}

/// Every rule of the group `group_id` (`DescribeSecurityGroupRules`, all pages).
pub(crate) async fn group_rules(
    client: &Client,
    retry: &RetryPolicy,
    group_id: &str,
) -> Result<Vec<SecurityGroupRule>, ProviderError> {
    let filter = Filter::builder().name("group-id").values(group_id).build();
    let mut rules = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let out = ec2_call(retry, "DescribeSecurityGroupRules", || {
            client
                .describe_security_group_rules()
                .filters(filter.clone())
                .set_next_token(token.clone())
                .send()
        })
        .await?;
        rules.extend(out.security_group_rules().iter().cloned());
        match out.next_token().filter(|t| !t.is_empty()) {
            Some(next) => token = Some(next.to_string()),
            None => return Ok(rules),
        }
    }
}

impl SecurityGroupProvider {
    /// The group named `name` (in `vpc` when given).
    async fn named(
        &self,
        name: &str,
        vpc: Option<&str>,
    ) -> Result<Option<SecurityGroup>, ProviderError> {
        let mut filters = vec![Filter::builder().name("group-name").values(name).build()];
        if let Some(vpc) = vpc {
            filters.push(Filter::builder().name("vpc-id").values(vpc).build());
        }
        let out = ec2_call(&self.retry, "DescribeSecurityGroups", || {
            self.client
                .describe_security_groups()
                .set_filters(Some(filters.clone()))
                .send()
        })
        .await?;
        Ok(out
            .security_groups()
            .iter()
            .find(|g| g.group_name() == Some(name) && (vpc.is_none() || g.vpc_id() == vpc))
            .cloned())
    }

    /// The rules of the group `group_id`.
    async fn rules(&self, group_id: &str) -> Result<Vec<SecurityGroupRule>, ProviderError> {
        group_rules(&self.client, &self.retry, group_id).await
    }

    /// Revokes `rules` (a direction's) of the group `group_id`; a rule already gone is
    /// done.
    async fn revoke(
        &self,
        group_id: &str,
        egress: bool,
        rules: &[Rule],
    ) -> Result<(), ProviderError> {
        if rules.is_empty() {
            return Ok(());
        }
        let perms: Vec<_> = rules.iter().map(Rule::permission).collect();
        let done = if egress {
            ec2_call(&self.retry, "RevokeSecurityGroupEgress", || {
                self.client
                    .revoke_security_group_egress()
                    .group_id(group_id)
                    .set_ip_permissions(Some(perms.clone()))
                    .send()
            })
            .await
            .map(drop)
        } else {
            ec2_call(&self.retry, "RevokeSecurityGroupIngress", || {
                self.client
                    .revoke_security_group_ingress()
                    .group_id(group_id)
                    .set_ip_permissions(Some(perms.clone()))
                    .send()
            })
            .await
            .map(drop)
        };
        match done {
            Err(ProviderError::NotFound(_)) => Ok(()),
            other => other,
        }
    }

    /// Authorizes `rules` (a direction's) on the group `group_id`, each rule tagged with
    /// the marks of `request`. When some exist already (a replayed update), they are
    /// authorized one by one and those that exist are passed over.
    async fn authorize(
        &self,
        request: &ResourceRequest,
        group_id: &str,
        egress: bool,
        rules: &[Rule],
    ) -> Result<(), ProviderError> {
        match self.authorize_batch(request, group_id, egress, rules).await {
            Err(ProviderError::AlreadyExists(_)) if rules.len() > 1 => {
                for rule in rules {
                    let one = std::slice::from_ref(rule);
                    match self.authorize_batch(request, group_id, egress, one).await {
                        Ok(()) | Err(ProviderError::AlreadyExists(_)) => {}
                        Err(e) => return Err(e),
                    }
                }
                Ok(())
            }
            Err(ProviderError::AlreadyExists(_)) => Ok(()),
            other => other,
        }
    }

    async fn authorize_batch(
        &self,
        request: &ResourceRequest,
        group_id: &str,
        egress: bool,
        rules: &[Rule],
    ) -> Result<(), ProviderError> {
        if rules.is_empty() {
            return Ok(());
        }
        let perms: Vec<_> = rules.iter().map(Rule::permission).collect();
        let mut marks_only = request.clone();
        marks_only.properties.remove("Tags");
        let spec = tag_specification(TYPE, ResourceType::SecurityGroupRule, &marks_only)?;
        if egress {
            ec2_call(&self.retry, "AuthorizeSecurityGroupEgress", || {
                self.client
                    .authorize_security_group_egress()
                    .group_id(group_id)
                    .set_ip_permissions(Some(perms.clone()))
                    .tag_specifications(spec.clone())
                    .send()
            })
            .await
            .map(drop)
        } else {
            ec2_call(&self.retry, "AuthorizeSecurityGroupIngress", || {
                self.client
                    .authorize_security_group_ingress()
                    .group_id(group_id)
                    .set_ip_permissions(Some(perms.clone()))
                    .tag_specifications(spec.clone())
                    .send()
            })
            .await
            .map(drop)
        }
    }

    /// Brings the group's rules from `(old_in, old_out)` to `(new_in, new_out)`: revokes
    /// first, then authorizes.
    async fn apply_rules(
        &self,
        request: &ResourceRequest,
        group_id: &str,
        old: (Vec<Rule>, Vec<Rule>),
        new: (Vec<Rule>, Vec<Rule>),
    ) -> Result<(), ProviderError> {
        let (in_removed, in_added) = rule_changes(&old.0, &new.0);
        let (out_removed, out_added) = rule_changes(&old.1, &new.1);
        self.revoke(group_id, false, &in_removed).await?;
        self.revoke(group_id, true, &out_removed).await?;
        self.authorize(request, group_id, false, &in_added).await?;
        self.authorize(request, group_id, true, &out_added).await
    }

    async fn create_group(
        &self,
        request: &ResourceRequest,
        name: &str,
        description: &str,
        vpc: Option<&str>,
    ) -> Result<SecurityGroup, ProviderError> {
        let spec = tag_specification(TYPE, ResourceType::SecurityGroup, request)?;
        let out = ec2_call(&self.retry, "CreateSecurityGroup", || {
            self.client
                .create_security_group()
                .group_name(name)
                .description(description)
                .set_vpc_id(vpc.map(str::to_string))
                .tag_specifications(spec.clone())
                .send()
        })
        .await?;
        let id = out.group_id().ok_or_else(|| {
            ProviderError::Other("CreateSecurityGroup answered no GroupId".into())
        })?;
        Ok(SecurityGroup::builder()
            .group_id(id)
            .group_name(name)
            .description(description)
            .set_vpc_id(vpc.map(str::to_string))
            .build())
    }
}

impl SdkResource for SecurityGroupProvider {
    type Found = SecurityGroup;
    const TYPE: &'static str = TYPE;
    const NAME_PROPERTY: &'static str = "GroupName";
    const NOUN: &'static str = "security group";

    async fn create(&self, request: &ResourceRequest) -> Result<Created, ProviderError> {
        let props = &request.properties;
        let description = request
            .string_property("GroupDescription")
            .ok_or_else(|| invalid(TYPE, "GroupDescription is required"))?;
        let vpc = request.string_property("VpcId");
        let wanted = wanted_rules(props)?;
        let (name, _generated) = given_or_generated(request, "GroupName", NAME_RULES);
        let ctx = || context(request, TYPE);
        let (group, current) = match self.named(&name, vpc).await? {
            Some(found) if carries_marks(found.tags(), request) => {
                let id = found.group_id().unwrap_or_default().to_string();
                let rules = self.rules(&id).await?;
                (found, split_rules(&rules, Some(&request.logical_id)))
            }
            Some(_) => return Err(Self::name_taken(&name)),
            None => {
                let made = self.create_group(request, &name, description, vpc).await;
                let made = made.map_err(|e| e.context(ctx()))?;
                (made, (Vec::new(), vec![allow_all_egress()]))
            }
        };
        let id = group.group_id().unwrap_or_default().to_string();
        self.apply_rules(request, &id, current, wanted)
            .await
            .map_err(|e| e.context(ctx()))?;
        Ok(Created {
            sensitive: false,
            attributes: attributes(&group),
            physical_id: id_of(&group),
        })
    }

    async fn update(&self, request: &ResourceRequest) -> Result<Updated, ProviderError> {
        let id = request.require_physical_id()?;
        let previous = request.previous_properties.clone().unwrap_or_default();
        let props = &request.properties;
        for key in ["GroupDescription", "GroupName", "VpcId"] {
            if previous.get(key) != props.get(key) {
                return Err(ProviderError::NotUpdatable(format!(
                    "{}: {key} cannot change in place",
                    context(request, TYPE)
                )));
            }
        }
        let group = self
            .find(id)
            .await?
            .ok_or_else(|| ProviderError::NotFound(format!("{TYPE} {id}")))?;
        let group_id = group.group_id().unwrap_or_default().to_string();
        let (old, new) = (wanted_rules(&previous)?, wanted_rules(props)?);
        self.apply_rules(request, &group_id, old, new)
            .await
            .map_err(|e| e.context(context(request, TYPE)))?;
        let tags = Ec2Tags {
            client: &self.client,
            retry: &self.retry,
        };
        tags.sync_tags(&group_id, &tag_map(&previous), &tag_map(props))
            .await?;
        Ok(Updated {
            sensitive: false,
            physical_id: id.to_string(),
            attributes: attributes(&group),
            replaced: false,
        })
    }

    async fn remove(&self, id: &str) -> Result<(), ProviderError> {
        let by_id = id.starts_with("sg-");
        ec2_call(&self.retry, "DeleteSecurityGroup", || {
            let call = self.client.delete_security_group();
            if by_id {
                call.group_id(id).send()
            } else {
                call.group_name(id).send()
            }
        })
        .await
        .map(drop)
    }

    /// `DescribeSecurityGroups` by id (`sg-...`) or by name.
    async fn find(&self, id: &str) -> Result<Option<SecurityGroup>, ProviderError> {
        if !id.starts_with("sg-") {
            return self.named(id, None).await;
        }
        let out = ec2_call(&self.retry, "DescribeSecurityGroups", || {
            self.client.describe_security_groups().group_ids(id).send()
        })
        .await;
        Ok(missing_as_none(out)?.and_then(|o| o.security_groups().first().cloned()))
    }

    fn physical_id(_id: String, found: &SecurityGroup) -> String {
        id_of(found)
    }

    fn attributes(&self, _id: &str, found: &SecurityGroup) -> Attributes {
        attributes(found)
    }

    /// The group and its rules, those of the stack's other resources left out.
    async fn read(&self, request: &ResourceRequest) -> Result<CurrentState, ProviderError> {
        let id = request.require_physical_id()?;
        let Some(group) = self.find(id).await? else {
            return Ok(CurrentState::NotFound);
        };
        let rules = self.rules(group.group_id().unwrap_or_default()).await?;
        let split = split_rules(&rules, Some(&request.logical_id));
        Ok(CurrentState::Found(state_of(
            &group,
            split,
            &request.properties,
        )))
    }

    async fn state(&self, _id: &str, group: SecurityGroup) -> Result<CurrentState, ProviderError> {
        let rules = self.rules(group.group_id().unwrap_or_default()).await?;
        let split = split_rules(&rules, None);
        Ok(CurrentState::Found(state_of(
            &group,
            split,
            &Properties::new(),
        )))
    }
}

#[cfg(test)]
mod tests {
    use aws_sdk_ec2::types::{ReferencedSecurityGroup, Tag};
    use serde_json::Value;

    use super::*;
    use crate::sdk::common::testing::props;

    /// The value of `key` as a string.
    fn plain(state: &Properties, key: &str) -> Option<String> {
        state.get(key).and_then(Value::as_str).map(str::to_string)
    }

    fn sdk_rule(egress: bool, cidr: &str, logical: Option<&str>) -> SecurityGroupRule {
        let mut b = SecurityGroupRule::builder()
            .is_egress(egress)
            .ip_protocol("tcp")
            .from_port(80)
            .to_port(80)
            .cidr_ipv4(cidr);
        if let Some(l) = logical {
            b = b.tags(Tag::builder().key(LOGICAL_ID_MARK).value(l).build());
        }
        b.build()
    }

    #[test]
    fn default_egress_is_left_out_and_other_resources_rules_too() {
        let p = props(json!({"GroupDescription": "d", "SecurityGroupIngress": [
            {"IpProtocol": "tcp", "FromPort": 80, "ToPort": 80, "CidrIp": "10.0.0.0/8"}]}));
        let (ingress, egress) = wanted_rules(&p).expect("rules");
        assert_eq!(egress, [allow_all_egress()]);
        let rules = [
            sdk_rule(false, "10.0.0.0/8", Some("Sg")),
            sdk_rule(false, "10.1.0.0/16", Some("OtherRule")),
            SecurityGroupRule::builder()
                .is_egress(true)
                .ip_protocol("-1")
                .from_port(-1)
                .to_port(-1)
                .cidr_ipv4("0.0.0.0/0")
                .build(),
            SecurityGroupRule::builder()
                .is_egress(false)
                .ip_protocol("tcp")
                .from_port(8080)
                .to_port(8080)
                .referenced_group_info(ReferencedSecurityGroup::builder().group_id("sg-1").build())
                .build(),
        ];
        let (got_in, got_out) = split_rules(&rules, Some("Sg"));
        assert_eq!(got_in.len(), 2);
        assert_eq!(got_in[0], ingress[0]);
        let split = (got_in.clone(), got_out.clone());
        let group = SecurityGroup::builder()
            .group_id("sg-9")
            .group_name("n")
            .description("d")
            .vpc_id("vpc-1")
            .build();
        let state = state_of(&group, split, &p);
        assert!(!state.contains_key("SecurityGroupEgress"));
        assert_eq!(plain(&state, "VpcId").as_deref(), Some("vpc-1"));
        assert_eq!(
            state["SecurityGroupIngress"].as_array().map(Vec::len),
            Some(2)
        );
        assert_eq!(id_of(&group), "sg-9");
        let classic = SecurityGroup::builder()
            .group_id("sg-8")
            .group_name("web")
            .build();
        assert_eq!(id_of(&classic), "web");
        let (_, none_out) = split_rules(&rules[..2], None);
        let state = state_of(&group, (Vec::new(), none_out), &Properties::new());
        assert_eq!(state["SecurityGroupEgress"], Value::Array(Vec::new()));
    }
}
