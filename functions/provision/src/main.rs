//! stackflow's `Provision` task on Lambda: runs one resource action (create, update,
//! replace, or a cleanup delete) and opens the gates it unblocks.

#[tokio::main]
async fn main() -> Result<(), stackflow_fn_runtime::Error> {
    stackflow_fn_runtime::serve("Provision").await
}
