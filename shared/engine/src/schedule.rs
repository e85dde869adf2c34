//! The deploy scheduler: one action per task, each task started as soon as its
//! own dependencies have succeeded (no wave barrier), with at most N running.
//!
//! The scheduler knows nothing about AWS: a task is an id with the ids it
//! waits for, and the caller's runner turns an id into an [`Outcome`].

use std::collections::{BTreeSet, HashMap};
use std::future::Future;

use tokio::sync::watch;
use tokio::task::JoinSet;

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
    mut stop: watch::Receiver<bool>,
    run: F,
) -> Report
where
    F: Fn(String) -> Fut,
    Fut: Future<Output = Outcome> + Send + 'static,
{
    let n = tasks.len();
    let limit = concurrency.max(1);
    let deps = resolve(tasks);
    let mut statuses: Vec<Option<TaskStatus>> = vec![None; n];

    let cycles = cycle_messages(tasks, &deps);
    if cycles.iter().any(Option::is_some) {
        for (status, cycle) in statuses.iter_mut().zip(cycles) {
            *status = cycle.map(TaskStatus::Failed);
        }
        return report(tasks, statuses, Vec::new(), true);
    }

    let mut waiting: Vec<usize> = deps.iter().map(Vec::len).collect();
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (task, task_deps) in deps.iter().enumerate() {
        for &dep in task_deps {
            dependents[dep].push(task);
        }
    }
    let mut ready: BTreeSet<usize> = (0..n).filter(|&task| waiting[task] == 0).collect();
    let mut running: HashMap<tokio::task::Id, usize> = HashMap::new();
    let mut set = JoinSet::new();
    let mut completion_order = Vec::new();
    let mut stopped = *stop.borrow_and_update();
    let mut watching = true;

    loop {
        if !stopped {
            while running.len() < limit
                && let Some(task) = ready.pop_first()
            {
                let handle = set.spawn(run(tasks[task].id.clone()));
                running.insert(handle.id(), task);
            }
        }
        if running.is_empty() {
            break;
        }
        tokio::select! {
            joined = set.join_next_with_id() => {
                let Some(joined) = joined else { break };
                let (id, outcome) = match joined {
                    Ok((id, outcome)) => (id, outcome),
                    Err(error) => {
                        let why = if error.is_panic() { "the task panicked" } else { "the task was cancelled" };
                        (error.id(), Outcome::Failed(why.to_owned()))
                    }
                };
                let Some(task) = running.remove(&id) else { continue };
                completion_order.push(tasks[task].id.clone());
                match outcome {
                    Outcome::Succeeded => {
                        statuses[task] = Some(TaskStatus::Succeeded);
                        for &dependent in &dependents[task] {
                            waiting[dependent] -= 1;
                            if waiting[dependent] == 0 {
                                ready.insert(dependent);
                            }
                        }
                    }
                    Outcome::Failed(message) => {
                        statuses[task] = Some(TaskStatus::Failed(message));
                        stopped = true;
                    }
                }
            }
            changed = stop.changed(), if watching && !stopped => match changed {
                Ok(()) => stopped = *stop.borrow_and_update(),
                // The sender is gone: no stop can come any more.
                Err(_) => watching = false,
            },
        }
    }

    report(tasks, statuses, completion_order, stopped)
}

/// The same graph with every edge turned around: a task now waits for the tasks
/// that depended on it (for deletes, dependents go first). Task order is kept;
/// ids not in the task list are dropped.
pub fn reversed(tasks: &[Task]) -> Vec<Task> {
    let deps = resolve(tasks);
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); tasks.len()];
    for (task, task_deps) in deps.iter().enumerate() {
        for &dep in task_deps {
            dependents[dep].push(task);
        }
    }
    tasks
        .iter()
        .zip(dependents)
        .map(|(task, dependents)| Task {
            id: task.id.clone(),
            deps: dependents
                .into_iter()
                .map(|dependent| tasks[dependent].id.clone())
                .collect(),
        })
        .collect()
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

/// Each task's dependencies as indices into `tasks`: unknown ids dropped,
/// duplicates removed. A repeated task id resolves to its first occurrence.
fn resolve(tasks: &[Task]) -> Vec<Vec<usize>> {
    let mut index: HashMap<&str, usize> = HashMap::with_capacity(tasks.len());
    for (position, task) in tasks.iter().enumerate() {
        index.entry(task.id.as_str()).or_insert(position);
    }
    tasks
        .iter()
        .map(|task| {
            let mut deps: Vec<usize> = Vec::with_capacity(task.deps.len());
            for dep in &task.deps {
                if let Some(&dep) = index.get(dep.as_str())
                    && !deps.contains(&dep)
                {
                    deps.push(dep);
                }
            }
            deps
        })
        .collect()
}

/// For each task on a dependency cycle, the message naming one such cycle
/// ("dependency cycle: a -> b -> a"); `None` for the others.
fn cycle_messages(tasks: &[Task], deps: &[Vec<usize>]) -> Vec<Option<String>> {
    let mut messages = vec![None; tasks.len()];
    for component in strongly_connected(deps) {
        let cyclic = component.len() > 1 || deps[component[0]].contains(&component[0]);
        if !cyclic {
            continue;
        }
        let path = cycle_through(deps, &component);
        let names: Vec<&str> = path.iter().map(|&task| tasks[task].id.as_str()).collect();
        let message = format!("dependency cycle: {}", names.join(" -> "));
        for &task in &component {
            messages[task] = Some(message.clone());
        }
    }
    messages
}

/// The strongly connected components of the graph (Tarjan's algorithm, with an
/// explicit stack so deep chains cannot overflow the thread's stack).
fn strongly_connected(deps: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let n = deps.len();
    let mut order: Vec<Option<usize>> = vec![None; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut next = 0;
    let mut components = Vec::new();

    for root in 0..n {
        if order[root].is_some() {
            continue;
        }
        let mut calls: Vec<(usize, usize)> = Vec::new();
        order[root] = Some(next);
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        calls.push((root, 0));

        while let Some(&mut (node, ref mut edge)) = calls.last_mut() {
            if let Some(&dep) = deps[node].get(*edge) {
                *edge += 1;
                match order[dep] {
                    None => {
                        order[dep] = Some(next);
                        low[dep] = next;
                        next += 1;
                        stack.push(dep);
                        on_stack[dep] = true;
                        calls.push((dep, 0));
                    }
                    Some(dep_order) if on_stack[dep] => low[node] = low[node].min(dep_order),
                    Some(_) => {}
                }
                continue;
            }
            calls.pop();
            if let Some(&(parent, _)) = calls.last() {
                low[parent] = low[parent].min(low[node]);
            }
            if Some(low[node]) == order[node] {
                let mut component = Vec::new();
                while let Some(member) = stack.pop() {
                    on_stack[member] = false;
                    component.push(member);
                    if member == node {
                        break;
                    }
                }
                component.sort_unstable();
                components.push(component);
            }
        }
    }
    components
}

/// A shortest cycle through the first task (in task-list order) of a cyclic
/// component, as the list of tasks with the first repeated at the end.
fn cycle_through(deps: &[Vec<usize>], component: &[usize]) -> Vec<usize> {
    let start = component[0];
    let mut parent: HashMap<usize, usize> = HashMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(node) = queue.pop_front() {
        for &dep in &deps[node] {
            if dep == start {
                // Walk back from `node` to `start`, then read it forwards.
                let mut path = vec![node];
                let mut at = node;
                while at != start {
                    at = parent[&at];
                    path.push(at);
                }
                path.reverse();
                path.push(start);
                return path;
            }
            if component.binary_search(&dep).is_ok() && dep != start && !parent.contains_key(&dep) {
                parent.insert(dep, node);
                queue.push_back(dep);
            }
        }
    }
    // A cyclic component always has a cycle through each member.
    vec![start, start]
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use proptest::prelude::*;
    use tokio::time::{Instant, sleep};

    use super::*;

    /// What the simulated runner saw.
    #[derive(Default)]
    struct Log {
        running: usize,
        max_running: usize,
        /// (start, end) per task id, relative to the simulation's start.
        spans: HashMap<String, (Duration, Duration)>,
    }

    type Runner = Box<dyn Fn(String) -> Pin<Box<dyn Future<Output = Outcome> + Send>>>;

    /// A runner that sleeps each task's duration, then succeeds or fails.
    struct Sim {
        log: Arc<Mutex<Log>>,
        started: Instant,
    }

    impl Sim {
        fn new() -> Self {
            Self {
                log: Arc::default(),
                started: Instant::now(),
            }
        }

        /// `spec`: (id, seconds, fails).
        fn runner(&self, spec: &[(&str, u64, bool)]) -> Runner {
            let spec: HashMap<String, (u64, bool)> = spec
                .iter()
                .map(|&(id, secs, fails)| (id.to_owned(), (secs, fails)))
                .collect();
            self.runner_millis(
                spec.into_iter()
                    .map(|(id, (secs, fails))| (id, (secs * 1000, fails)))
                    .collect(),
            )
        }

        fn runner_millis(&self, spec: HashMap<String, (u64, bool)>) -> Runner {
            let log = self.log.clone();
            let t0 = self.started;
            Box::new(move |id| {
                let (millis, fails) = spec[&id];
                let log = log.clone();
                Box::pin(async move {
                    let start = t0.elapsed();
                    {
                        let mut log = log.lock().unwrap();
                        log.running += 1;
                        log.max_running = log.max_running.max(log.running);
                    }
                    sleep(Duration::from_millis(millis)).await;
                    let mut log = log.lock().unwrap();
                    log.running -= 1;
                    log.spans.insert(id.clone(), (start, t0.elapsed()));
                    if fails {
                        Outcome::Failed(format!("{id} broke"))
                    } else {
                        Outcome::Succeeded
                    }
                })
            })
        }

        fn span(&self, id: &str) -> (u64, u64) {
            let (start, end) = self.log.lock().unwrap().spans[id];
            (start.as_secs(), end.as_secs())
        }

        fn max_running(&self) -> usize {
            self.log.lock().unwrap().max_running
        }

        fn ran(&self) -> usize {
            self.log.lock().unwrap().spans.len()
        }
    }

    fn no_stop() -> watch::Receiver<bool> {
        watch::channel(false).1
    }

    fn ids(order: &[String]) -> Vec<&str> {
        order.iter().map(String::as_str).collect()
    }

    const NONE: [&str; 0] = [];

    #[tokio::test(start_paused = true)]
    async fn chain_runs_in_order() {
        let tasks = [
            Task::new("a", NONE),
            Task::new("b", ["a"]),
            Task::new("c", ["b"]),
        ];
        let sim = Sim::new();
        let runner = sim.runner(&[("a", 1, false), ("b", 2, false), ("c", 3, false)]);
        let report = run(&tasks, 4, no_stop(), runner).await;
        assert!(report.all_succeeded());
        assert!(!report.stopped);
        assert_eq!(ids(&report.completion_order), ["a", "b", "c"]);
        assert_eq!(sim.span("a"), (0, 1));
        assert_eq!(sim.span("b"), (1, 3));
        assert_eq!(sim.span("c"), (3, 6));
        assert_eq!(sim.started.elapsed(), Duration::from_secs(6));
    }

    #[tokio::test(start_paused = true)]
    async fn diamond() {
        let tasks = [
            Task::new("d", ["b", "c"]),
            Task::new("b", ["a"]),
            Task::new("c", ["a"]),
            Task::new("a", NONE),
        ];
        let sim = Sim::new();
        let runner = sim.runner(&[
            ("a", 1, false),
            ("b", 2, false),
            ("c", 3, false),
            ("d", 1, false),
        ]);
        let report = run(&tasks, 8, no_stop(), runner).await;
        assert!(report.all_succeeded());
        assert_eq!(ids(&report.completion_order), ["a", "b", "c", "d"]);
        assert_eq!(sim.span("b"), (1, 3));
        assert_eq!(sim.span("c"), (1, 4));
        assert_eq!(sim.span("d"), (4, 5));
        // Statuses stay in task-list order.
        let order: Vec<&str> = report.statuses.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(order, ["d", "b", "c", "a"]);
    }

    #[tokio::test(start_paused = true)]
    async fn independent_tasks_run_concurrently() {
        let tasks = [
            Task::new("a", NONE),
            Task::new("b", NONE),
            Task::new("c", NONE),
        ];
        let sim = Sim::new();
        let runner = sim.runner(&[("a", 3, false), ("b", 5, false), ("c", 2, false)]);
        let report = run(&tasks, 8, no_stop(), runner).await;
        assert!(report.all_succeeded());
        assert_eq!(ids(&report.completion_order), ["c", "a", "b"]);
        assert_eq!(sim.max_running(), 3);
        assert_eq!(sim.started.elapsed(), Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn concurrency_limit_is_respected_in_task_list_order() {
        let names = ["t1", "t2", "t3", "t4", "t5", "t6"];
        let tasks: Vec<Task> = names.iter().map(|id| Task::new(*id, NONE)).collect();
        let spec: Vec<(&str, u64, bool)> = names.iter().map(|id| (*id, 1, false)).collect();
        let sim = Sim::new();
        let report = run(&tasks, 2, no_stop(), sim.runner(&spec)).await;
        assert!(report.all_succeeded());
        assert_eq!(sim.max_running(), 2);
        assert_eq!(sim.started.elapsed(), Duration::from_secs(3));
        assert_eq!(sim.span("t3"), (1, 2));
        assert_eq!(sim.span("t6"), (2, 3));
    }

    #[tokio::test(start_paused = true)]
    async fn zero_concurrency_is_one_and_unknown_deps_are_ignored() {
        let tasks = [Task::new("a", ["elsewhere"]), Task::new("b", ["a", "a"])];
        let sim = Sim::new();
        let runner = sim.runner(&[("a", 1, false), ("b", 1, false)]);
        let report = run(&tasks, 0, no_stop(), runner).await;
        assert!(report.all_succeeded());
        assert_eq!(sim.max_running(), 1);
        assert_eq!(sim.span("b"), (1, 2));
    }

    #[tokio::test(start_paused = true)]
    async fn no_wave_barrier() {
        let tasks = [
            Task::new("a", NONE),
            Task::new("b", NONE),
            Task::new("c", ["b"]),
        ];
        let sim = Sim::new();
        let runner = sim.runner(&[("a", 10, false), ("b", 1, false), ("c", 1, false)]);
        let report = run(&tasks, 8, no_stop(), runner).await;
        assert!(report.all_succeeded());
        assert_eq!(sim.span("c"), (1, 2));
        assert_eq!(ids(&report.completion_order), ["b", "c", "a"]);
        assert_eq!(sim.started.elapsed(), Duration::from_secs(10));
    }

    #[tokio::test(start_paused = true)]
    async fn failure_drains_running_and_blocks_the_rest() {
        let tasks = [
            Task::new("a", NONE),
            Task::new("b", NONE),
            Task::new("c", ["a"]),
            Task::new("d", NONE),
        ];
        let sim = Sim::new();
        let runner = sim.runner(&[
            ("a", 2, true),
            ("b", 5, false),
            ("c", 1, false),
            ("d", 1, false),
        ]);
        let report = run(&tasks, 2, no_stop(), runner).await;
        assert!(report.stopped);
        assert_eq!(
            report.status("a"),
            Some(&TaskStatus::Failed("a broke".to_owned()))
        );
        assert_eq!(report.status("b"), Some(&TaskStatus::Succeeded));
        assert_eq!(report.status("c"), Some(&TaskStatus::NotStarted));
        assert_eq!(report.status("d"), Some(&TaskStatus::NotStarted));
        assert_eq!(ids(&report.completion_order), ["a", "b"]);
        assert_eq!(sim.ran(), 2);
        assert_eq!(sim.started.elapsed(), Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn stop_signal_drains_and_stops() {
        let tasks = [
            Task::new("a", NONE),
            Task::new("b", NONE),
            Task::new("c", ["a"]),
        ];
        let sim = Sim::new();
        let runner = sim.runner(&[("a", 10, false), ("b", 10, false), ("c", 1, false)]);
        let (stop_tx, stop_rx) = watch::channel(false);
        tokio::spawn(async move {
            sleep(Duration::from_secs(3)).await;
            stop_tx.send_replace(true);
        });
        let report = run(&tasks, 1, stop_rx, runner).await;
        assert!(report.stopped);
        assert_eq!(report.status("a"), Some(&TaskStatus::Succeeded));
        assert_eq!(report.status("b"), Some(&TaskStatus::NotStarted));
        assert_eq!(report.status("c"), Some(&TaskStatus::NotStarted));
        assert_eq!(ids(&report.completion_order), ["a"]);
        assert_eq!(sim.started.elapsed(), Duration::from_secs(10));
    }

    #[tokio::test(start_paused = true)]
    async fn stop_already_set_runs_nothing() {
        let tasks = [Task::new("a", NONE)];
        let sim = Sim::new();
        let (_stop_tx, stop_rx) = watch::channel(true);
        let report = run(&tasks, 1, stop_rx, sim.runner(&[("a", 1, false)])).await;
        assert!(report.stopped);
        assert_eq!(report.status("a"), Some(&TaskStatus::NotStarted));
        assert_eq!(sim.ran(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn dropped_stop_sender_is_not_a_stop() {
        let tasks = [Task::new("a", NONE), Task::new("b", ["a"])];
        let sim = Sim::new();
        let (stop_tx, stop_rx) = watch::channel(false);
        drop(stop_tx);
        let runner = sim.runner(&[("a", 1, false), ("b", 1, false)]);
        let report = run(&tasks, 1, stop_rx, runner).await;
        assert!(report.all_succeeded());
        assert!(!report.stopped);
    }

    #[tokio::test(start_paused = true)]
    async fn cycle_is_reported_and_nothing_runs() {
        let tasks = [
            Task::new("x", NONE),
            Task::new("a", ["b"]),
            Task::new("b", ["a"]),
            Task::new("c", ["a"]),
            Task::new("s", ["s"]),
        ];
        let sim = Sim::new();
        let runner = sim.runner(&[
            ("x", 1, false),
            ("a", 1, false),
            ("b", 1, false),
            ("c", 1, false),
            ("s", 1, false),
        ]);
        let report = run(&tasks, 4, no_stop(), runner).await;
        assert!(report.stopped);
        assert_eq!(sim.ran(), 0);
        assert!(report.completion_order.is_empty());
        let cycle = TaskStatus::Failed("dependency cycle: a -> b -> a".to_owned());
        assert_eq!(report.status("a"), Some(&cycle));
        assert_eq!(report.status("b"), Some(&cycle));
        assert_eq!(
            report.status("s"),
            Some(&TaskStatus::Failed("dependency cycle: s -> s".to_owned()))
        );
        assert_eq!(report.status("c"), Some(&TaskStatus::NotStarted));
        assert_eq!(report.status("x"), Some(&TaskStatus::NotStarted));
    }

    #[test]
    fn longer_cycle_is_spelled_out() {
        let tasks = [
            Task::new("a", ["b"]),
            Task::new("b", ["c"]),
            Task::new("c", ["a"]),
        ];
        let deps = resolve(&tasks);
        let messages = cycle_messages(&tasks, &deps);
        let expected = "dependency cycle: a -> b -> c -> a";
        assert!(messages.iter().all(|m| m.as_deref() == Some(expected)));
    }

    #[test]
    fn long_chain_has_no_cycle_and_no_stack_overflow() {
        let tasks: Vec<Task> = (0..100_000)
            .map(|i| Task::new(format!("t{i}"), [format!("t{}", i + 1)]))
            .collect();
        let deps = resolve(&tasks);
        assert!(cycle_messages(&tasks, &deps).iter().all(Option::is_none));
    }

    #[test]
    fn reversed_turns_edges_around() {
        let tasks = [
            Task::new("a", NONE),
            Task::new("b", ["a", "gone"]),
            Task::new("c", ["a", "b"]),
        ];
        let back = reversed(&tasks);
        assert_eq!(
            back,
            [
                Task::new("a", ["b", "c"]),
                Task::new("b", ["c"]),
                Task::new("c", NONE),
            ]
        );
        // Turning it around twice gives the graph back (unknown ids dropped).
        let again = reversed(&back);
        assert_eq!(again[1], Task::new("b", ["a"]));
        assert_eq!(again[2], Task::new("c", ["a", "b"]));
    }

    #[tokio::test(start_paused = true)]
    async fn reversed_runs_dependents_first() {
        let tasks = [Task::new("a", NONE), Task::new("b", ["a"])];
        let sim = Sim::new();
        let runner = sim.runner(&[("a", 1, false), ("b", 1, false)]);
        let report = run(&reversed(&tasks), 4, no_stop(), runner).await;
        assert_eq!(ids(&report.completion_order), ["b", "a"]);
    }

    /// A random DAG: task `i` may depend only on tasks before it. Each entry is
    /// (duration in ms, dependency mask over the earlier tasks).
    fn dag() -> impl Strategy<Value = Vec<(u64, Vec<bool>)>> {
        prop::collection::vec(
            (1u64..=5_000, prop::collection::vec(any::<bool>(), 12)),
            1..=12,
        )
    }

    fn simulate(
        graph: &[(u64, Vec<bool>)],
        concurrency: usize,
    ) -> (Report, Log, Duration, Vec<Task>) {
        let tasks: Vec<Task> = graph
            .iter()
            .enumerate()
            .map(|(i, (_, mask))| {
                let deps = (0..i).filter(|&j| mask[j]).map(|j| format!("t{j}"));
                Task::new(format!("t{i}"), deps)
            })
            .collect();
        let spec: HashMap<String, (u64, bool)> = graph
            .iter()
            .enumerate()
            .map(|(i, (millis, _))| (format!("t{i}"), (*millis, false)))
            .collect();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        runtime.block_on(async {
            let sim = Sim::new();
            let report = run(&tasks, concurrency, no_stop(), sim.runner_millis(spec)).await;
            let wall = sim.started.elapsed();
            let log = std::mem::take(&mut *sim.log.lock().unwrap());
            (report, log, wall, tasks)
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn random_dags_respect_deps_limit_and_critical_path(
            graph in dag(),
            concurrency in 1usize..=4,
        ) {
            // Longest chain of durations ending at each task.
            let mut finish: Vec<u64> = Vec::with_capacity(graph.len());
            for (i, (millis, mask)) in graph.iter().enumerate() {
                let ready = (0..i).filter(|&j| mask[j]).map(|j| finish[j]).max().unwrap_or(0);
                finish.push(ready + millis);
            }
            let critical = Duration::from_millis(finish.iter().copied().max().unwrap_or(0));

            for limit in [concurrency, usize::MAX] {
                let (report, log, wall, tasks) = simulate(&graph, limit);
                prop_assert!(report.all_succeeded());
                prop_assert!(!report.stopped);
                prop_assert_eq!(report.completion_order.len(), tasks.len());
                prop_assert!(log.max_running <= limit);
                for task in &tasks {
                    let (start, _) = log.spans[&task.id];
                    for dep in &task.deps {
                        let (_, dep_end) = log.spans[dep];
                        prop_assert!(start >= dep_end, "{} started before {} finished", task.id, dep);
                    }
                }
                if limit == usize::MAX {
                    prop_assert_eq!(wall, critical);
                } else {
                    prop_assert!(wall >= critical);
                }
            }
        }
    }
}
