//! The REST endpoints of the simulated GitHub: each reads or changes the state and
//! renders GitHub's JSON through the structs in `model.rs`.

use serde::Deserialize;
use std::collections::BTreeMap;

use super::auth::Caller;
use super::github::{Out, Params, param};
use super::jit::{self, JitConfig};
use super::model::{self, RateLimit};
use super::state::{JobState, JobStatus, RunnerState, Scope, State, TokenState};
use crate::http_server::{Request, percent_encode};
use crate::timefmt::{Millis, format_rfc3339};

pub fn dispatch(
    st: &mut State,
    caller: Caller,
    template: &str,
    p: &Params,
    req: &Request,
    now: Millis,
) -> Out {
    let scope = match authorize(st, caller, template, p) {
        Ok(scope) => scope,
        Err(refused) => return refused,
    };
    let t = template
        .trim_start_matches("/repos/{owner}/{repo}")
        .trim_start_matches("/orgs/{org}");
    let scope = scope.unwrap_or(Scope::Org(String::new()));
    let id = |name: &str| -> u64 { param(p, name).parse().unwrap_or(0) };
    match (req.method.as_str(), t) {
        ("GET", "/rate_limit") => rate_limit(st, caller, now),
        ("GET", "/installation/repositories") => installation_repositories(st, caller, req, now),
        ("POST", "/app/installations/{installation_id}/access_tokens") => {
            access_token(st, caller, p, now)
        }
        ("GET", "") => scope_itself(st, &scope),
        ("GET", "/repos") => org_repositories(st, &scope, req),
        ("GET", "/installation") => installation_of(st, &scope, caller),
        ("GET", "/actions/runners/downloads") => super::downloads::list(st),
        ("GET", "/actions/runs") => workflow_runs(st, &scope, req),
        ("GET", "/actions/runs/{run_id}/jobs") => run_jobs(st, &scope, id("run_id"), req),
        ("GET", "/actions/jobs/{job_id}") => job(st, &scope, id("job_id")),
        ("GET", "/actions/runner-groups") => runner_groups(st, &scope, req),
        ("GET", "/actions/runners") => runners(st, &scope, req),
        ("GET", "/actions/runners/{runner_id}") => runner(st, &scope, id("runner_id")),
        ("DELETE", "/actions/runners/{runner_id}") => {
            delete_runner(st, &scope, id("runner_id"), now)
        }
        ("POST", "/actions/runners/registration-token" | "/actions/runners/remove-token") => {
            registration_token(st, scope, now)
        }
        ("POST", "/actions/runners/generate-jitconfig") => generate_jitconfig(st, scope, req, now),
        _ => Out::error(404, "Not Found"),
    }
}

/// Who may call what, and the scope a path names: App JWTs reach only the App
/// endpoints, an installation sees only its own account, and a scope that does not
/// exist (or is hidden) is a 404.
fn authorize(st: &State, caller: Caller, template: &str, p: &Params) -> Result<Option<Scope>, Out> {
    // App JWTs only reach the App endpoints; installation tokens and PATs never do.
    let app_only = template.starts_with("/app/") || template.ends_with("/installation");
    match (caller, app_only) {
        (Caller::App(_), false) => {
            return Err(Out::error(403, "Resource not accessible by integration"));
        }
        (Caller::Pat(_) | Caller::Installation(_), true) => {
            return Err(Out::error(401, "A JSON web token could not be decoded"));
        }
        _ => {}
    }
    if template == "/installation/repositories" && !matches!(caller, Caller::Installation(_)) {
        return Err(Out::error(
            403,
            "You must authenticate with an installation access token in order to list repositories for an installation.",
        ));
    }
    let not_found = || Out::error(404, "Not Found");
    // Resolve the scope (and hide what an installation cannot see).
    let scope = if template.starts_with("/repos/") {
        let full = format!("{}/{}", param(p, "owner"), param(p, "repo"));
        let repo = st
            .repos
            .values()
            .find(|r| r.full_name.eq_ignore_ascii_case(&full))
            .ok_or_else(not_found)?;
        Some(Scope::Repo(repo.full_name.clone()))
    } else if template.starts_with("/orgs/") {
        let org = param(p, "org");
        let o = st
            .orgs
            .values()
            .find(|o| o.login.eq_ignore_ascii_case(org))
            .ok_or_else(not_found)?;
        Some(Scope::Org(o.login.clone()))
    } else {
        None
    };
    if let (Caller::Installation(id), Some(scope)) = (caller, &scope) {
        let account = st
            .installations
            .get(&id)
            .map(|i| i.account.clone())
            .unwrap_or_default();
        if !scope_owner(scope).eq_ignore_ascii_case(&account) {
            return Err(not_found());
        }
    }
    Ok(scope)
}

/// The account a scope belongs to: the repository's owner, or the organization.
fn scope_owner(scope: &Scope) -> String {
    match scope {
        Scope::Repo(full) => full.split('/').next().unwrap_or_default().to_string(),
        Scope::Org(o) => o.clone(),
    }
}

/// `GET /repos/{owner}/{repo}` or `GET /orgs/{org}`.
fn scope_itself(st: &State, scope: &Scope) -> Out {
    match scope {
        Scope::Repo(full) => Out::json(200, &render_repo(st, full)),
        Scope::Org(org) => {
            let id = st.orgs[org].id;
            let public = st
                .repos
                .values()
                .filter(|r| r.owner() == org && !r.private)
                .count() as u64;
            Out::json(
                200,
                &model::organization(&st.base_url, org, id, public, &format_rfc3339(0)),
            )
        }
    }
}

/// `GET /orgs/{org}/repos`, paginated.
fn org_repositories(st: &State, scope: &Scope, req: &Request) -> Out {
    let Scope::Org(org) = scope else {
        return Out::error(404, "Not Found");
    };
    let names: Vec<String> = st
        .repos
        .values()
        .filter(|r| r.owner() == org)
        .map(|r| r.full_name.clone())
        .collect();
    let (page, link) = paginate(&names, req, &st.base_url);
    let repos: Vec<model::Repository> = page.iter().map(|n| render_repo(st, n)).collect();
    Out {
        link,
        ..Out::json(200, &repos)
    }
}

/// `GET /repos/{owner}/{repo}/installation` or `/orgs/{org}/installation`: the
/// calling App's installation on that account.
fn installation_of(st: &State, scope: &Scope, caller: Caller) -> Out {
    let account = scope_owner(scope);
    let Caller::App(app_id) = caller else {
        return Out::error(401, "A JSON web token could not be decoded");
    };
    match st
        .installations
        .values()
        .find(|i| i.app_id == app_id && i.account.eq_ignore_ascii_case(&account))
    {
        Some(i) => Out::json(200, &render_installation(st, i.id, i.app_id, &i.account)),
        None => Out::error(404, "Not Found"),
    }
}

/// `GET /repos/{owner}/{repo}/actions/runs/{run_id}/jobs`, paginated.
fn run_jobs(st: &State, scope: &Scope, run_id: u64, req: &Request) -> Out {
    let Scope::Repo(full) = scope else {
        return Out::error(404, "Not Found");
    };
    if st.runs.get(&run_id).is_none_or(|r| &r.repo != full) {
        return Out::error(404, "Not Found");
    }
    let jobs: Vec<&JobState> = st.jobs.values().filter(|j| j.run_id == run_id).collect();
    let (page, link) = paginate(&jobs, req, &st.base_url);
    let rendered: Vec<model::Job> = page.iter().map(|j| render_job(st, j)).collect();
    Out {
        link,
        ..Out::json(
            200,
            &serde_json::json!({"total_count": jobs.len(), "jobs": rendered}),
        )
    }
}

/// `GET /repos/{owner}/{repo}/actions/jobs/{job_id}`.
fn job(st: &State, scope: &Scope, id: u64) -> Out {
    match st
        .jobs
        .get(&id)
        .filter(|j| *scope == Scope::Repo(j.repo.clone()))
    {
        Some(j) => Out::json(200, &render_job(st, j)),
        None => Out::error(404, "Not Found"),
    }
}

/// `GET /orgs/{org}/actions/runner-groups`, paginated: Default (id 1) first.
fn runner_groups(st: &State, scope: &Scope, req: &Request) -> Out {
    let Scope::Org(org) = scope else {
        return Out::error(404, "Not Found");
    };
    let mut groups = vec![(1u64, "Default".to_string(), false)];
    groups.extend(
        st.groups
            .iter()
            .filter(|g| &g.org == org)
            .map(|g| (g.id, g.name.clone(), g.allows_public)),
    );
    let (page, link) = paginate(&groups, req, &st.base_url);
    let rendered: Vec<model::RunnerGroup> = page
        .iter()
        .map(|(id, name, public)| model::RunnerGroup {
            id: *id,
            name: name.clone(),
            visibility: "all".into(),
            default: *id == 1,
            runners_url: format!(
                "{}/orgs/{org}/actions/runner-groups/{id}/runners",
                st.base_url
            ),
            inherited: false,
            allows_public_repositories: *public,
            restricted_to_workflows: false,
            selected_workflows: Vec::new(),
            workflow_restrictions_read_only: false,
        })
        .collect();
    Out {
        link,
        ..Out::json(
            200,
            &serde_json::json!({"total_count": groups.len(), "runner_groups": rendered}),
        )
    }
}

/// `GET .../actions/runners` (optionally `?name=`), paginated.
fn runners(st: &State, scope: &Scope, req: &Request) -> Out {
    let name = req.query_param("name");
    let runners: Vec<&RunnerState> = st
        .runners
        .values()
        .filter(|r| r.scope == *scope && name.is_none_or(|n| r.name == n))
        .collect();
    let (page, link) = paginate(&runners, req, &st.base_url);
    let rendered: Vec<model::Runner> = page.iter().map(|r| render_runner(r)).collect();
    Out {
        link,
        ..Out::json(
            200,
            &serde_json::json!({"total_count": runners.len(), "runners": rendered}),
        )
    }
}

/// `GET .../actions/runners/{runner_id}`.
fn runner(st: &State, scope: &Scope, id: u64) -> Out {
    match st.runners.get(&id).filter(|r| r.scope == *scope) {
        Some(r) => Out {
            runner_id: Some(id),
            ..Out::json(200, &render_runner(r))
        },
        None => Out::error(404, "Not Found"),
    }
}

/// `DELETE .../actions/runners/{runner_id}`: 422 while the runner runs a job.
fn delete_runner(st: &mut State, scope: &Scope, id: u64, now: Millis) -> Out {
    match st.runners.get(&id).filter(|r| r.scope == *scope) {
        None => Out::error(404, "Not Found"),
        Some(r) if r.busy => {
            Out::validation(&format!("Runner \"{}\" is still running a job", r.name))
        }
        Some(_) => {
            st.remove_runner(id, now);
            Out {
                runner_id: Some(id),
                ..Out::empty(204)
            }
        }
    }
}

/// `POST .../actions/runners/registration-token` (and `remove-token`): an hour's token.
fn registration_token(st: &mut State, scope: Scope, now: Millis) -> Out {
    let token = format!("A{}", st.rng.hex(14).to_uppercase());
    // The scale set API's runner-registration exchange accepts these.
    st.scalesets
        .registration_tokens
        .insert(token.clone(), (scope, now + 3_600_000));
    Out::json(
        201,
        &model::AuthenticationToken {
            token,
            expires_at: format_rfc3339(now + 3_600_000),
        },
    )
}

#[derive(Deserialize)]
struct JitRequest {
    name: String,
    runner_group_id: u64,
    labels: Vec<String>,
    work_folder: Option<String>,
}

fn generate_jitconfig(st: &mut State, scope: Scope, req: &Request, now: Millis) -> Out {
    let body: JitRequest = match serde_json::from_slice(&req.body) {
        Ok(b) => b,
        Err(e) => return Out::validation(&format!("Invalid request.\n\n{e}")),
    };
    if body.name.trim().is_empty()
        || body.labels.is_empty()
        || body.labels.len() > 100
        || body.labels.iter().any(|l| l.trim().is_empty())
    {
        return Out::validation(
            "Invalid request.\n\nname must be non-empty and labels must hold 1 to 100 non-empty strings.",
        );
    }
    if !st.group_exists(&scope, body.runner_group_id) {
        return Out::error(404, "Not Found");
    }
    if st.runner_by_name(&scope, &body.name).is_some() {
        return Out::error(
            409,
            &format!(
                "Already exists - A runner with the name {} already exists.",
                body.name
            ),
        );
    }
    let id = st.create_runner(scope, &body.name, body.runner_group_id, body.labels, now);
    let r = st.runners[&id].clone();
    let cfg = JitConfig {
        server_url: st.base_url.clone(),
        runner_id: id,
        runner_name: r.name.clone(),
        credential: crate::secret::Secret::new(r.credential.clone()),
        labels: r.labels.clone(),
        work_folder: body.work_folder.unwrap_or_else(|| "_work".into()),
        faults: r.faults.clone(),
        disable_update: false,
    };
    let encoded = jit::encode(&cfg);
    let out =
        serde_json::json!({"runner": render_runner(&r), "encoded_jit_config": encoded.expose()});
    Out {
        runner_id: Some(id),
        ..Out::json(201, &out)
    }
}

fn workflow_runs(st: &State, scope: &Scope, req: &Request) -> Out {
    let Scope::Repo(full) = scope else {
        return Out::error(404, "Not Found");
    };
    let wanted = req.query_param("status");
    let statuses = st.run_statuses();
    let status_of = |id: u64| statuses.get(&id).copied().unwrap_or(JobStatus::Completed);
    let runs: Vec<u64> = st
        .runs
        .values()
        .rev()
        .filter(|r| &r.repo == full)
        .filter(|r| wanted.is_none_or(|w| status_of(r.id).as_str() == w))
        .map(|r| r.id)
        .collect();
    // A status filter returns at most 1,000 results, as on GitHub.
    let runs: Vec<u64> = if wanted.is_some() {
        runs.into_iter().take(1000).collect()
    } else {
        runs
    };
    let (page, link) = paginate(&runs, req, &st.base_url);
    let rendered: Vec<model::WorkflowRun> = page.iter().map(|id| render_run(st, *id)).collect();
    Out {
        link,
        ..Out::json(
            200,
            &serde_json::json!({"total_count": runs.len(), "workflow_runs": rendered}),
        )
    }
}

fn access_token(st: &mut State, caller: Caller, p: &Params, now: Millis) -> Out {
    let Caller::App(app_id) = caller else {
        return Out::error(401, "A JSON web token could not be decoded");
    };
    let id: u64 = param(p, "installation_id").parse().unwrap_or(0);
    if st.installations.get(&id).is_none_or(|i| i.app_id != app_id) {
        return Out::error(404, "Not Found");
    }
    let token = format!("ghs_{}", st.rng.hex(18));
    let expires_at = now + st.cfg.installation_token_ttl_secs as i64 * 1000;
    st.tokens.insert(
        token.clone(),
        TokenState {
            installation_id: id,
            expires_at,
        },
    );
    Out::json(
        201,
        &model::InstallationToken {
            token,
            expires_at: format_rfc3339(expires_at),
            permissions: model::runner_manager_permissions(),
            repository_selection: "all".into(),
        },
    )
}

fn installation_repositories(st: &State, caller: Caller, req: &Request, _now: Millis) -> Out {
    let Caller::Installation(id) = caller else {
        return Out::error(403, "Forbidden");
    };
    let account = st
        .installations
        .get(&id)
        .map(|i| i.account.clone())
        .unwrap_or_default();
    let names: Vec<String> = st
        .repos
        .values()
        .filter(|r| r.owner().eq_ignore_ascii_case(&account))
        .map(|r| r.full_name.clone())
        .collect();
    let (page, link) = paginate(&names, req, &st.base_url);
    let repos: Vec<model::Repository> = page.iter().map(|n| render_repo(st, n)).collect();
    let body = serde_json::json!({"total_count": names.len(), "repositories": repos, "repository_selection": "all"});
    Out {
        link,
        ..Out::json(200, &body)
    }
}

fn rate_limit(st: &mut State, caller: Caller, now: Millis) -> Out {
    let (b, _) = st.charge(&caller.id(), false, now);
    let core = RateLimit {
        limit: b.limit,
        remaining: b.limit.saturating_sub(b.used),
        reset: b.reset,
        used: b.used,
    };
    let search = RateLimit {
        limit: 30,
        remaining: 30,
        reset: (now / 1000) as u64 + 60,
        used: 0,
    };
    let resources = BTreeMap::from([("core", core), ("search", search), ("graphql", core)]);
    Out::json(
        200,
        &model::RateLimitOverview {
            resources,
            rate: core,
        },
    )
}

/// One page of `items` and the `Link` header (absent on a single page), as GitHub pages:
/// `per_page` (default 30, max 100) and `page` (from 1).
pub fn paginate<T: Clone>(items: &[T], req: &Request, base: &str) -> (Vec<T>, Option<String>) {
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

pub fn render_repo(st: &State, full: &str) -> model::Repository {
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

fn render_installation(st: &State, id: u64, app_id: u64, account: &str) -> model::Installation {
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

fn render_run(st: &State, id: u64) -> model::WorkflowRun {
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
        updated_at: at.clone(),
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

fn render_job(st: &State, j: &JobState) -> model::Job {
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

pub fn render_runner(r: &RunnerState) -> model::Runner {
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
