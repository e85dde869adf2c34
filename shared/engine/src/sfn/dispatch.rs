//! Dispatch: a task's name and JSON input to its handler, as both the Lambda bootstrap
//! and the activity worker call it.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use stackflow_events::EventStore;

use super::errors::{ErrorKind, TaskError};
use super::payloads::{GateAnswer, Item, ItemResult};
use super::tasks::Tasks;

/// Every task the state machines name (the `${Name}` placeholders of `infra/*.asl.json`).
pub const TASK_NAMES: &[&str] = &[
    "Plan",
    "Gate",
    "Provision",
    "Part",
    "Conclude",
    "Finish",
    "Fail",
    "Destroy",
    "Rollback",
    "Release",
];

impl<S: EventStore + 'static> Tasks<S> {
    /// Runs the task `name` on `input` (JSON), as a worker or a Lambda function does.
    /// `token` is the gate's task token. `Ok(None)`: the gate waits (its token is
    /// released later by another task).
    pub async fn dispatch(
        &self,
        name: &str,
        input: Value,
        token: Option<&str>,
    ) -> Result<Option<Value>, TaskError> {
        fn parse<T: for<'de> Deserialize<'de>>(name: &str, v: Value) -> Result<T, TaskError> {
            serde_json::from_value(v).map_err(|e| {
                TaskError::new(ErrorKind::Input, format!("task {name}: bad input: {e}"))
            })
        }
        fn out<T: Serialize>(v: T) -> Result<Option<Value>, TaskError> {
            Ok(Some(serde_json::to_value(v).unwrap_or(Value::Null)))
        }
        match name {
            "Plan" => out(self.plan(parse(name, input)?).await?),
            "Gate" => {
                // Lambda passes {"item": ..., "token": ...}; an activity passes the item
                // and its own token.
                let (item, token) = match (input.get("item"), input.get("token"), token) {
                    (Some(item), Some(Value::String(t)), _) => {
                        (parse::<Item>(name, item.clone())?, t.clone())
                    }
                    (_, _, Some(t)) => (parse::<Item>(name, input)?, t.to_string()),
                    _ => {
                        return Err(TaskError::new(ErrorKind::Input, "task Gate: no task token"));
                    }
                };
                self.gate(&item, &token).await?;
                Ok(None)
            }
            "Provision" => {
                // The gate's answer rides along in `gate`: a stopped gate means do not act;
                // a deferred one, leave the action to a later round.
                let gate = input.get("gate").cloned();
                let answer = gate
                    .and_then(|g| serde_json::from_value::<GateAnswer>(g).ok())
                    .unwrap_or(GateAnswer::GO);
                let item: Item = parse(name, input)?;
                if answer.deferred {
                    self.defer(&item).await?;
                    return out(ItemResult {
                        id: item.id,
                        outcome: "deferred".into(),
                        error: None,
                    });
                }
                if !answer.go {
                    return out(ItemResult {
                        id: item.id,
                        outcome: "not-started".into(),
                        error: None,
                    });
                }
                out(self.act(&item).await?)
            }
            "Part" => out(self.part(parse(name, input)?).await?),
            "Conclude" => out(self.conclude(parse(name, input)?).await?),
            "Finish" => out(self.finish(parse(name, input)?).await?),
            "Fail" => out(self.fail_or_wait(parse(name, input)?).await?),
            "Destroy" => out(self.destroy_run(parse(name, input)?).await?),
            "Rollback" => out(self.rollback_run(parse(name, input)?).await?),
            "Release" => out(self.release_lock(parse(name, input)?).await?),
            other => Err(TaskError::new(
                ErrorKind::Input,
                format!(
                    "no task named {other}; the tasks are {}",
                    TASK_NAMES.join(", ")
                ),
            )),
        }
    }
}
