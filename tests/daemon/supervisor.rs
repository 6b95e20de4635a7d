//! The shipped runit and s6 recipes (`packaging/runit/`, `packaging/s6/`) under the
//! real supervisors from Debian's packages (`.ci/run` installs runit and s6; without
//! them these tests fail, they do not skip): `runsv` and `s6-supervise` supervise the
//! daemon as plain processes, no PID 1 needed. A SIGKILLed daemon is started again;
//! `sv restart` and `s6-svc -r` signal the daemon's pid only, so busy runners live
//! across both and their jobs finish; `runner-manager update` hands over on exit 75
//! and the supervisor starts the new binary.

use super::self_update::{installed_copy, release_dir, text, update};
use super::support::*;
use runner_manager::domain::{AttemptState, Outcome};
use runner_manager::runner::{ProcessStatus, is_alive};
use runner_manager::store::Store;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The shipped recipes' paths, which an operator edits (and these tests replace).
const PACKAGED_BIN: &str = "/usr/bin/runner-manager";
const PACKAGED_STATE: &str = "/var/lib/runner-manager";

/// A supervisor from Debian's packages, run on one service directory.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    /// runit's `runsv`, controlled with `sv`.
    Runit,
    /// s6's `s6-supervise`, controlled with `s6-svc`, asked with `s6-svstat`.
    S6,
}

impl Kind {
    fn recipe(self) -> &'static str {
        match self {
            Kind::Runit => "packaging/runit",
            Kind::S6 => "packaging/s6",
        }
    }

    fn programs(self) -> [&'static str; 2] {
        match self {
            Kind::Runit => ["runsv", "sv"],
            Kind::S6 => ["s6-supervise", "s6-svc"],
        }
    }

    fn package(self) -> &'static str {
        match self {
            Kind::Runit => "runit",
            Kind::S6 => "s6",
        }
    }

    /// What the shipped `finish` prints after a SIGKILL of the daemon, and after its
    /// exit 75 (each supervisor passes its own arguments: runsv(8), s6-supervise).
    fn said_after(self, exit: &str) -> String {
        match (self, exit) {
            (Kind::Runit, "kill") => "daemon exited -1 (wait status 9)".into(),
            (Kind::S6, "kill") => "daemon exited 256 (signal 9)".into(),
            (Kind::Runit, code) => format!("daemon exited {code} (wait status 0)"),
            (Kind::S6, code) => format!("daemon exited {code} (signal 0)"),
        }
    }
}

/// The supervisor on a service directory made from the shipped recipe (its `run`
/// and `finish`, the paths pointed at `bin` and the world's state directory; no
/// `log/`, so the daemon's lines go to the supervisor's output, a file here).
/// Dropped, it takes the service down and exits; anything left is killed.
struct Supervised {
    kind: Kind,
    child: Child,
    dir: PathBuf,
    out: PathBuf,
}

/// `program`, which must be on PATH: the test fails, naming what to install.
fn need(program: &str, package: &str) {
    let found = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()));
    assert!(
        found,
        "{program} is not on PATH: install {package} (apt-get install {package}; .ci/run does)"
    );
}

impl Supervised {
    fn start(kind: Kind, w: &World, bin: &Path) -> Supervised {
        for p in kind.programs() {
            need(p, kind.package());
        }
        let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join(kind.recipe());
        let dir = w.dir.join("sv-runner-manager");
        std::fs::create_dir_all(&dir).unwrap();
        for name in ["run", "finish"] {
            let text = std::fs::read_to_string(shipped.join(name)).unwrap();
            let text = if name == "run" {
                assert!(
                    text.contains(PACKAGED_BIN) && text.contains(PACKAGED_STATE),
                    "{}/run no longer names {PACKAGED_BIN} and {PACKAGED_STATE}",
                    kind.recipe()
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
        let out = w.dir.join("supervisor.log");
        let log = std::fs::File::create(&out).unwrap();
        let child = Command::new(kind.programs()[0])
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("{kind:?} starts (install {}): {e}", kind.package()));
        Supervised {
            kind,
            child,
            dir,
            out,
        }
    }

    /// The pid the supervisor says it runs, if it runs one: runsv's `supervise/pid`,
    /// `s6-svstat -p` (-1 when down).
    fn pid(&self) -> Option<i32> {
        let text = match self.kind {
            Kind::Runit => std::fs::read_to_string(self.dir.join("supervise/pid")).ok()?,
            Kind::S6 => {
                let out = Command::new("s6-svstat")
                    .arg("-p")
                    .arg(&self.dir)
                    .output()
                    .ok()?;
                String::from_utf8_lossy(&out.stdout).into_owned()
            }
        };
        text.trim().parse().ok().filter(|p: &i32| *p > 0)
    }

    /// Waits until the supervisor runs a daemon other than `old` and that daemon beats
    /// in the store; returns its pid.
    fn wait_daemon(&self, w: &World, old: Option<i32>) -> i32 {
        let mut now = None;
        wait_until(SETTLE, "the supervised daemon beating in the store", || {
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

    /// The supervisor's restart: `sv restart`, `s6-svc -r` (TERM to the pid, then a
    /// new start); panics with its output unless it succeeded.
    fn restart(&self) {
        let (program, verb) = match self.kind {
            Kind::Runit => ("sv", "restart"),
            Kind::S6 => ("s6-svc", "-r"),
        };
        let out = Command::new(program)
            .arg(verb)
            .arg(&self.dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "{program} {verb}: {}", text(&out));
    }

    fn output(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        let daemon = self.pid();
        // Down (TERM to the daemon, no restart), and the supervisor exits.
        let _ = match self.kind {
            Kind::Runit => Command::new("sv").arg("exit").arg(&self.dir).output(),
            Kind::S6 => Command::new("s6-svc").arg("-xd").arg(&self.dir).output(),
        };
        let gone = poll_until(SETTLE, || matches!(self.child.try_wait(), Ok(Some(_))));
        if !gone {
            let _ = self.child.kill();
            let _ = self.child.wait();
            if let Some(p) = daemon {
                // SAFETY: kill(2) on the daemon this test's supervisor started.
                unsafe { libc::kill(p, libc::SIGKILL) };
            }
        }
        if std::thread::panicking() {
            eprintln!("--- {:?} and its daemon ---\n{}", self.kind, self.output());
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

/// A SIGKILL and the supervisor's restart: the daemon comes back each time, and the
/// busy runners keep their pids across both and finish their jobs.
fn a_killed_daemon_restarts_and_busy_runners_outlive_every_restart(kind: Kind) {
    let mut w = World::new(kind.package(), 4);
    w.add_target("t", "acme/sv", true);
    w.add_profile(ProfileSpec::new("p", "t", &["r"]).max(2).idle_timeout(1));
    w.enqueue("acme/sv", "long1", &["r"], 12_000);
    w.enqueue("acme/sv", "long2", &["r"], 12_000);
    let sv = Supervised::start(kind, &w, Path::new(BIN));
    let first = sv.wait_daemon(&w, None);
    wait_until(SETTLE, "two busy runners", || {
        w.in_state(AttemptState::Busy).len() == 2
    });
    let busy = w.in_state(AttemptState::Busy);

    // A crash: the supervisor starts the daemon again, and the runners never noticed.
    // SAFETY: kill(2) on the daemon this test's supervisor started.
    unsafe { libc::kill(first, libc::SIGKILL) };
    let second = sv.wait_daemon(&w, Some(first));
    assert_alive(&busy, "the daemon's SIGKILL");
    assert!(
        sv.output().contains(&kind.said_after("kill")),
        "{}",
        sv.output()
    );

    // `sv restart`, `s6-svc -r`: TERM (and CONT) to the daemon's pid only; it exits,
    // the supervisor starts it again, and the busy runners still run their jobs.
    sv.restart();
    let third = sv.wait_daemon(&w, Some(second));
    assert_ne!(third, first);
    assert_alive(&busy, "the supervisor's restart");
    for b in &busy {
        assert_eq!(w.attempt(b.id).state, AttemptState::Busy, "{b:?}");
    }

    // The third daemon re-adopts them; their jobs complete and are cleaned up.
    w.wait_settled(&["acme/sv"]);
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
    w.check_invariants(&["acme/sv"]);
}

/// `update` while runners are busy: the daemon drains and exits 75, and the
/// supervisor starts the new binary, which serves the jobs left.
fn update_hands_over_on_exit_75_and_the_new_binary_serves_the_rest(kind: Kind) {
    let mut w = World::new(&format!("{}-update", kind.package()), 3);
    w.add_target("t", "acme/sv", true);
    w.add_profile(ProfileSpec::new("p", "t", &["p"]).max(2).idle_timeout(60));
    let bin = installed_copy(&w.dir);
    let (rel, new_bytes) = release_dir(&w.dir, "99.0.0", None);
    w.cli_ok(&["host", "set", &format!("release_source={}", rel.display())]);
    let jobs: Vec<u64> = (0..6)
        .map(|i| w.enqueue("acme/sv", &format!("job{i}"), &["p"], 1500))
        .collect();
    let sv = Supervised::start(kind, &w, &bin);
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
    // The old daemon drains and exits 75; the supervisor starts ./run again, which is
    // the new binary now.
    let second = sv.wait_daemon(&w, Some(first));
    assert!(
        sv.output().contains(&kind.said_after("75")),
        "{}",
        sv.output()
    );
    // The new daemon runs the release's bytes, and says the release's version.
    assert_eq!(
        std::fs::read(format!("/proc/{second}/exe")).unwrap(),
        new_bytes,
        "the supervisor did not start the new binary"
    );
    let beat = w.store().heartbeat().unwrap().unwrap();
    assert_eq!(
        beat.version, "99.0.0",
        "the heartbeat's version is not the binary's"
    );
    assert!(
        !sv.output().contains("systemd starts"),
        "the handover names systemd under {kind:?}: {}",
        sv.output()
    );
    for id in jobs {
        w.finished(id);
    }
    w.wait_settled(&["acme/sv"]);
    assert_eq!(sv.pid(), Some(second), "the new daemon handed over again");
    w.check_invariants(&["acme/sv"]);
}

#[test]
fn under_runit_a_killed_daemon_restarts_and_busy_runners_outlive_every_restart() {
    a_killed_daemon_restarts_and_busy_runners_outlive_every_restart(Kind::Runit);
}

#[test]
fn under_runit_update_hands_over_on_exit_75_and_the_new_binary_serves_the_rest() {
    update_hands_over_on_exit_75_and_the_new_binary_serves_the_rest(Kind::Runit);
}

#[test]
fn under_s6_a_killed_daemon_restarts_and_busy_runners_outlive_every_restart() {
    a_killed_daemon_restarts_and_busy_runners_outlive_every_restart(Kind::S6);
}

#[test]
fn under_s6_update_hands_over_on_exit_75_and_the_new_binary_serves_the_rest() {
    update_hands_over_on_exit_75_and_the_new_binary_serves_the_rest(Kind::S6);
}
