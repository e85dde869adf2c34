//! Projections: the stack state, the rollback journal and the drift baselines, as one pure
//! and total fold of a stack's stream.
//!
//! [`StackState::apply`] takes any event in any state and never fails: an event that does
//! not fit (an update of a resource the state does not have) is applied as far as it
//! makes sense. A snapshot is the serialized state with the position it covers; folding
//! the rest of the stream onto it gives the same state as folding the whole stream.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use stackflow_core::plan::{CurrentState, StateResource};
use stackflow_core::template::Policy;

use crate::event::{
    Baseline, DriftResult, ErrorInfo, Event, Holder, Operation, ProviderKind, RefusalCause,
    ResourceRecord, StoredEvent,
};

/// One resource of the stack, as the log tells it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceState {
    /// The resource type.
    #[serde(rename = "type")]
    pub resource_type: String,
    /// The physical id.
    pub physical_id: String,
    /// The properties as sent (secrets as their `{{resolve:...}}` text).
    pub properties: Map<String, Value>,
    /// The `Fn::GetAtt` values.
    pub attributes: IndexMap<String, Value>,
    /// The resources it depends on.
    pub dependencies: Vec<String>,
    /// The provider that made it (sticky).
    pub provider: ProviderKind,
    /// `DeletionPolicy`.
    pub deletion_policy: Option<Policy>,
    /// `UpdateReplacePolicy`.
    pub update_replace_policy: Option<Policy>,
    /// The drift baseline (`observedProperties`), or why there is none.
    pub baseline: Option<Baseline>,
    /// True when the resource was adopted by an import.
    pub imported: bool,
}

impl ResourceState {
    fn from_record(r: &ResourceRecord, baseline: Option<Baseline>) -> Self {
        ResourceState {
            resource_type: r.resource_type.clone(),
            physical_id: r.physical_id.clone(),
            properties: r.properties.clone(),
            attributes: r.attributes.clone(),
            dependencies: r.dependencies.clone(),
            provider: r.provider,
            deletion_policy: r.deletion_policy,
            update_replace_policy: r.update_replace_policy,
            baseline,
            imported: false,
        }
    }

    /// The observed properties of the baseline, when one is recorded.
    pub fn observed(&self) -> Option<&Map<String, Value>> {
        match &self.baseline {
            Some(Baseline::Recorded { observed }) => Some(observed),
            _ => None,
        }
    }

    /// Why the resource has no baseline, when it was refused.
    pub fn refused(&self) -> Option<RefusalCause> {
        match &self.baseline {
            Some(Baseline::Refused { cause }) => Some(*cause),
            _ => None,
        }
    }
}

/// A resource that a replacement superseded and that still exists in AWS until the
/// cleanup phase deletes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Predecessor {
    /// The logical id it had (and its successor has).
    pub logical_id: String,
    /// The deploy that replaced it.
    pub deploy_id: String,
    /// What it was.
    pub resource: ResourceState,
}

/// An AWS call announced by an intent whose outcome is not recorded: the next run must
/// ask AWS what became of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingIntent {
    /// The deploy that made it.
    pub deploy_id: String,
    /// The resource.
    pub logical_id: String,
    /// Its type.
    pub resource_type: String,
    /// The operation.
    pub operation: Operation,
    /// The idempotency token the call used.
    pub token: String,
    /// The provider.
    pub provider: ProviderKind,
    /// The physical id acted on, if any.
    pub physical_id: Option<String>,
    /// The properties the call sends, when recorded.
    #[serde(default)]
    pub properties: Option<Map<String, Value>>,
    /// Where the intent is in the stream.
    pub seq: u64,
}

/// How a deploy ended, as far as the log tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeployStatus {
    /// Started and not ended.
    InProgress,
    /// Every action succeeded.
    Completed,
    /// It failed; its journal is still to be rolled back.
    Failed,
    /// It failed and was rolled back completely.
    RolledBack,
    /// It failed and rollback left entries it could not undo.
    RollbackIncomplete,
}

/// The last deploy of the stack.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LastDeploy {
    /// Its id.
    pub deploy_id: String,
    /// Who started it.
    pub who: String,
    /// When (RFC 3339).
    pub started_at: String,
    /// How it stands.
    pub status: DeployStatus,
    /// Its first error, when it failed.
    pub error: Option<ErrorInfo>,
}

/// What one step of a deploy changed, so that rollback can undo it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum JournalStep {
    /// A resource was created: undo deletes it.
    Created {
        /// What was created.
        physical_id: String,
        /// Its type.
        resource_type: String,
        /// Its provider.
        provider: ProviderKind,
        /// Its properties.
        properties: Map<String, Value>,
    },
    /// A resource was updated in place: undo sends the previous properties back.
    Updated {
        /// The resource.
        physical_id: String,
        /// The resource as it was before the update.
        previous: ResourceState,
    },
    /// A resource was replaced: undo deletes the new one and keeps the old one.
    Replaced {
        /// The new resource.
        new_physical_id: String,
        /// Its type.
        resource_type: String,
        /// Its provider.
        provider: ProviderKind,
        /// The old resource, which stays.
        previous: ResourceState,
    },
}

/// One entry of the rollback journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JournalEntry {
    /// Where the step is in the stream.
    pub seq: u64,
    /// The resource.
    pub logical_id: String,
    /// What it did.
    pub step: JournalStep,
    /// True once rollback undid it.
    pub undone: bool,
    /// Set when an import adopted the resource after the failure: the physical id it
    /// adopted. Rollback skips the entry (and warns when the ids differ).
    pub imported: Option<String>,
}

/// What a deploy did, in order, for rollback.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Journal {
    /// The deploy it belongs to.
    pub deploy_id: Option<String>,
    /// Its steps, in the order they happened.
    pub entries: Vec<JournalEntry>,
}

impl Journal {
    /// The entries rollback still has to undo, last first.
    pub fn to_undo(&self) -> impl Iterator<Item = &JournalEntry> {
        self.entries
            .iter()
            .rev()
            .filter(|e| !e.undone && e.imported.is_none())
    }
}

/// The state of a stack: a pure fold of its stream. The rollback journal and the drift
/// baselines are parts of it (see [`StackState::journal`] and [`StackState::baselines`]).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct StackState {
    /// The last position folded in.
    pub seq: u64,
    /// The resources, by logical id.
    pub resources: IndexMap<String, ResourceState>,
    /// Replaced resources not yet deleted, by physical id.
    pub predecessors: IndexMap<String, Predecessor>,
    /// Intents without an outcome, by `<deploy>/<resource>/<operation>`.
    pub pending: IndexMap<String, PendingIntent>,
    /// The outputs of the last completed deploy.
    pub outputs: IndexMap<String, Value>,
    /// Its exports.
    pub exports: IndexMap<String, Value>,
    /// The other stacks' exports it imports.
    #[serde(default)]
    pub imports: Vec<String>,
    /// The parameters the last deploy used (`NoEcho` values as `****`).
    pub parameters: IndexMap<String, Value>,
    /// The digest of the template the last deploy used.
    pub template_digest: Option<String>,
    /// The last deploy.
    pub last_deploy: Option<LastDeploy>,
    /// The rollback journal of the current or last failed deploy.
    pub journal: Journal,
    /// Who holds the lock, as far as the log tells.
    pub lock: Option<Holder>,
    /// The last drift check.
    pub last_drift: Vec<DriftResult>,
}

fn pending_key(deploy_id: &str, logical_id: &str, op: Operation) -> String {
    let op = match op {
        Operation::Create => "create",
        Operation::Update => "update",
        Operation::Replace => "replace",
        Operation::Delete => "delete",
        Operation::Undo => "undo",
    };
    format!("{deploy_id}/{logical_id}/{op}")
}

/// Replaces the value at a JSON pointer inside `m` with `***`, when it exists.
fn scrub(m: &mut Map<String, Value>, pointer: &str) {
    let mut v = Value::Object(std::mem::take(m));
    if let Some(slot) = v.pointer_mut(pointer) {
        *slot = Value::String("***".into());
    }
    if let Value::Object(back) = v {
        *m = back;
    }
}

impl StackState {
    /// Folds a whole stream.
    pub fn fold<'a>(events: impl IntoIterator<Item = &'a StoredEvent>) -> StackState {
        let mut s = StackState::default();
        for e in events {
            s.apply(e);
        }
        s
    }

    /// Folds the events up to and including position `seq`.
    pub fn fold_until<'a>(
        events: impl IntoIterator<Item = &'a StoredEvent>,
        seq: u64,
    ) -> StackState {
        StackState::fold(events.into_iter().take_while(|e| e.seq <= seq))
    }

    /// The state as a snapshot body.
    pub fn to_snapshot(&self) -> Value {
        serde_json::to_value(self).expect("states serialize")
    }

    /// Reads a snapshot body; `None` when it does not fit this version's state (then the
    /// caller folds the whole stream).
    pub fn from_snapshot(v: &Value) -> Option<StackState> {
        serde_json::from_value(v.clone()).ok()
    }

    /// The rollback journal.
    pub fn journal(&self) -> &Journal {
        &self.journal
    }

    /// The drift baselines: per resource its baseline, its refusal, or nothing.
    pub fn baselines(&self) -> IndexMap<&str, Option<&Baseline>> {
        self.resources
            .iter()
            .map(|(k, r)| (k.as_str(), r.baseline.as_ref()))
            .collect()
    }

    /// The part of the state the planner compares a template with.
    pub fn to_current_state(&self) -> CurrentState {
        CurrentState {
            resources: self
                .resources
                .iter()
                .map(|(k, r)| {
                    (
                        k.clone(),
                        StateResource {
                            resource_type: r.resource_type.clone(),
                            physical_id: r.physical_id.clone(),
                            properties: r.properties.clone(),
                            attributes: r.attributes.clone(),
                            dependencies: r.dependencies.clone(),
                            deletion_policy: r.deletion_policy,
                            update_replace_policy: r.update_replace_policy,
                        },
                    )
                })
                .collect(),
        }
    }

    fn settle(&mut self, deploy_id: &str, logical_id: &str, op: Operation) {
        self.pending
            .shift_remove(&pending_key(deploy_id, logical_id, op));
    }

    fn journal_for(&mut self, deploy_id: &str) -> Option<&mut Journal> {
        (self.journal.deploy_id.as_deref() == Some(deploy_id)).then_some(&mut self.journal)
    }

    /// Applies one event. Total: it never fails and never panics.
    pub fn apply(&mut self, stored: &StoredEvent) {
        if stored.seq > self.seq {
            self.seq = stored.seq;
        }
        let seq = stored.seq;
        match &stored.event {
            Event::DeployStarted {
                deploy_id,
                who,
                template_digest,
                parameters,
                ..
            } => {
                self.last_deploy = Some(LastDeploy {
                    deploy_id: deploy_id.clone(),
                    who: who.clone(),
                    started_at: stored.at.clone(),
                    status: DeployStatus::InProgress,
                    error: None,
                });
                self.journal = Journal {
                    deploy_id: Some(deploy_id.clone()),
                    entries: vec![],
                };
                self.parameters = parameters.clone();
                self.template_digest = Some(template_digest.clone());
                self.lock = Some(Holder {
                    deploy_id: deploy_id.clone(),
                    who: who.clone(),
                    since: stored.at.clone(),
                    operation: "deploy".into(),
                });
            }
            Event::DeployCompleted {
                deploy_id,
                outputs,
                exports,
                imports,
            } => {
                self.imports = imports.clone();
                if let Some(d) = &mut self.last_deploy
                    && d.deploy_id == *deploy_id
                {
                    d.status = DeployStatus::Completed;
                }
                self.outputs = outputs.clone();
                self.exports = exports.clone();
                if self.journal.deploy_id.as_deref() == Some(deploy_id) {
                    self.journal = Journal::default();
                }
            }
            Event::DeployFailed {
                deploy_id, error, ..
            } => {
                if let Some(d) = &mut self.last_deploy
                    && d.deploy_id == *deploy_id
                {
                    d.status = DeployStatus::Failed;
                    d.error = Some(error.clone());
                }
            }
            Event::ResourceIntent {
                deploy_id,
                logical_id,
                resource_type,
                operation,
                token,
                provider,
                physical_id,
                properties,
            } => {
                self.pending.insert(
                    pending_key(deploy_id, logical_id, *operation),
                    PendingIntent {
                        deploy_id: deploy_id.clone(),
                        logical_id: logical_id.clone(),
                        resource_type: resource_type.clone(),
                        operation: *operation,
                        token: token.clone(),
                        provider: *provider,
                        physical_id: physical_id.clone(),
                        properties: properties.clone(),
                        seq,
                    },
                );
            }
            Event::ResourceCreated {
                deploy_id,
                resource,
                replaces,
                baseline,
            } => {
                let id = resource.logical_id.clone();
                let new = ResourceState::from_record(resource, baseline.clone());
                // A create that answered with a resource waiting for deletion (a
                // replacement undone by going back to the previous template) made it live
                // again: it is no longer to be deleted.
                self.predecessors.shift_remove(&new.physical_id);
                match replaces {
                    None => {
                        self.settle(deploy_id, &id, Operation::Create);
                        if let Some(j) = self.journal_for(deploy_id) {
                            j.entries.push(JournalEntry {
                                seq,
                                logical_id: id.clone(),
                                step: JournalStep::Created {
                                    physical_id: new.physical_id.clone(),
                                    resource_type: new.resource_type.clone(),
                                    provider: new.provider,
                                    properties: new.properties.clone(),
                                },
                                undone: false,
                                imported: None,
                            });
                        }
                        self.resources.insert(id, new);
                    }
                    Some(old_id) => {
                        self.settle(deploy_id, &id, Operation::Replace);
                        let old = self.resources.get(&id).cloned();
                        // The old copy is deleted later, unless the create answered with
                        // that very resource.
                        if let Some(old) = old.as_ref().filter(|_| *old_id != new.physical_id) {
                            self.predecessors.insert(
                                old_id.clone(),
                                Predecessor {
                                    logical_id: id.clone(),
                                    deploy_id: deploy_id.clone(),
                                    resource: old.clone(),
                                },
                            );
                        }
                        if let (Some(j), Some(old)) = (self.journal_for(deploy_id), old) {
                            j.entries.push(JournalEntry {
                                seq,
                                logical_id: id.clone(),
                                step: JournalStep::Replaced {
                                    new_physical_id: new.physical_id.clone(),
                                    resource_type: new.resource_type.clone(),
                                    provider: new.provider,
                                    previous: old,
                                },
                                undone: false,
                                imported: None,
                            });
                        }
                        self.resources.insert(id, new);
                    }
                }
            }
            Event::ResourceUpdated {
                deploy_id,
                resource,
                baseline,
                ..
            } => {
                let id = resource.logical_id.clone();
                self.settle(deploy_id, &id, Operation::Update);
                let mut new = ResourceState::from_record(resource, baseline.clone());
                let previous = self.resources.get(&id).cloned();
                if let Some(prev) = &previous {
                    new.imported = prev.imported;
                    // A refusal is kept unless the update brought a baseline decision.
                    if new.baseline.is_none() {
                        new.baseline = prev.baseline.clone();
                    }
                }
                if let (Some(j), Some(prev)) = (self.journal_for(deploy_id), previous) {
                    j.entries.push(JournalEntry {
                        seq,
                        logical_id: id.clone(),
                        step: JournalStep::Updated {
                            physical_id: new.physical_id.clone(),
                            previous: prev,
                        },
                        undone: false,
                        imported: None,
                    });
                }
                self.resources.insert(id, new);
            }
            Event::ResourceDeleted {
                deploy_id,
                logical_id,
                physical_id,
                replaced,
            }
            | Event::ResourceRetained {
                deploy_id,
                logical_id,
                physical_id,
                replaced,
                ..
            } => {
                self.settle(deploy_id, logical_id, Operation::Delete);
                if *replaced || self.predecessors.contains_key(physical_id) {
                    self.predecessors.shift_remove(physical_id);
                } else if self
                    .resources
                    .get(logical_id)
                    .is_some_and(|r| r.physical_id == *physical_id)
                {
                    self.resources.shift_remove(logical_id);
                    // Nothing can depend on a resource that is gone.
                    for r in self.resources.values_mut() {
                        r.dependencies.retain(|d| d != logical_id);
                    }
                }
            }
            Event::ResourceSkipped {
                deploy_id,
                logical_id,
                operation,
                ..
            }
            | Event::ResourceFailed {
                deploy_id,
                logical_id,
                operation,
                ..
            } => {
                self.settle(deploy_id, logical_id, *operation);
            }
            Event::RollbackStarted { deploy_id, .. } => {
                self.lock.get_or_insert_with(|| Holder {
                    deploy_id: deploy_id.clone(),
                    who: String::new(),
                    since: stored.at.clone(),
                    operation: "rollback".into(),
                });
            }
            Event::RollbackEntryUndone {
                deploy_id,
                logical_id,
                how,
            } => {
                self.settle(deploy_id, logical_id, Operation::Undo);
                self.undo(deploy_id, logical_id, how);
            }
            Event::RollbackFinished {
                deploy_id,
                complete,
                ..
            } => {
                if let Some(d) = &mut self.last_deploy
                    && d.deploy_id == *deploy_id
                {
                    d.status = if *complete {
                        DeployStatus::RolledBack
                    } else {
                        DeployStatus::RollbackIncomplete
                    };
                }
                if *complete && self.journal.deploy_id.as_deref() == Some(deploy_id) {
                    self.journal = Journal::default();
                }
            }
            Event::StackDestroyed { .. } => {
                self.outputs.clear();
                self.exports.clear();
                self.imports.clear();
                self.parameters.clear();
                self.template_digest = None;
            }
            Event::ResourceImported {
                resource, baseline, ..
            } => {
                let mut r = ResourceState::from_record(resource, Some(baseline.clone()));
                r.imported = true;
                self.resources.insert(resource.logical_id.clone(), r);
            }
            Event::ImportMarked {
                deploy_id,
                resources,
                ..
            } => {
                if self.journal.deploy_id.as_deref() == Some(deploy_id) {
                    for e in &mut self.journal.entries {
                        if let Some(physical) = resources.get(&e.logical_id) {
                            e.imported = Some(physical.clone());
                        }
                    }
                }
            }
            Event::BaselineRecorded {
                logical_id,
                baseline,
            }
            | Event::BaselineRefreshed {
                logical_id,
                baseline,
            } => {
                if let Some(r) = self.resources.get_mut(logical_id) {
                    r.baseline = Some(baseline.clone());
                }
            }
            Event::BaselineAccepted {
                logical_id,
                observed,
            } => {
                if let Some(r) = self.resources.get_mut(logical_id) {
                    r.baseline = Some(Baseline::Recorded {
                        observed: observed.clone(),
                    });
                }
            }
            Event::DriftChecked { results, .. } => {
                self.last_drift = results.clone();
            }
            Event::Scrubbed { logical_id, paths } => {
                if let Some(r) = self.resources.get_mut(logical_id) {
                    for p in paths {
                        scrub(&mut r.properties, p);
                        if let Some(Baseline::Recorded { observed }) = &mut r.baseline {
                            scrub(observed, p);
                        }
                    }
                }
            }
            Event::LockTaken { holder } => self.lock = Some(holder.clone()),
            Event::LockReleased { .. } | Event::LockBroken { .. } => self.lock = None,
        }
    }

    /// Undoes the journal entry of `logical_id` (the latest not yet undone).
    fn undo(&mut self, deploy_id: &str, logical_id: &str, how: &str) {
        if self.journal.deploy_id.as_deref() != Some(deploy_id) {
            return;
        }
        let Some(entry) = self
            .journal
            .entries
            .iter_mut()
            .rev()
            .find(|e| e.logical_id == logical_id && !e.undone)
        else {
            return;
        };
        entry.undone = true;
        if how == "skipped-imported" {
            return;
        }
        match entry.step.clone() {
            JournalStep::Created { physical_id, .. } => {
                if self
                    .resources
                    .get(logical_id)
                    .is_some_and(|r| r.physical_id == physical_id)
                {
                    self.resources.shift_remove(logical_id);
                    for r in self.resources.values_mut() {
                        r.dependencies.retain(|d| d != logical_id);
                    }
                }
            }
            JournalStep::Updated { mut previous, .. } => {
                self.keep_present_dependencies(&mut previous);
                self.resources.insert(logical_id.to_string(), previous);
            }
            JournalStep::Replaced { mut previous, .. } => {
                self.predecessors.shift_remove(&previous.physical_id);
                self.keep_present_dependencies(&mut previous);
                self.resources.insert(logical_id.to_string(), previous);
            }
        }
    }

    /// A restored record may name a dependency that is gone since: drop it.
    fn keep_present_dependencies(&self, r: &mut ResourceState) {
        r.dependencies.retain(|d| self.resources.contains_key(d));
    }

    /// Checks what every state rebuilt from a log must satisfy: no resource depends on
    /// one the stack does not have, no physical id is both a current resource and a
    /// replaced predecessor, and the journal's entries are in stream order. Returns every
    /// violation found.
    pub fn check_integrity(&self) -> Result<(), Vec<String>> {
        let mut problems = Vec::new();
        for (id, r) in &self.resources {
            for d in &r.dependencies {
                if !self.resources.contains_key(d) {
                    problems.push(format!(
                        "{id} depends on {d}, which the stack does not have"
                    ));
                }
            }
            if self.predecessors.contains_key(&r.physical_id) {
                problems.push(format!(
                    "{id}'s physical id {} is also a replaced predecessor",
                    r.physical_id
                ));
            }
        }
        if self
            .journal
            .entries
            .windows(2)
            .any(|w| w[0].seq >= w[1].seq)
        {
            problems.push("journal entries are out of order".into());
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }
}

#[cfg(test)]
mod tests;
