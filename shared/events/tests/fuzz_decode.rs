//! Bad input for the event decoder: every event type's real body (the pinned snapshots)
//! with random changes, the same as text with random edits, random JSON under random
//! type names and versions, and JSON nested thousands deep. Decoding gives the event or a
//! clear `DecodeError`, without a panic, quickly; an event that decodes reads back as
//! itself from its own body.
//!
//! `STACKFLOW_FUZZ_SECONDS=600 cargo test -p stackflow-events --test fuzz_decode -- --nocapture`
//! runs it for ten minutes.

// One driver for every fuzz target of the workspace: the core crate's.
#[path = "../../core/tests/fuzz_support/mod.rs"]
mod fuzz_support;

use std::path::PathBuf;
use std::sync::LazyLock;

use fuzz_support::Outcome;
use proptest::prelude::*;
use serde_json::{Map, Value, json};
use stackflow_events::event::{DecodeError, EVENT_TYPES, Event, current_version};

/// One real body per event type, from the snapshots that pin their form, and a
/// version-1 `Scrubbed`.
static SAMPLES: LazyLock<Vec<(String, u32, Value)>> = LazyLock::new(|| {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/projection/snapshots");
    let mut samples = vec![(
        "Scrubbed".to_string(),
        1,
        json!({"type": "Scrubbed", "logical_id": "Db", "paths": ["/Password"]}),
    )];
    for entry in std::fs::read_dir(&dir)
        .expect("the event snapshots")
        .flatten()
    {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        // An insta snapshot: a header between `---` lines, then the JSON.
        let Some((_, body)) = text.rsplit_once("\n---\n") else {
            continue;
        };
        if let Ok(body) = serde_json::from_str::<Value>(body)
            && let Some(t) = body.get("type").and_then(Value::as_str)
        {
            samples.push((t.to_string(), current_version(t), body));
        }
    }
    samples.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
    assert!(
        samples.len() > EVENT_TYPES.len(),
        "{} samples",
        samples.len()
    );
    samples
});

/// What the decoder is handed: a type name, a version, and a body as a value or as text.
#[derive(Debug, Clone)]
enum Input {
    Body(String, u32, Value),
    Text(String, u32, String),
}

/// One change to a body: what, where (an index into its JSON pointers), with what.
#[derive(Debug, Clone)]
struct Change {
    op: u8,
    at: usize,
    value: Value,
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        "[ -~]{0,10}".prop_map(Value::String),
        prop::sample::select(EVENT_TYPES).prop_map(|t| json!(t)),
        prop::sample::select(vec![
            "create",
            "update",
            "replace",
            "delete",
            "undo",
            "cloud-control",
            "sdk",
            "custom",
            "recorded",
            "refused",
            "Retain",
            "Delete",
            "incomplete-resolution",
            "",
        ])
        .prop_map(|t| json!(t)),
    ];
    leaf.prop_recursive(5, 48, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec(("[a-z_]{1,12}", inner), 0..5)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// Every JSON pointer in `v`.
fn pointers(v: &Value) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut pending = vec![(v, String::new())];
    while let Some((v, at)) = pending.pop() {
        let children: Vec<(String, &Value)> = match v {
            Value::Object(m) => m
                .iter()
                .map(|(k, c)| (k.replace('~', "~0").replace('/', "~1"), c))
                .collect(),
            Value::Array(items) => items
                .iter()
                .enumerate()
                .map(|(i, c)| (i.to_string(), c))
                .collect(),
            _ => continue,
        };
        for (k, c) in children {
            let p = format!("{at}/{k}");
            out.push(p.clone());
            pending.push((c, p));
        }
    }
    out
}

fn change(mut body: Value, c: &Change) -> Value {
    let all = pointers(&body);
    let at = all[c.at % all.len()].clone();
    let (parent, key) = at.rsplit_once('/').unwrap_or(("", ""));
    let key = key.replace("~1", "/").replace("~0", "~");
    match c.op % 7 {
        0 => {
            if let Some(v) = body.pointer_mut(&at) {
                *v = c.value.clone();
            }
        }
        1 => match body.pointer_mut(parent) {
            Some(Value::Object(m)) => {
                m.shift_remove(&key);
            }
            Some(Value::Array(items)) => {
                if let Ok(i) = key.parse::<usize>()
                    && i < items.len()
                {
                    items.remove(i);
                }
            }
            _ => {}
        },
        2 => {
            if let Some(Value::Object(m)) = body.pointer_mut(&at) {
                m.insert("unexpected".into(), c.value.clone());
            }
        }
        3 => {
            if let Some(m) = body.as_object_mut() {
                m.insert("type".into(), json!(EVENT_TYPES[c.at % EVENT_TYPES.len()]));
            }
        }
        4 => {
            if let Some(v) = body.pointer_mut(&at) {
                *v = match v.take() {
                    Value::Number(n) => Value::String(n.to_string()),
                    Value::String(s) => {
                        s.parse::<f64>().ok().map_or(Value::String(s), |f| json!(f))
                    }
                    other => json!([other]),
                };
            }
        }
        5 => {
            if let Some(v) = body.pointer_mut(&at) {
                *v = json!({"wrapped": v.take()});
            }
        }
        _ => body = c.value.clone(),
    }
    body
}

fn version(current: u32) -> impl Strategy<Value = u32> {
    prop_oneof![
        6 => Just(current),
        1 => Just(0u32),
        1 => Just(current + 1),
        1 => 1u32..4,
        1 => any::<u32>(),
    ]
}

/// Bytes that JSON gives meaning to.
const BYTES: &[u8] = b"{}[]\",:0-e\\u ";

fn input() -> impl Strategy<Value = Input> {
    let sample = any::<prop::sample::Index>().prop_map(|i| i.get(&SAMPLES[..]).clone());
    let changes = prop::collection::vec(
        (0u8..7, any::<usize>(), json_value()).prop_map(|(op, at, value)| Change { op, at, value }),
        0..5,
    );
    let edits = prop::collection::vec((0u8..4, any::<usize>(), any::<u8>()), 0..6);
    prop_oneof![
        5 => (sample.clone(), changes, any::<u32>()).prop_flat_map(|((t, v, body), changes, _)| {
            let body = changes.iter().fold(body, change);
            version(v).prop_map(move |v| Input::Body(t.clone(), v, body.clone()))
        }),
        3 => (sample, edits, any::<bool>()).prop_map(|((t, v, body), edits, pretty)| {
            let text = if pretty { serde_json::to_string_pretty(&body) } else { serde_json::to_string(&body) };
            let mut bytes = text.unwrap_or_default().into_bytes();
            for (op, at, b) in edits {
                let at = if bytes.is_empty() { 0 } else { at % bytes.len() };
                match op {
                    0 => bytes.insert(at, BYTES[usize::from(b) % BYTES.len()]),
                    1 => { if at < bytes.len() { bytes.remove(at); } }
                    2 => bytes.truncate(at),
                    _ => { if let Some(x) = bytes.get_mut(at) { *x ^= 1 << (b % 8); } }
                }
            }
            Input::Text(t, v, String::from_utf8_lossy(&bytes).into_owned())
        }),
        2 => (
            prop_oneof![3 => prop::sample::select(EVENT_TYPES).prop_map(str::to_string), 1 => "[ -~]{0,20}"],
            0u32..4,
            json_value(),
        )
            .prop_map(|(t, v, body)| Input::Body(t, v, body)),
        1 => (1usize..20_000, prop::sample::select(EVENT_TYPES))
            .prop_map(|(n, t)| Input::Text(t.to_string(), 1, format!("{}{}", "[".repeat(n), "]".repeat(n)))),
    ]
}

/// A clear decode error: says which type and version, not too long.
fn clear(e: &DecodeError) -> Outcome {
    let text = e.to_string();
    if !text.starts_with("event type ") || text.chars().count() > 1500 {
        return Err(format!("unclear error: {}", fuzz_support::shown(&text)));
    }
    Ok(match e {
        DecodeError::TooNew { .. } => "error: too new".to_string(),
        DecodeError::Malformed { .. } => "error: malformed".to_string(),
    })
}

fn check(input: &Input) -> Outcome {
    let (type_name, version, decoded) = match input {
        Input::Body(t, v, body) => (t, *v, Event::from_body(t, *v, body.clone())),
        Input::Text(t, v, text) => (t, *v, Event::from_text(t, *v, text)),
    };
    let event = match decoded {
        Ok(e) => e,
        Err(e) => return clear(&e),
    };
    if event.type_name() != type_name {
        return Err(format!(
            "stored as {type_name}, decoded as {}",
            event.type_name()
        ));
    }
    if version == 0 || version > current_version(type_name) {
        return Err(format!("version {version} of {type_name} decoded"));
    }
    let back = Event::from_body(type_name, current_version(type_name), event.to_body());
    if back.as_ref() != Ok(&event) {
        return Err(format!(
            "decoded, but does not read back from its own body: {back:?}"
        ));
    }
    Ok("decoded".to_string())
}

#[test]
fn fuzz_decode() {
    fuzz_support::fuzz("decode", 2000, input(), check);
}
