//! Deterministic physical names for resources whose template gives none.
//!
//! A name is `{stack}-{logicalId}-{hash}`: the hash covers the stack, the logical id and
//! the request's idempotency token, so a retry of the same action makes the same name
//! (and finds the resource it made before), while a replacement (another action, another
//! token) gets a new name beside the old resource. Stack and logical id are shortened to
//! fit the service's length limit and stripped of characters it refuses; the hash is
//! always kept whole.

use sha2::{Digest, Sha256};

use crate::provider::ResourceRequest;

/// A service's rules for a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NameRules {
    /// Longest allowed name (suffix included).
    pub max_len: usize,
    /// Characters allowed besides ASCII letters and digits (`-` must be one of them or the
    /// separator is `_`).
    pub extra: &'static str,
    /// Lowercase everything (S3 buckets).
    pub lowercase: bool,
}

/// Number of hex digits of the hash.
pub const HASH_LEN: usize = 12;

/// The name a create uses: the template's `property` when it sets one (`false`: given),
/// else the deterministic name of [`physical_name`] with no suffix (`true`: generated).
pub fn given_or_generated(
    request: &ResourceRequest,
    property: &str,
    rules: NameRules,
) -> (String, bool) {
    given_or_suffixed(request, property, "", rules)
}

/// [`given_or_generated`] with `suffix` (e.g. `.fifo`) at the end of a generated name.
pub fn given_or_suffixed(
    request: &ResourceRequest,
    property: &str,
    suffix: &str,
    rules: NameRules,
) -> (String, bool) {
    match request.string_property(property) {
        Some(name) => (name.to_string(), false),
        None => (
            physical_name(
                &request.stack_name,
                &request.logical_id,
                &request.token,
                suffix,
                rules,
            ),
            true,
        ),
    }
}

/// The deterministic name of `request`'s resource, [`physical_name`] of its stack, logical id
/// and token with no suffix: what providers use as an id AWS does not give, or as a mark.
pub fn generated_name(request: &ResourceRequest, rules: NameRules) -> String {
    physical_name(
        &request.stack_name,
        &request.logical_id,
        &request.token,
        "",
        rules,
    )
}

/// `{stack}-{logical_id}-{hash}{suffix}` within `rules` (`suffix` e.g. `.fifo`, counted in
/// the length and kept as is).
pub fn physical_name(
    stack: &str,
    logical_id: &str,
    token: &str,
    suffix: &str,
    rules: NameRules,
) -> String {
    let mut hasher = Sha256::new();
    for part in [stack, logical_id, token] {
        hasher.update(part.len().to_le_bytes());
        hasher.update(part.as_bytes());
    }
    let digest = hasher.finalize();
    let hash: String = digest
        .iter()
        .take(HASH_LEN / 2)
        .map(|b| format!("{b:02x}"))
        .collect();
    let sep = if rules.extra.contains('-') { '-' } else { '_' };
    let clean = |s: &str| -> String {
        s.chars()
            .filter(|c| c.is_ascii_alphanumeric() || rules.extra.contains(*c))
            .map(|c| {
                if rules.lowercase {
                    c.to_ascii_lowercase()
                } else {
                    c
                }
            })
            .collect()
    };
    let mut stack = clean(stack);
    let mut logical = clean(logical_id);
    // Room for the two parts: the limit minus hash, suffix and two separators.
    let room = rules.max_len.saturating_sub(HASH_LEN + suffix.len() + 2);
    // Share the room: the logical id keeps at least half when both are long.
    if stack.len() + logical.len() > room {
        let logical_keep = logical.len().min(
            room.max(1)
                .div_ceil(2)
                .max(room.saturating_sub(stack.len())),
        );
        logical.truncate(logical_keep);
        stack.truncate(room.saturating_sub(logical.len()));
    }
    let mut name = String::new();
    for part in [stack.as_str(), logical.as_str()] {
        if !part.is_empty() {
            name.push_str(part);
            name.push(sep);
        }
    }
    name.push_str(&hash);
    name.push_str(suffix);
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    const SQS: NameRules = NameRules {
        max_len: 80,
        extra: "-_",
        lowercase: false,
    };

    #[test]
    fn deterministic_and_token_dependent() {
        let a = physical_name("MyStack", "Queue", "t1", "", SQS);
        assert_eq!(a, physical_name("MyStack", "Queue", "t1", "", SQS));
        assert_ne!(a, physical_name("MyStack", "Queue", "t2", "", SQS));
        assert!(a.starts_with("MyStack-Queue-"), "{a}");
        assert_eq!(a.len(), "MyStack-Queue-".len() + HASH_LEN);
    }

    #[test]
    fn fits_limits_and_charset() {
        let long = "x".repeat(200);
        let name = physical_name(&long, "Logical/Id.With$Junk", "t", ".fifo", SQS);
        assert!(name.len() <= 80, "{} {name}", name.len());
        assert!(name.ends_with(".fifo"));
        assert!(name.contains("LogicalIdWithJunk"), "{name}");
        let body = name.trim_end_matches(".fifo");
        assert!(
            body.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'),
            "{name}"
        );

        let both_long = physical_name(&long, &"L".repeat(200), "t", "", SQS);
        assert_eq!(both_long.len(), 80);
        assert!(both_long.contains("LLLL"), "{both_long}");

        let bucket = NameRules {
            max_len: 63,
            extra: "-",
            lowercase: true,
        };
        let name = physical_name("My_Stack", "Bucket", "t", "", bucket);
        assert!(name.starts_with("mystack-bucket-"), "{name}");
    }
}
