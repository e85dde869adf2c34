//! The template model: the sections of a CloudFormation template, checked for shape.
//!
//! Values inside properties, outputs and conditions stay JSON values in the long form;
//! the resolver walks them.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{ErrorKind, Path, Result, TemplateError};
use crate::limits::MAX_DEPTH;

/// The top-level sections CloudFormation accepts.
const SECTIONS: &[&str] = &[
    "AWSTemplateFormatVersion",
    "Description",
    "Metadata",
    "Parameters",
    "Rules",
    "Mappings",
    "Conditions",
    "Transform",
    "Resources",
    "Outputs",
    "Hooks",
];

/// A parsed and shape-checked CloudFormation template.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Template {
    /// `AWSTemplateFormatVersion`, when given.
    pub format_version: Option<String>,
    /// `Description`, when given.
    pub description: Option<String>,
    /// The transforms the template asks for (`Transform` as a string or a list).
    pub transforms: Vec<String>,
    /// `Parameters`, in template order.
    pub parameters: IndexMap<String, Parameter>,
    /// `Mappings`: map name to top-level key to second-level key to value.
    pub mappings: IndexMap<String, Value>,
    /// `Conditions`: name to condition expression.
    pub conditions: IndexMap<String, Value>,
    /// `Resources`, in template order.
    pub resources: IndexMap<String, Resource>,
    /// `Outputs`, in template order.
    pub outputs: IndexMap<String, Output>,
    /// `Rules`: accepted and kept, not evaluated.
    pub rules: Option<Value>,
    /// Template-level `Metadata`.
    pub metadata: Option<Value>,
}

/// One declared parameter.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Parameter {
    /// `Type`: `String`, `Number`, `List<Number>`, `CommaDelimitedList`, an AWS-specific
    /// type (`AWS::EC2::VPC::Id`, `List<AWS::EC2::Subnet::Id>`) or an SSM parameter type
    /// (`AWS::SSM::Parameter::Value<String>`).
    #[serde(rename = "Type")]
    pub ty: String,
    /// `Default`, as a string (numbers are written as CloudFormation reads them).
    pub default: Option<String>,
    /// `AllowedValues`, as strings.
    pub allowed_values: Option<Vec<String>>,
    /// `AllowedPattern`: a regular expression the whole value must match.
    pub allowed_pattern: Option<String>,
    /// `MinLength`.
    pub min_length: Option<u64>,
    /// `MaxLength`.
    pub max_length: Option<u64>,
    /// `MinValue`.
    pub min_value: Option<f64>,
    /// `MaxValue`.
    pub max_value: Option<f64>,
    /// `NoEcho`: the value is never written down nor printed.
    pub no_echo: bool,
    /// `Description`.
    pub description: Option<String>,
    /// `ConstraintDescription`: shown when a constraint fails.
    pub constraint_description: Option<String>,
}

impl Parameter {
    /// True when a `Ref` to this parameter yields a list (`List<...>`,
    /// `CommaDelimitedList`, and SSM parameter types of a list).
    pub fn is_list(&self) -> bool {
        let t = self.ty.as_str();
        t == "CommaDelimitedList"
            || t.starts_with("List<")
            || t == "AWS::SSM::Parameter::Value<CommaDelimitedList>"
            || t.starts_with("AWS::SSM::Parameter::Value<List<")
    }

    /// True for `AWS::SSM::Parameter::Value<...>`: the given value names an SSM parameter
    /// whose value is used.
    pub fn is_ssm(&self) -> bool {
        self.ty.starts_with("AWS::SSM::Parameter::Value<")
    }

    /// True for `Number` and `List<Number>`.
    pub fn is_number(&self) -> bool {
        self.ty == "Number" || self.ty == "List<Number>"
    }
}

/// What happens to the AWS resource when it leaves the stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum Policy {
    /// Delete it (the default).
    #[default]
    Delete,
    /// Keep it in AWS and forget it.
    Retain,
    /// Keep it, except when the deploy that created it is rolled back.
    RetainExceptOnCreate,
    /// Snapshot it, then delete it (for the types that support snapshots).
    Snapshot,
}

impl Policy {
    fn parse(s: &str) -> Option<Policy> {
        Some(match s {
            "Delete" => Policy::Delete,
            "Retain" => Policy::Retain,
            "RetainExceptOnCreate" => Policy::RetainExceptOnCreate,
            "Snapshot" => Policy::Snapshot,
            _ => return None,
        })
    }

    /// The policy's name as templates spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Policy::Delete => "Delete",
            Policy::Retain => "Retain",
            Policy::RetainExceptOnCreate => "RetainExceptOnCreate",
            Policy::Snapshot => "Snapshot",
        }
    }
}

/// One resource of the template.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Resource {
    /// `Type`.
    #[serde(rename = "Type")]
    pub ty: String,
    /// `Properties` (an empty object when absent).
    pub properties: Map<String, Value>,
    /// `DependsOn`, a string or a list in the template.
    pub depends_on: Vec<String>,
    /// `Condition`: the resource exists only when it is true.
    pub condition: Option<String>,
    /// `DeletionPolicy`.
    pub deletion_policy: Option<Policy>,
    /// `UpdateReplacePolicy`.
    pub update_replace_policy: Option<Policy>,
    /// `Metadata`.
    pub metadata: Option<Value>,
    /// `CreationPolicy`, kept as given.
    pub creation_policy: Option<Value>,
    /// `UpdatePolicy`, kept as given.
    pub update_policy: Option<Value>,
}

impl Resource {
    /// True for custom resources (`Custom::*` and `AWS::CloudFormation::CustomResource`).
    pub fn is_custom(&self) -> bool {
        self.ty.starts_with("Custom::") || self.ty == "AWS::CloudFormation::CustomResource"
    }

    /// True for a nested stack.
    pub fn is_nested_stack(&self) -> bool {
        self.ty == "AWS::CloudFormation::Stack"
    }
}

/// One output of the template.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Output {
    /// `Value`.
    pub value: Value,
    /// `Export.Name`, when the output is exported.
    pub export_name: Option<Value>,
    /// `Condition`.
    pub condition: Option<String>,
    /// `Description`.
    pub description: Option<String>,
}

fn structure(path: &Path, message: impl Into<String>) -> TemplateError {
    TemplateError::new(ErrorKind::Structure, path, message)
}

fn expect_object<'a>(v: &'a Value, path: &Path) -> Result<&'a Map<String, Value>> {
    v.as_object()
        .ok_or_else(|| structure(path, format!("expected an object, found {}", type_name(v))))
}

fn expect_string(v: &Value, path: &Path) -> Result<String> {
    match v {
        Value::String(s) => Ok(s.clone()),
        other => Err(structure(
            path,
            format!("expected a string, found {}", type_name(other)),
        )),
    }
}

/// A scalar as CloudFormation reads it in places that take strings (parameter defaults,
/// allowed values): numbers and booleans become their text.
fn scalar_string(v: &Value, path: &Path) -> Result<String> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        other => Err(structure(
            path,
            format!("expected a string or a number, found {}", type_name(other)),
        )),
    }
}

fn opt_u64(v: Option<&Value>, path: &Path) -> Result<Option<u64>> {
    v.map(|v| {
        scalar_string(v, path)?
            .parse::<u64>()
            .map_err(|_| structure(path, "expected a whole number"))
    })
    .transpose()
}

fn opt_f64(v: Option<&Value>, path: &Path) -> Result<Option<f64>> {
    v.map(|v| {
        scalar_string(v, path)?
            .parse::<f64>()
            .map_err(|_| structure(path, "expected a number"))
    })
    .transpose()
}

/// The JSON type of a value, for messages.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

impl Template {
    /// Builds the model from a parsed template, checking the shape of every section.
    pub fn from_value(v: &Value) -> Result<Template> {
        let root = Path::root();
        let top = expect_object(v, &root)?;
        check_depth(v)?;
        let mut t = Template::default();
        if let Some(v) = top.get("Transform") {
            t.transforms = parse_transforms(v, &root.key("Transform"))?;
        }
        match t.read_sections(top) {
            Ok(()) => Ok(t),
            // A template written for a transform is in the transform's language (SAM's
            // `Globals`, `Fn::ForEach` keys): the transform is the problem, not its shape.
            Err(e)
                if matches!(
                    e.kind,
                    ErrorKind::Structure | ErrorKind::UnresolvedReference
                ) =>
            {
                Err(t.ensure_no_transform().err().unwrap_or(e))
            }
            Err(e) => Err(e),
        }
    }

    /// Reads every section of `top` but `Transform` into this template.
    fn read_sections(&mut self, top: &Map<String, Value>) -> Result<()> {
        let root = Path::root();
        for key in top.keys() {
            if !SECTIONS.contains(&key.as_str()) {
                return Err(structure(
                    &root.key(key),
                    format!("unknown top-level section `{key}`"),
                )
                .with_hint(format!("a template's sections are {}", SECTIONS.join(", "))));
            }
        }
        if let Some(v) = top.get("AWSTemplateFormatVersion") {
            self.format_version = Some(scalar_string(v, &root.key("AWSTemplateFormatVersion"))?);
        }
        if let Some(v) = top.get("Description") {
            self.description = Some(scalar_string(v, &root.key("Description"))?);
        }
        self.metadata = top.get("Metadata").cloned();
        self.rules = top.get("Rules").cloned();
        if let Some(v) = top.get("Parameters") {
            let p = root.key("Parameters");
            for (name, def) in expect_object(v, &p)? {
                self.parameters
                    .insert(name.clone(), parse_parameter(def, &p.key(name))?);
            }
        }
        if let Some(v) = top.get("Mappings") {
            let p = root.key("Mappings");
            for (name, m) in expect_object(v, &p)? {
                expect_object(m, &p.key(name))?;
                self.mappings.insert(name.clone(), m.clone());
            }
        }
        if let Some(v) = top.get("Conditions") {
            let p = root.key("Conditions");
            for (name, c) in expect_object(v, &p)? {
                self.conditions.insert(name.clone(), c.clone());
            }
        }
        let p = root.key("Resources");
        let resources = top.get("Resources").ok_or_else(|| {
            structure(&root, "the template has no `Resources` section")
                .with_hint("a template needs at least one resource")
        })?;
        for (name, def) in expect_object(resources, &p)? {
            self.resources
                .insert(name.clone(), parse_resource(def, &p.key(name))?);
        }
        if let Some(v) = top.get("Outputs") {
            let p = root.key("Outputs");
            for (name, def) in expect_object(v, &p)? {
                self.outputs
                    .insert(name.clone(), parse_output(def, &p.key(name))?);
            }
        }
        self.check_names()
    }

    /// Checks that every name a resource or output points at by name exists: `DependsOn`,
    /// `Condition`.
    fn check_names(&self) -> Result<()> {
        for (id, r) in &self.resources {
            let p = Path::from_keys(["Resources", id]);
            for (i, dep) in r.depends_on.iter().enumerate() {
                if !self.resources.contains_key(dep) {
                    return Err(TemplateError::new(
                        ErrorKind::UnresolvedReference,
                        p.key("DependsOn").index(i),
                        format!(
                            "DependsOn names `{dep}`, which is not a resource of this template"
                        ),
                    ));
                }
            }
            if let Some(c) = &r.condition
                && !self.conditions.contains_key(c)
            {
                return Err(TemplateError::new(
                    ErrorKind::UnresolvedReference,
                    p.key("Condition"),
                    format!("condition `{c}` is not declared in `Conditions`"),
                ));
            }
        }
        for (id, o) in &self.outputs {
            if let Some(c) = &o.condition
                && !self.conditions.contains_key(c)
            {
                return Err(TemplateError::new(
                    ErrorKind::UnresolvedReference,
                    Path::from_keys(["Outputs", id, "Condition"]),
                    format!("condition `{c}` is not declared in `Conditions`"),
                ));
            }
        }
        Ok(())
    }

    /// Fails when the template asks for a transform (stackflow deploys templates as they
    /// are and runs no macro), or holds a `${AWS::...}` placeholder that nothing would
    /// substitute ([`super::check_literal_placeholders`]).
    pub fn ensure_supported(&self) -> Result<()> {
        self.ensure_no_transform()?;
        super::check_literal_placeholders(self)
    }

    /// Fails when the template holds a module or asks for a transform.
    fn ensure_no_transform(&self) -> Result<()> {
        if let Some((id, r)) = self
            .resources
            .iter()
            .find(|(_, r)| r.ty.ends_with("::MODULE"))
        {
            return Err(TemplateError::new(
                ErrorKind::UnsupportedTransform,
                Path::from_keys(["Resources", id, "Type"]),
                format!(
                    "`{}` is a CloudFormation module, which stackflow does not expand",
                    r.ty
                ),
            )
            .with_hint("modules are expanded inside CloudFormation; write out their resources"));
        }
        if let Some(t) = self.transforms.first() {
            let hint = match t.as_str() {
                "AWS::Serverless-2016-10-31" => {
                    "SAM templates must be transformed first; deploy the output of `sam package` through CloudFormation, or write the resources out"
                }
                "AWS::LanguageExtensions" => {
                    "remove the transform and write out what Fn::ForEach, Fn::Length and Fn::ToJsonString would produce"
                }
                _ => "transforms (macros) run inside CloudFormation, which stackflow does not use",
            };
            return Err(TemplateError::new(
                ErrorKind::UnsupportedTransform,
                "Transform",
                format!("transform `{t}` is not supported"),
            )
            .with_hint(hint));
        }
        Ok(())
    }
}

/// Fails when lists and objects nest more than [`MAX_DEPTH`] levels deep in `v` (what
/// [`super::parse_text`] already refuses; a value built some other way is checked here),
/// so that everything that walks the template recurses a bounded number of times.
fn check_depth(v: &Value) -> Result<()> {
    /// A container seen: its parent's index in `seen` and its key or index there.
    struct Seen<'a> {
        parent: usize,
        key: Option<&'a str>,
        index: usize,
    }
    // Depth-first without recursion: each entry is a container, its depth and its index
    // in `seen`.
    let mut seen = vec![Seen {
        parent: 0,
        key: None,
        index: 0,
    }];
    let mut pending: Vec<(&Value, usize, usize)> = vec![(v, 1, 0)];
    while let Some((v, depth, at)) = pending.pop() {
        if depth > MAX_DEPTH {
            let mut path = Vec::new();
            let mut i = at;
            while i != 0 {
                path.push(&seen[i]);
                i = seen[i].parent;
            }
            let path = path.iter().rev().fold(Path::root(), |p, s| match s.key {
                Some(k) => p.key(k),
                None => p.index(s.index),
            });
            return Err(TemplateError::new(
                ErrorKind::Limit,
                path,
                format!("the template nests lists and objects more than {MAX_DEPTH} levels deep"),
            ));
        }
        let children: Vec<(Option<&str>, usize, &Value)> = match v {
            Value::Array(items) => items
                .iter()
                .enumerate()
                .map(|(i, c)| (None, i, c))
                .collect(),
            Value::Object(m) => m.iter().map(|(k, c)| (Some(k.as_str()), 0, c)).collect(),
            _ => continue,
        };
        for (key, index, c) in children {
            if c.is_array() || c.is_object() {
                seen.push(Seen {
                    parent: at,
                    key,
                    index,
                });
                pending.push((c, depth + 1, seen.len() - 1));
            }
        }
    }
    Ok(())
}

/// `Transform`: a name or a list of names.
fn parse_transforms(v: &Value, p: &Path) -> Result<Vec<String>> {
    match v {
        Value::String(s) => Ok(vec![s.clone()]),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, v)| expect_string(v, &p.index(i)))
            .collect(),
        other => Err(structure(
            p,
            format!("expected a string or a list, found {}", type_name(other)),
        )),
    }
}

fn parse_parameter(v: &Value, path: &Path) -> Result<Parameter> {
    let o = expect_object(v, path)?;
    let ty = o
        .get("Type")
        .ok_or_else(|| structure(path, "the parameter has no `Type`"))?;
    let mut p = Parameter {
        ty: expect_string(ty, &path.key("Type"))?,
        ..Parameter::default()
    };
    if let Some(d) = o.get("Default") {
        p.default = Some(match d {
            // A list default of a list parameter is written comma-separated.
            Value::Array(items) => items
                .iter()
                .enumerate()
                .map(|(i, v)| scalar_string(v, &path.key("Default").index(i)))
                .collect::<Result<Vec<_>>>()?
                .join(","),
            other => scalar_string(other, &path.key("Default"))?,
        });
    }
    if let Some(a) = o.get("AllowedValues") {
        let ap = path.key("AllowedValues");
        let items = a
            .as_array()
            .ok_or_else(|| structure(&ap, "expected a list"))?;
        p.allowed_values = Some(
            items
                .iter()
                .enumerate()
                .map(|(i, v)| scalar_string(v, &ap.index(i)))
                .collect::<Result<_>>()?,
        );
    }
    if let Some(v) = o.get("AllowedPattern") {
        let pattern = expect_string(v, &path.key("AllowedPattern"))?;
        regex::Regex::new(&pattern).map_err(|e| {
            structure(
                &path.key("AllowedPattern"),
                format!("not a valid regular expression: {e}"),
            )
        })?;
        p.allowed_pattern = Some(pattern);
    }
    p.min_length = opt_u64(o.get("MinLength"), &path.key("MinLength"))?;
    p.max_length = opt_u64(o.get("MaxLength"), &path.key("MaxLength"))?;
    p.min_value = opt_f64(o.get("MinValue"), &path.key("MinValue"))?;
    p.max_value = opt_f64(o.get("MaxValue"), &path.key("MaxValue"))?;
    p.no_echo = match o.get("NoEcho") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) if s.eq_ignore_ascii_case("true") => true,
        Some(Value::String(s)) if s.eq_ignore_ascii_case("false") => false,
        Some(_) => return Err(structure(&path.key("NoEcho"), "expected true or false")),
    };
    if let Some(d) = o.get("Description") {
        p.description = Some(scalar_string(d, &path.key("Description"))?);
    }
    if let Some(d) = o.get("ConstraintDescription") {
        p.constraint_description = Some(scalar_string(d, &path.key("ConstraintDescription"))?);
    }
    Ok(p)
}

fn parse_policy(v: Option<&Value>, path: &Path) -> Result<Option<Policy>> {
    v.map(|v| {
        let s = expect_string(v, path).map_err(|e| {
            if v.is_object() {
                e.with_hint("a policy is a name; intrinsic functions here need the AWS::LanguageExtensions transform, which stackflow does not run")
            } else {
                e
            }
        })?;
        Policy::parse(&s).ok_or_else(|| {
            structure(path, format!("unknown policy `{s}`"))
                .with_hint("use Delete, Retain, RetainExceptOnCreate or Snapshot")
        })
    })
    .transpose()
}

const RESOURCE_KEYS: &[&str] = &[
    "Type",
    "Properties",
    "DependsOn",
    "Condition",
    "DeletionPolicy",
    "UpdateReplacePolicy",
    "Metadata",
    "CreationPolicy",
    "UpdatePolicy",
    "Version",
];

fn parse_resource(v: &Value, path: &Path) -> Result<Resource> {
    let o = expect_object(v, path)?;
    for key in o.keys() {
        if !RESOURCE_KEYS.contains(&key.as_str()) {
            return Err(structure(
                &path.key(key),
                format!("unknown resource attribute `{key}`"),
            )
            .with_hint(format!("a resource takes {}", RESOURCE_KEYS.join(", "))));
        }
    }
    let ty = o
        .get("Type")
        .ok_or_else(|| structure(path, "the resource has no `Type`"))?;
    let mut r = Resource {
        ty: expect_string(ty, &path.key("Type"))?,
        ..Resource::default()
    };
    match o.get("Properties") {
        None | Some(Value::Null) => {}
        Some(p) => r.properties = expect_object(p, &path.key("Properties"))?.clone(),
    }
    r.depends_on = match o.get("DependsOn") {
        None => vec![],
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, v)| expect_string(v, &path.key("DependsOn").index(i)))
            .collect::<Result<_>>()?,
        Some(other) => {
            return Err(structure(
                &path.key("DependsOn"),
                format!("expected a string or a list, found {}", type_name(other)),
            ));
        }
    };
    if let Some(c) = o.get("Condition") {
        r.condition = Some(expect_string(c, &path.key("Condition"))?);
    }
    r.deletion_policy = parse_policy(o.get("DeletionPolicy"), &path.key("DeletionPolicy"))?;
    r.update_replace_policy = parse_policy(
        o.get("UpdateReplacePolicy"),
        &path.key("UpdateReplacePolicy"),
    )?;
    r.metadata = o.get("Metadata").cloned();
    r.creation_policy = o.get("CreationPolicy").cloned();
    r.update_policy = o.get("UpdatePolicy").cloned();
    Ok(r)
}

fn parse_output(v: &Value, path: &Path) -> Result<Output> {
    let o = expect_object(v, path)?;
    let value = o
        .get("Value")
        .ok_or_else(|| structure(path, "the output has no `Value`"))?;
    let mut out = Output {
        value: value.clone(),
        ..Output::default()
    };
    if let Some(e) = o.get("Export") {
        let ep = path.key("Export");
        let name = expect_object(e, &ep)?
            .get("Name")
            .ok_or_else(|| structure(&ep, "`Export` needs a `Name`"))?;
        out.export_name = Some(name.clone());
    }
    if let Some(c) = o.get("Condition") {
        out.condition = Some(expect_string(c, &path.key("Condition"))?);
    }
    if let Some(d) = o.get("Description") {
        out.description = Some(scalar_string(d, &path.key("Description"))?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn model(v: Value) -> Result<Template> {
        Template::from_value(&v)
    }

    #[test]
    fn reads_every_section() {
        let t = model(json!({
            "AWSTemplateFormatVersion": "2010-09-09",
            "Description": "d",
            "Transform": "AWS::Serverless-2016-10-31",
            "Parameters": {
                "Env": {"Type": "String", "Default": "dev", "AllowedValues": ["dev", "prod"]},
                "Count": {"Type": "Number", "Default": 3, "MinValue": 1, "MaxValue": 5},
                "Secret": {"Type": "String", "NoEcho": true},
                "Azs": {"Type": "CommaDelimitedList", "Default": ["a", "b"]}
            },
            "Mappings": {"M": {"k": {"v": 1}}},
            "Conditions": {"IsProd": {"Fn::Equals": [{"Ref": "Env"}, "prod"]}},
            "Resources": {
                "Q": {"Type": "AWS::SQS::Queue", "DependsOn": "T", "Condition": "IsProd",
                      "DeletionPolicy": "Retain", "UpdateReplacePolicy": "Snapshot"},
                "T": {"Type": "AWS::SNS::Topic", "Properties": {"DisplayName": "x"}}
            },
            "Outputs": {"O": {"Value": {"Ref": "T"}, "Export": {"Name": "e"}}},
            "Rules": {"R": {"Assertions": []}}
        }))
        .unwrap();
        assert_eq!(t.transforms, vec!["AWS::Serverless-2016-10-31"]);
        assert_eq!(t.parameters["Count"].default.as_deref(), Some("3"));
        assert_eq!(t.parameters["Azs"].default.as_deref(), Some("a,b"));
        assert!(t.parameters["Azs"].is_list());
        assert!(t.parameters["Secret"].no_echo);
        assert_eq!(t.resources["Q"].depends_on, vec!["T"]);
        assert_eq!(t.resources["Q"].deletion_policy, Some(Policy::Retain));
        assert_eq!(
            t.resources["Q"].update_replace_policy,
            Some(Policy::Snapshot)
        );
        assert_eq!(t.outputs["O"].export_name, Some(json!("e")));
        assert!(t.rules.is_some());
        let e = t.ensure_supported().unwrap_err();
        assert_eq!(e.kind, ErrorKind::UnsupportedTransform);
    }

    #[test]
    fn shape_errors_name_the_path() {
        let e = model(json!({"Resources": {}, "Foo": 1})).unwrap_err();
        assert_eq!(e.path, "Foo");
        assert!(e.message.contains("unknown top-level section"));

        let e = model(json!({"Resources": {"Q": {"Properties": {}}}})).unwrap_err();
        assert_eq!(e.path, "Resources.Q");
        assert!(e.message.contains("no `Type`"));

        let e =
            model(json!({"Resources": {"Q": {"Type": "X", "DependsOn": ["Nope"]}}})).unwrap_err();
        assert_eq!(e.kind, ErrorKind::UnresolvedReference);
        assert_eq!(e.path, "Resources.Q.DependsOn[0]");

        let e = model(json!({"Resources": {"Q": {"Type": "X", "Condition": "C"}}})).unwrap_err();
        assert_eq!(e.path, "Resources.Q.Condition");

        let e = model(json!({"Resources": {"Q": {"Type": "X", "DeletionPolicy": "Keep"}}}))
            .unwrap_err();
        assert_eq!(e.path, "Resources.Q.DeletionPolicy");

        let e = model(
            json!({"Parameters": {"P": {"Type": "String", "AllowedPattern": "("}},
                             "Resources": {}}),
        )
        .unwrap_err();
        assert_eq!(e.path, "Parameters.P.AllowedPattern");

        let e = model(json!({"Description": "x"})).unwrap_err();
        assert!(e.message.contains("no `Resources`"));
    }
}
