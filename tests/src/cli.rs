//! The `stackflow` binary, run the way a user runs it, against the emulator.
//!
//! The binary belongs to another package (`shared/cli`), so cargo gives this crate's
//! tests no `CARGO_BIN_EXE_stackflow`. [`stackflow_bin`] uses `STACKFLOW_BIN` when it is
//! set; otherwise it runs `cargo build -p stackflow --bin stackflow --locked` once per
//! test binary (a no-op when the binary is up to date, as after `cargo test --workspace`)
//! and takes the path cargo reports, so a test never runs a stale binary.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Path of a `stackflow` binary to use instead of building one.
pub const BIN_ENV: &str = "STACKFLOW_BIN";

/// Longest a single run may take.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(240);

/// The `stackflow` binary, built on first use (see the module documentation).
pub fn stackflow_bin() -> PathBuf {
    static BIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match BIN.get_or_init(find_or_build) {
        Ok(path) => path.clone(),
        Err(why) => panic!("no stackflow binary: {why}"),
    }
}

fn find_or_build() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os(BIN_ENV).filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!("{BIN_ENV}={} is not a file", path.display()))
        };
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(&cargo)
        .args(["build", "-p", "stackflow", "--bin", "stackflow", "--locked"])
        .arg("--message-format=json-render-diagnostics")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", Path::new(&cargo).display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "`cargo build -p stackflow` failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "stackflow")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .ok_or_else(|| "cargo built no stackflow executable".to_string())
}

/// One finished run.
#[derive(Debug)]
pub struct Run {
    /// The command line after the global options, for messages.
    pub args: Vec<String>,
    /// The exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Run {
    /// The run as a person reads it.
    pub fn describe(&self) -> String {
        format!(
            "stackflow {} exited {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.args.join(" "),
            self.code,
            self.stdout,
            self.stderr
        )
    }
}

/// How the runs of one test call `stackflow`: its directory, the emulator, the store.
#[derive(Debug, Clone)]
pub struct Cli {
    /// Working directory (and `HOME`); outputs of the runs go under it.
    pub dir: PathBuf,
    /// The emulator's endpoint.
    pub endpoint: String,
    /// `--store` (`local:DIR` or `dynamodb:TABLE`).
    pub store: String,
    /// `--store-bucket`, when set.
    pub bucket: Option<String>,
    /// `STACKFLOW_ENGINE`, when set.
    pub engine: Option<String>,
}

impl Cli {
    /// Runs in `dir` against `endpoint`, with the local store `dir/store`.
    pub fn local(dir: &Path, endpoint: String) -> Cli {
        Cli {
            dir: dir.to_path_buf(),
            endpoint,
            store: format!("local:{}", dir.join("store").display()),
            bucket: None,
            engine: None,
        }
    }

    /// The command for `args`: the global options first, a clean environment (test
    /// credentials only, `RUST_LOG=trace` for any logging there is).
    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(stackflow_bin());
        c.arg("--endpoint-url").arg(&self.endpoint);
        // An empty store: none given, as a user who relies on the default.
        if !self.store.is_empty() {
            c.arg("--store").arg(&self.store);
        }
        if let Some(bucket) = &self.bucket {
            c.arg("--store-bucket").arg(bucket);
        }
        c.args(args)
            .current_dir(&self.dir)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.dir)
            .env("USER", "tester")
            .env("RUST_LOG", "trace")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("STACKFLOW_YES", "1")
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("AWS_REGION", "us-east-1")
            .stdin(Stdio::null());
        if let Some(engine) = &self.engine {
            c.env("STACKFLOW_ENGINE", engine);
        }
        c
    }

    /// Starts `args` in the background with its stderr in the file `log` (under the
    /// test's directory).
    pub fn spawn(&self, args: &[&str], log: &str) -> Child {
        let log = File::create(self.dir.join(log)).expect("log file");
        self.command(args)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("stackflow starts")
    }

    /// Runs `args` to its end (killed after [`RUN_TIMEOUT`]). Its output goes through
    /// files, so nothing blocks on a full pipe.
    pub fn run(&self, args: &[&str]) -> Run {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // Named by the command's words (never by a value: `--parameter` carries secrets).
        let mut slug: Vec<&str> = args
            .iter()
            .take_while(|a| !a.contains(['=', '/', '.']))
            .take(3)
            .copied()
            .collect();
        if args.contains(&"--json") && !slug.contains(&"--json") {
            slug.push("--json");
        }
        let name = format!("run-{n:02}-{}", slug.join("-").trim_start_matches('-'));
        let out_path = self.dir.join(format!("{name}.stdout"));
        let err_path = self.dir.join(format!("{name}.stderr"));
        let mut child = self
            .command(args)
            .stdout(File::create(&out_path).expect("stdout file"))
            .stderr(File::create(&err_path).expect("stderr file"))
            .spawn()
            .expect("stackflow starts");
        let deadline = Instant::now() + RUN_TIMEOUT;
        let status = loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "stackflow {} ran for more than {RUN_TIMEOUT:?}",
                    args.join(" ")
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        Run {
            args: args.iter().map(|a| a.to_string()).collect(),
            code: status.code(),
            stdout: std::fs::read_to_string(&out_path).unwrap_or_default(),
            stderr: std::fs::read_to_string(&err_path).unwrap_or_default(),
        }
    }
}
