//! A target's I/O workers: the slow half of a pass, off the loop's thread. Starts (ready
//! the attempt, JIT config, spawn), deregistrations and cleanups, demand reads and the
//! runner list each go to one of a few worker threads (`io:<target>:<n>`), so the loop
//! keeps watching its runners while GitHub is 100 ms away and a JIT config takes half a
//! second. Deregistrations, cleanups and reads go first: a worker takes from the urgent
//! queue before the other, so a runner's exit is cleaned up and the queue is read while a
//! burst is still starting.
//!
//! The workers are elastic: they are started as tasks outnumber them (up to the
//! target's `max_in_flight`), a worker with nothing to do for [`IDLE_RETIRE`] ends, and
//! the last one ends sooner (`quiet`). A quiet target keeps no worker thread and no
//! worker store connection between its polls, and a burst still gets every request in
//! flight.
//!
//! Each worker has its own store connection, opened when a task first needs it (a
//! queue read needs none); what it does to an attempt it writes itself, intent first as
//! the starter and the actuator always have, and tells the loop with a [`Done`]. The
//! loop never watches an attempt a worker holds.

use super::actuator::{self, Ctx};
use super::starter::{self, StartCx, Started};
use crate::daemon::shared::Shared;
use crate::domain::runner_group::GroupIds;
use crate::domain::{Attempt, QueuedJob, RegisteredRunner, ScalePolicy, Target};
use crate::github::visibility::OrgRepos;
use crate::github::{GhError, GitHubClient, QueueRead, ReadCaps};
use crate::reconcile::pass::{GuardFound, GuardRead};
use crate::reconcile::watch::{Action, Timeouts};
use crate::scaleset::ScaleSetClient;
use crate::store::{SqliteStore, Store, StoreError};
use crate::timefmt::{Millis, now_millis};
use crate::{log_error, log_info};
use crossbeam_channel::{Receiver, Sender, select_biased, unbounded};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long a worker waits for a task before it ends (the last one: `quiet`).
pub const IDLE_RETIRE: Duration = Duration::from_secs(30);

/// What a worker does.
pub enum Task {
    /// Carry a `pending` attempt to a spawned runner.
    Start {
        attempt: Attempt,
        /// Boxed: a profile (its variables and tools too) is most of a task's size.
        policy: Box<ScalePolicy>,
        /// A scale set profile's client and scale set id.
        scaleset: Option<(Arc<ScaleSetClient>, i64)>,
    },
    /// Carry out an attempt's actions from the first one that needs GitHub or the disk.
    Apply {
        attempt: Attempt,
        actions: Vec<Action>,
        timeouts: Timeouts,
        /// A scale set profile's client: its runners are removed from the scale set.
        scaleset: Option<Arc<ScaleSetClient>>,
        /// In `[0, 1]`, spreads cleanup retries.
        jitter: f64,
    },
    /// Read the queued jobs: of the repository, or of the organization's repositories
    /// (public ones only when `any_public`, since their jobs would be left out).
    ReadDemand {
        repos: OrgRepos,
        any_public: bool,
        caps: DemandCaps,
        /// The runs the loop's queue holds a view of (sorted).
        held: Vec<i64>,
    },
    /// Read GitHub's runner list (and publish it for `top`).
    ListRunners,
    /// Delete registrations under this host's names that no open attempt explains
    /// (the pass found them: `reconcile::plan::Plan::orphans`).
    DeleteRunners { runners: Vec<RegisteredRunner> },
    /// Keep the managed runner installs current (`runner_update`), as claimed.
    RunnerRelease {
        job: crate::daemon::host::runner_book::Job,
    },
    /// Read the public-repository guard's facts (`public_guard`).
    Guard {
        read: GuardRead,
        profiles: Vec<ScalePolicy>,
    },
    /// Carry the lost jobs whose time has come to GitHub's re-run (`rerun`).
    Reruns,
}

/// What one demand read may read, as the pass decided it (`reconcile::pass::Read::Demand`).
#[derive(Debug, Clone, Copy)]
pub struct DemandCaps {
    /// At most this many runs never read before (the oldest first).
    pub new_runs: usize,
    /// At most this many runs read before, read again.
    pub known_runs: usize,
    /// Whether the in-progress run lists go with the queued ones.
    pub in_progress: bool,
}

impl Task {
    /// The attempt the task holds, if any.
    pub fn attempt(&self) -> Option<i64> {
        match self {
            Task::Start { attempt, .. } | Task::Apply { attempt, .. } => Some(attempt.id),
            Task::ReadDemand { .. }
            | Task::ListRunners
            | Task::DeleteRunners { .. }
            | Task::RunnerRelease { .. }
            | Task::Guard { .. }
            | Task::Reruns => None,
        }
    }

    /// Whether the task goes before the starts waiting: deregistrations and cleanups,
    /// and the reads the pass waits on (each short, one at a time). Starts come in
    /// bursts of hundreds; a queue read sent behind them waited 6 s for a worker
    /// (issue 37, burst300), and the pass sends no other read meanwhile.
    fn urgent(&self) -> bool {
        matches!(
            self,
            Task::Apply { .. }
                | Task::ReadDemand { .. }
                | Task::ListRunners
                | Task::Guard { .. }
                | Task::DeleteRunners { .. }
                | Task::Reruns
        )
    }
}

/// What a worker did.
pub enum Done {
    Started {
        attempt: Attempt,
        outcome: Started,
    },
    Applied {
        attempt: Attempt,
    },
    /// One run's queued jobs, while a demand read goes on (not the end of a task).
    DemandRun {
        run: i64,
        jobs: Vec<QueuedJob>,
    },
    Demand {
        repos: OrgRepos,
        /// When the read began: jobs that started after this may still be listed.
        read_at: Millis,
        result: Result<DemandRead, GhError>,
        /// The rate-limit units it spent (GETs not answered 304).
        units: u64,
    },
    Runners {
        result: Result<Vec<RegisteredRunner>, GhError>,
        /// When the read began: a runner registered since may be missing from it.
        read_at: Millis,
    },
    /// A runner install check ended (what it did is in the log and the store).
    RunnerRelease,
    /// Orphan registrations were deleted (each result is in the log).
    RunnersDeleted,
    Guard {
        result: Result<GuardFound, GhError>,
    },
    /// The lost jobs due were carried as far as they go now (each row keeps its own
    /// result); `Err` only for a rate limit that held the credential.
    Reruns {
        result: Result<(), GhError>,
    },
    /// The store refused a write: the attempt is left as the store has it.
    Failed {
        attempt: Option<i64>,
        error: String,
    },
}

/// A demand read's result.
pub struct DemandRead {
    pub read: QueueRead,
    /// An organization's public (or not yet known) repositories left unread.
    pub not_polled: u32,
}

struct Work {
    task: Task,
    client: Arc<GitHubClient>,
    target: Target,
}

/// The workers of one target.
pub struct IoPool {
    target: String,
    // The queues carry boxes: an unbounded channel keeps a block of 31 slots alive
    // while it is empty, and a `Work` is 832 bytes, a `Done` 584: unboxed, the three
    // held about 70 kB per idle target (issue 32, "Idle").
    urgent: Sender<Box<Work>>,
    normal: Sender<Box<Work>>,
    urgent_rx: Receiver<Box<Work>>,
    normal_rx: Receiver<Box<Work>>,
    done_tx: Sender<Box<Done>>,
    done: Receiver<Box<Done>>,
    threads: Vec<JoinHandle<()>>,
    common: Arc<Common>,
    /// Tasks sent and not yet reported done.
    outstanding: usize,
    /// Workers the target may have (its `max_in_flight`; at least one).
    limit: usize,
    /// Threads started so far, for their names.
    started: usize,
}

/// What every worker shares.
struct Common {
    shared: Arc<Shared>,
    /// Runner group ids by name (an organization's groups are looked up once).
    group_ids: GroupIds,
    /// Set by [`IoPool::stop`]: starts still queued end `not_started`, cleanups still
    /// queued are left to the next pass of the next daemon.
    stopping: AtomicBool,
    /// Workers running (a worker that retires takes itself off before it ends).
    live: AtomicUsize,
    /// How long a worker waits for a task before it ends ([`IDLE_RETIRE`]).
    idle_retire: Duration,
    /// Starts the loop withdrew, with why (`Effect::HoldStarts`: their profile was
    /// held while they waited): one a worker takes up ends `not_started` instead of
    /// failing the same way. Which, and until when, is the pass's; this only keeps
    /// the word until a worker takes the start up.
    withdrawn: Mutex<HashMap<i64, String>>,
}

impl IoPool {
    /// The workers of `target`, which may grow to `limit` (its `max_in_flight`). One
    /// starts now; a worker that cannot open the store reports nothing and ends, and
    /// the next task starts another.
    pub fn start(shared: &Arc<Shared>, target: &str, limit: usize) -> IoPool {
        IoPool::start_with(shared, target, limit, IDLE_RETIRE)
    }

    fn start_with(
        shared: &Arc<Shared>,
        target: &str,
        limit: usize,
        idle_retire: Duration,
    ) -> IoPool {
        let (urgent, urgent_rx) = unbounded::<Box<Work>>();
        let (normal, normal_rx) = unbounded::<Box<Work>>();
        let (done_tx, done) = unbounded::<Box<Done>>();
        let common = Arc::new(Common {
            shared: shared.clone(),
            group_ids: GroupIds::default(),
            stopping: AtomicBool::new(false),
            live: AtomicUsize::new(0),
            idle_retire,
            withdrawn: Mutex::new(HashMap::new()),
        });
        let mut pool = IoPool {
            target: target.to_string(),
            urgent,
            normal,
            urgent_rx,
            normal_rx,
            done_tx,
            done,
            threads: Vec::new(),
            common,
            outstanding: 0,
            limit: limit.max(1),
            started: 0,
        };
        pool.grow();
        pool
    }

    /// Changes how many workers there may be (a `target set NAME max_in_flight=N` the
    /// daemon noticed). A lowered limit leaves extra workers to retire when idle; the
    /// credential's `InFlight` already holds requests to the new bound.
    pub fn set_limit(&mut self, limit: usize) {
        self.limit = limit.max(1);
    }

    /// Workers running now.
    #[cfg(test)]
    fn workers(&self) -> usize {
        self.common.live.load(Ordering::SeqCst)
    }

    /// Starts workers until every outstanding task has one (at least one worker, at
    /// most the limit), and joins the threads of workers that retired.
    fn grow(&mut self) {
        self.threads.retain(|t| !t.is_finished());
        let want = wanted_workers(self.outstanding, self.limit);
        while self.common.live.load(Ordering::SeqCst) < want {
            let (u, w, d, c) = (
                self.urgent_rx.clone(),
                self.normal_rx.clone(),
                self.done_tx.clone(),
                self.common.clone(),
            );
            let name = format!("io:{}:{}", self.target, self.started);
            self.common.live.fetch_add(1, Ordering::SeqCst);
            match std::thread::Builder::new()
                .name(name)
                .spawn(move || worker(&c, &u, &w, &d))
            {
                Ok(t) => {
                    self.started += 1;
                    self.threads.push(t);
                }
                Err(e) => {
                    self.common.live.fetch_sub(1, Ordering::SeqCst);
                    log_error!("io_worker_not_started", target = self.target, error = e);
                    return;
                }
            }
        }
    }

    /// Hands `task` to a worker; its [`Done`] comes back on [`IoPool::done`].
    pub fn send(&mut self, task: Task, client: Arc<GitHubClient>, target: &Target) {
        let q = if task.urgent() {
            &self.urgent
        } else {
            &self.normal
        };
        let work = Work {
            task,
            client,
            target: target.clone(),
        };
        if q.send(Box::new(work)).is_ok() {
            self.outstanding += 1;
            self.grow();
        }
    }

    /// Withdraws the starts `attempts` still queued: each ends `not_started` with
    /// `why` when a worker takes it up (see `Common::withdrawn`).
    pub fn withdraw(&self, attempts: &[i64], why: &str) {
        let mut withdrawn = self
            .common
            .withdrawn
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        for id in attempts {
            withdrawn.insert(*id, why.to_string());
        }
    }

    /// The results, for the loop's `select!`.
    pub fn done(&self) -> &Receiver<Box<Done>> {
        &self.done
    }

    /// Counts a result received from [`IoPool::done`].
    pub fn received(&mut self) {
        self.outstanding = self.outstanding.saturating_sub(1);
    }

    /// Tasks sent and not yet reported.
    pub fn outstanding(&self) -> usize {
        self.outstanding
    }

    /// Lets the workers finish what they hold (their GitHub waits end early on the
    /// daemon's shutdown) and joins them. A start still queued ends `not_started`
    /// (nothing external was done for it); a cleanup still queued is left to the next
    /// daemon's first pass.
    pub fn stop(self) {
        self.common.stopping.store(true, Ordering::SeqCst);
        drop(self.urgent);
        drop(self.normal);
        drop(self.done_tx);
        for t in self.threads {
            let _ = t.join();
        }
    }
}

/// Takes a worker off the live count when it ends, however it ends (a panic too),
/// unless [`retire`] already did.
struct Live<'a> {
    count: &'a AtomicUsize,
    counted: bool,
}

impl Drop for Live<'_> {
    fn drop(&mut self) {
        if self.counted {
            self.count.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

fn worker(
    c: &Common,
    urgent: &Receiver<Box<Work>>,
    normal: &Receiver<Box<Work>>,
    done: &Sender<Box<Done>>,
) {
    let mut live = Live {
        count: &c.live,
        counted: true,
    };
    let _trim = super::quiet::TrimOnExit;
    let mut store = WorkerStore {
        dir: &c.shared.state_dir,
        conn: None,
    };
    loop {
        // Deregistrations and cleanups first; then anything. A queue that is closed
        // and empty is ready too, so the other is asked before giving up.
        let work = select_biased! {
            recv(urgent) -> w => w.ok(),
            recv(normal) -> w => w.ok(),
            default(super::quiet::worker_wait(c.live.load(Ordering::SeqCst), c.idle_retire)) => {
                if retire(c, urgent, normal) {
                    live.counted = false;
                    return;
                }
                continue;
            }
        };
        let Some(work) = work.or_else(|| urgent.try_recv().or_else(|_| normal.try_recv()).ok())
        else {
            if urgent.is_empty() && normal.is_empty() {
                return;
            }
            continue;
        };
        let work = *work;
        let result = if c.stopping.load(Ordering::SeqCst) {
            // The loop is gone: nothing to report to.
            let _ = wind_down(c, &mut store, work, "the daemon stopped");
            None
        } else if let Some(why) = withdrawn(c, &work.task) {
            wind_down(c, &mut store, work, &why).map(|attempt| Done::Started {
                attempt,
                outcome: Started::Skipped,
            })
        } else {
            let start = work.task.attempt();
            let result = run(c, &mut store, work, done);
            // Withdrawn while it ran: nothing left to withdraw.
            if let Some(id) = start {
                withdrawn_lock(c).remove(&id);
            }
            result
        };
        if let Some(result) = result
            && done.send(Box::new(result)).is_err()
        {
            return;
        }
    }
}

/// Workers wanted for `outstanding` tasks: one each, at most `limit`.
fn wanted_workers(outstanding: usize, limit: usize) -> usize {
    outstanding.min(limit.max(1))
}

/// Whether an idle worker ends: never while tasks wait (one sent as it timed out would
/// otherwise wait for a busy worker, or for none).
fn retire(c: &Common, urgent: &Receiver<Box<Work>>, normal: &Receiver<Box<Work>>) -> bool {
    let left = c
        .live
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
            (n > 0).then(|| n - 1)
        });
    if left.is_err() {
        return false;
    }
    if urgent.is_empty() && normal.is_empty() {
        return true;
    }
    c.live.fetch_add(1, Ordering::SeqCst);
    false
}

/// A start that will not be tried: it ends `not_started` (its row says why; nothing
/// external was done) and comes back. Anything else is left for a later pass.
/// A worker's store connection, opened when a task first needs it: an idle target's
/// tasks are mostly queue reads, which need none, and each worker (one starts for
/// every read of an idle target and retires a second later) opened one, parsed the
/// schema and cached pages and statements for nothing (issue 32, "Idle").
struct WorkerStore<'a> {
    dir: &'a std::path::Path,
    conn: Option<SqliteStore>,
}

impl WorkerStore<'_> {
    fn get(&mut self) -> Result<&SqliteStore, StoreError> {
        let conn = match self.conn.take() {
            Some(conn) => conn,
            None => SqliteStore::open(self.dir).inspect_err(|e| {
                log_error!("io_worker_store", error = e);
            })?,
        };
        Ok(self.conn.insert(conn))
    }
}

fn wind_down(c: &Common, store: &mut WorkerStore, work: Work, why: &str) -> Option<Attempt> {
    let Task::Start { mut attempt, .. } = work.task else {
        return None;
    };
    if attempt.end_not_started(why, now_millis()).is_ok() {
        crate::daemon::feeds::metrics_feed::ended(&c.shared.metrics, &attempt);
        if let Err(e) = store.get().and_then(|s| s.save_attempt(&attempt)) {
            log_error!("io_wind_down", attempt = attempt.id, error = e);
        }
    }
    Some(attempt)
}

/// Why a start task was withdrawn, if it was (taking the word: it is told once).
fn withdrawn(c: &Common, task: &Task) -> Option<String> {
    let Task::Start { attempt, .. } = task else {
        return None;
    };
    withdrawn_lock(c).remove(&attempt.id)
}

fn withdrawn_lock(c: &Common) -> std::sync::MutexGuard<'_, HashMap<i64, String>> {
    c.withdrawn.lock().unwrap_or_else(|p| p.into_inner())
}

fn run(c: &Common, store: &mut WorkerStore, work: Work, done: &Sender<Box<Done>>) -> Option<Done> {
    let Work {
        task,
        client,
        target,
    } = work;
    let held = task.attempt();
    let failed = |e: StoreError| Done::Failed {
        attempt: held,
        error: e.to_string(),
    };
    // The store, for the tasks that write or read it.
    macro_rules! store {
        () => {
            match store.get() {
                Ok(s) => s,
                Err(e) => return Some(failed(e)),
            }
        };
    }
    Some(match task {
        Task::Start {
            mut attempt,
            policy,
            scaleset,
        } => {
            let mut cx = StartCx {
                shared: &c.shared,
                store: store!(),
                client: &client,
                target: &target,
                policy: &policy,
                group_ids: &c.group_ids,
                now: now_millis(),
                scaleset: scaleset.as_ref().map(|(ss, id)| (ss.as_ref(), *id)),
            };
            let outcome = starter::start(&mut cx, &mut attempt);
            match outcome {
                Ok(outcome) => Done::Started { attempt, outcome },
                Err(e) => failed(e),
            }
        }
        Task::Apply {
            mut attempt,
            actions,
            timeouts,
            scaleset,
            jitter,
        } => {
            let cx = Ctx {
                shared: &c.shared,
                store: store!(),
                client: Some(&client),
                scope: &target.scope,
                timeouts,
                jitter,
                now: now_millis(),
                scaleset: scaleset.as_deref(),
            };
            match actuator::apply(&cx, &mut attempt, actions) {
                Ok(()) => Done::Applied { attempt },
                Err(e) => failed(e),
            }
        }
        Task::ReadDemand {
            repos,
            any_public,
            caps,
            held,
        } => read_and_keep(
            c,
            store,
            &client,
            &target,
            (repos, any_public, caps, held),
            done,
        ),
        Task::ListRunners => {
            let read_at = now_millis();
            Done::Runners {
                result: list_runners(&client, &target, store!()),
                read_at,
            }
        }
        Task::DeleteRunners { runners } => delete_runners(&client, &target, runners),
        Task::RunnerRelease { job } => {
            crate::daemon::workers::runner_update::run(&c.shared, store!(), &client, &target, job);
            Done::RunnerRelease
        }
        Task::Guard { read, profiles } => Done::Guard {
            result: super::public_guard::read(&client, &target, &profiles, read, &c.group_ids),
        },
        Task::Reruns => Done::Reruns {
            result: super::rerun::run(&c.shared, store!(), &client, &target, now_millis()),
        },
    })
}

/// [`demand_task`], keeping what it is answered with (its ETags) in the store as each
/// run's answer comes, not when the loop takes the result: a daemon killed in between
/// would read every run that read changed again, at a unit each (far from GitHub a read
/// of many new runs lasts seconds). The runs lists' ETags and, when it read them, the
/// in-progress lists' time are kept as the read ends. Without a store the loop keeps
/// the ETags when it takes the result.
fn read_and_keep(
    c: &Common,
    store: &mut WorkerStore,
    client: &GitHubClient,
    target: &Target,
    read: (OrgRepos, bool, DemandCaps, Vec<i64>),
    done: &Sender<Box<Done>>,
) -> Done {
    // Opened before the read, so its answers are kept the moment they come.
    let _ = store.get();
    let in_progress = read.2.in_progress;
    let kept = std::sync::Mutex::new(&mut *store);
    let keep = || {
        let mut store = kept.lock().unwrap_or_else(|e| e.into_inner());
        if let Ok(s) = store.get() {
            crate::daemon::feeds::clients::keep_etags(s, &target.name, Some(client));
        }
    };
    let result = demand_task(c, client, target, read, done, &keep);
    keep();
    let store = kept.into_inner().unwrap_or_else(|e| e.into_inner());
    if let Done::Demand {
        read_at,
        result: Ok(_),
        ..
    } = &result
        && in_progress
        && let Ok(s) = store.get()
    {
        let _ = crate::store::daemon_facts::put_in_progress_read(s, &target.name, *read_at);
    }
    result
}

/// A demand read: each run's jobs go to the loop as they come (`Done::DemandRun`), and
/// `keep` is called after each, then the whole read goes with what it spent.
fn demand_task(
    c: &Common,
    client: &GitHubClient,
    target: &Target,
    (mut repos, any_public, caps, held): (OrgRepos, bool, DemandCaps, Vec<i64>),
    done: &Sender<Box<Done>>,
    keep: &(dyn Fn() + Sync),
) -> Done {
    let read_at = now_millis();
    let each_run = |run: i64, jobs: &[QueuedJob]| {
        keep();
        let _ = done.send(Box::new(Done::DemandRun {
            run,
            jobs: jobs.to_vec(),
        }));
    };
    // One read at a time per target, and the loop's other GETs wait for it:
    // what the credential's GETs spent meanwhile is this read's cost.
    let before = client.stats().get_units;
    let result = read_demand(
        client,
        target,
        &mut repos,
        (
            any_public,
            ReadCaps {
                new: caps.new_runs,
                known: caps.known_runs,
                held: &held,
                in_progress: caps.in_progress,
            },
        ),
        read_at,
        &each_run,
    );
    if let Ok(r) = &result {
        c.shared
            .note_owners(r.read.owners.iter().map(|(n, o)| (n.as_str(), o.clone())));
    }
    Done::Demand {
        repos,
        read_at,
        result,
        units: client.stats().get_units - before,
    }
}

/// Deletes registrations no open attempt explains (the plan's orphans).
fn delete_runners(client: &GitHubClient, target: &Target, runners: Vec<RegisteredRunner>) -> Done {
    for r in runners {
        let res = client.delete_runner(&target.scope, r.id);
        log_info!(
            "orphan_registration_deleted",
            target = target.name,
            runner = r.name,
            result = format!("{res:?}")
        );
    }
    Done::RunnersDeleted
}

/// The target's queued jobs. An organization's public repositories (and ones whose
/// visibility is not known yet) are not read unless a profile may serve them.
fn read_demand(
    client: &GitHubClient,
    target: &Target,
    repos: &mut OrgRepos,
    (any_public, caps): (bool, ReadCaps),
    now: Millis,
    each_run: &(dyn Fn(i64, &[QueuedJob]) + Sync),
) -> Result<DemandRead, GhError> {
    let org = matches!(target.scope, crate::domain::TargetScope::Org { .. });
    let mut not_polled = 0;
    let mut read = Vec::new();
    for (owner, repo) in repos.repos(client, target, now)? {
        let public = repos.public(&format!("{owner}/{repo}"));
        if !crate::reconcile::demand::polls_repository(org, any_public, public) {
            not_polled += 1;
            continue;
        }
        read.push((owner, repo));
    }
    // Every repository's runs, and each run's jobs, read with the target's bound on
    // requests in flight.
    Ok(DemandRead {
        read: client.read_queue(&read, caps, each_run)?,
        not_polled,
    })
}

/// GitHub's runner list, published for `top`'s Runners view.
fn list_runners(
    client: &GitHubClient,
    target: &Target,
    store: &SqliteStore,
) -> Result<Vec<RegisteredRunner>, GhError> {
    let list = client.list_runners(&target.scope)?;
    // For `top`'s Runners view; a failed write costs only that view's freshness.
    if let Err(e) =
        crate::store::daemon_facts::publish_runners(store, &target.name, &list, now_millis())
    {
        log_info!(
            "runners_publish_failed",
            target = target.name,
            error = e.to_string()
        );
    }
    Ok(list)
}

#[cfg(test)]
#[path = "io_tests.rs"]
mod tests;
