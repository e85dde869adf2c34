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

fn simulate(graph: &[(u64, Vec<bool>)], concurrency: usize) -> (Report, Log, Duration, Vec<Task>) {
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

/// A gate that lets at most `per_kind` tasks of one kind (the id's first letter) run
/// at once, and records what it saw.
#[derive(Default)]
struct KindGate {
    per_kind: usize,
    state: Mutex<(HashMap<char, usize>, usize, Vec<String>)>,
}

impl Gate for KindGate {
    fn try_start(&self, id: &str) -> bool {
        let kind = id.chars().next().unwrap();
        let mut state = self.state.lock().unwrap();
        let running = state.0.entry(kind).or_default();
        if *running >= self.per_kind {
            state.1 += 1;
            return false;
        }
        *running += 1;
        true
    }

    fn finished(&self, id: &str, _: &Outcome) {
        let kind = id.chars().next().unwrap();
        let mut state = self.state.lock().unwrap();
        *state.0.get_mut(&kind).unwrap() -= 1;
        state.2.push(id.to_owned());
    }
}

#[tokio::test(start_paused = true)]
async fn a_gate_limits_each_kind_without_blocking_the_others() {
    // Four `a` tasks first in the list, then two `b`: with two `a` at once, the `b`
    // tasks start at once beside them instead of waiting behind the refused `a`s.
    let names = ["a1", "a2", "a3", "a4", "b1", "b2"];
    let tasks: Vec<Task> = names.iter().map(|id| Task::new(*id, NONE)).collect();
    let spec: Vec<(&str, u64, bool)> = names.iter().map(|id| (*id, 1, false)).collect();
    let sim = Sim::new();
    let gate = KindGate {
        per_kind: 2,
        ..KindGate::default()
    };
    let report = run_gated(&tasks, 10, &gate, no_stop(), sim.runner(&spec)).await;
    assert!(report.all_succeeded());
    assert_eq!(sim.span("b1"), (0, 1));
    assert_eq!(sim.span("b2"), (0, 1));
    assert_eq!(sim.span("a3"), (1, 2));
    assert_eq!(sim.max_running(), 4);
    assert_eq!(sim.started.elapsed(), Duration::from_secs(2));
    let state = gate.state.lock().unwrap();
    assert!(state.1 > 0, "the gate refused some");
    assert_eq!(state.2.len(), 6, "every started task was told finished");
    assert!(state.0.values().all(|&n| n == 0));
}

#[tokio::test(start_paused = true)]
async fn a_refused_task_is_offered_again_when_room_is_freed_elsewhere() {
    // The gate refuses everything until another party frees room after 5 s, with
    // nothing of this run running meanwhile.
    struct Later(Instant);
    impl Gate for Later {
        fn try_start(&self, _: &str) -> bool {
            Instant::now() >= self.0
        }
        fn finished(&self, _: &str, _: &Outcome) {}
    }
    let tasks = [Task::new("a", NONE)];
    let sim = Sim::new();
    let gate = Later(Instant::now() + Duration::from_secs(5));
    let report = run_gated(&tasks, 4, &gate, no_stop(), sim.runner(&[("a", 1, false)])).await;
    assert!(report.all_succeeded());
    let (start, _) = sim.log.lock().unwrap().spans["a"];
    assert!(start >= Duration::from_secs(5) && start <= Duration::from_millis(5_050));
}
