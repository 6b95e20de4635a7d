//! The daily usage roll-up's rows (`usage_daily`): an ended attempt's figures added
//! to its day's row once, in the transaction that saves it; the rows read back for a
//! span of days; and their own retention, apart from the attempts'. Each write gives
//! the row the next sequence number (`seq`), so a host can send a coordinator the rows
//! changed since the last it took. On a coordinator, the hosts' rows (`coord_usage`,
//! one per host, day and key, each replaced by the host's newer one) and where each
//! host's rows resume (`coord_usage_cursors`).

use super::error::Result;
use super::rows::{self, sql_u64};
use crate::domain::Attempt;
use crate::domain::rollup::{self, Day, UsageFigures, UsageKey, WaitHistogram};
use rusqlite::types::Value;
use rusqlite::{Connection, OptionalExtension, params, params_from_iter};

/// One stored row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageRow {
    /// The pool host that reported it, on a coordinator; empty on a host.
    pub host: String,
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
    let Some((key, figures)) = contribution(c, a)? else {
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

/// What an ended attempt adds to its row (`rollup::contribution`), a job no source
/// named counted under its target's repository when the target is one
/// (`rollup::attribute_to_target`).
pub(super) fn contribution(
    c: &Connection,
    a: &Attempt,
) -> Result<Option<(UsageKey, UsageFigures)>> {
    let Some((mut key, figures)) = rollup::contribution(a) else {
        return Ok(None);
    };
    if key.repo.is_empty() {
        let scope: Option<String> = c
            .prepare_cached("SELECT scope FROM targets WHERE name = ?1")?
            .query_row([&a.target], |r| r.get(0))
            .optional()?;
        let repo = scope
            .and_then(|s| serde_json::from_str::<crate::domain::TargetScope>(&s).ok())
            .and_then(|s| match s {
                crate::domain::TargetScope::Repo { owner, repo } => Some(format!("{owner}/{repo}")),
                crate::domain::TargetScope::Org { .. } => None,
            });
        rollup::attribute_to_target(&mut key, &figures, repo.as_deref());
    }
    Ok(Some((key, figures)))
}

/// Adds `f` to the row of `key` (read, merged, written: the histogram merges by
/// bucket, the peak by maximum).
pub(super) fn add(c: &Connection, key: &UsageKey, f: &UsageFigures) -> Result<()> {
    let mut sum = get(c, key)?.unwrap_or_default();
    sum.merge(f);
    // The write is in the caller's write transaction: the next number is its own.
    let seq: i64 = c
        .prepare_cached("SELECT coalesce(max(seq), 0) + 1 FROM usage_daily")?
        .query_row([], |r| r.get(0))?;
    c.prepare_cached(&format!(
        "INSERT OR REPLACE INTO usage_daily (seq, {KEY_COLUMNS}, {FIGURE_COLUMNS}) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    ))?
    .execute(params_from_iter(
        [Value::Integer(seq)]
            .into_iter()
            .chain(key_values(key))
            .chain(figure_values(&sum)),
    ))?;
    Ok(())
}

const KEY_COLUMNS: &str = "day, repo, workflow, job, profile";
const FIGURE_COLUMNS: &str = "runners, jobs, busy_ms, idle_ms, cpu_ms, peak_rss_bytes, \
     rss_byte_secs, wait_hist, lost, reruns";

fn key_values(k: &UsageKey) -> [Value; 5] {
    [
        Value::Integer(k.day),
        Value::Text(k.repo.clone()),
        Value::Text(k.workflow.clone()),
        Value::Text(k.job.clone()),
        Value::Text(k.profile.clone()),
    ]
}

/// The figures as `FIGURE_COLUMNS` keeps them.
fn figure_values(f: &UsageFigures) -> [Value; 10] {
    let n = |v: u64| Value::Integer(sql_u64(v));
    [
        n(f.runners),
        n(f.jobs),
        n(f.busy_ms),
        n(f.idle_ms),
        n(f.cpu_ms),
        n(f.peak_rss_bytes),
        n(f.rss_byte_secs),
        Value::Text(f.wait.to_text()),
        n(f.lost),
        n(f.reruns),
    ]
}

fn key(r: &rusqlite::Row<'_>, from: usize) -> rusqlite::Result<UsageKey> {
    Ok(UsageKey {
        day: r.get(from)?,
        repo: r.get(from + 1)?,
        workflow: r.get(from + 2)?,
        job: r.get(from + 3)?,
        profile: r.get(from + 4)?,
    })
}

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

/// The rows of days `from..=until`, by key: this host's own (`usage_daily`), or on a
/// coordinator its hosts' (`coord_usage`, by host first).
pub fn rows_between(c: &Connection, from: Day, until: Day, hosts: bool) -> Result<Vec<UsageRow>> {
    let (host, table) = if hosts {
        ("host", "coord_usage")
    } else {
        ("''", "usage_daily")
    };
    let mut st = c.prepare_cached(&format!(
        "SELECT {host}, {KEY_COLUMNS}, {FIGURE_COLUMNS} FROM {table} \
         WHERE day >= ?1 AND day <= ?2 ORDER BY {host}, {KEY_COLUMNS}"
    ))?;
    let rows = st.query_map([from, until], |r| {
        Ok(UsageRow {
            host: r.get(0)?,
            key: key(r, 1)?,
            figures: figures(r, 6)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// At most `limit` of this host's rows of days from `from_day` whose sequence number
/// is past `after`, lowest first, with their numbers. A number past every row's (the
/// roll-up was emptied and numbered afresh) reads as 0.
pub fn changed_after(
    c: &Connection,
    after: i64,
    from_day: Day,
    limit: usize,
) -> Result<Vec<(i64, UsageRow)>> {
    let top: i64 = c
        .prepare_cached("SELECT coalesce(max(seq), 0) FROM usage_daily")?
        .query_row([], |r| r.get(0))?;
    let after = if after > top { 0 } else { after };
    let mut st = c.prepare_cached(&format!(
        "SELECT seq, {KEY_COLUMNS}, {FIGURE_COLUMNS} FROM usage_daily \
         WHERE seq > ?1 AND day >= ?2 ORDER BY seq LIMIT ?3"
    ))?;
    let rows = st.query_map(params![after, from_day, limit as i64], |r| {
        let row = UsageRow {
            host: String::new(),
            key: key(r, 1)?,
            figures: figures(r, 6)?,
        };
        Ok((r.get::<_, i64>(0)?, row))
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// On a coordinator: the rows host `host` (id `host_id`) reported replace its rows of
/// the same day and key, and its rows now resume after `upto`; one transaction.
pub fn put_reported(
    c: &Connection,
    host: &str,
    host_id: &str,
    rows: &[UsageRow],
    upto: Option<i64>,
) -> Result<()> {
    let tx = rows::write_tx(c)?;
    {
        let mut st = tx.prepare_cached(&format!(
            "INSERT OR REPLACE INTO coord_usage (host, {KEY_COLUMNS}, {FIGURE_COLUMNS}) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        ))?;
        for r in rows {
            st.execute(params_from_iter(
                [Value::Text(host.to_string())]
                    .into_iter()
                    .chain(key_values(&r.key))
                    .chain(figure_values(&r.figures)),
            ))?;
        }
        if let Some(upto) = upto {
            tx.prepare_cached(
                "INSERT OR REPLACE INTO coord_usage_cursors (host, host_id, seq) VALUES (?1, ?2, ?3)",
            )?
            .execute(params![host, host_id, upto])?;
        }
    }
    tx.commit()?;
    Ok(())
}

/// On a coordinator: the sequence number after which host `host` resumes, 0 when it
/// has sent none (or its id changed: a new state directory numbers afresh).
pub fn resume_after(c: &Connection, host: &str, host_id: &str) -> Result<i64> {
    Ok(
        c.prepare_cached("SELECT seq FROM coord_usage_cursors WHERE host = ?1 AND host_id = ?2")?
            .query_row([host, host_id], |r| r.get(0))
            .optional()?
            .unwrap_or(0),
    )
}

/// Deletes the rows of days before `before`, a host's own and its hosts' on a
/// coordinator; returns how many went.
pub fn prune(c: &Connection, before: Day) -> Result<usize> {
    let tx = rows::write_tx(c)?;
    let mut n = tx.execute("DELETE FROM usage_daily WHERE day < ?1", [before])?;
    n += tx.execute("DELETE FROM coord_usage WHERE day < ?1", [before])?;
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

    /// This host's roll-up rows for its coordinator ([`changed_after`]).
    pub fn usage_changed_after(
        &self,
        after: i64,
        from_day: Day,
        limit: usize,
    ) -> Result<Vec<(i64, UsageRow)>> {
        self.wrap(changed_after(self.connection(), after, from_day, limit))
    }

    /// On a coordinator: its hosts' rows of days `from..=until`.
    pub fn coord_usage_rows(&self, from: Day, until: Day) -> Result<Vec<UsageRow>> {
        self.wrap(rows_between(self.connection(), from, until, true))
    }

    /// On a coordinator: a host's reported rows ([`put_reported`]).
    pub fn coord_put_usage(
        &self,
        host: &str,
        host_id: &str,
        rows: &[UsageRow],
        upto: Option<i64>,
    ) -> Result<()> {
        self.wrap(put_reported(self.connection(), host, host_id, rows, upto))
    }

    /// On a coordinator: where a host's rows resume ([`resume_after`]).
    pub fn coord_usage_resume_after(&self, host: &str, host_id: &str) -> Result<i64> {
        self.wrap(resume_after(self.connection(), host, host_id))
    }
}
