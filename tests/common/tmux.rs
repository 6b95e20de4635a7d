//! A private tmux server for tests that drive the binary in a real terminal: start a
//! shell in it, type, press keys, and poll the screen with a deadline.

#![allow(dead_code)]

use std::process::{Command, Output};
use std::time::{Duration, Instant};

pub const PROMPT: &str = "rmtest$ ";

/// A private tmux server (its own socket), killed when dropped.
pub struct Tmux {
    socket: String,
}

impl Tmux {
    pub fn start(shell_env: &[(&str, &str)]) -> Tmux {
        // One socket per server: two tests of one binary never share one.
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let t = Tmux {
            socket: format!("rm-tui-test-{}-{n}", std::process::id()),
        };
        let mut cmd = String::from("env");
        for (k, v) in shell_env {
            cmd.push_str(&format!(" {k}='{v}'"));
        }
        cmd.push_str(&format!(" PS1='{PROMPT}' sh"));
        let out = t.cmd(&[
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-x",
            "100",
            "-y",
            "30",
            "-s",
            "t",
            &cmd,
        ]);
        assert!(out.status.success(), "tmux new-session: {out:?}");
        t
    }

    pub fn cmd(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("run tmux (install it: apt-get install -y tmux)")
    }

    pub fn capture(&self) -> String {
        String::from_utf8_lossy(&self.cmd(&["capture-pane", "-p", "-t", "t"]).stdout).into_owned()
    }

    pub fn display(&self, format: &str) -> String {
        String::from_utf8_lossy(
            &self
                .cmd(&["display-message", "-p", "-t", "t", format])
                .stdout,
        )
        .trim()
        .to_string()
    }

    pub fn type_text(&self, text: &str) {
        assert!(
            self.cmd(&["send-keys", "-t", "t", "-l", text])
                .status
                .success()
        );
    }

    pub fn key(&self, key: &str) {
        assert!(self.cmd(&["send-keys", "-t", "t", key]).status.success());
    }

    /// Polls the screen until `ok` holds, or fails with the last screen.
    pub fn wait(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        self.wait_for(what, Duration::from_secs(20), ok)
    }

    /// As [`Tmux::wait`], with a deadline of `within`.
    pub fn wait_for(&self, what: &str, within: Duration, ok: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + within;
        loop {
            let screen = self.capture();
            if ok(&screen) {
                return screen;
            }
            if Instant::now() > deadline {
                panic!("timed out waiting for {what}; screen:\n{screen}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn wait_alternate(&self, on: bool) {
        let want = if on { "1" } else { "0" };
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.display("#{alternate_on}") != want {
            assert!(
                Instant::now() < deadline,
                "alternate screen never became {want}; screen:\n{}",
                self.capture()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Types a command at the shell and waits for its output: proof that the terminal
    /// is back in cooked mode with echo (in raw mode Enter sends a bare CR and the
    /// shell never runs the line).
    pub fn shell_works(&self, tag: &str) {
        self.type_text(&format!("echo ok-{tag}-$((40+2))"));
        self.key("Enter");
        self.wait("the shell to run a command", |s| {
            s.contains(&format!("ok-{tag}-42"))
        });
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
    }
}
