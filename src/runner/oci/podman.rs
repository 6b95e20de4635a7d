//! The edge to Podman: finding the program (`RUNNER_MANAGER_PODMAN`, else `podman` on
//! the daemon's `PATH`), reading its facts, starting an attempt's container as the
//! attempt's process (its own session, output to the attempt's log, the JIT config
//! written to its stdin), and finding, reading and removing what an attempt left.
//! Every call but the container's own run is bounded: by [`CALL_TIMEOUT`] on a worker,
//! by [`QUICK_TIMEOUT`] where a thread that must keep its beat waits (the main thread's
//! fitness look and sweep, a pass's OOM read).

use super::command;
use crate::domain::oci_readiness::Facts;
use crate::runner::proc::process_start_time;
use crate::runner::spawn::{SpawnError, Spawned, open_log};
use crate::secret::Secret;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The variable that names the Podman program (an absolute path) in place of the
/// `podman` found on `PATH`.
pub const PODMAN_ENV: &str = "RUNNER_MANAGER_PODMAN";

/// How long one Podman call (not a container's run) may take before it is killed and
/// counted as failed: Podman waits on its storage lock, which a stuck call can hold.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// The bound of a call made where a heartbeat or a pass waits on it: `podman info` and
/// `inspect` answer in well under a second unless the storage lock is held.
pub const QUICK_TIMEOUT: Duration = Duration::from_secs(5);

/// Output kept of one call; more is cut.
const MAX_OUTPUT: u64 = 256 * 1024;

/// A located Podman program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Podman {
    pub program: PathBuf,
    /// How long one call may take ([`CALL_TIMEOUT`] unless `quick`).
    pub timeout: Duration,
}

impl Podman {
    /// `RUNNER_MANAGER_PODMAN` when set (it must be an absolute path), else the first
    /// executable `podman` on `PATH`.
    pub fn locate() -> Result<Podman, String> {
        if let Some(p) = std::env::var_os(PODMAN_ENV) {
            let p = PathBuf::from(p);
            if !p.is_absolute() || !is_executable(&p) {
                return Err(format!(
                    "{PODMAN_ENV}={} is not an absolute path to an executable",
                    p.display()
                ));
            }
            return Ok(Podman {
                program: p,
                timeout: CALL_TIMEOUT,
            });
        }
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .filter(|d| d.is_absolute())
            .map(|d| d.join("podman"))
            .find(|p| is_executable(p))
            .map(|program| Podman {
                program,
                timeout: CALL_TIMEOUT,
            })
            .ok_or_else(|| "podman is not installed (not found on PATH)".to_string())
    }

    /// This Podman with its calls bounded by [`QUICK_TIMEOUT`].
    pub fn quick(self) -> Podman {
        Podman {
            timeout: QUICK_TIMEOUT,
            ..self
        }
    }

    /// Runs `podman ARGS` to its end (at most `timeout`): its stdout, or why it failed
    /// (its stderr's last line).
    pub fn call(&self, args: &[String]) -> Result<String, String> {
        let mut child = Command::new(&self.program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", self.program.display()))?;
        // Each pipe read on its own thread (a full stderr must not stall stdout); the
        // child's exit, not the pipes' end, ends the wait (a process it left behind
        // may hold them open).
        let read = |pipe: Option<Box<dyn Read + Send>>| {
            let (tx, rx) = std::sync::mpsc::channel();
            // A thread that cannot start drops `tx`: that pipe reads as empty.
            let _ = std::thread::Builder::new()
                .name("podman-pipe".into())
                .spawn(move || {
                    let mut text = String::new();
                    if let Some(p) = pipe {
                        let _ = p.take(MAX_OUTPUT).read_to_string(&mut text);
                    }
                    let _ = tx.send(text);
                });
            rx
        };
        let out = read(
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        );
        let err = read(
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        );
        let deadline = Instant::now() + self.timeout;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Ok(None) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!(
                        "podman {} did not answer within {:?}",
                        args.first().map_or("", String::as_str),
                        self.timeout
                    ));
                }
                Err(e) => return Err(format!("podman: {e}")),
            }
        };
        let grace = Duration::from_secs(1);
        let o = out.recv_timeout(grace).unwrap_or_default();
        let e = err.recv_timeout(grace).unwrap_or_default();
        if status.success() {
            Ok(o)
        } else {
            let last = e.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
            Err(format!(
                "podman {} failed ({status}){}{}",
                args.first().map_or("", String::as_str),
                if last.is_empty() { "" } else { ": " },
                last.trim()
            ))
        }
    }

    /// The readiness facts: `podman info`, then whether a container size is taken.
    pub fn facts(&self) -> Facts {
        let info = match self.call(&["info".into(), "--format=json".into()]) {
            Ok(json) => json,
            Err(why) => {
                return Facts {
                    podman: Some(Err(why)),
                    ..Facts::default()
                };
            }
        };
        let mut f = super::info::parse_info(&info);
        if matches!(f.podman, Some(Ok(_))) {
            f.quota_probe = Some(self.call(&command::quota_probe_args()).map(|_| ()));
        }
        f
    }

    /// This host's containers (or one attempt's): (name, attempt).
    pub fn containers(
        &self,
        host_id: &str,
        attempt: Option<i64>,
    ) -> Result<Vec<(String, i64)>, String> {
        self.call(&command::ps_args(host_id, attempt))
            .map(|out| command::parse_ps(&out))
    }

    /// Removes the named containers, killing what runs in them.
    pub fn remove(&self, names: &[String]) -> Result<(), String> {
        if names.is_empty() {
            return Ok(());
        }
        self.call(&command::rm_args(names)).map(|_| ())
    }

    /// Whether the kernel's OOM killer ended the container; `None` when unknown.
    pub fn oom_killed(&self, name: &str) -> Option<bool> {
        match self.call(&command::oom_args(name)).ok()?.trim() {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        }
    }

    /// The container's cgroup directory under `root` (the cgroup v2 mount), once it
    /// runs; `None` before, after, or when Podman cannot say.
    pub fn cgroup_dir(&self, name: &str, root: &Path) -> Option<PathBuf> {
        super::cgroup::dir_of(root, &self.call(&command::cgroup_args(name)).ok()?)
    }

    /// Starts `podman run` (`args` from `command::run_args`) as the attempt's process:
    /// its own session (so the daemon signals it as it does a native runner), its pid
    /// written to `pid_file` by the process itself before it execs, stdout and stderr
    /// appended to `log`, and `jit` written to its stdin with a newline, then closed.
    pub fn spawn_run(
        &self,
        args: &[String],
        log: &Path,
        pid_file: Option<&Path>,
        jit: &Secret,
    ) -> Result<Spawned, SpawnError> {
        let out = open_log(log)?;
        let err_log = out.try_clone().map_err(|source| SpawnError::LogFile {
            path: log.to_path_buf(),
            source,
        })?;
        let pid_file = crate::runner::spawn::open_pid_file(pid_file)?;
        let pid_fd = pid_file.as_ref().map(std::os::fd::AsRawFd::as_raw_fd);
        let mut cmd = Command::new(&self.program);
        cmd.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err_log));
        // SAFETY: only async-signal-safe calls (setsid, write, close_range/fcntl),
        // nothing allocates.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if let Some(fd) = pid_fd {
                    crate::runner::spawn::write_pid(fd);
                }
                crate::runner::spawn::mark_cloexec_from(3);
                Ok(())
            });
        }
        let mut child = cmd.spawn().map_err(|source| SpawnError::Spawn {
            program: self.program.clone(),
            source,
        })?;
        let pid = child.id() as crate::runner::Pid;
        if let Some(mut stdin) = child.stdin.take() {
            // A container that died before reading leaves a broken pipe: its exit
            // (read from its log and status) says why.
            let _ = stdin
                .write_all(jit.expose().as_bytes())
                .and_then(|()| stdin.write_all(b"\n"));
        }
        drop(child);
        let start_time = process_start_time(pid).ok_or(SpawnError::Vanished { pid })?;
        Ok(Spawned { pid, start_time })
    }
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The facts of the Podman `locate` finds, each call [`QUICK_TIMEOUT`] at most; a
/// Podman that cannot be found is the first failing fact.
pub fn facts() -> Facts {
    match Podman::locate() {
        Ok(p) => p.quick().facts(),
        Err(why) => Facts {
            podman: Some(Err(why)),
            ..Facts::default()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `/bin/sh` standing in for Podman: `call(["-c", SCRIPT])` (no file written, so
    /// no other test's fork can hold it busy).
    fn sh() -> Podman {
        Podman {
            program: "/bin/sh".into(),
            timeout: Duration::from_millis(300),
        }
    }

    fn args(script: &str) -> Vec<String> {
        vec!["-c".into(), script.into()]
    }

    #[test]
    fn a_call_gives_stdout_or_the_last_words_of_stderr() {
        assert_eq!(sh().call(&args("echo fine")).unwrap(), "fine\n");
        let e = sh()
            .call(&args(
                "echo one >&2; echo 'Error: no such thing' >&2; exit 125",
            ))
            .unwrap_err();
        assert!(
            e.starts_with("podman -c failed") && e.ends_with(": Error: no such thing"),
            "{e}"
        );
    }

    #[test]
    fn a_call_that_hangs_is_killed_and_fails() {
        let e = sh().call(&args("exec sleep 30")).unwrap_err();
        assert!(e.contains("podman -c did not answer within"), "{e}");
    }
}
