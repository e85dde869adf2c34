//! `stackflow diff`: what the next deploy would do.

use std::process::ExitCode;

use anyhow::{Context, bail};
use indexmap::IndexMap;
use stackflow_core::intrinsics::{EmptyEnvironment, Pseudo, bind_parameters};
use stackflow_core::plan::{CurrentState, Plan, PlanInput, plan};
use stackflow_core::template::{StackTemplate, load_path};

use crate::args::{DiffArgs, GlobalArgs};
use stackflow_events::{StreamId, load_state};

use crate::store::{Store, StoreSpec, local_file};
use crate::{aws, render};

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

pub async fn run(global: &GlobalArgs, args: DiffArgs) -> anyhow::Result<ExitCode> {
    let stacks = load_path(&args.path)?;
    let stacks = select_stacks(stacks, &args.stacks, args.path.is_dir())?;
    let given: IndexMap<String, String> = args.parameters.iter().cloned().collect();

    // Parameters from the cloud assembly, then the command line; checked before any call.
    let mut bound = Vec::with_capacity(stacks.len());
    for stack in &stacks {
        let mut values = stack.parameters.clone();
        values.extend(given.clone());
        let parameters = bind_parameters(&stack.template, &values)
            .map_err(|e| e.in_file(stack.file.display()))
            .with_context(|| format!("stack {}", stack.name))?;
        bound.push(parameters);
    }

    let config = aws::load(global).await;
    let region = aws::region(&config)?;
    let account_id = match aws::account_id(&config).await {
        Ok(id) => Some(id),
        Err(why) => {
            if !args.json {
                eprintln!(
                    "note: the AWS account is unknown ({why}); values that use AWS::AccountId show as known after deploy"
                );
            }
            None
        }
    };

    // A diff never creates a store: a local store that does not exist yet holds nothing.
    let store = match &global.store {
        StoreSpec::Local(dir) if !local_file(dir).exists() => None,
        spec => Some(Store::open(spec, &config, global.store_bucket.clone())?),
    };
    let mut plans: Vec<Plan> = Vec::new();
    for (stack, parameters) in stacks.iter().zip(&bound) {
        let pseudo = Pseudo {
            region: region.clone(),
            account_id: account_id.clone(),
            stack_name: stack.name.clone(),
            stack_id: None,
        };
        let state = match &store {
            Some(store) => load_state(store, &StreamId::new(&region, &stack.name))
                .await?
                .to_current_state(),
            // No store yet: nothing was ever deployed from here.
            None => CurrentState::default(),
        };
        let p = plan(&PlanInput {
            stack: &stack.name,
            template: &stack.template,
            parameters,
            pseudo: &pseudo,
            state: &state,
            env: &EmptyEnvironment,
        })
        .map_err(|e| e.in_file(stack.file.display()))?;
        plans.push(p);
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
