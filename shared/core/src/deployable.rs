//! What an installed engine may deploy: the resource types its operator allowed
//! (`stackflow engine deploy --allow-type`), and the IAM actions the provisioning role
//! is given for them.
//!
//! A pattern is a type (`AWS::SNS::Topic`), a service (`AWS::SQS::*`), or `Custom::*`
//! for custom resources. A template with a type outside the patterns is refused before
//! any AWS call, each such resource named with its path.

use indexmap::IndexMap;

use crate::template::{NestedTemplate, Template};

/// Why resource type patterns are refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeployableError {
    /// A pattern of no accepted form.
    #[error(
        "'{0}' is not a resource type pattern: give AWS::<Service>::<Type> (AWS::SNS::Topic), \
         AWS::<Service>::* (every type of a service) or Custom::* (custom resources)"
    )]
    NotAPattern(String),
    /// `*` allows every type, so no service's actions can be derived from it.
    #[error(
        "--allow-type '*' names no service to derive the provisioning role's actions from: \
         give the role its policies with --parameter ProvisioningPolicyArns=ARN[,ARN]"
    )]
    NoService,
}

/// The resource types an engine may deploy.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Deployable {
    patterns: Vec<String>,
}

/// Types the engine itself carries out: no service is called for them.
const ENGINE_TYPES: &[&str] = &[
    "AWS::CloudFormation::Stack",
    "AWS::CloudFormation::WaitCondition",
    "AWS::CloudFormation::WaitConditionHandle",
    "AWS::CDK::Metadata",
];

impl Deployable {
    /// Parses patterns, each checked: `AWS::<Service>::<Type>`, `AWS::<Service>::*`,
    /// `Custom::*` (custom resources), or `*` (every type).
    pub fn new<I, T>(patterns: I) -> Result<Deployable, DeployableError>
    where
        I: IntoIterator<Item = T>,
        T: AsRef<str>,
    {
        let mut out = Vec::new();
        for p in patterns {
            let p = p.as_ref().trim();
            if p.is_empty() {
                continue;
            }
            check_pattern(p)?;
            if !out.iter().any(|q| q == p) {
                out.push(p.to_string());
            }
        }
        Ok(Deployable { patterns: out })
    }

    /// The patterns of a comma-separated list (`STACKFLOW_ALLOWED_TYPES`).
    pub fn from_list(list: &str) -> Result<Deployable, DeployableError> {
        Deployable::new(list.split(','))
    }

    /// The patterns, as given.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    /// Whether resources of type `ty` may be deployed.
    pub fn permits(&self, ty: &str) -> bool {
        if ENGINE_TYPES.contains(&ty) {
            return true;
        }
        let custom = is_custom(ty);
        self.patterns.iter().any(|p| {
            p == "*"
                || p == ty
                || (custom && p == "Custom::*")
                || p.strip_suffix('*')
                    .is_some_and(|prefix| prefix.ends_with("::") && ty.starts_with(prefix))
        })
    }

    /// One line for each resource of `template` (and its nested stacks', at every depth)
    /// whose type is not permitted, naming its path; empty when all are.
    pub fn refusals(
        &self,
        source: &str,
        template: &Template,
        nested: &IndexMap<String, NestedTemplate>,
    ) -> Vec<String> {
        let mut out = Vec::new();
        self.refusals_into(source, template, nested, &mut out);
        out
    }

    fn refusals_into(
        &self,
        source: &str,
        template: &Template,
        nested: &IndexMap<String, NestedTemplate>,
        out: &mut Vec<String>,
    ) {
        for (id, resource) in &template.resources {
            if !self.permits(&resource.ty) {
                out.push(format!("{source}: Resources.{id}.Type {}", resource.ty));
            }
        }
        for (id, child) in nested {
            let source = format!("{source} > {id} ({})", child.file.display());
            self.refusals_into(&source, &child.template, &child.nested, out);
        }
    }

    /// The refusal of a deploy with `refused` (from [`Deployable::refusals`]).
    pub fn refusal(&self, stack: &str, refused: &[String]) -> String {
        let lines: String = refused.iter().map(|r| format!("\n  - {r}")).collect();
        let allowed = if self.patterns.is_empty() {
            "none".to_string()
        } else {
            self.patterns.join(", ")
        };
        format!(
            "stack {stack}: this engine may not deploy these resource types (nothing was \
             changed):{lines}\nit may deploy: {allowed}. An operator allows more by \
             installing it again with `stackflow engine deploy --allow-type TYPE` (a type, \
             or AWS::<Service>::*)"
        )
    }

    /// The IAM actions the provisioning role needs for these types: every action of
    /// each service named (`sns:*`), `lambda:InvokeFunction` and `sns:Publish` for
    /// custom resources. Refused for `*`, which names no service: an operator who allows
    /// every type gives the role its policies (`ProvisioningPolicyArns`).
    pub fn actions(&self) -> Result<Vec<String>, DeployableError> {
        let mut out: Vec<String> = Vec::new();
        let mut add = |a: String| {
            if !out.contains(&a) {
                out.push(a);
            }
        };
        for p in &self.patterns {
            if p == "*" {
                return Err(DeployableError::NoService);
            }
            if p == "Custom::*" || p == "AWS::CloudFormation::CustomResource" {
                add("lambda:InvokeFunction".into());
                add("sns:Publish".into());
                continue;
            }
            if ENGINE_TYPES.contains(&p.as_str()) {
                continue;
            }
            let service = p.split("::").nth(1).unwrap_or_default();
            for prefix in iam_prefixes(service) {
                add(format!("{prefix}:*"));
            }
        }
        Ok(out)
    }
}

fn is_custom(ty: &str) -> bool {
    ty.starts_with("Custom::") || ty == "AWS::CloudFormation::CustomResource"
}

fn check_pattern(p: &str) -> Result<(), DeployableError> {
    if p == "*" || p == "Custom::*" {
        return Ok(());
    }
    let parts: Vec<&str> = p.split("::").collect();
    let word = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric());
    let ok = parts.len() == 3
        && (parts[0] == "AWS" || parts[0] == "Custom")
        && word(parts[1])
        && (parts[2] == "*" || word(parts[2]));
    if ok {
        Ok(())
    } else {
        Err(DeployableError::NotAPattern(p.to_string()))
    }
}

/// The IAM service prefixes of a CloudFormation service namespace (`SQS` is `sqs`,
/// `ElasticLoadBalancingV2` is `elasticloadbalancing`).
fn iam_prefixes(service: &str) -> Vec<String> {
    let named: &[&str] = match service {
        "ApiGateway" | "ApiGatewayV2" => &["apigateway"],
        "ApplicationAutoScaling" => &["application-autoscaling"],
        "CertificateManager" => &["acm"],
        "Cognito" => &["cognito-idp", "cognito-identity"],
        "EFS" => &["elasticfilesystem"],
        "ElasticLoadBalancing" | "ElasticLoadBalancingV2" => &["elasticloadbalancing"],
        "Elasticsearch" | "OpenSearchService" => &["es"],
        "KinesisFirehose" => &["firehose"],
        "StepFunctions" => &["states"],
        "CloudWatch" => &["cloudwatch"],
        "EventSchemas" => &["schemas"],
        "OpenSearchServerless" => &["aoss"],
        "Route53Resolver" => &["route53resolver"],
        "SSO" => &["sso"],
        _ => &[],
    };
    if named.is_empty() {
        vec![service.to_ascii_lowercase()]
    } else {
        named.iter().map(|s| s.to_string()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(types: &[(&str, &str)]) -> Template {
        let resources: serde_json::Map<String, serde_json::Value> = types
            .iter()
            .map(|(id, ty)| (id.to_string(), serde_json::json!({ "Type": ty })))
            .collect();
        Template::from_value(&serde_json::json!({ "Resources": resources })).unwrap()
    }

    #[test]
    fn types_services_and_custom_resources_are_matched() {
        let d = Deployable::new(["AWS::SNS::Topic", "AWS::SQS::*", "Custom::*"]).unwrap();
        assert!(d.permits("AWS::SNS::Topic"));
        assert!(!d.permits("AWS::SNS::Subscription"));
        assert!(d.permits("AWS::SQS::QueuePolicy"));
        assert!(!d.permits("AWS::SQSX::Queue"));
        assert!(d.permits("Custom::Anything"));
        assert!(d.permits("AWS::CloudFormation::CustomResource"));
        assert!(d.permits("AWS::CDK::Metadata"), "the engine's own types");
        assert!(!d.permits("AWS::EC2::Instance"));
        assert!(
            Deployable::new(["*"])
                .unwrap()
                .permits("AWS::EC2::Instance")
        );
        assert!(
            !Deployable::new(Vec::<String>::new())
                .unwrap()
                .permits("AWS::SNS::Topic")
        );
    }

    #[test]
    fn a_pattern_that_is_not_a_type_is_refused() {
        for bad in [
            "sns",
            "AWS::SNS",
            "AWS::SNS::Top*",
            "AWS::*::*",
            "aws::sns::topic",
        ] {
            let e = Deployable::new([bad]).unwrap_err();
            assert_eq!(e, DeployableError::NotAPattern(bad.into()));
            let text = e.to_string();
            assert!(
                text.contains(bad) && text.contains("AWS::<Service>::*"),
                "{e}"
            );
        }
        assert_eq!(
            Deployable::from_list("AWS::SNS::Topic, ,AWS::SNS::Topic")
                .unwrap()
                .patterns(),
            ["AWS::SNS::Topic"]
        );
    }

    #[test]
    fn every_refused_resource_is_named_with_its_path_nested_ones_too() {
        let d = Deployable::new(["AWS::SNS::*"]).unwrap();
        let mut nested = IndexMap::new();
        nested.insert(
            "Child".to_string(),
            NestedTemplate {
                file: "child.json".into(),
                template: template(&[("Box", "AWS::EC2::Instance")]),
                nested: IndexMap::new(),
            },
        );
        let t = template(&[
            ("Topic", "AWS::SNS::Topic"),
            ("Queue", "AWS::SQS::Queue"),
            ("Child", "AWS::CloudFormation::Stack"),
        ]);
        let refused = d.refusals("app.yaml", &t, &nested);
        assert_eq!(
            refused,
            [
                "app.yaml: Resources.Queue.Type AWS::SQS::Queue",
                "app.yaml > Child (child.json): Resources.Box.Type AWS::EC2::Instance",
            ]
        );
        let text = d.refusal("App", &refused);
        assert!(text.contains("it may deploy: AWS::SNS::*"), "{text}");
        assert!(text.contains("--allow-type"), "{text}");
    }

    #[test]
    fn actions_are_the_named_services_never_everything() {
        let d = Deployable::new([
            "AWS::SQS::Queue",
            "AWS::SQS::QueuePolicy",
            "AWS::ElasticLoadBalancingV2::*",
            "AWS::StepFunctions::StateMachine",
            "Custom::*",
            "AWS::CloudFormation::Stack",
        ])
        .unwrap();
        assert_eq!(
            d.actions().unwrap(),
            [
                "sqs:*",
                "elasticloadbalancing:*",
                "states:*",
                "lambda:InvokeFunction",
                "sns:Publish"
            ]
        );
        let e = Deployable::new(["*"]).unwrap().actions().unwrap_err();
        assert_eq!(e, DeployableError::NoService);
        assert!(e.to_string().contains("ProvisioningPolicyArns"), "{e}");
    }
}
