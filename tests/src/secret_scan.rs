//! Looking for known plaintexts in everything a run wrote: files, process output, S3
//! objects, DynamoDB items, Step Functions execution histories.
//!
//! A [`Scanner`] holds the plaintexts (each with a label) and looks for every [`forms`] of
//! each: raw, JSON-escaped (once and twice: a JSON document kept as a string inside
//! another), standard base64 of the value alone, and the base64 of the value inside any
//! longer text (the three alignments, without the characters its neighbours decide). A
//! hit is reported with where it was and a short context in which every plaintext is
//! replaced by its label, so a failure message never prints a secret.

use std::collections::hash_map::RandomState;
use std::fmt::Write as _;
use std::hash::{BuildHasher, Hasher};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_sfn::config::interceptors::AfterDeserializationInterceptorContextRef;
use aws_sdk_sfn::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_sfn::error::BoxError;
use aws_smithy_types::error::display::DisplayErrorContext;
use stackflow_events::EventStore;
use stackflow_events::projection::StackState;

/// Characters of context kept on each side of a hit.
const CONTEXT: usize = 48;

/// A plaintext no one else uses: `sek-<label>-<32 hex digits>`.
pub fn plaintext(label: &str) -> String {
    let mut out = format!("sek-{label}-");
    for round in 0..2u64 {
        let mut h = RandomState::new().build_hasher();
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        h.write_u128(nanos);
        h.write_u64(round);
        h.write_u32(std::process::id());
        let _ = write!(out, "{:016x}", h.finish());
    }
    out
}

/// Standard base64 with padding.
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The base64 characters that encode only bytes of `secret` when it starts at an offset
/// of `shift` (0, 1 or 2) modulo 3 inside a longer text.
fn base64_core(secret: &[u8], shift: usize) -> String {
    let mut padded = vec![0u8; shift];
    padded.extend_from_slice(secret);
    let full = padded.len() / 3;
    let start = if shift == 0 { 0 } else { 1 };
    if full <= start {
        return String::new();
    }
    base64(&padded[..full * 3])[start * 4..].to_string()
}

/// What JSON makes of `s` inside a string (without the quotes).
fn json_escaped(s: &str) -> String {
    let quoted = serde_json::to_string(s).unwrap_or_default();
    quoted[1..quoted.len().saturating_sub(1)].to_string()
}

/// Every form of `secret` to look for, named: those of `stackflow_core::secrets::forms`
/// (raw, JSON-escaped, base64) and the ones described in the module documentation.
pub fn forms(secret: &str) -> Vec<(&'static str, String)> {
    let core = stackflow_core::secrets::forms(secret);
    let mut out: Vec<(&'static str, String)> = Vec::new();
    let b64 = base64(secret.as_bytes());
    for form in core {
        let name = if form == secret {
            "raw"
        } else if form == b64 {
            "base64"
        } else {
            "json-escaped"
        };
        out.push((name, form));
    }
    let twice = json_escaped(&json_escaped(secret));
    out.push(("json-escaped-twice", twice));
    for shift in 0..3 {
        out.push(("base64-in-text", base64_core(secret.as_bytes(), shift)));
    }
    // Forms too short to be telling, and repeats, are dropped.
    let mut seen = std::collections::HashSet::new();
    out.retain(|(_, f)| f.len() >= 12 && seen.insert(f.clone()));
    out
}

/// One plaintext found.
#[derive(Debug, Clone)]
pub struct Hit {
    /// The plaintext's label.
    pub secret: String,
    /// Which form of it.
    pub form: &'static str,
    /// Where: a file, an object, a stream.
    pub place: String,
    /// The text around it, every plaintext replaced by its label.
    pub context: String,
}

/// The plaintexts and what was found of them.
#[derive(Debug, Default)]
pub struct Scanner {
    needles: Vec<(String, &'static str, String)>,
    hits: Vec<Hit>,
    places: usize,
    bytes: usize,
}

impl Scanner {
    /// A scanner for these plaintexts, as (label, value).
    pub fn new<'a>(secrets: impl IntoIterator<Item = (&'a str, &'a str)>) -> Scanner {
        let mut needles = Vec::new();
        for (label, value) in secrets {
            for (form, text) in forms(value) {
                needles.push((label.to_string(), form, text));
            }
        }
        Scanner {
            needles,
            ..Scanner::default()
        }
    }

    /// Looks at `bytes`, found at `place`.
    pub fn scan(&mut self, place: &str, bytes: &[u8]) {
        self.places += 1;
        self.bytes += bytes.len();
        for (label, form, needle) in &self.needles {
            let n = needle.as_bytes();
            let mut from = 0;
            while let Some(at) = find(&bytes[from..], n) {
                let at = from + at;
                self.hits.push(Hit {
                    secret: label.clone(),
                    form,
                    place: place.to_string(),
                    context: redact(&self.needles, bytes, at, n.len()),
                });
                from = at + n.len();
            }
        }
    }

    /// Looks at every file under `dir`, recursively.
    pub fn scan_dir(&mut self, dir: &Path) -> std::io::Result<()> {
        let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
        entries.sort_by_key(|e| e.path());
        for entry in entries {
            let path = entry.path();
            if entry.file_type()?.is_dir() {
                self.scan_dir(&path)?;
            } else {
                let bytes = std::fs::read(&path)?;
                self.scan(&path.display().to_string(), &bytes);
            }
        }
        Ok(())
    }

    /// `text` with every form of every plaintext replaced by its label: safe to print.
    pub fn redacted(&self, text: &str) -> String {
        let mut out = text.to_string();
        let mut longest_first: Vec<_> = self.needles.iter().collect();
        longest_first.sort_by_key(|(_, _, n)| std::cmp::Reverse(n.len()));
        for (label, form, needle) in longest_first {
            out = out.replace(needle.as_str(), &format!("<{label}:{form}>"));
        }
        out
    }

    /// Every hit so far.
    pub fn hits(&self) -> &[Hit] {
        &self.hits
    }

    /// How many places and bytes were looked at.
    pub fn looked_at(&self) -> (usize, usize) {
        (self.places, self.bytes)
    }

    /// The hits, one per line, without the plaintexts.
    pub fn report(&self) -> String {
        let mut out = String::new();
        for h in &self.hits {
            let _ = writeln!(
                out,
                "- {} ({}) in {}: …{}…",
                h.secret, h.form, h.place, h.context
            );
        }
        out
    }

    /// Looks at every item of a DynamoDB table (each attribute's strings and bytes).
    pub async fn scan_dynamodb_table(
        &mut self,
        client: &aws_sdk_dynamodb::Client,
        table: &str,
    ) -> Result<usize, String> {
        let mut start = None;
        let mut items = 0;
        loop {
            let page = client
                .scan()
                .table_name(table)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| format!("Scan {table}: {}", DisplayErrorContext(e)))?;
            for item in page.items() {
                let mut bytes = Vec::new();
                for (name, value) in item {
                    bytes.extend_from_slice(name.as_bytes());
                    bytes.push(b'=');
                    attribute_bytes(value, &mut bytes);
                    bytes.push(b'\n');
                }
                let key = ["pk", "sk"]
                    .iter()
                    .filter_map(|k| item.get(*k)?.as_s().ok().cloned())
                    .collect::<Vec<_>>()
                    .join(" ");
                self.scan(&format!("dynamodb:{table} item {key}"), &bytes);
                items += 1;
            }
            match page.last_evaluated_key() {
                Some(k) if !k.is_empty() => start = Some(k.clone()),
                _ => return Ok(items),
            }
        }
    }
}

impl Scanner {
    /// Looks at every object of `bucket` (`s3://bucket/key`); returns how many.
    pub async fn scan_bucket(
        &mut self,
        s3: &aws_sdk_s3::Client,
        bucket: &str,
    ) -> Result<usize, String> {
        let mut token = None;
        let mut objects = 0;
        loop {
            let page = s3
                .list_objects_v2()
                .bucket(bucket)
                .set_continuation_token(token.take())
                .send()
                .await
                .map_err(|e| format!("ListObjectsV2 {bucket}: {}", DisplayErrorContext(e)))?;
            for key in page.contents().iter().filter_map(|o| o.key()) {
                let body = s3
                    .get_object()
                    .bucket(bucket)
                    .key(key)
                    .send()
                    .await
                    .map_err(|e| format!("GetObject {bucket}/{key}: {}", DisplayErrorContext(e)))?
                    .body
                    .collect()
                    .await
                    .map_err(|e| format!("GetObject {bucket}/{key}: {e}"))?
                    .into_bytes();
                self.scan(&format!("s3://{bucket}/{key}"), &body);
                objects += 1;
            }
            match page.next_continuation_token() {
                Some(t) if page.is_truncated() == Some(true) => token = Some(t.to_string()),
                _ => return Ok(objects),
            }
        }
    }

    /// Looks at every execution of a state machine, as the emulator answers for it: the
    /// raw bodies of `DescribeExecution` (input, output, error, cause) and of every page of
    /// `GetExecutionHistory` (every event with its data). Raw, because the SDK's `Debug`
    /// redacts exactly those fields. Returns how many executions, and the histories' text
    /// (for the caller's checks that the scan saw what it should).
    pub async fn scan_executions(
        &mut self,
        sfn: &aws_sdk_sfn::Client,
        machine: &str,
    ) -> Result<(usize, String), String> {
        let raw = RawBodies::default();
        let sfn = aws_sdk_sfn::Client::from_conf(
            sfn.config().to_builder().interceptor(raw.clone()).build(),
        );
        let err = |what: &str, e: &dyn std::fmt::Display| format!("{what} {machine}: {e}");
        let mut arns = Vec::new();
        let mut token = None;
        loop {
            let page = sfn
                .list_executions()
                .state_machine_arn(machine)
                .set_next_token(token.take())
                .send()
                .await
                .map_err(|e| err("ListExecutions", &DisplayErrorContext(e)))?;
            arns.extend(
                page.executions()
                    .iter()
                    .map(|e| e.execution_arn().to_string()),
            );
            match page.next_token() {
                Some(t) => token = Some(t.to_string()),
                None => break,
            }
        }
        let mut seen = String::new();
        for arn in &arns {
            let _ = raw.take();
            sfn.describe_execution()
                .execution_arn(arn)
                .send()
                .await
                .map_err(|e| err("DescribeExecution", &DisplayErrorContext(e)))?;
            self.scan(&format!("DescribeExecution {arn}"), &raw.take()?);
            let mut next = None;
            let mut pages = 0;
            loop {
                let page = sfn
                    .get_execution_history()
                    .execution_arn(arn)
                    .include_execution_data(true)
                    .max_results(1000)
                    .set_next_token(next.take())
                    .send()
                    .await
                    .map_err(|e| err("GetExecutionHistory", &DisplayErrorContext(e)))?;
                let body = raw.take()?;
                pages += 1;
                self.scan(&format!("GetExecutionHistory {arn} page {pages}"), &body);
                seen.push_str(&String::from_utf8_lossy(&body));
                match page.next_token() {
                    Some(t) => next = Some(t.to_string()),
                    None => break,
                }
            }
        }
        Ok((arns.len(), seen))
    }
}

/// Keeps the raw body of each response of the client it is given to.
#[derive(Debug, Clone, Default)]
struct RawBodies(Arc<Mutex<Vec<u8>>>);

impl RawBodies {
    /// The body of the last response (an error when there was none).
    fn take(&self) -> Result<Vec<u8>, String> {
        let body = std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()));
        if body.is_empty() {
            return Err("a response body was not captured".into());
        }
        Ok(body)
    }
}

impl Intercept for RawBodies {
    fn name(&self) -> &'static str {
        "RawBodies"
    }

    fn read_after_deserialization(
        &self,
        context: &AfterDeserializationInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if let Some(bytes) = context.response().body().bytes() {
            *self.0.lock().unwrap_or_else(|p| p.into_inner()) = bytes.to_vec();
        }
        Ok(())
    }
}

impl Scanner {
    /// Looks at what the product reads back from an event store: every event of every
    /// stream (as `stackflow events --json` prints it), its latest snapshot, and the state
    /// folded from the events; returns how many events.
    pub async fn scan_event_store<S: EventStore>(
        &mut self,
        store: &S,
        name: &str,
    ) -> Result<usize, String> {
        let mut events = 0;
        for stream in store.streams().await.map_err(|e| format!("{name}: {e}"))? {
            let all = store
                .read(&stream, 0)
                .await
                .map_err(|e| format!("{name} {stream}: {e}"))?;
            for e in &all {
                let body = serde_json::to_vec(e).unwrap_or_default();
                self.scan(&format!("{name} {stream} event {}", e.seq), &body);
            }
            events += all.len();
            let state = StackState::fold_until(&all, u64::MAX);
            let state = serde_json::to_vec(&state).unwrap_or_default();
            self.scan(&format!("{name} {stream} folded state"), &state);
            if let Some((seq, body)) = store
                .latest_snapshot(&stream)
                .await
                .map_err(|e| format!("{name} {stream}: {e}"))?
            {
                let body = serde_json::to_vec(&body).unwrap_or_default();
                self.scan(&format!("{name} {stream} snapshot at {seq}"), &body);
            }
        }
        Ok(events)
    }
}

/// Every string, number and byte of an attribute value.
fn attribute_bytes(v: &AttributeValue, out: &mut Vec<u8>) {
    match v {
        AttributeValue::S(s) | AttributeValue::N(s) => out.extend_from_slice(s.as_bytes()),
        AttributeValue::B(b) => out.extend_from_slice(b.as_ref()),
        AttributeValue::Ss(items) | AttributeValue::Ns(items) => items
            .iter()
            .for_each(|s| out.extend_from_slice(s.as_bytes())),
        AttributeValue::Bs(items) => items.iter().for_each(|b| out.extend_from_slice(b.as_ref())),
        AttributeValue::L(items) => items.iter().for_each(|i| attribute_bytes(i, out)),
        AttributeValue::M(m) => m.iter().for_each(|(k, i)| {
            out.extend_from_slice(k.as_bytes());
            out.push(b'=');
            attribute_bytes(i, out);
            out.push(b' ');
        }),
        _ => {}
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || needle.len() > haystack.len() {
        return None;
    }
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The text around `bytes[at..at + len]`, printable, with every occurrence of every
/// needle (also one that the window's edges cut) replaced by its label.
fn redact(
    needles: &[(String, &'static str, String)],
    bytes: &[u8],
    at: usize,
    len: usize,
) -> String {
    let longest = needles.iter().map(|(_, _, n)| n.len()).max().unwrap_or(0);
    let lo = at.saturating_sub(CONTEXT);
    let hi = (at + len + CONTEXT).min(bytes.len());
    let wide_lo = lo.saturating_sub(longest);
    let wide_hi = (hi + longest).min(bytes.len());
    let mut covered: Vec<(usize, usize, String)> = Vec::new();
    for (label, form, needle) in needles {
        let n = needle.as_bytes();
        let mut from = wide_lo;
        while let Some(i) = find(&bytes[from..wide_hi], n) {
            covered.push((from + i, from + i + n.len(), format!("<{label}:{form}>")));
            from += i + 1;
        }
    }
    covered.sort();
    let mut out = String::new();
    let mut plain = Vec::new();
    let mut i = lo;
    while i < hi {
        if let Some((_, end, label)) = covered.iter().find(|(s, e, _)| *s <= i && i < *e) {
            out.push_str(&printable(&plain));
            plain.clear();
            out.push_str(label);
            i = *end;
        } else {
            plain.push(bytes[i]);
            i += 1;
        }
    }
    out.push_str(&printable(&plain));
    out
}

fn printable(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .chars()
        .map(|c| if c.is_control() { '.' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_standard() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
        assert_eq!(
            stackflow_core::secrets::forms("sek-x-0123456789")[1],
            base64(b"sek-x-0123456789")
        );
    }

    #[test]
    fn a_secret_is_found_in_every_form_and_never_shown() {
        let secret = plaintext("t");
        let quoted = format!("{secret}\"q\\");
        let mut s = Scanner::new([("plain", secret.as_str()), ("quoted", quoted.as_str())]);
        for prefix in ["", "a", "ab", "abc"] {
            s.scan(
                "b64",
                base64(format!("{prefix}{secret}!").as_bytes()).as_bytes(),
            );
        }
        let nested = serde_json::json!({"doc": serde_json::json!({"v": quoted}).to_string()});
        s.scan("nested", nested.to_string().as_bytes());
        s.scan("clean", b"nothing to see here, sek-t-0000");
        let places: Vec<&str> = s.hits().iter().map(|h| h.place.as_str()).collect();
        assert_eq!(
            places.iter().filter(|p| **p == "b64").count(),
            4,
            "{places:?}"
        );
        assert!(places.contains(&"nested"));
        assert!(!places.contains(&"clean"));
        let report = s.report();
        assert!(!report.contains(&secret), "{report}");
    }
}
