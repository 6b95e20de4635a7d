//! GitHub's JSON, as serde structs private to `github/`; converted to domain types here,
//! at the edge. Only the fields the client reads are declared: GitHub adds fields
//! freely, and unknown ones are ignored.

use crate::domain::job_owner::{JobOwner, OwnerSource};
use crate::domain::{QueuedJob, RegisteredRunner};
use crate::timefmt::parse_rfc3339;
use serde::{Deserialize, Serialize};

#[derive(Debug, Deserialize)]
pub(crate) struct ErrorBody {
    pub message: Option<String>,
}

#[derive(Debug, Deserialize, Serialize)]
pub(crate) struct WorkflowRuns {
    pub workflow_runs: Vec<WorkflowRun>,
}

#[derive(Debug, Deserialize, Serialize)]
pub(crate) struct WorkflowRun {
    pub id: i64,
    /// When the run was created (a re-run attempt keeps it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    /// When it last changed (for a completed run, when it ended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
}

#[derive(Debug, Deserialize, Serialize)]
pub(crate) struct Jobs {
    pub jobs: Vec<Job>,
}

#[derive(Debug, Deserialize, Serialize)]
pub(crate) struct Job {
    pub id: i64,
    pub run_id: i64,
    pub status: String,
    pub name: String,
    #[serde(default)]
    pub labels: Vec<String>,
    pub created_at: String,
    /// Set once a runner took the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_attempt: Option<u32>,
    /// Once completed: `success`, `failure`, `cancelled`, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conclusion: Option<String>,
}

impl Job {
    /// The job as a lost job's re-run reads it.
    pub fn seen(&self) -> crate::domain::rerun::JobSeen {
        crate::domain::rerun::JobSeen {
            id: self.id,
            run_id: self.run_id,
            name: self.name.clone(),
            status: crate::domain::rerun::JobStatus::from_wire(&self.status),
            conclusion: self
                .conclusion
                .as_deref()
                .map(crate::domain::rerun::Conclusion::from_wire),
            runner_name: self.runner_name.clone(),
        }
    }

    /// Whose job this is, by the runner that took it; `None` before one did.
    pub fn owner(&self, repo: &str) -> Option<(String, JobOwner)> {
        let runner = self.runner_name.as_deref().filter(|n| !n.is_empty())?;
        Some((
            runner.to_string(),
            JobOwner {
                repo: repo.to_string(),
                workflow: self.workflow_name.clone(),
                job_name: self.name.clone(),
                run_id: self.run_id,
                run_attempt: self.run_attempt,
                job_id: Some(self.id),
                queued_at: parse_rfc3339(&self.created_at),
                source: OwnerSource::Rest,
            },
        ))
    }

    /// `None` when the timestamp cannot be read: the caller reports malformed JSON.
    pub fn into_domain(self, repo: &str) -> Option<QueuedJob> {
        Some(QueuedJob {
            id: self.id,
            run_id: self.run_id,
            repo: repo.to_string(),
            created_at: parse_rfc3339(&self.created_at)?,
            name: self.name,
            labels: self.labels,
        })
    }
}

#[derive(Debug, Deserialize, Serialize)]
pub(crate) struct Runners {
    pub runners: Vec<Runner>,
}

#[derive(Debug, Deserialize, Serialize)]
pub(crate) struct Runner {
    pub id: i64,
    pub name: String,
    pub status: String,
    pub busy: bool,
    #[serde(default)]
    pub labels: Vec<RunnerLabel>,
}

#[derive(Debug, Deserialize, Serialize)]
pub(crate) struct RunnerLabel {
    pub name: String,
}

impl Runner {
    pub fn into_domain(self) -> RegisteredRunner {
        RegisteredRunner {
            id: self.id,
            name: self.name,
            online: self.status == "online",
            busy: self.busy,
            labels: self.labels.into_iter().map(|l| l.name).collect(),
        }
    }
}

/// The request body of `generate-jitconfig`.
#[derive(Debug, Serialize)]
pub(crate) struct JitRequest<'a> {
    pub name: &'a str,
    pub runner_group_id: i64,
    pub labels: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub work_folder: Option<&'a str>,
}

#[derive(Deserialize)]
pub(crate) struct JitResponse {
    pub runner: Runner,
    pub encoded_jit_config: String,
}

#[derive(Deserialize)]
pub(crate) struct TokenResponse {
    pub token: String,
    pub expires_at: String,
}

#[derive(Debug, Deserialize, Serialize)]
pub(crate) struct Installation {
    pub id: u64,
}

#[derive(Debug, Deserialize, Serialize)]
pub(crate) struct Repository {
    pub name: String,
    pub owner: Owner,
    pub private: bool,
    pub visibility: Option<String>,
    #[serde(default)]
    pub archived: bool,
}

#[derive(Debug, Deserialize, Serialize)]
pub(crate) struct Owner {
    pub login: String,
}

#[derive(Debug, Deserialize, Serialize)]
pub(crate) struct InstallationRepositories {
    pub repositories: Vec<Repository>,
}

#[derive(Debug, Deserialize, Serialize)]
pub(crate) struct RunnerGroups {
    pub runner_groups: Vec<RunnerGroup>,
}

#[derive(Debug, Deserialize, Serialize)]
pub(crate) struct RunnerGroup {
    pub id: i64,
    pub name: String,
    #[serde(default)]
    pub allows_public_repositories: bool,
}

#[derive(Debug, Deserialize, Serialize)]
pub(crate) struct RateLimitBody {
    pub rate: RateBody,
}

#[derive(Debug, Deserialize, Serialize)]
pub(crate) struct RateBody {
    pub limit: u64,
    pub remaining: u64,
    pub reset: i64,
    pub used: u64,
}

/// One entry of `GET .../actions/runners/downloads`.
#[derive(Debug, Deserialize, Serialize)]
pub(crate) struct RunnerApplication {
    pub os: String,
    pub architecture: String,
    pub download_url: String,
    pub filename: String,
    #[serde(default)]
    pub sha256_checksum: Option<String>,
}
