//! `stackflow deploy`, `destroy` and `rollback` with the embedded engine.

use std::collections::BTreeSet;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use indexmap::IndexMap;
use stackflow_core::intrinsics::{BoundParameters, Pseudo};
use stackflow_core::template::{StackTemplate, load_path};
use stackflow_engine::aws_lookups::AwsLookups;
use stackflow_engine::engine::StaleCheck;
use stackflow_engine::progress::{Progress, ProgressEvent};
use stackflow_engine::providers::Providers;
use stackflow_engine::stack::StackInput;
use stackflow_engine::{
    DeployOptions, Engine, StackReport, StackStatus, deploy_stack, destroy_stack, rollback_stack,
};
use stackflow_events::event::Holder;
use tokio::sync::watch;

use super::diff::select_stacks;
use super::state::whoami;
use crate::args::{DeployArgs, DestroyArgs, GlobalArgs, RollbackArgs};
use crate::store::Store;
use crate::{aws, render};

/// Who runs this process, as locks record it: `user@host pid N`.
fn holder_name() -> String {
    format!("{} pid {}", whoami(), std::process::id())
}

/// A holder is gone when it ran on this host and its process no longer exists. A holder
/// on another host is never taken for gone: `stackflow unlock` breaks such a lock.
fn stale_check() -> StaleCheck {
    let me = whoami();
    Arc::new(move |holder: &Holder| {
        let Some((who, pid)) = holder.who.rsplit_once(" pid ") else {
            return false;
        };
        if who != me {
            return false;
        }
        match pid.parse::<u32>() {
            Ok(pid) if pid != std::process::id() => {
                !std::path::Path::new(&format!("/proc/{pid}")).exists()
            }
            _ => false,
        }
    })
}

/// Prints progress: a line per finished resource, and on a terminal a live line of what
/// is running.
struct Printer {
    live: bool,
    verbose: u8,
    inner: Mutex<PrinterState>,
}

#[derive(Default)]
struct PrinterState {
    /// Per stack (nested stacks run inside their parent's deploy): actions, finished.
    counts: IndexMap<String, (usize, usize)>,
    running: IndexMap<String, String>,
    shown_live: bool,
}

impl Printer {
    fn new(verbose: u8) -> Printer {
        Printer {
            live: std::io::stderr().is_terminal(),
            verbose,
            inner: Mutex::new(PrinterState::default()),
        }
    }

    fn clear_live(&self, s: &mut PrinterState, err: &mut impl Write) {
        if s.shown_live {
            let _ = write!(err, "\r\x1b[2K");
            s.shown_live = false;
        }
    }

    fn draw_live(&self, s: &mut PrinterState, err: &mut impl Write) {
        if !self.live || s.running.is_empty() {
            return;
        }
        let names: Vec<&str> = s.running.keys().map(String::as_str).take(4).collect();
        let more = s.running.len().saturating_sub(names.len());
        let extra = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        let (total, done) = s
            .counts
            .values()
            .fold((0, 0), |(t, d), (a, b)| (t + a, d + b));
        let _ = write!(
            err,
            "  … [{done}/{total}] running {}{extra}",
            names.join(", ")
        );
        s.shown_live = true;
    }
}

impl Progress for Printer {
    fn report(&self, event: ProgressEvent<'_>) {
        let mut s = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let mut err = std::io::stderr().lock();
        self.clear_live(&mut s, &mut err);
        match event {
            ProgressEvent::StackStarted {
                stack,
                operation,
                total,
            } => {
                s.counts.insert(stack.to_string(), (total, 0));
                let _ = writeln!(err, "{operation} {stack}: {total} actions");
            }
            ProgressEvent::ResourceStarted {
                logical_id,
                resource_type,
                action,
                ..
            } => {
                s.running
                    .insert(logical_id.to_string(), resource_type.to_string());
                if self.verbose > 0 {
                    let _ = writeln!(err, "  → {logical_id} ({resource_type}) {action}");
                }
            }
            ProgressEvent::ResourceFinished {
                stack,
                logical_id,
                resource_type,
                outcome,
                seconds,
                detail,
            } => {
                s.running.shift_remove(logical_id);
                let mark = match outcome {
                    "failed" => "✗",
                    "skipped" => "!",
                    "retained" => "•",
                    "recovered" => "↺",
                    _ => "✓",
                };
                let counter = if outcome == "recovered" {
                    "recovered".to_string()
                } else {
                    let c = s.counts.entry(stack.to_string()).or_default();
                    c.1 += 1;
                    // Settling an interrupted run can add deletes the plan did not count.
                    c.0 = c.0.max(c.1);
                    format!("{}/{}", c.1, c.0)
                };
                let detail = detail.map(|d| format!(": {d}")).unwrap_or_default();
                let _ = writeln!(
                    err,
                    "[{counter}] {mark} {logical_id} ({resource_type}) {outcome} {seconds:.1}s{detail}"
                );
            }
            ProgressEvent::Note { stack, message } => {
                let _ = writeln!(err, "{stack}: {message}");
            }
        }
        self.draw_live(&mut s, &mut err);
        let _ = err.flush();
    }
}

/// Orders stacks so that each comes after the stacks it depends on (cdk.out order
/// otherwise).
fn dependency_order(stacks: Vec<StackTemplate>) -> Vec<StackTemplate> {
    let names: BTreeSet<String> = stacks.iter().map(|s| s.name.clone()).collect();
    let mut left = stacks;
    let mut done: BTreeSet<String> = BTreeSet::new();
    let mut out = Vec::with_capacity(left.len());
    while !left.is_empty() {
        let pos = left
            .iter()
            .position(|s| {
                s.dependencies
                    .iter()
                    .all(|d| done.contains(d) || !names.contains(d))
            })
            .unwrap_or(0);
        let s = left.remove(pos);
        done.insert(s.name.clone());
        out.push(s);
    }
    out
}

/// A Ctrl-C handler: the first press asks the run to stop (running calls finish and are
/// recorded); a second one exits at once.
pub fn stop_on_ctrl_c() -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!(
                "\nstopping: no new resource starts; waiting for the running calls to finish (Ctrl-C again to quit at once)"
            );
            let _ = tx.send(true);
            if tokio::signal::ctrl_c().await.is_ok() {
                std::process::exit(130);
            }
        }
        // Keep the sender alive until the process ends.
        std::future::pending::<()>().await;
    });
    rx
}

pub struct Setup {
    pub engine: Arc<Engine<Store>>,
    pub region: String,
    pub account_id: Option<String>,
}

impl Setup {
    /// What the engine deploys for `stack`, in this region and account.
    pub fn input(&self, stack: StackTemplate, parameters: BoundParameters) -> StackInput {
        StackInput {
            pseudo: Pseudo {
                region: self.region.clone(),
                account_id: self.account_id.clone(),
                stack_name: stack.name.clone(),
                stack_id: None,
            },
            name: stack.name,
            source: stack.file.display().to_string(),
            template: stack.template,
            parameters,
            nested: stack.nested,
        }
    }
}

async fn setup(global: &GlobalArgs, cfn_fallback: bool, verbose: u8) -> anyhow::Result<Setup> {
    setup_with(
        global,
        cfn_fallback,
        verbose,
        None,
        Some("values that use AWS::AccountId cannot be resolved"),
    )
    .await
}

/// The engine, on `store` when given (else the configured one).
pub async fn setup_with(
    global: &GlobalArgs,
    cfn_fallback: bool,
    verbose: u8,
    store: Option<Store>,
    account_note: Option<&str>,
) -> anyhow::Result<Setup> {
    let config = aws::load(global).await;
    let region = aws::region(&config)?;
    let account = aws::account_id(&config);
    let store = match store {
        Some(s) => s,
        None => Store::open(&global.store, &config, global.store_bucket.clone())?,
    };
    let providers = Providers::from_config(&config, global.store_bucket.clone());
    let lookups = Arc::new(AwsLookups::new(&config));
    let account_id = match account.await {
        Ok(id) => Some(id),
        Err(why) => {
            if let Some(what) = account_note {
                eprintln!("note: the AWS account is unknown ({why}); {what}");
            }
            None
        }
    };
    let engine = Arc::new(Engine {
        store: Arc::new(store),
        providers,
        lookups,
        region: region.clone(),
        who: holder_name(),
        cloudformation_fallback: cfn_fallback,
        progress: Arc::new(Printer::new(verbose)),
        stale: stale_check(),
    });
    Ok(Setup {
        engine,
        region,
        account_id,
    })
}

/// The exit code of a set of runs: 1 when one failed or was stopped, else 2 when one
/// left something unaddressed, else 0.
fn exit_code(reports: &[StackReport]) -> ExitCode {
    if reports
        .iter()
        .any(|r| matches!(r.status, StackStatus::Failed | StackStatus::Interrupted))
    {
        ExitCode::from(1)
    } else if reports.iter().any(|r| r.status == StackStatus::Partial) {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    }
}

fn print_reports(reports: &[StackReport], json: bool, operation: &str) -> anyhow::Result<()> {
    if json {
        let out = serde_json::json!({ "operation": operation, "stacks": reports });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        for r in reports {
            print!("{}", render::report(r, operation));
        }
    }
    Ok(())
}

pub async fn deploy(global: &GlobalArgs, args: DeployArgs) -> anyhow::Result<ExitCode> {
    let stacks = load_path(&args.path)?;
    let stacks = select_stacks(stacks, &args.stacks, args.path.is_dir())?;
    let stacks = dependency_order(stacks);
    let bound = super::diff::bind_all(&stacks, &args.parameters)?;
    let setup = setup(global, !args.no_cfn_fallback, global.verbose).await?;
    let remote = if args.remote.remote {
        Some(super::remote::Remote::new(global, &args.remote, &setup).await?)
    } else {
        None
    };
    let mut options = DeployOptions::new();
    options.no_rollback = args.no_rollback;
    options.concurrency = usize::from(args.concurrency);
    options.stop = stop_on_ctrl_c();

    let mut reports = Vec::new();
    for (stack, parameters) in stacks.into_iter().zip(bound) {
        let input = setup.input(stack, parameters);
        if let Some(remote) = &remote {
            let code = remote
                .deploy(
                    &setup.engine.store,
                    &input,
                    args.no_rollback,
                    usize::from(args.concurrency),
                    !args.remote.no_follow,
                )
                .await?;
            if code != ExitCode::SUCCESS {
                return Ok(code);
            }
            continue;
        }
        let report = deploy_stack(setup.engine.clone(), input, options.clone()).await?;
        let stop = !matches!(
            report.status,
            StackStatus::Succeeded | StackStatus::NoChanges | StackStatus::Partial
        );
        reports.push(report);
        if stop {
            break;
        }
    }
    print_reports(&reports, args.json, "deploy")?;
    Ok(exit_code(&reports))
}

pub async fn destroy(global: &GlobalArgs, args: DestroyArgs) -> anyhow::Result<ExitCode> {
    let setup = setup(global, true, global.verbose).await?;
    if args.remote.remote {
        let remote = super::remote::Remote::new(global, &args.remote, &setup).await?;
        return remote
            .run_stack(
                &setup.engine.store,
                "destroy",
                &args.stack,
                !args.remote.no_follow,
            )
            .await;
    }
    let mut options = DeployOptions::new();
    options.concurrency = usize::from(args.concurrency);
    options.stop = stop_on_ctrl_c();
    let report = destroy_stack(setup.engine.clone(), &args.stack, options).await?;
    let reports = vec![report];
    print_reports(&reports, args.json, "destroy")?;
    Ok(exit_code(&reports))
}

pub async fn rollback(global: &GlobalArgs, args: RollbackArgs) -> anyhow::Result<ExitCode> {
    let setup = setup(global, true, global.verbose).await?;
    if args.remote.remote {
        let remote = super::remote::Remote::new(global, &args.remote, &setup).await?;
        return remote
            .run_stack(
                &setup.engine.store,
                "rollback",
                &args.stack,
                !args.remote.no_follow,
            )
            .await;
    }
    let report = rollback_stack(setup.engine.clone(), &args.stack).await?;
    let reports = vec![report];
    print_reports(&reports, args.json, "rollback")?;
    Ok(exit_code(&reports))
}
