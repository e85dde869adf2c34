//! One stack to deploy: its template, parameter values and pseudo parameters, and the
//! environment the resolver reads resource values from during a deploy.

use indexmap::IndexMap;
use serde_json::Value;
use sha2::{Digest, Sha256};
use stackflow_core::intrinsics::{BoundParameters, Environment, Pseudo, StackOutputRef};
use stackflow_core::template::{NestedTemplate, Template};
use stackflow_events::projection::StackState;

use crate::lookups::Answers;

/// What a deploy of one stack starts from.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct StackInput {
    /// The stack name.
    pub name: String,
    /// Where the template came from, for messages (`cdk.out/App.template.json`).
    pub source: String,
    /// The template.
    pub template: Template,
    /// The parameter values (with `NoEcho` ones in clear: never record them).
    pub parameters: BoundParameters,
    /// The pseudo parameters.
    pub pseudo: Pseudo,
    /// Templates of its nested stacks, by logical id.
    pub nested: IndexMap<String, NestedTemplate>,
}

impl StackInput {
    /// Sets the stack id (`AWS::StackId`) when the input does not give one: the id
    /// `recorded` with the stack's first deploy, or a new one for this first run.
    pub(crate) fn settle_stack_id(&mut self, recorded: Option<String>) {
        if self.pseudo.stack_id.is_none() {
            self.pseudo.stack_id = recorded.or_else(|| crate::keys::new_stack_id(&self.pseudo));
        }
    }

    /// A digest of the template, recorded with each deploy.
    pub fn digest(&self) -> String {
        let text = serde_json::to_string(&self.template).unwrap_or_default();
        let hash = Sha256::digest(text.as_bytes());
        hash.iter().take(16).map(|b| format!("{b:02x}")).collect()
    }
}

/// The resolver's view during a deploy: resources from the stack's state, everything else
/// from the lookups answered before the deploy began.
pub struct DeployEnv<'a> {
    /// The stack's state.
    pub state: &'a StackState,
    /// The lookups.
    pub answers: &'a Answers,
    /// Attribute values recorded masked, as AWS gave them during this deploy.
    pub sealed: Option<&'a IndexMap<String, IndexMap<String, Value>>>,
}

impl Environment for DeployEnv<'_> {
    fn resource_ref(&self, id: &str) -> Option<Value> {
        self.state
            .resources
            .get(id)
            .map(|r| Value::String(r.physical_id.clone()))
    }
    fn resource_attribute(&self, id: &str, attribute: &str) -> Option<Value> {
        if let Some(v) = self.sealed.and_then(|s| s.get(id)?.get(attribute)) {
            return Some(v.clone());
        }
        // An attribute that is a property the template sets (Cloud Control records only
        // what AWS reports) reads the recorded property.
        self.state.resources.get(id).and_then(|r| {
            r.attributes
                .get(attribute)
                .or_else(|| r.properties.get(attribute))
                .cloned()
        })
    }
    fn availability_zones(&self, region: &str) -> Option<Vec<String>> {
        self.answers.availability_zones(region)
    }
    fn import_value(&self, name: &str) -> Option<Value> {
        self.answers.import_value(name)
    }
    fn stack_output(&self, r: &StackOutputRef) -> Option<Value> {
        self.answers.stack_output(r)
    }
    fn ssm_parameter(&self, name: &str) -> Option<Value> {
        self.answers.ssm_parameter(name)
    }
}
