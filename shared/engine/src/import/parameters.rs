//! Seed 003's "parameters deployed with a non-default value": an import binds every
//! template parameter at its Default, so a resource that depends on a parameter whose
//! deployed value cannot be proven equal to the Default gets no baseline (it could hold
//! the real value of a parameter meant to stay secret). The deployed values are read from
//! the CloudFormation stack that backs the import (`DescribeStacks`), only compared,
//! never logged nor recorded.

use stackflow_core::drift::resources_depending_on;
use stackflow_core::template::Template;
use stackflow_events::EventStore;

use crate::deploy::Deployment;
use crate::lookups::{DeployedParameters, LookupError};

/// The parameters some resource's properties depend on (`Rules` do not count: CDK's
/// `BootstrapVersion` is used only there). Unknown dependence counts.
pub(super) fn referenced(template: &Template) -> Vec<String> {
    template
        .parameters
        .keys()
        .filter(|p| {
            !resources_depending_on(template, &[(*p).clone()])
                .all()
                .is_empty()
        })
        .cloned()
        .collect()
}

/// Of `referenced`, those whose deployed value (`deployed`: key, value as
/// `DescribeStacks` answers) cannot be proven equal to the Default: a different value, a
/// `{{resolve:...}}` reference, or a `NoEcho` parameter (CloudFormation answers `****`).
/// A parameter the stack was not deployed with took its Default.
pub(super) fn unprovable(
    template: &Template,
    referenced: &[String],
    deployed: &[(String, String)],
) -> Vec<String> {
    referenced
        .iter()
        .filter(|name| {
            let Some(param) = template.parameters.get(*name) else {
                return true;
            };
            if param.no_echo {
                return true;
            }
            match deployed.iter().find(|(k, _)| k == *name) {
                None => false,
                Some((_, v)) => {
                    v.contains("{{resolve:") || Some(v.as_str()) != param.default.as_deref()
                }
            }
        })
        .cloned()
        .collect()
}

/// The CloudFormation stacks whose deployed values count, and what each answered
/// (`DescribeStacks`, asked once per import, and only when something needs it).
pub(super) struct Backing<'a, S> {
    d: &'a Deployment<S>,
    stacks: &'a [String],
    answers: tokio::sync::OnceCell<Vec<Answer>>,
}

/// A backing stack and its deployed parameters (`None`: no such stack).
type Answer = (String, Result<Option<DeployedParameters>, LookupError>);

impl<'a, S: EventStore + 'static> Backing<'a, S> {
    pub(super) fn new(d: &'a Deployment<S>, stacks: &'a [String]) -> Self {
        Backing {
            d,
            stacks,
            answers: tokio::sync::OnceCell::new(),
        }
    }

    async fn answers(&self) -> &[Answer] {
        self.answers
            .get_or_init(|| async {
                let mut out = Vec::with_capacity(self.stacks.len());
                for stack in self.stacks {
                    let answer = self.d.engine.lookups.deployed_parameters(stack).await;
                    out.push((stack.clone(), answer));
                }
                out
            })
            .await
    }
}

/// The parameters that cannot be proven, and the one warning for the stack. `backing`:
/// the CloudFormation stacks whose deployed values count (a migration's source and each
/// of its nested stacks; otherwise a stack with the stackflow stack's name). A parameter
/// is proven only when every backing stack deployed with it holds its Default; a
/// backing stack whose parameters cannot be read proves none.
pub(super) async fn unproven<S: EventStore + 'static>(
    backing: &Backing<'_, S>,
) -> (Vec<String>, Option<String>) {
    let template = &backing.d.input.template;
    let referenced = referenced(template);
    if referenced.is_empty() {
        return (vec![], None);
    }
    let warn = |names: &[String], why: &str| {
        format!(
            "{why}: the resources that use parameter(s) {} get no baseline \
             (ObservedBaseline: REFUSED (unverifiable-parameter)); their records hold the \
             template's Default, which a deploy that rewrites the property sends to AWS: put \
             the real value in the template (a {{{{resolve:...}}}} reference, or the \
             parameter's Default) and review `stackflow diff` before you deploy",
            names.join(", ")
        )
    };
    let mut names: Vec<String> = Vec::new();
    let mut differing: Vec<&str> = Vec::new();
    for (stack, answer) in backing.answers().await {
        match answer {
            Ok(None) => {}
            Err(e) => {
                let why = format!(
                    "the parameters of CloudFormation stack {stack} could not be read ({}), \
                     so none is proven",
                    e.message
                );
                let w = warn(&referenced, &why);
                return (referenced, Some(w));
            }
            Ok(Some(deployed)) => {
                let these = unprovable(template, &referenced, deployed);
                if !these.is_empty() {
                    differing.push(stack);
                }
                for n in these {
                    if !names.contains(&n) {
                        names.push(n);
                    }
                }
            }
        }
    }
    if names.is_empty() {
        return (vec![], None);
    }
    names.sort_by_key(|n| referenced.iter().position(|r| r == n));
    let why = format!(
        "CloudFormation stack {} was deployed with values that may differ from the \
         Defaults (or NoEcho)",
        differing.join(", ")
    );
    let w = warn(&names, &why);
    (names, Some(w))
}

/// True when the import has proof of every parameter value a stack was deployed with:
/// at least one of the `backing` CloudFormation stacks answered, and each that did was
/// deployed with nothing but the template's Defaults (a parameter the template no longer
/// declares, a `NoEcho` one or a `{{resolve:...}}` value proves nothing). Only that clears
/// an earlier `unverifiable-parameter` refusal (seed 003): without a stack to compare
/// with, or with a template edited so that nothing references the parameter, the
/// deployed value is still unknown.
pub(super) async fn all_proven<S: EventStore + 'static>(backing: &Backing<'_, S>) -> bool {
    let template = &backing.d.input.template;
    let mut answered = false;
    for (_, answer) in backing.answers().await {
        match answer {
            Ok(None) => {}
            Err(_) => return false,
            Ok(Some(deployed)) => {
                answered = true;
                let names: Vec<String> = deployed.iter().map(|(k, _)| k.clone()).collect();
                if !unprovable(template, &names, deployed).is_empty() {
                    return false;
                }
            }
        }
    }
    answered
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn template() -> Template {
        Template::from_value(&json!({
            "Parameters": {
                "Env": {"Type": "String", "Default": "dev"},
                "Secret": {"Type": "String", "Default": "x", "NoEcho": true},
                "Size": {"Type": "Number", "Default": "5"},
                "BootstrapVersion": {"Type": "AWS::SSM::Parameter::Value<String>", "Default": "/cdk-bootstrap/hnb659fds/version"},
                "Unused": {"Type": "String", "Default": "u"}
            },
            "Rules": {"CheckBootstrapVersion": {"Assertions": [{"Assert": {"Fn::Not": [{"Fn::Contains": [["1"], {"Ref": "BootstrapVersion"}]}]}, "AssertDescription": "old"}]}},
            "Resources": {
                "Q": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": {"Fn::Sub": "q-${Env}"}, "DelaySeconds": {"Ref": "Size"}}},
                "P": {"Type": "AWS::SSM::Parameter", "Properties": {"Type": "String", "Value": {"Ref": "Secret"}}}
            }
        }))
        .expect("a template")
    }

    #[test]
    fn only_parameters_resources_use_count() {
        assert_eq!(referenced(&template()), vec!["Env", "Secret", "Size"]);
    }

    #[test]
    fn a_different_value_a_reference_and_no_echo_are_unprovable() {
        let t = template();
        let referenced = referenced(&t);
        let deployed = |env: &str, size: &str| {
            vec![
                ("Env".to_string(), env.to_string()),
                ("Size".to_string(), size.to_string()),
                ("Secret".to_string(), "****".to_string()),
            ]
        };
        assert_eq!(
            unprovable(&t, &referenced, &deployed("dev", "5")),
            vec!["Secret"]
        );
        assert_eq!(
            unprovable(&t, &referenced, &deployed("prod", "5")),
            vec!["Env", "Secret"]
        );
        assert_eq!(
            unprovable(&t, &referenced, &deployed("{{resolve:ssm:/env}}", "5")),
            vec!["Env", "Secret"]
        );
        // Not deployed with it: the Default was used.
        assert_eq!(
            unprovable(&t, &["Env".to_string()], &[]),
            Vec::<String>::new()
        );
    }
}
