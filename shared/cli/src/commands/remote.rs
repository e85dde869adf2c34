//! The engine on Step Functions: `deploy|destroy|rollback --remote` start an execution
//! and follow the stack's events; `worker` runs the executions' tasks on this machine.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use aws_sdk_sfn::types::ExecutionStatus;
use serde_json::Value;
use stackflow_core::partition::partition;
use stackflow_engine::definitions::{self, Target};
use stackflow_engine::engine::{DeployOptions, Engine};
use stackflow_engine::keys::new_id;
use stackflow_engine::sfn::errors::ErrorKind;
use stackflow_engine::stack::StackInput;
use stackflow_engine::tasks::{DeployRequest, StackRequest, Tasks};
use stackflow_engine::worker::{Worker, ensure_activities};
use stackflow_events::{EventStore, StreamId};
use stackflow_providers::aws::s3_client;

use crate::args::{GlobalArgs, RemoteArgs, WorkerArgs};
use crate::render;
use crate::setup::{Setup, setup_with, stop_on_ctrl_c};
use crate::store::Store;

/// What a remote run needs: the engine's clients and names.
pub struct Remote {
    sfn: aws_sdk_sfn::Client,
    s3: aws_sdk_s3::Client,
    bucket: String,
    engine: String,
    region: String,
    account: String,
    /// `--json`: each run's result is a JSON line on stdout (camelCase), not text.
    pub json: bool,
}

impl Remote {
    pub async fn new(
        global: &GlobalArgs,
        args: &RemoteArgs,
        setup: &Setup,
    ) -> anyhow::Result<Remote> {
        let config = crate::aws::load(global).await;
        let Some(bucket) = global.store_bucket.clone() else {
            bail!(
                "--remote needs the engine's bucket, where the template goes for the execution: pass --store-bucket NAME (or set STACKFLOW_BUCKET)"
            );
        };
        let Some(account) = setup.account_id.clone() else {
            bail!(
                "--remote needs the AWS account id, and STS did not give it (see the note above)"
            );
        };
        Ok(Remote {
            sfn: aws_sdk_sfn::Client::new(&config),
            s3: s3_client(&config),
            bucket,
            engine: args.engine.clone(),
            json: false,
            region: setup.region.clone(),
            account,
        })
    }

    fn machine(&self, operation: &str) -> String {
        format!(
            "arn:{}:states:{}:{}:stateMachine:{}-{operation}",
            partition(&self.region),
            self.region,
            self.account,
            self.engine
        )
    }

    /// Starts `operation` with `input` under the execution name `name`; a start that was
    /// already made (a retried command) is found, not made twice.
    async fn start(&self, operation: &str, name: &str, input: &Value) -> anyhow::Result<String> {
        let machine = self.machine(operation);
        match self
            .sfn
            .start_execution()
            .state_machine_arn(&machine)
            .name(name)
            .input(input.to_string())
            .send()
            .await
        {
            Ok(out) => Ok(out.execution_arn),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_execution_already_exists()) =>
            {
                Ok(format!(
                    "arn:{}:states:{}:{}:execution:{}-{operation}:{name}",
                    partition(&self.region),
                    self.region,
                    self.account,
                    self.engine
                ))
            }
            Err(e) => Err(anyhow::anyhow!(
                "StartExecution of {machine}: {} (is the engine installed? `stackflow worker --engine {} --create-state-machines ROLE_ARN` creates state machines run by this machine)",
                crate::aws::brief_error(&e),
                self.engine
            )),
        }
    }

    /// Prints the stack's new events until the execution ends; returns its exit code.
    async fn follow(
        &self,
        store: &Store,
        stream: &StreamId,
        execution: &str,
    ) -> anyhow::Result<ExitCode> {
        let mut seen = store
            .read(stream, 0)
            .await?
            .last()
            .map(|e| e.seq)
            .unwrap_or(0);
        let started = std::time::Instant::now();
        let mut hinted = false;
        let mut heard = false;
        loop {
            let d = self
                .sfn
                .describe_execution()
                .execution_arn(execution)
                .send()
                .await
                .map_err(|e| {
                    anyhow::anyhow!("DescribeExecution: {}", crate::aws::brief_error(&e))
                })?;
            let new = store.read(stream, seen).await?;
            if new.is_empty() && !hinted && !heard && started.elapsed() > Duration::from_secs(30) {
                eprintln!(
                    "no event from the execution after 30 s: are its tasks running (the engine's Lambda functions, or `stackflow worker --engine {}`)? Ctrl-C stops following; the execution goes on",
                    self.engine
                );
                hinted = true;
            }
            for e in new {
                heard = true;
                seen = seen.max(e.seq);
                eprintln!("{}", render::event_line(&e));
            }
            if d.status != ExecutionStatus::Running && d.status != ExecutionStatus::PendingRedrive {
                let output: Value = d
                    .output
                    .as_deref()
                    .and_then(|o| serde_json::from_str(o).ok())
                    .unwrap_or(Value::Null);
                let mut result = serde_json::json!({
                    "stack": stream.stack,
                    "execution": execution,
                    "status": d.status.as_str(),
                });
                let code = match d.status {
                    ExecutionStatus::Succeeded => {
                        let no_changes = output.get("noChanges").and_then(Value::as_bool);
                        result["noChanges"] = Value::Bool(no_changes == Some(true));
                        result["outputs"] = output.get("outputs").cloned().unwrap_or_default();
                        if !self.json {
                            succeeded(&stream.stack, execution, &output);
                        }
                        ExitCode::SUCCESS
                    }
                    status => {
                        result["error"] = d.error.clone().into();
                        result["cause"] = d.cause.clone().into();
                        if !self.json {
                            println!(
                                "{}: {} ({execution}): {}: {}",
                                stream.stack,
                                status.as_str(),
                                d.error.as_deref().unwrap_or("no error name"),
                                d.cause.as_deref().unwrap_or("no cause given")
                            );
                        }
                        // A `Fail` state of the state machine names the phase (a deploy
                        // that could not start); the task's own error says why.
                        let task = self.task_failure(execution).await;
                        let locked = ErrorKind::Locked.name();
                        let mut refused = d.error.as_deref() == Some(locked);
                        if let Some((error, cause)) = task.filter(|t| d.error != Some(t.0.clone()))
                        {
                            if !self.json {
                                println!(
                                    "{}: the last task failure: {error}: {cause}",
                                    stream.stack
                                );
                            }
                            result["taskError"] = error.clone().into();
                            result["taskCause"] = cause.into();
                            refused |= error == locked;
                        }
                        ExitCode::from(if refused { super::LOCKED } else { 1 })
                    }
                };
                if self.json {
                    println!("{}", crate::json::line(&result)?);
                }
                return Ok(code);
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// The error name and cause of the last task failure of `execution` (the one its
    /// state machine caught before ending in a `Fail` state that names the phase only:
    /// `Stackflow.Locked` and the holder, for a deploy refused by the lock). `None` when
    /// the history does not say.
    async fn task_failure(&self, execution: &str) -> Option<(String, String)> {
        let history = self
            .sfn
            .get_execution_history()
            .execution_arn(execution)
            .reverse_order(true)
            .max_results(100)
            .send()
            .await
            .ok()?;
        let (error, cause) = history.events().iter().find_map(|e| {
            if let Some(d) = e.task_failed_event_details() {
                Some((d.error(), d.cause()))
            } else if let Some(d) = e.activity_failed_event_details() {
                Some((d.error(), d.cause()))
            } else {
                let d = e.lambda_function_failed_event_details()?;
                Some((d.error(), d.cause()))
            }
        })?;
        let cause = cause.unwrap_or_default();
        // A Lambda function's cause is its error as JSON; an activity's is the message.
        let message = serde_json::from_str::<Value>(cause)
            .ok()
            .and_then(|c| c.get("errorMessage")?.as_str().map(str::to_string));
        Some((
            error?.to_string(),
            message.unwrap_or_else(|| cause.to_string()),
        ))
    }

    /// `--no-follow`: the execution started, as its ARN (or a JSON line).
    fn started(&self, stack: &str, execution: &str) -> anyhow::Result<()> {
        if self.json {
            let started = serde_json::json!({ "stack": stack, "execution": execution });
            println!("{}", crate::json::line(&started)?);
        } else {
            println!("{execution}");
        }
        Ok(())
    }

    /// Uploads the stack's input and starts its deploy; follows it unless told not to.
    pub async fn deploy(
        &self,
        store: &Store,
        input: &StackInput,
        options: &DeployOptions,
        follow: bool,
    ) -> anyhow::Result<ExitCode> {
        let deploy_id = new_id("d");
        let key = format!("inputs/{}/{deploy_id}.json", input.name);
        self.s3
            .put_object()
            .bucket(&self.bucket)
            .key(&key)
            // The input holds the NoEcho parameter values: encrypted at rest, and
            // deleted by the engine when the deploy ends.
            .server_side_encryption(aws_sdk_s3::types::ServerSideEncryption::Aes256)
            .body(serde_json::to_vec(input)?.into())
            .send()
            .await
            .map_err(|e| {
                anyhow::anyhow!(
                    "uploading the template to s3://{}/{key}: {}",
                    self.bucket,
                    crate::aws::brief_error(&e)
                )
            })?;
        let request = DeployRequest {
            stack: input.name.clone(),
            input_key: key,
            no_rollback: options.no_rollback,
            concurrency: options.concurrency,
            deploy_id: Some(deploy_id.clone()),
            allow_stateful_replacement: options.allow_stateful_replacement,
            expected_plan: options.expected_plan.as_ref().map(|e| e.digest.clone()),
        };
        let execution = self
            .start("deploy", &deploy_id, &serde_json::to_value(&request)?)
            .await?;
        if !follow {
            self.started(&input.name, &execution)?;
            return Ok(ExitCode::SUCCESS);
        }
        eprintln!("deploy {}: execution {execution}", input.name);
        self.follow(store, &StreamId::new(&self.region, &input.name), &execution)
            .await
    }

    /// Starts a destroy or a rollback of `stack`; follows it unless told not to.
    pub async fn run_stack(
        &self,
        store: &Store,
        operation: &str,
        stack: &str,
        follow: bool,
    ) -> anyhow::Result<ExitCode> {
        let id = new_id(if operation == "destroy" { "x" } else { "r" });
        let request = StackRequest {
            stack: stack.to_string(),
        };
        let execution = self
            .start(operation, &id, &serde_json::to_value(&request)?)
            .await?;
        if !follow {
            self.started(stack, &execution)?;
            return Ok(ExitCode::SUCCESS);
        }
        eprintln!("{operation} {stack}: execution {execution}");
        self.follow(store, &StreamId::new(&self.region, stack), &execution)
            .await
    }
}

/// `stackflow worker`.
pub async fn worker(global: &GlobalArgs, args: WorkerArgs) -> anyhow::Result<ExitCode> {
    let Some(bucket) = global.store_bucket.clone() else {
        bail!(
            "the worker needs the engine's bucket: pass --store-bucket NAME (or set STACKFLOW_BUCKET)"
        );
    };
    let setup = setup_with(
        global,
        true,
        global.verbose,
        None,
        Some("values that use AWS::AccountId cannot be resolved"),
        true,
    )
    .await?;
    let config = crate::aws::load(global).await;
    let sfn = aws_sdk_sfn::Client::new(&config);
    let activities = ensure_activities(&sfn, &args.engine)
        .await
        .map_err(anyhow::Error::msg)?;
    if let Some(role) = &args.create_state_machines {
        create_state_machines(&sfn, &setup, &args.engine, role, &activities).await?;
    }
    let name = format!("{} {}", crate::liveness::whoami(), std::process::id());
    let tasks = Arc::new(Tasks {
        engine: execution_engine(&setup, &name),
        s3: s3_client(&config),
        sfn: sfn.clone(),
        bucket,
        kms_key: None,
        allowed_types: None,
        history: Default::default(),
        map_order: Default::default(),
    });
    let worker = Worker {
        tasks,
        sfn,
        activities: activities.clone(),
        name,
        per_task: usize::from(args.concurrency),
        heartbeat: Duration::from_secs(10),
    };
    eprintln!(
        "worker: polling {} activities of engine {} (Ctrl-C to stop after the running tasks)",
        activities.len(),
        args.engine
    );
    worker.run(stop_on_ctrl_c()).await;
    Ok(ExitCode::SUCCESS)
}

/// The engine the worker runs executions' tasks with: the CLI's, except that a lock it
/// takes belongs to the execution, not to this process: held without a lease (no task
/// renews it, and another worker may run the execution's later tasks) and recorded under
/// a name that no liveness check takes for a process (`worker user@host N`), so that it is
/// only ever released by the execution or broken with `stackflow unlock`.
fn execution_engine(setup: &Setup, worker: &str) -> Arc<Engine<Store>> {
    let cli = &setup.engine;
    Arc::new(Engine {
        store: cli.store.clone(),
        providers: cli.providers.clone(),
        lookups: cli.lookups.clone(),
        region: cli.region.clone(),
        who: format!("worker {worker}"),
        cloudformation_fallback: cli.cloudformation_fallback,
        progress: cli.progress.clone(),
        stale: cli.stale.clone(),
        lease: None,
        digest_key: cli.digest_key.clone(),
    })
}

/// `stackflow worker --create-state-machines ROLE`: creates the engine's state machines on
/// the activities, or updates those that exist.
async fn create_state_machines(
    sfn: &aws_sdk_sfn::Client,
    setup: &Setup,
    engine: &str,
    role: &str,
    activities: &BTreeMap<String, String>,
) -> anyhow::Result<()> {
    for (name, def) in definitions::ALL {
        let text = definitions::render(def, &Target::Activities(activities.clone(), 30))
            .map_err(anyhow::Error::msg)?;
        let machine = format!("{engine}-{name}");
        let created = sfn
            .create_state_machine()
            .name(&machine)
            .definition(&text)
            .role_arn(role)
            .send()
            .await;
        match created {
            Ok(out) => eprintln!("created state machine {}", out.state_machine_arn),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_state_machine_already_exists()) =>
            {
                let account = setup
                    .account_id
                    .clone()
                    .context("updating a state machine needs the account id")?;
                let arn = format!(
                    "arn:{}:states:{}:{account}:stateMachine:{machine}",
                    partition(&setup.region),
                    setup.region
                );
                sfn.update_state_machine()
                    .state_machine_arn(&arn)
                    .definition(&text)
                    .role_arn(role)
                    .send()
                    .await
                    .map_err(|e| {
                        anyhow::anyhow!("UpdateStateMachine {arn}: {}", crate::aws::brief_error(&e))
                    })?;
                eprintln!("updated state machine {arn}");
            }
            Err(e) => bail!(
                "CreateStateMachine {machine}: {}",
                crate::aws::brief_error(&e)
            ),
        }
    }
    Ok(())
}

/// The text of a deploy that succeeded: no changes, or its outputs.
fn succeeded(stack: &str, execution: &str, output: &Value) {
    if output.get("noChanges").and_then(Value::as_bool) == Some(true) {
        println!("{stack}: no changes; no AWS write call was made");
        return;
    }
    println!("{stack}: succeeded ({execution})");
    if let Some(outputs) = output.get("outputs").and_then(Value::as_object)
        && !outputs.is_empty()
    {
        println!("Outputs:");
        for (k, v) in outputs {
            println!("  {k} = {}", render::value(v));
        }
    }
}
