//! The REST front of the simulated GitHub: routing by GitHub's own path templates, fault
//! injection, authentication, ETag/304, primary rate-limit accounting, secondary limits
//! (`secondary.rs`) and the request log.
//! The endpoints themselves are in `endpoints.rs`.

use std::time::Duration;

use super::auth::{self, Caller};
use super::faults::{self, FaultAction};
use super::handle::Sim;
use super::latency::Stamp;
use super::model::{BasicError, DOCS, ValidationError};
use super::state::{LogEntry, State};
use crate::http_server::{Reply, Request, Response, http_date};
use crate::timefmt::{Millis, now_millis};

/// Every REST operation the sim serves, as (method, GitHub's path template). Routing uses
/// this table, and a test holds it against GitHub's OpenAPI description so they cannot
/// drift apart. Literal templates come before templated ones that could shadow them.
pub const ROUTES: &[(&str, &str)] = &[
    ("GET", "/rate_limit"),
    ("GET", "/installation/repositories"),
    ("POST", "/app/installations/{installation_id}/access_tokens"),
    ("GET", "/orgs/{org}"),
    ("GET", "/orgs/{org}/repos"),
    ("GET", "/orgs/{org}/installation"),
    ("GET", "/orgs/{org}/actions/runner-groups"),
    ("GET", "/orgs/{org}/actions/runners"),
    ("GET", "/orgs/{org}/actions/runners/downloads"),
    ("POST", "/orgs/{org}/actions/runners/generate-jitconfig"),
    ("POST", "/orgs/{org}/actions/runners/registration-token"),
    ("POST", "/orgs/{org}/actions/runners/remove-token"),
    ("GET", "/orgs/{org}/actions/runners/{runner_id}"),
    ("DELETE", "/orgs/{org}/actions/runners/{runner_id}"),
    ("GET", "/repos/{owner}/{repo}"),
    ("GET", "/repos/{owner}/{repo}/installation"),
    ("GET", "/repos/{owner}/{repo}/actions/runs"),
    ("GET", "/repos/{owner}/{repo}/actions/runs/{run_id}/jobs"),
    ("GET", "/repos/{owner}/{repo}/actions/jobs/{job_id}"),
    ("POST", "/repos/{owner}/{repo}/actions/jobs/{job_id}/rerun"),
    ("GET", "/repos/{owner}/{repo}/actions/runners"),
    ("GET", "/repos/{owner}/{repo}/actions/runners/downloads"),
    (
        "POST",
        "/repos/{owner}/{repo}/actions/runners/generate-jitconfig",
    ),
    (
        "POST",
        "/repos/{owner}/{repo}/actions/runners/registration-token",
    ),
    ("POST", "/repos/{owner}/{repo}/actions/runners/remove-token"),
    ("GET", "/repos/{owner}/{repo}/actions/runners/{runner_id}"),
    (
        "DELETE",
        "/repos/{owner}/{repo}/actions/runners/{runner_id}",
    ),
];

/// Path parameters by name.
pub type Params = Vec<(String, String)>;

pub fn param<'a>(params: &'a Params, name: &str) -> &'a str {
    params
        .iter()
        .find(|(k, _)| k == name)
        .map_or("", |(_, v)| v.as_str())
}

/// The route a request matches: (template, parameters).
pub fn match_route(method: &str, path: &str) -> Option<(&'static str, Params)> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    'routes: for (m, template) in ROUTES {
        if *m != method {
            continue;
        }
        let tsegs: Vec<&str> = template.trim_matches('/').split('/').collect();
        if tsegs.len() != segs.len() {
            continue;
        }
        let mut params = Vec::new();
        for (t, s) in tsegs.iter().zip(&segs) {
            if let Some(name) = t.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
                if s.is_empty() {
                    continue 'routes;
                }
                params.push((name.to_string(), crate::http_server::percent_decode(s)));
            } else if t != s {
                continue 'routes;
            }
        }
        return Some((template, params));
    }
    None
}

/// What an endpoint produced, before headers and accounting.
pub struct Out {
    pub status: u16,
    pub body: Vec<u8>,
    pub link: Option<String>,
    /// A runner the request named or created (for `VanishRegistration`).
    pub runner_id: Option<u64>,
}

impl Out {
    pub fn json(status: u16, value: &impl serde::Serialize) -> Out {
        Out {
            status,
            body: serde_json::to_vec(value).unwrap_or_default(),
            link: None,
            runner_id: None,
        }
    }

    pub fn empty(status: u16) -> Out {
        Out {
            status,
            body: Vec::new(),
            link: None,
            runner_id: None,
        }
    }

    pub fn error(status: u16, message: &str) -> Out {
        Out::json(
            status,
            &BasicError {
                message: message.to_string(),
                documentation_url: DOCS.into(),
                status: status.to_string(),
            },
        )
    }

    pub fn validation(message: &str) -> Out {
        Out::json(
            422,
            &ValidationError {
                message: message.to_string(),
                documentation_url: DOCS.into(),
                errors: Vec::new(),
            },
        )
    }
}

fn base_headers(mut r: Response, now: Millis) -> Response {
    r.set_header("date", http_date(now));
    r.set_header("x-github-api-version-selected", "2022-11-28");
    r.set_header("server", "github.com");
    r
}

fn out_to_response(out: Out, now: Millis) -> Response {
    let mut r = Response::new(out.status).with_body(out.body);
    if !r.body.is_empty() {
        r.set_header("content-type", "application/json; charset=utf-8");
    }
    if let Some(link) = out.link {
        r.set_header("link", link);
    }
    base_headers(r, now)
}

/// GitHub's word on when the caller's token expires, for a PAT given one: as GitHub
/// writes it (`2026-12-31 00:00:00 UTC`).
fn expiration_header(st: &State, log: &LogEntry, r: &mut Response) {
    let pat = log
        .credential
        .as_deref()
        .and_then(|c| c.strip_prefix("pat:"))
        .and_then(|n| n.parse::<usize>().ok());
    if let Some(at) = pat.and_then(|n| st.pat_expiry.get(&n)) {
        let t = crate::timefmt::format_rfc3339(*at);
        r.set_header(
            "github-authentication-token-expiration",
            format!("{} {} UTC", &t[..10], &t[11..19]),
        );
    }
}

fn rate_headers(r: &mut Response, b: super::state::Bucket) {
    r.set_header("x-ratelimit-limit", b.limit.to_string());
    r.set_header(
        "x-ratelimit-remaining",
        b.limit.saturating_sub(b.used).to_string(),
    );
    r.set_header("x-ratelimit-used", b.used.to_string());
    r.set_header("x-ratelimit-reset", b.reset.to_string());
    r.set_header("x-ratelimit-resource", "core");
}

/// A weak ETag over the body and the caller (GitHub's vary on Authorization).
fn etag(body: &[u8], caller: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in body.iter().chain(caller.as_bytes()) {
        h ^= *b as u64;
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    format!("W/\"{h:016x}\"")
}

fn etag_matches(if_none_match: Option<&str>, tag: &str) -> bool {
    let bare = |t: &str| t.trim().trim_start_matches("W/").to_string();
    if_none_match.is_some_and(|v| v.trim() == "*" || v.split(',').any(|t| bare(t) == bare(tag)))
}

fn fault_name(a: &FaultAction) -> String {
    serde_json::to_value(a)
        .ok()
        .and_then(|v| v.get("kind").and_then(|k| k.as_str()).map(str::to_string))
        .unwrap_or_default()
}

/// How every sim request begins: its request-log entry (the endpoint is the matched
/// route's template, else the path; `arrived` is when its bytes came in) and the fault,
/// if any, scripted for it.
pub(super) fn begin(
    sim: &Sim,
    req: &Request,
    template: Option<&str>,
    arrived: Millis,
) -> (LogEntry, Option<FaultAction>) {
    let log = LogEntry {
        method: req.method.clone(),
        path: req.path.clone(),
        query: req
            .query
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("&"),
        endpoint: template.map_or(req.path.clone(), str::to_string),
        status: 0,
        credential: None,
        at: arrived,
        done_at: None,
        counted: false,
        fault: None,
    };
    let fault = {
        let mut st = sim.lock();
        let State { faults, rng, .. } = &mut *st;
        faults::pick(faults, rng, (&req.method, &req.path), arrived as u64)
    };
    (log, fault)
}

/// The credential a REST request counts in flight under: its caller's log id, or None
/// when it names none that is valid.
pub fn credential_of(st: &State, req: &Request, now: Millis) -> Option<String> {
    auth::identify(st, req.header("authorization"), now)
        .ok()
        .map(|c| c.id())
}

/// Serves one REST request (after its way up: `now` is when GitHub decides).
pub fn serve(sim: &Sim, req: Request, stamp: &mut Stamp) -> Reply {
    let now = now_millis();
    let route = match_route(&req.method, &req.path);
    let (mut log, fault) = begin(sim, &req, route.as_ref().map(|(t, _)| *t), stamp.arrived);
    if let Some(f) = &fault {
        log.fault = Some(fault_name(f));
        // Whose request it was, even when a fault answers before it is served: tests
        // hold retry-after and rate limits to a credential.
        log.credential = auth::identify(&sim.lock(), req.header("authorization"), now)
            .ok()
            .map(|c| c.id());
        if let Some(reply) = early_fault(sim, f, &req, now, &mut log) {
            stamp.log(&mut sim.lock(), log);
            return reply;
        }
        if let FaultAction::Delay { ms } = f {
            sim.stopper.wait(Duration::from_millis(*ms));
        }
    }
    let (mut response, runner_id) = serve_normally(sim, &req, route, now, &mut log);
    let mut st = sim.lock();
    expiration_header(&st, &log, &mut response);
    log.status = response.status;
    stamp.log(&mut st, log);
    match fault {
        Some(FaultAction::TruncatedBody) => {
            let keep = response.body.len() / 2;
            Reply::Truncate { response, keep }
        }
        Some(FaultAction::VanishRegistration) => {
            if let Some(id) = runner_id {
                st.remove_runner(id, now);
                sim.changed.notify_all();
            }
            Reply::Send(response)
        }
        _ => Reply::Send(response),
    }
}

/// Faults that answer instead of the endpoint; None for those applied around it.
fn early_fault(
    sim: &Sim,
    f: &FaultAction,
    req: &Request,
    now: Millis,
    log: &mut LogEntry,
) -> Option<Reply> {
    let err = |status: u16, msg: &str| out_to_response(Out::error(status, msg), now);
    // GitHub answers a secondary rate limit with 403 or 429, the same message, and
    // sometimes a retry-after.
    let secondary_limit = |status: u16, retry_after: &Option<u64>| {
        let mut r = err(
            status,
            "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
        );
        if let Some(s) = retry_after {
            r.set_header("retry-after", s.to_string());
        }
        r
    };
    let resp = match f {
        FaultAction::Drop => return Some(Reply::Drop),
        FaultAction::Hang => return Some(Reply::Hang),
        FaultAction::Delay { .. }
        | FaultAction::TruncatedBody
        | FaultAction::VanishRegistration => return None,
        FaultAction::Status { status } => err(*status, "Server Error"),
        FaultAction::Unauthorized => err(401, "Bad credentials"),
        FaultAction::Forbidden { retry_after } => secondary_limit(403, retry_after),
        FaultAction::TooManyRequests { retry_after } => secondary_limit(429, retry_after),
        FaultAction::RateLimitExhausted { reset_in_secs } => {
            let mut r = err(
                403,
                "API rate limit exceeded. Check the x-ratelimit-reset header for when it resets.",
            );
            let limit = sim.lock().cfg.rate_limit;
            let reset = (now / 1000) as u64 + reset_in_secs;
            rate_headers(
                &mut r,
                super::state::Bucket {
                    limit,
                    used: limit,
                    reset,
                },
            );
            r
        }
        FaultAction::MalformedJson => base_headers(
            Response::new(200)
                .with_header("content-type", "application/json; charset=utf-8")
                .with_body(br#"{"total_count": 1, "runners": [{"id": 1, "name": "#.to_vec()),
            now,
        ),
        FaultAction::OversizedBody { bytes } => {
            let pad = bytes.saturating_sub(20);
            let mut body = b"{\"padding\":\"".to_vec();
            body.resize(body.len() + pad, b'x');
            body.extend_from_slice(b"\"}");
            base_headers(
                Response::new(200)
                    .with_header("content-type", "application/json; charset=utf-8")
                    .with_body(body),
                now,
            )
        }
        FaultAction::JitConflict => {
            let name = serde_json::from_slice::<serde_json::Value>(&req.body)
                .ok()
                .and_then(|v| v.get("name").and_then(|n| n.as_str()).map(str::to_string))
                .unwrap_or_default();
            err(
                409,
                &format!("Already exists - A runner with the name {name} already exists."),
            )
        }
        FaultAction::DeleteBusy => {
            let name = req.path.rsplit('/').next().unwrap_or_default().to_string();
            let name = name
                .parse::<u64>()
                .ok()
                .and_then(|id| sim.lock().runners.get(&id).map(|r| r.name.clone()))
                .unwrap_or(name);
            out_to_response(
                Out::validation(&format!("Runner \"{name}\" is still running a job")),
                now,
            )
        }
    };
    log.status = resp.status;
    Some(Reply::Send(resp))
}

fn serve_normally(
    sim: &Sim,
    req: &Request,
    route: Option<(&'static str, Params)>,
    now: Millis,
    log: &mut LogEntry,
) -> (Response, Option<u64>) {
    let mut st = sim.lock();
    let caller = match auth::identify(&st, req.header("authorization"), now) {
        Ok(c) => c,
        Err(e) => return (out_to_response(Out::error(401, &e.message()), now), None),
    };
    let cid = caller.id();
    log.credential = Some(cid.clone());
    let Some((template, params)) = route else {
        let (b, _) = st.charge(&cid, true, now);
        log.counted = true;
        let mut r = out_to_response(Out::error(404, "Not Found"), now);
        rate_headers(&mut r, b);
        return (r, None);
    };
    let free = template == "/rate_limit";
    if let Some(r) = secondary_limit(&mut st, &cid, template, &req.method, now) {
        return (r, None);
    }
    if let Some(accepted) = super::permissions::refusal(&st, caller, &req.method, template) {
        let (b, _) = st.charge(&cid, !free, now);
        log.counted = !free;
        let mut r = out_to_response(Out::error(403, super::permissions::REFUSED), now);
        r.set_header("x-accepted-github-permissions", accepted);
        rate_headers(&mut r, b);
        return (r, None);
    }
    if req.method == "GET" {
        let out = super::endpoints::dispatch(&mut st, caller, template, &params, req, now);
        let runner_id = out.runner_id;
        if out.status == 200 && !free {
            let tag = etag(&out.body, &cid);
            if etag_matches(req.header("if-none-match"), &tag) {
                let (b, _) = st.charge(&cid, false, now);
                let mut r = base_headers(Response::new(304), now);
                r.set_header("etag", tag);
                rate_headers(&mut r, b);
                return (r, runner_id);
            }
            let (b, ok) = st.charge(&cid, true, now);
            if !ok {
                return (exhausted(&st, caller, b, now), None);
            }
            log.counted = true;
            let mut r = out_to_response(out, now);
            r.set_header("etag", tag);
            r.set_header("cache-control", "private, max-age=60, s-maxage=60");
            rate_headers(&mut r, b);
            return (r, runner_id);
        }
        let (b, ok) = st.charge(&cid, !free, now);
        if !ok {
            return (exhausted(&st, caller, b, now), None);
        }
        log.counted = !free;
        let mut r = out_to_response(out, now);
        rate_headers(&mut r, b);
        return (r, runner_id);
    }
    let (b, ok) = st.charge(&cid, true, now);
    if !ok {
        return (exhausted(&st, caller, b, now), None);
    }
    log.counted = true;
    let out = super::endpoints::dispatch(&mut st, caller, template, &params, req, now);
    let runner_id = out.runner_id;
    drop(st);
    sim.changed.notify_all();
    let mut st = sim.lock();
    let b = st.charge(&cid, false, now).0;
    let mut r = out_to_response(out, now);
    rate_headers(&mut r, b);
    (r, runner_id)
}

/// A secondary limit the request went over, as GitHub answers it: 403, its message
/// and `retry-after` (`secondary.rs`). Nothing is charged to the primary limit.
fn secondary_limit(
    st: &mut State,
    credential: &str,
    template: &str,
    method: &str,
    now: Millis,
) -> Option<Response> {
    let limits = st.cfg.secondary;
    let in_flight = st.in_flight.now.get(credential).copied().unwrap_or(0);
    st.secondary
        .judge(&limits, credential, template, method, in_flight, now)
        .err()?;
    let mut r = out_to_response(
        Out::error(
            403,
            "You have exceeded a secondary rate limit. Please wait a few minutes before you \
             try again. If you reach out to GitHub Support for help, please include the \
             request ID.",
        ),
        now,
    );
    r.set_header("retry-after", limits.retry_after_secs.to_string());
    let (b, _) = st.charge(credential, false, now);
    rate_headers(&mut r, b);
    Some(r)
}

fn exhausted(st: &State, caller: Caller, b: super::state::Bucket, now: Millis) -> Response {
    let who = match caller {
        Caller::Installation(id) => format!("installation ID {id}"),
        _ => "user ID 1".to_string(),
    };
    let msg = format!(
        "API rate limit exceeded for {who}. If you reach out to GitHub Support for help, please include the request ID."
    );
    let mut r = out_to_response(Out::error(st.cfg.exhausted_status, &msg), now);
    rate_headers(&mut r, b);
    r
}
