//! GitHub misbehaving: a 5xx burst on the runs list is retried; a 403 with
//! `retry-after` is obeyed to the second; a 401 on one target is that target's visible
//! error while a second target keeps serving its jobs.

use super::support::*;
use runner_manager::domain::{Outcome, Reason, ReasonKind};
use runner_manager::sim::{FaultAction, FaultRule, JobStatus};

const RUNS: &str = "/repos/{owner}/{repo}/actions/runs";

fn target_error(w: &World, name: &str) -> serde_json::Value {
    let st = w.status_json();
    st["targets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap()["last_error"]
        .clone()
}

#[test]
fn a_5xx_burst_on_the_runs_list_is_retried() {
    let mut w = World::new("5xx", 4);
    w.add_target("t", "acme/app", true);
    w.add_profile(ProfileSpec::new("p", "t", &["p"]));
    // More than one call's retries: the first read fails, a later one succeeds.
    w.sim.add_fault(FaultRule::times(
        "GET",
        RUNS,
        5,
        FaultAction::Status { status: 502 },
    ));
    w.enqueue("acme/app", "build", &["p"], 300);
    w.start_daemon();
    w.wait_settled(&["acme/app"]);
    w.check_invariants(&["acme/app"]);
    let runs: Vec<_> = w
        .log()
        .into_iter()
        .filter(|e| e.method == "GET" && e.endpoint == RUNS)
        .collect();
    let failed = runs.iter().filter(|e| e.status == 502).count();
    assert_eq!(failed, 5, "{runs:?}");
    assert!(runs.iter().any(|e| e.status == 200), "{runs:?}");
    wait_until(SETTLE, "the target's error to clear", || {
        target_error(&w, "t").is_null()
    });
    assert!(w.stop_daemon().success());
}

/// A target `t` with a profile `p`, and one 403 with `retry-after: secs` scripted for
/// the first read of its runs list.
fn one_target_with_a_403_on_the_runs_list(w: &mut World, secs: u64) {
    w.add_target("t", "acme/app", true);
    w.add_profile(ProfileSpec::new("p", "t", &["p"]));
    w.sim.add_fault(FaultRule::times(
        "GET",
        RUNS,
        1,
        FaultAction::Forbidden {
            retry_after: Some(secs),
        },
    ));
}

#[test]
fn a_403_with_retry_after_is_obeyed() {
    let mut w = World::new("403", 4);
    one_target_with_a_403_on_the_runs_list(&mut w, 3);
    w.enqueue("acme/app", "build", &["p"], 300);
    w.start_daemon();
    w.wait_settled(&["acme/app"]);
    w.check_invariants(&["acme/app"]);
    let log = w.log();
    let limited = log
        .iter()
        .find(|e| e.endpoint == RUNS && e.status == 403)
        .expect("the 403 was served");
    // Nothing at all with that credential until retry-after has passed.
    assert_quiet_within(&log, limited, 3000);
    assert!(
        log.iter()
            .any(|e| e.endpoint == RUNS && e.status == 200 && e.at >= limited.at + 3000),
        "the runs list was read again after retry-after"
    );
    assert!(w.stop_daemon().success());
}

/// Issue 20: while a `retry-after` holds the target, its profile is limited by the rate
/// limit, to the second it ends, not by `max_capacity`, the queue or the repository's
/// visibility the limit keeps it from reading.
#[test]
fn a_rate_limited_profile_says_so_in_status() {
    let mut w = World::new("403-status", 4);
    one_target_with_a_403_on_the_runs_list(&mut w, 120);
    w.enqueue("acme/app", "build", &["p"], 300);
    w.start_daemon();
    wait_until(SETTLE, "the profile limited by the rate limit", || {
        let st = w.status_json();
        st["profiles"].as_array().unwrap().iter().any(|p| {
            p["name"] == "p"
                && p["limiting"]
                    .as_str()
                    .is_some_and(|l| l.starts_with("rate_limited (until 20"))
        })
    });
    assert!(w.stop_daemon().success());
}

/// Regression (found by the chaos suite): a daemon killed while a `retry-after` holds
/// forgot the hold, and the next one asked again at once.
#[test]
fn a_retry_after_outlives_a_daemon_restart() {
    let mut w = World::new("403-restart", 4);
    one_target_with_a_403_on_the_runs_list(&mut w, 5);
    w.start_daemon();
    wait_until(SETTLE, "the 403 is served", || {
        w.log()
            .iter()
            .any(|e| e.endpoint == RUNS && e.status == 403)
    });
    // Give the daemon the moment it takes to record the hold, then kill it outright.
    wait_hold_recorded(&w, "t");
    w.kill_daemon();
    w.start_daemon();
    w.enqueue("acme/app", "build", &["p"], 300);
    w.wait_settled(&["acme/app"]);
    w.check_invariants(&["acme/app"]);
    let log = w.log();
    let limited = log
        .iter()
        .find(|e| e.endpoint == RUNS && e.status == 403)
        .unwrap();
    assert_quiet_within(&log, limited, 5000);
    assert!(w.stop_daemon().success());
}

#[test]
fn a_401_on_one_target_is_reported_while_the_other_keeps_serving() {
    let mut w = World::new("401", 4);
    w.add_target("good", "acme/app", true);
    w.add_target("bad", "acme/other", false);
    w.add_profile(ProfileSpec::new("pg", "good", &["pg"]));
    w.add_profile(ProfileSpec::new("pb", "bad", &["pb"]));
    w.enqueue("acme/other", "stuck", &["pb"], 300);
    for i in 0..3 {
        w.enqueue("acme/app", &format!("g{i}"), &["pg"], 300);
    }
    w.start_daemon();
    wait_until(SETTLE, "the bad target's 401 in status", || {
        target_error(&w, "bad")
            .as_str()
            .is_some_and(|e| e.contains("401"))
    });
    w.wait_settled(&["acme/app"]);
    // The good target served everything while the bad one is held back.
    w.check_invariants(&["acme/app"]);
    assert!(target_error(&w, "good").is_null());
    // More jobs for the good target later are still served.
    w.enqueue("acme/app", "g-late", &["pg"], 300);
    w.wait_settled(&["acme/app"]);
    w.check_invariants(&["acme/app"]);
    let stuck = w.jobs_of("acme/other").remove(0);
    assert_eq!(stuck.status, JobStatus::Queued, "{stuck:?}");
    assert!(w.attempts().iter().all(|a| a.profile == "pg"));
    // The refused credential is not hammered: a deterministic error backs off.
    let bad_requests = w
        .log()
        .iter()
        .filter(|e| e.path.starts_with("/repos/acme/other"))
        .count();
    assert!(
        bad_requests <= 4,
        "{bad_requests} requests with a refused token"
    );
    let st = w.status_json();
    let pb = st["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "pb")
        .unwrap()
        .clone();
    assert_eq!(pb["live"], 0, "{st:#}");
    assert!(w.stop_daemon().success());
}

/// A JIT answer lost after GitHub registered the runner (the body cut short): the
/// attempt fails, and its registration is found by name and removed at its cleanup,
/// not a minute later by the orphan sweep.
#[test]
fn a_registration_whose_jit_answer_was_lost_is_removed_by_name() {
    let mut w = World::new("jit-lost", 4);
    w.add_target("t", "acme/app", true);
    w.add_profile(ProfileSpec::new("p", "t", &["p"]));
    w.sim.add_fault(FaultRule::times(
        "POST",
        "/repos/*/*/actions/runners/generate-jitconfig",
        1,
        FaultAction::TruncatedBody,
    ));
    let job = w.enqueue("acme/app", "build", &["p"], 300);
    w.start_daemon();
    wait_until(SETTLE, "the job served and no registration left", || {
        w.sim.job(job).unwrap().status == JobStatus::Completed && w.sim.runners().is_empty()
    });
    let attempts = w.attempts();
    let lost = attempts
        .iter()
        .find(|a| a.runner_id.is_none())
        .expect("an attempt without a registration id");
    assert_eq!(
        lost.reason.as_ref().map(Reason::kind),
        Some(ReasonKind::JitConfig),
        "{:?}",
        lost.reason
    );
    // The served job's runner was ephemeral and is gone by itself: the one DELETE is
    // the lost registration's, found by name.
    let deletes = w
        .log()
        .iter()
        .filter(|e| e.method == "DELETE" && e.endpoint.ends_with("/runners/{runner_id}"))
        .filter(|e| e.status == 204)
        .count();
    assert_eq!(deletes, 1, "the lost registration was not removed");
    w.wait_settled(&["acme/app"]);
    w.check_invariants(&["acme/app"]);
    assert!(w.stop_daemon().success());
}

/// A JIT request answered 409 (the runner's name taken, as by an earlier try of the
/// same attempt) is asked again once, after the taken name is looked up
/// (`reconcile::jit::after_refusal`): the start goes through, and no attempt fails.
#[test]
fn a_jit_name_taken_is_asked_again_once_and_the_start_goes_through() {
    let mut w = World::new("jit-409", 4);
    w.add_target("t", "acme/app", true);
    w.add_profile(ProfileSpec::new("p", "t", &["p"]));
    w.sim.add_fault(FaultRule::times(
        "POST",
        "/repos/*/*/actions/runners/generate-jitconfig",
        1,
        FaultAction::JitConflict,
    ));
    let job = w.enqueue("acme/app", "build", &["p"], 300);
    w.start_daemon();
    wait_until(SETTLE, "the job served", || {
        w.sim.job(job).unwrap().status == JobStatus::Completed
    });
    let posts: Vec<u16> = w
        .log()
        .iter()
        .filter(|e| e.method == "POST" && e.endpoint.ends_with("/generate-jitconfig"))
        .map(|e| e.status)
        .collect();
    assert_eq!(posts.first(), Some(&409), "{posts:?}");
    assert_eq!(posts.iter().filter(|s| **s == 409).count(), 1, "{posts:?}");
    let failed: Vec<_> = w
        .attempts()
        .into_iter()
        .filter(|a| a.reason.as_ref().map(Reason::kind) == Some(ReasonKind::JitConfig))
        .map(|a| a.id)
        .collect();
    assert!(
        failed.is_empty(),
        "attempts failed at their JIT config: {failed:?}"
    );
    w.wait_settled(&["acme/app"]);
    w.check_invariants(&["acme/app"]);
    assert!(w.stop_daemon().success());
}

/// Issue 50, item 2: a JIT config GitHub refuses for a rate limit (a secondary limit's
/// 403 with `retry-after`) is waited out and asked again: the start goes through and
/// serves its job, no attempt ends `failed` for the limit, and nothing of the
/// credential is sent inside the `retry-after`.
#[test]
fn a_start_refused_for_a_rate_limit_waits_it_out_and_is_not_failed() {
    let mut w = World::new("jit-rate", 4);
    w.add_target("t", "acme/app", true);
    w.add_profile(ProfileSpec::new("p", "t", &["p"]));
    w.sim.add_fault(FaultRule::times(
        "POST",
        "/repos/*/*/actions/runners/generate-jitconfig",
        1,
        FaultAction::Forbidden {
            retry_after: Some(3),
        },
    ));
    let job = w.enqueue("acme/app", "build", &["p"], 300);
    w.start_daemon();
    wait_until(SETTLE, "the job served", || {
        w.sim.job(job).unwrap().status == JobStatus::Completed
    });
    let log = w.log();
    let limited = log
        .iter()
        .find(|e| e.endpoint.ends_with("/generate-jitconfig") && e.status == 403)
        .expect("the 403 was served");
    assert_quiet_within(&log, limited, 3000);
    let failed: Vec<_> = w
        .attempts()
        .into_iter()
        .filter(|a| a.outcome == Some(Outcome::Failed))
        .map(|a| (a.id, a.reason))
        .collect();
    assert!(failed.is_empty(), "attempts failed: {failed:?}");
    assert!(
        w.daemon_logs().contains("start_waits"),
        "the start said it waits"
    );
    w.wait_settled(&["acme/app"]);
    w.check_invariants(&["acme/app"]);
    assert!(w.stop_daemon().success());
}
