//! What is recorded in place of a secret, as text: the mask, how to tell one, and the
//! masking of known secret values inside strings. Where secrets are, and how a value is
//! masked whole, is [`crate::secrets`].

use serde_json::Value;

/// The text that stands for a masked value.
pub const MASK: &str = "****";

/// True when `s` is what [`crate::secrets::Masking`] records in place of a value (`****`, or `****#`
/// and 16 hex digits).
pub fn is_mask(s: &str) -> bool {
    match s.strip_prefix(MASK) {
        Some("") => true,
        Some(rest) => rest
            .strip_prefix('#')
            .is_some_and(|h| h.len() == 16 && h.bytes().all(|b| b.is_ascii_hexdigit())),
        None => false,
    }
}

/// True when the string `s` is, or holds, a mask: a stackflow mask ([`MASK`], `****`,
/// anywhere in it) or a drift baseline's masked position (the whole string
/// [`crate::dynref::MASK`], `***`). Neither may ever be sent to AWS.
pub fn is_masked(s: &str) -> bool {
    s.contains(MASK) || s == crate::dynref::MASK
}

/// True when `v` holds a masked value anywhere (see [`is_masked`]): a value that must
/// never be sent.
pub fn contains_mask(v: &Value) -> bool {
    match v {
        Value::String(s) => is_masked(s),
        Value::Array(items) => items.iter().any(contains_mask),
        Value::Object(m) => m.values().any(contains_mask),
        _ => false,
    }
}

/// Replaces every `NoEcho` parameter value inside strings with `****`, so that a plan
/// shown or recorded never holds one.
pub fn mask_values(v: &Value, secrets: &[String]) -> Value {
    if secrets.is_empty() {
        return v.clone();
    }
    match v {
        Value::String(s) => {
            let mut out = s.clone();
            let mut sorted: Vec<&String> = secrets.iter().filter(|s| !s.is_empty()).collect();
            sorted.sort_by_key(|s| std::cmp::Reverse(s.len()));
            for secret in sorted {
                out = out.replace(secret.as_str(), "****");
            }
            Value::String(out)
        }
        Value::Array(items) => {
            Value::Array(items.iter().map(|i| mask_values(i, secrets)).collect())
        }
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), mask_values(v, secrets)))
                .collect(),
        ),
        other => other.clone(),
    }
}
