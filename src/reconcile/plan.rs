//! A target's pass as a pure plan. The loop gathers one [`Observed`] snapshot (the host,
//! its profiles and open attempts, what each live attempt showed, the queue, the scale
//! sets' statistics, what keeps a profile from starting, the target's mode), and
//! [`plan`] returns everything the pass does: the actions for each attempt, the launch
//! book's bindings, the runners to start with their queue times and uids, the rows
//! `status` shows, and when to look again. The loop only gathers, plans, records and
//! acts; nothing here does I/O or reads a clock.

use super::allocate::{Allocation, Counts, HostAllocator, pick_surplus};
use super::demand::{self, Demand};
use super::launch_book::{Closed, LaunchBook, OfferCtx, TargetMode};
use super::lines::RunnerEvent;
use super::unfit::Unfit;
use super::watch::{self, Action, Observation, ProcessStatus, Registration, Timeouts, Want};
use crate::domain::{
    Attempt, AttemptState, DemandSource, Host, Limit, NotReconciling, QueuedJob, ScalePolicy,
};
use crate::timefmt::Millis;
use std::collections::{BTreeMap, BTreeSet, HashSet};

/// A stopped runner's grace before what is left of it is killed.
pub const STOP_GRACE: Millis = 10_000;
/// How often a live target looks at its runners between other reasons to.
pub const OBSERVE_EVERY: Millis = 250;

/// What one live attempt showed this pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// Its new log lines, parsed.
    pub events: Vec<RunnerEvent>,
    pub process: ProcessStatus,
    pub registration: Registration,
    /// Read only when its life may be ending (see `Observation::oom_killed`).
    pub oom_killed: bool,
}

/// One scale set profile's last statistics, as far as demand goes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScaleSetSeen {
    pub assigned: u32,
    pub running: u32,
}

/// Everything a pass decides from.
#[derive(Debug, Clone, Copy)]
pub struct Observed<'a> {
    pub target: &'a str,
    pub host: &'a Host,
    /// This target's profiles.
    pub profiles: &'a [ScalePolicy],
    /// This host's attempts not yet cleaned, every target's: all of it is host load.
    pub open: &'a [Attempt],
    /// What each attempt of this target showed (attempts with an action in flight on a
    /// worker are absent: they are the worker's until it is done).
    pub seen: &'a BTreeMap<i64, Seen>,
    /// Attempts a worker is acting on (a start, a deregistration, a cleanup).
    pub in_flight: &'a BTreeSet<i64>,
    pub mode: TargetMode,
    /// The host drains or the daemon stops: start nothing, let idle runners go.
    pub draining: bool,
    /// The REST queue as last read (scale set jobs left out), and when it was read.
    pub jobs: &'a [QueuedJob],
    pub queue_read_at: Millis,
    /// Attempts that ended after taking a job the queue may still list.
    pub ended_since_read: &'a [Attempt],
    /// The scale set profiles' statistics (absent until a first message), and the
    /// queue times of their jobs assigned and not started, oldest first.
    pub scaleset: &'a BTreeMap<String, ScaleSetSeen>,
    pub scaleset_queued: &'a BTreeMap<String, Vec<Millis>>,
    /// Profiles that cannot start runners now, with the reason.
    pub unfit: &'a BTreeMap<String, Unfit>,
    /// The target may start runners (it has a client and no hold).
    pub can_start: bool,
    /// GitHub's rate limit (or a `retry-after`) holds the target until then: the
    /// profiles say so (`rate_limited`) rather than what they would be limited by.
    pub rate_limited_until: Option<Millis>,
    /// With per-attempt uids: every usable uid of the range no open attempt holds, in
    /// the order to hand them out. `None` when runners do not get uids of their own.
    pub free_uids: Option<&'a [(u32, u32)]>,
    /// Attempts the last pass judged surplus (idle beyond demand).
    pub surplus: &'a HashSet<i64>,
}

/// One runner to start: its `pending` row is recorded (and a launch bound to it) by the
/// loop before anything external happens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Intent {
    pub profile: String,
    /// When the job it is meant for was queued (for the latency figures).
    pub queued_at: Option<Millis>,
    /// The runner's own uid and gid, with per-attempt uids.
    pub runner_ids: Option<(u32, u32)>,
}

/// What a pass does.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Per attempt, the actions to carry out in order (`watch`'s).
    pub actions: Vec<(i64, Vec<Action>)>,
    /// Launches the book closed (for the log).
    pub closed: Vec<Closed>,
    /// Free runners bound to open launches: `(lease, attempt)`, to record.
    pub bindings: Vec<(String, i64)>,
    pub intents: Vec<Intent>,
    /// Idle attempts beyond demand, for the next pass's watch.
    pub surplus: HashSet<i64>,
    pub allocation: Allocation,
    pub demand: Demand,
    /// The demand of the profiles that are not directed (the pool's view of the host).
    pub standalone: BTreeMap<String, u32>,
    /// Set when every runner uid is held: why a profile that wanted more got none.
    pub uids_used_up: Option<String>,
}

/// Whether an action is carried out on a worker: it calls GitHub (a deregistration,
/// a cleanup that may deregister) or removes a root. Everything else is a store write
/// or a signal, done inline.
pub fn needs_worker(a: &Action) -> bool {
    matches!(a, Action::Deregister { .. } | Action::Cleanup)
}

/// Splits an attempt's actions where the first one that needs a worker begins: the
/// head is done inline now, the tail (with what follows it) on a worker.
pub fn split_at_io(actions: Vec<Action>) -> (Vec<Action>, Vec<Action>) {
    let at = actions
        .iter()
        .position(needs_worker)
        .unwrap_or(actions.len());
    let mut head = actions;
    let tail = head.split_off(at);
    (head, tail)
}

/// The pass's decisions, on `book` (the host's launch book, locked by the caller).
pub fn plan(o: &Observed, book: &mut LaunchBook, now: Millis) -> Plan {
    let mine: Vec<Attempt> = o
        .open
        .iter()
        .filter(|a| a.target == o.target)
        .cloned()
        .collect();
    let starts = plan_starts(o, &mine, book, now);
    let actions = plan_watch(o, &mine, &starts.surplus, now);
    Plan { actions, ..starts }
}

/// Each of this target's attempts not in flight, watched.
fn plan_watch(
    o: &Observed,
    mine: &[Attempt],
    surplus: &HashSet<i64>,
    now: Millis,
) -> Vec<(i64, Vec<Action>)> {
    let mut out = Vec::new();
    for a in mine {
        if o.in_flight.contains(&a.id) {
            continue;
        }
        let seen = o.seen.get(&a.id);
        let policy = o.profiles.iter().find(|p| p.name == a.profile);
        let want = match policy {
            None => Want::Draining,
            Some(p) if o.draining || !p.active => Want::Draining,
            Some(_) if surplus.contains(&a.id) => Want::Surplus,
            Some(_) => Want::Needed,
        };
        let timeouts = match policy {
            Some(p) => Timeouts::of(p, STOP_GRACE),
            // A profile removed under live runners: default timeouts, drained.
            None => Timeouts {
                bootstrap: 300_000,
                idle: 0,
                job: None,
                stop_grace: STOP_GRACE,
            },
        };
        let none = Seen {
            events: Vec::new(),
            process: ProcessStatus::Gone,
            registration: Registration::Unknown,
            oom_killed: false,
        };
        // An ended attempt is not observed (only its cleanup is due).
        let s = seen.unwrap_or(&none);
        let obs = Observation {
            events: &s.events,
            process: if a.state.is_live() {
                s.process
            } else {
                ProcessStatus::Gone
            },
            registration: s.registration,
            oom_killed: s.oom_killed,
        };
        let actions = watch::watch(a, &obs, &timeouts, want, now);
        if !actions.is_empty() {
            out.push((a.id, actions));
        }
    }
    out
}

/// The profiles' timeouts, for the loop's carrying out of actions.
pub fn timeouts_of(profiles: &[ScalePolicy], profile: &str) -> Timeouts {
    match profiles.iter().find(|p| p.name == profile) {
        Some(p) => Timeouts::of(p, STOP_GRACE),
        None => Timeouts {
            bootstrap: 300_000,
            idle: 0,
            job: None,
            stop_grace: STOP_GRACE,
        },
    }
}

/// Demand, the launch book, allocation, intents and surplus.
fn plan_starts(o: &Observed, mine: &[Attempt], book: &mut LaunchBook, now: Millis) -> Plan {
    let counts = Counts::of(o.open);
    // Ended attempts take their job out of the queue only while the queue is older
    // than their job (see the loop's `ended_since_read`).
    let mut for_demand: Vec<Attempt> = mine
        .iter()
        .filter(|a| a.state.is_live() || a.job_id.is_some())
        .cloned()
        .collect();
    for e in o.ended_since_read {
        if !for_demand.iter().any(|a| a.id == e.id) {
            for_demand.push(e.clone());
        }
    }
    let poll_profiles: Vec<ScalePolicy> = o
        .profiles
        .iter()
        .filter(|p| p.demand == DemandSource::Poll)
        .cloned()
        .collect();
    let rest_jobs = rest_jobs(o.jobs, o.profiles);
    let demand = demand::assign(&poll_profiles, &rest_jobs, &for_demand);
    let standalone = scaleset_demand(demand.counts(), o.scaleset, mine);
    let modes = BTreeMap::from([(o.target.to_string(), o.mode)]);
    let mut host_view = o.host.clone();
    host_view.draining = o.draining;
    let closed = book.observe(mine, now);
    let bindings = book.bind_free(o.profiles, mine);
    let alloc = HostAllocator {
        host: &host_view,
        policies: o.profiles,
        counts: &counts,
        unfit: o.unfit,
    };
    let ctx = OfferCtx {
        alloc,
        demand: &standalone,
        modes: &modes,
        attempts: mine,
    };
    let mut allocation = alloc.allocate(&book.demand(&ctx));
    if o.draining && !o.host.draining {
        // The daemon stops, the host does not drain: say so, or `status` after the
        // daemon is gone shows `draining no` above profiles limited by draining.
        for pa in &mut allocation.profiles {
            if pa.limit == Limit::NotReconciling(NotReconciling::Draining) {
                pa.limit = Limit::NotReconciling(NotReconciling::Stopping);
            }
        }
    }
    if let Some(until) = o.rate_limited_until.filter(|u| *u > now) {
        rate_limited(&mut allocation, o.unfit, until);
    }
    let mut intents = Vec::new();
    let mut uids = o.free_uids.map(|u| u.iter().copied());
    let mut uids_used_up = None;
    'profiles: for pa in allocation.profiles.iter().filter(|_| o.can_start) {
        // The queued times of the profile's jobs, oldest first: runners already
        // unassigned serve the oldest, so the i-th new one serves the next.
        let mut queued: Vec<Millis> = demand
            .profiles
            .iter()
            .find(|d| d.profile == pa.profile)
            .map(|d| {
                d.jobs
                    .iter()
                    .filter_map(|id| o.jobs.iter().find(|j| j.id == *id))
                    .map(|j| j.created_at)
                    .collect()
            })
            .unwrap_or_default();
        if queued.is_empty() {
            // A scale set profile: its jobs are the ones assigned and not started.
            queued = o
                .scaleset_queued
                .get(&pa.profile)
                .cloned()
                .unwrap_or_default();
        }
        queued.sort_unstable();
        for i in 0..pa.to_start {
            let runner_ids = match uids.as_mut() {
                None => None,
                Some(free) => match free.next() {
                    Some(ids) => Some(ids),
                    None => {
                        uids_used_up = Some(
                            "every uid of runner_uids is held by an attempt not yet cleaned; \
                             more start as they are cleaned, or widen runner_uids"
                                .to_string(),
                        );
                        break 'profiles;
                    }
                },
            };
            intents.push(Intent {
                profile: pa.profile.clone(),
                queued_at: queued.get(pa.unassigned as usize + i as usize).copied(),
                runner_ids,
            });
        }
    }
    let surplus = allocation
        .profiles
        .iter()
        .flat_map(|pa| pick_surplus(mine, &pa.profile, pa.surplus_idle, |id| book.holds(id)))
        .collect();
    Plan {
        actions: Vec::new(),
        closed,
        bindings,
        intents,
        surplus,
        allocation,
        demand,
        standalone,
        uids_used_up,
    }
}

/// Queued jobs from REST minus those meant for a scale set (`runs-on: <profile>`), so
/// a mixed target neither counts them twice nor reports them as fitting no profile.
pub fn rest_jobs(jobs: &[QueuedJob], profiles: &[ScalePolicy]) -> Vec<QueuedJob> {
    jobs.iter()
        .filter(|j| {
            !profiles.iter().any(|p| {
                p.demand == DemandSource::Scaleset
                    && j.labels.iter().all(|l| l.eq_ignore_ascii_case(&p.name))
            })
        })
        .cloned()
        .collect()
}

/// Demand from a scale set's statistics: jobs assigned and not yet taken by a runner.
/// `totalAssignedJobs` counts running jobs too, and the allocator adds `min_capacity`
/// and subtracts unassigned runners itself, so busy runners come off here. Which count
/// of running jobs: the service's (`totalRunningJobs`, as of the last message) or our
/// busy runners (as of this pass); each lags the other in one direction, and the larger
/// one is never stale high, so a runner that just took or finished a job never makes
/// the pass start a second one for it.
pub fn queued_from(stats: ScaleSetSeen, our_busy: u32) -> u32 {
    stats.assigned.saturating_sub(stats.running.max(our_busy))
}

/// The REST demand with each scale set profile's added, from its statistics and the
/// busy runners among `attempts` (this target's). A profile with no statistics yet has
/// none.
pub fn scaleset_demand(
    mut rest: BTreeMap<String, u32>,
    scaleset: &BTreeMap<String, ScaleSetSeen>,
    attempts: &[Attempt],
) -> BTreeMap<String, u32> {
    for (profile, stats) in scaleset {
        let busy = attempts
            .iter()
            .filter(|a| &a.profile == profile && a.state == AttemptState::Busy)
            .count() as u32;
        rest.insert(profile.clone(), queued_from(*stats, busy));
    }
    rest
}

/// Whether the target's demand comes from REST polling: some profile polls, or there
/// is no profile (nothing to feed). A target whose profiles all use scale sets reads
/// no queued jobs at all.
pub fn needs_rest_demand(profiles: &[ScalePolicy]) -> bool {
    profiles.is_empty() || profiles.iter().any(|p| p.demand == DemandSource::Poll)
}

/// A rate limit holds the target until `until`: every profile that would otherwise
/// be limited by its demand or a ceiling is limited by it, to the second it ends, and
/// starts nothing (the allocation would otherwise show starts that cannot happen, and
/// `max_capacity` where the queue is only waiting for the limit to end).
/// A fact not yet learnt (a visibility) is the rate limit's doing too: it is what
/// keeps the fact from being read.
fn rate_limited(allocation: &mut Allocation, unfit: &BTreeMap<String, Unfit>, until: Millis) {
    let until = (until + 999) / 1000 * 1000;
    for pa in &mut allocation.profiles {
        let not_yet_known = unfit.get(&pa.profile).is_some_and(Unfit::not_yet_known);
        if pa.limit.reconciles() || not_yet_known {
            pa.limit = Limit::RateLimited(until);
            pa.to_start = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Outcome;

    const HOST: &str = "0123abcd89ef4567";

    fn host(capacity: u32) -> Host {
        Host::new(HOST.into(), "h".into(), "linux", "x86_64", capacity)
    }

    fn profile(name: &str, max: u32) -> ScalePolicy {
        let mut p = ScalePolicy::new(name, "t", HOST);
        p.labels = vec!["self-hosted".into(), name.into()];
        p.max_capacity = max;
        p
    }

    fn job(id: i64, label: &str, at: Millis) -> QueuedJob {
        QueuedJob {
            id,
            run_id: id,
            repo: "o/r".into(),
            name: format!("j{id}"),
            labels: vec!["self-hosted".into(), label.into()],
            created_at: at,
        }
    }

    struct Fixture {
        host: Host,
        profiles: Vec<ScalePolicy>,
        open: Vec<Attempt>,
        seen: BTreeMap<i64, Seen>,
        in_flight: BTreeSet<i64>,
        jobs: Vec<QueuedJob>,
        unfit: BTreeMap<String, Unfit>,
        uids: Option<Vec<(u32, u32)>>,
        surplus: HashSet<i64>,
        scaleset: BTreeMap<String, ScaleSetSeen>,
        scaleset_queued: BTreeMap<String, Vec<Millis>>,
        /// The host drains or the daemon stops (`Observed::draining`).
        draining: bool,
        rate_limited_until: Option<Millis>,
    }

    impl Fixture {
        fn new(capacity: u32, profiles: Vec<ScalePolicy>) -> Fixture {
            Fixture {
                host: host(capacity),
                profiles,
                open: Vec::new(),
                seen: BTreeMap::new(),
                in_flight: BTreeSet::new(),
                jobs: Vec::new(),
                unfit: BTreeMap::new(),
                uids: None,
                surplus: HashSet::new(),
                scaleset: BTreeMap::new(),
                scaleset_queued: BTreeMap::new(),
                draining: false,
                rate_limited_until: None,
            }
        }

        fn plan(&self, now: Millis) -> Plan {
            let o = Observed {
                target: "t",
                host: &self.host,
                profiles: &self.profiles,
                open: &self.open,
                seen: &self.seen,
                in_flight: &self.in_flight,
                mode: TargetMode::Standalone,
                draining: self.draining,
                jobs: &self.jobs,
                queue_read_at: 0,
                ended_since_read: &[],
                scaleset: &self.scaleset,
                scaleset_queued: &self.scaleset_queued,
                unfit: &self.unfit,
                can_start: true,
                rate_limited_until: self.rate_limited_until,
                free_uids: self.uids.as_deref(),
                surplus: &self.surplus,
            };
            plan(&o, &mut LaunchBook::new(), now)
        }
    }

    #[test]
    fn a_rate_limited_target_says_so_and_starts_nothing() {
        let mut paused = profile("gpu", 2);
        paused.active = false;
        let mut f = Fixture::new(10, vec![profile("linux", 1), paused]);
        f.jobs = (1..=3).map(|i| job(i, "linux", 0)).collect();
        // Without the limit, the profile's ceiling is what stops it.
        let free = f.plan(1_000);
        assert_eq!(
            free.allocation.get("linux").unwrap().limit,
            Limit::MaxCapacity
        );
        assert_eq!(free.intents.len(), 1);
        // Held until 61.2 s: limited by the rate limit, to the second it ends.
        f.rate_limited_until = Some(61_200);
        let held = f.plan(1_000);
        let linux = held.allocation.get("linux").unwrap();
        assert_eq!(linux.limit, Limit::RateLimited(62_000));
        assert_eq!((linux.to_start, held.intents.len()), (0, 0));
        assert_eq!(
            held.allocation.get("gpu").unwrap().limit,
            Limit::NotReconciling(NotReconciling::Paused),
            "a profile that would not start anyway keeps its own reason"
        );
        // A visibility the limit kept from being read is the limit's doing too.
        f.unfit.insert("linux".into(), Unfit::RepoNotYetKnown);
        let held = f.plan(1_000);
        assert_eq!(
            held.allocation.get("linux").unwrap().limit,
            Limit::RateLimited(62_000)
        );
        f.unfit.clear();
        // A hold that has ended limits nothing.
        assert_eq!(f.plan(61_200).intents.len(), 1);
    }

    fn attempt(id: i64, profile: &str, state: AttemptState) -> Attempt {
        let mut a = Attempt::new(id, profile, "t", HOST, 0);
        if state != AttemptState::Pending {
            a.recover(state, 0).unwrap();
        }
        a
    }

    #[test]
    fn a_stopping_daemon_says_so_and_a_draining_host_says_draining() {
        let mut f = Fixture::new(8, vec![profile("linux", 3)]);
        f.jobs = vec![job(1, "linux", 0)];
        f.draining = true;
        let limit = |f: &Fixture| f.plan(1_000).allocation.profiles[0].limit.to_string();
        assert_eq!(limit(&f), "not_reconciling (daemon stopping)");
        f.host.draining = true;
        assert_eq!(limit(&f), "not_reconciling (draining)");
    }

    #[test]
    fn starts_one_runner_per_queued_job_oldest_first_with_uids() {
        let mut f = Fixture::new(8, vec![profile("linux", 3)]);
        f.jobs = vec![
            job(1, "linux", 300),
            job(2, "linux", 100),
            job(3, "linux", 200),
        ];
        f.uids = Some(vec![(61000, 61000), (61001, 61001), (61002, 61002)]);
        let p = f.plan(1_000);
        type Got = (Option<Millis>, Option<(u32, u32)>);
        let got: Vec<Got> = p
            .intents
            .iter()
            .map(|i| (i.queued_at, i.runner_ids))
            .collect();
        assert_eq!(
            got,
            vec![
                (Some(100), Some((61000, 61000))),
                (Some(200), Some((61001, 61001))),
                (Some(300), Some((61002, 61002)))
            ]
        );
        // One uid short: the rest wait, and the plan says why.
        f.uids = Some(vec![(61000, 61000)]);
        let p = f.plan(1_000);
        assert_eq!(p.intents.len(), 1);
        assert!(p.uids_used_up.unwrap().contains("runner_uids"));
    }

    #[test]
    fn an_attempt_in_flight_is_not_watched_but_counts_toward_capacity() {
        let mut f = Fixture::new(8, vec![profile("linux", 2)]);
        f.jobs = vec![job(1, "linux", 0), job(2, "linux", 0)];
        // A start on a worker: pending, no pid yet. Watched, it would be orphaned.
        f.open = vec![attempt(5, "linux", AttemptState::Pending)];
        f.in_flight.insert(5);
        let p = f.plan(1_000);
        assert!(p.actions.is_empty(), "{:?}", p.actions);
        assert_eq!(p.intents.len(), 1, "one more for the second job, not two");
        // Out of flight with no process, the same attempt is what a crash left.
        f.in_flight.clear();
        let p = f.plan(1_000);
        assert!(matches!(
            p.actions[0].1[0],
            Action::Transition {
                outcome: Some(Outcome::Orphaned),
                ..
            }
        ));
    }

    #[test]
    fn unfit_profiles_and_a_held_target_start_nothing() {
        let mut f = Fixture::new(8, vec![profile("linux", 2)]);
        f.jobs = vec![job(1, "linux", 0)];
        f.unfit.insert(
            "linux".into(),
            Unfit::Held("starts held 30s after a host failure".into()),
        );
        let p = f.plan(1_000);
        assert!(p.intents.is_empty());
        assert!(
            p.allocation.profiles[0]
                .limit
                .to_string()
                .contains("starts held")
        );
    }

    #[test]
    fn scale_set_demand_counts_assigned_jobs_not_yet_running() {
        let mut f = Fixture::new(8, vec![profile("ss", 4)]);
        f.profiles[0].demand = DemandSource::Scaleset;
        f.scaleset.insert(
            "ss".into(),
            ScaleSetSeen {
                assigned: 3,
                running: 1,
            },
        );
        f.scaleset_queued.insert("ss".into(), vec![10, 20]);
        f.open = vec![attempt(1, "ss", AttemptState::Busy)];
        let p = f.plan(1_000);
        let got: Vec<Option<Millis>> = p.intents.iter().map(|i| i.queued_at).collect();
        assert_eq!(got, vec![Some(10), Some(20)]);
        assert_eq!(
            queued_from(
                ScaleSetSeen {
                    assigned: 3,
                    running: 1
                },
                2
            ),
            1
        );
    }

    #[test]
    fn queued_is_assigned_minus_the_larger_running_count() {
        let s = |assigned, running| ScaleSetSeen { assigned, running };
        assert_eq!(queued_from(s(3, 0), 0), 3);
        // A runner took a job and we saw it before the service's message came.
        assert_eq!(queued_from(s(3, 0), 1), 2);
        // Our runner finished before the JobCompleted message: the service's count holds.
        assert_eq!(queued_from(s(3, 1), 0), 2);
        assert_eq!(queued_from(s(1, 1), 2), 0);
    }

    #[test]
    fn rest_demand_only_where_a_profile_polls() {
        let mut a = ScalePolicy::new("a", "t", "h");
        assert!(needs_rest_demand(&[]));
        a.demand = DemandSource::Scaleset;
        assert!(!needs_rest_demand(std::slice::from_ref(&a)));
        let b = ScalePolicy::new("b", "t", "h");
        assert!(needs_rest_demand(&[a.clone(), b]));
        let job = |labels: &[&str]| QueuedJob {
            id: 1,
            run_id: 1,
            repo: "o/r".into(),
            name: "j".into(),
            labels: labels.iter().map(|l| l.to_string()).collect(),
            created_at: 0,
        };
        let jobs = [job(&["A"]), job(&["self-hosted", "a"])];
        assert_eq!(rest_jobs(&jobs, &[a]).len(), 1);
    }

    #[test]
    fn actions_split_where_a_worker_takes_over() {
        let acts = vec![
            Action::Transition {
                to: AttemptState::Finished,
                outcome: Some(Outcome::CompletedJob),
                reason: None,
            },
            Action::Cleanup,
            Action::MarkCleaned,
        ];
        let (head, tail) = split_at_io(acts);
        assert_eq!(head.len(), 1);
        assert_eq!(tail, vec![Action::Cleanup, Action::MarkCleaned]);
        let (head, tail) = split_at_io(vec![Action::Kill]);
        assert_eq!((head.len(), tail.len()), (1, 0));
    }
}
