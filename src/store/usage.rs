//! The daily usage roll-up's rows (`usage_daily`): an ended attempt's figures added
//! to its day's row once, in the transaction that saves it; the rows read back for a
//! span of days; and their own retention, apart from the attempts'.

use super::error::Result;
use super::rows::{self, sql_u64};
use crate::domain::Attempt;
use crate::domain::rollup::{self, Day, UsageFigures, UsageKey, WaitHistogram};
use rusqlite::{Connection, OptionalExtension, params};

/// One stored row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageRow {
    pub key: UsageKey,
    pub figures: UsageFigures,
}

/// Adds the attempt to its day's row if it is ready (`rollup::ready`) and was not
/// added before. The flag is read and set here, in the caller's transaction, so an
/// attempt is counted once however often it is saved.
pub(super) fn roll_up(c: &Connection, a: &Attempt) -> Result<()> {
    if !rollup::ready(a) {
        return Ok(());
    }
    let Some((key, figures)) = rollup::contribution(a) else {
        return Ok(());
    };
    let claimed = c.execute(
        "UPDATE attempts SET rolled_up = 1 WHERE id = ?1 AND rolled_up = 0",
        [a.id],
    )?;
    if claimed == 1 {
        add(c, &key, &figures)?;
    }
    Ok(())
}

/// Adds `f` to the row of `key` (read, merged, written: the histogram merges by
/// bucket, the peak by maximum).
pub(super) fn add(c: &Connection, key: &UsageKey, f: &UsageFigures) -> Result<()> {
    let mut sum = get(c, key)?.unwrap_or_default();
    sum.merge(f);
    c.prepare_cached(
        "INSERT OR REPLACE INTO usage_daily (day, repo, workflow, job, profile, runners, jobs, \
         busy_ms, idle_ms, cpu_ms, peak_rss_bytes, rss_byte_secs, wait_hist, lost, reruns) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
    )?
    .execute(params![
        key.day,
        key.repo,
        key.workflow,
        key.job,
        key.profile,
        sql_u64(sum.runners),
        sql_u64(sum.jobs),
        sql_u64(sum.busy_ms),
        sql_u64(sum.idle_ms),
        sql_u64(sum.cpu_ms),
        sql_u64(sum.peak_rss_bytes),
        sql_u64(sum.rss_byte_secs),
        sum.wait.to_text(),
        sql_u64(sum.lost),
        sql_u64(sum.reruns),
    ])?;
    Ok(())
}

const FIGURE_COLUMNS: &str = "runners, jobs, busy_ms, idle_ms, cpu_ms, peak_rss_bytes, \
     rss_byte_secs, wait_hist, lost, reruns";

fn figures(r: &rusqlite::Row<'_>, from: usize) -> rusqlite::Result<UsageFigures> {
    let n = |i: usize| -> rusqlite::Result<u64> { Ok(r.get::<_, i64>(from + i)?.max(0) as u64) };
    Ok(UsageFigures {
        runners: n(0)?,
        jobs: n(1)?,
        busy_ms: n(2)?,
        idle_ms: n(3)?,
        cpu_ms: n(4)?,
        peak_rss_bytes: n(5)?,
        rss_byte_secs: n(6)?,
        wait: WaitHistogram::from_text(&r.get::<_, String>(from + 7)?),
        lost: n(8)?,
        reruns: n(9)?,
    })
}

fn get(c: &Connection, key: &UsageKey) -> Result<Option<UsageFigures>> {
    Ok(c.prepare_cached(&format!(
        "SELECT {FIGURE_COLUMNS} FROM usage_daily \
         WHERE day = ?1 AND repo = ?2 AND workflow = ?3 AND job = ?4 AND profile = ?5"
    ))?
    .query_row(
        params![key.day, key.repo, key.workflow, key.job, key.profile],
        |r| figures(r, 0),
    )
    .optional()?)
}

/// The rows of days `from..=until`, by key.
pub fn rows_between(c: &Connection, from: Day, until: Day) -> Result<Vec<UsageRow>> {
    let mut st = c.prepare_cached(&format!(
        "SELECT day, repo, workflow, job, profile, {FIGURE_COLUMNS} FROM usage_daily \
         WHERE day >= ?1 AND day <= ?2 ORDER BY day, repo, workflow, job, profile"
    ))?;
    let rows = st.query_map([from, until], |r| {
        Ok(UsageRow {
            key: UsageKey {
                day: r.get(0)?,
                repo: r.get(1)?,
                workflow: r.get(2)?,
                job: r.get(3)?,
                profile: r.get(4)?,
            },
            figures: figures(r, 5)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Deletes the rows of days before `before`; returns how many went.
pub fn prune(c: &Connection, before: Day) -> Result<usize> {
    let tx = rows::write_tx(c)?;
    let n = tx.execute("DELETE FROM usage_daily WHERE day < ?1", [before])?;
    tx.commit()?;
    Ok(n)
}

/// Each repository's figures per day, for days `from` on (one `GROUP BY`: the usage
/// metrics' read, `metrics::usage`). The waits and peaks are not summed here.
fn by_day_and_repo(c: &Connection, from: Day) -> Result<Vec<(Day, String, UsageFigures)>> {
    let mut st = c.prepare(
        "SELECT day, repo, SUM(runners), SUM(jobs), SUM(busy_ms), SUM(idle_ms), SUM(cpu_ms), \
         SUM(rss_byte_secs), SUM(lost), SUM(reruns) FROM usage_daily WHERE day >= ?1 \
         GROUP BY day, repo",
    )?;
    let rows = st.query_map([from], |r| {
        let n = |i: usize| -> rusqlite::Result<u64> { Ok(r.get::<_, i64>(i)?.max(0) as u64) };
        Ok((
            r.get(0)?,
            r.get(1)?,
            UsageFigures {
                runners: n(2)?,
                jobs: n(3)?,
                busy_ms: n(4)?,
                idle_ms: n(5)?,
                cpu_ms: n(6)?,
                rss_byte_secs: n(7)?,
                lost: n(8)?,
                reruns: n(9)?,
                ..Default::default()
            },
        ))
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// The repositories that used the most CPU over days `from` on, the most first.
fn repos_by_cpu(c: &Connection, from: Day, limit: usize) -> Result<Vec<String>> {
    let mut st = c.prepare(
        "SELECT repo FROM usage_daily WHERE day >= ?1 GROUP BY repo \
         ORDER BY SUM(cpu_ms) DESC, repo LIMIT ?2",
    )?;
    let rows = st.query_map(params![from, limit as i64], |r| r.get(0))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

impl super::SqliteStore {
    /// Each repository's summed figures per day, for days `from` on.
    pub fn usage_by_day_and_repo(&self, from: Day) -> Result<Vec<(Day, String, UsageFigures)>> {
        self.wrap(by_day_and_repo(self.connection(), from))
    }

    /// At most `limit` repositories, by CPU used over days `from` on, the most first.
    pub fn usage_repos_by_cpu(&self, from: Day, limit: usize) -> Result<Vec<String>> {
        self.wrap(repos_by_cpu(self.connection(), from, limit))
    }
}
