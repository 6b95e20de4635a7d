//! The usage roll-up in the store: written once as attempts end, equal to the ledger
//! it came from, kept when the attempts are pruned, and pruned on its own.

use super::tests::seeded;
use super::*;
use crate::domain::job_owner::{JobOwner, OwnerSource};
use crate::domain::rollup::{DAY_MS, UsageFigures};
use crate::domain::{AttemptState, Outcome};

fn owner(repo: &str, workflow: &str, queued_at: Millis) -> JobOwner {
    JobOwner {
        repo: repo.into(),
        workflow: Some(workflow.into()),
        job_name: "build".into(),
        run_id: 9,
        run_attempt: Some(1),
        job_id: Some(90),
        queued_at: Some(queued_at),
        source: OwnerSource::Rest,
    }
}

/// One attempt's whole life, saved at each step as the daemon saves it.
fn life(s: &SqliteStore, host: &str, at: Millis, busy_for: Option<Millis>, who: Option<JobOwner>) {
    let mut a = s
        .create_attempt(
            &NewAttempt {
                profile: "linux".into(),
                target: "octo".into(),
                host_id: host.into(),
                ..NewAttempt::default()
            },
            at,
        )
        .unwrap();
    a.step(AttemptState::Starting, at + 1_000).unwrap();
    a.step(AttemptState::Idle, at + 2_000).unwrap();
    s.save_attempt(&a).unwrap();
    let end = match busy_for {
        Some(d) => {
            a.step(AttemptState::Busy, at + 3_000).unwrap();
            a.job_name = Some("build".into());
            s.save_attempt(&a).unwrap();
            a.cpu_millis = Some(d as u64 / 2);
            a.peak_rss_bytes = Some(2 << 30);
            a.mean_rss_bytes = Some(1 << 30);
            a.end(Outcome::CompletedJob, None, at + 3_000 + d).unwrap();
            at + 3_000 + d
        }
        None => {
            a.end(Outcome::ExitedIdleWithoutWork, None, at + 60_000)
                .unwrap();
            at + 60_000
        }
    };
    s.save_attempt(&a).unwrap();
    // The owner comes a pass later (the next queue read), then the cleanup.
    a.owner = who;
    s.save_attempt(&a).unwrap();
    a.step(AttemptState::Destroying, end + 100).unwrap();
    a.mark_cleaned(end + 200);
    s.save_attempt(&a).unwrap();
    s.save_attempt(&a).unwrap();
}

fn total(rows: &[UsageRow]) -> UsageFigures {
    let mut t = UsageFigures::default();
    for r in rows {
        t.merge(&r.figures);
    }
    t
}

#[test]
fn the_roll_up_adds_up_to_the_ledger_and_outlives_its_pruning() {
    let (s, h, _) = seeded();
    let day = 20_000 * DAY_MS;
    life(
        &s,
        &h.id,
        day + 1_000,
        Some(600_000),
        Some(owner("octo/app", "CI", day)),
    );
    life(
        &s,
        &h.id,
        day + 2_000,
        Some(120_000),
        Some(owner("octo/app", "CI", day)),
    );
    life(
        &s,
        &h.id,
        day + 3_000,
        Some(30_000),
        Some(owner("octo/web", "Deploy", day)),
    );
    life(&s, &h.id, day + 4_000, Some(40_000), None);
    life(&s, &h.id, day + DAY_MS, None, None);

    let ledger = s.attempts(&AttemptFilter::default()).unwrap();
    let rows = s.usage_rows(20_000, 20_001).unwrap();
    let t = total(&rows);
    let sum = |f: fn(&Attempt) -> u64| ledger.iter().map(f).sum::<u64>();
    assert_eq!(
        t.runners,
        ledger.len() as u64,
        "every ended attempt counted once"
    );
    assert_eq!(t.jobs, 4);
    assert_eq!(t.cpu_ms, sum(|a| a.cpu_millis.unwrap_or(0)));
    assert_eq!(
        t.runner_ms(),
        sum(|a| a.age_millis(0) as u64),
        "runner time is each attempt's life"
    );
    assert_eq!(t.peak_rss_bytes, 2 << 30);
    assert_eq!(t.wait.count(), 3, "three jobs with a known queue time");
    assert!(ledger.iter().all(|a| a.rolled_up));

    let by_repo = |repo: &str| {
        total(
            &rows
                .iter()
                .filter(|r| r.key.repo == repo)
                .cloned()
                .collect::<Vec<_>>(),
        )
    };
    // The job no source named ran on octo/app's target: it was octo/app's.
    assert_eq!(by_repo("octo/app").jobs, 3);
    assert_eq!(by_repo("octo/web").busy_ms, 30_000);
    assert_eq!(by_repo("").runners, 1, "the idle runner is no one's");
    assert_eq!(rows.iter().filter(|r| r.key.day == 20_001).count(), 1);

    assert_eq!(s.prune_attempts(i64::MAX).unwrap(), 5);
    assert_eq!(
        s.usage_rows(20_000, 20_001).unwrap(),
        rows,
        "roll-ups survive"
    );
    assert_eq!(s.prune_usage(20_001).unwrap(), rows.len() - 1);
    assert_eq!(s.usage_rows(0, i64::MAX).unwrap().len(), 1);
}

#[test]
fn a_migrated_store_does_not_roll_up_what_ended_before() {
    let (s, h, _) = seeded();
    s.seed_history(&HistorySeed {
        host_id: &h.id,
        target: "octo",
        profiles: &["linux"],
        n: 3,
        open: 0,
        closed: AttemptState::Finished,
        base: 0,
    })
    .unwrap();
    // Seeded rows stand for history written before V19: mark them as its migration does.
    s.connection()
        .execute_batch("UPDATE attempts SET rolled_up = 1 WHERE ended_at IS NOT NULL")
        .unwrap();
    for a in s.attempts(&AttemptFilter::default()).unwrap() {
        s.save_attempt(&a).unwrap();
    }
    assert!(s.usage_rows(i64::MIN, i64::MAX).unwrap().is_empty());
}

/// A host sends the rows changed since the coordinator last took them (each write
/// numbers its row afresh); the coordinator keeps one row per host, day and key, so a
/// row sent again replaces its first copy, and prunes them by day with the rest.
#[test]
fn hosts_send_rows_changed_since_and_a_coordinator_keeps_one_per_host_and_key() {
    let (s, h, _) = seeded();
    let day = 20_000 * DAY_MS;
    life(&s, &h.id, day, Some(60_000), Some(owner("o/a", "CI", day)));
    life(&s, &h.id, day, Some(30_000), Some(owner("o/b", "CI", day)));
    let all = s.usage_changed_after(0, 0, 100).unwrap();
    assert_eq!(all.len(), 2);
    let (first, _) = all[0];
    let after = s.usage_changed_after(first, 0, 100).unwrap();
    assert_eq!(after.len(), 1, "only the row written after the first");
    assert_eq!(
        s.usage_changed_after(0, 0, 1).unwrap().len(),
        1,
        "the limit"
    );
    assert!(
        s.usage_changed_after(0, 20_001, 100).unwrap().is_empty(),
        "the window"
    );
    // Another job of o/a: its row is written again, with the newest number.
    life(&s, &h.id, day, Some(10_000), Some(owner("o/a", "CI", day)));
    let top = all.iter().map(|(n, _)| *n).max().unwrap();
    let changed = s.usage_changed_after(top, 0, 100).unwrap();
    assert_eq!(changed.len(), 1);
    assert_eq!(changed[0].1.key.repo, "o/a");
    assert_eq!(changed[0].1.figures.jobs, 2);
    // A number past every row's (a store numbered afresh) starts over.
    assert_eq!(s.usage_changed_after(1_000_000, 0, 100).unwrap().len(), 2);

    let rows: Vec<UsageRow> = all.into_iter().map(|(_, r)| r).collect();
    assert_eq!(s.coord_usage_resume_after("h1", "id1").unwrap(), 0);
    s.coord_put_usage("h1", "id1", &rows, Some(top)).unwrap();
    s.coord_put_usage("h2", "id2", &rows, None).unwrap();
    let changed_rows: Vec<UsageRow> = changed.into_iter().map(|(_, r)| r).collect();
    s.coord_put_usage("h1", "id1", &changed_rows, Some(top + 1))
        .unwrap();
    assert_eq!(s.coord_usage_resume_after("h1", "id1").unwrap(), top + 1);
    assert_eq!(s.coord_usage_resume_after("h1", "new-id").unwrap(), 0);
    let kept = s.coord_usage_rows(20_000, 20_000).unwrap();
    assert_eq!(kept.len(), 4, "two rows for each of two hosts");
    let jobs = |host: &str| {
        kept.iter()
            .filter(|r| r.host == host)
            .map(|r| r.figures.jobs)
            .sum::<u64>()
    };
    assert_eq!((jobs("h1"), jobs("h2")), (3, 2), "h1's o/a row replaced");
    assert!(
        s.usage_rows(0, i64::MAX)
            .unwrap()
            .iter()
            .all(|r| r.host.is_empty())
    );
    assert_eq!(s.prune_usage(20_001).unwrap(), 2 + 4);
    assert!(s.coord_usage_rows(0, i64::MAX).unwrap().is_empty());
}
