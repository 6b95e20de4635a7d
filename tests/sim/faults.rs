//! Each fault the sim injects, seen from a client.

use std::time::{Duration, Instant};

use runner_manager::sim::{FaultAction as A, FaultRule, SimHandle, Trigger};
use serde_json::json;

use super::support::*;

fn once(h: &SimHandle, method: &str, path: &str, action: A) {
    h.add_fault(FaultRule::times(method, path, 1, action));
}

#[test]
fn status_auth_and_rate_limit_faults() {
    let (h, _) = sim();
    let p = "/repos/octo/app/actions/runners";
    h.add_fault(FaultRule::times(
        "GET",
        "/repos/*/*/actions/runners",
        2,
        A::Status { status: 503 },
    ));
    assert_eq!(get(&h, p).status, 503);
    assert_eq!(get(&h, p).status, 503);
    assert_eq!(get(&h, p).status, 200, "the burst is over");
    once(&h, "GET", p, A::Unauthorized);
    assert_eq!(get(&h, p).status, 401);
    once(
        &h,
        "GET",
        p,
        A::Forbidden {
            retry_after: Some(7),
        },
    );
    let r = get(&h, p);
    assert_eq!((r.status, r.header("retry-after")), (403, Some("7")));
    once(&h, "GET", p, A::Forbidden { retry_after: None });
    let r = get(&h, p);
    assert_eq!((r.status, r.header("retry-after")), (403, None));
    once(
        &h,
        "GET",
        p,
        A::TooManyRequests {
            retry_after: Some(3),
        },
    );
    let r = get(&h, p);
    assert_eq!((r.status, r.header("retry-after")), (429, Some("3")));
    once(&h, "GET", p, A::RateLimitExhausted { reset_in_secs: 30 });
    let r = get(&h, p);
    assert_eq!(
        (r.status, r.header("x-ratelimit-remaining")),
        (403, Some("0"))
    );
    let reset: i64 = r.header("x-ratelimit-reset").unwrap().parse().unwrap();
    assert!((now_s() + 28..=now_s() + 31).contains(&reset));
    let faulted: Vec<_> = h
        .request_log()
        .into_iter()
        .filter_map(|e| e.fault)
        .collect();
    assert_eq!(faulted.len(), 7);
}

#[test]
fn body_and_connection_faults() {
    let (h, _) = sim();
    let p = "/repos/octo/app";
    once(&h, "GET", p, A::MalformedJson);
    let r = get(&h, p);
    assert_eq!(r.status, 200);
    assert!(r.json().is_err());
    once(&h, "GET", p, A::TruncatedBody);
    let e = try_call(&h, "GET", p, PAT, None, &[]).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof);
    once(&h, "GET", p, A::OversizedBody { bytes: 3_000_000 });
    let r = get(&h, p);
    assert!(r.body.len() >= 2_999_000 && r.json().is_ok());
    once(&h, "GET", p, A::Drop);
    assert!(try_call(&h, "GET", p, PAT, None, &[]).is_err());
    once(&h, "GET", p, A::Delay { ms: 150 });
    let t = Instant::now();
    assert_eq!(get(&h, p).status, 200);
    assert!(
        t.elapsed() >= Duration::from_millis(150),
        "the delay was applied"
    );
    assert_eq!(get(&h, p).status, 200, "faults are spent");
}

#[test]
fn a_hang_holds_the_connection_until_the_client_gives_up_and_shutdown_still_joins() {
    let (mut h, _) = sim();
    once(&h, "GET", "/rate_limit", A::Hang);
    let url = h.url().to_string();
    let r = runner_manager::sim::client::request(
        &url,
        "GET",
        "/rate_limit",
        &[("authorization", "token ghp_simtesttoken")],
        None,
        Duration::from_millis(200),
    );
    let e = r.unwrap_err();
    assert!(
        matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
        "{e:?}"
    );
    h.shutdown();
}

#[test]
fn jit_conflict_delete_busy_and_vanishing_registrations() {
    let (h, _) = sim();
    let jit = "/repos/octo/app/actions/runners/generate-jitconfig";
    let body = json!({"name": "rm-7", "runner_group_id": 1, "labels": ["self-hosted"]});
    once(&h, "POST", jit, A::JitConflict);
    let r = call(&h, "POST", jit, PAT, Some(&body), &[]);
    assert_eq!(r.status, 409);
    assert_eq!(
        r.json().unwrap()["message"],
        json!("Already exists - A runner with the name rm-7 already exists.")
    );
    let r = call(&h, "POST", jit, PAT, Some(&body), &[]);
    let id = r.json().unwrap()["runner"]["id"].as_u64().unwrap();
    let del = format!("/repos/octo/app/actions/runners/{id}");
    once(&h, "DELETE", &del, A::DeleteBusy);
    let r = call(&h, "DELETE", &del, PAT, None, &[]);
    assert_eq!(r.status, 422);
    assert_eq!(
        r.json().unwrap()["message"],
        json!("Runner \"rm-7\" is still running a job")
    );
    // A registration that vanishes right after it was created.
    once(&h, "POST", jit, A::VanishRegistration);
    let body = json!({"name": "rm-8", "runner_group_id": 1, "labels": ["self-hosted"]});
    let r = call(&h, "POST", jit, PAT, Some(&body), &[]);
    assert_eq!(r.status, 201);
    let gone = r.json().unwrap()["runner"]["id"].as_u64().unwrap();
    assert_eq!(
        get(&h, &format!("/repos/octo/app/actions/runners/{gone}")).status,
        404
    );
    assert_eq!(call(&h, "DELETE", &del, PAT, None, &[]).status, 204);
}

#[test]
fn probability_faults_replay_from_the_seed() {
    let outcomes = |seed| {
        let (h, _) = sim_with(runner_manager::sim::SimConfig {
            seed,
            ..Default::default()
        });
        h.add_fault(FaultRule::new(
            None,
            "/orgs/*",
            Trigger::Probability(0.5),
            A::Status { status: 500 },
        ));
        (0..40)
            .map(|_| get(&h, "/orgs/octo").status)
            .collect::<Vec<_>>()
    };
    let a = outcomes(9);
    assert_eq!(a, outcomes(9));
    let fails = a.iter().filter(|s| **s == 500).count();
    assert!((8..=32).contains(&fails), "{fails} of 40");
}
