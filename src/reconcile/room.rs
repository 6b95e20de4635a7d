//! What a plan leaves for the target's reads and points: whether the polling profiles
//! had room beyond the jobs known, how many more runners they could start and how
//! many serve ([`planned`]: the pass's [`Planned`]), how many runners the polling
//! profiles may run at once ([`polled_max`]), and how many of the starts recorded
//! take a JIT config over REST, whose points are reserved at once ([`rest_starts`]).

use super::pass::Planned;
use super::plan::Plan;
use crate::domain::{DemandSource, Limit, ScalePolicy};

/// What the reads of later passes follow from a plan (see [`Planned`]; the loop adds
/// what it checked beside the plan: the installs, the host).
pub fn planned(plan: &Plan, profiles: &[ScalePolicy]) -> Planned {
    let (free_slots, serving) = room_to_start(&plan.allocation, profiles);
    Planned {
        surplus: plan.surplus.clone(),
        room_left: room_left(&plan.allocation, profiles),
        uids_used_up: plan.uids_used_up.clone(),
        free_slots,
        serving,
        starts_seen: plan.starts_seen.clone(),
        orphans: plan.orphans.clone(),
        ..Planned::default()
    }
}

fn polls<'a>(profiles: &'a [ScalePolicy], name: &str) -> Option<&'a ScalePolicy> {
    profiles
        .iter()
        .find(|p| p.name == name && p.demand == DemandSource::Poll)
}

/// The plan had room beyond the jobs known for a profile that polls: a deep queue's
/// unread runs are worth reading now.
fn room_left(a: &super::Allocation, profiles: &[ScalePolicy]) -> bool {
    a.profiles
        .iter()
        .any(|pa| pa.limit == Limit::Demand && polls(profiles, &pa.profile).is_some())
}

/// The slots the polling profiles that may start have left after the plan's starts
/// (each profile's ceiling, and the host's capacity), `None` when no polling profile
/// may start; and the runners they serve with, live or starting now.
fn room_to_start(a: &super::Allocation, profiles: &[ScalePolicy]) -> (Option<u32>, u32) {
    let host_free = a
        .capacity
        .saturating_sub(a.live_on_host.saturating_add(a.total_to_start()));
    let mut free: Option<u32> = None;
    let mut serving = 0;
    for pa in &a.profiles {
        let Some(p) = polls(profiles, &pa.profile) else {
            continue;
        };
        serving += pa.live + pa.to_start;
        if may_start(&pa.limit) {
            let left = p.max_capacity.saturating_sub(pa.live + pa.to_start);
            free = Some(free.unwrap_or(0) + left);
        }
    }
    (free.map(|f| f.min(host_free)), serving)
}

/// Whether the allocator let a profile start (some limit of room or demand stopped
/// it, not its mode, its host or its fitness).
fn may_start(limit: &Limit) -> bool {
    matches!(
        limit,
        Limit::Demand
            | Limit::MinCapacity
            | Limit::MaxCapacity
            | Limit::HostCapacity
            | Limit::Paced { .. }
    )
}

/// How many runners the profiles that poll the REST queue may run at once.
pub fn polled_max(profiles: &[ScalePolicy]) -> u64 {
    profiles
        .iter()
        .filter(|p| p.demand == DemandSource::Poll)
        .map(|p| p.max_capacity as u64)
        .sum()
}

/// How many of the starts recorded (by profile) ask GitHub's REST API for a JIT
/// config: their points are reserved from the moment they are recorded, so the next
/// pass (before their calls go out) counts them. A scale set's JIT config is the
/// Actions service's, not under that limit.
pub fn rest_starts<'a>(
    started: impl IntoIterator<Item = &'a str>,
    profiles: &[ScalePolicy],
) -> u32 {
    started
        .into_iter()
        .filter(|name| {
            profiles
                .iter()
                .any(|p| p.name == *name && p.demand != DemandSource::Scaleset)
        })
        .count() as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reconcile::{Allocation, ProfileAllocation};

    fn profile(name: &str, max: u32, demand: DemandSource) -> ScalePolicy {
        let mut p = ScalePolicy::new(name, "t", "h");
        p.max_capacity = max;
        p.demand = demand;
        p
    }

    fn share(profile: &str, live: u32, to_start: u32, limit: Limit) -> ProfileAllocation {
        ProfileAllocation {
            profile: profile.into(),
            target: "t".into(),
            queued: to_start,
            demand: to_start,
            unassigned: 0,
            live,
            idle: 0,
            to_start,
            surplus_idle: 0,
            limit,
        }
    }

    #[test]
    fn free_slots_are_the_polling_profiles_ceilings_left_within_the_hosts() {
        let profiles = [
            profile("linux", 5, DemandSource::Poll),
            profile("big", 3, DemandSource::Poll),
            profile("ss", 10, DemandSource::Scaleset),
        ];
        let a = Allocation {
            profiles: vec![
                share("linux", 1, 2, Limit::Demand),
                share("big", 0, 0, Limit::MonitorOnly),
                share("ss", 4, 1, Limit::Demand),
            ],
            capacity: 20,
            live_on_host: 5,
        };
        // linux has 2 left; big may not start (monitor); ss does not poll.
        assert_eq!(room_to_start(&a, &profiles), (Some(2), 3));
        assert!(room_left(&a, &profiles));
        // The host has room for one more only.
        let tight = Allocation {
            capacity: 9,
            ..a.clone()
        };
        assert_eq!(room_to_start(&tight, &profiles).0, Some(1));
        // No polling profile may start: the reads keep the whole view.
        let none = Allocation {
            profiles: vec![share("big", 0, 0, Limit::MonitorOnly)],
            ..a
        };
        assert_eq!(room_to_start(&none, &profiles), (None, 0));
        assert!(!room_left(&none, &profiles));
    }

    #[test]
    fn only_rest_starts_reserve_jit_points_and_polled_max_counts_polling_profiles() {
        let profiles = [
            profile("linux", 5, DemandSource::Poll),
            profile("ss", 10, DemandSource::Scaleset),
        ];
        assert_eq!(rest_starts(["linux", "ss", "linux", "gone"], &profiles), 2);
        assert_eq!(polled_max(&profiles), 5);
    }
}
