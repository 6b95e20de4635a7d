//! Running `systemctl` for `service install|status|uninstall`: found on `PATH`, every
//! call bounded in time (a hung manager must not hang the command), its failure named
//! with the exact call, its exit code and the first line it printed.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// How long one `systemctl` call that changes something may take: longer than the
/// unit's own bounds (a `start` waits for the daemon's readiness up to systemd's
/// default 90 s, a `stop` up to `TimeoutStopSec=90s`), so systemd's answer comes first.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(120);

/// How long a question (`is-enabled`, `is-active`) may take, as `doctor`'s does.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(10);

/// `systemctl` for the system manager or, with `user`, the caller's user manager.
#[derive(Debug, Clone)]
pub struct Systemctl {
    pub program: PathBuf,
    pub user: bool,
    pub timeout: Duration,
}

/// What one call printed and how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Answer {
    /// The first non-empty line it printed, stdout first (`is-enabled` answers there).
    pub fn first_line(&self) -> String {
        self.stdout
            .lines()
            .chain(self.stderr.lines())
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("")
            .to_string()
    }
}

/// Looks `program` up on `PATH`.
pub fn on_path(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(program))
            .find(|c| c.is_file())
    })
}

/// A call as a person would type it: `systemctl [--user] ARGS`.
pub fn describe(user: bool, args: &[&str]) -> String {
    let mut words = vec!["systemctl"];
    if user {
        words.push("--user");
    }
    words.extend_from_slice(args);
    words.join(" ")
}

impl Systemctl {
    /// `systemctl` from `PATH`, if there is one, each call bounded by `timeout`.
    pub fn find(user: bool, timeout: Duration) -> Option<Systemctl> {
        Some(Systemctl {
            program: on_path("systemctl")?,
            user,
            timeout,
        })
    }

    /// The call as a person would type it, for messages.
    pub fn describe(&self, args: &[&str]) -> String {
        describe(self.user, args)
    }

    /// Runs one call and waits for it, at most `timeout`; `Err` names the call when it
    /// could not run or did not end in time (it is killed then).
    pub fn call(&self, args: &[&str]) -> Result<Answer, String> {
        let mut cmd = Command::new(&self.program);
        if self.user {
            cmd.arg("--user");
        }
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        run_bounded(&mut cmd, self.timeout).map_err(|e| format!("'{}' {e}", self.describe(args)))
    }

    /// Runs one call that must succeed: `Err` names it, its exit code and what it said.
    pub fn must(&self, args: &[&str]) -> Result<Answer, String> {
        let a = self.call(args)?;
        if a.code == 0 {
            Ok(a)
        } else {
            Err(format!(
                "'{}' failed (exit {}): {}",
                self.describe(args),
                a.code,
                a.first_line()
            ))
        }
    }
}

/// Runs `cmd` (its output piped) to its end or the deadline: a thread waits for the
/// child and hands its output over a channel, so the wait is a `recv_timeout`, not a
/// poll; past the deadline the child is killed.
fn run_bounded(cmd: &mut Command, timeout: Duration) -> Result<Answer, String> {
    let child = cmd.spawn().map_err(|e| format!("could not run: {e}"))?;
    let pid = child.id() as libc::pid_t;
    let (tx, rx) = mpsc::channel();
    let waiter = std::thread::Builder::new()
        .name("systemctl-wait".into())
        .spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
    let waiter = match waiter {
        Ok(w) => w,
        Err(e) => {
            // SAFETY: the child was never waited for, so the pid is still this child's.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
            return Err(format!("could not be waited for: {e}"));
        }
    };
    match rx.recv_timeout(timeout) {
        Ok(Ok(out)) => {
            let _ = waiter.join();
            Ok(Answer {
                code: out.status.code().unwrap_or(-1),
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            })
        }
        Ok(Err(e)) => Err(format!("could not be waited for: {e}")),
        Err(_) => {
            // SAFETY: the child is not reaped until the waiter's wait returns, so the
            // pid is still this child's.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
            let _ = waiter.join();
            Err(format!("did not answer within {}s", timeout.as_secs()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_that_outlives_its_bound_is_killed_and_named() {
        let s = Systemctl {
            program: PathBuf::from("/bin/sh"),
            user: false,
            timeout: Duration::from_millis(200),
        };
        let e = s.call(&["-c", "exec sleep 30"]).unwrap_err();
        assert!(
            e.contains("'systemctl -c exec sleep 30' did not answer"),
            "{e}"
        );
    }

    #[test]
    fn a_failed_call_is_named_with_its_code_and_first_line() {
        let s = Systemctl {
            program: PathBuf::from("/bin/sh"),
            user: true,
            timeout: CALL_TIMEOUT,
        };
        let plain = Systemctl {
            user: false,
            ..s.clone()
        };
        let e = plain.must(&["-c", "echo nope >&2; exit 3"]).unwrap_err();
        assert_eq!(
            e,
            "'systemctl -c echo nope >&2; exit 3' failed (exit 3): nope"
        );
        let ok = plain.must(&["-c", "echo enabled"]).unwrap();
        assert_eq!(ok.first_line(), "enabled");
        assert_eq!(
            s.describe(&["is-active", "x"]),
            "systemctl --user is-active x"
        );
    }
}
