//! A coordinated pool on a runner scale set: the coordinator holds the scale set's one
//! message session (`--scaleset pool=NAME`) and places the jobs assigned to it; two
//! host daemons with a `demand=scaleset` pool profile of that name start the runners,
//! each with a JIT config from the scale set, one runner per job.

use super::support::*;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

const SCALESET: &str = "ss-pool";
const JOBS: usize = 6;

/// The scale set the coordinator created, once it holds a session on it.
fn scale_set_id(pool: &Pool) -> Option<u64> {
    pool.sim
        .scale_sets()
        .iter()
        .find(|s| s.1 == SCALESET)
        .map(|s| s.0)
}

fn scaleset_jits(pool: &Pool) -> usize {
    pool.sim
        .request_log()
        .iter()
        .filter(|e| {
            e.method == "POST"
                && e.endpoint.ends_with("/generatejitconfig")
                && (200..300).contains(&e.status)
        })
        .count()
}

#[test]
fn the_coordinator_holds_the_scale_set_session_and_each_job_is_served_once() {
    let started = Instant::now();
    let mut pool = Pool::new("scaleset", 2, 4, true);
    let install = pool.root.join("runner-install");
    for h in &pool.hosts {
        run_ok(
            &h.dir,
            &[
                "profile",
                "add",
                SCALESET,
                "--target",
                "app",
                "--labels",
                &format!("rm-pool-linux,{SCALESET}"),
                "--max",
                "4",
                "--runner-dir",
                install.to_str().unwrap(),
                "--idle-timeout",
                "2",
            ],
        );
        run_ok(&h.dir, &["profile", "set", SCALESET, "demand=scaleset"]);
    }
    pool.start_coordinator_with(&["--scaleset", &format!("pool={SCALESET}")]);
    let mut set = 0;
    wait_until(
        Duration::from_secs(20),
        "the coordinator holds a session on the scale set",
        || match scale_set_id(&pool) {
            Some(id) => {
                set = id;
                pool.sim.scaleset_sessions(id) == 1
            }
            None => false,
        },
    );
    for h in &mut pool.hosts {
        h.start();
    }
    wait_until(Duration::from_secs(20), "every host is coordinated", || {
        pool.hosts.iter().all(|h| h.mode() == "coordinated")
    });
    // The hosts found the scale set (no session of their own) before jobs arrive, so
    // the launches are not refused as unfit.
    wait_until(
        Duration::from_secs(20),
        "every host found the scale set",
        || {
            pool.hosts
                .iter()
                .all(|h| h.logs().contains("scaleset_found"))
        },
    );
    for i in 0..JOBS {
        pool.sim
            .enqueue_job(REPO, &format!("ss-{i}"), &[SCALESET], 400);
    }
    let mut sessions = BTreeSet::new();
    wait_until(Duration::from_secs(60), "every job is done", || {
        sessions.insert(pool.sim.scaleset_sessions(set));
        pool.all_done()
    });
    assert_eq!(
        sessions,
        BTreeSet::from([1]),
        "exactly one session on the scale set while running\n{}",
        pool.dump()
    );
    let runners: BTreeSet<String> = pool
        .sim
        .jobs()
        .iter()
        .filter_map(|j| j.runner_name.clone())
        .collect();
    assert_eq!(runners.len(), JOBS, "each job by its own runner");
    assert_eq!(
        scaleset_jits(&pool),
        JOBS,
        "one scale set runner per job\n{}",
        pool.dump()
    );
    assert_eq!(
        pool.runners_started(),
        0,
        "a REST JIT config was asked for a scale set profile"
    );
    let hosts_used = pool
        .hosts
        .iter()
        .filter(|h| h.logs().contains("runner_started"))
        .count();
    println!(
        "{JOBS} scale set jobs on {hosts_used} host(s) in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let stats = pool.sim.scaleset_statistics(set);
    assert_eq!(stats["totalAssignedJobs"], 0);
    pool.wait_quiet();
}
