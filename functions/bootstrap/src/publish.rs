//! Events out: what a task's answer says happened (a deploy started, succeeded or failed,
//! a rollback, a drift check), published to EventBridge with source `stackflow` and a
//! versioned detail (`detail.version`, see `events/README.md`). Best effort: a failed
//! `PutEvents` is logged and never fails the task. The details hold only what the task
//! answers (outputs with `NoEcho` values masked, errors masked as recorded, drifted
//! property paths without their values).

use serde_json::{Value, json};
use stackflow_engine::sfn::triggers::drift_check::DriftChecks;
use stackflow_engine::tasks::{DeployRef, Ended, Recorded, Released, RunKind};

/// The events' source.
pub const SOURCE: &str = "stackflow";
/// The version of every detail this bootstrap writes.
pub const DETAIL_VERSION: &str = "1";
/// The bus the events go to (`default` when unset; `off` publishes nothing).
pub const BUS_VAR: &str = "STACKFLOW_EVENT_BUS";

/// Every detail-type published.
pub const DETAIL_TYPES: &[&str] = &[
    DEPLOY_STARTED,
    DEPLOY_SUCCEEDED,
    DEPLOY_FAILED,
    ROLLBACK_FINISHED,
    DRIFT_CHECKED,
    DRIFT_DETECTED,
];
/// Plan found work to do.
pub const DEPLOY_STARTED: &str = "Stack Deploy Started";
/// Finish ended the deploy (`succeeded`, `partial`), or Plan found nothing to do
/// (`no-changes`).
pub const DEPLOY_SUCCEEDED: &str = "Stack Deploy Succeeded";
/// Fail recorded the deploy's failure.
pub const DEPLOY_FAILED: &str = "Stack Deploy Failed";
/// A rollback ended (a failed deploy's, or the rollback state machine's).
pub const ROLLBACK_FINISHED: &str = "Stack Rollback Finished";
/// One stack's scheduled drift check, whatever it found.
pub const DRIFT_CHECKED: &str = "Stack Drift Checked";
/// A scheduled drift check found a resource changed or deleted out of band.
pub const DRIFT_DETECTED: &str = "Stack Drift Detected";

/// One event to publish.
#[derive(Debug, Clone, PartialEq)]
pub struct OutEvent {
    /// Its detail-type.
    pub detail_type: &'static str,
    /// Its detail (with `version`).
    pub detail: Value,
}

fn event(detail_type: &'static str, mut detail: Value) -> OutEvent {
    if let Value::Object(map) = &mut detail {
        map.insert("version".into(), DETAIL_VERSION.into());
    }
    OutEvent {
        detail_type,
        detail,
    }
}

/// The events `task`'s answer `output` is worth (none for an answer it cannot read).
pub fn events_for(task: &str, output: &Value) -> Vec<OutEvent> {
    match task {
        "Plan" => match serde_json::from_value::<DeployRef>(output.clone()) {
            Ok(r) if r.no_changes => vec![event(
                DEPLOY_SUCCEEDED,
                json!({"stack": r.stack, "deployId": r.deploy_id, "status": "no-changes"}),
            )],
            Ok(r) => vec![event(
                DEPLOY_STARTED,
                json!({"stack": r.stack, "deployId": r.deploy_id, "actions": r.items.len()}),
            )],
            Err(_) => vec![],
        },
        "Finish" | "Fail" => match serde_json::from_value::<Ended>(output.clone()) {
            Ok(e) => deploy_ended(e),
            Err(_) => vec![], // Fail's "wait" answer
        },
        "Rollback" => match serde_json::from_value::<Ended>(output.clone()) {
            Ok(e) => vec![event(
                ROLLBACK_FINISHED,
                json!({"stack": e.stack, "deployId": e.deploy_id, "status": e.status,
                       "error": e.error}),
            )],
            Err(_) => vec![],
        },
        "Release" => match serde_json::from_value::<Released>(output.clone()) {
            Ok(r) => released(r),
            Err(_) => vec![],
        },
        "DriftCheck" => match serde_json::from_value::<DriftChecks>(output.clone()) {
            Ok(c) => drift_events(c),
            Err(_) => vec![],
        },
        _ => vec![],
    }
}

fn deploy_ended(e: Ended) -> Vec<OutEvent> {
    use stackflow_engine::report::StackStatus;
    let mut out = Vec::new();
    if e.status == StackStatus::Failed {
        out.push(event(
            DEPLOY_FAILED,
            json!({"stack": e.stack, "deployId": e.deploy_id, "error": e.error,
                   "rolledBack": e.rollback.is_some()}),
        ));
    } else {
        out.push(event(
            DEPLOY_SUCCEEDED,
            json!({"stack": e.stack, "deployId": e.deploy_id, "status": e.status,
                   "outputs": e.outputs, "error": e.error}),
        ));
    }
    if let Some(r) = e.rollback {
        out.push(event(
            ROLLBACK_FINISHED,
            json!({"stack": e.stack, "deployId": e.deploy_id,
                   "status": if r.complete { "succeeded" } else { "failed" },
                   "undone": r.undone, "failed": r.failed}),
        ));
    }
    out
}

/// A run that could not end as planned (its Plan or Fail, or a rollback, failed for
/// good) and whose lock Release let go: the failure it recorded there is published as
/// Fail would have. A destroy's is not (no destroy event is published).
fn released(r: Released) -> Vec<OutEvent> {
    let Some(recorded) = r.recorded else {
        return vec![];
    };
    match (r.run, recorded) {
        (Some(RunKind::Destroy), _) => vec![],
        (None, Recorded::Failed { error }) => vec![event(
            DEPLOY_FAILED,
            json!({"stack": r.stack, "deployId": r.deploy_id, "error": error,
                   "rolledBack": false}),
        )],
        (_, Recorded::RollbackStopped { deploy_id, error }) => vec![event(
            ROLLBACK_FINISHED,
            json!({"stack": r.stack, "deployId": deploy_id, "status": "failed",
                   "error": error}),
        )],
        (Some(RunKind::Rollback), Recorded::Failed { error }) => vec![event(
            ROLLBACK_FINISHED,
            json!({"stack": r.stack, "deployId": r.deploy_id, "status": "failed",
                   "error": error}),
        )],
    }
}

fn drift_events(checks: DriftChecks) -> Vec<OutEvent> {
    let mut out = Vec::new();
    for c in checks.checked {
        out.push(event(
            DRIFT_CHECKED,
            json!({"stack": c.stack, "checkId": c.check_id, "status": c.status,
                   "resources": c.resources, "drifted": c.drifted.len(), "error": c.error}),
        ));
        if !c.drifted.is_empty() {
            out.push(event(
                DRIFT_DETECTED,
                json!({"stack": c.stack, "checkId": c.check_id, "resources": c.drifted}),
            ));
        }
    }
    out
}

/// Publishes events to the bus of [`BUS_VAR`].
#[derive(Clone)]
pub struct Publisher {
    client: Option<aws_sdk_eventbridge::Client>,
    bus: String,
}

impl Publisher {
    /// A publisher on `config`, to the bus `bus` (`None`: `default`; `off`: none).
    pub fn new(config: &aws_types::SdkConfig, bus: Option<&str>) -> Publisher {
        let bus = bus
            .map(str::trim)
            .filter(|b| !b.is_empty())
            .unwrap_or("default");
        let off = bus.eq_ignore_ascii_case("off");
        Publisher {
            client: (!off).then(|| aws_sdk_eventbridge::Client::new(config)),
            bus: bus.to_string(),
        }
    }

    /// Publishes `events` (10 to a `PutEvents` call); a failure is logged, never returned.
    pub async fn publish(&self, events: Vec<OutEvent>) {
        let Some(client) = &self.client else { return };
        for chunk in events.chunks(10) {
            let entries = chunk.iter().map(|e| {
                aws_sdk_eventbridge::types::PutEventsRequestEntry::builder()
                    .event_bus_name(&self.bus)
                    .source(SOURCE)
                    .detail_type(e.detail_type)
                    .detail(e.detail.to_string())
                    .build()
            });
            let sent = client
                .put_events()
                .set_entries(Some(entries.collect()))
                .send()
                .await;
            match sent {
                Ok(out) if out.failed_entry_count() > 0 => {
                    let codes: Vec<&str> = out
                        .entries()
                        .iter()
                        .filter_map(|e| e.error_code())
                        .collect();
                    tracing::warn!(bus = %self.bus, ?codes, "some events were not published");
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(
                    bus = %self.bus,
                    error = %stackflow_providers::error::error_chain(&e),
                    "the events were not published (the task goes on)"
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_says_started_or_no_changes() {
        let out = json!({"stack": "orders", "deployId": "d-1", "noChanges": false,
                         "failed": false, "items": ["Queue", "Topic"]});
        let e = events_for("Plan", &out);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].detail_type, DEPLOY_STARTED);
        assert_eq!(
            e[0].detail,
            json!({"stack": "orders", "deployId": "d-1", "actions": 2, "version": "1"})
        );
        let out = json!({"stack": "orders", "deployId": "d-1", "noChanges": true,
                         "failed": false, "items": []});
        assert_eq!(events_for("Plan", &out)[0].detail["status"], "no-changes");
    }

    #[test]
    fn fail_says_failed_and_how_the_rollback_went() {
        let out = json!({"stack": "orders", "deployId": "d-1", "status": "failed",
            "outputs": {}, "error": {"name": "ResourceFailed", "message": "bad ***"},
            "rollback": {"complete": true, "undone": 2}});
        let e = events_for("Fail", &out);
        let types: Vec<&str> = e.iter().map(|e| e.detail_type).collect();
        assert_eq!(types, vec![DEPLOY_FAILED, ROLLBACK_FINISHED]);
        assert_eq!(e[0].detail["error"]["message"], "bad ***");
        assert_eq!(e[0].detail["rolledBack"], true);
        assert_eq!(e[1].detail["status"], "succeeded");
        assert_eq!(e[1].detail["undone"], 2);
        // Fail's "wait" answer is not an end.
        let wait = json!({"stack": "orders", "deployId": "d-1", "wait": true, "running": []});
        assert!(events_for("Fail", &wait).is_empty());
    }

    #[test]
    fn finish_says_succeeded_with_the_masked_outputs() {
        let out = json!({"stack": "orders", "deployId": "d-1", "status": "succeeded",
            "outputs": {"Url": "https://x", "Password": "***"}});
        let e = events_for("Finish", &out);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].detail_type, DEPLOY_SUCCEEDED);
        assert_eq!(e[0].detail["outputs"]["Password"], "***");
        assert_eq!(e[0].detail["version"], DETAIL_VERSION);
    }

    #[test]
    fn a_drift_check_says_checked_and_detected() {
        let out = json!({"checked": [
            {"stack": "a", "checkId": "c-1", "status": "in-sync", "resources": 3, "drifted": []},
            {"stack": "b", "checkId": "c-2", "status": "drifted", "resources": 1, "drifted": [
                {"logicalId": "P", "resourceType": "AWS::SSM::Parameter", "status": "drifted",
                 "paths": ["/Value"]}]}
        ]});
        let e = events_for("DriftCheck", &out);
        let types: Vec<&str> = e.iter().map(|e| e.detail_type).collect();
        assert_eq!(types, vec![DRIFT_CHECKED, DRIFT_CHECKED, DRIFT_DETECTED]);
        assert_eq!(e[2].detail["resources"][0]["paths"][0], "/Value");
    }

    #[test]
    fn other_tasks_publish_nothing() {
        for task in ["Gate", "Provision", "Conclude", "Start", "PipelineJob"] {
            assert!(
                events_for(task, &json!({"stack": "a"})).is_empty(),
                "{task}"
            );
        }
    }

    #[test]
    fn release_says_what_it_recorded() {
        let error = json!({"name": "Stackflow.Aws", "message": "the execution could not end"});
        let failed = json!({"stack": "orders", "deployId": "d-1", "released": true,
            "recorded": {"kind": "failed", "error": error}});
        let e = events_for("Release", &failed);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].detail_type, DEPLOY_FAILED);
        assert_eq!(e[0].detail["error"]["name"], "Stackflow.Aws");
        assert_eq!(e[0].detail["rolledBack"], false);
        let stopped = json!({"stack": "orders", "deployId": "d-1", "released": true,
            "recorded": {"kind": "rollback-stopped", "deployId": "d-1", "error": error}});
        let e = events_for("Release", &stopped);
        assert_eq!(e[0].detail_type, ROLLBACK_FINISHED);
        assert_eq!(e[0].detail["status"], "failed");
        // Nothing recorded (the lock was not held), or a destroy's: nothing published.
        let nothing = json!({"stack": "orders", "deployId": "d-1", "released": false});
        assert!(events_for("Release", &nothing).is_empty());
        let destroy = json!({"stack": "orders", "deployId": "x-1", "released": true,
            "run": "destroy", "recorded": {"kind": "failed", "error": error}});
        assert!(events_for("Release", &destroy).is_empty());
    }

    /// The samples of `events/out/` are events as this module writes them: source
    /// `stackflow`, a detail-type of [`DETAIL_TYPES`], `detail.version` "1", and one of
    /// each detail-type.
    #[test]
    fn the_out_samples_follow_the_schema() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../events/out");
        let mut seen = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let v: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            assert_eq!(v["source"], SOURCE, "{}", path.display());
            assert_eq!(v["detail"]["version"], DETAIL_VERSION, "{}", path.display());
            let kind = v["detail-type"].as_str().unwrap_or_default().to_string();
            assert!(
                DETAIL_TYPES.contains(&kind.as_str()),
                "{}: {kind}",
                path.display()
            );
            seen.push(kind);
        }
        for kind in DETAIL_TYPES {
            assert!(seen.iter().any(|s| s == kind), "no sample of {kind}");
        }
    }
}
