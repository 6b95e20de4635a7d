//! One credential, one budget (issue 50, item 2): a coordinated pool spends its
//! credential's JIT points a minute as one, whatever the number of hosts, so a burst
//! never trips GitHub's secondary limit, no request goes out inside a `retry-after`,
//! and no attempt ends `failed` for a rate limit.

use super::support::*;
use runner_manager::sim::secondary::SecondaryLimits;
use std::time::Duration;

/// GitHub's points a minute per endpoint in this world: 60, so the credential makes
/// at most 12 JIT configs a minute (11 with the daemons' margin). Each of three hosts
/// alone keeps below it; together, without one budget, they go over.
const POINTS: u32 = 60;
const JOBS: usize = 15;

#[test]
fn a_pool_on_one_credential_serves_a_burst_within_its_points_and_never_fails_a_start_for_a_limit() {
    let mut pool = Pool::new("budget", 3, 6, true);
    pool.sim.set_secondary_limits(SecondaryLimits {
        points_per_minute: POINTS,
        ..SecondaryLimits::default()
    });
    let limit = format!("secondary_limit={POINTS}");
    run_ok(&pool.coord_dir, &["target", "set", "pool", &limit]);
    for h in &pool.hosts {
        run_ok(&h.dir, &["target", "set", "app", &limit]);
    }
    pool.start_coordinator();
    for h in &mut pool.hosts {
        h.start();
    }
    wait_until(Duration::from_secs(20), "every host is coordinated", || {
        pool.hosts.iter().all(|h| h.mode() == "coordinated")
    });
    pool.enqueue(JOBS, "b", 300);
    wait_until(Duration::from_secs(150), "every job is done", || {
        pool.all_done()
    });
    let hits = pool.sim.secondary_hits();
    assert_eq!(
        (hits.total, hits.inside_retry_after),
        (0, 0),
        "no secondary limit met, no request inside a retry-after: {hits:?}\n{}",
        pool.dump()
    );
    for (i, h) in pool.hosts.iter().enumerate() {
        let listed: serde_json::Value =
            serde_json::from_str(&run_ok(&h.dir, &["attempts", "--json"])).unwrap();
        let attempts = listed.as_array().expect("a list of attempts");
        assert!(!attempts.is_empty(), "host{i} started runners");
        let limited: Vec<&serde_json::Value> = attempts
            .iter()
            .filter(|a| {
                a["outcome"] == "failed"
                    && a["reason"]
                        .as_str()
                        .is_some_and(|r| r.contains("rate limit"))
            })
            .collect();
        assert!(
            limited.is_empty(),
            "host{i} failed starts for a rate limit: {limited:?}\n{}",
            h.logs()
        );
    }
    assert_eq!(pool.runners_started(), JOBS, "one runner per job");
    pool.wait_quiet();
}
