//! The built bootstrap, started where no function's handler names a task (as when it is
//! run by hand, or deployed with a wrong handler): it stops at once with an init error
//! that names what to set, instead of waiting on a Lambda runtime API that is not there.
//!
//! Also what makes `cargo test --workspace` build the bootstrap executable with the
//! workspace's features, which the emulator suites deploy as their functions' code
//! (`.ci/test` hands them its path).

use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn without_a_handler_it_stops_at_once_naming_what_to_set() {
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_stackflow-fn-bootstrap"))
        .env_clear()
        .output()
        .expect("the bootstrap starts");
    assert!(!out.status.success(), "{out:?}");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("no task to run"), "{said}");
    assert!(said.contains("STACKFLOW_TASK"), "{said}");
    assert!(started.elapsed() < Duration::from_secs(30), "{said}");
}
