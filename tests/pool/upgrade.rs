//! An upgrade across the pool loses nothing (issue 50, item 4): a host drained while
//! its runners serve jobs, its binary replaced by one that says another version, started
//! again and rejoined, with every job served once and `coordinator hosts` showing each
//! host's version; and a host meeting a coordinator whose protocol version it cannot
//! speak leaves it, saying both versions.

use super::support::*;
use runner_manager::coordinator::protocol::{CoordMsg, HelloAck};
use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The version the updated host's binary says it is.
const NEW: &str = "99.0.0-upgrade";

/// `coordinator hosts --json`: each host's name, connected and binary version.
fn versions(pool: &Pool) -> Vec<(String, bool, Option<String>)> {
    let out = run_ok(&pool.coord_dir, &["--json", "coordinator", "hosts"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["name"].as_str().unwrap().to_string(),
                h["connected"] == true,
                h["binary_version"].as_str().map(String::from),
            )
        })
        .collect()
}

/// The update: a copy of this very binary, stamped to say it is [`NEW`] (the slot a
/// release stamps, `version::stamped`), made executable beside the pool.
fn updated_binary(root: &Path) -> PathBuf {
    let bytes = std::fs::read(BIN).unwrap();
    let new = runner_manager::version::stamped(&bytes, NEW).expect("the version slot");
    let dir = root.join("update");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("runner-manager");
    std::fs::write(&path, new).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// Runs `bin` on `dir`'s state and returns its stdout; panics on a failure.
fn run_with(bin: &Path, dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new(bin)
        .arg("--state-dir")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Jobs that ended on this host's runners: `completed_job` attempts.
fn completed_on(dir: &Path) -> usize {
    let out = run_ok(dir, &["--json", "attempts", "--limit", "0"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .filter(|a| a["outcome"] == "completed_job")
        .count()
}

#[test]
fn a_pool_upgraded_host_by_host_loses_no_job() {
    const BEFORE: usize = 8;
    const AFTER: usize = 6;
    let mut pool = Pool::new("upgrade", 2, 3, true);
    pool.start_coordinator();
    for h in &mut pool.hosts {
        h.start();
    }
    wait_until(
        Duration::from_secs(30),
        "both hosts are coordinated",
        || pool.hosts.iter().all(|h| h.mode() == "coordinated"),
    );
    let this = env!("CARGO_PKG_VERSION").to_string();
    wait_until(
        Duration::from_secs(10),
        "coordinator hosts shows each host's binary version",
        || {
            versions(&pool)
                .iter()
                .all(|(_, up, v)| *up && v.as_deref() == Some(this.as_str()))
        },
    );

    // Jobs of 3 s: host0 has runners serving jobs when it is drained.
    pool.enqueue(BEFORE, "before", 3_000);
    let host0 = pool.hosts[0].dir.clone();
    wait_until(Duration::from_secs(30), "host0 serves a job", || {
        let out = run_ok(&host0, &["--json", "attempts", "--active"]);
        out.contains("\"busy\"")
    });

    // 1. Drain: no new runner, the busy ones finish their jobs.
    let drained = run_ok(&host0, &["drain", "--wait"]);
    assert!(drained.contains("drained"), "{drained}");
    assert!(
        completed_on(&host0) >= 1,
        "host0's runners finished their jobs"
    );
    // 2. Update: stop the daemon, put the new binary in place.
    pool.hosts[0].stop();
    let new_bin = updated_binary(&pool.root);
    assert_eq!(run_with(&new_bin, &host0, &["--version"]).trim_end(), {
        format!("runner-manager {NEW}")
    });
    pool.hosts[0].bin = new_bin.clone();
    // 3. Rejoin: start it, and let it take runners again.
    pool.hosts[0].start();
    run_with(&new_bin, &host0, &["drain", "--cancel"]);
    wait_until(
        Duration::from_secs(30),
        "the coordinator sees host0 on the new version beside host1 on the old",
        || {
            let v = versions(&pool);
            v.contains(&("host0".into(), true, Some(NEW.into())))
                && v.contains(&("host1".into(), true, Some(this.clone())))
        },
    );
    let table = run_ok(&pool.coord_dir, &["coordinator", "hosts", "--filter", NEW]);
    assert!(
        table.contains("host0") && !table.contains("host1"),
        "{table}"
    );
    wait_until(
        Duration::from_secs(30),
        "host0 is coordinated again",
        || pool.hosts[0].mode() == "coordinated",
    );

    pool.enqueue(AFTER, "after", 300);
    wait_until(Duration::from_secs(120), "every job is done", || {
        pool.all_done()
    });
    let jobs = pool.sim.jobs();
    assert_eq!(jobs.len(), BEFORE + AFTER);
    let failed: Vec<_> = jobs
        .iter()
        .filter(|j| j.conclusion.as_deref() != Some("success"))
        .map(|j| (&j.name, &j.conclusion))
        .collect();
    assert!(
        failed.is_empty(),
        "no job lost: {failed:?}\n{}",
        pool.dump()
    );
    let runners: BTreeSet<&String> = jobs.iter().filter_map(|j| j.runner_name.as_ref()).collect();
    assert_eq!(runners.len(), BEFORE + AFTER, "each job by its own runner");
    assert_eq!(
        pool.runners_started(),
        BEFORE + AFTER,
        "every job served once, no runner to spare\n{}",
        pool.dump()
    );
    wait_until(
        Duration::from_secs(30),
        "every job's attempt ended completed_job on one of the hosts",
        || completed_on(&host0) + completed_on(&pool.hosts[1].dir) == BEFORE + AFTER,
    );
    pool.wait_quiet();
}

/// No host runs a mix it cannot speak: a coordinator that answers a protocol version
/// this host does not speak is left (close code 1002), and the host's status says
/// why, naming both sides' versions. (The coordinator's side, a host too old for it,
/// is tests/coord/edges.rs.)
#[test]
fn a_host_leaves_a_coordinator_whose_protocol_version_it_cannot_speak() {
    let mut pool = Pool::new("proto", 1, 2, false);
    let mut coord = ScriptedCoord::bind("tok-proto-0123456789");
    coord.join(&pool.hosts[0]);
    pool.hosts[0].start();
    let hello = coord.accept(20);
    assert_eq!(
        hello.host.binary_version.as_deref(),
        Some(env!("CARGO_PKG_VERSION")),
        "hello says the binary's version"
    );
    coord.send(&CoordMsg::HelloAck(HelloAck {
        version: 1,
        ..Default::default()
    }));
    assert!(coord.closed_within(10), "the host closes the connection");
    wait_until(
        Duration::from_secs(20),
        "status names both versions",
        || {
            let link = pool.hosts[0].link();
            link["state"] == "down"
                && link["last_error"].as_str().is_some_and(|e| {
                    e.contains("the coordinator speaks protocol version 1")
                        && e.contains("this host speaks 2-3")
                })
        },
    );
    // Without a coordinator it can speak to, the host reads its own demand after the
    // grace, as when the coordinator is away.
    wait_until(Duration::from_secs(20), "the host falls back", || {
        pool.hosts[0].mode() == "fallback"
    });
    assert!(pool.hosts[0].alive(), "the daemon runs on");
}
