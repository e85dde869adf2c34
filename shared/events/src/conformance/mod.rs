//! The conformance suite every [`EventStore`] passes.
//!
//! Each function checks one part of the store contract against a live store and panics
//! with a message naming the violation; they are meant to be called from `#[tokio::test]`s
//! (prefer the multi-threaded runtime, so that concurrent appenders really run at once).
//! Every stream a function touches is named after `prefix`, so that runs sharing one store
//! (a DynamoDB table, say) never see each other's events: pass a prefix unique to the run.

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, SystemTime};

use indexmap::IndexMap;
use serde_json::{Map, Value, json};

use crate::event::{
    Baseline, Event, Holder, NewEvent, ProviderKind, ResourceRecord, StoredEvent, current_version,
    now,
};
use crate::store::{Appended, EventStore, Precondition, StoreError, StoreResult, StreamId};

mod appends;
mod locks;
mod rewrite;
mod streams;

pub use appends::{
    appends_in_order_and_reads_back, concurrent_appenders_lose_nothing,
    conflicting_append_is_detected, large_event_round_trips, many_events_read_back_across_pages,
    retried_append_is_a_no_op,
};
pub use locks::{
    broken_lock, fenced_lock_refuses_new_actions_only, lease_is_renewed_by_its_holder_only,
    lock_is_exclusive, ordered_appends_end_a_run,
};
pub use rewrite::{PLAINTEXT as REWRITTEN_PLAINTEXT, rewrite_replaces_bodies_in_place};
pub use streams::{snapshots, streams_are_independent_and_listed};

/// The region of the streams the suite writes (one test also uses [`OTHER_REGION`]).
pub const REGION: &str = "us-east-1";

/// A second region, to check that one stack in two regions makes two streams.
pub const OTHER_REGION: &str = "eu-west-1";

/// How many concurrent appenders [`run_all`] uses.
pub const DEFAULT_APPENDERS: usize = 50;

/// Runs every check of the suite, one after the other.
pub async fn run_all<S: EventStore + 'static>(store: Arc<S>, prefix: &str) {
    appends_in_order_and_reads_back(&*store, prefix).await;
    retried_append_is_a_no_op(&*store, prefix).await;
    conflicting_append_is_detected(&*store, prefix).await;
    concurrent_appenders_lose_nothing(Arc::clone(&store), prefix, DEFAULT_APPENDERS).await;
    lock_is_exclusive(&*store, prefix).await;
    fenced_lock_refuses_new_actions_only(&*store, prefix).await;
    broken_lock(&*store, prefix).await;
    ordered_appends_end_a_run(&*store, prefix).await;
    lease_is_renewed_by_its_holder_only(&*store, prefix).await;
    streams_are_independent_and_listed(&*store, prefix).await;
    snapshots(&*store, prefix).await;
    large_event_round_trips(&*store, prefix).await;
    many_events_read_back_across_pages(&*store, prefix).await;
    // Every store here can rewrite; one that cannot leaves this check out.
    rewrite_replaces_bodies_in_place(&*store, prefix).await;
}

// ----- helpers -----

/// The stream `<prefix>-<name>` in [`REGION`].
fn stream(prefix: &str, name: &str) -> StreamId {
    StreamId::new(REGION, format!("{prefix}-{name}"))
}

/// A lock holder for `deploy_id`.
fn holder(deploy_id: &str) -> Holder {
    Holder {
        deploy_id: deploy_id.to_string(),
        who: "tester@conformance".to_string(),
        since: "2024-05-01T12:00:00.000Z".to_string(),
        operation: "deploy".to_string(),
        expires: None,
        fenced: None,
    }
}

fn deploy_started(deploy_id: &str) -> Event {
    Event::DeployStarted {
        deploy_id: deploy_id.to_string(),
        who: "tester@conformance".to_string(),
        template_digest: "0123456789abcdef".to_string(),
        parameters: IndexMap::from([
            ("Env".to_string(), json!("test")),
            ("Password".to_string(), json!("****")),
        ]),
        no_rollback: false,
        stack_id: None,
    }
}

fn resource_created(deploy_id: &str, logical_id: &str, physical_id: &str) -> Event {
    resource_created_with(deploy_id, logical_id, physical_id, 0)
}

/// A `ResourceCreated` whose properties hold a string of `padding` bytes.
fn resource_created_with(
    deploy_id: &str,
    logical_id: &str,
    physical_id: &str,
    padding: usize,
) -> Event {
    let mut properties = Map::new();
    properties.insert("Name".into(), json!(physical_id));
    properties.insert(
        "Tags".into(),
        json!([{"Key": "team", "Value": "ünïcødé ✓"}]),
    );
    if padding > 0 {
        // Varied text, so that nothing on the way can shrink it much.
        let text: String = (0..padding)
            .map(|i| char::from(b'a' + ((i * 7 + i / 26) % 26) as u8))
            .collect();
        properties.insert("Blob".into(), Value::String(text));
    }
    let mut observed = properties.clone();
    observed.insert("Arn".into(), json!(format!("arn:aws:test:::{physical_id}")));
    Event::ResourceCreated {
        deploy_id: deploy_id.to_string(),
        resource: ResourceRecord {
            logical_id: logical_id.to_string(),
            resource_type: "AWS::S3::Bucket".to_string(),
            physical_id: physical_id.to_string(),
            properties,
            attributes: IndexMap::from([(
                "Arn".to_string(),
                json!(format!("arn:aws:s3:::{physical_id}")),
            )]),
            dependencies: vec!["Other".to_string()],
            provider: ProviderKind::CloudControl,
            deletion_policy: None,
            update_replace_policy: None,
            secret_digest: None,
        },
        replaces: None,
        baseline: Some(if padding > 0 {
            Baseline::Refused {
                cause: crate::event::RefusalCause::IncompleteResolution,
            }
        } else {
            Baseline::Recorded { observed }
        }),
    }
}

fn physical_id(event: &Event) -> &str {
    match event {
        Event::ResourceCreated { resource, .. } => &resource.physical_id,
        other => panic!("expected ResourceCreated, got {other:?}"),
    }
}

fn keys(events: &[StoredEvent]) -> Vec<String> {
    events.iter().map(|e| e.key.clone()).collect()
}

async fn count<S: EventStore>(store: &S, stream: &StreamId) -> usize {
    ok(store.read(stream, 0).await, "read").len()
}

/// The value, or a panic naming what failed.
fn ok<T>(result: StoreResult<T>, what: &str) -> T {
    result.unwrap_or_else(|e| panic!("{what}: unexpected store error: {e} ({e:?})"))
}

/// Checks that `at` is an RFC 3339 UTC time around the append.
fn check_time(at: &str, before: SystemTime, after: SystemTime, key: &str) {
    let parsed = humantime::parse_rfc3339(at)
        .unwrap_or_else(|e| panic!("time `{at}` of event {key} is not RFC 3339 UTC: {e}"));
    // Some slack: the store's clock (an emulator's, say) need not be this process's.
    let slack = Duration::from_secs(300);
    assert!(
        parsed + slack >= before && parsed <= after + slack,
        "time `{at}` of event {key} is not around the append ({})",
        now()
    );
}

/// Runs futures concurrently on the current task, returning their outputs in order.
async fn join_all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (future, output) in futures.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(cx) {
                    Poll::Ready(value) => *output = Some(value),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    outputs
        .into_iter()
        .map(|o| o.expect("every future completed"))
        .collect()
}
