//! A target's pass as a pure plan. The loop gathers one [`Observed`] snapshot (the host,
//! its profiles and open attempts, what each live attempt showed, the queue, the scale
//! sets' statistics, what keeps a profile from starting, the target's mode), and
//! [`plan`] returns everything the pass does: the actions for each attempt, the launch
//! book's bindings, the runners to start with their queue times and uids, the rows
//! `status` shows, and when to look again. The loop only gathers, plans, records and
//! acts; nothing here does I/O or reads a clock.

use super::allocate::{Allocation, HostAllocator, pick_surplus};
use super::demand::{self, Demand};
use super::launch_book::{Closed, LaunchBook, OfferCtx, TargetMode};
use super::lines::RunnerEvent;
use super::points::Room;
use super::unfit::Unfit;
use super::watch::{self, Action, Observation, ProcessStatus, Registration, Timeouts, Want};
use crate::domain::{
    Attempt, AttemptState, DemandSource, Host, Limit, NotReconciling, QueuedJob, ReasonKind,
    RegisteredRunner, ScalePolicy,
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
    /// GitHub refuses the target's credential (401) since then: the profiles say so
    /// (`credentials_refused`), never `rate_limited`, whatever the backoff's time.
    pub credentials_refused_since: Option<Millis>,
    /// How many REST JIT configs GitHub's per-minute points leave room for now
    /// (`reconcile::points`); `None`: not counted. Starts beyond it wait, oldest job
    /// first; scale set profiles' JIT configs go to another service and never wait.
    pub jit_room: Option<Room>,
    /// With per-attempt uids: every usable uid of the range no open attempt holds, in
    /// the order to hand them out. `None` when runners do not get uids of their own.
    pub free_uids: Option<&'a [(u32, u32)]>,
    /// Attempts the last pass judged surplus (idle beyond demand).
    pub surplus: &'a HashSet<i64>,
    /// GitHub's runner list, when a read just brought it.
    pub runners: Option<&'a [RegisteredRunner]>,
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
    /// Registrations under this host's runner names that no open attempt explains,
    /// from the runner list this pass saw: to delete.
    pub orphans: Vec<RegisteredRunner>,
    /// How this pass's starting runners turned out, for the profiles' crash holds.
    pub starts_seen: StartsSeen,
}

/// What this pass saw of its runners' starts, per profile: the runners that crashed
/// before they listened (`crashed_at_start`), with what says why, and the profiles
/// one of whose runners reached `Listening for Jobs` (or took a job straight away).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StartsSeen {
    pub crashed: Vec<(String, String)>,
    pub listened: BTreeSet<String>,
}

impl StartsSeen {
    /// From each attempt's actions this pass (`watch`'s), and its last error line.
    fn of(
        mine: &[Attempt],
        actions: &[(i64, Vec<Action>)],
        seen: &BTreeMap<i64, Seen>,
    ) -> StartsSeen {
        let mut out = StartsSeen::default();
        for (id, acts) in actions {
            let Some(a) = mine.iter().find(|a| a.id == *id) else {
                continue;
            };
            for act in acts {
                let Action::Transition { to, reason, .. } = act else {
                    continue;
                };
                if matches!(to, AttemptState::Idle | AttemptState::Busy)
                    && matches!(a.state, AttemptState::Pending | AttemptState::Starting)
                {
                    out.listened.insert(a.profile.clone());
                }
                if let Some(r) = reason
                    .as_ref()
                    .filter(|r| r.kind() == ReasonKind::CrashedAtStart)
                {
                    let said = seen.get(id).and_then(|s| {
                        s.events.iter().rev().find_map(|e| match e {
                            RunnerEvent::Error { line } => Some(line.as_str()),
                            _ => None,
                        })
                    });
                    let why = match said {
                        Some(line) => format!("runner {} {r}: {line}", a.runner_name),
                        None => format!("runner {} {r}", a.runner_name),
                    };
                    out.crashed.push((a.profile.clone(), why));
                }
            }
        }
        out
    }
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

/// The host's open attempts a pass plans from: this target's as the pass gathered
/// them (the same read `seen` came from, and the copies the pass acts on), the other
/// targets' as `now_read` shows them under the allocation lock (their loops may have
/// recorded starts since). Only this loop and the workers it handed attempts to write
/// this target's attempts, so its own read is as new as any.
pub fn host_view(gathered: &[Attempt], now_read: Vec<Attempt>, target: &str) -> Vec<Attempt> {
    let mut open: Vec<Attempt> = now_read
        .into_iter()
        .filter(|a| a.target != target)
        .collect();
    open.extend(gathered.iter().filter(|a| a.target == target).cloned());
    open.sort_by_key(|a| a.id);
    open
}

/// The pass's decisions, on `book` (the host's launch book, locked by the caller).
pub fn plan(o: &Observed, book: &mut LaunchBook, now: Millis) -> Plan {
    let open = as_the_loop_knows(o.open, o.in_flight, book);
    let o = &Observed { open: &open, ..*o };
    let mine: Vec<Attempt> = o
        .open
        .iter()
        .filter(|a| a.target == o.target)
        .cloned()
        .collect();
    let starts = plan_starts(o, &mine, book, now);
    let actions = plan_watch(o, &mine, &starts.surplus, now);
    let starts_seen = StartsSeen::of(&mine, &actions, o.seen);
    let orphans = o.runners.map_or_else(Vec::new, |list| {
        watch::unexplained_registrations(&o.host.id, list, o.open)
            .into_iter()
            .cloned()
            .collect()
    });
    Plan {
        actions,
        orphans,
        starts_seen,
        ..starts
    }
}

/// The open attempts as the loop knows them. One a worker holds is the worker's
/// until it reports: an end a starting worker already wrote (a start that failed) is
/// not the pass's to count yet, so the attempt still holds its slot and its job as
/// an unassigned start; else a pass in between would start a second runner for the
/// job before the failure's hold is in place. One a worker is removing (the book's
/// `leaving`) stays as the store shows it: it is going, and serves nothing.
fn as_the_loop_knows(
    open: &[Attempt],
    in_flight: &BTreeSet<i64>,
    book: &LaunchBook,
) -> Vec<Attempt> {
    open.iter()
        .map(|a| {
            if in_flight.contains(&a.id) && !a.state.is_live() && !book.is_leaving(a.id) {
                let mut a = a.clone();
                a.state = AttemptState::Starting;
                a
            } else {
                a.clone()
            }
        })
        .collect()
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
        let timeouts = timeouts_for(policy);
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
    timeouts_for(profiles.iter().find(|p| p.name == profile))
}

/// A profile's timeouts; a profile removed under live runners has the defaults (its
/// runners are drained).
fn timeouts_for(policy: Option<&ScalePolicy>) -> Timeouts {
    match policy {
        Some(p) => Timeouts::of(p, STOP_GRACE),
        None => Timeouts {
            bootstrap: (crate::domain::profile::DEFAULT_BOOTSTRAP_TIMEOUT_SECS as Millis)
                .saturating_mul(1000),
            idle: 0,
            job: None,
            stop_grace: STOP_GRACE,
        },
    }
}

/// Demand, the launch book, allocation, intents and surplus.
fn plan_starts(o: &Observed, mine: &[Attempt], book: &mut LaunchBook, now: Millis) -> Plan {
    let counts = book.counts(o.open);
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
    let mut allocation = book.allocate(&ctx);
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
        held(
            &mut allocation,
            o.unfit,
            Limit::RateLimited((until + 999) / 1000 * 1000),
        );
    } else if let Some(since) = o.credentials_refused_since {
        held(
            &mut allocation,
            o.unfit,
            Limit::CredentialsRefused(since / 1000 * 1000),
        );
    }
    let (mut intents, uids_used_up) = intents(o, &allocation, &demand);
    if let Some(room) = o.jit_room {
        pace_starts(&mut intents, &mut allocation, o.profiles, room);
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
        orphans: Vec::new(),
        starts_seen: StartsSeen::default(),
    }
}

/// One intent per runner the allocation starts (none when starts may not go now),
/// each for the next job its profile waits on, with a uid range when runners get
/// their own; and why no more started when the uids ran out.
fn intents(
    o: &Observed,
    allocation: &Allocation,
    demand: &Demand,
) -> (Vec<Intent>, Option<String>) {
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
                            "every uid of runner_uids is held by an attempt whose processes or \
                             leftovers are not yet gone; more start as they are cleaned, \
                             or widen runner_uids"
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
    (intents, uids_used_up)
}

/// Keeps the REST starts GitHub's per-minute points have room for, those for the
/// oldest jobs first (an intent for no known job last); the profiles whose starts wait
/// are `paced`, with how many wait and when the next fits.
fn pace_starts(
    intents: &mut Vec<Intent>,
    allocation: &mut Allocation,
    profiles: &[ScalePolicy],
    room: Room,
) {
    let rest = |i: &Intent| {
        profiles
            .iter()
            .any(|p| p.name == i.profile && p.demand != DemandSource::Scaleset)
    };
    let mut order: Vec<usize> = (0..intents.len()).filter(|i| rest(&intents[*i])).collect();
    if order.len() <= room.fits as usize {
        return;
    }
    order.sort_by_key(|i| (intents[*i].queued_at.is_none(), intents[*i].queued_at, *i));
    let wait: BTreeSet<usize> = order.into_iter().skip(room.fits as usize).collect();
    let mut waiting: BTreeMap<String, u32> = BTreeMap::new();
    let mut kept = Vec::with_capacity(intents.len() - wait.len());
    for (i, intent) in std::mem::take(intents).into_iter().enumerate() {
        if wait.contains(&i) {
            *waiting.entry(intent.profile).or_default() += 1;
        } else {
            kept.push(intent);
        }
    }
    *intents = kept;
    for pa in &mut allocation.profiles {
        if let Some(n) = waiting.get(&pa.profile) {
            pa.to_start -= n;
            pa.limit = Limit::Paced {
                waiting: *n,
                next: room.next_at,
            };
        }
    }
}

/// Queued jobs from REST minus those meant for a scale set (`runs-on: <profile>`), so
/// a mixed target neither counts them twice nor reports them as fitting no profile.
pub fn rest_jobs(jobs: &[QueuedJob], profiles: &[ScalePolicy]) -> Vec<QueuedJob> {
    jobs.iter()
        .filter(|j| {
            !profiles.iter().any(|p| {
                p.demand == DemandSource::Scaleset
                    && j.labels
                        .iter()
                        .all(|l| crate::domain::labels::same_label(l, &p.name))
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

/// A rate limit (to the second it ends) or a refused credential (since the second it
/// was first refused) holds the target: every profile that would otherwise be limited
/// by its demand or a ceiling is limited by it, and starts nothing (the allocation
/// would otherwise show starts that cannot happen, and `max_capacity` where the queue
/// is only waiting for the hold to end). A fact not yet learnt (a visibility) is the
/// hold's doing too: it is what keeps the fact from being read.
fn held(allocation: &mut Allocation, unfit: &BTreeMap<String, Unfit>, limit: Limit) {
    for pa in &mut allocation.profiles {
        let not_yet_known = unfit.get(&pa.profile).is_some_and(Unfit::not_yet_known);
        if pa.limit.reconciles() || not_yet_known {
            pa.limit = limit.clone();
            pa.to_start = 0;
        }
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
