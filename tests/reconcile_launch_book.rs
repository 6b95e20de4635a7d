//! Property-style test of the launch book driven by the daemon's own pass: each
//! target's `reconcile::pass::TargetState` (its reads answered, its starts and
//! removals carried by make-believe workers that finish in random order), the plan
//! and the record step, one target after the other as the target loops take the
//! allocation lock in turn. Many random offers, cancels, expiries, lost links, runner
//! lives, start failures and removals from a tiny seeded PRNG, checking that a
//! coordinator can never push a host past the ceilings its owner set, that every
//! accepted launch of a profile that may start gets its runner at the next pass, that
//! no launch is bound to a runner a worker is removing, and that a held profile
//! starts nothing.

use runner_manager::domain::{Attempt, AttemptState, Host, QueuedJob, ScalePolicy};
use runner_manager::reconcile::allocate::{Counts, HostAllocator};
use runner_manager::reconcile::launch_book::{Launch, LaunchBook, OfferCtx, TargetMode};
use runner_manager::reconcile::pass::{
    ClientFit, Effect, Event, Facts, GuardFound, GuardRead, Outcome, Planned, Read, StartEnd,
    TargetState,
};
use runner_manager::reconcile::plan::{self, Intent, Observed, Seen};
use runner_manager::reconcile::record::{self, Books};
use runner_manager::reconcile::unfit::{self, Fitness, Unfit};
use runner_manager::reconcile::watch::{ProcessStatus, Registration};
use std::collections::{BTreeMap, HashSet};

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

/// One target's loop as far as the pass goes: its state, and the attempts its
/// workers hold (starts, and removals: a deregistration and cleanup).
struct Loop {
    target: &'static str,
    state: TargetState,
    starts: Vec<(i64, String)>,
    removals: Vec<i64>,
}

const POLL_EVERY: i64 = 5_000;

impl Loop {
    fn new(target: &'static str) -> Loop {
        Loop {
            target,
            state: TargetState::default(),
            starts: Vec::new(),
            removals: Vec::new(),
        }
    }

    /// The pass's first events: the client, then the reads that are due, each
    /// answered at once (the guard finds a private repository).
    fn begin(&mut self, now: i64) {
        let fit = if self.state.has_client() {
            ClientFit::Fits
        } else {
            ClientFit::Missing
        };
        let client = Event::Client {
            fit,
            poll_every: POLL_EVERY,
        };
        for e in self.state.on_event(client, now) {
            if e == Effect::BuildClient {
                let _ = self.state.on_event(
                    Event::ClientBuilt {
                        kept_hold: None,
                        runners_read_at: None,
                        in_progress_read_at: None,
                    },
                    now,
                );
            }
        }
        let facts = Facts {
            poll_every: POLL_EVERY,
            reads_queue: true,
            guard: Some(GuardRead::Visibility),
            ..Facts::default()
        };
        for e in self.state.on_event(Event::Tick(&facts), now) {
            let Effect::Send(read) = e else { continue };
            let outcome = match read {
                Read::Guard(_) => Outcome::Guard {
                    result: Ok(GuardFound::Visibility(false)),
                },
                Read::Demand { .. } => Outcome::Demand {
                    units: 1,
                    list_units: 1,
                    first_reads: 0,
                    result: Ok(()),
                },
                Read::Runners => Outcome::Runners { result: Ok(()) },
                Read::RunnerRelease => Outcome::RunnerRelease,
                Read::Reruns => Outcome::Reruns { result: Ok(()) },
            };
            let _ = self.state.on_event(Event::Done(outcome), now);
        }
    }

    /// The profiles that may not start now, as the daemon judges them.
    fn unfit(&self, profiles: &[ScalePolicy], now: i64) -> BTreeMap<String, Unfit> {
        let none = BTreeMap::new();
        let fitness = Fitness {
            profiles,
            org: false,
            isolation_refused: None,
            disk_full: None,
            host_unfit: &none,
            holds: self.state.holds(),
            no_client: None,
            public_repo: self.state.public_repo(),
            credentials_refused_since: self.state.credentials_refused_since(),
            group_public: self.state.group_public(),
            install_errors: &none,
            scaleset_unready: &none,
        };
        unfit::unfit(&fitness, now)
    }
}

struct Sim {
    host: Host,
    policies: Vec<ScalePolicy>,
    attempts: Vec<Attempt>,
    demand: BTreeMap<String, u32>,
    modes: BTreeMap<String, TargetMode>,
    /// Every target's unfit profiles as their last passes judged them.
    unfit: BTreeMap<String, Unfit>,
    book: LaunchBook,
    loops: Vec<Loop>,
    now: i64,
    accepted: u32,
    /// Starts that failed on the host (each holds its profile).
    failed_starts: u32,
    /// Runners removed by a worker.
    removed: u32,
}

impl Sim {
    fn live(&self) -> Vec<&Attempt> {
        self.attempts.iter().filter(|a| a.state.is_live()).collect()
    }

    fn in_flight(&self, id: i64) -> bool {
        self.loops.iter().any(|l| l.state.in_flight().contains(&id))
    }

    fn attempt(&mut self, id: i64) -> &mut Attempt {
        self.attempts.iter_mut().find(|a| a.id == id).unwrap()
    }

    fn ctx_offer(&mut self, launch: Launch) -> bool {
        let live: Vec<Attempt> = self.live().into_iter().cloned().collect();
        let counts = self.book.counts(&live);
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

    /// One pass of each target's loop: its state's events, the real plan (close
    /// launches, bind free runners, allocate), its intents recorded with their leases
    /// and handed to workers as its state says.
    fn pass(&mut self) {
        for l in 0..self.loops.len() {
            self.pass_of(l);
        }
        for p in &self.policies {
            if self.unfit.contains_key(&p.name) {
                // Held: its launches wait for the hold, or go elsewhere.
                continue;
            }
            assert_eq!(
                self.book.unbound(&p.name),
                0,
                "an accepted launch of {} got no runner at {}",
                p.name,
                self.now
            );
        }
    }

    fn pass_of(&mut self, l: usize) {
        let now = self.now;
        let target = self.loops[l].target;
        self.loops[l].begin(now);
        let profiles: Vec<ScalePolicy> = self
            .policies
            .iter()
            .filter(|p| p.target == target)
            .cloned()
            .collect();
        let unfit = self.loops[l].unfit(&profiles, now);
        self.unfit
            .retain(|p, _| !profiles.iter().any(|q| &q.name == p));
        self.unfit.extend(unfit.clone());
        // The standalone demand as queued jobs: one per job, labelled so the profile
        // it is for is their best fit.
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
        // Every runner no worker holds is alive as far as the pass can see; the test
        // moves them on.
        let seen: BTreeMap<i64, Seen> = self
            .live()
            .iter()
            .filter(|a| !self.in_flight(a.id))
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
        let lp = &mut self.loops[l];
        let observed = Observed {
            target,
            host: &self.host,
            profiles: &profiles,
            open: &self.attempts,
            seen: &seen,
            in_flight: lp.state.in_flight(),
            mode: self.modes[target],
            draining: false,
            jobs: &jobs,
            queue_read_at: 0,
            ended_since_read: &[],
            scaleset: &none,
            scaleset_queued: &BTreeMap::new(),
            unfit: &unfit,
            can_start: lp.state.can_start(now),
            rate_limited_until: None,
            credentials_refused_since: None,
            jit_room: None,
            free_uids: None,
            surplus: &HashSet::new(),
            runners: None,
        };
        let plan = plan::plan(&observed, &mut self.book, now);
        let _ = lp.state.on_event(
            Event::Planned(Planned {
                surplus: plan.surplus.clone(),
                ..Planned::default()
            }),
            now,
        );
        // The daemon's own record step, bindings included.
        let mut books = Ledger {
            attempts: &mut self.attempts,
            target,
            now,
        };
        let (recorded, failed) = record::record(&plan, &mut self.book, target, &mut books);
        assert!(failed.is_none());
        for id in recorded {
            let profile = self.attempt(id).profile.clone();
            let lp = &mut self.loops[l];
            assert!(
                !lp.state.holds().get(&profile).is_some_and(|h| h.holds(now)),
                "a start of held {profile} at {now}"
            );
            let intent = Event::Acted {
                handed: &[],
                intents: &[(id, profile.as_str(), true)],
            };
            assert_eq!(lp.state.on_event(intent, now), vec![Effect::Start(id)]);
            lp.starts.push((id, profile));
        }
        let _ = self.loops[l]
            .state
            .on_event(Event::PassEnd { credential_hold: 0 }, now);
    }

    /// A worker ends one start: the runner spawned, or the host failed it (which holds
    /// the profile's starts).
    fn finish_start(&mut self, rng: &mut Rng) {
        let l = rng.below(self.loops.len() as u64) as usize;
        if self.loops[l].starts.is_empty() {
            return;
        }
        let i = rng.below(self.loops[l].starts.len() as u64) as usize;
        let (id, profile) = self.loops[l].starts.swap_remove(i);
        let now = self.now;
        let end = if rng.below(5) == 0 {
            self.attempt(id).step(AttemptState::Failed, now).unwrap();
            self.failed_starts += 1;
            StartEnd::Host("the runner's directory could not be made".into())
        } else {
            self.attempt(id).step(AttemptState::Starting, now).unwrap();
            StartEnd::Spawned
        };
        let done = Outcome::Started {
            attempt: id,
            profile,
            end,
        };
        let _ = self.loops[l].state.on_event(Event::Done(done), now);
    }

    /// A loop hands an idle runner no launch holds to a worker that removes it (its
    /// idle timeout), or a worker ends such a removal.
    fn removal(&mut self, rng: &mut Rng) {
        let now = self.now;
        let l = rng.below(self.loops.len() as u64) as usize;
        if rng.below(2) == 0 {
            let target = self.loops[l].target;
            let idle: Vec<i64> = self
                .attempts
                .iter()
                .filter(|a| a.target == target && a.state == AttemptState::Idle)
                .filter(|a| !self.in_flight(a.id) && !self.book.holds(a.id))
                .map(|a| a.id)
                .collect();
            if idle.is_empty() {
                return;
            }
            let id = idle[rng.below(idle.len() as u64) as usize];
            let _ = self.loops[l].state.on_event(
                Event::Acted {
                    handed: &[id],
                    intents: &[],
                },
                now,
            );
            self.book.leaving(id);
            self.loops[l].removals.push(id);
        } else if !self.loops[l].removals.is_empty() {
            let i = rng.below(self.loops[l].removals.len() as u64) as usize;
            let id = self.loops[l].removals.swap_remove(i);
            self.attempt(id).step(AttemptState::Finished, now).unwrap();
            self.attempt(id).mark_cleaned(now);
            self.book.left(id);
            self.removed += 1;
            let done = Outcome::Applied { attempt: id };
            let _ = self.loops[l].state.on_event(Event::Done(done), now);
        }
    }

    /// No launch is bound to a runner a worker is removing.
    fn check_removals(&self) {
        for l in &self.loops {
            for id in &l.removals {
                assert!(
                    !self.book.holds(*id),
                    "a launch bound to runner {id}, which a worker removes, at {}",
                    self.now
                );
            }
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
            "host: {host_total} > capacity {} at {}\n{:?}\n{:#?}",
            self.host.capacity,
            self.now,
            counts,
            self.attempts
                .iter()
                .filter(|a| a.state.is_live())
                .map(|a| (
                    a.id,
                    &a.profile,
                    a.state,
                    &a.lease_id,
                    self.in_flight(a.id),
                    self.book.is_leaving(a.id)
                ))
                .collect::<Vec<_>>()
        );
    }

    /// Moves one random live runner one step along its life.
    fn progress(&mut self, rng: &mut Rng) {
        // A worker's attempt is the worker's: the test moves it in `finish_start` or
        // `removal`.
        let live: Vec<usize> = (0..self.attempts.len())
            .filter(|&i| self.attempts[i].state.is_live() && !self.in_flight(self.attempts[i].id))
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
        loops: vec![Loop::new("octo"), Loop::new("mine")],
        now: 0,
        accepted: 0,
        failed_starts: 0,
        removed: 0,
    };
    let mut leases = 0u32;
    for _ in 0..4_000 {
        match rng.below(21) {
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
            10..=12 => sim.progress(&mut rng),
            13..=14 => sim.finish_start(&mut rng),
            15..=16 => sim.removal(&mut rng),
            17 => sim.now += rng.below(1_500) as i64,
            _ => sim.pass(),
        }
        sim.check_ceilings();
        sim.check_removals();
    }
    assert!(
        sim.accepted > 25 && sim.failed_starts > 5 && sim.removed > 3,
        "seed {seed}: too few to mean anything: {} accepted, {} starts failed, {} removed",
        sim.accepted,
        sim.failed_starts,
        sim.removed
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
