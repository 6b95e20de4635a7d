//! The rate-limit budget governor: how often a target may read its REST queue so that
//! what is left of GitHub's budget lasts until the window resets, with a reserve kept
//! for serving the queue (a JIT config per runner, and the deregistrations). The poll
//! interval stretches smoothly as the budget thins and never stops while units
//! remain; a budget GitHub never reported (GHES with limits off) or a window already
//! reset paces nothing. Pure: the loop hands in what the headers said and `now`.

use crate::timefmt::Millis;

/// The budget as GitHub last reported it (`x-ratelimit-*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub limit: u64,
    pub remaining: u64,
    /// When the window resets, unix ms.
    pub reset: Millis,
}

/// How often to read, and whether the budget is what stretched it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pace {
    pub every: Millis,
    pub stretched: bool,
}

/// The smallest cost a read is taken to have: an idle queue's reads are 304s and cost
/// nothing, but the next change costs units, so pacing never divides by zero.
const MIN_READ_COST: f64 = 0.25;
/// How much each new read's cost moves the estimate.
const WEIGHT: f64 = 0.3;

/// What a read of the queue costs, as a moving average of what reads cost.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ReadCost {
    avg: Option<f64>,
}

impl ReadCost {
    /// A read came back having spent `units`.
    pub fn observe(&mut self, units: u64) {
        let u = units as f64;
        self.avg = Some(match self.avg {
            None => u,
            Some(a) => a + WEIGHT * (u - a),
        });
    }

    /// Units per read, as paced (at least [`MIN_READ_COST`]; one before any read).
    pub fn units(&self) -> f64 {
        self.avg.unwrap_or(1.0).max(MIN_READ_COST)
    }
}

/// The units kept back from polling for serving the queue: a JIT config and a
/// deregistration for each runner the profiles may run at once, and a JIT config for
/// each job known to be queued. Never more than [`RESERVE_SHARE`] of the budget, so
/// polling is never starved by a large `max`.
pub fn reserve(max_runners: u64, queued: u64, limit: u64) -> u64 {
    (2 * max_runners + queued).min(limit * RESERVE_SHARE.0 / RESERVE_SHARE.1)
}

/// The most of a window's budget the reserve for serving the queue holds back (3/5):
/// polling, which only finds the work, is left the other two fifths.
pub const RESERVE_SHARE: (u64, u64) = (3, 5);

/// How many runs never read before one read of the queue may read: twice what the
/// profiles may run at once, and two more. Enough to fill the room with jobs known to
/// match and to see that the queue is longer than the room; the rest are read at
/// later polls, as runners free up (see `GitHubClient::read_queue`).
pub fn new_runs_per_read(max_runners: u64) -> usize {
    (2 * max_runners + 2) as usize
}

/// How many runs read before one read of the queue reads again: four times the new
/// runs it may read, and 32 more. The runs being served and the queue's head change;
/// a deep queue's tail keeps its earlier view (its jobs wait anyway) rather than cost
/// a request each per poll, 304 or not.
pub fn known_runs_per_read(max_runners: u64) -> usize {
    4 * new_runs_per_read(max_runners) + REREAD_MARGIN
}

/// How many runs read before one read of the queue reads again while no runner can
/// start (every slot taken, or the minute's JIT points spent): the runs of the
/// `serving` runners (live or starting, each holding or about to take one job), and
/// [`REREAD_MARGIN`] more for the queue's head. The oldest runs come first, and a
/// queue is served oldest first, so these are the runs whose jobs change.
pub fn rereads_without_room(serving: u32) -> usize {
    serving as usize + REREAD_MARGIN
}

/// How often a queue read reads the in-progress run lists as well as the queued ones.
/// A run reports `in_progress` only once nothing in it is queued (`github-facts.md`,
/// measured on github.com), so those lists find no demand a queued list misses: they
/// name the runner that took each job (its owner, for `usage`) and are the safety net
/// for a job `needs:` releases in a run that stays in progress, which GitHub does not
/// document. Read at every poll they cost a unit whenever a run started or ended, and
/// a re-read of every run a runner of ours had just taken (the run moved from one list
/// to the other): 52 of the 294 units a 120-job drain spent (issue 37). Every 10 s,
/// a job that runs longer is still named, and a short job's run is done before.
pub const IN_PROGRESS_EVERY: Millis = 10_000;

/// How often a target whose webhooks come steadily reads its run lists (when its
/// `poll_interval` is shorter): deliveries are its demand, and the lists are the
/// backstop for lost ones. A run whose deliveries disagree with the lists is read only
/// after the deliveries' grace (`github::hooks::GRACE_MS`, the same 10 s), so reading
/// the lists more often only finds sooner a run whose every delivery was lost. At a
/// poll each second, the lists cost a unit a second while runs come and go: 16 of the
/// 40 units a 120-job webhook drain spent beyond its JIT configs (issue 37).
pub const HOOKED_POLL_EVERY: Millis = 10_000;

/// Runs re-read beyond those being served: the head of the queue, where a job taken
/// by a runner that is not ours (or a run cancelled) shows first.
pub const REREAD_MARGIN: usize = 32;

/// How often to read the queue: `base` (the target's `poll_interval`) unless the
/// budget left, less the reserve, would run out before the window resets at that
/// pace; then as often as lets it last. Below the reserve, polling goes on at a
/// quarter of what remains, so a target never stops reading while units remain.
///
/// The pace follows the budget on average, not read by read: while `credit` (units
/// polling saved by reading for less than it may, see [`Credit`]) covers a read, the
/// read goes at `base`. A burst's first reads cost four units each (every run-list
/// page a 200 while runs move) and its later ones nearly nothing (304s); paced read
/// by read, a 300-job burst read its queue every 3.9 s for its first 12 s at a 2 s
/// `poll_interval` (issue 37, burst300).
pub fn pace(
    base: Millis,
    budget: Option<Budget>,
    reserve: u64,
    cost: ReadCost,
    credit: f64,
    now: Millis,
) -> Pace {
    let steady = Pace {
        every: base,
        stretched: false,
    };
    let Some(b) = budget else {
        return steady;
    };
    let left = b.reset - now;
    if left <= 0 {
        return steady;
    }
    let spendable = spendable(b, reserve);
    if spendable == 0 {
        // Nothing left: the client holds every call until the reset anyway.
        return Pace {
            every: left.max(base),
            stretched: true,
        };
    }
    let reads = spendable as f64 / cost.units();
    let needed = (left as f64 / reads).ceil() as Millis;
    if needed <= base || credit >= cost.units() {
        return steady;
    }
    Pace {
        every: needed.min(left.max(base)),
        stretched: true,
    }
}

/// What polling may spend of what remains: all but the reserve, and never less than a
/// quarter of it.
fn spendable(b: Budget, reserve: u64) -> u64 {
    b.remaining.saturating_sub(reserve).max(b.remaining / 4)
}

/// How long, at the pace that makes the budget last, the units [`Credit`] may bank
/// take to earn: a burst of dear reads may run this far ahead of the average.
pub const CREDIT_WINDOW: Millis = 30_000;

/// The units polling has saved by spending less than the budget's average pace
/// allows, so a few dear reads may go at the base interval (a bucket: it fills at
/// the rate that makes what is spendable last to the reset, holds at most
/// [`CREDIT_WINDOW`] of it, and each read's polling cost comes out of it). It starts
/// full: a daemon that just started, or a burst after a quiet spell, reads at its
/// `poll_interval` first. The window bounds what it lends: over any stretch of time,
/// polling spends at most the average rate and one window of it more.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Credit {
    banked: f64,
    at: Option<Millis>,
}

impl Credit {
    /// Fills the bucket for the time since the last call, at the average pace of
    /// `budget` (nothing while GitHub reported none, or its window is over), and
    /// returns what it holds.
    pub fn refill(&mut self, budget: Option<Budget>, reserve: u64, now: Millis) -> f64 {
        let rate = budget
            .filter(|b| b.reset > now)
            .map(|b| spendable(b, reserve) as f64 / (b.reset - now) as f64);
        let Some(rate) = rate else {
            self.at = Some(now);
            return self.banked;
        };
        let depth = rate * CREDIT_WINDOW as f64;
        let earned = match self.at {
            None => depth,
            Some(at) => rate * (now - at).max(0) as f64,
        };
        self.banked = (self.banked + earned).min(depth);
        self.at = Some(now);
        self.banked
    }

    /// A read spent `units` on polling. The bucket may go below zero: a read dearer
    /// than what it held is paid back before the next one goes early.
    pub fn spend(&mut self, units: u64) {
        self.banked -= units as f64;
    }
}

/// The hourly budget a credential is taken to have until GitHub reports one: a PAT's,
/// and the least an App installation gets.
pub const ASSUMED_LIMIT: u64 = 5_000;

/// The most one target's polling could spend in an hour: every poll reads each
/// repository's queued and in-progress run lists, and a list costs a unit whenever it
/// changed (a 304 otherwise). An idle queue costs nothing; this is the busy bound.
pub fn poll_units_per_hour(poll_interval_secs: u64, repos: u64) -> u64 {
    (3_600 / poll_interval_secs.max(1)) * 2 * repos.max(1)
}

/// A warning when the polling of the targets sharing one credential (`units` an hour,
/// from [`poll_units_per_hour`]) could take more of its `limit` than the share the
/// governor leaves polling (see [`RESERVE_SHARE`]); `None` while it fits.
pub fn poll_projection_warning(units: u64, limit: u64, targets: usize) -> Option<String> {
    let limit = limit.max(1);
    let (kept, of) = RESERVE_SHARE;
    (units * of > limit * (of - kept)).then(|| {
        let shared = if targets > 1 {
            format!(" by the {targets} targets sharing its credential")
        } else {
            String::new()
        };
        format!(
            "polling{shared} could spend up to {units} of the credential's {limit} units an \
             hour ({}%), more than the {}% left for polling once starts are served; the \
             budget governor will stretch the polls to make the budget last (see BUDGET in \
             status). Every other host using the same credential spends from the same \
             budget. Raise poll_interval to poll less",
            units * 100 / limit,
            (of - kept) * 100 / of
        )
    })
}

/// What the queue's polling spends of the budget and may spend: the pace it was last
/// given, what a read costs, the credit it saved, and the runners spawned whose runs
/// a read re-reads (each a unit of serving, not of polling: [`Polling::cost`]).
#[derive(Debug, Default)]
pub struct Polling {
    pub pace: Option<Pace>,
    pub read_cost: ReadCost,
    /// What polling saved against the budget's average pace ([`Credit`]).
    pub credit: Credit,
    /// Runners spawned since the last queue read came back, and those spawned before
    /// it whose re-read it did not find: each took a job, so a re-read of its run
    /// answers 200 and spends a unit.
    pub spawned_since_read: u64,
    pub spawned_unseen: u64,
}

impl Polling {
    /// What a queue read spent on polling, which the pace follows: its units less what
    /// serving spent. A new run's first read is part of serving its jobs (like their
    /// JIT configs), and so is the re-read of a run whose job a runner of ours took:
    /// that GET answers 200 (the job is no longer queued) and names the runner that
    /// took it, once per runner spawned. A runner spawned since the last read is found
    /// by this one, or (its job not yet taken) by the next: its unit is held for one
    /// read more. The run lists are polling's whatever they cost. Counted as polling,
    /// a burst's re-reads (a unit per runner it started) made a read look a hundred
    /// times dearer than polling is, and the pace spread that over the rest of the
    /// hour: a 300-job burst read its queue every 20 s at a 2 s `poll_interval`
    /// (issue 37, burst300).
    pub fn cost(&mut self, units: u64, list_units: u64, first_reads: u64) -> u64 {
        let rereads = units.saturating_sub(list_units + first_reads);
        let ours = self.spawned_since_read + self.spawned_unseen;
        let seen = rereads.min(ours);
        self.spawned_unseen = (ours - seen).min(self.spawned_since_read);
        self.spawned_since_read = 0;
        list_units.min(units) + rereads - seen
    }

    /// A read came back: what it spent on polling is observed and spent from the
    /// credit.
    pub fn read_back(&mut self, units: u64, list_units: u64, first_reads: u64) {
        let cost = self.cost(units, list_units, first_reads);
        self.read_cost.observe(cost);
        self.credit.spend(cost);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: Millis = 3_600_000;

    fn budget(remaining: u64, reset_in: Millis) -> Option<Budget> {
        Some(Budget {
            limit: 5000,
            remaining,
            reset: 1_000_000 + reset_in,
        })
    }

    fn cost(units: u64) -> ReadCost {
        let mut c = ReadCost::default();
        c.observe(units);
        c
    }

    #[test]
    fn a_full_budget_polls_at_the_base_interval() {
        let p = pace(5_000, budget(5000, HOUR), 20, cost(3), 0.0, 1_000_000);
        assert_eq!(
            p,
            Pace {
                every: 5_000,
                stretched: false
            }
        );
        // Unknown budget, or a window already over: nothing to pace by.
        assert!(!pace(5_000, None, 20, cost(3), 0.0, 1_000_000).stretched);
        assert!(!pace(5_000, budget(0, -1), 20, cost(3), 0.0, 1_000_000).stretched);
    }

    #[test]
    fn the_interval_stretches_so_the_budget_lasts_to_the_reset() {
        // 500 left, 20 reserved, 3 units a read, 30 min to go: 160 reads in 1800 s.
        let p = pace(1_000, budget(500, HOUR / 2), 20, cost(3), 0.0, 1_000_000);
        assert!(p.stretched);
        assert_eq!(p.every, 11_250);
        // At that pace the reads spend what is spendable, no more.
        let reads = (HOUR / 2) as f64 / p.every as f64;
        assert!(reads * 3.0 <= 480.0 + 1e-6, "{reads} reads");
    }

    #[test]
    fn the_stretch_is_smooth_as_the_budget_thins() {
        let mut last = 0;
        for remaining in (0..=5000).rev().step_by(50) {
            let p = pace(
                1_000,
                budget(remaining, HOUR / 2),
                100,
                cost(4),
                0.0,
                1_000_000,
            );
            assert!(p.every >= last, "{remaining}: {} < {last}", p.every);
            assert!(p.every <= HOUR / 2);
            // No cliff: while units remain, polling goes on before the reset.
            if remaining > 0 {
                assert!(p.every < HOUR / 2, "{remaining}: stopped");
            }
            last = p.every;
        }
    }

    #[test]
    fn below_the_reserve_polling_slows_but_does_not_stop() {
        let p = pace(1_000, budget(40, HOUR / 2), 100, cost(2), 0.0, 1_000_000);
        assert!(p.stretched && p.every < HOUR / 2, "{p:?}");
        // Nothing at all left: wait for the reset.
        let p = pace(1_000, budget(0, HOUR / 2), 100, cost(2), 0.0, 1_000_000);
        assert_eq!(p.every, HOUR / 2);
    }

    #[test]
    fn dear_reads_go_at_the_base_interval_while_the_credit_covers_them() {
        // A burst (issue 37, burst300): 4,647 left, 920 reserved, an hour to go, reads
        // costing 4: the budget's average pace is one read every 3.9 s.
        let b = budget(4_647, HOUR);
        let now = 1_000_000;
        let mut credit = Credit::default();
        let banked = credit.refill(b, 920, now);
        // 30 s of the average rate (3,727 units over the hour): 31 units.
        assert!((banked - 31.06).abs() < 0.01, "{banked}");
        let mut reads = 0;
        let mut at = now;
        loop {
            let banked = credit.refill(b, 920, at);
            let p = pace(2_000, b, 920, cost(4), banked, at);
            if p.stretched {
                assert!(p.every > 3_800, "{p:?}");
                break;
            }
            credit.spend(4);
            reads += 1;
            at += p.every;
        }
        // 4 units every 2 s against one a second earned: the 31 banked lend about
        // 30 s of reads at the base interval (the window), then the average pace.
        assert!(
            (14..=17).contains(&reads),
            "{reads} reads at the base interval"
        );
        // What polling spent over that stretch: the average and one window more.
        let spent = 4.0 * reads as f64;
        let average = 3_727.0 / 3_600_000.0 * (at - now) as f64;
        assert!(
            spent <= average + 31.1 + 4.0,
            "{spent} spent, {average} average"
        );
    }

    #[test]
    fn the_credit_fills_at_the_average_pace_and_holds_one_window() {
        let b = budget(3_620, HOUR);
        let mut credit = Credit::default();
        // 3,600 spendable over an hour: a unit a second, 30 held at most.
        let now = 1_000_000;
        assert!((credit.refill(b, 20, now) - 30.0).abs() < 1e-9);
        credit.spend(40);
        assert!(
            (credit.refill(b, 20, now) + 10.0).abs() < 1e-9,
            "debt is kept"
        );
        let back = credit.refill(b, 20, now + 15_000);
        assert!((back - 5.0).abs() < 0.1, "{back}");
        let full = credit.refill(b, 20, now + 600_000);
        // An hour's 3,600 over what is left of it (50 min): 36 a window, all of it.
        assert!((full - 36.0).abs() < 1e-9, "capped at the window: {full}");
        // No budget reported: nothing earned, nothing needed.
        let mut none = Credit::default();
        assert_eq!(none.refill(None, 20, 0), 0.0);
    }

    #[test]
    fn read_cost_is_a_moving_average_with_a_floor() {
        let mut c = ReadCost::default();
        assert_eq!(c.units(), 1.0);
        c.observe(10);
        assert_eq!(c.units(), 10.0);
        c.observe(0);
        assert!((c.units() - 7.0).abs() < 1e-9);
        for _ in 0..100 {
            c.observe(0);
        }
        assert_eq!(c.units(), MIN_READ_COST);
    }

    #[test]
    fn the_reserve_covers_starts_and_never_more_than_three_fifths() {
        assert_eq!(reserve(4, 10, 5000), 18);
        assert_eq!(reserve(4000, 10, 5000), 3000);
    }
}

#[cfg(test)]
mod projection {
    use super::*;

    #[test]
    fn a_busy_poll_every_five_seconds_fits_a_pat_and_one_every_second_does_not() {
        assert_eq!(poll_units_per_hour(5, 1), 1_440);
        assert_eq!(poll_projection_warning(1_440, ASSUMED_LIMIT, 1), None);
        let units = poll_units_per_hour(1, 1);
        assert_eq!(units, 7_200);
        let w = poll_projection_warning(units, ASSUMED_LIMIT, 1).unwrap();
        assert!(
            w.contains("7200 of the credential's 5000 units an hour (144%)"),
            "{w}"
        );
        // Repositories and targets sharing the credential add up.
        assert_eq!(poll_units_per_hour(5, 4), 5_760);
        let w = poll_projection_warning(2 * 1_440, ASSUMED_LIMIT, 2).unwrap();
        assert!(w.contains("by the 2 targets sharing its credential"), "{w}");
        assert_eq!(poll_projection_warning(2 * 1_440, 15_000, 2), None);
        assert_eq!(poll_projection_warning(2_000, 5_000, 1), None, "40% fits");
        assert!(poll_projection_warning(2_001, 5_000, 1).is_some());
        assert_eq!(poll_units_per_hour(0, 0), 7_200, "never divides by zero");
    }
}
