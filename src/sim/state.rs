//! The simulated GitHub's state: repositories, orgs, runs, jobs, runners, groups, Apps,
//! credentials, rate-limit buckets, fault rules and the request log. No HTTP here: the
//! REST layer (`github.rs`) and the control layer (`control.rs`) read and change it.
//! The runners' side of it (registrations and the runner process's calls) is `runners`.

mod runners;

pub use runners::RunnerCallError;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use super::faults::{FaultRule, RunnerFault, RunnerFaultRule};
use super::rng::SplitMix64;
use crate::timefmt::Millis;

/// How a sim starts.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Where to listen; `127.0.0.1:0` picks a free port.
    pub listen: SocketAddr,
    /// Seed of the fault RNG and of the tokens the sim hands out.
    pub seed: u64,
    /// Primary rate limit per credential per hour.
    pub rate_limit: u64,
    /// 403 (GitHub's usual) or 429 when a credential's limit is spent.
    pub exhausted_status: u16,
    /// Lifetime of installation tokens (GitHub: one hour).
    pub installation_token_ttl_secs: u64,
    /// How long a simulated runner's poll waits for a job before answering "nothing".
    pub runner_poll_ms: u64,
    /// How far away GitHub is (`latency.rs`); zero is loopback.
    pub latency: super::latency::Latency,
    /// How long a job's runner may go without renewing it before the job fails as
    /// GitHub fails it ("lost communication with the server"): ten minutes on GitHub
    /// (the runner renews every minute).
    pub lost_runner_ms: u64,
    /// GitHub's secondary rate limits (`secondary.rs`); on by default.
    pub secondary: super::secondary::SecondaryLimits,
}

/// GitHub's: a job whose runner has not renewed it for ten minutes fails.
pub const LOST_RUNNER_MS: u64 = 600_000;

/// The message GitHub ends such a job with.
pub fn lost_runner_message(runner: &str) -> String {
    format!(
        "The self-hosted runner: {runner} lost communication with the server. Verify the \
         machine is running and has a healthy network connection. Anything in your workflow \
         that terminates the runner process, starves it for CPU/Memory, or blocks its \
         network access can cause this error."
    )
}

impl Default for SimConfig {
    fn default() -> SimConfig {
        SimConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            seed: 1,
            rate_limit: 5000,
            exhausted_status: 403,
            installation_token_ttl_secs: 3600,
            runner_poll_ms: 1000,
            latency: Default::default(),
            lost_runner_ms: LOST_RUNNER_MS,
            secondary: Default::default(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RepoState {
    pub id: u64,
    pub full_name: String,
    pub private: bool,
    pub created_at: Millis,
}

impl RepoState {
    pub fn owner(&self) -> &str {
        self.full_name.split_once('/').map_or("", |(o, _)| o)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OrgState {
    pub id: u64,
    pub login: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunState {
    pub id: u64,
    pub repo: String,
    pub run_number: u64,
    pub workflow_name: String,
    pub created_at: Millis,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    Queued,
    InProgress,
    Completed,
    /// Held before any runner may take it: a deployment's required reviewers or a
    /// concurrency group (GitHub's `waiting`), until it is released to `queued`
    /// ([`State::release_run`], as an approval does).
    Waiting,
}

impl JobStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Queued => "queued",
            JobStatus::InProgress => "in_progress",
            JobStatus::Completed => "completed",
            JobStatus::Waiting => "waiting",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobState {
    pub id: u64,
    pub run_id: u64,
    pub repo: String,
    pub name: String,
    pub labels: Vec<String>,
    pub duration_ms: u64,
    pub status: JobStatus,
    /// GitHub's conclusion (`success`, `failure`...) once completed.
    pub conclusion: Option<String>,
    pub runner_id: Option<u64>,
    pub runner_name: Option<String>,
    pub runner_group_id: Option<u64>,
    pub created_at: Millis,
    pub started_at: Option<Millis>,
    pub completed_at: Option<Millis>,
    /// A shell script the simulated runner's worker runs as the job's steps (what a
    /// workflow's `run:` would be), e.g. the hostile-job suite's attacks.
    #[serde(default)]
    pub script: Option<String>,
    /// What the script printed (stdout and stderr, at most [`MAX_JOB_OUTPUT`] bytes),
    /// as the runner reported it with the job's result.
    #[serde(default)]
    pub output: Option<String>,
    /// When its runner last renewed it (took it, or said it still runs it).
    #[serde(default)]
    pub renewed_at: Option<Millis>,
}

/// The most of a job's output the simulation keeps.
pub const MAX_JOB_OUTPUT: usize = 64 * 1024;

/// Where a runner is registered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    Repo(String),
    Org(String),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunnerState {
    pub id: u64,
    pub name: String,
    pub scope: Scope,
    pub group_id: u64,
    pub labels: Vec<String>,
    /// True once its process has connected (GitHub's `online`).
    pub online: bool,
    pub busy: bool,
    pub ephemeral: bool,
    pub version: Option<String>,
    pub job_id: Option<u64>,
    pub faults: Vec<RunnerFault>,
    pub created_at: Millis,
    /// The runner process's credential for `/_sim/runner/*`. Never serialized.
    #[serde(skip)]
    pub credential: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GroupState {
    pub id: u64,
    pub org: String,
    pub name: String,
    /// GitHub's `allows_public_repositories`: public repositories' jobs may reach it.
    #[serde(default)]
    pub allows_public: bool,
}

#[derive(Debug, Clone)]
pub struct AppState {
    pub app_id: u64,
    pub client_id: String,
    /// RSA public modulus and exponent, big-endian.
    pub n: Vec<u8>,
    pub e: Vec<u8>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InstallationState {
    pub id: u64,
    pub app_id: u64,
    pub account: String,
}

#[derive(Debug, Clone)]
pub struct TokenState {
    pub installation_id: u64,
    pub expires_at: Millis,
}

/// One request as the sim saw it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LogEntry {
    pub method: String,
    pub path: String,
    /// Its query string (`status=queued&per_page=100`), empty without one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub query: String,
    /// GitHub's path template it matched (`/repos/{owner}/{repo}/actions/runs`), or the path.
    pub endpoint: String,
    pub status: u16,
    /// `pat:N`, `installation:ID`, `app:ID`, or None when unauthenticated.
    pub credential: Option<String>,
    /// When it arrived (its bytes were read; on loopback, when the client sent it).
    pub at: Millis,
    /// When its answer was written (after the way back; on loopback, when the client
    /// read it). None while in flight, for a hung request, and before distance existed.
    #[serde(default)]
    pub done_at: Option<Millis>,
    /// Whether it spent a primary rate-limit unit.
    pub counted: bool,
    /// The fault applied to it, if any (`drop`, `status`...).
    pub fault: Option<String>,
}

#[derive(Debug, Clone, Copy)]
pub struct Bucket {
    pub limit: u64,
    pub used: u64,
    /// Epoch seconds when the window resets.
    pub reset: u64,
}

pub struct State {
    pub cfg: SimConfig,
    pub base_url: String,
    next_id: u64,
    pub repos: BTreeMap<String, RepoState>,
    pub orgs: BTreeMap<String, OrgState>,
    pub runs: BTreeMap<u64, RunState>,
    pub jobs: BTreeMap<u64, JobState>,
    /// Jobs re-run through the REST endpoint.
    pub reruns: u64,
    pub runners: BTreeMap<u64, RunnerState>,
    pub groups: Vec<GroupState>,
    pub apps: HashMap<u64, AppState>,
    pub installations: BTreeMap<u64, InstallationState>,
    /// PAT -> its index (`pat:N` in the log).
    pub pats: HashMap<String, usize>,
    /// Fine-grained PATs, by index: the permissions each holds (`permissions.rs`);
    /// a PAT not here holds every permission.
    pub fine_grained: HashMap<usize, BTreeMap<String, String>>,
    /// PATs with an expiry, by index: GitHub tells it in every answer's
    /// `github-authentication-token-expiration`.
    pub pat_expiry: HashMap<usize, Millis>,
    pub tokens: HashMap<String, TokenState>,
    pub buckets: HashMap<String, Bucket>,
    pub log: Vec<LogEntry>,
    pub faults: Vec<FaultRule>,
    pub runner_faults: Vec<RunnerFaultRule>,
    pub rng: SplitMix64,
    /// Draws the latency's jitter; apart from `rng` so that turning distance on does not
    /// change which requests a seeded fault hits.
    pub latency_rng: SplitMix64,
    /// Requests in flight per credential, and the peak (`latency.rs`).
    pub in_flight: super::latency::InFlight,
    /// Points spent per credential and endpoint, and the secondary limits hit.
    pub secondary: super::secondary::SecondaryBook,
    /// Ids handed out by a JIT call that a `VanishRegistration` fault may delete.
    pub last_created_runner: Option<u64>,
    /// The runner scale set API's world (`scaleset_state.rs`).
    pub scalesets: super::scaleset_state::ScaleSetWorld,
    /// The runner-manager binary the served runner tarball's `bin/Runner.Listener`
    /// execs (see `downloads`); `None` falls back to the sim's own executable when that
    /// is runner-manager.
    pub runner_binary: Option<std::path::PathBuf>,
    /// The newest runner release: what the downloads API lists, and what a runner
    /// whose registration allows updates is told to update to when it is older.
    pub runner_release: String,
    /// Runners that updated themselves (in their own roots), by runner id and the
    /// version they went to.
    pub self_updates: Vec<(u64, String)>,
    /// Runner processes that connected (a registration's first connect) and those
    /// given a job: at rest, the difference is the runners that ran no job.
    pub runners_connected: u64,
    pub runners_given_a_job: u64,
    /// The `workflow_job` webhook, its outbox and figures (`webhooks.rs`).
    pub webhooks: super::webhooks::Webhooks,
    /// The names of runners that connected and have not been given a job (yet), so a
    /// benchmark can say which runner ran none.
    pub connected_without_job: std::collections::BTreeSet<String>,
}

impl State {
    pub fn new(cfg: SimConfig, base_url: String) -> State {
        let rng = SplitMix64::new(cfg.seed);
        let latency_rng = SplitMix64::new(cfg.seed ^ 0x1a7e_0c1e_d157_a4ce);
        State {
            cfg,
            base_url,
            next_id: 1000,
            repos: BTreeMap::new(),
            orgs: BTreeMap::new(),
            runs: BTreeMap::new(),
            jobs: BTreeMap::new(),
            reruns: 0,
            runners: BTreeMap::new(),
            groups: Vec::new(),
            apps: HashMap::new(),
            installations: BTreeMap::new(),
            pats: HashMap::new(),
            fine_grained: HashMap::new(),
            pat_expiry: HashMap::new(),
            tokens: HashMap::new(),
            buckets: HashMap::new(),
            log: Vec::new(),
            faults: Vec::new(),
            runner_faults: Vec::new(),
            rng,
            latency_rng,
            in_flight: Default::default(),
            secondary: Default::default(),
            last_created_runner: None,
            scalesets: Default::default(),
            runner_binary: None,
            runner_release: super::control::RUNNER_VERSION.to_string(),
            self_updates: Vec::new(),
            runners_connected: 0,
            runners_given_a_job: 0,
            webhooks: Default::default(),
            connected_without_job: Default::default(),
        }
    }

    pub fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    pub fn add_org(&mut self, login: &str) -> u64 {
        if let Some(o) = self.orgs.get(login) {
            return o.id;
        }
        let id = self.next_id();
        self.orgs.insert(
            login.to_string(),
            OrgState {
                id,
                login: login.to_string(),
            },
        );
        id
    }

    pub fn add_repo(&mut self, full_name: &str, private: bool, now: Millis) -> u64 {
        if let Some(r) = self.repos.get_mut(full_name) {
            r.private = private;
            return r.id;
        }
        let id = self.next_id();
        let repo = RepoState {
            id,
            full_name: full_name.to_string(),
            private,
            created_at: now,
        };
        self.repos.insert(full_name.to_string(), repo);
        id
    }

    /// Adds a named runner group to an org (the Default group, id 1, always exists).
    pub fn add_runner_group(&mut self, org: &str, name: &str, allows_public: bool) -> u64 {
        let id = self.groups.len() as u64 + 2;
        self.groups.push(GroupState {
            id,
            org: org.to_string(),
            name: name.to_string(),
            allows_public,
        });
        id
    }

    pub fn group_exists(&self, scope: &Scope, id: u64) -> bool {
        id == 1
            || matches!(scope, Scope::Org(o) if self.groups.iter().any(|g| g.id == id && &g.org == o))
    }

    /// A run with one queued job per spec; returns the run id and the job ids.
    pub fn enqueue_run(
        &mut self,
        repo: &str,
        workflow: &str,
        jobs: &[(String, Vec<String>, u64)],
        now: Millis,
    ) -> (u64, Vec<u64>) {
        self.enqueue_run_as(repo, workflow, jobs, JobStatus::Queued, now)
    }

    /// A run whose jobs start `waiting` (a deployment gate or a concurrency group
    /// holds them): listed as a `waiting` run, offered to no runner or scale set until
    /// [`State::release_run`].
    pub fn enqueue_waiting_run(
        &mut self,
        repo: &str,
        workflow: &str,
        jobs: &[(String, Vec<String>, u64)],
        now: Millis,
    ) -> (u64, Vec<u64>) {
        self.enqueue_run_as(repo, workflow, jobs, JobStatus::Waiting, now)
    }

    fn enqueue_run_as(
        &mut self,
        repo: &str,
        workflow: &str,
        jobs: &[(String, Vec<String>, u64)],
        status: JobStatus,
        now: Millis,
    ) -> (u64, Vec<u64>) {
        let run_id = self.next_id();
        let run_number = self.runs.values().filter(|r| r.repo == repo).count() as u64 + 1;
        self.runs.insert(
            run_id,
            RunState {
                id: run_id,
                repo: repo.to_string(),
                run_number,
                workflow_name: workflow.to_string(),
                created_at: now,
            },
        );
        let mut ids = Vec::new();
        for (name, labels, duration_ms) in jobs {
            let id = self.next_id();
            self.jobs.insert(
                id,
                JobState {
                    id,
                    run_id,
                    repo: repo.to_string(),
                    name: name.clone(),
                    labels: labels.clone(),
                    duration_ms: *duration_ms,
                    status,
                    conclusion: None,
                    runner_id: None,
                    runner_name: None,
                    runner_group_id: None,
                    created_at: now,
                    started_at: None,
                    completed_at: None,
                    script: None,
                    output: None,
                    renewed_at: None,
                },
            );
            ids.push(id);
        }
        if status == JobStatus::Queued {
            self.scaleset_jobs_queued(&ids);
            self.hook_jobs(&ids, "queued");
        } else {
            self.hook_jobs(&ids, "waiting");
        }
        (run_id, ids)
    }

    /// Puts a run's queued jobs in `waiting` (a concurrency group took it back, say);
    /// returns how many. A job a scale set was already offered keeps its offer.
    pub fn hold_run(&mut self, run_id: u64) -> usize {
        let mut n = 0;
        let mut held = Vec::new();
        for j in self.jobs.values_mut().filter(|j| j.run_id == run_id) {
            if j.status == JobStatus::Queued {
                j.status = JobStatus::Waiting;
                held.push(j.id);
                n += 1;
            }
        }
        self.hook_jobs(&held, "waiting");
        n
    }

    /// Releases a run's `waiting` jobs to `queued`, as an approval of its deployment
    /// (or its concurrency group's turn) does: runners and scale sets may take them
    /// from now on. Returns the jobs released.
    pub fn release_run(&mut self, run_id: u64) -> Vec<u64> {
        let mut ids = Vec::new();
        for j in self.jobs.values_mut().filter(|j| j.run_id == run_id) {
            if j.status == JobStatus::Waiting {
                j.status = JobStatus::Queued;
                ids.push(j.id);
            }
        }
        let fresh: Vec<u64> = ids
            .iter()
            .copied()
            .filter(|id| !self.scalesets.jobs.contains_key(id))
            .collect();
        self.scaleset_jobs_queued(&fresh);
        self.hook_jobs(&ids, "queued");
        ids
    }

    /// A run's status as GitHub derives it from its jobs.
    /// Every run's status from one pass over the jobs (a listing asks for each run's,
    /// and asking [`State::run_status`] per run is quadratic in the jobs ever queued).
    pub fn run_statuses(&self) -> std::collections::HashMap<u64, JobStatus> {
        let mut seen: std::collections::HashMap<u64, (bool, bool, bool)> = Default::default();
        for j in self.jobs.values() {
            let e = seen.entry(j.run_id).or_insert((true, false, false));
            e.0 &= j.status == JobStatus::Completed;
            e.1 |= j.status == JobStatus::Queued;
            e.2 |= j.status == JobStatus::Waiting;
        }
        seen.into_iter()
            .map(|(run, (done, queued, waiting))| (run, run_status_of(done, queued, waiting)))
            .collect()
    }

    /// When the run last changed, as GitHub's `updated_at` says: its creation, or its
    /// latest job's start or end.
    pub fn run_updated_at(&self, run_id: u64) -> Millis {
        let created = self.runs.get(&run_id).map_or(0, |r| r.created_at);
        self.jobs
            .values()
            .filter(|j| j.run_id == run_id)
            .flat_map(|j| [j.started_at, j.completed_at])
            .flatten()
            .fold(created, Millis::max)
    }

    pub fn run_status(&self, run_id: u64) -> JobStatus {
        let statuses: Vec<JobStatus> = self
            .jobs
            .values()
            .filter(|j| j.run_id == run_id)
            .map(|j| j.status)
            .collect();
        run_status_of(
            statuses.iter().all(|s| *s == JobStatus::Completed),
            statuses.contains(&JobStatus::Queued),
            statuses.contains(&JobStatus::Waiting),
        )
    }

    /// Charges (or only reads) the credential's bucket; returns the bucket afterwards and
    /// whether the request may proceed.
    pub fn charge(&mut self, credential: &str, count: bool, now: Millis) -> (Bucket, bool) {
        let now_s = (now / 1000) as u64;
        let limit = self.cfg.rate_limit;
        let b = self
            .buckets
            .entry(credential.to_string())
            .or_insert(Bucket {
                limit,
                used: 0,
                reset: now_s + 3600,
            });
        if now_s >= b.reset {
            *b = Bucket {
                limit: b.limit,
                used: 0,
                reset: now_s + 3600,
            };
        }
        if !count {
            return (*b, true);
        }
        if b.used >= b.limit {
            return (*b, false);
        }
        b.used += 1;
        (*b, true)
    }

    /// Rate-limit units spent per credential, from the request log.
    pub fn units_used(&self) -> BTreeMap<String, u64> {
        let mut m = BTreeMap::new();
        for e in self.log.iter().filter(|e| e.counted) {
            *m.entry(e.credential.clone().unwrap_or_default())
                .or_insert(0) += 1;
        }
        m
    }
}

/// A run is completed when all its jobs are (a run with none too), waiting while any
/// job is held (a deployment gate or a concurrency group), queued while any job is
/// queued, even while others run, and in progress only once none is: as github.com
/// reports it (`github-facts.md`, "Run status and job status": in 44 samples no run
/// holding a queued job reported `in_progress`).
fn run_status_of(all_completed: bool, any_queued: bool, any_waiting: bool) -> JobStatus {
    if all_completed {
        JobStatus::Completed
    } else if any_waiting {
        JobStatus::Waiting
    } else if any_queued {
        JobStatus::Queued
    } else {
        JobStatus::InProgress
    }
}
