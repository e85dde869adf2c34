//! The deploy scheduler: one action per task, each task started as soon as its
//! own dependencies have succeeded (no wave barrier), with at most N running and,
//! through a [`Gate`], within the limits of the services the task calls.
//!
//! The scheduler knows nothing about AWS: a task is an id with the ids it
//! waits for, and the caller's runner turns an id into an [`Outcome`].

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::{JoinError, JoinSet};

mod graph;

pub use graph::reversed;
use graph::{cycle_messages, resolve};

/// How often tasks that a [`Gate`] refused are offered again while nothing of this
/// run ends (the room may have been freed elsewhere, or a pause ended).
const GATE_POLL: Duration = Duration::from_millis(20);

/// One unit of work: an id and the ids it waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    /// The task's id, unique within one task list.
    pub id: String,
    /// Ids this task waits for; ids not in the task list are ignored.
    pub deps: Vec<String>,
}

impl Task {
    /// A task with the given id and dependencies.
    pub fn new(id: impl Into<String>, deps: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self {
            id: id.into(),
            deps: deps.into_iter().map(Into::into).collect(),
        }
    }
}

/// What the runner returns for one task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The task's action succeeded; its dependents may start.
    Succeeded,
    /// The task's action failed, with a message; nothing new starts.
    Failed(String),
}

/// The final status of one task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskStatus {
    /// The runner returned [`Outcome::Succeeded`].
    Succeeded,
    /// The runner returned [`Outcome::Failed`], the runner panicked, or the task is
    /// part of a dependency cycle.
    Failed(String),
    /// Never started: blocked by a failure, a cycle or the stop signal.
    NotStarted,
}

/// The result of one [`run`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// Every task's status, in task-list order.
    pub statuses: Vec<(String, TaskStatus)>,
    /// Ids of the tasks that ran, in the order they finished.
    pub completion_order: Vec<String>,
    /// True when a failure (or a cycle) or the stop signal ended starting new tasks.
    pub stopped: bool,
}

impl Report {
    /// The status of the task `id`, if it is in the task list.
    pub fn status(&self, id: &str) -> Option<&TaskStatus> {
        self.statuses
            .iter()
            .find_map(|(task, status)| (task == id).then_some(status))
    }

    /// True when every task succeeded.
    pub fn all_succeeded(&self) -> bool {
        self.statuses
            .iter()
            .all(|(_, status)| *status == TaskStatus::Succeeded)
    }
}

/// Limits besides the scheduler's own cap: whether a ready task may start now (the
/// services it calls have room), told when a task it let start ends.
pub trait Gate: Send + Sync {
    /// Takes room for task `id` and answers true, or answers false (it is offered again
    /// when a task ends, and every few milliseconds while it waits).
    fn try_start(&self, id: &str) -> bool;
    /// Task `id`, which [`Gate::try_start`] let start, ended with `outcome`.
    fn finished(&self, id: &str, outcome: &Outcome);
}

/// A gate that lets every task start.
#[derive(Debug, Clone, Copy, Default)]
pub struct Open;

impl Gate for Open {
    fn try_start(&self, _: &str) -> bool {
        true
    }

    fn finished(&self, _: &str, _: &Outcome) {}
}

/// Runs `tasks`, calling `run(id)` once per task and spawning the returned future
/// on the current tokio runtime.
///
/// A task starts as soon as all its dependencies have succeeded; among the ready
/// tasks, task-list order decides, and at most `concurrency` run at once (0 is
/// treated as 1). On the first failure, or when `stop` turns true, nothing new
/// starts: the running tasks finish (their outcomes are recorded) and the rest are
/// [`TaskStatus::NotStarted`]. A dependency cycle is detected up front: every task
/// on a cycle is [`TaskStatus::Failed`] with the cycle spelled out, and nothing
/// runs. Dropping the returned future aborts the running tasks.
pub async fn run<F, Fut>(
    tasks: &[Task],
    concurrency: usize,
    stop: watch::Receiver<bool>,
    run: F,
) -> Report
where
    F: Fn(String) -> Fut,
    Fut: Future<Output = Outcome> + Send + 'static,
{
    run_gated(tasks, concurrency, &Open, stop, run).await
}

/// [`run`], where a ready task also waits for `gate` to let it start: a task the gate
/// refuses does not hold up the ready tasks after it.
pub async fn run_gated<F, Fut>(
    tasks: &[Task],
    concurrency: usize,
    gate: &dyn Gate,
    mut stop: watch::Receiver<bool>,
    run: F,
) -> Report
where
    F: Fn(String) -> Fut,
    Fut: Future<Output = Outcome> + Send + 'static,
{
    let deps = resolve(tasks);
    let cycles = cycle_messages(tasks, &deps);
    if cycles.iter().any(Option::is_some) {
        let statuses = cycles
            .into_iter()
            .map(|c| c.map(TaskStatus::Failed))
            .collect();
        return report(tasks, statuses, Vec::new(), true);
    }
    let mut walk = Walk::new(tasks, &deps, concurrency);
    let mut set = JoinSet::new();
    let mut stopped = *stop.borrow_and_update();
    let mut watching = true;

    loop {
        let refused = !stopped && walk.start_ready(gate, &mut set, &run);
        if walk.running.is_empty() && (stopped || !refused) {
            break;
        }
        tokio::select! {
            joined = set.join_next_with_id(), if !walk.running.is_empty() => {
                let Some(joined) = joined else { break };
                stopped |= walk.joined(joined, gate);
            }
            changed = stop.changed(), if watching && !stopped => match changed {
                Ok(()) => stopped = *stop.borrow_and_update(),
                // The sender is gone: no stop can come any more.
                Err(_) => watching = false,
            },
            () = tokio::time::sleep(GATE_POLL), if refused => {}
        }
    }

    report(tasks, walk.statuses, walk.completion_order, stopped)
}

/// Where a run is: what waits, what is ready, what runs.
struct Walk<'a> {
    tasks: &'a [Task],
    limit: usize,
    statuses: Vec<Option<TaskStatus>>,
    waiting: Vec<usize>,
    dependents: Vec<Vec<usize>>,
    ready: BTreeSet<usize>,
    running: HashMap<tokio::task::Id, usize>,
    completion_order: Vec<String>,
}

impl<'a> Walk<'a> {
    fn new(tasks: &'a [Task], deps: &[Vec<usize>], concurrency: usize) -> Walk<'a> {
        let n = tasks.len();
        let waiting: Vec<usize> = deps.iter().map(Vec::len).collect();
        let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (task, task_deps) in deps.iter().enumerate() {
            for &dep in task_deps {
                dependents[dep].push(task);
            }
        }
        Walk {
            tasks,
            limit: concurrency.max(1),
            statuses: vec![None; n],
            ready: (0..n).filter(|&task| waiting[task] == 0).collect(),
            waiting,
            dependents,
            running: HashMap::new(),
            completion_order: Vec::new(),
        }
    }

    /// Starts the ready tasks, in task-list order, that the cap and the gate allow.
    /// True when the gate refused one (so it must be offered again).
    fn start_ready<F, Fut>(&mut self, gate: &dyn Gate, set: &mut JoinSet<Outcome>, run: &F) -> bool
    where
        F: Fn(String) -> Fut,
        Fut: Future<Output = Outcome> + Send + 'static,
    {
        let mut refused = false;
        let mut started = Vec::new();
        for &task in &self.ready {
            if self.running.len() + started.len() >= self.limit {
                break;
            }
            if gate.try_start(&self.tasks[task].id) {
                started.push(task);
            } else {
                refused = true;
            }
        }
        for task in started {
            self.ready.remove(&task);
            let handle = set.spawn(run(self.tasks[task].id.clone()));
            self.running.insert(handle.id(), task);
        }
        refused
    }

    /// Records a task that ended. True when it failed (nothing new starts).
    fn joined(
        &mut self,
        joined: Result<(tokio::task::Id, Outcome), JoinError>,
        gate: &dyn Gate,
    ) -> bool {
        let (id, outcome) = match joined {
            Ok((id, outcome)) => (id, outcome),
            Err(error) => {
                let why = if error.is_panic() {
                    "the task panicked"
                } else {
                    "the task was cancelled"
                };
                (error.id(), Outcome::Failed(why.to_owned()))
            }
        };
        let Some(task) = self.running.remove(&id) else {
            return false;
        };
        gate.finished(&self.tasks[task].id, &outcome);
        self.completion_order.push(self.tasks[task].id.clone());
        match outcome {
            Outcome::Succeeded => {
                self.statuses[task] = Some(TaskStatus::Succeeded);
                for &dependent in &self.dependents[task] {
                    self.waiting[dependent] -= 1;
                    if self.waiting[dependent] == 0 {
                        self.ready.insert(dependent);
                    }
                }
                false
            }
            Outcome::Failed(message) => {
                self.statuses[task] = Some(TaskStatus::Failed(message));
                true
            }
        }
    }
}

fn report(
    tasks: &[Task],
    statuses: Vec<Option<TaskStatus>>,
    completion_order: Vec<String>,
    stopped: bool,
) -> Report {
    Report {
        statuses: tasks
            .iter()
            .zip(statuses)
            .map(|(task, status)| (task.id.clone(), status.unwrap_or(TaskStatus::NotStarted)))
            .collect(),
        completion_order,
        stopped,
    }
}

#[cfg(test)]
mod tests;
