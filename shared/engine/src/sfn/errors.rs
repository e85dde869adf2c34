//! The errors a task returns to Step Functions: a closed set of kinds, each with the
//! stable name the state machines' `Retry` and `Catch` match (the Lambda `errorType`).

use crate::engine::EngineError;

/// What kind of failure a task had.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The stack is locked by another run.
    Locked,
    /// The event store failed.
    Store,
    /// The template is wrong.
    Template,
    /// The task's input is not what stackflow sends.
    Input,
    /// An AWS call of the task itself (S3, Step Functions) failed.
    Aws,
    /// Anything else.
    Internal,
    /// The task's deadline came before its work was done: run it again, and it resumes
    /// (not a failure; the state machines retry it, see [`super::deadline`]).
    Again,
    /// A provision action failed, and its failure is recorded: the iteration fails, so
    /// the `Map` stops the others (nothing queued starts) and its `Catch` runs Fail.
    ActionFailed,
}

impl ErrorKind {
    /// Every kind.
    pub const ALL: [ErrorKind; 8] = [
        ErrorKind::Locked,
        ErrorKind::Store,
        ErrorKind::Template,
        ErrorKind::Input,
        ErrorKind::Aws,
        ErrorKind::Internal,
        ErrorKind::Again,
        ErrorKind::ActionFailed,
    ];

    /// The name Step Functions sees.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Locked => "Stackflow.Locked",
            ErrorKind::Store => "Stackflow.Store",
            ErrorKind::Template => "Stackflow.Template",
            ErrorKind::Input => "Stackflow.Input",
            ErrorKind::Aws => "Stackflow.Aws",
            ErrorKind::Internal => "Stackflow.Internal",
            ErrorKind::Again => "Stackflow.Again",
            ErrorKind::ActionFailed => "Stackflow.ActionFailed",
        }
    }
}

/// Every error name a handler returns to Step Functions (what `Retry` and `Catch` match).
pub const ERROR_NAMES: [&str; 8] = [
    "Stackflow.Locked",
    "Stackflow.Store",
    "Stackflow.Template",
    "Stackflow.Input",
    "Stackflow.Aws",
    "Stackflow.Internal",
    "Stackflow.Again",
    "Stackflow.ActionFailed",
];

/// A handler's failure, as Step Functions sees it: a kind and a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", kind.name())]
pub struct TaskError {
    /// The kind.
    pub kind: ErrorKind,
    /// What went wrong (no secrets: messages are masked where they are made).
    pub message: String,
}

impl TaskError {
    /// A failure of `kind`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> TaskError {
        TaskError {
            kind,
            message: message.into(),
        }
    }

    /// The name Step Functions sees.
    pub fn name(&self) -> &'static str {
        self.kind.name()
    }

    /// The task's deadline came first: `what` is resumed by the next run.
    pub fn again(what: &str, deadline: std::time::Duration) -> TaskError {
        TaskError::new(
            ErrorKind::Again,
            format!(
                "{what} did not end within the task's deadline ({:.1} s): the next run \
                 resumes it",
                deadline.as_secs_f64()
            ),
        )
    }
}

impl From<EngineError> for TaskError {
    fn from(e: EngineError) -> TaskError {
        let kind = match &e {
            EngineError::Template(_) => ErrorKind::Template,
            EngineError::Store(stackflow_events::StoreError::Locked { .. }) => ErrorKind::Locked,
            EngineError::Store(_) => ErrorKind::Store,
            EngineError::LockLost(_) => ErrorKind::Locked,
            EngineError::PlanMoved(_)
            | EngineError::NotAllowed(_)
            | EngineError::Refused(_)
            | EngineError::Lookup(_) => ErrorKind::Input,
            EngineError::NeedsOperator(_) | EngineError::Internal(_) => ErrorKind::Internal,
        };
        TaskError::new(kind, e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_its_contract_name() {
        let names: Vec<&str> = ErrorKind::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(names, ERROR_NAMES);
    }

    #[test]
    fn engine_errors_map_to_contract_names() {
        let e: TaskError = EngineError::Internal("x".into()).into();
        assert_eq!(e.kind, ErrorKind::Internal);
        assert_eq!(e.to_string(), "Stackflow.Internal: x");
        let kind = |e: EngineError| TaskError::from(e).kind;
        assert_eq!(kind(EngineError::Refused("x".into())), ErrorKind::Input);
        assert_eq!(kind(EngineError::Lookup("x".into())), ErrorKind::Input);
        assert_eq!(kind(EngineError::LockLost("x".into())), ErrorKind::Locked);
        assert_eq!(
            kind(EngineError::NeedsOperator("x".into())),
            ErrorKind::Internal
        );
    }
}
