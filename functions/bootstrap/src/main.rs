//! stackflow's Lambda bootstrap: runs the task the function's handler string names
//! (`_HANDLER`, else `STACKFLOW_TASK`). Everything is in the library.

#[tokio::main]
async fn main() -> Result<(), stackflow_fn_bootstrap::Error> {
    stackflow_fn_bootstrap::run().await
}
