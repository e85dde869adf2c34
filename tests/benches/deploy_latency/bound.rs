//! The critical-path lower bound of a run, in calls.

use std::collections::{BTreeMap, HashMap};

use stackflow_core::graph::Graph;
use stackflow_core::template::Template;
use stackflow_engine::limits::{GLOBAL_CAP, START};

/// A lower bound, in calls of one latency each.
#[derive(Debug)]
pub(crate) struct Bound {
    /// The longest chain: its calls and its resources, first to last.
    pub(crate) chain: f64,
    pub(crate) path: Vec<String>,
    /// Whether the fixed calls before the first resource are on the chain.
    pub(crate) fixed_on_path: bool,
    /// The calls the limits force one after another (the waves, see `waves`).
    pub(crate) waves: f64,
}

impl Bound {
    pub(crate) fn calls(&self) -> f64 {
        self.chain.max(self.waves)
    }
}

/// The lower bound for `calls` per resource; `fixed` calls are a prerequisite of the
/// resources for which `needs_fixed` holds; `services` names the AWS services of a
/// resource (what the engine limits).
pub(crate) fn bound(
    template: &Template,
    calls: impl Fn(&str) -> u64,
    fixed: u64,
    needs_fixed: impl Fn(&str) -> bool,
    services: &dyn Fn(&str) -> Vec<String>,
) -> Bound {
    let g = Graph::build(template, &Default::default()).expect("the dependency graph");
    let mut finish: HashMap<&str, (f64, Option<&str>, bool)> = HashMap::new();
    for id in g.topological_order() {
        let mut start = (0.0, None, false);
        if needs_fixed(id) && fixed > 0 {
            start = (fixed as f64, None, true);
        }
        for d in g.dependencies(id) {
            let (f, _, _) = finish[d];
            if f > start.0 {
                start = (f, Some(d), finish[d].2);
            }
        }
        finish.insert(id, (start.0 + calls(id) as f64, start.1, start.2));
    }
    let end = finish
        .iter()
        .max_by(|a, b| a.1.0.total_cmp(&b.1.0))
        .map(|(id, v)| (*id, *v));
    let (chain, path, fixed_on_path) = match end {
        None => (0.0, vec![], false),
        Some((id, (total, _, on))) => {
            let mut path = vec![id.to_string()];
            let mut cur = id;
            while let Some(prev) = finish[cur].1 {
                path.push(prev.to_string());
                cur = prev;
            }
            path.reverse();
            (total, path, on)
        }
    };
    // Without fixed calls this is the graph's own critical path.
    if fixed == 0 {
        let (check, _) = g.critical_path(|id| calls(id) as f64);
        assert!((check - chain).abs() < 1e-9, "{check} != {chain}");
    }
    let ids: Vec<String> = g.nodes().iter().map(|id| id.to_string()).collect();
    let waves = waves(&ids, &calls, services);
    Bound {
        chain,
        path,
        fixed_on_path,
        waves,
    }
}

pub(crate) fn uses_get_azs(template: &Template, id: &str) -> bool {
    template.resources.get(id).is_some_and(|r| {
        serde_json::to_string(&r.properties).is_ok_and(|s| s.contains("Fn::GetAZs"))
    })
}

/// The waves the default limits force, in calls: per service, its resources' calls over
/// the limit each service starts at ([`START`]; `k × ceil(n / START)` when each of the
/// `n` makes `k`), and all calls over the global cap ([`GLOBAL_CAP`]).
fn waves(
    ids: &[String],
    calls: &dyn Fn(&str) -> u64,
    services: &dyn Fn(&str) -> Vec<String>,
) -> f64 {
    let over = |per: &[u64], limit: usize| match per.first() {
        Some(&k) if per.iter().all(|&c| c == k) => (k * per.len().div_ceil(limit) as u64) as f64,
        _ => per.iter().sum::<u64>() as f64 / limit as f64,
    };
    let mut by_service: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for id in ids {
        for service in services(id) {
            by_service.entry(service).or_default().push(calls(id));
        }
    }
    let all: Vec<u64> = ids.iter().map(|id| calls(id)).collect();
    by_service
        .values()
        .map(|per| over(per, START))
        .fold(over(&all, GLOBAL_CAP), f64::max)
}
