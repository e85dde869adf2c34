//! Gates: how a resource's `Map` iteration waits only for its own dependencies, without
//! relying on the order in which Step Functions starts the `Map`'s iterations.
//!
//! Each iteration first runs a gate task with a task token (`.waitForTaskToken` on Lambda;
//! an activity's own token when a worker runs it). The gate handler stores the token under
//! `deploys/<stack>/<deploy>/gates/<phase>/<round>/<id>` (its iteration has *begun* in that
//! round) and releases it at once when every dependency already has its `done` marker.
//! Otherwise the token waits: the handler that finishes the last dependency writes its
//! `done` marker and releases every dependent whose dependencies are now all done
//! (`SendTaskSuccess`). Both sides write first and look second, so one of them always sees
//! the other (S3 is strongly consistent); a token released twice is harmless (the second
//! `SendTaskSuccess` is refused and ignored).
//!
//! **Deferral.** A waiting iteration holds one of the `Map`'s slots (its concurrency), and
//! Step Functions does not say in which order it starts iterations: were every slot held by
//! an iteration waiting for one that has not begun, nothing would move. So a gate waits
//! only for dependencies that are done or have begun (a begun iteration holds a slot of
//! its own and either acts, waits for begun ones in turn, or defers), with one allowance:
//! at its first look a gate also waits for a dependency that has not begun yet (it is
//! usually starting beside it); when it is re-checked (its heartbeat, every 300 seconds,
//! or a retry) and a dependency still has not begun, or at any look when a dependency was
//! deferred, the gate *defers* its action ([`decide`]). A deferred action's task writes
//! `deferred/<phase>/<round>/<id>` and releases its waiting dependents as deferred too,
//! and the iteration ends without acting, freeing its slot. When the round ends with
//! actions left (none failed), the next round runs them, as a part of the phase
//! ([`super::parts`]): Conclude (for provision) or Finish (for cleanup) answers `again`,
//! and the `Part` task runs the part's rounds until every action is done.
//!
//! Each round finishes at least the actions whose dependencies were all done when it
//! began (their gates never defer), so a phase ends within as many rounds as its longest
//! chain of dependencies; when the `Map` starts its iterations in their (topological)
//! order, as it does in practice, nothing is deferred and there is one round.
//! `decide_never_deadlocks` (below) runs the protocol against adversarial orders.
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

/// A dependency as a gate finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dep {
    /// Its `done` marker is there.
    Done,
    /// Its iteration has begun in this round (its gate's token is stored) and was not
    /// deferred.
    Begun,
    /// It was deferred in this round.
    Deferred,
    /// Its iteration has not begun in this round.
    NotBegun,
}

/// What a gate does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Act now.
    Go,
    /// Wait for a release.
    Wait,
    /// End without acting: a later round runs the action.
    Defer,
}

/// The gate's rule (module documentation): go when every dependency is done; defer when
/// one was deferred, or, at a re-check, has not begun; otherwise wait.
pub(crate) fn decide(deps: &[Dep], recheck: bool) -> Decision {
    if deps
        .iter()
        .any(|d| *d == Dep::Deferred || (recheck && *d == Dep::NotBegun))
    {
        Decision::Defer
    } else if deps.iter().all(|d| *d == Dep::Done) {
        Decision::Go
    } else {
        Decision::Wait
    }
}

/// The marker that says an action of `phase` was deferred in `round`.
fn round_flag(p: &str, phase: Phase, round: u32) -> String {
    format!("{p}deferred/{}/{round}", phase.as_str())
}

/// The key prefix of `phase`'s markers of one `kind` (`gates`, `deferred`) in `round`.
fn round_prefix(p: &str, kind: &str, phase: Phase, round: u32) -> String {
    format!("{p}{kind}/{}/{round}/", phase.as_str())
}

impl<S: EventStore + 'static> Tasks<S> {
    fn gate_key(&self, item: &Item, id: &str) -> String {
        let p = prefix(&item.stack, &item.deploy_id);
        format!("{}{id}", round_prefix(&p, "gates", item.phase, item.round))
    }

    fn done_key(&self, item: &Item, id: &str) -> String {
        let p = prefix(&item.stack, &item.deploy_id);
        format!("{p}done/{}/{id}", item.phase.as_str())
    }

    fn deferred_key(&self, item: &Item, id: &str) -> String {
        let p = prefix(&item.stack, &item.deploy_id);
        format!(
            "{}{id}",
            round_prefix(&p, "deferred", item.phase, item.round)
        )
    }

    pub(crate) async fn all_done(&self, item: &Item, deps: &[String]) -> Result<bool, TaskError> {
        for d in deps {
            if !self.exists(&self.done_key(item, d)).await? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// How `item`'s gate finds dependency `dep`.
    async fn dep(&self, item: &Item, dep: &str) -> Result<Dep, TaskError> {
        Ok(if self.exists(&self.done_key(item, dep)).await? {
            Dep::Done
        } else if self.exists(&self.deferred_key(item, dep)).await? {
            Dep::Deferred
        } else if self.exists(&self.gate_key(item, dep)).await? {
            Dep::Begun
        } else {
            Dep::NotBegun
        })
    }

    pub(crate) async fn release(&self, token: &str, answer: GateAnswer) -> Result<(), TaskError> {
        let output = serde_json::to_string(&answer).unwrap_or_default();
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

    /// **Gate**: records the item's task token (its iteration has begun in its round) and
    /// releases it when its dependencies are done (or the deploy failed, or the action is
    /// deferred: [`decide`]). Returns whether it released the token now.
    pub async fn gate(&self, item: &Item, token: &str) -> Result<bool, TaskError> {
        let p = prefix(&item.stack, &item.deploy_id);
        let key = self.gate_key(item, &item.id);
        // A token stored already in this round: this is a re-check (a heartbeat or a retry).
        let recheck = self.exists(&key).await?;
        self.put(&key, token.as_bytes().to_vec()).await?;
        if self.exists(&format!("{p}failed")).await? {
            self.release(token, GateAnswer::STOP).await?;
            return Ok(true);
        }
        if let Some(why) = self.history_spent(item).await? {
            let body = serde_json::to_vec(&why).unwrap_or_default();
            self.stop_phase(item, body).await?;
            self.release(token, GateAnswer::STOP).await?;
            return Ok(true);
        }
        let graph = self.graph(&item.stack, &item.deploy_id, item.phase).await?;
        let deps = graph
            .iter()
            .find(|t| t.id == item.id)
            .map(|t| t.deps.clone())
            .unwrap_or_default();
        let mut found = Vec::with_capacity(deps.len());
        for d in &deps {
            found.push(self.dep(item, d).await?);
            if decide(&found, recheck) == Decision::Defer {
                break;
            }
        }
        let answer = match decide(&found, recheck) {
            Decision::Wait => return Ok(false),
            Decision::Go => GateAnswer::GO,
            Decision::Defer => GateAnswer::DEFERRED,
        };
        self.release(token, answer).await?;
        Ok(true)
    }

    /// The task of a deferred action: the round's flag and its `deferred` marker first,
    /// then every dependent that waits in this round released as deferred (each one's task does the same in
    /// turn), so that nothing waits for an action this round will not run.
    pub async fn defer(&self, item: &Item) -> Result<(), TaskError> {
        let p = prefix(&item.stack, &item.deploy_id);
        self.put(&round_flag(&p, item.phase, item.round), Vec::new())
            .await?;
        self.put(&self.deferred_key(item, &item.id), Vec::new())
            .await?;
        let graph = self.graph(&item.stack, &item.deploy_id, item.phase).await?;
        for t in graph.iter().filter(|t| t.deps.contains(&item.id)) {
            if let Some(token) = self.get(&self.gate_key(item, &t.id)).await? {
                self.release(&String::from_utf8_lossy(&token), GateAnswer::DEFERRED)
                    .await?;
            }
        }
        Ok(())
    }

    /// Stops `item`'s phase as a failed action does: its marker (`failed` in provision;
    /// `partial` in cleanup, whose deletes cannot be undone: what is left stays recorded
    /// for the next run), holding `why` (an [`ErrorInfo`] in JSON, or nothing when the
    /// failure is recorded in the log), and every gate that waits in the round released as
    /// "stop".
    pub(crate) async fn stop_phase(&self, item: &Item, why: Vec<u8>) -> Result<(), TaskError> {
        let p = prefix(&item.stack, &item.deploy_id);
        let marker = item.phase.stop_marker();
        self.put(&format!("{p}{marker}"), why).await?;
        let gates = round_prefix(&p, "gates", item.phase, item.round);
        for key in self.list(&gates).await? {
            let id = key.strip_prefix(&gates).unwrap_or_default();
            if self.exists(&self.done_key(item, id)).await? {
                continue;
            }
            if let Some(token) = self.get(&key).await? {
                self.release(&String::from_utf8_lossy(&token), GateAnswer::STOP)
                    .await?;
            }
        }
        Ok(())
    }

    /// Of `ids` (actions of `phase`), the ones not done yet, in their order: each one's
    /// `done` marker looked up (16 at a time), not listed: a task needs `s3:GetObject`
    /// only, and it runs only after a round deferred something ([`Tasks::deferred_in`]).
    pub(crate) async fn undone(
        &self,
        stack: &str,
        deploy_id: &str,
        phase: Phase,
        ids: &[String],
    ) -> Result<Vec<String>, TaskError> {
        use futures_util::stream::{self, StreamExt as _, TryStreamExt as _};
        let done = format!("{}done/{}/", prefix(stack, deploy_id), phase.as_str());
        let keys: Vec<String> = ids.iter().map(|id| format!("{done}{id}")).collect();
        let found: Vec<bool> = stream::iter(keys.into_iter().map(|k| self.exists_owned(k)))
            .buffered(16)
            .try_collect()
            .await?;
        Ok(ids
            .iter()
            .zip(found)
            .filter(|(_, done)| !done)
            .map(|(id, _)| id.clone())
            .collect())
    }

    async fn exists_owned(&self, key: String) -> Result<bool, TaskError> {
        self.exists(&key).await
    }

    /// Whether an action of `phase` was deferred in `round` (in any part: a hint that
    /// [`Tasks::undone`] has something to find).
    pub(crate) async fn deferred_in(
        &self,
        stack: &str,
        deploy_id: &str,
        phase: Phase,
        round: u32,
    ) -> Result<bool, TaskError> {
        let p = prefix(stack, deploy_id);
        self.exists(&round_flag(&p, phase, round)).await
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
        let graph = self.graph(&item.stack, &item.deploy_id, item.phase).await?;
        for t in graph.iter().filter(|t| t.deps.contains(&item.id)) {
            let Some(token) = self.get(&self.gate_key(item, &t.id)).await? else {
                continue;
            };
            let dependent = Item {
                id: t.id.clone(),
                ..item.clone()
            };
            if self.all_done(&dependent, &t.deps).await? {
                self.release(&String::from_utf8_lossy(&token), GateAnswer::GO)
                    .await?;
            }
        }
        Ok(())
    }
}
