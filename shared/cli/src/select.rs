//! Which stacks a command works on, in which order, and with which parameter values.

use std::collections::BTreeSet;

use anyhow::{Context, bail};
use indexmap::IndexMap;
use stackflow_core::intrinsics::{BoundParameters, bind_parameters};
use stackflow_core::template::StackTemplate;

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

/// Orders stacks so that each comes after the stacks it depends on (cdk.out order
/// otherwise).
pub fn dependency_order(stacks: Vec<StackTemplate>) -> Vec<StackTemplate> {
    let names: BTreeSet<String> = stacks.iter().map(|s| s.name.clone()).collect();
    let mut left = stacks;
    let mut done: BTreeSet<String> = BTreeSet::new();
    let mut out = Vec::with_capacity(left.len());
    while !left.is_empty() {
        let pos = left
            .iter()
            .position(|s| {
                s.dependencies
                    .iter()
                    .all(|d| done.contains(d) || !names.contains(d))
            })
            .unwrap_or(0);
        let s = left.remove(pos);
        done.insert(s.name.clone());
        out.push(s);
    }
    out
}
