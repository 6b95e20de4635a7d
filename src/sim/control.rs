//! The sim's private control interface under `/_sim/...` (JSON): set up repositories,
//! credentials and jobs, add faults, read state and the request log from another
//! process; and the simulated runner's own endpoints under `/_sim/runner/...`.

use std::time::{Duration, Instant};

use serde::Deserialize;

use super::faults::{FaultRule, RunnerFaultRule};
use super::handle::Sim;
use super::jit::{self, JitConfig};
use super::state::{InstallationState, RunnerCallError, Scope, State};
use crate::http_server::{Reply, Request, Response};
use crate::secret::Secret;
use crate::timefmt::{Millis, now_millis};

/// The runner program's version the sim reports and the simulated runner prints.
pub const RUNNER_VERSION: &str = "2.336.0";

/// Creates a registration and its encoded JIT config (the same path generate-jitconfig takes).
pub fn register(
    st: &mut State,
    scope: Scope,
    name: &str,
    labels: Vec<String>,
    now: Millis,
) -> (u64, Secret) {
    let id = st.create_runner(scope, name, 1, labels, now);
    let r = st.runners[&id].clone();
    let cfg = JitConfig {
        server_url: st.base_url.clone(),
        runner_id: id,
        runner_name: r.name,
        credential: Secret::new(r.credential),
        labels: r.labels,
        work_folder: "_work".into(),
        faults: r.faults,
        disable_update: false,
    };
    (id, jit::encode(&cfg))
}

fn ok(value: serde_json::Value) -> Reply {
    Reply::Send(Response::json(200, &value))
}

fn fail(status: u16, message: &str) -> Reply {
    Reply::Send(Response::json(
        status,
        &serde_json::json!({ "message": message }),
    ))
}

fn body<T: for<'de> Deserialize<'de>>(req: &Request) -> Result<T, Reply> {
    serde_json::from_slice(&req.body)
        .map_err(|e| fail(400, &format!("the request body does not parse ({e})")))
}

macro_rules! parse_or_reply {
    ($req:expr) => {
        match body($req) {
            Ok(v) => v,
            Err(r) => return r,
        }
    };
}

#[derive(Deserialize)]
struct NewRepo {
    full_name: String,
    #[serde(default = "yes")]
    private: bool,
}

fn yes() -> bool {
    true
}

#[derive(Deserialize)]
struct NewJob {
    repo: String,
    name: String,
    labels: Vec<String>,
    #[serde(default)]
    duration_ms: u64,
    /// Steps for the simulated runner's worker to run (`/bin/sh -c`), in place of
    /// sleeping for `duration_ms`.
    #[serde(default)]
    script: Option<String>,
    /// The run starts `waiting` (a deployment gate or a concurrency group holds it)
    /// until `POST /_sim/runs/{id}/approve`.
    #[serde(default)]
    waiting: bool,
}

#[derive(Deserialize)]
struct NewApp {
    app_id: u64,
    #[serde(default)]
    client_id: String,
    private_key_pem: String,
}

#[derive(Deserialize)]
struct RunnerCall {
    runner_id: u64,
    #[serde(default)]
    job_id: u64,
    #[serde(default)]
    result: String,
    #[serde(default)]
    version: String,
    #[serde(default)]
    output: Option<String>,
    /// The registration's `disableUpdate`, as the runner's `.runner` has it.
    #[serde(default)]
    disable_update: bool,
}

pub fn serve(sim: &Sim, req: Request) -> Reply {
    let now = now_millis();
    if let Some(rest) = req.path.strip_prefix("/_sim/runner/") {
        return serve_runner(sim, rest, &req, now);
    }
    if let Some(file) = req.path.strip_prefix("/_sim/downloads/") {
        return super::downloads::serve_tarball(&sim.lock(), file);
    }
    let reply = control(&mut sim.lock(), &req, now);
    sim.changed.notify_all();
    reply
}

/// The test's hands: `/_sim/...` requests that shape the world and read it.
fn control(st: &mut State, req: &Request, now: Millis) -> Reply {
    let path = req.path.trim_start_matches("/_sim");
    match (req.method.as_str(), path) {
        ("GET", "/state") => ok(serde_json::json!({
            "url": st.base_url,
            "repos": st.repos.values().collect::<Vec<_>>(),
            "orgs": st.orgs.values().collect::<Vec<_>>(),
            "runs": st.runs.values().collect::<Vec<_>>(),
            "jobs": st.jobs.values().collect::<Vec<_>>(),
            "runners": st.runners.values().collect::<Vec<_>>(),
            "secondary_hits": st.secondary.hits(),
        })),
        ("GET", "/jobs") => ok(serde_json::json!(st.jobs.values().collect::<Vec<_>>())),
        ("POST", "/runner-release") => publish_release(st, req),
        ("POST", "/webhook") | ("GET", "/webhook") => super::webhooks::control(st, req),
        ("GET", "/runners") => ok(serde_json::json!(st.runners.values().collect::<Vec<_>>())),
        ("GET", "/log") => ok(serde_json::json!(st.log)),
        ("GET", "/units") => ok(serde_json::json!(st.units_used())),
        ("GET", "/in-flight") => ok(serde_json::json!(st.in_flight)),
        ("GET", "/secondary-limits") => ok(serde_json::json!({
            "limits": st.cfg.secondary,
            "hits": st.secondary.hits(),
        })),
        ("PUT", "/secondary-limits") => {
            st.cfg.secondary = parse_or_reply!(req);
            ok(serde_json::json!({ "limits": st.cfg.secondary }))
        }
        ("POST", "/orgs") => add_org(st, req),
        ("POST", "/repos") => add_repo(st, req, now),
        ("POST", "/pats") => add_pat(st, req),
        ("POST", "/apps") => add_app(st, req),
        ("POST", "/installations") => add_installation(st, req),
        ("POST", "/runner-groups") => add_runner_group(st, req),
        ("POST", "/jobs") => add_job(st, req, now),
        ("POST", p) if p.starts_with("/runs/") => gate_run(st, p),
        ("POST", "/faults") => {
            let rule: FaultRule = parse_or_reply!(req);
            st.faults.push(rule);
            ok(serde_json::json!({ "faults": st.faults.len() }))
        }
        ("POST", "/runner-faults") => {
            let rule: RunnerFaultRule = parse_or_reply!(req);
            st.runner_faults.push(rule);
            ok(serde_json::json!({ "runner_faults": st.runner_faults.len() }))
        }
        ("DELETE", "/faults") => {
            st.faults.clear();
            st.runner_faults.clear();
            ok(serde_json::json!({}))
        }
        ("DELETE", p) if p.starts_with("/runners/") => {
            let id: u64 = p.trim_start_matches("/runners/").parse().unwrap_or(0);
            match st.remove_runner(id, now) {
                Some(_) => ok(serde_json::json!({ "removed": id })),
                None => fail(404, "no such runner"),
            }
        }
        _ => fail(404, "unknown sim control endpoint: see src/sim/control.rs"),
    }
}

/// `POST /_sim/runner-release {"version"}`: the newest release the downloads API lists.
fn publish_release(st: &mut State, req: &Request) -> Reply {
    #[derive(Deserialize)]
    struct Release {
        version: String,
    }
    let r: Release = parse_or_reply!(req);
    if !crate::install::versions::is_version(&r.version) {
        return fail(400, "version must read like 2.337.0");
    }
    st.runner_release = r.version.clone();
    ok(serde_json::json!({ "release": r.version }))
}

/// `POST /_sim/orgs {"login"}`.
fn add_org(st: &mut State, req: &Request) -> Reply {
    let v: serde_json::Value = parse_or_reply!(req);
    let login = v.get("login").and_then(|l| l.as_str()).unwrap_or_default();
    if login.is_empty() {
        return fail(400, "give the org as {\"login\": NAME}");
    }
    ok(serde_json::json!({ "id": st.add_org(login) }))
}

/// `POST /_sim/repos {"full_name", "private"}`.
fn add_repo(st: &mut State, req: &Request, now: Millis) -> Reply {
    let r: NewRepo = parse_or_reply!(req);
    if r.full_name.split('/').filter(|p| !p.is_empty()).count() != 2 {
        return fail(400, "give the repository as OWNER/NAME");
    }
    ok(serde_json::json!({ "id": st.add_repo(&r.full_name, r.private, now) }))
}

/// `POST /_sim/pats {"token"}`: a PAT, logged as `pat:N`.
fn add_pat(st: &mut State, req: &Request) -> Reply {
    let v: serde_json::Value = parse_or_reply!(req);
    let Some(token) = v.get("token").and_then(|t| t.as_str()) else {
        return fail(400, "give the PAT as {\"token\": VALUE}");
    };
    let n = st.pats.len();
    let n = *st.pats.entry(token.to_string()).or_insert(n);
    ok(serde_json::json!({ "credential": format!("pat:{n}") }))
}

/// `POST /_sim/apps`: a GitHub App, by its private key's public half.
fn add_app(st: &mut State, req: &Request) -> Reply {
    let a: NewApp = parse_or_reply!(req);
    match super::auth::public_components_from_private_pem(&a.private_key_pem) {
        Ok((n, e)) => {
            st.apps.insert(
                a.app_id,
                super::state::AppState {
                    app_id: a.app_id,
                    client_id: a.client_id,
                    n,
                    e,
                },
            );
            ok(serde_json::json!({ "app_id": a.app_id }))
        }
        Err(e) => fail(400, &e),
    }
}

/// `POST /_sim/installations {"app_id", "account"}`.
fn add_installation(st: &mut State, req: &Request) -> Reply {
    let v: serde_json::Value = parse_or_reply!(req);
    let (Some(app_id), Some(account)) = (
        v.get("app_id").and_then(|a| a.as_u64()),
        v.get("account").and_then(|a| a.as_str()),
    ) else {
        return fail(400, "give {\"app_id\": N, \"account\": LOGIN}");
    };
    let id = st.next_id();
    st.installations.insert(
        id,
        InstallationState {
            id,
            app_id,
            account: account.to_string(),
        },
    );
    ok(serde_json::json!({ "id": id }))
}

/// `POST /_sim/runner-groups {"org", "name", "allows_public_repositories"}`.
fn add_runner_group(st: &mut State, req: &Request) -> Reply {
    let v: serde_json::Value = parse_or_reply!(req);
    let (Some(org), Some(name)) = (
        v.get("org").and_then(|a| a.as_str()),
        v.get("name").and_then(|a| a.as_str()),
    ) else {
        return fail(400, "give {\"org\": LOGIN, \"name\": GROUP}");
    };
    let public = v
        .get("allows_public_repositories")
        .and_then(|a| a.as_bool())
        .unwrap_or(false);
    ok(serde_json::json!({ "id": st.add_runner_group(org, name, public) }))
}

/// `POST /_sim/jobs`: a one-job run queued in an existing repository.
fn add_job(st: &mut State, req: &Request, now: Millis) -> Reply {
    let j: NewJob = parse_or_reply!(req);
    if !st.repos.contains_key(&j.repo) {
        return fail(
            404,
            "no such repository: add it with POST /_sim/repos first",
        );
    }
    let spec = [(j.name, j.labels, j.duration_ms)];
    let (run_id, ids) = if j.waiting {
        st.enqueue_waiting_run(&j.repo, "CI", &spec, now)
    } else {
        st.enqueue_run(&j.repo, "CI", &spec, now)
    };
    if let Some(job) = st.jobs.get_mut(&ids[0]) {
        job.script = j.script;
    }
    ok(serde_json::json!({ "id": ids[0], "run_id": run_id }))
}

/// `POST /_sim/runs/{id}/wait` holds a run's queued jobs in `waiting` (a concurrency
/// group took its turn back); `POST /_sim/runs/{id}/approve` releases its waiting jobs
/// to `queued`, as a reviewer's approval of its deployment does.
fn gate_run(st: &mut State, path: &str) -> Reply {
    let rest = path.trim_start_matches("/runs/");
    let (id, action) = rest.split_once('/').unwrap_or((rest, ""));
    let Some(run_id) = id.parse::<u64>().ok().filter(|id| st.runs.contains_key(id)) else {
        return fail(404, "no such run");
    };
    match action {
        "wait" => ok(serde_json::json!({ "waiting": st.hold_run(run_id) })),
        "approve" => ok(serde_json::json!({ "queued": st.release_run(run_id) })),
        _ => fail(404, "a run's gate is POST /_sim/runs/{id}/wait or /approve"),
    }
}

fn bearer(req: &Request) -> &str {
    req.header("authorization")
        .and_then(|h| h.split_once(' '))
        .map_or("", |(_, t)| t.trim())
}

fn runner_error(e: RunnerCallError) -> Reply {
    match e {
        RunnerCallError::Gone => fail(404, "The runner no longer exists on the server"),
        RunnerCallError::Unauthorized => fail(401, "The runner credential is not valid"),
    }
}

fn serve_runner(sim: &Sim, rest: &str, req: &Request, now: Millis) -> Reply {
    let cred = bearer(req).to_string();
    match (req.method.as_str(), rest) {
        ("POST", "connect") => {
            let c: RunnerCall = parse_or_reply!(req);
            let version = if c.version.is_empty() {
                RUNNER_VERSION
            } else {
                c.version.as_str()
            };
            let (r, update) = {
                let mut st = sim.lock();
                let r = st.runner_connect(c.runner_id, &cred, version);
                // GitHub tells an older runner to update itself unless its registration
                // says not to (`disableUpdate`).
                let newer = crate::install::compare_versions(&st.runner_release, version)
                    == std::cmp::Ordering::Greater;
                let update = (newer && !c.disable_update).then(|| st.runner_release.clone());
                (r, update)
            };
            sim.changed.notify_all();
            match r {
                Ok(()) => ok(serde_json::json!({ "connected": true, "update": update })),
                Err(e) => runner_error(e),
            }
        }
        ("POST", "self_update") => {
            let c: RunnerCall = parse_or_reply!(req);
            let mut st = sim.lock();
            if let Err(e) = st.runner_checked(c.runner_id, &cred) {
                return runner_error(e);
            }
            st.self_updates.push((c.runner_id, c.version));
            ok(serde_json::json!({ "updating": true }))
        }
        ("GET", "poll") => {
            let id: u64 = req
                .query_param("runner_id")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            let wait = Duration::from_millis(sim.lock().cfg.runner_poll_ms);
            let deadline = Instant::now() + wait;
            let mut st = sim.lock();
            loop {
                match st.runner_take_job(id, &cred, now_millis()) {
                    Err(e) => return runner_error(e),
                    Ok(Some(job)) => {
                        // The runner renews its job a few times within the timeout
                        // (GitHub's runner: every minute of ten).
                        let renew_ms = (st.cfg.lost_runner_ms / 4).clamp(100, 60_000);
                        drop(st);
                        sim.changed.notify_all();
                        return ok(serde_json::json!({
                            "job": { "id": job.id, "name": job.name, "duration_ms": job.duration_ms, "repo": job.repo, "script": job.script, "renew_ms": renew_ms }
                        }));
                    }
                    Ok(None) => {}
                }
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() || sim.stopper.is_stopped() {
                    return Reply::Send(Response::new(204));
                }
                st = sim
                    .changed
                    .wait_timeout(st, left)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
        }
        ("POST", "renew") => {
            let c: RunnerCall = parse_or_reply!(req);
            match sim.lock().runner_renew(c.runner_id, &cred, c.job_id, now) {
                Ok(()) => ok(serde_json::json!({ "renewed": c.job_id })),
                Err(e) => runner_error(e),
            }
        }
        ("POST", "complete") => {
            let c: RunnerCall = parse_or_reply!(req);
            let r = sim.lock().runner_complete(
                c.runner_id,
                &cred,
                c.job_id,
                &c.result,
                c.output.as_deref(),
                now,
            );
            sim.changed.notify_all();
            match r {
                Ok(()) => ok(serde_json::json!({ "completed": c.job_id })),
                Err(e) => runner_error(e),
            }
        }
        _ => fail(404, "unknown runner endpoint"),
    }
}
