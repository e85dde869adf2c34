//! Import: adopting resources that already exist in AWS into a stack's records, as seeds
//! 002 and 003 describe. Per template resource the physical id comes from an override
//! (`--resource ID=PHYSICAL`) or from the provider's `import` (the name the template
//! gives); existence is confirmed; what AWS holds is recorded with a drift baseline,
//! unless the baseline cannot be kept free of secrets or proven (a refusal with its
//! cause). An import changes nothing in AWS.

use std::sync::Arc;

use indexmap::IndexMap;
use serde::Serialize;
use serde_json::{Map, Value};
use stackflow_core::drift::{Classification, CompareRules, compare, observed_baseline};
use stackflow_core::dynref;
use stackflow_core::intrinsics::{Mode, Resolver};
use stackflow_core::plan::Action;
use stackflow_core::secrets::contains_mask;
use stackflow_events::event::{Baseline, Event, ProviderKind, RefusalCause, ResourceRecord};
use stackflow_events::projection::{JournalStep, ResourceState, StackState};
use stackflow_events::{EventStore, Precondition};
use stackflow_providers::provider::{CurrentState, Imported, ResourceRequest};

use crate::deploy::Deployment;
use crate::engine::{DeployOptions, Engine, EngineError};
use crate::gather::plan_of;
use crate::keys::new_id;
use crate::observe::read_now;
use crate::recorder::Recorder;
use crate::stack::{DeployEnv, StackInput};

mod migrate;
mod parameters;
mod retire;
mod scope;

pub use migrate::MigrateFrom;
pub use retire::{MigrationOutcome, MigrationReport};

/// What `import` is told.
#[derive(Debug, Clone, Default)]
pub struct ImportOptions {
    /// Physical ids by logical id (`--resource ID=PHYSICAL`, a resource mapping).
    /// Alone, only these resources are imported (see [`ImportOptions::selective`]).
    pub overrides: IndexMap<String, String>,
    /// With overrides: every other template resource is looked up too, as without them.
    pub auto: bool,
    /// Overwrite recorded resources: every one (a whole-stack import), or those the
    /// overrides name under another physical id (a selective one).
    pub force: bool,
    /// Take the physical ids from this CloudFormation stack, then retain the adopted
    /// resources in it and delete it (`--migrate-from-cloudformation`).
    pub migrate: Option<MigrateFrom>,
    /// A CloudFormation stack to take physical ids from when it exists (a stack `cdk
    /// deploy` made: its generated names cannot be found otherwise), left as it is. A
    /// failure to read it is a warning; the names the template gives are used then.
    pub cloudformation: Option<MigrateFrom>,
    /// Look everything up and report; take no lock and record nothing.
    pub dry_run: bool,
}

/// What became of one template resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ImportStatus {
    /// Found and recorded.
    Imported,
    /// No such resource exists (a normal answer: a deploy creates it).
    NotDeployedYet,
    /// Its type cannot be looked up; only an override adopts it.
    Unsupported,
    /// Left as recorded (a selective import that does not name it).
    Kept,
    /// Not looked up: a selective import that does not name it, with nothing recorded
    /// (the next deploy creates it).
    OutOfScope,
    /// Looking it up failed.
    Failed,
}

/// One template resource's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ImportedResource {
    /// The logical id.
    pub logical_id: String,
    /// The type.
    pub resource_type: String,
    /// What became of it.
    pub status: ImportStatus,
    /// The physical id adopted.
    pub physical_id: Option<String>,
    /// `recorded`, or `refused (<cause>)`, for an imported resource.
    pub baseline: Option<String>,
    /// Why it was not imported, or a note.
    pub reason: Option<String>,
    /// Where its physical id came from: `mapping` (`--resource`, a resource mapping),
    /// `cloudformation:<stack>`, or `name` (the provider's look-up by the template's
    /// name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub found_by: Option<String>,
}

/// The result of `import`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ImportReport {
    /// The stack.
    pub stack: String,
    /// The import's id.
    pub import_id: String,
    /// Per template resource, in dependency order.
    pub resources: Vec<ImportedResource>,
    /// Warnings (one per stack for unprovable parameters, journal marks, ...).
    pub warnings: Vec<String>,
    /// The failed deploy whose rollback journal was marked, if any.
    pub marked_journal: Option<String>,
    /// The child stacks imported from nested CloudFormation stacks.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nested: Vec<ImportReport>,
    /// What became of the CloudFormation stack migrated from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub migration: Option<MigrationReport>,
    /// The CloudFormation stack the physical ids came from (a plain import that found
    /// one of the stack's name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_cloudformation: Option<String>,
    /// True when nothing was recorded (`--dry-run`): the report says what would be.
    pub dry_run: bool,
}

impl ImportReport {
    /// 1 when looking a resource up failed (here or in a child stack), or a migration's
    /// CloudFormation stack was not deleted, else 0 (not deployed yet and unsupported
    /// are answers, not failures).
    pub fn exit_code(&self) -> i32 {
        let failed = self
            .resources
            .iter()
            .any(|r| r.status == ImportStatus::Failed);
        let unfinished = self
            .migration
            .as_ref()
            .is_some_and(|m| m.outcome != MigrationOutcome::Deleted);
        let child = self.nested.iter().any(|n| n.exit_code() != 0);
        i32::from(failed || unfinished || child)
    }
}

/// A resource found in AWS, before anything is recorded.
struct Found {
    record: ResourceRecord,
    /// None when AWS's properties could not be read.
    baseline: Option<Baseline>,
    /// The properties as the template gives them (parameters at their Defaults), which
    /// a resource refused for an unverifiable parameter records instead of AWS's.
    template_properties: Map<String, Value>,
}

impl Found {
    /// Records the template's properties, not AWS's: AWS's values may be a parameter's
    /// deployed value, which must not reach state. An attribute that holds a value taken
    /// from AWS for a property (an SSM parameter's `Value`) is left out with it.
    fn keep_template_values(&mut self) {
        let template = std::mem::take(&mut self.template_properties);
        let taken: Vec<Value> = self
            .record
            .properties
            .iter()
            .filter(|(k, v)| template.get(*k) != Some(*v))
            .map(|(_, v)| v.clone())
            .collect();
        self.record.attributes.retain(|_, a| !taken.contains(a));
        self.record.properties = template;
    }
}

/// Adopts the resources of `input`'s template that exist in AWS into the stack's
/// records, holding the stack's lock; changes nothing in AWS, except that a migration
/// (`options.migrate`) then retains the adopted resources in its CloudFormation stack and
/// deletes that stack (after the lock is released).
pub async fn import_stack<S: EventStore + 'static>(
    engine: Arc<Engine<S>>,
    input: StackInput,
    options: ImportOptions,
) -> Result<ImportReport, EngineError> {
    if let Some(from) = options.migrate.clone() {
        let source = migrate::describe(from.cloudformation.as_ref(), &from.stack).await?;
        let (mut report, _) = import_one(engine.clone(), input, &options, Some(&source)).await?;
        report.migration = Some(retire::retire(&engine, &from, &source, &report.stack).await);
        return Ok(report);
    }
    let (source, warning) = match &options.cloudformation {
        Some(from) if !options.selective() => migrate::same_name(from).await,
        _ => (None, None),
    };
    let (mut report, _) = import_one(engine, input, &options, source.as_ref()).await?;
    report.warnings.extend(warning);
    report.from_cloudformation = source.map(|s| s.stack);
    Ok(report)
}

/// The outputs of an imported stack, as far as they resolve (for its parent).
type Outputs = Option<IndexMap<String, Value>>;

/// One stack's import, from `source` when migrating (its physical ids, its nested stacks):
/// the report, and the stack's outputs when `source` is given.
async fn import_one<S: EventStore + 'static>(
    engine: Arc<Engine<S>>,
    input: StackInput,
    options: &ImportOptions,
    source: Option<&migrate::Source>,
) -> Result<(ImportReport, Outputs), EngineError> {
    let import_id = new_id("i");
    let recorder = Recorder::load(engine.store.clone(), engine.stream(&input.name)).await?;
    scope::check_request(&recorder.state(), &input, options)?;
    let mut input = input;
    input.settle_stack_id(recorder.state().stack_id.clone());
    let input = Arc::new(input);
    let (answers, imports) = engine.gather(&input, &recorder, true).await?;
    let key = engine.stack_digest_key(&input.name);
    let plan = plan_of(&input, &recorder, &answers, key.as_ref())?;
    let held = match options.dry_run {
        true => None,
        false => Some(crate::run::lock(&engine, &recorder, &import_id, "import").await?),
    };
    let d = Deployment {
        engine: engine.clone(),
        conditions: plan.conditions.clone(),
        secrets: input.parameters.secret_values(),
        input: input.clone(),
        deploy_id: import_id.clone(),
        recorder: Arc::new(recorder),
        plan,
        answers,
        imports,
        digest_key: key,
        sealed: Default::default(),
        options: DeployOptions::new(),
        observations: Default::default(),
        fenced_by_lock: false,
    };
    let outcome = run(&d, options, source).await;
    let outputs = source.and_then(|_| d.outputs().ok().map(|(o, _)| o));
    if let Some(held) = held {
        held.release(&d.recorder, &import_id).await?;
    }
    Ok((outcome?, outputs))
}

/// Finds, decides and records, under the lock.
async fn run<S: EventStore + 'static>(
    d: &Deployment<S>,
    options: &ImportOptions,
    source: Option<&migrate::Source>,
) -> Result<ImportReport, EngineError> {
    let selective = options.selective();
    let mut report = ImportReport {
        stack: d.stack().to_string(),
        import_id: d.deploy_id.clone(),
        resources: vec![],
        warnings: vec![],
        marked_journal: None,
        nested: vec![],
        migration: None,
        from_cloudformation: None,
        dry_run: options.dry_run,
    };
    let (sourced, warnings) = source
        .map(|s| migrate::physical_ids(&d.input, s))
        .unwrap_or_default();
    report.warnings.extend(warnings);
    let mut found: Vec<Found> = Vec::new();
    let mut working = d.recorder.state().clone();
    let order: Vec<(String, String)> = d
        .plan
        .resources
        .iter()
        .filter(|r| r.action != Action::Delete)
        .map(|r| (r.logical_id.clone(), r.resource_type.clone()))
        .collect();
    for (id, ty) in order {
        if selective && !options.overrides.contains_key(&id) {
            let status = if working.resources.contains_key(&id) {
                ImportStatus::Kept
            } else {
                ImportStatus::OutOfScope
            };
            report.resources.push(row(&id, &ty, status, None));
            continue;
        }
        let child = source.filter(|s| migrate::imports_as_child(&d.input, s, &id));
        let (row, adopted) = match child.and_then(|s| s.nested(&id)) {
            Some(nested) => {
                let props = match resolve(d, &working, &id) {
                    Ok(p) => p,
                    Err(why) => {
                        let why = why.to_string();
                        report
                            .resources
                            .push(row(&id, &ty, ImportStatus::Failed, Some(why)));
                        continue;
                    }
                };
                let (row, adopted, child_report) =
                    migrate::nested_stack(d, props, &id, &ty, nested, options).await;
                report.nested.extend(child_report);
                (row, adopted)
            }
            None => {
                let explicit = options.overrides.get(&id).or(sourced.get(&id));
                let (mut row, adopted) = find_one(d, &working, &id, &ty, explicit).await;
                if row.status == ImportStatus::Imported {
                    row.found_by = Some(match (options.overrides.contains_key(&id), source) {
                        (true, _) => "mapping".to_string(),
                        (false, Some(s)) if sourced.contains_key(&id) => {
                            format!("cloudformation:{}", s.stack)
                        }
                        _ => "name".to_string(),
                    });
                }
                (row, adopted)
            }
        };
        if let Some(f) = adopted {
            working.resources.insert(id.clone(), state_of(&f.record));
            found.push(f);
        }
        report.resources.push(row);
    }
    let backing: Vec<String> = match source {
        Some(s) => s.stacks().iter().map(|s| s.stack.clone()).collect(),
        None => vec![d.stack().to_string()],
    };
    // One DescribeStacks per backing stack serves both checks.
    let backing = parameters::Backing::new(d, &backing);
    refuse_unprovable(d, &backing, &mut found, &mut report).await;
    keep_refusals(d, &backing, &mut found, &mut report).await;
    record(d, found, &mut report, options.dry_run).await?;
    Ok(report)
}

fn row(id: &str, ty: &str, status: ImportStatus, reason: Option<String>) -> ImportedResource {
    ImportedResource {
        logical_id: id.to_string(),
        resource_type: ty.to_string(),
        status,
        physical_id: None,
        baseline: None,
        reason,
        found_by: None,
    }
}

/// The state of a resource about to be recorded, for the resolution of the resources
/// that refer to it.
fn state_of(r: &ResourceRecord) -> ResourceState {
    let mut state = ResourceState::from_record(r, None);
    state.imported = true;
    state
}

/// Looks one resource up: its properties resolved against what was found so far, its
/// provider's import (or the override, confirmed by a read), what AWS holds.
async fn find_one<S: EventStore + 'static>(
    d: &Deployment<S>,
    working: &StackState,
    id: &str,
    ty: &str,
    explicit: Option<&String>,
) -> (ImportedResource, Option<Found>) {
    let props = match resolve(d, working, id) {
        Ok(p) => p,
        Err(why) => {
            let why = why.to_string();
            return (row(id, ty, ImportStatus::Failed, Some(why)), None);
        }
    };
    let routed = match d.engine.providers.route(ty, &props, None) {
        Ok(r) => r,
        Err(why) => {
            let why = why.to_string();
            return (row(id, ty, ImportStatus::Unsupported, Some(why)), None);
        }
    };
    if matches!(
        routed.kind,
        ProviderKind::Custom | ProviderKind::NestedStack
    ) {
        let why = "a custom resource or nested stack is not imported: deploy it".to_string();
        return (row(id, ty, ImportStatus::Unsupported, Some(why)), None);
    }
    let mut request = ResourceRequest::new(d.stack(), id, ty, props.clone());
    request.physical_id = explicit.cloned();
    request.stack_id = d.input.pseudo.stack_id.clone();
    let (physical_id, attributes) = match locate(d, &request, routed.kind, explicit).await {
        Ok(found) => found,
        Err((status, why)) => return (row(id, ty, status, Some(why)), None),
    };
    request.physical_id = Some(physical_id.clone());
    let current = read_now(&d.engine, &request, routed.kind).await;
    let (template_record, _) = d.record_properties(id, &props);
    let (properties, baseline) = match &current {
        CurrentState::Found(aws) => (
            as_aws_holds(ty, &template_record, aws),
            Some(Baseline::Recorded {
                observed: observed_baseline(&template_record, aws).baseline,
            }),
        ),
        // Unreadable: the template's properties are recorded, and no baseline (drift
        // compares with them, and a later refresh reads one).
        _ => (template_record.clone(), None),
    };
    let baseline = if lost_reference(&d.input.template.resources[id].properties, &properties) {
        Some(refused(RefusalCause::IncompleteResolution))
    } else {
        baseline
    };
    let template = &d.input.template.resources[id];
    let record = ResourceRecord {
        logical_id: id.to_string(),
        resource_type: ty.to_string(),
        physical_id: physical_id.clone(),
        properties,
        attributes,
        dependencies: d
            .plan
            .resource(id)
            .map(|r| r.depends_on.clone())
            .unwrap_or_default(),
        provider: routed.kind,
        deletion_policy: template.deletion_policy,
        update_replace_policy: template.update_replace_policy,
        secret_digest: None,
    };
    let mut r = row(id, ty, ImportStatus::Imported, None);
    r.physical_id = Some(physical_id);
    if let CurrentState::CannotRead(why) = &current {
        r.reason = Some(format!(
            "found, but its properties cannot be read ({why}): recorded from the template, no baseline"
        ));
    }
    let found = Found {
        record,
        baseline,
        template_properties: template_record,
    };
    (r, Some(found))
}

fn refused(cause: RefusalCause) -> Baseline {
    Baseline::Refused { cause }
}

/// The physical id and attributes of the resource `request` names: the provider's
/// import, or the override confirmed by a read.
async fn locate<S: EventStore + 'static>(
    d: &Deployment<S>,
    request: &ResourceRequest,
    kind: ProviderKind,
    explicit: Option<&String>,
) -> Result<(String, IndexMap<String, Value>), (ImportStatus, String)> {
    let provider = d
        .engine
        .providers
        .for_recorded(&request.resource_type, kind)
        .map_err(|why| (ImportStatus::Unsupported, why.to_string()))?;
    match crate::step::find(provider.as_ref(), request).await {
        Ok(Imported::Found {
            physical_id,
            attributes,
        }) => Ok((physical_id, attributes)),
        Ok(Imported::NotDeployedYet) => Err((
            ImportStatus::NotDeployedYet,
            match explicit {
                Some(p) => format!("{p} does not exist"),
                None => "not found under the name the template gives: a deploy creates it".into(),
            },
        )),
        Ok(Imported::Unsupported) => match explicit {
            None => Err((
                ImportStatus::Unsupported,
                format!(
                    "{} cannot be looked up by name: pass --resource {}=PHYSICAL_ID",
                    request.resource_type, request.logical_id
                ),
            )),
            Some(p) => match read_now(&d.engine, request, kind).await {
                CurrentState::NotFound => {
                    Err((ImportStatus::NotDeployedYet, format!("{p} does not exist")))
                }
                _ => Ok((p.clone(), IndexMap::new())),
            },
        },
        Err(e) => Err((ImportStatus::Failed, e.to_string())),
    }
}

/// Resolves resource `id`'s properties against `working` (the state with what this
/// import found so far).
fn resolve<S: EventStore + 'static>(
    d: &Deployment<S>,
    working: &StackState,
    id: &str,
) -> Result<Map<String, Value>, stackflow_core::error::TemplateError> {
    let env = DeployEnv {
        state: working,
        answers: &d.answers,
        sealed: None,
    };
    let resolver = Resolver::new(
        &d.input.template,
        &d.input.parameters,
        &d.input.pseudo,
        &d.conditions,
        &env,
        Mode::Deploy,
    );
    resolver
        .resolve_properties(id)
        .map_err(|e| e.in_file(&d.input.source))
}

/// The properties to record for an adopted resource: the template's keys, each with the
/// template's value where AWS holds the same (as drift compares), else with what AWS
/// holds (secrets kept out, as in a baseline), so that the first diff shows where AWS
/// differs from the template. A key AWS does not return keeps the template's value when
/// that is not compared (write-only) or is AWS's default (providers leave defaults out);
/// otherwise AWS holds its default there, and the key is left out. A key whose AWS value
/// the baseline masks keeps the template's value.
fn as_aws_holds(
    ty: &str,
    template: &Map<String, Value>,
    aws: &Map<String, Value>,
) -> Map<String, Value> {
    let observed = observed_baseline(template, aws).baseline;
    let rules = CompareRules::for_type(ty, false);
    template
        .iter()
        .filter_map(|(k, v)| {
            let one = |x: &Value| Map::from_iter([(k.clone(), x.clone())]);
            let now = observed.get(k);
            let aws_now = aws.get(k).or(now).map(one).unwrap_or_default();
            let same = matches!(
                compare(&one(v), &aws_now, &rules).classification,
                Classification::InSync | Classification::NotCompared(_)
            );
            match (same, now) {
                (true, _) => Some((k.clone(), v.clone())),
                // AWS holds a value there that is not the template's secret, and the
                // baseline cannot show it (`***`): the record keeps the template's
                // reference, never the mask, which a revert or a rollback would send.
                (false, Some(now)) if contains_mask(now) => Some((k.clone(), v.clone())),
                (false, Some(now)) => Some((k.clone(), now.clone())),
                (false, None) => None,
            }
        })
        .collect()
}

/// True when the template's properties spell a dynamic reference that the recorded
/// properties no longer hold (resolution dropped it: an untaken `Fn::If` branch, a
/// `Fn::Select` of another item): the baseline cannot place it.
fn lost_reference(template: &Map<String, Value>, recorded: &Map<String, Value>) -> bool {
    let mut held = Vec::new();
    collect_strings(&Value::Object(recorded.clone()), &mut held);
    let mut spelled = Vec::new();
    collect_strings(&Value::Object(template.clone()), &mut spelled);
    spelled
        .iter()
        .flat_map(|s| dynref::find_all(s).unwrap_or_default())
        .any(|o| !held.iter().any(|h| h.contains(&o.text)))
}

fn collect_strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|i| collect_strings(i, out)),
        Value::Object(m) => m.values().for_each(|i| collect_strings(i, out)),
        _ => {}
    }
}

/// Refuses the baselines of resources that depend on parameters whose deployed values
/// cannot be proven equal to their Defaults (seed 003).
async fn refuse_unprovable<S: EventStore + 'static>(
    d: &Deployment<S>,
    backing: &parameters::Backing<'_, S>,
    found: &mut [Found],
    report: &mut ImportReport,
) {
    let (unproven, warning) = parameters::unproven(backing).await;
    report.warnings.extend(warning);
    if unproven.is_empty() {
        return;
    }
    let dependence = stackflow_core::drift::resources_depending_on(&d.input.template, &unproven);
    for f in found.iter_mut() {
        if dependence.may_depend(&f.record.logical_id) {
            f.baseline = Some(refused(RefusalCause::UnverifiableParameter));
            f.keep_template_values();
        }
    }
}

/// Seed 003: a resource recorded with an `unverifiable-parameter` refusal and imported
/// again under the same physical id keeps the refusal (and the template's values), unless
/// the import proves every deployed parameter value ([`parameters::all_proven`]): nothing
/// else tells that AWS's values hold no parameter's deployed value.
async fn keep_refusals<S: EventStore + 'static>(
    d: &Deployment<S>,
    backing: &parameters::Backing<'_, S>,
    found: &mut [Found],
    report: &mut ImportReport,
) {
    let unverifiable = Some(RefusalCause::UnverifiableParameter);
    // Refused before under the same physical id, and not refused again by this import.
    let still_open: Vec<&mut Found> = {
        let state = d.recorder.state();
        found
            .iter_mut()
            .filter(|f| {
                let before = state.resources.get(&f.record.logical_id);
                before.is_some_and(|r| {
                    r.refused() == unverifiable && r.physical_id == f.record.physical_id
                }) && !matches!(&f.baseline, Some(Baseline::Refused { cause }) if Some(*cause) == unverifiable)
            })
            .collect()
    };
    if still_open.is_empty() || parameters::all_proven(backing).await {
        return;
    }
    let mut kept = Vec::new();
    for f in still_open {
        f.baseline = Some(refused(RefusalCause::UnverifiableParameter));
        f.keep_template_values();
        kept.push(f.record.logical_id.clone());
    }
    report.warnings.push(format!(
        "{} keep(s) ObservedBaseline: REFUSED (unverifiable-parameter) from the earlier \
         import: no CloudFormation stack proves the parameter values they were deployed \
         with; a replacement, or an import that can compare the deployed values with the \
         Defaults, clears it",
        kept.join(", ")
    ));
}

/// Marks the journal of a failed deploy, then records every adopted resource.
async fn record<S: EventStore + 'static>(
    d: &Deployment<S>,
    found: Vec<Found>,
    report: &mut ImportReport,
    dry_run: bool,
) -> Result<(), EngineError> {
    let pre = Precondition::HoldsLock(d.deploy_id.clone());
    if !dry_run {
        mark_journal(d, &found, &pre, report).await?;
    }
    for f in found {
        let id = f.record.logical_id.clone();
        let shown = match &f.baseline {
            Some(Baseline::Recorded { .. }) => "recorded".to_string(),
            Some(Baseline::Refused { cause }) => format!("refused ({})", cause.as_str()),
            None => "none".to_string(),
        };
        if let Some(r) = report.resources.iter_mut().find(|r| r.logical_id == id) {
            r.baseline = Some(shown);
        }
        if dry_run {
            continue;
        }
        d.recorder
            .append(
                crate::keys::item_key(&d.deploy_id, crate::keys::ItemEvent::Imported, &id),
                Event::ResourceImported {
                    import_id: d.deploy_id.clone(),
                    resource: f.record,
                    baseline: f.baseline,
                },
                &pre,
            )
            .await?;
    }
    Ok(())
}

/// Seed 003: before any state is recorded, each adopted logical id that the journal of
/// a failed deploy still holds is marked on it, so that its rollback skips them; an entry
/// that recorded another physical id under the id is warned about. A journal that
/// cannot be marked stops the import before it records anything.
async fn mark_journal<S: EventStore + 'static>(
    d: &Deployment<S>,
    found: &[Found],
    pre: &Precondition,
    report: &mut ImportReport,
) -> Result<(), EngineError> {
    let (deploy_id, entries) = {
        let s = d.recorder.state();
        let Some(deploy_id) = s.journal.deploy_id.clone() else {
            return Ok(());
        };
        let entries: Vec<(String, String)> = s
            .journal
            .to_undo()
            .map(|e| (e.logical_id.clone(), journal_physical_id(&e.step)))
            .collect();
        (deploy_id, entries)
    };
    let mut marked = IndexMap::new();
    for f in found {
        let id = &f.record.logical_id;
        for (_, recorded) in entries.iter().filter(|(e, _)| e == id) {
            if *recorded != f.record.physical_id {
                report.warnings.push(format!(
                    "the rollback journal of deploy {deploy_id} recorded {recorded} as {id}; \
                     the import adopts {} instead: rollback skips that entry, check {recorded} yourself",
                    f.record.physical_id
                ));
            }
            marked.insert(id.clone(), f.record.physical_id.clone());
        }
    }
    if marked.is_empty() {
        return Ok(());
    }
    d.recorder
        .append(
            crate::keys::run_key(&d.deploy_id, crate::keys::RunEvent::Marked),
            Event::ImportMarked {
                import_id: d.deploy_id.clone(),
                deploy_id: deploy_id.clone(),
                resources: marked,
            },
            pre,
        )
        .await
        .map_err(|e| {
            EngineError::NeedsOperator(format!(
                "the rollback journal of deploy {deploy_id} could not be marked, so nothing \
                 was imported: {e}; run the import again"
            ))
        })?;
    report.marked_journal = Some(deploy_id);
    Ok(())
}

fn journal_physical_id(step: &JournalStep) -> String {
    match step {
        JournalStep::Created { physical_id, .. } | JournalStep::Updated { physical_id, .. } => {
            physical_id.clone()
        }
        JournalStep::Replaced {
            new_physical_id, ..
        } => new_physical_id.clone(),
    }
}
