//! `stackflow events --stack S --html FILE`: the stack's last run drawn from its log, one
//! bar per resource action from its first intent to its outcome, in start order. The
//! critical path (the chain of dependencies that ended last) is marked, a failed action is
//! red, an action with no outcome is grey, and an action sent more than once says how many
//! times.
//!
//! "Ended last" is by the millisecond the log gives, then the earlier start, then the
//! smaller logical id.
//!
//! The drawing is plain SVG with a fixed geometry, so a test can find each bar from the
//! log alone: a bar's row is its index in start order (on the same millisecond, the
//! log's order); its left edge is
//! `LEFT + (start - t0) / (t1 - t0) * PLOT` and its width at least 2 px, where `t0` is the
//! run's `DeployStarted` and `t1` its last event; its box is `BAR` px high, `TOP + row *
//! ROW + 5` from the top.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::time::SystemTime;

use stackflow_events::event::{Event, StoredEvent};

/// The label column's width.
pub const LEFT: f64 = 280.0;
/// The time axis's width.
pub const PLOT: f64 = 800.0;
/// The header's height.
pub const TOP: f64 = 60.0;
/// A row's height.
pub const ROW: f64 = 28.0;
/// A bar's height.
pub const BAR: f64 = 18.0;
/// An action that ended well.
pub const DONE: &str = "#3b6ea8";
/// An action on the critical path.
pub const CRITICAL: &str = "#e08a00";
/// A failed action.
pub const FAILED: &str = "#c62828";
/// An action with no outcome in the log.
pub const OPEN: &str = "#9e9e9e";

/// One resource action of the run.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub logical_id: String,
    /// `create`, `update`, `delete`, ...
    pub operation: String,
    /// Milliseconds after the run's start.
    pub start: u64,
    pub end: Option<u64>,
    pub failed: bool,
    /// How many intents the action wrote (more than one: it was sent again).
    pub intents: usize,
    pub critical: bool,
}

fn millis(at: &str) -> Option<u64> {
    let t = humantime::parse_rfc3339(at).ok()?;
    t.duration_since(SystemTime::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_millis() as u64)
}

/// Why a log cannot be drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NoRun {
    #[error("the log has no deploy to draw")]
    NoDeploy,
    #[error("a time in the log is not RFC 3339")]
    BadTime,
}

/// The bars of the stack's last run in `events` and the run's length in milliseconds;
/// `Err` when the log has no run.
pub fn bars(events: &[StoredEvent]) -> Result<(String, Vec<Bar>, u64), NoRun> {
    let (start_at, run) = events
        .iter()
        .rev()
        .find_map(|e| match &e.event {
            Event::DeployStarted { deploy_id, .. } => Some((e.at.clone(), deploy_id.clone())),
            _ => None,
        })
        .ok_or(NoRun::NoDeploy)?;
    let t0 = millis(&start_at).ok_or(NoRun::BadTime)?;
    let mut bars: Vec<Bar> = Vec::new();
    let mut dependencies: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut last = t0;
    let find = |bars: &mut Vec<Bar>, id: &str| bars.iter().rposition(|b| b.logical_id == id);
    for e in events.iter().skip_while(|e| e.at != start_at) {
        let Some(at) = millis(&e.at) else { continue };
        let at_run = |deploy: &str| deploy == run;
        let t = at.saturating_sub(t0);
        match &e.event {
            Event::ResourceIntent {
                deploy_id,
                logical_id,
                operation,
                ..
            } if at_run(deploy_id) => {
                let operation = format!("{operation:?}").to_lowercase();
                match find(&mut bars, logical_id) {
                    Some(i) if bars[i].end.is_none() && bars[i].operation == operation => {
                        bars[i].intents += 1;
                    }
                    _ => bars.push(Bar {
                        logical_id: logical_id.clone(),
                        operation,
                        start: t,
                        end: None,
                        failed: false,
                        intents: 1,
                        critical: false,
                    }),
                }
            }
            Event::ResourceCreated {
                deploy_id,
                resource,
                ..
            }
            | Event::ResourceUpdated {
                deploy_id,
                resource,
                ..
            } if at_run(deploy_id) => {
                dependencies.insert(resource.logical_id.clone(), resource.dependencies.clone());
                if let Some(i) = find(&mut bars, &resource.logical_id) {
                    bars[i].end = Some(t);
                }
            }
            Event::ResourceDeleted {
                deploy_id,
                logical_id,
                ..
            }
            | Event::ResourceRetained {
                deploy_id,
                logical_id,
                ..
            }
            | Event::ResourceSkipped {
                deploy_id,
                logical_id,
                ..
            } if at_run(deploy_id) => {
                if let Some(i) = find(&mut bars, logical_id) {
                    bars[i].end.get_or_insert(t);
                }
            }
            Event::ResourceFailed {
                deploy_id,
                logical_id,
                ..
            } if at_run(deploy_id) => {
                if let Some(i) = find(&mut bars, logical_id) {
                    bars[i].end = Some(t);
                    bars[i].failed = true;
                }
            }
            _ => {}
        }
        last = last.max(at);
    }
    mark_critical(&mut bars, &dependencies);
    bars.sort_by_key(|b| b.start);
    Ok((run, bars, last - t0))
}

/// The order "ended last" goes by: the later end, then (on the same millisecond) the
/// earlier start, then the smaller logical id.
fn last_key(b: &Bar) -> (Option<u64>, Reverse<u64>, Reverse<&str>) {
    (b.end, Reverse(b.start), Reverse(b.logical_id.as_str()))
}

/// Marks the chain that ended last: the action that ended last, then, among the
/// resources it depends on, the one that ended last, and so on ([`last_key`]).
fn mark_critical(bars: &mut [Bar], dependencies: &BTreeMap<String, Vec<String>>) {
    let mut seen = BTreeSet::new();
    let mut current = bars
        .iter()
        .filter(|b| !b.failed && b.end.is_some())
        .max_by_key(|b| last_key(b))
        .map(|b| b.logical_id.clone());
    while let Some(id) = current.take() {
        if !seen.insert(id.clone()) {
            break;
        }
        for b in bars.iter_mut().filter(|b| b.logical_id == id && !b.failed) {
            b.critical = true;
        }
        let wanted: Vec<&String> = dependencies.get(&id).into_iter().flatten().collect();
        current = bars
            .iter()
            .filter(|b| b.end.is_some() && wanted.contains(&&b.logical_id))
            .max_by_key(|b| last_key(b))
            .map(|b| b.logical_id.clone());
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The page for stack `stack`'s last run in `events`.
pub fn html(stack: &str, events: &[StoredEvent]) -> Result<String, NoRun> {
    let (run, bars, length) = bars(events)?;
    let span = length.max(1) as f64;
    let width = LEFT + PLOT + 20.0;
    let height = TOP + ROW * bars.len() as f64 + 20.0;
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = write!(
        svg,
        r#"<text x="8" y="22" font-size="15">{} · deploy {} · {:.1} s</text><text x="8" y="44" fill="{CRITICAL}">critical path</text><text x="100" y="44" fill="{FAILED}">failed</text><text x="160" y="44" fill="{OPEN}">no outcome</text>"#,
        escape(stack),
        escape(&run),
        length as f64 / 1000.0
    );
    for (row, b) in bars.iter().enumerate() {
        let y = TOP + row as f64 * ROW;
        let end = b.end.unwrap_or(length);
        let x = LEFT + b.start as f64 / span * PLOT;
        let w = ((end.saturating_sub(b.start)) as f64 / span * PLOT).max(2.0);
        let fill = match (b.failed, b.end, b.critical) {
            (true, _, _) => FAILED,
            (_, None, _) => OPEN,
            (_, _, true) => CRITICAL,
            _ => DONE,
        };
        let again = if b.intents > 1 {
            format!(" ×{} sent", b.intents)
        } else {
            String::new()
        };
        let _ = write!(
            svg,
            r#"<text x="8" y="{ty}">{id} {op}{again}</text><rect x="{x:.2}" y="{by}" width="{w:.2}" height="{BAR}" fill="{fill}"><title>{id} {op}: {s} to {e} ms</title></rect>"#,
            ty = y + 18.0,
            id = escape(&b.logical_id),
            op = b.operation,
            by = y + 5.0,
            s = b.start,
            e = end,
        );
    }
    svg.push_str("</svg>");
    Ok(format!(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{} timeline</title>\
         <style>html,body{{margin:0;background:#fff}}</style></head><body>{svg}</body></html>\n",
        escape(stack)
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn stored(seq: u64, ms: u64, event: serde_json::Value) -> StoredEvent {
        let at = humantime::format_rfc3339_millis(
            SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(1_700_000_000_000 + ms),
        )
        .to_string();
        StoredEvent {
            seq,
            key: format!("k{seq}"),
            at,
            v: 1,
            event: serde_json::from_value(event).unwrap(),
        }
    }

    fn intent(id: &str) -> serde_json::Value {
        json!({"type": "ResourceIntent", "deploy_id": "d2", "logical_id": id,
               "resource_type": "AWS::SNS::Topic", "operation": "create", "token": "t",
               "provider": "sdk", "physical_id": null})
    }

    fn created(id: &str, deps: &[&str]) -> serde_json::Value {
        json!({"type": "ResourceCreated", "deploy_id": "d2", "replaces": null, "baseline": null,
               "resource": {"logical_id": id, "type": "AWS::SNS::Topic",
                            "physical_id": format!("p-{id}"), "properties": {},
                            "dependencies": deps, "provider": "sdk"}})
    }

    fn log() -> Vec<StoredEvent> {
        let started = |d: &str| {
            json!({"type": "DeployStarted", "deploy_id": d, "who": "me", "template_digest": "x",
                   "parameters": {}, "no_rollback": false})
        };
        vec![
            stored(1, 0, started("d1")),
            stored(2, 10, intent("Old")),
            stored(3, 100_000, started("d2")),
            stored(4, 100_000, intent("A")),
            stored(5, 100_010, intent("Side")),
            stored(6, 100_200, created("A", &[])),
            stored(7, 100_210, intent("B")),
            stored(8, 100_250, created("Side", &[])),
            stored(9, 100_260, intent("B")),
            stored(10, 100_600, created("B", &["A"])),
            stored(11, 100_610, intent("Broken")),
            stored(
                12,
                100_700,
                json!({"type": "ResourceFailed", "deploy_id": "d2",
                "logical_id": "Broken", "operation": "create",
                "error": {"name": "X", "message": "no"}}),
            ),
            stored(13, 100_700, intent("Pending")),
            stored(
                14,
                101_000,
                json!({"type": "DeployCompleted", "deploy_id": "d2",
                "outputs": {}, "exports": {}}),
            ),
        ]
    }

    #[test]
    fn the_last_run_is_drawn_with_its_critical_path_failures_and_retries() {
        let (run, bars, length) = bars(&log()).unwrap();
        assert_eq!(run, "d2");
        assert_eq!(length, 1000);
        let by = |id: &str| bars.iter().find(|b| b.logical_id == id).unwrap();
        assert!(
            bars.iter().all(|b| b.logical_id != "Old"),
            "only the last run"
        );
        assert_eq!((by("A").start, by("A").end), (0, Some(200)));
        assert_eq!(
            (by("B").start, by("B").end, by("B").intents),
            (210, Some(600), 2)
        );
        assert!(
            by("A").critical && by("B").critical,
            "B ended last, after A"
        );
        assert!(!by("Side").critical);
        assert!(by("Broken").failed && !by("Broken").critical);
        assert_eq!(by("Pending").end, None);
        let order: Vec<&str> = bars.iter().map(|b| b.logical_id.as_str()).collect();
        assert_eq!(order, ["A", "Side", "B", "Broken", "Pending"]);
    }

    #[test]
    fn the_page_places_each_bar_by_the_documented_geometry() {
        let page = html("App<1>", &log()).unwrap();
        assert!(page.contains("App&lt;1&gt;"), "escaped");
        // B: row 2, 210..600 ms of 1,000.
        let x = LEFT + 0.21 * PLOT;
        let y = TOP + 2.0 * ROW + 5.0;
        let w = 0.39 * PLOT;
        assert!(
            page.contains(&format!(
                r#"<rect x="{x:.2}" y="{y}" width="{w:.2}" height="{BAR}" fill="{CRITICAL}">"#
            )),
            "{page}"
        );
        assert!(page.contains("B create ×2 sent"));
        assert!(page.contains(&format!(r#"fill="{FAILED}""#)));
        assert!(page.contains(&format!(r#"fill="{OPEN}""#)));
        assert!(html("S", &[]).is_err());
    }
}
