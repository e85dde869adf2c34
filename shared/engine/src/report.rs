//! What a run reports: per resource ([`Done`], [`Failure`]) and per stack
//! ([`StackReport`], [`RollbackReport`]).

use indexmap::IndexMap;
use serde::Serialize;
use serde_json::Value;
use stackflow_events::event::ErrorInfo;

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
    /// Entries left alone because an import adopted their resource after the failure,
    /// as `(logical id, why)`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<(String, String)>,
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
    pub(crate) fn tally(&mut self, results: &[(String, Result<Done, Failure>)]) {
        for (id, r) in results {
            match r {
                Ok(Done::Created) => self.created += 1,
                Ok(Done::Updated) => self.updated += 1,
                Ok(Done::Replaced) => self.replaced += 1,
                Ok(Done::Deleted) => self.deleted += 1,
                Ok(Done::Retained(_)) => self.retained += 1,
                Ok(Done::Skipped(why)) => self.skipped.push((id.clone(), why.clone())),
                Ok(Done::Unchanged | Done::Undone(_)) => {}
                Err(f) => self.failures.push(f.clone()),
            }
        }
    }

    pub(crate) fn new(stack: &str, deploy_id: &str) -> StackReport {
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
    /// Looked at again (a resource downstream of an update) and found unchanged: nothing
    /// was done.
    Unchanged,
    /// A rollback undid a journal entry, and how.
    Undone(Undone),
}

/// How a rollback undid a journal entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Undone {
    /// What the deploy made is deleted.
    Deleted,
    /// What the deploy made was gone already.
    AlreadyGone,
    /// Nothing can delete what the deploy made: it leaves the stack, as retained.
    Abandoned,
    /// What the deploy changed has its previous properties again.
    Restored,
    /// What the deploy made stays in AWS and leaves the stack (its `DeletionPolicy`).
    Retained,
}

impl Undone {
    /// The word the log and the report say (`RollbackEntryUndone.how`; also its
    /// serialized form).
    pub fn as_str(self) -> &'static str {
        match self {
            Undone::Deleted => "deleted",
            Undone::AlreadyGone => "already-gone",
            Undone::Abandoned => "abandoned",
            Undone::Restored => "restored",
            Undone::Retained => "retained",
        }
    }
}

impl Done {
    /// The outcome as progress lines and task results say it.
    pub fn word(&self) -> &str {
        match self {
            Done::Created => "created",
            Done::Updated => "updated",
            Done::Replaced => "replaced",
            Done::Deleted => "deleted",
            Done::Retained(_) => "retained",
            Done::Skipped(_) => "skipped",
            Done::Unchanged => "unchanged",
            Done::Undone(how) => how.as_str(),
        }
    }
}

/// What a resource task handler returns: the resource's outcome, or why the run cannot
/// go on.
pub type Handled = Result<Result<Done, Failure>, crate::engine::EngineError>;
