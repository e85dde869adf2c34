//! `scrub` on the embedded store: a log an older writer left with secrets in plaintext
//! (written straight into a SQLite file), found, repaired in the state, then rewritten so
//! that no byte of the file keeps them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use stackflow_core::dynref::DynamicReference;
use stackflow_core::intrinsics::StackOutputRef;
use stackflow_engine::Engine;
use stackflow_engine::scrub::{self, Form, ScrubOptions, Secret, collect_secrets};
use stackflow_events::event::{ErrorInfo, Event, ResourceRecord};
use stackflow_events::sqlite::SqliteStore;
use stackflow_events::{EventStore, NewEvent, Precondition, StreamId, load_state};
use stackflow_providers::lookups::{LookupError, Lookups};
use stackflow_providers::provider::BoxFuture;

const REF: &str = "{{resolve:ssm-secure:/app/db-password}}";
/// What the reference resolves to now (with a character JSON escapes).
const VALUE: &str = "db-Pa55\"w0rd-4e1b";
const NOECHO: &str = "api-key-9c7d2f";

/// Lookups that answer the one reference.
struct OneSecret;

impl Lookups for OneSecret {
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
            DynamicReference::SsmSecure { name, .. } if name == "/app/db-password" => {
                Ok(VALUE.to_string())
            }
            other => Err(LookupError {
                what: format!("{other:?}"),
                message: "unknown".into(),
            }),
        };
        Box::pin(async move { answer })
    }
}

/// Every form either secret could be stored in (in a file, the raw form is spelt
/// JSON-escaped).
fn needles() -> Vec<String> {
    let mut out = vec!["db-Pa55".to_string()];
    for v in [VALUE, NOECHO] {
        for form in [Form::Raw, Form::Base64, Form::JsonEscaped] {
            out.push(form.encode(v));
        }
    }
    out
}

fn leak(text: &str) -> Option<String> {
    needles().into_iter().find(|n| text.contains(n.as_str()))
}

fn leak_in_bytes(bytes: &[u8]) -> Option<String> {
    needles()
        .into_iter()
        .find(|n| bytes.windows(n.len()).any(|w| w == n.as_bytes()))
}

fn temp_dir() -> PathBuf {
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("engine-scrub-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn file_bytes(dir: &Path) -> Vec<u8> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        all.extend(std::fs::read(entry.unwrap().path()).unwrap());
    }
    all
}

/// The events an older stackflow could have written: the resolved value in the properties
/// it sent and recorded (raw, and base64 in user data), in an attribute, in an output; the
/// `NoEcho` value in the parameters; both in an error message quoting JSON.
fn old_writer_events() -> Vec<Event> {
    let db: ResourceRecord = serde_json::from_value(json!({
        "logical_id": "Db",
        "type": "AWS::RDS::DBInstance",
        "physical_id": "app-db",
        "properties": {
            "MasterUserPassword": VALUE,
            "UserData": Form::Base64.encode(VALUE),
            "Engine": "postgres",
        },
        "attributes": {"ConnectionString": format!("postgres://admin:{VALUE}@app-db:5432")},
        "provider": "cloud-control",
    }))
    .unwrap();
    vec![
        Event::DeployStarted {
            deploy_id: "d1".into(),
            who: "old@writer".into(),
            template_digest: "t".into(),
            parameters: [
                ("ApiKey".to_string(), json!(NOECHO)),
                ("Env".to_string(), json!("prod")),
            ]
            .into(),
            no_rollback: false,
            stack_id: None,
        },
        Event::ResourceCreated {
            deploy_id: "d1".into(),
            resource: db,
            replaces: None,
            baseline: None,
        },
        Event::DeployCompleted {
            deploy_id: "d1".into(),
            outputs: [(
                "Connection".to_string(),
                json!(format!("postgres://admin:{VALUE}@app-db:5432")),
            )]
            .into(),
            exports: Default::default(),
            imports: vec![],
        },
        Event::ResourceFailed {
            deploy_id: "d2".into(),
            logical_id: "Api".into(),
            operation: stackflow_events::event::Operation::Update,
            error: ErrorInfo {
                name: "InvalidRequest".into(),
                message: format!(
                    "{} is not valid",
                    json!({"ApiKey": NOECHO, "Password": VALUE})
                ),
            },
        },
    ]
}

/// A SQLite store in `dir` with the old writer's events, and a snapshot of their state.
async fn leaky_store(dir: &Path, stream: &StreamId) -> SqliteStore {
    let store = SqliteStore::open(dir.join("events.db")).unwrap();
    for (i, e) in old_writer_events().into_iter().enumerate() {
        let new = NewEvent::new(format!("old/{i}"), e);
        store
            .append(stream, &new, &Precondition::None)
            .await
            .unwrap();
    }
    let leaky_state = load_state(&store, stream).await.unwrap();
    store
        .put_snapshot(stream, 4, &leaky_state.to_snapshot())
        .await
        .unwrap();
    assert!(leak_in_bytes(&file_bytes(dir)).is_some());
    store
}

/// The engine a scrub runs on, on `store` (its `who` names the run in the log). No
/// provider is ever called: a scrub reads and appends.
fn engine_on(store: SqliteStore) -> Arc<Engine<SqliteStore>> {
    let config = aws_types::SdkConfig::builder()
        .behavior_version(aws_config::BehaviorVersion::latest())
        .region(aws_types::region::Region::new("us-east-1"))
        .build();
    Arc::new(Engine {
        store: Arc::new(store),
        providers: Arc::new(stackflow_providers::router::Providers::from_config(
            &config, None,
        )),
        lookups: Arc::new(OneSecret),
        region: "us-east-1".into(),
        who: "tester@host".into(),
        cloudformation_fallback: false,
        progress: Arc::new(stackflow_engine::progress::Silent),
        stale: stackflow_engine::engine::never_stale(),
        digest_key: None,
        lease: Some(std::time::Duration::from_secs(60)),
    })
}

/// A dry run finds every place (in every form, in the snapshot too) and appends nothing.
async fn dry_run(engine: &Arc<Engine<SqliteStore>>, stream: &StreamId, secrets: &[Secret]) {
    let store = engine.store.as_ref();
    let options = ScrubOptions {
        dry_run: true,
        rewrite: false,
    };
    let found = scrub::scrub(engine, "app", secrets, &options)
        .await
        .unwrap();
    assert_eq!(found.unrepaired, vec![1, 2, 3, 4]);
    assert!(found.findings.iter().any(|f| f.form == Form::Base64));
    assert!(found.findings.iter().any(|f| f.form == Form::JsonEscaped));
    assert!(
        found
            .findings
            .iter()
            .any(|f| matches!(f.place, scrub::Place::Snapshot { seq: 4 }))
    );
    assert_eq!(leak(&serde_json::to_string(&found).unwrap()), None);
    assert_eq!(store.read(stream, 0).await.unwrap().len(), 4);
}

/// The repair: the state holds the reference text and masks; the bodies stay.
async fn repair(engine: &Arc<Engine<SqliteStore>>, stream: &StreamId, secrets: &[Secret]) {
    let store = engine.store.as_ref();
    let options = ScrubOptions {
        dry_run: false,
        rewrite: false,
    };
    let repaired = scrub::scrub(engine, "app", secrets, &options)
        .await
        .unwrap();
    assert_eq!(repaired.unrepaired, vec![1, 2, 3, 4]);
    assert!(repaired.remaining.is_empty(), "{:#?}", repaired.remaining);
    assert!(
        repaired.snapshot.is_some(),
        "the leaky snapshot is superseded"
    );
    let state = load_state(store, stream).await.unwrap();
    assert_eq!(leak(&state.to_snapshot().to_string()), None);
    let db = &state.resources["Db"];
    assert_eq!(db.properties["MasterUserPassword"], json!(REF));
    assert_eq!(db.properties["UserData"], json!(Form::Base64.encode(REF)));
    assert_eq!(
        state.outputs["Connection"],
        json!(format!("postgres://admin:{REF}@app-db:5432"))
    );
    assert_eq!(state.parameters["ApiKey"], json!("****"));
    assert_eq!(state.parameters["Env"], json!("prod"));
    let (_, snapshot) = store.latest_snapshot(stream).await.unwrap().unwrap();
    assert_eq!(leak(&snapshot.to_string()), None);
    let all = store.read(stream, 0).await.unwrap();
    for e in &all[4..] {
        assert_eq!(
            leak(&e.event.to_body().to_string()),
            None,
            "event {}",
            e.seq
        );
    }
}

/// The rewrite: nothing of either secret is left in any byte of the files.
async fn rewrite(
    dir: &Path,
    engine: &Arc<Engine<SqliteStore>>,
    stream: &StreamId,
    secrets: &[Secret],
) {
    let store = engine.store.as_ref();
    let options = ScrubOptions {
        dry_run: false,
        rewrite: true,
    };
    let rewritten = scrub::scrub(engine, "app", secrets, &options)
        .await
        .unwrap();
    let summary = rewritten.rewritten.clone().expect("a rewrite");
    assert_eq!(summary.seqs, vec![1, 2, 3, 4]);
    assert!(summary.residue.is_empty(), "{:?}", summary.residue);
    assert!(rewritten.unrepaired.is_empty());
    assert_eq!(leak_in_bytes(&file_bytes(dir)), None);
    let record = store.read(stream, summary.record - 1).await.unwrap();
    assert!(matches!(
        &record[0].event,
        Event::EventsRewritten { seqs, .. } if *seqs == vec![1, 2, 3, 4]
    ));
    let state = load_state(store, stream).await.unwrap();
    assert_eq!(
        state.resources["Db"].properties["MasterUserPassword"],
        json!(REF)
    );
    assert!(state.lock.is_none());
    let again = scrub::scrub(engine, "app", secrets, &options)
        .await
        .unwrap();
    assert!(again.clean(), "{again:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrub_repairs_the_state_then_rewrites_every_stored_byte() {
    let dir = temp_dir();
    let stream = StreamId::new("us-east-1", "app");
    let store = leaky_store(&dir, &stream).await;

    // The template spells the reference; the NoEcho value is given again.
    let template = json!({"Resources": {"Db": {"Properties": {"MasterUserPassword": REF}}}});
    let events = store.read(&stream, 0).await.unwrap();
    let given = vec![("ApiKey".to_string(), NOECHO.to_string())];
    let secrets = collect_secrets(&OneSecret, Some(&template), &events, &given).await;
    assert!(secrets.skipped.is_empty(), "{:?}", secrets.skipped);
    assert_eq!(secrets.searched.len(), 2);

    let engine = engine_on(store);
    dry_run(&engine, &stream, &secrets.searched).await;
    repair(&engine, &stream, &secrets.searched).await;
    rewrite(&dir, &engine, &stream, &secrets.searched).await;
    drop(engine);
    let _ = std::fs::remove_dir_all(&dir);
}
