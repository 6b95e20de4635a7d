//! Shared fixtures: a temporary directory, running the binary, a simulated GitHub with
//! a target added through the CLI.

#![allow(dead_code)]

use runner_manager::sim::{SimConfig, SimGitHub, SimHandle};
use std::path::{Path, PathBuf};
use std::process::Command;

pub const BIN: &str = env!("CARGO_BIN_EXE_runner-manager");
pub const PAT: &str = "ghp_SHIPTESTtoken0123456789abcdef";

pub struct Dir {
    pub root: PathBuf,
}

impl Dir {
    pub fn new(tag: &str) -> Dir {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let root = std::env::temp_dir().join(format!("rm-ship-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        Dir { root }
    }

    pub fn state(&self) -> PathBuf {
        self.root.join("state")
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }

    /// Runs the binary with this test's state directory.
    pub fn run(&self, args: &[&str]) -> Run {
        let out = Command::new(BIN)
            .arg("--state-dir")
            .arg(self.state())
            .args(args)
            .env_remove("RUNNER_MANAGER_STATE_DIR")
            .output()
            .expect("run runner-manager");
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    pub fn ok(&self, args: &[&str]) -> Run {
        let r = self.run(args);
        assert_eq!(
            r.code, 0,
            "{args:?} failed:\nstdout:\n{}\nstderr:\n{}",
            r.stdout, r.stderr
        );
        r
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// A sim with repository `octo/app`, the test PAT, and our binary as the runner its
/// tarballs exec; plus target `t` added to `dir`'s store through the CLI.
pub fn sim_and_target(dir: &Dir) -> SimHandle {
    let h = SimGitHub::start(SimConfig::default()).expect("sim starts");
    h.add_org("octo");
    h.add_repo("octo/app", true);
    h.add_pat(PAT);
    h.with_state(|st| st.runner_binary = Some(PathBuf::from(BIN)));
    let token = dir.path("token");
    std::fs::write(&token, PAT).unwrap();
    dir.ok(&[
        "target",
        "add",
        "t",
        "--repo",
        "octo/app",
        "--api-url",
        h.url(),
        "--token-file",
        token.to_str().unwrap(),
    ]);
    h
}

pub fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

pub fn on_path(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}
