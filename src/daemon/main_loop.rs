//! The main thread's loop, in rust-analyzer's shape: a closed `Event`, `next_event`
//! (only the `select!`), `handle_event` (the work: signals, meter readings and the
//! one-second tick), and `shutdown`, which stops the threads in their order.

use super::feeds::{metrics_feed, pool_link};
use super::host::{disk_watch, retention, sweep};
use super::shared::handles::SamplerHandle;
use super::shared::{LoopMsg, Shared};
use super::signals::{Signal, SignalWatch, Stop};
use super::workers::oci;
use super::{
    DaemonError, DaemonOptions, HEARTBEAT_EVERY, SWEEP_EVERY, Stopped, apply_containment,
    config_fingerprint, containment_key, notify, prune_caches, refresh_link, sync_loops,
};
use crate::domain::{Attempt, AttemptState, Host};
use crate::meter::{LiveAttempt, LiveBook, MeterReport};
use crate::selfupdate::handover::{Drain, DrainEnd, drain_end, requested};
use crate::store::{Heartbeat, SqliteStore, Store, daemon_facts};
use crate::timefmt::{Millis, now_millis};
use crate::{log_error, log_info, log_warn};
use crossbeam_channel::{Receiver, Sender, select, tick};
use std::ops::ControlFlow;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What wakes the main thread.
pub enum Event {
    /// SIGTERM (drain) or SIGHUP (reload).
    Signal(Signal),
    /// The meter sampler's readings of the live runners.
    Meters(Vec<MeterReport>),
    /// A second passed: heartbeat, edits from the CLI, upkeep, the drain's end.
    Tick,
}

/// The threads the main loop started before it ran, stopped by `shutdown`.
pub struct Threads {
    /// Dropped first at shutdown: the target loops, their GitHub clients and the
    /// metrics server watch it.
    pub shutdown_tx: Sender<()>,
    pub shutdown_rx: Receiver<()>,
    pub sampler: SamplerHandle,
    pub link: Option<pool_link::LinkRun>,
    pub metrics_thread: Option<JoinHandle<()>>,
    pub signal_watch: SignalWatch,
}

/// The main thread's state between events.
pub struct MainLoop<'a> {
    opts: &'a DaemonOptions,
    store: &'a SqliteStore,
    shared: Arc<Shared>,
    threads: Threads,
    signal_rx: Receiver<Signal>,
    report_rx: Receiver<Vec<MeterReport>>,
    ticker: Receiver<Instant>,
    /// When this process started: a handover request made since is for it.
    process_start: Millis,
    started_at: Millis,
    /// `containment_key` of the containment in effect.
    contained: String,
    fingerprint: String,
    data_version: i64,
    watchdog: Option<Duration>,
    last_watchdog: Instant,
    next_heartbeat: Millis,
    next_sweep: Millis,
    /// When free memory is next given back (`alloc::trim`, `resident::drop_code_pages`):
    /// first once start-up is over, then each minute.
    next_give_back: Millis,
    next_prune: Millis,
    /// When the usage counters next read the roll-up (each minute, or each upkeep
    /// when sooner), and where they stand.
    next_usage: Millis,
    usage: Option<crate::metrics::usage::UsageCounters>,
    next_disk: Millis,
    fitness_every: Millis,
    next_fitness: Millis,
    drain: Option<(Drain, Instant)>,
    /// A SIGINT asked the daemon to stop: it exits as interrupted.
    interrupted: bool,
    /// The store changed since the handover request was last read.
    handover_due: bool,
    live_book: LiveBook,
    follower: Option<crate::config_file::Follower>,
}

/// What `MainLoop::new` starts from, besides the threads.
pub struct Start<'a> {
    pub opts: &'a DaemonOptions,
    pub store: &'a SqliteStore,
    pub shared: Arc<Shared>,
    pub signal_rx: Receiver<Signal>,
    pub report_rx: Receiver<Vec<MeterReport>>,
    pub process_start: Millis,
    pub started_at: Millis,
    pub contained: String,
    /// Where configuration stood before the first loops were started.
    pub config_seen: ConfigSeen,
    /// The usage counters, their baseline read before the first loops were started.
    pub usage: Option<crate::metrics::usage::UsageCounters>,
    /// The description file it follows (`daemon --config`).
    pub follower: Option<crate::config_file::Follower>,
}

/// The store's `data_version` and the configuration's fingerprint, read in that
/// order before the daemon acts on its configuration at start. An edit committed
/// after the first read moves `data_version`, so the first tick after it compares
/// fingerprints and starts what is missing. Read later (after the first loops were
/// started, as it once was), an edit landing in between was in the fingerprint
/// already and no tick ever saw it: a target added while a slow (loaded) daemon
/// started never got a loop, and its jobs were never served (issue 36).
#[derive(Debug, Clone)]
pub struct ConfigSeen {
    data_version: i64,
    fingerprint: String,
}

impl ConfigSeen {
    pub fn read(store: &SqliteStore) -> Result<ConfigSeen, DaemonError> {
        let data_version = store.data_version()?;
        let fingerprint = config_fingerprint(store)?;
        Ok(ConfigSeen {
            data_version,
            fingerprint,
        })
    }
}

impl<'a> MainLoop<'a> {
    /// Tells systemd the daemon is ready and reads where configuration stands.
    pub fn new(start: Start<'a>, threads: Threads) -> Result<MainLoop<'a>, DaemonError> {
        let Start {
            opts,
            store,
            shared,
            signal_rx,
            report_rx,
            process_start,
            started_at,
            contained,
            config_seen,
            usage,
            follower,
        } = start;
        notify::notify("READY=1");
        let watchdog = notify::watchdog_interval();
        let ticker = tick(Duration::from_secs(1));
        let ConfigSeen {
            data_version,
            fingerprint,
        } = config_seen;
        let fitness_every = opts.fitness_every.as_millis() as Millis;
        Ok(MainLoop {
            opts,
            store,
            shared,
            threads,
            signal_rx,
            report_rx,
            ticker,
            process_start,
            started_at,
            contained,
            fingerprint,
            data_version,
            watchdog,
            last_watchdog: Instant::now(),
            next_heartbeat: started_at + HEARTBEAT_EVERY,
            next_sweep: now_millis() + SWEEP_EVERY,
            next_give_back: now_millis() + crate::resident::FIRST_AFTER_MS,
            next_prune: 0,
            next_usage: 0,
            usage,
            next_disk: now_millis() + disk_watch::SAMPLE_EVERY,
            fitness_every,
            next_fitness: now_millis() + fitness_every,
            drain: None,
            interrupted: false,
            // A request written before the loop's first data_version read is seen
            // at the first check.
            handover_due: true,
            live_book: LiveBook::new(),
            follower,
        })
    }

    /// Waits for the next event; `None` once signals can no longer come.
    pub fn next_event(&mut self) -> Option<Event> {
        loop {
            select! {
                recv(self.signal_rx) -> sig => return sig.ok().map(Event::Signal),
                recv(self.report_rx) -> batch => match batch {
                    Ok(batch) => return Some(Event::Meters(batch)),
                    // A sampler that ended sends nothing more, and its closed channel
                    // would be ready at every select: it is never listened to again.
                    Err(_) => self.report_rx = crossbeam_channel::never(),
                },
                recv(self.ticker) -> _ => return Some(Event::Tick),
            }
        }
    }

    /// Does what `event` calls for; `Break` when the daemon is to stop. A store that
    /// cannot be read ends the daemon with its error.
    pub fn handle_event(&mut self, event: Event) -> Result<ControlFlow<()>, DaemonError> {
        let flow = match event {
            Event::Signal(Signal::Terminate(stop)) => self.on_terminate(stop),
            Event::Signal(Signal::Reload) => {
                log_info!("reload", reason = "SIGHUP");
                if let Some(f) = &mut self.follower {
                    f.apply(self.store, now_millis(), "SIGHUP");
                }
                self.shared.tell_all(LoopMsg::Reload);
                sync_loops(self.store, &self.shared, &self.threads.shutdown_rx, false)?;
                ControlFlow::Continue(())
            }
            Event::Meters(batch) => {
                self.on_meters(&batch);
                ControlFlow::Continue(())
            }
            Event::Tick => self.on_tick()?,
        };
        if flow.is_continue() {
            self.check_handover();
        }
        Ok(flow)
    }

    /// Reads the handover request when the store changed (and at the start), and
    /// drains for it.
    pub fn check_handover(&mut self) {
        if !self.handover_due || self.drain.is_some() {
            return;
        }
        self.handover_due = false;
        // An unreadable request is read again when the store next changes.
        let request = daemon_facts::handover_request(self.store).unwrap_or_else(|e| {
            log_warn!("handover_not_read", error = e);
            None
        });
        if let Some(version) = requested(request.as_ref(), self.process_start) {
            // As SIGTERM, without STOPPING=1: systemd is to restart the unit, not
            // stop it. Starts stop before the log says so.
            self.shared.stopping.store(true, Ordering::SeqCst);
            self.shared.tell_all(LoopMsg::Wake);
            log_info!(
                "draining",
                reason = "handover",
                version = version,
                timeout_secs = self.opts.drain_timeout.as_secs()
            );
            notify::notify(&format!("STATUS=handing over to runner-manager {version}"));
            self.drain = Some((Drain::Handover, Instant::now() + self.opts.drain_timeout));
        }
    }

    /// SIGTERM or SIGINT: drain, or turn a handover into a plain drain; a second one
    /// stops now. A SIGINT makes the stop an interrupt (exit 130).
    fn on_terminate(&mut self, stop: Stop) -> ControlFlow<()> {
        if stop == Stop::Int {
            self.interrupted = true;
        }
        match self.drain {
            None => {
                let timeout = self.opts.drain_timeout;
                log_info!(
                    "draining",
                    reason = stop.name(),
                    timeout_secs = timeout.as_secs()
                );
                notify::notify("STOPPING=1");
                self.shared.stopping.store(true, Ordering::SeqCst);
                self.shared.tell_all(LoopMsg::Wake);
                self.drain = Some((Drain::Terminate, Instant::now() + timeout));
            }
            // Stopped during a handover: a plain drain, exit 0, no restart.
            Some((Drain::Handover, deadline)) => {
                log_info!(
                    "draining",
                    reason = format!("{} during handover", stop.name())
                );
                notify::notify("STOPPING=1");
                self.drain = Some((Drain::Terminate, deadline));
            }
            Some((Drain::Terminate, _)) => {
                log_warn!("second_signal", signal = stop.name(), action = "exit now");
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    }

    fn on_meters(&mut self, batch: &[MeterReport]) {
        for r in batch {
            self.shared.record_meter(r.attempt, &r.meter);
            if r.oom_killed {
                super::workers::oci::note_oom(&self.opts.state_dir, r.attempt);
            }
        }
        // The live figures reach the store while the runner lives: what to write and
        // when is `LiveBook`'s (pure) decision.
        let now = now_millis();
        self.live_book.observe(batch, now);
        let rows = self.live_book.due(now);
        if let Err(e) = self.store.put_live_meters(&rows) {
            log_warn!("meters_not_written", attempts = rows.len(), error = e);
        }
    }

    /// The one-second tick, in its order: liveness, edits, the host's watches, the
    /// live runners' figures, upkeep, and whether a drain is over.
    fn on_tick(&mut self) -> Result<ControlFlow<()>, DaemonError> {
        let now = now_millis();
        metrics_feed::ticked(&self.shared);
        self.beat(now);
        if let Some(f) = &mut self.follower {
            f.tick(self.store, now);
        }
        self.notice_edits(now)?;
        let host = self.store.host_or_create()?;
        self.watch_host(&host, now);
        let open = self.store.open_attempts(&host.id)?;
        self.publish_live(&host, &open, now);
        self.upkeep(&host, now);
        // What the tick read stays on disk, not in the connection's page cache (up to
        // 2 MB as SQLite sizes it): the next tick reads the few pages it needs again.
        self.store.release_memory();
        Ok(self.drain_over(&open))
    }

    /// The watchdog and the heartbeat, when due.
    fn beat(&mut self, now: Millis) {
        if let Some(w) = self.watchdog
            && self.last_watchdog.elapsed() >= w
        {
            notify::notify("WATCHDOG=1");
            self.last_watchdog = Instant::now();
        }
        if now >= self.next_heartbeat {
            self.next_heartbeat = now + HEARTBEAT_EVERY;
            // A full disk fails the write (SQLITE_FULL) and loses nothing written
            // before: the daemon goes on watching and cleaning.
            let beat = Heartbeat {
                pid: std::process::id(),
                started_at: self.started_at,
                heartbeat_at: now,
                version: crate::version::version(),
            };
            if let Err(e) = self.store.put_heartbeat(&beat) {
                log_warn!("heartbeat_not_written", error = e);
            }
        }
    }

    /// Edits from the CLI: wake the loops (and start or stop loops for added or
    /// removed targets) only when configuration changed, so the daemon's own writes
    /// never wake it.
    fn notice_edits(&mut self, now: Millis) -> Result<(), DaemonError> {
        let dv = self.store.data_version()?;
        if dv == self.data_version {
            return Ok(());
        }
        self.data_version = dv;
        self.handover_due = true;
        let fp = config_fingerprint(self.store)?;
        if fp == self.fingerprint {
            return Ok(());
        }
        self.fingerprint = fp;
        let host = self.store.host_or_create()?;
        if containment_key(&host) != self.contained {
            self.contained = containment_key(&host);
            let cgroups = self.shared.containment().cgroups.clone();
            apply_containment(&self.shared, self.store, &host, Some(cgroups))?;
            let isolation = self.shared.containment().isolation.describe();
            log_info!("containment_changed", isolation = isolation);
        }
        sync_loops(self.store, &self.shared, &self.threads.shutdown_rx, false)?;
        self.threads.link = refresh_link(&self.shared, self.store, self.threads.link.take())?;
        // A profile's tools or a PATH may have changed: look again now.
        self.next_fitness = now;
        self.shared.tell_all(LoopMsg::Wake);
        Ok(())
    }

    /// The state directory's free space and the host's fitness, when due.
    fn watch_host(&mut self, host: &Host, now: Millis) {
        if now >= self.next_disk {
            self.next_disk = now + disk_watch::SAMPLE_EVERY;
            self.shared.watch_disk(host.disk_reserve_bytes);
        }
        if now >= self.next_fitness {
            self.next_fitness = now + self.fitness_every;
            // An unreadable store keeps the last judgement.
            match self.store.profiles() {
                Ok(profiles) => {
                    self.shared.watch_fitness(host, &profiles);
                }
                Err(e) => log_warn!("fitness_not_checked", error = e),
            }
        }
    }

    /// The live runners go to the sampler, their figures to the metrics and the
    /// coordinator's status report.
    fn publish_live(&mut self, host: &Host, open: &[Attempt], now: Millis) {
        let contain = self.shared.containment();
        let live: Vec<LiveAttempt> = open
            .iter()
            .filter(|a| a.state.is_live())
            .filter_map(|a| {
                Some(LiveAttempt {
                    attempt: a.id,
                    pid: a.pid?,
                    start_time: a.pid_start?,
                    cgroup: (!contain.cgroups.is_none()).then(|| contain.cgroups.attempt(a.id)),
                    container: super::workers::oci::container_of(&self.opts.state_dir, a),
                })
            })
            .collect();
        self.live_book
            .retain(|id| live.iter().any(|l| l.attempt == id));
        metrics_feed::meters(&self.shared.metrics, self.store, open, &self.live_book);
        self.threads.sampler.watch(live);
        if self.threads.link.is_some() {
            let live_n = open.iter().filter(|a| a.state.is_live()).count() as u32;
            let status = crate::coordinator::protocol::Status {
                free: host.capacity.saturating_sub(live_n),
                draining: host.draining || self.shared.stopping(),
                unfit: self.shared.pool.unfit_profiles(),
                meters: metrics_feed::pool_meters(open, &self.live_book),
                limits: self.shared.pool.limit_reports(),
                // The link adds the usage rows as it sends the frame.
                ..Default::default()
            };
            self.shared
                .pool
                .report(crate::coordinator::link::Report::Status(status));
        }
        metrics_feed::runners(&self.shared.metrics, self.store, open);
        metrics_feed::sessions(&self.shared.metrics, self.store, &host.id, now);
    }

    /// The orphan sweep every minute, retention and the caches' prune hourly, the
    /// usage counters each minute.
    fn upkeep(&mut self, host: &Host, now: Millis) {
        let state_dir = &self.opts.state_dir;
        if now >= self.next_sweep {
            self.next_sweep = now + SWEEP_EVERY;
            sweep::sweep(self.store, host, state_dir, &self.shared.containment());
            if let Ok(profiles) = self.store.profiles() {
                oci::sweep(self.store, &host.id, &profiles);
            }
        }
        if now >= self.next_prune {
            self.next_prune = now + self.opts.upkeep_every.as_millis() as Millis;
            // Pruning is what gives space back: a failed one (a full disk) is tried
            // again at the next sweep, and stops nothing else.
            if let Err(e) = retention::upkeep(self.store, host, state_dir, now) {
                log_warn!("upkeep_failed", error = e);
                self.next_prune = now + SWEEP_EVERY;
            }
            prune_caches(&self.shared, state_dir, host);
        }
        if now >= self.next_usage {
            self.next_usage = now + SWEEP_EVERY.min(self.opts.upkeep_every.as_millis() as Millis);
            metrics_feed::usage(&self.shared.metrics, self.store, &mut self.usage, now);
        }
        // Last, so that the code upkeep itself ran is given back with the rest.
        if now >= self.next_give_back {
            self.next_give_back = now + crate::alloc::TRIM_EVERY_MS;
            crate::alloc::trim();
            crate::resident::drop_code_pages();
        }
    }

    /// Whether a drain is over (see `drain_end`), logged when it is.
    fn drain_over(&self, open: &[Attempt]) -> ControlFlow<()> {
        let Some((kind, deadline)) = self.drain else {
            return ControlFlow::Continue(());
        };
        let waiting = open.iter().filter(|a| a.state.is_unassigned()).count();
        let busy = open
            .iter()
            .filter(|a| a.state == AttemptState::Busy)
            .count();
        match drain_end(kind, waiting, busy, Instant::now() >= deadline) {
            Some(DrainEnd::Drained) => {
                log_info!("drained", busy_left_running = busy);
                ControlFlow::Break(())
            }
            Some(DrainEnd::TimedOut) => {
                log_warn!(
                    "drain_timeout",
                    still_unassigned = waiting,
                    busy_left_running = busy
                );
                ControlFlow::Break(())
            }
            None => ControlFlow::Continue(()),
        }
    }

    /// Stops the loops, then the sampler, the link, the metrics server and the
    /// signal watch, in that order; runners keep running in their own sessions.
    pub fn shutdown(self) -> Stopped {
        let Threads {
            shutdown_tx,
            shutdown_rx: _,
            sampler,
            link,
            metrics_thread,
            signal_watch,
        } = self.threads;
        drop(shutdown_tx);
        // Every loop is told first, so they finish their passes side by side.
        let loops = self.shared.loops.take_all();
        for (_, l) in &loops {
            l.ask_stop();
        }
        for (name, l) in loops {
            if l.join().is_err() {
                log_error!("loop_panicked", target = name);
            }
        }
        drop(sampler);
        if let Some(l) = link {
            l.stop();
        }
        if let Some(t) = metrics_thread {
            let _ = t.join();
        }
        drop(signal_watch);
        // Runners live in their own sessions: say how many outlive this daemon.
        let left = self
            .store
            .host_or_create()
            .and_then(|h| self.store.open_attempts(&h.id))
            .map(|open| open.iter().filter(|a| a.state.is_live()).count())
            .unwrap_or(0);
        if left > 0 {
            log_info!(
                "runners_keep_running",
                runners = left,
                note = "the next daemon on this state directory adopts them"
            );
        }
        let _ = self.store.clear_heartbeat();
        let stopped = match self.drain {
            Some((Drain::Handover, _)) => Stopped::Handover,
            _ if self.interrupted => Stopped::Interrupted,
            _ => Stopped::Terminated,
        };
        log_info!("daemon_stopped", handover = stopped == Stopped::Handover);
        stopped
    }
}
