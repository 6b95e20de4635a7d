//! `target check` and `doctor` for a target's `demand=scaleset` profiles: the Actions
//! service is reachable with the target's credentials (registration token → admin
//! connection), each profile's runner group resolves, and whether its scale set exists
//! yet. Nothing is created: the registration token it mints expires unused.

use super::client::ScaleSetClient;
use crate::domain::{DemandSource, ScalePolicy, Target};
use crate::github::{CheckLine, GitHubClient, load_credential};
use std::sync::Arc;

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
    CheckLine {
        name,
        ok: true,
        detail,
    }
}

fn fail(name: &'static str, detail: String) -> CheckLine {
    CheckLine {
        name,
        ok: false,
        detail,
    }
}

fn profile_line(client: &ScaleSetClient, p: &ScalePolicy) -> CheckLine {
    let group = match (p.runner_group_id(), p.runner_group.as_deref()) {
        (Some(id), _) => id as i64,
        (None, None) => 1,
        (None, Some(name)) => match client.runner_group_by_name(name) {
            Ok(Some(g)) => g.id,
            Ok(None) => {
                return fail(
                    "scale set",
                    format!("profile {}: no runner group named {name:?}", p.name),
                );
            }
            Err(e) => return fail("scale set", format!("profile {}: {e}", p.name)),
        },
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
