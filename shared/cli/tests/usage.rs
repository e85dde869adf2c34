//! Issue 27 item 5: a command line that does not parse exits 64 (sysexits' `EX_USAGE`),
//! apart from the codes runs end with (1 failed, 2 partial or not compared, 3 locked);
//! `--help` and `--version` exit 0.

use std::process::Command;

fn stackflow(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_stackflow"))
        .args(args)
        .env_clear()
        .output()
        .expect("stackflow runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_bad_command_line_exits_64_and_help_exits_0() {
    let (code, _, err) = stackflow(&["deploy", "t.yaml", "--no-such-flag"]);
    assert_eq!(code, Some(64), "{err}");
    assert!(err.contains("--no-such-flag"), "{err}");
    let (code, _, err) = stackflow(&["no-such-command"]);
    assert_eq!(code, Some(64), "{err}");
    let (code, out, _) = stackflow(&["--help"]);
    assert_eq!(code, Some(0));
    assert!(out.contains("deploy"), "{out}");
    let (code, out, _) = stackflow(&["--version"]);
    assert_eq!(code, Some(0));
    assert!(out.contains("stackflow"), "{out}");
}

#[test]
fn completions_are_printed_for_each_shell() {
    for (shell, marker) in [
        ("bash", "_stackflow()"),
        ("zsh", "#compdef stackflow"),
        ("fish", "complete -c stackflow"),
    ] {
        let (code, out, err) = stackflow(&["completions", shell]);
        assert_eq!(code, Some(0), "{shell}: {err}");
        assert!(out.contains(marker), "{shell}: {out}");
        assert!(
            out.contains("orphan") && out.contains("--dry-run"),
            "{shell}"
        );
    }
    let (code, _, err) = stackflow(&["completions", "tcsh"]);
    assert_eq!(code, Some(64), "{err}");
}

#[test]
fn dry_run_of_drift_needs_accept_or_revert() {
    let (code, _, err) = stackflow(&["drift", "--stack", "s", "--dry-run"]);
    assert_eq!(code, Some(64), "{err}");
    assert!(
        err.contains("--accept") && err.contains("--revert"),
        "{err}"
    );
}
