//! The simulated Actions service of the runner scale set API: `runner-registration`
//! on the API base, the admin endpoints under `/_services/pipelines/`, and the
//! message queue (the long poll) under `/_services/broker/`. Faults come from the
//! sim's ordinary fault rules matched on these paths (a `status` fault answers with
//! the service's exception for that status and path); the BOM and the hold are
//! `ScaleSetSimConfig` switches. State and the message hooks are in `scaleset_state`.
//!
//! Here: the routes, the faults and errors, and the dispatch. The handlers are in
//! `admin` (everything under the admin token) and `broker` (the message queue).

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use super::faults::FaultAction;
use super::handle::Sim;
use super::latency::Stamp;
use super::state::{LogEntry, State};
use crate::http_server::{Reply, Request, Response};
use crate::timefmt::{Millis, now_millis};

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

// After `try_out`, which they use.
mod admin;
mod broker;

use admin::{
    agent_json, agent_not_found, agents, create_scale_set, create_session, delete_agent,
    generate_jit, issue_queue_token, list_scale_sets, register, runner_groups, scale_set_json,
    update_scale_set,
};
use broker::{acquire, queue};

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
