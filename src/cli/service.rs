//! `service install [--user] [--no-start] [--unit-dir DIR]`, `service status` and
//! `service uninstall`: carry out `crate::service`'s decisions (the rendered unit,
//! what to do with the file there, the `systemctl` calls) and report them. They
//! never create the store: the daemon does on its first start; `status` reads it when
//! it is there, as `status` and `doctor` do.

use super::output::{Out, block, or_dash, table, time};
use super::parse::Invocation;
use super::spec::{Opt, opts};
use super::{CliError, CliResult};
use crate::domain::CredentialRef;
use crate::service::systemctl::{CALL_TIMEOUT, QUERY_TIMEOUT, Systemctl};
use crate::service::unit::{self, Kind};
use crate::service::{self as svc, Existing, UnitWrite};
use crate::store::{SqliteStore, Store};
use crate::timefmt::now_millis;
use serde_json::json;
use std::path::{Path, PathBuf};

/// `user` is the command's `--user`.
fn kind(inv: &Invocation, user: &Opt) -> Kind {
    if inv.flag(user) {
        Kind::User
    } else {
        Kind::System
    }
}

fn kind_word(k: Kind) -> &'static str {
    match k {
        Kind::System => "system",
        Kind::User => "user",
    }
}

/// Where the unit goes: `--unit-dir` (an existing directory), else the system
/// manager's `/etc/systemd/system`, else the user manager's
/// `$XDG_CONFIG_HOME/systemd/user` (`~/.config/systemd/user`). The flag says whether
/// it was given. `opt` is the command's `--unit-dir`.
fn unit_dir(inv: &Invocation, opt: &Opt, kind: Kind) -> Result<(PathBuf, bool), CliError> {
    if let Some(d) = inv.value(opt) {
        let p = Path::new(d);
        if d.is_empty() || !p.is_dir() {
            return Err(CliError::usage(
                opt.name,
                &format!("{d:?} is not an existing directory"),
            ));
        }
        let c = p
            .canonicalize()
            .map_err(|e| CliError::usage(opt.name, &format!("{d:?} cannot be resolved: {e}")))?;
        return Ok((c, true));
    }
    match kind {
        Kind::System => Ok((PathBuf::from("/etc/systemd/system"), false)),
        Kind::User => {
            let config = std::env::var_os("XDG_CONFIG_HOME")
                .filter(|d| !d.is_empty())
                .map(PathBuf::from)
                .or_else(|| {
                    std::env::var_os("HOME")
                        .filter(|d| !d.is_empty())
                        .map(|h| PathBuf::from(h).join(".config"))
                })
                .ok_or_else(|| {
                    CliError::usage(
                        "--user",
                        "neither HOME nor XDG_CONFIG_HOME is set; give --unit-dir DIR",
                    )
                })?;
            Ok((config.join("systemd/user"), false))
        }
    }
}

/// This binary, as the unit records it: its canonical absolute path.
fn this_binary() -> Result<PathBuf, CliError> {
    std::env::current_exe()
        .and_then(|p| p.canonicalize())
        .map_err(|e| CliError::Failed(format!("cannot tell where this binary is: {e}")))
}

/// The state directory the daemon gets: the CLI's own (`--state-dir`, the environment,
/// or the default), made absolute.
fn daemon_state_dir(inv: &Invocation, kind: Kind) -> Result<PathBuf, CliError> {
    let d = super::state_dir(inv)?;
    let d = if d.is_absolute() {
        d
    } else {
        std::env::current_dir()
            .map_err(|e| CliError::Failed(format!("cannot read the current directory: {e}")))?
            .join(d)
    };
    let arg = "--state-dir";
    unit::check_path(&d).map_err(|e| CliError::usage(arg, &format!("{}: {}", d.display(), e.0)))?;
    if kind == Kind::System {
        unit::check_system_state_dir(&d)
            .map_err(|e| CliError::usage(arg, &format!("{} {}", d.display(), e.0)))?;
    }
    Ok(d)
}

fn inspect(path: &Path) -> Result<Existing, CliError> {
    svc::inspect(path).map_err(|e| CliError::Failed(format!("reading {}: {e}", path.display())))
}

/// A unit we did not write at the path: refused with exit 2, nothing touched and no
/// `systemctl` call made, as a name already taken is.
fn refuse(path: &Path, why: &str) -> CliError {
    CliError::Usage(format!(
        "{} {why}; it is left as it is. Remove or rename it yourself, or install elsewhere \
         with --unit-dir",
        path.display()
    ))
}

/// The manager that would load the unit: none without a running systemd, which
/// `install` refuses (exit 2, nothing written) and `status` reports.
fn need_systemd() -> Result<(), CliError> {
    let run = svc::systemd_run_dir();
    if svc::systemd_runs(&run) {
        Ok(())
    } else {
        Err(CliError::Usage(svc::without_systemd(&run)))
    }
}

/// A state directory without a store is most likely a mistyped `--state-dir`: the
/// service's daemon would start on an empty host there. Refused (exit 12) unless
/// `--force`. A store this user cannot see is the daemon's to judge.
fn need_store(inv: &Invocation, state: &Path) -> Result<(), CliError> {
    let db = state.join(crate::store::DB_FILE);
    match std::fs::symlink_metadata(&db) {
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound
                && !inv.flag(&opts::service_install::FORCE) =>
        {
            Err(CliError::classed(
                super::exit::Failure::NoStore,
                format!(
                    "{} holds no store ({} is missing): is --state-dir mistyped? Set this \
                     host up there first (target add, profile add), or pass --force to \
                     install a unit whose daemon starts on an empty state directory",
                    state.display(),
                    crate::store::DB_FILE
                ),
            ))
        }
        _ => Ok(()),
    }
}

/// Our unit already there runs a daemon on another state directory: replacing it
/// would move the service (and restart it) onto `state`. Refused (exit 2, naming
/// `--state-dir` and both paths) unless `--force`.
fn same_state_dir(
    inv: &Invocation,
    existing: &Existing,
    path: &Path,
    state: &Path,
) -> Result<(), CliError> {
    let Existing::Ours(text) = existing else {
        return Ok(());
    };
    match unit::state_dir_of(text) {
        Some(old) if Path::new(old) != state && !inv.flag(&opts::service_install::FORCE) => {
            Err(CliError::usage(
                "--state-dir",
                &format!(
                    "{} is not the state directory of the installed unit {}, which runs on {old}; \
                 give --state-dir {old} to update that unit, or --force to move the service \
                 to {} (its daemon restarts there)",
                    state.display(),
                    path.display(),
                    state.display()
                ),
            ))
        }
        _ => Ok(()),
    }
}

pub(super) fn install(inv: &Invocation, out: &mut Out) -> CliResult {
    let kind = kind(inv, &opts::service_install::USER);
    let (dir, explicit) = unit_dir(inv, &opts::service_install::UNIT_DIR, kind)?;
    let state = daemon_state_dir(inv, kind)?;
    need_systemd()?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    if kind == Kind::System && !explicit && unsafe { libc::geteuid() } != 0 {
        return Err(CliError::usage(
            "--user",
            "a system unit goes in /etc/systemd/system, which needs root: run this as root, \
             or pass --user for a unit of your own user manager",
        ));
    }
    let bin = unit_binary(kind)?;
    let text = unit::render(kind, &bin, &state, env!("CARGO_PKG_VERSION"));
    let path = dir.join(unit::UNIT_NAME);
    let existing = inspect(&path)?;
    let w = svc::decide_write(&existing, &text);
    if let UnitWrite::Refuse(why) = &w {
        return Err(refuse(&path, why));
    }
    same_state_dir(inv, &existing, &path, &state)?;
    need_store(inv, &state)?;
    // A daemon already on this state directory, started by hand, holds its lock: the
    // service's would fail to start. (Over our own unit it is the service's daemon.)
    if w == UnitWrite::Create
        && !inv.flag(&opts::service_install::NO_START)
        && let Some(pid) = running_daemon(&state)?
    {
        return Err(CliError::classed(
            super::exit::Failure::StoreLocked,
            format!(
                "a daemon (pid {pid}) already runs on {}, so the service's daemon could not take \
             its lock; stop that one first ('runner-manager drain --wait', then end it), or \
             install with --no-start and start the service once it is gone",
                state.display()
            ),
        ));
    }
    if !explicit && kind == Kind::User {
        std::fs::create_dir_all(&dir)
            .map_err(|e| CliError::Failed(format!("creating {}: {e}", dir.display())))?;
    }
    let wrote = match w {
        UnitWrite::Create => "created",
        UnitWrite::Replace => "replaced",
        _ => "unchanged",
    };
    if matches!(w, UnitWrite::Create | UnitWrite::Replace) {
        svc::write_unit(&path, &text, w == UnitWrite::Replace)
            .map_err(|e| CliError::Failed(format!("writing {}: {e}", path.display())))?;
    }
    let calls = svc::install_calls(&w, inv.flag(&opts::service_install::NO_START));
    let ran = run_install_calls(kind, &calls, &format!("{} is {wrote}", path.display()))?;
    out.emit(
        || {
            let mut s = block(&[
                ("unit", format!("{} ({wrote})", path.display())),
                ("kind", kind_word(kind).to_string()),
                ("binary", bin.display().to_string()),
                ("state_dir", state.display().to_string()),
            ]);
            for r in &ran {
                s.push_str(&format!("ran: {r}\n"));
            }
            if inv.flag(&opts::service_install::NO_START) {
                s.push_str("not started (--no-start)\n");
            }
            s
        },
        || {
            json!({
                "unit": path.display().to_string(),
                "kind": kind_word(kind),
                "written": wrote,
                "binary": bin.display().to_string(),
                "state_dir": state.display().to_string(),
                "ran": ran,
            })
        },
    );
    Ok(())
}

/// This binary, checked to be one a unit's `ExecStart=` can name; warned about when
/// the system unit's ProtectHome=yes would hide it from the service.
fn unit_binary(kind: Kind) -> Result<PathBuf, CliError> {
    let bin = this_binary()?;
    unit::check_path(&bin).map_err(|e| {
        CliError::Failed(format!(
            "this binary's path {} cannot go into a unit: {}",
            bin.display(),
            e.0
        ))
    })?;
    // A warning, not a refusal: the unit is right, the binary's place is not, and
    // moving it is the operator's call (tests and CI checkouts live under /home too).
    if kind == Kind::System
        && let Some(top) = unit::hidden_by_protect_home(&bin)
    {
        eprintln!(
            "runner-manager: warning: this binary is under {top}, which the system unit's \
             ProtectHome=yes hides from the service, so it cannot start there (203/EXEC); \
             move it (e.g. to /usr/local/bin) and run 'service install' from there"
        );
    }
    Ok(bin)
}

/// Runs `service install`'s `systemctl` calls in order and returns what ran; `done` is
/// what was already done to the unit file, which a failure reports with the calls
/// that ran before it.
fn run_install_calls(
    kind: Kind,
    calls: &[Vec<&'static str>],
    done: &str,
) -> Result<Vec<String>, CliError> {
    let Some(sc) = Systemctl::find(kind == Kind::User, CALL_TIMEOUT) else {
        return Err(CliError::Failed(format!(
            "{done}, but there is no systemctl on PATH to reload, enable and start it; where \
             systemd runs: {}",
            calls
                .iter()
                .map(|c| crate::service::systemctl::describe(kind == Kind::User, c))
                .collect::<Vec<_>>()
                .join(" && ")
        )));
    };
    let mut ran = Vec::new();
    for c in calls {
        sc.must(c).map_err(|e| {
            CliError::Failed(format!(
                "{done}{}; {e} (see 'runner-manager service status')",
                if ran.is_empty() {
                    String::new()
                } else {
                    format!(", ran {}", ran.join(", "))
                }
            ))
        })?;
        ran.push(sc.describe(c));
    }
    Ok(ran)
}

/// The pid of a daemon whose heartbeat on this state directory's store is fresh.
/// No store (or none this user can reach) is no daemon known.
fn running_daemon(state: &Path) -> Result<Option<u32>, CliError> {
    if std::fs::metadata(state.join(crate::store::DB_FILE)).is_err() {
        return Ok(None);
    }
    let store = SqliteStore::open(state)?;
    Ok(store
        .heartbeat()?
        .filter(|b| b.alive_at(now_millis()))
        .map(|b| b.pid))
}

pub(super) fn uninstall(inv: &Invocation, out: &mut Out) -> CliResult {
    let kind = kind(inv, &opts::service_uninstall::USER);
    let (dir, _) = unit_dir(inv, &opts::service_uninstall::UNIT_DIR, kind)?;
    let path = dir.join(unit::UNIT_NAME);
    match inspect(&path)? {
        Existing::Foreign(why) => return Err(refuse(&path, &why)),
        Existing::Absent => {
            out.emit(
                || format!("no unit at {}: nothing to uninstall\n", path.display()),
                || json!({"unit": path.display().to_string(), "removed": false, "ran": []}),
            );
            return Ok(());
        }
        Existing::Ours(_) => {}
    }
    // Without a running systemd nothing can be stopped or disabled, and systemctl would
    // only fail: the file we wrote is removed all the same.
    let booted = svc::systemd_runs(&svc::systemd_run_dir());
    let sc = Systemctl::find(kind == Kind::User, CALL_TIMEOUT).filter(|_| booted);
    let mut ran = Vec::new();
    let mut failed = Vec::new();
    let mut call = |sc: &Systemctl, c: &[&str]| match sc.call(c) {
        Ok(a) if a.code == 0 || (c[0] == "stop" && a.code == svc::STOP_NOT_LOADED) => {
            ran.push(sc.describe(c))
        }
        Ok(a) => failed.push(format!(
            "'{}' failed (exit {}): {}",
            sc.describe(c),
            a.code,
            a.first_line()
        )),
        Err(e) => failed.push(e),
    };
    if let Some(sc) = &sc {
        svc::UNINSTALL_BEFORE.iter().for_each(|c| call(sc, c));
    }
    // Removed even when a call failed: the unit is ours, and the operator asked for it
    // gone. What failed is said below, with what may still run.
    std::fs::remove_file(&path)
        .map_err(|e| CliError::Failed(format!("removing {}: {e}", path.display())))?;
    if let Some(sc) = &sc {
        svc::UNINSTALL_AFTER.iter().for_each(|c| call(sc, c));
    }
    out.emit(
        || {
            let mut s = format!("removed {}\n", path.display());
            for r in &ran {
                s.push_str(&format!("ran: {r}\n"));
            }
            if !booted {
                s.push_str("systemd is not running here: nothing was stopped or disabled\n");
            } else if sc.is_none() {
                s.push_str("no systemctl on PATH: nothing was stopped or disabled\n");
            }
            s.push_str("runners already started finish their jobs (KillMode=process)\n");
            s
        },
        || {
            json!({"unit": path.display().to_string(), "removed": true, "ran": ran,
                   "failed": failed, "systemd_running": booted})
        },
    );
    if failed.is_empty() {
        return Ok(());
    }
    out.flush_now()?;
    Err(CliError::Failed(format!(
        "{} is removed, but {}; a daemon it started may still run: see 'systemctl{} status {}'",
        path.display(),
        failed.join("; "),
        if kind == Kind::User { " --user" } else { "" },
        unit::UNIT_NAME
    )))
}

/// One target's line of `service status`.
struct TargetLine {
    name: String,
    last_report: Option<String>,
    last_error: Option<String>,
    credential: svc::Credential,
}

fn target_lines(store: &dyn Store) -> Result<Vec<TargetLine>, CliError> {
    let stats = store.target_statuses()?;
    Ok(store
        .targets()?
        .into_iter()
        .map(|t| {
            let st = stats.iter().find(|s| s.target == t.name);
            let (loaded, var) = match &t.credential {
                CredentialRef::TokenEnv { var } => (None, Some(var.as_str())),
                r => (
                    Some(
                        crate::github::load_credential(r)
                            .map(|_| ())
                            .map_err(|e| e.to_string()),
                    ),
                    None,
                ),
            };
            let last_error = st.and_then(|s| s.last_error.clone());
            TargetLine {
                credential: svc::credential(
                    loaded,
                    var,
                    last_error
                        .as_deref()
                        .map(|e| svc::LastError::of(st.and_then(|s| s.error_kind), e))
                        .as_ref(),
                ),
                name: t.name,
                last_report: st.map(|s| time(s.updated_at)),
                last_error,
            }
        })
        .collect())
}

/// What `service status` found: the unit file, systemd's word on it, and the store the
/// unit's daemon uses.
struct Report {
    path: PathBuf,
    kind: Kind,
    unit: UnitFile,
    /// Where the unit's binary is that the system unit's ProtectHome=yes hides.
    hidden: Option<&'static str>,
    /// The store's state directory: the unit's, unless --state-dir or the environment
    /// names one.
    state: PathBuf,
    systemd: Systemd,
    /// `None` when there is no store yet.
    daemon: Option<DaemonLine>,
    targets: Vec<TargetLine>,
}

/// The unit file at the path, as `service status` reads it.
struct UnitFile {
    existing: Existing,
    /// The packaged unit (a package's or install.sh's), not one `service install` wrote.
    packaged: bool,
    /// `not installed`, `present, not ours: ...` or `installed (ours)`.
    installed: String,
    /// The unit's `ExecStart=` binary.
    binary: Option<String>,
    stale: Option<svc::Stale>,
    /// The unit's state directory.
    state: Option<PathBuf>,
}

/// The daemon's line of `service status`.
struct DaemonLine {
    detail: String,
    running: bool,
}

/// What `systemctl is-enabled|is-active` said, when systemd runs and there is a
/// systemctl.
struct Systemd {
    /// Whether systemd runs here (`/run/systemd/system`).
    running: bool,
    checked: bool,
    enabled: Option<String>,
    active: Option<String>,
    /// The questions systemctl failed to answer (its own failures, not a state).
    failed: Vec<String>,
}

pub(super) fn status(inv: &Invocation, out: &mut Out) -> CliResult {
    let kind = kind(inv, &opts::service_status::USER);
    let (dir, given) = unit_dir(inv, &opts::service_status::UNIT_DIR, kind)?;
    let this = this_binary()?;
    // The system unit wherever it was put: by `service install`, by a package, or by
    // `install.sh --prefix` beside this binary's prefix (issue 50).
    let searched = if given || kind == Kind::User {
        vec![dir]
    } else {
        svc::unit_dirs(&dir, &this)
    };
    let path = svc::find_unit(&searched, |p| std::fs::symlink_metadata(p).is_ok());
    let existing = inspect(&path)?;
    let packaged = match existing {
        Existing::Foreign(_) => std::fs::read_to_string(&path)
            .ok()
            .filter(|t| unit::is_packaged(t)),
        _ => None,
    };
    let mut unit = read_unit(existing, packaged, &this);
    if matches!(unit.existing, Existing::Absent) && searched.len() > 1 {
        let dirs: Vec<String> = searched.iter().map(|d| d.display().to_string()).collect();
        unit.installed = format!("not installed (looked in {})", dirs.join(", "));
    }
    let hidden = unit
        .binary
        .as_deref()
        .filter(|_| kind == Kind::System)
        .and_then(|b| unit::hidden_by_protect_home(Path::new(b)));
    // The store the unit's daemon uses, unless --state-dir or the environment names one.
    let named = inv.state_dir.is_some()
        || std::env::var_os("RUNNER_MANAGER_STATE_DIR").is_some_and(|d| !d.is_empty());
    let state = match (&unit.state, named) {
        (Some(s), false) => s.clone(),
        _ => super::state_dir(inv)?,
    };
    let systemd = ask_systemd(kind);
    let (daemon, targets) = read_store(&state)?;
    let report = Report {
        path,
        kind,
        unit,
        hidden,
        state,
        systemd,
        daemon,
        targets,
    };
    out.emit(|| status_text(&report), || status_json(&report));
    // The report is printed whole, then the exit says that the service cannot be
    // trusted to be what it shows: no systemd (the class `install` refuses with), or a
    // systemctl that failed to answer.
    let sd = &report.systemd;
    if !sd.running {
        out.flush_now()?;
        return Err(CliError::Usage(svc::without_systemd(
            &svc::systemd_run_dir(),
        )));
    }
    if !sd.failed.is_empty() {
        out.flush_now()?;
        return Err(CliError::Failed(format!(
            "systemctl did not answer: {}",
            sd.failed.join("; ")
        )));
    }
    Ok(())
}

/// The unit file as `status` reads it; `packaged` is the text of a unit without our
/// marker that is the packaged one (`unit::is_packaged`), read as ours is.
fn read_unit(existing: Existing, packaged: Option<String>, this: &Path) -> UnitFile {
    let read = |said: &str, text: &str| {
        let b = unit::exec_binary(text);
        let canonical = b.and_then(|b| Path::new(b).canonicalize().ok());
        (
            said.to_string(),
            b.map(str::to_string),
            svc::stale(b, canonical.as_deref(), this),
            unit::state_dir_of(text).map(PathBuf::from),
        )
    };
    let (installed, binary, stale, state) = match (&existing, &packaged) {
        (Existing::Absent, _) => ("not installed".to_string(), None, None, None),
        (Existing::Foreign(_), Some(text)) => read(
            "installed (packaged: by install.sh or a package; 'service install' leaves it alone)",
            text,
        ),
        (Existing::Foreign(why), None) => {
            (format!("present, not ours: it {why}"), None, None, None)
        }
        (Existing::Ours(text), _) => read("installed (ours)", text),
    };
    UnitFile {
        packaged: packaged.is_some(),
        existing,
        installed,
        binary,
        stale,
        state,
    }
}

fn ask_systemd(kind: Kind) -> Systemd {
    let running = svc::systemd_runs(&svc::systemd_run_dir());
    let sc = Systemctl::find(kind == Kind::User, QUERY_TIMEOUT).filter(|_| running);
    let mut failed = Vec::new();
    let mut ask = |verb: &str| -> Option<String> {
        let sc = sc.as_ref()?;
        let said = match sc.call(&[verb, unit::UNIT_NAME]) {
            Ok(a) => answer(verb, &a.first_line()).map_err(|said| {
                format!("'{}' said {said:?}", sc.describe(&[verb, unit::UNIT_NAME]))
            }),
            Err(e) => Err(e),
        };
        Some(said.unwrap_or_else(|e| {
            failed.push(e.clone());
            format!("FAILED: {e}")
        }))
    };
    let enabled = ask("is-enabled");
    let active = ask("is-active");
    Systemd {
        running,
        checked: sc.is_some(),
        enabled,
        active,
        failed,
    }
}

/// systemctl's answer to `verb`, or what it said instead. Before systemd
/// 250 `is-enabled` said a unit it does not know as a failure to read its file, which
/// is the answer `not-found`.
fn answer(verb: &str, line: &str) -> Result<String, String> {
    if svc::is_answer(verb, line) {
        return Ok(line.to_string());
    }
    if verb == "is-enabled"
        && line.starts_with("Failed to get unit file state")
        && line.ends_with("No such file or directory")
    {
        return Ok("not-found".into());
    }
    Err(line.to_string())
}

/// The daemon's line and the targets' lines from the store in `state`. No store yet is
/// the daemon's to make; one this user cannot reach is said as such (a system daemon's
/// state directory is root's, mode 0700).
fn read_store(state: &Path) -> Result<(Option<DaemonLine>, Vec<TargetLine>), CliError> {
    let db = state.join(crate::store::DB_FILE);
    Ok(match std::fs::metadata(&db) {
        Ok(_) => {
            let store = SqliteStore::open(state)?;
            let now = now_millis();
            let hb = store.heartbeat()?;
            let alive = hb.as_ref().is_some_and(|b| b.alive_at(now));
            (
                Some(DaemonLine {
                    detail: super::host::daemon_line(hb.as_ref(), alive),
                    running: alive,
                }),
                target_lines(&store)?,
            )
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (None, Vec::new()),
        Err(e) => (
            Some(DaemonLine {
                detail: format!("cannot read the store at {}: {e}", db.display()),
                running: false,
            }),
            Vec::new(),
        ),
    })
}

fn status_text(r: &Report) -> String {
    let no_systemctl = if r.systemd.running {
        "skipped: no systemctl on PATH"
    } else {
        "skipped: systemd is not running on this host"
    };
    let mut binary = match (&r.unit.binary, &r.unit.stale) {
        (_, Some(s)) => format!("STALE: {s}"),
        (Some(b), None) => format!("{b} (this binary)"),
        (None, None) => "-".into(),
    };
    if let Some(top) = r.hidden {
        binary.push_str(&format!(
            "; under {top}, which ProtectHome=yes hides from the service: it cannot start"
        ));
    }
    let asked = |a: &Option<String>| a.clone().unwrap_or_else(|| no_systemctl.into());
    let mut s = block(&[
        (
            "unit",
            format!("{} ({})", r.path.display(), kind_word(r.kind)),
        ),
        ("installed", r.unit.installed.clone()),
        ("binary", binary),
        ("enabled", asked(&r.systemd.enabled)),
        ("active", asked(&r.systemd.active)),
        ("state_dir", r.state.display().to_string()),
        (
            "daemon",
            r.daemon.as_ref().map_or_else(
                || format!("no store at {} yet", r.state.display()),
                |d| d.detail.clone(),
            ),
        ),
    ]);
    if !r.targets.is_empty() {
        s.push('\n');
        s.push_str(&targets_table(&r.targets));
    }
    s
}

fn targets_table(targets: &[TargetLine]) -> String {
    let rows: Vec<Vec<String>> = targets
        .iter()
        .map(|t| {
            let cred = match t.credential.detail() {
                Some(d) => format!("{}: {d}", t.credential.word()),
                None => t.credential.word().to_string(),
            };
            vec![
                t.name.clone(),
                or_dash(t.last_report.as_ref()),
                cred,
                or_dash(t.last_error.as_ref()),
            ]
        })
        .collect();
    table(
        &["TARGET", "LAST REPORT", "CREDENTIAL", "LAST ERROR"],
        &rows,
    )
}

fn status_json(r: &Report) -> serde_json::Value {
    json!({
        "unit": {
            "path": r.path.display().to_string(),
            "kind": kind_word(r.kind),
            "installed": !matches!(r.unit.existing, Existing::Absent),
            "ours": matches!(r.unit.existing, Existing::Ours(_)),
            "packaged": r.unit.packaged,
            "binary": r.unit.binary,
            "stale": r.unit.stale.as_ref().map(ToString::to_string),
            "binary_hidden_by": r.hidden,
            "state_dir": r.unit.state.as_ref().map(|p| p.display().to_string()),
        },
        "systemd": {
            "running": r.systemd.running,
            "failed": r.systemd.failed,
            "checked": r.systemd.checked,
            "enabled": r.systemd.enabled,
            "active": r.systemd.active,
        },
        "state_dir": r.state.display().to_string(),
        "daemon": r.daemon.as_ref().map(|d| json!({"running": d.running, "detail": d.detail})),
        "targets": r.targets.iter().map(|t| json!({
            "name": t.name,
            "last_report": t.last_report,
            "last_error": t.last_error,
            "credential": t.credential.word(),
            "credential_detail": t.credential.detail(),
        })).collect::<Vec<_>>(),
    })
}
