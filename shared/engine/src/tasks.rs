//! The deploy's task handlers as Step Functions runs them: each handler takes and returns
//! small JSON documents that carry references (stack, deploy id, S3 keys), never
//! templates, and rebuilds what it needs from the event store and the engine's bucket.
//!
//! The handlers are the embedded engine's ([`Deployment::begin`], [`Deployment::provision`],
//! [`Deployment::cleanup`], [`Deployment::finish`], [`Deployment::fail`]), unchanged; this
//! module adds only where their inputs live and how a resource waits for its own
//! dependencies: the *gate*.
//!
//! # Gates
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

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use stackflow_events::EventStore;
use stackflow_events::event::{ErrorInfo, Event};

use crate::engine::{
    Cleanup, DeployOptions, Deployment, Done, Engine, EngineError, PlanDocument, StackStatus,
    rollback_stack,
};
use crate::schedule::Task;
use crate::stack::StackInput;

/// Every task the state machines name (the `${Name}` placeholders of `infra/*.asl.json`).
pub const TASK_NAMES: &[&str] = &[
    "Plan",
    "Gate",
    "Provision",
    "Conclude",
    "Finish",
    "Fail",
    "Destroy",
    "Rollback",
];

/// Every error name a handler returns to Step Functions (what `Retry` and `Catch` match).
pub const ERROR_NAMES: &[&str] = &[
    "Stackflow.Locked",
    "Stackflow.Store",
    "Stackflow.Template",
    "Stackflow.Input",
    "Stackflow.Aws",
    "Stackflow.Internal",
];

/// A handler's failure, as Step Functions sees it: a stable name and a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{name}: {message}")]
pub struct TaskError {
    /// One of [`ERROR_NAMES`].
    pub name: String,
    /// What went wrong (no secrets: messages are masked where they are made).
    pub message: String,
}

impl TaskError {
    fn new(name: &str, message: impl Into<String>) -> TaskError {
        debug_assert!(ERROR_NAMES.contains(&name));
        TaskError {
            name: name.to_string(),
            message: message.into(),
        }
    }
}

impl From<EngineError> for TaskError {
    fn from(e: EngineError) -> TaskError {
        let name = match &e {
            EngineError::Template(_) => "Stackflow.Template",
            EngineError::Store(stackflow_events::StoreError::Locked { .. }) => "Stackflow.Locked",
            EngineError::Store(_) => "Stackflow.Store",
            EngineError::Other(_) => "Stackflow.Internal",
        };
        TaskError::new(name, e.to_string())
    }
}

/// The execution input of a deploy: where its stack input is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeployRequest {
    /// The stack.
    pub stack: String,
    /// The S3 key (in the engine's bucket) of the [`StackInput`] JSON.
    pub input_key: String,
    /// Keep what a failed deploy did.
    #[serde(default)]
    pub no_rollback: bool,
    /// At most this many actions at once.
    #[serde(default = "default_concurrency")]
    pub concurrency: usize,
    /// The deploy id (the execution is named after it); a new one when absent.
    #[serde(default)]
    pub deploy_id: Option<String>,
}

fn default_concurrency() -> usize {
    10
}

/// Which part of a deploy an item belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Creates, updates, replacements.
    Provision,
    /// Deletes of removed resources and replaced predecessors.
    Cleanup,
}

impl Phase {
    fn as_str(self) -> &'static str {
        match self {
            Phase::Provision => "provision",
            Phase::Cleanup => "cleanup",
        }
    }
}

/// One action of a `Map` iteration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Item {
    /// The stack.
    pub stack: String,
    /// The deploy.
    pub deploy_id: String,
    /// The action's id: a logical id, or `predecessor:<physical id>` in cleanup.
    pub id: String,
    /// Its phase.
    pub phase: Phase,
}

/// A deploy's reference, passed from state to state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeployRef {
    /// The stack.
    pub stack: String,
    /// The deploy (empty when nothing changed).
    pub deploy_id: String,
    /// True when nothing changed (the execution ends at once).
    #[serde(default)]
    pub no_changes: bool,
    /// True when an action failed.
    #[serde(default)]
    pub failed: bool,
    /// The next `Map`'s items.
    #[serde(default)]
    pub items: Vec<Item>,
}

/// What an item's task did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ItemResult {
    /// The action.
    pub id: String,
    /// `created`, `updated`, `replaced`, `deleted`, `retained`, `skipped`, `failed`,
    /// `not-started` (an earlier failure stopped the deploy).
    pub outcome: String,
    /// The error, when it failed.
    #[serde(default)]
    pub error: Option<ErrorInfo>,
}

/// The end of a deploy, destroy or rollback execution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ended {
    /// The stack.
    pub stack: String,
    /// The run.
    pub deploy_id: String,
    /// How it ended.
    pub status: StackStatus,
    /// The outputs.
    #[serde(default)]
    pub outputs: indexmap::IndexMap<String, Value>,
    /// The first error, when it failed.
    #[serde(default)]
    pub error: Option<ErrorInfo>,
}

/// A stack to destroy or roll back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StackRequest {
    /// The stack.
    pub stack: String,
}

/// The gate's answer, sent as the gate task's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateAnswer {
    /// True: act; false: an earlier failure stopped the deploy.
    pub go: bool,
}

/// What the handlers need besides the engine: the bucket and Step Functions (to release
/// gates).
pub struct Tasks<S> {
    /// The engine.
    pub engine: Arc<Engine<S>>,
    /// S3, for inputs, plans and gates.
    pub s3: aws_sdk_s3::Client,
    /// Step Functions, to release gates.
    pub sfn: aws_sdk_sfn::Client,
    /// The engine's bucket.
    pub bucket: String,
}

fn aws_error<E: std::fmt::Display>(what: &str, e: E) -> TaskError {
    TaskError::new("Stackflow.Aws", format!("{what}: {e}"))
}

fn prefix(stack: &str, deploy_id: &str) -> String {
    format!("deploys/{stack}/{deploy_id}/")
}

impl<S: EventStore + 'static> Tasks<S> {
    async fn put(&self, key: &str, body: Vec<u8>) -> Result<(), TaskError> {
        self.s3
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .body(body.into())
            .send()
            .await
            .map_err(|e| {
                aws_error(
                    &format!("PutObject s3://{}/{key}", self.bucket),
                    aws_sdk_s3::error::DisplayErrorContext(e),
                )
            })?;
        Ok(())
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, TaskError> {
        match self
            .s3
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(out) => {
                let bytes =
                    out.body.collect().await.map_err(|e| {
                        aws_error(&format!("GetObject s3://{}/{key}", self.bucket), e)
                    })?;
                Ok(Some(bytes.into_bytes().to_vec()))
            }
            Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => Ok(None),
            Err(e) => Err(aws_error(
                &format!("GetObject s3://{}/{key}", self.bucket),
                aws_sdk_s3::error::DisplayErrorContext(e),
            )),
        }
    }

    async fn exists(&self, key: &str) -> Result<bool, TaskError> {
        match self
            .s3
            .head_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if e.as_service_error().is_some_and(|s| s.is_not_found()) => Ok(false),
            Err(e) if e.raw_response().is_some_and(|r| r.status().as_u16() == 404) => Ok(false),
            Err(e) => Err(aws_error(
                &format!("HeadObject s3://{}/{key}", self.bucket),
                aws_sdk_s3::error::DisplayErrorContext(e),
            )),
        }
    }

    async fn list(&self, prefix: &str) -> Result<Vec<String>, TaskError> {
        let mut keys = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let out = self
                .s3
                .list_objects_v2()
                .bucket(&self.bucket)
                .prefix(prefix)
                .set_continuation_token(token.clone())
                .send()
                .await
                .map_err(|e| {
                    aws_error(
                        &format!("ListObjectsV2 s3://{}/{prefix}", self.bucket),
                        aws_sdk_s3::error::DisplayErrorContext(e),
                    )
                })?;
            keys.extend(
                out.contents()
                    .iter()
                    .filter_map(|o| o.key().map(String::from)),
            );
            match out.next_continuation_token() {
                Some(t) if out.is_truncated() == Some(true) => token = Some(t.to_string()),
                _ => break,
            }
        }
        Ok(keys)
    }

    async fn json<T: for<'de> Deserialize<'de>>(&self, key: &str) -> Result<T, TaskError> {
        let body = self.get(key).await?.ok_or_else(|| {
            TaskError::new(
                "Stackflow.Input",
                format!("s3://{}/{key} does not exist", self.bucket),
            )
        })?;
        serde_json::from_slice(&body).map_err(|e| {
            TaskError::new(
                "Stackflow.Input",
                format!(
                    "s3://{}/{key} is not what stackflow wrote: {e}",
                    self.bucket
                ),
            )
        })
    }

    async fn deployment(&self, stack: &str, deploy_id: &str) -> Result<Deployment<S>, TaskError> {
        let doc: PlanDocument = self
            .json(&format!("{}plan.json", prefix(stack, deploy_id)))
            .await?;
        Ok(Deployment::resume(self.engine.clone(), doc).await?)
    }

    /// The dependencies of each item of a phase, as stored when the phase was planned.
    async fn graph(
        &self,
        stack: &str,
        deploy_id: &str,
        phase: Phase,
    ) -> Result<Vec<Task>, TaskError> {
        let key = format!("{}{}.json", prefix(stack, deploy_id), phase.as_str());
        let pairs: Vec<(String, Vec<String>)> = self.json(&key).await?;
        Ok(pairs
            .into_iter()
            .map(|(id, deps)| Task::new(id, deps))
            .collect())
    }

    async fn put_graph(
        &self,
        stack: &str,
        deploy_id: &str,
        phase: Phase,
        tasks: &[Task],
    ) -> Result<(), TaskError> {
        let pairs: Vec<(&String, &Vec<String>)> = tasks.iter().map(|t| (&t.id, &t.deps)).collect();
        let key = format!("{}{}.json", prefix(stack, deploy_id), phase.as_str());
        self.put(&key, serde_json::to_vec(&pairs).unwrap_or_default())
            .await
    }

    /// **Plan**: takes the lock, reconciles interrupted calls, plans, and stores the plan.
    pub async fn plan(&self, req: DeployRequest) -> Result<DeployRef, TaskError> {
        let input: StackInput = self.json(&req.input_key).await?;
        if input.name != req.stack {
            return Err(TaskError::new(
                "Stackflow.Input",
                format!(
                    "the input at {} is for stack {}, not {}",
                    req.input_key, input.name, req.stack
                ),
            ));
        }
        let mut options = DeployOptions::new();
        options.no_rollback = req.no_rollback;
        options.concurrency = req.concurrency.max(1);
        options.deploy_id = req.deploy_id.clone();
        let (deployment, report) = Deployment::begin(self.engine.clone(), input, options).await?;
        let Some(d) = deployment else {
            return Ok(DeployRef {
                stack: req.stack,
                deploy_id: report.deploy_id,
                no_changes: true,
                failed: false,
                items: vec![],
            });
        };
        let p = prefix(&req.stack, &d.deploy_id);
        self.put(
            &format!("{p}plan.json"),
            serde_json::to_vec(&d.document()).unwrap_or_default(),
        )
        .await?;
        let tasks = d.provision_tasks();
        self.put_graph(&req.stack, &d.deploy_id, Phase::Provision, &tasks)
            .await?;
        Ok(DeployRef {
            stack: req.stack.clone(),
            deploy_id: d.deploy_id.clone(),
            no_changes: false,
            failed: false,
            items: tasks
                .iter()
                .map(|t| Item {
                    stack: req.stack.clone(),
                    deploy_id: d.deploy_id.clone(),
                    id: t.id.clone(),
                    phase: Phase::Provision,
                })
                .collect(),
        })
    }

    async fn all_done(&self, item: &Item, deps: &[String]) -> Result<bool, TaskError> {
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

    async fn release(&self, token: &str, go: bool) -> Result<(), TaskError> {
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

    /// **Provision** (or a cleanup delete): one action, then the gates it opens.
    pub async fn act(&self, item: &Item) -> Result<ItemResult, TaskError> {
        let p = prefix(&item.stack, &item.deploy_id);
        let d = self.deployment(&item.stack, &item.deploy_id).await?;
        let outcome = match item.phase {
            Phase::Provision => d.provision(&item.id).await?,
            Phase::Cleanup => {
                let cleanup = match item.id.strip_prefix("predecessor:") {
                    Some(physical) => Cleanup::Predecessor(physical.to_string()),
                    None => Cleanup::Removed(item.id.clone()),
                };
                d.cleanup(&cleanup).await?
            }
        };
        match outcome {
            Ok(done) => {
                self.put(
                    &format!("{p}done/{}/{}", item.phase.as_str(), item.id),
                    Vec::new(),
                )
                .await?;
                self.open_dependents(item).await?;
                let (outcome, reason) = match &done {
                    Done::Retained(r) | Done::Skipped(r) => (done.word(), Some(r.clone())),
                    _ => (done.word(), None),
                };
                Ok(ItemResult {
                    id: item.id.clone(),
                    outcome: outcome.to_string(),
                    error: reason.map(|r| ErrorInfo {
                        name: "Skipped".into(),
                        message: r,
                    }),
                })
            }
            Err(failure) => {
                self.put(&format!("{p}failed"), Vec::new()).await?;
                // Every gate that waits now will not open: release them as "stop".
                let gates = self
                    .list(&format!("{p}gates/{}/", item.phase.as_str()))
                    .await?;
                for key in gates {
                    let id = key.rsplit('/').next().unwrap_or_default();
                    if self
                        .exists(&format!("{p}done/{}/{id}", item.phase.as_str()))
                        .await?
                    {
                        continue;
                    }
                    if let Some(token) = self.get(&key).await? {
                        self.release(&String::from_utf8_lossy(&token), false)
                            .await?;
                    }
                }
                Ok(ItemResult {
                    id: item.id.clone(),
                    outcome: "failed".into(),
                    error: Some(failure.error),
                })
            }
        }
    }

    async fn open_dependents(&self, item: &Item) -> Result<(), TaskError> {
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

    /// **Conclude**: after provisioning, either the cleanup items (in the order they may
    /// start) or `failed`.
    pub async fn conclude(&self, r: DeployRef) -> Result<DeployRef, TaskError> {
        let p = prefix(&r.stack, &r.deploy_id);
        if self.exists(&format!("{p}failed")).await? {
            return Ok(DeployRef {
                failed: true,
                items: vec![],
                ..r
            });
        }
        let d = self.deployment(&r.stack, &r.deploy_id).await?;
        let (_, tasks) = d.cleanup_tasks();
        let ordered = topological(&tasks);
        self.put_graph(&r.stack, &r.deploy_id, Phase::Cleanup, &ordered)
            .await?;
        Ok(DeployRef {
            items: ordered
                .iter()
                .map(|t| Item {
                    stack: r.stack.clone(),
                    deploy_id: r.deploy_id.clone(),
                    id: t.id.clone(),
                    phase: Phase::Cleanup,
                })
                .collect(),
            failed: false,
            ..r
        })
    }

    /// **Finish**: outputs, exports, `DeployCompleted`, the lock released.
    pub async fn finish(&self, r: DeployRef) -> Result<Ended, TaskError> {
        let p = prefix(&r.stack, &r.deploy_id);
        if self.exists(&format!("{p}failed")).await? {
            return self.fail(r).await;
        }
        let d = self.deployment(&r.stack, &r.deploy_id).await?;
        let outputs = d.finish().await?;
        Ok(Ended {
            stack: r.stack,
            deploy_id: r.deploy_id,
            status: StackStatus::Succeeded,
            outputs,
            error: None,
        })
    }

    /// **Fail**: `DeployFailed` with the first error, the rollback (unless
    /// `noRollback`), the lock released.
    pub async fn fail(&self, r: DeployRef) -> Result<Ended, TaskError> {
        let d = self.deployment(&r.stack, &r.deploy_id).await?;
        let events = self
            .engine
            .store
            .read(d.recorder.stream(), 0)
            .await
            .map_err(EngineError::from)?;
        let first = events.iter().find_map(|e| match &e.event {
            Event::ResourceFailed {
                deploy_id,
                logical_id,
                operation,
                error,
            } if *deploy_id == r.deploy_id => Some(crate::engine::Failure {
                logical_id: logical_id.clone(),
                resource_type: d
                    .plan
                    .resource(logical_id)
                    .map(|x| x.resource_type.clone())
                    .unwrap_or_default(),
                action: format!("{operation:?}").to_lowercase(),
                error: error.clone(),
            }),
            _ => None,
        });
        let already = {
            let s = d.recorder.state();
            s.lock.as_ref().is_none_or(|h| h.deploy_id != r.deploy_id)
        };
        if !already {
            d.fail(first.as_ref(), "an action failed", true).await?;
        }
        Ok(Ended {
            stack: r.stack,
            deploy_id: r.deploy_id,
            status: StackStatus::Failed,
            outputs: Default::default(),
            error: first.map(|f| f.error),
        })
    }

    /// **Destroy**: the whole stack, with the embedded runner's order and concurrency.
    pub async fn destroy(&self, r: StackRequest) -> Result<Ended, TaskError> {
        let report =
            crate::engine::destroy_stack(self.engine.clone(), &r.stack, DeployOptions::new())
                .await?;
        Ok(Ended {
            stack: r.stack,
            deploy_id: report.deploy_id,
            status: report.status,
            outputs: Default::default(),
            error: report.failures.first().map(|f| f.error.clone()),
        })
    }

    /// **Rollback**: the journal of the stack's failed deploy, last entry first.
    pub async fn rollback(&self, r: StackRequest) -> Result<Ended, TaskError> {
        let report = rollback_stack(self.engine.clone(), &r.stack).await?;
        Ok(Ended {
            stack: r.stack,
            deploy_id: report.deploy_id,
            status: report.status,
            outputs: Default::default(),
            error: report.failures.first().map(|f| f.error.clone()),
        })
    }

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
                TaskError::new("Stackflow.Input", format!("task {name}: bad input: {e}"))
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
                        return Err(TaskError::new(
                            "Stackflow.Input",
                            "task Gate: no task token",
                        ));
                    }
                };
                self.gate(&item, &token).await?;
                Ok(None)
            }
            "Provision" => {
                // The gate's answer rides along in `gate`; a stopped gate means: do not act.
                let go = input
                    .get("gate")
                    .and_then(|g| g.get("go"))
                    .and_then(Value::as_bool)
                    .unwrap_or(true);
                let item: Item = parse(name, input)?;
                if !go {
                    return out(ItemResult {
                        id: item.id,
                        outcome: "not-started".into(),
                        error: None,
                    });
                }
                out(self.act(&item).await?)
            }
            "Conclude" => out(self.conclude(parse(name, input)?).await?),
            "Finish" => out(self.finish(parse(name, input)?).await?),
            "Fail" => out(self.fail(parse(name, input)?).await?),
            "Destroy" => out(self.destroy(parse(name, input)?).await?),
            "Rollback" => out(self.rollback(parse(name, input)?).await?),
            other => Err(TaskError::new(
                "Stackflow.Input",
                format!(
                    "no task named {other}; the tasks are {}",
                    TASK_NAMES.join(", ")
                ),
            )),
        }
    }
}

/// `tasks` in an order where every task comes after the tasks it waits for (ties keep
/// their order), so that a `Map` that starts items in order never waits on a later one.
pub fn topological(tasks: &[Task]) -> Vec<Task> {
    let mut left: Vec<Task> = tasks.to_vec();
    let mut out: Vec<Task> = Vec::with_capacity(tasks.len());
    while !left.is_empty() {
        let pos = left
            .iter()
            .position(|t| {
                t.deps
                    .iter()
                    .all(|d| out.iter().any(|o| &o.id == d) || !tasks.iter().any(|x| &x.id == d))
            })
            .unwrap_or(0);
        out.push(left.remove(pos));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topological_order_puts_dependencies_first() {
        let tasks = vec![
            Task::new("C", ["B"]),
            Task::new("A", Vec::<String>::new()),
            Task::new("B", ["A"]),
            Task::new("D", ["Z"]),
        ];
        let ids: Vec<String> = topological(&tasks).into_iter().map(|t| t.id).collect();
        assert_eq!(ids, vec!["A", "B", "C", "D"]);
    }

    #[test]
    fn payloads_round_trip_in_camel_case() {
        let item = Item {
            stack: "app".into(),
            deploy_id: "d-1".into(),
            id: "Queue".into(),
            phase: Phase::Provision,
        };
        let v = serde_json::to_value(&item).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"stack":"app","deployId":"d-1","id":"Queue","phase":"provision"})
        );
        let back: Item = serde_json::from_value(v).unwrap();
        assert_eq!(back, item);
        let req: DeployRequest =
            serde_json::from_value(serde_json::json!({"stack":"app","inputKey":"k"})).unwrap();
        assert_eq!(req.concurrency, 10);
        assert!(!req.no_rollback);
    }

    #[test]
    fn engine_errors_map_to_contract_names() {
        let e: TaskError = EngineError::Other("x".into()).into();
        assert!(ERROR_NAMES.contains(&e.name.as_str()));
    }
}
