//! Credentials recover by themselves (issue 48, item 3): a token fixed after a 401 is
//! picked up with no restart (written in place, or named anew with `target set`), a
//! refused credential is shown as what it is and never as a rate limit (not after a
//! restart either), and a token file opened to others shows in `status`.

use super::support::*;
use runner_manager::domain::AttemptState;
use runner_manager::sim::{JobStatus, Latency, SimConfig};
use runner_manager::store::Store;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The 401's first backoff is a minute: a fixed token served well within it was not
/// waited for.
const SERVED_WITHIN: Duration = Duration::from_secs(30);

fn target_json(w: &World, name: &str) -> serde_json::Value {
    w.status_json()["targets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .cloned()
        .unwrap_or_default()
}

/// Waits for `status` to show target `t`'s credential refused, on the target and on
/// profile `p`; returns the target's error.
fn wait_refused(w: &World, t: &str, p: &str) -> String {
    let mut last = String::new();
    wait_until(SETTLE, "the 401 shown as credentials refused", || {
        let tj = target_json(w, t);
        last = tj["last_error"].as_str().unwrap_or_default().to_string();
        last.starts_with("credentials refused (401) since ")
            && tj["credential"]["refused_since"].is_string()
            && w.limiting(p).starts_with("credentials_refused (401 since ")
    });
    last
}

/// A good token, known to the sim, written over `file` in place (its mode kept).
fn fix_token(w: &World, file: &PathBuf, token: &str) {
    w.sim.add_pat(token);
    std::fs::write(file, format!("{token}\n")).unwrap();
}

/// Seconds from `from` until a runner of the profile spawned, and until its job was
/// taken.
fn served_after(w: &World, repo: &str, from: Instant) -> (f64, f64) {
    let mut spawned = None;
    wait_until(SERVED_WITHIN, "a runner spawned for the queued job", || {
        let up = w
            .attempts()
            .iter()
            .any(|a| a.state != AttemptState::Pending);
        if up && spawned.is_none() {
            spawned = Some(from.elapsed().as_secs_f64());
        }
        up
    });
    wait_until(SERVED_WITHIN, "the queued job taken", || {
        w.jobs_of(repo)
            .iter()
            .all(|j| j.status != JobStatus::Queued)
    });
    (spawned.unwrap(), from.elapsed().as_secs_f64())
}

/// A daemon started with a token the sim refuses; the file fixed in place; the queued
/// job is served with no restart. Returns the seconds from the fix to the runner's
/// spawn and to the job taken.
fn fixed_in_place(tag: &str, latency: Latency, poll_secs: u64) -> (f64, f64) {
    let mut w = World::with_sim(
        tag,
        2,
        SimConfig {
            latency,
            ..SimConfig::default()
        },
    );
    w.add_target("t", "acme/app", false);
    let store = w.store();
    let mut t = store.target("t").unwrap();
    t.poll_interval_secs = poll_secs;
    store.update_target(&t).unwrap();
    w.add_profile(ProfileSpec::new("p", "t", &["p"]));
    w.enqueue("acme/app", "j1", &["p"], 200);
    w.start_daemon();
    let shown = wait_refused(&w, "t", "p");
    assert!(!shown.contains("rate"), "{shown}");
    let file = w.dir.join("token-t");
    let fixed = Instant::now();
    fix_token(&w, &file, "ghp_fixed_in_place");
    let took = served_after(&w, "acme/app", fixed);
    eprintln!(
        "{tag}: fix to runner spawned {:.2} s, to job taken {:.2} s (latency {}, poll_interval {poll_secs}s)",
        took.0,
        took.1,
        latency.describe()
    );
    w.wait_settled(&["acme/app"]);
    w.check_invariants(&["acme/app"]);
    // The refusal is gone from `status` once the new token served.
    wait_until(SETTLE, "the refusal cleared", || {
        let tj = target_json(&w, "t");
        tj["last_error"].is_null() && tj["credential"]["refused_since"].is_null()
    });
    assert!(
        w.daemon_logs().contains("credential_changed"),
        "the change is logged"
    );
    assert!(w.stop_daemon().success());
    took
}

#[test]
fn a_token_fixed_in_place_after_a_401_serves_the_queued_job_with_no_restart() {
    fixed_in_place("cred-fix", Latency::default(), 5);
}

#[test]
fn a_token_fixed_in_place_is_picked_up_with_github_far_away() {
    fixed_in_place("cred-fix-far", Latency::FAR, 5);
}

#[test]
fn target_set_token_file_takes_effect_with_no_restart() {
    let mut w = World::new("cred-set", 2);
    w.add_target("t", "acme/app", false);
    w.add_profile(ProfileSpec::new("p", "t", &["p"]));
    w.enqueue("acme/app", "j1", &["p"], 200);
    w.start_daemon();
    wait_refused(&w, "t", "p");
    let good = w.dir.join("token-t-new");
    w.sim.add_pat("ghp_named_anew");
    std::fs::write(&good, "ghp_named_anew\n").unwrap();
    std::fs::set_permissions(&good, std::fs::Permissions::from_mode(0o600)).unwrap();
    let set = Instant::now();
    w.cli_ok(&[
        "target",
        "set",
        "t",
        &format!("token_file={}", good.display()),
    ]);
    let took = served_after(&w, "acme/app", set);
    eprintln!(
        "target set to runner spawned {:.2} s, to job taken {:.2} s",
        took.0, took.1
    );
    w.wait_settled(&["acme/app"]);
    w.check_invariants(&["acme/app"]);
    assert!(w.stop_daemon().success());
}

#[test]
fn a_restart_after_a_401_does_not_come_up_rate_limited() {
    let mut w = World::new("cred-restart", 2);
    w.add_target("t", "acme/app", false);
    w.add_profile(ProfileSpec::new("p", "t", &["p"]));
    w.enqueue("acme/app", "j1", &["p"], 200);
    w.start_daemon();
    wait_refused(&w, "t", "p");
    assert!(w.stop_daemon().success());
    // Our backoff is not GitHub's rate limit: nothing is kept for the next daemon.
    let kept = runner_manager::store::daemon_facts::rate_limit_hold(&w.store(), "t").unwrap();
    assert!(
        kept.is_none_or(|t| t <= runner_manager::timefmt::now_millis()),
        "a 401's backoff kept as a rate-limit hold: {kept:?}"
    );
    let before = w.log().iter().filter(|e| e.status == 401).count();
    w.start_daemon();
    // The restarted daemon asks GitHub again at once, and says what it found.
    let mut seen = Vec::new();
    wait_until(SETTLE, "the restarted daemon refused again", || {
        let limit = w.limiting("p");
        if !limit.is_empty() {
            seen.push(limit.clone());
        }
        w.log().iter().filter(|e| e.status == 401).count() > before
            && limit.starts_with("credentials_refused")
    });
    assert!(
        seen.iter().all(|l| !l.starts_with("rate_limited")),
        "shown as a rate limit after the restart: {seen:?}"
    );
    // And the fix works for this daemon too.
    fix_token(&w, &w.dir.join("token-t"), "ghp_after_restart");
    served_after(&w, "acme/app", Instant::now());
    w.wait_settled(&["acme/app"]);
    w.check_invariants(&["acme/app"]);
    assert!(w.stop_daemon().success());
}

#[test]
fn a_token_file_opened_to_others_under_the_daemon_shows_in_status_and_serving_goes_on() {
    let mut w = World::new("cred-open", 2);
    w.add_target("t", "acme/app", true);
    w.add_profile(ProfileSpec::new("p", "t", &["p"]));
    w.start_daemon();
    wait_until(SETTLE, "the target read", || {
        target_json(&w, "t")["rate_limit_remaining"].is_number()
    });
    let file = w.dir.join("token-t");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut problem = String::new();
    wait_until(SETTLE, "the open token file in status", || {
        problem = target_json(&w, "t")["credential"]["problem"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        !problem.is_empty()
    });
    assert!(
        problem.contains("mode 0644") && problem.contains("chmod 600"),
        "{problem}"
    );
    let text = w.cli_ok(&["status"]);
    assert!(text.contains("credential of t: "), "{text}");
    // The token read before serves on meanwhile.
    w.enqueue("acme/app", "j1", &["p"], 200);
    served_after(&w, "acme/app", Instant::now());
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    wait_until(SETTLE, "the problem cleared", || {
        target_json(&w, "t")["credential"]["problem"].is_null()
    });
    w.wait_settled(&["acme/app"]);
    w.check_invariants(&["acme/app"]);
    assert!(w.stop_daemon().success());
}

#[test]
fn a_token_github_says_expires_soon_shows_in_status() {
    let mut w = World::new("cred-expiry", 2);
    w.add_target("t", "acme/app", false);
    w.add_profile(ProfileSpec::new("p", "t", &["p"]));
    // Two days left, to the second (GitHub's header has no milliseconds).
    let at = (runner_manager::timefmt::now_millis() / 1000 + 2 * 86_400) * 1000;
    w.sim.add_expiring_pat("ghp_expiring", at);
    std::fs::write(w.dir.join("token-t"), "ghp_expiring\n").unwrap();
    w.start_daemon();
    let want = runner_manager::timefmt::format_rfc3339(at);
    wait_until(SETTLE, "the expiry in status --json", || {
        target_json(&w, "t")["credential"]["expires_at"] == want.as_str()
    });
    let text = w.cli_ok(&["status"]);
    assert!(
        text.contains(&format!("credential of t: expires at {want}")),
        "{text}"
    );
    assert!(w.stop_daemon().success());
}
