//! `doctor` against the simulated GitHub: a healthy host passes; each broken thing
//! fails (or warns) on its own line with a hint, and the exit code says so.

use crate::support::{Dir, sim_and_target};
use runner_manager::doctor::{CheckLine, Options, Status, run_checks};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

/// A `systemctl` that answers `is-enabled` with `answer`, and leaves a file
/// `systemctl-<answer>.called` behind each time it runs.
fn fake_systemctl(d: &Dir, answer: &str) -> PathBuf {
    let p = d.path(&format!("systemctl-{answer}"));
    std::fs::write(
        &p,
        format!(
            "#!/bin/sh\ntouch \"$0.called\"\n[ \"$1\" = is-enabled ] || exit 9\necho {answer}\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// Options for a host booted with systemd (a directory stands for
/// `/run/systemd/system`) whose `systemctl` says `systemctl`.
fn opts(d: &Dir, systemctl: &str) -> Options {
    let run = d.path("run-systemd-system");
    std::fs::create_dir_all(&run).unwrap();
    Options {
        systemctl: Some(fake_systemctl(d, systemctl)),
        systemd_run_dir: run,
        ..Options::for_state_dir(&d.state())
    }
}

fn line<'a>(lines: &'a [CheckLine], name: &str) -> &'a CheckLine {
    lines
        .iter()
        .find(|l| l.name == name)
        .unwrap_or_else(|| panic!("no line {name} in {lines:#?}"))
}

fn no_failures(lines: &[CheckLine]) {
    let bad: Vec<_> = lines.iter().filter(|l| l.status == Status::Fail).collect();
    assert!(bad.is_empty(), "{bad:#?}");
}

/// A store with target `t` on the sim and profile `p` using a freshly installed runner.
fn healthy(d: &Dir) -> runner_manager::sim::SimHandle {
    let sim = sim_and_target(d);
    let dir = d.path("runner");
    d.ok(&["runner", "install", "--dir", dir.to_str().unwrap()]);
    d.ok(&[
        "profile",
        "add",
        "p",
        "--target",
        "t",
        "--labels",
        "gpu",
        "--runner-dir",
        dir.to_str().unwrap(),
    ]);
    sim
}

#[test]
fn a_healthy_host_passes_every_check() {
    let d = Dir::new("doctor-ok");
    let _sim = healthy(&d);
    let lines = run_checks(&opts(&d, "enabled"));
    no_failures(&lines);
    for name in [
        "state-dir",
        "store-file",
        "store-integrity",
        "disk",
        "target t credentials",
        "clock t",
        "runner p",
        "systemd",
        "caches",
    ] {
        assert_eq!(
            line(&lines, name).status,
            Status::Ok,
            "{:?}",
            line(&lines, name)
        );
    }
    assert!(line(&lines, "runner p").detail.contains("(the newest)"));
    // Through the CLI: one line per check, exit 0 (the host's own systemctl decides the
    // last line, which is never a failure on a host without the unit).
    let r = d.ok(&["doctor"]);
    assert!(
        r.stdout
            .lines()
            .any(|l| l.starts_with("ok   store-integrity")),
        "{}",
        r.stdout
    );
    let j = d.ok(&["--json", "doctor"]);
    let v: serde_json::Value = serde_json::from_str(&j.stdout).unwrap();
    assert!(
        v.as_array()
            .unwrap()
            .iter()
            .any(|c| c["check"] == "clock t" && c["status"] == "ok")
    );
}

#[test]
fn each_broken_thing_fails_with_a_hint() {
    let d = Dir::new("doctor-bad");
    let _sim = healthy(&d);
    let db = d.state().join("state.db");
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::set_permissions(d.state(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(d.path("token"), "ghp_wrong").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(d.path("token"), std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    std::fs::remove_file(d.path("runner/bin/Runner.Listener")).unwrap();
    // A cache slot over a 1 KiB cap: a warning (the daemon's prune removes it).
    d.ok(&["host", "set", "cache_cap=1K"]);
    let slot = d.state().join("caches/t-0123/slot-0/npm");
    std::fs::create_dir_all(&slot).unwrap();
    std::fs::write(slot.join("blob"), vec![1u8; 64 * 1024]).unwrap();
    let lines = run_checks(&Options {
        warn_free_bytes: u64::MAX,
        ..opts(&d, "masked")
    });
    for (name, status, hint) in [
        ("store-file", Status::Fail, "chmod 600"),
        ("state-dir", Status::Fail, "chmod 700"),
        ("target t credentials", Status::Fail, "target show t"),
        ("runner p", Status::Fail, "runner install"),
        ("systemd", Status::Fail, "unmask"),
        ("disk", Status::Warn, "free space"),
        ("caches", Status::Warn, "host set cache_cap"),
    ] {
        let l = line(&lines, name);
        assert_eq!(l.status, status, "{l:?}");
        assert!(l.hint.as_deref().unwrap_or("").contains(hint), "{l:?}");
    }
    let r = d.run(&["doctor"]);
    // A required check (the runner install) fails: the host is unfit.
    assert_eq!(r.code, 9, "{}", r.stdout);
    assert_eq!(
        r.stderr.lines().last(),
        Some("fix: runner-manager doctor (fix each required FAIL line as its hint says)"),
        "{}",
        r.stderr
    );
    assert!(
        r.stdout
            .lines()
            .any(|l| l.starts_with("FAIL store-file") && l.contains("hint: chmod 600")),
        "{}",
        r.stdout
    );
    assert!(r.stderr.contains("failed"), "{}", r.stderr);
    assert!(!r.stdout.contains("ghp_wrong") && !r.stderr.contains("ghp_wrong"));
}

#[test]
fn an_old_runner_warns_and_a_disabled_unit_warns() {
    let d = Dir::new("doctor-old");
    let _sim = healthy(&d);
    let dir = d.path("runner");
    d.ok(&[
        "runner",
        "install",
        "--dir",
        dir.to_str().unwrap(),
        "--version",
        "2.300.0",
    ]);
    let lines = run_checks(&Options {
        fail_free_bytes: Some(0),
        warn_free_bytes: 0,
        ..opts(&d, "disabled")
    });
    no_failures(&lines);
    let r = line(&lines, "runner p");
    assert_eq!(r.status, Status::Warn, "{r:?}");
    assert!(
        r.detail.contains("2.300.0") && r.detail.contains("older"),
        "{r:?}"
    );
    assert_eq!(line(&lines, "systemd").status, Status::Warn);
    // A version only `Runner.Listener --version` can tell.
    std::fs::remove_file(dir.join("bin/runnerversion")).unwrap();
    let lines = run_checks(&opts(&d, "enabled"));
    assert!(
        line(&lines, "runner p")
            .detail
            .contains(runner_manager::sim::control::RUNNER_VERSION)
    );
}

#[test]
fn a_damaged_store_fails_and_a_fresh_machine_passes() {
    let d = Dir::new("doctor-fresh");
    let lines = run_checks(&opts(&d, "not-found"));
    no_failures(&lines);
    assert_eq!(line(&lines, "store").status, Status::Skip);
    assert_eq!(line(&lines, "systemd").status, Status::Skip);
    assert!(!d.state().exists(), "doctor creates no state");
    d.ok(&["host", "set", "capacity=2"]);
    let db = d.state().join("state.db");
    let mut bytes = std::fs::read(&db).unwrap();
    // Keep SQLite's header, wreck the pages after it.
    for b in bytes.iter_mut().skip(100) {
        *b = 0xA5;
    }
    std::fs::write(&db, bytes).unwrap();
    let lines = run_checks(&opts(&d, "enabled"));
    let l = line(&lines, "store-integrity");
    assert_eq!(l.status, Status::Fail, "{l:?}");
    assert!(l.hint.as_deref().unwrap().contains("backup"));
}

/// Issue 50: a host whose init is not systemd (a container, runit, s6, OpenRC) is
/// never sent to `systemctl`: doctor does not run it, and its line names the recipes
/// for the other supervisors instead.
#[test]
fn without_systemd_doctor_asks_no_systemctl_and_names_the_supervisor_recipes() {
    let d = Dir::new("doctor-nosd");
    let _sim = healthy(&d);
    let lines = run_checks(&Options {
        systemd_run_dir: d.path("no-run-systemd-system"),
        ..opts(&d, "masked")
    });
    let l = line(&lines, "systemd");
    assert_eq!(l.status, Status::Skip, "{l:?}");
    let said = format!("{} {}", l.detail, l.hint.as_deref().unwrap_or(""));
    assert!(said.contains("docs/supervisors.md"), "{l:?}");
    assert!(!said.contains("systemctl"), "{l:?}");
    assert!(
        !d.path("systemctl-masked.called").exists(),
        "systemctl was run on a host without systemd"
    );
    // Through the CLI, with the host's own systemctl whatever it is: no line says it.
    let r = std::process::Command::new(env!("CARGO_BIN_EXE_runner-manager"))
        .arg("--state-dir")
        .arg(d.state())
        .arg("doctor")
        .env(
            runner_manager::supervisor::SYSTEMD_RUN_DIR_ENV,
            d.path("no-run-systemd-system"),
        )
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&r.stdout);
    let sd = out
        .lines()
        .find(|l| l.contains(" systemd "))
        .unwrap_or_else(|| panic!("no systemd line in {out}"));
    assert!(
        sd.starts_with("skip") && sd.contains("docs/supervisors.md") && !sd.contains("systemctl"),
        "{sd}"
    );
}
