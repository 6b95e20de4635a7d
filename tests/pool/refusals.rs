//! A real host daemon against a coordinator played by the test: every refusal reason
//! in `launch_ack`, an accepted launch served by exactly one runner and reported once,
//! cancelled and expired leases, broken frames, and a bad token against the real
//! coordinator.

use super::support::*;
use runner_manager::coordinator::protocol::{CoordMsg, HostMsg};
use std::time::Duration;

/// One host (profile `pool`: rm-pool-linux, max `max`, idle timeout 2 s) joined to a
/// scripted coordinator, its daemon started, the link up with `app` covered.
fn directed_host(tag: &str, max: u32) -> (Pool, ScriptedCoord) {
    let pool = Pool::new(tag, 1, max, false);
    let coord = ScriptedCoord::bind(&format!("tok-{tag}-0123456789"));
    coord.join(&pool.hosts[0]);
    (pool, coord)
}

fn start_directed(pool: &mut Pool, coord: &mut ScriptedCoord) {
    pool.hosts[0].start();
    let hello = coord.accept(20);
    assert_eq!(hello.version, 3);
    assert_eq!(hello.targets[0].name, "app");
    assert!(
        hello
            .profiles
            .iter()
            .all(|p| p.labels.iter().any(|l| l == "rm-pool-linux")),
        "hello lists only pool profiles: {hello:?}"
    );
    coord.ack_hello(&["app"]);
    wait_until(Duration::from_secs(10), "the host is coordinated", || {
        pool.hosts[0].mode() == "coordinated"
    });
    // A launch before the first visibility read is refused as unfit (fail closed):
    // the tests below launch once the host can judge.
    wait_until(
        Duration::from_secs(20),
        "the host knows its profiles fit",
        || pool.hosts[0].judged(),
    );
}

fn refused(coord: &mut ScriptedCoord, lease: &str, profile: &str, ttl: u64) -> String {
    let (ok, reason) = coord.launch(launch(lease, profile, ttl));
    assert!(!ok, "{lease} for {profile} was accepted");
    reason.unwrap_or_default()
}

fn accepted(coord: &mut ScriptedCoord, lease: &str, profile: &str) {
    accepted_ttl(coord, lease, profile, 600);
}

fn accepted_ttl(coord: &mut ScriptedCoord, lease: &str, profile: &str, ttl: u64) {
    let (ok, reason) = coord.launch(launch(lease, profile, ttl));
    assert!(ok, "{lease} for {profile} refused: {reason:?}");
}

#[test]
fn each_refusal_carries_its_reason_and_ceilings_hold() {
    // Host capacity 3; `pool` max 2, `wide` max 10 (both directed), `paused` directed
    // but paused, `plain` without the pool label.
    let (mut pool, mut coord) = directed_host("refuse", 2);
    let dir = pool.hosts[0].dir.clone();
    let rdir = pool.root.join("runner-install");
    let rdir = rdir.to_str().unwrap();
    for (name, labels, extra) in [
        ("wide", "rm-pool-linux", vec!["--max", "10"]),
        ("paused", "rm-pool-linux,gpu", vec!["--paused"]),
        ("plain", "plain-only", vec![]),
    ] {
        let mut args = vec![
            "profile",
            "add",
            name,
            "--target",
            "app",
            "--labels",
            labels,
            "--runner-dir",
            rdir,
        ];
        args.extend(extra);
        run_ok(&dir, &args);
    }
    run_ok(&dir, &["host", "set", "capacity=3"]);
    start_directed(&mut pool, &mut coord);

    assert_eq!(refused(&mut coord, "u1", "nosuch", 600), "unknown_profile");
    assert_eq!(refused(&mut coord, "d1", "paused", 600), "disabled");
    assert_eq!(refused(&mut coord, "n1", "plain", 600), "not_coordinated");
    assert_eq!(refused(&mut coord, "z1", "pool", 0), "stale", "ttl 0");

    // Up to the profile's ceiling, then max_capacity.
    accepted(&mut coord, "p1", "pool");
    assert_eq!(refused(&mut coord, "p1", "pool", 600), "stale", "duplicate");
    accepted(&mut coord, "p2", "pool");
    assert_eq!(refused(&mut coord, "p3", "pool", 600), "max_capacity");
    // Up to the host's capacity (3 = 2 pool + 1 wide), then host_capacity.
    accepted(&mut coord, "w1", "wide");
    assert_eq!(refused(&mut coord, "w2", "wide", 600), "host_capacity");
    // A refused lease id is remembered too.
    assert_eq!(refused(&mut coord, "w2", "wide", 600), "stale");

    // Exactly the three accepted launches start runners, never more.
    wait_until(Duration::from_secs(20), "three runners registered", || {
        pool.sim.runners().len() == 3
    });
    coord.pump(2);
    assert_eq!(pool.runners_started(), 3, "{}", pool.dump());
    assert_eq!(pool.sim.runners().len(), 3);

    // A draining host refuses everything.
    run_ok(&dir, &["drain"]);
    let mut n = 0;
    wait_until(
        Duration::from_secs(10),
        "a draining launch is refused",
        || {
            n += 1;
            let lease = format!("dr{n}");
            refused(&mut coord, &lease, "wide", 600) == "draining"
        },
    );
    assert!(pool.hosts[0].alive());
}

#[test]
fn an_accepted_launch_starts_one_runner_reported_once_and_cancelled_or_expired_leases_close() {
    let (mut pool, mut coord) = directed_host("serve", 3);
    start_directed(&mut pool, &mut coord);

    // Served: one runner, which takes the job; started and finished once each.
    pool.enqueue(1, "served", 300);
    accepted(&mut coord, "s1", "pool");
    wait_until(Duration::from_secs(30), "the job is done", || {
        pool.all_done()
    });
    assert!(
        coord
            .next(
                20,
                |m| matches!(m, HostMsg::AttemptFinished(f) if f.lease_id.as_deref() == Some("s1"))
            )
            .is_some(),
        "attempt_finished for s1\n{}",
        pool.dump()
    );
    coord.pump(3);
    assert_eq!(coord.reports_for("s1"), (1, 1), "{:?}", coord.reports);
    assert_eq!(pool.runners_started(), 1, "one runner for one launch");
    let job = &pool.sim.jobs()[0];
    let HostMsg::AttemptStarted(s) = coord
        .reports
        .iter()
        .find(|m| matches!(m, HostMsg::AttemptStarted(_)))
        .unwrap()
    else {
        unreachable!()
    };
    assert_eq!(job.runner_name.as_deref(), Some(s.runner_name.as_str()));
    assert_eq!((s.target.as_str(), s.profile.as_str()), ("app", "pool"));

    // Cancelled before any job needs it: no runner outlives the idle timeout (2 s).
    accepted(&mut coord, "c1", "pool");
    coord.send(&CoordMsg::CancelLaunch {
        lease_id: "c1".into(),
    });
    wait_until(Duration::from_secs(20), "the launch is cancelled", || {
        pool.hosts[0].logs().contains("launch_cancelled lease=c1")
    });
    wait_until(Duration::from_secs(20), "no runner is left", || {
        coord.pump(0);
        pool.sim.runners().is_empty()
            && run_ok(&pool.hosts[0].dir, &["attempts", "--active"])
                .lines()
                .count()
                <= 1
    });

    // Expired (ttl 2 s on the host's clock): the launch closes and its runner goes.
    accepted_ttl(&mut coord, "e1", "pool", 2);
    wait_until(Duration::from_secs(20), "the lease expires", || {
        coord.pump(0);
        pool.hosts[0]
            .logs()
            .lines()
            .any(|l| l.contains("launch_closed") && l.contains("lease=e1") && l.contains("Expired"))
    });
    wait_until(
        Duration::from_secs(20),
        "the expired lease's runner is gone",
        || {
            coord.pump(0);
            pool.sim.runners().is_empty()
        },
    );
    // Neither c1 nor e1 took a job: at most one start and one finish each.
    coord.pump(2);
    for lease in ["c1", "e1"] {
        let (st, fi) = coord.reports_for(lease);
        assert!(
            st <= 1 && fi <= 1 && fi >= st,
            "{lease}: {:?}",
            coord.reports
        );
    }
    assert!(pool.hosts[0].alive());
}

#[test]
fn broken_frames_never_crash_the_daemon() {
    let (mut pool, mut coord) = directed_host("frames", 2);
    start_directed(&mut pool, &mut coord);

    // Unknown type: skipped, the connection stays and still answers launches.
    coord.send_raw(r#"{"type":"future_frame","x":1}"#.into());
    accepted(&mut coord, "k1", "pool");

    // Malformed: the host closes, then reconnects and says hello again.
    coord.send_raw("{not json".into());
    assert!(coord.closed_within(10), "a malformed frame closes the link");
    let again = coord.accept(20);
    assert_eq!(again.version, 3);
    coord.ack_hello(&["app"]);
    accepted(&mut coord, "k2", "pool");

    // A launch missing its fields is malformed too.
    coord.send_raw(r#"{"type":"launch","lease_id":"k3"}"#.into());
    assert!(
        coord.closed_within(10),
        "a launch without fields closes the link"
    );
    coord.accept(20);
    coord.ack_hello(&["app"]);

    // Oversized (past 64 KiB): closed, and the host comes back.
    let pad = "x".repeat(70 * 1024);
    coord.send_raw(format!(r#"{{"type":"cancel_launch","lease_id":"{pad}"}}"#));
    assert!(
        coord.closed_within(10),
        "an oversized frame closes the link"
    );
    coord.accept(20);
    coord.ack_hello(&["app"]);
    accepted(&mut coord, "k4", "pool");

    assert!(pool.hosts[0].alive(), "{}", pool.dump());
    let logs = pool.hosts[0].logs();
    assert!(logs.contains("unknown frame type"), "{logs}");
    assert_eq!(logs.matches("coordinator_link_up").count(), 4, "{logs}");
}

#[test]
fn a_bad_token_is_refused_and_the_host_falls_back_without_crashing() {
    let mut pool = Pool::new("badtok", 1, 2, true);
    write_secret(
        &pool.hosts[0].dir.join("coordinator-token"),
        "not-the-token-the-coordinator-issued",
    );
    pool.start_coordinator();
    pool.hosts[0].start();
    wait_until(Duration::from_secs(20), "the host falls back", || {
        pool.hosts[0].mode() == "fallback"
    });
    let logs = pool.hosts[0].logs();
    assert!(logs.contains("401"), "the refusal is logged\n{logs}");
    assert!(!logs.contains("coordinator_link_up"), "{logs}");
    assert!(
        !logs.contains("not-the-token"),
        "the token never reaches a log"
    );
    // In fallback the host reads its own demand and serves the job.
    pool.enqueue(1, "fb", 200);
    wait_until(
        Duration::from_secs(30),
        "the job is served in fallback",
        || pool.all_done(),
    );
    assert!(pool.hosts[0].alive());
    let hosts = run_ok(&pool.coord_dir, &["--json", "coordinator", "hosts"]);
    assert!(
        !hosts.contains("\"connected\":true"),
        "the coordinator never connected the host: {hosts}"
    );
}
