//! The mark a create leaves on what it makes, so that the stack can later prove that it
//! made it: a tag `stackflow:token` whose value is a hash of the create's idempotency token
//! ([`token_mark`]). The token is the same on every replay of one create and another for
//! any other action, so a resource carrying the mark of a request's token was made by that
//! request (an earlier attempt of it), and nothing else.
//!
//! Proof is what the engine asks for before it adopts a resource that a replayed create
//! finds under its name ([`crate::provider::Provider::made_by`]), and what a create checks
//! after a call that a service answers with an existing resource as if it had made it
//! (SNS `CreateTopic`, SQS `CreateQueue`): "already exists" is never taken for ownership.
//!
//! Marks are the stack's bookkeeping, not the template's: the state a provider reports
//! leaves them out ([`is_mark`]), and an update never removes them (tags are synced from
//! the template's old tags to its new ones, which never hold a mark).

use sha2::{Digest, Sha256};

use crate::provider::ResourceRequest;

/// The tag holding the hash of the create's idempotency token.
pub const TOKEN_MARK: &str = "stackflow:token";

/// The hash of `token` that [`TOKEN_MARK`] holds (24 hex digits of its SHA-256).
pub fn token_mark(token: &str) -> String {
    let digest = Sha256::digest(token.as_bytes());
    digest.iter().take(12).map(|b| format!("{b:02x}")).collect()
}

/// True for a tag key that is the stack's mark, not the template's.
pub fn is_mark(key: &str) -> bool {
    key.starts_with("stackflow:")
}

/// The mark the create `request` leaves, as (key, value); `None` for a request without a
/// token (a provider called on its own, outside a deploy), which can prove nothing.
pub fn own_mark(request: &ResourceRequest) -> Option<(String, String)> {
    (!request.token.is_empty()).then(|| (TOKEN_MARK.to_string(), token_mark(&request.token)))
}

/// True when `tags` (key, value) hold the mark of the create `request`.
pub fn carries_own_mark(tags: &[(String, String)], request: &ResourceRequest) -> bool {
    let Some(mark) = own_mark(request) else {
        return false;
    };
    tags.contains(&mark)
}

/// Checks that the resource a create call answered carries the create's mark, reading its
/// tags with `read`: a resource without it existed before the call ([`not_made_by`]).
/// A resource with no mark at all is read again twice (a second, then two), as tags may
/// show a moment after the create that set them; a resource with another create's mark
/// is refused at once. Nothing is checked for a request without a token.
pub(crate) async fn check_made<F, Fut>(
    request: &ResourceRequest,
    what: &str,
    read: F,
) -> Result<(), crate::error::ProviderError>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<Vec<(String, String)>, crate::error::ProviderError>>,
{
    if own_mark(request).is_none() {
        return Ok(());
    }
    for wait in [1, 2, 0] {
        let tags = read().await?;
        if carries_own_mark(&tags, request) {
            return Ok(());
        }
        if wait == 0 || tags.iter().any(|(k, _)| k == TOKEN_MARK) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_secs(wait)).await;
    }
    Err(not_made_by(request, what))
}

/// The error of a create whose call answered a resource that does not carry its mark: it
/// existed before (made by someone else, between the check that its name was free and the
/// call). Nothing of it is recorded or changed.
pub fn not_made_by(request: &ResourceRequest, what: &str) -> crate::error::ProviderError {
    crate::error::ProviderError::AlreadyExists(format!(
        "{} {} ({what}): it exists, and this stack did not make it (it does not carry this \
         create's {TOKEN_MARK} mark; it was made by someone else after the name was found \
         free); stackflow never takes over what it did not make: give the resource another \
         name, or adopt it with `stackflow import`",
        request.resource_type, request.logical_id
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(token: &str) -> ResourceRequest {
        let mut r = ResourceRequest::new("s", "L", "AWS::SNS::Topic", Default::default());
        r.token = token.into();
        r
    }

    #[test]
    fn a_mark_proves_only_its_own_token() {
        let mine = request("d1/L/create");
        let (key, value) = own_mark(&mine).expect("a mark");
        assert_eq!(key, TOKEN_MARK);
        assert_eq!(value, token_mark("d1/L/create"));
        assert_eq!(value.len(), 24);
        let pair = |k: &str, v: &str| (k.to_string(), v.to_string());
        let theirs = pair("owner", "them");
        let marked = [theirs.clone(), pair(&key, &value)];
        assert!(carries_own_mark(&marked, &mine));
        assert!(!carries_own_mark(&marked, &request("d2/L/create")));
        assert!(!carries_own_mark(&[theirs], &mine));
        // Without a token nothing is marked, and nothing is proven.
        assert_eq!(own_mark(&request("")), None);
        assert!(!carries_own_mark(&marked, &request("")));
        assert!(is_mark(TOKEN_MARK) && !is_mark("owner"));
        assert!(!is_mark("aws:cloudformation:stack-name"));
    }

    #[tokio::test]
    async fn a_create_answered_with_what_it_did_not_make_is_refused() {
        let mine = request("d1/L/create");
        let (key, value) = own_mark(&mine).expect("a mark");
        let marked = vec![(key.clone(), value)];
        assert!(
            check_made(&mine, "t", || async { Ok(marked.clone()) })
                .await
                .is_ok()
        );
        // Another create's mark: refused at the first read.
        let reads = std::sync::atomic::AtomicU32::new(0);
        let other = vec![(key, token_mark("d2/L/create"))];
        let refused = check_made(&mine, "arn:t", || {
            reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async { Ok(other.clone()) }
        })
        .await;
        assert!(
            matches!(&refused, Err(crate::error::ProviderError::AlreadyExists(m))
                if m.contains("arn:t") && m.contains("stackflow import")),
            "{refused:?}"
        );
        assert_eq!(reads.load(std::sync::atomic::Ordering::SeqCst), 1);
        // No token, nothing to prove.
        assert!(
            check_made(&request(""), "t", || async { Ok(vec![]) })
                .await
                .is_ok()
        );
    }
}
