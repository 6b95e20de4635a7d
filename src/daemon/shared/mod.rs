//! The shared room: what the daemon's threads share, in parts by who writes each.
//! `Shared` holds the allocation lock (so two target loops never both spend the last
//! slot of host capacity), the drain flag, the metrics registry, and the parts: the
//! host's facts (`host::facts`, written by the host room's watchers), the meter
//! peaks (`meters`, the sampler's), the loop registry (`handles`, the main loop's),
//! the heartbeats (`beats`), what the feeds heard (`heard`) and the coordinated
//! pool (`pool`). It uses the host room only.

pub(super) mod beats;
pub(super) mod handles;
pub(super) mod heard;
pub(super) mod meters;
pub(super) mod pool;

pub use super::host::facts::lock;
pub use meters::Peak;

use super::host::contain::Containment;
use super::host::facts::HostFacts;
use crate::domain::ScalePolicy;
use crate::domain::job_owner::JobOwner;
use crate::meter::Meter;
use crate::metrics::Metrics;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
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

pub struct Shared {
    pub state_dir: PathBuf,
    /// Held while reading live counts, allocating and recording new `pending`
    /// attempts, so host capacity is never spent twice by two loops.
    pub alloc_lock: Mutex<()>,
    /// SIGTERM received: start nothing, deregister idle runners, then exit.
    pub stopping: AtomicBool,
    /// What `--metrics-listen` serves; fed whether or not anyone listens.
    pub metrics: Arc<Metrics>,
    /// What the host room's watchers know of the machine.
    pub host: HostFacts,
    /// The meter sampler's latest peaks; loops copy them into the attempt when they
    /// save it.
    pub meters: meters::Meters,
    /// The target loops' handles (inbox and thread), by target name.
    pub loops: handles::Loops,
    /// When each loop last passed and the main thread last ticked.
    pub beats: beats::Beats,
    /// What the demand feeds heard: webhook jobs and whose job each runner took.
    pub heard: heard::Heard,
    /// The coordinated pool's launch book and link state.
    pub pool: pool::Pool,
}

impl Shared {
    pub fn new(state_dir: PathBuf) -> Shared {
        Shared {
            state_dir,
            alloc_lock: Mutex::new(()),
            stopping: AtomicBool::new(false),
            metrics: Arc::new(Metrics::new()),
            host: HostFacts::default(),
            meters: Default::default(),
            loops: Default::default(),
            beats: Default::default(),
            heard: Default::default(),
            pool: pool::Pool::new(crate::timefmt::now_millis()),
        }
    }

    /// Keeps whose job each named runner took (only names shaped as ours).
    pub fn note_owners<'a>(&self, owners: impl IntoIterator<Item = (&'a str, JobOwner)>) {
        self.heard.note_owners(owners);
    }

    /// Whose job `runner` took, if a source said.
    pub fn owner_of(&self, runner: &str) -> Option<JobOwner> {
        self.heard.owner_of(runner)
    }

    /// The containment in effect now.
    pub fn containment(&self) -> Arc<Containment> {
        self.host.containment()
    }

    /// Why no profile may start for want of disk space, while that holds.
    pub fn disk_reason(&self) -> Option<String> {
        self.host.disk_reason()
    }

    /// The profiles a required fitness check stops, with why.
    pub fn fitness_reasons(&self) -> std::collections::BTreeMap<String, String> {
        self.host.fitness_reasons()
    }

    /// Samples the state directory's free space (`disk_watch`), waking the target
    /// loops when that changes what they may start.
    pub fn watch_disk(&self, reserve: u64) {
        let (_, changed) =
            super::host::disk_watch::sample(&self.host, &self.state_dir, &self.metrics, reserve);
        if changed {
            self.tell_all(LoopMsg::Wake);
        }
    }

    /// Reads the host's fitness again (`fitness_watch`), waking the target loops
    /// when a profile's changed.
    pub fn watch_fitness(&self, host: &crate::domain::Host, profiles: &[ScalePolicy]) {
        let (_, changed) =
            super::host::fitness_watch::check(&self.host, &self.metrics, host, profiles);
        if changed {
            self.tell_all(LoopMsg::Wake);
        }
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
        self.meters.record(attempt, meter);
    }

    pub fn peak(&self, attempt: i64) -> Option<Peak> {
        self.meters.peak(attempt)
    }

    pub fn forget_meter(&self, attempt: i64) {
        self.meters.forget(attempt);
    }
}
