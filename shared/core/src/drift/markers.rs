//! Where a recorded string stands for a secret, and matching such a string against the
//! text AWS returns.

use serde_json::Value;

use super::MASKED;
use crate::dynref::{contains_dynamic_reference, find_all, resolve::push_token};
use crate::secrets::MASK;

/// What a recorded string says about the secret it may stand for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Marker<'s> {
    /// Plain text.
    Plain,
    /// A value not recorded: it holds a stackflow mask (`****`, `****#<hex>`), is
    /// [`MASKED`], or spells a dynamic reference that does not parse.
    Masked,
    /// Dynamic references in text: the text around them (one more piece than there are
    /// references) and each reference's own text.
    References(Pattern<'s>),
}

/// A string with holes: `literals[0] hole literals[1] hole ... literals[n]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pattern<'s> {
    pub literals: Vec<&'s str>,
    pub holes: Vec<&'s str>,
}

/// What the recorded string `s` stands for.
pub(crate) fn marker(s: &str) -> Marker<'_> {
    if s == MASKED || s.contains(MASK) {
        return Marker::Masked;
    }
    if !contains_dynamic_reference(s) {
        return Marker::Plain;
    }
    let Ok(found) = find_all(s) else {
        return Marker::Masked;
    };
    let mut literals = Vec::with_capacity(found.len() + 1);
    let mut holes = Vec::with_capacity(found.len());
    let mut pos = 0;
    for o in &found {
        literals.push(&s[pos..o.start]);
        holes.push(&s[o.start..o.end]);
        pos = o.end;
    }
    literals.push(&s[pos..]);
    Marker::References(Pattern { literals, holes })
}

/// True when `v` holds, anywhere, a string that stands for a secret.
pub(crate) fn has_marker(v: &Value) -> bool {
    match v {
        Value::String(s) => marker(s) != Marker::Plain,
        Value::Array(items) => items.iter().any(has_marker),
        Value::Object(m) => m.values().any(has_marker),
        _ => false,
    }
}

/// Adds to `out` the pointers of the masked strings in `v` (at pointer `at`).
pub(crate) fn collect_masked(v: &Value, at: &mut String, out: &mut Vec<String>) {
    match v {
        Value::String(s) if marker(s) == Marker::Masked => out.push(at.clone()),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = at.len();
                push_token(at, &i.to_string());
                collect_masked(item, at, out);
                at.truncate(len);
            }
        }
        Value::Object(m) => {
            for (k, item) in m {
                let len = at.len();
                push_token(at, k);
                collect_masked(item, at, out);
                at.truncate(len);
            }
        }
        _ => {}
    }
}

/// The JSON pointers of the masked positions of a baseline (its [`MASKED`] strings and
/// stackflow masks), in document order.
pub fn masked_positions(baseline: &serde_json::Map<String, Value>) -> Vec<String> {
    let mut out = Vec::new();
    collect_masked(
        &Value::Object(baseline.clone()),
        &mut String::new(),
        &mut out,
    );
    out
}

impl<'s> Pattern<'s> {
    /// True when the pattern is one reference and nothing else.
    pub fn is_whole(&self) -> bool {
        self.holes.len() == 1 && self.literals.iter().all(|l| l.is_empty())
    }

    /// True when `text` is the literals with anything (also nothing) in each hole.
    pub fn matches(&self, text: &str) -> bool {
        glob(&self.literals, text)
    }

    /// The pattern with the holes `value` fills joined to the text around them: the
    /// literals of what is left (one string when every hole is filled).
    pub fn fill(&self, value: impl Fn(&str) -> Option<String>) -> Vec<String> {
        let mut out = vec![self.literals[0].to_string()];
        for (hole, lit) in self.holes.iter().zip(&self.literals[1..]) {
            match value(hole) {
                Some(v) => {
                    let last = out.last_mut().expect("never empty");
                    last.push_str(&v);
                    last.push_str(lit);
                }
                None => out.push(lit.to_string()),
            }
        }
        out
    }
}

/// True when `text` is `literals` joined by runs of any text (a glob whose stars sit
/// between the literals).
pub(crate) fn glob<S: AsRef<str>>(literals: &[S], text: &str) -> bool {
    let Some((first, rest)) = literals.split_first() else {
        return text.is_empty();
    };
    let Some(mut rest_text) = text.strip_prefix(first.as_ref()) else {
        return false;
    };
    let Some((last, middle)) = rest.split_last() else {
        return rest_text.is_empty();
    };
    for lit in middle {
        match rest_text.find(lit.as_ref()) {
            Some(i) => rest_text = &rest_text[i + lit.as_ref().len()..],
            None => return false,
        }
    }
    rest_text.ends_with(last.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn markers_of_strings() {
        assert_eq!(marker("plain"), Marker::Plain);
        assert_eq!(marker("***"), Marker::Masked);
        assert_eq!(marker("****#0123456789abcdef"), Marker::Masked);
        assert_eq!(marker("user:****@host"), Marker::Masked);
        assert_eq!(marker("{{resolve:nope:x}}"), Marker::Masked);
        assert_eq!(marker("a ** b"), Marker::Plain);
        let Marker::References(p) = marker("pre-{{resolve:ssm-secure:p}}-post") else {
            panic!("a reference");
        };
        assert_eq!(p.literals, ["pre-", "-post"]);
        assert_eq!(p.holes, ["{{resolve:ssm-secure:p}}"]);
        assert!(!p.is_whole());
        let Marker::References(w) = marker("{{resolve:secretsmanager:s}}") else {
            panic!("a reference");
        };
        assert!(w.is_whole());
    }

    #[test]
    fn glob_matches_literals_around_holes() {
        assert!(glob(&["pre-", "-post"], "pre-secret-post"));
        assert!(glob(&["pre-", "-post"], "pre--post"));
        assert!(!glob(&["pre-", "-post"], "pre-post"));
        assert!(!glob(&["pre-", "-post"], "xpre-s-post"));
        assert!(glob(&["a", "b", "c"], "a1b2c"));
        assert!(glob(&["a", "b", "c"], "abbc"));
        assert!(!glob(&["a", "b", "c"], "a1c"));
        assert!(glob(&["", ""], "anything"));
        assert!(glob(&["x"], "x"));
        assert!(!glob(&["x"], "xy"));
        assert!(glob::<&str>(&[], ""));
    }

    #[test]
    fn fill_joins_known_values() {
        let Marker::References(p) = marker("a{{resolve:ssm:x}}b{{resolve:ssm:y}}c") else {
            panic!("references");
        };
        let known = |h: &str| (h == "{{resolve:ssm:x}}").then(|| "X".to_string());
        assert_eq!(p.fill(known), ["aXb", "c"]);
        assert_eq!(p.fill(|_| Some("-".into())), ["a-b-c"]);
        assert_eq!(p.fill(|_| None), ["a", "b", "c"]);
    }

    #[test]
    fn masked_positions_are_found() {
        let v = json!({"A": "***", "B": [{"C": "****#0123456789abcdef"}, "x"], "D/E": "***",
                       "F": "{{resolve:ssm:p}}"});
        let map = v.as_object().unwrap();
        assert_eq!(masked_positions(map), ["/A", "/B/0/C", "/D~1E"]);
        assert!(has_marker(&json!({"F": "{{resolve:ssm:p}}"})));
        assert!(!has_marker(&json!({"F": ["a", 1, null]})));
    }
}
