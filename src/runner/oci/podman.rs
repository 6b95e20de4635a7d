//! The edge to Podman: finding the program (`RUNNER_MANAGER_PODMAN`, else `podman` on
//! the daemon's `PATH`), reading its facts, starting an attempt's container as the
//! attempt's process (its own session, output to the attempt's log, the JIT config
//! written to its stdin), and finding, reading and removing what an attempt left.
//! Every call but the container's own run is bounded by [`CALL_TIMEOUT`].

use super::command;
use super::readiness::{self, Facts};
use crate::runner::proc::process_start_time;
use crate::runner::spawn::{SpawnError, Spawned, open_log};
use crate::secret::Secret;
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The variable that names the Podman program (an absolute path) in place of the
/// `podman` found on `PATH`.
pub const PODMAN_ENV: &str = "RUNNER_MANAGER_PODMAN";

/// How long one Podman call (not a container's run) may take before it is killed and
/// counted as failed: Podman waits on its storage lock, which a stuck call can hold.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// Output kept of one call; more is cut.
const MAX_OUTPUT: u64 = 256 * 1024;

/// A located Podman program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Podman {
    pub program: PathBuf,
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
            return Ok(Podman { program: p });
        }
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .filter(|d| d.is_absolute())
            .map(|d| d.join("podman"))
            .find(|p| is_executable(p))
            .map(|program| Podman { program })
            .ok_or_else(|| "podman is not installed (not found on PATH)".to_string())
    }

    /// Runs `podman ARGS` to its end (at most [`CALL_TIMEOUT`]): its stdout, or why it
    /// failed (its stderr's last line).
    pub fn call(&self, args: &[String]) -> Result<String, String> {
        let mut child = Command::new(&self.program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", self.program.display()))?;
        let pid = child.id() as libc::pid_t;
        let (mut out, mut err) = (child.stdout.take(), child.stderr.take());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut o = String::new();
            let mut e = String::new();
            if let Some(s) = out.as_mut() {
                let _ = s.take(MAX_OUTPUT).read_to_string(&mut o);
            }
            if let Some(s) = err.as_mut() {
                let _ = s.take(MAX_OUTPUT).read_to_string(&mut e);
            }
            let _ = tx.send((o, e));
        });
        let (o, e) = match rx.recv_timeout(CALL_TIMEOUT) {
            Ok(r) => r,
            Err(_) => {
                // SAFETY: signalling our own child, not yet reaped.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                let _ = child.wait();
                return Err(format!("podman {} timed out", args.join(" ")));
            }
        };
        let status = child.wait().map_err(|e| e.to_string())?;
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
        let mut f = readiness::parse_info(&info);
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
        let pid_file = match pid_file {
            None => None,
            Some(p) => Some(
                std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .mode(0o600)
                    .open(p)
                    .map_err(|source| SpawnError::LogFile {
                        path: p.to_path_buf(),
                        source,
                    })?,
            ),
        };
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

/// The facts of the Podman `locate` finds; a Podman that cannot be found is the
/// first failing fact.
pub fn facts() -> Facts {
    match Podman::locate() {
        Ok(p) => p.facts(),
        Err(why) => Facts {
            podman: Some(Err(why)),
            ..Facts::default()
        },
    }
}
