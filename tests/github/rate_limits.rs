//! Rate limits obeyed to the second: nothing is sent while limited.

use crate::common::*;
use crate::responder::*;
use runner_manager::github::{ErrorClass, GhError, SharedHold};

/// A secondary rate limit with `retry-after: 30`, then an empty runner list.
fn limited_for_30_s_then_runners() -> Responder {
    Responder::start(vec![
        ok(
            403,
            &[("retry-after", "30")],
            r#"{"message":"You have exceeded a secondary rate limit"}"#,
        ),
        json(RUNNERS),
    ])
}

#[test]
fn retry_after_holds_every_request_until_it_passes() {
    let r = limited_for_30_s_then_runners();
    let (c, clock) = pat_client(&r.url());
    let until = T0 + 30_000;
    let e = c.list_runners(&scope()).unwrap_err();
    assert_eq!(e, GhError::RateLimited { until });
    assert_eq!(e.class(), ErrorClass::RateLimitedUntil(until));
    clock.advance(29_999);
    assert_eq!(
        c.list_runners(&scope()).unwrap_err(),
        GhError::RateLimited { until }
    );
    assert_eq!(r.count(), 1, "nothing sent while limited");
    assert_eq!(c.stats().refused_while_limited, 1);
    clock.advance(1);
    assert_eq!(c.list_runners(&scope()).unwrap(), vec![]);
    assert_eq!(r.count(), 2);
}

/// Regression (found by a daemon test under load): a target's loop and its scale set
/// listener use the same credential, and a retry-after one of them met reached the
/// other only at the loop's next pass; a registration-token POST went out inside it.
#[test]
fn a_shared_hold_holds_every_client_of_the_credential_at_once() {
    let r = limited_for_30_s_then_runners();
    let hold = SharedHold::default();
    let (a, _) = pat_client(&r.url());
    let a = a.with_shared_hold(hold.clone());
    let (b, b_clock) = pat_client(&r.url());
    let b = b.with_shared_hold(hold);
    let until = T0 + 30_000;
    assert_eq!(
        a.list_runners(&scope()).unwrap_err(),
        GhError::RateLimited { until }
    );
    assert_eq!(
        b.list_runners(&scope()).unwrap_err(),
        GhError::RateLimited { until }
    );
    assert_eq!(r.count(), 1, "the other client sent nothing");
    b_clock.advance(30_000);
    assert_eq!(b.list_runners(&scope()).unwrap(), vec![]);
    assert_eq!(r.count(), 2);
}

/// Regression (found by the chaos suite in CI): the wait was counted from when the
/// request left, so a slow answer shortened it and the next request came early.
#[test]
fn retry_after_counts_from_the_answer_not_the_request() {
    let r = Responder::start(vec![json(RUNNERS)]);
    let (c, clock) = pat_client(&r.url());
    let slow = clock.clone();
    r.push(Action::RawAfter(
        Box::new(move || slow.advance(700)),
        reply(
            403,
            &[("retry-after", "2")],
            r#"{"message":"You have exceeded a secondary rate limit"}"#,
        ),
    ));
    assert_eq!(c.list_runners(&scope()).unwrap(), vec![]);
    let answered = T0 + 700;
    assert_eq!(
        c.list_runners(&scope()).unwrap_err(),
        GhError::RateLimited {
            until: answered + 2_000
        }
    );
}

#[test]
fn remaining_zero_waits_for_the_reset() {
    let reset = (T0 / 1000 + 600).to_string();
    let r = Responder::start(vec![ok(
        403,
        &[
            ("x-ratelimit-limit", "5000"),
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-used", "5000"),
            ("x-ratelimit-reset", &reset),
            ("x-ratelimit-resource", "core"),
        ],
        r#"{"message":"API rate limit exceeded for user ID 1."}"#,
    )]);
    let (c, clock) = pat_client(&r.url());
    let until = T0 + 600_000;
    assert_eq!(
        c.list_runners(&scope()).unwrap_err(),
        GhError::RateLimited { until }
    );
    let snap = c.rate_limit_snapshot();
    assert_eq!(
        (snap.limit, snap.remaining, snap.used),
        (Some(5000), Some(0), Some(5000))
    );
    assert_eq!(snap.resource.as_deref(), Some("core"));
    assert_eq!(snap.limited_until, Some(until));
    clock.advance(599_000);
    assert!(matches!(
        c.list_runners(&scope()),
        Err(GhError::RateLimited { .. })
    ));
    assert_eq!(r.count(), 1);
}

#[test]
fn a_success_that_spends_the_last_unit_holds_the_next_request() {
    let reset = (T0 / 1000 + 60).to_string();
    let r = Responder::start(vec![ok(
        200,
        &[
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", &reset),
        ],
        RUNNERS,
    )]);
    let (c, _) = pat_client(&r.url());
    assert_eq!(c.list_runners(&scope()).unwrap(), vec![]);
    assert_eq!(
        c.list_runners(&scope()).unwrap_err(),
        GhError::RateLimited { until: T0 + 60_000 }
    );
    assert_eq!(r.count(), 1);
}

#[test]
fn limits_without_headers_wait_a_minute_then_longer() {
    let r = Responder::start(vec![
        status(429, "Too many requests"),
        status(403, "You have exceeded a secondary rate limit"),
        json(RUNNERS),
        status(429, "again"),
    ]);
    let (c, clock) = pat_client(&r.url());
    assert_eq!(
        c.list_runners(&scope()).unwrap_err(),
        GhError::RateLimited { until: T0 + 60_000 }
    );
    clock.advance(60_000);
    assert_eq!(
        c.list_runners(&scope()).unwrap_err(),
        GhError::RateLimited {
            until: T0 + 60_000 + 120_000
        },
        "a second limit in a row waits twice as long"
    );
    clock.advance(120_000);
    c.list_runners(&scope()).unwrap();
    let now = T0 + 180_000;
    assert_eq!(
        c.list_runners(&scope()).unwrap_err(),
        GhError::RateLimited {
            until: now + 60_000
        },
        "a success resets the doubling"
    );
    assert_eq!(r.count(), 4);
}

#[test]
fn rate_limit_endpoint_is_free_and_answers_while_limited() {
    let r = Responder::start(vec![
        ok(429, &[("retry-after", "120")], r#"{"message":"slow down"}"#),
        json(
            r#"{"resources":{"core":{"limit":5000,"remaining":4321,"reset":1800000600,"used":679}},"rate":{"limit":5000,"remaining":4321,"reset":1800000600,"used":679}}"#,
        ),
    ]);
    let (c, _) = pat_client(&r.url());
    assert!(matches!(
        c.list_runners(&scope()),
        Err(GhError::RateLimited { .. })
    ));
    let s = c.rate_limit().unwrap();
    assert_eq!(
        (s.limit, s.remaining, s.used),
        (Some(5000), Some(4321), Some(679))
    );
    assert_eq!(s.reset, Some(1_800_000_600_000));
    assert_eq!(r.requests()[1].path, "/rate_limit");
}
