//! The chaos suite: many jobs against the simulated GitHub with API and runner faults
//! on, while the real daemon is SIGKILLed at random moments and restarted; at the end
//! every applicable promise of reliability.md is checked and printed with its counts.
//! `cargo bench --bench chaos [-- --small|--long|--endurance] [--scaleset] [--far] [--seed N]`;
//! exit 1 on any violation. With `--scaleset` the `linux` profile takes its demand from
//! its scale set's long poll (the `gpu` profile still polls REST), and the faults
//! include the scale set's: 5xx and slow answers from the Actions service, expired
//! queue tokens (401), sessions gone (404), and the session every SIGKILL leaves (the
//! restarted daemon deletes it, as it recorded it); the summary then gives the time
//! from each SIGKILL to the next session opened and the p99 from a scale set job's
//! queueing to its runner's spawn. With `--far` GitHub is 120 ms away (500 ms more per JIT config, ±20%, drawn
//! from the seed) and the runner install has a real release's file count; the
//! retry-after promise then counts each wait from when its answer was sent (see
//! `promises::retry_after`). With `--update N` the daemon runs from a copy of the
//! binary and `runner-manager update` replaces it N times mid-stream from a local
//! release directory: each time the daemon must drain and exit 75, and is restarted at
//! once (as systemd would); no SIGKILL falls inside a handover.
//!
//! Runners are SIGKILLed mid-job too (issue 34), one at a time with the daemon up, and
//! all the busy ones with every other daemon SIGKILL (the host crashing under them),
//! with both profiles at `rerun_lost=on` and GitHub's lost-runner timeout at 4 s: every
//! job so lost must be re-run once by the daemon and served, no job re-run twice, and
//! no job that ended by itself re-run.

#[path = "support/mod.rs"]
mod support;

use runner_manager::demo::stop_child;
use runner_manager::domain::DemandSource;
use runner_manager::sim::rng::SplitMix64;
use runner_manager::sim::{FaultAction, FaultRule, RunnerFault, RunnerFaultRule, Trigger};
use runner_manager::store::{AttemptFilter, SqliteStore, Store};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::process::Child;
use std::time::{Duration, Instant};
use support::proc;
use support::promises::{self, Check};

struct Config {
    jobs: usize,
    every_ms: u64,
    kills: usize,
    seed: u64,
    name: &'static str,
    scaleset: bool,
    distance: support::Distance,
    /// The simulated credential's hourly budget (the sim's default, a PAT's 5,000, when
    /// `None`).
    rate_limit: Option<u64>,
    /// How many times `update` replaces the daemon's binary mid-stream.
    updates: usize,
    /// How many busy runners are SIGKILLed mid-job.
    runner_kills: usize,
}

const LINUX_MAX: u32 = 4;
const GPU_MAX: u32 = 2;
const CAPACITY: u32 = 5;
/// The `retry-after` the injected 403s carry, in seconds.
const RETRY_AFTER: u64 = 2;
/// How long a SIGKILLed daemon's scale set session would outlive it if the next daemon
/// did not delete it (it would meet 409 until then).
const STALE_SESSION_MS: u64 = 3_000;
/// What names a job that fails by itself (issue 34: never re-run; never killed here).
const FAILS: &str = "fails";
/// GitHub's lost-runner timeout (ten minutes there): a runner renews its job four
/// times within it.
const LOST_RUNNER: Duration = Duration::from_secs(4);

fn main() {
    let mut cfg = Config {
        jobs: 120,
        every_ms: 400,
        kills: 8,
        seed: runner_manager::timefmt::now_millis() as u64,
        name: "default",
        scaleset: false,
        distance: support::Distance::Loopback,
        rate_limit: None,
        updates: 0,
        runner_kills: 6,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--small" => {
                (cfg.jobs, cfg.every_ms, cfg.kills, cfg.name) = (40, 600, 4, "small");
                cfg.runner_kills = 3;
            }
            "--long" => {
                (cfg.jobs, cfg.every_ms, cfg.kills, cfg.name) = (600, 300, 40, "long");
                cfg.runner_kills = 20;
            }
            // Issue 18: at least 50 SIGKILLs over at least 2,000 jobs, arriving a little
            // slower than the 5 slots serve them (a job and its runner's start take
            // about 2.5 s in a debug build): at 350 ms the queue could only grow, and
            // the jobs left at the deadline measured the harness, not the daemon.
            //
            // Its credential has 15,000 units an hour, an App installation's largest
            // budget: 2,000 jobs in 23 minutes at 2 to 3.5 units a job (with these
            // faults) are more than a PAT's whole hour, and a PAT's run measured the
            // pacing (the first REST run served 1,182 jobs, then read every 18 s to
            // keep the reserve), not the daemon's endurance.
            "--endurance" => {
                (cfg.jobs, cfg.every_ms, cfg.kills, cfg.name) = (2000, 600, 55, "endurance");
                cfg.rate_limit = Some(15_000);
                cfg.runner_kills = 40;
            }
            "--scaleset" => cfg.scaleset = true,
            "--far" => cfg.distance = support::Distance::Far,
            "--update" => {
                cfg.updates = args
                    .next()
                    .and_then(|s| s.parse().ok())
                    .expect("--update takes a number")
            }
            "--seed" => {
                cfg.seed = args
                    .next()
                    .and_then(|s| s.parse().ok())
                    .expect("--seed takes a number")
            }
            _ => {}
        }
    }
    let demand = if cfg.scaleset {
        "linux on its scale set, gpu on REST"
    } else {
        "REST"
    };
    let far = cfg.distance == support::Distance::Far;
    println!(
        "chaos: {} config, demand {demand}, {}, {} updates, seed {} ({} build); reproduce with {}{}{}--seed {}",
        cfg.name,
        cfg.distance.describe(),
        cfg.updates,
        cfg.seed,
        support::profile(),
        if cfg.scaleset { "--scaleset " } else { "" },
        if far { "--far " } else { "" },
        if cfg.updates > 0 {
            format!("--update {} ", cfg.updates)
        } else {
            String::new()
        },
        cfg.seed
    );
    promises::exit_with(run(&cfg), "the chaos run", cfg.seed);
}

/// What the run observed while it went, for the checks and the summary.
#[derive(Default)]
struct Observed {
    max_live_host: usize,
    max_live: BTreeMap<String, usize>,
    capacity_samples: usize,
    capacity_violations: Vec<String>,
    jit_values: HashSet<Vec<u8>>,
    cmdlines_scanned: usize,
    cmdline_violations: Vec<String>,
    environ_violations: Vec<String>,
    runner_faults: HashMap<String, Vec<RunnerFault>>,
}

fn run(cfg: &Config) -> Result<usize, String> {
    let mut w = support::world_at(cfg.distance, 1, LINUX_MAX, CAPACITY, 5);
    // `--update`: the daemon runs from a copy `update` may replace, beside the state
    // directory (not in it: the checks scan every file there).
    let update_dir = w.state_dir.with_extension("update");
    if cfg.updates > 0 {
        w.binary = update::prepare(&w, &update_dir)?;
    }
    let store = SqliteStore::open(&w.state_dir).map_err(|e| e.to_string())?;
    let host = store.host_or_create().map_err(|e| e.to_string())?;
    for name in ["linux", "gpu"] {
        let mut p = store.profile(name).map_err(|e| e.to_string())?;
        p.bootstrap_timeout_secs = 8;
        // Issue 34: lost jobs are re-run, with no hourly bound in the way of the run.
        p.rerun_lost = Some(runner_manager::domain::rerun::MAX_RERUNS_PER_HOUR);
        if cfg.scaleset && name == "linux" {
            // Its scale set is named `linux`, its only label: jobs say `runs-on: linux`.
            p.set_labels("--labels", &[name.to_string()], &host.os, &host.arch)
                .map_err(|e| e.to_string())?;
            p.demand = DemandSource::Scaleset;
        }
        store
            .update_profile(&p, p.revision)
            .map_err(|e| e.to_string())?;
    }
    let pat = support::world_token(&w);
    let mut rng = SplitMix64::new(cfg.seed);
    w.sim.with_state(|s| {
        if let Some(limit) = cfg.rate_limit {
            s.cfg.rate_limit = limit;
        }
        s.rng = SplitMix64::new(cfg.seed ^ 0x5eed);
        s.latency_rng = SplitMix64::new(cfg.seed ^ 0x1a7e);
        s.cfg.lost_runner_ms = LOST_RUNNER.as_millis() as u64;
    });
    // Background faults for the whole run: some 5xx and slow answers on every
    // repository endpoint (JIT and DELETE included), and misbehaving runners.
    background_faults(&w.sim, "/repos/**");
    if cfg.scaleset {
        w.sim
            .scaleset_config(|c| c.session_ttl_ms = STALE_SESSION_MS);
        // The Actions service's calls (sessions, JIT, acks and the long poll itself).
        background_faults(&w.sim, "/_services/**");
    }
    for (p, fault) in [
        (0.06, RunnerFault::CrashAtStart),
        (0.04, RunnerFault::HangBeforeListening),
        (0.06, RunnerFault::ExitNonZeroAfterJob),
    ] {
        w.sim.add_runner_fault(RunnerFaultRule {
            name_prefix: None,
            trigger: Trigger::Probability(p),
            fault,
        });
    }

    let mut daemon_n = 0;
    let mut restarts: Vec<i64> = Vec::new();
    let mut spawn = |n: &mut usize| -> Result<Child, String> {
        *n += 1;
        restarts.push(runner_manager::timefmt::now_millis());
        w.spawn_daemon(&w.state_dir.join(format!("chaos-daemon-{n}.log")))
    };
    let mut daemon: Option<Child> = Some(spawn(&mut daemon_n)?);
    let mut obs = Observed::default();
    let mut profiles: HashMap<i64, String> = HashMap::new();
    let start = Instant::now();
    // Far away the daemon as it is starts one runner at a time, each a JIT config's
    // 620 ms and a realistic root's seconds on a slow disk: give each job 4 s more.
    let far_ms = if cfg.distance == support::Distance::Far {
        4_000
    } else {
        0
    };
    let deadline =
        start + Duration::from_millis(cfg.jobs as u64 * (cfg.every_ms + far_ms) + 180_000);
    let mut queued = 0usize;
    let mut next_job = start;
    let mut kills = 0usize;
    let mut killed_at: Vec<i64> = Vec::new();
    let mut next_kill = start + Duration::from_millis(1500 + rng.next_u64() % 4500);
    // Issue 34: busy runners SIGKILLed mid-job, and the jobs they lost (id, name).
    let mut lost: Vec<(u64, String)> = Vec::new();
    let mut runner_kill_tries = 0usize;
    let mut host_kills = 0usize;
    let mut lost_in_crashes = 0usize;
    let mut next_runner_kill = start + Duration::from_millis(3000 + rng.next_u64() % 4000);
    let mut restart_at: Option<Instant> = None;
    let mut next_fault = start + Duration::from_millis(2000 + rng.next_u64() % 4000);
    let (mut bursts, mut forbids) = (0usize, 0usize);
    let (mut tokens_expired, mut sessions_dropped) = (0usize, 0usize);
    let mut tick = 0u64;
    let mut handover = update::Handovers::default();
    // Issue 20: time with jobs queued, no runner registered and no units left.
    let limit = w.sim.with_state(|st| st.cfg.rate_limit);
    let (mut dry_ms, mut last_ms) = (0i64, runner_manager::timefmt::now_millis());
    loop {
        let now = Instant::now();
        let now_ms = runner_manager::timefmt::now_millis();
        let waiting = w
            .sim
            .jobs()
            .iter()
            .any(|j| j.status == runner_manager::sim::JobStatus::Queued);
        if waiting && w.sim.runners().is_empty() && support::units(&w.sim) >= limit {
            dry_ms += now_ms - last_ms;
        }
        last_ms = now_ms;
        if queued < cfg.jobs && now >= next_job {
            let gpu = rng.next_u64().is_multiple_of(4);
            let labels: &[&str] = match (gpu, cfg.scaleset) {
                (true, _) => &["self-hosted", "gpu"],
                (false, true) => &["linux"],
                (false, false) => support::JOB_LABELS,
            };
            let dur = 300 + rng.next_u64() % 1200;
            if rng.next_u64().is_multiple_of(8) {
                // A job that fails by itself (a step exits 3; the runner exits 0): it
                // must never be re-run.
                w.sim.enqueue_script_job(
                    support::REPO,
                    &format!("chaos-{queued}-{FAILS}"),
                    labels,
                    "sleep 0.5; exit 3",
                );
            } else {
                w.sim
                    .enqueue_job(support::REPO, &format!("chaos-{queued}"), labels, dur);
            }
            queued += 1;
            next_job = now + Duration::from_millis(cfg.every_ms);
        }
        // Update after each (updates + 1)th of the jobs is queued, with the daemon up.
        if handover.started.is_none()
            && handover.done < cfg.updates
            && restart_at.is_none()
            && queued * (cfg.updates + 1) >= cfg.jobs * (handover.done + 1)
            && let Some(d) = daemon.as_ref()
        {
            handover.start(&w, d.id());
        }
        if let Some(code) = handover.exited(&mut daemon) {
            handover.finish(code);
            daemon = Some(spawn(&mut daemon_n)?);
        }
        if kills < cfg.kills
            && now >= next_kill
            && restart_at.is_none()
            && handover.started.is_none()
        {
            if let Some(mut d) = daemon.take() {
                let _ = d.kill(); // SIGKILL
                let _ = d.wait();
            }
            // Every other daemon SIGKILL is the host's crash: its runners die with it,
            // and the next daemon finds them gone (issue 34: lost, re-run).
            if kills % 2 == 1 {
                host_kills += 1;
                while let Some(job) = kill_busy_runner(&w, &store, &host.id, &lost) {
                    lost.push(job);
                    lost_in_crashes += 1;
                }
            }
            killed_at.push(runner_manager::timefmt::now_millis());
            kills += 1;
            restart_at = Some(now + Duration::from_millis(rng.next_u64() % 1500));
        }
        if let Some(at) = restart_at
            && now >= at
        {
            daemon = Some(spawn(&mut daemon_n)?);
            restart_at = None;
            next_kill = now + Duration::from_millis(1500 + rng.next_u64() % 4500);
        }
        if runner_kill_tries < cfg.runner_kills * 4
            && lost.len() - lost_in_crashes < cfg.runner_kills
            && now >= next_runner_kill
            && daemon.is_some()
            && restart_at.is_none()
        {
            runner_kill_tries += 1;
            if let Some(job) = kill_busy_runner(&w, &store, &host.id, &lost) {
                lost.push(job);
            }
            next_runner_kill = now + Duration::from_millis(2000 + rng.next_u64() % 3000);
        }
        if queued < cfg.jobs && now >= next_fault {
            let scale_set = w
                .sim
                .scale_sets()
                .into_iter()
                .find(|s| s.1 == "linux")
                .map(|s| s.0);
            let pick = rng.next_u64() % 4;
            if let (Some(set), true, 2 | 3) = (scale_set, cfg.scaleset, pick) {
                if pick == 2 {
                    tokens_expired += 1;
                    w.sim.expire_queue_tokens();
                } else {
                    sessions_dropped += 1;
                    w.sim.drop_scaleset_sessions(set);
                }
            } else if support::api_fault(&w.sim, &mut rng, (200, 800), RETRY_AFTER) {
                bursts += 1;
            } else {
                forbids += 1;
            }
            next_fault = now + Duration::from_millis(2000 + rng.next_u64() % 4000);
        }
        sample(
            &w,
            &store,
            &mut profiles,
            &mut obs,
            &pat,
            tick.is_multiple_of(10),
        );
        tick += 1;
        let done = queued == cfg.jobs
            && kills == cfg.kills
            && handover.done == cfg.updates
            && daemon.is_some()
            && support::all_completed(&w.sim, cfg.jobs)
            && rerun_for_each(&w.sim.jobs(), &lost);
        if done || now >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if daemon.is_none() {
        daemon = Some(spawn(&mut daemon_n)?);
    }
    // Settle: faults off, then wait (bounded) until every attempt is cleaned and no
    // registration of ours is left, sampling all the while.
    let faulted_log = w.sim.request_log();
    w.sim.clear_faults();
    let settle_end = Instant::now() + Duration::from_secs(90);
    while Instant::now() < settle_end {
        sample(
            &w,
            &store,
            &mut profiles,
            &mut obs,
            &pat,
            tick.is_multiple_of(10),
        );
        tick += 1;
        let open = store.open_attempts(&host.id).map_err(|e| e.to_string())?;
        let ours = w
            .sim
            .runners()
            .iter()
            .filter(|r| {
                runner_manager::domain::host::parse_runner_name(&host.id, &r.name).is_some()
            })
            .count();
        if open.is_empty() && ours == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if let Some(mut d) = daemon.take() {
        stop_child(&mut d, Duration::from_secs(20));
    }
    let elapsed = start.elapsed();

    // The checks.
    let attempts = store
        .attempts(&AttemptFilter::default())
        .map_err(|e| e.to_string())?;
    let jobs = w.sim.jobs();
    let log = w.sim.request_log();
    let mut secrets: Vec<String> = vec![pat.clone()];
    for j in &obs.jit_values {
        secrets.push(String::from_utf8_lossy(j).into_owned());
        if let Some(c) = promises::jit_credential(j) {
            secrets.push(c);
        }
    }
    let files = promises::files_under(&w.state_dir, &[w.state_dir.join("demo-token")]);
    let mut checks: Vec<Check> = vec![
        promises::served_exactly_once(&jobs, &attempts),
        lost_jobs_rerun_once(&jobs, &lost),
        promises::attempts_finished(&attempts),
        promises::registrations_left(&w.sim.runners(), &host.id),
        promises::leaked_processes(&w.state_dir, w.sim.url()),
        Check {
            promise: "capacity never exceeded (per profile and host, from /proc)",
            checked: obs.capacity_samples,
            what: "samples",
            violations: std::mem::take(&mut obs.capacity_violations),
        },
        promises::retry_after(&log, &[("forbidden".into(), RETRY_AFTER)], &restarts),
        promises::secrets_in_files(&files, &secrets),
        promises::secrets_in_store(&w.state_dir.join("state.db"), &secrets),
        Check {
            promise: "no secret in any process command line",
            checked: obs.cmdlines_scanned,
            what: "command lines",
            violations: std::mem::take(&mut obs.cmdline_violations),
        },
        Check {
            promise: "a runner's environment holds its own JIT config and no PAT",
            checked: obs.jit_values.len(),
            what: "runner environments",
            violations: std::mem::take(&mut obs.environ_violations),
        },
    ];
    if cfg.updates > 0 {
        let mut violations = std::mem::take(&mut handover.violations);
        if handover.done < cfg.updates {
            violations.push(format!(
                "{} of {} updates handed over",
                handover.done, cfg.updates
            ));
        }
        checks.push(Check {
            promise: "every update mid-stream hands over: the daemon drains and exits 75",
            checked: handover.done,
            what: "handovers",
            violations,
        });
        println!("{}", handover.figures());
    }

    // The summary.
    let mut faults: BTreeMap<String, usize> = BTreeMap::new();
    for e in &faulted_log {
        if let Some(f) = &e.fault {
            *faults.entry(format!("api {f}")).or_insert(0) += 1;
        }
    }
    for fs in obs.runner_faults.values() {
        for f in fs {
            *faults.entry(format!("runner {f:?}")).or_insert(0) += 1;
        }
    }
    let injected: usize = faults.values().sum();
    println!();
    println!(
        "run: {:.1?}, {} jobs, {} attempts, {} daemon SIGKILLs ({host_kills} of them host crashes that took its runners; {} daemon starts), {} runners SIGKILLed mid-job ({} re-runs asked), {} 5xx bursts and {} 403 retry-after scheduled, {} requests logged",
        elapsed,
        jobs.len(),
        attempts.len(),
        kills,
        daemon_n,
        lost.len(),
        w.sim.reruns(),
        bursts,
        forbids,
        log.len()
    );
    if cfg.scaleset {
        println!(
            "scale set across SIGKILLs: {}",
            scaleset_figures(&log, &killed_at, &restarts, &jobs, &attempts)
        );
        let conflicts = w.sim.session_conflicts();
        println!(
            "scale set: {tokens_expired} queue-token expiries and {sessions_dropped} sessions dropped scheduled, {conflicts} session conflicts (409) met, {} runners from scale set JIT configs",
            log.iter()
                .filter(|e| e.endpoint.ends_with("/generatejitconfig") && e.status == 200)
                .count()
        );
    }
    println!("faults injected: {injected}");
    for (k, v) in &faults {
        println!("  {k:<40} {v}");
    }
    println!("attempt outcomes:");
    for (k, v) in promises::outcome_counts(&attempts) {
        println!("  {k:<60} {v}");
    }
    println!(
        "peak live runners: host {} of {CAPACITY}; {}",
        obs.max_live_host,
        obs.max_live
            .iter()
            .map(|(p, n)| format!("{p} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "peak requests in flight per credential: {:?}",
        w.sim.peak_in_flight()
    );
    // Issue 34's three counts, by job name (a re-run keeps it).
    let runs_of = |name: &str| jobs.iter().filter(|j| j.name == name).count();
    let rerun_once = lost.iter().filter(|(_, n)| runs_of(n) == 2).count();
    let ended_first = lost
        .iter()
        .filter(|(id, _)| ended_before_the_kill(&jobs, *id))
        .count();
    let names: HashSet<&str> = jobs.iter().map(|j| j.name.as_str()).collect();
    let twice = names.iter().filter(|n| runs_of(n) > 2).count();
    let by_themselves = names
        .iter()
        .filter(|n| !lost.iter().any(|(_, l)| l == *n) && runs_of(n) > 1)
        .count();
    let failed_by_themselves = jobs
        .iter()
        .filter(|j| j.name.ends_with(FAILS) && j.conclusion.as_deref() == Some("failure"))
        .count();
    println!(
        "jobs lost to runners SIGKILLed mid-job: {} ({lost_in_crashes} in host crashes; \
         {ended_first} ended before the kill landed); re-run once {rerun_once}, re-run twice {twice}; jobs that failed by themselves \
         {failed_by_themselves}, re-runs of jobs that ended by themselves {by_themselves}",
        lost.len()
    );
    let total = promises::print(&checks);
    let served = jobs
        .iter()
        .filter(|j| j.status == runner_manager::sim::JobStatus::Completed)
        .count();
    let per_job = support::units(&w.sim) as f64 / served.max(1) as f64;
    println!(
        "chaos summary: 1 run, {kills} kills, {} jobs, {injected} faults injected, \
         {per_job:.2} units per served job, {:.1} min run dry, secondary limits hit {}, \
         violations: {total}",
        jobs.len(),
        dry_ms as f64 / 60_000.0,
        w.sim.secondary_hits().total
    );
    checks.clear();
    let _ = std::fs::remove_dir_all(&update_dir);
    if total == 0 && std::env::var_os("RM_BENCH_KEEP").is_none() {
        support::discard(w);
    } else {
        println!("state kept in {}", w.state_dir.display());
        support::kill_under(&w.state_dir);
    }
    Ok(total)
}

/// SIGKILLs one runner of ours busy with a job (as a host's OOM killer outside its
/// cgroup would), and returns the job it lost as GitHub lists it: `None` when none is
/// busy, or its job ended before the kill. A job lost before (its re-run) is spared:
/// lost again it would rightly never be re-run, and the check counts each job once.
fn kill_busy_runner(
    w: &runner_manager::demo::World,
    store: &SqliteStore,
    host: &str,
    lost: &[(u64, String)],
) -> Option<(u64, String)> {
    let jobs = w.sim.jobs();
    let (busy, job) = store
        .open_attempts(host)
        .ok()?
        .into_iter()
        .filter(|a| a.state == runner_manager::domain::AttemptState::Busy && a.pid.is_some())
        .find_map(|a| {
            let job = jobs.iter().find(|j| {
                j.status == runner_manager::sim::JobStatus::InProgress
                    && j.runner_name.as_deref() == Some(a.runner_name.as_str())
                    && !lost.iter().any(|(_, n)| *n == j.name)
                    && !j.name.ends_with(FAILS)
            })?;
            Some((a, job.clone()))
        })?;
    // SAFETY: the runner's own pid, as the daemon recorded it while it runs.
    unsafe { libc::kill(busy.pid?, libc::SIGKILL) };
    Some((job.id, job.name))
}

/// A later job of the same name (GitHub's re-run) stands for every job lost, but for
/// one its runner finished before the kill landed.
fn rerun_for_each(jobs: &[runner_manager::sim::JobState], lost: &[(u64, String)]) -> bool {
    lost.iter().all(|(id, name)| {
        jobs.iter().any(|j| j.name == *name && j.id > *id) || ended_before_the_kill(jobs, *id)
    })
}

/// The runner reported the job done between the harness's look (in progress) and its
/// SIGKILL: GitHub concluded it a success, and it was never lost (the daemon, rightly,
/// does not re-run it: `not_failed`).
fn ended_before_the_kill(jobs: &[runner_manager::sim::JobState], id: u64) -> bool {
    jobs.iter()
        .any(|j| j.id == id && j.conclusion.as_deref() == Some("success"))
}

/// Issue 34's three counts: every job lost to a SIGKILLed runner re-run once (GitHub
/// failed it first, and its re-run completed), none re-run twice, and no job that
/// ended by itself re-run.
fn lost_jobs_rerun_once(jobs: &[runner_manager::sim::JobState], lost: &[(u64, String)]) -> Check {
    let mut c = Check::new(
        "every job lost to a killed runner re-run once and served; none twice; none that ended by itself",
        "jobs",
    );
    let mut by_name: BTreeMap<&str, Vec<&runner_manager::sim::JobState>> = BTreeMap::new();
    for j in jobs {
        by_name.entry(j.name.as_str()).or_default().push(j);
    }
    for (name, js) in &by_name {
        c.checked += 1;
        let was_lost = lost.iter().any(|(_, n)| n == name);
        match (was_lost, js.len()) {
            (false, 1) => {}
            (false, n) => c
                .violations
                .push(format!("job {name} ended by itself and was run {n} times")),
            (true, 2) => {
                let (first, again) = if js[0].id < js[1].id {
                    (js[0], js[1])
                } else {
                    (js[1], js[0])
                };
                if first.conclusion.as_deref() != Some("failure") {
                    c.violations.push(format!(
                        "job {name} was re-run though GitHub concluded it {:?}",
                        first.conclusion
                    ));
                }
                if again.conclusion.as_deref() != Some("success") {
                    c.violations
                        .push(format!("job {name}'s re-run ended {:?}", again.conclusion));
                }
            }
            (true, 1) if ended_before_the_kill(jobs, js[0].id) => {}
            (true, 1) => c
                .violations
                .push(format!("job {name} was lost and not re-run")),
            (true, n) => c.violations.push(format!("job {name} was run {n} times")),
        }
    }
    c
}

/// Faults for the whole run on every endpoint under `paths`: some 5xx, some slow
/// answers.
fn background_faults(sim: &runner_manager::sim::SimHandle, paths: &str) {
    sim.add_fault(FaultRule::new(
        None,
        paths,
        Trigger::Probability(0.03),
        FaultAction::Status { status: 500 },
    ));
    sim.add_fault(FaultRule::new(
        None,
        paths,
        Trigger::Probability(0.04),
        FaultAction::Delay { ms: 700 },
    ));
}

/// One look at the world: live runner processes per profile and host (from /proc, each
/// mapped to its attempt by its root), JIT values and faults of runners, and now and
/// then every process's command line.
fn sample(
    w: &runner_manager::demo::World,
    store: &SqliteStore,
    profiles: &mut HashMap<i64, String>,
    obs: &mut Observed,
    pat: &str,
    scan_cmdlines: bool,
) {
    let attempts_dir = w.state_dir.join("attempts");
    let mut live: HashSet<i64> = HashSet::new();
    for pid in runner_manager::runner::processes_with_cwd_or_exe_under(&attempts_dir) {
        for link in ["cwd", "exe"] {
            let Ok(p) = std::fs::read_link(format!("/proc/{pid}/{link}")) else {
                continue;
            };
            let id = p
                .strip_prefix(std::fs::canonicalize(&attempts_dir).unwrap_or(attempts_dir.clone()))
                .ok()
                .and_then(|rest| rest.components().next())
                .and_then(|c| {
                    c.as_os_str()
                        .to_str()?
                        .split('.')
                        .next()?
                        .parse::<i64>()
                        .ok()
                });
            if let Some(id) = id
                && proc::alive(pid)
            {
                live.insert(id);
            }
        }
    }
    let mut per: BTreeMap<String, usize> = BTreeMap::new();
    for id in &live {
        let profile = match profiles.get(id) {
            Some(p) => p.clone(),
            None => match store.attempt(*id) {
                Ok(a) => {
                    profiles.insert(*id, a.profile.clone());
                    a.profile
                }
                Err(_) => "?".into(),
            },
        };
        *per.entry(profile).or_insert(0) += 1;
    }
    obs.capacity_samples += 1;
    obs.max_live_host = obs.max_live_host.max(live.len());
    if live.len() > CAPACITY as usize {
        obs.capacity_violations.push(format!(
            "{} live runners on a host of capacity {CAPACITY}: attempts {live:?}",
            live.len()
        ));
    }
    for (p, n) in &per {
        let m = obs.max_live.entry(p.clone()).or_insert(0);
        *m = (*m).max(*n);
        let max = if p == "gpu" { GPU_MAX } else { LINUX_MAX };
        if *n > max as usize {
            obs.capacity_violations
                .push(format!("{n} live runners of profile {p} (max {max})"));
        }
    }
    for (pid, jit) in proc::jit_processes() {
        if promises::jit_server(&jit).as_deref() != Some(w.sim.url()) {
            continue;
        }
        if obs.jit_values.insert(jit.clone())
            && let Some(env) = proc::nul_entries(pid, "environ")
            && env.iter().any(|e| promises::contains(e, pat.as_bytes()))
        {
            obs.environ_violations
                .push(format!("runner pid {pid} has the PAT in its environment"));
        }
    }
    for r in w.sim.runners() {
        if !r.faults.is_empty() {
            obs.runner_faults.entry(r.name.clone()).or_insert(r.faults);
        }
    }
    if scan_cmdlines {
        let secrets: Vec<&[u8]> = std::iter::once(pat.as_bytes())
            .chain(obs.jit_values.iter().map(Vec::as_slice))
            .collect();
        for pid in proc::pids() {
            let Some(args) = proc::nul_entries(pid, "cmdline") else {
                continue;
            };
            obs.cmdlines_scanned += 1;
            if args
                .iter()
                .any(|a| secrets.iter().any(|s| promises::contains(a, s)))
            {
                obs.cmdline_violations
                    .push(format!("pid {pid} has a secret on its command line"));
            }
        }
    }
}

/// Issue 15's two figures: from each restart after a SIGKILL (the run waits up to
/// 1.5 s before it) to the next scale set session opened, and from each scale set
/// job's queueing to the spawn of the runner that served it (its `starting` entry),
/// over the run. Injected faults (the service's 5xx and slow answers, runners that
/// crash at start) add their retries to both.
fn scaleset_figures(
    log: &[runner_manager::sim::LogEntry],
    killed_at: &[i64],
    restarts: &[i64],
    jobs: &[runner_manager::sim::JobState],
    attempts: &[runner_manager::domain::Attempt],
) -> String {
    fn pct(v: &[i64], p: f64) -> i64 {
        v[((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1]
    }
    let mut opened: Vec<i64> = log
        .iter()
        .filter(|e| e.method == "POST" && e.endpoint.ends_with("/sessions") && e.status == 200)
        .map(|e| e.at)
        .collect();
    opened.sort_unstable();
    let mut to_session: Vec<i64> = killed_at
        .iter()
        .filter_map(|k| restarts.iter().find(|r| *r >= k))
        .filter_map(|r| opened.iter().find(|at| *at >= r).map(|at| at - r))
        .collect();
    to_session.sort_unstable();
    let mut spawn: Vec<i64> = jobs
        .iter()
        .filter(|j| j.labels == ["linux"])
        .filter_map(|j| {
            let runner = j.runner_name.as_deref()?;
            let a = attempts.iter().find(|a| a.runner_name == runner)?;
            let at = a
                .history
                .iter()
                .find(|c| c.state == runner_manager::domain::AttemptState::Starting)?
                .at;
            Some((at - j.created_at).max(0))
        })
        .collect();
    spawn.sort_unstable();
    let mut out = String::new();
    if to_session.is_empty() {
        out.push_str("no session opened after a kill");
    } else {
        out.push_str(&format!(
            "restart after a kill -> new session p50 {} ms, max {} ms over {} kills",
            pct(&to_session, 0.5),
            to_session[to_session.len() - 1],
            to_session.len()
        ));
    }
    if !spawn.is_empty() {
        out.push_str(&format!(
            "; queued -> spawned p50 {} ms, p99 {} ms over {} jobs",
            pct(&spawn, 0.5),
            pct(&spawn, 0.99),
            spawn.len()
        ));
    }
    out
}

/// `--update`: the daemon's binary as a copy, a release directory offering a newer
/// version of it, and each handover timed from `update` to the daemon's exit.
mod update {
    use std::path::{Path, PathBuf};
    use std::process::{Child, Command, Stdio};
    use std::time::Instant;

    /// Copies the daemon's binary to `dir/bin/runner-manager`, lays out `dir/release`
    /// (the same program with a trailer, as version 99.0.0, and its SHA256SUMS) and sets
    /// it as the world's `release_source`. Returns the copy's path.
    pub fn prepare(w: &runner_manager::demo::World, dir: &Path) -> Result<PathBuf, String> {
        use runner_manager::selfupdate::release;
        use std::os::unix::fs::PermissionsExt;
        let err = |e: std::io::Error| format!("{}: {e}", dir.display());
        let (bin, rel) = (dir.join("bin"), dir.join("release"));
        std::fs::create_dir_all(&bin).map_err(err)?;
        std::fs::create_dir_all(&rel).map_err(err)?;
        let copy = bin.join("runner-manager");
        std::fs::copy(&w.binary, &copy).map_err(err)?;
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).map_err(err)?;
        let mut bytes = std::fs::read(&w.binary).map_err(err)?;
        bytes.extend_from_slice(b"\nchaos release 99.0.0\n");
        let name = release::asset_name("99.0.0", &release::target());
        std::fs::write(rel.join(&name), &bytes).map_err(err)?;
        let sum: String = ring::digest::digest(&ring::digest::SHA256, &bytes)
            .as_ref()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        std::fs::write(rel.join(release::SUMS), format!("{sum}  {name}\n")).map_err(err)?;
        let out = cli(
            &copy,
            &w.state_dir,
            &["host", "set", &format!("release_source={}", rel.display())],
        )?;
        if !out.status.success() {
            return Err(format!(
                "host set release_source: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(copy)
    }

    fn cli(bin: &Path, state_dir: &Path, args: &[&str]) -> Result<std::process::Output, String> {
        Command::new(bin)
            .arg("--state-dir")
            .arg(state_dir)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run {}: {e}", bin.display()))
    }

    #[derive(Default)]
    pub struct Handovers {
        /// When the update under way was run, and the daemon it was for.
        pub started: Option<(Instant, u32)>,
        pub done: usize,
        /// Milliseconds from each `update` to its daemon's exit.
        pub took_ms: Vec<u128>,
        /// Milliseconds the `update` command itself took (copy, verify, probe, rename).
        pub update_ms: Vec<u128>,
        pub violations: Vec<String>,
    }

    impl Handovers {
        /// Runs `update` against the world's release directory.
        pub fn start(&mut self, w: &runner_manager::demo::World, pid: u32) {
            let at = Instant::now();
            match cli(&w.binary, &w.state_dir, &["update"]) {
                Ok(o) if o.status.success() => {
                    self.update_ms.push(at.elapsed().as_millis());
                    self.started = Some((at, pid));
                }
                Ok(o) => {
                    self.violations.push(format!(
                        "update {}: {}",
                        o.status,
                        String::from_utf8_lossy(&o.stderr).trim()
                    ));
                    // Counted, so the run does not try forever.
                    self.done += 1;
                }
                Err(e) => {
                    self.violations.push(e);
                    self.done += 1;
                }
            }
        }

        /// The exit code of the daemon a handover is under way for, once it exited
        /// (it is then taken).
        pub fn exited(&self, daemon: &mut Option<Child>) -> Option<Option<i32>> {
            let (_, pid) = self.started?;
            let d = daemon.as_mut().filter(|d| d.id() == pid)?;
            let status = d.try_wait().ok()??;
            daemon.take();
            Some(status.code())
        }

        pub fn finish(&mut self, code: Option<i32>) {
            if let Some((at, _)) = self.started.take() {
                self.took_ms.push(at.elapsed().as_millis());
            }
            if code != Some(runner_manager::selfupdate::EXIT_HANDOVER) {
                self.violations
                    .push(format!("the daemon exited {code:?} after update, not 75"));
            }
            self.done += 1;
        }

        pub fn figures(&self) -> String {
            fn spread(v: &[u128]) -> String {
                let mut t = v.to_vec();
                t.sort_unstable();
                match (t.first(), t.get(t.len().saturating_sub(1) / 2), t.last()) {
                    (Some(min), Some(p50), Some(max)) => {
                        format!("min {min} ms, p50 {p50} ms, max {max} ms")
                    }
                    _ => "none".to_string(),
                }
            }
            format!(
                "handovers: {} updates; the update command {}; update -> daemon exit 75 {}",
                self.took_ms.len(),
                spread(&self.update_ms),
                spread(&self.took_ms)
            )
        }
    }
}
