//! The pool's credential as one budget (pure): GitHub's limits belong to the
//! credential, not to the host, so the coordinator hands out starts within them and
//! no two hosts spend the same points. One budget per coordinator target (the pool's
//! hosts reach it with the one credential):
//! - **points a minute** on the JIT route: each lease draws one JIT config's 5 points
//!   from a `reconcile::points::PointsBook` (the rules and the margin the daemons
//!   keep) when it is placed. The charge counts from then until a window after the
//!   lease closes (its runner started, it expired or was cancelled), never shorter
//!   than GitHub's count of the host's request; a lease the host refused gives its
//!   points back, since no request was made for it;
//! - **concurrent requests**: at most [`MAX_OPEN`] leases of a credential open at once,
//!   each at most one JIT request in flight, well below GitHub's 100 for all of the
//!   credential's requests together (the hosts' reads and cleanups take the rest);
//! - **the hourly budget**: the `x-ratelimit-remaining`/`-reset` a host reports are the
//!   credential's, every host's spending included; starts drawn since the report
//!   count against it, and starts pause at [`PRIMARY_RESERVE`] until its reset, so
//!   the hosts' reads and cleanups keep going;
//! - **a `retry-after`** any host met pauses the whole pool's starts until it passes,
//!   and each secondary limit a host was answered lowers the ceiling, as the daemon's
//!   own book does after a hit.
//!
//! Hosts' reports (`protocol::LimitReport`) correct the budget; the placement draws.

use super::protocol::LimitReport;
use crate::reconcile::points::{PointsBook, Ticket};
use crate::timefmt::Millis;
use std::collections::BTreeMap;

/// The route every JIT config of a budget is charged to: a coordinator target is one
/// repository or organization, so one route.
const JIT_ROUTE: &str = "generate-jitconfig";

/// The most leases of one credential open at once.
pub const MAX_OPEN: usize = 50;

/// Requests of the hourly budget kept for the hosts' reads and cleanups: no start is
/// handed out below it.
pub const PRIMARY_RESERVE: u64 = 100;

/// Why a target's starts wait, and until when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// A host met a `retry-after` (or a spent hourly budget) until then.
    Held(Millis),
    /// The JIT route's points a minute are spent until then.
    Points(Millis),
    /// The hourly budget is down to its reserve until its reset.
    Hourly(Millis),
    /// [`MAX_OPEN`] leases are open: one must close first.
    Open,
}

impl Wait {
    /// The words `coordinator` logs and status show.
    pub fn describe(&self) -> String {
        let at = |t: &Millis| crate::timefmt::format_rfc3339(*t);
        match self {
            Wait::Held(t) => format!("GitHub asked the credential to wait until {}", at(t)),
            Wait::Points(t) => format!(
                "the credential's JIT points a minute are spent until {}",
                at(t)
            ),
            Wait::Hourly(t) => format!(
                "the credential's hourly budget is down to its reserve until {}",
                at(t)
            ),
            Wait::Open => format!("{MAX_OPEN} starts of the credential are open"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Hourly {
    remaining: u64,
    reset: Millis,
    /// Starts drawn since the report.
    drawn: u64,
}

#[derive(Debug, Clone, Default)]
struct Budget {
    points: PointsBook,
    /// Open leases and their charges.
    open: BTreeMap<String, Ticket>,
    held_until: Millis,
    hourly: Option<Hourly>,
    /// Each host's last reported count of secondary limits met.
    hits: BTreeMap<String, u64>,
    /// The limit was set by the coordinator's own target: reports do not change it.
    limit_set: bool,
}

impl Budget {
    fn wait(&mut self, now: Millis) -> Option<Wait> {
        if self.held_until > now {
            return Some(Wait::Held(self.held_until));
        }
        if let Some(h) = self.hourly
            && h.reset > now
            && h.remaining.saturating_sub(h.drawn) <= PRIMARY_RESERVE
        {
            return Some(Wait::Hourly(h.reset));
        }
        if self.open.len() >= MAX_OPEN {
            return Some(Wait::Open);
        }
        let room = self.points.room(JIT_ROUTE, "POST", now);
        (room.fits == 0).then_some(Wait::Points(room.next_at))
    }
}

/// Every coordinator target's budget.
#[derive(Debug, Clone, Default)]
pub struct Credit {
    budgets: BTreeMap<String, Budget>,
}

impl Credit {
    /// `target`'s points a minute per endpoint (`None`: no limit), as the
    /// coordinator's own target says; hosts' reports no longer change it.
    pub fn set_limit(&mut self, target: &str, limit: Option<u32>) {
        let b = self.budgets.entry(target.to_string()).or_default();
        b.points.set_limit(limit);
        b.limit_set = true;
    }

    /// GitHub asked the credential to send nothing before `until`.
    pub fn hold(&mut self, target: &str, until: Millis) {
        let b = self.budgets.entry(target.to_string()).or_default();
        b.held_until = b.held_until.max(until);
    }

    /// Why `target`'s starts wait now, if they do.
    pub fn wait(&mut self, target: &str, now: Millis) -> Option<Wait> {
        self.budgets
            .entry(target.to_string())
            .or_default()
            .wait(now)
    }

    /// Draws one start for lease `lease_id` of `target`, or says why it must wait.
    pub fn draw(&mut self, target: &str, lease_id: &str, now: Millis) -> Result<(), Wait> {
        let b = self.budgets.entry(target.to_string()).or_default();
        if let Some(w) = b.wait(now) {
            return Err(w);
        }
        let ticket = b
            .points
            .admit(JIT_ROUTE, "POST", now)
            .map_err(Wait::Points)?;
        b.open.insert(lease_id.to_string(), ticket);
        if let Some(h) = &mut b.hourly {
            h.drawn += 1;
        }
        Ok(())
    }

    /// Lease `lease_id` of `target`, open in the coordinator's last life, holds its
    /// points as a drawn one does, even beyond what fits (its start may be under way).
    pub fn carry(&mut self, target: &str, lease_id: &str, now: Millis) {
        if self.draw(target, lease_id, now).is_err() {
            let b = self.budgets.entry(target.to_string()).or_default();
            b.points.seed(JIT_ROUTE, "POST", 1, now);
        }
    }

    /// Closes the leases not in `open`: their points count a window from `now`.
    pub fn close_all_but(&mut self, open: &std::collections::BTreeSet<&str>, now: Millis) {
        for b in self.budgets.values_mut() {
            let closed: Vec<String> = b
                .open
                .keys()
                .filter(|l| !open.contains(l.as_str()))
                .cloned()
                .collect();
            for l in closed {
                let t = b.open.remove(&l).expect("listed");
                b.points.settle(&t, now);
            }
        }
    }

    /// The host refused lease `lease_id` before any request for it: its points and
    /// its slot come back.
    pub fn refund(&mut self, lease_id: &str) {
        for b in self.budgets.values_mut() {
            if let Some(t) = b.open.remove(lease_id) {
                b.points.refund(&t);
                if let Some(h) = &mut b.hourly {
                    h.drawn = h.drawn.saturating_sub(1);
                }
            }
        }
    }

    /// Host `host`'s report of `target`'s credential corrects its budget.
    pub fn report(&mut self, target: &str, host: &str, r: &LimitReport, now: Millis) {
        let b = self.budgets.entry(target.to_string()).or_default();
        match r.points_limit {
            _ if b.limit_set => {}
            Some(0) => b.points.set_limit(None),
            Some(l) => b.points.set_limit(Some(l)),
            None => {}
        }
        b.held_until = b.held_until.max(r.held_until);
        let seen = b.hits.entry(host.to_string()).or_insert(r.secondary_hits);
        if r.secondary_hits > *seen {
            // Each limit met lowers the ceiling, as the host's own book does.
            for _ in 0..(r.secondary_hits - *seen).min(8) {
                b.points.hit(JIT_ROUTE, r.held_until.max(now));
            }
        }
        *seen = r.secondary_hits;
        if let (Some(remaining), Some(reset)) = (r.remaining, r.reset) {
            let newer = match b.hourly {
                None => true,
                Some(h) => reset > h.reset || (reset == h.reset && remaining < h.remaining),
            };
            if newer {
                b.hourly = Some(Hourly {
                    remaining,
                    reset,
                    drawn: 0,
                });
            }
        }
    }

    /// Leases open on `target`'s budget.
    pub fn open(&self, target: &str) -> usize {
        self.budgets.get(target).map_or(0, |b| b.open.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reconcile::points::{LIMIT, MARGIN, WINDOW};
    use std::collections::BTreeSet;

    const T0: Millis = 1_800_000_000_000;

    fn report(held_until: Millis, hits: u64) -> LimitReport {
        LimitReport {
            target: "app".into(),
            held_until,
            secondary_hits: hits,
            ..LimitReport::default()
        }
    }

    /// Draws and closes at once (each lease's runner started) until a draw waits.
    fn draw_all(c: &mut Credit, now: Millis) -> (u32, Wait) {
        let mut n = 0;
        loop {
            match c.draw("t", &format!("l{n}-{now}"), now) {
                Ok(()) => n += 1,
                Err(w) => return (n, w),
            }
            c.close_all_but(&BTreeSet::new(), now);
        }
    }

    #[test]
    fn starts_are_handed_out_within_the_points_a_minute_and_resume_a_window_later() {
        let mut c = Credit::default();
        let (n, w) = draw_all(&mut c, T0);
        assert_eq!(
            n,
            (LIMIT - MARGIN) / 5,
            "174 JIT configs a minute, as one host"
        );
        assert_eq!(w, Wait::Points(T0 + WINDOW));
        assert!(c.draw("t", "late", T0 + WINDOW - 1).is_err());
        assert!(c.draw("t", "late", T0 + WINDOW).is_ok());
        // Another coordinator target is another credential's budget.
        assert!(c.draw("u", "other", T0).is_ok());
    }

    #[test]
    fn an_open_lease_counts_until_a_window_after_it_closes() {
        let mut c = Credit::default();
        let per = (LIMIT - MARGIN) / 5;
        for i in 0..per {
            c.draw("t", &format!("l{i}"), T0).unwrap();
            c.close_all_but(&BTreeSet::new(), T0);
        }
        // Full; one lease is opened much later and stays open past a window.
        let later = T0 + WINDOW;
        c.draw("t", "slow", later).unwrap();
        let open: BTreeSet<&str> = ["slow"].into();
        c.close_all_but(&open, later + 10 * WINDOW);
        assert_eq!(c.open("t"), 1);
        let (n, _) = draw_all(&mut c, later + 10 * WINDOW);
        assert_eq!(n, per - 1, "the open lease still holds its points");
        c.close_all_but(&BTreeSet::new(), later + 10 * WINDOW);
        assert_eq!(c.open("t"), 0);
    }

    #[test]
    fn a_refused_lease_gives_its_points_back() {
        let mut c = Credit::default();
        let per = (LIMIT - MARGIN) / 5;
        for i in 0..per {
            c.draw("t", &format!("r{i}"), T0).unwrap();
            c.refund(&format!("r{i}"));
        }
        assert_eq!(c.open("t"), 0);
        assert_eq!(draw_all(&mut c, T0).0, per, "nothing was spent");
    }

    #[test]
    fn at_most_max_open_leases_are_open_at_once() {
        let mut c = Credit::default();
        for i in 0..MAX_OPEN {
            c.draw("t", &format!("l{i}"), T0).unwrap();
        }
        assert_eq!(c.draw("t", "one-more", T0), Err(Wait::Open));
        let open: BTreeSet<String> = (1..MAX_OPEN).map(|i| format!("l{i}")).collect();
        let open: BTreeSet<&str> = open.iter().map(String::as_str).collect();
        c.close_all_but(&open, T0);
        assert!(c.draw("t", "one-more", T0).is_ok());
    }

    #[test]
    fn a_retry_after_any_host_met_pauses_the_whole_pool_until_it_passes() {
        let mut c = Credit::default();
        c.report("t", "h1", &report(T0 + 30_000, 0), T0);
        assert_eq!(c.draw("t", "a", T0), Err(Wait::Held(T0 + 30_000)));
        // An older, shorter hold of another host does not shorten it.
        c.report("t", "h2", &report(T0 + 10_000, 0), T0);
        assert_eq!(c.wait("t", T0 + 20_000), Some(Wait::Held(T0 + 30_000)));
        assert!(c.draw("t", "a", T0 + 30_000).is_ok());
        // One the coordinator's own reads met holds the pool just the same.
        c.hold("t", T0 + 45_000);
        assert_eq!(c.draw("t", "b", T0 + 31_000), Err(Wait::Held(T0 + 45_000)));
    }

    #[test]
    fn a_secondary_limit_a_host_met_lowers_the_pools_ceiling_once_per_hit() {
        let mut c = Credit::default();
        let per = (LIMIT - MARGIN) / 5;
        // A host's first report names the hits of its life so far: taken as they are.
        c.report("t", "h1", &report(0, 2), T0);
        assert_eq!(draw_all(&mut c.clone(), T0).0, per);
        c.report("t", "h1", &report(T0 + 1000, 3), T0);
        // The same count again (reports repeat each second) changes nothing more.
        c.report("t", "h1", &report(T0 + 1000, 3), T0 + 500);
        let (n, _) = draw_all(&mut c, T0 + 1000);
        assert_eq!(n, (LIMIT - MARGIN) * 3 / 4 / 5);
    }

    #[test]
    fn a_hosts_points_limit_sets_the_ceiling_and_zero_lifts_it() {
        let mut c = Credit::default();
        let mut r = report(0, 0);
        r.points_limit = Some(30);
        c.report("t", "h1", &r, T0);
        // 30 less a thirtieth: 29 points, 5 JIT configs a minute.
        assert_eq!(draw_all(&mut c, T0).0, 5);
        r.points_limit = Some(0);
        c.report("t", "h1", &r, T0);
        for i in 0..MAX_OPEN {
            c.draw("t", &format!("o{i}"), T0 + 1).unwrap();
        }
        assert_eq!(
            c.draw("t", "x", T0 + 1),
            Err(Wait::Open),
            "only the open bound"
        );
    }

    #[test]
    fn a_restored_lease_holds_its_points_even_past_the_ceiling() {
        let mut c = Credit::default();
        c.set_limit("t", Some(30));
        for i in 0..7 {
            c.carry("t", &format!("old{i}"), T0);
        }
        assert_eq!(c.open("t"), 5, "those that fit are open leases");
        assert!(c.draw("t", "new", T0 + WINDOW - 1).is_err());
        c.close_all_but(&BTreeSet::new(), T0);
        assert!(c.draw("t", "new", T0 + WINDOW).is_ok());
    }

    #[test]
    fn the_coordinators_own_limit_wins_over_the_hosts_reports() {
        let mut c = Credit::default();
        c.set_limit("t", Some(30));
        let mut r = report(0, 0);
        r.points_limit = Some(900);
        c.report("t", "h1", &r, T0);
        assert_eq!(draw_all(&mut c, T0).0, 5);
    }

    #[test]
    fn starts_pause_at_the_hourly_reserve_until_the_reset_and_count_what_was_drawn() {
        let mut c = Credit::default();
        let mut r = report(0, 0);
        r.remaining = Some(PRIMARY_RESERVE + 2);
        r.reset = Some(T0 + 600_000);
        c.report("t", "h1", &r, T0);
        c.draw("t", "a", T0).unwrap();
        c.draw("t", "b", T0).unwrap();
        assert_eq!(c.draw("t", "c", T0), Err(Wait::Hourly(T0 + 600_000)));
        // A refusal gives its start back.
        c.refund("b");
        assert!(c.draw("t", "c", T0).is_ok());
        // An older report (a host whose last answer came earlier) changes nothing.
        r.remaining = Some(4000);
        c.report("t", "h2", &r, T0);
        assert!(c.wait("t", T0).is_some());
        // The window reset: a new report with a later reset frees it.
        r.reset = Some(T0 + 4_200_000);
        c.report("t", "h2", &r, T0 + 600_000);
        assert_eq!(c.wait("t", T0 + 600_000), None);
    }
}
