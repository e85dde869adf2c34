//! `stackflow drift` and `stackflow state refresh-observed`.

use std::fmt::Write as _;
use std::io::IsTerminal as _;
use std::process::ExitCode;

use serde_json::Value;
use stackflow_engine::drift::{
    Against, DriftMode, DriftReport, DriftRun, DriftStatus, ResourceDrift, drift_stack_with,
    refresh_observed,
};
use stackflow_events::EventStore as _;

use crate::args::{DriftArgs, GlobalArgs, StackArg};
use crate::setup::setup;

pub async fn run(global: &GlobalArgs, args: DriftArgs) -> anyhow::Result<ExitCode> {
    let setup = setup(global, false, global.verbose).await?;
    let mode = match (args.accept, args.revert) {
        (true, _) => DriftMode::Accept,
        (_, true) => DriftMode::Revert,
        _ => DriftMode::Check,
    };
    let how = DriftRun {
        concurrency: usize::from(args.concurrency),
        dry_run: args.dry_run,
    };
    let stacks = match &args.stack {
        Some(stack) => vec![stack.clone()],
        None => every_stack(&setup, &global.store.to_string()).await?,
    };
    let mut reports = Vec::new();
    let mut code = 0;
    for stack in &stacks {
        if let Err(e) = setup.check_recorded_account(stack).await {
            // Another account's stack is not checked here; under --all, the others are.
            if !args.all {
                return Err(e);
            }
            eprintln!("error: {e}");
            code = code.max(1);
            continue;
        }
        let engine = setup.engine.clone();
        if mode == DriftMode::Revert && !args.dry_run && !global.yes {
            confirm_revert(&setup, stack, &args, how).await?;
        }
        match drift_stack_with(engine, stack, &args.resource, mode, how).await {
            Ok(report) => {
                code = code.max(report.exit_code());
                if !args.json {
                    print!("{}", render(&report));
                }
                reports.push(report);
            }
            // One stack that cannot be checked does not stop the others under --all.
            Err(e) if args.all => {
                eprintln!("error: stack {stack}: {e}");
                code = code.max(1);
            }
            Err(e) => return Err(e.into()),
        }
    }
    if args.json {
        let out = if args.all {
            serde_json::json!({ "stacks": reports })
        } else {
            serde_json::to_value(&reports[0])?
        };
        crate::json::print(&out)?;
    } else if args.all {
        println!("{} stack(s) checked in {}.", reports.len(), setup.region);
    }
    Ok(ExitCode::from(code as u8))
}

/// `--all`: every stack of this region the store holds records of, by name.
async fn every_stack(setup: &crate::setup::Setup, store: &str) -> anyhow::Result<Vec<String>> {
    let mut stacks: Vec<String> = setup
        .engine
        .store
        .streams()
        .await?
        .into_iter()
        .filter(|s| s.region == setup.region)
        .map(|s| s.stack)
        .collect();
    stacks.sort();
    let mut with_resources: Vec<String> = Vec::new();
    for stack in stacks {
        let stream = setup.engine.stream(&stack);
        let state = stackflow_events::load_state(setup.engine.store.as_ref(), &stream).await?;
        if !state.resources.is_empty() {
            with_resources.push(stack);
        }
    }
    if with_resources.is_empty() {
        anyhow::bail!(
            "the store ({store}) has no stack with recorded resources in {}: check --store \
             and --region",
            setup.region
        );
    }
    Ok(with_resources)
}

pub async fn refresh(global: &GlobalArgs, args: StackArg) -> anyhow::Result<ExitCode> {
    let setup = setup(global, false, global.verbose).await?;
    setup.check_recorded_account(&args.stack).await?;
    let done = refresh_observed(setup.engine.clone(), &args.stack).await?;
    println!("Baselines of stack {}:", args.stack);
    for (id, what) in &done {
        println!("  {id}: {what}");
    }
    Ok(ExitCode::SUCCESS)
}

/// A value for a line of text: JSON, `(none)` when absent.
fn shown(v: &Option<Value>) -> String {
    match v {
        Some(v) => v.to_string(),
        None => "(none)".into(),
    }
}

fn status_text(r: &ResourceDrift) -> String {
    let against = match r.against {
        Against::Baseline => "the baseline",
        Against::Recorded => "the recorded properties",
    };
    match r.status {
        DriftStatus::InSync => format!("in sync (with {against})"),
        DriftStatus::Drifted => format!("DRIFTED from {against}"),
        DriftStatus::Deleted => "DELETED outside stackflow".into(),
        DriftStatus::NotCompared => "not compared: only masked (***) positions differ".into(),
        DriftStatus::Unsupported => "unsupported: AWS cannot be read for it".into(),
        DriftStatus::Accepted => "accepted: AWS's values are the baseline now".into(),
        DriftStatus::Reverted => "reverted to the baseline".into(),
        DriftStatus::Declined => "declined".into(),
        DriftStatus::WouldAccept => {
            format!("DRIFTED from {against}: --accept would take AWS's values as the baseline")
        }
        DriftStatus::WouldRevert => {
            format!("DRIFTED from {against}: --revert would put it back to the baseline")
        }
    }
}

/// The report as text: one block per resource, then a summary with the exit code.
pub fn render(report: &DriftReport) -> String {
    let mut out = String::new();
    let dry = if report.dry_run {
        ", dry run: nothing recorded or changed"
    } else {
        ""
    };
    let _ = writeln!(
        out,
        "Drift of stack {} ({}{dry}):",
        report.stack, report.check_id
    );
    for r in &report.resources {
        let _ = writeln!(
            out,
            "  {} ({}, {}): {}",
            r.logical_id,
            r.resource_type,
            r.physical_id,
            status_text(r)
        );
        for d in &r.differences {
            let _ = writeln!(
                out,
                "      {}: recorded {}, AWS {}",
                d.path,
                shown(&d.recorded),
                shown(&d.aws)
            );
        }
        if !r.not_compared.is_empty() {
            let _ = writeln!(
                out,
                "      masked, not compared: {}",
                r.not_compared.join(", ")
            );
        }
        if !r.write_only.is_empty() {
            let _ = writeln!(
                out,
                "      write-only (AWS never returns them), not compared: {}",
                r.write_only.join(", ")
            );
        }
        if let Some(reason) = &r.reason {
            let _ = writeln!(out, "      {reason}");
        }
    }
    let count = |s: DriftStatus| report.resources.iter().filter(|r| r.status == s).count();
    let _ = writeln!(
        out,
        "{} resources: {} in sync, {} drifted, {} deleted, {} not compared, {} unsupported{}",
        report.resources.len(),
        count(DriftStatus::InSync),
        count(DriftStatus::Drifted),
        count(DriftStatus::Deleted),
        count(DriftStatus::NotCompared),
        count(DriftStatus::Unsupported),
        match report.mode {
            DriftMode::Check => String::new(),
            _ if report.dry_run => format!(
                ", {} to accept, {} to revert, {} declined",
                count(DriftStatus::WouldAccept),
                count(DriftStatus::WouldRevert),
                count(DriftStatus::Declined)
            ),
            _ => format!(
                ", {} accepted, {} reverted, {} declined",
                count(DriftStatus::Accepted),
                count(DriftStatus::Reverted),
                count(DriftStatus::Declined)
            ),
        }
    );
    if report.mode == DriftMode::Check && count(DriftStatus::Drifted) > 0 {
        let _ = writeln!(
            out,
            "Deploy to put AWS back to the template, or: stackflow drift --stack {} --revert \
             (back to the baseline) | --accept (take AWS's values as the baseline)",
            report.stack
        );
    }
    out
}

/// Before `--revert` changes AWS: what it would revert (a dry run, shown unless
/// `--json`), then a yes on the terminal.
async fn confirm_revert(
    setup: &crate::setup::Setup,
    stack: &str,
    args: &DriftArgs,
    how: DriftRun,
) -> anyhow::Result<()> {
    let question = format!(
        "Revert the drift of stack {stack}: update each drifted resource back to its \
         recorded properties?"
    );
    let how_else = "preview it with --dry-run, then pass --yes to go ahead";
    if !std::io::stdin().is_terminal() {
        return crate::confirm::confirm(false, &question, how_else).await;
    }
    let preview = DriftRun {
        dry_run: true,
        ..how
    };
    let report = drift_stack_with(
        setup.engine.clone(),
        stack,
        &args.resource,
        DriftMode::Revert,
        preview,
    )
    .await?;
    if !report
        .resources
        .iter()
        .any(|r| r.status == DriftStatus::WouldRevert)
    {
        return Ok(());
    }
    if !args.json {
        print!("{}", render(&report));
    }
    crate::confirm::confirm(false, &question, how_else).await
}
