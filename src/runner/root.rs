//! Per-attempt roots: a hard-linked copy of the runner install under `STATE_DIR/attempts/<id>/`.
//!
//! A root is built in `<id>.partial` and renamed to `<id>` when complete, so a root
//! that exists is whole, and a crash mid-copy leaves only a `.partial` that the next
//! try (or the orphan reaper) removes and starts over.
//!
//! Hard links share inodes with the install. The runner writes its per-registration
//! files (`.runner`, `.credentials`, `_diag/`, `_work/`) as new files, which is safe;
//! but anything that modified a linked file *in place* (a chmod, an editor, a runner
//! self-update rewriting `bin/`) would change the install and every other root. JIT
//! runners we start do not self-update (the daemon never enables it), and the
//! registration files of a configured install are never linked. Set
//! `RootOptions::always_copy` where that risk is not acceptable.

use std::fmt;
use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Files and folders of an install that belong to one registration, never shared.
const NOT_LINKED: &[&str] = &[
    ".runner",
    ".credentials",
    ".credentials_rsaparams",
    "_work",
    "_diag",
];

/// The runner's work folder inside a root.
pub const WORK_DIR: &str = "_work";

/// The path of the listener inside an install or a root.
pub const LISTENER: &str = "bin/Runner.Listener";

/// A directory that is not an unpacked actions-runner release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallError {
    pub path: PathBuf,
    pub why: &'static str,
}

impl fmt::Display for InstallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} is not an actions-runner install: {}; unpack a release from \
             github.com/actions/runner/releases there or fix the profile's runner_dir",
            self.path.display(),
            self.why
        )
    }
}

impl std::error::Error for InstallError {}

/// Checks `dir/bin/Runner.Listener` exists and is executable; returns its path.
pub fn check_install(dir: &Path) -> Result<PathBuf, InstallError> {
    let fail = |why| InstallError {
        path: dir.to_path_buf(),
        why,
    };
    let meta = fs::metadata(dir).map_err(|_| fail("the directory cannot be read"))?;
    if !meta.is_dir() {
        return Err(fail("it is not a directory"));
    }
    let listener = dir.join(LISTENER);
    let meta = fs::metadata(&listener).map_err(|_| fail("bin/Runner.Listener is missing"))?;
    if !meta.is_file() {
        return Err(fail("bin/Runner.Listener is not a file"));
    }
    if meta.permissions().mode() & 0o111 == 0 {
        return Err(fail("bin/Runner.Listener is not executable"));
    }
    Ok(listener)
}

#[derive(Debug, Clone, Copy, Default)]
pub struct RootOptions {
    /// Give the root's directories (not the linked files) to this uid/gid, so a
    /// `run_as` runner can write its registration files and work folder.
    pub owner: Option<(u32, u32)>,
    /// Copy every file instead of hard-linking.
    pub always_copy: bool,
}

/// A ready root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedRoot {
    pub root: PathBuf,
    pub work_dir: PathBuf,
    /// Files hard-linked and files copied (both zero when it already existed).
    pub linked: u64,
    pub copied: u64,
    /// The root was complete from an earlier try; nothing was done.
    pub already_existed: bool,
}

#[derive(Debug)]
pub enum RootError {
    Install(InstallError),
    Io {
        what: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    /// The `.partial` left by an earlier try could not be removed.
    Stale(RemoveError),
}

impl fmt::Display for RootError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RootError::Install(e) => write!(f, "{e}"),
            RootError::Io { what, path, source } => write!(
                f,
                "preparing the runner root failed to {what} {}: {source}",
                path.display()
            ),
            RootError::Stale(e) => write!(f, "cannot clear an unfinished root: {e}"),
        }
    }
}

impl std::error::Error for RootError {}

fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> RootError + 'a {
    move |source| RootError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// Where a root is built before it is complete.
pub fn partial_path(root: &Path) -> PathBuf {
    let mut name = root.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    root.with_file_name(name)
}

/// Makes `root` a copy of `install` (hard links where possible) with an empty
/// `_work`. Idempotent: an existing root is complete and is left as it is; a
/// `.partial` from an interrupted try is removed and the copy starts over.
pub fn prepare_root(
    install: &Path,
    root: &Path,
    opts: RootOptions,
) -> Result<PreparedRoot, RootError> {
    check_install(install).map_err(RootError::Install)?;
    let work_dir = root.join(WORK_DIR);
    if fs::symlink_metadata(root).is_ok_and(|m| m.is_dir()) {
        return Ok(PreparedRoot {
            root: root.to_path_buf(),
            work_dir,
            linked: 0,
            copied: 0,
            already_existed: true,
        });
    }
    let partial = partial_path(root);
    remove_root(&partial).map_err(RootError::Stale)?;
    if let Some(parent) = root.parent() {
        fs::create_dir_all(parent).map_err(io_err("create", parent))?;
    }
    let mut copier = Copier {
        copy_only: opts.always_copy,
        linked: 0,
        copied: 0,
        dirs: Vec::new(),
    };
    copier.copy_dir(install, &partial, true)?;
    let work = partial.join(WORK_DIR);
    fs::create_dir(&work).map_err(io_err("create", &work))?;
    copier.dirs.push(work);
    if let Some((uid, gid)) = opts.owner {
        for d in &copier.dirs {
            std::os::unix::fs::lchown(d, Some(uid), Some(gid)).map_err(io_err("chown", d))?;
        }
    }
    fs::rename(&partial, root).map_err(io_err("rename into place", root))?;
    Ok(PreparedRoot {
        root: root.to_path_buf(),
        work_dir,
        linked: copier.linked,
        copied: copier.copied,
        already_existed: false,
    })
}

struct Copier {
    /// Set on the first EXDEV/EPERM so the rest does not retry a link that cannot work.
    copy_only: bool,
    linked: u64,
    copied: u64,
    /// Every directory created, for chown.
    dirs: Vec<PathBuf>,
}

impl Copier {
    fn copy_dir(&mut self, src: &Path, dst: &Path, top: bool) -> Result<(), RootError> {
        fs::create_dir(dst).map_err(io_err("create", dst))?;
        self.dirs.push(dst.to_path_buf());
        for entry in fs::read_dir(src).map_err(io_err("read", src))? {
            let entry = entry.map_err(io_err("read", src))?;
            let name = entry.file_name();
            if top && NOT_LINKED.iter().any(|n| name == *n) {
                continue;
            }
            let from = entry.path();
            let to = dst.join(&name);
            let meta = fs::symlink_metadata(&from).map_err(io_err("stat", &from))?;
            let ft = meta.file_type();
            if ft.is_dir() {
                self.copy_dir(&from, &to, false)?;
            } else if ft.is_symlink() {
                let target = fs::read_link(&from).map_err(io_err("read link", &from))?;
                std::os::unix::fs::symlink(&target, &to).map_err(io_err("symlink", &to))?;
            } else if ft.is_file() {
                self.link_or_copy(&from, &to)?;
            }
            // Sockets, fifos and devices have no place in a runner release: skipped.
        }
        // The source's mode, but always owner-writable: a read-only directory in a
        // root would only make removing it harder.
        let mode = fs::metadata(src).map_err(io_err("stat", src))?.mode() & 0o7777 | 0o700;
        fs::set_permissions(dst, fs::Permissions::from_mode(mode)).map_err(io_err("chmod", dst))
    }

    fn link_or_copy(&mut self, from: &Path, to: &Path) -> Result<(), RootError> {
        if !self.copy_only {
            match fs::hard_link(from, to) {
                Ok(()) => {
                    self.linked += 1;
                    return Ok(());
                }
                // EXDEV: another filesystem; EPERM: protected_hardlinks or a filesystem
                // without links. Neither will change for the rest of this tree.
                Err(e) if matches!(e.raw_os_error(), Some(libc::EXDEV | libc::EPERM)) => {
                    self.copy_only = true;
                }
                Err(e) => return Err(io_err("hard-link", to)(e)),
            }
        }
        fs::copy(from, to).map_err(io_err("copy", to))?;
        self.copied += 1;
        Ok(())
    }
}

/// Why a root could not be removed; the caller defers cleanup and retries later.
#[derive(Debug)]
pub enum RemoveError {
    /// Something still uses it (a mount point, or a process kept writing into it).
    Busy {
        path: PathBuf,
        source: io::Error,
    },
    /// Permission denied even after making its directories writable.
    Denied {
        path: PathBuf,
        source: io::Error,
    },
    Io {
        path: PathBuf,
        source: io::Error,
    },
}

impl fmt::Display for RemoveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RemoveError::Busy { path, source } => write!(
                f,
                "{} is still in use ({source}); stop what runs in it, cleanup will retry",
                path.display()
            ),
            RemoveError::Denied { path, source } => write!(
                f,
                "cannot remove {} ({source}); check the daemon's permissions on the state directory",
                path.display()
            ),
            RemoveError::Io { path, source } => {
                write!(f, "cannot remove {}: {source}", path.display())
            }
        }
    }
}

impl std::error::Error for RemoveError {}

/// How many times removal is tried before giving up: a process still writing can
/// refill a directory between listing and rmdir.
const REMOVE_TRIES: usize = 4;

/// Removes `root` (and its `.partial`, if any). A missing root is success. Read-only
/// directories inside are made writable first; the walk never follows symlinks.
pub fn remove_root(root: &Path) -> Result<(), RemoveError> {
    remove_tree(root)?;
    remove_tree(&partial_path(root))
}

fn remove_tree(path: &Path) -> Result<(), RemoveError> {
    let mut last = None;
    for _ in 0..REMOVE_TRIES {
        match fs::remove_dir_all(path) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if fs::symlink_metadata(path).is_err() {
                    return Ok(());
                }
                // A child vanished under us (another remover, or the runner): retry.
                last = Some(e);
            }
            Err(e) => {
                match e.raw_os_error() {
                    Some(libc::EACCES | libc::EPERM) => make_writable(path),
                    Some(libc::EBUSY) => {
                        return Err(RemoveError::Busy {
                            path: path.to_path_buf(),
                            source: e,
                        });
                    }
                    _ => {}
                }
                last = Some(e);
            }
        }
    }
    let source = last.unwrap_or_else(|| io::Error::other("removal did not finish"));
    let path = path.to_path_buf();
    Err(match source.raw_os_error() {
        Some(libc::ENOTEMPTY | libc::EBUSY) => RemoveError::Busy { path, source },
        Some(libc::EACCES | libc::EPERM | libc::EROFS) => RemoveError::Denied { path, source },
        _ => RemoveError::Io { path, source },
    })
}

/// Adds owner rwx to every directory under `path` (not following symlinks), so the
/// entries inside can be unlinked. Errors are ignored: removal reports what is left.
fn make_writable(path: &Path) {
    let Ok(meta) = fs::symlink_metadata(path) else {
        return;
    };
    if !meta.is_dir() {
        return;
    }
    let mode = meta.mode() & 0o7777 | 0o700;
    let _ = fs::set_permissions(path, fs::Permissions::from_mode(mode));
    if let Ok(entries) = fs::read_dir(path) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                make_writable(&e.path());
            }
        }
    }
}

/// A root found on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootEntry {
    pub attempt: i64,
    pub path: PathBuf,
    /// An unfinished copy (`<id>.partial`): never in use by a runner.
    pub partial: bool,
}

/// Every attempt root under `STATE_DIR/attempts/`, sorted by attempt id, so the
/// daemon can remove the ones no live attempt owns. Names that are not attempt ids
/// are not ours and are left out.
pub fn list_attempt_roots(state_dir: &Path) -> io::Result<Vec<RootEntry>> {
    let dir = state_dir.join("attempts");
    let entries = match fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for e in entries {
        let e = e?;
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let (id, partial) = match name.strip_suffix(".partial") {
            Some(id) => (id, true),
            None => (name, false),
        };
        if let Ok(attempt) = id.parse::<i64>() {
            out.push(RootEntry {
                attempt,
                path: e.path(),
                partial,
            });
        }
    }
    out.sort_by_key(|r| (r.attempt, r.partial));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_sits_next_to_the_root() {
        assert_eq!(
            partial_path(Path::new("/s/attempts/42")),
            PathBuf::from("/s/attempts/42.partial")
        );
    }
}
