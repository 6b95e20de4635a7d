//! Coordinated pool figures. (a) Placement, pure: 20 simulated hosts and 1,000 jobs
//! driven through `coordinator::placement::Placement` (hello, queue, acks with some
//! refusals, started, finished, status), timing every call; zero surplus (never two
//! open leases for one job) and every job placed are checked. (b) A real run: three
//! `runner-manager daemon`s, a real coordinator and the simulated GitHub: job queued →
//! launch accepted p50/p99, queued → job started, and runners started against jobs,
//! coordinated and standalone for the same workload, and coordinated on a scale set
//! (the coordinator holds its session, `--scaleset`; jobs are assigned to it). (c) A
//! coordinator that returns (issue 17, item 6): three coordinated daemons with a 5 s
//! fallback grace, the coordinator SIGKILLed and restarted on the same address after
//! 10 s (25 s without `--small`, as the issue saw it): how long until each host's link
//! is up and every host is directed again, and runners per job for jobs queued after
//! that. (d) Fifty hosts (issue 50): `-- fifty` (see `fifty`). Prints; asserts only
//! the invariants, never a timing. `-- --small` runs the quick configuration;
//! `-- return` only (c).

#[path = "support/proc.rs"]
#[allow(dead_code)]
mod proc;
#[path = "support/stats.rs"]
mod stats;
#[allow(dead_code)]
#[path = "../tests/pool/support.rs"]
mod support;

use runner_manager::coordinator::placement::{Action, CoordTarget, Placement, PlacementConfig};
use runner_manager::coordinator::protocol::{
    AttemptFinished, AttemptStarted, CoordMsg, Hello, LaunchAck, Status,
};
use runner_manager::domain::QueuedJob;
use runner_manager::timefmt::{Millis, now_millis};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::{Pool, wait_until};

const HOSTS: u64 = 20;
const JOBS: i64 = 1_000;
const CAPACITY: u32 = 10;
/// Every this-many launch is refused (`host_capacity`), so re-placement is timed too.
const REFUSE_EVERY: u64 = 37;

fn pct(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Host `i`, with target `app` and profile `pool` of `CAPACITY` runners.
fn hello(i: u64) -> Hello {
    let mut h = Hello::fixture(
        &format!("{i:016}"),
        &format!("h{i}"),
        3,
        CAPACITY,
        &["self-hosted", "linux", "rm-pool-linux"],
    );
    h.targets[0].name = "app".into();
    h.profiles[0].name = "pool".into();
    h.profiles[0].target = "app".into();
    h.profiles[0].max = CAPACITY;
    h
}

struct PlacementFigures {
    calls: u64,
    total: Duration,
    first_queue: Duration,
    launches: u64,
    refused: u64,
    rounds: u32,
    placed: usize,
    double_leases: u64,
}

/// Drives one pool to the end: each round, every launch is acked (a few refused) and
/// its runner started; then every running runner finishes its job, the queue shrinks
/// and time moves on by a second.
fn placement_run() -> PlacementFigures {
    let mut now: Millis = 1_800_000_000_000;
    let mut p = Placement::new(
        PlacementConfig::default(),
        vec![CoordTarget {
            name: "ct".into(),
            scope: "octo/app".into(),
            api_url: "https://api.github.com".into(),
        }],
        [7; 32],
    );
    let mut f = PlacementFigures {
        calls: 0,
        total: Duration::ZERO,
        first_queue: Duration::ZERO,
        launches: 0,
        refused: 0,
        rounds: 0,
        placed: 0,
        double_leases: 0,
    };
    let timed = |f: &mut PlacementFigures, call: &mut dyn FnMut() -> Vec<Action>| {
        let t = Instant::now();
        let out = std::hint::black_box(call());
        f.total += t.elapsed();
        f.calls += 1;
        out
    };
    let mut pending: VecDeque<Action> = VecDeque::new();
    for c in 1..=HOSTS {
        pending.extend(timed(&mut f, &mut || {
            p.hello(c, &format!("h{c}"), hello(c), now)
        }));
    }
    let jobs: Vec<QueuedJob> = (1..=JOBS)
        .map(|id| QueuedJob {
            id,
            run_id: id,
            repo: "octo/app".into(),
            name: format!("job {id}"),
            labels: vec!["self-hosted".into(), "linux".into()],
            created_at: now - 1_000 + id,
        })
        .collect();
    let t = Instant::now();
    pending.extend(timed(&mut f, &mut || p.queue("ct", jobs.clone(), now)));
    f.first_queue = t.elapsed();

    let mut open: HashMap<String, String> = HashMap::new(); // job → open lease
    let mut running: BTreeMap<u64, Vec<(String, String)>> = BTreeMap::new(); // conn → (runner, job)
    let mut served: BTreeSet<String> = BTreeSet::new();
    while served.len() < JOBS as usize && f.rounds < 10_000 {
        while let Some(a) = pending.pop_front() {
            let Action::Send(conn, msg) = a else { continue };
            match msg {
                CoordMsg::Launch(l) => {
                    f.launches += 1;
                    if open.insert(l.job_key.clone(), l.lease_id.clone()).is_some() {
                        f.double_leases += 1;
                    }
                    if f.launches.is_multiple_of(REFUSE_EVERY) {
                        f.refused += 1;
                        open.remove(&l.job_key);
                        let ack = LaunchAck {
                            lease_id: l.lease_id,
                            accepted: false,
                            reason: Some("host_capacity".into()),
                        };
                        pending.extend(timed(&mut f, &mut || p.ack(conn, ack.clone(), now)));
                        continue;
                    }
                    let ack = LaunchAck {
                        lease_id: l.lease_id.clone(),
                        accepted: true,
                        reason: None,
                    };
                    pending.extend(timed(&mut f, &mut || p.ack(conn, ack.clone(), now)));
                    let runner = format!("r-{}", l.lease_id);
                    let st = AttemptStarted {
                        lease_id: Some(l.lease_id),
                        runner_name: runner.clone(),
                        target: l.target,
                        profile: l.profile,
                    };
                    pending.extend(timed(&mut f, &mut || p.started(conn, st.clone(), now)));
                    open.remove(&l.job_key);
                    let r = running.entry(conn).or_default();
                    r.push((runner, l.job_key));
                    let status = Status {
                        free: CAPACITY.saturating_sub(r.len() as u32),
                        draining: false,
                        unfit: Vec::new(),
                        meters: Default::default(),
                        ..Default::default()
                    };
                    pending.extend(timed(&mut f, &mut || p.status(conn, status.clone(), now)));
                }
                CoordMsg::CancelLaunch { lease_id } => open.retain(|_, l| *l != lease_id),
                CoordMsg::HelloAck(_) | CoordMsg::Owners(_) => {}
            }
        }
        f.rounds += 1;
        now += 1_000;
        for (conn, runners) in std::mem::take(&mut running) {
            for (runner, job) in runners {
                let fin = AttemptFinished {
                    lease_id: None,
                    runner_name: runner,
                    outcome: "completed_job".into(),
                    duration_secs: Some(1),
                    usage: None,
                };
                pending.extend(timed(&mut f, &mut || p.finished(conn, fin.clone(), now)));
                served.insert(job);
            }
            let status = Status {
                free: CAPACITY,
                draining: false,
                unfit: Vec::new(),
                meters: Default::default(),
                ..Default::default()
            };
            pending.extend(timed(&mut f, &mut || p.status(conn, status.clone(), now)));
        }
        let left: Vec<QueuedJob> = jobs
            .iter()
            .filter(|j| !served.contains(&j.id.to_string()))
            .cloned()
            .collect();
        pending.extend(timed(&mut f, &mut || p.queue("ct", left.clone(), now)));
        pending.extend(timed(&mut f, &mut || p.tick(now)));
    }
    f.placed = served.len();
    f
}

struct RunFigures {
    jobs: usize,
    runners: usize,
    accepted_ms: Vec<i64>,
    started_ms: Vec<i64>,
    wall: Duration,
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Coordinated,
    Standalone,
    /// Coordinated, with the demand from a scale set whose session the coordinator holds.
    ScaleSet,
}

/// The scale set (and the hosts' `demand=scaleset` pool profile) of `Mode::ScaleSet`.
const SCALESET: &str = "bench-ss";

/// One real run: `hosts` daemons (max 8 each) in `mode`, `jobs` jobs of 300 ms queued
/// at once.
fn real_run(mode: Mode, hosts: usize, jobs: usize) -> RunFigures {
    let (tag, coordinated) = match mode {
        Mode::Coordinated => ("bench-c", true),
        Mode::Standalone => ("bench-s", false),
        Mode::ScaleSet => ("bench-ss", true),
    };
    let mut pool = Pool::new(tag, hosts, 8, coordinated);
    if mode == Mode::ScaleSet {
        pool.add_scaleset_profile(SCALESET, 8);
        pool.start_coordinator_with(&["--scaleset", &format!("pool={SCALESET}")]);
        wait_until(
            Duration::from_secs(30),
            "the coordinator holds the scale set's session",
            || {
                pool.sim
                    .scale_sets()
                    .iter()
                    .any(|s| s.1 == SCALESET && pool.sim.scaleset_sessions(s.0) == 1)
            },
        );
    } else if coordinated {
        pool.start_coordinator();
    }
    // job key → when a host's launch_accepted line arrived (first one wins).
    let accepted: Arc<Mutex<HashMap<String, Millis>>> = Arc::default();
    for h in &mut pool.hosts {
        let acc = accepted.clone();
        h.start_tapped(Some(Box::new(move |line: &str| {
            if !line.contains("msg=launch_accepted") {
                return;
            }
            let at = now_millis();
            if let Some(job) = line
                .split(' ')
                .find_map(|kv| kv.strip_prefix("job="))
                .map(|j| j.trim_matches('"').to_string())
            {
                acc.lock().unwrap().entry(job).or_insert(at);
            }
        })));
    }
    let want = if coordinated {
        "coordinated"
    } else {
        "standalone"
    };
    wait_until(Duration::from_secs(30), "every host is in its mode", || {
        pool.hosts.iter().all(|h| h.mode() == want)
    });
    if mode == Mode::ScaleSet {
        wait_until(
            Duration::from_secs(30),
            "every host found the scale set",
            || {
                pool.hosts
                    .iter()
                    .all(|h| h.logs().contains("scaleset_found"))
            },
        );
    }
    let t = Instant::now();
    if mode == Mode::ScaleSet {
        for i in 0..jobs {
            pool.sim
                .enqueue_job(support::REPO, &format!("{tag}-{i}"), &[SCALESET], 300);
        }
    } else {
        pool.enqueue(jobs, tag, 300);
    }
    wait_until(Duration::from_secs(180), "every job is done", || {
        pool.all_done()
    });
    let wall = t.elapsed();
    pool.wait_quiet();
    let acc = accepted.lock().unwrap().clone();
    let mut accepted_ms = Vec::new();
    let mut started_ms = Vec::new();
    for j in pool.sim.jobs() {
        if let Some(at) = acc.get(&j.id.to_string()) {
            accepted_ms.push(at - j.created_at);
        }
        if let Some(s) = j.started_at {
            started_ms.push(s - j.created_at);
        }
    }
    accepted_ms.sort();
    started_ms.sort();
    let runners = match mode {
        Mode::ScaleSet => pool
            .sim
            .request_log()
            .iter()
            .filter(|e| e.endpoint.ends_with("/generatejitconfig") && e.status == 200)
            .count(),
        _ => pool.runners_started(),
    };
    RunFigures {
        jobs,
        runners,
        accepted_ms,
        started_ms,
        wall,
    }
}

struct ReturnFigures {
    /// Per host: coordinator back → its link up again (`coordinator_link_up`).
    link_up_ms: Vec<i64>,
    /// Coordinator back → every host's status says `coordinated`.
    all_directed: Duration,
    jobs: usize,
    runners: usize,
}

/// (c): the coordinator SIGKILLed once every host is directed, away for `away` (the
/// hosts fall back after their 5 s grace), restarted on the same address; then `jobs`
/// jobs of 300 ms queued once every host is directed again.
fn return_run(hosts: usize, away: Duration, jobs: usize) -> ReturnFigures {
    let mut pool = Pool::new("bench-r", hosts, 8, true);
    pool.start_coordinator();
    // Per host: when each `coordinator_link_up` line arrived.
    let ups: Vec<Arc<Mutex<Vec<Millis>>>> = (0..hosts).map(|_| Arc::default()).collect();
    for (h, up) in pool.hosts.iter_mut().zip(&ups) {
        h.fallback_grace = 5;
        let up = up.clone();
        h.start_tapped(Some(Box::new(move |line: &str| {
            if line.contains("msg=coordinator_link_up") {
                up.lock().unwrap().push(now_millis());
            }
        })));
    }
    wait_until(Duration::from_secs(30), "every host is coordinated", || {
        pool.hosts.iter().all(|h| h.mode() == "coordinated")
    });
    pool.kill_coordinator();
    let gone = Instant::now();
    wait_until(Duration::from_secs(30), "every host fell back", || {
        pool.hosts.iter().all(|h| h.mode() == "fallback")
    });
    // The rest of the time away; nothing here waits for a condition to be true.
    std::thread::sleep(away.saturating_sub(gone.elapsed()));
    let back_ms = now_millis();
    let back = Instant::now();
    pool.start_coordinator();
    wait_until(
        Duration::from_secs(120),
        "every host is directed again",
        || pool.hosts.iter().all(|h| h.mode() == "coordinated"),
    );
    let all_directed = back.elapsed();
    wait_until(Duration::from_secs(30), "every host's link is up", || {
        ups.iter()
            .all(|u| u.lock().unwrap().iter().any(|&t| t >= back_ms))
    });
    let mut link_up_ms: Vec<i64> = ups
        .iter()
        .map(|u| {
            let first = u.lock().unwrap().iter().copied().find(|&t| t >= back_ms);
            first.expect("waited for above") - back_ms
        })
        .collect();
    link_up_ms.sort();
    let before = pool.runners_started();
    pool.enqueue(jobs, "bench-r", 300);
    wait_until(Duration::from_secs(180), "every job is done", || {
        pool.all_done()
    });
    let runners = pool.runners_started() - before;
    pool.wait_quiet();
    ReturnFigures {
        link_up_ms,
        all_directed,
        jobs,
        runners,
    }
}

fn main() {
    if std::env::args().any(|a| a == "fifty") {
        fifty(FiftyArgs::parse());
        return;
    }
    let small = std::env::args().any(|a| a == "--small");
    let (hosts, jobs) = if small { (3, 12) } else { (3, 48) };
    if std::env::args().any(|a| a == "endurance") {
        let (mut jobs, mut coord_every, host_every) = if small {
            (600, 200, 150)
        } else {
            (5_000, 1_000, 700)
        };
        // `--jobs N` and `--coord-every N` (0: the coordinator lives the whole run, so
        // its RSS is judged over one long life) reshape the run.
        let args: Vec<String> = std::env::args().collect();
        for w in args.windows(2) {
            let n = || {
                w[1].parse::<usize>()
                    .unwrap_or_else(|_| panic!("{} takes a number", w[0]))
            };
            match w[0].as_str() {
                "--jobs" => jobs = n(),
                "--coord-every" => coord_every = if n() == 0 { usize::MAX / 2 } else { n() },
                _ => {}
            }
        }
        endurance((jobs, coord_every, host_every));
        return;
    }
    if std::env::args().any(|a| a == "credit") {
        one_credential(small);
        return;
    }
    if !std::env::args().any(|a| a == "return") {
        placement_and_real_runs(small, hosts, jobs);
    }
    coordinator_return(small, hosts, jobs);
    one_credential(small);
}

/// (d) One credential, one budget (issue 50, item 2): coordinated daemons on one
/// credential whose GitHub allows few points a minute, and a burst of jobs all at
/// once: GitHub's secondary limits met, requests sent inside a `retry-after`, attempts
/// failed for a rate limit (each goal 0), and the time until the last runner started
/// beside the least the credential's points allow.
fn one_credential(small: bool) {
    use runner_manager::sim::secondary::SecondaryLimits;
    const POINTS: u32 = 60;
    let (hosts, jobs) = if small { (3, 15) } else { (6, 30) };
    let per_minute = POINTS / 5;
    println!(
        "\n== one credential: {hosts} coordinated daemons, GitHub allowing {POINTS} points a \
         minute per endpoint ({per_minute} JIT configs), {jobs} jobs of 300 ms at once"
    );
    let mut pool = Pool::new("credit", hosts, 6, true);
    pool.sim.set_secondary_limits(SecondaryLimits {
        points_per_minute: POINTS,
        ..SecondaryLimits::default()
    });
    let limit = format!("secondary_limit={POINTS}");
    support::run_ok(&pool.coord_dir, &["target", "set", "pool", &limit]);
    for h in &pool.hosts {
        support::run_ok(&h.dir, &["target", "set", "app", &limit]);
    }
    pool.start_coordinator();
    for h in &mut pool.hosts {
        h.start();
    }
    wait_until(Duration::from_secs(30), "every host coordinated", || {
        pool.hosts.iter().all(|h| h.mode() == "coordinated")
    });
    let t0 = Instant::now();
    let queued_at = now_millis();
    pool.enqueue(jobs, "credit", 300);
    wait_until(Duration::from_secs(600), "every job done", || {
        pool.all_done()
    });
    let wall = t0.elapsed();
    let starts: Vec<Millis> = pool
        .sim
        .request_log()
        .iter()
        .filter(|e| e.method == "POST" && e.endpoint.ends_with("generate-jitconfig"))
        .filter(|e| e.status == 201)
        .map(|e| e.at)
        .collect();
    let last = starts.iter().max().map_or(0, |t| t - queued_at);
    let floor_s = (jobs as u32 - 1) / per_minute * 60;
    let hits = pool.sim.secondary_hits();
    let failed_for_limit: usize = pool
        .hosts
        .iter()
        .map(|h| {
            let listed: serde_json::Value =
                serde_json::from_str(&support::run_ok(&h.dir, &["attempts", "--json"]))
                    .unwrap_or_default();
            listed.as_array().map_or(0, |a| {
                a.iter()
                    .filter(|a| {
                        a["outcome"] == "failed"
                            && a["reason"]
                                .as_str()
                                .is_some_and(|r| r.contains("rate limit"))
                    })
                    .count()
            })
        })
        .sum();
    println!(
        "{:<44} {}\n{:<44} {}\n{:<44} {}\n{:<44} {} for {jobs} jobs\n{:<44} {:.1} s (the credential allows it no sooner than {floor_s} s)\n{:<44} {:.1?}",
        "secondary limits met (goal 0)",
        hits.total,
        "requests inside a retry-after (goal 0)",
        hits.inside_retry_after,
        "attempts failed for a rate limit (goal 0)",
        failed_for_limit,
        "runners started",
        starts.len(),
        "queued → last runner's JIT config",
        last as f64 / 1000.0,
        "wall",
        wall
    );
    pool.wait_quiet();
}

/// (a) and (b).
fn placement_and_real_runs(small: bool, hosts: usize, jobs: usize) {
    println!("== placement (pure): {HOSTS} hosts × capacity {CAPACITY}, {JOBS} jobs");
    let f = placement_run();
    assert_eq!(f.double_leases, 0, "a job had two open leases");
    assert_eq!(f.placed, JOBS as usize, "every job placed and served");
    println!(
        "{:<34} {:>12}\n{:<34} {:>12.3?}\n{:<34} {:>12.3?}\n{:<34} {:>12.3?}\n{:<34} {:>12.3?}\n{:<34} {:>12}\n{:<34} {:>12}",
        "placement calls",
        f.calls,
        "total time in placement",
        f.total,
        "per job placed",
        f.total / JOBS as u32,
        "per call",
        f.total / f.calls.max(1) as u32,
        "first queue() of 1,000 jobs",
        f.first_queue,
        "launches (refused)",
        format!("{} ({})", f.launches, f.refused),
        "rounds; jobs placed; double leases",
        format!("{}; {}; {}", f.rounds, f.placed, f.double_leases),
    );

    println!(
        "\n== real run: {hosts} daemons (max 8 each), {jobs} jobs of 300 ms{}",
        if small { " (--small)" } else { "" }
    );
    let c = real_run(Mode::Coordinated, hosts, jobs);
    let s = real_run(Mode::Standalone, hosts, jobs);
    let ss = real_run(Mode::ScaleSet, hosts, jobs);
    for r in [&c, &ss] {
        assert_eq!(
            r.accepted_ms.len(),
            r.jobs,
            "every job's launch was accepted"
        );
    }
    println!(
        "{:<12} {:>5} {:>8} {:>8} {:>14} {:>14} {:>14} {:>14} {:>9}",
        "mode",
        "jobs",
        "runners",
        "surplus",
        "q→accept p50",
        "q→accept p99",
        "q→start p50",
        "q→start p99",
        "wall"
    );
    for (name, r) in [("coordinated", &c), ("standalone", &s), ("scale set", &ss)] {
        let acc = |p| {
            if r.accepted_ms.is_empty() {
                "-".to_string()
            } else {
                format!("{} ms", pct(&r.accepted_ms, p))
            }
        };
        println!(
            "{:<12} {:>5} {:>8} {:>8} {:>14} {:>14} {:>14} {:>14} {:>9.1?}",
            name,
            r.jobs,
            r.runners,
            r.runners as i64 - r.jobs as i64,
            acc(0.5),
            acc(0.99),
            format!("{} ms", pct(&r.started_ms, 0.5)),
            format!("{} ms", pct(&r.started_ms, 0.99)),
            r.wall
        );
    }
}

/// (c).
fn coordinator_return(small: bool, hosts: usize, jobs: usize) {
    let away = Duration::from_secs(if small { 10 } else { 25 });
    println!(
        "\n== coordinator return: {hosts} daemons (fallback grace 5 s), coordinator \
         SIGKILLed, back after {away:?}, then {jobs} jobs of 300 ms"
    );
    let r = return_run(hosts, away, jobs);
    let ups: Vec<String> = r.link_up_ms.iter().map(|ms| format!("{ms} ms")).collect();
    println!(
        "{:<40} {}\n{:<40} {:.1?}\n{:<40} {} for {} jobs ({:.2} per job, surplus {})",
        "back → each host's link up",
        ups.join(", "),
        "back → every host directed (status)",
        r.all_directed,
        "runners for jobs queued after that",
        r.runners,
        r.jobs,
        r.runners as f64 / r.jobs as f64,
        r.runners as i64 - r.jobs as i64,
    );
}

/// (d) Issue 18, item 6: three hosts and the coordinator through `jobs` jobs of 100 ms,
/// at most 48 outstanding, the coordinator SIGKILLed and started again every 1,000
/// jobs served and a host SIGKILLed and started again every 700 (each in turn; with
/// `--small`, 600 jobs, every 200 and 150; `--jobs N` and `--coord-every N`, 0 for
/// never, reshape it). Every
/// 250 jobs it samples the coordinator's RSS and its store (file and WAL). At the end:
/// runners started against jobs (surplus), jobs not served (lost), and the slopes of
/// RSS within each coordinator life and of the store across the run, per 1,000 jobs.
fn endurance((jobs, coord_every, host_every): (usize, usize, usize)) {
    const OUTSTANDING: usize = 48;
    const SAMPLE_EVERY: usize = 250;
    let coord_kills_said = if coord_every >= jobs {
        "never SIGKILLed".to_string()
    } else {
        format!("SIGKILLed every {coord_every} jobs")
    };
    println!(
        "\n== coordinator endurance: 3 daemons (max 8 each), {jobs} jobs of 100 ms, the \
         coordinator {coord_kills_said} and a host every {host_every}"
    );
    let mut pool = Pool::new("bench-e", 3, 8, true);
    // Thousands of jobs an hour spend more than a PAT's 5,000 units (the first run ran
    // dry at about 2,200 runners): the budget governor would then pace the pool, and
    // the run would measure the pacing, not the coordinator's endurance.
    pool.sim.with_state(|s| s.cfg.rate_limit = 10_000_000);
    pool.start_coordinator();
    for h in &mut pool.hosts {
        h.start();
    }
    wait_until(Duration::from_secs(60), "every host is coordinated", || {
        pool.hosts
            .iter()
            .all(|h| h.mode() == "coordinated" && h.judged())
    });
    let t0 = Instant::now();
    let (mut queued, mut archived, mut life) = (0usize, 0usize, 0usize);
    let (mut coord_kills, mut host_kills) = (0usize, 0usize);
    // When each SIGKILL was sent, and to whom: a runner that ran no job is read
    // against them.
    let mut kills: Vec<(runner_manager::timefmt::Millis, String)> = Vec::new();
    let mut next_sample = 0usize;
    // (coordinator life, jobs served, RSS KiB, store bytes)
    let mut samples: Vec<(usize, usize, u64, u64)> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120 + jobs as u64 / 4);
    let served = |pool: &Pool, archived: usize| {
        archived
            + pool
                .sim
                .jobs()
                .iter()
                .filter(|j| j.status == runner_manager::sim::JobStatus::Completed)
                .count()
    };
    loop {
        archived += pool.sim.archive_completed(now_millis() - 10_000).len();
        let done = served(&pool, archived);
        while queued < jobs && queued - done < OUTSTANDING {
            pool.sim.enqueue_job(
                support::REPO,
                &format!("endure-{queued}"),
                &["self-hosted", "linux"],
                100,
            );
            queued += 1;
        }
        if done >= next_sample {
            let rss = pool
                .coordinator_pid()
                .and_then(|p| proc::usage(p as i32))
                .map_or(0, |u| u.rss_kb);
            samples.push((life, done, rss, dir_bytes(&pool.coord_dir)));
            next_sample += SAMPLE_EVERY;
        }
        if done >= (coord_kills + 1) * coord_every && done < jobs {
            kills.push((
                runner_manager::timefmt::now_millis(),
                "coordinator".to_string(),
            ));
            pool.kill_coordinator();
            pool.start_coordinator();
            coord_kills += 1;
            life += 1;
        }
        if done >= (host_kills + 1) * host_every && done < jobs {
            kills.push((
                runner_manager::timefmt::now_millis(),
                format!("host{}", host_kills % 3),
            ));
            let h = &mut pool.hosts[host_kills % 3];
            h.kill();
            h.start();
            host_kills += 1;
        }
        if done >= jobs {
            break;
        }
        if Instant::now() >= deadline {
            println!("deadline reached with {done} of {jobs} served");
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let wall = t0.elapsed();
    let done = served(&pool, archived);
    wait_until(
        Duration::from_secs(90),
        "every registration is gone",
        || pool.sim.runners().is_empty(),
    );
    let runners = pool.runners_started();
    // A JIT config whose daemon was SIGKILLed before its runner ran is a registration
    // the next daemon removes, not a runner: the sim counts the runner processes.
    let (connected, given) = pool
        .sim
        .with_state(|s| (s.runners_connected, s.runners_given_a_job));
    println!(
        "{:>6} {:>8} {:>10} {:>12}",
        "life", "served", "RSS KiB", "store bytes"
    );
    for (l, n, rss, store) in &samples {
        println!("{l:>6} {n:>8} {rss:>10} {store:>12}");
    }
    let per_k = |v: Option<f64>| v.map_or("-".into(), |s| format!("{:+.1}", s * 1_000.0));
    // The sample before any job (a coordinator that has served nothing) is left out:
    // the slope is of a warm process.
    let rss_within = stats::slope_within(
        &samples
            .iter()
            .filter(|s| s.1 > 0)
            .map(|s| (s.0, s.1 as f64, s.2 as f64))
            .collect::<Vec<_>>(),
    );
    let store_across = stats::slope(
        &samples
            .iter()
            .map(|s| (s.1 as f64, s.3 as f64))
            .collect::<Vec<_>>(),
    );
    println!(
        "endurance: {done} of {jobs} jobs served in {wall:.1?} ({} lost), {runners} runners \
         started (surplus {}), {coord_kills} coordinator and {host_kills} host SIGKILLs; \
         coordinator RSS {} KiB per 1,000 jobs within a life, store {} bytes per 1,000 jobs; \
         {connected} runner processes connected, {} of them ran no job",
        jobs - done.min(jobs),
        runners as i64 - done as i64,
        per_k(rss_within),
        per_k(store_across),
        connected - given,
    );
    print_runner_ends(&pool);
    print_jobless_runners(&pool, &kills);
    for h in &mut pool.hosts {
        h.stop();
    }
    pool.stop_coordinator();
}

/// How each host's runners ended, by outcome and reason: a surplus runner shows as an
/// end other than a job run (a runner killed with its host, its job started again
/// elsewhere, shows as `orphaned`).
fn print_runner_ends(pool: &Pool) {
    println!("runner ends per host (outcome, reason: attempts):");
    for (i, h) in pool.hosts.iter().enumerate() {
        let json = support::run_ok(&h.dir, &["--json", "attempts", "--limit", "0"]);
        let attempts: Vec<serde_json::Value> = serde_json::from_str(&json).unwrap_or_default();
        let mut ends: std::collections::BTreeMap<String, usize> = Default::default();
        for a in &attempts {
            let key = format!(
                "{}, {}",
                a["outcome"].as_str().unwrap_or("-"),
                a["reason"].as_str().unwrap_or("-")
            );
            *ends.entry(key).or_default() += 1;
        }
        for (end, n) in ends {
            println!("  host{i}  {end}: {n}");
        }
    }
}

/// Each runner that connected and ran no job: its attempt as its host's store tells it
/// (timeline included), beside the SIGKILLs, so a surplus can be traced to its cause.
fn print_jobless_runners(pool: &Pool, kills: &[(runner_manager::timefmt::Millis, String)]) {
    let names = pool.sim.with_state(|s| s.connected_without_job.clone());
    if names.is_empty() {
        return;
    }
    println!("SIGKILLs:");
    for (at, whom) in kills {
        println!("  {}  {whom}", runner_manager::timefmt::format_rfc3339(*at));
    }
    for name in names {
        println!("runner {name} ran no job:");
        for (i, h) in pool.hosts.iter().enumerate() {
            let json = support::run_ok(&h.dir, &["--json", "attempts", "--limit", "0"]);
            let attempts: Vec<serde_json::Value> = serde_json::from_str(&json).unwrap_or_default();
            for a in attempts
                .iter()
                .filter(|a| a["runner_name"].as_str() == Some(&name))
            {
                let id = a["id"].to_string();
                println!("  on host{i}:");
                print!("{}", support::run_ok(&h.dir, &["attempt", "show", &id]));
                // Its lease's job, and every host's log lines that name that job.
                let Some(lease) = a["lease_id"].as_str() else {
                    continue;
                };
                let job = h
                    .logs()
                    .lines()
                    .find(|l| l.contains(lease) && l.contains("launch_accepted"))
                    .and_then(|l| l.split("job=").nth(1))
                    .and_then(|r| r.split_whitespace().next())
                    .map(|j| j.trim_matches('"').to_string());
                let Some(job) = job else { continue };
                println!("  its lease was for job {job}; what the hosts logged of it:");
                for (k, other) in pool.hosts.iter().enumerate() {
                    for l in other.logs().lines().filter(|l| l.contains(&job)) {
                        println!("    host{k}: {l}");
                    }
                }
            }
        }
    }
}

/// The bytes of the files directly in `dir` (the store, its WAL, logs).
fn dir_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|it| {
            it.filter_map(Result::ok)
                .filter_map(|e| e.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// (d) Fifty hosts (issue 50, item 3): `-- fifty [--hosts N] [--jobs N] [--burst N]
/// [--rate R] [--cap N] [--job-ms MS]`. N host daemons (capacity `--cap`, 4 by default)
/// with one coordinator and one credential against the simulated GitHub, its secondary
/// limits on: `--jobs` jobs of `--job-ms`, steady arrivals at `--rate` a second (below
/// the 180 JIT starts a minute one credential's 900 points allow), then a burst of
/// `--burst` at once (300 of 2,000 by default, the same share of fewer).
struct FiftyArgs {
    hosts: usize,
    jobs: usize,
    burst: usize,
    rate: f64,
    cap: u32,
    job_ms: u64,
}

impl FiftyArgs {
    fn parse() -> FiftyArgs {
        let args: Vec<String> = std::env::args().collect();
        let value = |name: &str| args.windows(2).find(|w| w[0] == name).map(|w| w[1].clone());
        let num = |name: &str, default: f64| {
            value(name).map_or(default, |v| {
                v.parse::<f64>()
                    .unwrap_or_else(|_| panic!("{name} takes a number, not {v:?}"))
            })
        };
        let jobs = num("--jobs", 2_000.0) as usize;
        FiftyArgs {
            hosts: num("--hosts", 50.0) as usize,
            jobs,
            burst: num("--burst", (jobs * 3 / 20) as f64) as usize,
            rate: num("--rate", 2.5),
            cap: num("--cap", 4.0) as u32,
            job_ms: num("--job-ms", 1_000.0) as u64,
        }
    }
}

/// What one credential's secondary limit allows: JIT configs are POSTs, 5 points each,
/// 900 points a minute per endpoint.
const JIT_POINTS: f64 = 5.0;
const POINTS_A_MINUTE: f64 = 900.0;

fn fifty(a: FiftyArgs) {
    let steady = a.jobs.saturating_sub(a.burst);
    println!(
        "\n== fifty: {} hosts (capacity {} each) with one coordinator and one credential, \
         {} jobs of {} ms: {steady} arriving at {}/s, then a burst of {}",
        a.hosts, a.cap, a.jobs, a.job_ms, a.rate, a.burst
    );
    let t_setup = Instant::now();
    let mut pool = Pool::new("bench-50", a.hosts, a.cap, true);
    // A GitHub App installation's hourly budget, the primary limit a fleet works under;
    // the secondary limits (900 points a minute, 100 concurrent) stay GitHub's.
    pool.sim.with_state(|s| s.cfg.rate_limit = 15_000);
    pool.start_coordinator();
    for h in &mut pool.hosts {
        h.start();
    }
    let connected = |pool: &Pool| {
        let out = support::run_ok(&pool.coord_dir, &["--json", "coordinator", "hosts"]);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .filter(|h| h["connected"] == true)
            .count()
    };
    wait_until(
        Duration::from_secs(60 + 2 * a.hosts as u64),
        "every host is connected",
        || connected(&pool) == a.hosts,
    );
    for h in &pool.hosts {
        wait_until(
            Duration::from_secs(60),
            "each host judged its profiles",
            || h.judged(),
        );
    }
    println!("setup: {:.1?} for {} hosts", t_setup.elapsed(), a.hosts);
    let coord_pid = pool.coordinator_pid().expect("the coordinator runs") as i32;
    let cpu_before = proc::usage(coord_pid).map_or(0, |u| u.cpu_ticks);

    let first_at = now_millis();
    let t0 = Instant::now();
    let ceiling_s = a.jobs as f64 * JIT_POINTS / POINTS_A_MINUTE * 60.0;
    // A sampler beside the arrivals: the coordinator's RSS, and each host's registered
    // runners (the name says the host: rm-<its id's first 8>-<attempt>), every 100 ms.
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (burst_at, wall, rss_peak_kb, per_host) = std::thread::scope(|sc| {
        let sim = &pool.sim;
        let stop = &stop;
        let sampler = sc.spawn(move || {
            let mut rss_peak = 0u64;
            let mut peaks: BTreeMap<String, usize> = BTreeMap::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let mut per: BTreeMap<String, usize> = BTreeMap::new();
                for r in sim.runners() {
                    let host = r
                        .name
                        .rsplit_once('-')
                        .map_or(r.name.clone(), |(h, _)| h.into());
                    *per.entry(host).or_default() += 1;
                }
                rss_peak = rss_peak.max(proc::usage(coord_pid).map_or(0, |u| u.rss_kb));
                for (h, n) in per {
                    let e = peaks.entry(h).or_default();
                    *e = (*e).max(n);
                }
                // A sampling period, not a wait for a condition.
                std::thread::sleep(Duration::from_millis(100));
            }
            (rss_peak, peaks)
        });
        for i in 0..steady {
            // Arrivals on a schedule: job i at t0 + i / rate.
            let due = t0 + Duration::from_secs_f64(i as f64 / a.rate);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            sim.enqueue_job(
                support::REPO,
                &format!("fifty-{i}"),
                &["self-hosted", "linux"],
                a.job_ms,
            );
        }
        let burst_at = t0.elapsed();
        for i in 0..a.burst {
            sim.enqueue_job(
                support::REPO,
                &format!("burst-{i}"),
                &["self-hosted", "linux"],
                a.job_ms,
            );
        }
        let deadline = Duration::from_secs_f64(burst_at.as_secs_f64() + 3.0 * ceiling_s + 180.0);
        wait_until(deadline, "every job is done", || pool.all_done());
        let wall = t0.elapsed();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let (rss, per_host) = sampler.join().unwrap();
        (burst_at, wall, rss, per_host)
    });
    let cpu = proc::usage(coord_pid).map_or(0, |u| u.cpu_ticks) - cpu_before;
    let coord_mem = proc::memory(coord_pid).unwrap_or_default();

    let jobs = pool.sim.jobs();
    let served = jobs
        .iter()
        .filter(|j| j.conclusion.as_deref() == Some("success"))
        .count();
    let runners = pool.runners_started();
    let last_start = jobs
        .iter()
        .filter_map(|j| j.started_at)
        .max()
        .unwrap_or(first_at);
    let hits = pool.sim.secondary_hits();
    let requests = pool.sim.request_log();
    let jit_minute_max = {
        let mut at: Vec<i64> = requests
            .iter()
            .filter(|e| e.endpoint.ends_with("generate-jitconfig"))
            .map(|e| e.at)
            .collect();
        at.sort();
        let mut best = 0;
        let mut lo = 0;
        for hi in 0..at.len() {
            while at[hi] - at[lo] >= 60_000 {
                lo += 1;
            }
            best = best.max(hi - lo + 1);
        }
        best
    };
    // The coordinator's own lines: each launch's time since the queue read saw its job
    // (waits for room and for the credential's budget included) and the placer's pass
    // that sent it (placing, the store's write, the hand-over to the connection).
    let log = std::fs::read_to_string(pool.root.join("coordinator.log")).unwrap_or_default();
    let field = |line: &str, name: &str| -> Option<f64> {
        let rest = &line[line.find(name)? + name.len()..];
        rest.split([' ', '"']).next()?.parse().ok()
    };
    let (mut seen_ms, mut pass_us): (Vec<i64>, Vec<i64>) = (Vec::new(), Vec::new());
    for line in log.lines().filter(|l| l.contains("launch_sent")) {
        if let Some(v) = field(line, "after_seen_ms=") {
            seen_ms.push(v as i64);
        }
        if let Some(v) = field(line, "pass_ms=") {
            pass_us.push((v * 1000.0) as i64);
        }
    }
    seen_ms.sort();
    pass_us.sort();
    let most = per_host.values().copied().max().unwrap_or(0);

    println!(
        "served: {served} of {} jobs in {wall:.1?} (arrivals ended at {burst_at:.1?})",
        a.jobs
    );
    println!(
        "surplus: {} (runners started {runners} for {} jobs; goal 0)",
        runners as i64 - a.jobs as i64,
        a.jobs
    );
    println!(
        "most runners on any host: {most} (capacity {}; registered runners sampled every \
         100 ms, {} hosts ran some)",
        a.cap,
        per_host.len()
    );
    println!(
        "placement, queue seen → launch sent: p50 {} ms, p99 {} ms, max {} ms over {} \
         launches (waits for a free host and for the credential included)",
        pct(&seen_ms, 0.50),
        pct(&seen_ms, 0.99),
        seen_ms.last().copied().unwrap_or(0),
        seen_ms.len()
    );
    println!(
        "placement, the placer's pass that sent it: p50 {:.1} ms, p99 {:.1} ms (goal p99 ≤ \
         50 ms outside GitHub's waits)",
        pct(&pass_us, 0.50) as f64 / 1000.0,
        pct(&pass_us, 0.99) as f64 / 1000.0
    );
    println!(
        "secondary-limit hits: {} {:?} (goal 0); JIT configs in the busiest minute: \
         {jit_minute_max} ({} points of {POINTS_A_MINUTE})",
        hits.total,
        hits.by_kind,
        jit_minute_max as f64 * JIT_POINTS
    );
    println!(
        "coordinator: peak RSS {:.1} MiB sampled, {:.1} MiB at the end ({:.1} MiB its own), \
         CPU {:.1} s over {wall:.1?} ({:.1}% of a core) (goal RSS ≤ 30 MB)",
        rss_peak_kb as f64 / 1024.0,
        coord_mem.rss_kb as f64 / 1024.0,
        coord_mem.anon_kb as f64 / 1024.0,
        proc::cpu_secs(cpu),
        100.0 * proc::cpu_secs(cpu) / wall.as_secs_f64()
    );
    println!(
        "last job started {:.1} s after the first arrival; the credential's ceiling: {} \
         starts × {JIT_POINTS} points / {POINTS_A_MINUTE} a minute = {ceiling_s:.1} s at \
         the least; requests to GitHub: {} (primary limit 15,000 an hour)",
        (last_start - first_at) as f64 / 1000.0,
        runners,
        requests.len()
    );
    assert!(most as u32 <= a.cap, "a host went over its capacity");
    pool.wait_quiet();
}
