//! The drift baselines and the secrets scrubbed from recorded properties: how their
//! events change the state.

use serde_json::{Map, Value};

use super::StackState;
use crate::event::{Baseline, DriftResult};

/// Replaces the value at a JSON pointer inside `m` with `***`, when it exists.
fn scrub(m: &mut Map<String, Value>, pointer: &str) {
    let mut v = Value::Object(std::mem::take(m));
    if let Some(slot) = v.pointer_mut(pointer) {
        *slot = Value::String("***".into());
    }
    if let Value::Object(back) = v {
        *m = back;
    }
}

impl StackState {
    /// `BaselineRecorded` and `BaselineRefreshed`: the resource's baseline (or refusal)
    /// is the one given.
    pub(super) fn baseline_set(&mut self, logical_id: &str, baseline: &Baseline) {
        if let Some(r) = self.resources.get_mut(logical_id) {
            r.baseline = Some(baseline.clone());
        }
    }

    /// `BaselineAccepted`: the observed properties become the resource's baseline.
    pub(super) fn baseline_accepted(&mut self, logical_id: &str, observed: &Map<String, Value>) {
        if let Some(r) = self.resources.get_mut(logical_id) {
            r.baseline = Some(Baseline::Recorded {
                observed: observed.clone(),
            });
        }
    }

    /// `DriftChecked`: the results of the last check.
    pub(super) fn drift_checked(&mut self, results: &[DriftResult]) {
        self.last_drift = results.to_vec();
    }

    /// `Scrubbed`: the given paths of the resource's properties and of its recorded
    /// baseline are replaced by `***`.
    pub(super) fn scrubbed(&mut self, logical_id: &str, paths: &[String]) {
        if let Some(r) = self.resources.get_mut(logical_id) {
            for p in paths {
                scrub(&mut r.properties, p);
                if let Some(Baseline::Recorded { observed }) = &mut r.baseline {
                    scrub(observed, p);
                }
            }
        }
    }
}
