//! stackflow's `Rollback` task on Lambda: rolls back the stack's failed deploy.

#[tokio::main]
async fn main() -> Result<(), stackflow_fn_runtime::Error> {
    stackflow_fn_runtime::serve("Rollback").await
}
