//! Per-attempt roots under `STATE_DIR/attempts/<id>/`: the runner install, shared
//! read-only, around folders that are the runner's own.
//!
//! A root is built in `<id>.partial` and renamed to `<id>` when complete, so a root
//! that exists is whole, and a crash mid-copy leaves only a `.partial` that the next
//! try (or the orphan reaper) removes and starts over.
//!
//! The layout keeps the cost of a root independent of the install's size (a real
//! release holds thousands of files, most of them node runtimes under `externals/`):
//! - `bin/` is a directory of hard links, file by file: the runner finds its root as
//!   the parent of its own executable's directory, so `bin/` must really sit here;
//! - every other directory of the install (`externals/`, ...) is a symbolic link to
//!   the install's own, shared by every root;
//! - top-level files are hard links;
//! - `_work/`, `_home/` and `_tmp/` are new, and with [`RootOptions::owner`] the root
//!   and those three belong to the runner's uid (mode 0700).
//!
//! What keeps the install safe is ownership, not copying: linked files and shared
//! directories stay the manager's, and a runner under its own uid can replace a link
//! in its own root (which dies with the attempt) but never write through one. That
//! holds only if nothing in the install is writable by group or others, so with an
//! owner set, [`prepare_root`] refuses an install where something is (see
//! [`audit_install`]). With no owner (isolation `none`) the runner is the manager's
//! user and nothing here protects the install from it.
//! Set [`RootOptions::always_copy`] to copy every file instead.

use std::collections::HashMap;
use std::fmt;
use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Files and folders of an install that belong to one registration, never shared.
const NOT_LINKED: &[&str] = &[
    ".runner",
    ".credentials",
    ".credentials_rsaparams",
    "_work",
    "_diag",
    HOME_DIR,
    TMP_DIR,
];

/// The one directory linked file by file (see the module's comment).
const BIN_DIR: &str = "bin";

/// The attempt's `HOME` inside a root.
pub const HOME_DIR: &str = "_home";

/// The attempt's `TMPDIR` inside a root.
pub const TMP_DIR: &str = "_tmp";

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
    /// The runner's uid and gid: the root and its `_work`, `_home` and `_tmp` become
    /// theirs (0700), so the runner can write its registration files and work there
    /// and nobody else can look in. The install's files stay the manager's.
    pub owner: Option<(u32, u32)>,
    /// Copy every file (and every directory) instead of linking and sharing.
    pub always_copy: bool,
}

/// A ready root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedRoot {
    pub root: PathBuf,
    pub work_dir: PathBuf,
    /// The attempt's `HOME` and `TMPDIR`.
    pub home_dir: PathBuf,
    pub tmp_dir: PathBuf,
    /// Files hard-linked, files copied, and install directories shared by a symbolic
    /// link (all zero when it already existed).
    pub linked: u64,
    pub copied: u64,
    pub shared: u64,
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
    /// Something in the install is writable by group or others, or belongs to someone
    /// other than the manager: a runner could change it for every later runner.
    Unsafe {
        path: PathBuf,
        why: String,
    },
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
            RootError::Unsafe { path, why } => write!(
                f,
                "the runner install is not safe to share with jobs: {} {why}",
                path.display()
            ),
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

/// Lays out `root` from `install` (see the module's comment). Idempotent: an existing
/// root is complete and is left as it is; a `.partial` from an interrupted try is
/// removed and the work starts over.
pub fn prepare_root(
    install: &Path,
    root: &Path,
    opts: RootOptions,
) -> Result<PreparedRoot, RootError> {
    check_install(install).map_err(RootError::Install)?;
    let work_dir = root.join(WORK_DIR);
    let home_dir = root.join(HOME_DIR);
    let tmp_dir = root.join(TMP_DIR);
    if fs::symlink_metadata(root).is_ok_and(|m| m.is_dir()) {
        return Ok(PreparedRoot {
            root: root.to_path_buf(),
            work_dir,
            home_dir,
            tmp_dir,
            linked: 0,
            copied: 0,
            shared: 0,
            already_existed: true,
        });
    }
    // Shared directories are reached through links from every root: they must be
    // the manager's, whoever the runner is. Checked once per install, not per root.
    let share = !opts.always_copy;
    if opts.owner.is_some() {
        audit_install_cached(install)?;
    }
    let partial = partial_path(root);
    remove_root(&partial).map_err(RootError::Stale)?;
    if let Some(parent) = root.parent() {
        fs::create_dir_all(parent).map_err(io_err("create", parent))?;
    }
    let install_abs = fs::canonicalize(install).map_err(io_err("resolve", install))?;
    let mut copier = Copier {
        copy_only: opts.always_copy,
        linked: 0,
        copied: 0,
        shared: 0,
    };
    fs::create_dir(&partial).map_err(io_err("create", &partial))?;
    for entry in fs::read_dir(&install_abs).map_err(io_err("read", &install_abs))? {
        let entry = entry.map_err(io_err("read", &install_abs))?;
        let name = entry.file_name();
        if NOT_LINKED.iter().any(|n| name == *n) {
            continue;
        }
        let from = entry.path();
        let to = partial.join(&name);
        let meta = fs::symlink_metadata(&from).map_err(io_err("stat", &from))?;
        if meta.is_dir() && share && name != BIN_DIR {
            std::os::unix::fs::symlink(&from, &to).map_err(io_err("symlink", &to))?;
            copier.shared += 1;
        } else {
            copier.copy_entry(&from, &to, &meta, opts.owner.is_some())?;
        }
    }
    // The root's own directories: the runner's, private to it.
    for d in [&work_dir, &home_dir, &tmp_dir] {
        let d = partial.join(d.file_name().unwrap_or_default());
        fs::create_dir(&d).map_err(io_err("create", &d))?;
    }
    let own = |p: &Path| -> Result<(), RootError> {
        if let Some((uid, gid)) = opts.owner {
            std::os::unix::fs::lchown(p, Some(uid), Some(gid)).map_err(io_err("chown", p))?;
        }
        fs::set_permissions(p, fs::Permissions::from_mode(0o700)).map_err(io_err("chmod", p))
    };
    for name in [WORK_DIR, HOME_DIR, TMP_DIR] {
        own(&partial.join(name))?;
    }
    own(&partial)?;
    fs::rename(&partial, root).map_err(io_err("rename into place", root))?;
    Ok(PreparedRoot {
        root: root.to_path_buf(),
        work_dir,
        home_dir,
        tmp_dir,
        linked: copier.linked,
        copied: copier.copied,
        shared: copier.shared,
        already_existed: false,
    })
}

struct Copier {
    /// Set on the first EXDEV/EPERM so the rest does not retry a link that cannot work.
    copy_only: bool,
    linked: u64,
    copied: u64,
    shared: u64,
}

impl Copier {
    /// One entry of the install: a directory is recreated and filled, a file linked
    /// (or copied), a symbolic link recreated as it is. With `strict`, a file others
    /// could write through its link is refused.
    fn copy_entry(
        &mut self,
        from: &Path,
        to: &Path,
        meta: &fs::Metadata,
        strict: bool,
    ) -> Result<(), RootError> {
        let ft = meta.file_type();
        if ft.is_dir() {
            fs::create_dir(to).map_err(io_err("create", to))?;
            for entry in fs::read_dir(from).map_err(io_err("read", from))? {
                let entry = entry.map_err(io_err("read", from))?;
                let f = entry.path();
                let m = fs::symlink_metadata(&f).map_err(io_err("stat", &f))?;
                self.copy_entry(&f, &to.join(entry.file_name()), &m, strict)?;
            }
            // The install's mode (0755 after `runner install`); the manager's, so the
            // runner cannot add files to the shared layout of its own bin/.
            let mode = meta.mode() & 0o7777 | 0o700;
            fs::set_permissions(to, fs::Permissions::from_mode(mode)).map_err(io_err("chmod", to))
        } else if ft.is_symlink() {
            let target = fs::read_link(from).map_err(io_err("read link", from))?;
            std::os::unix::fs::symlink(&target, to).map_err(io_err("symlink", to))
        } else if ft.is_file() {
            if strict {
                unsafe_mode(from, meta)?;
            }
            self.link_or_copy(from, to)
        } else {
            // Sockets, fifos and devices have no place in a runner release: skipped.
            Ok(())
        }
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

/// Refuses an install entry a runner under another uid could change: writable by group
/// or others, or owned by anyone but root or the manager itself.
fn unsafe_mode(path: &Path, meta: &fs::Metadata) -> Result<(), RootError> {
    if meta.file_type().is_symlink() {
        return Ok(());
    }
    let why = if meta.mode() & 0o022 != 0 {
        format!(
            "is mode {:04o}, writable by group or others; run chmod -R go-w on the install",
            meta.mode() & 0o7777
        )
    } else {
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        if meta.uid() == 0 || meta.uid() == me {
            return Ok(());
        }
        format!(
            "belongs to uid {}, not to the manager; run chown -R root: on the install",
            meta.uid()
        )
    };
    Err(RootError::Unsafe {
        path: path.to_path_buf(),
        why,
    })
}

/// Walks the whole install (never following links) and refuses it if any entry is
/// writable by group or others or owned by someone other than root or the manager.
/// `doctor` runs it in full; roots run it once per install (see below).
pub fn audit_install(install: &Path) -> Result<u64, RootError> {
    let mut stack = vec![install.to_path_buf()];
    let mut seen = 0u64;
    while let Some(d) = stack.pop() {
        let meta = fs::symlink_metadata(&d).map_err(io_err("stat", &d))?;
        unsafe_mode(&d, &meta)?;
        seen += 1;
        for entry in fs::read_dir(&d).map_err(io_err("read", &d))? {
            let entry = entry.map_err(io_err("read", &d))?;
            let name = entry.file_name();
            if d == install && NOT_LINKED.iter().any(|n| name == *n) {
                continue;
            }
            let p = entry.path();
            let m = fs::symlink_metadata(&p).map_err(io_err("stat", &p))?;
            if m.is_dir() {
                stack.push(p);
            } else {
                unsafe_mode(&p, &m)?;
                seen += 1;
            }
        }
    }
    Ok(seen)
}

/// The installs this process audited, by path, with the identity of the install's
/// directory when it passed (device, inode, change time). `runner install` replaces
/// the directory (a new inode), which makes the next root audit again.
static AUDITED: Mutex<Option<HashMap<PathBuf, InstallId>>> = Mutex::new(None);

/// An install directory's device, inode and change time.
type InstallId = (u64, u64, i64);

fn audit_install_cached(install: &Path) -> Result<(), RootError> {
    let meta = fs::metadata(install).map_err(io_err("stat", install))?;
    let id = (meta.dev(), meta.ino(), meta.ctime());
    let mut guard = AUDITED.lock().unwrap_or_else(|e| e.into_inner());
    let map = guard.get_or_insert_with(HashMap::new);
    if map.get(install) == Some(&id) {
        return Ok(());
    }
    audit_install(install)?;
    map.insert(install.to_path_buf(), id);
    Ok(())
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

/// The name of a host's own directory in a shared `runtime_root`: `host-<short id>`.
pub fn host_dir_name(host: &crate::domain::Host) -> String {
    format!("host-{}", host.short_id())
}

/// Where the host's runner roots, caches and kept workspaces live when it sets a
/// `runtime_root`: its own directory there (`host_dir_name`), so hosts given one
/// `runtime_root` never list, sweep or lease each other's. `None`: the state directory.
pub fn host_runtime(host: &crate::domain::Host) -> Option<PathBuf> {
    host.runtime_root
        .as_ref()
        .map(|r| r.join(host_dir_name(host)))
}

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
    /// What the entry itself is (never what it points at).
    pub kind: RootKind,
}

/// What an entry under `attempts/` is, read without following it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RootKind {
    /// A directory: what the daemon makes.
    Dir,
    /// A symbolic link, a file or anything else: never made by the daemon. With
    /// isolation `none` a job can plant one, so it is never followed.
    Other,
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
            // DirEntry::file_type does not follow links.
            let kind = match e.file_type() {
                Ok(t) if t.is_dir() => RootKind::Dir,
                _ => RootKind::Other,
            };
            out.push(RootEntry {
                attempt,
                path: e.path(),
                partial,
                kind,
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
