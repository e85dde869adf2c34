//! Parameter values: binding what the user gave to what the template declares, with
//! CloudFormation's checks.

use std::collections::HashSet;

use indexmap::IndexMap;
use serde_json::Value;

use crate::error::{ErrorKind, Path, Result, TemplateError};
use crate::template::{Parameter, Template};

/// The parameter values of one deploy, checked against the template's declarations.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BoundParameters {
    values: IndexMap<String, Value>,
    no_echo: HashSet<String>,
    ssm: HashSet<String>,
}

impl BoundParameters {
    /// The value of a parameter: a string, or a list of strings for list types. For an
    /// SSM parameter type this is the SSM parameter's *name*; see [`Self::is_ssm`].
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.values.get(name)
    }

    /// True when the parameter is declared `NoEcho`: its value is never written down.
    pub fn is_no_echo(&self, name: &str) -> bool {
        self.no_echo.contains(name)
    }

    /// True when the parameter's type is `AWS::SSM::Parameter::Value<...>`.
    pub fn is_ssm(&self, name: &str) -> bool {
        self.ssm.contains(name)
    }

    /// Every bound parameter, in template order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Value)> {
        self.values.iter()
    }

    /// The parameters as they may be recorded: `NoEcho` values replaced by `****`.
    pub fn for_record(&self) -> IndexMap<String, Value> {
        self.values
            .iter()
            .map(|(k, v)| {
                let v = if self.no_echo.contains(k) {
                    Value::String("****".into())
                } else {
                    v.clone()
                };
                (k.clone(), v)
            })
            .collect()
    }

    /// The same parameters with every `NoEcho` value replaced by `****`: what may be kept
    /// once a deploy no longer needs the values.
    #[must_use]
    pub fn redacted(&self) -> BoundParameters {
        let mut out = self.clone();
        for name in &self.no_echo {
            if let Some(v) = out.values.get_mut(name) {
                *v = Value::String("****".into());
            }
        }
        out
    }

    /// The `NoEcho` values, to mask in any text that is printed or recorded.
    pub fn secret_values(&self) -> Vec<String> {
        let mut out = Vec::new();
        for name in &self.no_echo {
            match self.values.get(name) {
                Some(Value::String(s)) if !s.is_empty() => out.push(s.clone()),
                Some(Value::Array(items)) => out.extend(
                    items
                        .iter()
                        .filter_map(Value::as_str)
                        .filter(|s| !s.is_empty())
                        .map(str::to_string),
                ),
                _ => {}
            }
        }
        out
    }
}

/// Binds the given parameter values (`NAME=VALUE` as the user wrote them) to the template:
/// a value given wins over `Default`; every constraint is checked. Errors never print a
/// `NoEcho` value.
pub fn bind_parameters(
    template: &Template,
    given: &IndexMap<String, String>,
) -> Result<BoundParameters> {
    for name in given.keys() {
        if !template.parameters.contains_key(name) {
            let declared: Vec<&str> = template.parameters.keys().map(String::as_str).collect();
            let hint = if declared.is_empty() {
                "the template declares no parameters".to_string()
            } else {
                format!("the template declares {}", declared.join(", "))
            };
            return Err(TemplateError::new(
                ErrorKind::ParameterValue,
                Path::from_keys(["Parameters", name]),
                format!("a value was given for `{name}`, which the template does not declare"),
            )
            .with_hint(hint));
        }
    }
    let mut bound = BoundParameters::default();
    for (name, decl) in &template.parameters {
        let path = Path::from_keys(["Parameters", name]);
        let raw = match given.get(name).or(decl.default.as_ref()) {
            Some(v) => v.clone(),
            None => {
                return Err(TemplateError::new(
                    ErrorKind::MissingParameter,
                    &path,
                    format!("parameter `{name}` has no value and no Default"),
                )
                .with_hint(format!("pass --parameter {name}=VALUE")));
            }
        };
        check_value(name, decl, &raw, &path)?;
        let value = if decl.is_list() {
            Value::Array(split_list(&raw).into_iter().map(Value::String).collect())
        } else {
            Value::String(raw)
        };
        if decl.no_echo {
            bound.no_echo.insert(name.clone());
        }
        if decl.is_ssm() {
            bound.ssm.insert(name.clone());
        }
        bound.values.insert(name.clone(), value);
    }
    Ok(bound)
}

fn split_list(raw: &str) -> Vec<String> {
    if raw.is_empty() {
        return vec![];
    }
    // CloudFormation trims the white space around each element.
    raw.split(',').map(|s| s.trim().to_string()).collect()
}

fn check_value(name: &str, decl: &Parameter, raw: &str, path: &Path) -> Result<()> {
    let check = ValueCheck { name, decl, path };
    // SSM parameter types hold the name of an SSM parameter; the constraints apply to it
    // as CloudFormation applies them to the given text.
    let items: Vec<String> = if decl.is_list() {
        split_list(raw)
    } else {
        vec![raw.to_string()]
    };
    for item in &items {
        check.item(item)?;
    }
    check.length(raw)
}

/// The constraints of one parameter declaration, checked against a given value.
struct ValueCheck<'a> {
    name: &'a str,
    decl: &'a Parameter,
    path: &'a Path,
}

impl ValueCheck<'_> {
    /// How a value shows in a message: a `NoEcho` value never does.
    fn shown(&self, v: &str) -> String {
        if self.decl.no_echo {
            "the given value".to_string()
        } else {
            format!("`{v}`")
        }
    }

    /// A value error, with the `ConstraintDescription` as its hint.
    fn fail(&self, msg: String) -> TemplateError {
        let mut e = TemplateError::new(ErrorKind::ParameterValue, self.path, msg);
        if let Some(c) = &self.decl.constraint_description {
            e = e.with_hint(c.clone());
        }
        e
    }

    /// One item (the value, or one element of a list): its type, the allowed values, the
    /// pattern and the range.
    fn item(&self, item: &str) -> Result<()> {
        let (name, decl) = (self.name, self.decl);
        if decl.is_number() && item.trim().parse::<f64>().is_err() {
            return Err(self.fail(format!(
                "parameter `{name}` is a {}, but {} is not a number",
                decl.ty,
                self.shown(item)
            )));
        }
        if let Some(allowed) = &decl.allowed_values
            && !allowed.iter().any(|a| a == item)
        {
            return Err(self.fail(format!(
                "{} is not an allowed value of parameter `{name}`; allowed: {}",
                self.shown(item),
                allowed.join(", ")
            )));
        }
        if let Some(pattern) = &decl.allowed_pattern {
            self.pattern(pattern, item)?;
        }
        if decl.is_number()
            && let Ok(n) = item.trim().parse::<f64>()
        {
            self.range(n, item)?;
        }
        Ok(())
    }

    /// `AllowedPattern`, which must match the whole item.
    fn pattern(&self, pattern: &str, item: &str) -> Result<()> {
        let re = regex::Regex::new(&format!("^(?:{pattern})$")).map_err(|e| {
            TemplateError::new(
                ErrorKind::Structure,
                self.path.key("AllowedPattern"),
                format!("not a valid regular expression: {e}"),
            )
        })?;
        if re.is_match(item) {
            Ok(())
        } else {
            Err(self.fail(format!(
                "{} does not match the AllowedPattern `{pattern}` of parameter `{}`",
                self.shown(item),
                self.name
            )))
        }
    }

    /// `MinValue` and `MaxValue` of a number `n` (given as `item`).
    fn range(&self, n: f64, item: &str) -> Result<()> {
        let name = self.name;
        if let Some(min) = self.decl.min_value
            && n < min
        {
            return Err(self.fail(format!(
                "{} is below the MinValue {min} of parameter `{name}`",
                self.shown(item)
            )));
        }
        if let Some(max) = self.decl.max_value
            && n > max
        {
            return Err(self.fail(format!(
                "{} is above the MaxValue {max} of parameter `{name}`",
                self.shown(item)
            )));
        }
        Ok(())
    }

    /// `MinLength` and `MaxLength` of the whole value, in characters.
    fn length(&self, raw: &str) -> Result<()> {
        let name = self.name;
        let len = raw.chars().count() as u64;
        if let Some(min) = self.decl.min_length
            && len < min
        {
            return Err(self.fail(format!(
                "parameter `{name}` must be at least {min} characters long, {} has {len}",
                self.shown(raw)
            )));
        }
        if let Some(max) = self.decl.max_length
            && len > max
        {
            return Err(self.fail(format!(
                "parameter `{name}` must be at most {max} characters long, {} has {len}",
                self.shown(raw)
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::template::Template;
    use serde_json::json;

    fn template() -> Template {
        Template::from_value(&json!({
            "Parameters": {
                "Env": {"Type": "String", "Default": "dev", "AllowedValues": ["dev", "prod"]},
                "Count": {"Type": "Number", "Default": "3", "MinValue": 1, "MaxValue": 5},
                "Name": {"Type": "String", "AllowedPattern": "[a-z]+", "MinLength": 2, "MaxLength": 5,
                         "Default": "abc", "ConstraintDescription": "lowercase letters"},
                "Secret": {"Type": "String", "NoEcho": true, "MinLength": 8},
                "Ports": {"Type": "List<Number>", "Default": "80, 443"},
                "Version": {"Type": "AWS::SSM::Parameter::Value<String>", "Default": "/cdk/version"}
            },
            "Resources": {}
        }))
        .unwrap()
    }

    fn given(pairs: &[(&str, &str)]) -> IndexMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn binds_values_and_defaults() {
        let b = bind_parameters(&template(), &given(&[("Secret", "hunter2hunter2")])).unwrap();
        assert_eq!(b.get("Env"), Some(&json!("dev")));
        assert_eq!(b.get("Ports"), Some(&json!(["80", "443"])));
        assert!(b.is_ssm("Version"));
        assert!(b.is_no_echo("Secret"));
        assert_eq!(b.for_record()["Secret"], json!("****"));
        assert_eq!(b.secret_values(), vec!["hunter2hunter2"]);
    }

    #[test]
    fn every_constraint_is_checked() {
        let t = template();
        let cases: &[(&[(&str, &str)], &str)] = &[
            (&[("Env", "qa")], "not an allowed value"),
            (&[("Count", "x")], "not a number"),
            (&[("Count", "9")], "above the MaxValue"),
            (&[("Count", "0")], "below the MinValue"),
            (&[("Name", "ABC")], "does not match the AllowedPattern"),
            (&[("Name", "a")], "at least 2 characters"),
            (&[("Name", "abcdef")], "at most 5 characters"),
            (&[("Ports", "80,x")], "not a number"),
        ];
        for (pairs, msg) in cases {
            let mut g = given(pairs);
            g.insert("Secret".into(), "longenough".into());
            let e = bind_parameters(&t, &g).unwrap_err();
            assert_eq!(e.kind, ErrorKind::ParameterValue, "{e}");
            assert!(e.message.contains(msg), "{pairs:?}: {e}");
        }
    }

    #[test]
    fn missing_unknown_and_secret_errors() {
        let t = template();
        let e = bind_parameters(&t, &given(&[])).unwrap_err();
        assert_eq!(e.kind, ErrorKind::MissingParameter);
        assert_eq!(e.path, "Parameters.Secret");
        assert!(e.hint.as_deref().unwrap().contains("--parameter Secret="));

        let e = bind_parameters(&t, &given(&[("Nope", "1")])).unwrap_err();
        assert_eq!(e.kind, ErrorKind::ParameterValue);
        assert!(e.hint.unwrap().contains("Env"));

        let e = bind_parameters(&t, &given(&[("Secret", "short")])).unwrap_err();
        assert!(
            !e.to_string().contains("short"),
            "a NoEcho value leaked: {e}"
        );
    }
}
