//! Host-wide claims on runner uids: a runner uid belongs to one daemon on a host.
//!
//! Two daemons have two state directories, so the claim lives where the host shares
//! it: `LOCK_DIR` (`/run/runner-manager`, or `$RUNNER_MANAGER_LOCK_DIR`, which tests
//! and unusual hosts set). One file, `runner-uids.lock`, holds every claim as an
//! open-file-description lock (`F_OFD_SETLK`) on the byte range `[start, end + 1)` of
//! the daemon's uid range: two ranges conflict exactly when they overlap, one
//! descriptor holds a range of any size (a lock per uid would need 65,536 of them),
//! and the kernel drops it when the daemon dies, SIGKILL included. Beside it,
//! `runner-uids.d/<start>-<end>` names the holder (pid, state directory) so a refusal
//! can say who; the lock, not the note, is the truth (a note whose range no lock
//! holds is stale). A daemon takes its range at start (refused: exit 7 naming the
//! holder) and again when `runner_uids` changes; `host set runner_uids=` checks it
//! first (refused: exit 2, nothing written).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::uid::UidRange;

/// The variable that moves the claims' directory (tests, hosts without `/run`).
pub const LOCK_DIR_ENV: &str = "RUNNER_MANAGER_LOCK_DIR";
/// Where the claims live unless `LOCK_DIR_ENV` says otherwise.
pub const DEFAULT_LOCK_DIR: &str = "/run/runner-manager";

const LOCK_FILE: &str = "runner-uids.lock";
const NOTES: &str = "runner-uids.d";

/// The claims' directory: `$RUNNER_MANAGER_LOCK_DIR`, else `/run/runner-manager`.
pub fn lock_dir() -> PathBuf {
    match std::env::var_os(LOCK_DIR_ENV) {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(DEFAULT_LOCK_DIR),
    }
}

/// Why a range could not be claimed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimError {
    /// Another daemon holds (part of) the range; `holder` says who, as its note does.
    Held {
        wanted: UidRange,
        held: UidRange,
        holder: String,
    },
    /// The claims' directory or file could not be used.
    Io { path: PathBuf, error: String },
}

impl std::fmt::Display for ClaimError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClaimError::Held {
                wanted,
                held,
                holder,
            } => write!(
                f,
                "runner uids {wanted} overlap uids {held}, which another daemon on this host holds \
                 ({holder}); give each daemon its own runner_uids range"
            ),
            ClaimError::Io { path, error } => {
                write!(f, "cannot claim runner uids in {}: {error}", path.display())
            }
        }
    }
}

impl std::error::Error for ClaimError {}

/// Pure: the text of a holder's note.
pub fn note_text(pid: u32, state_dir: &Path) -> String {
    format!("pid {pid}, state dir {}", state_dir.display())
}

/// How long a claim whose noted holder is dead is waited for.
const DEAD_HOLDER_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Pure: the pid a note names.
pub fn holder_pid(text: &str) -> Option<i32> {
    text.strip_prefix("pid ")?
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
        .filter(|p| *p > 0)
}

fn pid_gone(pid: i32) -> bool {
    // SAFETY: kill with signal 0 only checks that the process exists.
    let rc = unsafe { libc::kill(pid, 0) };
    rc != 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

/// Pure: the range a note's file name (`<start>-<end>`) names.
pub fn note_range(name: &str) -> Option<UidRange> {
    UidRange::parse(name).ok()
}

/// Pure: the state directory a note names.
pub fn note_state_dir(text: &str) -> Option<&str> {
    text.split_once(", state dir ").map(|(_, d)| d.trim_end())
}

/// Pure: whether two ranges share a uid.
pub fn overlap(a: UidRange, b: UidRange) -> bool {
    a.start <= b.end && b.start <= a.end
}

/// Pure: the parts of `old` that `new` does not cover (at most two).
pub fn uncovered(old: UidRange, new: UidRange) -> Vec<UidRange> {
    if !overlap(old, new) {
        return vec![old];
    }
    let mut out = Vec::new();
    if old.start < new.start {
        out.push(UidRange {
            start: old.start,
            end: new.start - 1,
        });
    }
    if old.end > new.end {
        out.push(UidRange {
            start: new.end + 1,
            end: old.end,
        });
    }
    out
}

fn flock_of(kind: libc::c_int, r: UidRange) -> libc::flock {
    // SAFETY: flock is plain data.
    let mut l: libc::flock = unsafe { std::mem::zeroed() };
    l.l_type = kind as libc::c_short;
    l.l_whence = libc::SEEK_SET as libc::c_short;
    l.l_start = r.start as libc::off_t;
    l.l_len = (r.end as libc::off_t) - (r.start as libc::off_t) + 1;
    l
}

/// The lock that conflicts with a write lock on `r` by `file`'s description, if any,
/// as the range it covers.
fn conflict(file: &File, r: UidRange) -> io::Result<Option<UidRange>> {
    let mut l = flock_of(libc::F_WRLCK, r);
    // SAFETY: an fcntl on our descriptor with a valid flock.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_GETLK, &mut l) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if l.l_type == libc::F_UNLCK as libc::c_short {
        return Ok(None);
    }
    let start = l.l_start.max(0) as u64;
    let end = if l.l_len <= 0 {
        u32::MAX as u64
    } else {
        start + l.l_len as u64 - 1
    };
    Ok(Some(UidRange {
        start: start.min(u32::MAX as u64) as u32,
        end: end.min(u32::MAX as u64) as u32,
    }))
}

fn set_lock(file: &File, kind: libc::c_int, r: UidRange) -> io::Result<()> {
    let l = flock_of(kind, r);
    // SAFETY: an fcntl on our descriptor with a valid flock.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &l) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn open_lock(dir: &Path) -> Result<File, ClaimError> {
    let io_err = |path: &Path, e: io::Error| ClaimError::Io {
        path: path.to_path_buf(),
        error: e.to_string(),
    };
    std::fs::create_dir_all(dir.join(NOTES)).map_err(|e| io_err(dir, e))?;
    let path = dir.join(LOCK_FILE);
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
        .open(&path)
        .map_err(|e| io_err(&path, e))
}

/// Who holds `held`, from the note of exactly that range (a daemon's lock covers
/// exactly the range it claimed); "holder unknown" without one.
fn holder_of(dir: &Path, held: UidRange) -> String {
    match std::fs::read_to_string(dir.join(NOTES).join(held.to_string())) {
        Ok(t) if !t.trim().is_empty() => t.trim().to_string(),
        _ => "holder unknown".into(),
    }
}

/// A daemon's claim on its runner uids; dropped (or the process dead), it is gone.
#[derive(Debug)]
pub struct UidClaim {
    dir: PathBuf,
    file: File,
    state_dir: PathBuf,
    held: Option<UidRange>,
}

impl UidClaim {
    /// Opens the claims' file in `dir` for the daemon of `state_dir`; holds nothing yet.
    pub fn open(dir: &Path, state_dir: &Path) -> Result<UidClaim, ClaimError> {
        let file = open_lock(dir)?;
        Ok(UidClaim {
            dir: dir.to_path_buf(),
            file,
            state_dir: std::fs::canonicalize(state_dir).unwrap_or_else(|_| state_dir.into()),
            held: None,
        })
    }

    /// The range held now.
    pub fn held(&self) -> Option<UidRange> {
        self.held
    }

    /// Holds `range` (and from then on only it): the new range is locked before the
    /// rest of the old one is let go, so a change never leaves a uid unclaimed. On a
    /// refusal, the old claim is kept whole.
    pub fn claim(&mut self, range: UidRange) -> Result<(), ClaimError> {
        if self.held == Some(range) {
            return Ok(());
        }
        let io_err = |e: io::Error| ClaimError::Io {
            path: self.dir.join(LOCK_FILE),
            error: e.to_string(),
        };
        // A daemon SIGKILLed while a child it forked had not yet exec'd (or exited)
        // leaves its lock with that child a moment: while the holder is dead, wait.
        let deadline = std::time::Instant::now() + DEAD_HOLDER_WAIT;
        loop {
            match set_lock(&self.file, libc::F_WRLCK, range) {
                Ok(()) => break,
                Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EACCES)) => {
                    let held = conflict(&self.file, range)
                        .map_err(io_err)?
                        .unwrap_or(range);
                    let holder = holder_of(&self.dir, held);
                    if holder_pid(&holder).is_some_and(pid_gone)
                        && std::time::Instant::now() < deadline
                    {
                        std::thread::sleep(std::time::Duration::from_millis(50));
                        continue;
                    }
                    return Err(ClaimError::Held {
                        wanted: range,
                        held,
                        holder,
                    });
                }
                Err(e) => return Err(io_err(e)),
            }
        }
        if let Some(old) = self.held {
            for r in uncovered(old, range) {
                let _ = set_lock(&self.file, libc::F_UNLCK, r);
            }
            let _ = std::fs::remove_file(self.dir.join(NOTES).join(old.to_string()));
        }
        self.held = Some(range);
        let note = self.dir.join(NOTES).join(range.to_string());
        let tmp = self
            .dir
            .join(NOTES)
            .join(format!(".{range}.{}", std::process::id()));
        let text = note_text(std::process::id(), &self.state_dir);
        if std::fs::write(&tmp, text)
            .and_then(|()| std::fs::rename(&tmp, &note))
            .is_err()
        {
            let _ = std::fs::remove_file(&tmp);
        }
        Ok(())
    }

    /// Lets go of whatever is held.
    pub fn release(&mut self) {
        if let Some(old) = self.held.take() {
            let _ = set_lock(&self.file, libc::F_UNLCK, old);
            let _ = std::fs::remove_file(self.dir.join(NOTES).join(old.to_string()));
        }
    }
}

impl Drop for UidClaim {
    fn drop(&mut self) {
        self.release();
    }
}

/// Whether a daemon other than the one of `state_dir` holds any uid of `range` now
/// (for `host set runner_uids=`: the daemon of `state_dir` itself will move its own
/// claim). Every live lock over the range is looked at in turn; its holder is the note
/// of exactly its range. A claims' directory that does not exist holds nothing.
pub fn check(dir: &Path, state_dir: &Path, range: UidRange) -> Result<(), ClaimError> {
    let path = dir.join(LOCK_FILE);
    if !path.exists() {
        return Ok(());
    }
    let mine = std::fs::canonicalize(state_dir).unwrap_or_else(|_| state_dir.into());
    let io_err = |e: io::Error| ClaimError::Io {
        path: path.clone(),
        error: e.to_string(),
    };
    let file = File::open(&path).map_err(io_err)?;
    let mut from = range.start;
    loop {
        let rest = UidRange {
            start: from,
            end: range.end,
        };
        let Some(held) = conflict(&file, rest).map_err(io_err)? else {
            return Ok(());
        };
        let holder = holder_of(dir, held);
        if note_state_dir(&holder).is_none_or(|d| Path::new(d) != mine) {
            return Err(ClaimError::Held {
                wanted: range,
                held,
                holder,
            });
        }
        if held.end >= range.end {
            return Ok(());
        }
        from = held.end + 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(s: &str) -> UidRange {
        UidRange::parse(s).unwrap()
    }

    #[test]
    fn ranges_overlap_and_leave_parts_uncovered() {
        assert!(overlap(r("10-20"), r("20-30")));
        assert!(overlap(r("10-20"), r("12-13")));
        assert!(!overlap(r("10-20"), r("21-30")));
        assert_eq!(
            uncovered(r("10-20"), r("12-15")),
            vec![r("10-11"), r("16-20")]
        );
        assert_eq!(uncovered(r("10-20"), r("5-25")), vec![]);
        assert_eq!(uncovered(r("10-20"), r("15-30")), vec![r("10-14")]);
        assert_eq!(uncovered(r("10-20"), r("30-40")), vec![r("10-20")]);
    }

    #[test]
    fn notes_name_their_holder() {
        let t = note_text(42, Path::new("/var/lib/runner-manager"));
        assert_eq!(t, "pid 42, state dir /var/lib/runner-manager");
        assert_eq!(note_state_dir(&t), Some("/var/lib/runner-manager"));
        assert_eq!(holder_pid(&t), Some(42));
        assert_eq!(holder_pid("holder unknown"), None);
        assert_eq!(note_range("61000-61009"), Some(r("61000-61009")));
        assert_eq!(note_range(".61000-61009.7"), None);
    }

    #[test]
    fn overlapping_claims_conflict_and_a_change_keeps_what_it_can() {
        let dir = std::env::temp_dir().join(format!("rm-claims-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (sa, sb) = (dir.join("a"), dir.join("b"));
        std::fs::create_dir_all(&sa).unwrap();
        std::fs::create_dir_all(&sb).unwrap();
        let mut a = UidClaim::open(&dir, &sa).unwrap();
        let mut b = UidClaim::open(&dir, &sb).unwrap();
        a.claim(r("100-109")).unwrap();
        b.claim(r("110-119")).unwrap();
        let err = b.claim(r("105-119")).unwrap_err();
        match &err {
            ClaimError::Held { held, holder, .. } => {
                assert_eq!(*held, r("100-109"));
                assert!(
                    holder.contains(&format!("pid {}", std::process::id())),
                    "{holder}"
                );
                assert!(holder.contains("/a"), "{holder}");
            }
            other => panic!("{other:?}"),
        }
        // Refused: b still holds what it held.
        assert_eq!(b.held(), Some(r("110-119")));
        assert!(a.claim(r("115-120")).is_err());
        // host set's check: b's own state directory may take its own range, not a's.
        assert!(check(&dir, &sb, r("110-119")).is_ok());
        assert!(check(&dir, &sa, r("118-125")).is_err());
        assert!(check(&dir, &sb, r("100-100")).is_err());
        assert!(check(&dir, &sb, r("120-130")).is_ok());
        // A stale note (its daemon SIGKILLed) over b's range names nobody: b's own
        // lock is b's.
        std::fs::write(
            dir.join(NOTES).join("108-125"),
            "pid 2147483000, state dir /gone",
        )
        .unwrap();
        assert!(check(&dir, &sb, r("110-119")).is_ok());
        assert!(check(&dir, &sb, r("121-125")).is_ok());
        // a moves within and beyond its range: nothing it still wants is let go.
        a.claim(r("95-104")).unwrap();
        assert!(b.claim(r("105-119")).is_ok());
        assert!(b.claim(r("104-119")).is_err());
        drop(a);
        assert!(b.claim(r("90-119")).is_ok());
        assert!(check(&dir, &sa, r("90-90")).is_err());
        drop(b);
        assert!(
            check(&dir, &sa, r("90-119")).is_ok(),
            "a stale note holds nothing"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
