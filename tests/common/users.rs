//! Test users for per-attempt uids: system users `rmtest<uid>` (own group, gid = uid
//! where free, home /nonexistent, no login shell) in the reserved range 61200-61999,
//! handed out in blocks that no other thread or test process holds. Included with
//! `#[path]` by the test binaries that run jobs under runner uids.
//!
//! Each uid of a block is held by an `flock` on `/tmp/rmtest-uid-<uid>.lock` for the
//! guard's lifetime (flock locks belong to the open file, so threads of one process
//! exclude each other as processes do). Users are created once and kept: creating them
//! is idempotent, and `useradd`/`groupadd` failing on the shadow-utils lock another
//! process holds is retried.

// Each test binary uses its own part of this module.
#![allow(dead_code)]

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use runner_manager::runner::{RunAsUser, UidRange, kill_uid, lookup_uid, processes_of_uid};

/// The uids tests may make users for; the package's own range must not overlap it.
pub const TEST_UIDS: UidRange = UidRange {
    start: 61200,
    end: 61999,
};

/// Says once, on the real stderr (libtest captures `eprintln!` of a passing test), that
/// `test` did not run and why. The caller returns right after.
pub fn skip(test: &str, why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
}

/// A block of test uids held for this guard's lifetime.
pub struct UidBlock {
    range: UidRange,
    _locks: Vec<File>,
}

impl UidBlock {
    pub fn range(&self) -> UidRange {
        self.range
    }

    pub fn uids(&self) -> Vec<u32> {
        self.range.iter().collect()
    }

    /// The user of the block's `i`th uid, looked up as the daemon would.
    pub fn user(&self, i: u32) -> RunAsUser {
        assert!(
            i < self.range.len(),
            "the block has {} uids",
            self.range.len()
        );
        let uid = self.range.start + i;
        lookup_uid(uid)
            .expect("passwd lookup")
            .unwrap_or_else(|| panic!("test user {} vanished", user_name(uid)))
    }
}

pub fn user_name(uid: u32) -> String {
    format!("rmtest{uid}")
}

/// A block of `n` test uids with users, or `None` where that cannot be had (not root,
/// no useradd). Use [`try_runner_uids`] to say why in a `SKIPPED` line.
pub fn runner_uids(n: u32) -> Option<UidBlock> {
    try_runner_uids(n).ok()
}

/// Like [`runner_uids`], with the reason when no block can be had.
pub fn try_runner_uids(n: u32) -> Result<UidBlock, String> {
    assert!((1..=100).contains(&n), "ask for 1 to 100 uids, not {n}");
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("creating test users needs root".into());
    }
    for tool in ["useradd", "groupadd"] {
        if find_tool(tool).is_none() {
            return Err(format!("{tool} is not installed"));
        }
    }
    let mut start = TEST_UIDS.start;
    while start + n - 1 <= TEST_UIDS.end {
        match try_block(start, n)? {
            Ok(block) => return Ok(block),
            // Skip past the uid that is held or taken.
            Err(taken) => start = taken + 1,
        }
    }
    Err(format!(
        "no {n} consecutive free uids left in {TEST_UIDS} (other tests hold them, or other users own them)"
    ))
}

/// Locks `start..start+n` and makes their users; `Ok(Err(uid))` names a uid that is held
/// by someone else or belongs to a user that is not ours.
fn try_block(start: u32, n: u32) -> Result<Result<UidBlock, u32>, String> {
    let mut locks = Vec::with_capacity(n as usize);
    for uid in start..start + n {
        let Some(lock) = lock_uid(uid)? else {
            return Ok(Err(uid));
        };
        locks.push(lock);
        if !uid_is_ours_or_free(uid) {
            return Ok(Err(uid));
        }
    }
    for uid in start..start + n {
        ensure_user(uid)?;
        clear_leftovers(uid)?;
    }
    Ok(Ok(UidBlock {
        range: UidRange {
            start,
            end: start + n - 1,
        },
        _locks: locks,
    }))
}

fn lock_uid(uid: u32) -> Result<Option<File>, String> {
    let path = format!("/tmp/rmtest-uid-{uid}.lock");
    let f = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&path)
        .map_err(|e| format!("opening {path}: {e}"))?;
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(Some(f));
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(None)
    } else {
        Err(format!("locking {path}: {e}"))
    }
}

/// The uid has no user, or it is our `rmtest<uid>`; its gid likewise (or any group we
/// can fall back from).
fn uid_is_ours_or_free(uid: u32) -> bool {
    match lookup_uid(uid) {
        Ok(Some(u)) => u.name == user_name(uid),
        Ok(None) => true,
        Err(_) => false,
    }
}

/// The group with this gid, from /etc/group (test hosts use files for NSS).
fn group_of_gid(gid: u32) -> Option<String> {
    let text = std::fs::read_to_string("/etc/group").ok()?;
    text.lines().find_map(|l| {
        let mut f = l.split(':');
        let name = f.next()?;
        let _pw = f.next()?;
        (f.next()?.parse::<u32>().ok()? == gid).then(|| name.to_string())
    })
}

fn group_exists(name: &str) -> bool {
    std::fs::read_to_string("/etc/group")
        .is_ok_and(|t| t.lines().any(|l| l.split(':').next() == Some(name)))
}

fn find_tool(name: &str) -> Option<String> {
    ["/usr/sbin", "/sbin", "/usr/bin", "/bin"]
        .iter()
        .map(|d| format!("{d}/{name}"))
        .find(|p| Path::new(p).exists())
}

/// Creates `rmtest<uid>` (and its group) unless it exists. We hold the uid's lock, so
/// only another process's useradd of another uid can race us, on the passwd lock.
fn ensure_user(uid: u32) -> Result<(), String> {
    let name = user_name(uid);
    if lookup_uid(uid).ok().flatten().is_some() {
        return Ok(());
    }
    // Own group, gid = uid when that gid is free (a crashed run may have left the group).
    let gid_arg = match group_of_gid(uid) {
        None => {
            run_shadow_tool(
                "groupadd",
                &["--system", "--gid", &uid.to_string(), &name],
                || group_exists(&name),
            )?;
            uid.to_string()
        }
        Some(g) if g == name => uid.to_string(),
        Some(_) => {
            if !group_exists(&name) {
                run_shadow_tool("groupadd", &["--system", &name], || group_exists(&name))?;
            }
            name.clone()
        }
    };
    let shell = if Path::new("/usr/sbin/nologin").exists() {
        "/usr/sbin/nologin"
    } else {
        "/bin/false"
    };
    let uid_s = uid.to_string();
    run_shadow_tool(
        "useradd",
        &[
            "--system",
            "--uid",
            &uid_s,
            "--gid",
            &gid_arg,
            "--no-create-home",
            "--home-dir",
            "/nonexistent",
            "--shell",
            shell,
            &name,
        ],
        || lookup_uid(uid).ok().flatten().is_some(),
    )
}

/// Runs a shadow-utils tool, retrying (bounded, jittered) while it fails and `done`
/// does not hold: the usual failure is another process holding /etc/passwd's lock.
fn run_shadow_tool(tool: &str, args: &[&str], done: impl Fn() -> bool) -> Result<(), String> {
    let path = find_tool(tool).ok_or_else(|| format!("{tool} is not installed"))?;
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut attempt = 0u64;
    loop {
        let out = Command::new(&path)
            .args(args)
            .output()
            .map_err(|e| format!("running {tool}: {e}"))?;
        if out.status.success() || done() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "{tool} {} kept failing: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        attempt += 1;
        // Jitter by pid so racing processes do not retry in step.
        let ms = 20 + (u64::from(std::process::id()) * 7 + attempt * 13) % 80;
        std::thread::sleep(Duration::from_millis(ms));
    }
}

/// A crashed earlier run may have left processes of this uid; a block is handed out clean.
fn clear_leftovers(uid: u32) -> Result<(), String> {
    if processes_of_uid(uid).is_empty() {
        return Ok(());
    }
    let gid = lookup_uid(uid).ok().flatten().map_or(uid, |u| u.gid);
    kill_uid(uid, gid).map_err(|e| format!("clearing uid {uid}: {e}"))?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while !processes_of_uid(uid).is_empty() {
        if Instant::now() >= deadline {
            return Err(format!(
                "processes {:?} of uid {uid} survive SIGKILL",
                processes_of_uid(uid)
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}
