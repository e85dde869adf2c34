//! Progress of a run, as a person reads it: a line per finished resource on stderr, and
//! on a terminal a live line of what is running.

use std::io::{IsTerminal, Write};
use std::sync::Mutex;

use indexmap::IndexMap;
use stackflow_engine::progress::{Progress, ProgressEvent};

/// Prints progress: a line per finished resource, and on a terminal a live line of what
/// is running.
pub struct Printer {
    live: bool,
    verbose: u8,
    inner: Mutex<PrinterState>,
}

#[derive(Default)]
struct PrinterState {
    /// Per stack (nested stacks run inside their parent's deploy): actions, finished.
    counts: IndexMap<String, (usize, usize)>,
    running: IndexMap<String, String>,
    shown_live: bool,
}

impl Printer {
    pub fn new(verbose: u8) -> Printer {
        Printer {
            live: std::io::stderr().is_terminal(),
            verbose,
            inner: Mutex::new(PrinterState::default()),
        }
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
        let names: Vec<&str> = s.running.keys().map(String::as_str).take(4).collect();
        let more = s.running.len().saturating_sub(names.len());
        let extra = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        let (total, done) = s
            .counts
            .values()
            .fold((0, 0), |(t, d), (a, b)| (t + a, d + b));
        let _ = write!(
            err,
            "  … [{done}/{total}] running {}{extra}",
            names.join(", ")
        );
        s.shown_live = true;
    }
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
                s.running
                    .insert(logical_id.to_string(), resource_type.to_string());
                if self.verbose > 0 {
                    let _ = writeln!(err, "  → {logical_id} ({resource_type}) {action}");
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
            }
            ProgressEvent::Note { stack, message } => {
                let _ = writeln!(err, "{stack}: {message}");
            }
        }
        self.draw_live(&mut s, &mut err);
        let _ = err.flush();
    }
}
