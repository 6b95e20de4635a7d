//! Unit tests of the attempt watcher, one line per case: an attempt in a state since
//! a time, what the pass saw, and the actions expected, written as their `Display`.

use super::lines::parse_line;
use super::watch::*;
use crate::domain::{Attempt, AttemptState, Reason, ReasonKind};
use crate::timefmt::Millis;
use AttemptState::*;
use ProcessStatus::*;

const HOST: &str = "0123abcd89ef4567";
const T: Timeouts = Timeouts {
    bootstrap: 100,
    idle: 50,
    job: Some(1_000),
    stop_grace: 10,
};
const NO_JOB_CEILING: Timeouts = Timeouts { job: None, ..T };

/// An attempt created at 0 that reached `state` at `since` (through the states
/// before it, one step each).
fn at(state: AttemptState, since: Millis) -> Attempt {
    let mut a = Attempt::new(1, "p", "octo", HOST, 0);
    let path: &[AttemptState] = match state {
        Pending => &[],
        Starting => &[Starting],
        Idle => &[Starting, Idle],
        Busy => &[Starting, Idle, Busy],
        Finished => &[Starting, Idle, Busy, Finished],
        Failed => &[Starting, Failed],
        Destroying => &[Starting, Failed, Destroying],
        CleanupDeferred => &[Starting, Failed, Destroying, CleanupDeferred],
    };
    for s in path {
        a.step(*s, since).unwrap();
    }
    if state == Pending {
        a.updated_at = since;
    }
    a
}

fn show(actions: &[Action]) -> String {
    actions
        .iter()
        .map(|a| a.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

/// Checks every transition the actions name is legal from where the previous left
/// the attempt, by applying them to a copy.
fn applies(a: &Attempt, actions: &[Action], now: Millis) {
    let mut x = a.clone();
    for act in actions {
        if let Action::Transition { to, .. } = act {
            x.recover(*to, now)
                .unwrap_or_else(|e| panic!("{e} in {}", show(actions)));
        }
    }
}

#[track_caller]
fn check_with(
    a: &Attempt,
    lines: &[&str],
    (process, reg): (ProcessStatus, Registration),
    want: Want,
    now: Millis,
    t: &Timeouts,
    expected: &str,
) {
    let events: Vec<_> = lines.iter().filter_map(|l| parse_line(l)).collect();
    assert_eq!(
        events.len(),
        lines.len(),
        "a test line did not parse: {lines:?}"
    );
    let obs = Observation {
        events: &events,
        process,
        registration: reg,
        oom_killed: false,
    };
    let got = watch(a, &obs, t, want, now);
    applies(a, &got, now);
    assert_eq!(
        show(&got),
        expected,
        "{} since .., lines {lines:?}",
        a.state
    );
}

#[track_caller]
fn check(a: Attempt, lines: &[&str], p: ProcessStatus, want: Want, now: Millis, expected: &str) {
    check_with(
        &a,
        lines,
        (p, Registration::Unknown),
        want,
        now,
        &T,
        expected,
    );
}

const NEEDED: Want = Want::Needed;
const SURPLUS: Want = Want::Surplus;
const DRAIN: Want = Want::Draining;

#[test]
fn lines_move_the_attempt_forward() {
    check(
        at(Starting, 0),
        &["√ Connected to GitHub"],
        Alive,
        NEEDED,
        5,
        "",
    );
    check(
        at(Starting, 0),
        &["2026-11-30 10:00:00Z: Listening for Jobs"],
        Alive,
        NEEDED,
        5,
        "-> idle",
    );
    check(
        at(Pending, 0),
        &["Listening for Jobs"],
        Alive,
        NEEDED,
        5,
        "-> idle",
    );
    check(
        at(Idle, 0),
        &["2026-11-30 10:00:05Z: Running job: build (ubuntu)"],
        Alive,
        SURPLUS,
        500,
        "job build (ubuntu); -> busy",
    );
    check(
        at(Starting, 0),
        &[
            "Listening for Jobs",
            "Running job: b",
            "Job b completed with result: Failed",
        ],
        Alive,
        NEEDED,
        5,
        "-> idle; job b; -> busy; -> finished completed_job (job Failed)",
    );
    // The process is still there: it gets its grace before cleanup kills the rest.
    check(at(Finished, 5), &[], Alive, NEEDED, 14, "");
    check(
        at(Finished, 5),
        &[],
        Alive,
        NEEDED,
        15,
        "kill; -> destroying; cleanup",
    );
    check(
        at(Finished, 5),
        &[],
        Exited { code: 0 },
        NEEDED,
        6,
        "-> destroying; cleanup",
    );
    check(
        Attempt {
            job_name: Some("b".into()),
            ..at(Busy, 0)
        },
        &["Job b completed with result: Succeeded"],
        Exited { code: 0 },
        NEEDED,
        5,
        "-> finished completed_job (job Succeeded); -> destroying; cleanup",
    );
    // Made busy by GitHub's list before its own line: the line still names the job,
    // once (a burst lost `burst-2`'s name this way).
    check(
        at(Busy, 0),
        &["Running job: b", "Job b completed with result: Succeeded"],
        Exited { code: 0 },
        NEEDED,
        5,
        "job b; -> finished completed_job (job Succeeded); -> destroying; cleanup",
    );
    check(
        at(Idle, 0),
        &["Job b completed with result: Canceled"],
        Alive,
        NEEDED,
        5,
        "job b; -> finished completed_job (job Canceled)",
    );
}

#[test]
fn exit_codes_map_to_outcomes() {
    let end = "-> destroying; cleanup";
    let cases: &[(AttemptState, &[&str], i32, &str)] = &[
        (
            Starting,
            &[],
            1,
            "-> failed failed (crashed_at_start (exit 1))",
        ),
        (
            Pending,
            &[],
            134,
            "-> failed failed (crashed_at_start (exit 134))",
        ),
        (
            Starting,
            &[],
            3,
            "-> failed failed (runner_updating (exit 3))",
        ),
        (Idle, &[], 4, "-> failed failed (runner_updating (exit 4))"),
        (Idle, &[], 5, "-> failed failed (session_conflict (exit 5))"),
        (
            Busy,
            &[],
            7,
            "-> failed failed (version_deprecated (exit 7))",
        ),
        (
            Idle,
            &[],
            2,
            "-> failed failed (exited_while_idle (exit 2))",
        ),
        (
            Busy,
            &[],
            1,
            "-> failed failed (exited_during_job (exit 1))",
        ),
        (
            Busy,
            &[],
            0,
            "-> finished completed_job (job ended (exit 0))",
        ),
        (
            Idle,
            &[],
            0,
            "-> finished exited_idle_without_work (exited_idle (exit 0))",
        ),
        (
            Idle,
            &["The runner no longer exists on the server."],
            0,
            "-> finished exited_idle_without_work (no_longer_exists)",
        ),
        (
            Starting,
            &["The runner no longer exists on the server."],
            0,
            "-> finished exited_idle_without_work (no_longer_exists)",
        ),
        (
            Idle,
            &["A session for this runner already exists."],
            5,
            "-> failed failed (session_conflict)",
        ),
    ];
    for (state, lines, code, want) in cases {
        check(
            at(*state, 0),
            lines,
            Exited { code: *code },
            NEEDED,
            5,
            &format!("{want}; {end}"),
        );
    }
    // A deprecated runner that keeps running is failed and stopped, not waited for.
    check(
        at(Idle, 0),
        &["An error occured: Runner version v2.1.0 is deprecated and cannot receive messages."],
        Alive,
        NEEDED,
        5,
        "-> failed failed (version_deprecated); stop 15 10ms",
    );
    // A busy runner is left to its job even then.
    check(
        at(Busy, 0),
        &["A session for this runner already exists."],
        Alive,
        DRAIN,
        5,
        "",
    );
}

#[test]
fn a_runner_gone_without_an_exit_is_orphaned() {
    check(
        at(Busy, 0),
        &[],
        Gone,
        NEEDED,
        5,
        "-> failed orphaned (process_gone); -> destroying; cleanup",
    );
    check(
        at(Idle, 0),
        &[],
        Gone,
        NEEDED,
        5,
        "-> failed orphaned (process_gone); -> destroying; cleanup",
    );
    // A pending attempt a crash left (no pid, no worker holds it) is seen as gone.
    check(
        at(Pending, 0),
        &[],
        Gone,
        NEEDED,
        5,
        "-> failed orphaned (process_gone); -> destroying; cleanup",
    );
}

#[test]
fn timeouts_each_with_its_reason() {
    check(at(Starting, 0), &[], Alive, NEEDED, 99, "");
    check(
        at(Starting, 0),
        &[],
        Alive,
        NEEDED,
        100,
        "-> failed failed (bootstrap_timeout); stop 15 10ms",
    );
    // Idle: only when not needed, counted from when it became idle.
    check(at(Idle, 100), &[], Alive, NEEDED, 10_000, "");
    check(at(Idle, 100), &[], Alive, SURPLUS, 149, "");
    check(
        at(Idle, 100),
        &[],
        Alive,
        SURPLUS,
        150,
        "deregister (idle_timeout)",
    );
    check(at(Idle, 100), &[], Alive, DRAIN, 101, "deregister (drain)");
    check(
        at(Starting, 0),
        &["Listening for Jobs"],
        Alive,
        SURPLUS,
        99,
        "-> idle",
    );
    // Busy: the job's ceiling, from when it became busy; none when not set.
    check(at(Busy, 100), &[], Alive, NEEDED, 1_099, "");
    check(
        at(Busy, 100),
        &[],
        Alive,
        NEEDED,
        1_100,
        "-> failed failed (job_timeout); stop 15 10ms",
    );
    check_with(
        &at(Busy, 100),
        &[],
        (Alive, Registration::Unknown),
        NEEDED,
        99_999,
        &NO_JOB_CEILING,
        "",
    );
}

#[test]
fn never_kill_a_busy_runner_to_scale_down() {
    for want in [NEEDED, SURPLUS, DRAIN] {
        for reg in [
            Registration::Unknown,
            Registration::Absent,
            Registration::Present { busy: true },
            Registration::Present { busy: false },
        ] {
            let got_busy = {
                let a = at(Busy, 0);
                watch(
                    &a,
                    &Observation {
                        events: &[],
                        process: Alive,
                        registration: reg,
                        oom_killed: false,
                    },
                    &NO_JOB_CEILING,
                    want,
                    1_000_000,
                )
            };
            assert!(got_busy.is_empty(), "{want:?} {reg:?}: {}", show(&got_busy));
        }
        // An idle runner GitHub lists as busy took a job we have not read yet.
        check_with(
            &at(Idle, 0),
            &[],
            (Alive, Registration::Present { busy: true }),
            want,
            1_000_000,
            &NO_JOB_CEILING,
            "-> busy",
        );
        // A runner that printed `Running job:` in this pass is not deregistered.
        check(
            at(Idle, 0),
            &["Running job: x"],
            Alive,
            want,
            1_000_000,
            "job x; -> busy",
        );
    }
    // The DELETE answered 422: it took a job meanwhile; nothing is stopped.
    let idle = at(Idle, 0);
    assert!(after_deregister(&idle, DeregisterResult::Busy, &T, 9).is_empty());
    assert!(after_deregister(&idle, DeregisterResult::Failed, &T, 9).is_empty());
    assert!(after_deregister(&at(Busy, 0), DeregisterResult::Deleted, &T, 9).is_empty());
}

#[test]
fn scale_down_deregisters_first_then_stops() {
    let mut idle = at(Idle, 0);
    // Recorded as intent before the DELETE.
    idle.reason = Some(Reason::new(ReasonKind::IdleTimeout));
    for r in [DeregisterResult::Deleted, DeregisterResult::NotFound] {
        let got = after_deregister(&idle, r, &T, 70);
        applies(&idle, &got, 70);
        assert_eq!(
            show(&got),
            "-> finished exited_idle_without_work (idle_timeout); stop 15 10ms"
        );
    }
    // The runner's own farewell after the DELETE, if read before the answer.
    check(
        idle.clone(),
        &["The runner no longer exists on the server."],
        Exited { code: 0 },
        SURPLUS,
        70,
        "-> finished exited_idle_without_work (idle_timeout); -> destroying; cleanup",
    );
    // A ghost: listening, but GitHub has no registration for it.
    check_with(
        &at(Idle, 0),
        &[],
        (Alive, Registration::Absent),
        NEEDED,
        5,
        &T,
        "-> finished exited_idle_without_work (registration_vanished); stop 15 10ms",
    );
    // Not yet registered while starting is no ghost: the bootstrap timeout decides.
    check_with(
        &at(Starting, 0),
        &[],
        (Alive, Registration::Absent),
        NEEDED,
        5,
        &T,
        "",
    );
}

#[test]
fn cleanup_retries_with_jittered_backoff() {
    let d = at(Destroying, 50);
    assert_eq!(show(&after_cleanup(&d, true, 0.5, 60)), "cleaned");
    assert_eq!(
        show(&after_cleanup(&d, false, 0.0, 60)),
        "-> cleanup_deferred; retry cleanup at 2560"
    );
    assert_eq!(
        show(&after_cleanup(&d, false, 1.0, 60)),
        "-> cleanup_deferred; retry cleanup at 5060"
    );
    let mut tried = d.clone();
    tried.cleanup_tries = 3;
    assert_eq!(
        show(&after_cleanup(&tried, false, 0.0, 0)),
        "-> cleanup_deferred; retry cleanup at 20000"
    );
    assert_eq!(cleanup_backoff(30, 1.0), 600_000, "capped");
    assert_eq!(cleanup_backoff(30, 0.0), 300_000);
    let mut prev = 0;
    for tries in 0..20 {
        let d = cleanup_backoff(tries, 1.0);
        assert!(d >= prev, "never shorter with more tries");
        prev = d;
    }
    let mut deferred = at(CleanupDeferred, 50);
    deferred.next_cleanup_at = Some(1_000);
    check(deferred.clone(), &[], Gone, NEEDED, 999, "");
    check(deferred, &[], Gone, NEEDED, 1_000, "-> destroying; cleanup");
    // Destroying at the start of a pass is a cleanup a crash interrupted.
    check(at(Destroying, 50), &[], Gone, NEEDED, 60, "cleanup");
    let mut cleaned = at(Destroying, 50);
    cleaned.cleaned = true;
    check(cleaned, &[], Gone, NEEDED, 60, "");
}

#[test]
fn timeouts_come_from_the_profile() {
    let mut p = crate::domain::ScalePolicy::new("p", "t", HOST);
    p.idle_timeout_secs = 60;
    p.bootstrap_timeout_secs = 120;
    p.job_timeout_secs = Some(3);
    assert_eq!(
        Timeouts::of(&p, 7),
        Timeouts {
            bootstrap: 120_000,
            idle: 60_000,
            job: Some(3_000),
            stop_grace: 7
        }
    );
}

#[test]
fn only_our_unexplained_registrations_are_deleted() {
    let reg = |id: i64, name: &str| crate::domain::RegisteredRunner {
        id,
        name: name.into(),
        online: true,
        busy: false,
        labels: vec![],
    };
    let runners = [
        reg(1, "rm-0123abcd-1"), // live attempt
        reg(2, "rm-0123abcd-2"), // cleaned attempt: left behind
        reg(3, "rm-0123abcd-3"), // no attempt at all
        reg(4, "rm-ffffffff-3"), // another host's
        reg(5, "build-box"),     // not ours
    ];
    let live = at(Busy, 0);
    let mut cleaned = at(Destroying, 0);
    cleaned.id = 2;
    cleaned.cleaned = true;
    let got: Vec<i64> = unexplained_registrations(HOST, &runners, &[live, cleaned])
        .iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(got, vec![2, 3]);
}

#[test]
fn an_oom_kill_ends_the_attempt_failed_with_reason_oom() {
    use super::lines::RunnerEvent;
    let obs = |process, events: &'static [RunnerEvent]| Observation {
        events,
        process,
        registration: Registration::Unknown,
        oom_killed: true,
    };
    // The listener itself killed by its memory limit (SIGKILL: 128 + 9).
    let a = at(Busy, 0);
    let got = watch(
        &a,
        &obs(Exited { code: 137 }, &[]),
        &NO_JOB_CEILING,
        Want::Needed,
        1_000,
    );
    assert!(
        show(&got).starts_with("-> failed failed (oom)"),
        "{}",
        show(&got)
    );
    // A job step killed, the runner reporting the job and exiting 0: still oom.
    static DONE: [RunnerEvent; 1] = [RunnerEvent::JobCompleted {
        name: String::new(),
        result: String::new(),
    }];
    let got = watch(
        &a,
        &obs(Exited { code: 0 }, &DONE),
        &NO_JOB_CEILING,
        Want::Needed,
        1_000,
    );
    assert!(show(&got).contains("failed failed (oom)"), "{}", show(&got));
    // While it runs, nothing is decided yet.
    let got = watch(&a, &obs(Alive, &[]), &NO_JOB_CEILING, Want::Needed, 1_000);
    assert!(got.is_empty(), "{}", show(&got));
}

#[test]
fn a_cleanup_deregisters_unless_the_runner_is_known_to_be_gone() {
    use crate::domain::Outcome;
    let ended = |runner_id: Option<i64>, outcome: Outcome, kind: ReasonKind| {
        let mut a = at(Finished, 0);
        a.runner_id = runner_id;
        a.outcome = Some(outcome);
        a.reason = Some(match kind {
            ReasonKind::Host
            | ReasonKind::RunnerGroup
            | ReasonKind::JitConfig
            | ReasonKind::Spawn
            | ReasonKind::NotStarted => Reason::message(kind, "x"),
            _ => Reason::new(kind),
        });
        a
    };
    // Finished its job, or deleted by GitHub when idle: nothing to ask.
    assert!(!may_be_registered(&ended(
        Some(4),
        Outcome::CompletedJob,
        ReasonKind::Job
    )));
    for kind in [ReasonKind::IdleTimeout, ReasonKind::Drain] {
        let a = ended(Some(4), Outcome::ExitedIdleWithoutWork, kind);
        assert!(!may_be_registered(&a), "{kind:?}");
    }
    // Anything else with an id may be; so may one whose JIT answer was lost.
    assert!(may_be_registered(&ended(
        Some(4),
        Outcome::Failed,
        ReasonKind::Spawn
    )));
    assert!(may_be_registered(&ended(
        None,
        Outcome::Failed,
        ReasonKind::JitConfig
    )));
    // A start refused before its JIT call never registered.
    for kind in [
        ReasonKind::NotStarted,
        ReasonKind::RunnerGroup,
        ReasonKind::Host,
    ] {
        assert!(
            !may_be_registered(&ended(None, Outcome::Failed, kind)),
            "{kind:?}"
        );
    }
}

/// Issue 48: a job that killed its own runner (`kill -9 -1`) leaves a registration
/// GitHub keeps busy for ten minutes. Its uid waits for the host's side only: every
/// step of it, and nothing of GitHub's.
#[test]
fn the_uid_is_free_once_the_hosts_side_is_done_never_before() {
    let done = HostSide {
        processes_gone: true,
        leftovers_removed: true,
        root_removed: true,
        cgroup_removed: true,
    };
    assert!(host_cleaned(&done));
    for missing in [
        HostSide {
            processes_gone: false,
            ..done
        },
        HostSide {
            leftovers_removed: false,
            ..done
        },
        HostSide {
            root_removed: false,
            ..done
        },
        HostSide {
            cgroup_removed: false,
            ..done
        },
    ] {
        assert!(!host_cleaned(&missing), "{missing:?}");
    }

    // A killed runner's attempt: failed, being cleaned up, its deregistration refused.
    let mut a = at(Busy, 10);
    assert!(
        !host_side_first(&a),
        "without a uid, GitHub first (its root stays)"
    );
    a.runner_uid = Some(61_000);
    assert!(host_side_first(&a));
    a.runner_gid = Some(61_000);
    a.end(
        crate::domain::Outcome::Failed,
        Some(Reason::new(ReasonKind::ExitedDuringJob)),
        20,
    )
    .unwrap();
    a.step(Destroying, 20).unwrap();
    assert_eq!(
        a.holds_uid(),
        Some(61_000),
        "held while the host's side is not done"
    );
    let acts = after_cleanup(&a, false, 0.0, 30);
    assert_eq!(acts.len(), 2, "{acts:?}");
    a.step(CleanupDeferred, 30).unwrap();
    assert_eq!(
        a.holds_uid(),
        Some(61_000),
        "a deferred cleanup alone frees nothing"
    );
    a.host_cleaned_at = Some(25);
    assert_eq!(
        a.holds_uid(),
        None,
        "free while GitHub keeps the registration"
    );
    assert!(!a.cleaned, "the attempt's bookkeeping still waits");
    // Cleaned without the column (a row an older build cleaned): free too.
    let mut b = at(Failed, 10);
    b.runner_uid = Some(61_001);
    b.mark_cleaned(40);
    assert_eq!(b.holds_uid(), None);
}

fn listed(name: &str, busy: bool) -> crate::domain::RegisteredRunner {
    crate::domain::RegisteredRunner {
        id: 1,
        name: name.into(),
        online: true,
        busy,
        labels: vec![],
    }
}

#[test]
fn only_a_list_read_after_the_runner_started_can_say_it_is_gone() {
    let mut a = Attempt::new(7, "linux", "t", "h", 1_000);
    a.step(Starting, 2_000).unwrap();
    a.step(Idle, 2_100).unwrap();
    let name = a.runner_name.clone();
    assert_eq!(registration(&a, None), Registration::Unknown);
    let ours = [listed(&name, true)];
    assert_eq!(
        registration(&a, Some((&ours, 1_500))),
        Registration::Present { busy: true },
        "listed is listed, whenever read"
    );
    let others = [listed("someone-else", false)];
    assert_eq!(
        registration(&a, Some((&others, 1_500))),
        Registration::Unknown,
        "a read begun before the runner started cannot show it"
    );
    assert_eq!(
        registration(&a, Some((&others, 2_000))),
        Registration::Unknown
    );
    assert_eq!(
        registration(&a, Some((&others, 2_001))),
        Registration::Absent
    );
}
