//! Who runs a command (the name a lock holder is recorded with), and whether a lock's
//! holder is provably gone, so that its lock may be broken.
//!
//! A holder is `user@host pid N boot B`. It is taken for gone only where that can be
//! proven: the same host and the same boot as this process (Linux's kernel host name and
//! `boot_id`), and a process table (`/proc`) that lacks its pid. Anywhere else (another
//! host, another boot, no `/proc` as on macOS, a holder written by an older version
//! without its boot) the lock is left alone, and the refusal says how to break it
//! (`stackflow unlock`).

use std::sync::Arc;

use stackflow_engine::engine::StaleCheck;
use stackflow_events::event::Holder;

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// The kernel's host name, where it can be read.
fn kernel_host() -> Option<String> {
    read_trimmed("/proc/sys/kernel/hostname")
}

/// This boot's id (Linux), first 8 characters.
fn boot_id() -> Option<String> {
    read_trimmed("/proc/sys/kernel/random/boot_id").map(|b| b.chars().take(8).collect())
}

/// `user@host`, for records and messages.
pub fn whoami() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("USERNAME"))
        .unwrap_or_else(|_| "someone".into());
    let host = kernel_host()
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()))
        .unwrap_or_else(|| "localhost".into());
    format!("{user}@{host}")
}

/// The name this process holds locks under: `user@host pid N boot B` (without the boot
/// where it cannot be read).
pub fn holder_name() -> String {
    let mut name = format!("{} pid {}", whoami(), std::process::id());
    if let Some(boot) = boot_id() {
        name.push_str(&format!(" boot {boot}"));
    }
    name
}

/// A holder name, taken apart.
#[derive(Debug, PartialEq, Eq)]
struct Parsed<'a> {
    user_host: &'a str,
    pid: u32,
    boot: Option<&'a str>,
}

fn parse(who: &str) -> Option<Parsed<'_>> {
    let (user_host, rest) = who.rsplit_once(" pid ")?;
    let (pid, boot) = match rest.split_once(" boot ") {
        Some((pid, boot)) => (pid, Some(boot)),
        None => (rest, None),
    };
    Some(Parsed {
        user_host,
        pid: pid.parse().ok()?,
        boot,
    })
}

/// What this process knows of itself to judge a holder.
struct Local {
    me: String,
    boot: Option<String>,
    pid: u32,
    has_process_table: bool,
}

impl Local {
    /// True only when `who` is provably gone: same host and boot, process table readable,
    /// and no process with its pid.
    fn proves_gone(&self, who: &str, pid_exists: impl Fn(u32) -> bool) -> bool {
        let Some(p) = parse(who) else {
            return false;
        };
        let same_boot = matches!((p.boot, &self.boot), (Some(a), Some(b)) if a == b);
        self.has_process_table
            && same_boot
            && p.user_host == self.me
            && p.pid != self.pid
            && !pid_exists(p.pid)
    }
}

/// The stale check of the CLI's engine: see the module docs.
pub fn stale_check() -> StaleCheck {
    let local = Local {
        me: whoami(),
        boot: boot_id(),
        pid: std::process::id(),
        has_process_table: kernel_host().is_some() && std::path::Path::new("/proc/self").exists(),
    };
    Arc::new(move |holder: &Holder| {
        local.proves_gone(&holder.who, |pid| {
            std::path::Path::new(&format!("/proc/{pid}")).exists()
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local(has_process_table: bool) -> Local {
        Local {
            me: "dev@box".into(),
            boot: Some("a1b2c3d4".into()),
            pid: 10,
            has_process_table,
        }
    }

    #[test]
    fn names_are_taken_apart() {
        assert_eq!(
            parse("dev@box pid 42 boot a1b2c3d4"),
            Some(Parsed {
                user_host: "dev@box",
                pid: 42,
                boot: Some("a1b2c3d4")
            })
        );
        assert_eq!(parse("dev@box pid 42").unwrap().boot, None);
        assert_eq!(parse("arn:aws:states:...:execution:x"), None);
    }

    #[test]
    fn a_dead_process_of_this_host_and_boot_is_gone() {
        assert!(local(true).proves_gone("dev@box pid 42 boot a1b2c3d4", |_| false));
    }

    #[test]
    fn nothing_unproven_is_taken_for_gone() {
        let gone = |_| false;
        // A live process.
        assert!(!local(true).proves_gone("dev@box pid 42 boot a1b2c3d4", |_| true));
        // Another boot, another host, no boot recorded, this process.
        assert!(!local(true).proves_gone("dev@box pid 42 boot ffffffff", gone));
        assert!(!local(true).proves_gone("dev@other pid 42 boot a1b2c3d4", gone));
        assert!(!local(true).proves_gone("dev@box pid 42", gone));
        assert!(!local(true).proves_gone("dev@box pid 10 boot a1b2c3d4", gone));
        // No process table (macOS): never.
        assert!(!local(false).proves_gone("dev@box pid 42 boot a1b2c3d4", gone));
        // A Step Functions execution.
        assert!(!local(true).proves_gone("arn:aws:states:us-east-1:1:execution:sm:d-1", gone));
    }
}
