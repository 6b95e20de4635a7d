//! When the managed runner installs are next checked (`workers::runner_update`
//! carries the check out): at most one check per host at a time, every
//! `--runner-check`, at once when an attempt's end asks, and old versions looked at
//! again while some are left. A host fact, in `HostFacts`.

use crate::timefmt::{Millis, now_millis};
use std::collections::BTreeSet;
use std::sync::Mutex;

/// How often the downloads API is asked unless `--runner-check` says otherwise.
pub const DEFAULT_EVERY_MS: Millis = 6 * 3_600_000;
/// How often a version left to remove is looked at again.
pub const GC_EVERY: Millis = 30_000;

/// What a claim lets a worker do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Job {
    /// Ask the downloads API, fetch and switch, then remove what may go.
    Check,
    /// Only remove versions that may go now (no network).
    Collect,
}

/// When checks are due; one per host at a time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Book {
    /// 0: never check (`--runner-check 0`).
    pub every_ms: Millis,
    /// When the next check is due (0: at once).
    pub next: Millis,
    /// When old versions are looked at again, while some are left.
    pub collect_at: Option<Millis>,
    /// A worker holds the claim.
    pub running: bool,
    /// When a managed path was last switched: a live attempt made before then may
    /// still be copying from the install it replaced.
    pub switched_at: Millis,
    /// Attempts whose end already asked for a check.
    pub prompted: BTreeSet<i64>,
}

impl Book {
    /// Takes the claim when a check (or a collection) is due and none runs.
    pub fn claim(&mut self, now: Millis) -> Option<Job> {
        if self.running || self.every_ms == 0 {
            return None;
        }
        let job = if now >= self.next {
            self.next = now + self.every_ms;
            Job::Check
        } else if self.collect_at.is_some_and(|at| now >= at) {
            Job::Collect
        } else {
            return None;
        };
        self.running = true;
        self.collect_at = None;
        Some(job)
    }

    /// The claim is given back; `left` says whether a version is left to remove.
    pub fn finished(&mut self, now: Millis, switched: bool, left: bool) {
        self.running = false;
        if switched {
            self.switched_at = now;
        }
        self.collect_at = left.then_some(now + GC_EVERY);
    }

    /// Makes the next claim a check, at once.
    pub fn request(&mut self) {
        self.next = 0;
    }

    /// Asks for a check at once for attempt `id`'s end, once per attempt (the loop
    /// acts on an ended attempt again through its cleanup).
    pub fn prompt(&mut self, id: i64) {
        if !self.prompted.contains(&id) {
            if self.prompted.len() >= 64 {
                self.prompted.clear();
            }
            self.prompted.insert(id);
            self.request();
        }
    }
}

/// The book, as `Shared` holds it.
#[derive(Debug, Default)]
pub struct UpdateBook(Mutex<Book>);

impl UpdateBook {
    pub fn new(every_ms: Millis) -> UpdateBook {
        UpdateBook(Mutex::new(Book {
            every_ms,
            ..Book::default()
        }))
    }

    fn with<T>(&self, f: impl FnOnce(&mut Book) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }

    pub fn set_every(&self, every_ms: Millis) {
        self.with(|b| b.every_ms = every_ms);
    }

    pub fn claim(&self, now: Millis) -> Option<Job> {
        self.with(|b| b.claim(now))
    }

    pub fn prompt(&self, id: i64) {
        self.with(|b| b.prompt(id));
    }

    pub(in crate::daemon) fn switched_at(&self) -> Millis {
        self.with(|b| b.switched_at)
    }

    pub(in crate::daemon) fn finished(&self, switched: bool, left: bool) {
        self.with(|b| b.finished(now_millis(), switched, left));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_one_at_a_time_on_the_cadence() {
        let every = 10 * GC_EVERY;
        let mut b = Book {
            every_ms: every,
            ..Book::default()
        };
        assert_eq!(b.claim(10), Some(Job::Check), "at start");
        assert_eq!(b.claim(11), None, "one at a time");
        b.finished(20, false, false);
        assert_eq!(b.claim(500), None, "not due yet");
        let t = 10 + every;
        assert_eq!(b.claim(t), Some(Job::Check));
        b.finished(t, true, true);
        assert_eq!(b.switched_at, t);
        assert_eq!(b.claim(t + 1), None);
        assert_eq!(
            b.claim(t + GC_EVERY),
            Some(Job::Collect),
            "an old version left"
        );
        b.finished(t + GC_EVERY, false, false);
        assert_eq!(b.claim(t + 2 * GC_EVERY), None, "none left");
        b.prompt(7);
        assert_eq!(
            b.claim(t + 2 * GC_EVERY),
            Some(Job::Check),
            "asked for at once"
        );
        b.finished(t + 2 * GC_EVERY, false, false);
        b.prompt(7);
        assert_eq!(b.claim(t + 2 * GC_EVERY + 1), None, "once per attempt");
        let mut never = Book::default();
        assert_eq!(never.claim(10), None, "--runner-check 0");
    }
}
