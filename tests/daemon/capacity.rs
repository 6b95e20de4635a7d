//! The ceilings: `max_capacity` per profile and the host's capacity across profiles,
//! sampled throughout a burst; `min_capacity` keeps idle runners warm with no jobs.

use super::support::*;
use runner_manager::domain::{AttemptState, Limit, Outcome, Reason, ReasonKind};
use runner_manager::store::Store;
use std::time::{Duration, Instant};

/// Samples live attempts (the daemon's own count) and our registrations per profile
/// until `done`; returns the highest of each seen, per profile and in total.
fn sample_peaks(
    w: &World,
    mut done: impl FnMut(&World) -> bool,
) -> (std::collections::BTreeMap<String, u32>, u32, u32) {
    let mut peak = std::collections::BTreeMap::new();
    let mut peak_total = 0;
    let mut peak_regs = 0;
    wait_until(SETTLE, "the burst to be served", || {
        let live = w.live_by_profile();
        for (p, n) in &live {
            let e = peak.entry(p.clone()).or_insert(0);
            *e = (*e).max(*n);
        }
        peak_total = peak_total.max(live.values().sum::<u32>());
        peak_regs = peak_regs.max(w.our_registrations().len() as u32);
        done(w)
    });
    (peak, peak_total, peak_regs)
}

#[test]
fn max_capacity_holds_through_a_burst() {
    let mut w = World::new("max", 8);
    w.add_target("t", "acme/app", true);
    w.add_profile(ProfileSpec::new("small", "t", &["small"]).max(2));
    for i in 0..6 {
        w.enqueue("acme/app", &format!("j{i}"), &["small"], 400);
    }
    w.start_daemon();
    let (peak, total, regs) = sample_peaks(&w, |w| w.all_completed(&["acme/app"]));
    assert_eq!(
        peak.get("small"),
        Some(&2),
        "the ceiling was reached, never passed"
    );
    assert!(
        total <= 2 && regs <= 2,
        "total {total}, registrations {regs}"
    );
    w.wait_settled(&["acme/app"]);
    w.check_invariants(&["acme/app"]);
    let completed = w
        .attempts()
        .iter()
        .filter(|a| a.outcome == Some(Outcome::CompletedJob))
        .count();
    assert_eq!(completed, 6);
    assert!(w.stop_daemon().success());
}

#[test]
fn host_capacity_holds_across_two_profiles() {
    let mut w = World::new("hostcap", 3);
    w.add_target("t", "acme/app", true);
    w.add_profile(ProfileSpec::new("alpha", "t", &["alpha"]).max(3));
    w.add_profile(ProfileSpec::new("beta", "t", &["beta"]).max(3));
    for i in 0..4 {
        w.enqueue("acme/app", &format!("a{i}"), &["alpha"], 500);
        w.enqueue("acme/app", &format!("b{i}"), &["beta"], 500);
    }
    w.start_daemon();
    let mut saw_host_limit = false;
    let (peak, total, regs) = sample_peaks(&w, |w| {
        if !saw_host_limit {
            saw_host_limit = w
                .store()
                .profile_statuses()
                .unwrap()
                .iter()
                .any(|p| p.limiting == Limit::HostCapacity.into());
        }
        w.all_completed(&["acme/app"])
    });
    assert_eq!(total, 3, "host capacity reached, never passed ({peak:?})");
    assert!(regs <= 3, "registrations {regs}");
    assert!(peak.values().all(|n| *n <= 3), "{peak:?}");
    assert!(
        saw_host_limit,
        "status never named host_capacity as the limit"
    );
    w.wait_settled(&["acme/app"]);
    w.check_invariants(&["acme/app"]);
    assert!(w.stop_daemon().success());
}

#[test]
fn min_capacity_keeps_idle_runners_warm_without_jobs() {
    let mut w = World::new("min", 4);
    w.add_target("t", "acme/app", true);
    w.add_profile(
        ProfileSpec::new("warm", "t", &["warm"])
            .min(2)
            .max(3)
            .idle_timeout(1),
    );
    w.start_daemon();
    wait_until(SETTLE, "two idle runners", || {
        w.in_state(AttemptState::Idle).len() == 2
    });
    // Watch for well past idle_timeout: the warm runners stay, none is added.
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        let live = w.live_attempts();
        assert_eq!(live.len(), 2, "{live:?}");
        assert_eq!(w.attempts().len(), 2, "no runner was replaced");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(w.our_registrations().len(), 2);
    // Demand beyond min: a job takes one, and a new one is started to stay warm.
    w.enqueue("acme/app", "j1", &["warm"], 300);
    wait_until(SETTLE, "the job served and two idle again", || {
        w.all_completed(&["acme/app"]) && w.in_state(AttemptState::Idle).len() == 2
    });
    w.cli_ok(&["profile", "set", "warm", "min=0"]);
    w.wait_settled(&["acme/app"]);
    w.check_invariants(&["acme/app"]);
    for a in w.attempts() {
        if a.job_name.is_none() {
            assert_eq!(a.outcome, Some(Outcome::ExitedIdleWithoutWork), "{a:?}");
            assert_eq!(
                a.reason,
                Some(Reason::new(ReasonKind::IdleTimeout)),
                "{a:?}"
            );
        }
    }
    assert!(w.stop_daemon().success());
}
