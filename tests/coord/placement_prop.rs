//! Placement properties over random pools: hosts that accept, refuse, start runners,
//! report status and disconnect, jobs that come and go. After every step: never two
//! open leases for one job (counting those a host accepted before it went away, which
//! wait for its return), never more open leases on a host than it reported free.

use runner_manager::coordinator::placement::{
    Action, ConnId, CoordTarget, Placement, PlacementConfig,
};
use runner_manager::coordinator::protocol::{AttemptStarted, CoordMsg, Hello, LaunchAck, Status};
use runner_manager::domain::QueuedJob;
use runner_manager::sim::rng::SplitMix64;
use std::collections::{BTreeMap, BTreeSet};

/// `rng.below(n)`: a draw in `0..n`.
trait Below {
    fn below(&mut self, n: u64) -> u64;
}
impl Below for SplitMix64 {
    fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

fn hello(i: u64, cap: u32, version: u32) -> Hello {
    let mut h = Hello::fixture(
        &format!("{i:016}"),
        &format!("h{i}"),
        version,
        cap,
        &["linux", "rm-pool-linux"],
    );
    h.profiles[0].max = 50;
    h
}

/// What the hosts hold: lease → (host conn, job key).
#[derive(Default)]
struct World {
    open: BTreeMap<String, (ConnId, String)>,
    free: BTreeMap<ConnId, u32>,
    connected: BTreeSet<ConnId>,
    old: BTreeSet<ConnId>,
    /// Each connection's host name.
    names: BTreeMap<ConnId, String>,
    /// Leases their host accepted.
    acked: BTreeSet<String>,
    /// Accepted leases of a host that went away: lease → (host name, job key).
    away: BTreeMap<String, (String, String)>,
    /// Leases a host got back when it returned: placed when it had room, they do not
    /// count against what it reports free after.
    returned: BTreeSet<String>,
    /// The connection of the hello being applied, which takes back its host's leases.
    hello: Option<ConnId>,
}

impl World {
    fn apply(&mut self, actions: Vec<Action>) {
        for a in actions {
            match a {
                Action::Send(c, CoordMsg::Launch(l)) => {
                    assert!(self.connected.contains(&c), "launch to a gone host");
                    assert!(!self.old.contains(&c), "launch to a version-2 host");
                    self.open.insert(l.lease_id, (c, l.job_key));
                }
                Action::Send(_, CoordMsg::CancelLaunch { lease_id }) => {
                    self.open.remove(&lease_id);
                    self.away.remove(&lease_id);
                }
                Action::Send(_, CoordMsg::HelloAck(_) | CoordMsg::Owners(_)) => {}
                Action::Close(c, _) => self.drop_conn(c),
            }
        }
        if let Some(c) = self.hello.take()
            && !self.old.contains(&c)
        {
            let name = self.names[&c].clone();
            let back: Vec<String> = self
                .away
                .iter()
                .filter(|(_, (n, _))| *n == name)
                .map(|(l, _)| l.clone())
                .collect();
            for l in back {
                let (_, job) = self.away.remove(&l).expect("listed");
                self.open.insert(l.clone(), (c, job));
                self.returned.insert(l);
            }
        }
        self.check();
    }

    fn drop_conn(&mut self, c: ConnId) {
        self.connected.remove(&c);
        let gone: Vec<String> = self
            .open
            .iter()
            .filter(|(_, (h, _))| *h == c)
            .map(|(l, _)| l.clone())
            .collect();
        for l in gone {
            let (_, job) = self.open.remove(&l).expect("listed");
            if self.acked.contains(&l) {
                self.away.insert(l, (self.names[&c].clone(), job));
            }
        }
    }

    fn check(&self) {
        let mut per_job: BTreeMap<&str, u32> = BTreeMap::new();
        let mut per_host: BTreeMap<ConnId, u32> = BTreeMap::new();
        for (l, (c, j)) in &self.open {
            *per_job.entry(j).or_default() += 1;
            if !self.returned.contains(l) {
                *per_host.entry(*c).or_default() += 1;
            }
        }
        for (_, j) in self.away.values() {
            *per_job.entry(j).or_default() += 1;
        }
        for (j, n) in per_job {
            assert!(n <= 1, "job {j} has {n} open leases");
        }
        for (c, n) in per_host {
            assert!(
                n <= self.free[&c],
                "host {c}: {n} leases, {} free",
                self.free[&c]
            );
        }
    }
}

fn run(seed: u64) {
    let mut rng = SplitMix64::new(seed);
    let mut p = Placement::new(
        PlacementConfig {
            ttl_secs: 30,
            refusal_memory_ms: 5_000,
            orphan_grace_ms: 20_000,
            away_grace_ms: 5_000,
            reconcile_interval_secs: None,
        },
        vec![CoordTarget {
            name: "ct".into(),
            scope: "octo/app".into(),
            api_url: "https://api.github.com".into(),
        }],
        // The lease key a coordinator draws at start; from the seed, so a failing
        // seed replays the same ids.
        std::array::from_fn(|i| seed.to_le_bytes()[i % 8]),
    );
    let mut w = World::default();
    let mut now = 1_800_000_000_000i64;
    let mut queue: Vec<QueuedJob> = Vec::new();
    let mut next_job = 1i64;
    let mut next_conn: ConnId = 1;
    let mut runner = 0u64;
    for _ in 0..300 {
        now += rng.below(3_000) as i64;
        let step = rng.below(9);
        let conns: Vec<ConnId> = w.connected.iter().copied().collect();
        let pick = |rng: &mut SplitMix64| {
            conns
                .get(rng.below(conns.len().max(1) as u64) as usize)
                .copied()
        };
        let actions = match step {
            0 => {
                let c = next_conn;
                next_conn += 1;
                let cap = 1 + rng.below(4) as u32;
                let version = if rng.below(5) == 0 { 2 } else { 3 };
                w.connected.insert(c);
                w.free.insert(c, cap);
                if version == 2 {
                    w.old.insert(c);
                }
                // Names repeat, so some hellos replace a connection of the same host,
                // and a host that went away comes back.
                let i = rng.below(6);
                w.names.insert(c, format!("h{i}"));
                w.hello = Some(c);
                p.hello(c, &format!("h{i}"), hello(i, cap, version), now)
            }
            1 => match pick(&mut rng) {
                Some(c) => {
                    w.drop_conn(c);
                    p.disconnect(c, now)
                }
                None => vec![],
            },
            2 | 3 => {
                for _ in 0..=rng.below(3) {
                    queue.push(QueuedJob {
                        id: next_job,
                        run_id: 1,
                        repo: "octo/app".into(),
                        name: "j".into(),
                        labels: vec!["linux".into()],
                        created_at: now,
                    });
                    next_job += 1;
                }
                if !queue.is_empty() && rng.below(3) == 0 {
                    let i = rng.below(queue.len() as u64) as usize;
                    queue.remove(i);
                }
                p.queue("ct", queue.clone(), now)
            }
            4 | 5 => {
                // A host answers one of its leases: accept, refuse, or start a runner.
                let held: Vec<(String, ConnId)> =
                    w.open.iter().map(|(l, (c, _))| (l.clone(), *c)).collect();
                if held.is_empty() {
                    vec![]
                } else {
                    let (lease, c) = held[rng.below(held.len() as u64) as usize].clone();
                    match rng.below(3) {
                        0 => {
                            w.open.remove(&lease);
                            p.ack(
                                c,
                                LaunchAck {
                                    lease_id: lease,
                                    accepted: false,
                                    reason: Some("host_capacity".into()),
                                },
                                now,
                            )
                        }
                        1 => {
                            w.acked.insert(lease.clone());
                            p.ack(
                                c,
                                LaunchAck {
                                    lease_id: lease,
                                    accepted: true,
                                    reason: None,
                                },
                                now,
                            )
                        }
                        _ => {
                            w.open.remove(&lease);
                            runner += 1;
                            p.started(
                                c,
                                AttemptStarted {
                                    lease_id: Some(lease),
                                    runner_name: format!("r{runner}"),
                                    target: "ht".into(),
                                    profile: "p".into(),
                                },
                                now,
                            )
                        }
                    }
                }
            }
            6 => match pick(&mut rng) {
                Some(c) => {
                    let f = rng.below(5) as u32;
                    // A host reporting less free than it holds leases is told the truth
                    // by its own book; the coordinator places nothing more there.
                    let held = w.open.values().filter(|(h, _)| *h == c).count() as u32;
                    w.free.insert(c, f.max(held));
                    p.status(
                        c,
                        Status {
                            free: f.max(held),
                            draining: rng.below(6) == 0,
                            unfit: vec![],
                            meters: Default::default(),
                            ..Default::default()
                        },
                        now,
                    )
                }
                None => vec![],
            },
            _ => p.tick(now),
        };
        w.apply(actions);
        // The coordinator's own view agrees: at most one lease per job by construction,
        // and its open leases per connection are what the hosts hold.
        for c in &w.connected {
            let held = w.open.values().filter(|(h, _)| h == c).count() as u32;
            assert_eq!(p.outstanding(*c), held, "seed {seed}: conn {c}");
        }
    }
}

#[test]
fn never_two_open_leases_per_job_nor_more_than_a_host_reported_free() {
    for seed in 0..60 {
        run(seed);
    }
}
