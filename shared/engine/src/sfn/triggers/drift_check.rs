//! **DriftCheck**: a scheduled drift check (EventBridge Scheduler runs it): the engine's
//! `drift` of every stack recorded in this region (or the stacks named, or those whose
//! resources carry a tag), each check a `DriftChecked` event in the stack's log. A stack
//! that cannot be checked is reported with its error; the others are still checked.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use stackflow_events::EventStore;
use stackflow_events::projection::StackState;

use super::super::errors::TaskError;
use super::super::tasks::Tasks;
use crate::drift::{DriftMode, DriftStatus, drift_stack};
use crate::engine::EngineError;

/// What a schedule asks to check.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DriftCheckRequest {
    /// The stacks to check; empty: every stack recorded in the function's region.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stacks: Vec<String>,
    /// Only the stacks with a recorded resource that has this tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<TagFilter>,
}

/// A tag a stack's resources carry (in their `Tags` property).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TagFilter {
    /// The tag's key.
    pub key: String,
    /// Its value; `None`: any value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// One resource found out of sync (paths only: never a value).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DriftedResource {
    /// The logical id.
    pub logical_id: String,
    /// Its type.
    pub resource_type: String,
    /// `drifted` or `deleted`.
    pub status: String,
    /// The property paths that differ.
    pub paths: Vec<String>,
}

/// One stack's check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StackDrift {
    /// The stack.
    pub stack: String,
    /// The check's id (its `DriftChecked` event); empty when it could not run.
    pub check_id: String,
    /// `in-sync`, `drifted` or `failed`.
    pub status: String,
    /// How many resources were compared.
    pub resources: usize,
    /// What drifted or was deleted.
    pub drifted: Vec<DriftedResource>,
    /// Why the check failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The task's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriftChecks {
    /// Per stack, in name order.
    pub checked: Vec<StackDrift>,
}

/// True when a resource of `state` has the tag `filter` in its `Tags` property (the
/// CloudFormation list of `{Key, Value}`, or a map of keys to values).
pub fn has_tag(state: &StackState, filter: &TagFilter) -> bool {
    let matches = |v: Option<&Value>| match (&filter.value, v) {
        (_, None) => false,
        (None, Some(_)) => true,
        (Some(want), Some(v)) => v.as_str() == Some(want.as_str()),
    };
    state
        .resources
        .values()
        .any(|r| match r.properties.get("Tags") {
            Some(Value::Array(tags)) => tags.iter().any(|t| {
                t.get("Key").and_then(Value::as_str) == Some(&filter.key) && matches(t.get("Value"))
            }),
            Some(Value::Object(map)) => matches(map.get(&filter.key)),
            _ => false,
        })
}

impl<S: EventStore + 'static> Tasks<S> {
    /// **DriftCheck**: every selected stack's drift, in name order.
    pub async fn drift_check(&self, req: DriftCheckRequest) -> Result<DriftChecks, TaskError> {
        let mut stacks = if req.stacks.is_empty() {
            let streams = self
                .engine
                .store
                .streams()
                .await
                .map_err(EngineError::from)?;
            streams
                .into_iter()
                .filter(|s| s.region == self.engine.region)
                .map(|s| s.stack)
                .collect()
        } else {
            req.stacks.clone()
        };
        stacks.sort();
        stacks.dedup();
        let mut checked = Vec::new();
        for stack in stacks {
            let stream = self.engine.stream(&stack);
            let state = stackflow_events::load_state(&*self.engine.store, &stream)
                .await
                .map_err(EngineError::from)?;
            if state.resources.is_empty() {
                continue;
            }
            if let Some(tag) = &req.tag
                && !has_tag(&state, tag)
            {
                continue;
            }
            checked.push(self.check_one(&stack).await);
        }
        Ok(DriftChecks { checked })
    }

    async fn check_one(&self, stack: &str) -> StackDrift {
        match drift_stack(self.engine.clone(), stack, &[], DriftMode::Check).await {
            Ok(report) => {
                let drifted: Vec<DriftedResource> = report
                    .resources
                    .iter()
                    .filter(|r| matches!(r.status, DriftStatus::Drifted | DriftStatus::Deleted))
                    .map(|r| DriftedResource {
                        logical_id: r.logical_id.clone(),
                        resource_type: r.resource_type.clone(),
                        status: if r.status == DriftStatus::Deleted {
                            "deleted".into()
                        } else {
                            "drifted".into()
                        },
                        paths: r.differences.iter().map(|d| d.path.clone()).collect(),
                    })
                    .collect();
                StackDrift {
                    stack: stack.to_string(),
                    check_id: report.check_id,
                    status: if drifted.is_empty() {
                        "in-sync"
                    } else {
                        "drifted"
                    }
                    .into(),
                    resources: report.resources.len(),
                    drifted,
                    error: None,
                }
            }
            Err(e) => StackDrift {
                stack: stack.to_string(),
                check_id: String::new(),
                status: "failed".into(),
                resources: 0,
                drifted: vec![],
                error: Some(TaskError::from(e).message),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stackflow_events::event::ProviderKind;
    use stackflow_events::projection::ResourceState;

    fn state_with(tags: Value) -> StackState {
        let mut state = StackState::default();
        let mut properties = serde_json::Map::new();
        properties.insert("Tags".into(), tags);
        state.resources.insert(
            "Q".into(),
            ResourceState {
                resource_type: "AWS::SQS::Queue".into(),
                physical_id: "q".into(),
                properties,
                attributes: Default::default(),
                dependencies: vec![],
                provider: ProviderKind::CloudControl,
                deletion_policy: None,
                update_replace_policy: None,
                baseline: None,
                imported: false,
                secret_digest: None,
            },
        );
        state
    }

    #[test]
    fn a_tag_matches_in_list_or_map_form() {
        let filter = |key: &str, value: Option<&str>| TagFilter {
            key: key.into(),
            value: value.map(String::from),
        };
        let list = state_with(serde_json::json!([{"Key": "team", "Value": "payments"}]));
        assert!(has_tag(&list, &filter("team", None)));
        assert!(has_tag(&list, &filter("team", Some("payments"))));
        assert!(!has_tag(&list, &filter("team", Some("orders"))));
        assert!(!has_tag(&list, &filter("env", None)));
        let map = state_with(serde_json::json!({"team": "payments"}));
        assert!(has_tag(&map, &filter("team", Some("payments"))));
        assert!(!has_tag(&StackState::default(), &filter("team", None)));
    }

    #[test]
    fn the_request_reads_stacks_and_a_tag() {
        let r: DriftCheckRequest = serde_json::from_value(serde_json::json!({})).unwrap();
        assert_eq!(r, DriftCheckRequest::default());
        let r: DriftCheckRequest = serde_json::from_value(
            serde_json::json!({"stacks": ["a"], "tag": {"key": "team", "value": "x"}}),
        )
        .unwrap();
        assert_eq!(r.stacks, vec!["a"]);
        assert!(
            serde_json::from_value::<DriftCheckRequest>(serde_json::json!({"stack": "a"})).is_err()
        );
    }
}
