//! One local AWS emulator per test binary.
//!
//! [`Emulator::shared`] hands every test of a binary the same emulator. The
//! first call decides where it is:
//!
//! - `STACKFLOW_TEST_ENDPOINT` set (e.g. `http://127.0.0.1:4566`): that
//!   already-running emulator is used and nothing is started. Its host must be
//!   a loopback address (`127.0.0.0/8`, `::1` or `localhost`); anything else
//!   is refused with a panic, so a test can never be pointed at a real cloud
//!   or another machine.
//! - otherwise fakecloud is started: the binary named by `FAKECLOUD_BIN`, else
//!   `fakecloud` on `PATH`, else `$CARGO_HOME/bin/fakecloud` (default
//!   `~/.cargo/bin`). When none exists the test panics and says to run
//!   `bash .ci/install-fakecloud`.
//!
//! # The port
//!
//! fakecloud is started with `--addr 127.0.0.1:0`: the kernel picks a free
//! loopback port when fakecloud binds it, and fakecloud prints
//! `FAKECLOUD_PORT=<port>` on its stdout, which goes to the log file that we
//! read back. Unlike "bind port 0, read the port, close it, pass it on" this
//! leaves no window in which another process (another test binary, another
//! engineer's build) can take the port first. Then `GET /_fakecloud/health`
//! is polled until it answers `200`, for at most [`STARTUP_TIMEOUT`]; on
//! failure the panic quotes the tail of the emulator's log.
//!
//! # Stopping it
//!
//! Statics are never dropped, so no destructor can stop the emulator when the
//! test binary exits, and `unsafe` (`atexit`, `prctl(PR_SET_PDEATHSIG)`) is
//! forbidden in this workspace. Instead fakecloud runs under a small `sh`
//! wrapper ([`WRAPPER_SCRIPT`]) whose stdin is a pipe whose only write end is
//! held by the test process (Rust opens it close-on-exec, so no other child
//! inherits it). When the test process ends, however it ends — normal exit,
//! panic, `SIGKILL` — the kernel closes that end, the wrapper's `read` sees end
//! of file, and it kills fakecloud (`SIGKILL`, see [`WRAPPER_SCRIPT`] for
//! why). So no emulator outlives `cargo test`: it is gone within milliseconds
//! of the test binary's exit.
//!
//! # Logs
//!
//! fakecloud's stdout and stderr go to
//! `<target>/tmp/stackflow-emulator/fakecloud-<pid>-<millis>.log` (next to
//! `CARGO_TARGET_TMPDIR`; found from the test executable's path), or under
//! `STACKFLOW_EMULATOR_LOG_DIR` when set, else under the system temp dir.
//!
//! fakecloud's own environment variables (`FAKECLOUD_*`) are removed from its
//! environment: some of them open extra listeners on every interface (the SES
//! SMTP port, the DNS resolver) or switch on persistence; the harness passes
//! everything it wants on the command line, except `FAKECLOUD_CONTAINER_CLI`.
//!
//! # Lambda code runs
//!
//! No container engine runs on the test machines, so a started fakecloud gets
//! `FAKECLOUD_CONTAINER_CLI` = [`STANDIN`], a stand-in for the container CLI that runs
//! each Lambda function as a local process behind the Lambda Runtime API
//! (`provided.*` bootstraps as they are, `nodejs*` and `python3.*` handlers under the
//! installed `node` and `python3`; `.ci/install-lambda-sdk` installs the AWS SDK for
//! JavaScript v3 it gives Node.js handlers). Its "containers" live under
//! `<log dir>/standin-<pid>-<millis>/` and stop when fakecloud does.

use std::collections::hash_map::RandomState;
use std::fs::OpenOptions;
use std::hash::{BuildHasher, Hasher};
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aws_credential_types::Credentials;
use aws_credential_types::provider::SharedCredentialsProvider;
use aws_sdk_sts::config::BehaviorVersion;
use aws_smithy_types::retry::RetryConfig;
use aws_smithy_types::timeout::TimeoutConfig;
use aws_types::SdkConfig;
use aws_types::region::Region;

/// Use this already-running emulator instead of starting one (loopback only).
pub const ENDPOINT_ENV: &str = "STACKFLOW_TEST_ENDPOINT";
/// Path of the fakecloud binary to start.
pub const BIN_ENV: &str = "FAKECLOUD_BIN";
/// Directory for the emulator's log files.
pub const LOG_DIR_ENV: &str = "STACKFLOW_EMULATOR_LOG_DIR";
/// The fakecloud version the tests are written against (see `.ci/install-fakecloud`).
pub const FAKECLOUD_VERSION: &str = "0.51.0";
/// Region every client is configured for, and that a started fakecloud
/// advertises (`--region`).
pub const REGION: &str = "us-east-1";
/// The account a started fakecloud runs as (`--account-id`; its default too).
/// An emulator given by `STACKFLOW_TEST_ENDPOINT` may use another one.
pub const ACCOUNT_ID: &str = "123456789012";
/// Static credentials every client signs with. fakecloud treats `test`/`test`
/// as its root identity.
pub const ACCESS_KEY_ID: &str = "test";
/// See [`ACCESS_KEY_ID`].
pub const SECRET_ACCESS_KEY: &str = "test";
/// The container engine CLI fakecloud runs Lambda code through.
pub const CONTAINER_CLI_ENV: &str = "FAKECLOUD_CONTAINER_CLI";
/// The stand-in for it that a started fakecloud is given: Lambda functions run as local
/// processes (`tests/standin/container.py`, whose documentation says how and its limits).
pub const STANDIN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/standin/container.py");
/// Where the stand-in keeps its "containers" (one directory per emulator, beside its log).
pub const STANDIN_DIR_ENV: &str = "STACKFLOW_STANDIN_DIR";
/// How long a started emulator has to answer its health check.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs fakecloud (`$0` with arguments `$@`) in the background and kills it
/// when this script's stdin reaches end of file, i.e. when the test process
/// that holds the pipe's write end has exited. The watcher is a background
/// subshell reading the saved stdin (fd 3): a background job's own stdin is
/// `/dev/null` in a non-interactive shell. The script itself lives as long as
/// fakecloud, so the harness can tell when fakecloud died early; it then
/// stops the watcher, so that no stale pid is ever killed.
///
/// `SIGKILL`, not `SIGTERM`: fakecloud's graceful shutdown takes 1-2 s, so a
/// `pgrep fakecloud` right after `cargo test` would still see it, and it has
/// nothing to save: its state is in memory, and the containers it starts for
/// some services (only where Docker/Podman runs) are labelled with its pid
/// and removed by the next fakecloud that starts.
pub const WRAPPER_SCRIPT: &str = r#"exec 3<&0
"$0" "$@" </dev/null 3<&- &
fc=$!
( read -r line <&3 || :; kill -KILL "$fc" 2>/dev/null || : ) &
watcher=$!
exec 3<&-
wait "$fc"
status=$?
kill "$watcher" 2>/dev/null || :
exit "$status"
"#;

/// A running emulator that the tests of this binary share.
#[derive(Debug)]
pub struct Emulator {
    endpoint: String,
    log_path: Option<PathBuf>,
    version: Option<String>,
    process: Option<ManagedProcess>,
}

/// The wrapper process of an emulator that this binary started. Never
/// dropped (it lives in a static); the pipe in `_stdin` is what keeps
/// fakecloud alive.
#[derive(Debug)]
struct ManagedProcess {
    wrapper_pid: u32,
    _stdin: ChildStdin,
    child: Mutex<Child>,
}

static SHARED: OnceLock<Result<Emulator, String>> = OnceLock::new();
static STRICT: OnceLock<Result<Emulator, String>> = OnceLock::new();

impl Emulator {
    /// The emulator shared by every test of this binary, started on first use.
    ///
    /// Safe to call from many `#[tokio::test]`s at once, each on its own
    /// runtime: the start-up runs on a blocking thread and uses no runtime,
    /// and the process belongs to no runtime. Panics (in every caller) if the
    /// emulator cannot be had; the message says why.
    pub async fn shared() -> &'static Emulator {
        if let Some(result) = SHARED.get() {
            return unwrap_shared(result);
        }
        let result = tokio::task::spawn_blocking(|| SHARED.get_or_init(Emulator::init))
            .await
            .expect("the emulator start-up thread panicked");
        unwrap_shared(result)
    }

    /// An emulator of this binary's own that evaluates IAM identity policies
    /// (`--iam strict`: a call a policy does not allow, or denies, is refused with
    /// `AccessDenied`; the test credentials, its root, are never refused). Always started
    /// here, whatever `STACKFLOW_TEST_ENDPOINT` says.
    pub async fn strict() -> &'static Emulator {
        if let Some(result) = STRICT.get() {
            return unwrap_shared(result);
        }
        let result = tokio::task::spawn_blocking(|| {
            STRICT.get_or_init(|| Emulator::start_with(&["--iam", "strict"]))
        })
        .await
        .expect("the emulator start-up thread panicked");
        unwrap_shared(result)
    }

    /// [`Emulator::shared`] for code that is not async. Blocks the calling
    /// thread while the emulator starts.
    pub fn shared_blocking() -> &'static Emulator {
        unwrap_shared(SHARED.get_or_init(Emulator::init))
    }

    /// The endpoint URL, e.g. `http://127.0.0.1:40123` (no trailing slash).
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The emulator's log file, when this binary started it.
    pub fn log_path(&self) -> Option<&Path> {
        self.log_path.as_deref()
    }

    /// Where the container stand-in keeps this emulator's "containers" (beside its log);
    /// `None` for an emulator this binary did not start. A test injects Lambda faults
    /// there (`faults/<function name>`: `tests/standin/container.py` says how).
    pub fn standin_dir(&self) -> Option<PathBuf> {
        let log = self.log_path.as_deref()?;
        let name = log.file_name()?.to_str()?;
        let instance = name.strip_prefix("fakecloud-")?.strip_suffix(".log")?;
        Some(standin_dir(log.parent()?, instance))
    }

    /// The version the emulator's health check reported (fakecloud only).
    pub fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }

    /// Whether this test binary started the emulator (as opposed to using
    /// `STACKFLOW_TEST_ENDPOINT`).
    pub fn is_managed(&self) -> bool {
        self.process.is_some()
    }

    /// Process id of the `sh` wrapper around the emulator that this binary
    /// started (fakecloud is its child).
    pub fn wrapper_pid(&self) -> Option<u32> {
        self.process.as_ref().map(|p| p.wrapper_pid)
    }

    /// What became of the emulator, for a test whose call to it failed: whether the process
    /// this binary started still runs (else how it ended: a `SIGKILL` with nothing in the
    /// log is the kernel's out-of-memory killer or another process; a crash leaves its
    /// message in the log), the memory and disk the machine has left, and the tail of its
    /// log.
    pub fn post_mortem(&self) -> String {
        let Some(process) = &self.process else {
            return format!(
                "the emulator at {} was not started by this test binary",
                self.endpoint
            );
        };
        let state = match process.child.lock().map(|mut c| c.try_wait()) {
            Ok(Ok(None)) => "still runs".to_string(),
            Ok(Ok(Some(status))) => format!("has ended: {}", wrapper_status(status)),
            Ok(Err(e)) => format!("cannot be waited for: {e}"),
            Err(_) => "cannot be waited for (a poisoned lock)".to_string(),
        };
        let memory = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                m.lines()
                    .find(|l| l.starts_with("MemAvailable:"))
                    .map(str::to_string)
            })
            .unwrap_or_else(|| "MemAvailable: unknown".into());
        let log = self.log_path.as_deref().map(log_tail).unwrap_or_default();
        // A full disk fails the stand-in's copies of function code, and the log's writes.
        let disk = Command::new("df")
            .args(["-h", "--output=avail,target"])
            .arg(self.log_path.as_deref().unwrap_or(Path::new("/")))
            .output()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default();
        format!(
            "the emulator (wrapper pid {}) {state}; {}; disk: {disk}\n{log}",
            process.wrapper_pid,
            memory.split_whitespace().collect::<Vec<_>>().join(" ")
        )
    }

    /// SDK configuration for the emulator: its endpoint, region `us-east-1`,
    /// static credentials `test`/`test`, latest behavior version. Built by
    /// hand rather than through `aws_config::load`, so nothing from the
    /// environment or `~/.aws` (profiles, `AWS_ENDPOINT_URL_*`, FIPS flags,
    /// real credentials) can leak into a test. Retries: standard, 3 attempts;
    /// a 5 s connect timeout and a 120 s limit per operation, so a wedged
    /// emulator fails the test instead of hanging it.
    pub async fn sdk_config(&self) -> SdkConfig {
        SdkConfig::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(REGION))
            .endpoint_url(self.endpoint.clone())
            .credentials_provider(SharedCredentialsProvider::new(Credentials::new(
                ACCESS_KEY_ID,
                SECRET_ACCESS_KEY,
                None,
                None,
                "stackflow-tests",
            )))
            .retry_config(RetryConfig::standard().with_max_attempts(3))
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(Duration::from_secs(5))
                    .operation_timeout(Duration::from_secs(120))
                    .build(),
            )
            .build()
    }

    /// The configuration of an admin of `account`, another account of the emulator's than
    /// the caller's (fakecloud's `/_fakecloud/iam/create-admin`, which makes the account),
    /// named `user` there.
    pub async fn other_account(&self, account: &str, user: &str) -> SdkConfig {
        let body = serde_json::json!({"accountId": account, "userName": user}).to_string();
        let (status, answer) = crate::triggers::raw_call(
            self.endpoint(),
            "POST",
            "/_fakecloud/iam/create-admin",
            "iam",
            None,
            &body,
        )
        .await;
        assert_eq!(status, 200, "create-admin: {answer}");
        let admin: serde_json::Value = serde_json::from_str(&answer).expect("an admin's keys");
        let key = |k: &str| admin[k].as_str().expect("a key").to_string();
        let credentials = Credentials::new(
            key("accessKeyId"),
            key("secretAccessKey"),
            None,
            None,
            "other-account",
        );
        self.sdk_config()
            .await
            .to_builder()
            .credentials_provider(SharedCredentialsProvider::new(credentials))
            .build()
    }

    /// An S3 client for the emulator with path-style addressing
    /// (`http://127.0.0.1:PORT/bucket/key`): virtual-host style would need
    /// `bucket.127.0.0.1`, which does not resolve.
    pub async fn s3(&self) -> aws_sdk_s3::Client {
        let config = aws_sdk_s3::config::Builder::from(&self.sdk_config().await)
            .force_path_style(true)
            .build();
        aws_sdk_s3::Client::from_conf(config)
    }

    fn init() -> Result<Emulator, String> {
        match std::env::var(ENDPOINT_ENV) {
            Ok(url) if !url.trim().is_empty() => Emulator::external(url.trim()),
            _ => Emulator::start_with(&[]),
        }
    }

    fn external(url: &str) -> Result<Emulator, String> {
        let (endpoint, host, port) = parse_loopback_endpoint(url)?;
        let addrs: Vec<SocketAddr> = match host.parse::<IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, port)],
            Err(_) => (host.as_str(), port)
                .to_socket_addrs()
                .map_err(|e| format!("{ENDPOINT_ENV}={url}: cannot resolve {host}: {e}"))?
                .collect(),
        };
        if let Some(bad) = addrs.iter().find(|a| !a.ip().is_loopback()) {
            return Err(format!(
                "{ENDPOINT_ENV}={url}: {host} resolves to {bad}, which is not a loopback address"
            ));
        }
        let reachable = addrs
            .iter()
            .any(|a| TcpStream::connect_timeout(a, Duration::from_secs(5)).is_ok());
        if !reachable {
            return Err(format!(
                "{ENDPOINT_ENV}={url}: nothing accepts connections there; start the emulator \
                 or unset {ENDPOINT_ENV} to let the tests start fakecloud themselves"
            ));
        }
        Ok(Emulator {
            endpoint,
            log_path: None,
            version: None,
            process: None,
        })
    }

    fn start_with(extra: &[&str]) -> Result<Emulator, String> {
        let binary = find_fakecloud()?;
        let log_dir = log_dir();
        std::fs::create_dir_all(&log_dir)
            .map_err(|e| format!("cannot create the log directory {}: {e}", log_dir.display()))?;
        let millis = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or_default();
        // Two emulators of one test binary may start in the same millisecond (the shared
        // one and the strict one, for two tests at once): each gets its own log, the file
        // its port is read from, and its own stand-in directory.
        static STARTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let nth = STARTED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let instance = format!("{}-{millis}-{nth}", std::process::id());
        let log_path = log_dir.join(format!("fakecloud-{instance}.log"));
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|e| format!("cannot create {}: {e}", log_path.display()))?;
        let log_err = log
            .try_clone()
            .map_err(|e| format!("cannot duplicate the handle of {}: {e}", log_path.display()))?;

        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(WRAPPER_SCRIPT)
            .arg(&binary)
            .args(["--addr", "127.0.0.1:0"])
            .args(["--region", REGION])
            .args(["--account-id", ACCOUNT_ID])
            .args(["--log-level", "info"])
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(log)
            .stderr(log_err);
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("FAKECLOUD_") {
                command.env_remove(key);
            }
        }
        let standin_dir = standin_dir(&log_dir, &instance);
        command
            .env(CONTAINER_CLI_ENV, STANDIN)
            .env(STANDIN_DIR_ENV, &standin_dir);
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot start {} under sh: {e}", binary.display()))?;
        let stdin = child.stdin.take().expect("the wrapper's stdin was piped");

        // From here on, returning an error drops `stdin` and `child`: the pipe
        // closes and the wrapper stops fakecloud.
        let started = Instant::now();
        let deadline = started + STARTUP_TIMEOUT;
        let mut port = None;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!(
                    "fakecloud ({}) exited during start-up with {status}.\n{}",
                    binary.display(),
                    log_tail(&log_path)
                ));
            }
            if port.is_none() {
                port = read_announced_port(&log_path);
            }
            if let Some(port) = port
                && let Some(version) = health_check(port)
            {
                if version.as_deref() != Some(FAKECLOUD_VERSION) {
                    eprintln!(
                        "warning: fakecloud at {} reports version {version:?}; the tests are \
                         written against {FAKECLOUD_VERSION} (bash .ci/install-fakecloud)",
                        binary.display()
                    );
                }
                return Ok(Emulator {
                    endpoint: format!("http://127.0.0.1:{port}"),
                    log_path: Some(log_path),
                    version,
                    process: Some(ManagedProcess {
                        wrapper_pid: child.id(),
                        _stdin: stdin,
                        child: Mutex::new(child),
                    }),
                });
            }
            if Instant::now() >= deadline {
                let what = match port {
                    Some(port) => format!("did not answer GET /_fakecloud/health on port {port}"),
                    None => "never printed FAKECLOUD_PORT=<port>".to_string(),
                };
                return Err(format!(
                    "fakecloud ({}) {what} within {:?}.\n{}",
                    binary.display(),
                    STARTUP_TIMEOUT,
                    log_tail(&log_path)
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn unwrap_shared(result: &'static Result<Emulator, String>) -> &'static Emulator {
    match result {
        Ok(emulator) => emulator,
        Err(message) => panic!("no AWS emulator for the tests: {message}"),
    }
}

/// Checks that `url` is `http(s)://HOST[:PORT][/]` with a loopback HOST and
/// returns the endpoint without trailing slash, the host and the port.
fn parse_loopback_endpoint(url: &str) -> Result<(String, String, u16), String> {
    let refuse = |why: &str| Err(format!("{ENDPOINT_ENV}={url} is refused: {why}"));
    let (scheme, rest, default_port) = if let Some(rest) = url.strip_prefix("http://") {
        ("http", rest, 80)
    } else if let Some(rest) = url.strip_prefix("https://") {
        ("https", rest, 443)
    } else {
        return refuse("it must start with http:// or https://");
    };
    let authority = rest.trim_end_matches('/');
    if authority.is_empty() || authority.contains(['/', '@', '?', '#']) {
        return refuse("it must be scheme://host[:port] with no user, path or query");
    }
    let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
        let Some((host, tail)) = bracketed.split_once(']') else {
            return refuse("unclosed [ in the host");
        };
        match tail.strip_prefix(':') {
            Some(port) => (host, Some(port)),
            None if tail.is_empty() => (host, None),
            None => return refuse("junk after the IPv6 host"),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    let port = match port {
        Some(port) => match port.parse::<u16>() {
            Ok(port) => port,
            Err(_) => return refuse("the port is not a number"),
        },
        None => default_port,
    };
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
    if !loopback {
        return refuse(
            "the tests only ever talk to an emulator on this machine's loopback \
             (127.0.0.0/8, ::1 or localhost)",
        );
    }
    Ok((format!("{scheme}://{authority}"), host.to_string(), port))
}

fn find_fakecloud() -> Result<PathBuf, String> {
    let how = "Install it with `bash .ci/install-fakecloud` (cargo install of fakecloud \
               0.51.0, ~20-30 min on 2 cores), set FAKECLOUD_BIN to its path, or set \
               STACKFLOW_TEST_ENDPOINT to a running emulator on loopback.";
    if let Some(path) = std::env::var_os(BIN_ENV).filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!("{BIN_ENV}={} is not a file. {how}", path.display()))
        };
    }
    if let Some(paths) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&paths) {
            let candidate = dir.join("fakecloud");
            if candidate.is_file() {
                return Ok(candidate);
            }
        }
    }
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cargo")));
    if let Some(candidate) = cargo_home.map(|home| home.join("bin").join("fakecloud"))
        && candidate.is_file()
    {
        return Ok(candidate);
    }
    Err(format!(
        "the fakecloud emulator was not found ({BIN_ENV} unset, not on PATH, not in \
         $CARGO_HOME/bin). {how}"
    ))
}

fn log_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os(LOG_DIR_ENV).filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    // An integration test runs as <target>/<profile>/deps/<name>-<hash>;
    // cargo's CARGO_TARGET_TMPDIR for it is <target>/tmp.
    let from_exe = std::env::current_exe().ok().and_then(|exe| {
        let deps = exe.parent()?;
        if deps.file_name()? != "deps" {
            return None;
        }
        Some(deps.parent()?.parent()?.join("tmp"))
    });
    from_exe
        .unwrap_or_else(std::env::temp_dir)
        .join("stackflow-emulator")
}

fn read_announced_port(log_path: &Path) -> Option<u16> {
    let text = std::fs::read_to_string(log_path).ok()?;
    text.lines()
        .find_map(|line| line.trim().strip_prefix("FAKECLOUD_PORT="))
        .and_then(|port| port.trim().parse().ok())
}

/// `GET /_fakecloud/health` on 127.0.0.1:`port`: `Some(version)` when it
/// answers 200, `None` when it does not (yet).
fn health_check(port: u16) -> Option<Option<String>> {
    let addr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port);
    let timeout = Duration::from_secs(2);
    let mut stream = TcpStream::connect_timeout(&addr, timeout).ok()?;
    stream.set_read_timeout(Some(timeout)).ok()?;
    stream.set_write_timeout(Some(timeout)).ok()?;
    let request = format!(
        "GET /_fakecloud/health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).ok()?;
    let response = String::from_utf8_lossy(&response);
    let status = response.lines().next()?.split_whitespace().nth(1)?;
    if status != "200" {
        return None;
    }
    let body = response.split_once("\r\n\r\n").map(|(_, body)| body)?;
    let version = serde_json::from_str::<serde_json::Value>(body.trim())
        .ok()
        .and_then(|json| json.get("version")?.as_str().map(str::to_string));
    Some(version)
}

/// The wrapper exits with fakecloud's status: a shell reports a death by signal N as
/// 128 + N.
fn wrapper_status(status: std::process::ExitStatus) -> String {
    match status.code() {
        Some(137) => "fakecloud was killed (SIGKILL, exit 137)".into(),
        Some(code) if code > 128 => {
            format!("fakecloud died of signal {} (exit {code})", code - 128)
        }
        Some(code) => format!("fakecloud exited with {code}"),
        None => format!("the wrapper itself ended: {status}"),
    }
}

fn log_tail(log_path: &Path) -> String {
    const LINES: usize = 40;
    match std::fs::read_to_string(log_path) {
        Ok(text) => {
            let lines: Vec<&str> = text.lines().collect();
            let tail = lines[lines.len().saturating_sub(LINES)..].join("\n");
            format!(
                "Last {} lines of its log {}:\n{tail}",
                LINES.min(lines.len()),
                log_path.display()
            )
        }
        Err(e) => format!("(its log {} cannot be read: {e})", log_path.display()),
    }
}

/// The stand-in's directory of the emulator `instance` whose log is in `log_dir`.
fn standin_dir(log_dir: &Path, instance: &str) -> PathBuf {
    log_dir.join(format!("standin-{instance}"))
}

/// A name no other test (in this or any other process) uses: the prefix
/// (lowercased, characters other than `a-z0-9-` turned into `-`), the process
/// id, a per-process counter and a random suffix, e.g.
/// `stackflow-bucket-48213-7-k3x9qa`. At most 63 characters of `a-z0-9-`,
/// starting with a letter and not ending with `-`: valid as an S3 bucket name
/// and for most other AWS names (tables, queues, topics, roles, functions,
/// state machines, parameters, secrets, log groups, stacks).
pub fn unique_name(prefix: &str) -> String {
    const MAX: usize = 63;
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);

    let mut hasher = RandomState::new().build_hasher();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    hasher.write_u128(nanos);
    hasher.write_u64(count);
    let mut random = hasher.finish();
    let mut suffix = String::with_capacity(6);
    for _ in 0..6 {
        let digit = u32::try_from(random % 36).unwrap_or(0);
        suffix.push(char::from_digit(digit, 36).unwrap_or('0'));
        random /= 36;
    }
    let tail = format!("-{}-{count}-{suffix}", std::process::id());

    let mut head: String = prefix
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9') => c,
            _ => '-',
        })
        .collect();
    if !head.starts_with(|c: char| c.is_ascii_lowercase()) {
        head.insert(0, 't');
    }
    head.truncate(MAX.saturating_sub(tail.len()));
    let head = head.trim_end_matches('-');
    format!("{head}{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_names_are_valid_bucket_names_and_differ() {
        let long = "A_Very Long Prefix/With.Dots_and_UPPERCASE_and_more_and_more_and_more";
        let names: Vec<String> = ["bucket", "", "9lives", long, "---"]
            .iter()
            .map(|p| unique_name(p))
            .collect();
        for name in &names {
            assert!(name.len() <= 63, "{name} is too long");
            assert!(name.starts_with(|c: char| c.is_ascii_lowercase()), "{name}");
            assert!(!name.ends_with('-'), "{name}");
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
                "{name}"
            );
        }
        assert!(names[0].starts_with("bucket-"));
        assert_ne!(unique_name("x"), unique_name("x"));
    }

    #[test]
    fn only_loopback_endpoints_are_accepted() {
        let ok = parse_loopback_endpoint("http://127.0.0.1:4566/").unwrap();
        assert_eq!(
            ok,
            ("http://127.0.0.1:4566".into(), "127.0.0.1".into(), 4566)
        );
        let ok = parse_loopback_endpoint("http://[::1]:4566").unwrap();
        assert_eq!(ok, ("http://[::1]:4566".into(), "::1".into(), 4566));
        assert_eq!(parse_loopback_endpoint("http://localhost").unwrap().2, 80);
        assert!(parse_loopback_endpoint("http://127.8.9.10:1").is_ok());
        for bad in [
            "http://10.0.0.1:4566",
            "http://192.168.1.2:4566",
            "http://example.com:4566",
            "https://s3.amazonaws.com",
            "http://[::2]:4566",
            "127.0.0.1:4566",
            "http://user@127.0.0.1:4566",
            "http://127.0.0.1:4566/path",
            "http://127.0.0.1:port",
        ] {
            assert!(parse_loopback_endpoint(bad).is_err(), "{bad} was accepted");
        }
    }
}
