//! The deploy's task handlers as Step Functions runs them: each handler takes and returns
//! small JSON documents that carry references (stack, deploy id, S3 keys), never
//! templates, and rebuilds what it needs from the event store and the engine's bucket.
//!
//! The handlers are the embedded engine's ([`Deployment::begin`], [`Deployment::provision`],
//! [`Deployment::cleanup`], [`Deployment::finish`], [`Deployment::fail`]), unchanged; this
//! module adds only where their inputs live and how a resource waits for its own
//! dependencies: the *gate*.
//!
//!
//! The documents are in [`super::payloads`], their place in the bucket in
//! [`super::artifacts`], the waiting in [`super::gates`], and the task names in
//! [`super::dispatch`].

use std::sync::Arc;

use stackflow_events::event::{ErrorInfo, Event};
use stackflow_events::{EventStore, StoreError};

pub use super::dispatch::TASK_NAMES;
pub use super::errors::{ERROR_NAMES, ErrorKind, TaskError};
pub use super::payloads::{
    DeployRef, DeployRequest, Ended, FailAnswer, FinishAnswer, GateAnswer, Item, ItemResult,
    PartInput, PartRequest, Phase, RolledBack, RunKind, RunRequest, StackRequest, Waiting,
};
pub use super::release::{Recorded, ReleaseRequest, Released};

use super::artifacts::prefix;
use super::deadline::{task_deadline, within};
use super::payloads::map_concurrency;
use crate::deploy::{Cleanup, Deployment, Started, TASK_BOUND};
use crate::destroy::destroy_stack_as;
use crate::engine::{DeployOptions, Engine, EngineError};
use crate::report::StackReport;
use crate::report::{Done, Failure, StackStatus};
use crate::rollback::{rollback_stack, rollback_stack_as};
use crate::schedule::Task;
use crate::stack::StackInput;

/// What a Plan answered, kept for a retry of it ([`Tasks::plan`]): the reference, or the
/// failure's kind and (masked) message.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct PlanAnswer {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    planned: Option<DeployRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(default)]
    message: String,
}

impl PlanAnswer {
    fn of(out: &Result<DeployRef, TaskError>) -> Vec<u8> {
        let answer = match out {
            Ok(planned) => PlanAnswer {
                planned: Some(planned.clone()),
                error: None,
                message: String::new(),
            },
            Err(e) => PlanAnswer {
                planned: None,
                error: Some(e.kind.name().to_string()),
                message: e.message.clone(),
            },
        };
        serde_json::to_vec(&answer).unwrap_or_default()
    }

    fn read(body: &[u8], key: &str) -> Result<DeployRef, TaskError> {
        let answer: PlanAnswer = serde_json::from_slice(body).map_err(|e| {
            TaskError::new(
                ErrorKind::Internal,
                format!("{key} is not a Plan's answer: {e}"),
            )
        })?;
        match (answer.planned, answer.error) {
            (Some(planned), _) => Ok(planned),
            (None, error) => {
                let kind = ErrorKind::ALL
                    .into_iter()
                    .find(|k| Some(k.name()) == error.as_deref())
                    .unwrap_or(ErrorKind::Internal);
                Err(TaskError::new(kind, answer.message))
            }
        }
    }
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
    /// The KMS key that encrypts what is written to the bucket (SSE-S3 when `None`).
    pub kms_key: Option<String>,
    /// The resource types the engine may deploy (every type when `None`).
    pub allowed_types: Option<stackflow_core::deployable::Deployable>,
    /// When the gates stop a deploy whose execution's history nears AWS's limit.
    pub history: super::history::HistoryGuard,
    /// The order of a deploy's own `Map` items.
    pub map_order: MapOrder,
}

/// The order in which Plan and Conclude give a phase's own `Map` its items. Production
/// keeps the topological one (dependencies first); the reversed one lets tests prove that
/// the gates do not depend on the order in which the `Map` starts its iterations
/// ([`super::gates`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MapOrder {
    /// Dependencies first.
    #[default]
    Topological,
    /// Dependents first.
    Reversed,
}

impl<S: EventStore + 'static> Tasks<S> {
    /// **Plan**: takes the lock, reconciles interrupted calls, plans, and stores the plan.
    ///
    /// The stack input holds the `NoEcho` parameter values: it is deleted once the plan
    /// is stored (which has what the other tasks need) or there is nothing to do, and
    /// when the plan fails for good; it is kept only for the retry of a transient
    /// failure (`Stackflow.Store`, `Stackflow.Aws`, which the state machine retries).
    ///
    /// Before the input is deleted, the answer is stored beside the plan
    /// (`plan-answer.json`): a Plan whose answer was lost (a crash after it answered, a
    /// Lambda error with the outcome unknown) is run again by the state machine with the
    /// same request, finds no input, and answers what the first run answered.
    pub async fn plan(&self, req: DeployRequest) -> Result<DeployRef, TaskError> {
        let answer_key = format!(
            "{}plan-answer.json",
            prefix(&req.stack, &deploy_id_of(&req))
        );
        if let Some(body) = self.get(&answer_key).await? {
            // The first run may have stored its answer and failed to delete the input,
            // which holds the NoEcho values.
            self.delete(&req.input_key).await?;
            return PlanAnswer::read(&body, &answer_key);
        }
        let key = req.input_key.clone();
        let out = self.plan_stored(req).await;
        let done_with_input = match &out {
            Ok(_) => true,
            Err(e) => !matches!(e.kind, ErrorKind::Store | ErrorKind::Aws),
        };
        if done_with_input {
            self.put(&answer_key, PlanAnswer::of(&out)).await?;
            self.delete(&key).await?;
        }
        out
    }

    async fn plan_stored(&self, req: DeployRequest) -> Result<DeployRef, TaskError> {
        let input: StackInput = self.json(&req.input_key).await?;
        if input.name != req.stack {
            return Err(TaskError::new(
                ErrorKind::Input,
                format!(
                    "the input at {} is for stack {}, not {}",
                    req.input_key, input.name, req.stack
                ),
            ));
        }
        let mut options = DeployOptions::new();
        options.no_rollback = req.no_rollback;
        options.concurrency = req.concurrency.max(1);
        options.deploy_id = Some(deploy_id_of(&req));
        options.allow_stateful_replacement = req.allow_stateful_replacement;
        options.allowed_types = self.allowed_types.clone();
        options.expected_plan = req
            .expected_plan
            .clone()
            .map(crate::engine::ExpectedPlan::digest);
        let (deployment, report) = Deployment::begin(self.engine.clone(), input, options).await?;
        let Some(d) = deployment else {
            return Ok(DeployRef {
                stack: req.stack,
                deploy_id: report.deploy_id,
                no_changes: true,
                failed: false,
                items: vec![],
                concurrency: map_concurrency(req.concurrency),
                parts: vec![],
                again: None,
            });
        };
        let tasks = d.provision_tasks();
        self.refuse_past_history(&d, tasks.len()).await?;
        let p = prefix(&req.stack, &d.deploy_id);
        self.put(
            &format!("{p}plan.json"),
            serde_json::to_vec(&d.document()).unwrap_or_default(),
        )
        .await?;
        self.put_graph(&req.stack, &d.deploy_id, Phase::Provision, &tasks)
            .await?;
        let (items, parts) = self.items_or_parts(&tasks, 0);
        Ok(DeployRef {
            stack: req.stack.clone(),
            deploy_id: d.deploy_id.clone(),
            no_changes: false,
            failed: false,
            items,
            concurrency: map_concurrency(req.concurrency),
            parts,
            again: None,
        })
    }

    /// A phase's `Map` items (its actions' ids, in the order they may start), or, when the
    /// deploy's own execution does not hold them beside the `already` actions its other
    /// phase ran in it (one execution holds [`HistoryGuard::part_actions`] of both), its
    /// parts ([`super::parts`]).
    ///
    /// [`HistoryGuard::part_actions`]: super::history::HistoryGuard::part_actions
    fn items_or_parts(&self, ordered: &[Task], already: u64) -> (Vec<String>, Vec<u32>) {
        let ids = ordered.iter().map(|t| t.id.clone()).collect();
        let (mut items, parts) =
            super::parts::items_or_parts(ids, already, self.history.part_actions);
        if self.map_order == MapOrder::Reversed {
            items.reverse();
        }
        (items, parts)
    }

    /// A plan of more actions than one execution runs before its history guard stops it
    /// ([`HistoryGuard::most_actions`](super::history::HistoryGuard::most_actions)) is
    /// refused before anything is made: `DeployFailed` (`HistoryLimit`), the lock
    /// released, and the task fails (`Stackflow.Template`).
    async fn refuse_past_history(
        &self,
        d: &Deployment<S>,
        provisions: usize,
    ) -> Result<(), TaskError> {
        let actions = (provisions + d.planned_cleanups()) as u64;
        let most = self.history.most_actions;
        if actions <= most {
            return Ok(());
        }
        let error = ErrorInfo {
            name: "HistoryLimit".into(),
            message: format!(
                "the plan has {actions} actions, and one deploy on Step Functions runs at \
                 most {most} (its execution stops at {} history events, before AWS's limit \
                 of {}): deploy the stack in smaller parts (a nested stack or a second \
                 stack); nothing was changed",
                self.history.stop_at,
                super::history::HISTORY_LIMIT
            ),
        };
        d.fail_because(error.clone(), None, false).await?;
        Err(TaskError::new(ErrorKind::Template, error.message))
    }

    /// **Provision** (or a cleanup delete): one action, then the gates it opens.
    pub async fn act(&self, item: &Item) -> Result<ItemResult, TaskError> {
        let p = prefix(&item.stack, &item.deploy_id);
        let d = self.deployment(&item.stack, &item.deploy_id).await?;
        // The action alone is bounded: what follows it (markers, gates) is short.
        let deadline = task_deadline();
        let action = async {
            match item.phase {
                Phase::Provision => d.provision(&item.id).await,
                Phase::Cleanup => {
                    let cleanup = match item.id.strip_prefix("predecessor:") {
                        Some(physical) => Cleanup::Predecessor(physical.to_string()),
                        None => Cleanup::Removed(item.id.clone()),
                    };
                    d.cleanup(&cleanup).await
                }
            }
        };
        let Some(outcome) = within(deadline, action).await else {
            return Err(TaskError::again(
                &format!("the action on {}", item.id),
                deadline,
            ));
        };
        let outcome = match outcome {
            // The deploy's Fail fenced the lock before this action began (the `Map` that
            // failed did not stop this iteration in time): it begins nothing.
            Err(EngineError::Store(StoreError::Fenced { .. })) => {
                return Ok(ItemResult {
                    id: item.id.clone(),
                    outcome: "not-started".into(),
                    error: None,
                });
            }
            other => other?,
        };
        match outcome {
            Ok(done) => {
                self.put(
                    &format!("{p}done/{}/{}", item.phase.as_str(), item.id),
                    Vec::new(),
                )
                .await?;
                self.open_dependents(item).await?;
                // The baseline read runs after the dependents are released.
                d.observations.settle().await;
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
                self.stop_phase(item, Vec::new()).await?;
                if item.phase == Phase::Provision {
                    // The iteration fails, so the `Map` stops the others, queued ones
                    // included, and its `Catch` runs Fail. The error names the resource
                    // only: its own text is in the stack's events, masked.
                    return Err(TaskError::new(
                        ErrorKind::ActionFailed,
                        format!(
                            "{} failed (see the stack's events); deploy {} stops",
                            item.id, item.deploy_id
                        ),
                    ));
                }
                Ok(ItemResult {
                    id: item.id.clone(),
                    outcome: "failed".into(),
                    error: Some(failure.error),
                })
            }
        }
    }

    /// **Conclude**: after provisioning, either the cleanup items (in the order they may
    /// start), or `failed`, or (`again`) the provision phase's deferred actions to run
    /// first ([`Tasks::again`]).
    pub async fn conclude(&self, r: DeployRef) -> Result<DeployRef, TaskError> {
        let p = prefix(&r.stack, &r.deploy_id);
        if self.exists(&format!("{p}failed")).await? {
            return Ok(DeployRef {
                failed: true,
                items: vec![],
                parts: vec![],
                again: None,
                ..r
            });
        }
        if let Some(again) = self.again(&r, Phase::Provision).await? {
            return Ok(again);
        }
        let d = self.deployment(&r.stack, &r.deploy_id).await?;
        let (_, tasks) = d.cleanup_tasks();
        let ordered = topological(&tasks);
        self.put_graph(&r.stack, &r.deploy_id, Phase::Cleanup, &ordered)
            .await?;
        // The provision actions this execution's own `Map` ran, when it ran them.
        let provisions = d.provision_tasks().len() as u64;
        let already = if provisions <= self.history.part_actions {
            provisions
        } else {
            0
        };
        let (items, parts) = self.items_or_parts(&ordered, already);
        Ok(DeployRef {
            items,
            parts,
            failed: false,
            again: None,
            ..r
        })
    }

    /// After a phase's own `Map` (its items in `r`): when actions were deferred (the
    /// round's flag; and the phase did not stop), the answer that runs them as the phase's
    /// one part, in rounds
    /// ([`super::gates`]); `None` when every action is done, or the phase ran in parts
    /// (the `Part` task ran their rounds).
    async fn again(&self, r: &DeployRef, phase: Phase) -> Result<Option<DeployRef>, TaskError> {
        if r.items.is_empty() {
            return Ok(None);
        }
        let marker = phase.stop_marker();
        let p = prefix(&r.stack, &r.deploy_id);
        if self.exists(&format!("{p}{marker}")).await?
            || !self.deferred_in(&r.stack, &r.deploy_id, phase, 0).await?
        {
            return Ok(None);
        }
        tracing::info!(
            stack = r.stack,
            deploy = r.deploy_id,
            phase = phase.as_str(),
            "actions deferred: the phase runs again as a part"
        );
        Ok(Some(DeployRef {
            items: vec![],
            parts: vec![0],
            failed: false,
            again: Some(phase),
            ..r.clone()
        }))
    }

    /// **Finish**: outputs, exports, `DeployCompleted`, the lock released; or, first, the
    /// cleanup's deferred deletes ([`Tasks::again`]).
    pub async fn finish(&self, r: DeployRef) -> Result<FinishAnswer, TaskError> {
        let p = prefix(&r.stack, &r.deploy_id);
        if self.exists(&format!("{p}failed")).await? {
            return Ok(FinishAnswer::Ended(self.fail(r).await?));
        }
        if let Some(again) = self.again(&r, Phase::Cleanup).await? {
            return Ok(FinishAnswer::Again(again));
        }
        let d = self.deployment(&r.stack, &r.deploy_id).await?;
        let outputs = d.finish().await?;
        self.forget_secrets(&r.stack, &r.deploy_id).await?;
        let partial = self.exists(&format!("{p}partial")).await?;
        Ok(FinishAnswer::Ended(Ended {
            stack: r.stack,
            deploy_id: r.deploy_id,
            status: if partial {
                StackStatus::Partial
            } else {
                StackStatus::Succeeded
            },
            outputs,
            error: partial.then(|| ErrorInfo {
                name: "CleanupFailed".into(),
                message: "a delete in cleanup failed; it is not rolled back, and the next \
                          deploy or destroy deletes what is left (see the stack's events)"
                    .into(),
            }),
            rollback: None,
        }))
    }

    /// **Fail**, as the state machine runs it: first fences the lock
    /// ([`Deployment::fence`]: an iteration the failed `Map` did not stop in time begins no
    /// action), then waits for the calls of the stopped iterations (a `Map` that failed
    /// stops them, but their Lambda invocations run on):
    /// while an intent of this deploy without an outcome is younger than a task's longest
    /// run ([`TASK_BOUND`]), answers [`Waiting`] (the state machine waits and runs Fail
    /// again); after that, settles them and fails the deploy ([`Tasks::fail`]), so the
    /// rollback undoes what they made too.
    ///
    /// It runs within the task's deadline: past it (a rollback longer than one
    /// invocation) `Stackflow.Again`, and the next invocation resumes the rollback, whose
    /// undo intents and keys are the deploy's (an undo it cut is replayed with its token).
    pub async fn fail_or_wait(&self, r: DeployRef) -> Result<FailAnswer, TaskError> {
        let deadline = task_deadline();
        let what = format!("fail {}", r.deploy_id);
        let work = async {
            let d = self.deployment(&r.stack, &r.deploy_id).await?;
            if holds_lock(&d) {
                // First the fence: an iteration still running begins no action after it,
                // so the intents looked at next are all there will be.
                d.fence().await?;
                let now = std::time::SystemTime::now();
                if let Started::Running(ids) = d.settle_started(now, TASK_BOUND).await? {
                    return Ok(FailAnswer::Wait(Waiting::new(r, ids)));
                }
            }
            Ok(FailAnswer::Ended(self.fail_deployment(r, d).await?))
        };
        within(deadline, work)
            .await
            .ok_or_else(|| TaskError::again(&what, deadline))?
    }

    /// **Fail**: `DeployFailed` with the first error, the rollback (unless
    /// `noRollback`), the lock released; within the task's deadline, as
    /// [`Tasks::fail_or_wait`].
    pub async fn fail(&self, r: DeployRef) -> Result<Ended, TaskError> {
        let deadline = task_deadline();
        let what = format!("fail {}", r.deploy_id);
        let work = async {
            let d = self.deployment(&r.stack, &r.deploy_id).await?;
            self.fail_deployment(r, d).await
        };
        within(deadline, work)
            .await
            .ok_or_else(|| TaskError::again(&what, deadline))?
    }

    async fn fail_deployment(&self, r: DeployRef, d: Deployment<S>) -> Result<Ended, TaskError> {
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
            } if *deploy_id == r.deploy_id => Some(Failure {
                logical_id: logical_id.clone(),
                resource_type: d
                    .plan
                    .resource(logical_id)
                    .map(|x| x.resource_type.clone())
                    .unwrap_or_default(),
                action: operation.as_str().to_string(),
                error: error.clone(),
            }),
            _ => None,
        });
        // No action failed: a gate stopped the deploy, and its marker says why.
        let stopped = match &first {
            Some(_) => None,
            None => self
                .get(&format!("{}failed", prefix(&r.stack, &r.deploy_id)))
                .await?
                .and_then(|body| serde_json::from_slice::<ErrorInfo>(&body).ok()),
        };
        let rollback = match (holds_lock(&d), &stopped) {
            (false, _) => None,
            (true, Some(why)) => d.fail_because(why.clone(), None, true).await?,
            (true, None) => d.fail(first.as_ref(), "an action failed", true).await?,
        };
        self.forget_secrets(&r.stack, &r.deploy_id).await?;
        Ok(Ended {
            stack: r.stack,
            deploy_id: r.deploy_id,
            status: StackStatus::Failed,
            outputs: Default::default(),
            error: first.map(|f| f.error).or(stopped),
            rollback: rollback.as_ref().map(RolledBack::from),
        })
    }

    /// **Destroy**: the whole stack, with the embedded runner's order and concurrency.
    pub async fn destroy(&self, r: StackRequest) -> Result<Ended, TaskError> {
        self.destroy_run(RunRequest {
            stack: r.stack,
            execution: None,
        })
        .await
    }

    /// **Destroy** as the state machine runs it: the run named after the execution,
    /// within the task's deadline; past it `Stackflow.Again`, and the next invocation
    /// resumes the run.
    pub async fn destroy_run(&self, r: RunRequest) -> Result<Ended, TaskError> {
        let engine = self.engine.clone();
        let options = DeployOptions::new();
        let report = match &r.execution {
            Some(execution) => {
                let id = RunKind::Destroy.run_id(execution);
                let deadline = task_deadline();
                let run = destroy_stack_as(engine, &r.stack, options, &id);
                within(deadline, run)
                    .await
                    .ok_or_else(|| TaskError::again(&format!("destroy {id}"), deadline))??
            }
            None => crate::destroy::destroy_stack(engine, &r.stack, options).await?,
        };
        Ok(ended(report))
    }

    /// **Rollback**: the journal of the stack's failed deploy, last entry first.
    pub async fn rollback(&self, r: StackRequest) -> Result<Ended, TaskError> {
        self.rollback_run(RunRequest {
            stack: r.stack,
            execution: None,
        })
        .await
    }

    /// **Rollback** as the state machine runs it: the run named after the execution,
    /// within the task's deadline; past it `Stackflow.Again`, and the next invocation
    /// resumes the run.
    pub async fn rollback_run(&self, r: RunRequest) -> Result<Ended, TaskError> {
        let engine = self.engine.clone();
        let report = match &r.execution {
            Some(execution) => {
                let id = RunKind::Rollback.run_id(execution);
                let deadline = task_deadline();
                let run = rollback_stack_as(engine, &r.stack, &id);
                within(deadline, run)
                    .await
                    .ok_or_else(|| TaskError::again(&format!("rollback {id}"), deadline))??
            }
            None => rollback_stack(engine, &r.stack).await?,
        };
        Ok(ended(report))
    }
}

/// The end of a destroy or rollback, as its execution answers it.
fn ended(report: StackReport) -> Ended {
    Ended {
        stack: report.stack.clone(),
        deploy_id: report.deploy_id.clone(),
        status: report.status,
        outputs: Default::default(),
        error: report.failures.first().map(|f| f.error.clone()),
        rollback: None,
    }
}

/// True while `d`'s deploy holds its stack's lock (it has not ended).
fn holds_lock<S: EventStore>(d: &Deployment<S>) -> bool {
    let s = d.recorder.state();
    s.lock.as_ref().is_some_and(|h| h.deploy_id == d.deploy_id)
}

/// The deploy id of an execution: the one its input names (the CLI names the execution
/// after it, and Step Functions refuses a name used in the last 90 days, so it is one
/// execution's), else one derived from the input's key (each deploy uploads its own), so
/// that a retried Plan, or a redriven execution, is the same deploy and not a second one
/// that finds the stack locked by the first.
pub fn deploy_id_of(req: &DeployRequest) -> String {
    match &req.deploy_id {
        Some(id) => id.clone(),
        None => derived_deploy_id(&req.stack, &req.input_key),
    }
}

/// The deploy id of a deploy of `stack` whose input is at `input_key` and whose
/// execution input names none.
pub fn derived_deploy_id(stack: &str, input_key: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(format!("{stack}\n{input_key}").as_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("d-{hex}")
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

    /// A retried Plan answers what the first run answered: its reference, or its failure
    /// with the same kind and message.
    #[test]
    fn a_plans_answer_reads_back_as_it_was() {
        let planned = DeployRef {
            stack: "app".into(),
            deploy_id: "d-1".into(),
            no_changes: false,
            failed: false,
            items: vec!["A".into(), "B".into()],
            concurrency: 7,
            parts: vec![],
            again: None,
        };
        let body = PlanAnswer::of(&Ok(planned.clone()));
        assert_eq!(PlanAnswer::read(&body, "k"), Ok(planned));
        for kind in ErrorKind::ALL {
            let failed = TaskError::new(kind, "the template has no Resources");
            let body = PlanAnswer::of(&Err(failed.clone()));
            assert_eq!(PlanAnswer::read(&body, "k"), Err(failed));
        }
        let garbled = PlanAnswer::read(b"{", "deploys/app/d-1/plan-answer.json").unwrap_err();
        assert_eq!(garbled.kind, ErrorKind::Internal);
        assert!(garbled.message.contains("plan-answer.json"), "{garbled}");
    }

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
    fn a_deploy_without_an_id_gets_the_same_one_on_every_attempt() {
        let req: DeployRequest =
            serde_json::from_value(serde_json::json!({"stack":"app","inputKey":"inputs/app/1"}))
                .unwrap();
        assert_eq!(deploy_id_of(&req), deploy_id_of(&req.clone()));
        assert!(deploy_id_of(&req).starts_with("d-"));
        let other = DeployRequest {
            input_key: "inputs/app/2".into(),
            ..req.clone()
        };
        assert_ne!(deploy_id_of(&req), deploy_id_of(&other));
        let named = DeployRequest {
            deploy_id: Some("d-1".into()),
            ..req
        };
        assert_eq!(deploy_id_of(&named), "d-1");
    }

    #[test]
    fn payloads_round_trip_in_camel_case() {
        let item = Item {
            stack: "app".into(),
            deploy_id: "d-1".into(),
            id: "Queue".into(),
            phase: Phase::Provision,
            execution: None,
            index: None,
            round: 2,
        };
        let v = serde_json::to_value(&item).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"stack":"app","deployId":"d-1","id":"Queue","phase":"provision","round":2})
        );
        let back: Item = serde_json::from_value(v).unwrap();
        assert_eq!(back, item);
        let req: DeployRequest =
            serde_json::from_value(serde_json::json!({"stack":"app","inputKey":"k"})).unwrap();
        assert_eq!(
            req.concurrency, 40,
            "the Map's concurrency before it was a parameter"
        );
        assert!(!req.no_rollback);
    }
}
