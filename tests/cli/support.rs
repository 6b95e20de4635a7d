//! Test support: a temporary state directory, running the binary, and snapshots of the
//! store's bytes.

use std::path::{Path, PathBuf};
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
        let root = std::env::temp_dir().join(format!("rm-cli-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        Dir { root }
    }

    pub fn state(&self) -> PathBuf {
        self.root.join("state")
    }

    /// Writes a file under the root and returns its path as a string.
    pub fn file(&self, name: &str, contents: &str) -> String {
        let p = self.root.join(name);
        std::fs::write(&p, contents).unwrap();
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
        assert_eq!(r.code, 0, "{args:?} failed:\n{}", r.stderr);
        r
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

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

/// The bytes of `state.db` and `state.db-wal` (absent = empty), to prove that a
/// refused command wrote nothing.
pub fn snapshot(state: &Path) -> (Vec<u8>, Vec<u8>) {
    let read = |n: &str| std::fs::read(state.join(n)).unwrap_or_default();
    (read("state.db"), read("state.db-wal"))
}

/// A store with a target (token in a file) and a profile `linux` at revision 1.
pub fn seeded(tag: &str) -> Dir {
    let d = Dir::new(tag);
    let tok = d.file("token", "secret-token-value");
    d.ok(&[
        "target",
        "add",
        "octo",
        "--repo",
        "octo/app",
        "--token-file",
        &tok,
    ]);
    d.ok(&[
        "profile", "add", "linux", "--target", "octo", "--labels", "gpu", "--max", "4",
    ]);
    d
}
