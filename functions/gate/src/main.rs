//! stackflow's `Gate` task on Lambda: holds a resource's task token until its dependencies
//! are done (answers through SendTaskSuccess).

#[tokio::main]
async fn main() -> Result<(), stackflow_fn_runtime::Error> {
    stackflow_fn_runtime::serve("Gate").await
}
