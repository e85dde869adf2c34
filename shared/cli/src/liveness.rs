//! Who runs a command (the name a lock holder is recorded with), and whether a lock's
//! holder is provably gone, so that its lock may be broken at once rather than when its
//! lease ends.
//!
//! A holder is `user@host pid N boot B ns P`. It is taken for gone only where that can be
//! proven: the same host, the same boot (Linux's kernel host name and `boot_id`) and the
//! same pid namespace (`/proc/self/ns/pid`: two containers on one host and boot number
//! their processes apart, and neither sees the other's pids) as this process, and a
//! process table (`/proc`, not mounted with `hidepid`, which hides other users'
//! processes) that lacks its pid. Anywhere else (another host, boot or namespace, no
//! `/proc` as on macOS, a holder written by an older version without its boot or
//! namespace) the lock is left to its lease, and the refusal says how to break it
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

/// The inode number of this process's pid namespace (`pid:[4026531836]`).
fn pid_namespace() -> Option<String> {
    let link = std::fs::read_link("/proc/self/ns/pid").ok()?;
    let digits: String = link
        .to_string_lossy()
        .chars()
        .filter(char::is_ascii_digit)
        .collect();
    (!digits.is_empty()).then_some(digits)
}

/// True when `/proc` hides processes (`hidepid=1`, `2`, `invisible`, `noaccess`), or its
/// mount cannot be read: an absent pid proves nothing then.
fn proc_hides_pids() -> bool {
    let Some(mounts) = read_trimmed("/proc/self/mountinfo") else {
        return true;
    };
    hides_pids(&mounts)
}

/// [`proc_hides_pids`] of a `mountinfo` text.
fn hides_pids(mountinfo: &str) -> bool {
    let proc_mount = mountinfo.lines().find(|l| {
        let mut fields = l.split(' ');
        fields.nth(4) == Some("/proc") && l.contains(" - proc ")
    });
    let Some(line) = proc_mount else {
        return true;
    };
    line.split([' ', ',']).any(|o| {
        o.strip_prefix("hidepid=")
            .is_some_and(|v| v != "0" && v != "off")
    })
}

/// The name this process holds locks under: `user@host pid N boot B ns P` (without the
/// boot and namespace where they cannot be read).
pub fn holder_name() -> String {
    let mut name = format!("{} pid {}", whoami(), std::process::id());
    if let Some(boot) = boot_id() {
        name.push_str(&format!(" boot {boot}"));
        if let Some(ns) = pid_namespace() {
            name.push_str(&format!(" ns {ns}"));
        }
    }
    name
}

/// A holder name, taken apart.
#[derive(Debug, PartialEq, Eq)]
struct Parsed<'a> {
    user_host: &'a str,
    pid: u32,
    boot: Option<&'a str>,
    ns: Option<&'a str>,
}

fn parse(who: &str) -> Option<Parsed<'_>> {
    let (user_host, rest) = who.rsplit_once(" pid ")?;
    let (rest, ns) = match rest.split_once(" ns ") {
        Some((rest, ns)) => (rest, Some(ns)),
        None => (rest, None),
    };
    let (pid, boot) = match rest.split_once(" boot ") {
        Some((pid, boot)) => (pid, Some(boot)),
        None => (rest, None),
    };
    Some(Parsed {
        user_host,
        pid: pid.parse().ok()?,
        boot,
        ns,
    })
}

/// What this process knows of itself to judge a holder.
struct Local {
    me: String,
    boot: Option<String>,
    ns: Option<String>,
    pid: u32,
    has_process_table: bool,
}

impl Local {
    /// True only when `who` is provably gone: same host, boot and pid namespace, process
    /// table readable and showing every process, and no process with its pid.
    fn proves_gone(&self, who: &str, pid_exists: impl Fn(u32) -> bool) -> bool {
        let Some(p) = parse(who) else {
            return false;
        };
        let same_boot = matches!((p.boot, &self.boot), (Some(a), Some(b)) if a == b);
        let same_ns = matches!((p.ns, &self.ns), (Some(a), Some(b)) if a == b);
        self.has_process_table
            && same_boot
            && same_ns
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
        ns: pid_namespace(),
        pid: std::process::id(),
        has_process_table: kernel_host().is_some()
            && std::path::Path::new("/proc/self").exists()
            && !proc_hides_pids(),
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

    const HOLDER: &str = "dev@box pid 42 boot a1b2c3d4 ns 4026531836";

    fn local(has_process_table: bool) -> Local {
        Local {
            me: "dev@box".into(),
            boot: Some("a1b2c3d4".into()),
            ns: Some("4026531836".into()),
            pid: 10,
            has_process_table,
        }
    }

    #[test]
    fn names_are_taken_apart() {
        assert_eq!(
            parse(HOLDER),
            Some(Parsed {
                user_host: "dev@box",
                pid: 42,
                boot: Some("a1b2c3d4"),
                ns: Some("4026531836"),
            })
        );
        let old = parse("dev@box pid 42 boot a1b2c3d4").unwrap();
        assert_eq!((old.boot, old.ns), (Some("a1b2c3d4"), None));
        assert_eq!(parse("dev@box pid 42").unwrap().boot, None);
        assert_eq!(parse("arn:aws:states:...:execution:x"), None);
        // This process's own name parses back to itself.
        let mine = holder_name();
        assert_eq!(parse(&mine).unwrap().pid, std::process::id(), "{mine}");
    }

    #[test]
    fn a_dead_process_of_this_host_boot_and_namespace_is_gone() {
        assert!(local(true).proves_gone(HOLDER, |_| false));
    }

    #[test]
    fn nothing_unproven_is_taken_for_gone() {
        let gone = |_| false;
        // A live process.
        assert!(!local(true).proves_gone(HOLDER, |_| true));
        // Another pid namespace (a container on the same host and boot): its pids are
        // not ours to look up.
        assert!(!local(true).proves_gone("dev@box pid 42 boot a1b2c3d4 ns 4026532175", gone));
        // No namespace recorded (an older version), another boot, another host, no boot
        // recorded, this process.
        assert!(!local(true).proves_gone("dev@box pid 42 boot a1b2c3d4", gone));
        assert!(!local(true).proves_gone("dev@box pid 42 boot ffffffff ns 4026531836", gone));
        assert!(!local(true).proves_gone("dev@other pid 42 boot a1b2c3d4 ns 4026531836", gone));
        assert!(!local(true).proves_gone("dev@box pid 42", gone));
        assert!(!local(true).proves_gone("dev@box pid 10 boot a1b2c3d4 ns 4026531836", gone));
        // No process table (macOS, or /proc with hidepid): never.
        assert!(!local(false).proves_gone(HOLDER, gone));
        // A Step Functions execution.
        assert!(!local(true).proves_gone("arn:aws:states:us-east-1:1:execution:sm:d-1", gone));
    }

    #[test]
    fn a_proc_mounted_with_hidepid_proves_nothing() {
        let plain = "22 27 0:21 / /proc rw,relatime - proc proc rw\n";
        assert!(!hides_pids(plain));
        for opt in ["hidepid=2", "hidepid=invisible", "hidepid=1"] {
            let hidden = format!("22 27 0:21 / /proc rw,relatime - proc proc rw,{opt}\n");
            assert!(hides_pids(&hidden), "{opt}");
        }
        assert!(!hides_pids(
            "22 27 0:21 / /proc rw - proc proc rw,hidepid=0"
        ));
        assert!(
            hides_pids("1 2 0:1 / / rw - ext4 /dev/vda rw"),
            "no /proc mount"
        );
    }
}
