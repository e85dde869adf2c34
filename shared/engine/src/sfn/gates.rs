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
use super::payloads::{GateAnswer, Item};
use super::tasks::Tasks;

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
                aws_sdk_sfn::error::DisplayErrorContext(e),
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
