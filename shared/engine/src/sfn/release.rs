//! **Release**: the last word of an execution that could not end as planned (its Plan or
//! its Fail task failed for good): the stack's lock, when this deploy holds it, is
//! released, and the stream says why first.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use stackflow_events::event::{ErrorInfo, Event};
use stackflow_events::{EventStore, Precondition};

use super::errors::TaskError;
use super::payloads::RunKind;
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
    /// A destroy or rollback execution's run (absent: a deploy's).
    #[serde(default)]
    pub run: Option<RunKind>,
    /// The execution's name, which names a destroy's or rollback's run.
    #[serde(default)]
    pub execution: Option<String>,
}

impl ReleaseRequest {
    /// The run whose lock this is: a destroy's or rollback's named after the execution,
    /// else the deploy's (as the input names it, or derived from its input's key).
    fn run_id(&self) -> String {
        match (self.run, &self.execution, &self.deploy_id, &self.input_key) {
            (Some(kind), Some(execution), _, _) => kind.run_id(execution),
            (Some(_), None, _, _) => String::new(),
            (None, _, Some(id), _) => id.clone(),
            (None, _, None, Some(key)) => derived_deploy_id(&self.stack, key),
            (None, _, None, None) => String::new(),
        }
    }
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
    /// The run's kind (absent: a deploy's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunKind>,
    /// What this task recorded before it released the lock (absent: nothing), so that
    /// the failure is also published as an event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded: Option<Recorded>,
}

/// What Release recorded for a run that could not end as planned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Recorded {
    /// The run failed (`DeployFailed`), with the caught error.
    Failed {
        /// The error, as recorded.
        error: ErrorInfo,
    },
    /// The rollback of `deploy_id` stopped before its end (`RollbackFinished`,
    /// incomplete).
    RollbackStopped {
        /// The deploy whose journal was being undone.
        #[serde(rename = "deployId")]
        deploy_id: String,
        /// The error, as recorded.
        error: ErrorInfo,
    },
}

impl Recorded {
    fn of(event: &Event) -> Option<Recorded> {
        match event {
            Event::DeployFailed { error, .. } => Some(Recorded::Failed {
                error: error.clone(),
            }),
            Event::RollbackFinished {
                deploy_id, errors, ..
            } => Some(Recorded::RollbackStopped {
                deploy_id: deploy_id.clone(),
                error: errors.first().cloned()?,
            }),
            _ => None,
        }
    }
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
    /// **Release**: when `req`'s run holds the stack's lock, records why it ends here and
    /// releases the lock. A deploy records `DeployFailed` with the caught error when it
    /// has not failed yet, else `RollbackFinished`, incomplete, when its rollback started
    /// and did not finish; a rollback run records its `RollbackFinished`, incomplete, when
    /// it started undoing; a destroy (or a rollback that had not started) records
    /// `DeployFailed` under its run id. Safe to run again: a lock it no longer holds is
    /// left alone.
    pub async fn release_lock(&self, req: ReleaseRequest) -> Result<Released, TaskError> {
        let run_id = req.run_id();
        let store = self.engine.store.clone();
        let rec = Recorder::load(store.clone(), self.engine.stream(&req.stack))
            .await
            .map_err(EngineError::from)?;
        let holds = rec
            .state()
            .lock
            .as_ref()
            .is_some_and(|h| h.deploy_id == run_id && !run_id.is_empty());
        let mut out = Released {
            stack: req.stack.clone(),
            deploy_id: run_id.clone(),
            released: holds,
            run: req.run,
            recorded: None,
        };
        if !holds {
            return Ok(out);
        }
        let events: Vec<Event> = store
            .read(rec.stream(), 0)
            .await
            .map_err(EngineError::from)?
            .into_iter()
            .map(|e| e.event)
            .collect();
        let error = caught(req.error.as_ref());
        let pre = Precondition::HoldsLock(run_id.clone());
        if let Some((key, event)) = why(&events, &run_id, req.run, error) {
            out.recorded = Recorded::of(&event);
            rec.append(key, event, &pre)
                .await
                .map_err(EngineError::from)?;
        }
        crate::run::release(&rec, &run_id).await?;
        if req.run.is_none() {
            self.forget_secrets(&req.stack, &run_id).await?;
        }
        Ok(out)
    }
}

/// What run `id` (of `kind`; `None`: a deploy) records, given the stream's `events`,
/// before its lock is released for `error`, with its key.
fn why(
    events: &[Event],
    id: &str,
    kind: Option<RunKind>,
    error: ErrorInfo,
) -> Option<(String, Event)> {
    let failed = events
        .iter()
        .any(|e| matches!(e, Event::DeployFailed { deploy_id: d, .. } if d == id));
    // The deploy whose journal is being undone (by the deploy itself, or by this
    // rollback run), when that started and did not finish.
    let undoing = |started: &dyn Fn(&str, &str) -> bool| {
        let mut open: Option<String> = None;
        for e in events {
            match e {
                Event::RollbackStarted {
                    deploy_id,
                    rollback_id,
                } if started(deploy_id, rollback_id) => open = Some(deploy_id.clone()),
                Event::RollbackFinished { deploy_id, .. } if open.as_ref() == Some(deploy_id) => {
                    open = None
                }
                _ => {}
            }
        }
        open
    };
    let unfinished = match kind {
        None => undoing(&|d, _| d == id),
        Some(RunKind::Rollback) => undoing(&|_, r| r == id),
        Some(RunKind::Destroy) => None,
    };
    let key_of_finish = match kind {
        None => run_key(&rollback_of(id), RunEvent::Finished),
        Some(_) => run_key(id, RunEvent::Finished),
    };
    // A deploy says first that it failed; a run says first that its rollback stopped.
    let rollback_first = kind.is_some() || failed;
    match unfinished {
        Some(deploy_id) if rollback_first => Some((
            key_of_finish,
            Event::RollbackFinished {
                deploy_id,
                complete: false,
                errors: vec![error],
            },
        )),
        _ if !failed => Some((
            run_key(id, RunEvent::Failed),
            Event::DeployFailed {
                deploy_id: id.to_string(),
                error,
                logical_id: None,
            },
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error() -> ErrorInfo {
        ErrorInfo {
            name: "Stackflow.Again".into(),
            message: "out of attempts".into(),
        }
    }

    fn started(deploy_id: &str, rollback_id: &str) -> Event {
        Event::RollbackStarted {
            deploy_id: deploy_id.into(),
            rollback_id: rollback_id.into(),
        }
    }

    fn name(why: Option<(String, Event)>) -> Option<(String, &'static str)> {
        why.map(|(k, e)| (k, e.type_name()))
    }

    #[test]
    fn a_destroy_says_why_under_its_run_id() {
        let got = name(why(&[], "x-e1", Some(RunKind::Destroy), error()));
        assert_eq!(
            got,
            Some((run_key("x-e1", RunEvent::Failed), "DeployFailed"))
        );
    }

    #[test]
    fn a_rollback_run_that_started_undoing_says_it_did_not_finish() {
        let events = [started("d-1", "r-e1")];
        let got = why(&events, "r-e1", Some(RunKind::Rollback), error());
        let (key, event) = got.unwrap();
        assert_eq!(key, run_key("r-e1", RunEvent::Finished));
        assert!(matches!(
            event,
            Event::RollbackFinished { ref deploy_id, complete: false, .. } if deploy_id == "d-1"
        ));
        // Before it started undoing, it says it failed.
        let got = name(why(&[], "r-e1", Some(RunKind::Rollback), error()));
        assert_eq!(
            got,
            Some((run_key("r-e1", RunEvent::Failed), "DeployFailed"))
        );
    }

    #[test]
    fn a_deploy_says_it_failed_first_then_that_its_rollback_stopped() {
        let got = name(why(&[], "d-1", None, error()));
        assert_eq!(
            got,
            Some((run_key("d-1", RunEvent::Failed), "DeployFailed"))
        );
        let failed = Event::DeployFailed {
            deploy_id: "d-1".into(),
            error: error(),
            logical_id: None,
        };
        let rolling = [failed.clone(), started("d-1", &rollback_of("d-1"))];
        let got = name(why(&rolling, "d-1", None, error()));
        assert_eq!(
            got,
            Some((
                run_key(&rollback_of("d-1"), RunEvent::Finished),
                "RollbackFinished"
            ))
        );
        assert_eq!(name(why(&[failed], "d-1", None, error())), None);
    }
}
