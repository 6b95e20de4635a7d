//! Starting `Runner.Listener` in its own session with a scrubbed environment, and reaping it.
//!
//! The child gets: the JIT config only in `ACTIONS_RUNNER_INPUT_JITCONFIG` (never in
//! argv), an environment cleared down to a short allow-list, its own session (and so
//! its own process group), no descriptors but stdin (`/dev/null`), stdout and stderr
//! (both appended to the attempt's log file), cwd = its root, and optionally another
//! user. Runners outlive the daemon: after a restart the daemon is not their parent,
//! so liveness comes from `proc::is_alive`, and the exit code of a re-adopted runner
//! is unknowable ([`ExitInfo::Unknown`]).

use std::ffi::OsString;
use std::fmt;
use std::fs::{self, OpenOptions};
use std::io;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::proc::{Pid, process_start_time};
use super::root::{InstallError, check_install};
use super::user::RunAsUser;
use crate::secret::Secret;

/// The variable the runner reads its JIT configuration from.
pub const JIT_ENV: &str = "ACTIONS_RUNNER_INPUT_JITCONFIG";

/// The child's PATH unless the caller passes another in `extra_env`: the daemon's own
/// PATH may name directories only the daemon should use.
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Variables copied from the daemon's environment when set: locale and time zone only.
const PASS_THROUGH: &[&str] = &["LANG", "LC_ALL", "TZ"];

/// What to start.
pub struct SpawnSpec<'a> {
    /// The attempt's root (see `root::prepare_root`): `bin/Runner.Listener` lives here.
    pub root: &'a Path,
    /// `STATE_DIR/logs/<id>.log`: created 0600 if missing, appended to.
    pub log_path: &'a Path,
    pub jit_config: &'a Secret,
    /// Run as this user (the daemon must be root). Look it up with `user::lookup_user`.
    pub run_as: Option<&'a RunAsUser>,
    /// Extra variables the host and profile set (`domain::runner_env::merged`, checked
    /// there), added after the defaults (may override PATH, LANG...). Never the JIT
    /// variable.
    pub extra_env: &'a [(String, String)],
    /// The runner's own `HOME` and `TMPDIR` (its root's `_home` and `_tmp`), in place
    /// of the user's home and the shared `/tmp`.
    pub home: Option<&'a Path>,
    pub tmp: Option<&'a Path>,
    /// The attempt's cgroups, joined between fork and exec, before the identity
    /// changes: from its first instruction the runner is counted, limited and killable
    /// as one.
    pub cgroup: Option<std::sync::Arc<super::cgroup::JoinFds>>,
    /// Contain the runner: `no_new_privs` (a setuid binary such as sudo gains it
    /// nothing) and no ambient capabilities, whatever the daemon holds.
    pub contain: bool,
    /// Where the runner's process writes its own pid before it execs (created 0600 by
    /// the daemon): the record of a spawn that does not depend on the daemon living
    /// long enough to save it (see `proc::recover_runner`).
    pub pid_file: Option<&'a Path>,
}

/// A started runner: its identity for `proc::is_alive` and the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spawned {
    pub pid: Pid,
    pub start_time: u64,
}

#[derive(Debug)]
pub enum SpawnError {
    /// The root does not hold a runner install.
    Install(InstallError),
    /// The log file or its directory could not be created.
    LogFile { path: PathBuf, source: io::Error },
    /// `run_as` needs the daemon to run as root.
    RunAsNeedsRoot { user: String },
    /// An extra variable's name or value cannot be passed.
    BadEnv { name: String },
    /// fork/exec failed (the error from the child is carried back by std).
    Spawn { program: PathBuf, source: io::Error },
    /// The child vanished before its start time could be read (it was reaped by
    /// someone else): treat as a crash at start.
    Vanished { pid: Pid },
}

impl fmt::Display for SpawnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpawnError::Install(e) => write!(f, "{e}"),
            SpawnError::LogFile { path, source } => write!(
                f,
                "cannot open runner log {}: {source}; check the state directory is writable",
                path.display()
            ),
            SpawnError::RunAsNeedsRoot { user } => write!(
                f,
                "run_as {user:?} needs the daemon to run as root; run it as root or clear run_as"
            ),
            SpawnError::BadEnv { name } => write!(
                f,
                "environment variable {name:?} cannot be passed to the runner: names must be non-empty \
                 without '=' or NUL, values without NUL, and the JIT variable is reserved"
            ),
            SpawnError::Spawn { program, source } => {
                write!(f, "cannot start {}: {source}", program.display())
            }
            SpawnError::Vanished { pid } => {
                write!(f, "runner process {pid} vanished right after it started")
            }
        }
    }
}

impl std::error::Error for SpawnError {}

/// The child's environment, without the JIT variable (added last by [`spawn_runner`]).
/// `daemon_env` reads the daemon's environment; a parameter so this is tested pure.
pub fn runner_env(
    daemon_env: impl Fn(&str) -> Option<OsString>,
    run_as: Option<&RunAsUser>,
    child_is_root: bool,
    extra_env: &[(String, String)],
) -> Result<Vec<(OsString, OsString)>, SpawnError> {
    let mut env: Vec<(OsString, OsString)> = Vec::new();
    let mut set = |k: &str, v: OsString| {
        env.retain(|(n, _)| n != k);
        env.push((k.into(), v));
    };
    set("PATH", DEFAULT_PATH.into());
    match run_as {
        Some(u) => {
            set("HOME", u.home.clone().into_os_string());
            set("USER", u.name.clone().into());
            set("LOGNAME", u.name.clone().into());
        }
        None => {
            set("HOME", daemon_env("HOME").unwrap_or_else(|| "/".into()));
            for k in ["USER", "LOGNAME"] {
                if let Some(v) = daemon_env(k) {
                    set(k, v);
                }
            }
        }
    }
    for k in PASS_THROUGH {
        if let Some(v) = daemon_env(k) {
            set(k, v);
        }
    }
    if daemon_env("LANG").is_none() && daemon_env("LC_ALL").is_none() {
        set("LANG", "C.UTF-8".into());
    }
    if child_is_root {
        // The runner refuses to run as root without this; running as root was the
        // owner's choice (no run_as while the daemon is root).
        set("RUNNER_ALLOW_RUNASROOT", "1".into());
    }
    for (k, v) in extra_env {
        let bad_name = k.is_empty() || k.contains('=') || k.contains('\0') || k == JIT_ENV;
        if bad_name || v.contains('\0') {
            return Err(SpawnError::BadEnv { name: k.clone() });
        }
        set(k, v.into());
    }
    Ok(env)
}

/// Opens (creating 0600, and the directory 0700) the attempt's log for appending.
/// Opens (truncated, 0600) the file a spawned process writes its own pid to before it
/// execs, if it has one.
pub(crate) fn open_pid_file(path: Option<&Path>) -> Result<Option<fs::File>, SpawnError> {
    path.map(|p| {
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(p)
            .map_err(|source| SpawnError::LogFile {
                path: p.to_path_buf(),
                source,
            })
    })
    .transpose()
}

pub fn open_log(path: &Path) -> Result<fs::File, SpawnError> {
    let err = |source| SpawnError::LogFile {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(err)?;
    }
    let file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
        .map_err(err)?;
    // A file left by an older version or a hand-made one may be wider than 0600; the
    // log can hold job output, which is the repository owner's business only.
    file.set_permissions(fs::Permissions::from_mode(0o600))
        .map_err(err)?;
    Ok(file)
}

/// Starts `<root>/bin/Runner.Listener run`. Returns as soon as the process exists;
/// whether it reaches `Listening for Jobs` is read from its log.
pub fn spawn_runner(spec: &SpawnSpec<'_>) -> Result<Spawned, SpawnError> {
    let program = check_install(spec.root).map_err(SpawnError::Install)?;
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    if let Some(u) = spec.run_as
        && euid != 0
    {
        return Err(SpawnError::RunAsNeedsRoot {
            user: u.name.clone(),
        });
    }
    let child_is_root = match spec.run_as {
        Some(u) => u.uid == 0,
        None => euid == 0,
    };
    let mut env = runner_env(
        |k| std::env::var_os(k),
        spec.run_as,
        child_is_root,
        spec.extra_env,
    )?;
    for (k, v) in [("HOME", spec.home), ("TMPDIR", spec.tmp)] {
        if let Some(v) = v {
            env.retain(|(n, _)| n != k);
            env.push((k.into(), v.as_os_str().to_owned()));
        }
    }
    let log = open_log(spec.log_path)?;
    let pid_file = open_pid_file(spec.pid_file)?;
    let pid_fd = pid_file.as_ref().map(std::os::fd::AsRawFd::as_raw_fd);
    let log_err = log.try_clone().map_err(|source| SpawnError::LogFile {
        path: spec.log_path.to_path_buf(),
        source,
    })?;

    let mut cmd = Command::new(&program);
    cmd.arg("run")
        .current_dir(spec.root)
        .env_clear()
        .envs(env)
        .env(JIT_ENV, spec.jit_config.expose())
        .stdin(Stdio::null())
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(log_err));

    // Computed before the fork: nothing below may allocate in the child.
    let ids = spec.run_as.map(|u| (u.uid, u.gid, u.groups.clone()));
    let cgroup = spec.cgroup.clone();
    let contain = spec.contain;
    // SAFETY: the closure only makes async-signal-safe syscalls (setsid, write to the
    // cgroup files opened before the fork, prctl, umask, setgroups, setgid, setuid,
    // close_range/fcntl) and does not allocate. Identity is changed here rather than
    // with CommandExt::uid/gid because std runs pre_exec after its own setuid, when
    // setgroups/setsid/joining a cgroup may no longer be permitted, and std would
    // otherwise drop every supplementary group instead of the user's own (initgroups).
    unsafe {
        cmd.pre_exec(move || {
            if libc::setsid() < 0 {
                return Err(io::Error::last_os_error());
            }
            if let Some(fd) = pid_fd {
                write_pid(fd);
            }
            if let Some(fds) = &cgroup {
                fds.join_self()?;
            }
            if contain
                && (libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                    || libc::prctl(
                        libc::PR_CAP_AMBIENT,
                        libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
                        0,
                        0,
                        0,
                    ) != 0)
            {
                return Err(io::Error::last_os_error());
            }
            // The daemon writes with umask 077; a job's own files want the usual 022.
            libc::umask(0o022);
            if let Some((uid, gid, groups)) = &ids
                && (libc::setgroups(groups.len(), groups.as_ptr()) != 0
                    || libc::setgid(*gid) != 0
                    || libc::setuid(*uid) != 0)
            {
                return Err(io::Error::last_os_error());
            }
            mark_cloexec_from(3);
            Ok(())
        });
    }

    let child = cmd.spawn().map_err(|source| SpawnError::Spawn {
        program: program.clone(),
        source,
    })?;
    let pid = child.id() as Pid;
    // Dropping `Child` neither waits nor kills: the runner must outlive this handle,
    // and exits are collected with `reap_child`/`reap_children`.
    drop(child);
    // We are the parent and have not reaped it, so /proc/<pid> exists (if only as a
    // zombie) and its start time is readable.
    let start_time = process_start_time(pid).ok_or(SpawnError::Vanished { pid })?;
    Ok(Spawned { pid, start_time })
}

/// Writes this process's pid in decimal to `fd`. Between fork and exec: a stack buffer
/// and one `write`, nothing that allocates.
pub(crate) fn write_pid(fd: i32) {
    // SAFETY: getpid has no preconditions.
    let mut pid = unsafe { libc::getpid() } as u32;
    let mut buf = [0u8; 11];
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (pid % 10) as u8;
        pid /= 10;
        if pid == 0 {
            break;
        }
    }
    // SAFETY: writing bytes of a live stack buffer to a descriptor the parent opened.
    unsafe { libc::write(fd, buf[at..].as_ptr().cast(), buf.len() - at) };
}

/// Sets FD_CLOEXEC on every descriptor from `first` up, so exec closes them all.
/// (Closing outright would also close std's error-reporting pipe.) Runs between fork
/// and exec: syscalls only.
pub(crate) fn mark_cloexec_from(first: u32) {
    // SAFETY: close_range with CLOEXEC only changes descriptor flags.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if rc == 0 {
        return;
    }
    // Kernels before 5.11: walk the descriptor table up to the soft limit.
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid out-pointer.
    let max = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
        lim.rlim_cur.min(1 << 20) as i32
    } else {
        65536
    };
    for fd in first as i32..max {
        // SAFETY: fcntl on a possibly-closed descriptor just fails with EBADF.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags >= 0 {
                libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
            }
        }
    }
}

/// How a runner ended, as far as the daemon can know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitInfo {
    Code(i32),
    Signal(i32),
    /// Not our child (re-adopted after a daemon restart, or already reaped): the
    /// exit code is unknowable; the runner's log lines are all there is.
    Unknown,
}

impl ExitInfo {
    /// Decodes a `waitpid` status.
    pub fn from_wait_status(status: i32) -> ExitInfo {
        if libc::WIFEXITED(status) {
            ExitInfo::Code(libc::WEXITSTATUS(status))
        } else if libc::WIFSIGNALED(status) {
            ExitInfo::Signal(libc::WTERMSIG(status))
        } else {
            ExitInfo::Unknown
        }
    }
}

/// What [`reap_child`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reap {
    /// Our child and still running.
    Running,
    /// Our child; it exited and is now reaped.
    Exited(ExitInfo),
    /// Not (or no longer) our child: use `proc::is_alive`; its exit code is unknowable.
    NotOurChild,
}

/// Non-blocking `waitpid(pid, WNOHANG)` for one runner the daemon spawned.
pub fn reap_child(pid: Pid) -> Reap {
    if pid <= 0 {
        return Reap::NotOurChild;
    }
    loop {
        let mut status = 0;
        // SAFETY: `status` is a valid out-pointer.
        let rc = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if rc == 0 {
            return Reap::Running;
        }
        if rc == pid {
            return Reap::Exited(ExitInfo::from_wait_status(status));
        }
        if io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        return Reap::NotOurChild;
    }
}

/// Non-blocking `waitpid(-1, WNOHANG)` loop: every exited child of this process, with
/// how it ended. It reaps *any* child, so only call it in a process whose only
/// children are runners (the daemon); elsewhere use [`reap_child`] per pid.
pub fn reap_children() -> Vec<(Pid, ExitInfo)> {
    let mut out = Vec::new();
    loop {
        let mut status = 0;
        // SAFETY: `status` is a valid out-pointer.
        let rc = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if rc > 0 {
            out.push((rc, ExitInfo::from_wait_status(status)));
            continue;
        }
        if rc < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        // 0: children remain but none has exited; -1/ECHILD: no children at all.
        return out;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get<'a>(env: &'a [(OsString, OsString)], k: &str) -> Option<&'a str> {
        env.iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.to_str().unwrap())
    }

    #[test]
    fn env_is_an_allow_list() {
        let daemon = |k: &str| match k {
            "HOME" => Some("/root".into()),
            "GITHUB_TOKEN" => Some("ghp_x".into()),
            "TZ" => Some("UTC".into()),
            _ => None,
        };
        let env = runner_env(daemon, None, true, &[("FOO".into(), "bar".into())]).unwrap();
        assert_eq!(get(&env, "HOME"), Some("/root"));
        assert_eq!(get(&env, "PATH"), Some(DEFAULT_PATH));
        assert_eq!(get(&env, "TZ"), Some("UTC"));
        assert_eq!(get(&env, "LANG"), Some("C.UTF-8"));
        assert_eq!(get(&env, "RUNNER_ALLOW_RUNASROOT"), Some("1"));
        assert_eq!(get(&env, "FOO"), Some("bar"));
        assert_eq!(get(&env, "GITHUB_TOKEN"), None);
    }

    #[test]
    fn run_as_sets_home_and_no_root_flag() {
        let u = RunAsUser {
            name: "ci".into(),
            uid: 1001,
            gid: 1001,
            home: "/home/ci".into(),
            groups: vec![1001],
        };
        let env = runner_env(|_| Some("/root".into()), Some(&u), false, &[]).unwrap();
        assert_eq!(get(&env, "HOME"), Some("/home/ci"));
        assert_eq!(get(&env, "USER"), Some("ci"));
        assert_eq!(get(&env, "RUNNER_ALLOW_RUNASROOT"), None);
        assert_eq!(get(&env, "LANG"), Some("/root"));
    }

    #[test]
    fn extra_env_may_override_but_not_the_jit() {
        let over = [("PATH".to_string(), "/opt/bin".to_string())];
        let env = runner_env(|_| None, None, false, &over).unwrap();
        assert_eq!(get(&env, "PATH"), Some("/opt/bin"));
        assert_eq!(env.iter().filter(|(k, _)| k == "PATH").count(), 1);
        for bad in [(JIT_ENV, "x"), ("", "x"), ("A=B", "x"), ("A", "x\0y")] {
            let extra = [(bad.0.to_string(), bad.1.to_string())];
            assert!(matches!(
                runner_env(|_| None, None, false, &extra),
                Err(SpawnError::BadEnv { .. })
            ));
        }
    }

    #[test]
    fn decodes_wait_status() {
        assert_eq!(ExitInfo::from_wait_status(3 << 8), ExitInfo::Code(3));
        assert_eq!(ExitInfo::from_wait_status(9), ExitInfo::Signal(9));
    }
}
