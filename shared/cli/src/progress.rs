//! Progress of a run, as a person reads it: a line per finished resource on stderr, and
//! on a terminal a live line of what is running, cut to the terminal's width (else
//! `COLUMNS`, else 80). Elsewhere (a CI log, a pipe, `TERM=dumb`) a plain line says what is still
//! running whenever nothing was printed for [`HEARTBEAT`]. No color is ever printed, so
//! `NO_COLOR` holds by construction.

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

struct PrinterState {
    /// Per stack (nested stacks run inside their parent's deploy): actions, finished.
    counts: IndexMap<String, (usize, usize)>,
    /// What runs: logical id to when it started.
    running: IndexMap<String, Instant>,
    shown_live: bool,
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
                shown_live: false,
                printed: Instant::now(),
            }),
        }
    }

    /// Where there is no live line, prints what is still running every [`HEARTBEAT`] of
    /// silence, for as long as the process runs.
    pub fn start_heartbeat(self: &Arc<Self>) {
        if self.live {
            return;
        }
        let printer = Arc::downgrade(self);
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

    fn clear_live(&self, s: &mut PrinterState, err: &mut impl Write) {
        if s.shown_live {
            let _ = write!(err, "\r\x1b[2K");
            s.shown_live = false;
        }
    }

    fn draw_live(&self, s: &mut PrinterState, err: &mut impl Write) {
        if !self.live || s.running.is_empty() {
            return;
        }
        let (total, done) = s
            .counts
            .values()
            .fold((0, 0), |(t, d), (a, b)| (t + a, d + b));
        let line = format!("  … [{done}/{total}] running {}", running_names(s));
        let _ = write!(err, "{}", fit(&line, terminal_width()));
        s.shown_live = true;
    }
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
    let oldest = s.running.values().min()?;
    if now.duration_since(s.printed) < HEARTBEAT {
        return None;
    }
    let longest = now.duration_since(*oldest).as_secs();
    Some(format!(
        "  … still running ({} for up to {longest}s): {}",
        s.running.len(),
        running_names(s)
    ))
}

/// The width of the terminal stderr is on, else `COLUMNS`, else 80.
fn terminal_width() -> usize {
    terminal_size::terminal_size_of(std::io::stderr())
        .map(|(w, _)| usize::from(w.0))
        .or_else(|| std::env::var("COLUMNS").ok()?.parse().ok())
        .filter(|w: &usize| *w > 10)
        .unwrap_or(80)
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
                s.running.insert(logical_id.to_string(), Instant::now());
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
            shown_live: false,
            printed: start,
        };
        // Nothing runs: nothing to say.
        assert_eq!(heartbeat(&s, start + HEARTBEAT * 2), None);
        s.running.insert("Table".into(), start);
        s.running
            .insert("Cluster".into(), start + Duration::from_secs(5));
        // Something was printed recently.
        assert_eq!(heartbeat(&s, start + HEARTBEAT / 2), None);
        let line = heartbeat(&s, start + HEARTBEAT + Duration::from_secs(1));
        assert_eq!(
            line.as_deref(),
            Some("  … still running (2 for up to 31s): Table, Cluster")
        );
    }
}
