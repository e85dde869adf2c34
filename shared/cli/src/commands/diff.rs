//! `stackflow diff`: what the next deploy would do.

use std::process::ExitCode;

use stackflow_core::plan::Plan;
use stackflow_core::template::{check_stacks_placeholders, load_path};

use super::places::Places;
use crate::args::{DiffArgs, GlobalArgs};
use crate::assets::use_cdk_bootstrap_assets;
use crate::render;
use crate::select::{bind_all, select_with};
use crate::store::{Store, StoreSpec, local_file};

use super::review::{SavedPlan, saved_stack};

pub async fn run(global: &GlobalArgs, args: DiffArgs) -> anyhow::Result<ExitCode> {
    let path = crate::synth::assembly(global, args.path.clone(), &args.synth).await?;
    let stacks = load_path(&path)?;
    let mut stacks = select_with(stacks, &args.stacks, path.is_dir(), args.exclusively)?;
    check_stacks_placeholders(&stacks)?;
    let bound = bind_all(&stacks, &args.parameters)?;

    // A diff never creates a store: a local store that does not exist yet holds nothing.
    // A plan saved for a deploy is made with the store the deploy uses (its digest key
    // masks NoEcho values as the deploy will).
    let store = match &global.store {
        StoreSpec::Local(dir) if !local_file(dir).exists() && args.out.is_none() => Some(
            Store::Local(stackflow_events::sqlite::SqliteStore::open_in_memory()?),
        ),
        _ => None,
    };
    let setup = crate::setup::setup_with(
        global,
        !args.no_cfn_fallback,
        global.verbose,
        store,
        (!args.json).then_some("values that use AWS::AccountId show as known after deploy"),
        false,
    )
    .await?;
    // Each stack is planned where a deploy puts it (its region, its account through its
    // role), with its assets where they would be published: in a region that keeps them
    // in stackflow's bucket, the references point there (and show as changes until a
    // deploy repoints the resources). Without the account (offline) neither can be
    // named: a stack pinned elsewhere is refused, and the references show as the
    // template has them, as the note above says.
    let places = if setup.account_id.is_some() {
        let cdk_assets = use_cdk_bootstrap_assets(args.use_cdk_bootstrap_assets, &path);
        Some(Places::prepare(global, setup.clone(), &mut stacks, cdk_assets).await?)
    } else {
        setup.check_environments(&stacks)?;
        None
    };
    let mut plans: Vec<Plan> = Vec::new();
    // What would stop each stack's deploy before it changes anything.
    let mut problems: Vec<(String, Vec<String>)> = Vec::new();
    let mut saved = Vec::new();
    for (stack, parameters) in stacks.iter().zip(bound) {
        let setup = places.as_ref().map_or(&setup, |p| p.setup(stack));
        let mut input = setup.input(stack.clone(), parameters);
        if args.out.is_some() {
            // A new stack's id is made now, so that the saved plan is what the deploy
            // that applies it plans.
            setup.engine.settle_stack_id(&mut input).await?;
        }
        let (plan, found) = setup
            .engine
            .preview(&input, args.allow_stateful_replacement)
            .await?;
        if args.out.is_some() {
            saved.push(saved_stack(
                stack,
                stacks.len(),
                &args.parameters,
                &input,
                &plan,
            ));
        }
        problems.push((input.name.clone(), found));
        plans.push(plan);
    }
    if let Some(out) = &args.out {
        SavedPlan::new(&path, &setup.region, saved)?.write(out)?;
        eprintln!(
            "plan saved to {}: `stackflow deploy {}` applies exactly this plan",
            out.display(),
            out.display()
        );
    }

    if args.json {
        let problems: serde_json::Map<String, serde_json::Value> = problems
            .iter()
            .filter(|(_, found)| !found.is_empty())
            .map(|(stack, found)| (stack.clone(), serde_json::json!(found)))
            .collect();
        let out = serde_json::json!({ "stacks": plans, "problems": problems });
        crate::json::print(&out)?;
    } else {
        for ((stack, p), (name, found)) in stacks.iter().zip(&plans).zip(&problems) {
            print!(
                "{}",
                render::plan(p, &stack.file.display().to_string(), global.verbose)
            );
            if !found.is_empty() {
                println!("\nA deploy of {name} would stop before changing anything:");
                for f in found {
                    println!("  - {f}");
                }
            }
        }
    }
    let changes = plans.iter().any(|p| !p.is_empty());
    let blocked = problems.iter().any(|(_, found)| !found.is_empty());
    Ok(if args.fail && (changes || blocked) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
