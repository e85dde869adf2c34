//! The `stackflow` command.

mod args;
mod assets;
mod aws;
mod call;
mod commands;
mod confirm;
mod json;
mod liveness;
mod lookup;
mod progress;
mod render;
mod select;
mod setup;
mod store;
mod synth;
mod timeline;
mod waves;

use std::process::ExitCode;

use clap::Parser;

/// The exit code of a command line that does not parse (sysexits' `EX_USAGE`): apart
/// from 1 (failed), 2 (partial, or not compared) and 3 (locked).
const USAGE: u8 = 64;

fn main() -> ExitCode {
    let cli = match args::Cli::try_parse() {
        Ok(cli) => cli,
        // `--help` and `--version` are answers, printed to stdout.
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(USAGE);
        }
    };
    // The engine's handlers nest deeply (a worker's task runs a whole deploy phase: the
    // handler, the provider, the SDK), and a debug build's frames are large: on tokio's
    // default 2 MiB a worker's task overflowed its stack. Its threads get the main
    // thread's 8 MiB, where the embedded engine runs.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(8 * 1024 * 1024)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(commands::run(cli)) {
        Ok(code) => code,
        Err(e) => {
            let code = commands::error_code(&e);
            eprintln!("error: {e:#}");
            // A pipeline that asked for JSON gets its error as JSON too, on stdout.
            if std::env::args().any(|a| a == "--json") {
                let error = serde_json::json!({
                    "error": { "message": format!("{e:#}"), "exitCode": code }
                });
                println!("{error:#}");
            }
            ExitCode::from(code)
        }
    }
}
