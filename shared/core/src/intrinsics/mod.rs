//! The intrinsic function resolver.
//!
//! [`Resolver`] turns long-form template values into concrete values. Everything that only
//! AWS or the stack's state knows comes through [`Environment`]. In [`Mode::Plan`] a value
//! that does not exist yet (a resource's physical id before it is created) becomes a
//! *known after deploy* marker ([`unknown`]); in [`Mode::Deploy`] it is an error, so an
//! unresolved expression never reaches a provider.

mod budget;
mod conditions;
mod params;
mod pseudo;
mod sub;
mod text;

use indexmap::IndexMap;
use serde_json::{Map, Value};

pub use budget::Budget;
pub use conditions::evaluate_conditions;
pub use params::{BoundParameters, bind_parameters};
pub use pseudo::{Pseudo, partition, url_suffix};
pub use sub::{SubPart, parse_sub};

use crate::error::{ErrorKind, Path, Result, TemplateError, did_you_mean};
use crate::limits::{MAX_DEPTH, abbreviate};
use crate::template::{Template, type_name};

/// The functions stackflow resolves. Any other `Fn::*` fails before any AWS call.
pub const SUPPORTED_FUNCTIONS: &[&str] = &[
    "Ref",
    "Fn::GetAtt",
    "Fn::Join",
    "Fn::Sub",
    "Fn::Select",
    "Fn::Split",
    "Fn::Base64",
    "Fn::If",
    "Fn::Equals",
    "Fn::And",
    "Fn::Or",
    "Fn::Not",
    "Fn::FindInMap",
    "Fn::GetAZs",
    "Fn::Cidr",
    "Fn::ImportValue",
    "Fn::GetStackOutput",
];

/// The key of the *known after deploy* marker object.
pub const UNKNOWN_KEY: &str = "stackflow:KnownAfterDeploy";

/// A *known after deploy* marker: `{"stackflow:KnownAfterDeploy": "<what>"}`. Nothing in a
/// template can produce it (its key is no intrinsic function and the parser never emits
/// it), so it cannot be confused with a real value.
pub fn unknown(what: impl Into<String>) -> Value {
    let mut m = Map::new();
    m.insert(UNKNOWN_KEY.into(), Value::String(what.into()));
    Value::Object(m)
}

/// What an unknown marker stands for, when `v` is one.
pub fn as_unknown(v: &Value) -> Option<&str> {
    match v {
        Value::Object(m) if m.len() == 1 => m.get(UNKNOWN_KEY).and_then(Value::as_str),
        _ => None,
    }
}

/// True when `v` is or contains an unknown marker.
pub fn contains_unknown(v: &Value) -> bool {
    match v {
        Value::Object(m) => as_unknown(v).is_some() || m.values().any(contains_unknown),
        Value::Array(items) => items.iter().any(contains_unknown),
        _ => false,
    }
}

/// How to treat values that do not exist yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// For a diff: values that do not exist yet become *known after deploy* markers.
    Plan,
    /// For an AWS call: every value must be known.
    Deploy,
}

/// What the resolver asks of the world: the stack's resources and AWS lookups. Every
/// method answers `None` when the value is not known; the resolver then marks it *known
/// after deploy* (plan) or fails (deploy).
pub trait Environment {
    /// `Ref` of a resource: its physical id (or what `Ref` returns for its type).
    fn resource_ref(&self, logical_id: &str) -> Option<Value>;
    /// `Fn::GetAtt` of a resource.
    fn resource_attribute(&self, logical_id: &str, attribute: &str) -> Option<Value>;
    /// `Fn::GetAZs`: the availability zones of a region.
    fn availability_zones(&self, _region: &str) -> Option<Vec<String>> {
        None
    }
    /// `Fn::ImportValue`: another stack's export.
    fn import_value(&self, _export_name: &str) -> Option<Value> {
        None
    }
    /// `Fn::GetStackOutput`: another stack's output.
    fn stack_output(&self, _reference: &StackOutputRef) -> Option<Value> {
        None
    }
    /// The value of an SSM parameter, for `AWS::SSM::Parameter::Value<...>` parameters.
    fn ssm_parameter(&self, _name: &str) -> Option<Value> {
        None
    }
}

/// An environment that knows nothing: every resource value is *known after deploy*.
#[derive(Debug, Clone, Copy, Default)]
pub struct EmptyEnvironment;

impl Environment for EmptyEnvironment {
    fn resource_ref(&self, _: &str) -> Option<Value> {
        None
    }
    fn resource_attribute(&self, _: &str, _: &str) -> Option<Value> {
        None
    }
}

/// The arguments of one `Fn::GetStackOutput`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct StackOutputRef {
    /// The stack that has the output.
    pub stack_name: String,
    /// The output's name.
    pub output_name: String,
    /// The stack's region, when not the current one.
    pub region: Option<String>,
    /// A role to read it with (another account).
    pub role_arn: Option<String>,
}

/// Resolves intrinsic functions in one stack's template.
///
/// Resolution stays within [`crate::limits`]: it recurses at most
/// [`MAX_DEPTH`] levels, a computed string is at most
/// [`crate::limits::MAX_STRING_BYTES`] long, and the functions compute at most
/// [`crate::limits::MAX_RESOLVED_BYTES`] in all (see [`Budget`]).
pub struct Resolver<'a> {
    template: &'a Template,
    parameters: &'a BoundParameters,
    pseudo: &'a Pseudo,
    conditions: &'a IndexMap<String, bool>,
    env: &'a dyn Environment,
    mode: Mode,
    own_budget: Budget,
    shared_budget: Option<&'a Budget>,
}

impl std::fmt::Debug for Resolver<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolver")
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

fn invalid(path: &Path, message: impl Into<String>) -> TemplateError {
    TemplateError::new(ErrorKind::InvalidFunction, path, message)
}

/// Every value of `parts`, or the first unknown marker among them. A function resolves
/// all its arguments before it gives up on an unknown one, so that a mistake in a later
/// argument is reported by the plan and not first by the deploy.
fn known<T>(parts: Vec<Result<T, Value>>) -> Result<Vec<T>, Value> {
    parts.into_iter().collect()
}

/// The error for a value at `path`, deeper than [`MAX_DEPTH`].
fn too_deep(path: &Path) -> TemplateError {
    TemplateError::new(
        ErrorKind::Limit,
        path,
        format!("the template nests values and functions more than {MAX_DEPTH} levels deep"),
    )
}

impl<'a> Resolver<'a> {
    /// A resolver for `template` with the given parameter values, pseudo parameters,
    /// evaluated conditions and environment.
    pub fn new(
        template: &'a Template,
        parameters: &'a BoundParameters,
        pseudo: &'a Pseudo,
        conditions: &'a IndexMap<String, bool>,
        env: &'a dyn Environment,
        mode: Mode,
    ) -> Self {
        Resolver {
            template,
            parameters,
            pseudo,
            conditions,
            env,
            mode,
            own_budget: Budget::new(),
            shared_budget: None,
        }
    }

    /// This resolver, counting what its functions compute against `budget` (shared with
    /// other resolvers, e.g. every resolver of one plan) instead of its own.
    #[must_use]
    pub fn with_budget(mut self, budget: &'a Budget) -> Self {
        self.shared_budget = Some(budget);
        self
    }

    fn budget(&self) -> &Budget {
        self.shared_budget.unwrap_or(&self.own_budget)
    }

    /// The mode the resolver runs in.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Resolves `value`, found at `path` in the template. `AWS::NoValue` at the top gives
    /// `None`; inside objects and lists it removes the key or the element.
    pub fn resolve(&self, value: &Value, path: &Path) -> Result<Option<Value>> {
        if path.len() > MAX_DEPTH {
            return Err(too_deep(path));
        }
        match value {
            Value::Object(m) if m.len() == 1 => {
                let (k, arg) = m.iter().next().expect("one entry");
                if k == "Ref" || k.starts_with("Fn::") {
                    return self.function(k, arg, &path.key(k));
                }
                self.object(m, path).map(|o| Some(Value::Object(o)))
            }
            Value::Object(m) => self.object(m, path).map(|o| Some(Value::Object(o))),
            Value::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    if let Some(v) = self.resolve(item, &path.index(i))? {
                        out.push(v);
                    }
                }
                Ok(Some(Value::Array(out)))
            }
            other => Ok(Some(other.clone())),
        }
    }

    /// Resolves a resource's properties.
    pub fn resolve_properties(&self, logical_id: &str) -> Result<Map<String, Value>> {
        let r = self.template.resources.get(logical_id).ok_or_else(|| {
            TemplateError::new(
                ErrorKind::UnresolvedReference,
                Path::from_keys(["Resources", logical_id]),
                format!("no resource `{logical_id}` in the template"),
            )
        })?;
        let path = Path::from_keys(["Resources", logical_id, "Properties"]);
        self.object(&r.properties, &path)
    }

    fn object(&self, m: &Map<String, Value>, path: &Path) -> Result<Map<String, Value>> {
        let mut out = Map::new();
        for (k, v) in m {
            if let Some(v) = self.resolve(v, &path.key(k))? {
                out.insert(k.clone(), v);
            }
        }
        Ok(out)
    }

    /// Resolves a value that must be present (not `AWS::NoValue`).
    fn value(&self, v: &Value, path: &Path) -> Result<Value> {
        self.resolve(v, path)?
            .ok_or_else(|| invalid(path, "AWS::NoValue cannot be used here"))
    }

    /// Resolves a value that must be a string (numbers are taken as their text). An
    /// unknown marker comes back as `Err(marker)` in the inner result.
    fn string(&self, v: &Value, path: &Path, what: &str) -> Result<Result<String, Value>> {
        let r = self.value(v, path)?;
        if as_unknown(&r).is_some() {
            return Ok(Err(r));
        }
        match r {
            Value::String(s) => Ok(Ok(s)),
            Value::Number(n) => Ok(Ok(n.to_string())),
            Value::Bool(b) => Ok(Ok(b.to_string())),
            other => Err(invalid(
                path,
                format!("{what} must be a string, found {}", type_name(&other)),
            )),
        }
    }

    fn args<'v>(
        &self,
        arg: &'v Value,
        path: &Path,
        name: &str,
        n: &[usize],
    ) -> Result<&'v [Value]> {
        match arg {
            Value::Array(items) if n.contains(&items.len()) => Ok(items),
            other => Err(invalid(
                path,
                format!(
                    "{name} takes a list of {} arguments, found {}",
                    n.iter()
                        .map(usize::to_string)
                        .collect::<Vec<_>>()
                        .join(" or "),
                    match other {
                        Value::Array(items) => format!("{} arguments", items.len()),
                        v => type_name(v).to_string(),
                    }
                ),
            )),
        }
    }

    fn not_available(&self, path: &Path, what: String) -> Result<Option<Value>> {
        match self.mode {
            Mode::Plan => Ok(Some(unknown(what))),
            Mode::Deploy => Err(TemplateError::new(
                ErrorKind::NotAvailable,
                path,
                format!("{what} is not available"),
            )),
        }
    }

    /// The intrinsic function `name` applied to `arg`, its result counted against the
    /// budget.
    fn function(&self, name: &str, arg: &Value, path: &Path) -> Result<Option<Value>> {
        let result = self.apply(name, arg, path)?;
        if let Some(v) = &result {
            self.budget().charge(v, path)?;
        }
        Ok(result)
    }

    fn apply(&self, name: &str, arg: &Value, path: &Path) -> Result<Option<Value>> {
        match name {
            "Ref" => self.reference(arg, path),
            "Fn::GetAtt" => self.get_att(arg, path),
            "Fn::Join" => self.join(arg, path),
            "Fn::Sub" => self.sub(arg, path),
            "Fn::Select" => self.select(arg, path),
            "Fn::Split" => self.split(arg, path),
            "Fn::Base64" => self.base64(arg, path),
            "Fn::If" => self.if_(arg, path),
            "Fn::Equals" | "Fn::And" | "Fn::Or" | "Fn::Not" => {
                conditions::evaluate_function(self, name, arg, path).map(|b| Some(Value::Bool(b)))
            }
            "Fn::FindInMap" => self.find_in_map(arg, path),
            "Fn::GetAZs" => self.get_azs(arg, path),
            "Fn::Cidr" => self.cidr(arg, path),
            "Fn::ImportValue" => self.import_value(arg, path),
            "Fn::GetStackOutput" => self.get_stack_output(arg, path),
            other => Err(TemplateError::new(
                ErrorKind::UnsupportedFunction,
                path,
                format!("intrinsic function `{other}` is not supported"),
            )
            .with_hint(format!(
                "stackflow resolves {}",
                SUPPORTED_FUNCTIONS.join(", ")
            ))),
        }
    }

    /// True when `logical_id` is a resource of the template whose condition holds.
    fn active_resource(&self, logical_id: &str, path: &Path) -> Result<bool> {
        match self.template.resources.get(logical_id) {
            None => Ok(false),
            Some(r) => match &r.condition {
                Some(c) if !self.conditions.get(c).copied().unwrap_or(true) => {
                    Err(TemplateError::new(
                        ErrorKind::UnresolvedReference,
                        path,
                        format!(
                            "`{logical_id}` is not created, because its condition `{c}` is false"
                        ),
                    )
                    .with_hint(format!(
                        "guard the reference with Fn::If [{c}, ..., !Ref AWS::NoValue]"
                    )))
                }
                _ => Ok(true),
            },
        }
    }

    /// `Ref` semantics for a name: pseudo parameter, parameter or resource.
    fn ref_name(&self, name: &str, path: &Path) -> Result<Option<Value>> {
        if name == "AWS::NoValue" {
            return Ok(None);
        }
        if let Some(v) = pseudo::value(self.pseudo, name) {
            return match v {
                Some(v) => Ok(Some(v)),
                None => self.not_available(path, name.to_string()),
            };
        }
        if let Some(v) = self.parameters.get(name) {
            if self.parameters.is_ssm(name) {
                let key = v.as_str().unwrap_or_default();
                return match self.env.ssm_parameter(key) {
                    Some(v) => Ok(Some(v)),
                    None => self.not_available(path, format!("SSM parameter {key}")),
                };
            }
            return Ok(Some(v.clone()));
        }
        if self.template.parameters.contains_key(name) {
            return Err(TemplateError::new(
                ErrorKind::MissingParameter,
                path,
                format!("parameter `{name}` has no value"),
            ));
        }
        if self.active_resource(name, path)? {
            return match self.env.resource_ref(name) {
                Some(v) => Ok(Some(v)),
                None => self.not_available(path, name.to_string()),
            };
        }
        let known = self
            .template
            .parameters
            .keys()
            .chain(self.template.resources.keys())
            .map(String::as_str);
        let suggestion = did_you_mean(crate::error::closest(name, known));
        Err(TemplateError::new(
            ErrorKind::UnresolvedReference,
            path,
            format!(
                "`{name}` is not a parameter, a resource or a pseudo parameter of this \
                 template{suggestion}"
            ),
        ))
    }

    fn reference(&self, arg: &Value, path: &Path) -> Result<Option<Value>> {
        match arg {
            Value::String(name) => self.ref_name(name, path),
            other => Err(invalid(
                path,
                format!("Ref takes a name, found {}", type_name(other)),
            )),
        }
    }

    /// Fails unless `res` is a resource of the template whose condition holds.
    fn attributed_resource(&self, res: &str, path: &Path) -> Result<()> {
        if !self.active_resource(res, path)? {
            return Err(TemplateError::new(
                ErrorKind::UnresolvedReference,
                path,
                format!("Fn::GetAtt names `{res}`, which is not a resource of this template"),
            ));
        }
        Ok(())
    }

    fn attribute(&self, res: &str, attr: &str, path: &Path) -> Result<Option<Value>> {
        self.attributed_resource(res, path)?;
        match self.env.resource_attribute(res, attr) {
            Some(v) => Ok(Some(v)),
            None => {
                self.known_attribute(res, attr, path)?;
                self.not_available(path, format!("{res}.{attr}"))
            }
        }
    }

    /// Fails when the schema of `res`'s type has no attribute `attr` (a typo would
    /// otherwise wait, as a value known after deploy, until the resource is made). Only
    /// asked when the value is not at hand, so an attribute a provider did return is never
    /// refused; custom resources and nested stacks return whatever they like.
    fn known_attribute(&self, res: &str, attr: &str, path: &Path) -> Result<()> {
        let Some(resource) = self.template.resources.get(res) else {
            return Ok(());
        };
        if resource.is_custom() || resource.is_nested_stack() {
            return Ok(());
        }
        let Some(schema) = crate::schema::schema(&resource.ty) else {
            return Ok(());
        };
        if schema.has_attribute(attr) {
            return Ok(());
        }
        let suggestion = did_you_mean(schema.closest_attribute(attr));
        Err(TemplateError::new(
            ErrorKind::UnresolvedReference,
            path,
            format!(
                "`{res}` ({}) has no attribute `{attr}`{suggestion}",
                resource.ty
            ),
        ))
    }

    fn get_att(&self, arg: &Value, path: &Path) -> Result<Option<Value>> {
        let (res, attr) = match arg {
            Value::String(s) => match s.split_once('.') {
                Some((r, a)) => (r.to_string(), Value::String(a.to_string())),
                None => {
                    return Err(invalid(
                        path,
                        "Fn::GetAtt takes [resource, attribute] or \"resource.attribute\"",
                    ));
                }
            },
            Value::Array(items) if items.len() == 2 => match &items[0] {
                Value::String(r) => (r.clone(), items[1].clone()),
                other => {
                    return Err(invalid(
                        &path.index(0),
                        format!(
                            "the resource name must be a string, found {}",
                            type_name(other)
                        ),
                    ));
                }
            },
            _ => {
                return Err(invalid(
                    path,
                    "Fn::GetAtt takes [resource, attribute] or \"resource.attribute\"",
                ));
            }
        };
        match self.string(&attr, &path.index(1), "the attribute name")? {
            Ok(attr) => self.attribute(&res, &attr, path),
            // Not known yet: the resource must exist all the same.
            Err(u) => self.attributed_resource(&res, path).map(|()| Some(u)),
        }
    }

    fn condition_value(&self, name: &Value, path: &Path) -> Result<bool> {
        let name = name
            .as_str()
            .ok_or_else(|| invalid(path, "the condition must be named by a string"))?;
        self.conditions.get(name).copied().ok_or_else(|| {
            if self.template.conditions.contains_key(name) {
                // Only while the conditions themselves are evaluated.
                invalid(
                    path,
                    format!(
                        "condition `{name}` cannot be used here: Fn::If does not work inside `Conditions`"
                    ),
                )
                .with_hint("combine conditions with Fn::And, Fn::Or and Fn::Not")
            } else {
                TemplateError::new(
                    ErrorKind::UnresolvedReference,
                    path,
                    format!("condition `{name}` is not declared in `Conditions`"),
                )
            }
        })
    }

    fn if_(&self, arg: &Value, path: &Path) -> Result<Option<Value>> {
        let a = self.args(arg, path, "Fn::If", &[3])?;
        if self.condition_value(&a[0], &path.index(0))? {
            self.resolve(&a[1], &path.index(1))
        } else {
            self.resolve(&a[2], &path.index(2))
        }
    }

    fn find_in_map(&self, arg: &Value, path: &Path) -> Result<Option<Value>> {
        let a = self.args(arg, path, "Fn::FindInMap", &[3, 4])?;
        let mut keys = Vec::with_capacity(3);
        for (i, k) in a.iter().take(3).enumerate() {
            keys.push(self.string(k, &path.index(i), "a Fn::FindInMap key")?);
        }
        let mapping = match &keys[0] {
            Ok(name) => Some(self.template.mappings.get(name).ok_or_else(|| {
                TemplateError::new(
                    ErrorKind::UnresolvedReference,
                    path.index(0),
                    format!("no mapping `{name}` in `Mappings`"),
                )
            })?),
            Err(_) => None,
        };
        let keys = match known(keys) {
            Ok(keys) => keys,
            Err(u) => return Ok(Some(u)),
        };
        let default = a.get(3).and_then(|d| d.get("DefaultValue"));
        let found = mapping
            .and_then(|m| m.get(&keys[1]))
            .and_then(|m| m.get(&keys[2]));
        match (found, default) {
            (Some(v), _) => {
                // The value takes the place of the function's object, one level up.
                if path.len() - 1 + budget::depth(v) > MAX_DEPTH {
                    return Err(TemplateError::new(
                        ErrorKind::Limit,
                        path,
                        format!(
                            "the value of mapping `{}` would nest the template more than {MAX_DEPTH} levels deep",
                            keys[0]
                        ),
                    ));
                }
                Ok(Some(v.clone()))
            }
            (None, Some(d)) => self.resolve(d, &path.index(3)),
            (None, None) => Err(invalid(
                path,
                format!(
                    "mapping `{}` has no value for [{}][{}]",
                    keys[0], keys[1], keys[2]
                ),
            )),
        }
    }

    fn get_azs(&self, arg: &Value, path: &Path) -> Result<Option<Value>> {
        let region = match self.string(arg, path, "the region")? {
            Ok(r) if r.is_empty() => self.pseudo.region.clone(),
            Ok(r) => r,
            Err(u) => return Ok(Some(u)),
        };
        match self.env.availability_zones(&region) {
            Some(azs) => Ok(Some(Value::Array(
                azs.into_iter().map(Value::String).collect(),
            ))),
            None => self.not_available(path, format!("the availability zones of {region}")),
        }
    }

    fn cidr(&self, arg: &Value, path: &Path) -> Result<Option<Value>> {
        let a = self.args(arg, path, "Fn::Cidr", &[3])?;
        let mut args = Vec::with_capacity(3);
        for (i, (v, what)) in a
            .iter()
            .zip(["the IP block", "a Fn::Cidr number", "a Fn::Cidr number"])
            .enumerate()
        {
            args.push(self.string(v, &path.index(i), what)?);
        }
        let args = match known(args) {
            Ok(args) => args,
            Err(u) => return Ok(Some(u)),
        };
        let block = &args[0];
        let mut nums = [0u32; 2];
        for i in 0..2 {
            let s = &args[i + 1];
            nums[i] = s.trim().parse::<u32>().map_err(|_| {
                invalid(
                    &path.index(i + 1),
                    format!("expected a whole number, found `{}`", abbreviate(s, 80)),
                )
            })?;
        }
        let subnets =
            crate::cidr::cidr(block, nums[0], nums[1]).map_err(|e| invalid(path, e.to_string()))?;
        Ok(Some(Value::Array(
            subnets.into_iter().map(Value::String).collect(),
        )))
    }

    fn import_value(&self, arg: &Value, path: &Path) -> Result<Option<Value>> {
        let export = match self.string(arg, path, "the export name")? {
            Ok(export) => export,
            Err(u) => return Ok(Some(u)),
        };
        match self.env.import_value(&export) {
            Some(v) => Ok(Some(v)),
            None => match self.mode {
                Mode::Plan => Ok(Some(unknown(format!("export {export}")))),
                Mode::Deploy => Err(TemplateError::new(
                    ErrorKind::NotAvailable,
                    path,
                    format!("no stack exports `{export}`"),
                )
                .with_hint("deploy the stack that exports it first")),
            },
        }
    }

    fn get_stack_output(&self, arg: &Value, path: &Path) -> Result<Option<Value>> {
        let o = arg.as_object().ok_or_else(|| {
            invalid(
                path,
                "Fn::GetStackOutput takes {StackName, OutputName, Region?, RoleArn?}",
            )
        })?;
        for k in o.keys() {
            if !["StackName", "OutputName", "Region", "RoleArn"].contains(&k.as_str()) {
                return Err(invalid(&path.key(k), format!("unknown key `{k}`")));
            }
        }
        let field = |k: &str, required: bool| -> Result<Result<Option<String>, Value>> {
            match o.get(k) {
                None if required => Err(invalid(path, format!("`{k}` is required"))),
                None => Ok(Ok(None)),
                Some(v) => Ok(self.string(v, &path.key(k), k)?.map(Some)),
            }
        };
        let fields = vec![
            field("StackName", true)?,
            field("OutputName", true)?,
            field("Region", false)?,
            field("RoleArn", false)?,
        ];
        let mut fields = match known(fields) {
            Ok(f) => f.into_iter(),
            Err(u) => return Ok(Some(u)),
        };
        let mut next = || fields.next().flatten();
        let r = StackOutputRef {
            stack_name: next().unwrap_or_default(),
            output_name: next().unwrap_or_default(),
            region: next(),
            role_arn: next(),
        };
        match self.env.stack_output(&r) {
            Some(v) => Ok(Some(v)),
            None => match self.mode {
                Mode::Plan => Ok(Some(unknown(format!(
                    "output {} of stack {}",
                    r.output_name, r.stack_name
                )))),
                Mode::Deploy => Err(TemplateError::new(
                    ErrorKind::NotAvailable,
                    path,
                    format!("stack `{}` has no output `{}`", r.stack_name, r.output_name),
                )),
            },
        }
    }
}

#[cfg(test)]
mod tests;
