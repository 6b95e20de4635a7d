//! Every response the sim sends on its REST endpoints, held against GitHub's own
//! OpenAPI description; and the guard that fails when the two drift apart.

use std::collections::BTreeSet;

use runner_manager::sim::github::{ROUTES, match_route};
use serde_json::json;

use super::support::*;

#[test]
fn every_route_the_sim_serves_is_in_githubs_description() {
    for (method, template) in ROUTES {
        let op = &spec()["paths"][*template][method.to_ascii_lowercase()];
        assert!(
            op.is_object(),
            "the sim serves {method} {template}, which GitHub's description does not have"
        );
    }
    // And routing resolves each template to itself.
    for (method, template) in ROUTES {
        let concrete = template
            .replace("{owner}", "o")
            .replace("{repo}", "r")
            .replace("{org}", "o")
            .replace("{runner_id}", "5")
            .replace("{run_id}", "6")
            .replace("{job_id}", "7")
            .replace("{installation_id}", "8");
        assert_eq!(
            match_route(method, &concrete).map(|(t, _)| t),
            Some(*template),
            "{method} {concrete}"
        );
    }
}

#[test]
fn every_response_conforms_to_its_schema() {
    let (h, inst) = sim();
    h.add_runner_group("octo", "gpu");
    let job = h.enqueue_job("octo/app", "build", &["self-hosted", "linux"], 1000);
    let run = h.job(job).unwrap().run_id;
    let itok = installation_token(&h, inst);
    let jwt = jwt();
    let mut seen = BTreeSet::new();
    let mut check =
        |method: &str, path: &str, token: &str, body: Option<serde_json::Value>, want: u16| {
            let r = call(&h, method, path, token, body.as_ref(), &[]);
            assert_eq!(
                r.status,
                want,
                "{method} {path}: {}",
                String::from_utf8_lossy(&r.body)
            );
            let (template, _) =
                match_route(method, path.split('?').next().unwrap()).expect("a sim route");
            assert_conforms(method, template, &r);
            seen.insert((method.to_string(), template.to_string()));
            r
        };
    check("GET", "/repos/octo/app", PAT, None, 200);
    check("GET", "/repos/octo/site", &itok, None, 200);
    check("GET", "/orgs/octo", PAT, None, 200);
    check("GET", "/orgs/octo/repos?per_page=1", PAT, None, 200);
    check(
        "GET",
        "/repos/octo/app/actions/runs?status=queued",
        PAT,
        None,
        200,
    );
    check(
        "GET",
        &format!("/repos/octo/app/actions/runs/{run}/jobs"),
        PAT,
        None,
        200,
    );
    check(
        "GET",
        &format!("/repos/octo/app/actions/jobs/{job}"),
        PAT,
        None,
        200,
    );
    // Re-running a job: refused while its run still runs, then queued again.
    let rerun = format!("/repos/octo/app/actions/jobs/{job}/rerun");
    check("POST", &rerun, PAT, None, 403);
    h.with_state(|s| {
        let j = s.jobs.get_mut(&job).unwrap();
        j.status = runner_manager::sim::JobStatus::Completed;
        j.conclusion = Some("failure".into());
    });
    check("POST", &rerun, PAT, None, 201);
    for scope in ["/repos/octo/app", "/orgs/octo"] {
        let body = json!({"name": "rm-1", "runner_group_id": 1, "labels": ["self-hosted", "linux"], "work_folder": "_work"});
        let r = check(
            "POST",
            &format!("{scope}/actions/runners/generate-jitconfig"),
            PAT,
            Some(body.clone()),
            201,
        );
        let id = r.json().unwrap()["runner"]["id"].as_u64().unwrap();
        check(
            "POST",
            &format!("{scope}/actions/runners/generate-jitconfig"),
            PAT,
            Some(body),
            409,
        );
        check(
            "POST",
            &format!("{scope}/actions/runners/generate-jitconfig"),
            PAT,
            Some(json!({"name": "x"})),
            422,
        );
        check(
            "POST",
            &format!("{scope}/actions/runners/generate-jitconfig"),
            PAT,
            Some(json!({"name": "x", "runner_group_id": 1, "labels": []})),
            422,
        );
        check("GET", &format!("{scope}/actions/runners"), &itok, None, 200);
        check(
            "GET",
            &format!("{scope}/actions/runners?name=rm-1"),
            PAT,
            None,
            200,
        );
        check(
            "GET",
            &format!("{scope}/actions/runners/{id}"),
            PAT,
            None,
            200,
        );
        check(
            "POST",
            &format!("{scope}/actions/runners/registration-token"),
            PAT,
            None,
            201,
        );
        check(
            "POST",
            &format!("{scope}/actions/runners/remove-token"),
            PAT,
            None,
            201,
        );
        // A busy runner refuses deletion with 422.
        h.with_state(|s| s.runners.get_mut(&id).unwrap().busy = true);
        check(
            "DELETE",
            &format!("{scope}/actions/runners/{id}"),
            PAT,
            None,
            422,
        );
        h.with_state(|s| s.runners.get_mut(&id).unwrap().busy = false);
        check(
            "DELETE",
            &format!("{scope}/actions/runners/{id}"),
            PAT,
            None,
            204,
        );
    }
    check(
        "POST",
        "/orgs/octo/actions/runners/generate-jitconfig",
        PAT,
        Some(json!({"name": "g", "runner_group_id": 99, "labels": ["a"]})),
        404,
    );
    check("GET", "/orgs/octo/actions/runner-groups", &itok, None, 200);
    check("GET", "/repos/octo/app/installation", &jwt, None, 200);
    check("GET", "/orgs/octo/installation", &jwt, None, 200);
    check(
        "POST",
        &format!("/app/installations/{inst}/access_tokens"),
        &jwt,
        None,
        201,
    );
    check("GET", "/installation/repositories", &itok, None, 200);
    check("GET", "/rate_limit", PAT, None, 200);
    check(
        "GET",
        "/repos/octo/app/actions/runners/downloads",
        PAT,
        None,
        200,
    );
    check(
        "GET",
        "/orgs/octo/actions/runners/downloads",
        &itok,
        None,
        200,
    );
    let served: BTreeSet<(String, String)> = ROUTES
        .iter()
        .map(|(m, t)| (m.to_string(), t.to_string()))
        .collect();
    let missed: Vec<_> = served.difference(&seen).collect();
    assert!(
        missed.is_empty(),
        "routes the fidelity test did not check: {missed:?}"
    );
}

#[test]
fn a_repository_says_whether_it_is_public() {
    let (h, _) = sim();
    assert_eq!(
        get(&h, "/repos/octo/site").json().unwrap()["private"],
        json!(false)
    );
    assert_eq!(
        get(&h, "/repos/octo/app").json().unwrap()["visibility"],
        json!("private")
    );
    assert_eq!(get(&h, "/repos/octo/nope").status, 404);
}

#[test]
fn the_workflow_job_webhook_examples_parse() {
    #[derive(serde::Deserialize)]
    struct Payload {
        action: String,
        workflow_job: WorkflowJob,
        repository: Repo,
    }
    #[derive(serde::Deserialize)]
    struct WorkflowJob {
        id: u64,
        run_id: u64,
        status: String,
        labels: Vec<String>,
        runner_id: Option<u64>,
        runner_name: Option<String>,
        name: String,
    }
    #[derive(serde::Deserialize)]
    struct Repo {
        full_name: String,
        private: bool,
    }
    let examples: serde_json::Value =
        serde_json::from_str(&fixture("github/workflow_job.webhook-examples.json")).unwrap();
    let list: Vec<serde_json::Value> = match examples {
        serde_json::Value::Array(a) => a,
        serde_json::Value::Object(o) => o
            .get("examples")
            .and_then(|e| e.as_array().cloned())
            .unwrap_or_else(|| o.values().cloned().collect()),
        _ => panic!("unexpected shape"),
    };
    let mut actions = BTreeSet::new();
    for ex in &list {
        let p: Payload = serde_json::from_value(ex.clone()).expect("a workflow_job payload");
        assert!(
            p.workflow_job.id > 0 && p.workflow_job.run_id > 0 && !p.workflow_job.name.is_empty()
        );
        assert!(!p.repository.full_name.is_empty());
        let _ = (
            p.repository.private,
            &p.workflow_job.labels,
            p.workflow_job.runner_id,
            &p.workflow_job.runner_name,
        );
        // A `queued` event may carry status `waiting` (an environment gate), so check the
        // status against the job enum rather than against the action.
        let statuses = [
            "queued",
            "in_progress",
            "completed",
            "waiting",
            "requested",
            "pending",
        ];
        assert!(
            statuses.contains(&p.workflow_job.status.as_str()),
            "{}",
            p.workflow_job.status
        );
        actions.insert(p.action);
    }
    assert!(
        actions.contains("queued") && actions.contains("completed"),
        "{actions:?}"
    );
}
