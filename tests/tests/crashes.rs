//! The crash campaign: a deploy killed after any of its appends is recovered by the next
//! run, against the emulator, embedded and through the worker.
//!
//! The engine records in a [`FaultyStore`] over a SQLite store, which fails every write
//! once N appends succeeded, as a process killed right after its N-th event would. A stack
//! of 18 resources (21 across v1 and v2: SNS topics, SQS queues, SSM parameters, a
//! DynamoDB table, an IAM role, a log group and an S3 bucket through the SDK providers; a
//! queue policy and a subscription through Cloud Control) is deployed as v1, then, with
//! the store limited to N appends:
//!
//! - **update**: v2, which creates 3 resources, updates 7 in place (2 through Cloud
//!   Control, and a parameter that follows a replaced queue), replaces 3 (a named
//!   parameter's and a queue's name, a table's key) and deletes 3 (and the 3 replaced
//!   predecessors); the next run deploys v2 again;
//! - **rollback**: v3, which is v2 plus a parameter without a value that the provider
//!   refuses once the creates and replacements it waits for are done: the deploy fails and
//!   rolls back, and N runs over the deploy's appends and its rollback's; the next run is a
//!   `rollback`.
//!
//! The crashed run must fail (embedded, with the store's error; through the worker, the
//! execution may end in any failure, but it must end: one still running after
//! [`EXECUTION_LIMIT`](stackflow_tests::worker::EXECUTION_LIMIT) is stopped, as an
//! operator would, and counted as a problem unless its Fail task was waiting for calls it
//! cannot stop, which it does by design for up to a task's longest run when the crash left
//! an intent without its outcome). Then the store heals and the next run goes (it breaks
//! the dead run's lock: embedded, the holder's process is gone; through the worker, as
//! `stackflow unlock` does). After it, an [`Audit`] asks the
//! emulator directly: every recorded resource exists once, nothing with the stack's name
//! is left in AWS that the state does not record (0 leaked, 0 duplicated), the recorded
//! properties match AWS, nothing is pending or locked. The update's stack then plans no
//! change for v2; the rollback's state is v1's state, resource for resource. Last the
//! stack is destroyed and checked again: nothing remains.
//!
//! N goes from 0 (nothing recorded) to the number of appends of a clean run of the step (no
//! crash), counted first with the same store. The embedded engine always tries every N
//! (55 + 73, about 80 s on 2 cores). Through the worker (a Step Functions execution whose
//! tasks an in-process `stackflow worker` runs; a crashed execution waits out the state
//! machine's retries of the dead store, about 20 s an N; one whose Fail task waits for
//! calls is stopped once it does) it tries N = 1, the middle one and the last but one of
//! each step by default (about 2 minutes), and every N with `STACKFLOW_CRASH_CAMPAIGN=full`
//! (about 40 minutes). Every N prints a line, and each step a summary (`N tried, leaked,
//! duplicated...`): run with `--nocapture` to see them. `STACKFLOW_CRASH_N=3,17` tries only
//! those N (to replay one).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{Map, Value, json};
use stackflow_core::template::Template;
use stackflow_engine::stack::StackInput;
use stackflow_engine::{
    DeployOptions, Engine, StackStatus, deploy_stack, destroy_stack, rollback_stack,
};
use stackflow_events::memory::FaultyStore;
use stackflow_events::projection::StackState;
use stackflow_events::sqlite::SqliteStore;
use stackflow_events::{EventStore, StreamId, load_state};
use stackflow_tests::audit::{Audit, Counts, resources};
use stackflow_tests::deploy::{engine, summary};
use stackflow_tests::emulator::{ACCOUNT_ID, REGION};
use stackflow_tests::worker::Machines;
use stackflow_tests::{Emulator, unique_name};
use tokio::sync::Mutex;

/// The two campaigns run one after the other (the Cloud Control listings are per type).
static SERIAL: Mutex<()> = Mutex::const_new(());

type Store = FaultyStore<SqliteStore>;

fn full() -> bool {
    std::env::var("STACKFLOW_CRASH_CAMPAIGN").is_ok_and(|v| v.trim() == "full")
}

// ---------------------------------------------------------------------------------------
// The stack
// ---------------------------------------------------------------------------------------

/// The template's versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    V1,
    V2,
    /// v2 and a parameter the provider refuses.
    V3,
}

fn r(id: &str) -> Value {
    json!({ "Ref": id })
}

fn arn(id: &str) -> Value {
    json!({ "Fn::GetAtt": [id, "Arn"] })
}

fn named(suffix: &str) -> Value {
    json!({ "Fn::Sub": format!("${{AWS::StackName}}{suffix}") })
}

fn res(ty: &str, properties: Value) -> Value {
    json!({ "Type": ty, "Properties": properties })
}

fn param(value: Value) -> Value {
    res(
        "AWS::SSM::Parameter",
        json!({ "Type": "String", "Value": value }),
    )
}

/// A policy that lets `topic` send to `queue`.
fn queue_policy(queue: &str, topic: &str) -> Value {
    let statement = json!({
        "Effect": "Allow",
        "Principal": { "Service": "sns.amazonaws.com" },
        "Action": "sqs:SendMessage",
        "Resource": arn(queue),
        "Condition": { "ArnEquals": { "aws:SourceArn": r(topic) } }
    });
    res(
        "AWS::SQS::QueuePolicy",
        json!({
            "Queues": [r(queue)],
            "PolicyDocument": { "Version": "2012-10-17", "Statement": [statement] }
        }),
    )
}

fn table(key: &str) -> Value {
    res(
        "AWS::DynamoDB::Table",
        json!({
            "AttributeDefinitions": [{ "AttributeName": key, "AttributeType": "S" }],
            "KeySchema": [{ "AttributeName": key, "KeyType": "HASH" }],
            "BillingMode": "PAY_PER_REQUEST"
        }),
    )
}

fn role() -> Value {
    let trust = json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Principal": { "Service": "lambda.amazonaws.com" },
            "Action": "sts:AssumeRole"
        }]
    });
    res(
        "AWS::IAM::Role",
        json!({ "AssumeRolePolicyDocument": trust }),
    )
}

/// The resources of `version`: v1 has 18, v2 drops 3 and adds 3, v3 adds one to v2.
fn stack_resources(version: Version) -> Map<String, Value> {
    let one = version == Version::V1;
    let pick = |a: &str, b: &str| if one { a.to_string() } else { b.to_string() };
    let mut m = Map::new();
    let mut add = |id: &str, v: Value| m.insert(id.to_string(), v);
    add("TopicA", res("AWS::SNS::Topic", json!({})));
    let display = pick("b-one", "b-two");
    add(
        "TopicB",
        res("AWS::SNS::Topic", json!({ "DisplayName": display })),
    );
    let timeout = if one { 30 } else { 60 };
    add(
        "QueueA",
        res("AWS::SQS::Queue", json!({ "VisibilityTimeout": timeout })),
    );
    add("QueueB", res("AWS::SQS::Queue", json!({})));
    let queue_name = named(&pick("-qc-one", "-qc-two"));
    add(
        "QueueC",
        res("AWS::SQS::Queue", json!({ "QueueName": queue_name })),
    );
    add("ParamA", param(r("TopicA")));
    add("ParamB", param(json!(pick("one", "two"))));
    let name = named(&pick("-named-one", "-named-two"));
    let p = json!({ "Name": name, "Type": "String", "Value": "named" });
    add("ParamNamed", res("AWS::SSM::Parameter", p));
    add("ParamQueue", param(arn("QueueC")));
    add("Table", table(&pick("pk", "id")));
    add("Role", role());
    let days = if one { 7 } else { 14 };
    add(
        "Logs",
        res("AWS::Logs::LogGroup", json!({ "RetentionInDays": days })),
    );
    add("Bucket", res("AWS::S3::Bucket", json!({})));
    add("Policy", queue_policy("QueueB", &pick("TopicA", "TopicB")));
    let raw = pick("true", "false");
    let subscription = json!({
        "Protocol": "sqs",
        "TopicArn": r("TopicA"),
        "Endpoint": arn("QueueB"),
        "RawMessageDelivery": raw
    });
    add("Subscription", res("AWS::SNS::Subscription", subscription));
    if one {
        add("GoneQueue", res("AWS::SQS::Queue", json!({})));
        add("GoneParam", param(r("GoneQueue")));
        add("GoneTopic", res("AWS::SNS::Topic", json!({})));
    } else {
        add("NewQueue", res("AWS::SQS::Queue", json!({})));
        add("NewParam", param(arn("NewQueue")));
        add("NewTopic", res("AWS::SNS::Topic", json!({})));
    }
    if version == Version::V3 {
        let mut broken = res("AWS::SSM::Parameter", json!({ "Type": "String" }));
        broken["DependsOn"] = json!(["NewParam", "Table", "ParamNamed", "ParamB"]);
        add("Broken", broken);
    }
    m
}

fn template(version: Version) -> Template {
    let v = json!({
        "Resources": stack_resources(version),
        "Outputs": { "QueueC": { "Value": arn("QueueC") } }
    });
    Template::from_value(&v).expect("the crash template")
}

fn input(stack: &str, version: Version) -> StackInput {
    let template = template(version);
    let parameters = stackflow_core::intrinsics::bind_parameters(&template, &Default::default())
        .expect("no parameters");
    StackInput {
        name: stack.to_string(),
        source: format!("crash-{version:?}.json"),
        template,
        parameters,
        pseudo: stackflow_core::intrinsics::Pseudo {
            region: REGION.to_string(),
            account_id: Some(ACCOUNT_ID.to_string()),
            stack_name: stack.to_string(),
            stack_id: None,
        },
        nested: Default::default(),
    }
}

fn all_types() -> BTreeSet<String> {
    [Version::V1, Version::V3]
        .into_iter()
        .flat_map(|v| stack_resources(v).into_values())
        .filter_map(|r| r["Type"].as_str().map(str::to_string))
        .collect()
}

fn options() -> DeployOptions {
    let mut o = DeployOptions::new();
    o.allow_stateful_replacement = true;
    o
}

// ---------------------------------------------------------------------------------------
// Running the engine: embedded, or through the worker
// ---------------------------------------------------------------------------------------

/// How a run ended.
#[derive(Debug)]
enum Run {
    /// Completed: succeeded, or nothing to do.
    Done(String),
    /// Completed: the deploy failed and was rolled back.
    Failed(String),
    /// Did not complete: the store died, or the engine could not run.
    Broken(String),
    /// Through the worker: the execution did not end in time, and was stopped.
    Hung(String),
}

impl Run {
    fn embedded(
        report: Result<stackflow_engine::StackReport, stackflow_engine::EngineError>,
    ) -> Run {
        match report {
            Ok(r) if matches!(r.status, StackStatus::Succeeded | StackStatus::NoChanges) => {
                Run::Done(summary(&r))
            }
            Ok(r)
                if r.status == StackStatus::Failed
                    && r.rollback.as_ref().is_some_and(|rb| rb.complete()) =>
            {
                Run::Failed(summary(&r))
            }
            Ok(r) => Run::Broken(summary(&r)),
            Err(e) => Run::Broken(format!("the engine failed: {e}")),
        }
    }

    fn worker(ended: stackflow_tests::worker::Ended) -> Run {
        use aws_sdk_sfn::types::ExecutionStatus;
        match ended.status {
            _ if ended.waiting => Run::Broken(format!(
                "stopped while its Fail task waited for calls it cannot stop: {}",
                ended.error
            )),
            _ if ended.hung => Run::Hung(ended.error),
            ExecutionStatus::Succeeded => Run::Done("execution succeeded".into()),
            _ if ended.error.starts_with("Stackflow.DeployFailed") => Run::Failed(ended.error),
            s => Run::Broken(format!("execution {s:?}: {}", ended.error)),
        }
    }

    fn short(&self) -> String {
        let (word, text) = match self {
            Run::Done(t) => ("done", t),
            Run::Failed(t) => ("failed", t),
            Run::Broken(t) => ("broken", t),
            Run::Hung(t) => ("hung", t),
        };
        let text: String = text.chars().take(160).collect();
        format!("{word}: {text}")
    }
}

/// The engine on a store that fails on demand, run embedded or through the worker.
struct Driver {
    engine: Arc<Engine<Store>>,
    /// Through the worker: the state machines whose tasks it runs with `engine`.
    machines: Option<Machines>,
}

impl Driver {
    fn store(&self) -> &Store {
        &self.engine.store
    }

    async fn deploy(&self, input: &StackInput) -> Run {
        match &self.machines {
            Some(m) => Run::worker(m.deploy(input, true).await),
            None => {
                Run::embedded(deploy_stack(self.engine.clone(), input.clone(), options()).await)
            }
        }
    }

    async fn rollback(&self, stack: &str) -> Run {
        match &self.machines {
            Some(m) => Run::worker(m.on_stack("rollback", stack).await),
            None => Run::embedded(rollback_stack(self.engine.clone(), stack).await),
        }
    }

    async fn destroy(&self, stack: &str) -> Run {
        match &self.machines {
            Some(m) => Run::worker(m.on_stack("destroy", stack).await),
            None => {
                let report = destroy_stack(self.engine.clone(), stack, DeployOptions::new()).await;
                Run::embedded(report)
            }
        }
    }

    /// After a crash: through the worker, the dead execution's lock is broken as
    /// `stackflow unlock` does (the embedded engine breaks it itself: its holder's process
    /// is gone). Says whether the lock was held.
    async fn unlock(&self, stack: &str) -> Result<&'static str, String> {
        let stream = StreamId::new(REGION, stack);
        let state = load_state(self.store(), &stream)
            .await
            .map_err(|e| e.to_string())?;
        if state.lock.is_none() {
            return Ok("lock free");
        }
        if self.machines.is_some() {
            let by = "crash campaign (stackflow unlock)";
            self.store()
                .break_lock(&stream, by)
                .await
                .map_err(|e| e.to_string())?;
            return Ok("lock held, broken as stackflow unlock does");
        }
        Ok("lock held")
    }
}

// ---------------------------------------------------------------------------------------
// The campaign
// ---------------------------------------------------------------------------------------

/// What is crashed: the update to v2, or the failing v3 and its rollback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Update,
    Rollback,
}

impl Step {
    fn version(self) -> Version {
        match self {
            Step::Update => Version::V2,
            Step::Rollback => Version::V3,
        }
    }

    /// Whether `run` is how a run of the step without a crash ends.
    fn clean(self, run: &Run) -> bool {
        match self {
            Step::Update => matches!(run, Run::Done(_)),
            Step::Rollback => matches!(run, Run::Failed(_)),
        }
    }
}

/// The N to try of a step with `total` appends (see the module documentation).
fn sample(total: u64, worker: bool) -> Vec<u64> {
    let chosen = std::env::var("STACKFLOW_CRASH_N").ok();
    if let Some(ns) = chosen.filter(|v| !v.trim().is_empty()) {
        let ns = ns.split(',').filter_map(|n| n.trim().parse().ok());
        return ns.filter(|&n| n <= total).collect();
    }
    if !worker || full() {
        return (0..=total).collect();
    }
    let s: BTreeSet<u64> = [1.min(total), total / 2, total.saturating_sub(1)].into();
    s.into_iter().collect()
}

struct Campaign {
    label: &'static str,
    driver: Driver,
    audit: Audit,
    types: BTreeSet<String>,
}

impl Campaign {
    async fn new(label: &'static str, driver: Driver) -> Campaign {
        let emulator = Emulator::shared().await;
        Campaign {
            label,
            driver,
            audit: Audit::new(emulator, label, "none-yet").await,
            types: all_types(),
        }
    }

    fn state_store(&self) -> &SqliteStore {
        self.driver.store().inner()
    }

    async fn state(&self, stack: &str) -> StackState {
        let stream = StreamId::new(REGION, stack);
        load_state(self.state_store(), &stream)
            .await
            .unwrap_or_else(|e| panic!("the state of {stack}: {e}"))
    }

    /// A new stack deployed as v1 (its name also the audit's tag); `None` when the
    /// deploy failed (a problem).
    async fn new_stack(&mut self) -> Option<(String, StackState)> {
        let stack = unique_name("c");
        self.audit.tag = stack.clone();
        self.audit.take_baseline(&self.types.clone()).await;
        match self.driver.deploy(&input(&stack, Version::V1)).await {
            Run::Done(_) => Some((stack.clone(), self.state(&stack).await)),
            run => {
                self.audit.problem(format!("{stack}: v1: {}", run.short()));
                None
            }
        }
    }

    /// The appends of a clean run of `step` (no crash).
    async fn count(&mut self, step: Step) -> u64 {
        let (stack, _) = self.new_stack().await.expect("v1 deploys");
        let before = self.driver.store().appended();
        let run = self.driver.deploy(&input(&stack, step.version())).await;
        let total = self.driver.store().appended() - before;
        assert!(
            step.clean(&run),
            "{step:?} without a crash: {}",
            run.short()
        );
        eprintln!(
            "[{}] {step:?} without a crash: {total} appends; {}",
            self.label,
            run.short()
        );
        let destroyed = self.driver.destroy(&stack).await;
        assert!(matches!(destroyed, Run::Done(_)), "{}", destroyed.short());
        total
    }

    /// One N: v1, `step` crashed after N appends, the next run, the checks, the destroy.
    async fn try_n(&mut self, step: Step, n: u64, total: u64) {
        let before = self.audit.counts;
        let Some((stack, v1)) = self.new_stack().await else {
            return;
        };
        let store = self.driver.store();
        let refused = store.refused_appends();
        store.fail_after(store.appended() + n);
        let crashed = self.driver.deploy(&input(&stack, step.version())).await;
        // The run's best-effort baseline appends vary in number from run to run (a read
        // that finds nothing to record appends nothing, and reads that end at once share
        // one append), so a run may end before its N-th append, or make more appends than
        // the clean run: whether an append was refused tells which. None refused: it must
        // end as a clean run does. (A run that needed N appends and then had its snapshot
        // refused, after it released the lock, ended as a clean run: that refusal does
        // not count.)
        let reached = self.driver.store().refused_appends() > refused;
        self.driver.store().heal();
        // Embedded, a crash fails the run with the store's error; through the worker, the
        // execution ends in any failure (how depends on where the store died) but ends.
        let worker = self.driver.machines.is_some();
        let expected = match &crashed {
            _ if !reached => step.clean(&crashed),
            Run::Broken(_) => true,
            Run::Failed(_) => worker,
            Run::Done(_) | Run::Hung(_) => false,
        };
        if !expected {
            let what = format!("{stack}: N = {n} of {total}: {}", crashed.short());
            self.audit
                .problem(format!("the crashed run ended unexpectedly: {what}"));
        }
        let lock = self.driver.unlock(&stack).await.unwrap_or_else(|e| {
            self.audit.problem(format!("{stack}: unlocking: {e}"));
            "lock unknown"
        });
        let next = match step {
            Step::Update => self.driver.deploy(&input(&stack, Version::V2)).await,
            Step::Rollback => self.driver.rollback(&stack).await,
        };
        if !matches!(next, Run::Done(_)) {
            self.audit
                .problem(format!("{stack}: N = {n}: the next run: {}", next.short()));
        }
        self.check_recovered(step, &stack, &v1).await;
        self.destroy(&stack).await;
        let found = delta(self.audit.counts, before);
        let verdict = if found.total() == 0 {
            "ok".to_string()
        } else {
            format!("{found:?}")
        };
        eprintln!(
            "[{}] {step:?} N = {n}/{total}: crashed run {} ({lock}); next run {}; {verdict}",
            self.label,
            crashed.short(),
            next.short()
        );
    }
}

/// What `now` counts beyond `before`.
fn delta(now: Counts, before: Counts) -> Counts {
    Counts {
        leaked: now.leaked - before.leaked,
        duplicated: now.duplicated - before.duplicated,
        missing: now.missing - before.missing,
        mismatched: now.mismatched - before.mismatched,
        unsettled: now.unsettled - before.unsettled,
        other: now.other - before.other,
    }
}

impl Campaign {
    /// The checks after the next run: the audit, then the update's stack plans no change
    /// for v2, and the rollback's state is v1's.
    async fn check_recovered(&mut self, step: Step, stack: &str, v1: &StackState) {
        let stacks = BTreeSet::from([stack.to_string()]);
        let store = self.driver.store().inner();
        let mut states = self.audit.verify("the next run", store, &stacks).await;
        let Some(state) = states.remove(stack) else {
            return;
        };
        match step {
            Step::Update => {
                let want: BTreeSet<String> = stack_resources(Version::V2).keys().cloned().collect();
                let have: BTreeSet<String> = state.resources.keys().cloned().collect();
                if have != want {
                    let what = format!("{stack}: the state has {have:?}, v2 has {want:?}");
                    self.audit.problem(what);
                }
                match self
                    .driver
                    .engine
                    .plan_only(&input(stack, Version::V2))
                    .await
                {
                    Ok(plan) if plan.is_empty() => {}
                    Ok(plan) => self.audit.problem(format!(
                        "{stack}: v2 still plans changes after the next run: {plan:?}"
                    )),
                    Err(e) => self.audit.problem(format!("{stack}: planning v2: {e}")),
                }
            }
            Step::Rollback => {
                let (was, is) = (resources(v1), resources(&state));
                if was != is {
                    let changed: BTreeSet<&String> = was
                        .keys()
                        .chain(is.keys())
                        .filter(|id| was.get(*id) != is.get(*id))
                        .collect();
                    let what = format!("{stack}: after the rollback, {changed:?} differ from v1");
                    self.audit.problem(what);
                }
            }
        }
    }

    /// Destroys the stack; then nothing of it may remain, in the state or in AWS.
    async fn destroy(&mut self, stack: &str) {
        let run = self.driver.destroy(stack).await;
        if !matches!(run, Run::Done(_)) {
            self.audit
                .problem(format!("{stack}: destroy: {}", run.short()));
        }
        let stacks = BTreeSet::from([stack.to_string()]);
        let store = self.driver.store().inner();
        let states = self.audit.verify("destroy", store, &stacks).await;
        if let Some(left) = states.get(stack).filter(|s| !s.resources.is_empty()) {
            let ids: Vec<&String> = left.resources.keys().collect();
            self.audit
                .problem(format!("{stack}: after destroy, the state has {ids:?}"));
        }
    }

    /// Every sampled N of `step`, and a summary line.
    async fn run(&mut self, step: Step) {
        let started = Instant::now();
        let before = self.audit.counts;
        let total = self.count(step).await;
        let worker = self.driver.machines.is_some();
        let ns = sample(total, worker);
        eprintln!("[{}] {step:?}: N in {ns:?}", self.label);
        for &n in &ns {
            self.try_n(step, n, total).await;
        }
        let c = delta(self.audit.counts, before);
        let mode = if full() { "full" } else { "sample" };
        eprintln!(
            "[{}] {step:?} SUMMARY: {} of {} N tried ({mode}); {} leaked, {} duplicated, \
             {} missing, {} mismatched, {} unsettled, {} other; {:.0}s",
            self.label,
            ns.len(),
            total + 1,
            c.leaked,
            c.duplicated,
            c.missing,
            c.mismatched,
            c.unsettled,
            c.other,
            started.elapsed().as_secs_f64()
        );
    }

    fn finish(self) {
        let problems = &self.audit.problems;
        assert!(
            problems.is_empty(),
            "{} problem(s):\n{}",
            problems.len(),
            problems.join("\n")
        );
    }
}

/// An engine on the emulator recording in a new SQLite store behind a [`FaultyStore`];
/// `stale`: a lock's holder counts as gone (a crashed process).
async fn crash_engine(stale: bool) -> Arc<Engine<Store>> {
    let emulator = Emulator::shared().await;
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(unique_name("crashes"));
    std::fs::create_dir_all(&dir).expect("the store's directory");
    let sqlite = SqliteStore::open(dir.join("events.db")).expect("a store file");
    let store = Arc::new(FaultyStore::new(sqlite));
    let built = engine(&emulator.sdk_config().await, store);
    let mut e = Arc::into_inner(built).expect("a new engine");
    if stale {
        e.stale = Arc::new(|_| true);
    }
    Arc::new(e)
}

async fn embedded(step: Step) {
    let _serial = SERIAL.lock().await;
    let driver = Driver {
        engine: crash_engine(true).await,
        machines: None,
    };
    let mut c = Campaign::new("embedded", driver).await;
    c.run(step).await;
    c.finish();
}

async fn through_the_worker(step: Step) {
    let _serial = SERIAL.lock().await;
    let engine = crash_engine(false).await;
    let machines = Machines::start(Emulator::shared().await, engine.clone(), 2).await;
    let driver = Driver {
        engine,
        machines: Some(machines),
    };
    let mut c = Campaign::new("worker", driver).await;
    c.run(step).await;
    c.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_update_crashed_after_any_append_is_recovered_embedded() {
    embedded(Step::Update).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rollback_crashed_after_any_append_is_recovered_embedded() {
    embedded(Step::Rollback).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_update_crashed_after_any_append_is_recovered_through_the_worker() {
    through_the_worker(Step::Update).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rollback_crashed_after_any_append_is_recovered_through_the_worker() {
    through_the_worker(Step::Rollback).await;
}

/// The audit is not blind: a leaked queue, a second copy of a recorded one, a deleted
/// topic and a changed parameter behind the engine's back are each counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_audit_counts_a_leak_a_copy_a_missing_and_a_changed_resource() {
    let _serial = SERIAL.lock().await;
    let emulator = Emulator::shared().await;
    let config = emulator.sdk_config().await;
    let driver = Driver {
        engine: crash_engine(true).await,
        machines: None,
    };
    let mut c = Campaign::new("audit", driver).await;
    let (stack, v1) = c.new_stack().await.expect("v1 deploys");
    let sqs = aws_sdk_sqs::Client::new(&config);
    let mut strays = Vec::new();
    for name in [
        format!("{stack}-Stray"),
        format!("{stack}-QueueA-000000000000"),
    ] {
        let made = sqs.create_queue().queue_name(name).send().await;
        strays.extend(made.expect("a stray queue").queue_url);
    }
    let topic = &v1.resources["TopicA"].physical_id;
    let inventory = c.audit.inventory().clone();
    inventory
        .delete("AWS::SNS::Topic", topic, true)
        .await
        .expect("TopicA deleted behind the engine's back");
    let ssm = aws_sdk_ssm::Client::new(&config);
    let param = &v1.resources["ParamB"].physical_id;
    let put = ssm
        .put_parameter()
        .name(param)
        .value("changed")
        .overwrite(true);
    put.send()
        .await
        .expect("ParamB changed behind the engine's back");

    let stacks = BTreeSet::from([stack.clone()]);
    c.audit
        .verify("planting", c.driver.store().inner(), &stacks)
        .await;
    let counts = c.audit.counts;
    for url in &strays {
        let _ = inventory.delete("AWS::SQS::Queue", url, true).await;
    }
    let _ = c.driver.destroy(&stack).await;
    // Missing: TopicA, and its subscription, which went with it (SNS deletes a topic's
    // subscriptions; the audit reads the subscription through SNS, not Cloud Control).
    assert_eq!(
        (counts.leaked, counts.duplicated, counts.missing),
        (1, 1, 2),
        "{counts:?}"
    );
    let problems = c.audit.problems.join("\n");
    assert!(
        problems.contains("ParamB") && problems.contains("recorded \"one\", AWS \"changed\""),
        "{problems}"
    );
    assert!(
        problems.contains("-Stray") && problems.contains("(leaked)"),
        "{problems}"
    );
}

#[test]
fn the_sample_is_every_n_embedded_and_three_through_the_worker() {
    assert_eq!(sample(10, false), (0..=10).collect::<Vec<u64>>());
    if !full() {
        assert_eq!(sample(10, true), [1, 5, 9]);
    }
    let v1 = stack_resources(Version::V1);
    let v3 = stack_resources(Version::V3);
    let all: BTreeSet<&String> = v1.keys().chain(v3.keys()).collect();
    assert_eq!((v1.len(), all.len()), (18, 22));
}
