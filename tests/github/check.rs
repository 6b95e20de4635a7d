//! `target check`: one line per proven fact, a failure where the target cannot work.

use crate::common::*;
use crate::responder::*;
use runner_manager::github::{CheckOptions, check_target};

const RATE: &str =
    r#"{"resources":{},"rate":{"limit":5000,"remaining":4999,"reset":1800000600,"used":1}}"#;
const REG_TOKEN: &str = r#"{"token":"AREGTOKENSECRET","expires_at":"2027-01-15T09:00:00Z"}"#;
const RUNS: &str = r#"{"total_count":2,"workflow_runs":[{"id":7}]}"#;

fn repo_json(visibility: &str) -> String {
    format!(
        r#"{{"id":1,"name":"app","owner":{{"login":"octo"}},"private":{},"visibility":"{visibility}"}}"#,
        visibility != "public"
    )
}

#[test]
fn a_healthy_private_repository_passes_every_check() {
    let r = Responder::start(vec![
        json(RATE),
        json(RUNNERS),
        ok(201, &[], REG_TOKEN),
        status(422, "Invalid request. labels must have at least 1 item"),
        json(RUNS),
        json(&repo_json("private")),
    ]);
    let t = repo_target(&r.url());
    let (c, _) = pat_client(&r.url());
    let lines = check_target(&t, &c, &CheckOptions::default());
    let names: Vec<&str> = lines.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "credentials",
            "rate limit",
            "list runners",
            "jit endpoint",
            "queue",
            "visibility",
            "runner group"
        ]
    );
    assert!(lines.iter().all(|l| l.passed()), "{lines:#?}");
    assert!(lines[1].detail.contains("4999 of 5000"));
    assert!(
        lines[1]
            .detail
            .contains("at most about 174 a minute per credential")
            && lines[1].detail.contains("demand=scaleset"),
        "the secondary limit's ceiling on starts, and what to do beyond it: {}",
        lines[1].detail
    );
    assert!(lines[4].detail.contains("octo/app: allowed; 2 runs queued"));
    let reqs = r.requests();
    let probe: serde_json::Value = serde_json::from_slice(&reqs[3].body).unwrap();
    assert_eq!(
        probe["labels"].as_array().unwrap().len(),
        0,
        "the probe cannot create a runner"
    );
    assert_eq!(
        reqs[2].path,
        "/repos/octo/app/actions/runners/registration-token"
    );
    assert_eq!(
        reqs[4].path,
        "/repos/octo/app/actions/runs?status=queued&per_page=1"
    );
    for l in &lines {
        let shown = l.to_string();
        assert!(shown.starts_with("ok   "), "{shown}");
        assert!(
            !shown.contains("AREGTOKENSECRET") && !shown.contains(TOKEN),
            "{shown}"
        );
    }
}

#[test]
fn a_public_repository_is_refused_unless_allowed_and_bad_credentials_stop_early() {
    let script = || {
        vec![
            json(RATE),
            json(RUNNERS),
            ok(201, &[], REG_TOKEN),
            status(422, "bad"),
            json(RUNS),
            json(&repo_json("public")),
        ]
    };
    let r = Responder::start(script());
    let t = repo_target(&r.url());
    let (c, _) = pat_client(&r.url());
    let lines = check_target(&t, &c, &CheckOptions::default());
    let vis = lines.iter().find(|l| l.name == "visibility").unwrap();
    assert!(!vis.passed());
    assert!(vis.to_string().starts_with("FAIL visibility"), "{vis}");
    assert!(vis.detail.contains("allow_public=true"));

    let r = Responder::start(script());
    let (c, _) = pat_client(&r.url());
    let opts = CheckOptions {
        allow_public: true,
        runner_group: None,
    };
    let lines = check_target(&repo_target(&r.url()), &c, &opts);
    assert!(lines.iter().all(|l| l.passed()), "{lines:#?}");

    let r = Responder::start(vec![status(401, "Bad credentials")]);
    let (c, _) = pat_client(&r.url());
    let lines = check_target(&repo_target(&r.url()), &c, &CheckOptions::default());
    assert_eq!(lines.len(), 1);
    assert!(!lines[0].passed() && lines[0].detail.contains("401"));
}

#[test]
fn an_org_target_resolves_its_group_and_reports_a_missing_jit_endpoint() {
    let r = Responder::start(vec![
        json(RATE),
        json(RUNNERS),
        ok(201, &[], REG_TOKEN),
        status(404, "Not Found"),
        json(r#"[{"id":1,"name":"a","owner":{"login":"acme"},"private":true}]"#),
        json(RUNS),
        json(r#"[{"id":1,"name":"a","owner":{"login":"acme"},"private":true}]"#),
        json(r#"{"total_count":1,"runner_groups":[{"id":1,"name":"Default"}]}"#),
    ]);
    let t = org_target(&r.url());
    let (c, _) = client_for(
        &t,
        runner_manager::github::Credential::Token(runner_manager::secret::Secret::new(TOKEN)),
    );
    let opts = CheckOptions {
        allow_public: false,
        runner_group: Some("gpu".into()),
    };
    let lines = check_target(&t, &c, &opts);
    let by = |n: &str| lines.iter().find(|l| l.name == n).unwrap().clone();
    assert!(!by("jit endpoint").passed());
    assert!(by("jit endpoint").detail.contains("3.10"));
    assert!(by("queue").detail.contains("acme/a: allowed"), "{lines:#?}");
    assert!(by("visibility").passed());
    assert!(!by("runner group").passed());
    assert!(
        by("runner group")
            .detail
            .contains("no runner group named gpu")
    );
}
