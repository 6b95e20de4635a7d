//! Transport and status faults: retries within the bound, and the typed error left.

use crate::common::*;
use crate::responder::*;
use runner_manager::github::{ErrorClass, GhError};

#[test]
fn sends_the_github_headers_under_a_ghes_base_path() {
    let r = Responder::start(vec![json(RUNNERS)]);
    let (c, _) = pat_client(&format!("{}/api/v3/", r.url()));
    c.list_runners(&scope()).unwrap();
    let req = &r.requests()[0];
    assert_eq!(req.method, "GET");
    assert_eq!(
        req.path,
        "/api/v3/repos/octo/app/actions/runners?per_page=100"
    );
    assert_eq!(req.header("accept"), Some("application/vnd.github+json"));
    assert_eq!(req.header("x-github-api-version"), Some("2022-11-28"));
    assert!(
        req.header("user-agent")
            .unwrap()
            .starts_with("runner-manager/")
    );
    assert_eq!(
        req.header("authorization"),
        Some(format!("Bearer {TOKEN}").as_str())
    );
}

#[test]
fn a_5xx_burst_is_retried_within_the_bound() {
    let r = Responder::start(vec![
        status(502, "bad gateway"),
        status(503, "unavailable"),
        json(RUNNERS),
    ]);
    let (c, _) = pat_client(&r.url());
    assert_eq!(c.list_runners(&scope()).unwrap(), vec![]);
    assert_eq!(r.count(), 3);
    assert_eq!(c.stats().retries, 2);
}

#[test]
fn a_longer_5xx_burst_gives_a_transient_server_error() {
    let r = Responder::start(vec![
        status(500, "x"),
        status(500, "x"),
        status(500, "x"),
        json(RUNNERS),
    ]);
    let (c, _) = pat_client(&r.url());
    let e = c.list_runners(&scope()).unwrap_err();
    assert_eq!(e, GhError::Server { status: 500 });
    assert_eq!(e.class(), ErrorClass::Transient);
    assert_eq!(r.count(), 3, "three tries, no more");
}

#[test]
fn a_connection_closed_mid_body_is_retried() {
    let r = Responder::start(vec![truncated(200, r#"{"total_count":0,"#), json(RUNNERS)]);
    let (c, _) = pat_client(&r.url());
    assert_eq!(c.list_runners(&scope()).unwrap(), vec![]);
    assert_eq!(r.count(), 2);
}

#[test]
fn connections_dropped_without_an_answer_end_as_transport_errors() {
    let r = Responder::start(vec![Action::Close, Action::Close, Action::Close]);
    let (c, _) = pat_client(&r.url());
    let e = c.list_runners(&scope()).unwrap_err();
    assert!(matches!(e, GhError::Transport { .. }), "{e:?}");
    assert!(e.is_transient());
    assert_eq!(r.count(), 3);
}

#[test]
fn a_hang_past_the_read_timeout_is_a_retried_transport_error() {
    let r = Responder::start(vec![Action::Hang, json(RUNNERS)]);
    let (c, _) = pat_client(&r.url());
    assert_eq!(c.list_runners(&scope()).unwrap(), vec![]);
    assert_eq!(r.count(), 2);
    let r = Responder::start(vec![Action::Hang, Action::Hang, Action::Hang]);
    let (c, _) = pat_client(&r.url());
    match c.list_runners(&scope()).unwrap_err() {
        GhError::Transport { detail } => assert!(detail.contains("timed out"), "{detail}"),
        e => panic!("{e:?}"),
    }
}

#[test]
fn unauthorized_is_deterministic_and_not_retried() {
    let r = Responder::start(vec![status(401, "Bad credentials")]);
    let (c, _) = pat_client(&r.url());
    let e = c.list_runners(&scope()).unwrap_err();
    assert_eq!(e, GhError::Unauthorized { clock_hint: false });
    assert_eq!(e.class(), ErrorClass::Deterministic);
    assert_eq!(r.count(), 1);
}

#[test]
fn forbidden_without_rate_limit_signs_is_a_permission_error() {
    let r = Responder::start(vec![status(
        403,
        "Resource not accessible by personal access token",
    )]);
    let (c, _) = pat_client(&r.url());
    let e = c.list_runners(&scope()).unwrap_err();
    assert_eq!(
        e,
        GhError::Forbidden {
            message: "Resource not accessible by personal access token".into()
        }
    );
    assert!(e.to_string().contains("permission"));
    assert_eq!(e.class(), ErrorClass::Deterministic);
}

#[test]
fn not_found_gone_and_unexpected() {
    let r = Responder::start(vec![
        status(404, "Not Found"),
        status(410, "gone"),
        status(418, "teapot"),
    ]);
    let (c, _) = pat_client(&r.url());
    assert_eq!(c.list_runners(&scope()).unwrap_err(), GhError::NotFound);
    assert_eq!(c.list_runners(&scope()).unwrap_err(), GhError::Gone);
    assert_eq!(
        c.list_runners(&scope()).unwrap_err(),
        GhError::Unexpected { status: 418 }
    );
}

#[test]
fn malformed_and_truncated_json_are_malformed_without_quoting_the_body() {
    let r = Responder::start(vec![
        json(r#"{"total_count":1,"runners":[{"id":"SECRETISH","name":"x"}]}"#),
        json(r#"{"total_count":1,"runners":[{"id":1,"#),
        json("<html>oops</html>"),
    ]);
    let (c, _) = pat_client(&r.url());
    for want in ["unexpected", "truncated", "invalid"] {
        match c.list_runners(&scope()).unwrap_err() {
            GhError::Malformed { detail } => {
                assert!(detail.starts_with(want), "{detail}");
                assert!(!detail.contains("SECRETISH"), "{detail}");
            }
            e => panic!("{e:?}"),
        }
    }
}

#[test]
fn an_oversized_body_is_refused() {
    let big = format!(
        r#"{{"total_count":0,"runners":[],"pad":"{}"}}"#,
        "x".repeat(70 * 1024)
    );
    let r = Responder::start(vec![json(&big)]);
    let (c, _) = pat_client(&r.url());
    let e = c.list_runners(&scope()).unwrap_err();
    assert_eq!(e, GhError::TooLarge { limit: 64 * 1024 });
    assert_eq!(r.count(), 1, "an oversized answer is not asked for again");
}

#[test]
fn shutdown_interrupts_the_backoff_wait() {
    let r = Responder::start(vec![status(500, "x"), json(RUNNERS)]);
    let mut cfg = test_config();
    cfg.retry.base = std::time::Duration::from_secs(3600);
    cfg.retry.cap = std::time::Duration::from_secs(3600);
    let (c, _) = client_with(
        &repo_target(&r.url()),
        runner_manager::github::Credential::Token(runner_manager::secret::Secret::new(TOKEN)),
        cfg,
    );
    let (tx, rx) = crossbeam_channel::bounded(1);
    let c = c.with_shutdown(rx);
    tx.send(()).unwrap();
    assert_eq!(c.list_runners(&scope()).unwrap_err(), GhError::Interrupted);
    assert_eq!(r.count(), 1);
}

#[test]
fn the_server_date_is_kept_for_a_skew_check() {
    let r = Responder::start(vec![ok(
        200,
        &[("date", "Mon, 30 Nov 2026 10:00:05 GMT")],
        RUNNERS,
    )]);
    let (c, _) = pat_client(&r.url());
    assert_eq!(c.last_date(), None);
    c.list_runners(&scope()).unwrap();
    assert_eq!(
        c.last_date(),
        runner_manager::timefmt::parse_rfc3339("2026-11-30T10:00:05Z")
    );
}

#[test]
fn no_error_ever_shows_the_token() {
    let r = Responder::start(vec![
        status(401, "Bad credentials"),
        status(403, "nope"),
        status(404, "x"),
        status(409, "Already exists"),
        status(422, "bad"),
        Action::Close,
        Action::Close,
        Action::Close,
        json("{"),
    ]);
    let (c, _) = pat_client(&r.url());
    let mut seen = 0;
    for _ in 0..7 {
        if let Err(e) = c.list_runners(&scope()) {
            seen += 1;
            for text in [e.to_string(), format!("{e:?}")] {
                assert!(
                    !text.contains(TOKEN) && !text.contains("TESTSECRET"),
                    "{text}"
                );
            }
        }
    }
    assert_eq!(seen, 7);
    assert!(!format!("{c:?}").contains("TESTSECRET"));
}
