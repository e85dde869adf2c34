//! `--migrate-from-cloudformation`: the physical ids of an import come from a
//! CloudFormation stack (`ListStackResources` of the source and of each of its nested
//! stacks), by logical id; the resources it finds are then retained in that stack and the
//! stack is deleted ([`super::retire`]).
//!
//! Nested stacks. A CloudFormation nested stack `N` (a resource of type
//! `AWS::CloudFormation::Stack` in the source) maps onto stackflow's template in one of
//! two ways:
//! - the template declares `N` as a nested stack too (a `cdk.out` with nested
//!   templates): stackflow's child stack `<stack>-N` is imported from the CloudFormation
//!   nested stack (recursively, by logical id within it), and `N` is recorded in the parent
//!   once every resource of the child was found;
//! - the template does not declare `N` (a flattened template, its resources inline): the
//!   nested stack's resources map onto the template's by logical id. A template resource
//!   the source stack itself has wins; one that several flattened nested stacks have is
//!   ambiguous and not mapped (the import looks it up by name, as without a source).

use std::sync::Arc;

use indexmap::IndexMap;
use serde_json::Value;
use stackflow_events::EventStore;
use stackflow_events::event::{Baseline, ProviderKind, ResourceRecord};
use stackflow_providers::lookups::{CloudFormationSource, SourceResource};

use super::{Found, ImportOptions, ImportReport, ImportStatus, ImportedResource, row};
use crate::deploy::Deployment;
use crate::engine::{Engine, EngineError};
use crate::keys::{NESTED_STACK_TYPE, nested_stack_name};
use crate::nested::child_input;
use crate::stack::StackInput;

/// Where a migration takes its resources from.
#[derive(Clone)]
pub struct MigrateFrom {
    /// The CloudFormation stack (name or id).
    pub stack: String,
    /// How CloudFormation is asked.
    pub cloudformation: Arc<dyn CloudFormationSource>,
}

impl std::fmt::Debug for MigrateFrom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MigrateFrom")
            .field("stack", &self.stack)
            .finish_non_exhaustive()
    }
}

/// A CloudFormation stack as found: its resources, and its nested stacks by logical id.
#[derive(Debug, Clone)]
pub(crate) struct Source {
    /// The stack's name (the root) or id (a nested stack).
    pub stack: String,
    pub resources: Vec<SourceResource>,
    pub nested: Vec<(String, Source)>,
}

impl Source {
    /// This stack and every stack nested in it, parents first.
    pub fn stacks(&self) -> Vec<&Source> {
        let mut out = vec![self];
        for (_, n) in &self.nested {
            out.extend(n.stacks());
        }
        out
    }

    /// The nested stack with logical id `id`.
    pub fn nested(&self, id: &str) -> Option<&Source> {
        self.nested.iter().find(|(n, _)| n == id).map(|(_, s)| s)
    }
}

/// True for a resource that exists (or may): it has a physical id and is not deleted.
pub(super) fn live(r: &SourceResource) -> bool {
    r.physical_id.is_some() && r.status != "DELETE_COMPLETE"
}

/// Reads `stack` and its nested stacks; an error when it does not exist.
pub(crate) async fn describe(
    cloudformation: &dyn CloudFormationSource,
    stack: &str,
) -> Result<Source, EngineError> {
    let what = "--migrate-from-cloudformation";
    lookup(cloudformation, stack)
        .await
        .map_err(|e| EngineError::Lookup(format!("{what}: {e}")))?
        .ok_or_else(|| {
            EngineError::Refused(format!(
                "{what}: CloudFormation stack {stack} does not exist"
            ))
        })
}

/// A plain import's source: the CloudFormation stack `from` names when it exists, and a
/// warning when it could not be read (the import then goes by the template's names).
pub(crate) async fn same_name(from: &MigrateFrom) -> (Option<Source>, Option<String>) {
    match lookup(from.cloudformation.as_ref(), &from.stack).await {
        Ok(found) => (found, None),
        Err(e) => {
            let warning = format!(
                "CloudFormation stack {} could not be read ({e}): resources are looked up by \
                 the names the template gives, and one CloudFormation named is not found",
                from.stack
            );
            (None, Some(warning))
        }
    }
}

/// `stack` and its nested stacks; `None` when it does not exist.
async fn lookup(
    cloudformation: &dyn CloudFormationSource,
    stack: &str,
) -> Result<Option<Source>, stackflow_providers::lookups::LookupError> {
    let Some(resources) = cloudformation.stack_resources(stack).await? else {
        return Ok(None);
    };
    let mut nested = Vec::new();
    for r in resources
        .iter()
        .filter(|r| r.resource_type == NESTED_STACK_TYPE && live(r))
    {
        let id = r.physical_id.clone().unwrap_or_default();
        // A nested stack listed but gone by now is left out.
        if let Some(child) = Box::pin(lookup(cloudformation, &id)).await? {
            nested.push((r.logical_id.clone(), child));
        }
    }
    Ok(Some(Source {
        stack: stack.to_string(),
        resources,
        nested,
    }))
}

/// True when template resource `id` of `input` is a nested stack stackflow imports as
/// its own child stack (the template has its nested template, the source a nested stack
/// of that logical id).
pub(super) fn imports_as_child(input: &StackInput, source: &Source, id: &str) -> bool {
    input
        .template
        .resources
        .get(id)
        .is_some_and(|r| r.ty == NESTED_STACK_TYPE)
        && input.nested.contains_key(id)
        && source.nested(id).is_some()
}

/// The physical id of each template resource the source has (see the module's docs),
/// and a warning per ambiguous or mistyped logical id.
pub(super) fn physical_ids(
    input: &StackInput,
    source: &Source,
) -> (IndexMap<String, String>, Vec<String>) {
    let mut found = IndexMap::new();
    let mut warnings = Vec::new();
    for (id, resource) in &input.template.resources {
        if resource.ty == NESTED_STACK_TYPE {
            continue;
        }
        let mut candidates: Vec<(&Source, &SourceResource)> = source
            .resources
            .iter()
            .filter(|r| r.logical_id == *id && live(r))
            .map(|r| (source, r))
            .collect();
        if candidates.is_empty() {
            for (n, nested) in &source.nested {
                if !imports_as_child(input, source, n) {
                    flattened(nested, id, &mut candidates);
                }
            }
        }
        match candidates.as_slice() {
            [] => {}
            [(stack, r)] if r.resource_type != resource.ty => {
                warnings.push(format!(
                    "CloudFormation stack {} has {id} as {}, the template as {}: it is looked \
                     up by name instead",
                    stack.stack, r.resource_type, resource.ty
                ));
            }
            [(_, r)] => {
                found.insert(id.clone(), r.physical_id.clone().unwrap_or_default());
            }
            many => {
                let stacks: Vec<&str> = many.iter().map(|(s, _)| s.stack.as_str()).collect();
                warnings.push(format!(
                    "{id} is in several nested CloudFormation stacks ({}): it is looked up \
                     by name instead; pass --resource {id}=PHYSICAL to choose",
                    stacks.join(", ")
                ));
            }
        }
    }
    (found, warnings)
}

/// The live resources with logical id `id` in `source` and its nested stacks.
fn flattened<'a>(source: &'a Source, id: &str, out: &mut Vec<(&'a Source, &'a SourceResource)>) {
    for r in source
        .resources
        .iter()
        .filter(|r| r.logical_id == id && live(r))
    {
        out.push((source, r));
    }
    for (_, n) in &source.nested {
        flattened(n, id, out);
    }
}

/// The physical ids stackflow records for `stack` and its child stacks now.
pub(super) async fn recorded_physical_ids<S: EventStore + 'static>(
    engine: &Arc<Engine<S>>,
    stack: &str,
) -> Result<Vec<String>, EngineError> {
    let recorder =
        crate::recorder::Recorder::load(engine.store.clone(), engine.stream(stack)).await?;
    let (mut out, children): (Vec<String>, Vec<String>) = {
        let state = recorder.state();
        let ids = state
            .resources
            .values()
            .map(|r| r.physical_id.clone())
            .collect();
        let children = state
            .resources
            .values()
            .filter(|r| r.provider == ProviderKind::NestedStack)
            .map(|r| r.physical_id.clone())
            .collect();
        (ids, children)
    };
    for child in children {
        out.extend(Box::pin(recorded_physical_ids(engine, &child)).await?);
    }
    Ok(out)
}

/// Imports nested stack `id` of the parent `d` as stackflow's child stack from the
/// CloudFormation nested stack `source`. The parent records `id` only when every
/// resource of the child was found; else the next deploy deploys the child (an update
/// of what was found, a create of the rest).
pub(super) async fn nested_stack<S: EventStore + 'static>(
    d: &Deployment<S>,
    props: serde_json::Map<String, Value>,
    id: &str,
    ty: &str,
    source: &Source,
    options: &ImportOptions,
) -> (ImportedResource, Option<Found>, Option<ImportReport>) {
    let child = nested_stack_name(d.stack(), id);
    let failed = |why: String| (row(id, ty, ImportStatus::Failed, Some(why)), None, None);
    let Some(nested) = d.input.nested.get(id) else {
        return failed(format!("the nested stack's template of {id} was not found"));
    };
    let input = match child_input(&d.input, id, &child, nested, &props) {
        Ok(i) => i,
        Err(why) => return failed(why.to_string()),
    };
    let child_options = ImportOptions {
        force: options.force,
        dry_run: options.dry_run,
        ..ImportOptions::default()
    };
    let imported = Box::pin(super::import_one(
        d.engine.clone(),
        input,
        &child_options,
        Some(source),
    ))
    .await;
    let (report, outputs) = match imported {
        Ok(r) => r,
        Err(e) => return failed(format!("its child stack {child}: {e}")),
    };
    let complete = report
        .resources
        .iter()
        .all(|r| r.status == ImportStatus::Imported);
    let mut r = row(id, ty, ImportStatus::Imported, None);
    r.physical_id = Some(child.clone());
    if !complete {
        r.status = ImportStatus::NotDeployedYet;
        r.reason = Some(format!(
            "child stack {child} was imported from {} in part: the next deploy deploys it",
            source.stack
        ));
        return (r, None, Some(report));
    }
    r.reason = Some(format!("child stack {child}, from {}", source.stack));
    let (properties, _) = d.record_properties(id, &props);
    let template = &d.input.template.resources[id];
    let record = ResourceRecord {
        logical_id: id.to_string(),
        resource_type: ty.to_string(),
        physical_id: child,
        properties: properties.clone(),
        attributes: outputs
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (format!("Outputs.{k}"), v))
            .collect(),
        dependencies: d
            .plan
            .resource(id)
            .map(|p| p.depends_on.clone())
            .unwrap_or_default(),
        provider: ProviderKind::NestedStack,
        deletion_policy: template.deletion_policy,
        update_replace_policy: template.update_replace_policy,
        secret_digest: None,
    };
    // A nested stack's properties are what stackflow gives it: they are its baseline.
    let baseline = Some(Baseline::Recorded {
        observed: properties.clone(),
    });
    let found = Found {
        record,
        baseline,
        template_properties: properties,
    };
    (r, Some(found), Some(report))
}
