//! `runner-manager doctor`: checks what the daemon relies on and says what to fix. The
//! store (integrity, modes, owner), disk space in the state directory, each target
//! (`github::check_target`) and the clock against GitHub's `Date`, each scale set
//! profile's session as the daemon recorded it, each runner install
//! (present, executable, version against the newest the downloads API offers), and the
//! systemd unit. One `CheckLine` per fact; a failure carries a hint.

mod contain;
mod host;
mod remote;

pub use host::free_bytes;

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
}

impl CheckLine {
    pub fn ok(name: impl Into<String>, detail: impl Into<String>) -> CheckLine {
        CheckLine {
            name: name.into(),
            status: Status::Ok,
            detail: detail.into(),
            hint: None,
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

/// Every line, one per row, the details aligned after the widest name.
pub fn render(lines: &[CheckLine]) -> String {
    let width = lines
        .iter()
        .map(|l| l.name.chars().count())
        .max()
        .unwrap_or(0)
        .max(NAME_WIDTH);
    lines.iter().map(|l| l.render(width) + "\n").collect()
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
    }
    host::check_runners(opts, &profiles, &newest, &mut lines);
    lines.push(host::check_systemd(opts));
    lines
}

/// The documented `--json` shape: `[{check, status, detail, hint}]`.
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
        let rows: Vec<&str> = text.lines().collect();
        let col = |row: &str, detail: &str| row.find(detail).unwrap();
        assert_eq!(col(rows[0], "63 GiB"), col(rows[1], "4882"));
        assert_eq!(col(rows[1], "4882"), col(rows[2], "401"));
        assert!(rows[2].contains("credentials  401; hint: fix it"), "{text}");
        assert!(rows[1].contains("rate limit  "), "{text}");
    }
}
