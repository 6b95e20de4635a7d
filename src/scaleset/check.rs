//! `target check` and `doctor` for a target's `demand=scaleset` profiles: the Actions
//! service is reachable with the target's credentials (registration token → admin
//! connection), each profile's runner group resolves, and whether its scale set exists
//! yet. Nothing is created: the registration token it mints expires unused. Then the
//! session each profile's listener holds, as the running daemon last recorded it
//! ([`session_lines`]).

use super::client::ScaleSetClient;
use crate::domain::runner_group::GroupIds;
use crate::domain::{DemandSource, ScalePolicy, Target};
use crate::github::{CheckLine, GitHubClient, load_credential};
use crate::store::SessionStatus;
use crate::timefmt::Millis;
use std::sync::Arc;

/// The name of the session lines.
pub const SESSION_CHECK: &str = "scale set session";

/// One line per `demand=scaleset` profile among `profiles`: its session as the daemon
/// last recorded it (`rows`). Held (even while a poll fails), opening or closed is ok;
/// another owner holding it (409) or failing to open it is not, the reason named. With no daemon running nothing is held,
/// which is said, not failed.
pub fn session_lines(
    profiles: &[&ScalePolicy],
    rows: &[SessionStatus],
    daemon_alive: bool,
    now: Millis,
) -> Vec<CheckLine> {
    profiles
        .iter()
        .filter(|p| p.demand == DemandSource::Scaleset)
        .map(|p| {
            let row = rows.iter().find(|r| r.profile == p.name);
            let (ok, said) = match row {
                _ if !daemon_alive => (true, "not held: the daemon is not running".to_string()),
                None => (
                    true,
                    "no listener on this host (a coordinator holds it, or the daemon has not \
                     started one yet)"
                        .to_string(),
                ),
                // A held session whose last poll failed still serves (the next
                // poll may well work): said, not failed.
                Some(r) => (
                    r.session.is_held() || !r.session.is_troubled(),
                    r.session.describe(now),
                ),
            };
            let detail = format!("profile {}: {said}", p.name);
            if ok {
                CheckLine::ok(SESSION_CHECK, detail)
            } else {
                CheckLine::failed(SESSION_CHECK, detail)
            }
        })
        .collect()
}

/// The scale set lines for `target` (none without a `demand=scaleset` profile of it),
/// on a client of its own. A credential that cannot be loaded gives none: the
/// credentials check already says so.
pub fn check_target(target: &Target, profiles: &[ScalePolicy]) -> Vec<CheckLine> {
    let used: Vec<&ScalePolicy> = profiles
        .iter()
        .filter(|p| p.target == target.name && p.demand == DemandSource::Scaleset)
        .collect();
    if used.is_empty() {
        return Vec::new();
    }
    match load_credential(&target.credential) {
        Ok(cred) => {
            let client = ScaleSetClient::new(Arc::new(GitHubClient::new(target, cred)));
            check_profiles(&client, &used)
        }
        Err(_) => Vec::new(),
    }
}

/// One line per scale set profile of the target, none when it has no such profile. The
/// first failure to reach the service is reported once, for every profile.
pub fn check_profiles(client: &ScaleSetClient, profiles: &[&ScalePolicy]) -> Vec<CheckLine> {
    let wanted: Vec<&&ScalePolicy> = profiles
        .iter()
        .filter(|p| p.demand == DemandSource::Scaleset)
        .collect();
    if wanted.is_empty() {
        return Vec::new();
    }
    if let Err(e) = client.admin() {
        let names: Vec<&str> = wanted.iter().map(|p| p.name.as_str()).collect();
        return vec![fail(
            "scale set",
            format!(
                "the Actions service cannot be reached for {}: {e}",
                names.join(", ")
            ),
        )];
    }
    wanted.iter().map(|p| profile_line(client, p)).collect()
}

fn pass(name: &'static str, detail: String) -> CheckLine {
    CheckLine::ok(name, detail)
}

fn fail(name: &'static str, detail: String) -> CheckLine {
    CheckLine::failed(name, detail)
}

fn profile_line(client: &ScaleSetClient, p: &ScalePolicy) -> CheckLine {
    // The one rule (`domain::runner_group`), through the scale set service.
    let found = GroupIds::default().resolve(p.runner_group_ref(), |name| {
        client.runner_group_by_name(name).map(|g| g.map(|g| g.id))
    });
    let group = match found {
        Ok(Some(id)) => id,
        Ok(None) => {
            let name = p.runner_group.as_deref().unwrap_or_default();
            return fail(
                "scale set",
                format!("profile {}: no runner group named {name:?}", p.name),
            );
        }
        Err(e) => return fail("scale set", format!("profile {}: {e}", p.name)),
    };
    match client.scale_set_by_name(group, &p.name) {
        Ok(Some(s)) => pass(
            "scale set",
            format!(
                "profile {}: scale set {:?} exists (id {}, runner group {group})",
                p.name, s.name, s.id
            ),
        ),
        Ok(None) => pass(
            "scale set",
            format!(
                "profile {}: service reachable; scale set {:?} not created yet (the daemon, or a pool's coordinator, creates it)",
                p.name, p.name
            ),
        ),
        Err(e) => fail("scale set", format!("profile {}: {e}", p.name)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{SessionPhase, SessionState};

    const NOW: Millis = 1_796_032_800_000;

    fn profile(name: &str, demand: DemandSource) -> ScalePolicy {
        let mut p = ScalePolicy::new(name, "t", "h");
        p.demand = demand;
        p
    }

    fn row(profile: &str, session: SessionState) -> SessionStatus {
        SessionStatus {
            profile: profile.into(),
            target: "t".into(),
            session,
            updated_at: NOW,
        }
    }

    #[test]
    fn a_session_line_per_scale_set_profile() {
        let ss = profile("ss", DemandSource::Scaleset);
        let other = profile("other", DemandSource::Scaleset);
        let rest = profile("rest", DemandSource::Poll);
        let held = SessionState {
            phase: SessionPhase::Held.into(),
            held_since: Some(NOW - 65_000),
            last_poll_at: Some(NOW - 2_000),
            ..SessionState::default()
        };
        let conflict = SessionState {
            phase: SessionPhase::Conflict.into(),
            reason: Some("another listener holds it (owner x@y)".into()),
            retry_at: Some(NOW + 9_000),
            ..SessionState::default()
        };
        let profiles = [&ss, &other, &rest];
        let rows = [row("ss", held), row("other", conflict)];
        let lines = session_lines(&profiles, &rows, true, NOW);
        let text: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        assert_eq!(lines.len(), 2, "{text:?}");
        assert!(lines[0].passed(), "{text:?}");
        assert_eq!(
            lines[0].detail,
            "profile ss: held for 1m05s, last message none, last poll 2s ago"
        );
        assert!(!lines[1].passed());
        assert_eq!(
            lines[1].detail,
            "profile other: conflict: another listener holds it (owner x@y); next try in 9s"
        );
        // Held with a failed poll: said, and still ok.
        let blip = SessionState {
            phase: SessionPhase::Held.into(),
            reason: Some("the Actions service answered 503".into()),
            retry_at: Some(NOW + 2_000),
            ..SessionState::default()
        };
        let lines = session_lines(&[&ss], &[row("ss", blip)], true, NOW);
        assert!(
            lines[0].passed() && lines[0].detail.contains("last poll failed"),
            "{}",
            lines[0]
        );
        // No daemon: nothing is held, and that is no failure.
        let lines = session_lines(&profiles, &rows, false, NOW);
        assert!(
            lines
                .iter()
                .all(|l| l.passed() && l.detail.contains("not running"))
        );
        // A daemon with no row for the profile (directed, or not started yet).
        let lines = session_lines(&[&ss], &[], true, NOW);
        assert!(
            lines[0].passed() && lines[0].detail.contains("no listener"),
            "{}",
            lines[0]
        );
    }
}
