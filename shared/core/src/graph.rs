//! The dependency graph of a stack's resources.
//!
//! Edges come from `Ref`, `Fn::GetAtt`, `Fn::Sub` variables (`${X}`, `${X.Attr}`, but not
//! the names of its variable map) and `DependsOn`, found anywhere in a resource's
//! Properties or Metadata. The untaken branch of an `Fn::If` adds no edge. Resources whose
//! condition is false are not in the graph.

use std::collections::{BTreeSet, HashMap};

use indexmap::IndexMap;
use serde_json::Value;

use crate::error::{ErrorKind, Path, Result, TemplateError};
use crate::intrinsics::{SubPart, parse_sub};
use crate::template::Template;

/// The resources of a stack and what each one waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Graph {
    nodes: Vec<String>,
    index: HashMap<String, usize>,
    deps: Vec<BTreeSet<usize>>,
    dependents: Vec<BTreeSet<usize>>,
}

/// One thing a template expression names, as [`visit_references`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Named<'v> {
    /// `Ref` of a name: a parameter, a pseudo parameter or a resource.
    Ref(&'v str),
    /// The resource an `Fn::GetAtt` reads.
    GetAtt(&'v str),
    /// A variable of an `Fn::Sub` string that its variable map does not define: `X`
    /// (a parameter, a pseudo parameter or a resource) or `X.Attr`.
    SubVariable(String),
    /// The condition an `Fn::If` tests, or the operand `{"Condition": name}`.
    Condition(&'v str),
    /// An intrinsic function (`Ref`, or a key starting with `Fn::`), whatever its
    /// arguments; reported before what its arguments name.
    Function(&'v str),
    /// An intrinsic function whose arguments could not be read for names: an `Fn::Sub`
    /// whose text does not parse or is not a string, a `Ref` of something not a string.
    Unreadable(&'v str),
}

/// Reports to `visit` everything `v` names (see [`Named`]), walking every object and
/// list. The untaken branch of an `Fn::If` whose condition `conditions` gives is not
/// walked; with an unknown condition both branches are.
pub fn visit_references<'v>(
    v: &'v Value,
    conditions: &IndexMap<String, bool>,
    visit: &mut dyn FnMut(Named<'v>),
) {
    match v {
        Value::Object(m) if m.len() == 1 => {
            let (k, arg) = m.iter().next().expect("one entry");
            if k == "Ref" || k.starts_with("Fn::") {
                visit(Named::Function(k));
            }
            match (k.as_str(), arg) {
                ("Ref", Value::String(name)) => visit(Named::Ref(name)),
                ("Ref", arg) => {
                    visit(Named::Unreadable(k));
                    visit_references(arg, conditions, visit);
                }
                ("Condition", Value::String(name)) => visit(Named::Condition(name)),
                ("Fn::GetAtt", Value::String(s)) => {
                    visit(Named::GetAtt(
                        s.split_once('.').map_or(s.as_str(), |(r, _)| r),
                    ));
                }
                ("Fn::GetAtt", Value::Array(items)) => {
                    if let Some(Value::String(res)) = items.first() {
                        visit(Named::GetAtt(res));
                    }
                    for item in items.iter().skip(1) {
                        visit_references(item, conditions, visit);
                    }
                }
                ("Fn::Sub", arg) => visit_sub(k, arg, conditions, visit),
                ("Fn::If", Value::Array(items)) if items.len() == 3 => {
                    visit_if(items, conditions, visit)
                }
                (_, arg) => visit_references(arg, conditions, visit),
            }
        }
        Value::Object(m) => m
            .values()
            .for_each(|v| visit_references(v, conditions, visit)),
        Value::Array(items) => items
            .iter()
            .for_each(|v| visit_references(v, conditions, visit)),
        _ => {}
    }
}

/// What an `Fn::Sub` names: its variable map's values, and its `${X}` and `${X.Attr}`
/// variables that the variable map does not define.
fn visit_sub<'v>(
    key: &'v str,
    arg: &'v Value,
    conditions: &IndexMap<String, bool>,
    visit: &mut dyn FnMut(Named<'v>),
) {
    let (text, vars) = match arg {
        Value::String(s) => (Some(s.as_str()), None),
        Value::Array(items) if items.len() == 2 => (items[0].as_str(), items[1].as_object()),
        _ => (None, None),
    };
    if let Some(vars) = vars {
        for v in vars.values() {
            visit_references(v, conditions, visit);
        }
    }
    match text.map(parse_sub) {
        Some(Ok(parts)) => {
            for part in parts {
                if let SubPart::Var(name) = part
                    && !vars.is_some_and(|m| m.contains_key(&name))
                {
                    visit(Named::SubVariable(name));
                }
            }
        }
        _ => visit(Named::Unreadable(key)),
    }
}

/// What an `Fn::If` (`[condition, then, else]`) names: its condition, and the taken
/// branch's names, or both branches' when the condition is unknown.
fn visit_if<'v>(
    items: &'v [Value],
    conditions: &IndexMap<String, bool>,
    visit: &mut dyn FnMut(Named<'v>),
) {
    match items[0].as_str() {
        Some(c) => visit(Named::Condition(c)),
        None => visit_references(&items[0], conditions, visit),
    }
    match items[0].as_str().and_then(|c| conditions.get(c)) {
        Some(true) => visit_references(&items[1], conditions, visit),
        Some(false) => visit_references(&items[2], conditions, visit),
        // An unknown condition fails in the resolver; count both branches.
        None => {
            visit_references(&items[1], conditions, visit);
            visit_references(&items[2], conditions, visit);
        }
    }
}

/// Adds to `out` the resources that `v` refers to: with `Ref`, `Fn::GetAtt` and the
/// variables of `Fn::Sub` (see [`visit_references`]).
pub fn references(
    v: &Value,
    template: &Template,
    conditions: &IndexMap<String, bool>,
    out: &mut BTreeSet<String>,
) {
    visit_references(v, conditions, &mut |named| {
        let res = match &named {
            Named::Ref(name) | Named::GetAtt(name) => *name,
            Named::SubVariable(name) => name.split_once('.').map_or(name.as_str(), |(r, _)| r),
            _ => return,
        };
        if template.resources.contains_key(res) {
            out.insert(res.to_string());
        }
    });
}

/// Adds to `out` every `(resource, attribute)` pair that `v` reads with `Fn::GetAtt` or an
/// `Fn::Sub` variable `${Resource.Attribute}` (attribute names given literally).
pub fn attribute_references(v: &Value, out: &mut BTreeSet<(String, String)>) {
    match v {
        Value::Object(m) if m.len() == 1 => {
            let (k, arg) = m.iter().next().expect("one entry");
            match (k.as_str(), arg) {
                ("Fn::GetAtt", Value::String(s)) => {
                    if let Some((r, a)) = s.split_once('.') {
                        out.insert((r.to_string(), a.to_string()));
                    }
                }
                ("Fn::GetAtt", Value::Array(items)) => {
                    if let (Some(Value::String(r)), Some(Value::String(a))) =
                        (items.first(), items.get(1))
                    {
                        out.insert((r.clone(), a.clone()));
                    }
                }
                ("Fn::Sub", arg) => {
                    let (text, vars) = match arg {
                        Value::String(s) => (Some(s.as_str()), None),
                        Value::Array(items) if items.len() == 2 => {
                            (items[0].as_str(), items[1].as_object())
                        }
                        _ => (None, None),
                    };
                    if let Some(vars) = vars {
                        for v in vars.values() {
                            attribute_references(v, out);
                        }
                    }
                    if let Some(Ok(parts)) = text.map(parse_sub) {
                        for part in parts {
                            if let SubPart::Var(name) = part
                                && !vars.is_some_and(|m| m.contains_key(&name))
                                && let Some((r, a)) = name.split_once('.')
                            {
                                out.insert((r.to_string(), a.to_string()));
                            }
                        }
                    }
                }
                (_, arg) => attribute_references(arg, out),
            }
        }
        Value::Object(m) => m.values().for_each(|v| attribute_references(v, out)),
        Value::Array(items) => items.iter().for_each(|v| attribute_references(v, out)),
        _ => {}
    }
}

/// True when the resource exists under the evaluated conditions.
pub fn is_active(template: &Template, conditions: &IndexMap<String, bool>, id: &str) -> bool {
    template.resources.get(id).is_some_and(|r| {
        r.ty != CDK_METADATA
            && r.condition
                .as_ref()
                .is_none_or(|c| conditions.get(c).copied().unwrap_or(true))
    })
}

/// The type of the `CDKMetadata` resource the AWS CDK adds to every stack (version
/// analytics that CloudFormation itself consumes): there is nothing to deploy, so it is
/// never planned, as if its condition were false. No API serves the type (Cloud Control
/// does not know it).
pub const CDK_METADATA: &str = "AWS::CDK::Metadata";

impl Graph {
    /// Builds the graph of the resources whose condition holds. A cycle is an error that
    /// names it.
    pub fn build(template: &Template, conditions: &IndexMap<String, bool>) -> Result<Graph> {
        let nodes: Vec<String> = template
            .resources
            .keys()
            .filter(|id| is_active(template, conditions, id))
            .cloned()
            .collect();
        let index: HashMap<String, usize> = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.clone(), i))
            .collect();
        let mut deps = vec![BTreeSet::new(); nodes.len()];
        for (i, id) in nodes.iter().enumerate() {
            let r = &template.resources[id];
            let mut refs = BTreeSet::new();
            for v in r.properties.values() {
                references(v, template, conditions, &mut refs);
            }
            if let Some(m) = &r.metadata {
                references(m, template, conditions, &mut refs);
            }
            refs.extend(r.depends_on.iter().cloned());
            for dep in refs {
                if dep == *id {
                    return Err(TemplateError::new(
                        ErrorKind::Cycle,
                        Path::from_keys(["Resources", id]),
                        format!("`{id}` refers to itself"),
                    ));
                }
                // References to resources whose condition is false are reported by the
                // resolver, with the condition's name.
                if let Some(&j) = index.get(&dep) {
                    deps[i].insert(j);
                }
            }
        }
        let mut dependents = vec![BTreeSet::new(); nodes.len()];
        for (i, ds) in deps.iter().enumerate() {
            for &j in ds {
                dependents[j].insert(i);
            }
        }
        let g = Graph {
            nodes,
            index,
            deps,
            dependents,
        };
        g.check_cycles()?;
        Ok(g)
    }

    fn check_cycles(&self) -> Result<()> {
        // 0 = unvisited, 1 = on the stack, 2 = done.
        let mut state = vec![0u8; self.nodes.len()];
        let mut stack: Vec<usize> = Vec::new();
        for start in 0..self.nodes.len() {
            if state[start] != 0 {
                continue;
            }
            // Iterative DFS keeping, per frame, the dependencies still to visit.
            let mut frames: Vec<(usize, Vec<usize>)> =
                vec![(start, self.deps[start].iter().copied().collect())];
            state[start] = 1;
            stack.push(start);
            while let Some((node, pending)) = frames.last_mut() {
                if let Some(next) = pending.pop() {
                    match state[next] {
                        0 => {
                            state[next] = 1;
                            stack.push(next);
                            frames.push((next, self.deps[next].iter().copied().collect()));
                        }
                        1 => {
                            let from = stack.iter().position(|&n| n == next).unwrap_or(0);
                            let mut names: Vec<&str> = stack[from..]
                                .iter()
                                .map(|&n| self.nodes[n].as_str())
                                .collect();
                            names.push(&self.nodes[next]);
                            return Err(TemplateError::new(
                                ErrorKind::Cycle,
                                Path::from_keys(["Resources", &self.nodes[next]]),
                                format!(
                                    "resources depend on each other in a circle: {}",
                                    names.join(" -> ")
                                ),
                            )
                            .with_hint("remove one of the references or DependsOn entries"));
                        }
                        _ => {}
                    }
                } else {
                    state[*node] = 2;
                    stack.pop();
                    frames.pop();
                }
            }
        }
        Ok(())
    }

    /// The resources in the graph, in template order.
    pub fn nodes(&self) -> &[String] {
        &self.nodes
    }

    /// True when the resource is in the graph.
    pub fn contains(&self, id: &str) -> bool {
        self.index.contains_key(id)
    }

    /// The resources `id` waits for.
    pub fn dependencies(&self, id: &str) -> Vec<&str> {
        self.index.get(id).map_or_else(Vec::new, |&i| {
            self.deps[i]
                .iter()
                .map(|&j| self.nodes[j].as_str())
                .collect()
        })
    }

    /// The resources that wait for `id`.
    pub fn dependents(&self, id: &str) -> Vec<&str> {
        self.index.get(id).map_or_else(Vec::new, |&i| {
            self.dependents[i]
                .iter()
                .map(|&j| self.nodes[j].as_str())
                .collect()
        })
    }

    /// The number of edges.
    pub fn edge_count(&self) -> usize {
        self.deps.iter().map(BTreeSet::len).sum()
    }

    /// Every resource after the ones it depends on; ties keep template order.
    pub fn topological_order(&self) -> Vec<&str> {
        let mut remaining: Vec<usize> = self.deps.iter().map(BTreeSet::len).collect();
        let mut ready: BTreeSet<usize> = (0..self.nodes.len())
            .filter(|&i| remaining[i] == 0)
            .collect();
        let mut out = Vec::with_capacity(self.nodes.len());
        while let Some(i) = ready.pop_first() {
            out.push(self.nodes[i].as_str());
            for &d in &self.dependents[i] {
                remaining[d] -= 1;
                if remaining[d] == 0 {
                    ready.insert(d);
                }
            }
        }
        out
    }

    /// The longest chain of dependencies, counted in resources (1 for a stack without
    /// edges, 0 for an empty one).
    pub fn depth(&self) -> usize {
        self.critical_path(|_| 1.0).1.len()
    }

    /// The critical path for the given per-resource durations: its total duration and the
    /// resources on it, first to last. It is the lower bound of a deploy's wall time with
    /// unlimited concurrency.
    pub fn critical_path(&self, duration: impl Fn(&str) -> f64) -> (f64, Vec<String>) {
        let mut finish = vec![0.0f64; self.nodes.len()];
        let mut via: Vec<Option<usize>> = vec![None; self.nodes.len()];
        for id in self.topological_order() {
            let i = self.index[id];
            let (start, from) = self.deps[i]
                .iter()
                .map(|&j| (finish[j], Some(j)))
                .fold((0.0, None), |a, b| if b.0 > a.0 { b } else { a });
            finish[i] = start + duration(id);
            via[i] = from;
        }
        let Some(end) = (0..self.nodes.len()).max_by(|&a, &b| finish[a].total_cmp(&finish[b]))
        else {
            return (0.0, vec![]);
        };
        let mut path = vec![self.nodes[end].clone()];
        let mut cur = end;
        while let Some(prev) = via[cur] {
            path.push(self.nodes[prev].clone());
            cur = prev;
        }
        path.reverse();
        (finish[end], path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn graph(v: Value) -> Result<Graph> {
        let t = Template::from_value(&v).unwrap();
        let conditions: IndexMap<String, bool> = t
            .conditions
            .iter()
            .map(|(k, v)| (k.clone(), v.as_bool().unwrap_or(true)))
            .collect();
        Graph::build(&t, &conditions)
    }

    #[test]
    fn edges_from_every_kind_of_reference() {
        let g = graph(json!({
            "Conditions": {"Yes": true, "No": false},
            "Resources": {
                "A": {"Type": "T"},
                "B": {"Type": "T", "Properties": {"X": {"Ref": "A"}}},
                "C": {"Type": "T", "Properties": {"X": {"Fn::GetAtt": ["B", "Arn"]}, "Y": {"Fn::GetAtt": "A.Arn"}}},
                "D": {"Type": "T", "Properties": {"X": {"Fn::Sub": "${A}-${C.Arn}-${AWS::Region}-${!B}"}}},
                "E": {"Type": "T", "Properties": {"X": {"Fn::Sub": ["${A}-${V}", {"V": {"Ref": "B"}}]}}},
                "F": {"Type": "T", "DependsOn": ["A", "A"], "Metadata": {"m": {"Ref": "C"}}},
                "G": {"Type": "T", "Properties": {"X": {"Fn::If": ["Yes", {"Ref": "A"}, {"Ref": "B"}]}}},
                "H": {"Type": "T", "Condition": "No"},
                "I": {"Type": "T", "Properties": {"X": {"Fn::Sub": ["${H}", {"H": "literal"}]}}}
            }
        }))
        .unwrap();
        assert_eq!(g.dependencies("A"), Vec::<&str>::new());
        assert_eq!(g.dependencies("B"), vec!["A"]);
        assert_eq!(g.dependencies("C"), vec!["A", "B"]);
        assert_eq!(g.dependencies("D"), vec!["A", "C"]);
        assert_eq!(g.dependencies("E"), vec!["A", "B"]);
        assert_eq!(g.dependencies("F"), vec!["A", "C"]);
        assert_eq!(g.dependencies("G"), vec!["A"]);
        assert!(!g.contains("H"));
        assert_eq!(g.dependencies("I"), Vec::<&str>::new());
        assert_eq!(g.dependents("A"), vec!["B", "C", "D", "E", "F", "G"]);
        let order = g.topological_order();
        assert_eq!(order.len(), 8);
        let pos = |n: &str| order.iter().position(|x| *x == n).unwrap();
        assert!(pos("A") < pos("B") && pos("B") < pos("C") && pos("C") < pos("D"));
    }

    #[test]
    fn the_visitor_reports_every_name() {
        let v = json!({
            "A": {"Ref": "P"},
            "B": {"Fn::GetAtt": ["R", {"Ref": "Attr"}]},
            "C": {"Fn::Sub": ["${X}-${R.Arn}-${!Lit}-${V}", {"V": {"Ref": "Q"}}]},
            "D": {"Fn::If": ["Cond", {"Ref": "Then"}, {"Ref": "Else"}]},
            "E": {"Fn::Not": [{"Condition": "Other"}]},
            "F": {"Fn::Transform": {"Name": "M"}},
            "G": {"Fn::Sub": "${unclosed"},
            "H": {"Ref": ["odd"]}
        });
        let mut seen = Vec::new();
        visit_references(&v, &IndexMap::new(), &mut |n| seen.push(n));
        let want = [
            Named::Function("Ref"),
            Named::Ref("P"),
            Named::Function("Fn::GetAtt"),
            Named::GetAtt("R"),
            Named::Function("Ref"),
            Named::Ref("Attr"),
            Named::Function("Fn::Sub"),
            Named::Function("Ref"),
            Named::Ref("Q"),
            Named::SubVariable("X".into()),
            Named::SubVariable("R.Arn".into()),
            Named::Function("Fn::If"),
            Named::Condition("Cond"),
            Named::Function("Ref"),
            Named::Ref("Then"),
            Named::Function("Ref"),
            Named::Ref("Else"),
            Named::Function("Fn::Not"),
            Named::Condition("Other"),
            Named::Function("Fn::Transform"),
            Named::Function("Fn::Sub"),
            Named::Unreadable("Fn::Sub"),
            Named::Function("Ref"),
            Named::Unreadable("Ref"),
        ];
        assert_eq!(seen, want);
        // A known condition walks only the taken branch.
        let mut taken = Vec::new();
        let known: IndexMap<String, bool> = [("Cond".to_string(), false)].into_iter().collect();
        visit_references(&v["D"], &known, &mut |n| taken.push(n));
        assert!(taken.contains(&Named::Ref("Else")));
        assert!(!taken.contains(&Named::Ref("Then")));
    }

    #[test]
    fn a_cycle_is_named() {
        let e = graph(json!({"Resources": {
            "A": {"Type": "T", "Properties": {"X": {"Ref": "C"}}},
            "B": {"Type": "T", "Properties": {"X": {"Ref": "A"}}},
            "C": {"Type": "T", "DependsOn": "B"},
            "D": {"Type": "T"}
        }}))
        .unwrap_err();
        assert_eq!(e.kind, ErrorKind::Cycle);
        assert!(
            ["A -> C -> B -> A", "C -> B -> A -> C", "B -> A -> C -> B"]
                .iter()
                .any(|c| e.message.contains(c)),
            "{e}"
        );
        let e =
            graph(json!({"Resources": {"A": {"Type": "T", "Properties": {"X": {"Ref": "A"}}}}}))
                .unwrap_err();
        assert!(e.message.contains("refers to itself"));
    }

    #[test]
    fn critical_path_with_durations() {
        let g = graph(json!({"Resources": {
            "A": {"Type": "T"},
            "B": {"Type": "T", "DependsOn": "A"},
            "C": {"Type": "T", "DependsOn": "A"},
            "D": {"Type": "T", "DependsOn": ["B", "C"]}
        }}))
        .unwrap();
        let (t, path) = g.critical_path(|id| if id == "C" { 5.0 } else { 1.0 });
        assert_eq!(t, 7.0);
        assert_eq!(path, vec!["A", "C", "D"]);
        assert_eq!(g.depth(), 3);
        assert_eq!(g.edge_count(), 4);
    }

    proptest! {
        /// Random DAGs (edges only from later to earlier resources): the order puts every
        /// resource after its dependencies, and the critical path is a real chain.
        #[test]
        fn topological_order_respects_every_edge(edges in proptest::collection::vec((0usize..30, 0usize..30), 0..80)) {
            let mut resources = serde_json::Map::new();
            for i in 0..30 {
                let deps: Vec<String> = edges.iter()
                    .filter(|(a, b)| *a == i && *b < i)
                    .map(|(_, b)| format!("R{b}"))
                    .collect();
                resources.insert(format!("R{i}"), json!({"Type": "T", "DependsOn": deps}));
            }
            let g = graph(json!({"Resources": resources})).unwrap();
            let order = g.topological_order();
            prop_assert_eq!(order.len(), 30);
            let pos: HashMap<&str, usize> = order.iter().enumerate().map(|(i, n)| (*n, i)).collect();
            for n in g.nodes() {
                for d in g.dependencies(n) {
                    prop_assert!(pos[d] < pos[n.as_str()]);
                }
            }
            let (len, path) = g.critical_path(|_| 1.0);
            prop_assert_eq!(len as usize, path.len());
            for w in path.windows(2) {
                prop_assert!(g.dependencies(&w[1]).contains(&w[0].as_str()));
            }
        }
    }
}
