//! The CLI binary: its start-up time to the first AWS call.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use stackflow_tests::emulator::REGION;
use stackflow_tests::latency::LatencyProxy;
use stackflow_tests::unique_name;

/// The CLI binary to time.
pub(crate) fn cli_binary() -> Option<(PathBuf, String)> {
    if let Some(p) = std::env::var_os("STACKFLOW_BENCH_CLI") {
        return Some((PathBuf::from(p), "STACKFLOW_BENCH_CLI".into()));
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    ["release", "debug"].into_iter().find_map(|profile| {
        let bin = target.join(profile).join("stackflow");
        bin.exists()
            .then(|| (bin.canonicalize().unwrap_or(bin), profile.to_string()))
    })
}

/// What the CLI's runs measured.
#[derive(Debug, Default)]
pub(crate) struct Startup {
    /// From spawning the CLI to its first request reaching the proxy, in ms, per run.
    pub(crate) first_call: Vec<f64>,
    /// From spawning it to its exit, in ms, per run.
    pub(crate) total: Vec<f64>,
    /// Requests per run.
    pub(crate) requests: Vec<u64>,
    /// The operations of the last run, in order.
    pub(crate) operations: Vec<String>,
}

/// The CLI (`bin`, under `time` when given) with its AWS calls sent to `proxy`, its
/// local store at `store`, and no AWS configuration of the machine (`dir` holds none).
fn command(
    bin: &Path,
    time: Option<&Path>,
    proxy: &LatencyProxy,
    dir: &Path,
    store: &Path,
) -> Command {
    let mut cmd = match time {
        Some(time) => {
            let mut c = Command::new(time);
            c.arg("-v").arg(bin);
            c
        }
        None => Command::new(bin),
    };
    cmd.arg("--endpoint-url")
        .arg(proxy.endpoint())
        .arg("--store")
        .arg(format!("local:{}", store.display()))
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("STACKFLOW_YES", "1")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", REGION)
        .env("AWS_CONFIG_FILE", dir.join("no-config"))
        .env("AWS_SHARED_CREDENTIALS_FILE", dir.join("no-credentials"))
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_ENDPOINT_URL")
        .env_remove("STACKFLOW_STORE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// One CLI command's run: its wall time, requests, peak memory and exit.
#[derive(Debug)]
pub(crate) struct CliRun {
    pub(crate) wall: Duration,
    pub(crate) requests: u64,
    /// The peak resident set size (`time -v`'s maximum), in KiB.
    pub(crate) max_rss_kib: Option<u64>,
    pub(crate) ok: bool,
    pub(crate) stderr: String,
}

/// Runs the CLI with `args` (under `/usr/bin/time -v` when there is one, for its peak
/// memory) against `proxy`, with its store in `dir`.
pub(crate) async fn cli_run(
    bin: &Path,
    proxy: &LatencyProxy,
    dir: &Path,
    args: &[String],
) -> Result<CliRun, String> {
    let time = Path::new("/usr/bin/time");
    let time = time.exists().then_some(time);
    let mut cmd = command(bin, time, proxy, dir, &dir.join("store"));
    cmd.args(args);
    proxy.reset();
    let started = Instant::now();
    let output = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("{}: {e}", bin.display()))?;
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    let max_rss_kib = stderr.lines().find_map(|l| {
        l.trim()
            .strip_prefix("Maximum resident set size (kbytes):")
            .and_then(|v| v.trim().parse().ok())
    });
    Ok(CliRun {
        wall: started.elapsed(),
        requests: proxy.requests(),
        max_rss_kib,
        ok: output.status.success(),
        stderr,
    })
}

pub(crate) fn median(v: &[f64]) -> f64 {
    let mut sorted = v.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Runs the CLI's deploy of a one-resource template [`crate::STARTUP_RUNS`] times.
pub(crate) async fn cli_startup(proxy: &LatencyProxy, bin: &Path) -> Result<Startup, String> {
    let dir = std::env::temp_dir().join(unique_name("stackflow-bench-cli"));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let mut out = Startup::default();
    for _ in 0..crate::STARTUP_RUNS {
        let name = unique_name("startup");
        let file = dir.join(format!("{name}.json"));
        let template = serde_json::json!({
            "Resources": {"P": {"Type": "AWS::SSM::Parameter", "Properties": {"Type": "String", "Value": "x"}}}
        });
        std::fs::write(&file, template.to_string()).map_err(|e| e.to_string())?;
        let store = dir.join(&name);
        proxy.reset();
        let mut cmd = command(bin, None, proxy, &dir, &store);
        cmd.arg("deploy").arg(&file);
        let spawned = Instant::now();
        let output = tokio::task::spawn_blocking(move || cmd.output())
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("{}: {e}", bin.display()))?;
        let total = spawned.elapsed();
        let Some(first) = proxy.first_request_at() else {
            return Err(format!(
                "the CLI made no AWS call (exit {:?}): {}",
                output.status.code(),
                String::from_utf8_lossy(&output.stderr)
            ));
        };
        if !output.status.success() {
            eprintln!(
                "  note: the CLI's deploy exited {:?}: {}",
                output.status.code(),
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        let mut log = proxy.log();
        log.sort_by_key(|r| r.at);
        out.operations = log.into_iter().map(|r| r.label).collect();
        out.first_call.push((first - spawned).as_secs_f64() * 1e3);
        out.total.push(total.as_secs_f64() * 1e3);
        out.requests.push(proxy.requests());
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(out)
}
