//! GitHub's rate limits: the `x-ratelimit-*` headers, and when a response means "send
//! nothing until T". Pure: every decision takes `now`.

use super::headers::{Headers, parse_http_date};
use crate::backoff::Backoff;
use crate::timefmt::Millis;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

/// One "send nothing until T" shared by every client of a credential (a target's
/// loop and its scale set listeners): a `retry-after` one of them meets holds the
/// others from that moment, not from when someone next copies it over.
#[derive(Debug, Clone, Default)]
pub struct SharedHold(Arc<AtomicI64>);

impl SharedHold {
    /// Holds until `until`, unless already held longer.
    pub fn raise(&self, until: Millis) {
        self.0.fetch_max(until, Ordering::SeqCst);
    }

    /// Until when it holds (0 or a past time: not held).
    pub fn until(&self) -> Millis {
        self.0.load(Ordering::SeqCst)
    }
}

/// What the last response said about this credential's primary rate limit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RateLimitSnapshot {
    pub limit: Option<u64>,
    pub remaining: Option<u64>,
    pub used: Option<u64>,
    /// When the window resets, unix milliseconds.
    pub reset: Option<Millis>,
    /// `core`, `search`, `graphql`…
    pub resource: Option<String>,
    /// While set and in the future, the client sends nothing.
    pub limited_until: Option<Millis>,
}

impl RateLimitSnapshot {
    /// Takes whatever `x-ratelimit-*` headers a response carries; keeps the rest.
    /// GHES with rate limits off sends none, and the snapshot stays empty.
    pub fn update(&mut self, h: &Headers) {
        if let Some(v) = h.get_u64("x-ratelimit-limit") {
            self.limit = Some(v);
        }
        if let Some(v) = h.get_u64("x-ratelimit-remaining") {
            self.remaining = Some(v);
        }
        if let Some(v) = h.get_u64("x-ratelimit-used") {
            self.used = Some(v);
        }
        if let Some(v) = h.get_u64("x-ratelimit-reset") {
            self.reset = Some(v as Millis * 1000);
        }
        if let Some(v) = h.get("x-ratelimit-resource") {
            self.resource = Some(v.to_string());
        }
    }
}

/// The shortest wait GitHub asks for when it gives no header, and its cap.
pub const NO_HEADER_WAIT_MS: Millis = 60_000;
pub const NO_HEADER_WAIT_CAP_MS: Millis = 16 * 60_000;
/// The header-less waits: a minute, doubling with each strike to the cap.
const NO_HEADER_BACKOFF: Backoff = Backoff::new(
    Duration::from_millis(NO_HEADER_WAIT_MS as u64),
    Duration::from_millis(NO_HEADER_WAIT_CAP_MS as u64),
);

/// `retry-after` in seconds or as an HTTP date, as an absolute time.
pub fn retry_after(h: &Headers, now: Millis) -> Option<Millis> {
    let v = h.get("retry-after")?;
    match v.parse::<u64>() {
        Ok(secs) => Some(now + secs as Millis * 1000),
        Err(_) => parse_http_date(v),
    }
}

/// Until when a response forbids further requests, if it does.
///
/// `strikes` counts the header-less limits in a row, for the exponential wait GitHub
/// asks for then. A successful response with `x-ratelimit-remaining: 0` also limits:
/// the next request would be refused, so it is not sent.
pub fn limited_until(
    status: u16,
    h: &Headers,
    message: &str,
    now: Millis,
    strikes: u32,
) -> Option<Millis> {
    let exhausted_until = || {
        if h.get_u64("x-ratelimit-remaining") == Some(0) {
            // A reset already past (our clock behind GitHub's) still waits a second,
            // so a stale header cannot make the client loop hot.
            h.get_u64("x-ratelimit-reset")
                .map(|r| (r as Millis * 1000).max(now + 1000))
        } else {
            None
        }
    };
    if !(status == 403 || status == 429) {
        return if (200..300).contains(&status) || status == 304 {
            exhausted_until()
        } else {
            None
        };
    }
    if let Some(t) = retry_after(h, now) {
        return Some(t.max(now));
    }
    if let Some(t) = exhausted_until() {
        return Some(t);
    }
    let lower = message.to_ascii_lowercase();
    if status == 429 || lower.contains("rate limit") {
        let wait = NO_HEADER_BACKOFF.step(strikes).as_millis() as Millis;
        return Some(now + wait);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pairs: &[(&str, &str)]) -> Headers {
        Headers::new(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())))
    }

    const NOW: Millis = 1_800_000_000_000;

    #[test]
    fn snapshot_reads_all_headers() {
        let mut s = RateLimitSnapshot::default();
        s.update(&h(&[
            ("x-ratelimit-limit", "5000"),
            ("x-ratelimit-remaining", "4990"),
            ("x-ratelimit-used", "10"),
            ("x-ratelimit-reset", "1800000600"),
            ("x-ratelimit-resource", "core"),
        ]));
        assert_eq!(s.limit, Some(5000));
        assert_eq!(s.remaining, Some(4990));
        assert_eq!(s.used, Some(10));
        assert_eq!(s.reset, Some(1_800_000_600_000));
        assert_eq!(s.resource.as_deref(), Some("core"));
        s.update(&h(&[("x-ratelimit-remaining", "4989")]));
        assert_eq!((s.limit, s.remaining), (Some(5000), Some(4989)));
    }

    #[test]
    fn retry_after_wins_to_the_second() {
        let hs = h(&[
            ("retry-after", "30"),
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "1800000600"),
        ]);
        assert_eq!(limited_until(403, &hs, "", NOW, 0), Some(NOW + 30_000));
        assert_eq!(limited_until(429, &hs, "", NOW, 3), Some(NOW + 30_000));
    }

    #[test]
    fn exhausted_waits_for_reset() {
        let hs = h(&[
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "1800000600"),
        ]);
        assert_eq!(
            limited_until(403, &hs, "API rate limit exceeded", NOW, 0),
            Some(1_800_000_600_000)
        );
        // A 200 that spent the last unit stops the next request too.
        assert_eq!(limited_until(200, &hs, "", NOW, 0), Some(1_800_000_600_000));
        // A reset in the past still waits a second.
        let past = h(&[
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "1700000000"),
        ]);
        assert_eq!(limited_until(403, &past, "", NOW, 0), Some(NOW + 1000));
    }

    #[test]
    fn no_header_waits_a_minute_then_doubles() {
        let none = h(&[]);
        assert_eq!(limited_until(429, &none, "", NOW, 0), Some(NOW + 60_000));
        assert_eq!(limited_until(429, &none, "", NOW, 1), Some(NOW + 120_000));
        assert_eq!(
            limited_until(429, &none, "", NOW, 30),
            Some(NOW + NO_HEADER_WAIT_CAP_MS)
        );
        let msg = "You have exceeded a secondary rate limit. Please wait a few minutes";
        assert_eq!(limited_until(403, &none, msg, NOW, 0), Some(NOW + 60_000));
    }

    #[test]
    fn plain_forbidden_and_other_statuses_are_not_limits() {
        let none = h(&[("x-ratelimit-remaining", "4000")]);
        assert_eq!(
            limited_until(403, &none, "Resource not accessible by integration", NOW, 0),
            None
        );
        assert_eq!(limited_until(200, &none, "", NOW, 0), None);
        assert_eq!(
            limited_until(
                500,
                &h(&[
                    ("x-ratelimit-remaining", "0"),
                    ("x-ratelimit-reset", "1800000600")
                ]),
                "",
                NOW,
                0
            ),
            None
        );
    }

    #[test]
    fn retry_after_as_date() {
        let hs = h(&[("retry-after", "Fri, 15 Jan 2027 08:00:00 GMT")]);
        assert_eq!(
            retry_after(&hs, NOW),
            crate::timefmt::parse_rfc3339("2027-01-15T08:00:00Z")
        );
    }
}
