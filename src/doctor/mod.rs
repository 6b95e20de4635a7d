//! `runner-manager doctor`: checks what the daemon relies on and says what to fix. The
//! store (integrity, modes, owner), disk space in the state directory, each target
//! (`github::check_target`) and the clock against GitHub's `Date`, each scale set
//! profile's session as the daemon recorded it, each runner install
//! (present, executable, version against the newest the downloads API offers), and the
//! systemd unit; memory and cores against capacity, and each profile's required tools
//! on the `PATH` its runners get; the host's coordinator, dialled. One `CheckLine` per
//! fact; a failure carries a hint.
//! Each line has a [`Class`], given by the check that made it: `required` checks are
//! the ones under which the daemon starts no runner (`reconcile::fitness`'s own class,
//! the disk reserve, refused containment, a broken runner install), printed first;
//! then `recommended`, then `info`.

mod contain;
mod host;
mod remote;

pub use crate::github::check_line::{Cause, CheckLine, Class, Status};
pub use remote::COORDINATOR_CHECK;

use std::path::{Path, PathBuf};
use std::time::Duration;

/// Every line under a heading per class (`check_line::render`, as `target check`).
pub fn render(lines: &[CheckLine]) -> String {
    crate::github::check_line::render(lines, crate::github::check_line::DOCTOR)
}

/// The documented `--json` shape: `[{check, status, ok, detail, hint, class}]`
/// (`check_line::to_json`).
pub fn to_json(lines: &[CheckLine]) -> serde_json::Value {
    crate::github::check_line::to_json(lines)
}

/// What to check and the thresholds. `for_state_dir` gives the defaults.
#[derive(Debug, Clone)]
pub struct Options {
    pub state_dir: PathBuf,
    /// Free space under this is a warning...
    pub warn_free_bytes: u64,
    /// ...and under this a failure (attempt roots and logs need room): `None` is the
    /// host's `disk_reserve`, under which the daemon starts no runners.
    pub fail_free_bytes: Option<u64>,
    /// Clock skew beyond this is a warning (timestamps in the books drift)...
    pub warn_skew: Duration,
    /// ...and beyond this a failure (GitHub App JWTs are refused past about a minute).
    pub fail_skew: Duration,
    /// `systemctl` to ask about the unit; `None` looks it up on `PATH`.
    pub systemctl: Option<PathBuf>,
    /// Where a running systemd shows itself (`supervisor::systemd_run_dir`): without
    /// it, `systemctl` is never asked and the line names the other supervisors' recipes.
    pub systemd_run_dir: PathBuf,
    pub unit: String,
    /// Bound on each external program doctor runs.
    pub command_timeout: Duration,
}

impl Options {
    pub fn for_state_dir(dir: &Path) -> Options {
        Options {
            state_dir: dir.to_path_buf(),
            warn_free_bytes: 2 << 30,
            fail_free_bytes: None,
            warn_skew: Duration::from_secs(5),
            fail_skew: Duration::from_secs(30),
            systemctl: None,
            systemd_run_dir: crate::supervisor::systemd_run_dir(),
            unit: "runner-manager".into(),
            command_timeout: Duration::from_secs(10),
        }
    }
}

/// Runs every check in order: store, disk, targets and clock, runner installs, systemd.
pub fn run_checks(opts: &Options) -> Vec<CheckLine> {
    let mut lines = Vec::new();
    let store = host::check_store(opts, &mut lines);
    let reserve = store
        .as_ref()
        .and_then(|s| crate::store::Store::host(s).ok().flatten())
        .map_or(crate::domain::host::DEFAULT_DISK_RESERVE_BYTES, |h| {
            h.disk_reserve_bytes
        });
    lines.push(
        host::check_disk(opts, opts.fail_free_bytes.unwrap_or(reserve)).with_class(Class::Required),
    );
    if let Some(s) = &store {
        lines.push(host::check_identity(s));
        lines.push(host::check_kept(&opts.state_dir, s).with_class(Class::Info));
        lines.push(host::check_caches(&opts.state_dir, s).with_class(Class::Info));
        contain::check(&opts.state_dir, s, &mut lines);
    }
    let (targets, profiles) = match &store {
        Some(s) => {
            use crate::store::Store;
            (
                s.targets().unwrap_or_default(),
                s.profiles().unwrap_or_default(),
            )
        }
        None => (Vec::new(), Vec::new()),
    };
    let newest = remote::check_targets(opts, &targets, &profiles, &mut lines);
    if let Some(s) = &store {
        remote::check_sessions(s, &profiles, &mut lines);
        remote::check_pacing(s, &targets, &mut lines);
        lines.extend(host::check_webhook(s, crate::timefmt::now_millis()));
    }
    host::check_runners(opts, &profiles, &newest, &mut lines);
    if let Some(h) = store
        .as_ref()
        .and_then(|s| crate::store::Store::host(s).ok().flatten())
    {
        let enforced = store
            .as_ref()
            .map(|s| contain::enforced_limits(s, &h))
            .unwrap_or_default();
        fitness_lines(&h, &profiles, &enforced, &mut lines);
        remote::check_coordinator(&h, opts.command_timeout, &mut lines);
    }
    lines.push(host::check_systemd(opts));
    lines
}

/// Memory and cores against capacity, each profile's required tools on the `PATH`
/// its runners get, and each `oci` profile's Podman readiness (podman installed,
/// rootless, user namespaces, cgroup v2, a disk quota): the daemon's own facts and words (`fitness_watch`,
/// `reconcile::fitness`); runner users have their own line (`contain`).
fn fitness_lines(
    host: &crate::domain::Host,
    profiles: &[crate::domain::ScalePolicy],
    enforced: &crate::runner::cgroup::Enforced,
    lines: &mut Vec<CheckLine>,
) {
    let facts = crate::reconcile::fitness::Facts {
        runner_users: None,
        ..crate::daemon::host::fitness_watch::read_facts(host, profiles, enforced)
    };
    lines.extend(
        crate::reconcile::fitness::findings(&facts)
            .into_iter()
            .map(finding_line),
    );
}

/// A fitness finding as a line, in the class the finding gives it: a failed required
/// check fails, any other warns.
fn finding_line(f: crate::reconcile::fitness::Finding) -> CheckLine {
    let line = match (f.ok, f.class, f.hint) {
        (true, _, _) | (false, _, None) => CheckLine::ok(f.check, f.detail),
        (false, Class::Required, Some(h)) => CheckLine::fail(f.check, f.detail, h),
        (false, _, Some(h)) => CheckLine::warn(f.check, f.detail, h),
    };
    line.with_class(f.class)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reconcile::fitness::Finding;

    /// Required-ness is the finding's, whatever its name says: a best-effort profile's
    /// limits not in effect warn among the recommended checks, a strict one's fail
    /// among the required.
    #[test]
    fn a_fitness_line_keeps_its_findings_class() {
        let finding = |class| Finding {
            check: "limits:p".into(),
            class,
            ok: false,
            detail: "memory_max set but not in effect".into(),
            hint: Some("delegate cgroup v2".into()),
            profile: Some("p".into()),
        };
        let loose = finding_line(finding(Class::Recommended));
        assert_eq!(
            (loose.status, loose.class),
            (Status::Warn, Class::Recommended)
        );
        let strict = finding_line(finding(Class::Required));
        assert_eq!(
            (strict.status, strict.class),
            (Status::Fail, Class::Required)
        );
        let text = render(&[strict, loose]);
        assert!(
            text.find("FAIL limits:p") < text.find("recommended:"),
            "{text}"
        );
        assert!(
            text.find("recommended:") < text.find("WARN limits:p"),
            "{text}"
        );
    }
}
