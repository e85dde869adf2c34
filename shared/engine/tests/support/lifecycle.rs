//! What the lifecycle tests share: small template pieces, the call log's order, and the
//! checks every run must pass (nothing pending, no lock, the state matching the world).

use std::collections::BTreeMap;

use serde_json::{Value, json};
use stackflow_events::projection::StackState;

use super::{Op, Rig};

pub fn r(id: &str) -> Value {
    json!({ "Ref": id })
}

pub fn arn(id: &str) -> Value {
    json!({ "Fn::GetAtt": [id, "Arn"] })
}

pub fn topic(name: &str) -> Value {
    json!({ "Type": "AWS::SNS::Topic", "Properties": { "TopicName": name } })
}

pub fn queue(name: &str, visibility: u64) -> Value {
    json!({
        "Type": "AWS::SQS::Queue",
        "Properties": { "QueueName": name, "VisibilityTimeout": visibility }
    })
}

pub fn join(parts: Vec<Value>) -> Value {
    json!({ "Fn::Join": ["|", parts] })
}

pub fn with(mut resource: Value, key: &str, value: &str) -> Value {
    resource[key] = json!(value);
    resource
}

pub fn position(log: &[(Op, String)], op: Op, id: &str) -> usize {
    log.iter()
        .position(|(o, i)| *o == op && i == id)
        .unwrap_or_else(|| panic!("no {op:?} of {id} in {log:?}"))
}

/// What every run must leave: nothing pending, no predecessor, no lock (in the log and
/// in the store), a state that passes its integrity check, and a state that matches the
/// world: every recorded resource exists with the recorded type and properties, and the
/// world holds nothing else of the stack but the resources in `kept` (retained ones).
pub async fn assert_settled(rig: &Rig, stack: &str, kept: &[&str]) -> StackState {
    let state = assert_settled_but_lock(rig, stack, kept).await;
    assert_eq!(state.lock, None, "the log says the lock is held");
    assert_eq!(
        rig.lock_holder(stack).await,
        None,
        "the store says the lock is held"
    );
    state
}

/// [`assert_settled`] without the lock.
pub async fn assert_settled_but_lock(rig: &Rig, stack: &str, kept: &[&str]) -> StackState {
    let state = rig.state(stack).await;
    assert!(state.pending.is_empty(), "pending: {:#?}", state.pending);
    assert!(
        state.predecessors.is_empty(),
        "predecessors: {:#?}",
        state.predecessors
    );
    state.check_integrity().expect("state integrity");
    let world = rig.cloud.world();
    for (id, r) in &state.resources {
        if r.resource_type == "AWS::CloudFormation::Stack" {
            continue;
        }
        let thing = world.get(&r.physical_id).unwrap_or_else(|| {
            panic!(
                "{stack}/{id} ({}) is recorded but does not exist",
                r.physical_id
            )
        });
        assert_eq!(thing.logical_id, *id);
        assert_eq!(thing.resource_type, r.resource_type);
        assert_eq!(
            thing.properties, r.properties,
            "{stack}/{id}: world vs state"
        );
    }
    for (p, thing) in world.iter().filter(|(_, t)| t.stack == stack) {
        let recorded = state
            .resources
            .get(&thing.logical_id)
            .is_some_and(|r| r.physical_id == *p);
        assert!(
            recorded || kept.contains(&thing.logical_id.as_str()),
            "{stack}/{} ({p}) exists but is not recorded: an orphan",
            thing.logical_id
        );
    }
    state
}

pub fn resource_ids(state: &StackState) -> BTreeMap<String, String> {
    state
        .resources
        .iter()
        .map(|(k, r)| (k.clone(), r.physical_id.clone()))
        .collect()
}
