//! Nested stacks (`AWS::CloudFormation::Stack` in a `cdk.out`): a [`Provider`] whose
//! resource is a child stack `<parent>-<LogicalId>` with its own stream. A create or an
//! update deploys the child with the engine itself; a delete destroys it. Its `Outputs.X`
//! attributes are the child's outputs.

use std::sync::Arc;

use indexmap::IndexMap;
use serde_json::{Map, Value};
use stackflow_core::intrinsics::bind_parameters;
use stackflow_core::secrets::Masking;
use stackflow_core::template::NestedTemplate;
use stackflow_events::EventStore;
use stackflow_events::event::ProviderKind;
use stackflow_providers::ProviderError;
use stackflow_providers::provider::{
    BoxFuture, Created, Deleted, Properties, Provider, ResourceRequest, Updated,
};
use stackflow_providers::router::{RouteError, Routed, Router};

use crate::destroy::destroy_stack;
use crate::engine::{DeployOptions, Engine, EngineError, NestedContext};
pub use crate::keys::{NESTED_STACK_TYPE, nested_stack_name};
use crate::report::{StackReport, StackStatus};
use crate::runner::deploy_stack;
use crate::stack::StackInput;

/// The provider of nested stacks, for one parent.
pub(crate) struct NestedStacks<S> {
    pub engine: Arc<Engine<S>>,
    /// The parent being deployed (its nested templates); `None` where only a delete can
    /// happen (destroy, rollback): a child is not put back without its template.
    pub parent: Option<Arc<StackInput>>,
    pub options: DeployOptions,
}

/// The input of a nested stack: its template, and the `Parameters` property as values.
pub(crate) fn child_input(
    parent: &StackInput,
    id: &str,
    child_name: &str,
    nested: &NestedTemplate,
    props: &Map<String, Value>,
) -> Result<StackInput, stackflow_core::error::TemplateError> {
    let mut values: IndexMap<String, String> = IndexMap::new();
    if let Some(Value::Object(params)) = props.get("Parameters") {
        for (k, v) in params {
            let text = match v {
                Value::String(s) => s.clone(),
                Value::Array(items) => items
                    .iter()
                    .map(|i| {
                        i.as_str()
                            .map(str::to_string)
                            .unwrap_or_else(|| i.to_string())
                    })
                    .collect::<Vec<_>>()
                    .join(","),
                other => other.to_string(),
            };
            values.insert(k.clone(), text);
        }
    }
    // A parameter given a value computed from the parent's secrets is a secret in the
    // child too, whatever the child's template declares.
    let mut template = nested.template.clone();
    for name in secret_parameters(parent, id, props) {
        if let Some(p) = template.parameters.get_mut(&name) {
            p.no_echo = true;
        }
    }
    let parameters =
        bind_parameters(&template, &values).map_err(|e| e.in_file(nested.file.display()))?;
    let mut pseudo = parent.pseudo.clone();
    pseudo.stack_name = child_name.to_string();
    pseudo.stack_id = None;
    Ok(StackInput {
        name: child_name.to_string(),
        source: nested.file.display().to_string(),
        template,
        parameters,
        pseudo,
        nested: nested.nested.clone(),
    })
}

/// The names of the child's parameters whose values (in `props`, the nested stack
/// resource's resolved properties) the parent computed from a secret.
fn secret_parameters(parent: &StackInput, id: &str, props: &Map<String, Value>) -> Vec<String> {
    let sensitive = stackflow_core::secrets::no_sensitive_attributes;
    let masking = Masking::new(&parent.parameters, None, &sensitive);
    let template = parent
        .template
        .resources
        .get(id)
        .and_then(|r| r.properties.get("Parameters"));
    let (Some(template), Some(given)) = (template, props.get("Parameters")) else {
        return Vec::new();
    };
    masking
        .tainted_pointers(template, given)
        .iter()
        .filter_map(|p| p.trim_start_matches('/').split('/').next())
        .filter(|name| !name.is_empty())
        .map(|name| name.replace("~1", "/").replace("~0", "~"))
        .collect()
}

/// A child's run that did not end well, as a provider error.
fn child_failed(child: &str, report: &StackReport) -> ProviderError {
    let first = report
        .failures
        .first()
        .map(|f| {
            format!(
                "{} ({}): {}",
                f.logical_id, f.resource_type, f.error.message
            )
        })
        .unwrap_or_else(|| "it did not finish".into());
    ProviderError::Other(format!("nested stack {child} failed: {first}"))
}

fn engine_error(child: &str, e: EngineError) -> ProviderError {
    ProviderError::Other(format!("nested stack {child}: {e}"))
}

impl<S: EventStore + 'static> NestedStacks<S> {
    /// Deploys the child stack of `request`: its name and its outputs as attributes.
    async fn deploy(
        &self,
        request: &ResourceRequest,
    ) -> Result<(String, IndexMap<String, Value>), ProviderError> {
        let id = &request.logical_id;
        let child = request
            .physical_id
            .clone()
            .unwrap_or_else(|| nested_stack_name(&request.stack_name, id));
        let Some(parent) = &self.parent else {
            return Err(ProviderError::InvalidRequest(format!(
                "nested stack {child} was changed; stackflow cannot put its previous template back: deploy the previous version of the parent"
            )));
        };
        let Some(nested) = parent.nested.get(id) else {
            return Err(ProviderError::InvalidRequest(format!(
                "{}: Resources.{id}: the nested stack's template was not found (a cdk.out names it in the resource's Metadata `aws:asset:path`)",
                parent.source
            )));
        };
        let input = child_input(parent, id, &child, nested, &request.properties)
            .map_err(|e| ProviderError::InvalidRequest(e.to_string()))?;
        let report = deploy_boxed(self.engine.clone(), input, self.options.clone())
            .await
            .map_err(|e| engine_error(&child, e))?;
        if !matches!(
            report.status,
            StackStatus::Succeeded | StackStatus::NoChanges
        ) {
            return Err(child_failed(&child, &report));
        }
        let outputs = report
            .outputs
            .iter()
            .map(|(k, v)| (format!("Outputs.{k}"), v.clone()))
            .collect();
        Ok((child, outputs))
    }
}

impl<S: EventStore + 'static> Provider for NestedStacks<S> {
    fn name(&self) -> &str {
        "nested-stack"
    }

    fn handled_properties(&self, _resource_type: &str) -> Option<&[&str]> {
        None
    }

    fn create<'a>(
        &'a self,
        request: &'a ResourceRequest,
    ) -> BoxFuture<'a, Result<Created, ProviderError>> {
        Box::pin(async move {
            let (physical_id, attributes) = self.deploy(request).await?;
            Ok(Created {
                sensitive: false,
                physical_id,
                attributes,
            })
        })
    }

    fn update<'a>(
        &'a self,
        request: &'a ResourceRequest,
    ) -> BoxFuture<'a, Result<Updated, ProviderError>> {
        Box::pin(async move {
            let (physical_id, attributes) = self.deploy(request).await?;
            Ok(Updated {
                sensitive: false,
                physical_id,
                attributes,
                replaced: false,
            })
        })
    }

    fn delete<'a>(
        &'a self,
        request: &'a ResourceRequest,
    ) -> BoxFuture<'a, Result<Deleted, ProviderError>> {
        Box::pin(async move {
            let child = request.require_physical_id()?.to_string();
            let report = destroy_boxed(self.engine.clone(), &child, self.options.clone())
                .await
                .map_err(|e| engine_error(&child, e))?;
            match report.status {
                StackStatus::Succeeded | StackStatus::NoChanges => Ok(Deleted::Done),
                StackStatus::Partial => Ok(Deleted::Skipped {
                    reason: format!("nested stack {child} kept some resources"),
                }),
                _ => Err(child_failed(&child, &report)),
            }
        })
    }
}

/// [`deploy_stack`] behind a `Send` box (nested stacks deploy recursively).
fn deploy_boxed<S: EventStore + 'static>(
    engine: Arc<Engine<S>>,
    input: StackInput,
    options: DeployOptions,
) -> BoxFuture<'static, Result<StackReport, EngineError>> {
    Box::pin(deploy_stack(engine, input, options))
}

/// [`destroy_stack`] behind a `Send` box (nested stacks are destroyed recursively).
fn destroy_boxed<S: EventStore + 'static>(
    engine: Arc<Engine<S>>,
    stack: &str,
    options: DeployOptions,
) -> BoxFuture<'static, Result<StackReport, EngineError>> {
    let stack = stack.to_string();
    Box::pin(async move { destroy_stack(engine, &stack, options).await })
}

/// The routing of one run: the engine's providers with nested stacks in front (a
/// [`Router`] decorator). A nested stack (`AWS::CloudFormation::Stack`) is deployed by
/// the engine itself, as a stack of its own; every other resource goes to the providers
/// it wraps.
pub(crate) struct NestedRouter<S> {
    inner: Arc<dyn Router>,
    nested: Arc<NestedStacks<S>>,
}

impl<S: EventStore + 'static> Router for NestedRouter<S> {
    fn route(
        &self,
        resource_type: &str,
        properties: &Properties,
        recorded: Option<ProviderKind>,
    ) -> Result<Routed, RouteError> {
        if resource_type == NESTED_STACK_TYPE {
            return Ok(Routed {
                provider: self.nested.clone(),
                kind: ProviderKind::NestedStack,
            });
        }
        self.inner.route(resource_type, properties, recorded)
    }

    fn for_recorded(
        &self,
        resource_type: &str,
        kind: ProviderKind,
    ) -> Result<Arc<dyn Provider>, RouteError> {
        match kind {
            ProviderKind::NestedStack => Ok(self.nested.clone()),
            _ => self.inner.for_recorded(resource_type, kind),
        }
    }

    fn services(&self, resource_type: &str) -> Vec<String> {
        self.inner.services(resource_type)
    }
}

impl<S: EventStore + 'static> Engine<S> {
    /// The router of a run whose nested stacks find their templates through `ctx`.
    pub(crate) fn router(self: &Arc<Self>, ctx: NestedContext<'_>) -> NestedRouter<S> {
        NestedRouter {
            inner: self.providers.clone(),
            nested: Arc::new(NestedStacks {
                engine: self.clone(),
                parent: ctx.parent.cloned(),
                options: ctx.options.clone(),
            }),
        }
    }
}
