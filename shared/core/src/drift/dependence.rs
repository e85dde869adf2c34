//! Which resources depend on some parameters: those an import cannot record a baseline
//! for when the parameters' deployed values cannot be proven equal to their defaults.

use std::collections::BTreeSet;

use indexmap::IndexMap;
use serde_json::Value;

use crate::graph::{Named, visit_references};
use crate::template::Template;

/// The resources [`resources_depending_on`] found to depend on the parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dependence {
    /// Resources whose properties or condition depend on one of the parameters.
    pub dependent: BTreeSet<String>,
    /// Resources whose dependence could not be decided. Callers must treat them as
    /// dependent (see [`Dependence::may_depend`]).
    pub unknown: BTreeSet<String>,
}

impl Dependence {
    /// True when `id` depends on a parameter or may (its dependence is unknown): the
    /// resource gets no baseline.
    pub fn may_depend(&self, id: &str) -> bool {
        self.dependent.contains(id) || self.unknown.contains(id)
    }

    /// Every resource that depends on a parameter or may, sorted.
    pub fn all(&self) -> BTreeSet<String> {
        self.dependent.union(&self.unknown).cloned().collect()
    }
}

/// The intrinsic functions whose value depends only on what they name (what
/// [`visit_references`] reports): anything else (`Fn::Transform`, the functions of the
/// `AWS::LanguageExtensions` transform, a misspelling) makes a resource's dependence
/// unknown.
const UNDERSTOOD: &[&str] = &[
    "Ref",
    "Fn::Base64",
    "Fn::Cidr",
    "Fn::And",
    "Fn::Equals",
    "Fn::FindInMap",
    "Fn::GetAZs",
    "Fn::GetAtt",
    "Fn::GetStackOutput",
    "Fn::If",
    "Fn::ImportValue",
    "Fn::Join",
    "Fn::Not",
    "Fn::Or",
    "Fn::Select",
    "Fn::Split",
    "Fn::Sub",
];

/// The resources of `template` whose properties depend on any of `params`:
///
/// - through `Ref`, and `Fn::Sub` variables (`${Param}`, in the text or in its variable
///   map's values), anywhere in the properties, both branches of every `Fn::If`;
/// - through a condition: the resource's own `Condition`, or an `Fn::If`'s, that uses
///   one of the parameters, directly or through other conditions (`{"Condition": ...}`);
/// - through another resource that depends on one, read with `Ref`, `Fn::GetAtt` or an
///   `Fn::Sub` variable (`${Res}`, `${Res.Attr}`), transitively.
///
/// `DependsOn` and `Metadata` carry no values and do not count, nor do the template's
/// `Rules` (CDK's `BootstrapVersion` parameter is used only there), nor `Outputs`.
///
/// A resource is in [`Dependence::unknown`] (and not in `dependent`) when the analysis
/// cannot decide: it uses a function not in the understood list (`Fn::Transform`, ...),
/// an `Fn::Sub` whose text does not parse, a `Ref` of an undeclared name, or reads a
/// resource (or a condition) whose dependence is unknown. Every resource is unknown when
/// the template declares transforms: what is deployed is not what the template says.
/// Callers must treat unknown as dependent.
pub fn resources_depending_on(template: &Template, params: &[String]) -> Dependence {
    if params.is_empty() {
        return Dependence::default();
    }
    if !template.transforms.is_empty() {
        return Dependence {
            dependent: BTreeSet::new(),
            unknown: template.resources.keys().cloned().collect(),
        };
    }
    let scan = Scan { template, params };
    let conditions: Vec<Facts> = template
        .conditions
        .values()
        .map(|expr| scan.facts(expr))
        .collect();
    let (cond_dep, cond_unknown) = close(&conditions, |f| &f.conditions, |f| &f.conditions, None);
    let resources: Vec<Facts> = template
        .resources
        .values()
        .map(|r| {
            let mut f = scan.facts(&Value::Object(r.properties.clone()));
            if let Some(c) = &r.condition {
                scan.condition(c, &mut f);
            }
            f
        })
        .collect();
    let known = (&cond_dep, &cond_unknown);
    let (dep, unknown) = close(&resources, |f| &f.resources, |f| &f.conditions, Some(known));
    let ids: Vec<&String> = template.resources.keys().collect();
    let pick = |set: &[bool]| -> BTreeSet<String> {
        ids.iter()
            .zip(set)
            .filter(|(_, on)| **on)
            .map(|(id, _)| (*id).clone())
            .collect()
    };
    Dependence {
        dependent: pick(&dep),
        unknown: pick(&unknown),
    }
}

/// What one node (a condition or a resource) uses directly.
#[derive(Debug, Default)]
struct Facts {
    /// Uses one of the parameters.
    params: bool,
    /// Uses something the analysis does not understand.
    unknown: bool,
    /// The conditions it uses (indexes into the template's conditions).
    conditions: BTreeSet<usize>,
    /// The resources it reads (indexes into the template's resources).
    resources: BTreeSet<usize>,
}

struct Scan<'t> {
    template: &'t Template,
    params: &'t [String],
}

impl Scan<'_> {
    fn facts(&self, v: &Value) -> Facts {
        let mut f = Facts::default();
        visit_references(v, &IndexMap::new(), &mut |named| match named {
            Named::Ref(name) => self.name(name, &mut f),
            Named::SubVariable(name) => match name.split_once('.') {
                Some((res, _)) => self.resource(res, &mut f),
                None => self.name(&name, &mut f),
            },
            Named::GetAtt(res) => self.resource(res, &mut f),
            Named::Condition(c) => {
                // `{"Condition": "x"}` with no condition `x` is data (a property that
                // happens to be called so), not a use of a condition.
                if let Some(i) = self.template.conditions.get_index_of(c) {
                    f.conditions.insert(i);
                }
            }
            Named::Function(func) => f.unknown |= !UNDERSTOOD.contains(&func),
            Named::Unreadable(_) => f.unknown = true,
        });
        f
    }

    /// A `Ref` or an `Fn::Sub` variable without a dot.
    fn name(&self, name: &str, f: &mut Facts) {
        if self.params.iter().any(|p| p == name) {
            f.params = true;
        } else if let Some(i) = self.template.resources.get_index_of(name) {
            f.resources.insert(i);
        } else if !self.template.parameters.contains_key(name) && !name.starts_with("AWS::") {
            f.unknown = true;
        }
    }

    fn resource(&self, name: &str, f: &mut Facts) {
        match self.template.resources.get_index_of(name) {
            Some(i) => {
                f.resources.insert(i);
            }
            None => f.unknown = true,
        }
    }

    fn condition(&self, name: &str, f: &mut Facts) {
        match self.template.conditions.get_index_of(name) {
            Some(i) => {
                f.conditions.insert(i);
            }
            None => f.unknown = true,
        }
    }
}

/// The dependent and unknown flags of `nodes`, closed over the edges `edges` gives
/// (between nodes) and the edges `outer` gives into an already closed set `known`.
fn close(
    nodes: &[Facts],
    edges: impl Fn(&Facts) -> &BTreeSet<usize>,
    outer: impl Fn(&Facts) -> &BTreeSet<usize>,
    known: Option<(&Vec<bool>, &Vec<bool>)>,
) -> (Vec<bool>, Vec<bool>) {
    let outer_flag = |f: &Facts, which: usize| {
        known.is_some_and(|k| {
            let set = if which == 0 { k.0 } else { k.1 };
            outer(f).iter().any(|&i| set[i])
        })
    };
    let mut dep: Vec<bool> = nodes.iter().map(|f| f.params || outer_flag(f, 0)).collect();
    fixpoint(&mut dep, |i, dep| edges(&nodes[i]).iter().any(|&j| dep[j]));
    let mut unknown: Vec<bool> = nodes
        .iter()
        .zip(&dep)
        .map(|(f, d)| !d && (f.unknown || outer_flag(f, 1)))
        .collect();
    fixpoint(&mut unknown, |i, unknown| {
        !dep[i] && edges(&nodes[i]).iter().any(|&j| unknown[j])
    });
    (dep, unknown)
}

/// Sets `flags[i]` wherever `rule(i, flags)` holds, until nothing changes.
fn fixpoint(flags: &mut [bool], rule: impl Fn(usize, &[bool]) -> bool) {
    loop {
        let mut changed = false;
        for i in 0..flags.len() {
            if !flags[i] && rule(i, flags) {
                flags[i] = true;
                changed = true;
            }
        }
        if !changed {
            return;
        }
    }
}
