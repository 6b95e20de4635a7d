//! Which commands make a store: a read on a missing one says so and makes nothing.

use crate::support::Dir;

#[test]
fn reads_on_a_missing_store_exit_1_naming_it_and_create_nothing() {
    let d = Dir::new("no-store");
    let deep = d.path("nonexistent/deep/x");
    let reads: &[&[&str]] = &[
        &["status"],
        &["attempts"],
        &["attempt", "show", "1"],
        &["target", "list"],
        &["target", "show", "octo"],
        &["profile", "list"],
        &["profile", "show", "linux"],
        &["profile", "set", "linux", "max=2"],
        &["profile", "pause", "linux"],
        &["host", "show"],
        &["top"],
        &["coordinator", "status"],
        &["coordinator", "hosts"],
    ];
    for args in reads {
        let out = std::process::Command::new(crate::support::BIN)
            .arg("--state-dir")
            .arg(&deep)
            .args(*args)
            .env_remove("RUNNER_MANAGER_STATE_DIR")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains(&format!("no store at {}", deep.display())),
            "{args:?}: {stderr}"
        );
        assert!(!d.path("nonexistent").exists(), "{args:?} made a directory");
    }
    // The default state directory is no exception: an empty one has no store either.
    std::fs::create_dir_all(d.state()).unwrap();
    assert_eq!(d.run(&["status"]).code, 1);
    assert!(!d.state().join("state.db").exists());
    // A command that writes the books makes it.
    d.ok(&["host", "set", "capacity=3"]);
    d.ok(&["status"]);
}
