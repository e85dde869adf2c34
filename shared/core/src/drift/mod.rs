//! Drift: the baseline recorded from what AWS returns, its comparison with what AWS holds
//! later, accepting AWS's values as the new baseline, and which resources depend on
//! parameters whose deployed values cannot be proven.
//!
//! Everything here is pure: the engine reads AWS (`read_current_state`, in the shape of
//! the template's properties) and passes the answers in.
//!
//! # Secrets
//!
//! A recorded value stands for a secret when it is a string that
//!
//! - spells dynamic references (`{{resolve:...}}`, whole or embedded in text): AWS
//!   returns the value decrypted; the baseline keeps the reference text;
//! - holds a stackflow mask (`****` or `****#<hex>`, see [`crate::secrets`]): the value of a
//!   `NoEcho` parameter or of something computed from one;
//! - is [`MASKED`] (`***`): a position where the baseline could not place a reference,
//!   or that `stackflow scrub` emptied.
//!
//! [`observed_baseline`] never copies what AWS returns at such a position;
//! [`compare`] never shows it (every [`Difference`] carries values safe to print); and
//! [`accept`] builds the new baseline through [`observed_baseline`] again.

mod accept;
mod attached;
mod compare;
mod confirm;
mod defaults;
pub use defaults::defaults_of;
mod dependence;
mod markers;
mod normalize;
mod observe;
mod rules;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

use serde_json::{Map, Value};

pub use accept::{AcceptRefused, accept};
pub use attached::Attachments;
pub use compare::compare;
pub use confirm::confirm_masked;
pub use dependence::{Dependence, resources_depending_on};
pub use markers::masked_positions;
pub use observe::observed_baseline;
pub use rules::{CompareRules, Resolved, builtin_unordered};

/// What a baseline holds at a position whose value it does not record.
pub const MASKED: &str = crate::dynref::MASK;

/// A baseline made from what AWS returned ([`observed_baseline`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    /// The properties AWS returned, each secret as its reference text or [`MASKED`].
    pub baseline: Map<String, Value>,
    /// The JSON pointers (RFC 6901, into `baseline`) of the [`MASKED`] positions, in
    /// document order.
    pub masked: Vec<String>,
}

/// One position where the baseline and AWS differ.
///
/// The values are safe to print: where the recorded value holds a secret (a reference,
/// a mask or [`MASKED`], anywhere inside it) the AWS value is shown as [`MASKED`].
#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    /// The JSON pointer (RFC 6901) of the position, into the baseline's properties.
    pub path: String,
    /// The recorded value; `None` when the baseline has none there.
    pub recorded: Option<Value>,
    /// AWS's value, or [`MASKED`] (see above); `None` when AWS has none there.
    pub aws: Option<Value>,
    /// True when AWS's value is shown as [`MASKED`].
    pub masked: bool,
}

/// What a comparison found, as the CLI reports it.
#[derive(Debug, Clone, PartialEq)]
pub enum Classification {
    /// Nothing differs.
    InSync,
    /// These positions differ.
    Drifted(Vec<Difference>),
    /// The only positions not equal are these [`MASKED`] (or masked) positions, whose
    /// values cannot be compared.
    NotCompared(Vec<String>),
}

/// The result of [`compare`].
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// In sync, drifted or not compared.
    pub classification: Classification,
    /// Every masked position the comparison met (pointers into the baseline), also when
    /// the resource drifted, so that [`accept`] can tell whether a difference touches one.
    pub masked: Vec<String>,
    /// The write-only positions (pointers) that were skipped: AWS never returns them.
    pub not_compared_write_only: Vec<String>,
}

impl Comparison {
    /// The status as the `DriftChecked` event records it: `in-sync`, `drifted` or
    /// `not-compared`.
    pub fn status(&self) -> &'static str {
        match self.classification {
            Classification::InSync => "in-sync",
            Classification::Drifted(_) => "drifted",
            Classification::NotCompared(_) => "not-compared",
        }
    }

    /// The positions the status is about: the differences' paths, or the masked ones.
    pub fn paths(&self) -> Vec<String> {
        match &self.classification {
            Classification::InSync => Vec::new(),
            Classification::Drifted(d) => d.iter().map(|d| d.path.clone()).collect(),
            Classification::NotCompared(p) => p.clone(),
        }
    }

    /// The differences (empty unless drifted).
    pub fn differences(&self) -> &[Difference] {
        match &self.classification {
            Classification::Drifted(d) => d,
            _ => &[],
        }
    }
}

/// True when pointer `a` is `b`, or one of them is inside the other.
pub(crate) fn overlaps(a: &str, b: &str) -> bool {
    let inside = |inner: &str, outer: &str| {
        inner
            .strip_prefix(outer)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    };
    inside(a, b) || inside(b, a)
}
