//! The engine: what a deploy, a destroy and a rollback of one stack do, written as task
//! handlers (plan, provision one resource, clean up one resource, finish, fail, undo one
//! journal entry) and the embedded runner that runs them in-process.
//!
//! Every AWS call is announced by a `ResourceIntent` appended first, with the idempotency
//! token the call uses; its outcome is appended right after. Event keys are deterministic
//! (`<deploy>/<resource>/<operation>/<phase>`), so a retried handler appends nothing twice.
//! A process killed between the two leaves a pending intent, which the next deploy or
//! rollback reconciles (replays the call with the same token, which makes nothing twice)
//! before it does anything else.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use indexmap::IndexMap;
use serde::Serialize;
use serde_json::{Map, Value};
use stackflow_core::dynref::{self, DynamicReference};
use stackflow_core::intrinsics::{Mode, Resolver, bind_parameters, evaluate_conditions};
use stackflow_core::plan::{Action, Plan, PlanInput, mask_values, plan};
use stackflow_core::template::{NestedTemplate, Policy};
use stackflow_core::{Path, TemplateError};
use stackflow_events::event::{
    ErrorInfo, Event, Holder, Operation, ProviderKind, ResourceRecord, now,
};
use stackflow_events::projection::{DeployStatus, JournalEntry, JournalStep, PendingIntent};
use stackflow_events::{EventStore, Precondition, StoreError, StreamId};
use stackflow_providers::ProviderError;
use stackflow_providers::provider::{BoxFuture, Deleted, Imported, ResourceRequest};
use tokio::sync::watch;

use crate::lookups::{Answers, Lookups, Questions, Recording};
use crate::progress::{Progress, ProgressEvent};
use crate::providers::Providers;
use crate::recorder::Recorder;
use crate::schedule::{self, Outcome, Task};
use crate::stack::{DeployEnv, StackInput};

/// Why a deploy, destroy or rollback could not run (as opposed to a resource that failed,
/// which a [`StackReport`] tells).
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The template is wrong.
    #[error(transparent)]
    Template(#[from] TemplateError),
    /// The event store failed, or the stack is locked.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Anything else, said plainly.
    #[error("{0}")]
    Other(String),
}

/// How one stack's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StackStatus {
    /// Nothing to do; no AWS write call was made.
    NoChanges,
    /// Every action succeeded.
    Succeeded,
    /// Every action that ran succeeded, but some resource was left unaddressed (a delete
    /// that a provider skipped).
    Partial,
    /// An action failed.
    Failed,
    /// Stopped by the user (Ctrl-C) before the end.
    Interrupted,
}

/// One resource action that did not succeed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Failure {
    /// The resource.
    pub logical_id: String,
    /// Its type.
    pub resource_type: String,
    /// What was tried.
    pub action: String,
    /// The error (masked).
    pub error: ErrorInfo,
}

/// What a rollback did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RollbackReport {
    /// Entries undone, as `(logical id, how)`.
    pub undone: Vec<(String, String)>,
    /// Entries that could not be undone.
    pub failed: Vec<Failure>,
}

impl RollbackReport {
    /// True when every entry was undone.
    pub fn complete(&self) -> bool {
        self.failed.is_empty()
    }
}

/// What a run did to one stack.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StackReport {
    /// The stack.
    pub stack: String,
    /// The deploy (or destroy, rollback) id.
    pub deploy_id: String,
    /// How it ended.
    pub status: StackStatus,
    /// Resources created.
    pub created: usize,
    /// Resources updated in place.
    pub updated: usize,
    /// Resources replaced.
    pub replaced: usize,
    /// Resources deleted (replaced predecessors included).
    pub deleted: usize,
    /// Resources that left the stack but stay in AWS (`Retain`).
    pub retained: usize,
    /// Actions skipped (a resource left unaddressed), with why.
    pub skipped: Vec<(String, String)>,
    /// Interrupted calls of an earlier run that this run settled.
    pub recovered: usize,
    /// The failures, first first.
    pub failures: Vec<Failure>,
    /// The rollback, when one ran.
    pub rollback: Option<RollbackReport>,
    /// The outputs (`NoEcho` values masked).
    pub outputs: IndexMap<String, Value>,
    /// Wall time in seconds.
    pub seconds: f64,
}

impl StackReport {
    /// Counts what each resource task did.
    fn tally(&mut self, results: &[(String, Result<Done, Failure>)]) {
        for (id, r) in results {
            match r {
                Ok(Done::Created) => self.created += 1,
                Ok(Done::Updated) => self.updated += 1,
                Ok(Done::Replaced) => self.replaced += 1,
                Ok(Done::Deleted) => self.deleted += 1,
                Ok(Done::Retained(_)) => self.retained += 1,
                Ok(Done::Skipped(why)) => self.skipped.push((id.clone(), why.clone())),
                Err(f) => self.failures.push(f.clone()),
            }
        }
    }

    fn new(stack: &str, deploy_id: &str) -> StackReport {
        StackReport {
            stack: stack.to_string(),
            deploy_id: deploy_id.to_string(),
            status: StackStatus::Succeeded,
            created: 0,
            updated: 0,
            replaced: 0,
            deleted: 0,
            retained: 0,
            skipped: vec![],
            recovered: 0,
            failures: vec![],
            rollback: None,
            outputs: IndexMap::new(),
            seconds: 0.0,
        }
    }
}

/// How a deploy runs.
#[derive(Debug, Clone)]
pub struct DeployOptions {
    /// Keep what a failed deploy did (undo it later with `rollback`).
    pub no_rollback: bool,
    /// At most this many resource actions at once.
    pub concurrency: usize,
    /// Turns true when the user asks to stop: nothing new starts, running calls finish.
    pub stop: watch::Receiver<bool>,
    /// The deploy id to use (a remote start names its execution after it); a new one
    /// when `None`.
    pub deploy_id: Option<String>,
}

impl DeployOptions {
    /// Defaults: rollback on, 10 at once, never stopped.
    pub fn new() -> DeployOptions {
        let (tx, rx) = watch::channel(false);
        // Keep the sender alive for the life of the process: a dropped sender reads as
        // "no stop can come", which is what we mean.
        std::mem::forget(tx);
        DeployOptions {
            no_rollback: false,
            concurrency: 10,
            stop: rx,
            deploy_id: None,
        }
    }
}

impl Default for DeployOptions {
    fn default() -> Self {
        DeployOptions::new()
    }
}

/// Decides whether a lock holder is gone (its process died), so that its lock may be
/// broken and its interrupted work reconciled.
pub type StaleCheck = Arc<dyn Fn(&Holder) -> bool + Send + Sync>;

/// Everything a deploy needs besides the stack: the store, the providers, the lookups.
pub struct Engine<S> {
    /// The event store.
    pub store: Arc<S>,
    /// The providers.
    pub providers: Providers,
    /// AWS lookups.
    pub lookups: Arc<dyn Lookups>,
    /// The region deployed to.
    pub region: String,
    /// Who runs the deploys (`user@host pid N`, an execution ARN).
    pub who: String,
    /// Read other stacks' exports and outputs from CloudFormation when stackflow has not
    /// recorded them.
    pub cloudformation_fallback: bool,
    /// Where progress goes.
    pub progress: Arc<dyn Progress>,
    /// Whether a lock holder is gone.
    pub stale: StaleCheck,
}

/// A new run id: `<prefix>-<UTC time>-<8 hex digits>`.
pub fn new_id(prefix: &str) -> String {
    let t = now();
    let compact: String = t.chars().filter(|c| c.is_ascii_digit()).take(14).collect();
    let random = uuid::Uuid::new_v4().simple().to_string();
    format!("{prefix}-{compact}-{}", &random[..8])
}

fn op_name(op: Operation) -> &'static str {
    match op {
        Operation::Create => "create",
        Operation::Update => "update",
        Operation::Replace => "replace",
        Operation::Delete => "delete",
        Operation::Undo => "undo",
    }
}

fn error_info(e: &ProviderError) -> ErrorInfo {
    ErrorInfo {
        name: e.name().to_string(),
        message: e.message().to_string(),
    }
}

/// Masks every secret in `text`: dynamic reference values and `NoEcho` parameters.
fn mask_text(text: &str, resolution: Option<&dynref::Resolution>, secrets: &[String]) -> String {
    let text = match resolution {
        Some(r) => r.mask(text),
        None => text.to_string(),
    };
    match mask_values(&Value::String(text.clone()), secrets) {
        Value::String(s) => s,
        _ => text,
    }
}

fn as_map(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// True when a policy keeps the resource when it leaves the stack.
fn keeps(policy: Option<Policy>) -> bool {
    matches!(
        policy,
        Some(Policy::Retain | Policy::RetainExceptOnCreate | Policy::Snapshot)
    )
}

impl<S: EventStore + 'static> Engine<S> {
    fn stream(&self, stack: &str) -> StreamId {
        StreamId::new(&self.region, stack)
    }

    fn note(&self, stack: &str, message: &str) {
        self.progress.report(ProgressEvent::Note { stack, message });
    }

    /// Takes the stack's lock by appending `event` (the run's first event), breaking the
    /// lock of a holder that is gone.
    async fn take_lock(
        &self,
        rec: &Recorder<S>,
        key: String,
        event: Event,
        holder: Holder,
    ) -> Result<(), EngineError> {
        match rec
            .append(
                key.clone(),
                event.clone(),
                &Precondition::TakeLock(holder.clone()),
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(StoreError::Locked { holder: current }) if (self.stale)(&current) => {
                let stack = &rec.stream().stack;
                self.note(
                    stack,
                    &format!(
                        "breaking the lock of {} ({} {}): its process is gone",
                        current.who, current.operation, current.deploy_id
                    ),
                );
                rec.store()
                    .break_lock(
                        rec.stream(),
                        &format!("{} (holder's process gone)", self.who),
                    )
                    .await?;
                rec.reload().await?;
                rec.append(key, event, &Precondition::TakeLock(holder))
                    .await?;
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Answers every lookup the template asks for: availability zones, exports and
    /// outputs (stackflow's own records first, then CloudFormation), SSM parameters.
    async fn gather(
        &self,
        input: &StackInput,
        rec: &Recorder<S>,
        strict: bool,
    ) -> Result<(Answers, Vec<String>), EngineError> {
        // A failed lookup stops a deploy; a plan shows the value as known after deploy.
        let soft = |e: EngineError| -> Result<(), EngineError> {
            if strict {
                Err(e)
            } else {
                self.note(&input.name, &format!("{e} (shown as known after deploy)"));
                Ok(())
            }
        };
        let mut answers = Answers::default();
        let mut tried = Questions::default();
        let mut imports: BTreeSet<String> = BTreeSet::new();
        // `Fn::GetAZs` can sit where plan mode stops early (inside a value that is not known
        // yet), so its regions are also found by reading the template.
        let mut regions = BTreeSet::new();
        for r in input.template.resources.values() {
            get_azs_regions(
                &Value::Object(r.properties.clone()),
                &input.pseudo.region,
                &mut regions,
            );
        }
        for o in input.template.outputs.values() {
            get_azs_regions(&o.value, &input.pseudo.region, &mut regions);
        }
        for region in regions {
            match self.lookups.availability_zones(&region).await {
                Ok(zones) => {
                    answers.zones.insert(region, zones);
                }
                Err(e) => soft(EngineError::Other(format!(
                    "{}: Fn::GetAZs needs {e}",
                    input.source
                )))?,
            }
        }
        for _ in 0..4 {
            let asked = {
                let state = rec.state();
                let base = DeployEnv {
                    state: &state,
                    answers: &answers,
                };
                let recording = Recording::new(&base);
                if let Ok(conditions) = evaluate_conditions(
                    &input.template,
                    &input.parameters,
                    &input.pseudo,
                    &recording,
                ) {
                    let resolver = Resolver::new(
                        &input.template,
                        &input.parameters,
                        &input.pseudo,
                        &conditions,
                        &recording,
                        Mode::Plan,
                    );
                    for id in input.template.resources.keys() {
                        let _ = resolver.resolve_properties(id);
                    }
                    for (name, o) in &input.template.outputs {
                        let p = Path::from_keys(["Outputs", name]);
                        let _ = resolver.resolve(&o.value, &p);
                        if let Some(e) = &o.export_name {
                            let _ = resolver.resolve(e, &p);
                        }
                    }
                }
                recording.into_questions()
            };
            imports.extend(asked.exports.iter().cloned());
            let missing = answers.missing(&asked, &tried);
            if missing.is_empty() {
                break;
            }
            for region in &missing.regions {
                match self.lookups.availability_zones(region).await {
                    Ok(zones) => {
                        answers.zones.insert(region.clone(), zones);
                    }
                    Err(e) => soft(EngineError::Other(format!(
                        "{}: Fn::GetAZs needs {e}",
                        input.source
                    )))?,
                }
            }
            for name in &missing.exports {
                if let Some(v) = self.find_export(&input.name, name).await? {
                    answers.exports.insert(name.clone(), v);
                } else if self.cloudformation_fallback {
                    match self.lookups.cloudformation_export(name).await {
                        Ok(Some(v)) => {
                            answers.exports.insert(name.clone(), v);
                        }
                        Ok(None) => {}
                        Err(e) => soft(EngineError::Other(e.to_string()))?,
                    }
                }
            }
            for r in &missing.outputs {
                let own = if r.region.as_deref().is_none_or(|x| x == self.region) {
                    let stream = self.stream(&r.stack_name);
                    let state = stackflow_events::load_state(self.store.as_ref(), &stream).await?;
                    state.outputs.get(&r.output_name).cloned()
                } else {
                    None
                };
                let v = match own {
                    Some(v) => Some(v),
                    None if self.cloudformation_fallback => {
                        match self.lookups.cloudformation_output(r).await {
                            Ok(v) => v,
                            Err(e) => {
                                soft(EngineError::Other(e.to_string()))?;
                                None
                            }
                        }
                    }
                    None => None,
                };
                if let Some(v) = v {
                    answers.outputs.push((r.clone(), v));
                }
            }
            for name in &missing.ssm {
                match self.lookups.ssm_parameter(name).await {
                    Ok(Some(v)) => {
                        answers.ssm.insert(name.clone(), v);
                    }
                    Ok(None) => {}
                    Err(e) => soft(EngineError::Other(e.to_string()))?,
                }
            }
            tried.regions.extend(missing.regions);
            tried.exports.extend(missing.exports);
            tried.outputs.extend(missing.outputs);
            tried.ssm.extend(missing.ssm);
        }
        Ok((answers, imports.into_iter().collect()))
    }

    /// What a deploy of `input` would do now: the same lookups and the same recorded
    /// state a deploy uses, without taking the lock or calling anything that writes.
    pub async fn plan_only(&self, input: &StackInput) -> Result<Plan, EngineError> {
        let recorder = Recorder::load(self.store.clone(), self.stream(&input.name)).await?;
        let (answers, _) = self.gather(input, &recorder, false).await?;
        let state = recorder.state().to_current_state();
        plan(&PlanInput {
            stack: &input.name,
            template: &input.template,
            parameters: &input.parameters,
            pseudo: &input.pseudo,
            state: &state,
            env: &answers,
        })
        .map_err(|e| EngineError::Template(e.in_file(&input.source)))
    }

    /// An export recorded by another stackflow stack of this region.
    async fn find_export(&self, own: &str, name: &str) -> Result<Option<Value>, EngineError> {
        for stream in self.store.streams().await? {
            if stream.region != self.region || stream.stack == own {
                continue;
            }
            let state = stackflow_events::load_state(self.store.as_ref(), &stream).await?;
            if let Some(v) = state.exports.get(name) {
                return Ok(Some(v.clone()));
            }
        }
        Ok(None)
    }

    /// The stacks of this region that import one of `exports`, with the export.
    async fn importers(
        &self,
        own: &str,
        exports: &IndexMap<String, Value>,
    ) -> Result<Vec<(String, String)>, EngineError> {
        let mut out = Vec::new();
        if exports.is_empty() {
            return Ok(out);
        }
        for stream in self.store.streams().await? {
            if stream.region != self.region || stream.stack == own {
                continue;
            }
            let state = stackflow_events::load_state(self.store.as_ref(), &stream).await?;
            for i in &state.imports {
                if exports.contains_key(i) && !state.resources.is_empty() {
                    out.push((stream.stack.clone(), i.clone()));
                }
            }
        }
        Ok(out)
    }

    /// Resolves the dynamic references in `props` for one call: the values to send, and
    /// the resolution that masks them in messages.
    async fn resolve_dynamic(
        &self,
        props: &Map<String, Value>,
    ) -> Result<(Map<String, Value>, dynref::Resolution), (String, String)> {
        let mut texts: Vec<String> = Vec::new();
        collect_strings(&Value::Object(props.clone()), &mut texts);
        let mut values: IndexMap<String, String> = IndexMap::new();
        for t in texts {
            let found =
                dynref::find_all(&t).map_err(|e| ("InvalidRequest".into(), e.to_string()))?;
            for occ in found {
                if values.contains_key(&occ.text) {
                    continue;
                }
                let v = self
                    .lookups
                    .dynamic_reference(&occ.reference)
                    .await
                    .map_err(|e| ("NotFound".to_string(), e.to_string()))?;
                values.insert(occ.text.clone(), v);
            }
        }
        if values.is_empty() {
            return Ok((props.clone(), dynref::Resolution::default()));
        }
        let lookup = |r: &DynamicReference| -> Result<String, String> {
            values
                .iter()
                .find_map(|(text, v)| {
                    DynamicReference::parse(text)
                        .ok()
                        .filter(|p| p == r)
                        .map(|_| v.clone())
                })
                .ok_or_else(|| "not looked up".to_string())
        };
        let (v, resolution) = dynref::resolve(&Value::Object(props.clone()), &lookup)
            .map_err(|e| ("InvalidRequest".to_string(), e.to_string()))?;
        Ok((as_map(v), resolution))
    }
}

/// The regions `Fn::GetAZs` asks for in `v`: a literal region, or the stack's region for
/// `""` and any expression.
fn get_azs_regions(v: &Value, own: &str, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            if let Some(arg) = m.get("Fn::GetAZs") {
                match arg {
                    Value::String(r) if !r.is_empty() => out.insert(r.clone()),
                    _ => out.insert(own.to_string()),
                };
            }
            m.values().for_each(|x| get_azs_regions(x, own, out));
        }
        Value::Array(items) => items.iter().for_each(|x| get_azs_regions(x, own, out)),
        _ => {}
    }
}

/// Eight hex digits of a string's SHA-256, for keys that must tell values apart.
fn short_hash(s: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(s.as_bytes())
        .iter()
        .take(4)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// True when `v` holds a masked `NoEcho` value (`****`), which must never be sent.
fn contains_mask(v: &Value) -> bool {
    match v {
        Value::String(s) => s.contains("****"),
        Value::Array(items) => items.iter().any(contains_mask),
        Value::Object(m) => m.values().any(contains_mask),
        _ => false,
    }
}

fn collect_strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) if dynref::contains_dynamic_reference(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|i| collect_strings(i, out)),
        Value::Object(m) => m.values().for_each(|i| collect_strings(i, out)),
        _ => {}
    }
}

/// One deploy of one stack, from its plan to its end.
pub struct Deployment<S> {
    /// The engine.
    pub engine: Arc<Engine<S>>,
    /// The stack.
    pub input: Arc<StackInput>,
    /// The deploy id.
    pub deploy_id: String,
    /// The stream and its state.
    pub recorder: Recorder<S>,
    /// The plan.
    pub plan: Plan,
    /// The lookups' answers.
    pub answers: Answers,
    /// Exports of other stacks the template imports.
    pub imports: Vec<String>,
    /// The evaluated conditions.
    pub conditions: IndexMap<String, bool>,
    /// `NoEcho` parameter values, to mask.
    pub secrets: Vec<String>,
    /// How it runs.
    pub options: DeployOptions,
}

/// A planned deploy, as stored for tasks that run elsewhere (Step Functions): everything a
/// handler needs to rebuild its [`Deployment`].
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct PlanDocument {
    /// The stack.
    pub input: StackInput,
    /// The deploy id.
    pub deploy_id: String,
    /// The plan.
    pub plan: Plan,
    /// The lookups' answers.
    pub answers: Answers,
    /// Exports of other stacks the template imports.
    pub imports: Vec<String>,
    /// Keep what a failed deploy did.
    pub no_rollback: bool,
    /// At most this many actions at once.
    pub concurrency: usize,
}

/// What a resource handler did.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(tag = "outcome", content = "reason", rename_all = "kebab-case")]
pub enum Done {
    /// Created.
    Created,
    /// Updated in place.
    Updated,
    /// Replaced by a new resource (the predecessor goes in cleanup).
    Replaced,
    /// Deleted.
    Deleted,
    /// Left the stack, stays in AWS.
    Retained(String),
    /// Not done, and why.
    Skipped(String),
}

impl Done {
    /// The outcome as progress lines and task results say it.
    pub fn word(&self) -> &'static str {
        match self {
            Done::Created => "created",
            Done::Updated => "updated",
            Done::Replaced => "replaced",
            Done::Deleted => "deleted",
            Done::Retained(_) => "retained",
            Done::Skipped(_) => "skipped",
        }
    }
}

/// What each resource task did, collected as they finish.
type Results = Arc<std::sync::Mutex<Vec<(String, Result<Done, Failure>)>>>;

/// One cleanup action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(tag = "kind", content = "id", rename_all = "kebab-case")]
pub enum Cleanup {
    /// Delete a resource the template no longer has.
    Removed(String),
    /// Delete the predecessor (this physical id) of a replaced resource.
    Predecessor(String),
}

impl Cleanup {
    /// The id of its task in the cleanup graph.
    pub fn task_id(&self) -> String {
        match self {
            Cleanup::Removed(id) => id.clone(),
            Cleanup::Predecessor(p) => format!("predecessor:{p}"),
        }
    }
}

impl<S: EventStore + 'static> Deployment<S> {
    /// The document that lets another process resume this deploy.
    pub fn document(&self) -> PlanDocument {
        PlanDocument {
            input: (*self.input).clone(),
            deploy_id: self.deploy_id.clone(),
            plan: self.plan.clone(),
            answers: self.answers.clone(),
            imports: self.imports.clone(),
            no_rollback: self.options.no_rollback,
            concurrency: self.options.concurrency,
        }
    }

    /// Rebuilds a deploy planned elsewhere, with the stack's state as it is now.
    pub async fn resume(
        engine: Arc<Engine<S>>,
        doc: PlanDocument,
    ) -> Result<Deployment<S>, EngineError> {
        let recorder = Recorder::load(engine.store.clone(), engine.stream(&doc.input.name)).await?;
        let mut options = DeployOptions::new();
        options.no_rollback = doc.no_rollback;
        options.concurrency = doc.concurrency;
        let secrets = doc.input.parameters.secret_values();
        Ok(Deployment {
            engine,
            conditions: doc.plan.conditions.clone(),
            input: Arc::new(doc.input),
            deploy_id: doc.deploy_id,
            recorder,
            plan: doc.plan,
            answers: doc.answers,
            imports: doc.imports,
            secrets,
            options,
        })
    }

    /// The provision actions in the order they may start, each with the actions it waits
    /// for.
    pub fn provision_tasks(&self) -> Vec<Task> {
        let active: BTreeSet<&str> = self
            .plan
            .resources
            .iter()
            .filter(|r| matches!(r.action, Action::Create | Action::Update | Action::Replace))
            .map(|r| r.logical_id.as_str())
            .collect();
        self.plan
            .resources
            .iter()
            .filter(|r| active.contains(r.logical_id.as_str()))
            .map(|r| {
                Task::new(
                    r.logical_id.clone(),
                    r.depends_on
                        .iter()
                        .filter(|x| active.contains(x.as_str()))
                        .cloned(),
                )
            })
            .collect()
    }

    fn stack(&self) -> &str {
        &self.input.name
    }

    fn holds(&self) -> Precondition {
        Precondition::HoldsLock(self.deploy_id.clone())
    }

    fn key(&self, id: &str, op: Operation, phase: &str) -> String {
        format!("{}/{id}/{}/{phase}", self.deploy_id, op_name(op))
    }

    /// **Plan** handler: takes the lock, reconciles interrupted calls of earlier runs,
    /// and plans the deploy. `Ok(None)`: nothing to do (and the lock was never taken).
    pub async fn begin(
        engine: Arc<Engine<S>>,
        input: StackInput,
        options: DeployOptions,
    ) -> Result<(Option<Deployment<S>>, StackReport), EngineError> {
        let deploy_id = options.deploy_id.clone().unwrap_or_else(|| new_id("d"));
        let mut report = StackReport::new(&input.name, &deploy_id);
        let stream = engine.stream(&input.name);
        let recorder = Recorder::load(engine.store.clone(), stream).await?;
        let input = Arc::new(input);
        let (answers, imports) = engine.gather(&input, &recorder, true).await?;
        let secrets = input.parameters.secret_values();

        let plan_now = |recorder: &Recorder<S>, answers: &Answers| -> Result<Plan, EngineError> {
            let state = recorder.state().to_current_state();
            plan(&PlanInput {
                stack: &input.name,
                template: &input.template,
                parameters: &input.parameters,
                pseudo: &input.pseudo,
                state: &state,
                env: answers,
            })
            .map_err(|e| EngineError::Template(e.in_file(&input.source)))
        };
        let first = plan_now(&recorder, &answers)?;
        {
            let state = recorder.state();
            let settled = state.pending.is_empty()
                && state.predecessors.is_empty()
                && state
                    .last_deploy
                    .as_ref()
                    .is_some_and(|d| d.status == DeployStatus::Completed);
            let outputs_same = first.outputs.iter().all(|(k, o)| {
                state.outputs.get(k) == Some(&o.value)
                    && o.export_name
                        .as_ref()
                        .and_then(Value::as_str)
                        .is_none_or(|n| state.exports.contains_key(n))
            }) && state.outputs.len() == first.outputs.len();
            let digest_same = state.template_digest.as_deref() == Some(&input.digest());
            if first.is_empty() && settled && outputs_same && digest_same {
                report.status = StackStatus::NoChanges;
                report.outputs = state.outputs.clone();
                return Ok((None, report));
            }
        }

        let holder = Holder {
            deploy_id: deploy_id.clone(),
            who: engine.who.clone(),
            since: now(),
            operation: "deploy".into(),
        };
        let started = Event::DeployStarted {
            deploy_id: deploy_id.clone(),
            who: engine.who.clone(),
            template_digest: input.digest(),
            parameters: input.parameters.for_record(),
            no_rollback: options.no_rollback,
        };
        // An interrupted rollback is finished before anything else.
        let unfinished_rollback = {
            let s = recorder.state();
            s.pending
                .values()
                .any(|p| p.operation == Operation::Undo)
                .then(|| s.journal.deploy_id.clone())
                .flatten()
        };
        if let Some(failed) = unfinished_rollback {
            // Take the lock as a rollback, finish it, then release: the deploy starts next.
            let rollback = OwnedRollback::begin(engine.clone(), &input.name, Some(failed)).await?;
            let r = rollback.run().await?;
            if !r.complete() {
                return Err(EngineError::Other(format!(
                    "stack {}: an interrupted rollback could not be finished; run `stackflow rollback --stack {}` and fix what it reports",
                    input.name, input.name
                )));
            }
            recorder.reload().await?;
        }
        if let Some(note) = {
            let s = recorder.state();
            match &s.last_deploy {
                Some(d)
                    if matches!(d.status, DeployStatus::Failed | DeployStatus::InProgress)
                        && s.journal.to_undo().next().is_some() =>
                {
                    Some(format!(
                        "the last deploy {} did not finish and was not rolled back; this deploy continues from what it left",
                        d.deploy_id
                    ))
                }
                _ => None,
            }
        } {
            engine.note(&input.name, &note);
        }
        engine
            .take_lock(&recorder, format!("{deploy_id}/started"), started, holder)
            .await?;

        let mut deployment = Deployment {
            engine: engine.clone(),
            input: input.clone(),
            deploy_id: deploy_id.clone(),
            recorder,
            plan: first,
            answers,
            imports,
            conditions: IndexMap::new(),
            secrets,
            options,
        };
        report.recovered = deployment.reconcile().await?;
        deployment.plan = plan_now(&deployment.recorder, &deployment.answers)?;
        deployment.conditions = deployment.plan.conditions.clone();
        Ok((Some(deployment), report))
    }

    /// Settles every intent without an outcome that earlier runs left: replays the call
    /// with the recorded token (which makes nothing twice) and records what AWS answered.
    async fn reconcile(&self) -> Result<usize, EngineError> {
        let pending: Vec<PendingIntent> = {
            let s = self.recorder.state();
            s.pending
                .values()
                .filter(|p| p.deploy_id != self.deploy_id)
                .cloned()
                .collect()
        };
        let mut n = 0;
        for p in pending {
            n += 1;
            let outcome =
                reconcile_one(&self.engine, &self.recorder, &self.holds(), &p, Some(self)).await?;
            self.engine
                .progress
                .report(ProgressEvent::ResourceFinished {
                    stack: self.stack(),
                    logical_id: &p.logical_id,
                    resource_type: &p.resource_type,
                    outcome: "recovered",
                    seconds: 0.0,
                    detail: Some(&outcome),
                });
        }
        Ok(n)
    }

    /// Resolves a resource's properties against the state now: the properties to record
    /// (dynamic references as text, `NoEcho` values masked) and to send.
    fn resolve_resource(&self, id: &str) -> Result<Map<String, Value>, TemplateError> {
        let state = self.recorder.state();
        let env = DeployEnv {
            state: &state,
            answers: &self.answers,
        };
        let resolver = Resolver::new(
            &self.input.template,
            &self.input.parameters,
            &self.input.pseudo,
            &self.conditions,
            &env,
            Mode::Deploy,
        );
        resolver
            .resolve_properties(id)
            .map_err(|e| e.in_file(&self.input.source))
    }

    async fn fail_resource(
        &self,
        id: &str,
        resource_type: &str,
        op: Operation,
        error: ErrorInfo,
    ) -> Result<Failure, EngineError> {
        self.recorder
            .append(
                self.key(id, op, "failed"),
                Event::ResourceFailed {
                    deploy_id: self.deploy_id.clone(),
                    logical_id: id.to_string(),
                    operation: op,
                    error: error.clone(),
                },
                &self.holds(),
            )
            .await?;
        Ok(Failure {
            logical_id: id.to_string(),
            resource_type: resource_type.to_string(),
            action: op_name(op).to_string(),
            error,
        })
    }

    /// **Provision** handler: one create, update or replacement of resource `id`.
    pub async fn provision(&self, id: &str) -> Result<Result<Done, Failure>, EngineError> {
        let Some(rp) = self.plan.resource(id).cloned() else {
            return Err(EngineError::Other(format!(
                "resource {id} is not in the plan"
            )));
        };
        let op = match rp.action {
            Action::Create => Operation::Create,
            Action::Update => Operation::Update,
            Action::Replace => Operation::Replace,
            Action::NoOp => return Ok(Ok(Done::Updated)),
            Action::Delete => {
                return Err(EngineError::Other(format!(
                    "{id} is deleted in cleanup, not provisioned"
                )));
            }
        };
        // A retried task (its worker died after the outcome was recorded) finds it done.
        if let Some(done) = self.already_done(id) {
            return Ok(Ok(done));
        }
        let ty = rp.resource_type.clone();
        let props = match self.resolve_resource(id) {
            Ok(p) => p,
            Err(e) => {
                let info = ErrorInfo {
                    name: "InvalidTemplate".into(),
                    message: mask_text(&e.to_string(), None, &self.secrets),
                };
                return Ok(Err(self.fail_resource(id, &ty, op, info).await?));
            }
        };
        let record_props = as_map(mask_values(&Value::Object(props.clone()), &self.secrets));
        let template_resource = &self.input.template.resources[id];
        let record = |physical_id: String,
                      attributes: IndexMap<String, Value>,
                      kind: ProviderKind| ResourceRecord {
            logical_id: id.to_string(),
            resource_type: ty.clone(),
            physical_id,
            properties: record_props.clone(),
            attributes,
            dependencies: rp.depends_on.clone(),
            provider: kind,
            deletion_policy: template_resource.deletion_policy,
            update_replace_policy: template_resource.update_replace_policy,
        };

        if ty == "AWS::CloudFormation::Stack" {
            return self
                .provision_nested(id, op, &props, &record_props, record)
                .await;
        }

        let (call_props, resolution) = match self.engine.resolve_dynamic(&props).await {
            Ok(x) => x,
            Err((name, message)) => {
                let info = ErrorInfo {
                    name,
                    message: mask_text(&message, None, &self.secrets),
                };
                return Ok(Err(self.fail_resource(id, &ty, op, info).await?));
            }
        };
        let (recorded_kind, previous, physical) = {
            let s = self.recorder.state();
            match s.resources.get(id) {
                Some(r) => (
                    Some(r.provider),
                    Some(r.properties.clone()),
                    Some(r.physical_id.clone()),
                ),
                None => (None, None, None),
            }
        };
        let routed = match self.engine.providers.route(&ty, &call_props, recorded_kind) {
            Ok(r) => r,
            Err(message) => {
                let info = ErrorInfo {
                    name: "Unsupported".into(),
                    message,
                };
                return Ok(Err(self.fail_resource(id, &ty, op, info).await?));
            }
        };
        let token = format!("{}/{id}/{}", self.deploy_id, op_name(op));
        self.recorder
            .append(
                self.key(id, op, "intent"),
                Event::ResourceIntent {
                    deploy_id: self.deploy_id.clone(),
                    logical_id: id.to_string(),
                    resource_type: ty.clone(),
                    operation: op,
                    token: token.clone(),
                    provider: routed.kind,
                    physical_id: if op == Operation::Create {
                        None
                    } else {
                        physical.clone()
                    },
                    properties: Some(record_props.clone()),
                },
                &self.holds(),
            )
            .await?;
        let mut request = ResourceRequest::new(self.stack(), id, &ty, call_props);
        request.token = token;
        let mask = |e: &ProviderError| ErrorInfo {
            name: e.name().to_string(),
            message: mask_text(e.message(), Some(&resolution), &self.secrets),
        };
        match op {
            Operation::Create | Operation::Replace => {
                match routed.provider.create(&request).await {
                    Ok(created) => {
                        self.recorder
                            .append(
                                self.key(id, op, "done"),
                                Event::ResourceCreated {
                                    deploy_id: self.deploy_id.clone(),
                                    resource: record(
                                        created.physical_id,
                                        created.attributes,
                                        routed.kind,
                                    ),
                                    replaces: if op == Operation::Replace {
                                        physical.clone()
                                    } else {
                                        None
                                    },
                                    baseline: None,
                                },
                                &self.holds(),
                            )
                            .await?;
                        Ok(Ok(if op == Operation::Replace {
                            Done::Replaced
                        } else {
                            Done::Created
                        }))
                    }
                    Err(e) => Ok(Err(self.fail_resource(id, &ty, op, mask(&e)).await?)),
                }
            }
            _ => {
                request.physical_id = physical.clone();
                request.previous_properties = previous;
                match routed.provider.update(&request).await {
                    Ok(updated) if !updated.replaced => {
                        self.recorder
                            .append(
                                self.key(id, op, "done"),
                                Event::ResourceUpdated {
                                    deploy_id: self.deploy_id.clone(),
                                    resource: record(
                                        updated.physical_id,
                                        updated.attributes,
                                        routed.kind,
                                    ),
                                    previous_properties: request
                                        .previous_properties
                                        .clone()
                                        .unwrap_or_default(),
                                    baseline: None,
                                },
                                &self.holds(),
                            )
                            .await?;
                        Ok(Ok(Done::Updated))
                    }
                    Ok(updated) => {
                        // The provider made a new resource itself: the old one is a
                        // predecessor, deleted in cleanup.
                        self.recorder
                            .append(
                                self.key(id, Operation::Replace, "done"),
                                Event::ResourceCreated {
                                    deploy_id: self.deploy_id.clone(),
                                    resource: record(
                                        updated.physical_id,
                                        updated.attributes,
                                        routed.kind,
                                    ),
                                    replaces: physical.clone(),
                                    baseline: None,
                                },
                                &self.holds(),
                            )
                            .await?;
                        self.settle_skipped(id, op, "the provider replaced the resource")
                            .await?;
                        Ok(Ok(Done::Replaced))
                    }
                    Err(ProviderError::NotUpdatable(why)) => {
                        // AWS cannot make this change in place: replace instead.
                        self.settle_skipped(id, op, &format!("not updatable in place: {why}"))
                            .await?;
                        let rop = Operation::Replace;
                        let token = format!("{}/{id}/{}", self.deploy_id, op_name(rop));
                        self.recorder
                            .append(
                                self.key(id, rop, "intent"),
                                Event::ResourceIntent {
                                    deploy_id: self.deploy_id.clone(),
                                    logical_id: id.to_string(),
                                    resource_type: ty.clone(),
                                    operation: rop,
                                    token: token.clone(),
                                    provider: routed.kind,
                                    physical_id: physical.clone(),
                                    properties: Some(record_props.clone()),
                                },
                                &self.holds(),
                            )
                            .await?;
                        request.token = token;
                        request.physical_id = None;
                        request.previous_properties = None;
                        match routed.provider.create(&request).await {
                            Ok(created) => {
                                self.recorder
                                    .append(
                                        self.key(id, rop, "done"),
                                        Event::ResourceCreated {
                                            deploy_id: self.deploy_id.clone(),
                                            resource: record(
                                                created.physical_id,
                                                created.attributes,
                                                routed.kind,
                                            ),
                                            replaces: physical.clone(),
                                            baseline: None,
                                        },
                                        &self.holds(),
                                    )
                                    .await?;
                                Ok(Ok(Done::Replaced))
                            }
                            Err(e) => Ok(Err(self.fail_resource(id, &ty, rop, mask(&e)).await?)),
                        }
                    }
                    Err(e) => Ok(Err(self.fail_resource(id, &ty, op, mask(&e)).await?)),
                }
            }
        }
    }

    /// What this deploy already did to `id`, from its journal.
    fn already_done(&self, id: &str) -> Option<Done> {
        let s = self.recorder.state();
        if s.journal.deploy_id.as_deref() != Some(&self.deploy_id) {
            return None;
        }
        s.journal
            .entries
            .iter()
            .rev()
            .find(|e| e.logical_id == id)
            .map(|e| match e.step {
                JournalStep::Created { .. } => Done::Created,
                JournalStep::Updated { .. } => Done::Updated,
                JournalStep::Replaced { .. } => Done::Replaced,
            })
    }

    async fn settle_skipped(
        &self,
        id: &str,
        op: Operation,
        reason: &str,
    ) -> Result<(), EngineError> {
        self.recorder
            .append(
                self.key(id, op, "skipped"),
                Event::ResourceSkipped {
                    deploy_id: self.deploy_id.clone(),
                    logical_id: id.to_string(),
                    operation: op,
                    reason: reason.to_string(),
                },
                &self.holds(),
            )
            .await?;
        Ok(())
    }

    /// A nested stack: deployed as a child stack with its own stream.
    async fn provision_nested(
        &self,
        id: &str,
        op: Operation,
        props: &Map<String, Value>,
        record_props: &Map<String, Value>,
        record: impl Fn(String, IndexMap<String, Value>, ProviderKind) -> ResourceRecord,
    ) -> Result<Result<Done, Failure>, EngineError> {
        let ty = "AWS::CloudFormation::Stack";
        let Some(nested) = self.input.nested.get(id) else {
            let info = ErrorInfo {
                name: "InvalidTemplate".into(),
                message: format!(
                    "{}: Resources.{id}: the nested stack's template was not found (a cdk.out names it in the resource's Metadata `aws:asset:path`)",
                    self.input.source
                ),
            };
            return Ok(Err(self.fail_resource(id, ty, op, info).await?));
        };
        let child_name = {
            let s = self.recorder.state();
            s.resources
                .get(id)
                .map(|r| r.physical_id.clone())
                .unwrap_or_else(|| nested_stack_name(self.stack(), id))
        };
        let token = format!("{}/{id}/{}", self.deploy_id, op_name(op));
        self.recorder
            .append(
                self.key(id, op, "intent"),
                Event::ResourceIntent {
                    deploy_id: self.deploy_id.clone(),
                    logical_id: id.to_string(),
                    resource_type: ty.to_string(),
                    operation: op,
                    token,
                    provider: ProviderKind::NestedStack,
                    physical_id: Some(child_name.clone()),
                    properties: Some(record_props.clone()),
                },
                &self.holds(),
            )
            .await?;
        let child = match child_input(&self.input, &child_name, nested, props) {
            Ok(c) => c,
            Err(message) => {
                let info = ErrorInfo {
                    name: "InvalidTemplate".into(),
                    message: mask_text(&message, None, &self.secrets),
                };
                return Ok(Err(self.fail_resource(id, ty, op, info).await?));
            }
        };
        let report = deploy_boxed(self.engine.clone(), child, self.options.clone()).await;
        let report = match report {
            Ok(r) => r,
            Err(e) => {
                let info = ErrorInfo {
                    name: "NestedStackFailed".into(),
                    message: mask_text(&e.to_string(), None, &self.secrets),
                };
                return Ok(Err(self.fail_resource(id, ty, op, info).await?));
            }
        };
        if !matches!(
            report.status,
            StackStatus::Succeeded | StackStatus::NoChanges
        ) {
            let first = report
                .failures
                .first()
                .map(|f| {
                    format!(
                        "{} ({}): {}",
                        f.logical_id, f.resource_type, f.error.message
                    )
                })
                .unwrap_or_else(|| "it did not finish".into());
            let info = ErrorInfo {
                name: "NestedStackFailed".into(),
                message: format!("nested stack {child_name} failed: {first}"),
            };
            return Ok(Err(self.fail_resource(id, ty, op, info).await?));
        }
        let attributes: IndexMap<String, Value> = report
            .outputs
            .iter()
            .map(|(k, v)| (format!("Outputs.{k}"), v.clone()))
            .collect();
        let event = if op == Operation::Update {
            Event::ResourceUpdated {
                deploy_id: self.deploy_id.clone(),
                resource: record(child_name, attributes, ProviderKind::NestedStack),
                previous_properties: self
                    .recorder
                    .state()
                    .resources
                    .get(id)
                    .map(|r| r.properties.clone())
                    .unwrap_or_default(),
                baseline: None,
            }
        } else {
            Event::ResourceCreated {
                deploy_id: self.deploy_id.clone(),
                resource: record(child_name, attributes, ProviderKind::NestedStack),
                replaces: None,
                baseline: None,
            }
        };
        self.recorder
            .append(self.key(id, op, "done"), event, &self.holds())
            .await?;
        Ok(Ok(if op == Operation::Update {
            Done::Updated
        } else {
            Done::Created
        }))
    }

    /// The cleanup actions: removed resources and replaced predecessors, in the order
    /// they may run (a resource before what it depended on).
    pub fn cleanup_tasks(&self) -> (Vec<Cleanup>, Vec<Task>) {
        let s = self.recorder.state();
        let removed: Vec<String> = self
            .plan
            .resources
            .iter()
            .filter(|r| r.action == Action::Delete)
            .map(|r| r.logical_id.clone())
            .collect();
        cleanup_graph(&s, &removed)
    }

    /// **Cleanup** handler: deletes (or retains) one removed resource or predecessor.
    pub async fn cleanup(&self, item: &Cleanup) -> Result<Result<Done, Failure>, EngineError> {
        delete_one(
            &self.engine,
            &self.recorder,
            &self.deploy_id,
            &self.holds(),
            item,
            &self.options,
        )
        .await
    }

    /// **Finish** handler: resolves and records outputs and exports, releases the lock.
    pub async fn finish(&self) -> Result<IndexMap<String, Value>, EngineError> {
        let (outputs, exports) = {
            let state = self.recorder.state();
            let env = DeployEnv {
                state: &state,
                answers: &self.answers,
            };
            let resolver = Resolver::new(
                &self.input.template,
                &self.input.parameters,
                &self.input.pseudo,
                &self.conditions,
                &env,
                Mode::Deploy,
            );
            let mut outputs = IndexMap::new();
            let mut exports = IndexMap::new();
            for (name, o) in &self.input.template.outputs {
                if let Some(c) = &o.condition
                    && !self.conditions.get(c).copied().unwrap_or(true)
                {
                    continue;
                }
                let p = Path::from_keys(["Outputs", name]);
                let value = resolver
                    .resolve(&o.value, &p.key("Value"))
                    .map_err(|e| e.in_file(&self.input.source))?
                    .unwrap_or(Value::Null);
                let value = mask_values(&value, &self.secrets);
                if let Some(e) = &o.export_name {
                    let export = resolver
                        .resolve(e, &p.key("Export").key("Name"))
                        .map_err(|e| e.in_file(&self.input.source))?;
                    if let Some(Value::String(export)) = export {
                        exports.insert(export, value.clone());
                    }
                }
                outputs.insert(name.clone(), value);
            }
            (outputs, exports)
        };
        self.recorder
            .append(
                format!("{}/completed", self.deploy_id),
                Event::DeployCompleted {
                    deploy_id: self.deploy_id.clone(),
                    outputs: outputs.clone(),
                    exports,
                    imports: self.imports.clone(),
                },
                &self.holds(),
            )
            .await?;
        self.release().await?;
        Ok(outputs)
    }

    async fn release(&self) -> Result<(), EngineError> {
        self.recorder
            .append(
                format!("{}/released", self.deploy_id),
                Event::LockReleased {
                    deploy_id: self.deploy_id.clone(),
                },
                &Precondition::ReleaseLock(self.deploy_id.clone()),
            )
            .await?;
        Ok(())
    }

    /// **Fail** handler: records the failure; then the journal is undone (unless
    /// `--no-rollback`, or `roll_back` is false: a deploy the user stopped) and the lock
    /// released.
    pub async fn fail(
        &self,
        first: Option<&Failure>,
        why: &str,
        roll_back: bool,
    ) -> Result<Option<RollbackReport>, EngineError> {
        let (error, logical_id) = match first {
            Some(f) => (f.error.clone(), Some(f.logical_id.clone())),
            None => (
                ErrorInfo {
                    name: "Interrupted".into(),
                    message: why.to_string(),
                },
                None,
            ),
        };
        self.recorder
            .append(
                format!("{}/failed", self.deploy_id),
                Event::DeployFailed {
                    deploy_id: self.deploy_id.clone(),
                    error,
                    logical_id,
                },
                &self.holds(),
            )
            .await?;
        let rollback = if self.options.no_rollback || !roll_back {
            None
        } else {
            let rollback = Rollback {
                engine: self.engine.clone(),
                stack: self.stack().to_string(),
                rollback_id: format!("{}-rollback", self.deploy_id),
                lock_id: self.deploy_id.clone(),
                deploy_id: self.deploy_id.clone(),
                recorder: &self.recorder,
            };
            Some(rollback.undo_all().await?)
        };
        self.release().await?;
        Ok(rollback)
    }
}

/// The name of a nested stack's child stack.
pub fn nested_stack_name(parent: &str, logical_id: &str) -> String {
    format!("{parent}-{logical_id}")
}

/// The input of a nested stack: its template, and the `Parameters` property as values.
fn child_input(
    parent: &StackInput,
    child_name: &str,
    nested: &NestedTemplate,
    props: &Map<String, Value>,
) -> Result<StackInput, String> {
    let mut values: IndexMap<String, String> = IndexMap::new();
    if let Some(Value::Object(params)) = props.get("Parameters") {
        for (k, v) in params {
            let text = match v {
                Value::String(s) => s.clone(),
                Value::Array(items) => items
                    .iter()
                    .map(|i| {
                        i.as_str()
                            .map(str::to_string)
                            .unwrap_or_else(|| i.to_string())
                    })
                    .collect::<Vec<_>>()
                    .join(","),
                other => other.to_string(),
            };
            values.insert(k.clone(), text);
        }
    }
    let parameters = bind_parameters(&nested.template, &values)
        .map_err(|e| e.in_file(nested.file.display()).to_string())?;
    let mut pseudo = parent.pseudo.clone();
    pseudo.stack_name = child_name.to_string();
    pseudo.stack_id = None;
    Ok(StackInput {
        name: child_name.to_string(),
        source: nested.file.display().to_string(),
        template: nested.template.clone(),
        parameters,
        pseudo,
        nested: nested.nested.clone(),
    })
}

/// The logical id and type a cleanup item is about, for progress lines.
fn cleanup_subject(
    state: &stackflow_events::projection::StackState,
    item: &Cleanup,
) -> (String, String) {
    match item {
        Cleanup::Removed(id) => (
            id.clone(),
            state
                .resources
                .get(id)
                .map(|r| r.resource_type.clone())
                .unwrap_or_default(),
        ),
        Cleanup::Predecessor(p) => state
            .predecessors
            .get(p)
            .map(|x| (x.logical_id.clone(), x.resource.resource_type.clone()))
            .unwrap_or_default(),
    }
}

/// The cleanup graph over `removed` resources and every predecessor in `state`.
fn cleanup_graph(
    state: &stackflow_events::projection::StackState,
    removed: &[String],
) -> (Vec<Cleanup>, Vec<Task>) {
    let mut items: Vec<Cleanup> = removed.iter().cloned().map(Cleanup::Removed).collect();
    items.extend(state.predecessors.keys().cloned().map(Cleanup::Predecessor));
    // Forward edges: an item waits for nothing; what it depended on must wait for it.
    let node_of = |logical: &str| -> Vec<String> {
        let mut out = Vec::new();
        if removed.iter().any(|r| r == logical) {
            out.push(logical.to_string());
        }
        for (p, pred) in &state.predecessors {
            if pred.logical_id == logical {
                out.push(format!("predecessor:{p}"));
            }
        }
        out
    };
    let forward: Vec<Task> = items
        .iter()
        .map(|item| {
            let deps: Vec<String> = match item {
                Cleanup::Removed(id) => state
                    .resources
                    .get(id)
                    .map(|r| r.dependencies.clone())
                    .unwrap_or_default(),
                Cleanup::Predecessor(p) => state.predecessors[p].resource.dependencies.clone(),
            }
            .iter()
            .flat_map(|d| node_of(d))
            .filter(|d| *d != item.task_id())
            .collect();
            Task::new(item.task_id(), deps)
        })
        .collect();
    (items, schedule::reversed(&forward))
}

/// Deletes (or retains) one removed resource or predecessor, recording the outcome under
/// `run_id`.
async fn delete_one<S: EventStore + 'static>(
    engine: &Arc<Engine<S>>,
    rec: &Recorder<S>,
    run_id: &str,
    pre: &Precondition,
    item: &Cleanup,
    options: &DeployOptions,
) -> Result<Result<Done, Failure>, EngineError> {
    let (logical_id, resource, replaced) = {
        let s = rec.state();
        match item {
            Cleanup::Removed(id) => match s.resources.get(id) {
                Some(r) => (id.clone(), r.clone(), false),
                None => return Ok(Ok(Done::Deleted)),
            },
            Cleanup::Predecessor(p) => match s.predecessors.get(p) {
                Some(pred) => (pred.logical_id.clone(), pred.resource.clone(), true),
                None => return Ok(Ok(Done::Deleted)),
            },
        }
    };
    let op = Operation::Delete;
    // Two old copies of one resource can wait for deletion at once: the physical id keeps
    // their keys apart.
    let action = if replaced {
        format!("delete-old-{}", short_hash(&resource.physical_id))
    } else {
        "delete".to_string()
    };
    let key = |phase: &str| format!("{run_id}/{logical_id}/{action}/{phase}");
    let policy = if replaced {
        resource.update_replace_policy
    } else {
        resource.deletion_policy
    };
    if keeps(policy) {
        let reason = format!(
            "{}: {}",
            if replaced {
                "UpdateReplacePolicy"
            } else {
                "DeletionPolicy"
            },
            policy.map(Policy::as_str).unwrap_or("Retain")
        );
        rec.append(
            key("retained"),
            Event::ResourceRetained {
                deploy_id: run_id.to_string(),
                logical_id: logical_id.clone(),
                physical_id: resource.physical_id.clone(),
                reason: reason.clone(),
                replaced,
            },
            pre,
        )
        .await?;
        return Ok(Ok(Done::Retained(reason)));
    }
    rec.append(
        key("intent"),
        Event::ResourceIntent {
            deploy_id: run_id.to_string(),
            logical_id: logical_id.clone(),
            resource_type: resource.resource_type.clone(),
            operation: op,
            token: format!("{run_id}/{logical_id}/{action}"),
            provider: resource.provider,
            physical_id: Some(resource.physical_id.clone()),
            properties: None,
        },
        pre,
    )
    .await?;
    let outcome: Result<Deleted, ErrorInfo> = if resource.provider == ProviderKind::NestedStack {
        match destroy_boxed(engine.clone(), &resource.physical_id, options.clone()).await {
            Ok(r) if r.status == StackStatus::Succeeded => Ok(Deleted::Done),
            Ok(r) if r.status == StackStatus::Partial => Ok(Deleted::Skipped {
                reason: format!("nested stack {} kept some resources", r.stack),
            }),
            Ok(r) => Err(ErrorInfo {
                name: "NestedStackFailed".into(),
                message: r
                    .failures
                    .first()
                    .map(|f| f.error.message.clone())
                    .unwrap_or_else(|| "the nested stack was not destroyed".into()),
            }),
            Err(e) => Err(ErrorInfo {
                name: "NestedStackFailed".into(),
                message: e.to_string(),
            }),
        }
    } else {
        match engine
            .providers
            .for_recorded(&resource.resource_type, resource.provider)
        {
            Err(message) => Err(ErrorInfo {
                name: "Unsupported".into(),
                message,
            }),
            Ok(provider) => {
                let mut request = ResourceRequest::new(
                    &rec.stream().stack,
                    &logical_id,
                    &resource.resource_type,
                    resource.properties.clone(),
                );
                request.physical_id = Some(resource.physical_id.clone());
                request.token = format!("{run_id}/{logical_id}/{action}");
                Deleted::unless_missing(provider.delete(&request).await).map_err(|e| error_info(&e))
            }
        }
    };
    match outcome {
        Ok(Deleted::Done) => {
            rec.append(
                key("done"),
                Event::ResourceDeleted {
                    deploy_id: run_id.to_string(),
                    logical_id: logical_id.clone(),
                    physical_id: resource.physical_id.clone(),
                    replaced,
                },
                pre,
            )
            .await?;
            Ok(Ok(Done::Deleted))
        }
        Ok(Deleted::Skipped { reason }) => {
            rec.append(
                key("skipped"),
                Event::ResourceSkipped {
                    deploy_id: run_id.to_string(),
                    logical_id: logical_id.clone(),
                    operation: op,
                    reason: reason.clone(),
                },
                pre,
            )
            .await?;
            Ok(Ok(Done::Skipped(reason)))
        }
        Err(error) => {
            rec.append(
                key("failed"),
                Event::ResourceFailed {
                    deploy_id: run_id.to_string(),
                    logical_id: logical_id.clone(),
                    operation: op,
                    error: error.clone(),
                },
                pre,
            )
            .await?;
            Ok(Err(Failure {
                logical_id,
                resource_type: resource.resource_type,
                action: "delete".into(),
                error,
            }))
        }
    }
}

/// Settles one pending intent of an interrupted run, as `pre` allows. Returns what was
/// found, for the report.
async fn reconcile_one<S: EventStore + 'static>(
    engine: &Arc<Engine<S>>,
    rec: &Recorder<S>,
    pre: &Precondition,
    p: &PendingIntent,
    deployment: Option<&Deployment<S>>,
) -> Result<String, EngineError> {
    let key = |phase: &str| {
        format!(
            "{}/{}/{}/{phase}",
            p.deploy_id,
            p.logical_id,
            op_name(p.operation)
        )
    };
    let skipped = |reason: String| Event::ResourceSkipped {
        deploy_id: p.deploy_id.clone(),
        logical_id: p.logical_id.clone(),
        operation: p.operation,
        reason,
    };
    match p.operation {
        Operation::Undo => Ok("left to the rollback".into()),
        Operation::Update => {
            // Finish the interrupted update with what it sent, so that the state says what
            // AWS holds; the deploy that follows then changes it as its template says.
            let current = rec.state().resources.get(&p.logical_id).cloned();
            let (Some(sent), Some(current)) = (p.properties.clone(), current) else {
                let reason = "interrupted before its outcome was recorded; the next deploy makes the change again".to_string();
                rec.append(key("reconciled"), skipped(reason.clone()), pre)
                    .await?;
                return Ok(reason);
            };
            let replay = async {
                if contains_mask(&Value::Object(sent.clone())) {
                    return Err("its properties hold a masked NoEcho value".to_string());
                }
                let provider = engine
                    .providers
                    .for_recorded(&p.resource_type, p.provider)?;
                let (call, _) = engine.resolve_dynamic(&sent).await.map_err(|(_, m)| m)?;
                let mut request = ResourceRequest::new(
                    &rec.stream().stack,
                    &p.logical_id,
                    &p.resource_type,
                    call,
                );
                request.physical_id = Some(current.physical_id.clone());
                request.previous_properties = Some(current.properties.clone());
                request.token = p.token.clone();
                provider.update(&request).await.map_err(|e| e.to_string())
            };
            match replay.await {
                Ok(updated) => {
                    rec.append(
                        key("reconciled"),
                        Event::ResourceUpdated {
                            deploy_id: p.deploy_id.clone(),
                            resource: ResourceRecord {
                                logical_id: p.logical_id.clone(),
                                resource_type: p.resource_type.clone(),
                                physical_id: updated.physical_id,
                                properties: sent,
                                attributes: updated.attributes,
                                dependencies: current.dependencies.clone(),
                                provider: current.provider,
                                deletion_policy: current.deletion_policy,
                                update_replace_policy: current.update_replace_policy,
                            },
                            previous_properties: current.properties.clone(),
                            baseline: None,
                        },
                        pre,
                    )
                    .await?;
                    Ok("the interrupted update is done; recorded".into())
                }
                Err(m) => {
                    let reason = format!(
                        "interrupted, and could not be finished ({m}); the next deploy makes the change again"
                    );
                    rec.append(key("reconciled"), skipped(reason.clone()), pre)
                        .await?;
                    Ok(reason)
                }
            }
        }
        Operation::Delete => {
            let physical = p.physical_id.clone().unwrap_or_default();
            let replaced = rec.state().predecessors.contains_key(&physical);
            let outcome = if p.provider == ProviderKind::NestedStack {
                destroy_boxed(engine.clone(), &physical, DeployOptions::new())
                    .await
                    .map(|_| Deleted::Done)
                    .map_err(|e| e.to_string())
            } else {
                match engine.providers.for_recorded(&p.resource_type, p.provider) {
                    Err(m) => Err(m),
                    Ok(provider) => {
                        let mut request = ResourceRequest::new(
                            &rec.stream().stack,
                            &p.logical_id,
                            &p.resource_type,
                            p.properties.clone().unwrap_or_default(),
                        );
                        request.physical_id = Some(physical.clone());
                        request.token = p.token.clone();
                        Deleted::unless_missing(provider.delete(&request).await)
                            .map_err(|e| e.to_string())
                    }
                }
            };
            match outcome {
                Ok(_) => {
                    rec.append(
                        key("reconciled"),
                        Event::ResourceDeleted {
                            deploy_id: p.deploy_id.clone(),
                            logical_id: p.logical_id.clone(),
                            physical_id: physical,
                            replaced,
                        },
                        pre,
                    )
                    .await?;
                    Ok("the interrupted delete is done".into())
                }
                Err(m) => {
                    let reason = format!("the interrupted delete could not be finished: {m}");
                    rec.append(key("reconciled"), skipped(reason.clone()), pre)
                        .await?;
                    Ok(reason)
                }
            }
        }
        Operation::Create | Operation::Replace => {
            if p.provider == ProviderKind::NestedStack {
                let reason =
                    "an interrupted nested stack is reconciled by its own next deploy".to_string();
                rec.append(key("reconciled"), skipped(reason.clone()), pre)
                    .await?;
                return Ok(reason);
            }
            // The properties: from the template when this deploy has the resource (the
            // recorded ones have NoEcho values masked), else the recorded ones.
            let (props, deps, deletion_policy, update_replace_policy) = match deployment {
                Some(d) if d.input.template.resources.contains_key(&p.logical_id) => {
                    let r = &d.input.template.resources[&p.logical_id];
                    let deps = {
                        let graph = stackflow_core::graph::Graph::build(
                            &d.input.template,
                            &d.plan.conditions,
                        );
                        graph
                            .ok()
                            .map(|g| {
                                g.dependencies(&p.logical_id)
                                    .into_iter()
                                    .map(String::from)
                                    .collect::<Vec<_>>()
                            })
                            .unwrap_or_default()
                    };
                    let conditions = d.plan.conditions.clone();
                    let props = {
                        let state = rec.state();
                        let env = DeployEnv {
                            state: &state,
                            answers: &d.answers,
                        };
                        Resolver::new(
                            &d.input.template,
                            &d.input.parameters,
                            &d.input.pseudo,
                            &conditions,
                            &env,
                            Mode::Deploy,
                        )
                        .resolve_properties(&p.logical_id)
                        .ok()
                    };
                    // The call is replayed with what it sent: the recorded properties. Only
                    // where those hold a masked `NoEcho` value (which must not be sent) do
                    // the template's come in.
                    let recorded = p
                        .properties
                        .clone()
                        .filter(|r| !contains_mask(&Value::Object(r.clone())));
                    (
                        recorded.or(props).or_else(|| p.properties.clone()),
                        deps,
                        r.deletion_policy,
                        r.update_replace_policy,
                    )
                }
                _ => (p.properties.clone(), vec![], None, None),
            };
            let Some(props) = props else {
                let reason = "interrupted, and its properties are not known: check AWS for a resource made by this call".to_string();
                rec.append(key("reconciled"), skipped(reason.clone()), pre)
                    .await?;
                return Ok(reason);
            };
            let record_props = match deployment {
                Some(d) => as_map(mask_values(&Value::Object(props.clone()), &d.secrets)),
                None => props.clone(),
            };
            let call_props = match engine.resolve_dynamic(&props).await {
                Ok((c, _)) => c,
                Err((_, m)) => {
                    let reason = format!("interrupted, and cannot be replayed: {m}");
                    rec.append(key("reconciled"), skipped(reason.clone()), pre)
                        .await?;
                    return Ok(reason);
                }
            };
            let provider = match engine.providers.for_recorded(&p.resource_type, p.provider) {
                Ok(x) => x,
                Err(m) => {
                    rec.append(key("reconciled"), skipped(m.clone()), pre)
                        .await?;
                    return Ok(m);
                }
            };
            let mut request = ResourceRequest::new(
                &rec.stream().stack,
                &p.logical_id,
                &p.resource_type,
                call_props,
            );
            request.token = p.token.clone();
            let found = match provider.create(&request).await {
                Ok(c) => Ok((c.physical_id, c.attributes)),
                Err(ProviderError::AlreadyExists(m)) => match provider.import(&request).await {
                    Ok(Imported::Found {
                        physical_id,
                        attributes,
                    }) => Ok((physical_id, attributes)),
                    _ => Err(ProviderError::AlreadyExists(m)),
                },
                Err(e) => Err(e),
            };
            match found {
                Ok((physical_id, attributes)) => {
                    rec.append(
                        key("reconciled"),
                        Event::ResourceCreated {
                            deploy_id: p.deploy_id.clone(),
                            resource: ResourceRecord {
                                logical_id: p.logical_id.clone(),
                                resource_type: p.resource_type.clone(),
                                physical_id: physical_id.clone(),
                                properties: record_props,
                                attributes,
                                dependencies: deps,
                                provider: p.provider,
                                deletion_policy,
                                update_replace_policy,
                            },
                            replaces: if p.operation == Operation::Replace {
                                p.physical_id.clone()
                            } else {
                                None
                            },
                            baseline: None,
                        },
                        pre,
                    )
                    .await?;
                    Ok(format!(
                        "the interrupted {} made {physical_id}; recorded",
                        op_name(p.operation)
                    ))
                }
                Err(e) => {
                    rec.append(
                        key("reconciled"),
                        Event::ResourceFailed {
                            deploy_id: p.deploy_id.clone(),
                            logical_id: p.logical_id.clone(),
                            operation: p.operation,
                            error: error_info(&e),
                        },
                        pre,
                    )
                    .await?;
                    Ok(format!(
                        "the interrupted {} failed: {}",
                        op_name(p.operation),
                        e.message()
                    ))
                }
            }
        }
    }
}

/// A rollback of a failed deploy's journal.
pub struct Rollback<'a, S> {
    engine: Arc<Engine<S>>,
    stack: String,
    rollback_id: String,
    /// The run that holds the lock while the rollback runs.
    lock_id: String,
    /// The deploy whose journal is undone.
    deploy_id: String,
    recorder: &'a Recorder<S>,
}

/// A rollback that owns its recorder (the `rollback` command).
pub struct OwnedRollback<S> {
    engine: Arc<Engine<S>>,
    stack: String,
    rollback_id: String,
    deploy_id: Option<String>,
    recorder: Recorder<S>,
}

impl<S: EventStore + 'static> Rollback<'_, S> {
    /// Undoes every entry not undone yet, last first, and records the end.
    async fn undo_all(&self) -> Result<RollbackReport, EngineError> {
        let pre = Precondition::HoldsLock(self.lock_id.clone());
        self.recorder
            .append(
                format!("{}/started", self.rollback_id),
                Event::RollbackStarted {
                    deploy_id: self.deploy_id.clone(),
                    rollback_id: self.rollback_id.clone(),
                },
                &pre,
            )
            .await?;
        let entries: Vec<JournalEntry> = self.recorder.state().journal.to_undo().cloned().collect();
        let total = entries.len();
        self.engine.progress.report(ProgressEvent::StackStarted {
            stack: &self.stack,
            operation: "rollback",
            total,
        });
        let mut report = RollbackReport::default();
        for entry in entries {
            let started = Instant::now();
            let ty = match &entry.step {
                JournalStep::Created { resource_type, .. }
                | JournalStep::Replaced { resource_type, .. } => resource_type.clone(),
                JournalStep::Updated { previous, .. } => previous.resource_type.clone(),
            };
            self.engine.progress.report(ProgressEvent::ResourceStarted {
                stack: &self.stack,
                logical_id: &entry.logical_id,
                resource_type: &ty,
                action: "undo",
            });
            match self.undo_one(&entry, &pre).await? {
                Ok(how) => {
                    self.engine
                        .progress
                        .report(ProgressEvent::ResourceFinished {
                            stack: &self.stack,
                            logical_id: &entry.logical_id,
                            resource_type: &ty,
                            outcome: &how,
                            seconds: started.elapsed().as_secs_f64(),
                            detail: None,
                        });
                    report.undone.push((entry.logical_id.clone(), how));
                }
                Err(error) => {
                    self.engine
                        .progress
                        .report(ProgressEvent::ResourceFinished {
                            stack: &self.stack,
                            logical_id: &entry.logical_id,
                            resource_type: &ty,
                            outcome: "failed",
                            seconds: started.elapsed().as_secs_f64(),
                            detail: Some(&error.message),
                        });
                    report.failed.push(Failure {
                        logical_id: entry.logical_id.clone(),
                        resource_type: ty,
                        action: "undo".into(),
                        error,
                    });
                }
            }
        }
        self.recorder
            .append(
                format!("{}/finished", self.rollback_id),
                Event::RollbackFinished {
                    deploy_id: self.deploy_id.clone(),
                    complete: report.complete(),
                    errors: report.failed.iter().map(|f| f.error.clone()).collect(),
                },
                &pre,
            )
            .await?;
        Ok(report)
    }

    /// **Rollback** handler: undoes one journal entry.
    async fn undo_one(
        &self,
        entry: &JournalEntry,
        pre: &Precondition,
    ) -> Result<Result<String, ErrorInfo>, EngineError> {
        let id = &entry.logical_id;
        let (physical, ty, kind, update_to, current_props) = match &entry.step {
            JournalStep::Created {
                physical_id,
                resource_type,
                provider,
                ..
            } => (
                physical_id.clone(),
                resource_type.clone(),
                *provider,
                None,
                None,
            ),
            JournalStep::Replaced {
                new_physical_id,
                resource_type,
                provider,
                ..
            } => (
                new_physical_id.clone(),
                resource_type.clone(),
                *provider,
                None,
                None,
            ),
            JournalStep::Updated {
                physical_id,
                previous,
            } => {
                let current = self
                    .recorder
                    .state()
                    .resources
                    .get(id)
                    .map(|r| r.properties.clone());
                (
                    physical_id.clone(),
                    previous.resource_type.clone(),
                    previous.provider,
                    Some(previous.properties.clone()),
                    current,
                )
            }
        };
        let undone = |how: &str| Event::RollbackEntryUndone {
            deploy_id: self.deploy_id.clone(),
            logical_id: id.clone(),
            how: how.to_string(),
        };
        let done_key = format!("{}/{id}/undo/done", self.rollback_id);
        // A created resource whose DeletionPolicy keeps it stays (as CloudFormation's
        // rollback keeps it), unless the policy is RetainExceptOnCreate.
        if update_to.is_none() && matches!(entry.step, JournalStep::Created { .. }) {
            let policy = self
                .recorder
                .state()
                .resources
                .get(id)
                .and_then(|r| r.deletion_policy);
            if matches!(policy, Some(Policy::Retain | Policy::Snapshot)) {
                self.recorder
                    .append(done_key, undone("retained"), pre)
                    .await?;
                return Ok(Ok("retained".into()));
            }
        }
        self.recorder
            .append(
                format!("{}/{id}/undo/intent", self.rollback_id),
                Event::ResourceIntent {
                    deploy_id: self.deploy_id.clone(),
                    logical_id: id.clone(),
                    resource_type: ty.clone(),
                    operation: Operation::Undo,
                    token: format!("{}/{id}/undo", self.rollback_id),
                    provider: kind,
                    physical_id: Some(physical.clone()),
                    properties: update_to.clone(),
                },
                pre,
            )
            .await?;
        let how: Result<&str, ErrorInfo> = if kind == ProviderKind::NestedStack {
            if update_to.is_some() {
                Err(ErrorInfo {
                    name: "Unsupported".into(),
                    message: format!(
                        "nested stack {physical} was updated; stackflow cannot put its previous template back: deploy the previous version of the parent"
                    ),
                })
            } else {
                match destroy_boxed(self.engine.clone(), &physical, DeployOptions::new()).await {
                    Ok(_) => Ok("deleted"),
                    Err(e) => Err(ErrorInfo {
                        name: "NestedStackFailed".into(),
                        message: e.to_string(),
                    }),
                }
            }
        } else {
            match self.engine.providers.for_recorded(&ty, kind) {
                Err(message) => Err(ErrorInfo {
                    name: "Unsupported".into(),
                    message,
                }),
                Ok(provider) => {
                    let token = format!("{}/{id}/undo", self.rollback_id);
                    match update_to {
                        None => {
                            let mut request =
                                ResourceRequest::new(&self.stack, id, &ty, Map::new());
                            request.physical_id = Some(physical.clone());
                            request.token = token;
                            match provider.delete(&request).await {
                                Ok(_) => Ok("deleted"),
                                Err(ProviderError::NotFound(_)) => Ok("already-gone"),
                                Err(e) => Err(error_info(&e)),
                            }
                        }
                        Some(previous) => match self.engine.resolve_dynamic(&previous).await {
                            Err((name, message)) => Err(ErrorInfo { name, message }),
                            Ok((call, resolution)) => {
                                let mut request = ResourceRequest::new(&self.stack, id, &ty, call);
                                request.physical_id = Some(physical.clone());
                                request.previous_properties = current_props;
                                request.token = token;
                                match provider.update(&request).await {
                                    Ok(_) => Ok("restored"),
                                    Err(e) => Err(ErrorInfo {
                                        name: e.name().to_string(),
                                        message: resolution.mask(e.message()),
                                    }),
                                }
                            }
                        },
                    }
                }
            }
        };
        match how {
            Ok(how) => {
                self.recorder.append(done_key, undone(how), pre).await?;
                Ok(Ok(how.to_string()))
            }
            Err(e) => {
                self.recorder
                    .append(
                        format!("{}/{id}/undo/failed", self.rollback_id),
                        Event::ResourceFailed {
                            deploy_id: self.deploy_id.clone(),
                            logical_id: id.clone(),
                            operation: Operation::Undo,
                            error: e.clone(),
                        },
                        pre,
                    )
                    .await?;
                Ok(Err(e))
            }
        }
    }
}

impl<S: EventStore + 'static> OwnedRollback<S> {
    /// Takes the lock as a rollback (breaking a gone holder's), reconciles interrupted
    /// calls, and readies the rollback of the stack's journal (`expected`: the deploy it
    /// should belong to).
    pub async fn begin(
        engine: Arc<Engine<S>>,
        stack: &str,
        expected: Option<String>,
    ) -> Result<OwnedRollback<S>, EngineError> {
        let recorder = Recorder::load(engine.store.clone(), engine.stream(stack)).await?;
        let rollback_id = new_id("r");
        let holder = Holder {
            deploy_id: rollback_id.clone(),
            who: engine.who.clone(),
            since: now(),
            operation: "rollback".into(),
        };
        engine
            .take_lock(
                &recorder,
                format!("{rollback_id}/locked"),
                Event::LockTaken { holder },
                Holder {
                    deploy_id: rollback_id.clone(),
                    who: engine.who.clone(),
                    since: now(),
                    operation: "rollback".into(),
                },
            )
            .await?;
        let deploy_id = recorder.state().journal.deploy_id.clone();
        if let (Some(e), Some(d)) = (&expected, &deploy_id)
            && e != d
        {
            return Err(EngineError::Other(format!(
                "stack {stack}: the journal belongs to {d}, not {e}"
            )));
        }
        Ok(OwnedRollback {
            engine,
            stack: stack.to_string(),
            rollback_id,
            deploy_id,
            recorder,
        })
    }

    /// Reconciles interrupted calls, undoes the journal, releases the lock.
    pub async fn run(&self) -> Result<RollbackReport, EngineError> {
        let pre = Precondition::HoldsLock(self.rollback_id.clone());
        let pending: Vec<PendingIntent> = self.recorder.state().pending.values().cloned().collect();
        for p in &pending {
            reconcile_one(&self.engine, &self.recorder, &pre, p, None).await?;
        }
        let report = match &self.deploy_id {
            Some(deploy_id) => {
                let r = Rollback {
                    engine: self.engine.clone(),
                    stack: self.stack.clone(),
                    rollback_id: self.rollback_id.clone(),
                    lock_id: self.rollback_id.clone(),
                    deploy_id: deploy_id.clone(),
                    recorder: &self.recorder,
                };
                r.undo_all().await?
            }
            None => RollbackReport::default(),
        };
        self.recorder
            .append(
                format!("{}/released", self.rollback_id),
                Event::LockReleased {
                    deploy_id: self.rollback_id.clone(),
                },
                &Precondition::ReleaseLock(self.rollback_id.clone()),
            )
            .await?;
        Ok(report)
    }

    /// The deploy whose journal this rollback undoes (`None`: nothing to roll back).
    pub fn deploy_id(&self) -> Option<&str> {
        self.deploy_id.as_deref()
    }
}

/// Deploys one stack with the embedded runner: plan, provision (each resource as soon
/// as its own dependencies are done, at most `concurrency` at once), cleanup, finish; on
/// failure, record it and roll back unless told not to.
pub async fn deploy_stack<S: EventStore + 'static>(
    engine: Arc<Engine<S>>,
    input: StackInput,
    options: DeployOptions,
) -> Result<StackReport, EngineError> {
    let started = Instant::now();
    let stack = input.name.clone();
    let (deployment, mut report) = Deployment::begin(engine.clone(), input, options).await?;
    let Some(deployment) = deployment else {
        report.seconds = started.elapsed().as_secs_f64();
        return Ok(report);
    };
    let deployment = Arc::new(deployment);
    let d = &deployment;
    let tasks = d.provision_tasks();
    let planned_cleanups = d
        .plan
        .resources
        .iter()
        .filter(|r| matches!(r.action, Action::Delete | Action::Replace))
        .count();
    engine.progress.report(ProgressEvent::StackStarted {
        stack: &stack,
        operation: "deploy",
        total: tasks.len() + planned_cleanups,
    });

    let results: Results = Arc::default();
    let fatal: Arc<std::sync::Mutex<Option<EngineError>>> = Arc::default();
    let run_report = {
        let d = deployment.clone();
        let results = results.clone();
        let fatal = fatal.clone();
        schedule::run(
            &tasks,
            d.options.concurrency,
            d.options.stop.clone(),
            move |id| {
                let d = d.clone();
                let results = results.clone();
                let fatal = fatal.clone();
                async move {
                    let t = Instant::now();
                    let rp = d.plan.resource(&id).cloned();
                    let (ty, action) = rp
                        .as_ref()
                        .map(|r| (r.resource_type.clone(), r.action.as_str()))
                        .unwrap_or_default();
                    d.engine.progress.report(ProgressEvent::ResourceStarted {
                        stack: d.stack(),
                        logical_id: &id,
                        resource_type: &ty,
                        action,
                    });
                    let outcome = d.provision(&id).await;
                    finish_task(&d.engine, d.stack(), &id, &ty, t, outcome, &results, &fatal)
                }
            },
        )
        .await
    };
    let mut stopped_by_user = *deployment.options.stop.borrow();
    if run_report.all_succeeded()
        && fatal.lock().unwrap_or_else(|p| p.into_inner()).is_none()
        && !stopped_by_user
    {
        // Cleanup: deletes of removed resources and replaced predecessors.
        let (cleanups, cleanup_tasks) = deployment.cleanup_tasks();
        let by_id: IndexMap<String, Cleanup> =
            cleanups.iter().map(|c| (c.task_id(), c.clone())).collect();
        let by_id = Arc::new(by_id);
        let d = deployment.clone();
        let results2 = results.clone();
        let fatal2 = fatal.clone();
        let _ = schedule::run(
            &cleanup_tasks,
            d.options.concurrency,
            d.options.stop.clone(),
            move |task_id| {
                let d = d.clone();
                let by_id = by_id.clone();
                let results = results2.clone();
                let fatal = fatal2.clone();
                async move {
                    let t = Instant::now();
                    let item = by_id[&task_id].clone();
                    let (logical, ty) = cleanup_subject(&d.recorder.state(), &item);
                    d.engine.progress.report(ProgressEvent::ResourceStarted {
                        stack: d.stack(),
                        logical_id: &logical,
                        resource_type: &ty,
                        action: "delete",
                    });
                    let outcome = d.cleanup(&item).await;
                    finish_task(
                        &d.engine,
                        d.stack(),
                        &logical,
                        &ty,
                        t,
                        outcome,
                        &results,
                        &fatal,
                    )
                }
            },
        )
        .await;
        stopped_by_user = *deployment.options.stop.borrow();
    }
    if let Some(e) = fatal.lock().unwrap_or_else(|p| p.into_inner()).take() {
        return Err(e);
    }
    let results = std::mem::take(&mut *results.lock().unwrap_or_else(|p| p.into_inner()));
    report.tally(&results);
    // Replaced predecessors deleted count as deletes already; a replacement is counted
    // once as replaced.
    if report.failures.is_empty() && !stopped_by_user {
        report.outputs = deployment.finish().await?;
        report.status = if report.skipped.is_empty() {
            StackStatus::Succeeded
        } else {
            StackStatus::Partial
        };
    } else {
        let first = report.failures.first().cloned();
        let why = if stopped_by_user {
            "stopped by the user"
        } else {
            "failed"
        };
        // A deploy the user stopped is not rolled back: what it did stays recorded, for
        // `stackflow rollback` or the next deploy.
        report.rollback = deployment
            .fail(first.as_ref(), why, !stopped_by_user)
            .await?;
        report.status = if stopped_by_user {
            StackStatus::Interrupted
        } else {
            StackStatus::Failed
        };
    }
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

#[allow(clippy::too_many_arguments)]
fn finish_task(
    engine: &Engine<impl EventStore>,
    stack: &str,
    id: &str,
    ty: &str,
    t: Instant,
    outcome: Result<Result<Done, Failure>, EngineError>,
    results: &std::sync::Mutex<Vec<(String, Result<Done, Failure>)>>,
    fatal: &std::sync::Mutex<Option<EngineError>>,
) -> Outcome {
    let seconds = t.elapsed().as_secs_f64();
    match outcome {
        Ok(r) => {
            let (word, detail) = match &r {
                Ok(done) => (
                    done.word(),
                    match done {
                        Done::Retained(why) | Done::Skipped(why) => Some(why.clone()),
                        _ => None,
                    },
                ),
                Err(f) => (
                    "failed",
                    Some(format!("{}: {}", f.error.name, f.error.message)),
                ),
            };
            engine.progress.report(ProgressEvent::ResourceFinished {
                stack,
                logical_id: id,
                resource_type: ty,
                outcome: word,
                seconds,
                detail: detail.as_deref(),
            });
            let failed = r.as_ref().err().map(|f| f.error.message.clone());
            results
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((id.to_string(), r));
            match failed {
                None => Outcome::Succeeded,
                Some(m) => Outcome::Failed(m),
            }
        }
        Err(e) => {
            let m = e.to_string();
            engine.progress.report(ProgressEvent::ResourceFinished {
                stack,
                logical_id: id,
                resource_type: ty,
                outcome: "failed",
                seconds,
                detail: Some(&m),
            });
            fatal
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_or_insert(e);
            Outcome::Failed(m)
        }
    }
}

/// Destroys one stack: every resource in reverse dependency order (at most `concurrency`
/// deletes at once), honouring `DeletionPolicy`; nested stacks with it. Refused while
/// another stack imports one of its exports.
pub async fn destroy_stack<S: EventStore + 'static>(
    engine: Arc<Engine<S>>,
    stack: &str,
    options: DeployOptions,
) -> Result<StackReport, EngineError> {
    let started = Instant::now();
    let destroy_id = new_id("x");
    let mut report = StackReport::new(stack, &destroy_id);
    let recorder = Arc::new(Recorder::load(engine.store.clone(), engine.stream(stack)).await?);
    let nothing_recorded = {
        let s = recorder.state();
        s.resources.is_empty()
            && s.predecessors.is_empty()
            && s.pending.is_empty()
            && s.lock.is_none()
    };
    if nothing_recorded {
        report.status = StackStatus::NoChanges;
        engine.note(stack, "the stack has no resources: nothing to destroy");
        return Ok(report);
    }
    let exports = recorder.state().exports.clone();
    let importers = engine.importers(stack, &exports).await?;
    if !importers.is_empty() {
        let list: Vec<String> = importers
            .iter()
            .map(|(s, e)| format!("{s} imports {e}"))
            .collect();
        return Err(EngineError::Other(format!(
            "stack {stack} cannot be destroyed while other stacks use its exports ({}); destroy or change those stacks first",
            list.join("; ")
        )));
    }
    let holder = Holder {
        deploy_id: destroy_id.clone(),
        who: engine.who.clone(),
        since: now(),
        operation: "destroy".into(),
    };
    engine
        .take_lock(
            &recorder,
            format!("{destroy_id}/locked"),
            Event::LockTaken {
                holder: holder.clone(),
            },
            holder,
        )
        .await?;
    let pre = Precondition::HoldsLock(destroy_id.clone());
    // Interrupted calls first.
    let pending: Vec<PendingIntent> = recorder.state().pending.values().cloned().collect();
    for p in &pending {
        if p.operation != Operation::Undo {
            reconcile_one(&engine, &recorder, &pre, p, None).await?;
            report.recovered += 1;
        }
    }
    let (items, tasks) = {
        let s = recorder.state();
        let all: Vec<String> = s.resources.keys().cloned().collect();
        cleanup_graph(&s, &all)
    };
    if items.is_empty() {
        // Only a lock (of a run that is gone) or interrupted calls were left: settled now.
        recorder
            .append(
                format!("{destroy_id}/released"),
                Event::LockReleased {
                    deploy_id: destroy_id.clone(),
                },
                &Precondition::ReleaseLock(destroy_id.clone()),
            )
            .await?;
        report.status = StackStatus::NoChanges;
        report.seconds = started.elapsed().as_secs_f64();
        engine.note(stack, "the stack has no resources: nothing to destroy");
        return Ok(report);
    }
    engine.progress.report(ProgressEvent::StackStarted {
        stack,
        operation: "destroy",
        total: items.len(),
    });
    let by_id: Arc<IndexMap<String, Cleanup>> =
        Arc::new(items.iter().map(|c| (c.task_id(), c.clone())).collect());
    let results: Results = Arc::default();
    let fatal: Arc<std::sync::Mutex<Option<EngineError>>> = Arc::default();
    {
        let engine = engine.clone();
        let recorder = recorder.clone();
        let results = results.clone();
        let fatal = fatal.clone();
        let destroy_id = destroy_id.clone();
        let options2 = options.clone();
        let pre = pre.clone();
        let stack = stack.to_string();
        schedule::run(
            &tasks,
            options.concurrency,
            options.stop.clone(),
            move |task_id| {
                let engine = engine.clone();
                let recorder = recorder.clone();
                let by_id = by_id.clone();
                let results = results.clone();
                let fatal = fatal.clone();
                let destroy_id = destroy_id.clone();
                let options = options2.clone();
                let pre = pre.clone();
                let stack = stack.clone();
                async move {
                    let t = Instant::now();
                    let item = by_id[&task_id].clone();
                    let (logical, ty) = cleanup_subject(&recorder.state(), &item);
                    engine.progress.report(ProgressEvent::ResourceStarted {
                        stack: &stack,
                        logical_id: &logical,
                        resource_type: &ty,
                        action: "delete",
                    });
                    let outcome =
                        delete_one(&engine, &recorder, &destroy_id, &pre, &item, &options).await;
                    finish_task(&engine, &stack, &logical, &ty, t, outcome, &results, &fatal)
                }
            },
        )
        .await;
    }
    if let Some(e) = fatal.lock().unwrap_or_else(|p| p.into_inner()).take() {
        return Err(e);
    }
    let results = std::mem::take(&mut *results.lock().unwrap_or_else(|p| p.into_inner()));
    report.tally(&results);
    let empty = {
        let s = recorder.state();
        s.resources.is_empty() && s.predecessors.is_empty()
    };
    if empty {
        recorder
            .append(
                format!("{destroy_id}/destroyed"),
                Event::StackDestroyed {
                    deploy_id: destroy_id.clone(),
                },
                &pre,
            )
            .await?;
    }
    recorder
        .append(
            format!("{destroy_id}/released"),
            Event::LockReleased {
                deploy_id: destroy_id.clone(),
            },
            &Precondition::ReleaseLock(destroy_id.clone()),
        )
        .await?;
    report.status = if !report.failures.is_empty() {
        StackStatus::Failed
    } else if *options.stop.borrow() && !empty {
        StackStatus::Interrupted
    } else if !report.skipped.is_empty() {
        StackStatus::Partial
    } else {
        StackStatus::Succeeded
    };
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// Rolls back the journal of a stack's failed (or interrupted) deploy. Safe to run again:
/// a second run finds nothing to undo.
pub async fn rollback_stack<S: EventStore + 'static>(
    engine: Arc<Engine<S>>,
    stack: &str,
) -> Result<StackReport, EngineError> {
    let started = Instant::now();
    let rollback = OwnedRollback::begin(engine.clone(), stack, None).await?;
    let mut report = StackReport::new(stack, &rollback.rollback_id);
    let nothing = rollback.deploy_id().is_none()
        || rollback.recorder.state().journal.to_undo().next().is_none();
    let r = rollback.run().await?;
    if nothing && r.undone.is_empty() {
        report.status = StackStatus::NoChanges;
        engine.note(stack, "nothing to roll back");
    } else {
        report.status = if r.complete() {
            StackStatus::Succeeded
        } else {
            StackStatus::Failed
        };
        report.failures = r.failed.clone();
        report.rollback = Some(r);
    }
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// [`deploy_stack`] behind a `Send` box (nested stacks deploy recursively).
fn deploy_boxed<S: EventStore + 'static>(
    engine: Arc<Engine<S>>,
    input: StackInput,
    options: DeployOptions,
) -> BoxFuture<'static, Result<StackReport, EngineError>> {
    Box::pin(deploy_stack(engine, input, options))
}

/// [`destroy_stack`] behind a `Send` box (nested stacks are destroyed recursively).
fn destroy_boxed<S: EventStore + 'static>(
    engine: Arc<Engine<S>>,
    stack: &str,
    options: DeployOptions,
) -> BoxFuture<'static, Result<StackReport, EngineError>> {
    let stack = stack.to_string();
    Box::pin(async move { destroy_stack(engine, &stack, options).await })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use stackflow_events::projection::{Predecessor, ResourceState, StackState};

    fn resource(deps: &[&str]) -> ResourceState {
        ResourceState {
            resource_type: "AWS::SQS::Queue".into(),
            physical_id: "p".into(),
            properties: Map::new(),
            attributes: IndexMap::new(),
            dependencies: deps.iter().map(|d| d.to_string()).collect(),
            provider: ProviderKind::Sdk,
            deletion_policy: None,
            update_replace_policy: None,
            baseline: None,
            imported: false,
        }
    }

    #[test]
    fn cleanup_deletes_dependents_first_and_predecessors_after_what_used_them() {
        let mut s = StackState::default();
        s.resources.insert("A".into(), resource(&[]));
        s.resources.insert("B".into(), resource(&["A"]));
        s.resources.insert("C".into(), resource(&["B"]));
        s.resources.insert("X".into(), resource(&[]));
        // X was replaced; the old X was used by removed C... C depends on X's old self.
        s.resources
            .get_mut("C")
            .unwrap()
            .dependencies
            .push("X".into());
        s.predecessors.insert(
            "old-x".into(),
            Predecessor {
                logical_id: "X".into(),
                deploy_id: "d1".into(),
                resource: resource(&[]),
            },
        );
        let removed: Vec<String> = ["A", "B", "C"].iter().map(|s| s.to_string()).collect();
        let (items, tasks) = cleanup_graph(&s, &removed);
        assert_eq!(items.len(), 4);
        let deps = |id: &str| {
            let mut d = tasks.iter().find(|t| t.id == id).unwrap().deps.clone();
            d.sort();
            d
        };
        // A waits for B (B depended on A); B for C; the old X for C.
        assert_eq!(deps("A"), vec!["B".to_string()]);
        assert_eq!(deps("B"), vec!["C".to_string()]);
        assert!(deps("C").is_empty());
        assert_eq!(deps("predecessor:old-x"), vec!["C".to_string()]);
    }

    #[test]
    fn get_azs_regions_are_found_anywhere() {
        let mut out = BTreeSet::new();
        let v = json!({
            "A": {"Fn::Select": [0, {"Fn::GetAZs": ""}]},
            "B": [{"Fn::GetAZs": "eu-west-1"}],
            "C": {"Fn::GetAZs": {"Ref": "AWS::Region"}},
            "D": "Fn::GetAZs"
        });
        get_azs_regions(&v, "us-east-1", &mut out);
        assert_eq!(
            out.into_iter().collect::<Vec<_>>(),
            vec!["eu-west-1".to_string(), "us-east-1".to_string()]
        );
    }

    #[test]
    fn ids_are_unique_and_readable() {
        let a = new_id("d");
        let b = new_id("d");
        assert_ne!(a, b);
        assert!(a.starts_with("d-2"), "{a}");
        assert_eq!(a.len(), "d-".len() + 14 + 1 + 8, "{a}");
    }

    #[test]
    fn retain_policies_keep_the_resource() {
        assert!(keeps(Some(Policy::Retain)));
        assert!(keeps(Some(Policy::RetainExceptOnCreate)));
        assert!(keeps(Some(Policy::Snapshot)));
        assert!(!keeps(Some(Policy::Delete)));
        assert!(!keeps(None));
    }

    #[test]
    fn masks_cover_noecho_values_in_messages() {
        let secrets = vec!["hunter2".to_string()];
        assert_eq!(
            mask_text("bad value hunter2 for Password", None, &secrets),
            "bad value **** for Password"
        );
    }
}
