//! A deployed state without AWS, for tests and benchmarks of the plan.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{CurrentState, StateResource};
use crate::error::Result;
use crate::graph::Graph;
use crate::intrinsics::{
    BoundParameters, Environment, Mode, Pseudo, Resolver, StackOutputRef, evaluate_conditions,
};
use crate::secrets::{Masking, no_sensitive_attributes};
use crate::template::Template;

/// An environment that gives every resource a synthetic physical id (ARN-shaped)
/// and attributes (`<logical id>-<attribute>`), for tests and benchmarks that need a
/// deployed state without AWS.
#[derive(Debug, Clone, Copy, Default)]
pub struct SyntheticEnvironment;

impl Environment for SyntheticEnvironment {
    fn resource_ref(&self, id: &str) -> Option<Value> {
        Some(Value::String(synthetic_physical_id(id)))
    }
    fn resource_attribute(&self, id: &str, attr: &str) -> Option<Value> {
        Some(synthetic_attribute(id, attr))
    }
    fn availability_zones(&self, region: &str) -> Option<Vec<String>> {
        Some(vec![
            format!("{region}a"),
            format!("{region}b"),
            format!("{region}c"),
        ])
    }
    fn import_value(&self, name: &str) -> Option<Value> {
        Some(Value::String(format!("import-{name}")))
    }
    fn stack_output(&self, r: &StackOutputRef) -> Option<Value> {
        Some(Value::String(format!("{}-{}", r.stack_name, r.output_name)))
    }
    fn ssm_parameter(&self, name: &str) -> Option<Value> {
        Some(Value::String(format!("ssm-{name}")))
    }
}

/// A synthetic physical id, shaped like an ARN because many types' `Ref` is one.
fn synthetic_physical_id(id: &str) -> String {
    format!("arn:aws:synthetic:us-east-1:123456789012:{id}")
}

/// A synthetic attribute value of the right shape: CIDR blocks are CIDR blocks, list
/// attributes are lists.
fn synthetic_attribute(id: &str, attr: &str) -> Value {
    if attr == "Ipv6CidrBlocks" {
        Value::Array(vec![Value::String("2001:db8::/56".into())])
    } else if attr.ends_with("CidrBlock") {
        Value::String("10.0.0.0/16".into())
    } else if attr.ends_with("CidrBlockAssociations")
        || attr.ends_with("Ids")
        || attr.ends_with("Arns")
    {
        Value::Array(vec![Value::String(format!("{id}-{attr}-0"))])
    } else {
        Value::String(format!("{id}-{attr}"))
    }
}

/// The state a deploy of `template` would record if every resource got the values of
/// [`SyntheticEnvironment`]: for tests and benchmarks of the plan.
pub fn synthetic_state(
    template: &Template,
    parameters: &BoundParameters,
    pseudo: &Pseudo,
) -> Result<CurrentState> {
    let env = SyntheticEnvironment;
    let conditions = evaluate_conditions(template, parameters, pseudo, &env)?;
    let graph = Graph::build(template, &conditions)?;
    let resolver = Resolver::new(
        template,
        parameters,
        pseudo,
        &conditions,
        &env,
        Mode::Deploy,
    );
    let mut read = BTreeSet::new();
    for r in template.resources.values() {
        for v in r.properties.values() {
            crate::graph::attribute_references(v, &mut read);
        }
    }
    for o in template.outputs.values() {
        crate::graph::attribute_references(&o.value, &mut read);
    }
    let mut state = CurrentState::default();
    for id in graph.topological_order() {
        let r = &template.resources[id];
        // As a deploy records them: NoEcho values masked.
        let masking = Masking::new(parameters, None, &no_sensitive_attributes);
        let properties = masking.mask_properties(&r.properties, &resolver.resolve_properties(id)?);
        state.resources.insert(
            id.to_string(),
            StateResource {
                resource_type: r.ty.clone(),
                physical_id: synthetic_physical_id(id),
                properties,
                attributes: read
                    .iter()
                    .filter(|(r, _)| r == id)
                    .map(|(r, a)| (a.clone(), synthetic_attribute(r, a)))
                    .collect(),
                dependencies: graph
                    .dependencies(id)
                    .into_iter()
                    .map(String::from)
                    .collect(),
                deletion_policy: r.deletion_policy,
                update_replace_policy: r.update_replace_policy,
                secret_digest: None,
            },
        );
    }
    Ok(state)
}
