//! The checks of this machine: the store, disk space, runner installs, systemd.

use super::{CheckLine, Class, Options};
use crate::domain::ScalePolicy;
use crate::install::{compare_versions, installed_version};
use crate::store::{DB_FILE, SqliteStore};
use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Mode and owner of one path against what it should be.
fn mode_line(name: &str, path: &Path, want: u32) -> CheckLine {
    let md = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) => {
            return CheckLine::fail(
                name,
                format!("cannot read {}: {e}", path.display()),
                "check the path and the permissions of its parents",
            );
        }
    };
    let mode = md.permissions().mode() & 0o7777;
    if md.uid() != euid() {
        return CheckLine::fail(
            name,
            format!(
                "{} is owned by uid {}, not by this user (uid {})",
                path.display(),
                md.uid(),
                euid()
            ),
            format!(
                "run doctor as the daemon's user, or chown it to that user: chown -R USER {}",
                path.display()
            ),
        );
    }
    // A directory may let others through (0711: runners under their own uids reach
    // their roots by name), never read or write it.
    let closed = if md.is_dir() { 0o066 } else { 0o077 };
    if mode & closed != 0 {
        return CheckLine::fail(
            name,
            format!(
                "{} is mode {mode:04o}: others can read the books",
                path.display()
            ),
            format!("chmod {want:o} {}", path.display()),
        );
    }
    CheckLine::ok(name, format!("{} mode {mode:04o}, ours", path.display()))
}

/// Whether the store's host id was drawn on this machine (`domain::identity`): a
/// state directory copied from another machine warns, with the fix.
pub(super) fn check_identity(store: &SqliteStore) -> CheckLine {
    use crate::store::Store;
    let kept = match store.kept_machine_id() {
        Ok(k) => k,
        Err(e) => return CheckLine::failed("identity", e.to_string()),
    };
    let current = crate::runner::machine::current();
    match crate::domain::identity::describe(kept.as_deref(), current.as_deref()) {
        (true, line) => CheckLine::ok("identity", line),
        (false, line) => CheckLine::warn(
            "identity",
            line,
            "runner-manager host reidentify (on the copy, with its daemon stopped)",
        ),
    }
}

/// The state directory and store file's modes and owner, then `integrity_check`.
/// Returns the open store for the later checks.
pub(super) fn check_store(opts: &Options, lines: &mut Vec<CheckLine>) -> Option<SqliteStore> {
    let dir = &opts.state_dir;
    if !dir.exists() {
        lines.push(CheckLine::skip(
            "store",
            format!(
                "no state directory {} yet: it is created on first use",
                dir.display()
            ),
        ));
        return None;
    }
    lines.push(mode_line("state-dir", dir, 0o700));
    let db = dir.join(DB_FILE);
    if !db.exists() {
        lines.push(CheckLine::skip(
            "store",
            format!("no store {} yet: it is created on first use", db.display()),
        ));
        return None;
    }
    lines.push(mode_line("store-file", &db, 0o600));
    let store = match SqliteStore::open(dir) {
        Ok(s) => s,
        Err(e) => {
            lines.push(CheckLine::fail(
                "store-integrity",
                e.to_string(),
                "stop the daemon, move state.db aside and restore a backup (or start afresh with 'target add')",
            ));
            return None;
        }
    };
    match store.integrity_check() {
        Ok(found) if found == ["ok"] => {
            lines.push(CheckLine::ok("store-integrity", "integrity_check: ok"));
        }
        Ok(found) => lines.push(CheckLine::fail(
            "store-integrity",
            format!("integrity_check: {}", found.join("; ")),
            "stop the daemon, move state.db aside and restore a backup",
        )),
        Err(e) => lines.push(CheckLine::fail(
            "store-integrity",
            e.to_string(),
            "stop the daemon, move state.db aside and restore a backup",
        )),
    }
    Some(store)
}

/// Free space in the state directory against `fail_under` (the host's
/// `disk_reserve` unless the options say otherwise) and the warning mark.
pub(super) fn check_disk(opts: &Options, fail_under: u64) -> CheckLine {
    // Before the first run the directory does not exist: its parent's filesystem is
    // where it will be.
    let mut at: &Path = &opts.state_dir;
    while !at.exists() {
        match at.parent() {
            Some(p) if !p.as_os_str().is_empty() => at = p,
            _ => break,
        }
    }
    disk_line(
        at,
        crate::daemon::free_bytes(at),
        fail_under,
        opts.warn_free_bytes,
    )
}

/// What the state directory keeps (`host set retention= logs_max=`): ok while the
/// logs are within their cap; over it, the daemon's hourly upkeep trims them.
pub(super) fn check_kept(state_dir: &Path, store: &crate::store::SqliteStore) -> CheckLine {
    use crate::store::Store;
    let Ok(Some(host)) = store.host() else {
        return CheckLine::ok("kept", "nothing yet (no host in the store)");
    };
    let kept = crate::facts::kept::Kept::read(state_dir, &host);
    if kept.logs_bytes > kept.logs_max_bytes {
        return CheckLine::warn(
            "kept",
            format!("{}: the logs are over their cap", kept.line()),
            "the running daemon trims them within the hour, oldest first; raise it with \
             host set logs_max=SIZE",
        );
    }
    CheckLine::ok("kept", kept.line())
}

/// What the dependency caches and kept workspaces hold against the host's
/// `cache_cap` (the daemon's last measure, else one walk of their slots): ok within it; over it, the daemon's
/// hourly prune removes the least recently used slots no attempt holds.
pub(super) fn check_caches(state_dir: &Path, store: &crate::store::SqliteStore) -> CheckLine {
    use crate::store::Store;
    let Ok(Some(host)) = store.host() else {
        return CheckLine::ok("caches", "nothing yet (no host in the store)");
    };
    let now = crate::timefmt::now_millis();
    let (f, at) = crate::facts::caches::shown(store, state_dir, &host, now);
    let line = crate::facts::caches::shown_line(&f, at, now);
    if f.over() {
        return CheckLine::warn(
            "caches",
            format!("{line}: over the cap"),
            "the running daemon prunes them within the hour, least recently used first              and never a slot a live attempt holds; raise it with host set cache_cap=SIZE",
        );
    }
    CheckLine::ok("caches", line)
}

/// The disk line: a failure under `fail_under`, in the daemon's words (it starts no
/// runners there, and again only above twice it: `reconcile::disk`), a warning under
/// `warn_under` or under where held starts resume.
pub(super) fn disk_line(
    at: &Path,
    free: std::io::Result<u64>,
    fail_under: u64,
    warn_under: u64,
) -> CheckLine {
    use crate::reconcile::disk;
    use crate::units::bytes;
    let hint =
        "free space there (old logs, build caches) or move the state directory with --state-dir";
    let warn_under = warn_under.max(disk::resume_above(fail_under));
    match free {
        Err(e) => CheckLine::fail("disk", format!("statvfs {}: {e}", at.display()), hint),
        Ok(b) if disk::held(Some(b), false, fail_under) => CheckLine::fail(
            "disk",
            format!(
                "{} free in {}, under disk_reserve {}: the daemon starts no runners until \
                 more than {} is free",
                bytes(b),
                at.display(),
                bytes(fail_under),
                bytes(disk::resume_above(fail_under))
            ),
            format!("{hint}; host set disk_reserve=SIZE sets the mark"),
        ),
        Ok(b) if b < warn_under => CheckLine::warn(
            "disk",
            format!(
                "{} free in {} (under {})",
                bytes(b),
                at.display(),
                bytes(warn_under)
            ),
            hint,
        ),
        Ok(b) => CheckLine::ok("disk", format!("{} free in {}", bytes(b), at.display())),
    }
}

/// Runs a program with a deadline; `None` when it could not run or took too long.
pub(super) fn run_bounded(cmd: &mut Command, opts: &Options) -> Option<(i32, String)> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let deadline = Instant::now() + opts.command_timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                use std::io::Read;
                let mut out = String::new();
                if let Some(mut s) = child.stdout.take() {
                    let _ = s.read_to_string(&mut out);
                }
                return Some((status.code().unwrap_or(-1), out));
            }
            Ok(None) if Instant::now() < deadline => {
                // Polling a child's exit has no blocking-with-timeout call in std.
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}

/// The version an install reports: `bin/runnerversion`, else `Runner.Listener --version`.
fn runner_version(dir: &Path, opts: &Options) -> Option<String> {
    installed_version(dir).or_else(|| {
        let (code, out) = run_bounded(
            Command::new(dir.join("bin/Runner.Listener")).arg("--version"),
            opts,
        )?;
        let v = out.trim();
        (code == 0 && !v.is_empty() && v.len() < 40).then(|| v.to_string())
    })
}

/// One line per runner directory (profiles sharing one are checked once). `newest`
/// maps a target name to the newest version its downloads API offered, if reachable.
pub(super) fn check_runners(
    opts: &Options,
    profiles: &[ScalePolicy],
    newest: &BTreeMap<String, Option<String>>,
    lines: &mut Vec<CheckLine>,
) {
    if profiles.is_empty() {
        lines.push(
            CheckLine::skip("runner", "no profiles, so no runner installs to check")
                .with_class(Class::Required),
        );
        return;
    }
    let mut dirs: BTreeMap<PathBuf, Vec<&ScalePolicy>> = BTreeMap::new();
    // An `oci` profile's runner install is in its image.
    for p in profiles
        .iter()
        .filter(|p| p.execution != crate::domain::Execution::Oci)
    {
        let d = p
            .runner_dir
            .clone()
            .unwrap_or_else(|| opts.state_dir.join("runner"));
        dirs.entry(d).or_default().push(p);
    }
    for (dir, ps) in dirs {
        let names: Vec<&str> = ps.iter().map(|p| p.name.as_str()).collect();
        let name = format!("runner {}", names.join(","));
        let newest_here = ps
            .iter()
            .filter_map(|p| newest.get(&p.target).cloned().flatten())
            .max_by(|a, b| compare_versions(a, b));
        lines.push(
            runner_line(&name, &dir, newest_here.as_deref(), opts).with_class(Class::Required),
        );
    }
}

pub(super) fn runner_line(
    name: &str,
    dir: &Path,
    newest: Option<&str>,
    opts: &Options,
) -> CheckLine {
    let install_hint = format!("runner-manager runner install --dir {}", dir.display());
    // Whether the daemon keeps it current (`daemon::workers::runner_update`).
    let how = match crate::install::managed::kind(dir, &opts.state_dir) {
        Ok(
            crate::install::managed::Kind::Linked { .. } | crate::install::managed::Kind::InPlace,
        ) => "; managed: the daemon keeps it current",
        _ => "; not managed (no runner install marker): the daemon never touches it",
    };
    if !dir.is_dir() {
        return CheckLine::fail(
            name,
            format!("{} does not exist", dir.display()),
            install_hint,
        );
    }
    let listener = dir.join("bin/Runner.Listener");
    let executable = std::fs::metadata(&listener)
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if !executable {
        return CheckLine::fail(
            name,
            format!("{} is missing or not executable", listener.display()),
            install_hint,
        );
    }
    let Some(version) = runner_version(dir, opts) else {
        return CheckLine::fail(
            name,
            format!(
                "{}: neither bin/runnerversion nor Runner.Listener --version says which version it is",
                dir.display()
            ),
            install_hint,
        );
    };
    match newest {
        None => CheckLine::ok(
            name,
            format!(
                "{} version {version} (newest unknown: no target answered){how}",
                dir.display()
            ),
        ),
        Some(n) if compare_versions(&version, n).is_lt() => CheckLine::warn(
            name,
            format!(
                "{} version {version} is older than the newest, {n}{how}",
                dir.display()
            ),
            format!(
                "GitHub stops sending jobs to runners 30 days after a newer release: {install_hint}"
            ),
        ),
        Some(_) => CheckLine::ok(
            name,
            format!("{} version {version} (the newest){how}", dir.display()),
        ),
    }
}

fn on_path(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(program))
            .find(|c| c.is_file())
    })
}

pub(super) fn check_systemd(opts: &Options) -> CheckLine {
    // Not this host's init: there is no unit to ask about, and `systemctl` is no
    // advice to give (issue 50).
    if !crate::supervisor::systemd_runs(&opts.systemd_run_dir) {
        return CheckLine {
            hint: Some(crate::supervisor::instead()),
            ..CheckLine::skip(
                "systemd",
                format!(
                    "systemd is not this host's init (no {})",
                    opts.systemd_run_dir.display()
                ),
            )
        };
    }
    let Some(systemctl) = opts.systemctl.clone().or_else(|| on_path("systemctl")) else {
        return CheckLine::skip("systemd", "no systemctl on this host");
    };
    let unit = &opts.unit;
    match run_bounded(Command::new(&systemctl).args(["is-enabled", unit]), opts) {
        None => CheckLine::skip("systemd", format!("{} did not answer", systemctl.display())),
        Some((_, out)) => {
            let state = out.lines().next().unwrap_or("").trim().to_string();
            match state.as_str() {
                "enabled" | "enabled-runtime" | "static" | "alias" | "linked" => {
                    CheckLine::ok("systemd", format!("{unit}.service is {state}"))
                }
                "disabled" => CheckLine::warn(
                    "systemd",
                    format!("{unit}.service is installed but disabled"),
                    format!("systemctl enable --now {unit}"),
                ),
                "masked" | "masked-runtime" => CheckLine::fail(
                    "systemd",
                    format!("{unit}.service is {state}"),
                    format!("systemctl unmask {unit} && systemctl enable --now {unit}"),
                ),
                "" | "not-found" => {
                    CheckLine::skip("systemd", format!("{unit}.service is not installed"))
                }
                other => CheckLine::skip(
                    "systemd",
                    format!("{unit}.service: systemctl says {other:?}"),
                ),
            }
        }
    }
}

/// The webhook listener's line (`daemon::feeds::webhook`): its settings, its secret file (read
/// as the daemon reads it) and what it last saw; nothing while it is off.
pub fn check_webhook(
    store: &dyn crate::store::Store,
    now: crate::timefmt::Millis,
) -> Option<crate::doctor::CheckLine> {
    use crate::facts::host_probe::read_secret;
    use crate::facts::webhook::settings;
    use crate::store::daemon_facts::WebhookSeen;
    let (listen, file) = match settings(store) {
        Ok(None) => return None,
        Ok(Some(s)) => s,
        Err(e) => {
            return Some(CheckLine::fail(
                "webhook",
                e,
                "set both webhook_listen and webhook_secret_file, or unset both",
            ));
        }
    };
    if let Err(e) = read_secret(&file) {
        return Some(CheckLine::fail(
            "webhook",
            format!("webhook_secret_file: {e}; no listener starts"),
            "fix the file (chmod 600, owned by the manager) and restart the daemon",
        ));
    }
    // What the last listener wrote is history once no daemon beats: say so, as
    // `status` does, rather than "listening".
    let alive = store
        .heartbeat()
        .ok()
        .flatten()
        .is_some_and(|b| b.alive_at(now));
    if !alive {
        return Some(CheckLine::ok(
            "webhook",
            format!("set to {listen}; no daemon listens (it starts the listener)"),
        ));
    }
    let seen = WebhookSeen::read(store);
    Some(match seen {
        Some(s) if s.error.is_some() => CheckLine::fail(
            "webhook",
            s.describe(now),
            "see the daemon's log; polling goes on without webhooks",
        ),
        Some(s) => CheckLine::ok("webhook", s.describe(now)),
        None => CheckLine::ok(
            "webhook",
            format!("will listen on {listen} once the daemon starts"),
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn the_disk_fails_where_the_daemon_holds_starts_and_warns_until_they_resume() {
        let at = Path::new("/var/lib/runner-manager");
        let line = |free: u64| disk_line(at, Ok(free), 256 * MIB, 2 << 30);
        let fail = line(255 * MIB);
        assert_eq!(fail.status, super::super::Status::Fail, "{fail:?}");
        assert!(
            fail.detail.contains("under disk_reserve 256 MiB")
                && fail
                    .detail
                    .contains("starts no runners until more than 512 MiB"),
            "{fail:?}"
        );
        assert!(fail.hint.unwrap().contains("disk_reserve="));
        assert_eq!(line(256 * MIB).status, super::super::Status::Warn);
        assert_eq!(line(3 << 30).status, super::super::Status::Ok);
        // A reserve above the warning mark: warned until starts would resume.
        let big = disk_line(at, Ok(5 << 30), 4 << 30, 2 << 30);
        assert_eq!(big.status, super::super::Status::Warn, "{big:?}");
        assert_eq!(
            disk_line(at, Ok(0), 0, 0).status,
            super::super::Status::Ok,
            "a reserve of 0 never fails"
        );
    }
}
