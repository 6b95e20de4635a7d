//! The repositories an organization target polls, and whether each is public: what the
//! public-repository guard needs for a target that is not one repository. A listed
//! organization's repositories come with their visibility; a target's named
//! repositories are each looked up, at most once an hour.

use super::client::GitHubClient;
use super::error::GhError;
use crate::domain::{Target, TargetScope};
use crate::timefmt::Millis;
use std::collections::HashMap;

/// How long a repository's visibility is trusted before it is read again.
pub const VISIBILITY_EVERY: Millis = 3_600_000;

/// An organization target's repositories with their visibility, by `owner/name`.
#[derive(Debug, Default)]
pub struct OrgRepos {
    public: HashMap<String, (bool, Millis)>,
}

impl OrgRepos {
    pub fn new() -> OrgRepos {
        OrgRepos::default()
    }

    /// The repositories of `target` to poll (its own for a repository target; the
    /// named ones, or every unarchived one of the organization), noting each one's
    /// visibility. A named repository whose visibility cannot be read now keeps what
    /// was known (or stays unknown, which the guard treats as public).
    pub fn repos(
        &mut self,
        client: &GitHubClient,
        target: &Target,
        now: Millis,
    ) -> Result<Vec<(String, String)>, GhError> {
        let org = match &target.scope {
            TargetScope::Repo { owner, repo } => return Ok(vec![(owner.clone(), repo.clone())]),
            TargetScope::Org { org } => org,
        };
        if target.repos.is_empty() {
            let listed = client.org_repositories(org)?;
            return Ok(listed
                .into_iter()
                .filter(|r| !r.archived)
                .map(|r| {
                    self.public
                        .insert(format!("{}/{}", r.owner, r.name), (r.public, now));
                    (r.owner, r.name)
                })
                .collect());
        }
        for r in &target.repos {
            let full = format!("{org}/{r}");
            let stale = self
                .public
                .get(&full)
                .is_none_or(|(_, at)| now - at >= VISIBILITY_EVERY);
            if stale && let Ok(public) = client.repository_is_public(org, r) {
                self.public.insert(full, (public, now));
            }
        }
        Ok(target
            .repos
            .iter()
            .map(|r| (org.clone(), r.clone()))
            .collect())
    }

    /// Whether `owner/name` is public: `None` when not known (yet).
    pub fn public(&self, full_name: &str) -> Option<bool> {
        self.public.get(full_name).map(|(p, _)| *p)
    }
}
