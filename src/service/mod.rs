//! `runner-manager service install|status|uninstall`: the systemd unit rendered from
//! the packaged one (`unit`), the bounded `systemctl` calls (`systemctl`), and the
//! pure decisions both commands carry out: whether systemd runs here at all, what to
//! do with the file already at the
//! unit's path (only a unit carrying our marker is ever replaced or removed), which
//! `systemctl` calls follow, whether the unit's binary is stale, and what `status`
//! says of each target's credential.

pub mod systemctl;
pub mod unit;

use crate::domain::status::ErrorKind;
use std::io::Write;
use std::path::{Path, PathBuf};

pub use crate::supervisor::{
    SYSTEMD_RUN_DIR, SYSTEMD_RUN_DIR_ENV, systemd_run_dir, systemd_runs, without_systemd,
};

/// Whether `line`, the first line `systemctl VERB` printed, is one of the answers
/// systemctl(1) gives for that verb, or a failure of systemctl itself ("Failed to get
/// unit file state", "System has not been booted with systemd", a bus error). A
/// state's word comes with a nonzero exit too (`disabled`, `inactive`), so the exit
/// code cannot tell them apart.
pub fn is_answer(verb: &str, line: &str) -> bool {
    const ENABLED: &[&str] = &[
        "enabled",
        "enabled-runtime",
        "linked",
        "linked-runtime",
        "alias",
        "masked",
        "masked-runtime",
        "static",
        "indirect",
        "disabled",
        "generated",
        "transient",
        "bad",
        "not-found",
    ];
    const ACTIVE: &[&str] = &[
        "active",
        "reloading",
        "inactive",
        "failed",
        "activating",
        "deactivating",
        "maintenance",
        "refreshing",
    ];
    match verb {
        "is-enabled" => ENABLED.contains(&line),
        "is-active" => ACTIVE.contains(&line),
        _ => false,
    }
}

/// What is at the unit's path now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Existing {
    Absent,
    /// A unit carrying our marker, with its text.
    Ours(String),
    /// Anything else, and why it is not ours. Never written over or removed.
    Foreign(String),
}

/// Looks at the unit's path without following a link (a masked unit is a link to
/// `/dev/null`; a linked one points elsewhere: neither is ours).
pub fn inspect(path: &Path) -> std::io::Result<Existing> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Existing::Absent),
        Err(e) => return Err(e),
    };
    if meta.file_type().is_symlink() {
        let to = std::fs::read_link(path)
            .map(|t| t.display().to_string())
            .unwrap_or_else(|_| "?".into());
        return Ok(Existing::Foreign(format!(
            "is a symbolic link to {to} (a masked or linked unit)"
        )));
    }
    if !meta.is_file() {
        return Ok(Existing::Foreign("is not a regular file".into()));
    }
    let bytes = std::fs::read(path)?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    Ok(if unit::is_ours(&text) {
        Existing::Ours(text)
    } else {
        Existing::Foreign(format!(
            "has no '{}' line, so 'runner-manager service install' did not write it",
            unit::MARKER.trim_start_matches("# ").trim_end_matches(':')
        ))
    })
}

/// What `install` does with the unit file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnitWrite {
    /// No file there: create it.
    Create,
    /// Ours, with other text: replace it.
    Replace,
    /// Ours, byte for byte what we would write.
    Unchanged,
    /// Not ours: touch nothing, call nothing.
    Refuse(String),
}

/// The pure decision of `install` on the file it found.
pub fn decide_write(existing: &Existing, rendered: &str) -> UnitWrite {
    match existing {
        Existing::Absent => UnitWrite::Create,
        Existing::Ours(t) if t == rendered => UnitWrite::Unchanged,
        Existing::Ours(_) => UnitWrite::Replace,
        Existing::Foreign(why) => UnitWrite::Refuse(why.clone()),
    }
}

/// The `systemctl` calls that follow a write, in order: the manager reloads the unit
/// only when its file changed; it is enabled; and it is started, or restarted when a
/// unit it may be running changed (the daemon's `KillMode=process` keeps the runners
/// through a restart), unless `no_start`.
pub fn install_calls(w: &UnitWrite, no_start: bool) -> Vec<Vec<&'static str>> {
    let mut calls = Vec::new();
    if matches!(w, UnitWrite::Refuse(_)) {
        return calls;
    }
    if matches!(w, UnitWrite::Create | UnitWrite::Replace) {
        calls.push(vec!["daemon-reload"]);
    }
    calls.push(vec!["enable", unit::UNIT_NAME]);
    if !no_start {
        let verb = if *w == UnitWrite::Replace {
            "restart"
        } else {
            "start"
        };
        calls.push(vec![verb, unit::UNIT_NAME]);
    }
    calls
}

/// The calls of `uninstall` around removing our unit: stop and disable before, so no
/// daemon runs from a unit that is gone; reload after.
pub const UNINSTALL_BEFORE: &[&[&str]] =
    &[&["stop", unit::UNIT_NAME], &["disable", unit::UNIT_NAME]];
pub const UNINSTALL_AFTER: &[&[&str]] = &[&["daemon-reload"]];

/// `systemctl stop`'s exit code for a unit the manager has not loaded (LSB "not
/// installed"): nothing runs, so uninstall goes on.
pub const STOP_NOT_LOADED: i32 = 5;

/// Writes the unit (mode 0644, whatever the umask) through a temporary file in the
/// same directory: a new unit is linked into place, which fails rather than replace a
/// file that appeared meanwhile; our own is renamed over.
pub fn write_unit(path: &Path, text: &str, replace: bool) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(".{}.tmp.{}", unit::UNIT_NAME, std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&tmp)?;
        f.set_permissions(std::fs::Permissions::from_mode(0o644))?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        if replace {
            std::fs::rename(&tmp, path)
        } else {
            std::fs::hard_link(&tmp, path)
        }
    })();
    let _ = std::fs::remove_file(&tmp);
    result?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Why the unit's binary is not this one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stale {
    /// The unit names no `ExecStart=` binary.
    NoExecStart,
    /// The binary it names is not there.
    Missing(PathBuf),
    /// It names another binary than the one asking.
    Differs { unit: PathBuf, this: PathBuf },
}

impl std::fmt::Display for Stale {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stale::NoExecStart => f.write_str("the unit has no ExecStart= line"),
            Stale::Missing(p) => write!(f, "its binary {} is missing", p.display()),
            Stale::Differs { unit, this } => write!(
                f,
                "it runs {}, not this binary {}",
                unit.display(),
                this.display()
            ),
        }
    }
}

/// The directories `service status` looks in for the system unit, in the order
/// systemd prefers them: `first` (`/etc/systemd/system`, where `service install`
/// writes), then `lib/systemd/system` beside this binary's prefix (where
/// `packaging/install.sh --prefix P` puts the unit of `P/bin/runner-manager`), then
/// the prefixes packages and install.sh use by default. No directory twice.
pub fn unit_dirs(first: &Path, this: &Path) -> Vec<PathBuf> {
    let beside = this
        .parent()
        .filter(|b| b.file_name().is_some_and(|n| n == "bin"))
        .and_then(Path::parent)
        .map(|p| p.join("lib/systemd/system"));
    let mut dirs: Vec<PathBuf> = vec![first.to_path_buf()];
    for d in beside.into_iter().chain(
        [
            "/usr/local/lib/systemd/system",
            "/usr/lib/systemd/system",
            "/lib/systemd/system",
        ]
        .map(PathBuf::from),
    ) {
        if !dirs.contains(&d) {
            dirs.push(d);
        }
    }
    dirs
}

/// The unit `service status` reports: the first of `dirs` that holds one (`present`
/// says whether a path holds anything, a link included), else the first's path.
pub fn find_unit(dirs: &[PathBuf], present: impl Fn(&Path) -> bool) -> PathBuf {
    let paths: Vec<PathBuf> = dirs.iter().map(|d| d.join(unit::UNIT_NAME)).collect();
    paths
        .iter()
        .find(|p| present(p))
        .or(paths.first())
        .cloned()
        .unwrap_or_else(|| PathBuf::from(unit::UNIT_NAME))
}

/// The pure staleness check: the unit's `ExecStart=` binary, whether it exists (as
/// its canonical path, when it does), and this binary's canonical path.
pub fn stale(
    unit_bin: Option<&str>,
    unit_bin_canonical: Option<&Path>,
    this: &Path,
) -> Option<Stale> {
    let Some(b) = unit_bin else {
        return Some(Stale::NoExecStart);
    };
    match unit_bin_canonical {
        None => Some(Stale::Missing(PathBuf::from(b))),
        Some(c) if c != this => Some(Stale::Differs {
            unit: PathBuf::from(b),
            this: this.to_path_buf(),
        }),
        Some(_) => None,
    }
}

/// What `service status` says of a target's credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// It could be read here and GitHub refused it on the daemon's last report.
    Refused(String),
    /// It cannot be read: here (`load_credential`), or by the daemon (its last error).
    Unreadable(String),
    /// It lives in the daemon's environment, which this command cannot see.
    NotChecked(String),
    Readable,
}

impl Credential {
    pub fn word(&self) -> &'static str {
        match self {
            Credential::Refused(_) => "refused",
            Credential::Unreadable(_) => "unreadable",
            Credential::NotChecked(_) => "not checked",
            Credential::Readable => "readable",
        }
    }

    pub fn detail(&self) -> Option<&str> {
        match self {
            Credential::Refused(d) | Credential::Unreadable(d) | Credential::NotChecked(d) => {
                Some(d)
            }
            Credential::Readable => None,
        }
    }
}

/// The prefix the daemon gives its target error when it cannot load the credential
/// (left out of what `service status` shows after `unreadable:`).
const DAEMON_CREDENTIAL_ERROR: &str = "credentials: ";

/// A target's last error as the daemon recorded it, with its kind: what it says of
/// the credential decides `service status`'s word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LastError {
    /// The daemon could not load the credential (its `credentials: ` errors).
    CredentialUnreadable(String),
    /// GitHub refused the credential (`GhError::refuses_credentials`).
    CredentialRefused(String),
    /// Anything else (a rate limit, a network error): nothing about the credential.
    Other(String),
}

impl LastError {
    /// The error `text` the daemon recorded, of `kind` (`None`: a daemon older than
    /// schema 20 said no kind, and nothing is concluded of the credential).
    pub fn of(kind: Option<ErrorKind>, text: &str) -> LastError {
        match kind {
            Some(ErrorKind::CredentialsUnreadable) => LastError::CredentialUnreadable(
                text.strip_prefix(DAEMON_CREDENTIAL_ERROR)
                    .unwrap_or(text)
                    .to_string(),
            ),
            Some(ErrorKind::CredentialsRefused) => LastError::CredentialRefused(text.to_string()),
            _ => LastError::Other(text.to_string()),
        }
    }
}

/// The pure judgement of a credential: `loaded` is what loading it here gave (`None`
/// for a token in the daemon's environment), `last_error` the daemon's last error for
/// the target.
pub fn credential(
    loaded: Option<Result<(), String>>,
    env_var: Option<&str>,
    last_error: Option<&LastError>,
) -> Credential {
    if let Some(Err(e)) = loaded {
        return Credential::Unreadable(e);
    }
    match last_error {
        Some(LastError::CredentialUnreadable(rest)) => {
            return Credential::Unreadable(format!("the daemon could not load it: {rest}"));
        }
        Some(LastError::CredentialRefused(e)) => return Credential::Refused(e.clone()),
        Some(LastError::Other(_)) | None => {}
    }
    match (loaded, env_var) {
        (None, Some(v)) => Credential::NotChecked(format!(
            "${v} is read from the daemon's environment, which this command cannot see"
        )),
        _ => Credential::Readable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::github::GhError;

    #[test]
    fn only_our_unit_is_ever_written_over_and_an_identical_one_is_left_alone() {
        assert_eq!(decide_write(&Existing::Absent, "x"), UnitWrite::Create);
        assert_eq!(
            decide_write(&Existing::Ours("x".into()), "x"),
            UnitWrite::Unchanged
        );
        assert_eq!(
            decide_write(&Existing::Ours("y".into()), "x"),
            UnitWrite::Replace
        );
        assert_eq!(
            decide_write(&Existing::Foreign("why".into()), "x"),
            UnitWrite::Refuse("why".into())
        );
    }

    #[test]
    fn install_calls_reload_only_a_changed_file_and_restart_only_a_replaced_unit() {
        let u = unit::UNIT_NAME;
        assert_eq!(
            install_calls(&UnitWrite::Create, false),
            vec![vec!["daemon-reload"], vec!["enable", u], vec!["start", u]]
        );
        assert_eq!(
            install_calls(&UnitWrite::Replace, false),
            vec![vec!["daemon-reload"], vec!["enable", u], vec!["restart", u]]
        );
        assert_eq!(
            install_calls(&UnitWrite::Unchanged, false),
            vec![vec!["enable", u], vec!["start", u]]
        );
        assert_eq!(
            install_calls(&UnitWrite::Create, true),
            vec![vec!["daemon-reload"], vec!["enable", u]]
        );
        assert!(install_calls(&UnitWrite::Refuse("x".into()), false).is_empty());
    }

    #[test]
    fn a_unit_binary_is_stale_when_missing_or_another() {
        let this = Path::new("/usr/bin/runner-manager");
        assert_eq!(
            stale(Some("/usr/bin/runner-manager"), Some(this), this),
            None
        );
        assert_eq!(
            stale(Some("/opt/old/runner-manager"), None, this),
            Some(Stale::Missing("/opt/old/runner-manager".into()))
        );
        let other = stale(
            Some("/usr/local/bin/rm"),
            Some(Path::new("/usr/local/bin/rm")),
            this,
        )
        .unwrap();
        assert_eq!(
            other.to_string(),
            "it runs /usr/local/bin/rm, not this binary /usr/bin/runner-manager"
        );
        assert_eq!(stale(None, None, this), Some(Stale::NoExecStart));
    }

    #[test]
    fn a_credential_is_refused_unreadable_unchecked_or_readable() {
        let e401 = GhError::Unauthorized { clock_hint: false }.to_string();
        let jwt = GhError::Unauthorized { clock_hint: true }.to_string();
        let e403 = GhError::Forbidden {
            message: "Resource not accessible".into(),
        }
        .to_string();
        let limit = GhError::RateLimited { until: 0 }.to_string();
        for e in [&e401, &jwt, &e403] {
            assert!(
                matches!(
                    credential(
                        Some(Ok(())),
                        None,
                        Some(&LastError::of(Some(ErrorKind::CredentialsRefused), e))
                    ),
                    Credential::Refused(_)
                ),
                "{e}"
            );
        }
        assert_eq!(
            credential(
                Some(Ok(())),
                None,
                Some(&LastError::of(Some(ErrorKind::RateLimited), &limit))
            ),
            Credential::Readable
        );
        assert_eq!(
            credential(
                Some(Err("token file /t: not found".into())),
                None,
                Some(&LastError::of(Some(ErrorKind::CredentialsRefused), &e401))
            ),
            Credential::Unreadable("token file /t: not found".into())
        );
        assert_eq!(
            credential(
                None,
                Some("GH_TOKEN"),
                Some(&LastError::of(
                    Some(ErrorKind::CredentialsUnreadable),
                    "credentials: $GH_TOKEN is not set"
                ))
            )
            .word(),
            "unreadable"
        );
        assert_eq!(
            credential(None, Some("GH_TOKEN"), None).word(),
            "not checked"
        );
        assert_eq!(
            credential(
                None,
                Some("GH_TOKEN"),
                Some(&LastError::of(Some(ErrorKind::CredentialsRefused), &e401))
            )
            .word(),
            "refused"
        );
        assert_eq!(credential(Some(Ok(())), None, None), Credential::Readable);
    }

    #[test]
    fn systemd_runs_only_where_its_run_directory_is_a_directory() {
        let dir = std::env::temp_dir().join(format!("rm-service-booted-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("system")).unwrap();
        assert!(systemd_runs(&dir.join("system")));
        assert!(!systemd_runs(&dir.join("none")));
        std::fs::write(dir.join("file"), "").unwrap();
        assert!(!systemd_runs(&dir.join("file")));
        std::os::unix::fs::symlink(dir.join("system"), dir.join("link")).unwrap();
        assert!(!systemd_runs(&dir.join("link")), "a link is not followed");
        assert!(without_systemd(&dir.join("none")).contains("runner-manager daemon"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn systemctls_own_failures_are_not_answers() {
        assert!(is_answer("is-enabled", "disabled"));
        assert!(is_answer("is-enabled", "not-found"));
        assert!(is_answer("is-active", "inactive"));
        assert!(is_answer("is-active", "failed"));
        for failure in [
            "Failed to get unit file state for runner-manager.service: No such file or directory",
            "System has not been booted with systemd as init system (PID 1). Can't operate.",
            "Failed to connect to bus: No such file or directory",
            "",
        ] {
            assert!(!is_answer("is-enabled", failure), "{failure}");
            assert!(!is_answer("is-active", failure), "{failure}");
        }
        assert!(!is_answer("start", "active"));
    }

    #[test]
    fn a_unit_is_written_0644_whatever_the_umask_and_never_linked_over_a_file() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("rm-service-write-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(unit::UNIT_NAME);
        write_unit(&p, "one\n", false).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "one\n");
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o644);
        let e = write_unit(&p, "two\n", false).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "one\n");
        write_unit(&p, "two\n", true).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "two\n");
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            1,
            "no temporary left"
        );
        std::os::unix::fs::symlink("/dev/null", dir.join("masked.service")).unwrap();
        assert!(matches!(
            inspect(&dir.join("masked.service")).unwrap(),
            Existing::Foreign(w) if w.contains("/dev/null")
        ));
        assert_eq!(
            inspect(&dir.join("none.service")).unwrap(),
            Existing::Absent
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn status_looks_for_the_unit_where_install_sh_put_it() {
        let etc = Path::new("/etc/systemd/system");
        let dirs = unit_dirs(etc, Path::new("/opt/rm/bin/runner-manager"));
        assert_eq!(
            dirs,
            [
                "/etc/systemd/system",
                "/opt/rm/lib/systemd/system",
                "/usr/local/lib/systemd/system",
                "/usr/lib/systemd/system",
                "/lib/systemd/system",
            ]
            .map(PathBuf::from)
        );
        // /usr/bin's prefix is already listed; a binary outside a bin/ adds nothing.
        assert_eq!(
            unit_dirs(etc, Path::new("/usr/bin/runner-manager")).len(),
            4
        );
        assert_eq!(unit_dirs(etc, Path::new("/root/runner-manager")).len(), 4);
        let at = |there: &'static str| move |p: &Path| p == Path::new(there);
        assert_eq!(
            find_unit(
                &dirs,
                at("/opt/rm/lib/systemd/system/runner-manager.service")
            ),
            Path::new("/opt/rm/lib/systemd/system/runner-manager.service")
        );
        // /etc wins, as it does for systemd; none found is /etc's path.
        assert_eq!(
            find_unit(&dirs, |_| true),
            Path::new("/etc/systemd/system/runner-manager.service")
        );
        assert_eq!(
            find_unit(&dirs, |_| false),
            Path::new("/etc/systemd/system/runner-manager.service")
        );
    }
}
