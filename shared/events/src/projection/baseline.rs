//! The drift baselines and the secrets scrubbed from recorded properties: how their
//! events change the state.

use indexmap::IndexMap;
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
    /// is the one given, except that observed properties never replace a refusal: only
    /// a create, update, replace or import decides a refusal away (every writer of a
    /// baseline checks this too; the fold makes it hold for any log).
    pub(super) fn baseline_set(&mut self, logical_id: &str, baseline: &Baseline) {
        if let Some(r) = self.resources.get_mut(logical_id) {
            let refused = matches!(r.baseline, Some(Baseline::Refused { .. }));
            if !(refused && matches!(baseline, Baseline::Recorded { .. })) {
                r.baseline = Some(baseline.clone());
            }
        }
    }

    /// `BaselineAccepted`: the observed properties become the resource's baseline,
    /// unless its baseline is refused.
    pub(super) fn baseline_accepted(&mut self, logical_id: &str, observed: &Map<String, Value>) {
        self.baseline_set(
            logical_id,
            &Baseline::Recorded {
                observed: observed.clone(),
            },
        );
    }

    /// `DriftChecked`: the results of the last check.
    pub(super) fn drift_checked(&mut self, results: &[DriftResult]) {
        self.last_drift = results.to_vec();
    }

    /// `Scrubbed`: the given paths of the resource's properties and of its recorded
    /// baseline are replaced by `***`, and each string the `replaced` pointers lead to
    /// (anywhere in the state) by its replacement text.
    pub(super) fn scrubbed(
        &mut self,
        logical_id: &str,
        paths: &[String],
        replaced: &IndexMap<String, String>,
    ) {
        if let Some(r) = self.resources.get_mut(logical_id) {
            for p in paths {
                scrub(&mut r.properties, p);
                if let Some(Baseline::Recorded { observed }) = &mut r.baseline {
                    scrub(observed, p);
                }
            }
        }
        self.replace_strings(replaced);
    }

    /// Replaces the string at each pointer into the state's JSON form by its text. A
    /// pointer that leads nowhere, or to something other than a string, is skipped; so is
    /// a replacement the state cannot take (a string that must be one of a few names):
    /// the fold stays total.
    fn replace_strings(&mut self, replaced: &IndexMap<String, String>) {
        if replaced.is_empty() {
            return;
        }
        let mut whole = self.to_snapshot();
        let any = replaced.iter().fold(false, |any, (p, text)| {
            replace_at(&mut whole, p, text) || any
        });
        if !any {
            return;
        }
        if let Some(state) = StackState::from_snapshot(&whole) {
            *self = state;
            return;
        }
        // One of them does not fit: apply those that do, one at a time.
        for (p, text) in replaced {
            let mut one = self.to_snapshot();
            if replace_at(&mut one, p, text)
                && let Some(state) = StackState::from_snapshot(&one)
            {
                *self = state;
            }
        }
    }
}

/// Replaces the string at `pointer` in `v` by `text`; false when there is no string there.
fn replace_at(v: &mut Value, pointer: &str, text: &str) -> bool {
    match v.pointer_mut(pointer) {
        Some(slot @ Value::String(_)) => {
            *slot = Value::String(text.to_string());
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::event::{Event, ResourceRecord, StoredEvent};

    fn stored(seq: u64, event: Event) -> StoredEvent {
        StoredEvent {
            seq,
            key: format!("k{seq}"),
            at: "2026-01-01T00:00:00.000Z".into(),
            v: crate::event::current_version(event.type_name()),
            event,
        }
    }

    fn leaked() -> Vec<StoredEvent> {
        // Read as an older writer stored it (and as any version of the record reads it).
        let resource: ResourceRecord = serde_json::from_value(json!({
            "logical_id": "Db",
            "type": "AWS::RDS::DBInstance",
            "physical_id": "db-1",
            "properties": {"Password": "hunter22", "Name": "db"},
            "attributes": {"Url": "pg://u:hunter22@h"},
            "provider": "sdk",
        }))
        .unwrap();
        vec![
            stored(
                1,
                Event::ResourceCreated {
                    deploy_id: "d1".into(),
                    resource,
                    replaces: None,
                    baseline: None,
                },
            ),
            stored(
                2,
                Event::DeployCompleted {
                    deploy_id: "d1".into(),
                    outputs: [("Url".to_string(), json!("pg://u:hunter22@h"))].into(),
                    exports: IndexMap::new(),
                    imports: vec![],
                },
            ),
        ]
    }

    #[test]
    fn replaced_strings_take_their_text_anywhere_in_the_state() {
        let mut events = leaked();
        let replaced: IndexMap<String, String> = [
            (
                "/resources/Db/properties/Password",
                "{{resolve:ssm-secure:/db}}",
            ),
            (
                "/resources/Db/attributes/Url",
                "pg://u:{{resolve:ssm-secure:/db}}@h",
            ),
            ("/outputs/Url", "pg://u:{{resolve:ssm-secure:/db}}@h"),
            // Nowhere, and not a string: skipped.
            ("/resources/Gone/properties/X", "x"),
            ("/resources/Db/properties", "x"),
        ]
        .into_iter()
        .map(|(p, t)| (p.to_string(), t.to_string()))
        .collect();
        events.push(stored(
            3,
            Event::Scrubbed {
                logical_id: "Db".into(),
                paths: vec![],
                replaced,
            },
        ));
        let s = StackState::fold(&events);
        let db = &s.resources["Db"];
        assert_eq!(
            db.properties["Password"],
            json!("{{resolve:ssm-secure:/db}}")
        );
        assert_eq!(db.properties["Name"], json!("db"));
        assert_eq!(
            db.attributes["Url"],
            json!("pg://u:{{resolve:ssm-secure:/db}}@h")
        );
        assert_eq!(
            s.outputs["Url"],
            json!("pg://u:{{resolve:ssm-secure:/db}}@h")
        );
        assert!(!s.to_snapshot().to_string().contains("hunter22"));
        assert_eq!(s.seq, 3);
    }

    #[test]
    fn a_replacement_the_state_cannot_take_is_skipped_alone() {
        let mut events = leaked();
        events.insert(
            0,
            stored(
                0,
                Event::DeployStarted {
                    deploy_id: "d1".into(),
                    who: "me".into(),
                    template_digest: "x".into(),
                    parameters: IndexMap::new(),
                    no_rollback: false,
                    stack_id: None,
                },
            ),
        );
        let replaced: IndexMap<String, String> = [
            ("/last_deploy/status", "not-a-status"),
            ("/outputs/Url", "****"),
        ]
        .into_iter()
        .map(|(p, t)| (p.to_string(), t.to_string()))
        .collect();
        events.push(stored(
            3,
            Event::Scrubbed {
                logical_id: String::new(),
                paths: vec![],
                replaced,
            },
        ));
        let s = StackState::fold(&events);
        assert_eq!(s.outputs["Url"], json!("****"));
        assert!(s.last_deploy.is_some());
    }

    #[test]
    fn a_version_1_scrub_still_means_three_stars() {
        let body = json!({"type": "Scrubbed", "logical_id": "Db", "paths": ["/Password"]});
        let e = Event::from_body("Scrubbed", 1, body).unwrap();
        let Event::Scrubbed { replaced, .. } = &e else {
            panic!("{e:?}")
        };
        assert!(replaced.is_empty());
        let mut events = leaked();
        events.push(stored(3, e));
        let s = StackState::fold(&events);
        assert_eq!(s.resources["Db"].properties["Password"], json!("***"));
        // A rewrite record changes nothing in the state.
        let before = s.clone();
        let mut s = s;
        s.apply(&stored(
            4,
            Event::EventsRewritten {
                by: "me".into(),
                reason: "test".into(),
                seqs: vec![1],
            },
        ));
        assert_eq!(s.seq, 4);
        assert_eq!(s.resources, before.resources);
    }
}
