//! A proxy that holds chosen AWS calls until the test opens it: to pin a run at a known
//! point (a deploy that holds the stack's lock and waits at its first create; a deploy
//! that has read the log and waits in its lookups) while other processes do their part.
//!
//! [`GateProxy::start`] listens on `127.0.0.1:0`. Each client connection is served one
//! request at a time (HTTP/1.1 keep-alive, see [`crate::http1`]): the whole request is
//! read and labelled with its operation ([`crate::http1::RequestHead::label`]:
//! `AmazonSQS.CreateQueue`, `CreateTopic`, `DescribeAvailabilityZones`, ...). A request
//! whose label ends with one of the gated operations waits until [`GateProxy::open`];
//! every other request, and every request once the gate is open, is forwarded to the
//! emulator at once.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::http1::{forward, read_request, upstream_addr};

#[derive(Debug)]
struct Shared {
    gated: Vec<String>,
    open: watch::Sender<bool>,
    /// Gated requests that arrived (held, or passed once open).
    arrived: AtomicU64,
    /// The labels of the gated requests, in order of arrival.
    labels: Mutex<Vec<String>>,
}

impl Shared {
    fn is_gated(&self, label: &str) -> bool {
        self.gated.iter().any(|op| label.ends_with(op.as_str()))
    }
}

/// A running gate proxy. Dropping it opens the gate and stops accepting connections.
#[derive(Debug)]
pub struct GateProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

impl Drop for GateProxy {
    fn drop(&mut self) {
        self.open();
        self.accept.abort();
    }
}

impl GateProxy {
    /// Starts a closed gate to `upstream` (`http://127.0.0.1:4566`) that holds the
    /// requests whose operation ends with one of `operations` (`CreateQueue`,
    /// `DescribeAvailabilityZones`).
    pub async fn start(upstream: &str, operations: &[&str]) -> std::io::Result<GateProxy> {
        let upstream = upstream_addr(upstream).await?;
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            gated: operations.iter().map(|o| o.to_string()).collect(),
            open: watch::channel(false).0,
            arrived: AtomicU64::new(0),
            labels: Mutex::new(Vec::new()),
        });
        let accept = {
            let shared = shared.clone();
            tokio::spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    tokio::spawn(serve(client, upstream, shared.clone()));
                }
            })
        };
        Ok(GateProxy {
            addr,
            shared,
            accept,
        })
    }

    /// The proxy's endpoint URL, `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// How many gated requests arrived so far.
    pub fn arrived(&self) -> u64 {
        self.shared.arrived.load(Ordering::SeqCst)
    }

    /// The operations of the gated requests that arrived, in order.
    pub fn labels(&self) -> Vec<String> {
        self.shared
            .labels
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Waits until a gated request arrived; false after `timeout`.
    pub async fn wait_arrival(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while self.arrived() == 0 {
            if Instant::now() > deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        true
    }

    /// Lets every held request and every later one through.
    pub fn open(&self) {
        self.shared.open.send_replace(true);
    }
}

/// Serves one client connection, one request at a time.
async fn serve(mut client: TcpStream, upstream: SocketAddr, shared: Arc<Shared>) {
    let _ = client.set_nodelay(true);
    let mut buf = Vec::new();
    while let Ok(Some((request, head))) = read_request(&mut client, &mut buf).await {
        let label = head.label();
        if shared.is_gated(&label) {
            shared
                .labels
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(label);
            shared.arrived.fetch_add(1, Ordering::SeqCst);
            let mut open = shared.open.subscribe();
            if open.wait_for(|o| *o).await.is_err() {
                return;
            }
        }
        match forward(upstream, &request, &head.method).await {
            Ok(answer) => {
                if client.write_all(&answer.bytes).await.is_err() || answer.close {
                    return;
                }
            }
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncWriteExt;

    use super::*;
    use crate::http1::read_response;
    use crate::http1::tests::ok_server;

    fn form(action: &str) -> Vec<u8> {
        let body = format!("Action={action}");
        format!(
            "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    }

    #[tokio::test]
    async fn gated_operations_wait_for_the_opening_and_others_pass() {
        let (server, seen) = ok_server().await;
        let gate = GateProxy::start(&server.to_string(), &["CreateQueue"])
            .await
            .unwrap();
        let addr: SocketAddr = gate.endpoint()[7..].parse().unwrap();
        // Another operation passes at once.
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(&form("GetQueueUrl")).await.unwrap();
        let answer = read_response(&mut s, &mut Vec::new(), "POST").await;
        assert!(answer.unwrap().bytes.starts_with(b"HTTP/1.1 200 "));
        assert_eq!(gate.arrived(), 0);
        // A gated one is held...
        let held = tokio::spawn(async move {
            let mut s = TcpStream::connect(addr).await.unwrap();
            s.write_all(&form("CreateQueue")).await.unwrap();
            read_response(&mut s, &mut Vec::new(), "POST")
                .await
                .unwrap()
        });
        assert!(gate.wait_arrival(Duration::from_secs(5)).await);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!held.is_finished(), "held until the gate opens");
        assert_eq!(seen.load(Ordering::SeqCst), 1, "not forwarded yet");
        // ...and passes once it opens.
        gate.open();
        assert!(held.await.unwrap().bytes.starts_with(b"HTTP/1.1 200 "));
        assert_eq!(seen.load(Ordering::SeqCst), 2);
        assert_eq!(gate.labels(), ["CreateQueue"]);
    }
}
