//! What the daemon's threads share: the allocation lock (so two target loops never
//! both spend the last slot of host capacity), the drain flag, meter readings,
//! the target loops' handles, the metrics registry with the times
//! `/healthz` judges freshness by, the state directory's free space, the host's
//! fitness, and whose job each runner took.

pub(super) mod handles;
pub(super) mod pool;
use crate::domain::job_owner::{JobOwner, OwnerBook};
use crate::meter::Meter;
use crate::metrics::Metrics;
use crate::timefmt::Millis;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

/// A message to a target loop. Anything but `Stop` only makes the next pass sooner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoopMsg {
    /// Something changed (a store edit, a runner exit): pass now.
    Wake,
    /// SIGHUP: re-read the target and its credentials, then pass.
    Reload,
    /// Leave the loop after the current pass.
    Stop,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Peak {
    pub rss_bytes: u64,
    pub cpu_millis: u64,
    pub mean_rss_bytes: u64,
}

/// How every runner name of ours begins (`domain::runner_name`).
const RUNNER_PREFIX: &str = "rm-";

pub struct Shared {
    pub state_dir: PathBuf,
    /// Held while reading live counts, allocating and recording new `pending`
    /// attempts, so host capacity is never spent twice by two loops.
    pub alloc_lock: Mutex<()>,
    /// SIGTERM received: start nothing, deregister idle runners, then exit.
    pub stopping: AtomicBool,
    /// The meter sampler's latest peaks, by attempt id; loops copy them into the
    /// attempt when they save it.
    pub meters: Mutex<HashMap<i64, Peak>>,
    /// The target loops' handles (inbox and thread), by target name.
    pub loops: handles::Loops,
    /// The coordinated pool's launch book and link state.
    pub pool: pool::Pool,
    /// What `--metrics-listen` serves; fed whether or not anyone listens.
    pub metrics: Arc<Metrics>,
    /// When each target loop last finished a pass (or started), by target name.
    pub passes: Mutex<HashMap<String, Millis>>,
    /// When the main thread last ticked.
    pub last_tick: AtomicI64,
    /// The containment runners start with; replaced whole when the host's settings
    /// change, read by each start.
    pub contain: Mutex<Arc<super::host::contain::Containment>>,
    /// This daemon's host-wide claim on its runner uids (`runner::claim`), moved with
    /// `runner_uids` and let go when per-attempt uids are not in effect.
    pub uid_claim: Mutex<Option<crate::runner::claim::UidClaim>>,
    /// The state directory's free space as last sampled, and whether starts are held
    /// for want of it (`disk_watch`).
    pub disk: Mutex<super::host::disk_watch::DiskState>,
    /// Where `disk_watch` reads free space from (`statvfs`; a test's own).
    pub free_space: super::host::disk_watch::FreeSpace,
    /// The profiles a required fitness check stops, as last judged (`fitness_watch`).
    pub fitness: Mutex<super::host::fitness_watch::FitnessState>,
    /// When the runner install is next checked, one check per host at a time
    /// (`runner_update`).
    pub runner_update: super::host::runner_update::UpdateBook,
    /// The jobs heard of by webhook, which every target loop's client reads (`webhook`).
    pub hooks: crate::github::hooks::SharedBook,
    /// Whose job each runner took, as the demand sources said (the REST reads, the
    /// webhook listener, the scale set listeners); the target loops copy an entry
    /// into its attempt for the usage roll-up.
    pub owners: Mutex<OwnerBook>,
}

impl Shared {
    pub fn new(state_dir: PathBuf) -> Shared {
        Shared {
            state_dir,
            alloc_lock: Mutex::new(()),
            stopping: AtomicBool::new(false),
            meters: Mutex::new(HashMap::new()),
            loops: Default::default(),
            pool: pool::Pool::new(crate::timefmt::now_millis()),
            metrics: Arc::new(Metrics::new()),
            passes: Mutex::new(HashMap::new()),
            last_tick: AtomicI64::new(crate::timefmt::now_millis()),
            contain: Mutex::new(Arc::new(super::host::contain::Containment::none())),
            uid_claim: Mutex::new(None),
            disk: Mutex::new(Default::default()),
            free_space: super::host::disk_watch::free_bytes,
            fitness: Mutex::new(Default::default()),
            runner_update: super::host::runner_update::UpdateBook::new(
                super::host::runner_update::DEFAULT_EVERY_MS,
            ),
            hooks: crate::github::hooks::HookBook::shared(),
            owners: Mutex::new(OwnerBook::default()),
        }
    }

    /// Keeps whose job each named runner took (only names shaped as ours).
    pub fn note_owners<'a>(&self, owners: impl IntoIterator<Item = (&'a str, JobOwner)>) {
        let mut book = lock(&self.owners);
        for (runner, owner) in owners {
            book.put(RUNNER_PREFIX, runner, owner);
        }
    }

    /// Whose job `runner` took, if a source said.
    pub fn owner_of(&self, runner: &str) -> Option<JobOwner> {
        lock(&self.owners).get(runner).cloned()
    }

    /// The containment in effect now.
    pub fn containment(&self) -> Arc<super::host::contain::Containment> {
        lock(&self.contain).clone()
    }

    /// Why no profile may start for want of disk space, while that holds.
    pub fn disk_reason(&self) -> Option<String> {
        lock(&self.disk).reason()
    }

    /// The profiles a required fitness check stops, with why.
    pub fn fitness_reasons(&self) -> std::collections::BTreeMap<String, String> {
        lock(&self.fitness).unfit.clone()
    }

    pub fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// Sends `msg` to every target loop (a full inbox already holds a wake-up).
    pub fn tell_all(&self, msg: LoopMsg) {
        self.loops.tell_all(msg);
    }

    /// Sends `msg` to one target's loop.
    pub fn tell(&self, target: &str, msg: LoopMsg) {
        self.loops.tell(target, msg);
    }

    pub fn record_meter(&self, attempt: i64, meter: &Meter) {
        lock(&self.meters).insert(
            attempt,
            Peak {
                rss_bytes: meter.peak_rss_bytes,
                cpu_millis: meter.cpu_millis,
                mean_rss_bytes: meter.mean_rss_bytes(),
            },
        );
    }

    pub fn peak(&self, attempt: i64) -> Option<Peak> {
        lock(&self.meters).get(&attempt).copied()
    }

    pub fn forget_meter(&self, attempt: i64) {
        lock(&self.meters).remove(&attempt);
    }
}

/// Locks a mutex, taking the data even if a thread panicked while holding it: the
/// data here (maps of loop handles and readings) is valid after any panic.
pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
