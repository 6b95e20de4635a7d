//! The public-repository guard's facts for one target, read at most hourly: whether a
//! repository target is public, and whether each scale set profile's runner group
//! (organization targets) admits public repositories' jobs. What they mean for each
//! profile is `reconcile::plan::unfit`'s to decide.

use crate::domain::RunnerGroup;
use crate::domain::{DemandSource, ScalePolicy, Target, TargetScope};
use crate::github::visibility::VISIBILITY_EVERY;
use crate::github::{GhError, GitHubClient};
use crate::timefmt::Millis;
use std::collections::BTreeMap;

#[derive(Debug, Default)]
pub struct PublicGuard {
    /// A repository target's visibility; `None` until read.
    pub public_repo: Option<bool>,
    next_visibility: Millis,
    /// Per scale set profile: its runner group admits public repositories.
    pub group_public: BTreeMap<String, bool>,
    next_group_check: Millis,
}

impl PublicGuard {
    /// Reads what is due. An error is returned for the target's hold; what was known
    /// stays known.
    pub fn refresh(
        &mut self,
        client: &GitHubClient,
        target: &Target,
        profiles: &[ScalePolicy],
        now: Millis,
    ) -> Result<(), GhError> {
        match &target.scope {
            TargetScope::Repo { owner, repo } => {
                if now >= self.next_visibility {
                    self.public_repo = Some(client.repository_is_public(owner, repo)?);
                    self.next_visibility = now + VISIBILITY_EVERY;
                }
            }
            TargetScope::Org { org } => {
                if now >= self.next_group_check {
                    self.check_groups(client, org, profiles)?;
                    self.next_group_check = now + VISIBILITY_EVERY;
                }
            }
        }
        Ok(())
    }

    /// A scale set takes every job its runner group lets through, so the group's
    /// setting is the guard for a scale set profile of an organization.
    fn check_groups(
        &mut self,
        client: &GitHubClient,
        org: &str,
        profiles: &[ScalePolicy],
    ) -> Result<(), GhError> {
        for p in profiles
            .iter()
            .filter(|p| p.demand == DemandSource::Scaleset)
        {
            let id = match p.runner_group_ref() {
                RunnerGroup::Name(g) => client.runner_group_id_by_name(org, g)?,
                known => known.known_id(),
            };
            match id.map(|id| client.runner_group_allows_public(org, id)) {
                Some(Ok(Some(public))) => {
                    self.group_public.insert(p.name.clone(), public);
                }
                Some(Err(e)) => return Err(e),
                Some(Ok(None)) | None => {
                    self.group_public.remove(&p.name);
                }
            }
        }
        Ok(())
    }
}
