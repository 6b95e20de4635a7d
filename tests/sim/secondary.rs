//! GitHub's secondary rate limits in the simulated GitHub, on by default: the 181st
//! JIT config of a minute is refused with 403 and `retry-after: 60`, counted, and the
//! route stays refused; the limits can be changed or lifted while the sim runs. The
//! GitHub client counts a refusal it meets, holds the credential for its
//! `retry-after`, and slows the route from then on.

use runner_manager::domain::{CredentialRef, Target, TargetScope};
use runner_manager::github::{Credential, GhError, GitHubClient, SharedPoints};
use runner_manager::reconcile::points::{LIMIT, MARGIN};
use runner_manager::secret::Secret;
use runner_manager::sim::secondary::{SecondaryLimits, Violation};
use serde_json::json;

use super::support::*;

const JIT: &str = "/repos/octo/app/actions/runners/generate-jitconfig";
const JIT_ROUTE: &str = "/repos/{owner}/{repo}/actions/runners/generate-jitconfig";

fn jit(h: &runner_manager::sim::SimHandle, i: u32) -> runner_manager::sim::client::ClientResponse {
    let body = json!({"name": format!("rm-{i}"), "runner_group_id": 1, "labels": ["self-hosted"]});
    call(h, "POST", JIT, PAT, Some(&body), &[])
}

#[test]
fn the_181st_jit_config_of_a_minute_is_refused_with_retry_after_and_counted() {
    let (h, _) = sim();
    for i in 0..180 {
        assert_eq!(jit(&h, i).status, 201, "JIT config {i}");
    }
    assert_eq!(h.secondary_hits().total, 0);
    let r = jit(&h, 180);
    assert_eq!(r.status, 403);
    assert_eq!(r.header("retry-after"), Some("60"));
    let body = String::from_utf8_lossy(&r.body).to_string();
    assert!(body.contains("secondary rate limit"), "{body}");
    // The primary limit is not what refused it.
    assert_ne!(r.header("x-ratelimit-remaining"), Some("0"));
    // Other routes of the credential go on; this one stays refused.
    assert_eq!(get(&h, "/repos/octo/app/actions/runners").status, 200);
    assert_eq!(jit(&h, 181).status, 403);
    let hits = h.secondary_hits();
    assert_eq!(hits.total, 2);
    assert_eq!(hits.by_credential["pat:0"], 2);
    assert_eq!(hits.by_kind[&Violation::Points], 1);
    assert_eq!(hits.by_kind[&Violation::Blocked], 1);
    assert_eq!(hits.by_endpoint[JIT_ROUTE], 2);
    // Lifted, nothing is refused; the control API says what was counted.
    h.set_secondary_limits(SecondaryLimits::off());
    assert_eq!(jit(&h, 182).status, 201);
    let seen = get(&h, "/_sim/secondary-limits");
    let v: serde_json::Value = serde_json::from_slice(&seen.body).unwrap();
    assert_eq!(v["limits"]["enabled"], false);
    assert_eq!(v["hits"]["total"], 2);
}

#[test]
fn the_control_api_sets_the_limits() {
    let (h, _) = sim();
    let set = json!({"points_per_minute": 10});
    let r = call(&h, "PUT", "/_sim/secondary-limits", "", Some(&set), &[]);
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    // Two JIT configs are 10 points; the third goes over.
    assert_eq!(jit(&h, 0).status, 201);
    assert_eq!(jit(&h, 1).status, 201);
    assert_eq!(jit(&h, 2).status, 403);
    assert_eq!(h.secondary_hits().total, 1);
}

#[test]
fn the_client_counts_a_secondary_limit_holds_for_its_retry_after_and_slows_the_route() {
    let (h, _) = sim();
    // A GitHub stricter than documented: two JIT configs a minute.
    h.set_secondary_limits(SecondaryLimits {
        points_per_minute: 10,
        ..SecondaryLimits::default()
    });
    let target = Target {
        name: "t".into(),
        scope: TargetScope::Repo {
            owner: "octo".into(),
            repo: "app".into(),
        },
        api_url: h.url().to_string(),
        credential: CredentialRef::TokenEnv {
            var: "GH_TOKEN".into(),
        },
        poll_interval_secs: 5,
        repos: vec![],
        max_in_flight: 8,
        secondary_limit: Some(900),
    };
    let points = SharedPoints::default();
    let c =
        GitHubClient::new(&target, Credential::Token(Secret::new(PAT))).with_points(points.clone());
    let labels = vec!["self-hosted".to_string()];
    for i in 0..2 {
        c.generate_jitconfig(&target.scope, &format!("rm-{i}"), &labels, 1, None)
            .expect("within the sim's limit");
    }
    let e = c
        .generate_jitconfig(&target.scope, "rm-2", &labels, 1, None)
        .unwrap_err();
    assert!(matches!(e, GhError::RateLimited { .. }), "{e:?}");
    assert_eq!(c.stats().secondary_hits, 1);
    assert_eq!(points.hits(), 1);
    // The credential is held: nothing more is sent, so GitHub counts nothing more.
    let held = c.list_runners(&target.scope).unwrap_err();
    assert!(matches!(held, GhError::RateLimited { .. }), "{held:?}");
    assert_eq!(h.secondary_hits().total, 1);
    // The route's room is gone until the retry-after, and smaller from then on.
    let now = runner_manager::timefmt::now_millis();
    assert_eq!(points.jit_room(&target.scope, now).fits, 0);
    assert!(points.book().ceiling(JIT_ROUTE) < LIMIT - MARGIN);
}
