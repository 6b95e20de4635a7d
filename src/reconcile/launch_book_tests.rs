//! Unit tests of the launch book: every refusal reason, leases that repeat, expire
//! or are cancelled, runners that serve launches, and the target modes.

use super::allocate::{HostAllocator, Limit};
use super::launch_book::*;
use super::unfit::Unfit;
use crate::domain::profile::Mode;
use crate::domain::{Attempt, AttemptState, Host, ScalePolicy};
use crate::timefmt::Millis;
use std::collections::BTreeMap;

const HOST: &str = "0123abcd89ef4567";

fn host(capacity: u32) -> Host {
    Host {
        coordinator: Some("ws://127.0.0.1:1".into()),
        ..Host::new(HOST.into(), "h".into(), "linux", "x86_64", capacity)
    }
}

fn prof(name: &str, target: &str, pool: bool, max: u32) -> ScalePolicy {
    let mut p = ScalePolicy::new(name, target, HOST);
    p.labels = vec!["self-hosted".into(), "Linux".into()];
    if pool {
        p.labels.push("RM-POOL-linux".into()); // labels compare ignoring case
    }
    p.max_capacity = max;
    p
}

/// The host of the tests: capacity 4; `pool` (max 3) and friends on the coordinated
/// target `octo`, `solo` on the standalone target `mine`.
struct World {
    host: Host,
    policies: Vec<ScalePolicy>,
    attempts: Vec<Attempt>,
    unfit: BTreeMap<String, Unfit>,
    demand: BTreeMap<String, u32>,
    modes: BTreeMap<String, TargetMode>,
    book: LaunchBook,
    next_lease: u32,
}

impl World {
    fn new() -> World {
        let mut paused = prof("paused", "octo", true, 3);
        paused.active = false;
        let mut monitor = prof("monitor", "octo", true, 3);
        monitor.mode = Mode::Monitor;
        let mut foreign = prof("foreign", "octo", true, 3);
        foreign.host_id = "ffffffffffffffff".into();
        World {
            host: host(4),
            policies: vec![
                prof("pool", "octo", true, 3),
                prof("plain", "octo", false, 3),
                prof("solo", "mine", true, 3),
                prof("sick", "octo", true, 3),
                paused,
                monitor,
                foreign,
            ],
            attempts: Vec::new(),
            unfit: BTreeMap::from([(
                "sick".to_string(),
                Unfit::Install("runner_dir missing".into()),
            )]),
            demand: BTreeMap::new(),
            modes: BTreeMap::from([
                ("octo".to_string(), TargetMode::Coordinated),
                ("mine".to_string(), TargetMode::Standalone),
            ]),
            book: LaunchBook::new(),
            next_lease: 0,
        }
    }

    fn offer_as(&mut self, lease: &str, profile: &str, ttl: u64, now: Millis) -> String {
        let counts = self.book.counts(&self.attempts);
        let ctx = OfferCtx {
            alloc: HostAllocator {
                host: &self.host,
                policies: &self.policies,
                counts: &counts,
                unfit: &self.unfit,
            },
            demand: &self.demand,
            modes: &self.modes,
            attempts: &self.attempts,
        };
        let target = self
            .policies
            .iter()
            .find(|p| p.name == profile)
            .map_or("octo".to_string(), |p| p.target.clone());
        let launch = Launch {
            target,
            profile: profile.into(),
            job_key: format!("job-{lease}"),
            lease_id: lease.into(),
            ttl_secs: ttl,
        };
        match self.book.offer(launch, &ctx, now) {
            Ok(Accepted::StartRunner) => "start".into(),
            Ok(Accepted::ServedBy { attempt }) => format!("served by {attempt}"),
            Err(r) => r.as_str().into(),
        }
    }

    /// Offers a fresh lease of `profile` with a 60 s time to live.
    fn offer(&mut self, profile: &str, now: Millis) -> String {
        self.next_lease += 1;
        let lease = format!("L{}", self.next_lease);
        self.offer_as(&lease, profile, 60, now)
    }

    fn runner(&mut self, profile: &str, state: AttemptState, since: Millis) -> i64 {
        let id = self.attempts.len() as i64 + 1;
        let target = self
            .policies
            .iter()
            .find(|p| p.name == profile)
            .unwrap()
            .target
            .clone();
        let mut a = Attempt::new(id, profile, &target, HOST, 0);
        if state != AttemptState::Pending {
            a.recover(state, since).unwrap();
        }
        self.attempts.push(a);
        id
    }

    fn set(&mut self, id: i64, state: AttemptState, now: Millis) {
        let a = self.attempts.iter_mut().find(|a| a.id == id).unwrap();
        a.recover(state, now).unwrap();
    }
}

#[track_caller]
fn check(w: &mut World, profile: &str, want: &str) {
    assert_eq!(w.offer(profile, 0), want, "offer for {profile}");
}

#[test]
fn every_refusal_reason() {
    let mut w = World::new();
    check(&mut w, "nope", "unknown_profile");
    check(&mut w, "foreign", "unknown_profile");
    check(&mut w, "plain", "not_coordinated"); // no pool label
    check(&mut w, "solo", "not_coordinated"); // its target is standalone
    check(&mut w, "paused", "disabled");
    check(&mut w, "monitor", "disabled");
    check(&mut w, "sick", "unfit");
    assert_eq!(w.offer_as("", "pool", 60, 0), "other");
    assert_eq!(
        w.offer_as(&"x".repeat(MAX_FIELD + 1), "pool", 60, 0),
        "other"
    );
    assert_eq!(w.offer_as("zero", "pool", 0, 0), "stale");
    assert_eq!(w.offer_as("dup", "pool", 60, 0), "start");
    assert_eq!(w.offer_as("dup", "pool", 60, 0), "stale");
    assert_eq!(
        w.offer_as("zero", "pool", 60, 0),
        "stale",
        "refused leases are remembered too"
    );
    check(&mut w, "pool", "start");
    check(&mut w, "pool", "start");
    check(&mut w, "pool", "max_capacity");
    assert_eq!(
        w.book.open_per_profile(),
        BTreeMap::from([("pool".to_string(), 3)])
    );
    w.host.draining = true;
    check(&mut w, "pool", "draining");
    w.modes.insert("octo".into(), TargetMode::Fallback);
    check(&mut w, "pool", "not_coordinated");
}

#[test]
fn host_capacity_counts_every_profile_and_open_launch() {
    let mut w = World::new();
    w.runner("plain", AttemptState::Busy, 0);
    w.runner("solo", AttemptState::Busy, 0);
    // `solo` comes after `pool` in the order, but the runners its queued jobs get
    // are not taken from it by a launch.
    w.demand.insert("solo".into(), 2);
    check(&mut w, "pool", "host_capacity");
    w.demand.insert("solo".into(), 1);
    check(&mut w, "pool", "start");
    check(&mut w, "pool", "host_capacity");
    w.demand.clear();
    check(&mut w, "pool", "start");
    check(&mut w, "pool", "host_capacity"); // 2 busy + 2 open = 4, under pool's max 3
    // The profile itself had room: refused because it would take another's share.
    let mut w = World::new();
    w.host.capacity = 2;
    w.policies.push(prof("apool", "octo", true, 3)); // before `pool` in the order
    check(&mut w, "pool", "start");
    check(&mut w, "pool", "start");
    check(&mut w, "apool", "host_capacity");
}

#[test]
fn a_free_runner_serves_instead_of_a_new_one() {
    let mut w = World::new();
    let older = w.runner("pool", AttemptState::Idle, 10);
    let newer = w.runner("pool", AttemptState::Idle, 20);
    let starting = w.runner("pool", AttemptState::Starting, 5);
    w.runner("plain", AttemptState::Idle, 0);
    check(&mut w, "pool", &format!("served by {older}"));
    check(&mut w, "pool", &format!("served by {newer}"));
    check(&mut w, "pool", &format!("served by {starting}"));
    assert!(w.book.holds(older) && w.book.holds(newer) && w.book.holds(starting));
    assert_eq!(w.book.unbound("pool"), 0);
    // Three live runners, all held, and max 3: nothing more.
    check(&mut w, "pool", "max_capacity");
}

#[test]
fn launches_close_when_their_runner_moves_on() {
    let mut w = World::new();
    check(&mut w, "pool", "start");
    check(&mut w, "pool", "start");
    let a = w.runner("pool", AttemptState::Pending, 0);
    let b = w.runner("pool", AttemptState::Pending, 0);
    assert_eq!(w.book.bind_next("octo", "pool", a).as_deref(), Some("L1"));
    assert_eq!(w.book.bind_next("octo", "pool", a), None, "bound once");
    assert_eq!(w.book.bind_next("octo", "pool", b).as_deref(), Some("L2"));
    let c = w.runner("pool", AttemptState::Pending, 0);
    assert_eq!(w.book.bind_next("octo", "pool", c), None, "a floor runner");
    w.set(a, AttemptState::Idle, 5);
    assert!(w.book.observe(&w.attempts, 5).is_empty());
    w.set(a, AttemptState::Busy, 6);
    w.set(b, AttemptState::Failed, 6);
    let closed: Vec<_> = w
        .book
        .observe(&w.attempts, 6)
        .into_iter()
        .map(|c| (c.launch.launch.lease_id, c.why))
        .collect();
    assert_eq!(
        closed,
        vec![
            ("L1".to_string(), CloseReason::Taken),
            ("L2".to_string(), CloseReason::Ended)
        ]
    );
    assert_eq!(w.book.drain_closed().len(), 2);
    assert!(w.book.drain_closed().is_empty());
    assert!(w.book.open().is_empty());
}

#[test]
fn expiry_cancel_and_lost_link() {
    let mut w = World::new();
    assert_eq!(w.offer_as("a", "pool", 2, 1_000), "start");
    assert_eq!(w.offer_as("b", "pool", 10, 1_000), "start");
    assert_eq!(w.offer_as("c", "pool", 10, 1_000), "start");
    check(&mut w, "pool", "max_capacity");
    // On this host's clock: `a` lives until 3_000.
    assert!(w.book.observe(&w.attempts, 2_999).is_empty());
    let gone = w.book.observe(&w.attempts, 3_000);
    assert_eq!(gone.len(), 1);
    assert_eq!(
        (gone[0].launch.launch.lease_id.as_str(), gone[0].why),
        ("a", CloseReason::Expired)
    );
    assert_eq!(
        w.offer_as("a", "pool", 10, 3_000),
        "stale",
        "an expired lease stays seen"
    );
    assert_eq!(
        w.book.cancel("b").map(|c| c.why),
        Some(CloseReason::Cancelled)
    );
    assert_eq!(w.book.cancel("b"), None);
    assert_eq!(w.offer_as("d", "pool", 10, 3_000), "start");
    assert_eq!(w.offer_as("e", "pool", 10, 3_000), "start");
    // An expired launch takes no capacity when the next offer comes.
    assert_eq!(w.offer_as("f", "pool", 10, 13_000), "start");
    assert_eq!(w.book.open().len(), 1);
    assert_eq!(w.offer_as("g", "pool", 999_999, 13_000), "start");
    let g = w
        .book
        .open()
        .iter()
        .find(|o| o.launch.lease_id == "g")
        .unwrap();
    assert_eq!(
        g.expires_at,
        13_000 + MAX_TTL_SECS as Millis * 1000,
        "ttl is bounded"
    );
    let lost = w.book.link_lost();
    assert_eq!(lost.len(), 2);
    assert!(lost.iter().all(|c| c.why == CloseReason::LinkLost));
    assert!(w.book.open_per_profile().is_empty());
    assert_eq!(w.offer_as("f", "pool", 10, 13_000), "stale");
}

#[test]
fn seen_leases_are_bounded() {
    let mut w = World::new();
    w.host.capacity = 0; // every offer is refused, but each lease id is remembered
    for i in 0..=SEEN_LEASES {
        assert_eq!(w.offer_as(&format!("s{i}"), "pool", 10, 0), "host_capacity");
    }
    assert_eq!(
        w.offer_as(&format!("s{SEEN_LEASES}"), "pool", 10, 0),
        "stale"
    );
    assert_eq!(
        w.offer_as("s0", "pool", 10, 0),
        "host_capacity",
        "the oldest was forgotten"
    );
}

#[test]
fn free_runners_are_bound_to_waiting_launches() {
    let mut w = World::new();
    check(&mut w, "pool", "start");
    let cancelled_for = w.runner("pool", AttemptState::Starting, 0);
    // A runner whose own launch went away waits unheld; the other launch takes it.
    assert_eq!(
        w.book.bind_free(&w.policies, &w.attempts),
        vec![("L1".to_string(), cancelled_for)]
    );
    assert!(w.book.bind_free(&w.policies, &w.attempts).is_empty());
}

#[test]
fn a_runner_a_worker_removes_serves_no_launch_and_keeps_its_slot() {
    let mut w = World::new();
    w.host.capacity = 2;
    let going = w.runner("pool", AttemptState::Idle, 10);
    w.book.leaving(going);
    // The store still says idle (its DELETE is in flight): a new runner, not it.
    check(&mut w, "pool", "start");
    // It holds its slot until the worker reports: one more fills the host.
    check(&mut w, "pool", "host_capacity");
    assert_eq!(w.book.counts(&w.attempts)["pool"].leaving, 1);
    assert!(w.book.bind_free(&w.policies, &w.attempts).is_empty());
    // Reported (its deregistration refused: it took a job after all), it is a
    // runner again.
    w.book.left(going);
    assert!(!w.book.is_leaving(going));
    assert_eq!(w.book.counts(&w.attempts)["pool"].idle, 1);
}

#[test]
fn target_modes() {
    use TargetMode::*;
    let up = Link::Up { since: 0 };
    let down = Link::Down { since: 1_000 };
    let cases = [
        (false, up, true, 5_000, Standalone),
        (false, down, true, 99_000, Standalone),
        (true, up, true, 5_000, Coordinated),
        (true, up, false, 5_000, Standalone),
        (true, down, true, 10_999, Coordinated),
        (true, down, false, 10_999, Standalone),
        (true, down, true, 11_000, Fallback),
        (true, down, false, 11_000, Fallback),
    ];
    for (configured, link, covered, now, want) in cases {
        assert_eq!(
            target_mode(configured, link, covered, now, 10_000),
            want,
            "{configured} {link:?} {covered} {now}"
        );
    }
    let h = host(1);
    assert!(is_directed(&h, &prof("p", "t", true, 1), Coordinated));
    assert!(!is_directed(&h, &prof("p", "t", true, 1), Fallback));
    assert!(!is_directed(&h, &prof("p", "t", false, 1), Coordinated));
    assert_eq!(Refusal::UnknownProfile.as_str(), "unknown_profile");
}

#[test]
fn a_coordinated_target_reads_no_demand_only_when_all_its_profiles_here_are_directed() {
    use TargetMode::*;
    let h = host(1);
    let directed = [prof("a", "t", true, 1), prof("b", "t", true, 1)];
    assert!(all_directed(&h, &directed, Coordinated));
    assert!(!all_directed(&h, &directed, Fallback));
    let mut mixed = directed.to_vec();
    mixed.push(prof("c", "t", false, 1));
    assert!(!all_directed(&h, &mixed, Coordinated));
    // Another host's profile is not this host's to read for.
    mixed[2].host_id = "another".into();
    assert!(all_directed(&h, &mixed, Coordinated));
}

#[test]
fn waiting_launches_keep_their_slots_from_other_targets_and_while_held() {
    let mut w = World::new();
    w.host.capacity = 2;
    check(&mut w, "pool", "start");
    check(&mut w, "pool", "start");
    // The other target's loop passes before `octo`'s: its queued job may not take a
    // slot the two launches were promised.
    w.demand.insert("solo".into(), 1);
    let mine: Vec<ScalePolicy> = w
        .policies
        .iter()
        .filter(|p| p.target == "mine")
        .cloned()
        .collect();
    let counts = w.book.counts(&w.attempts);
    let ctx = OfferCtx {
        alloc: HostAllocator {
            host: &w.host,
            policies: &mine,
            counts: &counts,
            unfit: &w.unfit,
        },
        demand: &w.demand,
        modes: &w.modes,
        attempts: &w.attempts,
    };
    assert_eq!(w.book.reserved(&ctx), 2);
    let a = w.book.allocate(&ctx);
    assert_eq!(a.to_start("solo"), 0);
    assert_eq!(a.get("solo").unwrap().limit, Limit::HostCapacity);
    // Held after a failed start, `pool` starts nothing; its launches still hold
    // their slots against another profile's launch.
    w.demand.clear();
    w.policies.push(prof("apool", "octo", true, 3));
    w.unfit
        .insert("pool".into(), Unfit::Held("a start failed".into()));
    check(&mut w, "apool", "host_capacity");
    w.unfit.remove("pool");
    w.host.capacity = 3;
    check(&mut w, "apool", "start");
}
