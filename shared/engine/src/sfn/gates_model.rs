//! The gates' protocol ([`super::gates`]) run against a model of Step Functions' inline
//! `Map`: a bounded number of iterations at once, started in an order the test chooses
//! (adversarial ones included), and every read and write of a marker a step of its own, so
//! that the scheduler interleaves them as concurrent Lambda invocations would. The
//! decision is the real [`decide`]; the markers, tokens and releases are modelled.
//!
//! What it proves, for random graphs, concurrencies, start orders and interleavings: the
//! protocol never deadlocks (a heartbeat re-check of every waiting gate always lets
//! something move), every action is done exactly once, a phase takes at most one round
//! more than its longest chain, and a `Map` that starts iterations in their topological
//! order needs one round. And that the model can fail: the rule before deferral (always
//! wait) deadlocks on a reversed order with one slot.

use std::collections::{BTreeSet, HashMap};

use proptest::prelude::*;

use super::gates::{Decision, Dep, decide};

/// A release's answer, as the first `SendTaskSuccess` of a token makes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Go,
    Defer,
}

/// Where one iteration is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum It {
    /// Started by the `Map`; its gate has not stored its token yet.
    Starting { recheck: bool },
    /// Its gate reads its dependencies, one a step.
    Reading { recheck: bool, read: Vec<Dep> },
    /// Its token waits for a release.
    Waiting,
    /// Its action runs; the next step writes `done`.
    Acting,
    /// `done` written: it releases its dependents, one a step (index into them).
    Opening(usize),
    /// Deferred: the next step writes its marker.
    Deferring,
    /// Marker written: it releases its waiting dependents as deferred, one a step.
    Cascading(usize),
    /// Ended (its slot is free).
    Ended,
}

/// The rule a gate follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    /// [`decide`].
    Deferral,
    /// Before deferral: wait until every dependency is done.
    AlwaysWait,
}

struct Round<'a> {
    deps: &'a [Vec<usize>],
    dependents: &'a [Vec<usize>],
    rule: Rule,
    done: &'a mut BTreeSet<usize>,
    /// The round's items in the order the `Map` starts them.
    order: Vec<usize>,
    concurrency: usize,
    started: usize,
    its: HashMap<usize, It>,
    /// Stored tokens of this round (begun), and each token's first answer.
    begun: BTreeSet<usize>,
    answers: HashMap<usize, Answer>,
    deferred: BTreeSet<usize>,
    done_count: HashMap<usize, usize>,
}

/// How a round ended.
#[derive(Debug, PartialEq, Eq)]
enum Ending {
    Ended,
    Deadlock,
}

impl Round<'_> {
    fn running(&self) -> usize {
        self.its.values().filter(|i| **i != It::Ended).count()
    }

    fn dep_state(&self, d: usize) -> Dep {
        if self.done.contains(&d) {
            Dep::Done
        } else if self.deferred.contains(&d) {
            Dep::Deferred
        } else if self.begun.contains(&d) {
            Dep::Begun
        } else {
            Dep::NotBegun
        }
    }

    fn decide(&self, read: &[Dep], recheck: bool) -> Decision {
        match self.rule {
            Rule::Deferral => decide(read, recheck),
            Rule::AlwaysWait if read.iter().all(|d| *d == Dep::Done) => Decision::Go,
            Rule::AlwaysWait => Decision::Wait,
        }
    }

    fn release(&mut self, id: usize, a: Answer) {
        if self.begun.contains(&id) {
            self.answers.entry(id).or_insert(a);
        }
    }

    /// The steps that can run now, besides heartbeats: `None` starts the `Map`'s next
    /// iteration.
    fn enabled(&self) -> Vec<Option<usize>> {
        let mut out: Vec<Option<usize>> = self
            .its
            .iter()
            .filter(|(id, it)| match it {
                It::Ended => false,
                It::Waiting => self.answers.contains_key(id),
                _ => true,
            })
            .map(|(id, _)| Some(*id))
            .collect();
        out.sort();
        if self.started < self.order.len() && self.running() < self.concurrency {
            out.push(None);
        }
        out
    }

    /// Runs one step of iteration `id`.
    fn step(&mut self, id: usize) {
        let it = self.its[&id].clone();
        let next = match it {
            It::Starting { recheck } => {
                self.begun.insert(id);
                It::Reading {
                    recheck,
                    read: Vec::new(),
                }
            }
            It::Reading { recheck, mut read } => {
                let deps = &self.deps[id];
                if read.len() < deps.len() && self.decide(&read, recheck) != Decision::Defer {
                    read.push(self.dep_state(deps[read.len()]));
                    It::Reading { recheck, read }
                } else {
                    match self.decide(&read, recheck) {
                        Decision::Go => self.release(id, Answer::Go),
                        Decision::Defer => self.release(id, Answer::Defer),
                        Decision::Wait => {}
                    }
                    It::Waiting
                }
            }
            It::Waiting => match self.answers[&id] {
                Answer::Go => It::Acting,
                Answer::Defer => It::Deferring,
            },
            It::Acting => {
                self.done.insert(id);
                *self.done_count.entry(id).or_default() += 1;
                It::Opening(0)
            }
            It::Opening(k) => match self.dependents[id].get(k).copied() {
                Some(w) => {
                    if self.begun.contains(&w) && self.deps[w].iter().all(|d| self.done.contains(d))
                    {
                        self.release(w, Answer::Go);
                    }
                    It::Opening(k + 1)
                }
                None => It::Ended,
            },
            It::Deferring => {
                self.deferred.insert(id);
                It::Cascading(0)
            }
            It::Cascading(k) => match self.dependents[id].get(k).copied() {
                Some(w) => {
                    self.release(w, Answer::Defer);
                    It::Cascading(k + 1)
                }
                None => It::Ended,
            },
            It::Ended => It::Ended,
        };
        self.its.insert(id, next);
    }

    /// A heartbeat: every gate that waits without an answer is run again (a new token
    /// over the old one, which nobody answered).
    fn heartbeat(&mut self) {
        let waiting: Vec<usize> = self
            .its
            .iter()
            .filter(|(id, it)| **it == It::Waiting && !self.answers.contains_key(id))
            .map(|(id, _)| *id)
            .collect();
        for id in waiting {
            self.its.insert(id, It::Starting { recheck: true });
        }
    }

    /// What has moved: actions done and deferred, iterations started and ended, answers.
    fn progress(&self) -> [usize; 5] {
        let ended = self.its.values().filter(|i| **i == It::Ended).count();
        [
            self.done.len(),
            self.deferred.len(),
            self.started,
            ended,
            self.answers.len(),
        ]
    }

    /// Runs the round with `pick` choosing among the enabled steps.
    fn run(&mut self, pick: &mut impl FnMut(usize) -> usize) -> Ending {
        let mut idle_beats = 0;
        let mut last = self.progress();
        loop {
            let enabled = self.enabled();
            if enabled.is_empty() {
                if self.running() == 0 && self.started == self.order.len() {
                    return Ending::Ended;
                }
                // Only waiting gates are left: their heartbeat re-checks them. Three
                // heartbeats in a row after which nothing moved are a deadlock (the first
                // turns first looks into re-checks).
                let now = self.progress();
                if now == last {
                    idle_beats += 1;
                    if idle_beats > 2 {
                        return Ending::Deadlock;
                    }
                } else {
                    (idle_beats, last) = (0, now);
                }
                self.heartbeat();
                continue;
            }
            match enabled[pick(enabled.len())] {
                Some(id) => self.step(id),
                None => {
                    let id = self.order[self.started];
                    self.started += 1;
                    self.its.insert(id, It::Starting { recheck: false });
                }
            }
        }
    }
}

/// How the `Map` orders a round's items (which are in topological order).
#[derive(Debug, Clone, Copy)]
enum Order {
    Topological,
    Reversed,
    /// A permutation from the seed.
    Shuffled,
}

/// What running a phase did.
#[derive(Debug)]
struct Phase {
    ending: Ending,
    rounds: usize,
    done_count: HashMap<usize, usize>,
}

/// A tiny deterministic generator for the scheduler's picks and the shuffles.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n.max(1) as u64) as usize
    }
}

/// Runs every round of a phase whose action `i` depends on `deps[i]` (all lower).
fn phase(deps: &[Vec<usize>], concurrency: usize, order: Order, rule: Rule, seed: u64) -> Phase {
    let n = deps.len();
    let mut dependents = vec![Vec::new(); n];
    for (i, ds) in deps.iter().enumerate() {
        for &d in ds {
            dependents[d].push(i);
        }
    }
    let mut rng = Rng(seed | 1);
    let mut done = BTreeSet::new();
    let mut done_count: HashMap<usize, usize> = HashMap::new();
    let mut rounds = 0;
    loop {
        let mut items: Vec<usize> = (0..n).filter(|i| !done.contains(i)).collect();
        if items.is_empty() {
            return Phase {
                ending: Ending::Ended,
                rounds,
                done_count,
            };
        }
        rounds += 1;
        match order {
            Order::Topological => {}
            Order::Reversed => items.reverse(),
            Order::Shuffled => {
                for i in (1..items.len()).rev() {
                    items.swap(i, rng.below(i + 1));
                }
            }
        }
        let mut round = Round {
            deps,
            dependents: &dependents,
            rule,
            done: &mut done,
            order: items,
            concurrency,
            started: 0,
            its: HashMap::new(),
            begun: BTreeSet::new(),
            answers: HashMap::new(),
            deferred: BTreeSet::new(),
            done_count: HashMap::new(),
        };
        let ending = round.run(&mut |k| rng.below(k));
        for (id, c) in round.done_count {
            *done_count.entry(id).or_default() += c;
        }
        if ending == Ending::Deadlock {
            return Phase {
                ending,
                rounds,
                done_count,
            };
        }
    }
}

/// The number of actions on the longest chain of dependencies.
fn depth(deps: &[Vec<usize>]) -> usize {
    let mut d = vec![1; deps.len()];
    for i in 0..deps.len() {
        for &p in &deps[i] {
            d[i] = d[i].max(d[p] + 1);
        }
    }
    d.into_iter().max().unwrap_or(0)
}

/// A random graph: each action depends on some of the ones before it.
fn graph() -> impl Strategy<Value = Vec<Vec<usize>>> {
    (1usize..24).prop_flat_map(|n| {
        proptest::collection::vec(proptest::collection::vec(any::<bool>(), n), n).prop_map(
            move |bits| {
                (0..n)
                    .map(|i| (0..i).filter(|&j| bits[i][j] && (i - j) < 5).collect())
                    .collect()
            },
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Any start order, any interleaving: no deadlock, each action done once, rounds
    /// bounded by the longest chain.
    #[test]
    fn decide_never_deadlocks(
        deps in graph(),
        concurrency in 1usize..6,
        seed in any::<u64>(),
        which in 0usize..3,
    ) {
        let order = [Order::Topological, Order::Reversed, Order::Shuffled][which];
        let run = phase(&deps, concurrency, order, Rule::Deferral, seed);
        prop_assert_eq!(run.ending, Ending::Ended, "{:?}", order);
        for i in 0..deps.len() {
            prop_assert_eq!(run.done_count.get(&i).copied(), Some(1), "action {}", i);
        }
        prop_assert!(run.rounds <= depth(&deps) + 1, "{} rounds, depth {}", run.rounds, depth(&deps));
    }

    /// A `Map` that starts its iterations in their order defers nothing.
    #[test]
    fn in_order_starts_take_one_round(
        deps in graph(),
        concurrency in 1usize..6,
        seed in any::<u64>(),
    ) {
        let run = phase(&deps, concurrency, Order::Topological, Rule::Deferral, seed);
        prop_assert_eq!(run.ending, Ending::Ended);
        prop_assert_eq!(run.rounds, 1);
    }
}

/// The model finds the deadlock deferral removes: one slot, a chain started last first.
#[test]
fn waiting_without_deferral_deadlocks_on_a_reversed_order() {
    let chain = vec![vec![], vec![0], vec![1]];
    let old = phase(&chain, 1, Order::Reversed, Rule::AlwaysWait, 7);
    assert_eq!(old.ending, Ending::Deadlock);
    let new = phase(&chain, 1, Order::Reversed, Rule::Deferral, 7);
    assert_eq!(new.ending, Ending::Ended);
    assert_eq!(new.rounds, 3, "one link of the chain a round");
}
