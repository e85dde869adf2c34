//! `stackflow import`: adopt existing AWS resources into a stack's records.

use std::fmt::Write as _;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use indexmap::IndexMap;
use stackflow_core::assets::stackflow_bucket_name;
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
    let overrides = overrides(&args)?;
    let setup = setup(global, true, global.verbose).await?;
    let setup = setup.for_stack(global, &stack).await?;
    setup.check_recorded_account(&stack.name).await?;
    let moved = asset_references_to_move(global, &setup, &args, &stack).await?;
    let input = setup.input(stack, bound);
    // A migration's template over UpdateStack's inline limit goes by S3: the store
    // bucket, else stackflow's bucket of this account and region.
    let bucket = global.store_bucket.clone().or_else(|| {
        let account = setup.account_id.as_deref()?;
        Some(stackflow_bucket_name(account, &setup.region))
    });
    let lookups = AwsLookups::new(&crate::aws::load(global).await);
    let cloudformation = Arc::new(match bucket {
        Some(b) => lookups.with_template_bucket(b),
        None => lookups,
    });
    let from = |name: &str| MigrateFrom {
        stack: name.to_string(),
        cloudformation: cloudformation.clone(),
    };
    let migrate = match args.migrate_from_cloudformation.as_deref() {
        None => None,
        Some("") => Some(from(&args.stack)),
        Some(source) => Some(from(source)),
    };
    if let (Some(m), false) = (&migrate, args.dry_run) {
        crate::confirm::confirm(
            global.yes,
            &format!(
                "Import stack {} and then delete the CloudFormation stack {} (its resources \
                 are retained, the stack itself is gone)?",
                args.stack, m.stack
            ),
            "preview it with --dry-run, then pass --yes to go ahead",
        )
        .await?;
    }
    let options = ImportOptions {
        overrides,
        auto: args.auto,
        force: args.force,
        migrate,
        cloudformation: Some(from(&args.stack)),
        dry_run: args.dry_run,
    };
    let report = import_stack(setup.engine.clone(), input, options).await?;
    if let Some(file) = &args.record_resource_mapping {
        let mapping = found_mapping(&report);
        std::fs::write(file, serde_json::to_string_pretty(&mapping)? + "\n")
            .with_context(|| format!("writing the resource mapping {}", file.display()))?;
        eprintln!(
            "wrote {} physical id(s) to {}: review it, then import with --resource-mapping {}",
            mapping.len(),
            file.display(),
            file.display()
        );
    }
    if args.json {
        crate::json::print(&report)?;
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

/// The physical ids given: the mapping (a file or inline JSON), then each --resource
/// over it.
fn overrides(args: &ImportArgs) -> anyhow::Result<IndexMap<String, String>> {
    let (text, from) = match (&args.resource_mapping, &args.resource_mapping_inline) {
        (Some(file), _) => (
            std::fs::read_to_string(file)
                .with_context(|| format!("reading the resource mapping {}", file.display()))?,
            file.display().to_string(),
        ),
        (None, Some(text)) => (text.clone(), "--resource-mapping-inline".to_string()),
        (None, None) => (String::new(), String::new()),
    };
    let mut out = if text.is_empty() {
        IndexMap::new()
    } else {
        parse_mapping(&text).map_err(|why| anyhow::anyhow!("{from}: {why}"))?
    };
    out.extend(args.resources.iter().cloned());
    Ok(out)
}

/// What is wrong with a resource mapping.
#[derive(Debug, thiserror::Error)]
enum BadMapping {
    #[error("not JSON ({0}); expected {{\"LogicalId\": \"physical-id\", ...}}")]
    Json(serde_json::Error),
    #[error("expected a JSON object, {{\"LogicalId\": \"physical-id\", ...}}")]
    Shape,
    #[error("the physical id of {id} must be a non-empty string, found {found}")]
    Id {
        id: String,
        found: serde_json::Value,
    },
}

/// A resource mapping: a JSON object of logical id to physical id (a string each).
fn parse_mapping(text: &str) -> Result<IndexMap<String, String>, BadMapping> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(BadMapping::Json)?;
    let Some(map) = value.as_object() else {
        return Err(BadMapping::Shape);
    };
    map.iter()
        .map(|(k, v)| match v.as_str() {
            Some(p) if !p.is_empty() => Ok((k.clone(), p.to_string())),
            _ => Err(BadMapping::Id {
                id: k.clone(),
                found: v.clone(),
            }),
        })
        .collect()
}

/// What the import found: the physical id of each resource it imported (or would).
fn found_mapping(report: &ImportReport) -> IndexMap<String, String> {
    report
        .resources
        .iter()
        .filter(|r| r.status == ImportStatus::Imported)
        .filter_map(|r| Some((r.logical_id.clone(), r.physical_id.clone()?)))
        .collect()
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
        ImportStatus::OutOfScope => "out of scope (not named; the next deploy creates it)",
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
    let dry = if report.dry_run {
        ", dry run: nothing recorded"
    } else {
        ""
    };
    let _ = writeln!(
        out,
        "Import into stack {} ({}{dry}):",
        report.stack, report.import_id
    );
    if let Some(cfn) = &report.from_cloudformation {
        let _ = writeln!(
            out,
            "  physical ids from CloudFormation stack {cfn} (left as it is: it still manages \
             them too; --migrate-from-cloudformation retires it)"
        );
    }
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
        match r.found_by.as_deref() {
            Some("mapping") => line.push_str(" (as named)"),
            Some("name") => line.push_str(" (by its name)"),
            Some(other) => {
                let stack = other.strip_prefix("cloudformation:").unwrap_or(other);
                let _ = write!(line, " (from CloudFormation stack {stack})");
            }
            None => {}
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
    let scope = match count(ImportStatus::OutOfScope) {
        0 => String::new(),
        n => format!(", {n} out of scope"),
    };
    let next = if report.dry_run {
        "Nothing was recorded: run it again without --dry-run to import.".to_string()
    } else {
        format!(
            "An import changes nothing in AWS; read `stackflow diff {path} --stack {}` before \
             the next deploy.",
            report.stack
        )
    };
    let _ = writeln!(
        out,
        "{} {}, {} not deployed yet, {} unsupported, {} failed{scope}. {next}",
        count(ImportStatus::Imported),
        if report.dry_run {
            "to import"
        } else {
            "imported"
        },
        count(ImportStatus::NotDeployedYet),
        count(ImportStatus::Unsupported),
        count(ImportStatus::Failed),
    );
    for child in &report.nested {
        out.push_str(&render_one(child, path));
    }
    out
}
