//! REST behaviour: ETag/304 accounting, pagination, rate-limit headers and exhaustion,
//! App JWT checks, installation scoping, keep-alive and request limits.

use std::io::{BufReader, Write};
use std::net::TcpStream;

use runner_manager::sim::SimConfig;
use runner_manager::sim::client::read_response;
use serde_json::json;

use super::support::*;

#[test]
fn a_304_costs_no_rate_limit_unit_and_a_change_makes_a_new_etag() {
    let (h, _) = sim();
    let path = "/repos/octo/app/actions/runs?status=queued";
    let first = get(&h, path);
    assert_eq!(first.status, 200);
    let tag = first.header("etag").expect("an ETag").to_string();
    let r = call(&h, "GET", path, PAT, None, &[("if-none-match", &tag)]);
    assert_eq!(r.status, 304);
    assert!(r.body.is_empty());
    assert_eq!(
        r.header("x-ratelimit-used"),
        Some("1"),
        "the 304 did not count"
    );
    let log = h.request_log();
    assert_eq!(log.iter().filter(|e| e.counted).count(), 1);
    assert!(!log[1].counted && log[1].status == 304);
    h.enqueue_job("octo/app", "build", &["self-hosted"], 10);
    let r = call(&h, "GET", path, PAT, None, &[("if-none-match", &tag)]);
    assert_eq!(r.status, 200, "a new job changes the body");
    assert_ne!(r.header("etag"), Some(tag.as_str()));
    assert_eq!(h.units_used().get("pat:0"), Some(&2));
    assert_eq!(h.count("GET", "/repos/{owner}/{repo}/actions/runs"), 3);
}

#[test]
fn pagination_follows_link_next_to_the_last_page() {
    let (h, _) = sim();
    for i in 0..5 {
        h.enqueue_job("octo/app", &format!("job {i}"), &["self-hosted"], 10);
    }
    let mut next = Some(format!(
        "{}/repos/octo/app/actions/runs?status=queued&per_page=2",
        h.url()
    ));
    let mut ids = Vec::new();
    let mut pages = 0;
    while let Some(url) = next.take() {
        let path = url.strip_prefix(h.url()).unwrap().to_string();
        let r = get(&h, &path);
        assert_eq!(r.status, 200);
        let body = r.json().unwrap();
        assert_eq!(body["total_count"], json!(5));
        ids.extend(
            body["workflow_runs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["id"].as_u64().unwrap()),
        );
        pages += 1;
        if let Some(link) = r.header("link") {
            assert!(link.contains("rel=\"last\"") || pages == 3, "{link}");
            next = link
                .split(", ")
                .find(|p| p.ends_with("rel=\"next\""))
                .map(|p| p[1..p.find('>').unwrap()].to_string());
            assert!(
                link.contains("status=queued"),
                "the filter survives paging: {link}"
            );
        }
    }
    assert_eq!(pages, 3);
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 5);
    assert!(
        get(&h, "/repos/octo/app/actions/runs?per_page=100")
            .header("link")
            .is_none(),
        "no Link on a single page"
    );
}

#[test]
fn rate_limit_headers_count_down_and_exhaustion_answers_403() {
    let (h, _) = sim_with(SimConfig {
        rate_limit: 3,
        ..SimConfig::default()
    });
    for used in 1..=3 {
        let r = get(&h, "/repos/octo/app");
        assert_eq!(r.status, 200);
        assert_eq!(r.header("x-ratelimit-limit"), Some("3"));
        assert_eq!(
            r.header("x-ratelimit-used"),
            Some(used.to_string().as_str())
        );
        assert_eq!(
            r.header("x-ratelimit-remaining"),
            Some((3 - used).to_string().as_str())
        );
        assert_eq!(r.header("x-ratelimit-resource"), Some("core"));
        let reset: i64 = r.header("x-ratelimit-reset").unwrap().parse().unwrap();
        assert!(reset > now_s() && reset <= now_s() + 3600);
        assert!(r.header("date").unwrap().ends_with(" GMT"));
    }
    let r = get(&h, "/repos/octo/app");
    assert_eq!(r.status, 403);
    assert_eq!(r.header("x-ratelimit-remaining"), Some("0"));
    assert!(
        r.json().unwrap()["message"]
            .as_str()
            .unwrap()
            .contains("API rate limit exceeded")
    );
    let free = get(&h, "/rate_limit");
    assert_eq!(free.status, 200, "/rate_limit is free");
    assert_eq!(
        free.json().unwrap()["resources"]["core"]["remaining"],
        json!(0)
    );
    let (h429, _) = sim_with(SimConfig {
        rate_limit: 0,
        exhausted_status: 429,
        ..SimConfig::default()
    });
    assert_eq!(get(&h429, "/orgs/octo").status, 429);
}

#[test]
fn credentials_are_checked_and_app_jwts_verified() {
    let (h, inst) = sim();
    assert_eq!(
        call(&h, "GET", "/repos/octo/app", "", None, &[]).status,
        401
    );
    assert_eq!(
        call(&h, "GET", "/repos/octo/app", "ghp_wrong", None, &[]).status,
        401
    );
    let path = format!("/app/installations/{inst}/access_tokens");
    assert_eq!(call(&h, "POST", &path, &jwt(), None, &[]).status, 201);
    assert_eq!(
        call(
            &h,
            "POST",
            &path,
            &jwt_with("Iv1.simtest", now_s() - 60, now_s() + 500),
            None,
            &[]
        )
        .status,
        201,
        "client id as iss"
    );
    let expired = jwt_with(&APP_ID.to_string(), now_s() - 700, now_s() - 100);
    let r = call(&h, "POST", &path, &expired, None, &[]);
    assert_eq!(r.status, 401);
    assert!(
        r.json().unwrap()["message"]
            .as_str()
            .unwrap()
            .contains("'exp'")
    );
    let future = jwt_with(&APP_ID.to_string(), now_s() + 300, now_s() + 800);
    assert_eq!(
        call(&h, "POST", &path, &future, None, &[]).status,
        401,
        "iat in the future: a fast clock"
    );
    let too_long = jwt_with(&APP_ID.to_string(), now_s() - 10, now_s() + 3600);
    assert_eq!(call(&h, "POST", &path, &too_long, None, &[]).status, 401);
    let mut forged = jwt();
    forged.truncate(forged.len() - 4);
    forged.push_str("AAAA");
    let r = call(&h, "POST", &path, &forged, None, &[]);
    assert_eq!(r.status, 401);
    assert_eq!(
        r.json().unwrap()["message"],
        json!("A JSON web token could not be decoded")
    );
    assert_eq!(
        call(
            &h,
            "POST",
            "/app/installations/1/access_tokens",
            &jwt(),
            None,
            &[]
        )
        .status,
        404
    );
    assert_eq!(
        call(&h, "GET", "/repos/octo/app", &jwt(), None, &[]).status,
        403,
        "a JWT is for App endpoints only"
    );
    assert_eq!(
        call(
            &h,
            "GET",
            "/repos/alice/tool/installation",
            &jwt(),
            None,
            &[]
        )
        .status,
        404
    );
    // An installation token sees its account only, and expires.
    let tok = installation_token(&h, inst);
    assert_eq!(
        call(&h, "GET", "/repos/octo/app", &tok, None, &[]).status,
        200
    );
    assert_eq!(
        call(&h, "GET", "/repos/alice/tool", &tok, None, &[]).status,
        404
    );
    let names: Vec<String> = call(&h, "GET", "/installation/repositories", &tok, None, &[])
        .json()
        .unwrap()["repositories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["full_name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, vec!["octo/app", "octo/site"]);
    h.with_state(|s| s.tokens.values_mut().for_each(|t| t.expires_at = 0));
    assert_eq!(
        call(&h, "GET", "/repos/octo/app", &tok, None, &[]).status,
        401
    );
    let units = h.units_used();
    assert!(
        units.keys().any(|k| k.starts_with("installation:")),
        "{units:?}"
    );
}

#[test]
fn keep_alive_serves_several_requests_on_one_connection_and_limits_hold() {
    let (h, _) = sim();
    let addr = h.url().trim_start_matches("http://").to_string();
    let mut s = TcpStream::connect(&addr).unwrap();
    let mut reader = BufReader::new(s.try_clone().unwrap());
    for _ in 0..3 {
        write!(
            s,
            "GET /repos/octo/app HTTP/1.1\r\nhost: x\r\nauthorization: token {PAT}\r\n\r\n"
        )
        .unwrap();
        let r = read_response(&mut reader).unwrap();
        assert_eq!(r.status, 200);
    }
    let mut s = TcpStream::connect(&addr).unwrap();
    write!(
        s,
        "POST /_sim/jobs HTTP/1.1\r\ncontent-length: 99999999\r\n\r\n"
    )
    .unwrap();
    assert_eq!(read_response(&mut BufReader::new(s)).unwrap().status, 413);
    let mut s = TcpStream::connect(&addr).unwrap();
    write!(s, "NOT HTTP\r\n\r\n").unwrap();
    assert_eq!(read_response(&mut BufReader::new(s)).unwrap().status, 400);
}

#[test]
fn the_control_interface_works_over_http() {
    let (h, _) = sim();
    let post = |path: &str, body: serde_json::Value| call(&h, "POST", path, "", Some(&body), &[]);
    assert_eq!(
        post(
            "/_sim/repos",
            json!({"full_name": "octo/new", "private": false})
        )
        .status,
        200
    );
    let r = post(
        "/_sim/jobs",
        json!({"repo": "octo/new", "name": "test", "labels": ["self-hosted"], "duration_ms": 5}),
    );
    assert_eq!(r.status, 200);
    let id = r.json().unwrap()["id"].as_u64().unwrap();
    assert_eq!(
        post(
            "/_sim/jobs",
            json!({"repo": "octo/none", "name": "t", "labels": []})
        )
        .status,
        404
    );
    let jobs = call(&h, "GET", "/_sim/jobs", "", None, &[]).json().unwrap();
    assert!(
        jobs.as_array()
            .unwrap()
            .iter()
            .any(|j| j["id"] == json!(id) && j["status"] == json!("queued"))
    );
    let r = post(
        "/_sim/faults",
        json!({"method": "GET", "path": "/rate_limit", "trigger": {"times": 1}, "action": {"kind": "status", "status": 502}}),
    );
    assert_eq!(r.status, 200);
    assert_eq!(get(&h, "/rate_limit").status, 502);
    assert_eq!(get(&h, "/rate_limit").status, 200);
    let log = call(&h, "GET", "/_sim/log", "", None, &[]).json().unwrap();
    assert_eq!(
        log.as_array().unwrap().len(),
        2,
        "control calls are not in the REST log"
    );
    let state = call(&h, "GET", "/_sim/state", "", None, &[])
        .json()
        .unwrap();
    assert_eq!(state["url"], json!(h.url()));
}

/// GitHub's runs in `waiting` (a deployment gate, a concurrency group): listed under
/// `status=waiting`, never `queued` or `in_progress`, their jobs `waiting`, and no
/// runner given one; an approval releases the job to `queued`, and a runner takes it.
#[test]
fn a_waiting_run_is_listed_waiting_its_job_no_runner_takes_until_approved() {
    let (h, _) = sim();
    let post = |path: &str, body: serde_json::Value| call(&h, "POST", path, "", Some(&body), &[]);
    let r = post(
        "/_sim/jobs",
        json!({"repo": "octo/app", "name": "deploy", "labels": ["self-hosted"], "waiting": true}),
    );
    assert_eq!(r.status, 200);
    let made = r.json().unwrap();
    let (run, job) = (
        made["run_id"].as_u64().unwrap(),
        made["id"].as_u64().unwrap(),
    );
    let runs_of = |status: &str| -> Vec<u64> {
        get(&h, &format!("/repos/octo/app/actions/runs?status={status}"))
            .json()
            .unwrap()["workflow_runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(runs_of("waiting"), [run]);
    assert!(runs_of("queued").is_empty() && runs_of("in_progress").is_empty());
    let jobs = get(&h, &format!("/repos/octo/app/actions/runs/{run}/jobs"));
    assert_conforms(
        "GET",
        "/repos/{owner}/{repo}/actions/runs/{run_id}/jobs",
        &jobs,
    );
    assert_eq!(jobs.json().unwrap()["jobs"][0]["status"], "waiting");
    // A runner that fits finds nothing to take.
    let scope = runner_manager::sim::Scope::Repo("octo/app".into());
    let (rid, _) = h.register_runner(scope, "rm-waiting", &["self-hosted"]);
    let cred = h.with_state(|s| s.runners[&rid].credential.clone());
    let take = || h.with_state(|s| s.runner_take_job(rid, &cred, 0).unwrap().map(|j| j.id));
    assert_eq!(take(), None);
    assert_eq!(
        post(&format!("/_sim/runs/{}/approve", run + 999), json!({})).status,
        404
    );
    let r = post(&format!("/_sim/runs/{run}/approve"), json!({}));
    assert_eq!(r.status, 200);
    assert_eq!(r.json().unwrap()["queued"], json!([job]));
    assert_eq!(runs_of("queued"), [run]);
    assert!(runs_of("waiting").is_empty());
    assert_eq!(take(), Some(job));
    // Held again (a concurrency group took its turn back) only while queued.
    assert_eq!(h.hold_run(run), 0);
}

/// A scale set is offered a waiting run's job only once it is approved: before, the
/// service has nothing to say about it (no message, no job in its statistics).
#[test]
fn a_scale_set_hears_of_a_waiting_job_only_once_it_is_approved() {
    let (h, _) = sim();
    let set = h.with_state(|s| {
        s.scalesets.add_scale_set(
            "set",
            runner_manager::sim::Scope::Repo("octo/app".into()),
            1,
            vec!["self-hosted".into()],
            false,
            0,
        )
    });
    let (run, _) = h.enqueue_waiting_job("octo/app", "deploy", &["self-hosted"], 10);
    let jobs_in = |stats: serde_json::Value| {
        stats["totalAvailableJobs"].as_u64().unwrap() + stats["totalAssignedJobs"].as_u64().unwrap()
    };
    assert!(h.scaleset_messages(set).is_empty());
    assert_eq!(jobs_in(h.scaleset_statistics(set)), 0);
    h.approve_run(run);
    assert_eq!(h.scaleset_messages(set).len(), 1);
    assert_eq!(jobs_in(h.scaleset_statistics(set)), 1);
}
