//! Exit codes that name the fix: one table (`TABLE`) gives each failure class its
//! stable code, its name and the command that fixes it; the error path, the man page's
//! EXIT STATUS section, the README and their tests all read it. Errors are classed
//! from their types (`GhError`, `AuthError`, `StoreError`, `LockError`), never from
//! their text.

use crate::daemon::DaemonError;
use crate::facts::lock::LockError;
use crate::github::{AuthError, GhError};
use crate::reconcile::pass::Cause;
use crate::store::StoreError;

/// A failure class. Its code, name and remedy are its row in [`TABLE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Failure {
    Other,
    Usage,
    Credentials,
    TargetNotFound,
    RateLimited,
    GitHubUnreachable,
    StoreLocked,
    StoreUnreadable,
    HostUnfit,
    CoordinatorUnreachable,
    PermissionDenied,
    NoStore,
    Conflict,
    Handover,
    PackageManaged,
    UpdateAvailable,
    Interrupted,
}

/// One row of the table: what a script branches on (`code`), what a person reads
/// (`name`, `meaning`) and what they type next (`remedy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    pub failure: Failure,
    pub code: i32,
    pub name: &'static str,
    pub meaning: &'static str,
    /// A command line; `{target}`, `{command}`, `{dir}` and `{until}` are filled in
    /// from the failure ([`Subject`]) or, unknown, left as `NAME`, `COMMAND`, `DIR`
    /// and `the reset`. Other capitals (`PATH`, `URL`) are for the operator to fill.
    pub remedy: &'static str,
}

/// Every failure class, in code order. Codes are a scripting contract: a class keeps
/// its number for good, and a new class takes a new one.
pub const TABLE: &[Row] = &[
    Row {
        failure: Failure::Other,
        code: 1,
        name: "other",
        meaning: "a failure of no class below: a failed check GitHub did not cause, an I/O error",
        remedy: "runner-manager doctor",
    },
    Row {
        failure: Failure::Usage,
        code: 2,
        name: "usage",
        meaning: "bad usage or invalid input: an unknown command or option, a malformed value, a name that does not exist (with the stored one it most likely meant) or is taken, an unreadable token file or runner directory; the message names the argument, and nothing was written",
        remedy: "runner-manager {command} --help",
    },
    Row {
        failure: Failure::Credentials,
        code: 3,
        name: "credentials",
        meaning: "GitHub refused the target's credentials (401, or 403 without permission to manage runners), or they could not be read",
        remedy: "runner-manager target set {target} token_file=PATH",
    },
    Row {
        failure: Failure::TargetNotFound,
        code: 4,
        name: "target-not-found",
        meaning: "GitHub answered 404 for the target's repository or organization (absent, or hidden from its credentials)",
        remedy: "runner-manager target set {target} token_file=PATH (a token that can see the repository or organization; GitHub hides what a token may not see behind 404), or target rm {target} and add it again under its right name",
    },
    Row {
        failure: Failure::RateLimited,
        code: 5,
        name: "rate-limited",
        meaning: "GitHub's rate limit (primary, secondary or retry-after) refused the request",
        remedy: "runner-manager target check {target} after {until}",
    },
    Row {
        failure: Failure::GitHubUnreachable,
        code: 6,
        name: "github-unreachable",
        meaning: "GitHub could not be reached, or answered 5xx or something that is not its API",
        remedy: "runner-manager target set {target} api_url=URL (or target check {target} once the network is back)",
    },
    Row {
        failure: Failure::StoreLocked,
        code: 7,
        name: "store-locked",
        meaning: "another daemon holds the state directory, some of the host's runner uids or its host id (a copied state directory: host reidentify), or another process held the store past the busy timeout",
        remedy: "runner-manager --state-dir {dir} status (stop the daemon it shows, or give another --state-dir)",
    },
    Row {
        failure: Failure::StoreUnreadable,
        code: 8,
        name: "store-unreadable",
        meaning: "the store is corrupt (every command that writes checks it first), not a runner-manager store, or written by a newer runner-manager; it was left untouched",
        remedy: "runner-manager --state-dir {dir} doctor",
    },
    Row {
        failure: Failure::HostUnfit,
        code: 9,
        name: "host-unfit",
        meaning: "a required doctor check fails: the daemon starts no runner on this host",
        remedy: "runner-manager doctor (fix each required FAIL line as its hint says)",
    },
    Row {
        failure: Failure::CoordinatorUnreachable,
        code: 10,
        name: "coordinator-unreachable",
        meaning: "the host's coordinator does not answer at its URL",
        remedy: "runner-manager host set coordinator=URL",
    },
    Row {
        failure: Failure::PermissionDenied,
        code: 11,
        name: "permission-denied",
        meaning: "the state directory or a file in it may not be read or written by this user",
        remedy: "runner-manager --state-dir OTHER_DIR {command} (a directory this user owns), or run it as the owner of {dir}",
    },
    Row {
        failure: Failure::NoStore,
        code: 12,
        name: "no-store",
        meaning: "the state directory holds no store, and this command does not create one (a mistyped --state-dir, or another user's default)",
        remedy: "runner-manager --state-dir DIR_WITH_THE_STORE {command} (or set up {dir}: runner-manager --state-dir {dir} target add NAME ...)",
    },
    Row {
        failure: Failure::Conflict,
        code: 13,
        name: "conflict",
        meaning: "another edit came first (a stale --revision) or the thing is still in use; nothing was written",
        remedy: "runner-manager {command} again, after what the message names (a fresh show for the revision, or removing what uses it)",
    },
    Row {
        failure: Failure::UpdateAvailable,
        code: 14,
        name: "update-available",
        meaning: "update --check: the release source has a newer release than this binary (0: up to date, or this binary is newer)",
        remedy: "runner-manager update",
    },
    Row {
        failure: Failure::Handover,
        code: crate::selfupdate::EXIT_HANDOVER,
        name: "handover",
        meaning: "the daemon drained for a new binary (runner-manager update); its supervisor restarts it on the new one (the systemd unit's RestartForceExitStatus=75, or a docs/supervisors.md recipe)",
        remedy: "runner-manager status (nothing to fix under a supervisor; by hand, start the daemon again)",
    },
    Row {
        failure: Failure::PackageManaged,
        code: crate::selfupdate::EXIT_PACKAGE_MANAGED,
        name: "package-managed",
        meaning: "update refused: a package manager owns this binary, and replacing it would fight that manager; nothing was changed",
        remedy: "runner-manager --version (then upgrade the package that installed it: apt, dnf, nix...)",
    },
    Row {
        failure: Failure::Interrupted,
        code: 130,
        name: "interrupted",
        meaning: "stopped by Ctrl-C or SIGINT (the daemon: its runners keep running; its SIGTERM is a normal stop, 0), the demo also by SIGTERM, top and the demo's top also by SIGHUP or their terminal closing, as a shell reports an interrupt",
        remedy: "runner-manager {command}",
    },
];

/// What a remedy's placeholders are filled with; `None` leaves the generic word.
/// Only names, a command path from the spec, a directory and a time: never a value
/// from argv, so never a secret.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Subject {
    pub target: Option<String>,
    pub command: Option<String>,
    pub dir: Option<String>,
    pub until: Option<String>,
    /// The one command that fixes this very failure, when the failure knows it (a
    /// mistyped name's command with the name it meant): said instead of the table's.
    pub fix: Option<String>,
}

impl Failure {
    pub fn row(self) -> &'static Row {
        TABLE
            .iter()
            .find(|r| r.failure == self)
            .expect("every class has a row in TABLE")
    }

    pub fn code(self) -> i32 {
        self.row().code
    }

    /// The remedy as the man page and README show it: every placeholder its generic
    /// word.
    pub fn documented(self) -> String {
        self.row()
            .remedy
            .replace("{target}", "NAME")
            .replace("{command}", "COMMAND")
            .replace("{dir}", "DIR")
            .replace("{until}", "the reset")
    }

    /// The remedy with what is known filled in.
    pub fn remedy(self, s: &Subject) -> String {
        if let Some(fix) = &s.fix {
            return fix.clone();
        }
        let fill = |v: &Option<String>, default: &str| v.clone().unwrap_or_else(|| default.into());
        let mut text = self.row().remedy.to_string();
        if s.command.is_none() {
            // No command known (an unknown one was typed): the overview's help.
            text = text.replace("{command} --help", "--help");
        }
        text.replace("{target}", &fill(&s.target, "NAME"))
            .replace("{command}", &fill(&s.command, "COMMAND"))
            .replace("{dir}", &fill(&s.dir, "DIR"))
            .replace("{until}", &fill(&s.until, "the reset"))
    }

    /// A GitHub call's error.
    pub fn of_github(e: &GhError) -> Failure {
        Failure::of_cause(e.cause())
    }

    /// The class of what a GitHub error says of its target (`GhError::cause`).
    pub fn of_cause(c: Cause) -> Failure {
        match c {
            Cause::Credentials => Failure::Credentials,
            Cause::NotFound => Failure::TargetNotFound,
            Cause::RateLimited => Failure::RateLimited,
            Cause::Unreachable => Failure::GitHubUnreachable,
            Cause::Interrupted => Failure::Interrupted,
            Cause::HostUnfit => Failure::HostUnfit,
            Cause::Other => Failure::Other,
        }
    }

    /// A credential that could not be loaded (file, variable, App key): the same
    /// fix as one GitHub refused.
    pub fn of_auth(_: &AuthError) -> Failure {
        Failure::Credentials
    }

    /// What the store refused or failed at. Unknown and taken names are the user's
    /// input (2); a stale revision or a thing in use is a conflict.
    pub fn of_store(e: &StoreError) -> Failure {
        use crate::store::SqliteFault as F;
        match e {
            StoreError::NotFound { .. } | StoreError::Exists { .. } => Failure::Usage,
            StoreError::StaleRevision { .. } | StoreError::InUse { .. } => Failure::Conflict,
            StoreError::Corrupt { .. }
            | StoreError::NotOurs { .. }
            | StoreError::TooNew { .. }
            | StoreError::BadRow { .. } => Failure::StoreUnreadable,
            StoreError::Locked { .. } => Failure::StoreLocked,
            StoreError::Io { source, .. } => Failure::of_io(source),
            StoreError::Sqlite(_) => match e.sqlite_fault() {
                Some(F::Busy) => Failure::StoreLocked,
                Some(F::Denied) => Failure::PermissionDenied,
                Some(F::Unreadable) => Failure::StoreUnreadable,
                Some(F::Other) | None => Failure::Other,
            },
        }
    }

    /// The daemon's lock: held by another daemon, or not ours to take.
    pub fn of_lock(e: &LockError) -> Failure {
        match e {
            LockError::Held { .. } | LockError::Uids(_) | LockError::HostId { .. } => {
                Failure::StoreLocked
            }
            LockError::Io { err, .. } => Failure::of_io(err),
        }
    }

    pub fn of_daemon(e: &DaemonError) -> Failure {
        match e {
            DaemonError::Store(s) => Failure::of_store(s),
            DaemonError::Lock(l) => Failure::of_lock(l),
            DaemonError::Failed { cause, .. } => cause.map_or(Failure::Other, Failure::of_cause),
            DaemonError::Io(_) => Failure::Other,
        }
    }

    pub fn of_io(e: &std::io::Error) -> Failure {
        match e.kind() {
            std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem => {
                Failure::PermissionDenied
            }
            _ => Failure::Other,
        }
    }
}

/// The last line of every failure on stderr.
pub fn fix_line(f: Failure, s: &Subject) -> String {
    format!("fix: {}", f.remedy(s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    const ALL: [Failure; 17] = [
        Failure::Other,
        Failure::Usage,
        Failure::Credentials,
        Failure::TargetNotFound,
        Failure::RateLimited,
        Failure::GitHubUnreachable,
        Failure::StoreLocked,
        Failure::StoreUnreadable,
        Failure::HostUnfit,
        Failure::CoordinatorUnreachable,
        Failure::PermissionDenied,
        Failure::NoStore,
        Failure::Conflict,
        Failure::Handover,
        Failure::PackageManaged,
        Failure::UpdateAvailable,
        Failure::Interrupted,
    ];

    #[test]
    fn every_class_has_one_row_with_its_own_code_and_name() {
        for f in ALL {
            assert_eq!(TABLE.iter().filter(|r| r.failure == f).count(), 1, "{f:?}");
        }
        assert_eq!(TABLE.len(), ALL.len());
        let mut codes: Vec<i32> = TABLE.iter().map(|r| r.code).collect();
        let mut names: Vec<&str> = TABLE.iter().map(|r| r.name).collect();
        assert!(codes.windows(2).all(|w| w[0] < w[1]), "in code order");
        codes.dedup();
        names.sort();
        names.dedup();
        assert_eq!((codes.len(), names.len()), (TABLE.len(), TABLE.len()));
        assert!(TABLE.iter().all(|r| r.code != 0 && r.code < 256));
    }

    /// The packaged unit does not restart the daemon on the exits a restart cannot
    /// mend; the codes there are this table's.
    #[test]
    fn the_unit_does_not_restart_on_what_a_restart_cannot_mend() {
        let listed: Vec<i32> = crate::service::unit::TEMPLATE
            .lines()
            .filter_map(|l| l.strip_prefix("RestartPreventExitStatus="))
            .flat_map(|v| v.split_whitespace().map(|c| c.parse::<i32>().unwrap()))
            .collect();
        let unmended = [
            Failure::Usage,
            Failure::StoreLocked,
            Failure::StoreUnreadable,
            Failure::PermissionDenied,
        ];
        assert_eq!(listed, unmended.map(Failure::code).to_vec());
    }

    #[test]
    fn the_kept_codes_keep_their_meaning() {
        assert_eq!(Failure::Other.code(), 1);
        assert_eq!(Failure::Usage.code(), 2);
        assert_eq!(Failure::Interrupted.code(), 130);
    }

    #[test]
    fn every_remedy_is_a_runner_manager_command() {
        for r in TABLE {
            let generic = r.failure.remedy(&Subject::default());
            assert!(generic.starts_with("runner-manager "), "{generic}");
            assert!(!generic.contains('{'), "a placeholder left: {generic}");
        }
    }

    #[test]
    fn a_remedy_names_what_is_known() {
        let s = Subject {
            target: Some("octo".into()),
            command: Some("target check".into()),
            dir: Some("/var/lib/rm".into()),
            until: Some("2026-01-01T00:00:00Z".into()),
            fix: None,
        };
        assert_eq!(
            Failure::Credentials.remedy(&s),
            "runner-manager target set octo token_file=PATH"
        );
        assert_eq!(
            Failure::RateLimited.remedy(&s),
            "runner-manager target check octo after 2026-01-01T00:00:00Z"
        );
        assert_eq!(
            Failure::Usage.remedy(&s),
            "runner-manager target check --help"
        );
        assert_eq!(
            Failure::Credentials.remedy(&Subject::default()),
            "runner-manager target set NAME token_file=PATH"
        );
        assert_eq!(
            Failure::Usage.remedy(&Subject::default()),
            "runner-manager --help"
        );
        assert_eq!(
            fix_line(Failure::HostUnfit, &s),
            "fix: runner-manager doctor (fix each required FAIL line as its hint says)"
        );
    }

    #[test]
    fn github_errors_are_classed_by_type() {
        let cases = [
            (
                GhError::Unauthorized { clock_hint: false },
                Failure::Credentials,
            ),
            (
                GhError::Forbidden {
                    message: "Resource not accessible".into(),
                },
                Failure::Credentials,
            ),
            (GhError::NotFound, Failure::TargetNotFound),
            (GhError::RateLimited { until: 1 }, Failure::RateLimited),
            (
                GhError::Transport {
                    detail: "refused".into(),
                },
                Failure::GitHubUnreachable,
            ),
            (GhError::Server { status: 503 }, Failure::GitHubUnreachable),
            (GhError::Interrupted, Failure::Interrupted),
            (GhError::Gone, Failure::Other),
        ];
        for (e, want) in cases {
            assert_eq!(Failure::of_github(&e), want, "{e:?}");
        }
    }

    #[test]
    fn store_and_lock_errors_are_classed_by_type() {
        let p = PathBuf::from("/s/state.db");
        let denied = || std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let cases = [
            (
                StoreError::NotFound {
                    what: "target",
                    name: "x".into(),
                },
                Failure::Usage,
            ),
            (
                StoreError::InUse {
                    what: "target",
                    name: "x".into(),
                    users: "p".into(),
                    hint: "h",
                },
                Failure::Conflict,
            ),
            (
                StoreError::TooNew {
                    path: p.clone(),
                    version: 99,
                    supported: 1,
                },
                Failure::StoreUnreadable,
            ),
            (
                StoreError::Corrupt {
                    path: p.clone(),
                    detail: "d".into(),
                },
                Failure::StoreUnreadable,
            ),
            (StoreError::Locked { path: p.clone() }, Failure::StoreLocked),
            (
                StoreError::Io {
                    path: p.clone(),
                    source: denied(),
                },
                Failure::PermissionDenied,
            ),
            (
                StoreError::Sqlite(rusqlite::Error::SqliteFailure(
                    rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY),
                    None,
                )),
                Failure::StoreLocked,
            ),
        ];
        for (e, want) in cases {
            assert_eq!(Failure::of_store(&e), want, "{e:?}");
        }
        let held = LockError::Held {
            path: p.clone(),
            holder: "pid 1".into(),
        };
        assert_eq!(Failure::of_lock(&held), Failure::StoreLocked);
        let io = LockError::Io {
            path: p,
            err: denied(),
        };
        assert_eq!(
            Failure::of_daemon(&DaemonError::Lock(io)),
            Failure::PermissionDenied
        );
        // `daemon --once`: the class of what GitHub said of the first failed target.
        let once = |cause| DaemonError::Failed {
            text: "target bad: ...".into(),
            cause,
        };
        for (cause, want) in [
            (Some(Cause::Credentials), Failure::Credentials),
            (Some(Cause::NotFound), Failure::TargetNotFound),
            (Some(Cause::RateLimited), Failure::RateLimited),
            (Some(Cause::Unreachable), Failure::GitHubUnreachable),
            (Some(Cause::Other), Failure::Other),
            (None, Failure::Other),
        ] {
            assert_eq!(Failure::of_daemon(&once(cause)), want, "{cause:?}");
        }
    }
}
