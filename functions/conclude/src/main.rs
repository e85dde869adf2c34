//! stackflow's `Conclude` task on Lambda: after provisioning: the cleanup items, or the
//! failure.

#[tokio::main]
async fn main() -> Result<(), stackflow_fn_runtime::Error> {
    stackflow_fn_runtime::serve("Conclude").await
}
