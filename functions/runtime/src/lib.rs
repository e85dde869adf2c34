//! What every stackflow Lambda function shares, so that each function's `main` is one call
//! to [`serve`]:
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

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use lambda_runtime::{Diagnostic, LambdaEvent, service_fn};
use serde_json::Value;
use stackflow_engine::env::tasks_from_env;
use stackflow_engine::tasks::{TaskError, Tasks};
use stackflow_events::EventStore;
use tracing_subscriber::EnvFilter;

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
        write!(f, "{}: {}", self.0.name, self.0.message)
    }
}

impl From<FunctionError> for Diagnostic {
    fn from(e: FunctionError) -> Diagnostic {
        Diagnostic {
            error_type: e.0.name,
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

/// Runs the function of `task` (one of [`stackflow_engine::tasks::TASK_NAMES`]): logs and
/// the panic hook, the handlers built once from the environment, then the runtime's loop.
/// An error here is an init error: the function cannot start (a variable is missing).
pub async fn serve(task: &'static str) -> Result<(), Error> {
    init_logs();
    log_panics(task);
    let tasks = match tasks_from_env().await {
        Ok(tasks) => Arc::new(tasks),
        Err(e) => {
            tracing::error!(task, error = %e, "the function cannot start");
            return Err(e.into());
        }
    };
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| {
        let tasks = tasks.clone();
        // Boxed: the handlers' futures nest deep, and a `main` that awaited them unboxed
        // would overflow the compiler's query depth when laying out its own future.
        let answer: HandlerFuture =
            Box::pin(async move { handle(&tasks, task, event.payload).await });
        answer
    }))
    .await
}

/// One invocation's answer, as the runtime awaits it.
type HandlerFuture = Pin<Box<dyn Future<Output = Result<Value, FunctionError>> + Send>>;

/// The log filter's directives: `AWS_LAMBDA_LOG_LEVEL` (Lambda's names: `TRACE`, `DEBUG`,
/// `INFO`, `WARN`, `ERROR`, `FATAL`), else `RUST_LOG`, else `info`.
pub fn log_directives(lambda_level: Option<&str>, rust_log: Option<&str>) -> String {
    fn given(v: Option<&str>) -> Option<&str> {
        v.map(str::trim).filter(|v| !v.is_empty())
    }
    match given(lambda_level) {
        Some(level) if level.eq_ignore_ascii_case("fatal") => "error".to_string(),
        Some(level) => level.to_ascii_lowercase(),
        None => given(rust_log).unwrap_or("info").to_string(),
    }
}

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
    use stackflow_engine::tasks::ERROR_NAMES;

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
        for name in ERROR_NAMES {
            let d: Diagnostic = FunctionError(TaskError {
                name: name.to_string(),
                message: "why".into(),
            })
            .into();
            assert_eq!(d.error_type, *name);
            assert_eq!(d.error_message, "why");
        }
    }

    #[tokio::test]
    async fn a_bad_input_is_a_stackflow_input_error() {
        let tasks = tasks();
        let e = handle(&tasks, "Plan", serde_json::json!({"stack": 1}))
            .await
            .unwrap_err();
        assert_eq!(e.0.name, "Stackflow.Input");
        let e = handle(&tasks, "Gate", serde_json::json!({"stack": "app"}))
            .await
            .unwrap_err();
        assert_eq!(e.0.name, "Stackflow.Input");
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
    fn the_log_level_comes_from_lambda_then_rust_log() {
        assert_eq!(log_directives(None, None), "info");
        assert_eq!(log_directives(Some("DEBUG"), Some("trace")), "debug");
        assert_eq!(log_directives(Some("FATAL"), None), "error");
        assert_eq!(
            log_directives(Some(" "), Some("stackflow=debug")),
            "stackflow=debug"
        );
        assert!(EnvFilter::try_new(log_directives(Some("WARN"), None)).is_ok());
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
