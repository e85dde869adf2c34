//! Checks of a resource's resolved properties that CloudFormation's contract for its type
//! makes, run while planning, so that a deploy refuses the template before any AWS call
//! instead of failing at that resource after others were made.
//!
//! Security group rules: CloudFormation documents that a rule (an
//! `AWS::EC2::SecurityGroupIngress` or `Egress`, or an item of a group's
//! `SecurityGroupIngress`/`SecurityGroupEgress`) names exactly one source or destination:
//! `CidrIp`, `CidrIpv6`, a prefix list or a security group. EC2's
//! `AuthorizeSecurityGroupIngress` would take an IPv4 and an IPv6 range in one permission,
//! but it makes two rules of it, two `sgr-` ids, while the resource's `Ref` is one rule id:
//! the stack could neither track nor delete the second. stackflow follows CloudFormation:
//! such a rule is refused, with the fix (one rule for each range).

use serde_json::{Map, Value};

use crate::error::{ErrorKind, Path, Result, TemplateError};

/// The keys that name where a rule's traffic comes from (ingress).
const INGRESS_PEERS: &[&str] = &[
    "CidrIp",
    "CidrIpv6",
    "SourcePrefixListId",
    "SourceSecurityGroupId",
    "SourceSecurityGroupName",
];

/// The keys that name where a rule's traffic goes to (egress).
const EGRESS_PEERS: &[&str] = &[
    "CidrIp",
    "CidrIpv6",
    "DestinationPrefixListId",
    "DestinationSecurityGroupId",
];

/// Checks the resolved `properties` of resource `id`, of type `ty`.
pub fn check_resource(id: &str, ty: &str, properties: &Map<String, Value>) -> Result<()> {
    let at = Path::from_keys(["Resources", id, "Properties"]);
    match ty {
        "AWS::EC2::SecurityGroupIngress" => one_peer(properties, INGRESS_PEERS, &at),
        "AWS::EC2::SecurityGroupEgress" => one_peer(properties, EGRESS_PEERS, &at),
        "AWS::EC2::SecurityGroup" => {
            for (key, peers) in [
                ("SecurityGroupIngress", INGRESS_PEERS),
                ("SecurityGroupEgress", EGRESS_PEERS),
            ] {
                let Some(Value::Array(rules)) = properties.get(key) else {
                    continue;
                };
                for (i, rule) in rules.iter().enumerate() {
                    if let Value::Object(rule) = rule {
                        one_peer(rule, peers, &at.key(key).index(i))?;
                    }
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Fails when `rule` names more than one of `peers`.
fn one_peer(rule: &Map<String, Value>, peers: &[&str], at: &Path) -> Result<()> {
    let named: Vec<&str> = peers
        .iter()
        .copied()
        .filter(|k| rule.get(*k).is_some_and(|v| !v.is_null()))
        .collect();
    if named.len() <= 1 {
        return Ok(());
    }
    let hint = if named == ["CidrIp", "CidrIpv6"] {
        "make it two rules, one with CidrIp and one with CidrIpv6 (the same ports and protocol)"
            .to_string()
    } else {
        format!("make it one rule for each of {}", named.join(", "))
    };
    Err(TemplateError::new(
        ErrorKind::Structure,
        at,
        format!(
            "a security group rule names exactly one source or destination, and this one \
             names {}: CloudFormation refuses it, and EC2 would make a rule for each",
            named.join(" and ")
        ),
    )
    .with_hint(hint))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn props(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    #[test]
    fn a_rule_with_an_ipv4_and_an_ipv6_range_is_refused_with_the_fix() {
        let dual = props(
            json!({"GroupId": "sg-1", "IpProtocol": "tcp", "FromPort": 443,
            "ToPort": 443, "CidrIp": "0.0.0.0/0", "CidrIpv6": "::/0"}),
        );
        let e = check_resource("Https", "AWS::EC2::SecurityGroupIngress", &dual).unwrap_err();
        assert_eq!(e.path, "Resources.Https.Properties");
        assert!(e.message.contains("CidrIp and CidrIpv6"), "{e}");
        assert!(e.hint.as_deref().unwrap().contains("two rules"), "{e}");

        let egress = props(json!({"CidrIp": "10.0.0.0/8",
            "DestinationSecurityGroupId": "sg-2", "IpProtocol": "-1"}));
        let e = check_resource("Out", "AWS::EC2::SecurityGroupEgress", &egress).unwrap_err();
        assert!(
            e.hint
                .as_deref()
                .unwrap()
                .contains("CidrIp, DestinationSecurityGroupId"),
            "{e}"
        );

        let group = props(json!({"GroupDescription": "g", "SecurityGroupIngress": [
            {"IpProtocol": "tcp", "FromPort": 22, "ToPort": 22, "CidrIp": "10.0.0.0/8"},
            {"IpProtocol": "tcp", "FromPort": 80, "ToPort": 80, "CidrIp": "0.0.0.0/0",
             "CidrIpv6": "::/0"}]}));
        let e = check_resource("G", "AWS::EC2::SecurityGroup", &group).unwrap_err();
        assert_eq!(e.path, "Resources.G.Properties.SecurityGroupIngress[1]");
    }

    #[test]
    fn one_peer_per_rule_passes() {
        for (ty, p) in [
            (
                "AWS::EC2::SecurityGroupIngress",
                json!({"IpProtocol": "tcp", "CidrIpv6": "::/0", "FromPort": 1, "ToPort": 2}),
            ),
            (
                "AWS::EC2::SecurityGroupEgress",
                json!({"IpProtocol": "-1", "DestinationPrefixListId": "pl-1"}),
            ),
            (
                "AWS::EC2::SecurityGroup",
                json!({"SecurityGroupEgress": [{"IpProtocol": "-1", "CidrIp": "0.0.0.0/0"}]}),
            ),
            ("AWS::SQS::Queue", json!({"CidrIp": "x", "CidrIpv6": "y"})),
        ] {
            assert_eq!(check_resource("R", ty, &props(p)), Ok(()), "{ty}");
        }
    }
}
