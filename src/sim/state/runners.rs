//! The runners in the world: registrations made and removed, and the runner process's own calls (connect, take a job, complete it).

use super::{JobState, JobStatus, MAX_JOB_OUTPUT, RunnerState, Scope, State};
use crate::timefmt::Millis;

/// Why a runner-side call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunnerCallError {
    /// The registration is gone (deleted, or never existed).
    Gone,
    /// The credential does not belong to this runner.
    Unauthorized,
}

impl State {
    pub fn runner_by_name(&self, scope: &Scope, name: &str) -> Option<&RunnerState> {
        self.runners
            .values()
            .find(|r| &r.scope == scope && r.name.eq_ignore_ascii_case(name))
    }

    pub fn create_runner(
        &mut self,
        scope: Scope,
        name: &str,
        group_id: u64,
        labels: Vec<String>,
        now: Millis,
    ) -> u64 {
        let id = self.next_id();
        let credential = format!("simrunner_{}", self.rng.hex(16));
        let faults =
            crate::sim::faults::pick_runner_faults(&mut self.runner_faults, &mut self.rng, name);
        self.runners.insert(
            id,
            RunnerState {
                id,
                name: name.to_string(),
                scope,
                group_id,
                labels,
                online: false,
                busy: false,
                ephemeral: true,
                version: None,
                job_id: None,
                faults,
                created_at: now,
                credential,
            },
        );
        self.last_created_runner = Some(id);
        id
    }

    /// Removes a registration; a job it was running goes back to... nowhere: GitHub
    /// fails such a job, and so does the sim.
    pub fn remove_runner(&mut self, id: u64, now: Millis) -> Option<RunnerState> {
        let r = self.runners.remove(&id)?;
        if let Some(job) = r.job_id.and_then(|j| self.jobs.get_mut(&j))
            && job.status != JobStatus::Completed
        {
            job.status = JobStatus::Completed;
            job.conclusion = Some("failure".into());
            job.completed_at = Some(now);
            let id = job.id;
            self.hook_jobs(&[id], "completed");
        }
        Some(r)
    }

    pub(in crate::sim) fn runner_checked(
        &mut self,
        id: u64,
        credential: &str,
    ) -> Result<&mut RunnerState, RunnerCallError> {
        let r = self.runners.get_mut(&id).ok_or(RunnerCallError::Gone)?;
        if r.credential != credential {
            return Err(RunnerCallError::Unauthorized);
        }
        Ok(r)
    }

    /// The runner process connected: it is online and reports its version.
    pub fn runner_connect(
        &mut self,
        id: u64,
        credential: &str,
        version: &str,
    ) -> Result<(), RunnerCallError> {
        let r = self.runner_checked(id, credential)?;
        if !r.online {
            let name = r.name.clone();
            self.runners_connected += 1;
            self.connected_without_job.insert(name);
        }
        let r = self.runner_checked(id, credential)?;
        r.online = true;
        r.version = Some(version.to_string());
        Ok(())
    }

    /// Assigns the oldest queued job this runner can take, if any.
    pub fn runner_take_job(
        &mut self,
        id: u64,
        credential: &str,
        now: Millis,
    ) -> Result<Option<JobState>, RunnerCallError> {
        let r = self.runner_checked(id, credential)?.clone();
        if r.job_id.is_some() {
            return Ok(None);
        }
        let fits = |j: &JobState| {
            j.status == JobStatus::Queued
                && match &r.scope {
                    Scope::Repo(full) => &j.repo == full,
                    Scope::Org(org) => j.repo.split_once('/').is_some_and(|(o, _)| o == org),
                }
                && j.labels.iter().all(|l| {
                    r.labels
                        .iter()
                        .any(|rl| crate::domain::labels::same_label(rl, l))
                })
        };
        let Some(job_id) = self.jobs.values().find(|j| fits(j)).map(|j| j.id) else {
            return Ok(None);
        };
        let group_id = r.group_id;
        let job = self.jobs.get_mut(&job_id).expect("job found above");
        job.status = JobStatus::InProgress;
        job.runner_id = Some(r.id);
        job.runner_name = Some(r.name.clone());
        job.runner_group_id = Some(group_id);
        job.started_at = Some(now);
        job.renewed_at = Some(now);
        let job = job.clone();
        let runner = self.runners.get_mut(&id).expect("runner checked above");
        runner.busy = true;
        runner.job_id = Some(job_id);
        self.runners_given_a_job += 1;
        self.connected_without_job.remove(&r.name);
        self.scaleset_job_started(job_id);
        self.hook_jobs(&[job_id], "in_progress");
        Ok(Some(job))
    }

    /// The runner finished its job. An ephemeral runner's registration goes away with it.
    pub fn runner_complete(
        &mut self,
        id: u64,
        credential: &str,
        job_id: u64,
        result: &str,
        output: Option<&str>,
        now: Millis,
    ) -> Result<(), RunnerCallError> {
        let r = self.runner_checked(id, credential)?;
        if r.job_id != Some(job_id) {
            return Err(RunnerCallError::Gone);
        }
        r.busy = false;
        r.job_id = None;
        let ephemeral = r.ephemeral;
        if let Some(job) = self.jobs.get_mut(&job_id) {
            job.status = JobStatus::Completed;
            job.completed_at = Some(now);
            job.output = output.map(|o| {
                let mut end = o.len().min(MAX_JOB_OUTPUT);
                while !o.is_char_boundary(end) {
                    end -= 1;
                }
                o[..end].to_string()
            });
            job.conclusion = Some(
                match result {
                    "Succeeded" | "SucceededWithIssues" => "success",
                    "Canceled" => "cancelled",
                    "Skipped" => "skipped",
                    _ => "failure",
                }
                .into(),
            );
            self.scaleset_job_completed(job_id, result);
            self.hook_jobs(&[job_id], "completed");
        }
        if ephemeral {
            self.runners.remove(&id);
        }
        Ok(())
    }

    /// The runner says it still runs `job_id`: the job's lease on it is renewed.
    pub fn runner_renew(
        &mut self,
        id: u64,
        credential: &str,
        job_id: u64,
        now: Millis,
    ) -> Result<(), RunnerCallError> {
        let r = self.runner_checked(id, credential)?;
        if r.job_id != Some(job_id) {
            return Err(RunnerCallError::Gone);
        }
        if let Some(job) = self.jobs.get_mut(&job_id) {
            job.renewed_at = Some(now);
        }
        Ok(())
    }

    /// Fails every job whose runner has not renewed it for `lost_runner_ms`, with
    /// GitHub's message; the runner's registration is offline and free again (as
    /// GitHub shows a runner that stopped talking), so it may be deleted. Returns the
    /// jobs failed.
    pub fn fail_lost_jobs(&mut self, now: Millis) -> Vec<u64> {
        let limit = self.cfg.lost_runner_ms as Millis;
        let lost: Vec<u64> = self
            .jobs
            .values()
            .filter(|j| j.status == JobStatus::InProgress)
            .filter(|j| j.renewed_at.is_some_and(|at| now - at >= limit))
            .map(|j| j.id)
            .collect();
        for id in &lost {
            let job = self.jobs.get_mut(id).expect("listed above");
            job.status = JobStatus::Completed;
            job.conclusion = Some("failure".into());
            job.completed_at = Some(now);
            job.output = Some(super::lost_runner_message(
                job.runner_name.as_deref().unwrap_or("unknown"),
            ));
            if let Some(r) = job.runner_id.and_then(|r| self.runners.get_mut(&r)) {
                r.busy = false;
                r.online = false;
                r.job_id = None;
            }
        }
        if !lost.is_empty() {
            self.hook_jobs(&lost, "completed");
        }
        lost
    }

    /// GitHub's "Re-run a job from a workflow run" (`POST .../actions/jobs/{id}/rerun`):
    /// the job is queued again as a new job of the same run (GitHub re-runs a job in
    /// a new attempt of its run, under a new job id). Refused while its run still runs
    /// (GitHub: 403 "This workflow is already running"). Dependent jobs are not
    /// modelled: the sim's runs have no `needs`.
    pub fn rerun_job(&mut self, id: u64, now: Millis) -> Result<u64, &'static str> {
        let job = self.jobs.get(&id).ok_or("Not Found")?.clone();
        if self.run_status(job.run_id) != JobStatus::Completed {
            return Err("This workflow is already running");
        }
        let new = self.next_id();
        self.jobs.insert(
            new,
            JobState {
                id: new,
                status: JobStatus::Queued,
                conclusion: None,
                runner_id: None,
                runner_name: None,
                runner_group_id: None,
                created_at: now,
                started_at: None,
                completed_at: None,
                output: None,
                renewed_at: None,
                ..job
            },
        );
        self.reruns += 1;
        self.scaleset_jobs_queued(&[new]);
        self.hook_jobs(&[new], "queued");
        Ok(new)
    }
}
