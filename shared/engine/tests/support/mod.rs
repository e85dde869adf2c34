//! What the lifecycle tests run the engine against: a fake cloud (a [`Provider`] that
//! keeps a world of resources in memory and writes down every call), fake lookups, an
//! event store that can be told to fail every append after the N-th (a crash), and the
//! one function that builds an [`Engine`].

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use indexmap::IndexMap;
use serde_json::Value;
use stackflow_core::dynref::DynamicReference;
use stackflow_core::intrinsics::{Pseudo, StackOutputRef, bind_parameters};
use stackflow_core::template::{NestedTemplate, Template};
use stackflow_engine::engine::{DeployOptions, Engine};
use stackflow_engine::lookups::{DeployedParameters, LookupError, Lookups};
use stackflow_engine::progress::{Progress, ProgressEvent};
use stackflow_engine::stack::StackInput;
use stackflow_events::event::ProviderKind;
use stackflow_events::event::{Holder, NewEvent, StoredEvent};
use stackflow_events::projection::StackState;
use stackflow_events::sqlite::SqliteStore;
use stackflow_events::{Appended, EventStore, Precondition, StoreError, StoreResult, StreamId};
use stackflow_providers::ProviderError;
use stackflow_providers::provider::{
    Attributes, BoxFuture, Created, CurrentState, Deleted, Imported, Properties, Provider,
    ResourceRequest, Updated,
};
use stackflow_providers::router::{RouteError, Routed, Router};
use tokio::sync::{Semaphore, watch};

/// The region every test deploys to.
pub const REGION: &str = "us-east-1";

// ---------------------------------------------------------------------------------------
// The fake cloud
// ---------------------------------------------------------------------------------------

mod cfn;
mod cloud;
pub mod lifecycle;
#[allow(unused_imports)]
pub use cfn::{CfnInner, FakeCfn, STACK_TYPE};
pub use cloud::*;

// ---------------------------------------------------------------------------------------

/// Lookups with fixed answers: the zones `<region>a`, `<region>b`; the exports, outputs,
/// SSM parameters and dynamic references put in the maps (anything else: not found).
#[derive(Debug, Default, Clone)]
pub struct FakeLookups {
    /// CloudFormation exports by name.
    pub exports: BTreeMap<String, Value>,
    /// SSM parameters by name.
    pub ssm: BTreeMap<String, Value>,
    /// Dynamic references by their `{{resolve:...}}` text.
    pub dynamic: BTreeMap<String, String>,
    /// Deployed parameters of CloudFormation stacks, by stack name; `Err` text: the
    /// lookup fails (no permission).
    pub deployed: BTreeMap<String, Result<Vec<(String, String)>, String>>,
}

impl Lookups for FakeLookups {
    fn availability_zones<'a>(
        &'a self,
        region: &'a str,
    ) -> BoxFuture<'a, Result<Vec<String>, LookupError>> {
        Box::pin(async move { Ok(vec![format!("{region}a"), format!("{region}b")]) })
    }

    fn cloudformation_export<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Value>, LookupError>> {
        Box::pin(async move { Ok(self.exports.get(name).cloned()) })
    }

    fn cloudformation_output<'a>(
        &'a self,
        _: &'a StackOutputRef,
    ) -> BoxFuture<'a, Result<Option<Value>, LookupError>> {
        Box::pin(async { Ok(None) })
    }

    fn ssm_parameter<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Value>, LookupError>> {
        Box::pin(async move { Ok(self.ssm.get(name).cloned()) })
    }

    fn dynamic_reference<'a>(
        &'a self,
        reference: &'a DynamicReference,
    ) -> BoxFuture<'a, Result<String, LookupError>> {
        Box::pin(async move {
            self.dynamic
                .iter()
                .find(|(text, _)| DynamicReference::parse(text).ok().as_ref() == Some(reference))
                .map(|(_, v)| v.clone())
                .ok_or_else(|| LookupError {
                    what: format!("dynamic reference to {}", reference.service()),
                    message: "not in the fake lookups".into(),
                })
        })
    }

    fn deployed_parameters<'a>(
        &'a self,
        stack_name: &'a str,
    ) -> BoxFuture<'a, Result<Option<DeployedParameters>, LookupError>> {
        Box::pin(async move {
            match self.deployed.get(stack_name) {
                None => Ok(None),
                Some(Ok(p)) => Ok(Some(p.clone())),
                Some(Err(m)) => Err(LookupError {
                    what: format!("stack {stack_name}"),
                    message: m.clone(),
                }),
            }
        })
    }
}

// ---------------------------------------------------------------------------------------
// A store that crashes on demand
// ---------------------------------------------------------------------------------------

/// An event store over SQLite in memory that counts appends and, once told, fails every
/// append after the N-th from then on, as a process killed at that point would leave the
/// log. Everything else passes through.
#[derive(Debug)]
pub struct FaultStore {
    inner: SqliteStore,
    appends: AtomicU64,
    /// Appends with a count at or past this fail.
    limit: AtomicU64,
    /// Only the append at `limit` fails (a transient fault), not every one after it.
    once: AtomicBool,
    /// Milliseconds each append takes (a store far away).
    delay_ms: AtomicU64,
    /// Events returned by reads of a stream, so far.
    events_read: AtomicU64,
}

impl FaultStore {
    /// An empty store that fails nothing.
    pub fn new() -> FaultStore {
        FaultStore {
            inner: SqliteStore::open_in_memory().expect("an in-memory store"),
            appends: AtomicU64::new(0),
            limit: AtomicU64::new(u64::MAX),
            once: AtomicBool::new(false),
            delay_ms: AtomicU64::new(0),
            events_read: AtomicU64::new(0),
        }
    }

    /// How many events reads of a stream returned so far.
    pub fn events_read(&self) -> u64 {
        self.events_read.load(Ordering::SeqCst)
    }

    /// Each append from now on takes `ms` milliseconds before it is stored.
    pub fn slow_appends(&self, ms: u64) {
        self.delay_ms.store(ms, Ordering::SeqCst);
    }

    /// How many appends were asked for so far (failed ones included).
    pub fn appends(&self) -> u64 {
        self.appends.load(Ordering::SeqCst)
    }

    /// The next `n` appends go through, every one after them fails.
    pub fn fail_after(&self, n: u64) {
        self.limit
            .store(self.appends().saturating_add(n), Ordering::SeqCst);
    }

    /// The next `n` appends go through, the one after them fails, and the rest go
    /// through again (a transient fault).
    pub fn fail_once_after(&self, n: u64) {
        self.once.store(true, Ordering::SeqCst);
        self.fail_after(n);
    }

    /// Appends go through again.
    pub fn heal(&self) {
        self.limit.store(u64::MAX, Ordering::SeqCst);
        self.once.store(false, Ordering::SeqCst);
    }
}

impl EventStore for FaultStore {
    async fn append(
        &self,
        stream: &StreamId,
        event: &NewEvent,
        pre: &Precondition,
    ) -> StoreResult<Appended> {
        let n = self.appends.fetch_add(1, Ordering::SeqCst);
        if n >= self.limit.load(Ordering::SeqCst) {
            if self.once.load(Ordering::SeqCst) {
                self.heal();
            }
            return Err(StoreError::Backend(format!(
                "injected fault: append {n} of {stream} refused ({})",
                event.key
            )));
        }
        let delay = self.delay_ms.load(Ordering::SeqCst);
        if delay > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
        }
        self.inner.append(stream, event, pre).await
    }

    async fn read(&self, stream: &StreamId, after: u64) -> StoreResult<Vec<StoredEvent>> {
        let read = self.inner.read(stream, after).await?;
        self.events_read
            .fetch_add(read.len() as u64, Ordering::SeqCst);
        Ok(read)
    }

    async fn lock_holder(&self, stream: &StreamId) -> StoreResult<Option<Holder>> {
        self.inner.lock_holder(stream).await
    }

    async fn break_lock(&self, stream: &StreamId, by: &str) -> StoreResult<Option<Holder>> {
        self.inner.break_lock(stream, by).await
    }

    async fn renew_lock(&self, stream: &StreamId, deploy_id: &str, until: &str) -> StoreResult<()> {
        self.inner.renew_lock(stream, deploy_id, until).await
    }

    async fn put_snapshot(&self, stream: &StreamId, seq: u64, body: &Value) -> StoreResult<()> {
        self.inner.put_snapshot(stream, seq, body).await
    }

    async fn latest_snapshot(&self, stream: &StreamId) -> StoreResult<Option<(u64, Value)>> {
        self.inner.latest_snapshot(stream).await
    }

    async fn streams(&self) -> StoreResult<Vec<StreamId>> {
        self.inner.streams().await
    }
}

// ---------------------------------------------------------------------------------------
// Progress
// ---------------------------------------------------------------------------------------

/// Collects the progress lines, for failure messages.
#[derive(Debug, Default)]
pub struct Lines(Mutex<Vec<String>>);

impl Lines {
    /// Every line so far.
    pub fn all(&self) -> Vec<String> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Progress for Lines {
    fn report(&self, event: ProgressEvent<'_>) {
        let line = match event {
            ProgressEvent::StackStarted {
                stack,
                operation,
                total,
            } => format!("{stack}: {operation} of {total}"),
            ProgressEvent::ResourceStarted {
                stack,
                logical_id,
                action,
                ..
            } => format!("{stack}/{logical_id}: {action}"),
            ProgressEvent::ResourceFinished {
                stack,
                logical_id,
                outcome,
                detail,
                ..
            } => format!("{stack}/{logical_id}: {outcome} {}", detail.unwrap_or("")),
            ProgressEvent::Note { stack, message } => format!("{stack}: note: {message}"),
        };
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(line);
    }
}

// ---------------------------------------------------------------------------------------
// The rig
// ---------------------------------------------------------------------------------------

/// An engine over a fake cloud and a fault store, with what the tests look at.
pub struct Rig {
    /// The engine.
    pub engine: Arc<Engine<FaultStore>>,
    /// The fake cloud every resource goes to.
    pub cloud: Arc<FakeCloud>,
    /// The store.
    pub store: Arc<FaultStore>,
    /// The progress lines.
    pub lines: Arc<Lines>,
    /// When true, the engine takes every lock holder for gone (its process died), so a
    /// crashed run's lock is broken by the next run.
    pub holders_gone: Arc<AtomicBool>,
}

/// A type no provider serves.
pub const UNSERVED_TYPE: &str = "AWS::Made::Up";

/// Routes every resource (but [`UNSERVED_TYPE`]) to the fake cloud, recorded as a Cloud Control resource; the
/// routing rules themselves are tested in the providers crate.
pub struct FakeRouter(pub Arc<FakeCloud>);

impl Router for FakeRouter {
    fn route(
        &self,
        resource_type: &str,
        _properties: &Properties,
        _recorded: Option<ProviderKind>,
    ) -> Result<Routed, RouteError> {
        if resource_type == UNSERVED_TYPE {
            return Err(RouteError::Unknown {
                resource_type: resource_type.to_string(),
                suggestion: String::new(),
            });
        }
        // As the real router: custom resources by their own protocol.
        let kind = if resource_type.starts_with("Custom::") {
            ProviderKind::Custom
        } else {
            ProviderKind::CloudControl
        };
        Ok(Routed {
            provider: self.0.clone(),
            kind,
        })
    }

    fn for_recorded(
        &self,
        _resource_type: &str,
        _kind: ProviderKind,
    ) -> Result<Arc<dyn Provider>, RouteError> {
        Ok(self.0.clone())
    }
}

/// Builds the engine: the one place that knows how an [`Engine`] is put together.
pub fn build_engine(
    store: Arc<FaultStore>,
    cloud: Arc<FakeCloud>,
    lookups: Arc<dyn Lookups>,
    progress: Arc<dyn Progress>,
    holders_gone: Arc<AtomicBool>,
) -> Arc<Engine<FaultStore>> {
    Arc::new(Engine {
        store,
        providers: Arc::new(FakeRouter(cloud)),
        lookups,
        region: REGION.into(),
        who: "lifecycle-test".into(),
        cloudformation_fallback: false,
        progress,
        stale: Arc::new(move |_| holders_gone.load(Ordering::SeqCst)),
        digest_key: Some(stackflow_core::secrets::DigestKey::new([9; 32])),
        lease: None,
    })
}

impl Rig {
    /// A fresh cloud, store and engine.
    pub fn new() -> Rig {
        Rig::with_lookups(FakeLookups::default())
    }

    /// A fresh cloud, store and engine, with these lookups.
    pub fn with_lookups(lookups: FakeLookups) -> Rig {
        let cloud = FakeCloud::new();
        let store = Arc::new(FaultStore::new());
        let lines = Arc::new(Lines::default());
        let holders_gone = Arc::new(AtomicBool::new(false));
        let engine = build_engine(
            store.clone(),
            cloud.clone(),
            Arc::new(lookups),
            lines.clone(),
            holders_gone.clone(),
        );
        Rig {
            engine,
            cloud,
            store,
            lines,
            holders_gone,
        }
    }

    /// The stream of `stack`.
    pub fn stream(&self, stack: &str) -> StreamId {
        StreamId::new(REGION, stack)
    }

    /// The recorded state of `stack`: a fold of its whole stream.
    pub async fn state(&self, stack: &str) -> StackState {
        StackState::fold(&self.events(stack).await)
    }

    /// The events of `stack`.
    pub async fn events(&self, stack: &str) -> Vec<StoredEvent> {
        self.store
            .read(&self.stream(stack), 0)
            .await
            .expect("the store reads")
    }

    /// The type names of the events of `stack` after position `after`.
    pub async fn event_types_after(&self, stack: &str, after: u64) -> Vec<&'static str> {
        self.events(stack)
            .await
            .iter()
            .filter(|e| e.seq > after)
            .map(|e| e.event.type_name())
            .collect()
    }

    /// Who holds the lock of `stack`, as the store tells.
    pub async fn lock_holder(&self, stack: &str) -> Option<Holder> {
        self.store
            .lock_holder(&self.stream(stack))
            .await
            .expect("the store answers")
    }
}

/// Deploy options without a stop signal (rollback on, 10 at once).
pub fn options() -> DeployOptions {
    DeployOptions::new()
}

/// Deploy options with a stop signal: the sender flips it.
pub fn stoppable() -> (watch::Sender<bool>, DeployOptions) {
    let (tx, stop) = watch::channel(false);
    (tx, DeployOptions::new().with_stop(stop))
}

/// A template from JSON.
pub fn template(v: Value) -> Template {
    Template::from_value(&v).expect("a valid template")
}

/// The input of stack `name` with template `v` and no parameters.
pub fn input(name: &str, v: Value) -> StackInput {
    input_with(name, v, &[])
}

/// [`input`] with parameter values.
pub fn input_with(name: &str, v: Value, values: &[(&str, &str)]) -> StackInput {
    let template = template(v);
    let values: IndexMap<String, String> = values
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let parameters = bind_parameters(&template, &values).expect("parameters bind");
    StackInput {
        name: name.into(),
        source: format!("{name}.json"),
        template,
        parameters,
        pseudo: Pseudo {
            region: REGION.into(),
            account_id: Some("123456789012".into()),
            stack_name: name.into(),
            stack_id: None,
        },
        nested: IndexMap::new(),
    }
}

/// A nested template from JSON, as read from `file`.
pub fn nested(file: &str, v: Value) -> NestedTemplate {
    NestedTemplate {
        file: file.into(),
        template: template(v),
        nested: IndexMap::new(),
    }
}

/// An SSM parameter resource named `name` with `value`.
pub fn param(name: &str, value: Value) -> Value {
    serde_json::json!({
        "Type": "AWS::SSM::Parameter",
        "Properties": { "Name": name, "Type": "String", "Value": value }
    })
}

/// Deploys `input` with the default options.
pub async fn deploy(rig: &Rig, input: &StackInput) -> stackflow_engine::StackReport {
    stackflow_engine::deploy_stack(rig.engine.clone(), input.clone(), options())
        .await
        .unwrap_or_else(|e| panic!("deploy of {}: {e}\n{:#?}", input.name, rig.lines.all()))
}

/// Deploys `input` and checks that it succeeded.
pub async fn deploy_ok(rig: &Rig, input: &StackInput) -> stackflow_engine::StackReport {
    let report = deploy(rig, input).await;
    assert_eq!(
        report.status,
        stackflow_engine::StackStatus::Succeeded,
        "{report:#?}\n{:#?}",
        rig.lines.all()
    );
    report
}
