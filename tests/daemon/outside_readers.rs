//! Outside readers of a live store (issue 48): an operator's `sqlite3` read and
//! `.backup`, Python's `sqlite3`, and `runner-manager backup`, run against a daemon in
//! the middle of a burst. SQLite's locks are per process and per file: had the daemon
//! ever closed a descriptor of its store that SQLite did not open, it would have
//! dropped its own locks, and the first outside reader to close would have found no
//! other user, checkpointed and deleted the WAL under the daemon's feet.

use super::support::*;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// What `/proc/PID/fd` says of the store's files: every link that names `state.db`.
fn store_descriptors(pid: u32) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
    {
        if let Ok(t) = std::fs::read_link(e.path()) {
            let t = t.to_string_lossy().into_owned();
            if t.contains("state.db") {
                out.push(t);
            }
        }
    }
    out
}

/// Runs an outside client to the end; panics with its output unless it succeeded.
fn run(what: &str, cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what} runs (is it installed? .ci/run installs it): {e}"));
    assert!(
        out.status.success(),
        "{what} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn sqlite3(db: &Path, sql: &str) -> String {
    run("sqlite3", Command::new("sqlite3").arg(db).arg(sql))
}

fn python_count(db: &Path) -> String {
    run(
        "python3",
        Command::new("python3").arg("-c").arg(format!(
            "import sqlite3; c = sqlite3.connect({:?}); \
             print(c.execute('select count(*) from attempts').fetchone()[0]); c.close()",
            db.display().to_string()
        )),
    )
}

#[test]
fn outside_readers_and_backups_during_a_burst_lose_nothing() {
    let mut w = World::new("outside-readers", 8);
    w.add_target("t", "acme/app", true);
    w.add_profile(ProfileSpec::new("linux", "t", &["linux"]).max(4));
    w.start_daemon();
    let db = w.dir.join("state.db");
    let backups = w.dir.with_extension("backups");
    std::fs::create_dir_all(&backups).unwrap();

    let jobs: Vec<u64> = (0..12)
        .map(|i| w.enqueue("acme/app", &format!("burst-{i}"), &["linux"], 1500))
        .collect();
    let mut round = 0;
    let mut seen_running = std::collections::BTreeSet::new();
    // Read and back up the store, from three clients, again and again while jobs run.
    wait_until(
        Duration::from_secs(90),
        "every job of the burst served while outside readers kept reading",
        || {
            round += 1;
            sqlite3(&db, "select count(*) from attempts");
            let copy = backups.join(format!("sqlite3-{round}.db"));
            sqlite3(&db, &format!(".backup '{}'", copy.display()));
            python_count(&db);
            let ours = backups.join(format!("ours-{round}.db"));
            w.cli_ok(&["backup", ours.to_str().unwrap()]);
            // Each job that runs is in the books the CLI reads, while it runs.
            let listed = w.cli_ok(&["--json", "attempts", "--active"]);
            for j in w.sim.jobs() {
                if j.status == runner_manager::sim::JobStatus::InProgress {
                    let runner = j.runner_name.clone().unwrap_or_default();
                    if listed.contains(&runner) {
                        seen_running.insert(j.id);
                    }
                }
            }
            w.all_completed(&["acme/app"])
        },
    );
    assert!(
        round >= 2,
        "the burst ended before the outside readers ran twice"
    );
    w.wait_settled(&["acme/app"]);

    // The daemon's store is the one on disk: no deleted WAL or SHM held open.
    let fds = store_descriptors(w.daemon_pid());
    assert!(
        fds.iter().all(|f| !f.contains("(deleted)")),
        "the daemon holds deleted store files: {fds:?}"
    );
    let logs = w.daemon_logs();
    assert!(
        !logs.contains("disk I/O error") && !logs.contains("pass_failed"),
        "the daemon's store failed under outside readers:\n{logs}"
    );
    w.check_invariants(&["acme/app"]);
    assert!(
        !seen_running.is_empty(),
        "no running job was ever seen in `attempts --active` (of {} jobs)",
        jobs.len()
    );

    // What the outside clients read is what the daemon wrote: the last backups hold
    // every attempt (each ended, in the ledger the daemon keeps).
    let attempts = w.attempts().len();
    assert!(attempts >= jobs.len());
    let via_python: usize = python_count(&db).trim().parse().unwrap();
    assert_eq!(via_python, attempts);
    let last = backups.join(format!("ours-{round}.db"));
    let in_backup: usize = sqlite3(&last, "select count(*) from attempts")
        .trim()
        .parse()
        .unwrap();
    assert!(
        in_backup >= jobs.len(),
        "the last backup holds {in_backup} attempts"
    );
    assert_eq!(
        sqlite3(&last, "pragma integrity_check").trim(),
        "ok",
        "a backup of a live store is whole"
    );
    w.stop_daemon();
    let _ = std::fs::remove_dir_all(&backups);
}
