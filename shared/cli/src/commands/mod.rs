//! One module per command.

mod bootstrap;
mod deploy;
mod diff;
mod drift;
mod engine;
mod engine_access;
mod engine_scope;
mod executions;
mod import;
mod places;
mod remote;
mod review;
mod scrub;
mod state;
mod synth;

use std::process::ExitCode;

use stackflow_engine::engine::EngineError;
use stackflow_events::StoreError;

use crate::args::{Cli, Command, EngineCommand, StateCommand};

/// The exit code of a run refused because another run holds the stack's lock (a
/// script can tell it from a failure: nothing was done, and trying later may work).
pub const LOCKED: u8 = 3;

/// The exit code of a command that ended with `e`: [`LOCKED`] when the stack's lock is
/// held by another run, [`crate::confirm::NOT_CONFIRMED`] when it was not confirmed or
/// its reviewed plan moved, else 1.
pub fn error_code(e: &anyhow::Error) -> u8 {
    let locked = e.chain().any(|cause| {
        matches!(
            cause.downcast_ref::<EngineError>(),
            Some(EngineError::Store(StoreError::Locked { .. }))
        ) || matches!(
            cause.downcast_ref::<StoreError>(),
            Some(StoreError::Locked { .. })
        )
    });
    let refused = e.chain().any(|cause| {
        cause.is::<crate::confirm::NotConfirmed>()
            || matches!(
                cause.downcast_ref::<EngineError>(),
                Some(EngineError::PlanMoved(_))
            )
    });
    if locked {
        LOCKED
    } else if refused {
        crate::confirm::NOT_CONFIRMED
    } else {
        1
    }
}

/// Runs the command and returns the process exit code.
pub async fn run(mut cli: Cli) -> anyhow::Result<ExitCode> {
    if cli.global.regions.len() > 1 && !matches!(cli.command, Command::Bootstrap(_)) {
        anyhow::bail!("give --region once (only `stackflow bootstrap` takes several)");
    }
    if !matches!(
        cli.command,
        Command::Bootstrap(_) | Command::Completions(_) | Command::Synth(_) | Command::List(_)
    ) {
        crate::setup::resolve_store(&mut cli.global).await?;
    }
    match cli.command {
        Command::Deploy(args) => deploy::deploy(&cli.global, args).await,
        Command::Destroy(args) => deploy::destroy(&cli.global, args).await,
        Command::Rollback(args) => deploy::rollback(&cli.global, args).await,
        Command::Worker(args) => remote::worker(&cli.global, args).await,
        Command::Diff(args) => diff::run(&cli.global, args).await,
        Command::Init => state::init(&cli.global).await,
        Command::State(StateCommand::Show(args)) => state::show(&cli.global, args).await,
        Command::State(StateCommand::List(args)) => state::list(&cli.global, args.json).await,
        Command::State(StateCommand::RefreshObserved(args)) => {
            drift::refresh(&cli.global, args).await
        }
        Command::State(StateCommand::Orphan(args)) => state::orphan(&cli.global, args).await,
        Command::Drift(args) => drift::run(&cli.global, args).await,
        Command::Import(args) => import::run(&cli.global, args).await,
        Command::Events(args) => state::events(&cli.global, args).await,
        Command::Unlock(args) => state::unlock(&cli.global, &args.stack).await,
        Command::Scrub(args) => scrub::run(&cli.global, args).await,
        Command::Bootstrap(args) => bootstrap::run(&cli.global, args).await,
        Command::Engine(EngineCommand::Deploy(args)) => engine::deploy(&cli.global, args).await,
        Command::Engine(EngineCommand::Destroy(args)) => engine::destroy(&cli.global, args).await,
        Command::Engine(EngineCommand::Status(args)) => engine::status(&cli.global, args).await,
        Command::Executions(args) => executions::run(&cli.global, args).await,
        Command::Synth(args) => synth::synth(&cli.global, args).await,
        Command::List(args) => synth::list(&cli.global, args).await,
        Command::Completions(args) => {
            use clap::CommandFactory as _;
            let mut command = Cli::command();
            clap_complete::generate(
                args.shell,
                &mut command,
                "stackflow",
                &mut std::io::stdout(),
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}
