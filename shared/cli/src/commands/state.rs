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
            stackflow_events::sqlite::SqliteStore::open(&file)?;
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
        println!("{}", serde_json::to_string_pretty(&state)?);
    } else {
        print!("{}", render::state(&args.stack, &ctx.region, &state));
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn events(global: &GlobalArgs, args: EventsArgs) -> anyhow::Result<ExitCode> {
    let ctx = Context::open(global).await?;
    let events = ctx.store.read(&ctx.stream(&args.stack), 0).await?;
    if events.is_empty() && !args.json {
        bail!(
            "stack {} has no events in {} ({})",
            args.stack,
            ctx.region,
            global.store
        );
    }
    // A reader that goes away (`| head`) ends the listing quietly.
    let mut out = std::io::stdout().lock();
    for e in &events {
        let line = if args.json {
            serde_json::to_string(e)?
        } else {
            render::event_line(e)
        };
        if writeln!(out, "{line}").is_err() {
            break;
        }
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
    let report = stackflow_engine::orphan::orphan(
        setup.engine.clone(),
        &args.stack,
        &args.ids,
        args.dry_run,
    )
    .await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
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
    println!(
        "Each stays in AWS, no longer managed by stackflow. While the template declares one, \
         the next deploy creates it again: remove it from the template first."
    );
    Ok(ExitCode::SUCCESS)
}
