//! What demand counts (issue 21, item 5): a run GitHub holds in `waiting` (a
//! deployment's required reviewers, a concurrency group) holds jobs no runner can take
//! yet, so it starts no runner and asks for no JIT config; once approved, its job is
//! queued and served like any other.

use super::support::*;

const JIT: &str = "/repos/{owner}/{repo}/actions/runners/generate-jitconfig";
const RUNS: &str = "/repos/{owner}/{repo}/actions/runs";
const JOBS: &str = "/repos/{owner}/{repo}/actions/runs/{run_id}/jobs";

#[test]
fn a_waiting_run_starts_no_runner_until_it_is_approved() {
    let mut w = World::new("waiting", 2);
    w.add_target("t", "acme/app", true);
    w.add_profile(ProfileSpec::new("linux", "t", &["linux"]).max(2));
    let (run, job) = w
        .sim
        .enqueue_waiting_job("acme/app", "deploy", &["linux"], 200);
    w.start_daemon();
    // Three reads of the run lists after the daemon began: it has looked at the queue
    // several times with the run waiting.
    let lists = || w.sim.count("GET", RUNS);
    wait_until(SETTLE, "the daemon to read the run lists", || lists() >= 2);
    let seen = lists();
    wait_until(SETTLE, "three more reads of the run lists", || {
        lists() >= seen + 3
    });
    assert_eq!(
        w.sim.count("POST", JIT),
        0,
        "a JIT config for a waiting run"
    );
    assert_eq!(
        w.sim.count("GET", JOBS),
        0,
        "a waiting run's jobs were read"
    );
    assert!(w.attempts().is_empty(), "{:#?}", w.outcomes());
    assert!(w.sim.runners().is_empty());
    let linux = w.status_json()["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "linux")
        .cloned()
        .unwrap();
    assert_eq!(linux["demand"], 0, "{linux:#}");

    // Approved: the job is queued, and served once, by one runner.
    assert_eq!(w.sim.approve_run(run), [job]);
    let done = w.finished(job);
    assert_eq!(done.conclusion.as_deref(), Some("success"), "{done:?}");
    w.wait_settled(&["acme/app"]);
    w.check_invariants(&["acme/app"]);
    assert_eq!(w.attempts().len(), 1, "{:#?}", w.outcomes());
    assert_eq!(w.sim.count("POST", JIT), 1);
    assert!(w.stop_daemon().success());
}
