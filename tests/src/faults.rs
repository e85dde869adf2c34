//! A proxy that injects faults between stackflow and the emulator: on a seeded random
//! share of the requests (10 % by default) it answers a throttling error, answers a
//! plain-text `503`, resets the connection before forwarding, or forwards the request and
//! drops the response (the call happened; the client does not know).
//!
//! [`FaultProxy::start`] listens on `127.0.0.1:0`. Each client connection is served one
//! request at a time (HTTP/1.1 keep-alive, see [`crate::http1`]): the whole request is
//! read, labelled with its service (the SigV4 credential scope) and operation
//! (`X-Amz-Target`, the query protocol's `Action`, S3's `x-id`, else method and path),
//! and a fault is decided. A forwarded request goes to the emulator on a connection of
//! its own, its `Host` header naming the emulator (which writes it into what it answers:
//! an SQS queue's URL), and its whole response is read before anything is sent back.
//!
//! # The faults
//!
//! - [`Fault::Throttle`]: the throttling error of the protocol the request speaks:
//!   `400 {"__type":"ThrottlingException"}` for the awsJson protocols (`X-Amz-Target`:
//!   DynamoDB, SSM, SQS, Cloud Control, Logs, ...), `400 <ErrorResponse>` with code
//!   `Throttling` for the query protocols (SNS, IAM, STS, ...), `503
//!   RequestLimitExceeded` for EC2, `503 SlowDown` for S3, `429
//!   TooManyRequestsException` for restJson (Lambda).
//! - [`Fault::Unavailable`]: `503 Service Unavailable` with a plain-text body, as a load
//!   balancer answers (no error code to parse).
//! - [`Fault::Reset`]: the connection is reset (`SO_LINGER` 0) after the request was
//!   read and before it is forwarded: the call did not happen.
//! - [`Fault::Drop`]: the request is forwarded, its answer awaited, then the client's
//!   connection is closed without an answer: the call happened.
//!
//! # Which requests
//!
//! Whether the `n`th request of an operation faults, and how, is a pure function of the
//! seed, the service and operation, and `n` ([`decision`]), so a run with the same seed
//! makes the same decisions (up to the order in which concurrent requests of one
//! operation arrive). [`FaultConfig::from_env`] takes the seed from
//! `STACKFLOW_FAULT_SEED` (else a random one), the rate from `STACKFLOW_FAULT_RATE`
//! (`0.1` or `10%`) and the faults from `STACKFLOW_FAULT_KINDS`
//! (`throttle,503,reset,drop`); the proxy prints its seed when it starts.
//!
//! # Rate-limit mode
//!
//! With [`FaultConfig::rate_limit`], each service also throttles the requests above a
//! set rate ([`RateLimit`]: a token bucket per service, optionally answering
//! `Retry-After`), as AWS does: what a deploy's adaptive concurrency must live with. Such
//! answers count as `throttle` faults.
//!
//! The proxy counts, per service and operation, the requests it saw and the faults it
//! injected ([`FaultProxy::stats`], [`FaultProxy::report`]). Every faulted request is
//! one that its caller had to send again.

use std::collections::BTreeMap;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::http1::{Response, forward, read_request, upstream_addr};

mod rate;
mod wire;

use rate::Buckets;
pub use rate::RateLimit;
use wire::{answer, operation, throttle_answer, with_header};

/// The seed to replay.
pub const SEED_ENV: &str = "STACKFLOW_FAULT_SEED";
/// The share of requests that fault: `0.1` or `10%`.
pub const RATE_ENV: &str = "STACKFLOW_FAULT_RATE";
/// The faults to inject, comma-separated: `throttle`, `503`, `reset`, `drop`.
pub const KINDS_ENV: &str = "STACKFLOW_FAULT_KINDS";
/// The default share of requests that fault.
pub const DEFAULT_RATE: f64 = 0.10;

/// One fault the proxy injects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fault {
    /// The protocol's throttling error.
    Throttle,
    /// A plain-text `503`.
    Unavailable,
    /// The connection reset before the request is forwarded.
    Reset,
    /// The request forwarded and its answer dropped.
    Drop,
}

impl Fault {
    /// Every fault, in the order of [`OpStats::faults`].
    pub const ALL: [Fault; 4] = [
        Fault::Throttle,
        Fault::Unavailable,
        Fault::Reset,
        Fault::Drop,
    ];

    /// Its name in `STACKFLOW_FAULT_KINDS` and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Fault::Throttle => "throttle",
            Fault::Unavailable => "503",
            Fault::Reset => "reset",
            Fault::Drop => "drop",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// What the proxy injects.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultConfig {
    /// The seed of the decisions.
    pub seed: u64,
    /// The share of requests that fault, in `[0, 1]`.
    pub rate: f64,
    /// The faults to choose from (evenly).
    pub kinds: Vec<Fault>,
    /// Only requests of these operations fault (`CreateBucket`, `PutParameter`); every
    /// request may when empty.
    pub operations: Vec<String>,
    /// At most this many faults per operation.
    pub at_most: Option<u64>,
    /// Requests of these operations never fault.
    pub spared: Vec<String>,
    /// Besides the seeded faults, throttle each service above this rate.
    pub rate_limit: Option<RateLimit>,
}

impl FaultConfig {
    /// Every fault at [`DEFAULT_RATE`].
    pub fn new(seed: u64) -> FaultConfig {
        FaultConfig {
            seed,
            rate: DEFAULT_RATE,
            kinds: Fault::ALL.to_vec(),
            operations: Vec::new(),
            at_most: None,
            spared: Vec::new(),
            rate_limit: None,
        }
    }

    /// No seeded faults: only each service throttling above `limit`.
    pub fn rate_limited(limit: RateLimit) -> FaultConfig {
        FaultConfig {
            rate: 0.0,
            rate_limit: Some(limit),
            ..FaultConfig::new(0)
        }
    }

    /// Only `fault`, to the first `count` requests of `operation`.
    pub fn first(operation: &str, fault: Fault, count: u64) -> FaultConfig {
        FaultConfig {
            rate: 1.0,
            kinds: vec![fault],
            operations: vec![operation.to_string()],
            at_most: Some(count),
            ..FaultConfig::new(0)
        }
    }

    /// From `STACKFLOW_FAULT_SEED` (else a random seed, one per process),
    /// `STACKFLOW_FAULT_RATE` and `STACKFLOW_FAULT_KINDS`. Panics on a value it cannot
    /// read.
    pub fn from_env() -> FaultConfig {
        let var = |name| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let seed = var(SEED_ENV).map_or_else(process_seed, |v| {
            v.trim()
                .parse()
                .unwrap_or_else(|_| panic!("{SEED_ENV}={v}: not a number"))
        });
        let mut config = FaultConfig::new(seed);
        if let Some(v) = var(RATE_ENV) {
            config.rate = parse_rate(&v).unwrap_or_else(|| panic!("{RATE_ENV}={v}: not a rate"));
        }
        if let Some(v) = var(KINDS_ENV) {
            config.kinds = v
                .split(',')
                .map(|k| {
                    let k = k.trim();
                    Fault::ALL
                        .into_iter()
                        .find(|f| f.name() == k)
                        .unwrap_or_else(|| panic!("{KINDS_ENV}: unknown fault {k}"))
                })
                .collect();
        }
        config
    }
}

/// `0.1` or `10%`, within `[0, 1]`.
fn parse_rate(v: &str) -> Option<f64> {
    let v = v.trim();
    let rate = match v.strip_suffix('%') {
        Some(percent) => percent.trim().parse::<f64>().ok()? / 100.0,
        None => v.parse().ok()?,
    };
    (0.0..=1.0).contains(&rate).then_some(rate)
}

/// A random seed, the same for every proxy of this process (one seed replays a run).
fn process_seed() -> u64 {
    static SEED: OnceLock<u64> = OnceLock::new();
    *SEED.get_or_init(random_seed)
}

fn random_seed() -> u64 {
    let mut hasher = RandomState::new().build_hasher();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    hasher.write_u128(nanos);
    hasher.write_u32(std::process::id());
    // Short enough to type.
    hasher.finish() % 1_000_000_000
}

fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Whether the `n`th request (from 0) of `operation` faults, and how: a pure function of
/// its arguments.
pub fn decision(seed: u64, operation: &str, n: u64, rate: f64, kinds: &[Fault]) -> Option<Fault> {
    let r = splitmix(seed ^ splitmix(fnv1a(operation) ^ splitmix(n)));
    let unit = (r >> 11) as f64 / (1u64 << 53) as f64;
    if kinds.is_empty() || unit >= rate {
        return None;
    }
    let pick = splitmix(r) % kinds.len() as u64;
    kinds.get(usize::try_from(pick).ok()?).copied()
}

/// What the proxy saw of one operation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpStats {
    /// The service (SigV4 scope), `?` when the request was not signed.
    pub service: String,
    /// The operation.
    pub operation: String,
    /// Requests seen.
    pub seen: u64,
    /// Faults injected, in the order of [`Fault::ALL`].
    pub faults: [u64; 4],
}

impl OpStats {
    /// Requests that faulted: each one its caller had to send again.
    pub fn faulted(&self) -> u64 {
        self.faults.iter().sum()
    }
}

#[derive(Debug)]
struct Shared {
    config: FaultConfig,
    /// The rate, as `f64` bits (it may change).
    rate: AtomicU64,
    ops: Mutex<BTreeMap<(String, String), OpStats>>,
    buckets: Option<Mutex<Buckets>>,
}

impl Shared {
    /// Counts a request of `service` `operation` and decides its fault, with the
    /// `Retry-After` of a throttling answer of the rate limit (when it sends one).
    fn decide(
        &self,
        service: &str,
        operation: &str,
    ) -> (Option<Fault>, Option<std::time::Duration>) {
        let mut ops = self.ops.lock().unwrap_or_else(|p| p.into_inner());
        let stats = ops
            .entry((service.to_string(), operation.to_string()))
            .or_insert_with(|| OpStats {
                service: service.to_string(),
                operation: operation.to_string(),
                ..OpStats::default()
            });
        let config = &self.config;
        let rate = f64::from_bits(self.rate.load(Ordering::Relaxed));
        let key = format!("{service}:{operation}");
        let named = |ops: &[String]| ops.iter().any(|o| o == operation);
        let targeted =
            (config.operations.is_empty() || named(&config.operations)) && !named(&config.spared);
        let spent = config.at_most.is_some_and(|n| stats.faulted() >= n);
        let mut fault = decision(config.seed, &key, stats.seen, rate, &config.kinds)
            .filter(|_| targeted && !spent);
        let mut retry_after = None;
        if fault.is_none()
            && let Some(buckets) = &self.buckets
        {
            let mut buckets = buckets.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(wait) = buckets.take(service, std::time::Instant::now()) {
                fault = Some(Fault::Throttle);
                retry_after = buckets.retry_after().then_some(wait);
            }
        }
        stats.seen += 1;
        if let Some(f) = fault {
            stats.faults[f.index()] += 1;
        }
        (fault, retry_after)
    }
}

/// A running fault proxy. Dropping it stops accepting connections.
#[derive(Debug)]
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl FaultProxy {
    /// Starts a proxy to `upstream` (`http://127.0.0.1:4566`, or `127.0.0.1:4566`) that
    /// injects the faults of `config`, and prints its seed.
    pub async fn start(upstream: &str, config: FaultConfig) -> std::io::Result<FaultProxy> {
        let upstream = upstream_addr(upstream).await?;
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let kinds: Vec<&str> = config.kinds.iter().map(|k| k.name()).collect();
        let mut only = String::new();
        if !config.operations.is_empty() {
            only = format!(" of {}", config.operations.join(", "));
        }
        if !config.spared.is_empty() {
            only.push_str(&format!(" except {}", config.spared.join(", ")));
        }
        eprintln!(
            "fault proxy {addr}: seed {} ({SEED_ENV}={} replays it): {:.1}% of requests{only} fault ({})",
            config.seed,
            config.seed,
            config.rate * 100.0,
            kinds.join(", ")
        );
        if let Some(limit) = &config.rate_limit {
            eprintln!(
                "fault proxy {addr}: each service throttles above {} requests/s (burst {})",
                limit.per_second, limit.burst
            );
        }
        let shared = Arc::new(Shared {
            rate: AtomicU64::new(config.rate.to_bits()),
            buckets: config
                .rate_limit
                .clone()
                .map(|l| Mutex::new(Buckets::new(l))),
            config,
            ops: Mutex::new(BTreeMap::new()),
        });
        let accept = {
            let shared = shared.clone();
            tokio::spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    tokio::spawn(serve(client, upstream, shared.clone()));
                }
            })
        };
        Ok(FaultProxy {
            addr,
            shared,
            accept,
        })
    }

    /// The proxy's endpoint URL, `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The address the proxy listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The seed of its decisions.
    pub fn seed(&self) -> u64 {
        self.shared.config.seed
    }

    /// The share of requests that fault.
    pub fn rate(&self) -> f64 {
        f64::from_bits(self.shared.rate.load(Ordering::Relaxed))
    }

    /// Changes the share of requests that fault from now on (0: none).
    pub fn set_rate(&self, rate: f64) {
        self.shared.rate.store(rate.to_bits(), Ordering::Relaxed);
    }

    /// What it saw, per service and operation, in order.
    pub fn stats(&self) -> Vec<OpStats> {
        let ops = self.shared.ops.lock().unwrap_or_else(|p| p.into_inner());
        ops.values().cloned().collect()
    }

    /// How many requests of `operation` (any service) got `fault`.
    pub fn faults_of(&self, operation: &str, fault: Fault) -> u64 {
        let stats = self
            .stats()
            .into_iter()
            .filter(|s| s.operation == operation);
        stats.map(|s| s.faults[fault.index()]).sum()
    }

    /// The totals of [`FaultProxy::stats`].
    pub fn totals(&self) -> OpStats {
        let mut total = OpStats::default();
        for s in self.stats() {
            total.seen += s.seen;
            for (t, n) in total.faults.iter_mut().zip(s.faults) {
                *t += n;
            }
        }
        total
    }

    /// A table of [`FaultProxy::stats`]: per operation, the requests seen, the faults
    /// injected by kind, and the retries per call (faulted requests over the others).
    pub fn report(&self) -> String {
        let mut out = format!(
            "{:<16} {:<34} {:>6} {:>8} {:>8} {:>5} {:>5} {:>5} {:>8}\n",
            "service",
            "operation",
            "seen",
            "faulted",
            "throttle",
            "503",
            "reset",
            "drop",
            "retries"
        );
        let mut rows = self.stats();
        rows.push(OpStats {
            service: "all".into(),
            operation: String::new(),
            ..self.totals()
        });
        for s in rows {
            let [throttle, unavailable, reset, drop] = s.faults;
            let calls = s.seen - s.faulted();
            let per_call = if calls == 0 {
                0.0
            } else {
                s.faulted() as f64 / calls as f64
            };
            out.push_str(&format!(
                "{:<16} {:<34} {:>6} {:>8} {:>8} {:>5} {:>5} {:>5} {:>8.3}\n",
                s.service,
                s.operation,
                s.seen,
                s.faulted(),
                throttle,
                unavailable,
                reset,
                drop,
                per_call
            ));
        }
        out
    }
}

/// Serves one client connection, one request at a time.
async fn serve(mut client: TcpStream, upstream: SocketAddr, shared: Arc<Shared>) {
    let _ = client.set_nodelay(true);
    let mut buf = Vec::new();
    while let Ok(Some((request, head))) = read_request(&mut client, &mut buf).await {
        let (service, operation) = operation(&head);
        let (fault, retry_after) = shared.decide(&service, &operation);
        let answer = match fault {
            Some(Fault::Throttle) => match retry_after {
                Some(wait) => with_header(
                    throttle_answer(&head),
                    &format!("retry-after: {:.3}", wait.as_secs_f64()),
                ),
                None => throttle_answer(&head),
            },
            Some(Fault::Unavailable) => answer(
                &head,
                "503 Service Unavailable",
                "text/plain",
                "",
                b"Service Unavailable",
            ),
            Some(Fault::Reset) => break,
            None | Some(Fault::Drop) => match forward(upstream, &request, &head.method).await {
                // Closed without an answer: the client reads the end of the connection.
                Ok(_) if fault == Some(Fault::Drop) => return,
                Ok(Response { bytes, close, .. }) => {
                    if client.write_all(&bytes).await.is_err() || close {
                        return;
                    }
                    continue;
                }
                Err(_) => break,
            },
        };
        if client.write_all(&answer).await.is_err() {
            return;
        }
    }
    // A reset: no FIN, an RST.
    let _ = client.set_zero_linger();
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt;

    use super::*;
    use crate::http1::read_response;
    use crate::http1::tests::ok_server;

    const SIGNED: &str = "Authorization: AWS4-HMAC-SHA256 Credential=test/20240101/us-east-1";

    fn request(service: &str, extra: &str, path: &str, body: &str) -> Vec<u8> {
        format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\n{SIGNED}/{service}/aws4_request, SignedHeaders=host\r\n{extra}Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    }

    fn json(service: &str, target: &str) -> Vec<u8> {
        let extra =
            format!("X-Amz-Target: {target}\r\nContent-Type: application/x-amz-json-1.1\r\n");
        request(service, &extra, "/", "{}")
    }

    /// Sends `request` through a proxy that injects only `fault`, and returns what came
    /// back (or the error) and how many requests the emulator got.
    async fn through(fault: Fault, request: &[u8]) -> (std::io::Result<Vec<u8>>, u64) {
        let (server, seen) = ok_server().await;
        let config = FaultConfig {
            rate: 1.0,
            kinds: vec![fault],
            ..FaultConfig::new(7)
        };
        let proxy = FaultProxy::start(&server.to_string(), config)
            .await
            .unwrap();
        let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
        s.write_all(request).await.unwrap();
        let mut got = Vec::new();
        let read = s.read_to_end(&mut got).await.map(|_| got);
        let stats = proxy.stats();
        assert_eq!(stats.len(), 1);
        assert_eq!((stats[0].seen, stats[0].faulted()), (1, 1));
        (read, seen.load(Ordering::SeqCst))
    }

    /// The answer of a proxy that injects only `fault` (it keeps the connection open).
    async fn text_of(fault: Fault, request: &[u8]) -> String {
        let (server, _) = ok_server().await;
        let config = FaultConfig {
            rate: 1.0,
            kinds: vec![fault],
            ..FaultConfig::new(7)
        };
        let proxy = FaultProxy::start(&server.to_string(), config)
            .await
            .unwrap();
        let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
        s.write_all(request).await.unwrap();
        let response = read_response(&mut s, &mut Vec::new(), "POST")
            .await
            .unwrap();
        String::from_utf8(response.bytes).unwrap()
    }

    #[tokio::test]
    async fn throttles_in_the_protocol_of_the_request() {
        let ddb = text_of(
            Fault::Throttle,
            &json("dynamodb", "DynamoDB_20120810.GetItem"),
        )
        .await;
        assert!(ddb.starts_with("HTTP/1.1 400 "), "{ddb}");
        assert!(ddb.contains("application/x-amz-json-1.1"), "{ddb}");
        assert!(ddb.contains(r#"{"__type":"ThrottlingException""#), "{ddb}");
        let form = "Content-Type: application/x-www-form-urlencoded\r\n";
        let sns = text_of(
            Fault::Throttle,
            &request("sns", form, "/", "Action=CreateTopic&Name=t"),
        )
        .await;
        assert!(sns.starts_with("HTTP/1.1 400 "), "{sns}");
        assert!(
            sns.contains("<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code>"),
            "{sns}"
        );
        let ec2 = request("ec2", form, "/", "Action=DescribeAvailabilityZones");
        let ec2 = text_of(Fault::Throttle, &ec2).await;
        assert!(ec2.starts_with("HTTP/1.1 503 "), "{ec2}");
        assert!(
            ec2.contains("<Errors><Error><Code>RequestLimitExceeded</Code>"),
            "{ec2}"
        );
        let s3 = text_of(
            Fault::Throttle,
            &request("s3", "", "/bucket/key?x-id=PutObject", "x"),
        )
        .await;
        assert!(s3.starts_with("HTTP/1.1 503 "), "{s3}");
        assert!(s3.contains("<Code>SlowDown</Code>"), "{s3}");
        let lambda = text_of(
            Fault::Throttle,
            &request("lambda", "", "/2015-03-31/functions", "{}"),
        )
        .await;
        assert!(lambda.starts_with("HTTP/1.1 429 "), "{lambda}");
        assert!(
            lambda.contains("x-amzn-ErrorType: TooManyRequestsException"),
            "{lambda}"
        );
        let plain = text_of(Fault::Unavailable, &json("ssm", "AmazonSSM.PutParameter")).await;
        assert!(plain.starts_with("HTTP/1.1 503 "), "{plain}");
        assert!(plain.ends_with("\r\n\r\nService Unavailable"), "{plain}");
    }

    #[tokio::test]
    async fn a_reset_never_reaches_the_emulator_and_a_drop_does() {
        let (read, seen) = through(Fault::Reset, &json("ssm", "AmazonSSM.PutParameter")).await;
        assert_eq!(seen, 0);
        match read {
            Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset),
            Ok(bytes) => assert!(bytes.is_empty(), "{bytes:?}"),
        }
        let (read, seen) = through(Fault::Drop, &json("ssm", "AmazonSSM.PutParameter")).await;
        assert_eq!(seen, 1, "the call happened");
        assert_eq!(read.unwrap(), b"", "and no answer came back");
    }

    #[tokio::test]
    async fn without_faults_everything_is_forwarded_and_counted() {
        let (server, seen) = ok_server().await;
        let proxy = FaultProxy::start(&server.to_string(), FaultConfig::new(1))
            .await
            .unwrap();
        proxy.set_rate(0.0);
        let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
        for r in [
            json("ssm", "AmazonSSM.PutParameter"),
            request("s3", "", "/b/some/key?x-id=GetObject", ""),
            request("s3", "", "/b?tagging", ""),
            request("lambda", "", "/2015-03-31/functions/my-fn-1/policy", ""),
            json("ssm", "AmazonSSM.PutParameter"),
        ] {
            s.write_all(&r).await.unwrap();
            let answer = read_response(&mut s, &mut Vec::new(), "POST")
                .await
                .unwrap();
            assert!(answer.bytes.starts_with(b"HTTP/1.1 200 "));
        }
        assert_eq!(seen.load(Ordering::SeqCst), 5);
        let ops: Vec<(String, String, u64)> = proxy
            .stats()
            .into_iter()
            .map(|s| (s.service, s.operation, s.seen))
            .collect();
        let want = [
            ("lambda", "POST /{}/functions/{}/policy", 1),
            ("s3", "GetObject", 1),
            ("s3", "POST /{bucket}?tagging", 1),
            ("ssm", "PutParameter", 2),
        ];
        let want: Vec<(String, String, u64)> = want
            .iter()
            .map(|(a, b, n)| (a.to_string(), b.to_string(), *n))
            .collect();
        assert_eq!(ops, want);
        assert_eq!(proxy.totals().faulted(), 0);
    }

    #[tokio::test]
    async fn faults_go_to_the_chosen_operations_only() {
        let (server, seen) = ok_server().await;
        let first = FaultConfig::first("PutParameter", Fault::Throttle, 2);
        let spared = FaultConfig {
            rate: 1.0,
            kinds: vec![Fault::Unavailable],
            spared: vec!["GetParameter".into()],
            ..FaultConfig::new(3)
        };
        let put = json("ssm", "AmazonSSM.PutParameter");
        let get = json("ssm", "AmazonSSM.GetParameter");
        let cases = [
            (
                first,
                [&put, &put, &get, &put, &put],
                ["400", "400", "200", "200", "200"],
            ),
            (
                spared,
                [&get, &put, &get, &put, &put],
                ["200", "503", "200", "503", "503"],
            ),
        ];
        for (config, requests, statuses) in cases {
            let proxy = FaultProxy::start(&server.to_string(), config)
                .await
                .unwrap();
            let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
            for (r, status) in requests.iter().zip(statuses) {
                s.write_all(r).await.unwrap();
                let answer = read_response(&mut s, &mut Vec::new(), "POST")
                    .await
                    .unwrap();
                let head = format!("HTTP/1.1 {status} ");
                assert!(answer.bytes.starts_with(head.as_bytes()), "{status}");
            }
        }
        assert_eq!(seen.load(Ordering::SeqCst), 3 + 2);
    }

    #[tokio::test]
    async fn the_rate_limit_throttles_above_the_rate_with_retry_after() {
        let (server, seen) = ok_server().await;
        let config = FaultConfig::rate_limited(RateLimit {
            burst: 2.0,
            retry_after: true,
            services: vec!["ssm".into()],
            ..RateLimit::new(1.0)
        });
        let proxy = FaultProxy::start(&server.to_string(), config)
            .await
            .unwrap();
        let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
        let put = json("ssm", "AmazonSSM.PutParameter");
        let mut heads = Vec::new();
        for r in [&put, &put, &put, &json("sqs", "AmazonSQS.CreateQueue")] {
            s.write_all(r).await.unwrap();
            let answer = read_response(&mut s, &mut Vec::new(), "POST")
                .await
                .unwrap();
            heads.push(String::from_utf8(answer.bytes).unwrap());
        }
        assert!(heads[0].starts_with("HTTP/1.1 200 ") && heads[1].starts_with("HTTP/1.1 200 "));
        // Two served at once, then one a second: the next in about a second.
        let head = "HTTP/1.1 400 Bad Request\r\nretry-after: ";
        assert!(heads[2].starts_with(head), "{}", heads[2]);
        let after: f64 = heads[2][head.len()..]
            .split("\r\n")
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(after > 0.9 && after <= 1.0, "{after}");
        assert!(heads[2].contains("ThrottlingException"), "{}", heads[2]);
        assert!(heads[3].starts_with("HTTP/1.1 200 "), "sqs is not limited");
        assert_eq!(seen.load(Ordering::SeqCst), 3);
        assert_eq!(proxy.faults_of("PutParameter", Fault::Throttle), 1);
    }

    #[test]
    fn decisions_are_seeded_and_near_the_rate() {
        let kinds = Fault::ALL;
        let run = |seed| -> Vec<Option<Fault>> {
            (0..10_000)
                .map(|n| decision(seed, "sqs:CreateQueue", n, 0.1, &kinds))
                .collect()
        };
        assert_eq!(run(42), run(42));
        assert_ne!(run(42), run(43));
        let faults = run(42).into_iter().flatten().collect::<Vec<_>>();
        assert!((900..1100).contains(&faults.len()), "{}", faults.len());
        for kind in kinds {
            let n = faults.iter().filter(|f| **f == kind).count();
            assert!((180..320).contains(&n), "{kind:?}: {n}");
        }
        assert_eq!(decision(42, "x", 0, 0.0, &kinds), None);
        assert!(decision(42, "x", 0, 1.0, &kinds).is_some());
        assert_eq!(parse_rate("10%"), Some(0.1));
        assert_eq!(parse_rate("0.25"), Some(0.25));
        assert_eq!(parse_rate("2"), None);
    }
}
