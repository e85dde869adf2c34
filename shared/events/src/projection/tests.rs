use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::event::{
    Baseline, DriftResult, ErrorInfo, Event, Holder, NewEvent, Operation, ProviderKind,
    RefusalCause, ResourceRecord, StoredEvent, current_version, now,
};

fn record(id: &str, physical: &str, deps: &[&str]) -> ResourceRecord {
    ResourceRecord {
        logical_id: id.into(),
        resource_type: "AWS::SQS::Queue".into(),
        physical_id: physical.into(),
        properties: json!({"QueueName": physical, "Secret": "{{resolve:ssm-secure:/db/pw}}"})
            .as_object()
            .unwrap()
            .clone(),
        attributes: [("Arn".to_string(), json!(format!("arn:{physical}")))].into(),
        dependencies: deps.iter().map(|d| d.to_string()).collect(),
        provider: ProviderKind::Sdk,
        deletion_policy: None,
        update_replace_policy: None,
        secret_digest: None,
    }
}

/// Builds stored events, numbering them from 1.
#[derive(Default)]
struct Log {
    events: Vec<StoredEvent>,
}

impl Log {
    fn push(&mut self, event: Event) -> &mut Self {
        let seq = self.events.len() as u64 + 1;
        let v = current_version(event.type_name());
        self.events.push(StoredEvent {
            seq,
            key: format!("k{seq}"),
            at: "2026-11-29T12:00:00.000Z".into(),
            v,
            event,
        });
        self
    }
    fn state(&self) -> StackState {
        StackState::fold(&self.events)
    }
}

fn started(d: &str) -> Event {
    Event::DeployStarted {
        deploy_id: d.into(),
        who: "dev@laptop".into(),
        template_digest: "abc".into(),
        parameters: [("Env".to_string(), json!("dev"))].into(),
        no_rollback: false,
        stack_id: None,
    }
}

fn created(d: &str, r: ResourceRecord) -> Event {
    Event::ResourceCreated {
        deploy_id: d.into(),
        resource: r,
        replaces: None,
        baseline: None,
    }
}

#[test]
fn a_deploy_builds_the_state() {
    let mut log = Log::default();
    log.push(started("d1"))
        .push(Event::ResourceIntent {
            deploy_id: "d1".into(),
            logical_id: "A".into(),
            resource_type: "AWS::SQS::Queue".into(),
            operation: Operation::Create,
            token: "d1-A-create".into(),
            provider: ProviderKind::Sdk,
            physical_id: None,
            properties: None,
        })
        .push(created("d1", record("A", "a-1", &[])))
        .push(created("d1", record("B", "b-1", &["A"])))
        .push(Event::DeployCompleted {
            deploy_id: "d1".into(),
            outputs: [("Url".to_string(), json!("https://a-1"))].into(),
            exports: [("app-url".to_string(), json!("https://a-1"))].into(),
            imports: vec![],
        });
    let s = log.state();
    assert_eq!(s.seq, 5);
    assert_eq!(s.resources.len(), 2);
    assert_eq!(s.resources["B"].dependencies, vec!["A"]);
    assert!(s.pending.is_empty(), "the intent was settled");
    assert_eq!(
        s.last_deploy.as_ref().unwrap().status,
        DeployStatus::Completed
    );
    assert!(
        s.journal.entries.is_empty(),
        "a completed deploy has nothing to roll back"
    );
    assert_eq!(s.exports["app-url"], json!("https://a-1"));
    assert_eq!(
        s.resources["A"].properties["Secret"],
        json!("{{resolve:ssm-secure:/db/pw}}")
    );
    let current = s.to_current_state();
    assert_eq!(current.resources["A"].physical_id, "a-1");
    s.check_integrity().unwrap();
}

#[test]
fn an_intent_without_outcome_stays_pending() {
    let mut log = Log::default();
    log.push(started("d1")).push(Event::ResourceIntent {
        deploy_id: "d1".into(),
        logical_id: "A".into(),
        resource_type: "AWS::SQS::Queue".into(),
        operation: Operation::Create,
        token: "tok".into(),
        provider: ProviderKind::CloudControl,
        physical_id: None,
        properties: None,
    });
    let s = log.state();
    assert_eq!(s.pending.len(), 1);
    let p = s.pending.values().next().unwrap();
    assert_eq!(p.token, "tok");
    assert_eq!(p.seq, 2);
    assert_eq!(s.last_deploy.unwrap().status, DeployStatus::InProgress);
}

#[test]
fn two_old_copies_deleted_by_one_deploy_each_keep_their_intent() {
    let delete = |physical: &str| Event::ResourceIntent {
        deploy_id: "d2".into(),
        logical_id: "T".into(),
        resource_type: "AWS::SQS::Queue".into(),
        operation: Operation::Delete,
        token: format!("d2/T/delete-old-{physical}"),
        provider: ProviderKind::Sdk,
        physical_id: Some(physical.into()),
        properties: None,
    };
    let mut log = Log::default();
    log.push(started("d2"))
        .push(delete("old-a"))
        .push(delete("old-b"))
        .push(Event::ResourceDeleted {
            deploy_id: "d2".into(),
            logical_id: "T".into(),
            physical_id: "old-a".into(),
            replaced: true,
        });
    let s = log.state();
    let left: Vec<Option<&str>> = s
        .pending
        .values()
        .map(|p| p.physical_id.as_deref())
        .collect();
    assert_eq!(
        left,
        vec![Some("old-b")],
        "the other copy's delete is still pending"
    );
    // A failed delete names no physical id: it settles the resource's deletes.
    log.push(Event::ResourceFailed {
        deploy_id: "d2".into(),
        logical_id: "T".into(),
        operation: Operation::Delete,
        error: ErrorInfo {
            name: "X".into(),
            message: "no".into(),
        },
    });
    assert!(log.state().pending.is_empty());
}

#[test]
fn a_failed_deploy_leaves_a_journal_that_rollback_undoes() {
    let mut log = Log::default();
    log.push(started("d1"))
        .push(created("d1", record("A", "a-1", &[])))
        .push(created("d1", record("B", "b-1", &[])))
        .push(Event::DeployCompleted {
            deploy_id: "d1".into(),
            outputs: Default::default(),
            exports: Default::default(),
            imports: vec![],
        })
        .push(started("d2"))
        .push(created("d2", record("C", "c-1", &["A"])))
        .push(Event::ResourceUpdated {
            deploy_id: "d2".into(),
            resource: record("A", "a-1", &[]),
            previous_properties: record("A", "a-1", &[]).properties,
            baseline: None,
        })
        .push(Event::ResourceCreated {
            deploy_id: "d2".into(),
            resource: record("B", "b-2", &[]),
            replaces: Some("b-1".into()),
            baseline: None,
        })
        .push(Event::DeployFailed {
            deploy_id: "d2".into(),
            error: ErrorInfo {
                name: "InvalidRequest".into(),
                message: "bad value ***".into(),
            },
            logical_id: Some("D".into()),
        });
    let s = log.state();
    assert_eq!(s.last_deploy.as_ref().unwrap().status, DeployStatus::Failed);
    let undo: Vec<&str> = s.journal.to_undo().map(|e| e.logical_id.as_str()).collect();
    assert_eq!(undo, vec!["B", "A", "C"]);
    assert!(
        matches!(s.journal.entries[2].step, JournalStep::Replaced { ref new_physical_id, ref previous, .. } if new_physical_id == "b-2" && previous.physical_id == "b-1")
    );
    assert!(s.predecessors.contains_key("b-1"));
    s.check_integrity().unwrap();

    log.push(Event::RollbackStarted {
        deploy_id: "d2".into(),
        rollback_id: "r1".into(),
    });
    for (id, how) in [("B", "deleted"), ("A", "restored"), ("C", "deleted")] {
        log.push(Event::RollbackEntryUndone {
            deploy_id: "d2".into(),
            logical_id: id.into(),
            how: how.into(),
        });
    }
    log.push(Event::RollbackFinished {
        deploy_id: "d2".into(),
        complete: true,
        errors: vec![],
    });
    let s = log.state();
    assert_eq!(
        s.last_deploy.as_ref().unwrap().status,
        DeployStatus::RolledBack
    );
    assert_eq!(s.resources.len(), 2);
    assert_eq!(
        s.resources["B"].physical_id, "b-1",
        "the old resource is back"
    );
    assert!(!s.resources.contains_key("C"));
    assert!(s.predecessors.is_empty());
    assert!(s.journal.entries.is_empty());
    s.check_integrity().unwrap();
}

#[test]
fn import_marks_make_rollback_skip_adopted_resources() {
    let mut log = Log::default();
    log.push(started("d1"))
        .push(created("d1", record("A", "a-1", &[])))
        .push(created("d1", record("B", "b-1", &[])))
        .push(Event::DeployFailed {
            deploy_id: "d1".into(),
            error: ErrorInfo {
                name: "X".into(),
                message: "y".into(),
            },
            logical_id: None,
        })
        .push(Event::ImportMarked {
            import_id: "i1".into(),
            deploy_id: "d1".into(),
            resources: [("A".to_string(), "a-1".to_string())].into(),
        })
        .push(Event::ResourceImported {
            import_id: "i1".into(),
            resource: record("A", "a-1", &[]),
            baseline: Some(Baseline::Refused {
                cause: RefusalCause::UnverifiableParameter,
            }),
        });
    let s = log.state();
    let undo: Vec<&str> = s.journal.to_undo().map(|e| e.logical_id.as_str()).collect();
    assert_eq!(undo, vec!["B"]);
    assert_eq!(s.journal.entries[0].imported.as_deref(), Some("a-1"));
    assert!(s.resources["A"].imported);
    assert_eq!(
        s.resources["A"].refused(),
        Some(RefusalCause::UnverifiableParameter)
    );
    assert_eq!(
        s.baselines()["A"],
        Some(&Baseline::Refused {
            cause: RefusalCause::UnverifiableParameter
        })
    );
}

#[test]
fn deletes_retains_baselines_scrubs_and_locks() {
    let mut log = Log::default();
    log.push(started("d1"))
        .push(created("d1", record("A", "a-1", &[])))
        .push(created("d1", record("B", "b-1", &["A"])))
        .push(Event::BaselineRecorded {
            logical_id: "A".into(),
            baseline: Baseline::Recorded {
                observed: json!({"QueueName": "a-1", "Secret": "hunter2"})
                    .as_object()
                    .unwrap()
                    .clone(),
            },
        })
        .push(Event::Scrubbed {
            logical_id: "A".into(),
            paths: vec!["/Secret".into()],
            replaced: Default::default(),
        })
        .push(Event::ResourceRetained {
            deploy_id: "d1".into(),
            logical_id: "A".into(),
            physical_id: "a-1".into(),
            reason: "DeletionPolicy: Retain".into(),
            replaced: false,
        })
        .push(Event::LockReleased {
            deploy_id: "d1".into(),
        });
    let s = log.state();
    assert!(!s.resources.contains_key("A"));
    assert!(
        s.resources["B"].dependencies.is_empty(),
        "nothing depends on a resource that is gone"
    );
    assert!(s.lock.is_none());
    s.check_integrity().unwrap();

    // Before the retain, the scrub replaced the secret in the baseline.
    let before = StackState::fold_until(&log.events, 5);
    assert_eq!(
        before.resources["A"].observed().unwrap()["Secret"],
        json!("***")
    );
    assert_eq!(before.resources["A"].properties["Secret"], json!("***"));
    assert_eq!(before.lock.as_ref().unwrap().deploy_id, "d1");
}

/// One sample of every event type: their serialized forms are pinned.
fn samples() -> Vec<Event> {
    let holder = Holder {
        deploy_id: "d1".into(),
        who: "dev@laptop".into(),
        since: "2026-11-29T12:00:00.000Z".into(),
        operation: "deploy".into(),
        expires: None,
        fenced: None,
    };
    let err = ErrorInfo {
        name: "InvalidRequest".into(),
        message: "VisibilityTimeout must be at most 43200 (got ***)".into(),
    };
    let observed = json!({"QueueName": "q"}).as_object().unwrap().clone();
    vec![
        started("d1"),
        Event::DeployCompleted {
            deploy_id: "d1".into(),
            outputs: [("Url".to_string(), json!("u"))].into(),
            exports: [("e".to_string(), json!("u"))].into(),
            imports: vec![],
        },
        Event::DeployFailed {
            deploy_id: "d1".into(),
            error: err.clone(),
            logical_id: Some("Q".into()),
        },
        Event::ResourceIntent {
            deploy_id: "d1".into(),
            logical_id: "Q".into(),
            resource_type: "AWS::SQS::Queue".into(),
            operation: Operation::Create,
            token: "d1-Q-create".into(),
            provider: ProviderKind::CloudControl,
            physical_id: None,
            properties: None,
        },
        Event::ResourceCreated {
            deploy_id: "d1".into(),
            resource: record("Q", "q-1", &["T"]),
            replaces: None,
            baseline: Some(Baseline::Recorded {
                observed: observed.clone(),
            }),
        },
        Event::ResourceUpdated {
            deploy_id: "d1".into(),
            resource: record("Q", "q-1", &[]),
            previous_properties: observed.clone(),
            baseline: Some(Baseline::Refused {
                cause: RefusalCause::IncompleteResolution,
            }),
        },
        Event::ResourceDeleted {
            deploy_id: "d1".into(),
            logical_id: "Q".into(),
            physical_id: "q-1".into(),
            replaced: true,
        },
        Event::ResourceRetained {
            deploy_id: "d1".into(),
            logical_id: "Q".into(),
            physical_id: "q-1".into(),
            reason: "DeletionPolicy: Retain".into(),
            replaced: false,
        },
        Event::ResourceSkipped {
            deploy_id: "d1".into(),
            logical_id: "Q".into(),
            operation: Operation::Delete,
            reason: "not found".into(),
        },
        Event::ResourceFailed {
            deploy_id: "d1".into(),
            logical_id: "Q".into(),
            operation: Operation::Update,
            error: err.clone(),
        },
        Event::RollbackStarted {
            deploy_id: "d1".into(),
            rollback_id: "r1".into(),
        },
        Event::RollbackEntryUndone {
            deploy_id: "d1".into(),
            logical_id: "Q".into(),
            how: "deleted".into(),
        },
        Event::RollbackFinished {
            deploy_id: "d1".into(),
            complete: false,
            errors: vec![err],
        },
        Event::StackDestroyed {
            deploy_id: "x1".into(),
        },
        Event::ResourceImported {
            import_id: "i1".into(),
            resource: record("Q", "q-1", &[]),
            baseline: Some(Baseline::Recorded {
                observed: observed.clone(),
            }),
        },
        Event::ImportMarked {
            import_id: "i1".into(),
            deploy_id: "d1".into(),
            resources: [("Q".to_string(), "q-1".to_string())].into(),
        },
        Event::BaselineRecorded {
            logical_id: "Q".into(),
            baseline: Baseline::Recorded {
                observed: observed.clone(),
            },
        },
        Event::BaselinesRecorded {
            baselines: [
                (
                    "Q".to_string(),
                    Baseline::Recorded {
                        observed: observed.clone(),
                    },
                ),
                (
                    "R".to_string(),
                    Baseline::Refused {
                        cause: RefusalCause::UnverifiableParameter,
                    },
                ),
            ]
            .into(),
        },
        Event::BaselineRefreshed {
            logical_id: "Q".into(),
            baseline: Baseline::Refused {
                cause: RefusalCause::UnverifiableParameter,
            },
        },
        Event::BaselineAccepted {
            logical_id: "Q".into(),
            observed,
        },
        Event::DriftChecked {
            check_id: "c1".into(),
            results: vec![DriftResult {
                logical_id: "Q".into(),
                status: "drifted".into(),
                paths: vec!["VisibilityTimeout".into()],
            }],
        },
        Event::Scrubbed {
            logical_id: "Q".into(),
            paths: vec!["/Password".into()],
            replaced: [(
                "/resources/Q/attributes/Url".into(),
                "{{resolve:ssm-secure:/q}}".into(),
            )]
            .into(),
        },
        Event::EventsRewritten {
            by: "ops@desk".into(),
            reason: "scrub: plaintext secrets replaced".into(),
            seqs: vec![4, 9],
        },
        Event::LockTaken {
            holder: holder.clone(),
        },
        Event::Throttled {
            deploy_id: "d1".into(),
            services: vec![
                crate::event::ServiceThrottling {
                    service: "sqs".into(),
                    retries: 3,
                    lowest_limit: Some(16),
                },
                crate::event::ServiceThrottling {
                    service: "ssm".into(),
                    retries: 1,
                    lowest_limit: None,
                },
            ],
        },
        Event::ActionsFenced {
            deploy_id: "d1".into(),
        },
        Event::LockReleased {
            deploy_id: "d1".into(),
        },
        Event::LockBroken {
            by: "ops@desk".into(),
            previous: holder,
        },
    ]
}

#[test]
fn every_event_type_has_a_pinned_serialized_form() {
    let samples = samples();
    let names: Vec<&str> = samples.iter().map(|e| e.type_name()).collect();
    assert_eq!(
        names,
        crate::event::EVENT_TYPES,
        "one sample per type, in order"
    );
    for e in &samples {
        let body = e.to_body();
        assert_eq!(body["type"], json!(e.type_name()));
        insta::assert_json_snapshot!(e.type_name(), body);
        // It reads back as itself at the current version.
        let back = Event::from_body(e.type_name(), current_version(e.type_name()), body).unwrap();
        assert_eq!(&back, e);
    }
}

#[test]
fn newer_versions_are_refused_and_bad_bodies_named() {
    let body = started("d1").to_body();
    let e = Event::from_body("DeployStarted", 99, body).unwrap_err();
    assert!(e.to_string().contains("upgrade stackflow"), "{e}");
    let e = Event::from_body("DeployStarted", 1, json!({"type": "DeployStarted"})).unwrap_err();
    assert!(e.to_string().contains("malformed"), "{e}");
}

#[test]
fn digests_tell_content_apart() {
    let a = NewEvent::new("k", started("d1"));
    let b = NewEvent::new("k", started("d2"));
    assert_eq!(a.digest(), NewEvent::new("other", started("d1")).digest());
    assert_ne!(a.digest(), b.digest());
    assert!(now().ends_with('Z'));
}

// ---- property tests ----

/// Steps of a plausible history, turned into events by [`simulate`].
#[derive(Debug, Clone)]
enum Step {
    Deploy,
    Create { deps: Vec<usize> },
    Update(usize),
    Replace(usize),
    Delete(usize),
    Crash(usize),
    Fail,
    Complete,
    Rollback,
    Import(usize),
    Baseline(usize),
    Scrub(usize),
    Drift,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        2 => Just(Step::Deploy),
        6 => proptest::collection::vec(0usize..20, 0..3).prop_map(|deps| Step::Create { deps }),
        3 => (0usize..20).prop_map(Step::Update),
        2 => (0usize..20).prop_map(Step::Replace),
        2 => (0usize..20).prop_map(Step::Delete),
        1 => (0usize..20).prop_map(Step::Crash),
        1 => Just(Step::Fail),
        2 => Just(Step::Complete),
        1 => Just(Step::Rollback),
        1 => (0usize..20).prop_map(Step::Import),
        1 => (0usize..20).prop_map(Step::Baseline),
        1 => (0usize..20).prop_map(Step::Scrub),
        1 => Just(Step::Drift),
    ]
}

/// Plays the steps as stackflow would: resources only depend on existing ones, cleanup
/// deletes happen at completion, rollback undoes the journal last first.
fn simulate(steps: &[Step]) -> Vec<StoredEvent> {
    let mut log = Log::default();
    let mut deploy = 0usize;
    let mut counter = 0usize;
    let mut in_deploy = false;
    for s in steps {
        let state = log.state();
        let d = format!("d{deploy}");
        let ids: Vec<String> = state.resources.keys().cloned().collect();
        let pick = |i: &usize| ids.get(i % ids.len().max(1)).cloned();
        match s {
            Step::Deploy => {
                deploy += 1;
                in_deploy = true;
                log.push(started(&format!("d{deploy}")));
            }
            _ if !in_deploy => {}
            Step::Create { deps } => {
                counter += 1;
                let id = format!("R{counter}");
                let deps: Vec<&str> = deps
                    .iter()
                    .filter_map(|i| ids.get(i % ids.len().max(1)).map(String::as_str))
                    .collect();
                log.push(created(&d, record(&id, &format!("{id}-p{counter}"), &deps)));
            }
            Step::Update(i) => {
                if let Some(id) = pick(i) {
                    let r = &state.resources[&id];
                    let mut rec = record(&id, &r.physical_id, &[]);
                    rec.dependencies = r.dependencies.clone();
                    rec.properties.insert("N".into(), json!(counter));
                    log.push(Event::ResourceUpdated {
                        deploy_id: d.clone(),
                        resource: rec,
                        previous_properties: r.properties.clone(),
                        baseline: None,
                    });
                }
            }
            Step::Replace(i) => {
                if let Some(id) = pick(i) {
                    counter += 1;
                    let r = &state.resources[&id];
                    let mut rec = record(&id, &format!("{id}-p{counter}"), &[]);
                    rec.dependencies = r.dependencies.clone();
                    log.push(Event::ResourceCreated {
                        deploy_id: d.clone(),
                        resource: rec,
                        replaces: Some(r.physical_id.clone()),
                        baseline: None,
                    });
                }
            }
            Step::Delete(i) => {
                if let Some(id) = pick(i) {
                    let r = &state.resources[&id];
                    log.push(Event::ResourceDeleted {
                        deploy_id: d.clone(),
                        logical_id: id.clone(),
                        physical_id: r.physical_id.clone(),
                        replaced: false,
                    });
                }
            }
            Step::Crash(i) => {
                if let Some(id) = pick(i) {
                    log.push(Event::ResourceIntent {
                        deploy_id: d.clone(),
                        logical_id: id,
                        resource_type: "AWS::SQS::Queue".into(),
                        operation: Operation::Update,
                        token: format!("t{counter}"),
                        provider: ProviderKind::Sdk,
                        physical_id: None,
                        properties: None,
                    });
                }
            }
            Step::Fail => {
                log.push(Event::DeployFailed {
                    deploy_id: d.clone(),
                    error: ErrorInfo {
                        name: "E".into(),
                        message: "m".into(),
                    },
                    logical_id: None,
                });
            }
            Step::Complete => {
                for (phys, p) in &state.predecessors {
                    log.push(Event::ResourceDeleted {
                        deploy_id: d.clone(),
                        logical_id: p.logical_id.clone(),
                        physical_id: phys.clone(),
                        replaced: true,
                    });
                }
                log.push(Event::DeployCompleted {
                    deploy_id: d.clone(),
                    outputs: Default::default(),
                    exports: Default::default(),
                    imports: vec![],
                });
                in_deploy = false;
            }
            Step::Rollback => {
                log.push(Event::RollbackStarted {
                    deploy_id: d.clone(),
                    rollback_id: "r".into(),
                });
                let ids: Vec<String> = state
                    .journal
                    .to_undo()
                    .map(|e| e.logical_id.clone())
                    .collect();
                for id in ids {
                    log.push(Event::RollbackEntryUndone {
                        deploy_id: d.clone(),
                        logical_id: id,
                        how: "deleted".into(),
                    });
                }
                log.push(Event::RollbackFinished {
                    deploy_id: d.clone(),
                    complete: true,
                    errors: vec![],
                });
                in_deploy = false;
            }
            Step::Import(i) => {
                if let Some(id) = pick(i) {
                    let r = &state.resources[&id];
                    log.push(Event::ImportMarked {
                        import_id: "i".into(),
                        deploy_id: d.clone(),
                        resources: [(id.clone(), r.physical_id.clone())].into(),
                    });
                }
            }
            Step::Baseline(i) => {
                if let Some(id) = pick(i) {
                    log.push(Event::BaselineRecorded {
                        logical_id: id,
                        baseline: Baseline::Recorded {
                            observed: json!({"N": counter}).as_object().unwrap().clone(),
                        },
                    });
                }
            }
            Step::Scrub(i) => {
                if let Some(id) = pick(i) {
                    log.push(Event::Scrubbed {
                        paths: vec!["/Secret".into()],
                        replaced: [(
                            format!("/resources/{id}/properties/QueueName"),
                            "****".into(),
                        )]
                        .into(),
                        logical_id: id,
                    });
                }
            }
            Step::Drift => {
                log.push(Event::DriftChecked {
                    check_id: "c".into(),
                    results: vec![],
                });
            }
        }
    }
    log.events
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// A snapshot taken anywhere, serialized and read back, plus the rest of the stream,
    /// gives the state the whole stream gives; every prefix passes the integrity check.
    #[test]
    fn fold_of_snapshot_plus_rest_equals_fold_of_all(
        steps in proptest::collection::vec(step(), 0..80),
        cut in 0usize..200,
    ) {
        let events = simulate(&steps);
        let all = StackState::fold(&events);
        let cut = cut.min(events.len());
        let snap = StackState::fold(&events[..cut]).to_snapshot();
        let mut resumed = StackState::from_snapshot(&snap).expect("a snapshot reads back");
        for e in &events[cut..] {
            resumed.apply(e);
        }
        prop_assert_eq!(&resumed, &all);
        for n in 0..=events.len() {
            let s = StackState::fold(&events[..n]);
            if let Err(problems) = s.check_integrity() {
                prop_assert!(false, "after {} events: {:?}", n, problems);
            }
        }
    }

    /// The fold is total: any events in any order fold without a panic, and snapshots
    /// still resume to the same state.
    #[test]
    fn fold_is_total_on_arbitrary_events(
        picks in proptest::collection::vec((0usize..23, 0usize..4, 0usize..4), 0..60),
        cut in 0usize..60,
    ) {
        let all_samples = samples();
        let mut log = Log::default();
        for (kind, a, b) in picks {
            let mut e = all_samples[kind].clone().to_body();
            // Vary the ids so events hit and miss each other.
            let text = serde_json::to_string(&e).unwrap()
                .replace("\"Q\"", &format!("\"Q{a}\""))
                .replace("\"d1\"", &format!("\"d{b}\""));
            e = serde_json::from_str(&text).unwrap();
            log.push(serde_json::from_value(e).unwrap());
        }
        let all = StackState::fold(&log.events);
        let cut = cut.min(log.events.len());
        let mut resumed = StackState::from_snapshot(&StackState::fold(&log.events[..cut]).to_snapshot()).unwrap();
        for e in &log.events[cut..] {
            resumed.apply(e);
        }
        prop_assert_eq!(resumed, all);
    }
}

#[test]
fn a_resource_that_comes_back_is_never_deleted_as_an_old_copy() {
    // X is replaced by R (X waits for deletion); then going back to the previous template
    // replaces R by X again: X is live, R waits for deletion.
    let mut log = Log::default();
    log.push(started("d1"))
        .push(Event::ResourceCreated {
            deploy_id: "d1".into(),
            resource: record("Q", "X", &[]),
            replaces: None,
            baseline: None,
        })
        .push(started("d2"))
        .push(Event::ResourceCreated {
            deploy_id: "d2".into(),
            resource: record("Q", "R", &[]),
            replaces: Some("X".into()),
            baseline: None,
        })
        .push(started("d3"))
        .push(Event::ResourceCreated {
            deploy_id: "d3".into(),
            resource: record("Q", "X", &[]),
            replaces: Some("R".into()),
            baseline: None,
        });
    let s = log.state();
    assert_eq!(s.resources["Q"].physical_id, "X");
    assert_eq!(s.predecessors.keys().collect::<Vec<_>>(), vec!["R"]);
    assert!(s.check_integrity().is_ok());

    // A replacement whose create answers with the same resource leaves nothing to delete.
    let mut log = Log::default();
    log.push(started("d1"))
        .push(Event::ResourceCreated {
            deploy_id: "d1".into(),
            resource: record("Q", "X", &[]),
            replaces: None,
            baseline: None,
        })
        .push(started("d2"))
        .push(Event::ResourceCreated {
            deploy_id: "d2".into(),
            resource: record("Q", "X", &[]),
            replaces: Some("X".into()),
            baseline: None,
        });
    assert!(log.state().predecessors.is_empty());
}

#[test]
fn operation_names_are_their_serialized_form() {
    for op in [
        Operation::Create,
        Operation::Update,
        Operation::Replace,
        Operation::Delete,
        Operation::Undo,
    ] {
        assert_eq!(serde_json::to_value(op).unwrap(), json!(op.as_str()));
    }
}

fn refused(cause: RefusalCause) -> Baseline {
    Baseline::Refused { cause }
}

fn observed(v: serde_json::Value) -> Baseline {
    Baseline::Recorded {
        observed: v.as_object().unwrap().clone(),
    }
}

fn updated(d: &str, r: ResourceRecord) -> Event {
    Event::ResourceUpdated {
        deploy_id: d.into(),
        resource: r,
        previous_properties: Default::default(),
        baseline: None,
    }
}

/// Seed 003's clearing rules: an in-place update clears `incomplete-resolution` and
/// keeps `unverifiable-parameter`; a replacement clears both; a baseline read never
/// replaces a refusal; a recorded baseline is obsolete after an update.
#[test]
fn refusals_clear_as_the_seed_says() {
    for (cause, kept_by_update) in [
        (RefusalCause::IncompleteResolution, false),
        (RefusalCause::UnverifiableParameter, true),
    ] {
        let mut log = Log::default();
        log.push(Event::ResourceImported {
            import_id: "i1".into(),
            resource: record("A", "a-1", &[]),
            baseline: Some(refused(cause)),
        })
        .push(Event::BaselineRecorded {
            logical_id: "A".into(),
            baseline: observed(json!({"QueueName": "a-1"})),
        });
        assert_eq!(
            log.state().resources["A"].refused(),
            Some(cause),
            "a read never clears it"
        );
        log.push(Event::BaselineAccepted {
            logical_id: "A".into(),
            observed: json!({"QueueName": "a-1"}).as_object().unwrap().clone(),
        });
        assert_eq!(
            log.state().resources["A"].refused(),
            Some(cause),
            "nor does --accept"
        );
        log.push(started("d1"))
            .push(updated("d1", record("A", "a-1", &[])));
        let after_update = log.state().resources["A"].refused();
        assert_eq!(after_update, kept_by_update.then_some(cause), "{cause:?}");
        log.push(Event::ResourceCreated {
            deploy_id: "d1".into(),
            resource: record("A", "a-2", &[]),
            replaces: Some("a-1".into()),
            baseline: None,
        });
        assert_eq!(
            log.state().resources["A"].refused(),
            None,
            "a replacement clears {cause:?}"
        );
    }
    let mut log = Log::default();
    log.push(started("d1"))
        .push(created("d1", record("A", "a-1", &[])))
        .push(Event::BaselineRecorded {
            logical_id: "A".into(),
            baseline: observed(json!({"QueueName": "a-1"})),
        })
        .push(updated("d1", record("A", "a-1", &[])));
    assert_eq!(
        log.state().resources["A"].baseline,
        None,
        "obsolete after the update"
    );
}
