//! The simulated Actions service's state for the runner scale set API: registration
//! and admin tokens, scale sets, message sessions, each scale set's message queue, and
//! which jobs and runners belong to which scale set. The hooks `State` calls when a
//! job is queued, taken and completed turn those events into messages here.

use std::collections::{BTreeMap, HashMap};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

use super::state::{JobState, JobStatus, Scope, State};
use crate::timefmt::{Millis, format_rfc3339_fraction};

/// How the simulated service behaves; change it with `SimHandle::scaleset_config`.
#[derive(Debug, Clone)]
pub struct ScaleSetSimConfig {
    /// How long a long poll waits for a message before answering 202 (GitHub: ~50 s).
    pub hold_ms: u64,
    pub admin_token_ttl_secs: u64,
    pub queue_token_ttl_secs: u64,
    /// A session not polled for this long is abandoned: a new one may be created.
    pub session_ttl_ms: u64,
    /// Start every JSON body (and each message's inner body) with a UTF-8 BOM.
    pub bom: bool,
    /// Offer jobs as `JobAvailable` first and assign them only once acquired;
    /// otherwise a matching job is assigned (`JobAssigned`) when queued.
    pub offer_first: bool,
}

impl Default for ScaleSetSimConfig {
    fn default() -> Self {
        ScaleSetSimConfig {
            hold_ms: 2000,
            admin_token_ttl_secs: 3600,
            queue_token_ttl_secs: 3600,
            session_ttl_ms: 60_000,
            bom: false,
            offer_first: false,
        }
    }
}

#[derive(Debug, Clone)]
pub struct SimScaleSet {
    pub id: u64,
    pub name: String,
    pub scope: Scope,
    pub runner_group_id: u64,
    pub labels: Vec<String>,
    pub disable_update: bool,
    pub created_at: Millis,
    next_message_id: i64,
}

#[derive(Debug, Clone)]
pub struct SimSession {
    pub id: String,
    pub scale_set_id: u64,
    pub owner: String,
    pub queue_token: String,
    pub token_expires_at: Millis,
    /// When it was last polled (or a poll of it ended).
    pub last_seen: Millis,
    /// Long polls of it the service is holding now: a session being polled is live
    /// however long the hold.
    pub polls: u32,
}

impl SimSession {
    /// Whether the session is still alive: polled within `ttl_ms`, or in a poll now.
    pub fn live(&self, now: Millis, ttl_ms: u64) -> bool {
        self.polls > 0 || now - self.last_seen < ttl_ms as Millis
    }
}

#[derive(Debug, Clone)]
pub struct SimMessage {
    pub id: i64,
    pub scale_set_id: u64,
    /// The JSON array of job messages, as text (sent double-encoded).
    pub body: String,
    pub statistics: Value,
    pub acked: bool,
    /// The session it was last delivered to: the service delivers an unacknowledged
    /// message again to any other session, whatever `lastMessageId` that one sends.
    pub delivered_to: Option<String>,
}

/// A job's place in a scale set.
#[derive(Debug, Clone, Copy)]
pub struct JobLink {
    pub scale_set_id: u64,
    /// Offered but not yet acquired (only with `offer_first`).
    pub offered_only: bool,
}

#[derive(Debug, Default)]
pub struct ScaleSetWorld {
    pub config: ScaleSetSimConfig,
    pub scale_sets: BTreeMap<u64, SimScaleSet>,
    pub sessions: BTreeMap<String, SimSession>,
    pub messages: Vec<SimMessage>,
    /// Registration tokens minted by the REST endpoint: token -> (scope, expiry).
    pub registration_tokens: HashMap<String, (Scope, Millis)>,
    /// Admin tokens handed out by `runner-registration`: token -> (scope, expiry).
    pub admin_tokens: HashMap<String, (Scope, Millis)>,
    pub jobs: BTreeMap<u64, JobLink>,
    /// Runner id -> scale set id, for runners made by the scale set's JIT endpoint.
    pub runners: BTreeMap<u64, u64>,
    next_id: u64,
}

impl ScaleSetWorld {
    pub fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    pub fn add_scale_set(
        &mut self,
        name: &str,
        scope: Scope,
        runner_group_id: u64,
        labels: Vec<String>,
        disable_update: bool,
        now: Millis,
    ) -> u64 {
        let id = self.next_id();
        self.scale_sets.insert(
            id,
            SimScaleSet {
                id,
                name: name.to_string(),
                scope,
                runner_group_id,
                labels,
                disable_update,
                created_at: now,
                next_message_id: 0,
            },
        );
        id
    }

    /// Removes a scale set with its sessions, queue and job links.
    pub fn remove_scale_set(&mut self, id: u64) -> bool {
        self.sessions.retain(|_, s| s.scale_set_id != id);
        self.messages.retain(|m| m.scale_set_id != id);
        self.jobs.retain(|_, l| l.scale_set_id != id);
        self.scale_sets.remove(&id).is_some()
    }

    /// The live session of a scale set (polled within `session_ttl_ms`, or in a poll).
    pub fn live_session(&self, scale_set_id: u64, now: Millis) -> Option<&SimSession> {
        let ttl = self.config.session_ttl_ms;
        self.sessions
            .values()
            .find(|s| s.scale_set_id == scale_set_id && s.live(now, ttl))
    }

    /// Ends every session not polled for `session_ttl_ms`: the service expires an
    /// abandoned session, and from then on its queue, refresh and delete answer 404.
    pub fn expire_sessions(&mut self, now: Millis) {
        let ttl = self.config.session_ttl_ms;
        self.sessions.retain(|_, s| s.live(now, ttl));
    }

    /// The message a poll of session `sid` gets: the oldest unacknowledged one after
    /// `last`, or one delivered to another session and never acknowledged (the service
    /// redelivers those to a new session, so a client must ack what it handled).
    pub fn next_message(&self, scale_set_id: u64, last: i64, sid: &str) -> Option<&SimMessage> {
        self.messages.iter().find(|m| {
            m.scale_set_id == scale_set_id
                && !m.acked
                && (m.id > last || m.delivered_to.as_deref().is_some_and(|d| d != sid))
        })
    }
}

/// A JWT-shaped token (unsigned: the client only decodes `exp`).
pub fn jwt_token(exp_ms: Millis, nonce: &str) -> String {
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"JWT"}"#);
    let payload = URL_SAFE_NO_PAD.encode(json!({"exp": exp_ms / 1000, "sid": nonce}).to_string());
    format!("{header}.{payload}.sim")
}

fn scope_has_repo(scope: &Scope, repo: &str) -> bool {
    match scope {
        Scope::Repo(full) => full == repo,
        Scope::Org(org) => repo.split_once('/').is_some_and(|(o, _)| o == org),
    }
}

fn labels_fit(job: &[String], set: &[String]) -> bool {
    !job.is_empty()
        && job
            .iter()
            .all(|l| set.iter().any(|s| s.eq_ignore_ascii_case(l)))
}

/// The fields every job message carries.
fn job_fields(job: &JobState, kind: &str) -> Value {
    let (owner, repo) = job.repo.split_once('/').unwrap_or(("", &job.repo));
    json!({
        "messageType": kind,
        "runnerRequestId": job.id,
        "repositoryName": repo,
        "ownerName": owner,
        "jobId": job.id.to_string(),
        "jobDisplayName": job.name,
        "workflowRunId": job.run_id,
        "requestLabels": job.labels,
        "queueTime": format_rfc3339_fraction(job.created_at),
    })
}

impl State {
    /// The scale set's statistics as the service computes them now.
    pub fn scaleset_statistics(&self, scale_set_id: u64) -> Value {
        let w = &self.scalesets;
        let mut available = 0;
        let mut acquired = 0;
        let mut assigned = 0;
        let mut running = 0;
        for (job_id, link) in w
            .jobs
            .iter()
            .filter(|(_, l)| l.scale_set_id == scale_set_id)
        {
            let Some(job) = self.jobs.get(job_id) else {
                continue;
            };
            match (link.offered_only, job.status) {
                (_, JobStatus::Completed | JobStatus::Waiting) => {}
                (true, JobStatus::Queued) => available += 1,
                (_, JobStatus::InProgress) => {
                    assigned += 1;
                    running += 1;
                }
                (false, JobStatus::Queued) => {
                    acquired += 1;
                    assigned += 1;
                }
            }
        }
        let runners: Vec<_> = w
            .runners
            .iter()
            .filter(|(_, s)| **s == scale_set_id)
            .filter_map(|(id, _)| self.runners.get(id))
            .collect();
        let busy = runners.iter().filter(|r| r.busy).count();
        json!({
            "totalAvailableJobs": available,
            "totalAcquiredJobs": acquired,
            "totalAssignedJobs": assigned,
            "totalRunningJobs": running,
            "totalRegisteredRunners": runners.len(),
            "totalBusyRunners": busy,
            "totalIdleRunners": runners.len() - busy,
        })
    }

    /// Appends a message of job messages to a scale set's queue.
    pub fn scaleset_push(&mut self, scale_set_id: u64, items: Vec<Value>) {
        let statistics = self.scaleset_statistics(scale_set_id);
        let Some(set) = self.scalesets.scale_sets.get_mut(&scale_set_id) else {
            return;
        };
        set.next_message_id += 1;
        let id = set.next_message_id;
        let mut body = Value::Array(items).to_string();
        if self.scalesets.config.bom {
            body.insert(0, '\u{feff}');
        }
        self.scalesets.messages.push(SimMessage {
            id,
            scale_set_id,
            body,
            statistics,
            acked: false,
            delivered_to: None,
        });
    }

    /// Hook: jobs were queued. Each that fits a scale set (same scope, its labels a
    /// subset of the scale set's) joins the first such scale set, offered or assigned.
    pub fn scaleset_jobs_queued(&mut self, job_ids: &[u64]) {
        for id in job_ids {
            let Some(job) = self.jobs.get(id).cloned() else {
                continue;
            };
            let Some(set) = self
                .scalesets
                .scale_sets
                .values()
                .find(|s| scope_has_repo(&s.scope, &job.repo) && labels_fit(&job.labels, &s.labels))
                .map(|s| s.id)
            else {
                continue;
            };
            let offer = self.scalesets.config.offer_first;
            self.scalesets.jobs.insert(
                *id,
                JobLink {
                    scale_set_id: set,
                    offered_only: offer,
                },
            );
            let mut item = job_fields(&job, if offer { "JobAvailable" } else { "JobAssigned" });
            if offer {
                item["acquireJobUrl"] = json!(format!(
                    "{}/_services/pipelines/_apis/runtime/runnerscalesets/{set}/acquirejobs",
                    self.base_url
                ));
            }
            self.scaleset_push(set, vec![item]);
        }
    }

    /// Hook: a scale set was created. The service matches jobs still waiting for a
    /// runner to it as it does to a runner that registers later: each queued job that
    /// no scale set holds yet, and that fits this one, is offered to it now, so a job
    /// queued before its scale set existed (a listener that restarted in between) is
    /// not left waiting for ever.
    pub fn scaleset_created(&mut self, scale_set_id: u64) {
        let Some(set) = self.scalesets.scale_sets.get(&scale_set_id) else {
            return;
        };
        let (scope, labels) = (set.scope.clone(), set.labels.clone());
        let mut waiting: Vec<u64> = self
            .jobs
            .values()
            .filter(|j| j.status == JobStatus::Queued && !self.scalesets.jobs.contains_key(&j.id))
            .filter(|j| scope_has_repo(&scope, &j.repo) && labels_fit(&j.labels, &labels))
            .map(|j| j.id)
            .collect();
        waiting.sort_unstable();
        self.scaleset_jobs_queued(&waiting);
    }

    /// Acquires offered jobs of a scale set; returns the ids granted.
    pub fn scaleset_acquire(&mut self, scale_set_id: u64, ids: &[u64]) -> Vec<u64> {
        let mut granted = Vec::new();
        for id in ids {
            let queued = self
                .jobs
                .get(id)
                .is_some_and(|j| j.status == JobStatus::Queued);
            if let Some(link) = self.scalesets.jobs.get_mut(id)
                && link.scale_set_id == scale_set_id
                && link.offered_only
                && queued
            {
                link.offered_only = false;
                granted.push(*id);
            }
        }
        for id in &granted {
            let job = self.jobs[id].clone();
            self.scaleset_push(scale_set_id, vec![job_fields(&job, "JobAssigned")]);
        }
        granted
    }

    /// GitHub requeues an assignment no runner took in time: `JobCompleted` with
    /// result `canceled`, then the same job offered (or assigned) again, each its own
    /// message. Only a job still queued in a scale set can be; returns whether it was.
    pub fn scaleset_reassign(&mut self, job_id: u64) -> bool {
        let Some(link) = self.scalesets.jobs.get(&job_id).copied() else {
            return false;
        };
        let Some(job) = self
            .jobs
            .get(&job_id)
            .filter(|j| j.status == JobStatus::Queued)
            .cloned()
        else {
            return false;
        };
        let set = link.scale_set_id;
        let mut canceled = job_fields(&job, "JobCompleted");
        canceled["result"] = json!("canceled");
        self.scaleset_push(set, vec![canceled]);
        let offer = self.scalesets.config.offer_first;
        if let Some(l) = self.scalesets.jobs.get_mut(&job_id) {
            l.offered_only = offer;
        }
        let mut again = job_fields(&job, if offer { "JobAvailable" } else { "JobAssigned" });
        if offer {
            again["acquireJobUrl"] = json!(format!(
                "{}/_services/pipelines/_apis/runtime/runnerscalesets/{set}/acquirejobs",
                self.base_url
            ));
        }
        self.scaleset_push(set, vec![again]);
        true
    }

    /// Hook: a runner took a job. A scale set's job gets `JobStarted`.
    pub fn scaleset_job_started(&mut self, job_id: u64) {
        let Some(link) = self.scalesets.jobs.get_mut(&job_id) else {
            return;
        };
        link.offered_only = false;
        let set = link.scale_set_id;
        let Some(job) = self.jobs.get(&job_id).cloned() else {
            return;
        };
        let mut item = job_fields(&job, "JobStarted");
        item["runnerId"] = json!(job.runner_id.unwrap_or_default());
        item["runnerName"] = json!(job.runner_name.clone().unwrap_or_default());
        self.scaleset_push(set, vec![item]);
    }

    /// Hook: a job finished with the runner's result (`Succeeded`...).
    pub fn scaleset_job_completed(&mut self, job_id: u64, result: &str) {
        let Some(set) = self.scalesets.jobs.get(&job_id).map(|l| l.scale_set_id) else {
            return;
        };
        let Some(job) = self.jobs.get(&job_id).cloned() else {
            return;
        };
        let mut item = job_fields(&job, "JobCompleted");
        item["result"] = json!(result.to_ascii_lowercase());
        item["runnerId"] = json!(job.runner_id.unwrap_or_default());
        item["runnerName"] = json!(job.runner_name.clone().unwrap_or_default());
        self.scaleset_push(set, vec![item]);
    }
}
