//! Scenario benchmarks: the real daemon (a child process) against the simulated GitHub,
//! beside two baselines in the same run (a naive poller and a fixed pool), printing
//! one Markdown table. `cargo bench --bench scenarios [-- --small|--long] [--far]
//! [SCENARIO...]` with scenarios `steady`, `burst` (200 jobs), `burst60` (60 jobs, also
//! on a scale set), `burst300` (300 jobs against GitHub's secondary limits, run alone), `idle`, `history`, `scaleset`, `budget` (rate-limit units per job
//! draining a queue, with and without SIGKILLs, and a 500-unit budget's dry time; the
//! same drain with `workflow_job` webhooks, also alone as `budget-hooks`). `--far` puts GitHub 120 ms away
//! (500 ms more per JIT config, ±20%) and gives the runner install a real release's
//! file count, for every system alike; it runs steady, burst60, burst and scaleset
//! unless scenarios are named. Asserts no timing: it fails only when a scenario cannot
//! complete.

#[path = "scenarios/burst300.rs"]
mod burst300;
#[path = "scenarios/idle.rs"]
mod idle;
#[path = "support/mod.rs"]
mod support;

use runner_manager::demo::{World, stop_child};
use runner_manager::domain::{AttemptState, DemandSource};
use runner_manager::sim::JobStatus;
use runner_manager::store::{AttemptFilter, HistorySeed, SqliteStore, Store};
use runner_manager::timefmt::{Millis, now_millis};
use std::collections::{BTreeMap, HashMap};
use std::process::Command;
use std::time::{Duration, Instant};
use support::baseline::{self, Running};
use support::{Distance, Row, Sampler, pcts, proc, units, wait_until};

#[derive(Clone, Copy, PartialEq)]
enum Size {
    Small,
    Default,
    Long,
}

/// A run's configuration: its size and where GitHub is.
#[derive(Clone, Copy)]
struct Cfg {
    size: Size,
    distance: Distance,
}

impl Cfg {
    fn far(&self) -> bool {
        self.distance == Distance::Far
    }

    /// How long past its last arrival a workload of `n` jobs may take: a minute on
    /// loopback; far away, 4 s more per job, since the daemon as it is starts one
    /// runner at a time (a JIT config, 620 ms, then a root of a realistic install,
    /// about a second on a slow disk, and each exited runner's root to remove).
    fn slack_ms(&self, n: u64) -> u64 {
        if self.far() {
            60_000 + 4_000 * n
        } else {
            60_000
        }
    }

    /// Scenario names carry `, far` in the table when GitHub is far away, so one
    /// BENCHMARKS.md table never mixes the two.
    fn scenario(&self, name: &str) -> String {
        if self.far() {
            format!("{name}, far")
        } else {
            name.to_string()
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum System {
    Ours,
    /// Ours, with the profile's demand from its scale set's long poll.
    OursScaleSet,
    Naive,
    Pool(usize),
}

/// A job stream: (offset from the start in ms, job duration in ms) per job.
struct Workload {
    arrivals: Vec<(u64, u64)>,
    poll_secs: u64,
    /// The daemon's `max` for the profile and the host's capacity.
    max: u32,
    deadline: Duration,
    /// `workflow_job` webhooks on, each delivery this many ms after its change.
    hooks_late_ms: Option<u64>,
    /// Queue the jobs only once the daemon's first poll has read the (empty) queue,
    /// so that they wait for the next poll unless something else brings them.
    after_first_poll: bool,
}

/// What one system did with one workload.
#[derive(Default)]
struct Outcome {
    jobs: usize,
    served: usize,
    /// Per served job: from queued to its runner's process start.
    to_spawn: Vec<i64>,
    /// The daemon's own latency samples (ours only).
    store_samples: Vec<i64>,
    /// Per served job: from queued to a runner taking it.
    to_start: Vec<i64>,
    /// From the first job queued to the first of its runners spawned (0 when a runner
    /// that was up before, the fixed pool's, served the first).
    first_spawn_ms: i64,
    /// From the first job queued to the last of its runners spawned.
    spawn_span_ms: i64,
    /// Ours only, per runner that exited after its job: from its exit to its cleanup
    /// beginning (see `exit_to_cleanup`), all of them, and those whose runner exited
    /// before the last runner of the workload was spawned ("while a burst starts").
    exit_to_cleanup: Vec<i64>,
    exit_to_cleanup_while_starting: Vec<i64>,
    /// Exited runners whose cleanup had not begun when the daemon was told to stop
    /// (counted in the figures as beginning then).
    not_cleaned: usize,
    /// The sim's peak of requests in flight, per credential, over the run.
    peak_in_flight: BTreeMap<String, u32>,
    /// GitHub's secondary rate limits the system went over (the sim's count).
    secondary_hits: u64,
    /// Every runner spawned, from the first job queued, in order.
    spawns: Vec<i64>,
    /// The sim's request log over the run.
    log: Vec<runner_manager::sim::LogEntry>,
    units: u64,
    idle_runner_secs: f64,
    peak_rss_kb: u64,
    cpu_secs: f64,
}

impl Outcome {
    /// The highest peak over the credentials this system used.
    fn peak(&self) -> f64 {
        self.peak_in_flight.values().copied().max().unwrap_or(0) as f64
    }

    /// Runners started per second: served / (last spawn - first queued).
    fn rate(&self) -> f64 {
        self.served as f64 / (self.spawn_span_ms.max(1) as f64 / 1000.0)
    }

    /// The per-system line the brief asks for (and the table repeats).
    fn summary(&self, scn: &str, who: &str) -> String {
        let (p50, p99, _) = pcts(&self.to_spawn);
        let exits = if self.exit_to_cleanup.is_empty() {
            String::new()
        } else {
            format!(
                "; exit to cleanup p99 {} ms over {} exits ({} while starting: p99 {} ms; {} not begun when the daemon was stopped, counted as of then)",
                pcts(&self.exit_to_cleanup).1,
                self.exit_to_cleanup.len(),
                self.exit_to_cleanup_while_starting.len(),
                pcts(&self.exit_to_cleanup_while_starting).1,
                self.not_cleaned
            )
        };
        format!(
            "{scn}: {who}: first runner {} ms after the first job, all {} spawned by {} ms ({:.2}/s); queue-to-spawn p50 {p50} ms, p99 {p99} ms{exits}; peak in flight {:?}; secondary limits hit {}",
            self.first_spawn_ms,
            self.served,
            self.spawn_span_ms,
            self.rate(),
            self.peak_in_flight,
            self.secondary_hits
        )
    }
}

fn main() {
    let mut size = Size::Default;
    let mut distance = Distance::Loopback;
    let mut names: Vec<String> = Vec::new();
    for a in std::env::args().skip(1) {
        match a.as_str() {
            "--small" => size = Size::Small,
            "--long" => size = Size::Long,
            "--far" => distance = Distance::Far,
            // `cargo bench` passes `--bench` to harness-less targets.
            s if s.starts_with('-') => {}
            s => names.push(s.to_string()),
        }
    }
    let cfg = Cfg { size, distance };
    if names.is_empty() {
        let all: &[&str] = match distance {
            Distance::Loopback => &[
                "steady", "burst", "burst60", "idle", "history", "scaleset", "budget",
            ],
            // Idle and history do not depend on distance: waiting costs no request, and
            // `daemon --once` is one pass.
            Distance::Far => &["steady", "burst60", "burst", "scaleset", "wake"],
        };
        names = all.iter().map(|s| s.to_string()).collect();
    }
    println!(
        "scenarios: {} ({} build, {} config, {}), daemon {}",
        names.join(" "),
        support::profile(),
        match size {
            Size::Small => "small",
            Size::Default => "default",
            Size::Long => "long",
        },
        distance.describe(),
        support::daemon_binary().display()
    );
    let started = Instant::now();
    let mut rows = Vec::new();
    let mut failed = Vec::new();
    for name in &names {
        let t = Instant::now();
        let res = match name.as_str() {
            "steady" => steady(cfg),
            "burst" => burst(cfg, BurstKind::Large),
            "burst60" => burst(cfg, BurstKind::Sixty),
            "burst300" => burst300::burst300(cfg),
            "idle" => idle::idle(cfg),
            "history" => history(cfg),
            "scaleset" => scaleset(cfg),
            "budget" => budget(cfg),
            "wake" => wake(cfg),
            // Only the webhook rows of `budget`.
            "budget-hooks" => budget_hooks(cfg),
            // Only the calm REST row of `budget`, three times: its spread.
            "budget-rest" => budget_rest(cfg),
            // Issue 37's own measure: 120 jobs, 6 daemon restarts, REST and webhooks.
            "budget-restarts" => budget_restarts(cfg),
            other => Err(format!(
                "unknown scenario {other}; use steady, burst, burst60, burst300, idle, history, \
                 scaleset, wake, budget, budget-hooks, budget-rest or budget-restarts"
            )),
        };
        match res {
            Ok(r) => {
                eprintln!("{name}: done in {:.1?}", t.elapsed());
                rows.extend(r);
            }
            Err(e) => {
                eprintln!("{name}: FAILED: {e}");
                failed.push(name.clone());
            }
        }
    }
    println!();
    support::print_table(&rows);
    println!();
    println!("total wall time {:.1?}", started.elapsed());
    if !failed.is_empty() {
        eprintln!("scenarios that could not complete: {}", failed.join(", "));
        std::process::exit(1);
    }
}

/// Runs `wl` against one system in a fresh world.
fn run(system: System, wl: &Workload, cfg: Cfg) -> Result<Outcome, String> {
    let w = support::world_at(cfg.distance, wl.poll_secs, wl.max, wl.max, 5);
    if system == System::OursScaleSet {
        use_scale_set(&w)?;
    }
    if let Some(late) = wl.hooks_late_ms {
        hooks_on(&w, 0.0);
        w.sim.set_webhook_delay(Duration::from_millis(late));
    }
    let res = run_in(&w, system, wl).map_err(|e| {
        let who = match system {
            System::Ours => "the daemon".to_string(),
            System::OursScaleSet => "the daemon on a scale set".to_string(),
            System::Naive => "the naive poller".to_string(),
            System::Pool(n) => format!("the fixed pool of {n}"),
        };
        format!("{who}: {e} (state kept in {})", w.state_dir.display())
    });
    if let Ok(o) = &res {
        let who = match system {
            System::Ours => "ours".to_string(),
            System::OursScaleSet => "ours-scaleset".to_string(),
            System::Naive => "naive".to_string(),
            System::Pool(k) => format!("pool{k}"),
        };
        dump(&w, &who, &o.log, &["daemon.log"]);
    }
    if res.is_ok() {
        support::discard(w);
    } else {
        support::kill_under(&w.state_dir);
    }
    res
}

/// `RM_BENCH_DUMP=DIR`: a run's request log (JSON, one entry a line) and the daemon's
/// logs (`logs`, in the world's state directory) go to `DIR/<n>-<who>.requests` and
/// `DIR/<n>-<who>.<log>`, to be read after: which request spent what, and when.
fn dump(w: &World, who: &str, log: &[runner_manager::sim::LogEntry], logs: &[&str]) {
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let Some(dir) = std::env::var_os("RM_BENCH_DUMP").map(std::path::PathBuf::from) else {
        return;
    };
    let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let lines: Vec<String> = log
        .iter()
        .filter_map(|e| serde_json::to_string(e).ok())
        .collect();
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(dir.join(format!("{n}-{who}.requests")), lines.join("\n"));
    for l in logs {
        let _ = std::fs::copy(w.state_dir.join(l), dir.join(format!("{n}-{who}.{l}")));
    }
    eprintln!("dumped run {n} ({who}) to {}", dir.display());
}

fn run_in(w: &World, system: System, wl: &Workload) -> Result<Outcome, String> {
    let mut daemon = None;
    let mut baseline: Option<Running> = None;
    match system {
        System::Ours => {
            let d = w.spawn_daemon(&w.state_dir.join("daemon.log"))?;
            daemon = Some(d);
            // Ready once its first pass read the repository (demand, then visibility).
            if !wait_until(Duration::from_secs(30), || {
                w.sim.count("GET", "/repos/{owner}/{repo}") > 0
            }) {
                return Err("the daemon never made its first pass".into());
            }
            // Both run lists (queued, then in progress) read once.
            if wl.after_first_poll
                && !wait_until(Duration::from_secs(30), || {
                    w.sim.count("GET", "/repos/{owner}/{repo}/actions/runs") >= 2
                })
            {
                return Err("the daemon never polled".into());
            }
        }
        System::OursScaleSet => {
            let d = w.spawn_daemon(&w.state_dir.join("daemon.log"))?;
            daemon = Some(d);
            // Ready once it holds its scale set's message session.
            if !wait_until(Duration::from_secs(30), || {
                w.sim
                    .scale_sets()
                    .iter()
                    .any(|s| s.1 == SCALE_SET && w.sim.scaleset_sessions(s.0) == 1)
            }) {
                return Err("the daemon never opened its scale set session".into());
            }
        }
        System::Naive => {
            let env = baseline::env_for(w, "naive");
            baseline = Some(baseline::naive(env, Duration::from_secs(wl.poll_secs)));
        }
        System::Pool(n) => {
            let env = baseline::env_for(w, "pool");
            baseline = Some(baseline::pool(env, n));
            // The pool is always on: its runners are up before the first job (each
            // slot's directory laid out first: seconds each with a realistic install).
            wait_until(Duration::from_secs(60 + 10 * n as u64), || {
                w.sim.runners().iter().filter(|r| r.online).count() >= n
            });
        }
    }
    let pid = daemon.as_ref().map(|d| d.id() as i32);
    let cpu0 = pid.and_then(proc::usage).map_or(0, |u| u.cpu_ticks);
    let units0 = units(&w.sim);
    let sampler = Sampler::start(&w.sim, pid, Duration::from_millis(100));
    let labels = match system {
        System::OursScaleSet => &[SCALE_SET][..],
        _ => support::JOB_LABELS,
    };
    let t0 = Instant::now();
    for (i, (at, dur)) in wl.arrivals.iter().enumerate() {
        let due = t0 + Duration::from_millis(*at);
        if let Some(d) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
        w.sim
            .enqueue_job(support::REPO, &format!("job-{i}"), labels, *dur);
    }
    let n = wl.arrivals.len();
    let done = wait_until(wl.deadline, || support::all_completed(&w.sim, n));
    let cpu1 = pid.and_then(proc::usage).map_or(0, |u| u.cpu_ticks);
    let sampled = sampler.finish();
    let mut out = Outcome {
        units: units(&w.sim) - units0,
        idle_runner_secs: sampled.idle_runner_secs,
        peak_rss_kb: sampled.peak_rss_kb,
        cpu_secs: proc::cpu_secs(cpu1.saturating_sub(cpu0)),
        ..Outcome::default()
    };
    // (exit, cleanup begun) of each runner that exited after its job (ours only).
    let mut exits: Vec<(Millis, Option<Millis>)> = Vec::new();
    let mut stopped_at = now_millis();
    let spawned_at: HashMap<String, Millis> = match (daemon.as_mut(), baseline) {
        (Some(d), _) => {
            stopped_at = now_millis();
            stop_child(d, Duration::from_secs(20));
            let store = SqliteStore::open(&w.state_dir).map_err(|e| e.to_string())?;
            out.store_samples = store
                .latency_samples(None, 0)
                .map_err(|e| e.to_string())?
                .into_iter()
                .map(|s| s.latency_ms)
                .collect();
            let attempts = store
                .attempts(&AttemptFilter::default())
                .map_err(|e| e.to_string())?;
            exits = exit_to_cleanup(w, &attempts);
            attempts
                .into_iter()
                .filter_map(|a| Some((a.runner_name, support::ticks_to_millis(a.pid_start?))))
                .collect()
        }
        (None, Some(b)) => b.finish().spawned_at,
        (None, None) => HashMap::new(),
    };
    out.peak_in_flight = w.sim.peak_in_flight();
    out.secondary_hits = w.sim.secondary_hits().total;
    out.log = w.sim.request_log();
    let jobs = w.sim.jobs();
    out.jobs = jobs.len();
    let first_queued = jobs.iter().map(|j| j.created_at).min().unwrap_or(0);
    let mut last_spawn = first_queued;
    let mut first_spawn: Option<Millis> = None;
    for j in jobs.iter().filter(|j| j.status == JobStatus::Completed) {
        out.served += 1;
        if let Some(s) = j.started_at {
            out.to_start.push(s - j.created_at);
        }
        if let Some(at) = j.runner_name.as_ref().and_then(|n| spawned_at.get(n)) {
            out.to_spawn.push((at - j.created_at).max(0));
            last_spawn = last_spawn.max(*at);
            out.spawns.push(at - first_queued);
            first_spawn = Some(first_spawn.map_or(*at, |f| f.min(*at)));
        }
    }
    out.spawns.sort_unstable();
    out.spawn_span_ms = last_spawn - first_queued;
    out.first_spawn_ms = first_spawn.map_or(0, |f| (f - first_queued).max(0));
    for (exit, cleanup) in exits {
        // A cleanup that had not begun when the daemon was told to stop counts as
        // beginning then: a lower bound, so a daemon that never looks does not look
        // quick by leaving its slowest cases out.
        let c = cleanup.unwrap_or_else(|| {
            out.not_cleaned += 1;
            stopped_at
        });
        // The pass stamps its changes with the time it started; a runner that exited
        // while that pass was reading the store shows as a few ms "early".
        let d = (c - exit).max(0);
        out.exit_to_cleanup.push(d);
        if exit < last_spawn {
            out.exit_to_cleanup_while_starting.push(d);
        }
    }
    if !done {
        return Err(format!(
            "only {} of {n} jobs completed within {:?}",
            out.served, wl.deadline
        ));
    }
    Ok(out)
}

/// Per attempt whose runner exited after its job: when it exited, and when its cleanup
/// began (None: not before the daemon was stopped). Which runners exited after a job,
/// and when, comes from their logs, not from the daemon: a runner's log holds
/// `... completed with result: ...`, the last line the simulated runner prints after
/// reporting its job and before it returns, and the log's last write (its mtime) is
/// that exit; nothing else writes the file until cleanup (which bounds it only when it
/// is larger than a runner of these benchmarks ever writes). The cleanup's beginning is
/// the `destroying` entry of the attempt's history in the store: the daemon records it
/// before it kills, deregisters and removes the root (intent first). So an exit the
/// daemon never got to look at is counted too.
fn exit_to_cleanup(
    w: &World,
    attempts: &[runner_manager::domain::Attempt],
) -> Vec<(Millis, Option<Millis>)> {
    attempts
        .iter()
        .filter_map(|a| {
            let log = runner_manager::runner::attempt_log(&w.state_dir, a.id);
            let text = std::fs::read_to_string(&log).ok()?;
            if !text.contains(" completed with result: ") {
                return None;
            }
            let mtime = std::fs::metadata(log).ok()?.modified().ok()?;
            let exit = mtime
                .duration_since(std::time::UNIX_EPOCH)
                .ok()?
                .as_millis() as Millis;
            let cleanup = a
                .history
                .iter()
                .find(|c| c.state == AttemptState::Destroying)
                .map(|c| c.at);
            Some((exit, cleanup))
        })
        .collect()
}

fn latency_rows(scn: &str, o: &Outcome, nv: &Outcome, pl: &Outcome) -> Vec<Row> {
    let mut rows = Vec::new();
    let (a, b) = (pcts(&o.to_spawn), pcts(&nv.to_spawn));
    for (label, x, y) in [("p50", a.0, b.0), ("p99", a.1, b.1), ("max", a.2, b.2)] {
        rows.push(
            Row::new(scn, &format!("queue-to-spawn {label}"), "ms")
                .ours(x as f64)
                .naive(y as f64),
        );
    }
    let s = pcts(&o.store_samples);
    rows.push(Row::new(scn, "queue-to-spawn p99, daemon's own samples", "ms").ours(s.1 as f64));
    let (a, b, c) = (pcts(&o.to_start), pcts(&nv.to_start), pcts(&pl.to_start));
    for (label, x, y, z) in [("p50", a.0, b.0, c.0), ("p99", a.1, b.1, c.1)] {
        rows.push(
            Row::new(scn, &format!("queue-to-job-start {label}"), "ms")
                .ours(x as f64)
                .naive(y as f64)
                .pool(z as f64),
        );
    }
    let per_job = |o: &Outcome| o.units as f64 / o.served.max(1) as f64;
    rows.push(
        Row::new(scn, "rate-limit units per served job", "units")
            .ours(per_job(o))
            .naive(per_job(nv))
            .pool(per_job(pl)),
    );
    rows.push(
        Row::new(scn, "idle runner time", "runner-s")
            .ours(o.idle_runner_secs)
            .naive(nv.idle_runner_secs)
            .pool(pl.idle_runner_secs),
    );
    rows.extend(cleanup_rows(scn, o, false));
    rows.push(
        Row::new(scn, "peak requests in flight, one credential", "requests")
            .ours(o.peak())
            .naive(nv.peak())
            .pool(pl.peak()),
    );
    rows.push(Row::new(scn, "daemon peak RSS", "MB").ours(o.peak_rss_kb as f64 / 1024.0));
    rows.push(Row::new(scn, "daemon CPU", "s").ours(o.cpu_secs));
    rows
}

/// Runner exit to cleanup begins (ours): p50/p99 over every exit, or over the exits
/// while the workload's runners were still being started (a burst).
fn cleanup_rows(scn: &str, o: &Outcome, while_starting: bool) -> Vec<Row> {
    let (v, what) = if while_starting {
        (
            &o.exit_to_cleanup_while_starting,
            ", while the burst starts",
        )
    } else {
        (&o.exit_to_cleanup, "")
    };
    let mut rows =
        vec![Row::new(scn, &format!("runner exits{what}"), "runners").ours(v.len() as f64)];
    if !v.is_empty() {
        let (p50, p99, _) = pcts(v);
        rows.push(
            Row::new(
                scn,
                &format!("runner exit to cleanup begins p50{what}"),
                "ms",
            )
            .ours(p50 as f64),
        );
        rows.push(
            Row::new(
                scn,
                &format!("runner exit to cleanup begins p99{what}"),
                "ms",
            )
            .ours(p99 as f64),
        );
    }
    rows
}

fn steady(cfg: Cfg) -> Result<Vec<Row>, String> {
    let (n, every_ms, job_ms, pool) = match cfg.size {
        Size::Small => (16, 500, 1500, 4),
        Size::Default => (120, 500, 2000, 4),
        Size::Long => (600, 500, 2000, 4),
    };
    let wl = Workload {
        arrivals: (0..n).map(|i| (i * every_ms, job_ms)).collect(),
        poll_secs: 2,
        max: 16,
        deadline: Duration::from_millis(n * every_ms + cfg.slack_ms(n)),
        hooks_late_ms: None,
        after_first_poll: false,
    };
    let scn = cfg.scenario("steady");
    let ours = run(System::Ours, &wl, cfg)?;
    let nv = run(System::Naive, &wl, cfg)?;
    let pl = run(System::Pool(pool), &wl, cfg)?;
    println!(
        "steady: {n} jobs, one every {every_ms} ms, {job_ms} ms each; poll 2 s; fixed pool of {pool}; {}",
        cfg.distance.describe()
    );
    for (who, o) in [("ours", &ours), ("naive poller", &nv), ("fixed pool", &pl)] {
        println!("{}", o.summary(&scn, who));
    }
    let mut rows = latency_rows(&scn, &ours, &nv, &pl);
    rows.insert(
        0,
        Row::new(&scn, "jobs served", "jobs")
            .ours(ours.served as f64)
            .naive(nv.served as f64)
            .pool(pl.served as f64),
    );
    Ok(rows)
}

/// Webhooks that start runners (issue 37): a burst queued at once, polled every
/// 30 s, with each `workflow_job` delivery 0.5 s late, and the same polled alone.
fn wake(cfg: Cfg) -> Result<Vec<Row>, String> {
    let n: usize = match cfg.size {
        Size::Small => 10,
        _ => 20,
    };
    let mut wl = Workload {
        arrivals: (0..n).map(|_| (0, 2000)).collect(),
        poll_secs: 30,
        max: n as u32 + 5,
        deadline: Duration::from_millis(120_000 + cfg.slack_ms(n as u64)),
        hooks_late_ms: Some(500),
        after_first_poll: true,
    };
    let scn = cfg.scenario("wake");
    let hooked = run(System::Ours, &wl, cfg)?;
    wl.hooks_late_ms = None;
    let polled = run(System::Ours, &wl, cfg)?;
    println!(
        "wake: {n} jobs queued at once, 2000 ms each; poll 30 s; deliveries 0.5 s late; {}",
        cfg.distance.describe()
    );
    for (who, o) in [
        ("ours, webhooks", &hooked),
        ("ours, polling alone", &polled),
    ] {
        println!("{}", o.summary(&scn, who));
    }
    let secs = |ms: i64| ms as f64 / 1000.0;
    Ok(vec![
        Row::new(&scn, "first runner spawned, webhooks", "s").ours(secs(hooked.first_spawn_ms)),
        Row::new(&scn, "all runners spawned, webhooks", "s").ours(secs(hooked.spawn_span_ms)),
        Row::new(&scn, "first runner spawned, polling alone", "s")
            .ours(secs(polled.first_spawn_ms)),
        Row::new(&scn, "all runners spawned, polling alone", "s").ours(secs(polled.spawn_span_ms)),
    ])
}

#[derive(Clone, Copy, PartialEq)]
enum BurstKind {
    /// `burst`: 200 jobs (50 small), ours on REST against both baselines.
    Large,
    /// `burst60`: the goal table's 60 jobs (10 small), ours on REST and on a
    /// scale set against both baselines.
    Sixty,
}

fn burst(cfg: Cfg, kind: BurstKind) -> Result<Vec<Row>, String> {
    let (n, job_ms, pool) = match (kind, cfg.size) {
        (BurstKind::Large, Size::Small) => (50, 1000, 10),
        (BurstKind::Large, _) => (200, 2000, 20),
        (BurstKind::Sixty, Size::Small) => (10, 1000, 4),
        (BurstKind::Sixty, _) => (60, 2000, 10),
    };
    let wl = Workload {
        arrivals: (0..n).map(|_| (0, job_ms)).collect(),
        poll_secs: 2,
        max: n as u32 + 10,
        deadline: Duration::from_millis(120_000 + n * 500 + cfg.slack_ms(n)),
        hooks_late_ms: None,
        after_first_poll: false,
    };
    let name = match kind {
        BurstKind::Large => "burst",
        BurstKind::Sixty => "burst60",
    };
    let scn = cfg.scenario(name);
    let ours = run(System::Ours, &wl, cfg)?;
    let ss = match kind {
        BurstKind::Sixty => Some(run(System::OursScaleSet, &wl, cfg)?),
        BurstKind::Large => None,
    };
    let nv = run(System::Naive, &wl, cfg)?;
    let pl = run(System::Pool(pool), &wl, cfg)?;
    println!(
        "{name}: {n} jobs queued at once, {job_ms} ms each; poll 2 s; max and host capacity {}; fixed pool of {pool}; {}",
        wl.max,
        cfg.distance.describe()
    );
    let mut systems = vec![("ours", &ours)];
    if let Some(ss) = &ss {
        systems.push(("ours on a scale set", ss));
    }
    systems.extend([("naive poller", &nv), ("fixed pool", &pl)]);
    for (who, o) in systems {
        println!("{}", o.summary(&scn, who));
    }
    let mut rows = vec![
        Row::new(&scn, "jobs served", "jobs")
            .ours(ours.served as f64)
            .naive(nv.served as f64)
            .pool(pl.served as f64),
    ];
    rows.extend(spawn_rows(&scn, "", &ours, &nv, &pl));
    rows.extend(cleanup_rows(&scn, &ours, true));
    if let Some(ss) = &ss {
        rows.extend(spawn_rows(&scn, ", scale set", ss, &nv, &pl));
        rows.extend(cleanup_rows(&scn, ss, true).into_iter().map(|mut r| {
            r.figure.push_str(", scale set");
            r
        }));
    }
    rows.extend(latency_rows(&scn, &ours, &nv, &pl));
    Ok(rows)
}

/// A burst's start: first runner, all runners, the rate, and the requests in flight;
/// for a system other than ours on REST (`what` names it) its queue-to-spawn too, which
/// `latency_rows` gives for ours on REST.
fn spawn_rows(scn: &str, what: &str, o: &Outcome, nv: &Outcome, pl: &Outcome) -> Vec<Row> {
    let (p50, p99, _) = pcts(&o.to_spawn);
    let (np50, np99, _) = pcts(&nv.to_spawn);
    let mut rows = vec![
        Row::new(scn, &format!("first runner spawned{what}"), "ms")
            .ours(o.first_spawn_ms as f64)
            .naive(nv.first_spawn_ms as f64)
            .pool(pl.first_spawn_ms as f64),
        Row::new(scn, &format!("time to spawn every runner{what}"), "ms")
            .ours(o.spawn_span_ms as f64)
            .naive(nv.spawn_span_ms as f64)
            .pool(pl.spawn_span_ms as f64),
        Row::new(scn, &format!("runners started per second{what}"), "1/s")
            .ours(o.rate())
            .naive(nv.rate())
            .pool(pl.rate())
            .higher_better(),
        Row::new(scn, &format!("secondary limits hit{what}"), "403s")
            .ours(o.secondary_hits as f64)
            .naive(nv.secondary_hits as f64)
            .pool(pl.secondary_hits as f64),
    ];
    if !what.is_empty() {
        rows.push(
            Row::new(scn, &format!("queue-to-spawn p50{what}"), "ms")
                .ours(p50 as f64)
                .naive(np50 as f64),
        );
        rows.push(
            Row::new(scn, &format!("queue-to-spawn p99{what}"), "ms")
                .ours(p99 as f64)
                .naive(np99 as f64),
        );
        rows.push(
            Row::new(
                scn,
                &format!("peak requests in flight, one credential{what}"),
                "requests",
            )
            .ours(o.peak())
            .naive(nv.peak())
            .pool(pl.peak()),
        );
    }
    rows
}

/// The scale set (and label) the `scaleset` scenario's profile registers its runners in.
const SCALE_SET: &str = "linux";

/// Turns the world's `linux` profile to `demand=scaleset` (its scale set is named
/// `linux`, which is also its only label, so jobs reach it with `runs-on: linux`) and
/// removes the `gpu` profile, so no demand is read from REST at all.
fn use_scale_set(w: &World) -> Result<(), String> {
    let store = SqliteStore::open(&w.state_dir).map_err(|e| e.to_string())?;
    let host = store.host_or_create().map_err(|e| e.to_string())?;
    let mut p = store.profile(SCALE_SET).map_err(|e| e.to_string())?;
    p.set_labels("--labels", &[SCALE_SET.to_string()], &host.os, &host.arch)
        .map_err(|e| e.to_string())?;
    p.demand = DemandSource::Scaleset;
    // The world's other profile polls REST; without it the target reads no queued jobs.
    store.remove_profile("gpu").map_err(|e| e.to_string())?;
    store
        .update_profile(&p, p.revision)
        .map(drop)
        .map_err(|e| e.to_string())
}

/// The steady stream again, served through the scale set's long poll, beside our own
/// REST polling (2 s) and the naive poller on the same stream. `max` is well above the
/// stream's concurrency so no job waits for a slot: the latency is the demand path's.
fn scaleset(cfg: Cfg) -> Result<Vec<Row>, String> {
    let (n, every_ms, job_ms) = match cfg.size {
        Size::Small => (16, 500, 1500),
        Size::Default => (120, 500, 2000),
        Size::Long => (600, 500, 2000),
    };
    let wl = Workload {
        arrivals: (0..n).map(|i| (i * every_ms, job_ms)).collect(),
        poll_secs: 2,
        max: 24,
        deadline: Duration::from_millis(n * every_ms + cfg.slack_ms(n)),
        hooks_late_ms: None,
        after_first_poll: false,
    };
    let ss = run(System::OursScaleSet, &wl, cfg)?;
    let rest = run(System::Ours, &wl, cfg)?;
    let nv = run(System::Naive, &wl, cfg)?;
    println!(
        "scaleset: {n} jobs, one every {every_ms} ms, {job_ms} ms each; max and host capacity {}; \
         ours through the scale set's long poll, ours polling REST every 2 s, naive poller every 2 s; {}",
        wl.max,
        cfg.distance.describe()
    );
    let scn = cfg.scenario("scaleset");
    for (who, o) in [
        ("ours on a scale set", &ss),
        ("ours polling REST", &rest),
        ("naive poller", &nv),
    ] {
        println!("{}", o.summary(&scn, who));
    }
    let per_job = |o: &Outcome| o.units as f64 / o.served.max(1) as f64;
    let mut rows = vec![
        Row::new(&scn, "jobs served", "jobs")
            .ours(ss.served as f64)
            .naive(nv.served as f64),
    ];
    let (a, b, c) = (pcts(&ss.to_spawn), pcts(&rest.to_spawn), pcts(&nv.to_spawn));
    for (label, x, y, z) in [
        ("p50", a.0, b.0, c.0),
        ("p99", a.1, b.1, c.1),
        ("max", a.2, b.2, c.2),
    ] {
        rows.push(
            Row::new(&scn, &format!("assigned-to-spawn {label}, scale set"), "ms")
                .ours(x as f64)
                .naive(z as f64),
        );
        rows.push(
            Row::new(
                &scn,
                &format!("queue-to-spawn {label}, ours polling REST"),
                "ms",
            )
            .ours(y as f64)
            .naive(z as f64),
        );
    }
    let s = pcts(&ss.store_samples);
    rows.push(Row::new(&scn, "assigned-to-spawn p99, daemon's own samples", "ms").ours(s.1 as f64));
    let (a, b) = (pcts(&ss.to_start), pcts(&nv.to_start));
    rows.push(
        Row::new(&scn, "queue-to-job-start p50, scale set", "ms")
            .ours(a.0 as f64)
            .naive(b.0 as f64),
    );
    rows.push(
        Row::new(&scn, "queue-to-job-start p99, scale set", "ms")
            .ours(a.1 as f64)
            .naive(b.1 as f64),
    );
    rows.push(
        Row::new(&scn, "rate-limit units per served job, scale set", "units")
            .ours(per_job(&ss))
            .naive(per_job(&nv)),
    );
    rows.push(
        Row::new(
            &scn,
            "rate-limit units per served job, ours polling REST",
            "units",
        )
        .ours(per_job(&rest))
        .naive(per_job(&nv)),
    );
    rows.extend(cleanup_rows(&scn, &ss, false).into_iter().map(|mut r| {
        r.figure.push_str(", scale set");
        r
    }));
    rows.push(
        Row::new(
            &scn,
            "peak requests in flight, one credential, scale set",
            "requests",
        )
        .ours(ss.peak())
        .naive(nv.peak()),
    );
    rows.push(
        Row::new(
            &scn,
            "peak requests in flight, one credential, ours polling REST",
            "requests",
        )
        .ours(rest.peak())
        .naive(nv.peak()),
    );
    rows.push(
        Row::new(&scn, "daemon peak RSS, scale set", "MB").ours(ss.peak_rss_kb as f64 / 1024.0),
    );
    rows.push(Row::new(&scn, "daemon CPU, scale set", "s").ours(ss.cpu_secs));
    println!(
        "scaleset: assigned-to-spawn p99 {} ms through the scale set against {} ms polling REST ({:.1}x); \
         {:.2} against {:.2} rate-limit units per served job",
        a_p99(&ss),
        a_p99(&rest),
        a_p99(&rest) as f64 / a_p99(&ss).max(1) as f64,
        per_job(&ss),
        per_job(&rest),
    );
    Ok(rows)
}

fn a_p99(o: &Outcome) -> i64 {
    pcts(&o.to_spawn).1
}

/// Pass time over a growing history: the wall time of `runner-manager daemon --once`
/// (a whole process: open, sweep, one pass with its demand read), and in-process the
/// every-pass store reads.
fn history(cfg: Cfg) -> Result<Vec<Row>, String> {
    let sizes: &[i64] = match cfg.size {
        Size::Small => &[1_000, 10_000],
        Size::Default => &[1_000, 10_000, 100_000],
        Size::Long => &[1_000, 10_000, 100_000, 1_000_000],
    };
    println!(
        "history N: N cleaned attempts in the store (seeded in one transaction); `daemon --once` is a whole process (exec, open, sweep, one pass with its demand read from the sim); the store reads are open attempts, live counts, profiles, host, in-process"
    );
    let mut rows = Vec::new();
    for &n in sizes {
        let w = support::world_at(cfg.distance, 5, 4, 8, 5);
        let res = history_one(&w, n, cfg);
        support::discard(w);
        rows.extend(res?);
    }
    Ok(rows)
}

fn history_one(w: &World, n: i64, cfg: Cfg) -> Result<Vec<Row>, String> {
    let scn = cfg.scenario(&format!("history {n}"));
    let store = SqliteStore::open(&w.state_dir).map_err(|e| e.to_string())?;
    let host = store.host_or_create().map_err(|e| e.to_string())?;
    let t = Instant::now();
    seed_history(&store, &host.id, n)?;
    eprintln!("history: seeded {n} attempts in {:.1?}", t.elapsed());
    let mut once = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let st = Command::new(&w.binary)
            .arg("--state-dir")
            .arg(&w.state_dir)
            .args(["daemon", "--once", "--log-level", "warn"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .map_err(|e| format!("cannot run daemon --once: {e}"))?;
        if !st.success() {
            return Err(format!("daemon --once exited with {st}"));
        }
        once.push(t.elapsed().as_micros() as i64);
    }
    let mut reads = Vec::new();
    for _ in 0..100 {
        let t = Instant::now();
        let open = store.open_attempts(&host.id).map_err(|e| e.to_string())?;
        let _ = store.live_counts().map_err(|e| e.to_string())?;
        let _ = store.profiles().map_err(|e| e.to_string())?;
        let _ = store.host_or_create().map_err(|e| e.to_string())?;
        std::hint::black_box(open);
        reads.push(t.elapsed().as_micros() as i64);
    }
    let (o50, _, omax) = pcts(&once);
    let (r50, r99, _) = pcts(&reads);
    Ok(vec![
        Row::new(&scn, "daemon --once wall time, median of 5", "ms").ours(o50 as f64 / 1000.0),
        Row::new(&scn, "daemon --once wall time, max of 5", "ms").ours(omax as f64 / 1000.0),
        Row::new(&scn, "every-pass store reads p50", "ms").ours(r50 as f64 / 1000.0),
        Row::new(&scn, "every-pass store reads p99", "ms").ours(r99 as f64 / 1000.0),
    ])
}

/// Inserts `n` cleaned attempts with two events each in one transaction, ended before
/// the last minute, through the store's seeding (the store benchmark seeds the same way).
fn seed_history(store: &SqliteStore, host_id: &str, n: i64) -> Result<(), String> {
    store
        .seed_history(&HistorySeed {
            host_id,
            target: "demo",
            profiles: &["linux"],
            n,
            open: 0,
            closed: AttemptState::Finished,
            base: now_millis() - n * 1000 - 60_000,
        })
        .map_err(|e| format!("seeding the history: {e}"))
}

/// `n` jobs of `job_ms` queued at once in the world's repository.
fn enqueue_burst(w: &World, n: usize, job_ms: u64) {
    for i in 0..n {
        w.sim.enqueue_job(
            support::REPO,
            &format!("job-{i}"),
            support::JOB_LABELS,
            job_ms,
        );
    }
}

/// What one run of the budget scenario measured.
struct Spend {
    served: usize,
    /// Rate-limit units spent from the daemon's start, and of them on GETs (reading:
    /// the queue, the runner list, the guard's facts).
    units: u64,
    poll_units: u64,
    /// Of the GETs, those that only look for work: every read but each run's first
    /// jobs list (without which no job's labels are known, so it is part of what
    /// serving the job costs, like its JIT config).
    looking_units: u64,
    /// Time with jobs queued, no runner registered, and no units left.
    dry_ms: i64,
    wall_ms: i64,
    kills: usize,
}

impl Spend {
    fn per_job(&self) -> f64 {
        self.units as f64 / self.served.max(1) as f64
    }

    fn poll_share(&self) -> f64 {
        100.0 * self.poll_units as f64 / self.units.max(1) as f64
    }

    fn looking_share(&self) -> f64 {
        100.0 * self.looking_units as f64 / self.units.max(1) as f64
    }
}

/// The counted GETs of `spent` less each run's first jobs list (see
/// [`Spend::looking_units`]).
fn looking_units(spent: &[&runner_manager::sim::LogEntry]) -> u64 {
    let mut first = std::collections::BTreeSet::new();
    spent
        .iter()
        .filter(|e| e.method == "GET")
        .filter(|e| !(e.endpoint.ends_with("/jobs") && first.insert(e.path.clone())))
        .count() as u64
}

/// `n` jobs queued at once drained by the daemon with `max` runners, SIGKILLed and
/// started again `kills` times spread over the drain; with `rate_limit` the simulated
/// credential has that many units an hour. Samples every 100 ms whether the target
/// has run dry (jobs queued, no runner registered, no units left). A drain the
/// budget cannot finish ends at `deadline`, its dry time counted to then.
///
/// With `hooks` (the share of deliveries lost) the daemon takes `workflow_job`
/// webhooks from the sim, and the queue is enqueued once its listener answers (as
/// GitHub's deliveries come while a daemon runs).
#[allow(clippy::too_many_arguments)]
fn drain(
    cfg: Cfg,
    n: usize,
    job_ms: u64,
    max: u32,
    kills: usize,
    rate_limit: Option<u64>,
    deadline: Duration,
    hooks: Option<f64>,
) -> Result<Spend, String> {
    let w = support::world_at(cfg.distance, 1, max, max, 5);
    let limit = rate_limit.unwrap_or(5000);
    w.sim.with_state(|st| st.cfg.rate_limit = limit);
    let log_path = |i: usize| w.state_dir.join(format!("daemon-{i}.log"));
    let listen = hooks.map(|drop| hooks_on(&w, drop));
    let t0 = now_millis();
    if listen.is_none() {
        enqueue_burst(&w, n, job_ms);
    }
    let mut daemon = w.spawn_daemon(&log_path(0))?;
    if let Some(addr) = listen {
        wait_until(Duration::from_secs(30), || {
            std::net::TcpStream::connect(addr).is_ok()
        });
        enqueue_burst(&w, n, job_ms);
    }
    let start = Instant::now();
    let mut killed = 0;
    let mut dry_ms = 0;
    let mut last = now_millis();
    let completed = |w: &World| {
        w.sim
            .jobs()
            .iter()
            .filter(|j| j.status == JobStatus::Completed)
            .count()
    };
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let now = now_millis();
        let done = completed(&w);
        let queued = w.sim.jobs().iter().any(|j| j.status == JobStatus::Queued);
        if queued && w.sim.runners().is_empty() && units(&w.sim) >= limit {
            dry_ms += now - last;
        }
        last = now;
        if done >= n || start.elapsed() > deadline {
            break;
        }
        if killed < kills && done >= (killed + 1) * n / (kills + 1) {
            let _ = daemon.kill();
            let _ = daemon.wait();
            killed += 1;
            daemon = w.spawn_daemon(&log_path(killed))?;
        }
    }
    let served = completed(&w);
    stop_child(&mut daemon, Duration::from_secs(20));
    let log = w.sim.request_log();
    let logs: Vec<String> = (0..=killed).map(|i| format!("daemon-{i}.log")).collect();
    let logs: Vec<&str> = logs.iter().map(String::as_str).collect();
    let who = format!("drain{n}-kills{killed}-hooks{}", hooks.is_some());
    dump(&w, &who, &log, &logs);
    let spent: Vec<_> = log.iter().filter(|e| e.counted && e.at >= t0).collect();
    let mut by_endpoint: BTreeMap<String, usize> = BTreeMap::new();
    for e in &spent {
        *by_endpoint
            .entry(format!("{} {}", e.method, e.endpoint))
            .or_default() += 1;
    }
    println!("budget: {n} queued, {killed} SIGKILLs: units by endpoint {by_endpoint:?}");
    if hooks.is_some() {
        println!("budget: webhooks {:?}", w.sim.webhook_stats());
    }
    let out = Spend {
        served,
        units: spent.len() as u64,
        poll_units: spent.iter().filter(|e| e.method == "GET").count() as u64,
        looking_units: looking_units(&spent),
        dry_ms,
        wall_ms: now_millis() - t0,
        kills: killed,
    };
    if served < n {
        support::kill_under(&w.state_dir);
        println!(
            "budget: {served} of {n} served; state kept in {}",
            w.state_dir.display()
        );
    } else {
        support::discard(w);
    }
    Ok(out)
}

/// Turns the world's webhook listener on (a free loopback port, a secret file) and
/// points the sim's hook at it, losing `drop` of the deliveries; returns the address.
fn hooks_on(w: &World, drop: f64) -> std::net::SocketAddr {
    use std::os::unix::fs::PermissionsExt;
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port");
    let secret = "bench-webhook-secret";
    let file = w.state_dir.join("webhook-secret");
    std::fs::write(&file, secret).expect("write the secret");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let store = SqliteStore::open(&w.state_dir).expect("open the world's store");
    use runner_manager::domain::host_settings::Beside;
    store
        .kv_put(Beside::WebhookListen.kv_key(), &addr.to_string())
        .expect("set webhook_listen");
    store
        .kv_put(
            Beside::WebhookSecretFile.kv_key(),
            &file.display().to_string(),
        )
        .expect("set webhook_secret_file");
    w.sim
        .set_webhook(Some((&format!("http://{addr}/webhook"), secret)));
    w.sim.set_webhook_drop(drop);
    addr
}

/// One drain's units per served job: printed, and a row (an error if it did not
/// serve all `n`).
fn drain_row(scn: &str, who: &str, s: &Spend, n: usize) -> Result<Row, String> {
    println!(
        "{scn}: {who}: {} of the jobs served in {:.1} s; {} units ({:.2} a job)",
        s.served,
        s.wall_ms as f64 / 1000.0,
        s.units,
        s.per_job(),
    );
    if s.served < n {
        return Err(format!("{who}: {} of {n} served", s.served));
    }
    Ok(Row::new(scn, &format!("units per served job, {who}"), "units").ours(s.per_job()))
}

/// The 120-job drain polling REST, calm, three times over: the units per served job
/// move by a few hundredths from one drain to the next (how the reads fall against the
/// runs' moves), which one drain cannot show.
fn budget_rest(cfg: Cfg) -> Result<Vec<Row>, String> {
    let (n, job_ms) = match cfg.size {
        Size::Small => (30, 500),
        _ => (120, 500),
    };
    let deadline = Duration::from_millis(120_000 + cfg.slack_ms(n as u64));
    let scn = cfg.scenario("budget");
    (1..=3)
        .map(|i| {
            let s = drain(cfg, n, job_ms, 4, 0, None, deadline, None)?;
            drain_row(
                &scn,
                &format!("{n} queued, max 4, polling REST, drain {i} of 3"),
                &s,
                n,
            )
        })
        .collect()
}

/// Issue 37's measure of units per served job: the 120-job drain with 6 daemon
/// restarts (SIGKILLs), polling REST and then with webhooks.
fn budget_restarts(cfg: Cfg) -> Result<Vec<Row>, String> {
    let (n, kills, job_ms) = match cfg.size {
        Size::Small => (30, 2, 500),
        _ => (120, 6, 500),
    };
    let deadline = Duration::from_millis(120_000 + cfg.slack_ms(n as u64));
    let scn = cfg.scenario("budget");
    [("polling REST", None), ("webhooks", Some(0.0))]
        .into_iter()
        .map(|(how, hooks)| {
            let s = drain(cfg, n, job_ms, 4, kills, None, deadline, hooks)?;
            let who = format!("{n} queued, max 4, {how}, {} SIGKILLs", s.kills);
            drain_row(&scn, &who, &s, n)
        })
        .collect()
}

/// The 120-job drain with webhooks: calm, with SIGKILLs, and with a fifth of the
/// deliveries lost.
fn budget_hooks(cfg: Cfg) -> Result<Vec<Row>, String> {
    let (n, kills, job_ms) = match cfg.size {
        Size::Small => (30, 3, 500),
        _ => (120, 10, 500),
    };
    let deadline = Duration::from_millis(120_000 + cfg.slack_ms(n as u64));
    let scn = cfg.scenario("budget");
    let calm = drain(cfg, n, job_ms, 4, 0, None, deadline, Some(0.0))?;
    let killed = drain(cfg, n, job_ms, 4, kills, None, deadline, Some(0.0))?;
    let lossy = drain(cfg, n, job_ms, 4, 0, None, deadline, Some(0.2))?;
    let mut rows = Vec::new();
    for (who, s) in [
        (format!("{n} queued, max 4, webhooks"), &calm),
        (
            format!("{n} queued, max 4, webhooks, {} SIGKILLs", killed.kills),
            &killed,
        ),
        (format!("{n} queued, max 4, webhooks, 20% lost"), &lossy),
    ] {
        println!(
            "{scn}: {who}: {} of the jobs served in {:.1} s; {} units ({:.2} a job), {:.0}% on reads",
            s.served,
            s.wall_ms as f64 / 1000.0,
            s.units,
            s.per_job(),
            s.poll_share(),
        );
        if s.served < n {
            return Err(format!("{who}: {} of {n} served", s.served));
        }
        rows.push(
            Row::new(&scn, &format!("units per served job, {who}"), "units").ours(s.per_job()),
        );
    }
    Ok(rows)
}

/// The same queue drained by the naive poller (every second), for its units per job.
fn drain_naive(cfg: Cfg, n: usize, job_ms: u64, max: u32, deadline: Duration) -> Spend {
    let w = support::world_at(cfg.distance, 1, max, max, 5);
    let t0 = now_millis();
    enqueue_burst(&w, n, job_ms);
    let env = baseline::env_for(&w, "naive");
    let running = baseline::naive(env, Duration::from_secs(1));
    wait_until(deadline, || support::all_completed(&w.sim, n));
    running.finish();
    let served = w
        .sim
        .jobs()
        .iter()
        .filter(|j| j.status == JobStatus::Completed)
        .count();
    let log = w.sim.request_log();
    let spent: Vec<_> = log.iter().filter(|e| e.counted && e.at >= t0).collect();
    let out = Spend {
        served,
        units: spent.len() as u64,
        poll_units: spent.iter().filter(|e| e.method == "GET").count() as u64,
        looking_units: looking_units(&spent),
        dry_ms: 0,
        wall_ms: now_millis() - t0,
        kills: 0,
    };
    support::kill_under(&w.state_dir);
    support::discard(w);
    out
}

/// Issue 20's figures: rate-limit units per served job draining a queue with max 4
/// (no restarts, then with SIGKILLs), beside the naive poller; and a credential of 500
/// units an hour with 300 jobs queued at once: minutes run dry, and the share of the
/// units spent reading against starting. Every system polls each second.
fn budget(cfg: Cfg) -> Result<Vec<Row>, String> {
    let (n, kills, dry_n, job_ms) = match cfg.size {
        Size::Small => (30, 3, 60, 500),
        _ => (120, 10, 300, 500),
    };
    let deadline = Duration::from_millis(120_000 + cfg.slack_ms(n as u64));
    let scn = cfg.scenario("budget");
    let calm = drain(cfg, n, job_ms, 4, 0, None, deadline, None)?;
    let killed = drain(cfg, n, job_ms, 4, kills, None, deadline, None)?;
    let naive = drain_naive(cfg, n, job_ms, 4, deadline);
    let dry_deadline = Duration::from_millis(300_000 + cfg.slack_ms(dry_n as u64));
    let dry = drain(cfg, dry_n, job_ms, 8, 0, Some(500), dry_deadline, None)?;
    for (who, s) in [
        (format!("{n} queued, max 4"), &calm),
        (
            format!("{n} queued, max 4, {} SIGKILLs", killed.kills),
            &killed,
        ),
        (format!("{n} queued, naive poller"), &naive),
        (format!("{dry_n} queued, max 8, 500 units an hour"), &dry),
    ] {
        println!(
            "{scn}: {who}: {} of the jobs served in {:.1} s; {} units ({:.2} a job), {:.0}% on reads, {:.0}% polling (reads less each run's first); {:.2} min run dry",
            s.served,
            s.wall_ms as f64 / 1000.0,
            s.units,
            s.per_job(),
            s.poll_share(),
            s.looking_share(),
            s.dry_ms as f64 / 60_000.0
        );
    }
    if calm.served < n || killed.served < n {
        return Err(format!(
            "the drain did not finish: {} and {} of {n} served",
            calm.served, killed.served
        ));
    }
    let hooked = budget_hooks(cfg)?;
    Ok([
        Row::new(
            &scn,
            &format!("units per served job, {n} queued, max 4"),
            "units",
        )
        .ours(calm.per_job())
        .naive(naive.per_job()),
        Row::new(
            &scn,
            &format!(
                "units per served job, the same with {} SIGKILLs",
                killed.kills
            ),
            "units",
        )
        .ours(killed.per_job()),
        Row::new(
            &scn,
            &format!("{dry_n} queued on 500 units/h: jobs served"),
            "jobs",
        )
        .ours(dry.served as f64),
        Row::new(
            &scn,
            &format!("{dry_n} queued on 500 units/h: minutes run dry"),
            "min",
        )
        .ours(dry.dry_ms as f64 / 60_000.0),
        Row::new(
            &scn,
            &format!("{dry_n} queued on 500 units/h: units spent reading"),
            "%",
        )
        .ours(dry.poll_share()),
        Row::new(
            &scn,
            &format!(
                "{dry_n} queued on 500 units/h: units spent polling (reads less each run's first)"
            ),
            "%",
        )
        .ours(dry.looking_share()),
    ]
    .into_iter()
    .chain(hooked)
    .collect())
}
