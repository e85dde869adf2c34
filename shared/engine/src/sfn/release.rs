//! **Release**: the last word of an execution that could not end as planned (its Plan or
//! its Fail task failed for good): the stack's lock, when this deploy holds it, is
//! released, and the stream says why first.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use stackflow_events::event::{ErrorInfo, Event};
use stackflow_events::{EventStore, Precondition};

use super::errors::TaskError;
use super::tasks::{Tasks, derived_deploy_id};
use crate::engine::EngineError;
use crate::keys::{RunEvent, rollback_of, run_key};
use crate::recorder::Recorder;

/// What the Release task takes: the state's input (the execution input after a failed
/// Plan, a deploy reference after a failed Fail) with the `Catch`'s error at `error`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseRequest {
    /// The stack.
    pub stack: String,
    /// The deploy, when the input names it.
    #[serde(default)]
    pub deploy_id: Option<String>,
    /// The stack input's key (a deploy without an id derives it from this).
    #[serde(default)]
    pub input_key: Option<String>,
    /// The error the `Catch` caught: `{"Error": ..., "Cause": ...}`.
    #[serde(default)]
    pub error: Option<Value>,
}

/// What Release did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Released {
    /// The stack.
    pub stack: String,
    /// The deploy.
    pub deploy_id: String,
    /// True when this task released the lock (false: the deploy did not hold it).
    pub released: bool,
}

/// The caught error as the stream records it.
fn caught(error: Option<&Value>) -> ErrorInfo {
    let field = |k: &str| {
        error
            .and_then(|e| e.get(k))
            .and_then(Value::as_str)
            .map(String::from)
    };
    let cause = field("Cause").unwrap_or_default();
    ErrorInfo {
        name: field("Error").unwrap_or_else(|| "Stackflow.Internal".into()),
        message: format!(
            "the execution could not end as planned, and released the stack's lock: {}",
            cause.chars().take(4000).collect::<String>()
        ),
    }
}

impl<S: EventStore + 'static> Tasks<S> {
    /// **Release**: when `req`'s deploy holds the stack's lock, records why it ends here
    /// (`DeployFailed` with the caught error when the deploy has not failed yet; else
    /// `RollbackFinished`, incomplete, when its rollback started and did not finish) and
    /// releases the lock. Safe to run again: a lock it no longer holds is left alone.
    pub async fn release_lock(&self, req: ReleaseRequest) -> Result<Released, TaskError> {
        let deploy_id = match (&req.deploy_id, &req.input_key) {
            (Some(id), _) => id.clone(),
            (None, Some(key)) => derived_deploy_id(&req.stack, key),
            (None, None) => String::new(),
        };
        let store = self.engine.store.clone();
        let rec = Recorder::load(store.clone(), self.engine.stream(&req.stack))
            .await
            .map_err(EngineError::from)?;
        let holds = rec
            .state()
            .lock
            .as_ref()
            .is_some_and(|h| h.deploy_id == deploy_id && !deploy_id.is_empty());
        let out = Released {
            stack: req.stack.clone(),
            deploy_id: deploy_id.clone(),
            released: holds,
        };
        if !holds {
            return Ok(out);
        }
        let events = store
            .read(rec.stream(), 0)
            .await
            .map_err(EngineError::from)?;
        let mine = |f: &dyn Fn(&Event) -> bool| events.iter().any(|e| f(&e.event));
        let failed =
            mine(&|e| matches!(e, Event::DeployFailed { deploy_id: d, .. } if *d == deploy_id));
        let rolling = mine(
            &|e| matches!(e, Event::RollbackStarted { deploy_id: d, .. } if *d == deploy_id),
        ) && !mine(
            &|e| matches!(e, Event::RollbackFinished { deploy_id: d, .. } if *d == deploy_id),
        );
        let pre = Precondition::HoldsLock(deploy_id.clone());
        let error = caught(req.error.as_ref());
        let why = if !failed {
            Some((
                run_key(&deploy_id, RunEvent::Failed),
                Event::DeployFailed {
                    deploy_id: deploy_id.clone(),
                    error,
                    logical_id: None,
                },
            ))
        } else if rolling {
            Some((
                run_key(&rollback_of(&deploy_id), RunEvent::Finished),
                Event::RollbackFinished {
                    deploy_id: deploy_id.clone(),
                    complete: false,
                    errors: vec![error],
                },
            ))
        } else {
            None
        };
        if let Some((key, event)) = why {
            rec.append(key, event, &pre)
                .await
                .map_err(EngineError::from)?;
        }
        rec.append(
            run_key(&deploy_id, RunEvent::Released),
            Event::LockReleased {
                deploy_id: deploy_id.clone(),
            },
            &Precondition::ReleaseLock(deploy_id.clone()),
        )
        .await
        .map_err(EngineError::from)?;
        self.forget_secrets(&req.stack, &deploy_id).await?;
        Ok(out)
    }
}
