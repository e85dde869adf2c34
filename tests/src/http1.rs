//! The HTTP/1.1 plumbing of the test proxies ([`crate::latency`], [`crate::faults`],
//! [`crate::gate`]): finding where each request of a client's byte stream ends (request
//! heads, `Content-Length` and chunked bodies, keep-alive connections with many requests),
//! what AWS operation it is, reading one whole request or response off a connection, and
//! forwarding a request to the emulator.

use std::io;
use std::net::SocketAddr;
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

/// `http://host:port/...`, `host:port` or a socket address, as the address to connect to.
pub(crate) async fn upstream_addr(upstream: &str) -> io::Result<SocketAddr> {
    let rest = upstream
        .strip_prefix("http://")
        .unwrap_or(upstream)
        .trim_end_matches('/');
    let authority = rest.split('/').next().unwrap_or(rest);
    tokio::net::lookup_host(authority)
        .await?
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{upstream}: no address")))
}

/// What a request's head (and the start of a form body) says about it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestHead {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The path, without the query.
    pub path: String,
    /// The query string, without `?`.
    pub query: String,
    /// `X-Amz-Target` (the awsJson protocols), e.g. `AmazonSSM.PutParameter`.
    pub target: Option<String>,
    /// `Content-Type`.
    pub content_type: Option<String>,
    /// The service of the SigV4 credential scope (`s3`, `dynamodb`, `sns`, ...).
    pub service: Option<String>,
    /// The query protocol's `Action`, from the query string or a form body.
    pub action: Option<String>,
}

impl RequestHead {
    /// Its AWS operation as the latency proxy labels it: `X-Amz-Target`, else `Action`,
    /// else method and path (`AmazonSSM.PutParameter`, `CreateTopic`, `PUT /bucket`).
    pub fn label(&self) -> String {
        self.target
            .clone()
            .or_else(|| self.action.clone())
            .unwrap_or_else(|| format!("{} {}", self.method, self.path))
    }

    /// Whether the body is a form (the query protocol).
    pub fn is_form(&self) -> bool {
        self.content_type
            .as_deref()
            .is_some_and(|t| t.contains("x-www-form-urlencoded"))
    }
}

/// How the rest of a message body is delimited.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// This many more bytes.
    Length(u64),
    /// A chunk-size line of a chunked body.
    ChunkSize,
    /// This many more bytes of a chunk.
    ChunkData(u64),
    /// The line end after a chunk's data.
    ChunkEnd,
    /// The trailer lines after the last chunk.
    Trailer,
    /// The body is complete.
    #[default]
    Done,
}

/// Follows one message body, `Content-Length` or chunked.
#[derive(Debug, Default)]
struct BodyReader {
    framing: Framing,
    /// The current line of a chunked body.
    line: Vec<u8>,
}

impl BodyReader {
    fn new(length: u64, chunked: bool) -> BodyReader {
        let framing = match (chunked, length) {
            (true, _) => Framing::ChunkSize,
            (false, 0) => Framing::Done,
            (false, n) => Framing::Length(n),
        };
        BodyReader {
            framing,
            line: Vec::new(),
        }
    }

    fn done(&self) -> bool {
        self.framing == Framing::Done
    }

    /// Consumes the start of `data` (at most up to the next change of state): how many
    /// bytes, and the payload among them (body bytes, not chunk framing).
    fn consume<'a>(&mut self, data: &'a [u8]) -> (usize, &'a [u8]) {
        match self.framing {
            Framing::Done => (0, &[]),
            Framing::Length(left) | Framing::ChunkData(left) => {
                let take = usize::try_from(left).unwrap_or(usize::MAX).min(data.len());
                let left = left - take as u64;
                self.framing = match (self.framing, left) {
                    (Framing::Length(_), 0) => Framing::Done,
                    (Framing::Length(_), n) => Framing::Length(n),
                    (_, 0) => Framing::ChunkEnd,
                    (_, n) => Framing::ChunkData(n),
                };
                (take, &data[..take])
            }
            Framing::ChunkSize | Framing::ChunkEnd | Framing::Trailer => {
                let Some(nl) = data.iter().position(|b| *b == b'\n') else {
                    self.line.extend_from_slice(data);
                    return (data.len(), &[]);
                };
                self.line.extend_from_slice(&data[..=nl]);
                let line = std::mem::take(&mut self.line);
                let text = String::from_utf8_lossy(&line);
                let text = text.trim();
                self.framing = match self.framing {
                    Framing::ChunkSize => {
                        let size = text.split(';').next().unwrap_or("").trim();
                        match u64::from_str_radix(size, 16).unwrap_or(0) {
                            0 => Framing::Trailer,
                            n => Framing::ChunkData(n),
                        }
                    }
                    Framing::ChunkEnd => Framing::ChunkSize,
                    _ if text.is_empty() => Framing::Done,
                    _ => Framing::Trailer,
                };
                (nl + 1, &[])
            }
        }
    }
}

/// What one call of [`RequestParser::feed`] found.
#[derive(Debug, Default)]
pub(crate) struct Fed {
    /// How many bytes of the data it consumed.
    pub consumed: usize,
    /// When a request's head was completed: when that request's first byte arrived.
    pub head_at: Option<Instant>,
    /// When a request was completed: when its first byte arrived, and its head.
    pub complete: Option<(Instant, RequestHead)>,
    /// When a request's head was completed and its label is known from it alone (not a
    /// form, whose `Action` may be in the body): when its first byte arrived, and its
    /// head. A request the server answers before its body is through (S3's
    /// `NoSuchBucket` to a `PUT`) is seen here though it never completes.
    pub labelled: Option<(Instant, RequestHead)>,
}

/// Follows the requests in one connection's client-to-server bytes.
#[derive(Debug, Default)]
pub(crate) struct RequestParser {
    /// Whether a head has been read and its body is being followed.
    in_body: bool,
    body: BodyReader,
    /// The head read so far.
    buf: Vec<u8>,
    /// When the current request's first byte arrived.
    started: Option<Instant>,
    /// The current request's head.
    head: RequestHead,
    /// The start of a form body, to find its `Action`.
    peek: Vec<u8>,
}

/// How much of a form body is kept to find its `Action`.
const PEEK: usize = 1024;

impl RequestParser {
    /// Consumes `data` up to the end of the current request (all of it when the request
    /// does not end in it); bytes that `now` arrived. Consumes at least one byte of
    /// non-empty data.
    pub(crate) fn feed(&mut self, data: &[u8], now: Instant) -> Fed {
        let mut fed = Fed::default();
        let mut rest = data;
        while !rest.is_empty() && fed.complete.is_none() {
            if self.in_body {
                let (n, payload) = self.body.consume(rest);
                self.keep(payload);
                rest = &rest[n..];
            } else {
                if self.buf.is_empty() {
                    // Stray line ends between requests are not a request.
                    let skip = rest
                        .iter()
                        .take_while(|b| **b == b'\r' || **b == b'\n')
                        .count();
                    rest = &rest[skip..];
                    if rest.is_empty() {
                        break;
                    }
                    self.started = Some(now);
                }
                let from = self.buf.len().saturating_sub(3);
                self.buf.extend_from_slice(rest);
                let Some(end) = find(&self.buf[from..], b"\r\n\r\n").map(|i| from + i + 4) else {
                    rest = &[];
                    break;
                };
                let consumed = rest.len() - (self.buf.len() - end);
                rest = &rest[consumed..];
                self.buf.truncate(end);
                self.head();
                let at = self.started.unwrap_or(now);
                fed.head_at = Some(at);
                if !self.head.is_form() {
                    fed.labelled = Some((at, self.head.clone()));
                }
            }
            if self.in_body && self.body.done() {
                fed.complete = Some(self.finish());
            }
        }
        fed.consumed = data.len() - rest.len();
        fed
    }

    /// Keeps the start of a form body.
    fn keep(&mut self, data: &[u8]) {
        if self.head.is_form() && self.peek.len() < PEEK {
            let n = (PEEK - self.peek.len()).min(data.len());
            self.peek.extend_from_slice(&data[..n]);
        }
    }

    /// A complete head is in `buf`: reads it and decides how its body ends.
    fn head(&mut self) {
        let text = String::from_utf8_lossy(&self.buf).into_owned();
        self.buf.clear();
        let mut lines = text.split("\r\n");
        let mut parts = lines.next().unwrap_or("").split(' ');
        let method = parts.next().unwrap_or("").to_string();
        let target = parts.next().unwrap_or("");
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let mut head = RequestHead {
            method,
            path: path.to_string(),
            query: query.to_string(),
            action: query_action(query),
            ..RequestHead::default()
        };
        let mut length = 0u64;
        let mut chunked = false;
        for line in lines {
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            let value = value.trim();
            match name.trim().to_ascii_lowercase().as_str() {
                "content-length" => length = value.parse().unwrap_or(0),
                "transfer-encoding" => chunked = value.to_ascii_lowercase().contains("chunked"),
                "x-amz-target" => head.target = Some(value.to_string()),
                "content-type" => head.content_type = Some(value.to_string()),
                "authorization" => head.service = scope_service(value),
                _ => {}
            }
        }
        self.head = head;
        self.peek.clear();
        self.body = BodyReader::new(length, chunked);
        self.in_body = true;
    }

    /// The current request is complete.
    fn finish(&mut self) -> (Instant, RequestHead) {
        let mut head = std::mem::take(&mut self.head);
        if head.action.is_none() {
            head.action = query_action(&String::from_utf8_lossy(&self.peek));
        }
        self.peek.clear();
        self.in_body = false;
        (self.started.take().unwrap_or_else(Instant::now), head)
    }
}

/// The service of a SigV4 `Authorization` header:
/// `AWS4-HMAC-SHA256 Credential=AKID/20240101/us-east-1/sqs/aws4_request, ...`.
fn scope_service(authorization: &str) -> Option<String> {
    let credential = authorization.split("Credential=").nth(1)?;
    let scope = credential.split([',', ' ']).next()?;
    scope.split('/').nth(3).map(str::to_string)
}

/// The `Action` of a query string or form body.
pub(crate) fn query_action(query: &str) -> Option<String> {
    query
        .split('&')
        .find_map(|kv| kv.strip_prefix("Action="))
        .filter(|a| !a.is_empty())
        .map(str::to_string)
}

pub(crate) fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// `request` (one whole request) with its `Host` header saying `host`: the emulator
/// writes the host it was asked on into what it answers (an SQS queue's URL), and a proxy
/// in between should leave no trace there.
pub(crate) fn with_host(request: &[u8], host: &str) -> Vec<u8> {
    let Some(end) = find(request, b"\r\n\r\n") else {
        return request.to_vec();
    };
    let head = String::from_utf8_lossy(&request[..end]);
    let lines: Vec<String> = head
        .split("\r\n")
        .map(|line| match line.split_once(':') {
            Some((name, _)) if name.trim().eq_ignore_ascii_case("host") => format!("Host: {host}"),
            _ => line.to_string(),
        })
        .collect();
    let mut out = lines.join("\r\n").into_bytes();
    out.extend_from_slice(&request[end..]);
    out
}

/// Reads more bytes into `buf`: `false` at end of file.
async fn fill<R: AsyncRead + Unpin>(reader: &mut R, buf: &mut Vec<u8>) -> io::Result<bool> {
    let mut chunk = [0u8; 64 * 1024];
    let n = reader.read(&mut chunk).await?;
    buf.extend_from_slice(&chunk[..n]);
    Ok(n > 0)
}

/// Reads one whole request: its bytes and its head. `buf` holds bytes read before and
/// keeps those after the request. `None` at end of file between requests.
pub(crate) async fn read_request<R: AsyncRead + Unpin>(
    reader: &mut R,
    buf: &mut Vec<u8>,
) -> io::Result<Option<(Vec<u8>, RequestHead)>> {
    let mut parser = RequestParser::default();
    let mut raw = Vec::new();
    loop {
        if buf.is_empty() && !fill(reader, buf).await? {
            return if raw.iter().all(|b| *b == b'\r' || *b == b'\n') {
                Ok(None)
            } else {
                Err(io::ErrorKind::UnexpectedEof.into())
            };
        }
        let fed = parser.feed(buf, Instant::now());
        raw.extend(buf.drain(..fed.consumed));
        if let Some((_, head)) = fed.complete {
            return Ok(Some((raw, head)));
        }
    }
}

/// One whole response, as read by [`read_response`].
#[derive(Debug)]
pub(crate) struct Response {
    /// Its bytes (an interim `100 Continue` included).
    pub bytes: Vec<u8>,
    /// Whether the connection cannot carry another request after it.
    pub close: bool,
}

/// Reads one whole response to a `method` request. `buf` holds bytes read before and
/// keeps those after the response.
pub(crate) async fn read_response<R: AsyncRead + Unpin>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    method: &str,
) -> io::Result<Response> {
    let mut bytes = Vec::new();
    loop {
        let end = loop {
            if let Some(i) = find(buf, b"\r\n\r\n") {
                break i + 4;
            }
            if !fill(reader, buf).await? {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
        bytes.extend(buf.drain(..end));
        let status: u16 = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        if (100..200).contains(&status) && status != 101 {
            continue;
        }
        let header = |name: &str| {
            head.lines()
                .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()))
        };
        let length = header("content-length:").and_then(|v| v.parse::<u64>().ok());
        let chunked = header("transfer-encoding:").is_some_and(|v| v.contains("chunked"));
        let mut close = header("connection:").is_some_and(|v| v.contains("close"));
        let bodiless = method == "HEAD" || status == 204 || status == 304;
        if bodiless || chunked || length.is_some() {
            let mut body = BodyReader::new(
                if bodiless { 0 } else { length.unwrap_or(0) },
                chunked && !bodiless,
            );
            while !body.done() {
                if buf.is_empty() && !fill(reader, buf).await? {
                    return Err(io::ErrorKind::UnexpectedEof.into());
                }
                let (n, _) = body.consume(buf);
                bytes.extend(buf.drain(..n));
            }
        } else {
            // Delimited by the end of the connection.
            while fill(reader, buf).await? {}
            bytes.append(buf);
            close = true;
        }
        return Ok(Response { bytes, close });
    }
}

/// Sends one request to `upstream` on a connection of its own (its `Host` header naming
/// `upstream`), and reads its whole answer.
pub(crate) async fn forward(
    upstream: SocketAddr,
    request: &[u8],
    method: &str,
) -> io::Result<Response> {
    let mut server = tokio::net::TcpStream::connect(upstream).await?;
    let _ = server.set_nodelay(true);
    server
        .write_all(&with_host(request, &upstream.to_string()))
        .await?;
    read_response(&mut server, &mut Vec::new(), method).await
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;

    use super::*;

    /// A tiny HTTP/1.1 server: answers every request (keep-alive, `Content-Length`
    /// bodies) with `200 ok`, and counts them.
    pub(crate) async fn ok_server() -> (SocketAddr, Arc<AtomicU64>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let count = Arc::new(AtomicU64::new(0));
        let seen = count.clone();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let seen = seen.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    while let Ok(Some(_)) = read_request(&mut s, &mut buf).await {
                        seen.fetch_add(1, Ordering::SeqCst);
                        let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
                        if s.write_all(answer).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (addr, count)
    }

    #[test]
    fn requests_end_where_their_bodies_end() {
        let chunked = b"POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3;x=y\r\nGET\r\n0\r\nTrailer: 1\r\n\r\n";
        let mut data = chunked.to_vec();
        data.extend_from_slice(b"\r\nDELETE /q?Action=Go HTTP/1.1\r\nAuthorization: AWS4-HMAC-SHA256 Credential=test/20240101/us-east-1/sqs/aws4_request, SignedHeaders=host\r\n\r\n");
        let mut p = RequestParser::default();
        let mut heads = Vec::new();
        let mut ends = Vec::new();
        let mut at = 0;
        // Three bytes at a time: every split point.
        for piece in data.chunks(3) {
            let mut piece = piece;
            while !piece.is_empty() {
                let fed = p.feed(piece, Instant::now());
                assert!(fed.consumed > 0);
                at += fed.consumed;
                piece = &piece[fed.consumed..];
                if let Some((_, head)) = fed.complete {
                    heads.push(head);
                    ends.push(at);
                }
            }
        }
        assert_eq!(at, data.len());
        assert_eq!(ends[0], chunked.len());
        assert_eq!(heads.len(), 2);
        assert_eq!(heads[0].label(), "POST /up");
        assert_eq!(heads[1].label(), "Go");
        assert_eq!(heads[1].service.as_deref(), Some("sqs"));
        assert_eq!(heads[1].method, "DELETE");
        let moved = with_host(
            b"GET / HTTP/1.1\r\nhost: a:1\r\nX: host: b\r\n\r\nhost: body",
            "c:2",
        );
        assert_eq!(
            moved,
            b"GET / HTTP/1.1\r\nHost: c:2\r\nX: host: b\r\n\r\nhost: body"
        );
    }

    #[tokio::test]
    async fn responses_are_read_whole() {
        let mut wire: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nHTTP/1.1 404 Not Found\r\nContent-Length: 1\r\n\r\nxHTTP/1.1 200 OK\r\n\r\nuntil the end";
        let mut buf = Vec::new();
        let first = read_response(&mut wire, &mut buf, "POST").await.unwrap();
        assert!(
            first
                .bytes
                .starts_with(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK")
        );
        assert!(first.bytes.ends_with(b"0\r\n\r\n"));
        // A HEAD answer has no body, whatever its Content-Length says.
        let head = read_response(&mut wire, &mut buf, "HEAD").await.unwrap();
        assert_eq!(
            head.bytes,
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n".to_vec()
        );
        let missing = read_response(&mut wire, &mut buf, "GET").await.unwrap();
        assert!(missing.bytes.starts_with(b"HTTP/1.1 404 ") && !missing.close);
        let last = read_response(&mut wire, &mut buf, "GET").await.unwrap();
        assert!(last.close && last.bytes.ends_with(b"until the end"));
        assert!(read_response(&mut wire, &mut buf, "GET").await.is_err());
    }
}
