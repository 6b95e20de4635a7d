//! A temporary directory per test and the real binary run on its state directory:
//! shared by the test binaries that drive the CLI (`tests/cli`, `tests/ship`),
//! included in each with `#[path]`.

// Each test binary uses its own part of this module.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

pub const BIN: &str = env!("CARGO_BIN_EXE_runner-manager");

/// A fresh directory for one test, removed when dropped.
pub struct Dir {
    pub root: PathBuf,
}

impl Dir {
    pub fn new(tag: &str) -> Dir {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let root = std::env::temp_dir().join(format!("rm-test-{tag}-{}-{n}", std::process::id()));
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

    /// Writes a file under the root and returns its path as a string.
    /// A file private to its owner (0600): the daemon refuses token and key files that
    /// group or others can read, and most files tests write are those.
    pub fn file(&self, name: &str, contents: &str) -> String {
        use std::os::unix::fs::PermissionsExt;
        let p = self.root.join(name);
        std::fs::write(&p, contents).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        p.display().to_string()
    }

    pub fn subdir(&self, name: &str) -> String {
        let p = self.root.join(name);
        std::fs::create_dir_all(&p).unwrap();
        p.display().to_string()
    }

    /// Runs the binary with `--state-dir` set to this test's state directory.
    pub fn run(&self, args: &[&str]) -> Run {
        let out = Command::new(BIN)
            .arg("--state-dir")
            .arg(self.state())
            .args(args)
            .env_remove("RUNNER_MANAGER_STATE_DIR")
            .output()
            .expect("run runner-manager");
        Run::from(out)
    }

    /// Runs and insists on exit 0.
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

impl From<Output> for Run {
    fn from(o: Output) -> Run {
        Run {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}
