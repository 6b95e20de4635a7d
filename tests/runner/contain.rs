//! Containment primitives against the real kernel: per-attempt cgroups (limits, meters,
//! kill, removal) on whatever layout this host has, the v1-only path by hiding the v2
//! mount from detection, and `kill_uid` with real test users.
//!
//! These need root (and cgroups, and useradd). Where they cannot run they print one
//! `SKIPPED <test>: <why>` line and return.

use std::fs;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use runner_manager::runner::{
    AttemptCgroup, CgroupError, CgroupMode, Cgroups, Limits, RunAsUser, UidRange, kill_uid,
    lookup_uid, pick_uid, processes_of_uid,
};

use super::util::{TempDir, WAIT, wait_until};

#[path = "../common/users.rs"]
mod users;

use users::skip;

const MIB: u64 = 1 << 20;

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A per-test tag, so tests running at once (and other test processes) never share a base.
fn next_tag() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "t{}x{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Prepared cgroups under a fresh tag; on drop, every attempt left is killed and removed,
/// then the bases.
struct Contained {
    cg: Cgroups,
}

impl std::ops::Deref for Contained {
    type Target = Cgroups;
    fn deref(&self) -> &Cgroups {
        &self.cg
    }
}

impl Drop for Contained {
    fn drop(&mut self) {
        for id in self.cg.list_attempts() {
            let a = self.cg.attempt(id);
            let _ = a.kill();
            let _ = a.remove();
        }
        for base in self.cg.base_dirs() {
            let _ = fs::remove_dir(base);
        }
    }
}

/// The host's cgroups, prepared, or `None` after a SKIPPED line.
fn contained(test: &str) -> Option<Contained> {
    if !is_root() {
        skip(test, "needs root to create cgroups");
        return None;
    }
    let cg = Cgroups::detect(&next_tag());
    if cg.is_none() {
        skip(test, &cg.summary());
        return None;
    }
    cg.prepare()
        .unwrap_or_else(|e| panic!("prepare on {}: {e}", cg.summary()));
    Some(Contained { cg })
}

/// `sh -c script` with its output discarded, joined to `a` between fork and exec.
fn spawn_in(a: &AttemptCgroup, script: &str) -> Child {
    let fds = a.join_fds().expect("open cgroup.procs");
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(script)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: join_self only write(2)s to descriptors opened before the fork.
    unsafe {
        cmd.pre_exec(move || fds.join_self());
    }
    cmd.spawn().expect("spawn into the attempt's cgroup")
}

fn wait_exit(child: &mut Child, within: Duration) -> ExitStatus {
    let mut status = None;
    let done = wait_until(within, || {
        status = child.try_wait().expect("try_wait");
        status.is_some()
    });
    assert!(done, "child {} did not exit within {within:?}", child.id());
    status.unwrap()
}

/// Alive means present and not a zombie (pid 1 here may never reap orphans).
fn alive(pid: i32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        let state = s.rsplit_once(") ").map(|(_, rest)| rest.chars().next());
        !matches!(state, Some(Some('Z' | 'X')))
    })
}

fn session_of(pid: i32) -> i32 {
    // SAFETY: getsid has no memory preconditions.
    unsafe { libc::getsid(pid) }
}

/// The first of `names` that exists in one of the attempt's directories, trimmed.
fn read_limit(a: &AttemptCgroup, names: &[&str]) -> Option<String> {
    for d in a.paths() {
        for n in names {
            if let Ok(s) = fs::read_to_string(d.join(n)) {
                return Some(s.trim().to_string());
            }
        }
    }
    None
}

#[test]
fn this_hosts_cgroups_are_detected_and_summarised() {
    let cg = Cgroups::detect("summary");
    eprintln!("cgroups here: {}", cg.summary());
    let e = cg.enforced();
    for w in &e.why {
        eprintln!("  not enforced: {w}");
    }
    if cg.is_none() {
        assert!(!e.kill && cg.summary().starts_with("none: "));
        skip(
            "this_hosts_cgroups_are_detected_and_summarised",
            &cg.summary(),
        );
        return;
    }
    assert!(e.kill);
    assert_eq!(e.why.is_empty(), e.memory && e.cpu && e.pids && e.meters);
    // The layout the suite was written on: everything is enforced there, and a
    // regression in detection must not quietly drop a limit.
    if cg.mode() == CgroupMode::Hybrid && Path::new("/sys/fs/cgroup/memory").is_dir() {
        assert!(e.memory && e.cpu && e.pids && e.meters, "{e:?}");
        assert!(
            cg.summary().starts_with("hybrid: v2 kill"),
            "{}",
            cg.summary()
        );
    }
}

#[test]
fn pids_max_bounds_a_fork_loop() {
    let test = "pids_max_bounds_a_fork_loop";
    let Some(cg) = contained(test) else { return };
    if !cg.enforced().pids {
        return skip(test, &cg.enforced().why.join("; "));
    }
    let a = cg
        .create(
            1,
            &Limits {
                pids_max: Some(20),
                ..Limits::default()
            },
        )
        .unwrap();
    // 200 background sleeps, bounded in time; the shell gives up at the first refused
    // fork (dash) or runs out of iterations, and exits either way.
    let mut sh = spawn_in(
        &a,
        "i=0; while [ $i -lt 200 ]; do sleep 60 & i=$((i+1)); done; exit 0",
    );
    wait_exit(&mut sh, Duration::from_secs(60));
    let started = a.pids().len();
    eprintln!(
        "{test}: {started} sleeps started, {} forks refused",
        a.pids_refused()
    );
    assert!(
        started <= 20,
        "{started} processes in a cgroup limited to 20"
    );
    assert!(
        started >= 5,
        "only {started} started: something else limited the loop"
    );
    assert!(a.pids_refused() > 0, "the kernel refused no fork");
    assert!(a.usage().unwrap().pids_current.unwrap() <= 20);
    a.kill().unwrap();
    a.remove().unwrap();
}

#[test]
fn memory_max_oom_kills_a_hog() {
    let test = "memory_max_oom_kills_a_hog";
    let Some(cg) = contained(test) else { return };
    if !cg.enforced().memory {
        return skip(test, &cg.enforced().why.join("; "));
    }
    let a = cg
        .create(
            2,
            &Limits {
                memory_max: Some(64 * MIB),
                ..Limits::default()
            },
        )
        .unwrap();
    assert_eq!(a.oom_kills(), 0);
    // dd's 256 MiB buffer is filled from /dev/zero: it must touch every page.
    let mut hog = spawn_in(&a, "exec dd if=/dev/zero of=/dev/null bs=256M count=1");
    let status = wait_exit(&mut hog, Duration::from_secs(60));
    assert_eq!(
        status.signal(),
        Some(libc::SIGKILL),
        "the hog should be OOM-killed, got {status:?}"
    );
    assert!(
        wait_until(WAIT, || a.oom_kills() > 0),
        "no oom_kill counted"
    );
    let peak = a.usage().unwrap().memory_peak.unwrap();
    assert!(peak <= 64 * MIB, "peak {peak} above the limit");
    a.remove().unwrap();
}

#[test]
fn kill_reaches_a_setsid_double_forked_process_and_nothing_else() {
    let test = "kill_reaches_a_setsid_double_forked_process_and_nothing_else";
    let Some(cg) = contained(test) else { return };
    let dir = TempDir::new("contain-kill");
    let pidfile = dir.path().join("escapee");
    let a = cg.create(3, &Limits::default()).unwrap();
    let mut sh = spawn_in(
        &a,
        &format!(
            "setsid sh -c 'sleep 300 & echo $! > {}.tmp; mv {0}.tmp {0}' & exit 0",
            pidfile.display()
        ),
    );
    wait_exit(&mut sh, WAIT);
    assert!(wait_until(WAIT, || pidfile.exists()), "no escapee pid");
    let escapee: i32 = fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(alive(escapee));
    assert_ne!(session_of(escapee), session_of(0), "it left our session");
    assert!(a.pids().contains(&escapee));
    // A process outside the attempt, which kill must not touch.
    let mut outsider = Command::new("sleep")
        .arg("300")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();

    match a.remove() {
        Err(CgroupError::Busy { .. }) => {}
        other => panic!("removing a populated cgroup: {other:?}"),
    }
    a.kill().unwrap();
    assert!(!alive(escapee), "the setsid'd sleep survived kill");
    assert!(a.is_empty());
    assert!(
        outsider.try_wait().unwrap().is_none(),
        "kill hit an outsider"
    );
    a.remove().unwrap();
    assert!(!a.exists());
    a.remove().unwrap();
    assert!(!cg.list_attempts().contains(&3));
    outsider.kill().unwrap();
    outsider.wait().unwrap();
}

#[test]
fn usage_reads_cpu_and_memory_of_a_busy_child() {
    let test = "usage_reads_cpu_and_memory_of_a_busy_child";
    let Some(cg) = contained(test) else { return };
    if !cg.enforced().meters {
        return skip(test, &cg.enforced().why.join("; "));
    }
    let a = cg.create(4, &Limits::default()).unwrap();
    let mut busy = spawn_in(&a, "while :; do :; done");
    let mut last = None;
    let seen = wait_until(WAIT, || {
        last = a.usage();
        last.is_some_and(|u| {
            u.cpu_usec.unwrap_or(0) >= 50_000
                && u.memory_current.unwrap_or(0) > 0
                && u.memory_peak.unwrap_or(0) > 0
        })
    });
    assert!(seen, "usage never showed the busy child: {last:?}");
    let u = last.unwrap();
    if cg.enforced().pids {
        assert_eq!(u.pids_current, Some(1), "{u:?}");
    }
    a.kill().unwrap();
    assert_eq!(wait_exit(&mut busy, WAIT).signal(), Some(libc::SIGKILL));
    a.remove().unwrap();
    assert_eq!(a.usage(), None, "no usage for a removed cgroup");
}

#[test]
fn cpu_max_slows_a_busy_loop() {
    let test = "cpu_max_slows_a_busy_loop";
    let Some(cg) = contained(test) else { return };
    let e = cg.enforced();
    if !(e.cpu && e.meters) {
        return skip(test, &e.why.join("; "));
    }
    // A quarter of a CPU: 250 ms of CPU takes at least ~1 s of wall time (10 periods).
    let a = cg
        .create(
            5,
            &Limits {
                cpu_max_millis: Some(250),
                ..Limits::default()
            },
        )
        .unwrap();
    let t = Instant::now();
    let mut busy = spawn_in(&a, "while :; do :; done");
    let got = wait_until(Duration::from_secs(30), || {
        a.usage().and_then(|u| u.cpu_usec).unwrap_or(0) >= 250_000
    });
    let wall = t.elapsed();
    assert!(got, "the loop never used 250 ms of CPU");
    eprintln!("{test}: 250 ms of CPU took {wall:?} at 0.25 CPU");
    assert!(
        wall >= Duration::from_millis(700),
        "250 ms of CPU in {wall:?}: the quota is not applied"
    );
    a.kill().unwrap();
    wait_exit(&mut busy, WAIT);
    a.remove().unwrap();
}

/// A stopping daemon's base cgroups go once empty, and stay while an attempt lives
/// in them (issue 33: 67 bases had piled up on one machine).
#[test]
fn empty_bases_are_removed_and_a_base_with_an_attempt_stays() {
    let test = "empty_bases_are_removed_and_a_base_with_an_attempt_stays";
    let Some(cg) = contained(test) else { return };
    let bases = cg.base_dirs();
    assert!(bases.iter().all(|b| b.is_dir()), "{bases:?}");
    let a = cg.create(3, &Limits::default()).unwrap();
    assert_eq!(cg.remove_empty_bases(), 0);
    assert!(bases.iter().all(|b| b.is_dir()), "{bases:?}");
    a.remove().unwrap();
    assert_eq!(cg.remove_empty_bases(), bases.len());
    assert!(bases.iter().all(|b| !b.exists()), "{bases:?}");
    assert_eq!(cg.remove_empty_bases(), 0, "nothing left to remove");
}

#[test]
fn create_is_idempotent_and_rewrites_limits() {
    let test = "create_is_idempotent_and_rewrites_limits";
    let Some(cg) = contained(test) else { return };
    let e = cg.enforced();
    let mem = ["memory.max", "memory.limit_in_bytes"];
    let pids = ["pids.max"];
    let cpu = ["cpu.max", "cpu.cfs_quota_us"];
    let a = cg
        .create(
            6,
            &Limits {
                memory_max: Some(100 * MIB),
                cpu_max_millis: Some(1500),
                pids_max: Some(50),
            },
        )
        .unwrap();
    assert!(a.exists());
    assert!(cg.list_attempts().contains(&6));
    if e.memory {
        assert_eq!(read_limit(&a, &mem).unwrap(), (100 * MIB).to_string());
    }
    if e.pids {
        assert_eq!(read_limit(&a, &pids).unwrap(), "50");
    }
    if e.cpu {
        let v = read_limit(&a, &cpu).unwrap();
        assert!(v == "150000" || v == "150000 100000", "{v}");
    }
    // Reused: raised memory (v1 must raise memsw first), dropped pids and cpu limits.
    let b = cg
        .create(
            6,
            &Limits {
                memory_max: Some(200 * MIB),
                ..Limits::default()
            },
        )
        .unwrap();
    assert_eq!(a, b);
    if e.memory {
        assert_eq!(read_limit(&a, &mem).unwrap(), (200 * MIB).to_string());
    }
    if e.pids {
        assert_eq!(read_limit(&a, &pids).unwrap(), "max");
    }
    if e.cpu {
        let v = read_limit(&a, &cpu).unwrap();
        assert!(v == "-1" || v == "max 100000", "{v}");
    }
    // Lowered again, then unlimited.
    cg.create(
        6,
        &Limits {
            memory_max: Some(50 * MIB),
            ..Limits::default()
        },
    )
    .unwrap();
    if e.memory {
        assert_eq!(read_limit(&a, &mem).unwrap(), (50 * MIB).to_string());
    }
    cg.create(6, &Limits::default()).unwrap();
    if e.memory {
        let v = read_limit(&a, &mem).unwrap();
        assert!(v == "max" || v.parse::<u64>().unwrap() > 1 << 40, "{v}");
    }
    // prepare again is harmless.
    cg.prepare().unwrap();
    a.remove().unwrap();
    assert!(!cg.list_attempts().contains(&6));
}

/// The v1-only path (signal every member until none is left), on this host's real v1
/// hierarchies, by detecting from a mountinfo without the cgroup2 line.
#[test]
fn v1_only_kill_signals_every_member_until_none_is_left() {
    let test = "v1_only_kill_signals_every_member_until_none_is_left";
    if !is_root() {
        return skip(test, "needs root to create cgroups");
    }
    let dir = TempDir::new("contain-v1");
    let proc_self = fake_proc_self(dir.path(), |l| !l.contains(" - cgroup2 "), None);
    let cg = Cgroups::detect_in(&proc_self, Path::new("/"), &next_tag());
    if cg.mode() != CgroupMode::V1 {
        return skip(test, &format!("no v1 hierarchies here ({})", cg.summary()));
    }
    assert!(
        cg.summary().ends_with("kill by signal)"),
        "{}",
        cg.summary()
    );
    cg.prepare().unwrap();
    let cg = Contained { cg };
    let a = cg
        .create(
            7,
            &Limits {
                pids_max: Some(64),
                ..Limits::default()
            },
        )
        .unwrap();
    let mut sh = spawn_in(
        &a,
        "for i in 1 2 3; do setsid sh -c 'sleep 300 & sleep 300 & exit 0' & done; exit 0",
    );
    wait_exit(&mut sh, WAIT);
    assert!(
        wait_until(WAIT, || a.pids().len() >= 6),
        "sleeps never started: {:?}",
        a.pids()
    );
    let members = a.pids();
    a.kill().unwrap();
    assert!(a.is_empty());
    for p in members {
        assert!(!alive(p), "{p} survived");
    }
    a.remove().unwrap();
}

#[test]
fn kill_uid_kills_every_process_of_that_uid_and_nothing_else() {
    let test = "kill_uid_kills_every_process_of_that_uid_and_nothing_else";
    let block = match users::try_runner_uids(2) {
        Ok(b) => b,
        Err(why) => return skip(test, &why),
    };
    let (ua, ub) = (block.user(0), block.user(1));
    let as_user = |uid: u32, gid: u32, script: &str| {
        Command::new("/bin/sh")
            .arg("-c")
            .arg(script)
            .current_dir("/")
            .uid(uid)
            .gid(gid)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let mut a = as_user(
        ua.uid,
        ua.gid,
        "setsid sh -c 'sleep 300 & sleep 300 & exit 0' & exec sleep 300",
    );
    let mut b = as_user(ub.uid, ub.gid, "exec sleep 300");
    assert!(
        wait_until(WAIT, || processes_of_uid(ua.uid).len() >= 3
            && processes_of_uid(ub.uid).len() == 1),
        "the test processes never started: {:?} {:?}",
        processes_of_uid(ua.uid),
        processes_of_uid(ub.uid)
    );
    let victims = processes_of_uid(ua.uid);
    assert!(
        victims
            .iter()
            .any(|&p| session_of(p) != session_of(a.id() as i32)),
        "a victim should have left the session: {victims:?}"
    );
    // Nothing else is usable while the uid runs something.
    let usable = |u: u32| lookup_uid(u).ok().flatten().is_some() && processes_of_uid(u).is_empty();
    assert_eq!(pick_uid(block.range(), &Default::default(), usable), None);

    let t = Instant::now();
    kill_uid(ua.uid, ua.gid).unwrap();
    eprintln!(
        "{test}: kill_uid of {} processes took {:?}",
        victims.len(),
        t.elapsed()
    );
    assert!(
        wait_until(WAIT, || processes_of_uid(ua.uid).is_empty()),
        "survivors: {:?}",
        processes_of_uid(ua.uid)
    );
    for p in victims {
        assert!(!alive(p), "{p} survived");
    }
    assert_eq!(a.wait().unwrap().signal(), Some(libc::SIGKILL));
    assert_eq!(
        processes_of_uid(ub.uid),
        vec![b.id() as i32],
        "another uid was hit"
    );
    assert!(b.try_wait().unwrap().is_none());
    assert!(alive(std::process::id() as i32));
    assert_eq!(
        pick_uid(block.range(), &Default::default(), usable),
        Some(ua.uid)
    );

    kill_uid(ub.uid, ub.gid).unwrap();
    assert_eq!(b.wait().unwrap().signal(), Some(libc::SIGKILL));
    // Nothing left to kill is no error.
    kill_uid(ub.uid, ub.gid).unwrap();
}

#[test]
fn test_user_blocks_are_disjoint_across_threads() {
    let test = "test_user_blocks_are_disjoint_across_threads";
    let first = match users::try_runner_uids(3) {
        Ok(b) => b,
        Err(why) => return skip(test, &why),
    };
    let others: Vec<_> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..3)
            .map(|_| s.spawn(|| users::try_runner_uids(2).unwrap()))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut all: Vec<UidRange> = vec![first.range()];
    all.extend(others.iter().map(|b| b.range()));
    for (i, x) in all.iter().enumerate() {
        for y in &all[i + 1..] {
            assert!(x.end < y.start || y.end < x.start, "{x} overlaps {y}");
        }
        for u in x.iter() {
            let user = lookup_uid(u).unwrap().expect("a passwd entry");
            assert_eq!(user.name, users::user_name(u));
            assert_eq!(user.home, Path::new("/nonexistent"));
        }
    }
    // Released blocks are handed out again (to whoever asks first).
    drop(first);
    drop(others);
    users::try_runner_uids(3).unwrap();
}

/// The v2 mount of this host (`None` without one).
fn v2_mount() -> Option<String> {
    fs::read_to_string("/proc/self/mountinfo")
        .ok()?
        .lines()
        .find(|l| l.contains(" - cgroup2 "))
        .and_then(|l| l.split(' ').nth(4).map(String::from))
}

/// A fake /proc/self: this host's mountinfo with only the lines `keep` accepts, and
/// /proc/self/cgroup with the v2 line replaced by `v2_path` when given.
fn fake_proc_self(dir: &Path, keep: impl Fn(&str) -> bool, v2_path: Option<&str>) -> PathBuf {
    let proc_self = dir.join("proc/self");
    fs::create_dir_all(&proc_self).unwrap();
    let mountinfo: String = fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter(|l| keep(l))
        .map(|l| format!("{l}\n"))
        .collect();
    fs::write(proc_self.join("mountinfo"), mountinfo).unwrap();
    let cgroup: String = fs::read_to_string("/proc/self/cgroup")
        .unwrap()
        .lines()
        .map(|l| match (l.starts_with("0::"), v2_path) {
            (true, Some(p)) => format!("0::{p}\n"),
            _ => format!("{l}\n"),
        })
        .collect();
    fs::write(proc_self.join("cgroup"), cgroup).unwrap();
    proc_self
}

/// A v2 cgroup marked delegated the way systemd marks one (`trusted.delegate`), holding
/// a process: `prepare` moves it into the leaf `daemon/`, creates the base there, and
/// the attempt cgroups go below it. Detected again from the leaf, the layout is the same,
/// and the unit's release between two daemons finds the same cgroup.
#[test]
fn delegated_v2_moves_the_daemon_into_its_leaf_and_releases_between_daemons() {
    let test = "delegated_v2_moves_the_daemon_into_its_leaf_and_releases_between_daemons";
    if !is_root() {
        return skip(test, "needs root to create cgroups");
    }
    let Some(mount) = v2_mount() else {
        return skip(test, "no cgroup2 mount");
    };
    // Our own v2 cgroup must be the mount's root for the fake /proc/self/cgroup to hold.
    let own_v2 = fs::read_to_string("/proc/self/cgroup")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("0::").map(String::from));
    if own_v2.as_deref() != Some("/") {
        return skip(
            test,
            &format!("this process is in v2 cgroup {own_v2:?}, not the root"),
        );
    }
    let tag = next_tag();
    let name = format!("rmdeleg-{tag}");
    let unit = Path::new(&mount).join(&name);
    fs::create_dir(&unit).unwrap();
    struct Rm(PathBuf);
    impl Drop for Rm {
        fn drop(&mut self) {
            for sub in ["daemon", ""] {
                let d = self.0.join(sub);
                let pids = fs::read_to_string(d.join("cgroup.procs")).unwrap_or_default();
                for p in pids.lines().filter_map(|p| p.parse::<i32>().ok()) {
                    // SAFETY: kill has no memory preconditions.
                    unsafe { libc::kill(p, libc::SIGKILL) };
                }
            }
            let _ = wait_until(WAIT, || {
                fs::read_to_string(self.0.join("daemon/cgroup.procs"))
                    .map_or(true, |s| s.trim().is_empty())
            });
            let _ = fs::remove_dir(self.0.join("daemon"));
            let _ = fs::remove_dir(&self.0);
        }
    }
    let _rm = Rm(unit.clone());
    let c = std::ffi::CString::new(unit.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: valid NUL-terminated strings and a one-byte value.
    let rc = unsafe {
        libc::setxattr(
            c.as_ptr(),
            c"trusted.delegate".as_ptr(),
            b"1".as_ptr().cast(),
            1,
            0,
        )
    };
    if rc != 0 {
        return skip(
            test,
            &format!(
                "cannot set trusted.delegate: {}",
                std::io::Error::last_os_error()
            ),
        );
    }
    // A process already in the delegated cgroup (what systemd starts us as).
    let mut squatter = Command::new("sleep").arg("300").spawn().unwrap();
    fs::write(unit.join("cgroup.procs"), squatter.id().to_string()).unwrap();

    let dir = TempDir::new("contain-deleg");
    let only_v2 = |l: &str| l.contains(" - cgroup2 ");
    let proc_self = fake_proc_self(dir.path(), only_v2, Some(&format!("/{name}")));
    let cg = Cgroups::detect_in(&proc_self, Path::new("/"), &tag);
    assert_eq!(cg.delegated(), Some(unit.as_path()), "{}", cg.summary());
    assert!(cg.summary().contains("delegated"), "{}", cg.summary());
    assert_eq!(
        cg.base_dirs(),
        vec![unit.join(format!("runner-manager-{tag}"))]
    );

    // Started in the delegated cgroup itself (systemd before 254): prepare moves what
    // is there into the leaf `daemon/`, so the delegated cgroup may hand controllers
    // to the attempts (this host's v2 mount has none to hand: no limits, kill works).
    cg.prepare().unwrap();
    let listed = |d: &Path| fs::read_to_string(d.join("cgroup.procs")).unwrap();
    assert_eq!(listed(&unit).trim(), "");
    assert_eq!(
        listed(&unit.join("daemon")).trim(),
        squatter.id().to_string()
    );
    assert!(
        cg.summary().starts_with("cgroup v2 (no limits"),
        "{}",
        cg.summary()
    );
    cg.prepare().unwrap();

    // Detected again from the leaf (the same daemon after its move): the same base.
    let dir2 = TempDir::new("contain-deleg-leaf");
    let proc_leaf = fake_proc_self(dir2.path(), only_v2, Some(&format!("/{name}/daemon")));
    let again = Cgroups::detect_in(&proc_leaf, Path::new("/"), &tag);
    assert_eq!(again.delegated(), cg.delegated());
    assert_eq!(again.base_dirs(), cg.base_dirs());
    again.prepare().unwrap();
    assert_eq!(listed(&unit).trim(), "");

    // The unit's ExecStopPost, from systemd's `.control` leaf: the real cgroup is
    // found delegated, and what it hands down (nothing, on this mount) is turned off.
    let dir3 = TempDir::new("contain-deleg-control");
    let proc_control = fake_proc_self(dir3.path(), only_v2, Some(&format!("/{name}/.control")));
    let released = runner_manager::runner::cgroup::handover::release_in(
        &proc_control,
        Path::new("/"),
        &|p: &Path| p == unit.as_path(),
        &|_: &Path| Ok(()),
    )
    .unwrap();
    assert_eq!(released.cgroup, unit);
    assert!(released.turned_off.is_empty(), "{released:?}");

    let cg = Contained { cg };
    let a = cg.create(9, &Limits::default()).unwrap();
    assert_eq!(
        a.paths(),
        vec![unit.join(format!("runner-manager-{tag}/att-9"))]
    );
    let mut child = spawn_in(&a, "exec sleep 300");
    assert!(wait_until(WAIT, || a.pids().contains(&(child.id() as i32))));
    a.kill().unwrap();
    wait_exit(&mut child, WAIT);
    a.remove().unwrap();
    drop(cg);
    squatter.kill().unwrap();
    squatter.wait().unwrap();
}

/// v2 alone with no controllers (this host's v2 mount without its v1 hierarchies):
/// limits asked for are skipped, not errors, and `enforced` says so; kill still works.
#[test]
fn limits_the_host_lacks_are_skipped_and_reported() {
    let test = "limits_the_host_lacks_are_skipped_and_reported";
    if !is_root() {
        return skip(test, "needs root to create cgroups");
    }
    let dir = TempDir::new("contain-v2only");
    let proc_self = fake_proc_self(dir.path(), |l| !l.contains(" - cgroup "), None);
    let cg = Cgroups::detect_in(&proc_self, Path::new("/"), &next_tag());
    let e = cg.enforced();
    if cg.mode() != CgroupMode::V2 || e.memory || e.pids || e.cpu {
        return skip(
            test,
            &format!("this host's v2 has controllers ({})", cg.summary()),
        );
    }
    assert_eq!(cg.summary(), "cgroup v2 (no limits; kill)");
    assert_eq!(e.why.len(), 4, "{:?}", e.why);
    cg.prepare().unwrap();
    let cg = Contained { cg };
    let a = cg
        .create(
            10,
            &Limits {
                memory_max: Some(64 * MIB),
                cpu_max_millis: Some(500),
                pids_max: Some(10),
            },
        )
        .unwrap();
    let mut child = spawn_in(&a, "setsid sleep 300 & exec sleep 300");
    assert!(wait_until(WAIT, || a.pids().len() == 2));
    let u = a.usage().unwrap();
    assert_eq!((u.memory_current, u.pids_current), (None, None));
    assert!(u.cpu_usec.is_some());
    a.kill().unwrap();
    wait_exit(&mut child, WAIT);
    a.remove().unwrap();
}

/// std runs `pre_exec` after its own setuid: the join must work from the runner's uid
/// too, because the kernel checks the credentials the daemon opened the files with.
#[test]
fn a_child_joins_after_dropping_to_a_runner_uid() {
    let test = "a_child_joins_after_dropping_to_a_runner_uid";
    let Some(cg) = contained(test) else { return };
    let block = match users::try_runner_uids(1) {
        Ok(b) => b,
        Err(why) => return skip(test, &why),
    };
    let u = block.user(0);
    let a = cg.create(8, &Limits::default()).unwrap();
    let fds = a.join_fds().unwrap();
    let mut cmd = Command::new("sleep");
    cmd.arg("300").current_dir("/").uid(u.uid).gid(u.gid);
    // SAFETY: join_self only write(2)s.
    unsafe { cmd.pre_exec(move || fds.join_self()) };
    let mut child = cmd.spawn().expect("joining as the runner's uid");
    assert!(a.pids().contains(&(child.id() as i32)));
    assert_eq!(processes_of_uid(u.uid), vec![child.id() as i32]);
    a.kill().unwrap();
    assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));
    a.remove().unwrap();
}

/// Another process holding a uid's lock keeps that uid out of every block handed here.
#[test]
fn test_user_blocks_exclude_uids_another_process_holds() {
    let test = "test_user_blocks_exclude_uids_another_process_holds";
    if !is_root() {
        return skip(test, "needs root to create test users");
    }
    if !Path::new("/usr/bin/flock").exists() {
        return skip(test, "flock(1) is not installed");
    }
    // Hold the lowest uid no one else holds right now, from another process.
    let mut holder = None;
    for uid in users::TEST_UIDS.iter().take(50) {
        let mut c = Command::new("/usr/bin/flock")
            .args([
                "-n",
                &format!("/tmp/rmtest-uid-{uid}.lock"),
                "-c",
                "echo held; exec sleep 300",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            // flock(1) runs the command in a child: the whole group is ended below,
            // so no `sleep` outlives the test holding the lock (and CI's output pipe).
            .process_group(0)
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(c.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        if line.trim() == "held" {
            holder = Some((uid, c));
            break;
        }
        c.wait().unwrap();
    }
    let (held, mut proc_) = holder.expect("every test uid is locked");
    let blocks: Vec<_> = (0..3).map(|_| users::try_runner_uids(2).unwrap()).collect();
    for b in &blocks {
        assert!(
            !b.range().contains(held),
            "{} includes the held uid {held}",
            b.range()
        );
    }
    // SAFETY: kill(2) on the process group the holder leads; no memory is involved.
    unsafe { libc::kill(-(proc_.id() as i32), libc::SIGKILL) };
    proc_.wait().unwrap();
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// What containment costs per attempt, printed for BENCHMARKS.md (run it alone for
/// quiet figures: `cargo test --test runner containment_costs -- --nocapture`).
#[test]
fn containment_costs() {
    let test = "containment_costs";
    let Some(cg) = contained(test) else { return };
    let limits = Limits {
        memory_max: Some(512 * MIB),
        cpu_max_millis: Some(1000),
        pids_max: Some(100),
    };
    let (mut create, mut fds, mut join, mut kill, mut remove) =
        (vec![], vec![], vec![], vec![], vec![]);
    for i in 0..30 {
        let id = 100 + i;
        let t = Instant::now();
        let a = cg.create(id, &limits).unwrap();
        create.push(t.elapsed());
        let t = Instant::now();
        let f = a.join_fds().unwrap();
        fds.push(t.elapsed());
        // The child times its own join and reports the nanoseconds through a pipe.
        let mut pipe = [0i32; 2];
        // SAFETY: pipe2 fills the two descriptors.
        assert_eq!(
            unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) },
            0
        );
        let (rfd, wfd) = (pipe[0], pipe[1]);
        let mut c = Command::new("sleep");
        c.arg("300");
        // SAFETY: clock_gettime, write(2) and join_self are async-signal-safe.
        unsafe {
            c.pre_exec(move || {
                let now = || {
                    let mut ts = libc::timespec {
                        tv_sec: 0,
                        tv_nsec: 0,
                    };
                    libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
                    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
                };
                let t0 = now();
                f.join_self()?;
                let ns = (now() - t0).to_ne_bytes();
                libc::write(wfd, ns.as_ptr().cast(), ns.len());
                Ok(())
            })
        };
        let mut joined = c.spawn().unwrap();
        let mut ns = [0u8; 8];
        // SAFETY: closing our copy of the write end; reading 8 bytes into a buffer.
        unsafe {
            libc::close(wfd);
            assert_eq!(libc::read(rfd, ns.as_mut_ptr().cast(), 8), 8);
            libc::close(rfd);
        }
        join.push(Duration::from_nanos(u64::from_ne_bytes(ns)));
        assert!(a.pids().contains(&(joined.id() as i32)));
        let t = Instant::now();
        a.kill().unwrap();
        kill.push(t.elapsed());
        let _ = joined.wait();
        let t = Instant::now();
        a.remove().unwrap();
        remove.push(t.elapsed());
    }
    eprintln!(
        "COST cgroup ({}), medians of 30: create+limits {:?}, join_fds {:?}, join in the child {:?}, kill (1 process) {:?}, remove {:?}",
        cg.summary(),
        median(create.clone()),
        median(fds),
        median(join.clone()),
        median(kill.clone()),
        median(remove.clone()),
    );
    for d in [median(create), median(join), median(kill), median(remove)] {
        assert!(d < Duration::from_secs(1), "{d:?}");
    }

    let Ok(block) = users::try_runner_uids(1) else {
        return skip("containment_costs (kill_uid)", "no test users here");
    };
    let u = block.user(0);
    let mut idle = vec![];
    for _ in 0..30 {
        let t = Instant::now();
        kill_uid(u.uid, u.gid).unwrap();
        idle.push(t.elapsed());
    }
    eprintln!("COST kill_uid with nothing to kill: {:?}", median(idle));
}

/// The leftovers walk (`runner::leftovers`) over a shared directory of its own: it
/// removes the uid's entries wherever the uid could have made them, leaves everyone
/// else's, never follows a link (a link of the uid's pointing at the uid's own files
/// elsewhere removes the link, not the files), stops at its bounds and makes progress
/// from one walk to the next; and the uid's SysV IPC goes, another uid's stays.
#[test]
fn leftovers_of_a_uid_go_and_nothing_else_does() {
    use runner_manager::runner::leftovers::{self, Bounds};
    use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
    let test = "leftovers_of_a_uid_go_and_nothing_else_does";
    let block = match users::try_runner_uids(2) {
        Ok(b) => b,
        Err(why) => return skip(test, &why),
    };
    let (x, y) = (block.user(0), block.user(1));
    let top = TempDir::new("leftovers");
    let outside = TempDir::new("leftovers-outside");
    let t = top.path();
    let mode = |p: &Path, m: u32| fs::set_permissions(p, fs::Permissions::from_mode(m)).unwrap();
    let own =
        |p: &Path, uid: u32, gid: u32| std::os::unix::fs::lchown(p, Some(uid), Some(gid)).unwrap();
    let file = |p: &Path, uid: u32, gid: u32| {
        fs::write(p, "DEPLOY_KEY=secret").unwrap();
        own(p, uid, gid);
    };
    let dir = |p: &Path, uid: u32, gid: u32, m: u32| {
        fs::create_dir_all(p).unwrap();
        mode(p, m);
        own(p, uid, gid);
    };
    mode(t, 0o1777);
    file(&t.join("x-file"), x.uid, x.gid);
    file(&t.join("y-file"), y.uid, y.gid);
    dir(&t.join("x-dir"), x.uid, x.gid, 0o777);
    file(&t.join("x-dir/inner"), x.uid, x.gid);
    file(&t.join("x-dir/y-inner"), y.uid, y.gid);
    dir(&t.join("x-tree/a/b"), x.uid, x.gid, 0o700);
    own(&t.join("x-tree/a"), x.uid, x.gid);
    own(&t.join("x-tree"), x.uid, x.gid);
    file(&t.join("x-tree/a/b/c"), x.uid, x.gid);
    dir(&t.join("shared"), 0, 0, 0o1777);
    file(&t.join("shared/x-in-shared"), x.uid, x.gid);
    dir(&t.join("y-open"), y.uid, y.gid, 0o777);
    file(&t.join("y-open/x-in-y-open"), x.uid, x.gid);
    dir(&t.join("closed"), 0, 0, 0o755);
    file(&t.join("closed/x-in-closed"), x.uid, x.gid);
    // The uid's own files elsewhere, reachable only through links it planted.
    dir(&outside.path().join("d"), x.uid, x.gid, 0o700);
    file(&outside.path().join("d/victim"), x.uid, x.gid);
    symlink(outside.path().join("d"), t.join("x-link")).unwrap();
    own(&t.join("x-link"), x.uid, x.gid);
    symlink(outside.path().join("d"), t.join("x-dir/link")).unwrap();
    own(&t.join("x-dir/link"), x.uid, x.gid);

    let r = leftovers::remove_files_of(x.uid, x.gid, &[t], &Bounds::default());
    assert!(!r.truncated && r.first_error.is_none(), "{r:?}");
    for gone in [
        "x-file",
        "x-dir/inner",
        "x-dir/link",
        "x-tree",
        "shared/x-in-shared",
        "y-open/x-in-y-open",
        "x-link",
    ] {
        assert!(
            fs::symlink_metadata(t.join(gone)).is_err(),
            "{gone} is left"
        );
    }
    for kept in [
        "y-file",
        "x-dir",
        "x-dir/y-inner",
        "shared",
        "y-open",
        "closed/x-in-closed",
    ] {
        assert!(
            fs::symlink_metadata(t.join(kept)).is_ok(),
            "{kept} was removed"
        );
    }
    assert!(
        outside.path().join("d/victim").exists(),
        "the walk followed a link"
    );
    assert_eq!(fs::metadata(t).unwrap().mode() & 0o7777, 0o1777);
    assert_eq!((r.files, r.dirs), (7, 3), "{r:?}");

    // Bounds: depth, then entries; each walk removes what it reached.
    let deep = t.join("x-deep/1/2/3/4");
    fs::create_dir_all(&deep).unwrap();
    for p in deep.ancestors().take_while(|p| *p != t) {
        own(p, x.uid, x.gid);
    }
    file(&deep.join("f"), x.uid, x.gid);
    let r = leftovers::remove_files_of(
        x.uid,
        x.gid,
        &[t],
        &Bounds {
            entries: 1000,
            depth: 3,
        },
    );
    assert!(r.truncated, "{r:?}");
    assert!(deep.join("f").exists());
    for i in 0..50 {
        file(&t.join(format!("many-{i}")), x.uid, x.gid);
    }
    let small = Bounds {
        entries: 20,
        depth: 32,
    };
    let mut walks = 0;
    loop {
        walks += 1;
        let r = leftovers::remove_files_of(x.uid, x.gid, &[t], &small);
        if !r.truncated {
            break;
        }
        assert!(walks < 20, "no progress: {r:?}");
    }
    assert!(walks > 2, "the bound never held");
    assert!(fs::symlink_metadata(t.join("x-deep")).is_err());
    assert!(fs::symlink_metadata(t.join("many-0")).is_err());

    // SysV IPC: the uid's own goes, another uid's stays.
    let ipcmk = |u: &RunAsUser| {
        let out = Command::new("ipcmk")
            .args(["-M", "4096"])
            .uid(u.uid)
            .gid(u.gid)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    };
    ipcmk(&x);
    ipcmk(&y);
    assert_eq!(leftovers::ipc_of(x.uid).len(), 1);
    assert_eq!(leftovers::remove_ipc_of(x.uid, x.gid).unwrap(), 1);
    assert!(leftovers::ipc_of(x.uid).is_empty());
    assert_eq!(
        leftovers::ipc_of(y.uid).len(),
        1,
        "another uid's segment went"
    );
    leftovers::remove_ipc_of(y.uid, y.gid).unwrap();

    // What a walk costs: 10,000 entries of others in a shared directory, 1,000 of the
    // uid's beside them.
    let crowd = t.join("crowd");
    dir(&crowd, 0, 0, 0o1777);
    for i in 0..10_000 {
        fs::write(crowd.join(format!("o{i}")), "").unwrap();
    }
    for i in 0..1_000 {
        file(&crowd.join(format!("x{i}")), x.uid, x.gid);
    }
    let started = Instant::now();
    let r = leftovers::remove_files_of(x.uid, x.gid, &[t], &Bounds::default());
    let took = started.elapsed();
    assert_eq!(r.files, 1_000, "{r:?}");
    let started = Instant::now();
    let again = leftovers::remove_files_of(x.uid, x.gid, &[t], &Bounds::default());
    let clean = started.elapsed();
    assert_eq!(again.files, 0);
    eprintln!(
        "{test}: a walk over {} entries removing 1,000 took {took:?}; with nothing to remove {clean:?}",
        r.looked
    );
}
