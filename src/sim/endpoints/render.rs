//! The state as GitHub's JSON: repositories, installations, runs, jobs and runners rendered into the `model` structs, and lists paginated as GitHub pages them.

use crate::http_server::{Request, percent_encode};
use crate::sim::model;
use crate::sim::state::{JobState, JobStatus, RunnerState, State};
use crate::timefmt::format_rfc3339;

/// One page of `items` and the `Link` header (absent on a single page), as GitHub pages:
/// `per_page` (default 30, max 100) and `page` (from 1).
pub(super) fn paginate<T: Clone>(
    items: &[T],
    req: &Request,
    base: &str,
) -> (Vec<T>, Option<String>) {
    let per_page = req
        .query_param("per_page")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(30)
        .clamp(1, 100);
    let page = req
        .query_param("page")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(1)
        .max(1);
    let last = items.len().div_ceil(per_page).max(1);
    let slice: Vec<T> = items
        .iter()
        .skip((page - 1) * per_page)
        .take(per_page)
        .cloned()
        .collect();
    if last == 1 {
        return (slice, None);
    }
    let mut kept: Vec<(String, String)> = req
        .query
        .iter()
        .filter(|(k, _)| k != "page" && k != "per_page")
        .cloned()
        .collect();
    kept.push(("per_page".into(), per_page.to_string()));
    let url = |n: usize| {
        let mut q: Vec<String> = kept
            .iter()
            .map(|(k, v)| format!("{}={}", percent_encode(k), percent_encode(v)))
            .collect();
        q.push(format!("page={n}"));
        format!("<{base}{}?{}>", req.path, q.join("&"))
    };
    let mut rels = Vec::new();
    if page > 1 {
        rels.push(format!("{}; rel=\"prev\"", url(page - 1)));
    }
    if page < last {
        rels.push(format!("{}; rel=\"next\"", url(page + 1)));
        rels.push(format!("{}; rel=\"last\"", url(last)));
    }
    if page > 1 {
        rels.push(format!("{}; rel=\"first\"", url(1)));
    }
    (slice, Some(rels.join(", ")))
}

pub(super) fn render_repo(st: &State, full: &str) -> model::Repository {
    let r = &st.repos[full];
    let owner = r.owner().to_string();
    let is_org = st.orgs.contains_key(&owner);
    let owner_id = st
        .orgs
        .get(&owner)
        .map_or_else(|| user_id(&owner), |o| o.id);
    let user = model::simple_user(&st.base_url, &owner, owner_id, is_org);
    model::repository(
        &st.base_url,
        &r.full_name,
        r.id,
        user,
        r.private,
        &format_rfc3339(r.created_at),
    )
}

fn user_id(login: &str) -> u64 {
    10_000_000
        + login
            .bytes()
            .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64))
            % 1_000_000
}

pub(super) fn render_installation(
    st: &State,
    id: u64,
    app_id: u64,
    account: &str,
) -> model::Installation {
    let is_org = st.orgs.contains_key(account);
    let account_id = st
        .orgs
        .get(account)
        .map_or_else(|| user_id(account), |o| o.id);
    let at = format_rfc3339(0);
    model::Installation {
        id,
        account: model::simple_user(&st.base_url, account, account_id, is_org),
        repository_selection: "all".into(),
        access_tokens_url: format!("{}/app/installations/{id}/access_tokens", st.base_url),
        repositories_url: format!("{}/installation/repositories", st.base_url),
        html_url: format!("https://github.com/settings/installations/{id}"),
        app_id,
        target_id: account_id,
        target_type: if is_org { "Organization" } else { "User" }.into(),
        permissions: model::runner_manager_permissions(),
        events: Vec::new(),
        created_at: at.clone(),
        updated_at: at,
        single_file_name: None,
        app_slug: format!("sim-app-{app_id}"),
        suspended_by: None,
        suspended_at: None,
    }
}

pub(super) fn render_run(st: &State, id: u64) -> model::WorkflowRun {
    let r = &st.runs[&id];
    let base = &st.base_url;
    let api = format!("{base}/repos/{}/actions/runs/{id}", r.repo);
    let status = st.run_status(id);
    let conclusion = (status == JobStatus::Completed).then(|| {
        let failed = st
            .jobs
            .values()
            .any(|j| j.run_id == id && j.conclusion.as_deref() != Some("success"));
        if failed { "failure" } else { "success" }.to_string()
    });
    let repo = render_repo(st, &r.repo);
    let at = format_rfc3339(r.created_at);
    model::WorkflowRun {
        id,
        name: Some(r.workflow_name.clone()),
        node_id: model::node_id("WFR", id),
        head_branch: Some("main".into()),
        head_sha: format!("{:040x}", id),
        path: ".github/workflows/ci.yml".into(),
        display_title: r.workflow_name.clone(),
        run_number: r.run_number,
        run_attempt: 1,
        event: "push".into(),
        status: Some(status.as_str().into()),
        conclusion,
        workflow_id: 1,
        url: api.clone(),
        html_url: format!("https://github.com/{}/actions/runs/{id}", r.repo),
        pull_requests: Vec::new(),
        created_at: at.clone(),
        updated_at: format_rfc3339(st.run_updated_at(id)),
        run_started_at: at,
        jobs_url: format!("{api}/jobs"),
        logs_url: format!("{api}/logs"),
        check_suite_url: format!("{base}/repos/{}/check-suites/{id}", r.repo),
        artifacts_url: format!("{api}/artifacts"),
        cancel_url: format!("{api}/cancel"),
        rerun_url: format!("{api}/rerun"),
        workflow_url: format!("{base}/repos/{}/actions/workflows/1", r.repo),
        head_commit: None,
        repository: repo.clone(),
        head_repository: repo,
    }
}

pub(super) fn render_job(st: &State, j: &JobState) -> model::Job {
    let base = &st.base_url;
    let group_name = j.runner_group_id.map(|g| {
        if g == 1 {
            "Default".to_string()
        } else {
            st.groups
                .iter()
                .find(|x| x.id == g)
                .map_or("Default".into(), |x| x.name.clone())
        }
    });
    model::Job {
        id: j.id,
        run_id: j.run_id,
        run_url: format!("{base}/repos/{}/actions/runs/{}", j.repo, j.run_id),
        run_attempt: 1,
        node_id: model::node_id("CR", j.id),
        head_sha: format!("{:040x}", j.run_id),
        url: format!("{base}/repos/{}/actions/jobs/{}", j.repo, j.id),
        html_url: Some(format!(
            "https://github.com/{}/actions/runs/{}/job/{}",
            j.repo, j.run_id, j.id
        )),
        status: j.status.as_str().into(),
        conclusion: j.conclusion.clone(),
        created_at: format_rfc3339(j.created_at),
        // GitHub sends started_at even for a queued job (the queue time); so do we.
        started_at: format_rfc3339(j.started_at.unwrap_or(j.created_at)),
        completed_at: j.completed_at.map(format_rfc3339),
        name: j.name.clone(),
        check_run_url: format!("{base}/repos/{}/check-runs/{}", j.repo, j.id),
        labels: j.labels.clone(),
        runner_id: j.runner_id,
        runner_name: j.runner_name.clone(),
        runner_group_id: j.runner_group_id,
        runner_group_name: group_name,
        workflow_name: st.runs.get(&j.run_id).map(|r| r.workflow_name.clone()),
        head_branch: Some("main".into()),
    }
}

const READ_ONLY_LABELS: &[&str] = &[
    "self-hosted",
    "linux",
    "windows",
    "macos",
    "x64",
    "arm64",
    "arm",
];

pub(super) fn render_runner(r: &RunnerState) -> model::Runner {
    let labels = r
        .labels
        .iter()
        .map(|l| {
            let read_only = READ_ONLY_LABELS.iter().any(|x| x.eq_ignore_ascii_case(l));
            let id = 1 + l
                .to_ascii_lowercase()
                .bytes()
                .fold(0u64, |h, b| h.wrapping_mul(131).wrapping_add(b as u64))
                % 1_000_000;
            model::RunnerLabel {
                id,
                name: l.clone(),
                kind: if read_only { "read-only" } else { "custom" }.into(),
            }
        })
        .collect();
    model::Runner {
        id: r.id,
        runner_group_id: r.group_id,
        name: r.name.clone(),
        os: "Linux".into(),
        status: if r.online { "online" } else { "offline" }.into(),
        busy: r.busy,
        labels,
        ephemeral: r.ephemeral,
        version: r.version.clone(),
    }
}
