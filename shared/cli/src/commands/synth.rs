//! `stackflow synth` and `stackflow list`: the stacks of a CDK app.

use std::path::Path;
use std::process::ExitCode;

use serde_json::{Value, json};
use stackflow_core::template::{StackTemplate, load_path};

use crate::args::{GlobalArgs, ListArgs, SynthCommandArgs};
use crate::select::dependency_order;

pub async fn synth(global: &GlobalArgs, args: SynthCommandArgs) -> anyhow::Result<ExitCode> {
    let dir = crate::synth::assembly(global, None, &args.synth).await?;
    print_stacks(&dir, true, args.json)
}

pub async fn list(global: &GlobalArgs, args: ListArgs) -> anyhow::Result<ExitCode> {
    let path = crate::synth::assembly(global, args.path, &args.synth).await?;
    print_stacks(&path, args.long, args.json)
}

/// Prints the stacks of `path` in deployment order: names, or with `long` their display
/// paths, dependencies and template files.
fn print_stacks(path: &Path, long: bool, json: bool) -> anyhow::Result<ExitCode> {
    let stacks = dependency_order(load_path(path)?);
    if json {
        let listed: Vec<Value> = stacks.iter().map(|s| stack_json(s, long)).collect();
        let out = if long {
            json!({"assembly": path.display().to_string(), "stacks": listed})
        } else {
            json!({"stacks": listed})
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    if long {
        println!("{}", path.display());
    }
    for stack in &stacks {
        if !long {
            println!("{}", stack.name);
            continue;
        }
        match &stack.display_name {
            Some(display) if display != &stack.name => {
                println!("{} ({display})", stack.name)
            }
            _ => println!("{}", stack.name),
        }
        if stack.environment != Default::default() {
            println!("  environment: {}", stack.environment);
        }
        println!("  template: {}", stack.file.display());
        println!("  resources: {}", stack.template.resources.len());
        if !stack.dependencies.is_empty() {
            println!("  depends on: {}", stack.dependencies.join(", "));
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn stack_json(stack: &StackTemplate, long: bool) -> Value {
    if !long {
        return json!(stack.name);
    }
    json!({
        "name": stack.name,
        "displayName": stack.display_name,
        "template": stack.file.display().to_string(),
        "resources": stack.template.resources.len(),
        "dependencies": stack.dependencies,
        "environment": {
            "account": stack.environment.account,
            "region": stack.environment.region,
        },
    })
}
