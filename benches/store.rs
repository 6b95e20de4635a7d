//! Store figures: the `profile set` round trip (read, then revision-checked write),
//! the every-pass reads with 100,000 attempts in the history, and the soundness check
//! (`PRAGMA quick_check`) every CLI write makes, at 10,000 and 100,000 attempts, and
//! `backup` (a consistent copy of the live store, `VACUUM INTO`) at 100,000.
//! Prints; asserts nothing.

use runner_manager::domain::target::{CredentialRef, Target, TargetScope};
use runner_manager::domain::{AttemptState, ScalePolicy};
use runner_manager::store::{AttemptFilter, HistorySeed, SqliteStore, Store};
use std::time::{Duration, Instant};

const HISTORY: i64 = 100_000;
const OPEN: i64 = 8;

fn figures(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let pct = |p: f64| samples[((samples.len() - 1) as f64 * p) as usize];
    println!(
        "{name:<46} n={:<5} median {:>9.3?}  p99 {:>9.3?}  max {:>9.3?}",
        samples.len(),
        pct(0.5),
        pct(0.99),
        samples[samples.len() - 1]
    );
}

fn time<T>(n: usize, mut f: impl FnMut() -> T) -> Vec<Duration> {
    (0..n)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(f());
            t.elapsed()
        })
        .collect()
}

/// The history at which `PRAGMA quick_check` (run before every CLI write) is timed
/// first; it is timed again at [`HISTORY`].
const QUICK_CHECK_AT: i64 = 10_000;

/// Times the soundness check every CLI write makes (`SqliteStore::check_sound`) with
/// `n` attempts in the store, and prints the file's size beside it.
fn quick_check(s: &SqliteStore, dir: &std::path::Path, n: i64) {
    let bytes = std::fs::metadata(dir.join("state.db")).map_or(0, |m| m.len())
        + std::fs::metadata(dir.join("state.db-wal")).map_or(0, |m| m.len());
    figures(
        &format!("quick_check, {n} attempts ({} KiB)", bytes / 1024),
        time(20, || s.check_sound().unwrap()),
    );
}

fn main() {
    let dir = std::env::temp_dir().join(format!("rm-bench-store-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let s = SqliteStore::open(&dir).expect("open store");
    let host = s.host_or_create().unwrap();
    s.add_target(&Target {
        name: "octo".into(),
        scope: TargetScope::Repo {
            owner: "octo".into(),
            repo: "app".into(),
        },
        api_url: "https://api.github.com".into(),
        credential: CredentialRef::TokenEnv {
            var: "GH_TOKEN".into(),
        },
        poll_interval_secs: 5,
        repos: vec![],
        max_in_flight: 8,
        secondary_limit: Some(900),
    })
    .unwrap();
    for name in ["linux", "other"] {
        let mut p = ScalePolicy::new(name, "octo", &host.id);
        p.set_labels("--labels", &["gpu".into()], &host.os, &host.arch)
            .unwrap();
        p.max_capacity = 8;
        s.add_profile(&p).unwrap();
    }

    // The history, written in one transaction: what a long-lived host accumulates.
    // Every attempt but the newest few is cleaned; half belong to each profile. The
    // first 10,000 come first, for the check every CLI write makes at that size.
    let seed = |n: i64, open: i64| {
        s.seed_history(&HistorySeed {
            host_id: &host.id,
            target: "octo",
            profiles: &["linux", "other"],
            n,
            open,
            closed: AttemptState::Destroying,
            base: 0,
        })
        .unwrap()
    };
    seed(QUICK_CHECK_AT, 0);
    quick_check(&s, &dir, QUICK_CHECK_AT);
    let t = Instant::now();
    s.seed_history(&HistorySeed {
        host_id: &host.id,
        target: "octo",
        profiles: &["linux", "other"],
        n: HISTORY - QUICK_CHECK_AT,
        open: OPEN,
        closed: AttemptState::Destroying,
        base: 0,
    })
    .unwrap();
    println!(
        "seeded {HISTORY} attempts ({OPEN} open) in {:.2?}; build profile: {}",
        t.elapsed(),
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    );

    quick_check(&s, &dir, HISTORY);
    let copy = dir.with_extension("backup.db");
    let _ = std::fs::remove_file(&copy);
    let t = Instant::now();
    let done = s.backup_to(&copy).unwrap();
    println!(
        "backup of {HISTORY} attempts: {:.2?}, {} KiB written and checked",
        t.elapsed(),
        done.bytes / 1024
    );
    let _ = std::fs::remove_file(&copy);
    let mut max = 8u32;
    figures(
        "profile set round trip (read + checked write)",
        time(300, || {
            let mut p = s.profile("linux").unwrap();
            max = if max == 8 { 9 } else { 8 };
            p.max_capacity = max;
            s.update_profile(&p, p.revision).unwrap()
        }),
    );
    let open = s.open_attempts_of_profile("linux").unwrap().len();
    figures(
        &format!("open attempts of a profile ({open} of {HISTORY})"),
        time(300, || s.open_attempts_of_profile("linux").unwrap()),
    );
    figures(
        "open attempts of the host",
        time(300, || s.open_attempts(&host.id).unwrap()),
    );
    figures(
        "live counts by profile",
        time(300, || s.live_counts().unwrap()),
    );
    figures(
        "attempts list, newest 50 of one profile",
        time(100, || {
            s.attempts(&AttemptFilter {
                profile: Some("linux".into()),
                active_only: false,
                limit: Some(50),
            })
            .unwrap()
        }),
    );
    let t = Instant::now();
    let pruned = s.prune_attempts(HISTORY * 1000 / 2).unwrap();
    println!(
        "prune of {pruned} cleaned attempts with their events: {:.2?}",
        t.elapsed()
    );
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}
