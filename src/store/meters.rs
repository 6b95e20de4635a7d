//! Live meters: one upserted row per attempt not yet cleaned (`attempt_meters`) and a
//! ring of recent points for its sparkline (`attempt_meter_ring`), both removed when
//! the attempt is cleaned.

use super::error::Result;
use super::rows::{self, sql_u64};
use crate::meter::live::{LiveMeter, MeterPoint, RING_SLOTS};
use rusqlite::{Connection, params};
use std::collections::BTreeMap;

/// Writes the rows in one transaction. A row of an attempt that is cleaned (or gone)
/// by now is not written, so a late batch never brings back what cleanup removed.
/// Peaks and CPU time only grow: a daemon restarted mid-life, whose sampler starts
/// from nothing, keeps the larger figures already stored.
pub fn put(c: &Connection, meters: &[LiveMeter]) -> Result<()> {
    if meters.is_empty() {
        return Ok(());
    }
    let tx = rows::write_tx(c)?;
    {
        let mut row = tx.prepare_cached(
            "INSERT INTO attempt_meters \
             (attempt_id, at, rss_bytes, peak_rss_bytes, cpu_millis, cpu_percent, processes) \
             SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7 WHERE EXISTS \
             (SELECT 1 FROM attempts WHERE id = ?1 AND cleaned = 0) \
             ON CONFLICT (attempt_id) DO UPDATE SET at = excluded.at, \
             rss_bytes = excluded.rss_bytes, \
             peak_rss_bytes = max(peak_rss_bytes, excluded.peak_rss_bytes), \
             cpu_millis = max(cpu_millis, excluded.cpu_millis), \
             cpu_percent = excluded.cpu_percent, processes = excluded.processes",
        )?;
        let mut point = tx.prepare_cached(
            "INSERT OR REPLACE INTO attempt_meter_ring \
             (attempt_id, slot, at, rss_bytes, cpu_percent) \
             SELECT ?1, ?2, ?3, ?4, ?5 WHERE EXISTS \
             (SELECT 1 FROM attempts WHERE id = ?1 AND cleaned = 0)",
        )?;
        for m in meters {
            row.execute(params![
                m.attempt,
                m.at,
                sql_u64(m.rss_bytes),
                sql_u64(m.peak_rss_bytes),
                sql_u64(m.cpu_millis),
                m.cpu_percent,
                m.processes
            ])?;
            point.execute(params![
                m.attempt,
                sql_u64(m.seq % RING_SLOTS),
                m.at,
                sql_u64(m.rss_bytes),
                m.cpu_percent
            ])?;
        }
    }
    tx.commit()?;
    Ok(())
}

/// Every meter row, by attempt id (one per attempt not yet cleaned, at most).
pub fn all(c: &Connection) -> Result<BTreeMap<i64, LiveMeter>> {
    let mut st = c.prepare_cached(
        "SELECT attempt_id, at, rss_bytes, peak_rss_bytes, cpu_millis, cpu_percent, processes \
         FROM attempt_meters",
    )?;
    let rows = st.query_map([], |r| {
        Ok(LiveMeter {
            attempt: r.get(0)?,
            at: r.get(1)?,
            rss_bytes: r.get::<_, i64>(2)?.max(0) as u64,
            peak_rss_bytes: r.get::<_, i64>(3)?.max(0) as u64,
            cpu_millis: r.get::<_, i64>(4)?.max(0) as u64,
            cpu_percent: r.get(5)?,
            processes: r.get(6)?,
            seq: 0,
        })
    })?;
    let mut out = BTreeMap::new();
    for m in rows {
        let m = m?;
        out.insert(m.attempt, m);
    }
    Ok(out)
}

/// The attempt's sparkline points, oldest first.
pub fn ring(c: &Connection, attempt: i64) -> Result<Vec<MeterPoint>> {
    let mut st = c.prepare_cached(
        "SELECT at, rss_bytes, cpu_percent FROM attempt_meter_ring WHERE attempt_id = ?1 \
         ORDER BY at",
    )?;
    let rows = st.query_map([attempt], |r| {
        Ok(MeterPoint {
            at: r.get(0)?,
            rss_bytes: r.get::<_, i64>(1)?.max(0) as u64,
            cpu_percent: r.get(2)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Removes an attempt's meter row and ring (inside the caller's transaction).
pub fn forget(c: &Connection, attempt: i64) -> Result<()> {
    c.prepare_cached("DELETE FROM attempt_meters WHERE attempt_id = ?1")?
        .execute([attempt])?;
    c.prepare_cached("DELETE FROM attempt_meter_ring WHERE attempt_id = ?1")?
        .execute([attempt])?;
    Ok(())
}
