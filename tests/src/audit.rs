//! After a step of a campaign, the recorded states checked against what the emulator holds:
//! every resource of every state exists in AWS, once (no two records of one resource);
//! every resource whose name carries the campaign's tag, and every resource Cloud Control
//! made since the campaign's baseline, is in a state (nothing leaked, no duplicate); the
//! state's properties match what the providers read back; no intent is left pending, no
//! replaced predecessor is left to delete, and no lock is held.
//!
//! AWS is asked through the emulator's own endpoint (never through a proxy or stackflow's
//! engine). The faults campaign (`tests/faults.rs`) and the crash campaign
//! (`tests/crashes.rs`) both check with an [`Audit`].

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use stackflow_core::template::Policy;
use stackflow_events::projection::{ResourceState, StackState};
use stackflow_events::{EventStore, StreamId, load_state};
use stackflow_providers::ProviderKind;
use stackflow_providers::provider::{CurrentState, ResourceRequest};
use stackflow_providers::router::{Providers, Router};

use crate::Emulator;
use crate::emulator::REGION;
use crate::inventory::{Inventory, SDK_TYPES, same_value};

/// The problems an audit found, by kind.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Resources in AWS that no state records, and that are no second copy of a recorded
    /// one.
    pub leaked: usize,
    /// Resources recorded twice, and resources in AWS that no state records whose name is
    /// a recorded resource's but for its generated suffix (a second copy).
    pub duplicated: usize,
    /// Recorded resources that AWS does not have.
    pub missing: usize,
    /// Recorded resources whose properties differ from AWS's.
    pub mismatched: usize,
    /// Pending intents, predecessors left to delete, locks still held.
    pub unsettled: usize,
    /// Anything else (a state or AWS that could not be read, a failed run).
    pub other: usize,
}

impl Counts {
    /// Every problem counted.
    pub fn total(&self) -> usize {
        self.leaked + self.duplicated + self.missing + self.mismatched + self.unsettled + self.other
    }
}

/// What a campaign checks with (see the module documentation).
pub struct Audit {
    /// Printed before every line.
    pub label: String,
    providers: Providers,
    inventory: Inventory,
    /// What the names of the resources the campaign makes hold.
    pub tag: String,
    /// The resource types of the campaign's templates.
    pub types: BTreeSet<String>,
    /// What Cloud Control listed per type before the campaign.
    baseline: BTreeMap<String, BTreeSet<String>>,
    /// Every problem found, in words.
    pub problems: Vec<String>,
    /// Every problem found, counted by kind.
    pub counts: Counts,
}

/// The kind of a problem, to count it.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Leaked,
    Duplicated,
    Missing,
    Mismatched,
    Unsettled,
    Other,
}

impl Audit {
    /// An audit on `emulator`'s own endpoint, of the resources whose names hold `tag`.
    pub async fn new(emulator: &Emulator, label: &str, tag: &str) -> Audit {
        Audit {
            label: label.to_string(),
            providers: Providers::from_config(&emulator.sdk_config().await, None),
            inventory: Inventory::new(emulator).await,
            tag: tag.to_string(),
            types: BTreeSet::new(),
            baseline: BTreeMap::new(),
            problems: Vec::new(),
            counts: Counts::default(),
        }
    }

    /// The inventory the audit asks.
    pub fn inventory(&self) -> &Inventory {
        &self.inventory
    }

    /// Records a problem that is none of the kinds the checks count.
    pub fn problem(&mut self, what: String) {
        self.counted(Kind::Other, what);
    }

    fn counted(&mut self, kind: Kind, what: String) {
        let c = &mut self.counts;
        match kind {
            Kind::Leaked => c.leaked += 1,
            Kind::Duplicated => c.duplicated += 1,
            Kind::Missing => c.missing += 1,
            Kind::Mismatched => c.mismatched += 1,
            Kind::Unsettled => c.unsettled += 1,
            Kind::Other => c.other += 1,
        }
        eprintln!("[{}] PROBLEM {what}", self.label);
        self.problems.push(what);
    }

    async fn cloud_control_listing(&self, ty: &str) -> Option<BTreeSet<String>> {
        self.inventory
            .cloud_control(ty)
            .await
            .ok()
            .map(|v| v.into_iter().collect())
    }

    /// Notes `types` as the campaign's, and what Cloud Control lists of each now.
    pub async fn take_baseline(&mut self, types: &BTreeSet<String>) {
        for ty in types {
            self.types.insert(ty.clone());
            if let Some(ids) = self.cloud_control_listing(ty).await {
                self.baseline.insert(ty.clone(), ids);
            }
        }
    }

    /// Checks the states of `stacks` in `store` against AWS, and AWS against them (see the
    /// module documentation). Returns the states.
    pub async fn verify<S: EventStore>(
        &mut self,
        step: &str,
        store: &S,
        stacks: &BTreeSet<String>,
    ) -> BTreeMap<String, StackState> {
        let mut states = BTreeMap::new();
        let mut known: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for stack in stacks {
            let state = match load_state(store, &StreamId::new(REGION, stack)).await {
                Ok(s) => s,
                Err(e) => {
                    self.problem(format!("after {step}: reading the state of {stack}: {e}"));
                    continue;
                }
            };
            self.check_state(step, stack, &state, &mut known).await;
            states.insert(stack.clone(), state);
        }
        self.check_orphans(step, &known).await;
        states
    }

    async fn check_state(
        &mut self,
        step: &str,
        stack: &str,
        state: &StackState,
        known: &mut BTreeMap<String, BTreeSet<String>>,
    ) {
        let unsettled = Kind::Unsettled;
        if !state.pending.is_empty() {
            let ids: Vec<&String> = state.pending.keys().collect();
            self.counted(
                unsettled,
                format!("after {step}: {stack} has pending intents {ids:?}"),
            );
        }
        if !state.predecessors.is_empty() {
            let ids: Vec<&String> = state.predecessors.keys().collect();
            self.counted(
                unsettled,
                format!("after {step}: {stack} still has predecessors {ids:?}"),
            );
        }
        if let Some(holder) = &state.lock {
            let who = &holder.who;
            self.counted(
                unsettled,
                format!("after {step}: {stack} is still locked by {who}"),
            );
        }
        for (id, r) in &state.resources {
            let sdk = r.provider == ProviderKind::Sdk;
            let what = format!("{stack}/{id} ({}, {})", r.resource_type, r.physical_id);
            let types = known.entry(r.resource_type.clone()).or_default();
            if !types.insert(r.physical_id.clone()) {
                let what = format!("after {step}: {what} is recorded twice");
                self.counted(Kind::Duplicated, what);
            }
            match self
                .inventory
                .exists_recorded(&r.resource_type, &r.physical_id, sdk, &r.properties)
                .await
            {
                Ok(true) => {}
                Ok(false) => {
                    let what = format!("after {step}: {what} is in the state, not in AWS");
                    self.counted(Kind::Missing, what);
                }
                Err(e) => self.problem(format!("after {step}: asking AWS for {what}: {e}")),
            }
            if let Some(m) = self.mismatch(stack, id, r).await {
                let what = format!("after {step}: {what}: the state does not match AWS: {m}");
                self.counted(Kind::Mismatched, what);
            }
        }
    }

    /// What differs between a resource's recorded properties and what its provider reads
    /// in AWS (the properties both have); `None` when nothing does.
    async fn mismatch(&self, stack: &str, id: &str, r: &ResourceState) -> Option<String> {
        let provider = self
            .providers
            .for_recorded(&r.resource_type, r.provider)
            .ok()?;
        let mut request = ResourceRequest::new(stack, id, &r.resource_type, r.properties.clone());
        request.physical_id = Some(r.physical_id.clone());
        let read = provider.read_current_state(&request).await;
        let Ok(CurrentState::Found(aws)) = read else {
            return match read {
                Ok(CurrentState::NotFound) => Some("the provider does not find it".into()),
                Err(e) => Some(format!("the provider cannot read it: {e}")),
                _ => None,
            };
        };
        let differ: Vec<String> = r
            .properties
            .iter()
            .filter_map(|(k, want)| {
                let got = aws.get(k)?;
                (!same_value(want, got)).then(|| format!("{k}: recorded {want}, AWS {got}"))
            })
            .collect();
        (!differ.is_empty()).then(|| differ.join("; "))
    }

    /// Every tagged resource and every resource Cloud Control made since the baseline is
    /// in a state.
    async fn check_orphans(&mut self, step: &str, known: &BTreeMap<String, BTreeSet<String>>) {
        let none = BTreeSet::new();
        for ty in self.types.clone() {
            let recorded = known.get(&ty).unwrap_or(&none);
            if SDK_TYPES.contains(&ty.as_str()) {
                match self.inventory.tagged(&ty, &self.tag).await {
                    Ok(ids) => {
                        for id in ids.iter().filter(|id| !recorded.contains(*id)) {
                            self.unrecorded(step, &ty, id, "exists in AWS", recorded);
                        }
                    }
                    Err(e) => self.problem(format!("after {step}: listing {ty}: {e}")),
                }
            }
            let (Some(before), Some(now)) = (
                self.baseline.get(&ty).cloned(),
                self.cloud_control_listing(&ty).await,
            ) else {
                continue;
            };
            for id in now.difference(&before).filter(|id| !recorded.contains(*id)) {
                self.unrecorded(step, &ty, id, "was made through Cloud Control", recorded);
            }
        }
    }

    /// A resource in AWS that no state records: a duplicate when a recorded resource of
    /// its type has its name but for the generated suffix, else a leak.
    fn unrecorded(
        &mut self,
        step: &str,
        ty: &str,
        id: &str,
        how: &str,
        recorded: &BTreeSet<String>,
    ) {
        let copy = stem(ty, id).filter(|s| recorded.iter().any(|r| stem(ty, r) == Some(*s)));
        let (kind, word) = match copy {
            Some(_) => (Kind::Duplicated, "a second copy of a recorded resource"),
            None => (Kind::Leaked, "leaked"),
        };
        let what = format!("after {step}: {ty} {id} {how} and is in no state ({word})");
        self.counted(kind, what);
    }

    /// Deletes what a destroy kept: each must still exist; then it is deleted, so that
    /// nothing is left.
    pub async fn clean_up_retained(&mut self, retained: &[(String, String, bool)]) {
        for (ty, id, sdk) in retained {
            match self.inventory.exists(ty, id, *sdk).await {
                Ok(true) => {}
                Ok(false) => self.problem(format!("after destroy: the retained {ty} {id} is gone")),
                Err(e) => self.problem(format!("after destroy: asking AWS for {ty} {id}: {e}")),
            }
            if let Err(e) = self.inventory.delete(ty, id, *sdk).await {
                self.problem(format!("deleting the retained {ty} {id}: {e}"));
            }
        }
    }
}

/// A physical id's name without its last `-` part (the hash of a generated name): a
/// queue's name is the last part of its URL, a topic's the last part of its ARN.
fn stem<'a>(ty: &str, id: &'a str) -> Option<&'a str> {
    let name = match ty {
        "AWS::SQS::Queue" => id.rsplit('/').next().unwrap_or(id),
        "AWS::SNS::Topic" => id.rsplit(':').next().unwrap_or(id),
        _ => id,
    };
    let name = name.strip_suffix(".fifo").unwrap_or(name);
    name.rsplit_once('-').map(|(stem, _)| stem)
}

/// The resources that a destroy keeps (their `DeletionPolicy`): type, physical id, and
/// whether the SDK made them.
pub fn kept_on_destroy(states: &BTreeMap<String, StackState>) -> Vec<(String, String, bool)> {
    let kept = |p: Option<Policy>| {
        matches!(
            p,
            Some(Policy::Retain | Policy::RetainExceptOnCreate | Policy::Snapshot)
        )
    };
    let all = states.values().flat_map(|s| s.resources.values());
    all.filter(|r| kept(r.deletion_policy))
        .map(|r| {
            (
                r.resource_type.clone(),
                r.physical_id.clone(),
                r.provider == ProviderKind::Sdk,
            )
        })
        .collect()
}

/// The resources of a state: logical id to physical id and properties.
pub fn resources(state: &StackState) -> BTreeMap<String, (String, Value)> {
    state
        .resources
        .iter()
        .map(|(id, r)| {
            (
                id.clone(),
                (r.physical_id.clone(), Value::Object(r.properties.clone())),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::stem;

    #[test]
    fn a_stem_is_the_name_without_its_generated_suffix() {
        let url = "http://127.0.0.1:4566/123456789012/crash-ab-Queue-0a1b2c3d4e5f";
        assert_eq!(stem("AWS::SQS::Queue", url), Some("crash-ab-Queue"));
        let arn = "arn:aws:sns:us-east-1:123456789012:crash-ab-Topic-0a1b2c3d4e5f.fifo";
        assert_eq!(stem("AWS::SNS::Topic", arn), Some("crash-ab-Topic"));
        assert_eq!(stem("AWS::IAM::Role", "plain"), None);
    }
}
