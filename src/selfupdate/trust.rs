//! Whether a release directory may be trusted with root: `update` runs the binary it
//! holds (`--version`) and installs it as the daemon, so whoever can write the
//! directory, its `SHA256SUMS` or the binary can run code as the updating user. The
//! directory and each of its ancestors must be directories owned by root or the
//! updating uid that group and others cannot write (a root-owned sticky ancestor such
//! as `/tmp` is allowed: nobody else may rename what it holds); `SHA256SUMS` and the
//! binary must be regular files with the same owners and no group or other write,
//! opened without following a link or blocking on a FIFO, and the binary at most
//! [`MAX_BINARY_BYTES`]. `judge` is the pure decision over what `stat` said;
//! `check_dir` and `open` are the edges that ask.

use std::fs::File;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

/// The largest release binary accepted: ten times a release build's size, so a
/// source cannot fill the binary's filesystem through `update`.
pub const MAX_BINARY_BYTES: u64 = 256 << 20;

/// What a release path is to the source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A directory above the release directory.
    Ancestor,
    /// The release directory itself.
    Directory,
    /// `SHA256SUMS` or a binary.
    File,
}

/// What `stat` said about one path, as far as trust goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Node {
    pub kind: Kind,
    pub uid: u32,
    /// The permission bits, with the sticky bit (`0o7777`).
    pub mode: u32,
}

/// A file's type, as far as trust goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    Fifo,
    Other,
}

impl Kind {
    fn of(m: &std::fs::Metadata) -> Kind {
        let t = m.file_type();
        if t.is_file() {
            Kind::File
        } else if t.is_dir() {
            Kind::Dir
        } else if t.is_symlink() {
            Kind::Symlink
        } else if t.is_fifo() {
            Kind::Fifo
        } else {
            Kind::Other
        }
    }

    fn word(self) -> &'static str {
        match self {
            Kind::File => "a regular file",
            Kind::Dir => "a directory",
            Kind::Symlink => "a symbolic link",
            Kind::Fifo => "a FIFO",
            Kind::Other => "a device or socket",
        }
    }
}

impl Node {
    pub fn of(m: &std::fs::Metadata) -> Node {
        Node {
            kind: Kind::of(m),
            uid: m.uid(),
            mode: m.mode() & 0o7777,
        }
    }
}

/// The pure decision: `None` when `node` may be trusted in `role` by uid `me`, else
/// why not (a phrase about the path, for "PATH {why}").
pub fn judge(role: Role, node: Node, me: u32) -> Option<String> {
    let want = match role {
        Role::Ancestor | Role::Directory => Kind::Dir,
        Role::File => Kind::File,
    };
    if node.kind != want {
        return Some(format!(
            "is {}, not {}",
            node.kind.word(),
            want.word().trim_start_matches("a ")
        ));
    }
    if node.uid != 0 && node.uid != me {
        return Some(format!(
            "belongs to uid {}, not to root or the updating user (uid {me}): whoever owns it \
             could run code as uid {me}; chown root: it",
            node.uid
        ));
    }
    // A sticky ancestor (as /tmp) lets nobody but an entry's owner rename or remove it,
    // and the entry below is checked to be root's or ours.
    let sticky_ancestor = role == Role::Ancestor && node.mode & 0o1000 != 0;
    if node.mode & 0o022 != 0 && !sticky_ancestor {
        return Some(format!(
            "is mode {:04o}: group or others can write it, and so replace the release; \
             chmod go-w it",
            node.mode
        ));
    }
    None
}

/// Why a release source may not be trusted, or could not be read.
fn refused(path: &Path, why: impl std::fmt::Display) -> String {
    format!(
        "{} {why}: the release source is not trusted (update runs what it holds as uid {})",
        path.display(),
        effective_uid()
    )
}

/// The updating user.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Checks the release directory `dir` and every directory above it. `dir` must be
/// its own real path: a symbolic link on the way could be pointed elsewhere by
/// whoever owns the directory holding it.
pub fn check_dir(dir: &Path) -> Result<(), String> {
    match std::fs::canonicalize(dir) {
        Ok(real) if real == dir => {}
        Ok(real) => {
            return Err(refused(
                dir,
                format!(
                    "is reached through a symbolic link (it is {}); name the real directory",
                    real.display()
                ),
            ));
        }
        Err(e) => return Err(refused(dir, format!("cannot be read ({e})"))),
    }
    let me = effective_uid();
    let mut role = Role::Directory;
    for p in dir.ancestors() {
        let m = std::fs::symlink_metadata(p).map_err(|e| refused(p, format!("({e})")))?;
        if let Some(why) = judge(role, Node::of(&m), me) {
            return Err(refused(p, why));
        }
        role = Role::Ancestor;
    }
    Ok(())
}

/// Opens `dir/name` for reading, trusted: not through a link, without blocking (a
/// FIFO would hang the caller until someone wrote to it), and checked on the open
/// file itself, so what is read is what was checked. At most `max` bytes.
pub fn open(dir: &Path, name: &str, max: u64) -> Result<File, String> {
    let path = dir.join(name);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_NOCTTY)
        .open(&path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => refused(&path, "is a symbolic link, not a regular file"),
            _ => format!("cannot read {}: {e}", path.display()),
        })?;
    let m = file
        .metadata()
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if let Some(why) = judge(Role::File, Node::of(&m), effective_uid()) {
        return Err(refused(&path, why));
    }
    if m.len() > max {
        return Err(refused(
            &path,
            format!(
                "is {} bytes, more than the {max} a release file may be",
                m.len()
            ),
        ));
    }
    Ok(file)
}

/// Everything `host set release_source=DIR` checks, and `update` again before it reads
/// anything: the directory and its ancestors, `SHA256SUMS`, and this target's
/// binaries it lists that are there. Returns `SHA256SUMS`' text, `None` when there is
/// none yet.
pub fn audit(dir: &Path) -> Result<Option<String>, String> {
    use super::release::{MAX_SUMS_BYTES, SUMS};
    use std::io::Read;
    check_dir(dir)?;
    if !dir.join(SUMS).exists() && !is_link(dir, SUMS) {
        return Ok(None);
    }
    let mut text = String::new();
    open(dir, SUMS, MAX_SUMS_BYTES)?
        .take(MAX_SUMS_BYTES)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read {}: {e}", dir.join(SUMS).display()))?;
    for entry in super::release::parse_sums(&text, &super::release::target()) {
        if dir.join(&entry.file).exists() || is_link(dir, &entry.file) {
            open(dir, &entry.file, MAX_BINARY_BYTES)?;
        }
    }
    Ok(Some(text))
}

fn is_link(dir: &Path, name: &str) -> bool {
    std::fs::symlink_metadata(dir.join(name)).is_ok_and(|m| m.file_type().is_symlink())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: u32 = 1000;

    fn node(kind: Kind, uid: u32, mode: u32) -> Node {
        Node { kind, uid, mode }
    }

    #[test]
    fn only_root_or_the_updater_may_own_what_update_runs() {
        for role in [Role::Ancestor, Role::Directory] {
            assert_eq!(judge(role, node(Kind::Dir, 0, 0o755), ME), None);
            assert_eq!(judge(role, node(Kind::Dir, ME, 0o700), ME), None);
            let why = judge(role, node(Kind::Dir, 1001, 0o755), ME).unwrap();
            assert!(why.contains("uid 1001"), "{why}");
        }
        assert_eq!(judge(Role::File, node(Kind::File, 0, 0o755), ME), None);
        assert!(judge(Role::File, node(Kind::File, 65534, 0o644), ME).is_some());
    }

    #[test]
    fn nothing_group_or_others_can_write_is_trusted_but_a_sticky_ancestor() {
        // Issue 33: a 1777 release directory.
        let why = judge(Role::Directory, node(Kind::Dir, 0, 0o1777), ME).unwrap();
        assert!(why.contains("1777"), "{why}");
        assert!(judge(Role::Directory, node(Kind::Dir, 0, 0o775), ME).is_some());
        assert!(judge(Role::File, node(Kind::File, 0, 0o664), ME).is_some());
        assert!(judge(Role::File, node(Kind::File, ME, 0o646), ME).is_some());
        assert!(judge(Role::Ancestor, node(Kind::Dir, 0, 0o777), ME).is_some());
        // /tmp: root's and sticky, above a directory checked to be ours.
        assert_eq!(judge(Role::Ancestor, node(Kind::Dir, 0, 0o1777), ME), None);
        assert!(judge(Role::Ancestor, node(Kind::Dir, 1001, 0o1777), ME).is_some());
    }

    #[test]
    fn only_regular_files_and_directories_are_trusted() {
        let why = judge(Role::File, node(Kind::Fifo, 0, 0o644), ME).unwrap();
        assert!(why.contains("FIFO"), "{why}");
        assert!(judge(Role::File, node(Kind::Symlink, 0, 0o777), ME).is_some());
        assert!(judge(Role::File, node(Kind::Dir, 0, 0o755), ME).is_some());
        assert!(judge(Role::File, node(Kind::Other, 0, 0o644), ME).is_some());
        assert!(judge(Role::Directory, node(Kind::File, 0, 0o755), ME).is_some());
    }
}
