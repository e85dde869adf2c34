//! `stackflow diff`: what the next deploy would do.

use std::process::ExitCode;

use anyhow::{Context, bail};
use indexmap::IndexMap;
use stackflow_core::intrinsics::{BoundParameters, bind_parameters};
use stackflow_core::plan::Plan;
use stackflow_core::template::{StackTemplate, load_path};

use crate::args::{DiffArgs, GlobalArgs};
use crate::render;
use crate::store::{Store, StoreSpec, local_file};

/// Picks the stacks to work on: every stack of a cdk.out, or the ones named with
/// `--stack`; for a single template, `--stack` renames it.
pub fn select_stacks(
    mut stacks: Vec<StackTemplate>,
    names: &[String],
    is_dir: bool,
) -> anyhow::Result<Vec<StackTemplate>> {
    if names.is_empty() {
        return Ok(stacks);
    }
    if !is_dir {
        if names.len() > 1 {
            bail!("a template file is one stack: give --stack once");
        }
        stacks[0].name = names[0].clone();
        return Ok(stacks);
    }
    let known: Vec<String> = stacks.iter().map(|s| s.name.clone()).collect();
    for n in names {
        if !known.contains(n) {
            bail!(
                "the cloud assembly has no stack `{n}`; it has {}",
                known.join(", ")
            );
        }
    }
    stacks.retain(|s| names.contains(&s.name));
    Ok(stacks)
}

/// Binds every stack's parameters (the cloud assembly's, then the command line's), all
/// checked before any AWS call.
pub fn bind_all(
    stacks: &[StackTemplate],
    given: &[(String, String)],
) -> anyhow::Result<Vec<BoundParameters>> {
    let given: IndexMap<String, String> = given.iter().cloned().collect();
    stacks
        .iter()
        .map(|stack| {
            let mut values = stack.parameters.clone();
            values.extend(given.clone());
            bind_parameters(&stack.template, &values)
                .map_err(|e| e.in_file(stack.file.display()))
                .with_context(|| format!("stack {}", stack.name))
        })
        .collect()
}

pub async fn run(global: &GlobalArgs, args: DiffArgs) -> anyhow::Result<ExitCode> {
    let stacks = load_path(&args.path)?;
    let stacks = select_stacks(stacks, &args.stacks, args.path.is_dir())?;
    let bound = bind_all(&stacks, &args.parameters)?;

    // A diff never creates a store: a local store that does not exist yet holds nothing.
    let store = match &global.store {
        StoreSpec::Local(dir) if !local_file(dir).exists() => Some(Store::Local(
            stackflow_events::sqlite::SqliteStore::open_in_memory()?,
        )),
        _ => None,
    };
    let setup = super::deploy::setup_with(
        global,
        !args.no_cfn_fallback,
        global.verbose,
        store,
        (!args.json).then_some("values that use AWS::AccountId show as known after deploy"),
    )
    .await?;
    let mut plans: Vec<Plan> = Vec::new();
    for (stack, parameters) in stacks.iter().zip(bound) {
        let input = setup.input(stack.clone(), parameters);
        plans.push(setup.engine.plan_only(&input).await?);
    }

    if args.json {
        let out = serde_json::json!({ "stacks": plans });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        for (stack, p) in stacks.iter().zip(&plans) {
            print!(
                "{}",
                render::plan(p, &stack.file.display().to_string(), global.verbose)
            );
        }
    }
    let changes = plans.iter().any(|p| !p.is_empty());
    Ok(if args.fail && changes {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
