//! Crash anywhere: the daemon is SIGKILLed at several points mid-run and restarted.
//! At the end: no leaked process, no leftover registration, no unserved job, every
//! attempt finished with a reason; runners busy when it died were re-adopted and
//! completed their jobs.

use super::support::*;
use runner_manager::domain::{AttemptState, Outcome};
use runner_manager::sim::JobStatus;
use runner_manager::store::Store;
use std::collections::BTreeSet;

#[test]
fn sigkill_at_several_points_then_restart_loses_nothing() {
    let mut w = World::new("crash", 4);
    w.add_target("t", "acme/app", true);
    w.add_profile(ProfileSpec::new("p", "t", &["p"]).max(3).idle_timeout(1));
    let mut busy_at_kill: BTreeSet<i64> = BTreeSet::new();
    let mut jobs = 0;
    let mut enqueue = |w: &World, n: usize, ms: u64| {
        for _ in 0..n {
            jobs += 1;
            w.enqueue("acme/app", &format!("j{jobs}"), &["p"], ms);
        }
    };
    let mut note_busy = |w: &World| {
        busy_at_kill.extend(w.in_state(AttemptState::Busy).iter().map(|a| a.id));
    };

    // 1. Right after it spawned runners.
    enqueue(&w, 3, 1500);
    w.start_daemon();
    wait_until(SETTLE, "a spawned runner", || {
        w.attempts().iter().any(|a| a.pid.is_some())
    });
    w.kill_daemon();
    note_busy(&w);

    // 2. While jobs are busy.
    w.start_daemon();
    wait_until(SETTLE, "a busy runner", || {
        !w.in_state(AttemptState::Busy).is_empty()
    });
    w.kill_daemon();
    note_busy(&w);

    // 3. During cleanup: the moment a job is done, its runner is being cleaned up.
    enqueue(&w, 2, 800);
    w.start_daemon();
    wait_until(SETTLE, "a job done", || {
        w.sim
            .jobs()
            .iter()
            .any(|j| j.status == JobStatus::Completed)
    });
    w.kill_daemon();
    note_busy(&w);

    // 4. Straight after a restart, before its first passes are done.
    enqueue(&w, 2, 600);
    w.start_daemon();
    wait_until(SETTLE, "the restarted daemon's heartbeat", || {
        w.status_json()["daemon"]["pid"] == w.daemon_pid()
    });
    w.kill_daemon();
    note_busy(&w);

    w.start_daemon();
    w.wait_settled(&["acme/app"]);
    w.check_invariants(&["acme/app"]);
    for id in &busy_at_kill {
        let a = w.attempt(*id);
        assert_eq!(
            a.outcome,
            Some(Outcome::CompletedJob),
            "runner busy when the daemon died was not re-adopted: {a:?}"
        );
    }
    assert!(!busy_at_kill.is_empty(), "no runner was busy at a kill");
    assert!(w.stop_daemon().success());
}

/// Regression: a daemon killed between spawning a runner and recording its pid (more
/// likely once starts run on several workers at once) left the next daemon an attempt
/// in `starting` with no pid, which it took for gone: it ended the attempt `orphaned`
/// while the runner ran a job, and every cleanup after was refused (422, busy). The
/// runner's own process writes its pid before it execs; the next daemon finds it there.
#[test]
fn a_runner_whose_pid_was_never_recorded_is_found_again() {
    let mut w = World::new("crash-nopid", 2);
    w.add_target("t", "acme/app", true);
    w.add_profile(ProfileSpec::new("p", "t", &["p"]).max(1));
    w.enqueue("acme/app", "long", &["p"], 3_000);
    w.start_daemon();
    let mut busy = None;
    wait_until(SETTLE, "a busy runner", || {
        busy = w.in_state(AttemptState::Busy).pop();
        busy.is_some()
    });
    w.kill_daemon();
    // What a kill between the spawn and its record leaves: `starting`, no pid.
    let mut a = busy.unwrap();
    let pid = a.pid.unwrap();
    a.state = AttemptState::Starting;
    a.pid = None;
    a.pid_start = None;
    w.store().save_attempt(&a).unwrap();
    w.start_daemon();
    w.wait_settled(&["acme/app"]);
    w.check_invariants(&["acme/app"]);
    let a = w.attempt(a.id);
    assert_eq!(a.outcome, Some(Outcome::CompletedJob), "{a:?}");
    assert_eq!(a.pid, Some(pid));
    assert!(w.daemon_logs().contains("msg=runner_recovered"));
    assert!(w.stop_daemon().success());
}
