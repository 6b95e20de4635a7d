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
        &["usage"],
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
        &["backup", "/nonexistent-backup.db"],
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

/// Issue 33, item 4: a store with one page overwritten past the schema still opens,
/// and writes to it used to succeed. Every command that writes checks the store first
/// (`PRAGMA quick_check`): exit 8 naming the file, and not a byte of it changes.
#[test]
fn writes_to_a_damaged_store_exit_8_and_change_nothing() {
    use runner_manager::domain::AttemptState;
    use runner_manager::store::{HistorySeed, SqliteStore, Store};
    let d = crate::support::seeded("damaged");
    {
        // A history, so the books span many pages past the schema's. Closing the
        // last connection moves the WAL into the file.
        let s = SqliteStore::open(&d.state()).unwrap();
        let h = s.host_or_create().unwrap();
        s.seed_history(&HistorySeed {
            host_id: &h.id,
            target: "octo",
            profiles: &["linux"],
            n: 2000,
            open: 0,
            closed: AttemptState::Destroying,
            base: 0,
        })
        .unwrap();
    }
    let db = d.state().join("state.db");
    let mut bytes = std::fs::read(&db).unwrap();
    let page = match u16::from_be_bytes([bytes[16], bytes[17]]) {
        1 => 65536,
        n => usize::from(n),
    };
    let pages = bytes.len() / page;
    assert!(
        pages > 8,
        "{pages} pages: too few to damage one past the schema"
    );
    let victim = pages / 2;
    bytes[victim * page..(victim + 1) * page].fill(0xA5);
    std::fs::write(&db, &bytes).unwrap();
    let before = crate::support::snapshot(&d.state());
    // Opening reads only the schema: a read that does not touch the page answers.
    d.ok(&["host", "show"]);
    assert!(crate::support::snapshot(&d.state()) == before);
    let writes: &[&[&str]] = &[
        &["host", "set", "capacity=5"],
        &["coordinator", "host", "add", "h2"],
        &["profile", "set", "linux", "max=2"],
        &["profile", "pause", "linux"],
        &["target", "rm", "octo"],
        &["drain"],
        &["update", "--check"],
    ];
    for args in writes {
        let r = d.run(args);
        assert_eq!(r.code, 8, "{args:?}: {}", r.stderr);
        assert!(
            r.stderr.contains("corrupt (quick_check")
                && r.stderr.contains(&db.display().to_string()),
            "{args:?}: {}",
            r.stderr
        );
        assert!(
            crate::support::snapshot(&d.state()) == before,
            "{args:?} changed the store"
        );
    }
}

/// Issue 33: what a job sends reaches the operator's terminal. A job named with a
/// right-to-left override and an escape sequence is shown escaped by `attempts`, in
/// text and in JSON (whose value is still the job's name).
#[test]
fn a_jobs_name_reaches_the_terminal_escaped() {
    use runner_manager::domain::AttemptState;
    use runner_manager::store::{AttemptFilter, HistorySeed, SqliteStore, Store};
    let d = crate::support::seeded("bidi");
    let name = "build\u{202E}exe.txt\u{1b}]0;owned\u{7}";
    {
        let s = SqliteStore::open(&d.state()).unwrap();
        let h = s.host_or_create().unwrap();
        s.seed_history(&HistorySeed {
            host_id: &h.id,
            target: "octo",
            profiles: &["linux"],
            n: 1,
            open: 0,
            closed: AttemptState::Destroying,
            base: 0,
        })
        .unwrap();
        let mut a = s.attempts(&AttemptFilter::default()).unwrap().remove(0);
        a.job_name = Some(name.into());
        s.save_attempt(&a).unwrap();
    }
    let hazard = |c: char| c.is_control() && c != '\n' || ('\u{202A}'..='\u{202E}').contains(&c);
    let text = d.ok(&["attempts"]).stdout;
    assert!(!text.chars().any(hazard), "{text:?}");
    assert!(
        text.contains("build\\u{202e}exe.txt\\u{1b}]0;owned\\u{7}"),
        "{text}"
    );
    let json = d.ok(&["attempts", "--json"]).stdout;
    assert!(!json.chars().any(hazard), "{json:?}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(v.to_string().contains("\\u001b]0;owned"), "{v}");
    let back = serde_json::to_string(&v).unwrap();
    assert!(
        back.contains('\u{202E}'),
        "the JSON value is the job's name: {back}"
    );
}

/// `backup FILE` writes a whole copy that opens as a store; a FILE that exists or
/// whose directory does not is refused (exit 2), and nothing is written.
#[test]
fn backup_writes_a_whole_copy_and_refuses_what_it_would_overwrite() {
    let d = crate::support::seeded("backup");
    let copy = d.path("copy.db");
    let r = d.ok(&["backup", copy.to_str().unwrap()]);
    assert!(r.stdout.contains("backed up the store to"), "{}", r.stdout);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&copy).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "a backup is as private as the store");
    // The copy is a store: restored as a state directory, it shows the target.
    let restored = d.path("restored");
    std::fs::create_dir_all(&restored).unwrap();
    std::fs::copy(&copy, restored.join("state.db")).unwrap();
    let listed = std::process::Command::new(crate::support::BIN)
        .arg("--state-dir")
        .arg(&restored)
        .args(["target", "list"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&listed.stdout).contains("octo"));

    let before = crate::support::snapshot(&d.state());
    let copy_bytes = std::fs::read(&copy).unwrap();
    for (file, why) in [
        (copy.clone(), "already exists"),
        (d.path("no-such-dir/copy.db"), "is not a directory"),
    ] {
        let r = d.run(&["backup", file.to_str().unwrap()]);
        assert_eq!(r.code, 2, "{file:?}: {}", r.stderr);
        assert!(
            r.stderr.contains("invalid FILE") && r.stderr.contains(why),
            "{}",
            r.stderr
        );
    }
    assert_eq!(
        std::fs::read(&copy).unwrap(),
        copy_bytes,
        "the old backup stays"
    );
    assert!(!d.path("no-such-dir").exists());
    assert_eq!(crate::support::snapshot(&d.state()), before);
}

/// A user other than root on the default state directory is told where a system
/// daemon's store is: the packaged service's is root's, not theirs.
#[test]
fn a_user_on_the_default_state_directory_is_told_of_the_system_store() {
    use std::os::unix::process::CommandExt;
    let d = Dir::new("user-default");
    let home = d.path("home");
    std::fs::create_dir_all(&home).unwrap();
    let nobody = 65534;
    std::os::unix::fs::chown(&home, Some(nobody), Some(nobody)).unwrap();
    // The test's own directory is root's 0700: open it to the user's search.
    let mut p = home.parent();
    while let Some(dir) = p.filter(|p| p.starts_with(d.path(""))) {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir).unwrap().permissions().mode();
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode | 0o011)).unwrap();
        p = dir.parent();
    }
    let out = std::process::Command::new(crate::support::BIN)
        .arg("status")
        .env_remove("RUNNER_MANAGER_STATE_DIR")
        .env_remove("XDG_STATE_HOME")
        .env("HOME", &home)
        .uid(nobody)
        .gid(nobody)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(12), "{stderr}");
    assert!(
        stderr.contains(".local/state/runner-manager")
            && stderr.contains("--state-dir /var/lib/runner-manager"),
        "{stderr}"
    );
    // With the directory named, the hint is not given: the user chose it.
    let (code, stderr) = run_at(&d.path("elsewhere"), &["status"]);
    assert_eq!(code, Some(12));
    assert!(!stderr.contains("/var/lib/runner-manager"), "{stderr}");
}
