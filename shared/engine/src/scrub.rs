//! `stackflow scrub`: finding the plaintext of secrets in a stack's log, and repairing
//! what can be repaired.
//!
//! stackflow never records a secret (dynamic references stay as their `{{resolve:...}}`
//! text, `NoEcho` values are `****`), but an older version, or a bug, may have. A scrub
//! looks for the *current* value of each secret ([`collect_secrets`]: every dynamic
//! reference the template or the log spells, resolved now, and the `NoEcho` values given
//! again) in every event body, in the state folded from them and in the latest snapshot,
//! raw, in base64 and JSON-escaped ([`scan`]). Findings name the event, the resource, the
//! JSON pointer and the secret's label, never its value.
//!
//! Repairing ([`scrub`] without `dry_run`) is a run: it takes the stack's lock as every
//! run does (`LockTaken` with the operation `scrub`, a stale lock broken, the lease kept
//! while it works) and releases it at the end:
//!
//! 1. one `Scrubbed` event per resource (and one for the stack's own values) replaces each
//!    string of the state that holds a secret by the same string with the reference text
//!    (or `****`) in its place: from then on the state, `state show` and every snapshot
//!    hold no plaintext;
//! 2. with `rewrite`, the store rewrites the bodies of the events that hold one, drops
//!    every snapshot, and appends an `EventsRewritten` naming the positions
//!    ([`EventStore::rewrite`]); without it those bodies keep the plaintext (an event is
//!    never changed in an append-only log), and the report says which;
//! 3. the state is folded again and scanned: what is left is reported; a latest snapshot
//!    that held plaintext is superseded by a clean one.
//!
//! A scrub never makes a secret safe again: whoever could read the log could read it.
//! Rotate the secret.

mod scan;
#[cfg(test)]
mod tests;

use indexmap::IndexMap;
use serde::Serialize;
use serde_json::Value;
use stackflow_core::dynref::{self, DynamicReference};
use std::sync::Arc;

use stackflow_events::event::{Event, StoredEvent};
use stackflow_events::projection::StackState;
use stackflow_events::{EventStore, NewEvent, Precondition, Rewrite, StoreError, StreamId};

use crate::engine::{Engine, EngineError};
use crate::keys::new_id;
use crate::lookups::Lookups;
use crate::recorder::Recorder;

pub use scan::{
    Finding, Form, Place, Secret, clean_text, clean_value, cleaned_event, redact, repairs,
    scan_events, scan_snapshot, scan_state,
};

/// Plaintexts shorter than this are not searched for: they would match unrelated text.
pub const MIN_PLAINTEXT: usize = 4;

/// Why the rewrite of a scrub happened, as its record says.
const REWRITE_REASON: &str =
    "scrub: plaintext secrets replaced by their {{resolve:...}} text or by ****";

/// A secret that was not searched for, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    /// Its label.
    pub secret: String,
    /// Why (never its value).
    pub reason: String,
}

/// The secrets a scrub looks for, and those it cannot.
#[derive(Debug, Default)]
pub struct Secrets {
    /// Looked for.
    pub searched: Vec<Secret>,
    /// Not looked for, and why.
    pub skipped: Vec<Skipped>,
}

impl Secrets {
    fn add(&mut self, label: &str, plaintext: &str, secret: impl FnOnce() -> Secret) {
        if plaintext.chars().count() < MIN_PLAINTEXT {
            self.skip(
                label,
                format!(
                    "its value is shorter than {MIN_PLAINTEXT} characters: searching for it would match unrelated text"
                ),
            );
        } else if !self.searched.iter().any(|s| s.label() == label) {
            self.searched.push(secret());
        }
    }

    fn skip(&mut self, label: &str, reason: String) {
        self.skipped.push(Skipped {
            secret: label.to_string(),
            reason,
        });
    }
}

/// Every dynamic reference spelt in the strings of `v`, by its text; a malformed one is
/// skipped, with the parse error.
fn references_in(v: &Value, found: &mut IndexMap<String, DynamicReference>, into: &mut Secrets) {
    match v {
        Value::String(s) if dynref::contains_dynamic_reference(s) => match dynref::find_all(s) {
            Ok(all) => {
                for occurrence in all {
                    found.entry(occurrence.text).or_insert(occurrence.reference);
                }
            }
            Err(e) => {
                let reason = format!("malformed: {e}");
                if !into.skipped.iter().any(|s| s.reason == reason) {
                    into.skip("a dynamic reference", reason);
                }
            }
        },
        Value::Array(items) => items.iter().for_each(|i| references_in(i, found, into)),
        Value::Object(m) => m.values().for_each(|i| references_in(i, found, into)),
        _ => {}
    }
}

/// What a scrub looks for: the value, resolved now through `lookups`, of every secret
/// dynamic reference (`ssm-secure`, `secretsmanager`) that `template` (the template as
/// JSON) or the bodies of `events` spell, and the `NoEcho` values in `parameters` (name
/// and value). A plain `ssm` reference is not a secret and is skipped, as is a reference
/// that cannot be resolved (with the lookup's error, which never holds a value).
pub async fn collect_secrets(
    lookups: &dyn Lookups,
    template: Option<&Value>,
    events: &[StoredEvent],
    parameters: &[(String, String)],
) -> Secrets {
    let mut out = Secrets::default();
    let mut found: IndexMap<String, DynamicReference> = IndexMap::new();
    if let Some(t) = template {
        references_in(t, &mut found, &mut out);
    }
    for e in events {
        references_in(&e.event.to_body(), &mut found, &mut out);
    }
    for (text, reference) in &found {
        if !reference.is_secret() {
            out.skip(text, "a plain ssm parameter is not a secret".into());
            continue;
        }
        match lookups.dynamic_reference(reference).await {
            Ok(value) => out.add(text, &value, || Secret::reference(text, &value)),
            Err(e) => out.skip(text, format!("could not be resolved: {e}")),
        }
    }
    for (name, value) in parameters {
        let label = format!("parameter {name}");
        out.add(&label, value, || Secret::parameter(name, value));
    }
    out
}

/// How a scrub runs.
#[derive(Debug, Clone, Default)]
pub struct ScrubOptions {
    /// Only report: append nothing, rewrite nothing.
    pub dry_run: bool,
    /// Have the store rewrite the event bodies that hold plaintext, and drop its
    /// snapshots ([`EventStore::rewrite`]).
    pub rewrite: bool,
}

/// What a store's rewrite did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RewriteSummary {
    /// The positions whose bodies were rewritten.
    pub seqs: Vec<u64>,
    /// The position of the `EventsRewritten` record.
    pub record: u64,
    /// How many snapshots were dropped.
    pub snapshots_dropped: u64,
    /// Earlier copies the store could not reach, in words.
    pub residue: Vec<String>,
}

/// What a scrub found and did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ScrubReport {
    /// True when it only reported.
    pub dry_run: bool,
    /// Every place that held a plaintext when the scrub began.
    pub findings: Vec<Finding>,
    /// The positions of the `Scrubbed` events appended.
    pub scrubbed: Vec<u64>,
    /// How many strings of the state they replace.
    pub replaced: usize,
    /// What the store's rewrite did (with `rewrite`).
    pub rewritten: Option<RewriteSummary>,
    /// The events whose stored bodies still hold plaintext.
    pub unrepaired: Vec<u64>,
    /// The position of a clean snapshot stored to supersede one that held plaintext.
    pub snapshot: Option<u64>,
    /// What the state still holds after the repair (keys that spell a secret).
    pub remaining: Vec<Finding>,
}

impl ScrubReport {
    /// True when no plaintext was found.
    pub fn clean(&self) -> bool {
        self.findings.is_empty()
    }
}

/// Why a scrub failed.
#[derive(Debug, thiserror::Error)]
pub enum ScrubError {
    /// The store failed (or the stack is locked, or cannot be rewritten).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The run could not take the stack's lock, or lost it.
    #[error(transparent)]
    Run(#[from] EngineError),
    /// An event's cleaned body is no longer an event of its type.
    #[error("event {seq} ({kind}) cannot be rewritten: {message}")]
    Rewrite {
        /// Its position.
        seq: u64,
        /// Its type.
        kind: String,
        /// Why.
        message: String,
    },
}

/// The positions of the events among `findings`, each once.
fn event_seqs(findings: &[Finding]) -> Vec<u64> {
    let mut seqs: Vec<u64> = findings
        .iter()
        .filter_map(|f| match f.place {
            Place::Event { seq, .. } => Some(seq),
            _ => None,
        })
        .collect();
    seqs.sort_unstable();
    seqs.dedup();
    seqs
}

/// Looks for `secrets` in the log of `stack`, its state and its latest snapshot, and
/// (unless `dry_run`) repairs what it found (see the [module documentation](self)). The
/// repair is a run of its own: it takes the stack's lock as every run does (a stale
/// one broken, its lease kept while it works) and releases it, whatever happens.
pub async fn scrub<S: EventStore + 'static>(
    engine: &Arc<Engine<S>>,
    stack: &str,
    secrets: &[Secret],
    options: &ScrubOptions,
) -> Result<ScrubReport, ScrubError> {
    let (store, stream) = (engine.store.as_ref(), engine.stream(stack));
    let events = store.read(&stream, 0).await?;
    let mut findings = scan_events(&events, secrets);
    findings.extend(scan_state(&StackState::fold(&events), secrets));
    if let Some((seq, body)) = store.latest_snapshot(&stream).await? {
        findings.extend(scan_snapshot(seq, &body, secrets));
    }
    let mut report = ScrubReport {
        dry_run: options.dry_run,
        unrepaired: event_seqs(&findings),
        findings,
        ..ScrubReport::default()
    };
    if options.dry_run || report.clean() {
        return Ok(report);
    }
    let id = new_id("s");
    let rec = Recorder::load(engine.store.clone(), stream.clone()).await?;
    let held = crate::run::lock(engine, &rec, &id, "scrub").await?;
    let who = &engine.who;
    let repaired = repair(store, &stream, secrets, options, (&id, who), &mut report).await;
    let released = held.release(&rec, &id).await;
    repaired?;
    released?;
    check(store, &stream, secrets, &mut report).await?;
    Ok(report)
}

/// Appends the `Scrubbed` events, then rewrites (with `rewrite`) or supersedes a snapshot
/// that holds plaintext, as run `id` of `who`, which holds the lock.
async fn repair<S: EventStore>(
    store: &S,
    stream: &StreamId,
    secrets: &[Secret],
    options: &ScrubOptions,
    (id, who): (&str, &str),
    report: &mut ScrubReport,
) -> Result<(), ScrubError> {
    // Read again under the lock: what was appended since the scan is repaired too.
    let events = store.read(stream, 0).await?;
    let state = StackState::fold(&events);
    let holds = Precondition::HoldsLock(id.to_string());
    for (i, event) in repairs(&state, secrets).into_iter().enumerate() {
        if let Event::Scrubbed { replaced, .. } = &event {
            report.replaced += replaced.len();
        }
        let new = NewEvent::new(
            crate::keys::item_key(id, crate::keys::ItemEvent::Scrubbed, &i.to_string()),
            event,
        );
        report
            .scrubbed
            .push(store.append(stream, &new, &holds).await?.seq());
    }
    if options.rewrite {
        rewrite(store, stream, secrets, &events, id, who, report).await
    } else {
        supersede_snapshot(store, stream, secrets, report).await
    }
}

/// Has the store rewrite the bodies of `events` that hold a secret, holding the lock `id`.
async fn rewrite<S: EventStore>(
    store: &S,
    stream: &StreamId,
    secrets: &[Secret],
    events: &[StoredEvent],
    id: &str,
    who: &str,
    report: &mut ScrubReport,
) -> Result<(), ScrubError> {
    let mut changed = Vec::new();
    for e in events {
        match cleaned_event(&e.event, secrets) {
            Ok(Some(new)) => changed.push((e.seq, new)),
            Ok(None) => {}
            Err(why) => {
                return Err(ScrubError::Rewrite {
                    seq: e.seq,
                    kind: e.event.type_name().to_string(),
                    message: why.reason,
                });
            }
        }
    }
    let seqs: Vec<u64> = changed.iter().map(|(seq, _)| *seq).collect();
    let record = NewEvent::new(
        crate::keys::run_key(id, crate::keys::RunEvent::Rewritten),
        Event::EventsRewritten {
            by: who.to_string(),
            reason: REWRITE_REASON.to_string(),
            seqs,
        },
    );
    let rewrite = Rewrite {
        events: changed,
        record,
    };
    let holds = Precondition::HoldsLock(id.to_string());
    let done = store.rewrite(stream, &rewrite, &holds).await?;
    report.rewritten = Some(RewriteSummary {
        seqs: done.seqs,
        record: done.record.seq(),
        snapshots_dropped: done.snapshots_dropped,
        residue: done.residue,
    });
    Ok(())
}

/// Supersedes a latest snapshot that holds plaintext with a clean one (still under the
/// lock, so that no appender is at work).
async fn supersede_snapshot<S: EventStore>(
    store: &S,
    stream: &StreamId,
    secrets: &[Secret],
    report: &mut ScrubReport,
) -> Result<(), ScrubError> {
    if let Some((seq, body)) = store.latest_snapshot(stream).await?
        && !scan_snapshot(seq, &body, secrets).is_empty()
    {
        let state = StackState::fold(&store.read(stream, 0).await?);
        store
            .put_snapshot(stream, state.seq, &state.to_snapshot())
            .await?;
        report.snapshot = Some(state.seq);
    }
    Ok(())
}

/// Scans the log and the state again after a repair: what is left.
async fn check<S: EventStore>(
    store: &S,
    stream: &StreamId,
    secrets: &[Secret],
    report: &mut ScrubReport,
) -> Result<(), ScrubError> {
    let events = store.read(stream, 0).await?;
    report.unrepaired = event_seqs(&scan_events(&events, secrets));
    report.remaining = scan_state(&StackState::fold(&events), secrets);
    Ok(())
}
