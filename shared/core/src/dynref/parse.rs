//! Parsing: one reference ([`DynamicReference::parse`]), every reference in a string
//! ([`find_all`]), and the canonical text ([`DynamicReference`]'s `Display`).

use std::fmt;

use super::{CLOSE, DynRefError, DynamicReference, OPEN};

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

#[cfg(test)]
mod tests;
