//! `daemon --config FILE`: the daemon follows a description file, applied at start,
//! when it changes and on SIGHUP; a file it refuses is logged and changes nothing.

use super::support::*;
use runner_manager::store::Store;

fn described(w: &World, active: bool, extra: &str) -> String {
    format!(
        "[profiles.p]\ntarget = \"t\"\nlabels = \"p\"\nmax = 2\nactive = {active}\nrunner_dir = \"{}\"\n{extra}",
        w.runner_dir.display()
    )
}

#[test]
fn the_daemon_follows_its_file_and_keeps_the_store_when_it_refuses_one() {
    let mut w = World::new("config-file", 2);
    w.add_target("t", "acme/app", true);
    let file = w.dir.join("host.toml");
    std::fs::write(&file, described(&w, false, "")).unwrap();
    let job = w.enqueue("acme/app", "j1", &["p"], 100);
    w.start_daemon_with(&["--config", &file.display().to_string()]);
    // Applied at start: the profile is there, paused, so the job waits.
    wait_until(SETTLE, "the file applied at start", || {
        w.store().profile("p").is_ok_and(|p| !p.active)
    });
    assert!(w.attempts().is_empty());

    // The file changes: the profile is resumed, and the job is served.
    std::fs::write(&file, described(&w, true, "")).unwrap();
    let served = w.finished(job);
    assert_eq!(served.conclusion.as_deref(), Some("success"), "{served:?}");
    let revision = w.store().profile("p").unwrap().revision;
    assert!(
        w.daemon_logs().contains("config_change"),
        "{}",
        w.daemon_logs()
    );

    // A file with a mistyped key: refused, logged, the store as it was.
    std::fs::write(&file, described(&w, true, "maxx = 3\n")).unwrap();
    wait_until(SETTLE, "the refusal logged", || {
        w.daemon_logs().contains("config_refused")
    });
    let logs = w.daemon_logs();
    let line = logs.lines().find(|l| l.contains("config_refused")).unwrap();
    assert!(
        line.contains("profiles.p.maxx") && line.contains("max"),
        "{line}"
    );
    assert_eq!(w.store().profile("p").unwrap().revision, revision);

    // A hand edit stays until SIGHUP, which applies the file again.
    std::fs::write(&file, described(&w, true, "")).unwrap();
    wait_until(SETTLE, "the mended file seen", || {
        w.daemon_logs().contains("config_unchanged")
    });
    w.cli_ok(&["profile", "set", "p", "max=1"]);
    // SAFETY: kill(2) on the daemon this test started.
    unsafe { libc::kill(w.daemon_pid() as i32, libc::SIGHUP) };
    wait_until(SETTLE, "SIGHUP applied the file over the hand edit", || {
        w.store().profile("p").is_ok_and(|p| p.max_capacity == 2)
    });
    let logs = w.daemon_logs();
    assert!(
        logs.lines()
            .any(|l| l.contains("config_applied") && l.contains("reason=SIGHUP")),
        "{logs}"
    );
    assert!(w.stop_daemon().success());
    w.check_invariants(&["acme/app"]);
}
