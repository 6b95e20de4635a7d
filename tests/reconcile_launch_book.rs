//! Property-style test of the launch book driven by the daemon's own pass
//! (`reconcile::plan`, one target after the other, as the target loops take the
//! allocation lock in turn): many random offers, cancels, expiries, lost links and
//! runner lives from a tiny seeded PRNG, checking that a coordinator can never push a
//! host past the ceilings its owner set, and that every accepted launch gets its
//! runner at the next pass.

use runner_manager::domain::{Attempt, AttemptState, Host, QueuedJob, ScalePolicy};
use runner_manager::reconcile::allocate::{Counts, HostAllocator};
use runner_manager::reconcile::launch_book::{Launch, LaunchBook, OfferCtx, TargetMode};
use runner_manager::reconcile::plan::{self, Intent, Observed, Seen};
use runner_manager::reconcile::record::{self, Books};
use runner_manager::reconcile::unfit::Unfit;
use runner_manager::reconcile::watch::{ProcessStatus, Registration};
use std::collections::{BTreeMap, BTreeSet, HashSet};

const HOST: &str = "0123abcd89ef4567";

/// xorshift64*: enough randomness for a test, reproducible from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn policy(name: &str, target: &str, pool: bool, min: u32, max: u32) -> ScalePolicy {
    let mut p = ScalePolicy::new(name, target, HOST);
    p.labels = vec!["self-hosted".into()];
    if pool {
        p.labels.push("rm-pool-linux".into());
    }
    p.min_capacity = min;
    p.max_capacity = max;
    p
}

/// The test's books: the attempts as a list.
struct Ledger<'a> {
    attempts: &'a mut Vec<Attempt>,
    target: &'a str,
    now: i64,
}

impl Books for Ledger<'_> {
    type Error = std::convert::Infallible;

    fn intent(&mut self, i: &Intent) -> Result<i64, Self::Error> {
        let id = self.attempts.len() as i64 + 1;
        let a = Attempt::new(id, &i.profile, self.target, HOST, self.now);
        self.attempts.push(a);
        Ok(id)
    }

    fn lease(&mut self, attempt: i64, lease: &str) -> Result<(), Self::Error> {
        let a = self.attempts.iter_mut().find(|a| a.id == attempt);
        a.expect("a lease for an attempt the books hold").lease_id = Some(lease.to_string());
        Ok(())
    }
}

struct Sim {
    host: Host,
    policies: Vec<ScalePolicy>,
    attempts: Vec<Attempt>,
    demand: BTreeMap<String, u32>,
    modes: BTreeMap<String, TargetMode>,
    unfit: BTreeMap<String, Unfit>,
    book: LaunchBook,
    now: i64,
    accepted: u32,
}

impl Sim {
    fn live(&self) -> Vec<&Attempt> {
        self.attempts.iter().filter(|a| a.state.is_live()).collect()
    }

    fn ctx_offer(&mut self, launch: Launch) -> bool {
        let live: Vec<Attempt> = self.live().into_iter().cloned().collect();
        let counts = Counts::of(&live);
        let ctx = OfferCtx {
            alloc: HostAllocator {
                host: &self.host,
                policies: &self.policies,
                counts: &counts,
                unfit: &self.unfit,
            },
            demand: &self.demand,
            modes: &self.modes,
            attempts: &live,
        };
        self.book.offer(launch, &ctx, self.now).is_ok()
    }

    /// One pass of each target's loop: the real plan (close launches, bind free
    /// runners, allocate), then its intents recorded with their leases.
    fn pass(&mut self) {
        for target in ["octo", "mine"] {
            let profiles: Vec<ScalePolicy> = self
                .policies
                .iter()
                .filter(|p| p.target == target)
                .cloned()
                .collect();
            // The standalone demand as queued jobs: one per job, labelled so the
            // profile it is for is their best fit.
            let jobs: Vec<QueuedJob> = profiles
                .iter()
                .flat_map(|p| {
                    let n = self.demand.get(&p.name).copied().unwrap_or(0);
                    (0..n).map(|i| QueuedJob {
                        id: i as i64,
                        run_id: 1,
                        repo: "o/r".into(),
                        name: format!("{}-{i}", p.name),
                        labels: p.labels.clone(),
                        created_at: 0,
                    })
                })
                .collect();
            // Every runner is alive as far as the pass can see; the test moves them on.
            let seen: BTreeMap<i64, Seen> = self
                .live()
                .iter()
                .map(|a| {
                    let s = Seen {
                        events: Vec::new(),
                        process: ProcessStatus::Alive,
                        registration: Registration::Unknown,
                        oom_killed: false,
                    };
                    (a.id, s)
                })
                .collect();
            let none = BTreeMap::new();
            let observed = Observed {
                target,
                host: &self.host,
                profiles: &profiles,
                open: &self.attempts,
                seen: &seen,
                in_flight: &BTreeSet::new(),
                mode: self.modes[target],
                draining: false,
                jobs: &jobs,
                queue_read_at: 0,
                ended_since_read: &[],
                scaleset: &none,
                scaleset_queued: &BTreeMap::new(),
                unfit: &self.unfit,
                can_start: true,
                rate_limited_until: None,
                free_uids: None,
                surplus: &HashSet::new(),
                runners: None,
            };
            let plan = plan::plan(&observed, &mut self.book, self.now);
            // The daemon's own record step, bindings included.
            let mut books = Ledger {
                attempts: &mut self.attempts,
                target,
                now: self.now,
            };
            let (_, failed) = record::record(&plan, &mut self.book, target, &mut books);
            assert!(failed.is_none());
        }
        for p in &self.policies {
            assert_eq!(
                self.book.unbound(&p.name),
                0,
                "an accepted launch of {} got no runner at {}",
                p.name,
                self.now
            );
        }
    }

    /// The ceilings hold, counting launches that wait for their runner.
    fn check_ceilings(&self) {
        let counts = Counts::of(&self.attempts);
        let mut host_total = 0;
        for p in &self.policies {
            let live = counts.get(&p.name).map_or(0, Counts::live);
            let open = self.book.unbound(&p.name);
            assert!(
                live + open <= p.max_capacity,
                "{}: {live} live + {open} waiting launches > max {} at {}",
                p.name,
                p.max_capacity,
                self.now
            );
            host_total += live + open;
        }
        assert!(
            host_total <= self.host.capacity,
            "host: {host_total} > capacity {} at {}",
            self.host.capacity,
            self.now
        );
    }

    /// Moves one random live runner one step along its life.
    fn progress(&mut self, rng: &mut Rng) {
        let live: Vec<usize> = (0..self.attempts.len())
            .filter(|&i| self.attempts[i].state.is_live())
            .collect();
        if live.is_empty() {
            return;
        }
        let i = live[rng.below(live.len() as u64) as usize];
        let a = &mut self.attempts[i];
        let to = match (a.state, rng.below(4)) {
            (AttemptState::Pending, 0) => AttemptState::Failed,
            (AttemptState::Pending, _) => AttemptState::Starting,
            (AttemptState::Starting, 0) => AttemptState::Failed,
            (AttemptState::Starting, _) => AttemptState::Idle,
            (AttemptState::Idle, 0) => AttemptState::Finished,
            (AttemptState::Idle, _) => AttemptState::Busy,
            (_, _) => AttemptState::Finished,
        };
        a.step(to, self.now).unwrap();
    }
}

fn run(seed: u64, capacity: u32) {
    let mut rng = Rng(seed);
    let mut sim = Sim {
        host: Host {
            coordinator: Some("ws://127.0.0.1:1".into()),
            ..Host::new(HOST.into(), "h".into(), "linux", "x86_64", capacity)
        },
        policies: vec![
            policy("a", "octo", true, 0, 3),
            policy("b", "octo", true, 1, 4),
            policy("c", "octo", false, 0, 2),
            policy("s", "mine", false, 1, 2),
        ],
        attempts: Vec::new(),
        demand: BTreeMap::from([("c".to_string(), 1), ("s".to_string(), 1)]),
        modes: BTreeMap::from([
            ("octo".to_string(), TargetMode::Coordinated),
            ("mine".to_string(), TargetMode::Standalone),
        ]),
        unfit: BTreeMap::new(),
        book: LaunchBook::new(),
        now: 0,
        accepted: 0,
    };
    let mut leases = 0u32;
    for _ in 0..2_000 {
        match rng.below(20) {
            0..=7 => {
                let profile = ["a", "b", "c", "zz"][rng.below(4) as usize];
                // Now and then a lease id seen before.
                let lease = if leases > 0 && rng.below(10) == 0 {
                    rng.below(leases as u64) as u32
                } else {
                    leases += 1;
                    leases
                };
                let launch = Launch {
                    target: "octo".into(),
                    profile: profile.into(),
                    job_key: format!("job-{lease}"),
                    lease_id: format!("L{lease}"),
                    ttl_secs: rng.below(4),
                };
                if sim.ctx_offer(launch) {
                    sim.accepted += 1;
                    assert!(profile == "a" || profile == "b", "accepted for {profile}");
                }
            }
            8 => {
                let lease = format!("L{}", rng.below(leases as u64 + 1));
                sim.book.cancel(&lease);
            }
            9 if rng.below(10) == 0 => {
                sim.book.link_lost();
            }
            10..=13 => sim.progress(&mut rng),
            14..=15 => sim.now += rng.below(1_500) as i64,
            _ => sim.pass(),
        }
        sim.check_ceilings();
    }
    assert!(
        sim.accepted > 50,
        "seed {seed}: too few accepted to mean anything"
    );
}

#[test]
fn a_coordinator_cannot_push_a_host_past_its_ceilings() {
    for seed in 1..=24u64 {
        run(
            seed.wrapping_mul(0x9E37_79B9_7F4A_7C15),
            2 + (seed % 6) as u32,
        );
    }
}
