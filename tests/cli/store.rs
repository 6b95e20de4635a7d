//! Which commands make a store: a read on a missing one says so and makes nothing.

use crate::support::Dir;

/// Runs the binary on the state directory `dir`; its exit code and stderr.
fn run_at(dir: &std::path::Path, args: &[&str]) -> (Option<i32>, String) {
    let out = std::process::Command::new(crate::support::BIN)
        .arg("--state-dir")
        .arg(dir)
        .args(args)
        .env_remove("RUNNER_MANAGER_STATE_DIR")
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

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
        let (code, stderr) = run_at(&deep, args);
        assert_eq!(code, Some(12), "{args:?}: no-store: {stderr}");
        assert!(
            stderr.contains(&format!("no store at {}", deep.display())),
            "{args:?}: {stderr}"
        );
        assert!(!d.path("nonexistent").exists(), "{args:?} made a directory");
    }
    // The default state directory is no exception: an empty one has no store either.
    std::fs::create_dir_all(d.state()).unwrap();
    assert_eq!(d.run(&["status"]).code, 12);
    assert!(!d.state().join("state.db").exists());
    // A command that writes the books makes it.
    d.ok(&["host", "set", "capacity=3"]);
    d.ok(&["status"]);
}

/// Bad input changes nothing: a command that may make the store, refusing its
/// arguments on a fresh machine, leaves no store and no directory behind; on an
/// existing empty state directory, the directory stays and stays empty.
#[test]
fn a_refused_first_command_leaves_no_store_behind() {
    let d = Dir::new("refused-first");
    let deep = d.path("fresh/state");
    let refused: &[&[&str]] = &[
        &[
            "target",
            "add",
            "t",
            "--repo",
            "notarepo",
            "--token-file",
            "/nope",
        ],
        &["host", "set", "capacity=abc"],
        &["coordinator", "host", "add", "Bad Name"],
    ];
    for args in refused {
        let (code, stderr) = run_at(&deep, args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(
            !d.path("fresh").exists(),
            "{args:?} left {}",
            deep.display()
        );
    }
    std::fs::create_dir_all(d.state()).unwrap();
    assert_eq!(d.run(&["host", "set", "capacity=abc"]).code, 2);
    assert!(d.state().exists());
    assert_eq!(std::fs::read_dir(d.state()).unwrap().count(), 0);
    // Once the store exists, a refusal leaves it as it was.
    d.ok(&["host", "set", "capacity=3"]);
    assert_eq!(d.run(&["host", "set", "capacity=abc"]).code, 2);
    assert!(d.state().join("state.db").exists());
    let host = d.ok(&["host", "show"]).stdout;
    assert!(
        host.lines()
            .any(|l| l.split_whitespace().eq(["capacity", "3"])),
        "the store kept its capacity: {host}"
    );
}
