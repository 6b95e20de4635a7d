//! One target's loop, on its own thread with its own GitHub client and pace. A pass
//! gathers one `reconcile::plan::Observed` snapshot, asks `reconcile::plan` what to
//! do, records the intents under the allocation lock, and acts: store writes and
//! signals inline, GitHub and disk work (starts, deregistrations, cleanups, demand
//! reads, the runner list) on the target's I/O workers (`io`), whose results come
//! back as messages. So watching runners never waits behind a start, a cleanup or a
//! demand read, however far GitHub is.

use super::actuator::{self, Ctx};
use super::contain::{self, UidBook};
use super::io::{Done, IoPool, Task};
use super::metrics_feed;
use super::observe::Observer;
use super::pool::TargetView;
use super::public_guard::PublicGuard;
use super::rest_queue::{RestQueue, Scope};
use super::scaleset_feed::ScaleSetFeed;
use super::shared::{LoopMsg, Shared, lock};
use super::starter::{self, Started};
use super::status_writer::StatusWriter;
use crate::backoff::Jitter;
use crate::domain::{Attempt, Host, InEffect, RegisteredRunner, ScalePolicy, Target};
use crate::domain::{AttemptState, TargetScope};
use crate::github::etag::Cached;
use crate::github::{ErrorClass, GhError, GitHubClient, load_credential};
use crate::reconcile::budget::{self, Budget, Pace, ReadCost};
use crate::reconcile::hold::{Refusal, StartHold, TargetHold};
use crate::reconcile::launch_book::{TargetMode, is_directed};
use crate::reconcile::plan::{self, Fitness, Observed, Plan, Seen};
use crate::reconcile::watch;
use crate::runner;
use crate::store::{EtagChange, SqliteStore, Store, StoreError, StoredEtag, TargetStatus};
use crate::timefmt::{Millis, now_millis};
use crate::{log_debug, log_error, log_info, log_warn};
use crossbeam_channel::{Receiver, select, tick};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Duration;

/// How often a loop looks at its runners between other reasons to.
pub const OBSERVE_EVERY: Duration = Duration::from_millis(plan::OBSERVE_EVERY as u64);
/// How often GitHub's runner list is read to cross-check and to find orphans.
const RUNNER_LIST_EVERY: Millis = 60_000;

/// What a pass reads first: the host, the target, its profiles and its mode.
struct Setting {
    host: Host,
    target: Target,
    profiles: Vec<ScalePolicy>,
    mode: TargetMode,
}

/// GitHub's runner list: read every minute on a worker, judged once when it comes.
#[derive(Default)]
struct RunnerList {
    next: Millis,
    reading: bool,
    fresh: Option<Vec<RegisteredRunner>>,
}

/// Lines of one failure that repeats pass after pass, at most so many a window.
const REPEATED_LINES: u32 = 3;
const REPEATED_WINDOW: std::time::Duration = std::time::Duration::from_secs(60);

pub struct TargetLoop {
    name: String,
    shared: Arc<Shared>,
    store: SqliteStore,
    client: Option<Arc<GitHubClient>>,
    shutdown_rx: Receiver<()>,
    io: IoPool,
    /// Attempts a worker holds: the loop does not watch them until it reports.
    in_flight: BTreeSet<i64>,
    observer: Observer,
    queue: RestQueue,
    runners: RunnerList,
    hold: TargetHold,
    /// The hold last written to the store (see `persist_hold`).
    persisted_hold: Millis,
    last_error: Option<String>,
    guard: PublicGuard,
    /// Profiles whose starts are held after a host failure, by name.
    holds: BTreeMap<String, StartHold>,
    surplus: HashSet<i64>,
    uids: UidBook,
    uids_used_up: Option<String>,
    /// Each profile's broken runner install as last logged, so it is logged once when
    /// it breaks (and once when it is whole again), not every pass.
    install_logged: BTreeMap<String, String>,
    status: StatusWriter,
    /// The store write of a pass that last failed (a full disk: SQLITE_FULL), so it
    /// is logged when it fails and when writes work again, not every pass.
    write_failing: Option<String>,
    /// Whether a store write of this pass failed.
    write_failed_now: bool,
    /// Bounds the lines of failures that repeat pass after pass (issue 33: a full
    /// disk logged `store_write_failed` about 4.6 times a second).
    repeats: crate::logging::Repeats,
    /// The listeners of this target's `demand=scaleset` profiles and what they saw.
    scaleset: ScaleSetFeed,
    jitter: Jitter,
    /// What a read of the queue costs, for the budget governor.
    read_cost: ReadCost,
    /// How often the queue is read now (the governor's last word).
    pace: Option<Pace>,
    /// The last plan had room beyond the jobs known (a profile polling the queue
    /// limited by its demand): runs left unread are worth reading before the pace.
    room_left: bool,
}

impl TargetLoop {
    pub fn new(
        name: String,
        shared: Arc<Shared>,
        shutdown_rx: Receiver<()>,
    ) -> Result<TargetLoop, StoreError> {
        let store = SqliteStore::open(&shared.state_dir)?;
        let workers = store
            .target(&name)
            .map(|t| t.max_in_flight as usize)
            .unwrap_or(crate::domain::target::DEFAULT_MAX_IN_FLIGHT as usize);
        let seed = now_millis() as u64 ^ (std::process::id() as u64) << 17 ^ name.len() as u64;
        Ok(TargetLoop {
            scaleset: ScaleSetFeed::new(&name),
            io: IoPool::start(&shared, &name, workers),
            name,
            shared,
            store,
            client: None,
            shutdown_rx,
            in_flight: BTreeSet::new(),
            observer: Observer::default(),
            queue: RestQueue::default(),
            runners: RunnerList::default(),
            hold: TargetHold::default(),
            persisted_hold: 0,
            last_error: None,
            guard: PublicGuard::default(),
            holds: BTreeMap::new(),
            surplus: HashSet::new(),
            uids: UidBook::default(),
            uids_used_up: None,
            install_logged: BTreeMap::new(),
            status: StatusWriter::default(),
            write_failing: None,
            write_failed_now: false,
            repeats: crate::logging::Repeats::new(REPEATED_LINES, REPEATED_WINDOW),
            jitter: Jitter::seeded(seed),
            read_cost: ReadCost::default(),
            pace: None,
            room_left: false,
        })
    }

    /// The thread body: a pass on every tick, message or worker result until told to
    /// stop. `once` runs passes until the demand read and the starts it led to are
    /// done, then returns the target's error if its last pass ended with one
    /// (credentials, GitHub's refusal), so `daemon --once` can fail. Either way the
    /// workers finish what they hold first.
    pub fn run(mut self, inbox: Receiver<LoopMsg>, once: bool) -> Option<String> {
        let ticker = tick(OBSERVE_EVERY);
        let done = self.io.done().clone();
        metrics_feed::passed(&self.shared, &self.name);
        if once {
            // A pass sends the demand read; the next allocates from it and sends the
            // starts; the last records how they went.
            for _ in 0..3 {
                self.pass_logged();
                while self.io.outstanding() > 0 {
                    match done.recv() {
                        Ok(d) => self.on_done(d),
                        Err(_) => break,
                    }
                }
            }
            self.io.stop();
            keep_etags(&self.store, &self.name, self.client.as_deref());
            return self.last_error.take();
        }
        loop {
            self.pass_logged();
            select! {
                recv(inbox) -> msg => match msg {
                    Ok(LoopMsg::Wake) => {}
                    Ok(LoopMsg::Reload) => {
                        self.scaleset.reset();
                        self.client = None;
                        self.queue.next_poll = 0;
                        self.hold = TargetHold::default();
                    }
                    Ok(LoopMsg::Stop) | Err(_) => break,
                },
                recv(done) -> d => if let Ok(d) = d {
                    self.on_done(d);
                },
                recv(ticker) -> _ => {}
            }
            // Whatever else the workers finished meanwhile, before the next pass.
            while let Ok(d) = done.try_recv() {
                self.on_done(d);
            }
        }
        self.close_sessions();
        self.io.stop();
        // After the workers: a read that ended meanwhile is kept too.
        keep_etags(&self.store, &self.name, self.client.as_deref());
        None
    }

    fn pass_logged(&mut self) {
        if let Err(e) = self.pass(now_millis()) {
            match self.repeats.admit("pass_failed", std::time::Instant::now()) {
                Some(0) => log_error!("pass_failed", target = self.name, error = e),
                Some(n) => {
                    log_error!("pass_failed", target = self.name, error = e, suppressed = n)
                }
                None => {}
            }
        }
        metrics_feed::passed(&self.shared, &self.name);
    }

    /// Gather, plan, record, act.
    fn pass(&mut self, now: Millis) -> Result<(), StoreError> {
        let failed_before = self.write_failing.is_some();
        self.write_failed_now = false;
        let Some(set) = self.settle(now)? else {
            return Ok(());
        };
        let contain = self.shared.containment();
        let (open, seen) = self.gather(&set, &contain, now)?;
        let unfit = self.unfit(&set.target, &set.profiles, &contain, now);
        let (plan, intents) = self.plan_and_record(&set, &seen, &unfit, &contain, now)?;
        self.note_plan(&plan, &set, now);

        // Act: each attempt's actions (the GitHub and disk part on a worker), then
        // the starts.
        self.act(&set.target, &set.profiles, &open, &seen, plan.actions, now)?;
        for a in intents {
            self.send_start(&set.target, &set.profiles, a, now)?;
        }
        self.persist_hold(now)?;
        if !self.write_failed_now {
            if failed_before {
                log_info!("store_writes_recovered", target = self.name);
            }
            self.write_failing = None;
        }
        Ok(())
    }

    /// Reads what the pass works from and follows the target's settings (the bound
    /// on requests in flight, the client, the scale set listeners); `None` when the
    /// target is gone.
    fn settle(&mut self, now: Millis) -> Result<Option<Setting>, StoreError> {
        let host = self.store.host_or_create()?;
        let target = match self.store.target(&self.name) {
            Ok(t) => t,
            Err(StoreError::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let profiles: Vec<ScalePolicy> = self
            .store
            .profiles()?
            .into_iter()
            .filter(|p| p.target == self.name)
            .collect();
        // The bound on requests in flight follows the target's setting at once; the
        // workers may grow to it as tasks come.
        self.scaleset.in_flight().set_limit(target.max_in_flight);
        self.io.set_limit(target.max_in_flight as usize);
        self.ensure_client(&target, now);
        let mode = self.shared.pool.mode(&self.name, now);
        self.scaleset
            .sync(&target, &profiles, &host, mode, &self.shared);
        Ok(Some(Setting {
            host,
            target,
            profiles,
            mode,
        }))
    }

    /// Gather: send the reads that are due, refresh the guard's facts, look at each
    /// attempt no worker holds, take what the scale set listeners handed over.
    /// Returns the open attempts and what was seen of each live one.
    fn gather(
        &mut self,
        set: &Setting,
        contain: &contain::Containment,
        now: Millis,
    ) -> Result<(Vec<Attempt>, BTreeMap<i64, Seen>), StoreError> {
        self.send_reads(&set.target, &set.host, &set.profiles, set.mode, now);
        self.refresh_guard(&set.target, &set.profiles, now);
        self.check_runner_release(&set.target, now);
        let mut open = self.store.open_attempts(&set.host.id)?;
        self.recover_pids(&mut open)?;
        let fresh_list = self.runners.fresh.take();
        let mut seen: BTreeMap<i64, Seen> = BTreeMap::new();
        for a in open
            .iter()
            .filter(|a| a.target == self.name && a.state.is_live())
            .filter(|a| !self.in_flight.contains(&a.id))
        {
            let s = self
                .observer
                .see(&self.shared.state_dir, a, fresh_list.as_deref(), contain);
            seen.insert(a.id, s);
        }
        self.scaleset.take();
        Ok((open, seen))
    }

    /// Plan and record under the allocation lock, so two loops (or a loop and a
    /// coordinator launch) never spend one slot of capacity or one uid. Returns the
    /// plan and the intents recorded.
    fn plan_and_record(
        &mut self,
        set: &Setting,
        seen: &BTreeMap<i64, Seen>,
        unfit: &BTreeMap<String, String>,
        contain: &contain::Containment,
        now: Millis,
    ) -> Result<(Plan, Vec<Attempt>), StoreError> {
        let draining = set.host.draining || self.shared.stopping();
        let can_start = self.client.is_some() && !self.hold.holds(now);
        let shared = self.shared.clone();
        let _guard = lock(&shared.alloc_lock);
        let host = self.store.host_or_create()?;
        let open = self.store.open_attempts(&host.id)?;
        let free_uids = match &contain.isolation {
            InEffect::Uids(range) if can_start => {
                Some(self.uids.free(*range, &open, host.capacity as usize, now))
            }
            _ => None,
        };
        let ended = self.queue.ended_since_read();
        let jobs = if all_directed(&host, &set.profiles, set.mode) {
            Vec::new()
        } else {
            self.queue.jobs.clone()
        };
        let scaleset_seen = self.scaleset.seen();
        let scaleset_queued = self.scaleset.queued();
        let observed = Observed {
            target: &self.name,
            host: &host,
            profiles: &set.profiles,
            open: &open,
            seen,
            in_flight: &self.in_flight,
            mode: set.mode,
            draining,
            jobs: &jobs,
            queue_read_at: self.queue.read_at,
            ended_since_read: &ended,
            scaleset: &scaleset_seen,
            scaleset_queued: &scaleset_queued,
            unfit,
            can_start,
            rate_limited_until: self.rate_limited_until(now),
            free_uids: free_uids.as_deref(),
            surplus: &self.surplus,
        };
        let mut book = lock(&shared.pool.book);
        let plan = plan::plan(&observed, &mut book, now);
        // An intent that cannot be written is a start that does not happen; the
        // pass still watches and cleans.
        let (intents, failed) = self.record(&host, &plan, &mut book, now);
        self.wrote("intents", failed.map_or(Ok(()), Err));
        drop(book);
        shared.pool.set_view(
            &self.name,
            TargetView {
                unfit: unfit.clone(),
                demand: plan.standalone.clone(),
            },
        );
        Ok((plan, intents))
    }

    /// What the plan leaves for later passes (surplus, room, uids), the status rows
    /// and the metrics; the scale set messages it acted on are acknowledged.
    fn note_plan(&mut self, plan: &Plan, set: &Setting, now: Millis) {
        self.surplus = plan.surplus.clone();
        self.room_left = plan.allocation.profiles.iter().any(|pa| {
            pa.limit == crate::domain::Limit::Demand
                && set
                    .profiles
                    .iter()
                    .any(|p| p.name == pa.profile && p.demand == crate::domain::DemandSource::Poll)
        });
        self.uids_used_up = plan.uids_used_up.clone();
        let status = self.record_status(plan, &set.profiles, set.mode, now);
        self.wrote("status", status);
        metrics_feed::demand(&self.shared.metrics, &plan.allocation);
        metrics_feed::target(
            &self.shared.metrics,
            &self.name,
            self.client.as_deref(),
            self.pace.map(|p| p.every),
        );
        self.scaleset.handed_over();
    }

    /// Notes a store write of the pass: a failure is logged when it first fails (or
    /// fails differently), and the pass goes on.
    fn wrote(&mut self, what: &str, r: Result<(), StoreError>) {
        if let Err(e) = r {
            self.write_failed_now = true;
            let msg = format!("{what}: {e}");
            // Writes of one pass may fail in turn with different words: the repeats
            // bound what the change of words lets through.
            if self.write_failing.as_deref() != Some(msg.as_str()) {
                match self
                    .repeats
                    .admit("store_write_failed", std::time::Instant::now())
                {
                    Some(0) => log_warn!("store_write_failed", target = self.name, error = msg),
                    Some(n) => log_warn!(
                        "store_write_failed",
                        target = self.name,
                        error = msg,
                        suppressed = n
                    ),
                    None => {}
                }
            }
            self.write_failing = Some(msg);
        }
    }

    /// A runner spawned by a daemon killed before it recorded the pid: found through
    /// the pid its own process wrote (`runner::attempt_pid_file`), and recorded now,
    /// so it is watched like any other instead of taken for gone while it runs a job.
    fn recover_pids(&self, open: &mut [Attempt]) -> Result<(), StoreError> {
        for a in open.iter_mut().filter(|a| {
            a.target == self.name
                && a.state == AttemptState::Starting
                && a.pid.is_none()
                && !self.in_flight.contains(&a.id)
        }) {
            let file = runner::attempt_pid_file(&self.shared.state_dir, a.id);
            let since = watch::entered_at(a, AttemptState::Starting);
            if let Some((pid, start)) = runner::proc::recover_runner(&file, since) {
                log_info!("runner_recovered", attempt = a.id, pid = pid);
                a.pid = Some(pid);
                a.pid_start = Some(start);
                self.store.save_attempt(a)?;
            }
        }
        Ok(())
    }

    /// Records what the plan decided before anything external happens: launches
    /// bound to free runners, and a `pending` row per intent (with its uid and lease).
    fn record(
        &self,
        host: &Host,
        plan: &Plan,
        book: &mut crate::reconcile::LaunchBook,
        now: Millis,
    ) -> (Vec<Attempt>, Option<StoreError>) {
        let mut out = Vec::with_capacity(plan.intents.len());
        match self.record_into(host, plan, book, now, &mut out) {
            Ok(()) => (out, None),
            Err(e) => (out, Some(e)),
        }
    }

    /// [`Self::record`]'s writes, each intent recorded pushed to `out` as it is, so a
    /// failed write leaves the ones before it to be started.
    fn record_into(
        &self,
        host: &Host,
        plan: &Plan,
        book: &mut crate::reconcile::LaunchBook,
        now: Millis,
        out: &mut Vec<Attempt>,
    ) -> Result<(), StoreError> {
        for c in &plan.closed {
            log_info!(
                "launch_closed",
                lease = c.launch.launch.lease_id,
                why = format!("{:?}", c.why)
            );
        }
        for (lease, id) in &plan.bindings {
            if let Ok(mut a) = self.store.attempt(*id) {
                a.lease_id = Some(lease.clone());
                self.store.save_attempt(&a)?;
            }
        }
        // Whether each start keeps its slot's `_work`, recorded with its intent so its
        // cleanup knows whatever the profile says by then.
        let scope = self.store.target(&self.name).ok().map(|t| t.scope);
        for i in &plan.intents {
            let keeps_work = match (&scope, self.store.profile(&i.profile)) {
                (Some(scope), Ok(p)) => crate::domain::workspace::keeps_work(&p, scope),
                _ => false,
            };
            let mut a = starter::record_intent(
                &self.store,
                host,
                &i.profile,
                &self.name,
                i.queued_at,
                i.runner_ids,
                keeps_work,
                now,
            )?;
            if let Some(lease) = book.bind_next(&self.name, &i.profile, a.id) {
                a.lease_id = Some(lease);
                self.store.save_attempt(&a)?;
            }
            out.push(a);
        }
        Ok(())
    }

    /// Carries out the plan's actions: up to the first that needs GitHub or the disk
    /// inline (state changes, signals), the rest on a worker.
    fn act(
        &mut self,
        target: &Target,
        profiles: &[ScalePolicy],
        open: &[Attempt],
        seen: &BTreeMap<i64, Seen>,
        actions: Vec<(i64, Vec<crate::reconcile::Action>)>,
        now: Millis,
    ) -> Result<(), StoreError> {
        let mut acted: BTreeSet<i64> = BTreeSet::new();
        for (id, actions) in actions {
            let Some(mut a) = open.iter().find(|a| a.id == id).cloned() else {
                continue;
            };
            acted.insert(id);
            note_exit(&mut a, seen.get(&id));
            let (inline, rest) = plan::split_at_io(actions);
            let timeouts = plan::timeouts_of(profiles, &a.profile);
            let scaleset = self.scaleset.client(&a.profile);
            let jitter = self.jitter.draw();
            let cx = Ctx {
                shared: &self.shared,
                store: &self.store,
                client: self.client.as_deref(),
                scope: &target.scope,
                timeouts,
                jitter,
                now,
                scaleset: scaleset.as_deref(),
            };
            if let Err(e) = actuator::apply(&cx, &mut a, inline) {
                // Not recorded (a full disk): the rest waits for a pass that can
                // record it, and the other attempts are still acted on.
                self.wrote("attempt", Err(e));
                continue;
            }
            // Before any worker reports: an attempt that just ended with a job must
            // keep that job out of a queue read before it took it, from the next pass.
            self.after_attempt(&a);
            if rest.is_empty() {
                continue;
            }
            let Some(client) = self.client.clone() else {
                // No client: nothing on GitHub can be done; the next pass decides again.
                continue;
            };
            self.in_flight.insert(a.id);
            self.io.send(
                Task::Apply {
                    attempt: a,
                    actions: rest,
                    timeouts,
                    scaleset,
                    jitter,
                },
                client,
                target,
            );
        }
        // An exit code is known only to the parent that reaps it, once: keep it even
        // when nothing else was decided this pass.
        for (id, s) in seen {
            if acted.contains(id) {
                continue;
            }
            if let Some(mut a) = open.iter().find(|a| a.id == *id).cloned()
                && note_exit(&mut a, Some(s))
            {
                self.store.save_attempt(&a)?;
            }
        }
        Ok(())
    }

    /// What the loop remembers of an attempt after acting on it.
    fn after_attempt(&mut self, a: &Attempt) {
        super::runner_update::note_attempt(&self.shared, a);
        if a.cleaned {
            self.observer.forget(a.id);
        }
        self.queue.note(a);
    }

    /// Hands a recorded intent to a worker, or ends it when nothing can start it now.
    fn send_start(
        &mut self,
        target: &Target,
        profiles: &[ScalePolicy],
        mut a: Attempt,
        now: Millis,
    ) -> Result<(), StoreError> {
        let policy = profiles.iter().find(|p| p.name == a.profile);
        let (Some(policy), Some(client)) = (policy, self.client.clone()) else {
            let _ = a.end(
                crate::domain::Outcome::Failed,
                Some(crate::domain::Reason::message(
                    crate::domain::ReasonKind::NotStarted,
                    "no GitHub client",
                )),
                now,
            );
            metrics_feed::ended(&self.shared.metrics, &a);
            return self.store.save_attempt(&a);
        };
        let scaleset = self
            .scaleset
            .launcher(&a.profile)
            .map(|(c, id)| (c.clone(), id));
        self.in_flight.insert(a.id);
        self.io.send(
            Task::Start {
                attempt: a,
                policy: Box::new(policy.clone()),
                scaleset,
            },
            client,
            target,
        );
        Ok(())
    }

    /// A worker's result.
    fn on_done(&mut self, d: Done) {
        if let Done::DemandRun { run, jobs } = d {
            // Part of a read still going on: not the end of a task.
            let profiles = self.org_profiles();
            self.queue.take_run(run, jobs, scope(&profiles));
            return;
        }
        self.io.received();
        let now = now_millis();
        match d {
            Done::DemandRun { .. } => {}
            Done::Started { attempt, outcome } => {
                self.in_flight.remove(&attempt.id);
                match outcome {
                    Started::Spawned => {
                        if self.holds.remove(&attempt.profile).is_some() {
                            metrics_feed::start_held(&self.shared.metrics, &attempt.profile, false);
                        }
                    }
                    Started::GitHub(e) => self.note_error(&e, now),
                    Started::Host(why) => self.hold_profile(&attempt.profile, why, now),
                    Started::Skipped => {}
                }
                self.after_attempt(&attempt);
            }
            Done::Applied { attempt } => {
                self.in_flight.remove(&attempt.id);
                self.after_attempt(&attempt);
            }
            Done::Demand {
                repos,
                read_at,
                result,
                units,
            } => {
                self.queue.end_read(repos);
                // A new run's first read is part of what its jobs cost (like their JIT
                // configs); polling is the rest: the runs lists and re-reads of runs
                // that changed. That is what the governor paces.
                let first_reads = result.as_ref().map_or(0, |r| r.read.new_runs as u64);
                if let Ok(r) = &result
                    && r.read.failed_runs > 0
                {
                    log_warn!(
                        "queue_read_failed_in_part",
                        target = self.name,
                        failed_runs = r.read.failed_runs
                    );
                }
                self.read_cost.observe(units.saturating_sub(first_reads));
                self.persist_etags();
                match result {
                    Ok(read) => self.take_queue(read, read_at),
                    Err(e) => self.note_error(&e, now),
                }
            }
            Done::Runners { result } => {
                self.runners.reading = false;
                match result {
                    Ok(list) => self.runners.fresh = Some(list),
                    Err(e) => self.note_error(&e, now),
                }
            }
            Done::RunnerRelease => self.persist_etags(),
            Done::Failed { attempt, error } => {
                if let Some(id) = attempt {
                    self.in_flight.remove(&id);
                }
                log_error!("io_failed", target = self.name, error = error);
            }
        }
    }

    /// A profile's start failed for a host reason: hold its starts. Starts that fail
    /// together while a hold already stands (sent before it) do not lengthen it.
    fn hold_profile(&mut self, profile: &str, why: String, now: Millis) {
        let prev = self.holds.get(profile);
        if prev.is_some_and(|h| h.holds(now)) {
            return;
        }
        let hold = StartHold::after_failure(prev, why, now);
        log_warn!(
            "starts_held",
            target = self.name,
            profile = profile,
            failures = hold.failures,
            until = crate::timefmt::format_rfc3339(hold.until),
            reason = hold.reason
        );
        metrics_feed::start_held(&self.shared.metrics, profile, true);
        self.io.hold_profile(profile, hold.until);
        self.holds.insert(profile.to_string(), hold);
    }

    /// A demand read came back: its jobs become the queue (what it did not read again
    /// keeps its earlier view), and its time the queue's.
    fn take_queue(&mut self, read: super::io::DemandRead, read_at: Millis) {
        let profiles = self.org_profiles();
        if read.read.unread_runs > 0 || !read.read.whole() {
            // A deep queue: what was read fills the room; the rest waits (issue 20).
            log_debug!(
                "queue_read_in_part",
                target = self.name,
                unread_runs = read.read.unread_runs,
                whole = read.read.whole()
            );
        }
        self.queue
            .take_read(read.read, read.not_polled, read_at, scope(&profiles));
        self.hold = self.hold.recovered();
        if self.last_error.take().is_some() {
            log_info!("target_recovered", target = self.name);
        }
    }

    /// The target's profiles if it is an organization (whose jobs are judged for
    /// visibility), `None` for a repository.
    fn org_profiles(&self) -> Option<Vec<ScalePolicy>> {
        let org = self
            .store
            .target(&self.name)
            .is_ok_and(|t| matches!(t.scope, TargetScope::Org { .. }));
        org.then(|| {
            self.store
                .profiles()
                .unwrap_or_default()
                .into_iter()
                .filter(|p| p.target == self.name)
                .collect()
        })
    }

    /// Sends the demand read and the runner list read when they are due and none is
    /// on a worker already.
    fn send_reads(
        &mut self,
        target: &Target,
        host: &Host,
        profiles: &[ScalePolicy],
        mode: TargetMode,
        now: Millis,
    ) {
        let Some(client) = self.client.clone() else {
            return;
        };
        // One read at a time (the queue, the runner list, the guard's facts): when
        // GitHub answers one with a rate limit, no other is already on its way.
        if self.hold.holds(now) || self.queue.reading || self.runners.reading {
            return;
        }
        if now >= self.runners.next {
            self.runners.next = now + RUNNER_LIST_EVERY;
            self.runners.reading = true;
            self.io.send(
                Task::ListRunners {
                    host_id: host.id.clone(),
                },
                client.clone(),
                target,
            );
        }
        // Runs a deep queue's last read left unread are read as soon as there is room
        // for their jobs, at most once per poll_interval, unless the budget governor
        // is stretching the reads: what that costs is their first read, which serving
        // them needs anyway, and the run lists again.
        let base = (target.poll_interval_secs as Millis) * 1000;
        let paced = self.pace.is_some_and(|p| p.stretched);
        let more_room = self.queue.unread_runs > 0
            && self.room_left
            && !paced
            && now >= self.queue.read_at + base;
        if self.runners.reading || (now < self.queue.next_poll && !more_room) {
            return;
        }
        // A coordinated target whose profiles are all directed reads no demand of
        // its own (the coordinator reads the queue once for the pool); one whose
        // profiles all use scale sets reads no REST queue, and a scale set's long
        // poll costs no units: neither is paced.
        if all_directed(host, profiles, mode) || !plan::needs_rest_demand(profiles) {
            self.pace = None;
            self.queue.next_poll = now + (target.poll_interval_secs as Millis) * 1000;
            self.queue.empty_at(now);
            return;
        }
        let pace = self.pace_reads(&client, target, profiles, now);
        if pace.stretched && !self.pace.is_some_and(|p| p.stretched) {
            log_info!(
                "polling_paced",
                target = self.name,
                every_ms = pace.every,
                remaining = client.rate_limit_snapshot().remaining.unwrap_or(0)
            );
        }
        self.pace = Some(pace);
        self.queue.next_poll = now + pace.every;
        let repos = self.queue.begin_read();
        self.io.send(
            Task::ReadDemand {
                repos,
                any_public: profiles.iter().any(|p| p.allow_public),
                caps: (
                    budget::new_runs_per_read(polled_max(profiles)),
                    budget::known_runs_per_read(polled_max(profiles)),
                ),
                held: self.queue.held_runs(),
            },
            client,
            target,
        );
    }

    /// How often to read the queue so the credential's budget lasts to its reset,
    /// keeping back what serving the queue needs (see `reconcile::budget`).
    fn pace_reads(
        &self,
        client: &GitHubClient,
        target: &Target,
        profiles: &[ScalePolicy],
        now: Millis,
    ) -> Pace {
        let rate = client.rate_limit_snapshot();
        let b = match (rate.limit, rate.remaining, rate.reset) {
            (Some(limit), Some(remaining), Some(reset)) => Some(Budget {
                limit,
                remaining,
                reset,
            }),
            _ => None,
        };
        let max = polled_max(profiles);
        let reserve = b.map_or(0, |b| {
            budget::reserve(max, self.queue.jobs.len() as u64, b.limit)
        });
        let base = (target.poll_interval_secs as Millis) * 1000;
        budget::pace(base, b, reserve, self.read_cost, now)
    }

    /// Writes what changed in the client's conditional-request cache to the store, so
    /// the next daemon's first poll is answered with 304s (issue 20). A failed write
    /// costs only that: the entries are written again when they change.
    fn persist_etags(&self) {
        keep_etags(&self.store, &self.name, self.client.as_deref());
    }

    /// Hands the host's runner install check to a worker when it is due and no other
    /// loop holds it (`runner_update`); not while GitHub holds this target.
    fn check_runner_release(&mut self, target: &Target, now: Millis) {
        let Some(client) = self.client.clone() else {
            return;
        };
        if self.hold.holds(now) {
            return;
        }
        if let Some(job) = self.shared.runner_update.claim(now) {
            self.io.send(Task::RunnerRelease { job }, client, target);
        }
    }

    /// Refreshes the public-repository guard's facts when due (at most hourly).
    fn refresh_guard(&mut self, target: &Target, profiles: &[ScalePolicy], now: Millis) {
        let Some(client) = self.client.clone() else {
            return;
        };
        if self.hold.holds(now) || self.queue.reading || self.runners.reading {
            return;
        }
        if let Err(e) = self.guard.refresh(&client, target, profiles, now) {
            self.note_error(&e, now);
        }
    }

    /// Profiles that cannot start runners now, with the reason `status` shows.
    fn unfit(
        &mut self,
        target: &Target,
        profiles: &[ScalePolicy],
        contain: &contain::Containment,
        now: Millis,
    ) -> BTreeMap<String, String> {
        // An `oci` profile's runner install is in its image, not on the host.
        let install_errors: BTreeMap<String, String> = profiles
            .iter()
            .filter(|p| p.execution != crate::domain::Execution::Oci)
            .filter_map(|p| {
                runner::check_install(&starter::runner_dir(&self.shared.state_dir, p))
                    .err()
                    .map(|e| (p.name.clone(), e.to_string()))
            })
            .collect();
        self.log_install_changes(&install_errors, profiles);
        let mut scaleset_unready = BTreeMap::new();
        self.scaleset.add_unfit(profiles, &mut scaleset_unready);
        let refused = match &contain.isolation {
            InEffect::Refused { why } => Some(why.as_str()),
            _ => None,
        };
        let no_client = self.client.is_none().then(|| {
            self.last_error
                .clone()
                .unwrap_or_else(|| "no credentials".into())
        });
        for (p, h) in &self.holds {
            if !h.holds(now) {
                metrics_feed::start_held(&self.shared.metrics, p, false);
            }
        }
        let disk_full = self.shared.disk_reason();
        let mut host_unfit = self.shared.fitness_reasons();
        super::oci::add_unjudged(&self.shared, profiles, &mut host_unfit);
        plan::unfit(
            &Fitness {
                profiles,
                org: matches!(target.scope, TargetScope::Org { .. }),
                isolation_refused: refused,
                disk_full: disk_full.as_deref(),
                host_unfit: &host_unfit,
                holds: &self.holds,
                no_client: no_client.as_deref(),
                public_repo: self.guard.public_repo,
                group_public: &self.guard.group_public,
                install_errors: &install_errors,
                scaleset_unready: &scaleset_unready,
            },
            now,
        )
    }

    /// Logs a profile's runner install breaking (a warning naming what is missing) and
    /// being whole again, once each, however many passes see it.
    fn log_install_changes(&mut self, errors: &BTreeMap<String, String>, profiles: &[ScalePolicy]) {
        for (profile, why) in errors {
            if self.install_logged.get(profile) != Some(why) {
                log_warn!(
                    "runner_install_unusable",
                    target = self.name,
                    profile = profile,
                    error = why
                );
            }
        }
        for profile in self.install_logged.keys() {
            if !errors.contains_key(profile) && profiles.iter().any(|p| &p.name == profile) {
                log_info!(
                    "runner_install_usable",
                    target = self.name,
                    profile = profile
                );
            }
        }
        self.install_logged = errors.clone();
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
        if now < self.queue.next_poll && self.client.is_none() && self.last_error.is_some() {
            return;
        }
        match load_credential(&target.credential) {
            Ok(cred) => {
                let observer = metrics_feed::github_observer(&self.shared.metrics, &self.name);
                let client = GitHubClient::new(target, cred)
                    .with_shutdown(self.shutdown_rx.clone())
                    .with_observer(observer)
                    .with_shared_hold(self.scaleset.shared_hold())
                    .with_in_flight(self.scaleset.in_flight())
                    .with_hooks(self.shared.hooks.clone())
                    .with_etag_journal();
                // A retry-after or rate-limit reset recorded before a restart still holds.
                let hold = self
                    .store
                    .kv_get(&hold_key(&self.name))
                    .ok()
                    .flatten()
                    .and_then(|v| v.parse::<Millis>().ok())
                    .filter(|t| *t > now);
                // What the last daemon's reads were answered with: its first poll
                // costs 304s for whatever has not changed since.
                match self.store.etags(&self.name) {
                    Ok(kept) => client.seed_etags(kept.into_iter().map(|e| {
                        let entry = Cached {
                            etag: e.etag,
                            body: e.body,
                            link: e.link,
                        };
                        (e.url, entry)
                    })),
                    Err(e) => log_warn!("etags_not_read", target = self.name, error = e),
                }
                if let Some(t) = hold {
                    client.hold_until(t);
                    self.hold = self.hold.at_least(t);
                    self.queue.next_poll = self.queue.next_poll.max(t);
                    self.persisted_hold = t;
                }
                self.client = Some(Arc::new(client));
            }
            Err(e) => {
                self.client = None;
                self.set_error(format!("credentials: {e}"));
                self.queue.next_poll = now + (target.poll_interval_secs as Millis) * 1000;
            }
        }
    }

    fn set_error(&mut self, msg: String) {
        if self.last_error.as_deref() != Some(msg.as_str()) {
            log_warn!("target_error", target = self.name, error = msg);
        }
        self.last_error = Some(msg);
    }

    /// A GitHub error holds the target as its class says: a rate limit until its
    /// reset (durable at once: a kill right now must not forget the wait), a
    /// deterministic error with backoff.
    fn note_error(&mut self, e: &GhError, now: Millis) {
        let why = match e.class() {
            ErrorClass::RateLimitedUntil(until) => Refusal::RateLimitedUntil(until),
            ErrorClass::Deterministic => Refusal::Deterministic,
            ErrorClass::Transient => Refusal::Transient,
        };
        self.hold = self.hold.after(why, now);
        if let Refusal::RateLimitedUntil(until) = why {
            self.queue.next_poll = self.queue.next_poll.max(until);
            if until != self.persisted_hold
                && self
                    .store
                    .kv_put(&hold_key(&self.name), &until.to_string())
                    .is_ok()
            {
                self.persisted_hold = until;
            }
        }
        self.set_error(e.to_string());
    }

    /// Until when GitHub's rate limit (or a `retry-after`) holds the target, if it
    /// does now: the client's own, the credential's shared hold, or the loop's hold
    /// when no deterministic error made it.
    fn rate_limited_until(&self, now: Millis) -> Option<Millis> {
        let loop_hold = if self.hold.failures == 0 {
            self.hold.until
        } else {
            0
        };
        let until = self.credential_hold().max(loop_hold);
        (until > now).then_some(until)
    }

    /// Until when the credential is held: the client's own rate-limit hold, or the
    /// hold it shares with the scale set listeners (which may have met it).
    fn credential_hold(&self) -> Millis {
        self.client
            .as_ref()
            .and_then(|c| c.rate_limit_snapshot().limited_until)
            .unwrap_or(0)
            .max(self.scaleset.shared_hold().until())
    }

    /// Records the client's rate-limit hold in the store, so a daemon restarted while
    /// it lasts sends nothing before it ends either.
    fn persist_hold(&mut self, now: Millis) -> Result<(), StoreError> {
        let until = self.credential_hold().max(self.hold.until);
        if until > now && until != self.persisted_hold {
            self.store
                .kv_put(&hold_key(&self.name), &until.to_string())?;
            self.persisted_hold = until;
        }
        Ok(())
    }

    /// Writes what `status` and `top` show, when it changed.
    fn record_status(
        &mut self,
        plan: &Plan,
        profiles: &[ScalePolicy],
        mode: TargetMode,
        now: Millis,
    ) -> Result<(), StoreError> {
        let rate = self
            .client
            .as_ref()
            .map(|c| c.rate_limit_snapshot())
            .unwrap_or_default();
        let target = TargetStatus {
            target: self.name.clone(),
            mode: mode.into(),
            last_error: self.last_error.clone(),
            rate_limit_remaining: rate.remaining.map(|r| r as i64),
            rate_limit_limit: rate.limit.map(|r| r as i64),
            rate_limit_reset: rate.reset,
            poll_every_ms: self.pace.map(|p| p.every),
            updated_at: now,
        };
        let last_error = |profile: &str| {
            self.last_error
                .clone()
                .or_else(|| self.uids_used_up.clone())
                .or_else(|| self.queue.visibility_note.clone())
                .or_else(|| self.scaleset.error(profile))
                .or_else(|| plan.demand.unfit_reason_for(profile))
        };
        self.status
            .record(&self.store, &plan.allocation, target, last_error, now)?;
        // Every profile of the target, so a row outlives neither its listener nor a
        // switch back to REST polling.
        let names: Vec<&str> = profiles.iter().map(|p| p.name.as_str()).collect();
        self.status.record_sessions(
            &self.store,
            &self.name,
            &self.scaleset.sessions(),
            &names,
            now,
        )
    }

    /// Stops the scale set listeners (their sessions are deleted) and records their
    /// rows as closed, so `status` does not show a session the daemon gave up.
    fn close_sessions(&mut self) {
        let ended = self.scaleset.stop();
        if ended.is_empty() {
            return;
        }
        let now = now_millis();
        if let Err(e) = self
            .status
            .record_sessions(&self.store, &self.name, &ended, &[], now)
        {
            log_warn!("session_rows_not_written", target = self.name, error = e);
        }
    }
}

/// A coordinated target whose profiles are all directed reads no demand of its own.
fn all_directed(host: &Host, profiles: &[ScalePolicy], mode: TargetMode) -> bool {
    mode == TargetMode::Coordinated
        && profiles
            .iter()
            .filter(|p| p.host_id == host.id)
            .all(|p| is_directed(host, p, mode))
}

/// Keeps a reaped runner's exit code on its attempt (only the parent that reaps it
/// ever knows it). True when it was new.
fn note_exit(a: &mut Attempt, seen: Option<&Seen>) -> bool {
    if let Some(Seen {
        process: watch::ProcessStatus::Exited { code },
        ..
    }) = seen
        && a.exit_code.is_none()
    {
        a.exit_code = Some(*code);
        return true;
    }
    false
}

/// How the queue judges its jobs: by the organization's profiles, or not at all.
fn scope(org_profiles: &Option<Vec<ScalePolicy>>) -> Scope<'_> {
    match org_profiles {
        Some(p) => Scope::Org(p),
        None => Scope::Repo,
    }
}

/// The store key of a target's rate-limit hold.
fn hold_key(target: &str) -> String {
    format!("target:{target}:rate_limit_hold_until")
}

/// [`TargetLoop::persist_etags`], for `name`'s `client`.
fn keep_etags(store: &SqliteStore, name: &str, client: Option<&GitHubClient>) {
    let Some(client) = client else {
        return;
    };
    let changes: Vec<EtagChange> = client
        .take_etag_changes()
        .into_iter()
        .map(|(url, entry)| match entry {
            Some(c) => EtagChange::Put(StoredEtag {
                url,
                etag: c.etag,
                body: c.body,
                link: c.link,
            }),
            None => EtagChange::Gone(url),
        })
        .collect();
    if let Err(e) = store.save_etags(name, &changes) {
        log_warn!("etags_not_kept", target = name, error = e);
    }
}

/// How many runners the profiles that poll the REST queue may run at once.
fn polled_max(profiles: &[ScalePolicy]) -> u64 {
    profiles
        .iter()
        .filter(|p| p.demand == crate::domain::DemandSource::Poll)
        .map(|p| p.max_capacity as u64)
        .sum()
}
