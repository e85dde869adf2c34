//! The pure part of a scrub: where the plaintext of each secret shows (in event bodies, in
//! the state, in a snapshot), what replaces it, and the `Scrubbed` events that repair the
//! state. Nothing here prints, stores or returns a plaintext: findings name the secret by
//! its label.

use indexmap::IndexMap;
use serde::Serialize;
use serde_json::{Map, Value};
use stackflow_events::event::{Event, StoredEvent, current_version};
use stackflow_events::projection::StackState;

/// A secret to look for: what it is called in reports, its plaintext in each form it is
/// searched in, and what stands for it in each form once scrubbed.
#[derive(Clone)]
pub struct Secret {
    label: String,
    /// Each form of the plaintext, with what replaces it (the same form of the
    /// replacement text); distinct, longest first.
    forms: Vec<(Form, String, String)>,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secret({} = <redacted>)", self.label)
    }
}

impl Secret {
    /// A secret called `label`, whose plaintext is replaced by `replacement`.
    pub fn new(label: &str, plaintext: &str, replacement: &str) -> Secret {
        let mut forms: Vec<(Form, String, String)> = Vec::new();
        for form in [Form::Raw, Form::Base64, Form::JsonEscaped] {
            let needle = form.encode(plaintext);
            if !needle.is_empty() && !forms.iter().any(|(_, n, _)| *n == needle) {
                forms.push((form, needle, form.encode(replacement)));
            }
        }
        forms.sort_by_key(|(_, needle, _)| std::cmp::Reverse(needle.len()));
        Secret {
            label: label.to_string(),
            forms,
        }
    }

    /// The value of a dynamic reference: called, and replaced, by its `{{resolve:...}}`
    /// text.
    pub fn reference(text: &str, plaintext: &str) -> Secret {
        Secret::new(text, plaintext, text)
    }

    /// The value of a `NoEcho` parameter: called `parameter NAME`, replaced by `****`.
    pub fn parameter(name: &str, plaintext: &str) -> Secret {
        Secret::new(&format!("parameter {name}"), plaintext, "****")
    }

    /// What the secret is called in reports.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The first form of the secret found in `text`.
    fn found_in(&self, text: &str) -> Option<Form> {
        self.forms
            .iter()
            .find(|(_, needle, _)| text.contains(needle.as_str()))
            .map(|(form, _, _)| *form)
    }
}

/// A form a plaintext is searched in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Form {
    /// As it is.
    Raw,
    /// Its standard base64 (with padding).
    Base64,
    /// JSON-escaped, as it shows in JSON text held in a string.
    JsonEscaped,
}

impl Form {
    /// `text` in this form.
    pub fn encode(self, text: &str) -> String {
        match self {
            Form::Raw => text.to_string(),
            Form::Base64 => base64(text.as_bytes()),
            Form::JsonEscaped => {
                let quoted = serde_json::to_string(text).expect("strings serialize");
                quoted[1..quoted.len() - 1].to_string()
            }
        }
    }

    /// The form's name in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Form::Raw => "raw",
            Form::Base64 => "base64",
            Form::JsonEscaped => "JSON-escaped",
        }
    }
}

/// Standard base64, with padding.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let byte = |i: usize| u32::from(chunk.get(i).copied().unwrap_or(0));
        let n = (byte(0) << 16) | (byte(1) << 8) | byte(2);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Where a finding is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "in", rename_all = "kebab-case")]
pub enum Place {
    /// In the body of the event at `seq`, of type `kind`.
    Event {
        /// Its position.
        seq: u64,
        /// Its type.
        kind: String,
    },
    /// In the state, as folded from the whole stream now.
    State,
    /// In the stored snapshot covering the stream up to `seq`.
    Snapshot {
        /// The position it covers.
        seq: u64,
    },
}

/// One place that holds a plaintext.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Where.
    #[serde(flatten)]
    pub place: Place,
    /// The resource it is about, when it is about one.
    pub logical_id: Option<String>,
    /// The JSON pointer of the string (or of the key) that holds it, inside the event's
    /// body, the state or the snapshot. A segment that would spell a secret is `***`.
    pub pointer: String,
    /// True when an object key holds it (the pointer leads to its object).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub in_key: bool,
    /// The label of the secret found.
    pub secret: String,
    /// The form it was found in.
    pub form: Form,
}

/// A string (or key) holding a secret, inside one JSON value.
struct Hit {
    pointer: String,
    in_key: bool,
    secret: usize,
    form: Form,
    /// True when the pointer leads to the string itself (no redacted segment on the way).
    exact: bool,
}

/// Every string and key of `v` that holds a secret.
fn hits(v: &Value, secrets: &[Secret]) -> Vec<Hit> {
    let mut out = Vec::new();
    walk(v, &mut String::new(), true, secrets, &mut out);
    out
}

fn walk(v: &Value, pointer: &mut String, exact: bool, secrets: &[Secret], out: &mut Vec<Hit>) {
    let found = |text: &str| {
        secrets
            .iter()
            .enumerate()
            .find_map(|(i, s)| s.found_in(text).map(|form| (i, form)))
    };
    match v {
        Value::String(text) => {
            if let Some((secret, form)) = found(text) {
                out.push(Hit {
                    pointer: pointer.clone(),
                    in_key: false,
                    secret,
                    form,
                    exact,
                });
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = pointer.len();
                pointer.push_str(&format!("/{i}"));
                walk(item, pointer, exact, secrets, out);
                pointer.truncate(len);
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                let len = pointer.len();
                let leaky = found(key);
                if let Some((secret, form)) = leaky {
                    out.push(Hit {
                        pointer: pointer.clone(),
                        in_key: true,
                        secret,
                        form,
                        exact: false,
                    });
                    pointer.push_str("/***");
                } else {
                    pointer.push('/');
                    pointer.push_str(&key.replace('~', "~0").replace('/', "~1"));
                }
                walk(item, pointer, exact && leaky.is_none(), secrets, out);
                pointer.truncate(len);
            }
        }
        _ => {}
    }
}

fn finding(hit: &Hit, place: Place, logical_id: Option<String>, secrets: &[Secret]) -> Finding {
    Finding {
        place,
        logical_id,
        pointer: hit.pointer.clone(),
        in_key: hit.in_key,
        secret: secrets[hit.secret].label.clone(),
        form: hit.form,
    }
}

/// Where each secret shows in the bodies of `events`.
pub fn scan_events(events: &[StoredEvent], secrets: &[Secret]) -> Vec<Finding> {
    let mut out = Vec::new();
    for e in events {
        let place = Place::Event {
            seq: e.seq,
            kind: e.event.type_name().to_string(),
        };
        let logical_id = e.event.logical_id().map(str::to_string);
        for hit in hits(&e.event.to_body(), secrets) {
            out.push(finding(&hit, place.clone(), logical_id.clone(), secrets));
        }
    }
    out
}

/// Where each secret shows in `state` (its JSON form, as `state show --json` prints it).
pub fn scan_state(state: &StackState, secrets: &[Secret]) -> Vec<Finding> {
    hits(&state.to_snapshot(), secrets)
        .iter()
        .map(|hit| {
            let owner = owner(state, &hit.pointer);
            finding(hit, Place::State, owner, secrets)
        })
        .collect()
}

/// Where each secret shows in a stored snapshot (whatever its shape).
pub fn scan_snapshot(seq: u64, body: &Value, secrets: &[Secret]) -> Vec<Finding> {
    let state = StackState::from_snapshot(body);
    hits(body, secrets)
        .iter()
        .map(|hit| {
            let owner = state.as_ref().and_then(|s| owner(s, &hit.pointer));
            finding(hit, Place::Snapshot { seq }, owner, secrets)
        })
        .collect()
}

/// The resource a pointer into the state is about: a resource's, a replaced copy's, an
/// intent's or a journal entry's; `None` for the stack's own values.
fn owner(state: &StackState, pointer: &str) -> Option<String> {
    let mut parts = pointer.split('/').skip(1);
    let section = parts.next()?;
    let key = parts.next()?.replace("~1", "/").replace("~0", "~");
    match section {
        "resources" => state.resources.contains_key(&key).then_some(key),
        "predecessors" => state.predecessors.get(&key).map(|p| p.logical_id.clone()),
        "pending" => state.pending.get(&key).map(|p| p.logical_id.clone()),
        "journal" if key == "entries" => {
            let i: usize = parts.next()?.parse().ok()?;
            state.journal.entries.get(i).map(|e| e.logical_id.clone())
        }
        _ => None,
    }
}

/// `text` with every form of every secret replaced by the same form of its replacement,
/// longest first. When something of a secret would still show (the replacement spells
/// it), the whole text is `***`.
pub fn clean_text(text: &str, secrets: &[Secret]) -> String {
    let mut pairs: Vec<(&str, &str)> = secrets
        .iter()
        .flat_map(|s| s.forms.iter().map(|(_, n, r)| (n.as_str(), r.as_str())))
        .collect();
    pairs.sort_by_key(|(needle, _)| std::cmp::Reverse(needle.len()));
    let mut out = text.to_string();
    for (needle, replacement) in &pairs {
        if out.contains(needle) {
            out = out.replace(needle, replacement);
        }
    }
    let clean = |t: &str| !pairs.iter().any(|(needle, _)| t.contains(needle));
    if clean(&out) {
        out
    } else if clean("***") {
        "***".to_string()
    } else {
        String::new()
    }
}

/// `text` with every form of every secret replaced by `***`: for messages that may quote
/// what they were given.
pub fn redact(text: &str, secrets: &[Secret]) -> String {
    let mut out = text.to_string();
    let mut needles: Vec<&str> = secrets
        .iter()
        .flat_map(|s| s.forms.iter().map(|(_, n, _)| n.as_str()))
        .collect();
    needles.sort_by_key(|n| std::cmp::Reverse(n.len()));
    for needle in needles {
        out = out.replace(needle, "***");
    }
    out
}

/// `v` with every string and key cleaned ([`clean_text`]).
pub fn clean_value(v: &Value, secrets: &[Secret]) -> Value {
    match v {
        Value::String(s) => Value::String(clean_text(s, secrets)),
        Value::Array(items) => {
            Value::Array(items.iter().map(|i| clean_value(i, secrets)).collect())
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (clean_text(k, secrets), clean_value(v, secrets)))
                .collect::<Map<String, Value>>(),
        ),
        other => other.clone(),
    }
}

/// An event whose cleaned body is no longer an event of its type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct Unrewritable {
    /// Why its type refuses the cleaned body (the secrets redacted).
    pub reason: String,
}

/// The event with its body cleaned, when its body holds a secret (`None` otherwise).
pub fn cleaned_event(event: &Event, secrets: &[Secret]) -> Result<Option<Event>, Unrewritable> {
    let body = event.to_body();
    if hits(&body, secrets).is_empty() {
        return Ok(None);
    }
    let kind = event.type_name();
    Event::from_body(kind, current_version(kind), clean_value(&body, secrets))
        .map(Some)
        .map_err(|e| Unrewritable {
            reason: redact(&e.to_string(), secrets),
        })
}

/// The `Scrubbed` events that replace every secret the state holds, one per resource (and
/// one for the stack's own values), each string by its cleaned text. A key that holds a
/// secret is left, and so is everything under it (a pointer cannot rename a key, and a
/// pointer through it would spell the secret): [`scan_state`] still reports them.
pub fn repairs(state: &StackState, secrets: &[Secret]) -> Vec<Event> {
    let whole = state.to_snapshot();
    let mut groups: IndexMap<String, IndexMap<String, String>> = IndexMap::new();
    for hit in hits(&whole, secrets) {
        if hit.in_key || !hit.exact {
            continue;
        }
        let Some(Value::String(text)) = whole.pointer(&hit.pointer) else {
            continue;
        };
        let owner = owner(state, &hit.pointer).unwrap_or_default();
        groups
            .entry(owner)
            .or_default()
            .insert(hit.pointer.clone(), clean_text(text, secrets));
    }
    groups
        .into_iter()
        .map(|(logical_id, replaced)| Event::Scrubbed {
            logical_id,
            paths: vec![],
            replaced,
        })
        .collect()
}
