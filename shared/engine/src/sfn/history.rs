//! Step Functions' history limit: a Standard execution fails outright at 25,000 history
//! events, with no `Catch` (neither Fail nor Release runs: the lock stays held, nothing is
//! rolled back). A deploy is one execution whose inline `Map` writes every iteration into
//! its history, so what a deploy may do within one execution is bounded, and this module
//! knows by how much.
//!
//! [`EventCost`] counts the events each kind of state writes (AWS's history event types)
//! and [`per_action`] what one action of the `Map` costs; [`HistoryGuard`] is what the gate
//! does with it: every few iterations it reads how many events the execution has
//! (`GetExecutionHistory`, newest first, one event: event ids count from 1), and once that
//! passes the guard's limit, it stops the deploy as a failed action does (the `failed`
//! marker, with why; waiting gates released as "stop"), so the execution ends through
//! Fail (rollback) and releases the lock, with the rest of the history for that.

/// AWS's limit on one execution's history.
pub const HISTORY_LIMIT: u64 = 25_000;

/// The events each kind of state writes in an execution's history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventCost {
    /// A task calling a Lambda function directly: `TaskStateEntered`,
    /// `LambdaFunctionScheduled`, `LambdaFunctionStarted`, `LambdaFunctionSucceeded`,
    /// `TaskStateExited`.
    pub task: u64,
    /// Each retry of such a task: the failure, `LambdaFunctionScheduled`,
    /// `LambdaFunctionStarted`.
    pub task_retry: u64,
    /// A callback task (`.waitForTaskToken`): `TaskStateEntered`, `TaskScheduled`,
    /// `TaskStarted`, `TaskSubmitted`, `TaskSucceeded`, `TaskStateExited`.
    pub callback: u64,
    /// Each re-check of a callback at its heartbeat: `TaskTimedOut`, `TaskScheduled`,
    /// `TaskStarted`, `TaskSubmitted`.
    pub callback_retry: u64,
    /// One `Map` iteration: `MapIterationStarted`, `MapIterationSucceeded`.
    pub iteration: u64,
    /// A `Map`, a `Choice`, a `Wait` or a `Succeed`/`Fail` state: entered and exited (a
    /// `Map` also started and succeeded).
    pub map: u64,
    /// A pass-through state (`Choice`, `Wait`): entered and exited.
    pub passing: u64,
}

/// AWS's event types, counted.
pub const COST: EventCost = EventCost {
    task: 5,
    task_retry: 3,
    callback: 6,
    callback_retry: 4,
    iteration: 2,
    map: 4,
    passing: 2,
};

/// What one action of a deploy's `Map` writes: its iteration, its gate (re-checked
/// `gate_rechecks` times) and its task (retried `retries` times: `Stackflow.Again` at a
/// deadline, a transient error).
pub fn per_action(cost: EventCost, gate_rechecks: u64, retries: u64) -> u64 {
    cost.iteration
        + cost.callback
        + cost.callback_retry * gate_rechecks
        + cost.task
        + cost.task_retry * retries
}

/// What a deploy writes besides its actions, at most: the execution's start and end,
/// Plan, the choices, both `Map`s, Conclude, Finish.
pub fn fixed(cost: EventCost) -> u64 {
    2 + 3 * cost.task + 2 * cost.map + 3 * cost.passing
}

/// What a deploy's execution writes for each part it runs in an execution of its own
/// ([`HistoryGuard::part_actions`]): the `Part` task, the `Choice` that loops back to it,
/// and one retry of the task each time its deadline comes while the part runs
/// (`Stackflow.Again`).
pub fn per_part(cost: EventCost, agains: u64) -> u64 {
    cost.passing + cost.task + cost.task_retry * agains
}

/// What a deploy's execution writes when actions its own `Map` deferred run as a part
/// (`super::gates`): the part ([`per_part`], its task retried `agains` times at its
/// deadline), and the task after the `Map` (Conclude or Finish) and its `Choice` once more.
pub fn again(cost: EventCost, agains: u64) -> u64 {
    per_part(cost, agains) + cost.task + cost.passing
}

/// The most parts one deploy may have: 200 (180,000 actions in parts of 900), which the
/// deploy's own execution holds with each part's task retried 20 times at its deadline
/// (4 hours a part; [`per_part`]).
pub const MOST_PARTS: u64 = 200;

/// What Plan and the gates do with the history: a plan of more than `part_actions`
/// actions runs its phases in parts of at most that many, each part an execution of its
/// own (`infra/README.md`, "Deploys larger than one execution"); Plan refuses a plan of
/// more than `most_actions` actions before anything is made; the gates read the length of
/// their execution's history every `check_every` iterations (by the iteration's index), and
/// stop the deploy once it passes `stop_at` (retries and re-checks the plan could not
/// count).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryGuard {
    /// The length past which the deploy stops.
    pub stop_at: u64,
    /// Every how many iterations a gate reads the length.
    pub check_every: u64,
    /// The most actions a plan may have.
    pub most_actions: u64,
    /// The most actions one execution runs: a phase of more runs in parts.
    pub part_actions: u64,
}

impl Default for HistoryGuard {
    /// Stops at 20,000 events, read every 25 iterations: what the iterations started
    /// since the last read write (at most 25 more, and the 40 running), then Fail (its
    /// waits for late calls, its rollback across invocations) and Release fit in the
    /// 5,000 left ([`HistoryGuard::headroom`]).
    /// A part holds what runs within that with a gate re-check and a retry each, rounded
    /// down to a hundred (900); a plan may have [`MOST_PARTS`] parts.
    fn default() -> Self {
        let mut guard = HistoryGuard {
            stop_at: 20_000,
            check_every: 25,
            most_actions: 0,
            part_actions: 0,
        };
        guard.part_actions = guard.actions(COST, 1, 1) / 100 * 100;
        guard.most_actions = guard.part_actions * MOST_PARTS;
        guard
    }
}

/// The variable that makes parts smaller than [`HistoryGuard::part_actions`]'s default
/// (tests that run parts on small stacks); a larger number than the default is not taken.
pub const PART_ACTIONS: &str = "STACKFLOW_PART_ACTIONS";

impl HistoryGuard {
    /// The default guard, with parts of the actions `value` (the [`PART_ACTIONS`]
    /// variable's text) names, when it is a number from 1 to the default.
    pub fn with_part_actions(value: Option<&str>) -> HistoryGuard {
        let guard = HistoryGuard::default();
        match value.and_then(|v| v.trim().parse::<u64>().ok()) {
            Some(n) if (1..=guard.part_actions).contains(&n) => HistoryGuard {
                part_actions: n,
                ..guard
            },
            _ => guard,
        }
    }

    /// The guard of a Lambda task: the one place that reads [`PART_ACTIONS`].
    pub fn from_env() -> HistoryGuard {
        HistoryGuard::with_part_actions(std::env::var(PART_ACTIONS).ok().as_deref())
    }

    /// Whether the gate of iteration `index` reads the history.
    pub fn checks(self, index: u64) -> bool {
        index.is_multiple_of(self.check_every.max(1))
    }

    /// The events left for what follows the stop, before AWS's limit.
    pub fn headroom(self) -> u64 {
        HISTORY_LIMIT.saturating_sub(self.stop_at)
    }

    /// How many actions (each with `gate_rechecks` and `retries`) one execution can run
    /// before the guard stops it.
    pub fn actions(self, cost: EventCost, gate_rechecks: u64, retries: u64) -> u64 {
        self.stop_at.saturating_sub(fixed(cost)) / per_action(cost, gate_rechecks, retries)
    }

    /// Why the deploy stopped, for its `DeployFailed`.
    pub fn reason(self, events: u64, index: u64, phase: &str) -> String {
        format!(
            "the deploy stopped before Step Functions' limit of {HISTORY_LIMIT} history \
             events per execution: its execution had {events} events when the {phase} \
             iteration {index} began (the guard stops at {}); deploy the stack in smaller \
             parts (a nested stack or a second stack), then deploy again",
            self.stop_at
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One action as the README counts it: 13 events; a deploy's fixed part is small.
    #[test]
    fn an_action_writes_thirteen_events() {
        assert_eq!(per_action(COST, 0, 0), 13);
        assert!(fixed(COST) < 40, "{}", fixed(COST));
    }

    /// The budget of a 10,000-action deploy: one execution cannot hold it (130,000
    /// events and more), so it runs in parts of 900 actions, each an execution whose
    /// history holds its part with a gate re-check and a retry each, under the guard; the
    /// deploy's own execution holds the parts' iterations. If a part still runs out (more
    /// retries than that), the guard stops it early enough for Fail and Release: with no
    /// retry 1,536 actions run in one execution; with a gate re-check and a retry each, 998.
    #[test]
    fn the_budget_of_ten_thousand_actions() {
        let guard = HistoryGuard::default();
        let need = fixed(COST) + 10_000 * per_action(COST, 0, 0);
        assert!(need > HISTORY_LIMIT * 5, "{need}");
        assert_eq!(guard.part_actions, 900);
        let parts = 10_000u64.div_ceil(guard.part_actions);
        assert_eq!(parts, 12);
        // A part's execution: its start and end, the Choice that enters its Map, the Map,
        // its Succeed, and 900 actions each re-checked and retried once.
        let part = 2 + 2 * COST.passing + COST.map + guard.part_actions * per_action(COST, 1, 1);
        assert_eq!(part, 18_010);
        assert!(part < guard.stop_at, "{part}");
        // The deploy's own execution: its fixed part, the parts of both phases (a
        // replacement has a delete too), each part's task retried at its deadline for a
        // day (12 minutes each: 120 retries), then Fail and Release.
        let parent = fixed(COST) + 2 * COST.passing + 2 * parts * per_part(COST, 120);
        assert_eq!(parent, 8_843);
        // A deploy's own execution runs at most 900 actions of both phases in its `Map`s;
        // with what each phase's deferred actions add (a part waited on for a day), it
        // stays under the guard.
        let inline =
            fixed(COST) + guard.part_actions * per_action(COST, 1, 1) + 2 * again(COST, 120);
        assert_eq!(inline, 18_779);
        assert!(inline < guard.stop_at, "{inline}");
        // The most parts a plan may have fit the same way.
        assert!(fixed(COST) + MOST_PARTS * per_part(COST, 20) < guard.stop_at);
        assert_eq!(guard.most_actions, 180_000);
        assert_eq!(guard.actions(COST, 0, 0), 1_536);
        assert_eq!(guard.actions(COST, 1, 1), 998);
        // What may still come after the stop: the iterations begun since the last read
        // (check_every) and the 40 running, each with a re-check and three retries, and
        // Fail: 100 waits for late calls (a Choice and a Wait each) and 200 invocations
        // (each a retry), then Release.
        let after = (guard.check_every + 40) * per_action(COST, 1, 3)
            + 100 * 2 * COST.passing
            + 200 * COST.task_retry
            + 2 * COST.task
            + COST.map;
        assert!(after < guard.headroom(), "{after} of {}", guard.headroom());
    }

    #[test]
    fn parts_are_made_smaller_never_larger() {
        assert_eq!(
            HistoryGuard::with_part_actions(None),
            HistoryGuard::default()
        );
        assert_eq!(
            HistoryGuard::with_part_actions(Some(" 250 ")).part_actions,
            250
        );
        for other in ["0", "901", "many", ""] {
            let guard = HistoryGuard::with_part_actions(Some(other));
            assert_eq!(guard.part_actions, 900, "{other}");
        }
    }

    #[test]
    fn gates_read_the_length_every_few_iterations() {
        let guard = HistoryGuard::default();
        assert!(guard.checks(0) && guard.checks(25) && !guard.checks(26));
        let every = HistoryGuard {
            stop_at: 10,
            check_every: 0,
            most_actions: 1,
            part_actions: 1,
        };
        assert!(every.checks(7), "0 reads at every iteration");
        let why = guard.reason(20_013, 1_550, "provision");
        assert!(why.contains("25000") && why.contains("20013") && why.contains("smaller"));
    }
}
