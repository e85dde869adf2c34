//! One SDK call: retried, its error classified; lookups and paginated listings.

use std::future::Future;

use aws_sdk_cloudcontrol::error::{ProvideErrorMetadata, SdkError};

use crate::error::{HttpResponse, ProviderError};
use crate::retry::{RetryPolicy, retry};

/// One SDK call (`send` makes and sends the request), retried by `policy`, its error
/// classified with [`ProviderError::from_sdk`]; `what` names the operation.
pub(crate) async fn call<T, E, F, Fut>(
    policy: &RetryPolicy,
    what: &str,
    send: F,
) -> Result<T, ProviderError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, SdkError<E, HttpResponse>>>,
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    call_classified(policy, what, ProviderError::from_sdk, send).await
}

/// [`call`] with another classification of the service's errors.
pub(crate) async fn call_classified<T, E, F, Fut>(
    policy: &RetryPolicy,
    what: &str,
    classify: fn(&str, SdkError<E, HttpResponse>) -> ProviderError,
    mut send: F,
) -> Result<T, ProviderError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, SdkError<E, HttpResponse>>>,
{
    retry(policy, what, || {
        let sent = send();
        async move { sent.await.map_err(|e| classify(what, e)) }
    })
    .await
}

/// Sends `request` (an SDK request builder) with `send`, as [`call_classified`] retries it,
/// and drops the answer.
pub(crate) async fn send_request<B, T, E, Fut>(
    policy: &RetryPolicy,
    what: &str,
    classify: fn(&str, SdkError<E, HttpResponse>) -> ProviderError,
    request: B,
    send: impl Fn(B) -> Fut,
) -> Result<(), ProviderError>
where
    B: Clone,
    Fut: Future<Output = Result<T, SdkError<E, HttpResponse>>>,
{
    call_classified(policy, what, classify, || send(request.clone()))
        .await
        .map(drop)
}

/// A [`ProviderError::NotFound`] as `None`: the answer of a lookup.
pub(crate) fn missing_as_none<T>(
    result: Result<T, ProviderError>,
) -> Result<Option<T>, ProviderError> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(ProviderError::NotFound(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Goes through the pages of a listing (`fetch` gets the page after a token, `next_token`
/// reads a page's) until `pick` takes something from a page, or the last page.
pub(crate) async fn find_in_pages<P, T, F, Fut>(
    mut fetch: F,
    next_token: impl Fn(&P) -> Option<&str>,
    mut pick: impl FnMut(&P) -> Option<T>,
) -> Result<Option<T>, ProviderError>
where
    F: FnMut(Option<String>) -> Fut,
    Fut: Future<Output = Result<P, ProviderError>>,
{
    let mut token = None;
    loop {
        let page = fetch(token.take()).await?;
        if let Some(picked) = pick(&page) {
            return Ok(Some(picked));
        }
        match next_token(&page) {
            Some(next) if !next.is_empty() => token = Some(next.to_string()),
            _ => return Ok(None),
        }
    }
}
