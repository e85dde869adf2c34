//! Progress of a run, as a person reads it: a line per finished resource on stderr, and
//! on a terminal a live view below them: a count, then a line per running resource (the
//! longest running first, each with its type, action and time so far; at most
//! [`LIVE_ROWS`], then how many more), every line cut to the terminal's width (else
//! `COLUMNS`, else 80) and redrawn each second. Elsewhere (a CI log, a pipe, `TERM=dumb`)
//! a plain line says what is still running whenever nothing was printed for
//! [`HEARTBEAT`]. No color is ever printed, so `NO_COLOR` holds by construction.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indexmap::IndexMap;
use stackflow_engine::progress::{Progress, ProgressEvent};

/// Prints progress: a line per finished resource, and on a terminal a live line of what
/// is running.
pub struct Printer {
    live: bool,
    verbose: u8,
    inner: Mutex<PrinterState>,
}

/// How long a log may stay silent while resources run before a plain line says which.
pub const HEARTBEAT: Duration = Duration::from_secs(30);

/// The most running resources the live view lists, one a line.
pub const LIVE_ROWS: usize = 8;

/// A running resource: when it started, its type and its action.
struct Running {
    since: Instant,
    resource_type: String,
    action: String,
}

struct PrinterState {
    /// Per stack (nested stacks run inside their parent's deploy): actions, finished.
    counts: IndexMap<String, (usize, usize)>,
    /// What runs, by logical id.
    running: IndexMap<String, Running>,
    /// How many lines of the live view are on the terminal now.
    shown_live: usize,
    /// When a line was last printed.
    printed: Instant,
}

impl Printer {
    pub fn new(verbose: u8) -> Printer {
        let dumb = std::env::var("TERM").is_ok_and(|t| t == "dumb");
        Printer {
            live: std::io::stderr().is_terminal() && !dumb,
            verbose,
            inner: Mutex::new(PrinterState {
                counts: IndexMap::new(),
                running: IndexMap::new(),
                shown_live: 0,
                printed: Instant::now(),
            }),
        }
    }

    /// On a terminal, redraws the live view each second (its times go on); elsewhere,
    /// prints what is still running every [`HEARTBEAT`] of silence; for as long as the
    /// process runs.
    pub fn start_heartbeat(self: &Arc<Self>) {
        let printer = Arc::downgrade(self);
        if self.live {
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    let Some(printer) = printer.upgrade() else {
                        return;
                    };
                    let mut s = printer.inner.lock().unwrap_or_else(|p| p.into_inner());
                    if s.running.is_empty() {
                        continue;
                    }
                    let mut err = std::io::stderr().lock();
                    printer.clear_live(&mut s, &mut err);
                    printer.draw_live(&mut s, &mut err);
                    let _ = err.flush();
                }
            });
            return;
        }
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(HEARTBEAT / 3).await;
                let Some(printer) = printer.upgrade() else {
                    return;
                };
                let mut s = printer.inner.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(line) = heartbeat(&s, Instant::now()) {
                    let mut err = std::io::stderr().lock();
                    let _ = writeln!(err, "{line}");
                    s.printed = Instant::now();
                }
            }
        });
    }

    /// Takes the live view off the terminal: to the start of its first line, and clears
    /// from there down.
    fn clear_live(&self, s: &mut PrinterState, err: &mut impl Write) {
        match s.shown_live {
            0 => {}
            1 => {
                let _ = write!(err, "\r\x1b[J");
            }
            n => {
                let _ = write!(err, "\r\x1b[{}A\x1b[J", n - 1);
            }
        }
        s.shown_live = 0;
    }

    fn draw_live(&self, s: &mut PrinterState, err: &mut impl Write) {
        if !self.live || s.running.is_empty() {
            return;
        }
        let (width, height) = terminal_size();
        // The view never reaches the top of the terminal: it is cleared by moving up.
        let rows = LIVE_ROWS.min(height.saturating_sub(3)).max(1);
        let lines = live_lines(s, Instant::now(), width, rows);
        let _ = write!(err, "{}", lines.join("\n"));
        s.shown_live = lines.len();
    }
}

/// The live view at `now`: the count of actions done, then the running resources, the
/// longest running first, at most `rows` of them and a line for the rest; each line cut
/// to `width`.
fn live_lines(s: &PrinterState, now: Instant, width: usize, rows: usize) -> Vec<String> {
    let (total, done) = s
        .counts
        .values()
        .fold((0, 0), |(t, d), (a, b)| (t + a, d + b));
    let mut running: Vec<(&String, &Running)> = s.running.iter().collect();
    running.sort_by_key(|(_, r)| r.since);
    let mut lines = vec![format!("  … [{done}/{total}] {} running", running.len())];
    for (id, r) in running.iter().take(rows) {
        let secs = now.duration_since(r.since).as_secs();
        lines.push(format!(
            "    {id} ({}) {} {secs}s",
            r.resource_type, r.action
        ));
    }
    if running.len() > rows {
        lines.push(format!("    and {} more", running.len() - rows));
    }
    lines.into_iter().map(|l| fit(&l, width)).collect()
}

/// The first few running resources' names, and how many more.
fn running_names(s: &PrinterState) -> String {
    let names: Vec<&str> = s.running.keys().map(String::as_str).take(4).collect();
    match s.running.len().saturating_sub(names.len()) {
        0 => names.join(", "),
        more => format!("{} and {more} more", names.join(", ")),
    }
}

/// The heartbeat line due at `now`, if one is: resources run and nothing was printed for
/// [`HEARTBEAT`].
fn heartbeat(s: &PrinterState, now: Instant) -> Option<String> {
    let oldest = s.running.values().map(|r| r.since).min()?;
    if now.duration_since(s.printed) < HEARTBEAT {
        return None;
    }
    let longest = now.duration_since(oldest).as_secs();
    Some(format!(
        "  … still running ({} for up to {longest}s): {}",
        s.running.len(),
        running_names(s)
    ))
}

/// The width and height of the terminal stderr is on, else `COLUMNS` and `LINES`, else
/// 80 by 24.
fn terminal_size() -> (usize, usize) {
    let size = terminal_size::terminal_size_of(std::io::stderr());
    let from_env = |name: &str| std::env::var(name).ok()?.parse().ok();
    let width = size
        .map(|(w, _)| usize::from(w.0))
        .or_else(|| from_env("COLUMNS"))
        .filter(|w: &usize| *w > 10)
        .unwrap_or(80);
    let height = size
        .map(|(_, h)| usize::from(h.0))
        .or_else(|| from_env("LINES"))
        .filter(|h: &usize| *h > 3)
        .unwrap_or(24);
    (width, height)
}

/// `line` cut to fit in `width` columns with one to spare (a line that wraps cannot be
/// cleared with a carriage return), ending in `…` when cut.
fn fit(line: &str, width: usize) -> String {
    let room = width.saturating_sub(1);
    if line.chars().count() <= room {
        return line.to_string();
    }
    let mut cut: String = line.chars().take(room.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

impl Progress for Printer {
    fn report(&self, event: ProgressEvent<'_>) {
        let mut s = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let mut err = std::io::stderr().lock();
        self.clear_live(&mut s, &mut err);
        match event {
            ProgressEvent::StackStarted {
                stack,
                operation,
                total,
            } => {
                s.counts.insert(stack.to_string(), (total, 0));
                let _ = writeln!(err, "{operation} {stack}: {total} actions");
            }
            ProgressEvent::ResourceStarted {
                logical_id,
                resource_type,
                action,
                ..
            } => {
                s.running.insert(
                    logical_id.to_string(),
                    Running {
                        since: Instant::now(),
                        resource_type: resource_type.to_string(),
                        action: action.to_string(),
                    },
                );
                if self.verbose > 0 {
                    let _ = writeln!(err, "  → {logical_id} ({resource_type}) {action}");
                    s.printed = Instant::now();
                }
            }
            ProgressEvent::ResourceFinished {
                stack,
                logical_id,
                resource_type,
                outcome,
                seconds,
                detail,
            } => {
                s.running.shift_remove(logical_id);
                let mark = match outcome {
                    "failed" => "✗",
                    "skipped" => "!",
                    "retained" => "•",
                    "recovered" => "↺",
                    _ => "✓",
                };
                let counter = if outcome == "recovered" {
                    "recovered".to_string()
                } else {
                    let c = s.counts.entry(stack.to_string()).or_default();
                    c.1 += 1;
                    // Settling an interrupted run can add deletes the plan did not count.
                    c.0 = c.0.max(c.1);
                    format!("{}/{}", c.1, c.0)
                };
                let detail = detail.map(|d| format!(": {d}")).unwrap_or_default();
                let _ = writeln!(
                    err,
                    "[{counter}] {mark} {logical_id} ({resource_type}) {outcome} {seconds:.1}s{detail}"
                );
                s.printed = Instant::now();
            }
            ProgressEvent::Note { stack, message } => {
                let _ = writeln!(err, "{stack}: {message}");
                s.printed = Instant::now();
            }
        }
        self.draw_live(&mut s, &mut err);
        let _ = err.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_live_line_is_cut_to_the_width_with_one_column_to_spare() {
        let id = "MyServiceApiGatewayDeploymentStageProdCloudWatchRoleAccountB7A2E8C1D0F9";
        let line = format!("  … [3/40] running {id}, {id}");
        let cut = fit(&line, 80);
        assert_eq!(cut.chars().count(), 79);
        assert!(cut.ends_with('…'));
        assert_eq!(fit("short", 80), "short");
    }

    #[test]
    fn a_silent_log_is_told_what_still_runs() {
        let start = Instant::now();
        let mut s = PrinterState {
            counts: IndexMap::new(),
            running: IndexMap::new(),
            shown_live: 0,
            printed: start,
        };
        // Nothing runs: nothing to say.
        assert_eq!(heartbeat(&s, start + HEARTBEAT * 2), None);
        s.running.insert("Table".into(), running(start, "update"));
        s.running.insert(
            "Cluster".into(),
            running(start + Duration::from_secs(5), "create"),
        );
        // Something was printed recently.
        assert_eq!(heartbeat(&s, start + HEARTBEAT / 2), None);
        let line = heartbeat(&s, start + HEARTBEAT + Duration::from_secs(1));
        assert_eq!(
            line.as_deref(),
            Some("  … still running (2 for up to 31s): Table, Cluster")
        );
    }

    fn running(since: Instant, action: &str) -> Running {
        Running {
            since,
            resource_type: "AWS::X::Y".into(),
            action: action.into(),
        }
    }

    #[test]
    fn the_live_view_lists_what_runs_longest_first_within_its_rows() {
        let start = Instant::now();
        let mut s = PrinterState {
            counts: IndexMap::from([("S".to_string(), (20, 3))]),
            running: IndexMap::new(),
            shown_live: 0,
            printed: start,
        };
        // Started in reverse: the view lists the longest running first.
        for i in (0..10).rev() {
            s.running.insert(
                format!("R{i}"),
                running(start + Duration::from_secs(10 - i), "create"),
            );
        }
        let lines = live_lines(&s, start + Duration::from_secs(20), 80, LIVE_ROWS);
        assert_eq!(lines.len(), 1 + LIVE_ROWS + 1);
        assert_eq!(lines[0], "  … [3/20] 10 running");
        assert_eq!(lines[1], "    R9 (AWS::X::Y) create 19s");
        assert_eq!(lines[LIVE_ROWS], "    R2 (AWS::X::Y) create 12s");
        assert_eq!(lines[LIVE_ROWS + 1], "    and 2 more");
        // Every line fits the width with a column to spare: none wraps, so the view can
        // be cleared line by line.
        let id = "MyServiceApiGatewayDeploymentStageProdCloudWatchRoleAccountB7A2E8C1D0F9";
        s.running.insert(id.into(), running(start, "update"));
        let narrow = live_lines(&s, start, 40, 2);
        assert_eq!(narrow.len(), 4, "a short terminal lists fewer: {narrow:?}");
        assert!(narrow.iter().all(|l| l.chars().count() <= 39), "{narrow:?}");
        assert!(
            narrow
                .iter()
                .any(|l| l.starts_with(&format!("    {}", &id[..10])))
        );
    }
}
