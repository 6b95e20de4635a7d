//! `StoreError`: what can go wrong with the books, typed so callers can branch on it.

use std::fmt;
use std::path::PathBuf;

#[derive(Debug)]
pub enum StoreError {
    /// No such thing: `what` is `target`, `profile`, `attempt`, `host`.
    NotFound {
        what: &'static str,
        name: String,
    },
    /// A thing of that name already exists.
    Exists {
        what: &'static str,
        name: String,
    },
    /// Another edit came first: nothing was written.
    StaleRevision {
        name: String,
        expected: u64,
        actual: u64,
    },
    /// Removal refused because something still uses the thing; `hint` says what to do.
    InUse {
        what: &'static str,
        name: String,
        users: String,
        hint: &'static str,
    },
    /// The file is a damaged runner-manager store (or a damaged SQLite file).
    Corrupt {
        path: PathBuf,
        detail: String,
    },
    /// The file exists but is not a runner-manager store; it is left untouched.
    NotOurs {
        path: PathBuf,
        detail: String,
    },
    /// The store was written by a newer runner-manager (schema version ahead of ours).
    TooNew {
        path: PathBuf,
        version: i64,
        supported: i64,
    },
    /// Another process held the store's write lock for longer than the busy timeout.
    Locked {
        path: PathBuf,
    },
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    Sqlite(rusqlite::Error),
    /// A row the store wrote itself could not be read back (a bug or a hand edit).
    BadRow {
        what: &'static str,
        detail: String,
    },
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::NotFound { what, name } => write!(f, "no {what} named {name:?}"),
            StoreError::Exists { what, name } => {
                write!(f, "a {what} named {name:?} already exists")
            }
            StoreError::StaleRevision {
                name,
                expected,
                actual,
            } => write!(
                f,
                "profile {name:?} was changed by another edit (you read revision {expected}, it is now at revision {actual}); nothing written: read it again and retry"
            ),
            StoreError::InUse {
                what,
                name,
                users,
                hint,
            } => write!(f, "{what} {name:?} is in use by {users}: {hint}"),
            StoreError::Corrupt { path, detail } => write!(
                f,
                "store {} is corrupt ({detail}); it was left untouched: restore it from a backup or move it aside",
                path.display()
            ),
            StoreError::NotOurs { path, detail } => write!(
                f,
                "{} is not a runner-manager store ({detail}); it was left untouched: choose another --state-dir",
                path.display()
            ),
            StoreError::TooNew {
                path,
                version,
                supported,
            } => write!(
                f,
                "store {} has schema version {version}, newer than this runner-manager knows ({supported}): upgrade runner-manager",
                path.display()
            ),
            StoreError::Locked { path } => write!(
                f,
                "store {} stayed locked by another process for longer than the busy timeout: retry",
                path.display()
            ),
            StoreError::Io { path, source } => write!(f, "{}: {source}", path.display()),
            StoreError::Sqlite(e) => write!(f, "store: {e}"),
            StoreError::BadRow { what, detail } => {
                write!(f, "store holds an unreadable {what} row: {detail}")
            }
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::Io { source, .. } => Some(source),
            StoreError::Sqlite(e) => Some(e),
            _ => None,
        }
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> StoreError {
        StoreError::Sqlite(e)
    }
}

/// What an SQLite error says of the store file, in words for those who do not know
/// SQLite (the CLI's exit codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SqliteFault {
    /// Another process holds it (busy or locked).
    Busy,
    /// Not ours to write: permission denied, or read-only.
    Denied,
    /// Not a database, or a damaged one.
    Unreadable,
    Other,
}

impl StoreError {
    /// For an error SQLite raised, what it says of the file; `None` for the others.
    pub fn sqlite_fault(&self) -> Option<SqliteFault> {
        use rusqlite::ErrorCode as C;
        let StoreError::Sqlite(e) = self else {
            return None;
        };
        Some(match e.sqlite_error_code() {
            Some(C::DatabaseBusy | C::DatabaseLocked) => SqliteFault::Busy,
            Some(C::PermissionDenied | C::ReadOnly) => SqliteFault::Denied,
            Some(C::NotADatabase | C::DatabaseCorrupt) => SqliteFault::Unreadable,
            _ => SqliteFault::Other,
        })
    }
}

pub type Result<T> = std::result::Result<T, StoreError>;
