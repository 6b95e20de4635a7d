//! Runner processes that misbehave: a crash at start, a hang before `Listening for
//! Jobs` (bootstrap timeout), an exit non-zero after a job. Each is recorded with its
//! reason and cleaned up, and the job is still served by a later runner.

use super::support::*;
use runner_manager::domain::{AttemptState, Outcome, Reason, ReasonKind};
use runner_manager::sim::{RunnerFault, RunnerFaultRule, Trigger};
use std::time::Duration;

#[test]
fn crash_hang_and_bad_exit_are_recorded_cleaned_and_the_job_still_served() {
    let mut w = World::new("rfaults", 4);
    w.add_target("t", "acme/app", true);
    w.add_profile(
        ProfileSpec::new("p", "t", &["p"])
            .max(1)
            .bootstrap_timeout(3),
    );
    // Attempt ids count from 1 in a fresh store, and with max 1 they come one at a
    // time: runner 1 crashes, runner 2 hangs, runner 3 serves the job and exits 1.
    let prefix = w.runner_prefix();
    for (n, fault) in [
        (1, RunnerFault::CrashAtStart),
        (2, RunnerFault::HangBeforeListening),
        (3, RunnerFault::ExitNonZeroAfterJob),
    ] {
        w.sim.add_runner_fault(RunnerFaultRule {
            name_prefix: Some(format!("{prefix}{n}")),
            trigger: Trigger::Times(1),
            fault,
        });
    }
    w.enqueue("acme/app", "build", &["p"], 300);
    w.start_daemon();
    w.wait_settled(&["acme/app"]);
    w.check_invariants(&["acme/app"]);
    let mut attempts = w.attempts();
    attempts.sort_by_key(|a| a.id);
    assert_eq!(attempts.len(), 3, "{:#?}", w.outcomes());

    let crashed = &attempts[0];
    assert_eq!(crashed.outcome, Some(Outcome::Failed), "{crashed:?}");
    assert_eq!(
        crashed.reason.as_ref().map(Reason::kind),
        Some(ReasonKind::CrashedAtStart),
        "{crashed:?}"
    );
    assert_eq!(crashed.exit_code, Some(1), "{crashed:?}");

    let hung = &attempts[1];
    assert_eq!(hung.outcome, Some(Outcome::Failed), "{hung:?}");
    assert_eq!(
        hung.reason,
        Some(Reason::new(ReasonKind::BootstrapTimeout)),
        "{hung:?}"
    );
    assert!(
        !hung.history.iter().any(|h| h.state == AttemptState::Idle),
        "a hung runner never listened: {hung:?}"
    );

    let served = &attempts[2];
    assert_eq!(served.outcome, Some(Outcome::CompletedJob), "{served:?}");
    assert_eq!(served.job_name.as_deref(), Some("build"));
    assert_eq!(
        served.exit_code,
        Some(1),
        "the bad exit is on record: {served:?}"
    );
    assert_eq!(w.attempt_of_job("build").id, served.id);
    assert!(w.stop_daemon().success());
}

/// Issue 34, item 1: a runner killed mid-job by a signal we did not send (a host's OOM
/// killer, a `kill -9`) lost its job to the host, and the ledger says so.
#[test]
fn a_runner_killed_mid_job_is_a_job_lost_to_the_host() {
    let mut w = World::new("rfaults-lost", 4);
    w.add_target("t", "acme/app", true);
    w.add_profile(ProfileSpec::new("p", "t", &["p"]).max(1));
    w.enqueue("acme/app", "long", &["p"], 60_000);
    w.start_daemon();
    let busy = busy_runner(&w, &[]);
    // SAFETY: the runner's own pid, as the daemon recorded it while it runs.
    unsafe { libc::kill(busy.pid.unwrap(), libc::SIGKILL) };
    wait_until(SETTLE, "the attempt ended", || {
        w.attempts()
            .iter()
            .any(|a| a.id == busy.id && a.outcome.is_some())
    });
    let ended = w.attempts().into_iter().find(|a| a.id == busy.id).unwrap();
    assert_eq!(
        runner_manager::domain::loss::loss(&ended),
        Some(runner_manager::domain::loss::Loss::Killed { signal: 9 }),
        "{ended:?}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&w.cli_ok(&["--json", "attempt", "show", &busy.id.to_string()]))
            .unwrap();
    assert_eq!(v["job_lost"]["reason"], "killed", "{v}");
    let list = w.cli_ok(&["attempts"]);
    // "(job lost)" once the daemon settles it off, "(job lost, re-run pending)" before.
    assert!(list.contains("(job lost"), "{list}");

    // GitHub's verdict: the runner stopped renewing the job, which fails with its
    // message once the lost-runner timeout passes (ten minutes on GitHub).
    let job = w.sim.jobs().into_iter().find(|j| j.name == "long").unwrap();
    assert_eq!(job.conclusion, None, "in progress until GitHub gives up");
    w.sim.set_lost_runner_timeout(Duration::from_secs(1));
    wait_until(SETTLE, "GitHub failing the lost job", || {
        w.sim
            .job(job.id)
            .is_some_and(|j| j.conclusion.as_deref() == Some("failure"))
    });
    let failed = w.sim.job(job.id).unwrap();
    assert!(
        failed
            .output
            .as_deref()
            .is_some_and(|o| o.contains("lost communication with the server")),
        "{failed:?}"
    );
    // Re-run through GitHub's endpoint: queued again as a new job, and served.
    let token = std::fs::read_to_string(w.dir.join("token-t")).unwrap();
    let auth = format!("Bearer {}", token.trim());
    let rerun = |id: u64| {
        runner_manager::sim::client::request(
            w.sim.url(),
            "POST",
            &format!("/repos/acme/app/actions/jobs/{id}/rerun"),
            &[("authorization", &auth)],
            None,
            Duration::from_secs(5),
        )
        .unwrap()
        .status
    };
    assert_eq!(rerun(job.id), 201);
    assert_eq!(w.sim.reruns(), 1);
    wait_until(SETTLE, "the re-run job served", || {
        w.sim.jobs().iter().any(|j| {
            j.name == "long"
                && j.id != job.id
                && j.status == runner_manager::sim::JobStatus::InProgress
        })
    });
    w.stop_daemon();
}

/// Waits for a runner of ours busy with a job (its pid recorded), other than the
/// attempts in `not`, and returns its attempt.
fn busy_runner(w: &World, not: &[i64]) -> runner_manager::domain::Attempt {
    let mut busy = None;
    wait_until(SETTLE, "a runner busy with a job", || {
        busy = w
            .attempts()
            .into_iter()
            .find(|a| a.state == AttemptState::Busy && a.pid.is_some() && !not.contains(&a.id));
        busy.is_some()
    });
    busy.unwrap()
}

/// Waits for a runner of ours busy with a job, other than the attempts in `not`, kills
/// it with SIGKILL as a host's OOM killer would, and returns its attempt id once the
/// daemon has ended it.
fn kill_busy_runner(w: &World, not: &[i64]) -> i64 {
    let busy = busy_runner(w, not);
    // SAFETY: the runner's own pid, as the daemon recorded it while it runs.
    unsafe { libc::kill(busy.pid.unwrap(), libc::SIGKILL) };
    wait_until(SETTLE, "the killed runner's attempt ended", || {
        w.attempts()
            .iter()
            .any(|a| a.id == busy.id && a.outcome.is_some())
    });
    busy.id
}

fn rerun_of(w: &World, attempt: i64) -> serde_json::Value {
    let v: serde_json::Value =
        serde_json::from_str(&w.cli_ok(&["--json", "attempt", "show", &attempt.to_string()]))
            .unwrap();
    v["rerun"].clone()
}

/// Issue 34, items 2 and 4: with `rerun_lost=on`, a job lost to a SIGKILLed runner is
/// re-run through GitHub's endpoint once GitHub has failed it, and served again; lost
/// a second time, it is never re-run twice.
#[test]
fn a_lost_job_is_rerun_once_when_its_profile_asks_and_never_twice() {
    let mut w = World::new("rfaults-rerun", 4);
    w.add_target("t", "acme/app", true);
    w.add_profile(ProfileSpec::new("p", "t", &["p"]).max(1));
    let set = w.cli_ok(&["profile", "set", "p", "rerun_lost=on"]);
    assert!(set.contains("rerun_lost"), "{set}");
    // GitHub fails a lost job ten minutes after its last renewal; here, a second.
    w.sim.set_lost_runner_timeout(Duration::from_secs(1));
    w.enqueue("acme/app", "long", &["p"], 60_000);
    w.start_daemon();

    let first = kill_busy_runner(&w, &[]);
    wait_until(SETTLE, "the daemon re-running the lost job", || {
        rerun_of(&w, first)["state"] == "rerun"
    });
    assert_eq!(w.sim.reruns(), 1);
    let failed: Vec<_> = w
        .sim
        .jobs()
        .into_iter()
        .filter(|j| j.name == "long" && j.conclusion.as_deref() == Some("failure"))
        .collect();
    assert_eq!(
        failed.len(),
        1,
        "GitHub failed the lost job first: {failed:?}"
    );
    let list = w.cli_ok(&["attempts"]);
    assert!(list.contains("(job lost, re-run)"), "{list}");
    let status = w.cli_ok(&["status"]);
    assert!(
        status.contains("jobs lost to the host in the last day: p 1 (1 re-run)"),
        "{status}"
    );

    // The re-run is served by a new runner, which is lost too: never a second re-run.
    let second = kill_busy_runner(&w, &[first]);
    wait_until(SETTLE, "the second loss settled", || {
        let r = rerun_of(&w, second);
        r.is_null() || (r["state"] != "waiting" && r["state"].is_string())
    });
    let r = rerun_of(&w, second);
    assert!(r.is_null() || r["state"] == "again", "{r}");
    wait_until(SETTLE, "GitHub failing the re-run job as lost", || {
        w.sim
            .jobs()
            .iter()
            .filter(|j| j.name == "long" && j.conclusion.as_deref() == Some("failure"))
            .count()
            == 2
    });
    assert_eq!(w.sim.reruns(), 1, "a job is re-run once, never twice");
    w.stop_daemon();
}

/// Starts the daemon and, once a runner of ours is busy with a job, crashes the host
/// under it: the daemon and the runner SIGKILLed together. Returns the attempt.
fn crash_under_a_busy_runner(w: &mut World) -> i64 {
    w.start_daemon();
    let busy = busy_runner(w, &[]);
    w.kill_daemon();
    // SAFETY: the runner's own pid, as the daemon recorded it while it ran.
    unsafe { libc::kill(busy.pid.unwrap(), libc::SIGKILL) };
    busy.id
}

/// A host crash: the daemon and its runner die together, and the next daemon finds
/// the runner gone. No source may have named the job yet (in-progress runs are read
/// every 10 s), and while the host was down GitHub failed it and newer runs ended, so
/// the newest completed runs hold other jobs: the search looks only through runs
/// created by the loss, and the job is re-run.
#[test]
fn a_job_lost_in_a_host_crash_is_found_and_rerun_past_newer_runs() {
    let mut w = World::new("rfaults-crash", 4);
    w.add_target("t", "acme/app", true);
    w.add_profile(ProfileSpec::new("p", "t", &["p"]).max(1));
    w.cli_ok(&["profile", "set", "p", "rerun_lost=on"]);
    w.sim.set_lost_runner_timeout(Duration::from_secs(1));
    let lost = w.enqueue("acme/app", "long", &["p"], 60_000);
    let lost_by = crash_under_a_busy_runner(&mut w);
    // GitHub fails the job a while after its runner stopped (the sim, as requests
    // come; none come from a host that is down).
    wait_until(SETTLE, "GitHub failing the lost job", || {
        w.sim.with_state(|st| {
            st.fail_lost_jobs(runner_manager::timefmt::now_millis());
            st.jobs[&lost].conclusion.as_deref() == Some("failure")
        })
    });
    // Twelve runs created after the loss, ended while the host was down (a minute,
    // served elsewhere).
    let later: Vec<u64> = (0..12)
        .map(|i| w.enqueue("acme/app", &format!("later-{i}"), &["elsewhere"], 10))
        .collect();
    w.sim.with_state(|st| {
        for id in &later {
            let j = st.jobs.get_mut(id).expect("enqueued");
            j.status = runner_manager::sim::JobStatus::Completed;
            j.conclusion = Some("success".into());
            j.created_at += 60_000;
            let run = j.run_id;
            st.runs.get_mut(&run).expect("its run").created_at += 60_000;
        }
    });
    w.start_daemon();
    wait_until(SETTLE, "the daemon re-running the lost job", || {
        rerun_of(&w, lost_by)["state"] == "rerun"
    });
    assert_eq!(w.sim.reruns(), 1);
    w.stop_daemon();
}

/// A host crash under an organization's job polled over REST: REST names a job's runner
/// when it reads the in-progress runs, every 10 s, so a runner lost in its first
/// seconds leaves its row without a repository. The next daemon's first read names
/// it, and its attempt and row take the repository and run. The row looks again every
/// 10 s and the job is re-run in seconds: it used to wait two minutes before it looked
/// again.
#[test]
fn an_organization_job_lost_in_a_host_crash_is_named_by_the_next_daemon_and_rerun() {
    let mut w = World::new("rfaults-org", 4);
    w.add_org_target("org", "acme", &[("app", false)]);
    w.add_profile(ProfileSpec::new("p", "org", &["p"]).max(1));
    w.cli_ok(&["profile", "set", "p", "rerun_lost=on"]);
    // In progress long enough for the next daemon's first read to name it.
    w.sim.set_lost_runner_timeout(Duration::from_secs(20));
    w.enqueue("acme/app", "long", &["p"], 120_000);
    let lost_by = crash_under_a_busy_runner(&mut w);
    w.start_daemon();
    wait_until(
        Duration::from_secs(90),
        "the daemon re-running the lost job",
        || rerun_of(&w, lost_by)["state"] == "rerun",
    );
    assert_eq!(rerun_of(&w, lost_by)["repo"], "acme/app");
    assert_eq!(w.sim.reruns(), 1);
    w.stop_daemon();
}

/// Issue 34, item 2: when GitHub refuses the re-run (a fine-grained token without
/// Actions: write), the daemon says so once, with the fix, and never asks again.
#[test]
fn a_rerun_github_refuses_is_said_once_with_the_fix_and_not_asked_again() {
    let mut w = World::new("rfaults-refused", 4);
    w.add_target("t", "acme/app", true);
    let token = std::fs::read_to_string(w.dir.join("token-t")).unwrap();
    // Everything the daemon needs but the right to re-run (Actions: read only).
    w.sim.add_fine_grained_pat(
        token.trim(),
        &[
            ("administration", "write"),
            ("actions", "read"),
            ("metadata", "read"),
        ],
    );
    w.add_profile(ProfileSpec::new("p", "t", &["p"]).max(1));
    w.cli_ok(&["profile", "set", "p", "rerun_lost=on"]);
    w.sim.set_lost_runner_timeout(Duration::from_secs(1));
    w.enqueue("acme/app", "long", &["p"], 60_000);
    w.start_daemon();
    let lost = kill_busy_runner(&w, &[]);
    wait_until(SETTLE, "the re-run settled", || {
        rerun_of(&w, lost)["state"] != "waiting"
    });
    let r = rerun_of(&w, lost);
    assert_eq!(r["state"], "refused", "{r}");
    let detail = r["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("Actions: write") && detail.contains("Resource not accessible"),
        "GitHub's words and the fix: {detail}"
    );
    assert_eq!(w.sim.reruns(), 0);
    let list = w.cli_ok(&["attempts"]);
    assert!(list.contains("(job lost, not re-run)"), "{list}");
    w.stop_daemon();
    let log = w.daemon_logs();
    let said = log
        .lines()
        .filter(|l| l.contains("lost_job_rerun_refused"))
        .count();
    assert_eq!(said, 1, "said once:\n{log}");
}

/// A runner install that crashes at start (a missing library, a broken release) must
/// not have the daemon register runner after runner: before this, 174 in 7 s until
/// GitHub's per-minute points ran out. Three crashes in a row hold the profile's
/// starts (30 s, doubling while none listens); the next runner after the hold serves.
#[test]
fn runners_that_crash_at_start_three_in_a_row_hold_the_profile_then_one_serves() {
    let mut w = World::new("rfaults-crashloop", 4);
    w.add_target("t", "acme/app", true);
    w.add_profile(ProfileSpec::new("p", "t", &["p"]).max(1));
    let prefix = w.runner_prefix();
    for n in 1..=3 {
        w.sim.add_runner_fault(RunnerFaultRule {
            name_prefix: Some(format!("{prefix}{n}")),
            trigger: Trigger::Times(1),
            fault: RunnerFault::CrashAtStart,
        });
    }
    w.enqueue("acme/app", "build", &["p"], 300);
    w.start_daemon();
    wait_until(SETTLE, "status says the starts are held", || {
        w.cli_ok(&["status"]).contains("starts held")
    });
    let status = w.cli_ok(&["status"]);
    assert!(
        status.contains("after runners crashed at start (1 in a row): 3 in a row"),
        "{status}"
    );
    wait_until(
        Duration::from_secs(60),
        "the job served after the hold",
        || w.all_completed(&["acme/app"]),
    );
    w.wait_settled(&["acme/app"]);
    w.check_invariants(&["acme/app"]);
    let mut ran: Vec<_> = w
        .attempts()
        .into_iter()
        .filter(|a| a.pid.is_some())
        .collect();
    ran.sort_by_key(|a| a.id);
    assert_eq!(
        ran.len(),
        4,
        "three crashed, the fourth served: {:#?}",
        w.outcomes()
    );
    for a in &ran[..3] {
        assert_eq!(
            a.reason.as_ref().map(Reason::kind),
            Some(ReasonKind::CrashedAtStart),
            "{a:?}"
        );
    }
    assert_eq!(ran[3].outcome, Some(Outcome::CompletedJob), "{:?}", ran[3]);
    // The fourth runner waited out the hold: nothing was registered in between.
    let third_ended = ran[2].ended_at.unwrap();
    assert!(
        ran[3].created_at - third_ended >= 25_000,
        "the fourth runner started {} ms after the third crashed",
        ran[3].created_at - third_ended
    );
    let jit = w
        .sim
        .request_log()
        .iter()
        .filter(|e| e.endpoint.ends_with("generate-jitconfig") && e.status == 201)
        .count();
    assert_eq!(jit, 4, "one JIT config per runner that ran");
}
