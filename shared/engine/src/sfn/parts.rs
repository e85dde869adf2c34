//! Deploys larger than one execution. A phase of more actions than the deploy's own
//! execution's history holds beside its other phase (one execution holds
//! [`HistoryGuard::part_actions`](super::history::HistoryGuard::part_actions) actions of
//! both) runs in parts: Plan (or Conclude, for the cleanup) answers the parts' numbers
//! instead of the items, and the deploy's `Part` task runs the first part left and answers the others,
//! until none is left (a `Choice` loops back to it: not a `Map`, whose order of iterations
//! Step Functions does not promise). Each part is an execution of the deploy's own state
//! machine (its `Entry` choice sends an input with a `part` to `PartMap`), whose history
//! holds only that part's iterations.
//!
//! The parts follow the stored graph's order (dependencies first) and run one after the
//! other, so a part's dependencies in earlier parts are done before it begins, and its
//! gates find their markers as they would in one execution.
//!
//! The `Part` task starts its part's execution under a name made of the deploy, the
//! phase and the part (so a retried task finds the execution it started, never a second
//! one) and waits for its end within the task's deadline, answering `Stackflow.Again`
//! past it (its retry waits again). A part whose execution failed fails the task, and the
//! deploy goes to Fail as when its `Map` fails. A part does not begin once its phase has
//! stopped (the `failed` or `partial` marker).
//!
//! A part runs in rounds ([`super::gates`]): when its execution ends with actions deferred,
//! the task starts the next round's execution (named `...r<round>`) with those, until none
//! is left; each round finishes at least one action (else the task fails rather than
//! loop). The actions a deploy's own `Map` deferred run the same way, as its phase's one
//! part (Conclude or Finish answers `again` and `parts: [0]`).

use aws_sdk_sfn::types::ExecutionStatus;
use stackflow_events::EventStore;

use super::artifacts::prefix;
use super::deadline::{task_deadline, within};
use super::errors::{ErrorKind, TaskError};
use super::payloads::{PartInput, PartRequest, Phase};
use super::tasks::Tasks;

/// The most bytes of item ids one part's execution input holds: Step Functions takes at
/// most 256 KiB, and the input has a few fields besides.
pub const PART_BYTES: usize = 200 * 1024;

/// Step Functions' longest execution name.
const NAME_MOST: usize = 80;

/// How often a waiting `Part` task asks how its execution is.
const POLL: std::time::Duration = std::time::Duration::from_secs(2);

/// Where each part of `ids` begins and ends (`start..end`): at most `most` ids and
/// [`PART_BYTES`] of them, in their order.
pub fn part_bounds(ids: &[String], most: usize) -> Vec<(usize, usize)> {
    let most = most.max(1);
    let mut bounds = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, id) in ids.iter().enumerate() {
        let size = id.len() + 3;
        if i > start && (i - start == most || bytes + size > PART_BYTES) {
            bounds.push((start, i));
            (start, bytes) = (i, 0);
        }
        bytes += size;
    }
    if start < ids.len() {
        bounds.push((start, ids.len()));
    }
    bounds
}

/// A phase of `ids` as the deploy's own execution runs it: its `Map` items when that
/// execution holds them beside the `already` actions its other phase ran in it (at most
/// `most` in all), or else its parts, each the index of its first action (a part ends where
/// the next begins), and no items.
pub fn items_or_parts(ids: Vec<String>, already: u64, most: u64) -> (Vec<String>, Vec<u32>) {
    let bounds = part_bounds(&ids, usize::try_from(most).unwrap_or(usize::MAX));
    if ids.len() as u64 + already <= most && bounds.len() <= 1 {
        return (ids, Vec::new());
    }
    let parts = bounds.iter().map(|&(start, _)| start as u32).collect();
    (Vec::new(), parts)
}

/// The name of the execution of round `round` of the part that begins at action `part`:
/// the deploy's id, the phase's letter and that index (and `r<round>` after the first),
/// within Step Functions' 80 characters (a long deploy id is cut and a digest of it added,
/// so that two ids cut alike still differ).
pub fn part_name(deploy_id: &str, phase: Phase, part: u32, round: u32) -> String {
    let letter = match phase {
        Phase::Provision => 'p',
        Phase::Cleanup => 'c',
    };
    let tail = match round {
        0 | 1 => format!("-{letter}{part}"),
        _ => format!("-{letter}{part}r{round}"),
    };
    if deploy_id.len() + tail.len() <= NAME_MOST {
        return format!("{deploy_id}{tail}");
    }
    use sha2::{Digest, Sha256};
    let hash = Sha256::digest(deploy_id.as_bytes());
    let digest: String = hash[..6].iter().map(|b| format!("{b:02x}")).collect();
    let keep = NAME_MOST - tail.len() - digest.len() - 1;
    let cut: String = deploy_id.chars().take(keep).collect();
    format!("{cut}-{digest}{tail}")
}

/// The ARN of execution `name` of state machine `machine`.
fn execution_arn(machine: &str, name: &str) -> String {
    format!(
        "{}:{name}",
        machine.replacen(":stateMachine:", ":execution:", 1)
    )
}

impl<S: EventStore + 'static> Tasks<S> {
    /// **Part**: runs the part that begins at the first of `req.parts` as an execution of
    /// the deploy's state machine, waits for its end, and answers the parts left. A part is
    /// named by the index of its first action in the stored graph, so its bounds are the
    /// ones Plan or Conclude computed: it ends where the next part begins (the last at the
    /// graph's end). A part runs in rounds ([`super::gates`]): when its execution ends with
    /// actions deferred, the next round's execution runs those, until none is left. Once
    /// the phase has stopped (its marker), no further round or part begins and the answer
    /// is none; a round already started is waited for first, since its actions may still
    /// be running. Module documentation.
    pub async fn part(&self, req: PartRequest) -> Result<Vec<u32>, TaskError> {
        let Some((&start, left)) = req.parts.split_first() else {
            return Ok(Vec::new());
        };
        let deadline = task_deadline();
        let rounds = self.part_rounds(&req, start, left.first().copied());
        let Some(stopped) = within(deadline, rounds).await else {
            return Err(TaskError::again(
                &format!("part {start} of deploy {}", req.deploy_id),
                deadline,
            ));
        };
        let (stopped, rounds) = stopped?;
        tracing::info!(
            stack = req.stack,
            deploy = req.deploy_id,
            phase = req.phase.as_str(),
            part = start,
            rounds,
            stopped,
            "part done"
        );
        Ok(if stopped { Vec::new() } else { left.to_vec() })
    }

    /// Runs the rounds of the part from action `start` to `end` (the graph's end when
    /// `None`), each an execution, the ones started by an earlier try of the task waited
    /// for again. Answers whether the phase stopped, and how many rounds ran.
    async fn part_rounds(
        &self,
        req: &PartRequest,
        start: u32,
        end: Option<u32>,
    ) -> Result<(bool, u32), TaskError> {
        let marker = req.phase.stop_marker();
        let marker = format!("{}{marker}", prefix(&req.stack, &req.deploy_id));
        // How many actions the round before ran.
        let mut ran: Option<usize> = None;
        let mut round = 1;
        loop {
            let name = part_name(&req.deploy_id, req.phase, start, round);
            let arn = execution_arn(&req.machine, &name);
            if let Some(d) = self.described(&arn).await? {
                let input: Option<PartInput> = serde_json::from_str(d.input().unwrap_or("")).ok();
                ran = input.map(|i| i.items.len());
            } else {
                if self.exists(&marker).await? {
                    return Ok((true, round - 1));
                }
                // The round before (round 0: the phase's own `Map`, when it ran) deferred
                // something: its actions not done; else round 1 runs them all, and a later
                // round has nothing left.
                let deferred = self
                    .deferred_in(&req.stack, &req.deploy_id, req.phase, round - 1)
                    .await?;
                if round > 1 && !deferred {
                    return Ok((false, round - 1));
                }
                let ids = self.part_ids(req, start, end).await?;
                let items = if deferred {
                    self.undone(&req.stack, &req.deploy_id, req.phase, &ids)
                        .await?
                } else {
                    ids
                };
                if items.is_empty() {
                    return Ok((false, round - 1));
                }
                if ran == Some(items.len()) {
                    return Err(TaskError::new(
                        ErrorKind::Internal,
                        format!(
                            "round {} of part {start} of deploy {} finished none of its {} \
                             actions, and none failed",
                            round - 1,
                            req.deploy_id,
                            items.len()
                        ),
                    ));
                }
                let input = PartInput {
                    stack: req.stack.clone(),
                    deploy_id: req.deploy_id.clone(),
                    phase: req.phase,
                    part: start,
                    items,
                    concurrency: req.concurrency,
                    round,
                };
                self.start_part(&req.machine, &name, &input).await?;
            }
            if !self.part_ended(&arn).await? {
                // The round's `Map` failed: one of its provision actions failed (the
                // marker says so), and the phase stops. Anything else is an error.
                if self.exists(&marker).await? {
                    return Ok((true, round));
                }
                return Err(self.part_failed(&arn).await);
            }
            round += 1;
        }
    }

    /// The ids of the part from action `start` to `end` of the phase's stored graph.
    async fn part_ids(
        &self,
        req: &PartRequest,
        start: u32,
        end: Option<u32>,
    ) -> Result<Vec<String>, TaskError> {
        let graph = self.graph(&req.stack, &req.deploy_id, req.phase).await?;
        let mut ids: Vec<String> = graph.into_iter().map(|t| t.id).collect();
        let end = end.map_or(ids.len(), |e| e as usize);
        if start as usize > end || end > ids.len() {
            return Err(TaskError::new(
                ErrorKind::Input,
                format!(
                    "the {} phase of deploy {} has {} actions: no part from {start} to {end}",
                    req.phase.as_str(),
                    req.deploy_id,
                    ids.len(),
                ),
            ));
        }
        ids.truncate(end);
        Ok(ids.split_off(start as usize))
    }

    /// Execution `arn` as `DescribeExecution` answers it; `None` when there is none.
    async fn described(
        &self,
        arn: &str,
    ) -> Result<
        Option<aws_sdk_sfn::operation::describe_execution::DescribeExecutionOutput>,
        TaskError,
    > {
        match self
            .sfn
            .describe_execution()
            .execution_arn(arn)
            .send()
            .await
        {
            Ok(d) => Ok(Some(d)),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_execution_does_not_exist()) =>
            {
                Ok(None)
            }
            Err(e) => Err(TaskError::new(
                ErrorKind::Aws,
                format!(
                    "DescribeExecution {arn}: {}",
                    stackflow_providers::error::error_chain(&e)
                ),
            )),
        }
    }

    /// Starts the part's execution; one of that name is this task's own, started by an
    /// earlier try (its input is the same: the name is the deploy's, the phase's and the
    /// part's).
    async fn start_part(
        &self,
        machine: &str,
        name: &str,
        input: &PartInput,
    ) -> Result<(), TaskError> {
        let started = self
            .sfn
            .start_execution()
            .state_machine_arn(machine)
            .name(name)
            .input(serde_json::to_string(input).unwrap_or_default())
            .send()
            .await;
        match started {
            Ok(_) => Ok(()),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_execution_already_exists()) =>
            {
                Ok(())
            }
            Err(e) => Err(TaskError::new(
                ErrorKind::Aws,
                format!(
                    "StartExecution {name} of {machine}: {}",
                    stackflow_providers::error::error_chain(&e)
                ),
            )),
        }
    }

    /// Waits until execution `arn` ends: whether it succeeded.
    async fn part_ended(&self, arn: &str) -> Result<bool, TaskError> {
        loop {
            let Some(d) = self.described(arn).await? else {
                return Err(TaskError::new(
                    ErrorKind::Aws,
                    format!("DescribeExecution {arn}: the execution does not exist"),
                ));
            };
            match &d.status {
                ExecutionStatus::Running | ExecutionStatus::PendingRedrive => {
                    tokio::time::sleep(POLL).await
                }
                ExecutionStatus::Succeeded => return Ok(true),
                _ => return Ok(false),
            }
        }
    }

    /// The error of a part's execution `arn` that ended otherwise than by success, and
    /// not because an action failed.
    async fn part_failed(&self, arn: &str) -> TaskError {
        let described = match self.described(arn).await {
            Ok(Some(d)) => d,
            Ok(None) => {
                return TaskError::new(
                    ErrorKind::Aws,
                    format!("DescribeExecution {arn}: the execution does not exist"),
                );
            }
            Err(e) => return e,
        };
        TaskError::new(
            ErrorKind::Internal,
            format!(
                "the part's execution {arn} ended {}: {}: {}",
                described.status.as_str(),
                described.error().unwrap_or("no error"),
                described.cause().unwrap_or("no cause")
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(n: usize, len: usize) -> Vec<String> {
        (0..n).map(|i| format!("{i:0len$}")).collect()
    }

    #[test]
    fn parts_hold_at_most_their_count_and_bytes_in_order() {
        assert_eq!(part_bounds(&ids(10, 2), 4), vec![(0, 4), (4, 8), (8, 10)]);
        assert_eq!(part_bounds(&ids(8, 2), 4), vec![(0, 4), (4, 8)]);
        assert_eq!(part_bounds(&[], 4), Vec::<(usize, usize)>::new());
        assert_eq!(part_bounds(&ids(3, 2), 0), vec![(0, 1), (1, 2), (2, 3)]);
        // Ids of 255 characters: a part of 900 would be 232 KB; bytes cut it first.
        let long = ids(2_000, 255);
        let bounds = part_bounds(&long, 900);
        assert!(bounds.iter().all(|(s, e)| (e - s) * 258 <= PART_BYTES));
        assert_eq!(bounds.first(), Some(&(0, PART_BYTES / 258)));
        assert_eq!(bounds.last().map(|b| b.1), Some(2_000));
        assert!(bounds.windows(2).all(|w| w[0].1 == w[1].0));
    }

    /// One execution holds at most 900 actions of both phases: a cleanup of 500 after an
    /// inline provision of 500 runs as a part.
    #[test]
    fn a_phase_one_execution_holds_has_no_parts() {
        let parts = |n, already| items_or_parts(ids(n, 8), already, 900).1;
        assert!(parts(900, 0).is_empty());
        assert_eq!(items_or_parts(ids(900, 8), 0, 900).0.len(), 900);
        assert_eq!(parts(901, 0), vec![0, 900]);
        assert_eq!(parts(2_000, 0), vec![0, 900, 1_800]);
        assert!(parts(400, 500).is_empty());
        assert_eq!(parts(500, 500), vec![0]);
        assert!(items_or_parts(ids(500, 8), 500, 900).0.is_empty());
    }

    #[test]
    fn a_parts_name_is_its_deploys_phases_and_numbers_within_80() {
        assert_eq!(part_name("d-1", Phase::Provision, 3, 1), "d-1-p3");
        assert_eq!(part_name("d-1", Phase::Cleanup, 0, 1), "d-1-c0");
        assert_eq!(part_name("d-1", Phase::Cleanup, 0, 2), "d-1-c0r2");
        let long = "x".repeat(90);
        let name = part_name(&long, Phase::Provision, 12, 1);
        assert!(name.len() <= NAME_MOST, "{name}");
        assert!(name.ends_with("-p12"), "{name}");
        let other = format!("{}y", "x".repeat(89));
        assert_ne!(part_name(&other, Phase::Provision, 12, 1), name);
        let later = part_name(&long, Phase::Provision, 12, 37);
        assert!(
            later.len() <= NAME_MOST && later.ends_with("-p12r37"),
            "{later}"
        );
        assert_eq!(
            execution_arn("arn:aws:states:us-east-1:1:stateMachine:e-deploy", "d-p0"),
            "arn:aws:states:us-east-1:1:execution:e-deploy:d-p0"
        );
    }
}
