//! The functions that compute strings and lists: `Fn::Join`, `Fn::Sub`, `Fn::Base64`,
//! `Fn::Select` and `Fn::Split`. A computed string is at most
//! [`MAX_STRING_BYTES`] long.

use std::collections::HashMap;

use base64::Engine as _;
use serde_json::{Map, Value};

use super::{Resolver, SubPart, as_unknown, invalid, parse_sub};
use crate::error::{ErrorKind, Path, Result, TemplateError};
use crate::limits::{MAX_STRING_BYTES, abbreviate, show_bytes};
use crate::template::type_name;

/// The error for a string that `function` would make longer than [`MAX_STRING_BYTES`].
fn too_long(path: &Path, function: &str) -> TemplateError {
    TemplateError::new(
        ErrorKind::Limit,
        path,
        format!(
            "{function} would make a string longer than {}, the most a computed string may hold",
            show_bytes(MAX_STRING_BYTES)
        ),
    )
}

/// A scalar as the text a string function uses; `None` for lists and objects.
fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

impl Resolver<'_> {
    /// Resolves a value that must be a list. An unknown marker comes back as `Err(marker)`
    /// in the inner result.
    pub(super) fn list(
        &self,
        v: &Value,
        path: &Path,
        what: &str,
    ) -> Result<Result<Vec<Value>, Value>> {
        let r = self.value(v, path)?;
        // Not known yet, or a secret recorded masked (a value taken apart from a secret
        // is masked whole): passed on as it is.
        if as_unknown(&r).is_some() || r.as_str().is_some_and(crate::mask::is_mask) {
            return Ok(Err(r));
        }
        match r {
            Value::Array(items) => Ok(Ok(items)),
            other => Err(invalid(
                path,
                format!("{what} must be a list, found {}", type_name(&other)),
            )),
        }
    }

    pub(super) fn join(&self, arg: &Value, path: &Path) -> Result<Option<Value>> {
        let a = self.args(arg, path, "Fn::Join", &[2])?;
        let delim = match &a[0] {
            Value::String(s) => s.clone(),
            other => {
                return Err(invalid(
                    &path.index(0),
                    format!("the delimiter must be a string, found {}", type_name(other)),
                ));
            }
        };
        let items = match self.list(&a[1], &path.index(1), "Fn::Join's second argument")? {
            Ok(items) => items,
            Err(u) => return Ok(Some(u)),
        };
        let mut parts = Vec::with_capacity(items.len());
        let mut first_unknown = None;
        let mut len = 0usize;
        for (i, item) in items.iter().enumerate() {
            // An element not known yet makes the result unknown; the others are still
            // checked, so that the plan reports what the deploy would.
            if as_unknown(item).is_some() {
                first_unknown.get_or_insert(item);
                continue;
            }
            let part = scalar_text(item).ok_or_else(|| {
                invalid(
                    &path.index(1).index(i),
                    format!("Fn::Join can only join strings, found {}", type_name(item)),
                )
            })?;
            len =
                len.saturating_add(part.len())
                    .saturating_add(if i > 0 { delim.len() } else { 0 });
            if len > MAX_STRING_BYTES {
                return Err(too_long(path, "Fn::Join"));
            }
            parts.push(part);
        }
        if let Some(u) = first_unknown {
            return Ok(Some(u.clone()));
        }
        Ok(Some(Value::String(parts.join(&delim))))
    }

    pub(super) fn sub(&self, arg: &Value, path: &Path) -> Result<Option<Value>> {
        let (text, vars) = match arg {
            Value::String(s) => (s.as_str(), None),
            Value::Array(items) if items.len() == 2 => {
                let text = items[0].as_str().ok_or_else(|| {
                    invalid(&path.index(0), "Fn::Sub's first argument must be a string")
                })?;
                let vars = items[1].as_object().ok_or_else(|| {
                    invalid(&path.index(1), "Fn::Sub's variable map must be an object")
                })?;
                (text, Some(vars))
            }
            _ => {
                return Err(invalid(
                    path,
                    "Fn::Sub takes a string or [string, {variables}]",
                ));
            }
        };
        let parts = parse_sub(text).map_err(|e| invalid(path, e.to_string()))?;
        // Each variable is resolved once, however often the string names it; all of them
        // are, even after one that is not known yet.
        let mut values: HashMap<&str, Result<String, Value>> = HashMap::new();
        for part in &parts {
            if let SubPart::Var(name) = part
                && !values.contains_key(name.as_str())
            {
                values.insert(name, self.sub_var(name, vars, path)?);
            }
        }
        let mut out = String::new();
        for part in &parts {
            match part {
                SubPart::Literal(s) => out.push_str(s),
                SubPart::Var(name) => match &values[name.as_str()] {
                    Ok(s) => out.push_str(s),
                    Err(unknown) => return Ok(Some(unknown.clone())),
                },
            }
            if out.len() > MAX_STRING_BYTES {
                return Err(too_long(path, "Fn::Sub"));
            }
        }
        Ok(Some(Value::String(out)))
    }

    /// The text of the `Fn::Sub` variable `name`: from the variable map `vars`, a
    /// resource attribute (`Res.Attr`), or what `Ref` gives. An unknown marker comes back
    /// as `Err(marker)` in the inner result.
    fn sub_var(
        &self,
        name: &str,
        vars: Option<&Map<String, Value>>,
        path: &Path,
    ) -> Result<Result<String, Value>> {
        let v = if let Some(expr) = vars.and_then(|m| m.get(name)) {
            self.value(expr, &path.index(1).key(name))?
        } else if let Some((res, attr)) = name.split_once('.') {
            match self.attribute(res, attr, path)? {
                Some(v) => v,
                None => return Err(invalid(path, "AWS::NoValue in Fn::Sub")),
            }
        } else {
            match self.ref_name(name, path)? {
                Some(v) => v,
                None => {
                    return Err(invalid(
                        path,
                        "AWS::NoValue cannot be substituted in Fn::Sub",
                    ));
                }
            }
        };
        if as_unknown(&v).is_some() {
            return Ok(Err(v));
        }
        scalar_text(&v).map(Ok).ok_or_else(|| {
            invalid(
                path,
                format!(
                    "`${{{}}}` in Fn::Sub must be a string, found {}",
                    abbreviate(name, 80),
                    type_name(&v)
                ),
            )
        })
    }

    pub(super) fn base64(&self, arg: &Value, path: &Path) -> Result<Option<Value>> {
        match self.string(arg, path, "Fn::Base64's argument")? {
            Ok(s) => {
                if s.len().div_ceil(3).saturating_mul(4) > MAX_STRING_BYTES {
                    return Err(too_long(path, "Fn::Base64"));
                }
                Ok(Some(Value::String(
                    base64::engine::general_purpose::STANDARD.encode(s),
                )))
            }
            Err(u) => Ok(Some(u)),
        }
    }

    pub(super) fn select(&self, arg: &Value, path: &Path) -> Result<Option<Value>> {
        let a = self.args(arg, path, "Fn::Select", &[2])?;
        let index = self.string(&a[0], &path.index(0), "the index")?;
        let items = self.list(&a[1], &path.index(1), "Fn::Select's second argument")?;
        let index = match index {
            Ok(s) => s.trim().parse::<usize>().map_err(|_| {
                invalid(
                    &path.index(0),
                    format!(
                        "the index must be a whole number, found `{}`",
                        abbreviate(&s, 80)
                    ),
                )
            })?,
            Err(u) => return Ok(Some(u)),
        };
        let items = match items {
            Ok(items) => items,
            Err(u) => return Ok(Some(u)),
        };
        let len = items.len();
        match items.into_iter().nth(index) {
            Some(v) => Ok(Some(v)),
            None => Err(invalid(
                path,
                format!("index {index} is out of range for a list of {len} elements"),
            )),
        }
    }

    pub(super) fn split(&self, arg: &Value, path: &Path) -> Result<Option<Value>> {
        let a = self.args(arg, path, "Fn::Split", &[2])?;
        let delim = match &a[0] {
            Value::String(s) if !s.is_empty() => s.clone(),
            _ => {
                return Err(invalid(
                    &path.index(0),
                    "the delimiter must be a non-empty string",
                ));
            }
        };
        match self.string(&a[1], &path.index(1), "the string to split")? {
            // A secret recorded masked: its parts are not known, and are secret.
            Ok(s) if crate::mask::is_mask(&s) => Ok(Some(Value::String(s))),
            Ok(s) => Ok(Some(Value::Array(
                s.split(delim.as_str())
                    .map(|p| Value::String(p.to_string()))
                    .collect(),
            ))),
            Err(u) => Ok(Some(u)),
        }
    }
}
