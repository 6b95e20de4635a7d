//! Holds, as pure values the loop records into and asks: a profile's starts after a
//! start failed for a host reason ([`StartHold`]), and a whole target's GitHub calls
//! after GitHub refused them ([`TargetHold`]).
//!
//! A host failure (permission, exec, a missing install or user, a cgroup that cannot
//! be made) is deterministic for the profile, so retrying at once only repeats it (and,
//! for a failure after the JIT call, spends GitHub's rate limit on registrations that
//! are deleted again). A rate limit holds the target to the second GitHub named; a
//! deterministic GitHub error (401, 403, 404) backs off from a minute to a quarter of
//! an hour; a transient one (5xx, a reset) is the client's to retry and holds nothing.
//! A refused credential (401) is its own kind: it backs off the same, but a changed
//! credential lifts it at once, and it is never shown or kept as a rate limit.
//!
//! Both waits are [`Backoff`]'s schedule with no jitter (`after_failures`): a hold is
//! the same for the same failures, as `status` shows it and the tests pin it. Nothing
//! here reads a clock or draws a random number; the caller gives `now`.

use crate::backoff::Backoff;
use crate::timefmt::Millis;
use std::collections::BTreeMap;
use std::time::Duration;

/// The first wait after a host failure.
pub const FIRST_WAIT: Millis = 30_000;
/// The longest wait: doubling stops here.
pub const MAX_WAIT: Millis = 600_000;
/// The waits after host failures: [`FIRST_WAIT`] doubling to [`MAX_WAIT`].
pub const START_BACKOFF: Backoff = Backoff::new(
    Duration::from_millis(FIRST_WAIT as u64),
    Duration::from_millis(MAX_WAIT as u64),
);

/// Runners of one profile that crash before they listen, in a row, before its starts
/// are held: one crash is a runner's bad luck (and each costs a JIT config, which a
/// retry spends again), three in a row with none listening between is the install or
/// the host. Left alone, a broken install had the daemon start 174 runners in 7 s,
/// every one registered on GitHub, until GitHub's per-minute points ran out.
pub const CRASHES_BEFORE_HOLD: u32 = 3;

/// One profile's hold: how many host failures in a row, the last one's reason, and
/// until when no start is tried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartHold {
    pub failures: u32,
    pub reason: String,
    pub until: Millis,
    /// The failures are runners that crashed before they listened: a runner spawned
    /// proves nothing then, and only one that listens ends the hold's streak.
    pub crashes: bool,
}

impl StartHold {
    /// The hold after one more host failure at `now`: 30 s, then doubling to 10 min.
    pub fn after_failure(prev: Option<&StartHold>, reason: String, now: Millis) -> StartHold {
        let failures = prev.map_or(0, |h| h.failures).saturating_add(1);
        StartHold {
            failures,
            reason,
            until: now + wait_after(failures),
            crashes: false,
        }
    }

    /// The hold after runners crashed at start, [`CRASHES_BEFORE_HOLD`] or more in a
    /// row: the same waits as after host failures.
    pub fn after_crash(prev: Option<&StartHold>, reason: String, now: Millis) -> StartHold {
        StartHold {
            crashes: true,
            ..StartHold::after_failure(prev, reason, now)
        }
    }

    /// Whether starts are held at `now`.
    pub fn holds(&self, now: Millis) -> bool {
        now < self.until
    }

    /// What `status` shows while the hold lasts.
    pub fn describe(&self, now: Millis) -> String {
        let secs = ((self.until - now).max(0) + 999) / 1000;
        let after = if self.crashes {
            "runners crashed at start"
        } else {
            "a host failure"
        };
        format!(
            "starts held {secs}s after {after} ({} in a row): {}",
            self.failures, self.reason
        )
    }
}

/// The wait after `failures` host failures in a row (1 = the first).
pub fn wait_after(failures: u32) -> Millis {
    millis(START_BACKOFF.after_failures(failures))
}

fn millis(d: Duration) -> Millis {
    Millis::try_from(d.as_millis()).unwrap_or(Millis::MAX)
}

/// Why GitHub refused a target's call, as far as holding it goes (the loop maps
/// `github::ErrorClass` to this at its edge).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Rate limited (`retry-after`, `x-ratelimit-reset`): nothing before this time.
    RateLimitedUntil(Millis),
    /// The credential itself was refused (401): backs off as [`Refusal::Deterministic`]
    /// does, but a changed credential (its file written, the target edited) or a
    /// restart lifts the hold at once, and it is never a rate limit.
    CredentialsRefused,
    /// It will fail the same way until someone fixes something.
    Deterministic,
    /// A 5xx, a timeout, a reset: retried by the client, holds nothing here.
    Transient,
}

/// The first wait after a deterministic GitHub error, and the longest.
pub const TARGET_FIRST_WAIT: Millis = 60_000;
pub const TARGET_MAX_WAIT: Millis = 900_000;
/// The waits after deterministic GitHub errors: [`TARGET_FIRST_WAIT`] doubling to
/// [`TARGET_MAX_WAIT`].
pub const TARGET_BACKOFF: Backoff = Backoff::new(
    Duration::from_millis(TARGET_FIRST_WAIT as u64),
    Duration::from_millis(TARGET_MAX_WAIT as u64),
);

/// A target's hold: demand reads, starts and the runner list wait until [`until`]. Its
/// two parts are kept apart because they mean different things: GitHub's own word
/// (a rate limit, a `retry-after`: the only part recorded for a restarted daemon), and
/// our backoff after deterministic refusals, a refused credential among them (which a
/// changed credential lifts).
///
/// [`until`]: TargetHold::until
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TargetHold {
    /// GitHub's rate limit or `retry-after`: nothing is sent before this.
    pub rate_until: Millis,
    /// The backoff after deterministic errors.
    pub backoff_until: Millis,
    /// Deterministic errors in a row (reset by a read that succeeds).
    pub failures: u32,
    /// Since when GitHub refuses the credential (401), until a call succeeds or the
    /// credential changes.
    pub refused_since: Option<Millis>,
}

impl TargetHold {
    /// The hold after GitHub refused a call at `now`. A rate limit never shortens a
    /// longer hold already in place.
    pub fn after(self, why: Refusal, now: Millis) -> TargetHold {
        match why {
            Refusal::RateLimitedUntil(t) => TargetHold {
                rate_until: self.rate_until.max(t),
                ..self
            },
            Refusal::CredentialsRefused => TargetHold {
                refused_since: self.refused_since.or(Some(now)),
                ..self.backed_off(now)
            },
            Refusal::Deterministic => self.backed_off(now),
            Refusal::Transient => self,
        }
    }

    fn backed_off(self, now: Millis) -> TargetHold {
        let failures = self.failures.saturating_add(1);
        TargetHold {
            failures,
            backoff_until: self.backoff_until.max(now + target_wait_after(failures)),
            ..self
        }
    }

    /// A call succeeded: the next deterministic error starts the backoff over, and the
    /// credential is no longer refused. A hold already in place (a rate limit) stands.
    pub fn recovered(self) -> TargetHold {
        TargetHold {
            failures: 0,
            refused_since: None,
            ..self
        }
    }

    /// A call went through with the credential: it is no longer refused (the backoff
    /// of other deterministic errors stands, as a success of another read leaves it).
    pub fn credential_accepted(self) -> TargetHold {
        TargetHold {
            refused_since: None,
            ..self
        }
    }

    /// The credential changed (its file was written, the target edited): the backoff
    /// and the refusal are lifted, so the new credential is tried at once. GitHub's
    /// rate limit stands (the same token may be behind the change).
    pub fn credential_changed(self) -> TargetHold {
        TargetHold {
            rate_until: self.rate_until,
            ..TargetHold::default()
        }
    }

    /// Raises GitHub's part of the hold to at least `until` (one recorded before a
    /// restart).
    pub fn at_least(self, until: Millis) -> TargetHold {
        TargetHold {
            rate_until: self.rate_until.max(until),
            ..self
        }
    }

    /// Until when nothing is sent.
    pub fn until(&self) -> Millis {
        self.rate_until.max(self.backoff_until)
    }

    pub fn holds(&self, now: Millis) -> bool {
        now < self.until()
    }
}

/// The wait after `failures` deterministic errors in a row: 1, 2, 4, 8 min, then 15.
pub fn target_wait_after(failures: u32) -> Millis {
    millis(TARGET_BACKOFF.after_failures(failures))
}

/// The holds a target's pass keeps: GitHub's on the target (and the one last written
/// to the store, so a restart keeps a rate limit), and each profile's start hold with
/// its runners' crash streak.
#[derive(Debug, Default)]
pub struct Holds {
    pub target: TargetHold,
    /// The target hold last written to the store.
    pub persisted: Millis,
    pub starts: BTreeMap<String, StartHold>,
    /// Per profile, its runners that crashed before they listened since one last
    /// listened ([`CRASHES_BEFORE_HOLD`] of them hold its starts).
    pub crashes_in_a_row: BTreeMap<String, u32>,
    /// The starts handed to workers and not yet back, by attempt, with their profile:
    /// a hold on the profile withdraws those still queued (`Effect::HoldStarts`), so
    /// they end `not_started` instead of failing the same way.
    pub starts_out: BTreeMap<i64, String>,
}

impl Holds {
    /// The starts out for `profile`, which a hold on it withdraws.
    pub fn starts_of(&self, profile: &str) -> Vec<i64> {
        self.starts_out
            .iter()
            .filter(|(_, p)| p.as_str() == profile)
            .map(|(id, _)| *id)
            .collect()
    }

    /// The first time after `now` a hold ends (the target's, or a profile's starts'):
    /// the pass wants to look then.
    pub fn ends_after(&self, now: Millis) -> Option<Millis> {
        std::iter::once(self.target.until())
            .chain(self.starts.values().map(|h| h.until))
            .filter(|t| *t > now)
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_backs_off_on_deterministic_errors_and_waits_out_rate_limits() {
        let h = TargetHold::default();
        let waits: Vec<Millis> = (1..=6).map(target_wait_after).collect();
        assert_eq!(
            waits,
            vec![60_000, 120_000, 240_000, 480_000, 900_000, 900_000]
        );
        let h = h.after(Refusal::Deterministic, 1_000);
        assert_eq!((h.failures, h.until()), (1, 61_000));
        let h = h.after(Refusal::Deterministic, 61_000);
        assert_eq!((h.failures, h.until()), (2, 181_000));
        // Transient errors change nothing; a success resets the count, not the hold.
        assert_eq!(h.after(Refusal::Transient, 200_000), h);
        let r = h.recovered();
        assert_eq!((r.failures, r.until()), (0, 181_000));
        // A rate limit holds to its time, and never shortens a longer hold.
        let h = TargetHold::default().after(Refusal::RateLimitedUntil(50_000), 1_000);
        assert!(h.holds(49_999) && !h.holds(50_000));
        assert_eq!(
            h.after(Refusal::RateLimitedUntil(10_000), 2_000).until(),
            50_000
        );
        assert_eq!(h.at_least(70_000).until(), 70_000);
        assert_eq!(h.at_least(1).until(), 50_000);
        // A backoff is no rate limit: only GitHub's word is `rate_until`.
        let b = TargetHold::default().after(Refusal::Deterministic, 1_000);
        assert_eq!((b.rate_until, b.backoff_until), (0, 61_000));
    }

    #[test]
    fn a_refused_credential_backs_off_says_since_when_and_a_change_lifts_it() {
        let h = TargetHold::default().after(Refusal::CredentialsRefused, 1_000);
        assert_eq!(h.refused_since, Some(1_000));
        assert!(h.holds(60_999) && !h.holds(61_000));
        assert_eq!(h.rate_until, 0, "a 401 is never a rate limit");
        // Refused again: the wait doubles, the refusal keeps its first time.
        let h = h.after(Refusal::CredentialsRefused, 61_000);
        assert_eq!(
            (h.failures, h.until(), h.refused_since),
            (2, 181_000, Some(1_000))
        );
        // The credential changed: tried at once, no longer refused, the count over.
        let c = h.credential_changed();
        assert!(!c.holds(61_001));
        assert_eq!(c, TargetHold::default());
        // ... but a rate limit GitHub set stands through the change.
        let r = h
            .after(Refusal::RateLimitedUntil(500_000), 62_000)
            .credential_changed();
        assert!(r.holds(499_999) && !r.holds(500_000));
        assert_eq!(r.refused_since, None);
        // A call that goes through ends the refusal too.
        let ok = TargetHold::default()
            .after(Refusal::CredentialsRefused, 1_000)
            .recovered();
        assert_eq!(ok.refused_since, None);
    }

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
