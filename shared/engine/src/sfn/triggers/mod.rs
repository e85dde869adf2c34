//! What starts the engine besides the CLI, run by the same bootstrap as the state
//! machines' tasks (the function's handler string names one of [`TRIGGER_NAMES`]):
//!
//! - **Start** ([`start`]): an EventBridge event (an object under `deploy/<stack>/` of the
//!   engine's bucket, or a `Deploy Requested` event) starts a deploy execution named
//!   after the event's id;
//! - **PipelineJob**: a CodePipeline Lambda invoke action (in the bootstrap, which alone
//!   links the CodePipeline client); it starts deploys through [`Tasks::launch`];
//! - **DriftCheck** ([`drift_check`]): a schedule's drift check of every stack (or some).
//!
//! [`Tasks::launch`] is what they share: the template or zipped `cdk.out` read, its stack
//! input written to the engine's bucket (`inputs/<stack>/<execution>.json`) and the
//! execution started with its name, unless an execution of that name exists already.

pub mod assets;
pub mod drift_check;
pub mod start;
pub mod unzip;

use std::path::Path;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use stackflow_core::intrinsics::{Pseudo, bind_parameters};
use stackflow_core::template::{StackTemplate, load_path};
use stackflow_events::EventStore;
use stackflow_events::event::Event;

use super::artifacts::aws_error;
use super::errors::{ErrorKind, TaskError};
use super::payloads::DeployRequest;
use super::tasks::Tasks;
use crate::stack::StackInput;

/// The handler names of the triggers (beside the state machines' `TASK_NAMES`).
pub const TRIGGER_NAMES: &[&str] = &["Start", "PipelineJob", "DriftCheck"];

/// Where a launch's template (or zipped `cdk.out`) is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// An object of the engine's bucket.
    Object(String),
    /// Bytes already read (a pipeline's artifact), with their file name.
    Bytes {
        /// The file's name (its extension says what it is).
        file: String,
        /// Its content.
        bytes: Vec<u8>,
    },
}

/// A deploy to start.
#[derive(Debug, Clone, PartialEq)]
pub struct Launch {
    /// The stack.
    pub stack: String,
    /// The execution's name, which is also the deploy id.
    pub name: String,
    /// The template or zipped `cdk.out`.
    pub source: Source,
    /// Parameter values; `None`: read `parameters.json` beside an object under
    /// `deploy/<stack>/`, if there is one.
    pub parameters: Option<IndexMap<String, String>>,
    /// The account deployed to (the event's), for `AWS::AccountId`.
    pub account: Option<String>,
    /// Keep what a failed deploy made.
    pub no_rollback: bool,
}

/// What a launch did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Launched {
    /// The stack.
    pub stack: String,
    /// The execution's ARN.
    pub execution: String,
    /// The deploy id (the execution's name).
    pub deploy_id: String,
    /// False when the execution existed already (a redelivered event).
    pub started: bool,
}

/// The ARN of `machine`'s execution named `name`.
pub fn execution_arn(machine: &str, name: &str) -> String {
    format!(
        "{}:{name}",
        machine.replacen(":stateMachine:", ":execution:", 1)
    )
}

impl<S: EventStore + 'static> Tasks<S> {
    /// Starts `launch` on the deploy state machine `machine`, unless its execution
    /// exists (then nothing is read or written).
    pub async fn launch(&self, machine: &str, launch: Launch) -> Result<Launched, TaskError> {
        let arn = execution_arn(machine, &launch.name);
        let launched = |started| Launched {
            stack: launch.stack.clone(),
            execution: arn.clone(),
            deploy_id: launch.name.clone(),
            started,
        };
        let seen = self
            .sfn
            .describe_execution()
            .execution_arn(&arn)
            .send()
            .await;
        match seen {
            Ok(_) => return Ok(launched(false)),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_execution_does_not_exist()) => {}
            Err(e) => {
                return Err(aws_error(
                    &format!("DescribeExecution {arn}"),
                    stackflow_providers::error::error_chain(&e),
                ));
            }
        }
        let input = self.stack_input(&launch).await?;
        let key = format!("inputs/{}/{}.json", launch.stack, launch.name);
        self.put(&key, serde_json::to_vec(&input).unwrap_or_default())
            .await?;
        let request = DeployRequest {
            stack: launch.stack.clone(),
            input_key: key,
            no_rollback: launch.no_rollback,
            // A deploy a rule or a pipeline starts runs as many actions at once as the
            // Map allows.
            concurrency: crate::sfn::payloads::MAP_CONCURRENCY,
            deploy_id: Some(launch.name.clone()),
            allow_stateful_replacement: false,
            expected_plan: None,
        };
        let started = self
            .sfn
            .start_execution()
            .state_machine_arn(machine)
            .name(&launch.name)
            .input(serde_json::to_string(&request).unwrap_or_default())
            .send()
            .await;
        match started {
            Ok(_) => Ok(launched(true)),
            // Two deliveries at once: the other started it (with the same input).
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_execution_already_exists()) =>
            {
                Ok(launched(false))
            }
            Err(e) => Err(aws_error(
                &format!("StartExecution {}", launch.name),
                stackflow_providers::error::error_chain(&e),
            )),
        }
    }

    /// The stack input of `launch`: its template or `cdk.out` read in a directory of its
    /// own (a new one per call) under the system's temporary directory (removed after), the `cdk.out`'s file
    /// assets published first ([`assets::publish`]).
    async fn stack_input(&self, launch: &Launch) -> Result<StackInput, TaskError> {
        let (file, bytes) = match &launch.source {
            Source::Object(key) => {
                let bytes = self.get(key).await?.ok_or_else(|| {
                    TaskError::new(
                        ErrorKind::Input,
                        format!("s3://{}/{key} does not exist", self.bucket),
                    )
                })?;
                (key.rsplit('/').next().unwrap_or(key).to_string(), bytes)
            }
            Source::Bytes { file, bytes } => (file.clone(), bytes.clone()),
        };
        let parameters = match (&launch.parameters, &launch.source) {
            (Some(p), _) => p.clone(),
            (None, Source::Object(key)) => self.parameters_beside(key).await?,
            (None, Source::Bytes { .. }) => IndexMap::new(),
        };
        // Its own directory, whatever else runs beside it: a task's /tmp may be shared (a
        // retried launch on the same instance; every function on a machine that runs them
        // as local processes, as the tests' Lambda stand-in does).
        let dir = std::env::temp_dir().join(format!(
            "stackflow-{}-{}",
            launch.name,
            uuid::Uuid::new_v4().simple()
        ));
        let read = read_stack(&dir, &file, &bytes, &launch.stack);
        // A cdk.out's file assets go out while its directory is still there.
        let published = match &read {
            Ok(stack) => {
                let account = launch.account.as_deref();
                assets::publish(&self.s3, stack, account, &self.engine.region).await
            }
            Err(_) => Ok(0),
        };
        let _ = std::fs::remove_dir_all(&dir);
        let stack = read?;
        published?;
        let bound = bind_parameters(&stack.template, &parameters)
            .map_err(|e| TaskError::new(ErrorKind::Template, e.to_string()))?;
        Ok(StackInput {
            pseudo: Pseudo {
                region: self.engine.region.clone(),
                account_id: launch.account.clone(),
                stack_name: launch.stack.clone(),
                stack_id: None,
            },
            name: launch.stack.clone(),
            source: file,
            template: stack.template,
            parameters: bound,
            nested: stack.nested,
        })
    }

    /// The values of `parameters.json` in the folder of `key`, when there is one.
    async fn parameters_beside(&self, key: &str) -> Result<IndexMap<String, String>, TaskError> {
        let Some((folder, _)) = key.rsplit_once('/') else {
            return Ok(IndexMap::new());
        };
        let at = format!("{folder}/parameters.json");
        match self.get(&at).await? {
            None => Ok(IndexMap::new()),
            Some(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                TaskError::new(
                    ErrorKind::Input,
                    format!(
                        "s3://{}/{at}: a JSON object of names and string values: {e}",
                        self.bucket
                    ),
                )
            }),
        }
    }

    /// What failed in `stack`'s deploy `deploy_id`, one line per resource (masked as
    /// recorded): `Queue (AWS::SQS::Queue) create: <error>`.
    pub async fn failed_resources(
        &self,
        stack: &str,
        deploy_id: &str,
    ) -> Result<Vec<String>, TaskError> {
        let stream = self.engine.stream(stack);
        let events = self
            .engine
            .store
            .read(&stream, 0)
            .await
            .map_err(crate::engine::EngineError::from)?;
        // Each resource's type, from the intents of the deploy (a failed create is not
        // in the state once rolled back).
        let mut types = std::collections::HashMap::new();
        let mut out = Vec::new();
        for e in &events {
            match &e.event {
                Event::ResourceIntent {
                    deploy_id: d,
                    logical_id,
                    resource_type,
                    ..
                } if d == deploy_id => {
                    types.insert(logical_id.clone(), resource_type.clone());
                }
                Event::ResourceFailed {
                    deploy_id: d,
                    logical_id,
                    operation,
                    error,
                } if d == deploy_id => {
                    let kind = types
                        .get(logical_id)
                        .map(|t| format!(" ({t})"))
                        .unwrap_or_default();
                    out.push(format!(
                        "{logical_id}{kind} {}: {}: {}",
                        operation.as_str(),
                        error.name,
                        error.message
                    ));
                }
                _ => {}
            }
        }
        Ok(out)
    }
}

/// The stack `stack` of what `bytes` is (a template, or a zip of a `cdk.out`), written
/// under `dir` to be read.
fn read_stack(
    dir: &Path,
    file: &str,
    bytes: &[u8],
    stack: &str,
) -> Result<StackTemplate, TaskError> {
    let template = |e: String| TaskError::new(ErrorKind::Template, format!("{file}: {e}"));
    std::fs::create_dir_all(dir).map_err(|e| template(e.to_string()))?;
    let path = if file.ends_with(".zip") {
        unzip::extract(bytes, dir).map_err(|e| template(e.to_string()))?;
        dir.to_path_buf()
    } else {
        let path = dir.join(file);
        std::fs::write(&path, bytes).map_err(|e| template(e.to_string()))?;
        path
    };
    let mut stacks = load_path(&path).map_err(|e| template(e.to_string()))?;
    if stacks.len() == 1 && !file.ends_with(".zip") {
        return Ok(stacks.remove(0));
    }
    let names: Vec<String> = stacks.iter().map(|s| s.name.clone()).collect();
    match stacks.iter().position(|s| s.name == stack) {
        Some(i) => Ok(stacks.remove(i)),
        None if stacks.len() == 1 => Ok(stacks.remove(0)),
        None => Err(template(format!(
            "the cloud assembly has no stack {stack} (it has {})",
            names.join(", ")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_execution_arn_is_the_machine_s() {
        assert_eq!(
            execution_arn("arn:aws:states:us-east-1:1:stateMachine:deploy", "ev-1"),
            "arn:aws:states:us-east-1:1:execution:deploy:ev-1"
        );
    }

    #[test]
    fn a_template_or_an_assembly_is_read() {
        let dir = std::env::temp_dir().join(format!("sf-read-{}", uuid::Uuid::new_v4()));
        let t = br#"{"Parameters":{"Env":{"Type":"String","Default":"dev"}},
            "Resources":{"Q":{"Type":"AWS::SQS::Queue"}}}"#;
        let stack = read_stack(&dir, "template.json", t, "orders").unwrap();
        assert!(stack.template.resources.contains_key("Q"));
        let _ = std::fs::remove_dir_all(&dir);
        let e = read_stack(&dir, "template.json", b"{not json", "orders").unwrap_err();
        assert_eq!(e.kind, ErrorKind::Template);
        assert!(e.message.starts_with("template.json: "), "{}", e.message);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
