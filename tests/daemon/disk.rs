//! A full disk (issue 18): the state directory on a small tmpfs of its own, filled
//! on purpose. The daemon stops starting runners with `disk` as every profile's
//! reason, goes on watching and cleaning, and starts again on its own once there is
//! room; the store keeps every row it committed when a write meets a full disk.
//! These tests mount (they run as root, as CI does); a failed mount fails them.

use super::metrics::{get, metrics_addr_in};
use super::support::{ProfileSpec, SETTLE, World, wait_until};
use runner_manager::domain::AttemptState;
use runner_manager::store::{AttemptFilter, NewAttempt, SqliteStore, Store};
use runner_manager::timefmt::{Millis, now_millis};
use std::io::Write;
use std::path::{Path, PathBuf};

const MIB: u64 = 1 << 20;
const JIT: &str = "/repos/{owner}/{repo}/actions/runners/generate-jitconfig";
const RUNS: &str = "/repos/{owner}/{repo}/actions/runs";

fn free(dir: &Path) -> u64 {
    runner_manager::daemon::free_bytes(dir).expect("statvfs of the tmpfs")
}

/// Writes `path` until `leave` bytes (or, with 0, nothing) are free on its
/// filesystem; the last write may stop short with ENOSPC.
fn fill(path: &Path, leave: u64) {
    let dir = path.parent().unwrap();
    let mut f = std::fs::File::create(path).unwrap();
    let chunk = vec![0xA5u8; 256 << 10];
    loop {
        let room = free(dir).saturating_sub(leave);
        if room == 0 {
            break;
        }
        let n = room.min(chunk.len() as u64) as usize;
        match f.write(&chunk[..n]) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
            Err(e) => panic!("filling {}: {e}", path.display()),
        }
    }
    f.sync_all().ok();
}

fn requests_since(w: &World, endpoint: &str, since: Millis) -> usize {
    w.log()
        .iter()
        .filter(|e| e.endpoint == endpoint && e.at >= since)
        .count()
}

/// A gauge without labels as `/metrics` serves it; `None` without a series.
fn gauge(addr: &str, name: &str) -> Option<f64> {
    let (status, text) = get(addr, "/metrics");
    assert_eq!(status, 200, "{text}");
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .map(|v| v.trim().parse().unwrap())
}

#[test]
fn a_full_state_directory_holds_starts_keeps_cleaning_and_resumes_when_space_returns() {
    let mut w = World::on_tmpfs("disk-full", 4, 48);
    let out = w.cli_ok(&["host", "set", "disk_reserve=8M"]);
    assert!(out.contains("disk_reserve 8.0 MiB"), "{out}");
    w.add_target("t", "acme/app", true);
    w.add_profile(ProfileSpec::new("linux", "t", &["linux"]).max(2));
    w.start_daemon_with(&["--metrics-listen", "127.0.0.1:0"]);
    let addr = metrics_addr_in(&w.daemon_log_path(1));
    const HELD: &str = "runner_manager_disk_starts_held";
    const FREE: &str = "runner_manager_state_dir_free_bytes";
    assert_eq!(gauge(&addr, HELD), Some(0.0));
    assert!(gauge(&addr, FREE).is_some_and(|f| f > (16 * MIB) as f64));
    // A runner at work when the disk fills.
    w.enqueue("acme/app", "before", &["linux"], 4_000);
    wait_until(SETTLE, "the first job's runner to be busy", || {
        !w.in_state(AttemptState::Busy).is_empty()
    });
    let busy = w.in_state(AttemptState::Busy)[0].id;

    let filler: PathBuf = w.dir.join("filler");
    fill(&filler, 4 * MIB);
    let filled_at = now_millis();
    wait_until(SETTLE, "status to show the disk limiting linux", || {
        w.limiting("linux").contains("unfit: disk: ")
    });
    let why = w.limiting("linux");
    assert!(
        why.contains("under disk_reserve 8.0 MiB") && why.contains("resume above 16 MiB"),
        "{why}"
    );
    assert_eq!(gauge(&addr, HELD), Some(1.0));
    assert!(gauge(&addr, FREE).is_some_and(|f| f < (8 * MIB) as f64));
    let text = w.cli_ok(&["status"]);
    assert!(text.contains("disk: "), "{text}");

    // A job queued now waits: the daemon reads it, and starts nothing for it.
    let held_from = now_millis();
    w.enqueue("acme/app", "during", &["linux"], 200);
    // Meanwhile the busy runner's job ends, and its attempt is recorded and cleaned:
    // cleanup never waits for space, it makes it.
    wait_until(
        SETTLE,
        "the busy runner's end recorded and its root removed",
        || {
            let a = w.attempt(busy);
            a.cleaned
                && a.outcome.is_some()
                && !w.dir.join("attempts").join(busy.to_string()).exists()
        },
    );
    wait_until(
        SETTLE,
        "two queue reads after the second job was queued",
        || requests_since(&w, RUNS, held_from) >= 2,
    );
    assert_eq!(
        requests_since(&w, JIT, filled_at),
        0,
        "a runner was asked for while the disk was under its reserve"
    );
    assert!(w.live_attempts().is_empty(), "{:?}", w.live_attempts());
    assert!(w.limiting("linux").contains("disk: "));

    // Not one byte free: writes may fail now (SQLITE_FULL), and the daemon lives on
    // through its heartbeat (written, or logged as not written).
    let brim = w.dir.join("brim");
    fill(&brim, 0);
    let brimmed_at = now_millis();
    wait_until(SETTLE, "a heartbeat at a full disk, written or not", || {
        w.daemon_logs().contains("msg=heartbeat_not_written")
            || w.store()
                .heartbeat()
                .ok()
                .flatten()
                .is_some_and(|h| h.heartbeat_at > brimmed_at)
    });
    assert!(w.daemon_exited().is_none(), "{}", w.daemon_logs());
    std::fs::remove_file(&brim).unwrap();

    // Room again: the daemon starts the waiting job's runner on its own.
    std::fs::remove_file(&filler).unwrap();
    assert!(free(&w.dir) > 16 * MIB);
    wait_until(SETTLE, "the waiting job to be served", || {
        w.all_completed(&["acme/app"])
    });
    assert!(requests_since(&w, JIT, held_from) >= 1);
    w.wait_settled(&["acme/app"]);
    w.check_invariants(&["acme/app"]);
    assert_eq!(w.attempts().len(), 2, "{:?}", w.outcomes());
    assert!(!w.limiting("linux").contains("disk"));
    assert_eq!(gauge(&addr, HELD), Some(0.0));
    assert!(w.stop_daemon().success());
    let logs = w.daemon_logs();
    assert!(
        logs.contains("msg=starts_held_disk") && logs.contains("msg=starts_resumed_disk"),
        "{logs}"
    );
}

#[test]
fn a_store_write_that_meets_a_full_disk_fails_and_loses_nothing_written_before() {
    let w = World::on_tmpfs("disk-store", 1, 8);
    let store = SqliteStore::open(&w.dir).unwrap();
    let host = store.host_or_create().unwrap();
    let new = |n: usize| NewAttempt {
        profile: "linux".into(),
        target: "t".into(),
        host_id: host.id.clone(),
        job_name: Some(format!("job-{n}-{}", "x".repeat(200))),
        ..NewAttempt::default()
    };
    let mut written = Vec::new();
    for n in 0..20 {
        written.push(store.create_attempt(&new(n), now_millis()).unwrap().id);
    }
    fill(&w.dir.join("filler"), 0);
    // Intents until one cannot be written (the WAL may still have room for a few).
    let mut refused = None;
    for n in 20..200_000 {
        match store.create_attempt(&new(n), now_millis()) {
            Ok(a) => written.push(a.id),
            Err(e) => {
                refused = Some(e);
                break;
            }
        }
    }
    let e = refused.expect("a full filesystem refuses a write at last");
    assert!(
        e.to_string().to_lowercase().contains("full"),
        "the error says the disk is full: {e}"
    );
    let ids = |s: &SqliteStore| -> Vec<i64> {
        let mut v: Vec<i64> = s
            .attempts(&AttemptFilter::default())
            .unwrap()
            .iter()
            .map(|a| a.id)
            .collect();
        v.sort_unstable();
        v
    };
    assert_eq!(ids(&store), written, "every committed row, and only those");
    assert_eq!(store.integrity_check().unwrap(), ["ok"]);
    // Space again: writes work, and a fresh connection reads the same books.
    std::fs::remove_file(w.dir.join("filler")).unwrap();
    written.push(store.create_attempt(&new(0), now_millis()).unwrap().id);
    drop(store);
    let again = SqliteStore::open(&w.dir).unwrap();
    assert_eq!(ids(&again), written);
    assert_eq!(again.integrity_check().unwrap(), ["ok"]);
}
