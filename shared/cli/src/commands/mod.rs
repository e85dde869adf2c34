//! One module per command.

mod deploy;
mod diff;
mod drift;
mod import;
mod remote;
mod scrub;
mod state;

use std::process::ExitCode;

use crate::args::{Cli, Command, StateCommand};

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
        Command::State(StateCommand::RefreshObserved(args)) => {
            drift::refresh(&cli.global, args).await
        }
        Command::Drift(args) => drift::run(&cli.global, args).await,
        Command::Import(args) => import::run(&cli.global, args).await,
        Command::Events(args) => state::events(&cli.global, args).await,
        Command::Unlock(args) => state::unlock(&cli.global, &args.stack).await,
        Command::Scrub(args) => scrub::run(&cli.global, args).await,
    }
}
