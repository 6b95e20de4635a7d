//! A whole, consistent copy of a live store, taken through SQLite (`VACUUM INTO`)
//! while the daemon keeps writing: the one safe way to back the store up without
//! stopping it. Copying `state.db` with `cp` misses what the WAL holds, and a copy
//! taken mid-checkpoint can be torn.

use super::error::{Result, StoreError};
use super::sqlite::{SqliteStore, quick_check};
use rusqlite::{Connection, OpenFlags};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// What a backup wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackedUp {
    /// Its size on disk.
    pub bytes: u64,
    /// The attempts it holds (the ledger's rows), to compare with the live store.
    pub attempts: u64,
}

impl SqliteStore {
    /// Writes a consistent snapshot of this store to `dest`, which must not exist: first
    /// to a temporary file beside it (mode 0600 from the first byte), checked with
    /// `quick_check`, then renamed into place, so `dest` is never a partial copy. The
    /// snapshot is one read transaction: writers go on meanwhile.
    pub fn backup_to(&self, dest: &Path) -> Result<BackedUp> {
        let io = |path: &Path, source: std::io::Error| StoreError::Io {
            path: path.to_path_buf(),
            source,
        };
        if std::fs::symlink_metadata(dest).is_ok() {
            return Err(io(
                dest,
                std::io::Error::new(std::io::ErrorKind::AlreadyExists, "it already exists"),
            ));
        }
        let mut tmp = dest.as_os_str().to_owned();
        tmp.push(format!(".partial-{}", std::process::id()));
        let tmp = std::path::PathBuf::from(tmp);
        let _ = std::fs::remove_file(&tmp);
        // VACUUM INTO takes an empty file as it finds it, so it keeps this mode.
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(|e| io(&tmp, e))?;
        let written = (|| {
            let name = tmp
                .to_str()
                .ok_or_else(|| io(&tmp, std::io::Error::other("the path is not valid UTF-8")))?;
            self.wrap(
                self.connection()
                    .execute("VACUUM INTO ?1", [name])
                    .map_err(Into::into),
            )?;
            let copy = Connection::open_with_flags(&tmp, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
            quick_check(&copy, &tmp)?;
            let attempts: i64 =
                copy.query_row("SELECT count(*) FROM attempts", [], |r| r.get(0))?;
            let bytes = std::fs::metadata(&tmp).map_err(|e| io(&tmp, e))?.len();
            Ok(BackedUp {
                bytes,
                attempts: u64::try_from(attempts).unwrap_or(0),
            })
        })();
        let done = written.and_then(|b| {
            // Never over a file that appeared meanwhile.
            std::fs::hard_link(&tmp, dest).map_err(|e| io(dest, e))?;
            Ok(b)
        });
        let _ = std::fs::remove_file(&tmp);
        done
    }
}
