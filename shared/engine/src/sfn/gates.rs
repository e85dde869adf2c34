//! Gates: how a resource's `Map` iteration waits only for its own dependencies.
//!
//! The state machine's `Map` runs one iteration per action, in topological order. Each
//! iteration first runs a gate task with a task token (`.waitForTaskToken` on Lambda; an
//! activity's own token when a worker runs it). The gate handler stores the token under
//! `deploys/<stack>/<deploy>/gates/<phase>/<id>` and releases it at once when every
//! dependency already has its `done` marker. Otherwise the token waits: the handler that
//! finishes the last dependency writes its `done` marker and releases every dependent whose
//! dependencies are now all done (`SendTaskSuccess`). Both sides write first and look
//! second, so one of them always sees the other (S3 is strongly consistent); a token
//! released twice is harmless (the second `SendTaskSuccess` is refused and ignored).
//!
//! A failed action writes the `failed` marker and releases every waiting gate with
//! `{"go": false}`: those iterations end without acting, the `Map` completes, and the
//! `Conclude` task sees the marker and sends the execution to `Fail` (rollback).

use stackflow_events::EventStore;

use super::artifacts::{aws_error, prefix};
use super::errors::TaskError;
use super::payloads::{GateAnswer, Item, Phase};
use super::tasks::Tasks;
use stackflow_events::event::ErrorInfo;

impl<S: EventStore + 'static> Tasks<S> {
    pub(crate) async fn all_done(&self, item: &Item, deps: &[String]) -> Result<bool, TaskError> {
        let p = prefix(&item.stack, &item.deploy_id);
        for d in deps {
            if !self
                .exists(&format!("{p}done/{}/{d}", item.phase.as_str()))
                .await?
            {
                return Ok(false);
            }
        }
        Ok(true)
    }

    pub(crate) async fn release(&self, token: &str, go: bool) -> Result<(), TaskError> {
        let output = serde_json::to_string(&GateAnswer { go }).unwrap_or_default();
        match self
            .sfn
            .send_task_success()
            .task_token(token)
            .output(output)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            // Released already (by the other side of the race), or the execution ended.
            Err(e)
                if e.as_service_error().is_some_and(|s| {
                    s.is_task_timed_out() || s.is_task_does_not_exist() || s.is_invalid_token()
                }) =>
            {
                Ok(())
            }
            Err(e) => Err(aws_error(
                "SendTaskSuccess",
                stackflow_providers::error::error_chain(&e),
            )),
        }
    }

    /// **Gate**: records the item's task token and releases it when its dependencies are
    /// done (or the deploy failed). Returns whether it released the token now.
    pub async fn gate(&self, item: &Item, token: &str) -> Result<bool, TaskError> {
        let p = prefix(&item.stack, &item.deploy_id);
        self.put(
            &format!("{p}gates/{}/{}", item.phase.as_str(), item.id),
            token.as_bytes().to_vec(),
        )
        .await?;
        if self.exists(&format!("{p}failed")).await? {
            self.release(token, false).await?;
            return Ok(true);
        }
        if let Some(why) = self.history_spent(item).await? {
            let body = serde_json::to_vec(&why).unwrap_or_default();
            self.stop_phase(item, body).await?;
            self.release(token, false).await?;
            return Ok(true);
        }
        let graph = self.graph(&item.stack, &item.deploy_id, item.phase).await?;
        let deps = graph
            .iter()
            .find(|t| t.id == item.id)
            .map(|t| t.deps.clone())
            .unwrap_or_default();
        if self.all_done(item, &deps).await? {
            self.release(token, true).await?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Stops `item`'s phase as a failed action does: its marker (`failed` in provision;
    /// `partial` in cleanup, whose deletes cannot be undone: what is left stays recorded
    /// for the next run), holding `why` (an [`ErrorInfo`] in JSON, or nothing when the
    /// failure is recorded in the log), and every gate that waits released as "stop".
    pub(crate) async fn stop_phase(&self, item: &Item, why: Vec<u8>) -> Result<(), TaskError> {
        let p = prefix(&item.stack, &item.deploy_id);
        let marker = match item.phase {
            Phase::Provision => "failed",
            Phase::Cleanup => "partial",
        };
        self.put(&format!("{p}{marker}"), why).await?;
        let phase = item.phase.as_str();
        for key in self.list(&format!("{p}gates/{phase}/")).await? {
            let id = key.rsplit('/').next().unwrap_or_default();
            if self.exists(&format!("{p}done/{phase}/{id}")).await? {
                continue;
            }
            if let Some(token) = self.get(&key).await? {
                self.release(&String::from_utf8_lossy(&token), false)
                    .await?;
            }
        }
        Ok(())
    }

    /// When `item`'s gate reads the history
    /// ([`HistoryGuard::checks`](super::history::HistoryGuard::checks)) and its execution
    /// has passed the guard's limit: why the deploy stops.
    async fn history_spent(&self, item: &Item) -> Result<Option<ErrorInfo>, TaskError> {
        let (Some(execution), Some(index)) = (&item.execution, item.index) else {
            return Ok(None);
        };
        if !self.history.checks(index) {
            return Ok(None);
        }
        let newest = self
            .sfn
            .get_execution_history()
            .execution_arn(execution)
            .reverse_order(true)
            .max_results(1)
            .send()
            .await
            .map_err(|e| {
                aws_error(
                    "GetExecutionHistory",
                    stackflow_providers::error::error_chain(&e),
                )
            })?;
        // Event ids count from 1: the newest one's is the history's length.
        let events = newest.events().first().map_or(0, |e| e.id().max(0) as u64);
        if events < self.history.stop_at {
            return Ok(None);
        }
        Ok(Some(ErrorInfo {
            name: "HistoryLimit".into(),
            message: self.history.reason(events, index, item.phase.as_str()),
        }))
    }

    pub(crate) async fn open_dependents(&self, item: &Item) -> Result<(), TaskError> {
        let p = prefix(&item.stack, &item.deploy_id);
        let graph = self.graph(&item.stack, &item.deploy_id, item.phase).await?;
        for t in graph.iter().filter(|t| t.deps.contains(&item.id)) {
            let key = format!("{p}gates/{}/{}", item.phase.as_str(), t.id);
            let Some(token) = self.get(&key).await? else {
                continue;
            };
            let dependent = Item {
                id: t.id.clone(),
                ..item.clone()
            };
            if self.all_done(&dependent, &t.deps).await? {
                self.release(&String::from_utf8_lossy(&token), true).await?;
            }
        }
        Ok(())
    }
}
