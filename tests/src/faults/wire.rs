//! What the fault proxy reads from a request (its service and operation) and what it
//! answers in its place (a throttling error in the request's protocol, a plain response).

use crate::http1::RequestHead;

/// The service and operation of a request.
pub(super) fn operation(head: &RequestHead) -> (String, String) {
    let service = head.service.clone().unwrap_or_else(|| "?".to_string());
    let param = |name: &str| {
        head.query.split('&').find_map(|kv| {
            kv.strip_prefix(name)
                .and_then(|v| v.strip_prefix('='))
                .map(str::to_string)
        })
    };
    let op = if let Some(target) = &head.target {
        target.rsplit('.').next().unwrap_or(target).to_string()
    } else if let Some(action) = &head.action {
        action.clone()
    } else if let Some(id) = param("x-id") {
        id
    } else {
        rest_operation(head, service == "s3")
    };
    (service, op)
}

/// `METHOD /path?sub` with the names in the path as `{}` (S3: `{bucket}`, `{key}`), and
/// the query's parameter names that have no value (S3's sub-resources: `?tagging`).
fn rest_operation(head: &RequestHead, s3: bool) -> String {
    let segments: Vec<&str> = head
        .path
        .trim_start_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let path: Vec<&str> = if s3 {
        ["{bucket}", "{key}"]
            .into_iter()
            .take(segments.len())
            .collect()
    } else {
        segments
            .iter()
            .map(|s| {
                if s.chars().all(|c| c.is_ascii_alphabetic()) {
                    s
                } else {
                    "{}"
                }
            })
            .collect()
    };
    let mut subs: Vec<&str> = head
        .query
        .split('&')
        .filter(|kv| !kv.is_empty() && !kv.contains('='))
        .collect();
    subs.sort_unstable();
    let mut op = format!("{} /{}", head.method, path.join("/"));
    if !subs.is_empty() {
        op.push('?');
        op.push_str(&subs.join("&"));
    }
    op
}

/// The throttling error of the protocol `head` speaks.
pub(super) fn throttle_answer(head: &RequestHead) -> Vec<u8> {
    const MESSAGE: &str = "Rate exceeded (stackflow fault proxy)";
    if head.service.as_deref() == Some("s3") {
        let body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SlowDown</Code>\
                    <Message>Please reduce your request rate.</Message>\
                    <RequestId>fault-proxy</RequestId></Error>";
        return answer(
            head,
            "503 Slow Down",
            "application/xml",
            "",
            body.as_bytes(),
        );
    }
    if head.service.as_deref() == Some("ec2") {
        let body = format!(
            "<Response><Errors><Error><Code>RequestLimitExceeded</Code>\
             <Message>{MESSAGE}</Message></Error></Errors><RequestID>fault-proxy</RequestID></Response>"
        );
        return answer(
            head,
            "503 Service Unavailable",
            "text/xml",
            "",
            body.as_bytes(),
        );
    }
    if head.target.is_some() {
        let content_type = head
            .content_type
            .as_deref()
            .unwrap_or("application/x-amz-json-1.0");
        let body = format!(r#"{{"__type":"ThrottlingException","message":"{MESSAGE}"}}"#);
        return answer(head, "400 Bad Request", content_type, "", body.as_bytes());
    }
    if head.action.is_some() || head.is_form() {
        let body = format!(
            "<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code>\
             <Message>{MESSAGE}</Message></Error><RequestId>fault-proxy</RequestId></ErrorResponse>"
        );
        return answer(head, "400 Bad Request", "text/xml", "", body.as_bytes());
    }
    let body = format!(r#"{{"message":"{MESSAGE}"}}"#);
    answer(
        head,
        "429 Too Many Requests",
        "application/json",
        "x-amzn-ErrorType: TooManyRequestsException\r\n",
        body.as_bytes(),
    )
}

/// `response` with one more header line (`name: value`), after its status line.
pub(super) fn with_header(response: Vec<u8>, line: &str) -> Vec<u8> {
    let Some(end) = response.windows(2).position(|w| w == b"\r\n") else {
        return response;
    };
    let mut out = response[..end + 2].to_vec();
    out.extend_from_slice(line.as_bytes());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&response[end + 2..]);
    out
}

/// A response with `status`, `content_type`, the `extra` header lines and `body` (none
/// to a `HEAD`).
pub(super) fn answer(
    head: &RequestHead,
    status: &str,
    content_type: &str,
    extra: &str,
    body: &[u8],
) -> Vec<u8> {
    let body = if head.method == "HEAD" { &[][..] } else { body };
    let mut out = format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\
         x-amzn-requestid: fault-proxy\r\n{extra}\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}
