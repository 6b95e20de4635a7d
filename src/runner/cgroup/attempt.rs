//! One attempt's cgroup in every hierarchy: its limits, joining it, its meters, killing everything in it and removing it.

use super::files::{
    io_err, is_real_dir, open_nofollow, read_keyed, read_pids, read_u64, write_value,
};
use super::{
    CPU_PERIOD_US, CgroupError, CgroupUsage, KILL_BOUND, Kind, Limits, MIN_CPU_MILLIS, Roles, v1,
    v2,
};
use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub(super) fn check_limits(l: &Limits) -> Result<(), CgroupError> {
    if l.memory_max == Some(0) {
        return Err(CgroupError::InvalidLimit {
            name: "memory_max",
            why: "0 bytes would stop the runner from starting; leave it unset for no limit".into(),
        });
    }
    if let Some(m) = l.cpu_max_millis
        && m < MIN_CPU_MILLIS
    {
        return Err(CgroupError::InvalidLimit {
            name: "cpu_max",
            why: format!(
                "{m} thousandths of a CPU is below the kernel's smallest quota ({MIN_CPU_MILLIS}, 1 ms per 100 ms)"
            ),
        });
    }
    if l.pids_max == Some(0) {
        return Err(CgroupError::InvalidLimit {
            name: "pids_max",
            why: "0 would stop the runner from starting; leave it unset for no limit".into(),
        });
    }
    Ok(())
}

/// Writes `limits` for the roles this hierarchy serves; unlimited writes "max"/-1, so a
/// reused cgroup loses a limit its profile dropped.
pub(super) fn write_limits(d: &AttDir, l: &Limits) -> Result<(), CgroupError> {
    match d.kind {
        Kind::V2 => v2::write_limits(&d.path, d.roles, l),
        Kind::V1 => v1::write_limits(&d.path, d.roles, l),
    }
}

pub(super) fn cpu_quota_us(millis: u32) -> u64 {
    u64::from(millis) * CPU_PERIOD_US / 1000
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct AttDir {
    pub(super) kind: Kind,
    pub(super) path: PathBuf,
    pub(super) roles: Roles,
}

/// One attempt's cgroup in every hierarchy we use (none when the host has none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttemptCgroup {
    pub(super) attempt: i64,
    pub(super) dirs: Vec<AttDir>,
}

/// The open `cgroup.procs` files of an attempt, for a child to join between fork and exec.
#[derive(Debug)]
pub struct JoinFds {
    pub(super) fds: Vec<OwnedFd>,
}

impl JoinFds {
    /// Moves the calling process into the attempt's cgroups: `write(fd, "0")` per
    /// hierarchy. Async-signal-safe (no allocation), for `Command::pre_exec`. The files
    /// were opened by the daemon, whose credentials the kernel checks, so this works
    /// before or after the child drops to the runner's uid.
    pub fn join_self(&self) -> Result<(), io::Error> {
        for fd in &self.fds {
            // SAFETY: writing one byte from a static buffer to a descriptor we own.
            let n = unsafe { libc::write(fd.as_raw_fd(), b"0".as_ptr().cast(), 1) };
            if n != 1 {
                let errno = if n < 0 {
                    // SAFETY: reading errno has no preconditions.
                    unsafe { *libc::__errno_location() }
                } else {
                    libc::EIO
                };
                return Err(io::Error::from_raw_os_error(errno));
            }
        }
        Ok(())
    }

    /// How many hierarchies a child joins (0 when the host has no cgroups).
    pub fn len(&self) -> usize {
        self.fds.len()
    }

    pub fn is_empty(&self) -> bool {
        self.fds.is_empty()
    }
}

impl AttemptCgroup {
    pub fn attempt(&self) -> i64 {
        self.attempt
    }

    /// The attempt's directory in each hierarchy.
    pub fn paths(&self) -> Vec<PathBuf> {
        self.dirs.iter().map(|d| d.path.clone()).collect()
    }

    pub fn exists(&self) -> bool {
        self.dirs.iter().any(|d| is_real_dir(&d.path))
    }

    /// Opens each hierarchy's `cgroup.procs` (`O_WRONLY|O_CLOEXEC`), in the daemon,
    /// before the fork.
    pub fn join_fds(&self) -> Result<JoinFds, CgroupError> {
        let mut fds = Vec::with_capacity(self.dirs.len());
        for d in &self.dirs {
            let p = d.path.join("cgroup.procs");
            let f = open_nofollow(&p, true).map_err(io_err("opening", &p))?;
            fds.push(OwnedFd::from(f));
        }
        Ok(JoinFds { fds })
    }

    fn with_role(&self, f: fn(&Roles) -> bool) -> Option<&AttDir> {
        self.dirs.iter().find(|d| f(&d.roles))
    }

    /// Memory, CPU time and pids as the cgroups count them; `None` if the cgroups are gone.
    pub fn usage(&self) -> Option<CgroupUsage> {
        if !self.exists() {
            return None;
        }
        let mut u = CgroupUsage::default();
        if let Some(d) = self.with_role(|r| r.memory) {
            let (cur, peak) = match d.kind {
                Kind::V2 => ("memory.current", "memory.peak"),
                Kind::V1 => ("memory.usage_in_bytes", "memory.max_usage_in_bytes"),
            };
            u.memory_current = read_u64(&d.path.join(cur));
            u.memory_peak = read_u64(&d.path.join(peak));
        }
        if let Some(d) = self.with_role(|r| r.cpu_time) {
            u.cpu_usec = match d.kind {
                Kind::V2 => read_keyed(&d.path.join("cpu.stat"), "usage_usec"),
                Kind::V1 => read_u64(&d.path.join("cpuacct.usage")).map(|ns| ns / 1000),
            };
        }
        if let Some(d) = self.with_role(|r| r.pids) {
            u.pids_current = read_u64(&d.path.join("pids.current"));
        }
        Some(u)
    }

    /// Processes the OOM killer killed in this attempt (0 if unknown).
    pub fn oom_kills(&self) -> u64 {
        let Some(d) = self.with_role(|r| r.memory) else {
            return 0;
        };
        let file = match d.kind {
            Kind::V2 => "memory.events",
            Kind::V1 => "memory.oom_control",
        };
        read_keyed(&d.path.join(file), "oom_kill").unwrap_or(0)
    }

    /// Forks refused because the attempt was at `pids_max` (0 if unknown).
    pub fn pids_refused(&self) -> u64 {
        self.with_role(|r| r.pids)
            .and_then(|d| read_keyed(&d.path.join("pids.events"), "max"))
            .unwrap_or(0)
    }

    /// Every process in the attempt's cgroups (union over hierarchies), ascending.
    pub fn pids(&self) -> Vec<i32> {
        let mut all = BTreeSet::new();
        for d in &self.dirs {
            all.extend(read_pids(&d.path.join("cgroup.procs")));
        }
        all.into_iter().collect()
    }

    pub fn is_empty(&self) -> bool {
        self.dirs
            .iter()
            .all(|d| read_pids(&d.path.join("cgroup.procs")).is_empty())
    }

    /// Kills everything in the attempt: `cgroup.kill` where the host has it (atomic, so a
    /// double-forked or `setsid` process cannot escape), then SIGKILL to every member
    /// still listed, repeated until none is, for at most a few seconds.
    pub fn kill(&self) -> Result<(), CgroupError> {
        let deadline = Instant::now() + KILL_BOUND;
        let kill_file = self
            .dirs
            .iter()
            .filter(|d| d.kind == Kind::V2)
            .map(|d| d.path.join("cgroup.kill"))
            .find(|p| p.exists());
        let mut round = 0u32;
        loop {
            if let Some(k) = &kill_file {
                match write_value(k, "1") {
                    Ok(()) => {}
                    Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
                    Err(e) => return Err(io_err("writing", k)(e)),
                }
            }
            // After cgroup.kill, members are dying; signal one by one only if some linger
            // (or a v1 hierarchy holds a process the v2 cgroup does not).
            if kill_file.is_none() || round > 0 {
                for d in &self.dirs {
                    signal_members(&d.path.join("cgroup.procs"));
                }
            }
            // Dying takes microseconds to milliseconds: poll briefly, then signal again.
            let round_end = (Instant::now() + Duration::from_millis(50)).min(deadline);
            let mut pause = Duration::from_micros(100);
            loop {
                if self.is_empty() {
                    return Ok(());
                }
                if Instant::now() >= round_end {
                    break;
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(5));
            }
            if Instant::now() >= deadline {
                let d = self
                    .dirs
                    .iter()
                    .find(|d| !read_pids(&d.path.join("cgroup.procs")).is_empty());
                return Err(CgroupError::Survivors {
                    path: d.map(|d| d.path.clone()).unwrap_or_default(),
                    pids: self.pids(),
                });
            }
            round += 1;
        }
    }

    /// Removes the attempt's cgroups in every hierarchy (absent is success). A cgroup
    /// with processes left is `Busy`: kill, and retry later.
    pub fn remove(&self) -> Result<(), CgroupError> {
        let mut first_err = None;
        for d in &self.dirs {
            if let Err(e) = remove_tree(&d.path, 0)
                && first_err.is_none()
            {
                first_err = Some(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

/// SIGKILLs every process listed in `procs`, exactly: each pid is pinned with a pidfd
/// and signalled only if it is still listed afterwards, so a pid reused by a process
/// outside the cgroup is never hit. Never signals this process.
pub(super) fn signal_members(procs: &Path) {
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() };
    let pids: Vec<i32> = read_pids(procs).into_iter().filter(|&p| p != me).collect();
    if pids.is_empty() {
        return;
    }
    let mut pinned = Vec::with_capacity(pids.len());
    let mut no_pidfd = false;
    for &pid in &pids {
        // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if fd >= 0 {
            // SAFETY: the kernel just returned this descriptor to us.
            pinned.push((pid, unsafe { OwnedFd::from_raw_fd(fd as i32) }));
        } else if io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) {
            no_pidfd = true;
        }
    }
    let still: BTreeSet<i32> = read_pids(procs).into_iter().collect();
    for (pid, fd) in &pinned {
        if still.contains(pid) {
            // SAFETY: signalling through a pidfd we own; no siginfo.
            unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    fd.as_raw_fd(),
                    libc::SIGKILL,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                );
            }
        }
    }
    if no_pidfd {
        // Kernels before 5.3: plain kill(2), with the small pid-reuse window that implies.
        for pid in pids.iter().filter(|p| still.contains(p)) {
            if !pinned.iter().any(|(q, _)| q == pid) {
                // SAFETY: kill has no memory preconditions.
                unsafe { libc::kill(*pid, libc::SIGKILL) };
            }
        }
    }
}

/// rmdir `dir` after any child cgroups (depth-bounded; `read_dir` types are lstat's, so
/// no link is followed).
pub(super) fn remove_tree(dir: &Path, depth: u32) -> Result<(), CgroupError> {
    if depth < 8
        && let Ok(entries) = fs::read_dir(dir)
    {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&e.path(), depth + 1)?;
            }
        }
    }
    match fs::remove_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => Err(CgroupError::Busy {
            path: dir.to_path_buf(),
        }),
        Err(e) => Err(io_err("removing", dir)(e)),
    }
}
