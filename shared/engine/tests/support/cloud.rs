//! The fake cloud: a [`Provider`] that keeps a world of resources in memory, writes down
//! every call, and fails, blocks, slows or panics a call when a test says so.

use super::*;

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
    /// The token of the create that made it (the mark it carries, as an SDK provider's
    /// `stackflow:token` tag); empty for what someone else made.
    pub token: String,
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
    /// Logical ids whose deletes leave the resource in place, and what they answer.
    kept_on_delete: HashMap<String, Deleted>,
    /// Physical ids whose properties cannot be read (a read answers `CannotRead`).
    unreadable: HashSet<String>,
    /// Reads of each physical id so far.
    reads: HashMap<String, usize>,
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
                token: String::new(),
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
                token: String::new(),
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

    /// From now on a read of `physical_id` answers that its properties cannot be read (a
    /// permission missing, a type with no read), or no longer does.
    pub fn set_unreadable(&self, physical_id: &str, unreadable: bool) {
        let mut inner = self.lock();
        if unreadable {
            inner.unreadable.insert(physical_id.to_string());
        } else {
            inner.unreadable.remove(physical_id);
        }
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

    /// How many times each physical id was read so far.
    pub fn reads(&self) -> HashMap<String, usize> {
        self.lock().reads.clone()
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

    /// Every delete of `logical_id` from now on leaves the resource in place and answers
    /// `answer` ([`Deleted::Skipped`]: a custom resource whose handler answered `FAILED`
    /// on Delete; [`Deleted::Abandoned`]: one whose handler is gone).
    pub fn keep_on_delete(&self, logical_id: &str, answer: Deleted) {
        self.lock()
            .kept_on_delete
            .insert(logical_id.to_string(), answer);
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
                token: request.token.clone(),
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
        let kept = self.lock().kept_on_delete.get(&request.logical_id).cloned();
        if let Some(answer) = kept {
            self.record(Op::Delete, request, Some(physical_id), CallResult::Ok);
            return Ok(answer);
        }
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

    /// Proof is the mark of the create that made the resource: its token.
    fn made_by<'a>(
        &'a self,
        request: &'a ResourceRequest,
    ) -> BoxFuture<'a, Result<bool, ProviderError>> {
        Box::pin(async move {
            let inner = self.lock();
            let thing = request
                .physical_id
                .as_ref()
                .and_then(|id| inner.world.get(id));
            Ok(thing.is_some_and(|t| !t.token.is_empty() && t.token == request.token))
        })
    }

    fn read_current_state<'a>(
        &'a self,
        request: &'a ResourceRequest,
    ) -> BoxFuture<'a, Result<CurrentState, ProviderError>> {
        Box::pin(async move {
            let id = request.require_physical_id()?;
            let mut inner = self.lock();
            *inner.reads.entry(id.to_string()).or_default() += 1;
            if inner.unreadable.contains(id) {
                return Ok(CurrentState::CannotRead("reads are not allowed".into()));
            }
            Ok(match inner.world.get(id) {
                Some(thing) => CurrentState::Found(thing.properties.clone()),
                None => CurrentState::NotFound,
            })
        })
    }
}

// ---------------------------------------------------------------------------------------
// Fake lookups
