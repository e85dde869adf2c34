//! The events of a stack's stream.
//!
//! Every fact stackflow records about a stack is one of these. Each type has a name (the
//! `type` field) and a schema version (`v`, kept in the [`StoredEvent`] envelope); the
//! serialized form of every type is pinned by a snapshot test, and [`upcast`] turns older
//! versions into the current one on read.
//!
//! No event holds a secret: properties keep dynamic references as their `{{resolve:...}}`
//! text, `NoEcho` parameter values are `****`, and error messages are masked before an
//! event is built.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use stackflow_core::template::Policy;

pub use stackflow_core::ProviderKind;

/// The AWS operation an intent announces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Operation {
    /// Create a resource.
    Create,
    /// Update it in place.
    Update,
    /// Create the replacement of a resource (its predecessor is deleted in cleanup).
    Replace,
    /// Delete it.
    Delete,
    /// Undo a step of a failed deploy.
    Undo,
}

impl Operation {
    /// The operation's name in keys, tokens and reports (its serialized form).
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "create",
            Operation::Update => "update",
            Operation::Replace => "replace",
            Operation::Delete => "delete",
            Operation::Undo => "undo",
        }
    }
}

/// An error as recorded: a stable name and a masked message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorInfo {
    /// A stable error name (`Throttling`, `InvalidRequest`, `NotFound`, ...).
    pub name: String,
    /// The message, with every secret masked.
    pub message: String,
}

/// How one AWS service throttled the calls of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceThrottling {
    /// The service (`sqs`, `cloudcontrolapi`).
    pub service: String,
    /// Throttled calls, each sent again.
    pub retries: u64,
    /// The lowest the service's concurrency limit went during the run, when it was
    /// lowered (an adaptive run; a run with a pinned concurrency has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lowest_limit: Option<u64>,
}

/// Who holds a stack's lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    /// The deploy (or rollback, destroy, import) that holds it.
    pub deploy_id: String,
    /// Who started it (`user@host`, an execution ARN, a pipeline).
    pub who: String,
    /// When it was taken (RFC 3339).
    pub since: String,
    /// What holds it: `deploy`, `destroy`, `rollback`, `import`.
    pub operation: String,
    /// Until when the lock is leased (RFC 3339): its holder renews the lease while it
    /// runs, and once it has passed, another run may break the lock and take it. `None`:
    /// held until released or broken explicitly (a Step Functions execution's lock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<String>,
    /// Since when (RFC 3339) the run that holds it begins no new action: set by an
    /// `ActionsFenced` append when a deploy on Step Functions starts to fail
    /// ([`crate::store::Precondition::FenceLock`]). Its holder still records outcomes,
    /// undoes and releases the lock; a forward action's intent is refused. `None`: open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fenced: Option<String>,
}

/// Why a resource has no drift baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RefusalCause {
    /// The recorded properties no longer spell the template's dynamic reference, or
    /// resolution dropped part of the template.
    IncompleteResolution,
    /// The resource depends on a parameter whose deployed value could not be proven equal
    /// to its Default.
    UnverifiableParameter,
}

impl RefusalCause {
    /// The cause as the seeds and `state show` spell it: `incomplete-resolution`,
    /// `unverifiable-parameter`.
    pub fn as_str(self) -> &'static str {
        match self {
            RefusalCause::IncompleteResolution => "incomplete-resolution",
            RefusalCause::UnverifiableParameter => "unverifiable-parameter",
        }
    }
}

/// A drift baseline: what AWS held after the last create, update or import, or why none
/// was recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Baseline {
    /// The observed properties (secrets as references or `***`).
    Recorded {
        /// The properties AWS returned, in the template's shape.
        observed: Map<String, Value>,
    },
    /// No baseline, and why.
    Refused {
        /// The cause.
        cause: RefusalCause,
    },
}

/// Everything recorded about a resource once AWS has it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceRecord {
    /// The logical id.
    pub logical_id: String,
    /// The resource type.
    #[serde(rename = "type")]
    pub resource_type: String,
    /// The physical id.
    pub physical_id: String,
    /// The properties as sent (secrets as their `{{resolve:...}}` text).
    pub properties: Map<String, Value>,
    /// The `Fn::GetAtt` values.
    #[serde(default)]
    pub attributes: IndexMap<String, Value>,
    /// The resources it depends on.
    #[serde(default)]
    pub dependencies: Vec<String>,
    /// The provider that made it.
    pub provider: ProviderKind,
    /// `DeletionPolicy`.
    #[serde(default)]
    pub deletion_policy: Option<Policy>,
    /// `UpdateReplacePolicy`.
    #[serde(default)]
    pub update_replace_policy: Option<Policy>,
    /// A keyed digest of the values its dynamic references resolved to when it was sent
    /// (the values are never recorded): a rotated secret changes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_digest: Option<String>,
}

/// The result of comparing one resource with its baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DriftResult {
    /// The logical id.
    pub logical_id: String,
    /// `in-sync`, `drifted`, `deleted`, `not-compared`.
    pub status: String,
    /// The property paths that differ.
    #[serde(default)]
    pub paths: Vec<String>,
}

/// One event of a stack's stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum Event {
    /// A deploy began; appended together with taking the lock.
    DeployStarted {
        /// The deploy.
        deploy_id: String,
        /// Who started it.
        who: String,
        /// A digest of the template deployed.
        template_digest: String,
        /// The parameters used (`NoEcho` values as `****`).
        parameters: IndexMap<String, Value>,
        /// True when a failure must not be rolled back.
        no_rollback: bool,
        /// The stack's id (`AWS::StackId`), made by its first deploy and the same after.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stack_id: Option<String>,
    },
    /// A deploy finished: every action succeeded.
    DeployCompleted {
        /// The deploy.
        deploy_id: String,
        /// The stack's outputs.
        outputs: IndexMap<String, Value>,
        /// Its exports: export name to value.
        exports: IndexMap<String, Value>,
        /// The exports of other stacks it imports (`Fn::ImportValue`), so that destroying
        /// the exporting stack can be refused.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        imports: Vec<String>,
    },
    /// A deploy failed.
    DeployFailed {
        /// The deploy.
        deploy_id: String,
        /// The first error.
        error: ErrorInfo,
        /// The resource it came from, if any.
        logical_id: Option<String>,
    },
    /// An AWS call is about to be made; written before the call, with the token that the
    /// call uses, so that an interrupted deploy can ask AWS what became of it.
    ResourceIntent {
        /// The deploy.
        deploy_id: String,
        /// The resource.
        logical_id: String,
        /// Its type.
        resource_type: String,
        /// What is about to happen.
        operation: Operation,
        /// The idempotency token of the call (Cloud Control `ClientToken`, or the
        /// deterministic name an SDK provider uses).
        token: String,
        /// The provider that will make the call.
        provider: ProviderKind,
        /// The physical id the call acts on (update, delete), when there is one.
        physical_id: Option<String>,
        /// The properties the call sends (secrets as their `{{resolve:...}}` text, `NoEcho`
        /// values masked), so that an interrupted call can be replayed without the template.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        properties: Option<Map<String, Value>>,
    },
    /// A resource was created (also the new half of a replacement).
    ResourceCreated {
        /// The deploy.
        deploy_id: String,
        /// What was created.
        resource: ResourceRecord,
        /// For a replacement: the predecessor's physical id, deleted in cleanup.
        replaces: Option<String>,
        /// The drift baseline read right after.
        baseline: Option<Baseline>,
    },
    /// A resource was updated in place.
    ResourceUpdated {
        /// The deploy.
        deploy_id: String,
        /// The resource as it is now.
        resource: ResourceRecord,
        /// The properties before the update (what rollback sends back).
        previous_properties: Map<String, Value>,
        /// The drift baseline read right after.
        baseline: Option<Baseline>,
    },
    /// A resource was deleted in AWS (a removed resource, or a replaced predecessor).
    ResourceDeleted {
        /// The deploy.
        deploy_id: String,
        /// The resource.
        logical_id: String,
        /// What was deleted.
        physical_id: String,
        /// True when it was the predecessor of a replacement (the resource itself stays).
        replaced: bool,
    },
    /// A resource left the stack but stays in AWS (`DeletionPolicy: Retain`, or
    /// `UpdateReplacePolicy: Retain` on a replacement).
    ResourceRetained {
        /// The deploy.
        deploy_id: String,
        /// The resource.
        logical_id: String,
        /// What stays in AWS.
        physical_id: String,
        /// Why: the policy that kept it.
        reason: String,
        /// True when it was a replaced predecessor.
        replaced: bool,
    },
    /// An action was not done, and why (e.g. a delete that AWS refused to make).
    ResourceSkipped {
        /// The deploy.
        deploy_id: String,
        /// The resource.
        logical_id: String,
        /// What was not done.
        operation: Operation,
        /// Why.
        reason: String,
    },
    /// An action failed.
    ResourceFailed {
        /// The deploy.
        deploy_id: String,
        /// The resource.
        logical_id: String,
        /// What failed.
        operation: Operation,
        /// The error.
        error: ErrorInfo,
    },
    /// Rollback of a failed deploy began.
    RollbackStarted {
        /// The deploy being rolled back.
        deploy_id: String,
        /// The rollback's own id.
        rollback_id: String,
    },
    /// One journal entry was undone.
    RollbackEntryUndone {
        /// The deploy being rolled back.
        deploy_id: String,
        /// The resource.
        logical_id: String,
        /// How: `deleted`, `restored`, `skipped-imported`, `already-gone`.
        how: String,
    },
    /// Rollback ended.
    RollbackFinished {
        /// The deploy rolled back.
        deploy_id: String,
        /// True when every entry was undone.
        complete: bool,
        /// Entries that could not be undone.
        errors: Vec<ErrorInfo>,
    },
    /// `destroy` deleted (or retained) every resource: the stack has no outputs, exports or
    /// parameters any more (its stream keeps the history).
    StackDestroyed {
        /// The destroy.
        deploy_id: String,
    },
    /// An existing resource was adopted.
    ResourceImported {
        /// The import.
        import_id: String,
        /// What was adopted.
        resource: ResourceRecord,
        /// Its baseline, or the refusal and its cause; none when AWS's properties could
        /// not be read (drift then compares with the recorded properties).
        baseline: Option<Baseline>,
    },
    /// An import marked adopted resources on the journal of a failed deploy, so that its
    /// rollback leaves them alone.
    ImportMarked {
        /// The import.
        import_id: String,
        /// The failed deploy whose journal is marked.
        deploy_id: String,
        /// Logical id to the physical id adopted.
        resources: IndexMap<String, String>,
    },
    /// A baseline was recorded for a resource outside a create, update or import.
    BaselineRecorded {
        /// The resource.
        logical_id: String,
        /// The baseline.
        baseline: Baseline,
    },
    /// Baselines read after their resources' creates or updates, recorded together (the
    /// reads of one run that ended while the previous ones were being appended).
    BaselinesRecorded {
        /// Logical id to its baseline.
        baselines: IndexMap<String, Baseline>,
    },
    /// `state refresh-observed` read a fresh baseline.
    BaselineRefreshed {
        /// The resource.
        logical_id: String,
        /// The baseline.
        baseline: Baseline,
    },
    /// `drift --accept` took what AWS holds as the new baseline.
    BaselineAccepted {
        /// The resource.
        logical_id: String,
        /// The observed properties accepted.
        observed: Map<String, Value>,
    },
    /// A drift check ran.
    DriftChecked {
        /// The check.
        check_id: String,
        /// Per resource.
        results: Vec<DriftResult>,
    },
    /// Secret values were removed from the state (`stackflow scrub`).
    Scrubbed {
        /// The resource the values belong to; empty for values of the stack itself
        /// (outputs, exports, parameters, the last deploy's error).
        logical_id: String,
        /// JSON pointers into the resource's properties (and its recorded baseline) whose
        /// values are replaced by `***`.
        paths: Vec<String>,
        /// JSON pointers into the stack state (as `state show --json` prints it, e.g.
        /// `/resources/Db/properties/Password` or `/outputs/Url`) and the text that replaces
        /// the string found there: the `{{resolve:...}}` text a dynamic reference's value
        /// came from, or `****` for a `NoEcho` value. Added in version 2; a version-1 event
        /// has none.
        #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
        replaced: IndexMap<String, String>,
    },
    /// Stored event bodies were rewritten in place (`stackflow scrub --rewrite`): the one
    /// event that says the stream is not exactly as first written. Every snapshot of the
    /// stream was dropped with the rewrite.
    EventsRewritten {
        /// Who rewrote them.
        by: String,
        /// Why, in words (never the removed values).
        reason: String,
        /// The positions whose bodies were rewritten.
        seqs: Vec<u64>,
    },
    /// The stack's lock was taken (by something other than a deploy start).
    LockTaken {
        /// The new holder.
        holder: Holder,
    },
    /// Calls of a run were throttled: recorded once, before the run ends, and only when
    /// some were (a run that nothing throttled records none).
    Throttled {
        /// The run (deploy, destroy).
        deploy_id: String,
        /// Per service, in name order.
        services: Vec<ServiceThrottling>,
    },
    /// A failing deploy begins no new action: appended with the fence on its lock
    /// ([`crate::store::Precondition::FenceLock`]), before its Fail looks for the calls
    /// still running and rolls back. No forward action's `ResourceIntent` of the deploy
    /// follows it.
    ActionsFenced {
        /// The deploy.
        deploy_id: String,
    },
    /// The lock was released.
    LockReleased {
        /// The deploy that held it.
        deploy_id: String,
    },
    /// A lock whose holder is gone was broken explicitly.
    LockBroken {
        /// Who broke it.
        by: String,
        /// The holder it had.
        previous: Holder,
    },
}

/// The current schema version of every event type. Bump a type's number when its fields
/// change, and teach [`upcast`] to turn the old form into the new one.
pub fn current_version(type_name: &str) -> u32 {
    match type_name {
        // Version 2 added `replaced`.
        "Scrubbed" => 2,
        _ => 1,
    }
}

/// Names the event types once: [`EVENT_TYPES`] and [`Event::type_name`] are made from
/// the one list, whose `match` fails to compile when a variant is missing from it, and
/// whose names are the variants' own (as serde tags them).
macro_rules! event_types {
    ($($name:ident),* $(,)?) => {
        /// Every event type name.
        pub const EVENT_TYPES: &[&str] = &[$(stringify!($name)),*];

        impl Event {
            /// The event's type name.
            pub fn type_name(&self) -> &'static str {
                match self {
                    $(Event::$name { .. } => stringify!($name),)*
                }
            }
        }
    };
}

event_types!(
    DeployStarted,
    DeployCompleted,
    DeployFailed,
    ResourceIntent,
    ResourceCreated,
    ResourceUpdated,
    ResourceDeleted,
    ResourceRetained,
    ResourceSkipped,
    ResourceFailed,
    RollbackStarted,
    RollbackEntryUndone,
    RollbackFinished,
    StackDestroyed,
    ResourceImported,
    ImportMarked,
    BaselineRecorded,
    BaselinesRecorded,
    BaselineRefreshed,
    BaselineAccepted,
    DriftChecked,
    Scrubbed,
    EventsRewritten,
    LockTaken,
    Throttled,
    ActionsFenced,
    LockReleased,
    LockBroken,
);

/// Why a stored event could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The event was written by a newer stackflow.
    #[error(
        "event type {type_name} version {version} is newer than this stackflow understands (up to {known}); upgrade stackflow"
    )]
    TooNew {
        /// The type.
        type_name: String,
        /// Its version.
        version: u32,
        /// The newest this build knows.
        known: u32,
    },
    /// The body does not match its type.
    #[error("event type {type_name} version {version} is malformed: {message}")]
    Malformed {
        /// The type.
        type_name: String,
        /// Its version.
        version: u32,
        /// What is wrong.
        message: String,
    },
}

/// Turns the body of an event stored at `version` into the current version's body. A
/// version newer than this build knows is an error, never a guess.
pub fn upcast(type_name: &str, version: u32, body: Value) -> Result<Value, DecodeError> {
    let known = current_version(type_name);
    if version > known {
        return Err(DecodeError::TooNew {
            type_name: type_name.to_string(),
            version,
            known,
        });
    }
    // A `(type, 1) => ...` arm would rewrite a version-1 body into version 2, and so on.
    // A version-1 `Scrubbed` needs none: it has no `replaced`, which reads as empty (its
    // paths are replaced by `***`, as they always were).
    Ok(body)
}

impl Event {
    /// The logical id the event is about, if it is about one resource.
    pub fn logical_id(&self) -> Option<&str> {
        match self {
            Event::ResourceIntent { logical_id, .. }
            | Event::ResourceDeleted { logical_id, .. }
            | Event::ResourceRetained { logical_id, .. }
            | Event::ResourceSkipped { logical_id, .. }
            | Event::ResourceFailed { logical_id, .. }
            | Event::RollbackEntryUndone { logical_id, .. }
            | Event::BaselineRecorded { logical_id, .. }
            | Event::BaselineRefreshed { logical_id, .. }
            | Event::BaselineAccepted { logical_id, .. }
            | Event::Scrubbed { logical_id, .. } => Some(logical_id),
            Event::ResourceCreated { resource, .. }
            | Event::ResourceUpdated { resource, .. }
            | Event::ResourceImported { resource, .. } => Some(&resource.logical_id),
            Event::DeployFailed { logical_id, .. } => logical_id.as_deref(),
            _ => None,
        }
    }

    /// The body as stored: the serialized event (its `type` field included).
    pub fn to_body(&self) -> Value {
        serde_json::to_value(self).expect("events serialize")
    }

    /// Reads an event stored as `type_name` at `version`. The body's own `type` must be
    /// `type_name` (an event stored under one type and holding another is malformed, so
    /// a version check can never be made against the wrong type), and the type must be
    /// one of [`EVENT_TYPES`].
    pub fn from_body(type_name: &str, version: u32, body: Value) -> Result<Event, DecodeError> {
        let malformed = |message: String| DecodeError::Malformed {
            type_name: shown(type_name),
            version,
            message: shown(&message),
        };
        if !EVENT_TYPES.contains(&type_name) {
            return Err(malformed(
                "this stackflow knows no event type of this name (a newer one may have written it)"
                    .to_string(),
            ));
        }
        if version == 0 {
            return Err(malformed("versions start at 1".to_string()));
        }
        match body.get("type") {
            Some(Value::String(t)) if t == type_name => {}
            Some(Value::String(t)) => {
                return Err(malformed(format!("its body is a `{}` event", shown(t))));
            }
            Some(_) => return Err(malformed("its `type` is not a string".to_string())),
            None if body.is_object() => {
                return Err(malformed("its body has no `type`".to_string()));
            }
            None => return Err(malformed("its body is not an object".to_string())),
        }
        let body = upcast(type_name, version, body)?;
        serde_json::from_value(body).map_err(|e| malformed(e.to_string()))
    }

    /// Reads an event stored as `type_name` at `version` from its JSON text (see
    /// [`Self::from_body`]).
    pub fn from_text(type_name: &str, version: u32, text: &str) -> Result<Event, DecodeError> {
        let body: Value = serde_json::from_str(text).map_err(|e| DecodeError::Malformed {
            type_name: shown(type_name),
            version,
            message: shown(&format!("not JSON: {e}")),
        })?;
        Event::from_body(type_name, version, body)
    }
}

/// The longest type name or message a [`DecodeError`] shows (a malformed body can quote
/// a long value).
const MAX_SHOWN: usize = 500;

/// `text` as a [`DecodeError`] shows it: shortened in the middle when it is long.
fn shown(text: &str) -> String {
    stackflow_core::limits::abbreviate(text, MAX_SHOWN).into_owned()
}

/// An event to append, with the key that makes appending it idempotent: the same key
/// appended twice is stored once. Keys are deterministic (`<deploy>/<resource>/<action>/
/// <phase>`), so a retried task produces the same key.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    /// The idempotency key.
    pub key: String,
    /// The event.
    pub event: Event,
}

impl NewEvent {
    /// An event with its key.
    pub fn new(key: impl Into<String>, event: Event) -> Self {
        NewEvent {
            key: key.into(),
            event,
        }
    }

    /// A digest of the event's content (not its key), to tell a retried append of the same
    /// event from a different event under the same key.
    pub fn digest(&self) -> String {
        digest(&self.event.to_body())
    }
}

/// The SHA-256 of a value's JSON text, in hex.
pub fn digest(v: &Value) -> String {
    use sha2::{Digest, Sha256};
    let text = serde_json::to_string(v).expect("values serialize");
    let hash = Sha256::digest(text.as_bytes());
    hash.iter().map(|b| format!("{b:02x}")).collect()
}

/// An event as read back from a stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredEvent {
    /// Its position in the stream, from 1. Positions only grow; a position reserved by an
    /// append that then found its key already present stays empty.
    pub seq: u64,
    /// Its idempotency key.
    pub key: String,
    /// When it was appended (RFC 3339, UTC).
    pub at: String,
    /// The schema version it was written with.
    pub v: u32,
    /// The event, upcast to the current version.
    pub event: Event,
}

/// The time now, as events record it.
pub fn now() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}
