//! stackflow's `Plan` task on Lambda: takes the stack's lock, plans the deploy and stores
//! the plan; answers the first Map's items.

#[tokio::main]
async fn main() -> Result<(), stackflow_fn_runtime::Error> {
    stackflow_fn_runtime::serve("Plan").await
}
