//! stackflow's `Fail` task on Lambda: records a failed deploy, rolls it back (unless
//! noRollback) and releases the lock.

#[tokio::main]
async fn main() -> Result<(), stackflow_fn_runtime::Error> {
    stackflow_fn_runtime::serve("Fail").await
}
