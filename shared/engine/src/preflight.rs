//! Checks made before the first AWS write of a deploy (and shown by `diff`): every
//! resource the deploy will touch has a provider, every dynamic reference is well formed,
//! and every value the template asks for can be known, now or once this stack's own
//! resources exist. A template that fails one of them changes nothing, instead of failing
//! halfway and rolling back.

use std::sync::Arc;

use serde_json::Value;
use stackflow_core::error::{ErrorKind, Path, TemplateError, did_you_mean};
use stackflow_core::intrinsics::as_unknown;
use stackflow_core::plan::{Action, Plan, Reason, ResourcePlan};
use stackflow_core::schema;
use stackflow_core::stateful::holds_data;
use stackflow_core::template::Template;
use stackflow_events::EventStore;
use stackflow_events::projection::StackState;
use stackflow_providers::registry::is_custom_type;

use stackflow_providers::router::Router as _;

use crate::engine::{DeployOptions, Engine, EngineError, NestedContext};
use crate::secrets::check_dynamic;
use crate::stack::StackInput;

/// Every unknown marker in `v`, by what it stands for.
fn unknowns<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    if let Some(what) = as_unknown(v) {
        out.push(what);
        return;
    }
    match v {
        Value::Array(items) => items.iter().for_each(|i| unknowns(i, out)),
        Value::Object(m) => m.values().for_each(|i| unknowns(i, out)),
        _ => {}
    }
}

/// True when a *known after deploy* value is one this stack makes: a resource's `Ref`
/// (`Queue`) or attribute (`Queue.Arn`).
fn made_here(input: &StackInput, what: &str) -> bool {
    let id = what.split_once('.').map_or(what, |(id, _)| id);
    input.template.resources.contains_key(id)
}

fn never_known(input: &StackInput, v: &Value) -> Vec<String> {
    let mut found = Vec::new();
    unknowns(v, &mut found);
    // A new stack's id is made by its first deploy, in the account's ARN.
    let stack_id_made = input.pseudo.account_id.is_some();
    found
        .into_iter()
        .filter(|w| !(made_here(input, w) || (stack_id_made && *w == "AWS::StackId")))
        .map(str::to_string)
        .collect()
}

/// A replacement that would destroy data (see [`holds_data`]): its line, with the
/// property that forces it.
fn destroys_data(r: &ResourcePlan) -> Option<String> {
    if r.action != Action::Replace || !holds_data(&r.resource_type) {
        return None;
    }
    let why = match &r.reason {
        Reason::CreateOnlyChanged { paths } => format!("{} changed", paths.join(", ")),
        other => other.to_string(),
    };
    Some(format!(
        "Resources.{}: replacing this {} deletes the data it holds ({why}); revert that \
         change, or pass --allow-stateful-replacement to replace it anyway",
        r.logical_id, r.resource_type
    ))
}

/// An error for each of `names`, the properties resource `id` of type `ty` sets, that the
/// type's schema does not have (CloudFormation refuses them; Cloud Control would fail at
/// this resource, after others were made), with the property meant when one is close.
/// Custom resources take any property.
fn property_errors<'a>(
    id: &str,
    ty: &str,
    names: impl Iterator<Item = &'a str>,
) -> Vec<TemplateError> {
    if is_custom_type(ty) {
        return Vec::new();
    }
    let Some(schema) = schema::schema(ty) else {
        return Vec::new();
    };
    schema
        .unknown_properties(names)
        .into_iter()
        .map(|(name, meant)| {
            let hint = did_you_mean(meant);
            TemplateError::new(
                ErrorKind::Structure,
                Path::from_keys(["Resources", id, "Properties", name]),
                format!("{ty} has no property {name}{hint}"),
            )
        })
        .collect()
}

/// A line for each property of `r` that its type's schema does not have.
fn unknown_properties(r: &ResourcePlan) -> Vec<String> {
    let names = r.properties.keys().map(String::as_str);
    property_errors(&r.logical_id, &r.resource_type, names)
        .iter()
        .map(ToString::to_string)
        .collect()
}

/// The properties of `template`'s resources that their types do not have: told with the
/// problems of a template that cannot be planned, so that all are seen in one run.
pub(crate) fn template_property_errors(template: &Template) -> Vec<TemplateError> {
    template
        .resources
        .iter()
        .flat_map(|(id, r)| property_errors(id, &r.ty, r.properties.keys().map(String::as_str)))
        .collect()
}

/// What would make a deploy of `input` with `plan` fail: one line per problem, each with
/// its template path. A replacement that destroys data is one unless `allow_stateful`.
pub fn problems<S: EventStore + 'static>(
    engine: &Arc<Engine<S>>,
    input: &Arc<StackInput>,
    plan: &Plan,
    state: &StackState,
    allow_stateful: bool,
) -> Vec<String> {
    let options = DeployOptions::new();
    let ctx = NestedContext {
        parent: Some(input),
        options: &options,
    };
    let mut out = Vec::new();
    for r in &plan.resources {
        if !matches!(r.action, Action::Create | Action::Update | Action::Replace) {
            continue;
        }
        if !allow_stateful && let Some(line) = destroys_data(r) {
            out.push(line);
        }
        let at = format!("Resources.{}", r.logical_id);
        let recorded = state.resources.get(&r.logical_id).map(|s| s.provider);
        if let Err(why) = engine
            .router(ctx)
            .route(&r.resource_type, &r.properties, recorded)
        {
            out.push(format!("{at}: {why}"));
        }
        out.extend(unknown_properties(r));
        if let Err(why) = check_dynamic(&r.properties) {
            out.push(format!("{at}.Properties: {why}"));
        }
        for what in never_known(input, &Value::Object(r.properties.clone())) {
            out.push(format!("{at}.Properties: {what} cannot be resolved"));
        }
    }
    for (name, o) in &plan.outputs {
        for what in never_known(input, &o.value) {
            out.push(format!("Outputs.{name}.Value: {what} cannot be resolved"));
        }
    }
    out
}

/// [`problems`] as the error that stops a deploy before anything is changed.
pub(crate) fn check<S: EventStore + 'static>(
    engine: &Arc<Engine<S>>,
    input: &Arc<StackInput>,
    plan: &Plan,
    state: &StackState,
    allow_stateful: bool,
) -> Result<(), EngineError> {
    let found = problems(engine, input, plan, state, allow_stateful);
    if found.is_empty() {
        return Ok(());
    }
    Err(EngineError::Refused(format!(
        "{}: stack {} cannot be deployed, and nothing was changed:\n  - {}",
        input.source,
        input.name,
        found.join("\n  - ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use stackflow_core::intrinsics::unknown;

    #[test]
    fn unknown_values_are_found_at_any_depth() {
        let v = json!({"A": [1, {"B": unknown("export Shared")}], "C": unknown("Queue.Arn")});
        let mut found = Vec::new();
        unknowns(&v, &mut found);
        assert_eq!(found, vec!["export Shared", "Queue.Arn"]);
    }
}
