//! The faults campaign: nothing is lost under faults.
//!
//! Every AWS call of the engine goes through a [`FaultProxy`] in front of the emulator,
//! which faults a seeded 10 % of the requests (a throttling error in the request's
//! protocol, a plain-text 503, a reset before forwarding, a forward whose answer is
//! dropped). With the embedded store (SQLite), and with the DynamoDB store whose own
//! DynamoDB and S3 calls go through the same proxy, a campaign:
//!
//! 1. deploys corpus cases at once: SDK resources (SQS, SNS, SSM, S3, DynamoDB tables with
//!    indexes, IAM roles) and Cloud Control ones (KMS keys and aliases, IAM policies,
//!    queue policies, subscriptions, a global table), plus `replacement-v1`;
//! 2. updates: `replacement-v2` over v1 (updates, replacements, a create, a delete) and
//!    `mappings-findinmap` with another parameter value;
//! 3. a failing deploy: v2 with a changed parameter value, a new topic, and a resource that
//!    fails (an SSM parameter without a value): the deploy fails and rolls back;
//! 4. destroys every stack.
//!
//! After each step, asked through the emulator's own endpoint (not the proxy): every
//! resource of every state exists in AWS, once (no two records of one resource); every
//! resource whose name carries the campaign's tag, and every resource Cloud Control made
//! since the campaign began, is in a state (nothing orphaned, no duplicate); the state's
//! properties match what the providers read back; no intent is left pending and no lock
//! held. After the failed deploy the state is the one before it. After the destroy the
//! states are empty and nothing is left in AWS. The proxy's counts per operation (requests,
//! faults, retries per call) and the DynamoDB store's own retries are printed.
//!
//! Names the templates fix (the FIFO topic, the KMS aliases, the replacement buckets) get
//! the campaign's tag, so that the two stores' campaigns never share a name; they run one
//! after the other (the Cloud Control listings are per type, not per stack).
//!
//! Each campaign runs `STACKFLOW_FAULT_ROUNDS` rounds (default 2), each with the next
//! seed. `STACKFLOW_FAULT_SEED` replays a seed; `STACKFLOW_FAULT_RATE` and
//! `STACKFLOW_FAULT_KINDS` change the rate and the faults (see
//! [`stackflow_tests::faults`]). `STACKFLOW_FAULT_CAMPAIGN=long` adds cases (a state
//! machine, Lambda functions with versions, aliases and event source mappings, log groups,
//! bucket policies) and 5 rounds by default.
//!
//! `faults_store.rs` pins the DynamoDB store's own retries (the SDK's off), and
//! `faults_lost_answers.rs` what each provider does when the answer of a create is lost.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use aws_types::SdkConfig;
use serde_json::{Value, json};
use stackflow_core::template::{StackTemplate, Template};
use stackflow_engine::stack::StackInput;
use stackflow_engine::{
    DeployOptions, Engine, StackReport, StackStatus, deploy_stack, destroy_stack,
};
use stackflow_events::EventStore;
use stackflow_events::projection::StackState;
use stackflow_events::sqlite::SqliteStore;
use stackflow_tests::audit::{Audit, kept_on_destroy, resources};
use stackflow_tests::deploy::{
    cli_config, corpus_template, dynamo_on, dynamo_store, engine, input, summary,
};
use stackflow_tests::faults::{Fault, FaultConfig, FaultProxy};
use stackflow_tests::{Emulator, unique_name};
use tokio::sync::Mutex;
use tokio::task::JoinSet;

/// The two campaigns run one after the other.
static SERIAL: Mutex<()> = Mutex::const_new(());

/// The cases of every campaign: directory, template, short name.
const CASES: &[(&str, &str, &str)] = &[
    ("mappings-findinmap", "MappingsFindInMapStack", "map"),
    ("sqs-sns-subscription", "SqsSnsSubscriptionStack", "sub"),
    ("kms-key-alias", "KmsKeyAliasStack", "kms"),
    ("dynamodb-gsi", "DynamoDbGsiStack", "ddb"),
    ("sub-getatt-nesting", "SubGetAttNestingStack", "sga"),
];
/// The cases a long campaign adds.
const LONG_CASES: &[(&str, &str, &str)] = &[
    ("stepfunctions-statemachine", "StepFunctionsStack", "sfn"),
    ("lambda-role-loggroup", "LambdaRoleLogGroupStack", "lam"),
    ("s3-bucket-policy", "S3BucketPolicyStack", "s3p"),
];
const REPLACEMENT: &str = "ReplacementStack";

/// The operations the campaign never faults, because stackflow does not retry them yet:
/// none now (EC2 `DescribeAvailabilityZones`, sent by the lookups' own EC2 client for
/// `Fn::GetAZs`, was the last; [`a_throttled_availability_zone_lookup_is_retried`] pins
/// that it is retried).
const SPARED: &[&str] = &[];

/// The properties that name a resource, per type: a fixed name gets the tag.
const NAME_PROPERTIES: &[(&str, &str)] = &[
    ("AWS::SNS::Topic", "TopicName"),
    ("AWS::SQS::Queue", "QueueName"),
    ("AWS::S3::Bucket", "BucketName"),
    ("AWS::KMS::Alias", "AliasName"),
    ("AWS::DynamoDB::Table", "TableName"),
    ("AWS::DynamoDB::GlobalTable", "TableName"),
    ("AWS::IAM::Role", "RoleName"),
    ("AWS::Lambda::Function", "FunctionName"),
    ("AWS::Logs::LogGroup", "LogGroupName"),
    ("AWS::SSM::Parameter", "Name"),
    ("AWS::Events::EventBus", "Name"),
    ("AWS::StepFunctions::StateMachine", "StateMachineName"),
];

fn long() -> bool {
    std::env::var("STACKFLOW_FAULT_CAMPAIGN").is_ok_and(|v| v.trim() == "long")
}

/// A corpus template, its fixed names tagged.
fn load(dir: &str, stem: &str, tag: &str) -> StackTemplate {
    let mut stack = corpus_template(dir, stem);
    tag_names(&mut stack.template, tag);
    stack
}

fn tag_names(template: &mut Template, tag: &str) {
    for r in template.resources.values_mut() {
        let Some((_, prop)) = NAME_PROPERTIES.iter().find(|(ty, _)| *ty == r.ty) else {
            continue;
        };
        if let Some(Value::String(name)) = r.properties.get_mut(*prop) {
            *name = match (name.strip_prefix("alias/"), name.strip_prefix('/')) {
                (Some(rest), _) => format!("alias/{tag}-{rest}"),
                (None, Some(rest)) => format!("/{tag}/{rest}"),
                (None, None) => format!("{tag}-{name}"),
            };
        }
    }
}

/// v2 of the replacement case with a changed value, a new topic, and a parameter
/// without a value (refused by the provider) that waits for both: the deploy fails after
/// the update and the create, and rolls them back.
fn failing(v2: &StackTemplate) -> StackTemplate {
    let mut v3 = v2.clone();
    let t = &mut v3.template;
    let stat = t
        .resources
        .get_mut("Static3DDAA197")
        .expect("v2 has Static");
    stat.properties.insert("Value".into(), json!("value-3"));
    let mut topic = t.resources["AddedInV29500A960"].clone();
    topic.properties.clear();
    t.resources.insert("AddedInV3".into(), topic);
    let mut broken = t.resources["Static3DDAA197"].clone();
    broken.properties = json!({"Type": "String"})
        .as_object()
        .cloned()
        .unwrap_or_default();
    broken.depends_on = vec!["AddedInV3".into(), "Static3DDAA197".into()];
    t.resources.insert("BrokenParameter".into(), broken);
    v3
}

fn options(allow_stateful_replacement: bool) -> DeployOptions {
    let mut o = DeployOptions::new();
    o.allow_stateful_replacement = allow_stateful_replacement;
    o
}

/// One campaign: an engine on the proxy, its store, and what it checks with.
struct Campaign<S> {
    engine: Arc<Engine<S>>,
    /// The same store on the emulator's own endpoint, for the checks.
    direct: Arc<S>,
    /// The stacks deployed, by name.
    stacks: BTreeSet<String>,
    /// The checks (the campaign's tag, types, baseline, problems).
    audit: Audit,
}

impl<S: EventStore + 'static> Campaign<S> {
    fn label(&self) -> &str {
        &self.audit.label
    }

    fn problem(&mut self, what: String) {
        self.audit.problem(what);
    }

    fn stack(&self, short: &str) -> String {
        format!("{}-{short}", self.audit.tag)
    }

    /// Deploys stacks at once; `Err` when the engine could not run.
    async fn deploy_all(
        &mut self,
        runs: Vec<(String, StackInput, bool)>,
    ) -> BTreeMap<String, Result<StackReport, String>> {
        let mut set = JoinSet::new();
        for (name, input, allow) in runs {
            self.stacks.insert(name.clone());
            for r in input.template.resources.values() {
                self.audit.types.insert(r.ty.clone());
            }
            let engine = self.engine.clone();
            set.spawn(async move {
                let report = deploy_stack(engine, input, options(allow)).await;
                (name, report.map_err(|e| e.to_string()))
            });
        }
        let mut out = BTreeMap::new();
        while let Some(joined) = set.join_next().await {
            let (name, report) = joined.expect("a deploy task panicked");
            out.insert(name, report);
        }
        out
    }

    /// Deploys and expects every stack to succeed.
    async fn deploy_ok(&mut self, step: &str, runs: Vec<(String, StackInput, bool)>) {
        for (name, report) in self.deploy_all(runs).await {
            match report {
                Ok(r) if r.status == StackStatus::Succeeded => {
                    eprintln!("[{}] {step} {name}: {}", self.label(), summary(&r));
                }
                Ok(r) => self.problem(format!("{step} {name}: {}", summary(&r))),
                Err(e) => self.problem(format!("{step} {name}: the engine failed: {e}")),
            }
        }
    }

    async fn destroy_all(&mut self) {
        let mut set = JoinSet::new();
        for name in &self.stacks {
            let (engine, name) = (self.engine.clone(), name.clone());
            set.spawn(async move {
                let report = destroy_stack(engine, &name, DeployOptions::new()).await;
                (name, report.map_err(|e| e.to_string()))
            });
        }
        while let Some(joined) = set.join_next().await {
            let (name, report) = joined.expect("a destroy task panicked");
            match report {
                Ok(r) if matches!(r.status, StackStatus::Succeeded | StackStatus::NoChanges) => {
                    eprintln!("[{}] destroy {name}: {}", self.label(), summary(&r));
                }
                Ok(r) => self.problem(format!("destroy {name}: {}", summary(&r))),
                Err(e) => self.problem(format!("destroy {name}: the engine failed: {e}")),
            }
        }
    }

    /// Checks every state against AWS, and AWS against the states (see
    /// [`stackflow_tests::audit`]). Returns the states.
    async fn verify(&mut self, step: &str) -> BTreeMap<String, StackState> {
        self.audit.verify(step, &*self.direct, &self.stacks).await
    }
}

impl<S: EventStore + 'static> Campaign<S> {
    /// The four steps (see the module documentation).
    async fn run(&mut self) {
        let started = Instant::now();
        let mut cases: Vec<(&str, &str, &str)> = CASES.to_vec();
        if long() {
            cases.extend_from_slice(LONG_CASES);
        }
        let tag = self.audit.tag.clone();
        let stacks: Vec<(String, StackTemplate)> = cases
            .iter()
            .map(|(dir, stem, short)| (self.stack(short), load(dir, stem, &tag)))
            .collect();
        let v1 = load("replacement-v1", REPLACEMENT, &tag);
        let v2 = load("replacement-v2", REPLACEMENT, &tag);
        let replacement = self.stack("rep");
        let mut types: BTreeSet<String> = BTreeSet::new();
        for t in stacks.iter().map(|(_, s)| s).chain([&v1, &v2]) {
            types.extend(t.template.resources.values().map(|r| r.ty.clone()));
        }
        self.audit.take_baseline(&types).await;

        let mut runs: Vec<(String, StackInput, bool)> = stacks
            .iter()
            .map(|(name, s)| (name.clone(), input(s, name), false))
            .collect();
        runs.push((replacement.clone(), input(&v1, &replacement), false));
        self.deploy_ok("deploy", runs).await;
        self.verify("deploy").await;
        self.checked("deploy", started);

        let map = self.stack("map");
        let mut prod = stacks[0].1.clone();
        prod.parameters.insert("Env".into(), "prod".into());
        let updates = vec![
            (replacement.clone(), input(&v2, &replacement), true),
            (map.clone(), input(&prod, &map), false),
        ];
        self.deploy_ok("update", updates).await;
        let before = self.verify("update").await;
        self.checked("update", started);

        let states = self.failing_deploy(&replacement, &v2, &before).await;
        self.checked("rollback", started);

        let retained = kept_on_destroy(&states);
        self.destroy_all().await;
        self.audit.clean_up_retained(&retained).await;
        let after = self.verify("destroy").await;
        for (stack, state) in after {
            if !state.resources.is_empty() {
                let ids: Vec<&String> = state.resources.keys().collect();
                self.problem(format!("after destroy: {stack} still has {ids:?}"));
            }
        }
        self.checked("destroy", started);
    }

    fn checked(&self, step: &str, started: Instant) {
        let at = started.elapsed().as_secs_f64();
        eprintln!("[{}] {step} checked at {at:.1}s", self.label());
    }

    /// Step 3: a deploy that fails and rolls back to the state before it. Returns the
    /// states after it.
    async fn failing_deploy(
        &mut self,
        stack: &str,
        v2: &StackTemplate,
        before: &BTreeMap<String, StackState>,
    ) -> BTreeMap<String, StackState> {
        let runs = vec![(stack.to_string(), input(&failing(v2), stack), true)];
        let report = self.deploy_all(runs).await.remove(stack);
        match report {
            Some(Ok(r)) => {
                let rolled_back = r.rollback.as_ref().is_some_and(|rb| rb.complete());
                let only_broken = r.failures.iter().all(|f| f.logical_id == "BrokenParameter");
                eprintln!("[{}] failing deploy {stack}: {}", self.label(), summary(&r));
                if r.status != StackStatus::Failed || !rolled_back || !only_broken {
                    self.problem(format!("failing deploy {stack}: {}", summary(&r)));
                }
            }
            Some(Err(e)) => self.problem(format!("failing deploy {stack}: the engine failed: {e}")),
            None => self.problem(format!("failing deploy {stack}: no report")),
        }
        let after = self.verify("rollback").await;
        let (Some(was), Some(is)) = (before.get(stack), after.get(stack)) else {
            return after;
        };
        let (was, is) = (resources(was), resources(is));
        if was != is {
            let changed: Vec<&String> = was
                .keys()
                .chain(is.keys())
                .filter(|id| was.get(*id) != is.get(*id))
                .collect();
            self.problem(format!(
                "after rollback: {stack} differs from before the deploy in {changed:?}"
            ));
        }
        after
    }
}

/// Runs a campaign on `store` (`direct`: the same store, not through the proxy), prints
/// its counts, and fails with every problem it found.
async fn campaign<S: EventStore + 'static>(
    label: &'static str,
    proxy: &FaultProxy,
    config: &SdkConfig,
    store: Arc<S>,
    direct: Arc<S>,
    retries: impl Fn() -> Option<String>,
) -> Vec<String> {
    let emulator = Emulator::shared().await;
    let mut c = Campaign {
        engine: engine(config, store),
        direct,
        stacks: BTreeSet::new(),
        audit: Audit::new(emulator, label, &unique_name("f")).await,
    };
    let started = Instant::now();
    c.run().await;
    let totals = proxy.totals();
    eprintln!(
        "[{label}] seed {}: {} requests, {} faulted, in {:.1}s\n{}",
        proxy.seed(),
        totals.seen,
        totals.faulted(),
        started.elapsed().as_secs_f64(),
        proxy.report()
    );
    if let Some(r) = retries() {
        eprintln!("[{label}] {r}");
    }
    c.audit.problems
}

/// The faults of a campaign: from the environment, [`SPARED`] spared.
fn campaign_config() -> FaultConfig {
    FaultConfig {
        spared: SPARED.iter().map(|s| s.to_string()).collect(),
        ..FaultConfig::from_env()
    }
}

fn rounds() -> u64 {
    let default = if long() { 5 } else { 2 };
    std::env::var("STACKFLOW_FAULT_ROUNDS")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

fn finish(problems: Vec<String>, seed: u64) {
    assert!(
        problems.is_empty(),
        "{} problem(s) under faults (STACKFLOW_FAULT_SEED={seed} replays):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nothing_is_lost_under_faults_with_the_embedded_store() {
    let _serial = SERIAL.lock().await;
    let emulator = Emulator::shared().await;
    let config = campaign_config();
    let mut problems = Vec::new();
    for round in 0..rounds() {
        let round_config = FaultConfig {
            seed: config.seed + round,
            ..config.clone()
        };
        let proxy = FaultProxy::start(emulator.endpoint(), round_config)
            .await
            .expect("the fault proxy");
        let sdk = cli_config(&emulator.sdk_config().await, &proxy.endpoint());
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(unique_name("faults"));
        std::fs::create_dir_all(&dir).expect("the store's directory");
        let store = Arc::new(SqliteStore::open(dir.join("events.db")).expect("a store file"));
        problems.extend(campaign("sqlite", &proxy, &sdk, store.clone(), store, || None).await);
        let _ = std::fs::remove_dir_all(&dir);
    }
    finish(problems, config.seed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nothing_is_lost_under_faults_with_the_dynamodb_store() {
    let _serial = SERIAL.lock().await;
    let emulator = Emulator::shared().await;
    let direct_config = emulator.sdk_config().await;
    let (table, bucket, direct) = dynamo_store(emulator).await;
    let config = campaign_config();
    let mut problems = Vec::new();
    for round in 0..rounds() {
        let round_config = FaultConfig {
            seed: config.seed + round,
            ..config.clone()
        };
        let proxy = FaultProxy::start(emulator.endpoint(), round_config)
            .await
            .expect("the fault proxy");
        let sdk = cli_config(&direct_config, &proxy.endpoint());
        let store = dynamo_on(&sdk, &table, &bucket);
        let counted = store.clone();
        let retries = move || {
            Some(format!(
                "DynamoDB store: {} requests, {} retries (its own and the SDK's)",
                counted.requests(),
                counted.retries()
            ))
        };
        problems.extend(campaign("dynamodb", &proxy, &sdk, store, direct.clone(), retries).await);
    }
    finish(problems, config.seed);
}

/// One throttling answer to the availability zones' lookup (`Fn::GetAZs`) is retried:
/// the deploy goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_availability_zone_lookup_is_retried() {
    let emulator = Emulator::shared().await;
    let config = FaultConfig::first("DescribeAvailabilityZones", Fault::Throttle, 1);
    let proxy = FaultProxy::start(emulator.endpoint(), config)
        .await
        .expect("the fault proxy");
    let sdk = cli_config(&emulator.sdk_config().await, &proxy.endpoint());
    let store = Arc::new(SqliteStore::open_in_memory().expect("a store"));
    let name = unique_name("azs");
    let stack = load("sub-getatt-nesting", "SubGetAttNestingStack", &name);
    let engine = engine(&sdk, store);
    let report = deploy_stack(engine.clone(), input(&stack, &name), options(false))
        .await
        .expect("the deploy after a throttled lookup");
    assert_eq!(
        report.status,
        StackStatus::Succeeded,
        "{}",
        summary(&report)
    );
    assert_eq!(
        proxy.faults_of("DescribeAvailabilityZones", Fault::Throttle),
        1
    );
    let destroyed = destroy_stack(engine, &name, DeployOptions::new())
        .await
        .expect("the destroy");
    assert_eq!(
        destroyed.status,
        StackStatus::Succeeded,
        "{}",
        summary(&destroyed)
    );
}
