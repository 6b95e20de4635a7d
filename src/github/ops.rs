//! The operations the daemon and `target check` need, returning domain types.

use super::client::{Call, GitHubClient, parse_json};
use super::error::GhError;
use super::fanout::fan_out;
use super::pagination::{PER_PAGE, with_query};
use super::ratelimit::RateLimitSnapshot;
use super::types;
use crate::domain::job_owner::JobOwner;
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

/// What a read of the queue brought: the runs listed, the jobs of the runs it read,
/// and what it left for later (see [`GitHubClient::read_queue`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueRead {
    /// The queued jobs of the runs in `read_runs`.
    pub jobs: Vec<QueuedJob>,
    /// Every run the lists named (queued or in progress).
    pub listed: Vec<i64>,
    /// The runs whose jobs this read brought (sorted); a listed run not among them keeps what
    /// an earlier read saw of it (or is not known yet).
    pub read_runs: Vec<i64>,
    /// Runs read for the first time, and runs left unread for a later poll.
    pub new_runs: u32,
    pub unread_runs: u32,
    /// Runs read before that this read did not read again: past the cap on re-reads,
    /// or whose read failed for a passing reason (a 5xx, a dropped connection).
    pub stale_runs: u32,
    /// Run reads that failed that way, and the first such failure.
    pub failed_runs: u32,
    pub failure: Option<GhError>,
    /// Whose job each of the read runs' taken jobs is, by the runner that took it:
    /// the jobs lists name it, so the usage roll-up costs no call of its own.
    pub owners: Vec<(String, JobOwner)>,
    /// The rate-limit units the run lists spent (the rest of the read's went on jobs
    /// lists): what polling costs before any run is read.
    pub list_units: u64,
}

impl QueueRead {
    /// Whether every listed run's view is this read's (nothing kept from before).
    pub fn whole(&self) -> bool {
        self.stale_runs == 0
    }
}

/// Passing failures of run reads after which a read stops sending (GitHub is in an
/// incident; the runs read so far still count).
const RUN_READ_FAILURES: u32 = 3;

/// A run's jobs list (its first page).
fn jobs_path(owner: &str, repo: &str, run: i64) -> String {
    format!("/repos/{owner}/{repo}/actions/runs/{run}/jobs?per_page={PER_PAGE}")
}

/// How much of a queue one read reads (see [`GitHubClient::read_queue`]).
#[derive(Debug, Clone, Copy)]
pub struct ReadCaps<'a> {
    /// Runs never read before: at most this many, the oldest first.
    pub new: usize,
    /// Runs read before: at most this many re-read.
    pub known: usize,
    /// The runs the caller's view holds (sorted): a known run it lacks is re-read first.
    pub held: &'a [i64],
    /// Read the in-progress run lists too, not only the queued ones. A run reports
    /// `in_progress` only once nothing in it is queued (`github-facts.md`), so those
    /// lists serve only to name the runner that took each job (its owner) and to catch
    /// a job released by `needs:` in a run that stays in progress: a caller may read
    /// them less often than the queued lists.
    pub in_progress: bool,
}

impl ReadCaps<'_> {
    /// Read every run: no cap.
    pub const ALL: ReadCaps<'static> = ReadCaps {
        new: usize::MAX,
        known: usize::MAX,
        held: &[],
        in_progress: true,
    };
}

/// A run as (the index of its repository, its id).
type RunAt = (usize, i64);

/// Which runs a read reads, of the `known` (read before) and `fresh` (never read)
/// ones, as (repository index, run id); run ids grow with time.
struct ReadPlan {
    reads: Vec<(usize, i64)>,
    new_runs: u32,
    unread_runs: u32,
}

fn plan_reads(known: &[(usize, i64)], fresh: &[(usize, i64)], caps: ReadCaps) -> ReadPlan {
    let mut fresh = fresh.to_vec();
    fresh.sort_unstable_by_key(|r| r.1);
    let unread_runs = fresh.len().saturating_sub(caps.new) as u32;
    fresh.truncate(caps.new);
    let mut known = known.to_vec();
    // Runs the caller lacks first (false sorts first), then the oldest.
    known.sort_unstable_by_key(|r| (caps.held.binary_search(&r.1).is_ok(), r.1));
    known.truncate(caps.known);
    ReadPlan {
        new_runs: fresh.len() as u32,
        unread_runs,
        reads: known.into_iter().chain(fresh).collect(),
    }
}

/// The route every run's jobs list is charged to.
const JOBS_ROUTE: &str = "/repos/{owner}/{repo}/actions/runs/{run_id}/jobs";

impl GitHubClient {
    /// `caps` held to the jobs lists GitHub's per-minute points for their route have
    /// room for now (`reconcile::points`), new runs first: a read never waits inside
    /// for points, and what it leaves is read at a later poll (the runs it did not
    /// read keep their earlier view).
    fn within_points<'a>(&self, caps: ReadCaps<'a>, fresh: usize) -> ReadCaps<'a> {
        let room = self
            .points()
            .book()
            .room(JOBS_ROUTE, "GET", self.now())
            .fits as usize;
        let new = caps.new.min(fresh).min(room);
        ReadCaps {
            new,
            known: caps.known.min(room - new),
            ..caps
        }
    }

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
        let read = self.read_queue(repos, ReadCaps::ALL, each_run)?;
        // Whole or not at all: these callers have no earlier view to keep.
        match read.failure {
            Some(e) => Err(e),
            None => Ok(read.jobs),
        }
    }

    /// [`GitHubClient::queued_jobs_each`], reading the jobs of at most `caps.new` runs
    /// never read before (the oldest first; the rest wait for later polls) and
    /// re-reading at most `caps.known` runs read before, and telling what it read and
    /// left.
    ///
    /// A run read before keeps its jobs list's ETag, so it costs a 304, no unit, while
    /// unchanged; a new one costs a unit. A deep queue's runs need not all be read at
    /// once: a host fills its room with far fewer, and a 300-run burst read whole would
    /// spend 300 units in one read on jobs that wait an hour for a runner. Nor need
    /// they all be read again each poll: a thousand queued runs are a thousand
    /// requests, 304s or not. Re-reads go first to the runs `held` does not name (the
    /// caller's view lacks them, as after a restart), then oldest first: the oldest
    /// runs are the ones served first, whose jobs change. What the read returns is
    /// then a floor of the queue. The new runs' reads are part of what their jobs cost;
    /// the budget governor paces the rest.
    ///
    /// A run read that fails for a passing reason does not fail the read: that run
    /// keeps its earlier view, and after a few such failures nothing more is sent.
    /// Every other failure (a rate limit, a refused credential) fails the whole read,
    /// and so does a failed runs list.
    ///
    /// With a webhook book (`with_hooks`), a listed run the book knows is answered from
    /// it with no GET and counts against no cap, but for one listed `queued` whose jobs
    /// the book shows none of queued (past its grace): the book missed a delivery, and
    /// the run is read as any other (`hooks::HookBook::answer`).
    pub fn read_queue<S>(
        &self,
        repos: &[(S, S)],
        caps: ReadCaps<'_>,
        each_run: &(dyn Fn(i64, &[QueuedJob]) + Sync),
    ) -> Result<QueueRead, GhError>
    where
        S: AsRef<str> + Sync,
    {
        let width = self.in_flight().limit() as usize;
        let before = self.stats().get_units;
        let runs = fan_out(width, repos, |(owner, repo)| {
            self.active_run_ids(owner.as_ref(), repo.as_ref(), caps.in_progress)
        })?;
        let list_units = self.stats().get_units - before;
        let all: Vec<(usize, i64)> = runs
            .iter()
            .enumerate()
            .flat_map(|(i, ids)| ids.iter().map(move |(id, _)| (i, *id)))
            .collect();
        let queued: std::collections::HashSet<i64> = runs
            .iter()
            .flat_map(|ids| ids.iter().filter(|r| r.1).map(|r| r.0))
            .collect();
        // Runs the webhooks told of are answered from their book, with no GET.
        let mut from_book: Vec<(i64, Vec<QueuedJob>)> = Vec::new();
        let mut to_read: Vec<RunAt> = all.clone();
        if let Some(book) = &self.hooks {
            let now = crate::timefmt::now_millis();
            let mut book = book.lock().unwrap_or_else(|e| e.into_inner());
            to_read.retain(|(i, run)| {
                let (owner, repo) = &repos[*i];
                let full = format!("{}/{}", owner.as_ref(), repo.as_ref());
                match book.answer(&full, *run, queued.contains(run), now) {
                    super::hooks::Answer::Jobs(jobs) => {
                        from_book.push((*run, jobs));
                        false
                    }
                    super::hooks::Answer::Read => true,
                }
            });
            book.spared += from_book.len() as u64;
        }
        for (run, jobs) in &from_book {
            each_run(*run, jobs);
        }
        let cached = |(i, run): &(usize, i64)| {
            let (owner, repo) = &repos[*i];
            self.is_cached(&jobs_path(owner.as_ref(), repo.as_ref(), *run))
        };
        let (known, fresh): (Vec<RunAt>, Vec<RunAt>) = to_read.iter().copied().partition(cached);
        let plan = plan_reads(&known, &fresh, self.within_points(caps, fresh.len()));
        let failures = std::sync::atomic::AtomicU32::new(0);
        let failure: std::sync::Mutex<Option<GhError>> = Default::default();
        let got: std::sync::Mutex<Vec<(i64, Vec<QueuedJob>)>> = std::sync::Mutex::new(from_book);
        let owners: std::sync::Mutex<Vec<(String, JobOwner)>> = Default::default();
        let outcome = fan_out(width, &plan.reads, |(i, run)| {
            let (owner, repo) = &repos[*i];
            let jobs = match self.run_queued_jobs(owner.as_ref(), repo.as_ref(), *run) {
                Ok((jobs, taken)) => {
                    owners
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .extend(taken);
                    jobs
                }
                // Deleted between the list and its read: it holds no job.
                Err(GhError::NotFound) => Vec::new(),
                Err(e) if e.is_transient() => {
                    let n = failures.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                    failure
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .get_or_insert(e);
                    // Past a few, stop sending: an incident, not one run's bad luck.
                    return if n >= RUN_READ_FAILURES {
                        Err(None)
                    } else {
                        Ok(())
                    };
                }
                Err(e) => return Err(Some(e)),
            };
            each_run(*run, &jobs);
            got.lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((*run, jobs));
            Ok::<(), Option<GhError>>(())
        });
        if let Err(Some(e)) = outcome {
            return Err(e);
        }
        let mut got = got.into_inner().unwrap_or_else(|e| e.into_inner());
        self.tell_book_of_rest_reads(repos, &plan.reads, &got);
        // In the lists' order: repositories as given, each one's runs queued first.
        let order: std::collections::HashMap<i64, usize> =
            all.iter().enumerate().map(|(at, r)| (r.1, at)).collect();
        got.sort_unstable_by_key(|(run, _)| order.get(run).copied());
        let mut read_runs: Vec<i64> = got.iter().map(|(run, _)| *run).collect();
        read_runs.sort_unstable();
        let failed_runs = failures.load(std::sync::atomic::Ordering::SeqCst);
        let read_known = known
            .iter()
            .filter(|r| read_runs.binary_search(&r.1).is_ok());
        Ok(QueueRead {
            jobs: got.into_iter().flat_map(|(_, jobs)| jobs).collect(),
            listed: all.iter().map(|r| r.1).collect(),
            new_runs: plan.new_runs,
            unread_runs: plan.unread_runs,
            stale_runs: (known.len() - read_known.count()) as u32,
            failed_runs,
            failure: failure.into_inner().unwrap_or_else(|e| e.into_inner()),
            read_runs,
            owners: owners.into_inner().unwrap_or_else(|e| e.into_inner()),
            list_units,
        })
    }

    /// Hands the webhook book, if any, the runs `read_queue` read over REST (`reads`,
    /// answered in `got`): a queued job no delivery told of shows a lost delivery
    /// (`hooks::HookBook::read_by_rest`).
    fn tell_book_of_rest_reads<S: AsRef<str>>(
        &self,
        repos: &[(S, S)],
        reads: &[RunAt],
        got: &[(i64, Vec<QueuedJob>)],
    ) {
        let Some(book) = &self.hooks else {
            return;
        };
        let now = crate::timefmt::now_millis();
        let mut book = book.lock().unwrap_or_else(|e| e.into_inner());
        let jobs: std::collections::HashMap<i64, &[QueuedJob]> = got
            .iter()
            .map(|(run, jobs)| (*run, jobs.as_slice()))
            .collect();
        for (i, run) in reads {
            let (owner, repo) = &repos[*i];
            if let Some(jobs) = jobs.get(run) {
                book.read_by_rest(&format!("{}/{}", owner.as_ref(), repo.as_ref()), jobs, now);
            }
        }
    }

    /// The ids of a repository's runs queued, and in progress unless `in_progress` is
    /// false, queued first, each once.
    ///
    /// The two lists are read one after the other, queued first, never together: a run
    /// only moves forward (queued, then in progress), so a run that moves between the
    /// two reads is still in the second. Read at once, the in-progress list could be
    /// answered before the move and the queued list after it, and the run would be
    /// missed for a whole poll interval.
    /// Each run comes with whether the `queued` list named it.
    fn active_run_ids(
        &self,
        owner: &str,
        repo: &str,
        in_progress: bool,
    ) -> Result<Vec<(i64, bool)>, GhError> {
        let mut run_ids: Vec<(i64, bool)> = Vec::new();
        let statuses: &[&str] = if in_progress {
            &["queued", "in_progress"]
        } else {
            &["queued"]
        };
        for &status in statuses {
            let path =
                format!("/repos/{owner}/{repo}/actions/runs?status={status}&per_page={PER_PAGE}");
            for id in self.get_pages(&path, |r: types::WorkflowRuns| {
                r.workflow_runs.into_iter().map(|r| r.id).collect()
            })? {
                if !run_ids.iter().any(|r| r.0 == id) {
                    run_ids.push((id, status == "queued"));
                }
            }
        }
        Ok(run_ids)
    }

    /// One run's jobs still `queued` (all pages of its jobs list), and the owners of
    /// its jobs a runner took, by runner name.
    #[allow(clippy::type_complexity)]
    fn run_queued_jobs(
        &self,
        owner: &str,
        repo: &str,
        run: i64,
    ) -> Result<(Vec<QueuedJob>, Vec<(String, JobOwner)>), GhError> {
        let full = format!("{owner}/{repo}");
        let jobs = self.get_pages(&jobs_path(owner, repo, run), |j: types::Jobs| j.jobs)?;
        let taken = jobs.iter().filter_map(|j| j.owner(&full)).collect();
        Ok((demand_of(&full, jobs)?, taken))
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

    /// A run's jobs as they are now (`GET .../actions/runs/{run_id}/jobs`, its first
    /// page, not answered from the ETag cache: a lost job's re-run decides on its
    /// conclusion, which a cached body from an older build may lack).
    pub fn run_jobs_now(
        &self,
        owner: &str,
        repo: &str,
        run: i64,
    ) -> Result<Vec<crate::domain::rerun::JobSeen>, GhError> {
        let mut c = Call::get(self.url(&jobs_path(owner, repo, run)));
        c.conditional = false;
        let jobs: types::Jobs = parse_json(&self.call(&c)?.body)?;
        Ok(jobs.jobs.iter().map(types::Job::seen).collect())
    }

    /// A repository's newest runs in `status` (`in_progress`, `completed`): one page
    /// of [`PER_PAGE`], newest first, not cached.
    pub fn runs_now(
        &self,
        owner: &str,
        repo: &str,
        status: &str,
    ) -> Result<Vec<crate::domain::rerun::RunSeen>, GhError> {
        let path = with_query(
            &format!("/repos/{owner}/{repo}/actions/runs?per_page={PER_PAGE}"),
            "status",
            status,
        );
        let mut c = Call::get(self.url(&path));
        c.conditional = false;
        let runs: types::WorkflowRuns = parse_json(&self.call(&c)?.body)?;
        let at = |s: Option<String>| s.as_deref().and_then(crate::timefmt::parse_rfc3339);
        Ok(runs
            .workflow_runs
            .into_iter()
            .map(|r| crate::domain::rerun::RunSeen {
                id: r.id,
                created_at: at(r.created_at),
                updated_at: at(r.updated_at),
            })
            .collect())
    }

    /// GitHub's "Re-run a job from a workflow run" (`POST .../actions/jobs/{job_id}/
    /// rerun`, 201). Sent once, never retried here: a repeat of one whose answer was
    /// lost would ask for a second re-run.
    pub fn rerun_job(&self, owner: &str, repo: &str, job: i64) -> Result<(), GhError> {
        let mut c = Call::post(
            self.url(&format!("/repos/{owner}/{repo}/actions/jobs/{job}/rerun")),
            b"{}".to_vec(),
        );
        c.retry = false;
        self.call(&c)?;
        Ok(())
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

/// The jobs of a run's list that are demand: those `queued`, which a runner can take
/// now. Not `waiting` (a deployment's reviewers or a concurrency group hold it: a
/// runner started for it would only idle), nor `requested` or `pending` (GitHub has
/// not yet queued it), nor `in_progress` or `completed`.
fn demand_of(repo: &str, jobs: Vec<types::Job>) -> Result<Vec<QueuedJob>, GhError> {
    jobs.into_iter()
        .filter(|j| j.status == "queued")
        .map(|j| {
            j.into_domain(repo).ok_or_else(|| GhError::Malformed {
                detail: "a job's created_at is not a timestamp".into(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_taken_job_in_a_jobs_list_says_whose_it_is_and_a_queued_one_does_not() {
        let jobs: types::Jobs = serde_json::from_value(serde_json::json!({"jobs": [
            {"id": 1, "run_id": 7, "status": "in_progress", "name": "build",
             "created_at": "2026-01-01T00:00:00Z", "runner_name": "rm-0123abcd-4",
             "workflow_name": "CI", "run_attempt": 2},
            {"id": 2, "run_id": 7, "status": "queued", "name": "test",
             "created_at": "2026-01-01T00:00:00Z", "runner_name": null},
        ]}))
        .unwrap();
        let owners: Vec<_> = jobs.jobs.iter().filter_map(|j| j.owner("o/r")).collect();
        assert_eq!(owners.len(), 1);
        let (runner, o) = &owners[0];
        assert_eq!(runner, "rm-0123abcd-4");
        assert_eq!(
            (o.repo.as_str(), o.workflow.as_deref(), o.job_name.as_str()),
            ("o/r", Some("CI"), "build")
        );
        assert_eq!((o.run_id, o.run_attempt, o.job_id), (7, Some(2), Some(1)));
    }

    #[test]
    fn only_queued_jobs_are_demand_never_waiting_requested_or_pending_ones() {
        let statuses = [
            "queued",
            "in_progress",
            "completed",
            "waiting",
            "requested",
            "pending",
        ];
        let jobs: Vec<types::Job> = statuses
            .iter()
            .enumerate()
            .map(|(i, status)| {
                serde_json::from_value(serde_json::json!({
                    "id": i, "run_id": 7, "status": status, "name": status,
                    "labels": ["linux"], "created_at": "2026-01-01T00:00:00Z",
                }))
                .unwrap()
            })
            .collect();
        let demand = demand_of("o/r", jobs).unwrap();
        assert_eq!(
            demand.iter().map(|j| j.name.as_str()).collect::<Vec<_>>(),
            ["queued"]
        );
        assert_eq!(demand[0].repo, "o/r");
    }

    fn runs(ids: &[i64]) -> Vec<(usize, i64)> {
        ids.iter().map(|id| (0, *id)).collect()
    }

    fn ids(plan: &ReadPlan) -> Vec<i64> {
        plan.reads.iter().map(|r| r.1).collect()
    }

    #[test]
    fn a_read_takes_only_the_jobs_lists_the_routes_points_have_room_for() {
        use crate::domain::{CredentialRef, Target, TargetScope};
        let target = Target {
            name: "t".into(),
            scope: TargetScope::Repo {
                owner: "o".into(),
                repo: "r".into(),
            },
            api_url: "http://127.0.0.1:9".into(),
            credential: CredentialRef::TokenEnv { var: "X".into() },
            poll_interval_secs: 5,
            repos: vec![],
            max_in_flight: 8,
            secondary_limit: Some(900),
        };
        let c = GitHubClient::new(&target, super::super::Credential::Token(Secret::new("x")));
        let all = c.within_points(ReadCaps::ALL, 5);
        let ceiling = c.points().book().ceiling(JOBS_ROUTE) as usize;
        assert_eq!((all.new, all.known), (5, ceiling - 5));
        // All but ten points spent: new runs first, known ones with what is left.
        let spent = c.points().book().ceiling(JOBS_ROUTE) - 10;
        c.points().book().reserve(JOBS_ROUTE, "GET", spent, c.now());
        let caps = ReadCaps {
            new: 6,
            known: 100,
            ..ReadCaps::ALL
        };
        let held = c.within_points(caps, 8);
        assert_eq!((held.new, held.known), (6, 4));
    }

    #[test]
    fn new_runs_are_read_oldest_first_within_their_cap() {
        let caps = ReadCaps {
            new: 2,
            ..ReadCaps::ALL
        };
        let plan = plan_reads(&runs(&[5]), &runs(&[9, 7, 8]), caps);
        assert_eq!(ids(&plan), vec![5, 7, 8]);
        assert_eq!((plan.new_runs, plan.unread_runs), (2, 1));
    }

    #[test]
    fn known_runs_the_caller_lacks_come_first_then_the_oldest() {
        let held = [1, 2, 3];
        let caps = ReadCaps {
            new: 0,
            known: 3,
            held: &held,
            in_progress: true,
        };
        let plan = plan_reads(&runs(&[3, 1, 2, 6, 4]), &runs(&[8]), caps);
        assert_eq!(ids(&plan), vec![4, 6, 1]);
        assert_eq!((plan.new_runs, plan.unread_runs), (0, 1));
        // No cap: every known run.
        let plan = plan_reads(&runs(&[3, 1]), &[], ReadCaps::ALL);
        assert_eq!(ids(&plan), vec![1, 3]);
    }
}
