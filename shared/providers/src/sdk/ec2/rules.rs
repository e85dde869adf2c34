//! Security group rules in the two shapes they take: a template's rule (an item of a
//! group's `SecurityGroupIngress`/`SecurityGroupEgress`, or the properties of a standalone
//! `AWS::EC2::SecurityGroupIngress`/`Egress`) and EC2's (`IpPermission` to authorize or
//! revoke, `SecurityGroupRule` as `DescribeSecurityGroupRules` answers it).
//!
//! A [`Rule`] is one protocol, one port range and one peer (an IPv4 or IPv6 range, a
//! security group, or a prefix list), with its description. Two rules are the same rule
//! when all of that is equal; protocols are compared by name (`6` is `tcp`) and the ports
//! of the all-protocols rule (`-1`) are dropped, as EC2 does.

use aws_sdk_ec2::types::{
    IpPermission, IpRange, Ipv6Range, PrefixListId, SecurityGroupRule, SecurityGroupRuleRequest,
    UserIdGroupPair,
};
use serde_json::{Value, json};

use crate::error::ProviderError;
use crate::provider::Properties;
use crate::sdk::common::{int_of, invalid, string_or_number_of};

/// The peer of a rule: where traffic comes from (ingress) or goes to (egress).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Peer {
    /// An IPv4 range (`CidrIp`).
    Cidr4(String),
    /// An IPv6 range (`CidrIpv6`).
    Cidr6(String),
    /// A security group (`SourceSecurityGroupId` / `DestinationSecurityGroupId`).
    Group(String),
    /// A prefix list (`SourcePrefixListId` / `DestinationPrefixListId`).
    PrefixList(String),
}

/// One security group rule.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rule {
    /// The protocol's name (`tcp`, `udp`, `icmp`, `-1`) or number.
    pub protocol: String,
    /// The first port (or ICMP type); `None` for all protocols.
    pub from: Option<i32>,
    /// The last port (or ICMP code); `None` for all protocols.
    pub to: Option<i32>,
    /// The peer.
    pub peer: Peer,
    /// The description, `None` when empty.
    pub description: Option<String>,
}

/// The template keys of a direction's peers: (security group, prefix list).
fn peer_keys(egress: bool) -> (&'static str, &'static str) {
    if egress {
        ("DestinationSecurityGroupId", "DestinationPrefixListId")
    } else {
        ("SourceSecurityGroupId", "SourcePrefixListId")
    }
}

/// A protocol as EC2 names it: the numbers of TCP, UDP and ICMP by name, `all` as `-1`.
pub fn protocol_name(protocol: &str) -> String {
    match protocol.to_ascii_lowercase().as_str() {
        "6" => "tcp".into(),
        "17" => "udp".into(),
        "1" => "icmp".into(),
        "all" => "-1".into(),
        other => other.to_string(),
    }
}

/// The AWS default egress rule of a new group: all traffic to anywhere over IPv4.
pub fn allow_all_egress() -> Rule {
    Rule {
        protocol: "-1".into(),
        from: None,
        to: None,
        peer: Peer::Cidr4("0.0.0.0/0".into()),
        description: None,
    }
}

impl Rule {
    /// The rule a template writes (`props`: a rule item or a standalone rule's properties)
    /// for a `type_name` resource; `egress` picks the peer keys.
    pub fn from_template(
        type_name: &str,
        props: &Properties,
        egress: bool,
    ) -> Result<Rule, ProviderError> {
        let protocol = string_or_number_of(props, "IpProtocol")
            .map(|p| protocol_name(&p))
            .ok_or_else(|| invalid(type_name, "a rule needs an IpProtocol"))?;
        let (group_key, list_key) = peer_keys(egress);
        let text = |k: &str| props.get(k).and_then(Value::as_str).map(str::to_string);
        let peer = match (
            text("CidrIp"),
            text("CidrIpv6"),
            text(group_key),
            text(list_key),
        ) {
            (Some(c), None, None, None) => Peer::Cidr4(c),
            (None, Some(c), None, None) => Peer::Cidr6(c),
            (None, None, Some(g), None) => Peer::Group(g),
            (None, None, None, Some(p)) => Peer::PrefixList(p),
            _ => {
                return Err(invalid(
                    type_name,
                    &format!(
                        "a rule needs exactly one of CidrIp, CidrIpv6, {group_key}, {list_key}"
                    ),
                ));
            }
        };
        let all = protocol == "-1";
        Ok(Rule {
            from: if all {
                None
            } else {
                int_of(type_name, props, "FromPort")?
            },
            to: if all {
                None
            } else {
                int_of(type_name, props, "ToPort")?
            },
            protocol,
            peer,
            description: text("Description").filter(|d| !d.is_empty()),
        })
    }

    /// The rules of a group's rule list (`key`, absent: none).
    pub fn list_from_template(
        type_name: &str,
        props: &Properties,
        key: &str,
        egress: bool,
    ) -> Result<Vec<Rule>, ProviderError> {
        let Some(list) = props.get(key) else {
            return Ok(Vec::new());
        };
        let items = list
            .as_array()
            .ok_or_else(|| invalid(type_name, &format!("{key} must be a list of rules")))?;
        items
            .iter()
            .map(|item| {
                let rule = item
                    .as_object()
                    .ok_or_else(|| invalid(type_name, &format!("{key}: a rule is an object")))?;
                Rule::from_template(type_name, rule, egress)
            })
            .collect()
    }

    /// The rule as `DescribeSecurityGroupRules` answers it.
    pub fn from_sdk(rule: &SecurityGroupRule) -> Option<Rule> {
        let peer = if let Some(c) = rule.cidr_ipv4() {
            Peer::Cidr4(c.to_string())
        } else if let Some(c) = rule.cidr_ipv6() {
            Peer::Cidr6(c.to_string())
        } else if let Some(g) = rule.referenced_group_info().and_then(|g| g.group_id()) {
            Peer::Group(g.to_string())
        } else {
            Peer::PrefixList(rule.prefix_list_id()?.to_string())
        };
        let protocol = protocol_name(rule.ip_protocol()?);
        let all = protocol == "-1";
        Some(Rule {
            from: if all { None } else { rule.from_port() },
            to: if all { None } else { rule.to_port() },
            protocol,
            peer,
            description: rule
                .description()
                .filter(|d| !d.is_empty())
                .map(str::to_string),
        })
    }

    /// The rule as EC2 takes it in an authorize or revoke call.
    pub fn permission(&self) -> IpPermission {
        let d = self.description.clone();
        let b = IpPermission::builder()
            .ip_protocol(&self.protocol)
            .set_from_port(self.from)
            .set_to_port(self.to);
        match &self.peer {
            Peer::Cidr4(c) => b.ip_ranges(IpRange::builder().cidr_ip(c).set_description(d).build()),
            Peer::Cidr6(c) => {
                b.ipv6_ranges(Ipv6Range::builder().cidr_ipv6(c).set_description(d).build())
            }
            Peer::Group(g) => b.user_id_group_pairs(
                UserIdGroupPair::builder()
                    .group_id(g)
                    .set_description(d)
                    .build(),
            ),
            Peer::PrefixList(p) => b.prefix_list_ids(
                PrefixListId::builder()
                    .prefix_list_id(p)
                    .set_description(d)
                    .build(),
            ),
        }
        .build()
    }

    /// The rule as `ModifySecurityGroupRules` takes it.
    pub fn request(&self) -> SecurityGroupRuleRequest {
        let b = SecurityGroupRuleRequest::builder()
            .ip_protocol(&self.protocol)
            .set_from_port(self.from)
            .set_to_port(self.to)
            .set_description(self.description.clone());
        match &self.peer {
            Peer::Cidr4(c) => b.cidr_ipv4(c),
            Peer::Cidr6(c) => b.cidr_ipv6(c),
            Peer::Group(g) => b.referenced_group_id(g),
            Peer::PrefixList(p) => b.prefix_list_id(p),
        }
        .build()
    }

    /// The rule in the template's shape (`egress` picks the peer keys); ports are left out
    /// for all protocols.
    pub fn template(&self, egress: bool) -> Properties {
        let mut out = Properties::new();
        out.insert("IpProtocol".into(), json!(self.protocol));
        if let Some(from) = self.from {
            out.insert("FromPort".into(), json!(from));
        }
        if let Some(to) = self.to {
            out.insert("ToPort".into(), json!(to));
        }
        let (group_key, list_key) = peer_keys(egress);
        let (key, value) = match &self.peer {
            Peer::Cidr4(c) => ("CidrIp", c),
            Peer::Cidr6(c) => ("CidrIpv6", c),
            Peer::Group(g) => (group_key, g),
            Peer::PrefixList(p) => (list_key, p),
        };
        out.insert(key.into(), json!(value));
        if let Some(d) = &self.description {
            out.insert("Description".into(), json!(d));
        }
        out
    }

    /// True when `other` is this rule whatever its description.
    pub fn same_traffic(&self, other: &Rule) -> bool {
        self.protocol == other.protocol
            && self.from == other.from
            && self.to == other.to
            && self.peer == other.peer
    }
}

/// The rules of `old` that `new` lacks, and those of `new` that `old` lacks (a changed
/// description is one of each: EC2 identifies a rule without it).
pub fn rule_changes(old: &[Rule], new: &[Rule]) -> (Vec<Rule>, Vec<Rule>) {
    let removed = old.iter().filter(|r| !new.contains(r)).cloned().collect();
    let added = new.iter().filter(|r| !old.contains(r)).cloned().collect();
    (removed, added)
}

/// `rules` ordered as the template lists them (`template`), those it does not list after
/// them in a fixed order: a read of what the template asked for gives the template's list
/// back, item for item.
pub fn in_template_order(mut rules: Vec<Rule>, template: &[Rule]) -> Vec<Rule> {
    let place = |r: &Rule| template.iter().position(|t| t == r).unwrap_or(usize::MAX);
    rules.sort_by(|a, b| place(a).cmp(&place(b)).then_with(|| a.cmp(b)));
    rules.dedup();
    rules
}

/// `rules` as a template list, in their order.
pub fn template_list(rules: &[Rule], egress: bool) -> Value {
    Value::Array(
        rules
            .iter()
            .map(|r| Value::Object(r.template(egress)))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sdk::common::testing::props;

    #[test]
    fn template_rules_round_trip() {
        let p = props(json!({"IpProtocol": "6", "FromPort": "443", "ToPort": 443,
            "SourceSecurityGroupId": "sg-1", "Description": "web"}));
        let rule = Rule::from_template("T", &p, false).expect("rule");
        assert_eq!(rule.protocol, "tcp");
        assert_eq!(rule.peer, Peer::Group("sg-1".into()));
        assert_eq!(
            Value::Object(rule.template(false)),
            json!({"IpProtocol": "tcp", "FromPort": 443, "ToPort": 443,
                "SourceSecurityGroupId": "sg-1", "Description": "web"})
        );
        let all = props(json!({"IpProtocol": -1, "FromPort": -1, "CidrIp": "0.0.0.0/0"}));
        let all = Rule::from_template("T", &all, true).expect("rule");
        assert_eq!(all, allow_all_egress());
        let perm = all.permission();
        assert_eq!(perm.ip_protocol(), Some("-1"));
        assert_eq!(perm.from_port(), None);
        assert!(Rule::from_template("T", &props(json!({"IpProtocol": "tcp"})), true).is_err());
        let two = props(json!({"IpProtocol": "tcp", "CidrIp": "a", "CidrIpv6": "b"}));
        assert!(Rule::from_template("T", &two, true).is_err());
    }

    #[test]
    fn changes_treat_a_new_description_as_a_new_rule() {
        let a = allow_all_egress();
        let mut b = a.clone();
        b.description = Some("Allow all".into());
        let (removed, added) = rule_changes(std::slice::from_ref(&a), std::slice::from_ref(&b));
        assert_eq!((removed, added), (vec![a.clone()], vec![b.clone()]));
        assert!(a.same_traffic(&b));
        let listed = in_template_order(vec![b.clone(), a.clone(), b.clone()], &[b.clone()]);
        assert_eq!(listed, [b.clone(), a]);
        assert_eq!(
            template_list(&listed[..1], true),
            json!([{"IpProtocol": "-1", "CidrIp": "0.0.0.0/0", "Description": "Allow all"}])
        );
    }
}
