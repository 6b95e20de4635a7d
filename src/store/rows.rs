//! Conversions between SQL rows and domain types: enums as their snake_case names,
//! an attempt's reason as the text people read (`Reason`'s `Display`, parsed back),
//! nested values (scope, credential, labels) as JSON text.

use super::error::{Result, StoreError};
use crate::domain::job_owner::{JobOwner, OwnerSource};
use crate::domain::profile::{DemandSource, Mode};
use crate::domain::{Attempt, AttemptState, Outcome, Reason, ScalePolicy, Target};
use rusqlite::Row;

pub fn bad(what: &'static str, detail: impl std::fmt::Display) -> StoreError {
    StoreError::BadRow {
        what,
        detail: detail.to_string(),
    }
}

pub fn to_json<T: serde::Serialize>(v: &T) -> String {
    // Serializing our own plain data types cannot fail.
    serde_json::to_string(v).expect("domain types serialize")
}

fn from_json<T: serde::de::DeserializeOwned>(what: &'static str, s: &str) -> Result<T> {
    serde_json::from_str(s).map_err(|e| bad(what, e))
}

/// SQLite integers are i64; our counters are u64 (never negative, validated small).
fn get_u64(r: &Row<'_>, i: usize) -> Result<u64> {
    let v: i64 = r.get(i)?;
    u64::try_from(v).map_err(|_| bad("row", format!("negative value {v} in column {i}")))
}

fn get_opt_u64(r: &Row<'_>, i: usize) -> Result<Option<u64>> {
    match r.get::<_, Option<i64>>(i)? {
        None => Ok(None),
        Some(v) => Ok(Some(u64::try_from(v).map_err(|_| {
            bad("row", format!("negative value {v} in column {i}"))
        })?)),
    }
}

/// The i64 SQLite stores for one of our u64 values (all far below i64::MAX).
pub fn sql_u64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

pub const TARGET_COLUMNS: &str =
    "name, scope, api_url, credential, poll_interval_secs, repos, max_in_flight, secondary_limit";

pub fn target(r: &Row<'_>) -> Result<Target> {
    Ok(Target {
        name: r.get(0)?,
        scope: from_json("target", &r.get::<_, String>(1)?)?,
        api_url: r.get(2)?,
        credential: from_json("target", &r.get::<_, String>(3)?)?,
        poll_interval_secs: get_u64(r, 4)?,
        repos: from_json("target", &r.get::<_, String>(5)?)?,
        max_in_flight: u32::try_from(get_u64(r, 6)?)
            .map_err(|_| bad("target", "max_in_flight out of range"))?,
        secondary_limit: match get_u64(r, 7)? {
            0 => None,
            n => Some(u32::try_from(n).map_err(|_| bad("target", "secondary_limit out of range"))?),
        },
    })
}

pub const PROFILE_COLUMNS: &str = "name, target, host_id, labels, default_labels, min_capacity, \
     max_capacity, runner_dir, runner_group, idle_timeout_secs, bootstrap_timeout_secs, \
     job_timeout_secs, mode, active, allow_public, run_as, demand, memory_max, cpu_max, pids_max, \
     env, tools, execution, image, disk_max, caches, workspace, limits, rerun_lost, revision";

pub fn profile(r: &Row<'_>) -> Result<ScalePolicy> {
    let mode: String = r.get(12)?;
    let demand: String = r.get(16)?;
    Ok(ScalePolicy {
        name: r.get(0)?,
        target: r.get(1)?,
        host_id: r.get(2)?,
        labels: from_json("profile", &r.get::<_, String>(3)?)?,
        default_labels: r.get(4)?,
        min_capacity: r.get(5)?,
        max_capacity: r.get(6)?,
        runner_dir: r.get::<_, Option<String>>(7)?.map(Into::into),
        runner_group: r.get(8)?,
        idle_timeout_secs: get_u64(r, 9)?,
        bootstrap_timeout_secs: get_u64(r, 10)?,
        job_timeout_secs: get_opt_u64(r, 11)?,
        mode: match mode.as_str() {
            "autoscale" => Mode::Autoscale,
            "monitor" => Mode::Monitor,
            m => return Err(bad("profile", format!("mode {m:?}"))),
        },
        active: r.get(13)?,
        allow_public: r.get(14)?,
        run_as: r.get(15)?,
        demand: match demand.as_str() {
            "poll" => DemandSource::Poll,
            "scaleset" => DemandSource::Scaleset,
            d => return Err(bad("profile", format!("demand {d:?}"))),
        },
        memory_max: get_opt_u64(r, 17)?,
        cpu_max: r.get(18)?,
        pids_max: r.get(19)?,
        env: from_json("profile", &r.get::<_, String>(20)?)?,
        tools: tools(&r.get::<_, String>(21)?),
        execution: crate::domain::Execution::from_stored(&r.get::<_, String>(22)?),
        image: r.get(23)?,
        disk_max: get_opt_u64(r, 24)?,
        caches: r.get(25)?,
        // Lenient: an unknown word (a newer build's) keeps nothing.
        workspace: crate::domain::workspace::Workspace::parse(
            "workspace",
            &r.get::<_, String>(26)?,
        )
        .unwrap_or_default(),
        limits: crate::domain::isolation::LimitsMode::from_stored(&r.get::<_, String>(27)?),
        rerun_lost: match r.get::<_, u32>(28)? {
            0 => None,
            n => Some(n),
        },
        revision: get_u64(r, 29)?,
    })
}

/// A profile's required tools as stored: comma-joined program names.
pub fn tools(s: &str) -> Vec<String> {
    s.split(',')
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect()
}

/// The host's `isolation`, read leniently: an unknown word (a newer build's) is `auto`.
pub fn isolation(s: &str) -> crate::domain::Isolation {
    crate::domain::Isolation::parse("isolation", s).unwrap_or_default()
}

pub const ATTEMPT_COLUMNS: &str = "id, profile, target, host_id, runner_name, state, outcome, \
     reason, created_at, updated_at, ended_at, pid, pid_start, exit_code, runner_id, job_name, \
     job_id, job_queued_at, lease_id, peak_rss_bytes, cpu_millis, cleaned, cleanup_tries, \
     next_cleanup_at, runner_uid, runner_gid, slot, keeps_work, reason_kind, reason_detail, \
     owner_repo, owner_workflow, owner_job, owner_run_id, owner_run_attempt, owner_job_id, \
     owner_queued_at, owner_source, mean_rss_bytes, rolled_up, host_cleaned_at";

/// An attempt's job owner from its columns (30 to 37): `None` without a repository.
fn owner(r: &Row<'_>) -> Result<Option<JobOwner>> {
    let Some(repo) = r.get::<_, Option<String>>(30)? else {
        return Ok(None);
    };
    let source: Option<String> = r.get(37)?;
    Ok(Some(JobOwner {
        repo,
        workflow: r.get(31)?,
        job_name: r.get::<_, Option<String>>(32)?.unwrap_or_default(),
        run_id: r.get::<_, Option<i64>>(33)?.unwrap_or_default(),
        run_attempt: r.get(34)?,
        job_id: r.get(35)?,
        queued_at: r.get(36)?,
        // Lenient: a source another build wrote reads as REST's.
        source: source
            .as_deref()
            .and_then(OwnerSource::parse)
            .unwrap_or(OwnerSource::Rest),
    }))
}

/// An attempt's reason: from its kind and detail where this build wrote them, else
/// (a row an older build wrote) from its text. Lenient: a reason another build wrote
/// is kept as `Other`, never a bad row.
fn reason(text: Option<String>, kind: Option<String>, detail: Option<String>) -> Option<Reason> {
    match kind {
        Some(kind) => Some(
            Reason::from_parts(&kind, detail)
                .unwrap_or_else(|| Reason::parse(text.as_deref().unwrap_or_default())),
        ),
        None => text.map(|t| Reason::parse(&t)),
    }
}

/// An attempt without its history (the caller loads the events).
pub fn attempt(r: &Row<'_>) -> Result<Attempt> {
    let state: String = r.get(5)?;
    let outcome: Option<String> = r.get(6)?;
    Ok(Attempt {
        id: r.get(0)?,
        profile: r.get(1)?,
        target: r.get(2)?,
        host_id: r.get(3)?,
        runner_name: r.get(4)?,
        state: AttemptState::parse(&state).ok_or_else(|| bad("attempt", &state))?,
        outcome: match outcome {
            None => None,
            Some(o) => Some(Outcome::parse(&o).ok_or_else(|| bad("attempt", &o))?),
        },
        reason: reason(r.get(7)?, r.get(28)?, r.get(29)?),
        created_at: r.get(8)?,
        updated_at: r.get(9)?,
        ended_at: r.get(10)?,
        pid: r.get(11)?,
        pid_start: get_opt_u64(r, 12)?,
        exit_code: r.get(13)?,
        runner_id: r.get(14)?,
        job_name: r.get(15)?,
        job_id: r.get(16)?,
        job_queued_at: r.get(17)?,
        lease_id: r.get(18)?,
        peak_rss_bytes: get_opt_u64(r, 19)?,
        cpu_millis: get_opt_u64(r, 20)?,
        cleaned: r.get(21)?,
        cleanup_tries: r.get(22)?,
        next_cleanup_at: r.get(23)?,
        runner_uid: r.get(24)?,
        runner_gid: r.get(25)?,
        slot: r.get(26)?,
        keeps_work: r.get(27)?,
        owner: owner(r)?,
        mean_rss_bytes: get_opt_u64(r, 38)?,
        rolled_up: r.get(39)?,
        host_cleaned_at: r.get(40)?,
        history: Vec::new(),
    })
}

/// Begins a write transaction. IMMEDIATE takes the write lock up front (waiting up to
/// the busy timeout): a deferred transaction that reads and then writes would fail at
/// once with SQLITE_BUSY when another process committed in between, in WAL mode.
/// Inside a transaction already open on `c` (`SqliteStore::atomically`, which makes
/// several edits one), it is a savepoint instead: committed with the outer
/// transaction, and rolled back alone when dropped uncommitted.
pub fn write_tx(c: &rusqlite::Connection) -> rusqlite::Result<WriteTx<'_>> {
    let nested = !c.is_autocommit();
    c.execute_batch(if nested {
        "SAVEPOINT rm_edit"
    } else {
        "BEGIN IMMEDIATE"
    })?;
    Ok(WriteTx {
        conn: c,
        nested,
        done: false,
    })
}

/// A write transaction or savepoint (`write_tx`): rolled back when dropped without
/// `commit`. Derefs to its connection.
pub struct WriteTx<'c> {
    conn: &'c rusqlite::Connection,
    nested: bool,
    done: bool,
}

impl WriteTx<'_> {
    pub fn commit(mut self) -> rusqlite::Result<()> {
        self.conn.execute_batch(if self.nested {
            "RELEASE rm_edit"
        } else {
            "COMMIT"
        })?;
        self.done = true;
        Ok(())
    }
}

impl std::ops::Deref for WriteTx<'_> {
    type Target = rusqlite::Connection;
    fn deref(&self) -> &rusqlite::Connection {
        self.conn
    }
}

impl Drop for WriteTx<'_> {
    fn drop(&mut self) {
        if self.done || self.conn.is_autocommit() {
            return;
        }
        let _ = self.conn.execute_batch(if self.nested {
            "ROLLBACK TO rm_edit; RELEASE rm_edit"
        } else {
            "ROLLBACK"
        });
    }
}
