//! `stackflow init`, `state show`, `events` and `unlock`: the event log from the command
//! line.

use std::io::Write;
use std::process::ExitCode;

use anyhow::bail;
use stackflow_events::dynamo::DynamoStore;
use stackflow_events::projection::StackState;
use stackflow_events::{EventStore, load_state};

use crate::args::{EventsArgs, GlobalArgs, StateOrphanArgs, StateShowArgs};
use crate::render;
use crate::setup::{Context, setup_with};
use crate::store::{StoreSpec, local_file};

pub async fn init(global: &GlobalArgs) -> anyhow::Result<ExitCode> {
    match &global.store {
        StoreSpec::Local(dir) => {
            let file = local_file(dir);
            let existed = file.exists();
            crate::store::open_local(dir)?;
            if existed {
                println!(
                    "The local store {} is ready (it already existed).",
                    file.display()
                );
            } else {
                println!("Created the local store {}.", file.display());
            }
        }
        StoreSpec::DynamoDb(table) => {
            let config = crate::aws::load(global).await;
            let client = aws_sdk_dynamodb::Client::new(&config);
            if DynamoStore::create_table_if_missing(&client, table).await? {
                println!("Created the DynamoDB table {table}.");
            } else {
                println!("The DynamoDB table {table} is ready (it already existed).");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn show(global: &GlobalArgs, args: StateShowArgs) -> anyhow::Result<ExitCode> {
    let ctx = Context::open(global).await?;
    let stream = ctx.stream(&args.stack);
    let state = match args.at {
        None => load_state(&ctx.store, &stream).await?,
        Some(at) => {
            let events = ctx.store.read(&stream, 0).await?;
            if let Some(last) = events.last()
                && at > last.seq
            {
                bail!(
                    "stack {} has events up to {}; --at {at} is past the end",
                    args.stack,
                    last.seq
                );
            }
            StackState::fold_until(&events, at)
        }
    };
    if state.seq == 0 {
        bail!(
            "stack {} has no events in {} ({}); deploy it first, or check --stack, --region and --store",
            args.stack,
            ctx.region,
            global.store
        );
    }
    if args.json {
        crate::json::print(&state)?;
    } else {
        print!("{}", render::state(&args.stack, &ctx.region, &state));
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn events(global: &GlobalArgs, args: EventsArgs) -> anyhow::Result<ExitCode> {
    let ctx = Context::open(global).await?;
    let stream = ctx.stream(&args.stack);
    let events = ctx.store.read(&stream, 0).await?;
    if events.is_empty() && !args.json && !args.follow {
        bail!(
            "stack {} has no events in {} ({})",
            args.stack,
            ctx.region,
            global.store
        );
    }
    if let Some(file) = &args.html {
        let page = crate::timeline::html(&args.stack, &events)
            .map_err(|e| anyhow::anyhow!("stack {}: {e}", args.stack))?;
        std::fs::write(file, page)
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", file.display()))?;
        println!("the last run of {} drawn in {}", args.stack, file.display());
        return Ok(ExitCode::SUCCESS);
    }
    let mut last = 0;
    if !print_events(&events, args.json, &mut last)? {
        return Ok(ExitCode::SUCCESS);
    }
    if !args.follow {
        return Ok(ExitCode::SUCCESS);
    }
    loop {
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        // Positions can show up out of order while a run appends (see `EventStore::read`):
        // what comes next is read from the first position not printed yet.
        let new = ctx.store.read(&stream, last).await?;
        let ready: Vec<_> = new
            .into_iter()
            .enumerate()
            .take_while(|(i, e)| e.seq == last + 1 + *i as u64)
            .map(|(_, e)| e)
            .collect();
        if !print_events(&ready, args.json, &mut last)? {
            return Ok(ExitCode::SUCCESS);
        }
    }
}

/// Prints `events`, one a line; false when the reader went away (`| head`), which ends
/// the listing quietly.
fn print_events(
    events: &[stackflow_events::event::StoredEvent],
    json: bool,
    last: &mut u64,
) -> anyhow::Result<bool> {
    let mut out = std::io::stdout().lock();
    for e in events {
        let line = if json {
            crate::json::line(e)?
        } else {
            render::event_line(e)
        };
        if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
            return Ok(false);
        }
        *last = e.seq;
    }
    Ok(true)
}

pub async fn list(global: &GlobalArgs, json: bool) -> anyhow::Result<ExitCode> {
    let ctx = Context::open(global).await?;
    let mut streams = ctx.store.streams().await?;
    streams.sort_by(|a, b| (&a.region, &a.stack).cmp(&(&b.region, &b.stack)));
    let mut rows = Vec::new();
    for stream in streams {
        let state = load_state(&ctx.store, &stream).await?;
        let last = state.last_deploy.as_ref();
        rows.push(serde_json::json!({
            "stack": stream.stack,
            "region": stream.region,
            "resources": state.resources.len(),
            "lastRun": last.map(|d| d.deploy_id.clone()),
            "lastRunStatus": last.map(|d| format!("{:?}", d.status)),
            "lastRunAt": last.map(|d| d.started_at.clone()),
            "lockedBy": state.lock.as_ref().map(|h| h.who.clone()),
        }));
    }
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "stacks": rows }))?
        );
        return Ok(ExitCode::SUCCESS);
    }
    if rows.is_empty() {
        println!("The store ({}) holds no stack.", global.store);
        return Ok(ExitCode::SUCCESS);
    }
    let text = |v: &serde_json::Value| v.as_str().unwrap_or("-").to_string();
    println!(
        "{:<32} {:<14} {:>9}  {:<20} {:<24} LOCK",
        "STACK", "REGION", "RESOURCES", "LAST RUN", "AT"
    );
    for r in &rows {
        println!(
            "{:<32} {:<14} {:>9}  {:<20} {:<24} {}",
            text(&r["stack"]),
            text(&r["region"]),
            r["resources"],
            text(&r["lastRunStatus"]),
            text(&r["lastRunAt"]),
            text(&r["lockedBy"]),
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn unlock(global: &GlobalArgs, stack: &str) -> anyhow::Result<ExitCode> {
    let ctx = Context::open(global).await?;
    match ctx
        .store
        .break_lock(&ctx.stream(stack), &crate::liveness::whoami())
        .await?
    {
        Some(h) => {
            println!(
                "Broke the lock of stack {stack}: it was held by {} ({} {}, since {}).",
                h.who, h.operation, h.deploy_id, h.since
            );
            if h.expires.is_some() {
                println!(
                    "If that run still exists, it stops at its next lease renewal (within a \
                     minute): nothing it writes after this is accepted."
                );
            } else {
                println!(
                    "If that run still exists (a Step Functions execution), stop it: nothing \
                     it writes after this is accepted, and it does not notice by itself."
                );
            }
        }
        None => println!("Stack {stack} is not locked; nothing to do."),
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn orphan(global: &GlobalArgs, args: StateOrphanArgs) -> anyhow::Result<ExitCode> {
    let ctx = Context::open(global).await?;
    let setup = setup_with(global, false, global.verbose, Some(ctx.store), None, false).await?;
    setup.check_recorded_account(&args.stack).await?;
    let report = stackflow_engine::orphan::orphan(
        setup.engine.clone(),
        &args.stack,
        &args.ids,
        args.dry_run,
    )
    .await?;
    if args.json {
        crate::json::print(&report)?;
        return Ok(ExitCode::SUCCESS);
    }
    let head = if report.dry_run {
        "Would take out of the records (dry run: nothing recorded)"
    } else {
        "Taken out of the records (nothing changed in AWS)"
    };
    println!("{head} of stack {}:", report.stack);
    for o in &report.orphaned {
        let mut line = format!(
            "  {} ({}): {}",
            o.logical_id, o.resource_type, o.physical_id
        );
        if !o.dependents.is_empty() {
            line.push_str(&format!(
                "; {} keep the values they were deployed with",
                o.dependents.join(", ")
            ));
        }
        println!("{line}");
    }
    if !report.already.is_empty() {
        println!(
            "  already out of the records (an earlier orphan): {}",
            report.already.join(", ")
        );
    }
    println!(
        "Each stays in AWS, no longer managed by stackflow. While the template declares one, \
         the next deploy creates it again: remove it from the template first."
    );
    Ok(ExitCode::SUCCESS)
}
