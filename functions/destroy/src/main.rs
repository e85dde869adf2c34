//! stackflow's `Destroy` task on Lambda: destroys a whole stack.

#[tokio::main]
async fn main() -> Result<(), stackflow_fn_runtime::Error> {
    stackflow_fn_runtime::serve("Destroy").await
}
