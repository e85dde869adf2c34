//! The scan (every form, every place), the repairs it derives, and a scrub on an
//! in-memory store.

use serde_json::{Value, json};
use stackflow_core::dynref::DynamicReference;
use stackflow_core::intrinsics::StackOutputRef;
use stackflow_events::event::{Event, ResourceRecord, StoredEvent, current_version};
use stackflow_events::projection::StackState;
use stackflow_events::sqlite::SqliteStore;
use stackflow_events::{EventStore, NewEvent, Precondition, StreamId};
use stackflow_providers::lookups::{LookupError, Lookups};
use stackflow_providers::provider::BoxFuture;

use std::time::Duration;

use super::*;

/// A secret with a character JSON escapes.
const PLAIN: &str = "s3cr\"et-Pa55";
const REF: &str = "{{resolve:secretsmanager:db:SecretString:password}}";
const NOECHO: &str = "n0echo-value";

fn secrets() -> Vec<Secret> {
    vec![
        Secret::reference(REF, PLAIN),
        Secret::parameter("DbPassword", NOECHO),
    ]
}

/// Every form of every secret of [`secrets`].
fn needles() -> Vec<String> {
    let mut out = Vec::new();
    for p in [PLAIN, NOECHO] {
        for form in [Form::Raw, Form::Base64, Form::JsonEscaped] {
            out.push(form.encode(p));
        }
    }
    out
}

fn holds_any(text: &str) -> Option<String> {
    needles().into_iter().find(|n| text.contains(n.as_str()))
}

fn stored(seq: u64, event: Event) -> StoredEvent {
    StoredEvent {
        seq,
        key: format!("k{seq}"),
        at: "2026-01-01T00:00:00.000Z".into(),
        v: current_version(event.type_name()),
        event,
    }
}

fn record(id: &str, properties: Value, attributes: Value) -> ResourceRecord {
    serde_json::from_value(json!({
        "logical_id": id, "type": "AWS::RDS::DBInstance", "physical_id": format!("{id}-1"),
        "properties": properties, "attributes": attributes, "provider": "cloud-control",
    }))
    .unwrap()
}

/// A log as an older writer could have left it: the plaintext raw and nested in the
/// properties, base64 in an attribute, JSON-escaped in a string holding JSON, in an output
/// and in an error message.
fn leaky_log() -> Vec<StoredEvent> {
    let db = record(
        "Db",
        json!({
            "MasterUserPassword": PLAIN,
            "Tags": [{"Key": "conn", "Value": format!("pg://admin:{PLAIN}@db")}],
            "Name": "orders",
        }),
        json!({"Secret": Form::Base64.encode(PLAIN), "Endpoint": "db.local"}),
    );
    let policy = json!({"Password": PLAIN}).to_string();
    let fn_ = record(
        "Fn",
        json!({"Environment": {"Variables": {"CONFIG": policy}}}),
        json!({}),
    );
    vec![
        stored(
            1,
            Event::DeployStarted {
                deploy_id: "d1".into(),
                who: "old".into(),
                template_digest: "t".into(),
                parameters: [("DbPassword".to_string(), json!(NOECHO))].into(),
                no_rollback: false,
                stack_id: None,
            },
        ),
        stored(2, created(db)),
        stored(3, created(fn_)),
        stored(
            4,
            Event::DeployCompleted {
                deploy_id: "d1".into(),
                outputs: [("Conn".to_string(), json!(format!("pg://admin:{PLAIN}@db")))].into(),
                exports: Default::default(),
                imports: vec![],
            },
        ),
        stored(
            5,
            Event::DeployFailed {
                deploy_id: "d1".into(),
                error: stackflow_events::event::ErrorInfo {
                    name: "InvalidRequest".into(),
                    message: format!("bad password {NOECHO}"),
                },
                logical_id: Some("Db".into()),
            },
        ),
    ]
}

fn created(resource: ResourceRecord) -> Event {
    Event::ResourceCreated {
        deploy_id: "d1".into(),
        resource,
        replaces: None,
        baseline: None,
    }
}

fn at(findings: &[Finding], pointer: &str) -> Finding {
    findings
        .iter()
        .find(|f| f.pointer == pointer)
        .unwrap_or_else(|| panic!("no finding at {pointer}: {findings:#?}"))
        .clone()
}

#[test]
fn base64_is_the_standard_one() {
    let cases = [
        ("", ""),
        ("f", "Zg=="),
        ("fo", "Zm8="),
        ("foo", "Zm9v"),
        ("foob", "Zm9vYg=="),
        ("fooba", "Zm9vYmE="),
        ("foobar", "Zm9vYmFy"),
        ("ü?>", "w7w/Pg=="),
    ];
    for (text, b64) in cases {
        assert_eq!(Form::Base64.encode(text), b64, "{text:?}");
    }
    assert_eq!(Form::JsonEscaped.encode(PLAIN), "s3cr\\\"et-Pa55");
}

#[test]
fn every_form_is_found_in_event_bodies_and_named_without_its_value() {
    let findings = scan_events(&leaky_log(), &secrets());
    let raw = at(&findings, "/resource/properties/MasterUserPassword");
    assert_eq!(
        raw.place,
        Place::Event {
            seq: 2,
            kind: "ResourceCreated".into()
        }
    );
    assert_eq!(
        (raw.logical_id.as_deref(), raw.secret.as_str(), raw.form),
        (Some("Db"), REF, Form::Raw)
    );
    assert_eq!(
        at(&findings, "/resource/properties/Tags/0/Value").form,
        Form::Raw
    );
    assert_eq!(
        at(&findings, "/resource/attributes/Secret").form,
        Form::Base64
    );
    let escaped = at(
        &findings,
        "/resource/properties/Environment/Variables/CONFIG",
    );
    assert_eq!(
        (escaped.form, escaped.logical_id.as_deref()),
        (Form::JsonEscaped, Some("Fn"))
    );
    let output = at(&findings, "/outputs/Conn");
    assert_eq!(
        (output.logical_id.as_deref(), output.form),
        (None, Form::Raw)
    );
    let param = at(&findings, "/parameters/DbPassword");
    assert_eq!(param.secret, "parameter DbPassword");
    let error = at(&findings, "/error/message");
    assert_eq!(
        (error.secret.as_str(), error.logical_id.as_deref()),
        ("parameter DbPassword", Some("Db"))
    );
    assert_eq!(findings.len(), 7, "{findings:#?}");
    let shown = serde_json::to_string(&findings).unwrap();
    assert_eq!(holds_any(&shown), None, "{shown}");
    assert!(shown.contains(r#""in":"event""#), "{shown}");
}

#[test]
fn a_clean_log_has_no_findings() {
    let mut log = leaky_log();
    log.truncate(1);
    let Event::DeployStarted { parameters, .. } = &mut log[0].event else {
        unreachable!()
    };
    parameters.insert("DbPassword".into(), json!("****"));
    assert!(scan_events(&log, &secrets()).is_empty());
    assert!(scan_state(&StackState::fold(&log), &secrets()).is_empty());
}

#[test]
fn the_state_and_snapshots_are_scanned_with_their_owners() {
    let state = StackState::fold(&leaky_log());
    let findings = scan_state(&state, &secrets());
    let p = at(&findings, "/resources/Db/properties/MasterUserPassword");
    assert_eq!(
        (p.place.clone(), p.logical_id.as_deref()),
        (Place::State, Some("Db"))
    );
    assert_eq!(
        at(&findings, "/resources/Db/attributes/Secret").form,
        Form::Base64
    );
    assert_eq!(at(&findings, "/outputs/Conn").logical_id, None);
    assert_eq!(at(&findings, "/parameters/DbPassword").logical_id, None);
    at(&findings, "/last_deploy/error/message");
    let snapshot = scan_snapshot(5, &state.to_snapshot(), &secrets());
    assert_eq!(snapshot.len(), findings.len());
    assert_eq!(snapshot[0].place, Place::Snapshot { seq: 5 });
}

#[test]
fn a_key_that_spells_a_secret_is_found_and_never_shown() {
    let mut map = serde_json::Map::new();
    map.insert(PLAIN.to_string(), json!({"inner": PLAIN}));
    let log = vec![stored(
        1,
        created(record("Db", json!({ "Map": map }), json!({}))),
    )];
    let findings = scan_events(&log, &secrets());
    let key = at(&findings, "/resource/properties/Map");
    assert!(key.in_key);
    at(&findings, "/resource/properties/Map/***/inner");
    assert_eq!(holds_any(&serde_json::to_string(&findings).unwrap()), None);
    // A key cannot be renamed through a pointer, and a pointer through it would spell it:
    // the repair leaves both, the check reports them.
    let state = StackState::fold(&log);
    let mut repaired = log.clone();
    for (i, e) in repairs(&state, &secrets()).into_iter().enumerate() {
        assert_eq!(holds_any(&e.to_body().to_string()), None);
        repaired.push(stored(2 + i as u64, e));
    }
    let left = scan_state(&StackState::fold(&repaired), &secrets());
    assert_eq!(left.len(), 2, "{left:#?}");
    assert!(left.iter().all(|f| f.in_key || f.pointer.contains("/***/")));
    // A rewritten body renames it.
    let cleaned = cleaned_event(&log[0].event, &secrets()).unwrap().unwrap();
    assert_eq!(holds_any(&cleaned.to_body().to_string()), None);
}

#[test]
fn clean_text_puts_each_form_of_the_replacement_in_place() {
    let s = secrets();
    assert_eq!(clean_text(&format!("x{PLAIN}y"), &s), format!("x{REF}y"));
    assert_eq!(
        clean_text(&Form::Base64.encode(PLAIN), &s),
        Form::Base64.encode(REF)
    );
    assert_eq!(
        clean_text(&json!({"p": PLAIN}).to_string(), &s),
        json!({"p": REF}).to_string()
    );
    assert_eq!(clean_text(&format!("pw={NOECHO}"), &s), "pw=****");
    assert_eq!(clean_text("nothing here", &s), "nothing here");
    // A replacement that spells the secret would show it again: the text is masked whole.
    let odd = [Secret::new("odd", "resolve", "{{resolve:ssm-secure:x}}")];
    assert_eq!(clean_text("a resolve b", &odd), "***");
    assert_eq!(
        redact(&format!("got {PLAIN} and {NOECHO}"), &s),
        "got *** and ***"
    );
}

#[test]
fn repairs_leave_the_state_without_plaintext_and_hold_none_themselves() {
    let log = leaky_log();
    let state = StackState::fold(&log);
    let events = repairs(&state, &secrets());
    let owners: Vec<String> = events
        .iter()
        .filter_map(|e| e.logical_id().map(str::to_string))
        .collect();
    assert_eq!(
        owners,
        vec!["Db", "Fn", ""],
        "one per resource, then the stack"
    );
    for e in &events {
        assert_eq!(holds_any(&e.to_body().to_string()), None, "{e:?}");
    }
    let mut repaired = log.clone();
    for (i, e) in events.into_iter().enumerate() {
        repaired.push(stored(6 + i as u64, e));
    }
    let after = StackState::fold(&repaired);
    assert!(scan_state(&after, &secrets()).is_empty());
    let db = &after.resources["Db"];
    assert_eq!(db.properties["MasterUserPassword"], json!(REF));
    assert_eq!(db.properties["Name"], json!("orders"));
    assert_eq!(db.attributes["Secret"], json!(Form::Base64.encode(REF)));
    assert_eq!(after.outputs["Conn"], json!(format!("pg://admin:{REF}@db")));
    assert_eq!(after.parameters["DbPassword"], json!("****"));
    let config = after.resources["Fn"].properties["Environment"]["Variables"]["CONFIG"]
        .as_str()
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(config).unwrap(),
        json!({"Password": REF})
    );
}

#[test]
fn cleaned_events_keep_their_type_and_lose_the_plaintext() {
    for e in leaky_log() {
        let cleaned = cleaned_event(&e.event, &secrets()).unwrap().expect("leaky");
        assert_eq!(cleaned.type_name(), e.event.type_name());
        assert_eq!(holds_any(&cleaned.to_body().to_string()), None);
        assert_eq!(cleaned_event(&cleaned, &secrets()).unwrap(), None);
    }
}

/// Lookups that know one secret and fail another.
struct FakeLookups;

impl Lookups for FakeLookups {
    fn availability_zones<'a>(
        &'a self,
        _: &'a str,
    ) -> BoxFuture<'a, Result<Vec<String>, LookupError>> {
        Box::pin(async { Ok(vec![]) })
    }
    fn cloudformation_export<'a>(
        &'a self,
        _: &'a str,
    ) -> BoxFuture<'a, Result<Option<Value>, LookupError>> {
        Box::pin(async { Ok(None) })
    }
    fn cloudformation_output<'a>(
        &'a self,
        _: &'a StackOutputRef,
    ) -> BoxFuture<'a, Result<Option<Value>, LookupError>> {
        Box::pin(async { Ok(None) })
    }
    fn ssm_parameter<'a>(
        &'a self,
        _: &'a str,
    ) -> BoxFuture<'a, Result<Option<Value>, LookupError>> {
        Box::pin(async { Ok(None) })
    }
    fn dynamic_reference<'a>(
        &'a self,
        reference: &'a DynamicReference,
    ) -> BoxFuture<'a, Result<String, LookupError>> {
        let answer = match reference {
            DynamicReference::SecretsManager { secret_id, .. } if secret_id == "db" => {
                Ok(PLAIN.to_string())
            }
            DynamicReference::SsmSecure { name, .. } if name == "/short" => Ok("abc".to_string()),
            _ => Err(LookupError {
                what: "secret gone".into(),
                message: "ResourceNotFoundException".into(),
            }),
        };
        Box::pin(async move { answer })
    }
}

#[tokio::test]
async fn secrets_are_collected_from_the_template_and_the_log() {
    let template = json!({"Resources": {"Db": {"Properties": {
        "Password": REF,
        "Name": "{{resolve:ssm:/app/name}}",
        "Short": "x{{resolve:ssm-secure:/short}}",
    }}}});
    let log = vec![stored(
        1,
        created(record(
            "Old",
            json!({"P": "{{resolve:secretsmanager:gone}}", "Q": "{{resolve:nope}}"}),
            json!({}),
        )),
    )];
    let params = vec![("DbPassword".to_string(), NOECHO.to_string())];
    let found = collect_secrets(&FakeLookups, Some(&template), &log, &params).await;
    let labels: Vec<&str> = found.searched.iter().map(Secret::label).collect();
    assert_eq!(labels, vec![REF, "parameter DbPassword"]);
    let skipped: Vec<(&str, &str)> = found
        .skipped
        .iter()
        .map(|s| (s.secret.as_str(), s.reason.as_str()))
        .collect();
    assert_eq!(skipped.len(), 4, "{skipped:#?}");
    assert!(
        skipped
            .iter()
            .any(|(l, r)| *l == "{{resolve:ssm:/app/name}}" && r.contains("not a secret"))
    );
    assert!(
        skipped
            .iter()
            .any(|(l, r)| *l == "{{resolve:ssm-secure:/short}}" && r.contains("shorter"))
    );
    assert!(skipped.iter().any(
        |(l, r)| *l == "{{resolve:secretsmanager:gone}}" && r.contains("could not be resolved")
    ));
    assert!(skipped.iter().any(|(_, r)| r.starts_with("malformed")));
    assert_eq!(holds_any(&format!("{found:?}")), None);
}

/// An engine on an in-memory store holding the leaky log of stack `app`, taking locks
/// leased for `lease` (none when `None`).
async fn engine_with_leaky_log(lease: Option<Duration>) -> Arc<Engine<SqliteStore>> {
    let store = SqliteStore::open_in_memory().unwrap();
    let stream = StreamId::new("us-east-1", "app");
    for e in leaky_log() {
        let new = NewEvent::new(e.key.clone(), e.event);
        store
            .append(&stream, &new, &Precondition::None)
            .await
            .unwrap();
    }
    // No provider is ever called: a scrub reads and appends.
    let config = aws_types::SdkConfig::builder()
        .behavior_version(aws_config::BehaviorVersion::latest())
        .region(aws_types::region::Region::new("us-east-1"))
        .build();
    Arc::new(Engine {
        store: Arc::new(store),
        providers: Arc::new(stackflow_providers::router::Providers::from_config(
            &config, None,
        )),
        lookups: Arc::new(FakeLookups),
        region: "us-east-1".into(),
        who: "tester".into(),
        cloudformation_fallback: false,
        progress: Arc::new(crate::progress::Silent),
        stale: crate::engine::never_stale(),
        digest_key: None,
        lease,
    })
}

#[tokio::test]
async fn a_scrub_reports_then_repairs_under_the_lock() {
    let engine = engine_with_leaky_log(None).await;
    let (store, stream) = (engine.store.as_ref(), engine.stream("app"));
    let options = ScrubOptions {
        dry_run: true,
        rewrite: false,
    };
    let report = scrub(&engine, "app", &secrets(), &options).await.unwrap();
    assert!(!report.clean());
    assert_eq!(report.unrepaired, vec![1, 2, 3, 4, 5]);
    assert_eq!(
        store.read(&stream, 0).await.unwrap().len(),
        5,
        "a dry run appends nothing"
    );

    let options = ScrubOptions {
        dry_run: false,
        ..options
    };
    let report = scrub(&engine, "app", &secrets(), &options).await.unwrap();
    assert_eq!(report.scrubbed, vec![7, 8, 9]);
    assert!(report.remaining.is_empty());
    assert_eq!(report.unrepaired, vec![1, 2, 3, 4, 5], "the bodies stay");
    let events = store.read(&stream, 0).await.unwrap();
    let kinds: Vec<&str> = events[5..].iter().map(|e| e.event.type_name()).collect();
    assert_eq!(
        kinds,
        [
            "LockTaken",
            "Scrubbed",
            "Scrubbed",
            "Scrubbed",
            "LockReleased"
        ]
    );
    assert!(store.lock_holder(&stream).await.unwrap().is_none());
    for e in &events[5..] {
        assert_eq!(holds_any(&e.event.to_body().to_string()), None);
    }
    let state = stackflow_events::load_state(store, &stream).await.unwrap();
    assert!(scan_state(&state, &secrets()).is_empty());

    // Again, with the rewrite: nothing of the secrets is left in any body.
    let options = ScrubOptions {
        rewrite: true,
        ..options
    };
    let report = scrub(&engine, "app", &secrets(), &options).await.unwrap();
    assert_eq!(report.unrepaired, Vec::<u64>::new());
    assert_eq!(report.rewritten.as_ref().unwrap().seqs, vec![1, 2, 3, 4, 5]);
    for e in store.read(&stream, 0).await.unwrap() {
        assert_eq!(holds_any(&e.event.to_body().to_string()), None, "{}", e.seq);
    }
    let report = scrub(&engine, "app", &secrets(), &options).await.unwrap();
    assert!(report.clean(), "{report:#?}");
}

/// A scrub is a run like any other: a lock whose lease ended is broken (said in the log),
/// and the scrub's own lock is leased and released.
#[tokio::test]
async fn a_scrub_breaks_a_lock_whose_lease_ended_and_leases_its_own() {
    let engine = engine_with_leaky_log(Some(Duration::from_secs(60))).await;
    let (store, stream) = (engine.store.as_ref(), engine.stream("app"));
    let gone = stackflow_events::event::Holder {
        deploy_id: "d-gone".into(),
        who: "a deploy that died".into(),
        since: "2020-01-01T00:00:00Z".into(),
        operation: "deploy".into(),
        expires: Some("2020-01-01T00:02:00Z".into()),
        fenced: None,
    };
    let taken = NewEvent::new(
        "d-gone/locked".to_string(),
        Event::LockTaken {
            holder: gone.clone(),
        },
    );
    store
        .append(&stream, &taken, &Precondition::TakeLock(gone))
        .await
        .unwrap();
    let options = ScrubOptions {
        dry_run: false,
        rewrite: false,
    };
    let report = scrub(&engine, "app", &secrets(), &options).await.unwrap();
    assert!(report.remaining.is_empty(), "{report:#?}");
    let events = store.read(&stream, 0).await.unwrap();
    let kinds: Vec<&str> = events[6..].iter().map(|e| e.event.type_name()).collect();
    assert_eq!(kinds[..2], ["LockBroken", "LockTaken"], "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"LockReleased"));
    let Event::LockTaken { holder } = &events[7].event else {
        panic!("{:?}", events[7].event);
    };
    assert_eq!(
        (holder.operation.as_str(), holder.who.as_str()),
        ("scrub", "tester")
    );
    assert!(holder.expires.is_some(), "the scrub's lock is leased");
    assert!(store.lock_holder(&stream).await.unwrap().is_none());
}
