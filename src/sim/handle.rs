//! Starting the simulated GitHub and driving it in-process: `SimGitHub::start` and the
//! `SimHandle` methods tests, benchmarks and the demo call.

use std::collections::BTreeMap;
use std::io;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use super::faults::{FaultRule, RunnerFaultRule};
use super::state::{
    AppState, InstallationState, JobState, LogEntry, RunnerState, Scope, SimConfig, State,
};
use crate::http_server::{Handler, Reply, Request, Server, Stopper};
use crate::timefmt::{Millis, now_millis};

/// The shared sim: state behind one mutex, a condvar runners' long polls wait on.
pub struct Sim {
    pub state: Mutex<State>,
    pub changed: Condvar,
    pub stopper: Arc<Stopper>,
}

impl Sim {
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Handler for Sim {
    fn handle(&self, request: Request) -> Reply {
        use super::latency::carry;
        // GitHub fails a job whose runner stopped renewing it; the sim does so as
        // time comes up in any request.
        if !self
            .lock()
            .fail_lost_jobs(crate::timefmt::now_millis())
            .is_empty()
        {
            self.changed.notify_all();
        }
        // The runner's calls go to GitHub too, so they travel as far; the sim's own
        // controls do not (they are the test's hands, not GitHub). Runner calls are not
        // counted in flight: their credentials are the runners', not a client's.
        if request.path.starts_with("/_sim/runner/") {
            carry(
                self,
                request,
                |_, _, _| None,
                |sim, req, _| super::control::serve(sim, req),
            )
        } else if request.path == "/_sim" || request.path.starts_with("/_sim/") {
            super::control::serve(self, request)
        } else if super::scaleset::serves(&request.path) {
            carry(
                self,
                request,
                |_, req, _| Some(super::scaleset::credential_of(&req.path).to_string()),
                super::scaleset::serve,
            )
        } else {
            carry(
                self,
                request,
                super::github::credential_of,
                super::github::serve,
            )
        }
    }
}

/// The simulated GitHub's listener limits: its clients are our own daemons, runners
/// and tests on this machine, so no source is a stranger to be capped, and a kept-alive
/// connection is closed only after minutes idle (`http_server`'s defaults, for the
/// daemon's own listeners, close it after 10 s and cap each source: issue 33).
const SIM_LIMITS: crate::http_server::gate::GateLimits = crate::http_server::gate::GateLimits {
    max_unauthenticated: 512,
    max_per_source: 512,
    handshake: std::time::Duration::from_secs(300),
};

/// The entry point: `SimGitHub::start(SimConfig::default())`.
pub struct SimGitHub;

impl SimGitHub {
    pub fn start(cfg: SimConfig) -> io::Result<SimHandle> {
        let stopper = Arc::new(Stopper::default());
        let listen = cfg.listen;
        let sim = Arc::new(Sim {
            state: Mutex::new(State::new(cfg, String::new())),
            changed: Condvar::new(),
            stopper: stopper.clone(),
        });
        let server = Server::start_with(listen, sim.clone(), stopper, SIM_LIMITS)?;
        let url = format!("http://{}", server.addr());
        sim.lock().base_url = url.clone();
        let hooks = Some(super::webhooks::start_sender(sim.clone())?);
        Ok(SimHandle {
            sim,
            server,
            url,
            hooks,
        })
    }
}

/// A running sim. Dropping it shuts the server down and joins its threads.
pub struct SimHandle {
    sim: Arc<Sim>,
    server: Server,
    url: String,
    /// The webhook sender's thread (`webhooks.rs`).
    hooks: Option<std::thread::JoinHandle<()>>,
}

impl SimHandle {
    /// `http://127.0.0.1:PORT`: the API base URL (no `/api/v3`).
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn shutdown(&mut self) {
        self.sim.stopper.stop();
        self.sim.changed.notify_all();
        self.server.shutdown();
        if let Some(t) = self.hooks.take() {
            let _ = t.join();
        }
    }

    /// Direct access for what the methods below do not cover.
    /// Takes the jobs completed before `before` (unix ms), and the runs left with no
    /// job, out of the simulated GitHub, and returns them. The sim lists runs by
    /// scanning every run and, for each, every job, under the lock every request
    /// takes: a long benchmark that keeps thousands of finished jobs would measure the
    /// sim. GitHub answers `status=queued` from an index, so a sim holding only the
    /// recent runs is the closer model.
    pub fn archive_completed(&self, before: Millis) -> Vec<super::JobState> {
        self.with_state(|s| {
            let done: Vec<u64> = s
                .jobs
                .values()
                .filter(|j| {
                    j.status == super::JobStatus::Completed
                        && j.completed_at.is_some_and(|at| at <= before)
                })
                .map(|j| j.id)
                .collect();
            let mut out = Vec::with_capacity(done.len());
            for id in done {
                if let Some(j) = s.jobs.remove(&id) {
                    if !s.jobs.values().any(|o| o.run_id == j.run_id) {
                        s.runs.remove(&j.run_id);
                    }
                    out.push(j);
                }
            }
            out
        })
    }

    pub fn with_state<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let out = f(&mut self.sim.lock());
        self.sim.changed.notify_all();
        out
    }

    /// Publishes a new runner release: the downloads API lists it from now on, and
    /// older runners whose registration allows it are told to update to it.
    pub fn publish_runner_release(&self, version: &str) {
        self.with_state(|st| st.runner_release = version.to_string());
    }

    /// The runners that updated themselves: (runner id, version they went to).
    pub fn self_updates(&self) -> Vec<(u64, String)> {
        self.sim.lock().self_updates.clone()
    }

    pub fn add_org(&self, login: &str) -> u64 {
        self.with_state(|s| s.add_org(login))
    }

    /// Adds `owner/name`; returns its id.
    pub fn add_repo(&self, full_name: &str, private: bool) -> u64 {
        self.with_state(|s| s.add_repo(full_name, private, now_millis()))
    }

    pub fn add_runner_group(&self, org: &str, name: &str) -> u64 {
        self.with_state(|s| s.add_runner_group(org, name, false))
    }

    /// A runner group whose settings let public repositories' jobs reach it.
    pub fn add_public_runner_group(&self, org: &str, name: &str) -> u64 {
        self.with_state(|s| s.add_runner_group(org, name, true))
    }

    /// Makes `token` a valid PAT; returns its log id (`pat:N`).
    pub fn add_pat(&self, token: &str) -> String {
        self.with_state(|s| {
            let n = s.pats.len();
            let n = *s.pats.entry(token.to_string()).or_insert(n);
            format!("pat:{n}")
        })
    }

    /// Makes `token` a valid PAT that GitHub says expires at `at` (unix ms); returns its
    /// log id.
    pub fn add_expiring_pat(&self, token: &str, at: crate::timefmt::Millis) -> String {
        let id = self.add_pat(token);
        self.with_state(|s| {
            let n = s.pats[token];
            s.pat_expiry.insert(n, at);
        });
        id
    }

    /// Makes `token` a valid fine-grained PAT holding only `permissions` (GitHub's
    /// names and levels: `("administration", "write")`, `("actions", "read")`); an
    /// endpoint that needs another answers 403 naming it. Returns its log id.
    pub fn add_fine_grained_pat(&self, token: &str, permissions: &[(&str, &str)]) -> String {
        let id = self.add_pat(token);
        self.with_state(|s| {
            let n = s.pats[token];
            s.fine_grained.insert(
                n,
                permissions
                    .iter()
                    .map(|(p, l)| (p.to_string(), l.to_string()))
                    .collect(),
            );
        });
        id
    }

    /// Registers a GitHub App by its PKCS#1 private key PEM (only the public half is kept).
    pub fn add_app(
        &self,
        app_id: u64,
        client_id: &str,
        private_key_pem: &str,
    ) -> Result<(), String> {
        let (n, e) = super::auth::public_components_from_private_pem(private_key_pem)?;
        self.with_state(|s| {
            s.apps.insert(
                app_id,
                AppState {
                    app_id,
                    client_id: client_id.to_string(),
                    n,
                    e,
                },
            )
        });
        Ok(())
    }

    /// Installs the App on an account (org or user); returns the installation id.
    pub fn add_installation(&self, app_id: u64, account: &str) -> u64 {
        self.with_state(|s| {
            let id = s.next_id();
            s.installations.insert(
                id,
                InstallationState {
                    id,
                    app_id,
                    account: account.to_string(),
                },
            );
            id
        })
    }

    /// One queued job in a run of its own; returns the job id.
    pub fn enqueue_job(&self, repo: &str, name: &str, labels: &[&str], duration_ms: u64) -> u64 {
        let labels = labels.iter().map(|l| l.to_string()).collect();
        self.with_state(|s| {
            s.enqueue_run(
                repo,
                "CI",
                &[(name.to_string(), labels, duration_ms)],
                now_millis(),
            )
            .1[0]
        })
    }

    /// One job in a run of its own that starts `waiting` (a deployment gate or a
    /// concurrency group holds it: listed as a `waiting` run, its job `waiting`, no
    /// runner or scale set given it) until [`SimHandle::approve_run`]; returns (run
    /// id, job id).
    pub fn enqueue_waiting_job(
        &self,
        repo: &str,
        name: &str,
        labels: &[&str],
        duration_ms: u64,
    ) -> (u64, u64) {
        let labels = labels.iter().map(|l| l.to_string()).collect();
        self.with_state(|s| {
            let (run, ids) = s.enqueue_waiting_run(
                repo,
                "CI",
                &[(name.to_string(), labels, duration_ms)],
                now_millis(),
            );
            (run, ids[0])
        })
    }

    /// Releases a run's `waiting` jobs to `queued`, as an approval does; returns them.
    pub fn approve_run(&self, run_id: u64) -> Vec<u64> {
        self.with_state(|s| s.release_run(run_id))
    }

    /// Holds a run's queued jobs in `waiting` again; returns how many.
    pub fn hold_run(&self, run_id: u64) -> usize {
        self.with_state(|s| s.hold_run(run_id))
    }

    /// A run with several jobs (name, labels, duration ms); returns (run id, job ids).
    /// Queues a job whose steps are `script` (run by the simulated runner's worker with
    /// `/bin/sh -c` in the runner's work folder); its output comes back in the job's
    /// `output` once it completes.
    pub fn enqueue_script_job(&self, repo: &str, name: &str, labels: &[&str], script: &str) -> u64 {
        let labels = labels.iter().map(|l| l.to_string()).collect();
        // One lock: a runner must never take the job before it has its script.
        self.with_state(|s| {
            let id = s
                .enqueue_run(repo, "CI", &[(name.to_string(), labels, 0)], now_millis())
                .1[0];
            if let Some(j) = s.jobs.get_mut(&id) {
                j.script = Some(script.to_string());
            }
            id
        })
    }

    pub fn enqueue_run(
        &self,
        repo: &str,
        workflow: &str,
        jobs: &[(String, Vec<String>, u64)],
    ) -> (u64, Vec<u64>) {
        self.with_state(|s| s.enqueue_run(repo, workflow, jobs, now_millis()))
    }

    pub fn jobs(&self) -> Vec<JobState> {
        self.sim.lock().jobs.values().cloned().collect()
    }

    pub fn job(&self, id: u64) -> Option<JobState> {
        self.sim.lock().jobs.get(&id).cloned()
    }

    /// A job whose runner stops renewing it fails this long after its last renewal
    /// (GitHub: ten minutes), from now on.
    pub fn set_lost_runner_timeout(&self, after: std::time::Duration) {
        self.with_state(|s| s.cfg.lost_runner_ms = after.as_millis() as u64);
    }

    /// Jobs re-run through `POST .../actions/jobs/{job_id}/rerun`.
    pub fn reruns(&self) -> u64 {
        self.sim.lock().reruns
    }

    pub fn runners(&self) -> Vec<RunnerState> {
        self.sim.lock().runners.values().cloned().collect()
    }

    /// Creates a runner registration directly (as generate-jitconfig would) and returns
    /// its id and encoded JIT config.
    pub fn register_runner(
        &self,
        scope: Scope,
        name: &str,
        labels: &[&str],
    ) -> (u64, crate::secret::Secret) {
        self.with_state(|s| {
            super::control::register(
                s,
                scope,
                name,
                labels.iter().map(|l| l.to_string()).collect(),
                now_millis(),
            )
        })
    }

    /// Deletes a registration under its runner (a "registration vanished" fault).
    pub fn remove_runner(&self, id: u64) -> bool {
        self.with_state(|s| s.remove_runner(id, now_millis()).is_some())
    }

    pub fn request_log(&self) -> Vec<LogEntry> {
        self.sim.lock().log.clone()
    }

    /// Requests logged for `method` on GitHub's path `template`.
    pub fn count(&self, method: &str, template: &str) -> usize {
        self.sim
            .lock()
            .log
            .iter()
            .filter(|e| e.method == method && e.endpoint == template)
            .count()
    }

    /// Primary rate-limit units spent, per credential id.
    pub fn units_used(&self) -> BTreeMap<String, u64> {
        self.sim.lock().units_used()
    }

    /// Requests in flight per credential now, and the most there were at once since the
    /// sim started (credentials as the request log names them; runner calls are not
    /// counted).
    pub fn in_flight(&self) -> super::latency::InFlight {
        self.sim.lock().in_flight.clone()
    }

    /// The peak of [`SimHandle::in_flight`] per credential.
    pub fn peak_in_flight(&self) -> BTreeMap<String, u32> {
        self.sim.lock().in_flight.peak.clone()
    }

    /// GitHub's secondary limits from now on (`SecondaryLimits::off()` to lift them).
    pub fn set_secondary_limits(&self, limits: super::secondary::SecondaryLimits) {
        self.with_state(|s| s.cfg.secondary = limits);
    }

    /// The secondary limits requests went over since the sim started.
    pub fn secondary_hits(&self) -> super::secondary::Hits {
        self.sim.lock().secondary.hits().clone()
    }

    /// Moves GitHub (further) away from now on; requests already in flight keep theirs.
    pub fn set_latency(&self, latency: super::latency::Latency) {
        self.with_state(|s| s.cfg.latency = latency);
    }

    pub fn add_fault(&self, rule: FaultRule) {
        self.with_state(|s| s.faults.push(rule));
    }

    pub fn add_runner_fault(&self, rule: RunnerFaultRule) {
        self.with_state(|s| s.runner_faults.push(rule));
    }

    pub fn clear_faults(&self) {
        self.with_state(|s| {
            s.faults.clear();
            s.runner_faults.clear();
        });
    }
}

impl Drop for SimHandle {
    fn drop(&mut self) {
        self.shutdown();
    }
}
