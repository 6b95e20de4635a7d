//! The checks that ask GitHub: each target's credentials and permissions
//! (`github::check_target`, and `scaleset::check` for its scale set profiles), the
//! clock against GitHub's `Date`, and the newest runner version the target's
//! downloads API offers; and, from the store, the session each scale set profile's
//! listener holds (`check_sessions`) and how the daemon paces each target's queue
//! reads to its rate-limit budget (`check_pacing`); and whether the host's coordinator
//! answers at its URL (`check_coordinator`: a TCP dial, no token sent).

use super::{Cause, CheckLine, Class, Options};
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
        if results
            .iter()
            .all(|l| l.name != "credentials" || l.passed())
        {
            results.extend(crate::scaleset::check::check_target(t, profiles));
        }
        for c in results {
            let n = format!("{name} {}", c.name);
            lines.push(if c.passed() {
                CheckLine { name: n, ..c }
            } else {
                CheckLine {
                    name: n,
                    hint: Some(format!(
                        "see 'runner-manager target show {}' and the token's permissions",
                        t.name
                    )),
                    ..c
                }
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

/// Whether a daemon runs on the store (its heartbeat is recent).
fn daemon_alive(store: &dyn crate::store::Store, now: Millis) -> bool {
    store
        .heartbeat()
        .ok()
        .flatten()
        .is_some_and(|b| b.alive_at(now))
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
    let alive = daemon_alive(store, now);
    let rows = store.session_statuses().unwrap_or_default();
    let targets: std::collections::BTreeSet<&str> =
        profiles.iter().map(|p| p.target.as_str()).collect();
    for t in targets {
        let of: Vec<&ScalePolicy> = profiles.iter().filter(|p| p.target == t).collect();
        for c in crate::scaleset::check::session_lines(&of, &rows, alive, now) {
            let n = format!("target {t} {}", c.name);
            lines.push(if c.passed() {
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

/// How often the running daemon reads each target's queue: at its `poll_interval`
/// (ok), or stretched by the budget governor so the rate-limit budget lasts to the
/// reset (warn: jobs wait longer to be seen). Nothing without a running daemon.
pub(super) fn check_pacing(
    store: &dyn crate::store::Store,
    targets: &[Target],
    lines: &mut Vec<CheckLine>,
) {
    let now = now_millis();
    let alive = daemon_alive(store, now);
    if !alive {
        return;
    }
    let rows = store.target_statuses().unwrap_or_default();
    for t in targets {
        let Some(row) = rows.iter().find(|r| r.target == t.name) else {
            continue;
        };
        if let Some(line) = pacing_line(t, row) {
            lines.push(line.with_class(Class::Info));
        }
    }
}

/// [`check_pacing`]'s line for one target's status row.
fn pacing_line(t: &Target, row: &crate::store::TargetStatus) -> Option<CheckLine> {
    let every = row.poll_every_ms?;
    let base = t.poll_interval_secs as Millis * 1000;
    let name = format!("target {} polling", t.name);
    let budget = match (
        row.rate_limit_remaining,
        row.rate_limit_limit,
        row.rate_limit_reset,
    ) {
        (Some(r), Some(l), Some(at)) => format!(
            "{r} of {l} units left until {}",
            crate::timefmt::format_rfc3339(at)
        ),
        _ => "budget not reported".into(),
    };
    // The settings' one form (`1m`, `90s`), as `status` and `target show` say it.
    let every_s = crate::timefmt::duration(((every.max(0) + 999) / 1000) as u64);
    Some(if every > base {
        CheckLine::warn(
            name,
            format!(
                "every {every_s}, stretched from {} so the budget lasts ({budget})",
                crate::timefmt::duration(t.poll_interval_secs)
            ),
            "the credential's budget is thin: give this target a token or App of its own, \
             share it with fewer hosts, or use demand=scaleset (its long poll costs no units)",
        )
    } else {
        CheckLine::ok(name, format!("every {every_s} ({budget})"))
    })
}

#[cfg(test)]
mod pacing_tests {
    use super::*;
    use crate::domain::{CredentialRef, TargetMode, TargetScope};

    #[test]
    fn a_stretched_poll_warns_with_the_budget() {
        let t = Target {
            name: "octo".into(),
            scope: TargetScope::Repo {
                owner: "o".into(),
                repo: "r".into(),
            },
            api_url: "https://api.github.com".into(),
            credential: CredentialRef::TokenFile { path: "/t".into() },
            poll_interval_secs: 5,
            repos: vec![],
            max_in_flight: 24,
            secondary_limit: Some(900),
        };
        let mut row = crate::store::TargetStatus {
            target: "octo".into(),
            mode: TargetMode::Standalone.into(),
            last_error: None,
            error_kind: None,
            rate_limit_remaining: Some(85),
            rate_limit_limit: Some(100),
            rate_limit_reset: Some(1_796_130_303_000),
            poll_every_ms: Some(5_000),
            updated_at: 0,
        };
        let ok = pacing_line(&t, &row).unwrap();
        assert!(
            ok.render(30)
                .contains("every 5s (85 of 100 units left until 2026-12-01T13:05:03Z)")
        );
        row.poll_every_ms = Some(11_250);
        let warn = pacing_line(&t, &row).unwrap().render(30);
        assert!(warn.contains("every 12s, stretched from 5s"), "{warn}");
        // Issue 38: in the settings' one form, as `target show` says it.
        row.poll_every_ms = Some(120_000);
        let warn = pacing_line(&t, &row).unwrap().render(30);
        assert!(warn.contains("every 2m, stretched from 5s"), "{warn}");
        row.poll_every_ms = None;
        assert!(
            pacing_line(&t, &row).is_none(),
            "no REST queue read: nothing to say"
        );
    }
}

/// The name of the coordinator's line: `cli::doctor` classes a failure of it as
/// `coordinator-unreachable`.
pub const COORDINATOR_CHECK: &str = "coordinator";

/// Dials the host's coordinator, when it has one: a TCP connection to its URL's host
/// and port within `timeout`. No token is sent (the daemon's link proves the token);
/// this says whether anything answers there.
pub(super) fn check_coordinator(
    host: &crate::domain::Host,
    timeout: std::time::Duration,
    lines: &mut Vec<CheckLine>,
) {
    let Some(url) = &host.coordinator else {
        return;
    };
    let hint = "start 'runner-manager coordinator serve' there, or point this host at it with 'runner-manager host set coordinator=URL'";
    lines.push(match dial(url, timeout) {
        Ok(addr) => CheckLine::ok(COORDINATOR_CHECK, format!("{url} answers ({addr})")),
        Err(why) => CheckLine::fail(
            COORDINATOR_CHECK,
            format!(
                "{url} does not answer: {why}; runners start standalone after the fallback grace"
            ),
            hint,
        )
        .with_cause(Some(Cause::CoordinatorUnreachable)),
    });
}

/// The first address of `url`'s host and port (80 for `ws://`, 443 for `wss://`
/// unless given) that takes a connection.
fn dial(url: &str, timeout: std::time::Duration) -> Result<std::net::SocketAddr, String> {
    use std::net::ToSocketAddrs;
    use tungstenite::client::IntoClientRequest;
    let req = url
        .into_client_request()
        .map_err(|e| format!("bad coordinator URL: {e}"))?;
    let host = req.uri().host().ok_or("no host in the URL")?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = req
        .uri()
        .port_u16()
        .unwrap_or(if url.starts_with("wss://") { 443 } else { 80 });
    let mut last = String::from("no address");
    for a in (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("resolving {host}: {e}"))?
    {
        match std::net::TcpStream::connect_timeout(&a, timeout) {
            Ok(_) => return Ok(a),
            Err(e) => last = format!("{a}: {e}"),
        }
    }
    Err(last)
}
