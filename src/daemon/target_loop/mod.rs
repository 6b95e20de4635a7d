//! One target's loop, on its own thread with its own GitHub client and workers. It
//! only gathers, carries out and joins: what to read and when, GitHub's holds, the
//! profiles' start holds and what `status` shows are the pure pass's
//! (`reconcile::pass::TargetState::on_event`), and what to start, stop and clean is
//! `reconcile::plan`'s. A pass gathers one `Observed` snapshot, plans and records the
//! intents under the allocation lock, and acts: store writes and signals inline,
//! GitHub and disk work (starts, deregistrations, cleanups, demand reads, the runner
//! list, the guard's facts) on the target's I/O workers (`io`), whose results come
//! back as events. So watching runners never waits on GitHub, however far it is.

mod act;
mod books;
mod client;
mod credential;
mod done;
mod effects;
mod planning;
mod status;

pub(super) use client::keep_etags;

use super::actuator::{self, Ctx};
use super::clients;
use super::contain::{self, UidBook};
use super::io::{DemandCaps, Done, IoPool, Task};
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
use crate::github::{GhError, GitHubClient};
use crate::reconcile::budget::Budget;
use crate::reconcile::launch_book::{TargetMode, all_directed};
use crate::reconcile::pass::{self, ClientFit, Effect, Event, Facts, Line, Outcome, Read};
use crate::reconcile::pass::{StartEnd, TargetError, TargetState};
use crate::reconcile::plan::{self, Observed, Plan, Seen};
use crate::reconcile::room;
use crate::reconcile::unfit::{self, Fitness, Unfit};
use crate::reconcile::watch;
use crate::runner;
use crate::store::daemon_facts;
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

/// What a pass gathered: this host's open attempts, what each live attempt of the
/// target showed, and GitHub's runner list when a read just brought it.
struct Gathered {
    open: Vec<Attempt>,
    seen: BTreeMap<i64, Seen>,
    runners: Option<Vec<RegisteredRunner>>,
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

/// A loop's store connection (`SqliteStore::keep_small`): an idle daemon holds one
/// per target. A pass reads the same few dozen pages (its target, profiles, open
/// attempts, kv rows); its statements are prepared again when not kept.
const LOOP_CACHE_KIB: u32 = 128;
const LOOP_STATEMENTS: usize = 6;

pub struct TargetLoop {
    name: String,
    shared: Arc<Shared>,
    store: SqliteStore,
    /// What the pass decides from (`reconcile::pass`).
    state: TargetState,
    client: Option<Arc<GitHubClient>>,
    /// The credential behind the client, watched for changes.
    credential: credential::CredentialWatch,
    shutdown_rx: Receiver<()>,
    io: IoPool,
    observer: Observer,
    /// The queued jobs as the demand reads brought them.
    queue: RestQueue,
    /// GitHub's runner list, as a read brought it, until a pass judges it.
    /// and when that read began.
    fresh_runners: Option<(Vec<RegisteredRunner>, Millis)>,
    uids: UidBook,
    status: StatusWriter,
    writes: Writes,
    /// The listeners of this target's `demand=scaleset` profiles and what they saw.
    scaleset: ScaleSetFeed,
    jitter: Jitter,
    reruns: RerunWatch,
}

/// What the loop knows of its lost jobs waiting for a re-run, so a pass does not ask
/// the store each time (issue 32, "Idle": a look each pass cost about 50 kB a target).
/// It asks again when a loss was committed anywhere in the process
/// (`store::losses_noted` moved) or when its own look settled rows.
#[derive(Default)]
struct RerunWatch {
    /// `losses_noted` at the last look; none before the first.
    seen: Option<u64>,
    /// When the first waiting row is due, as the last look found it.
    first_due: Option<Millis>,
}

impl TargetLoop {
    pub fn new(
        name: String,
        shared: Arc<Shared>,
        shutdown_rx: Receiver<()>,
    ) -> Result<TargetLoop, StoreError> {
        let store = SqliteStore::open(&shared.state_dir)?;
        // An idle target's memory is mostly this connection's (issue 32, "Idle").
        store.keep_small(LOOP_CACHE_KIB, LOOP_STATEMENTS)?;
        let workers = store
            .target(&name)
            .map(|t| t.max_in_flight as usize)
            .unwrap_or(crate::domain::target::DEFAULT_MAX_IN_FLIGHT as usize);
        let seed = now_millis() as u64 ^ (std::process::id() as u64) << 17 ^ name.len() as u64;
        Ok(TargetLoop {
            scaleset: ScaleSetFeed::new(&name, shutdown_rx.clone()),
            io: IoPool::start(&shared, &name, workers),
            name,
            shared,
            store,
            state: TargetState::default(),
            client: None,
            credential: Default::default(),
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
            reruns: RerunWatch::default(),
        })
    }

    /// The thread body: a pass on every tick, message or worker result until told to
    /// stop. `once` runs passes until the demand read and the starts it led to are
    /// done, then returns the target's error if its last pass ended with one
    /// (credentials, GitHub's refusal), so `daemon --once` can fail. Either way the
    /// workers finish what they hold first.
    pub fn run(mut self, inbox: Receiver<LoopMsg>, once: bool) -> Option<TargetError> {
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
                        Ok(d) => self.on_done(*d),
                        Err(_) => break,
                    }
                }
            }
            self.io.stop();
            keep_etags(&self.store, &self.name, self.client.as_deref());
            return self.state.take_error();
        }
        loop {
            self.pass_logged();
            // Between passes the loop holds no cached page (issue 32, "Idle"): ten
            // idle targets kept up to 128 KiB each that the next pass re-reads anyway
            // when another connection wrote.
            self.store.release_memory();
            select! {
                recv(inbox) -> msg => match msg {
                    Ok(LoopMsg::Wake) => {}
                    Ok(LoopMsg::Reload) => {
                        self.scaleset.reset();
                        self.feed(Event::Reload, None, now_millis());
                    }
                    Ok(LoopMsg::Stop) | Err(_) => break,
                },
                recv(done) -> d => if let Ok(d) = d {
                    self.on_done(*d);
                },
                recv(ticker) -> _ => {}
            }
            // Whatever else the workers finished meanwhile, before the next pass.
            while let Ok(d) = done.try_recv() {
                self.on_done(*d);
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
        self.look_for_reruns();
        let facts = self.facts(&set, now);
        if facts.reads_queue {
            self.hear_webhooks(&set);
        }
        self.feed(Event::Tick(&facts), Some(&set), now);
        let g = self.gather(&set, &contain)?;
        let (unfit, installs) = self.unfit(&set.target, &set.profiles, &contain, now);
        let (mut plan, intents) = self.plan_and_record(&set, &g, &unfit, &contain, now)?;
        let host_unfit = unfit::host_unfit(&unfit);
        self.note_plan(&plan, &set, installs, &host_unfit, now);
        self.delete_orphans(std::mem::take(&mut plan.orphans), &set.target);

        // Act: each attempt's actions (the GitHub and disk part on a worker), then
        // the starts. The attempts handed to workers are the pass's in flight even
        // when a write stopped the rest.
        let mut handed = Vec::new();
        let acted = self.act(&set, &g.open, &g.seen, plan.actions, &mut handed, now);
        let intents = if acted.is_ok() { intents } else { Vec::new() };
        self.start_or_end(&set, &handed, intents, now);
        acted?;
        let credential_hold = self.credential_hold();
        self.feed(Event::PassEnd { credential_hold }, Some(&set), now);
        self.record_credential();
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
        self.scaleset.points().set_limit(target.secondary_limit);
        let fit = if self
            .client
            .as_ref()
            .is_some_and(|c| c.base_url() == target.api_url && c.scope() == &target.scope)
        {
            self.credential_fit(&target)
        } else {
            self.client = None;
            ClientFit::Missing
        };
        if fit == ClientFit::CredentialChanged {
            // The scale set listeners' clients hold the old credential too: they
            // start again with the new one, as after SIGHUP.
            self.scaleset.reset();
        }
        let poll_every = poll_every(&target);
        let mode = self.shared.pool.mode(&self.name, now);
        // A coordinator divides a pool's points; a host on its own keeps to its share
        // of a credential other hosts may spend too.
        self.scaleset
            .points()
            .set_by_share(mode != crate::reconcile::TargetMode::Coordinated);
        let set = Setting {
            host,
            target,
            profiles,
            mode,
        };
        self.feed(Event::Client { fit, poll_every }, Some(&set), now);
        self.scaleset.sync(
            &set.target,
            &set.profiles,
            &set.host,
            mode,
            &self.shared,
            now,
        );
        Ok(Some(set))
    }

    /// The facts the pass's reads are decided from.
    fn facts(&self, set: &Setting, now: Millis) -> Facts {
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
            polled_max: room::polled_max(&set.profiles),
            queued: self.queue.jobs.len() as u64,
            unread_runs: self.queue.unread_runs,
            queue_read_at: self.queue.read_at,
            guard: crate::daemon::public_guard::due_read(&set.target, &set.profiles),
            reruns_due: self.reruns.first_due.is_some_and(|at| at <= now),
            jit_room: Some(self.scaleset.points().jit_room(&set.target.scope, now).fits),
            hooks_steady: lock(&self.shared.hooks).steady(self.queue.heard_at, now),
        }
    }

    /// Asks the store when its first lost job is due, if a loss was committed or the
    /// loop's own look settled rows since it last asked. A failed read asks again on
    /// the next pass.
    fn look_for_reruns(&mut self) {
        let noted = crate::store::losses_noted();
        if self.reruns.seen == Some(noted) {
            return;
        }
        if let Ok(first) = self.store.first_rerun_due(&self.name) {
            self.reruns = RerunWatch {
                seen: Some(noted),
                first_due: first,
            };
        }
    }
}

fn poll_every(target: &Target) -> Millis {
    (target.poll_interval_secs as Millis) * 1000
}
