//! The daemon: `run` takes the lock, judges and claims its host id (`identity`),
//! spawns one loop per target, the meter sampler and the coordinator link, then hands
//! over to `main_loop`, which watches signals and joins them all.

mod feeds;
pub mod host;
mod identity;
mod main_loop;
pub mod notify;
mod shared;
pub mod signals;
mod target_loop;
mod workers;
pub use host::disk_watch::free_bytes;

pub use host::fitness_watch::CHECK_EVERY as FITNESS_EVERY;
pub use shared::LoopMsg;

use crate::facts::lock::{DaemonLock, LockError};
use crate::logging::Level;
use crate::runner::claim::ClaimError;
use crate::store::{Heartbeat, SqliteStore, Store, StoreError, daemon_facts};
use crate::timefmt::{Millis, now_millis};
use crate::{log_info, log_warn};
use crossbeam_channel::{Receiver, bounded};
use main_loop::MainLoop;
use shared::handles::{LoopHandle, SamplerHandle};
use shared::{Shared, lock as lock_mutex};
use signals::SignalWatch;
use std::path::PathBuf;
use std::sync::Arc;
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
    /// How often `host::retention::upkeep` prunes ended attempts, their logs and caches
    /// and reclaims the store's space ([`UPKEEP_EVERY`] unless told).
    pub upkeep_every: Duration,
    /// A description file the daemon follows (`config_file::Follower`): applied at
    /// start, on SIGHUP and when it changes.
    pub config: Option<PathBuf>,
}

#[derive(Debug)]
pub enum DaemonError {
    Store(StoreError),
    Lock(LockError),
    Io(String),
    /// `--once`: these targets' passes ended with an error; what the first one's
    /// says of its target gives the exit class.
    Failed {
        text: String,
        cause: Option<crate::reconcile::pass::Cause>,
    },
}

impl std::fmt::Display for DaemonError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DaemonError::Store(e) => write!(f, "{e}"),
            DaemonError::Lock(e) => write!(f, "{e}"),
            DaemonError::Io(e) | DaemonError::Failed { text: e, .. } => f.write_str(e),
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
/// How often `host::retention::upkeep` prunes, removes logs and reclaims the store's space,
/// unless `--upkeep-every` says otherwise.
pub const UPKEEP_EVERY: Duration = Duration::from_secs(3_600);
/// How often the managed runner installs are checked unless `--runner-check` says
/// otherwise (`host::runner_book`).
pub const RUNNER_CHECK_EVERY: Duration =
    Duration::from_millis(host::runner_book::DEFAULT_EVERY_MS as u64);

/// How the daemon stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// SIGTERM (or `--once` done): exit 0.
    Terminated,
    /// SIGINT (Ctrl-C): exit 130, the table's `interrupted`.
    Interrupted,
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
    // The file it follows, applied before anything reads the configuration.
    let mut follower = opts
        .config
        .as_deref()
        .map(|f| crate::config_file::Follower::new(f, &opts.state_dir));
    if let Some(f) = &mut follower {
        f.apply(&store, now_millis(), "start");
    }
    // Before anything reads the configuration to act on it (see `ConfigSeen`).
    let config_seen = main_loop::ConfigSeen::read(&store)?;
    // The host id judged against this machine and claimed on it before anything acts
    // on its runners: a copied state directory is refused beside its original.
    let (host, _host_claim) = identity::at_start(&store, store.host_or_create()?, &opts.state_dir)?;
    let started_at = now_millis();
    let shared = Arc::new(Shared::new(opts.state_dir.clone()));
    shared
        .pool
        .set_grace(opts.fallback_grace.as_millis() as Millis);
    // `--once` is one pass: it does not wait for a release to download.
    shared.host.runner_update.set_every(if opts.once {
        0
    } else {
        opts.runner_check.as_millis() as Millis
    });
    let contained = containment_key(&host);
    contain_at_start(&shared, &store, &host)?;
    // The first passes, and the first scrape, know whether there is room to start
    // runners.
    shared.watch_disk(host.disk_reserve_bytes);
    shared.watch_fitness(&host, &store.profiles()?);
    log_info!(
        "daemon_started",
        host = host.id,
        state_dir = opts.state_dir.display(),
        pid = std::process::id(),
        isolation = shared.containment().isolation.describe(),
        cgroups = shared.containment().cgroups.summary()
    );
    let link = feeds::pool_link::start_link(&shared, &store)?;
    let (shutdown_tx, shutdown_rx) = bounded::<()>(0);
    // The `--metrics-listen` listener (not with `--once`).
    let metrics_thread = match opts.metrics_listen.filter(|_| !opts.once) {
        Some(listen) => Some(
            feeds::metrics_feed::serve(listen, &shared, &shutdown_rx).map_err(DaemonError::Io)?,
        ),
        None => None,
    };
    let _webhook = (!opts.once).then(|| feeds::webhook::serve(&store, &shared, &shutdown_rx));

    sweep_at_start(&store, &host, &opts.state_dir, &shared)?;

    // The heartbeat goes first, so `status` says the daemon runs as soon as it can
    // start runners, not a tick later.
    if !opts.once {
        first_heartbeat(&store, started_at)?;
    }
    // The usage counters' baseline, before a loop can end an attempt: what ends from
    // here on is counted.
    let usage = (!opts.once)
        .then(|| feeds::metrics_feed::usage_baseline(&shared.metrics, &store, now_millis()))
        .flatten();
    sync_loops(&store, &shared, &shutdown_rx, opts.once)?;
    if opts.once {
        return once_ended(&shared);
    }

    let Some((signal_watch, signal_rx)) = watched else {
        return Ok(Stopped::Terminated);
    };
    let (sampler, report_rx) = SamplerHandle::start(Duration::from_secs(1))
        .map_err(|e| DaemonError::Io(format!("cannot start the meter sampler: {e}")))?;
    let threads = main_loop::Threads {
        shutdown_tx,
        shutdown_rx,
        sampler,
        link,
        metrics_thread,
        signal_watch,
    };
    let end_shared = Arc::clone(&shared);
    let start = main_loop::Start {
        opts: &opts,
        store: &store,
        shared,
        signal_rx,
        report_rx,
        process_start,
        started_at,
        contained,
        config_seen,
        usage,
        follower,
    };
    until_stopped(MainLoop::new(start, threads)?, &end_shared)
}

/// The main loop's events carried out until it stops, then its threads stopped and
/// our empty base cgroups removed.
fn until_stopped(mut main: MainLoop<'_>, shared: &Shared) -> Result<Stopped, DaemonError> {
    main.check_handover();
    while let Some(event) = main.next_event() {
        if main.handle_event(event)?.is_break() {
            break;
        }
    }
    let stopped = main.shutdown();
    // Our base cgroups go once nothing lives in them (busy runners keep theirs for
    // the next daemon): a host whose state directories come and go would otherwise
    // pile them up.
    let removed = shared.containment().cgroups.remove_empty_bases();
    if removed > 0 {
        log_info!("cgroup_bases_removed", count = removed);
    }
    Ok(stopped)
}

/// `--once`: waits for every loop's pass. A pass that could not reach its target
/// (credentials, GitHub's refusal) is a failed `--once`, naming each such target, with
/// the class of the first (by name): a 401 is the credentials class, not 0.
fn once_ended(shared: &Shared) -> Result<Stopped, DaemonError> {
    let mut failed: Vec<(String, Option<crate::reconcile::pass::Cause>)> = Vec::new();
    for (name, l) in shared.loops.take_all() {
        match l.join() {
            Ok(None) => {}
            Ok(Some(e)) => failed.push((format!("target {name}: {e}"), Some(e.cause()))),
            Err(_) => failed.push((format!("target {name}: its loop panicked"), None)),
        }
    }
    failed.sort_by(|a, b| a.0.cmp(&b.0));
    let Some((_, cause)) = failed.first().cloned() else {
        return Ok(Stopped::Terminated);
    };
    let text: Vec<String> = failed.into_iter().map(|(t, _)| t).collect();
    Err(DaemonError::Failed {
        text: text.join("; "),
        cause,
    })
}

/// Prunes the dependency caches to the host's `cache_cap` on a thread of its own
/// (measuring them walks every file, which the main tick must not wait for).
fn prune_caches(shared: &Arc<Shared>, state_dir: &std::path::Path, host: &crate::domain::Host) {
    let (shared, dir, host) = (shared.clone(), state_dir.to_path_buf(), host.clone());
    let spawned = std::thread::Builder::new()
        .name("caches-prune".into())
        .spawn(move || match SqliteStore::open(&dir) {
            Ok(store) => {
                workers::slots::prune(&shared, &store, &host);
            }
            Err(e) => log_warn!("caches_not_pruned", error = e),
        });
    if let Err(e) = spawned {
        log_warn!("caches_not_pruned", error = e);
    }
}

/// The host settings containment depends on.
fn containment_key(host: &crate::domain::Host) -> String {
    format!(
        "{:?} {:?} {:?}",
        host.isolation, host.runner_uids, host.runtime_root
    )
}

/// The containment a starting daemon runs with: decided and kept (`apply_containment`),
/// refused when another daemon holds some of the host's runner uids, and the live
/// attempts' limits written back (the unit turned the controllers off when the last
/// daemon stopped: `runner::cgroup::handover`).
fn contain_at_start(
    shared: &Shared,
    store: &SqliteStore,
    host: &crate::domain::Host,
) -> Result<(), DaemonError> {
    // A second daemon whose runner uids overlap a running one's would kill and delete
    // what that one's jobs run and leave: refused at once, naming the holder.
    if let Some(held @ ClaimError::Held { .. }) = apply_containment(shared, store, host, None)? {
        return Err(DaemonError::Lock(LockError::Uids(held)));
    }
    host::contain::restore_limits(
        &shared.containment(),
        &store.open_attempts(&host.id)?,
        &store.profiles()?,
    );
    Ok(())
}

/// Decides the containment (see `host::contain::establish`), claims its runner uids
/// host-wide (`host::contain::claim_uids`), says it once in the log and keeps it in the
/// store for `status`, `top` and `doctor`. A refused claim leaves the isolation
/// `refused` (no runner starts) and is returned.
fn apply_containment(
    shared: &Shared,
    store: &SqliteStore,
    host: &crate::domain::Host,
    cgroups: Option<crate::runner::cgroup::Cgroups>,
) -> Result<Option<ClaimError>, StoreError> {
    let mut c = host::contain::establish(host, &shared.state_dir, cgroups);
    host::contain::find_shared_dirs(&mut c, &shared.containment(), &shared.state_dir);
    let refused = host::contain::claim_uids(&shared.host.uid_claim, &shared.state_dir, &mut c);
    if let crate::domain::InEffect::None { .. } = c.isolation {
        log_warn!(
            "not_isolated",
            detail = c.isolation.describe(),
            hint = crate::domain::isolation::CONTAIN_HINT
        );
    }
    shared.metrics.set_isolation(c.isolation.word());
    // Runner uids may not read the metrics (other repositories' names and usage).
    shared.metrics.close_to(match c.isolation {
        crate::domain::InEffect::Uids(range) => Some(range),
        _ => None,
    });
    daemon_facts::put_containment(
        store,
        &daemon_facts::Containment {
            isolation: c.isolation.word().to_string(),
            line: c.isolation.describe(),
            cgroups: c.cgroups.summary(),
            enforced: c.cgroups.enforced(),
        },
    )?;
    *lock_mutex(&shared.host.contain) = Arc::new(c);
    Ok(refused)
}

/// Restarts the coordinator link when the host's coordinator settings changed, and
/// otherwise sends a fresh `hello` (targets or pool profiles may have changed).
fn refresh_link(
    shared: &Arc<Shared>,
    store: &SqliteStore,
    link: Option<feeds::pool_link::LinkRun>,
) -> Result<Option<feeds::pool_link::LinkRun>, DaemonError> {
    let host = store.host_or_create()?;
    let config = feeds::pool_link::LinkSettings::of(&host);
    match link {
        Some(l) if l.config == config => {
            l.update_hello(feeds::pool_link::hello(store)?);
            Ok(Some(l))
        }
        Some(l) => {
            l.stop();
            Ok(feeds::pool_link::start_link(shared, store)?)
        }
        None if config.url.is_some() => Ok(feeds::pool_link::start_link(shared, store)?),
        None => Ok(None),
    }
}

/// Starts a loop for every target that has none and stops loops of removed targets.
/// Orphans left on disk by a crash: roots and processes that no attempt explains, and
/// containers labelled for this host.
fn sweep_at_start(
    store: &SqliteStore,
    host: &crate::domain::Host,
    state_dir: &std::path::Path,
    shared: &Shared,
) -> Result<(), DaemonError> {
    host::sweep::sweep(store, host, state_dir, &shared.containment());
    workers::oci::sweep(store, &host.id, &store.profiles()?);
    Ok(())
}

/// The daemon's first heartbeat, written as it starts.
fn first_heartbeat(store: &SqliteStore, started_at: Millis) -> Result<(), DaemonError> {
    store.put_heartbeat(&Heartbeat {
        pid: std::process::id(),
        started_at,
        heartbeat_at: started_at,
        version: crate::version::version(),
    })?;
    Ok(())
}

fn sync_loops(
    store: &SqliteStore,
    shared: &Arc<Shared>,
    shutdown_rx: &Receiver<()>,
    once: bool,
) -> Result<(), DaemonError> {
    let targets: Vec<String> = store.targets()?.into_iter().map(|t| t.name).collect();
    for name in shared.loops.names() {
        if targets.contains(&name) {
            continue;
        }
        // Out of the map first: dropping the handle stops the loop and joins it.
        if let Some(l) = shared.loops.remove(&name) {
            drop(l);
            log_info!("target_loop_stopped", target = name);
        }
    }
    for name in targets {
        if shared.loops.contains(&name) {
            continue;
        }
        let tl = target_loop::TargetLoop::new(name.clone(), shared.clone(), shutdown_rx.clone())?;
        let l = LoopHandle::spawn(&name, move |inbox| tl.run(inbox, once)).map_err(|e| {
            DaemonError::Io(format!("cannot start a thread for target {name}: {e}"))
        })?;
        shared.loops.insert(name.clone(), l);
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
