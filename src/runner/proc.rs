//! Facts about processes from /proc: start times, liveness, sessions, and signalling a runner's tree.
//!
//! The daemon is the parent of the runners it spawned only until it restarts, so
//! liveness never comes from `waitpid`: a process is identified by its pid *and* its
//! start time (field 22 of `/proc/<pid>/stat`, clock ticks since boot), which defeats
//! pid reuse. Every scan tolerates processes vanishing between listing and reading.

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A process id as the kernel gives it (`pid_t`).
pub type Pid = i32;

/// The fields of `/proc/<pid>/stat` this crate uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    pub pid: Pid,
    /// One of `R S D Z T t X I ...`; `Z` (zombie) and `X` (dead) have exited.
    pub state: u8,
    pub ppid: Pid,
    pub pgrp: Pid,
    pub session: Pid,
    /// User and system CPU time in clock ticks.
    pub utime: u64,
    pub stime: u64,
    /// CPU time of children this process has waited for, in clock ticks.
    pub cutime: u64,
    pub cstime: u64,
    /// Start time in clock ticks since boot: with the pid, the process's identity.
    pub starttime: u64,
    /// Resident set size in pages.
    pub rss_pages: u64,
}

impl ProcStat {
    /// Exited but not yet reaped by its parent (or being torn down).
    pub fn has_exited(&self) -> bool {
        matches!(self.state, b'Z' | b'X' | b'x')
    }
}

/// Parses the text of `/proc/<pid>/stat`. The command name (field 2) is in parentheses
/// and may itself contain spaces and parentheses, so fields are counted from the *last*
/// `)`.
pub fn parse_stat(text: &str) -> Option<ProcStat> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let pid = text[..open].trim().parse().ok()?;
    // Fields 3.. after the command name; index 0 here is field 3.
    let rest: Vec<&str> = text.get(close + 1..)?.split_ascii_whitespace().collect();
    let num = |field: usize| -> Option<u64> { rest.get(field - 3)?.parse().ok() };
    let int = |field: usize| -> Option<Pid> { rest.get(field - 3)?.parse().ok() };
    Some(ProcStat {
        pid,
        state: *rest.first()?.as_bytes().first()?,
        ppid: int(4)?,
        pgrp: int(5)?,
        session: int(6)?,
        utime: num(14)?,
        stime: num(15)?,
        cutime: num(16)?,
        cstime: num(17)?,
        starttime: num(22)?,
        rss_pages: num(24)?,
    })
}

/// Reads `/proc/<pid>/stat`; `None` when the process does not exist (any more).
pub fn read_stat(pid: Pid) -> Option<ProcStat> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text)
}

/// The process's start time in clock ticks since boot, or `None` when it is gone.
pub fn process_start_time(pid: Pid) -> Option<u64> {
    read_stat(pid).map(|s| s.starttime)
}

/// Whether a process identified by pid and start time still runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessStatus {
    Alive,
    /// No such process, a different process under the same pid, or a zombie (it has
    /// exited; if the daemon is its parent, `spawn::reap_child` collects the exit code).
    Gone,
}

/// Liveness from /proc, valid whether or not the daemon is the process's parent.
pub fn is_alive(pid: Pid, start_time: u64) -> ProcessStatus {
    match read_stat(pid) {
        Some(s) if s.starttime == start_time && !s.has_exited() => ProcessStatus::Alive,
        _ => ProcessStatus::Gone,
    }
}

/// Every pid listed in /proc, in no particular order.
pub fn all_pids() -> Vec<Pid> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

/// The stats of every process in session `sid` that has not exited. A runner's whole
/// tree stays in its session unless one of its processes calls `setsid` itself.
pub fn session_stats(sid: Pid) -> Vec<ProcStat> {
    all_pids()
        .into_iter()
        .filter_map(read_stat)
        .filter(|s| s.session == sid && !s.has_exited())
        .collect()
}

/// The pids of the processes of session `sid` that have not exited (zombies left out:
/// they cannot be signalled and hold no resources but their pid).
pub fn session_members(sid: Pid) -> Vec<Pid> {
    session_stats(sid).into_iter().map(|s| s.pid).collect()
}

/// Sends `signal` to process group `sid` and to every member of session `sid` (members
/// that moved to another process group inside the session would escape `killpg`).
/// Returns how many processes were signalled. Vanished processes are not errors.
///
/// The kernel keeps a session id allocated while any process is in the session, so
/// this cannot hit a stranger while members remain; with no members left it signals
/// nothing (a stranger with pid == sid would only be hit if it had made itself the
/// leader of a new session with that id, which requires it to be that pid's process,
/// hence callers check the leader's start time first: see [`signal_session`]).
pub fn kill_session(sid: Pid, signal: i32) -> usize {
    // SAFETY: getsid(0) has no preconditions.
    if sid <= 1 || sid == unsafe { libc::getsid(0) } {
        // Never let a bad record turn into kill(-1), a signal to init, or a signal to
        // the daemon's own session.
        return 0;
    }
    let mut signalled = 0;
    // SAFETY: plain syscalls with integer arguments.
    if unsafe { libc::killpg(sid, signal) } == 0 {
        signalled += 1;
    }
    let me = std::process::id() as Pid;
    for pid in session_members(sid) {
        if pid != me && unsafe { libc::kill(pid, signal) } == 0 {
            signalled += 1;
        }
    }
    signalled
}

/// What [`signal_session`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignalOutcome {
    /// The session had live processes and they were signalled.
    Signalled,
    /// Nothing of the session is left: the runner and its tree have exited.
    NothingLeft,
    /// The pid now belongs to a different process (reused): nothing was signalled.
    PidReused,
}

/// Non-blocking: signals the session of the runner `(pid, start_time)` once, after
/// checking the leader is who we think it is. The caller re-checks on its next pass.
pub fn signal_session(pid: Pid, start_time: u64, signal: i32) -> SignalOutcome {
    if let Some(s) = read_stat(pid)
        && s.starttime != start_time
    {
        // A different process owns the pid. If it is not a session leader, members of
        // the old session may still exist under this sid (the kernel holds a sid while
        // it is in use): signal them only, never the new process.
        if s.session == pid {
            return SignalOutcome::PidReused;
        }
        let members: Vec<Pid> = session_members(pid);
        if members.is_empty() {
            return SignalOutcome::PidReused;
        }
        for m in members {
            // SAFETY: plain syscall.
            unsafe { libc::kill(m, signal) };
        }
        return SignalOutcome::Signalled;
    }
    if kill_session(pid, signal) == 0 && session_members(pid).is_empty() {
        SignalOutcome::NothingLeft
    } else {
        SignalOutcome::Signalled
    }
}

/// How [`stop_and_wait`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopOutcome {
    /// Gone within the grace period after SIGTERM (or was already gone).
    Exited,
    /// Needed SIGKILL after the grace period; now gone.
    Killed,
    /// Still present after SIGKILL and a short wait (e.g. stuck in uninterruptible
    /// sleep): the caller should defer cleanup and retry.
    StillRunning,
    /// The pid belongs to another process now: nothing was signalled.
    PidReused,
}

/// How long `stop_and_wait` waits for the session to disappear after SIGKILL.
const KILL_WAIT: Duration = Duration::from_secs(2);
/// Poll period while waiting: short, and the wait is bounded by a deadline.
const POLL: Duration = Duration::from_millis(10);

/// Blocking and bounded: SIGTERM to the session, wait up to `grace` for it to empty,
/// then SIGKILL and wait up to two more seconds. Returns at the first of: session
/// empty, deadline. Use [`signal_session`] instead from a loop that must not block.
pub fn stop_and_wait(pid: Pid, start_time: u64, grace: Duration) -> StopOutcome {
    match signal_session(pid, start_time, libc::SIGTERM) {
        SignalOutcome::NothingLeft => return StopOutcome::Exited,
        SignalOutcome::PidReused => return StopOutcome::PidReused,
        SignalOutcome::Signalled => {}
    }
    if wait_session_empty(pid, grace) {
        return StopOutcome::Exited;
    }
    kill_session(pid, libc::SIGKILL);
    if wait_session_empty(pid, KILL_WAIT) {
        StopOutcome::Killed
    } else {
        StopOutcome::StillRunning
    }
}

/// Polls until session `sid` has no live member or the deadline passes.
pub fn wait_session_empty(sid: Pid, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if session_members(sid).is_empty() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(POLL);
    }
}

/// The runner a spawn left when its pid was never recorded (the daemon was killed
/// between the spawn and the write): the pid its own process wrote to `pid_file`,
/// taken only if that process still runs, leads its own session (runners call
/// `setsid`) and started no earlier than `not_before` (wall-clock ms: when the attempt
/// entered `starting`, less a second for clock granularity). Returns its identity.
pub fn recover_runner(pid_file: &Path, not_before: crate::timefmt::Millis) -> Option<(Pid, u64)> {
    let pid: Pid = fs::read_to_string(pid_file).ok()?.trim().parse().ok()?;
    let st = read_stat(pid)?;
    if st.has_exited() || st.session != pid {
        return None;
    }
    let started = boot_time_ms()? + (st.starttime * 1000 / clock_ticks().max(1)) as i64;
    (started + 1_000 >= not_before).then_some((pid, st.starttime))
}

/// When the machine booted, in wall-clock ms (`btime` of /proc/stat).
fn boot_time_ms() -> Option<i64> {
    let stat = fs::read_to_string("/proc/stat").ok()?;
    let secs: i64 = stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    Some(secs * 1000)
}

fn clock_ticks() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let v = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if v > 0 { v as u64 } else { 100 }
}

/// The processes whose working directory or executable lies under `dir`: what tests
/// and benchmarks use to look for leaked runners. The daemon never decides what to
/// kill by this (a job can make a path lead anywhere; see `daemon::host::sweep`). The daemon
/// itself is never listed. `dir` is canonicalized first because /proc shows resolved
/// paths.
pub fn processes_with_cwd_or_exe_under(dir: &Path) -> Vec<Pid> {
    let dir = fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let me = std::process::id() as Pid;
    all_pids()
        .into_iter()
        .filter(|&pid| pid != me)
        .filter(|&pid| {
            ["cwd", "exe"].iter().any(|link| {
                fs::read_link(format!("/proc/{pid}/{link}"))
                    .map(|p| undeleted(&p).starts_with(&dir))
                    .unwrap_or(false)
            })
        })
        .collect()
}

/// /proc shows a removed directory or binary as `<path> (deleted)`; the path is what
/// matters for matching a root that is half-removed.
fn undeleted(p: &Path) -> PathBuf {
    let bytes = p.as_os_str().as_bytes();
    match bytes.strip_suffix(b" (deleted)") {
        Some(b) => PathBuf::from(OsStr::from_bytes(b)),
        None => p.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_awkward_command_names() {
        let text = "4242 (a) b) (c) S 1 4242 4242 0 -1 4194560 100 0 0 0 \
                    7 3 2 1 20 0 1 0 123456 1000000 250 18446744073709551615";
        let s = parse_stat(text).unwrap();
        assert_eq!(s.pid, 4242);
        assert_eq!(s.state, b'S');
        assert_eq!((s.ppid, s.pgrp, s.session), (1, 4242, 4242));
        assert_eq!((s.utime, s.stime, s.cutime, s.cstime), (7, 3, 2, 1));
        assert_eq!(s.starttime, 123456);
        assert_eq!(s.rss_pages, 250);
        assert!(!s.has_exited());
    }

    #[test]
    fn refuses_truncated_stat() {
        assert_eq!(parse_stat("12 (x) S 1 2 3"), None);
        assert_eq!(parse_stat(""), None);
    }

    #[test]
    fn reads_own_process() {
        let me = std::process::id() as Pid;
        let start = process_start_time(me).unwrap();
        assert_eq!(is_alive(me, start), ProcessStatus::Alive);
        assert_eq!(is_alive(me, start + 1), ProcessStatus::Gone);
    }

    #[test]
    fn strips_deleted_suffix() {
        assert_eq!(
            undeleted(Path::new("/s/attempts/5 (deleted)")),
            PathBuf::from("/s/attempts/5")
        );
        assert_eq!(undeleted(Path::new("/bin/sh")), PathBuf::from("/bin/sh"));
    }
}
