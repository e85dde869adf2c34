//! Every task ends well inside Lambda's 15 minutes: an action that would run longer (a
//! Cloud Control request still in progress, a custom resource waiting for its handler's
//! answer, a nested stack) is cut at the task's deadline, and the task answers
//! `Stackflow.Again`; the state machine runs it again 5 seconds later, and that run
//! resumes the action where it stopped (its own intent, the same token: Cloud Control
//! answers with the same request, a custom resource with the same `RequestId`).
//!
//! The deadline is [`task_deadline`]: [`DEFAULT_DEADLINE`], or the seconds
//! [`TASK_DEADLINE`] names (tests use a fraction of a second).

use std::future::Future;
use std::time::Duration;

/// The variable that sets the deadline, in seconds (decimals allowed).
pub const TASK_DEADLINE: &str = "STACKFLOW_TASK_DEADLINE_SECONDS";

/// The deadline when [`TASK_DEADLINE`] is unset: 12 minutes, which leaves 3 of Lambda's
/// 15 for what follows the action (its markers, its dependents' gates, its baseline read)
/// and for a call that does not stop at once.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(12 * 60);

/// The deadline of one task's action, from `value` (the variable's text): the default
/// when it is unset, empty, not a number or not positive.
pub fn deadline_from(value: Option<&str>) -> Duration {
    value
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .map_or(DEFAULT_DEADLINE, Duration::from_secs_f64)
}

/// The deadline of one task's action: the one place that reads [`TASK_DEADLINE`].
pub fn task_deadline() -> Duration {
    deadline_from(std::env::var(TASK_DEADLINE).ok().as_deref())
}

/// Runs `work` until `deadline`: `None` when the deadline came first, and `work` was
/// dropped where it stood (as a task that dies there; the next run resumes it from the
/// event log).
pub async fn within<F: Future>(deadline: Duration, work: F) -> Option<F::Output> {
    tokio::time::timeout(deadline, work).await.ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deadline_is_twelve_minutes_unless_set() {
        assert_eq!(deadline_from(None), DEFAULT_DEADLINE);
        assert_eq!(deadline_from(Some("")), DEFAULT_DEADLINE);
        assert_eq!(deadline_from(Some("soon")), DEFAULT_DEADLINE);
        assert_eq!(deadline_from(Some("0")), DEFAULT_DEADLINE);
        assert_eq!(deadline_from(Some("-3")), DEFAULT_DEADLINE);
        assert_eq!(deadline_from(Some(" 90 ")), Duration::from_secs(90));
        assert_eq!(deadline_from(Some("0.5")), Duration::from_millis(500));
    }

    #[tokio::test]
    async fn work_past_the_deadline_is_cut() {
        let fast = within(Duration::from_secs(5), async { 7 }).await;
        assert_eq!(fast, Some(7));
        let slow = within(Duration::from_millis(10), std::future::pending::<()>()).await;
        assert_eq!(slow, None);
    }
}
