//! Allocation (`HostAllocator`): how many runners each profile of this host starts
//! this pass, which idle runners are surplus, and the limiting factor that says why a
//! job waits.
//!
//! For each profile, in a stable order (name, then target):
//! `to_start = clamp(demand - unassigned, 0, max_capacity - live_of_profile, capacity - live_on_host)`
//! where `demand = queued + min_capacity`. Host capacity is shared: a profile earlier
//! in the order takes first, and what it starts counts as live for the next.

use super::unfit::Unfit;
use super::watch::entered_at;
use crate::domain::profile::Mode;
use crate::domain::{Attempt, AttemptState, Host, ScalePolicy};
use std::collections::{BTreeMap, BTreeSet};

// The store keeps the limiting factor, so its type is the domain's.
pub use crate::domain::status::{Limit, NotReconciling};

/// Our attempts of one profile by state: the allocator's view of them, and `top`'s.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub pending: u32,
    pub starting: u32,
    pub idle: u32,
    pub busy: u32,
    /// Unassigned runners a worker is removing (a deregistration in flight): they
    /// hold capacity, and take no job the allocator could count on.
    pub leaving: u32,
}

impl Counts {
    /// Runners not yet listening for a job (`pending` and `starting`).
    pub fn not_listening(&self) -> u32 {
        self.pending + self.starting
    }

    /// Runners that can still take a job.
    pub fn unassigned(&self) -> u32 {
        self.not_listening() + self.idle
    }

    /// Runners that count toward capacity.
    pub fn live(&self) -> u32 {
        self.unassigned() + self.busy + self.leaving
    }

    /// Counts per profile name, from attempts in any state (ended ones count nothing).
    pub fn of(attempts: &[Attempt]) -> BTreeMap<String, Counts> {
        Counts::with_leaving(attempts, &BTreeSet::new())
    }

    /// As `of`, with the unassigned attempts among `leaving` counted as leaving.
    pub fn with_leaving(attempts: &[Attempt], leaving: &BTreeSet<i64>) -> BTreeMap<String, Counts> {
        let mut out: BTreeMap<String, Counts> = BTreeMap::new();
        for a in attempts {
            let c = out.entry(a.profile.clone()).or_default();
            match a.state {
                s if s.is_unassigned() && leaving.contains(&a.id) => c.leaving += 1,
                AttemptState::Pending => c.pending += 1,
                AttemptState::Starting => c.starting += 1,
                AttemptState::Idle => c.idle += 1,
                AttemptState::Busy => c.busy += 1,
                _ => {}
            }
        }
        out
    }
}

/// One profile's share of a pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileAllocation {
    pub profile: String,
    pub target: String,
    /// Queued jobs counted toward the profile (or, when directed, open launches).
    pub queued: u32,
    /// `queued + min_capacity`.
    pub demand: u32,
    pub unassigned: u32,
    pub live: u32,
    pub idle: u32,
    pub to_start: u32,
    /// Idle runners beyond what demand needs: candidates for scale-down once idle
    /// past `idle_timeout` (all idle runners when paused, draining or monitor-only).
    pub surplus_idle: u32,
    pub limit: Limit,
}

/// A pass's allocation for the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocation {
    /// Every profile given, in the allocator's order.
    pub profiles: Vec<ProfileAllocation>,
    pub capacity: u32,
    /// Live runners on the host before this pass starts any.
    pub live_on_host: u32,
}

impl Allocation {
    pub fn get(&self, profile: &str) -> Option<&ProfileAllocation> {
        self.profiles.iter().find(|p| p.profile == profile)
    }

    pub fn to_start(&self, profile: &str) -> u32 {
        self.get(profile).map_or(0, |p| p.to_start)
    }

    /// Runners started this pass, all profiles.
    pub fn total_to_start(&self) -> u32 {
        self.profiles.iter().map(|p| p.to_start).sum()
    }
}

/// The allocator's inputs that do not change within a pass.
#[derive(Debug, Clone, Copy)]
pub struct HostAllocator<'a> {
    pub host: &'a Host,
    /// Profiles to allocate for (this host's; others are reported `foreign_host`).
    pub policies: &'a [ScalePolicy],
    /// Our attempts per profile, every profile of the host included (also ones not in
    /// `policies`, e.g. removed while their runners live): all of it is host load.
    pub counts: &'a BTreeMap<String, Counts>,
    /// Profiles that cannot start runners now, with the reason.
    pub unfit: &'a BTreeMap<String, Unfit>,
}

impl HostAllocator<'_> {
    /// `demand`: queued jobs (or open launches) per profile name; missing = 0.
    pub fn allocate(&self, demand: &BTreeMap<String, u32>) -> Allocation {
        self.allocate_reserving(demand, 0)
    }

    /// As `allocate`, with `reserved` slots of the host already promised (accepted
    /// launches this allocation cannot start: `LaunchBook::reserved`).
    pub fn allocate_reserving(&self, demand: &BTreeMap<String, u32>, reserved: u32) -> Allocation {
        let live_on_host: u32 = self.counts.values().map(Counts::live).sum();
        let mut host_live = live_on_host.saturating_add(reserved);
        let mut order: Vec<&ScalePolicy> = self.policies.iter().collect();
        order.sort_by(|a, b| (&a.name, &a.target).cmp(&(&b.name, &b.target)));
        let mut profiles = Vec::with_capacity(order.len());
        for p in order {
            let c = self.counts.get(&p.name).copied().unwrap_or_default();
            let queued = demand.get(&p.name).copied().unwrap_or(0);
            let want = queued.saturating_add(p.min_capacity);
            let mut pa = ProfileAllocation {
                profile: p.name.clone(),
                target: p.target.clone(),
                queued,
                demand: want,
                unassigned: c.unassigned(),
                live: c.live(),
                idle: c.idle,
                to_start: 0,
                surplus_idle: c.idle,
                limit: Limit::Demand,
            };
            if let Some(limit) = self.not_reconciling(p) {
                if limit == Limit::ForeignHost {
                    pa.surplus_idle = 0;
                }
                if let Limit::NotReconciling(NotReconciling::Unfit(_)) = limit {
                    // Runners already up still serve jobs; only starting is blocked.
                    pa.surplus_idle = c.idle.min(c.unassigned().saturating_sub(want));
                }
                pa.limit = limit;
                profiles.push(pa);
                continue;
            }
            let need = want.saturating_sub(c.unassigned());
            let room_profile = p.max_capacity.saturating_sub(c.live());
            let room_host = self.host.capacity.saturating_sub(host_live);
            pa.to_start = need.min(room_profile).min(room_host);
            pa.surplus_idle = c.idle.min(c.unassigned().saturating_sub(want));
            pa.limit = if pa.to_start == need {
                if p.min_capacity > queued {
                    Limit::MinCapacity
                } else {
                    Limit::Demand
                }
            } else if room_profile <= room_host {
                // When both ceilings bind equally the profile's own is the one its
                // owner can act on first.
                Limit::MaxCapacity
            } else {
                Limit::HostCapacity
            };
            host_live += pa.to_start;
            profiles.push(pa);
        }
        Allocation {
            profiles,
            capacity: self.host.capacity,
            live_on_host,
        }
    }

    /// Whether `p` is one this allocation may start runners for.
    pub fn may_start(&self, p: &ScalePolicy) -> bool {
        self.policies
            .iter()
            .any(|q| q.name == p.name && q.target == p.target)
            && self.not_reconciling(p).is_none()
    }

    fn not_reconciling(&self, p: &ScalePolicy) -> Option<Limit> {
        if p.host_id != self.host.id {
            return Some(Limit::ForeignHost);
        }
        if !p.active {
            return Some(Limit::NotReconciling(NotReconciling::Paused));
        }
        if self.host.draining {
            return Some(Limit::NotReconciling(NotReconciling::Draining));
        }
        if let Some(why) = self.unfit.get(&p.name) {
            return Some(Limit::NotReconciling(NotReconciling::Unfit(
                why.to_string(),
            )));
        }
        if p.mode == Mode::Monitor {
            return Some(Limit::MonitorOnly);
        }
        None
    }
}

/// [`HostAllocator::allocate`] with no profile unfit.
pub fn allocate(
    host: &Host,
    policies: &[ScalePolicy],
    counts: &BTreeMap<String, Counts>,
    demand: &BTreeMap<String, u32>,
) -> Allocation {
    let unfit = BTreeMap::new();
    HostAllocator {
        host,
        policies,
        counts,
        unfit: &unfit,
    }
    .allocate(demand)
}

/// The `n` idle attempts of `profile` to scale down: the longest idle first (they
/// reach `idle_timeout` first), never one a launch holds (`held`).
pub fn pick_surplus(
    attempts: &[Attempt],
    profile: &str,
    n: u32,
    held: impl Fn(i64) -> bool,
) -> Vec<i64> {
    let mut idle: Vec<&Attempt> = attempts
        .iter()
        .filter(|a| a.profile == profile && a.state == AttemptState::Idle && !held(a.id))
        .collect();
    idle.sort_by_key(|a| (entered_at(a, AttemptState::Idle), a.id));
    idle.into_iter().take(n as usize).map(|a| a.id).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOST: &str = "0123abcd89ef4567";

    pub(crate) fn host(capacity: u32) -> Host {
        Host::new(HOST.into(), "h".into(), "linux", "x86_64", capacity)
    }

    fn prof(name: &str, min: u32, max: u32) -> ScalePolicy {
        let mut p = ScalePolicy::new(name, "octo", HOST);
        p.labels = vec!["self-hosted".into()];
        p.min_capacity = min;
        p.max_capacity = max;
        p
    }

    fn counts(pending: u32, starting: u32, idle: u32, busy: u32) -> Counts {
        Counts {
            pending,
            starting,
            idle,
            busy,
            leaving: 0,
        }
    }

    /// One profile alone on a host: (host capacity, min, max, queued, its attempts,
    /// other live runners on the host) -> (to_start, limit, surplus idle).
    #[track_caller]
    fn check(
        cap: u32,
        (min, max): (u32, u32),
        queued: u32,
        c: Counts,
        others: u32,
        want: (u32, Limit, u32),
    ) {
        let h = host(cap);
        let ps = [prof("p", min, max)];
        let mut cs = BTreeMap::from([("p".to_string(), c)]);
        if others > 0 {
            cs.insert("gone".into(), counts(0, 0, 0, others));
        }
        let a = allocate(&h, &ps, &cs, &BTreeMap::from([("p".to_string(), queued)]));
        let pa = a.get("p").unwrap();
        assert_eq!((pa.to_start, pa.limit.clone(), pa.surplus_idle), want);
        assert_eq!(pa.demand, queued + min);
    }

    #[test]
    fn one_profile_every_limiting_factor() {
        use Limit::*;
        let none = Counts::default();
        check(10, (0, 4), 0, none, 0, (0, Demand, 0));
        check(10, (0, 4), 3, none, 0, (3, Demand, 0));
        check(10, (0, 4), 3, counts(1, 1, 0, 5), 0, (0, MaxCapacity, 0));
        check(10, (0, 4), 6, none, 0, (4, MaxCapacity, 0));
        check(10, (0, 4), 6, counts(0, 0, 0, 2), 0, (2, MaxCapacity, 0));
        check(3, (0, 4), 6, none, 0, (3, HostCapacity, 0));
        check(5, (0, 4), 6, none, 3, (2, HostCapacity, 0));
        check(4, (0, 4), 6, none, 0, (4, MaxCapacity, 0)); // both bind: the profile's
        check(10, (0, 4), 3, counts(1, 1, 1, 0), 0, (0, Demand, 0));
        check(10, (0, 4), 2, counts(0, 1, 1, 3), 0, (0, Demand, 0));
        // min_capacity keeps idle runners warm with nothing queued.
        check(10, (2, 4), 0, none, 0, (2, MinCapacity, 0));
        check(10, (2, 4), 0, counts(0, 0, 2, 0), 0, (0, MinCapacity, 0));
        check(10, (2, 4), 1, counts(0, 0, 2, 0), 0, (1, MinCapacity, 0));
        check(10, (2, 4), 3, counts(0, 0, 2, 0), 0, (2, MaxCapacity, 0));
        check(10, (1, 4), 3, counts(0, 0, 1, 0), 0, (3, Demand, 0));
        // Surplus: idle beyond demand; starting runners count as unassigned first.
        check(10, (0, 4), 0, counts(0, 0, 3, 0), 0, (0, Demand, 3));
        check(10, (1, 4), 1, counts(0, 1, 3, 0), 0, (0, Demand, 2));
        check(10, (0, 4), 1, counts(2, 0, 1, 0), 0, (0, Demand, 1));
        check(10, (0, 4), 1, counts(0, 0, 1, 3), 0, (0, Demand, 0));
        // Over capacity already (capacity lowered under live runners): nothing new.
        check(2, (0, 8), 5, counts(0, 0, 0, 4), 0, (0, HostCapacity, 0));
    }

    #[test]
    fn profiles_that_do_not_reconcile() {
        let mut h = host(10);
        let mut paused = prof("a-paused", 1, 4);
        paused.active = false;
        let mut monitor = prof("b-monitor", 1, 4);
        monitor.mode = Mode::Monitor;
        let mut foreign = prof("c-foreign", 1, 4);
        foreign.host_id = "ffffffffffffffff".into();
        let unfit_p = prof("d-unfit", 0, 4);
        let ps = [paused, monitor, foreign, unfit_p, prof("e-ok", 0, 4)];
        let cs = BTreeMap::from([
            ("a-paused".to_string(), counts(0, 0, 2, 1)),
            ("b-monitor".to_string(), counts(0, 0, 1, 0)),
            ("d-unfit".to_string(), counts(0, 0, 2, 0)),
        ]);
        let demand: BTreeMap<String, u32> = ps.iter().map(|p| (p.name.clone(), 3)).collect();
        let unfit = BTreeMap::from([(
            "d-unfit".to_string(),
            Unfit::Install("runner_dir missing".into()),
        )]);
        let run = |h: &Host| {
            HostAllocator {
                host: h,
                policies: &ps,
                counts: &cs,
                unfit: &unfit,
            }
            .allocate(&demand)
        };
        let a = run(&h);
        let row = |a: &Allocation, n: &str| {
            let p = a.get(n).unwrap();
            (p.to_start, p.limit.to_string(), p.surplus_idle)
        };
        assert_eq!(
            row(&a, "a-paused"),
            (0, "not_reconciling (paused)".into(), 2)
        );
        assert_eq!(row(&a, "b-monitor"), (0, "monitor_only".into(), 1));
        assert_eq!(row(&a, "c-foreign"), (0, "foreign_host".into(), 0));
        assert_eq!(
            row(&a, "d-unfit"),
            (
                0,
                "not_reconciling (unfit: runner install: runner_dir missing)".into(),
                0
            ),
            "an unfit profile keeps the idle runners demand still wants"
        );
        assert_eq!(row(&a, "e-ok"), (3, "demand".into(), 0));
        assert_eq!(a.live_on_host, 6);
        h.draining = true;
        let a = run(&h);
        assert_eq!(row(&a, "e-ok"), (0, "not_reconciling (draining)".into(), 0));
        assert_eq!(
            row(&a, "b-monitor"),
            (0, "not_reconciling (draining)".into(), 1)
        );
        assert_eq!(a.total_to_start(), 0);
    }

    #[test]
    fn host_capacity_is_shared_in_order() {
        let h = host(5);
        let ps = [prof("c", 0, 4), prof("a", 0, 4), prof("b", 1, 4)];
        let cs = BTreeMap::from([("b".to_string(), counts(0, 0, 0, 1))]);
        let demand = BTreeMap::from([
            ("a".to_string(), 3),
            ("b".to_string(), 2),
            ("c".to_string(), 2),
        ]);
        let a = allocate(&h, &ps, &cs, &demand);
        let order: Vec<_> = a.profiles.iter().map(|p| p.profile.as_str()).collect();
        assert_eq!(order, vec!["a", "b", "c"]);
        let got: Vec<_> = a
            .profiles
            .iter()
            .map(|p| (p.to_start, p.limit.clone()))
            .collect();
        assert_eq!(
            got,
            vec![
                (3, Limit::Demand),
                (1, Limit::HostCapacity),
                (0, Limit::HostCapacity)
            ]
        );
        assert_eq!(a.live_on_host + a.total_to_start(), h.capacity);
    }

    #[test]
    fn surplus_is_the_longest_idle_and_never_a_held_one() {
        let mut xs = Vec::new();
        for (id, idle_at) in [(1, 500), (2, 100), (3, 300), (4, 50)] {
            let mut a = Attempt::new(id, "p", "octo", HOST, 0);
            a.step(AttemptState::Starting, 10).unwrap();
            a.step(AttemptState::Idle, idle_at).unwrap();
            xs.push(a);
        }
        xs[3].profile = "other".into();
        let mut busy = Attempt::new(9, "p", "octo", HOST, 0);
        busy.state = AttemptState::Busy;
        xs.push(busy);
        assert_eq!(pick_surplus(&xs, "p", 2, |_| false), vec![2, 3]);
        assert_eq!(pick_surplus(&xs, "p", 2, |id| id == 2), vec![3, 1]);
        assert_eq!(pick_surplus(&xs, "p", 9, |_| false), vec![2, 3, 1]);
        assert_eq!(Counts::of(&xs)["p"], counts(0, 0, 3, 1), "counts by state");
    }
}
