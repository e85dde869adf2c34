//! How much the intrinsic functions may compute: [`Budget`].

use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;

use crate::error::{ErrorKind, Path, Result, TemplateError};
use crate::limits::{MAX_RESOLVED_BYTES, show_bytes};

/// What the intrinsic functions have computed so far, counted in bytes of their results
/// (a string's length, one per other value), against [`MAX_RESOLVED_BYTES`]. A
/// [`super::Resolver`] has its own; a plan shares one between the resolvers it makes (see
/// [`super::Resolver::with_budget`]), so a template cannot multiply its size by referring
/// to a large value from many places.
#[derive(Debug, Default)]
pub struct Budget {
    used: AtomicUsize,
}

impl Budget {
    /// A budget with nothing used.
    pub fn new() -> Budget {
        Budget::default()
    }

    /// How much has been computed so far.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// Counts `v`, computed at `path`; an error once the total goes past the limit.
    pub(super) fn charge(&self, v: &Value, path: &Path) -> Result<()> {
        let used = self
            .used
            .fetch_add(weight(v), Ordering::Relaxed)
            .saturating_add(weight(v));
        if used > MAX_RESOLVED_BYTES {
            return Err(TemplateError::new(
                ErrorKind::Limit,
                path,
                format!(
                    "the template's intrinsic functions compute more than {} in all",
                    show_bytes(MAX_RESOLVED_BYTES)
                ),
            )
            .with_hint("a large value (a mapping, a parameter, a computed string) is used in too many places"));
        }
        Ok(())
    }
}

/// The size of a value as a budget counts it: the length of each string and key, one
/// for every other value.
pub(super) fn weight(v: &Value) -> usize {
    let mut total = 0usize;
    let mut pending = vec![v];
    while let Some(v) = pending.pop() {
        total = total.saturating_add(match v {
            Value::String(s) => s.len().max(1),
            Value::Array(items) => {
                pending.extend(items);
                1
            }
            Value::Object(m) => {
                pending.extend(m.values());
                m.keys().map(String::len).sum::<usize>().max(1)
            }
            _ => 1,
        });
    }
    total
}

/// How deep lists and objects nest in `v` (0 for a scalar).
pub(super) fn depth(v: &Value) -> usize {
    let mut deepest = 0;
    // Each entry: a value and how many lists and objects hold it.
    let mut pending = vec![(v, 0usize)];
    while let Some((v, held)) = pending.pop() {
        match v {
            Value::Array(items) => pending.extend(items.iter().map(|c| (c, held + 1))),
            Value::Object(m) => pending.extend(m.values().map(|c| (c, held + 1))),
            _ => continue,
        }
        deepest = deepest.max(held + 1);
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn weight_and_depth() {
        assert_eq!(weight(&json!("abc")), 3);
        assert_eq!(weight(&json!(["ab", 1, {"k": "v"}])), 1 + 2 + 1 + 1 + 1);
        assert_eq!(depth(&json!("a")), 0);
        assert_eq!(depth(&json!([])), 1);
        assert_eq!(depth(&json!({"a": [1, {"b": []}]})), 4);
    }

    #[test]
    fn the_budget_stops_past_the_limit() {
        let b = Budget::new();
        let big = Value::String("x".repeat(MAX_RESOLVED_BYTES / 2));
        b.charge(&big, &Path::root()).unwrap();
        b.charge(&big, &Path::root()).unwrap();
        let e = b
            .charge(&json!("x"), &Path::root().key("Resources"))
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::Limit);
        assert_eq!(e.path, "Resources");
    }
}
