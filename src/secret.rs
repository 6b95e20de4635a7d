//! Secrets (tokens, keys, JIT configs) in a type that never prints its contents, and
//! the one way a secret file is read: a regular file, private to its owner, bounded.

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

/// The checks of [`read_secret_file`] on what `fstat` said, pure so each case is tested.
pub fn check_secret_meta(path: &Path, meta: &std::fs::Metadata) -> Result<(), SecretFileError> {
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
    fn never_prints_its_value() {
        let s = Secret::new("ghp_supersecret");
        assert_eq!(format!("{s}"), "***");
        assert_eq!(format!("{s:?}"), "***");
        assert_eq!(format!("{:?}", Some(s.clone())), "Some(***)");
        assert_eq!(s.expose(), "ghp_supersecret");
    }
}
