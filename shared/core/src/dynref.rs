//! CloudFormation dynamic references: `{{resolve:service:...}}` inside string values.
//!
//! Three services are supported, as documented by CloudFormation:
//!
//! - `{{resolve:ssm:parameter-name}}` and `{{resolve:ssm:parameter-name:version}}`: a
//!   plaintext Systems Manager parameter (not a secret);
//! - `{{resolve:ssm-secure:parameter-name}}` and `{{resolve:ssm-secure:parameter-name:version}}`:
//!   a `SecureString` parameter (a secret);
//! - `{{resolve:secretsmanager:secret-id:SecretString:json-key:version-stage:version-id}}`:
//!   a Secrets Manager secret (a secret), where every part after `secret-id` is optional and
//!   may be empty.
//!
//! The parameter name may be a plain name (`MyParam`), a path (`/app/db.host`) or a full
//! parameter ARN (`arn:aws:ssm:us-east-1:123456789012:parameter/app/db.host`). The secret id
//! may be a name or a full secret ARN, which itself contains colons
//! (`arn:aws:secretsmanager:us-east-1:123456789012:secret:MySecret-a1b2c3`).
//!
//! [`resolve`] replaces every reference in a JSON value by its value and returns a
//! [`Resolution`] that remembers where it did so. [`Resolution::restore`] puts the original
//! `{{resolve:...}}` text back before anything is persisted, and [`Resolution::mask`] hides
//! the secret values in error messages and logs.

use std::fmt;

use serde_json::{Map, Value};

const OPEN: &str = "{{resolve:";
const CLOSE: &str = "}}";

/// The replacement for a secret value in masked text.
pub const MASK: &str = "***";

/// A parsed dynamic reference.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum DynamicReference {
    /// `{{resolve:ssm:name[:version]}}`: a plaintext Parameter Store value.
    Ssm {
        name: String,
        version: Option<String>,
    },
    /// `{{resolve:ssm-secure:name[:version]}}`: a `SecureString` Parameter Store value.
    SsmSecure {
        name: String,
        version: Option<String>,
    },
    /// `{{resolve:secretsmanager:secret-id[:SecretString[:json-key[:version-stage[:version-id]]]]}}`.
    SecretsManager {
        secret_id: String,
        json_key: Option<String>,
        version_stage: Option<String>,
        version_id: Option<String>,
    },
}

/// Why a dynamic reference could not be parsed. Every message includes the offending text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DynRefError {
    /// The service is not `ssm`, `ssm-secure` or `secretsmanager`.
    #[error(
        "unknown dynamic reference service {service:?} in {text}: expected ssm, ssm-secure or secretsmanager"
    )]
    UnknownService { service: String, text: String },

    /// The parameter name or secret id is missing.
    #[error("dynamic reference {text} has an empty {what}")]
    EmptyName { text: String, what: &'static str },

    /// `{{resolve:` without a closing `}}`.
    #[error("unterminated dynamic reference {text}: no closing \"}}}}\"")]
    Unterminated { text: String },

    /// Any other syntax error.
    #[error("malformed dynamic reference {text}: {reason}")]
    Malformed { text: String, reason: String },
}

/// Why [`resolve`] failed. Messages name the JSON pointer and the reference, never a
/// resolved value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// A string contains a dynamic reference that does not parse.
    #[error("in the string at {pointer:?}: {error}")]
    Parse { pointer: String, error: DynRefError },

    /// The [`Lookup`] failed; `message` is its error text.
    #[error("could not resolve {reference} at {pointer:?}: {message}")]
    Lookup {
        pointer: String,
        reference: String,
        message: String,
    },
}

fn malformed(text: &str, reason: impl Into<String>) -> DynRefError {
    DynRefError::Malformed {
        text: text.to_owned(),
        reason: reason.into(),
    }
}

/// Characters allowed in a Parameter Store name (and in the name part of its ARN).
fn is_ssm_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/')
}

/// Characters allowed in a Secrets Manager secret name (and in the name part of its ARN).
fn is_secret_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '/' | '_' | '+' | '=' | '.' | '@' | '-')
}

fn check_chars(
    text: &str,
    value: &str,
    what: &str,
    ok: fn(char) -> bool,
) -> Result<(), DynRefError> {
    match value.chars().find(|c| !ok(*c)) {
        None => Ok(()),
        Some(c) => Err(malformed(
            text,
            format!("the {what} {value:?} contains the character {c:?}, which is not allowed"),
        )),
    }
}

impl DynamicReference {
    /// Parses exactly one `{{resolve:...}}` (no text around it).
    pub fn parse(text: &str) -> Result<Self, DynRefError> {
        let Some(body) = text.strip_prefix(OPEN) else {
            return Err(malformed(text, "expected the form {{resolve:service:...}}"));
        };
        let Some(body) = body.strip_suffix(CLOSE) else {
            return Err(DynRefError::Unterminated {
                text: text.to_owned(),
            });
        };
        if body.contains(CLOSE) {
            return Err(malformed(
                text,
                "\"}}\" inside the reference (more than one reference?)",
            ));
        }
        Self::parse_body(body, text)
    }

    /// Parses the part between `{{resolve:` and `}}`; `text` is the whole reference, for errors.
    fn parse_body(body: &str, text: &str) -> Result<Self, DynRefError> {
        let (service, rest) = body.split_once(':').unwrap_or((body, ""));
        match service {
            "ssm" | "ssm-secure" => {
                check_no_trailing_backslash(body, text)?;
                let (name, version) = parse_ssm(rest, text)?;
                Ok(if service == "ssm" {
                    DynamicReference::Ssm { name, version }
                } else {
                    DynamicReference::SsmSecure { name, version }
                })
            }
            "secretsmanager" => {
                check_no_trailing_backslash(body, text)?;
                parse_secretsmanager(rest, text)
            }
            "" => Err(malformed(text, "the service is missing")),
            other => Err(DynRefError::UnknownService {
                service: other.to_owned(),
                text: text.to_owned(),
            }),
        }
    }

    /// Whether the value is a secret: `ssm-secure` and `secretsmanager` are, `ssm` is not.
    pub fn is_secret(&self) -> bool {
        !matches!(self, DynamicReference::Ssm { .. })
    }

    /// The service as written in the reference: `ssm`, `ssm-secure` or `secretsmanager`.
    pub fn service(&self) -> &'static str {
        match self {
            DynamicReference::Ssm { .. } => "ssm",
            DynamicReference::SsmSecure { .. } => "ssm-secure",
            DynamicReference::SecretsManager { .. } => "secretsmanager",
        }
    }
}

impl std::str::FromStr for DynamicReference {
    type Err = DynRefError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

fn check_no_trailing_backslash(body: &str, text: &str) -> Result<(), DynRefError> {
    // CloudFormation cannot resolve a reference whose last value ends with a backslash.
    if body.ends_with('\\') {
        Err(malformed(
            text,
            "a dynamic reference cannot end with a backslash",
        ))
    } else {
        Ok(())
    }
}

/// `name`, `name:version`, `arn:partition:ssm:region:account:parameter/name[:version]`.
fn parse_ssm(rest: &str, text: &str) -> Result<(String, Option<String>), DynRefError> {
    const EMPTY: &str = "parameter name";
    if rest.is_empty() {
        return Err(DynRefError::EmptyName {
            text: text.to_owned(),
            what: EMPTY,
        });
    }
    let parts: Vec<&str> = rest.split(':').collect();
    let (name, version) = if parts[0] == "arn" && parts.len() > 2 {
        let (arn, version) = match parts.len() {
            6 => (rest, None),
            7 => (&rest[..rest.len() - parts[6].len() - 1], Some(parts[6])),
            _ => {
                return Err(malformed(
                    text,
                    "a parameter ARN has the form arn:partition:ssm:region:account:parameter/name, optionally followed by :version",
                ));
            }
        };
        let resource = parts[5];
        let param = resource.strip_prefix("parameter/").unwrap_or("");
        if parts[1..5].iter().any(|p| p.is_empty()) || parts[2] != "ssm" || param.is_empty() {
            return Err(malformed(
                text,
                format!(
                    "{arn:?} is not a parameter ARN (arn:partition:ssm:region:account:parameter/name)"
                ),
            ));
        }
        check_chars(text, param, "parameter name", is_ssm_name_char)?;
        (arn, version)
    } else {
        let (name, version) = match rest.split_once(':') {
            Some((n, v)) => (n, Some(v)),
            None => (rest, None),
        };
        if name.is_empty() {
            return Err(DynRefError::EmptyName {
                text: text.to_owned(),
                what: EMPTY,
            });
        }
        check_chars(text, name, "parameter name", is_ssm_name_char)?;
        (name, version)
    };
    if let Some(v) = version
        && (v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(malformed(
            text,
            format!("the parameter version {v:?} is not a positive integer"),
        ));
    }
    Ok((name.to_owned(), version.map(str::to_owned)))
}

/// `secret-id[:SecretString[:json-key[:version-stage[:version-id]]]]`, where `secret-id`
/// is a name or `arn:partition:secretsmanager:region:account:secret:name`.
fn parse_secretsmanager(rest: &str, text: &str) -> Result<DynamicReference, DynRefError> {
    if rest.is_empty() {
        return Err(DynRefError::EmptyName {
            text: text.to_owned(),
            what: "secret id",
        });
    }
    let parts: Vec<&str> = rest.split(':').collect();
    // A secret may be called "arn": it is an ARN only if "arn:" is not followed by the
    // SecretString segment (or an empty one).
    let is_arn = parts[0] == "arn" && parts.len() > 1 && !matches!(parts[1], "" | "SecretString");
    let id_len = if is_arn { 7 } else { 1 };
    if parts.len() < id_len
        || (is_arn
            && (parts[1..7].iter().any(|p| p.is_empty())
                || parts[2] != "secretsmanager"
                || parts[5] != "secret"))
    {
        return Err(malformed(
            text,
            "a secret ARN has the form arn:partition:secretsmanager:region:account:secret:name",
        ));
    }
    let name = parts[id_len - 1];
    if name.is_empty() {
        return Err(DynRefError::EmptyName {
            text: text.to_owned(),
            what: "secret id",
        });
    }
    check_chars(text, name, "secret name", is_secret_name_char)?;
    let secret_id = parts[..id_len].join(":");

    let tail = &parts[id_len..];
    if tail.len() > 4 {
        return Err(malformed(
            text,
            "too many segments: expected secret-id:SecretString:json-key:version-stage:version-id",
        ));
    }
    if let Some(field) = tail.first()
        && !matches!(*field, "" | "SecretString")
    {
        return Err(malformed(
            text,
            format!("the segment after the secret id must be SecretString, not {field:?}"),
        ));
    }
    let opt = |i: usize| {
        tail.get(i)
            .filter(|s| !s.is_empty())
            .map(|s| (*s).to_owned())
    };
    let (json_key, version_stage, version_id) = (opt(1), opt(2), opt(3));
    if version_stage.is_some() && version_id.is_some() {
        return Err(malformed(
            text,
            "specify either version-stage or version-id, not both",
        ));
    }
    Ok(DynamicReference::SecretsManager {
        secret_id,
        json_key,
        version_stage,
        version_id,
    })
}

impl fmt::Display for DynamicReference {
    /// The canonical text: no trailing empty segments, and `SecretString` only when a later
    /// segment is set. The text of a parsed reference parses back to the same reference.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(OPEN)?;
        f.write_str(self.service())?;
        f.write_str(":")?;
        match self {
            DynamicReference::Ssm { name, version }
            | DynamicReference::SsmSecure { name, version } => {
                f.write_str(name)?;
                if let Some(v) = version {
                    write!(f, ":{v}")?;
                }
            }
            DynamicReference::SecretsManager {
                secret_id,
                json_key,
                version_stage,
                version_id,
            } => {
                f.write_str(secret_id)?;
                let fields = [json_key, version_stage, version_id];
                let last = fields
                    .iter()
                    .rposition(|x| x.as_deref().is_some_and(|s| !s.is_empty()));
                if let Some(last) = last {
                    f.write_str(":SecretString")?;
                    for x in &fields[..=last] {
                        write!(f, ":{}", x.as_deref().unwrap_or(""))?;
                    }
                }
            }
        }
        f.write_str(CLOSE)
    }
}

/// One occurrence in a string: byte range of the whole `{{resolve:...}}`, its text, and the
/// parsed reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Occurrence {
    pub start: usize,
    pub end: usize,
    pub text: String,
    pub reference: DynamicReference,
}

/// Every dynamic reference in `s`, in order. A reference ends at the first `}}` after its
/// `{{resolve:`. A string without any returns an empty vector; a malformed reference, an
/// unknown service or a missing `}}` is an error.
pub fn find_all(s: &str) -> Result<Vec<Occurrence>, DynRefError> {
    let mut out = Vec::new();
    let mut pos = 0;
    while let Some(i) = s[pos..].find(OPEN) {
        let start = pos + i;
        let body_start = start + OPEN.len();
        let Some(j) = s[body_start..].find(CLOSE) else {
            return Err(DynRefError::Unterminated {
                text: s[start..].to_owned(),
            });
        };
        let end = body_start + j + CLOSE.len();
        let text = &s[start..end];
        let reference = DynamicReference::parse_body(&s[body_start..body_start + j], text)?;
        out.push(Occurrence {
            start,
            end,
            text: text.to_owned(),
            reference,
        });
        pos = end;
    }
    Ok(out)
}

/// Whether `s` contains the `{{resolve:` marker (even if what follows is malformed; use
/// [`find_all`] to validate).
pub fn contains_dynamic_reference(s: &str) -> bool {
    s.contains(OPEN)
}

/// Something that can look up a dynamic reference's value (implemented by the AWS layer;
/// tests use a map). The error is a message that must not contain any secret value.
pub trait Lookup {
    fn lookup(&self, r: &DynamicReference) -> Result<String, String>;
}

impl<F> Lookup for F
where
    F: Fn(&DynamicReference) -> Result<String, String>,
{
    fn lookup(&self, r: &DynamicReference) -> Result<String, String> {
        self(r)
    }
}

/// Where a resolved value came from: the JSON pointer (RFC 6901) of the string inside the
/// resolved properties, the string as it was before resolution (with its `{{resolve:...}}`
/// text), and the secret values that were substituted into it (only for secret references;
/// used to mask text).
///
/// Neither `Debug` nor serialization carries the secret values: `Debug` prints how many
/// there are, and a deserialized record has none (so it can restore, but not mask).
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Record {
    pub pointer: String,
    pub original: String,
    #[serde(skip)]
    pub secrets: Vec<String>,
}

impl fmt::Debug for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Record")
            .field("pointer", &self.pointer)
            .field("original", &self.original)
            .field(
                "secrets",
                &format_args!("<{} redacted>", self.secrets.len()),
            )
            .finish()
    }
}

/// What [`resolve`] did: one [`Record`] per string that contained dynamic references, in
/// document order.
#[derive(Debug, Clone, Default)]
pub struct Resolution {
    pub records: Vec<Record>,
}

/// Appends one RFC 6901 reference token (`~` as `~0`, `/` as `~1`) to a pointer.
fn push_token(pointer: &mut String, token: &str) {
    pointer.push('/');
    for c in token.chars() {
        match c {
            '~' => pointer.push_str("~0"),
            '/' => pointer.push_str("~1"),
            c => pointer.push(c),
        }
    }
}

/// Walks `value` (objects, arrays, strings; object keys are not resolved), replaces every
/// dynamic reference inside every string with its looked-up value, and returns the new value
/// plus the records. Looked-up values are inserted as they are: a value that itself looks
/// like `{{resolve:...}}` is not resolved again. Errors name the pointer and the reference,
/// never a resolved value.
pub fn resolve(value: &Value, lookup: &dyn Lookup) -> Result<(Value, Resolution), ResolveError> {
    let mut resolution = Resolution::default();
    let mut pointer = String::new();
    let out = walk(value, &mut pointer, lookup, &mut resolution.records)?;
    Ok((out, resolution))
}

fn walk(
    value: &Value,
    pointer: &mut String,
    lookup: &dyn Lookup,
    records: &mut Vec<Record>,
) -> Result<Value, ResolveError> {
    match value {
        Value::String(s) => resolve_string(s, pointer, lookup, records).map(Value::String),
        Value::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let len = pointer.len();
                push_token(pointer, &i.to_string());
                let resolved = walk(item, pointer, lookup, records);
                pointer.truncate(len);
                out.push(resolved?);
            }
            Ok(Value::Array(out))
        }
        Value::Object(map) => {
            let mut out = Map::with_capacity(map.len());
            for (key, item) in map {
                let len = pointer.len();
                push_token(pointer, key);
                let resolved = walk(item, pointer, lookup, records);
                pointer.truncate(len);
                out.insert(key.clone(), resolved?);
            }
            Ok(Value::Object(out))
        }
        other => Ok(other.clone()),
    }
}

fn resolve_string(
    s: &str,
    pointer: &str,
    lookup: &dyn Lookup,
    records: &mut Vec<Record>,
) -> Result<String, ResolveError> {
    let occurrences = find_all(s).map_err(|error| ResolveError::Parse {
        pointer: pointer.to_owned(),
        error,
    })?;
    if occurrences.is_empty() {
        return Ok(s.to_owned());
    }
    let mut out = String::with_capacity(s.len());
    let mut secrets: Vec<String> = Vec::new();
    let mut last = 0;
    for occ in &occurrences {
        let value = lookup
            .lookup(&occ.reference)
            .map_err(|message| ResolveError::Lookup {
                pointer: pointer.to_owned(),
                reference: occ.text.clone(),
                message,
            })?;
        out.push_str(&s[last..occ.start]);
        out.push_str(&value);
        last = occ.end;
        if occ.reference.is_secret() && !value.is_empty() && !secrets.contains(&value) {
            secrets.push(value);
        }
    }
    out.push_str(&s[last..]);
    records.push(Record {
        pointer: pointer.to_owned(),
        original: s.to_owned(),
        secrets,
    });
    Ok(out)
}

impl Resolution {
    /// Puts the original `{{resolve:...}}` text back at every recorded pointer (restore
    /// before persisting). Positions that no longer exist are skipped; whatever is at an
    /// existing position is replaced.
    pub fn restore(&self, value: &Value) -> Value {
        let mut out = value.clone();
        for record in &self.records {
            if let Some(slot) = out.pointer_mut(&record.pointer) {
                *slot = Value::String(record.original.clone());
            }
        }
        out
    }

    /// Replaces every secret value (longest first, non-empty only) in `text` with `***`
    /// (for error messages and logs). The JSON-escaped form of each secret (as it appears
    /// inside serialized JSON, e.g. with `\"` for `"`) is masked too.
    pub fn mask(&self, text: &str) -> String {
        let mut needles: Vec<String> = Vec::new();
        for secret in self.records.iter().flat_map(|r| &r.secrets) {
            if secret.is_empty() {
                continue;
            }
            needles.push(secret.clone());
            if let Ok(json) = serde_json::to_string(secret)
                && let Some(inner) = json.strip_prefix('"').and_then(|j| j.strip_suffix('"'))
                && inner != secret
            {
                needles.push(inner.to_owned());
            }
        }
        if needles.is_empty() {
            return text.to_owned();
        }
        needles.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        needles.dedup();

        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(c) = rest.chars().next() {
            if let Some(needle) = needles.iter().find(|n| rest.starts_with(n.as_str())) {
                out.push_str(MASK);
                rest = &rest[needle.len()..];
            } else {
                out.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
        out
    }

    /// Whether no string contained a dynamic reference.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;
    use std::collections::HashMap;

    fn ssm(name: &str, version: Option<&str>) -> DynamicReference {
        DynamicReference::Ssm {
            name: name.into(),
            version: version.map(Into::into),
        }
    }

    fn ssm_secure(name: &str, version: Option<&str>) -> DynamicReference {
        DynamicReference::SsmSecure {
            name: name.into(),
            version: version.map(Into::into),
        }
    }

    fn sm(id: &str, key: Option<&str>, stage: Option<&str>, vid: Option<&str>) -> DynamicReference {
        DynamicReference::SecretsManager {
            secret_id: id.into(),
            json_key: key.map(Into::into),
            version_stage: stage.map(Into::into),
            version_id: vid.map(Into::into),
        }
    }

    /// Parses `text`, checks the expected reference, and checks that the canonical text is
    /// `canonical` and parses back to the same reference.
    fn check(text: &str, expected: DynamicReference, canonical: &str) {
        let parsed = DynamicReference::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(parsed, expected, "{text}");
        assert_eq!(parsed.to_string(), canonical, "{text}");
        assert_eq!(DynamicReference::parse(canonical).unwrap(), parsed);
        assert_eq!(canonical.parse::<DynamicReference>().unwrap(), parsed);
        let found = find_all(text).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!((found[0].start, found[0].end), (0, text.len()));
        assert_eq!(found[0].text, text);
        assert_eq!(found[0].reference, expected);
    }

    #[test]
    fn ssm_forms() {
        let t = "{{resolve:ssm:MyParam}}";
        check(t, ssm("MyParam", None), t);
        let t = "{{resolve:ssm:MyParam:3}}";
        check(t, ssm("MyParam", Some("3")), t);
        let t = "{{resolve:ssm:/app/prod/db.host_name-1}}";
        check(t, ssm("/app/prod/db.host_name-1", None), t);
        let t = "{{resolve:ssm:/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-x86_64:12}}";
        check(
            t,
            ssm(
                "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-x86_64",
                Some("12"),
            ),
            t,
        );
        let t = "{{resolve:ssm:arn:aws:ssm:us-east-1:123456789012:parameter/app/db.host}}";
        check(
            t,
            ssm(
                "arn:aws:ssm:us-east-1:123456789012:parameter/app/db.host",
                None,
            ),
            t,
        );
        let t = "{{resolve:ssm:arn:aws-cn:ssm:cn-north-1:123456789012:parameter/MyParam:7}}";
        check(
            t,
            ssm(
                "arn:aws-cn:ssm:cn-north-1:123456789012:parameter/MyParam",
                Some("7"),
            ),
            t,
        );
        // A parameter may be called "arn".
        let t = "{{resolve:ssm:arn:2}}";
        check(t, ssm("arn", Some("2")), t);
    }

    #[test]
    fn ssm_secure_forms() {
        let t = "{{resolve:ssm-secure:IAMUserPassword}}";
        check(t, ssm_secure("IAMUserPassword", None), t);
        let t = "{{resolve:ssm-secure:/prod/db/password:10}}";
        check(t, ssm_secure("/prod/db/password", Some("10")), t);
        let t = "{{resolve:ssm-secure:arn:aws:ssm:eu-west-1:123456789012:parameter/prod/pw:2}}";
        check(
            t,
            ssm_secure(
                "arn:aws:ssm:eu-west-1:123456789012:parameter/prod/pw",
                Some("2"),
            ),
            t,
        );
    }

    #[test]
    fn secretsmanager_forms() {
        let t = "{{resolve:secretsmanager:MySecret}}";
        check(t, sm("MySecret", None, None, None), t);
        check(
            "{{resolve:secretsmanager:MySecret:SecretString}}",
            sm("MySecret", None, None, None),
            "{{resolve:secretsmanager:MySecret}}",
        );
        let t = "{{resolve:secretsmanager:MySecret:SecretString:password}}";
        check(t, sm("MySecret", Some("password"), None, None), t);
        check(
            "{{resolve:secretsmanager:MySecret:SecretString:password::}}",
            sm("MySecret", Some("password"), None, None),
            "{{resolve:secretsmanager:MySecret:SecretString:password}}",
        );
        let t = "{{resolve:secretsmanager:MySecret:SecretString:password:AWSPREVIOUS}}";
        check(
            t,
            sm("MySecret", Some("password"), Some("AWSPREVIOUS"), None),
            t,
        );
        let t = "{{resolve:secretsmanager:MySecret:SecretString::AWSPENDING}}";
        check(t, sm("MySecret", None, Some("AWSPENDING"), None), t);
        let vid = "EXAMPLE1-90ab-cdef-fedc-ba987EXAMPLE";
        check(
            &format!("{{{{resolve:secretsmanager:MySecret::::{vid}}}}}"),
            sm("MySecret", None, None, Some(vid)),
            &format!("{{{{resolve:secretsmanager:MySecret:SecretString:::{vid}}}}}"),
        );
        let t = format!("{{{{resolve:secretsmanager:MySecret:SecretString:username::{vid}}}}}");
        check(&t, sm("MySecret", Some("username"), None, Some(vid)), &t);
        check(
            "{{resolve:secretsmanager:MySecret:::}}",
            sm("MySecret", None, None, None),
            "{{resolve:secretsmanager:MySecret}}",
        );
        let t = "{{resolve:secretsmanager:prod/app+db=1.x@y_z-w}}";
        check(t, sm("prod/app+db=1.x@y_z-w", None, None, None), t);
        // A secret may be called "arn".
        let t = "{{resolve:secretsmanager:arn:SecretString:k}}";
        check(t, sm("arn", Some("k"), None, None), t);
    }

    #[test]
    fn secretsmanager_arn_ids_with_colons() {
        let arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:MySecret-a1b2c3";
        let t = format!("{{{{resolve:secretsmanager:{arn}}}}}");
        check(&t, sm(arn, None, None, None), &t);
        let t = format!("{{{{resolve:secretsmanager:{arn}:SecretString:password}}}}");
        check(&t, sm(arn, Some("password"), None, None), &t);
        check(
            &format!("{{{{resolve:secretsmanager:{arn}:SecretString:password:AWSCURRENT:}}}}"),
            sm(arn, Some("password"), Some("AWSCURRENT"), None),
            &format!("{{{{resolve:secretsmanager:{arn}:SecretString:password:AWSCURRENT}}}}"),
        );
        check(
            &format!("{{{{resolve:secretsmanager:{arn}::::v-1}}}}"),
            sm(arn, None, None, Some("v-1")),
            &format!("{{{{resolve:secretsmanager:{arn}:SecretString:::v-1}}}}"),
        );
        let gov = "arn:aws-us-gov:secretsmanager:us-gov-west-1:123456789012:secret:a/b-Xy12Zw";
        let t = format!("{{{{resolve:secretsmanager:{gov}:SecretString:k}}}}");
        check(&t, sm(gov, Some("k"), None, None), &t);
    }

    #[test]
    fn is_secret_and_service() {
        assert!(!ssm("a", None).is_secret());
        assert!(ssm_secure("a", None).is_secret());
        assert!(sm("a", None, None, None).is_secret());
        assert_eq!(ssm("a", None).service(), "ssm");
        assert_eq!(ssm_secure("a", None).service(), "ssm-secure");
        assert_eq!(sm("a", None, None, None).service(), "secretsmanager");
    }

    #[test]
    fn several_references_in_one_string() {
        let s = "postgres://{{resolve:ssm:/db/user}}:{{resolve:secretsmanager:Db:SecretString:password}}@{{resolve:ssm:/db/host:2}}/app";
        let found = find_all(s).unwrap();
        assert_eq!(
            found
                .iter()
                .map(|o| o.reference.clone())
                .collect::<Vec<_>>(),
            vec![
                ssm("/db/user", None),
                sm("Db", Some("password"), None, None),
                ssm("/db/host", Some("2")),
            ]
        );
        for o in &found {
            assert_eq!(&s[o.start..o.end], o.text);
        }
        assert_eq!(found[0].start, "postgres://".len());
        // Adjacent references and stray braces around them.
        let s = "{{{{resolve:ssm:a}}{{resolve:ssm:b}}}}";
        let found = find_all(s).unwrap();
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].text, "{{resolve:ssm:a}}");
        assert_eq!(found[0].start, 2);
        assert_eq!(found[1].text, "{{resolve:ssm:b}}");
    }

    #[test]
    fn no_references() {
        for s in [
            "",
            "plain",
            "{{resolve}}",
            "{{ resolve:ssm:a }}",
            "{resolve:ssm:a}",
            "}}",
        ] {
            assert_eq!(find_all(s).unwrap(), vec![], "{s}");
        }
        assert!(!contains_dynamic_reference("{{resolve}}"));
        assert!(contains_dynamic_reference("x{{resolve:ssm:a}}y"));
        assert!(contains_dynamic_reference("x{{resolve:bogus"));
    }

    #[test]
    fn unknown_service() {
        let err = find_all("a {{resolve:s3:bucket/key}} b").unwrap_err();
        assert_eq!(
            err,
            DynRefError::UnknownService {
                service: "s3".into(),
                text: "{{resolve:s3:bucket/key}}".into()
            }
        );
        assert!(err.to_string().contains("{{resolve:s3:bucket/key}}"));
        // Service names are case-sensitive.
        assert!(matches!(
            find_all("{{resolve:SSM:a}}"),
            Err(DynRefError::UnknownService { .. })
        ));
        assert!(matches!(
            find_all("{{resolve:secretsmanagerx}}"),
            Err(DynRefError::UnknownService { .. })
        ));
    }

    #[test]
    fn empty_names() {
        for t in [
            "{{resolve:ssm}}",
            "{{resolve:ssm:}}",
            "{{resolve:ssm::3}}",
            "{{resolve:ssm-secure:}}",
            "{{resolve:secretsmanager}}",
            "{{resolve:secretsmanager:}}",
            "{{resolve:secretsmanager::SecretString:k}}",
        ] {
            let err = find_all(t).unwrap_err();
            assert!(matches!(err, DynRefError::EmptyName { .. }), "{t}: {err:?}");
            assert!(err.to_string().contains(t), "{err}");
        }
    }

    #[test]
    fn malformed() {
        for t in [
            "{{resolve:}}",
            "{{resolve::a}}",
            "{{resolve:ssm:a:b}}",
            "{{resolve:ssm:a:}}",
            "{{resolve:ssm:a:1:2}}",
            "{{resolve:ssm:a:-1}}",
            "{{resolve:ssm:my param}}",
            "{{resolve:ssm:a$b}}",
            "{{resolve:ssm:arn:aws:ssm:us-east-1:123456789012}}",
            "{{resolve:ssm:arn:aws:s3:us-east-1:123456789012:parameter/x}}",
            "{{resolve:ssm:arn:aws:ssm:us-east-1:123456789012:parameter/x:1:2}}",
            "{{resolve:ssm:arn:aws:ssm:us-east-1:123456789012:parameter/}}",
            "{{resolve:ssm:arn:aws:ssm:us-east-1:123456789012:parameterXY}}",
            "{{resolve:ssm:arn:aws:ssm:us-east-1:123456789012:param/x}}",
            "{{resolve:ssm:arn:aws:ssm::123456789012:parameter/x}}",
            "{{resolve:ssm:a\\}}",
            "{{resolve:secretsmanager:MySecret:SecretBinary}}",
            "{{resolve:secretsmanager:MySecret:SecretString:k:s:i:extra}}",
            "{{resolve:secretsmanager:MySecret:SecretString:k:AWSCURRENT:v1}}",
            "{{resolve:secretsmanager:My Secret}}",
            "{{resolve:secretsmanager:arn:aws:secretsmanager:us-east-1:123456789012:secret}}",
            "{{resolve:secretsmanager:arn:aws:secretsmanager:us-east-1:123456789012:secret:}}",
            "{{resolve:secretsmanager:arn:aws:ssm:us-east-1:123456789012:secret:x}}",
            "{{resolve:secretsmanager:arn:aws:secretsmanager:us-east-1:123456789012:parameter:x}}",
            "{{resolve:secretsmanager:MySecret:SecretString:k\\}}",
            "{{resolve:ssm:{{resolve:ssm:a}}}}",
        ] {
            let err = find_all(t).unwrap_err();
            assert!(
                matches!(
                    err,
                    DynRefError::Malformed { .. } | DynRefError::EmptyName { .. }
                ),
                "{t}: {err:?}"
            );
            assert!(err.to_string().contains("{{resolve:"), "{err}");
        }
    }

    #[test]
    fn unterminated() {
        let err = find_all("x {{resolve:ssm:abc").unwrap_err();
        assert_eq!(
            err,
            DynRefError::Unterminated {
                text: "{{resolve:ssm:abc".into()
            }
        );
        assert_eq!(
            err.to_string(),
            "unterminated dynamic reference {{resolve:ssm:abc: no closing \"}}\""
        );
        assert!(matches!(
            find_all("{{resolve:ssm:a}} {{resolve:ssm:b}"),
            Err(DynRefError::Unterminated { .. })
        ));
    }

    #[test]
    fn parse_requires_exactly_one_reference() {
        assert!(DynamicReference::parse("x{{resolve:ssm:a}}").is_err());
        assert!(DynamicReference::parse("{{resolve:ssm:a}}x").is_err());
        assert!(DynamicReference::parse("{{resolve:ssm:a}}{{resolve:ssm:b}}").is_err());
        assert!(DynamicReference::parse("").is_err());
    }

    #[test]
    fn serde_round_trip() {
        let r = sm(
            "arn:aws:secretsmanager:us-east-1:1:secret:x",
            Some("k"),
            None,
            None,
        );
        let j = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<DynamicReference>(&j).unwrap(), r);
    }

    /// A lookup backed by a map from the canonical reference text to the value.
    struct MapLookup(HashMap<String, String>);

    impl Lookup for MapLookup {
        fn lookup(&self, r: &DynamicReference) -> Result<String, String> {
            self.0
                .get(&r.to_string())
                .cloned()
                .ok_or_else(|| format!("{} not found", r.service()))
        }
    }

    fn map_lookup(pairs: &[(&str, &str)]) -> MapLookup {
        MapLookup(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        )
    }

    #[test]
    fn resolve_and_restore() {
        let lookup = map_lookup(&[
            ("{{resolve:ssm:/db/host}}", "db.internal"),
            (
                "{{resolve:secretsmanager:Db:SecretString:password}}",
                "hunter2",
            ),
            ("{{resolve:ssm-secure:/api/key:3}}", "k-123"),
        ]);
        let input = json!({
            "Url": "pg://admin:{{resolve:secretsmanager:Db:SecretString:password::}}@{{resolve:ssm:/db/host}}",
            "Host": "{{resolve:ssm:/db/host}}",
            "List": [1, true, null, "{{resolve:ssm-secure:/api/key:3}}", "plain"],
            "{{resolve:ssm:/db/host}}": "keys are not resolved",
            "a/b~c": {"x": "{{resolve:ssm-secure:/api/key:3}}"},
        });
        let (out, res) = resolve(&input, &lookup).unwrap();
        assert_eq!(
            out,
            json!({
                "Url": "pg://admin:hunter2@db.internal",
                "Host": "db.internal",
                "List": [1, true, null, "k-123", "plain"],
                "{{resolve:ssm:/db/host}}": "keys are not resolved",
                "a/b~c": {"x": "k-123"},
            })
        );
        assert_eq!(
            res.records,
            vec![
                Record {
                    pointer: "/Url".into(),
                    original: input["Url"].as_str().unwrap().into(),
                    secrets: vec!["hunter2".into()],
                },
                Record {
                    pointer: "/Host".into(),
                    original: "{{resolve:ssm:/db/host}}".into(),
                    secrets: vec![],
                },
                Record {
                    pointer: "/List/3".into(),
                    original: "{{resolve:ssm-secure:/api/key:3}}".into(),
                    secrets: vec!["k-123".into()],
                },
                Record {
                    pointer: "/a~1b~0c/x".into(),
                    original: "{{resolve:ssm-secure:/api/key:3}}".into(),
                    secrets: vec!["k-123".into()],
                },
            ]
        );
        assert!(!res.is_empty());
        assert_eq!(res.restore(&out), input);
        // The escaped pointer addresses the key with '/' and '~'.
        assert_eq!(out.pointer("/a~1b~0c/x"), Some(&json!("k-123")));
    }

    #[test]
    fn ssm_values_are_not_secrets() {
        let lookup = map_lookup(&[("{{resolve:ssm:p}}", "public-value")]);
        let (out, res) = resolve(&json!(["{{resolve:ssm:p}}"]), &lookup).unwrap();
        assert_eq!(out, json!(["public-value"]));
        assert_eq!(res.records.len(), 1);
        assert!(res.records[0].secrets.is_empty());
        assert_eq!(res.mask("public-value"), "public-value");
    }

    #[test]
    fn resolve_root_string_and_nothing_to_do() {
        let lookup = map_lookup(&[("{{resolve:ssm:p}}", "v")]);
        let (out, res) = resolve(&json!("<{{resolve:ssm:p}}>"), &lookup).unwrap();
        assert_eq!(out, json!("<v>"));
        assert_eq!(res.records[0].pointer, "");
        assert_eq!(res.restore(&out), json!("<{{resolve:ssm:p}}>"));

        let input = json!({"a": [1, "x", {"b": null}]});
        let (out, res) = resolve(&input, &lookup).unwrap();
        assert_eq!(out, input);
        assert!(res.is_empty());
    }

    #[test]
    fn resolved_values_are_not_resolved_again() {
        let lookup = map_lookup(&[("{{resolve:ssm:p}}", "{{resolve:ssm:q}}")]);
        let (out, res) = resolve(&json!({"A": "{{resolve:ssm:p}}"}), &lookup).unwrap();
        assert_eq!(out, json!({"A": "{{resolve:ssm:q}}"}));
        assert_eq!(res.restore(&out), json!({"A": "{{resolve:ssm:p}}"}));
    }

    #[test]
    fn resolve_errors_name_pointer_and_reference() {
        let lookup = map_lookup(&[("{{resolve:secretsmanager:S}}", "topsecret")]);
        let input = json!({"P": {"k/1": ["{{resolve:secretsmanager:S}} {{resolve:ssm:missing}}"]}});
        let err = resolve(&input, &lookup).unwrap_err();
        assert_eq!(
            err,
            ResolveError::Lookup {
                pointer: "/P/k~11/0".into(),
                reference: "{{resolve:ssm:missing}}".into(),
                message: "ssm not found".into(),
            }
        );
        let msg = err.to_string();
        assert_eq!(
            msg,
            "could not resolve {{resolve:ssm:missing}} at \"/P/k~11/0\": ssm not found"
        );
        assert!(!msg.contains("topsecret"));

        let err = resolve(&json!({"X": ["ok", "{{resolve:vault:x}}"]}), &lookup).unwrap_err();
        assert!(matches!(
            &err,
            ResolveError::Parse { pointer, error: DynRefError::UnknownService { .. } } if pointer == "/X/1"
        ));
        assert!(err.to_string().contains("/X/1"));
        assert!(err.to_string().contains("{{resolve:vault:x}}"));
    }

    #[test]
    fn closures_are_lookups() {
        let lookup =
            |r: &DynamicReference| -> Result<String, String> { Ok(r.service().to_owned()) };
        let (out, _) = resolve(&json!("{{resolve:ssm:a}}"), &lookup).unwrap();
        assert_eq!(out, json!("ssm"));
    }

    #[test]
    fn mask_hides_secrets() {
        let lookup = map_lookup(&[
            ("{{resolve:secretsmanager:A}}", "pass"),
            ("{{resolve:secretsmanager:B}}", "password123"),
            ("{{resolve:ssm-secure:q}}", "say \"hi\""),
            ("{{resolve:secretsmanager:E}}", ""),
        ]);
        let input = json!({
            "A": "{{resolve:secretsmanager:A}}",
            "B": "{{resolve:secretsmanager:B}}",
            "Q": "{{resolve:ssm-secure:q}}",
            "E": "{{resolve:secretsmanager:E}}",
        });
        let (out, res) = resolve(&input, &lookup).unwrap();
        // Empty values are not recorded.
        assert!(res.records[3].secrets.is_empty());
        let error = format!(
            "CreateDBInstance failed: invalid MasterUserPassword password123 (also pass); props {out}"
        );
        let masked = res.mask(&error);
        assert_eq!(
            masked,
            "CreateDBInstance failed: invalid MasterUserPassword *** (also ***); props \
             {\"A\":\"***\",\"B\":\"***\",\"Q\":\"***\",\"E\":\"\"}"
        );
        assert!(!masked.contains("pass"));
        assert!(!masked.contains("hi"));
        assert_eq!(res.mask("say \"hi\"!"), "***!");
        assert_eq!(Resolution::default().mask("pass"), "pass");
        assert_eq!(res.mask("ünïcode pass ✓"), "ünïcode *** ✓");
    }

    #[test]
    fn debug_does_not_print_secrets() {
        let lookup = map_lookup(&[("{{resolve:secretsmanager:A}}", "hunter2")]);
        let (_, res) = resolve(&json!("{{resolve:secretsmanager:A}}"), &lookup).unwrap();
        let debug = format!("{res:?}");
        assert!(!debug.contains("hunter2"), "{debug}");
        assert!(debug.contains("<1 redacted>"), "{debug}");
    }

    #[test]
    fn restore_skips_missing_positions() {
        let lookup = map_lookup(&[("{{resolve:ssm:p}}", "v")]);
        let input = json!({"A": ["{{resolve:ssm:p}}"], "B": "{{resolve:ssm:p}}"});
        let (_, res) = resolve(&input, &lookup).unwrap();
        let changed = json!({"A": [], "C": 1});
        assert_eq!(res.restore(&changed), changed);
        let partly = json!({"A": ["v"], "B": 5});
        assert_eq!(
            res.restore(&partly),
            json!({"A": ["{{resolve:ssm:p}}"], "B": "{{resolve:ssm:p}}"})
        );
    }

    // ---- property tests ----

    fn ssm_name() -> impl Strategy<Value = String> {
        "/?[A-Za-z0-9_.-]{1,8}(/[A-Za-z0-9_.-]{1,8}){0,2}"
    }

    fn field() -> impl Strategy<Value = Option<String>> {
        proptest::option::of("[A-Za-z0-9_ .-]{1,8}")
    }

    fn reference() -> impl Strategy<Value = DynamicReference> {
        let version = proptest::option::of("[0-9]{1,3}");
        let secret_id = prop_oneof![
            "[A-Za-z0-9/_+=.@-]{1,12}",
            "[A-Za-z0-9/_+=.@-]{1,12}"
                .prop_map(|n| format!("arn:aws:secretsmanager:us-east-1:123456789012:secret:{n}")),
        ];
        let ssm_name = prop_oneof![
            ssm_name(),
            "[A-Za-z0-9_.-]{1,8}(/[A-Za-z0-9_.-]{1,8}){0,2}"
                .prop_map(|n| format!("arn:aws:ssm:us-east-1:123456789012:parameter/{n}")),
        ];
        prop_oneof![
            (ssm_name.clone(), version.clone())
                .prop_map(|(name, version)| DynamicReference::Ssm { name, version }),
            (ssm_name, version)
                .prop_map(|(name, version)| DynamicReference::SsmSecure { name, version }),
            (secret_id, field(), field(), field(), any::<bool>()).prop_map(
                |(secret_id, json_key, version_stage, version_id, stage_wins)| {
                    // Only one of version-stage and version-id may be given.
                    let (version_stage, version_id) = if stage_wins {
                        (version_stage, None)
                    } else {
                        (None, version_id)
                    };
                    DynamicReference::SecretsManager {
                        secret_id,
                        json_key,
                        version_stage,
                        version_id,
                    }
                }
            ),
        ]
    }

    /// A string made of plain pieces (which may contain braces, `/`, `~`, but never the
    /// `{{resolve:` marker since they have no `:`) and references.
    fn text_with_refs() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            3 => "[a-z {}/~é]{0,6}",
            1 => reference().prop_map(|r| r.to_string()),
        ];
        proptest::collection::vec(piece, 0..5).prop_map(|v| v.concat())
    }

    fn json_tree() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            text_with_refs().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::vec(("[a-z/~{}:]{0,5}", inner), 0..6)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    /// Secret values look like `S3CRET<n>`, others `plain<n>`; some values contain a
    /// reference themselves.
    fn test_lookup(r: &DynamicReference) -> Result<String, String> {
        let text = r.to_string();
        let n = text.len() % 17;
        Ok(if r.is_secret() {
            format!("S3CRET{n}\"x")
        } else if n.is_multiple_of(3) {
            "{{resolve:ssm:nested}}".to_owned()
        } else {
            format!("plain{n}")
        })
    }

    fn count_strings_with_refs(v: &Value) -> usize {
        match v {
            Value::String(s) => usize::from(contains_dynamic_reference(s)),
            Value::Array(a) => a.iter().map(count_strings_with_refs).sum(),
            Value::Object(m) => m.values().map(count_strings_with_refs).sum(),
            _ => 0,
        }
    }

    proptest! {
        #[test]
        fn display_round_trips(r in reference()) {
            let text = r.to_string();
            prop_assert_eq!(DynamicReference::parse(&text), Ok(r.clone()));
            let found = find_all(&format!("a{text}b")).unwrap();
            prop_assert_eq!(found.len(), 1);
            prop_assert_eq!(&found[0].reference, &r);
            prop_assert_eq!(found[0].start, 1);
        }

        #[test]
        fn resolve_then_restore_is_identity(input in json_tree()) {
            let (out, res) = resolve(&input, &test_lookup).unwrap();
            prop_assert_eq!(res.records.len(), count_strings_with_refs(&input));
            prop_assert_eq!(res.restore(&out), input.clone());
            // No secret survives masking of the serialized resolved value.
            let masked = res.mask(&out.to_string());
            prop_assert!(!masked.contains("S3CRET"), "{}", masked);
            // Records point at the resolved strings.
            for rec in &res.records {
                prop_assert!(out.pointer(&rec.pointer).is_some_and(Value::is_string));
                prop_assert_eq!(input.pointer(&rec.pointer), Some(&Value::String(rec.original.clone())));
            }
        }

        #[test]
        fn find_all_never_panics(s in "(\\{\\{resolve:|ssm|secretsmanager|ssm-secure|:|\\}\\}|[a-z/é\\\\ ]){0,12}") {
            if let Ok(found) = find_all(&s) {
                for o in found {
                    prop_assert_eq!(&s[o.start..o.end], o.text.as_str());
                    prop_assert_eq!(DynamicReference::parse(&o.reference.to_string()), Ok(o.reference.clone()));
                }
            }
        }
    }
}
