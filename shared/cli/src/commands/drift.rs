//! `stackflow drift` and `stackflow state refresh-observed`.

use std::fmt::Write as _;
use std::process::ExitCode;

use serde_json::Value;
use stackflow_engine::drift::{
    Against, DriftMode, DriftReport, DriftStatus, ResourceDrift, drift_stack, refresh_observed,
};

use crate::args::{DriftArgs, GlobalArgs, StackArg};
use crate::setup::setup;

pub async fn run(global: &GlobalArgs, args: DriftArgs) -> anyhow::Result<ExitCode> {
    let setup = setup(global, false, global.verbose).await?;
    let mode = match (args.accept, args.revert) {
        (true, _) => DriftMode::Accept,
        (_, true) => DriftMode::Revert,
        _ => DriftMode::Check,
    };
    let report = drift_stack(setup.engine.clone(), &args.stack, &args.resource, mode).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render(&report));
    }
    Ok(ExitCode::from(report.exit_code() as u8))
}

pub async fn refresh(global: &GlobalArgs, args: StackArg) -> anyhow::Result<ExitCode> {
    let setup = setup(global, false, global.verbose).await?;
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
    }
}

/// The report as text: one block per resource, then a summary with the exit code.
pub fn render(report: &DriftReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Drift of stack {} ({}):",
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
