//! The stack state: its types, and what is read from it.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use stackflow_core::plan::{CurrentState, StateResource};
use stackflow_core::template::Policy;

use super::Journal;
use crate::event::{
    Baseline, DriftResult, ErrorInfo, Holder, Operation, ProviderKind, RefusalCause,
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
    /// The keyed digest of the secrets it was sent (see [`ResourceRecord::secret_digest`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_digest: Option<String>,
}

impl ResourceState {
    /// The state of the resource `r` records, with `baseline` (not adopted by an import).
    pub fn from_record(r: &ResourceRecord, baseline: Option<Baseline>) -> Self {
        ResourceState {
            resource_type: r.resource_type.clone(),
            physical_id: r.physical_id.clone(),
            properties: r.properties.clone(),
            attributes: r.attributes.clone(),
            dependencies: r.dependencies.clone(),
            provider: r.provider,
            deletion_policy: r.deletion_policy,
            update_replace_policy: r.update_replace_policy,
            secret_digest: r.secret_digest.clone(),
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
    /// When the intent was recorded (RFC 3339), when known: a replay long after it may
    /// find the call's idempotency token forgotten.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
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
    /// The stack's id (`AWS::StackId`), from its first deploy; a destroyed stack's next
    /// deploy makes a new one.
    #[serde(default)]
    pub stack_id: Option<String>,
    /// The last deploy.
    pub last_deploy: Option<LastDeploy>,
    /// The rollback journal of the current or last failed deploy.
    pub journal: Journal,
    /// Who holds the lock, as far as the log tells.
    pub lock: Option<Holder>,
    /// The last drift check.
    pub last_drift: Vec<DriftResult>,
}

/// The key of an intent in [`StackState::pending`]: `<deploy>/<resource>/<operation>`
/// (and `/<physical id>` for a delete).
pub(super) fn pending_key(deploy_id: &str, logical_id: &str, op: Operation) -> String {
    format!("{deploy_id}/{logical_id}/{}", op.as_str())
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
                            secret_digest: r.secret_digest.clone(),
                        },
                    )
                })
                .collect(),
        }
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
