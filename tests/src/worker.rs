//! An engine run through Step Functions on the emulator: the definitions of `infra/`
//! created with each task pointed at an activity, and `stackflow worker`'s loop run in
//! this process (polling those activities, running the embedded engine's handlers) over
//! any engine, so that a test can give the worker a store that fails.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_sfn::error::DisplayErrorContext;
use aws_sdk_sfn::types::ExecutionStatus;
use serde_json::Value;
use stackflow_engine::Engine;
use stackflow_engine::definitions::{self, Target};
use stackflow_engine::stack::StackInput;
use stackflow_engine::tasks::{DeployRequest, StackRequest, Tasks};
use stackflow_engine::worker::{Worker, ensure_activities};
use stackflow_events::EventStore;
use tokio::sync::watch;

use crate::{Emulator, unique_name};

/// How an execution ended: its status and, when it did not succeed, its error and cause.
#[derive(Debug, Clone)]
pub struct Ended {
    /// The execution's status.
    pub status: ExecutionStatus,
    /// `error: cause` when it failed.
    pub error: String,
    /// It did not end within [`EXECUTION_LIMIT`], and was stopped.
    pub hung: bool,
    /// When it was stopped, it had looped through `WaitForRunningCalls`: its Fail task was
    /// waiting for calls it cannot stop (intents without an outcome, waited for up to a
    /// task's longest run), which it does by design.
    pub waiting: bool,
}

/// The state machines of one engine, its bucket, and the workers polling its activities.
pub struct Machines {
    sfn: aws_sdk_sfn::Client,
    s3: aws_sdk_s3::Client,
    bucket: String,
    arns: BTreeMap<&'static str, String>,
    stop: watch::Sender<bool>,
}

/// How long an execution may take before [`Machines::run`] gives up on it.
pub const EXECUTION_LIMIT: Duration = Duration::from_secs(150);

impl Machines {
    /// Creates the activities and state machines of a new engine on `emulator`, and starts
    /// `workers` workers that run `engine`'s handlers (artifacts in a new bucket).
    pub async fn start<S: EventStore + 'static>(
        emulator: &Emulator,
        engine: Arc<Engine<S>>,
        workers: usize,
    ) -> Machines {
        let config = emulator.sdk_config().await;
        let sfn = aws_sdk_sfn::Client::new(&config);
        let s3 = emulator.s3().await;
        let bucket = unique_name("sf-engine").to_lowercase();
        s3.create_bucket()
            .bucket(&bucket)
            .send()
            .await
            .expect("the engine's bucket");
        let prefix = unique_name("sf");
        let activities = ensure_activities(&sfn, &prefix)
            .await
            .expect("the activities");
        let mut arns = BTreeMap::new();
        for (name, def) in definitions::ALL {
            let target = Target::Activities(activities.clone(), 20);
            let text = definitions::render(def, &target).expect("a definition");
            let created = sfn
                .create_state_machine()
                .name(format!("{prefix}-{name}"))
                .definition(text)
                .role_arn("arn:aws:iam::123456789012:role/stackflow-engine")
                .send()
                .await;
            let created = created.unwrap_or_else(|e| {
                panic!("CreateStateMachine {name}: {}", DisplayErrorContext(e))
            });
            arns.insert(*name, created.state_machine_arn);
        }
        let tasks = Arc::new(Tasks {
            engine,
            s3: s3.clone(),
            sfn: sfn.clone(),
            bucket: bucket.clone(),
            kms_key: None,
            allowed_types: None,
            history: Default::default(),
            map_order: Default::default(),
        });
        let (stop, rx) = watch::channel(false);
        for i in 0..workers {
            let worker = Worker {
                tasks: tasks.clone(),
                sfn: sfn.clone(),
                activities: activities.clone(),
                name: format!("crash-worker-{i}"),
                per_task: 8,
                heartbeat: Duration::from_secs(1),
            };
            tokio::spawn(worker.run(rx.clone()));
        }
        Machines {
            sfn,
            s3,
            bucket,
            arns,
            stop,
        }
    }

    /// Deploys `stack` as an execution of the deploy state machine, and waits for its end.
    pub async fn deploy(&self, stack: &StackInput, allow_stateful_replacement: bool) -> Ended {
        let key = format!("inputs/{}/{}.json", stack.name, unique_name("in"));
        let body = serde_json::to_vec(stack).expect("a stack input is JSON");
        self.s3
            .put_object()
            .bucket(&self.bucket)
            .key(&key)
            .body(body.into())
            .send()
            .await
            .expect("the input uploaded");
        let request = DeployRequest {
            stack: stack.name.clone(),
            input_key: key,
            no_rollback: false,
            concurrency: 40,
            deploy_id: None,
            allow_stateful_replacement,
            expected_plan: None,
        };
        let input = serde_json::to_value(request).expect("a request is JSON");
        self.run("deploy", input).await
    }

    /// Runs the `destroy` or `rollback` state machine on `stack`, and waits for its end.
    pub async fn on_stack(&self, machine: &str, stack: &str) -> Ended {
        let request = StackRequest {
            stack: stack.to_string(),
        };
        let input = serde_json::to_value(request).expect("a request is JSON");
        self.run(machine, input).await
    }

    /// Starts an execution of `machine` and waits for its end; one that runs longer than
    /// [`EXECUTION_LIMIT`] is stopped (and said to have hung).
    pub async fn run(&self, machine: &str, input: Value) -> Ended {
        let started = self
            .sfn
            .start_execution()
            .state_machine_arn(&self.arns[machine])
            .name(unique_name("x"))
            .input(input.to_string())
            .send()
            .await;
        let arn = started
            .unwrap_or_else(|e| panic!("StartExecution {machine}: {}", DisplayErrorContext(e)))
            .execution_arn;
        let since = Instant::now();
        let mut looked = since;
        while since.elapsed() < EXECUTION_LIMIT {
            // A Fail task that waits for calls it cannot stop loops for up to a task's
            // longest run: once it does, the execution is stopped as an operator would.
            if looked.elapsed() > Duration::from_secs(5) {
                looked = Instant::now();
                if self.entered(&arn, "WaitForRunningCalls").await {
                    return self.stop(&arn, true).await;
                }
            }
            let described = self
                .sfn
                .describe_execution()
                .execution_arn(&arn)
                .send()
                .await;
            let d = described
                .unwrap_or_else(|e| panic!("DescribeExecution: {}", DisplayErrorContext(e)));
            if d.status != ExecutionStatus::Running {
                let error = format!(
                    "{}: {}",
                    d.error.unwrap_or_default(),
                    d.cause.unwrap_or_default()
                );
                return Ended {
                    status: d.status,
                    error,
                    hung: false,
                    waiting: false,
                };
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let waiting = self.entered(&arn, "WaitForRunningCalls").await;
        self.stop(&arn, waiting).await
    }

    /// Stops execution `arn`, which has run too long (`waiting`: for calls it cannot stop).
    async fn stop(&self, arn: &str, waiting: bool) -> Ended {
        let stopped = self.sfn.stop_execution().execution_arn(arn).send().await;
        let stopped =
            stopped.map_or_else(|e| DisplayErrorContext(e).to_string(), |_| "stopped".into());
        Ended {
            status: ExecutionStatus::Aborted,
            error: match waiting {
                true => format!("execution {arn} waited for running calls ({stopped})"),
                false => format!("execution {arn} did not end in {EXECUTION_LIMIT:?} ({stopped})"),
            },
            hung: !waiting,
            waiting,
        }
    }

    /// Whether execution `arn` entered state `name` (in its last 1000 events).
    async fn entered(&self, arn: &str, name: &str) -> bool {
        let history = self
            .sfn
            .get_execution_history()
            .execution_arn(arn)
            .reverse_order(true)
            .max_results(1000)
            .send()
            .await;
        let Ok(history) = history else {
            return false;
        };
        history.events().iter().any(|e| {
            e.state_entered_event_details()
                .is_some_and(|d| d.name() == name)
        })
    }
}

impl Drop for Machines {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}
