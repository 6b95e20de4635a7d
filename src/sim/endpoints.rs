//! The REST endpoints of the simulated GitHub: each reads or changes the state and
//! renders GitHub's JSON through the structs in `model.rs`, which `render` fills.

mod render;

use render::{paginate, render_installation, render_job, render_repo, render_run, render_runner};

use serde::Deserialize;
use std::collections::BTreeMap;

use super::auth::Caller;
use super::github::{Out, Params, param};
use super::jit::{self, JitConfig};
use super::model::{self, RateLimit};
use super::state::{JobState, JobStatus, RunnerState, Scope, State, TokenState};
use crate::http_server::Request;
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
        ("POST", "/actions/jobs/{job_id}/rerun") => rerun(st, &scope, id("job_id"), now),
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

/// `POST /repos/{owner}/{repo}/actions/jobs/{job_id}/rerun`: 201 with an empty object,
/// or 403 while the job's run still runs.
fn rerun(st: &mut State, scope: &Scope, id: u64, now: Millis) -> Out {
    if !st
        .jobs
        .get(&id)
        .is_some_and(|j| *scope == Scope::Repo(j.repo.clone()))
    {
        return Out::error(404, "Not Found");
    }
    match st.rerun_job(id, now) {
        Ok(_) => Out::json(201, &serde_json::json!({})),
        Err(why) => Out::error(403, why),
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
