//! Resolution: [`resolve`] replaces every reference in a JSON value by its value and
//! records where; [`Resolution::restore`] puts the original text back.

use std::fmt;

use serde_json::{Map, Value};

use super::{Lookup, ResolveError, find_all};

/// Where a resolved value came from: the JSON pointer (RFC 6901) of the string inside the
/// resolved properties, the string as it was before resolution (with its `{{resolve:...}}`
/// text), and the secret values that were substituted into it (only for secret references;
/// used to mask text).
///
/// Neither `Debug` nor serialization carries the secret values: `Debug` prints how many
/// there are, and a deserialized record has none (so it can restore, but not mask).
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Record {
    pub pointer: String,
    pub original: String,
    #[serde(skip)]
    pub secrets: Vec<String>,
}

impl fmt::Debug for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Record")
            .field("pointer", &self.pointer)
            .field("original", &self.original)
            .field(
                "secrets",
                &format_args!("<{} redacted>", self.secrets.len()),
            )
            .finish()
    }
}

/// What [`resolve`] did: one [`Record`] per string that contained dynamic references, in
/// document order.
#[derive(Debug, Clone, Default)]
pub struct Resolution {
    pub records: Vec<Record>,
}

/// Appends one RFC 6901 reference token (`~` as `~0`, `/` as `~1`) to a pointer.
pub(crate) fn push_token(pointer: &mut String, token: &str) {
    pointer.push('/');
    for c in token.chars() {
        match c {
            '~' => pointer.push_str("~0"),
            '/' => pointer.push_str("~1"),
            c => pointer.push(c),
        }
    }
}

/// Walks `value` (objects, arrays, strings; object keys are not resolved), replaces every
/// dynamic reference inside every string with its looked-up value, and returns the new value
/// plus the records. Looked-up values are inserted as they are: a value that itself looks
/// like `{{resolve:...}}` is not resolved again. Errors name the pointer and the reference,
/// never a resolved value.
pub fn resolve(value: &Value, lookup: &dyn Lookup) -> Result<(Value, Resolution), ResolveError> {
    let mut resolution = Resolution::default();
    let mut pointer = String::new();
    let out = walk(value, &mut pointer, lookup, &mut resolution.records)?;
    Ok((out, resolution))
}

fn walk(
    value: &Value,
    pointer: &mut String,
    lookup: &dyn Lookup,
    records: &mut Vec<Record>,
) -> Result<Value, ResolveError> {
    match value {
        Value::String(s) => resolve_string(s, pointer, lookup, records).map(Value::String),
        Value::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let len = pointer.len();
                push_token(pointer, &i.to_string());
                let resolved = walk(item, pointer, lookup, records);
                pointer.truncate(len);
                out.push(resolved?);
            }
            Ok(Value::Array(out))
        }
        Value::Object(map) => {
            let mut out = Map::with_capacity(map.len());
            for (key, item) in map {
                let len = pointer.len();
                push_token(pointer, key);
                let resolved = walk(item, pointer, lookup, records);
                pointer.truncate(len);
                out.insert(key.clone(), resolved?);
            }
            Ok(Value::Object(out))
        }
        other => Ok(other.clone()),
    }
}

fn resolve_string(
    s: &str,
    pointer: &str,
    lookup: &dyn Lookup,
    records: &mut Vec<Record>,
) -> Result<String, ResolveError> {
    let occurrences = find_all(s).map_err(|error| ResolveError::Parse {
        pointer: pointer.to_owned(),
        error,
    })?;
    if occurrences.is_empty() {
        return Ok(s.to_owned());
    }
    let mut out = String::with_capacity(s.len());
    let mut secrets: Vec<String> = Vec::new();
    let mut last = 0;
    for occ in &occurrences {
        let value = lookup
            .lookup(&occ.reference)
            .map_err(|failed| ResolveError::Lookup {
                pointer: pointer.to_owned(),
                reference: occ.text.clone(),
                failed,
            })?;
        out.push_str(&s[last..occ.start]);
        out.push_str(&value);
        last = occ.end;
        if occ.reference.is_secret() && !value.is_empty() && !secrets.contains(&value) {
            secrets.push(value);
        }
    }
    out.push_str(&s[last..]);
    records.push(Record {
        pointer: pointer.to_owned(),
        original: s.to_owned(),
        secrets,
    });
    Ok(out)
}

impl Resolution {
    /// Puts the original `{{resolve:...}}` text back at every recorded pointer (restore
    /// before persisting). Positions that no longer exist are skipped; whatever is at an
    /// existing position is replaced.
    pub fn restore(&self, value: &Value) -> Value {
        let mut out = value.clone();
        for record in &self.records {
            if let Some(slot) = out.pointer_mut(&record.pointer) {
                *slot = Value::String(record.original.clone());
            }
        }
        out
    }

    /// Whether no string contained a dynamic reference.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
}

#[cfg(test)]
mod tests;
