//! Conditions: evaluated once per deploy, before the graph and the diff.
//!
//! A condition may use others (`Condition`, inside `Fn::And`, `Fn::Or` and `Fn::Not`).
//! They are evaluated in an order where each comes after the ones it uses, found without
//! recursion, so a long chain of conditions needs no deep stack and a circle is reported
//! as such.

use std::cell::RefCell;
use std::collections::HashMap;

use indexmap::IndexMap;
use serde_json::Value;

use super::{BoundParameters, Environment, Mode, Pseudo, Resolver, as_unknown, too_deep};
use crate::error::{ErrorKind, Path, Result, TemplateError};
use crate::limits::MAX_DEPTH;
use crate::template::{Template, type_name};

/// Evaluates every condition of the template. Conditions may use parameters, pseudo
/// parameters, mappings and other conditions; a circle of conditions is an error.
pub fn evaluate_conditions(
    template: &Template,
    parameters: &BoundParameters,
    pseudo: &Pseudo,
    env: &dyn Environment,
) -> Result<IndexMap<String, bool>> {
    let empty = IndexMap::new();
    let resolver = Resolver::new(template, parameters, pseudo, &empty, env, Mode::Plan);
    let eval = Evaluator {
        resolver: &resolver,
        template,
        known: &empty,
        done: RefCell::new(IndexMap::new()),
    };
    for name in evaluation_order(template)? {
        let b = eval.expr(
            &template.conditions[name],
            &Path::from_keys(["Conditions", name]),
        )?;
        eval.done.borrow_mut().insert(name.to_string(), b);
    }
    let done = eval.done.into_inner();
    // Keep template order.
    Ok(template
        .conditions
        .keys()
        .map(|k| (k.clone(), done[k]))
        .collect())
}

/// Evaluates the condition function `name` (`Fn::Equals`, `Fn::And`, `Fn::Or`, `Fn::Not`)
/// with its argument `arg`, used as a value inside resource properties, against the
/// resolver's already evaluated conditions. `path` is the function's (it ends with
/// `name`).
pub(crate) fn evaluate_function(
    resolver: &Resolver<'_>,
    name: &str,
    arg: &Value,
    path: &Path,
) -> Result<bool> {
    let eval = Evaluator {
        resolver,
        template: resolver.template,
        known: resolver.conditions,
        done: RefCell::new(IndexMap::new()),
    };
    eval.function(name, arg, path)
}

/// The conditions that `expr` (at `path`) uses directly, each with the path of its
/// `Condition`: at the top and inside `Fn::And`, `Fn::Or` and `Fn::Not`.
fn references(expr: &Value, path: Path) -> Vec<(&str, Path)> {
    let mut out = Vec::new();
    let mut pending = vec![(expr, path)];
    while let Some((v, p)) = pending.pop() {
        let Some((k, arg)) = v
            .as_object()
            .filter(|m| m.len() == 1)
            .and_then(|m| m.iter().next())
        else {
            continue;
        };
        match (k.as_str(), arg) {
            ("Condition", Value::String(name)) => out.push((name.as_str(), p.key(k))),
            ("Fn::And" | "Fn::Or" | "Fn::Not", Value::Array(items)) if p.len() <= MAX_DEPTH => {
                let p = p.key(k);
                pending.extend(items.iter().enumerate().rev().map(|(i, v)| (v, p.index(i))));
            }
            _ => {}
        }
    }
    out
}

/// The template's conditions in an order where each comes after the conditions it uses
/// (template order otherwise); a circle is an error that names it. A use of a condition
/// that is not declared is left for the evaluation to report.
fn evaluation_order(template: &Template) -> Result<Vec<&str>> {
    /// A condition being visited: its name, what it uses, and how many of those are done.
    struct Frame<'t> {
        name: &'t str,
        uses: Vec<(&'t str, Path)>,
        next: usize,
    }
    let declared = &template.conditions;
    let mut visiting: HashMap<&str, bool> = HashMap::new(); // true while on the stack
    let mut order = Vec::with_capacity(declared.len());
    for root in declared.keys() {
        if visiting.contains_key(root.as_str()) {
            continue;
        }
        let mut stack = vec![Frame {
            name: root,
            uses: references(&declared[root], Path::from_keys(["Conditions", root])),
            next: 0,
        }];
        visiting.insert(root, true);
        while let Some(top) = stack.last_mut() {
            let Some((used, at)) = top.uses.get(top.next).cloned() else {
                visiting.insert(top.name, false);
                order.push(top.name);
                stack.pop();
                continue;
            };
            top.next += 1;
            let Some((name, expr)) = declared.get_key_value(used) else {
                continue;
            };
            match visiting.get(name.as_str()) {
                Some(false) => {}
                Some(true) => {
                    let from = stack.iter().position(|f| f.name == name).unwrap_or(0);
                    let mut chain: Vec<&str> = stack[from..].iter().map(|f| f.name).collect();
                    chain.push(name);
                    return Err(TemplateError::new(
                        ErrorKind::Cycle,
                        at,
                        format!(
                            "conditions refer to each other in a circle: {}",
                            chain.join(" -> ")
                        ),
                    ));
                }
                None => {
                    visiting.insert(name, true);
                    stack.push(Frame {
                        name,
                        uses: references(expr, Path::from_keys(["Conditions", name])),
                        next: 0,
                    });
                }
            }
        }
    }
    Ok(order)
}

struct Evaluator<'r, 'a> {
    resolver: &'r Resolver<'a>,
    template: &'a Template,
    /// Conditions evaluated before (all of them, inside resource properties).
    known: &'r IndexMap<String, bool>,
    /// Conditions evaluated by this evaluator.
    done: RefCell<IndexMap<String, bool>>,
}

fn invalid(path: &Path, message: impl Into<String>) -> TemplateError {
    TemplateError::new(ErrorKind::InvalidFunction, path, message)
}

/// The text CloudFormation compares in `Fn::Equals`.
fn comparable(v: &Value) -> Value {
    match v {
        Value::Number(n) => Value::String(n.to_string()),
        Value::Bool(b) => Value::String(b.to_string()),
        Value::Array(items) => Value::Array(items.iter().map(comparable).collect()),
        other => other.clone(),
    }
}

impl Evaluator<'_, '_> {
    /// The value of the condition `name`, used at `path`: evaluated already, since
    /// conditions are evaluated after the ones they use.
    fn named(&self, name: &str, path: &Path) -> Result<bool> {
        if let Some(b) = self.known.get(name).or(self.done.borrow().get(name)) {
            return Ok(*b);
        }
        if !self.template.conditions.contains_key(name) {
            return Err(TemplateError::new(
                ErrorKind::UnresolvedReference,
                path,
                format!("condition `{name}` is not declared in `Conditions`"),
            ));
        }
        // Only a condition function nested in a value (an `Fn::Equals` operand) inside
        // `Conditions` gets here: the order of evaluation does not see it.
        Err(invalid(
            path,
            format!(
                "condition `{name}` cannot be used inside a value; use it through Condition, Fn::And, Fn::Or or Fn::Not"
            ),
        ))
    }

    fn operands<'v>(&self, arg: &'v Value, path: &Path, name: &str) -> Result<&'v [Value]> {
        arg.as_array()
            .map(Vec::as_slice)
            .ok_or_else(|| invalid(path, format!("{name} takes a list of conditions")))
    }

    fn expr(&self, v: &Value, path: &Path) -> Result<bool> {
        if path.len() > MAX_DEPTH {
            return Err(too_deep(path));
        }
        match v {
            Value::Bool(b) => Ok(*b),
            Value::String(s) if s == "true" => Ok(true),
            Value::String(s) if s == "false" => Ok(false),
            Value::Object(m) if m.len() == 1 => {
                let (name, arg) = m.iter().next().expect("one entry");
                self.function(name, arg, &path.key(name))
            }
            other => Err(invalid(
                path,
                format!(
                    "a condition must be Fn::Equals, Fn::And, Fn::Or, Fn::Not or Condition, found {}",
                    type_name(other)
                ),
            )),
        }
    }

    /// The condition function `name` with its argument `arg`; `p` is its path.
    fn function(&self, name: &str, arg: &Value, p: &Path) -> Result<bool> {
        match name {
            "Condition" => {
                let n = arg
                    .as_str()
                    .ok_or_else(|| invalid(p, "Condition takes a condition name"))?;
                self.named(n, p)
            }
            "Fn::Equals" => self.equals(arg, p),
            "Fn::And" | "Fn::Or" => {
                let ops = self.operands(arg, p, name)?;
                if !(2..=10).contains(&ops.len()) {
                    return Err(invalid(
                        p,
                        format!(
                            "{name} takes between 2 and 10 conditions, found {}",
                            ops.len()
                        ),
                    ));
                }
                let mut results = Vec::with_capacity(ops.len());
                for (i, op) in ops.iter().enumerate() {
                    results.push(self.expr(op, &p.index(i))?);
                }
                Ok(if name == "Fn::And" {
                    results.iter().all(|b| *b)
                } else {
                    results.iter().any(|b| *b)
                })
            }
            "Fn::Not" => {
                let ops = self.operands(arg, p, name)?;
                if ops.len() != 1 {
                    return Err(invalid(p, "Fn::Not takes a list of one condition"));
                }
                Ok(!self.expr(&ops[0], &p.index(0))?)
            }
            other => Err(invalid(
                p,
                format!(
                    "`{other}` cannot be used as a condition; use Fn::Equals, Fn::And, Fn::Or, Fn::Not or Condition"
                ),
            )),
        }
    }

    fn equals(&self, arg: &Value, p: &Path) -> Result<bool> {
        let a = arg
            .as_array()
            .filter(|a| a.len() == 2)
            .ok_or_else(|| invalid(p, "Fn::Equals takes a list of two values"))?;
        let l = self.resolver.value(&a[0], &p.index(0))?;
        let r = self.resolver.value(&a[1], &p.index(1))?;
        for (side, i) in [(&l, 0), (&r, 1)] {
            if let Some(what) = as_unknown(side) {
                return Err(TemplateError::new(
                    ErrorKind::NotAvailable,
                    p.index(i),
                    format!(
                        "the condition depends on {what}, which is not known before the deploy"
                    ),
                ));
            }
        }
        Ok(comparable(&l) == comparable(&r))
    }
}
