//! Drift: what AWS holds now for each recorded resource, compared with its baseline
//! (else with the properties recorded from the template); `--accept` records AWS's values
//! as the new baseline, `--revert` puts AWS back to the baseline through the provider;
//! `state refresh-observed` reads fresh baselines. Every check is a `DriftChecked` event.

use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value};
use stackflow_core::drift::{
    Attachments, Classification, CompareRules, Comparison, Difference, MASKED, accept, compare,
};
use stackflow_events::event::{Baseline, DriftResult, Event, RefusalCause};
use stackflow_events::projection::ResourceState;
use stackflow_events::{EventStore, Precondition};
use stackflow_providers::provider::CurrentState;

use crate::engine::{Engine, EngineError};
use crate::keys::new_id;
use crate::observe::{baseline_of, read_now, read_request, resolved_refs};
use crate::recorder::Recorder;

mod revert;

pub(crate) use revert::is_drift_run;
use revert::revert_one;

/// The drift check that acts on what drifted: its stream, what its appends require (it
/// holds the lock for `--accept` and `--revert`) and its id (the run their events name).
struct CheckRun<'a, S> {
    rec: &'a Recorder<S>,
    pre: &'a Precondition,
    check_id: &'a str,
}

/// The prefix of a drift check's id.
const CHECK_PREFIX: &str = "c";

/// What `drift` does besides comparing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DriftMode {
    /// Compare and report.
    #[default]
    Check,
    /// Record AWS's values as the baseline of each drifted resource.
    Accept,
    /// Put each drifted resource back to its baseline.
    Revert,
}

/// How one resource compared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DriftStatus {
    /// AWS holds what was recorded.
    InSync,
    /// Something differs.
    Drifted,
    /// AWS says the resource does not exist.
    Deleted,
    /// The only differences are at positions whose values cannot be compared (`***`).
    NotCompared,
    /// AWS cannot be read for this type (or this resource).
    Unsupported,
    /// `--accept` recorded AWS's values.
    Accepted,
    /// `--revert` put AWS back to the baseline.
    Reverted,
    /// `--accept`/`--revert` declined it (the reason says why).
    Declined,
    /// `--accept --dry-run`: AWS's values would be recorded.
    WouldAccept,
    /// `--revert --dry-run`: AWS would be put back to the baseline.
    WouldRevert,
}

impl DriftStatus {
    fn as_str(&self) -> &'static str {
        match self {
            DriftStatus::InSync => "in-sync",
            DriftStatus::Drifted => "drifted",
            DriftStatus::Deleted => "deleted",
            DriftStatus::NotCompared => "not-compared",
            DriftStatus::Unsupported => "unsupported",
            DriftStatus::Accepted => "accepted",
            DriftStatus::Reverted => "reverted",
            DriftStatus::Declined => "declined",
            DriftStatus::WouldAccept => "would-accept",
            DriftStatus::WouldRevert => "would-revert",
        }
    }
}

/// One position that differs, safe to print (secrets shown as `***`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Drifted {
    /// The JSON pointer into the properties.
    pub path: String,
    /// The recorded value (`null`: none).
    pub recorded: Option<Value>,
    /// AWS's value (`null`: none).
    pub aws: Option<Value>,
}

impl From<&Difference> for Drifted {
    fn from(d: &Difference) -> Self {
        Drifted {
            path: d.path.clone(),
            recorded: d.recorded.clone(),
            aws: d.aws.clone(),
        }
    }
}

/// What was compared with AWS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Against {
    /// The baseline read from AWS after the last create, update or import.
    Baseline,
    /// The properties recorded from the template (no baseline, or a refused one).
    Recorded,
}

/// One resource's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceDrift {
    /// The logical id.
    pub logical_id: String,
    /// The type.
    pub resource_type: String,
    /// The physical id.
    pub physical_id: String,
    /// How it compared (or what `--accept`/`--revert` did).
    pub status: DriftStatus,
    /// What it was compared with.
    pub against: Against,
    /// The positions that differ.
    pub differences: Vec<Drifted>,
    /// Positions not compared: their values are masked (`***`).
    pub not_compared: Vec<String>,
    /// Write-only positions, which AWS never returns: not compared.
    pub write_only: Vec<String>,
    /// Why it is unsupported or declined, or a note.
    pub reason: Option<String>,
}

/// The result of `drift`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DriftReport {
    /// The stack.
    pub stack: String,
    /// The check's id (its `DriftChecked` event).
    pub check_id: String,
    /// What it did besides comparing.
    #[serde(skip)]
    pub mode: DriftMode,
    /// Per resource, in the state's order.
    pub resources: Vec<ResourceDrift>,
    /// True when `--accept`/`--revert` only said what they would do: nothing was
    /// recorded, and no lock was taken.
    pub dry_run: bool,
}

/// How a drift check runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriftRun {
    /// At most this many resources read, accepted or reverted at once.
    pub concurrency: usize,
    /// With accept or revert: only say what they would do (no lock, no write, no call
    /// that changes AWS; the check itself is not recorded either).
    pub dry_run: bool,
}

impl Default for DriftRun {
    fn default() -> Self {
        DriftRun {
            concurrency: 10,
            dry_run: false,
        }
    }
}

impl DriftReport {
    /// The exit code: 1 when anything drifted or was deleted (and is still so), 2 when
    /// the only findings are positions that cannot be compared or resources `--accept` /
    /// `--revert` declined, 0 otherwise.
    pub fn exit_code(&self) -> i32 {
        let has = |s: DriftStatus| self.resources.iter().any(|r| r.status == s);
        let deleted = has(DriftStatus::Deleted) && (self.mode == DriftMode::Check || self.dry_run);
        let would = has(DriftStatus::WouldAccept) || has(DriftStatus::WouldRevert);
        if has(DriftStatus::Drifted) || deleted || would {
            1
        } else if has(DriftStatus::NotCompared) || has(DriftStatus::Declined) {
            2
        } else {
            0
        }
    }
}

/// Compares every recorded resource of `stack` (or only `only`) with AWS; with
/// [`DriftMode::Accept`] or [`DriftMode::Revert`] also acts on what drifted, holding the
/// stack's lock.
pub async fn drift_stack<S: EventStore + 'static>(
    engine: Arc<Engine<S>>,
    stack: &str,
    only: &[String],
    mode: DriftMode,
) -> Result<DriftReport, EngineError> {
    drift_stack_with(engine, stack, only, mode, DriftRun::default()).await
}

/// [`drift_stack`], run as `how` says.
pub async fn drift_stack_with<S: EventStore + 'static>(
    engine: Arc<Engine<S>>,
    stack: &str,
    only: &[String],
    mode: DriftMode,
    how: DriftRun,
) -> Result<DriftReport, EngineError> {
    let recorder = Recorder::load(engine.store.clone(), engine.stream(stack)).await?;
    let selected = selected(&recorder, stack, only)?;
    let check_id = new_id(CHECK_PREFIX);
    let locks = mode != DriftMode::Check && !how.dry_run;
    let (pre, held) = match mode {
        _ if !locks => (Precondition::None, None),
        DriftMode::Check => (Precondition::None, None),
        DriftMode::Accept | DriftMode::Revert => {
            let held = crate::run::lock(&engine, &recorder, &check_id, "drift").await?;
            (Precondition::HoldsLock(check_id.clone()), Some(held))
        }
    };
    let run = CheckRun {
        rec: &recorder,
        pre: &pre,
        check_id: &check_id,
    };
    let outcome = check_all(&engine, stack, &run, &selected, mode, how).await;
    if let Some(held) = held {
        held.release(&recorder, &check_id).await?;
    }
    let resources = outcome?;
    let report = DriftReport {
        stack: stack.to_string(),
        check_id: check_id.clone(),
        mode,
        resources,
        dry_run: how.dry_run,
    };
    if how.dry_run {
        return Ok(report);
    }
    let resources = &report.resources;
    let results = resources
        .iter()
        .map(|r| DriftResult {
            logical_id: r.logical_id.clone(),
            status: r.status.as_str().to_string(),
            paths: match r.status {
                DriftStatus::NotCompared => r.not_compared.clone(),
                _ => r.differences.iter().map(|d| d.path.clone()).collect(),
            },
        })
        .collect();
    recorder
        .append(
            crate::keys::run_key(&check_id, crate::keys::RunEvent::Checked),
            Event::DriftChecked {
                check_id: check_id.clone(),
                results,
            },
            &Precondition::None,
        )
        .await?;
    Ok(report)
}

/// The recorded resources `only` names (all when empty), in the state's order.
fn selected<S: EventStore>(
    recorder: &Recorder<S>,
    stack: &str,
    only: &[String],
) -> Result<Vec<(String, ResourceState)>, EngineError> {
    let state = recorder.state();
    if state.resources.is_empty() {
        return Err(EngineError::Refused(format!(
            "stack {stack} has no recorded resources: deploy or import it first"
        )));
    }
    let unknown: Vec<&String> = only
        .iter()
        .filter(|id| !state.resources.contains_key(*id))
        .collect();
    if !unknown.is_empty() {
        let known: Vec<&String> = state.resources.keys().collect();
        return Err(EngineError::Refused(format!(
            "stack {stack} has no resource {unknown:?}; its resources are {known:?}"
        )));
    }
    Ok(state
        .resources
        .iter()
        .filter(|(id, _)| only.is_empty() || only.contains(id))
        .map(|(id, r)| (id.clone(), r.clone()))
        .collect())
}

/// Reads and compares each resource, then acts on the drifted ones: `how.concurrency` at
/// a time each, results in the state's order.
async fn check_all<S: EventStore + 'static>(
    engine: &Arc<Engine<S>>,
    stack: &str,
    run: &CheckRun<'_, S>,
    selected: &[(String, ResourceState)],
    mode: DriftMode,
    how: DriftRun,
) -> Result<Vec<ResourceDrift>, EngineError> {
    let limit = Arc::new(tokio::sync::Semaphore::new(how.concurrency.max(1)));
    let mut running = tokio::task::JoinSet::new();
    for (i, (id, r)) in selected.iter().enumerate() {
        let (engine, limit) = (engine.clone(), limit.clone());
        let request = read_request(stack, id, r);
        let kind = r.provider;
        running.spawn(async move {
            let _permit = limit.acquire_owned().await;
            (i, read_now(&engine, &request, kind).await)
        });
    }
    let mut read: Vec<Option<CurrentState>> = vec![None; selected.len()];
    while let Some(joined) = running.join_next().await {
        let (i, state) =
            joined.map_err(|e| EngineError::Internal(format!("a read failed: {e}")))?;
        read[i] = Some(state);
    }
    let attached = stack_attachments(run.rec);
    use futures_util::stream::{self, StreamExt as _, TryStreamExt as _};
    // Boxed as `Send` one by one: a stream over a closure's futures loses the proof
    // that they are `Send` for every lifetime, which the Lambda task needs.
    type Act<'a> = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<ResourceDrift, EngineError>> + Send + 'a>,
    >;
    let acts: Vec<Act<'_>> = selected
        .iter()
        .zip(read)
        .map(|((id, r), now)| {
            let now = now.unwrap_or(CurrentState::CannotRead("not read".into()));
            Box::pin(act_on(
                engine,
                run,
                &attached,
                (id, r.clone(), now),
                mode,
                how,
            )) as Act<'_>
        })
        .collect();
    stream::iter(acts)
        .buffered(how.concurrency.max(1))
        .try_collect()
        .await
}

/// Compares one resource with what AWS answered, then acts on it as `mode` says.
async fn act_on<S: EventStore + 'static>(
    engine: &Arc<Engine<S>>,
    run: &CheckRun<'_, S>,
    attached: &Attachments,
    (id, mut r, mut now): (&str, ResourceState, CurrentState),
    mode: DriftMode,
    how: DriftRun,
) -> Result<ResourceDrift, EngineError> {
    without_attached(attached, &mut r, &mut now);
    let r = &r;
    let mut drift = check_one(engine, id, r, &now).await;
    if drift.status == DriftStatus::Drifted || drift.status == DriftStatus::Deleted {
        match mode {
            DriftMode::Check => {}
            _ if how.dry_run => would(engine, mode, r, &now, &mut drift).await,
            DriftMode::Accept => accept_one(engine, run, r, &now, &mut drift).await?,
            DriftMode::Revert => revert_one(engine, run, r, &now, &mut drift).await?,
        }
    }
    Ok(drift)
}

/// `--dry-run`: what `--accept` or `--revert` would do with one drifted resource, by the
/// same checks, with nothing recorded or sent.
async fn would<S: EventStore + 'static>(
    engine: &Arc<Engine<S>>,
    mode: DriftMode,
    r: &ResourceState,
    now: &CurrentState,
    drift: &mut ResourceDrift,
) {
    let mut why = declined(r, drift);
    if why.is_none() && mode == DriftMode::Revert {
        why = revert::not_revertible(r);
    }
    if why.is_none()
        && mode == DriftMode::Accept
        && let CurrentState::Found(aws) = now
    {
        let (against, reference) = reference_of(r);
        let (rules, _) = rules_for(engine, r, against).await;
        why = accept(reference, aws, &drift.not_compared, &rules)
            .err()
            .map(|refused| refused.to_string());
    }
    drift.status = match (why, mode) {
        (Some(why), _) => {
            drift.reason = Some(why);
            DriftStatus::Declined
        }
        (None, DriftMode::Accept) => DriftStatus::WouldAccept,
        (None, _) => DriftStatus::WouldRevert,
    };
}

/// The policies the stack's IAM policy resources put on its principals.
fn stack_attachments<S: EventStore>(recorder: &Recorder<S>) -> Attachments {
    let state = recorder.state();
    Attachments::of(state.resources.values().map(|r| {
        (
            r.resource_type.as_str(),
            r.physical_id.as_str(),
            &r.properties,
        )
    }))
}

/// Leaves the stack's own policy resources' attachments out of what AWS answered for
/// `r` and out of its baseline (a baseline read after they were attached holds them).
fn without_attached(attached: &Attachments, r: &mut ResourceState, now: &mut CurrentState) {
    if attached.is_empty() {
        return;
    }
    if let CurrentState::Found(aws) = now {
        attached.strip(&r.resource_type, &r.physical_id, aws);
    }
    if let Some(Baseline::Recorded { observed }) = &mut r.baseline {
        attached.strip(&r.resource_type, &r.physical_id, observed);
    }
}

/// What the comparison of `r` is made against, and how.
fn reference_of(r: &ResourceState) -> (Against, &Map<String, Value>) {
    match &r.baseline {
        Some(Baseline::Recorded { observed }) => (Against::Baseline, observed),
        _ => (Against::Recorded, &r.properties),
    }
}

/// Compares one resource with what AWS answered for it.
async fn check_one<S: EventStore + 'static>(
    engine: &Arc<Engine<S>>,
    id: &str,
    r: &ResourceState,
    now: &CurrentState,
) -> ResourceDrift {
    let (against, reference) = reference_of(r);
    let mut drift = ResourceDrift {
        logical_id: id.to_string(),
        resource_type: r.resource_type.clone(),
        physical_id: r.physical_id.clone(),
        status: DriftStatus::InSync,
        against,
        differences: vec![],
        not_compared: vec![],
        write_only: vec![],
        reason: refused_note(r),
    };
    let aws = match now {
        CurrentState::Found(aws) => aws,
        CurrentState::NotFound => {
            drift.status = DriftStatus::Deleted;
            return drift;
        }
        CurrentState::CannotRead(why) => {
            drift.status = DriftStatus::Unsupported;
            drift.reason = Some(why.clone());
            return drift;
        }
    };
    let (rules, unread) = rules_for(engine, r, against).await;
    let comparison = compare(reference, aws, &rules);
    apply_comparison(&mut drift, &comparison);
    if let Some(why) = unread.filter(|_| !drift.not_compared.is_empty()) {
        drift.reason = Some(format!(
            "a secret it references could not be read ({why}): the positions holding \
             it are not compared"
        ));
    }
    if matches!(
        r.baseline,
        Some(Baseline::Refused {
            cause: RefusalCause::UnverifiableParameter
        })
    ) {
        // AWS may hold a parameter's deployed value (meant to stay secret) where the
        // record holds its Default: its side of every difference is not shown.
        for d in &mut drift.differences {
            if d.aws.is_some() {
                d.aws = Some(Value::String(MASKED.into()));
            }
        }
    }
    drift
}

/// `drift` filled from `comparison`.
fn apply_comparison(drift: &mut ResourceDrift, comparison: &Comparison) {
    drift.write_only = comparison.not_compared_write_only.clone();
    match &comparison.classification {
        Classification::InSync => {}
        Classification::Drifted(diffs) => {
            drift.status = DriftStatus::Drifted;
            drift.differences = diffs.iter().map(Drifted::from).collect();
            drift.not_compared = comparison.masked.clone();
        }
        Classification::NotCompared(paths) => {
            drift.status = DriftStatus::NotCompared;
            drift.not_compared = paths.clone();
        }
    }
}

/// The note a refused baseline adds (drift then compares with the recorded properties,
/// which can report drift that is not real).
fn refused_note(r: &ResourceState) -> Option<String> {
    match &r.baseline {
        Some(Baseline::Refused { cause }) => Some(format!(
            "ObservedBaseline: REFUSED ({}); compared with the properties recorded from \
             the template, which can show drift that is not real",
            cause.as_str()
        )),
        _ => None,
    }
}

/// The comparison rules of `r`'s type; the dynamic references of its recorded
/// properties resolved now (for the positions that hold them), or why they could not be.
async fn rules_for<S: EventStore + 'static>(
    engine: &Arc<Engine<S>>,
    r: &ResourceState,
    against: Against,
) -> (CompareRules, Option<String>) {
    let mut rules = CompareRules::for_type(&r.resource_type, against == Against::Baseline);
    let (resolved, unread) = resolved_refs(engine, &r.properties).await;
    rules.resolved = resolved;
    (rules, unread)
}

/// Why `--accept`/`--revert` leave `r` alone, if they do.
fn declined(r: &ResourceState, drift: &ResourceDrift) -> Option<String> {
    if let Some(Baseline::Refused { cause }) = &r.baseline {
        return Some(format!(
            "its baseline is refused ({}): deploy a change to it, or import it again",
            cause.as_str()
        ));
    }
    (drift.status == DriftStatus::Deleted).then(|| {
        "it is deleted in AWS: deploy to create it again, or remove it from the template".into()
    })
}

/// `--accept`: AWS's values become the baseline.
async fn accept_one<S: EventStore + 'static>(
    engine: &Arc<Engine<S>>,
    run: &CheckRun<'_, S>,
    r: &ResourceState,
    now: &CurrentState,
    drift: &mut ResourceDrift,
) -> Result<(), EngineError> {
    if let Some(why) = declined(r, drift) {
        drift.status = DriftStatus::Declined;
        drift.reason = Some(why);
        return Ok(());
    }
    let CurrentState::Found(aws) = now else {
        return Ok(());
    };
    let (against, reference) = reference_of(r);
    let (rules, _) = rules_for(engine, r, against).await;
    match accept(reference, aws, &drift.not_compared, &rules) {
        Ok(accepted) => {
            run.rec
                .append(
                    crate::keys::item_key(
                        run.check_id,
                        crate::keys::ItemEvent::Accepted,
                        &drift.logical_id,
                    ),
                    Event::BaselineAccepted {
                        logical_id: drift.logical_id.clone(),
                        observed: accepted.baseline,
                    },
                    run.pre,
                )
                .await?;
            drift.status = DriftStatus::Accepted;
        }
        Err(refused) => {
            drift.status = DriftStatus::Declined;
            drift.reason = Some(refused.to_string());
        }
    }
    Ok(())
}

/// `state refresh-observed`: a fresh baseline for every recorded resource whose baseline
/// is not refused; returns (logical id, what happened) per resource.
pub async fn refresh_observed<S: EventStore + 'static>(
    engine: Arc<Engine<S>>,
    stack: &str,
) -> Result<Vec<(String, String)>, EngineError> {
    let recorder = Recorder::load(engine.store.clone(), engine.stream(stack)).await?;
    let selected = selected(&recorder, stack, &[])?;
    let id = new_id("o");
    let held = crate::run::lock(&engine, &recorder, &id, "refresh-observed").await?;
    let pre = Precondition::HoldsLock(id.clone());
    let mut out = Vec::new();
    let mut failed = None;
    for (logical_id, r) in &selected {
        if let Some(Baseline::Refused { cause }) = &r.baseline {
            out.push((
                logical_id.clone(),
                format!("refused ({}), kept", cause.as_str()),
            ));
            continue;
        }
        let now = read_now(&engine, &read_request(stack, logical_id, r), r.provider).await;
        let Some(baseline) = baseline_of(&r.properties, &now) else {
            out.push((logical_id.clone(), describe_unread(&now)));
            continue;
        };
        let appended = recorder
            .append(
                crate::keys::item_key(&id, crate::keys::ItemEvent::Refreshed, logical_id),
                Event::BaselineRefreshed {
                    logical_id: logical_id.clone(),
                    baseline,
                },
                &pre,
            )
            .await;
        if let Err(e) = appended {
            failed = Some(e);
            break;
        }
        out.push((logical_id.clone(), "refreshed".into()));
    }
    held.release(&recorder, &id).await?;
    match failed {
        Some(e) => Err(e.into()),
        None => Ok(out),
    }
}

fn describe_unread(now: &CurrentState) -> String {
    match now {
        CurrentState::NotFound => "deleted in AWS: no baseline".into(),
        CurrentState::CannotRead(why) => format!("not read: {why}"),
        CurrentState::Found(_) => "read".into(),
    }
}
