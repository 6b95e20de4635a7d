//! The `idle` scenario: what waiting costs. The daemon with one and with ten repository
//! targets and nothing queued: its resident memory at the end of the window (VmRSS, and
//! apart its own anonymous pages, `RssAnon`, and the binary's and libraries' pages,
//! `RssFile`) and its threads by kind; with ten, its rate-limit units and CPU beside a
//! naive poller per target and a fixed pool of one runner per target.

use super::support::{self, Row, Sampler, baseline, proc, units};
use super::{Cfg, Size};
use runner_manager::demo::{World, stop_child};
use runner_manager::domain::{CredentialRef, ScalePolicy, Target, TargetScope};
use runner_manager::store::{SqliteStore, Store};
use std::time::Duration;

const TARGETS: usize = 10;
/// Issue 49's conditions: an idle target polled every 2 s, memory read every second
/// over two minutes.
const POLL: u64 = 2;

/// What the daemon did and held over the window.
struct Ours {
    units: u64,
    cpu_ticks: u64,
    polls: usize,
    mem: proc::Memory,
    /// The highest RSS read over the window (kB).
    highest_kb: u64,
}

/// One and ten repository targets, nothing queued.
pub fn idle(cfg: Cfg) -> Result<Vec<Row>, String> {
    let (warm, window) = match cfg.size {
        // CI's: two polls measured after one, enough to see an idle poll costs 0.
        Size::Small => (5, 12),
        Size::Default => (10, 120),
        Size::Long => (10, 600),
    };
    println!(
        "idle: 1 and {TARGETS} repository targets, nothing queued, poll {POLL} s; measured over {window} s after {warm} s (memory at its end), units extrapolated to an hour; fixed pool of {TARGETS} (one per target)"
    );
    let scn = cfg.scenario("idle");
    let hour = 3600.0 / window as f64;
    let one = ours(cfg, 1, warm, window)?;
    let ten = ours(cfg, TARGETS, warm, window)?;
    let naive_units = naive(cfg, warm, window) as f64 * hour;
    let (pool_units, pool_idle) = pool(cfg, warm, window);

    let mut rows = vec![
        Row::new(&scn, "rate-limit units per idle hour", "units/h")
            .ours(ten.units as f64 * hour)
            .naive(naive_units)
            .pool(pool_units as f64 * hour),
        Row::new(&scn, "idle runner time per hour", "runner-s/h")
            .ours(0.0)
            .pool(pool_idle * hour),
    ];
    rows.extend(memory_rows(&scn, 1, &one));
    rows.extend(memory_rows(&scn, TARGETS, &ten));
    rows.push(
        Row::new(&scn, "daemon CPU, 10 targets", "% of a core")
            .ours(proc::cpu_secs(ten.cpu_ticks) / window as f64 * 100.0),
    );
    Ok(rows)
}

fn memory_rows(scn: &str, n: usize, o: &Ours) -> Vec<Row> {
    let of = if n == 1 { "1 target" } else { "10 targets" };
    let mb = |kb: u64| kb as f64 / 1024.0;
    vec![
        Row::new(scn, &format!("daemon RSS, {of}"), "MB").ours(mb(o.mem.rss_kb)),
        Row::new(
            scn,
            &format!("daemon RSS highest over the window, {of}"),
            "MB",
        )
        .ours(mb(o.highest_kb)),
        Row::new(scn, &format!("daemon RssAnon, {of}"), "MB").ours(mb(o.mem.anon_kb)),
        Row::new(scn, &format!("daemon RssFile, {of}"), "MB").ours(mb(o.mem.file_kb)),
        Row::new(scn, &format!("daemon threads, {of}"), "threads").ours(o.mem.threads as f64),
    ]
}

/// The daemon with `n` targets: units and CPU over the window, memory at its end.
fn ours(cfg: Cfg, n: usize, warm: u64, window: u64) -> Result<Ours, String> {
    let w = support::world_at(cfg.distance, POLL, 4, 8, 5);
    add_idle_targets(&w, n - 1)?;
    let mut d = w.spawn_daemon(&w.state_dir.join("daemon.log"))?;
    let pid = d.id() as i32;
    std::thread::sleep(Duration::from_secs(warm));
    let (u0, c0) = (units(&w.sim), proc::usage(pid).map_or(0, |u| u.cpu_ticks));
    // RSS is a sawtooth between the daemon's minute trims: read it every second over
    // the window, and print its highest and mean beside the value at the end.
    let (mut highest, mut sum, mut reads) = (0u64, 0u64, 0u64);
    let end = std::time::Instant::now() + Duration::from_secs(window);
    while std::time::Instant::now() < end {
        if let Some(m) = proc::memory(pid) {
            highest = highest.max(m.rss_kb);
            sum += m.rss_kb;
            reads += 1;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    let usage = proc::usage(pid).unwrap_or_default();
    let mem = proc::memory(pid).unwrap_or_default();
    let highest = highest.max(mem.rss_kb);
    println!(
        "idle, {n} target(s): RSS {} kB (anon {} kB, file {} kB; over the window highest {highest} kB, mean {} kB), {} threads: {:?}",
        mem.rss_kb,
        mem.anon_kb,
        mem.file_kb,
        sum / reads.max(1),
        mem.threads,
        proc::thread_kinds(pid)
    );
    // `RM_BENCH_SMAPS=DIR` keeps the daemon's mappings at that moment, to see where the
    // memory is (DIR/idle-N.smaps).
    if let Some(dir) = std::env::var_os("RM_BENCH_SMAPS") {
        let to = std::path::Path::new(&dir).join(format!("idle-{n}.smaps"));
        let _ = std::fs::copy(format!("/proc/{pid}/smaps"), to);
    }
    let out = Ours {
        units: units(&w.sim) - u0,
        cpu_ticks: usage.cpu_ticks.saturating_sub(c0),
        polls: w.sim.count("GET", "/repos/{owner}/{repo}/actions/runs"),
        mem,
        highest_kb: highest,
    };
    stop_child(&mut d, Duration::from_secs(20));
    support::discard(w);
    if out.polls == 0 {
        return Err(format!("the daemon with {n} target(s) never polled"));
    }
    Ok(out)
}

/// The naive poller, one per target: units over the window.
fn naive(cfg: Cfg, warm: u64, window: u64) -> u64 {
    let w = support::world_at(cfg.distance, POLL, 4, 8, 5);
    let mut running = Vec::new();
    for i in 0..TARGETS {
        let mut env = baseline::env_for(&w, &format!("naive-{i}"));
        env.repo = idle_repo(&w, i);
        running.push(baseline::naive(env, Duration::from_secs(POLL)));
    }
    std::thread::sleep(Duration::from_secs(warm));
    let u0 = units(&w.sim);
    std::thread::sleep(Duration::from_secs(window));
    let spent = units(&w.sim) - u0;
    running.into_iter().for_each(|r| {
        r.finish();
    });
    support::discard(w);
    spent
}

/// A fixed pool of one runner per target: units and idle runner-seconds over the window.
fn pool(cfg: Cfg, warm: u64, window: u64) -> (u64, f64) {
    let w = support::world_at(cfg.distance, POLL, 4, 8, 5);
    let p = baseline::pool(baseline::env_for(&w, "pool"), TARGETS);
    std::thread::sleep(Duration::from_secs(warm));
    let u0 = units(&w.sim);
    let sampler = Sampler::start(&w.sim, None, Duration::from_millis(200));
    std::thread::sleep(Duration::from_secs(window));
    let idle_secs = sampler.finish().idle_runner_secs;
    let spent = units(&w.sim) - u0;
    p.finish();
    support::discard(w);
    (spent, idle_secs)
}

fn idle_repo(w: &World, i: usize) -> String {
    if i == 0 {
        support::REPO.to_string()
    } else {
        let r = format!("demo-org/idle-{i}");
        w.sim.add_repo(&r, true);
        r
    }
}

/// Adds `n` more repository targets, each with one profile, sharing the world's token.
fn add_idle_targets(w: &World, n: usize) -> Result<(), String> {
    let store = SqliteStore::open(&w.state_dir).map_err(|e| e.to_string())?;
    let host = store.host_or_create().map_err(|e| e.to_string())?;
    let base = store.target("demo").map_err(|e| e.to_string())?;
    for i in 1..=n {
        let repo = format!("idle-{i}");
        w.sim.add_repo(&format!("demo-org/{repo}"), true);
        let t = Target {
            name: repo.clone(),
            scope: TargetScope::Repo {
                owner: "demo-org".into(),
                repo: repo.clone(),
            },
            credential: match &base.credential {
                CredentialRef::TokenFile { path } => {
                    CredentialRef::TokenFile { path: path.clone() }
                }
                other => other.clone(),
            },
            ..base.clone()
        };
        store.add_target(&t).map_err(|e| e.to_string())?;
        let mut p = ScalePolicy::new(&format!("p-{repo}"), &repo, &host.id);
        p.set_labels("--labels", &["linux".into()], &host.os, &host.arch)
            .map_err(|e| e.to_string())?;
        p.runner_dir = Some(w.state_dir.join("runner"));
        store.add_profile(&p).map_err(|e| e.to_string())?;
    }
    Ok(())
}
