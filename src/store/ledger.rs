//! The attempt ledger: one row per runner life, its state changes in `attempt_events`,
//! and the indexed reads a daemon pass makes.

use super::error::{Result, StoreError};
use super::rows::{self, ATTEMPT_COLUMNS, sql_u64};
use super::{AttemptFilter, HistorySeed, NewAttempt};
use crate::domain::attempt::StateChange;
use crate::domain::host::short_id;
use crate::domain::{Attempt, AttemptState, runner_name};
use crate::timefmt::Millis;
use rusqlite::{Connection, OptionalExtension, params};
use std::collections::BTreeMap;

/// The live states, as SQL, for the `state IN (...)` clauses the partial indexes serve.
const LIVE_STATES: &str = "('pending', 'starting', 'idle', 'busy')";

pub fn create(c: &Connection, new: &NewAttempt, now: Millis) -> Result<Attempt> {
    let tx = rows::write_tx(c)?;
    // The slot: one of the target's that no attempt not yet cleaned holds, chosen in
    // the insert's own transaction (the unique index says so too).
    let slot: u32 = {
        let mut st = tx.prepare_cached(
            "SELECT slot FROM attempts WHERE target = ?1 AND cleaned = 0 AND slot IS NOT NULL \
             ORDER BY slot",
        )?;
        let held: Vec<u32> = st
            .query_map([&new.target], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        choose_slot(&held, last_slot_of_uid(&tx, new)?)
    };
    // The runner name needs the id, which only the insert gives: insert with an
    // empty name and set it in the same transaction, so nobody ever sees it empty.
    tx.execute(
        "INSERT INTO attempts (profile, target, host_id, runner_name, state, created_at, \
         updated_at, job_id, job_name, job_queued_at, lease_id, runner_uid, runner_gid, slot, \
         keeps_work) VALUES (?1, ?2, ?3, '', 'pending', ?4, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
        params![
            new.profile,
            new.target,
            new.host_id,
            now,
            new.job_id,
            new.job_name,
            new.job_queued_at,
            new.lease_id,
            new.runner_uid,
            new.runner_gid,
            slot,
            new.keeps_work
        ],
    )?;
    let id = tx.last_insert_rowid();
    let mut a = Attempt::new(id, &new.profile, &new.target, &new.host_id, now);
    a.job_id = new.job_id;
    a.job_name = new.job_name.clone();
    a.job_queued_at = new.job_queued_at;
    a.lease_id = new.lease_id.clone();
    a.runner_uid = new.runner_uid;
    a.runner_gid = new.runner_gid;
    a.slot = Some(slot);
    a.keeps_work = new.keeps_work;
    debug_assert_eq!(a.runner_name, runner_name(&new.host_id, id));
    tx.execute(
        "UPDATE attempts SET runner_name = ?2 WHERE id = ?1",
        params![id, a.runner_name],
    )?;
    append_events(&tx, id, 0, &a.history)?;
    tx.commit()?;
    Ok(a)
}

/// The slot of `new.target` whose last holder ran under `new.runner_uid`, if any:
/// taking it again spares giving its files to another uid at the start.
fn last_slot_of_uid(c: &Connection, new: &NewAttempt) -> Result<Option<u32>> {
    let Some(uid) = new.runner_uid else {
        return Ok(None);
    };
    let last: Option<u32> = c
        .query_row(
            "SELECT slot FROM attempts WHERE target = ?1 AND runner_uid = ?2 \
             AND slot IS NOT NULL ORDER BY id DESC LIMIT 1",
            params![new.target, uid],
            |r| r.get(0),
        )
        .optional()?;
    let Some(slot) = last else { return Ok(None) };
    let holder: Option<Option<u32>> = c
        .query_row(
            "SELECT runner_uid FROM attempts WHERE target = ?1 AND slot = ?2 \
             ORDER BY id DESC LIMIT 1",
            params![new.target, slot],
            |r| r.get(0),
        )
        .optional()?;
    Ok((holder == Some(Some(uid))).then_some(slot))
}

/// The slot an attempt takes: `preferred` (the one its uid last held) when no one
/// holds it, else the lowest free. `held` is sorted ascending.
pub fn choose_slot(held: &[u32], preferred: Option<u32>) -> u32 {
    match preferred {
        Some(p) if !held.contains(&p) => p,
        _ => lowest_free(held),
    }
}

/// The lowest number not in `held` (sorted ascending).
fn lowest_free(held: &[u32]) -> u32 {
    let mut n = 0;
    for &h in held {
        if h == n {
            n += 1;
        } else if h > n {
            break;
        }
    }
    n
}

fn append_events(c: &Connection, id: i64, from: usize, history: &[StateChange]) -> Result<()> {
    let mut st = c.prepare_cached(
        "INSERT INTO attempt_events (attempt_id, seq, state, at) VALUES (?1, ?2, ?3, ?4)",
    )?;
    for (seq, ev) in history.iter().enumerate().skip(from) {
        st.execute(params![id, seq as i64, ev.state.as_str(), ev.at])?;
    }
    Ok(())
}

/// Records that attempt `id` serves the launch `lease`. Its own statement, not part
/// of `save`: a launch binds to an attempt a worker may hold (and save) at that
/// moment, and a whole-row write from either side would undo the other's.
pub fn set_lease(c: &Connection, id: i64, lease: &str) -> Result<()> {
    let n = c.execute(
        "UPDATE attempts SET lease_id = ?2 WHERE id = ?1",
        params![id, lease],
    )?;
    if n == 0 {
        return Err(StoreError::NotFound {
            what: "attempt",
            name: id.to_string(),
        });
    }
    Ok(())
}

/// Writes the attempt's row and appends its new state changes. What is known of the
/// job (its id, name, queue time and owner) is never erased: a copy read before it
/// was learned (a worker's, the loop's) saves `None` for it, and the row keeps what
/// it had (`COALESCE`; the owner's columns go together, keyed on its source).
pub fn save(c: &Connection, a: &Attempt) -> Result<()> {
    let tx = rows::write_tx(c)?;
    let n = tx.execute(
        "UPDATE attempts SET state = ?2, outcome = ?3, reason = ?4, updated_at = ?5, \
         ended_at = ?6, pid = ?7, pid_start = ?8, exit_code = ?9, runner_id = ?10, \
         job_name = COALESCE(?11, job_name), job_id = COALESCE(?12, job_id), \
         job_queued_at = COALESCE(?13, job_queued_at), \
         peak_rss_bytes = ?14, cpu_millis = ?15, cleaned = ?16, cleanup_tries = ?17, \
         next_cleanup_at = ?18, runner_uid = ?19, runner_gid = ?20, reason_kind = ?21, \
         reason_detail = ?22, \
         owner_repo = IIF(?30 IS NULL, owner_repo, ?23), \
         owner_workflow = IIF(?30 IS NULL, owner_workflow, ?24), \
         owner_job = IIF(?30 IS NULL, owner_job, ?25), \
         owner_run_id = IIF(?30 IS NULL, owner_run_id, ?26), \
         owner_run_attempt = IIF(?30 IS NULL, owner_run_attempt, ?27), \
         owner_job_id = IIF(?30 IS NULL, owner_job_id, ?28), \
         owner_queued_at = IIF(?30 IS NULL, owner_queued_at, ?29), \
         owner_source = COALESCE(?30, owner_source), mean_rss_bytes = ?31, \
         host_cleaned_at = COALESCE(host_cleaned_at, ?32) WHERE id = ?1",
        params![
            a.id,
            a.state.as_str(),
            a.outcome.map(|o| o.as_str()),
            a.reason.as_ref().map(ToString::to_string),
            a.updated_at,
            a.ended_at,
            a.pid,
            a.pid_start.map(sql_u64),
            a.exit_code,
            a.runner_id,
            a.job_name,
            a.job_id,
            a.job_queued_at,
            a.peak_rss_bytes.map(sql_u64),
            a.cpu_millis.map(sql_u64),
            a.cleaned,
            a.cleanup_tries,
            a.next_cleanup_at,
            a.runner_uid,
            a.runner_gid,
            a.reason.as_ref().map(|r| r.kind().as_str()),
            a.reason.as_ref().and_then(|r| r.detail()),
            a.owner.as_ref().map(|o| &o.repo),
            a.owner.as_ref().and_then(|o| o.workflow.as_ref()),
            a.owner.as_ref().map(|o| &o.job_name),
            a.owner.as_ref().map(|o| o.run_id),
            a.owner.as_ref().and_then(|o| o.run_attempt),
            a.owner.as_ref().and_then(|o| o.job_id),
            a.owner.as_ref().and_then(|o| o.queued_at),
            a.owner.as_ref().map(|o| o.source.as_str()),
            a.mean_rss_bytes.map(sql_u64),
            a.host_cleaned_at
        ],
    )?;
    if n == 0 {
        return Err(StoreError::NotFound {
            what: "attempt",
            name: a.id.to_string(),
        });
    }
    let stored: i64 = tx.query_row(
        "SELECT count(*) FROM attempt_events WHERE attempt_id = ?1",
        [a.id],
        |r| r.get(0),
    )?;
    append_events(&tx, a.id, stored as usize, &a.history)?;
    // With its events stored: the roll-up reads when it took its job from them.
    super::usage::roll_up(&tx, a)?;
    let lost = super::reruns::note_loss(&tx, a)?;
    if a.cleaned {
        super::meters::forget(&tx, a.id)?;
    }
    tx.commit()?;
    if lost {
        super::reruns::loss_committed();
    }
    Ok(())
}

fn with_history(c: &Connection, mut a: Attempt) -> Result<Attempt> {
    let mut st = c.prepare_cached(
        "SELECT state, at FROM attempt_events WHERE attempt_id = ?1 ORDER BY seq",
    )?;
    let mut rs = st.query([a.id])?;
    while let Some(r) = rs.next()? {
        let s: String = r.get(0)?;
        a.history.push(StateChange {
            state: AttemptState::parse(&s).ok_or_else(|| rows::bad("attempt event", &s))?,
            at: r.get(1)?,
        });
    }
    Ok(a)
}

fn query(c: &Connection, sql: &str, args: &[&dyn rusqlite::ToSql]) -> Result<Vec<Attempt>> {
    let mut st = c.prepare_cached(sql)?;
    let mut rs = st.query(args)?;
    let mut out = Vec::new();
    while let Some(r) = rs.next()? {
        out.push(rows::attempt(r)?);
    }
    drop(rs);
    out.into_iter().map(|a| with_history(c, a)).collect()
}

pub fn get(c: &Connection, id: i64) -> Result<Attempt> {
    query(
        c,
        &format!("SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE id = ?1"),
        &[&id],
    )?
    .pop()
    .ok_or_else(|| StoreError::NotFound {
        what: "attempt",
        name: id.to_string(),
    })
}

pub fn list(c: &Connection, f: &AttemptFilter) -> Result<Vec<Attempt>> {
    let mut sql = format!("SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE 1");
    let mut args: Vec<&dyn rusqlite::ToSql> = Vec::new();
    if let Some(p) = &f.profile {
        sql.push_str(" AND profile = ?1");
        args.push(p);
    }
    if f.active_only {
        sql.push_str(&format!(" AND cleaned = 0 AND state IN {LIVE_STATES}"));
    }
    sql.push_str(" ORDER BY id DESC");
    if let Some(n) = f.limit {
        sql.push_str(&format!(" LIMIT {n}"));
    }
    query(c, &sql, &args)
}

/// The every-pass reads. `INDEXED BY` pins the partial indexes: without statistics the
/// planner may prefer the full `attempts_by_profile`, which walks the whole history of
/// a profile. `cleaned = 0` is written out because a partial index is used only when
/// the query implies its condition (the tests check the query plans).
pub(super) const OPEN_OF_HOST: &str =
    "INDEXED BY attempts_open_by_host WHERE host_id = ?1 AND cleaned = 0 ORDER BY id";
pub(super) const OPEN_OF_PROFILE: &str =
    "INDEXED BY attempts_open_by_profile WHERE profile = ?1 AND cleaned = 0 ORDER BY id";

pub fn open_of_host(c: &Connection, host_id: &str) -> Result<Vec<Attempt>> {
    query(
        c,
        &format!("SELECT {ATTEMPT_COLUMNS} FROM attempts {OPEN_OF_HOST}"),
        &[&host_id],
    )
}

pub fn open_of_profile(c: &Connection, profile: &str) -> Result<Vec<Attempt>> {
    query(
        c,
        &format!("SELECT {ATTEMPT_COLUMNS} FROM attempts {OPEN_OF_PROFILE}"),
        &[&profile],
    )
}

pub fn live_counts(c: &Connection) -> Result<BTreeMap<String, u32>> {
    let mut st = c.prepare_cached(&format!(
        "SELECT profile, count(*) FROM attempts WHERE cleaned = 0 AND state IN {LIVE_STATES} \
         GROUP BY profile"
    ))?;
    let rows = st.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, u32>(1)?)))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// [`super::SqliteStore::seed_history`]: one recursive insert, ids given explicitly
/// after the last one used so each runner name is the one the store would give.
pub fn seed_history(c: &Connection, seed: &HistorySeed) -> Result<()> {
    assert!(
        !seed.profiles.is_empty(),
        "a seeded history needs a profile"
    );
    let tx = rows::write_tx(c)?;
    let last: i64 = tx.query_row(
        "SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'attempts'), 0)",
        [],
        |r| r.get(0),
    )?;
    // ?1 n, ?2 open, ?3 last id, ?4 target, ?5 host id, ?6 short id, ?7 closed state,
    // ?8 base, then the profiles from ?9.
    let profile = seed
        .profiles
        .iter()
        .enumerate()
        .map(|(k, _)| format!("WHEN {k} THEN ?{}", 9 + k))
        .collect::<Vec<_>>()
        .join(" ");
    let mut values: Vec<rusqlite::types::Value> = vec![
        seed.n.into(),
        seed.open.into(),
        last.into(),
        seed.target.to_string().into(),
        seed.host_id.to_string().into(),
        short_id(seed.host_id).to_string().into(),
        seed.closed.as_str().to_string().into(),
        seed.base.into(),
    ];
    values.extend(seed.profiles.iter().map(|p| p.to_string().into()));
    tx.execute(
        &format!(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)
             INSERT INTO attempts (id, profile, target, host_id, runner_name, state, outcome,
                 created_at, updated_at, ended_at, cleaned)
             SELECT ?3 + i, CASE i % {k} {profile} END, ?4, ?5,
                 'rm-' || ?6 || '-' || (?3 + i),
                 CASE WHEN i > ?1 - ?2 THEN 'busy' ELSE ?7 END,
                 CASE WHEN i > ?1 - ?2 THEN NULL ELSE 'completed_job' END,
                 ?8 + i * 1000, ?8 + i * 1000 + 500, ?8 + i * 1000 + 400,
                 CASE WHEN i > ?1 - ?2 THEN 0 ELSE 1 END
             FROM n",
            k = seed.profiles.len()
        ),
        rusqlite::params_from_iter(values),
    )?;
    tx.execute(
        "INSERT INTO attempt_events (attempt_id, seq, state, at)
             SELECT id, 0, 'pending', created_at FROM attempts WHERE id > ?1",
        [last],
    )?;
    tx.execute(
        "INSERT INTO attempt_events (attempt_id, seq, state, at)
             SELECT id, 1, state, updated_at FROM attempts WHERE id > ?1",
        [last],
    )?;
    tx.commit()?;
    Ok(())
}

pub fn prune(c: &Connection, before: Millis) -> Result<usize> {
    let tx = rows::write_tx(c)?;
    // Events go with their attempt through ON DELETE CASCADE (foreign_keys is on).
    let n = tx.execute(
        "DELETE FROM attempts WHERE cleaned = 1 AND updated_at < ?1",
        [before],
    )?;
    tx.commit()?;
    Ok(n)
}
