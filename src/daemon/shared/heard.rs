//! What the demand feeds heard (`Shared::heard`), written by the feeds room (the
//! webhook listener, the REST reads, the scale set listeners) and read by every
//! target loop: the jobs heard of by webhook, and whose job each runner took.

use crate::daemon::host::facts::lock;
use crate::domain::job_owner::{JobOwner, OwnerBook};
use std::sync::Mutex;

/// How every runner name of ours begins (`domain::runner_name`).
const RUNNER_PREFIX: &str = "rm-";

pub struct Heard {
    /// The jobs heard of by webhook, which every target loop's client reads (`webhook`).
    pub hooks: crate::github::hooks::SharedBook,
    /// Whose job each runner took, as the demand sources said; the target loops copy
    /// an entry into its attempt for the usage roll-up.
    owners: Mutex<OwnerBook>,
}

impl Default for Heard {
    fn default() -> Heard {
        Heard {
            hooks: crate::github::hooks::HookBook::shared(),
            owners: Mutex::new(OwnerBook::default()),
        }
    }
}

impl Heard {
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
}
