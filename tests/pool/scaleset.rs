//! A coordinated pool on a runner scale set: the coordinator holds the scale set's one
//! message session (`--scaleset pool=NAME`) and places the jobs assigned to it; two
//! host daemons with a `demand=scaleset` pool profile of that name start the runners,
//! each with a JIT config from the scale set, one runner per job. A coordinator
//! SIGKILLed in the middle of the message stream and started again loses no job and
//! places none twice; while it is away, the hosts fall back and one of them holds the
//! session; stopped, it ends its session at once.

use super::support::*;
use runner_manager::scaleset::checkpoint_key;
use runner_manager::sim::{FaultAction, FaultRule, JobStatus, Trigger};
use runner_manager::store::{SqliteStore, Store};
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

/// A pool of `n` hosts, each with a `demand=scaleset` profile named after the scale set.
fn scale_set_pool(tag: &str, n: usize) -> Pool {
    let pool = Pool::new(tag, n, 4, true);
    pool.add_scaleset_profile(SCALESET, 4);
    pool
}

/// Starts the coordinator on the scale set; returns the scale set's id once the
/// coordinator holds its one session.
fn start_coordinator(pool: &mut Pool) -> u64 {
    pool.start_coordinator_with(&["--scaleset", &format!("pool={SCALESET}")]);
    let mut set = 0;
    wait_until(
        Duration::from_secs(30),
        "the coordinator holds a session on the scale set",
        || match scale_set_id(pool) {
            Some(id) => {
                set = id;
                pool.sim.scaleset_sessions(id) == 1
            }
            None => false,
        },
    );
    set
}

/// Starts every host and waits until each is coordinated and has found the scale set
/// (no session of its own), so launches are not refused as unfit.
fn start_hosts(pool: &mut Pool) {
    for h in &mut pool.hosts {
        h.start();
    }
    wait_until(Duration::from_secs(20), "every host is coordinated", || {
        pool.hosts.iter().all(|h| h.mode() == "coordinated")
    });
    wait_until(
        Duration::from_secs(20),
        "every host found the scale set",
        || {
            pool.hosts
                .iter()
                .all(|h| h.logs().contains("scaleset_found"))
        },
    );
}

/// Every job was served by a runner of its own, each started from its own scale set
/// JIT config: none lost, none placed twice, no REST runner.
fn assert_each_job_served_once(pool: &Pool, jobs: usize) {
    let all = pool.sim.jobs();
    assert_eq!(all.len(), jobs);
    assert!(
        all.iter().all(|j| j.status == JobStatus::Completed),
        "a job was not served\n{}",
        pool.dump()
    );
    let runners: BTreeSet<String> = all.iter().filter_map(|j| j.runner_name.clone()).collect();
    assert_eq!(runners.len(), jobs, "each job by its own runner");
    assert_eq!(
        scaleset_jits(pool),
        jobs,
        "one scale set runner per job\n{}",
        pool.dump()
    );
    assert_eq!(
        pool.runners_started(),
        0,
        "a REST JIT config was asked for a scale set profile"
    );
}

#[test]
fn the_coordinator_holds_the_scale_set_session_and_each_job_is_served_once() {
    let started = Instant::now();
    let mut pool = scale_set_pool("scaleset", 2);
    let set = start_coordinator(&mut pool);
    start_hosts(&mut pool);
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
    assert_each_job_served_once(&pool, JOBS);
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
    // The hosts hold no session: whose job each runner took came from the
    // coordinator's `JobStarted` messages, relayed in `owners` frames.
    wait_until(
        Duration::from_secs(30),
        "every job's attempt has its owner",
        || jobs_owned(&pool) == (JOBS, JOBS),
    );
}

/// The hosts' attempts that completed a job, and those of them whose owner names the
/// repository, as the coordinator relayed it.
fn jobs_owned(pool: &Pool) -> (usize, usize) {
    let (mut ran, mut owned) = (0, 0);
    for h in &pool.hosts {
        let s = SqliteStore::open(&h.dir).unwrap();
        for a in s.attempts(&Default::default()).unwrap() {
            if a.outcome != Some(runner_manager::domain::Outcome::CompletedJob) {
                continue;
            }
            ran += 1;
            owned += a.owner.is_some_and(|o| {
                o.repo == REPO
                    && o.source == runner_manager::domain::job_owner::OwnerSource::Coordinator
            }) as usize;
        }
    }
    (ran, owned)
}

/// What the coordinator's store says of the scale set: the message id it has
/// handled, and how many assigned jobs it keeps as waiting.
fn coordinator_books(pool: &Pool, set: u64) -> (Option<i64>, usize) {
    let store = SqliteStore::open(&pool.coord_dir).unwrap();
    let last = store
        .kv_get(&checkpoint_key("pool", set as i64))
        .unwrap()
        .map(|v| v.parse().unwrap());
    let waiting = store
        .kv_get(&format!("scaleset:pool:{set}:waiting"))
        .unwrap()
        .map_or(0, |v| {
            serde_json::from_str::<serde_json::Value>(&v)
                .unwrap()
                .as_object()
                .map_or(0, |o| o.len())
        });
    (last, waiting)
}

#[test]
fn a_coordinator_restarted_mid_stream_loses_no_job_and_places_none_twice() {
    let mut pool = scale_set_pool("ss-restart", 2);
    // Restarts, not fallback: in fallback a host may start a surplus runner by design.
    for h in &mut pool.hosts {
        h.fallback_grace = 120;
    }
    // A SIGKILLed holder's session would last this long; the restart, which recorded
    // it, deletes it instead of waiting it out (409).
    pool.sim.scaleset_config(|c| c.session_ttl_ms = 2_500);
    let set = start_coordinator(&mut pool);

    // 1. Jobs assigned while no host is up: the coordinator acknowledges their
    //    message with the jobs kept only in its own books, then dies.
    for i in 0..3 {
        pool.sim
            .enqueue_job(REPO, &format!("early-{i}"), &[SCALESET], 300);
    }
    wait_until(
        Duration::from_secs(20),
        "the assignments acknowledged and kept as waiting",
        || {
            let acked = pool.sim.scaleset_messages(set).iter().all(|m| m.1);
            acked && coordinator_books(&pool, set).1 == 3
        },
    );
    pool.kill_coordinator();
    let start_again = |pool: &mut Pool| {
        assert_eq!(start_coordinator(pool), set, "the scale set was replaced");
    };
    start_again(&mut pool);
    start_hosts(&mut pool);
    wait_until(
        Duration::from_secs(60),
        "the jobs known only from the coordinator's books are served",
        || pool.all_done(),
    );

    // 2. Killed again while runners work and more jobs stream in: started and
    //    completed messages, and new assignments, wait in the queue for the next one.
    for i in 0..4 {
        pool.sim
            .enqueue_job(REPO, &format!("busy-{i}"), &[SCALESET], 2_500);
    }
    wait_until(Duration::from_secs(30), "a runner at work", || {
        pool.sim
            .jobs()
            .iter()
            .any(|j| j.status == JobStatus::InProgress)
    });
    let (before, _) = coordinator_books(&pool, set);
    pool.kill_coordinator();
    for i in 0..3 {
        pool.sim
            .enqueue_job(REPO, &format!("late-{i}"), &[SCALESET], 300);
    }
    start_again(&mut pool);
    wait_until(Duration::from_secs(60), "every job is done", || {
        pool.all_done()
    });
    // Issue 15: each restart deleted the session the killed coordinator recorded and
    // opened its own at once.
    assert_eq!(
        pool.sim.session_conflicts(),
        0,
        "a restart met its own stale session"
    );
    let ended = pool
        .sim
        .request_log()
        .iter()
        .filter(|e| e.method == "DELETE" && e.endpoint.ends_with("/sessions/{session}"))
        .filter(|e| e.status == 204)
        .count();
    assert!(
        ended >= 2,
        "{ended} killed sessions deleted over two restarts"
    );
    assert!(
        coordinator_books(&pool, set).0 > before,
        "the restarted coordinator handled no message"
    );
    assert_each_job_served_once(&pool, 10);
    assert_eq!(
        coordinator_books(&pool, set).1,
        0,
        "served jobs still waiting"
    );
    for h in &mut pool.hosts {
        assert!(h.alive(), "a host daemon died\n{}", pool.dump());
    }
    pool.wait_quiet();
}

#[test]
fn a_coordinator_stopped_mid_long_poll_ends_its_session() {
    let mut pool = scale_set_pool("ss-term", 1);
    // GitHub holds a poll about 50 s; stopping must not wait for it, nor leave the
    // session for the next coordinator to wait out.
    pool.sim.scaleset_config(|c| c.hold_ms = 120_000);
    let set = start_coordinator(&mut pool);
    let stopped = pool.stop_coordinator();
    assert!(
        stopped.is_some_and(|s| s.success()),
        "the coordinator did not stop cleanly: {stopped:?}"
    );
    assert_eq!(
        pool.sim.scaleset_sessions(set),
        0,
        "the session outlived the coordinator\n{}",
        pool.dump()
    );
    start_coordinator(&mut pool);
    let conflicts = pool.sim.session_conflicts();
    assert_eq!(conflicts, 0, "the restart met a stale session");
}

/// The hosts' own sessions on the scale set: lines of their logs where a listener
/// started, per host.
fn listeners_started(pool: &Pool) -> Vec<usize> {
    pool.hosts
        .iter()
        .map(|h| h.logs().matches("scaleset_listener_started").count())
        .collect()
}

fn launches_accepted(pool: &Pool) -> usize {
    pool.hosts
        .iter()
        .map(|h| h.logs().matches("launch_accepted").count())
        .sum()
}

#[test]
fn hosts_fall_back_to_the_scale_set_while_the_coordinator_is_away() {
    let mut pool = scale_set_pool("ss-fallback", 2);
    pool.sim.scaleset_config(|c| c.session_ttl_ms = 2_500);
    let set = start_coordinator(&mut pool);
    start_hosts(&mut pool);
    assert_eq!(
        listeners_started(&pool),
        [0, 0],
        "a coordinated host listened"
    );
    pool.kill_coordinator();
    wait_until(Duration::from_secs(30), "both hosts in fallback", || {
        pool.hosts.iter().all(|h| h.mode() == "fallback")
    });
    // The dead coordinator's session expires; then exactly one host holds one.
    wait_until(
        Duration::from_secs(30),
        "a host holds the scale set's session",
        || {
            pool.sim.scaleset_sessions(set) == 1
                && pool
                    .hosts
                    .iter()
                    .any(|h| h.logs().contains("scaleset_listener_started"))
        },
    );
    for i in 0..4 {
        pool.sim
            .enqueue_job(REPO, &format!("away-{i}"), &[SCALESET], 300);
    }
    let mut sessions = BTreeSet::new();
    wait_until(
        Duration::from_secs(60),
        "the jobs served while the coordinator is away",
        || {
            sessions.insert(pool.sim.scaleset_sessions(set));
            pool.all_done()
        },
    );
    assert_eq!(sessions, BTreeSet::from([1]), "one session at a time");

    // Back: the hosts are directed again and end their sessions; the coordinator
    // opens its own and places the next jobs.
    start_coordinator(&mut pool);
    wait_until(
        Duration::from_secs(30),
        "both hosts coordinated again",
        || pool.hosts.iter().all(|h| h.mode() == "coordinated"),
    );
    wait_until(
        Duration::from_secs(30),
        "the hosts' listeners stopped",
        || {
            pool.hosts.iter().all(|h| {
                let l = h.logs();
                l.matches("scaleset_listener_started").count()
                    == l.matches("scaleset_listener_stopping").count()
            })
        },
    );
    let accepted_before = launches_accepted(&pool);
    for i in 0..3 {
        pool.sim
            .enqueue_job(REPO, &format!("back-{i}"), &[SCALESET], 300);
    }
    wait_until(Duration::from_secs(60), "every job is done", || {
        pool.all_done()
    });
    assert_eq!(
        pool.sim.scaleset_sessions(set),
        1,
        "the coordinator's session"
    );
    assert!(
        launches_accepted(&pool) >= accepted_before + 3,
        "the jobs after the coordinator came back were not placed by it\n{}",
        pool.dump()
    );
    assert_each_job_served_once(&pool, 7);
    pool.wait_quiet();
}

/// A long poll that never answers (a connection hung mid-poll) does not keep the
/// coordinator from stopping: its session is ended, and the stop waits for the demand
/// thread only `DEMAND_STOP_WAIT` (the client itself would wait 70 s for the poll).
#[test]
fn a_coordinator_stops_while_its_long_poll_hangs() {
    let mut pool = scale_set_pool("ss-hang", 1);
    let set = start_coordinator(&mut pool);
    pool.sim.add_fault(FaultRule::new(
        Some("GET"),
        "/_services/broker/**",
        Trigger::Times(1_000),
        FaultAction::Hang,
    ));
    // The poll under way ends at its hold (2 s); the next one hangs.
    wait_until(Duration::from_secs(20), "a poll hangs", || {
        pool.sim
            .request_log()
            .iter()
            .any(|e| e.fault.as_deref() == Some("Hang"))
    });
    let stopped = pool.stop_coordinator();
    assert!(
        stopped.is_some_and(|s| s.success()),
        "the coordinator did not stop cleanly within 30 s: {stopped:?}\n{}",
        pool.dump()
    );
    assert_eq!(
        pool.sim.scaleset_sessions(set),
        0,
        "the session outlived it"
    );
}
