//! The usage metrics' counters per repository (`runner_manager_usage_*`, issue 35):
//! what the daily roll-up gained since the last read, under a bounded set of labels.
//! Pure: the daemon reads the roll-up's recent days a minute apart and adds what this
//! says to the counters.
//!
//! Counters count from the daemon's start, as Prometheus counters do: the first read
//! is the baseline. Only the last two days are read (an attempt rolls up on the day
//! it ended, at most a few minutes late), so pruning old days never lowers a counter.
//!
//! Cardinality: at most `top` repositories are named, the ones that used the most CPU
//! over the kept days when the daemon started, then the first new ones while names
//! are left; every other repository counts as `other`, and a job no source named as
//! `unknown`. A repository once counted as `other` stays there until the daemon
//! restarts, so no counter ever goes down.

use crate::domain::rollup::{Day, UsageFigures};
use std::collections::{BTreeMap, BTreeSet};

/// The label of the repositories past the named ones.
pub const OTHER: &str = "other";
/// The label of jobs whose repository no source named.
pub const UNKNOWN: &str = "unknown";

/// How many days back each read looks: today and yesterday.
pub const DAYS_READ: Day = 2;

/// Where the counters stand: which repositories are named and what each day's row
/// was at the last read.
#[derive(Debug, Clone, Default)]
pub struct UsageCounters {
    named: BTreeSet<String>,
    other: BTreeSet<String>,
    last: BTreeMap<(Day, String), UsageFigures>,
    started: bool,
}

impl UsageCounters {
    /// Names the first `top` of `ranked` (the repositories by CPU, the most first).
    pub fn new(ranked: &[String], top: usize) -> UsageCounters {
        UsageCounters {
            named: ranked
                .iter()
                .filter(|r| !r.is_empty())
                .take(top)
                .cloned()
                .collect(),
            ..UsageCounters::default()
        }
    }

    /// The first day a read at `today` asks for.
    pub fn from_day(today: Day) -> Day {
        today - (DAYS_READ - 1)
    }

    /// Takes a read of the rows of days `from_day(today)` on (per day and repository)
    /// and says what each label's counters gain, labels sorted. The first read only
    /// sets the baseline. `top` is the setting now: a raised one names new
    /// repositories, a lowered one keeps those already named.
    pub fn step(
        &mut self,
        rows: &[(Day, String, UsageFigures)],
        today: Day,
        top: usize,
    ) -> Vec<(String, UsageFigures)> {
        let from = Self::from_day(today);
        let mut gains: BTreeMap<String, UsageFigures> = BTreeMap::new();
        let mut seen = BTreeMap::new();
        for (day, repo, f) in rows.iter().filter(|(d, _, _)| *d >= from) {
            let key = (*day, repo.clone());
            if self.started {
                let gain = minus(f, self.last.get(&key).unwrap_or(&UsageFigures::default()));
                if gain != UsageFigures::default() {
                    let label = self.label(repo, top);
                    gains.entry(label).or_default().merge(&gain);
                }
            }
            seen.insert(key, *f);
        }
        // A day's row that went (pruned) is forgotten; one that stays keeps its
        // highest figures, so a lower read never counts twice on the way back up.
        for (k, f) in seen.iter_mut() {
            if let Some(old) = self.last.get(k) {
                *f = highest(f, old);
            }
        }
        self.last = seen;
        self.started = true;
        gains.into_iter().collect()
    }

    /// The label `repo` counts under, naming it if a name is left.
    fn label(&mut self, repo: &str, top: usize) -> String {
        if repo.is_empty() {
            return UNKNOWN.into();
        }
        if self.named.contains(repo) {
            return repo.into();
        }
        if !self.other.contains(repo) && self.named.len() < top {
            self.named.insert(repo.into());
            return repo.into();
        }
        self.other.insert(repo.into());
        OTHER.into()
    }
}

/// `a - b`, figure by figure, never below zero (the waits and peak are not counted).
fn minus(a: &UsageFigures, b: &UsageFigures) -> UsageFigures {
    UsageFigures {
        runners: a.runners.saturating_sub(b.runners),
        jobs: a.jobs.saturating_sub(b.jobs),
        busy_ms: a.busy_ms.saturating_sub(b.busy_ms),
        idle_ms: a.idle_ms.saturating_sub(b.idle_ms),
        cpu_ms: a.cpu_ms.saturating_sub(b.cpu_ms),
        rss_byte_secs: a.rss_byte_secs.saturating_sub(b.rss_byte_secs),
        lost: a.lost.saturating_sub(b.lost),
        reruns: a.reruns.saturating_sub(b.reruns),
        ..UsageFigures::default()
    }
}

/// The higher of each figure.
fn highest(a: &UsageFigures, b: &UsageFigures) -> UsageFigures {
    UsageFigures {
        runners: a.runners.max(b.runners),
        jobs: a.jobs.max(b.jobs),
        busy_ms: a.busy_ms.max(b.busy_ms),
        idle_ms: a.idle_ms.max(b.idle_ms),
        cpu_ms: a.cpu_ms.max(b.cpu_ms),
        rss_byte_secs: a.rss_byte_secs.max(b.rss_byte_secs),
        lost: a.lost.max(b.lost),
        reruns: a.reruns.max(b.reruns),
        ..UsageFigures::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(ms: u64) -> UsageFigures {
        UsageFigures {
            runners: 1,
            jobs: 1,
            cpu_ms: ms,
            ..UsageFigures::default()
        }
    }

    fn row(day: Day, repo: &str, f: UsageFigures) -> (Day, String, UsageFigures) {
        (day, repo.into(), f)
    }

    fn gained(g: &[(String, UsageFigures)]) -> Vec<(&str, u64)> {
        g.iter().map(|(l, f)| (l.as_str(), f.cpu_ms)).collect()
    }

    #[test]
    fn the_first_read_is_the_baseline_and_later_reads_add_what_grew() {
        let mut c = UsageCounters::new(&["o/a".into()], 2);
        let base = [row(10, "o/a", cpu(5_000))];
        assert!(
            c.step(&base, 10, 2).is_empty(),
            "before the daemon: not counted"
        );
        let later = [row(10, "o/a", cpu(7_000)), row(10, "", cpu(1_000))];
        assert_eq!(
            gained(&c.step(&later, 10, 2)),
            vec![("o/a", 2_000), (UNKNOWN, 1_000)]
        );
        assert!(
            c.step(&later, 10, 2).is_empty(),
            "nothing new, nothing added"
        );
    }

    #[test]
    fn past_the_named_repositories_the_rest_is_other_and_stays_there() {
        let ranked: Vec<String> = vec!["o/big".into()];
        let mut c = UsageCounters::new(&ranked, 2);
        c.step(&[], 10, 2);
        let r1 = [row(10, "o/big", cpu(1)), row(10, "o/new", cpu(2))];
        assert_eq!(
            gained(&c.step(&r1, 10, 2)),
            vec![("o/big", 1), ("o/new", 2)]
        );
        let r2 = [
            row(10, "o/big", cpu(1)),
            row(10, "o/new", cpu(2)),
            row(10, "o/third", cpu(3)),
        ];
        assert_eq!(gained(&c.step(&r2, 10, 2)), vec![(OTHER, 3)]);
        // Raising the setting names new repositories, not one already in `other`
        // (its counter would go down).
        let r3 = [row(10, "o/third", cpu(4)), row(10, "o/fourth", cpu(1))];
        assert_eq!(
            gained(&c.step(&r3, 10, 5)),
            vec![("o/fourth", 1), (OTHER, 1)]
        );
    }

    #[test]
    fn a_new_day_counts_from_zero_and_a_pruned_day_lowers_nothing() {
        let mut c = UsageCounters::new(&[], 3);
        c.step(&[row(10, "o/a", cpu(100))], 10, 3);
        // Midnight: yesterday's row stays read, today's is new.
        let r = [row(10, "o/a", cpu(150)), row(11, "o/a", cpu(20))];
        assert_eq!(gained(&c.step(&r, 11, 3)), vec![("o/a", 70)]);
        // Day 10 falls out of the read (and may be pruned): nothing goes down.
        let r = [row(11, "o/a", cpu(25)), row(12, "o/a", cpu(1))];
        assert_eq!(gained(&c.step(&r, 12, 3)), vec![("o/a", 6)]);
        // A read that comes back lower (a row rewritten) adds nothing, and counts
        // only what passes the highest seen.
        assert!(c.step(&[row(12, "o/a", cpu(0))], 12, 3).is_empty());
        assert_eq!(
            gained(&c.step(&[row(12, "o/a", cpu(4))], 12, 3)),
            vec![("o/a", 3)]
        );
    }
}
