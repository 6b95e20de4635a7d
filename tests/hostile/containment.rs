//! The daemon's own walls, tested as any user: what the orphan sweep refuses to
//! follow, a start that fails for a host reason holding the profile instead of looping
//! (and costing GitHub nothing), secret files refused, private files, and isolation
//! `none` said plainly.

use crate::support::*;
use runner_manager::domain::{DemandSource, ReasonKind, ScalePolicy};
use runner_manager::store::Store;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::Duration;

#[test]
fn the_sweep_never_follows_a_planted_link_to_kill_or_delete() {
    let mut w = World::new("hostile-sweep-link", 2);
    w.add_target("octo", "octo/app", true);
    w.add_profile(ProfileSpec::new("linux", "octo", &["linux"]));
    // Outside the state directory: a directory with a process working in it.
    let outside = std::env::temp_dir().join(format!("rm-outside-{}", std::process::id()));
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("keep"), "mine").unwrap();
    let mut bystander = Command::new("sleep")
        .arg("300")
        .current_dir(&outside)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    // What a job running as the daemon's own user (isolation none) could plant.
    let attempts = w.dir.join("attempts");
    std::fs::create_dir_all(&attempts).unwrap();
    std::os::unix::fs::symlink(&outside, attempts.join("77")).unwrap();
    let out = w.cli(&["daemon", "--once"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let alive = bystander.try_wait().unwrap().is_none();
    let _ = bystander.kill();
    let _ = bystander.wait();
    assert!(
        alive,
        "the sweep killed a process outside the state directory"
    );
    assert!(
        outside.join("keep").exists(),
        "the sweep deleted through the link"
    );
    assert!(
        std::fs::symlink_metadata(attempts.join("77")).is_err(),
        "the planted link is still there"
    );
    let _ = std::fs::remove_dir_all(&outside);
}

#[test]
fn a_start_that_fails_for_a_host_reason_holds_the_profile_and_costs_github_nothing() {
    let mut w = World::new("hostile-hold", 2);
    w.add_target("octo", "octo/app", true);
    w.add_profile(ProfileSpec::new("linux", "octo", &["linux"]));
    w.cli_ok(&["profile", "set", "linux", "run_as=rm-no-such-user"]);
    w.start_daemon();
    w.enqueue("octo/app", "build", &["linux"], 100);
    let mut status = serde_json::Value::Null;
    wait_until(SETTLE, "the profile's starts are held", || {
        status = w.status_json();
        status["profiles"][0]["limiting"]
            .as_str()
            .is_some_and(|e| e.contains("starts held"))
    });
    let why = status["profiles"][0]["limiting"].as_str().unwrap();
    assert!(
        why.starts_with("not_reconciling (unfit: starts held") && why.contains("rm-no-such-user"),
        "{why}"
    );
    // Two more seconds of passes: no second attempt, and never a JIT config.
    let seen = w.attempts().len();
    assert!(!poll_until(Duration::from_secs(2), || w.attempts().len() > seen));
    assert_eq!(seen, 1, "{:?}", w.outcomes());
    let a = &w.attempts()[0];
    let why = a.reason.as_ref().unwrap();
    assert_eq!(why.kind(), ReasonKind::Host, "{a:?}");
    assert!(why.detail().unwrap().starts_with("run_as"), "{a:?}");
    let jit = w
        .log()
        .iter()
        .filter(|e| e.endpoint.ends_with("/generate-jitconfig"))
        .count();
    assert_eq!(jit, 0, "a host failure asked GitHub for a JIT config");
    w.stop_daemon();
}

#[test]
fn token_files_that_others_can_read_or_that_are_not_files_are_refused() {
    let w = World::new("hostile-token-modes", 1);
    let open = w.dir.join("open.token");
    std::fs::write(&open, "ghp_abc").unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = w.cli(&[
        "target",
        "add",
        "octo",
        "--repo",
        "octo/app",
        "--token-file",
        open.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--token-file") && err.contains(&format!("chmod 600 {}", open.display())),
        "{err}"
    );
    assert!(!err.contains("ghp_abc"), "{err}");
    assert!(
        w.store().targets().unwrap().is_empty(),
        "something was written"
    );
    // A FIFO is refused at once, not read until someone writes to it.
    let fifo = w.dir.join("fifo.token");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let started = std::time::Instant::now();
    let out = w.cli(&[
        "target",
        "add",
        "octo",
        "--repo",
        "octo/app",
        "--token-file",
        fifo.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("FIFO"));
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn what_the_daemon_writes_is_private_and_isolation_none_is_said_plainly() {
    let mut w = World::new("hostile-modes", 2);
    w.add_target("octo", "octo/app", true);
    w.add_profile(ProfileSpec::new("linux", "octo", &["linux"]));
    w.start_daemon();
    let id = w.enqueue("octo/app", "build", &["linux"], 100);
    wait_until(SETTLE, "the job is served", || {
        w.sim
            .jobs()
            .iter()
            .any(|j| j.id == id && j.conclusion.is_some())
    });
    let status = w.cli_ok(&["status"]);
    let line = status
        .lines()
        .find(|l| l.starts_with("isolation"))
        .unwrap_or_else(|| panic!("no isolation line in status:\n{status}"));
    assert!(line.contains("none: runner_uids is not set"), "{line}");
    let log = std::fs::read_to_string(w.daemon_log_path(1)).unwrap();
    assert!(
        log.lines()
            .any(|l| l.contains("daemon_started") && l.contains("isolation")),
        "the start line does not say the isolation:\n{log}"
    );
    for f in ["state.db", "state.db-wal", "logs"] {
        let p = w.dir.join(f);
        if let Ok(m) = std::fs::metadata(&p) {
            assert_eq!(
                m.permissions().mode() & 0o077,
                0,
                "{} is readable by others",
                p.display()
            );
        }
    }
    for entry in std::fs::read_dir(w.dir.join("logs")).unwrap() {
        let m = entry.unwrap().metadata().unwrap();
        assert_eq!(m.permissions().mode() & 0o077, 0);
    }
    w.wait_settled(&["octo/app"]);
    w.check_invariants(&["octo/app"]);
    // With isolation none, no attempt had a runner uid of its own.
    for a in w.attempts() {
        assert!(a.runner_uid.is_none());
    }
}

#[test]
fn an_organizations_public_repositories_are_not_served_unless_a_profile_allows_it() {
    let mut w = World::new("hostile-org-public", 2);
    w.add_org_target(
        "corp",
        "corp",
        &[("private-app", false), ("public-app", true)],
    );
    w.add_profile(ProfileSpec::new("linux", "corp", &["linux"]));
    w.start_daemon();
    let private = w.enqueue("corp/private-app", "private-build", &["linux"], 100);
    let public = w.enqueue("corp/public-app", "public-build", &["linux"], 100);
    wait_until(SETTLE, "the private repository's job is served", || {
        w.sim
            .jobs()
            .iter()
            .any(|j| j.id == private && j.conclusion.is_some())
    });
    let mut status = serde_json::Value::Null;
    wait_until(SETTLE, "status says why the public job waits", || {
        status = w.status_json();
        status["profiles"][0]["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("public repositories"))
    });
    // Several passes later the public job still waits, and nothing ran for it.
    assert!(!poll_until(Duration::from_secs(3), || {
        w.sim
            .jobs()
            .iter()
            .any(|j| j.id == public && j.runner_name.is_some())
    }));
    assert_eq!(w.attempts().len(), 1, "{:?}", w.outcomes());
    // A profile that says allow_public=true serves it.
    w.cli_ok(&["profile", "set", "linux", "allow_public=true"]);
    wait_until(SETTLE, "the public job is served once allowed", || {
        w.sim
            .jobs()
            .iter()
            .any(|j| j.id == public && j.conclusion.is_some())
    });
    w.wait_settled(&["corp/private-app", "corp/public-app"]);
    w.check_invariants(&["corp/private-app", "corp/public-app"]);
}

#[test]
fn a_scale_set_whose_runner_group_admits_public_repositories_starts_nothing() {
    let mut w = World::new("hostile-group-public", 2);
    w.add_org_target("corp", "corp", &[("app", false)]);
    w.sim.add_public_runner_group("corp", "open-to-forks");
    let store = w.store();
    let host = store.host_or_create().unwrap();
    let mut p = ScalePolicy::new("ss-open", "corp", &host.id);
    p.set_labels("--labels", &["ss-open".to_string()], &host.os, &host.arch)
        .unwrap();
    p.max_capacity = 2;
    p.runner_dir = Some(w.runner_dir.clone());
    p.demand = DemandSource::Scaleset;
    p.runner_group = Some("open-to-forks".into());
    store.add_profile(&p).unwrap();
    w.start_daemon();
    let mut status = serde_json::Value::Null;
    wait_until(
        SETTLE,
        "the profile is unfit for its group's setting",
        || {
            status = w.status_json();
            status["profiles"][0]["limiting"]
                .as_str()
                .is_some_and(|l| l.contains("allows public repositories"))
        },
    );
    w.enqueue("corp/app", "build", &["ss-open"], 100);
    assert!(!poll_until(Duration::from_secs(2), || !w
        .attempts()
        .is_empty()));
    w.stop_daemon();
}

/// Regression: `run_as` could not work. Roots were never given to the user and sat
/// under the daemon's 0700 state directory, so every spawn failed with EACCES (and
/// looped). With isolation none and a named user, the job runs as that user in a root
/// that is its own.
#[test]
fn a_profiles_run_as_user_runs_its_jobs() {
    let test = "a_profiles_run_as_user_runs_its_jobs";
    let block = match crate::users::try_runner_uids(1) {
        Ok(b) => b,
        Err(why) => {
            crate::users::skip(test, &why);
            return;
        }
    };
    let user = block.user(0);
    let mut w = World::new("hostile-run-as", 2);
    w.add_target("octo", "octo/app", true);
    w.add_profile(ProfileSpec::new("linux", "octo", &["linux"]));
    w.cli_ok(&["profile", "set", "linux", &format!("run_as={}", user.name)]);
    w.start_daemon();
    let id = w.sim.enqueue_script_job(
        "octo/app",
        "as-user",
        &["self-hosted", "linux"],
        "id -un; touch ../_work/mine && echo root-writable",
    );
    let mut job = None;
    wait_until(SETTLE, "the job completes", || {
        job = w
            .sim
            .jobs()
            .into_iter()
            .find(|j| j.id == id && j.conclusion.is_some());
        job.is_some()
    });
    let out = job.unwrap().output.unwrap_or_default();
    assert!(out.lines().any(|l| l == user.name), "{out}");
    assert!(out.contains("root-writable"), "{out}");
    w.wait_settled(&["octo/app"]);
    w.check_invariants(&["octo/app"]);
}
