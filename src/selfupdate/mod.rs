//! `runner-manager update`: replaces this binary with a release's, verified against the
//! release's `SHA256SUMS`, and asks the running daemon to hand over to it. `release`
//! reads the release source (`host set release_source=`), `owner` decides whether a
//! package manager owns the binary, `replace` stages, probes and renames it into
//! place, `handover` is the store flag the daemon watches and its drain's end, and
//! `trust` refuses a release directory that anyone but root or the updater could write.

pub mod handover;
pub mod owner;
pub mod release;
pub mod replace;
pub mod trust;

use std::cmp::Ordering;
use std::fmt;

/// The daemon's exit status after a handover: it drained for a new binary and wants
/// to be started again (EX_TEMPFAIL; the systemd unit restarts on it).
pub const EXIT_HANDOVER: i32 = 75;
/// `update`'s exit status when a package manager owns the binary (EX_NOPERM).
pub const EXIT_PACKAGE_MANAGED: i32 = 77;

/// What `update` should do, given this binary's version and the newest release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The release has this version already: nothing to do.
    UpToDate,
    /// This binary is newer than anything the release source offers: nothing to do
    /// (a source that goes back is not a reason to downgrade).
    Ahead,
    /// Install this version (`reinstall`: it is the one running, with `--force`).
    Install { version: String, reinstall: bool },
}

/// The pure decision: a newer release is installed; the same or an older one only
/// with `force` (the operator asked for it, e.g. to repair a damaged binary).
pub fn decide(current: &str, newest: &str, force: bool) -> Decision {
    match crate::install::compare_versions(newest, current) {
        Ordering::Greater => Decision::Install {
            version: newest.to_string(),
            reinstall: false,
        },
        o if force => Decision::Install {
            version: newest.to_string(),
            reinstall: o == Ordering::Equal,
        },
        Ordering::Equal => Decision::UpToDate,
        Ordering::Less => Decision::Ahead,
    }
}

/// Why `update` failed; each message says what to do.
#[derive(Debug)]
pub enum UpdateError {
    /// No `release_source` set, or one that cannot be read.
    Source(String),
    /// The staged binary's SHA-256 is not the published one: removed, the old binary
    /// untouched.
    Checksum { expected: String, actual: String },
    /// A package manager owns the binary: refused, nothing written.
    PackageManaged(String),
    /// The new binary does not run on this host: removed, the old binary untouched.
    Probe(String),
    /// A filesystem step failed.
    Io(String),
}

impl fmt::Display for UpdateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UpdateError::Source(m)
            | UpdateError::PackageManaged(m)
            | UpdateError::Probe(m)
            | UpdateError::Io(m) => f.write_str(m),
            UpdateError::Checksum { expected, actual } => write!(
                f,
                "the new binary's SHA-256 is {actual}, not {expected} as SHA256SUMS says: \
                 refused, the running binary is unchanged; check the release source"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_newer_release_is_installed_the_same_or_older_only_with_force() {
        let install = |v: &str, reinstall| Decision::Install {
            version: v.into(),
            reinstall,
        };
        assert_eq!(decide("0.1.0", "0.2.0", false), install("0.2.0", false));
        assert_eq!(decide("0.9.0", "0.10.0", false), install("0.10.0", false));
        assert_eq!(decide("0.1.0", "0.1.0", false), Decision::UpToDate);
        assert_eq!(decide("0.2.0", "0.1.0", false), Decision::Ahead);
        assert_eq!(decide("0.1.0", "0.1.0", true), install("0.1.0", true));
        assert_eq!(decide("0.2.0", "0.1.0", true), install("0.1.0", false));
        assert_eq!(decide("0.1.0", "0.2.0", true), install("0.2.0", false));
    }

    #[test]
    fn the_packaged_unit_restarts_on_the_handover_code_and_logs_it_as_success() {
        let values = |key: &str| -> Vec<String> {
            crate::service::unit::TEMPLATE
                .lines()
                .filter_map(|l| l.strip_prefix(key)?.strip_prefix('='))
                .flat_map(|v| v.split_whitespace().map(str::to_string))
                .collect()
        };
        let code = EXIT_HANDOVER.to_string();
        assert!(values("RestartForceExitStatus").contains(&code));
        assert!(values("SuccessExitStatus").contains(&code));
    }
}
