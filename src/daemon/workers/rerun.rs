//! Carrying lost jobs to GitHub's re-run (issue 34), as one task on a target's I/O
//! workers: for each lost job whose time has come, ask GitHub only what
//! `reconcile::rerun` says to ask (the job's run, then the re-run), and store what it
//! concludes. Each row settles once, and is logged and counted then.

use crate::daemon::shared::Shared;
use crate::domain::rerun::{JobSeen, Rerun, RerunState};
use crate::domain::{Target, TargetScope};
use crate::github::{GhError, GitHubClient};
use crate::reconcile::rerun::{self, Next, Refusal};
use crate::store::{SqliteStore, Store};
use crate::timefmt::Millis;
use crate::{log_info, log_warn};
use std::collections::BTreeMap;

/// Works through the target's lost jobs that wait for now. Returns GitHub's rate limit
/// when it holds the credential (the pass holds the target for it); any other error
/// is the row's, kept with it.
pub fn run(
    shared: &Shared,
    store: &SqliteStore,
    client: &GitHubClient,
    target: &Target,
    now: Millis,
) -> Result<(), GhError> {
    let due = match store.reruns_due(&target.name, now) {
        Ok(rows) => rows,
        Err(e) => {
            log_warn!("reruns_unreadable", target = target.name, error = e);
            return Ok(());
        }
    };
    let per_hour: BTreeMap<String, Option<u32>> = store
        .profiles()
        .unwrap_or_default()
        .into_iter()
        .map(|p| (p.name, p.rerun_lost))
        .collect();
    for mut row in due {
        if row.repo.is_none()
            && let TargetScope::Repo { owner, repo } = &target.scope
        {
            row.repo = Some(format!("{owner}/{repo}"));
        }
        let recent = store
            .reruns_asked_since(&row.profile, now - rerun::HOUR)
            .unwrap_or_default();
        let bound = per_hour.get(&row.profile).copied().flatten();
        let mut first = rerun::before(&row, bound, &recent, now);
        // A source may have named the job since the attempt ended (the next daemon's
        // first read of the in-progress runs, a webhook): that spares the search.
        if row.run_id.is_none()
            && first == Next::Ask
            && let Some(o) = shared.owner_of(&row.runner_name)
            && row.repo.as_deref().is_none_or(|r| r == o.repo)
        {
            row.repo = Some(o.repo.clone());
            if !learn(store, &mut row, o.job_name, o.job_id, o.run_id) {
                first = rerun::lost_before();
            }
        }
        let next = step(client, store, &mut row, first, now)?;
        settle(shared, store, target, &mut row, next, now);
    }
    Ok(())
}

/// Asks what `next` says to ask, and returns what comes of it.
fn step(
    client: &GitHubClient,
    store: &SqliteStore,
    row: &mut Rerun,
    next: Next,
    now: Millis,
) -> Result<Next, GhError> {
    let next = match next {
        Next::Ask => {
            let next = match look(client, store, row) {
                Ok(jobs) => match rerun::ours(row, &jobs).cloned() {
                    Some(j) if row.run_id.is_none() => {
                        if learn(store, row, j.name, Some(j.id), j.run_id) {
                            rerun::seen(row, &jobs, now)
                        } else {
                            rerun::lost_before()
                        }
                    }
                    Some(j) => {
                        row.job_id = Some(j.id);
                        rerun::seen(row, &jobs, now)
                    }
                    None => rerun::seen(row, &jobs, now),
                },
                Err(e @ GhError::RateLimited { .. }) => return Err(e),
                Err(GhError::NotFound) => rerun::seen(row, &[], now),
                Err(e) => rerun::unreadable(row, refusal(e), now),
            };
            row.tries += 1;
            next
        }
        other => other,
    };
    let Next::Rerun { job_id } = next else {
        return Ok(next);
    };
    let (owner, repo) = split(row);
    let result = client.rerun_job(owner, repo, job_id).map_err(refusal);
    Ok(rerun::answered(row, result, now))
}

/// Keeps the job's identity, learned only now, with the row, unless another row holds
/// it already (the job was lost before): then the row is left as it was and `false`
/// comes back.
fn learn(
    store: &SqliteStore,
    row: &mut Rerun,
    job_name: String,
    job_id: Option<i64>,
    run_id: i64,
) -> bool {
    let logged = row.job_name.replace(job_name);
    let id = job_id.or(row.job_id);
    let id_before = std::mem::replace(&mut row.job_id, id);
    row.run_id = Some(run_id);
    if store.rerun_identity_taken(row).unwrap_or(true) {
        // The identity stays the first row's (it is unique).
        row.run_id = None;
        row.job_name = logged;
        row.job_id = id_before;
        return false;
    }
    true
}

/// The run's jobs as GitHub lists them now; without a run, the repository's newest
/// runs that can hold the job (`reconcile::rerun::runs_to_look_through`) are looked
/// through for the one its runner took, in progress first: that is where a lost job
/// stays until GitHub fails it.
fn look(client: &GitHubClient, store: &SqliteStore, row: &Rerun) -> Result<Vec<JobSeen>, GhError> {
    let (owner, repo) = split(row);
    if let Some(run) = row.run_id {
        return client.run_jobs_now(owner, repo, run);
    }
    let attempt = store.attempt(row.attempt_id).ok();
    for list in rerun::SEARCH_ORDER {
        let runs = client.runs_now(owner, repo, list.status())?;
        let completed = list == rerun::RunList::Completed;
        for run in rerun::runs_to_look_through(&runs, completed, attempt.as_ref(), row.lost_at) {
            let jobs = client.run_jobs_now(owner, repo, run)?;
            if rerun::find_by_runner(&jobs, &row.runner_name).is_some() {
                return Ok(jobs);
            }
        }
    }
    Ok(Vec::new())
}

fn split(row: &Rerun) -> (&str, &str) {
    row.repo
        .as_deref()
        .and_then(|r| r.split_once('/'))
        .unwrap_or(("", ""))
}

/// What a GitHub error says of a re-run (`reconcile::rerun::refusal`).
fn refusal(e: GhError) -> Refusal {
    rerun::refusal(e.answer(), e.to_string())
}

/// Keeps what `next` concluded with the row; a settled row is logged and counted.
fn settle(
    shared: &Shared,
    store: &SqliteStore,
    target: &Target,
    row: &mut Rerun,
    next: Next,
    now: Millis,
) {
    match next {
        Next::Wait { until, why } => {
            row.next_at = until;
            row.detail = Some(why);
        }
        Next::Settle { state, detail } => {
            row.state = state;
            row.detail = Some(detail);
            row.done_at = Some(now);
        }
        // `step` carries these out before it returns.
        Next::Ask | Next::Rerun { .. } => return,
    }
    if let Err(e) = store.put_reruns(std::slice::from_ref(row)) {
        log_warn!("rerun_unrecorded", target = target.name, error = e);
        return;
    }
    if !row.state.is_final() {
        return;
    }
    shared.metrics.job_rerun(&row.profile, row.state.as_str());
    let detail = row.detail.as_deref().unwrap_or("");
    let job = row.job_id.map_or("-".into(), |j| j.to_string());
    let repo = row.repo.as_deref().unwrap_or("-");
    match row.state {
        RerunState::Rerun => log_info!(
            "lost_job_rerun",
            target = target.name,
            profile = row.profile,
            runner = row.runner_name,
            repo = repo,
            job_id = job,
            detail = detail
        ),
        RerunState::Refused => log_warn!(
            "lost_job_rerun_refused",
            target = target.name,
            profile = row.profile,
            repo = repo,
            job_id = job,
            error = detail
        ),
        state => log_info!(
            "lost_job_not_rerun",
            target = target.name,
            profile = row.profile,
            runner = row.runner_name,
            state = state.as_str(),
            detail = detail
        ),
    }
}
