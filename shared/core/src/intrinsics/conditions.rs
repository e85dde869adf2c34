//! Conditions: evaluated once per deploy, before the graph and the diff.

use std::cell::RefCell;

use indexmap::IndexMap;
use serde_json::Value;

use super::{BoundParameters, Environment, Mode, Pseudo, Resolver, as_unknown};
use crate::error::{ErrorKind, Path, Result, TemplateError};
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
        done: RefCell::new(IndexMap::new()),
        visiting: RefCell::new(Vec::new()),
    };
    for name in template.conditions.keys() {
        eval.named(name, &Path::from_keys(["Conditions", name]))?;
    }
    let done = eval.done.into_inner();
    // Keep template order.
    Ok(template
        .conditions
        .keys()
        .map(|k| (k.clone(), done[k]))
        .collect())
}

/// Evaluates one condition expression inside resource properties (`Fn::Equals` and its
/// friends used as values), against the resolver's already evaluated conditions.
pub(crate) fn evaluate_expression(resolver: &Resolver<'_>, v: &Value, path: &Path) -> Result<bool> {
    let eval = Evaluator {
        resolver,
        template: resolver.template,
        done: RefCell::new(resolver.conditions.clone()),
        visiting: RefCell::new(Vec::new()),
    };
    eval.expr(v, path)
}

struct Evaluator<'r, 'a> {
    resolver: &'r Resolver<'a>,
    template: &'a Template,
    done: RefCell<IndexMap<String, bool>>,
    visiting: RefCell<Vec<String>>,
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
    fn named(&self, name: &str, path: &Path) -> Result<bool> {
        if let Some(b) = self.done.borrow().get(name) {
            return Ok(*b);
        }
        let expr = self.template.conditions.get(name).ok_or_else(|| {
            TemplateError::new(
                ErrorKind::UnresolvedReference,
                path,
                format!("condition `{name}` is not declared in `Conditions`"),
            )
        })?;
        if self.visiting.borrow().iter().any(|n| n == name) {
            let mut chain = self.visiting.borrow().clone();
            chain.push(name.to_string());
            return Err(TemplateError::new(
                ErrorKind::Cycle,
                path,
                format!(
                    "conditions refer to each other in a circle: {}",
                    chain.join(" -> ")
                ),
            ));
        }
        self.visiting.borrow_mut().push(name.to_string());
        let r = self.expr(expr, &Path::from_keys(["Conditions", name]));
        self.visiting.borrow_mut().pop();
        let b = r?;
        self.done.borrow_mut().insert(name.to_string(), b);
        Ok(b)
    }

    fn operands<'v>(&self, arg: &'v Value, path: &Path, name: &str) -> Result<&'v [Value]> {
        arg.as_array()
            .map(Vec::as_slice)
            .ok_or_else(|| invalid(path, format!("{name} takes a list of conditions")))
    }

    fn expr(&self, v: &Value, path: &Path) -> Result<bool> {
        let (name, arg) = match v {
            Value::Bool(b) => return Ok(*b),
            Value::String(s) if s == "true" => return Ok(true),
            Value::String(s) if s == "false" => return Ok(false),
            Value::Object(m) if m.len() == 1 => m.iter().next().expect("one entry"),
            other => {
                return Err(invalid(
                    path,
                    format!(
                        "a condition must be Fn::Equals, Fn::And, Fn::Or, Fn::Not or Condition, found {}",
                        type_name(other)
                    ),
                ));
            }
        };
        let p = path.key(name);
        match name.as_str() {
            "Condition" => {
                let n = arg
                    .as_str()
                    .ok_or_else(|| invalid(&p, "Condition takes a condition name"))?;
                self.named(n, &p)
            }
            "Fn::Equals" => {
                let a = arg
                    .as_array()
                    .filter(|a| a.len() == 2)
                    .ok_or_else(|| invalid(&p, "Fn::Equals takes a list of two values"))?;
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
            "Fn::And" | "Fn::Or" => {
                let ops = self.operands(arg, &p, name)?;
                if !(2..=10).contains(&ops.len()) {
                    return Err(invalid(
                        &p,
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
                let ops = self.operands(arg, &p, name)?;
                if ops.len() != 1 {
                    return Err(invalid(&p, "Fn::Not takes a list of one condition"));
                }
                Ok(!self.expr(&ops[0], &p.index(0))?)
            }
            other => Err(invalid(
                &p,
                format!(
                    "`{other}` cannot be used as a condition; use Fn::Equals, Fn::And, Fn::Or, Fn::Not or Condition"
                ),
            )),
        }
    }
}
