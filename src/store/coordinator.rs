//! The coordinator's books, in its own state directory: the hosts allowed to connect
//! (only a SHA-256 hash of each token is kept) with what they last reported, and the
//! jobs it placed with their current lease. The server rewrites the live part as one
//! transaction; the CLI reads it.

use super::SqliteStore;
use super::error::{Result, StoreError};
use super::rows::{sql_u64, to_json, write_tx};
use crate::domain::Reported;
use crate::domain::job_phase::Phase;
use crate::meter::ProfileMeters;
use crate::timefmt::Millis;
use rusqlite::{OptionalExtension, Row, params};
use std::collections::BTreeMap;

/// One host of the pool. The live fields are `None`/zero until it first said hello.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CoordHostRow {
    pub name: String,
    pub created_at: Millis,
    pub connected: bool,
    pub version: Option<u32>,
    pub host_id: Option<String>,
    pub os: Option<String>,
    pub arch: Option<String>,
    pub capacity: Option<u32>,
    pub free: Option<u32>,
    pub draining: bool,
    pub unfit: Vec<String>,
    /// Its target names the coordinator covers.
    pub covered: Vec<String>,
    /// Its pool profiles' names.
    pub profiles: Vec<String>,
    pub open_leases: u32,
    pub started: u64,
    pub finished: u64,
    pub refusals: u64,
    pub last_seen_at: Option<Millis>,
    /// Each profile's live runners added up, from its last status report.
    pub meters: BTreeMap<String, ProfileMeters>,
    /// Its last refusal's reason word (`host_capacity`, `draining`, `expired` for an
    /// offer let run out, ...) and when the coordinator heard it.
    pub last_refusal: Option<String>,
    pub last_refusal_at: Option<Millis>,
    /// The binary version its last `hello` said (`None` from a host before the field).
    pub binary_version: Option<String>,
}

/// One queued job the coordinator tracks and its lease, if any.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CoordJobRow {
    pub job_key: String,
    /// The coordinator's target name.
    pub target: String,
    pub repo: String,
    pub name: String,
    pub labels: Vec<String>,
    pub queued_at: Millis,
    /// Written as its word; a word this build does not know is kept as written.
    pub phase: Reported<Phase>,
    pub lease_id: Option<String>,
    pub host: Option<String>,
    pub profile: Option<String>,
    pub runner_name: Option<String>,
    pub expires_at: Option<Millis>,
    pub placements: u32,
    pub updated_at: Millis,
}

fn list(r: &Row<'_>, i: usize) -> rusqlite::Result<Vec<String>> {
    json_column(r, i)
}

fn json_column<T: serde::de::DeserializeOwned>(r: &Row<'_>, i: usize) -> rusqlite::Result<T> {
    let s: String = r.get(i)?;
    serde_json::from_str(&s).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, Box::new(e))
    })
}

fn host_row(r: &Row<'_>) -> rusqlite::Result<CoordHostRow> {
    Ok(CoordHostRow {
        name: r.get(0)?,
        created_at: r.get(1)?,
        connected: r.get(2)?,
        version: r.get(3)?,
        host_id: r.get(4)?,
        os: r.get(5)?,
        arch: r.get(6)?,
        capacity: r.get(7)?,
        free: r.get(8)?,
        draining: r.get(9)?,
        unfit: list(r, 10)?,
        covered: list(r, 11)?,
        profiles: list(r, 12)?,
        open_leases: r.get(13)?,
        started: r.get::<_, i64>(14)?.max(0) as u64,
        finished: r.get::<_, i64>(15)?.max(0) as u64,
        refusals: r.get::<_, i64>(16)?.max(0) as u64,
        last_seen_at: r.get(17)?,
        meters: json_column(r, 18)?,
        last_refusal: r.get(19)?,
        last_refusal_at: r.get(20)?,
        binary_version: r.get(21)?,
    })
}

fn job_row(r: &Row<'_>) -> rusqlite::Result<CoordJobRow> {
    Ok(CoordJobRow {
        job_key: r.get(0)?,
        target: r.get(1)?,
        repo: r.get(2)?,
        name: r.get(3)?,
        labels: list(r, 4)?,
        queued_at: r.get(5)?,
        phase: Reported::read(r.get(6)?, |w| w.parse().ok()),
        lease_id: r.get(7)?,
        host: r.get(8)?,
        profile: r.get(9)?,
        runner_name: r.get(10)?,
        expires_at: r.get(11)?,
        placements: r.get(12)?,
        updated_at: r.get(13)?,
    })
}

const HOST_COLUMNS: &str = "name, created_at, connected, version, host_id, os, arch, capacity, \
     free, draining, unfit, covered, profiles, open_leases, started, finished, refusals, \
     last_seen_at, meters, last_refusal, last_refusal_at, binary_version";
const JOB_COLUMNS: &str = "job_key, target, repo, name, labels, queued_at, phase, lease_id, \
     host, profile, runner_name, expires_at, placements, updated_at";

/// The kv key under which a serving coordinator says where it listens.
const KV_SERVE: &str = "coordinator.serve";

impl SqliteStore {
    /// What a serving coordinator wrote of itself (`listen`, `pid`, `started_at`, as
    /// JSON), for `coordinator status`; `None` when none serves (or the row is not
    /// JSON).
    pub fn coord_serving(&self) -> Result<Option<serde_json::Value>> {
        Ok(super::Store::kv_get(self, KV_SERVE)?.and_then(|s| serde_json::from_str(&s).ok()))
    }

    /// A coordinator starts serving: where it listens, for `coordinator status`.
    pub fn put_coord_serving(&self, serving: &serde_json::Value) -> Result<()> {
        super::Store::kv_put(self, KV_SERVE, &serving.to_string())
    }

    /// The coordinator stopped serving.
    pub fn clear_coord_serving(&self) -> Result<()> {
        super::Store::kv_delete(self, KV_SERVE)
    }

    /// Allows a host to connect with the token whose SHA-256 is `token_hash`.
    /// Refused with `Exists` when the name is taken.
    pub fn coord_add_host(&self, name: &str, token_hash: &[u8], now: Millis) -> Result<()> {
        let n = self.connection().execute(
            "INSERT OR IGNORE INTO coord_hosts (name, token_hash, created_at) VALUES (?1, ?2, ?3)",
            params![name, token_hash, now],
        )?;
        if n == 0 {
            return Err(StoreError::Exists {
                what: "coordinator host",
                name: name.to_string(),
            });
        }
        Ok(())
    }

    /// Removes a host: its token stops working, and a serving coordinator closes its
    /// connection at its next tick.
    pub fn coord_remove_host(&self, name: &str) -> Result<()> {
        let n = self
            .connection()
            .execute("DELETE FROM coord_hosts WHERE name = ?1", params![name])?;
        if n == 0 {
            return Err(StoreError::NotFound {
                what: "coordinator host",
                name: name.to_string(),
            });
        }
        Ok(())
    }

    /// Every host's name and token hash, for the handshake.
    pub fn coord_token_hashes(&self) -> Result<Vec<(String, Vec<u8>)>> {
        let mut st = self
            .connection()
            .prepare_cached("SELECT name, token_hash FROM coord_hosts ORDER BY name")?;
        let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    pub fn coord_hosts(&self) -> Result<Vec<CoordHostRow>> {
        let mut st = self.connection().prepare_cached(&format!(
            "SELECT {HOST_COLUMNS} FROM coord_hosts ORDER BY name"
        ))?;
        let rows = st.query_map([], host_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    pub fn coord_host(&self, name: &str) -> Result<Option<CoordHostRow>> {
        Ok(self
            .connection()
            .query_row(
                &format!("SELECT {HOST_COLUMNS} FROM coord_hosts WHERE name = ?1"),
                params![name],
                host_row,
            )
            .optional()?)
    }

    /// The tracked jobs, oldest queued first.
    pub fn coord_jobs(&self) -> Result<Vec<CoordJobRow>> {
        let mut st = self.connection().prepare_cached(&format!(
            "SELECT {JOB_COLUMNS} FROM coord_jobs ORDER BY queued_at, job_key"
        ))?;
        let rows = st.query_map([], job_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Rewrites the live view in one transaction: `connected` hosts' reported state
    /// (hosts not listed are marked disconnected, their last report kept) and the
    /// whole job table.
    pub fn coord_put_view(&self, connected: &[CoordHostRow], jobs: &[CoordJobRow]) -> Result<()> {
        let tx = write_tx(self.connection())?;
        tx.execute("UPDATE coord_hosts SET connected = 0, open_leases = 0", [])?;
        {
            let mut up = tx.prepare_cached(
                "UPDATE coord_hosts SET connected = 1, version = ?2, host_id = ?3, os = ?4, \
                 arch = ?5, capacity = ?6, free = ?7, draining = ?8, unfit = ?9, covered = ?10, \
                 profiles = ?11, open_leases = ?12, started = ?13, finished = ?14, \
                 refusals = ?15, last_seen_at = ?16, meters = ?17, last_refusal = ?18, \
                 last_refusal_at = ?19, binary_version = ?20 WHERE name = ?1",
            )?;
            for h in connected {
                up.execute(params![
                    h.name,
                    h.version,
                    h.host_id,
                    h.os,
                    h.arch,
                    h.capacity,
                    h.free,
                    h.draining,
                    to_json(&h.unfit),
                    to_json(&h.covered),
                    to_json(&h.profiles),
                    h.open_leases,
                    sql_u64(h.started),
                    sql_u64(h.finished),
                    sql_u64(h.refusals),
                    h.last_seen_at,
                    to_json(&h.meters),
                    h.last_refusal,
                    h.last_refusal_at,
                    h.binary_version
                ])?;
            }
            tx.execute("DELETE FROM coord_jobs", [])?;
            let mut ins = tx.prepare_cached(&format!(
                "INSERT INTO coord_jobs ({JOB_COLUMNS}) VALUES \
                 (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"
            ))?;
            for j in jobs {
                ins.execute(params![
                    j.job_key,
                    j.target,
                    j.repo,
                    j.name,
                    to_json(&j.labels),
                    j.queued_at,
                    j.phase.to_string(),
                    j.lease_id,
                    j.host,
                    j.profile,
                    j.runner_name,
                    j.expires_at,
                    j.placements,
                    j.updated_at
                ])?;
            }
        }
        tx.commit()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_tokens_and_the_live_view() {
        let s = SqliteStore::open_in_memory().unwrap();
        s.coord_add_host("h1", &[7u8; 32], 5).unwrap();
        assert!(matches!(
            s.coord_add_host("h1", &[8u8; 32], 6),
            Err(StoreError::Exists { .. })
        ));
        s.coord_add_host("h2", &[9u8; 32], 6).unwrap();
        assert_eq!(
            s.coord_token_hashes().unwrap()[0],
            ("h1".into(), vec![7u8; 32])
        );
        let live = CoordHostRow {
            name: "h1".into(),
            connected: true,
            version: Some(3),
            free: Some(2),
            covered: vec!["t".into()],
            open_leases: 1,
            started: 4,
            last_seen_at: Some(10),
            refusals: 1,
            last_refusal: Some("host_capacity".into()),
            last_refusal_at: Some(9),
            ..Default::default()
        };
        let job = CoordJobRow {
            job_key: "42".into(),
            target: "t".into(),
            repo: "o/r".into(),
            name: "build".into(),
            labels: vec!["linux".into()],
            queued_at: 1,
            phase: Phase::Offered.into(),
            lease_id: Some("c-1".into()),
            host: Some("h1".into()),
            placements: 1,
            updated_at: 10,
            ..Default::default()
        };
        s.coord_put_view(std::slice::from_ref(&live), std::slice::from_ref(&job))
            .unwrap();
        let hosts = s.coord_hosts().unwrap();
        assert_eq!(
            hosts[0],
            CoordHostRow {
                created_at: 5,
                ..live
            }
        );
        assert!(!hosts[1].connected);
        assert_eq!(s.coord_jobs().unwrap(), vec![job]);
        s.coord_put_view(&[], &[]).unwrap();
        let h1 = s.coord_host("h1").unwrap().unwrap();
        assert!(!h1.connected && h1.version == Some(3), "last report kept");
        assert!(s.coord_jobs().unwrap().is_empty());
        s.coord_remove_host("h1").unwrap();
        assert!(matches!(
            s.coord_remove_host("h1"),
            Err(StoreError::NotFound { .. })
        ));
    }

    /// A phase is written as its word and read back as the phase; a word a later build
    /// wrote is kept as written, not read as another phase.
    #[test]
    fn a_jobs_phase_reads_back_and_an_unknown_word_is_kept() {
        let s = SqliteStore::open_in_memory().unwrap();
        let jobs: Vec<CoordJobRow> = crate::domain::job_phase::PHASES
            .into_iter()
            .enumerate()
            .map(|(i, p)| CoordJobRow {
                job_key: i.to_string(),
                phase: p.into(),
                ..Default::default()
            })
            .collect();
        s.coord_put_view(&[], &jobs).unwrap();
        assert_eq!(s.coord_jobs().unwrap(), jobs);
        s.connection()
            .execute(
                "UPDATE coord_jobs SET phase = 'parked' WHERE job_key = '0'",
                [],
            )
            .unwrap();
        let read = s.coord_jobs().unwrap();
        assert_eq!(read[0].phase, Reported::Unrecognized("parked".into()));
        assert_eq!(read[0].phase.to_string(), "parked");
    }
}
