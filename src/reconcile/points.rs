//! GitHub's secondary rate limits as a book of points, kept per credential so that the
//! daemon never trips them. Pure: every method takes `now`; the GitHub client carries
//! its decisions out (`github::secondary`), and the pass reads how many starts fit.
//!
//! What GitHub documents ("Rate limits for the REST API", "About secondary rate
//! limits" and "Calculating points for the secondary rate limit",
//! <https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api>):
//! - no more than 100 concurrent requests (shared by REST and GraphQL): the
//!   credential's `InFlight` bound, `max_in_flight` ≤ 100, keeps that;
//! - no more than 900 points per minute "to a single endpoint" for REST, where most
//!   GET, HEAD and OPTIONS requests cost 1 point and most POST, PATCH, PUT and DELETE
//!   requests cost 5 ("some REST API endpoints have a different point cost that is not
//!   shared publicly");
//! - content creation (about 80 requests a minute) and CPU time limits we cannot
//!   count, and "you may also encounter a secondary rate limit for undisclosed
//!   reasons";
//! - when limited: wait `retry-after` seconds if given; keep sending while limited and
//!   the integration may be banned.
//!
//! Where GitHub says nothing we take the reading that can only count more, never less:
//! - "Endpoint" is the **route** (the path template, `/repos/{owner}/{repo}/actions/
//!   runners/generate-jitconfig`), not the concrete path, and not split by method:
//!   two repositories' JIT calls, or a GET and a DELETE of one runner route, share one
//!   budget. A path-wise GitHub would allow more; a route-wise one exactly this.
//! - "Per minute" is a **rolling** 60 s window, not a clock minute (a clock minute
//!   would allow twice the points across its boundary; a rolling one never less).
//! - A request counts from when it is sent until 60 s after its **answer** came: GitHub
//!   counts it somewhere between the two, so a charge expires no earlier than GitHub's.
//!   A request still unanswered never expires.
//! - A 304 (free against the primary limit) still costs its points here.
//! - Every method not GET, HEAD or OPTIONS costs 5.
//!
//! Each endpoint is kept [`MARGIN`] points below 900 (a request of another client of
//! the same credential, an endpoint that costs more than documented). A GitHub
//! Enterprise Server's admin may set other limits, or none: the target's
//! `secondary_limit` gives the book another ceiling per endpoint, or none
//! ([`PointsBook::set_limit`]). A secondary
//! limit hit anyway (a 403 or 429 that says so) is counted, blocks the endpoint until
//! its `retry-after`, and lowers that endpoint's ceiling by a quarter for good
//! (down to [`FLOOR`]): what GitHub counts evidently differs from what we count.

use crate::timefmt::Millis;
use std::collections::BTreeMap;

/// GitHub's window for the points of one endpoint.
pub const WINDOW: Millis = 60_000;
/// GitHub's points per endpoint per minute.
pub const LIMIT: u32 = crate::domain::target::DEFAULT_SECONDARY_LIMIT;
/// Points kept unused below [`LIMIT`] on every endpoint: six JIT configs' worth.
pub const MARGIN: u32 = 30;
/// The lowest an endpoint's ceiling falls after repeated hits, as a share of the limit.
pub const FLOOR: u32 = LIMIT / 4;
/// The ceiling of a book with no limit (a GHES whose admin turned them off): never
/// reached, and small enough that sums of points never overflow.
const UNLIMITED: u32 = u32::MAX / 4;

/// The most points an endpoint may count at once under `limit` points a minute (`None`:
/// no limit), before any hit: the limit less [`MARGIN`], or less a thirtieth of a
/// smaller limit.
pub fn base_ceiling(limit: Option<u32>) -> u32 {
    match limit {
        None => UNLIMITED,
        Some(l) => l - MARGIN.min(l / 30),
    }
}

/// How many runner JIT configs (POSTs, 5 points each) one credential gets a minute
/// under `limit` (`None`: no limit, no ceiling), as `target check` explains it.
pub fn jit_configs_a_minute(limit: Option<u32>) -> Option<u32> {
    limit.map(|l| base_ceiling(Some(l)) / cost("POST"))
}

/// What a request costs: 1 for GET, HEAD and OPTIONS, 5 for anything else.
pub fn cost(method: &str) -> u32 {
    match method {
        "GET" | "HEAD" | "OPTIONS" => 1,
        _ => 5,
    }
}

/// One request's points on its endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Charge {
    id: u64,
    points: u32,
    /// When it stops counting; `None` while the request is unanswered.
    expires: Option<Millis>,
    /// Held for a start the pass decided, not yet sent: the start's request claims it.
    reserved: bool,
}

#[derive(Debug, Clone, Default)]
struct Endpoint {
    charges: Vec<Charge>,
    /// Secondary limits GitHub answered on this endpoint.
    hits: u32,
    /// Nothing is sent to it before this (a hit's `retry-after`).
    blocked_until: Millis,
}

impl Endpoint {
    fn prune(&mut self, now: Millis) {
        self.charges.retain(|c| c.expires.is_none_or(|e| e > now));
    }

    fn used(&self) -> u32 {
        self.charges.iter().map(|c| c.points).sum()
    }

    fn ceiling(&self, limit: Option<u32>) -> u32 {
        let base = base_ceiling(limit);
        let mut c = base;
        for _ in 0..self.hits.min(8) {
            c = c * 3 / 4;
        }
        c.max(limit.map_or(FLOOR, |l| l / 4))
    }

    /// When `points` more fit: as soon as enough charges have expired. A book held up
    /// by unanswered requests says a window from now (an answer comes or fails by
    /// then, and the caller looks again).
    fn next_fit(&self, points: u32, limit: Option<u32>, now: Millis) -> Millis {
        let ceiling = self.ceiling(limit);
        let mut used = self.used();
        let mut ends: Vec<(Millis, u32)> = self
            .charges
            .iter()
            .filter_map(|c| c.expires.map(|e| (e, c.points)))
            .collect();
        ends.sort_unstable();
        let mut at = now;
        for (e, p) in ends {
            if used + points <= ceiling {
                break;
            }
            used -= p;
            at = e;
        }
        if used + points > ceiling {
            at = now + WINDOW;
        }
        at.max(self.blocked_until)
    }
}

/// A request's charge, to settle when its answer comes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ticket {
    endpoint: String,
    id: u64,
}

/// How many more requests of one cost fit on an endpoint now, and when one more than
/// those would.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Room {
    pub fits: u32,
    /// When one more than `fits` fits, as the book stands now.
    pub next_at: Millis,
}

/// One credential's points per endpoint.
#[derive(Debug, Clone)]
pub struct PointsBook {
    endpoints: BTreeMap<String, Endpoint>,
    next_id: u64,
    hits: u64,
    /// Points a minute per endpoint GitHub allows; `None`: no limit.
    limit: Option<u32>,
    /// This host's share of the credential, as GitHub's count says (`share`).
    share: super::share::Share,
    /// Whether the book keeps to that share (a standalone host's; a coordinator
    /// divides a pool's points itself).
    by_share: bool,
}

impl Default for PointsBook {
    fn default() -> PointsBook {
        PointsBook {
            endpoints: BTreeMap::new(),
            next_id: 0,
            hits: 0,
            limit: Some(LIMIT),
            share: Default::default(),
            by_share: false,
        }
    }
}

impl PointsBook {
    /// Sets the points a minute per endpoint the credential's GitHub allows (`None`: it
    /// has no secondary limits). What is counted stays counted.
    pub fn set_limit(&mut self, limit: Option<u32>) {
        self.limit = limit;
    }

    /// Whether the book keeps each endpoint to this host's share of the limit (other
    /// hosts spend the same credential and no one divides it for them).
    pub fn set_by_share(&mut self, on: bool) {
        self.by_share = on;
    }

    /// An answer's `x-ratelimit-used` and `-reset` (`share::Share::observe`).
    pub fn observe_used(&mut self, used: u64, reset: Millis, counted: bool, now: Millis) {
        self.share.observe(used, reset, counted, now);
    }

    /// This host's share of the credential, as GitHub's count says.
    pub fn share(&self) -> f64 {
        self.share.share()
    }

    /// The limit the book keeps to: GitHub's, or this host's share of it (never below
    /// a JIT config six times over, the least `secondary_limit` takes).
    fn limit(&self) -> Option<u32> {
        match self.limit {
            Some(l) if self.by_share => {
                let least = *crate::domain::target::SECONDARY_LIMITS.start();
                Some(((l as f64 * self.share.share()) as u32).max(least).min(l))
            }
            other => other,
        }
    }

    /// Charges a request about to be sent, or says when it may be sent. A reservation
    /// the pass made on the endpoint is claimed first.
    pub fn admit(&mut self, endpoint: &str, method: &str, now: Millis) -> Result<Ticket, Millis> {
        let points = cost(method);
        let limit = self.limit();
        let e = self.endpoints.entry(endpoint.to_string()).or_default();
        e.prune(now);
        if e.blocked_until > now {
            return Err(e.blocked_until);
        }
        if let Some(c) = e
            .charges
            .iter_mut()
            .find(|c| c.reserved && c.points == points)
        {
            c.reserved = false;
            c.expires = None;
            return Ok(Ticket {
                endpoint: endpoint.to_string(),
                id: c.id,
            });
        }
        if e.used() + points > e.ceiling(limit) {
            return Err(e.next_fit(points, limit, now));
        }
        self.next_id += 1;
        let id = self.next_id;
        e.charges.push(Charge {
            id,
            points,
            expires: None,
            reserved: false,
        });
        Ok(Ticket {
            endpoint: endpoint.to_string(),
            id,
        })
    }

    /// The request's answer came (or it failed) at `now`: its points count one window
    /// more.
    pub fn settle(&mut self, ticket: &Ticket, now: Millis) {
        if let Some(c) = self
            .endpoints
            .get_mut(&ticket.endpoint)
            .and_then(|e| e.charges.iter_mut().find(|c| c.id == ticket.id))
        {
            c.expires = Some(now + WINDOW);
        }
    }

    /// The request was never sent (a start refused before its call): its points are
    /// given back at once.
    pub fn refund(&mut self, ticket: &Ticket) {
        if let Some(e) = self.endpoints.get_mut(&ticket.endpoint) {
            e.charges.retain(|c| c.id != ticket.id);
        }
    }

    /// How many requests of `method` fit on `endpoint` now.
    pub fn room(&mut self, endpoint: &str, method: &str, now: Millis) -> Room {
        let points = cost(method);
        let limit = self.limit();
        let Some(e) = self.endpoints.get_mut(endpoint) else {
            return Room {
                fits: base_ceiling(limit) / points,
                next_at: now + WINDOW,
            };
        };
        e.prune(now);
        if e.blocked_until > now {
            return Room {
                fits: 0,
                next_at: e.blocked_until,
            };
        }
        let fits = e.ceiling(limit).saturating_sub(e.used()) / points;
        Room {
            fits,
            next_at: e.next_fit((fits + 1) * points, limit, now),
        }
    }

    /// Holds `n` requests' points for starts the pass decided (their JIT calls claim
    /// them). One never claimed (its start failed before the call) expires a window
    /// from now.
    pub fn reserve(&mut self, endpoint: &str, method: &str, n: u32, now: Millis) {
        let e = self.endpoints.entry(endpoint.to_string()).or_default();
        for _ in 0..n {
            self.next_id += 1;
            e.charges.push(Charge {
                id: self.next_id,
                points: cost(method),
                expires: Some(now + WINDOW),
                reserved: true,
            });
        }
    }

    /// Counts `n` requests of `method` that an earlier life of the daemon sent within
    /// the last window (GitHub still counts them; this book never saw them), as if
    /// answered now: the safe side, since when they were answered is not known.
    pub fn seed(&mut self, endpoint: &str, method: &str, n: u32, now: Millis) {
        let e = self.endpoints.entry(endpoint.to_string()).or_default();
        for _ in 0..n {
            self.next_id += 1;
            e.charges.push(Charge {
                id: self.next_id,
                points: cost(method),
                expires: Some(now + WINDOW),
                reserved: false,
            });
        }
    }

    /// Whether the book has counted nothing yet (a new daemon's).
    pub fn is_empty(&self) -> bool {
        self.endpoints.is_empty()
    }

    /// GitHub answered a secondary limit on `endpoint`: counted, the endpoint blocked
    /// until `until` and its ceiling lowered from now on.
    pub fn hit(&mut self, endpoint: &str, until: Millis) {
        let e = self.endpoints.entry(endpoint.to_string()).or_default();
        e.hits += 1;
        e.blocked_until = e.blocked_until.max(until);
        self.hits += 1;
    }

    /// Secondary limits GitHub answered, on every endpoint.
    pub fn hits(&self) -> u64 {
        self.hits
    }

    /// The points an endpoint has counted now (reservations included).
    pub fn used(&mut self, endpoint: &str, now: Millis) -> u32 {
        self.endpoints.get_mut(endpoint).map_or(0, |e| {
            e.prune(now);
            e.used()
        })
    }

    /// The most points the endpoint may count at once.
    pub fn ceiling(&self, endpoint: &str) -> u32 {
        self.endpoints
            .get(endpoint)
            .map_or(base_ceiling(self.limit()), |e| e.ceiling(self.limit()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const JIT: &str = "/repos/{owner}/{repo}/actions/runners/generate-jitconfig";
    const RUNS: &str = "/repos/{owner}/{repo}/actions/runs";
    const T0: Millis = 1_800_000_000_000;

    #[test]
    fn methods_cost_what_github_documents() {
        assert_eq!(cost("GET"), 1);
        assert_eq!(cost("HEAD"), 1);
        assert_eq!(cost("POST"), 5);
        assert_eq!(cost("DELETE"), 5);
        assert_eq!(cost("PATCH"), 5);
        assert_eq!(cost("PUT"), 5);
    }

    #[test]
    fn an_endpoint_takes_what_fits_below_the_margin_and_then_refuses() {
        let mut b = PointsBook::default();
        let per = (LIMIT - MARGIN) / 5;
        assert_eq!(b.room(JIT, "POST", T0).fits, per);
        for i in 0..per {
            let t = b.admit(JIT, "POST", T0 + i as Millis).unwrap();
            b.settle(&t, T0 + 1000);
        }
        assert!(b.used(JIT, T0 + 1000) <= LIMIT - MARGIN);
        // Full: the next waits until the first answer's window has passed.
        assert_eq!(b.admit(JIT, "POST", T0 + 2000), Err(T0 + 1000 + WINDOW));
        assert_eq!(
            b.room(JIT, "POST", T0 + 2000),
            Room {
                fits: 0,
                next_at: T0 + 1000 + WINDOW
            }
        );
        // Other endpoints, and a GET's single point, are not held by it.
        assert!(b.admit(RUNS, "GET", T0 + 2000).is_ok());
        // A window after the answers, all of it is free again.
        assert_eq!(b.room(JIT, "POST", T0 + 1000 + WINDOW).fits, per);
    }

    #[test]
    fn an_unanswered_request_counts_until_its_answer_and_a_window_after() {
        let mut b = PointsBook::default();
        let t = b.admit(JIT, "POST", T0).unwrap();
        assert_eq!(b.used(JIT, T0 + 10 * WINDOW), 5, "never expires unanswered");
        b.settle(&t, T0 + 10 * WINDOW);
        assert_eq!(b.used(JIT, T0 + 11 * WINDOW - 1), 5);
        assert_eq!(b.used(JIT, T0 + 11 * WINDOW), 0);
    }

    #[test]
    fn reservations_count_at_once_and_are_claimed_by_the_start_they_were_for() {
        let mut b = PointsBook::default();
        let per = (LIMIT - MARGIN) / 5;
        b.reserve(JIT, "POST", per, T0);
        assert_eq!(b.room(JIT, "POST", T0).fits, 0);
        // The reserved starts' calls go through; a call beyond them does not.
        let t = b.admit(JIT, "POST", T0 + 100).unwrap();
        assert_eq!(b.used(JIT, T0 + 100), per * 5);
        b.settle(&t, T0 + 700);
        // Reservations never claimed expire a window after they were made; the
        // claimed one a window after its answer.
        assert_eq!(b.used(JIT, T0 + WINDOW), 5);
        assert_eq!(b.used(JIT, T0 + 700 + WINDOW), 0);
    }

    #[test]
    fn an_earlier_lifes_requests_count_a_window_and_are_never_claimed() {
        let mut b = PointsBook::default();
        assert!(b.is_empty());
        let per = (LIMIT - MARGIN) / 5;
        b.seed(JIT, "POST", per - 1, T0);
        assert!(!b.is_empty());
        assert_eq!(b.room(JIT, "POST", T0).fits, 1);
        let t = b.admit(JIT, "POST", T0).unwrap();
        assert_eq!(b.used(JIT, T0), per * 5, "a new charge, not a claim");
        b.settle(&t, T0);
        assert!(b.admit(JIT, "POST", T0 + 1).is_err());
        assert_eq!(b.room(JIT, "POST", T0 + WINDOW).fits, per);
    }

    #[test]
    fn a_hit_blocks_the_endpoint_until_retry_after_and_slows_it_for_good() {
        let mut b = PointsBook::default();
        b.hit(JIT, T0 + 60_000);
        assert_eq!(b.hits(), 1);
        assert_eq!(b.admit(JIT, "POST", T0), Err(T0 + 60_000));
        assert_eq!(b.room(JIT, "POST", T0).fits, 0);
        assert!(b.admit(RUNS, "GET", T0).is_ok(), "other endpoints go on");
        let slowed = b.ceiling(JIT);
        assert_eq!(slowed, (LIMIT - MARGIN) * 3 / 4);
        assert_eq!(b.room(JIT, "POST", T0 + 60_000).fits, slowed / 5);
        for _ in 0..20 {
            b.hit(JIT, T0);
        }
        assert_eq!(b.ceiling(JIT), FLOOR, "never below the floor");
    }

    #[test]
    fn the_next_fit_frees_just_enough_of_the_oldest_answers() {
        let mut b = PointsBook::default();
        // 174 JIT calls answered 100 ms apart, from T0.
        let per = (LIMIT - MARGIN) / 5;
        for i in 0..per {
            let at = T0 + i as Millis * 100;
            let t = b.admit(JIT, "POST", at).unwrap();
            b.settle(&t, at);
        }
        let now = T0 + per as Millis * 100;
        // Only the oldest must expire for one more to fit.
        assert_eq!(b.admit(JIT, "POST", now), Err(T0 + WINDOW));
        assert!(b.admit(JIT, "POST", T0 + WINDOW).is_ok());
    }

    #[test]
    fn a_standalone_book_keeps_to_its_share_of_a_credential_others_spend() {
        let mut b = PointsBook::default();
        // Three hosts alike: GitHub's count moves by 3 for each request of ours.
        for i in 0..60u64 {
            b.observe_used(3 * i + 1, T0 + 3_600_000, true, T0 + i as Millis);
        }
        let whole = (LIMIT - MARGIN) / 5;
        assert_eq!(b.room(JIT, "POST", T0).fits, whole, "not kept to it yet");
        b.set_by_share(true);
        // A third of 900 is 300, less its thirtieth: 290 points, 58 JIT configs.
        assert!((b.share() - 1.0 / 3.0).abs() < 0.02);
        let third = b.room(JIT, "POST", T0).fits;
        assert!((57..=58).contains(&third), "{third}");
        // However many hosts, a sixteenth of the limit remains: 56 points, 11 JIT
        // configs a minute.
        for i in 0..200u64 {
            b.observe_used(300 + 100 * i, T0 + 3_600_000, false, T0 + 100 + i as Millis);
        }
        assert_eq!(
            b.room(JIT, "POST", T0 + 1000).fits,
            base_ceiling(Some(LIMIT / 16)) / 5
        );
        // Coordinated again: the whole limit (the coordinator divides it).
        b.set_by_share(false);
        assert_eq!(b.room(JIT, "POST", T0 + 1000).fits, whole);
    }

    #[test]
    fn a_ghes_limit_sets_the_ceiling_and_none_lifts_it() {
        let mut b = PointsBook::default();
        b.set_limit(Some(300));
        // 300 less a thirtieth: 290 points, 58 JIT configs.
        assert_eq!(b.room(JIT, "POST", T0).fits, 58);
        assert_eq!(
            jit_configs_a_minute(Some(300)),
            Some(58),
            "as target check says it"
        );
        assert_eq!(jit_configs_a_minute(Some(900)), Some(174));
        assert_eq!(jit_configs_a_minute(None), None);
        for _ in 0..58 {
            b.admit(JIT, "POST", T0).unwrap();
        }
        assert!(b.admit(JIT, "POST", T0).is_err());
        b.hit(JIT, T0 + 1);
        assert_eq!(b.ceiling(JIT), 290 * 3 / 4);
        for _ in 0..8 {
            b.hit(JIT, T0 + 1);
        }
        assert_eq!(
            b.ceiling(JIT),
            300 / 4,
            "hits never slow it below a quarter"
        );

        let mut off = PointsBook::default();
        off.set_limit(None);
        for i in 0..10_000 {
            let t = off.admit(JIT, "POST", T0 + i).unwrap();
            off.settle(&t, T0 + i);
        }
        assert!(off.room(JIT, "POST", T0 + 10_000).fits > 1_000_000);
        // GitHub answering a limit anyway still blocks the endpoint until retry-after.
        off.hit(JIT, T0 + 70_000);
        assert_eq!(off.admit(JIT, "POST", T0 + 10_001), Err(T0 + 70_000));
    }
}
