//! The state machine definitions of `infra/` and how they are pointed at their tasks.
//!
//! The files are written for production: each task's `Resource` is a `${Name}`
//! placeholder for a Lambda function ARN, and the gates use
//! `arn:aws:states:::lambda:invoke.waitForTaskToken` with `${Gate}` as `FunctionName`.
//! [`render`] fills the placeholders; with [`Target::Activities`] it also turns each gate
//! into a plain activity task (an activity hands its worker a task token of its own), and
//! gives every task a heartbeat so that a task whose worker died is retried by another
//! (a gate keeps its own heartbeat re-check, at the worker's heartbeat).

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

/// Why a definition could not be read or rendered.
#[derive(Debug, thiserror::Error)]
pub enum DefinitionError {
    /// It is not JSON.
    #[error("the definition is not JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A task's `${Name}` placeholder has no ARN in the target.
    #[error("no ARN given for task {0}")]
    NoArn(String),
}

/// Every error name a definition's `Retry` and `Catch` match.
pub fn error_names(definition: &str) -> Result<BTreeSet<String>, DefinitionError> {
    let mut v: Value = serde_json::from_str(definition)?;
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
pub fn render(definition: &str, target: &Target) -> Result<String, DefinitionError> {
    let mut v: Value = serde_json::from_str(definition)?;
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
                // A gate keeps its own re-check (its heartbeat timeout, retried), here at
                // the worker's heartbeat: nobody heartbeats a waiting gate.
                state.insert("HeartbeatSeconds".into(), json!(heartbeat));
                return;
            }
            state.insert("HeartbeatSeconds".into(), json!(heartbeat));
            // A silent worker (it died) times the task out: another one runs it again.
            let retry = state.entry("Retry").or_insert_with(|| Value::Array(vec![]));
            if let Some(rules) = retry.as_array_mut() {
                rules.push(json!({
                    "ErrorEquals": ["States.HeartbeatTimeout"],
                    "IntervalSeconds": 1,
                    "MaxAttempts": 5,
                    "BackoffRate": 1
                }));
            }
        });
    }
    let arns = match target {
        Target::Lambda(m) | Target::Activities(m, _) => m,
    };
    let mut text = serde_json::to_string_pretty(&v)?;
    for name in placeholders(&text) {
        let arn = arns
            .get(&name)
            .ok_or_else(|| DefinitionError::NoArn(name.clone()))?;
        text = text.replace(&format!("${{{name}}}"), arn);
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sfn::tasks::{
        DeployRef, ERROR_NAMES, FailAnswer, Item, ItemResult, Phase, TASK_NAMES, Waiting,
    };
    use stackflow_events::event::ErrorInfo;

    /// Step Functions' payload limit (a state's input or output, a task's result).
    const LIMIT: usize = 256 * 1024;

    /// The value at a reference path (`$`, `$.a.b`) of `v`.
    fn at<'a>(v: &'a Value, path: &str) -> &'a Value {
        let rest = path.strip_prefix('$').expect("a path starts with $");
        rest.split('.')
            .filter(|k| !k.is_empty())
            .fold(v, |v, k| &v[k])
    }

    /// A `Map`'s `ItemSelector` applied to `input` for the item `value`.
    fn select(selector: &Value, input: &Value, value: &Value) -> Value {
        let mut out = serde_json::Map::new();
        for (key, v) in selector.as_object().expect("an object") {
            match key.strip_suffix(".$") {
                Some(name) => {
                    let path = v.as_str().unwrap();
                    let got = match path.strip_prefix("$$.Map.Item.Value") {
                        Some(_) => value.clone(),
                        None => at(input, path).clone(),
                    };
                    out.insert(name.to_string(), got);
                }
                None => {
                    out.insert(key.clone(), v.clone());
                }
            }
        }
        Value::Object(out)
    }

    fn size(v: &impl serde::Serialize) -> usize {
        serde_json::to_vec(v).unwrap().len()
    }

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
                // (a function that timed out in its sandbox, or whose process exited).
                let known = ERROR_NAMES.contains(&error.as_str())
                    || error.starts_with("States.")
                    || error.starts_with("Lambda.")
                    || ["Sandbox.Timedout", "Runtime.ExitError"].contains(&error.as_str());
                assert!(
                    known,
                    "{name} matches error {error}, which no handler returns"
                );
            }
        }
    }

    /// Every `Task` state of every definition, by definition and state name.
    fn tasks() -> Vec<(String, Value)> {
        let mut out = Vec::new();
        for (name, def) in ALL {
            let mut v: Value = serde_json::from_str(def).unwrap();
            walk_states(&mut v, &mut |state| {
                if state.get("Type").and_then(Value::as_str) == Some("Task") {
                    out.push((name.to_string(), Value::Object(state.clone())));
                }
            });
        }
        out
    }

    /// Every `Map` runs as many iterations at once as the deploy asks (`concurrency` in
    /// the execution input, which Plan carries to the `Map`'s input, within 1 and 40),
    /// not a number written in the definition.
    #[test]
    fn each_map_takes_the_deploys_concurrency() {
        let mut maps = Vec::new();
        for (name, def) in ALL {
            let mut v: Value = serde_json::from_str(def).unwrap();
            walk_states(&mut v, &mut |state| {
                if state.get("Type").and_then(Value::as_str) == Some("Map") {
                    maps.push((name.to_string(), Value::Object(state.clone())));
                }
            });
        }
        assert_eq!(maps.len(), 3, "provision, cleanup, and a part's items");
        for (def, map) in maps {
            assert_eq!(map["MaxConcurrencyPath"], json!("$.concurrency"), "{def}");
            assert!(map.get("MaxConcurrency").is_none(), "{def}: {map}");
        }
        // The parts of a phase run one after the other, not in a `Map` (whose order Step
        // Functions does not promise): each Part task runs the first part left and answers
        // the rest, and a Choice loops back while one is left.
        let deploy: Value = serde_json::from_str(DEPLOY).unwrap();
        for (task, more) in [
            ("ProvisionParts", "MoreProvisionParts"),
            ("CleanupParts", "MoreCleanupParts"),
        ] {
            let t = &deploy["States"][task];
            assert_eq!(t["Resource"], json!("${Part}"), "{task}");
            assert_eq!(t["Parameters"]["parts.$"], json!("$.parts"), "{task}");
            assert_eq!(t["ResultPath"], json!("$.parts"), "{task}");
            assert_eq!(t["Parameters"]["concurrency.$"], json!("$.concurrency"));
            assert_eq!(t["Next"], json!(more), "{task}");
            let rule = &deploy["States"][more]["Choices"][0];
            assert_eq!(rule["Variable"], json!("$.parts[0]"), "{more}");
            assert_eq!(rule["Next"], json!(task), "{more}");
        }
        use super::super::payloads::{MAP_CONCURRENCY, map_concurrency};
        assert_eq!(map_concurrency(0), 1);
        assert_eq!(map_concurrency(7), 7);
        assert_eq!(map_concurrency(500), MAP_CONCURRENCY);
        let r: DeployRef = serde_json::from_value(json!({"stack": "s", "deployId": "d"})).unwrap();
        assert_eq!(
            r.concurrency, MAP_CONCURRENCY,
            "a reference from before keeps 40"
        );
    }

    /// The errors a task's `Retry` matches.
    fn retried(task: &Value) -> BTreeSet<String> {
        task["Retry"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|r| r["ErrorEquals"].as_array().cloned().unwrap_or_default())
            .filter_map(|e| e.as_str().map(String::from))
            .collect()
    }

    fn is_gate(task: &Value) -> bool {
        task["Resource"] == json!(LAMBDA_CALLBACK)
    }

    /// The retrier AWS recommends for a task that invokes a Lambda function, as the CDK
    /// writes it for a `LambdaInvoke` (read from the CDK-synthesized template of the
    /// corpus): the errors it matches, and its attempts.
    fn aws_lambda_retrier() -> (BTreeSet<String>, u64) {
        const CDK: &str = include_str!(
            "../../../../tests/fixtures/corpus/stepfunctions-statemachine/StepFunctionsStack.template.json"
        );
        let start = CDK
            .find(r#"\"Retry\":[{"#)
            .expect("a Retry in the CDK's definition");
        let rest = &CDK[start..];
        let object = &rest[rest.find('{').unwrap()..rest.find('}').unwrap() + 1];
        let retrier: Value = serde_json::from_str(&object.replace(r#"\""#, "\"")).unwrap();
        let errors = retrier["ErrorEquals"].as_array().unwrap().iter();
        let errors = errors.map(|e| e.as_str().unwrap().to_string()).collect();
        (errors, retrier["MaxAttempts"].as_u64().unwrap())
    }

    /// The retrier of `task` that matches `error`: the first whose `ErrorEquals` holds it.
    fn retrier_of<'a>(task: &'a Value, error: &str) -> Option<&'a Value> {
        task["Retry"].as_array()?.iter().find(|r| {
            r["ErrorEquals"]
                .as_array()
                .is_some_and(|e| e.iter().any(|e| e == error))
        })
    }

    /// The longest a retrier waits in all before it gives up: its intervals, each capped at
    /// `MaxDelaySeconds` (AWS's default cap is a year: none), with no jitter (the most).
    fn longest_wait(retrier: &Value) -> f64 {
        let interval = retrier["IntervalSeconds"].as_f64().unwrap_or(1.0);
        let rate = retrier["BackoffRate"].as_f64().unwrap_or(2.0);
        let cap = retrier["MaxDelaySeconds"].as_f64().unwrap_or(f64::MAX);
        let attempts = retrier["MaxAttempts"].as_u64().unwrap_or(3) as i32;
        (0..attempts)
            .map(|n| (interval * rate.powi(n)).min(cap))
            .sum()
    }

    /// The handlers are idempotent (a retried call replays with the same token), so every
    /// task retries: the store's and AWS's transient errors, a sandbox that timed out, and
    /// (every task that runs a handler to its end) a task past its `TimeoutSeconds`; every
    /// error of AWS's recommended Lambda retrier, with at least its attempts; a task whose
    /// process crashed (a panic aborts it: `Runtime.ExitError`; an out-of-memory kill or an
    /// init failure: `Lambda.Unknown`); and Lambda's throttling for minutes, with backoff
    /// and jitter (40 iterations start at once, and an account's concurrency may be low).
    #[test]
    fn every_task_retries_lambdas_transient_errors_and_timeouts() {
        let all = tasks();
        assert!(all.len() >= 10, "{}", all.len());
        let (recommended, attempts) = aws_lambda_retrier();
        assert!(
            recommended.contains("Lambda.AWSLambdaException"),
            "{recommended:?}"
        );
        assert_eq!(recommended.len(), 4, "{recommended:?}");
        for (def, task) in all {
            let retried = retried(&task);
            for e in ["Stackflow.Store", "Stackflow.Aws", "Sandbox.Timedout"] {
                assert!(
                    retried.contains(e),
                    "{def}: a task does not retry {e}: {task}"
                );
            }
            for e in recommended
                .iter()
                .map(String::as_str)
                .chain(["Runtime.ExitError", "Lambda.Unknown"])
            {
                let r = retrier_of(&task, e).unwrap_or_else(|| panic!("{def}: {e}: {task}"));
                assert!(
                    r["MaxAttempts"].as_u64().unwrap() >= attempts,
                    "{def}: {e}: {r}"
                );
                assert_eq!(r["JitterStrategy"], json!("FULL"), "{def}: {e}: {r}");
            }
            let throttled = retrier_of(&task, "Lambda.TooManyRequestsException")
                .unwrap_or_else(|| panic!("{def}: throttling is not retried: {task}"));
            assert!(longest_wait(throttled) >= 300.0, "{def}: {throttled}");
            assert_eq!(
                throttled["JitterStrategy"],
                json!("FULL"),
                "{def}: {throttled}"
            );
            if !is_gate(&task) {
                assert!(retried.contains("States.Timeout"), "{def}: {task}");
                // Within Lambda's 15 minutes: a timeout is its own, and retried.
                assert_eq!(task["TimeoutSeconds"], json!(900), "{def}: {task}");
            }
        }
    }

    /// A task whose action ran past its deadline answers `Stackflow.Again`, and runs
    /// again (resuming the action) a few seconds later, for as long as an action can take.
    #[test]
    fn every_bounded_task_runs_again_after_its_deadline() {
        let bounded: Vec<(String, Value)> = tasks()
            .into_iter()
            .filter(|(_, t)| {
                [
                    "${Provision}",
                    "${Part}",
                    "${Fail}",
                    "${Destroy}",
                    "${Rollback}",
                ]
                .iter()
                .any(|r| t["Resource"] == json!(r))
            })
            .collect();
        assert_eq!(
            bounded.len(),
            8,
            "Act, Delete, a part's Act, both phases' Part, Fail, Destroy, Rollback"
        );
        for (def, task) in bounded {
            let first = &task["Retry"][0];
            assert_eq!(
                first["ErrorEquals"],
                json!(["Stackflow.Again"]),
                "{def}: {task}"
            );
            assert!(first["IntervalSeconds"].as_u64().unwrap() <= 10, "{def}");
            assert_eq!(first["BackoffRate"], json!(1), "{def}");
            // At the default deadline, 1,000 runs are 200 hours of one action.
            assert!(first["MaxAttempts"].as_u64().unwrap() >= 1000, "{def}");
        }
    }

    /// A gate nobody released times out at its heartbeat and is retried: the gate handler
    /// runs again, looks at its dependencies' markers again and stores its new token. The
    /// retries bound the whole wait to `TimeoutSeconds`; a gate's `States.Timeout` is that
    /// bound, and is not retried.
    #[test]
    fn a_gate_rechecks_at_its_heartbeat_within_a_bounded_wait() {
        let gates: Vec<(String, Value)> = tasks().into_iter().filter(|t| is_gate(&t.1)).collect();
        assert_eq!(gates.len(), 3, "the provision, cleanup and a part's gates");
        for (def, gate) in gates {
            let heartbeat = gate["HeartbeatSeconds"].as_u64().expect("a heartbeat");
            let timeout = gate["TimeoutSeconds"].as_u64().expect("a timeout");
            assert!(heartbeat <= 300, "{def}: {gate}");
            let rechecks = gate["Retry"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["ErrorEquals"] == json!(["States.HeartbeatTimeout"]))
                .unwrap_or_else(|| panic!("{def}: no heartbeat re-check: {gate}"));
            let attempts = rechecks["MaxAttempts"].as_u64().unwrap();
            assert_eq!((attempts + 1) * heartbeat, timeout, "{def}: {gate}");
            assert!(!retried(&gate).contains("States.Timeout"), "{def}: {gate}");
        }
    }

    /// Every way a deploy execution fails after its Plan may have taken the lock goes
    /// through Release (which records why and releases it), or ends in
    /// `Stackflow.LockNotReleased` when even that failed.
    #[test]
    fn every_failed_end_of_a_deploy_releases_the_lock_first() {
        let v: Value = serde_json::from_str(DEPLOY).unwrap();
        let states = &v["States"];
        let catch_of = |name: &str| {
            states[name]["Catch"][0]["Next"]
                .as_str()
                .unwrap()
                .to_string()
        };
        for (task, end) in [("Plan", "PlanFailed"), ("Fail", "DeployFailed")] {
            let release = catch_of(task);
            assert_eq!(states[&release]["Resource"], json!("${Release}"), "{task}");
            assert_eq!(states[&release]["Next"], json!(end), "{task}");
            assert_eq!(
                states[&release]["Catch"][0]["ErrorEquals"],
                json!(["States.ALL"])
            );
            let last = catch_of(&release);
            assert_eq!(states[&last]["Type"], json!("Fail"));
            assert_eq!(states[&last]["Error"], json!("Stackflow.LockNotReleased"));
        }
        // Every other task's failure goes to Fail.
        for (name, state) in states.as_object().unwrap() {
            let catches: Vec<&str> = state["Catch"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["Next"].as_str())
                .collect();
            for next in catches {
                assert!(
                    [
                        "Fail",
                        "ReleaseAfterPlan",
                        "ReleaseAfterFail",
                        "LockNotReleased"
                    ]
                    .contains(&next),
                    "{name} goes to {next} on failure"
                );
            }
        }
    }

    /// Fail answers `wait` while calls of the stopped iterations may still run: the
    /// execution waits and runs Fail again; any other answer ends it.
    #[test]
    fn fail_loops_through_a_wait_while_calls_run() {
        let v: Value = serde_json::from_str(DEPLOY).unwrap();
        let states = &v["States"];
        let choice = &states[states["Fail"]["Next"].as_str().unwrap()];
        assert_eq!(choice["Type"], json!("Choice"));
        assert_eq!(choice["Default"], json!("DeployFailed"));
        let rule = &choice["Choices"][0];
        assert_eq!(rule["Variable"], json!("$.wait"));
        assert_eq!(rule["IsPresent"], json!(true));
        let wait = &states[rule["Next"].as_str().unwrap()];
        assert_eq!(wait["Type"], json!("Wait"));
        assert_eq!(wait["Next"], json!("Fail"));
        assert!(wait["Seconds"].as_u64().unwrap() <= 30, "{wait}");
        // What Fail answers while it waits is a deploy reference for the next Fail.
        let r = DeployRef {
            stack: "s".into(),
            deploy_id: "d-1".into(),
            no_changes: false,
            failed: true,
            items: vec![],
            concurrency: 40,
            parts: vec![],
            again: None,
        };
        let answer = FailAnswer::Wait(Waiting::new(r, vec!["Queue".into()]));
        let out = serde_json::to_value(&answer).unwrap();
        assert_eq!(out["wait"], json!(true));
        let again: DeployRef = serde_json::from_value(out).unwrap();
        assert_eq!(
            (again.stack.as_str(), again.deploy_id.as_str()),
            ("s", "d-1")
        );
    }

    /// Every invocation of a destroy or rollback execution is the run named after the
    /// execution (so it resumes, and never takes the lock as a second run), and a task that
    /// fails for good goes through Release with that run, then ends failed.
    #[test]
    fn destroy_and_rollback_run_as_their_execution_and_release_on_failure() {
        for (def, task, kind, prefix, failed) in [
            (DESTROY, "Destroy", "destroy", "x", "DestroyFailed"),
            (ROLLBACK, "Rollback", "rollback", "r", "RollbackFailed"),
        ] {
            let v: Value = serde_json::from_str(def).unwrap();
            let states = &v["States"];
            let t = &states[task];
            assert_eq!(t["Parameters"]["execution.$"], json!("$$.Execution.Name"));
            assert_eq!(t["Parameters"]["stack.$"], json!("$.stack"));
            let catch = &t["Catch"][0];
            assert_eq!(catch["ErrorEquals"], json!(["States.ALL"]));
            let release = &states[catch["Next"].as_str().unwrap()];
            assert_eq!(release["Resource"], json!("${Release}"));
            let p = &release["Parameters"];
            assert_eq!(p["run"], json!(kind));
            assert_eq!(p["execution.$"], json!("$$.Execution.Name"));
            assert_eq!(p["error.$"], json!(catch["ResultPath"]));
            let req: crate::sfn::tasks::ReleaseRequest = serde_json::from_value(json!({
                "stack": "s", "run": kind, "execution": "e1", "error": {"Error": "x"}
            }))
            .unwrap();
            assert_eq!(
                req.run.map(|k| k.run_id("e1")),
                Some(format!("{prefix}-e1"))
            );
            assert_eq!(release["Next"], json!(failed));
            let last = &states[release["Catch"][0]["Next"].as_str().unwrap()];
            assert_eq!(last["Error"], json!("Stackflow.LockNotReleased"));
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
        assert_eq!(gate["HeartbeatSeconds"], json!(20));
        assert!(retried(gate).contains("States.HeartbeatTimeout"));
        let act = &v["States"]["Provision"]["Iterator"]["States"]["Act"];
        assert_eq!(act["HeartbeatSeconds"], json!(20));
        let lambda = render(DEPLOY, &Target::Lambda(arns)).unwrap();
        assert!(lambda.contains(LAMBDA_CALLBACK));
    }

    /// A stack of 2,000 resources with 60-character logical ids: Plan's output, each
    /// iteration's input, every iteration's result as the `Map` collects it, and the
    /// state after the `Map` all stay under 256 KB.
    #[test]
    fn payloads_of_a_2000_resource_stack_stay_under_256_kb() {
        let ids: Vec<String> = (0..2000).map(|i| format!("Resource{i:0>52}")).collect();
        assert!(ids.iter().all(|i| i.len() == 60));
        let plan = DeployRef {
            stack: "s".repeat(128),
            deploy_id: "d-20260315093012-4f2a9c1e".into(),
            no_changes: false,
            failed: false,
            items: ids.clone(),
            concurrency: 40,
            parts: vec![],
            again: None,
        };
        let plan_out = serde_json::to_value(&plan).unwrap();
        assert!(
            size(&plan_out) < LIMIT,
            "Plan's output: {}",
            size(&plan_out)
        );
        let v: Value = serde_json::from_str(DEPLOY).unwrap();
        for (map, act, phase, results) in [
            ("Provision", "Act", Phase::Provision, "provisioned"),
            ("Cleanup", "Delete", Phase::Cleanup, "cleaned"),
        ] {
            let m = &v["States"][map];
            // Each iteration's input is the handler's `Item`, built from a plain id.
            let one = select(&m["ItemSelector"], &plan_out, &json!(ids[7]));
            let item: Item = serde_json::from_value(one).unwrap();
            assert_eq!((item.id.as_str(), item.phase), (ids[7].as_str(), phase));
            assert_eq!(item.deploy_id, plan.deploy_id);
            // The largest result an action has: a failure with a long message.
            let worst = ItemResult {
                id: ids[0].clone(),
                outcome: "not-started".into(),
                error: Some(ErrorInfo {
                    name: "InvalidRequest".into(),
                    message: "x".repeat(4000),
                }),
            };
            let path = m["Iterator"]["States"][act]["OutputPath"]
                .as_str()
                .unwrap_or("$");
            let kept = at(&serde_json::to_value(&worst).unwrap(), path).clone();
            let collected = Value::Array(vec![kept; ids.len()]);
            assert!(
                size(&collected) < LIMIT,
                "{map} collects {}",
                size(&collected)
            );
            // The `Map` keeps a count of them, beside its input.
            assert_eq!(
                m["ResultSelector"],
                json!({"count.$": "States.ArrayLength($)"})
            );
            assert_eq!(m["ResultPath"], json!(format!("$.{results}")));
            let mut after = plan_out.clone();
            after[results] = json!({"count": ids.len()});
            assert!(size(&after) < LIMIT, "after {map}: {}", size(&after));
            println!(
                "{map}: Plan output {} B ({:.1} B per resource), collected results {} B \
                 ({:.1} B per resource), state after the Map {} B",
                size(&plan_out),
                size(&plan_out) as f64 / ids.len() as f64,
                size(&collected),
                size(&collected) as f64 / ids.len() as f64,
                size(&after)
            );
        }
    }
}
