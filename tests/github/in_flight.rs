//! The bound on requests in flight, seen from one client against the scripted
//! responder: a permit covers one exchange (not a backoff, not a token's minting), and
//! a request that cannot get one in time fails instead of waiting forever. The bound
//! under load, with the fan-out, is tested against the distant sim (tests/sim).

use crate::common::*;
use crate::responder::*;
use runner_manager::domain::CredentialRef;
use runner_manager::github::{GhError, InFlight, RetryPolicy, load_credential};
use runner_manager::timefmt::format_rfc3339;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Polls `f` until it holds, for at most 10 s (never a sleep as synchronisation).
fn wait_until(what: &str, f: impl Fn() -> bool) {
    let end = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn an_app_at_a_limit_of_one_mints_its_token_without_waiting_on_itself() {
    let r = Responder::start(vec![
        json(r#"{"id":55,"app_id":4242}"#),
        ok(
            201,
            &[],
            &format!(
                r#"{{"token":"ghs_X","expires_at":"{}","permissions":{{}}}}"#,
                format_rfc3339(T0 + 3_600_000)
            ),
        ),
        json(RUNNERS),
    ]);
    let cred = load_credential(&CredentialRef::App {
        app_id: 4242,
        key_path: fixture("app-key.pem").into(),
        installation_id: None,
    })
    .unwrap();
    let limiter = InFlight::new(1);
    let (c, _) = client_for(&repo_target(&r.url()), cred);
    let c = c.with_in_flight(limiter.clone());
    // The runner list needs a token, and the token an installation id: three requests,
    // each taking the one permit in turn.
    assert_eq!(c.list_runners(&scope()).unwrap(), vec![]);
    assert_eq!(r.count(), 3);
    assert_eq!((limiter.peak(), limiter.in_use()), (1, 0));
}

#[test]
fn a_request_in_its_backoff_holds_no_permit() {
    let r = Responder::start(vec![status(502, "bad gateway"), json(RUNNERS)]);
    let mut config = test_config();
    // A backoff long enough to act inside it; the shutdown below ends it.
    config.retry = RetryPolicy {
        tries: 3,
        base: Duration::from_secs(60),
        cap: Duration::from_secs(60),
    };
    let limiter = InFlight::new(1);
    let (stop, stop_rx) = crossbeam_channel::bounded::<()>(0);
    let (retrying, _) = client_with(&repo_target(&r.url()), pat_cred(), config);
    let retrying = Arc::new(
        retrying
            .with_in_flight(limiter.clone())
            .with_shutdown(stop_rx),
    );
    let (other, _) = pat_client(&r.url());
    let other = other.with_in_flight(limiter.clone());
    let first = {
        let c = retrying.clone();
        std::thread::spawn(move || c.list_runners(&scope()))
    };
    wait_until("the 502 read and the backoff begun", || {
        r.count() == 1 && retrying.stats().retries == 1
    });
    assert_eq!(limiter.in_use(), 0, "the backoff holds no permit");
    // So another request of the credential goes out at a limit of 1 meanwhile.
    assert_eq!(other.list_runners(&scope()).unwrap(), vec![]);
    drop(stop);
    assert_eq!(first.join().unwrap(), Err(GhError::Interrupted));
    assert_eq!(r.count(), 2);
}

#[test]
fn no_permit_in_time_is_a_transient_failure_not_a_wait_forever() {
    let r = Responder::start(vec![Action::Hang]);
    let mut config = test_config();
    config.read_timeout = Duration::from_secs(2);
    config.retry.tries = 1;
    config.permit_timeout = Duration::from_millis(100);
    let limiter = InFlight::new(1);
    let (stuck, _) = client_with(&repo_target(&r.url()), pat_cred(), config.clone());
    let stuck = Arc::new(stuck.with_in_flight(limiter.clone()));
    let (waiting, _) = client_with(&repo_target(&r.url()), pat_cred(), config);
    let waiting = waiting.with_in_flight(limiter.clone());
    let first = {
        let c = stuck.clone();
        std::thread::spawn(move || c.list_runners(&scope()))
    };
    wait_until("the hung request in flight", || {
        r.count() == 1 && limiter.in_use() == 1
    });
    let t = Instant::now();
    let e = waiting.list_runners(&scope()).unwrap_err();
    assert!(
        t.elapsed() >= Duration::from_millis(100),
        "{:?}",
        t.elapsed()
    );
    assert!(e.is_transient(), "{e:?}");
    assert!(e.to_string().contains("no request slot"), "{e}");
    assert_eq!(r.count(), 1, "the waiting request was never sent");
    drop(r);
    assert!(first.join().unwrap().is_err());
    assert_eq!(limiter.in_use(), 0);
}

#[test]
fn jobs_of_several_runs_and_repositories_come_in_order_and_the_first_error_ends_the_read() {
    let runs = |ids: &[i64]| {
        let runs: Vec<String> = ids
            .iter()
            .map(|id| format!(r#"{{"id":{id},"status":"queued"}}"#))
            .collect();
        format!(
            r#"{{"total_count":{},"workflow_runs":[{}]}}"#,
            ids.len(),
            runs.join(",")
        )
    };
    let empty = r#"{"total_count":0,"workflow_runs":[]}"#;
    let jobs = |id: i64, run: i64| {
        format!(
            r#"{{"total_count":1,"jobs":[{{"id":{id},"run_id":{run},"status":"queued","conclusion":null,"name":"j","labels":["self-hosted"],"created_at":"2026-11-30T10:00:00Z","runner_id":null,"runner_name":null}}]}}"#
        )
    };
    // The responder answers in arrival order, so this client reads one request at a
    // time (a limit of 1 is a serial read) and the script lines up. The runs' jobs are
    // read oldest first (20, 21, 30); what comes back is in the lists' order.
    let r = Responder::start(vec![
        json(&runs(&[21, 20])),
        json(empty),
        json(&runs(&[30])),
        json(empty),
        json(&jobs(200, 20)),
        json(&jobs(210, 21)),
        json(&jobs(300, 30)),
        // The second read: the oldest run's jobs are refused outright (a refused
        // credential fails a read whole; a 404 would be a run deleted meanwhile, and a
        // 5xx a failure in passing); nothing after is sent.
        json(&runs(&[21, 20])),
        json(empty),
        json(&runs(&[30])),
        json(empty),
        status(401, "Bad credentials"),
    ]);
    let (c, _) = pat_client(&r.url());
    let c = c.with_in_flight(InFlight::new(1));
    let repos = [("octo", "app"), ("octo", "lib")];
    let got = c.queued_jobs_of(&repos).unwrap();
    let ids: Vec<(i64, &str)> = got.iter().map(|j| (j.id, j.repo.as_str())).collect();
    assert_eq!(
        ids,
        [(210, "octo/app"), (200, "octo/app"), (300, "octo/lib")]
    );
    assert_eq!(
        c.queued_jobs_of(&repos),
        Err(GhError::Unauthorized { clock_hint: false })
    );
    assert_eq!(r.count(), 12);
    let last = r.requests().pop().unwrap();
    assert_eq!(
        last.path,
        "/repos/octo/app/actions/runs/20/jobs?per_page=100"
    );
}
