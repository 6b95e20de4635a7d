//! `runner-manager demo`: the real daemon, as a child process, against the simulated
//! GitHub and simulated runners in a temporary state directory, fed a stream of jobs.
//! No GitHub account, no setup; it prints what happens and a summary.

use crate::domain::{CredentialRef, Host, ScalePolicy, Target, TargetScope};
use crate::sim::install::InstallShape;
use crate::sim::{Latency, SimConfig, SimGitHub, SimHandle};
use crate::store::{SqliteStore, Store};
use crate::timefmt::now_millis;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
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

/// What the demo's jobs came to: how many the simulated GitHub saw completed, of how
/// many queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Served {
    pub served: usize,
    pub queued: usize,
}

impl Served {
    /// The verdict on a demo that ran to its end or was quit: every queued job served,
    /// or exit 1 saying how many were not.
    fn verdict(self) -> Result<(), DemoError> {
        if self.served >= self.queued {
            return Ok(());
        }
        Err(DemoError::Failed(format!(
            "{} of {} jobs left unserved",
            self.queued - self.served,
            self.queued
        )))
    }

    fn interrupted(self) -> DemoError {
        DemoError::Interrupted(format!(
            "interrupted with {} of {} jobs served",
            self.served, self.queued
        ))
    }
}

/// How a world is made: its target's poll interval, how far its GitHub is, the shape
/// of its runner install, and the room its host and `linux` profile give.
#[derive(Debug, Clone, Copy)]
pub struct WorldOptions {
    pub poll_interval_secs: u64,
    /// The simulated GitHub's distance (zero: loopback).
    pub latency: Latency,
    /// `Realistic` lays out a real release's file count (a few seconds, once).
    pub install: InstallShape,
    /// The host's capacity: 6 by default, room for both profiles at once, whatever
    /// this machine's CPU count.
    pub host_capacity: u32,
    /// The `linux` profile's `max_capacity` (4) and idle timeout (5 s) when the world
    /// creates it; `gpu` always has 2 and 5 s.
    pub linux_max: u32,
    pub linux_idle_timeout_secs: u64,
}

impl WorldOptions {
    pub fn new(poll_interval_secs: u64) -> WorldOptions {
        WorldOptions {
            poll_interval_secs,
            latency: Latency::default(),
            install: InstallShape::Small,
            host_capacity: 6,
            linux_max: 4,
            linux_idle_timeout_secs: 5,
        }
    }

    /// GitHub 120 ms away, 500 ms more per JIT config (±20%), and a realistic install.
    pub fn far(mut self) -> WorldOptions {
        self.latency = Latency::FAR;
        self.install = InstallShape::Realistic;
        self
    }

    /// A host of `capacity` whose `linux` profile holds at most `max` runners, each
    /// stopped after `idle_timeout_secs` without a job (the benchmarks' worlds).
    pub fn room(mut self, capacity: u32, max: u32, idle_timeout_secs: u64) -> WorldOptions {
        self.host_capacity = capacity;
        self.linux_max = max;
        self.linux_idle_timeout_secs = idle_timeout_secs;
        self
    }
}

/// Writes `token` to `path`, readable by its owner only, as a target's or a host's
/// token file must be (the demo world's, and the daemon and pool tests').
pub fn write_token_file(path: &Path, token: &str) -> Result<(), String> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    f.write_all(token.as_bytes()).map_err(|e| e.to_string())
}

// The pieces a world is made of, which the daemon tests' `World` is built on too: each
// does one step of `World::prepare_with`, so the two worlds cannot drift apart in how
// they set up a simulated GitHub and a store pointing at it.

/// Starts the simulated GitHub as `cfg` says.
pub fn start_sim(cfg: SimConfig) -> Result<SimHandle, String> {
    SimGitHub::start(cfg).map_err(|e| format!("cannot start the simulated GitHub: {e}"))
}

/// Opens (or creates) the store in `state_dir` and gives its host room for `capacity`
/// runners, whatever this machine's CPU count.
pub fn open_with_host(state_dir: &Path, capacity: u32) -> Result<(SqliteStore, Host), String> {
    let store = SqliteStore::open(state_dir).map_err(|e| e.to_string())?;
    let mut host = store.host_or_create().map_err(|e| e.to_string())?;
    host.capacity = capacity;
    store.update_host(&host).map_err(|e| e.to_string())?;
    Ok((store, host))
}

/// Writes the PAT `token` to the token file `path`; `known` tells `sim` of it, so it
/// authenticates (unknown, every request with it is answered 401).
pub fn sim_token_file(
    sim: &SimHandle,
    path: &Path,
    token: &str,
    known: bool,
) -> Result<(), String> {
    if known {
        sim.add_pat(token);
    }
    write_token_file(path, token)
}

/// The scope of the repository `owner/repo`.
pub fn repo_scope(repo: &str) -> TargetScope {
    let (owner, repo) = repo.split_once('/').unwrap_or((repo, ""));
    TargetScope::Repo {
        owner: owner.into(),
        repo: repo.into(),
    }
}

/// A target `name` for `scope` on `sim`, authenticated by the token file `token_file`
/// and polled every `poll_interval_secs`, with the default bound on requests in flight.
pub fn sim_target(
    sim: &SimHandle,
    name: &str,
    scope: TargetScope,
    token_file: PathBuf,
    poll_interval_secs: u64,
) -> Target {
    Target {
        name: name.into(),
        scope,
        api_url: sim.url().to_string(),
        credential: CredentialRef::TokenFile { path: token_file },
        poll_interval_secs,
        repos: vec![],
        max_in_flight: crate::domain::target::DEFAULT_MAX_IN_FLIGHT,
    }
}

/// A profile `name` of `target` on `host` whose runners carry `labels` (besides
/// self-hosted, the host's OS and arch) and run the install at `runner_dir`; its
/// capacities and timeouts are the defaults until the caller sets them.
pub fn sim_profile(
    name: &str,
    target: &str,
    host: &Host,
    labels: &[String],
    runner_dir: &Path,
) -> Result<ScalePolicy, String> {
    let mut p = ScalePolicy::new(name, target, &host.id);
    p.set_labels("--labels", labels, &host.os, &host.arch)
        .map_err(|e| e.to_string())?;
    p.runner_dir = Some(runner_dir.to_path_buf());
    Ok(p)
}

/// A prepared demo world: the simulated GitHub, a state directory with a target and two
/// profiles pointing at it, and a simulated runner install. Tests and benchmarks use
/// this too.
pub struct World {
    pub sim: SimHandle,
    pub state_dir: PathBuf,
    pub binary: PathBuf,
    /// The shape of the runner install at `state_dir/runner` (what a benchmark's
    /// baselines lay out too).
    pub install: InstallShape,
    owned_dir: bool,
}

impl World {
    /// `binary` is the runner-manager executable (the simulated runner is the same
    /// program under the runner's names).
    pub fn prepare(
        state_dir: Option<PathBuf>,
        binary: &Path,
        poll_interval_secs: u64,
    ) -> Result<World, String> {
        World::prepare_with(state_dir, binary, WorldOptions::new(poll_interval_secs))
    }

    /// [`World::prepare`] with the distance and install shape of `opts`.
    pub fn prepare_with(
        state_dir: Option<PathBuf>,
        binary: &Path,
        opts: WorldOptions,
    ) -> Result<World, String> {
        let sim = start_sim(SimConfig {
            latency: opts.latency,
            ..SimConfig::default()
        })?;
        let owned_dir = state_dir.is_none();
        let state_dir = match state_dir {
            Some(d) => d,
            None => std::env::temp_dir().join(format!(
                "runner-manager-demo-{}-{}",
                std::process::id(),
                now_millis()
            )),
        };
        std::fs::create_dir_all(&state_dir).map_err(|e| format!("{}: {e}", state_dir.display()))?;
        close_to_others(&state_dir)?;
        let token = format!(
            "ghp_demo{:016x}",
            now_millis() as u64 ^ 0x9e37_79b9_7f4a_7c15
        );
        sim.add_repo(DEMO_REPO, true);
        let token_file = state_dir.join("demo-token");
        sim_token_file(&sim, &token_file, &token, true)?;
        let runner_dir = state_dir.join("runner");
        // A realistic install over a small one adds its files; laying out again is cheap
        // next to checking which shape is there.
        if !runner_dir.join("bin/Runner.Listener").exists() || opts.install != InstallShape::Small {
            crate::sim::install::lay_out_shaped(&runner_dir, binary, opts.install)
                .map_err(|e| format!("cannot lay out the simulated runner: {e}"))?;
        }
        let (store, host) = open_with_host(&state_dir, opts.host_capacity)?;
        let target = sim_target(
            &sim,
            "demo",
            repo_scope(DEMO_REPO),
            token_file,
            opts.poll_interval_secs,
        );
        if store.target("demo").is_err() {
            store.add_target(&target).map_err(|e| e.to_string())?;
        } else {
            store.update_target(&target).map_err(|e| e.to_string())?;
        }
        let profiles = [
            (
                "linux",
                vec!["linux"],
                opts.linux_max,
                opts.linux_idle_timeout_secs,
            ),
            ("gpu", vec!["gpu"], 2, 5),
        ];
        for (name, labels, max, idle_timeout_secs) in profiles {
            if store.profile(name).is_ok() {
                continue;
            }
            let labels: Vec<String> = labels.into_iter().map(String::from).collect();
            let mut p = sim_profile(name, "demo", &host, &labels, &runner_dir)?;
            p.max_capacity = max;
            p.idle_timeout_secs = idle_timeout_secs;
            store.add_profile(&p).map_err(|e| e.to_string())?;
        }
        Ok(World {
            sim,
            state_dir,
            binary: binary.to_path_buf(),
            install: opts.install,
            owned_dir,
        })
    }

    /// Starts `runner-manager daemon` on the world's state directory.
    pub fn spawn_daemon(&self, log: &Path) -> Result<Child, String> {
        let log = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
        Command::new(&self.binary)
            .arg("--state-dir")
            .arg(&self.state_dir)
            .arg("daemon")
            .arg("--drain-timeout")
            .arg("10")
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start the daemon: {e}"))
    }
}

/// Takes read and write away from group and others on the state directory (a
/// directory given with `--state-dir` may have been made 0755 by mkdir): the demo's
/// books are as private as a real host's, and its own `doctor` passes. Search (x) is
/// left as it is, since runners under their own uids pass through to their roots.
fn close_to_others(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .permissions()
        .mode()
        & 0o7777;
    if mode & 0o066 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode & !0o066))
            .map_err(|e| format!("cannot make {} private: {e}", dir.display()))?;
    }
    Ok(())
}

impl Drop for World {
    fn drop(&mut self) {
        self.sim.shutdown();
    }
}

/// Sends SIGTERM and waits (bounded) for the child to exit.
pub fn stop_child(child: &mut Child, within: Duration) -> Option<std::process::ExitStatus> {
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let deadline = Instant::now() + within;
    loop {
        if let Ok(Some(st)) = child.try_wait() {
            return Some(st);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            return child.wait().ok();
        }
        std::thread::sleep(Duration::from_millis(20));
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
                say!("stopping: {live} runners finish their jobs first (Ctrl-C again to stop now)");
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
/// user quits, then the daemon is stopped and the summary printed. Quitting with jobs
/// unserved is exit 1, Ctrl-C or a signal exit 130.
fn run_with_top(opts: &DemoOptions) -> Result<(), DemoError> {
    let binary =
        std::env::current_exe().map_err(|e| format!("cannot find my own executable: {e}"))?;
    let world = World::prepare_with(opts.state_dir.clone(), &binary, world_options(opts))?;
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
        let feeder = s.spawn(|| {
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
    );
    let served = summary(&world, started.elapsed());
    if world.owned_dir && !opts.keep {
        let _ = std::fs::remove_dir_all(&world.state_dir);
    } else {
        say!("state directory kept: {}", world.state_dir.display());
    }
    match result? {
        crate::tui::Ending::Interrupted | crate::tui::Ending::Hangup => Err(served.interrupted()),
        crate::tui::Ending::Quit => served.verdict(),
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
    let binary =
        std::env::current_exe().map_err(|e| format!("cannot find my own executable: {e}"))?;
    let world = World::prepare_with(opts.state_dir.clone(), &binary, world_options(opts))?;
    let log = world.state_dir.join("daemon.log");
    say!(
        "runner-manager demo: simulated GitHub at {}, state in {}",
        world.sim.url(),
        world.state_dir.display()
    );
    if opts.far {
        say!(
            "GitHub is far away: {}; the runner install has a real release's {} files",
            Latency::FAR.describe(),
            InstallShape::Realistic.counts().files
        );
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
    let status = wind_down(&world, &mut daemon, Duration::from_millis(opts.job_ms));
    let served = summary(&world, started.elapsed());
    let result = match result {
        Ok(()) => served.verdict(),
        Err(None) => Err(served.interrupted()),
        Err(Some(why)) => Err(DemoError::Failed(why)),
    };
    if let Some(st) = status
        && !st.success()
    {
        warn!("the daemon exited with {st}; see {}", log.display());
    }
    if world.owned_dir && !opts.keep && result.is_ok() {
        let _ = std::fs::remove_dir_all(&world.state_dir);
    } else {
        say!("state directory kept: {}", world.state_dir.display());
    }
    result
}

/// Prints the summary and returns how many jobs were served, of how many queued.
fn summary(world: &World, elapsed: Duration) -> Served {
    let jobs = world.sim.jobs();
    let store = SqliteStore::open(&world.state_dir).ok();
    let attempts = store
        .as_ref()
        .and_then(|s| s.attempts(&crate::store::AttemptFilter::default()).ok())
        .unwrap_or_default();
    let latencies: Vec<i64> = store
        .as_ref()
        .and_then(|s| s.latency_samples(None, 0).ok())
        .unwrap_or_default()
        .into_iter()
        .map(|l| l.latency_ms)
        .collect();
    let units: u64 = world.sim.units_used().values().sum();
    let tally = Tally::of(&jobs, &attempts, latencies, units);
    say!("");
    say!("summary after {:.1}s:", elapsed.as_secs_f64());
    for line in tally.lines() {
        say!("  {line}");
    }
    tally.served()
}

/// The demo's figures, each counting one named thing, so that they add up: jobs by
/// their state on the simulated GitHub, who took them, and our runners by how they
/// ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Tally {
    /// Jobs queued on the simulated GitHub, in all.
    jobs: usize,
    completed: usize,
    running: usize,
    waiting: usize,
    /// Jobs that went to a runner of ours, and to any other runner.
    ours: usize,
    others: usize,
    /// Our runners (attempts), in all, and by how they ended or not yet.
    runners: usize,
    ran_a_job: usize,
    ended_without_one: usize,
    live: usize,
    /// Queue-to-spawn of each runner spawned for a job, sorted.
    latencies: Vec<i64>,
    units: u64,
}

impl Tally {
    fn of(
        jobs: &[crate::sim::JobState],
        attempts: &[crate::domain::Attempt],
        mut latencies: Vec<i64>,
        units: u64,
    ) -> Tally {
        use crate::domain::Outcome;
        use crate::sim::JobStatus;
        let is_ours = |name: &str| attempts.iter().any(|a| a.runner_name == name);
        let count = |st: JobStatus| jobs.iter().filter(|j| j.status == st).count();
        let taken: Vec<&str> = jobs
            .iter()
            .filter_map(|j| j.runner_name.as_deref())
            .collect();
        let ended = |o: Outcome| attempts.iter().filter(|a| a.outcome == Some(o)).count();
        latencies.sort_unstable();
        Tally {
            jobs: jobs.len(),
            completed: count(JobStatus::Completed),
            running: count(JobStatus::InProgress),
            waiting: count(JobStatus::Queued) + count(JobStatus::Waiting),
            ours: taken.iter().filter(|n| is_ours(n)).count(),
            others: taken.iter().filter(|n| !is_ours(n)).count(),
            runners: attempts.len(),
            ran_a_job: ended(Outcome::CompletedJob),
            live: attempts.iter().filter(|a| a.outcome.is_none()).count(),
            ended_without_one: attempts
                .iter()
                .filter(|a| a.outcome.is_some_and(|o| o != Outcome::CompletedJob))
                .count(),
            latencies,
            units,
        }
    }

    fn pct(&self, p: f64) -> i64 {
        let i = ((self.latencies.len() as f64 - 1.0) * p).round();
        self.latencies.get(i as usize).copied().unwrap_or(0)
    }

    fn lines(&self) -> Vec<String> {
        let mut out = vec![
            format!(
                "jobs              {} queued: {} completed, {} running, {} still queued",
                self.jobs, self.completed, self.running, self.waiting
            ),
            format!(
                "taken by          our runners {}, other runners {}",
                self.ours, self.others
            ),
            format!(
                "our runners       {} started: {} ran a job to its end, {} still live, {} ended without a job",
                self.runners, self.ran_a_job, self.live, self.ended_without_one
            ),
        ];
        out.push(if self.latencies.is_empty() {
            "queue-to-spawn    no runner was spawned for a job".to_string()
        } else {
            format!(
                "queue-to-spawn    p50 {} ms, p99 {} ms, over the {} runners spawned",
                self.pct(0.5),
                self.pct(0.99),
                self.latencies.len()
            )
        });
        out.push(format!(
            "rate-limit units  {} spent, {:.1} per completed job",
            self.units,
            self.units as f64 / self.completed.max(1) as f64
        ));
        out
    }

    fn served(&self) -> Served {
        Served {
            served: self.completed,
            queued: self.jobs,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_file_is_its_owners_alone_and_overwritten_whole() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("rm-demo-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("token");
        write_token_file(&path, "ghp_longer_first").unwrap();
        write_token_file(&path, "ghp_short").unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        let back = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!((mode, back.as_str()), (0o600, "ghp_short"));
    }

    #[test]
    fn world_room_sets_the_host_and_linux_profile_and_nothing_else() {
        let d = WorldOptions::new(3);
        assert_eq!(
            (d.host_capacity, d.linux_max, d.linux_idle_timeout_secs),
            (6, 4, 5)
        );
        let r = WorldOptions::new(3).far().room(8, 2, 30);
        assert_eq!(
            (r.host_capacity, r.linux_max, r.linux_idle_timeout_secs),
            (8, 2, 30)
        );
        assert_eq!(
            (r.poll_interval_secs, r.install),
            (3, InstallShape::Realistic)
        );
    }

    fn job(id: u64, status: crate::sim::JobStatus, runner: Option<&str>) -> crate::sim::JobState {
        crate::sim::JobState {
            id,
            run_id: id,
            repo: "octo/app".into(),
            name: "build".into(),
            labels: vec![],
            duration_ms: 1,
            status,
            conclusion: None,
            runner_id: None,
            runner_name: runner.map(str::to_string),
            runner_group_id: None,
            created_at: 0,
            started_at: None,
            completed_at: None,
            script: None,
            output: None,
        }
    }

    fn attempt(id: i64, outcome: Option<crate::domain::Outcome>) -> crate::domain::Attempt {
        let mut a = crate::domain::Attempt::new(id, "linux", "demo", "h", 0);
        a.runner_name = format!("ours-{id}");
        a.outcome = outcome;
        a
    }

    #[test]
    fn an_interrupted_demo_summary_adds_up_and_says_what_each_figure_counts() {
        use crate::domain::Outcome;
        use crate::sim::JobStatus::*;
        // Quit mid-way: two jobs done, one running on our runner, one taken by a
        // runner not ours, one still queued; a third runner of ours ended idle.
        let jobs = [
            job(1, Completed, Some("ours-1")),
            job(2, Completed, Some("ours-2")),
            job(3, InProgress, Some("ours-3")),
            job(4, Completed, Some("someone-else")),
            job(5, Queued, None),
        ];
        let attempts = [
            attempt(1, Some(Outcome::CompletedJob)),
            attempt(2, Some(Outcome::CompletedJob)),
            attempt(3, None),
            attempt(4, Some(Outcome::ExitedIdleWithoutWork)),
        ];
        let t = Tally::of(&jobs, &attempts, vec![900, 300, 600], 40);
        assert_eq!(t.completed + t.running + t.waiting, t.jobs);
        assert_eq!(t.ours + t.others + t.waiting, t.jobs);
        assert_eq!(t.ran_a_job + t.live + t.ended_without_one, t.runners);
        assert_eq!(
            t.lines(),
            [
                "jobs              5 queued: 3 completed, 1 running, 1 still queued",
                "taken by          our runners 3, other runners 1",
                "our runners       4 started: 2 ran a job to its end, 1 still live, 1 ended without a job",
                "queue-to-spawn    p50 600 ms, p99 900 ms, over the 3 runners spawned",
                "rate-limit units  40 spent, 13.3 per completed job",
            ]
        );
        assert_eq!(
            t.served(),
            Served {
                served: 3,
                queued: 5
            }
        );
        let none = Tally::of(&[], &[], vec![], 0);
        assert!(none.lines()[3].contains("no runner was spawned"));
    }

    #[test]
    fn every_job_served_is_success_and_fewer_is_a_failure_naming_them() {
        let all = Served {
            served: 5,
            queued: 5,
        };
        assert_eq!(all.verdict(), Ok(()));
        let some = Served {
            served: 2,
            queued: 5,
        };
        assert_eq!(
            some.verdict(),
            Err(DemoError::Failed("3 of 5 jobs left unserved".into()))
        );
        assert_eq!(
            some.interrupted(),
            DemoError::Interrupted("interrupted with 2 of 5 jobs served".into())
        );
    }
}
