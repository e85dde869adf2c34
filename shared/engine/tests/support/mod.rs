//! What the lifecycle tests run the engine against: a fake cloud (a [`Provider`] that
//! keeps a world of resources in memory and writes down every call), fake lookups, an
//! event store that can be told to fail every append after the N-th (a crash), and the
//! one function that builds an [`Engine`].

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
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
use stackflow_providers::router::{Routed, Router};
use tokio::sync::{Semaphore, watch};

/// The region every test deploys to.
pub const REGION: &str = "us-east-1";

// ---------------------------------------------------------------------------------------
// The fake cloud
// ---------------------------------------------------------------------------------------

/// A provider operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// `Provider::create`.
    Create,
    /// `Provider::update`.
    Update,
    /// `Provider::delete`.
    Delete,
}

/// One resource that exists in the fake cloud.
#[derive(Debug, Clone, PartialEq)]
pub struct Thing {
    /// The stack of the request that made it.
    pub stack: String,
    /// The logical id of the request that made it.
    pub logical_id: String,
    /// Its type.
    pub resource_type: String,
    /// Its properties now.
    pub properties: Properties,
}

/// How a call ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallResult {
    /// It did what was asked.
    Ok,
    /// A create with a token seen before: answered with the resource made the first time.
    Replayed,
    /// It failed with this error.
    Failed(String),
    /// It panicked.
    Panicked,
}

/// One call the engine made, written down when the call ends.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The operation.
    pub op: Op,
    /// The request's stack.
    pub stack: String,
    /// The request's logical id.
    pub logical_id: String,
    /// The physical id acted on: the request's, or for a create the one made.
    pub physical_id: Option<String>,
    /// The idempotency token.
    pub token: String,
    /// The properties sent.
    pub properties: Properties,
    /// The previous properties sent (updates).
    pub previous: Option<Properties>,
    /// How it ended.
    pub result: CallResult,
}

/// A point where a call waits until the test lets it go.
#[derive(Debug)]
pub struct Gate {
    entered: Semaphore,
    released: Semaphore,
}

impl Gate {
    /// A gate nobody waits at yet.
    pub fn new() -> Gate {
        Gate {
            entered: Semaphore::new(0),
            released: Semaphore::new(0),
        }
    }

    /// Waits until a call reached the gate.
    pub async fn entered(&self) {
        self.entered.acquire().await.expect("gate open").forget();
    }

    /// Lets the waiting call (or the next one) go on.
    pub fn release(&self) {
        self.released.add_permits(1);
    }

    /// Waits here until released.
    pub async fn pass(&self) {
        self.entered.add_permits(1);
        self.released.acquire().await.expect("gate open").forget();
    }
}

#[derive(Debug, Clone)]
enum Fault {
    Fail(String),
    /// Fails with a message that quotes the properties sent, as AWS validation errors
    /// often do.
    Echo,
    Panic,
    Block(Arc<Gate>),
    /// Does its work, then waits at the gate (a request made and still polled).
    After(Arc<Gate>),
}

#[derive(Debug)]
struct Script {
    op: Op,
    logical_id: String,
    fault: Fault,
    /// How many more calls it hits; `None`: every call.
    remaining: Option<usize>,
}

#[derive(Debug, Default)]
struct CloudInner {
    world: BTreeMap<String, Thing>,
    /// What each create token made.
    tokens: HashMap<String, Created>,
    calls: Vec<Call>,
    scripts: Vec<Script>,
    /// (logical id, property) pairs whose change the cloud refuses to make in place.
    not_updatable: Vec<(String, String)>,
    /// Set by [`FakeCloud::forget_tokens`]: a create of a topic name that exists is
    /// refused whatever stack made it.
    by_name: bool,
    next: u64,
}

/// A cloud in memory, behind the [`Provider`] contract. Physical ids look like
/// `p000007-Queue` (unique, and never a part of another one), attributes are `Arn`
/// (`arn:aws:fake:::<physical id>`) and `Name` (the physical id).
#[derive(Debug, Default)]
pub struct FakeCloud {
    inner: Mutex<CloudInner>,
}

fn attributes_of(physical_id: &str) -> Attributes {
    let mut a = Attributes::new();
    a.insert(
        "Arn".into(),
        Value::String(format!("arn:aws:fake:::{physical_id}")),
    );
    a.insert("Name".into(), Value::String(physical_id.to_string()));
    a
}

/// A type whose answers are secret as a whole (a custom resource answering `NoEcho`):
/// every property comes back as an attribute.
pub const NO_ECHO_TYPE: &str = "Custom::NoEchoData";

/// The attributes the fake answers for `request`: `Arn` and `Name`; an SSM parameter
/// also reports its `Value` (as the real provider does, resolved secrets included); a
/// [`NO_ECHO_TYPE`] reports every property.
fn answered_attributes(request: &ResourceRequest, physical_id: &str) -> Attributes {
    let mut a = attributes_of(physical_id);
    if request.resource_type == "AWS::SSM::Parameter"
        && let Some(v) = request.properties.get("Value")
    {
        a.insert("Value".into(), v.clone());
    }
    if request.resource_type == NO_ECHO_TYPE {
        for (k, v) in &request.properties {
            a.insert(k.clone(), v.clone());
        }
    }
    a
}

impl FakeCloud {
    /// Puts a resource in the world, made outside stackflow (stack `elsewhere`); returns
    /// its physical id.
    pub fn existing(&self, physical_id: &str, resource_type: &str, properties: Value) -> String {
        let Value::Object(properties) = properties else {
            panic!("properties are an object");
        };
        self.lock().world.insert(
            physical_id.to_string(),
            Thing {
                stack: "elsewhere".into(),
                logical_id: physical_id.into(),
                resource_type: resource_type.into(),
                properties,
            },
        );
        physical_id.to_string()
    }

    /// Puts a topic named `name` in the world, made by someone else (stack `elsewhere`).
    pub fn someone_elses_topic(&self, name: &str) -> String {
        let physical_id = format!("foreign-{name}");
        let mut properties = Properties::new();
        properties.insert("TopicName".into(), Value::String(name.into()));
        self.lock().world.insert(
            physical_id.clone(),
            Thing {
                stack: "elsewhere".into(),
                logical_id: "Theirs".into(),
                resource_type: "AWS::SNS::Topic".into(),
                properties,
            },
        );
        physical_id
    }

    /// The `TopicName` of `request` when another stack's topic has it (a create that is
    /// not the replay of this request's own token).
    fn taken_name(&self, request: &ResourceRequest) -> Option<String> {
        let name = request.properties.get("TopicName")?.as_str()?;
        let inner = self.lock();
        if inner.tokens.contains_key(&request.token) {
            return None;
        }
        inner
            .world
            .values()
            .any(|t| {
                (inner.by_name || t.stack != request.stack_name)
                    && t.properties.get("TopicName") == request.properties.get("TopicName")
            })
            .then(|| name.to_string())
    }

    /// Forgets what every create token made, as a provider that creates by name (no
    /// token) does: from now on a create of a topic name that exists is refused, even
    /// when this stack made it, and only an import by the name finds it.
    pub fn forget_tokens(&self) {
        let mut inner = self.lock();
        inner.tokens.clear();
        inner.by_name = true;
    }

    /// Sets the properties of the resource `physical_id` (a change made outside stackflow,
    /// or a create that stopped half way).
    pub fn set_properties(&self, physical_id: &str, properties: Value) {
        let Value::Object(properties) = properties else {
            panic!("properties are an object");
        };
        let mut inner = self.lock();
        let thing = inner.world.get_mut(physical_id).expect("a resource");
        thing.properties = properties;
    }

    /// Deletes the resource `physical_id` outside stackflow.
    pub fn remove(&self, physical_id: &str) {
        self.lock().world.remove(physical_id);
    }

    /// An empty cloud.
    pub fn new() -> Arc<FakeCloud> {
        Arc::new(FakeCloud::default())
    }

    fn lock(&self) -> MutexGuard<'_, CloudInner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What exists, by physical id.
    pub fn world(&self) -> BTreeMap<String, Thing> {
        self.lock().world.clone()
    }

    /// The physical ids of the resources made for `logical_id` of `stack` that exist.
    pub fn physical_ids(&self, stack: &str, logical_id: &str) -> Vec<String> {
        self.lock()
            .world
            .iter()
            .filter(|(_, t)| t.stack == stack && t.logical_id == logical_id)
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// The one resource made for `logical_id` of `stack` (panics unless exactly one
    /// exists).
    pub fn only(&self, stack: &str, logical_id: &str) -> (String, Thing) {
        let ids = self.physical_ids(stack, logical_id);
        assert_eq!(
            ids.len(),
            1,
            "{stack}/{logical_id} exists {} times in the world: {:#?}",
            ids.len(),
            self.world()
        );
        let thing = self.world()[&ids[0]].clone();
        (ids[0].clone(), thing)
    }

    /// The world with physical ids taken out: every resource as `(stack, logical id, type,
    /// properties)`, where a physical id inside a property (also inside an ARN) reads
    /// `<stack/logical id>`. Sorted; two worlds made by different runs of the same deploys
    /// compare equal.
    pub fn contents(&self) -> Vec<(String, String, String, Value)> {
        let world = self.world();
        let mut out: Vec<(String, String, String, Value)> = world
            .values()
            .map(|t| {
                (
                    t.stack.clone(),
                    t.logical_id.clone(),
                    t.resource_type.clone(),
                    normalize(&Value::Object(t.properties.clone()), &world),
                )
            })
            .collect();
        out.sort_by_key(|x| format!("{x:?}"));
        out
    }

    /// Every call so far, in the order they ended.
    pub fn calls(&self) -> Vec<Call> {
        self.lock().calls.clone()
    }

    /// The calls so far as `(op, logical id)`, in order.
    pub fn call_log(&self) -> Vec<(Op, String)> {
        self.lock()
            .calls
            .iter()
            .map(|c| (c.op, c.logical_id.clone()))
            .collect()
    }

    /// Forgets the calls made so far.
    pub fn clear_calls(&self) {
        self.lock().calls.clear();
    }

    fn script(&self, op: Op, logical_id: &str, fault: Fault, remaining: Option<usize>) {
        self.lock().scripts.push(Script {
            op,
            logical_id: logical_id.to_string(),
            fault,
            remaining,
        });
    }

    /// The next `op` on `logical_id` fails (with an `InvalidRequest`).
    pub fn fail_once(&self, op: Op, logical_id: &str) {
        self.script(
            op,
            logical_id,
            Fault::Fail(format!("scripted failure of {logical_id}")),
            Some(1),
        );
    }

    /// The next `op` on `logical_id` fails with a message quoting what it was sent.
    pub fn fail_echoing_once(&self, op: Op, logical_id: &str) {
        self.script(op, logical_id, Fault::Echo, Some(1));
    }

    /// Every `op` on `logical_id` fails from now on.
    pub fn fail_always(&self, op: Op, logical_id: &str) {
        self.script(
            op,
            logical_id,
            Fault::Fail(format!("scripted failure of {logical_id}")),
            None,
        );
    }

    /// The next `op` on `logical_id` panics.
    pub fn panic_once(&self, op: Op, logical_id: &str) {
        self.script(op, logical_id, Fault::Panic, Some(1));
    }

    /// The next `op` on `logical_id` waits at the returned gate until released, then does
    /// its work.
    pub fn block_once(&self, op: Op, logical_id: &str) -> Arc<Gate> {
        let gate = Arc::new(Gate::new());
        self.script(op, logical_id, Fault::Block(gate.clone()), Some(1));
        gate
    }

    /// The next `op` on `logical_id` does its work, then waits at the returned gate
    /// until released (as a Cloud Control request that was made and is still polled, or a
    /// custom resource that waits for its answer): a caller cut off there has had its
    /// effect.
    pub fn slow_once(&self, op: Op, logical_id: &str) -> Arc<Gate> {
        let gate = Arc::new(Gate::new());
        self.script(op, logical_id, Fault::After(gate.clone()), Some(1));
        gate
    }

    /// An update of `logical_id` that changes `property` is refused as not updatable in
    /// place (the engine must replace the resource).
    pub fn not_updatable(&self, logical_id: &str, property: &str) {
        self.lock()
            .not_updatable
            .push((logical_id.to_string(), property.to_string()));
    }

    /// Takes the scripted fault for this call, if any.
    fn fault(&self, op: Op, logical_id: &str) -> Option<Fault> {
        let mut inner = self.lock();
        let i = inner.scripts.iter().position(|s| {
            s.op == op && s.logical_id == logical_id && s.remaining.is_none_or(|n| n > 0)
        })?;
        let s = &mut inner.scripts[i];
        if let Some(n) = &mut s.remaining {
            *n -= 1;
        }
        Some(s.fault.clone())
    }

    fn record(
        &self,
        op: Op,
        request: &ResourceRequest,
        physical_id: Option<String>,
        r: CallResult,
    ) {
        self.lock().calls.push(Call {
            op,
            stack: request.stack_name.clone(),
            logical_id: request.logical_id.clone(),
            physical_id,
            token: request.token.clone(),
            properties: request.properties.clone(),
            previous: request.previous_properties.clone(),
            result: r,
        });
    }

    /// Runs the scripted fault of a call: `Err` when the call is to fail; the gate to
    /// wait at after the work, when there is one.
    async fn before(
        &self,
        op: Op,
        request: &ResourceRequest,
    ) -> Result<Option<Arc<Gate>>, ProviderError> {
        match self.fault(op, &request.logical_id) {
            None => Ok(None),
            Some(Fault::After(gate)) => Ok(Some(gate)),
            Some(Fault::Block(gate)) => {
                gate.pass().await;
                Ok(None)
            }
            Some(Fault::Fail(message)) => {
                self.record(
                    op,
                    request,
                    request.physical_id.clone(),
                    CallResult::Failed(message.clone()),
                );
                Err(ProviderError::InvalidRequest(message))
            }
            Some(Fault::Echo) => {
                let sent = serde_json::to_string(&request.properties).unwrap_or_default();
                let message = format!("invalid request, it sent {sent}");
                self.record(
                    op,
                    request,
                    request.physical_id.clone(),
                    CallResult::Failed(message.clone()),
                );
                Err(ProviderError::InvalidRequest(message))
            }
            Some(Fault::Panic) => {
                self.record(
                    op,
                    request,
                    request.physical_id.clone(),
                    CallResult::Panicked,
                );
                panic!(
                    "scripted panic in {op:?} of {}/{}",
                    request.stack_name, request.logical_id
                );
            }
        }
    }

    fn do_create(&self, request: &ResourceRequest) -> Created {
        let mut inner = self.lock();
        if let Some(made) = inner.tokens.get(&request.token).cloned() {
            drop(inner);
            self.record(
                Op::Create,
                request,
                Some(made.physical_id.clone()),
                CallResult::Replayed,
            );
            return made;
        }
        inner.next += 1;
        let physical_id = format!("p{:06}-{}", inner.next, request.logical_id);
        let created = Created {
            sensitive: request.resource_type == NO_ECHO_TYPE,
            physical_id: physical_id.clone(),
            attributes: answered_attributes(request, &physical_id),
        };
        inner.world.insert(
            physical_id.clone(),
            Thing {
                stack: request.stack_name.clone(),
                logical_id: request.logical_id.clone(),
                resource_type: request.resource_type.clone(),
                properties: request.properties.clone(),
            },
        );
        if !request.token.is_empty() {
            inner.tokens.insert(request.token.clone(), created.clone());
        }
        drop(inner);
        self.record(Op::Create, request, Some(physical_id), CallResult::Ok);
        created
    }

    fn do_update(&self, request: &ResourceRequest) -> Result<Updated, ProviderError> {
        let physical_id = request.require_physical_id()?.to_string();
        let fail = |this: &FakeCloud, e: ProviderError| {
            this.record(
                Op::Update,
                request,
                Some(physical_id.clone()),
                CallResult::Failed(e.to_string()),
            );
            Err(e)
        };
        let refused = {
            let inner = self.lock();
            let previous = request.previous_properties.clone().unwrap_or_default();
            inner
                .not_updatable
                .iter()
                .find(|(id, p)| {
                    *id == request.logical_id && previous.get(p) != request.properties.get(p)
                })
                .map(|(_, p)| p.clone())
        };
        if let Some(p) = refused {
            return fail(
                self,
                ProviderError::NotUpdatable(format!("{p} cannot change in place")),
            );
        }
        {
            let mut inner = self.lock();
            match inner.world.get_mut(&physical_id) {
                Some(thing) => thing.properties = request.properties.clone(),
                None => {
                    drop(inner);
                    return fail(self, ProviderError::NotFound(physical_id.clone()));
                }
            }
        }
        self.record(
            Op::Update,
            request,
            Some(physical_id.clone()),
            CallResult::Ok,
        );
        Ok(Updated {
            sensitive: request.resource_type == NO_ECHO_TYPE,
            attributes: answered_attributes(request, &physical_id),
            physical_id,
            replaced: false,
        })
    }

    fn do_delete(&self, request: &ResourceRequest) -> Result<Deleted, ProviderError> {
        let physical_id = request.require_physical_id()?.to_string();
        self.lock().world.remove(&physical_id);
        self.record(Op::Delete, request, Some(physical_id), CallResult::Ok);
        // Gone before the call or gone now: done, as the contract says.
        Ok(Deleted::Done)
    }
}

/// `v` with every physical id of `world` (also inside longer strings) replaced by
/// `<stack/logical id>`.
fn normalize(v: &Value, world: &BTreeMap<String, Thing>) -> Value {
    match v {
        Value::String(s) => {
            let mut s = s.clone();
            for (p, t) in world {
                if s.contains(p.as_str()) {
                    s = s.replace(p.as_str(), &format!("<{}/{}>", t.stack, t.logical_id));
                }
            }
            Value::String(s)
        }
        Value::Array(items) => Value::Array(items.iter().map(|i| normalize(i, world)).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| (k.clone(), normalize(x, world)))
                .collect(),
        ),
        other => other.clone(),
    }
}

impl Provider for FakeCloud {
    fn name(&self) -> &str {
        "fake"
    }

    fn handled_properties(&self, _: &str) -> Option<&[&str]> {
        None
    }

    fn create<'a>(
        &'a self,
        request: &'a ResourceRequest,
    ) -> BoxFuture<'a, Result<Created, ProviderError>> {
        Box::pin(async move {
            let after = self.before(Op::Create, request).await?;
            if let Some(name) = self.taken_name(request) {
                return Err(ProviderError::AlreadyExists(format!(
                    "{name} already exists, and this stack did not create it"
                )));
            }
            let created = self.do_create(request);
            if let Some(gate) = after {
                gate.pass().await;
            }
            Ok(created)
        })
    }

    fn update<'a>(
        &'a self,
        request: &'a ResourceRequest,
    ) -> BoxFuture<'a, Result<Updated, ProviderError>> {
        Box::pin(async move {
            let after = self.before(Op::Update, request).await?;
            let updated = self.do_update(request);
            if let Some(gate) = after {
                gate.pass().await;
            }
            updated
        })
    }

    fn delete<'a>(
        &'a self,
        request: &'a ResourceRequest,
    ) -> BoxFuture<'a, Result<Deleted, ProviderError>> {
        Box::pin(async move {
            let after = self.before(Op::Delete, request).await?;
            let deleted = self.do_delete(request);
            if let Some(gate) = after {
                gate.pass().await;
            }
            deleted
        })
    }

    /// Finds a topic by its `TopicName` (or anything by the explicit physical id); without
    /// either, the type cannot be looked up.
    fn import<'a>(
        &'a self,
        request: &'a ResourceRequest,
    ) -> BoxFuture<'a, Result<Imported, ProviderError>> {
        Box::pin(async move {
            if request.physical_id.is_none() && !request.properties.contains_key("TopicName") {
                return Ok(Imported::Unsupported);
            }
            let inner = self.lock();
            let found = inner
                .world
                .iter()
                .find(|(id, t)| match &request.physical_id {
                    Some(explicit) => *id == explicit,
                    None => {
                        request.properties.contains_key("TopicName")
                            && t.properties.get("TopicName") == request.properties.get("TopicName")
                    }
                });
            Ok(match found {
                Some((id, _)) => Imported::Found {
                    physical_id: id.clone(),
                    attributes: attributes_of(id),
                },
                None => Imported::NotDeployedYet,
            })
        })
    }

    fn read_current_state<'a>(
        &'a self,
        request: &'a ResourceRequest,
    ) -> BoxFuture<'a, Result<CurrentState, ProviderError>> {
        Box::pin(async move {
            let id = request.require_physical_id()?;
            Ok(match self.lock().world.get(id) {
                Some(thing) => CurrentState::Found(thing.properties.clone()),
                None => CurrentState::NotFound,
            })
        })
    }
}

// ---------------------------------------------------------------------------------------
// Fake lookups
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
}

impl FaultStore {
    /// An empty store that fails nothing.
    pub fn new() -> FaultStore {
        FaultStore {
            inner: SqliteStore::open_in_memory().expect("an in-memory store"),
            appends: AtomicU64::new(0),
            limit: AtomicU64::new(u64::MAX),
            once: AtomicBool::new(false),
        }
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
        self.inner.append(stream, event, pre).await
    }

    async fn read(&self, stream: &StreamId, after: u64) -> StoreResult<Vec<StoredEvent>> {
        self.inner.read(stream, after).await
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
    ) -> Result<Routed, String> {
        if resource_type == UNSERVED_TYPE {
            return Err(format!("no provider can handle {resource_type}"));
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
    ) -> Result<Arc<dyn Provider>, String> {
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
