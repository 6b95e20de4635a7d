//! The shipped runit recipe (`packaging/runit/`) under the real runit from Debian's
//! packages (`.ci/run` installs it; without `runsv` and `sv` these tests fail, they do
//! not skip): `runsv` supervises the daemon as a plain process, no PID 1 needed. A
//! SIGKILLed daemon is started again; `sv restart` signals the daemon's pid only, so
//! busy runners live across both and their jobs finish; `runner-manager update` hands
//! over on exit 75 and runsv starts the new binary.

use super::self_update::{installed_copy, release_dir, text, update};
use super::support::*;
use runner_manager::domain::{AttemptState, Outcome};
use runner_manager::runner::{ProcessStatus, is_alive};
use runner_manager::store::Store;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The shipped recipe's paths, which an operator edits (and this test replaces).
const PACKAGED_BIN: &str = "/usr/bin/runner-manager";
const PACKAGED_STATE: &str = "/var/lib/runner-manager";

/// `runsv` on a service directory made from `packaging/runit/` (its `run` and
/// `finish`, the paths pointed at `bin` and the world's state directory; no `log/`,
/// so the daemon's lines go to runsv's output, a file here). Dropped, it takes the
/// service down and ends runsv; anything left is killed.
struct Runsv {
    child: Child,
    dir: PathBuf,
    out: PathBuf,
}

/// `program`, which must be on PATH: the test fails, naming what to install.
fn need(program: &str) {
    let found = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()));
    assert!(
        found,
        "{program} is not on PATH: install runit (apt-get install runit; .ci/run does)"
    );
}

impl Runsv {
    fn start(w: &World, bin: &Path) -> Runsv {
        need("runsv");
        need("sv");
        let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/runit");
        let dir = w.dir.join("sv-runner-manager");
        std::fs::create_dir_all(&dir).unwrap();
        for name in ["run", "finish"] {
            let text = std::fs::read_to_string(shipped.join(name)).unwrap();
            let text = if name == "run" {
                assert!(
                    text.contains(PACKAGED_BIN) && text.contains(PACKAGED_STATE),
                    "packaging/runit/run no longer names {PACKAGED_BIN} and {PACKAGED_STATE}"
                );
                text.replace(PACKAGED_BIN, bin.to_str().unwrap())
                    .replace(PACKAGED_STATE, w.dir.to_str().unwrap())
            } else {
                text
            };
            let p = dir.join(name);
            std::fs::write(&p, text).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let out = w.dir.join("runsv.log");
        let log = std::fs::File::create(&out).unwrap();
        let child = Command::new("runsv")
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("runsv starts (install runit; .ci/run does)");
        Runsv { child, dir, out }
    }

    /// The pid runsv says it runs (`supervise/pid`), if it runs one.
    fn pid(&self) -> Option<i32> {
        std::fs::read_to_string(self.dir.join("supervise/pid"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Waits until runsv runs a daemon other than `old` and that daemon beats in the
    /// store; returns its pid.
    fn wait_daemon(&self, w: &World, old: Option<i32>) -> i32 {
        let mut now = None;
        wait_until(SETTLE, "runsv's daemon beating in the store", || {
            now = self.pid().filter(|p| Some(*p) != old).filter(|p| {
                w.store()
                    .heartbeat()
                    .ok()
                    .flatten()
                    .is_some_and(|b| b.pid as i32 == *p)
            });
            now.is_some()
        });
        now.unwrap()
    }

    /// `sv VERB DIR`; panics with its output unless it succeeded.
    fn sv(&self, verb: &str) {
        let out = Command::new("sv")
            .arg(verb)
            .arg(&self.dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "sv {verb}: {}", text(&out));
    }

    fn output(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }
}

impl Drop for Runsv {
    fn drop(&mut self) {
        let daemon = self.pid();
        // `sv exit`: TERM to the daemon, no restart, then runsv exits.
        let _ = Command::new("sv").arg("exit").arg(&self.dir).output();
        let gone = poll_until(SETTLE, || matches!(self.child.try_wait(), Ok(Some(_))));
        if !gone {
            let _ = self.child.kill();
            let _ = self.child.wait();
            if let Some(p) = daemon {
                // SAFETY: kill(2) on the daemon this test's runsv started.
                unsafe { libc::kill(p, libc::SIGKILL) };
            }
        }
        if std::thread::panicking() {
            eprintln!("--- runsv and its daemon ---\n{}", self.output());
        }
    }
}

fn assert_alive(busy: &[runner_manager::domain::Attempt], after: &str) {
    for b in busy {
        assert_eq!(
            is_alive(b.pid.unwrap(), b.pid_start.unwrap()),
            ProcessStatus::Alive,
            "busy runner of attempt {} did not survive {after}",
            b.id
        );
    }
}

#[test]
fn under_runsv_a_killed_daemon_restarts_and_busy_runners_outlive_every_restart() {
    let mut w = World::new("runit", 4);
    w.add_target("t", "acme/runit", true);
    w.add_profile(ProfileSpec::new("p", "t", &["r"]).max(2).idle_timeout(1));
    w.enqueue("acme/runit", "long1", &["r"], 12_000);
    w.enqueue("acme/runit", "long2", &["r"], 12_000);
    let sv = Runsv::start(&w, Path::new(BIN));
    let first = sv.wait_daemon(&w, None);
    wait_until(SETTLE, "two busy runners", || {
        w.in_state(AttemptState::Busy).len() == 2
    });
    let busy = w.in_state(AttemptState::Busy);

    // A crash: runsv starts the daemon again, and the runners never noticed.
    // SAFETY: kill(2) on the daemon this test's runsv started.
    unsafe { libc::kill(first, libc::SIGKILL) };
    let second = sv.wait_daemon(&w, Some(first));
    assert_alive(&busy, "the daemon's SIGKILL");
    assert!(
        sv.output().contains("daemon exited -1 (wait status 9)"),
        "{}",
        sv.output()
    );

    // `sv restart`: TERM (and CONT) to the daemon's pid only; it exits, runsv starts
    // it again, and the busy runners are still the ones running their jobs.
    sv.sv("restart");
    let third = sv.wait_daemon(&w, Some(second));
    assert_ne!(third, first);
    assert_alive(&busy, "sv restart");
    for b in &busy {
        assert_eq!(w.attempt(b.id).state, AttemptState::Busy, "{b:?}");
    }

    // The third daemon re-adopts them; their jobs complete and are cleaned up.
    w.wait_settled(&["acme/runit"]);
    for job in ["long1", "long2"] {
        let a = w.attempt_of_job(job);
        assert!(
            busy.iter().any(|b| b.id == a.id),
            "{job} was served by attempt {}, not a runner that outlived the restarts",
            a.id
        );
        assert_eq!(a.outcome, Some(Outcome::CompletedJob), "{a:?}");
    }
    assert_eq!(sv.pid(), Some(third), "the daemon restarted once more");
    w.check_invariants(&["acme/runit"]);
}

#[test]
fn under_runsv_update_hands_over_on_exit_75_and_the_new_binary_serves_the_rest() {
    let mut w = World::new("runit-update", 3);
    w.add_target("t", "acme/runit", true);
    w.add_profile(ProfileSpec::new("p", "t", &["p"]).max(2).idle_timeout(60));
    let bin = installed_copy(&w.dir);
    let (rel, new_bytes) = release_dir(&w.dir, "99.0.0", None);
    w.cli_ok(&["host", "set", &format!("release_source={}", rel.display())]);
    let jobs: Vec<u64> = (0..6)
        .map(|i| w.enqueue("acme/runit", &format!("job{i}"), &["p"], 1500))
        .collect();
    let sv = Runsv::start(&w, &bin);
    let first = sv.wait_daemon(&w, None);
    wait_until(SETTLE, "two busy runners", || {
        w.in_state(AttemptState::Busy).len() == 2
    });

    let out = update(&bin, &w, &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("exits 75"),
        "{}",
        text(&out)
    );
    // The old daemon drains and exits 75; runsv starts ./run again, which is the new
    // binary now.
    let second = sv.wait_daemon(&w, Some(first));
    assert!(
        sv.output().contains("daemon exited 75 (wait status 0)"),
        "{}",
        sv.output()
    );
    // The new daemon runs the release's bytes (the heartbeat's version is the
    // crate's, whatever the binary is stamped).
    assert_eq!(
        std::fs::read(format!("/proc/{second}/exe")).unwrap(),
        new_bytes,
        "runsv did not start the new binary"
    );
    assert!(
        !sv.output().contains("systemd starts"),
        "the handover names systemd under runit: {}",
        sv.output()
    );
    for id in jobs {
        w.finished(id);
    }
    w.wait_settled(&["acme/runit"]);
    assert_eq!(sv.pid(), Some(second), "the new daemon handed over again");
    w.check_invariants(&["acme/runit"]);
}
