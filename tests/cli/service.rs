//! `service install|status|uninstall` on a temporary unit directory (`--unit-dir`),
//! with `systemctl` replaced by a script on `PATH` that logs each call's argv, so each
//! test asserts the exact calls in order; and the rendered units through
//! `systemd-analyze verify` where that tool is present and works.

use crate::support::{BIN, Dir, seeded, snapshot};
use runner_manager::domain::TargetMode;
use runner_manager::domain::status::ErrorKind;
use runner_manager::store::{Heartbeat, SqliteStore, Store, TargetStatus};
use std::path::{Path, PathBuf};
use std::process::Command;

const UNIT: &str = "runner-manager.service";

/// A test's world: its directory, a unit directory, a fake `systemctl`, and a
/// directory that stands for `/run/systemd/system` (systemd runs while it is there).
struct World {
    d: Dir,
}

impl World {
    fn new(d: Dir) -> World {
        use std::os::unix::fs::PermissionsExt;
        let bin = d.subdir("fakebin");
        let log = d.path("systemctl.log");
        let script = format!(
            "#!/bin/sh\n\
             echo \"$*\" >> '{}'\n\
             if [ -n \"$FAKE_SYSTEMCTL_FAIL\" ] && [ \"$*\" = \"$FAKE_SYSTEMCTL_FAIL\" ]; then\n\
               echo 'Job failed: boom' >&2; exit \"${{FAKE_SYSTEMCTL_CODE:-1}}\"\n\
             fi\n\
             case \"$*\" in\n\
               *is-enabled*) echo enabled ;;\n\
               *is-active*) echo active ;;\n\
             esac\n",
            log.display()
        );
        let p = Path::new(&bin).join("systemctl");
        std::fs::write(&p, script).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        d.subdir("units");
        d.subdir("run-systemd-system");
        World { d }
    }

    /// From now on, systemd does not run on this world's host.
    fn stop_systemd(&self) {
        std::fs::remove_dir(self.d.path("run-systemd-system")).unwrap();
    }

    fn units(&self) -> PathBuf {
        self.d.path("units")
    }

    fn unit(&self) -> PathBuf {
        self.units().join(UNIT)
    }

    fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> crate::support::Run {
        let path = format!(
            "{}:{}",
            self.d.path("fakebin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut c = Command::new(BIN);
        c.arg("--state-dir")
            .arg(self.d.state())
            .args(args)
            .env_remove("RUNNER_MANAGER_STATE_DIR")
            .env_remove("FAKE_SYSTEMCTL_FAIL")
            .env_remove("FAKE_SYSTEMCTL_CODE")
            .env(
                "RUNNER_MANAGER_SYSTEMD_RUN_DIR",
                self.d.path("run-systemd-system"),
            )
            .env("PATH", path)
            .current_dir(&self.d.root);
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().expect("run runner-manager").into()
    }

    fn run(&self, args: &[&str]) -> crate::support::Run {
        self.run_env(args, &[])
    }

    fn ok(&self, args: &[&str]) -> crate::support::Run {
        let r = self.run(args);
        assert_eq!(r.code, 0, "{args:?}:\n{}\n{}", r.stdout, r.stderr);
        r
    }

    /// The systemctl calls so far, one argv per line; the log is emptied.
    fn calls(&self) -> Vec<String> {
        let p = self.d.path("systemctl.log");
        let text = std::fs::read_to_string(&p).unwrap_or_default();
        let _ = std::fs::remove_file(&p);
        text.lines().map(str::to_string).collect()
    }
}

/// A world whose state directory holds a store, as `service install` wants.
fn world(tag: &str) -> World {
    World::new(seeded(tag))
}

fn this_binary() -> String {
    Path::new(BIN).canonicalize().unwrap().display().to_string()
}

#[test]
fn install_writes_our_unit_then_reloads_enables_and_starts_it_and_again_is_unchanged() {
    let w = World::new(Dir::new("svc-install"));
    let units = w.units().display().to_string();
    // No store in the state directory: a mistyped --state-dir, most likely (issue 38).
    let r = w.run(&["service", "install", "--unit-dir", &units]);
    assert_eq!(r.code, 12, "no-store: {}", r.stderr);
    assert!(
        r.stderr
            .contains(&format!("{} holds no store", w.d.state().display()))
            && r.stderr.contains("--force"),
        "{}",
        r.stderr
    );
    assert!(!w.unit().exists());
    assert_eq!(w.calls(), Vec::<String>::new());
    let r = w.ok(&["service", "install", "--unit-dir", &units, "--force"]);
    assert!(r.stdout.contains("(created)"), "{}", r.stdout);
    assert_eq!(
        w.calls(),
        [
            "daemon-reload",
            "enable runner-manager.service",
            "start runner-manager.service"
        ]
    );
    let text = std::fs::read_to_string(w.unit()).unwrap();
    assert!(text.starts_with("# runner-manager-service-install:"));
    assert!(
        text.contains(&format!("\nExecStart={} daemon\n", this_binary())),
        "{text}"
    );
    let state = w.d.state().display().to_string();
    assert!(text.contains(&format!("\nEnvironment=RUNNER_MANAGER_STATE_DIR={state}\n")));
    assert!(text.contains("\nCapabilityBoundingSet=CAP_CHOWN "));
    assert!(text.contains("\nWantedBy=multi-user.target\n"));
    assert!(!w.d.state().exists(), "the store is the daemon's to create");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(w.unit()).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o644);

    let again = w.ok(&[
        "--json",
        "service",
        "install",
        "--unit-dir",
        &units,
        "--force",
    ]);
    assert!(
        again.stdout.contains("\"written\": \"unchanged\""),
        "{}",
        again.stdout
    );
    assert_eq!(
        w.calls(),
        [
            "enable runner-manager.service",
            "start runner-manager.service"
        ],
        "an unchanged unit needs no reload"
    );
    assert_eq!(std::fs::read_to_string(w.unit()).unwrap(), text);

    // Our unit, changed (an older version wrote it): replaced, reloaded, restarted.
    std::fs::write(w.unit(), text.replace("RestartSec=5s", "RestartSec=9s")).unwrap();
    let r = w.ok(&[
        "service",
        "install",
        "--unit-dir",
        &units,
        "--no-start",
        "--force",
    ]);
    assert!(r.stdout.contains("(replaced)"), "{}", r.stdout);
    assert_eq!(
        w.calls(),
        ["daemon-reload", "enable runner-manager.service"]
    );
    std::fs::write(w.unit(), text.replace("RestartSec=5s", "RestartSec=9s")).unwrap();
    w.ok(&["service", "install", "--unit-dir", &units, "--force"]);
    assert_eq!(
        w.calls(),
        [
            "daemon-reload",
            "enable runner-manager.service",
            "restart runner-manager.service"
        ]
    );
    assert_eq!(std::fs::read_to_string(w.unit()).unwrap(), text);
}

#[test]
fn install_refuses_to_start_a_second_daemon_on_a_state_dir_one_already_runs_on() {
    let w = World::new(seeded("svc-running"));
    let units = w.units().display().to_string();
    {
        let store = SqliteStore::open(&w.d.state()).unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        store
            .put_heartbeat(&Heartbeat {
                pid: 4242,
                started_at: now,
                heartbeat_at: now,
                version: "0.1.0".into(),
            })
            .unwrap();
    }
    let r = w.run(&["service", "install", "--unit-dir", &units]);
    assert_eq!(r.code, 7, "store-locked: {}", r.stderr);
    assert!(
        r.stderr.contains("a daemon (pid 4242) already runs on"),
        "{}",
        r.stderr
    );
    assert!(!w.unit().exists());
    assert_eq!(w.calls(), Vec::<String>::new());
    w.ok(&["service", "install", "--unit-dir", &units, "--no-start"]);
    assert_eq!(
        w.calls(),
        ["daemon-reload", "enable runner-manager.service"]
    );
}

#[test]
fn a_foreign_unit_is_never_overwritten_or_removed_and_no_systemctl_call_is_made() {
    let w = world("svc-foreign");
    let units = w.units().display().to_string();
    let foreign = "[Service]\nExecStart=/usr/local/bin/someone-elses daemon\n";
    std::fs::write(w.unit(), foreign).unwrap();
    for cmd in ["install", "uninstall"] {
        let r = w.run(&["service", cmd, "--unit-dir", &units]);
        assert_eq!(r.code, 2, "{cmd}: {}", r.stderr);
        assert!(
            r.stderr.contains(&w.unit().display().to_string())
                && r.stderr.contains("left as it is"),
            "{cmd}: {}",
            r.stderr
        );
        assert!(r.stdout.is_empty());
        assert_eq!(w.calls(), Vec::<String>::new(), "{cmd} called systemctl");
        assert_eq!(std::fs::read(w.unit()).unwrap(), foreign.as_bytes());
    }
    // A masked unit is a link to /dev/null: not ours either, and not followed.
    std::fs::remove_file(w.unit()).unwrap();
    std::os::unix::fs::symlink("/dev/null", w.unit()).unwrap();
    let r = w.run(&["service", "install", "--unit-dir", &units]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("/dev/null"), "{}", r.stderr);
    assert!(w.unit().is_symlink());
    assert_eq!(w.calls(), Vec::<String>::new());
    let s = w.ok(&["service", "status", "--unit-dir", &units]);
    assert!(s.stdout.contains("not ours"), "{}", s.stdout);
}

#[test]
fn uninstall_stops_disables_removes_and_reloads_only_our_unit() {
    let w = world("svc-uninstall");
    let units = w.units().display().to_string();
    let r = w.ok(&["service", "uninstall", "--unit-dir", &units]);
    assert!(r.stdout.contains("nothing to uninstall"), "{}", r.stdout);
    assert_eq!(w.calls(), Vec::<String>::new());
    w.ok(&["service", "install", "--unit-dir", &units, "--no-start"]);
    w.calls();
    w.ok(&["service", "uninstall", "--unit-dir", &units]);
    assert_eq!(
        w.calls(),
        [
            "stop runner-manager.service",
            "disable runner-manager.service",
            "daemon-reload"
        ]
    );
    assert!(!w.unit().exists());
    assert_eq!(
        std::fs::read_dir(w.units()).unwrap().count(),
        0,
        "nothing else in the unit directory"
    );
}

/// Issue 38: uninstall refused to remove the unit it had written when systemctl
/// failed. Our unit goes whatever systemctl says; what failed is named, and the exit
/// is not 0 while a daemon may still run from it.
#[test]
fn uninstall_removes_our_unit_even_when_stop_fails_and_says_what_failed() {
    let w = world("svc-uninstall-stop");
    let units = w.units().display().to_string();
    w.ok(&["service", "install", "--unit-dir", &units, "--no-start"]);
    w.calls();
    let stop = "stop runner-manager.service";
    let r = w.run_env(
        &["--json", "service", "uninstall", "--unit-dir", &units],
        &[("FAKE_SYSTEMCTL_FAIL", stop)],
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("'systemctl stop runner-manager.service' failed (exit 1): Job failed: boom")
            && r.stderr.contains("is removed, but")
            && r.stderr.contains("may still run"),
        "{}",
        r.stderr
    );
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["removed"], true);
    assert_eq!(v["failed"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(
        w.calls(),
        [stop, "disable runner-manager.service", "daemon-reload"]
    );
    assert!(!w.unit().exists());
    // Exit 5: the manager has not loaded the unit, so nothing runs from it: exit 0.
    w.ok(&["service", "install", "--unit-dir", &units, "--no-start"]);
    w.calls();
    let r = w.run_env(
        &["service", "uninstall", "--unit-dir", &units],
        &[("FAKE_SYSTEMCTL_FAIL", stop), ("FAKE_SYSTEMCTL_CODE", "5")],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        w.calls(),
        [stop, "disable runner-manager.service", "daemon-reload"]
    );
    assert!(!w.unit().exists());
}

/// Issue 38: without systemd, `install` wrote the unit and then failed on
/// `daemon-reload`, `uninstall` refused to remove it, and `status` exited 0. Now
/// install writes nothing and says what to run instead, uninstall removes our unit
/// without calling systemctl, and status reports and exits 2.
#[test]
fn without_systemd_install_writes_nothing_and_says_to_run_the_daemon_under_a_supervisor() {
    let w = world("svc-nosystemd");
    let units = w.units().display().to_string();
    w.ok(&["service", "install", "--unit-dir", &units, "--no-start"]);
    let written = std::fs::read_to_string(w.unit()).unwrap();
    std::fs::remove_file(w.unit()).unwrap();
    w.calls();
    w.stop_systemd();
    let before = snapshot(&w.d.state());
    for args in [
        vec!["service", "install", "--unit-dir", &units],
        vec!["service", "install", "--unit-dir", &units, "--no-start"],
        vec!["service", "install", "--unit-dir", &units, "--force"],
        vec!["service", "install", "--user", "--unit-dir", &units],
    ] {
        let r = w.run(&args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(
            r.stderr.contains("systemd is not running on this host")
                && r.stderr.contains("run-systemd-system")
                && r.stderr
                    .contains("run 'runner-manager daemon' under the supervisor"),
            "{args:?}: {}",
            r.stderr
        );
        assert!(r.stdout.is_empty(), "{}", r.stdout);
        assert!(!w.unit().exists(), "{args:?} wrote the unit");
        assert_eq!(w.calls(), Vec::<String>::new(), "{args:?}");
    }
    assert_eq!(snapshot(&w.d.state()), before);

    // A unit written while systemd ran (or by hand): status says so and exits 2 ...
    std::fs::write(w.unit(), &written).unwrap();
    let r = w.run(&["--json", "service", "status", "--unit-dir", &units]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("systemd is not running"), "{}", r.stderr);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["systemd"]["running"], false);
    assert_eq!(v["systemd"]["checked"], false);
    assert_eq!(v["unit"]["ours"], true);
    let r = w.run(&["service", "status", "--unit-dir", &units]);
    assert_eq!(r.code, 2);
    assert!(
        r.stdout
            .contains("skipped: systemd is not running on this host"),
        "{}",
        r.stdout
    );
    assert_eq!(w.calls(), Vec::<String>::new());
    // ... and uninstall removes it without a systemctl call.
    let r = w.ok(&["service", "uninstall", "--unit-dir", &units]);
    assert!(
        r.stdout
            .contains("systemd is not running here: nothing was stopped or disabled"),
        "{}",
        r.stdout
    );
    assert!(!w.unit().exists());
    assert_eq!(w.calls(), Vec::<String>::new());
}

/// Issue 38: `service status` exited 0 while systemctl printed `Failed to get unit
/// file state`. A systemctl that fails to answer is a failed status (exit 1), with the
/// report printed whole; a state word with a nonzero exit (`inactive`) is an answer.
#[test]
fn status_fails_when_systemctl_fails_to_answer() {
    let w = world("svc-status-fails");
    let units = w.units().display().to_string();
    w.ok(&["service", "install", "--unit-dir", &units, "--no-start"]);
    w.calls();
    let script = w.d.path("fakebin/systemctl");
    let fake = |body: &str| {
        std::fs::write(&script, format!("#!/bin/sh\n{body}\n")).unwrap();
    };
    fake("echo 'Failed to connect to bus: No such file or directory' >&2; exit 1");
    let r = w.run(&["--json", "service", "status", "--unit-dir", &units]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("systemctl did not answer")
            && r.stderr.contains(
                "'systemctl is-enabled runner-manager.service' said \"Failed to connect to bus"
            ),
        "{}",
        r.stderr
    );
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["systemd"]["failed"].as_array().unwrap().len(), 2, "{v}");
    assert_eq!(v["unit"]["ours"], true);
    fake("case \"$*\" in *is-enabled*) echo disabled; exit 1;; *) echo inactive; exit 3;; esac");
    let r = w.ok(&["service", "status", "--unit-dir", &units]);
    assert!(
        r.stdout.contains("enabled    disabled") && r.stdout.contains("active     inactive"),
        "{}",
        r.stdout
    );
}

/// Issue 38: a mistyped --state-dir replaced the live unit and restarted it on a
/// directory that did not exist. A unit of ours on another state directory is kept
/// (exit 2, both paths named) unless --force; a state directory without a store is
/// refused with exit 12 unless --force.
#[test]
fn install_keeps_our_unit_on_its_state_dir_unless_forced() {
    let w = world("svc-other-state");
    let units = w.units().display().to_string();
    w.ok(&["service", "install", "--unit-dir", &units]);
    let live = std::fs::read_to_string(w.unit()).unwrap();
    w.calls();
    let other = seeded("svc-other-state-2");
    let other_state = other.state().display().to_string();
    let mistyped = w.d.path("stat").display().to_string();
    for dir in [&other_state, &mistyped] {
        let r = w.run(&[
            "--state-dir",
            dir,
            "service",
            "install",
            "--unit-dir",
            &units,
        ]);
        assert_eq!(r.code, 2, "{dir}: {}", r.stderr);
        assert!(
            r.stderr.contains("invalid --state-dir")
                && r.stderr.contains(dir.as_str())
                && r.stderr.contains(&w.d.state().display().to_string())
                && r.stderr.contains("--force"),
            "{dir}: {}",
            r.stderr
        );
        assert_eq!(std::fs::read_to_string(w.unit()).unwrap(), live);
        assert_eq!(w.calls(), Vec::<String>::new());
    }
    // Forced: the service moves to the other state directory, and restarts there.
    let r = w.run(&[
        "--state-dir",
        &other_state,
        "service",
        "install",
        "--unit-dir",
        &units,
        "--force",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("(replaced)"), "{}", r.stdout);
    let moved = std::fs::read_to_string(w.unit()).unwrap();
    assert!(moved.contains(&format!("RUNNER_MANAGER_STATE_DIR={other_state}\n")));
    assert_eq!(
        w.calls(),
        [
            "daemon-reload",
            "enable runner-manager.service",
            "restart runner-manager.service"
        ]
    );
}

#[test]
fn a_user_unit_goes_to_the_user_manager_and_keeps_its_state_at_home() {
    let w = world("svc-user");
    let units = w.units().display().to_string();
    w.ok(&["service", "install", "--user", "--unit-dir", &units]);
    assert_eq!(
        w.calls(),
        [
            "--user daemon-reload",
            "--user enable runner-manager.service",
            "--user start runner-manager.service"
        ]
    );
    let text = std::fs::read_to_string(w.unit()).unwrap();
    assert!(text.contains("\nWantedBy=default.target\n"));
    assert!(text.contains("\n# ProtectHome= left out of a user unit: "));
    assert!(!text.contains("\nCapabilityBoundingSet="));
    // Without --unit-dir, the user's config directory (created when missing).
    let home = w.d.subdir("home");
    let r = w.run_env(
        &["service", "install", "--user", "--no-start"],
        &[("HOME", &home), ("XDG_CONFIG_HOME", "")],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        Path::new(&home)
            .join(".config/systemd/user")
            .join(UNIT)
            .is_file()
    );
    assert_eq!(
        w.calls(),
        [
            "--user daemon-reload",
            "--user enable runner-manager.service"
        ]
    );
}

#[test]
fn a_failing_systemctl_call_is_named_and_stops_the_rest() {
    let w = world("svc-fail");
    let units = w.units().display().to_string();
    let r = w.run_env(
        &["service", "install", "--unit-dir", &units],
        &[("FAKE_SYSTEMCTL_FAIL", "enable runner-manager.service")],
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains(
            "ran systemctl daemon-reload; 'systemctl enable runner-manager.service' failed (exit 1): Job failed: boom"
        ),
        "{}",
        r.stderr
    );
    assert_eq!(
        w.calls(),
        ["daemon-reload", "enable runner-manager.service"]
    );
    assert!(w.unit().is_file(), "the unit stays written");
}

#[test]
fn bad_service_input_exits_2_naming_the_argument_and_touches_nothing() {
    let w = World::new(seeded("svc-bad"));
    let before = snapshot(&w.d.state());
    let units = w.units().display().to_string();
    let home_state = "/home/someone/rm-state";
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["service", "install", "--unit-dir", "no/such/dir"],
            "--unit-dir",
        ),
        (vec!["service", "install", "--unit-dir", ""], "--unit-dir"),
        (
            vec!["service", "status", "--unit-dir", "/nonexistent/units"],
            "--unit-dir",
        ),
        (
            vec!["service", "uninstall", "--unit-dir", "missing"],
            "--unit-dir",
        ),
        (
            vec!["service", "install", "--unit-dir", &units, "--frob"],
            "--frob",
        ),
        (
            vec!["service", "install", "--unit-dir", &units, "extra"],
            "extra",
        ),
        (
            vec!["service", "install", "--no-start=yes", "--unit-dir", &units],
            "--no-start",
        ),
        (
            vec![
                "--state-dir",
                home_state,
                "service",
                "install",
                "--unit-dir",
                &units,
            ],
            "--state-dir",
        ),
        (
            vec![
                "--state-dir",
                "/var/lib/a b",
                "service",
                "install",
                "--unit-dir",
                &units,
            ],
            "--state-dir",
        ),
    ];
    for (args, named) in cases {
        let r = w.run(&args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(
            r.stderr.contains(named),
            "{args:?} should name {named}: {}",
            r.stderr
        );
        assert_eq!(w.calls(), Vec::<String>::new(), "{args:?}");
        assert!(!w.unit().exists(), "{args:?} wrote a unit");
        assert!(!Path::new(home_state).exists());
    }
    assert_eq!(snapshot(&w.d.state()), before, "the store is untouched");
}

#[test]
fn status_says_stale_binary_last_report_and_refused_or_unreadable_credentials() {
    let w = World::new(seeded("svc-status"));
    let units = w.units().display().to_string();
    // Not installed yet: said, and systemd asked all the same.
    let r = w.ok(&["service", "status", "--unit-dir", &units]);
    assert!(r.stdout.contains("not installed"), "{}", r.stdout);
    w.calls();
    w.ok(&["service", "install", "--unit-dir", &units, "--no-start"]);
    w.calls();
    {
        let store = SqliteStore::open(&w.d.state()).unwrap();
        store
            .put_target_status(&TargetStatus {
                target: "octo".into(),
                mode: TargetMode::Standalone.into(),
                last_error: Some(
                    "GitHub rejected the credentials (401); check that the token is valid and not expired, or that the App is still installed".into(),
                ),
                error_kind: Some(ErrorKind::CredentialsRefused),
                rate_limit_remaining: None,
                rate_limit_limit: None,
                rate_limit_reset: None,
                poll_every_ms: None,
                updated_at: 1_796_130_303_000,
            })
            .unwrap();
    }
    let r = w.ok(&["service", "status", "--unit-dir", &units]);
    assert_eq!(
        w.calls(),
        [
            "is-enabled runner-manager.service",
            "is-active runner-manager.service"
        ]
    );
    for want in [
        "installed (ours)",
        &format!("{} (this binary)", this_binary()),
        "enabled    enabled",
        "active     active",
        "2026-12-01T13:05:03",
        "refused: GitHub rejected the credentials (401)",
    ] {
        assert!(r.stdout.contains(want), "{want}:\n{}", r.stdout);
    }

    // The unit's binary is gone, and the token file is unreadable.
    let text = std::fs::read_to_string(w.unit()).unwrap();
    std::fs::write(
        w.unit(),
        text.replace(&this_binary(), "/nonexistent/old/runner-manager"),
    )
    .unwrap();
    std::fs::remove_file(w.d.path("token")).unwrap();
    let r = w.ok(&["--json", "service", "status", "--unit-dir", &units]);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(
        v["unit"]["stale"],
        "its binary /nonexistent/old/runner-manager is missing"
    );
    assert_eq!(v["systemd"]["enabled"], "enabled");
    assert_eq!(v["targets"][0]["name"], "octo");
    assert_eq!(v["targets"][0]["credential"], "unreadable");
    assert!(!r.stdout.contains("secret-token-value"));
    let human = w.ok(&["service", "status", "--unit-dir", &units]).stdout;
    assert!(human.contains("STALE: its binary /nonexistent/old/runner-manager is missing"));
    assert_eq!(v["unit"]["binary_hidden_by"], serde_json::Value::Null);

    // A system unit's binary under /home: ProtectHome=yes hides it from the service.
    std::fs::write(
        w.unit(),
        text.replace(&this_binary(), "/home/nobody-here/runner-manager"),
    )
    .unwrap();
    let r = w.ok(&["--json", "service", "status", "--unit-dir", &units]);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["unit"]["binary_hidden_by"], "/home");
    let human = w.ok(&["service", "status", "--unit-dir", &units]).stdout;
    assert!(
        human.contains("under /home, which ProtectHome=yes hides from the service"),
        "{human}"
    );
}

#[test]
fn without_systemctl_status_skips_politely_and_install_says_what_to_run() {
    let w = world("svc-nosystemctl");
    std::fs::remove_file(w.d.path("fakebin/systemctl")).unwrap();
    let units = w.units().display().to_string();
    // PATH holds only the (now empty) fake directory, so no systemctl is found.
    let only_fake = w.d.path("fakebin").display().to_string();
    let r = w.run_env(
        &["service", "status", "--unit-dir", &units],
        &[("PATH", &only_fake)],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("skipped: no systemctl on PATH"),
        "{}",
        r.stdout
    );
    let r = w.run_env(
        &["service", "install", "--unit-dir", &units],
        &[("PATH", &only_fake)],
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("no systemctl on PATH")
            && r.stderr.contains("systemctl daemon-reload && systemctl enable runner-manager.service && systemctl start runner-manager.service"),
        "{}",
        r.stderr
    );
    assert!(w.unit().is_file());
}

/// `systemd-analyze verify`'s complaints, with the one the packaged unit is known to
/// draw on systemd older than 254 left out (its comment says older ones ignore it).
fn verify(unit: &Path, user: bool, runtime: &Path) -> Option<(i32, Vec<String>)> {
    let mut c = Command::new("systemd-analyze");
    if user {
        c.arg("--user");
    }
    let out = c
        .args(["verify", "--man=no"])
        .arg(unit)
        .env("XDG_RUNTIME_DIR", runtime)
        .output()
        .ok()?;
    let complaints = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect();
    Some((out.status.code().unwrap_or(-1), complaints))
}

#[test]
fn rendered_units_pass_systemd_analyze_verify_where_it_works() {
    let w = world("svc-verify");
    let runtime = w.d.subdir("runtime");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
    let runtime = PathBuf::from(runtime);
    for user in [false, true] {
        let dir =
            w.d.subdir(if user { "verify-user" } else { "verify-system" });
        // Does the tool work here at all? The packaged unit, pointed at a real binary,
        // must pass, and the same unit with a broken line must not.
        let packaged = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/packaging/systemd/runner-manager.service"
        ))
        .unwrap()
        .replace(
            "ExecStart=/usr/bin/runner-manager",
            &format!("ExecStart={}", this_binary()),
        );
        let probe = Path::new(&dir).join("probe.service");
        std::fs::write(&probe, &packaged).unwrap();
        let works = matches!(verify(&probe, user, &runtime), Some((0, ref c)) if c.is_empty());
        std::fs::write(&probe, packaged.replace("Type=notify", "Type=bogus")).unwrap();
        let discerns = matches!(verify(&probe, user, &runtime), Some((_, ref c)) if !c.is_empty());
        std::fs::remove_file(&probe).unwrap();
        if !(works && discerns) {
            // On the real stderr, as `tests/common/users.rs`'s `skip` says (libtest
            // captures `eprintln!` of a passing test).
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED rendered_units_pass_systemd_analyze_verify_where_it_works (user={user}): \
                 systemd-analyze verify is absent, or does not pass the packaged unit and \
                 reject a broken one here"
            );
            continue;
        }
        let mut args = vec![
            "service",
            "install",
            "--unit-dir",
            &dir,
            "--no-start",
            "--force",
        ];
        if user {
            args.push("--user");
        }
        let state = w.d.subdir("verify-state");
        let mut full = vec!["--state-dir", &state];
        full.extend(args);
        w.ok(&full);
        let unit = Path::new(&dir).join(UNIT);
        let (code, complaints) = verify(&unit, user, &runtime).unwrap();
        assert_eq!(
            (code, complaints),
            (0, vec![]),
            "user={user}:\n{}",
            std::fs::read_to_string(&unit).unwrap()
        );
    }
}

/// Issue 50: `service status` finds the unit wherever `packaging/install.sh --prefix`
/// put it (beside the installed binary's prefix, not only /etc/systemd/system), and
/// reads the packaged unit as installed, with its binary and state directory.
#[test]
fn status_finds_the_unit_install_sh_put_under_its_prefix() {
    let w = world("svc-prefix");
    let root = w.d.path("root");
    let out = Command::new("sh")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/packaging/install.sh"))
        .args(["--destdir", root.to_str().unwrap(), "--bin", BIN])
        .args(["--prefix", "/opt/rm"])
        .env_remove("PREFIX")
        .env_remove("DESTDIR")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let installed = root.join("opt/rm/bin/runner-manager");
    let unit = root.join("opt/rm/lib/systemd/system").join(UNIT);
    assert!(unit.is_file());
    let path = format!(
        "{}:{}",
        w.d.path("fakebin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let r: crate::support::Run = Command::new(&installed)
        .arg("--state-dir")
        .arg(w.d.state())
        .args(["--json", "service", "status"])
        .env_remove("RUNNER_MANAGER_STATE_DIR")
        .env(
            "RUNNER_MANAGER_SYSTEMD_RUN_DIR",
            w.d.path("run-systemd-system"),
        )
        .env("PATH", path)
        .output()
        .unwrap()
        .into();
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let found = unit.canonicalize().unwrap();
    assert_eq!(v["unit"]["path"], found.display().to_string(), "{v}");
    assert_eq!(v["unit"]["installed"], true, "{v}");
    assert_eq!(v["unit"]["packaged"], true, "{v}");
    assert_eq!(v["unit"]["ours"], false, "{v}");
    assert_eq!(v["unit"]["binary"], "/opt/rm/bin/runner-manager", "{v}");
    assert_eq!(v["unit"]["state_dir"], "/var/lib/runner-manager", "{v}");
}
