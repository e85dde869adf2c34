//! `stackflow deploy`, `destroy` and `rollback` with the embedded engine.

use std::process::ExitCode;

use stackflow_core::template::{StackTemplate, check_stacks_placeholders, load_path};
use stackflow_engine::{
    DeployOptions, ExpectedPlan, StackReport, StackStatus, deploy_stack, destroy_stack,
    rollback_stack,
};

use crate::args::{DeployArgs, DestroyArgs, GlobalArgs, RollbackArgs};
use crate::assets::use_cdk_bootstrap_assets;
use crate::render;
use crate::select::{bind_all, dependency_order, select_with};
use crate::setup::{setup, stop_on_ctrl_c};

use super::places::Places;
use crate::waves::{Item, run_by_dependencies};

use super::review::{SavedPlan, approve};

/// The exit code of a set of runs: 1 when one failed or was stopped, else 2 when one
/// left something unaddressed, else 0.
fn exit_code(reports: &[StackReport]) -> ExitCode {
    if reports
        .iter()
        .any(|r| matches!(r.status, StackStatus::Failed | StackStatus::Interrupted))
    {
        ExitCode::from(1)
    } else if reports.iter().any(|r| r.status == StackStatus::Partial) {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    }
}

fn print_reports(reports: &[StackReport], json: bool, operation: &str) -> anyhow::Result<()> {
    if json {
        let out = serde_json::json!({ "operation": operation, "stacks": reports });
        crate::json::print(&out)?;
    } else {
        for r in reports {
            print!("{}", render::report(r, operation));
        }
    }
    Ok(())
}

pub async fn deploy(global: &GlobalArgs, args: DeployArgs) -> anyhow::Result<ExitCode> {
    // A plan saved by `diff --out`: its stacks, from the template it was made from.
    let source = crate::synth::assembly(global, args.path.clone(), &args.synth).await?;
    let saved = SavedPlan::read(&source)?;
    let (path, patterns, exclusively, given) = match &saved {
        Some(saved) => (
            saved.source.clone(),
            saved.names(),
            true,
            saved.parameters(&args.parameters),
        ),
        None => (
            source.clone(),
            args.stacks.clone(),
            args.exclusively,
            args.parameters.clone(),
        ),
    };
    let stacks = load_path(&path)?;
    let stacks = select_with(stacks, &patterns, path.is_dir(), exclusively)?;
    let mut stacks = dependency_order(stacks);
    // Before any AWS call: text no function will substitute.
    check_stacks_placeholders(&stacks)?;
    let bound = bind_all(&stacks, &given)?;
    let setup = setup(global, !args.no_cfn_fallback, global.verbose).await?;
    let places = Places::prepare(
        global,
        setup,
        &mut stacks,
        use_cdk_bootstrap_assets(args.use_cdk_bootstrap_assets, &path),
    )
    .await?;
    places.check_assets()?;
    // Again after the rewrite, before anything is published or made.
    check_stacks_placeholders(&stacks)?;
    let remote = if args.remote.remote {
        if places.elsewhere() {
            anyhow::bail!(
                "--remote runs every stack in the engine's region ({}), and the cloud assembly \
                 pins some to another region or account: deploy those without --remote, or with --region \
                 (and --role-arn)",
                places.home().region
            );
        }
        let mut remote = super::remote::Remote::new(global, &args.remote, places.home()).await?;
        remote.json = args.json;
        Some(remote)
    } else {
        None
    };
    let mut options = DeployOptions::new();
    options.no_rollback = args.no_rollback;
    options.allow_stateful_replacement = args.allow_stateful_replacement;
    if let Some(n) = args.concurrency {
        options = options.pinned(usize::from(n));
    }
    options.stop = stop_on_ctrl_c();

    // One prompt at a time, whatever runs at once.
    let prompts = tokio::sync::Mutex::new(());
    let (places, remote, saved, args, options, prompts) =
        (&places, &remote, &saved, &args, &options, &prompts);
    let items = stacks
        .into_iter()
        .zip(bound)
        .map(|(stack, parameters)| Item {
            name: stack.name.clone(),
            dependencies: stack.dependencies.clone(),
            value: (stack, parameters),
        })
        .collect();
    let run = |(stack, parameters): (StackTemplate, _)| async move {
        // Before the stack's first resource starts (and before a remote run starts).
        let setup = places.setup(&stack);
        setup.check_recorded_account(&stack.name).await?;
        places.assets(&stack).publish(&stack.name).await?;
        let mut input = setup.input(stack, parameters);
        let mut options = options.clone();
        options.expected_plan = {
            let _prompt = prompts.lock().await;
            match saved {
                Some(saved) => Some(saved.pin(setup, &mut input).await?),
                None => approve(setup, &mut input, args.require_approval, global.yes)
                    .await?
                    .map(ExpectedPlan::of),
            }
        };
        if let Some(remote) = remote {
            let follow = !args.remote.no_follow;
            let code = remote
                .deploy(&setup.engine.store, &input, &options, follow)
                .await?;
            return Ok(Ended::Remote(code));
        }
        let report = deploy_stack(setup.engine.clone(), input, options).await?;
        Ok::<_, anyhow::Error>(Ended::Local(Box::new(report)))
    };
    let concurrency = usize::from(args.stack_concurrency);
    let ended = run_by_dependencies(items, concurrency, run, |r| {
        r.as_ref().is_ok_and(Ended::goes_on)
    })
    .await;

    let mut reports = Vec::new();
    let mut deployed = Vec::new();
    let mut failed_remote = None;
    for (name, result) in ended {
        match result? {
            Ended::Remote(code) if code == ExitCode::SUCCESS => deployed.push(name),
            Ended::Remote(code) => failed_remote = failed_remote.or(Some(code)),
            Ended::Local(report) => {
                if matches!(
                    report.status,
                    StackStatus::Succeeded | StackStatus::NoChanges
                ) {
                    deployed.push(report.stack.clone());
                }
                reports.push(*report);
            }
        }
    }
    write_outputs(args, places, &deployed).await?;
    if let Some(code) = failed_remote {
        return Ok(code);
    }
    // A remote run printed each stack's result as it ended.
    if remote.is_none() {
        print_reports(&reports, args.json, "deploy")?;
    }
    Ok(exit_code(&reports))
}

/// How one stack's run ended.
enum Ended {
    /// Run here: its report.
    Local(Box<StackReport>),
    /// Run by the installed engine: the exit code of following it.
    Remote(ExitCode),
}

impl Ended {
    /// Whether the stacks that depend on it may start (a partial run leaves nothing its
    /// dependents need undone).
    fn goes_on(&self) -> bool {
        match self {
            Ended::Local(r) => matches!(
                r.status,
                StackStatus::Succeeded | StackStatus::NoChanges | StackStatus::Partial
            ),
            Ended::Remote(code) => *code == ExitCode::SUCCESS,
        }
    }
}

/// `--outputs-file`: the outputs each deployed stack's records hold now (a remote run's
/// too), as `{"Stack": {"Key": value}}`.
async fn write_outputs(
    args: &DeployArgs,
    places: &Places,
    deployed: &[String],
) -> anyhow::Result<()> {
    let Some(file) = &args.outputs_file else {
        return Ok(());
    };
    let mut all = serde_json::Map::new();
    for stack in deployed {
        let setup = places.setup_named(stack);
        let stream = setup.engine.stream(stack);
        let state = stackflow_events::load_state(setup.engine.store.as_ref(), &stream).await?;
        let outputs: serde_json::Map<String, serde_json::Value> =
            state.outputs.into_iter().collect();
        all.insert(stack.clone(), serde_json::Value::Object(outputs));
    }
    let text = serde_json::to_string_pretty(&serde_json::Value::Object(all))? + "\n";
    std::fs::write(file, text)
        .map_err(|e| anyhow::anyhow!("writing the outputs to {}: {e}", file.display()))?;
    eprintln!("outputs written to {}", file.display());
    Ok(())
}

pub async fn destroy(global: &GlobalArgs, args: DestroyArgs) -> anyhow::Result<ExitCode> {
    let setup = setup(global, true, global.verbose).await?;
    let stream = setup.engine.stream(&args.stack);
    let state = stackflow_events::load_state(setup.engine.store.as_ref(), &stream).await?;
    setup.check_account_of(&args.stack, &state)?;
    // A stack with nothing recorded has nothing to delete: the destroy says so.
    if !state.resources.is_empty() {
        crate::confirm::confirm(
            global.yes || args.force,
            &format!(
                "Destroy stack {}: delete the {} resource(s) it made (those with a Retain \
                 policy stay)?",
                args.stack,
                state.resources.len()
            ),
            "pass --force (or --yes) to destroy it",
        )
        .await?;
    }
    if args.remote.remote {
        let mut remote = super::remote::Remote::new(global, &args.remote, &setup).await?;
        remote.json = args.json;
        return remote
            .run_stack(
                &setup.engine.store,
                "destroy",
                &args.stack,
                !args.remote.no_follow,
            )
            .await;
    }
    let mut options = DeployOptions::new();
    if let Some(n) = args.concurrency {
        options = options.pinned(usize::from(n));
    }
    options.stop = stop_on_ctrl_c();
    let report = destroy_stack(setup.engine.clone(), &args.stack, options).await?;
    let reports = vec![report];
    print_reports(&reports, args.json, "destroy")?;
    Ok(exit_code(&reports))
}

pub async fn rollback(global: &GlobalArgs, args: RollbackArgs) -> anyhow::Result<ExitCode> {
    let setup = setup(global, true, global.verbose).await?;
    setup.check_recorded_account(&args.stack).await?;
    if args.remote.remote {
        let mut remote = super::remote::Remote::new(global, &args.remote, &setup).await?;
        remote.json = args.json;
        return remote
            .run_stack(
                &setup.engine.store,
                "rollback",
                &args.stack,
                !args.remote.no_follow,
            )
            .await;
    }
    let report = rollback_stack(setup.engine.clone(), &args.stack).await?;
    let reports = vec![report];
    print_reports(&reports, args.json, "rollback")?;
    Ok(exit_code(&reports))
}
