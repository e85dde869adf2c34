//! What the bench prints per case.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use stackflow_core::template::StackTemplate;
use stackflow_tests::latency::RequestRecord;

use crate::Row;
use crate::spans::{Attributed, Calls, Span};

/// Counts of each label, `A×2, B`.
pub(crate) fn summarize(labels: &[String]) -> String {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for l in labels {
        let short = l.rsplit('.').next().unwrap_or(l).to_string();
        match counts.iter_mut().find(|(x, _)| *x == short) {
            Some((_, n)) => *n += 1,
            None => counts.push((short, 1)),
        }
    }
    counts
        .into_iter()
        .map(|(l, n)| if n > 1 { format!("{l}×{n}") } else { l })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Per type: the range of create and delete calls, and the calls of one example.
pub(crate) fn print_calls(stack: &StackTemplate, calls: &Calls) {
    let mut by_type: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (id, r) in &stack.template.resources {
        by_type.entry(r.ty.as_str()).or_default().push(id.as_str());
    }
    for (ty, ids) in by_type {
        let range = |f: &dyn Fn(&str) -> u64| {
            let v: Vec<u64> = ids.iter().map(|id| f(id)).collect();
            let (lo, hi) = (v.iter().min().copied(), v.iter().max().copied());
            match (lo, hi) {
                (Some(lo), Some(hi)) if lo != hi => format!("{lo}-{hi}"),
                (Some(lo), _) => lo.to_string(),
                _ => "-".into(),
            }
        };
        let example = ids[0];
        println!(
            "    {ty:<36} ×{:<3} create {:<4} [{}]  delete {:<4} [{}]",
            ids.len(),
            range(&|id| calls.create(id)),
            summarize(
                calls
                    .create
                    .per_resource
                    .get(example)
                    .map_or(&[][..], |v| v)
            ),
            range(&|id| calls.delete(id)),
            summarize(
                calls
                    .delete
                    .per_resource
                    .get(example)
                    .map_or(&[][..], |v| v)
            ),
        );
    }
    let fixed = |a: &Attributed, what: &str| {
        if !a.before.is_empty() || !a.outside.is_empty() {
            println!(
                "    {what}: {} calls before the first resource [{}], {} outside any resource [{}]",
                a.before.len(),
                summarize(&a.before),
                a.outside.len(),
                summarize(&a.outside)
            );
        }
    };
    fixed(&calls.create, "deploy");
    fixed(&calls.delete, "destroy");
}

/// Where the time of a timed run went: before the first resource, after the last, the
/// mean action per type, the mean concurrency, and the gaps along the bound's path.
pub(crate) fn print_breakdown(
    what: &str,
    started: Instant,
    wall: Duration,
    spans: &[Span],
    path: &[String],
    latency: Duration,
    calls: impl Fn(&str) -> u64,
) {
    if spans.is_empty() {
        return;
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let first = spans.iter().map(|s| s.start).min().unwrap_or(started);
    let last = spans.iter().filter_map(|s| s.end).max().unwrap_or(started);
    let busy: f64 = spans
        .iter()
        .filter_map(|s| s.end.map(|e| ms(e - s.start)))
        .sum();
    println!(
        "    {what}: {:.0} ms before the first resource, {:.0} ms after the last; mean concurrency {:.1}",
        ms(first - started),
        ms((started + wall).saturating_duration_since(last)),
        busy / ms(last - first).max(1e-9),
    );
    let mut by_type: BTreeMap<&str, (f64, f64, usize)> = BTreeMap::new();
    for s in spans {
        if let Some(e) = s.end {
            let x = by_type.entry(s.ty.as_str()).or_default();
            x.0 += ms(e - s.start);
            x.1 += calls(&s.id) as f64 * ms(latency);
            x.2 += 1;
        }
    }
    for (ty, (total, ideal, n)) in by_type {
        println!(
            "      {ty:<36} mean action {:>6.0} ms (calls × latency {:>5.0} ms)",
            total / n as f64,
            ideal / n as f64
        );
    }
    if path.len() > 1 {
        let by_id: HashMap<&str, &Span> = spans.iter().map(|s| (s.id.as_str(), s)).collect();
        let mut gaps = 0.0;
        let mut actions = 0.0;
        let mut prev_end: Option<Instant> = None;
        for id in path {
            let Some(s) = by_id.get(id.as_str()) else {
                continue;
            };
            if let Some(p) = prev_end {
                gaps += ms(s.start.saturating_duration_since(p));
            }
            if let Some(e) = s.end {
                actions += ms(e - s.start);
                prev_end = Some(e);
            }
        }
        println!(
            "      along the bound's chain of {} resources: {:.0} ms in actions, {:.0} ms between one's end and the next's start",
            path.len(),
            actions,
            gaps
        );
    }
}

/// Requests per operation in a run, most first.
pub(crate) fn print_operations(log: &[RequestRecord]) {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for r in log {
        *counts.entry(r.label.as_str()).or_default() += 1;
    }
    let mut v: Vec<(&str, usize)> = counts.into_iter().collect();
    v.sort_by_key(|x| std::cmp::Reverse(x.1));
    let text: Vec<String> = v.iter().map(|(l, n)| format!("{l} {n}")).collect();
    println!("    deploy requests by operation: {}", text.join(", "));
}

/// The summary: each case's wall times against its bounds, in seconds and in calls.
pub(crate) fn print_table(rows: &[Row], latency: Duration) {
    let latency_ms = latency.as_millis();
    let secs = |calls: f64| calls * latency.as_secs_f64();
    println!(
        "\n{:<16} {:>5} {:>8} {:>8} {:>6} {:>9} {:>8} {:>6} {:>13} {:>16} {:>14}",
        "case",
        "res",
        "deploy s",
        "bound s",
        "ratio",
        "destroy s",
        "bound s",
        "ratio",
        "latencies d/x",
        "requests dep/des",
        "at 0 ms dep/des"
    );
    let in_calls = |d: Duration| d.as_secs_f64() / latency.as_secs_f64();
    for r in rows {
        let db = secs(r.deploy_bound.calls());
        let xb = secs(r.destroy_bound.calls());
        let invalid = if r.run.problem.is_some() {
            "  INVALID"
        } else {
            ""
        };
        println!(
            "{:<16} {:>5} {:>8.2} {:>8.2} {:>5.2}x {:>9.2} {:>8.2} {:>5.2}x {:>13} {:>16} {:>14}{invalid}",
            r.case,
            r.resources,
            r.run.deploy.as_secs_f64(),
            db,
            r.run.deploy.as_secs_f64() / db,
            r.run.destroy.as_secs_f64(),
            xb,
            r.run.destroy.as_secs_f64() / xb,
            format!(
                "{:.1}/{:.1}",
                in_calls(r.run.deploy),
                in_calls(r.run.destroy)
            ),
            format!("{}/{}", r.run.deploy_requests, r.run.destroy_requests),
            r.zero.as_ref().map_or("-".into(), |z| format!(
                "{:.2}/{:.2}",
                z.deploy.as_secs_f64(),
                z.destroy.as_secs_f64()
            )),
        );
    }
    println!("\nbounds, in calls of {latency_ms} ms (max of the longest chain and the waves):");
    for r in rows {
        let d = &r.deploy_bound;
        let x = &r.destroy_bound;
        println!(
            "  {:<16} deploy: chain {} over {} resources{}, waves {:.1}; destroy: chain {} over {} resources, waves {:.1}",
            r.case,
            d.chain,
            d.path.len(),
            if d.fixed_on_path {
                " (fixed calls included)"
            } else {
                ""
            },
            d.waves,
            x.chain,
            x.path.len(),
            x.waves
        );
    }
}
