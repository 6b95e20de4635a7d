//! The daemon on a `demand=scaleset` profile: the real binary, the sim's scale set
//! service and long poll, simulated runners as real processes. Jobs reach the profile
//! with `runs-on: <profile>` (the scale set's name and only label), are served each
//! exactly once, a SIGKILL mid-stream loses none (`lastMessageId` persisted) and its
//! session, recorded, is deleted by the restarted daemon, which opens its own at once;
//! a session not ours (409) at startup is waited out, not crash-looped; SIGTERM ends
//! the session even in the middle of a long poll; acks and acquires refused with 401
//! are sent again after a session refresh; a reassigned job is served once; `status`,
//! `target check`, `doctor` and the metrics show the session (held, its last message,
//! a conflict's reason). Two tests print figures: the scale set path against REST
//! polling, and a SIGKILL's cost.

use super::metrics::{metrics_addr_in, scrape, value};
use super::support::*;
use runner_manager::domain::{AttemptState, DemandSource, ScalePolicy};
use runner_manager::metrics::names;
use runner_manager::scaleset::checkpoint_key;
use runner_manager::sim::{FaultAction, FaultRule, JobStatus};
use runner_manager::store::Store;
use std::time::Duration;

const REPO: &str = "acme/ss";
const PROFILE: &str = "ss-linux";

/// A profile whose demand is the scale set named after it.
fn add_scaleset_profile(w: &World, name: &str, max: u32) {
    let store = w.store();
    let host = store.host_or_create().unwrap();
    let mut p = ScalePolicy::new(name, "t", &host.id);
    p.set_labels("--labels", &[name.to_string()], &host.os, &host.arch)
        .unwrap();
    p.max_capacity = max;
    p.idle_timeout_secs = 1;
    p.bootstrap_timeout_secs = 15;
    p.runner_dir = Some(w.runner_dir.clone());
    p.demand = DemandSource::Scaleset;
    store.add_profile(&p).unwrap();
}

fn world(tag: &str, capacity: u32, max: u32) -> World {
    let mut w = World::new(tag, capacity);
    w.add_target("t", REPO, true);
    add_scaleset_profile(&w, PROFILE, max);
    w
}

/// The scale set the daemon created, once it holds a session on it.
fn wait_for_session(w: &World) -> u64 {
    let mut id = 0;
    wait_until(SETTLE, "the daemon's scale set session", || {
        match w.sim.scale_sets().iter().find(|s| s.1 == PROFILE) {
            Some(s) => {
                id = s.0;
                w.sim.scaleset_sessions(id) == 1
            }
            None => false,
        }
    });
    id
}

fn enqueue(w: &World, name: &str, ms: u64) -> u64 {
    w.sim.enqueue_job(REPO, name, &[PROFILE], ms)
}

const MESSAGES: &str = "/_services/broker/_apis/runtime/runnerscalesets/{id}/messages";
const MESSAGE: &str = "/_services/broker/_apis/runtime/runnerscalesets/{id}/messages/{message}";
const SESSIONS: &str = "/_services/pipelines/_apis/runtime/runnerscalesets/{id}/sessions";
const SESSION: &str = "/_services/pipelines/_apis/runtime/runnerscalesets/{id}/sessions/{session}";
const ACQUIRE: &str = "/_services/pipelines/_apis/runtime/runnerscalesets/{id}/acquirejobs";
const JIT: &str = "/_services/pipelines/_apis/runtime/runnerscalesets/{id}/generatejitconfig";

/// The request log in order of arrival (it is kept in order of completion, and a long
/// poll completes late).
fn sorted_log(w: &World) -> Vec<runner_manager::sim::LogEntry> {
    let mut log = w.log();
    log.sort_by_key(|e| e.at);
    log
}

/// The session and queue calls in order of arrival, as `METHOD /tail status`.
fn queue_wire(w: &World) -> Vec<String> {
    sorted_log(w)
        .iter()
        .filter(|e| [MESSAGES, MESSAGE, SESSIONS, SESSION, ACQUIRE].contains(&e.endpoint.as_str()))
        .map(|e| {
            let tail = e
                .endpoint
                .rsplit("runnerscalesets/{id}")
                .next()
                .unwrap_or("");
            format!("{} {tail} {}", e.method, e.status)
        })
        .collect()
}

fn last_message_id(w: &World, scale_set_id: u64) -> Option<i64> {
    w.store()
        .kv_get(&checkpoint_key("t", scale_set_id as i64))
        .unwrap()
        .map(|v| v.parse().unwrap())
}

fn rest_queue_reads(w: &World) -> usize {
    w.log()
        .iter()
        .filter(|e| e.endpoint.contains("/actions/runs") || e.endpoint.contains("/jobs"))
        .count()
}

#[test]
fn a_standalone_host_serves_scale_set_jobs_each_once() {
    let mut w = world("ss-serve", 4, 3);
    w.start_daemon();
    let set = wait_for_session(&w);
    let (_, _, labels, group, no_update) =
        w.sim.scale_sets().into_iter().find(|s| s.0 == set).unwrap();
    assert_eq!(labels, vec![PROFILE.to_string()]);
    assert_eq!(group, 1);
    assert!(no_update, "the scale set must disable runner updates");
    for i in 0..6 {
        enqueue(&w, &format!("j{i}"), 300);
    }
    w.wait_settled(&[REPO]);
    w.check_invariants(&[REPO]);
    // Every runner was the scale set's (its JIT came from the scale set endpoint) and
    // no queued-jobs REST read was spent on a target whose profiles all use it.
    assert!(
        w.log()
            .iter()
            .any(|e| e.method == "POST" && e.endpoint.ends_with("/generatejitconfig")),
        "no scale set JIT config was asked for"
    );
    assert_eq!(
        w.log()
            .iter()
            .filter(|e| e.endpoint.ends_with("/generate-jitconfig"))
            .count(),
        0,
        "a REST JIT config was asked for a scale set profile"
    );
    assert_eq!(rest_queue_reads(&w), 0, "REST queued jobs were polled");
    assert!(last_message_id(&w, set).unwrap_or(0) > 0);
    let stats = w.sim.scaleset_statistics(set);
    assert_eq!(stats["totalAssignedJobs"], 0);
    assert!(w.stop_daemon().success());
    // SIGTERM closed the session, so the next holder need not wait for it to expire.
    assert_eq!(w.sim.scaleset_sessions(set), 0, "the session was left open");
}

#[test]
fn sigkill_in_a_message_stream_loses_no_job() {
    let mut w = world("ss-kill", 4, 3);
    // A stale session lasts this long after its holder died.
    w.sim.scaleset_config(|c| c.session_ttl_ms = 2_500);
    w.start_daemon();
    let set = wait_for_session(&w);
    for i in 0..4 {
        enqueue(&w, &format!("a{i}"), 1_500);
    }
    wait_until(SETTLE, "messages handled and a runner spawned", || {
        last_message_id(&w, set).is_some() && w.attempts().iter().any(|a| a.pid.is_some())
    });
    w.kill_daemon();
    let persisted = last_message_id(&w, set).unwrap();
    // Jobs assigned while no daemon runs: their messages wait in the queue.
    for i in 0..3 {
        enqueue(&w, &format!("b{i}"), 300);
    }
    w.start_daemon();
    w.wait_settled(&[REPO]);
    w.check_invariants(&[REPO]);
    assert!(last_message_id(&w, set).unwrap() > persisted);
    assert!(w.daemon_exited().is_none(), "the daemon exited");
    assert!(w.stop_daemon().success());
}

/// The profile's `session` object of `status --json`.
fn session_json(w: &World) -> serde_json::Value {
    w.status_json()["profiles"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["name"] == PROFILE))
        .map(|p| p["session"].clone())
        .unwrap_or_default()
}

/// Issue 15: a scale set profile's session is shown wherever a REST profile's state
/// is: `status --json` (raw values) and `status` (human units), `target check`,
/// `doctor` and the metrics say it is held, since when, and what came last; the
/// session's queue token is nowhere; SIGTERM leaves it recorded as closed.
#[test]
fn status_shows_the_session_held_with_its_last_message() {
    let mut w = world("ss-state", 2, 2);
    w.start_daemon_with(&["--metrics-listen", "127.0.0.1:0"]);
    let set = wait_for_session(&w);
    let job = enqueue(&w, "shown", 200);
    wait_until(SETTLE, "the job served", || {
        w.sim.job(job).unwrap().status == JobStatus::Completed
    });
    wait_until(SETTLE, "status showing the session with a message", || {
        let s = session_json(&w);
        s["held"] == true && s["last_message_id"].as_i64().unwrap_or(0) > 0
    });
    let s = session_json(&w);
    assert_eq!(s["state"], "held", "{s}");
    assert_eq!(s["scale_set_id"], set, "{s}");
    assert_eq!(
        w.sim.scaleset_session_ids(set),
        [s["session_id"].as_str().unwrap()],
        "{s}"
    );
    for at in [
        "held_since",
        "last_message_at",
        "last_poll_at",
        "updated_at",
    ] {
        assert!(
            s[at].as_str().is_some_and(|t| t.ends_with('Z')),
            "{at}: {s}"
        );
    }
    assert!(s["reason"].is_null() && s["retry_at"].is_null(), "{s}");
    let keys: Vec<&str> = s.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "held",
            "held_since",
            "last_message_at",
            "last_message_id",
            "last_poll_at",
            "reason",
            "retry_at",
            "scale_set_id",
            "session_id",
            "state",
            "updated_at"
        ]
    );

    let human = w.cli_ok(&["status"]);
    let row = human
        .lines()
        .skip_while(|l| !l.starts_with("SCALE SET"))
        .find(|l| l.starts_with(PROFILE))
        .unwrap_or_else(|| panic!("no session row:\n{human}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[1], "held", "{human}");
    assert!(cells[3].starts_with('#') && cells[5] == "ago", "{human}");
    let check = w.cli_ok(&["target", "check", "t"]);
    assert!(
        check.lines().any(|l| l.starts_with("ok")
            && l.contains("scale set session")
            && l.contains("held for")),
        "{check}"
    );
    let doctor = String::from_utf8_lossy(&w.cli(&["doctor"]).stdout).to_string();
    assert!(
        doctor
            .lines()
            .any(|l| l.starts_with("ok") && l.contains("target t scale set session")),
        "{doctor}"
    );

    let addr = metrics_addr_in(&w.daemon_log_path(1));
    wait_until(SETTLE, "the session gauges", || {
        let fams = scrape(&addr);
        let of = |name| value(&fams, name, name, &[("profile", PROFILE)]);
        of(names::SESSION_HELD) == Some(1.0)
            && of(names::SINCE_MESSAGE).is_some_and(|v| v >= 0.0)
            && of(names::SINCE_POLL).is_some_and(|v| v >= 0.0)
    });

    // The session's token (the secret that reads its queue) is shown nowhere.
    let tokens = w.sim.scaleset_queue_tokens(set);
    assert!(!tokens.is_empty());
    let shown = format!(
        "{}{human}{check}{doctor}{}",
        w.cli_ok(&["--json", "status"]),
        serde_json::to_string(&format!("{:?}", w.store().session_statuses().unwrap())).unwrap()
    );
    for t in &tokens {
        assert!(!shown.contains(t.as_str()), "a queue token was shown");
    }

    assert!(w.stop_daemon().success());
    let s = session_json(&w);
    assert_eq!(s["state"], "closed", "{s}");
    assert_eq!(s["held"], false, "{s}");
    assert!(
        s["session_id"].is_null() && s["last_message_id"].as_i64() > Some(0),
        "{s}"
    );
}

/// A session that is not ours (another host, another manager: no record of ours names
/// it) is waited out with backoff, its holder named in `status`, and never deleted.
#[test]
fn a_session_not_ours_at_startup_is_waited_out_not_crash_looped() {
    let mut w = world("ss-409", 2, 2);
    w.sim.scaleset_config(|c| c.session_ttl_ms = 3_000);
    w.start_daemon();
    let set = wait_for_session(&w);
    assert!(w.stop_daemon().success());
    // Another manager takes the session while this one is down.
    let foreign = "runner-manager@another-host";
    let held = w.sim.scaleset_foreign_session(set, foreign);
    w.start_daemon();
    let profile_error = |w: &World| {
        w.status_json()["profiles"]
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["name"] == PROFILE))
            .and_then(|p| p["last_error"].as_str().map(String::from))
    };
    // Meanwhile `status` says why the profile starts nothing, and whose session it is.
    wait_until(SETTLE, "status naming the session conflict", || {
        profile_error(&w).is_some_and(|e| {
            e.contains("holds this scale set's message session") && e.contains(foreign)
        })
    });
    // So does its session: in conflict, the reason naming the other owner, the next
    // try; and `target check` fails on it, `doctor` warns, both naming the owner.
    wait_until(SETTLE, "the session in conflict", || {
        let s = session_json(&w);
        s["state"] == "conflict"
            && s["held"] == false
            && s["reason"].as_str().is_some_and(|r| {
                r.contains("RunnerScaleSetSessionConflictException") || r.contains(foreign)
            })
            && s["retry_at"].is_string()
    });
    let check = w.cli(&["target", "check", "t"]);
    let text = String::from_utf8_lossy(&check.stdout);
    assert_eq!(check.status.code(), Some(1), "{text}");
    assert!(
        text.lines().any(|l| l.starts_with("FAIL")
            && l.contains("scale set session")
            && l.contains("conflict")
            && l.contains(foreign)),
        "{text}"
    );
    let doctor = w.cli(&["doctor"]);
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        text.lines().any(|l| l.starts_with("WARN")
            && l.contains("target t scale set session")
            && l.contains(foreign)),
        "{text}"
    );
    let human = w.cli_ok(&["status"]);
    assert!(
        human
            .lines()
            .any(|l| l.starts_with(PROFILE) && l.contains("conflict") && l.contains(foreign)),
        "{human}"
    );
    let job = enqueue(&w, "after-409", 200);
    wait_until(
        SETTLE,
        "the job served after the foreign session expired",
        || w.sim.job(job).unwrap().status == JobStatus::Completed,
    );
    let conflicts = w.sim.session_conflicts();
    assert!(conflicts >= 1, "the daemon never met the foreign session");
    // Jittered backoff from 2 s over a ~3 s conflict: a handful of tries, not a loop.
    assert!(conflicts <= 5, "{conflicts} session tries in a few seconds");
    assert!(
        !w.log()
            .iter()
            .any(|e| e.method == "DELETE" && e.path.contains(&format!("/sessions/{held}"))),
        "a session not ours was deleted"
    );
    assert!(w.daemon_exited().is_none(), "the daemon exited on a 409");
    assert_eq!(w.sim.scaleset_sessions(set), 1);
    wait_until(SETTLE, "the conflict gone from status", || {
        profile_error(&w).is_none()
    });
    wait_until(SETTLE, "the session held again", || {
        let s = session_json(&w);
        s["state"] == "held" && s["reason"].is_null()
    });
    w.wait_settled(&[REPO]);
    w.check_invariants(&[REPO]);
    assert!(w.stop_daemon().success());
}

/// Issue 15, item 3: after a SIGKILL the restarted daemon deletes the session the
/// killed one recorded and opens its own at once, instead of meeting 409 until the
/// service expires it (60 s here, longer than any wait below). It prints the issue's
/// figures: the new session within 2 s of the kill, queued-to-spawned p99 under 3 s.
#[test]
fn sigkill_deletes_our_own_session_and_opens_a_new_one_at_once() {
    const JOBS: usize = 10;
    let mut w = world("ss-kill-session", 4, 4);
    w.sim.scaleset_config(|c| c.session_ttl_ms = 60_000);
    w.start_daemon();
    let set = wait_for_session(&w);
    let old = w.sim.scaleset_session_ids(set);
    for i in 0..JOBS / 2 {
        enqueue(&w, &format!("k{i}"), 300);
        std::thread::sleep(Duration::from_millis(150)); // the load's arrival rate
    }
    w.kill_daemon();
    let killed = runner_manager::timefmt::now_millis();
    w.start_daemon();
    for i in JOBS / 2..JOBS {
        enqueue(&w, &format!("k{i}"), 300);
        std::thread::sleep(Duration::from_millis(150));
    }
    w.wait_settled(&[REPO]);
    w.check_invariants(&[REPO]);
    let mut log: Vec<_> = w.log().into_iter().filter(|e| e.at >= killed).collect();
    log.sort_by_key(|e| e.at);
    let sessions: Vec<String> = log
        .iter()
        .filter(|e| e.endpoint.contains("/sessions"))
        .map(|e| {
            format!(
                "{} {} {}",
                e.method,
                e.path.rsplit('/').next().unwrap(),
                e.status
            )
        })
        .collect();
    // The killed daemon's session, deleted before the new one was asked for.
    assert_eq!(
        sessions.first(),
        Some(&format!("DELETE {} 204", old[0])),
        "{sessions:?}"
    );
    assert_eq!(w.sim.session_conflicts(), 0, "{sessions:?}");
    let opened = log
        .iter()
        .find(|e| e.method == "POST" && e.endpoint.ends_with("/sessions") && e.status == 200)
        .expect("a new session");
    let to_session = opened.at - killed;
    let (all, p50, p99) = latencies(&w);
    eprintln!(
        "figures (SIGKILL mid-stream, {JOBS} jobs): kill -> new session {to_session} ms; \
         queued -> spawned p50 {p50} ms p99 {p99} ms ({all:?})"
    );
    // No timing is asserted (benchmarks measure, tests hold behaviour): the DELETE
    // first and no 409 above are what make the new session come at once; waiting the
    // old one out would take the whole 60 s.
    assert!(
        to_session < 30_000,
        "new session {to_session} ms after the kill: the old one was waited out"
    );
    assert!(w.stop_daemon().success());
}

/// Issue 15, item 1, in the daemon: an ack refused with 401 is sent again after the
/// session refresh and before the next poll, so the message is not left unacked.
#[test]
fn an_ack_refused_with_401_is_sent_again_before_the_next_poll() {
    let mut w = world("ss-ack401", 2, 2);
    w.start_daemon();
    let set = wait_for_session(&w);
    w.sim.add_fault(FaultRule::times(
        "DELETE",
        MESSAGE,
        1,
        FaultAction::Unauthorized,
    ));
    enqueue(&w, "acked", 200);
    w.wait_settled(&[REPO]);
    w.check_invariants(&[REPO]);
    let wire = queue_wire(&w);
    let refused = wire
        .iter()
        .position(|c| c == "DELETE /messages/{message} 401")
        .expect("the refused ack");
    assert_eq!(
        wire[refused..refused + 4],
        [
            "DELETE /messages/{message} 401",
            "PATCH /sessions/{session} 200",
            "DELETE /messages/{message} 204",
            "GET /messages 200",
        ],
        "{wire:?}"
    );
    // The same message's ack was sent again.
    let deletes: Vec<String> = sorted_log(&w)
        .into_iter()
        .filter(|e| e.endpoint == MESSAGE)
        .map(|e| e.path.split('?').next().unwrap().to_string())
        .collect();
    assert!(deletes.windows(2).any(|d| d[0] == d[1]), "{deletes:?}");
    assert!(w.stop_daemon().success());
    let left: Vec<_> = w
        .sim
        .scaleset_messages(set)
        .into_iter()
        .filter(|m| !m.1)
        .collect();
    assert!(left.is_empty(), "messages left unacked: {left:?}");
}

/// Issue 15, item 2, in the daemon: a 401 on `acquirejobs` refreshes the session and
/// acquires again at once, with no long poll in between.
#[test]
fn a_401_on_acquirejobs_is_retried_at_once() {
    let mut w = world("ss-acq401", 2, 2);
    w.sim.scaleset_config(|c| c.offer_first = true);
    w.start_daemon();
    wait_for_session(&w);
    w.sim.add_fault(FaultRule::times(
        "POST",
        ACQUIRE,
        1,
        FaultAction::Unauthorized,
    ));
    enqueue(&w, "offered", 200);
    w.wait_settled(&[REPO]);
    w.check_invariants(&[REPO]);
    let wire = queue_wire(&w);
    let refused = wire
        .iter()
        .position(|c| c == "POST /acquirejobs 401")
        .expect("the refused acquire");
    assert_eq!(
        wire[refused..refused + 3],
        [
            "POST /acquirejobs 401",
            "PATCH /sessions/{session} 200",
            "POST /acquirejobs 200",
        ],
        "{wire:?}"
    );
    // No poll between the refused acquire and its retry: the listener did not back off
    // for the next poll (the figure is printed, not asserted).
    let log = sorted_log(&w);
    let acquires: Vec<_> = log.iter().filter(|e| e.endpoint == ACQUIRE).collect();
    eprintln!(
        "figures: the acquire was retried {} ms after its 401",
        acquires[1].at - acquires[0].at
    );
    assert!(w.stop_daemon().success());
}

/// Issue 15, item 5: GitHub requeues an assignment no runner took in time
/// (`JobCompleted` canceled, then the job offered again): the job is served once, by
/// one runner, and no second runner is started for it.
#[test]
fn a_reassigned_job_is_served_once_by_one_runner() {
    let mut w = world("ss-reassign", 4, 4);
    w.start_daemon();
    wait_for_session(&w);
    // The first runner's JIT config is slow: the job is still queued when GitHub
    // gives up on the assignment.
    w.sim.add_fault(FaultRule::times(
        "POST",
        JIT,
        1,
        FaultAction::Delay { ms: 1_500 },
    ));
    let job = enqueue(&w, "requeued", 200);
    wait_until(SETTLE, "a runner decided for the job", || {
        !w.attempts().is_empty()
    });
    assert!(w.sim.scaleset_reassign(job), "the job was taken already");
    w.wait_settled(&[REPO]);
    w.check_invariants(&[REPO]);
    let attempts = w.attempts();
    assert_eq!(attempts.len(), 1, "runners started: {attempts:?}");
    assert_eq!(
        w.sim.job(job).unwrap().runner_name.as_deref(),
        Some(attempts[0].runner_name.as_str())
    );
    assert!(w.stop_daemon().success());
}

#[test]
fn sigterm_mid_long_poll_ends_the_session_so_a_restart_needs_no_wait() {
    let mut w = world("ss-term", 2, 2);
    // GitHub holds a poll about 50 s; the daemon must not wait for it to end.
    w.sim.scaleset_config(|c| c.hold_ms = 120_000);
    w.start_daemon();
    let set = wait_for_session(&w);
    let job = enqueue(&w, "before", 200);
    wait_until(SETTLE, "the first job served", || {
        w.sim.job(job).unwrap().status == JobStatus::Completed
    });
    // The listener is back in a poll the sim holds for two minutes.
    assert!(w.stop_daemon().success());
    assert_eq!(
        w.sim.scaleset_sessions(set),
        0,
        "the session outlived the daemon"
    );
    w.start_daemon();
    wait_for_session(&w);
    let job = enqueue(&w, "after", 200);
    wait_until(SETTLE, "the job after the restart served", || {
        w.sim.job(job).unwrap().status == JobStatus::Completed
    });
    let conflicts = w.sim.session_conflicts();
    assert_eq!(conflicts, 0, "the restart met a stale session");
    w.wait_settled(&[REPO]);
    w.check_invariants(&[REPO]);
    assert!(w.stop_daemon().success());
}

/// Regression (found by the chaos suite with `--scaleset`): the listener's client did
/// not know the target's `retry-after`, so a restarted daemon asked for a registration
/// token with the held credential at once.
#[test]
fn a_retry_after_holds_the_scale_set_listener_across_a_restart() {
    let mut w = world("ss-403", 4, 2);
    // The killed daemon's session may be open: the next one waits it out (409).
    w.sim.scaleset_config(|c| c.session_ttl_ms = 2_500);
    w.add_profile(ProfileSpec::new("p", "t", &["p"]));
    w.sim.add_fault(FaultRule::times(
        "GET",
        "/repos/{owner}/{repo}/actions/runs",
        1,
        FaultAction::Forbidden {
            retry_after: Some(5),
        },
    ));
    w.start_daemon();
    wait_hold_recorded(&w, "t");
    w.kill_daemon();
    let restarted = runner_manager::timefmt::now_millis();
    w.start_daemon();
    enqueue(&w, "ss-job", 300);
    w.enqueue(REPO, "rest-job", &["p"], 300);
    w.wait_settled(&[REPO]);
    w.check_invariants(&[REPO]);
    let log = w.log();
    let limited = log.iter().find(|e| e.status == 403).unwrap();
    // The first daemon's listener may have sent while the 403 was on its way back to
    // the target loop (they share the credential, not the connection); the restarted
    // daemon knows the hold before its first request.
    assert_quiet_within_since(&log, limited, 5000, restarted);
    assert!(w.stop_daemon().success());
}

#[test]
fn target_check_and_doctor_report_the_scale_set() {
    let mut w = world("ss-check", 2, 2);
    let before = w.cli_ok(&["target", "check", "t"]);
    assert!(
        before.contains("scale set") && before.contains("not created yet"),
        "{before}"
    );
    w.start_daemon();
    let set = wait_for_session(&w);
    let after = w.cli_ok(&["target", "check", "t"]);
    assert!(after.contains(&format!("exists (id {set}")), "{after}");
    let doctor = w.cli(&["doctor"]);
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        text.lines()
            .any(|l| l.contains("target t scale set") && l.contains(&format!("id {set}"))),
        "{text}"
    );
    assert!(w.stop_daemon().success());
}

/// When the runner that served each job was started (entered `starting`, just before
/// its spawn) after the job was queued, in ms; p50 and p99 over the jobs.
fn latencies(w: &World) -> (Vec<i64>, i64, i64) {
    let mut out: Vec<i64> = w
        .sim
        .jobs()
        .iter()
        .filter(|j| j.repo == REPO)
        .map(|j| {
            let a = w.attempt_of_job(&j.name);
            let started = a
                .history
                .iter()
                .find(|c| c.state == AttemptState::Starting)
                .map_or(a.created_at, |c| c.at);
            (started - j.created_at).max(0)
        })
        .collect();
    out.sort_unstable();
    let pct = |p: f64| out[((out.len() as f64 * p).ceil() as usize).clamp(1, out.len()) - 1];
    let (p50, p99) = (pct(0.50), pct(0.99));
    (out, p50, p99)
}

/// The same stream of jobs through the scale set and through REST polling (1 s): job
/// queued → runner spawned, and rate-limit units per served job. Printed (run with
/// `--nocapture`), never asserted; the runs must still serve every job once.
#[test]
fn figures_scale_set_against_rest_polling() {
    const JOBS: usize = 12;
    let stream = |w: &World, labels: &[&str]| {
        for i in 0..JOBS {
            w.sim.enqueue_job(REPO, &format!("f{i}"), labels, 200);
            std::thread::sleep(Duration::from_millis(150)); // the load's arrival rate
        }
    };

    let mut ss = world("ss-fig", 4, 4);
    ss.start_daemon();
    wait_for_session(&ss);
    let before = ss.log().iter().filter(|e| e.counted).count();
    stream(&ss, &[PROFILE]);
    ss.wait_settled(&[REPO]);
    ss.check_invariants(&[REPO]);
    let ss_total = ss.log().iter().filter(|e| e.counted).count();
    let ss_units = ss_total - before;
    let (_, ss50, ss99) = latencies(&ss);
    assert!(ss.stop_daemon().success());

    let mut rest = World::new("rest-fig", 4);
    rest.add_target("t", REPO, true);
    rest.add_profile(ProfileSpec::new("p", "t", &["p"]).max(4).idle_timeout(1));
    rest.start_daemon();
    wait_until(SETTLE, "the first queue read", || {
        rest_queue_reads(&rest) > 0
    });
    let before = rest.log().iter().filter(|e| e.counted).count();
    stream(&rest, &["self-hosted", "p"]);
    rest.wait_settled(&[REPO]);
    rest.check_invariants(&[REPO]);
    let rest_total = rest.log().iter().filter(|e| e.counted).count();
    let rest_units = rest_total - before;
    let (_, r50, r99) = latencies(&rest);
    assert!(rest.stop_daemon().success());

    eprintln!(
        "figures ({JOBS} jobs, one per 150 ms, 200 ms each, max 4):\n\
         \x20 scale set:   queued→spawned p50 {ss50} ms  p99 {ss99} ms  rate-limit units/job {:.2} (whole run, startup included: {ss_total})\n\
         \x20 REST (1 s):  queued→spawned p50 {r50} ms  p99 {r99} ms  rate-limit units/job {:.2} (whole run, startup included: {rest_total})",
        ss_units as f64 / JOBS as f64,
        rest_units as f64 / JOBS as f64,
    );
}
