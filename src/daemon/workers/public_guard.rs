//! The public-repository guard's reads for one target, on a worker: whether a
//! repository target is public, and whether each scale set profile's runner group
//! (organization targets) admits public repositories' jobs. When they are due, and
//! what they mean for each profile, is the pure pass's (`reconcile::pass`,
//! `reconcile::plan::unfit`).

use crate::domain::runner_group::GroupIds;
use crate::domain::{DemandSource, ScalePolicy, Target, TargetScope};
use crate::github::{GhError, GitHubClient};
use crate::reconcile::pass::{GuardFound, GuardRead};
use std::collections::BTreeMap;

/// The guard's read for a target's scope: `None` when it has nothing to read (an
/// organization with no scale set profile).
pub fn due_read(target: &Target, profiles: &[ScalePolicy]) -> Option<GuardRead> {
    match target.scope {
        TargetScope::Repo { .. } => Some(GuardRead::Visibility),
        TargetScope::Org { .. } => profiles
            .iter()
            .any(|p| p.demand == DemandSource::Scaleset)
            .then_some(GuardRead::Groups),
    }
}

/// Reads the guard's facts.
pub fn read(
    client: &GitHubClient,
    target: &Target,
    profiles: &[ScalePolicy],
    what: GuardRead,
    groups: &GroupIds,
) -> Result<GuardFound, GhError> {
    match (&target.scope, what) {
        (TargetScope::Repo { owner, repo }, _) => Ok(GuardFound::Visibility(
            client.repository_is_public(owner, repo)?,
        )),
        (TargetScope::Org { org }, _) => Ok(GuardFound::Groups(group_facts(
            client, org, profiles, groups,
        )?)),
    }
}

/// A scale set takes every job its runner group lets through, so the group's setting
/// is the guard for a scale set profile of an organization.
fn group_facts(
    client: &GitHubClient,
    org: &str,
    profiles: &[ScalePolicy],
    groups: &GroupIds,
) -> Result<BTreeMap<String, Option<bool>>, GhError> {
    let mut out = BTreeMap::new();
    for p in profiles
        .iter()
        .filter(|p| p.demand == DemandSource::Scaleset)
    {
        let id = groups.resolve(p.runner_group_ref(), |name| {
            client.runner_group_id_by_name(org, name)
        })?;
        let public = match id {
            Some(id) => client.runner_group_allows_public(org, id)?,
            None => None,
        };
        out.insert(p.name.clone(), public);
    }
    Ok(out)
}
