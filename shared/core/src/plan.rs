//! The plan: what a deploy will do to each resource, and why.
//!
//! [`plan`] compares the desired resources of a template with the current state of the
//! stack and yields, per resource, one [`Action`] with its [`Reason`] and the changed
//! property paths. Replacement is decided from the CloudFormation resource schemas
//! (create-only and conditional create-only properties). A replacement propagates: a
//! resource that refers to a replaced one sees *known after deploy* values and is updated
//! (or replaced, when such a value lands on a create-only property).

use std::collections::{BTreeSet, HashMap};

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{ErrorKind, Path, Result, TemplateError};
use crate::graph::{Graph, references};
use crate::intrinsics::{
    BoundParameters, Budget, Environment, Mode, Pseudo, Resolver, StackOutputRef,
    evaluate_conditions,
};
pub use crate::mask::mask_values;
use crate::secrets::{DigestKey, Masking, contains_mask};
use crate::template::{Output, Policy, Template};

mod diff;
pub mod review;
mod synthetic;

use diff::property_changes;
pub use synthetic::{SyntheticEnvironment, synthetic_state};

/// One resource as the stack's state records it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct StateResource {
    /// The resource type.
    #[serde(rename = "type")]
    pub resource_type: String,
    /// The id AWS knows it by.
    pub physical_id: String,
    /// The properties as sent to AWS (dynamic references as their `{{resolve:...}}` text,
    /// `NoEcho` values masked).
    pub properties: Map<String, Value>,
    /// The values `Fn::GetAtt` reads.
    #[serde(default)]
    pub attributes: IndexMap<String, Value>,
    /// The resources it depended on when it was deployed.
    #[serde(default)]
    pub dependencies: Vec<String>,
    /// Its `DeletionPolicy` when it was deployed.
    #[serde(default)]
    pub deletion_policy: Option<Policy>,
    /// Its `UpdateReplacePolicy` when it was deployed.
    #[serde(default)]
    pub update_replace_policy: Option<Policy>,
    /// The keyed digest of the values its dynamic references resolved to when it was
    /// sent (none recorded: not known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_digest: Option<String>,
}

/// The part of a stack's state the plan needs.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CurrentState {
    /// The deployed resources by logical id.
    pub resources: IndexMap<String, StateResource>,
}

/// What a deploy does to one resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// Create it.
    Create,
    /// Update it in place.
    Update,
    /// Create a new one, then delete the old one in the cleanup phase.
    Replace,
    /// Delete it (in the cleanup phase).
    Delete,
    /// Nothing to do.
    NoOp,
}

impl Action {
    /// The action's name as printed.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Create => "create",
            Action::Update => "update",
            Action::Replace => "replace",
            Action::Delete => "delete",
            Action::NoOp => "no-op",
        }
    }
}

/// Why a resource gets its action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Reason {
    /// The template has it and the stack does not.
    New,
    /// Properties AWS can change in place differ.
    PropertiesChanged,
    /// A property that AWS can only set at creation differs.
    CreateOnlyChanged {
        /// The create-only property paths that differ.
        paths: Vec<String>,
    },
    /// The resource type differs.
    TypeChanged {
        /// The type in the stack.
        from: String,
    },
    /// The template no longer has it.
    RemovedFromTemplate,
    /// The template has it, but its condition is false.
    ConditionFalse {
        /// The condition.
        condition: String,
    },
    /// A secret it reads through a dynamic reference has another value now (its value
    /// is not shown).
    SecretChanged,
    /// Nothing differs.
    Unchanged,
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reason::New => f.write_str("new in the template"),
            Reason::PropertiesChanged => f.write_str("properties changed"),
            Reason::CreateOnlyChanged { paths } => {
                write!(f, "create-only properties changed: {}", paths.join(", "))
            }
            Reason::TypeChanged { from } => write!(f, "type changed from {from}"),
            Reason::RemovedFromTemplate => f.write_str("removed from the template"),
            Reason::ConditionFalse { condition } => {
                write!(f, "its condition {condition} is false")
            }
            Reason::SecretChanged => f.write_str("a secret it references has a new value"),
            Reason::Unchanged => f.write_str("unchanged"),
        }
    }
}

/// One changed property.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PropertyChange {
    /// The property path inside `Properties`: `Tags[0].Key`.
    pub path: String,
    /// The value in the stack, absent when the property is new.
    pub old: Option<Value>,
    /// The value in the template, absent when the property is removed. A *known after
    /// deploy* marker when it depends on something not created yet.
    pub new: Option<Value>,
    /// True when this change forces a replacement.
    pub replaces: bool,
}

/// What the plan does to one resource.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourcePlan {
    /// The logical id.
    pub logical_id: String,
    /// The resource type (the template's; the stack's for a delete).
    #[serde(rename = "type")]
    pub resource_type: String,
    /// What happens.
    pub action: Action,
    /// Why.
    pub reason: Reason,
    /// The changed properties (empty for create, delete and no-op).
    pub changes: Vec<PropertyChange>,
    /// The current physical id, when the stack has the resource.
    pub physical_id: Option<String>,
    /// The desired properties as far as they are known (for a delete: the recorded ones).
    pub properties: Map<String, Value>,
    /// The resources it waits for (for a delete: the ones it depended on).
    pub depends_on: Vec<String>,
    /// `DeletionPolicy`.
    pub deletion_policy: Policy,
    /// `UpdateReplacePolicy`.
    pub update_replace_policy: Policy,
}

/// One output as far as it is known before the deploy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputPlan {
    /// The value, or a *known after deploy* marker.
    pub value: Value,
    /// The export name, when exported.
    pub export_name: Option<Value>,
}

/// What a deploy of one stack will do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// The stack.
    pub stack: String,
    /// Every resource of the template and of the stack: creates, updates, replaces and
    /// no-ops in dependency order, then deletes in reverse dependency order.
    pub resources: Vec<ResourcePlan>,
    /// The outputs.
    pub outputs: IndexMap<String, OutputPlan>,
    /// The evaluated conditions.
    pub conditions: IndexMap<String, bool>,
}

impl Plan {
    /// True when the deploy would change nothing.
    pub fn is_empty(&self) -> bool {
        self.resources.iter().all(|r| r.action == Action::NoOp)
    }

    /// How many resources get each action.
    pub fn counts(&self) -> IndexMap<Action, usize> {
        let mut out = IndexMap::new();
        for a in [
            Action::Create,
            Action::Update,
            Action::Replace,
            Action::Delete,
            Action::NoOp,
        ] {
            out.insert(a, self.resources.iter().filter(|r| r.action == a).count());
        }
        out
    }

    /// The plan of one resource.
    pub fn resource(&self, logical_id: &str) -> Option<&ResourcePlan> {
        self.resources.iter().find(|r| r.logical_id == logical_id)
    }
}

/// What a plan is made from.
pub struct PlanInput<'a> {
    /// The stack name.
    pub stack: &'a str,
    /// The template.
    pub template: &'a Template,
    /// The bound parameter values.
    pub parameters: &'a BoundParameters,
    /// The pseudo parameters.
    pub pseudo: &'a Pseudo,
    /// The stack's current state.
    pub state: &'a CurrentState,
    /// AWS lookups (availability zones, exports, other stacks' outputs, SSM parameters).
    /// Resource values come from `state`, not from here.
    pub env: &'a dyn Environment,
    /// The stack's key for the digests recorded in place of secrets (see
    /// [`crate::secrets`]); `None` masks without digests.
    pub digest_key: Option<&'a DigestKey>,
    /// The keyed digests of what each resource's dynamic references resolve to now, by
    /// logical id (a resource that is absent is not compared).
    pub secret_digests: Option<&'a IndexMap<String, String>>,
}

impl std::fmt::Debug for PlanInput<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlanInput")
            .field("stack", &self.stack)
            .finish_non_exhaustive()
    }
}

/// The resolver's view of the stack while planning: a resource's values are known when
/// it stays (no-op or in-place update), and *known after deploy* when it is created or
/// replaced.
struct PlanEnv<'a> {
    state: &'a CurrentState,
    decided: &'a HashMap<String, Action>,
    outer: &'a dyn Environment,
}

impl PlanEnv<'_> {
    fn stays(&self, id: &str) -> Option<&StateResource> {
        match self.decided.get(id) {
            Some(Action::NoOp | Action::Update) => self.state.resources.get(id),
            _ => None,
        }
    }
}

impl Environment for PlanEnv<'_> {
    fn resource_ref(&self, id: &str) -> Option<Value> {
        self.stays(id).map(|r| Value::String(r.physical_id.clone()))
    }
    fn resource_attribute(&self, id: &str, attr: &str) -> Option<Value> {
        // An attribute that is a property the template sets (Cloud Control records
        // only what AWS reports) reads the recorded property.
        self.stays(id).and_then(|r| {
            r.attributes
                .get(attr)
                .or_else(|| r.properties.get(attr))
                .cloned()
        })
    }
    fn availability_zones(&self, region: &str) -> Option<Vec<String>> {
        self.outer.availability_zones(region)
    }
    fn import_value(&self, name: &str) -> Option<Value> {
        self.outer.import_value(name)
    }
    fn stack_output(&self, r: &StackOutputRef) -> Option<Value> {
        self.outer.stack_output(r)
    }
    fn ssm_parameter(&self, name: &str) -> Option<Value> {
        self.outer.ssm_parameter(name)
    }
}

/// Compares the desired template with the stack's state: evaluates the conditions, builds
/// the dependency graph, plans each resource of the template in dependency order, then the
/// deletes, then the outputs.
pub fn plan(input: &PlanInput<'_>) -> Result<Plan> {
    input.template.ensure_supported()?;
    let conditions =
        evaluate_conditions(input.template, input.parameters, input.pseudo, input.env)?;
    let graph = Graph::build(input.template, &conditions)?;
    let mut planner = Planner {
        input,
        conditions: &conditions,
        decided: HashMap::new(),
        budget: Budget::new(),
    };
    // Every problem of the template is found, not only the first: a resource that cannot
    // be planned is left out (what refers to it sees a value known after deploy), and
    // planning goes on; only a limit stops it at once.
    let mut problems = Vec::new();
    let mut resources = Vec::new();
    for id in graph.topological_order() {
        match planner.resource(id, &graph) {
            Ok(r) => resources.push(r),
            Err(e) if e.kind == ErrorKind::Limit => return Err(e),
            Err(e) => problems.push(e),
        }
    }
    resources.extend(deletes(input, &graph));
    let outputs = planner.outputs(&mut problems)?;
    if let Some(e) = TemplateError::all(problems) {
        return Err(e);
    }
    Ok(Plan {
        stack: input.stack.to_string(),
        resources,
        outputs,
        conditions,
    })
}

/// What planning carries from one step to the next: the input, the evaluated conditions,
/// the actions decided so far and what the intrinsic functions computed (one budget for
/// the whole plan).
struct Planner<'p, 'a> {
    input: &'p PlanInput<'a>,
    conditions: &'p IndexMap<String, bool>,
    decided: HashMap<String, Action>,
    budget: Budget,
}

impl Planner<'_, '_> {
    /// Masks what is planned as a deploy records it: values computed from secrets
    /// (`NoEcho` parameters, attributes recorded masked) replaced by their digests.
    fn masked(&self, template: &Value, resolved: &Value) -> Value {
        let state = self.input.state;
        let sensitive = |res: &str, attr: &str| {
            state
                .resources
                .get(res)
                .and_then(|r| r.attributes.get(attr))
                .is_some_and(contains_mask)
        };
        Masking::new(self.input.parameters, self.input.digest_key, &sensitive)
            .mask(template, resolved)
    }

    /// Runs `f` with a resolver that sees the resources decided so far (see [`PlanEnv`]).
    fn with_resolver<T>(&self, f: impl FnOnce(&Resolver<'_>) -> Result<T>) -> Result<T> {
        let env = PlanEnv {
            state: self.input.state,
            decided: &self.decided,
            outer: self.input.env,
        };
        let resolver = Resolver::new(
            self.input.template,
            self.input.parameters,
            self.input.pseudo,
            self.conditions,
            &env,
            Mode::Plan,
        )
        .with_budget(&self.budget);
        f(&resolver)
    }

    /// The plan of one resource of the template; its action is recorded as decided, for
    /// the resources that refer to it.
    fn resource(&mut self, id: &str, graph: &Graph) -> Result<ResourcePlan> {
        let r = &self.input.template.resources[id];
        let properties = self.properties(id)?;
        crate::preflight::check_resource(id, &r.ty, &properties)?;
        let current = self.input.state.resources.get(id);
        let (mut action, mut reason, changes) = decide(current, &r.ty, &properties);
        let now = self.input.secret_digests.and_then(|d| d.get(id));
        let then = current.and_then(|c| c.secret_digest.as_ref());
        if action == Action::NoOp
            && let (Some(now), Some(then)) = (now, then)
            && now != then
        {
            (action, reason) = (Action::Update, Reason::SecretChanged);
        }
        self.decided.insert(id.to_string(), action);
        Ok(ResourcePlan {
            logical_id: id.to_string(),
            resource_type: r.ty.clone(),
            action,
            reason,
            changes,
            physical_id: current.map(|c| c.physical_id.clone()),
            properties,
            depends_on: graph
                .dependencies(id)
                .into_iter()
                .map(String::from)
                .collect(),
            deletion_policy: r.deletion_policy.unwrap_or_default(),
            update_replace_policy: r.update_replace_policy.unwrap_or_default(),
        })
    }

    /// The desired properties of one resource as far as they are known, `NoEcho` values
    /// masked.
    fn properties(&self, id: &str) -> Result<Map<String, Value>> {
        let r = &self.input.template.resources[id];
        let props = self.with_resolver(|resolver| {
            // Metadata is resolved too, so that a bad expression there fails now.
            if let Some(m) = &r.metadata {
                resolver.resolve(m, &Path::from_keys(["Resources", id, "Metadata"]))?;
            }
            resolver.resolve_properties(id)
        })?;
        let template = Value::Object(r.properties.clone());
        Ok(match self.masked(&template, &Value::Object(props)) {
            Value::Object(m) => m,
            _ => Map::new(),
        })
    }

    /// The outputs whose condition holds, as far as they are known, `NoEcho` values masked;
    /// an output that cannot be planned is added to `problems` (a limit is the error).
    fn outputs(&self, problems: &mut Vec<TemplateError>) -> Result<IndexMap<String, OutputPlan>> {
        self.with_resolver(|resolver| {
            let mut outputs = IndexMap::new();
            for (name, o) in &self.input.template.outputs {
                if let Some(c) = &o.condition
                    && !self.conditions.get(c).copied().unwrap_or(true)
                {
                    continue;
                }
                match self.output(resolver, name, o) {
                    Ok(output) => {
                        outputs.insert(name.clone(), output);
                    }
                    Err(e) if e.kind == ErrorKind::Limit => return Err(e),
                    Err(e) => problems.push(e),
                }
            }
            Ok(outputs)
        })
    }

    fn output(&self, resolver: &Resolver<'_>, name: &str, o: &Output) -> Result<OutputPlan> {
        let p = Path::from_keys(["Outputs", name]);
        let value = resolver
            .resolve(&o.value, &p.key("Value"))?
            .unwrap_or(Value::Null);
        let export_name = o
            .export_name
            .as_ref()
            .map(|e| resolver.resolve(e, &p.key("Export").key("Name")))
            .transpose()?
            .flatten();
        Ok(OutputPlan {
            value: self.masked(&o.value, &value),
            export_name,
        })
    }
}

/// The action for a resource of the template (of type `ty`, with the desired
/// `properties`), why, and the changed properties.
fn decide(
    current: Option<&StateResource>,
    ty: &str,
    properties: &Map<String, Value>,
) -> (Action, Reason, Vec<PropertyChange>) {
    match current {
        None => (Action::Create, Reason::New, vec![]),
        Some(cur) if cur.resource_type != ty => (
            Action::Replace,
            Reason::TypeChanged {
                from: cur.resource_type.clone(),
            },
            vec![],
        ),
        Some(cur) => {
            let changes = property_changes(cur, ty, properties);
            if changes.is_empty() {
                (Action::NoOp, Reason::Unchanged, changes)
            } else if changes.iter().any(|c| c.replaces) {
                let paths: BTreeSet<String> = changes
                    .iter()
                    .filter(|c| c.replaces)
                    .map(|c| c.path.clone())
                    .collect();
                (
                    Action::Replace,
                    Reason::CreateOnlyChanged {
                        paths: paths.into_iter().collect(),
                    },
                    changes,
                )
            } else {
                (Action::Update, Reason::PropertiesChanged, changes)
            }
        }
    }
}

/// The deletes: resources of the stack that the template no longer has (or whose
/// condition is false), dependents before what they depend on.
fn deletes(input: &PlanInput<'_>, graph: &Graph) -> Vec<ResourcePlan> {
    let gone: Vec<&String> = input
        .state
        .resources
        .keys()
        .filter(|id| !graph.contains(id))
        .collect();
    delete_order(input.state, &gone)
        .into_iter()
        .map(|id| delete(input.template, id, &input.state.resources[id]))
        .collect()
}

/// The plan that deletes the deployed resource `id`.
fn delete(template: &Template, id: &str, cur: &StateResource) -> ResourcePlan {
    let reason = match template.resources.get(id).and_then(|r| r.condition.clone()) {
        Some(condition) if template.resources[id].ty == cur.resource_type => {
            Reason::ConditionFalse { condition }
        }
        _ => Reason::RemovedFromTemplate,
    };
    ResourcePlan {
        logical_id: id.to_string(),
        resource_type: cur.resource_type.clone(),
        action: Action::Delete,
        reason,
        changes: vec![],
        physical_id: Some(cur.physical_id.clone()),
        properties: cur.properties.clone(),
        depends_on: cur.dependencies.clone(),
        deletion_policy: cur.deletion_policy.unwrap_or_default(),
        update_replace_policy: cur.update_replace_policy.unwrap_or_default(),
    }
}

/// Orders resources for deletion: a resource before the ones it depended on (by the
/// dependencies recorded in the state); ties keep state order.
pub fn delete_order<'s>(state: &'s CurrentState, ids: &[&'s String]) -> Vec<&'s String> {
    let set: BTreeSet<&str> = ids.iter().map(|s| s.as_str()).collect();
    // How many of the set still depend on each one.
    let mut dependents: HashMap<&str, usize> = set.iter().map(|id| (*id, 0)).collect();
    for id in &set {
        for d in &state.resources[*id].dependencies {
            if let Some(n) = dependents.get_mut(d.as_str()) {
                *n += 1;
            }
        }
    }
    let mut out: Vec<&String> = Vec::with_capacity(ids.len());
    let mut left: Vec<&String> = ids.to_vec();
    while !left.is_empty() {
        let pos = left
            .iter()
            .position(|id| dependents[id.as_str()] == 0)
            // A cycle in recorded dependencies cannot come from a valid graph; take the
            // next one rather than stop.
            .unwrap_or(0);
        let id = left.remove(pos);
        for d in &state.resources[id].dependencies {
            if let Some(n) = dependents.get_mut(d.as_str()) {
                *n = n.saturating_sub(1);
            }
        }
        out.push(id);
    }
    out
}

/// The resources `v` refers to, for callers that record dependencies.
pub fn referenced_resources(
    v: &Value,
    template: &Template,
    conditions: &IndexMap<String, bool>,
) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    references(v, template, conditions, &mut out);
    out
}

#[cfg(test)]
mod tests;
