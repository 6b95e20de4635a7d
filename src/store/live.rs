//! What a running daemon reports: status rows per profile and target, scale set
//! session rows, its heartbeat,
//! time series for the TUI, and a small key/value table for modules' own state. The
//! status rows' limiting factor and mode are text here and typed everywhere else.

use super::error::Result;
use super::rows;
use super::{Heartbeat, LatencySample, ProfileStatus, QueueSample, SessionStatus, TargetStatus};
use crate::domain::{Limit, Reported, SessionPhase, SessionState, TargetMode};
use crate::timefmt::Millis;
use rusqlite::{Connection, OptionalExtension, params};

pub fn put_profile_status(c: &Connection, s: &ProfileStatus) -> Result<()> {
    c.prepare_cached(
        "INSERT OR REPLACE INTO profile_status (profile, demand, limiting, last_error, updated_at) \
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![
        s.profile,
        s.demand,
        s.limiting.to_string(),
        s.last_error,
        s.updated_at
    ])?;
    Ok(())
}

pub fn profile_statuses(c: &Connection) -> Result<Vec<ProfileStatus>> {
    let mut st = c.prepare_cached(
        "SELECT profile, demand, limiting, last_error, updated_at FROM profile_status \
         ORDER BY profile",
    )?;
    let rows = st.query_map([], |r| {
        Ok(ProfileStatus {
            profile: r.get(0)?,
            demand: r.get(1)?,
            limiting: Reported::read(r.get(2)?, Limit::parse),
            last_error: r.get(3)?,
            updated_at: r.get(4)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

pub fn put_target_status(c: &Connection, s: &TargetStatus) -> Result<()> {
    c.prepare_cached(
        "INSERT OR REPLACE INTO target_status (target, mode, last_error, \
         rate_limit_remaining, rate_limit_limit, rate_limit_reset, poll_every_ms, updated_at, \
         error_kind) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?
    .execute(params![
        s.target,
        s.mode.to_string(),
        s.last_error,
        s.rate_limit_remaining,
        s.rate_limit_limit,
        s.rate_limit_reset,
        s.poll_every_ms,
        s.updated_at,
        s.error_kind.map(|k| k.as_str())
    ])?;
    Ok(())
}

pub fn target_statuses(c: &Connection) -> Result<Vec<TargetStatus>> {
    let mut st = c.prepare_cached(
        "SELECT target, mode, last_error, rate_limit_remaining, rate_limit_limit, \
         rate_limit_reset, poll_every_ms, updated_at, error_kind FROM target_status \
         ORDER BY target",
    )?;
    let rows = st.query_map([], |r| {
        Ok(TargetStatus {
            target: r.get(0)?,
            mode: Reported::read(r.get(1)?, TargetMode::parse),
            last_error: r.get(2)?,
            rate_limit_remaining: r.get(3)?,
            rate_limit_limit: r.get(4)?,
            rate_limit_reset: r.get(5)?,
            poll_every_ms: r.get(6)?,
            updated_at: r.get(7)?,
            error_kind: r
                .get::<_, Option<String>>(8)?
                .map(|w| crate::domain::status::ErrorKind::parse(&w)),
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

pub fn put_session_status(c: &Connection, s: &SessionStatus) -> Result<()> {
    let st = &s.session;
    c.prepare_cached(
        "INSERT OR REPLACE INTO scaleset_sessions (profile, target, phase, scale_set_id, \
         session_id, held_since, last_message_id, last_message_at, last_poll_at, reason, \
         retry_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    )?
    .execute(params![
        s.profile,
        s.target,
        st.phase.to_string(),
        st.scale_set_id,
        st.session_id,
        st.held_since,
        st.last_message_id,
        st.last_message_at,
        st.last_poll_at,
        st.reason,
        st.retry_at,
        s.updated_at
    ])?;
    Ok(())
}

pub fn session_statuses(c: &Connection) -> Result<Vec<SessionStatus>> {
    let mut st = c.prepare_cached(
        "SELECT profile, target, phase, scale_set_id, session_id, held_since, \
         last_message_id, last_message_at, last_poll_at, reason, retry_at, updated_at \
         FROM scaleset_sessions ORDER BY profile",
    )?;
    let rows = st.query_map([], |r| {
        Ok(SessionStatus {
            profile: r.get(0)?,
            target: r.get(1)?,
            session: SessionState {
                phase: Reported::read(r.get(2)?, SessionPhase::parse),
                scale_set_id: r.get(3)?,
                session_id: r.get(4)?,
                held_since: r.get(5)?,
                last_message_id: r.get(6)?,
                last_message_at: r.get(7)?,
                last_poll_at: r.get(8)?,
                reason: r.get(9)?,
                retry_at: r.get(10)?,
            },
            updated_at: r.get(11)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

pub fn delete_session_status(c: &Connection, profile: &str) -> Result<()> {
    c.prepare_cached("DELETE FROM scaleset_sessions WHERE profile = ?1")?
        .execute([profile])?;
    Ok(())
}

pub fn put_heartbeat(c: &Connection, h: &Heartbeat) -> Result<()> {
    c.execute(
        "INSERT OR REPLACE INTO daemon (one, pid, started_at, heartbeat_at, version) \
         VALUES (1, ?1, ?2, ?3, ?4)",
        params![h.pid, h.started_at, h.heartbeat_at, h.version],
    )?;
    Ok(())
}

pub fn heartbeat(c: &Connection) -> Result<Option<Heartbeat>> {
    Ok(c.query_row(
        "SELECT pid, started_at, heartbeat_at, version FROM daemon WHERE one = 1",
        [],
        |r| {
            Ok(Heartbeat {
                pid: r.get(0)?,
                started_at: r.get(1)?,
                heartbeat_at: r.get(2)?,
                version: r.get(3)?,
            })
        },
    )
    .optional()?)
}

pub fn clear_heartbeat(c: &Connection) -> Result<()> {
    c.execute("DELETE FROM daemon", [])?;
    Ok(())
}

pub fn add_queue_samples(c: &Connection, samples: &[QueueSample]) -> Result<()> {
    let tx = rows::write_tx(c)?;
    {
        let mut st = tx.prepare_cached(
            "INSERT INTO queue_samples (profile, at, queued, live) VALUES (?1, ?2, ?3, ?4)",
        )?;
        for s in samples {
            st.execute(params![s.profile, s.at, s.queued, s.live])?;
        }
    }
    tx.commit()?;
    Ok(())
}

pub fn queue_samples(
    c: &Connection,
    profile: Option<&str>,
    since: Millis,
) -> Result<Vec<QueueSample>> {
    let mut st = c.prepare_cached(
        "SELECT profile, at, queued, live FROM queue_samples \
         WHERE at >= ?1 AND (?2 IS NULL OR profile = ?2) ORDER BY at, profile",
    )?;
    let rows = st.query_map(params![since, profile], |r| {
        Ok(QueueSample {
            profile: r.get(0)?,
            at: r.get(1)?,
            queued: r.get(2)?,
            live: r.get(3)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

pub fn add_latency_sample(c: &Connection, s: &LatencySample) -> Result<()> {
    c.prepare_cached("INSERT INTO latency_samples (profile, at, latency_ms) VALUES (?1, ?2, ?3)")?
        .execute(params![s.profile, s.at, s.latency_ms])?;
    Ok(())
}

pub fn latency_samples(
    c: &Connection,
    profile: Option<&str>,
    since: Millis,
) -> Result<Vec<LatencySample>> {
    let mut st = c.prepare_cached(
        "SELECT profile, at, latency_ms FROM latency_samples \
         WHERE at >= ?1 AND (?2 IS NULL OR profile = ?2) ORDER BY at, profile",
    )?;
    let rows = st.query_map(params![since, profile], |r| {
        Ok(LatencySample {
            profile: r.get(0)?,
            at: r.get(1)?,
            latency_ms: r.get(2)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

pub fn prune_samples(c: &Connection, before: Millis) -> Result<usize> {
    let tx = rows::write_tx(c)?;
    let n = tx.execute("DELETE FROM queue_samples WHERE at < ?1", [before])?
        + tx.execute("DELETE FROM latency_samples WHERE at < ?1", [before])?;
    tx.commit()?;
    Ok(n)
}

pub fn kv_get(c: &Connection, key: &str) -> Result<Option<String>> {
    Ok(
        c.query_row("SELECT value FROM kv WHERE key = ?1", [key], |r| r.get(0))
            .optional()?,
    )
}

pub fn kv_put(c: &Connection, key: &str, value: &str) -> Result<()> {
    c.execute(
        "INSERT OR REPLACE INTO kv (key, value) VALUES (?1, ?2)",
        [key, value],
    )?;
    Ok(())
}

pub fn kv_delete(c: &Connection, key: &str) -> Result<()> {
    c.execute("DELETE FROM kv WHERE key = ?1", [key])?;
    Ok(())
}
