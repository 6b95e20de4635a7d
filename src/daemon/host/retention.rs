//! What a host keeps, and for how long: ended attempts with their samples and logs for
//! `retention`, the daily usage roll-up for its own `usage_retention` (it outlives
//! the attempts it came from), and the logs directory under `logs_max`, the oldest logs of ended
//! attempts going first and a live attempt's log never. [`plan`] decides from what the
//! directory and the store hold; [`upkeep`] (hourly, in the daemon) carries it out and
//! gives the space of pruned rows back to the filesystem.

use crate::domain::Host;
use crate::facts::kept::{AttemptLogs, list_logs};
use crate::store::{SqliteStore, Store, StoreError};
use crate::timefmt::Millis;
use crate::{log_info, log_warn};
use std::collections::HashSet;
use std::path::Path;

/// The attempts whose logs go: those the store no longer holds (pruned), then, while
/// the rest is over `cap`, the oldest of those not open.
pub fn plan(logs: &[AttemptLogs], known: &HashSet<i64>, open: &HashSet<i64>, cap: u64) -> Vec<i64> {
    let mut gone: Vec<i64> = Vec::new();
    let mut total: u64 = 0;
    for l in logs {
        if known.contains(&l.attempt) {
            total += l.bytes;
        } else {
            gone.push(l.attempt);
        }
    }
    for l in logs {
        if total <= cap {
            break;
        }
        if known.contains(&l.attempt) && !open.contains(&l.attempt) {
            total -= l.bytes;
            gone.push(l.attempt);
        }
    }
    gone
}

/// What one upkeep did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Upkept {
    pub attempts_pruned: usize,
    pub usage_rows_pruned: usize,
    pub logs_removed: usize,
    pub logs_bytes_removed: u64,
    pub free_pages: i64,
}

/// Prunes what is past the host's retention, removes the logs [`plan`] names, and gives
/// freed pages back.
pub fn upkeep(
    store: &SqliteStore,
    host: &Host,
    state_dir: &Path,
    now: Millis,
) -> Result<Upkept, StoreError> {
    let before = now.saturating_sub((host.retention_secs as Millis).saturating_mul(1000));
    let mut done = Upkept {
        attempts_pruned: store.prune_attempts(before)?,
        ..Upkept::default()
    };
    store.prune_samples(before)?;
    let usage =
        crate::domain::host_settings::UsageSettings::of(&crate::store::read_host_settings(store)?);
    done.usage_rows_pruned = store.prune_usage(crate::domain::rollup::first_kept_day(
        now,
        usage.retention_secs,
    ))?;
    // Ids first, the directory second: an attempt's row is written before its log, so
    // a log listed here without a row is truly one whose attempt was pruned.
    let known: HashSet<i64> = store.attempt_ids()?.into_iter().collect();
    let open: HashSet<i64> = store
        .open_attempts(&host.id)?
        .into_iter()
        .map(|a| a.id)
        .collect();
    let logs = list_logs(state_dir);
    let gone: HashSet<i64> = plan(&logs, &known, &open, host.logs_max_bytes)
        .into_iter()
        .collect();
    for l in logs.iter().filter(|l| gone.contains(&l.attempt)) {
        for f in &l.files {
            match std::fs::remove_file(state_dir.join("logs").join(f)) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => log_warn!("log_not_removed", file = f, error = e),
            }
        }
        done.logs_removed += 1;
        done.logs_bytes_removed += l.bytes;
    }
    done.free_pages = store.reclaim()?;
    if done != Upkept::default() {
        log_info!(
            "upkeep",
            attempts_pruned = done.attempts_pruned,
            usage_rows_pruned = done.usage_rows_pruned,
            logs_removed = done.logs_removed,
            logs_bytes_removed = done.logs_bytes_removed,
            free_pages = done.free_pages
        );
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn logs(sizes: &[(i64, u64)]) -> Vec<AttemptLogs> {
        sizes
            .iter()
            .map(|&(attempt, bytes)| AttemptLogs {
                attempt,
                bytes,
                files: vec![format!("{attempt}.log")],
            })
            .collect()
    }

    fn set(ids: &[i64]) -> HashSet<i64> {
        ids.iter().copied().collect()
    }

    #[test]
    fn pruned_attempts_logs_go_then_the_oldest_until_under_the_cap_never_a_live_one() {
        let l = logs(&[(1, 100), (2, 100), (3, 100), (4, 100), (5, 100)]);
        // 1 was pruned; 2 is still open (live); the cap holds 250 bytes.
        let known = set(&[2, 3, 4, 5]);
        let open = set(&[2]);
        assert_eq!(plan(&l, &known, &open, 250), vec![1, 3, 4]);
        // Under the cap: only what was pruned.
        assert_eq!(plan(&l, &known, &open, 1_000), vec![1]);
        // A cap nothing can meet still spares the live attempt's log.
        assert_eq!(plan(&l, &known, &set(&[2, 5]), 0), vec![1, 3, 4]);
    }

    #[test]
    fn upkeep_prunes_past_retention_with_the_logs_and_trims_to_the_cap() {
        use crate::domain::AttemptState;
        use crate::store::NewAttempt;
        let d = crate::store::tests::TempDir::new("upkeep-logs");
        let store = SqliteStore::open(&d.0).unwrap();
        let mut host = store.host_or_create().unwrap();
        let day: Millis = 86_400_000;
        let now: Millis = 100 * day;
        let logs = d.0.join("logs");
        std::fs::create_dir_all(&logs).unwrap();
        // An attempt ended `age` ago (cleaned), or still live, with a log of `bytes`.
        let attempt = |age: Millis, live: bool, bytes: usize| {
            let mut a = store
                .create_attempt(
                    &NewAttempt {
                        profile: "p".into(),
                        target: "t".into(),
                        host_id: host.id.clone(),
                        ..NewAttempt::default()
                    },
                    now - age,
                )
                .unwrap();
            if live {
                a.recover(AttemptState::Busy, now - age).unwrap();
            } else {
                a.end(crate::domain::Outcome::CompletedJob, None, now - age)
                    .unwrap();
                a.cleaned = true;
            }
            store.save_attempt(&a).unwrap();
            std::fs::write(logs.join(format!("{}.log", a.id)), "x".repeat(bytes)).unwrap();
            a.id
        };
        let old = attempt(20 * day, false, 10);
        let live = attempt(30 * day, true, 5_000);
        let recent_a = attempt(2 * day, false, 3_000);
        let recent_b = attempt(day, false, 3_000);
        std::fs::write(logs.join(format!("{old}.pid")), "1").unwrap();
        // A log left by an attempt pruned before logs went with their attempts.
        std::fs::write(logs.join("4242.log"), "orphan").unwrap();
        std::fs::write(logs.join("notes.txt"), "not ours to remove").unwrap();

        host.logs_max_bytes = 9_000;
        let done = upkeep(&store, &host, &d.0, now).unwrap();
        assert_eq!(done.attempts_pruned, 1, "{done:?}");
        let left: Vec<i64> = list_logs(&d.0).iter().map(|l| l.attempt).collect();
        // Past retention: gone with its log and pid file; the orphan gone; over the
        // cap (11 KB of 9 KB): the oldest ended one gone, the live one kept.
        assert_eq!(left, vec![live, recent_b], "{done:?}");
        assert!(!logs.join(format!("{old}.pid")).exists());
        assert!(logs.join("notes.txt").exists());
        assert!(
            store.attempt(recent_a).is_ok(),
            "a trimmed log keeps its attempt"
        );
        assert_eq!(done.logs_removed, 3);
        // The usage roll-up outlives the attempts it came from, for its own retention.
        let days = |s: &SqliteStore| -> Vec<i64> {
            s.usage_rows(0, 1_000)
                .unwrap()
                .iter()
                .map(|r| r.key.day)
                .collect()
        };
        assert_eq!(
            days(&store),
            vec![80, 98, 99],
            "the pruned attempt's day is kept"
        );
        store.kv_put("usage_retention", "10d").unwrap();
        let done = upkeep(&store, &host, &d.0, now).unwrap();
        assert_eq!(done.usage_rows_pruned, 1);
        assert_eq!(days(&store), vec![98, 99]);
    }

    #[test]
    fn the_listing_groups_an_attempts_files_and_ignores_others() {
        let d = crate::store::tests::TempDir::new("retention");
        let dir = d.0.join("logs");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("7.log"), "x".repeat(10)).unwrap();
        std::fs::write(dir.join("7.pid"), "123").unwrap();
        std::fs::write(dir.join("12.log"), "y").unwrap();
        std::fs::write(dir.join("daemon.log"), "not an attempt's").unwrap();
        std::fs::write(dir.join("7.log.bak"), "nor this").unwrap();
        let l = list_logs(&d.0);
        assert_eq!(l.len(), 2);
        assert_eq!((l[0].attempt, l[0].bytes, l[0].files.len()), (7, 13, 2));
        assert_eq!((l[1].attempt, l[1].bytes), (12, 1));
    }
}
