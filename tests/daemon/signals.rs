//! SIGTERM drains: idle runners are deregistered and stopped, busy ones keep running
//! (a restarted daemon re-adopts and finishes them), the daemon exits 0; SIGINT
//! (Ctrl-C) does the same and exits 130, as the exit table says. `drain
//! --wait` from the shell waits until no runner is alive.

use super::support::*;
use runner_manager::domain::{AttemptState, Outcome, Reason, ReasonKind};
use runner_manager::runner::{ProcessStatus, is_alive};
use std::process::{Command, Stdio};

#[test]
fn ctrl_c_is_named_sigint_exits_130_and_says_which_runners_keep_running() {
    let mut w = World::new("sigint", 2);
    w.add_target("t", "acme/app", true);
    w.add_profile(ProfileSpec::new("p", "t", &["p"]).max(2));
    w.enqueue("acme/app", "long", &["p"], 4000);
    w.start_daemon();
    wait_until(SETTLE, "a busy runner", || {
        w.in_state(AttemptState::Busy).len() == 1
    });
    let busy = w.in_state(AttemptState::Busy).remove(0);
    let status = w.stop_daemon_with(libc::SIGINT);
    let logs = w.daemon_logs();
    assert_eq!(status.code(), Some(130), "the table's interrupted:\n{logs}");
    assert!(logs.contains("reason=SIGINT"), "{logs}");
    assert!(!logs.contains("SIGTERM"), "{logs}");
    let line = logs
        .lines()
        .find(|l| l.contains("runners_keep_running"))
        .unwrap_or_else(|| panic!("no line says what keeps running:\n{logs}"));
    assert!(
        line.contains("runners=1") && line.contains("adopts"),
        "{line}"
    );
    // The next daemon adopts it, and its job ends well.
    w.start_daemon();
    wait_until(SETTLE, "the adopted runner finishes its job", || {
        w.attempt(busy.id).outcome == Some(Outcome::CompletedJob)
    });
    assert!(w.stop_daemon().success());
}

#[test]
fn sigterm_drains_idle_runners_and_leaves_busy_ones_running() {
    let mut w = World::new("sigterm", 4);
    w.add_target("t", "acme/app", true);
    w.add_profile(
        ProfileSpec::new("p", "t", &["p"])
            .min(1)
            .max(3)
            .idle_timeout(60),
    );
    w.enqueue("acme/app", "long1", &["p"], 4000);
    w.enqueue("acme/app", "long2", &["p"], 4000);
    w.start_daemon();
    wait_until(SETTLE, "two busy runners and one idle", || {
        w.in_state(AttemptState::Busy).len() == 2 && w.in_state(AttemptState::Idle).len() == 1
    });
    let busy = w.in_state(AttemptState::Busy);
    let idle = w.in_state(AttemptState::Idle).remove(0);
    let status = w.stop_daemon();
    assert!(status.success(), "the daemon exited with {status}");

    // The idle one was deregistered (204) and stopped; the busy ones run on.
    let idle = w.attempt(idle.id);
    assert_eq!(
        idle.outcome,
        Some(Outcome::ExitedIdleWithoutWork),
        "{idle:?}"
    );
    assert_eq!(
        idle.reason,
        Some(Reason::new(ReasonKind::Drain)),
        "{idle:?}"
    );
    let path = format!(
        "/repos/acme/app/actions/runners/{}",
        idle.runner_id.unwrap()
    );
    assert!(
        w.log()
            .iter()
            .any(|e| e.method == "DELETE" && e.path == path && e.status == 204)
    );
    for b in &busy {
        let now = w.attempt(b.id);
        assert_eq!(now.state, AttemptState::Busy, "{now:?}");
        assert_eq!(
            is_alive(b.pid.unwrap(), b.pid_start.unwrap()),
            ProcessStatus::Alive,
            "busy runner {} was stopped",
            b.id
        );
    }

    // A new daemon re-adopts them and they finish their jobs.
    w.start_daemon();
    wait_until(SETTLE, "the busy runners to finish", || {
        busy.iter()
            .all(|b| w.attempt(b.id).outcome == Some(Outcome::CompletedJob))
    });

    // `drain --wait` from the shell: the warm idle runner goes, the command returns.
    let mut drain = Command::new(BIN)
        .arg("--state-dir")
        .arg(&w.dir)
        .args(["drain", "--wait"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut st = None;
    let done = poll_until(SETTLE, || {
        st = drain.try_wait().unwrap();
        st.is_some()
    });
    if !done {
        let _ = drain.kill();
        let _ = drain.wait();
        panic!("drain --wait did not return");
    }
    assert!(st.unwrap().success());
    assert!(
        w.live_attempts().is_empty(),
        "drain --wait returned with runners alive: {:?}",
        w.live_attempts()
    );
    assert!(w.stop_daemon().success());
    w.wait_settled(&["acme/app"]);
    w.check_invariants(&["acme/app"]);
    for a in w.attempts() {
        if a.job_name.is_none() {
            assert_eq!(a.reason, Some(Reason::new(ReasonKind::Drain)), "{a:?}");
        }
    }
}

/// Ctrl-C out of `drain --wait` ends the wait, not the drain, and says so (exit 130):
/// the host is left draining with a word of how to wait again or cancel.
#[test]
fn ctrl_c_out_of_drain_wait_says_the_host_is_still_draining() {
    use std::io::{BufRead, BufReader};
    let mut w = World::new("drain-wait-int", 2);
    w.add_target("t", "acme/app", true);
    w.add_profile(ProfileSpec::new("p", "t", &["p"]).max(1));
    w.enqueue("acme/app", "long", &["p"], 8000);
    w.start_daemon();
    wait_until(SETTLE, "a busy runner", || {
        w.in_state(AttemptState::Busy).len() == 1
    });
    let mut drain = Command::new(BIN)
        .arg("--state-dir")
        .arg(&w.dir)
        .args(["drain", "--wait"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(drain.stderr.take().unwrap());
    let mut first = String::new();
    err.read_line(&mut first).unwrap();
    assert!(
        first.contains("draining: 1 runner alive (1 busy)"),
        "{first}"
    );
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(drain.id() as i32, libc::SIGINT) };
    let mut st = None;
    assert!(poll_until(SETTLE, || {
        st = drain.try_wait().unwrap();
        st.is_some()
    }));
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    assert_eq!(st.unwrap().code(), Some(130), "{rest}");
    assert!(
        rest.contains("still draining") && rest.contains("drain --cancel"),
        "{rest}"
    );
    assert!(w.cli_ok(&["status"]).contains("draining     yes"));
    w.cli_ok(&["drain", "--cancel"]);
    w.wait_settled(&["acme/app"]);
    assert!(w.stop_daemon().success());
    w.check_invariants(&["acme/app"]);
}
