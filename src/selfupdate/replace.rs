//! Putting a verified binary in place: staged as a new file beside the running one
//! (same directory, so the rename is atomic and never crosses a filesystem), given the
//! old one's mode, synced, run once with `--version`, then renamed over it and the
//! directory synced. Until the rename the old binary is untouched; after it, a
//! process that had it open keeps running the old inode.

use super::UpdateError;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long the staged binary's `--version` may take.
const PROBE_LIMIT: Duration = Duration::from_secs(10);

/// The running binary's path with every link resolved: the file a rename replaces (a
/// symlink such as `/usr/local/bin/runner-manager -> /opt/…` stays as it is).
pub fn current_exe() -> Result<PathBuf, UpdateError> {
    std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .map_err(|e| UpdateError::Io(format!("cannot tell where this binary is: {e}")))
}

/// Where the new binary is staged: a hidden name beside `exe`, unique to this process.
pub fn staging_path(exe: &Path) -> PathBuf {
    let name = exe
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "runner-manager".into());
    exe.with_file_name(format!(".{name}.update-{}", std::process::id()))
}

/// Refuses, before anything is fetched, when this user cannot write `exe`'s directory
/// (where the new binary is staged and renamed).
pub fn check_writable(exe: &Path) -> Result<(), UpdateError> {
    use std::os::unix::ffi::OsStrExt;
    let dir = exe.parent().unwrap_or(Path::new("/"));
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| UpdateError::Io(format!("{} has a NUL byte", dir.display())))?;
    // SAFETY: a valid NUL-terminated path; faccessat only reads it.
    let rc = unsafe { libc::faccessat(libc::AT_FDCWD, c.as_ptr(), libc::W_OK, libc::AT_EACCESS) };
    if rc != 0 {
        return Err(UpdateError::Io(format!(
            "cannot write {} ({}), where {} is replaced: run update as the user who may              (sudo runner-manager update); nothing changed",
            dir.display(),
            std::io::Error::last_os_error(),
            exe.display()
        )));
    }
    Ok(())
}

/// Gives the staged file `exe`'s mode, syncs it and runs it once with `--version`: a
/// binary for another architecture, or a truncated one, is refused here, and so is one
/// whose own version is not the `version` `SHA256SUMS` lists it as (trusting the name
/// would install it, and `update --check` would then offer it for ever). Returns what
/// it printed. The staged file is removed on failure.
pub fn prepare(staged: &Path, exe: &Path, version: &str) -> Result<String, UpdateError> {
    let result = (|| {
        let mode = std::fs::metadata(exe)
            .map_err(|e| UpdateError::Io(format!("cannot read {}: {e}", exe.display())))?
            .permissions()
            .mode()
            & 0o7777;
        std::fs::set_permissions(staged, std::fs::Permissions::from_mode(mode))
            .and_then(|()| std::fs::File::open(staged)?.sync_all())
            .map_err(|e| UpdateError::Io(format!("cannot prepare {}: {e}", staged.display())))?;
        let said = probe(staged)?;
        if said.split_whitespace().nth(1) != Some(version) {
            return Err(UpdateError::Probe(format!(
                "the binary listed as {version} says it is {said:?}: refused, the running binary \
                 is unchanged; the release source's file names and SHA256SUMS do not match its \
                 binaries"
            )));
        }
        Ok(said)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(staged);
    }
    result
}

/// Runs `bin --version` with a deadline; it must exit 0 and say `runner-manager …`.
fn probe(bin: &Path) -> Result<String, UpdateError> {
    let refuse = |why: String| {
        UpdateError::Probe(format!(
            "the new binary does not run here ({why}): refused, the running binary is unchanged; \
             check that the release is for {}",
            super::release::target()
        ))
    };
    let mut child = Command::new(bin)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| refuse(e.to_string()))?;
    let deadline = Instant::now() + PROBE_LIMIT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok(None) | Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(refuse(format!(
                    "--version did not answer within {}s",
                    PROBE_LIMIT.as_secs()
                )));
            }
        }
    };
    let mut out = String::new();
    if let Some(mut s) = child.stdout.take() {
        use std::io::Read;
        let _ = s.read_to_string(&mut out);
    }
    let line = out.lines().next().unwrap_or("").trim().to_string();
    if !status.success() || !line.starts_with("runner-manager ") {
        return Err(refuse(format!("--version: {status}, {line:?}")));
    }
    Ok(line)
}

/// Renames `staged` over `exe` and syncs the directory, so the new name survives a
/// crash. The staged file is removed if the rename fails.
pub fn swap(staged: &Path, exe: &Path) -> Result<(), UpdateError> {
    if let Err(e) = std::fs::rename(staged, exe) {
        let _ = std::fs::remove_file(staged);
        return Err(UpdateError::Io(format!(
            "cannot replace {}: {e}; the running binary is unchanged",
            exe.display()
        )));
    }
    if let Some(dir) = exe.parent() {
        // The rename is done; a directory that cannot be synced only loses durability.
        let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
    }
    Ok(())
}
