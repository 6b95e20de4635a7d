//! /proc facts and signalling: sessions, stragglers, pid reuse, stopping.

use std::time::Duration;

use runner_manager::runner::{
    ProcessStatus, SignalOutcome, StopOutcome, is_alive, kill_session,
    proc::{read_stat, wait_session_empty},
    processes_with_cwd_or_exe_under, session_members, signal_session, stop_and_wait,
};

use super::util::{FakeRunner, WAIT, wait_until};

/// A runner whose background child moves to its own process group (out of reach of
/// `killpg`) and, like the runner, ignores SIGTERM.
const STUBBORN: &str = "#!/bin/sh\ntrap '' TERM\n\
    perl -e '$|=1; setpgrp(0,0); $SIG{TERM}=\"IGNORE\"; print \"grandchild $$\\n\"; exec \"sleep\", \"1000\"' &\n\
    wait\n";

fn grandchild(r: &FakeRunner) -> i32 {
    r.wait_log("grandchild ");
    let text = r.log_text();
    let line = text.lines().find(|l| l.starts_with("grandchild ")).unwrap();
    line["grandchild ".len()..].trim().parse().unwrap()
}

#[test]
fn kill_session_reaches_a_grandchild_in_another_group() {
    let r = FakeRunner::start("killsession", STUBBORN, "jit");
    let gc = grandchild(&r);
    let s = read_stat(gc).unwrap();
    assert_eq!(s.session, r.pid());
    assert_ne!(
        s.pgrp,
        r.pid(),
        "the grandchild should have left the runner's group"
    );
    assert!(session_members(r.pid()).contains(&gc));

    assert!(kill_session(r.pid(), libc::SIGKILL) >= 2);
    assert!(wait_session_empty(r.pid(), WAIT));
    assert!(read_stat(gc).is_none_or(|s| s.has_exited()));
}

#[test]
fn stop_escalates_to_kill_when_term_is_ignored() {
    let r = FakeRunner::start("stop", STUBBORN, "jit");
    let gc = grandchild(&r);
    let outcome = stop_and_wait(r.pid(), r.spawned.start_time, Duration::from_millis(200));
    assert_eq!(outcome, StopOutcome::Killed);
    assert!(session_members(r.pid()).is_empty());
    assert!(read_stat(gc).is_none_or(|s| s.has_exited()));
    assert_eq!(
        stop_and_wait(r.pid(), r.spawned.start_time, Duration::from_millis(10)),
        StopOutcome::Exited
    );
}

#[test]
fn stop_returns_early_when_the_runner_obeys_term() {
    let r = FakeRunner::start("obeys", "#!/bin/sh\necho up\nsleep 1000 &\nwait\n", "jit");
    r.wait_log("up");
    assert_eq!(
        stop_and_wait(r.pid(), r.spawned.start_time, WAIT),
        StopOutcome::Exited
    );
    assert!(matches!(
        r.wait_reaped(),
        runner_manager::runner::Reap::Exited(_)
    ));
}

#[test]
fn a_wrong_start_time_defeats_pid_reuse() {
    let r = FakeRunner::start("reuse", "#!/bin/sh\necho up\nexec sleep 1000\n", "jit");
    let (pid, start) = (r.pid(), r.spawned.start_time);
    assert_eq!(is_alive(pid, start), ProcessStatus::Alive);
    assert_eq!(is_alive(pid, start + 1), ProcessStatus::Gone);
    assert_eq!(
        signal_session(pid, start + 1, libc::SIGKILL),
        SignalOutcome::PidReused
    );
    assert_eq!(
        is_alive(pid, start),
        ProcessStatus::Alive,
        "a stranger was signalled"
    );
    assert_eq!(
        signal_session(pid, start, libc::SIGKILL),
        SignalOutcome::Signalled
    );
    assert!(wait_until(WAIT, || is_alive(pid, start) == ProcessStatus::Gone));
}

#[test]
fn finds_processes_running_in_a_root() {
    let r = FakeRunner::start("cwd", "#!/bin/sh\necho up\nexec sleep 1000\n", "jit");
    r.wait_log("up");
    assert!(processes_with_cwd_or_exe_under(&r.root).contains(&r.pid()));
    assert!(!processes_with_cwd_or_exe_under(&r.dir.path().join("install")).contains(&r.pid()));
}
