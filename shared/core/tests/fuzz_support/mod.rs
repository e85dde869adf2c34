//! A time-bounded driver for the bad-input property tests (the `fuzz_*` targets).
//!
//! A normal `cargo test` runs a few hundred cases per target. With
//! `STACKFLOW_FUZZ_SECONDS=600` each target keeps generating new cases for that many
//! seconds instead, in batches with fresh seeds. Every case runs on its own thread with
//! the stack a Rust or tokio thread gets: a panic or a stack overflow is a failure, a
//! case slower than [`SLOW`] fails, and one that runs past [`HANG`] is reported with its
//! input and stops the process (a thread cannot be stopped from outside).
//!
//! The events crate's decode target uses this file too (by `#[path]`).

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};

/// The stack each case runs on.
const STACK: usize = 2 * 1024 * 1024;
/// A case that takes longer fails.
const SLOW: Duration = Duration::from_secs(10);
/// A case that takes longer is a hang.
const HANG: Duration = Duration::from_secs(60);
/// Cases per batch in a timed run (the time is checked between batches).
const BATCH: u32 = 64;

/// How many seconds to fuzz each target for, when asked to.
fn seconds() -> Option<u64> {
    std::env::var("STACKFLOW_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .filter(|s| *s > 0)
}

/// How many cases a normal run makes: `PROPTEST_CASES` or `cases`.
fn normal_cases(cases: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(cases)
}

/// `text` cut to a readable length.
pub fn shown(text: &str) -> String {
    const MAX: usize = 4000;
    if text.len() <= MAX {
        return text.to_string();
    }
    let mut end = MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{} … ({} bytes in all)", &text[..end], text.len())
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a panic".to_string())
}

/// What a check gives: how the case ended (`Ok`, a label such as `planned` or
/// `error: syntax`, counted in the summary), or what is wrong (`Err`).
pub type Outcome = Result<String, String>;

/// Runs `check` on one input on its own thread, within the time limits.
fn one<T: Debug + Send + 'static>(
    name: &str,
    input: T,
    check: fn(&T) -> Outcome,
) -> Result<(String, Duration), String> {
    let shown_input = format!("{input:?}");
    let (tx, rx) = mpsc::channel();
    let start = Instant::now();
    let worker = std::thread::Builder::new()
        .stack_size(STACK)
        .spawn(move || {
            let r = check(&input);
            let _ = tx.send(());
            r
        })
        .map_err(|e| format!("cannot start a thread: {e}"))?;
    if let Err(RecvTimeoutError::Timeout) = rx.recv_timeout(HANG) {
        eprintln!(
            "fuzz {name}: a case has run for more than {HANG:?}, a hang; its input:\n{}",
            shown(&shown_input)
        );
        std::process::abort();
    }
    let took = start.elapsed();
    match worker.join() {
        Err(payload) => Err(format!("panicked: {}", panic_message(&*payload))),
        Ok(Err(problem)) => Err(problem),
        Ok(Ok(_)) if took > SLOW => Err(format!("took {took:?}, more than {SLOW:?}")),
        Ok(Ok(label)) => Ok((label, took)),
    }
}

/// Runs `check` on inputs from `strategy` (see the module's documentation) and panics
/// with the smallest failing input found. Prints how many cases ran.
pub fn fuzz<S>(name: &str, cases: u32, strategy: S, check: fn(&S::Value) -> Outcome)
where
    S: Strategy,
    S::Value: Debug + Send + 'static,
{
    let ran = AtomicU64::new(0);
    let outcomes: Mutex<BTreeMap<String, u64>> = Mutex::new(BTreeMap::new());
    let slowest = Mutex::new(Duration::ZERO);
    let start = Instant::now();
    let deadline = seconds().map(|s| start + Duration::from_secs(s));
    loop {
        let config = Config {
            cases: if deadline.is_some() {
                BATCH
            } else {
                normal_cases(cases)
            },
            failure_persistence: None,
            max_shrink_time: 60_000,
            ..Config::default()
        };
        let mut runner = TestRunner::new(config);
        let result = runner.run(&strategy, |input| {
            let (label, took) = one(name, input, check).map_err(TestCaseError::fail)?;
            ran.fetch_add(1, Ordering::Relaxed);
            *outcomes.lock().unwrap().entry(label).or_default() += 1;
            let mut s = slowest.lock().unwrap();
            *s = (*s).max(took);
            Ok(())
        });
        match result {
            Ok(()) => {}
            Err(TestError::Fail(reason, input)) => panic!(
                "fuzz {name}: {reason}\nthe smallest failing input:\n{}",
                shown(&format!("{input:?}"))
            ),
            Err(e) => panic!("fuzz {name}: {e}"),
        }
        if deadline.is_none_or(|d| Instant::now() >= d) {
            break;
        }
    }
    let outcomes: Vec<String> = outcomes
        .into_inner()
        .unwrap()
        .into_iter()
        .map(|(label, n)| format!("{label}: {n}"))
        .collect();
    eprintln!(
        "fuzz {name}: {} cases in {:.1} s, slowest case {:.1} ms; {}",
        ran.load(Ordering::Relaxed),
        start.elapsed().as_secs_f64(),
        slowest.lock().unwrap().as_secs_f64() * 1e3,
        outcomes.join(", ")
    );
}
