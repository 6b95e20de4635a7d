//! Per-attempt runner identities: the host's uid range, picking a free uid, finding and killing every process of a uid.
//!
//! A uid used by one attempt at a time is an exact handle on everything that attempt
//! started, even where there is no cgroup to kill: `kill_uid` signals as that uid, which
//! reaches its processes and nothing else.

use std::collections::BTreeSet;
use std::io;

use super::user::{PwKey, RunAsUser, lookup_passwd};

pub use crate::domain::UidRange;

/// The passwd entry of `uid` with its groups (`getpwuid_r` + `getgrouplist`); `Ok(None)`
/// when the uid has no entry.
pub fn lookup_uid(uid: u32) -> Result<Option<RunAsUser>, io::Error> {
    lookup_passwd(PwKey::Uid(uid))
}

/// Pure: the lowest uid of `range` that is not `held` and is `usable` (the caller's
/// test: it has a passwd entry and nothing runs as it).
pub fn pick_uid(
    range: UidRange,
    held: &BTreeSet<u32>,
    mut usable: impl FnMut(u32) -> bool,
) -> Option<u32> {
    range.iter().find(|u| !held.contains(u) && usable(*u))
}

/// The real, effective, saved and filesystem uids of a /proc/PID/status text, and
/// whether the process is a zombie (or dead), which runs nothing and cannot be killed.
fn status_uids(status: &str) -> Option<([u32; 4], bool)> {
    let mut uids = None;
    let mut gone = false;
    for line in status.lines() {
        if let Some(rest) = line.strip_prefix("State:") {
            gone = matches!(rest.trim_start().chars().next(), Some('Z' | 'X'));
        } else if let Some(rest) = line.strip_prefix("Uid:") {
            let v: Vec<u32> = rest
                .split_whitespace()
                .filter_map(|n| n.parse().ok())
                .collect();
            uids = <[u32; 4]>::try_from(v).ok();
        }
    }
    uids.map(|u| (u, gone))
}

/// Live processes any of whose uids (real, effective, saved, fs) is `uid`, ascending.
/// Zombies are left out: they run nothing, and only their parent can remove them.
pub fn processes_of_uid(uid: u32) -> Vec<i32> {
    let mut out = Vec::new();
    scan_proc(|pid, uids| {
        if uids.contains(&uid) {
            out.push(pid);
        }
    });
    out.sort_unstable();
    out
}

/// The prefix of every daemon's cgroup base (`runner-manager-<tag>`, as `cgroup`
/// names it); the systemd unit's own cgroup (`runner-manager.service`) is not one.
const BASE_PREFIX: &str = "runner-manager-";

/// Pure: the cgroup base of another daemon that a `/proc/PID/cgroup` text places the
/// process in (a path component `runner-manager-<tag>` whose tag is not `our_tag`), if
/// any. A process in no daemon's base, or in ours, gives `None`.
pub fn foreign_base(cgroup: &str, our_tag: &str) -> Option<String> {
    let ours = format!("{BASE_PREFIX}{our_tag}");
    cgroup.lines().find_map(|l| {
        let path = l.splitn(3, ':').nth(2)?;
        path.split('/')
            .find(|c| c.starts_with(BASE_PREFIX) && *c != ours)
            .map(str::to_string)
    })
}

/// The processes of `uid` that live in another daemon's cgroup base (see
/// [`foreign_base`]), with that base: not ours to signal, whatever uid they run as.
pub fn foreign_processes(uid: u32, our_tag: &str) -> Vec<(i32, String)> {
    processes_of_uid(uid)
        .into_iter()
        .filter_map(|pid| {
            let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
            foreign_base(&text, our_tag).map(|b| (pid, b))
        })
        .collect()
}

/// The uids of `range` some live process runs as: one /proc scan for a whole range.
pub fn busy_uids(range: UidRange) -> BTreeSet<u32> {
    let mut out = BTreeSet::new();
    scan_proc(|_, uids| out.extend(uids.iter().copied().filter(|u| range.contains(*u))));
    out
}

fn scan_proc(mut f: impl FnMut(i32, &[u32; 4])) {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        // A process that exits meanwhile has no status: skipped.
        let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
            continue;
        };
        if let Some((uids, false)) = status_uids(&status) {
            f(pid, &uids);
        }
    }
}

/// `struct __user_cap_header_struct`.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

/// `struct __user_cap_data_struct`; version 3 takes two.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

// Exit codes of the killing child, one per step, so the parent can say what failed.
const STEP_SETGROUPS: i32 = 10;
const STEP_SETRESGID: i32 = 11;
const STEP_SETRESUID: i32 = 12;
const STEP_CHECK_IDS: i32 = 13;
const STEP_CAPS: i32 = 14;
const STEP_BODY: i32 = 15;

/// Kills every process of `uid`, exactly: a forked child becomes `uid` (groups `gid`
/// only, no capabilities) and calls `kill(-1, SIGKILL)`, which on Linux signals every
/// process the caller may signal except itself, under the task list lock, so a process
/// forking meanwhile cannot escape. Refuses uid 0 and this process's own uids. Needs
/// CAP_SETUID and CAP_SETGID (root).
pub fn kill_uid(uid: u32, gid: u32) -> io::Result<()> {
    as_uid(uid, gid, "killing the processes", || {
        // ESRCH: nothing of this uid is running, which is what we want.
        // SAFETY: a raw syscall; reads errno of this thread.
        unsafe {
            if libc::syscall(libc::SYS_kill, -1 as libc::pid_t, libc::SIGKILL) != 0
                && *libc::__errno_location() != libc::ESRCH
            {
                return STEP_BODY;
            }
        }
        0
    })
}

/// Runs `body` in a forked child that has become `uid` (groups `gid` only, no
/// capabilities), and waits for it: what `body` does, the uid itself could have done,
/// and nothing more. `body` returns the child's exit code (0: done); it runs in the
/// child of a threaded process, so it may only make raw, async-signal-safe syscalls
/// over memory prepared before the call: no allocation, no locks. Refuses uid 0 and
/// this process's own uids. Needs CAP_SETUID and CAP_SETGID (root). `what` names the
/// work in the error.
pub fn as_uid(uid: u32, gid: u32, what: &str, body: impl FnOnce() -> i32) -> io::Result<()> {
    // SAFETY: getuid/geteuid have no preconditions.
    let (ruid, euid) = unsafe { (libc::getuid(), libc::geteuid()) };
    if uid == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("refusing {what} of uid 0 (root)"),
        ));
    }
    if uid == ruid || uid == euid {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("refusing {what} of uid {uid}: it is this process's own uid"),
        ));
    }
    // SAFETY: the child runs only raw, async-signal-safe syscalls and _exit: nothing that
    // takes a lock another thread of ours may have held at the fork.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: see above; never returns.
        unsafe {
            become_uid(uid, gid);
            libc::_exit(body())
        }
    }
    let status = loop {
        let mut status = 0;
        // SAFETY: waiting for our own child.
        let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
        if rc == pid {
            break status;
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            // Another thread's waitpid(-1) reaped it: it has run to its end.
            Some(libc::ECHILD) => return Ok(()),
            _ => return Err(e),
        }
    };
    if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        return Ok(());
    }
    let step = if libc::WIFEXITED(status) {
        match libc::WEXITSTATUS(status) {
            STEP_SETGROUPS => "setgroups",
            STEP_SETRESGID => "setresgid",
            STEP_SETRESUID => "setresuid",
            STEP_CHECK_IDS => "checking its ids after setresuid",
            STEP_CAPS => "dropping its capabilities",
            STEP_BODY => "its work",
            _ => "an unknown step",
        }
    } else {
        "running (it was killed by a signal)"
    };
    Err(io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!(
            "{what} of uid {uid}: the helper failed at {step} (it needs CAP_SETUID and CAP_SETGID: run the daemon as root)"
        ),
    ))
}

/// The helper child's first steps: become `uid`, drop every capability; on any
/// failure, exit with the step's code. Raw syscalls only (glibc's set*id wrappers
/// synchronise threads, which a forked child of a threaded process must not rely on);
/// no allocation.
unsafe fn become_uid(uid: u32, gid: u32) {
    unsafe {
        if libc::syscall(libc::SYS_setgroups, 0usize, std::ptr::null::<libc::gid_t>()) != 0 {
            libc::_exit(STEP_SETGROUPS);
        }
        if libc::syscall(libc::SYS_setresgid, gid, gid, gid) != 0 {
            libc::_exit(STEP_SETRESGID);
        }
        if libc::syscall(libc::SYS_setresuid, uid, uid, uid) != 0 {
            libc::_exit(STEP_SETRESUID);
        }
        let (mut r, mut e, mut s): (libc::uid_t, libc::uid_t, libc::uid_t) = (0, 0, 0);
        let rc = libc::syscall(
            libc::SYS_getresuid,
            &mut r as *mut libc::uid_t,
            &mut e as *mut libc::uid_t,
            &mut s as *mut libc::uid_t,
        );
        if rc != 0 || r != uid || e != uid || s != uid {
            libc::_exit(STEP_CHECK_IDS);
        }
        // Leaving root clears capabilities, but a non-root daemon holding CAP_KILL (ambient)
        // would keep it across setresuid, and kill(-1) would then reach every process on
        // the host. Clear them all and check.
        let mut hdr = CapHeader {
            version: LINUX_CAPABILITY_VERSION_3,
            pid: 0,
        };
        let none = [CapData::default(); 2];
        if libc::syscall(libc::SYS_capset, &mut hdr as *mut CapHeader, none.as_ptr()) != 0 {
            libc::_exit(STEP_CAPS);
        }
        let mut got = [CapData {
            effective: u32::MAX,
            permitted: u32::MAX,
            inheritable: 0,
        }; 2];
        if libc::syscall(
            libc::SYS_capget,
            &mut hdr as *mut CapHeader,
            got.as_mut_ptr(),
        ) != 0
            || got.iter().any(|d| d.effective != 0 || d.permitted != 0)
        {
            libc::_exit(STEP_CAPS);
        }
    }
}

/// The name of a uid's user, for messages (`None` without a passwd entry).
/// How many uids of `range` have a passwd entry, counting no further than `enough`.
pub fn count_users(range: UidRange, enough: u32) -> u32 {
    let mut n = 0;
    for u in range.iter() {
        if matches!(lookup_uid(u), Ok(Some(_))) {
            n += 1;
            if n >= enough {
                break;
            }
        }
    }
    n
}

pub fn uid_name(uid: u32) -> Option<String> {
    lookup_uid(uid).ok().flatten().map(|u| u.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_lowest_free_usable_uid() {
        let r = UidRange::parse("100-104").unwrap();
        let held: BTreeSet<u32> = [100, 102].into();
        assert_eq!(pick_uid(r, &held, |_| true), Some(101));
        assert_eq!(pick_uid(r, &held, |u| u != 101), Some(103));
        assert_eq!(pick_uid(r, &held, |u| u > 200), None);
        let all: BTreeSet<u32> = r.iter().collect();
        assert_eq!(pick_uid(r, &all, |_| true), None);
        // `usable` is asked only about uids not held, in order, until one fits.
        let mut asked = Vec::new();
        pick_uid(r, &held, |u| {
            asked.push(u);
            u == 103
        });
        assert_eq!(asked, vec![101, 103]);
        assert_eq!(
            pick_uid(UidRange { start: 5, end: 1 }, &held, |_| true),
            None
        );
    }

    #[test]
    fn another_daemons_cgroup_is_foreign_and_ours_or_none_is_not() {
        let v2 = |p: &str| format!("0::{p}\n");
        let ours = "abcd1234";
        assert_eq!(
            foreign_base(&v2("/runner-manager-abcd1234/att-7"), ours),
            None
        );
        assert_eq!(
            foreign_base(
                &v2("/system.slice/runner-manager.service/runner-manager-ffff0000/att-3"),
                ours
            ),
            Some("runner-manager-ffff0000".into())
        );
        assert_eq!(foreign_base(&v2("/user.slice/session-1.scope"), ours), None);
        assert_eq!(
            foreign_base(&v2("/system.slice/runner-manager.service/daemon"), ours),
            None
        );
        // Hybrid: a v1 hierarchy names the base as well.
        let hybrid = "5:pids:/runner-manager-ffff0000/att-3\n0::/\n";
        assert_eq!(
            foreign_base(hybrid, ours),
            Some("runner-manager-ffff0000".into())
        );
        // Our own tag empty (no cgroups): every daemon's base is another's.
        assert!(foreign_base(&v2("/runner-manager-abcd1234/att-7"), "").is_some());
    }

    #[test]
    fn reads_uids_from_status() {
        let s = "Name:\tsleep\nState:\tS (sleeping)\nTgid:\t7\nUid:\t1000\t1001\t1002\t1003\nGid:\t5\t5\t5\t5\n";
        assert_eq!(status_uids(s), Some(([1000, 1001, 1002, 1003], false)));
        let z = "Name:\tsh\nState:\tZ (zombie)\nUid:\t7\t7\t7\t7\n";
        assert_eq!(status_uids(z), Some(([7, 7, 7, 7], true)));
        assert_eq!(status_uids("Name:\tx\n"), None);
        assert_eq!(status_uids("Uid:\t1 2 3\n"), None);
    }

    #[test]
    fn finds_this_process_and_refuses_root_and_self() {
        // SAFETY: getuid has no preconditions.
        let me = unsafe { libc::getuid() };
        let mine = processes_of_uid(me);
        assert!(mine.contains(&(std::process::id() as i32)), "{mine:?}");
        let err = kill_uid(0, 0).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        if me != 0 {
            assert_eq!(
                kill_uid(me, 0).unwrap_err().kind(),
                io::ErrorKind::InvalidInput
            );
        }
        let root = lookup_uid(0).unwrap().unwrap();
        assert_eq!((root.name.as_str(), root.gid), ("root", 0));
        assert!(root.groups.contains(&0));
        assert_eq!(uid_name(0).as_deref(), Some("root"));
    }
}
