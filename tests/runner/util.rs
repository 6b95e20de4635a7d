//! Test helpers: temp dirs, fake installs, spawning a fake runner, polling with deadlines.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use runner_manager::runner::{
    self, Reap, RootOptions, SpawnSpec, Spawned, prepare_root, reap_child, spawn_runner,
    stop_and_wait,
};
use runner_manager::secret::Secret;

/// A directory removed (robustly) on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        TempDir::under(&std::env::temp_dir(), tag)
    }

    pub fn under(base: &Path, tag: &str) -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let p = base.join(format!("rm-test-{}-{n}-{tag}", std::process::id()));
        let _ = runner::remove_root(&p);
        fs::create_dir_all(&p).unwrap();
        // World-searchable so a run_as user can reach the roots inside.
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
        TempDir(p)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = runner::remove_root(&self.0);
    }
}

/// Lays `dir` out as a runner install whose listener is `script`.
pub fn fake_install(dir: &Path, script: &str) {
    fs::create_dir_all(dir.join("bin")).unwrap();
    fs::create_dir_all(dir.join("externals/node/bin")).unwrap();
    let listener = dir.join("bin/Runner.Listener");
    fs::write(&listener, script).unwrap();
    fs::set_permissions(&listener, fs::Permissions::from_mode(0o755)).unwrap();
    fs::write(dir.join("bin/Runner.Worker.dll"), b"not really a dll").unwrap();
    fs::write(dir.join("externals/node/bin/node"), b"#!/bin/sh\n").unwrap();
    std::os::unix::fs::symlink("Runner.Listener", dir.join("bin/listener-link")).unwrap();
    fs::write(dir.join("config.sh"), b"#!/bin/sh\n").unwrap();
}

/// Polls `cond` every 10 ms until it holds or `timeout` passes.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

pub const WAIT: Duration = Duration::from_secs(10);

/// A fake runner started through the real code, stopped and reaped on drop.
pub struct FakeRunner {
    pub dir: TempDir,
    pub root: PathBuf,
    pub log: PathBuf,
    pub spawned: Spawned,
}

impl FakeRunner {
    pub fn start(tag: &str, script: &str, jit: &str) -> FakeRunner {
        FakeRunner::start_with(tag, script, jit, None)
    }

    pub fn start_with(
        tag: &str,
        script: &str,
        jit: &str,
        run_as: Option<&runner::RunAsUser>,
    ) -> FakeRunner {
        let dir = TempDir::new(tag);
        let install = dir.path().join("install");
        fake_install(&install, script);
        let state = dir.path().join("state");
        let root = runner::attempt_root(&state, 7);
        let opts = RootOptions {
            owner: run_as.map(|u| (u.uid, u.gid)),
            always_copy: false,
        };
        prepare_root(&install, &root, opts).unwrap();
        let log = runner::attempt_log(&state, 7);
        let secret = Secret::new(jit);
        let spawned = spawn_runner(&SpawnSpec {
            root: &root,
            log_path: &log,
            jit_config: &secret,
            run_as,
            extra_env: &[("RM_EXTRA".into(), "yes".into())],
            home: None,
            tmp: None,
            cgroup: None,
            contain: false,
            pid_file: None,
        })
        .unwrap();
        FakeRunner {
            dir,
            root,
            log,
            spawned,
        }
    }

    pub fn pid(&self) -> i32 {
        self.spawned.pid
    }

    pub fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits for `needle` in the log; panics with the log when it never comes.
    pub fn wait_log(&self, needle: &str) {
        assert!(
            wait_until(WAIT, || self.log_text().contains(needle)),
            "{needle:?} never appeared in the log:\n{}",
            self.log_text()
        );
    }

    /// Waits until our child has exited and returns how (reaping it).
    pub fn wait_reaped(&self) -> Reap {
        let mut last = Reap::Running;
        wait_until(WAIT, || {
            last = reap_child(self.pid());
            last != Reap::Running
        });
        last
    }
}

impl Drop for FakeRunner {
    fn drop(&mut self) {
        stop_and_wait(
            self.spawned.pid,
            self.spawned.start_time,
            Duration::from_millis(200),
        );
        let _ = reap_child(self.spawned.pid);
    }
}

pub fn proc_file(pid: i32, name: &str) -> Vec<u8> {
    fs::read(format!("/proc/{pid}/{name}")).unwrap_or_default()
}

pub fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}
