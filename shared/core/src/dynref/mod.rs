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
//! [`resolve()`] replaces every reference in a JSON value by its value and returns a
//! [`Resolution`] that remembers where it did so. [`Resolution::restore`] puts the original
//! `{{resolve:...}}` text back before anything is persisted, and [`Resolution::mask`] hides
//! the secret values in error messages and logs.

mod mask;
mod parse;
pub(crate) mod resolve;
#[cfg(test)]
mod testing;

pub use parse::{Occurrence, contains_dynamic_reference, find_all};
pub use resolve::{Record, Resolution, resolve};

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

/// Why [`resolve()`] failed. Messages name the JSON pointer and the reference, never a
/// resolved value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// A string contains a dynamic reference that does not parse.
    #[error("in the string at {pointer:?}: {error}")]
    Parse { pointer: String, error: DynRefError },

    /// The [`Lookup`] failed.
    #[error("could not resolve {reference} at {pointer:?}: {failed}")]
    Lookup {
        pointer: String,
        reference: String,
        failed: LookupFailed,
    },
}

impl DynamicReference {
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

/// Why a [`Lookup`] has no value for a reference. Its text never holds a secret value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LookupFailed {
    /// The reference was not among those looked up before the resolution.
    #[error("not looked up")]
    NotLookedUp,
    /// The service has no such parameter or secret.
    #[error("{service} not found")]
    NotFound {
        /// `ssm`, `ssm-secure` or `secretsmanager`.
        service: &'static str,
    },
}

/// Something that can look up a dynamic reference's value (implemented by the AWS layer;
/// tests use a map).
pub trait Lookup {
    fn lookup(&self, r: &DynamicReference) -> Result<String, LookupFailed>;
}

impl<F> Lookup for F
where
    F: Fn(&DynamicReference) -> Result<String, LookupFailed>,
{
    fn lookup(&self, r: &DynamicReference) -> Result<String, LookupFailed> {
        self(r)
    }
}
