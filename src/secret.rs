//! Secrets (tokens, keys, JIT configs) in a type that never prints its contents, and
//! the one way a secret file is read: a regular file, private to its owner (this
//! process's user or root), bounded; and its [`FileStamp`], by which a reader sees the
//! file changed without reading it again.

use std::fmt;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// A secret string. `Debug` and `Display` print `***`; the only way to the bytes is
/// [`Secret::expose`], which makes every use of the secret easy to find with grep.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The secret itself, for the one place that must send it (a header, an env var).
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl Drop for Secret {
    fn drop(&mut self) {
        // Overwrite the bytes so a freed secret does not linger in the heap.
        // SAFETY: zero bytes are valid UTF-8.
        unsafe {
            for b in self.0.as_bytes_mut() {
                std::ptr::write_volatile(b, 0);
            }
        }
    }
}

/// The largest secret file read: a PAT is tens of bytes, an App key a few KiB.
pub const MAX_SECRET_FILE_BYTES: u64 = 64 * 1024;

/// Why a secret file was refused. Names the file and the fix, never the contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretFileError {
    /// It could not be opened or read.
    Unreadable { path: PathBuf, detail: String },
    /// A FIFO, a device, a directory: reading one could hang or read forever.
    NotRegular { path: PathBuf, kind: &'static str },
    /// Group or others may read it (or write it), as ssh refuses for private keys.
    TooOpen { path: PathBuf, mode: u32 },
    /// Larger than [`MAX_SECRET_FILE_BYTES`].
    TooLarge { path: PathBuf, bytes: u64 },
    /// Owned by a user other than this process's and root: that user (a runner's uid,
    /// say) could replace the secret under the daemon.
    WrongOwner {
        path: PathBuf,
        owner: u32,
        user: u32,
    },
}

impl fmt::Display for SecretFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretFileError::Unreadable { path, detail } => write!(
                f,
                "cannot read {} ({detail}); check the path and its permissions",
                path.display()
            ),
            SecretFileError::NotRegular { path, kind } => write!(
                f,
                "{} is a {kind}, not a regular file; put the secret in a plain file",
                path.display()
            ),
            SecretFileError::TooOpen { path, mode } => write!(
                f,
                "{} is mode {mode:04o}: group and others must not reach a secret; run chmod 600 {}",
                path.display(),
                path.display()
            ),
            SecretFileError::TooLarge { path, bytes } => write!(
                f,
                "{} is {bytes} bytes, more than a secret file holds (at most {MAX_SECRET_FILE_BYTES})",
                path.display()
            ),
            SecretFileError::WrongOwner { path, owner, user } => write!(
                f,
                "{} is owned by uid {owner}, not by this user (uid {user}) or root: uid {owner} could replace the secret; run chown {user} {} && chmod 600 {}",
                path.display(),
                path.display(),
                path.display()
            ),
        }
    }
}

impl std::error::Error for SecretFileError {}

/// Reads a token or key file. It is opened without blocking (a FIFO would otherwise
/// hang the caller until someone writes to it), must be a regular file that neither
/// group nor others can read or write, and is read to at most
/// [`MAX_SECRET_FILE_BYTES`]. Symbolic links are followed (systemd credentials and
/// secret managers hand files over that way); the file they reach is what is checked.
pub fn read_secret_file(path: &Path) -> Result<Secret, SecretFileError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| SecretFileError::Unreadable {
            path: path.to_path_buf(),
            detail: e.kind().to_string(),
        })?;
    let meta = file.metadata().map_err(|e| SecretFileError::Unreadable {
        path: path.to_path_buf(),
        detail: e.kind().to_string(),
    })?;
    check_secret_meta(path, &meta)?;
    let mut bytes = Vec::new();
    file.take(MAX_SECRET_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| SecretFileError::Unreadable {
            path: path.to_path_buf(),
            detail: e.kind().to_string(),
        })?;
    if bytes.len() as u64 > MAX_SECRET_FILE_BYTES {
        return Err(SecretFileError::TooLarge {
            path: path.to_path_buf(),
            bytes: meta.len(),
        });
    }
    let text = String::from_utf8(bytes).map_err(|_| SecretFileError::Unreadable {
        path: path.to_path_buf(),
        detail: "not UTF-8 text".into(),
    })?;
    Ok(Secret::new(text))
}

/// What a secret file's metadata says of its contents: any write, rename over it,
/// `chmod` or `chown` changes one of these (a write moves mtime and ctime, a rename
/// the inode, `chmod`/`chown` the ctime). Comparing two is the cheap check of whether
/// the file must be read again: a `stat`, not a read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStamp {
    pub dev: u64,
    pub ino: u64,
    pub len: u64,
    pub mtime_ns: i128,
    pub ctime_ns: i128,
}

impl FileStamp {
    pub fn of(meta: &std::fs::Metadata) -> FileStamp {
        let ns = |s: i64, n: i64| s as i128 * 1_000_000_000 + n as i128;
        FileStamp {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            mtime_ns: ns(meta.mtime(), meta.mtime_nsec()),
            ctime_ns: ns(meta.ctime(), meta.ctime_nsec()),
        }
    }
}

/// The stamp of the secret file at `path` (symbolic links followed, as
/// [`read_secret_file`] does), after the same checks a read makes: `Err` is what a
/// read would refuse now (the file went missing, became readable by others, changed
/// owner).
pub fn stamp_secret_file(path: &Path) -> Result<FileStamp, SecretFileError> {
    let meta = std::fs::metadata(path).map_err(|e| SecretFileError::Unreadable {
        path: path.to_path_buf(),
        detail: e.kind().to_string(),
    })?;
    check_secret_meta(path, &meta)?;
    Ok(FileStamp::of(&meta))
}

/// This process's effective user.
fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// The checks of [`read_secret_file`] on what `fstat` said, as this process's user.
pub fn check_secret_meta(path: &Path, meta: &std::fs::Metadata) -> Result<(), SecretFileError> {
    check_secret_meta_as(path, meta, euid())
}

/// [`check_secret_meta`] for the user `user`, pure so each case is tested.
pub fn check_secret_meta_as(
    path: &Path,
    meta: &std::fs::Metadata,
    user: u32,
) -> Result<(), SecretFileError> {
    let ft = meta.file_type();
    if !ft.is_file() {
        use std::os::unix::fs::FileTypeExt;
        let kind = if ft.is_dir() {
            "directory"
        } else if ft.is_fifo() {
            "FIFO"
        } else if ft.is_socket() {
            "socket"
        } else if ft.is_char_device() || ft.is_block_device() {
            "device"
        } else {
            "special file"
        };
        return Err(SecretFileError::NotRegular {
            path: path.to_path_buf(),
            kind,
        });
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(SecretFileError::TooOpen {
            path: path.to_path_buf(),
            mode,
        });
    }
    let owner = meta.uid();
    if owner != user && owner != 0 {
        return Err(SecretFileError::WrongOwner {
            path: path.to_path_buf(),
            owner,
            user,
        });
    }
    if meta.len() > MAX_SECRET_FILE_BYTES {
        return Err(SecretFileError::TooLarge {
            path: path.to_path_buf(),
            bytes: meta.len(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("rm-secret-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_private_regular_file_is_read() {
        let p = dir("ok").join("t");
        std::fs::write(&p, "ghp_x\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read_secret_file(&p).unwrap().expose(), "ghp_x\n");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o400)).unwrap();
        assert!(read_secret_file(&p).is_ok());
    }

    #[test]
    fn group_or_other_access_is_refused_with_the_chmod() {
        let p = dir("open").join("t");
        std::fs::write(&p, "ghp_secret").unwrap();
        for mode in [0o644, 0o640, 0o604, 0o620, 0o602] {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
            let e = read_secret_file(&p).unwrap_err();
            let msg = e.to_string();
            assert!(
                matches!(e, SecretFileError::TooOpen { .. }),
                "{mode:o}: {msg}"
            );
            assert!(msg.contains("chmod 600") && msg.contains(&p.display().to_string()));
            assert!(!msg.contains("ghp_secret"));
        }
    }

    #[test]
    fn a_fifo_is_refused_without_hanging() {
        let p = dir("fifo").join("f");
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read_secret_file(&p).unwrap_err();
        assert!(
            matches!(e, SecretFileError::NotRegular { kind: "FIFO", .. }),
            "{e}"
        );
        let d = dir("isdir");
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(matches!(
            read_secret_file(&d).unwrap_err(),
            SecretFileError::NotRegular {
                kind: "directory",
                ..
            }
        ));
    }

    #[test]
    fn missing_and_oversized_files_name_the_path() {
        let d = dir("big");
        let e = read_secret_file(&d.join("nope")).unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
        let p = d.join("big");
        std::fs::write(&p, vec![b'a'; MAX_SECRET_FILE_BYTES as usize + 1]).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(matches!(
            read_secret_file(&p).unwrap_err(),
            SecretFileError::TooLarge { .. }
        ));
    }

    #[test]
    fn a_file_owned_by_another_user_is_refused_with_the_chown() {
        let p = dir("owner").join("t");
        std::fs::write(&p, "ghp_secret").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        let meta = std::fs::metadata(&p).unwrap();
        let mine = meta.uid();
        // Judged as another user: the file is neither theirs nor root's (unless it is
        // root's, which any user accepts).
        let other = mine.wrapping_add(4242);
        assert!(check_secret_meta_as(&p, &meta, mine).is_ok());
        if mine != 0 {
            let e = check_secret_meta_as(&p, &meta, other).unwrap_err();
            assert!(matches!(e, SecretFileError::WrongOwner { .. }), "{e}");
        }
        if euid() != 0 {
            return;
        }
        // As root: a 0600 file a runner-like uid owns is refused, naming the fix.
        let nobody = 65534;
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path; -1 keeps the group.
        assert_eq!(unsafe { libc::chown(c.as_ptr(), nobody, u32::MAX) }, 0);
        let e = read_secret_file(&p).unwrap_err();
        let msg = e.to_string();
        assert!(
            matches!(
                e,
                SecretFileError::WrongOwner {
                    owner: 65534,
                    user: 0,
                    ..
                }
            ),
            "{msg}"
        );
        assert!(
            msg.contains("chown 0 ") && msg.contains(&p.display().to_string()),
            "{msg}"
        );
        assert!(!msg.contains("ghp_secret"));
        assert!(stamp_secret_file(&p).is_err());
    }

    #[test]
    fn a_stamp_changes_with_the_contents_and_the_mode_not_with_a_read() {
        let d = dir("stamp");
        let p = d.join("t");
        std::fs::write(&p, "ghp_old").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        let s0 = stamp_secret_file(&p).unwrap();
        read_secret_file(&p).unwrap();
        assert_eq!(stamp_secret_file(&p).unwrap(), s0, "a read changes nothing");
        // Written in place: the length, mtime and ctime move (a write of the same
        // length within the clock's tick moves none; a 401 re-reads the file for that).
        std::fs::write(&p, "ghp_newer").unwrap();
        let s1 = stamp_secret_file(&p).unwrap();
        assert_ne!(s1, s0);
        // Replaced by a rename, as editors and secret managers do: a new inode.
        let q = d.join("t.new");
        std::fs::write(&q, "ghp_new").unwrap();
        std::fs::set_permissions(&q, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::rename(&q, &p).unwrap();
        let s2 = stamp_secret_file(&p).unwrap();
        assert_ne!(s2.ino, s1.ino);
        // Opened to others: no stamp, the read's refusal instead.
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(
            stamp_secret_file(&p).unwrap_err(),
            SecretFileError::TooOpen { .. }
        ));
    }

    #[test]
    fn never_prints_its_value() {
        let s = Secret::new("ghp_supersecret");
        assert_eq!(format!("{s}"), "***");
        assert_eq!(format!("{s:?}"), "***");
        assert_eq!(format!("{:?}", Some(s.clone())), "Some(***)");
        assert_eq!(s.expose(), "ghp_supersecret");
    }
}
