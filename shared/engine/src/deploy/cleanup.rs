//! The **cleanup** handler: deletes a resource the template no longer has, or the old
//! copy of a replaced one, after every create and update of the deploy. Destroy deletes
//! with the same function.

use std::sync::Arc;

use indexmap::IndexMap;

use serde::Serialize;
use stackflow_core::plan::Action;
use stackflow_core::template::Policy;
use stackflow_events::projection::StackState;
use stackflow_events::{EventStore, Precondition};

use super::Deployment;
use stackflow_providers::router::Router as _;

use crate::engine::{Engine, NestedContext};
use crate::keys::Phase;
use crate::phase::Subject;
use crate::recorder::Recorder;
use crate::report::{Done, Handled};
use crate::schedule::{self, Task};
use crate::secrets::Masker;
use crate::step::{Deletion, Intent, Step, StepKind};

/// One cleanup action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(tag = "kind", content = "id", rename_all = "kebab-case")]
pub enum Cleanup {
    /// Delete a resource the template no longer has.
    Removed(String),
    /// Delete the predecessor (this physical id) of a replaced resource.
    Predecessor(String),
}

impl Cleanup {
    /// The id of its task in the cleanup graph.
    pub fn task_id(&self) -> String {
        match self {
            Cleanup::Removed(id) => id.clone(),
            Cleanup::Predecessor(p) => format!("predecessor:{p}"),
        }
    }
}

impl<S: EventStore + 'static> Deployment<S> {
    /// The cleanup actions: removed resources and replaced predecessors, in the order
    /// they may run (a resource before what it depended on).
    pub fn cleanup_tasks(&self) -> (Vec<Cleanup>, Vec<Task>) {
        let s = self.recorder.state();
        let removed: Vec<String> = self
            .plan
            .resources
            .iter()
            .filter(|r| r.action == Action::Delete)
            .map(|r| r.logical_id.clone())
            .collect();
        cleanup_graph(&s, &removed)
    }

    /// **Cleanup** handler: deletes (or retains) one removed resource or predecessor.
    pub async fn cleanup(&self, item: &Cleanup) -> Handled {
        let ctx = NestedContext {
            parent: None,
            options: &self.options,
        };
        delete_one(
            &self.engine,
            &self.recorder,
            &self.deploy_id,
            &self.holds(),
            item,
            ctx,
        )
        .await
    }
}

/// True when a policy keeps the resource when it leaves the stack.
pub(crate) fn keeps(policy: Option<Policy>) -> bool {
    matches!(
        policy,
        Some(Policy::Retain | Policy::RetainExceptOnCreate | Policy::Snapshot)
    )
}

/// The logical id and type a cleanup item is about, for progress lines.
pub fn cleanup_subject(state: &StackState, item: &Cleanup) -> (String, String) {
    match item {
        Cleanup::Removed(id) => (
            id.clone(),
            state
                .resources
                .get(id)
                .map(|r| r.resource_type.clone())
                .unwrap_or_default(),
        ),
        Cleanup::Predecessor(p) => state
            .predecessors
            .get(p)
            .map(|x| (x.logical_id.clone(), x.resource.resource_type.clone()))
            .unwrap_or_default(),
    }
}

/// The cleanup graph over `removed` resources and every predecessor in `state`.
pub fn cleanup_graph(state: &StackState, removed: &[String]) -> (Vec<Cleanup>, Vec<Task>) {
    let mut items: Vec<Cleanup> = removed.iter().cloned().map(Cleanup::Removed).collect();
    items.extend(state.predecessors.keys().cloned().map(Cleanup::Predecessor));
    // Forward edges: an item waits for nothing; what it depended on must wait for it.
    let node_of = |logical: &str| -> Vec<String> {
        let mut out = Vec::new();
        if removed.iter().any(|r| r == logical) {
            out.push(logical.to_string());
        }
        for (p, pred) in &state.predecessors {
            if pred.logical_id == logical {
                out.push(format!("predecessor:{p}"));
            }
        }
        out
    };
    let forward: Vec<Task> = items
        .iter()
        .map(|item| {
            let deps: Vec<String> = match item {
                Cleanup::Removed(id) => state
                    .resources
                    .get(id)
                    .map(|r| r.dependencies.clone())
                    .unwrap_or_default(),
                Cleanup::Predecessor(p) => state.predecessors[p].resource.dependencies.clone(),
            }
            .iter()
            .flat_map(|d| node_of(d))
            .filter(|d| *d != item.task_id())
            .collect();
            Task::new(item.task_id(), deps)
        })
        .collect();
    (items, schedule::reversed(&forward))
}

/// Deletes (or retains) one removed resource or predecessor, recording the outcome under
/// `run_id`.
pub(crate) async fn delete_one<S: EventStore + 'static>(
    engine: &Arc<Engine<S>>,
    rec: &Recorder<S>,
    run_id: &str,
    pre: &Precondition,
    item: &Cleanup,
    ctx: NestedContext<'_>,
) -> Handled {
    let (logical_id, resource, replaced) = {
        let s = rec.state();
        match item {
            Cleanup::Removed(id) => match s.resources.get(id) {
                Some(r) => (id.clone(), r.clone(), false),
                None => return Ok(Ok(Done::Deleted)),
            },
            Cleanup::Predecessor(p) => match s.predecessors.get(p) {
                Some(pred) => (pred.logical_id.clone(), pred.resource.clone(), true),
                None => return Ok(Ok(Done::Deleted)),
            },
        }
    };
    let kind = if replaced {
        StepKind::DeleteReplaced {
            physical_id: &resource.physical_id,
        }
    } else {
        StepKind::Delete
    };
    let step = Step::new(
        rec,
        pre,
        (run_id, run_id),
        (&logical_id, &resource.resource_type),
        kind,
    );
    let (policy, which) = if replaced {
        (resource.update_replace_policy, "UpdateReplacePolicy")
    } else {
        (resource.deletion_policy, "DeletionPolicy")
    };
    if keeps(policy) {
        let reason = format!(
            "{which}: {}",
            policy.map(Policy::as_str).unwrap_or("Retain")
        );
        step.retained(resource.physical_id.clone(), reason.clone(), replaced)
            .await?;
        return Ok(Ok(Done::Retained(reason)));
    }
    let masker = Masker {
        resolution: None,
        secrets: &[],
    };
    let provider = match engine
        .router(ctx)
        .for_recorded(&resource.resource_type, resource.provider)
    {
        Err(e) => {
            let error = masker.info("Unsupported", &e.to_string());
            return Ok(Err(step.failed(Phase::Failed, error).await?));
        }
        Ok(provider) => provider,
    };
    let mut request = step.request(resource.properties.clone());
    request.physical_id = Some(resource.physical_id.clone());
    let intent = Intent {
        provider: resource.provider,
        physical_id: Some(resource.physical_id.clone()),
        properties: None,
    };
    let answer = step
        .apply(provider.as_ref(), &request, Some(intent))
        .await?;
    Ok(
        match step
            .settle_delete(
                answer,
                Phase::Done,
                &resource.physical_id,
                replaced,
                &masker,
            )
            .await?
        {
            Deletion::Deleted => Ok(Done::Deleted),
            Deletion::Skipped(reason) => Ok(Done::Skipped(reason)),
            Deletion::Retained(reason) => Ok(Done::Retained(reason)),
            Deletion::Failed(e) => Err(step.failed(Phase::Failed, masker.error(&e)).await?),
        },
    )
}

/// The subjects and tasks of a set of cleanup items, for [`crate::phase::run_phase`].
pub(crate) fn cleanup_items(items: &[Cleanup]) -> Arc<IndexMap<String, Cleanup>> {
    Arc::new(items.iter().map(|c| (c.task_id(), c.clone())).collect())
}

/// The subject of a cleanup item.
pub(crate) fn cleanup_of<S: EventStore>(rec: &Recorder<S>, item: &Cleanup) -> Subject {
    let (logical_id, resource_type) = cleanup_subject(&rec.state(), item);
    Subject {
        logical_id,
        resource_type,
        action: "delete".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use indexmap::IndexMap;
    use serde_json::Map;
    use stackflow_events::event::ProviderKind;
    use stackflow_events::projection::{Predecessor, ResourceState};

    fn resource(deps: &[&str]) -> ResourceState {
        ResourceState {
            resource_type: "AWS::SQS::Queue".into(),
            physical_id: "p".into(),
            properties: Map::new(),
            attributes: IndexMap::new(),
            dependencies: deps.iter().map(|d| d.to_string()).collect(),
            provider: ProviderKind::Sdk,
            deletion_policy: None,
            update_replace_policy: None,
            baseline: None,
            imported: false,
            secret_digest: None,
        }
    }

    #[test]
    fn cleanup_deletes_dependents_first_and_predecessors_after_what_used_them() {
        let mut s = StackState::default();
        s.resources.insert("A".into(), resource(&[]));
        s.resources.insert("B".into(), resource(&["A"]));
        s.resources.insert("C".into(), resource(&["B"]));
        s.resources.insert("X".into(), resource(&[]));
        // X was replaced; the old X was used by removed C... C depends on X's old self.
        s.resources
            .get_mut("C")
            .unwrap()
            .dependencies
            .push("X".into());
        s.predecessors.insert(
            "old-x".into(),
            Predecessor {
                logical_id: "X".into(),
                deploy_id: "d1".into(),
                resource: resource(&[]),
            },
        );
        let removed: Vec<String> = ["A", "B", "C"].iter().map(|s| s.to_string()).collect();
        let (items, tasks) = cleanup_graph(&s, &removed);
        assert_eq!(items.len(), 4);
        let deps = |id: &str| {
            let mut d = tasks.iter().find(|t| t.id == id).unwrap().deps.clone();
            d.sort();
            d
        };
        // A waits for B (B depended on A); B for C; the old X for C.
        assert_eq!(deps("A"), vec!["B".to_string()]);
        assert_eq!(deps("B"), vec!["C".to_string()]);
        assert!(deps("C").is_empty());
        assert_eq!(deps("predecessor:old-x"), vec!["C".to_string()]);
    }

    #[test]
    fn retain_policies_keep_the_resource() {
        assert!(keeps(Some(Policy::Retain)));
        assert!(keeps(Some(Policy::RetainExceptOnCreate)));
        assert!(keeps(Some(Policy::Snapshot)));
        assert!(!keeps(Some(Policy::Delete)));
        assert!(!keeps(None));
    }
}
