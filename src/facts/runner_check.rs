//! What `status`, `doctor` and `top` show of the managed runner installs
//! (`Seen`), read from what `daemon::workers::runner_update` keeps in the store
//! (`store::daemon_facts`'s `RunnerCheck`) and, when asked, the installs themselves.

use crate::install;
use crate::store::{Store, daemon_facts};
use std::collections::BTreeSet;
use std::path::PathBuf;

/// What `status`, `doctor` and `top` show of the runner installs: the versions in
/// use, the newest release seen, the pin, and the last check.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Seen {
    /// `latest` or the pinned version.
    pub runner_version: String,
    pub in_use: Vec<String>,
    pub newest: Option<String>,
    pub checked_at: Option<String>,
    pub problem: Option<String>,
}

impl Seen {
    /// From the store; `in_use` from the installs themselves when `installs` names
    /// them, else as the daemon last wrote it.
    pub fn read(
        store: &dyn Store,
        pin: Option<&str>,
        installs: Option<&[PathBuf]>,
    ) -> Result<Seen, crate::store::StoreError> {
        let check = daemon_facts::runner_check(store)?;
        Ok(Seen {
            runner_version: pin.unwrap_or("latest").to_string(),
            in_use: match installs {
                Some(paths) => in_use(paths),
                None => check.in_use,
            },
            newest: check.newest,
            checked_at: check.checked_at.map(crate::timefmt::format_rfc3339),
            problem: check.problem,
        })
    }

    /// `2.336.0 (newest 2.337.0, runner_version latest)`.
    pub fn line(&self) -> String {
        let used = if self.in_use.is_empty() {
            "-".to_string()
        } else {
            self.in_use.join(", ")
        };
        let newest = self.newest.as_deref().unwrap_or("not seen yet");
        let mut s = format!(
            "{used} (newest {newest}, runner_version {})",
            self.runner_version
        );
        if let Some(p) = &self.problem {
            s.push_str(&format!("; last check: {p}"));
        }
        s
    }
}

/// The distinct versions of these installs (those that say), oldest first.
pub fn in_use(paths: &[PathBuf]) -> Vec<String> {
    let mut v: Vec<String> = paths
        .iter()
        .filter_map(|p| install::installed_version(p))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    v.sort_by(|a, b| install::compare_versions(a, b));
    v
}
