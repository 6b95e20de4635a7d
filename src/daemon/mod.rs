//! The daemon: the main thread that takes the lock, spawns one loop per target, the
//! meter sampler and the coordinator link, watches signals and joins them all.

mod actuator;
pub mod contain;
mod disk_watch;
pub mod fitness_watch;
mod io;
pub mod lock;
mod metrics_feed;
pub mod notify;
mod observe;
mod oci;
mod pool;
mod pool_link;
mod public_guard;
mod rest_queue;
pub mod retention;
pub mod runner_update;
pub mod runners_seen;
mod scaleset_feed;
mod shared;
pub mod signals;
mod slots;
mod starter;
mod status_writer;
mod sweep;
mod target_loop;
pub mod webhook;

pub use fitness_watch::CHECK_EVERY as FITNESS_EVERY;
pub use shared::LoopMsg;

use crate::logging::Level;
use crate::meter::{LiveAttempt, MeterReport, spawn_sampler};
use crate::selfupdate::handover::{Drain, DrainEnd, KV_HANDOVER, drain_end, requested};
use crate::store::{Heartbeat, SqliteStore, Store, StoreError};
use crate::timefmt::{Millis, now_millis};
use crate::{log_error, log_info, log_warn};
use crossbeam_channel::{Receiver, Sender, bounded, select, tick};
use lock::{DaemonLock, LockError};
use shared::{Shared, lock as lock_mutex};
use signals::{Signal, SignalWatch};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct DaemonOptions {
    pub state_dir: PathBuf,
    /// One pass per target, then exit (runners started keep running).
    pub once: bool,
    /// How long SIGTERM waits for idle and starting runners to be deregistered.
    pub drain_timeout: Duration,
    pub log_level: Level,
    /// How long the coordinator link may be down before the host reads its own demand.
    pub fallback_grace: Duration,
    /// Serve `/metrics` and `/healthz` here (loopback only).
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// How often the host's fitness is read again (`fitness_watch`), besides at
    /// start and after every configuration change.
    pub fitness_every: Duration,
    /// How often the managed runner installs are checked against the downloads API
    /// (`runner_update`); zero never checks.
    pub runner_check: Duration,
}

#[derive(Debug)]
pub enum DaemonError {
    Store(StoreError),
    Lock(LockError),
    Io(String),
    /// `--once`: these targets' passes ended with an error.
    Failed(String),
}

impl std::fmt::Display for DaemonError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DaemonError::Store(e) => write!(f, "{e}"),
            DaemonError::Lock(e) => write!(f, "{e}"),
            DaemonError::Io(e) | DaemonError::Failed(e) => f.write_str(e),
        }
    }
}

impl From<StoreError> for DaemonError {
    fn from(e: StoreError) -> Self {
        DaemonError::Store(e)
    }
}

const HEARTBEAT_EVERY: Millis = 5_000;
const SWEEP_EVERY: Millis = 60_000;
/// How often `retention::upkeep` prunes, removes logs and reclaims the store's space.
const PRUNE_EVERY: Millis = 3_600_000;

struct LoopThread {
    tx: Sender<LoopMsg>,
    /// The loop's error at the end, with `--once` (see `TargetLoop::run`).
    thread: JoinHandle<Option<String>>,
}

/// How the daemon stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// SIGTERM (or `--once` done): exit 0.
    Terminated,
    /// `update` replaced the binary and the daemon drained for it: exit
    /// `selfupdate::EXIT_HANDOVER`, which the systemd unit restarts on.
    Handover,
}

/// Runs the daemon until SIGTERM or a handover (or, with `once`, one pass per target).
pub fn run(opts: DaemonOptions) -> Result<Stopped, DaemonError> {
    // A handover request made from here on is for this process (see
    // `selfupdate::handover::requested`).
    let process_start = now_millis();
    crate::logging::init(opts.log_level);
    crate::alloc::cap_malloc_arenas();
    // Signals are watched before anything else, so a SIGTERM during startup drains
    // (it is read once the main loop runs) instead of killing the daemon outright.
    let watched = if opts.once {
        None
    } else {
        Some(
            SignalWatch::start()
                .map_err(|e| DaemonError::Io(format!("cannot watch signals: {e}")))?,
        )
    };
    let store = SqliteStore::open(&opts.state_dir)?;
    let _lock = DaemonLock::acquire(&opts.state_dir).map_err(DaemonError::Lock)?;
    // A store from before incremental vacuum is rewritten once, so pruned rows' space
    // goes back from then on; the store still works if it cannot be.
    match store.make_reclaimable() {
        Ok(true) => log_info!("store_made_reclaimable"),
        Ok(false) => {}
        Err(e) => log_warn!("store_not_reclaimable", error = e),
    }
    let host = store.host_or_create()?;
    let started_at = now_millis();
    let shared = Arc::new(Shared::new(opts.state_dir.clone()));
    shared
        .pool
        .set_grace(opts.fallback_grace.as_millis() as Millis);
    // `--once` is one pass: it does not wait for a release to download.
    shared.runner_update.set_every(if opts.once {
        0
    } else {
        opts.runner_check.as_millis() as Millis
    });
    let mut contained = containment_key(&host);
    apply_containment(&shared, &store, &host, None)?;
    // The first passes, and the first scrape, know whether there is room to start
    // runners.
    disk_watch::sample(&shared, host.disk_reserve_bytes);
    fitness_watch::check(&shared, &host, &store.profiles()?);
    log_info!(
        "daemon_started",
        host = host.id,
        state_dir = opts.state_dir.display(),
        pid = std::process::id(),
        isolation = shared.containment().isolation.describe(),
        cgroups = shared.containment().cgroups.summary()
    );
    let mut link = pool_link::start_link(&shared, &store)?;
    let (shutdown_tx, shutdown_rx) = bounded::<()>(0);
    let metrics_thread = metrics_feed::serve(&opts, &shared, &shutdown_rx)?;
    let _webhook = (!opts.once).then(|| webhook::serve(&store, &shared, &shutdown_rx));

    // Orphans left on disk by a crash: roots and processes that no attempt explains,
    // and containers labelled for this host.
    sweep::sweep(&store, &host, &opts.state_dir, &shared.containment());
    oci::sweep(&store, &host.id, &store.profiles()?);

    // The heartbeat goes first, so `status` says the daemon runs as soon as it can
    // start runners, not a tick later.
    if !opts.once {
        store.put_heartbeat(&Heartbeat {
            pid: std::process::id(),
            started_at,
            heartbeat_at: started_at,
            version: env!("CARGO_PKG_VERSION").into(),
        })?;
    }
    let mut loops: HashMap<String, LoopThread> = HashMap::new();
    sync_loops(&store, &shared, &mut loops, &shutdown_rx, opts.once)?;
    if opts.once {
        // A pass that could not reach its target (credentials, GitHub's refusal) is a
        // failed `--once`: exit 1 naming each such target, not 0.
        let mut failed: Vec<String> = Vec::new();
        for (name, l) in loops.drain() {
            match l.thread.join() {
                Ok(None) => {}
                Ok(Some(e)) => failed.push(format!("target {name}: {e}")),
                Err(_) => failed.push(format!("target {name}: its loop panicked")),
            }
        }
        failed.sort();
        if !failed.is_empty() {
            return Err(DaemonError::Failed(failed.join("; ")));
        }
        return Ok(Stopped::Terminated);
    }

    let Some((signal_watch, signal_rx)) = watched else {
        return Ok(Stopped::Terminated);
    };
    let (live_tx, live_rx) = bounded::<Vec<LiveAttempt>>(1);
    let (report_tx, report_rx) = bounded::<Vec<MeterReport>>(4);
    let (meter_stop_tx, meter_stop_rx) = bounded::<()>(0);
    let sampler = spawn_sampler(Duration::from_secs(1), live_rx, meter_stop_rx, report_tx)
        .map_err(|e| DaemonError::Io(format!("cannot start the meter sampler: {e}")))?;

    notify::notify("READY=1");
    let watchdog = notify::watchdog_interval();
    let ticker = tick(Duration::from_secs(1));
    let mut fingerprint = config_fingerprint(&store)?;
    let mut data_version = store.data_version()?;
    let mut next_heartbeat = started_at + HEARTBEAT_EVERY;
    let mut next_sweep = now_millis() + SWEEP_EVERY;
    let mut next_prune = 0;
    let mut next_disk = now_millis() + disk_watch::SAMPLE_EVERY;
    let fitness_every = opts.fitness_every.as_millis() as Millis;
    let mut next_fitness = now_millis() + fitness_every;
    let mut last_watchdog = std::time::Instant::now();
    let mut drain: Option<(Drain, std::time::Instant)> = None;
    // A request written before the loop's first data_version read is seen here.
    let mut handover_due = true;
    let mut live_book = crate::meter::LiveBook::new();

    loop {
        if handover_due && drain.is_none() {
            handover_due = false;
            // An unreadable request is read again when the store next changes.
            let request = store.kv_get(KV_HANDOVER).unwrap_or_else(|e| {
                log_warn!("handover_not_read", error = e);
                None
            });
            if let Some(version) = requested(request.as_deref(), process_start) {
                // As SIGTERM, without STOPPING=1: systemd is to restart the unit, not
                // stop it. Starts stop before the log says so.
                shared.stopping.store(true, Ordering::SeqCst);
                shared.tell_all(LoopMsg::Wake);
                log_info!(
                    "draining",
                    reason = "handover",
                    version = version,
                    timeout_secs = opts.drain_timeout.as_secs()
                );
                notify::notify(&format!("STATUS=handing over to runner-manager {version}"));
                drain = Some((
                    Drain::Handover,
                    std::time::Instant::now() + opts.drain_timeout,
                ));
            }
        }
        select! {
            recv(signal_rx) -> sig => match sig {
                Ok(Signal::Terminate) => match drain {
                    None => {
                        log_info!("draining", reason = "SIGTERM", timeout_secs = opts.drain_timeout.as_secs());
                        notify::notify("STOPPING=1");
                        shared.stopping.store(true, Ordering::SeqCst);
                        shared.tell_all(LoopMsg::Wake);
                        drain = Some((Drain::Terminate, std::time::Instant::now() + opts.drain_timeout));
                    }
                    // Stopped during a handover: a plain drain, exit 0, no restart.
                    Some((Drain::Handover, deadline)) => {
                        log_info!("draining", reason = "SIGTERM during handover");
                        notify::notify("STOPPING=1");
                        drain = Some((Drain::Terminate, deadline));
                    }
                    Some((Drain::Terminate, _)) => {
                        log_warn!("second_sigterm", action = "exit now");
                        break;
                    }
                },
                Ok(Signal::Reload) => {
                    log_info!("reload", reason = "SIGHUP");
                    shared.tell_all(LoopMsg::Reload);
                    sync_loops(&store, &shared, &mut loops, &shutdown_rx, false)?;
                }
                Err(_) => break,
            },
            recv(report_rx) -> batch => if let Ok(batch) = batch {
                for r in &batch {
                    shared.record_meter(r.attempt, &r.meter);
                }
                // The live figures reach the store while the runner lives: what to
                // write and when is `LiveBook`'s (pure) decision.
                let now = now_millis();
                live_book.observe(&batch, now);
                let rows = live_book.due(now);
                if let Err(e) = store.put_live_meters(&rows) {
                    log_warn!("meters_not_written", attempts = rows.len(), error = e);
                }
            },
            recv(ticker) -> _ => {
                let now = now_millis();
                metrics_feed::ticked(&shared);
                if let Some(w) = watchdog && last_watchdog.elapsed() >= w {
                    notify::notify("WATCHDOG=1");
                    last_watchdog = std::time::Instant::now();
                }
                if now >= next_heartbeat {
                    next_heartbeat = now + HEARTBEAT_EVERY;
                    // A full disk fails the write (SQLITE_FULL) and loses nothing
                    // written before: the daemon goes on watching and cleaning.
                    let beat = Heartbeat { pid: std::process::id(), started_at, heartbeat_at: now, version: env!("CARGO_PKG_VERSION").into() };
                    if let Err(e) = store.put_heartbeat(&beat) {
                        log_warn!("heartbeat_not_written", error = e);
                    }
                }
                // Edits from the CLI: wake the loops (and start or stop loops for added
                // or removed targets) only when configuration changed, so the
                // daemon's own writes never wake it.
                let dv = store.data_version()?;
                if dv != data_version {
                    data_version = dv;
                    handover_due = true;
                    let fp = config_fingerprint(&store)?;
                    if fp != fingerprint {
                        fingerprint = fp;
                        let host = store.host_or_create()?;
                        if containment_key(&host) != contained {
                            contained = containment_key(&host);
                            let cgroups = shared.containment().cgroups.clone();
                            apply_containment(&shared, &store, &host, Some(cgroups))?;
                            log_info!("containment_changed", isolation = shared.containment().isolation.describe());
                        }
                        sync_loops(&store, &shared, &mut loops, &shutdown_rx, false)?;
                        link = refresh_link(&shared, &store, link)?;
                        // A profile's tools or a PATH may have changed: look again now.
                        next_fitness = now;
                        shared.tell_all(LoopMsg::Wake);
                    }
                }
                let host = store.host_or_create()?;
                if now >= next_disk {
                    next_disk = now + disk_watch::SAMPLE_EVERY;
                    disk_watch::sample(&shared, host.disk_reserve_bytes);
                }
                if now >= next_fitness {
                    next_fitness = now + fitness_every;
                    // An unreadable store keeps the last judgement.
                    match store.profiles() {
                        Ok(profiles) => {
                            fitness_watch::check(&shared, &host, &profiles);
                        }
                        Err(e) => log_warn!("fitness_not_checked", error = e),
                    }
                }
                let open = store.open_attempts(&host.id)?;
                let contain = shared.containment();
                let live: Vec<LiveAttempt> = open
                    .iter()
                    .filter(|a| a.state.is_live())
                    .filter_map(|a| Some(LiveAttempt {
                        attempt: a.id,
                        pid: a.pid?,
                        start_time: a.pid_start?,
                        cgroup: (!contain.cgroups.is_none()).then(|| contain.cgroups.attempt(a.id)),
                    }))
                    .collect();
                live_book.retain(|id| live.iter().any(|l| l.attempt == id));
                metrics_feed::meters(&shared.metrics, &store, &open, &live_book);
                let _ = live_tx.try_send(live);
                if link.is_some() {
                    let live_n = open.iter().filter(|a| a.state.is_live()).count() as u32;
                    shared.pool.report(crate::coordinator::link::Report::Status(crate::coordinator::protocol::Status {
                        free: host.capacity.saturating_sub(live_n),
                        draining: host.draining || shared.stopping(),
                        unfit: shared.pool.unfit_profiles(),
                        meters: metrics_feed::pool_meters(&open, &live_book),
                    }));
                }
                metrics_feed::runners(&shared.metrics, &store, &open);
                metrics_feed::sessions(&shared.metrics, &store, &host.id, now);
                if now >= next_sweep {
                    next_sweep = now + SWEEP_EVERY;
                    sweep::sweep(&store, &host, &opts.state_dir, &shared.containment());
                    if let Ok(profiles) = store.profiles() {
                        oci::sweep(&store, &host.id, &profiles);
                    }
                }
                if now >= next_prune {
                    next_prune = now + PRUNE_EVERY;
                    // Pruning is what gives space back: a failed one (a full disk) is
                    // tried again at the next sweep, and stops nothing else.
                    if let Err(e) = retention::upkeep(&store, &host, &opts.state_dir, now) {
                        log_warn!("upkeep_failed", error = e);
                        next_prune = now + SWEEP_EVERY;
                    }
                    prune_caches(&shared, &opts.state_dir, &host);
                }
                if let Some((kind, deadline)) = drain {
                    let waiting = open.iter().filter(|a| a.state.is_unassigned()).count();
                    let busy = open.iter().filter(|a| a.state == crate::domain::AttemptState::Busy).count();
                    match drain_end(kind, waiting, busy, std::time::Instant::now() >= deadline) {
                        Some(DrainEnd::Drained) => {
                            log_info!("drained", busy_left_running = busy);
                            break;
                        }
                        Some(DrainEnd::TimedOut) => {
                            log_warn!("drain_timeout", still_unassigned = waiting, busy_left_running = busy);
                            break;
                        }
                        None => {}
                    }
                }
            },
        }
    }

    // Stop the loops and the sampler; runners keep running in their own sessions.
    drop(shutdown_tx);
    for l in loops.values() {
        let _ = l.tx.send(LoopMsg::Stop);
    }
    for (name, l) in loops.drain() {
        if l.thread.join().is_err() {
            log_error!("loop_panicked", target = name);
        }
    }
    drop(meter_stop_tx);
    let _ = sampler.join();
    if let Some(l) = link.take() {
        l.stop();
    }
    if let Some(t) = metrics_thread {
        let _ = t.join();
    }
    drop(signal_watch);
    let _ = store.clear_heartbeat();
    let stopped = match drain {
        Some((Drain::Handover, _)) => Stopped::Handover,
        _ => Stopped::Terminated,
    };
    log_info!("daemon_stopped", handover = stopped == Stopped::Handover);
    Ok(stopped)
}

/// The host settings containment depends on.
/// Prunes the dependency caches to the host's `cache_cap` on a thread of its own
/// (measuring them walks every file, which the main tick must not wait for).
fn prune_caches(shared: &Arc<Shared>, state_dir: &std::path::Path, host: &crate::domain::Host) {
    let (shared, dir, host) = (shared.clone(), state_dir.to_path_buf(), host.clone());
    let spawned = std::thread::Builder::new()
        .name("caches-prune".into())
        .spawn(move || match SqliteStore::open(&dir) {
            Ok(store) => {
                slots::prune(&shared, &store, &host);
            }
            Err(e) => log_warn!("caches_not_pruned", error = e),
        });
    if let Err(e) = spawned {
        log_warn!("caches_not_pruned", error = e);
    }
}

fn containment_key(host: &crate::domain::Host) -> String {
    format!(
        "{:?} {:?} {:?}",
        host.isolation, host.runner_uids, host.runtime_root
    )
}

/// Decides the containment (see `contain::establish`), says it once in the log and
/// keeps it in the store for `status`, `top` and `doctor`.
fn apply_containment(
    shared: &Shared,
    store: &SqliteStore,
    host: &crate::domain::Host,
    cgroups: Option<crate::runner::cgroup::Cgroups>,
) -> Result<(), StoreError> {
    let c = contain::establish(host, &shared.state_dir, cgroups);
    if let crate::domain::InEffect::None { .. } = c.isolation {
        log_warn!("not_isolated", detail = c.isolation.describe());
    }
    shared.metrics.set_isolation(c.isolation.word());
    store.kv_put(contain::KV_ISOLATION, c.isolation.word())?;
    store.kv_put(contain::KV_CONTAINMENT, &c.isolation.describe())?;
    store.kv_put(contain::KV_CGROUPS, &c.cgroups.summary())?;
    *lock_mutex(&shared.contain) = Arc::new(c);
    Ok(())
}

/// Restarts the coordinator link when the host's coordinator settings changed, and
/// otherwise sends a fresh `hello` (targets or pool profiles may have changed).
fn refresh_link(
    shared: &Arc<Shared>,
    store: &SqliteStore,
    link: Option<pool_link::LinkRun>,
) -> Result<Option<pool_link::LinkRun>, DaemonError> {
    let host = store.host_or_create()?;
    let config = pool_link::LinkSettings::of(&host);
    match link {
        Some(l) if l.config == config => {
            l.update_hello(pool_link::hello(store)?);
            Ok(Some(l))
        }
        Some(l) => {
            l.stop();
            Ok(pool_link::start_link(shared, store)?)
        }
        None if config.url.is_some() => Ok(pool_link::start_link(shared, store)?),
        None => Ok(None),
    }
}

/// Starts a loop for every target that has none and stops loops of removed targets.
fn sync_loops(
    store: &SqliteStore,
    shared: &Arc<Shared>,
    loops: &mut HashMap<String, LoopThread>,
    shutdown_rx: &Receiver<()>,
    once: bool,
) -> Result<(), DaemonError> {
    let targets: Vec<String> = store.targets()?.into_iter().map(|t| t.name).collect();
    let gone: Vec<String> = loops
        .keys()
        .filter(|n| !targets.contains(n))
        .cloned()
        .collect();
    for name in gone {
        if let Some(l) = loops.remove(&name) {
            let _ = l.tx.send(LoopMsg::Stop);
            let _ = l.thread.join();
            lock_mutex(&shared.loops).remove(&name);
            log_info!("target_loop_stopped", target = name);
        }
    }
    for name in targets {
        if loops.contains_key(&name) {
            continue;
        }
        let (tx, rx) = bounded::<LoopMsg>(4);
        let tl = target_loop::TargetLoop::new(name.clone(), shared.clone(), shutdown_rx.clone())?;
        let thread = std::thread::Builder::new()
            .name(format!("target:{name}"))
            .spawn(move || tl.run(rx, once))
            .map_err(|e| {
                DaemonError::Io(format!("cannot start a thread for target {name}: {e}"))
            })?;
        lock_mutex(&shared.loops).insert(name.clone(), tx.clone());
        loops.insert(name.clone(), LoopThread { tx, thread });
        log_info!("target_loop_started", target = name);
    }
    Ok(())
}

/// What configuration looks like: targets, profiles with their revisions, the host.
fn config_fingerprint(store: &SqliteStore) -> Result<String, StoreError> {
    let mut fp = String::new();
    for t in store.targets()? {
        fp.push_str(&format!("{t:?};"));
    }
    for p in store.profiles()? {
        fp.push_str(&format!("{}@{};", p.name, p.revision));
    }
    fp.push_str(&format!("{:?}", store.host()?));
    Ok(fp)
}
