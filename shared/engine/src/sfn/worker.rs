//! `stackflow worker`: runs the state machines' tasks on this machine by polling Step
//! Functions activities (one activity per task name), with the same handlers Lambda runs.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_sfn::Client;
use serde_json::Value;
use stackflow_events::EventStore;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::sfn::tasks::{TASK_NAMES, TaskError, Tasks};

/// The activity name of `task` for a deployment of the engine named `prefix`.
pub fn activity_name(prefix: &str, task: &str) -> String {
    format!("{prefix}-{task}")
}

/// A Step Functions call about the activities that failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{call}: {message}")]
pub struct ActivityError {
    /// The call, e.g. `ListActivities`, `CreateActivity NAME`.
    pub call: String,
    /// Why, as AWS answered.
    pub message: String,
}

fn activity_error<E, R>(call: String, e: &aws_sdk_sfn::error::SdkError<E, R>) -> ActivityError
where
    E: std::error::Error + 'static,
    R: std::fmt::Debug + 'static,
{
    ActivityError {
        call,
        message: stackflow_providers::error::error_chain(e),
    }
}

/// Creates (or finds) one activity per task; returns task name to activity ARN.
pub async fn ensure_activities(
    sfn: &Client,
    prefix: &str,
) -> Result<BTreeMap<String, String>, ActivityError> {
    // Existing activities first: `CreateActivity` is idempotent on AWS, not everywhere.
    let mut existing: BTreeMap<String, String> = BTreeMap::new();
    let mut next: Option<String> = None;
    loop {
        let page = sfn
            .list_activities()
            .set_next_token(next.clone())
            .send()
            .await
            .map_err(|e| activity_error("ListActivities".to_string(), &e))?;
        for a in page.activities() {
            existing.insert(a.name().to_string(), a.activity_arn().to_string());
        }
        match page.next_token() {
            Some(t) => next = Some(t.to_string()),
            None => break,
        }
    }
    let mut out = BTreeMap::new();
    for task in TASK_NAMES {
        let name = activity_name(prefix, task);
        let arn = match existing.get(&name) {
            Some(arn) => arn.clone(),
            None => {
                sfn.create_activity()
                    .name(&name)
                    .send()
                    .await
                    .map_err(|e| activity_error(format!("CreateActivity {name}"), &e))?
                    .activity_arn
            }
        };
        out.insert(task.to_string(), arn);
    }
    Ok(out)
}

/// Polls the activities and runs their tasks.
pub struct Worker<S> {
    /// The handlers.
    pub tasks: Arc<Tasks<S>>,
    /// Step Functions.
    pub sfn: Client,
    /// Task name to activity ARN.
    pub activities: BTreeMap<String, String>,
    /// This worker's name, as Step Functions records it.
    pub name: String,
    /// How many tasks of one kind may run at once.
    pub per_task: usize,
    /// How often a running task tells Step Functions it is alive.
    pub heartbeat: Duration,
}

impl<S: EventStore + 'static> Worker<S> {
    /// Polls until `stop` turns true, then lets running tasks finish.
    pub async fn run(self, stop: watch::Receiver<bool>) {
        let me = Arc::new(self);
        let mut set = JoinSet::new();
        for (task, arn) in me.activities.clone() {
            let pollers = if task == "Provision" || task == "Gate" {
                me.per_task.max(1)
            } else {
                1
            };
            for _ in 0..pollers {
                let me = me.clone();
                let task = task.clone();
                let arn = arn.clone();
                let stop = stop.clone();
                set.spawn(async move { me.poll(&task, &arn, stop).await });
            }
        }
        while set.join_next().await.is_some() {}
    }

    async fn poll(&self, task: &str, arn: &str, stop: watch::Receiver<bool>) {
        while !*stop.borrow() {
            let got = self
                .sfn
                .get_activity_task()
                .activity_arn(arn)
                .worker_name(&self.name)
                .send()
                .await;
            let out = match got {
                Ok(out) => out,
                Err(e) => {
                    tracing::warn!(task, error = %stackflow_providers::error::error_chain(&e), "GetActivityTask failed");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    continue;
                }
            };
            let Some(token) = out.task_token.filter(|t| !t.is_empty()) else {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            let input: Value = out
                .input
                .as_deref()
                .and_then(|i| serde_json::from_str(i).ok())
                .unwrap_or(Value::Null);
            self.handle(task, input, &token).await;
        }
    }

    async fn handle(&self, task: &str, input: Value, token: &str) {
        // The gate answers later, through its token: no heartbeat, no answer here.
        if task == "Gate" {
            if let Err(e) = self.tasks.dispatch(task, input, Some(token)).await {
                self.answer_failure(token, &e).await;
            }
            return;
        }
        let work = self.tasks.dispatch(task, input, Some(token));
        tokio::pin!(work);
        let result = loop {
            tokio::select! {
                r = &mut work => break r,
                _ = tokio::time::sleep(self.heartbeat) => {
                    let _ = self.sfn.send_task_heartbeat().task_token(token).send().await;
                }
            }
        };
        match result {
            Ok(output) => {
                let output = output.unwrap_or(Value::Null).to_string();
                if let Err(e) = self
                    .sfn
                    .send_task_success()
                    .task_token(token)
                    .output(output)
                    .send()
                    .await
                {
                    tracing::warn!(task, error = %stackflow_providers::error::error_chain(&e), "SendTaskSuccess failed");
                }
            }
            Err(e) => self.answer_failure(token, &e).await,
        }
    }

    async fn answer_failure(&self, token: &str, e: &TaskError) {
        tracing::warn!(error = %e, "task failed");
        let cause: String = e.message.chars().take(32_000).collect();
        if let Err(err) = self
            .sfn
            .send_task_failure()
            .task_token(token)
            .error(e.name())
            .cause(cause)
            .send()
            .await
        {
            tracing::warn!(error = %stackflow_providers::error::error_chain(&err), "SendTaskFailure failed");
        }
    }
}
