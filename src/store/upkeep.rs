//! Keeping the store's file from growing: space freed by pruned rows goes back to the
//! filesystem (incremental `auto_vacuum`, a few pages at a time so a pass never waits
//! long), and the attempt ids the log sweep checks its files against.

use super::error::Result;
use super::{DB_FILE, SqliteStore};
use std::path::Path;

/// `PRAGMA auto_vacuum` value for incremental vacuum.
const INCREMENTAL: i64 = 2;

/// At most this many free pages go back per call (4 MiB of 4 KiB pages), so a call
/// holds the write lock for milliseconds.
const RECLAIM_PAGES: i64 = 1024;

impl SqliteStore {
    /// Every attempt id the store holds.
    pub fn attempt_ids(&self) -> Result<Vec<i64>> {
        let mut st = self
            .connection()
            .prepare_cached("SELECT id FROM attempts")?;
        let ids = st.query_map([], |r| r.get(0))?;
        Ok(ids.collect::<rusqlite::Result<_>>()?)
    }

    /// Whether freed pages go back to the filesystem (stores made since version 9;
    /// older ones after [`SqliteStore::make_reclaimable`]).
    pub fn reclaimable(&self) -> Result<bool> {
        let mode: i64 = self
            .connection()
            .query_row("PRAGMA auto_vacuum", [], |r| r.get(0))?;
        Ok(mode == INCREMENTAL)
    }

    /// Turns incremental vacuum on for a store made before it was (one whole VACUUM,
    /// which rewrites the file: the daemon does it once, at start). Returns whether it
    /// had to.
    pub fn make_reclaimable(&self) -> Result<bool> {
        if self.reclaimable()? {
            return Ok(false);
        }
        self.connection()
            .execute_batch("PRAGMA auto_vacuum = INCREMENTAL; VACUUM;")?;
        Ok(true)
    }

    /// Gives up to [`RECLAIM_PAGES`] free pages back to the filesystem; returns how
    /// many were free before.
    pub fn reclaim(&self) -> Result<i64> {
        let free: i64 = self
            .connection()
            .query_row("PRAGMA freelist_count", [], |r| r.get(0))?;
        if free > 0 && self.reclaimable()? {
            self.connection()
                .execute_batch(&format!("PRAGMA incremental_vacuum({RECLAIM_PAGES})"))?;
        }
        Ok(free)
    }
}

/// The store's bytes on disk in `state_dir`: the database file and its write-ahead
/// log (what `status` and `doctor` show; read without opening the store).
pub fn disk_bytes(state_dir: &Path) -> u64 {
    let size = |name: &str| std::fs::metadata(state_dir.join(name)).map_or(0, |m| m.len());
    size(DB_FILE) + size(&format!("{DB_FILE}-wal"))
}

#[cfg(test)]
mod tests {
    use super::disk_bytes;
    use crate::store::tests::TempDir;
    use crate::store::{NewAttempt, SqliteStore, Store};

    #[test]
    fn a_new_store_gives_pruned_pages_back_and_an_old_one_is_converted_once() {
        let d = TempDir::new("upkeep");
        let s = SqliteStore::open(&d.0).unwrap();
        assert!(s.reclaimable().unwrap(), "new stores vacuum incrementally");
        assert!(!s.make_reclaimable().unwrap());
        // Fill, prune, reclaim: the file shrinks back.
        let big = "x".repeat(4000);
        for i in 0..300 {
            let mut a = s
                .create_attempt(
                    &NewAttempt {
                        profile: "p".into(),
                        target: "t".into(),
                        host_id: "h".into(),
                        job_name: Some(format!("{i}{big}")),
                        ..NewAttempt::default()
                    },
                    1,
                )
                .unwrap();
            a.cleaned = true;
            s.save_attempt(&a).unwrap();
        }
        assert_eq!(s.attempt_ids().unwrap().len(), 300);
        s.connection()
            .execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
            .unwrap();
        let full = disk_bytes(&d.0);
        assert!(s.prune_attempts(i64::MAX).unwrap() > 0);
        assert!(s.reclaim().unwrap() > 0, "pruned rows left free pages");
        s.connection()
            .execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
            .unwrap();
        let after = disk_bytes(&d.0);
        assert!(after < full, "{after} < {full}");
        assert!(s.attempt_ids().unwrap().is_empty());

        // A store from before: converted by one VACUUM, then reclaimable.
        s.connection()
            .execute_batch("PRAGMA auto_vacuum = NONE; VACUUM;")
            .unwrap();
        assert!(!s.reclaimable().unwrap());
        assert!(s.make_reclaimable().unwrap());
        assert!(s.reclaimable().unwrap());
    }
}
