//! The operations the daemon and `target check` need, returning domain types.

use super::client::{Call, GitHubClient, parse_json};
use super::error::GhError;
use super::fanout::fan_out;
use super::pagination::{PER_PAGE, with_query};
use super::ratelimit::RateLimitSnapshot;
use super::types;
use crate::domain::{QueuedJob, RegisteredRunner, TargetScope};
use crate::secret::Secret;

/// Repository-level runners always join the Default group, id 1 (every third-party
/// client does this; GitHub has no repository runner groups).
pub use crate::domain::profile::DEFAULT_RUNNER_GROUP_ID;

/// The outcome of deleting a runner registration. `Busy` is not an error: it is the
/// answer "it took a job just now, leave it running".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Deleted {
    /// 204: deregistered.
    Removed,
    /// 404: already gone, which is what the caller wanted.
    AlreadyGone,
    /// 422: the runner is running a job.
    Busy { message: String },
}

/// A runner release GitHub offers for one platform (`GET .../actions/runners/downloads`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunnerDownload {
    /// `linux`, `osx`, `win`.
    pub os: String,
    /// `x64`, `arm64`, `arm`.
    pub arch: String,
    pub url: String,
    pub filename: String,
    /// Lowercase hex; GitHub omits it on some servers (older GHES).
    pub sha256: Option<String>,
}

/// A repository as listing it for an org target needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoInfo {
    pub owner: String,
    pub name: String,
    /// Only `visibility: public` (or `private: false`) counts; internal is not public.
    pub public: bool,
    pub archived: bool,
}

impl From<types::Repository> for RepoInfo {
    fn from(r: types::Repository) -> RepoInfo {
        let public = match r.visibility.as_deref() {
            Some(v) => v == "public",
            None => !r.private,
        };
        RepoInfo {
            owner: r.owner.login,
            name: r.name,
            public,
            archived: r.archived,
        }
    }
}

fn runners_path(scope: &TargetScope) -> String {
    match scope {
        TargetScope::Repo { owner, repo } => format!("/repos/{owner}/{repo}/actions/runners"),
        TargetScope::Org { org } => format!("/orgs/{org}/actions/runners"),
    }
}

/// What a read of the queue brought: the queued jobs, and how many runs it read for
/// the first time (see [`GitHubClient::read_queue`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueRead {
    pub jobs: Vec<QueuedJob>,
    /// Runs read for the first time, and runs left unread for a later poll.
    pub new_runs: u32,
    pub unread_runs: u32,
}

/// A run's jobs list (its first page).
fn jobs_path(owner: &str, repo: &str, run: i64) -> String {
    format!("/repos/{owner}/{repo}/actions/runs/{run}/jobs?per_page={PER_PAGE}")
}

impl GitHubClient {
    /// Jobs waiting for a runner in one repository: the runs queued and in progress (a
    /// run in progress can still have queued jobs), then their jobs still `queued`, in
    /// run order. Every GET is conditional, so an idle repository costs only 304s.
    /// The runs' jobs are read concurrently (see [`queued_jobs_of`](Self::queued_jobs_of)).
    pub fn queued_jobs(&self, owner: &str, repo: &str) -> Result<Vec<QueuedJob>, GhError> {
        self.queued_jobs_of(&[(owner, repo)])
    }

    /// [`queued_jobs`](Self::queued_jobs) of several repositories (an organization
    /// target's), in the order given, each repository's jobs in run order.
    ///
    /// At a distance each request costs a round trip, and a burst of queued runs means
    /// one jobs list per run: read one after another, 60 runs at 120 ms are 7 s. So
    /// the reads fan out, first each repository's run lists, then every run's jobs
    /// list, on up to `max_in_flight` threads; the credential's `InFlight` bounds what
    /// is really in flight, shared with whatever else the target sends. Each jobs URL
    /// keeps its own ETag, so an unchanged run still costs a 304. The first error
    /// fails the read and nothing more is sent for it.
    pub fn queued_jobs_of<S>(&self, repos: &[(S, S)]) -> Result<Vec<QueuedJob>, GhError>
    where
        S: AsRef<str> + Sync,
    {
        self.queued_jobs_each(repos, &|_, _| {})
    }

    /// [`GitHubClient::queued_jobs_of`], telling `each_run` every run's queued jobs as
    /// soon as they are read (its id and its jobs, in whatever order the reads end), so
    /// a caller can start serving the first jobs of a burst while the rest are read.
    pub fn queued_jobs_each<S>(
        &self,
        repos: &[(S, S)],
        each_run: &(dyn Fn(i64, &[QueuedJob]) + Sync),
    ) -> Result<Vec<QueuedJob>, GhError>
    where
        S: AsRef<str> + Sync,
    {
        Ok(self.read_queue(repos, usize::MAX, each_run)?.jobs)
    }

    /// [`GitHubClient::queued_jobs_each`], reading the jobs of at most `new_cap` runs
    /// never read before (the oldest first; the rest wait for later polls), and telling
    /// how many it read and left.
    ///
    /// A run read before keeps its jobs list's ETag, so it costs a 304, no unit, while
    /// unchanged; a new one costs a unit. A deep queue's runs need not all be read at
    /// once: a host fills its room with far fewer, and a 300-run burst read whole would
    /// spend 300 units in one read on jobs that wait an hour for a runner. What the read
    /// returns is then a floor of the queue. The new runs' reads are part of what their
    /// jobs cost; the budget governor paces the rest.
    pub fn read_queue<S>(
        &self,
        repos: &[(S, S)],
        new_cap: usize,
        each_run: &(dyn Fn(i64, &[QueuedJob]) + Sync),
    ) -> Result<QueueRead, GhError>
    where
        S: AsRef<str> + Sync,
    {
        let width = self.in_flight().limit() as usize;
        let runs = fan_out(width, repos, |(owner, repo)| {
            self.active_run_ids(owner.as_ref(), repo.as_ref())
        })?;
        let all: Vec<(usize, i64)> = runs
            .iter()
            .enumerate()
            .flat_map(|(i, ids)| ids.iter().map(move |id| (i, *id)))
            .collect();
        let is_new = |(i, run): &(usize, i64)| {
            let (owner, repo) = &repos[*i];
            !self.is_cached(&jobs_path(owner.as_ref(), repo.as_ref(), *run))
        };
        // The oldest new runs (run ids grow with time) within the cap, every known one.
        let mut fresh: Vec<i64> = all.iter().filter(|r| is_new(r)).map(|r| r.1).collect();
        fresh.sort_unstable();
        let unread_runs = fresh.len().saturating_sub(new_cap) as u32;
        fresh.truncate(new_cap);
        let new_runs = fresh.len() as u32;
        let reads: Vec<(usize, i64)> = all
            .into_iter()
            .filter(|r| !is_new(r) || fresh.binary_search(&r.1).is_ok())
            .collect();
        let per_run = fan_out(width, &reads, |(i, run)| {
            let (owner, repo) = &repos[*i];
            let jobs = self.run_queued_jobs(owner.as_ref(), repo.as_ref(), *run)?;
            each_run(*run, &jobs);
            Ok(jobs)
        })?;
        Ok(QueueRead {
            jobs: per_run.into_iter().flatten().collect(),
            new_runs,
            unread_runs,
        })
    }

    /// The ids of a repository's runs queued or in progress, queued first, each once.
    ///
    /// The two lists are read one after the other, queued first, never together: a run
    /// only moves forward (queued, then in progress), so a run that moves between the
    /// two reads is still in the second. Read at once, the in-progress list could be
    /// answered before the move and the queued list after it, and the run would be
    /// missed for a whole poll interval.
    fn active_run_ids(&self, owner: &str, repo: &str) -> Result<Vec<i64>, GhError> {
        let mut run_ids: Vec<i64> = Vec::new();
        for status in ["queued", "in_progress"] {
            let path =
                format!("/repos/{owner}/{repo}/actions/runs?status={status}&per_page={PER_PAGE}");
            for id in self.get_pages(&path, |r: types::WorkflowRuns| {
                r.workflow_runs.into_iter().map(|r| r.id).collect()
            })? {
                if !run_ids.contains(&id) {
                    run_ids.push(id);
                }
            }
        }
        Ok(run_ids)
    }

    /// One run's jobs still `queued` (all pages of its jobs list).
    fn run_queued_jobs(
        &self,
        owner: &str,
        repo: &str,
        run: i64,
    ) -> Result<Vec<QueuedJob>, GhError> {
        let full = format!("{owner}/{repo}");
        self.get_pages(&jobs_path(owner, repo, run), |j: types::Jobs| j.jobs)?
            .into_iter()
            .filter(|j| j.status == "queued")
            .map(|j| {
                j.into_domain(&full).ok_or_else(|| GhError::Malformed {
                    detail: "a job's created_at is not a timestamp".into(),
                })
            })
            .collect()
    }

    /// Repositories of an organization (`GET /orgs/{org}/repos`, all pages).
    pub fn org_repositories(&self, org: &str) -> Result<Vec<RepoInfo>, GhError> {
        self.get_pages(
            &format!("/orgs/{org}/repos?per_page={PER_PAGE}"),
            |r: Vec<types::Repository>| r.into_iter().map(RepoInfo::from).collect(),
        )
    }

    /// Repositories the App installation can see (`GET /installation/repositories`).
    pub fn installation_repositories(&self) -> Result<Vec<RepoInfo>, GhError> {
        self.get_pages(
            &format!("/installation/repositories?per_page={PER_PAGE}"),
            |r: types::InstallationRepositories| {
                r.repositories.into_iter().map(RepoInfo::from).collect()
            },
        )
    }

    /// Registers a JIT runner and returns it with its encoded config (a secret).
    ///
    /// Sent once, never retried here: if GitHub completed a POST whose answer was
    /// lost, a repeat collides (409). The caller looks the runner up by name first.
    pub fn generate_jitconfig(
        &self,
        scope: &TargetScope,
        name: &str,
        labels: &[String],
        runner_group_id: i64,
        work_folder: Option<&str>,
    ) -> Result<(RegisteredRunner, Secret), GhError> {
        let mut c = Call::post(
            self.url(&format!("{}/generate-jitconfig", runners_path(scope))),
            jit_body(name, labels, runner_group_id, work_folder),
        );
        c.retry = false;
        let reply = self.call(&c)?;
        let parsed: types::JitResponse = parse_json(&reply.body)?;
        Ok((
            parsed.runner.into_domain(),
            Secret::new(parsed.encoded_jit_config),
        ))
    }

    /// Every runner of the target (all pages).
    pub fn list_runners(&self, scope: &TargetScope) -> Result<Vec<RegisteredRunner>, GhError> {
        self.get_pages(
            &format!("{}?per_page={PER_PAGE}", runners_path(scope)),
            |r: types::Runners| {
                r.runners
                    .into_iter()
                    .map(types::Runner::into_domain)
                    .collect()
            },
        )
    }

    /// One runner by its exact name, via GitHub's `name` filter.
    pub fn runner_by_name(
        &self,
        scope: &TargetScope,
        name: &str,
    ) -> Result<Option<RegisteredRunner>, GhError> {
        let path = with_query(
            &format!("{}?per_page={PER_PAGE}", runners_path(scope)),
            "name",
            name,
        );
        let all = self.get_pages(&path, |r: types::Runners| r.runners)?;
        Ok(all
            .into_iter()
            .find(|r| r.name == name)
            .map(types::Runner::into_domain))
    }

    /// Deregisters a runner: 204 and 404 succeed, 422 says it is busy.
    pub fn delete_runner(&self, scope: &TargetScope, id: i64) -> Result<Deleted, GhError> {
        match self.call(&Call::delete(
            self.url(&format!("{}/{id}", runners_path(scope))),
        )) {
            Ok(_) => Ok(Deleted::Removed),
            Err(GhError::NotFound) => Ok(Deleted::AlreadyGone),
            Err(GhError::Unprocessable { message }) => Ok(Deleted::Busy { message }),
            Err(e) => Err(e),
        }
    }

    fn runner_groups(&self, org: &str) -> Result<Vec<types::RunnerGroup>, GhError> {
        self.get_pages(
            &format!("/orgs/{org}/actions/runner-groups?per_page={PER_PAGE}"),
            |g: types::RunnerGroups| g.runner_groups,
        )
    }

    /// Whether an organization's runner group lets public repositories' jobs reach its
    /// runners (`allows_public_repositories`); `None` when no group has that id.
    pub fn runner_group_allows_public(&self, org: &str, id: i64) -> Result<Option<bool>, GhError> {
        Ok(self
            .runner_groups(org)?
            .into_iter()
            .find(|g| g.id == id)
            .map(|g| g.allows_public_repositories))
    }

    /// The id of an organization's runner group, by name (case-insensitive, as GitHub
    /// treats group names). `None` when no group has that name.
    pub fn runner_group_id_by_name(&self, org: &str, name: &str) -> Result<Option<i64>, GhError> {
        Ok(self
            .runner_groups(org)?
            .into_iter()
            .find(|g| g.name.eq_ignore_ascii_case(name))
            .map(|g| g.id))
    }

    /// Whether a repository is public (self-hosted runners should not serve those).
    pub fn repository_is_public(&self, owner: &str, repo: &str) -> Result<bool, GhError> {
        let r: types::Repository = self.get_json(&format!("/repos/{owner}/{repo}"))?;
        Ok(RepoInfo::from(r).public)
    }

    /// The runner releases this target's server offers, one per platform (the newest
    /// version only: GitHub lists no history).
    pub fn runner_downloads(&self, scope: &TargetScope) -> Result<Vec<RunnerDownload>, GhError> {
        let apps: Vec<types::RunnerApplication> =
            self.get_json(&format!("{}/downloads", runners_path(scope)))?;
        Ok(apps
            .into_iter()
            .map(|a| RunnerDownload {
                os: a.os,
                arch: a.architecture,
                url: a.download_url,
                filename: a.filename,
                sha256: a
                    .sha256_checksum
                    .filter(|s| !s.is_empty())
                    .map(|s| s.to_ascii_lowercase()),
            })
            .collect())
    }

    /// `GET /rate_limit` (free; answered even while limited). Also refreshes the
    /// snapshot.
    pub fn rate_limit(&self) -> Result<RateLimitSnapshot, GhError> {
        let mut c = Call::get(self.url("/rate_limit"));
        c.ignore_limit = true;
        c.conditional = false;
        let body: types::RateLimitBody = parse_json(&self.call(&c)?.body)?;
        let mut snap = self.rate_limit_snapshot();
        snap.limit = Some(body.rate.limit);
        snap.remaining = Some(body.rate.remaining);
        snap.used = Some(body.rate.used);
        snap.reset = Some(body.rate.reset * 1000);
        Ok(snap)
    }

    /// A runner registration token (valid one hour), e.g. for the runner scale set
    /// API's `runner-registration` exchange. Not retried: each POST mints a new one.
    pub fn registration_token(&self, scope: &TargetScope) -> Result<Secret, GhError> {
        let mut c = Call::post(
            self.url(&format!("{}/registration-token", runners_path(scope))),
            Vec::new(),
        );
        c.retry = false;
        let reply = self.call(&c)?;
        let parsed: types::TokenResponse = parse_json(&reply.body)?;
        Ok(Secret::new(parsed.token))
    }

    /// Mints a registration token and drops it: proves permission to manage runners
    /// without creating one. The token itself is never returned.
    pub fn can_register_runners(&self, scope: &TargetScope) -> Result<(), GhError> {
        let mut c = Call::post(
            self.url(&format!("{}/registration-token", runners_path(scope))),
            Vec::new(),
        );
        c.retry = false;
        let reply = self.call(&c)?;
        let _: types::TokenResponse = parse_json(&reply.body)?;
        Ok(())
    }
}

/// The JSON body of `generate-jitconfig` (tested against GitHub's schema).
pub fn jit_body(
    name: &str,
    labels: &[String],
    runner_group_id: i64,
    work_folder: Option<&str>,
) -> Vec<u8> {
    serde_json::to_vec(&types::JitRequest {
        name,
        runner_group_id,
        labels,
        work_folder,
    })
    .expect("a struct of strings and numbers serializes")
}
