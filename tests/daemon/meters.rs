//! Live meters end to end: while a runner is busy, `attempts --json` and `status
//! --json` carry its figures (read from the store the daemon writes every few
//! seconds), and once the attempt is cleaned its meter rows are gone and the figures
//! live on in the attempt's own row.

use super::support::*;
use runner_manager::domain::AttemptState;
use runner_manager::store::Store;

#[test]
fn a_busy_attempt_shows_live_figures_while_its_runner_runs() {
    let mut w = World::new("meters", 2);
    w.add_target("t", "acme/app", true);
    w.add_profile(ProfileSpec::new("linux", "t", &["linux"]));
    w.start_daemon();
    // Long enough to look at the attempt while it is busy; the waits below end as
    // soon as their conditions hold.
    w.enqueue("acme/app", "long", &["linux"], 20_000);
    wait_until(SETTLE, "a busy runner", || {
        w.in_state(AttemptState::Busy).len() == 1
    });
    let id = w.in_state(AttemptState::Busy)[0].id;

    let mut seen = serde_json::Value::Null;
    wait_until(SETTLE, "live figures in attempts --json", || {
        seen = w.active_json(id);
        !seen["meter"].is_null()
    });
    // Read in one snapshot: the figures are there while the runner is still busy.
    assert_eq!(seen["state"], "busy", "{seen:#}");
    assert!(seen["peak_rss_bytes"].as_u64().unwrap() > 0, "{seen:#}");
    assert!(seen["cpu_millis"].is_u64(), "{seen:#}");
    let m = &seen["meter"];
    assert!(m["rss_bytes"].as_u64().unwrap() > 0, "{seen:#}");
    assert!(m["processes"].as_u64().unwrap() >= 1, "{seen:#}");
    assert!(m["cpu_percent"].as_f64().unwrap() >= 0.0, "{seen:#}");
    assert!(
        m["peak_rss_bytes"].as_u64() >= m["rss_bytes"].as_u64(),
        "{seen:#}"
    );
    // The attempt row itself is not rewritten for the meters.
    assert_eq!(w.attempt(id).peak_rss_bytes, None);

    let status = w.status_json();
    let linux = status["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "linux")
        .unwrap()
        .clone();
    if w.attempt(id).state == AttemptState::Busy {
        assert_eq!(linux["meters"]["metered"], 1, "{linux:#}");
        assert!(linux["meters"]["rss_bytes"].as_u64().unwrap() > 0);
    }
    // People read units, not bytes.
    let shown = w.cli_ok(&["attempt", "show", &id.to_string()]);
    assert!(
        shown.lines().any(|l| l.starts_with("peak_rss")
            && (l.ends_with("KiB") || l.ends_with("MiB") || l.ends_with("GiB"))),
        "{shown}"
    );

    w.wait_settled(&["acme/app"]);
    w.check_invariants(&["acme/app"]);
    // Cleaned: the meter rows went, the attempt row keeps its peak and CPU time.
    let s = w.store();
    assert!(s.live_meters().unwrap().is_empty());
    assert!(s.meter_points(id).unwrap().is_empty());
    let a = w.attempt(id);
    assert!(a.peak_rss_bytes.unwrap() > 0, "{a:?}");
    assert!(a.cpu_millis.is_some(), "{a:?}");
    assert!(w.stop_daemon().success());
}
