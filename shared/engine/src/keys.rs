//! The one place where event keys, idempotency tokens and run ids are built.
//!
//! An action on one resource in one run is named `<run>/<logical id>/<action>`: that is
//! the idempotency token its provider call gets, and each event about it is keyed
//! `<token>/<phase>`. A retried handler therefore appends nothing twice, and a replayed
//! call makes nothing twice. Run-level events are keyed `<run>/<what>`.

use sha2::{Digest, Sha256};
use stackflow_core::intrinsics::Pseudo;
use stackflow_core::partition::partition;
use stackflow_events::event::{Operation, now};

/// The name of an operation in keys, tokens and reports.
pub fn op_name(op: Operation) -> &'static str {
    op.as_str()
}

/// A new run id: `<prefix>-<UTC time>-<8 hex digits>` (`d` deploy, `x` destroy, `r`
/// rollback).
pub fn new_id(prefix: &str) -> String {
    let t = now();
    let compact: String = t.chars().filter(|c| c.is_ascii_digit()).take(14).collect();
    let random = uuid::Uuid::new_v4().simple().to_string();
    format!("{prefix}-{compact}-{}", &random[..8])
}

/// True when `id` is one [`new_id`] made with `prefix` (`<prefix>-<14 digits>-<8 hex>`).
pub fn is_new_id_of(prefix: &str, id: &str) -> bool {
    let Some(rest) = id.strip_prefix(prefix).and_then(|r| r.strip_prefix('-')) else {
        return false;
    };
    let mut parts = rest.split('-');
    let (Some(time), Some(random), None) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    time.len() == 14
        && time.bytes().all(|b| b.is_ascii_digit())
        && random.len() == 8
        && random.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A new stack id in CloudFormation's shape,
/// `arn:<partition>:cloudformation:<region>:<account>:stack/<name>/<uuid>`, for a stack's
/// first deploy (it is recorded then, and the same for the stack's lifetime). `None`
/// without an account id.
pub fn new_stack_id(pseudo: &Pseudo) -> Option<String> {
    let account = pseudo.account_id.as_deref()?;
    Some(format!(
        "arn:{}:cloudformation:{}:{account}:stack/{}/{}",
        partition(&pseudo.region),
        pseudo.region,
        pseudo.stack_name,
        uuid::Uuid::new_v4().hyphenated()
    ))
}

/// The key of a `BaselinesRecorded` of run `run` holding the baselines whose own events
/// would be keyed `keys`: `<run>/observed/<16 hex digits of their digest>`, the same for
/// the same baselines, whichever process appends them.
pub fn baselines_key(run: &str, keys: &[&str]) -> String {
    let mut hash = Sha256::new();
    for key in keys {
        hash.update(key.as_bytes());
        hash.update([0]);
    }
    let digest = hash.finalize();
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("{run}/observed/{hex}")
}

/// The phase of an action an event records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The intent, appended before the call.
    Intent,
    /// The call succeeded.
    Done,
    /// The call failed.
    Failed,
    /// The action was not carried out, on purpose.
    Skipped,
    /// The resource was kept (`Retain`): no call.
    Retained,
    /// An interrupted call of an earlier run, settled.
    Reconciled,
    /// The drift baseline read after the call.
    Observed,
}

impl Phase {
    fn as_str(self) -> &'static str {
        match self {
            Phase::Intent => "intent",
            Phase::Done => "done",
            Phase::Failed => "failed",
            Phase::Skipped => "skipped",
            Phase::Retained => "retained",
            Phase::Reconciled => "reconciled",
            Phase::Observed => "observed",
        }
    }
}

/// One action on one resource in one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionKey {
    token: String,
}

impl ActionKey {
    /// The action `op` on `logical_id` in run `run`.
    pub fn new(run: &str, logical_id: &str, op: Operation) -> ActionKey {
        ActionKey {
            token: format!("{run}/{logical_id}/{}", op_name(op)),
        }
    }

    /// The delete of an old copy (`physical_id`) of a replaced resource. Two old copies
    /// of one logical id can wait for deletion at once: the physical id keeps them apart.
    pub fn delete_old(run: &str, logical_id: &str, physical_id: &str) -> ActionKey {
        ActionKey {
            token: format!("{run}/{logical_id}/delete-old-{}", short_hash(physical_id)),
        }
    }

    /// The action an intent announced, from its recorded token.
    pub fn from_token(token: &str) -> ActionKey {
        ActionKey {
            token: token.to_string(),
        }
    }

    /// The idempotency token of the action's provider call.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The key of the event recording `phase` of the action.
    pub fn event(&self, phase: Phase) -> String {
        format!("{}/{}", self.token, phase.as_str())
    }
}

/// A run-level event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEvent {
    /// `DeployStarted` (a deploy's lock).
    Started,
    /// `LockTaken` (a destroy's or rollback's lock).
    Locked,
    /// `DeployCompleted`.
    Completed,
    /// `DeployFailed`.
    Failed,
    /// `LockReleased`.
    Released,
    /// `StackDestroyed`.
    Destroyed,
    /// `RollbackFinished`.
    Finished,
    /// `DriftChecked`.
    Checked,
    /// `ImportMarked` (an import marks a failed deploy's journal).
    Marked,
    /// `EventsRewritten` (a scrub).
    Rewritten,
    /// `ActionsFenced` (a failing deploy on Step Functions).
    Fenced,
}

/// A run-level event about one item (a resource, a repair, an invocation's tally).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemEvent {
    /// `BaselineRecorded`: a baseline a deploy filled in at its end.
    Filled,
    /// `BaselineRecorded`: a baseline a refresh confirmed.
    Confirmed,
    /// `BaselineAccepted` (drift `--accept`).
    Accepted,
    /// `BaselineRefreshed`.
    Refreshed,
    /// `ResourceImported`.
    Imported,
    /// `ResourceRetained` of an orphaned resource.
    Orphaned,
    /// `Scrubbed` (the item is the repair's number).
    Scrubbed,
    /// `Throttled` (the item is a new id: each invocation records its own).
    Throttled,
}

/// The key of run `run`'s event `what` about `item`: `<run>/<what>/<item>`.
pub fn item_key(run: &str, what: ItemEvent, item: &str) -> String {
    let what = match what {
        ItemEvent::Filled => "filled",
        ItemEvent::Confirmed => "confirmed",
        ItemEvent::Accepted => "accepted",
        ItemEvent::Refreshed => "refreshed",
        ItemEvent::Imported => "imported",
        ItemEvent::Orphaned => "orphaned",
        ItemEvent::Scrubbed => "scrubbed",
        ItemEvent::Throttled => "throttled",
    };
    format!("{run}/{what}/{item}")
}

/// The key of run `run`'s event `what`.
pub fn run_key(run: &str, what: RunEvent) -> String {
    let what = match what {
        RunEvent::Started => "started",
        RunEvent::Locked => "locked",
        RunEvent::Completed => "completed",
        RunEvent::Failed => "failed",
        RunEvent::Released => "released",
        RunEvent::Destroyed => "destroyed",
        RunEvent::Finished => "finished",
        RunEvent::Checked => "checked",
        RunEvent::Marked => "marked",
        RunEvent::Rewritten => "rewritten",
        RunEvent::Fenced => "fenced",
    };
    format!("{run}/{what}")
}

/// The id of the rollback that a failed deploy runs itself.
pub fn rollback_of(deploy_id: &str) -> String {
    format!("{deploy_id}-rollback")
}

/// Eight hex digits of a string's SHA-256, for keys that must tell values apart.
fn short_hash(s: &str) -> String {
    Sha256::digest(s.as_bytes())
        .iter()
        .take(4)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The resource type of a nested stack.
pub const NESTED_STACK_TYPE: &str = "AWS::CloudFormation::Stack";

/// The name of a nested stack's child stack.
pub fn nested_stack_name(parent: &str, logical_id: &str) -> String {
    format!("{parent}-{logical_id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_tokens_have_one_shape() {
        let k = ActionKey::new("d-1", "Queue", Operation::Create);
        assert_eq!(k.token(), "d-1/Queue/create");
        assert_eq!(k.event(Phase::Intent), "d-1/Queue/create/intent");
        assert_eq!(ActionKey::from_token(k.token()), k);
        assert_eq!(run_key("d-1", RunEvent::Released), "d-1/released");
        assert_eq!(rollback_of("d-1"), "d-1-rollback");
    }

    #[test]
    fn baseline_batches_are_keyed_by_what_they_hold() {
        let ab = baselines_key("d-1", &["d-1/A/create/observed", "d-1/B/create/observed"]);
        assert!(ab.starts_with("d-1/observed/") && ab.len() == "d-1/observed/".len() + 16);
        let again = baselines_key("d-1", &["d-1/A/create/observed", "d-1/B/create/observed"]);
        assert_eq!(ab, again, "the same baselines, the same key");
        // No two sets share a key because their keys run together.
        let joined = baselines_key("d-1", &["d-1/A/create/observedd-1/B/create/observed"]);
        assert_ne!(ab, joined);
        assert_ne!(ab, baselines_key("d-1", &["d-1/A/create/observed"]));
    }

    #[test]
    fn two_old_copies_of_one_resource_have_distinct_keys() {
        let a = ActionKey::delete_old("d-1", "Table", "table-a");
        let b = ActionKey::delete_old("d-1", "Table", "table-b");
        assert_ne!(a.token(), b.token());
        assert_ne!(a.event(Phase::Intent), b.event(Phase::Intent));
        assert!(a.token().starts_with("d-1/Table/delete-old-"));
    }

    #[test]
    fn stack_ids_are_cloudformation_arns() {
        let mut pseudo = Pseudo {
            region: "cn-north-1".into(),
            account_id: Some("123456789012".into()),
            stack_name: "app".into(),
            stack_id: None,
        };
        let id = new_stack_id(&pseudo).unwrap();
        let prefix = "arn:aws-cn:cloudformation:cn-north-1:123456789012:stack/app/";
        assert!(id.starts_with(prefix), "{id}");
        assert!(uuid::Uuid::parse_str(&id[prefix.len()..]).is_ok(), "{id}");
        pseudo.account_id = None;
        assert_eq!(new_stack_id(&pseudo), None);
    }

    #[test]
    fn ids_are_unique_and_readable() {
        let a = new_id("d");
        let b = new_id("d");
        assert!(is_new_id_of("d", &a) && !is_new_id_of("c", &a), "{a}");
        assert!(!is_new_id_of("d", "d-my-execution") && !is_new_id_of("d", "d"));
        assert_ne!(a, b);
        assert!(a.starts_with("d-") && a.len() == 2 + 14 + 1 + 8, "{a}");
    }
}
