//! The times of a lease (see [`crate::lease`]), as the log writes them: when one ends,
//! and whether a holder's has passed. Nothing here knows the engine.

use std::time::{Duration, SystemTime};

use stackflow_events::event::Holder;

/// RFC 3339 of `t`, as the log writes times.
fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

/// The end of a lease of `lease` from now.
pub(crate) fn until(lease: Duration) -> String {
    rfc3339(SystemTime::now() + lease)
}

/// When `holder`'s lease has passed at `now` (never for a lock without a lease).
pub(crate) fn expired(holder: &Holder, now: SystemTime) -> bool {
    holder
        .expires
        .as_deref()
        .and_then(|e| humantime::parse_rfc3339_weak(e).ok())
        .is_some_and(|end| end < now)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(expires: Option<&str>) -> Holder {
        Holder {
            deploy_id: "d1".into(),
            who: "me".into(),
            since: "2026-12-01T08:00:00.000Z".into(),
            operation: "deploy".into(),
            expires: expires.map(str::to_string),
            fenced: None,
        }
    }

    #[test]
    fn a_lease_expires_at_its_end_and_a_lock_without_one_never() {
        let now = humantime::parse_rfc3339_weak("2026-12-01T09:00:00Z").unwrap();
        assert!(expired(&holder(Some("2026-12-01T08:59:59.000Z")), now));
        assert!(!expired(&holder(Some("2026-12-01T09:00:01.000Z")), now));
        assert!(!expired(&holder(None), now));
        assert!(!expired(&holder(Some("not a time")), now));
    }
}
