//! Retrying classified errors: exponential backoff with jitter for throttling and transient
//! failures (never sooner than a throttling answer's `Retry-After`), a dense fixed schedule
//! for IAM propagation, a deadline per call and one for the whole operation. Every
//! throttled call is told to the running task's [`crate::throttle::ThrottleSink`].

use std::collections::hash_map::RandomState;
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use tokio::time::Instant;

use crate::error::ProviderError;

/// How [`retry`] retries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// The first backoff for throttling/transient errors.
    pub base_delay: Duration,
    /// The largest backoff for throttling/transient errors.
    pub max_delay: Duration,
    /// Attempts in all (first call included) for throttling/transient errors.
    pub max_attempts: u32,
    /// The delay between attempts while IAM propagates.
    pub iam_delay: Duration,
    /// How long IAM propagation errors are retried, from the first such error.
    pub iam_budget: Duration,
    /// Deadline of one call; a call that takes longer counts as a transient failure.
    pub call_deadline: Duration,
    /// Deadline of the whole operation (all attempts and delays): the per-resource timeout.
    pub total_deadline: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            base_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(20),
            max_attempts: 8,
            iam_delay: Duration::from_secs(2),
            iam_budget: Duration::from_secs(120),
            call_deadline: Duration::from_secs(60),
            total_deadline: Duration::from_secs(30 * 60),
        }
    }
}

impl RetryPolicy {
    /// No retries at all (each call once, with the call deadline).
    pub fn none() -> Self {
        RetryPolicy {
            max_attempts: 1,
            iam_budget: Duration::ZERO,
            ..RetryPolicy::default()
        }
    }

    /// The backoff before attempt `attempt + 1` after a throttling/transient error
    /// (`attempt` counts from 1): `base * 2^(attempt-1)`, capped, with "equal jitter"
    /// (a random point in the upper half).
    pub fn backoff(&self, attempt: u32) -> Duration {
        let exp = self
            .base_delay
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(20));
        let capped = exp.min(self.max_delay);
        let half = capped / 2;
        half + half.mul_f64(random_unit())
    }
}

/// A pseudo-random number in `[0, 1)`, good enough for jitter.
fn random_unit() -> f64 {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    // 53 bits of mantissa.
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// Runs `op` until it succeeds, fails with a non-retryable error, or the policy is
/// exhausted; `what` names the operation in errors. Each call is bounded by
/// [`RetryPolicy::call_deadline`], the whole by [`RetryPolicy::total_deadline`] (then the
/// error is a [`ProviderError::Timeout`] quoting the last failure).
pub async fn retry<T, F, Fut>(
    policy: &RetryPolicy,
    what: &str,
    mut op: F,
) -> Result<T, ProviderError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, ProviderError>>,
{
    let started = Instant::now();
    let deadline = started + policy.total_deadline;
    let mut attempt = 0u32;
    let mut iam_since: Option<Instant> = None;
    loop {
        attempt += 1;
        let remaining = deadline.saturating_duration_since(Instant::now());
        let call_deadline = policy.call_deadline.min(remaining);
        let result = match tokio::time::timeout(call_deadline, op()).await {
            Ok(result) => result,
            Err(_) => Err(ProviderError::Transient(format!(
                "{what}: no answer within {call_deadline:?}"
            ))),
        };
        let error = match result {
            Ok(value) => return Ok(value),
            Err(error) => error,
        };
        let delay = match &error {
            ProviderError::IamPropagation(_) => {
                let since = *iam_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= policy.iam_budget {
                    return Err(error);
                }
                policy.iam_delay
            }
            ProviderError::Throttled(_, retry_after) => {
                crate::throttle::report(None, *retry_after);
                if attempt >= policy.max_attempts {
                    return Err(error);
                }
                policy.backoff(attempt).max(retry_after.unwrap_or_default())
            }
            ProviderError::Transient(_) => {
                if attempt >= policy.max_attempts {
                    return Err(error);
                }
                policy.backoff(attempt)
            }
            _ => return Err(error),
        };
        if Instant::now() + delay >= deadline {
            return Err(ProviderError::Timeout(format!(
                "{what}: gave up after {:?} and {attempt} attempts; last error: {error}",
                started.elapsed()
            )));
        }
        tokio::time::sleep(delay).await;
        if let ProviderError::Throttled(..) = error {
            crate::throttle::ready().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    fn policy() -> RetryPolicy {
        RetryPolicy {
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(1),
            max_attempts: 4,
            iam_delay: Duration::from_secs(2),
            iam_budget: Duration::from_secs(10),
            call_deadline: Duration::from_secs(5),
            total_deadline: Duration::from_secs(60),
        }
    }

    #[test]
    fn backoff_grows_is_capped_and_jittered() {
        let p = policy();
        for _ in 0..50 {
            let d1 = p.backoff(1);
            assert!(
                d1 >= Duration::from_millis(50) && d1 <= Duration::from_millis(100),
                "{d1:?}"
            );
            let d3 = p.backoff(3);
            assert!(
                d3 >= Duration::from_millis(200) && d3 <= Duration::from_millis(400),
                "{d3:?}"
            );
            let d9 = p.backoff(30);
            assert!(
                d9 >= Duration::from_millis(500) && d9 <= Duration::from_secs(1),
                "{d9:?}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn retries_throttling_until_success() {
        let calls = AtomicU32::new(0);
        let got = retry(&policy(), "op", || async {
            if calls.fetch_add(1, Ordering::SeqCst) < 2 {
                Err(ProviderError::Throttled("slow down".into(), None))
            } else {
                Ok(7)
            }
        })
        .await;
        assert_eq!(got, Ok(7));
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn honours_retry_after_and_tells_the_sink() {
        struct Count(AtomicU32);
        impl crate::throttle::ThrottleSink for Count {
            fn throttled(&self, service: Option<&str>, after: Option<Duration>) {
                assert_eq!((service, after), (None, Some(Duration::from_secs(7))));
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let sink = std::sync::Arc::new(Count(AtomicU32::new(0)));
        let calls = AtomicU32::new(0);
        let start = Instant::now();
        let got = crate::throttle::observed(
            sink.clone(),
            retry(&policy(), "op", || async {
                if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                    Err(ProviderError::Throttled(
                        "wait".into(),
                        Some(Duration::from_secs(7)),
                    ))
                } else {
                    Ok(1)
                }
            }),
        )
        .await;
        assert_eq!(got, Ok(1));
        // The service's 7 s, not the first backoff of at most 100 ms.
        assert_eq!(start.elapsed(), Duration::from_secs(7));
        assert_eq!(sink.0.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn gives_up_after_max_attempts_and_never_retries_invalid() {
        let calls = AtomicU32::new(0);
        let got: Result<(), _> = retry(&policy(), "op", || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(ProviderError::Transient("503".into()))
        })
        .await;
        assert_eq!(got, Err(ProviderError::Transient("503".into())));
        assert_eq!(calls.load(Ordering::SeqCst), 4);

        let calls = AtomicU32::new(0);
        let got: Result<(), _> = retry(&policy(), "op", || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(ProviderError::InvalidRequest("bad".into()))
        })
        .await;
        assert!(matches!(got, Err(ProviderError::InvalidRequest(_))));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn iam_propagation_uses_the_dense_schedule_within_its_budget() {
        let calls = AtomicU32::new(0);
        let start = Instant::now();
        let got: Result<(), _> = retry(&policy(), "op", || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(ProviderError::IamPropagation(
                "role cannot be assumed".into(),
            ))
        })
        .await;
        assert!(matches!(got, Err(ProviderError::IamPropagation(_))));
        // Every 2 s for 10 s: calls at 0, 2, 4, 6, 8, 10.
        assert_eq!(calls.load(Ordering::SeqCst), 6);
        assert_eq!(start.elapsed(), Duration::from_secs(10));
    }

    #[tokio::test(start_paused = true)]
    async fn a_hanging_call_is_transient_and_the_total_deadline_is_a_timeout() {
        let p = RetryPolicy {
            call_deadline: Duration::from_secs(5),
            total_deadline: Duration::from_secs(12),
            max_attempts: 100,
            ..policy()
        };
        let got: Result<(), _> = retry(&p, "op", || async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok(())
        })
        .await;
        match got {
            Err(ProviderError::Timeout(m)) => assert!(m.contains("no answer within"), "{m}"),
            other => panic!("{other:?}"),
        }
    }
}
