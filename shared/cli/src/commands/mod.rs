//! One module per command.

mod deploy;
mod diff;
mod remote;
mod state;

use std::process::ExitCode;

use stackflow_events::StreamId;

use crate::args::{Cli, Command, GlobalArgs, StateCommand};
use crate::aws;
use crate::store::{Store, StoreSpec, local_file};

/// Runs the command and returns the process exit code.
pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Deploy(args) => deploy::deploy(&cli.global, args).await,
        Command::Destroy(args) => deploy::destroy(&cli.global, args).await,
        Command::Rollback(args) => deploy::rollback(&cli.global, args).await,
        Command::Worker(args) => remote::worker(&cli.global, args).await,
        Command::Diff(args) => diff::run(&cli.global, args).await,
        Command::Init => state::init(&cli.global).await,
        Command::State(StateCommand::Show(args)) => state::show(&cli.global, args).await,
        Command::Events(args) => state::events(&cli.global, args).await,
        Command::Unlock(args) => state::unlock(&cli.global, &args.stack).await,
    }
}

/// What most commands need: the AWS configuration, the region and the event store.
pub struct Context {
    pub region: String,
    pub store: Store,
}

impl Context {
    pub async fn open(global: &GlobalArgs) -> anyhow::Result<Context> {
        let config = aws::load(global).await;
        let region = aws::region(&config)?;
        // Commands that read never create a store: a local one that does not exist holds
        // nothing yet.
        if let StoreSpec::Local(dir) = &global.store
            && !local_file(dir).exists()
        {
            anyhow::bail!(
                "there is no local store at {}: nothing has been deployed from here (pass --store to read another one)",
                local_file(dir).display()
            );
        }
        let store = Store::open(&global.store, &config, global.store_bucket.clone())?;
        Ok(Context { region, store })
    }

    /// The stream of a stack in the configured region.
    pub fn stream(&self, stack: &str) -> StreamId {
        StreamId::new(&self.region, stack)
    }
}
