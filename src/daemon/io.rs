//! A target's I/O workers: the slow half of a pass, off the loop's thread. Starts (ready
//! the attempt, JIT config, spawn), deregistrations and cleanups, demand reads and the
//! runner list each go to one of a few worker threads (`io:<target>:<n>`), so the loop
//! keeps watching its runners while GitHub is 100 ms away and a JIT config takes half a
//! second. Deregistrations and cleanups go first: a worker takes from the urgent queue
//! before the other, so a runner's exit is cleaned up while a burst is still starting.
//!
//! Each worker has its own store connection; what it does to an attempt it writes
//! itself, intent first as the starter and the actuator always have, and tells the loop
//! with a [`Done`]. The loop never watches an attempt a worker holds.

use super::actuator::{self, Ctx};
use super::shared::Shared;
use super::starter::{self, StartCx, Started};
use crate::domain::{Attempt, QueuedJob, RegisteredRunner, ScalePolicy, Target};
use crate::github::visibility::OrgRepos;
use crate::github::{GhError, GitHubClient};
use crate::reconcile::watch::{self, Action, Timeouts};
use crate::scaleset::ScaleSetClient;
use crate::store::{SqliteStore, Store, StoreError};
use crate::timefmt::{Millis, now_millis};
use crate::{log_error, log_info};
use crossbeam_channel::{Receiver, Sender, select_biased, unbounded};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// What a worker does.
pub enum Task {
    /// Carry a `pending` attempt to a spawned runner.
    Start {
        attempt: Attempt,
        policy: ScalePolicy,
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
    ReadDemand { repos: OrgRepos, any_public: bool },
    /// Read GitHub's runner list, deleting registrations with this host's names that
    /// no open attempt explains.
    ListRunners { host_id: String },
}

impl Task {
    /// The attempt the task holds, if any.
    pub fn attempt(&self) -> Option<i64> {
        match self {
            Task::Start { attempt, .. } | Task::Apply { attempt, .. } => Some(attempt.id),
            Task::ReadDemand { .. } | Task::ListRunners { .. } => None,
        }
    }

    fn urgent(&self) -> bool {
        matches!(self, Task::Apply { .. })
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
    },
    Runners {
        result: Result<Vec<RegisteredRunner>, GhError>,
    },
    /// The store refused a write: the attempt is left as the store has it.
    Failed {
        attempt: Option<i64>,
        error: String,
    },
}

/// A demand read's result.
pub struct DemandRead {
    pub jobs: Vec<QueuedJob>,
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
    urgent: Sender<Work>,
    normal: Sender<Work>,
    urgent_rx: Receiver<Work>,
    normal_rx: Receiver<Work>,
    done_tx: Sender<Done>,
    done: Receiver<Done>,
    threads: Vec<JoinHandle<()>>,
    common: Arc<Common>,
    /// Tasks sent and not yet reported done.
    outstanding: usize,
}

/// What every worker shares.
struct Common {
    shared: Arc<Shared>,
    /// Runner group ids by name (an organization's groups are looked up once).
    group_ids: Mutex<HashMap<String, i64>>,
    /// Set by [`IoPool::stop`]: starts still queued end `not_started`, cleanups still
    /// queued are left to the next pass of the next daemon.
    stopping: AtomicBool,
    /// Profiles whose starts the loop holds (after a host failure), until when: a
    /// start already queued for one ends `not_started` instead of failing the same way.
    held: Mutex<HashMap<String, Millis>>,
}

impl IoPool {
    /// Starts `workers` threads for `target`. A worker that cannot open the store
    /// reports nothing and ends; the others carry on.
    pub fn start(shared: &Arc<Shared>, target: &str, workers: usize) -> IoPool {
        let (urgent, urgent_rx) = unbounded::<Work>();
        let (normal, normal_rx) = unbounded::<Work>();
        let (done_tx, done) = unbounded::<Done>();
        let common = Arc::new(Common {
            shared: shared.clone(),
            group_ids: Mutex::new(HashMap::new()),
            stopping: AtomicBool::new(false),
            held: Mutex::new(HashMap::new()),
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
        };
        pool.ensure_workers(workers);
        pool
    }

    /// Starts workers until there are `n` (the target's `max_in_flight`; at least
    /// one). Never fewer: a lowered limit leaves extra workers waiting on the bound.
    pub fn ensure_workers(&mut self, n: usize) {
        while self.threads.len() < n.max(1) {
            let (u, w, d, c) = (
                self.urgent_rx.clone(),
                self.normal_rx.clone(),
                self.done_tx.clone(),
                self.common.clone(),
            );
            let name = format!("io:{}:{}", self.target, self.threads.len());
            match std::thread::Builder::new()
                .name(name)
                .spawn(move || worker(&c, &u, &w, &d))
            {
                Ok(t) => self.threads.push(t),
                Err(e) => {
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
        if q.send(work).is_ok() {
            self.outstanding += 1;
        }
    }

    /// Holds `profile`'s queued starts until `until` (see `Common::held`).
    pub fn hold_profile(&self, profile: &str, until: Millis) {
        self.common
            .held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(profile.to_string(), until);
    }

    /// The results, for the loop's `select!`.
    pub fn done(&self) -> &Receiver<Done> {
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

fn worker(c: &Common, urgent: &Receiver<Work>, normal: &Receiver<Work>, done: &Sender<Done>) {
    let store = match SqliteStore::open(&c.shared.state_dir) {
        Ok(s) => s,
        Err(e) => {
            log_error!("io_worker_store", error = e);
            return;
        }
    };
    loop {
        // Deregistrations and cleanups first; then anything. A queue that is closed
        // and empty is ready too, so the other is asked before giving up.
        let work = select_biased! {
            recv(urgent) -> w => w.ok(),
            recv(normal) -> w => w.ok(),
        };
        let Some(work) = work.or_else(|| urgent.try_recv().or_else(|_| normal.try_recv()).ok())
        else {
            if urgent.is_empty() && normal.is_empty() {
                return;
            }
            continue;
        };
        let result = if c.stopping.load(Ordering::SeqCst) {
            // The loop is gone: nothing to report to.
            let _ = wind_down(c, &store, work, "the daemon stopped");
            None
        } else if let Some(until) = held_until(c, &work.task) {
            let why = format!(
                "the profile's starts are held until {}",
                crate::timefmt::format_rfc3339(until)
            );
            wind_down(c, &store, work, &why).map(|attempt| Done::Started {
                attempt,
                outcome: Started::Skipped,
            })
        } else {
            run(c, &store, work, done)
        };
        if let Some(result) = result
            && done.send(result).is_err()
        {
            return;
        }
    }
}

/// A start that will not be tried: it ends `not_started` (its row says why; nothing
/// external was done) and comes back. Anything else is left for a later pass.
fn wind_down(c: &Common, store: &SqliteStore, work: Work, why: &str) -> Option<Attempt> {
    let Task::Start { mut attempt, .. } = work.task else {
        return None;
    };
    if attempt
        .end(
            crate::domain::Outcome::Failed,
            Some(crate::domain::Reason::message(
                crate::domain::ReasonKind::NotStarted,
                why,
            )),
            now_millis(),
        )
        .is_ok()
    {
        super::metrics_feed::ended(&c.shared.metrics, &attempt);
        if let Err(e) = store.save_attempt(&attempt) {
            log_error!("io_wind_down", attempt = attempt.id, error = e);
        }
    }
    Some(attempt)
}

/// Until when a start task's profile is held, if it is now.
fn held_until(c: &Common, task: &Task) -> Option<Millis> {
    let Task::Start { attempt, .. } = task else {
        return None;
    };
    let held = c.held.lock().unwrap_or_else(|p| p.into_inner());
    held.get(&attempt.profile)
        .copied()
        .filter(|until| *until > now_millis())
}

fn run(c: &Common, store: &SqliteStore, work: Work, done: &Sender<Done>) -> Option<Done> {
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
    Some(match task {
        Task::Start {
            mut attempt,
            policy,
            scaleset,
        } => {
            let mut groups = c
                .group_ids
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            let mut cx = StartCx {
                shared: &c.shared,
                store,
                client: &client,
                target: &target,
                policy: &policy,
                group_ids: &mut groups,
                now: now_millis(),
                scaleset: scaleset.as_ref().map(|(ss, id)| (ss.as_ref(), *id)),
            };
            let outcome = starter::start(&mut cx, &mut attempt);
            c.group_ids
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend(groups);
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
                store,
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
            mut repos,
            any_public,
        } => {
            let read_at = now_millis();
            let each_run = |run: i64, jobs: &[QueuedJob]| {
                let _ = done.send(Done::DemandRun {
                    run,
                    jobs: jobs.to_vec(),
                });
            };
            let result = read_demand(&client, &target, &mut repos, any_public, read_at, &each_run);
            Done::Demand {
                repos,
                read_at,
                result,
            }
        }
        Task::ListRunners { host_id } => Done::Runners {
            result: list_runners(&client, &target, store, &host_id),
        },
    })
}

/// The target's queued jobs. An organization's public repositories (and ones whose
/// visibility is not known yet) are not read unless a profile may serve them.
fn read_demand(
    client: &GitHubClient,
    target: &Target,
    repos: &mut OrgRepos,
    any_public: bool,
    now: Millis,
    each_run: &(dyn Fn(i64, &[QueuedJob]) + Sync),
) -> Result<DemandRead, GhError> {
    let is_repo = matches!(target.scope, crate::domain::TargetScope::Repo { .. });
    let mut not_polled = 0;
    let mut read = Vec::new();
    for (owner, repo) in repos.repos(client, target, now)? {
        let private = repos.public(&format!("{owner}/{repo}")) == Some(false);
        if !is_repo && !any_public && !private {
            not_polled += 1;
            continue;
        }
        read.push((owner, repo));
    }
    // Every repository's runs, and each run's jobs, read with the target's bound on
    // requests in flight.
    let jobs = client.queued_jobs_each(&read, each_run)?;
    Ok(DemandRead { jobs, not_polled })
}

/// GitHub's runner list; registrations with this host's names that no open attempt
/// explains are deleted (foreign ones never reach here).
fn list_runners(
    client: &GitHubClient,
    target: &Target,
    store: &SqliteStore,
    host_id: &str,
) -> Result<Vec<RegisteredRunner>, GhError> {
    let list = client.list_runners(&target.scope)?;
    let attempts = store.open_attempts(host_id).unwrap_or_default();
    for r in watch::unexplained_registrations(host_id, &list, &attempts) {
        let res = client.delete_runner(&target.scope, r.id);
        log_info!(
            "orphan_registration_deleted",
            target = target.name,
            runner = r.name,
            result = format!("{res:?}")
        );
    }
    Ok(list)
}
