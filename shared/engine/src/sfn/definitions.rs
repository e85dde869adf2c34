//! The state machine definitions of `infra/` and how they are pointed at their tasks.
//!
//! The files are written for production: each task's `Resource` is a `${Name}`
//! placeholder for a Lambda function ARN, and the gates use
//! `arn:aws:states:::lambda:invoke.waitForTaskToken` with `${Gate}` as `FunctionName`.
//! [`render`] fills the placeholders; with [`Target::Activities`] it also turns each gate
//! into a plain activity task (an activity hands its worker a task token of its own), and
//! gives every task a heartbeat so that a task whose worker died is retried by another
//! (a gate, which waits without running, gets a bounded wait that is retried instead).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

/// The deploy state machine.
pub const DEPLOY: &str = include_str!("../../../../infra/deploy.asl.json");
/// The destroy state machine.
pub const DESTROY: &str = include_str!("../../../../infra/destroy.asl.json");
/// The rollback state machine.
pub const ROLLBACK: &str = include_str!("../../../../infra/rollback.asl.json");

/// Every definition, by name.
pub const ALL: &[(&str, &str)] = &[
    ("deploy", DEPLOY),
    ("destroy", DESTROY),
    ("rollback", ROLLBACK),
];

/// How long an activity gate waits before it registers again (see [`render`]).
pub const GATE_WAIT_SECONDS: u32 = 300;

/// The gate resource of the production definitions.
pub const LAMBDA_CALLBACK: &str = "arn:aws:states:::lambda:invoke.waitForTaskToken";

/// Where the tasks run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Lambda functions: task name to function ARN.
    Lambda(BTreeMap<String, String>),
    /// Step Functions activities polled by `stackflow worker`: task name to activity ARN,
    /// and the heartbeat (seconds) after which a silent worker's task is retried.
    Activities(BTreeMap<String, String>, u32),
}

fn walk_states(v: &mut Value, f: &mut dyn FnMut(&mut serde_json::Map<String, Value>)) {
    if let Some(states) = v.get_mut("States").and_then(Value::as_object_mut) {
        for state in states.values_mut() {
            if let Some(obj) = state.as_object_mut() {
                f(obj);
            }
            for key in ["Iterator", "ItemProcessor"] {
                if let Some(inner) = state.get_mut(key) {
                    walk_states(inner, f);
                }
            }
            if let Some(branches) = state.get_mut("Branches").and_then(Value::as_array_mut) {
                for b in branches {
                    walk_states(b, f);
                }
            }
        }
    }
}

/// The task names a definition uses (its `${Name}` placeholders).
pub fn placeholders(definition: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = definition;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        match after.find('}') {
            Some(end) => {
                out.insert(after[..end].to_string());
                rest = &after[end + 1..];
            }
            None => break,
        }
    }
    out
}

/// Every error name a definition's `Retry` and `Catch` match.
pub fn error_names(definition: &str) -> Result<BTreeSet<String>, String> {
    let mut v: Value = serde_json::from_str(definition).map_err(|e| e.to_string())?;
    let mut out = BTreeSet::new();
    walk_states(&mut v, &mut |state| {
        for key in ["Retry", "Catch"] {
            for rule in state
                .get(key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                for name in rule
                    .get("ErrorEquals")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    if let Some(n) = name.as_str() {
                        out.insert(n.to_string());
                    }
                }
            }
        }
    });
    Ok(out)
}

/// `definition` with its placeholders filled for `target`.
pub fn render(definition: &str, target: &Target) -> Result<String, String> {
    let mut v: Value = serde_json::from_str(definition).map_err(|e| e.to_string())?;
    if let Target::Activities(_, heartbeat) = target {
        let heartbeat = *heartbeat;
        walk_states(&mut v, &mut |state| {
            if state.get("Type").and_then(Value::as_str) != Some("Task") {
                return;
            }
            let gate = state.get("Resource").and_then(Value::as_str) == Some(LAMBDA_CALLBACK);
            if gate {
                let function = state
                    .get("Parameters")
                    .and_then(|p| p.get("FunctionName"))
                    .cloned()
                    .unwrap_or(Value::Null);
                state.insert("Resource".into(), function);
                state.remove("Parameters");
                // Nobody heartbeats a waiting gate: its token sits in S3. A bounded wait,
                // retried, re-registers the gate should its worker have died before
                // storing the token.
                state.insert("TimeoutSeconds".into(), json!(GATE_WAIT_SECONDS));
            } else {
                state.insert("HeartbeatSeconds".into(), json!(heartbeat));
            }
            let retry = state.entry("Retry").or_insert_with(|| Value::Array(vec![]));
            if let Some(rules) = retry.as_array_mut() {
                rules.push(json!({
                    "ErrorEquals": ["States.Timeout", "States.HeartbeatTimeout"],
                    "IntervalSeconds": 1,
                    "MaxAttempts": if gate { 100 } else { 5 },
                    "BackoffRate": 1
                }));
            }
        });
    }
    let arns = match target {
        Target::Lambda(m) | Target::Activities(m, _) => m,
    };
    let mut text = serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?;
    for name in placeholders(&text) {
        let arn = arns
            .get(&name)
            .ok_or_else(|| format!("no ARN given for task {name}"))?;
        text = text.replace(&format!("${{{name}}}"), arn);
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sfn::tasks::{ERROR_NAMES, TASK_NAMES};

    #[test]
    fn every_task_named_exists_and_every_error_matched_can_be_returned() {
        for (name, def) in ALL {
            for task in placeholders(def) {
                assert!(
                    TASK_NAMES.contains(&task.as_str()),
                    "{name} names task {task}, which no handler serves"
                );
            }
            for error in error_names(def).unwrap() {
                // Besides the handlers' own: Step Functions' and the Lambda service's
                // (a function that timed out or crashed in its sandbox).
                let known = ERROR_NAMES.contains(&error.as_str())
                    || error.starts_with("States.")
                    || error.starts_with("Lambda.")
                    || error == "Sandbox.Timedout";
                assert!(
                    known,
                    "{name} matches error {error}, which no handler returns"
                );
            }
        }
    }

    #[test]
    fn activity_rendering_turns_gates_into_activities() {
        let arns: BTreeMap<String, String> = TASK_NAMES
            .iter()
            .map(|t| {
                (
                    t.to_string(),
                    format!("arn:aws:states:us-east-1:1:activity:x-{t}"),
                )
            })
            .collect();
        let text = render(DEPLOY, &Target::Activities(arns.clone(), 20)).unwrap();
        assert!(!text.contains("${"));
        assert!(!text.contains(LAMBDA_CALLBACK));
        assert!(text.contains("activity:x-Gate"));
        let v: Value = serde_json::from_str(&text).unwrap();
        let gate = &v["States"]["Provision"]["Iterator"]["States"]["WaitForDependencies"];
        assert_eq!(
            gate["Resource"],
            json!("arn:aws:states:us-east-1:1:activity:x-Gate")
        );
        assert!(gate.get("Parameters").is_none());
        assert!(gate.get("HeartbeatSeconds").is_none());
        assert_eq!(gate["TimeoutSeconds"], json!(GATE_WAIT_SECONDS));
        let act = &v["States"]["Provision"]["Iterator"]["States"]["Act"];
        assert_eq!(act["HeartbeatSeconds"], json!(20));
        let lambda = render(DEPLOY, &Target::Lambda(arns)).unwrap();
        assert!(lambda.contains(LAMBDA_CALLBACK));
    }
}
