//! What a Lambda service token's synchronous invocation says, without any AWS call: the
//! handler's failure as the resource's error (its `FunctionError`, its error, and the tail
//! of its log, the `ResponseURL`'s signature masked), and the tail itself.
//!
//! A handler is invoked with `RequestResponse` and `LogType=Tail`. When it returns
//! normally, its answer is the response object (CloudFormation's protocol: it may write it
//! later, as the CDK provider framework does from its waiter state machine). When it fails
//! (`FunctionError`) and has written no answer, it never will: the resource fails at once
//! with what [`handler_failure`] says, instead of after the resource timeout.

use base64::Engine as _;
use serde_json::Value;

/// The most of a log tail a failure quotes, in bytes (Lambda returns the last 4 KB).
pub const MAX_LOG_TAIL_BYTES: usize = 2048;

/// The query parameters of a presigned URL that would let whoever reads them write the
/// answer (or name the signing key).
const SIGNING_PARAMETERS: &[&str] = &[
    "X-Amz-Signature",
    "X-Amz-Credential",
    "X-Amz-Security-Token",
    "Signature",
    "AWSAccessKeyId",
    "x-amz-security-token",
];

/// `text` with the presigned `response_url` masked: the whole URL, and the value of each
/// signing parameter, as written and percent-decoded (a handler that logs its event logs
/// the URL, sometimes JSON-escaped or decoded).
pub fn mask_response_url(text: &str, response_url: &str) -> String {
    let mut out = text.replace(response_url, "***");
    let escaped = response_url.replace('/', "\\/");
    out = out.replace(&escaped, "***");
    let query = response_url.split_once('?').map(|(_, q)| q).unwrap_or("");
    for pair in query.split('&') {
        let Some((name, value)) = pair.split_once('=') else {
            continue;
        };
        if value.is_empty() || !SIGNING_PARAMETERS.contains(&name) {
            continue;
        }
        for form in [value.to_string(), percent_decode(value)] {
            if form.len() >= 8 {
                out = out.replace(&form, "***");
            }
        }
    }
    out
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                out.push((hex(h).unwrap() * 16 + hex(l).unwrap()) as u8);
                i += 3;
            }
            (b'+', _, _) => {
                out.push(b' ');
                i += 1;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The log tail Lambda returned (`LogResult`, base64), decoded, its last
/// [`MAX_LOG_TAIL_BYTES`] at most (from a line start where there is one), trimmed.
pub fn log_tail(log_result: &str) -> String {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(log_result.trim())
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes);
    let mut start = text.len().saturating_sub(MAX_LOG_TAIL_BYTES);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    let mut tail = &text[start..];
    if start > 0
        && let Some(newline) = tail.find('\n')
    {
        tail = &tail[newline + 1..];
    }
    tail.trim().to_string()
}

/// The error of a handler that failed without answering: its `FunctionError`, the error
/// its payload names (`errorType: errorMessage`, as Lambda's runtimes write it), and its
/// log tail; the `ResponseURL` masked in all of it.
pub fn handler_failure(
    function_error: &str,
    payload: &[u8],
    log: &str,
    response_url: &str,
) -> String {
    let error = match serde_json::from_slice::<Value>(payload) {
        Ok(Value::Object(map)) => {
            let field = |k: &str| map.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            match (field("errorType"), field("errorMessage")) {
                (t, m) if t.is_empty() && m.is_empty() => String::new(),
                (t, m) if t.is_empty() => m,
                (t, m) => format!("{t}: {m}"),
            }
        }
        _ => String::from_utf8_lossy(payload).trim().to_string(),
    };
    let mut message = format!(
        "the handler failed ({function_error}) without answering{}",
        if error.is_empty() {
            String::new()
        } else {
            format!(": {error}")
        }
    );
    if !log.is_empty() {
        message.push_str("; the end of its log:\n");
        message.push_str(log);
    }
    mask_response_url(&message, response_url)
}

#[cfg(test)]
mod tests {
    use super::*;

    const URL: &str = "http://127.0.0.1:4566/bucket/custom-resource-responses/rid?\
        X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDEXAMPLE%2F20260101%2Fus-east-1%2Fs3%2Faws4_request\
        &X-Amz-Date=20260101T000000Z&X-Amz-Expires=4500&X-Amz-SignedHeaders=host\
        &X-Amz-Security-Token=FQoGZXIvYXdzEJr%2Btoken&X-Amz-Signature=0123456789abcdef0123456789abcdef";

    #[test]
    fn the_response_url_and_its_signature_never_show() {
        let logged = format!(
            "event {{\"ResponseURL\":\"{}\"}}\nsig 0123456789abcdef0123456789abcdef token FQoGZXIvYXdzEJr+token \
             cred AKIDEXAMPLE/20260101/us-east-1/s3/aws4_request",
            URL.replace('/', "\\/")
        );
        let masked = mask_response_url(&format!("{URL}\n{logged}"), URL);
        for secret in [
            "0123456789abcdef0123456789abcdef",
            "FQoGZXIvYXdzEJr",
            "AKIDEXAMPLE",
            "X-Amz-Signature=0",
        ] {
            assert!(!masked.contains(secret), "{secret} in {masked}");
        }
        assert!(masked.contains("***"));
        assert!(masked.starts_with("***\nevent"));
    }

    #[test]
    fn a_log_tail_is_decoded_and_cut_at_a_line() {
        let short = base64::engine::general_purpose::STANDARD.encode("START\nboom\nEND\n");
        assert_eq!(log_tail(&short), "START\nboom\nEND");
        let long: String = (0..500).map(|i| format!("line {i}\n")).collect();
        let tail = log_tail(&base64::engine::general_purpose::STANDARD.encode(&long));
        assert!(tail.len() <= MAX_LOG_TAIL_BYTES);
        assert!(tail.starts_with("line "), "{tail}");
        assert!(tail.ends_with("line 499"));
        assert_eq!(log_tail("not base64 !"), "");
    }

    #[test]
    fn a_failure_names_the_error_and_quotes_the_log() {
        let payload =
            br#"{"errorType":"TypeError","errorMessage":"x is undefined","stackTrace":[]}"#;
        let m = handler_failure(
            "Unhandled",
            payload,
            "START\nTypeError: x is undefined",
            URL,
        );
        assert_eq!(
            m,
            "the handler failed (Unhandled) without answering: TypeError: x is undefined; \
             the end of its log:\nSTART\nTypeError: x is undefined"
        );
        let exited = br#"{"errorType":"Runtime.ExitError","errorMessage":"exit status 1"}"#;
        assert!(
            handler_failure("Unhandled", exited, "", URL)
                .ends_with("Runtime.ExitError: exit status 1")
        );
        assert_eq!(
            handler_failure("Handled", b"", "", URL),
            "the handler failed (Handled) without answering"
        );
        let leaky = format!("{{\"errorMessage\":\"PUT {URL} refused\"}}");
        assert!(!handler_failure("Unhandled", leaky.as_bytes(), "", URL).contains("Signature="));
    }
}
