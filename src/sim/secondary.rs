//! GitHub's secondary rate limits as the simulated GitHub plays them, from its REST
//! documentation ("About secondary rate limits"): at most 100 concurrent requests per
//! credential, and at most 900 points a minute per REST endpoint, where GET, HEAD and
//! OPTIONS cost 1 point and every other method 5. Over either, the request is answered
//! 403 with `retry-after: 60`, and the endpoint stays refused to that credential until
//! then (a request that does not wait is refused, and counted, again).
//!
//! The sim reads GitHub's words the strict way, as the daemon's book does
//! (`reconcile::points`): an endpoint is a route (its path template, whatever the
//! method), the minute is a rolling 60 s, and a 304 costs its points. `GET /rate_limit`
//! costs nothing. Every violation is counted per credential and kind; the benches print
//! the total beside their spawn figures, and the goal is 0.
//!
//! On by default: the daemon paces itself below these limits. A test or a bench that
//! wants GitHub without them says so (`SimConfig::secondary`, `sim github
//! --secondary-limits off`, `SimHandle::set_secondary_limits`, `PUT
//! /_sim/secondary-limits`).

use crate::timefmt::Millis;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

/// The limits, as GitHub documents them; settable per sim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SecondaryLimits {
    pub enabled: bool,
    /// Requests one credential may have in flight at once.
    pub concurrent: u32,
    /// Points one credential may spend on one endpoint in a rolling minute.
    pub points_per_minute: u32,
    /// What `retry-after` says, in seconds, and how long the endpoint stays refused.
    pub retry_after_secs: u64,
}

impl Default for SecondaryLimits {
    fn default() -> SecondaryLimits {
        SecondaryLimits {
            enabled: true,
            concurrent: 100,
            points_per_minute: 900,
            retry_after_secs: 60,
        }
    }
}

impl SecondaryLimits {
    /// The same limits, switched off.
    pub fn off() -> SecondaryLimits {
        SecondaryLimits {
            enabled: false,
            ..SecondaryLimits::default()
        }
    }
}

/// Which limit a refused request went over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Violation {
    /// More requests of the credential in flight than `concurrent`.
    Concurrent,
    /// The endpoint's points for the minute were spent.
    Points,
    /// Sent to an endpoint still refused after a violation, before its `retry-after`.
    Blocked,
}

/// The violations counted so far.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Hits {
    pub total: u64,
    pub by_credential: BTreeMap<String, u64>,
    pub by_kind: BTreeMap<Violation, u64>,
    /// By endpoint (route).
    pub by_endpoint: BTreeMap<String, u64>,
    /// Requests a credential sent, to any endpoint, while a `retry-after` GitHub gave
    /// it was still running (each host of a pool shares its credential's): GitHub may
    /// block an integration that keeps doing this. The goal is 0.
    pub inside_retry_after: u64,
}

/// Points spent per credential and endpoint in the last minute, endpoints refused
/// until a time, and the violations.
#[derive(Debug, Clone, Default)]
pub struct SecondaryBook {
    spent: BTreeMap<(String, String), VecDeque<(Millis, u32)>>,
    blocked: BTreeMap<(String, String), Millis>,
    /// Until when each credential was told to retry after.
    retry_until: BTreeMap<String, Millis>,
    hits: Hits,
}

const MINUTE: Millis = 60_000;

/// What a request costs.
pub fn cost(method: &str) -> u32 {
    match method {
        "GET" | "HEAD" | "OPTIONS" => 1,
        _ => 5,
    }
}

impl SecondaryBook {
    /// Judges one request of `credential` to `endpoint` at `now`, with `in_flight` of
    /// the credential's requests in flight (this one included): accepted (its points
    /// spent), or the limit it went over (counted; nothing spent).
    pub fn judge(
        &mut self,
        limits: &SecondaryLimits,
        credential: &str,
        endpoint: &str,
        method: &str,
        in_flight: u32,
        now: Millis,
    ) -> Result<(), Violation> {
        if !limits.enabled || endpoint == "/rate_limit" {
            return Ok(());
        }
        if self.retry_until.get(credential).is_some_and(|u| *u > now) {
            self.hits.inside_retry_after += 1;
        }
        let key = (credential.to_string(), endpoint.to_string());
        let verdict = if self.blocked.get(&key).is_some_and(|u| *u > now) {
            Err(Violation::Blocked)
        } else if in_flight > limits.concurrent {
            Err(Violation::Concurrent)
        } else {
            let window = self.spent.entry(key.clone()).or_default();
            while window.front().is_some_and(|(at, _)| *at + MINUTE <= now) {
                window.pop_front();
            }
            let used: u32 = window.iter().map(|(_, p)| p).sum();
            let points = cost(method);
            if used + points > limits.points_per_minute {
                Err(Violation::Points)
            } else {
                window.push_back((now, points));
                Ok(())
            }
        };
        if let Err(kind) = verdict {
            let until = now + limits.retry_after_secs as Millis * 1000;
            if kind == Violation::Points {
                self.blocked.insert(key, until);
            }
            let r = self.retry_until.entry(credential.to_string()).or_default();
            *r = (*r).max(until);
            self.hits.total += 1;
            *self
                .hits
                .by_credential
                .entry(credential.to_string())
                .or_default() += 1;
            *self.hits.by_kind.entry(kind).or_default() += 1;
            *self
                .hits
                .by_endpoint
                .entry(endpoint.to_string())
                .or_default() += 1;
        }
        verdict
    }

    pub fn hits(&self) -> &Hits {
        &self.hits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const JIT: &str = "/repos/{owner}/{repo}/actions/runners/generate-jitconfig";
    const RUNS: &str = "/repos/{owner}/{repo}/actions/runs";

    #[test]
    fn the_180th_jit_config_in_a_minute_is_the_last_and_the_endpoint_is_then_refused() {
        let l = SecondaryLimits::default();
        let mut b = SecondaryBook::default();
        for i in 0..180 {
            assert_eq!(b.judge(&l, "pat:0", JIT, "POST", 1, i), Ok(()), "{i}");
        }
        assert_eq!(
            b.judge(&l, "pat:0", JIT, "POST", 1, 1_000),
            Err(Violation::Points)
        );
        // Another endpoint, and another credential, are their own.
        assert_eq!(b.judge(&l, "pat:0", RUNS, "GET", 1, 1_000), Ok(()));
        assert_eq!(b.judge(&l, "pat:1", JIT, "POST", 1, 1_000), Ok(()));
        // Refused until the retry-after, even once the minute has passed.
        assert_eq!(
            b.judge(&l, "pat:0", JIT, "POST", 1, 60_500),
            Err(Violation::Blocked)
        );
        assert_eq!(b.judge(&l, "pat:0", JIT, "POST", 1, 61_000), Ok(()));
        let h = b.hits();
        // pat:0's GET at 1 s, its refused POST at 60.5 s and its POST at 61 s (inside
        // the retry-after the refusal at 60.5 s gave) came inside one; pat:1's did not.
        assert_eq!(h.inside_retry_after, 3, "{h:?}");
        assert_eq!(h.total, 2);
        assert_eq!(h.by_credential["pat:0"], 2);
        assert_eq!(h.by_kind[&Violation::Points], 1);
        assert_eq!(h.by_endpoint[JIT], 2);
    }

    #[test]
    fn gets_cost_one_point_and_the_window_rolls() {
        let l = SecondaryLimits::default();
        let mut b = SecondaryBook::default();
        for i in 0..900 {
            assert!(b.judge(&l, "a", RUNS, "GET", 1, i).is_ok());
        }
        assert!(b.judge(&l, "a", RUNS, "GET", 1, 59_999).is_err());
        let mut b = SecondaryBook::default();
        for i in 0..900 {
            assert!(b.judge(&l, "a", RUNS, "GET", 1, i).is_ok());
        }
        // The first request's minute is over at 60 s: one more fits, not two.
        assert!(b.judge(&l, "a", RUNS, "GET", 1, 60_000).is_ok());
        assert!(b.judge(&l, "a", RUNS, "GET", 1, 60_000).is_err());
    }

    #[test]
    fn the_101st_concurrent_request_is_refused_and_off_refuses_nothing() {
        let l = SecondaryLimits::default();
        let mut b = SecondaryBook::default();
        assert_eq!(b.judge(&l, "a", RUNS, "GET", 100, 0), Ok(()));
        assert_eq!(
            b.judge(&l, "a", RUNS, "GET", 101, 0),
            Err(Violation::Concurrent)
        );
        assert_eq!(b.judge(&l, "a", RUNS, "GET", 1, 0), Ok(()), "not blocked");
        let off = SecondaryLimits::off();
        let mut b = SecondaryBook::default();
        for i in 0..1000 {
            assert!(b.judge(&off, "a", JIT, "POST", 500, i).is_ok());
        }
        assert_eq!(b.hits().total, 0);
    }
}
