//! One daemon per state directory: an exclusive `flock` on `STATE_DIR/daemon.lock`,
//! which also records who holds it so a second daemon can say so.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Held for the daemon's lifetime; the kernel releases the lock when the process dies,
/// SIGKILL included, so a crash never leaves a stale lock behind.
#[derive(Debug)]
pub struct DaemonLock {
    _file: File,
    pub path: PathBuf,
}

#[derive(Debug)]
pub enum LockError {
    /// Another daemon holds the lock; `holder` is what it wrote (pid and start time).
    Held {
        path: PathBuf,
        holder: String,
    },
    Io {
        path: PathBuf,
        err: io::Error,
    },
}

impl std::fmt::Display for LockError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LockError::Held { path, holder } => write!(
                f,
                "another daemon already runs on this state directory ({holder}; lock {}); stop it first or use another --state-dir",
                path.display()
            ),
            LockError::Io { path, err } => {
                write!(f, "cannot take the daemon lock {}: {err}", path.display())
            }
        }
    }
}

impl std::error::Error for LockError {}

impl DaemonLock {
    pub fn acquire(state_dir: &Path) -> Result<DaemonLock, LockError> {
        let path = state_dir.join("daemon.lock");
        let io_err = |err| LockError::Io {
            path: path.clone(),
            err,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(io_err)?;
        // SAFETY: flock on an fd we own; no memory is shared with the kernel.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let err = io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = holder.trim();
                let holder = if holder.is_empty() {
                    "holder unknown".to_string()
                } else {
                    holder.to_string()
                };
                return Err(LockError::Held { path, holder });
            }
            return Err(io_err(err));
        }
        let started = crate::timefmt::format_rfc3339(crate::timefmt::now_millis());
        file.set_len(0).map_err(io_err)?;
        file.seek(SeekFrom::Start(0)).map_err(io_err)?;
        write!(file, "pid {} since {started}", std::process::id()).map_err(io_err)?;
        file.sync_data().map_err(io_err)?;
        Ok(DaemonLock { _file: file, path })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_holder_is_refused_and_told_who_holds_it() {
        let dir = std::env::temp_dir().join(format!("rm-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let first = DaemonLock::acquire(&dir).unwrap();
        // flock locks belong to the open file description, so a second open in the
        // same process conflicts just as another process would.
        let err = DaemonLock::acquire(&dir).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("pid {}", std::process::id())),
            "{msg}"
        );
        drop(first);
        let again = DaemonLock::acquire(&dir);
        assert!(again.is_ok());
        drop(again);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
