//! What the host room's watchers know of the machine, as `Shared` holds it
//! (`Shared::host`): the containment in effect and the uid claim (written when the
//! host's settings change), the state directory's free space (`disk_watch`), the
//! profiles' fitness (`fitness_watch`) and when the runner installs are next checked
//! (`runner_book`). Each target loop and worker reads them; only their watcher writes.

use super::contain::Containment;
use super::disk_watch::{DiskState, FreeSpace, free_bytes};
use super::fitness_watch::FitnessState;
use super::runner_book::{DEFAULT_EVERY_MS, UpdateBook};
use crate::runner::claim::UidClaim;
use std::sync::{Arc, Mutex, MutexGuard};

pub struct HostFacts {
    /// The containment runners start with; replaced whole when the host's settings
    /// change, read by each start.
    pub contain: Mutex<Arc<Containment>>,
    /// This daemon's host-wide claim on its runner uids (`runner::claim`), moved with
    /// `runner_uids` and let go when per-attempt uids are not in effect.
    pub uid_claim: Mutex<Option<UidClaim>>,
    /// The state directory's free space as last sampled, and whether starts are held
    /// for want of it (`disk_watch`).
    pub disk: Mutex<DiskState>,
    /// Where `disk_watch` reads free space from (`statvfs`; a test's own).
    pub free_space: FreeSpace,
    /// The profiles a required fitness check stops, as last judged (`fitness_watch`).
    pub fitness: Mutex<FitnessState>,
    /// When the runner install is next checked, one check per host at a time
    /// (`workers::runner_update`).
    pub runner_update: UpdateBook,
}

impl Default for HostFacts {
    fn default() -> HostFacts {
        HostFacts {
            contain: Mutex::new(Arc::new(Containment::none())),
            uid_claim: Mutex::new(None),
            disk: Mutex::new(DiskState::default()),
            free_space: free_bytes,
            fitness: Mutex::new(FitnessState::default()),
            runner_update: UpdateBook::new(DEFAULT_EVERY_MS),
        }
    }
}

impl HostFacts {
    /// The containment in effect now.
    pub fn containment(&self) -> Arc<Containment> {
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
}

/// Locks a mutex, taking the data even if a thread panicked while holding it: the
/// data here (maps of loop handles and readings) is valid after any panic.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
