//! Unpacking a runner release: every entry checked before anything is written (no
//! absolute paths, no `..`, links only to places inside the install, no device files
//! or FIFOs), into `DIR.partial`, renamed into place only when whole, so a runner
//! directory that exists is always complete.
//!
//! Links are checked against the whole archive, not one at a time: no entry may be
//! placed, and no link may point, through another symlink of the archive (`a -> .`
//! then `a/b -> ..` would otherwise plant a link to the parent), so resolving each
//! link lexically from its own directory is what the kernel will resolve.
//!
//! Only an install of ours is ever replaced: `install_tarball` marks what it installs
//! ([`MARKER`]), and refuses a directory (or a `DIR.partial`, `DIR.previous`) that is
//! neither absent, empty, nor marked, deleting nothing.

use super::InstallError;
use flate2::read::GzDecoder;
use std::collections::BTreeSet;
use std::fmt;
use std::path::{Component, Path, PathBuf};

/// The file `runner install` leaves at the top of every install it makes: a directory
/// without it is not ours to replace.
pub const MARKER: &str = ".runner-manager-install";

/// Entries in one archive at most (a release has a few thousand).
const MAX_ENTRIES: usize = 200_000;
/// Bytes unpacked at most (a release unpacks to well under 1 GB).
const MAX_UNPACKED_BYTES: u64 = 8 * 1024 * 1024 * 1024;

/// Why an archive was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnpackError {
    /// An entry that could write outside the install or create a special file.
    Unsafe {
        entry: String,
        why: &'static str,
    },
    /// Not a readable .tar.gz, or too large.
    Damaged(String),
    /// It unpacked, but is not laid out like an actions-runner release.
    NotARunner(String),
    Io(String),
}

impl fmt::Display for UnpackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UnpackError::Unsafe { entry, why } => {
                write!(f, "refused the archive: entry {entry:?} {why}")
            }
            UnpackError::Damaged(m) => write!(f, "the archive is damaged: {m}"),
            UnpackError::NotARunner(m) => write!(f, "not an actions-runner release: {m}"),
            UnpackError::Io(m) => f.write_str(m),
        }
    }
}

/// A path inside the archive, made of plain names only (a leading `./` is fine).
fn is_plain_relative(p: &Path) -> Result<(), &'static str> {
    if p.as_os_str().is_empty() {
        return Err("has an empty path");
    }
    for c in p.components() {
        match c {
            Component::Normal(_) | Component::CurDir => {}
            Component::ParentDir => return Err("has a '..' component"),
            Component::RootDir | Component::Prefix(_) => return Err("is an absolute path"),
        }
    }
    Ok(())
}

/// A path's plain names (`./a//b` is `a/b`).
fn names(p: &Path) -> PathBuf {
    p.components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .collect()
}

/// Whether a symlink at `entry` pointing at `target` stays inside the install,
/// resolving `..` lexically from the link's own directory, and never passing through
/// one of `symlinks` (the archive's own links, whose `..` the kernel would resolve
/// from where they lead, not from where they sit).
fn link_stays_inside(entry: &Path, target: &Path, symlinks: &BTreeSet<PathBuf>) -> bool {
    if target.is_absolute() {
        return false;
    }
    let parent = entry.parent().unwrap_or(Path::new(""));
    let steps: Vec<Component> = parent.components().chain(target.components()).collect();
    let mut depth = PathBuf::new();
    for (i, c) in steps.iter().enumerate() {
        match c {
            Component::Normal(n) => {
                depth.push(n);
                let last = steps[i + 1..]
                    .iter()
                    .all(|c| matches!(c, Component::CurDir));
                if !last && symlinks.contains(&depth) {
                    return false;
                }
            }
            Component::CurDir => {}
            Component::ParentDir => {
                if !depth.pop() {
                    return false;
                }
            }
            Component::RootDir | Component::Prefix(_) => return false,
        }
    }
    true
}

/// Whether a proper ancestor of `path` is one of the archive's symlinks.
fn under_a_symlink(path: &Path, symlinks: &BTreeSet<PathBuf>) -> bool {
    path.ancestors()
        .skip(1)
        .any(|a| !a.as_os_str().is_empty() && symlinks.contains(a))
}

/// One entry as the checks see it.
struct Seen {
    path: PathBuf,
    name: String,
    kind: tar::EntryType,
    link: Option<PathBuf>,
}

fn read_entry<R: std::io::Read>(e: &tar::Entry<'_, R>) -> Result<Seen, UnpackError> {
    let path = e
        .path()
        .map_err(|err| UnpackError::Damaged(format!("an entry's name does not read: {err}")))?;
    Ok(Seen {
        name: path.display().to_string(),
        path: path.into_owned(),
        kind: e.header().entry_type(),
        link: e.link_name().ok().flatten().map(|l| l.into_owned()),
    })
}

/// Checks one entry against the archive's symlinks (all of them, wherever they come
/// in the archive).
fn check_entry(e: &Seen, symlinks: &BTreeSet<PathBuf>) -> Result<(), UnpackError> {
    let unsafe_ = |why| UnpackError::Unsafe {
        entry: e.name.clone(),
        why,
    };
    is_plain_relative(&e.path).map_err(unsafe_)?;
    let path = names(&e.path);
    if under_a_symlink(&path, symlinks) {
        return Err(unsafe_("is placed through a symlink of the archive"));
    }
    use tar::EntryType::*;
    match e.kind {
        Regular | Continuous | Directory | GNULongName | GNULongLink | XHeader | XGlobalHeader => {
            Ok(())
        }
        Symlink => {
            let target = e
                .link
                .as_ref()
                .ok_or_else(|| unsafe_("is a link without a target"))?;
            if link_stays_inside(&path, target, symlinks) {
                Ok(())
            } else {
                Err(unsafe_("is a symlink pointing outside the install"))
            }
        }
        Link => {
            let target = e
                .link
                .as_ref()
                .ok_or_else(|| unsafe_("is a link without a target"))?;
            is_plain_relative(target)
                .map_err(|_| unsafe_("is a hard link to outside the install"))?;
            if under_a_symlink(&names(target), symlinks) {
                return Err(unsafe_("is a hard link through a symlink of the archive"));
            }
            Ok(())
        }
        Char | Block => Err(unsafe_("is a device file")),
        Fifo => Err(unsafe_("is a FIFO")),
        _ => Err(unsafe_("has an entry type a runner release never has")),
    }
}

fn open(tarball: &Path) -> Result<tar::Archive<GzDecoder<std::fs::File>>, UnpackError> {
    let f = std::fs::File::open(tarball)
        .map_err(|e| UnpackError::Io(format!("opening {}: {e}", tarball.display())))?;
    let mut a = tar::Archive::new(GzDecoder::new(f));
    // Runner releases are unpacked by the daemon's user: never chown, never setuid.
    a.set_preserve_ownerships(false);
    a.set_preserve_permissions(false);
    a.set_unpack_xattrs(false);
    a.set_overwrite(false);
    Ok(a)
}

/// Unpacks `tarball` into the existing empty directory `into`. The whole archive is
/// checked in a first pass, so a refused archive writes nothing.
pub fn unpack_safely(tarball: &Path, into: &Path) -> Result<(), UnpackError> {
    let damaged = |e: std::io::Error| UnpackError::Damaged(e.to_string());
    let (mut count, mut bytes) = (0usize, 0u64);
    let mut seen = Vec::new();
    let mut a = open(tarball)?;
    for e in a.entries().map_err(damaged)? {
        let e = e.map_err(damaged)?;
        seen.push(read_entry(&e)?);
        count += 1;
        bytes += e.header().size().unwrap_or(0);
        if count > MAX_ENTRIES || bytes > MAX_UNPACKED_BYTES {
            return Err(UnpackError::Damaged(format!(
                "more than {MAX_ENTRIES} entries or {MAX_UNPACKED_BYTES} bytes"
            )));
        }
    }
    let symlinks: BTreeSet<PathBuf> = seen
        .iter()
        .filter(|e| e.kind == tar::EntryType::Symlink)
        .map(|e| names(&e.path))
        .collect();
    for e in &seen {
        check_entry(e, &symlinks)?;
    }
    let mut a = open(tarball)?;
    for e in a.entries().map_err(damaged)? {
        let mut e = e.map_err(damaged)?;
        // Checked again: the second read is of the same file, but cheap insurance.
        let s = read_entry(&e)?;
        if s.kind == tar::EntryType::Symlink && !symlinks.contains(&names(&s.path)) {
            return Err(UnpackError::Damaged(
                "the archive changed while read".into(),
            ));
        }
        check_entry(&s, &symlinks)?;
        // unpack_in also refuses to write through a symlink that leaves `into`.
        match e.unpack_in(into) {
            Ok(true) => {}
            Ok(false) => {
                return Err(UnpackError::Unsafe {
                    entry: s.name,
                    why: "would be written outside the install",
                });
            }
            Err(err) => return Err(UnpackError::Io(format!("unpacking {}: {err}", s.name))),
        }
    }
    Ok(())
}

fn sibling(dir: &Path, suffix: &str) -> PathBuf {
    let mut s = dir.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// What stands at a path `runner install` would write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Occupant {
    Absent,
    /// An empty directory: nothing to lose.
    Empty,
    /// A directory with [`MARKER`]: an install (or a partial one) of ours.
    Ours,
    /// Anything else: never replaced or removed.
    Foreign,
}

/// Looks at `path` without following a link there (a link is foreign).
pub fn occupant(path: &Path) -> std::io::Result<Occupant> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Occupant::Absent),
        Err(e) => return Err(e),
    };
    if !meta.is_dir() {
        return Ok(Occupant::Foreign);
    }
    let marked = std::fs::symlink_metadata(path.join(MARKER)).is_ok_and(|m| m.is_file());
    if marked {
        return Ok(Occupant::Ours);
    }
    Ok(if std::fs::read_dir(path)?.next().is_none() {
        Occupant::Empty
    } else {
        Occupant::Foreign
    })
}

/// Checks that `dir`, and the `DIR.partial` and `DIR.previous` an install uses, hold
/// nothing but an install of ours: `InstallError::NotOurs` names the first that does.
pub fn check_replaceable(dir: &Path) -> Result<(), InstallError> {
    for p in [
        dir.to_path_buf(),
        sibling(dir, ".partial"),
        sibling(dir, ".previous"),
    ] {
        match occupant(&p) {
            Ok(Occupant::Foreign) => return Err(InstallError::NotOurs(p)),
            Ok(_) => {}
            Err(e) => return Err(InstallError::Io(format!("looking at {}: {e}", p.display()))),
        }
    }
    Ok(())
}

/// Unpacks into `DIR.partial`, checks the layout (`bin/Runner.Listener`), marks it
/// ([`MARKER`]), then puts it in place: a previous install at `DIR` is moved to
/// `DIR.previous` first and removed after. Attempt roots are hard-linked copies, so
/// running runners keep their files. A `DIR` (or `DIR.partial`, `DIR.previous`) that
/// is not empty and not marked is refused before anything is written or removed.
pub fn install_tarball(tarball: &Path, dir: &Path) -> Result<(), InstallError> {
    let io = |what: &str, p: &Path, e: std::io::Error| {
        InstallError::Io(format!("{what} {}: {e}", p.display()))
    };
    check_replaceable(dir)?;
    let partial = sibling(dir, ".partial");
    let previous = sibling(dir, ".previous");
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| io("creating", parent, e))?;
    }
    // A partial tree of ours is what a crash mid-install leaves: never complete.
    if partial.exists() {
        std::fs::remove_dir_all(&partial).map_err(|e| io("removing", &partial, e))?;
    }
    std::fs::create_dir(&partial).map_err(|e| io("creating", &partial, e))?;
    let result = std::fs::write(partial.join(MARKER), b"installed by runner-manager\n")
        .map_err(|e| io("marking", &partial, e))
        .and_then(|()| unpack_safely(tarball, &partial).map_err(InstallError::from))
        .and_then(|()| {
            let listener = partial.join("bin/Runner.Listener");
            if listener.is_file() {
                share_read_only(&partial).map_err(|e| io("setting modes in", &partial, e))
            } else {
                Err(UnpackError::NotARunner("it has no bin/Runner.Listener".into()).into())
            }
        });
    if let Err(e) = result {
        let _ = std::fs::remove_dir_all(&partial);
        return Err(e);
    }
    // Checked again right before anything is moved: still ours, or nothing.
    check_replaceable(dir).inspect_err(|_| {
        let _ = std::fs::remove_dir_all(&partial);
    })?;
    if dir.exists() {
        if previous.exists() {
            std::fs::remove_dir_all(&previous).map_err(|e| io("removing", &previous, e))?;
        }
        std::fs::rename(dir, &previous).map_err(|e| io("moving aside", dir, e))?;
    }
    if let Err(e) = std::fs::rename(&partial, dir) {
        // Put the old install back rather than leave none.
        let _ = std::fs::rename(&previous, dir);
        let _ = std::fs::remove_dir_all(&partial);
        return Err(io("renaming into", dir, e));
    }
    let _ = std::fs::remove_dir_all(&previous);
    Ok(())
}

/// Makes an unpacked install readable by every runner and writable by none of them:
/// directories 0755, files 0644 or 0755 (by their owner's execute bit). Runners run
/// under their own uids and reach the install through their roots' links, while the
/// daemon's umask (077) would have left implied directories private; a file that
/// others could write would let one job change every later runner.
pub fn share_read_only(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755))?;
        for entry in std::fs::read_dir(&d)? {
            let entry = entry?;
            let meta = std::fs::symlink_metadata(entry.path())?;
            if meta.is_dir() {
                stack.push(entry.path());
            } else if meta.is_file() {
                let mode = if meta.permissions().mode() & 0o100 != 0 {
                    0o755
                } else {
                    0o644
                };
                if meta.permissions().mode() & 0o7777 != mode {
                    std::fs::set_permissions(entry.path(), std::fs::Permissions::from_mode(mode))?;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_targets() {
        let none = BTreeSet::new();
        assert!(link_stays_inside(
            Path::new("a/b/link"),
            Path::new("../c"),
            &none
        ));
        assert!(!link_stays_inside(
            Path::new("a/link"),
            Path::new("../../etc"),
            &none
        ));
        assert!(!link_stays_inside(
            Path::new("link"),
            Path::new("/etc/passwd"),
            &none
        ));
        // Through the archive's own link `x -> .`: `x/..` is the parent.
        let x: BTreeSet<PathBuf> = [PathBuf::from("x")].into();
        assert!(!link_stays_inside(Path::new("c"), Path::new("x/.."), &x));
        assert!(link_stays_inside(Path::new("c"), Path::new("x"), &x));
        assert!(link_stays_inside(Path::new("c"), Path::new("./x/."), &x));
        assert!(under_a_symlink(Path::new("x/b"), &x));
        assert!(!under_a_symlink(Path::new("x"), &x));
        assert!(is_plain_relative(Path::new("./bin/x")).is_ok());
        assert!(is_plain_relative(Path::new("bin/../../x")).is_err());
    }
}
