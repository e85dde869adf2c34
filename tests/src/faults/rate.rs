//! The fault proxy's rate-limit mode: each service answers its throttling error to the
//! requests above a set rate, as AWS does (a token bucket per service: `burst` requests
//! at once, refilled at `per_second`).

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// A request rate above which a service throttles.
#[derive(Debug, Clone, PartialEq)]
pub struct RateLimit {
    /// Requests per second each service serves, sustained.
    pub per_second: f64,
    /// Requests a service serves at once after a quiet time.
    pub burst: f64,
    /// Only these services are limited (SigV4 names: `sqs`, `ssm`); all when empty.
    pub services: Vec<String>,
    /// Send `Retry-After` with the time until the next request would be served.
    pub retry_after: bool,
}

impl RateLimit {
    /// `per_second` with a burst of the same size, every service, no `Retry-After`.
    pub fn new(per_second: f64) -> RateLimit {
        RateLimit {
            per_second,
            burst: per_second,
            services: Vec::new(),
            retry_after: false,
        }
    }
}

/// What the bucket of one service holds.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Every service's bucket.
#[derive(Debug)]
pub(super) struct Buckets {
    limit: RateLimit,
    buckets: HashMap<String, Bucket>,
}

impl Buckets {
    pub(super) fn new(limit: RateLimit) -> Buckets {
        Buckets {
            limit,
            buckets: HashMap::new(),
        }
    }

    /// Takes a token of `service` at `now`: `None` when the request is served, else the
    /// time until the next token (it is throttled).
    pub(super) fn take(&mut self, service: &str, now: Instant) -> Option<Duration> {
        let limit = &self.limit;
        if !limit.services.is_empty() && !limit.services.iter().any(|s| s == service) {
            return None;
        }
        let bucket = self.buckets.entry(service.to_string()).or_insert(Bucket {
            tokens: limit.burst,
            at: now,
        });
        let refill = now.saturating_duration_since(bucket.at).as_secs_f64() * limit.per_second;
        bucket.tokens = (bucket.tokens + refill).min(limit.burst);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            return None;
        }
        let missing = 1.0 - bucket.tokens;
        Some(Duration::from_secs_f64(
            missing / limit.per_second.max(1e-9),
        ))
    }

    /// Whether throttled answers carry `Retry-After`.
    pub(super) fn retry_after(&self) -> bool {
        self.limit.retry_after
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serves_the_burst_then_the_rate() {
        let t0 = Instant::now();
        let mut b = Buckets::new(RateLimit {
            burst: 3.0,
            services: vec!["sqs".into()],
            ..RateLimit::new(10.0)
        });
        for _ in 0..3 {
            assert_eq!(b.take("sqs", t0), None);
        }
        let wait = b.take("sqs", t0).expect("throttled");
        assert!((wait.as_secs_f64() - 0.1).abs() < 1e-9, "{wait:?}");
        // Other services are not limited.
        assert_eq!(b.take("ssm", t0), None);
        // 100 ms later one more; 1 s later the burst again, never more.
        assert_eq!(b.take("sqs", t0 + Duration::from_millis(100)), None);
        assert!(b.take("sqs", t0 + Duration::from_millis(100)).is_some());
        let later = t0 + Duration::from_secs(5);
        let served = (0..10).filter(|_| b.take("sqs", later).is_none()).count();
        assert_eq!(served, 3);
    }
}
