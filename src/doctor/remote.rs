//! The checks that ask GitHub: each target's credentials and permissions
//! (`github::check_target`, and `scaleset::check` for its scale set profiles), the
//! clock against GitHub's `Date`, and the newest runner version the target's
//! downloads API offers; and, from the store, the session each scale set profile's
//! listener holds (`check_sessions`).

use super::{CheckLine, Options};
use crate::domain::{ScalePolicy, Target};
use crate::github::{CheckOptions, GitHubClient, check_target, load_credential};
use crate::install::{platform, version_of};
use crate::timefmt::{Millis, now_millis};
use std::collections::BTreeMap;

/// Checks every target; returns the newest runner version each offers (None when it
/// could not be asked).
pub(super) fn check_targets(
    opts: &Options,
    targets: &[Target],
    profiles: &[ScalePolicy],
    lines: &mut Vec<CheckLine>,
) -> BTreeMap<String, Option<String>> {
    let mut newest = BTreeMap::new();
    if targets.is_empty() {
        lines.push(CheckLine::skip("targets", "no targets configured"));
        return newest;
    }
    for t in targets {
        let name = format!("target {}", t.name);
        let cred = match load_credential(&t.credential) {
            Ok(c) => c,
            Err(e) => {
                lines.push(CheckLine::fail(
                    name,
                    e.to_string(),
                    format!(
                        "fix the credential reference with 'runner-manager target set {} ...'",
                        t.name
                    ),
                ));
                newest.insert(t.name.clone(), None);
                continue;
            }
        };
        let client = GitHubClient::new(t, cred);
        let used: Vec<&ScalePolicy> = profiles.iter().filter(|p| p.target == t.name).collect();
        let copts = CheckOptions {
            allow_public: used.iter().any(|p| p.allow_public),
            runner_group: used.iter().find_map(|p| p.runner_group.clone()),
        };
        let mut results = check_target(t, &client, &copts);
        if results.iter().all(|l| l.name != "credentials" || l.ok) {
            results.extend(crate::scaleset::check::check_target(t, profiles));
        }
        for c in &results {
            let n = format!("{name} {}", c.name);
            lines.push(if c.ok {
                CheckLine::ok(n, c.detail.clone())
            } else {
                CheckLine::fail(
                    n,
                    c.detail.clone(),
                    format!(
                        "see 'runner-manager target show {}' and the token's permissions",
                        t.name
                    ),
                )
            });
        }
        lines.push(match client.last_date() {
            Some(server) => skew_line(&format!("clock {}", t.name), server, now_millis(), opts),
            None => CheckLine::skip(
                format!("clock {}", t.name),
                "GitHub did not answer, so the clock was not compared",
            ),
        });
        let v = platform().and_then(|(os, arch)| {
            let list = client.runner_downloads(&t.scope).ok()?;
            let d = list.iter().find(|d| d.os == os && d.arch == arch)?;
            version_of(&d.filename, os, arch)
        });
        newest.insert(t.name.clone(), v);
    }
    newest
}

/// Each scale set profile's session as the running daemon recorded it: a warning
/// (not a failure: another owner may hold it on purpose, or for a while) when another
/// owner holds it or the listener keeps failing.
pub(super) fn check_sessions(
    store: &dyn crate::store::Store,
    profiles: &[ScalePolicy],
    lines: &mut Vec<CheckLine>,
) {
    let now = now_millis();
    let alive = store
        .heartbeat()
        .ok()
        .flatten()
        .is_some_and(|b| b.alive_at(now));
    let rows = store.session_statuses().unwrap_or_default();
    let targets: std::collections::BTreeSet<&str> =
        profiles.iter().map(|p| p.target.as_str()).collect();
    for t in targets {
        let of: Vec<&ScalePolicy> = profiles.iter().filter(|p| p.target == t).collect();
        for c in crate::scaleset::check::session_lines(&of, &rows, alive, now) {
            let n = format!("target {t} {}", c.name);
            lines.push(if c.ok {
                CheckLine::ok(n, c.detail)
            } else {
                CheckLine::warn(
                    n,
                    c.detail,
                    "the profile gets no demand from its scale set meanwhile; stop the other \
                     holder, or let its session end; see 'runner-manager status'",
                )
            });
        }
    }
}

/// Compares the local clock with the server's `Date` (whole seconds, so up to a second
/// of the difference is the header's rounding).
pub(super) fn skew_line(name: &str, server: Millis, local: Millis, opts: &Options) -> CheckLine {
    let skew = local - server;
    let abs = skew.unsigned_abs();
    let said = format!(
        "this host's clock is {:.1}s {} GitHub's",
        abs as f64 / 1000.0,
        if skew >= 0 { "ahead of" } else { "behind" }
    );
    let hint = "synchronise the clock (systemd-timesyncd, chrony or ntpd)";
    if abs > opts.fail_skew.as_millis() as u64 {
        CheckLine::fail(name, said, hint)
    } else if abs > opts.warn_skew.as_millis() as u64 + 1000 {
        CheckLine::warn(name, said, hint)
    } else {
        CheckLine::ok(name, said)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::Status;

    #[test]
    fn skew_thresholds() {
        let o = Options::for_state_dir(std::path::Path::new("/x"));
        let at = |ms: i64| skew_line("clock", 1_000_000, 1_000_000 + ms, &o).status;
        assert_eq!(at(900), Status::Ok);
        assert_eq!(at(-5_500), Status::Ok);
        assert_eq!(at(-7_000), Status::Warn);
        assert_eq!(at(31_000), Status::Fail);
        assert_eq!(at(-31_000), Status::Fail);
    }
}
