//! Usage roll-up figures (issue 35): the rows and bytes a day of the daily roll-up
//! takes for 100 repositories (3 workflows of 2 jobs each, one profile: 600 jobs a
//! day, each ended through the store as the daemon ends it), and the time an attempt's
//! end takes with the roll-up in its transaction; and what the rows take to reach a
//! coordinator that has none of them: how many bounded `status` frames, their bytes,
//! and the read of each batch. Prints; asserts nothing.

use runner_manager::coordinator::protocol::{HostMsg, MAX_USAGE_ROWS, Status, UsageReport};
use runner_manager::domain::job_owner::{JobOwner, OwnerSource};
use runner_manager::domain::{AttemptState, Outcome};
use runner_manager::store::{NewAttempt, SqliteStore, Store};
use std::time::Instant;

const REPOS: usize = 100;
const WORKFLOWS: usize = 3;
const JOBS: usize = 2;
const DAYS: i64 = 7;
const DAY_MS: i64 = 86_400_000;

/// The store's bytes once rewritten whole (`VACUUM`), so freed pages do not count.
fn bytes(dir: &std::path::Path) -> u64 {
    let c = rusqlite::Connection::open(dir.join("state.db")).unwrap();
    c.execute_batch("PRAGMA wal_checkpoint(TRUNCATE); VACUUM;")
        .unwrap();
    let pages: i64 = c.query_row("PRAGMA page_count", [], |r| r.get(0)).unwrap();
    let size: i64 = c.query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap();
    (pages * size) as u64
}

/// Walks the roll-up as a host sends it to a new coordinator: the batches a status
/// frame carries, from sequence number 0. Returns the frames, their bytes (mean,
/// largest) and the median read of a batch.
fn frames(s: &SqliteStore) -> (usize, usize, usize, std::time::Duration) {
    let (mut after, mut n, mut total, mut largest) = (0, 0, 0, 0);
    let mut reads = Vec::new();
    loop {
        let at = Instant::now();
        let rows = s.usage_changed_after(after, 0, MAX_USAGE_ROWS).unwrap();
        reads.push(at.elapsed());
        let rows: Vec<(i64, UsageReport)> = rows
            .into_iter()
            .map(|(seq, r)| (seq, UsageReport::bounded(r.key, r.figures)))
            .collect();
        let mut st = Status::default();
        if st.pack_usage(rows) == 0 {
            break;
        }
        after = st.usage_upto.unwrap();
        let len = HostMsg::Status(st).encode().len();
        (n, total, largest) = (n + 1, total + len, largest.max(len));
    }
    reads.sort();
    (n, total / n.max(1), largest, reads[reads.len() / 2])
}

fn main() {
    let dir = std::env::temp_dir().join(format!("rm-bench-usage-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let s = SqliteStore::open(&dir).expect("open store");
    let host = s.host_or_create().unwrap();
    let base = 20_000 * DAY_MS;
    let mut ends = Vec::new();
    for day in 0..DAYS {
        for r in 0..REPOS {
            for w in 0..WORKFLOWS {
                for j in 0..JOBS {
                    let t = base + day * DAY_MS + ((r * 6 + w * 2 + j) as i64) * 60_000;
                    let mut a = s
                        .create_attempt(
                            &NewAttempt {
                                profile: "linux".into(),
                                target: "octo".into(),
                                host_id: host.id.clone(),
                                ..NewAttempt::default()
                            },
                            t,
                        )
                        .unwrap();
                    a.recover(AttemptState::Busy, t + 5_000).unwrap();
                    a.owner = Some(JobOwner {
                        repo: format!("example-org/repository-{r:03}"),
                        workflow: Some(format!("Workflow {w}")),
                        job_name: format!("build (ubuntu, {j})"),
                        run_id: 1_000_000 + t,
                        run_attempt: Some(1),
                        job_id: Some(2_000_000 + t),
                        queued_at: Some(t - 3_000),
                        source: OwnerSource::Rest,
                    });
                    a.cpu_millis = Some(90_000);
                    a.peak_rss_bytes = Some(2 << 30);
                    a.mean_rss_bytes = Some(1 << 30);
                    a.end(Outcome::CompletedJob, None, t + 300_000).unwrap();
                    let at = Instant::now();
                    s.save_attempt(&a).unwrap();
                    ends.push(at.elapsed());
                    a.recover(AttemptState::Destroying, t + 301_000).unwrap();
                    a.mark_cleaned(t + 302_000);
                    s.save_attempt(&a).unwrap();
                }
            }
        }
    }
    let rows = s.usage_rows(i64::MIN, i64::MAX).unwrap().len();
    let (n, mean, largest, read) = frames(&s);
    // The attempts go (as retention takes them); what stays is the roll-up.
    s.prune_attempts(i64::MAX).unwrap();
    let with_rollup = bytes(&dir);
    s.prune_usage(i64::MAX).unwrap();
    let without = bytes(&dir);
    ends.sort();
    println!(
        "usage roll-up, {REPOS} repositories x {WORKFLOWS} workflows x {JOBS} jobs: {} rows/day, {} KiB/day ({} bytes/row), {} days measured",
        rows as i64 / DAYS,
        (with_rollup.saturating_sub(without)) as i64 / DAYS / 1024,
        (with_rollup.saturating_sub(without)) / rows.max(1) as u64,
        DAYS
    );
    println!(
        "attempt end with its roll-up, n={}: median {:.3?}  p99 {:.3?}",
        ends.len(),
        ends[ends.len() / 2],
        ends[ends.len() * 99 / 100]
    );
    println!(
        "to a new coordinator: {rows} rows in {n} status frames of at most {MAX_USAGE_ROWS} rows, mean {mean} bytes, largest {largest}; a batch read median {read:.3?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
