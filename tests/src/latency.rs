//! A TCP proxy that delays every request by a fixed latency, to measure how a deploy
//! behaves when each AWS call costs a round trip to a distant region.
//!
//! [`LatencyProxy::start`] listens on `127.0.0.1:0` and forwards each connection to the
//! upstream (the emulator). Bytes from the client to the server are timestamped when they
//! arrive and written to the server `latency` later, in order: a request is delayed by the
//! latency once, however it is split into chunks, and requests that are sent at the same
//! time (on different connections) overlap instead of queueing behind each other. Bytes
//! from the server to the client pass through undelayed.
//!
//! The proxy also parses the client's HTTP/1.1 stream (request heads, `Content-Length` and
//! chunked bodies, keep-alive connections with many requests; see [`crate::http1`]) to
//! count requests and to label each one with its AWS operation (`X-Amz-Target`, else the
//! query protocol's `Action`, else method and path).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::http1::{RequestParser, upstream_addr};

/// One request the proxy saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRecord {
    /// When its first byte reached the proxy.
    pub at: Instant,
    /// Its AWS operation (`AmazonSSM.PutParameter`, `CreateTopic`) or `METHOD /path`.
    pub label: String,
}

/// The latency a benchmark gives every AWS call: `STACKFLOW_BENCH_LATENCY_MS` (default 108
/// ms, a round trip to a distant region).
pub fn bench_latency() -> Duration {
    let ms = std::env::var("STACKFLOW_BENCH_LATENCY_MS")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(108);
    Duration::from_millis(ms)
}

#[derive(Debug, Default)]
struct Shared {
    latency_nanos: AtomicU64,
    requests: AtomicU64,
    first: Mutex<Option<Instant>>,
    log: Mutex<Vec<RequestRecord>>,
}

impl Shared {
    fn latency(&self) -> Duration {
        Duration::from_nanos(self.latency_nanos.load(Ordering::Relaxed))
    }

    fn started(&self, at: Instant) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        let mut first = self.first.lock().unwrap_or_else(|p| p.into_inner());
        if first.is_none() {
            *first = Some(at);
        }
    }

    fn finished(&self, record: RequestRecord) {
        self.log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(record);
    }
}

/// A running latency proxy. Dropping it stops accepting connections.
#[derive(Debug)]
pub struct LatencyProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

impl Drop for LatencyProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl LatencyProxy {
    /// Starts a proxy to `upstream` (`http://127.0.0.1:4566`, or `127.0.0.1:4566`) that
    /// delays every request by `latency`.
    pub async fn start(upstream: &str, latency: Duration) -> std::io::Result<LatencyProxy> {
        let upstream = upstream_addr(upstream).await?;
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        shared
            .latency_nanos
            .store(nanos(latency), Ordering::Relaxed);
        let accept = {
            let shared = shared.clone();
            tokio::spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    tokio::spawn(serve(client, upstream, shared.clone()));
                }
            })
        };
        Ok(LatencyProxy {
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

    /// The latency added to each request.
    pub fn latency(&self) -> Duration {
        self.shared.latency()
    }

    /// Changes the latency of the bytes that arrive from now on.
    pub fn set_latency(&self, latency: Duration) {
        self.shared
            .latency_nanos
            .store(nanos(latency), Ordering::Relaxed);
    }

    /// The number of requests seen (since the start or the last [`reset`](Self::reset)).
    pub fn requests(&self) -> u64 {
        self.shared.requests.load(Ordering::Relaxed)
    }

    /// When the first byte of the first request arrived.
    pub fn first_request_at(&self) -> Option<Instant> {
        *self.shared.first.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The requests whose body has been read in full, in the order they were completed.
    pub fn log(&self) -> Vec<RequestRecord> {
        self.shared
            .log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Forgets the requests seen so far.
    pub fn reset(&self) {
        self.shared.requests.store(0, Ordering::Relaxed);
        *self.shared.first.lock().unwrap_or_else(|p| p.into_inner()) = None;
        self.shared
            .log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Forwards one connection: client to server delayed, server to client as is.
async fn serve(client: TcpStream, upstream: SocketAddr, shared: Arc<Shared>) {
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();

    let reader = {
        let shared = shared.clone();
        async move {
            let mut parser = Parser::default();
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let n = match client_read.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                let now = Instant::now();
                parser.feed(&buf[..n], now, &shared);
                let due = now + shared.latency();
                if tx.send((due, buf[..n].to_vec())).is_err() {
                    break;
                }
            }
        }
    };
    let writer = async move {
        while let Some((due, data)) = rx.recv().await {
            tokio::time::sleep_until(due.into()).await;
            if server_write.write_all(&data).await.is_err() {
                return;
            }
        }
        let _ = server_write.shutdown().await;
    };
    let back = async move {
        let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
        let _ = client_write.shutdown().await;
    };
    let forward = tokio::spawn(async move {
        tokio::join!(reader, writer);
    });
    back.await;
    // The server closed the connection: nothing more can be delivered.
    forward.abort();
}

/// Counts and labels the requests of one connection's client-to-server bytes.
#[derive(Debug, Default)]
struct Parser(RequestParser);

impl Parser {
    fn feed(&mut self, mut data: &[u8], now: Instant, shared: &Shared) {
        while !data.is_empty() {
            let fed = self.0.feed(data, now);
            if let Some(at) = fed.head_at {
                shared.started(at);
            }
            // A request is logged as soon as its label is known: a request the server
            // answers (and closes) before its body is through still counts.
            let known = fed
                .labelled
                .or(fed.complete.filter(|(_, head)| head.is_form()));
            if let Some((at, head)) = known {
                shared.finished(RequestRecord {
                    at,
                    label: head.label(),
                });
            }
            data = &data[fed.consumed..];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn http_server() -> SocketAddr {
        crate::http1::tests::ok_server().await.0
    }

    /// Sends `request` and reads the `200 ok` answer.
    async fn exchange(s: &mut TcpStream, parts: &[&[u8]]) {
        for (i, p) in parts.iter().enumerate() {
            if i > 0 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            s.write_all(p).await.unwrap();
        }
        let want = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        let mut got = vec![0u8; want.len()];
        s.read_exact(&mut got).await.unwrap();
        assert_eq!(&got[..], &want[..]);
    }

    fn post(body: &str) -> Vec<u8> {
        format!(
            "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    }

    const LATENCY: Duration = Duration::from_millis(200);
    /// Room for a loaded machine.
    const MARGIN: Duration = Duration::from_millis(150);

    #[tokio::test]
    async fn one_request_is_delayed_once() {
        let server = http_server().await;
        let proxy = LatencyProxy::start(&format!("http://{server}"), LATENCY)
            .await
            .unwrap();
        let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
        let request = post("Action=CreateTopic&Name=t");
        let t = Instant::now();
        exchange(&mut s, &[&request]).await;
        let took = t.elapsed();
        assert!(took >= LATENCY, "{took:?}");
        assert!(took < LATENCY + MARGIN, "{took:?}");
        assert_eq!(proxy.requests(), 1);
        assert!(proxy.first_request_at().unwrap() >= t);

        // Split in three chunks 20 ms apart: delayed from the last chunk, once.
        let (a, rest) = request.split_at(10);
        let (b, c) = rest.split_at(rest.len() - 5);
        let t = Instant::now();
        exchange(&mut s, &[a, b, c]).await;
        let took = t.elapsed();
        assert!(took >= LATENCY + Duration::from_millis(40), "{took:?}");
        assert!(
            took < LATENCY + Duration::from_millis(40) + MARGIN,
            "{took:?}"
        );
        assert_eq!(proxy.requests(), 2);
        let log = proxy.log();
        assert_eq!(log.len(), 2);
        assert!(log.iter().all(|r| r.label == "CreateTopic"), "{log:?}");
    }

    #[tokio::test]
    async fn concurrent_requests_overlap() {
        let server = http_server().await;
        let proxy = LatencyProxy::start(&server.to_string(), LATENCY)
            .await
            .unwrap();
        let t = Instant::now();
        let mut tasks = Vec::new();
        for i in 0..10 {
            let addr = proxy.addr();
            tasks.push(tokio::spawn(async move {
                let mut s = TcpStream::connect(addr).await.unwrap();
                exchange(&mut s, &[&post(&format!("Action=Op{i}"))]).await;
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        let took = t.elapsed();
        assert!(took >= LATENCY, "{took:?}");
        assert!(took < LATENCY + MARGIN, "{took:?}");
        assert_eq!(proxy.requests(), 10);
    }

    #[tokio::test]
    async fn keep_alive_requests_with_bodies_are_counted_once_each() {
        let server = http_server().await;
        let proxy = LatencyProxy::start(&format!("http://{server}/"), Duration::ZERO)
            .await
            .unwrap();
        let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
        // A body that looks like a request line, and two requests in one write.
        let tricky = post("GET / HTTP/1.1\r\n\r\nPOST / HTTP/1.1\r\n\r\n");
        exchange(&mut s, &[&tricky]).await;
        let mut two = post("Action=A");
        two.extend_from_slice(
            b"GET /bucket/key?Action=Get&x=1 HTTP/1.1\r\nHost: x\r\nX-Amz-Target: AmazonSSM.GetParameter\r\n\r\n",
        );
        s.write_all(&two).await.unwrap();
        let mut answers = vec![0u8; 2 * 40];
        s.read_exact(&mut answers).await.unwrap();
        // A chunked body (the test server does not read it: only the proxy parses it).
        let chunked = b"POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3;x=y\r\nGET\r\n0\r\nTrailer: 1\r\n\r\n";
        let mut p = Parser::default();
        let shared = Shared::default();
        for b in chunked.chunks(3) {
            p.feed(b, Instant::now(), &shared);
        }
        p.feed(b"DELETE /q HTTP/1.1\r\n\r\n", Instant::now(), &shared);
        assert_eq!(shared.requests.load(Ordering::Relaxed), 2);
        let labels: Vec<String> = shared
            .log
            .lock()
            .unwrap()
            .iter()
            .map(|r| r.label.clone())
            .collect();
        assert_eq!(labels, ["POST /up", "DELETE /q"]);

        assert_eq!(proxy.requests(), 3);
        let labels: Vec<String> = proxy.log().into_iter().map(|r| r.label).collect();
        assert_eq!(labels, ["POST /", "A", "AmazonSSM.GetParameter"]);
        proxy.reset();
        assert_eq!(proxy.requests(), 0);
        assert!(proxy.first_request_at().is_none());
        assert!(proxy.log().is_empty());
    }
}
