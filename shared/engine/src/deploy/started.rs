//! Calls that a failed deploy's stopped iterations may still be making.
//!
//! On Step Functions, a `Map` whose iteration failed for good stops its other iterations,
//! but their Lambda invocations run on to their end and may still create resources. Before
//! the deploy is failed and undone, [`Deployment::settle_started`] looks at this deploy's
//! intents without an outcome: while one is younger than a task's longest run
//! ([`TASK_BOUND`]) its call may still be running, and the caller waits; after that it is
//! an interrupted call, replayed now (with its own token) so that what it made is recorded,
//! and undone by the rollback with the rest.

use std::time::{Duration, SystemTime};

use stackflow_events::event::{Event, Operation};
use stackflow_events::projection::{PendingIntent, StackState};
use stackflow_events::{EventStore, Precondition};

use super::Deployment;
use crate::engine::EngineError;
use crate::keys::{RunEvent, run_key};
use crate::reconcile::reconcile_one;

/// How long a call may still run after its intent was recorded: Lambda's 15 minutes, and
/// a minute for clocks that disagree.
pub const TASK_BOUND: Duration = Duration::from_secs(15 * 60 + 60);

/// The intents of deploy `deploy_id` without an outcome that were recorded less than
/// `bound` before `now`: calls whose task may still be running. An intent without a time
/// (recorded before intents kept one) or with one that does not parse is not counted, nor
/// an undo: the deploy's rollback runs inside Fail only, so an undo without an outcome is
/// one a Fail cut at its deadline dropped, which the rollback resumes (never a call still
/// running beside it).
pub fn running_intents<'a>(
    state: &'a StackState,
    deploy_id: &str,
    now: SystemTime,
    bound: Duration,
) -> Vec<&'a PendingIntent> {
    state
        .pending
        .values()
        .filter(|p| p.deploy_id == deploy_id && p.operation != Operation::Undo)
        .filter(|p| {
            let Some(at) = p.at.as_deref() else {
                return false;
            };
            let Ok(at) = humantime::parse_rfc3339(at) else {
                return false;
            };
            // An intent stamped after `now` (a clock ahead) is as young as can be.
            match now.duration_since(at) {
                Ok(age) => age < bound,
                Err(_) => true,
            }
        })
        .collect()
}

/// What [`Deployment::settle_started`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Started {
    /// Calls of these resources may still be running: wait and look again.
    Running(Vec<String>),
    /// No call of this deploy is running any more; this many interrupted ones were
    /// settled.
    Settled(usize),
}

impl<S: EventStore + 'static> Deployment<S> {
    /// Fences this deploy's lock (`ActionsFenced`): from now on no provision action of it
    /// begins ([`Deployment::fenced_by_lock`]), so [`Deployment::settle_started`] sees
    /// every intent there will be. A second fence (a retried Fail) changes nothing.
    pub async fn fence(&self) -> Result<(), EngineError> {
        self.recorder
            .append(
                run_key(&self.deploy_id, RunEvent::Fenced),
                Event::ActionsFenced {
                    deploy_id: self.deploy_id.clone(),
                },
                &Precondition::FenceLock(self.deploy_id.clone()),
            )
            .await?;
        Ok(())
    }

    /// Looks at this deploy's intents without an outcome, as of `now`: while one is
    /// younger than `bound` its call may still be running ([`Started::Running`]);
    /// otherwise each one is settled (replayed with its own token, as the next deploy's
    /// reconciliation would), so that the rollback undoes what it made.
    pub async fn settle_started(
        &self,
        now: SystemTime,
        bound: Duration,
    ) -> Result<Started, EngineError> {
        self.recorder.reload().await?;
        let running: Vec<String> = {
            let state = self.recorder.state();
            running_intents(&state, &self.deploy_id, now, bound)
                .into_iter()
                .map(|p| p.logical_id.clone())
                .collect()
        };
        if !running.is_empty() {
            return Ok(Started::Running(running));
        }
        let pending: Vec<PendingIntent> = self
            .recorder
            .state()
            .pending
            .values()
            .filter(|p| p.deploy_id == self.deploy_id)
            .cloned()
            .collect();
        let pre = self.holds();
        for p in &pending {
            reconcile_one(&self.engine, &self.recorder, &pre, p, Some(self)).await?;
        }
        Ok(Started::Settled(pending.len()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stackflow_events::event::ProviderKind;

    fn intent(deploy_id: &str, id: &str, at: Option<&str>) -> PendingIntent {
        PendingIntent {
            deploy_id: deploy_id.into(),
            logical_id: id.into(),
            resource_type: "AWS::SQS::Queue".into(),
            operation: Operation::Create,
            token: format!("{deploy_id}/{id}"),
            provider: ProviderKind::CloudControl,
            physical_id: None,
            properties: None,
            seq: 1,
            at: at.map(String::from),
        }
    }

    #[test]
    fn only_this_deploys_young_intents_count_as_running() {
        let mut state = StackState::default();
        for p in [
            intent("d-1", "Young", Some("2026-03-01T10:14:00.000Z")),
            intent("d-1", "Old", Some("2026-03-01T09:50:00.000Z")),
            intent("d-1", "Untimed", None),
            intent("d-1", "Ahead", Some("2026-03-01T10:20:00Z")),
            intent("d-0", "Other", Some("2026-03-01T10:14:00.000Z")),
            PendingIntent {
                operation: Operation::Undo,
                ..intent("d-1", "Undoing", Some("2026-03-01T10:14:00.000Z"))
            },
        ] {
            state.pending.insert(p.logical_id.clone(), p);
        }
        let now = humantime::parse_rfc3339("2026-03-01T10:15:00Z").unwrap();
        let ids: Vec<&str> = running_intents(&state, "d-1", now, TASK_BOUND)
            .iter()
            .map(|p| p.logical_id.as_str())
            .collect();
        assert_eq!(ids, ["Young", "Ahead"]);
        // 16 minutes later the young one is past any task's end.
        let later = now + Duration::from_secs(16 * 60);
        let ids: Vec<&str> = running_intents(&state, "d-1", later, TASK_BOUND)
            .iter()
            .map(|p| p.logical_id.as_str())
            .collect();
        assert_eq!(ids, ["Ahead"]);
        assert!(running_intents(&state, "d-1", later + TASK_BOUND, TASK_BOUND).is_empty());
    }
}
