//! stackflow's `Finish` task on Lambda: records the deploy's outputs and its end, and
//! releases the lock.

#[tokio::main]
async fn main() -> Result<(), stackflow_fn_runtime::Error> {
    stackflow_fn_runtime::serve("Finish").await
}
