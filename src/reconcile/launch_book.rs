//! The launch book (coordinated pools): the launches a coordinator placed on this
//! host, shared by the coordinator link and the target loops (the daemon wraps it in
//! a `Mutex`), and the mode each target runs in. Pure: time is the host's clock,
//! passed in as `now`.
//!
//! - A launch is accepted only when the allocator grants one more runner than the
//!   open launches already take, so a coordinator can at worst fill a host to the
//!   ceilings its owner set: the allocator is asked twice, with the open launches as
//!   the directed profiles' demand and with one more for the launch's profile, and
//!   the host's total `to_start` must grow. Growing only this profile's share would
//!   not do: an earlier profile in the allocator's order could take host capacity
//!   an already accepted launch of a later profile counts on. So every accepted
//!   launch keeps its runner: the next pass's allocation starts one for each open
//!   launch without a runner (while the other profiles' demand stays as it was).
//! - An unassigned runner of the profile that no launch holds (idle first, the
//!   longest idle; then starting or pending, the oldest) serves a new launch instead
//!   of another being started.
//! - A launch closes when its runner leaves the unassigned states, when it is
//!   cancelled, or when it expires (`ttl_secs` measured from acceptance on this
//!   host's clock; the coordinator's `expires_at` is never compared with ours). A
//!   lost link drops every open launch.
//! - Open launches per profile are that profile's directed demand.

use super::allocate::{Counts, HostAllocator, Limit};
use super::watch::entered_at;
use crate::domain::profile::Mode;
use crate::domain::{Attempt, AttemptState, Host, ScalePolicy};
use crate::timefmt::Millis;
use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};

// The store keeps the mode, so its type is the domain's.
pub use crate::domain::status::TargetMode;

/// Lease ids remembered to refuse duplicates; the oldest is forgotten first. A lease
/// lives at most [`MAX_TTL_SECS`], so this covers far more than any live lease.
pub const SEEN_LEASES: usize = 4096;
/// A longer time to live is cut to this: what we read from the network is bounded.
pub const MAX_TTL_SECS: u64 = 3600;
/// Longest lease id, job key, target or profile name accepted.
pub const MAX_FIELD: usize = 200;

/// The coordinator's instruction "start one runner of `profile` for `job_key`".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    pub target: String,
    pub profile: String,
    pub job_key: String,
    pub lease_id: String,
    pub ttl_secs: u64,
}

/// Why a launch was refused: the protocol's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The lease id was seen before, or its time to live is 0.
    Stale,
    Draining,
    Unfit,
    UnknownProfile,
    Disabled,
    NotCoordinated,
    MaxCapacity,
    HostCapacity,
    Other,
}

impl Refusal {
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Stale => "stale",
            Refusal::Draining => "draining",
            Refusal::Unfit => "unfit",
            Refusal::UnknownProfile => "unknown_profile",
            Refusal::Disabled => "disabled",
            Refusal::NotCoordinated => "not_coordinated",
            Refusal::MaxCapacity => "max_capacity",
            Refusal::HostCapacity => "host_capacity",
            Refusal::Other => "other",
        }
    }
}

/// How an accepted launch will be served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accepted {
    /// By this runner of ours, already up and held by no other launch: record the
    /// lease on the attempt; start nothing.
    ServedBy { attempt: i64 },
    /// By a new runner: the loop starts it and [`LaunchBook::bind_next`]s it.
    StartRunner,
}

/// A launch the book holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenLaunch {
    pub launch: Launch,
    pub accepted_at: Millis,
    /// On this host's clock.
    pub expires_at: Millis,
    /// The attempt serving it, once there is one.
    pub attempt: Option<i64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// Its runner took a job.
    Taken,
    /// Its runner ended (or vanished from our attempts) without taking one.
    Ended,
    Cancelled,
    Expired,
    LinkLost,
}

/// A launch the book no longer holds, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Closed {
    pub launch: OpenLaunch,
    pub why: CloseReason,
}

/// The coordinator link as the host last saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    Up { since: Millis },
    Down { since: Millis },
}

/// The mode of one target. `covered`: the last `hello_ack` listed the target (pass
/// `true` before any ack, so that a starting host waits for its coordinator through
/// the grace period instead of starting surplus runners).
pub fn target_mode(
    configured: bool,
    link: Link,
    covered: bool,
    now: Millis,
    grace: Millis,
) -> TargetMode {
    match (configured, link, covered) {
        (false, _, _) => TargetMode::Standalone,
        (true, Link::Down { since }, _) if now.saturating_sub(since) >= grace => {
            TargetMode::Fallback
        }
        (true, _, true) => TargetMode::Coordinated,
        (true, _, false) => TargetMode::Standalone,
    }
}

/// A profile is directed while it carries the host's pool label and its target is
/// coordinated.
pub fn is_directed(host: &Host, policy: &ScalePolicy, mode: TargetMode) -> bool {
    let pool = host.pool_label();
    mode == TargetMode::Coordinated
        && policy
            .labels
            .iter()
            .any(|l| crate::domain::labels::same_label(l, &pool))
}

/// A coordinated target whose profiles on this host are all directed reads no demand
/// of its own: its jobs come as the coordinator's launches.
pub fn all_directed(host: &Host, profiles: &[ScalePolicy], mode: TargetMode) -> bool {
    mode == TargetMode::Coordinated
        && profiles
            .iter()
            .filter(|p| p.host_id == host.id)
            .all(|p| is_directed(host, p, mode))
}

/// What an offer is judged against: the pass's view of the host.
#[derive(Debug, Clone, Copy)]
pub struct OfferCtx<'a> {
    /// This host, its profiles, attempt counts and unfit profiles.
    pub alloc: HostAllocator<'a>,
    /// Demand of the profiles that are not directed (directed ones: the book's).
    pub demand: &'a BTreeMap<String, u32>,
    /// Mode per target name; a target not listed is standalone.
    pub modes: &'a BTreeMap<String, TargetMode>,
    /// Our attempts (live ones at least), to find a runner that can serve.
    pub attempts: &'a [Attempt],
}

impl OfferCtx<'_> {
    fn mode(&self, target: &str) -> TargetMode {
        self.modes
            .get(target)
            .copied()
            .unwrap_or(TargetMode::Standalone)
    }
}

#[derive(Debug, Clone, Default)]
pub struct LaunchBook {
    open: Vec<OpenLaunch>,
    seen_order: VecDeque<String>,
    seen: HashSet<String>,
    closed: Vec<Closed>,
    /// Attempts a worker is removing (handed over with a deregistration or cleanup):
    /// whatever the store still says of them, they serve no launch.
    leaving: BTreeSet<i64>,
}

impl LaunchBook {
    pub fn new() -> LaunchBook {
        LaunchBook::default()
    }

    /// Accepts or refuses a launch. Expired launches are closed first so that they
    /// take no capacity.
    pub fn offer(
        &mut self,
        launch: Launch,
        ctx: &OfferCtx,
        now: Millis,
    ) -> Result<Accepted, Refusal> {
        self.expire(now);
        let fields = [
            &launch.lease_id,
            &launch.job_key,
            &launch.target,
            &launch.profile,
        ];
        if launch.lease_id.is_empty() || fields.iter().any(|f| f.len() > MAX_FIELD) {
            return Err(Refusal::Other);
        }
        if !self.remember(&launch.lease_id) || launch.ttl_secs == 0 {
            return Err(Refusal::Stale);
        }
        let host = ctx.alloc.host;
        // A profile of another host or another target is one this host did not
        // configure: the coordinator cannot make it serve it.
        let Some(policy) = ctx.alloc.policies.iter().find(|p| {
            p.name == launch.profile && p.target == launch.target && p.host_id == host.id
        }) else {
            return Err(Refusal::UnknownProfile);
        };
        if !is_directed(host, policy, ctx.mode(&launch.target)) {
            return Err(Refusal::NotCoordinated);
        }
        if !policy.active || policy.mode == Mode::Monitor {
            return Err(Refusal::Disabled);
        }
        if host.draining {
            return Err(Refusal::Draining);
        }
        if ctx.alloc.unfit.contains_key(&policy.name) {
            return Err(Refusal::Unfit);
        }
        let ttl = launch.ttl_secs.min(MAX_TTL_SECS) as Millis * 1000;
        let mut open = OpenLaunch {
            launch,
            accepted_at: now,
            expires_at: now.saturating_add(ttl),
            attempt: None,
        };
        if let Some(id) = self.free_runner(policy, ctx.attempts) {
            open.attempt = Some(id);
            self.open.push(open);
            return Ok(Accepted::ServedBy { attempt: id });
        }
        self.grants_one_more(policy, ctx)?;
        self.open.push(open);
        Ok(Accepted::StartRunner)
    }

    /// Records a lease id; `false` if it was seen before.
    fn remember(&mut self, lease: &str) -> bool {
        if !self.seen.insert(lease.to_string()) {
            return false;
        }
        self.seen_order.push_back(lease.to_string());
        while self.seen_order.len() > SEEN_LEASES {
            if let Some(old) = self.seen_order.pop_front() {
                self.seen.remove(&old);
            }
        }
        true
    }

    /// A worker is removing `attempt`: until it reports (`left`), the attempt serves
    /// no launch and counts as leaving, not as a runner that can take a job. The store
    /// may still show it idle: the worker writes its end only once GitHub answers.
    pub fn leaving(&mut self, attempt: i64) {
        self.leaving.insert(attempt);
    }

    /// The worker removing `attempt` reported.
    pub fn left(&mut self, attempt: i64) {
        self.leaving.remove(&attempt);
    }

    /// Whether a worker is removing `attempt`.
    pub fn is_leaving(&self, attempt: i64) -> bool {
        self.leaving.contains(&attempt)
    }

    /// The allocator's counts of `attempts`, those being removed counted as leaving.
    pub fn counts(&self, attempts: &[Attempt]) -> BTreeMap<String, Counts> {
        Counts::with_leaving(attempts, &self.leaving)
    }

    /// An unassigned runner of the profile no launch holds: the longest idle, else
    /// the oldest starting or pending one.
    fn free_runner(&self, policy: &ScalePolicy, attempts: &[Attempt]) -> Option<i64> {
        attempts
            .iter()
            .filter(|a| {
                a.profile == policy.name
                    && a.target == policy.target
                    && !a.cleaned
                    && a.state.is_unassigned()
                    && !self.holds(a.id)
                    && !self.leaving.contains(&a.id)
            })
            .min_by_key(|a| {
                let idle = a.state == AttemptState::Idle;
                let since = if idle {
                    entered_at(a, AttemptState::Idle)
                } else {
                    a.created_at
                };
                (!idle, since, a.id)
            })
            .map(|a| a.id)
    }

    /// Slots of the host promised to accepted launches that `ctx`'s allocation
    /// cannot start: launches of another target's profiles (their own loop starts
    /// them) and of profiles that may not start now (held, paused, unfit). Each still
    /// needs its slot when its loop or its hold comes round, so no other start and no
    /// other launch may take it.
    pub fn reserved(&self, ctx: &OfferCtx) -> u32 {
        let waiting = self.open.iter().filter(|o| o.attempt.is_none());
        waiting
            .filter(|o| {
                !ctx.alloc.policies.iter().any(|p| {
                    p.name == o.launch.profile
                        && p.target == o.launch.target
                        && ctx.alloc.may_start(p)
                })
            })
            .count() as u32
    }

    /// The pass's allocation: this target's demand (`demand`), with what the book
    /// promised elsewhere reserved.
    pub fn allocate(&self, ctx: &OfferCtx) -> super::allocate::Allocation {
        ctx.alloc
            .allocate_reserving(&self.demand(ctx), self.reserved(ctx))
    }

    /// Whether the allocator, asked for one launch more than are open, starts one
    /// runner more on the host (see the module documentation).
    fn grants_one_more(&self, policy: &ScalePolicy, ctx: &OfferCtx) -> Result<(), Refusal> {
        let mut demand = self.demand(ctx);
        let reserved = self.reserved(ctx);
        let base = ctx.alloc.allocate_reserving(&demand, reserved);
        *demand.entry(policy.name.clone()).or_default() += 1;
        let plus = ctx.alloc.allocate_reserving(&demand, reserved);
        if plus.total_to_start() > base.total_to_start() {
            return Ok(());
        }
        Err(match plus.get(&policy.name).map(|p| &p.limit) {
            Some(Limit::MaxCapacity) => Refusal::MaxCapacity,
            Some(Limit::HostCapacity) => Refusal::HostCapacity,
            // The profile itself had room, but only by taking it from another.
            Some(Limit::Demand | Limit::MinCapacity) => Refusal::HostCapacity,
            _ => Refusal::Other,
        })
    }

    /// The demand a pass allocates for: `ctx.demand` for profiles that are not
    /// directed, the open launches for those that are.
    pub fn demand(&self, ctx: &OfferCtx) -> BTreeMap<String, u32> {
        let mut demand = ctx.demand.clone();
        let open = self.open_per_profile();
        for p in ctx.alloc.policies {
            if is_directed(ctx.alloc.host, p, ctx.mode(&p.target)) {
                demand.insert(p.name.clone(), open.get(&p.name).copied().unwrap_or(0));
            }
        }
        demand
    }

    /// Binds launches still without a runner to free runners of their profile
    /// (launches cancelled or expired leave theirs free; `min_capacity` starts
    /// some). The loop calls this before it allocates, so that a free runner is not
    /// counted as covering demand while a launch waits. Returns (lease id, attempt)
    /// pairs to record on the attempts.
    pub fn bind_free(
        &mut self,
        policies: &[ScalePolicy],
        attempts: &[Attempt],
    ) -> Vec<(String, i64)> {
        let mut out = Vec::new();
        for i in 0..self.open.len() {
            if self.open[i].attempt.is_some() {
                continue;
            }
            let l = &self.open[i].launch;
            let Some(policy) = policies
                .iter()
                .find(|p| p.name == l.profile && p.target == l.target)
            else {
                continue;
            };
            if let Some(id) = self.free_runner(policy, attempts) {
                self.open[i].attempt = Some(id);
                out.push((self.open[i].launch.lease_id.clone(), id));
            }
        }
        out
    }

    /// The coordinator cancelled a lease. `None` if the book does not hold it.
    pub fn cancel(&mut self, lease_id: &str) -> Option<Closed> {
        let i = self
            .open
            .iter()
            .position(|o| o.launch.lease_id == lease_id)?;
        Some(self.close(i, CloseReason::Cancelled))
    }

    /// The link is gone: every open launch is dropped (the coordinator re-places
    /// them). Lease ids stay remembered.
    pub fn link_lost(&mut self) -> Vec<Closed> {
        let mut out = Vec::new();
        while !self.open.is_empty() {
            out.push(self.close(0, CloseReason::LinkLost));
        }
        out
    }

    /// Closes launches whose runner left the unassigned states (or is no longer
    /// among `attempts`) and launches past their expiry. `attempts` must hold every
    /// attempt a launch may be bound to.
    pub fn observe(&mut self, attempts: &[Attempt], now: Millis) -> Vec<Closed> {
        let mut out = self.expire(now);
        let mut i = 0;
        while i < self.open.len() {
            let why =
                self.open[i]
                    .attempt
                    .and_then(|id| match attempts.iter().find(|a| a.id == id) {
                        Some(a) if a.state.is_unassigned() && !a.cleaned => None,
                        Some(a) if a.state == AttemptState::Busy => Some(CloseReason::Taken),
                        _ => Some(CloseReason::Ended),
                    });
            match why {
                Some(w) => out.push(self.close(i, w)),
                None => i += 1,
            }
        }
        out
    }

    fn expire(&mut self, now: Millis) -> Vec<Closed> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < self.open.len() {
            if now >= self.open[i].expires_at {
                out.push(self.close(i, CloseReason::Expired));
            } else {
                i += 1;
            }
        }
        out
    }

    fn close(&mut self, i: usize, why: CloseReason) -> Closed {
        let c = Closed {
            launch: self.open.remove(i),
            why,
        };
        self.closed.push(c.clone());
        c
    }

    /// Every closing since the last call, in order (expiries during `offer`
    /// included), for logs and reports.
    pub fn drain_closed(&mut self) -> Vec<Closed> {
        std::mem::take(&mut self.closed)
    }

    /// Binds the oldest launch of the profile still without a runner to `attempt`
    /// (just started for it). Returns its lease id, to record on the attempt.
    pub fn bind_next(&mut self, target: &str, profile: &str, attempt: i64) -> Option<String> {
        if self.holds(attempt) {
            return None;
        }
        let o = self.open.iter_mut().find(|o| {
            o.attempt.is_none() && o.launch.profile == profile && o.launch.target == target
        })?;
        o.attempt = Some(attempt);
        Some(o.launch.lease_id.clone())
    }

    /// Whether an open launch holds this attempt (never scale it down then).
    pub fn holds(&self, attempt: i64) -> bool {
        self.open.iter().any(|o| o.attempt == Some(attempt))
    }

    /// Open launches per profile: the directed demand.
    pub fn open_per_profile(&self) -> BTreeMap<String, u32> {
        let mut out = BTreeMap::new();
        for o in &self.open {
            *out.entry(o.launch.profile.clone()).or_default() += 1;
        }
        out
    }

    /// Open launches of the profile that still wait for a runner.
    pub fn unbound(&self, profile: &str) -> u32 {
        self.open
            .iter()
            .filter(|o| o.attempt.is_none() && o.launch.profile == profile)
            .count() as u32
    }

    pub fn open(&self) -> &[OpenLaunch] {
        &self.open
    }
}
