//! `stackflow import`: adopt existing AWS resources into a stack's records.

use std::fmt::Write as _;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::bail;
use stackflow_core::template::load_path;
use stackflow_engine::import::{
    ImportOptions, ImportReport, ImportStatus, MigrateFrom, MigrationOutcome, import_stack,
};
use stackflow_providers::lookups::AwsLookups;

use crate::args::{GlobalArgs, ImportArgs};
use crate::assets::{Assets, use_cdk_bootstrap_assets};
use crate::select::{bind_all, select_stacks};
use crate::setup::setup;

pub async fn run(global: &GlobalArgs, args: ImportArgs) -> anyhow::Result<ExitCode> {
    let stacks = load_path(&args.path)?;
    let stacks = select_stacks(
        stacks,
        std::slice::from_ref(&args.stack),
        args.path.is_dir(),
    )?;
    let [stack] = <[_; 1]>::try_from(stacks).map_err(|_| anyhow::anyhow!("one stack at a time"))?;
    // An import takes no parameter values: every parameter is bound at its Default.
    let bound = match bind_all(std::slice::from_ref(&stack), &[]) {
        Ok(mut b) => b.remove(0),
        Err(e) => bail!(
            "{e:#}\nimport binds every parameter at its Default: give the parameter a Default \
             in the template"
        ),
    };
    let setup = setup(global, true, global.verbose).await?;
    let moved = asset_references_to_move(global, &setup, &args, &stack).await?;
    let input = setup.input(stack, bound);
    let migrate = match &args.migrate_from_cloudformation {
        None => None,
        Some(source) => Some(MigrateFrom {
            stack: if source.is_empty() {
                args.stack.clone()
            } else {
                source.clone()
            },
            cloudformation: Arc::new(AwsLookups::new(&crate::aws::load(global).await)),
        }),
    };
    let options = ImportOptions {
        overrides: args.resources.iter().cloned().collect(),
        force: args.force,
        migrate,
    };
    let report = import_stack(setup.engine.clone(), input, options).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render(&report, &args.path.display().to_string()));
    }
    for w in &report.warnings {
        eprintln!("warning: {w}");
    }
    if moved > 0 {
        eprintln!(
            "info: {moved} asset reference(s) of the adopted resources point at the CDK \
             bootstrap bucket, and this region keeps assets in stackflow's bucket: the first \
             `stackflow diff` shows them as changes, and the next deploy repoints them (do \
             not skip it; --use-cdk-bootstrap-assets keeps the CDK bucket)"
        );
    }
    Ok(ExitCode::from(report.exit_code() as u8))
}

/// How many asset references of `stack` the next deploy points at stackflow's bucket
/// (none when the region keeps assets in the CDK bootstrap bucket). The import itself
/// records the template as it is: the values the adopted resources hold today.
async fn asset_references_to_move(
    global: &GlobalArgs,
    setup: &crate::setup::Setup,
    args: &ImportArgs,
    stack: &stackflow_core::template::StackTemplate,
) -> anyhow::Result<usize> {
    let assets = Assets::prepare(
        &crate::aws::load(global).await,
        &setup.region,
        setup.account_id.as_deref(),
        std::slice::from_ref(stack),
        use_cdk_bootstrap_assets(args.use_cdk_bootstrap_assets, &args.path),
    )
    .await?;
    Ok(assets.rewrite(&mut [stack.clone()]).len())
}

fn status_text(status: ImportStatus) -> &'static str {
    match status {
        ImportStatus::Imported => "imported",
        ImportStatus::NotDeployedYet => "not deployed yet",
        ImportStatus::Unsupported => "unsupported",
        ImportStatus::Kept => "kept as recorded",
        ImportStatus::Failed => "FAILED",
    }
}

/// The report as text, with what to do next; child stacks after their parent, then the
/// CloudFormation stack migrated from.
pub fn render(report: &ImportReport, path: &str) -> String {
    let mut out = render_one(report, path);
    if let Some(m) = &report.migration {
        let head = match m.outcome {
            MigrationOutcome::Deleted => "Migrated",
            MigrationOutcome::Untouched => "NOT migrated",
            MigrationOutcome::RetainFailed | MigrationOutcome::DeleteFailed => "Migration FAILED",
            MigrationOutcome::ResourcesLost => "Migrated, RESOURCES LOST",
        };
        let _ = writeln!(
            out,
            "{head} from CloudFormation stack {}: {}",
            m.source, m.message
        );
    }
    out
}

fn render_one(report: &ImportReport, path: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Import into stack {} ({}):",
        report.stack, report.import_id
    );
    for r in &report.resources {
        let mut line = format!(
            "  {} ({}): {}",
            r.logical_id,
            r.resource_type,
            status_text(r.status)
        );
        if let Some(p) = &r.physical_id {
            let _ = write!(line, " {p}");
        }
        if let Some(b) = &r.baseline {
            let _ = write!(line, " (baseline {b})");
        }
        if let Some(why) = &r.reason {
            let _ = write!(line, ": {why}");
        }
        let _ = writeln!(out, "{line}");
    }
    if let Some(d) = &report.marked_journal {
        let _ = writeln!(
            out,
            "The rollback journal of failed deploy {d} is marked: its rollback leaves the \
             adopted resources alone."
        );
    }
    let count = |s: ImportStatus| report.resources.iter().filter(|r| r.status == s).count();
    let _ = writeln!(
        out,
        "{} imported, {} not deployed yet, {} unsupported, {} failed. An import changes \
         nothing in AWS; read `stackflow diff {path} --stack {}` before the next deploy.",
        count(ImportStatus::Imported),
        count(ImportStatus::NotDeployedYet),
        count(ImportStatus::Unsupported),
        count(ImportStatus::Failed),
        report.stack
    );
    for child in &report.nested {
        out.push_str(&render_one(child, path));
    }
    out
}
