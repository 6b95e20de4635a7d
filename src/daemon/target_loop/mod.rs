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
mod inbound;
mod planning;
mod setting;
mod status;

use client::GitHub;
use inbound::Inbound;
use setting::{Setting, poll_every};
use status::Writers;

use super::feeds::clients::{self, keep_etags};
use super::feeds::metrics_feed;
use super::feeds::rest_queue::{RestQueue, Scope};
use super::feeds::scaleset_feed::ScaleSetFeed;
use super::feeds::status_writer::StatusWriter;
use super::host::contain::{self, UidBook};
use super::shared::pool::TargetView;
use super::shared::{LoopMsg, Shared, lock};
use super::workers::actuator::{self, Ctx};
use super::workers::io::{DemandCaps, Done, IoPool, Task};
use super::workers::observe::Observer;
use super::workers::starter::{self, Started};
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
use crate::store::{SqliteStore, Store, StoreError, TargetStatus};
use crate::timefmt::{Millis, now_millis};
use crate::{log_debug, log_error, log_info, log_warn};
use crossbeam_channel::{Receiver, select};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

/// What a pass gathered: this host's open attempts, what each live attempt of the
/// target showed, and GitHub's runner list when a read just brought it.
struct Gathered {
    open: Vec<Attempt>,
    seen: BTreeMap<i64, Seen>,
    runners: Option<Vec<RegisteredRunner>>,
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
    /// The GitHub side: the client and the credential behind it.
    github: GitHub,
    /// What comes in: the queue, the runner list, the runners watched, the scale set
    /// listeners, the lost jobs.
    inbound: Inbound,
    io: IoPool,
    /// The store writes of the passes: the status rows, and failures as logged.
    writers: Writers,
    uids: UidBook,
    jitter: Jitter,
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
            inbound: Inbound::new(&name, shutdown_rx.clone()),
            io: IoPool::start(&shared, &name, workers),
            name,
            shared,
            store,
            state: TargetState::default(),
            github: GitHub::new(shutdown_rx),
            writers: Writers::new(),
            uids: UidBook::default(),
            jitter: Jitter::seeded(seed),
        })
    }

    /// The thread body: a pass at every wake the state asks for
    /// (`TargetState::wake_at`), message or worker result until told to stop. `once` runs passes until the demand read and the starts it led to are
    /// done, then returns the target's error if its last pass ended with one
    /// (credentials, GitHub's refusal), so `daemon --once` can fail. Either way the
    /// workers finish what they hold first.
    pub fn run(mut self, inbox: Receiver<LoopMsg>, once: bool) -> Option<TargetError> {
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
            keep_etags(&self.store, &self.name, self.github.client.as_deref());
            return self.state.take_error();
        }
        loop {
            self.pass_logged();
            // Between passes the loop holds no cached page (issue 32, "Idle"): ten
            // idle targets kept up to 128 KiB each that the next pass re-reads anyway
            // when another connection wrote.
            self.store.release_memory();
            // Until the state's next wake (a read or hold due, its runners watched),
            // unless a message or a worker's result comes first.
            let now = now_millis();
            let wait = Duration::from_millis((self.state.wake_at(now) - now).max(0) as u64);
            select! {
                recv(inbox) -> msg => match msg {
                    Ok(LoopMsg::Wake) => {}
                    Ok(LoopMsg::Reload) => {
                        self.inbound.scaleset.reset();
                        self.feed(Event::Reload, None, now_millis());
                    }
                    Ok(LoopMsg::Stop) | Err(_) => break,
                },
                recv(done) -> d => if let Ok(d) = d {
                    self.on_done(*d);
                },
                default(wait) => {}
            }
            // Whatever else the workers finished meanwhile, before the next pass.
            while let Ok(d) = done.try_recv() {
                self.on_done(*d);
            }
        }
        self.close_sessions();
        self.io.stop();
        // After the workers: a read that ended meanwhile is kept too.
        keep_etags(&self.store, &self.name, self.github.client.as_deref());
        None
    }

    fn pass_logged(&mut self) {
        if let Err(e) = self.pass(now_millis()) {
            match self
                .writers
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
        let failed_before = self.writers.failing.is_some();
        self.writers.failed_now = false;
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
        let (plan, intents) = self.plan_and_record(&set, &g, &unfit, &contain, now)?;
        let host_unfit = unfit::host_unfit(&unfit);
        // The plan goes to the state, which answers with the orphans to delete among
        // its effects.
        self.note_plan(&plan, &set, installs, &host_unfit, now);

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
        if !self.writers.failed_now {
            if failed_before {
                log_info!("store_writes_recovered", target = self.name);
            }
            self.writers.failing = None;
        }
        Ok(())
    }
}
