//! One module per command.

mod diff;

use std::process::ExitCode;

use crate::args::{Cli, Command};

/// Runs the command and returns the process exit code.
pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Diff(args) => diff::run(&cli.global, args).await,
    }
}
