//! The rig of the Step Functions tests: the definitions of `infra/` created in the
//! emulator with each task pointed at an activity, and `stackflow worker`'s loop (run
//! in-process) polling those activities and running the same handlers as the embedded
//! engine. Shared by `stepfunctions.rs` and `stepfunctions_bounds.rs`.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_sfn::types::ExecutionStatus;
use serde_json::Value;
use stackflow_core::intrinsics::{Pseudo, bind_parameters};
use stackflow_core::template::Template;
use stackflow_engine::Engine;
use stackflow_engine::definitions::{self, Target};
use stackflow_engine::progress::Silent;
use stackflow_engine::sfn::history::HistoryGuard;
use stackflow_engine::sfn::tasks::MapOrder;
use stackflow_engine::stack::StackInput;
use stackflow_engine::tasks::{DeployRequest, Tasks};
use stackflow_engine::worker::{Worker, ensure_activities};
use stackflow_events::StreamId;
use stackflow_events::sqlite::SqliteStore;
use stackflow_providers::lookups::AwsLookups;
use stackflow_providers::router::Providers;
use stackflow_tests::{Emulator, unique_name};
use tokio::sync::watch;

pub struct Rig {
    pub sfn: aws_sdk_sfn::Client,
    pub s3: aws_sdk_s3::Client,
    pub sqs: aws_sdk_sqs::Client,
    pub bucket: String,
    pub store: Arc<SqliteStore>,
    pub machines: BTreeMap<&'static str, String>,
    pub stop: watch::Sender<bool>,
    pub tasks: Arc<Tasks<SqliteStore>>,
    pub activities: BTreeMap<String, String>,
    /// The proxy that slows the providers' calls down, when the rig has one.
    pub slow: Option<stackflow_tests::latency::LatencyProxy>,
}

pub async fn rig(workers: usize) -> Rig {
    rig_with(workers, 20).await
}

pub async fn rig_with(workers: usize, heartbeat: u32) -> Rig {
    rig_built(
        workers,
        heartbeat,
        None,
        HistoryGuard::default(),
        MapOrder::default(),
    )
    .await
}

/// A rig whose Plan and Conclude give a phase's `Map` its items dependents first, the
/// order that would deadlock gates that wait for iterations not begun.
pub async fn rig_reversed(workers: usize, heartbeat: u32) -> Rig {
    let guard = HistoryGuard::default();
    rig_built(workers, heartbeat, None, guard, MapOrder::Reversed).await
}

/// A rig whose gates stop a deploy at `history`'s limit.
pub async fn rig_with_history(workers: usize, history: HistoryGuard) -> Rig {
    rig_built(workers, 20, None, history, MapOrder::default()).await
}

/// A rig whose providers' AWS calls each take `latency` more (through a
/// [`LatencyProxy`](stackflow_tests::latency::LatencyProxy)), so that actions last long
/// enough to overlap.
pub async fn rig_slow(workers: usize, latency: Duration) -> Rig {
    rig_built(
        workers,
        20,
        Some(latency),
        HistoryGuard::default(),
        MapOrder::default(),
    )
    .await
}

async fn rig_built(
    workers: usize,
    heartbeat: u32,
    latency: Option<Duration>,
    history: HistoryGuard,
    map_order: MapOrder,
) -> Rig {
    let emu = Emulator::shared().await;
    let config = emu.sdk_config().await;
    let slow = match latency {
        Some(latency) => Some(
            stackflow_tests::latency::LatencyProxy::start(emu.endpoint(), latency)
                .await
                .unwrap(),
        ),
        None => None,
    };
    let provider_config = match &slow {
        Some(proxy) => config.to_builder().endpoint_url(proxy.endpoint()).build(),
        None => config.clone(),
    };
    let sfn = aws_sdk_sfn::Client::new(&config);
    let s3 = emu.s3().await;
    let bucket = unique_name("sf-engine").to_lowercase();
    s3.create_bucket().bucket(&bucket).send().await.unwrap();
    let dir = std::env::temp_dir().join(unique_name("sf-store"));
    let store = Arc::new(SqliteStore::open(dir.join("events.db")).unwrap());
    let engine = Arc::new(Engine {
        store: store.clone(),
        providers: Arc::new(Providers::from_config(
            &provider_config,
            Some(bucket.clone()),
        )),
        lookups: Arc::new(AwsLookups::new(&config)),
        region: "us-east-1".into(),
        who: "worker-test".into(),
        cloudformation_fallback: false,
        progress: Arc::new(Silent),
        stale: Arc::new(|_| false),
        digest_key: None,
        lease: None,
    });
    let tasks = Arc::new(Tasks {
        engine,
        s3: s3.clone(),
        sfn: sfn.clone(),
        bucket: bucket.clone(),
        kms_key: None,
        allowed_types: None,
        history,
        map_order,
    });
    let prefix = unique_name("sf");
    let activities = ensure_activities(&sfn, &prefix).await.unwrap();
    let mut machines = BTreeMap::new();
    for (name, def) in definitions::ALL {
        let text =
            definitions::render(def, &Target::Activities(activities.clone(), heartbeat)).unwrap();
        let arn = sfn
            .create_state_machine()
            .name(format!("{prefix}-{name}"))
            .definition(text)
            .role_arn("arn:aws:iam::123456789012:role/stackflow-engine")
            .send()
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "CreateStateMachine {name}: {}",
                    aws_sdk_sfn::error::DisplayErrorContext(e)
                )
            })
            .state_machine_arn;
        machines.insert(*name, arn);
    }
    let (stop, rx) = watch::channel(false);
    let rig = Rig {
        sfn,
        s3,
        sqs: aws_sdk_sqs::Client::new(&config),
        bucket,
        store,
        machines,
        stop,
        tasks,
        activities,
        slow,
    };
    for i in 0..workers {
        tokio::spawn(rig.worker(&format!("test-worker-{i}")).run(rx.clone()));
    }
    rig
}

impl Rig {
    pub fn worker(&self, name: &str) -> Worker<SqliteStore> {
        self.worker_of(name, |_| true)
    }

    /// A worker that polls only the activities of the tasks `which` keeps.
    pub fn worker_of(&self, name: &str, which: impl Fn(&str) -> bool) -> Worker<SqliteStore> {
        let activities = self
            .activities
            .iter()
            .filter(|(task, _)| which(task))
            .map(|(t, a)| (t.clone(), a.clone()))
            .collect();
        Worker {
            tasks: self.tasks.clone(),
            sfn: self.sfn.clone(),
            activities,
            name: name.to_string(),
            per_task: 8,
            heartbeat: Duration::from_secs(1),
        }
    }
}

pub fn input(stack: &str, template: Template) -> StackInput {
    let parameters = bind_parameters(&template, &Default::default()).unwrap();
    StackInput {
        name: stack.into(),
        source: format!("{stack}.yaml"),
        template,
        parameters,
        pseudo: Pseudo {
            region: "us-east-1".into(),
            account_id: Some("123456789012".into()),
            stack_name: stack.into(),
            stack_id: None,
        },
        nested: Default::default(),
    }
}

pub fn template(v: Value) -> Template {
    Template::from_value(&v).unwrap()
}

impl Rig {
    /// Uploads the input, starts `machine` and waits for its end: (status, output or error).
    pub async fn run(
        &self,
        machine: &str,
        execution_input: Value,
    ) -> (ExecutionStatus, Value, String) {
        let (status, output, error, _) = self.run_counted(machine, execution_input).await;
        (status, output, error)
    }

    /// [`Rig::run`], also counting the execution's state transitions (states entered,
    /// inner `Map` states included: what Step Functions bills).
    pub async fn run_counted(
        &self,
        machine: &str,
        execution_input: Value,
    ) -> (ExecutionStatus, Value, String, usize) {
        let arn = self.start(machine, execution_input).await;
        self.wait_counted(&arn).await
    }

    /// Starts `machine`; its execution's ARN.
    pub async fn start(&self, machine: &str, execution_input: Value) -> String {
        self.sfn
            .start_execution()
            .state_machine_arn(&self.machines[machine])
            .name(unique_name("x"))
            .input(execution_input.to_string())
            .send()
            .await
            .unwrap()
            .execution_arn
    }

    /// Waits for the execution `arn` to end (at most 2 minutes).
    pub async fn wait_counted(&self, arn: &str) -> (ExecutionStatus, Value, String, usize) {
        for _ in 0..1200 {
            let d = self
                .sfn
                .describe_execution()
                .execution_arn(arn)
                .send()
                .await
                .unwrap();
            if d.status != ExecutionStatus::Running {
                let output = d
                    .output
                    .as_deref()
                    .and_then(|o| serde_json::from_str(o).ok())
                    .unwrap_or(Value::Null);
                let mut error = format!("{:?}: {:?}", d.error, d.cause);
                let history = self.history(arn).await;
                let transitions = history
                    .iter()
                    .filter(|e| e.r#type().as_str().ends_with("StateEntered"))
                    .count();
                if std::env::var("STACKFLOW_TEST_HISTORY").is_ok() {
                    for e in &history {
                        let detail = e
                            .task_failed_event_details()
                            .map(|d| format!("{:?} {:?}", d.error(), d.cause()))
                            .unwrap_or_default();
                        error.push_str(&format!("\nHistory {} {:?} {detail}", e.id(), e.r#type()));
                    }
                }
                return (d.status, output, error, transitions);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("execution {arn} did not end in 2 minutes");
    }

    pub async fn deploy(&self, stack: &StackInput) -> (ExecutionStatus, Value, String) {
        let (status, output, error, _) = self.deploy_counted(stack).await;
        (status, output, error)
    }

    pub async fn deploy_counted(
        &self,
        stack: &StackInput,
    ) -> (ExecutionStatus, Value, String, usize) {
        let req = self.upload(stack, None).await;
        self.run_counted("deploy", serde_json::to_value(req).unwrap())
            .await
    }

    /// Uploads `stack`'s input: the deploy's execution input.
    pub async fn upload(&self, stack: &StackInput, deploy_id: Option<String>) -> DeployRequest {
        let key = format!("inputs/{}/{}.json", stack.name, unique_name("in"));
        self.s3
            .put_object()
            .bucket(&self.bucket)
            .key(&key)
            .body(serde_json::to_vec(stack).unwrap().into())
            .send()
            .await
            .unwrap();
        DeployRequest {
            stack: stack.name.clone(),
            input_key: key,
            no_rollback: false,
            concurrency: 40,
            deploy_id,
            allow_stateful_replacement: false,
            expected_plan: None,
        }
    }

    pub async fn queue_exists(&self, url: &str) -> bool {
        self.sqs
            .get_queue_attributes()
            .queue_url(url)
            .send()
            .await
            .is_ok()
    }
}

/// Test-only reading of every event body of a stream.
pub trait ReadAll {
    async fn read_all_for_test(&self, stream: &StreamId) -> Vec<stackflow_events::Event>;
}

impl ReadAll for SqliteStore {
    async fn read_all_for_test(&self, stream: &StreamId) -> Vec<stackflow_events::Event> {
        use stackflow_events::EventStore;
        self.read(stream, 0)
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.event)
            .collect()
    }
}

impl Rig {
    /// Appends `event` to `stack`'s stream as the run `holder` (which holds the lock).
    pub async fn append_as(
        &self,
        stack: &str,
        holder: &str,
        key: &str,
        event: stackflow_events::Event,
    ) {
        use stackflow_events::{EventStore, NewEvent, Precondition};
        self.store
            .append(
                &StreamId::new("us-east-1", stack),
                &NewEvent::new(key, event),
                &Precondition::HoldsLock(holder.into()),
            )
            .await
            .unwrap();
    }

    /// Every event of execution `arn`'s history, all pages.
    pub async fn history(&self, arn: &str) -> Vec<aws_sdk_sfn::types::HistoryEvent> {
        let mut events = Vec::new();
        let mut next: Option<String> = None;
        loop {
            let page = self
                .sfn
                .get_execution_history()
                .execution_arn(arn)
                .max_results(1000)
                .set_next_token(next.clone())
                .send()
                .await
                .unwrap();
            events.extend(page.events().iter().cloned());
            match page.next_token() {
                Some(t) => next = Some(t.to_string()),
                None => return events,
            }
        }
    }

    /// Waits until the execution `arn` has entered the state `name` (at most a minute).
    pub async fn entered(&self, arn: &str, name: &str) -> bool {
        self.history_shows(arn, |e| {
            e.state_entered_event_details()
                .is_some_and(|d| d.name() == name)
        })
        .await
    }

    /// Waits until the execution `arn` has scheduled a task of `activity` (at most a
    /// minute): fakecloud records an activity task as `TaskScheduled`, AWS as
    /// `ActivityScheduled`.
    pub async fn scheduled(&self, arn: &str, activity: &str) -> bool {
        self.history_shows(arn, |e| {
            e.task_scheduled_event_details()
                .is_some_and(|d| d.resource() == activity)
                || e.activity_scheduled_event_details()
                    .is_some_and(|d| d.resource() == activity)
        })
        .await
    }

    /// Waits until an event of the execution `arn`'s history satisfies `seen` (at most a
    /// minute).
    async fn history_shows(
        &self,
        arn: &str,
        seen: impl Fn(&aws_sdk_sfn::types::HistoryEvent) -> bool,
    ) -> bool {
        for _ in 0..600 {
            let h = self
                .sfn
                .get_execution_history()
                .execution_arn(arn)
                .max_results(1000)
                .send()
                .await
                .unwrap();
            if h.events().iter().any(&seen) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    }
}
