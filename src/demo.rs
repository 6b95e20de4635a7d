//! `runner-manager demo`: the real daemon, as a child process, against the simulated
//! GitHub and simulated runners in a temporary state directory, fed a stream of jobs.
//! No GitHub account, no setup; it prints what happens and a summary.
//!
//! Here: the options, the two ways to run (under `top`, or headless with printed
//! progress) and the wind-down. The world it runs in is `world`, the summary `summary`.

use crate::sim::Latency;
use crate::sim::install::InstallShape;
use crate::store::{SqliteStore, Store};
use std::path::PathBuf;
use std::process::Child;
use std::time::{Duration, Instant};

pub const DEMO_REPO: &str = "demo-org/app";

/// `println!` that ignores a closed stdout: with `demo | cat`, Ctrl-C takes `cat` down
/// first, and the demo must still stop its daemon and exit 130, not die on the write.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// `eprintln!` that ignores a failed write: after the demo's `top` lost its terminal,
/// stderr is that hung-up terminal (EIO), and the demo must still stop its daemon.
macro_rules! warn {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod summary;
mod world;

pub use world::{
    World, WorldOptions, open_with_host, repo_scope, sim_profile, sim_target, sim_token_file,
    start_sim, stop_child, write_token_file,
};

use summary::summary;

#[derive(Debug, Clone)]
pub struct DemoOptions {
    pub state_dir: Option<PathBuf>,
    pub jobs: u32,
    /// Milliseconds between two queued jobs.
    pub every_ms: u64,
    pub job_ms: u64,
    /// Leave the state directory in place afterwards.
    pub keep: bool,
    /// Print progress instead of opening `top` (also when there is no terminal).
    pub headless: bool,
    /// GitHub far away and a runner install of a real release's size (`--far`).
    pub far: bool,
}

impl Default for DemoOptions {
    fn default() -> Self {
        DemoOptions {
            state_dir: None,
            jobs: 12,
            every_ms: 400,
            job_ms: 1500,
            keep: false,
            headless: false,
            far: false,
        }
    }
}

/// Why a demo did not end well, and so its exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DemoError {
    /// Something failed, or jobs were left unserved: exit 1.
    Failed(String),
    /// Ctrl-C, SIGINT or SIGTERM (or SIGHUP under `top`): exit 130, as a shell reports
    /// a program interrupted.
    Interrupted(String),
}

impl std::fmt::Display for DemoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DemoError::Failed(m) | DemoError::Interrupted(m) => f.write_str(m),
        }
    }
}

impl From<String> for DemoError {
    fn from(m: String) -> DemoError {
        DemoError::Failed(m)
    }
}

/// Stops the demo's daemon with its books finished: the host drains (no new runner,
/// idle ones deregistered, busy ones finish their jobs and are cleaned), then SIGTERM.
/// A plain SIGTERM would leave busy runners running for a next daemon to adopt, which
/// a demo never has: its books would say `busy` for processes about to lose their
/// GitHub, and its temporary directory would go while they still ran. The wait is
/// bounded by the longest demo job; what outlives it is said, and the drain flag is
/// taken back so a kept store starts runners again.
fn wind_down(
    world: &World,
    daemon: &mut Child,
    longest_job: Duration,
    interrupted: bool,
) -> Option<std::process::ExitStatus> {
    let store = SqliteStore::open(&world.state_dir).ok();
    if let Some(store) = &store {
        let _ = store.set_draining(true);
        let deadline = Instant::now() + longest_job + Duration::from_secs(10);
        let mut said = false;
        loop {
            let live = store
                .attempts(&crate::store::AttemptFilter {
                    active_only: true,
                    ..Default::default()
                })
                .map(|a| a.len())
                .unwrap_or(0);
            let exited = matches!(daemon.try_wait(), Ok(Some(_)));
            if live == 0 || exited {
                break;
            }
            if Instant::now() >= deadline {
                warn!(
                    "{live} runners still alive after {}s; their attempts stay open until the \
                     next daemon on {}",
                    (longest_job + Duration::from_secs(10)).as_secs(),
                    world.state_dir.display()
                );
                break;
            }
            if !said {
                say!("{}", stopping_line(live, interrupted));
                said = true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let status = stop_child(daemon, Duration::from_secs(20));
    if let Some(store) = &store {
        let _ = store.set_draining(false);
    }
    status
}

/// What the demo says while its runners finish. Only once a first Ctrl-C stopped the
/// headless demo does a second one end it at once, so only then is it offered.
fn stopping_line(live: usize, interrupted: bool) -> String {
    // Live attempts: a job still running, or a runner whose job is done but whose
    // attempt is still being cleaned.
    let what = if live == 1 {
        "1 runner ends first".to_string()
    } else {
        format!("{live} runners end first")
    };
    let hint = if interrupted {
        " (Ctrl-C again to stop now)"
    } else {
        ""
    };
    format!("stopping: {what}{hint}")
}

/// The demo's world on this binary; a `--far` one says first that it lays out a
/// release-sized install, which takes a moment.
fn prepare_world(opts: &DemoOptions) -> Result<World, DemoError> {
    let binary =
        std::env::current_exe().map_err(|e| format!("cannot find my own executable: {e}"))?;
    if opts.far {
        say!(
            "laying out a runner install with a real release's {} files…",
            InstallShape::Realistic.counts().files
        );
    }
    Ok(World::prepare_with(
        opts.state_dir.clone(),
        &binary,
        world_options(opts),
    )?)
}

/// The demo's world: a one-second poll, far away with `--far`.
fn world_options(opts: &DemoOptions) -> WorldOptions {
    let w = WorldOptions::new(1);
    if opts.far { w.far() } else { w }
}

/// Runs the demo: `top` on a terminal, printed progress otherwise.
pub fn run(opts: &DemoOptions) -> Result<(), DemoError> {
    // SAFETY: isatty only inspects the descriptors.
    let tty = unsafe { libc::isatty(0) == 1 && libc::isatty(1) == 1 };
    if opts.headless || !tty {
        run_headless(opts)
    } else {
        run_with_top(opts)
    }
}

/// The demo under `top`: jobs keep arriving (a mix of linux and gpu jobs) until the
/// user quits, then the daemon is stopped and the summary printed. Quitting is exit 0
/// (jobs still queued are said), Ctrl-C or a signal exit 130.
fn run_with_top(opts: &DemoOptions) -> Result<(), DemoError> {
    let world = prepare_world(opts)?;
    let log = world.state_dir.join("daemon.log");
    let mut daemon = world.spawn_daemon(&log)?;
    let started = Instant::now();
    let stop = std::sync::atomic::AtomicBool::new(false);
    /// Tells the feeder to stop however `top` ends, a panic included: the scope joins
    /// the feeder, and a feeder never told would keep the demo alive for ever.
    struct StopOnDrop<'a>(&'a std::sync::atomic::AtomicBool);
    impl Drop for StopOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
    let result = std::thread::scope(|s| {
        let feeder = std::thread::Builder::new()
            .name("demo-feeder".into())
            .spawn_scoped(s, || {
                let mut n = 0u64;
                let (tx, rx) = crossbeam_channel::bounded::<()>(0);
                let _keep = tx;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    n += 1;
                    // A burst now and then, so the pictures have something to show.
                    let batch = if n.is_multiple_of(10) { 5 } else { 1 };
                    for i in 0..batch {
                        let gpu = (n + i) % 4 == 3;
                        let labels: &[&str] = if gpu {
                            &["self-hosted", "gpu"]
                        } else {
                            &["self-hosted", "linux"]
                        };
                        let ms = opts.job_ms + (n * 7919 + i * 104_729) % 4000;
                        world.sim.enqueue_job(
                            DEMO_REPO,
                            &format!("job-{n}-{i}{}", if gpu { "-gpu" } else { "" }),
                            labels,
                            ms,
                        );
                    }
                    let _ = rx.recv_timeout(Duration::from_millis(1500));
                }
            });
        let feeder = match feeder {
            Ok(f) => f,
            Err(e) => return Err(format!("cannot start the demo's feeder thread: {e}")),
        };
        let stopping = StopOnDrop(&stop);
        let r = SqliteStore::open(&world.state_dir)
            .map_err(|e| e.to_string())
            .and_then(|store| crate::tui::run(&store, &world.state_dir).map_err(|e| e.to_string()));
        drop(stopping);
        let _ = feeder.join();
        r
    });
    let _ = wind_down(
        &world,
        &mut daemon,
        Duration::from_millis(opts.job_ms + 4000),
        false,
    );
    let served = summary(&world, started.elapsed());
    if world.owned_dir && !opts.keep {
        let _ = std::fs::remove_dir_all(&world.state_dir);
    } else {
        say!("state directory kept: {}", world.state_dir.display());
    }
    match result? {
        crate::tui::Ending::Interrupted | crate::tui::Ending::Hangup => Err(served.interrupted()),
        crate::tui::Ending::Quit => served.quit(),
    }
}

/// The demo's containment in one line: it sets no runner uids, so its jobs run as
/// whoever runs the demo, and it says so.
fn isolation_banner(state_dir: &std::path::Path) -> String {
    use crate::domain::isolation::{Powers, effective};
    let host = SqliteStore::open(state_dir).and_then(|s| s.host_or_create());
    let Ok(host) = host else {
        return "isolation: unknown (the store did not open)".into();
    };
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    let powers = Powers {
        can_switch_users: crate::runner::caps::can_switch_users(),
        uid,
    };
    format!(
        "isolation {}",
        effective(host.isolation, host.runner_uids, powers).describe()
    )
}

/// Runs the headless demo, printing progress. SIGINT or SIGTERM stops it early (the
/// daemon is stopped and the summary printed, exit 130); a second one ends it at once.
pub fn run_headless(opts: &DemoOptions) -> Result<(), DemoError> {
    let interrupted = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // Registered first, so it sees the flag before the second handler sets it.
        signal_hook::flag::register_conditional_shutdown(sig, 130, interrupted.clone())
            .and_then(|_| signal_hook::flag::register(sig, interrupted.clone()))
            .map_err(|e| format!("cannot watch signals: {e}"))?;
    }
    let world = prepare_world(opts)?;
    let log = world.state_dir.join("daemon.log");
    say!(
        "runner-manager demo: simulated GitHub at {}, state in {}",
        world.sim.url(),
        world.state_dir.display()
    );
    if opts.far {
        say!("GitHub is far away: {}", Latency::FAR.describe());
    }
    say!(
        "profiles: linux (max 4, labels self-hosted,linux) and gpu (max 2, labels self-hosted,gpu)"
    );
    say!("{}", isolation_banner(&world.state_dir));
    let mut daemon = world.spawn_daemon(&log)?;
    let started = Instant::now();
    let mut queued = 0u32;
    let mut next_job = Instant::now();
    let mut last_print = Instant::now() - Duration::from_secs(1);
    let deadline = started
        + Duration::from_secs(30 + (opts.jobs as u64 * (opts.every_ms + opts.job_ms)) / 1000);
    let result = loop {
        if interrupted.load(std::sync::atomic::Ordering::Relaxed) {
            break Err(None);
        }
        if queued < opts.jobs && Instant::now() >= next_job {
            let gpu = queued % 4 == 3;
            let labels: &[&str] = if gpu {
                &["self-hosted", "gpu"]
            } else {
                &["self-hosted", "linux"]
            };
            world.sim.enqueue_job(
                DEMO_REPO,
                &format!("job-{}{}", queued + 1, if gpu { "-gpu" } else { "" }),
                labels,
                opts.job_ms,
            );
            queued += 1;
            next_job = Instant::now() + Duration::from_millis(opts.every_ms);
        }
        let jobs = world.sim.jobs();
        let done = jobs
            .iter()
            .filter(|j| j.status == crate::sim::JobStatus::Completed)
            .count();
        if last_print.elapsed() >= Duration::from_secs(1) {
            last_print = Instant::now();
            let running = jobs
                .iter()
                .filter(|j| j.status == crate::sim::JobStatus::InProgress)
                .count();
            let waiting = jobs
                .iter()
                .filter(|j| j.status == crate::sim::JobStatus::Queued)
                .count();
            let runners = world.sim.runners();
            let busy = runners.iter().filter(|r| r.busy).count();
            say!(
                "t={:>4.1}s  jobs: queued {waiting:>2}  running {running:>2}  done {done:>2}/{}   runners registered {:>2} (busy {busy})",
                started.elapsed().as_secs_f64(),
                opts.jobs,
                runners.len()
            );
        }
        if done as u32 >= opts.jobs {
            break Ok(());
        }
        if Instant::now() >= deadline {
            break Err(Some(format!(
                "not every job finished in time; see {}",
                log.display()
            )));
        }
        if let Ok(Some(st)) = daemon.try_wait() {
            break Err(Some(format!(
                "the daemon exited early ({st}); see {}",
                log.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let interrupted_now = matches!(result, Err(None));
    let status = wind_down(
        &world,
        &mut daemon,
        Duration::from_millis(opts.job_ms),
        interrupted_now,
    );
    let served = summary(&world, started.elapsed());
    let result = match result {
        Ok(()) => served.verdict(),
        Err(None) => Err(served.interrupted()),
        Err(Some(why)) => Err(DemoError::Failed(why)),
    };
    let daemon_failed = status.is_some_and(|st| !st.success());
    if let Some(st) = status
        && daemon_failed
    {
        warn!("the daemon exited with {st}; see {}", log.display());
    }
    // A log this run pointed to is kept with its directory.
    if world.owned_dir && !opts.keep && result.is_ok() && !daemon_failed {
        let _ = std::fs::remove_dir_all(&world.state_dir);
    } else {
        say!("state directory kept: {}", world.state_dir.display());
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stopping_line_counts_right_and_offers_ctrl_c_only_after_one() {
        assert_eq!(stopping_line(1, false), "stopping: 1 runner ends first");
        assert_eq!(
            stopping_line(3, true),
            "stopping: 3 runners end first (Ctrl-C again to stop now)"
        );
    }
}
