//! stackflow's one Lambda bootstrap: every Lambda function of the engine runs this binary,
//! and [`run`] picks its task from the function's configuration ([`choose_task`]: the
//! handler string, `_HANDLER`, else `STACKFLOW_TASK`). What every function shares:
//!
//! - logs are JSON lines on stdout through `tracing` (no colours), at the level of
//!   `AWS_LAMBDA_LOG_LEVEL` (the function's logging configuration), else `RUST_LOG`,
//!   else `info`;
//! - a panic is logged as one JSON error line before the process aborts (the release
//!   profile has `panic = "abort"`: Lambda reports `Runtime.ExitError` and the state
//!   machine's `Retry` runs the task again);
//! - a task's [`TaskError`] reaches Lambda with its name as the `errorType`
//!   (`Stackflow.Store`, `Stackflow.Locked`, ...), which the state machines' `Retry` and
//!   `Catch` match.

pub mod pipeline;
pub mod publish;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use lambda_runtime::{Diagnostic, LambdaEvent, service_fn};
use serde_json::Value;
use stackflow_engine::env::tasks_from_env;
use stackflow_engine::sfn::triggers::TRIGGER_NAMES;
use stackflow_engine::tasks::{ErrorKind, TASK_NAMES, TaskError, Tasks};
use stackflow_events::EventStore;
use tracing_subscriber::EnvFilter;

use pipeline::PipelineClients;
use publish::Publisher;

/// What a function's `main` returns.
pub use lambda_runtime::Error;

/// A task's failure as the function returns it: Lambda's `errorType` is the task error's
/// name, its `errorMessage` the message.
#[derive(Clone, PartialEq, Eq)]
pub struct FunctionError(pub TaskError);

impl std::fmt::Debug for FunctionError {
    // The runtime logs a handler's error with `Debug`: keep it the one line Step
    // Functions shows.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.0.name(), self.0.message)
    }
}

impl From<FunctionError> for Diagnostic {
    fn from(e: FunctionError) -> Diagnostic {
        Diagnostic {
            error_type: e.0.name().to_string(),
            error_message: e.0.message,
        }
    }
}

/// Runs `task` on one event's payload: its output (`null` when it has none, as the gate
/// that answers through `SendTaskSuccess` later), or its error.
pub async fn handle<S: EventStore + 'static>(
    tasks: &Tasks<S>,
    task: &str,
    payload: Value,
) -> Result<Value, FunctionError> {
    match tasks.dispatch(task, payload, None).await {
        Ok(output) => Ok(output.unwrap_or(Value::Null)),
        Err(e) => Err(FunctionError(e)),
    }
}

/// The variable naming the deploy state machine's ARN, which `Start` and `PipelineJob`
/// start executions of.
pub const MACHINE_VAR: &str = "STACKFLOW_DEPLOY_MACHINE";

/// What a function has besides the task handlers: the events-out publisher, and for the
/// triggers the deploy state machine (and CodePipeline for `PipelineJob`).
pub struct Context<S> {
    /// The task handlers.
    pub tasks: Tasks<S>,
    /// Events out.
    pub publisher: Publisher,
    /// The deploy state machine's ARN (`STACKFLOW_DEPLOY_MACHINE`).
    pub machine: Option<String>,
    /// CodePipeline and the artifact reader's configuration.
    pub pipeline: Option<PipelineClients>,
}

/// Runs the handler `task` (a state machine task or a trigger) on one event's payload,
/// then publishes the events its answer is worth (best effort: never its failure).
pub async fn handle_in<S: EventStore + 'static>(
    ctx: &Context<S>,
    task: &str,
    payload: Value,
) -> Result<Value, FunctionError> {
    let machine = || {
        ctx.machine.as_deref().ok_or_else(|| {
            FunctionError(TaskError::new(
                ErrorKind::Input,
                format!(
                    "{MACHINE_VAR} is not set: it names the deploy state machine {task} starts"
                ),
            ))
        })
    };
    let parse_error = |e: serde_json::Error| {
        FunctionError(TaskError::new(
            ErrorKind::Input,
            format!("task {task}: bad input: {e}"),
        ))
    };
    let out = match task {
        "Start" => {
            let event = serde_json::from_value(payload).map_err(parse_error)?;
            ctx.tasks
                .start(machine()?, event)
                .await
                .map_err(FunctionError)?
        }
        "DriftCheck" => {
            let payload = if payload.is_null() {
                serde_json::json!({})
            } else {
                payload
            };
            let req = serde_json::from_value(payload).map_err(parse_error)?;
            let checks = ctx.tasks.drift_check(req).await.map_err(FunctionError)?;
            serde_json::to_value(checks).unwrap_or(Value::Null)
        }
        "PipelineJob" => {
            let clients = ctx.pipeline.as_ref().ok_or_else(|| {
                machine().err().unwrap_or_else(|| {
                    FunctionError(TaskError::new(
                        ErrorKind::Internal,
                        "no CodePipeline client",
                    ))
                })
            })?;
            pipeline::pipeline_job(&ctx.tasks, clients, payload)
                .await
                .map_err(FunctionError)?
        }
        _ => handle(&ctx.tasks, task, payload).await?,
    };
    ctx.publisher.publish(publish::events_for(task, &out)).await;
    Ok(out)
}

/// Where Lambda puts the function's handler string.
pub const HANDLER_VAR: &str = "_HANDLER";

/// The variable that names the task when the handler string does not (a deployment tool
/// that insists on a handler such as `bootstrap`).
pub const TASK_VAR: &str = "STACKFLOW_TASK";

/// The task a function runs, and which setting named it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskChoice {
    /// One of [`TASK_NAMES`].
    pub task: &'static str,
    /// [`HANDLER_VAR`] or [`TASK_VAR`].
    pub from: &'static str,
}

/// Every handler a function may run: the state machines' tasks, then the triggers.
pub fn handler_names() -> impl Iterator<Item = &'static str> {
    TASK_NAMES.iter().chain(TRIGGER_NAMES).copied()
}

/// The handler named by `value`: a name of [`handler_names`] as written (`Plan`) or in
/// lower case (`plan`), surrounding blanks ignored.
pub fn task_named(value: &str) -> Option<&'static str> {
    let value = value.trim();
    handler_names().find(|name| *name == value || name.to_ascii_lowercase() == value)
}

/// The function's task, from its handler string (`handler`, the value of `_HANDLER`) when
/// that names a task, else from `task_var` (the value of `STACKFLOW_TASK`). A handler string
/// that names no task (`bootstrap`) defers to `STACKFLOW_TASK`; a set `STACKFLOW_TASK` that
/// names no task, or neither naming one, is an error that names the valid tasks.
pub fn choose_task(handler: Option<&str>, task_var: Option<&str>) -> Result<TaskChoice, NoTask> {
    fn given(v: Option<&str>) -> Option<&str> {
        v.map(str::trim).filter(|v| !v.is_empty())
    }
    let handler = given(handler);
    if let Some(task) = handler.and_then(task_named) {
        return Ok(TaskChoice {
            task,
            from: HANDLER_VAR,
        });
    }
    let task_var = given(task_var);
    if let Some(task) = task_var.and_then(task_named) {
        return Ok(TaskChoice {
            task,
            from: TASK_VAR,
        });
    }
    Err(NoTask {
        handler: handler.map(str::to_string),
        task_var: task_var.map(str::to_string),
    })
}

/// Neither the handler string nor `STACKFLOW_TASK` names a task: what each is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoTask {
    /// The handler string, when set.
    pub handler: Option<String>,
    /// `STACKFLOW_TASK`, when set.
    pub task_var: Option<String>,
}

impl std::fmt::Display for NoTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let seen = |name: &str, v: &Option<String>| match v {
            Some(v) => format!("{name} is {v:?}"),
            None => format!("{name} is not set"),
        };
        write!(
            f,
            "no task to run: {} and {}; set the function's handler (or {TASK_VAR}) to one of {}",
            seen(HANDLER_VAR, &self.handler),
            seen(TASK_VAR, &self.task_var),
            handler_names().collect::<Vec<_>>().join(", ")
        )
    }
}

impl std::error::Error for NoTask {}

/// The whole bootstrap: logs, the task chosen from the environment ([`choose_task`]), then
/// the runtime's loop. An error here is an init error: the function cannot start.
pub async fn run() -> Result<(), Error> {
    init_logs();
    let choice = choose_task(
        std::env::var(HANDLER_VAR).ok().as_deref(),
        std::env::var(TASK_VAR).ok().as_deref(),
    );
    match choice {
        Ok(choice) => {
            tracing::info!(
                task = choice.task,
                from = choice.from,
                "the function's task"
            );
            serve(choice.task).await
        }
        Err(e) => {
            tracing::error!(error = %e, "the function cannot start");
            Err(e.into())
        }
    }
}

/// Runs the function of `task` (one of [`TASK_NAMES`]), logs being set up: the panic hook,
/// the handlers built once from the environment, then the runtime's loop. An error here is
/// an init error: the function cannot start (a variable is missing).
async fn serve(task: &'static str) -> Result<(), Error> {
    log_panics(task);
    let tasks = match tasks_from_env().await {
        Ok(tasks) => tasks,
        Err(e) => {
            tracing::error!(task, error = %e, "the function cannot start");
            return Err(e.into());
        }
    };
    let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .load()
        .await;
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let machine = var(MACHINE_VAR);
    let pipeline = (task == "PipelineJob").then(|| PipelineClients {
        codepipeline: aws_sdk_codepipeline::Client::new(&config),
        config: config.clone(),
        machine: machine.clone().unwrap_or_default(),
    });
    let ctx = Arc::new(Context {
        tasks,
        publisher: Publisher::new(&config, var(publish::BUS_VAR).as_deref()),
        machine,
        pipeline,
    });
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| {
        let ctx = ctx.clone();
        // Boxed: the handlers' futures nest deep, and a `main` that awaited them unboxed
        // would overflow the compiler's query depth when laying out its own future.
        let answer: HandlerFuture =
            Box::pin(async move { handle_in(&ctx, task, event.payload).await });
        answer
    }))
    .await
}

/// One invocation's answer, as the runtime awaits it.
type HandlerFuture = Pin<Box<dyn Future<Output = Result<Value, FunctionError>> + Send>>;

/// Where the AWS SDK and its HTTP stack log requests and responses, bodies included, at
/// `debug` and `trace`: a body can hold a resolved secret (a `PutParameter` value, a
/// `GetSecretValue` answer), so these log at `warn` only, whatever level is asked.
const SDK_TARGETS: &[&str] = &[
    "aws_smithy_runtime",
    "aws_smithy_runtime_api",
    "aws_smithy_http",
    "aws_smithy_http_client",
    "aws_smithy_types",
    "aws_sigv4",
    "aws_runtime",
    "aws_config",
    "hyper",
    "hyper_util",
    "h2",
    "rustls",
    "lambda_runtime",
    "lambda_runtime_api_client",
];

/// The log filter's directives: `AWS_LAMBDA_LOG_LEVEL` (Lambda's names: `TRACE`, `DEBUG`,
/// `INFO`, `WARN`, `ERROR`, `FATAL`), else `RUST_LOG`, else `info`; the AWS SDK's own
/// targets (and `aws_sdk_*`) at `warn` (see [`SDK_TARGETS`]).
pub fn log_directives(lambda_level: Option<&str>, rust_log: Option<&str>) -> String {
    fn given(v: Option<&str>) -> Option<&str> {
        v.map(str::trim).filter(|v| !v.is_empty())
    }
    let asked = match given(lambda_level) {
        Some(level) if level.eq_ignore_ascii_case("fatal") => "error".to_string(),
        Some(level) => level.to_ascii_lowercase(),
        None => given(rust_log).unwrap_or("info").to_string(),
    };
    let mut out = asked;
    for target in SDK_TARGETS.iter().chain(SDK_CRATES) {
        out.push_str(&format!(",{target}=warn"));
    }
    out
}

/// The `aws_sdk_*` crates the engine links (their operations log inputs at `trace`).
const SDK_CRATES: &[&str] = &[
    "aws_sdk_cloudcontrol",
    "aws_sdk_dynamodb",
    "aws_sdk_iam",
    "aws_sdk_lambda",
    "aws_sdk_s3",
    "aws_sdk_secretsmanager",
    "aws_sdk_sfn",
    "aws_sdk_sns",
    "aws_sdk_sqs",
    "aws_sdk_ssm",
    "aws_sdk_sts",
    "aws_sdk_cloudwatchlogs",
    "aws_sdk_cloudformation",
    "aws_sdk_eventbridge",
    "aws_sdk_codepipeline",
];

fn init_logs() {
    let directives = log_directives(
        std::env::var("AWS_LAMBDA_LOG_LEVEL").ok().as_deref(),
        std::env::var("RUST_LOG").ok().as_deref(),
    );
    let (filter, bad) = match EnvFilter::try_new(&directives) {
        Ok(f) => (f, None),
        Err(e) => (EnvFilter::new("info"), Some(e)),
    };
    let _ = tracing_subscriber::fmt()
        .json()
        .with_ansi(false)
        .with_current_span(true)
        .with_span_list(false)
        .with_env_filter(filter)
        .try_init();
    if let Some(e) = bad {
        tracing::warn!(directives, error = %e, "bad log level: logging at info");
    }
}

/// The panic's message: its payload when that is a string.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(a panic without a message)")
}

/// Logs a panic as one JSON error line; the default hook's text line is not printed.
fn log_panics(task: &'static str) {
    std::panic::set_hook(Box::new(move |info| {
        let location = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_default();
        tracing::error!(
            task,
            panic = panic_message(info.payload()),
            location,
            "the function panicked: the process ends and the task is retried"
        );
    }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_config::BehaviorVersion;
    use aws_types::SdkConfig;
    use stackflow_engine::env::Settings;
    use stackflow_engine::tasks::{ERROR_NAMES, ErrorKind};

    fn tasks() -> Tasks<stackflow_events::dynamo::DynamoStore> {
        let settings = Settings::from_vars(|name| match name {
            "STACKFLOW_TABLE" => Some("events".into()),
            "STACKFLOW_BUCKET" => Some("engine".into()),
            _ => None,
        })
        .unwrap();
        // Port 9 (discard) on loopback: nothing here may reach it.
        let config = SdkConfig::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(aws_types::region::Region::new("us-east-1"))
            .endpoint_url("http://127.0.0.1:9")
            .build();
        settings.tasks(&config).unwrap()
    }

    #[test]
    fn the_error_type_is_the_task_error_name() {
        for (kind, name) in ErrorKind::ALL.into_iter().zip(ERROR_NAMES) {
            let d: Diagnostic = FunctionError(TaskError::new(kind, "why")).into();
            assert_eq!(d.error_type, name);
            assert_eq!(d.error_message, "why");
        }
    }

    #[tokio::test]
    async fn a_bad_input_is_a_stackflow_input_error() {
        let tasks = tasks();
        let e = handle(&tasks, "Plan", serde_json::json!({"stack": 1}))
            .await
            .unwrap_err();
        assert_eq!(e.0.name(), "Stackflow.Input");
        let e = handle(&tasks, "Gate", serde_json::json!({"stack": "app"}))
            .await
            .unwrap_err();
        assert_eq!(e.0.name(), "Stackflow.Input");
        assert_eq!(
            format!("{e:?}"),
            "Stackflow.Input: task Gate: no task token"
        );
        let e = handle(&tasks, "Nope", Value::Null).await.unwrap_err();
        assert_eq!(
            Diagnostic::from(e).error_type,
            "Stackflow.Input",
            "an unknown task"
        );
    }

    #[test]
    fn the_handler_string_names_the_task() {
        for name in TASK_NAMES {
            let choice = choose_task(Some(name), None).unwrap();
            assert_eq!((choice.task, choice.from), (*name, HANDLER_VAR));
            let lower = name.to_ascii_lowercase();
            assert_eq!(choose_task(Some(&lower), None).unwrap().task, *name);
        }
        assert_eq!(choose_task(Some(" Gate\n"), None).unwrap().task, "Gate");
    }

    #[test]
    fn the_handler_string_wins_over_stackflow_task() {
        let choice = choose_task(Some("Provision"), Some("Plan")).unwrap();
        assert_eq!((choice.task, choice.from), ("Provision", HANDLER_VAR));
    }

    #[test]
    fn stackflow_task_is_the_fallback() {
        for handler in [None, Some(""), Some("  "), Some("bootstrap")] {
            let choice = choose_task(handler, Some("Rollback")).unwrap();
            assert_eq!(
                (choice.task, choice.from),
                ("Rollback", TASK_VAR),
                "{handler:?}"
            );
        }
        assert_eq!(choose_task(None, Some("destroy")).unwrap().task, "Destroy");
    }

    #[test]
    fn no_task_is_an_error_that_lists_the_valid_names() {
        for (handler, var) in [
            (None, None),
            (Some("bootstrap"), None),
            (Some(""), Some(" ")),
            (None, Some("Deploy")),
            (Some("PLAN"), None),
            (Some("plan.handler"), Some("Provison")),
        ] {
            let e = choose_task(handler, var).unwrap_err().to_string();
            assert!(
                e.ends_with(&handler_names().collect::<Vec<_>>().join(", ")),
                "{handler:?} {var:?}: {e}"
            );
        }
        assert_eq!(
            choose_task(Some("bootstrap"), None)
                .unwrap_err()
                .to_string(),
            format!(
                "no task to run: _HANDLER is \"bootstrap\" and STACKFLOW_TASK is not set; set \
                 the function's handler (or STACKFLOW_TASK) to one of {}",
                handler_names().collect::<Vec<_>>().join(", ")
            )
        );
        assert!(TASK_NAMES.starts_with(&["Plan", "Gate", "Provision"]));
    }

    #[test]
    fn the_triggers_are_handlers_too() {
        for name in ["Start", "PipelineJob", "DriftCheck"] {
            assert_eq!(choose_task(Some(name), None).unwrap().task, name);
            let lower = name.to_ascii_lowercase();
            assert_eq!(choose_task(None, Some(&lower)).unwrap().task, name);
        }
    }

    #[test]
    fn the_log_level_comes_from_lambda_then_rust_log() {
        let asked = |d: String| d.split(',').next().unwrap_or_default().to_string();
        assert_eq!(asked(log_directives(None, None)), "info");
        assert_eq!(asked(log_directives(Some("DEBUG"), Some("trace"))), "debug");
        assert_eq!(asked(log_directives(Some("FATAL"), None)), "error");
        assert_eq!(
            asked(log_directives(Some(" "), Some("stackflow=debug"))),
            "stackflow=debug"
        );
        assert!(EnvFilter::try_new(log_directives(Some("WARN"), None)).is_ok());
    }

    #[test]
    fn the_sdk_never_logs_request_bodies_whatever_level_is_asked() {
        let d = log_directives(Some("TRACE"), None);
        for target in [
            "aws_smithy_runtime",
            "aws_sdk_ssm",
            "aws_sdk_secretsmanager",
            "hyper",
        ] {
            assert!(d.contains(&format!(",{target}=warn")), "{d}");
        }
        assert!(EnvFilter::try_new(d).is_ok());
    }

    #[test]
    fn a_panic_message_is_its_string_payload() {
        let s: Box<dyn std::any::Any + Send> = Box::new("boom");
        assert_eq!(panic_message(s.as_ref()), "boom");
        let s: Box<dyn std::any::Any + Send> = Box::new(String::from("bang"));
        assert_eq!(panic_message(s.as_ref()), "bang");
        let s: Box<dyn std::any::Any + Send> = Box::new(7);
        assert_eq!(panic_message(s.as_ref()), "(a panic without a message)");
    }
}
