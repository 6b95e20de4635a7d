//! One target's loop, on its own thread with its own GitHub client and pace. A pass is
//! level-triggered: observe the attempts (log lines, processes, GitHub's runner list),
//! read demand when due, allocate, start what the allocator grants, record.

use super::actuator::{self, Ctx};
use super::metrics_feed;
use super::pool::TargetView;
use super::scaleset_feed::{self, ScaleSetFeed};
use super::shared::{LoopMsg, Shared, lock};
use super::starter;
use crate::domain::{
    Attempt, DemandSource, Host, QueuedJob, RegisteredRunner, ScalePolicy, Target, TargetScope,
};
use crate::github::visibility::{OrgRepos, VISIBILITY_EVERY};
use crate::github::{ErrorClass, GhError, GitHubClient, load_credential};
use crate::reconcile::allocate::{Counts, HostAllocator, pick_surplus};
use crate::reconcile::demand;
use crate::reconcile::hold::StartHold;
use crate::reconcile::launch_book::{OfferCtx, TargetMode, is_directed};
use crate::reconcile::lines::{RunnerEvent, parse_line};
use crate::reconcile::watch::{self, Observation, ProcessStatus, Registration, Timeouts, Want};
use crate::runner::{self, ExitInfo, LogTail, Reap};
use crate::store::{ProfileStatus, QueueSample, SqliteStore, Store, StoreError, TargetStatus};
use crate::timefmt::{Millis, now_millis};
use crate::{log_error, log_info, log_warn};
use crossbeam_channel::{Receiver, select, tick};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

/// How often a loop looks at its runners (log lines, processes) between demand reads.
pub const OBSERVE_EVERY: Duration = Duration::from_millis(250);
/// How often GitHub's runner list is read to cross-check and to find orphans.
const RUNNER_LIST_EVERY: Millis = 60_000;
/// A stopped runner's grace before what is left of it is killed.
const STOP_GRACE: Millis = 10_000;
const SAMPLE_EVERY: Millis = 5_000;
const STATUS_REFRESH: Millis = 10_000;

pub struct TargetLoop {
    name: String,
    shared: Arc<Shared>,
    store: SqliteStore,
    client: Option<GitHubClient>,
    shutdown_rx: Receiver<()>,
    tails: HashMap<i64, LogTail>,
    jobs: Vec<QueuedJob>,
    next_poll: Millis,
    /// Deterministic failures and rate limits hold demand reads and starts until then.
    blocked_until: Millis,
    /// The hold last written to the store (see `persist_hold`).
    persisted_hold: Millis,
    failures_in_row: u32,
    last_error: Option<String>,
    runners: Option<Vec<RegisteredRunner>>,
    next_runner_list: Millis,
    public_repo: Option<bool>,
    next_visibility: Millis,
    surplus: HashSet<i64>,
    group_ids: HashMap<String, i64>,
    last_status: HashMap<String, (ProfileStatus, Millis)>,
    last_target_status: Option<(TargetStatus, Millis)>,
    next_sample: Millis,
    rng: u64,
    /// When the queue in `jobs` was last read (the pass's time, before the request).
    demand_read_at: Millis,
    /// Attempts that took a job after `demand_read_at` and have ended (cleaned ones
    /// included): `jobs` may still list their job as queued, so demand must not count
    /// it again. Emptied as fresher queues are read.
    ended_since_read: HashMap<i64, Attempt>,
    /// The listeners of this target's `demand=scaleset` profiles and what they saw.
    scaleset: ScaleSetFeed,
    /// Profiles whose starts are held after a host failure, by name.
    holds: HashMap<String, StartHold>,
    /// Set in a pass whose allocation found every runner uid held.
    uids_used_up: Option<String>,
    /// An organization target's repositories and whether each is public; a repository
    /// whose visibility is not known is treated as public (not served).
    org_repos: OrgRepos,
    /// What the last demand read left out for visibility, for `status`.
    visibility_note: Option<String>,
    /// Whether each scale set profile's runner group (organization targets) lets
    /// public repositories' jobs reach it, and when that is read next.
    group_public: HashMap<String, bool>,
    next_group_check: Millis,
}

impl TargetLoop {
    pub fn new(
        name: String,
        shared: Arc<Shared>,
        shutdown_rx: Receiver<()>,
    ) -> Result<TargetLoop, StoreError> {
        let store = SqliteStore::open(&shared.state_dir)?;
        let seed = now_millis() as u64 ^ (std::process::id() as u64) << 17 ^ name.len() as u64;
        Ok(TargetLoop {
            scaleset: ScaleSetFeed::new(&name),
            name,
            shared,
            store,
            client: None,
            shutdown_rx,
            tails: HashMap::new(),
            jobs: Vec::new(),
            next_poll: 0,
            blocked_until: 0,
            persisted_hold: 0,
            failures_in_row: 0,
            last_error: None,
            runners: None,
            next_runner_list: 0,
            public_repo: None,
            next_visibility: 0,
            surplus: HashSet::new(),
            group_ids: HashMap::new(),
            last_status: HashMap::new(),
            last_target_status: None,
            next_sample: 0,
            rng: seed | 1,
            demand_read_at: 0,
            ended_since_read: HashMap::new(),
            holds: HashMap::new(),
            uids_used_up: None,
            org_repos: OrgRepos::new(),
            visibility_note: None,
            group_public: HashMap::new(),
            next_group_check: 0,
        })
    }

    /// The thread body: a pass on every tick or message until told to stop. `once`
    /// runs a single pass (demand read included) and returns.
    pub fn run(mut self, inbox: Receiver<LoopMsg>, once: bool) {
        let ticker = tick(OBSERVE_EVERY);
        metrics_feed::passed(&self.shared, &self.name);
        loop {
            if let Err(e) = self.pass(now_millis()) {
                log_error!("pass_failed", target = self.name, error = e);
            }
            metrics_feed::passed(&self.shared, &self.name);
            if once {
                return;
            }
            select! {
                recv(inbox) -> msg => match msg {
                    Ok(LoopMsg::Wake) => {}
                    Ok(LoopMsg::Reload) => {
                        self.scaleset.reset();
                        self.client = None;
                        self.next_poll = 0;
                        self.blocked_until = 0;
                    }
                    Ok(LoopMsg::Stop) | Err(_) => return,
                },
                recv(ticker) -> _ => {}
            }
        }
    }

    fn jitter(&mut self) -> f64 {
        // xorshift64: jitter only needs to spread retries, not be unpredictable.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng >> 11) as f64 / (1u64 << 53) as f64
    }

    fn pass(&mut self, now: Millis) -> Result<(), StoreError> {
        let host = self.store.host_or_create()?;
        let target = match self.store.target(&self.name) {
            Ok(t) => t,
            Err(StoreError::NotFound { .. }) => return Ok(()),
            Err(e) => return Err(e),
        };
        let profiles: Vec<ScalePolicy> = self
            .store
            .profiles()?
            .into_iter()
            .filter(|p| p.target == self.name)
            .collect();
        self.ensure_client(&target, now);
        let mode = self.shared.pool.mode(&self.name, now);
        self.scaleset
            .sync(&target, &profiles, &host, mode, &self.shared);

        // Observe: GitHub's runner list now and then (cross-check and orphans).
        let list_fresh = self.maybe_list_runners(&target, &host, now)?;

        // Observe and act on each attempt of this target.
        let open: Vec<Attempt> = self
            .store
            .open_attempts(&host.id)?
            .into_iter()
            .filter(|a| a.target == self.name)
            .collect();
        let draining = host.draining || self.shared.stopping();
        for mut a in open {
            let Some(policy) = profiles.iter().find(|p| p.name == a.profile) else {
                // A profile removed under live runners: treat as draining.
                self.watch_one(&target.scope, &mut a, None, Want::Draining, list_fresh, now)?;
                continue;
            };
            let want = if draining || !policy.active {
                Want::Draining
            } else if self.surplus.contains(&a.id) {
                Want::Surplus
            } else {
                Want::Needed
            };
            self.watch_one(&target.scope, &mut a, Some(policy), want, list_fresh, now)?;
            if !a.state.is_live() && a.job_name.is_some() && took_job_at(&a) >= self.demand_read_at
            {
                self.ended_since_read.insert(a.id, a);
            }
        }

        // Demand, when due. A coordinated target whose profiles are all directed
        // reads none: the coordinator reads the queue once for the pool.
        let all_directed = mode == TargetMode::Coordinated
            && profiles
                .iter()
                .filter(|p| p.host_id == host.id)
                .all(|p| is_directed(&host, p, mode));
        if all_directed {
            self.jobs.clear();
        } else if now >= self.next_poll && now >= self.blocked_until {
            if scaleset_feed::needs_rest_demand(&profiles) {
                self.read_demand(&target, &profiles, now);
            } else {
                self.no_rest_demand(now);
            }
            self.next_poll = now + (target.poll_interval_secs as Millis) * 1000;
        }
        // What the scale set listeners handed over, before fitness is judged: the first
        // message names the scale set that makes its profile fit to start.
        self.scaleset.take();
        let mut unfit = self.unfit_profiles(&target, &profiles, now);
        self.scaleset.add_unfit(&profiles, &mut unfit);

        // Allocate and start, holding the host-wide allocation lock while pending
        // attempts are recorded, so two loops (or a loop and a coordinator launch)
        // never spend one slot of capacity.
        let mut started = Vec::new();
        let allocation;
        self.uids_used_up = None;
        {
            let shared = self.shared.clone();
            let _guard = lock(&shared.alloc_lock);
            let host = self.store.host_or_create()?;
            let all_open = self.store.open_attempts(&host.id)?;
            let counts = Counts::of(&all_open);
            let mut mine: Vec<Attempt> = all_open
                .iter()
                .filter(|a| a.target == self.name)
                .cloned()
                .collect();
            // Ended attempts take their job out of the queue only while the queue is
            // older than their job (see `ended_since_read`).
            let mut for_demand: Vec<Attempt> = mine
                .iter()
                .filter(|a| a.state.is_live() || a.job_id.is_some())
                .cloned()
                .collect();
            for e in self.ended_since_read.values() {
                if !for_demand.iter().any(|a| a.id == e.id) {
                    for_demand.push(e.clone());
                }
            }
            let demand = demand::assign(
                &scaleset_feed::poll_profiles(&profiles),
                &scaleset_feed::rest_jobs(&self.jobs, &profiles),
                &for_demand,
            );
            let mut host_view = host.clone();
            host_view.draining = draining;
            // Scale set profiles take their demand from the feed, the rest from the queue.
            let standalone = self.scaleset.demand(demand.counts(), &mine);
            let modes = BTreeMap::from([(self.name.clone(), mode)]);
            let mut book = lock(&shared.pool.book);
            for c in book.observe(&mine, now) {
                log_info!(
                    "launch_closed",
                    lease = c.launch.launch.lease_id,
                    why = format!("{:?}", c.why)
                );
            }
            for (lease, id) in book.bind_free(&profiles, &mine) {
                if let Some(a) = mine.iter_mut().find(|a| a.id == id) {
                    a.lease_id = Some(lease);
                    self.store.save_attempt(a)?;
                }
            }
            let alloc = HostAllocator {
                host: &host_view,
                policies: &profiles,
                counts: &counts,
                unfit: &unfit,
            };
            let ctx = OfferCtx {
                alloc,
                demand: &standalone,
                modes: &modes,
                attempts: &mine,
            };
            allocation = alloc.allocate(&book.demand(&ctx));
            let can_start = self.client.is_some() && now >= self.blocked_until;
            let contain = shared.containment();
            let per_attempt = matches!(contain.isolation, crate::domain::InEffect::Uids(_));
            let mut held_now = all_open.clone();
            for pa in &allocation.profiles {
                if !can_start {
                    break;
                }
                // The queued times of the profile's jobs, oldest first: runners already
                // unassigned serve the oldest, so the i-th new one serves the next.
                let mut queued: Vec<Millis> = demand
                    .profiles
                    .iter()
                    .find(|d| d.profile == pa.profile)
                    .map(|d| {
                        d.jobs
                            .iter()
                            .filter_map(|id| self.jobs.iter().find(|j| j.id == *id))
                            .map(|j| j.created_at)
                            .collect()
                    })
                    .unwrap_or_default();
                if queued.is_empty() {
                    // A scale set profile: its jobs are the ones assigned and not started.
                    queued = self.scaleset.queued_times(&pa.profile);
                }
                queued.sort_unstable();
                for i in 0..pa.to_start {
                    let queued_at = queued.get(pa.unassigned as usize + i as usize).copied();
                    // The runner's own uid is chosen with the intent, under this lock,
                    // among those no open attempt holds.
                    let ids = if per_attempt {
                        match super::contain::pick_uid(&contain, &held_now) {
                            Some(ids) => Some(ids),
                            None => {
                                self.uids_used_up = Some(format!(
                                    "every uid of runner_uids is held by an attempt not yet \
                                     cleaned ({} open); more start as they are cleaned, or \
                                     widen runner_uids",
                                    held_now.iter().filter(|a| a.runner_uid.is_some()).count()
                                ));
                                break;
                            }
                        }
                    } else {
                        None
                    };
                    let mut a = starter::record_intent(
                        &self.store,
                        &host,
                        &pa.profile,
                        &self.name,
                        queued_at,
                        ids,
                        now,
                    )?;
                    held_now.push(a.clone());
                    if let Some(lease) = book.bind_next(&self.name, &pa.profile, a.id) {
                        a.lease_id = Some(lease);
                        self.store.save_attempt(&a)?;
                    }
                    started.push(a);
                }
            }
            self.surplus = allocation
                .profiles
                .iter()
                .flat_map(|pa| {
                    pick_surplus(&mine, &pa.profile, pa.surplus_idle, |id| book.holds(id))
                })
                .collect();
            drop(book);
            shared.pool.set_view(
                &self.name,
                TargetView {
                    unfit: unfit.clone(),
                    demand: standalone,
                },
            );
            self.record_status(&allocation, &demand, mode, now)?;
        }
        metrics_feed::demand(&self.shared.metrics, &allocation);
        metrics_feed::target(&self.shared.metrics, &self.name, self.client.as_ref());
        self.scaleset.handed_over();
        // After a start fails on a target error, the rest of this pass's intents end
        // with that reason instead of being left without a process; after a host
        // failure, the rest of that profile's.
        let mut stopped: Option<String> = None;
        for mut a in started {
            let held = self
                .holds
                .get(&a.profile)
                .filter(|h| h.holds(now))
                .map(|h| format!("held after a host failure: {}", h.reason));
            if let Some(why) = stopped.as_ref().or(held.as_ref()) {
                let _ = a.end(
                    crate::domain::Outcome::Failed,
                    Some(format!("not_started: {why}")),
                    now,
                );
                metrics_feed::ended(&self.shared.metrics, &a);
                self.store.save_attempt(&a)?;
                continue;
            }
            let Some(policy) = profiles.iter().find(|p| p.name == a.profile) else {
                continue;
            };
            let Some(client) = self.client.as_ref() else {
                stopped = Some("no GitHub client".into());
                continue;
            };
            let started = starter::start(
                &mut starter::StartCx {
                    shared: &self.shared,
                    store: &self.store,
                    client,
                    target: &target,
                    policy,
                    group_ids: &mut self.group_ids,
                    now,
                    scaleset: self.scaleset.launcher(&a.profile),
                },
                &mut a,
            )?;
            match started {
                starter::Started::Spawned => {
                    self.holds.remove(&a.profile);
                }
                starter::Started::GitHub(e) => {
                    self.note_error(&e, now);
                    stopped = Some(e.to_string());
                }
                starter::Started::Host(why) => {
                    let hold = StartHold::after_failure(self.holds.get(&a.profile), why, now);
                    log_warn!(
                        "starts_held",
                        target = self.name,
                        profile = a.profile,
                        failures = hold.failures,
                        until = crate::timefmt::format_rfc3339(hold.until),
                        reason = hold.reason
                    );
                    metrics_feed::start_held(&self.shared.metrics, &a.profile, true);
                    self.holds.insert(a.profile.clone(), hold);
                }
                starter::Started::Skipped => {}
            }
        }
        self.persist_hold(now)?;
        Ok(())
    }

    /// Records the client's rate-limit hold in the store, so a daemon restarted while
    /// it lasts sends nothing before it ends either.
    fn persist_hold(&mut self, now: Millis) -> Result<(), StoreError> {
        // The shared hold: a scale set listener's client may have met it.
        let until = self
            .client
            .as_ref()
            .and_then(|c| c.rate_limit_snapshot().limited_until)
            .unwrap_or(0)
            .max(self.scaleset.shared_hold().until())
            .max(self.blocked_until);
        if until > now && until != self.persisted_hold {
            self.store
                .kv_put(&hold_key(&self.name), &until.to_string())?;
            self.persisted_hold = until;
        }
        Ok(())
    }

    /// One attempt: read its new log lines, look at its process, decide, act.
    fn watch_one(
        &mut self,
        scope: &TargetScope,
        a: &mut Attempt,
        policy: Option<&ScalePolicy>,
        want: Want,
        list_fresh: bool,
        now: Millis,
    ) -> Result<(), StoreError> {
        let events: Vec<RunnerEvent> = if a.state.is_live() {
            let path = runner::attempt_log(&self.shared.state_dir, a.id);
            let tail = self.tails.entry(a.id).or_insert_with(|| LogTail::new(path));
            tail.read_new_lines()
                .unwrap_or_default()
                .iter()
                .filter_map(|l| parse_line(l))
                .collect()
        } else {
            Vec::new()
        };
        let process = process_status(a);
        // The exit code is known only to the parent that reaps it, once: keep it.
        let mut exit_noted = false;
        if let ProcessStatus::Exited { code } = process
            && a.exit_code.is_none()
        {
            a.exit_code = Some(code);
            exit_noted = true;
        }
        let registration = match (&self.runners, list_fresh) {
            (Some(list), true) => match list.iter().find(|r| r.name == a.runner_name) {
                Some(r) => Registration::Present { busy: r.busy },
                None => Registration::Absent,
            },
            _ => Registration::Unknown,
        };
        let timeouts = match policy {
            Some(p) => Timeouts::of(p, STOP_GRACE),
            None => Timeouts {
                bootstrap: 300_000,
                idle: 0,
                job: None,
                stop_grace: STOP_GRACE,
            },
        };
        // The memory limit's kills matter only once the life ends (an exit, or the job
        // reported done): read the cgroup's counter then, not every pass.
        let ending = !matches!(process, ProcessStatus::Alive | ProcessStatus::NotSpawned)
            || events
                .iter()
                .any(|e| matches!(e, RunnerEvent::JobCompleted { .. }));
        let oom_killed = ending
            && a.state.is_live()
            && super::contain::oom_killed(&self.shared.containment(), a.id);
        let actions = watch::watch(
            a,
            &Observation {
                events: &events,
                process,
                registration,
                oom_killed,
            },
            &timeouts,
            want,
            now,
        );
        if actions.is_empty() {
            if exit_noted {
                self.store.save_attempt(a)?;
            }
            return Ok(());
        }
        let jitter = self.jitter();
        let cx = Ctx {
            shared: &self.shared,
            store: &self.store,
            client: self.client.as_ref(),
            scope,
            timeouts,
            jitter,
            now,
            scaleset: policy.and_then(|p| self.scaleset.client(&p.name)),
        };
        actuator::apply(&cx, a, actions)?;
        if a.cleaned {
            self.tails.remove(&a.id);
        }
        Ok(())
    }

    /// Builds the GitHub client from the target's credentials; a failure is the
    /// target's visible error, retried at the next poll, and stops nothing else.
    fn ensure_client(&mut self, target: &Target, now: Millis) {
        if self
            .client
            .as_ref()
            .is_some_and(|c| c.base_url() == target.api_url && c.scope() == &target.scope)
        {
            return;
        }
        if now < self.next_poll && self.client.is_none() && self.last_error.is_some() {
            return;
        }
        match load_credential(&target.credential) {
            Ok(cred) => {
                let observer = metrics_feed::github_observer(&self.shared.metrics, &self.name);
                let client = GitHubClient::new(target, cred)
                    .with_shutdown(self.shutdown_rx.clone())
                    .with_observer(observer)
                    .with_shared_hold(self.scaleset.shared_hold());
                // A retry-after or rate-limit reset recorded before a restart still holds.
                let hold = self
                    .store
                    .kv_get(&hold_key(&self.name))
                    .ok()
                    .flatten()
                    .and_then(|v| v.parse::<Millis>().ok())
                    .filter(|t| *t > now);
                if let Some(t) = hold {
                    client.hold_until(t);
                    self.blocked_until = self.blocked_until.max(t);
                    self.next_poll = self.next_poll.max(t);
                    self.persisted_hold = t;
                }
                self.client = Some(client);
            }
            Err(e) => {
                self.client = None;
                self.set_error(format!("credentials: {e}"));
                self.next_poll = now + (target.poll_interval_secs as Millis) * 1000;
            }
        }
    }

    fn set_error(&mut self, msg: String) {
        if self.last_error.as_deref() != Some(msg.as_str()) {
            log_warn!("target_error", target = self.name, error = msg);
        }
        self.last_error = Some(msg);
    }

    /// Reads queued jobs. Failures keep the last demand and hold starts as the error's
    /// class says: a rate limit until its reset, a deterministic error with backoff.
    fn read_demand(&mut self, target: &Target, profiles: &[ScalePolicy], now: Millis) {
        let Some(client) = self.client.as_ref() else {
            return;
        };
        // The repositories to poll (an organization's come with their visibility).
        // Public ones (or not yet known) are not even read unless a profile may serve
        // them: their jobs would only be left out.
        let any_public = profiles.iter().any(|p| p.allow_public);
        let org_repos = &mut self.org_repos;
        let mut not_polled = 0u32;
        let result: Result<Vec<QueuedJob>, GhError> =
            org_repos.repos(client, target, now).and_then(|rs| {
                let mut all = Vec::new();
                for (o, r) in rs {
                    let private = org_repos.public(&format!("{o}/{r}")) == Some(false);
                    if !target_is_repo(target) && !any_public && !private {
                        not_polled += 1;
                        continue;
                    }
                    all.extend(client.queued_jobs(&o, &r)?);
                }
                Ok(all)
            });
        match result {
            Ok(jobs) => {
                // A repository target's visibility makes its profiles unfit instead
                // (see `unfit_profiles`); an organization's is judged job by job.
                let jobs = if target_is_repo(target) {
                    jobs
                } else {
                    let v = demand::serveable(&jobs, profiles, |r| self.org_repos.public(r));
                    self.visibility_note = v.reason().or_else(|| {
                        (not_polled > 0).then(|| {
                            format!(
                                "{not_polled} public repositories of the organization not polled: \
                                 a fork's pull request would run on this host; set \
                                 allow_public=true on a profile only if you mean it"
                            )
                        })
                    });
                    v.jobs
                };
                self.jobs = jobs;
                self.demand_read_at = now;
                self.ended_since_read.retain(|_, a| took_job_at(a) >= now);
                self.failures_in_row = 0;
                if self.last_error.take().is_some() {
                    log_info!("target_recovered", target = self.name);
                }
            }
            Err(e) => self.note_error(&e, now),
        }
    }

    /// A target whose profiles all take demand from scale sets reads no queued jobs:
    /// its queue is empty and fresh every pass.
    fn no_rest_demand(&mut self, now: Millis) {
        self.jobs.clear();
        self.demand_read_at = now;
        self.ended_since_read.retain(|_, a| took_job_at(a) >= now);
    }

    fn note_error(&mut self, e: &GhError, now: Millis) {
        match e.class() {
            ErrorClass::RateLimitedUntil(until) => {
                self.blocked_until = until;
                self.next_poll = until;
                // Durable at once: a kill right now must not forget the wait.
                if until != self.persisted_hold
                    && self
                        .store
                        .kv_put(&hold_key(&self.name), &until.to_string())
                        .is_ok()
                {
                    self.persisted_hold = until;
                }
            }
            ErrorClass::Deterministic => {
                self.failures_in_row += 1;
                let backoff =
                    (60_000i64 << self.failures_in_row.min(4).saturating_sub(1)).min(900_000);
                self.blocked_until = now + backoff;
            }
            ErrorClass::Transient => {}
        }
        self.set_error(e.to_string());
    }

    /// Reads GitHub's runner list every minute (and at the first pass): it
    /// cross-checks registrations and deletes ones with our names that no attempt
    /// explains. Returns whether the list is fresh this pass.
    fn maybe_list_runners(
        &mut self,
        target: &Target,
        host: &Host,
        now: Millis,
    ) -> Result<bool, StoreError> {
        if now < self.next_runner_list || now < self.blocked_until {
            return Ok(false);
        }
        let Some(client) = self.client.as_ref() else {
            return Ok(false);
        };
        self.next_runner_list = now + RUNNER_LIST_EVERY;
        let list = match client.list_runners(&target.scope) {
            Ok(l) => l,
            Err(e) => {
                self.note_error(&e, now);
                return Ok(false);
            }
        };
        let attempts = self.store.open_attempts(&host.id)?;
        for r in watch::unexplained_registrations(&host.id, &list, &attempts) {
            // Only runners named for this host reach here; foreign ones never do.
            let res = client.delete_runner(&target.scope, r.id);
            log_info!(
                "orphan_registration_deleted",
                target = self.name,
                runner = r.name,
                result = format!("{res:?}")
            );
        }
        self.runners = Some(list);
        Ok(true)
    }

    /// Profiles that cannot start runners now, with the reason `status` shows.
    fn unfit_profiles(
        &mut self,
        target: &Target,
        profiles: &[ScalePolicy],
        now: Millis,
    ) -> BTreeMap<String, String> {
        let mut unfit = BTreeMap::new();
        if let (TargetScope::Repo { owner, repo }, Some(client)) =
            (&target.scope, self.client.as_ref())
            && now >= self.next_visibility
            && now >= self.blocked_until
        {
            match client.repository_is_public(owner, repo) {
                Ok(p) => {
                    self.public_repo = Some(p);
                    self.next_visibility = now + VISIBILITY_EVERY;
                }
                Err(e) => self.note_error(&e, now),
            }
        }
        self.check_scaleset_groups(target, profiles, now);
        let contain = self.shared.containment();
        for p in profiles {
            if let crate::domain::InEffect::Refused { why } = &contain.isolation {
                unfit.insert(p.name.clone(), format!("isolation: {why}"));
                continue;
            }
            if let Some(h) = self.holds.get(&p.name) {
                if h.holds(now) {
                    unfit.insert(p.name.clone(), h.describe(now));
                    continue;
                }
                metrics_feed::start_held(&self.shared.metrics, &p.name, false);
            }
            if self.client.is_none() {
                unfit.insert(
                    p.name.clone(),
                    self.last_error
                        .clone()
                        .unwrap_or_else(|| "no credentials".into()),
                );
                continue;
            }
            if target_is_org(target) && p.demand == DemandSource::Scaleset && !p.allow_public {
                match self.group_public.get(&p.name) {
                    Some(false) => {}
                    Some(true) => {
                        unfit.insert(p.name.clone(), "the scale set's runner group allows public repositories: a fork's pull request would run on this host; turn that off in the group's settings, or set allow_public=true only if you mean it".into());
                        continue;
                    }
                    None => {
                        unfit.insert(
                            p.name.clone(),
                            "runner group visibility not yet known".into(),
                        );
                        continue;
                    }
                }
            }
            if self.public_repo == Some(true) && !p.allow_public {
                unfit.insert(p.name.clone(), "repository is public: a fork's pull request would run on this host; set allow_public=true only if you mean it".into());
                continue;
            }
            if let Err(e) = runner::check_install(&starter::runner_dir(&self.shared.state_dir, p)) {
                unfit.insert(p.name.clone(), format!("runner install: {e}"));
            }
        }
        if self.public_repo.is_none() && target_is_repo(target) {
            for p in profiles {
                unfit
                    .entry(p.name.clone())
                    .or_insert_with(|| "repository visibility not yet known".into());
            }
        }
        unfit
    }

    /// Reads, hourly, whether the runner group of each scale set profile of an
    /// organization target admits public repositories' jobs: a scale set takes every
    /// job its group lets through, so the group's setting is the guard.
    fn check_scaleset_groups(&mut self, target: &Target, profiles: &[ScalePolicy], now: Millis) {
        let (TargetScope::Org { org }, Some(client)) = (&target.scope, self.client.as_ref()) else {
            return;
        };
        if now < self.next_group_check || now < self.blocked_until {
            return;
        }
        self.next_group_check = now + VISIBILITY_EVERY;
        for p in profiles
            .iter()
            .filter(|p| p.demand == DemandSource::Scaleset)
        {
            let id = match p.runner_group.as_deref() {
                None => Ok(Some(crate::github::ops::DEFAULT_RUNNER_GROUP_ID)),
                Some(g) => match g.parse::<i64>() {
                    Ok(id) => Ok(Some(id)),
                    Err(_) => client.runner_group_id_by_name(org, g),
                },
            };
            match id.and_then(|id| match id {
                Some(id) => client.runner_group_allows_public(org, id),
                None => Ok(None),
            }) {
                Ok(Some(public)) => {
                    self.group_public.insert(p.name.clone(), public);
                }
                Ok(None) => {
                    self.group_public.remove(&p.name);
                }
                Err(e) => {
                    self.note_error(&e, now);
                    return;
                }
            }
        }
    }

    /// Writes what `status` and `top` show, when it changed (or every few seconds),
    /// so the daemon's own writes do not churn the store.
    fn record_status(
        &mut self,
        alloc: &crate::reconcile::allocate::Allocation,
        demand: &demand::Demand,
        mode: TargetMode,
        now: Millis,
    ) -> Result<(), StoreError> {
        let unfit_jobs = demand.unfit_reasons();
        for pa in &alloc.profiles {
            let last_error = self
                .last_error
                .clone()
                .or_else(|| self.uids_used_up.clone())
                .or_else(|| self.visibility_note.clone())
                .or_else(|| self.scaleset.error(&pa.profile))
                .or_else(|| unfit_jobs.first().cloned());
            let st = ProfileStatus {
                profile: pa.profile.clone(),
                demand: pa.demand,
                limiting: pa.limit.to_string(),
                last_error,
                updated_at: now,
            };
            let changed = match self.last_status.get(&pa.profile) {
                Some((old, at)) => {
                    old.demand != st.demand
                        || old.limiting != st.limiting
                        || old.last_error != st.last_error
                        || now - at >= STATUS_REFRESH
                }
                None => true,
            };
            if changed {
                self.store.put_profile_status(&st)?;
                self.last_status.insert(pa.profile.clone(), (st, now));
            }
        }
        let ts = TargetStatus {
            target: self.name.clone(),
            mode: mode.as_str().into(),
            last_error: self.last_error.clone(),
            rate_limit_remaining: self
                .client
                .as_ref()
                .and_then(|c| c.rate_limit_snapshot().remaining.map(|r| r as i64)),
            updated_at: now,
        };
        let changed = match &self.last_target_status {
            Some((old, at)) => {
                old.last_error != ts.last_error || old.mode != ts.mode || now - at >= STATUS_REFRESH
            }
            None => true,
        };
        if changed {
            self.store.put_target_status(&ts)?;
            self.last_target_status = Some((ts, now));
        }
        if now >= self.next_sample {
            self.next_sample = now + SAMPLE_EVERY;
            let samples: Vec<QueueSample> = alloc
                .profiles
                .iter()
                .map(|pa| QueueSample {
                    profile: pa.profile.clone(),
                    at: now,
                    queued: pa.queued,
                    live: pa.live,
                })
                .collect();
            self.store.add_queue_samples(&samples)?;
        }
        Ok(())
    }
}

/// When the attempt took its job (entered `busy`; its last change if it never did).
fn took_job_at(a: &Attempt) -> Millis {
    watch::entered_at(a, crate::domain::AttemptState::Busy)
}

/// The store key of a target's rate-limit hold.
fn hold_key(target: &str) -> String {
    format!("target:{target}:rate_limit_hold_until")
}

fn target_is_repo(t: &Target) -> bool {
    matches!(t.scope, TargetScope::Repo { .. })
}

fn target_is_org(t: &Target) -> bool {
    matches!(t.scope, TargetScope::Org { .. })
}

/// The runner process of an attempt as this pass finds it. Starting is synchronous
/// within a pass, so an attempt found without a pid never got (or lost) its process.
fn process_status(a: &Attempt) -> ProcessStatus {
    let (Some(pid), Some(start)) = (a.pid, a.pid_start) else {
        return ProcessStatus::Gone;
    };
    match runner::reap_child(pid) {
        Reap::Exited(ExitInfo::Code(c)) => ProcessStatus::Exited { code: c },
        Reap::Exited(ExitInfo::Signal(s)) => ProcessStatus::Exited { code: 128 + s },
        Reap::Exited(ExitInfo::Unknown) => ProcessStatus::Gone,
        Reap::Running | Reap::NotOurChild => match runner::is_alive(pid, start) {
            runner::ProcessStatus::Alive => ProcessStatus::Alive,
            runner::ProcessStatus::Gone => ProcessStatus::Gone,
        },
    }
}
