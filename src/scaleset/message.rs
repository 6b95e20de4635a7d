//! The scale set's messages as typed values: statistics, job messages (available,
//! assigned, started, completed), the decoding of the double-encoded body, the UTF-8
//! BOM, and demand as a pure function of statistics.

use super::error::ScaleSetError;
use super::types;
use crate::domain::job_owner::{JobOwner, OwnerSource, workflow_of_ref};
use crate::timefmt::{Millis, parse_rfc3339};
use serde::de::DeserializeOwned;

/// The message type of a batch of job messages.
pub const JOB_MESSAGES: &str = "RunnerScaleSetJobMessages";

/// The scale set's counters as the service reports them with every message.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Statistics {
    pub total_available_jobs: u32,
    pub total_acquired_jobs: u32,
    /// Jobs assigned to the scale set and not finished: what runners are needed for.
    pub total_assigned_jobs: u32,
    pub total_running_jobs: u32,
    pub total_registered_runners: u32,
    pub total_busy_runners: u32,
    pub total_idle_runners: u32,
}

#[cfg(test)]
impl Statistics {
    /// Only the two counters demand is read from, for tests.
    pub(crate) fn assigned_running(assigned: u32, running: u32) -> Statistics {
        Statistics {
            total_assigned_jobs: assigned,
            total_running_jobs: running,
            ..Statistics::default()
        }
    }
}

impl From<types::Statistics> for Statistics {
    fn from(s: types::Statistics) -> Statistics {
        Statistics {
            total_available_jobs: s.total_available_jobs,
            total_acquired_jobs: s.total_acquired_jobs,
            total_assigned_jobs: s.total_assigned_jobs,
            total_running_jobs: s.total_running_jobs,
            total_registered_runners: s.total_registered_runners,
            total_busy_runners: s.total_busy_runners,
            total_idle_runners: s.total_idle_runners,
        }
    }
}

/// Runners the scale set should have: `min(max, min_capacity + totalAssignedJobs)`.
/// Pure; the caller subtracts what it already runs.
pub fn desired_runners(min_capacity: u32, max_capacity: u32, stats: &Statistics) -> u32 {
    min_capacity
        .saturating_add(stats.total_assigned_jobs)
        .min(max_capacity)
}

/// What every job message says about its job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobInfo {
    /// The service's id for the job's runner request (what `acquirejobs` takes).
    pub runner_request_id: i64,
    pub repository: String,
    pub owner: String,
    /// The service's job id (a string, not the REST job id).
    pub job_id: String,
    pub display_name: String,
    pub workflow_run_id: i64,
    pub labels: Vec<String>,
    pub queued_at: Option<Millis>,
    /// The workflow's file (from `jobWorkflowRef`); the messages do not carry its name.
    pub workflow_file: Option<String>,
}

impl JobInfo {
    /// Whose job this is, as far as a scale set says (no workflow name, no run
    /// attempt, and its job id is not REST's).
    pub fn owner(&self) -> JobOwner {
        let repo = match (self.owner.as_str(), self.repository.as_str()) {
            ("", r) => r.to_string(),
            (o, r) => format!("{o}/{r}"),
        };
        JobOwner {
            repo,
            workflow: self.workflow_file.clone(),
            job_name: self.display_name.clone(),
            run_id: self.workflow_run_id,
            run_attempt: None,
            job_id: None,
            queued_at: self.queued_at,
            source: OwnerSource::ScaleSet,
        }
    }
}

/// One element of a message's body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobMessage {
    /// Offered to the scale set; acquire it to have it assigned.
    Available {
        job: JobInfo,
        acquire_job_url: String,
    },
    /// Assigned to the scale set: a runner is needed.
    Assigned { job: JobInfo },
    /// A runner of the scale set took it.
    Started {
        job: JobInfo,
        runner_id: i64,
        runner_name: String,
    },
    /// It finished (`result`: succeeded, failed, canceled...).
    Completed {
        job: JobInfo,
        result: String,
        runner_id: i64,
        runner_name: String,
    },
    /// A message type this client does not know; kept so it is seen, not lost.
    Unknown { message_type: String },
}

impl JobMessage {
    pub fn job(&self) -> Option<&JobInfo> {
        match self {
            JobMessage::Available { job, .. }
            | JobMessage::Assigned { job }
            | JobMessage::Started { job, .. }
            | JobMessage::Completed { job, .. } => Some(job),
            JobMessage::Unknown { .. } => None,
        }
    }
}

/// One message taken from the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScaleSetMessage {
    pub id: i64,
    pub message_type: String,
    pub statistics: Option<Statistics>,
    pub jobs: Vec<JobMessage>,
}

/// The body without a leading UTF-8 byte order mark (the service sometimes sends one).
pub fn strip_bom(body: &[u8]) -> &[u8] {
    body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(body)
}

/// Parses a response body, BOM or not. Errors name the position, never the content.
pub(crate) fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, ScaleSetError> {
    serde_json::from_slice(strip_bom(body)).map_err(|e| ScaleSetError::Malformed {
        detail: crate::github::client::json_error_detail(&e),
    })
}

fn job_message(m: types::JobMessage) -> JobMessage {
    let job = JobInfo {
        runner_request_id: m.runner_request_id,
        repository: m.repository_name,
        owner: m.owner_name,
        job_id: m.job_id,
        display_name: m.job_display_name,
        workflow_run_id: m.workflow_run_id,
        labels: m.request_labels,
        queued_at: m.queue_time.as_deref().and_then(parse_rfc3339),
        workflow_file: m.job_workflow_ref.as_deref().and_then(workflow_of_ref),
    };
    match m.message_type.as_str() {
        "JobAvailable" => JobMessage::Available {
            job,
            acquire_job_url: m.acquire_job_url.unwrap_or_default(),
        },
        "JobAssigned" => JobMessage::Assigned { job },
        "JobStarted" => JobMessage::Started {
            job,
            runner_id: m.runner_id.unwrap_or_default(),
            runner_name: m.runner_name.unwrap_or_default(),
        },
        "JobCompleted" => JobMessage::Completed {
            job,
            result: m.result.unwrap_or_default(),
            runner_id: m.runner_id.unwrap_or_default(),
            runner_name: m.runner_name.unwrap_or_default(),
        },
        other => JobMessage::Unknown {
            message_type: other.to_string(),
        },
    }
}

/// Parses a 200 from the message queue: the envelope, then its `body`, a JSON array
/// encoded as a string (which may itself start with a BOM).
pub fn parse_message(body: &[u8]) -> Result<ScaleSetMessage, ScaleSetError> {
    let m: types::Message = parse_json(body)?;
    let jobs = if m.message_type == JOB_MESSAGES && !m.body.trim().is_empty() {
        let inner: Vec<types::JobMessage> = parse_json(m.body.as_bytes())?;
        inner.into_iter().map(job_message).collect()
    } else {
        Vec::new()
    };
    Ok(ScaleSetMessage {
        id: m.message_id,
        message_type: m.message_type,
        statistics: m.statistics.map(Statistics::from),
        jobs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(assigned: u32) -> Statistics {
        Statistics {
            total_assigned_jobs: assigned,
            ..Statistics::default()
        }
    }

    #[test]
    fn desired_is_min_plus_assigned_capped() {
        assert_eq!(desired_runners(0, 5, &stats(0)), 0);
        assert_eq!(desired_runners(1, 5, &stats(2)), 3);
        assert_eq!(desired_runners(1, 5, &stats(9)), 5);
        assert_eq!(desired_runners(3, 2, &stats(0)), 2);
        assert_eq!(desired_runners(u32::MAX, u32::MAX, &stats(5)), u32::MAX);
    }

    #[test]
    fn double_encoded_body_with_boms() {
        let inner = r#"[{"messageType":"JobAssigned","runnerRequestId":7,"repositoryName":"r","ownerName":"o","jobId":"abc","jobDisplayName":"build","workflowRunId":9,"requestLabels":["x"],"queueTime":"2026-11-30T10:00:00.1234567Z"},
            {"messageType":"JobCompleted","runnerRequestId":8,"jobId":12,"result":"succeeded","runnerId":3,"runnerName":"rm-a-1"},
            {"messageType":"Mystery"}]"#;
        let inner = format!("\u{feff}{inner}");
        let outer = serde_json::json!({
            "messageId": 4, "messageType": JOB_MESSAGES, "body": inner,
            "statistics": {"totalAssignedJobs": 2, "totalRunningJobs": 1}
        });
        let mut bytes = b"\xEF\xBB\xBF".to_vec();
        bytes.extend(outer.to_string().into_bytes());
        let m = parse_message(&bytes).unwrap();
        assert_eq!(m.id, 4);
        assert_eq!(m.statistics.unwrap().total_assigned_jobs, 2);
        assert_eq!(m.jobs.len(), 3);
        let JobMessage::Assigned { job } = &m.jobs[0] else {
            panic!("{:?}", m.jobs[0])
        };
        assert_eq!(job.runner_request_id, 7);
        assert_eq!(job.labels, vec!["x".to_string()]);
        assert_eq!(
            job.queued_at,
            parse_rfc3339("2026-11-30T10:00:00Z").map(|t| t + 123)
        );
        assert!(
            matches!(&m.jobs[1], JobMessage::Completed { result, runner_id: 3, job, .. }
            if result == "succeeded" && job.job_id == "12")
        );
        assert_eq!(
            m.jobs[2],
            JobMessage::Unknown {
                message_type: "Mystery".into()
            }
        );
    }

    #[test]
    fn malformed_bodies_are_errors_without_content() {
        let e = parse_message(
            br#"{"messageId":1,"messageType":"RunnerScaleSetJobMessages","body":"[{secret"}"#,
        )
        .unwrap_err();
        assert!(matches!(e, ScaleSetError::Malformed { .. }));
        assert!(!e.to_string().contains("secret"));
        assert!(parse_message(b"").is_err());
    }
}
