//! `CgroupError`: everything that can go wrong creating, limiting, killing or removing a cgroup, with the remedy in its message.

use super::{KILL_BOUND, LEAF};
use std::fmt;
use std::io;
use std::path::PathBuf;

#[derive(Debug)]
pub enum CgroupError {
    /// The host has no usable cgroups (`Cgroups::none`).
    Unavailable { why: String },
    /// A limit the kernel would refuse.
    InvalidLimit { name: &'static str, why: String },
    /// Attempt ids are non-negative.
    InvalidAttempt(i64),
    /// The base does not exist: `prepare` was not run (or the base was removed).
    NotPrepared { base: PathBuf },
    /// Something we would write to is not a directory on a cgroup file system.
    NotACgroup { path: PathBuf },
    /// A file operation failed.
    Io {
        action: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    /// Enabling a controller for our children failed.
    Enable {
        path: PathBuf,
        controller: &'static str,
        source: io::Error,
    },
    /// `prepare` could not move every process out of the delegated cgroup.
    NotLeaf { path: PathBuf, pids: Vec<i32> },
    /// rmdir found processes still in the cgroup: kill first, retry later.
    Busy { path: PathBuf },
    /// `kill` signalled for its whole bound and these processes are still there.
    Survivors { path: PathBuf, pids: Vec<i32> },
}

impl fmt::Display for CgroupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CgroupError::Unavailable { why } => {
                write!(f, "no cgroups to contain runners in: {why}")
            }
            CgroupError::InvalidLimit { name, why } => write!(f, "{name}: {why}"),
            CgroupError::InvalidAttempt(id) => {
                write!(f, "attempt id {id} cannot name a cgroup (ids are >= 0)")
            }
            CgroupError::NotPrepared { base } => write!(
                f,
                "{} does not exist: Cgroups::prepare must run at daemon start (it creates the base)",
                base.display()
            ),
            CgroupError::NotACgroup { path } => write!(
                f,
                "{} is not a directory on a cgroup file system: refusing to use it (check the host's cgroup mounts)",
                path.display()
            ),
            CgroupError::Io {
                action,
                path,
                source,
            } => {
                write!(f, "{action} {} failed: {source}", path.display())?;
                match source.raw_os_error() {
                    Some(libc::EACCES | libc::EPERM) => f.write_str(
                        " (the daemon must run as root, or under systemd with Delegate=yes)",
                    ),
                    Some(libc::ENOENT) => f.write_str(" (the cgroup or its file is gone)"),
                    _ => Ok(()),
                }
            }
            CgroupError::Enable {
                path,
                controller,
                source,
            } => {
                write!(
                    f,
                    "enabling the {controller} controller in {}/cgroup.subtree_control failed: {source}",
                    path.display()
                )?;
                if source.raw_os_error() == Some(libc::EBUSY) {
                    f.write_str(
                        " (that cgroup still holds processes; v2 allows controllers only for cgroups whose processes live in leaves)",
                    )?;
                }
                Ok(())
            }
            CgroupError::NotLeaf { path, pids } => write!(
                f,
                "processes {pids:?} stay in {} after moving them to its leaf {LEAF}/: controllers cannot be enabled there; stop whatever keeps adding them",
                path.display()
            ),
            CgroupError::Busy { path } => write!(
                f,
                "{} still has processes: kill the attempt, then retry the removal later",
                path.display()
            ),
            CgroupError::Survivors { path, pids } => write!(
                f,
                "after {} s of SIGKILL, processes {pids:?} remain in {} (stuck in the kernel?): retry later",
                KILL_BOUND.as_secs(),
                path.display()
            ),
        }
    }
}

impl std::error::Error for CgroupError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CgroupError::Io { source, .. } | CgroupError::Enable { source, .. } => Some(source),
            _ => None,
        }
    }
}
