//! The rate-limit budget (issue 20): a restart costs what a poll costs (the queue's
//! validators are kept in the store, so the next daemon's first read is answered with
//! 304s), and a thin budget stretches the poll interval so it lasts to the reset,
//! which `status` shows.

use super::support::*;
use runner_manager::sim::{LogEntry, SimConfig};
use runner_manager::store::Store;
use runner_manager::timefmt::now_millis;

/// GETs of the REST queue: a runs list or a run's jobs list.
fn queue_reads(log: &[LogEntry], since: i64) -> Vec<&LogEntry> {
    log.iter()
        .filter(|e| e.method == "GET" && e.at >= since && e.endpoint.contains("/actions/runs"))
        .collect()
}

#[test]
fn a_restart_reads_an_unchanged_queue_with_304s() {
    let mut w = World::new("etags-restart", 4);
    w.add_target("t", "acme/app", true);
    w.add_profile(ProfileSpec::new("p", "t", &["p"]));
    // Jobs no profile serves: they stay queued, so the queue does not change.
    for i in 0..5 {
        w.enqueue("acme/app", &format!("other-{i}"), &["other"], 300);
    }
    w.start_daemon();
    let jobs_read = |w: &World, since: i64| {
        queue_reads(&w.log(), since)
            .iter()
            .filter(|e| e.endpoint.ends_with("/jobs"))
            .count()
    };
    wait_until(SETTLE, "every run's jobs read once", || {
        jobs_read(&w, 0) >= 5
    });
    // The two runs lists and five jobs lists are kept.
    wait_until(SETTLE, "the validators kept in the store", || {
        w.store().etags("t").map_or(0, |e| e.len()) >= 7
    });
    w.kill_daemon();
    let since = now_millis();
    w.start_daemon();
    wait_until(SETTLE, "the new daemon's first read of every run", || {
        jobs_read(&w, since) >= 5
    });
    let log = w.log();
    let reads = queue_reads(&log, since);
    let spent: Vec<_> = reads.iter().filter(|e| e.counted).collect();
    assert!(
        spent.is_empty(),
        "the first read after a restart spent units: {spent:#?}"
    );
    assert!(reads.iter().all(|e| e.status == 304), "{reads:#?}");
    assert!(w.stop_daemon().success());
}

#[test]
fn a_thin_budget_stretches_the_poll_interval_and_status_says_so() {
    // 100 units an hour: at a read a second the budget would be gone in minutes.
    let cfg = SimConfig {
        rate_limit: 100,
        ..SimConfig::default()
    };
    let mut w = World::with_sim("budget-paced", 4, cfg);
    w.add_target("t", "acme/app", true);
    w.add_profile(ProfileSpec::new("p", "t", &["p"]));
    w.start_daemon();
    wait_until(SETTLE, "status showing the paced poll", || {
        let st = w.status_json();
        let t = &st["targets"][0];
        t["poll_paced"] == true
            && t["rate_limit"]["limit"] == 100
            && t["poll_every_secs"].as_f64().is_some_and(|s| s > 1.0)
    });
    let text = w.cli_ok(&["status"]);
    assert!(text.contains("paced"), "{text}");
    assert!(text.contains("/100, resets "), "{text}");
    // Paced: no read comes for (up to 5 s of) the interval status names.
    let every = w.status_json()["targets"][0]["poll_every_secs"]
        .as_f64()
        .unwrap();
    let last = queue_reads(&w.log(), 0).last().map_or(0, |e| e.at);
    let window = ((every * 1000.0) as i64 - 1000).clamp(0, 5_000);
    let left = (last + window - now_millis()).max(0) as u64;
    let read_again = poll_until(std::time::Duration::from_millis(left), || {
        queue_reads(&w.log(), last + 1)
            .iter()
            .any(|e| e.at < last + window)
    });
    assert!(
        !read_again,
        "read again before the paced interval ({every} s)"
    );
    assert!(w.stop_daemon().success());
}

/// POSTs for JIT configs the simulated GitHub answered.
fn jit_configs(log: &[LogEntry]) -> usize {
    log.iter()
        .filter(|e| e.method == "POST" && e.endpoint.ends_with("/generate-jitconfig"))
        .count()
}

#[test]
fn a_targets_secondary_limit_paces_its_jit_configs_and_off_lifts_it() {
    let mut w = World::new("secondary-limit", 8);
    w.add_target("t", "acme/app", true);
    // 30 points a minute, kept a point below: five JIT configs (5 points each).
    w.cli_ok(&["target", "set", "t", "secondary_limit=30"]);
    let shown = w.cli_ok(&["--json", "target", "show", "t"]);
    assert!(shown.contains("\"secondary_limit\": 30"), "{shown}");
    w.add_profile(ProfileSpec::new("p", "t", &["p"]).max(8));
    for i in 0..8 {
        w.enqueue("acme/app", &format!("job-{i}"), &["p"], 60_000);
    }
    w.start_daemon();
    wait_until(SETTLE, "five JIT configs, the other starts paced", || {
        jit_configs(&w.log()) == 5 && w.limiting("p").starts_with("paced: 3 starts wait")
    });
    // The window is a minute: no sixth comes within the next few seconds.
    let sixth = poll_until(std::time::Duration::from_secs(3), || {
        jit_configs(&w.log()) > 5
    });
    assert!(!sixth, "a sixth JIT config inside the minute");
    // A GHES whose admin turned the limits off: the daemon stops pacing at once.
    w.cli_ok(&["target", "set", "t", "secondary_limit=off"]);
    wait_until(SETTLE, "the three waiting starts made", || {
        jit_configs(&w.log()) == 8
    });
    assert!(w.stop_daemon().success());
}
