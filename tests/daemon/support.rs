//! Test support for the daemon's end-to-end tests: a `World` (the simulated GitHub on
//! loopback, a temp state directory with targets and profiles, a simulated runner
//! install), the real `runner-manager daemon` as a child process, polling with a
//! deadline, and the end-of-test invariant checker.

#![allow(dead_code)]

use runner_manager::demo;
use runner_manager::domain::{Attempt, AttemptState, Outcome, Reason, TargetScope};
use runner_manager::sim::{JobState, JobStatus, LogEntry, RunnerState, SimConfig};
use runner_manager::sim::{SimHandle, install};
use runner_manager::store::{AttemptFilter, SqliteStore, Store};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_runner-manager");

/// Long enough for a loaded 2-core machine; every wait ends as soon as its condition holds.
pub const SETTLE: Duration = Duration::from_secs(30);

/// Polls `cond` every 20 ms until it holds; false when `within` passed first.
pub fn poll_until(within: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Polls `cond` until it holds; panics naming `what` when `within` passes first.
pub fn wait_until(within: Duration, what: &str, cond: impl FnMut() -> bool) {
    assert!(
        poll_until(within, cond),
        "timed out after {within:?} waiting for {what}"
    );
}

/// A profile to add: labels are the user's (the defaults self-hosted/OS/arch are added).
#[derive(Debug, Clone)]
pub struct ProfileSpec {
    pub name: String,
    pub target: String,
    pub labels: Vec<String>,
    pub min: u32,
    pub max: u32,
    pub idle_timeout: u64,
    pub bootstrap_timeout: u64,
}

impl ProfileSpec {
    pub fn new(name: &str, target: &str, labels: &[&str]) -> ProfileSpec {
        ProfileSpec {
            name: name.into(),
            target: target.into(),
            labels: labels.iter().map(|l| l.to_string()).collect(),
            min: 0,
            max: 2,
            idle_timeout: 2,
            bootstrap_timeout: 15,
        }
    }
    pub fn min(mut self, n: u32) -> Self {
        self.min = n;
        self
    }
    pub fn max(mut self, n: u32) -> Self {
        self.max = n;
        self
    }
    pub fn idle_timeout(mut self, s: u64) -> Self {
        self.idle_timeout = s;
        self
    }
    pub fn bootstrap_timeout(mut self, s: u64) -> Self {
        self.bootstrap_timeout = s;
        self
    }
}

static WORLDS: AtomicU32 = AtomicU32::new(0);

/// One test's world. Dropping it kills the daemon and any runner left (so a failing
/// test leaks nothing), prints the daemon's log when the test panicked, and removes the
/// state directory when it did not.
pub struct World {
    pub sim: SimHandle,
    pub dir: PathBuf,
    pub runner_dir: PathBuf,
    pub host_id: String,
    daemon: Option<Child>,
    daemon_runs: u32,
    tokens: u32,
    /// `dir` is a tmpfs this world mounted (`on_tmpfs`): unmounted when dropped.
    mounted: bool,
    /// Variables the daemon and the CLI get besides the test's own (a fake `podman`).
    pub env: Vec<(String, String)>,
}

impl World {
    /// A sim and a state directory with a host of `capacity`; no targets yet.
    pub fn new(tag: &str, capacity: u32) -> World {
        World::with_sim(tag, capacity, SimConfig::default())
    }

    /// [`World::new`] with the simulated GitHub configured as given.
    pub fn with_sim(tag: &str, capacity: u32, cfg: SimConfig) -> World {
        let dir = World::fresh_dir(tag);
        let runner_dir = dir.join("runner-install");
        install::lay_out(&runner_dir, Path::new(BIN)).expect("the simulated runner lays out");
        World::with_dirs(dir, runner_dir, capacity, false, cfg)
    }

    /// A world whose state directory is a tmpfs of `size_mib` MiB, mounted for this
    /// test (so it can be filled on purpose), with the runner install outside it and
    /// its programs linked symbolically, so each attempt's root takes a few KiB of
    /// it. Panics, naming why, when the mount fails: such a test never passes
    /// without its filesystem.
    pub fn on_tmpfs(tag: &str, capacity: u32, size_mib: u64) -> World {
        let dir = World::fresh_dir(tag);
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size_mib}m,mode=0700")])
            .arg("tmpfs")
            .arg(&dir)
            .output()
            .expect("mount(8) runs");
        assert!(
            out.status.success(),
            "this test needs its state directory on a tmpfs of its own, and mounting \
             one failed (run it as root, as CI does): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let runner_dir = dir.with_extension("install");
        let _ = std::fs::remove_dir_all(&runner_dir);
        install::lay_out(&runner_dir, Path::new(BIN)).expect("the simulated runner lays out");
        for name in ["Runner.Listener", "Runner.Worker"] {
            let p = runner_dir.join("bin").join(name);
            std::fs::remove_file(&p).unwrap();
            std::os::unix::fs::symlink(BIN, &p).unwrap();
        }
        World::with_dirs(dir, runner_dir, capacity, true, SimConfig::default())
    }

    fn fresh_dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "rm-e2e-{tag}-{}-{}",
            std::process::id(),
            WORLDS.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn with_dirs(
        dir: PathBuf,
        runner_dir: PathBuf,
        capacity: u32,
        mounted: bool,
        cfg: SimConfig,
    ) -> World {
        let sim = demo::start_sim(cfg).unwrap();
        let (_, host) = demo::open_with_host(&dir, capacity).unwrap();
        World {
            sim,
            dir,
            runner_dir,
            host_id: host.id,
            daemon: None,
            daemon_runs: 0,
            tokens: 0,
            mounted,
            env: Vec::new(),
        }
    }

    /// A `cp -a` of this world's state directory, as a host image, a backup or a
    /// migration takes one: taken while its daemon (if one runs) is stopped by SIGSTOP,
    /// so the store's files are copied at one moment. The copy's targets name this
    /// world's sim, which its daemon talks to; its own sim goes unused.
    pub fn copy_state(&self, tag: &str) -> World {
        let dir = World::fresh_dir(tag);
        std::fs::remove_dir(&dir).unwrap();
        let pid = self.daemon.as_ref().map(|c| c.id() as i32);
        let stopped = |pid: i32| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| s.rsplit_once(") ").map(|(_, r)| r.starts_with('T')))
                .unwrap_or(true)
        };
        if let Some(pid) = pid {
            // SAFETY: kill(2) on our own child's pid, which we have not reaped yet.
            unsafe { libc::kill(pid, libc::SIGSTOP) };
            wait_until(SETTLE, "the daemon is stopped", || stopped(pid));
        }
        let out = Command::new("cp")
            .arg("-a")
            .arg(&self.dir)
            .arg(&dir)
            .output();
        if let Some(pid) = pid {
            // SAFETY: as above.
            unsafe { libc::kill(pid, libc::SIGCONT) };
        }
        let out = out.expect("cp(1) runs");
        assert!(out.status.success(), "cp -a: {out:?}");
        World::with_dirs(dir, self.runner_dir.clone(), 1, false, SimConfig::default())
    }

    pub fn store(&self) -> SqliteStore {
        SqliteStore::open(&self.dir).unwrap()
    }

    /// A private repository `repo` in the sim and a target `name` for it, polled every
    /// second. `valid` false gives the target a token the sim does not know (401).
    pub fn add_target(&mut self, name: &str, repo: &str, valid: bool) {
        self.sim.add_repo(repo, true);
        self.add_token_target(name, demo::repo_scope(repo), valid);
    }

    /// An organization target `name` for `org`, polling every repository the sim has in
    /// it, with the given repositories (`(name, public)`) added first.
    pub fn add_org_target(&mut self, name: &str, org: &str, repos: &[(&str, bool)]) {
        self.sim.add_org(org);
        for (r, public) in repos {
            self.sim.add_repo(&format!("{org}/{r}"), !public);
        }
        self.add_token_target(name, TargetScope::Org { org: org.into() }, true);
    }

    /// A target `name` for `scope`, polled every second with at most 8 requests in
    /// flight, whose token file `token-<name>` holds a new PAT, known to the sim when
    /// `valid`.
    fn add_token_target(&mut self, name: &str, scope: TargetScope, valid: bool) {
        self.tokens += 1;
        let token = format!("ghp_e2e{}{:08}", std::process::id(), self.tokens);
        let token_file = self.dir.join(format!("token-{name}"));
        demo::sim_token_file(&self.sim, &token_file, &token, valid).unwrap();
        let mut target = demo::sim_target(&self.sim, name, scope, token_file, 1);
        target.max_in_flight = 8;
        self.store().add_target(&target).unwrap();
    }

    pub fn add_profile(&self, spec: ProfileSpec) {
        let store = self.store();
        let host = store.host_or_create().unwrap();
        let mut p = demo::sim_profile(
            &spec.name,
            &spec.target,
            &host,
            &spec.labels,
            &self.runner_dir,
        )
        .unwrap();
        p.min_capacity = spec.min;
        p.max_capacity = spec.max;
        p.idle_timeout_secs = spec.idle_timeout;
        p.bootstrap_timeout_secs = spec.bootstrap_timeout;
        store.add_profile(&p).unwrap();
    }

    /// `self-hosted` plus `labels`: the `runs-on` of a job for a profile with `labels`.
    pub fn enqueue(&self, repo: &str, name: &str, labels: &[&str], ms: u64) -> u64 {
        let mut all = vec!["self-hosted"];
        all.extend_from_slice(labels);
        self.sim.enqueue_job(repo, name, &all, ms)
    }

    // ---- the daemon ----

    pub fn daemon_log_path(&self, run: u32) -> PathBuf {
        if self.mounted {
            // Beside the tmpfs, not in it: filling it must not cost the daemon's log.
            return self.dir.with_extension(format!("daemon-{run}.log"));
        }
        self.dir.join(format!("daemon-{run}.log"))
    }

    pub fn start_daemon(&mut self) {
        self.start_daemon_with(&[]);
    }

    /// Starts the daemon with more options (`--metrics-listen 127.0.0.1:0`).
    pub fn start_daemon_with(&mut self, extra: &[&str]) {
        self.start_daemon_from(Path::new(BIN), extra);
    }

    /// Starts the daemon from the binary `bin` (a copy `update` may replace).
    pub fn start_daemon_from(&mut self, bin: &Path, extra: &[&str]) {
        assert!(self.daemon.is_none(), "a daemon already runs");
        self.daemon_runs += 1;
        let log = std::fs::File::create(self.daemon_log_path(self.daemon_runs)).unwrap();
        let child = Command::new(bin)
            .arg("--state-dir")
            .arg(&self.dir)
            .args(["daemon", "--log-level", "debug", "--drain-timeout", "20"])
            .args(extra)
            .envs(self.env.iter().cloned())
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("the daemon starts");
        self.daemon = Some(child);
    }

    pub fn daemon_pid(&self) -> u32 {
        self.daemon.as_ref().expect("a daemon runs").id()
    }

    /// SIGKILL: the daemon gets no chance to do anything.
    pub fn kill_daemon(&mut self) {
        let mut child = self.daemon.take().expect("a daemon runs");
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// SIGTERM, then waits (bounded) for the daemon to exit.
    pub fn stop_daemon(&mut self) -> ExitStatus {
        self.stop_daemon_with(libc::SIGTERM)
    }

    /// `signal` (SIGTERM, SIGINT), then waits (bounded) for the daemon to exit.
    pub fn stop_daemon_with(&mut self, signal: i32) -> ExitStatus {
        let mut child = self.daemon.take().expect("a daemon runs");
        // SAFETY: kill(2) on our own child's pid, which we have not reaped yet.
        unsafe { libc::kill(child.id() as i32, signal) };
        let mut status = None;
        let ok = poll_until(SETTLE, || {
            status = child.try_wait().unwrap();
            status.is_some()
        });
        if !ok {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the daemon did not exit within {SETTLE:?} of SIGTERM");
        }
        status.unwrap()
    }

    /// The daemon's exit status if it has exited (it is then forgotten).
    pub fn daemon_exited(&mut self) -> Option<ExitStatus> {
        let st = self.daemon.as_mut()?.try_wait().unwrap();
        if st.is_some() {
            self.daemon = None;
        }
        st
    }

    pub fn daemon_logs(&self) -> String {
        (1..=self.daemon_runs)
            .map(|n| {
                format!(
                    "--- daemon run {n} ---\n{}",
                    std::fs::read_to_string(self.daemon_log_path(n)).unwrap_or_default()
                )
            })
            .collect()
    }

    /// `runner-manager --state-dir DIR ARGS...`.
    pub fn cli(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .arg("--state-dir")
            .arg(&self.dir)
            .args(args)
            .envs(self.env.iter().cloned())
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// `cli` that must succeed; returns stdout.
    /// Attempt `id` as `attempts --active --json` shows it (its live meter included);
    /// null once it is no longer active.
    pub fn active_json(&self, id: i64) -> serde_json::Value {
        let list: serde_json::Value =
            serde_json::from_str(&self.cli_ok(&["--json", "attempts", "--active"])).unwrap();
        list.as_array()
            .unwrap()
            .iter()
            .find(|a| a["id"] == id)
            .cloned()
            .unwrap_or_default()
    }

    pub fn cli_ok(&self, args: &[&str]) -> String {
        let out = self.cli(args);
        assert!(
            out.status.success(),
            "runner-manager {args:?} failed: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    pub fn status_json(&self) -> serde_json::Value {
        serde_json::from_str(&self.cli_ok(&["--json", "status"])).unwrap()
    }

    /// Waits (60 s at most) for job `id` to complete and returns it (its `output` is
    /// what it printed).
    pub fn finished(&self, id: u64) -> runner_manager::sim::JobState {
        let mut job = None;
        wait_until(Duration::from_secs(60), "the job completes", || {
            job = self
                .sim
                .jobs()
                .into_iter()
                .find(|j| j.id == id && j.status == runner_manager::sim::JobStatus::Completed);
            job.is_some()
        });
        job.unwrap()
    }

    /// What `status --json` says limits `profile` ("" when it names no such profile).
    pub fn limiting(&self, profile: &str) -> String {
        self.status_json()["profiles"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == profile)
            .map(|p| p["limiting"].as_str().unwrap_or("").to_string())
            .unwrap_or_default()
    }

    // ---- what is there ----

    pub fn attempts(&self) -> Vec<Attempt> {
        self.store().attempts(&AttemptFilter::default()).unwrap()
    }

    pub fn attempt(&self, id: i64) -> Attempt {
        self.store().attempt(id).unwrap()
    }

    /// Attempts whose runner may be alive (the daemon's count toward capacity).
    pub fn live_attempts(&self) -> Vec<Attempt> {
        self.attempts()
            .into_iter()
            .filter(|a| a.state.is_live())
            .collect()
    }

    pub fn live_by_profile(&self) -> BTreeMap<String, u32> {
        let mut m = BTreeMap::new();
        for a in self.live_attempts() {
            *m.entry(a.profile).or_insert(0) += 1;
        }
        m
    }

    pub fn in_state(&self, state: AttemptState) -> Vec<Attempt> {
        self.attempts()
            .into_iter()
            .filter(|a| a.state == state)
            .collect()
    }

    /// `rm-<host short id>-`: every runner name of this world starts with it.
    pub fn runner_prefix(&self) -> String {
        format!("rm-{}-", &self.host_id[..self.host_id.len().min(8)])
    }

    pub fn our_registrations(&self) -> Vec<RunnerState> {
        let p = self.runner_prefix();
        self.sim
            .runners()
            .into_iter()
            .filter(|r| r.name.starts_with(&p))
            .collect()
    }

    /// Runner processes: anything whose cwd or executable is under STATE_DIR/attempts.
    pub fn runner_pids(&self) -> Vec<i32> {
        runner_manager::runner::processes_with_cwd_or_exe_under(&self.dir.join("attempts"))
    }

    pub fn jobs_of(&self, repo: &str) -> Vec<JobState> {
        self.sim
            .jobs()
            .into_iter()
            .filter(|j| j.repo == repo)
            .collect()
    }

    pub fn log(&self) -> Vec<LogEntry> {
        self.sim.request_log()
    }

    pub fn all_completed(&self, repos: &[&str]) -> bool {
        self.sim
            .jobs()
            .iter()
            .filter(|j| repos.contains(&j.repo.as_str()))
            .all(|j| j.status == JobStatus::Completed)
    }

    /// Waits until nothing is alive or left behind: every attempt cleaned, no runner
    /// process, no registration with our names, every job of `repos` completed.
    pub fn wait_settled(&self, repos: &[&str]) {
        wait_until(SETTLE, "every attempt cleaned, every job served", || {
            self.all_completed(repos)
                && self.attempts().iter().all(|a| a.cleaned)
                && self.runner_pids().is_empty()
                && self.our_registrations().is_empty()
        });
    }

    /// The end-of-test invariants (call after `wait_settled`, or after the daemon
    /// stopped): no leaked runner process, no registration with our names, every
    /// attempt ended with an outcome and a reason and cleaned (its root gone), and
    /// every job of `repos` served exactly once, by one of our runners.
    pub fn check_invariants(&self, repos: &[&str]) {
        let pids = self.runner_pids();
        assert!(pids.is_empty(), "leaked runner processes: {pids:?}");
        let regs: Vec<String> = self
            .our_registrations()
            .into_iter()
            .map(|r| r.name)
            .collect();
        assert!(regs.is_empty(), "registrations left on GitHub: {regs:?}");
        let attempts = self.attempts();
        for a in &attempts {
            assert!(
                a.outcome.is_some() && a.reason.is_some() && a.cleaned,
                "attempt {} not finished with an outcome and a reason, and cleaned: {a:?}",
                a.id
            );
            assert!(
                a.ended_at.is_some(),
                "attempt {} has no end time: {a:?}",
                a.id
            );
            let root = self.dir.join("attempts").join(a.id.to_string());
            assert!(
                !root.exists(),
                "attempt {} root left: {}",
                a.id,
                root.display()
            );
        }
        let names: HashSet<&str> = attempts.iter().map(|a| a.runner_name.as_str()).collect();
        let mut served_by: BTreeMap<String, u64> = BTreeMap::new();
        for j in self.sim.jobs() {
            if !repos.contains(&j.repo.as_str()) {
                continue;
            }
            assert_eq!(j.status, JobStatus::Completed, "job not served: {j:?}");
            let runner = j.runner_name.as_deref().unwrap_or("");
            assert!(
                names.contains(runner),
                "job {} was not served by one of our runners: {j:?}",
                j.name
            );
            if let Some(other) = served_by.insert(runner.to_string(), j.id) {
                panic!("runner {runner} served two jobs: {other} and {}", j.id);
            }
            let claimed: Vec<i64> = attempts
                .iter()
                .filter(|a| a.job_name.as_deref() == Some(j.name.as_str()))
                .map(|a| a.id)
                .collect();
            assert!(
                claimed.len() == 1,
                "job {} should be recorded by exactly one attempt, is by {claimed:?}",
                j.name
            );
        }
    }

    /// The attempt that ran job `name`.
    pub fn attempt_of_job(&self, name: &str) -> Attempt {
        let job = self
            .sim
            .jobs()
            .into_iter()
            .find(|j| j.name == name)
            .expect("such a job");
        let runner = job.runner_name.expect("the job has a runner");
        self.attempts()
            .into_iter()
            .find(|a| a.runner_name == runner)
            .unwrap_or_else(|| panic!("no attempt is runner {runner}"))
    }

    pub fn outcomes(&self) -> Vec<(i64, Option<Outcome>, Option<Reason>)> {
        self.attempts()
            .into_iter()
            .map(|a| (a.id, a.outcome, a.reason))
            .collect()
    }
}

/// A victim job that runs until the file `release` appears.
pub fn victim(release: &std::path::Path) -> String {
    format!(
        "echo victim-up; while [ ! -e {} ]; do sleep 0.05; done; echo victim-done\n",
        release.display()
    )
}

/// Waits for the victim's attempt to be busy with its process known, and returns it.
pub fn busy_victim(w: &World) -> runner_manager::domain::Attempt {
    let mut v = None;
    wait_until(SETTLE, "the victim runs", || {
        v = w
            .attempts()
            .into_iter()
            .find(|a| a.state == runner_manager::domain::AttemptState::Busy && a.pid.is_some());
        v.is_some()
    });
    v.unwrap()
}

impl Drop for World {
    fn drop(&mut self) {
        if let Some(mut d) = self.daemon.take() {
            let _ = d.kill();
            let _ = d.wait();
        }
        for pid in self.runner_pids() {
            // SAFETY: kill(2) on a runner process of this test's own state directory.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        if std::thread::panicking() {
            eprintln!("state dir kept: {}", self.dir.display());
            eprintln!("attempts: {:#?}", self.outcomes());
            eprintln!("{}", self.daemon_logs());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
        if self.mounted {
            // A mount outlives no test, failed or not (its logs were printed above).
            let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
            let _ = std::fs::remove_dir_all(&self.dir);
            let _ = std::fs::remove_dir_all(&self.runner_dir);
            for run in 1..=self.daemon_runs {
                let _ = std::fs::remove_file(self.daemon_log_path(run));
            }
        }
        self.sim.shutdown();
    }
}

/// Asserts that nothing was sent with `limited`'s credential after it was answered and
/// before its `retry-after` of `ms` had passed; the failure lists "METHOD endpoint".
/// The wait runs from when the answer was sent (`done_at`): a request that arrived
/// before then left the client before it could know (the daemon sends several at
/// once), as `benches/support/promises.rs::retry_after` explains.
pub fn assert_quiet_within(log: &[LogEntry], limited: &LogEntry, ms: i64) {
    assert_quiet_within_since(log, limited, ms, 0);
}

/// [`assert_quiet_within`], for the requests that arrived from `since` on (a restarted
/// daemon's). Before a restart, another thread of the daemon that answered may have
/// sent in the moment between the answer being written and the client reading it,
/// which no client can help.
pub fn assert_quiet_within_since(log: &[LogEntry], limited: &LogEntry, ms: i64, since: i64) {
    // As `benches/support/promises.rs::retry_after` (`READ_GRACE_MS`): the client's
    // other threads may send in the moment before it has read the answer.
    const READ_GRACE_MS: i64 = 50;
    let sent = limited.done_at.unwrap_or(limited.at);
    let from = (sent + READ_GRACE_MS).max(since);
    let early: Vec<String> = log
        .iter()
        .filter(|e| {
            e.credential == limited.credential
                && !std::ptr::eq(*e, limited)
                && e.at >= from
                && e.at < sent + ms
        })
        .map(|e| format!("{} {}", e.method, e.endpoint))
        .collect();
    assert!(
        early.is_empty(),
        "requests inside a {ms} ms retry-after: {early:?}"
    );
}

/// Waits until the daemon has written target `t`'s rate-limit hold to the store (what
/// a restarted daemon reads back).
pub fn wait_hold_recorded(w: &World, t: &str) {
    wait_until(SETTLE, "the hold is recorded", || {
        runner_manager::store::daemon_facts::rate_limit_hold(&w.store(), t)
            .unwrap()
            .is_some()
    });
}
