//! Holding a profile's starts after a start failed for a host reason: permission, exec,
//! a missing install, a used-up uid range, a cgroup that cannot be made. These are
//! deterministic for the profile, so retrying at once only repeats them (and, for a
//! failure after the JIT call, spends GitHub's rate limit on registrations that are
//! deleted again). A pure value: the loop records a failure or a success, and asks.

use crate::timefmt::Millis;

/// The first wait after a host failure.
pub const FIRST_WAIT: Millis = 30_000;
/// The longest wait: doubling stops here.
pub const MAX_WAIT: Millis = 600_000;

/// One profile's hold: how many host failures in a row, the last one's reason, and
/// until when no start is tried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartHold {
    pub failures: u32,
    pub reason: String,
    pub until: Millis,
}

impl StartHold {
    /// The hold after one more host failure at `now`: 30 s, then doubling to 10 min.
    pub fn after_failure(prev: Option<&StartHold>, reason: String, now: Millis) -> StartHold {
        let failures = prev.map_or(0, |h| h.failures).saturating_add(1);
        StartHold {
            failures,
            reason,
            until: now + wait_after(failures),
        }
    }

    /// Whether starts are held at `now`.
    pub fn holds(&self, now: Millis) -> bool {
        now < self.until
    }

    /// What `status` shows while the hold lasts.
    pub fn describe(&self, now: Millis) -> String {
        let secs = ((self.until - now).max(0) + 999) / 1000;
        format!(
            "starts held {secs}s after a host failure ({} in a row): {}",
            self.failures, self.reason
        )
    }
}

/// The wait after `failures` host failures in a row (1 = the first).
pub fn wait_after(failures: u32) -> Millis {
    let doublings = failures.saturating_sub(1).min(20);
    FIRST_WAIT.saturating_mul(1 << doublings).min(MAX_WAIT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_from_thirty_seconds_to_ten_minutes() {
        let waits: Vec<Millis> = (1..=7).map(wait_after).collect();
        assert_eq!(
            waits,
            vec![30_000, 60_000, 120_000, 240_000, 480_000, 600_000, 600_000]
        );
        assert_eq!(wait_after(u32::MAX), MAX_WAIT);
    }

    #[test]
    fn a_hold_counts_failures_and_ends() {
        let h1 = StartHold::after_failure(None, "spawn: permission denied".into(), 1_000);
        assert_eq!((h1.failures, h1.until), (1, 31_000));
        assert!(h1.holds(30_999) && !h1.holds(31_000));
        let h2 = StartHold::after_failure(Some(&h1), "spawn: permission denied".into(), 31_000);
        assert_eq!((h2.failures, h2.until), (2, 91_000));
        assert_eq!(
            h2.describe(31_000),
            "starts held 60s after a host failure (2 in a row): spawn: permission denied"
        );
    }
}
