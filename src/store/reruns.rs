//! The lost jobs' rows (`reruns`, issue 34): one written when an attempt that lost its
//! job ends, in the transaction that saves it, so a daemon killed right after still
//! finds it; read back by the target loop while it waits, and by `attempts`,
//! `attempt show` and `status`.

use super::error::Result;
use super::rows;
use crate::domain::Attempt;
use crate::domain::rerun::{Rerun, RerunState};
use crate::timefmt::Millis;
use rusqlite::{Connection, OptionalExtension, Row, params};
use std::sync::atomic::{AtomicU64, Ordering};

const COLUMNS: &str = "attempt_id, target, profile, runner_name, repo, run_id, job_name, job_id, \
     loss, lost_at, state, tries, next_at, detail, done_at";

/// How many waiting rows one look takes.
pub const DUE_AT_ONCE: usize = 20;

fn row(r: &Row<'_>) -> rusqlite::Result<Rerun> {
    Ok(Rerun {
        attempt_id: r.get(0)?,
        target: r.get(1)?,
        profile: r.get(2)?,
        runner_name: r.get(3)?,
        repo: r.get(4)?,
        run_id: r.get(5)?,
        job_name: r.get(6)?,
        job_id: r.get(7)?,
        loss: r.get(8)?,
        lost_at: r.get(9)?,
        state: RerunState::parse(&r.get::<_, String>(10)?),
        tries: r.get(11)?,
        next_at: r.get(12)?,
        detail: r.get(13)?,
        done_at: r.get(14)?,
    })
}

/// Writes the row of a job the ended attempt `a` lost (`domain::loss`), once: a second
/// save finds it there, and a job of the same repository, run and name (its re-run,
/// lost again) is never given a second row, so never re-run twice. Says whether it
/// wrote one: the caller raises [`losses_noted`] once its transaction is committed.
pub(super) fn note_loss(c: &Connection, a: &Attempt) -> Result<bool> {
    let (Some(at), Some(loss)) = (a.ended_at, crate::domain::loss::loss(a)) else {
        return Ok(false);
    };
    let owner = a.owner.as_ref();
    let written = c
        .prepare_cached(&format!(
            "INSERT OR IGNORE INTO reruns ({COLUMNS}) VALUES \
         (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 'waiting', 0, ?10, NULL, NULL)"
        ))?
        .execute(params![
            a.id,
            a.target,
            a.profile,
            a.runner_name,
            owner.map(|o| &o.repo),
            owner.map(|o| o.run_id),
            owner.map(|o| &o.job_name).or(a.job_name.as_ref()),
            a.job_id.or(owner.and_then(|o| o.job_id)),
            loss.as_str(),
            at,
        ])?;
    // Whose job it was may come a pass after the end (the next queue read): filled in
    // while the row waits, unless another row holds that job (then it stays unnamed,
    // and the worker finds it lost before).
    if let Some(o) = owner {
        c.prepare_cached(
            "UPDATE OR IGNORE reruns SET repo = COALESCE(repo, ?2), \
             run_id = COALESCE(run_id, ?3), job_name = COALESCE(job_name, ?4), \
             job_id = COALESCE(job_id, ?5) WHERE attempt_id = ?1 AND state = 'waiting'",
        )?
        .execute(params![a.id, o.repo, o.run_id, o.job_name, o.job_id])?;
    }
    Ok(written > 0)
}

/// Says a lost job's row was committed: the target loops look again.
pub(super) fn loss_committed() {
    LOSSES_NOTED.fetch_add(1, Ordering::AcqRel);
}

/// The target's rows waiting whose time has come, the oldest loss first.
fn due(c: &Connection, target: &str, now: Millis) -> Result<Vec<Rerun>> {
    let mut st = c.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM reruns WHERE target = ?1 AND state = 'waiting' AND next_at <= ?2 \
         ORDER BY lost_at LIMIT ?3"
    ))?;
    let rows = st.query_map(params![target, now, DUE_AT_ONCE as i64], row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// When the target's first waiting row is due, if one waits. Asked only when a loss
/// was noted or a look settled rows ([`losses_noted`]), so not cached: an idle loop
/// keeps no statement for it (issue 32, "Idle").
fn first_due(c: &Connection, target: &str) -> Result<Option<Millis>> {
    Ok(c.query_row(
        "SELECT MIN(next_at) FROM reruns WHERE target = ?1 AND state = 'waiting'",
        params![target],
        |r| r.get::<_, Option<Millis>>(0),
    )
    .optional()?
    .flatten())
}

/// How many lost jobs' rows this process has written: a target loop asks the store
/// again only when this moved (or when its own look settled rows).
static LOSSES_NOTED: AtomicU64 = AtomicU64::new(0);

/// How many lost jobs' rows this process has written so far.
pub fn losses_noted() -> u64 {
    LOSSES_NOTED.load(Ordering::Acquire)
}

/// Writes what became of a row (its state, what GitHub said, when to ask again and
/// what was learned of the job).
fn put(c: &Connection, r: &Rerun) -> Result<()> {
    c.prepare_cached(
        "UPDATE reruns SET state = ?2, tries = ?3, next_at = ?4, detail = ?5, done_at = ?6, \
         repo = ?7, run_id = ?8, job_id = ?9, job_name = ?10 WHERE attempt_id = ?1",
    )?
    .execute(params![
        r.attempt_id,
        r.state.as_str(),
        r.tries,
        r.next_at,
        r.detail,
        r.done_at,
        r.repo,
        r.run_id,
        r.job_id,
        r.job_name,
    ])?;
    Ok(())
}

/// When a profile's re-runs were asked for, since `since` (the hourly bound).
fn asked_since(c: &Connection, profile: &str, since: Millis) -> Result<Vec<Millis>> {
    let mut st = c.prepare_cached(
        "SELECT done_at FROM reruns WHERE profile = ?1 AND state = 'rerun' AND done_at >= ?2",
    )?;
    let rows = st.query_map(params![profile, since], |r| r.get(0))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// The row of an attempt's lost job, if it has one.
pub(super) fn of_attempt(c: &Connection, attempt: i64) -> Result<Option<Rerun>> {
    Ok(c.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM reruns WHERE attempt_id = ?1"
    ))?
    .query_row([attempt], row)
    .optional()?)
}

/// Every row, newest loss first, at most `limit`.
pub(super) fn recent(c: &Connection, limit: usize) -> Result<Vec<Rerun>> {
    let mut st = c.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM reruns ORDER BY lost_at DESC, attempt_id DESC LIMIT ?1"
    ))?;
    let rows = st.query_map([limit as i64], row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Per profile: its jobs lost since `since`, and how many of them were re-run.
pub(super) fn counts(c: &Connection, since: Millis) -> Result<Vec<(String, u64, u64)>> {
    let mut st = c.prepare_cached(
        "SELECT profile, count(*), sum(state = 'rerun') FROM reruns WHERE lost_at >= ?1 \
         GROUP BY profile ORDER BY profile",
    )?;
    let rows = st.query_map([since], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, i64>(1)?.max(0) as u64,
            r.get::<_, i64>(2)?.max(0) as u64,
        ))
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Whether another row holds the job `r` now names (its repository, run and name).
fn identity_taken(c: &Connection, r: &Rerun) -> Result<bool> {
    let (Some(repo), Some(run), Some(name)) = (&r.repo, r.run_id, &r.job_name) else {
        return Ok(false);
    };
    Ok(c.prepare_cached(
        "SELECT 1 FROM reruns WHERE repo = ?1 AND run_id = ?2 AND job_name = ?3 \
         AND attempt_id != ?4 LIMIT 1",
    )?
    .query_row(params![repo, run, name, r.attempt_id], |_| Ok(()))
    .optional()?
    .is_some())
}

impl super::SqliteStore {
    /// Whether another lost job's row holds the job `r` now names: the job was lost
    /// before (`reconcile::rerun::lost_before`).
    pub fn rerun_identity_taken(&self, r: &Rerun) -> Result<bool> {
        self.wrap(identity_taken(self.connection(), r))
    }

    /// The target's lost jobs waiting whose time has come, the oldest first (at most
    /// [`DUE_AT_ONCE`]).
    pub fn reruns_due(&self, target: &str, now: Millis) -> Result<Vec<Rerun>> {
        self.wrap(due(self.connection(), target, now))
    }

    /// When the target's first waiting lost job is due, if one waits.
    pub fn first_rerun_due(&self, target: &str) -> Result<Option<Millis>> {
        self.wrap(first_due(self.connection(), target))
    }

    /// Writes what became of lost jobs, in one transaction; a job re-run is added to
    /// its attempt's usage roll-up row (`reruns`) in the same one. Each row settles
    /// once, so it is counted once.
    pub fn put_reruns(&self, rs: &[Rerun]) -> Result<()> {
        let tx = rows::write_tx(self.connection())?;
        for r in rs {
            put(&tx, r)?;
            if r.state == RerunState::Rerun {
                let a = super::ledger::get(&tx, r.attempt_id)?;
                if let Some((key, _)) = super::usage::contribution(&tx, &a)? {
                    let one = crate::domain::rollup::UsageFigures {
                        reruns: 1,
                        ..Default::default()
                    };
                    super::usage::add(&tx, &key, &one)?;
                }
            }
        }
        self.wrap(tx.commit().map_err(Into::into))
    }

    /// When a profile's re-runs were asked for, since `since`.
    pub fn reruns_asked_since(&self, profile: &str, since: Millis) -> Result<Vec<Millis>> {
        self.wrap(asked_since(self.connection(), profile, since))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{new_attempt, seeded};
    use super::super::{SqliteStore, Store};
    use super::*;
    use crate::domain::job_owner::{JobOwner, OwnerSource};
    use crate::domain::{AttemptState, Outcome, Reason, ReasonKind};

    fn owner(job_id: i64) -> JobOwner {
        JobOwner {
            repo: "octo/app".into(),
            workflow: Some("ci".into()),
            job_name: "build".into(),
            run_id: 9,
            run_attempt: Some(1),
            job_id: Some(job_id),
            queued_at: None,
            source: OwnerSource::Rest,
        }
    }

    /// A runner busy with a job, killed by SIGKILL at `at` (exit 137): its job lost.
    fn lost(s: &SqliteStore, h: &crate::domain::Host, at: Millis) -> Attempt {
        let mut a = s.create_attempt(&new_attempt(h, "linux"), at).unwrap();
        a.step(AttemptState::Starting, at + 1).unwrap();
        a.step(AttemptState::Idle, at + 2).unwrap();
        a.step(AttemptState::Busy, at + 3).unwrap();
        a.job_name = Some("build".into());
        s.save_attempt(&a).unwrap();
        let reason = Reason::exit(ReasonKind::ExitedDuringJob, 137);
        a.exit_code = Some(137);
        a.end(Outcome::Failed, Some(reason), at + 10).unwrap();
        a
    }

    #[test]
    fn a_loss_is_written_once_with_its_attempt_and_named_when_its_owner_comes() {
        let (s, h, _) = seeded();
        let mut a = lost(&s, &h, 1_000);
        assert!(crate::domain::loss::loss(&a).is_some(), "{a:?}");
        assert_eq!(s.first_rerun_due("octo").unwrap(), None);
        let noted = losses_noted();
        s.save_attempt(&a).unwrap();
        assert!(losses_noted() > noted, "the loops are told to look");
        s.save_attempt(&a).unwrap();
        let r = s.rerun_of(a.id).unwrap().expect("the loss has its row");
        assert_eq!(
            (r.state, r.loss.as_str(), r.lost_at, r.next_at),
            (RerunState::Waiting, "killed", 1_010, 1_010)
        );
        assert_eq!(
            (r.repo.as_deref(), r.run_id),
            (None, None),
            "no source named it"
        );
        assert_eq!(r.job_name.as_deref(), Some("build"), "the runner's log did");
        assert_eq!(s.first_rerun_due("octo").unwrap(), Some(1_010));
        assert_eq!(s.first_rerun_due("other").unwrap(), None);

        // The next queue read names it: the row takes it while it waits.
        a.take_owner(owner(90));
        s.save_attempt(&a).unwrap();
        let r = s.rerun_of(a.id).unwrap().unwrap();
        assert_eq!(
            (r.repo.as_deref(), r.run_id, r.job_id),
            (Some("octo/app"), Some(9), Some(90))
        );
        assert_eq!(s.reruns_due("octo", 5_000).unwrap(), vec![r.clone()]);

        let mut done = r;
        done.state = RerunState::Rerun;
        done.done_at = Some(6_000);
        s.put_reruns(std::slice::from_ref(&done)).unwrap();
        assert!(s.reruns_due("octo", 9_000).unwrap().is_empty());
        assert_eq!(s.reruns_asked_since("linux", 5_000).unwrap(), vec![6_000]);
        assert!(s.reruns_asked_since("linux", 6_001).unwrap().is_empty());
        assert_eq!(
            s.rerun_counts(0).unwrap(),
            vec![("linux".to_string(), 1, 1)]
        );
        let day = crate::domain::rollup::day_of(1_010);
        let rows = s.usage_rows(day, day).unwrap();
        let (lost, reruns) = rows.iter().fold((0, 0), |(l, r), u| {
            (l + u.figures.lost, r + u.figures.reruns)
        });
        assert_eq!(
            (lost, reruns),
            (1, 1),
            "the roll-up counts the loss and its re-run"
        );
    }

    #[test]
    fn the_same_job_lost_again_gets_no_second_row_named() {
        let (s, h, _) = seeded();
        let mut first = lost(&s, &h, 1_000);
        first.take_owner(owner(90));
        s.save_attempt(&first).unwrap();
        // Its re-run (a new job id, the same repository, run and name) is lost too.
        let mut again = lost(&s, &h, 50_000);
        again.take_owner(owner(91));
        s.save_attempt(&again).unwrap();
        assert!(
            s.rerun_of(again.id).unwrap().is_none(),
            "one row per job: a re-run job lost again is never re-run"
        );
        // Named only later (found by its runner's name), the same job is known taken.
        let late = lost(&s, &h, 90_000);
        s.save_attempt(&late).unwrap();
        let mut r = s.rerun_of(late.id).unwrap().unwrap();
        assert!(!s.rerun_identity_taken(&r).unwrap());
        r.repo = Some("octo/app".into());
        r.run_id = Some(9);
        assert!(s.rerun_identity_taken(&r).unwrap());
        r.run_id = Some(10);
        assert!(!s.rerun_identity_taken(&r).unwrap());
    }

    #[test]
    fn a_job_that_ended_by_itself_has_no_row() {
        let (s, h, _) = seeded();
        let mut a = s.create_attempt(&new_attempt(&h, "linux"), 0).unwrap();
        a.step(AttemptState::Starting, 1).unwrap();
        a.step(AttemptState::Idle, 2).unwrap();
        a.step(AttemptState::Busy, 3).unwrap();
        a.exit_code = Some(0);
        a.end(Outcome::CompletedJob, None, 10).unwrap();
        s.save_attempt(&a).unwrap();
        assert!(s.rerun_of(a.id).unwrap().is_none());
        assert!(s.recent_reruns(10).unwrap().is_empty());
    }
}
