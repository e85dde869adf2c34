//! Comparing a baseline with what AWS holds now.
//!
//! The walk follows the baseline. At each position:
//!
//! - a write-only path (see [`CompareRules::write_only`]) is skipped and reported, and so
//!   is an object AWS does not return whose every key is write-only;
//! - a masked string (`***`, a stackflow mask) is not compared, whatever AWS holds;
//! - a string with dynamic references is compared with the references
//!   [`CompareRules::resolved`] gives filled in; where one is not given (its secret could
//!   not be read) the text around them is compared, and a string that fits is not
//!   compared (a whole-string reference is never compared then);
//! - `Tags` (a list of `{Key, Value}` or a map) are compared as a map, AWS's `aws:` tags
//!   left out;
//! - a list named in [`CompareRules::unordered`] is compared as a set; any other list
//!   item by item, as a whole when the lengths differ or when it holds a secret and its
//!   plain items do not line up (then no item of AWS's is shown);
//! - JSON text and the document it holds are the same; scalars as in
//!   [`normalize::scalars_equal`] (numbers and booleans as text, an ARN and its name).
//!
//! A key only the baseline has is drift, unless it holds AWS's default for that
//! top-level property ([`CompareRules::defaults`]: providers leave defaults out of what
//! they read); a key only AWS has is drift only when
//! [`CompareRules::baseline_is_observed`]. A `null` in the baseline equals no value.

use serde_json::{Map, Value};

use super::markers::{Marker, collect_masked, glob, has_marker, marker};
use super::normalize::{json_document, scalars_equal, tags, without_aws_tags};
use super::rules::{CompareRules, Seg, pointer};
use super::{Classification, Comparison, Difference, MASKED};

/// Compares `baseline` (an observed baseline, or the recorded template properties; see
/// [`CompareRules::baseline_is_observed`]) with `aws`, what AWS returns now.
pub fn compare(
    baseline: &Map<String, Value>,
    aws: &Map<String, Value>,
    rules: &CompareRules,
) -> Comparison {
    let mut walk = Walk::new(rules);
    walk.object(baseline, aws, &mut Vec::new());
    walk.finish()
}

/// True when comparing `recorded` with `aws` at `path` finds no difference (masked
/// positions count as equal).
pub(crate) fn matches(rules: &CompareRules, recorded: &Value, aws: &Value, path: &[Seg]) -> bool {
    let mut walk = Walk::new(rules);
    walk.value(recorded, aws, &mut path.to_vec());
    walk.diffs.is_empty()
}

struct Walk<'r> {
    rules: &'r CompareRules,
    diffs: Vec<Difference>,
    masked: Vec<String>,
    write_only: Vec<String>,
}

impl<'r> Walk<'r> {
    fn new(rules: &'r CompareRules) -> Walk<'r> {
        Walk {
            rules,
            diffs: Vec::new(),
            masked: Vec::new(),
            write_only: Vec::new(),
        }
    }

    fn finish(mut self) -> Comparison {
        let mut seen = std::collections::HashSet::new();
        self.masked.retain(|p| seen.insert(p.clone()));
        let classification = if !self.diffs.is_empty() {
            Classification::Drifted(self.diffs)
        } else if !self.masked.is_empty() {
            Classification::NotCompared(self.masked.clone())
        } else {
            Classification::InSync
        };
        Comparison {
            classification,
            masked: self.masked,
            not_compared_write_only: self.write_only,
        }
    }

    /// One key or item, which either side may lack.
    fn entry(&mut self, b: Option<&Value>, a: Option<&Value>, path: &mut Vec<Seg>) {
        if self.rules.is_write_only(path) {
            if b.is_some() || a.is_some() {
                self.write_only.push(pointer(path));
            }
            return;
        }
        match (b, a) {
            (Some(b), Some(a)) => self.value(b, a, path),
            (Some(Value::Null), None) | (None, None) => {}
            (Some(b), None) if self.rules.is_default(path, b) => {}
            (Some(b), None) if self.wholly_write_only(b, path) => {
                self.write_only.push(pointer(path));
            }
            (Some(b), None) => self.differ(Some(b), None, path),
            (None, Some(a)) if self.rules.baseline_is_observed => self.differ(None, Some(a), path),
            (None, Some(_)) => {}
        }
    }

    /// True when `b` is an object AWS gives back none of: every key of it, at any depth,
    /// is write-only (Lambda's `Code` of `ZipFile` or `S3Bucket`/`S3Key`).
    fn wholly_write_only(&self, b: &Value, path: &mut Vec<Seg>) -> bool {
        let Value::Object(m) = b else {
            return false;
        };
        !m.is_empty()
            && m.iter().all(|(k, v)| {
                path.push(Seg::Key(k.clone()));
                let ok = self.rules.is_write_only(path) || self.wholly_write_only(v, path);
                path.pop();
                ok
            })
    }

    /// A difference at `path`, shown safely; the masked positions inside the recorded
    /// value are noted, so that a difference over them is seen as touching them.
    fn differ(&mut self, b: Option<&Value>, a: Option<&Value>, path: &[Seg]) {
        let at = pointer(path);
        if let Some(b) = b {
            collect_masked(b, &mut at.clone(), &mut self.masked);
        }
        let hide = b.is_some_and(has_marker) && a.is_some();
        self.diffs.push(Difference {
            path: at,
            recorded: b.cloned(),
            aws: if hide {
                Some(Value::String(MASKED.to_string()))
            } else {
                a.cloned()
            },
            masked: hide,
        });
    }

    fn value(&mut self, b: &Value, a: &Value, path: &mut Vec<Seg>) {
        match (b, a) {
            (Value::String(s), _) => self.string(s, b, a, path),
            _ if is_tags(path) && self.tags(b, a, path) => {}
            (Value::Object(bm), Value::Object(am)) => self.object(bm, am, path),
            (Value::Array(bl), Value::Array(al)) => self.array(bl, al, path),
            (Value::Object(_) | Value::Array(_), Value::String(s)) => match json_document(s) {
                Some(doc) => self.value(b, &doc, path),
                None => self.differ(Some(b), Some(a), path),
            },
            _ if scalars_equal(b, a) => {}
            _ => self.differ(Some(b), Some(a), path),
        }
    }

    fn string(&mut self, s: &str, b: &Value, a: &Value, path: &mut Vec<Seg>) {
        let document = |v: &Value| match v {
            Value::String(t) => json_document(t),
            Value::Object(_) | Value::Array(_) => Some(v.clone()),
            _ => None,
        };
        if let (Some(bd), Some(ad)) = (json_document(s), document(a)) {
            return self.value(&bd, &ad, path);
        }
        match marker(s) {
            Marker::Masked => self.masked.push(pointer(path)),
            Marker::References(p) => {
                let filled = p.fill(|hole| self.rules.resolved.get(hole).map(str::to_string));
                let text = match a {
                    Value::String(t) => t.clone(),
                    other => other.to_string(),
                };
                match filled.as_slice() {
                    [whole]
                        if scalars_equal(&Value::String(whole.clone()), a)
                            || json_document(whole)
                                .zip(document(a))
                                .is_some_and(|(w, d)| matches(self.rules, &w, &d, path)) => {}
                    [_] => self.differ(Some(b), Some(a), path),
                    // A reference whose value is not known (its secret could not be
                    // read): the text around it can differ, but what is in it cannot
                    // be compared.
                    _ if glob(&filled, &text) => self.masked.push(pointer(path)),
                    _ => self.differ(Some(b), Some(a), path),
                }
            }
            Marker::Plain if scalars_equal(b, a) => {}
            Marker::Plain => self.differ(Some(b), Some(a), path),
        }
    }

    fn object(&mut self, b: &Map<String, Value>, a: &Map<String, Value>, path: &mut Vec<Seg>) {
        for (k, bv) in b {
            path.push(Seg::Key(k.clone()));
            self.entry(Some(bv), a.get(k), path);
            path.pop();
        }
        for (k, av) in a.iter().filter(|(k, _)| !b.contains_key(*k)) {
            path.push(Seg::Key(k.clone()));
            self.entry(None, Some(av), path);
            path.pop();
        }
    }

    fn array(&mut self, b: &[Value], a: &[Value], path: &mut Vec<Seg>) {
        if self.rules.is_unordered(path) {
            return self.unordered(b, a, path);
        }
        let lined_up =
            b.len() == a.len() && (!b.iter().any(has_marker) || self.items_match(b, a, path));
        if !lined_up {
            return self.differ_lists(b, a, path);
        }
        for (i, (bv, av)) in b.iter().zip(a).enumerate() {
            path.push(Seg::Index(i));
            self.entry(Some(bv), Some(av), path);
            path.pop();
        }
    }

    /// True when each recorded item matches AWS's item at the same index.
    fn items_match(&self, b: &[Value], a: &[Value], path: &[Seg]) -> bool {
        let mut at = path.to_vec();
        b.iter().zip(a).enumerate().all(|(i, (bv, av))| {
            at.push(Seg::Index(i));
            let ok = matches(self.rules, bv, av, &at);
            at.pop();
            ok
        })
    }

    fn differ_lists(&mut self, b: &[Value], a: &[Value], path: &[Seg]) {
        let (b, a) = (Value::Array(b.to_vec()), Value::Array(a.to_vec()));
        self.differ(Some(&b), Some(&a), path);
    }

    /// A list compared as a set: each recorded item paired with an equal item of AWS's,
    /// the plain items first (a masked item equals anything).
    fn unordered(&mut self, b: &[Value], a: &[Value], path: &mut Vec<Seg>) {
        if b.len() != a.len() {
            return self.differ_lists(b, a, path);
        }
        let mut order: Vec<usize> = (0..b.len()).collect();
        order.sort_by_key(|&i| has_marker(&b[i]));
        let mut used = vec![false; a.len()];
        let mut pairs = Vec::with_capacity(b.len());
        for i in order {
            path.push(Seg::Index(i));
            let found = (0..a.len()).find(|&j| !used[j] && matches(self.rules, &b[i], &a[j], path));
            path.pop();
            match found {
                Some(j) => {
                    used[j] = true;
                    pairs.push((i, j));
                }
                None => return self.differ_lists(b, a, path),
            }
        }
        pairs.sort_unstable();
        for (i, j) in pairs {
            path.push(Seg::Index(i));
            self.entry(Some(&b[i]), Some(&a[j]), path);
            path.pop();
        }
    }

    /// Tags compared as a map; false when either side is not tag-shaped.
    fn tags(&mut self, b: &Value, a: &Value, path: &[Seg]) -> bool {
        let (Some(bt), Some(at)) = (tags(b), tags(a)) else {
            return false;
        };
        let within = |segs: &[Seg]| path.iter().chain(segs).cloned().collect::<Vec<_>>();
        let same = bt.len() == at.len()
            && bt.iter().all(|(k, (bv, segs))| {
                at.get(k)
                    .is_some_and(|(av, _)| matches(self.rules, bv, av, &within(segs)))
            });
        if !same {
            self.differ(Some(b), Some(&without_aws_tags(a)), path);
            return true;
        }
        for (k, (bv, segs)) in &bt {
            let mut at_value = within(segs);
            self.entry(Some(bv), at.get(k).map(|(av, _)| av), &mut at_value);
        }
        true
    }
}

fn is_tags(path: &[Seg]) -> bool {
    matches!(path.last(), Some(Seg::Key(k)) if k == "Tags")
}
