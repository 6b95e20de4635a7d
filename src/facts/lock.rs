//! One daemon per state directory: an exclusive `flock` on `STATE_DIR/daemon.lock`,
//! which also records who holds it so a second daemon can say so. And one daemon per
//! host id on a machine (`HostClaim`): the same lock on `host-<id>.lock` in the
//! host-wide claims' directory (`runner::claim::lock_dir`), so a copied state
//! directory (`cp -a`, an image, a restore) cannot run beside its original.

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
    /// Another daemon on this host holds some of the host's runner uids
    /// (`runner::claim`).
    Uids(crate::runner::claim::ClaimError),
    /// Another daemon on this machine runs with the same host id: this state
    /// directory is a copy of its one. `holder` is what it wrote (pid, state
    /// directory, since when).
    HostId {
        id: String,
        holder: String,
        state_dir: PathBuf,
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
            LockError::Uids(e) => write!(f, "{e}"),
            LockError::HostId {
                id,
                holder,
                state_dir,
            } => write!(
                f,
                "host id {id} is already in use by another daemon on this machine ({holder}): \
                 this state directory is a copy of that one (cp -a, an image, a restore), and \
                 two daemons with one host id kill and deregister each other's runners; give \
                 the copy its own identity: runner-manager --state-dir {} host reidentify",
                state_dir.display()
            ),
        }
    }
}

impl std::error::Error for LockError {}

/// How long a lock whose recorded holder is dead is waited for.
const STALE_HOLDER_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Whether the holder text (`pid N since T`, `pid N, state dir D since T`) names a
/// process that no longer exists.
fn holder_gone(holder: &str) -> bool {
    let Some(pid) = crate::runner::claim::holder_pid(holder) else {
        return false;
    };
    // SAFETY: kill with signal 0 only checks that the process exists.
    let rc = unsafe { libc::kill(pid, 0) };
    rc != 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

impl DaemonLock {
    pub fn acquire(state_dir: &Path) -> Result<DaemonLock, LockError> {
        let path = state_dir.join("daemon.lock");
        let note = format!("pid {}", std::process::id());
        let file = hold(&path, 0o600, &note)?;
        Ok(DaemonLock { _file: file, path })
    }
}

/// Takes an exclusive `flock` on `path` (made with `mode` if absent) and writes
/// `note` and since when into it; refused with `Held` and what the holder wrote.
fn hold(path: &Path, mode: u32, note: &str) -> Result<File, LockError> {
    let io_err = |err| LockError::Io {
        path: path.to_path_buf(),
        err,
    };
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(io_err)?;
    // A daemon SIGKILLed while a runner it spawned was between fork and exec leaves
    // the lock with that child until it execs (the descriptor is close-on-exec):
    // a restart at once finds it held by a daemon that is gone. While the holder
    // the file names is dead, the lock is waited for, a few seconds at most.
    let deadline = std::time::Instant::now() + STALE_HOLDER_WAIT;
    loop {
        // SAFETY: flock on an fd we own; no memory is shared with the kernel.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc == 0 {
            break;
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(io_err(err));
        }
        let mut holder = String::new();
        file.seek(SeekFrom::Start(0)).map_err(io_err)?;
        let _ = file.read_to_string(&mut holder);
        let holder = holder.trim().to_string();
        if holder_gone(&holder) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
            continue;
        }
        let holder = if holder.is_empty() {
            "holder unknown".to_string()
        } else {
            holder
        };
        return Err(LockError::Held {
            path: path.to_path_buf(),
            holder,
        });
    }
    let started = crate::timefmt::format_rfc3339(crate::timefmt::now_millis());
    file.set_len(0).map_err(io_err)?;
    file.seek(SeekFrom::Start(0)).map_err(io_err)?;
    write!(file, "{note} since {started}").map_err(io_err)?;
    file.sync_data().map_err(io_err)?;
    Ok(file)
}

/// A daemon's claim on its host id on this machine; dropped (or the process dead,
/// SIGKILL included), it is gone.
#[derive(Debug)]
pub struct HostClaim {
    _file: File,
    pub path: PathBuf,
}

/// Pure: the claim file of host id `id` in the claims' directory.
pub fn host_claim_path(lock_dir: &Path, id: &str) -> PathBuf {
    lock_dir.join(format!("host-{id}.lock"))
}

impl HostClaim {
    /// Claims host id `id` for the daemon of `state_dir`, in `lock_dir` (made if
    /// absent). Refused with `HostId`, naming the holder, while another daemon holds
    /// it; a directory or file that cannot be used is `Io`.
    pub fn take(lock_dir: &Path, id: &str, state_dir: &Path) -> Result<HostClaim, LockError> {
        std::fs::create_dir_all(lock_dir).map_err(|err| LockError::Io {
            path: lock_dir.to_path_buf(),
            err,
        })?;
        let path = host_claim_path(lock_dir, id);
        let mine = std::fs::canonicalize(state_dir).unwrap_or_else(|_| state_dir.into());
        let note = crate::runner::claim::note_text(std::process::id(), &mine);
        loop {
            match hold(&path, 0o644, &note) {
                // The file is removed as a claim ends: a lock taken on a file already
                // removed (opened just before) holds nothing, and is taken again.
                Ok(file) if !same_file(&file, &path) => continue,
                Ok(file) => return Ok(HostClaim { _file: file, path }),
                Err(LockError::Held { holder, .. }) => {
                    return Err(LockError::HostId {
                        id: id.to_string(),
                        holder,
                        state_dir: state_dir.to_path_buf(),
                    });
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// Whether `path` still names the file `file` has open.
fn same_file(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::symlink_metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

impl Drop for HostClaim {
    /// Removes the claim's file while it is still locked, so the claims' directory
    /// keeps no file per host id ever run (a SIGKILLed daemon's stays, and is reused).
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
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

    #[test]
    fn a_host_id_is_claimed_once_on_a_machine_and_the_refusal_names_the_holder() {
        let base = std::env::temp_dir().join(format!("rm-hostclaim-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let locks = base.join("locks");
        let (orig, copy) = (base.join("orig"), base.join("copy"));
        std::fs::create_dir_all(&orig).unwrap();
        std::fs::create_dir_all(&copy).unwrap();
        let first = HostClaim::take(&locks, "0123abcd0123abcd", &orig).unwrap();
        // flock locks belong to the open file description: a second take in this
        // process conflicts as another daemon's would.
        let err = HostClaim::take(&locks, "0123abcd0123abcd", &copy).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, LockError::HostId { .. }), "{err:?}");
        for part in [
            format!("pid {}", std::process::id()),
            format!("state dir {}", orig.display()),
            "host id 0123abcd0123abcd".to_string(),
            format!("--state-dir {} host reidentify", copy.display()),
        ] {
            assert!(msg.contains(&part), "{part:?} not in {msg}");
        }
        // Another id is another claim.
        let other = HostClaim::take(&locks, "89abcdef89abcdef", &copy).unwrap();
        drop(first);
        let again = HostClaim::take(&locks, "0123abcd0123abcd", &copy).unwrap();
        drop((other, again));
        std::fs::remove_dir_all(&base).unwrap();
    }

    /// A daemon SIGKILLed while a child it forked had not yet exec'd: the lock stays
    /// with the child a moment, under the dead daemon's name. The next daemon waits
    /// for it rather than refusing to start; a live holder is refused at once.
    #[test]
    fn a_lock_left_with_a_dead_holders_child_is_waited_for() {
        let dir = std::env::temp_dir().join(format!("rm-lock-stale-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("daemon.lock");
        // The inheritor: another open file description holding the lock, the file
        // naming a holder that is gone (pid_max is at most 2^22).
        let inheritor = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        std::fs::write(&path, "pid 2147483000 since 2026-12-01T00:00:00Z").unwrap();
        // SAFETY: flock on an fd we own.
        assert_eq!(
            unsafe { libc::flock(inheritor.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) },
            0
        );
        assert!(holder_gone("pid 2147483000 since 2026-12-01T00:00:00Z"));
        assert!(!holder_gone(&format!("pid {} since x", std::process::id())));
        assert!(!holder_gone("holder unknown"));
        // The scenario: the child keeps the lock a moment (300 ms here), then execs.
        // Without the wait, the first try below fails at once.
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(300));
            drop(inheritor);
        });
        let got = DaemonLock::acquire(&dir);
        releaser.join().unwrap();
        assert!(got.is_ok(), "{:?}", got.err());
        drop(got);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
