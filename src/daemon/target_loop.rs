//! One target's loop, on its own thread with its own GitHub client and workers. It
//! only gathers, carries out and joins: what to read and when, GitHub's holds, the
//! profiles' start holds and what `status` shows are the pure pass's
//! (`reconcile::pass::TargetState::on_event`), and what to start, stop and clean is
//! `reconcile::plan`'s. A pass gathers one `Observed` snapshot, plans and records the
//! intents under the allocation lock, and acts: store writes and signals inline,
//! GitHub and disk work (starts, deregistrations, cleanups, demand reads, the runner
//! list, the guard's facts) on the target's I/O workers (`io`), whose results come
//! back as events. So watching runners never waits on GitHub, however far it is.

use super::actuator::{self, Ctx};
use super::contain::{self, UidBook};
use super::io::{Done, IoPool, Task};
use super::metrics_feed;
use super::observe::Observer;
use super::pool::TargetView;
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
use crate::reconcile::budget::Budget;
use crate::reconcile::hold::Refusal;
use crate::reconcile::launch_book::{TargetMode, is_directed};
use crate::reconcile::pass::{self, ClientFit, Effect, Event, Facts, Line, Outcome, Read};
use crate::reconcile::pass::{StartEnd, TargetError, TargetState};
use crate::reconcile::plan::{self, Fitness, Observed, Plan, Seen};
use crate::reconcile::watch;
use crate::runner;
use crate::store::{EtagChange, SqliteStore, Store, StoreError, StoredEtag, TargetStatus};
use crate::timefmt::{Millis, now_millis};
use crate::{log_debug, log_error, log_info, log_warn};
use crossbeam_channel::{Receiver, select, tick};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

/// How often a loop looks at its runners between other reasons to.
pub const OBSERVE_EVERY: Duration = Duration::from_millis(plan::OBSERVE_EVERY as u64);

/// What a pass reads first: the host, the target, its profiles and its mode.
struct Setting {
    host: Host,
    target: Target,
    profiles: Vec<ScalePolicy>,
    mode: TargetMode,
}

/// Lines of one failure that repeats pass after pass, at most so many a window.
const REPEATED_LINES: u32 = 3;
const REPEATED_WINDOW: std::time::Duration = std::time::Duration::from_secs(60);

/// The store writes of the loop's passes, as far as logging them goes.
struct Writes {
    /// The write of a pass that last failed (a full disk: SQLITE_FULL), so it is
    /// logged when it fails and when writes work again, not every pass.
    failing: Option<String>,
    /// Whether a write of this pass failed.
    failed_now: bool,
    /// Bounds the lines of failures that repeat pass after pass (issue 33: a full
    /// disk logged `store_write_failed` about 4.6 times a second).
    repeats: crate::logging::Repeats,
}

pub struct TargetLoop {
    name: String,
    shared: Arc<Shared>,
    store: SqliteStore,
    /// What the pass decides from (`reconcile::pass`).
    state: TargetState,
    client: Option<Arc<GitHubClient>>,
    shutdown_rx: Receiver<()>,
    io: IoPool,
    observer: Observer,
    /// The queued jobs as the demand reads brought them.
    queue: RestQueue,
    /// GitHub's runner list, as a read brought it, until a pass judges it.
    fresh_runners: Option<Vec<RegisteredRunner>>,
    uids: UidBook,
    status: StatusWriter,
    writes: Writes,
    /// The listeners of this target's `demand=scaleset` profiles and what they saw.
    scaleset: ScaleSetFeed,
    jitter: Jitter,
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
            state: TargetState::default(),
            client: None,
            shutdown_rx,
            observer: Observer::default(),
            queue: RestQueue::default(),
            fresh_runners: None,
            uids: UidBook::default(),
            status: StatusWriter::default(),
            writes: Writes {
                failing: None,
                failed_now: false,
                repeats: crate::logging::Repeats::new(REPEATED_LINES, REPEATED_WINDOW),
            },
            jitter: Jitter::seeded(seed),
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
            // A pass sends the guard's read, the next the demand read; the next
            // allocates from it and sends the starts; the last records how they went.
            for _ in 0..4 {
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
            return self.state.take_error().map(|e| e.to_string());
        }
        loop {
            self.pass_logged();
            select! {
                recv(inbox) -> msg => match msg {
                    Ok(LoopMsg::Wake) => {}
                    Ok(LoopMsg::Reload) => {
                        self.scaleset.reset();
                        let effects = self.state.on_event(Event::Reload, now_millis());
                        self.carry(effects, None, now_millis());
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
            match self
                .writes
                .repeats
                .admit("pass_failed", std::time::Instant::now())
            {
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
        let failed_before = self.writes.failing.is_some();
        self.writes.failed_now = false;
        let Some(set) = self.settle(now)? else {
            return Ok(());
        };
        let contain = self.shared.containment();
        let facts = self.facts(&set);
        let effects = self.state.on_event(Event::Tick(&facts), now);
        self.carry(effects, Some(&set), now);
        let (open, seen) = self.gather(&set, &contain)?;
        let unfit = self.unfit(&set.target, &set.profiles, &contain, now);
        let (plan, intents) = self.plan_and_record(&set, &seen, &unfit, &contain, now)?;
        self.note_plan(&plan, &set, now);

        // Act: each attempt's actions (the GitHub and disk part on a worker), then
        // the starts.
        self.act(&set.target, &set.profiles, &open, &seen, plan.actions, now)?;
        for a in intents {
            let has_policy = set.profiles.iter().any(|p| p.name == a.profile);
            let attempt = a.id;
            let effects = self.state.on_event(
                Event::Intent {
                    attempt,
                    has_policy,
                },
                now,
            );
            self.start_or_end(&set, a, effects, now)?;
        }
        let credential_hold = self.credential_hold();
        let effects = self.state.on_event(Event::PassEnd { credential_hold }, now);
        self.carry(effects, Some(&set), now);
        if !self.writes.failed_now {
            if failed_before {
                log_info!("store_writes_recovered", target = self.name);
            }
            self.writes.failing = None;
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
        let fit = if self
            .client
            .as_ref()
            .is_some_and(|c| c.base_url() == target.api_url && c.scope() == &target.scope)
        {
            ClientFit::Fits
        } else {
            self.client = None;
            ClientFit::Missing
        };
        let poll_every = poll_every(&target);
        let effects = self.state.on_event(Event::Client { fit, poll_every }, now);
        let mode = self.shared.pool.mode(&self.name, now);
        let set = Setting {
            host,
            target,
            profiles,
            mode,
        };
        self.carry(effects, Some(&set), now);
        self.scaleset
            .sync(&set.target, &set.profiles, &set.host, mode, &self.shared);
        Ok(Some(set))
    }

    /// The facts the pass's reads are decided from.
    fn facts(&self, set: &Setting) -> Facts {
        let rate = self
            .client
            .as_ref()
            .map(|c| c.rate_limit_snapshot())
            .unwrap_or_default();
        let budget = match (rate.limit, rate.remaining, rate.reset) {
            (Some(limit), Some(remaining), Some(reset)) => Some(Budget {
                limit,
                remaining,
                reset,
            }),
            _ => None,
        };
        Facts {
            poll_every: poll_every(&set.target),
            reads_queue: !all_directed(&set.host, &set.profiles, set.mode)
                && plan::needs_rest_demand(&set.profiles),
            budget,
            polled_max: polled_max(&set.profiles),
            queued: self.queue.jobs.len() as u64,
            unread_runs: self.queue.unread_runs,
            queue_read_at: self.queue.read_at,
            guard: super::public_guard::due_read(&set.target, &set.profiles),
        }
    }

    /// Carries out what the pass decided (a start's effects are `start_or_end`'s).
    fn carry(&mut self, effects: Vec<Effect>, set: Option<&Setting>, now: Millis) {
        for e in effects {
            match e {
                Effect::BuildClient => {
                    if let Some(set) = set {
                        self.build_client(&set.target, now);
                    }
                }
                Effect::DropClient => self.client = None,
                Effect::Send(read) => {
                    if let Some(set) = set {
                        self.send(read, set, now);
                    }
                }
                Effect::QueueEmpty => self.queue.empty_at(now),
                Effect::PersistHold(until) => {
                    let r = self.store.kv_put(&hold_key(&self.name), &until.to_string());
                    if r.is_ok() {
                        self.state.on_event(Event::HoldKept(until), now);
                    }
                    self.wrote("hold", r);
                }
                Effect::HoldStarts { profile, until } => {
                    metrics_feed::start_held(&self.shared.metrics, &profile, true);
                    self.io.hold_profile(&profile, until);
                }
                Effect::StartsResumed { profile } => {
                    metrics_feed::start_held(&self.shared.metrics, &profile, false);
                }
                Effect::Start(_) | Effect::EndNotStarted { .. } => {}
                Effect::Log(line) => self.log(line),
            }
        }
    }

    /// Hands a read to a worker.
    fn send(&mut self, read: Read, set: &Setting, now: Millis) {
        let Some(client) = self.client.clone() else {
            return;
        };
        let task = match read {
            Read::Runners => Task::ListRunners {
                host_id: set.host.id.clone(),
            },
            Read::Demand {
                new_runs,
                known_runs,
            } => Task::ReadDemand {
                repos: self.queue.begin_read(),
                any_public: set.profiles.iter().any(|p| p.allow_public),
                caps: (new_runs, known_runs),
                held: self.queue.held_runs(),
            },
            Read::Guard(read) => Task::Guard {
                read,
                profiles: set.profiles.clone(),
            },
            // No other loop holds the host's runner install check, and it is due.
            Read::RunnerRelease => match self.shared.runner_update.claim(now) {
                Some(job) => Task::RunnerRelease { job },
                None => return,
            },
        };
        self.io.send(task, client, &set.target);
    }

    fn log(&self, line: Line) {
        let target = &self.name;
        match line {
            Line::TargetError(error) => log_warn!("target_error", target = target, error = error),
            Line::TargetRecovered => log_info!("target_recovered", target = target),
            Line::PollingPaced { every, remaining } => log_info!(
                "polling_paced",
                target = target,
                every_ms = every,
                remaining = remaining
            ),
            Line::StartsHeld { profile, hold } => log_warn!(
                "starts_held",
                target = target,
                profile = profile,
                failures = hold.failures,
                until = crate::timefmt::format_rfc3339(hold.until),
                reason = hold.reason
            ),
            Line::InstallUnusable { profile, why } => log_warn!(
                "runner_install_unusable",
                target = target,
                profile = profile,
                error = why
            ),
            Line::InstallUsable { profile } => {
                log_info!("runner_install_usable", target = target, profile = profile)
            }
        }
    }

    /// Gather: look at each attempt no worker holds, take what the scale set
    /// listeners handed over. Returns the open attempts and what was seen of each
    /// live one.
    fn gather(
        &mut self,
        set: &Setting,
        contain: &contain::Containment,
    ) -> Result<(Vec<Attempt>, BTreeMap<i64, Seen>), StoreError> {
        let mut open = self.store.open_attempts(&set.host.id)?;
        self.recover_pids(&mut open)?;
        let fresh_list = self.fresh_runners.take();
        let mut seen: BTreeMap<i64, Seen> = BTreeMap::new();
        for a in open
            .iter()
            .filter(|a| a.target == self.name && a.state.is_live())
            .filter(|a| !self.state.in_flight().contains(&a.id))
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
        let can_start = self.state.can_start(now);
        let credential_hold = self.credential_hold();
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
            in_flight: self.state.in_flight(),
            mode: set.mode,
            draining,
            jobs: &jobs,
            queue_read_at: self.queue.read_at,
            ended_since_read: &ended,
            scaleset: &scaleset_seen,
            scaleset_queued: &scaleset_queued,
            unfit,
            can_start,
            rate_limited_until: self.state.rate_limited_until(credential_hold, now),
            free_uids: free_uids.as_deref(),
            surplus: self.state.surplus(),
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
        let room_left = plan.allocation.profiles.iter().any(|pa| {
            pa.limit == crate::domain::Limit::Demand
                && set
                    .profiles
                    .iter()
                    .any(|p| p.name == pa.profile && p.demand == crate::domain::DemandSource::Poll)
        });
        let planned = pass::Planned {
            surplus: plan.surplus.clone(),
            room_left,
            uids_used_up: plan.uids_used_up.clone(),
        };
        self.state.on_event(Event::Planned(planned), now);
        let status = self.record_status(plan, &set.profiles, set.mode, now);
        self.wrote("status", status);
        metrics_feed::demand(&self.shared.metrics, &plan.allocation);
        metrics_feed::target(
            &self.shared.metrics,
            &self.name,
            self.client.as_deref(),
            self.state.pace().map(|p| p.every),
        );
        self.scaleset.handed_over();
    }

    /// Notes a store write of the pass: a failure is logged when it first fails (or
    /// fails differently), and the pass goes on.
    fn wrote(&mut self, what: &str, r: Result<(), StoreError>) {
        if let Err(e) = r {
            self.writes.failed_now = true;
            let msg = format!("{what}: {e}");
            // Writes of one pass may fail in turn with different words: the repeats
            // bound what the change of words lets through.
            if self.writes.failing.as_deref() != Some(msg.as_str()) {
                match self
                    .writes
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
            self.writes.failing = Some(msg);
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
                && !self.state.in_flight().contains(&a.id)
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
            self.state.on_event(Event::Handed(a.id), now);
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

    /// Hands a recorded intent to a worker, or ends it, as the pass decided.
    fn start_or_end(
        &mut self,
        set: &Setting,
        mut a: Attempt,
        effects: Vec<Effect>,
        now: Millis,
    ) -> Result<(), StoreError> {
        for e in effects {
            match e {
                Effect::Start(_) => {
                    let policy = set.profiles.iter().find(|p| p.name == a.profile);
                    let (Some(policy), Some(client)) = (policy, self.client.clone()) else {
                        continue;
                    };
                    let scaleset = self
                        .scaleset
                        .launcher(&a.profile)
                        .map(|(c, id)| (c.clone(), id));
                    self.io.send(
                        Task::Start {
                            attempt: a,
                            policy: Box::new(policy.clone()),
                            scaleset,
                        },
                        client,
                        &set.target,
                    );
                    return Ok(());
                }
                Effect::EndNotStarted { why, .. } => {
                    let _ = a.end(
                        crate::domain::Outcome::Failed,
                        Some(crate::domain::Reason::message(
                            crate::domain::ReasonKind::NotStarted,
                            why,
                        )),
                        now,
                    );
                    metrics_feed::ended(&self.shared.metrics, &a);
                    return self.store.save_attempt(&a);
                }
                other => self.carry(vec![other], Some(set), now),
            }
        }
        Ok(())
    }

    /// A worker's result: what it brought is kept here (the queue, the runner list,
    /// the attempt), and what it means for the target is the pass's.
    fn on_done(&mut self, d: Done) {
        if let Done::DemandRun { run, jobs } = d {
            // Part of a read still going on: not the end of a task.
            let profiles = self.org_profiles();
            self.queue.take_run(run, jobs, scope(&profiles));
            return;
        }
        self.io.received();
        let now = now_millis();
        let outcome = match d {
            Done::DemandRun { .. } => return,
            Done::Started { attempt, outcome } => {
                self.after_attempt(&attempt);
                let end = match outcome {
                    Started::Spawned => StartEnd::Spawned,
                    Started::GitHub(e) => StartEnd::GitHub(target_error(&e)),
                    Started::Host(why) => StartEnd::Host(why),
                    Started::Skipped => StartEnd::Skipped,
                };
                Outcome::Started {
                    attempt: attempt.id,
                    profile: attempt.profile.clone(),
                    end,
                }
            }
            Done::Applied { attempt } => {
                self.after_attempt(&attempt);
                Outcome::Applied {
                    attempt: attempt.id,
                }
            }
            Done::Demand {
                repos,
                read_at,
                result,
                units,
            } => self.took_demand(repos, read_at, result, units),
            Done::Runners { result } => Outcome::Runners {
                result: match result {
                    Ok(list) => {
                        self.fresh_runners = Some(list);
                        Ok(())
                    }
                    Err(e) => Err(target_error(&e)),
                },
            },
            Done::Guard { result } => Outcome::Guard {
                result: result.map_err(|e| target_error(&e)),
            },
            Done::RunnerRelease => {
                self.persist_etags();
                Outcome::RunnerRelease
            }
            Done::Failed { attempt, error } => {
                log_error!("io_failed", target = self.name, error = error);
                Outcome::Failed { attempt }
            }
        };
        let effects = self.state.on_event(Event::Done(outcome), now);
        self.carry(effects, None, now);
    }

    /// A demand read came back: its jobs become the queue (what it did not read again
    /// keeps its earlier view), and its time the queue's. A new run's first read is
    /// part of what its jobs cost (like their JIT configs); polling is the rest: the
    /// runs lists and re-reads of runs that changed. That is what the pace follows.
    fn took_demand(
        &mut self,
        repos: crate::github::visibility::OrgRepos,
        read_at: Millis,
        result: Result<super::io::DemandRead, GhError>,
        units: u64,
    ) -> Outcome {
        self.queue.end_read(repos);
        let first_reads = result.as_ref().map_or(0, |r| r.read.new_runs as u64);
        self.persist_etags();
        let result = match result {
            Ok(read) => {
                if read.read.failed_runs > 0 {
                    log_warn!(
                        "queue_read_failed_in_part",
                        target = self.name,
                        failed_runs = read.read.failed_runs
                    );
                }
                if read.read.unread_runs > 0 || !read.read.whole() {
                    // A deep queue: what was read fills the room; the rest waits.
                    log_debug!(
                        "queue_read_in_part",
                        target = self.name,
                        unread_runs = read.read.unread_runs,
                        whole = read.read.whole()
                    );
                }
                let profiles = self.org_profiles();
                self.queue
                    .take_read(read.read, read.not_polled, read_at, scope(&profiles));
                Ok(())
            }
            Err(e) => Err(target_error(&e)),
        };
        Outcome::Demand {
            units,
            first_reads,
            result,
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

    /// Writes what changed in the client's conditional-request cache to the store, so
    /// the next daemon's first poll is answered with 304s (issue 20). A failed write
    /// costs only that: the entries are written again when they change.
    fn persist_etags(&self) {
        keep_etags(&self.store, &self.name, self.client.as_deref());
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
        let names: Vec<String> = profiles.iter().map(|p| p.name.clone()).collect();
        let installs = Event::Installs {
            errors: &install_errors,
            profiles: &names,
        };
        let effects = self.state.on_event(installs, now);
        self.carry(effects, None, now);
        let mut scaleset_unready = BTreeMap::new();
        self.scaleset.add_unfit(profiles, &mut scaleset_unready);
        let refused = match &contain.isolation {
            InEffect::Refused { why } => Some(why.as_str()),
            _ => None,
        };
        let no_client = (!self.state.has_client()).then(|| {
            self.state
                .error()
                .map_or_else(|| "no credentials".into(), ToString::to_string)
        });
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
                holds: self.state.holds(),
                no_client: no_client.as_deref(),
                public_repo: self.state.public_repo(),
                group_public: self.state.group_public(),
                install_errors: &install_errors,
                scaleset_unready: &scaleset_unready,
            },
            now,
        )
    }

    /// Builds the GitHub client from the target's credentials, with the hold and the
    /// conditional-request cache the last daemon kept; a failure is the target's
    /// visible error, tried again at the next poll, and stops nothing else.
    fn build_client(&mut self, target: &Target, now: Millis) {
        let cred = match load_credential(&target.credential) {
            Ok(cred) => cred,
            Err(e) => {
                self.client = None;
                let failed = Event::ClientFailed {
                    error: e.to_string(),
                    poll_every: poll_every(target),
                };
                let effects = self.state.on_event(failed, now);
                self.carry(effects, None, now);
                return;
            }
        };
        let observer = metrics_feed::github_observer(&self.shared.metrics, &self.name);
        let client = GitHubClient::new(target, cred)
            .with_shutdown(self.shutdown_rx.clone())
            .with_observer(observer)
            .with_shared_hold(self.scaleset.shared_hold())
            .with_in_flight(self.scaleset.in_flight())
            .with_hooks(self.shared.hooks.clone())
            .with_etag_journal();
        // A retry-after or rate-limit reset recorded before a restart still holds.
        let kept_hold = self
            .store
            .kv_get(&hold_key(&self.name))
            .ok()
            .flatten()
            .and_then(|v| v.parse::<Millis>().ok())
            .filter(|t| *t > now);
        // What the last daemon's reads were answered with: its first poll costs 304s
        // for whatever has not changed since.
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
        if let Some(t) = kept_hold {
            client.hold_until(t);
        }
        self.client = Some(Arc::new(client));
        self.state.on_event(Event::ClientBuilt { kept_hold }, now);
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
            last_error: self.state.error().map(ToString::to_string),
            rate_limit_remaining: rate.remaining.map(|r| r as i64),
            rate_limit_limit: rate.limit.map(|r| r as i64),
            rate_limit_reset: rate.reset,
            poll_every_ms: self.state.pace().map(|p| p.every),
            updated_at: now,
        };
        let last_error = |profile: &str| {
            self.state.status_error(
                self.queue.visibility_note.as_deref(),
                self.scaleset.error(profile),
                plan.demand.unfit_reason_for(profile),
            )
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

/// A GitHub error as the pass holds the target for it.
fn target_error(e: &GhError) -> TargetError {
    let refusal = match e.class() {
        ErrorClass::RateLimitedUntil(until) => Refusal::RateLimitedUntil(until),
        ErrorClass::Deterministic => Refusal::Deterministic,
        ErrorClass::Transient => Refusal::Transient,
    };
    TargetError::GitHub {
        refusal,
        text: e.to_string(),
    }
}

fn poll_every(target: &Target) -> Millis {
    (target.poll_interval_secs as Millis) * 1000
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
