//! Which stacks a command works on, in which order, and with which parameter values.
//!
//! A `--stack` pattern matches a stack's name or its display path (`Stage/Api`, the
//! construct path a cloud assembly gives it): `*` matches within one path segment, `**`
//! across them, `?` one character. A deploy or diff takes the stacks the chosen ones
//! depend on too, unless `--exclusively`. `--parameter KEY=VALUE` goes to each chosen
//! stack that declares `KEY`; `--parameter STACK:KEY=VALUE` to that stack only.

use std::collections::BTreeSet;

use anyhow::{Context, bail};
use stackflow_core::intrinsics::{BoundParameters, bind_parameters};
use stackflow_core::template::StackTemplate;

/// Picks the stacks to work on: every stack of a cdk.out, or the ones `--stack` patterns
/// match; for a single template, `--stack` renames it.
pub fn select_stacks(
    stacks: Vec<StackTemplate>,
    names: &[String],
    is_dir: bool,
) -> anyhow::Result<Vec<StackTemplate>> {
    select_with(stacks, names, is_dir, true)
}

/// [`select_stacks`]; unless `exclusively`, with every stack the chosen ones depend on
/// (at any depth).
pub fn select_with(
    mut stacks: Vec<StackTemplate>,
    names: &[String],
    is_dir: bool,
    exclusively: bool,
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
    let mut chosen: BTreeSet<String> = BTreeSet::new();
    for pattern in names {
        let matched: Vec<&StackTemplate> = stacks
            .iter()
            .filter(|s| matches_stack(pattern, s))
            .collect();
        if matched.is_empty() {
            bail!(
                "the cloud assembly has no stack matching `{pattern}`; it has {}",
                known(&stacks)
            );
        }
        chosen.extend(matched.iter().map(|s| s.name.clone()));
    }
    if !exclusively {
        let mut queue: Vec<String> = chosen.iter().cloned().collect();
        while let Some(name) = queue.pop() {
            let deps = stacks
                .iter()
                .find(|s| s.name == name)
                .map(|s| s.dependencies.clone())
                .unwrap_or_default();
            for d in deps {
                if stacks.iter().any(|s| s.name == d) && chosen.insert(d.clone()) {
                    queue.push(d);
                }
            }
        }
    }
    stacks.retain(|s| chosen.contains(&s.name));
    Ok(stacks)
}

/// The stacks' names, with their display paths where they differ.
fn known(stacks: &[StackTemplate]) -> String {
    stacks
        .iter()
        .map(|s| match &s.display_name {
            Some(d) if *d != s.name => format!("{} ({d})", s.name),
            _ => s.name.clone(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn matches_stack(pattern: &str, stack: &StackTemplate) -> bool {
    glob(pattern, &stack.name)
        || stack
            .display_name
            .as_deref()
            .is_some_and(|d| glob(pattern, d))
}

/// `*` within a `/`-separated segment, `**` across segments, `?` one character (not `/`).
fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    glob_at(&p, &t)
}

fn glob_at(p: &[char], t: &[char]) -> bool {
    match p {
        [] => t.is_empty(),
        ['*', '*', rest @ ..] => (0..=t.len()).any(|i| glob_at(rest, &t[i..])),
        ['*', rest @ ..] => {
            let segment = t.iter().position(|c| *c == '/').unwrap_or(t.len());
            (0..=segment).any(|i| glob_at(rest, &t[i..]))
        }
        ['?', rest @ ..] => t.first().is_some_and(|c| *c != '/') && glob_at(rest, &t[1..]),
        [c, rest @ ..] => t.first() == Some(c) && glob_at(rest, &t[1..]),
    }
}

/// One `--parameter`: `KEY=VALUE`, or `STACK:KEY=VALUE` for one stack.
fn split_key(key: &str) -> (Option<&str>, &str) {
    match key.rsplit_once(':') {
        Some((stack, k)) if !stack.is_empty() && !k.is_empty() => (Some(stack), k),
        _ => (None, key),
    }
}

/// The parameter a command-line `[STACK:]KEY` gives `stack` (one of `of` stacks), if
/// it gives it one.
pub fn given_to<'k>(of: usize, stack: &StackTemplate, key: &'k str) -> Option<&'k str> {
    let (only, k) = split_key(key);
    let ours = match only {
        Some(s) => matches_stack(s, stack),
        // One stack: its parameters are checked by binding.
        None => of == 1 || stack.template.parameters.contains_key(k),
    };
    ours.then_some(k)
}

/// Binds every stack's parameters (the cloud assembly's, then the command line's), all
/// checked before any AWS call. A `KEY=VALUE` goes to each stack that declares `KEY`; a
/// `STACK:KEY=VALUE` to that stack (by name or display path). A value no stack takes is
/// an error.
pub fn bind_all(
    stacks: &[StackTemplate],
    given: &[(String, String)],
) -> anyhow::Result<Vec<BoundParameters>> {
    let mut taken = vec![false; given.len()];
    let bound = stacks
        .iter()
        .map(|stack| {
            let mut values = stack.parameters.clone();
            for (i, (key, value)) in given.iter().enumerate() {
                if let Some(k) = given_to(stacks.len(), stack, key) {
                    values.insert(k.to_string(), value.clone());
                    taken[i] = true;
                }
            }
            bind_parameters(&stack.template, &values)
                .map_err(|e| e.in_file(stack.file.display()))
                .with_context(|| format!("stack {}", stack.name))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let unused: Vec<&str> = given
        .iter()
        .zip(&taken)
        .filter(|(_, t)| !**t)
        .map(|((k, _), _)| k.as_str())
        .collect();
    if !unused.is_empty() {
        bail!(
            "--parameter {}: no stack chosen declares it (stacks: {}); give STACK:KEY=VALUE \
             for one stack",
            unused.join(", "),
            known(stacks)
        );
    }
    Ok(bound)
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

#[cfg(test)]
mod tests {
    use super::*;
    use indexmap::IndexMap;
    use serde_json::json;
    use stackflow_core::template::Template;

    fn stack(name: &str, display: &str, deps: &[&str], params: &[&str]) -> StackTemplate {
        let parameters: serde_json::Map<String, serde_json::Value> = params
            .iter()
            .map(|p| (p.to_string(), json!({ "Type": "String", "Default": "d" })))
            .collect();
        let v = json!({ "Parameters": parameters, "Resources": {
            "T": { "Type": "AWS::SNS::Topic" } } });
        StackTemplate {
            name: name.into(),
            display_name: Some(display.into()),
            file: format!("{name}.template.json").into(),
            template: Template::from_value(&v).unwrap(),
            dependencies: deps.iter().map(|d| d.to_string()).collect(),
            parameters: IndexMap::new(),
            nested: IndexMap::new(),
            assets: None,
            environment: Default::default(),
        }
    }

    fn app() -> Vec<StackTemplate> {
        vec![
            stack("Network", "Network", &[], &["Cidr"]),
            stack("ProdApi", "Prod/Api", &["Network"], &["Env"]),
            stack("ProdWeb", "Prod/Web", &["ProdApi"], &["Env"]),
            stack("DevApi", "Dev/Api", &["Network"], &["Env"]),
        ]
    }

    fn names(stacks: &[StackTemplate]) -> Vec<&str> {
        stacks.iter().map(|s| s.name.as_str()).collect()
    }

    fn pick(patterns: &[&str], exclusively: bool) -> anyhow::Result<Vec<StackTemplate>> {
        let p: Vec<String> = patterns.iter().map(|s| s.to_string()).collect();
        select_with(app(), &p, true, exclusively)
    }

    #[test]
    fn patterns_match_names_and_display_paths_with_their_dependencies() {
        assert_eq!(
            names(&pick(&["Prod/*"], true).unwrap()),
            ["ProdApi", "ProdWeb"]
        );
        assert_eq!(
            names(&pick(&["Prod/Web"], false).unwrap()),
            ["Network", "ProdApi", "ProdWeb"]
        );
        assert_eq!(
            names(&pick(&["*Api"], true).unwrap()),
            ["ProdApi", "DevApi"]
        );
        assert_eq!(names(&pick(&["**"], true).unwrap()).len(), 4);
        assert_eq!(names(&pick(&["Dev?pi"], true).unwrap()), ["DevApi"]);
        // `*` stays within a segment.
        assert!(
            pick(&["P*i"], true)
                .unwrap()
                .iter()
                .all(|s| s.name != "ProdWeb")
        );
        let e = pick(&["Stage/*"], true).unwrap_err().to_string();
        assert!(
            e.contains("Stage/*") && e.contains("ProdApi (Prod/Api)"),
            "{e}"
        );
    }

    #[test]
    fn a_parameter_goes_to_the_stacks_that_declare_it_or_to_the_one_named() {
        let stacks = app();
        let given = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let bound = bind_all(&stacks, &given(&[("Cidr", "10.0.0.0/16"), ("Env", "x")]));
        assert!(bound.is_ok(), "{bound:?}");
        let bound = bind_all(&stacks, &given(&[("Prod/Api:Env", "prod")])).unwrap();
        assert_eq!(bound[1].get("Env"), Some(&json!("prod")));
        assert_eq!(
            bound[3].get("Env"),
            Some(&json!("d")),
            "DevApi keeps its Default"
        );
        let e = bind_all(&stacks, &given(&[("Nope", "x")])).unwrap_err();
        assert!(e.to_string().contains("no stack chosen declares it"), "{e}");
        let e = bind_all(&stacks, &given(&[("Network:Env", "x")])).unwrap_err();
        assert!(format!("{e:#}").contains("Env"), "{e:#}");
    }
}
