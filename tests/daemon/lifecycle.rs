//! A runner's end as the design orders it: an idle runner past its timeout is
//! deregistered before it is stopped; one that takes a job during scale-down (422 to
//! the DELETE) is never killed. Also: one daemon per state directory, and `status
//! --json` while running.

use super::support::*;
use runner_manager::domain::{Attempt, AttemptState, Outcome, Reason, ReasonKind};
use runner_manager::runner::{ProcessStatus, is_alive};
use runner_manager::sim::{FaultAction, FaultRule, JobStatus, Trigger};
use std::process::{Command, Stdio};

fn delete_of(w: &World, runner_id: i64) -> Vec<runner_manager::sim::LogEntry> {
    let path = format!("/repos/acme/app/actions/runners/{runner_id}");
    w.log()
        .into_iter()
        .filter(|e| e.method == "DELETE" && e.path == path)
        .collect()
}

/// A running daemon on target `t` with profile `warm` (min 1, idle timeout 1 s), and
/// the one idle runner it started for that minimum.
fn one_idle_runner(tag: &str) -> (World, Attempt) {
    let mut w = World::new(tag, 4);
    w.add_target("t", "acme/app", true);
    w.add_profile(
        ProfileSpec::new("warm", "t", &["warm"])
            .min(1)
            .idle_timeout(1),
    );
    w.start_daemon();
    wait_until(SETTLE, "an idle runner", || {
        w.in_state(AttemptState::Idle).len() == 1
    });
    let a = w.in_state(AttemptState::Idle).remove(0);
    (w, a)
}

#[test]
fn an_idle_runner_past_its_timeout_is_deregistered_before_it_is_stopped() {
    let (mut w, a) = one_idle_runner("idle");
    let (pid, start, rid) = (a.pid.unwrap(), a.pid_start.unwrap(), a.runner_id.unwrap());
    assert!(delete_of(&w, rid).is_empty());
    // No longer needed: it is surplus now and times out after a second.
    w.cli_ok(&["profile", "set", "warm", "min=0"]);
    // Look at the process first, then at the log: a process gone while no DELETE was
    // logged yet means it was stopped before it was deregistered.
    wait_until(SETTLE, "the runner to stop", || {
        let alive = is_alive(pid, start) == ProcessStatus::Alive;
        let deleted = !delete_of(&w, rid).is_empty();
        assert!(alive || deleted, "the runner stopped before its DELETE");
        !alive
    });
    let deletes = delete_of(&w, rid);
    assert_eq!(deletes.len(), 1, "{deletes:?}");
    assert_eq!(deletes[0].status, 204);
    w.wait_settled(&[]);
    w.check_invariants(&[]);
    let a = w.attempt(a.id);
    assert_eq!(a.outcome, Some(Outcome::ExitedIdleWithoutWork), "{a:?}");
    assert_eq!(a.reason, Some(Reason::new(ReasonKind::IdleTimeout)));
    assert_eq!(w.attempts().len(), 1);
    assert!(w.stop_daemon().success());
}

#[test]
fn a_runner_that_takes_a_job_during_scale_down_is_never_killed() {
    let (mut w, a) = one_idle_runner("busy422");
    let rid = a.runner_id.unwrap();
    // GitHub answers 422 "still running a job" to every DELETE until the job is on.
    w.sim.add_fault(FaultRule::new(
        Some("DELETE"),
        "/repos/{owner}/{repo}/actions/runners/{runner_id}",
        Trigger::Probability(1.0),
        FaultAction::DeleteBusy,
    ));
    w.cli_ok(&["profile", "set", "warm", "min=0"]);
    wait_until(SETTLE, "a DELETE answered 422", || {
        delete_of(&w, rid).iter().any(|e| e.status == 422)
    });
    w.enqueue("acme/app", "late", &["warm"], 1000);
    wait_until(SETTLE, "the runner to be busy", || {
        w.attempt(a.id).state == AttemptState::Busy
    });
    w.sim.clear_faults();
    w.wait_settled(&["acme/app"]);
    w.check_invariants(&["acme/app"]);
    let a = w.attempt(a.id);
    assert_eq!(a.outcome, Some(Outcome::CompletedJob), "{a:?}");
    assert_eq!(a.job_name.as_deref(), Some("late"));
    let job = w.jobs_of("acme/app").remove(0);
    assert_eq!(job.status, JobStatus::Completed);
    assert_eq!(job.conclusion.as_deref(), Some("success"), "{job:?}");
    assert_eq!(job.runner_name.as_deref(), Some(a.runner_name.as_str()));
    // The only DELETEs were the refused ones: a 204 would have meant a stop.
    assert!(
        delete_of(&w, rid).iter().all(|e| e.status == 422),
        "{:?}",
        delete_of(&w, rid)
    );
    assert!(w.stop_daemon().success());
}

#[test]
fn a_second_daemon_on_the_same_state_dir_exits_store_locked_naming_the_holder() {
    let mut w = World::new("lock", 2);
    w.add_target("t", "acme/app", true);
    w.add_profile(ProfileSpec::new("p", "t", &["p"]));
    w.start_daemon();
    let first = w.daemon_pid();
    wait_until(SETTLE, "the first daemon to hold the lock", || {
        std::fs::read_to_string(w.dir.join("daemon.lock"))
            .is_ok_and(|s| s.contains(&format!("pid {first}")))
    });
    let mut second = Command::new(BIN)
        .arg("--state-dir")
        .arg(&w.dir)
        .arg("daemon")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut status = None;
    let exited = poll_until(SETTLE, || {
        status = second.try_wait().unwrap();
        status.is_some()
    });
    if !exited {
        let _ = second.kill();
        let _ = second.wait();
        panic!("the second daemon kept running");
    }
    let out = second.wait_with_output().unwrap();
    assert_eq!(status.unwrap().code(), Some(7), "store-locked");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("pid {first}")), "{err}");
    // The first one is unharmed.
    assert!(w.daemon_exited().is_none());
    assert!(w.stop_daemon().success());
    w.check_invariants(&[]);
}

#[test]
fn status_json_shows_demand_limit_and_counts_while_running() {
    let mut w = World::new("status", 4);
    w.add_target("t", "acme/app", true);
    w.add_profile(ProfileSpec::new("one", "t", &["one"]).max(1));
    w.add_profile(ProfileSpec::new("quiet", "t", &["quiet"]).max(2));
    for i in 0..3 {
        w.enqueue("acme/app", &format!("j{i}"), &["one"], 1500);
    }
    w.start_daemon();
    let mut seen = None;
    wait_until(SETTLE, "status to show the ceiling limiting `one`", || {
        let st = w.status_json();
        let one = st["profiles"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "one")
            .cloned()
            .unwrap();
        let ok = one["limiting"] == "max_capacity"
            && one["demand"].as_u64().is_some_and(|d| d >= 2)
            && one["live"] == 1;
        if ok {
            seen = Some(st);
        }
        ok
    });
    // GitHub's runner list, read for the sweep, is published for top's Runners pane.
    wait_until(SETTLE, "the runner list published for top", || {
        runner_manager::store::daemon_facts::runners_seen(&w.store(), "t")
            .unwrap()
            .is_some()
    });
    let st = seen.unwrap();
    assert_eq!(st["daemon"]["running"], true, "{st:#}");
    assert_eq!(st["daemon"]["pid"], w.daemon_pid(), "{st:#}");
    assert_eq!(st["live"], 1, "{st:#}");
    let quiet = st["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "quiet")
        .unwrap();
    assert_eq!(quiet["demand"], 0, "{st:#}");
    assert_eq!(quiet["limiting"], "demand", "{st:#}");
    assert_eq!(quiet["live"], 0, "{st:#}");
    let t = &st["targets"].as_array().unwrap()[0];
    assert_eq!(t["last_error"], serde_json::Value::Null, "{st:#}");
    assert_eq!(t["mode"], "standalone", "{st:#}");
    w.wait_settled(&["acme/app"]);
    w.check_invariants(&["acme/app"]);
    assert!(w.stop_daemon().success());
}

#[test]
fn daemon_once_exits_with_the_class_of_a_target_github_refused_and_0_when_all_answered() {
    let mut w = World::new("once", 4);
    w.add_target("good", "acme/app", true);
    w.add_profile(ProfileSpec::new("linux", "good", &["linux"]));
    let out = w.cli(&["daemon", "--once"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");

    // A token the sim does not know: GitHub answers 401, the credentials class.
    w.add_target("bad", "acme/other", false);
    w.add_profile(ProfileSpec::new("gpu", "bad", &["gpu"]));
    let out = w.cli(&["daemon", "--once"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    // The error, then the line naming the fix.
    let last = stderr.lines().rev().nth(1).unwrap_or_default();
    assert!(
        last.starts_with("runner-manager: target bad: ") && !last.contains("target good"),
        "names the failed target only: {stderr}"
    );
}

#[test]
fn a_runner_install_gone_after_profile_add_is_logged_once() {
    let mut w = World::new("install-gone", 4);
    w.add_target("t", "acme/app", true);
    w.add_profile(ProfileSpec::new("linux", "t", &["linux"]));
    use runner_manager::store::Store;
    let store = w.store();
    let mut p = store.profile("linux").unwrap();
    let gone = w.dir.join("no-such-install");
    p.runner_dir = Some(gone.clone());
    store.update_profile(&p, p.revision).unwrap();
    // --once runs three passes; each sees the install missing.
    let out = w.cli(&["daemon", "--once"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("runner_install_unusable"))
        .collect();
    assert_eq!(lines.len(), 1, "logged once, not per pass:\n{stderr}");
    assert!(
        lines[0].contains("profile=linux") && lines[0].contains("the directory cannot be read"),
        "{}",
        lines[0]
    );
    // Issue 38, item 8: --once fails with the required check's class, and status
    // keeps the reason as the profile's last error.
    assert_eq!(
        out.status.code(),
        Some(9),
        "host-unfit, not 0, while a required check stops a profile: {stderr}"
    );
    assert!(
        stderr.contains("profile linux: runner install:"),
        "names the profile and the check: {stderr}"
    );
    let status = w.cli_ok(&["--json", "status"]);
    let v: serde_json::Value = serde_json::from_str(&status).unwrap();
    let last = v["profiles"][0]["last_error"].as_str().unwrap_or_default();
    assert!(
        last.contains("the directory cannot be read"),
        "status keeps the reason: {status}"
    );
}
