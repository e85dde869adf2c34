//! Adaptive concurrency: how many resource actions of one AWS service run at once.
//!
//! Each service has its own limit, which starts high ([`START`]) and adapts to what the
//! service says (AIMD): it is halved when a call is throttled, and grows by one for every
//! `limit` actions that end without a throttling answer. One decrease answers a whole
//! window: a throttling answer to an action that started before the last decrease does not
//! halve the limit again (those actions were sent at the old rate). A `Retry-After` pauses
//! the service: nothing new of it starts before the wait has passed. The scheduler's own
//! cap bounds all services together.
//!
//! [`Aimd`] is the pure rule for one service; [`Limits`] holds every service's, shared by
//! the phases of a run and its nested stacks.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

/// Where every service's limit starts.
pub const START: usize = 64;
/// The most a service's limit grows to.
pub const MAX_PER_SERVICE: usize = 256;
/// The cap of all resource actions at once, when the user does not pin one.
pub const GLOBAL_CAP: usize = 256;

/// A decrease of a service's limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decrease {
    /// The limit before.
    pub from: usize,
    /// The limit now.
    pub to: usize,
}

/// One service's limit (additive increase, multiplicative decrease).
#[derive(Debug, Clone, PartialEq)]
pub struct Aimd {
    limit: f64,
    max: f64,
    running: usize,
    /// When the limit was last halved: actions started before (or then) belong to that
    /// window.
    decreased_at: Option<Instant>,
    /// Nothing new starts before this (the service's `Retry-After`).
    paused_until: Option<Instant>,
}

impl Aimd {
    /// A limit of `start` (at least 1) that grows to at most `max`.
    pub fn new(start: usize, max: usize) -> Aimd {
        let max = max.max(1) as f64;
        Aimd {
            limit: (start.max(1) as f64).min(max),
            max,
            running: 0,
            decreased_at: None,
            paused_until: None,
        }
    }

    /// How many actions may run at once now.
    pub fn limit(&self) -> usize {
        // The limit never falls below 1 and grows by fractions.
        self.limit.floor() as usize
    }

    /// How many run now.
    pub fn running(&self) -> usize {
        self.running
    }

    /// Until when nothing new starts, if the service asked for a wait.
    pub fn paused_until(&self, now: Instant) -> Option<Instant> {
        self.paused_until.filter(|t| *t > now)
    }

    /// True when one more action may start at `now`.
    pub fn can_start(&self, now: Instant) -> bool {
        self.running < self.limit() && self.paused_until(now).is_none()
    }

    /// An action starts.
    pub fn start(&mut self) {
        self.running += 1;
    }

    /// An action ended; `grow`: none of its calls was throttled.
    pub fn finish(&mut self, grow: bool) {
        self.running = self.running.saturating_sub(1);
        if grow {
            self.limit = (self.limit + 1.0 / self.limit).min(self.max);
        }
    }

    /// A call of an action started at `started` was throttled at `now`; the service asked
    /// for `retry_after`. The decrease, when this answer lowered the limit.
    pub fn throttled(
        &mut self,
        now: Instant,
        started: Instant,
        retry_after: Option<Duration>,
    ) -> Option<Decrease> {
        if let Some(wait) = retry_after {
            let until = now + wait;
            self.paused_until = Some(self.paused_until.map_or(until, |t| t.max(until)));
        }
        if self.decreased_at.is_some_and(|at| started <= at) {
            return None;
        }
        let from = self.limit();
        self.limit = (self.limit / 2.0).floor().max(1.0);
        self.decreased_at = Some(now);
        let to = self.limit();
        (to < from).then_some(Decrease { from, to })
    }
}

/// Every service's limit, shared by the phases of a run (and its nested stacks).
#[derive(Debug)]
pub struct Limits {
    start: usize,
    max: usize,
    services: Mutex<BTreeMap<String, Aimd>>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits::new(START, MAX_PER_SERVICE)
    }
}

impl Limits {
    /// Limits that start at `start` and grow to `max`.
    pub fn new(start: usize, max: usize) -> Limits {
        Limits {
            start,
            max,
            services: Mutex::new(BTreeMap::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Aimd>> {
        self.services.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts an action whose calls go to `services` when every one of them has room at
    /// `now` (all or nothing). True when it started.
    pub fn try_start(&self, services: &[String], now: Instant) -> bool {
        let mut map = self.lock();
        let (start, max) = (self.start, self.max);
        let room = services.iter().all(|s| {
            map.entry(s.clone())
                .or_insert_with(|| Aimd::new(start, max))
                .can_start(now)
        });
        if room {
            for s in services {
                if let Some(aimd) = map.get_mut(s) {
                    aimd.start();
                }
            }
        }
        room
    }

    /// An action started with [`Limits::try_start`] ended; `grow`: none of its calls was
    /// throttled.
    pub fn finish(&self, services: &[String], grow: bool) {
        let mut map = self.lock();
        for s in services {
            if let Some(aimd) = map.get_mut(s) {
                aimd.finish(grow);
            }
        }
    }

    /// An action gives up its place in `service` without ending (its call was throttled:
    /// it queues with [`Limits::try_start`] before sending it again).
    pub fn release(&self, service: &str) {
        if let Some(aimd) = self.lock().get_mut(service) {
            aimd.finish(false);
        }
    }

    /// A call to `service` of an action started at `started` was throttled at `now`.
    pub fn throttled(
        &self,
        service: &str,
        now: Instant,
        started: Instant,
        retry_after: Option<Duration>,
    ) -> Option<Decrease> {
        let (start, max) = (self.start, self.max);
        self.lock()
            .entry(service.to_string())
            .or_insert_with(|| Aimd::new(start, max))
            .throttled(now, started, retry_after)
    }

    /// The earliest end of a pause of one of `services` after `now`.
    pub fn pause_end(&self, services: &[String], now: Instant) -> Option<Instant> {
        let map = self.lock();
        services
            .iter()
            .filter_map(|s| map.get(s).and_then(|a| a.paused_until(now)))
            .min()
    }

    /// Each service's limit now.
    pub fn snapshot(&self) -> BTreeMap<String, usize> {
        self.lock()
            .iter()
            .map(|(s, a)| (s.clone(), a.limit()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn starts_high_halves_on_throttling_and_grows_slowly() {
        let t0 = Instant::now();
        let mut a = Aimd::new(64, 256);
        assert_eq!(a.limit(), 64);
        let d = a.throttled(t0 + secs(1), t0, None);
        assert_eq!(d, Some(Decrease { from: 64, to: 32 }));
        // Another answer of the same window (an action started before the decrease).
        assert_eq!(a.throttled(t0 + secs(2), t0, None), None);
        assert_eq!(a.limit(), 32);
        // One of the next window halves again.
        let d = a.throttled(t0 + secs(3), t0 + secs(2), None);
        assert_eq!(d, Some(Decrease { from: 32, to: 16 }));
        // About as many actions as the limit, without throttling: one more.
        for _ in 0..17 {
            a.start();
            a.finish(true);
        }
        assert_eq!(a.limit(), 17);
        // A throttled action does not grow it.
        a.start();
        a.finish(false);
        assert_eq!(a.limit(), 17);
    }

    #[test]
    fn never_below_one_nor_above_max() {
        let t0 = Instant::now();
        let mut a = Aimd::new(4, 5);
        for i in 1..10 {
            a.throttled(t0 + secs(i), t0 + secs(i), None);
        }
        assert_eq!(a.limit(), 1);
        for _ in 0..1000 {
            a.start();
            a.finish(true);
        }
        assert_eq!(a.limit(), 5);
        assert_eq!(Aimd::new(0, 0).limit(), 1);
    }

    #[test]
    fn the_limit_bounds_running_actions_and_retry_after_pauses() {
        let t0 = Instant::now();
        let mut a = Aimd::new(2, 8);
        a.start();
        assert!(a.can_start(t0));
        a.start();
        assert!(!a.can_start(t0));
        a.finish(true);
        assert!(a.can_start(t0));
        a.throttled(t0, t0, Some(secs(5)));
        assert_eq!(a.limit(), 1);
        a.finish(false);
        assert!(!a.can_start(t0 + secs(4)));
        assert_eq!(a.paused_until(t0 + secs(4)), Some(t0 + secs(5)));
        assert!(a.can_start(t0 + secs(5)));
        // A shorter wait does not end a longer one early.
        a.throttled(t0 + secs(6), t0, Some(secs(10)));
        a.throttled(t0 + secs(7), t0, Some(secs(1)));
        assert_eq!(a.paused_until(t0 + secs(7)), Some(t0 + secs(16)));
    }

    #[test]
    fn an_action_takes_room_in_every_service_or_none() {
        let t0 = Instant::now();
        let limits = Limits::new(1, 4);
        let cc = ["cloudcontrolapi".to_string(), "events".to_string()];
        let events = ["events".to_string()];
        assert!(limits.try_start(&cc, t0));
        assert!(!limits.try_start(&events, t0));
        assert!(!limits.try_start(&cc, t0));
        // (Ending without growing: a limit of 1 stays 1.)
        limits.finish(&cc, false);
        assert!(limits.try_start(&events, t0));
        // cloudcontrolapi has room, events has none: nothing is taken.
        assert!(!limits.try_start(&cc, t0));
        limits.finish(&events, false);
        assert!(limits.try_start(&cc, t0));
        let d = limits.throttled("events", t0 + secs(1), t0, Some(secs(3)));
        assert_eq!(d, None, "a limit of 1 stays 1");
        assert_eq!(limits.pause_end(&cc, t0 + secs(1)), Some(t0 + secs(4)));
        assert_eq!(limits.snapshot()["events"], 1);
    }

    proptest! {
        /// Whatever the sequence of starts, ends and throttling answers, the limit stays
        /// within [1, max], running actions are counted exactly, and a limit only drops
        /// when it is throttled (by half, rounded down) and only grows by less than one
        /// per action ending well.
        #[test]
        fn aimd_stays_in_bounds(
            start in 0usize..300,
            max in 1usize..300,
            steps in prop::collection::vec((0u8..3, 0u64..4, any::<bool>()), 0..400),
        ) {
            let t0 = Instant::now();
            let mut a = Aimd::new(start, max);
            let mut running = 0usize;
            let mut at = t0;
            for (kind, advance, flag) in steps {
                at += Duration::from_millis(advance * 100);
                let before = a.clone();
                match kind {
                    0 if a.can_start(at) => { a.start(); running += 1; }
                    1 if running > 0 => {
                        a.finish(flag);
                        running -= 1;
                        prop_assert!(a.limit() <= before.limit() + 1);
                        if !flag { prop_assert_eq!(a.limit(), before.limit()); }
                    }
                    2 => {
                        let started = if flag { at } else { t0 };
                        match a.throttled(at, started, None) {
                            Some(d) => {
                                prop_assert_eq!(d.from, before.limit());
                                prop_assert_eq!(d.to, (before.limit() / 2).max(1));
                            }
                            None => prop_assert_eq!(a.limit(), before.limit()),
                        }
                    }
                    _ => {}
                }
                prop_assert!(a.limit() >= 1 && a.limit() <= max);
                prop_assert_eq!(a.running(), running);
            }
        }
    }
}
