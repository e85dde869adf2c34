//! The documents the state machines pass between tasks: small, and references only
//! (stack, deploy id, S3 keys), never templates (an execution's payload is at most 256 KB
//! and its history is kept for 90 days).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use stackflow_events::event::ErrorInfo;

use crate::report::StackStatus;

/// The execution input of a deploy: where its stack input is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeployRequest {
    /// The stack.
    pub stack: String,
    /// The S3 key (in the engine's bucket) of the [`StackInput`](crate::stack::StackInput) JSON.
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
    /// Replace resources that hold data when a change forces it (refused otherwise).
    #[serde(default)]
    pub allow_stateful_replacement: bool,
    /// The digest of the plan a reviewer approved: the deploy refuses to start unless
    /// its plan has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_plan: Option<String>,
}

/// An execution input without `concurrency` (a caller from before it bounded the `Map`)
/// runs the `Map` as it did then: [`MAP_CONCURRENCY`] at once.
fn default_concurrency() -> usize {
    MAP_CONCURRENCY
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
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Phase::Provision => "provision",
            Phase::Cleanup => "cleanup",
        }
    }

    /// The marker that says the phase stopped: `failed` in provision; `partial` in
    /// cleanup, whose deletes cannot be undone.
    pub(crate) fn stop_marker(self) -> &'static str {
        match self {
            Phase::Provision => "failed",
            Phase::Cleanup => "partial",
        }
    }
}

/// One action of a `Map` iteration, as the `Map`'s `ItemSelector` builds it.
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
    /// The execution it runs in (`$$.Execution.Id`), whose history its gate may read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution: Option<String>,
    /// Its place in the `Map`'s items (`$$.Map.Item.Index`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u64>,
    /// The round of its phase it runs in: 0 for a deploy's own `Map`, from 1 for the
    /// executions that run what an earlier round deferred ([`super::gates`]). Gates are
    /// stored per round.
    #[serde(default)]
    pub round: u32,
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
    /// The next `Map`'s items: action ids only (a logical id, or `predecessor:<physical
    /// id>` in cleanup). The `Map`'s `ItemSelector` makes each iteration's [`Item`] from
    /// one of them and this document's stack and deploy id, so that a stack of 2,000
    /// resources stays well under Step Functions' 256 KB payload limit.
    #[serde(default)]
    pub items: Vec<String>,
    /// How many of the `Map`'s iterations run at once (its `MaxConcurrencyPath`): the
    /// deploy's `concurrency`, within 1 and [`MAP_CONCURRENCY`].
    #[serde(default = "map_concurrency_default")]
    pub concurrency: usize,
    /// When the phase has more actions than one execution runs
    /// ([`HistoryGuard::part_actions`](super::history::HistoryGuard::part_actions)): its
    /// parts, each the index of its first action in the stored graph (a part ends where the
    /// next begins), each run in an execution of its own by the `Part` task, one after the
    /// other (`items` is then empty: the parts read theirs from the stored graph).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<u32>,
    /// Set when an iteration of the phase's own `Map` deferred its action (it would have
    /// waited for a dependency that had not begun; [`super::gates`]): that phase runs
    /// again as one part (`parts` is `[0]`), in rounds, until every action is done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub again: Option<Phase>,
}

/// The `Part` task's input: the parts of a phase still to run (the first is run now, as an
/// execution of the deploy's own state machine, and waited for); it answers the rest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PartRequest {
    /// The stack.
    pub stack: String,
    /// The deploy.
    pub deploy_id: String,
    /// The phase.
    pub phase: Phase,
    /// The parts left, in order, each the index of its first action in the stored graph.
    pub parts: Vec<u32>,
    /// The state machine the deploy runs on (`$$.StateMachine.Id`): the part runs on it.
    pub machine: String,
    /// How many of the part's iterations run at once.
    #[serde(default = "map_concurrency_default")]
    pub concurrency: usize,
}

/// The input of a part's execution: the deploy machine's `Entry` sends it to `PartMap`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PartInput {
    /// The stack.
    pub stack: String,
    /// The deploy.
    pub deploy_id: String,
    /// The phase.
    pub phase: Phase,
    /// Which part: the index of its first action.
    pub part: u32,
    /// Its actions' ids, in the order they may start.
    pub items: Vec<String>,
    /// How many run at once.
    pub concurrency: usize,
    /// Its round: 1 for the first execution of the part, one more for each that runs what
    /// the one before deferred.
    #[serde(default = "first_part_round")]
    pub round: u32,
}

fn first_part_round() -> u32 {
    1
}

/// The most iterations of an inline `Map` Step Functions runs at once.
pub const MAP_CONCURRENCY: usize = 40;

fn map_concurrency_default() -> usize {
    MAP_CONCURRENCY
}

/// The `Map` concurrency of a deploy asking for `concurrency` actions at once.
pub fn map_concurrency(concurrency: usize) -> usize {
    concurrency.clamp(1, MAP_CONCURRENCY)
}

/// What an item's task did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ItemResult {
    /// The action.
    pub id: String,
    /// `created`, `updated`, `replaced`, `deleted`, `retained`, `skipped`, `failed`,
    /// `not-started` (an earlier failure stopped the deploy), `deferred` (its round ended
    /// before its dependencies were done: a later round runs it).
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
    /// The rollback a failed deploy's Fail ran (absent when none ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback: Option<RolledBack>,
}

/// What a failed deploy's rollback did (the engine's `RollbackReport`, counted; its
/// errors masked as recorded).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolledBack {
    /// True when every journal entry was undone.
    pub complete: bool,
    /// How many entries were undone.
    pub undone: usize,
    /// The entries that could not be undone: `<logical id>: <error>`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<String>,
}

impl From<&crate::report::RollbackReport> for RolledBack {
    fn from(r: &crate::report::RollbackReport) -> Self {
        RolledBack {
            complete: r.complete(),
            undone: r.undone.len(),
            failed: r
                .failed
                .iter()
                .map(|f| format!("{}: {}", f.logical_id, f.error.message))
                .collect(),
        }
    }
}

/// A stack to destroy or roll back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StackRequest {
    /// The stack.
    pub stack: String,
}

/// What the Destroy and Rollback tasks take: the stack, and the name of the execution
/// (the state machines pass `$$.Execution.Name`), which names the run: every invocation
/// of one execution is the same run, and resumes it (see [`RunKind::run_id`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunRequest {
    /// The stack.
    pub stack: String,
    /// The execution's name; without one each invocation is a run of its own, unbounded.
    #[serde(default)]
    pub execution: Option<String>,
}

/// Which kind of run an execution is, for the runs whose id it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunKind {
    /// A destroy.
    Destroy,
    /// A rollback.
    Rollback,
}

impl RunKind {
    /// The run id of the execution named `execution`: the same for every invocation of
    /// it, and one execution's (Step Functions refuses a name used in the last 90 days).
    pub fn run_id(self, execution: &str) -> String {
        let prefix = match self {
            RunKind::Destroy => "x",
            RunKind::Rollback => "r",
        };
        format!("{prefix}-{execution}")
    }
}

/// The gate's answer, sent as the gate task's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateAnswer {
    /// True: act; false: an earlier failure stopped the deploy, or the action is deferred.
    pub go: bool,
    /// True: the action waits for a later round of its phase ([`super::gates`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deferred: bool,
}

impl GateAnswer {
    /// Act.
    pub const GO: GateAnswer = GateAnswer {
        go: true,
        deferred: false,
    };
    /// Do not act: the phase stopped.
    pub const STOP: GateAnswer = GateAnswer {
        go: false,
        deferred: false,
    };
    /// Do not act now: a later round runs the action.
    pub const DEFERRED: GateAnswer = GateAnswer {
        go: false,
        deferred: true,
    };
}

/// Fail's answer while calls of the deploy's stopped iterations may still be running:
/// the state machine waits (`wait` is the field its `Choice` looks for) and runs Fail
/// again with this document, which is a [`DeployRef`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Waiting {
    /// The stack.
    pub stack: String,
    /// The deploy.
    pub deploy_id: String,
    /// Always true.
    pub wait: bool,
    /// The resources whose calls may still be running (the first 20).
    pub running: Vec<String>,
}

impl Waiting {
    /// Waiting for the calls of `running` of the deploy `r`.
    pub fn new(r: DeployRef, mut running: Vec<String>) -> Waiting {
        running.truncate(20);
        Waiting {
            stack: r.stack,
            deploy_id: r.deploy_id,
            wait: true,
            running,
        }
    }
}

/// What Finish answers: the deploy's end, or (`again` set) that deferred deletes of the
/// cleanup's own `Map` run first, as a part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum FinishAnswer {
    /// The deploy ended.
    Ended(Ended),
    /// The cleanup runs again.
    Again(DeployRef),
}

/// What Fail answers: the deploy's end, or that it waits for running calls first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum FailAnswer {
    /// Calls may still be running: wait, then Fail again.
    Wait(Waiting),
    /// The deploy failed (and was rolled back unless told not to).
    Ended(Ended),
}
