//! Drift baselines and `drift`: a deploy records what AWS holds after each create and
//! update (secrets as their references), `drift` compares AWS with it, `--accept` and
//! `--revert` act on what drifted, and `refresh-observed` reads fresh baselines.

mod support;

use serde_json::{Value, json};
use stackflow_engine::drift::{
    DriftMode, DriftRun, DriftStatus, drift_stack, drift_stack_with, refresh_observed,
};
use stackflow_events::event::{Baseline, Event, RefusalCause};
use stackflow_events::{EventStore, NewEvent, Precondition};
use support::{FakeLookups, Op, Rig, deploy_ok, input};

const SECRET: &str = "drift-plaintext-R4n";
const REFERENCE: &str = "{{resolve:secretsmanager:db:SecretString:password}}";

fn rig() -> Rig {
    let mut lookups = FakeLookups::default();
    lookups.dynamic.insert(REFERENCE.into(), SECRET.into());
    Rig::with_lookups(lookups)
}

fn template(display: &str) -> Value {
    json!({ "Resources": {
        "Topic": {
            "Type": "AWS::SNS::Topic",
            "Properties": {
                "DisplayName": display,
                "Tags": [{"Key": "team", "Value": "a"}, {"Key": "env", "Value": "dev"}]
            }
        },
        "Param": {
            "Type": "AWS::SSM::Parameter",
            "Properties": { "Name": "/db/url", "Type": "String", "Value": format!("postgres://app:{REFERENCE}@db") }
        }
    } })
}

async fn observed(rig: &Rig, id: &str) -> serde_json::Map<String, Value> {
    match &rig.state("app").await.resources[id].baseline {
        Some(Baseline::Recorded { observed }) => observed.clone(),
        other => panic!("{id} has no recorded baseline: {other:?}"),
    }
}

async fn no_plaintext_in_the_log(rig: &Rig) {
    for e in rig.events("app").await {
        let text = serde_json::to_string(&e).unwrap();
        assert!(
            !text.contains(SECRET),
            "event {} holds the secret: {text}",
            e.seq
        );
    }
}

#[tokio::test]
async fn a_deploy_records_baselines_with_secrets_as_their_references() {
    let rig = rig();
    deploy_ok(&rig, &input("app", template("Orders"))).await;
    let topic = observed(&rig, "Topic").await;
    assert_eq!(topic["DisplayName"], "Orders");
    let param = observed(&rig, "Param").await;
    // AWS holds the resolved value; the baseline holds the reference in its place.
    let (_, thing) = rig.cloud.only("app", "Param");
    assert!(thing.properties["Value"].as_str().unwrap().contains(SECRET));
    assert_eq!(param["Value"], format!("postgres://app:{REFERENCE}@db"));
    no_plaintext_in_the_log(&rig).await;
    // An update records a new one.
    deploy_ok(&rig, &input("app", template("Orders v2"))).await;
    assert_eq!(observed(&rig, "Topic").await["DisplayName"], "Orders v2");
}

#[tokio::test]
async fn drift_reports_changes_and_deletes_and_accept_and_revert_act_on_them() {
    let rig = rig();
    deploy_ok(&rig, &input("app", template("Orders"))).await;
    let check = |mode| drift_stack(rig.engine.clone(), "app", &[], mode);
    let report = check(DriftMode::Check).await.unwrap();
    assert_eq!(report.exit_code(), 0, "{report:#?}");
    assert!(
        report
            .resources
            .iter()
            .all(|r| r.status == DriftStatus::InSync)
    );

    // Reordered tags and an AWS-added tag are no drift; a changed display name is.
    let (topic, _) = rig.cloud.only("app", "Topic");
    rig.cloud.set_properties(
        &topic,
        json!({"DisplayName": "Changed", "Tags": [
            {"Key": "env", "Value": "dev"}, {"Key": "team", "Value": "a"},
            {"Key": "aws:cloudformation:stack-name", "Value": "x"}
        ]}),
    );
    let report = check(DriftMode::Check).await.unwrap();
    assert_eq!(report.exit_code(), 1);
    let t = report
        .resources
        .iter()
        .find(|r| r.logical_id == "Topic")
        .unwrap();
    assert_eq!(t.status, DriftStatus::Drifted);
    let paths: Vec<&str> = t.differences.iter().map(|d| d.path.as_str()).collect();
    assert_eq!(paths, vec!["/DisplayName"], "{t:#?}");

    // --revert puts AWS back to the baseline; then it is in sync.
    let reverted = check(DriftMode::Revert).await.unwrap();
    let t = reverted
        .resources
        .iter()
        .find(|r| r.logical_id == "Topic")
        .unwrap();
    assert_eq!(t.status, DriftStatus::Reverted, "{t:#?}");
    assert_eq!(
        rig.cloud.only("app", "Topic").1.properties["DisplayName"],
        "Orders"
    );
    assert_eq!(check(DriftMode::Check).await.unwrap().exit_code(), 0);

    // --accept takes AWS's value as the baseline; then it is in sync.
    rig.cloud.set_properties(
        &topic,
        json!({"DisplayName": "Theirs", "Tags": [
        {"Key": "team", "Value": "a"}, {"Key": "env", "Value": "dev"}]}),
    );
    let accepted = check(DriftMode::Accept).await.unwrap();
    assert_eq!(accepted.exit_code(), 0, "{accepted:#?}");
    assert_eq!(observed(&rig, "Topic").await["DisplayName"], "Theirs");
    assert_eq!(check(DriftMode::Check).await.unwrap().exit_code(), 0);

    // Deleted outside stackflow: reported, and --accept declines it (exit 2).
    rig.cloud.remove(&topic);
    let report = check(DriftMode::Check).await.unwrap();
    assert_eq!(report.exit_code(), 1);
    assert!(
        report
            .resources
            .iter()
            .any(|r| r.status == DriftStatus::Deleted)
    );
    let declined = check(DriftMode::Accept).await.unwrap();
    assert_eq!(declined.exit_code(), 2, "{declined:#?}");
    no_plaintext_in_the_log(&rig).await;
    // Every check is in the log.
    let checks = rig
        .events("app")
        .await
        .into_iter()
        .filter(|e| matches!(e.event, Event::DriftChecked { .. }))
        .count();
    assert_eq!(checks, 8);
    assert!(
        rig.lock_holder("app").await.is_none(),
        "accept and revert release the lock"
    );
}

#[tokio::test]
async fn a_refused_baseline_is_kept_and_declined() {
    let rig = rig();
    deploy_ok(&rig, &input("app", template("Orders"))).await;
    let stream = rig.stream("app");
    rig.store
        .append(
            &stream,
            &NewEvent::new(
                "test/refused",
                Event::BaselineRefreshed {
                    logical_id: "Topic".into(),
                    baseline: Baseline::Refused {
                        cause: RefusalCause::UnverifiableParameter,
                    },
                },
            ),
            &Precondition::None,
        )
        .await
        .unwrap();
    let (topic, _) = rig.cloud.only("app", "Topic");
    rig.cloud
        .set_properties(&topic, json!({"DisplayName": "deployed-value-9Kp"}));
    // AWS may hold a parameter's deployed value there: never shown.
    let checked = drift_stack(rig.engine.clone(), "app", &[], DriftMode::Check)
        .await
        .unwrap();
    let shown = serde_json::to_string(&checked).unwrap();
    assert!(!shown.contains("deployed-value-9Kp"), "{shown}");
    assert!(shown.contains("/DisplayName"), "{shown}");
    let report = drift_stack(
        rig.engine.clone(),
        "app",
        &["Topic".into()],
        DriftMode::Accept,
    )
    .await
    .unwrap();
    let t = &report.resources[0];
    assert_eq!(t.status, DriftStatus::Declined);
    assert!(
        t.reason
            .as_deref()
            .unwrap()
            .contains("unverifiable-parameter"),
        "{t:#?}"
    );
    assert_eq!(report.exit_code(), 2);
    let refreshed = refresh_observed(rig.engine.clone(), "app").await.unwrap();
    assert!(
        refreshed.contains(&(
            "Topic".into(),
            "refused (unverifiable-parameter), kept".into()
        )),
        "{refreshed:?}"
    );
    assert!(
        refreshed.contains(&("Param".into(), "refreshed".into())),
        "{refreshed:?}"
    );
    assert_eq!(
        rig.state("app").await.resources["Topic"].refused(),
        Some(RefusalCause::UnverifiableParameter)
    );
    no_plaintext_in_the_log(&rig).await;
}

#[tokio::test]
async fn an_unknown_resource_is_an_error_that_lists_the_known_ones() {
    let rig = rig();
    deploy_ok(&rig, &input("app", template("Orders"))).await;
    let e = drift_stack(
        rig.engine.clone(),
        "app",
        &["Nope".into()],
        DriftMode::Check,
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(e.contains("Nope") && e.contains("Topic"), "{e}");
    let e = drift_stack(rig.engine.clone(), "other", &[], DriftMode::Check)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("no recorded resources"), "{e}");
}

/// Seed 003: a deploy that changes nothing clears a mask the resource's own references
/// confirm (AWS holds exactly the template's text with the references' values).
#[tokio::test]
async fn a_no_op_deploy_clears_a_mask_its_references_confirm() {
    let rig = rig();
    deploy_ok(&rig, &input("app", template("Orders"))).await;
    let mut masked = observed(&rig, "Param").await;
    masked.insert("Value".into(), json!("***"));
    rig.store
        .append(
            &rig.stream("app"),
            &NewEvent::new(
                "test/masked",
                Event::BaselineRefreshed {
                    logical_id: "Param".into(),
                    baseline: Baseline::Recorded { observed: masked },
                },
            ),
            &Precondition::None,
        )
        .await
        .unwrap();
    let report = support::deploy(&rig, &input("app", template("Orders"))).await;
    assert_eq!(report.status, stackflow_engine::StackStatus::NoChanges);
    assert_eq!(
        observed(&rig, "Param").await["Value"],
        format!("postgres://app:{REFERENCE}@db")
    );
    assert!(rig.lock_holder("app").await.is_none());
    no_plaintext_in_the_log(&rig).await;
}

/// The keys and types of the events of the drift check `check_id`.
async fn check_events(rig: &Rig, check_id: &str) -> Vec<(String, &'static str)> {
    rig.events("app")
        .await
        .into_iter()
        .filter(|e| e.key.starts_with(check_id))
        .map(|e| (e.key.clone(), e.event.type_name()))
        .collect()
}

/// Issue 22: a revert is an action like any other: its intent before the call, its
/// outcome after, under a token of its own run (two reverts never share one), and the
/// baseline it put AWS back to stays.
#[tokio::test]
async fn a_revert_is_recorded_under_its_own_token() {
    let rig = rig();
    deploy_ok(&rig, &input("app", template("Orders"))).await;
    let baseline = observed(&rig, "Topic").await;
    let (topic, _) = rig.cloud.only("app", "Topic");
    let mut tokens = vec![];
    for round in ["Changed", "Changed again"] {
        rig.cloud
            .set_properties(&topic, json!({"DisplayName": round}));
        rig.cloud.clear_calls();
        let report = drift_stack(
            rig.engine.clone(),
            "app",
            &["Topic".into()],
            DriftMode::Revert,
        )
        .await
        .unwrap();
        assert_eq!(
            report.resources[0].status,
            DriftStatus::Reverted,
            "{report:#?}"
        );
        let updates: Vec<_> = rig
            .cloud
            .calls()
            .into_iter()
            .filter(|c| c.op == Op::Update)
            .collect();
        assert_eq!(updates.len(), 1, "{updates:#?}");
        assert_eq!(
            updates[0].token,
            format!("{}/Topic/update", report.check_id)
        );
        tokens.push(updates[0].token.clone());
        let events = check_events(&rig, &report.check_id).await;
        let types: Vec<&str> = events.iter().map(|(_, t)| *t).collect();
        assert_eq!(
            types,
            vec![
                "LockTaken",
                "ResourceIntent",
                "ResourceUpdated",
                "LockReleased",
                "DriftChecked"
            ],
            "{events:#?}"
        );
    }
    assert_ne!(tokens[0], tokens[1]);
    let state = rig.state("app").await;
    assert!(state.pending.is_empty(), "{:#?}", state.pending);
    assert_eq!(observed(&rig, "Topic").await, baseline);
    assert_eq!(
        rig.cloud.only("app", "Topic").1.properties["DisplayName"],
        "Orders"
    );
    no_plaintext_in_the_log(&rig).await;
}

/// A revert whose update fails is recorded as failed, and neither the report nor the
/// record holds the secret the provider's message quoted.
#[tokio::test]
async fn a_failed_revert_is_recorded_masked() {
    let rig = rig();
    deploy_ok(&rig, &input("app", template("Orders"))).await;
    let (param, _) = rig.cloud.only("app", "Param");
    rig.cloud.set_properties(
        &param,
        json!({"Name": "/db/url", "Type": "String", "Value": "theirs"}),
    );
    rig.cloud.fail_echoing_once(Op::Update, "Param");
    let report = drift_stack(rig.engine.clone(), "app", &[], DriftMode::Revert)
        .await
        .unwrap();
    let p = report
        .resources
        .iter()
        .find(|r| r.logical_id == "Param")
        .unwrap();
    assert_eq!(p.status, DriftStatus::Declined, "{p:#?}");
    let reason = p.reason.clone().unwrap();
    assert!(
        reason.contains("failed") && !reason.contains(SECRET),
        "{reason}"
    );
    let shown = serde_json::to_string(&report).unwrap();
    assert!(!shown.contains(SECRET), "{shown}");
    let events = check_events(&rig, &report.check_id).await;
    assert!(
        events.iter().any(|(_, t)| *t == "ResourceFailed"),
        "{events:#?}"
    );
    assert!(rig.state("app").await.pending.is_empty());
    assert!(rig.lock_holder("app").await.is_none());
    no_plaintext_in_the_log(&rig).await;
}

/// A revert cut off after its call leaves its intent; the next deploy settles it as
/// skipped, saying so, and claims nothing about what AWS holds.
#[tokio::test]
async fn an_interrupted_revert_is_settled_by_the_next_deploy() {
    let rig = rig();
    deploy_ok(&rig, &input("app", template("Orders"))).await;
    let (topic, _) = rig.cloud.only("app", "Topic");
    rig.cloud
        .set_properties(&topic, json!({"DisplayName": "Changed"}));
    let gate = rig.cloud.block_once(Op::Update, "Topic");
    let engine = rig.engine.clone();
    let run = tokio::spawn(async move {
        drift_stack(engine, "app", &["Topic".into()], DriftMode::Revert).await
    });
    gate.entered().await;
    rig.store.fail_after(0);
    gate.release();
    assert!(run.await.expect("the drift task").is_err());
    rig.store.heal();
    let pending: Vec<_> = rig.state("app").await.pending.into_values().collect();
    assert_eq!(pending.len(), 1, "{pending:#?}");
    assert!(pending[0].token.ends_with("/Topic/update"), "{pending:#?}");
    rig.holders_gone
        .store(true, std::sync::atomic::Ordering::SeqCst);
    rig.cloud.clear_calls();
    deploy_ok(&rig, &input("app", template("Orders"))).await;
    assert!(
        rig.cloud.calls().iter().all(|c| c.op != Op::Update),
        "the revert is not sent again: {:#?}",
        rig.cloud.calls()
    );
    let skipped = rig
        .events("app")
        .await
        .into_iter()
        .find_map(|e| match e.event {
            Event::ResourceSkipped { reason, .. } if e.key.starts_with(&pending[0].token) => {
                Some(reason)
            }
            _ => None,
        });
    assert!(
        skipped
            .as_deref()
            .is_some_and(|r| r.contains("drift revert")),
        "{skipped:?}"
    );
    assert!(rig.state("app").await.pending.is_empty());
    assert!(rig.lock_holder("app").await.is_none());
}

/// Issue 24 item 3: a secret that cannot be read now (permission gone, secret deleted)
/// leaves its position uncompared: never "in sync" (exit 0) to a CI gate, but "not
/// compared" (exit 2), saying why.
#[tokio::test]
async fn a_secret_that_cannot_be_read_is_not_compared() {
    let rig = rig();
    deploy_ok(&rig, &input("app", template("Orders"))).await;
    let (param, _) = rig.cloud.only("app", "Param");
    rig.cloud.set_properties(
        &param,
        json!({"Name": "/db/url", "Type": "String", "Value": "postgres://app:rotated@db"}),
    );
    let param_of = |report: &stackflow_engine::drift::DriftReport| {
        report
            .resources
            .iter()
            .find(|r| r.logical_id == "Param")
            .cloned()
            .unwrap()
    };
    let readable = drift_stack(rig.engine.clone(), "app", &[], DriftMode::Check)
        .await
        .unwrap();
    assert_eq!(param_of(&readable).status, DriftStatus::Drifted);
    // The same check by an engine whose secret lookups fail.
    let blind = support::build_engine(
        rig.store.clone(),
        rig.cloud.clone(),
        std::sync::Arc::new(FakeLookups::default()),
        rig.lines.clone(),
        rig.holders_gone.clone(),
    );
    let report = drift_stack(blind, "app", &[], DriftMode::Check)
        .await
        .unwrap();
    let p = param_of(&report);
    assert_eq!(p.status, DriftStatus::NotCompared, "{p:#?}");
    assert_eq!(p.not_compared, vec!["/Value".to_string()]);
    let reason = p.reason.unwrap_or_default();
    assert!(reason.contains("could not be read"), "{reason}");
    assert_eq!(report.exit_code(), 2);
    no_plaintext_in_the_log(&rig).await;
}

/// Issue 24 item 6 (seed 003's refresh at the start of a deploy): a baseline read that
/// failed is tried again by the deploys that follow, those that change something and
/// those that change nothing.
#[tokio::test]
async fn a_missing_baseline_is_filled_in_by_a_later_deploy() {
    let rig = rig();
    deploy_ok(&rig, &input("app", template("Orders"))).await;
    let (topic, _) = rig.cloud.only("app", "Topic");
    // The read after this update fails: the update leaves the topic without a baseline.
    rig.cloud.set_unreadable(&topic, true);
    deploy_ok(&rig, &input("app", template("Orders v2"))).await;
    assert_eq!(rig.state("app").await.resources["Topic"].baseline, None);
    // A deploy that changes nothing reads it again once AWS answers.
    rig.cloud.set_unreadable(&topic, false);
    let r = support::deploy(&rig, &input("app", template("Orders v2"))).await;
    assert_eq!(r.status, stackflow_engine::StackStatus::NoChanges);
    assert_eq!(observed(&rig, "Topic").await["DisplayName"], "Orders v2");
    assert!(rig.lock_holder("app").await.is_none());

    // And a deploy that changes something else.
    rig.cloud.set_unreadable(&topic, true);
    deploy_ok(&rig, &input("app", template("Orders v3"))).await;
    assert_eq!(rig.state("app").await.resources["Topic"].baseline, None);
    rig.cloud.set_unreadable(&topic, false);
    let mut other = template("Orders v3");
    other["Resources"]["Param"]["Properties"]["Type"] = json!("StringList");
    deploy_ok(&rig, &input("app", other)).await;
    assert_eq!(observed(&rig, "Topic").await["DisplayName"], "Orders v3");
    no_plaintext_in_the_log(&rig).await;
}

/// A deploy reads each resource's baseline once: the end of the run, which reads again
/// the baselines still missing, knows those its reads recorded meanwhile (they went in
/// beside the run's own records). It read all of them a second time, one after another:
/// 29.6 s of a 30.9 s deploy of 200 resources at 108 ms a call.
#[tokio::test]
async fn a_deploy_reads_each_baseline_once() {
    let rig = rig();
    let mut t = template("Orders");
    for i in 0..20 {
        t["Resources"][format!("Extra{i}")] =
            json!({"Type": "AWS::SNS::Topic", "Properties": {"DisplayName": format!("extra {i}")}});
    }
    // A store 20 ms away: reads end while earlier baselines are being appended.
    rig.store.slow_appends(20);
    deploy_ok(&rig, &input("app", t)).await;
    let state = rig.state("app").await;
    let reads = rig.cloud.reads();
    for (id, r) in &state.resources {
        assert!(r.baseline.is_some(), "{id} has a baseline");
        assert_eq!(reads.get(&r.physical_id), Some(&1), "{id} was read once");
    }
    // The baselines went in together, not one event each.
    let events = rig.events("app").await;
    let batches: Vec<usize> = events
        .iter()
        .filter_map(|e| match &e.event {
            Event::BaselinesRecorded { baselines } => Some(baselines.len()),
            _ => None,
        })
        .collect();
    assert!(
        events
            .iter()
            .all(|e| !matches!(e.event, Event::BaselineRecorded { .. })),
        "no baseline is left to the run's end"
    );
    assert_eq!(batches.iter().sum::<usize>(), state.resources.len());
    assert!(
        batches.len() * 3 <= state.resources.len(),
        "{} resources, baseline events of {batches:?}",
        state.resources.len()
    );
}

#[tokio::test]
async fn a_dry_run_says_what_accept_and_revert_would_do_and_does_nothing() {
    let rig = rig();
    deploy_ok(&rig, &input("app", template("Orders"))).await;
    let (topic, _) = rig.cloud.only("app", "Topic");
    let tags = json!([{"Key": "team", "Value": "a"}, {"Key": "env", "Value": "dev"}]);
    rig.cloud
        .set_properties(&topic, json!({"DisplayName": "Changed", "Tags": tags}));
    let events_before = rig.events("app").await.len();
    rig.cloud.clear_calls();
    let dry = DriftRun {
        concurrency: 2,
        dry_run: true,
    };
    for (mode, would) in [
        (DriftMode::Revert, DriftStatus::WouldRevert),
        (DriftMode::Accept, DriftStatus::WouldAccept),
    ] {
        let report = drift_stack_with(rig.engine.clone(), "app", &[], mode, dry)
            .await
            .unwrap();
        assert!(report.dry_run);
        let t = report.resources.iter().find(|r| r.logical_id == "Topic");
        assert_eq!(t.unwrap().status, would, "{report:#?}");
        let p = report.resources.iter().find(|r| r.logical_id == "Param");
        assert_eq!(p.unwrap().status, DriftStatus::InSync, "{report:#?}");
        assert_eq!(report.exit_code(), 1, "the drift is still there");
    }
    // No lock, no event (not even the check's), no call that changes AWS.
    assert_eq!(rig.events("app").await.len(), events_before);
    assert!(rig.cloud.calls().is_empty(), "{:?}", rig.cloud.calls());
    assert_eq!(
        rig.cloud.only("app", "Topic").1.properties["DisplayName"],
        "Changed"
    );
    assert!(rig.lock_holder("app").await.is_none());

    // The revert itself does what the dry run said.
    let how = DriftRun {
        concurrency: 2,
        dry_run: false,
    };
    let reverted = drift_stack_with(rig.engine.clone(), "app", &[], DriftMode::Revert, how)
        .await
        .unwrap();
    let t = reverted.resources.iter().find(|r| r.logical_id == "Topic");
    assert_eq!(t.unwrap().status, DriftStatus::Reverted);
    let updates: Vec<_> = rig
        .cloud
        .calls()
        .into_iter()
        .filter(|c| c.op == Op::Update)
        .collect();
    assert_eq!(updates.len(), 1, "{updates:?}");
    assert_eq!(
        rig.cloud.only("app", "Topic").1.properties["DisplayName"],
        "Orders"
    );
}

#[tokio::test]
async fn a_resource_aws_cannot_be_read_for_is_unsupported_and_says_why() {
    let rig = rig();
    deploy_ok(&rig, &input("app", template("Orders"))).await;
    let (topic, _) = rig.cloud.only("app", "Topic");
    rig.cloud.set_unreadable(&topic, true);
    let report = drift_stack(rig.engine.clone(), "app", &[], DriftMode::Revert)
        .await
        .unwrap();
    let t = report.resources.iter().find(|r| r.logical_id == "Topic");
    let t = t.unwrap();
    assert_eq!(t.status, DriftStatus::Unsupported, "{report:#?}");
    assert!(t.reason.as_deref().is_some_and(|r| !r.is_empty()), "{t:#?}");
    // Neither reverted nor counted as drift; the other resource is still checked.
    let p = report.resources.iter().find(|r| r.logical_id == "Param");
    assert_eq!(p.unwrap().status, DriftStatus::InSync);
    assert!(rig.cloud.calls().iter().all(|c| c.op != Op::Update));
}
