//! Shared code of the scenario and chaos benchmarks: finding the daemon binary, worlds
//! built on `demo::World`, /proc readings of the daemon, the sampler that watches the
//! simulated GitHub throughout a run, percentiles and the printed table.
#![allow(dead_code)]

pub mod baseline;
pub mod proc;
pub mod promises;
pub mod stats;

use runner_manager::demo::{World, WorldOptions};
use runner_manager::sim::{JobStatus, SimHandle};
use runner_manager::store::{SqliteStore, Store};
use runner_manager::timefmt::{Millis, now_millis};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The repository every world's jobs are queued in (`demo::World` creates it).
pub const REPO: &str = runner_manager::demo::DEMO_REPO;
/// The labels of the benchmarks' jobs; the world's `linux` profile carries them.
pub const JOB_LABELS: &[&str] = &["self-hosted", "linux"];

/// The real `runner-manager` executable. Cargo builds it for bench targets and says
/// where at compile time; a binary copied elsewhere falls back to its own directory
/// (`target/<profile>/deps/..`). `RM_BENCH_DAEMON=PATH` measures another build, such
/// as the static release binary `.ci/static-check` makes, from a quick debug bench.
pub fn daemon_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("RM_BENCH_DAEMON") {
        return PathBuf::from(p);
    }
    if let Some(p) = option_env!("CARGO_BIN_EXE_runner-manager") {
        let p = PathBuf::from(p);
        if p.exists() {
            return p;
        }
    }
    let me = std::env::current_exe().expect("the bench knows its own path");
    let dir = me
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps");
    dir.join("runner-manager")
}

/// The build profile of this bench executable, printed with every table.
pub fn profile() -> &'static str {
    if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    }
}

/// Where the simulated GitHub is: on loopback, or far away (`--far`: 120 ms per
/// request, 500 ms more per JIT config, ±20%, and a runner install with a real
/// release's file count).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distance {
    Loopback,
    Far,
}

impl Distance {
    pub fn options(self, poll_secs: u64) -> WorldOptions {
        match self {
            Distance::Loopback => WorldOptions::new(poll_secs),
            Distance::Far => WorldOptions::new(poll_secs).far(),
        }
    }

    /// For banners: "loopback" or the latency.
    pub fn describe(self) -> String {
        match self {
            Distance::Loopback => "GitHub on loopback".into(),
            Distance::Far => format!(
                "GitHub far away ({}), runner install of {} files",
                runner_manager::sim::Latency::FAR.describe(),
                runner_manager::sim::install::InstallShape::Realistic
                    .counts()
                    .files
            ),
        }
    }
}

/// A fresh world (simulated GitHub, state dir, target `demo`, runner install) whose
/// `linux` profile may hold `max` runners on a host of `capacity`.
pub fn world(poll_secs: u64, max: u32, capacity: u32, idle_timeout_secs: u64) -> World {
    world_at(
        Distance::Loopback,
        poll_secs,
        max,
        capacity,
        idle_timeout_secs,
    )
}

/// [`world`] with its GitHub at `distance`.
pub fn world_at(
    distance: Distance,
    poll_secs: u64,
    max: u32,
    capacity: u32,
    idle_timeout_secs: u64,
) -> World {
    let dir =
        std::env::temp_dir().join(format!("rm-bench-{}-{}", std::process::id(), now_millis()));
    let opts = distance
        .options(poll_secs)
        .room(capacity, max, idle_timeout_secs);
    let w = World::prepare_with(Some(dir), &daemon_binary(), opts).expect("prepare the world");
    // `RM_BENCH_MAX_IN_FLIGHT=N` measures the daemon with another bound on requests in
    // flight than the default (`DEFAULT_MAX_IN_FLIGHT`, its target's `max_in_flight`).
    if let Some(n) = std::env::var("RM_BENCH_MAX_IN_FLIGHT")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
    {
        let store = SqliteStore::open(&w.state_dir).expect("open the world's store");
        let mut t = store.target("demo").expect("the demo target");
        t.max_in_flight = n;
        store.update_target(&t).expect("set max_in_flight");
    }
    w
}

/// The PAT the world's target uses (its token file).
pub fn world_token(w: &World) -> String {
    std::fs::read_to_string(w.state_dir.join("demo-token"))
        .expect("the world's token file")
        .trim()
        .to_string()
}

/// Removes a world's state directory, killing any process still running from it first
/// (a benchmark that failed half-way must not leave runners behind).
pub fn discard(w: World) {
    let dir = w.state_dir.clone();
    drop(w);
    // A SIGKILLed process is not gone at once, and a runner's worker may still write
    // in its directory: removal is tried again (bounded) until nothing runs there and
    // the tree is gone, or realistic installs (thousands of files each) pile up in /tmp.
    for _ in 0..50 {
        let killed = kill_under(&dir);
        if std::fs::remove_dir_all(&dir).is_ok() && killed == 0 || !dir.exists() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// SIGKILLs every process whose cwd or executable lies under `dir`.
pub fn kill_under(dir: &Path) -> usize {
    let pids = runner_manager::runner::processes_with_cwd_or_exe_under(dir);
    for &pid in &pids {
        // SAFETY: kill(2) with a pid read from /proc; at worst it is already gone.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
    pids.len()
}

/// Polls `cond` every 50 ms until it holds or `within` passes; returns whether it held.
pub fn wait_until(within: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + within;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn all_completed(sim: &SimHandle, n: usize) -> bool {
    let jobs = sim.jobs();
    jobs.len() >= n && jobs.iter().all(|j| j.status == JobStatus::Completed)
}

/// What the sampler saw of the simulated GitHub (and the daemon, when given a pid).
#[derive(Debug, Default, Clone)]
pub struct Sampled {
    /// Sum over samples of registered-but-not-busy runners times the sample period.
    pub idle_runner_secs: f64,
    pub max_registered: usize,
    pub peak_rss_kb: u64,
    pub samples: u64,
}

/// Samples the sim's runner list (and a daemon's RSS) every `period` until stopped.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Sampled>>,
}

impl Sampler {
    pub fn start(sim: &SimHandle, daemon_pid: Option<i32>, period: Duration) -> Sampler {
        // The handle cannot be shared with a thread, so the sampler reads the sim's
        // control interface (`/_sim/runners`) like any other client.
        let url = sim.url().to_string();
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name("bench-sampler".into())
            .spawn(move || {
                let mut out = Sampled::default();
                let mut last = Instant::now();
                while !s.load(Ordering::SeqCst) {
                    std::thread::sleep(period);
                    let dt = last.elapsed().as_secs_f64();
                    last = Instant::now();
                    if let Some((registered, busy)) = control_runner_counts(&url) {
                        out.idle_runner_secs += (registered - busy) as f64 * dt;
                        out.max_registered = out.max_registered.max(registered);
                    }
                    if let Some(pid) = daemon_pid
                        && let Some(u) = proc::usage(pid)
                    {
                        out.peak_rss_kb = out.peak_rss_kb.max(u.rss_kb);
                    }
                    out.samples += 1;
                }
                out
            })
            .expect("start the sampler thread");
        Sampler {
            stop,
            thread: Some(thread),
        }
    }

    pub fn finish(mut self) -> Sampled {
        self.stop.store(true, Ordering::SeqCst);
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

/// (registered, busy) runners from the sim's control interface.
fn control_runner_counts(url: &str) -> Option<(usize, usize)> {
    let r = runner_manager::sim::client::request(
        url,
        "GET",
        "/_sim/runners",
        &[],
        None,
        Duration::from_secs(5),
    )
    .ok()?;
    let v = r.json().ok()?;
    let list = v.as_array().or_else(|| v.get("runners")?.as_array())?;
    let busy = list
        .iter()
        .filter(|r| r.get("busy").and_then(|b| b.as_bool()) == Some(true))
        .count();
    Some((list.len(), busy))
}

/// Milliseconds since the epoch of a process start time given in clock ticks since
/// boot (field 22 of /proc/PID/stat), via /proc/uptime (10 ms resolution).
pub fn ticks_to_millis(start_ticks: u64) -> Millis {
    let up = std::fs::read_to_string("/proc/uptime").unwrap_or_default();
    let up_secs: f64 = up
        .split_whitespace()
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0.0);
    let boot = now_millis() - (up_secs * 1000.0) as Millis;
    boot + (start_ticks * 1000 / proc::clock_ticks()) as Millis
}

/// p50, p99 and max of a list of milliseconds (zeros when empty).
pub fn pcts(v: &[i64]) -> (i64, i64, i64) {
    if v.is_empty() {
        return (0, 0, 0);
    }
    let mut s = v.to_vec();
    s.sort_unstable();
    let at = |p: f64| s[((s.len() - 1) as f64 * p).round() as usize];
    (at(0.5), at(0.99), s[s.len() - 1])
}

/// Rate-limit units spent in the sim (every credential), from the request log.
pub fn units(sim: &SimHandle) -> u64 {
    sim.units_used().values().sum()
}

/// One row of the printed table: a figure for ours and, where they apply, the
/// baselines.
pub struct Row {
    pub scenario: String,
    pub figure: String,
    pub ours: Option<f64>,
    pub naive: Option<f64>,
    pub pool: Option<f64>,
    pub unit: &'static str,
    /// Most figures are better smaller (latency, units, waste); a rate is better larger.
    pub higher_better: bool,
}

impl Row {
    pub fn new(scenario: &str, figure: &str, unit: &'static str) -> Row {
        Row {
            scenario: scenario.into(),
            figure: figure.into(),
            ours: None,
            naive: None,
            pool: None,
            unit,
            higher_better: false,
        }
    }
    pub fn higher_better(mut self) -> Row {
        self.higher_better = true;
        self
    }
    pub fn ours(mut self, v: f64) -> Row {
        self.ours = Some(v);
        self
    }
    pub fn naive(mut self, v: f64) -> Row {
        self.naive = Some(v);
        self
    }
    pub fn pool(mut self, v: f64) -> Row {
        self.pool = Some(v);
        self
    }
}

fn fmt_num(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(x) if x.abs() >= 100.0 || x == x.trunc() => format!("{x:.0}"),
        Some(x) if x.abs() >= 10.0 => format!("{x:.1}"),
        Some(x) => format!("{x:.2}"),
    }
}

/// How many times better ours is than the baseline (>1: ours is better).
fn ratio(base: Option<f64>, ours: Option<f64>, higher_better: bool) -> String {
    let (base, ours) = if higher_better {
        (ours, base)
    } else {
        (base, ours)
    };
    match (base, ours) {
        (Some(b), Some(o)) if o > 0.0 => format!("{:.1}x", b / o),
        (Some(b), Some(_)) if b > 0.0 => "inf".into(),
        (Some(_), Some(_)) => "=".into(),
        _ => "-".into(),
    }
}

/// Prints the rows as a Markdown table (so BENCHMARKS.md can hold it verbatim).
pub fn print_table(rows: &[Row]) {
    println!(
        "| scenario | figure | unit | ours | naive poller | ours better by | fixed pool | ours better by |"
    );
    println!("|---|---|---|---:|---:|---:|---:|---:|");
    for r in rows {
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            r.scenario,
            r.figure,
            r.unit,
            fmt_num(r.ours),
            fmt_num(r.naive),
            ratio(r.naive, r.ours, r.higher_better),
            fmt_num(r.pool),
            ratio(r.pool, r.ours, r.higher_better)
        );
    }
}

/// One API fault of the chaos suite's kind, chosen with `rng`: an incident of 503s on
/// every repository endpoint (lasting `base` ms and up to `span` ms more, however many
/// requests meet it: a window in time, not a count, so a paced daemon meets no more of
/// it than a busy one), or one 403 with a `retry-after` of `retry_after_secs` on the
/// runs list. True for an incident.
pub fn api_fault(
    sim: &SimHandle,
    rng: &mut runner_manager::sim::rng::SplitMix64,
    (base, span): (u64, u64),
    retry_after_secs: u64,
) -> bool {
    use runner_manager::sim::{FaultAction, FaultRule, Trigger};
    if rng.next_u64().is_multiple_of(2) {
        let lasts = base + rng.next_u64() % span.max(1);
        sim.add_fault(FaultRule::new(
            None,
            "/repos/**",
            Trigger::Until(runner_manager::timefmt::now_millis() as u64 + lasts),
            FaultAction::Status { status: 503 },
        ));
        true
    } else {
        sim.add_fault(FaultRule::times(
            "GET",
            "/repos/*/*/actions/runs",
            1,
            FaultAction::Forbidden {
                retry_after: Some(retry_after_secs),
            },
        ));
        false
    }
}
