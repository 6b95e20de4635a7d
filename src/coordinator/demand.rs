//! Where the coordinator reads demand: a small trait per covered target, so that the
//! runner scale set source can plug in beside REST polling, and the REST source on
//! `github::GitHubClient::queued_jobs`.

use super::placement::{CoordTarget, Taken};
use crate::domain::job_owner::JobOwner;
use crate::domain::{QueuedJob, Target, TargetScope};
use crate::github::ops::ReadCaps;
use crate::github::visibility::OrgRepos;
use crate::github::{GitHubClient, load_credential};
use crossbeam_channel::Receiver;
use std::time::Duration;

/// One target's queue, read once for the whole pool.
pub trait DemandSource: Send {
    fn target(&self) -> &CoordTarget;
    /// How long to wait between reads.
    fn interval(&self) -> Duration;
    /// The jobs queued now (a full snapshot: a job absent here has left the queue).
    /// An error keeps the previous snapshot; its message names what failed.
    fn queued(&mut self) -> Result<Vec<QueuedJob>, String>;
    /// The runners seen taking jobs since the last call, where the source names them
    /// (the scale set's messages do; REST polling does not).
    fn taken(&mut self) -> Vec<Taken> {
        Vec::new()
    }
    /// Whose job each runner took, by runner name, as the reads since the last call
    /// saw it (REST: the jobs lists it read anyway; no call is spent for it).
    fn owners(&mut self) -> Vec<(String, JobOwner)> {
        Vec::new()
    }
    /// The points a minute per REST endpoint the target's hosts spend on its starts'
    /// JIT configs (its `secondary_limit`; `None`: no such limit, or its starts' JIT
    /// configs are not REST requests). GitHub's own by default.
    fn jit_points_limit(&self) -> Option<u32> {
        Some(crate::domain::target::DEFAULT_SECONDARY_LIMIT)
    }
    /// Until when GitHub asked the source's credential to send nothing (a
    /// `retry-after` or a spent hourly budget its reads met; 0: not held): the pool's
    /// starts wait for it too.
    fn held_until(&self) -> crate::timefmt::Millis {
        0
    }
}

pub fn coord_target(t: &Target) -> CoordTarget {
    CoordTarget {
        name: t.name.clone(),
        scope: t.scope.display(),
        api_url: t.api_url.clone(),
    }
}

/// REST polling: the queued jobs of the target's repository, or of each repository of
/// an organization target (its `repos`, else every repository the credentials see).
pub struct RestDemand {
    target: CoordTarget,
    /// The target as configured: its scope and named repositories.
    target_def: Target,
    repos: OrgRepos,
    client: GitHubClient,
    interval: Duration,
    /// The owners the last read's jobs lists named, until `owners` takes them.
    owners: Vec<(String, JobOwner)>,
}

impl RestDemand {
    pub fn new(t: &Target, shutdown: Receiver<()>) -> Result<RestDemand, String> {
        let cred = load_credential(&t.credential).map_err(|e| format!("target {}: {e}", t.name))?;
        let client = GitHubClient::new(t, cred).with_shutdown(shutdown);
        // Its reads stay below the target's points a minute, as a daemon's do.
        client.points().set_limit(t.secondary_limit);
        Ok(RestDemand {
            target: coord_target(t),
            target_def: t.clone(),
            repos: OrgRepos::new(),
            client,
            interval: Duration::from_secs(t.poll_interval_secs.max(1)),
            owners: Vec::new(),
        })
    }
}

impl DemandSource for RestDemand {
    fn target(&self) -> &CoordTarget {
        &self.target
    }

    fn interval(&self) -> Duration {
        self.interval
    }

    fn queued(&mut self) -> Result<Vec<QueuedJob>, String> {
        let now = crate::timefmt::now_millis();
        let repos = self
            .repos
            .repos(&self.client, &self.target_def, now)
            .map_err(|e| format!("listing repositories of {}: {e}", self.target_def.name))?;
        // A coordinated pool serves no public repository of an organization target
        // (hosts accept launches without seeing the repository): a repository target's
        // visibility is the hosts' own guard, as standalone.
        let public = |full: &str| match self.target_def.scope {
            TargetScope::Repo { .. } => Some(false),
            TargetScope::Org { .. } => self.repos.public(full),
        };
        let mut out = Vec::new();
        let mut owners = Vec::new();
        for (owner, repo) in repos {
            if public(&format!("{owner}/{repo}")) != Some(false) {
                continue;
            }
            // The whole queue or an error (this source keeps no earlier view), and the
            // owners its jobs lists named on the way.
            let read = self
                .client
                .read_queue(&[(&owner, &repo)], ReadCaps::ALL, &|_, _| {})
                .map_err(|e| format!("queued jobs of {owner}/{repo}: {e}"))?;
            if let Some(e) = read.failure {
                return Err(format!("queued jobs of {owner}/{repo}: {e}"));
            }
            out.extend(read.jobs);
            owners.extend(read.owners);
        }
        self.owners = owners;
        Ok(out)
    }

    fn owners(&mut self) -> Vec<(String, JobOwner)> {
        std::mem::take(&mut self.owners)
    }

    fn jit_points_limit(&self) -> Option<u32> {
        self.target_def.secondary_limit
    }

    fn held_until(&self) -> crate::timefmt::Millis {
        self.client.rate_limit_snapshot().limited_until.unwrap_or(0)
    }
}
