//! `runner-manager doctor`: checks what the daemon relies on and says what to fix. The
//! store (integrity, modes, owner), disk space in the state directory, each target
//! (`github::check_target`) and the clock against GitHub's `Date`, each scale set
//! profile's session as the daemon recorded it, each runner install
//! (present, executable, version against the newest the downloads API offers), and the
//! systemd unit; memory and cores against capacity, and each profile's required tools
//! on the `PATH` its runners get; the host's coordinator, dialled. One `CheckLine` per
//! fact; a failure carries a hint.
//! Each line has a [`Class`]: `required` checks are the ones under which the daemon
//! starts no runner (`reconcile::fitness`, the disk reserve, refused containment, a
//! broken runner install), printed first; then `recommended`, then `info`.

mod contain;
mod host;
mod remote;

pub use crate::reconcile::fitness::Class;
pub use remote::COORDINATOR_CHECK;

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How a check came out. `Warn` and `Skip` do not fail `doctor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Ok,
    Warn,
    Fail,
    /// Not applicable here (no systemctl, no store yet, target unreachable).
    Skip,
}

/// One line of `doctor`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckLine {
    pub name: String,
    pub status: Status,
    pub detail: String,
    /// What to do; set on every `Fail` and `Warn`.
    pub hint: Option<String>,
    /// Whether the daemon starts runners while it fails (see [`class_of`]).
    pub class: Class,
    /// A failed target line: the target and the GitHub error it met, so `cli::doctor`
    /// classes the run by type (credentials, not found, rate limited, unreachable).
    pub github: Option<(String, crate::github::GhError)>,
}

impl CheckLine {
    pub fn ok(name: impl Into<String>, detail: impl Into<String>) -> CheckLine {
        CheckLine {
            name: name.into(),
            status: Status::Ok,
            detail: detail.into(),
            hint: None,
            class: Class::Recommended,
            github: None,
        }
    }

    pub fn skip(name: impl Into<String>, detail: impl Into<String>) -> CheckLine {
        CheckLine {
            status: Status::Skip,
            ..CheckLine::ok(name, detail)
        }
    }

    pub fn fail(
        name: impl Into<String>,
        detail: impl Into<String>,
        hint: impl Into<String>,
    ) -> CheckLine {
        CheckLine {
            name: name.into(),
            status: Status::Fail,
            detail: detail.into(),
            hint: Some(hint.into()),
            class: Class::Recommended,
            github: None,
        }
    }

    pub fn warn(
        name: impl Into<String>,
        detail: impl Into<String>,
        hint: impl Into<String>,
    ) -> CheckLine {
        CheckLine {
            status: Status::Warn,
            ..CheckLine::fail(name, detail, hint)
        }
    }
}

/// The class of a check, by its name: required where the daemon starts no runner
/// while it fails (its disk reserve, refused isolation and what per-attempt uids
/// need, a runner install, a profile's tools), informational for what is only a fact
/// (what is kept, the caches' size, the polling pace), recommended for the rest.
pub fn class_of(name: &str) -> Class {
    let required = matches!(
        name,
        "disk" | "isolation" | "runner-users" | "capabilities" | "runner"
    ) || name.starts_with("tools:")
        || name.starts_with("oci:")
        || name.starts_with("limits:")
        || name.starts_with("runner ");
    if required {
        Class::Required
    } else if name == "kept" || name == "caches" || name.ends_with(" polling") {
        Class::Info
    } else {
        Class::Recommended
    }
}

/// The name column's least width.
const NAME_WIDTH: usize = 22;

impl CheckLine {
    /// The line with its name padded to `width` and two spaces before the detail:
    /// names have spaces of their own (`target octo rate limit`), so one space would
    /// run the name into its detail.
    pub fn render(&self, width: usize) -> String {
        let mark = match self.status {
            Status::Ok => "ok  ",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
            Status::Skip => "skip",
        };
        let mut out = format!("{mark} {:<width$}  {}", self.name, self.detail);
        if let Some(h) = &self.hint {
            out.push_str(&format!("; hint: {h}"));
        }
        out
    }
}

impl fmt::Display for CheckLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render(NAME_WIDTH))
    }
}

/// Every line, one per row, the details aligned after the widest name, under a
/// heading per class: required, recommended, info (each in check order).
pub fn render(lines: &[CheckLine]) -> String {
    let width = lines
        .iter()
        .map(|l| l.name.chars().count())
        .max()
        .unwrap_or(0)
        .max(NAME_WIDTH);
    let mut out = String::new();
    for (class, heading) in [
        (
            Class::Required,
            "required (while one fails, the daemon starts no runner):",
        ),
        (Class::Recommended, "recommended:"),
        (Class::Info, "info:"),
    ] {
        let these: Vec<&CheckLine> = lines.iter().filter(|l| l.class == class).collect();
        if these.is_empty() {
            continue;
        }
        out.push_str(heading);
        out.push('\n');
        for l in these {
            out.push_str(&l.render(width));
            out.push('\n');
        }
    }
    out
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
    lines.push(host::check_disk(
        opts,
        opts.fail_free_bytes.unwrap_or(reserve),
    ));
    if let Some(s) = &store {
        lines.push(host::check_kept(&opts.state_dir, s));
        lines.push(host::check_caches(&opts.state_dir, s));
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
    for l in &mut lines {
        l.class = class_of(&l.name);
    }
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
        ..crate::daemon::fitness_watch::read_facts(host, profiles, enforced)
    };
    for f in crate::reconcile::fitness::findings(&facts) {
        lines.push(match (f.ok, f.class, f.hint) {
            (true, _, _) | (false, _, None) => CheckLine::ok(f.check, f.detail),
            (false, Class::Required, Some(h)) => CheckLine::fail(f.check, f.detail, h),
            (false, _, Some(h)) => CheckLine::warn(f.check, f.detail, h),
        });
    }
}

/// The documented `--json` shape: `[{check, status, detail, hint, class}]`, `class`
/// one of `required`, `recommended`, `info`.
pub fn to_json(lines: &[CheckLine]) -> serde_json::Value {
    serde_json::Value::Array(
        lines
            .iter()
            .map(|l| {
                serde_json::json!({
                    "check": l.name,
                    "status": match l.status {
                        Status::Ok => "ok",
                        Status::Warn => "warn",
                        Status::Fail => "fail",
                        Status::Skip => "skip",
                    },
                    "detail": l.detail,
                    "hint": l.hint,
                    "class": l.class.as_str(),
                })
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn details_start_in_one_column_after_the_widest_name() {
        let lines = vec![
            CheckLine::ok("disk", "63 GiB free"),
            CheckLine::ok("target octo rate limit", "4882 of 5000"),
            CheckLine::fail("target octo-long-name credentials", "401", "fix it"),
        ];
        let text = render(&lines);
        // Under the one heading, "recommended:".
        let rows: Vec<&str> = text.lines().skip(1).collect();
        let col = |row: &str, detail: &str| row.find(detail).unwrap();
        assert_eq!(col(rows[0], "63 GiB"), col(rows[1], "4882"));
        assert_eq!(col(rows[1], "4882"), col(rows[2], "401"));
        assert!(rows[2].contains("credentials  401; hint: fix it"), "{text}");
        assert!(rows[1].contains("rate limit  "), "{text}");
    }

    #[test]
    fn checks_are_sorted_into_required_recommended_and_info() {
        assert_eq!(class_of("disk"), Class::Required);
        assert_eq!(class_of("tools:linux"), Class::Required);
        assert_eq!(class_of("oci:linux"), Class::Required);
        assert_eq!(class_of("runner linux,gpu"), Class::Required);
        assert_eq!(class_of("isolation"), Class::Required);
        assert_eq!(class_of("memory"), Class::Recommended);
        assert_eq!(class_of("systemd"), Class::Recommended);
        assert_eq!(class_of("kept"), Class::Info);
        let mut lines = vec![
            CheckLine::ok("kept", "1 MiB"),
            CheckLine::warn("memory", "1 GiB", "more"),
            CheckLine::fail("tools:linux", "node missing", "install it"),
        ];
        for l in &mut lines {
            l.class = class_of(&l.name);
        }
        let text = render(&lines);
        let at = |s: &str| text.find(s).unwrap_or_else(|| panic!("{s} in {text}"));
        assert!(at("required (") < at("FAIL tools:linux"));
        assert!(at("FAIL tools:linux") < at("recommended:"));
        assert!(at("WARN memory") < at("info:"));
        assert!(at("info:") < at("ok   kept"));
        assert_eq!(to_json(&lines)[2]["class"], "required");
    }
}
