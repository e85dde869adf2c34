//! The sample payloads of `events/` (for `cargo lambda invoke --data-file`) are what the
//! functions and state machines take: each file is read as its payload type, and every key
//! it spells is one the type knows, with the value the type reads.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use stackflow_engine::definitions;
use stackflow_engine::sfn::triggers::TRIGGER_NAMES;
use stackflow_engine::sfn::triggers::drift_check::DriftCheckRequest;
use stackflow_engine::sfn::triggers::start::{BusEvent, DeployRequested, launch_of};
use stackflow_engine::tasks::{
    DeployRef, DeployRequest, GateAnswer, Item, PartRequest, ReleaseRequest, RunRequest,
    StackRequest, TASK_NAMES,
};

/// The gate's payload on Lambda (`infra/deploy.asl.json`: `{"item.$": "$", "token.$":
/// "$$.Task.Token"}`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GateInput {
    item: Item,
    token: String,
}

/// How a sample is checked.
type Check = fn(&Value) -> Result<(), String>;

/// Every sample and its check. A sample without an entry here fails the test.
const SAMPLES: &[(&str, Check)] = &[
    // Execution inputs.
    ("deploy-execution.json", |v| is::<DeployRequest>(v, &[])),
    ("destroy-execution.json", |v| is::<StackRequest>(v, &[])),
    ("rollback-execution.json", |v| is::<StackRequest>(v, &[])),
    // Task inputs.
    ("plan.json", |v| is::<DeployRequest>(v, &[])),
    ("gate.json", gate),
    ("provision.json", provision),
    ("part.json", |v| is::<PartRequest>(v, &[])),
    ("conclude.json", |v| {
        is::<DeployRef>(v, &["provisioned"])?;
        results(v, "provisioned")
    }),
    ("finish.json", |v| {
        is::<DeployRef>(v, &["cleaned"])?;
        results(v, "cleaned")
    }),
    ("fail.json", |v| is::<DeployRef>(v, &["error"])),
    ("destroy.json", |v| is::<RunRequest>(v, &[])),
    ("rollback.json", |v| is::<RunRequest>(v, &[])),
    // The state's input and the caught error (after a failed Plan, a failed Fail).
    ("release.json", |v| {
        is::<ReleaseRequest>(v, &["noRollback", "concurrency"])
    }),
    // Triggers: the EventBridge events Start takes, the schedule's input of DriftCheck,
    // the CodePipeline job of PipelineJob (read as its type by the bootstrap's tests).
    ("start.json", |v| starts(v, "stackflow-engine-bucket")),
    ("start-deploy-requested.json", |v| {
        exact::<DeployRequested>(&v["detail"], &[])?;
        starts(v, "stackflow-engine-bucket")
    }),
    ("driftcheck.json", |v| is::<DriftCheckRequest>(v, &[])),
    ("pipelinejob.json", pipeline_job),
];

/// An EventBridge event that starts a deploy.
fn starts(v: &Value, bucket: &str) -> Result<(), String> {
    let event: BusEvent = exact(v, &[])?;
    match launch_of(&event, bucket) {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(why)) => Err(format!("it starts no deploy: {why}")),
        Err(e) => Err(e.message),
    }
}

/// A CodePipeline job: its user parameters are JSON naming a stack.
fn pipeline_job(v: &Value) -> Result<(), String> {
    let job = &v["CodePipeline.job"];
    let params = job["data"]["actionConfiguration"]["configuration"]["UserParameters"]
        .as_str()
        .ok_or("no UserParameters")?;
    let params: Value = serde_json::from_str(params).map_err(|e| e.to_string())?;
    if params["stack"].as_str().is_none() || job["id"].as_str().is_none() {
        return Err("no job id or no stack in UserParameters".into());
    }
    Ok(())
}

fn events_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../events")
}

/// Reads `v` as a `T`, and checks that each of its keys (but `extra`, which the state
/// machine adds beside the payload) is one `T` writes, with the same value: a misspelt or
/// unknown key fails instead of being ignored.
fn exact<T: DeserializeOwned + serde::Serialize>(v: &Value, extra: &[&str]) -> Result<T, String> {
    let typed: T = serde_json::from_value(v.clone()).map_err(|e| e.to_string())?;
    let written = serde_json::to_value(&typed).map_err(|e| e.to_string())?;
    let mut given = v.clone();
    if let Value::Object(map) = &mut given {
        for key in extra {
            map.remove(*key);
        }
    }
    within(&given, &written, "$")?;
    Ok(typed)
}

/// [`exact`], for a sample whose value is not needed.
fn is<T: DeserializeOwned + serde::Serialize>(v: &Value, extra: &[&str]) -> Result<(), String> {
    exact::<T>(v, extra).map(drop)
}

/// Every key of `given` is in `written`, with an equal value (recursively).
fn within(given: &Value, written: &Value, path: &str) -> Result<(), String> {
    match (given, written) {
        (Value::Object(g), Value::Object(w)) => {
            for (key, value) in g {
                let at = format!("{path}.{key}");
                let Some(w) = w.get(key) else {
                    return Err(format!("{at}: the type has no such field"));
                };
                within(value, w, &at)?;
            }
            Ok(())
        }
        (Value::Array(g), Value::Array(w)) if g.len() == w.len() => g
            .iter()
            .zip(w)
            .enumerate()
            .try_for_each(|(i, (g, w))| within(g, w, &format!("{path}[{i}]"))),
        (g, w) if g == w => Ok(()),
        (g, w) => Err(format!("{path}: the sample has {g}, the type reads {w}")),
    }
}

fn gate(v: &Value) -> Result<(), String> {
    let input: GateInput = serde_json::from_value(v.clone()).map_err(|e| e.to_string())?;
    is::<Item>(&v["item"], &[])?;
    if input.item.id.is_empty() || input.token.is_empty() {
        return Err("the item's id or the task token is empty".into());
    }
    Ok(())
}

/// A `Map` item with the gate's answer at `$.gate`.
fn provision(v: &Value) -> Result<(), String> {
    exact::<Item>(v, &["gate"])?;
    exact::<GateAnswer>(&v["gate"], &[])?;
    Ok(())
}

/// The `Map`'s results at `key`: a count of them (its `ResultSelector` keeps nothing
/// else), one per item.
fn results(v: &Value, key: &str) -> Result<(), String> {
    let items: Vec<String> =
        serde_json::from_value(v["items"].clone()).map_err(|e| e.to_string())?;
    let Some(count) = v[key]["count"].as_u64() else {
        return Err(format!("no {key} count"));
    };
    if count != items.len() as u64 {
        return Err(format!(
            "{} items but a {key} count of {count}",
            items.len()
        ));
    }
    Ok(())
}

fn samples() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(events_dir())
        .expect("events/ is readable")
        .map(|e| e.expect("an entry of events/").file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    names.sort();
    names
}

#[test]
fn every_sample_reads_as_its_payload_type() {
    let mut failures = Vec::new();
    for name in samples() {
        let Some((_, check)) = SAMPLES.iter().find(|(n, _)| *n == name) else {
            failures.push(format!(
                "events/{name}: no payload type for it: add it to SAMPLES in {}",
                file!()
            ));
            continue;
        };
        let text = std::fs::read_to_string(events_dir().join(&name)).unwrap();
        let result = serde_json::from_str::<Value>(&text)
            .map_err(|e| format!("not JSON: {e}"))
            .and_then(|v| check(&v));
        if let Err(e) = result {
            failures.push(format!("events/{name}: {e}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_listed_sample_exists() {
    let present = samples();
    for (name, _) in SAMPLES {
        assert!(
            present.iter().any(|p| p == name),
            "events/{name} is listed but missing"
        );
    }
}

#[test]
fn every_task_and_state_machine_has_a_sample() {
    let present = samples();
    let wanted = TASK_NAMES
        .iter()
        .chain(TRIGGER_NAMES)
        .map(|t| format!("{}.json", t.to_lowercase()))
        .chain(
            definitions::ALL
                .iter()
                .map(|(name, _)| format!("{name}-execution.json")),
        );
    for name in wanted {
        assert!(
            present.contains(&name),
            "events/{name} is missing: every task and state machine has a sample"
        );
    }
}

#[test]
fn a_misspelt_key_is_caught() {
    let v = serde_json::json!({"stack": "a", "inputKey": "k", "noRolback": true});
    let e = exact::<DeployRequest>(&v, &[]).unwrap_err();
    assert!(e.contains("$.noRolback"), "{e}");
    let v = serde_json::json!({"stack": "a", "inputKey": "k", "concurrency": "10"});
    assert!(exact::<DeployRequest>(&v, &[]).is_err());
}
