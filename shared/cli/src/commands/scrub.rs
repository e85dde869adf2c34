//! `stackflow scrub`: secrets stored in plaintext in a stack's log, found and repaired
//! (see `stackflow_engine::scrub`).
//!
//! Nothing printed here holds a secret's value: the report names secrets by their
//! label, and every line (and every error) goes through `redact` on its way out.

use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use serde_json::{Value, json};
use stackflow_core::template::load_path;
use stackflow_engine::scrub::{
    Finding, Place, RewriteSummary, ScrubOptions, ScrubReport, Secret, Secrets, collect_secrets,
    redact, scrub,
};
use stackflow_events::EventStore;
use stackflow_providers::lookups::AwsLookups;

use crate::args::{GlobalArgs, ScrubArgs};
use crate::select::select_stacks;
use crate::setup::Context;

/// Parameter names and values, as given.
type Parameters = Vec<(String, String)>;

/// What a reference that could not be resolved is skipped for (it makes `--fail` fail).
const UNRESOLVED: &str = "could not be resolved";

pub async fn run(global: &GlobalArgs, args: ScrubArgs) -> anyhow::Result<ExitCode> {
    let (template, given) = template_and_parameters(&args)?;
    let ctx = Context::open(global).await?;
    let stream = ctx.stream(&args.stack);
    let events = ctx.store.read(&stream, 0).await?;
    if events.is_empty() {
        bail!(
            "stack {} has no events in {} ({})",
            args.stack,
            ctx.region,
            global.store
        );
    }
    // The engine on the store just read: a repair is a run, under the stack's lock.
    // Offline, references cannot be resolved, and are reported as skipped.
    let setup =
        crate::setup::setup_with(global, false, global.verbose, Some(ctx.store), None, false)
            .await?;
    let lookups = AwsLookups::new(&setup.config);
    let secrets = collect_secrets(&lookups, template.as_ref(), &events, &given).await;
    let searched = &secrets.searched;
    let unchecked = secrets
        .skipped
        .iter()
        .any(|s| s.reason.starts_with(UNRESOLVED));
    let report = if searched.is_empty() {
        ScrubReport {
            dry_run: args.dry_run,
            ..ScrubReport::default()
        }
    } else {
        let options = ScrubOptions {
            dry_run: args.dry_run,
            rewrite: args.rewrite,
        };
        scrub(&setup.engine, &args.stack, searched, &options)
            .await
            .map_err(|e| anyhow::anyhow!(redact(&e.to_string(), searched)))?
    };
    let heading = format!("stack {} in {} ({})", args.stack, ctx.region, global.store);
    let out = if args.json {
        let mut v = serde_json::to_value(&report)?;
        if let Value::Object(m) = &mut v {
            m.insert("stack".into(), json!(args.stack));
            m.insert("region".into(), json!(ctx.region));
            m.insert("store".into(), json!(global.store.to_string()));
            m.insert("clean".into(), json!(report.clean()));
            m.insert("searched".into(), json!(labels(searched)));
            m.insert("skipped".into(), serde_json::to_value(&secrets.skipped)?);
        }
        serde_json::to_string_pretty(&crate::json::camel_case(v))?
    } else {
        text(&heading, &args.stack, &secrets, &report)
    };
    println!("{}", redact(&out, searched));
    Ok(if args.fail && (!report.clean() || unchecked) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// The template as JSON (when a PATH is given) and the `--parameter` values to look for:
/// with a template, each must name one of its `NoEcho` parameters.
fn template_and_parameters(args: &ScrubArgs) -> anyhow::Result<(Option<Value>, Parameters)> {
    let Some(path) = &args.path else {
        return Ok((None, args.parameters.clone()));
    };
    let stacks = load_path(path)?;
    let stack = select_stacks(stacks, std::slice::from_ref(&args.stack), path.is_dir())?
        .into_iter()
        .next()
        .with_context(|| format!("{} holds no stack", path.display()))?;
    for (name, _) in &args.parameters {
        match stack.template.parameters.get(name) {
            None => bail!(
                "the template of stack {} declares no parameter `{name}`",
                stack.name
            ),
            Some(p) if !p.no_echo => bail!(
                "parameter `{name}` is not NoEcho: scrub looks only for secrets (NoEcho parameters and ssm-secure or secretsmanager references)"
            ),
            Some(_) => {}
        }
    }
    let template = serde_json::to_value(&stack.template)?;
    Ok((Some(template), args.parameters.clone()))
}

fn labels(secrets: &[Secret]) -> Vec<&str> {
    secrets.iter().map(Secret::label).collect()
}

/// The report, readably.
fn text(heading: &str, stack: &str, secrets: &Secrets, report: &ScrubReport) -> String {
    let mut out = format!("Scrub of {heading}\n");
    if secrets.searched.is_empty() {
        out.push_str(
            "Nothing to look for: no ssm-secure or secretsmanager reference was resolved, and no --parameter was given.\n",
        );
    } else {
        let _ = writeln!(
            out,
            "Looked for {} (raw, base64 and JSON-escaped):",
            count(secrets.searched.len(), "secret")
        );
        for label in labels(&secrets.searched) {
            let _ = writeln!(out, "  {label}");
        }
    }
    if !secrets.skipped.is_empty() {
        out.push_str("Not looked for:\n");
        for s in &secrets.skipped {
            let _ = writeln!(out, "  {}: {}", s.secret, s.reason);
        }
    }
    if report.clean() {
        out.push_str("\nNo plaintext found.\n");
        return out;
    }
    let _ = writeln!(
        out,
        "\nFound plaintext in {}:",
        count(report.findings.len(), "place")
    );
    for f in &report.findings {
        let _ = writeln!(out, "  {}", finding(f));
    }
    out.push('\n');
    if report.dry_run {
        out.push_str(&dry_run(stack, report));
    } else {
        out.push_str(&repaired(stack, report));
    }
    out.push_str(
        "\nRotate every secret found: whoever could read the log or its copies could read it.\n",
    );
    out
}

/// One finding: where, about what, and which secret in which form.
fn finding(f: &Finding) -> String {
    let place = match &f.place {
        Place::Event { seq, kind } => format!("event {seq} {kind}"),
        Place::State => "state".to_string(),
        Place::Snapshot { seq } => format!("snapshot at {seq}"),
    };
    let what = if f.in_key { " (in a key)" } else { "" };
    format!(
        "{place} {} {}{what}: {} ({})",
        f.logical_id
            .as_deref()
            .filter(|id| !id.is_empty())
            .unwrap_or("-"),
        if f.pointer.is_empty() {
            "/"
        } else {
            &f.pointer
        },
        f.secret,
        f.form.as_str()
    )
}

/// What the store's rewrite did, and what it could not reach.
fn rewritten(r: &RewriteSummary) -> String {
    let dropped = count(r.snapshots_dropped as usize, "snapshot");
    let mut out = if r.seqs.is_empty() {
        format!(
            "No event body held plaintext; dropped {dropped} (recorded by event {}).\n",
            r.record
        )
    } else {
        format!(
            "Rewrote the stored bodies of events {} in place (recorded by event {}) and dropped {dropped}.\n",
            seqs(&r.seqs),
            r.record
        )
    };
    for residue in &r.residue {
        let _ = writeln!(out, "Beyond the store's reach: {residue}.");
    }
    out
}

/// `n` and `what`, plural unless `n` is 1.
fn count(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

fn seqs(seqs: &[u64]) -> String {
    seqs.iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a run without --dry-run would do, and what it would not.
fn dry_run(stack: &str, report: &ScrubReport) -> String {
    let mut out = format!(
        "Nothing was changed (--dry-run). `stackflow scrub --stack {stack}` (with the same PATH and --parameter) appends events that replace each plaintext in the state by its {{{{resolve:...}}}} text, or by **** for a NoEcho value.\n"
    );
    if !report.unrepaired.is_empty() {
        let _ = writeln!(
            out,
            "It cannot change the events that hold plaintext ({}): an event is never changed in an append-only log. `--rewrite` rewrites their stored bodies in place (local and DynamoDB stores).",
            seqs(&report.unrepaired)
        );
    }
    out
}

/// What the repair did, and what it could not do.
fn repaired(stack: &str, report: &ScrubReport) -> String {
    let mut out = String::new();
    if !report.scrubbed.is_empty() {
        let _ = writeln!(
            out,
            "Repaired the state: events {} replace {} by their {{{{resolve:...}}}} text or ****; the state, and every snapshot from now on, hold no plaintext.",
            seqs(&report.scrubbed),
            count(report.replaced, "value")
        );
    }
    if let Some(seq) = report.snapshot {
        let _ = writeln!(
            out,
            "A clean snapshot at {seq} supersedes the one that held plaintext (its stored copy goes only with --rewrite)."
        );
    }
    if let Some(r) = &report.rewritten {
        out.push_str(&rewritten(r));
    }
    if !report.unrepaired.is_empty() {
        let _ = writeln!(
            out,
            "Not repaired: the stored bodies of events {} still hold plaintext. An event is never changed in an append-only log; `stackflow scrub --stack {stack} --rewrite` rewrites them in place (local and DynamoDB stores).",
            seqs(&report.unrepaired)
        );
    }
    if !report.remaining.is_empty() {
        out.push_str("Still in the state (a key that spells a secret cannot be replaced):\n");
        for f in &report.remaining {
            let _ = writeln!(out, "  {}", finding(f));
        }
    }
    out
}
