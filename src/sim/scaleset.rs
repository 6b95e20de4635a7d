//! The simulated Actions service of the runner scale set API: `runner-registration`
//! on the API base, the admin endpoints under `/_services/pipelines/`, and the
//! message queue (the long poll) under `/_services/broker/`. Faults come from the
//! sim's ordinary fault rules matched on these paths (a `status` fault answers with
//! the service's exception for that status and path); the BOM and the hold are
//! `ScaleSetSimConfig` switches. State and the message hooks are in `scaleset_state`.

use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{Value, json};

use super::faults::FaultAction;
use super::handle::Sim;
use super::jit::{self, JitConfig};
use super::latency::Stamp;
use super::scaleset_state::{SimScaleSet, SimSession, jwt_token};
use super::state::{LogEntry, Scope, State};
use crate::http_server::{Reply, Request, Response};
use crate::secret::Secret;
use crate::timefmt::{Millis, format_rfc3339, now_millis};

pub const REGISTRATION: &str = "/actions/runner-registration";
const PIPELINES: &str = "/_services/pipelines";
const BROKER: &str = "/_services/broker";

/// The operations served, as (method, path template); logged under the template.
pub const SCALESET_ROUTES: &[(&str, &str)] = &[
    ("POST", REGISTRATION),
    ("GET", "/_services/pipelines/_apis/runtime/runnergroups"),
    ("GET", "/_services/pipelines/_apis/runtime/runnerscalesets"),
    ("POST", "/_services/pipelines/_apis/runtime/runnerscalesets"),
    (
        "GET",
        "/_services/pipelines/_apis/runtime/runnerscalesets/{id}",
    ),
    (
        "PATCH",
        "/_services/pipelines/_apis/runtime/runnerscalesets/{id}",
    ),
    (
        "DELETE",
        "/_services/pipelines/_apis/runtime/runnerscalesets/{id}",
    ),
    (
        "POST",
        "/_services/pipelines/_apis/runtime/runnerscalesets/{id}/sessions",
    ),
    (
        "PATCH",
        "/_services/pipelines/_apis/runtime/runnerscalesets/{id}/sessions/{session}",
    ),
    (
        "DELETE",
        "/_services/pipelines/_apis/runtime/runnerscalesets/{id}/sessions/{session}",
    ),
    (
        "POST",
        "/_services/pipelines/_apis/runtime/runnerscalesets/{id}/generatejitconfig",
    ),
    (
        "POST",
        "/_services/pipelines/_apis/runtime/runnerscalesets/{id}/acquirejobs",
    ),
    (
        "GET",
        "/_services/pipelines/_apis/distributedtask/pools/0/agents",
    ),
    (
        "GET",
        "/_services/pipelines/_apis/distributedtask/pools/0/agents/{id}",
    ),
    (
        "DELETE",
        "/_services/pipelines/_apis/distributedtask/pools/0/agents/{id}",
    ),
    (
        "GET",
        "/_services/broker/_apis/runtime/runnerscalesets/{id}/messages",
    ),
    (
        "DELETE",
        "/_services/broker/_apis/runtime/runnerscalesets/{id}/messages/{message}",
    ),
];

/// Whether a path belongs to the scale set API (the router's hook).
pub fn serves(path: &str) -> bool {
    path == REGISTRATION || path.starts_with("/_services/")
}

fn match_route(method: &str, path: &str) -> Option<(&'static str, Vec<String>)> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    'routes: for (m, t) in SCALESET_ROUTES {
        let tsegs: Vec<&str> = t.trim_matches('/').split('/').collect();
        if *m != method || tsegs.len() != segs.len() {
            continue;
        }
        let mut params = Vec::new();
        for (t, s) in tsegs.iter().zip(&segs) {
            if t.starts_with('{') {
                if s.is_empty() {
                    continue 'routes;
                }
                params.push(crate::http_server::percent_decode(s));
            } else if t != s {
                continue 'routes;
            }
        }
        return Some((t, params));
    }
    None
}

/// The service's error body: an exception name clients branch on.
fn exception(status: u16, key: &str, message: &str) -> (u16, Value) {
    (
        status,
        json!({
            "$id": "1",
            "innerException": null,
            "message": message,
            "typeName": format!("GitHub.Actions.Runtime.WebApi.{key}, GitHub.Actions.Runtime.WebApi"),
            "typeKey": key,
            "errorCode": 0,
            "eventId": 3000,
        }),
    )
}

fn scale_set_not_found(id: &str) -> (u16, Value) {
    exception(
        404,
        "RunnerScaleSetNotFoundException",
        &format!("The runner scale set {id} does not exist."),
    )
}

fn unauthorized() -> (u16, Value) {
    (
        401,
        json!({"message": "The access token is not valid or has expired."}),
    )
}

/// The exception a `status` fault stands for on this path.
fn fault_error(status: u16, path: &str) -> (u16, Value) {
    match status {
        401 => unauthorized(),
        409 if path.ends_with("/sessions") => exception(
            409,
            "RunnerScaleSetSessionConflictException",
            "The actions runner scale set already has an active session.",
        ),
        409 if path.ends_with("/generatejitconfig") => exception(
            409,
            "AgentExistsException",
            "A runner with the same name already exists.",
        ),
        404 if path.contains("/sessions/") || path.contains("/messages") => exception(
            404,
            "TaskAgentSessionNotFoundException",
            "The message session was not found.",
        ),
        404 => scale_set_not_found("requested"),
        s => (s, json!({"message": "Server Error"})),
    }
}

/// A 401 on a call made with a queue token (the long poll, an ack, job acquisition)
/// means that token expired, as on the real service: the same call sent again without
/// refreshing the session is refused again.
fn expire_queue_token_of(st: &mut State, req: &Request) {
    if credential_of(&req.path) != "queue" {
        return;
    }
    let token = bearer(req).to_string();
    for s in st.scalesets.sessions.values_mut() {
        if s.queue_token == token {
            s.token_expires_at = 0;
        }
    }
}

fn respond(st: &State, status: u16, body: Option<Value>) -> Response {
    let mut r = Response::new(status);
    if let Some(v) = body {
        let mut bytes = Vec::new();
        if st.scalesets.config.bom {
            bytes.extend_from_slice(b"\xEF\xBB\xBF");
        }
        bytes.extend(v.to_string().into_bytes());
        r = r
            .with_header("content-type", "application/json; charset=utf-8")
            .with_body(bytes);
    }
    r.with_header("date", crate::http_server::http_date(now_millis()))
}

/// The credential a request of this API counts in flight under (the log's names): the
/// registration's `RemoteAuth` token, the message queue's token (the long poll, acks,
/// job acquisition), or the admin token of everything else.
pub fn credential_of(path: &str) -> &'static str {
    if path == REGISTRATION {
        "remote-auth"
    } else if path.starts_with(BROKER) || path.ends_with("/acquirejobs") {
        "queue"
    } else {
        "admin"
    }
}

/// Serves one scale set API request (after its way up).
pub fn serve(sim: &Sim, req: Request, stamp: &mut Stamp) -> Reply {
    let now = now_millis();
    let route = match_route(&req.method, &req.path);
    let (mut log, fault) =
        super::github::begin(sim, &req, route.as_ref().map(|(t, _)| *t), stamp.arrived);
    let early = match &fault {
        Some(FaultAction::Drop) => Some(Reply::Drop),
        Some(FaultAction::Hang) => Some(Reply::Hang),
        Some(FaultAction::Status { status }) => {
            let (s, v) = fault_error(*status, &req.path);
            let mut st = sim.lock();
            if s == 401 {
                expire_queue_token_of(&mut st, &req);
            }
            if s == 404
                && let Some((_, sid)) = req.path.split_once("/sessions/")
            {
                // "Session gone" is made true, so a client cannot find it again.
                st.scalesets.sessions.remove(sid);
            }
            Some(Reply::Send(respond(&st, s, Some(v))))
        }
        Some(FaultAction::Unauthorized) => {
            let (s, v) = unauthorized();
            let mut st = sim.lock();
            expire_queue_token_of(&mut st, &req);
            Some(Reply::Send(respond(&st, s, Some(v))))
        }
        Some(FaultAction::MalformedJson) => Some(Reply::Send(
            Response::new(200)
                .with_header("content-type", "application/json")
                .with_body(br#"{"messageId": 1, "body": "#.to_vec()),
        )),
        Some(FaultAction::Delay { ms }) => {
            sim.stopper.wait(Duration::from_millis(*ms));
            None
        }
        _ => None,
    };
    log.fault = fault.as_ref().map(|f| format!("{f:?}"));
    if let Some(reply) = early {
        log.status = match &reply {
            Reply::Send(r) => r.status,
            _ => 0,
        };
        stamp.log(&mut sim.lock(), log);
        return reply;
    }
    sim.lock().scalesets.expire_sessions(now);
    let (status, body) = match route {
        None => (404, Some(json!({"message": "Not Found"}))),
        Some((template, params)) => route_request(sim, &req, template, &params, now, &mut log),
    };
    let mut st = sim.lock();
    let response = respond(&st, status, body);
    log.status = status;
    stamp.log(&mut st, log);
    drop(st);
    sim.changed.notify_all();
    match fault {
        Some(FaultAction::TruncatedBody) => {
            let keep = response.body.len() / 2;
            Reply::Truncate { response, keep }
        }
        _ => Reply::Send(response),
    }
}

type Out = (u16, Option<Value>);

fn err((s, v): (u16, Value)) -> Out {
    (s, Some(v))
}

fn bearer(req: &Request) -> &str {
    req.header("authorization")
        .and_then(|h| h.strip_prefix("Bearer "))
        .map_or("", str::trim)
}

fn body<T: for<'de> Deserialize<'de>>(req: &Request) -> Result<T, Out> {
    let bytes = req.body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&req.body);
    serde_json::from_slice(bytes).map_err(|e| {
        (
            400,
            Some(json!({"message": format!("The request body does not parse ({e})")})),
        )
    })
}

macro_rules! try_out {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(o) => return o,
        }
    };
}

fn route_request(
    sim: &Sim,
    req: &Request,
    template: &str,
    params: &[String],
    now: Millis,
    log: &mut LogEntry,
) -> Out {
    if template == REGISTRATION {
        log.credential = Some(credential_of(template).into());
        return register(&mut sim.lock(), req, now);
    }
    if template.starts_with(BROKER) {
        log.credential = Some(credential_of(template).into());
        return queue(sim, req, template, params);
    }
    let mut st = sim.lock();
    if template.ends_with("/acquirejobs") {
        log.credential = Some(credential_of(template).into());
        return acquire(&mut st, req, params, now);
    }
    let token = bearer(req).to_string();
    let scope = match st.scalesets.admin_tokens.get(&token) {
        Some((scope, exp)) if *exp > now => scope.clone(),
        _ => return err(unauthorized()),
    };
    log.credential = Some(credential_of(template).into());
    let rest = template.trim_start_matches(PIPELINES);
    let id = params
        .first()
        .and_then(|p| p.parse::<u64>().ok())
        .unwrap_or(0);
    // A scale set of another scope is as good as missing.
    let set = st
        .scalesets
        .scale_sets
        .get(&id)
        .filter(|s| s.scope == scope)
        .cloned();
    let needs_set = rest.starts_with("/_apis/runtime/runnerscalesets/");
    if needs_set && set.is_none() {
        return err(scale_set_not_found(
            params.first().map_or("", String::as_str),
        ));
    }
    match (req.method.as_str(), rest) {
        ("GET", "/_apis/runtime/runnergroups") => runner_groups(&st, &scope, req),
        ("GET", "/_apis/runtime/runnerscalesets") => list_scale_sets(&st, &scope, req),
        ("POST", "/_apis/runtime/runnerscalesets") => create_scale_set(&mut st, scope, req, now),
        ("GET", "/_apis/runtime/runnerscalesets/{id}") => (
            200,
            Some(scale_set_json(&st, set.as_ref().expect("checked"))),
        ),
        ("PATCH", "/_apis/runtime/runnerscalesets/{id}") => update_scale_set(&mut st, id, req),
        ("DELETE", "/_apis/runtime/runnerscalesets/{id}") => {
            st.scalesets.remove_scale_set(id);
            (204, None)
        }
        ("POST", "/_apis/runtime/runnerscalesets/{id}/sessions") => {
            create_session(&mut st, &set.expect("checked"), req, now)
        }
        ("PATCH", "/_apis/runtime/runnerscalesets/{id}/sessions/{session}") => {
            let sid = &params[1];
            match st.scalesets.sessions.get(sid) {
                Some(s) if s.scale_set_id == id => {
                    (200, Some(issue_queue_token(&mut st, sid, now)))
                }
                _ => err(fault_error(404, &req.path)),
            }
        }
        ("DELETE", "/_apis/runtime/runnerscalesets/{id}/sessions/{session}") => {
            match st.scalesets.sessions.remove(&params[1]) {
                Some(_) => (204, None),
                None => err(fault_error(404, &req.path)),
            }
        }
        ("POST", "/_apis/runtime/runnerscalesets/{id}/generatejitconfig") => {
            generate_jit(&mut st, req, &set.expect("checked"), now)
        }
        ("GET", "/_apis/distributedtask/pools/0/agents") => agents(&st, &scope, req),
        ("GET", "/_apis/distributedtask/pools/0/agents/{id}") => {
            match st.runners.get(&id).filter(|r| r.scope == scope) {
                Some(r) => (200, Some(agent_json(&st, r.id))),
                None => err(agent_not_found()),
            }
        }
        ("DELETE", "/_apis/distributedtask/pools/0/agents/{id}") => {
            delete_agent(&mut st, &scope, id, now)
        }
        _ => (404, Some(json!({"message": "Not Found"}))),
    }
}

/// `GET runnerscalesets` (`?runnerGroupId=`, `?name=`): the scope's scale sets.
fn list_scale_sets(st: &State, scope: &Scope, req: &Request) -> Out {
    let group: Option<u64> = req
        .query_param("runnerGroupId")
        .and_then(|v| v.parse().ok());
    let name = req.query_param("name");
    let value: Vec<Value> = st
        .scalesets
        .scale_sets
        .values()
        .filter(|s| s.scope == *scope)
        .filter(|s| group.is_none_or(|g| s.runner_group_id == g))
        .filter(|s| name.is_none_or(|n| s.name == n))
        .map(|s| scale_set_json(st, s))
        .collect();
    (200, Some(json!({"count": value.len(), "value": value})))
}

/// `POST runnerscalesets`: a new scale set; a taken name is a 409.
fn create_scale_set(st: &mut State, scope: Scope, req: &Request, now: Millis) -> Out {
    let b: ScaleSetBody = try_out!(body(req));
    let Some(name) = b.name.filter(|n| !n.trim().is_empty()) else {
        return (400, Some(json!({"message": "name is required"})));
    };
    let group = b.runner_group_id.unwrap_or(1);
    if !st.group_exists(&scope, group) {
        return (
            404,
            Some(json!({"message": format!("Runner group {group} not found")})),
        );
    }
    if st
        .scalesets
        .scale_sets
        .values()
        .any(|s| s.scope == scope && s.name == name)
    {
        return err(exception(
            409,
            "RunnerScaleSetExistsException",
            &format!("A runner scale set named {name} already exists."),
        ));
    }
    let labels = b.labels.map_or_else(
        || vec![name.clone()],
        |l| l.into_iter().map(|l| l.name).collect(),
    );
    let disable = b
        .runner_setting
        .and_then(|r| r.disable_update)
        .unwrap_or(false);
    let id = st
        .scalesets
        .add_scale_set(&name, scope, group, labels, disable, now);
    st.scaleset_created(id);
    let s = st.scalesets.scale_sets[&id].clone();
    (200, Some(scale_set_json(st, &s)))
}

/// `PATCH runnerscalesets/{id}`: what the body names changes.
fn update_scale_set(st: &mut State, id: u64, req: &Request) -> Out {
    let b: ScaleSetBody = try_out!(body(req));
    let s = st.scalesets.scale_sets.get_mut(&id).expect("checked");
    if let Some(n) = b.name.filter(|n| !n.trim().is_empty()) {
        s.name = n;
    }
    if let Some(g) = b.runner_group_id {
        s.runner_group_id = g;
    }
    if let Some(l) = b.labels {
        s.labels = l.into_iter().map(|l| l.name).collect();
    }
    if let Some(d) = b.runner_setting.and_then(|r| r.disable_update) {
        s.disable_update = d;
    }
    let s = s.clone();
    (200, Some(scale_set_json(st, &s)))
}

/// `POST runnerscalesets/{id}/sessions`: one live session per scale set (409 while
/// another lives); the new one gets its queue token.
fn create_session(st: &mut State, set: &SimScaleSet, req: &Request, now: Millis) -> Out {
    let id = set.id;
    let b: SessionBody = try_out!(body(req));
    if let Some(s) = st.scalesets.live_session(id, now) {
        return err(exception(
            409,
            "RunnerScaleSetSessionConflictException",
            &format!(
                "The actions runner scale set {} already has an active session for owner {}.",
                set.name, s.owner
            ),
        ));
    }
    st.scalesets.sessions.retain(|_, s| s.scale_set_id != id);
    let sid = format!("{}-{}-{}", st.rng.hex(8), st.rng.hex(4), st.rng.hex(12));
    let session = SimSession {
        id: sid.clone(),
        scale_set_id: id,
        owner: b.owner_name.unwrap_or_default(),
        queue_token: String::new(),
        token_expires_at: 0,
        last_seen: now,
        polls: 0,
    };
    st.scalesets.sessions.insert(sid.clone(), session);
    (200, Some(issue_queue_token(st, &sid, now)))
}

/// `GET pools/0/agents` (`?agentName=`): the scope's runners.
fn agents(st: &State, scope: &Scope, req: &Request) -> Out {
    let name = req.query_param("agentName");
    let value: Vec<Value> = st
        .runners
        .values()
        .filter(|r| r.scope == *scope && name.is_none_or(|n| r.name.eq_ignore_ascii_case(n)))
        .map(|r| agent_json(st, r.id))
        .collect();
    (200, Some(json!({"count": value.len(), "value": value})))
}

/// The 404 of an agent id the scope does not have.
fn agent_not_found() -> (u16, Value) {
    exception(404, "AgentNotFoundException", "The runner was not found.")
}

/// `DELETE pools/0/agents/{id}`: 400 `AgentInUse` while the runner runs a job.
fn delete_agent(st: &mut State, scope: &Scope, id: u64, now: Millis) -> Out {
    match st.runners.get(&id).filter(|r| r.scope == *scope) {
        None => err(agent_not_found()),
        Some(r) if r.busy => err(exception(
            400,
            "AgentInUseException",
            &format!("The runner {} is running a job.", r.name),
        )),
        Some(_) => {
            st.remove_runner(id, now);
            st.scalesets.runners.remove(&id);
            (204, None)
        }
    }
}

#[derive(Deserialize)]
struct LabelBody {
    name: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SettingBody {
    disable_update: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ScaleSetBody {
    name: Option<String>,
    runner_group_id: Option<u64>,
    labels: Option<Vec<LabelBody>>,
    #[serde(rename = "RunnerSetting")]
    runner_setting: Option<SettingBody>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SessionBody {
    owner_name: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct JitBody {
    name: String,
    work_folder: Option<String>,
}

#[derive(Deserialize)]
struct RegistrationBody {
    url: String,
    runner_event: Option<String>,
}

fn register(st: &mut State, req: &Request, now: Millis) -> Out {
    let token = req
        .header("authorization")
        .and_then(|h| h.strip_prefix("RemoteAuth "))
        .map(str::trim)
        .unwrap_or_default();
    let Some((scope, exp)) = st.scalesets.registration_tokens.get(token).cloned() else {
        return (401, Some(json!({"message": "Bad credentials"})));
    };
    if exp <= now {
        return (
            401,
            Some(json!({"message": "The registration token expired"})),
        );
    }
    let b: RegistrationBody = try_out!(body(req));
    if b.runner_event.as_deref() != Some("register") {
        return (
            400,
            Some(json!({"message": "runner_event must be register"})),
        );
    }
    // The config URL must name the token's repository or organization.
    let path = b.url.trim_end_matches('/');
    let named = match &scope {
        Scope::Repo(full) => path.ends_with(&format!("/{full}")),
        Scope::Org(org) => path.ends_with(&format!("/{org}")),
    };
    if !named {
        return (404, Some(json!({"message": "Not Found"})));
    }
    let ttl = st.scalesets.config.admin_token_ttl_secs as Millis * 1000;
    let admin = jwt_token(now + ttl, &st.rng.hex(16));
    st.scalesets
        .admin_tokens
        .insert(admin.clone(), (scope, now + ttl));
    (
        200,
        Some(
            json!({"url": format!("{}{PIPELINES}/", st.base_url), "token": admin, "token_schema": "OAuthAccessToken"}),
        ),
    )
}

fn issue_queue_token(st: &mut State, sid: &str, now: Millis) -> Value {
    let ttl = st.scalesets.config.queue_token_ttl_secs as Millis * 1000;
    let token = jwt_token(now + ttl, &st.rng.hex(16));
    let base = st.base_url.clone();
    let s = st.scalesets.sessions.get_mut(sid).expect("caller checked");
    s.queue_token = token.clone();
    s.token_expires_at = now + ttl;
    s.last_seen = now;
    let (set_id, owner) = (s.scale_set_id, s.owner.clone());
    let set = st.scalesets.scale_sets[&set_id].clone();
    json!({
        "sessionId": sid,
        "ownerName": owner,
        "runnerScaleSet": scale_set_json(st, &set),
        "messageQueueUrl": format!("{base}{BROKER}/_apis/runtime/runnerscalesets/{set_id}/messages?sessionId={sid}"),
        "messageQueueAccessToken": token,
        "statistics": st.scaleset_statistics(set_id),
    })
}

fn scale_set_json(st: &State, s: &SimScaleSet) -> Value {
    json!({
        "id": s.id,
        "name": s.name,
        "runnerGroupId": s.runner_group_id,
        "runnerGroupName": if s.runner_group_id == 1 { "Default".to_string() } else {
            st.groups.iter().find(|g| g.id == s.runner_group_id).map_or(String::new(), |g| g.name.clone())
        },
        "labels": s.labels.iter().map(|l| json!({"type": "System", "name": l})).collect::<Vec<_>>(),
        "RunnerSetting": {"ephemeral": true, "isElastic": true, "disableUpdate": s.disable_update},
        "createdOn": format_rfc3339(s.created_at),
        "statistics": st.scaleset_statistics(s.id),
    })
}

fn agent_json(st: &State, id: u64) -> Value {
    let r = &st.runners[&id];
    json!({
        "id": r.id,
        "name": r.name,
        "runnerScaleSetId": st.scalesets.runners.get(&id).copied().unwrap_or(0),
        "status": if r.online { "online" } else { "offline" },
        "busy": r.busy,
    })
}

fn runner_groups(st: &State, scope: &Scope, req: &Request) -> Out {
    let mut groups = vec![json!({"id": 1, "name": "Default", "isDefaultGroup": true})];
    if let Scope::Org(org) = scope {
        for g in st.groups.iter().filter(|g| &g.org == org) {
            groups.push(json!({"id": g.id, "name": g.name, "isDefaultGroup": false}));
        }
    }
    if let Some(name) = req.query_param("groupName") {
        groups.retain(|g| {
            g["name"]
                .as_str()
                .is_some_and(|n| n.eq_ignore_ascii_case(name))
        });
    }
    (200, Some(json!({"count": groups.len(), "value": groups})))
}

fn generate_jit(st: &mut State, req: &Request, set: &SimScaleSet, now: Millis) -> Out {
    let b: JitBody = try_out!(body(req));
    if b.name.trim().is_empty() {
        return (400, Some(json!({"message": "name is required"})));
    }
    if st.runner_by_name(&set.scope, &b.name).is_some() {
        return err((
            409,
            json!({
                "message": format!("A runner with the name {} already exists.", b.name),
                "typeName": "GitHub.DistributedTask.WebApi.AgentExistsException, GitHub.DistributedTask.WebApi",
                "typeKey": "AgentExistsException",
            }),
        ));
    }
    let id = st.create_runner(
        set.scope.clone(),
        &b.name,
        set.runner_group_id,
        set.labels.clone(),
        now,
    );
    st.scalesets.runners.insert(id, set.id);
    let r = st.runners[&id].clone();
    let cfg = JitConfig {
        server_url: st.base_url.clone(),
        runner_id: id,
        runner_name: r.name.clone(),
        credential: Secret::new(r.credential),
        labels: r.labels,
        work_folder: b.work_folder.unwrap_or_else(|| "_work".into()),
        faults: r.faults,
        disable_update: set.disable_update,
    };
    let encoded = jit::encode(&cfg);
    (
        200,
        Some(json!({
            "runner": {"id": id, "name": r.name, "runnerScaleSetId": set.id},
            "encodedJITConfig": encoded.expose(),
        })),
    )
}

/// The session a queue call names, checked: 404 when it is gone, 401 when the queue
/// token is wrong or expired.
fn queue_session(st: &State, req: &Request, set_id: u64, now: Millis) -> Result<String, Out> {
    let sid = req.query_param("sessionId").unwrap_or_default();
    let Some(s) = st
        .scalesets
        .sessions
        .get(sid)
        .filter(|s| s.scale_set_id == set_id)
    else {
        return Err(err(fault_error(404, &req.path)));
    };
    if s.queue_token != bearer(req) || s.token_expires_at <= now {
        return Err(err(unauthorized()));
    }
    Ok(sid.to_string())
}

fn queue(sim: &Sim, req: &Request, template: &str, params: &[String]) -> Out {
    let set_id: u64 = params[0].parse().unwrap_or(0);
    let mut st = sim.lock();
    let now = now_millis();
    if !st.scalesets.scale_sets.contains_key(&set_id) {
        return err(scale_set_not_found(&params[0]));
    }
    let sid = try_out!(queue_session(&st, req, set_id, now));
    if template.ends_with("{message}") {
        let mid: i64 = params[1].parse().unwrap_or(0);
        return match st
            .scalesets
            .messages
            .iter_mut()
            .find(|m| m.scale_set_id == set_id && m.id == mid)
        {
            Some(m) => {
                m.acked = true;
                (204, None)
            }
            None => (404, Some(json!({"message": "no such message"}))),
        };
    }
    if req
        .header("x-scalesetmaxcapacity")
        .and_then(|v| v.trim().parse::<u32>().ok())
        .is_none()
    {
        return (
            400,
            Some(json!({"message": "X-ScaleSetMaxCapacity is required"})),
        );
    }
    let last: i64 = req
        .query_param("lastMessageId")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let hold = Duration::from_millis(st.scalesets.config.hold_ms);
    let deadline = Instant::now() + hold;
    if let Some(s) = st.scalesets.sessions.get_mut(&sid) {
        s.polls += 1;
    }
    let out = loop {
        // The session may have been deleted or replaced while this poll waited.
        let Some(s) = st.scalesets.sessions.get_mut(&sid) else {
            break err(fault_error(404, &req.path));
        };
        s.last_seen = now_millis();
        let found = st
            .scalesets
            .next_message(set_id, last, &sid)
            .map(|m| (m.id, m.body.clone()));
        if let Some((id, inner)) = found {
            if let Some(m) = st
                .scalesets
                .messages
                .iter_mut()
                .find(|m| m.scale_set_id == set_id && m.id == id)
            {
                m.delivered_to = Some(sid.clone());
            }
            // Statistics as of now, not as of when the message was queued.
            let body = json!({
                "messageId": id,
                "messageType": "RunnerScaleSetJobMessages",
                "body": inner,
                "statistics": st.scaleset_statistics(set_id),
            });
            break (200, Some(body));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || sim.stopper.is_stopped() {
            break (202, None);
        }
        st = sim
            .changed
            .wait_timeout(st, left)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    };
    if let Some(s) = st.scalesets.sessions.get_mut(&sid) {
        s.polls = s.polls.saturating_sub(1);
        s.last_seen = now_millis();
    }
    out
}

fn acquire(st: &mut State, req: &Request, params: &[String], now: Millis) -> Out {
    let set_id: u64 = params[0].parse().unwrap_or(0);
    if !st.scalesets.scale_sets.contains_key(&set_id) {
        return err(scale_set_not_found(&params[0]));
    }
    let token = bearer(req);
    let valid =
        st.scalesets.sessions.values().any(|s| {
            s.scale_set_id == set_id && s.queue_token == token && s.token_expires_at > now
        });
    if !valid {
        return err(unauthorized());
    }
    let ids: Vec<u64> = try_out!(body(req));
    let granted = st.scaleset_acquire(set_id, &ids);
    (200, Some(json!({"count": granted.len(), "value": granted})))
}
