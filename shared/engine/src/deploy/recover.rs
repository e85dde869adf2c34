//! Recovery at the start of a deploy: the intents without an outcome that earlier runs
//! left are settled ([`crate::reconcile`]) with what this deploy knows of them.

use indexmap::IndexMap;
use serde_json::{Map, Value};
use stackflow_events::EventStore;
use stackflow_events::projection::PendingIntent;

use super::Deployment;
use crate::engine::{EngineError, NestedContext};
use crate::progress::ProgressEvent;
use crate::reconcile::{Current, Replay, reconcile_one};
use crate::secrets::contains_mask;

impl<S: EventStore + 'static> Deployment<S> {
    /// Settles every intent without an outcome that earlier runs left.
    pub(crate) async fn reconcile(&self) -> Result<usize, EngineError> {
        let pending: Vec<PendingIntent> = {
            let s = self.recorder.state();
            s.pending
                .values()
                .filter(|p| p.deploy_id != self.deploy_id)
                .cloned()
                .collect()
        };
        let pre = self.holds();
        for p in &pending {
            let outcome = reconcile_one(&self.engine, &self.recorder, &pre, p, Some(self))
                .await?
                .to_string();
            self.engine
                .progress
                .report(ProgressEvent::ResourceFinished {
                    stack: self.stack(),
                    logical_id: &p.logical_id,
                    resource_type: &p.resource_type,
                    outcome: "recovered",
                    seconds: 0.0,
                    detail: Some(&outcome),
                });
        }
        Ok(pending.len())
    }
}

impl<S: EventStore + 'static> Current for Deployment<S> {
    fn nested_context(&self) -> NestedContext<'_> {
        Deployment::nested_context(self)
    }

    /// The call is replayed with what it sent: the recorded properties. Only where those
    /// hold a masked `NoEcho` value (which must not be sent) do the template's come in.
    fn replay_of(&self, p: &PendingIntent) -> Option<Replay> {
        let r = self.input.template.resources.get(&p.logical_id)?;
        let dependencies =
            stackflow_core::graph::Graph::build(&self.input.template, &self.plan.conditions)
                .ok()
                .map(|g| {
                    g.dependencies(&p.logical_id)
                        .into_iter()
                        .map(String::from)
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default();
        let from_template = self.with_resolver(|r| r.resolve_properties(&p.logical_id).ok());
        let recorded = p
            .properties
            .clone()
            .filter(|r| !contains_mask(&Value::Object(r.clone())));
        Some(Replay {
            properties: recorded.or(from_template).or_else(|| p.properties.clone()),
            dependencies,
            deletion_policy: r.deletion_policy,
            update_replace_policy: r.update_replace_policy,
        })
    }

    fn record_properties(
        &self,
        id: &str,
        props: &Map<String, Value>,
    ) -> (Map<String, Value>, Vec<String>) {
        Deployment::record_properties(self, id, props)
    }

    fn record_attributes(
        &self,
        id: &str,
        attributes: IndexMap<String, Value>,
        all_secret: bool,
        needles: &[String],
    ) -> IndexMap<String, Value> {
        Deployment::record_attributes(self, id, attributes, all_secret, needles)
    }
}
