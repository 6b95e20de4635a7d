//! Unpacking a runner release: every entry checked before anything is written (no
//! absolute paths, no `..`, links only to places inside the install, no device files
//! or FIFOs), into `DIR.partial`, renamed into place only when whole, so a runner
//! directory that exists is always complete.

use super::InstallError;
use flate2::read::GzDecoder;
use std::fmt;
use std::path::{Component, Path, PathBuf};

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

/// Whether a symlink at `entry` pointing at `target` stays inside the install,
/// resolving `..` lexically from the link's own directory.
fn link_stays_inside(entry: &Path, target: &Path) -> bool {
    if target.is_absolute() {
        return false;
    }
    let mut depth: Vec<&std::ffi::OsStr> = Vec::new();
    let parent = entry.parent().unwrap_or(Path::new(""));
    for c in parent.components().chain(target.components()) {
        match c {
            Component::Normal(n) => depth.push(n),
            Component::CurDir => {}
            Component::ParentDir => {
                if depth.pop().is_none() {
                    return false;
                }
            }
            Component::RootDir | Component::Prefix(_) => return false,
        }
    }
    true
}

fn check_entry<R: std::io::Read>(e: &tar::Entry<'_, R>) -> Result<(), UnpackError> {
    let path = e
        .path()
        .map_err(|err| UnpackError::Damaged(format!("an entry's name does not read: {err}")))?;
    let name = path.display().to_string();
    let unsafe_ = |why| UnpackError::Unsafe {
        entry: name.clone(),
        why,
    };
    is_plain_relative(&path).map_err(unsafe_)?;
    use tar::EntryType::*;
    match e.header().entry_type() {
        Regular | Continuous | Directory | GNULongName | GNULongLink | XHeader | XGlobalHeader => {
            Ok(())
        }
        Symlink => {
            let target = e
                .link_name()
                .ok()
                .flatten()
                .ok_or_else(|| unsafe_("is a link without a target"))?;
            if link_stays_inside(&path, &target) {
                Ok(())
            } else {
                Err(unsafe_("is a symlink pointing outside the install"))
            }
        }
        Link => {
            let target = e
                .link_name()
                .ok()
                .flatten()
                .ok_or_else(|| unsafe_("is a link without a target"))?;
            is_plain_relative(&target).map_err(|_| unsafe_("is a hard link to outside the install"))
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
    let mut a = open(tarball)?;
    for e in a.entries().map_err(damaged)? {
        let e = e.map_err(damaged)?;
        check_entry(&e)?;
        count += 1;
        bytes += e.header().size().unwrap_or(0);
        if count > MAX_ENTRIES || bytes > MAX_UNPACKED_BYTES {
            return Err(UnpackError::Damaged(format!(
                "more than {MAX_ENTRIES} entries or {MAX_UNPACKED_BYTES} bytes"
            )));
        }
    }
    let mut a = open(tarball)?;
    for e in a.entries().map_err(damaged)? {
        let mut e = e.map_err(damaged)?;
        // Checked again: the second read is of the same file, but cheap insurance.
        check_entry(&e)?;
        let name = e
            .path()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        // unpack_in also refuses to write through a symlink that leaves `into`.
        match e.unpack_in(into) {
            Ok(true) => {}
            Ok(false) => {
                return Err(UnpackError::Unsafe {
                    entry: name,
                    why: "would be written outside the install",
                });
            }
            Err(err) => return Err(UnpackError::Io(format!("unpacking {name}: {err}"))),
        }
    }
    Ok(())
}

fn sibling(dir: &Path, suffix: &str) -> PathBuf {
    let mut s = dir.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// Unpacks into `DIR.partial`, checks the layout (`bin/Runner.Listener`), then puts it
/// in place: a previous install at `DIR` is moved to `DIR.previous` first and removed
/// after. Attempt roots are hard-linked copies, so running runners keep their files.
pub fn install_tarball(tarball: &Path, dir: &Path) -> Result<(), InstallError> {
    let io = |what: &str, p: &Path, e: std::io::Error| {
        InstallError::Io(format!("{what} {}: {e}", p.display()))
    };
    let partial = sibling(dir, ".partial");
    let previous = sibling(dir, ".previous");
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| io("creating", parent, e))?;
    }
    // A partial tree is what a crash mid-install leaves: never complete, safe to drop.
    if partial.exists() {
        std::fs::remove_dir_all(&partial).map_err(|e| io("removing", &partial, e))?;
    }
    std::fs::create_dir(&partial).map_err(|e| io("creating", &partial, e))?;
    let result = unpack_safely(tarball, &partial)
        .map_err(InstallError::from)
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
        assert!(link_stays_inside(Path::new("a/b/link"), Path::new("../c")));
        assert!(!link_stays_inside(
            Path::new("a/link"),
            Path::new("../../etc")
        ));
        assert!(!link_stays_inside(
            Path::new("link"),
            Path::new("/etc/passwd")
        ));
        assert!(is_plain_relative(Path::new("./bin/x")).is_ok());
        assert!(is_plain_relative(Path::new("bin/../../x")).is_err());
    }
}
