//! This host's share of a credential other hosts also spend, read from GitHub's own
//! count. Every answer carries `x-ratelimit-used`: the requests the credential has
//! spent in the hour's window, every host's and client's counted. The requests this
//! host made that GitHub counted (a 304 is free), against how far `used` moved over the
//! same answers, say what share of the credential's spending is this host's. A
//! standalone host keeps its secondary-limit points to that share of the ceiling
//! (`points::PointsBook::set_share`), so that hosts sharing a credential pace as one.
//!
//! What it assumes: points have no header, so a host's share of the requests stands
//! for its share of every endpoint's points, which holds for hosts serving the same
//! queue alike and errs when one host starts all the runners while another only
//! reads. Until the credential has spent [`MIN_SEEN`] requests within the last
//! [`SPAN`], nothing is known and the share is whole. Pure: every call takes `now`.

use crate::timefmt::Millis;
use std::collections::VecDeque;

/// How far back the answers that make the share go.
pub const SPAN: Millis = 5 * 60_000;
/// The credential's requests, over [`SPAN`], before a share is trusted.
pub const MIN_SEEN: u64 = 30;
/// The least share a host keeps (sixteen hosts on one credential).
pub const MIN_SHARE: f64 = 1.0 / 16.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sample {
    at: Millis,
    /// The window it belongs to (`x-ratelimit-reset`).
    reset: Millis,
    used: u64,
    /// This host's counted requests so far.
    mine: u64,
}

/// The answers of the last [`SPAN`] and this host's count.
#[derive(Debug, Clone, Default)]
pub struct Share {
    mine: u64,
    samples: VecDeque<Sample>,
}

impl Share {
    /// An answer came with `x-ratelimit-used: used` in the window resetting at `reset`;
    /// `counted`: GitHub counted this request (not a 304, not a refusal).
    pub fn observe(&mut self, used: u64, reset: Millis, counted: bool, now: Millis) {
        if counted {
            self.mine += 1;
        }
        // A new window starts `used` again: the old one's answers say nothing of it.
        self.samples.retain(|s| s.reset == reset);
        self.samples.push_back(Sample {
            at: now,
            reset,
            used,
            mine: self.mine,
        });
        while self.samples.len() > 1 && self.samples.front().is_some_and(|s| s.at + SPAN < now) {
            self.samples.pop_front();
        }
    }

    /// This host's share of the credential's spending, from [`MIN_SHARE`] to 1 (1 while
    /// too little is known).
    pub fn share(&self) -> f64 {
        let (Some(first), Some(last)) = (self.samples.front(), self.samples.back()) else {
            return 1.0;
        };
        let seen = last.used.saturating_sub(first.used);
        if seen < MIN_SEEN {
            return 1.0;
        }
        let mine = last.mine - first.mine;
        (mine as f64 / seen as f64).clamp(MIN_SHARE, 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: Millis = 1_800_000_000_000;
    const RESET: Millis = T0 + 3_600_000;

    #[test]
    fn alone_on_its_credential_a_host_has_all_of_it() {
        let mut s = Share::default();
        assert_eq!(s.share(), 1.0, "nothing known");
        for i in 0..100 {
            s.observe(i + 1, RESET, true, T0 + i as Millis * 100);
        }
        assert_eq!(s.share(), 1.0);
    }

    #[test]
    fn three_hosts_alike_each_get_a_third() {
        let mut s = Share::default();
        // The credential's count moves by 3 for each request of ours.
        for i in 0..60u64 {
            s.observe(3 * i + 1, RESET, true, T0 + i as Millis * 1000);
        }
        assert!((s.share() - 1.0 / 3.0).abs() < 0.02, "{}", s.share());
    }

    #[test]
    fn free_answers_are_not_ours_and_too_little_seen_says_nothing() {
        let mut s = Share::default();
        for i in 0..20u64 {
            s.observe(10 * i, RESET, false, T0 + i as Millis);
        }
        // 190 of the credential's requests, none of ours counted: the least share.
        assert_eq!(s.share(), MIN_SHARE);
        let mut few = Share::default();
        few.observe(100, RESET, true, T0);
        few.observe(100 + MIN_SEEN - 1, RESET, true, T0 + 1);
        assert_eq!(few.share(), 1.0, "fewer than MIN_SEEN seen");
    }

    #[test]
    fn a_new_window_and_old_answers_are_forgotten() {
        let mut s = Share::default();
        for i in 0..60u64 {
            s.observe(4 * i, RESET, true, T0 + i as Millis * 1000);
        }
        assert!(s.share() < 0.3);
        // The window reset: counting starts again, alone now.
        for i in 0..40u64 {
            s.observe(i + 1, RESET + 3_600_000, true, T0 + 60_000 + i as Millis);
        }
        assert_eq!(s.share(), 1.0);
        // Answers older than the span no longer weigh.
        let mut t = Share::default();
        for i in 0..60u64 {
            t.observe(4 * i, RESET, true, T0 + i as Millis);
        }
        let later = T0 + SPAN + 10_000;
        for i in 0..40u64 {
            t.observe(240 + i, RESET, true, later + i as Millis);
        }
        assert_eq!(t.share(), 1.0, "{}", t.share());
    }
}
