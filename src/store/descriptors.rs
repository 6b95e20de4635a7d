//! The store files this process has SQLite connections on, counted per file, and the
//! one door through which the process may open such a file outside SQLite: only while
//! no other connection of its own is on it.
//!
//! SQLite's locks are POSIX advisory locks, and those belong to a process and a file,
//! not to a descriptor: closing *any* descriptor of the file drops every lock the
//! process holds on it ("How To Corrupt An SQLite Database File", 2.2). A daemon that
//! opened `state.db` with `std::fs` to check it while its loops had connections on it
//! lost their locks; the next outside reader (`sqlite3`, a backup script) then found
//! no other user, checkpointed and deleted the WAL under the live connections, which
//! from then on failed with `disk I/O error` and lost what they wrote (issue 48).
//!
//! Every file connection this process opens is counted here first ([`connect`]), and
//! what must read the file itself (a readable file before the first connection, the
//! header of a file SQLite calls no database) does so under the same lock, only when
//! no other connection is on it ([`when_alone`]). A connection opened meanwhile waits
//! for the lock, so none is ever open while a descriptor of ours outside SQLite is.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Mutex;

/// A file by device and inode: a path renamed or replaced is another file.
type FileId = (u64, u64);

/// How many connections of this process are on each store file.
static CONNECTIONS: Mutex<BTreeMap<FileId, usize>> = Mutex::new(BTreeMap::new());

fn identity(path: &Path) -> Option<FileId> {
    // stat(2), which opens no descriptor.
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

fn book() -> std::sync::MutexGuard<'static, BTreeMap<FileId, usize>> {
    // A panic while holding it left only a count behind, which stays right.
    CONNECTIONS.lock().unwrap_or_else(|e| e.into_inner())
}

/// One connection of this process counted on its file, until dropped (drop it after the
/// connection is closed: a struct field declared after the connection is).
#[derive(Debug)]
pub struct Counted {
    file: Option<FileId>,
}

impl Counted {
    /// Counts nothing: an in-memory connection has no file.
    pub fn none() -> Counted {
        Counted { file: None }
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        let Some(id) = self.file else { return };
        let mut book = book();
        if let Some(n) = book.get_mut(&id) {
            *n -= 1;
            if *n == 0 {
                book.remove(&id);
            }
        }
    }
}

/// Counts a connection about to be opened on `path`. `first` runs before, with leave to
/// open the file outside SQLite, only when no connection of this process is on it yet,
/// and under the book's lock, so none opens meanwhile; its error is returned and
/// nothing is counted.
pub fn connect<E>(path: &Path, first: impl FnOnce() -> Result<(), E>) -> Result<Counted, E> {
    let mut book = book();
    let id = identity(path);
    let open = id.and_then(|id| book.get(&id).copied()).unwrap_or(0);
    if open == 0 {
        first()?;
    }
    // The file as it is now: `first` may have been the one to find it missing.
    let Some(id) = id.or_else(|| identity(path)) else {
        return Ok(Counted::none());
    };
    *book.entry(id).or_insert(0) += 1;
    Ok(Counted { file: Some(id) })
}

/// Runs `f`, which may open `path` outside SQLite, only when at most `mine` connections
/// of this process are on it (the caller's own, whose locks it may lose); `None`
/// otherwise. Under the book's lock, so no connection opens while `f` runs.
pub fn when_alone<T>(path: &Path, mine: usize, f: impl FnOnce() -> T) -> Option<T> {
    let book = book();
    let open = identity(path)
        .and_then(|id| book.get(&id).copied())
        .unwrap_or(0);
    (open <= mine).then(f)
}

/// How many connections of this process are on `path` (tests).
#[cfg(test)]
pub fn count(path: &Path) -> usize {
    identity(path)
        .and_then(|id| book().get(&id).copied())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_file(tag: &str) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("rm-descriptors-{tag}-{}", std::process::id()));
        std::fs::write(&p, b"x").unwrap();
        p
    }

    #[test]
    fn the_first_check_runs_only_for_the_first_connection() {
        let p = temp_file("first");
        let mut ran = 0;
        let a = connect::<()>(&p, || {
            ran += 1;
            Ok(())
        })
        .unwrap();
        let b = connect::<()>(&p, || {
            ran += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!((ran, count(&p)), (1, 2));
        drop(a);
        drop(b);
        assert_eq!(count(&p), 0);
        let _c = connect::<()>(&p, || {
            ran += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(ran, 2);
        let _ = std::fs::remove_file(&p);
    }

    #[test]
    fn a_failed_first_check_counts_nothing() {
        let p = temp_file("failed");
        assert_eq!(connect(&p, || Err("no")).unwrap_err(), "no");
        assert_eq!(count(&p), 0);
        let _ = std::fs::remove_file(&p);
    }

    #[test]
    fn the_file_is_read_outside_sqlite_only_when_no_other_connection_is_on_it() {
        let p = temp_file("alone");
        assert_eq!(when_alone(&p, 0, || 1), Some(1));
        let mine = connect::<()>(&p, || Ok(())).unwrap();
        assert_eq!(when_alone(&p, 0, || 1), None);
        assert_eq!(when_alone(&p, 1, || 1), Some(1), "only the caller's own");
        let other = connect::<()>(&p, || Ok(())).unwrap();
        assert_eq!(when_alone(&p, 1, || 1), None, "another connection is on it");
        drop((mine, other));
        let _ = std::fs::remove_file(&p);
    }

    #[test]
    fn a_missing_file_is_counted_once_the_check_made_it() {
        let p = std::env::temp_dir().join(format!("rm-descriptors-made-{}", std::process::id()));
        let _ = std::fs::remove_file(&p);
        let c = connect::<std::io::Error>(&p, || std::fs::write(&p, b"x")).unwrap();
        assert_eq!(count(&p), 1);
        drop(c);
        let _ = std::fs::remove_file(&p);
    }
}
