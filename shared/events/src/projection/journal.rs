//! The rollback journal: what a deploy did, in order, and how rollback events undo it.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{DeployStatus, ResourceState, StackState};
use crate::event::{Holder, Operation, ProviderKind};

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

impl StackState {
    /// The journal, when it belongs to `deploy_id`.
    pub(super) fn journal_for(&mut self, deploy_id: &str) -> Option<&mut Journal> {
        (self.journal.deploy_id.as_deref() == Some(deploy_id)).then_some(&mut self.journal)
    }

    /// `RollbackStarted`: a rollback without a recorded lock holds it.
    pub(super) fn rollback_started(&mut self, deploy_id: &str, at: &str) {
        self.lock.get_or_insert_with(|| Holder {
            deploy_id: deploy_id.to_string(),
            who: String::new(),
            since: at.to_string(),
            operation: "rollback".into(),
            expires: None,
            fenced: None,
        });
    }

    /// `RollbackEntryUndone`: the intent is settled and the entry undone.
    pub(super) fn rollback_entry_undone(&mut self, deploy_id: &str, logical_id: &str, how: &str) {
        self.settle(deploy_id, logical_id, Operation::Undo);
        self.undo(deploy_id, logical_id, how);
    }

    /// `RollbackFinished`: the deploy is rolled back (or not completely); a complete
    /// rollback empties its journal.
    pub(super) fn rollback_finished(&mut self, deploy_id: &str, complete: bool) {
        if let Some(d) = &mut self.last_deploy
            && d.deploy_id == *deploy_id
        {
            d.status = if complete {
                DeployStatus::RolledBack
            } else {
                DeployStatus::RollbackIncomplete
            };
        }
        if complete && self.journal.deploy_id.as_deref() == Some(deploy_id) {
            self.journal = Journal::default();
        }
    }

    /// `ImportMarked`: the journal's entries of the adopted resources are marked.
    pub(super) fn import_marked(&mut self, deploy_id: &str, resources: &IndexMap<String, String>) {
        if self.journal.deploy_id.as_deref() == Some(deploy_id) {
            for e in &mut self.journal.entries {
                if let Some(physical) = resources.get(&e.logical_id) {
                    e.imported = Some(physical.clone());
                }
            }
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
}
