//! What an installed engine may deploy (`engine deploy --allow-type`, `--allow-action`):
//! the template's `AllowedTypes` (Plan refuses any other type) and `ProvisioningActions`
//! (the provisioning role's scoped policy), made from the types. Nothing is granted by
//! default: an install names its types, or an update reuses those of the last install.

use stackflow_core::deployable::Deployable;

/// What the engine may deploy, as installed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Scope {
    /// The resource type patterns.
    pub types: Vec<String>,
    /// The provisioning role's actions beyond those made from the types.
    pub actions: Vec<String>,
    /// Who may start a deploy (see [`deployers`]).
    pub deployers: Vec<String>,
}

/// The template parameters this module sets; given with `--parameter` they are refused.
const OWN: [&str; 3] = ["AllowedTypes", "ProvisioningActions", "Deployers"];

/// The principals `aws:PrincipalArn` names for a caller STS describes as `caller`: an
/// assumed role's session is its role (`role/NAME`, or `role/<path>/NAME` for a role
/// with a path, which STS's ARN leaves out), a user or the root is itself.
pub fn principals_of(caller: &str) -> Vec<String> {
    let parts: Vec<&str> = caller.splitn(6, ':').collect();
    if parts.len() == 6 && parts[2] == "sts" {
        let (partition, account) = (parts[1], parts[4]);
        if let Some(rest) = parts[5].strip_prefix("assumed-role/") {
            let role = rest.split('/').next().unwrap_or_default();
            return vec![
                format!("arn:{partition}:iam::{account}:role/{role}"),
                format!("arn:{partition}:iam::{account}:role/*/{role}"),
            ];
        }
    }
    vec![caller.to_string()]
}

/// Who may start a deploy: the principals given (`--deployer`), else the last install's,
/// else the principal installing (`caller`, from STS); said when it is not given.
pub fn deployers(
    given: &[String],
    previous: Vec<String>,
    caller: Option<Result<String, crate::aws::CallFailed>>,
) -> anyhow::Result<Vec<String>> {
    let given = split(given);
    for d in &given {
        if !d.starts_with("arn:") || d.split(':').count() < 6 {
            anyhow::bail!(
                "--deployer {d}: give the ARN of an IAM role or user \
                 (arn:aws:iam::123456789012:role/deployer; wildcards as ArnLike takes them)"
            );
        }
    }
    if !given.is_empty() {
        return Ok(given);
    }
    if !previous.is_empty() {
        return Ok(previous);
    }
    let Some(caller) = caller else {
        anyhow::bail!("who may start a deploy: give --deployer ARN");
    };
    let caller = caller.map_err(|e| {
        anyhow::anyhow!(
            "who may start a deploy: give --deployer ARN (STS could not say who you are: {e})"
        )
    })?;
    let principals = principals_of(&caller);
    eprintln!(
        "deployers (who may put objects under deploy/ and send Deploy Requested events): {} \
         (you; --deployer names others)",
        principals.join(", ")
    );
    Ok(principals)
}

fn split(values: &[String]) -> Vec<String> {
    values
        .iter()
        .flat_map(|v| v.split(','))
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect()
}

/// An `--allow-action` that is not an IAM action of one service.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum BadAction {
    #[error(
        "--allow-action {0}: give an IAM action, service:Action (secretsmanager:GetSecretValue)"
    )]
    NoService(String),
    #[error(
        "--allow-action {0}: give an IAM action of one service, service:Action (a wildcard in \
         the action name is taken, none in the service)"
    )]
    NotOneService(String),
}

fn check_action(action: &str) -> Result<(), BadAction> {
    let Some((service, name)) = action.split_once(':') else {
        return Err(BadAction::NoService(action.to_string()));
    };
    let plain = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '*')
    };
    if service.contains('*') || !plain(service) || !plain(name) {
        return Err(BadAction::NotOneService(action.to_string()));
    }
    Ok(())
}

/// The scope of this install: the types and actions given, else `previous` (the last
/// install's), else a refusal that says what to give.
pub fn scope(
    types: &[String],
    actions: &[String],
    previous: Option<Scope>,
) -> anyhow::Result<Scope> {
    let given = Scope {
        types: split(types),
        actions: split(actions),
        deployers: vec![],
    };
    if given.types.is_empty() {
        if !given.actions.is_empty() {
            anyhow::bail!("--allow-action widens what --allow-type grants: give --allow-type too");
        }
        if let Some(previous) = previous.filter(|p| !p.types.is_empty()) {
            return Ok(previous);
        }
        anyhow::bail!(
            "name what the engine may deploy: --allow-type TYPE, repeatable (AWS::SNS::Topic; \
             AWS::SQS::* for every type of a service; Custom::* for custom resources). The \
             provisioning role gets those services' actions and no others, and a template \
             with any other type is refused before any AWS call. An update reuses the types \
             of the last install"
        );
    }
    for a in &given.actions {
        check_action(a)?;
    }
    Deployable::new(&given.types).map_err(|e| anyhow::anyhow!("--allow-type {e}"))?;
    Ok(given)
}

/// The template's parameters for `scope`, added to `parameters` (refused when they are
/// there already). `--allow-type '*'` names no service: it needs the operator's own
/// `ProvisioningPolicyArns` among `parameters`.
pub fn parameters(scope: &Scope, parameters: &mut Vec<(String, String)>) -> anyhow::Result<()> {
    if let Some((k, _)) = parameters.iter().find(|(k, _)| OWN.contains(&k.as_str())) {
        anyhow::bail!("--parameter {k} is set by --allow-type and --allow-action: give those");
    }
    let policies = parameters
        .iter()
        .any(|(k, v)| k == "ProvisioningPolicyArns" && !v.trim().is_empty());
    let deployable = Deployable::new(&scope.types).map_err(anyhow::Error::msg)?;
    let mut actions = match deployable.actions() {
        Ok(actions) => actions,
        Err(_) if policies => Vec::new(),
        Err(e) => anyhow::bail!(e),
    };
    for a in &scope.actions {
        if !actions.contains(a) {
            actions.push(a.clone());
        }
    }
    parameters.push(("Deployers".into(), scope.deployers.join(",")));
    parameters.push(("AllowedTypes".into(), scope.types.join(",")));
    parameters.push(("ProvisioningActions".into(), actions.join(",")));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn an_install_names_its_types_or_reuses_the_last_ones() {
        let e = scope(&[], &[], None).unwrap_err().to_string();
        assert!(
            e.starts_with("name what the engine may deploy: --allow-type"),
            "{e}"
        );
        let previous = Scope {
            types: strings(&["AWS::SNS::*"]),
            ..Scope::default()
        };
        assert_eq!(scope(&[], &[], Some(previous.clone())).unwrap(), previous);
        let given = scope(
            &strings(&["AWS::SQS::Queue,AWS::SNS::Topic"]),
            &strings(&["secretsmanager:GetSecretValue"]),
            Some(previous),
        )
        .unwrap();
        assert_eq!(given.types, ["AWS::SQS::Queue", "AWS::SNS::Topic"]);
        assert_eq!(given.actions, ["secretsmanager:GetSecretValue"]);
        let e = scope(&strings(&["sqs"]), &[], None)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("--allow-type 'sqs' is not a resource type"),
            "{e}"
        );
    }

    #[test]
    fn no_action_of_every_service_is_taken() {
        for bad in ["*", "*:*", "s*:Get", "sns", "sns:"] {
            let e = scope(&strings(&["AWS::SNS::Topic"]), &strings(&[bad]), None);
            assert!(e.is_err(), "{bad}");
        }
        let e = scope(&[], &strings(&["sns:Publish"]), None).unwrap_err();
        assert!(e.to_string().contains("give --allow-type too"), "{e}");
    }

    #[test]
    fn the_parameters_are_the_types_and_their_services() {
        let s = scope(
            &strings(&["AWS::SQS::*", "AWS::SNS::Topic"]),
            &strings(&["iam:PassRole"]),
            None,
        )
        .unwrap();
        let mut p = vec![];
        parameters(&s, &mut p).unwrap();
        assert_eq!(
            p,
            [
                ("Deployers".into(), String::new()),
                ("AllowedTypes".into(), "AWS::SQS::*,AWS::SNS::Topic".into()),
                (
                    "ProvisioningActions".into(),
                    "sqs:*,sns:*,iam:PassRole".into()
                ),
            ]
        );
        let mut p = vec![("AllowedTypes".to_string(), "*".to_string())];
        let e = parameters(&s, &mut p).unwrap_err().to_string();
        assert!(
            e.contains("--parameter AllowedTypes is set by --allow-type"),
            "{e}"
        );
    }

    #[test]
    fn every_type_needs_policies_of_the_operators_own() {
        let s = scope(&strings(&["*"]), &[], None).unwrap();
        let e = parameters(&s, &mut vec![]).unwrap_err().to_string();
        assert!(e.contains("ProvisioningPolicyArns"), "{e}");
        let arn = "arn:aws:iam::123456789012:policy/deployable";
        let mut p = vec![("ProvisioningPolicyArns".to_string(), arn.to_string())];
        parameters(&s, &mut p).unwrap();
        assert_eq!(p[2], ("AllowedTypes".into(), "*".into()));
        assert_eq!(p[3], ("ProvisioningActions".into(), String::new()));
    }

    #[test]
    fn the_deployers_are_named_or_the_last_ones_or_the_installer() {
        let named = strings(&["arn:aws:iam::123456789012:role/ci"]);
        // Not asked: a deployer named or recorded needs no STS answer.
        let unused = || None;
        assert_eq!(deployers(&named, vec![], unused()).unwrap(), named);
        let previous = strings(&["arn:aws:iam::123456789012:user/ops"]);
        assert_eq!(
            deployers(&[], previous.clone(), unused()).unwrap(),
            previous
        );
        let session = "arn:aws:sts::123456789012:assumed-role/Admin/alice@example.com";
        assert_eq!(
            deployers(&[], vec![], Some(Ok(session.to_string()))).unwrap(),
            [
                "arn:aws:iam::123456789012:role/Admin",
                "arn:aws:iam::123456789012:role/*/Admin"
            ]
        );
        let root = "arn:aws:iam::123456789012:root";
        assert_eq!(principals_of(root), [root]);
        let e = deployers(&strings(&["ci"]), vec![], unused()).unwrap_err();
        assert!(
            e.to_string().starts_with("--deployer ci: give the ARN"),
            "{e}"
        );
        let e = deployers(
            &[],
            vec![],
            Some(Err(crate::aws::CallFailed::NoCredentials)),
        )
        .unwrap_err();
        assert!(e.to_string().contains("give --deployer ARN"), "{e}");
    }
}
