//! Operations: pagination, ETags, queued jobs, JIT config (checked against GitHub's
//! OpenAPI description), deleting runners, groups, visibility.

use crate::common::*;
use crate::responder::*;
use runner_manager::domain::TargetScope;
use runner_manager::github::{Deleted, GhError, InFlight, ReadCaps};
use runner_manager::timefmt::parse_rfc3339;

fn repo() -> TargetScope {
    TargetScope::Repo {
        owner: "octo".into(),
        repo: "app".into(),
    }
}

fn org() -> TargetScope {
    TargetScope::Org { org: "acme".into() }
}

#[test]
fn list_runners_follows_many_pages() {
    let r = Responder::start(vec![]);
    let pages = 25;
    for p in 1..=pages {
        let runners: Vec<String> = (0..100)
            .map(|i| runner_json(p * 1000 + i, &format!("r-{p}-{i}")))
            .collect();
        let body = format!(
            r#"{{"total_count":2500,"runners":[{}]}}"#,
            runners.join(",")
        );
        let next = format!(
            "<{}/repositories/1/actions/runners?per_page=100&page={}>; rel=\"next\", <{}/x?page=25>; rel=\"last\"",
            r.url(),
            p + 1,
            r.url()
        );
        if p < pages {
            r.push(ok(200, &[("link", &next)], &body));
        } else {
            r.push(ok(200, &[], &body));
        }
    }
    let (c, _) = pat_client(&r.url());
    let all = c.list_runners(&repo()).unwrap();
    assert_eq!(all.len(), 2500);
    assert_eq!(all[0].name, "r-1-0");
    assert_eq!(all[0].labels, vec!["self-hosted", "gpu"]);
    assert!(all[0].online && !all[0].busy);
    assert_eq!(all[2499].id, 25_099);
    let reqs = r.requests();
    assert_eq!(reqs.len(), 25);
    assert_eq!(
        reqs[1].path,
        "/repositories/1/actions/runners?per_page=100&page=2"
    );
}

#[test]
fn pagination_stops_at_the_page_bound_and_stays_on_our_host() {
    let r = Responder::start(vec![]);
    for p in 0..10 {
        let next = format!("<{}/loop?page={}>; rel=\"next\"", r.url(), p + 2);
        r.push(ok(
            200,
            &[("link", &next)],
            &format!(r#"{{"total_count":1,"runners":[{}]}}"#, runner_json(p, "x")),
        ));
    }
    let mut cfg = test_config();
    cfg.max_pages = 4;
    let (c, _) = client_with(
        &repo_target(&r.url()),
        runner_manager::github::Credential::Token(runner_manager::secret::Secret::new(TOKEN)),
        cfg,
    );
    assert_eq!(c.list_runners(&repo()).unwrap().len(), 4);
    assert_eq!(r.count(), 4);

    let r = Responder::start(vec![ok(
        200,
        &[("link", "<https://evil.example/steal?page=2>; rel=\"next\"")],
        r#"{"total_count":1,"runners":[]}"#,
    )]);
    let (c, _) = pat_client(&r.url());
    assert!(matches!(
        c.list_runners(&repo()),
        Err(GhError::Malformed { .. })
    ));
    assert_eq!(r.count(), 1, "never followed to another host");
}

const RUNS_Q: &str = r#"{"total_count":1,"workflow_runs":[{"id":11,"status":"queued"}]}"#;
const RUNS_P: &str = r#"{"total_count":2,"workflow_runs":[{"id":12,"status":"in_progress"},{"id":11,"status":"in_progress"}]}"#;

fn job(id: i64, run: i64, status: &str, labels: &str) -> String {
    format!(
        r#"{{"id":{id},"run_id":{run},"status":"{status}","conclusion":null,"name":"build {id}","labels":[{labels}],"created_at":"2026-11-30T10:00:0{}Z","runner_id":null,"runner_name":null}}"#,
        id % 10
    )
}

#[test]
fn queued_jobs_reads_runs_then_jobs_and_keeps_queued_ones() {
    let jobs11 = format!(
        r#"{{"total_count":2,"jobs":[{},{}]}}"#,
        job(101, 11, "queued", r#""self-hosted","linux""#),
        job(102, 11, "completed", r#""self-hosted""#)
    );
    let jobs12 = format!(
        r#"{{"total_count":2,"jobs":[{},{}]}}"#,
        job(103, 12, "in_progress", r#""x""#),
        job(104, 12, "queued", r#""self-hosted","gpu""#)
    );
    let r = Responder::start(vec![
        json(RUNS_Q),
        json(RUNS_P),
        json(&jobs11),
        json(&jobs12),
    ]);
    // The responder answers in arrival order: at a limit of 1 the runs' jobs are read
    // one at a time, so the script lines up (the fan-out is tested on the sim).
    let (c, _) = pat_client(&r.url());
    let c = c.with_in_flight(InFlight::new(1));
    let jobs = c.queued_jobs("octo", "app").unwrap();
    assert_eq!(jobs.len(), 2);
    assert_eq!(jobs[0].id, 101);
    assert_eq!(jobs[0].run_id, 11);
    assert_eq!(jobs[0].repo, "octo/app");
    assert_eq!(jobs[0].labels, vec!["self-hosted", "linux"]);
    assert_eq!(
        jobs[0].created_at,
        parse_rfc3339("2026-11-30T10:00:01Z").unwrap()
    );
    assert_eq!(jobs[1].id, 104);
    let paths: Vec<String> = r.requests().into_iter().map(|q| q.path).collect();
    assert_eq!(
        paths,
        [
            "/repos/octo/app/actions/runs?status=queued&per_page=100",
            "/repos/octo/app/actions/runs?status=in_progress&per_page=100",
            "/repos/octo/app/actions/runs/11/jobs?per_page=100",
            "/repos/octo/app/actions/runs/12/jobs?per_page=100",
        ],
        "run 11 appears twice but its jobs are read once"
    );
}

#[test]
fn an_unchanged_poll_costs_only_304s_which_are_not_counted() {
    let empty_runs = r#"{"total_count":0,"workflow_runs":[]}"#;
    let jobs11 = format!(
        r#"{{"total_count":1,"jobs":[{}]}}"#,
        job(101, 11, "queued", r#""self-hosted""#)
    );
    let r = Responder::start(vec![
        ok(200, &[("etag", "\"q1\"")], RUNS_Q),
        ok(200, &[("etag", "W/\"p1\"")], empty_runs),
        ok(200, &[("etag", "\"j1\"")], &jobs11),
        ok(304, &[("etag", "\"q1\"")], ""),
        ok(304, &[("etag", "W/\"p1\"")], ""),
        ok(304, &[("etag", "\"j1\"")], ""),
    ]);
    let (c, _) = pat_client(&r.url());
    let repos = [("octo", "app")];
    let read = c.read_queue(&repos, ReadCaps::ALL, &|_, _| {}).unwrap();
    assert_eq!(
        read.new_runs, 1,
        "the run's jobs were read for the first time"
    );
    let first = read.jobs;
    let before = c.stats();
    let again = c.read_queue(&repos, ReadCaps::ALL, &|_, _| {}).unwrap();
    assert_eq!(again.new_runs, 0, "the run was read before: a 304");
    let second = again.jobs;
    assert_eq!(first, second);
    assert_eq!(first.len(), 1);
    let after = c.stats();
    assert_eq!(after.requests - before.requests, 3);
    assert_eq!(after.not_modified - before.not_modified, 3);
    assert_eq!(after.get_units, before.get_units, "a 304 costs no unit");
    assert_eq!(
        before.get_units, 3,
        "the first poll's three GETs cost one each"
    );
    assert_eq!(
        (after.requests - after.not_modified) - (before.requests - before.not_modified),
        0,
        "the second poll spent no rate-limit unit"
    );
    let reqs = r.requests();
    assert_eq!(reqs[0].header("if-none-match"), None);
    assert_eq!(reqs[3].header("if-none-match"), Some("\"q1\""));
    assert_eq!(reqs[4].header("if-none-match"), Some("W/\"p1\""));
    assert_eq!(reqs[5].header("if-none-match"), Some("\"j1\""));
}

/// A hand check of a JSON value against GitHub's request schema: required fields,
/// property types, array bounds and item types, and no property the schema lacks.
fn check_against_schema(body: &serde_json::Value, schema: &serde_json::Value) {
    let props = schema["properties"].as_object().unwrap();
    for req in schema["required"].as_array().unwrap() {
        assert!(
            body.get(req.as_str().unwrap()).is_some(),
            "missing required {req}"
        );
    }
    for (k, v) in body.as_object().unwrap() {
        let p = props
            .get(k)
            .unwrap_or_else(|| panic!("{k} is not in GitHub's schema"));
        let ok = match p["type"].as_str().unwrap() {
            "string" => v.is_string(),
            "integer" => v.is_i64() || v.is_u64(),
            "number" => v.is_number(),
            "boolean" => v.is_boolean(),
            "array" => {
                let a = v.as_array().unwrap();
                let min = p["minItems"].as_u64().unwrap_or(0) as usize;
                let max = p["maxItems"].as_u64().unwrap_or(u64::MAX) as usize;
                assert!(a.len() >= min && a.len() <= max, "{k}: {} items", a.len());
                let item = p["items"]["type"].as_str().unwrap();
                assert_eq!(item, "string");
                a.iter().all(|x| x.is_string())
            }
            t => panic!("unhandled type {t}"),
        };
        assert!(ok, "{k} = {v} does not have type {}", p["type"]);
    }
}

#[test]
fn generate_jitconfig_sends_a_body_github_accepts_and_returns_a_secret() {
    let spec: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("github-actions-runners.openapi.json")).unwrap(),
    )
    .unwrap();
    let answer = format!(
        r#"{{"runner":{},"encoded_jit_config":"SECRETJITCONFIG=="}}"#,
        runner_json(77, "rm-abc-1")
    );
    let r = Responder::start(vec![ok(201, &[], &answer), ok(201, &[], &answer)]);
    let (c, _) = pat_client(&r.url());
    let labels = vec!["self-hosted".to_string(), "gpu".to_string()];
    let (runner, jit) = c
        .generate_jitconfig(&repo(), "rm-abc-1", &labels, 1, Some("_work"))
        .unwrap();
    assert_eq!(runner.id, 77);
    assert_eq!(runner.name, "rm-abc-1");
    assert_eq!(jit.expose(), "SECRETJITCONFIG==");
    assert_eq!(format!("{jit:?}"), "***");
    c.generate_jitconfig(&org(), "rm-abc-2", &labels, 3, None)
        .unwrap();
    let reqs = r.requests();
    for (req, path) in reqs.iter().zip([
        "/repos/{owner}/{repo}/actions/runners/generate-jitconfig",
        "/orgs/{org}/actions/runners/generate-jitconfig",
    ]) {
        assert_eq!(req.method, "POST");
        assert_eq!(req.header("content-type"), Some("application/json"));
        let schema =
            &spec["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"];
        let body: serde_json::Value = serde_json::from_slice(&req.body).unwrap();
        check_against_schema(&body, schema);
    }
    assert_eq!(
        reqs[0].path,
        "/repos/octo/app/actions/runners/generate-jitconfig"
    );
    assert_eq!(
        reqs[1].path,
        "/orgs/acme/actions/runners/generate-jitconfig"
    );
    let b1: serde_json::Value = serde_json::from_slice(&reqs[1].body).unwrap();
    assert_eq!(b1["runner_group_id"], 3);
    assert!(b1.get("work_folder").is_none());
}

#[test]
fn a_jit_name_collision_is_a_conflict_and_a_jit_post_is_never_repeated() {
    let r = Responder::start(vec![
        status(
            409,
            "Already exists - A runner with the name rm-abc-1 already exists.",
        ),
        status(502, "bad gateway"),
        json(r#"{"runner":{}}"#),
    ]);
    let (c, _) = pat_client(&r.url());
    let labels = vec!["self-hosted".to_string()];
    match c
        .generate_jitconfig(&repo(), "rm-abc-1", &labels, 1, None)
        .unwrap_err()
    {
        GhError::Conflict { message } => assert!(message.contains("already exists"), "{message}"),
        e => panic!("{e:?}"),
    }
    assert_eq!(
        c.generate_jitconfig(&repo(), "rm-abc-1", &labels, 1, None)
            .unwrap_err(),
        GhError::Server { status: 502 }
    );
    assert_eq!(
        r.count(),
        2,
        "the 502 was not retried: GitHub may have completed it"
    );
}

#[test]
fn delete_runner_outcomes() {
    let r = Responder::start(vec![
        ok(204, &[], ""),
        status(404, "Not Found"),
        status(422, "Runner \"rm-1\" is still running a job"),
        status(500, "x"),
        status(500, "x"),
        status(500, "x"),
    ]);
    let (c, _) = pat_client(&r.url());
    assert_eq!(c.delete_runner(&repo(), 5).unwrap(), Deleted::Removed);
    assert_eq!(c.delete_runner(&repo(), 5).unwrap(), Deleted::AlreadyGone);
    assert_eq!(
        c.delete_runner(&org(), 6).unwrap(),
        Deleted::Busy {
            message: "Runner \"rm-1\" is still running a job".into()
        }
    );
    assert_eq!(
        c.delete_runner(&repo(), 5).unwrap_err(),
        GhError::Server { status: 500 }
    );
    let reqs = r.requests();
    assert_eq!(reqs[0].method, "DELETE");
    assert_eq!(reqs[0].path, "/repos/octo/app/actions/runners/5");
    assert_eq!(reqs[2].path, "/orgs/acme/actions/runners/6");
}

#[test]
fn runner_by_name_groups_visibility_and_repositories() {
    let runners = format!(
        r#"{{"total_count":2,"runners":[{},{}]}}"#,
        runner_json(1, "rm-a-10"),
        runner_json(2, "rm-a-1")
    );
    let r = Responder::start(vec![
        json(&runners),
        json(r#"{"total_count":0,"runners":[]}"#),
        json(
            r#"{"total_count":2,"runner_groups":[{"id":1,"name":"Default","default":true},{"id":4,"name":"GPU Pool"}]}"#,
        ),
        json(r#"{"total_count":1,"runner_groups":[{"id":1,"name":"Default"}]}"#),
        json(
            r#"{"id":1,"name":"app","owner":{"login":"octo"},"private":false,"visibility":"public"}"#,
        ),
        json(
            r#"{"id":1,"name":"app","owner":{"login":"octo"},"private":true,"visibility":"internal"}"#,
        ),
        json(
            r#"[{"id":1,"name":"a","owner":{"login":"acme"},"private":true},{"id":2,"name":"b","owner":{"login":"acme"},"private":false,"archived":true}]"#,
        ),
        json(
            r#"{"total_count":1,"repositories":[{"id":3,"name":"c","owner":{"login":"acme"},"private":true,"visibility":"private"}]}"#,
        ),
    ]);
    let (c, _) = pat_client(&r.url());
    assert_eq!(c.runner_by_name(&repo(), "rm-a-1").unwrap().unwrap().id, 2);
    assert_eq!(c.runner_by_name(&org(), "rm-a-1").unwrap(), None);
    assert_eq!(
        c.runner_group_id_by_name("acme", "gpu pool").unwrap(),
        Some(4)
    );
    assert_eq!(c.runner_group_id_by_name("acme", "nope").unwrap(), None);
    assert!(c.repository_is_public("octo", "app").unwrap());
    assert!(
        !c.repository_is_public("octo", "app").unwrap(),
        "internal is not public"
    );
    let repos = c.org_repositories("acme").unwrap();
    assert_eq!(repos.len(), 2);
    assert!(!repos[0].public && repos[1].public && repos[1].archived);
    let inst = c.installation_repositories().unwrap();
    assert_eq!(
        (
            inst[0].owner.as_str(),
            inst[0].name.as_str(),
            inst[0].public
        ),
        ("acme", "c", false)
    );
    let paths: Vec<String> = r.requests().into_iter().map(|q| q.path).collect();
    assert_eq!(
        paths[0],
        "/repos/octo/app/actions/runners?per_page=100&name=rm-a-1"
    );
    assert_eq!(paths[2], "/orgs/acme/actions/runner-groups?per_page=100");
    assert_eq!(paths[6], "/orgs/acme/repos?per_page=100");
    assert_eq!(paths[7], "/installation/repositories?per_page=100");
}

/// The lost-job search (`daemon::workers::rerun`) reads one page of a status's newest runs, with
/// the times it tells them apart by.
#[test]
fn runs_now_reads_a_page_of_runs_with_their_times() {
    let r = Responder::start(vec![]);
    r.push(ok(
        200,
        &[],
        r#"{"total_count":2,"workflow_runs":[
            {"id":4,"created_at":"2026-12-05T10:00:09Z","updated_at":"2026-12-05T10:01:00Z"},
            {"id":2}]}"#,
    ));
    let (c, _) = pat_client(&r.url());
    let runs = c.runs_now("octo", "app", "completed").unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(
        (runs[0].id, runs[0].created_at, runs[0].updated_at),
        (
            4,
            parse_rfc3339("2026-12-05T10:00:09Z"),
            parse_rfc3339("2026-12-05T10:01:00Z")
        )
    );
    assert_eq!(
        (runs[1].id, runs[1].created_at, runs[1].updated_at),
        (2, None, None)
    );
    assert_eq!(
        r.requests()[0].path,
        "/repos/octo/app/actions/runs?per_page=100&status=completed"
    );
}
