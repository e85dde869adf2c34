//! What a running deploy tells its caller, as it happens.

/// One thing that happened.
#[derive(Debug, Clone, PartialEq)]
pub enum ProgressEvent<'a> {
    /// Work on a stack begins: `total` actions to run.
    StackStarted {
        /// The stack.
        stack: &'a str,
        /// What runs: `deploy`, `destroy`, `rollback`.
        operation: &'a str,
        /// How many resource actions.
        total: usize,
    },
    /// A resource action started.
    ResourceStarted {
        /// The stack.
        stack: &'a str,
        /// The resource.
        logical_id: &'a str,
        /// Its type.
        resource_type: &'a str,
        /// `create`, `update`, `replace`, `delete`, `undo`.
        action: &'a str,
    },
    /// A resource action ended.
    ResourceFinished {
        /// The stack.
        stack: &'a str,
        /// The resource.
        logical_id: &'a str,
        /// Its type.
        resource_type: &'a str,
        /// `created`, `updated`, `replaced`, `deleted`, `retained`, `skipped`, `restored`,
        /// `failed`, `recovered`.
        outcome: &'a str,
        /// How long it took.
        seconds: f64,
        /// The error or the reason, when there is one.
        detail: Option<&'a str>,
    },
    /// Something worth a line.
    Note {
        /// The stack.
        stack: &'a str,
        /// What.
        message: &'a str,
    },
}

/// Receives progress events (the CLI prints them; tests collect them).
pub trait Progress: Send + Sync {
    /// One event.
    fn report(&self, event: ProgressEvent<'_>);
}

/// Says nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct Silent;

impl Progress for Silent {
    fn report(&self, _: ProgressEvent<'_>) {}
}
